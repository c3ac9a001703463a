// Keyframe policy: at most every --keyframe-every frames while the shape moves, none for a
// settled scene, and with 0 only the first (a local dent never makes deltas grow past half
// a keyframe). Every delta must apply to the keyframe the client holds.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, api, Client, wsUrl, tick, quiet } from './harness.mjs';

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
    // Settled once 300 ms pass without a frame; then 2 s (120 frame periods at the default
    // 60 Hz, 12 times --keyframe-every) bring nothing, keyframes included.
    await quiet([c], 300);
    const n = c.frames.length;
    await tick(2000);
    const idle = c.frames.slice(n);
    assert.equal(idle.length, 0, `frames once settled: ${idle.map((f) => `#${f.frame}${f.key ? ' key' : ''}`).join(', ')}`);
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
