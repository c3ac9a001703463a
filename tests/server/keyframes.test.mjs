// Keys and structural frames: an object re-keys at most every --keyframe-every frames while
// it moves, never in a settled scene, and with 0 only when its delta would outgrow its key
// (a local dent never does). Every client applies every structural frame in order, or
// starts again at a snapshot: its decoder never refuses a frame.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, api, Client, wsUrl, tick, quiet, metric } from './harness.mjs';

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
    // Counted in frames made (a settled frame makes none): this client, reading as fast as
    // they come, gets every one.
    const keys = c.frames.map((f, i) => (f.key ? i : -1)).filter((i) => i >= 0);
    assert.ok(keys.length >= 4, `keyed frames ${keys}`);
    for (let i = 1; i < keys.length; i++) assert.ok(keys[i] - keys[i - 1] <= 10, `keyed frames ${keys}`);
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

// A viewer that stops reading while every frame keys (so every frame is structural and
// large): the server cannot hold all it misses, so when it reads again it must get a
// snapshot, never a frame that does not apply to what it holds.
// With v's socket paused, the driver d drags until the server has skipped n frames for v:
// of the frames made since (d, reading, gets each), fewer went to v. At most 3000 moves.
// Returns the number of the last frame made.
async function dragUntilSkipped(srv, s, d, n) {
  const sentTotal = () => metric(srv.base, 'softcast_session_frames_sent_total', s.id);
  d.send({ type: 'grab', seq: 1, point: [32, 52, 20], radius: 3, space: 'lattice' });
  await d.until(() => d.frames.some((f) => f.lastSeq >= 1), 10000, 'grab applied');
  const sent0 = await sentTotal(), d0 = d.frames.length;
  for (let i = 1; ; i++) {
    assert.ok(i < 3000, 'the viewer was never skipped enough frames');
    d.send({ type: 'move', seq: 1 + i, point: [32, 52 + 4 * Math.sin(i / 6), 20], space: 'lattice' });
    await tick(16);
    if (i % 10) continue;
    const made = d.frames.length - d0;
    if (made - ((await sentTotal()) - sent0 - made) >= n) return d.frames.at(-1).frame;
  }
}

test('a client that falls behind past the structural frames kept starts again at a snapshot', async () => {
  const srv = await startServer(['--dims', '64x64x40', '--keyframe-every', '1']);
  try {
    const s = (await api(srv.base, 'POST', '/api/sessions', {})).json;
    const d = await new Client(wsUrl(s, s.control_token), { decode: false }).open();
    const v = await new Client(wsUrl(s, s.view_token)).open();
    await v.until(() => v.frames.length > 0, 10000, 'viewer snapshot');
    assert.ok(v.frames[0].snapshot, 'a joiner starts at a snapshot');
    v.ws._socket.pause(); // reads nothing: the kernel's buffers fill, then the server's
    // Every frame keyed, so the server may skip none for the viewer until more than the 32
    // structural frames it keeps went by unread.
    const sent = await dragUntilSkipped(srv, s, d, 40);
    v.ws._socket.resume();
    await v.until(() => v.frames.length && v.frames.at(-1).frame >= sent, 20000, 'the viewer caught up');
    assert.equal(v.errors, 0, v.refusals.join('; '));
    const again = v.frames.slice(1).filter((f) => f.snapshot);
    assert.ok(again.length >= 1, `no snapshot after the stall (${v.frames.map((f) => f.frame + (f.snapshot ? 'S' : f.key ? 'K' : '')).join(' ')}; sent ${sent})`);
    for (let i = 1; i < v.frames.length; i++) assert.ok(v.frames[i].frame > v.frames[i - 1].frame, 'frames in order');
    d.send({ type: 'release', seq: 5000 });
    await Promise.all([d.close(), v.close()]);
  } finally {
    assert.equal(await srv.stop(), 0);
  }
});

// A viewer that stops reading while the driver drags, every other frame keyed (structural),
// the others deltas: once its socket is full the server skips deltas for it (latest wins)
// but never a structural frame, so everything it gets applies.
test('a stalled client is sent every structural frame in order and skips only the others', async () => {
  const srv = await startServer(['--dims', '64x64x40', '--keyframe-every', '2']);
  try {
    const s = (await api(srv.base, 'POST', '/api/sessions', {})).json;
    const d = await new Client(wsUrl(s, s.control_token), { decode: false }).open();
    const v = await new Client(wsUrl(s, s.view_token)).open();
    await v.until(() => v.frames.length > 0, 10000, 'viewer snapshot');
    v.ws._socket.pause();
    const sent = await dragUntilSkipped(srv, s, d, 10);
    v.ws._socket.resume();
    await v.until(() => v.frames.length && v.frames.at(-1).frame >= sent, 20000, 'the viewer caught up');
    assert.equal(v.errors, 0, v.refusals.join('; '));
    const got = new Set(v.frames.map((f) => f.frame));
    const from = v.frames.filter((f) => f.snapshot).at(-1).frame;
    const structural = d.frames.filter((f) => f.key && f.frame > from && f.frame <= sent).map((f) => f.frame);
    assert.ok(structural.length >= 2, `structural frames ${structural}`);
    const missed = structural.filter((n) => !got.has(n));
    assert.deepEqual(missed, [], 'structural frames the viewer never got');
    assert.ok(v.frames.filter((f) => f.frame > from).length < d.frames.filter((f) => f.frame > from && f.frame <= sent).length,
      'the viewer was skipped no frame');
    d.send({ type: 'release', seq: 5000 });
    await Promise.all([d.close(), v.close()]);
  } finally {
    assert.equal(await srv.stop(), 0);
  }
});
