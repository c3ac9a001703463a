// A pull past the edge of the volume's box stops there and the driver is told why
// (a "notice" text), once each time the hand reaches the edge; pulls inside the box
// are never interrupted by one.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, api, Client, wsUrl } from './harness.mjs';

let srv;
before(async () => { srv = await startServer(['--dims', '24x24x16']); });
after(async () => {
  const code = await srv.stop();
  assert.equal(code, 0, `server exit ${code}; stderr:\n${srv.stderr()}`);
});

test('a pull past the volume box stops at its edge and the driver hears why', async () => {
  const s = (await api(srv.base, 'POST', '/api/sessions', {})).json;
  const d = await new Client(wsUrl(s, s.control_token)).open();
  await d.until(() => d.frames.length > 0, 10000, 'first frame');
  const notices = () => d.texts.filter((t) => t.type === 'notice');
  d.send({ type: 'grab', seq: 1, point: [12, 12, 8], radius: 3, space: 'lattice' });
  d.send({ type: 'move', seq: 2, point: [12, 13, 8], space: 'lattice' }); // well inside
  await d.until(() => d.frames.some((f) => f.lastSeq >= 2), 10000, 'move 2 framed');
  assert.equal(notices().length, 0, 'a pull inside the box got a notice');
  d.send({ type: 'move', seq: 3, point: [12, 42, 8], space: 'lattice' }); // 30 out: past the box
  await d.until(() => notices().length > 0, 10000, 'a notice for the pull past the box');
  const n = notices()[0];
  assert.equal(n.code, 'grab_at_boundary');
  assert.equal(n.seq, 3);
  assert.match(n.detail, /box/);
  // Held against the edge: no second notice; back inside, then out again: one more.
  d.send({ type: 'move', seq: 4, point: [12, 44, 8], space: 'lattice' });
  d.send({ type: 'move', seq: 5, point: [12, 13, 8], space: 'lattice' });
  await d.until(() => d.frames.some((f) => f.lastSeq >= 5), 10000, 'move 5 framed');
  assert.equal(notices().length, 1, 'the same edge was announced twice');
  d.send({ type: 'move', seq: 6, point: [12, 40, 8], space: 'lattice' });
  await d.until(() => notices().length === 2, 10000, 'a second notice after leaving the edge');
  await d.close();
});
