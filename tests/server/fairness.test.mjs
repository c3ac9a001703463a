// Fairness (issue 12, item 1): a session whose steps are heavy (a big grab on a big volume,
// dragged far every frame, propagation allowed its most passes) must not slow the sessions
// beside it. A small session's driver drags alone first, then beside the heavy one; the
// neighbour keeps at least 90% of its frame rate and its p99 input-to-frame latency stays
// within two frame periods. Two workers (this machine has two cores); --rate 30.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { startServer, api, Client, wsUrl, tick, latencies, summary, metric, withTimeout } from './harness.mjs';

const RATE = 30, PERIOD_MS = 1000 / RATE, DRAG_MS = 3000;
let srv;
before(async () => {
  srv = await startServer(['--workers', '2', '--rate', String(RATE), '--max-elements', '2000000']);
});
after(async () => {
  const code = await srv.stop();
  assert.equal(code, 0, `server exit ${code}; stderr:\n${srv.stderr()}`);
});

const make = async (body) => {
  const r = await api(srv.base, 'POST', '/api/sessions', body);
  assert.equal(r.status, 201, r.text);
  return r.json;
};

// A driver dragging a small dent back and forth at the frame rate for ms: the frames it
// received in that time (every one a change) and its input-to-frame latencies.
async function drag(s, ms) {
  const d = await new Client(wsUrl(s, s.control_token), { decode: false }).open();
  await d.until(() => d.texts.some((t) => t.type === 'welcome'), 10000, 'welcome');
  d.send({ type: 'grab', seq: 1, point: [8, 8, 4], radius: 2, space: 'lattice' });
  const sent = new Map();
  let seq = 1;
  const t0 = performance.now();
  while (performance.now() - t0 < ms) {
    sent.set(++seq, performance.now());
    d.send({ type: 'move', seq, point: [8, 8 + 2 * Math.sin(seq / 5), 4], space: 'lattice' });
    await tick(PERIOD_MS);
  }
  const t1 = performance.now();
  await d.until(() => d.frames.some((f) => f.lastSeq >= seq), 10000, 'the last move echoed');
  const frames = d.frames.filter((f) => f.t >= t0 && f.t <= t1).length;
  const lat = summary(latencies(d, sent));
  d.send({ type: 'release', seq: ++seq });
  await d.close();
  return { fps: frames / ((t1 - t0) / 1000), lat };
}

test('a heavy session beside a small one: the small one keeps its frame rate and latency', { timeout: 120000 }, async () => {
  // Slots 0, 1, 2: the heavy one, a filler, the small one (slot 2 shared a worker with slot
  // 0 when sessions were dealt to workers by slot).
  const heavy = await make({ dims: [96, 96, 64] });
  const filler = await make({ dims: [8, 8, 8] });
  const small = await make({ dims: [16, 16, 8] });
  const alone = await drag(small, DRAG_MS);

  const h = await new Client(wsUrl(heavy, heavy.control_token), { decode: false }).open();
  await h.until(() => h.texts.some((t) => t.type === 'welcome'), 10000, 'welcome');
  // As heavy as the server lets a driver make it: its caps on passes and iterations (past
  // them set_params is refused, below), the wave cut at --max-wave elements a frame.
  h.send({ type: 'set_params', seq: 1, params: { max_passes: 1024, relax_iterations: 8 } });
  h.send({ type: 'grab', seq: 2, point: [48, 48, 32], radius: 20, space: 'lattice' });
  let hs = 2, running = true;
  const heavyLoop = (async () => {
    // Far every time (each step propagates across the volume); bounded: 5 minutes at most.
    for (let k = 0; running && k < 300 * RATE; k++) {
      h.send({ type: 'move', seq: ++hs, point: [48, 48 + (k % 2 ? 30 : -30), 32], space: 'lattice' });
      await tick(PERIOD_MS);
    }
  })();
  let heavyStepMs, beside, heavyStepMsAfter;
  try {
    await h.until(() => h.frames.length >= 2, 30000, 'the heavy session stepping');
    heavyStepMs = await metric(srv.base, 'softcast_session_step_ms', heavy.id);
    beside = await drag(small, DRAG_MS);
    // Past the caps, the driver hears which one and nothing changes.
    h.send({ type: 'set_params', seq: ++hs, params: { max_passes: 100000 } });
    h.send({ type: 'set_params', seq: ++hs, params: { relax_iterations: 100 } });
    await h.until(() => h.texts.filter((t) => t.type === 'error').length >= 2, 30000, 'both refused');
    const refusals = h.texts.filter((t) => t.type === 'error');
    assert.match(refusals[0].detail, /max_passes 100000: this server bounds a frame's work at max_passes 1024 \(--max-passes\)/);
    assert.match(refusals[1].detail, /relax_iterations 100: .* at relax_iterations 8 \(--max-relax-iterations\)/);
    heavyStepMsAfter = await metric(srv.base, 'softcast_session_step_ms', heavy.id);
  } finally {
    running = false; // the heavy driver stops whatever failed
    await heavyLoop;
  }
  await h.close();
  console.log(`# fairness: the small session alone ${alone.fps.toFixed(1)} frames/s, p99 ${alone.lat.p99.toFixed(1)} ms; ` +
    `beside the heavy one (its steps ${heavyStepMs.toFixed(0)} and ${heavyStepMsAfter.toFixed(0)} ms) ` +
    `${beside.fps.toFixed(1)} frames/s, p99 ${beside.lat.p99.toFixed(1)} ms`);
  assert.ok(Math.max(heavyStepMs, heavyStepMsAfter) > 2 * PERIOD_MS, `the heavy session is not heavy: ${heavyStepMs} ms a step`);
  assert.ok(beside.fps >= 0.9 * alone.fps, `frames/s ${beside.fps} beside, ${alone.fps} alone`);
  assert.ok(beside.lat.p99 <= 2 * PERIOD_MS, `p99 ${beside.lat.p99} ms beside the heavy session`);
  for (const s of [heavy, filler, small])
    await api(srv.base, 'DELETE', `/api/sessions/${s.id}`, undefined, { authorization: `Bearer ${s.control_token}` });
});

// Many busy sessions (issue 14, item 2): 16 sessions dragged at once on two workers, asked
// for more frames than the server can step (240 a second each), so every session competes
// for the cores. The scheduler must share them out: each session's frame rate within 25% of
// every other's, none starving. Measured by the C load generator (build/softcast-load), which
// reports the slowest and the fastest session's frames per second per client.
test('16 busy sessions: every session gets a frame rate within 25% of the others', { timeout: 120000 }, async () => {
  const busy = await startServer(['--workers', '2', '--rate', '240', '--max-elements', '2000000']);
  const tool = process.env.SOFTCAST_LOAD ?? new URL('../../build/softcast-load', import.meta.url).pathname;
  let r;
  try {
    const p = spawn(tool, ['--url', `${busy.base}/`, '--sessions', '16', '--clients', '2', '--seconds', '4',
      '--rate', '120', '--dims', '24x24x16'], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '', err = '';
    p.stdout.on('data', (d) => { out += d; });
    p.stderr.on('data', (d) => { err += d; });
    const [code] = await withTimeout(once(p, 'exit'), 60000, 'softcast-load');
    assert.equal(code, 0, err);
    r = JSON.parse(out.trim().split('\n').at(-1));
  } finally {
    assert.equal(await busy.stop(), 0, busy.stderr());
  }
  console.log(`# 16 busy sessions: ${r.fps_session_min} to ${r.fps_session_max} frames/s per client, p99 ${r.latency_ms_p99} ms`);
  assert.equal(r.errors, 0, JSON.stringify(r));
  // They competed: no session got the rate it asked for (else this shows nothing).
  assert.ok(r.fps_session_max < 0.8 * 240, `not busy: ${JSON.stringify(r)}`);
  assert.ok(r.fps_session_min >= 0.75 * r.fps_session_max, `a session starved: ${JSON.stringify(r)}`);
});
