// Events on their way from the socket to the step: what an event costs in the inbox and
// what waits there while a session is paused; parameters set by a choice's name; error
// messages that quote a client stay valid JSON and UTF-8; and the WebSocket thread looks
// only at the clients of the sessions that have news.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, api, Client, wsUrl, metric, tick, quiet } from './harness.mjs';

let srv;
before(async () => { srv = await startServer(['--dims', '24x24x16', '--max-events-per-s', '2000']); });
after(async () => {
  const code = await srv.stop();
  assert.equal(code, 0, `server exit ${code}; stderr:\n${srv.stderr()}`);
});

const lastState = (c) => c.texts.filter((t) => t.type === 'state').at(-1);
const errors = (c) => c.texts.filter((t) => t.type === 'error');

test('a paused session holds its events in the inbox at what they carry; queries still answered', async () => {
  const s = (await api(srv.base, 'POST', '/api/sessions', {})).json;
  const d = await new Client(wsUrl(s, s.control_token)).open();
  await d.until(() => d.frames.length > 0 && lastState(d), 5000, 'keyframe and state');
  d.send({ type: 'pause', seq: 1 });
  await d.until(() => lastState(d).paused === true, 5000, 'paused');
  d.send({ type: 'grab', seq: 2, point: [12, 20, 8], radius: 2, space: 'lattice' });
  for (let k = 0; k < 20; k++) d.send({ type: 'move', seq: 3 + k, point: [12, 20 + k / 10, 8], space: 'lattice' });
  const held = async () => metric(srv.base, 'softcast_session_inbox_events', s.id);
  for (let t0 = Date.now(); (await held()) < 21 && Date.now() - t0 < 5000;) await tick(20);
  assert.equal(await held(), 21, 'the grab and 20 moves wait in the inbox');
  // A move costs 40 bytes and a grab 48 (a 3.7 KB union each before).
  const bytes = await metric(srv.base, 'softcast_session_inbox_bytes', s.id);
  assert.equal(bytes, 48 + 20 * 40, `inbox holds ${bytes} B`);
  // A slice is a query: answered while paused, past the events that wait.
  d.send({ type: 'slice', seq: 30, plane: 'axial', index: 8, level: 40, width: 400 });
  await d.until(() => d.slices.length > 0, 5000, 'slice while paused');
  assert.equal(await held(), 21);
  // Filling it to the byte (moves, then a release of 24 bytes when that is what is left):
  // the inbox refuses with "busy" at its capacity, and still takes the resume.
  const cap = Number(/^softcast_inbox_capacity_bytes (\d+)$/m.exec((await api(srv.base, 'GET', '/metrics')).text)[1]);
  const room = Math.floor((cap - bytes) / 40), rest = (cap - bytes) % 40;
  assert.equal(rest, 24, `${rest} bytes left after the moves`);
  for (let k = 0; k < room; k++) d.send({ type: 'move', seq: 100 + k, point: [12, 21, 8], space: 'lattice' });
  d.send({ type: 'release', seq: 999 });
  for (let k = 0; k < 5; k++) d.send({ type: 'move', seq: 900 + k, point: [12, 21, 8], space: 'lattice' });
  await d.until(() => errors(d).filter((e) => e.error === 'busy').length === 5, 5000, 'busy past capacity');
  assert.equal(await held(), 21 + room + 1);
  assert.equal(await metric(srv.base, 'softcast_session_inbox_bytes', s.id), cap);
  // Resume: everything that waited applies, in order, and the frame echoes the resume.
  d.send({ type: 'resume', seq: 1000 });
  await d.until(() => d.frames.some((f) => f.lastSeq === 1000), 5000, 'resumed');
  assert.equal(await held(), 0);
  // The resume took 24 bytes of the room kept for pause and resume.
  assert.equal(await metric(srv.base, 'softcast_session_inbox_bytes_peak', s.id), cap + 24);
  await d.close();
});

test('a paused cloth crowd stops: no frames; its camera is taken, its other events wait', async () => {
  const c = (await api(srv.base, 'POST', '/api/sessions', { scene: 'cloth', characters: 2 })).json;
  const d = await new Client(wsUrl(c, c.control_token), { decode: false }).open();
  await d.until(() => d.frames.length > 5, 10000, 'frames while it plays');
  d.send({ type: 'motion', seq: 1, character: -1, motion: 'walk' });
  d.send({ type: 'pause', seq: 2 });
  await d.until(() => lastState(d)?.paused === true, 5000, 'paused');
  await quiet([d], 200);
  const n0 = d.frames.length;
  for (let k = 0; k < 10; k++) d.send({ type: 'camera', seq: 3 + k, point: [4 + k, 0, 1.5] });
  d.send({ type: 'wind', seq: 20, impulse: [1, 0, 0] });
  await tick(500);
  assert.equal(d.frames.length, n0, 'a paused crowd (never quite still) sent frames');
  assert.equal(await metric(srv.base, 'softcast_session_inbox_events', c.id), 1, 'the wind waits; the cameras were taken');
  d.send({ type: 'resume', seq: 21 });
  await d.until(() => d.frames.some((f) => f.lastSeq === 21), 5000, 'resumed');
  assert.equal(await metric(srv.base, 'softcast_session_inbox_events', c.id), 0);
  await d.close();
});

test('set_params takes a choice by its name as well as by its index', async () => {
  const v = (await api(srv.base, 'POST', '/api/sessions', {})).json;
  const d = await new Client(wsUrl(v, v.control_token)).open();
  await d.until(() => lastState(d)?.param_schema, 5000, 'state with schema');
  const cond = lastState(d).param_schema.find((p) => p.name === 'condition');
  assert.equal(cond.type, 'choice');
  d.send({ type: 'set_params', seq: 1, params: { condition: 'A', alpha: 0.5 } });
  await d.until(() => lastState(d).params.condition === 'A' && lastState(d).params.alpha === 0.5, 5000, 'condition A by name');
  d.send({ type: 'set_params', seq: 2, params: { condition: 1 } });
  await d.until(() => lastState(d).params.condition === 'B', 5000, 'condition B by index');
  d.send({ type: 'set_params', seq: 3, params: { condition: 'D' } });
  await d.until(() => errors(d).some((e) => e.seq === 3), 5000, 'a name that is not a choice');
  const e = errors(d).find((x) => x.seq === 3);
  assert.equal(e.error, 'bad parameter');
  assert.match(e.detail, /condition = "D": must be one of A\|B\|C/);
  await d.close();
  const c = (await api(srv.base, 'POST', '/api/sessions', { scene: 'cloth' })).json;
  const k = await new Client(wsUrl(c, c.control_token)).open();
  await k.until(() => lastState(k), 10000, 'cloth state');
  k.send({ type: 'set_params', seq: 1, params: { strategy: 'naive_copy' } });
  await k.until(() => lastState(k).params.strategy === 'naive_copy', 5000, 'strategy by name');
  await k.close();
});

test('errors that quote a client stay valid JSON and UTF-8', async () => {
  const s = (await api(srv.base, 'POST', '/api/sessions', {})).json;
  const c = await new Client(wsUrl(s, s.control_token)).open();
  await c.until(() => lastState(c), 5000, 'state');
  // Raw bytes in text frames: an invalid UTF-8 byte, a quote and a backslash in the type, in
  // a parameter's name and in a handover's target. Echoed raw, the first would make this
  // client's WebSocket close (1007) and the others would break the JSON.
  const raw = (s) => c.ws.send(Buffer.from(s, 'latin1'), { binary: false });
  raw('{"type":"\xff\\"x\\\\","seq":1}');
  raw('{"type":"set_params","seq":2,"params":{"a\xfe\\"":1}}');
  raw('{"type":"handover","seq":3,"to":"c\xc0\xaf\\""}');
  await c.until(() => [1, 2, 3].every((q) => errors(c).some((e) => e.seq === q)), 5000, 'three errors');
  const bySeq = (q) => errors(c).find((e) => e.seq === q);
  assert.equal(bySeq(1).error, 'unknown message type');
  assert.equal(bySeq(1).detail, 'unknown message type "\ufffd"x\\"');
  assert.equal(bySeq(2).error, 'bad parameter');
  assert.match(bySeq(2).detail, /"a\ufffd""/);
  assert.equal(bySeq(3).error, 'unknown client');
  assert.equal(bySeq(3).detail, 'c\ufffd\ufffd"');
  c.send({ type: 'ping', seq: 4, t: 1 });
  await c.until(() => c.texts.some((t) => t.type === 'pong'), 5000, 'still connected');
  // Over HTTP too: a URL's bytes in a 404's detail.
  const r = await fetch(`${srv.base}/api/sessions/s1-1-%FF%22%5C`);
  assert.equal(r.status, 404);
  const body = new TextDecoder('utf-8', { fatal: true }).decode(await r.arrayBuffer());
  assert.equal(JSON.parse(body).detail, 's1-1-\ufffd"\\');
  await c.close();
});

test('news of one session never wakes the clients of another', async () => {
  const a = (await api(srv.base, 'POST', '/api/sessions', {})).json;
  const b = (await api(srv.base, 'POST', '/api/sessions', {})).json;
  const watchers = [];
  for (let i = 0; i < 3; i++) watchers.push(await new Client(wsUrl(a, a.view_token)).open());
  const driver = await new Client(wsUrl(b, b.control_token)).open();
  for (const c of [...watchers, driver]) await c.until(() => c.frames.length > 0 && lastState(c), 5000, 'joined');
  await quiet([...watchers, driver], 300);
  const visitsA = await metric(srv.base, 'softcast_session_client_visits_total', a.id);
  const visitsB = await metric(srv.base, 'softcast_session_client_visits_total', b.id);
  // B is dragged for a second: about 30 frames, each a wake-up of the WebSocket thread.
  driver.send({ type: 'grab', seq: 1, point: [12, 20, 8], radius: 2, space: 'lattice' });
  for (let k = 0; k < 30; k++) {
    driver.send({ type: 'move', seq: 2 + k, point: [12, 20 + Math.sin(k / 5), 8], space: 'lattice' });
    await tick(33);
  }
  await driver.until(() => driver.frames.some((f) => f.lastSeq === 31), 5000, 'drag framed');
  const afterB = await metric(srv.base, 'softcast_session_client_visits_total', b.id);
  const afterA = await metric(srv.base, 'softcast_session_client_visits_total', a.id);
  console.log(`# visits: session B (dragged, 1 client) ${visitsB} -> ${afterB}; session A (3 idle viewers) ${visitsA} -> ${afterA}`);
  assert.ok(afterB - visitsB >= 10, `B's client was looked at ${afterB - visitsB} times`);
  assert.equal(afterA, visitsA, 'the idle session\'s clients were looked at on the other\'s wake-ups');
  for (const c of [...watchers, driver]) await c.close();
});
