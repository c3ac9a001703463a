// Keyframe policy: at most every --keyframe-every frames while the shape moves, none for a
// settled scene, and with 0 only the first (a local dent never makes deltas grow past half
// a keyframe). Every delta must apply to the keyframe the client holds.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, api, Client, wsUrl } from './harness.mjs';

// Grab the middle of the front face and drag it in and out, one move per frame received.
async function drag(c, moves) {
  c.send({ type: 'grab', seq: 1, point: [12, 20, 8], radius: 2, space: 'lattice' });
  for (let i = 1; i <= moves; i++) {
    const n = c.frames.length;
    c.send({ type: 'move', seq: 1 + i, point: [12, 20 + 3 * Math.sin(i / 4), 8], space: 'lattice' });
    await c.until(() => c.frames.length > n, 5000, `frame after move ${i}`);
  }
  c.send({ type: 'release', seq: moves + 2 });
  await c.until(() => c.frames.some((f) => f.lastSeq === moves + 2), 5000, 'release applied');
}

// Ping until a frame-free round trip: the scene has settled and sent everything.
async function settle(c) {
  for (let seq = 1000; seq < 1300; seq++) {
    const n = c.frames.length, pongs = c.texts.filter((t) => t.type === 'pong').length;
    c.send({ type: 'ping', seq, t: seq });
    await c.until(() => c.texts.filter((t) => t.type === 'pong').length > pongs, 5000, 'pong');
    if (c.frames.length === n) return;
  }
  throw new Error('the scene did not settle within 300 round trips');
}

test('--keyframe-every N: keyframes at most N frames apart while moving, none once settled', async () => {
  const srv = await startServer(['--dims', '24x24x16', '--keyframe-every', '10']);
  try {
    const s = (await api(srv.base, 'POST', '/api/sessions', {})).json;
    const c = await new Client(wsUrl(s, s.control_token)).open();
    await c.until(() => c.frames.length > 0, 5000, 'first keyframe');
    await drag(c, 40);
    const keys = c.frames.filter((f) => f.key).map((f) => f.frame);
    assert.ok(keys.length >= 4, `keyframes ${keys}`);
    for (let i = 1; i < keys.length; i++) assert.ok(keys[i] - keys[i - 1] <= 10, `keyframes ${keys}`);
    assert.equal(c.errors, 0, 'a delta arrived for a keyframe the client did not hold');
    await settle(c);
    const n = c.frames.length;
    await settle(c); // many frame periods later: still nothing, keyframes included
    assert.equal(c.frames.length, n);
    await c.close();
  } finally {
    assert.equal(await srv.stop(), 0);
  }
});

test('--keyframe-every 0: a drag sends one keyframe, then deltas only', async () => {
  const srv = await startServer(['--dims', '24x24x16', '--keyframe-every', '0']);
  try {
    const s = (await api(srv.base, 'POST', '/api/sessions', {})).json;
    const c = await new Client(wsUrl(s, s.control_token)).open();
    await c.until(() => c.frames.length > 0, 5000, 'first keyframe');
    await drag(c, 40);
    assert.equal(c.frames.filter((f) => f.key).length, 1);
    assert.ok(c.frames.length > 40);
    assert.equal(c.errors, 0);
    await c.close();
  } finally {
    assert.equal(await srv.stop(), 0);
  }
});
