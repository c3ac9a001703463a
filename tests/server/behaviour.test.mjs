// softcast-server behaviour under load and at its limits.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { startServer, api, Client, wsUrl, latencies, summary, metric, tick, quiet, withTimeout } from './harness.mjs';

let srv;
before(async () => {
  srv = await startServer(['--dims', '24x24x16', '--max-sessions', '8', '--max-clients-per-session', '6',
    '--max-elements', '100000', '--max-events-per-s', '100']);
});
after(async () => {
  const code = await srv.stop();
  assert.equal(code, 0, `server exit ${code}; stderr:\n${srv.stderr()}`);
});

const lastState = (c) => c.texts.filter((t) => t.type === 'state').at(-1);
const maxAbsDiff = (a, b) => a.reduce((m, v, i) => Math.max(m, Math.abs(v - b[i])), 0);

// Input-to-frame latency bounds (latency.test.mjs says how they were chosen).
const P99_MS = 500, MAX_MS = 1000;

// What loopback can hold for a client that reads nothing: the server's socket send buffer
// grows up to tcp_wmem's maximum, the client's receive buffer stays near tcp_rmem's default
// (4 MiB + 128 KiB on Debian; 3.2 MB measured here). More than that must go through the
// stuck client's socket before the server's own queue for it can show.
function loopbackHoldsBytes() {
  const max = (f, i) => Number(readFileSync(`/proc/sys/net/ipv4/${f}`, 'utf8').trim().split(/\s+/)[i]);
  try { return max('tcp_wmem', 2) + max('tcp_rmem', 1); } catch { return 8 << 20; }
}

// A session whose every frame is a keyframe (96x96x64: 215 KB each), so that its stream
// overflows the socket buffers of a client that reads nothing; and a driver that drags it
// with small moves, 8 a second. push(readers, bytes) drags until the first of `readers` has
// had `bytes` more, then pauses the session and waits for quiet, so that no frame is in
// flight when it counts: it returns the bytes the server has sent to all but the readers.
async function bigStream(t, clientsBeforeDrag) {
  const server = await startServer(['--dims', '24x24x16', '--keyframe-every', '1']);
  t.after(async () => assert.equal(await server.stop(), 0, server.stderr()));
  const s = (await api(server.base, 'POST', '/api/sessions', { dims: [96, 96, 64] })).json;
  const driver = await new Client(wsUrl(s, s.control_token), { decode: false }).open();
  const others = [];
  for (const role of clientsBeforeDrag) others.push(await new Client(wsUrl(s, s[`${role}_token`]), { decode: false }).open());
  for (const c of [driver, ...others]) await c.until(() => c.frames.length > 0, 10000, 'first keyframe');
  const sent = new Map(), t0 = performance.now();
  let seq = 1;
  driver.send({ type: 'grab', seq: seq++, point: [48, 79, 32], radius: 2, space: 'lattice' });
  const push = async (readers, bytes) => {
    const until = readers[0].bytes + bytes;
    if (seq > 2) driver.send({ type: 'resume', seq: seq++ });
    while (readers[0].bytes < until) {
      assert.ok(performance.now() - t0 < 60000, `${readers[0].bytes} bytes in 60 s`);
      sent.set(seq, performance.now());
      driver.send({ type: 'move', seq, point: [48, 79 + Math.sin(seq / 3), 32], space: 'lattice' });
      seq++;
      await tick(125);
    }
    for (const c of readers) await c.until(() => c.frames.some((f) => f.lastSeq === seq - 1), 10000, 'last move');
    driver.send({ type: 'pause', seq: seq++ });
    await quiet(readers, 300);
    const total = await metric(server.base, 'softcast_session_bytes_sent_total', s.id);
    return total - readers.reduce((n, c) => n + c.bytes, 0);
  };
  // Fill the socket of a client that reads nothing: push more than loopback holds, then 2 MB
  // at a time until it is sent at most one frame more (two more tries, should loopback
  // hold more than estimated). Returns what it had been sent before and after the last 2 MB.
  const fill = async (readers) => {
    let full = await push(readers, loopbackHoldsBytes() + (2 << 20)), later;
    for (let i = 0; i < 3; i++) {
      later = await push(readers, 2 << 20);
      if (later - full <= Math.max(...readers[0].frames.map((f) => f.bytes))) break;
      full = later;
    }
    return { full, later };
  };
  return { server, s, driver, others, sent, fill, seconds: () => (performance.now() - t0) / 1000, seq: () => seq };
}

test('a client that never reads does not stall the others, and the server holds at most a frame for it', async (t) => {
  const { server, s, driver, others: [viewer, stuck], sent, fill, seconds, seq } = await bigStream(t, ['view', 'view']);
  stuck.ws._socket.pause(); // reads nothing from now on
  const holds = loopbackHoldsBytes();
  const { full, later } = await fill([viewer, driver]);
  const lat = summary(latencies(viewer, sent));
  const maxFrame = Math.max(...viewer.frames.map((f) => f.bytes));
  const peak = await metric(server.base, 'softcast_session_backlog_bytes_peak', s.id);
  console.log(`# ${sent.size} moves in ${seconds().toFixed(1)} s; viewer ${viewer.frames.length} frames ` +
    `${viewer.bytes} B (largest ${maxFrame}); sent to the stuck client ${full} B, then ${later - full} B more ` +
    `(loopback holds about ${holds}); backlog peak ${peak} B; viewer latency ms p50 ${lat.p50.toFixed(0)} ` +
    `p99 ${lat.p99.toFixed(0)} max ${lat.max.toFixed(0)}`);
  // Once its socket is full, the stuck client is sent nothing more while the viewer gets
  // 2 MB: a frame at most, when the kernel moves a little from one buffer to the other.
  assert.ok(later - full <= 2 * maxFrame, `the stuck client was sent ${later - full} B more after its socket filled`);
  // What the server holds for one client is one frame at most (latest-wins, no queue).
  assert.ok(peak <= maxFrame + 4096, `a client's backlog reached ${peak} B (largest frame ${maxFrame} B)`);
  // The others kept their pace. Every frame here is a 215 KB keyframe, so the worker is
  // busy by design and latency is not the quiet case that latency.test.mjs bounds: the
  // typical move within that test's p99 bound, none stalled behind the stuck client for 2 s.
  assert.equal(lat.n, sent.size, 'every move reached the viewer');
  assert.ok(lat.p50 < P99_MS && lat.max < 2 * MAX_MS, `viewer latency p50 ${lat.p50.toFixed(0)} ms, max ${lat.max.toFixed(0)} ms`);
  // Reading again, the stuck client catches up with the newest frame.
  stuck.ws._socket.resume();
  driver.send({ type: 'resume', seq: seq() });
  await stuck.until(() => stuck.frames.some((f) => f.lastSeq >= seq()), 10000, 'the stuck client catches up');
  stuck.ws.terminate();
  await driver.close();
  await viewer.close();
});

test('handover: the driver gives control to a viewer', async () => {
  const s = (await api(srv.base, 'POST', '/api/sessions', {})).json;
  const a = await new Client(wsUrl(s, s.control_token)).open();
  const b = await new Client(wsUrl(s, s.view_token)).open();
  await b.until(() => b.texts.some((t) => t.type === 'welcome'), 5000, 'welcome');
  const bid = b.texts.find((t) => t.type === 'welcome').client_id;
  a.send({ type: 'handover', seq: 1, to: bid });
  await b.until(() => b.texts.some((t) => t.type === 'role' && t.role === 'driver'), 5000, 'b drives');
  await a.until(() => a.texts.some((t) => t.type === 'role' && t.role === 'viewer'), 5000, 'a watches');
  a.send({ type: 'reset', seq: 2 });
  await a.until(() => a.texts.some((t) => t.error === 'not the driver'), 5000, 'a refused');
  b.send({ type: 'set_condition', seq: 3, condition: 'B' });
  b.send({ type: 'set_params', seq: 4, params: { alpha: 0.9, tissue: { skin_fat: { inv_mass: 0.8 } } } });
  b.send({ type: 'set_params', seq: 5, params: { no_such_knob: 1 } });
  await b.until(() => b.texts.some((t) => t.error === 'bad parameter' && /no_such_knob/.test(t.detail)), 5000, 'bad parameter');
  b.send({ type: 'set_params', seq: 6, params: { alpha: 7 } });
  await b.until(() => b.texts.some((t) => t.error === 'bad parameter' && /alpha = 7: must be in \[0, 1\]/.test(t.detail)), 5000, 'range');
  await a.close();
  await b.close();
});

test('a settled volume sends nothing; pause stops frames even while the driver drags; resume applies the drag', async () => {
  const s = (await api(srv.base, 'POST', '/api/sessions', {})).json;
  const c = await new Client(wsUrl(s, s.control_token)).open();
  await c.until(() => c.frames.length > 0 && lastState(c), 5000, 'keyframe and state');
  const rest = c.frames.at(-1).q[0];
  // At rest the volume is settled: 1 s (60 beats at the default 60 Hz) brings no frame.
  const n0 = c.frames.length;
  await tick(1000);
  assert.equal(c.frames.length, n0, 'a settled volume sent frames');
  // Paused: a grab and 1.5 s of pulling (20 moves a second), then 0.5 s more; no frame.
  c.send({ type: 'pause', seq: 1 });
  await c.until(() => lastState(c).paused === true, 5000, 'state: paused');
  c.send({ type: 'grab', seq: 2, point: [12, 20, 8], radius: 2, space: 'lattice' });
  let seq = 3;
  for (const t0 = performance.now(); performance.now() - t0 < 1500; seq++) {
    c.send({ type: 'move', seq, point: [12, 20 + Math.min(3, seq / 8), 8], space: 'lattice' });
    await tick(50);
  }
  await tick(500);
  const during = c.frames.slice(n0);
  assert.equal(during.length, 0, `frames while paused: ${during.map((f) => `#${f.frame} seq ${f.lastSeq}`).join(', ')}`);
  // Resumed: frames again, and the drag made while paused shows.
  c.send({ type: 'resume', seq });
  await c.until(() => c.frames.some((f) => f.lastSeq === seq), 5000, 'a frame after resume');
  assert.equal(lastState(c).paused, false);
  await c.until(() => maxAbsDiff(c.frames.at(-1).q[0], rest) > 1000, 5000, 'the skin follows the drag');
  assert.equal(c.errors, 0);
  await c.close();
});

test('limits: volume size (413), clients per session, sessions per server (429)', async () => {
  const have = (await api(srv.base, 'GET', '/api/sessions')).json.sessions.length;
  const max = (await api(srv.base, 'GET', '/api/health')).json.max_sessions;
  assert.ok(have + 2 <= max, `${have} of ${max} sessions taken before the test`);
  // --max-elements 100000: one element over is refused with the limit named; exactly at
  // the limit is built. The table has room, so only the volume size can refuse.
  const over = await api(srv.base, 'POST', '/api/sessions', { dims: [50, 50, 41] });
  assert.equal(over.status, 413, over.text);
  assert.equal(over.json.error, 'scene too large');
  assert.match(over.json.detail, /^dims 50x50x41: at most 100000 elements$/);
  const fits = await api(srv.base, 'POST', '/api/sessions', { dims: [50, 50, 40] });
  assert.equal(fits.status, 201, fits.text);
  const made = [fits.json];
  // Clients per session, 6: 4 viewers join, the 5th is refused with the reason (the last 2
  // places are the control token's); the control token still joins, twice, then no more.
  const s = fits.json;
  const cs = [];
  for (let i = 0; i < 4; i++) cs.push(await new Client(wsUrl(s, s.view_token)).open());
  const extra = await new Client(wsUrl(s, s.view_token)).open();
  assert.equal(await extra.closed, 1008);
  assert.match(extra.texts.find((t) => t.type === 'error').detail, /limit of viewers/);
  for (let i = 0; i < 2; i++) {
    const d = await new Client(wsUrl(s, s.control_token)).open();
    await d.until(() => d.texts.some((t) => t.type === 'welcome'), 10000, 'the driver welcomed');
    assert.equal(d.texts.find((t) => t.type === 'welcome').role, 'driver');
    cs.push(d);
  }
  const third = await new Client(wsUrl(s, s.control_token)).open();
  assert.equal(await third.closed, 1008);
  assert.match(third.texts.find((t) => t.type === 'error').detail, /limit of clients/);
  for (const c of cs) await c.close();
  // Sessions per server: fill the table; the next is refused with 503 (no room here: a
  // router tries another process), whatever its size.
  for (let i = have + 1; i < max; i++) {
    const r = await api(srv.base, 'POST', '/api/sessions', {});
    assert.equal(r.status, 201, r.text);
    made.push(r.json);
  }
  for (const body of [{}, { dims: [8, 8, 8] }]) {
    const full = await api(srv.base, 'POST', '/api/sessions', body);
    assert.equal(full.status, 503, full.text);
    assert.equal(full.json.error, 'no room');
    assert.match(full.json.detail, new RegExp(`limit of ${max} sessions`));
  }
  for (const m of made) {
    const del = await api(srv.base, 'DELETE', `/api/sessions/${m.id}`, undefined, { authorization: `Bearer ${m.control_token}` });
    assert.equal(del.status, 204);
  }
});

test('replies and frames follow one another without waiting for a wake-up', async () => {
  const s = (await api(srv.base, 'POST', '/api/sessions', {})).json;
  const a = await new Client(wsUrl(s, s.control_token)).open();
  await a.until(() => a.frames.length > 0, 5000, 'snapshot');
  a.send({ type: 'ping', seq: 1, t: 1 });
  a.send({ type: 'ping', seq: 2, t: 2 });
  await a.until(() => a.texts.filter((t) => t.type === 'pong').length === 2, 2000, 'both pongs');
  // A viewer joining the settled session gets its snapshot at once.
  const b = await new Client(wsUrl(s, s.view_token)).open();
  await b.until(() => b.frames.length > 0, 2000, 'joiner snapshot');
  assert.ok(b.frames[0].snapshot);
  await a.close();
  await b.close();
});

test('a deleted session is freed even if a client stopped reading with its socket full', async (t) => {
  const { server, s, driver, others: [stuck], fill } = await bigStream(t, ['view']);
  stuck.ws._socket.pause();
  // The stuck client's socket full: its close frame cannot be written, so only the
  // server's close timeout lets the session go.
  const { full, later } = await fill([driver]);
  const maxFrame = Math.max(...driver.frames.map((f) => f.bytes));
  assert.ok(later - full <= 2 * maxFrame, `the stuck client still takes frames (${later - full} B more): its socket is not full`);
  const del = await api(server.base, 'DELETE', `/api/sessions/${s.id}`, undefined, { authorization: `Bearer ${s.control_token}` });
  assert.equal(del.status, 204);
  assert.equal(await withTimeout(driver.closed, 5000, 'driver close'), 1001);
  const deadline = Date.now() + 8000;
  let held = true;
  while (held && Date.now() < deadline) {
    held = (await api(server.base, 'GET', '/metrics')).text.includes(s.id);
    if (held) await tick(100);
  }
  assert.ok(!held, 'the deleted session is still held after 8 s');
  stuck.ws.terminate();
});
