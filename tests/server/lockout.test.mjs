// The driver cannot be locked out by the people watching (issue 12, item 3): viewers that
// fill the session's places, viewers that flood it with slice requests (the queries they
// may send), and the replies those floods bring, each beside a driver that must keep
// driving: admitted, never told "busy", every move it sends echoed by the frames, every
// reply it asked for delivered. Also: a refusal names the seq of the message it refuses,
// and nothing a client sends comes back as text that is not UTF-8.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, api, Client, wsUrl, tick } from './harness.mjs';

let srv;
before(async () => {
  // A generous per-connection budget, so that the viewers' floods are floods; the view
  // token's budget for all of them together is the server's default.
  srv = await startServer(['--dims', '48x48x32', '--max-clients-per-session', '20',
    '--max-events-per-s', '2000']);
});
after(async () => {
  const code = await srv.stop();
  assert.equal(code, 0, `server exit ${code}; stderr:\n${srv.stderr()}`);
});

const newSession = async () => {
  const r = await api(srv.base, 'POST', '/api/sessions', {});
  assert.equal(r.status, 201, r.text);
  return r.json;
};
const del = (s) => api(srv.base, 'DELETE', `/api/sessions/${s.id}`, undefined, { authorization: `Bearer ${s.control_token}` });
const welcomed = (c) => c.until(() => c.texts.some((t) => t.type === 'welcome'), 10000, 'welcome');
const errorsOf = (c) => c.texts.filter((t) => t.type === 'error');

test('viewers filling every place leave the control token its own: the driver joins and drives', async () => {
  const s = await newSession();
  const viewers = [];
  // 20 places, the last 2 the control token's: 18 viewers join, every later one is refused.
  for (let i = 0; i < 22; i++) viewers.push(await new Client(wsUrl(s, s.view_token), { decode: false }).open());
  let admitted = 0;
  for (const v of viewers) {
    await v.until(() => v.texts.some((t) => t.type === 'welcome' || t.type === 'error'), 10000, 'admitted or refused');
    if (v.texts.some((t) => t.type === 'welcome')) admitted++;
    else assert.match(errorsOf(v)[0].detail, /limit of viewers/);
  }
  assert.equal(admitted, 18);
  const d = await new Client(wsUrl(s, s.control_token)).open();
  await welcomed(d);
  assert.equal(d.texts.find((t) => t.type === 'welcome').role, 'driver');
  d.send({ type: 'grab', seq: 1, point: [24, 24, 16], radius: 3, space: 'lattice' });
  d.send({ type: 'move', seq: 2, point: [24, 27, 16], space: 'lattice' });
  await d.until(() => d.frames.some((f) => f.lastSeq >= 2), 10000, 'the driver\'s move in a frame');
  assert.deepEqual(errorsOf(d), []);
  await d.close();
  for (const v of viewers) if (v.ws.readyState === 1) await v.close();
  await del(s);
});

test('viewers flooding slice requests: the driver is never busy, its moves and its own slices all come back', { timeout: 60000 }, async () => {
  const s = await newSession();
  const d = await new Client(wsUrl(s, s.control_token)).open();
  await welcomed(d);
  const viewers = [];
  for (let i = 0; i < 4; i++) viewers.push(await new Client(wsUrl(s, s.view_token), { decode: false }).open());
  await Promise.all(viewers.map(welcomed));
  // Each viewer sends 1200 slice requests as fast as its socket takes them (4,800 in all,
  // more than the inbox's 396 moves), while the driver grabs, moves 60 times and asks for
  // 20 slices of its own between the moves, each once the one before has come back (the
  // replies waiting for the WebSocket thread are capped at SRV_MAIL_PER_CLIENT a client,
  // the oldest going: with 20 asked at once, a WebSocket thread starved of CPU dropped some
  // of the driver's own, which is not what this test is about).
  let seqs = 0;
  const flood = viewers.map(async (v) => {
    for (let k = 0; k < 1200; k++) {
      v.send({ type: 'slice', seq: ++seqs, plane: 'axial', index: k % 32, level: 40, width: 400 });
      if (k % 100 === 99) await tick(1);
    }
  });
  d.send({ type: 'grab', seq: 1, point: [24, 24, 16], radius: 3, space: 'lattice' });
  let seq = 1;
  const mine = [];
  for (let k = 0; k < 60; k++) {
    d.send({ type: 'move', seq: ++seq, point: [24, 24 + 4 * Math.sin(k / 6), 16], space: 'lattice' });
    if (k % 3 === 0) {
      await d.until(() => d.slices.length >= mine.length, 20000, `the driver's slice ${mine.length}`);
      mine.push(++seq);
      d.send({ type: 'slice', seq, plane: 'coronal', index: 20, level: 40, width: 400 });
    }
    await tick(16);
  }
  await Promise.all(flood);
  await d.until(() => d.frames.some((f) => f.lastSeq >= seq - 1), 20000, 'the driver\'s last move in a frame');
  await d.until(() => d.slices.length >= mine.length, 20000, `the driver's ${mine.length} slices`);
  assert.deepEqual(errorsOf(d), [], 'the driver was refused nothing');
  assert.deepEqual(d.slices.map((x) => x.header.lastSeq), mine, 'every slice the driver asked for, in order');
  // The viewers were answered too (latest wins: fewer replies than requests, never none),
  // and none was refused for the others' sake but by its own budget.
  for (const v of viewers) {
    await v.until(() => v.frames.length + v.bytes > 0, 10000, 'a viewer answered');
    for (const e of errorsOf(v)) assert.match(e.error, /rate limited|busy/);
  }
  await d.close();
  for (const v of viewers) await v.close();
  await del(s);
});

test('a refusal names the seq it refuses; no reply carries bytes that are not UTF-8', async () => {
  const s = await newSession();
  const d = await new Client(wsUrl(s, s.control_token)).open();
  await welcomed(d);
  const raw = [];
  d.ws.on('message', (data, isBinary) => { if (!isBinary) raw.push(Buffer.from(data)); });
  const bad = Buffer.from([0xff, 0xfe, 0xc0, 0xaf, 0xed, 0xa0, 0x80]);
  const msgs = [
    Buffer.concat([Buffer.from('{"type":"'), bad, Buffer.from('","seq":11}')]),
    Buffer.concat([Buffer.from('{"type":"handover","seq":12,"to":"'), bad, Buffer.from('"}')]),
    Buffer.concat([Buffer.from('{"type":"set_params","seq":13,"params":{"'), bad, Buffer.from('":1}}')]),
    Buffer.from('{"type":"move","seq":14,"point":[1,2]}'),
    Buffer.from('{"seq":15,"point":[1,2,3]}'),
    Buffer.from('{"type":"move","seq":16} trailing'),
  ];
  for (const m of msgs) d.ws.send(m, { binary: false });
  await d.until(() => errorsOf(d).length >= msgs.length, 10000, 'every message refused');
  assert.deepEqual(errorsOf(d).map((e) => e.seq), [11, 12, 13, 14, 15, 16]);
  const utf8 = new TextDecoder('utf-8', { fatal: true });
  for (const b of raw) assert.doesNotThrow(() => utf8.decode(b), `not UTF-8: ${b.toString('hex')}`);
  await d.close();
  await del(s);
});

test('a token\'s budget is shared by its connections: many viewers are no way round the rate limit', async () => {
  const own = await startServer(['--dims', '16x16x8', '--max-events-per-s', '100', '--max-view-events-per-s', '60']);
  try {
    const s = (await api(own.base, 'POST', '/api/sessions', {})).json;
    const vs = [];
    for (let i = 0; i < 8; i++) vs.push(await new Client(wsUrl(s, s.view_token), { decode: false }).open());
    await Promise.all(vs.map(welcomed));
    // 8 x 12 pings at once (12: within a client's outbox of 16, so no answer is dropped for
    // a slow reader): each connection within its own 100, together past the view token's 60.
    for (const v of vs) for (let k = 1; k <= 12; k++) v.send({ type: 'ping', seq: k, t: k });
    const answered = (v) => v.texts.filter((t) => t.type === 'pong' || t.type === 'error').length;
    await Promise.all(vs.map((v) => v.until(() => answered(v) >= 12, 10000, 'every ping answered')));
    const pongs = vs.reduce((n, v) => n + v.texts.filter((t) => t.type === 'pong').length, 0);
    const limited = vs.flatMap((v) => errorsOf(v)).filter((e) => e.error === 'rate limited');
    assert.ok(pongs >= 60 && pongs <= 64, `${pongs} pongs for the view token's 60 a second`);
    assert.equal(pongs + limited.length, 96);
    assert.match(limited[0].detail, /view token's connections together/);
    // The driver's budget is its own: it is not spent by the viewers.
    const d = await new Client(wsUrl(s, s.control_token)).open();
    await welcomed(d);
    d.send({ type: 'ping', seq: 1, t: 1 });
    await d.until(() => d.texts.some((t) => t.type === 'pong'), 10000, 'the driver\'s pong');
    for (const c of [...vs, d]) await c.close();
  } finally {
    assert.equal(await own.stop(), 0);
  }
});
