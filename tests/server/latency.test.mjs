// Input-to-frame latency, as a client sees it: the driver drags at 30 events a second and
// times each event from its sending to the arrival of the first frame that includes it
// (frames echo the last event seq they include), at the driver and at a viewer.
//
// The bounds: p99 under 500 ms and no event later than 1 s, over a 4 s drag. Measured on
// the shared 2-core machine with the ASan build: p50 50-65 ms, p99 130-280 ms, max under
// 300 ms; but with other suites and a busy loop beside it (load average 11) one drag in two
// saw the server starved of CPU for 0.6-2 s. So a drag that misses the bounds is tried
// again, three drags at most, and one must meet them. A server that holds frames does so
// in every drag (a worker that stalls for 1.2 s every 100 frames stalls in each 4 s drag),
// so the retries forgive the machine, not the bug.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, api, Client, wsUrl, latencies, summary, metric, tick } from './harness.mjs';

const P99_MS = 500, MAX_MS = 1000, DRAG_MS = 4000, ATTEMPTS = 3;

test('input-to-frame latency: p99 under 500 ms, no event later than 1 s', async () => {
  const srv = await startServer(['--dims', '24x24x16']);
  try {
    const s = (await api(srv.base, 'POST', '/api/sessions', { dims: [40, 40, 24] })).json;
    const driver = await new Client(wsUrl(s, s.control_token)).open();
    const viewer = await new Client(wsUrl(s, s.view_token)).open();
    for (const c of [driver, viewer]) await c.until(() => c.frames.length > 0, 10000, 'first keyframe');
    let seq = 1;
    const report = [];
    for (let attempt = 1; attempt <= ATTEMPTS; attempt++) {
      const sent = new Map([[seq, performance.now()]]);
      driver.send({ type: 'grab', seq: seq++, point: [20, 33, 12], radius: 2.5, space: 'lattice' });
      for (const t0 = performance.now(); performance.now() - t0 < DRAG_MS; seq++) {
        sent.set(seq, performance.now());
        driver.send({ type: 'move', seq, point: [20, 33 + 3 * Math.sin(seq / 10), 12], space: 'lattice' });
        await tick(33);
      }
      const last = seq - 1;
      for (const c of [driver, viewer]) await c.until(() => c.frames.some((f) => f.lastSeq >= last), 10000, 'last move');
      let ok = true;
      for (const [who, c] of [['driver', driver], ['viewer', viewer]]) {
        const lat = summary(latencies(c, sent));
        const line = `drag ${attempt} ${who}: ${lat.n} events; latency ms p50 ${lat.p50.toFixed(1)} ` +
          `p99 ${lat.p99.toFixed(1)} max ${lat.max.toFixed(1)}`;
        console.log(`# ${line}`);
        report.push(line);
        assert.equal(lat.n, sent.size, `${who}: every event reached a frame`);
        ok &&= lat.p99 < P99_MS && lat.max < MAX_MS;
      }
      if (ok) break;
      assert.ok(attempt < ATTEMPTS, `no drag met p99 < ${P99_MS} ms and max < ${MAX_MS} ms:\n${report.join('\n')}`);
    }
    for (const c of [driver, viewer]) assert.equal(c.errors, 0);
    // The server's own figure (an event's arrival to its frame's publication, mean).
    const mean = await metric(srv.base, 'softcast_session_event_to_frame_ms', s.id);
    console.log(`# server: event to frame ${mean} ms (mean)`);
    assert.ok(mean > 0 && mean < P99_MS, `softcast_session_event_to_frame_ms ${mean}`);
    await driver.close();
    await viewer.close();
  } finally {
    assert.equal(await srv.stop(), 0, srv.stderr());
  }
});
