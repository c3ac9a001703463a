// softcast-server behaviour under load and at its limits.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { startServer, api, Client, wsUrl } from './harness.mjs';

let srv;
before(async () => {
  srv = await startServer(['--dims', '24x24x16', '--max-sessions', '8', '--max-clients-per-session', '6',
    '--max-elements', '100000', '--max-events-per-s', '100']);
});
after(async () => {
  const code = await srv.stop();
  assert.equal(code, 0, `server exit ${code}; stderr:\n${srv.stderr()}`);
});

const rssKiB = (pid) => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))[1]);
const tick = (ms) => new Promise((r) => setTimeout(r, ms)); // paces the driver; never a wait-and-hope

test('a client that never reads does not stall the others or grow memory', async () => {
  const s = (await api(srv.base, 'POST', '/api/sessions', { dims: [40, 40, 24] })).json;
  const driver = await new Client(wsUrl(s, s.control_token)).open();
  const viewer = await new Client(wsUrl(s, s.view_token)).open();
  const stuck = await new Client(wsUrl(s, s.view_token)).open();
  stuck.ws._socket.pause(); // reads nothing from now on
  await viewer.until(() => viewer.frames.length > 0, 10000, 'first frame');
  const rss0 = rssKiB(srv.proc.pid);
  driver.send({ type: 'grab', seq: 1, point: [20, 33, 12], radius: 2.5, space: 'lattice' });
  const t0 = Date.now();
  let seq = 2;
  while (Date.now() - t0 < 3000) { // 3 s of dragging at 30 events/s
    driver.send({ type: 'move', seq: seq++, point: [20, 33 + 3 * Math.sin((seq - 2) / 10), 12], space: 'lattice' });
    await tick(33);
  }
  await viewer.until(() => viewer.frames.some((f) => f.lastSeq === seq - 1), 10000, 'last move seen');
  const seen = viewer.frames.filter((f) => f.frame > 1).length, sent = driver.frames.length;
  const rss1 = rssKiB(srv.proc.pid);
  console.log(`# viewer frames ${seen}, driver frames ${sent}, rss ${rss0} -> ${rss1} KiB`);
  assert.ok(seen >= 0.8 * sent, `viewer got ${seen} frames against the driver's ${sent}`);
  assert.ok(rss1 - rss0 < 64 * 1024, `server memory grew by ${rss1 - rss0} KiB`);
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
  await b.until(() => b.texts.some((t) => t.error === 'unknown parameter'), 5000, 'unknown parameter');
  b.send({ type: 'set_params', seq: 6, params: { alpha: 7 } });
  await b.until(() => b.texts.some((t) => t.error === 'event refused' && /alpha/.test(t.detail)), 5000, 'range');
  await a.close();
  await b.close();
});

test('pause stops frames; resume and a settled volume send nothing new until an event', async () => {
  const s = (await api(srv.base, 'POST', '/api/sessions', {})).json;
  const c = await new Client(wsUrl(s, s.control_token)).open();
  await c.until(() => c.frames.length > 0, 5000, 'keyframe');
  // At rest: the volume is settled, so no frames follow the keyframe until an event.
  c.send({ type: 'ping', seq: 1, t: 0 });
  await c.until(() => c.texts.some((t) => t.type === 'pong'), 5000, 'pong');
  const n0 = c.frames.length;
  c.send({ type: 'ping', seq: 2, t: 0 });
  await c.until(() => c.texts.filter((t) => t.type === 'pong').length === 2, 5000, 'pong 2');
  assert.equal(c.frames.length, n0, 'a settled volume sent frames');
  c.send({ type: 'pause', seq: 3 });
  c.send({ type: 'grab', seq: 4, point: [12, 20, 8], radius: 2, space: 'lattice' });
  c.send({ type: 'move', seq: 5, point: [12, 23, 8], space: 'lattice' });
  c.send({ type: 'resume', seq: 6 });
  await c.until(() => c.frames.some((f) => f.lastSeq >= 6), 5000, 'frames after resume');
  await c.close();
});

test('limits: sessions per server, clients per session, volume size', async () => {
  const have = (await api(srv.base, 'GET', '/api/sessions')).json.sessions.length;
  const max = (await api(srv.base, 'GET', '/api/health')).json.max_sessions;
  const made = [];
  for (let i = have; i < max; i++) made.push((await api(srv.base, 'POST', '/api/sessions', {})).json);
  const over = await api(srv.base, 'POST', '/api/sessions', {});
  assert.equal(over.status, 429);
  assert.match(over.json.detail, new RegExp(`limit of ${max} sessions`));
  const big = await api(srv.base, 'POST', '/api/sessions', { dims: [100, 100, 100] });
  assert.ok(big.status === 413 || big.status === 429);
  const s = made[0] ?? (await api(srv.base, 'GET', '/api/sessions')).json.sessions[0];
  if (made[0]) {
    const cs = [];
    for (let i = 0; i < 6; i++) cs.push(await new Client(wsUrl(s, s.view_token)).open());
    const extra = await new Client(wsUrl(s, s.view_token)).open();
    assert.equal(await extra.closed, 1008);
    assert.match(extra.texts.find((t) => t.type === 'error').detail, /limit of clients/);
    for (const c of cs) await c.close();
  }
  for (const m of made)
    await api(srv.base, 'DELETE', `/api/sessions/${m.id}`, undefined, { authorization: `Bearer ${m.control_token}` });
});

test('replies and frames follow one another without waiting for a wake-up', async () => {
  const s = (await api(srv.base, 'POST', '/api/sessions', {})).json;
  const a = await new Client(wsUrl(s, s.control_token)).open();
  await a.until(() => a.frames.length > 0, 5000, 'keyframe');
  a.send({ type: 'ping', seq: 1, t: 1 });
  a.send({ type: 'ping', seq: 2, t: 2 });
  await a.until(() => a.texts.filter((t) => t.type === 'pong').length === 2, 2000, 'both pongs');
  // A viewer joining the settled session gets its keyframe at once, not at the next one.
  const t0 = Date.now();
  const b = await new Client(wsUrl(s, s.view_token)).open();
  await b.until(() => b.frames.length > 0, 2000, 'joiner keyframe');
  assert.ok(Date.now() - t0 < 2000);
  await a.close();
  await b.close();
});

test('a deleted session is freed even if a client stopped reading', async () => {
  const s = (await api(srv.base, 'POST', '/api/sessions', {})).json;
  const stuck = await new Client(wsUrl(s, s.view_token)).open();
  await stuck.until(() => stuck.frames.length > 0, 5000, 'keyframe');
  stuck.ws._socket.pause();
  const del = await api(srv.base, 'DELETE', `/api/sessions/${s.id}`, undefined, { authorization: `Bearer ${s.control_token}` });
  assert.equal(del.status, 204);
  const deadline = Date.now() + 8000;
  let held = true;
  while (held && Date.now() < deadline) {
    const m = await api(srv.base, 'GET', '/metrics');
    held = m.text.includes(s.id);
    if (held) await tick(100);
  }
  assert.ok(!held, 'the deleted session is still held after 8 s');
  stuck.ws.terminate();
});
