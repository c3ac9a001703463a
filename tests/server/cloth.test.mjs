// The cloth scene through the server: a crowd session whose characters are one object each
// (cape then body, in the root frame, the root's transform), a forced LOD switch that
// re-keys that character alone, motions, wind and a grab, and the events that belong to
// the other scene refused with a reason.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, api, Client, wsUrl } from './harness.mjs';
import { applyTransform } from '../../protocol/js/softcast-proto.mjs';

let srv;
before(async () => { srv = await startServer([]); });
after(async () => { assert.equal(await srv.stop(), 0); });

const lastState = (c) => c.texts.filter((t) => t.type === 'state').at(-1);
const newest = (c) => c.frames.at(-1);

// Vertex j of character id in world metres, as the client holds it now.
function where(c, id, j) {
  const f = newest(c), o = f.objects[id], q = f.q[id], top = 2 ** o.qbits - 1;
  const local = Float32Array.from([0, 1, 2], (b) => o.bmin[b] + (o.bmax[b] - o.bmin[b]) * (q[j * 4 + b] / top));
  return Array.from(applyTransform(local, o.transform));
}

test('cloth: REST options, one object per character, a forced switch re-keys that character alone', async () => {
  const bad = await api(srv.base, 'POST', '/api/sessions', { scene: 'cloth', characters: 0 });
  assert.equal(bad.status, 400);
  assert.match(bad.json.detail, /characters/);
  const unknown = await api(srv.base, 'POST', '/api/sessions', { scene: 'kite' });
  assert.equal(unknown.status, 400);
  assert.match(unknown.json.detail, /volume, cloth/);
  const r = await api(srv.base, 'POST', '/api/sessions', { scene: 'cloth', characters: 3 });
  assert.equal(r.status, 201);
  assert.equal(r.json.scene, 'cloth');
  assert.equal(r.json.characters, 3);
  const s = r.json;
  const c = await new Client(wsUrl(s, s.control_token)).open();
  await c.until(() => c.frames.length && lastState(c), 10000, 'first frame and state');
  assert.equal(lastState(c).scene, 'cloth');
  assert.equal(lastState(c).params.substeps, 10);
  // It starts at a snapshot: the three characters, each a cape (info: its vertex and
  // triangle counts) and a body after it.
  const first = c.frames[0];
  assert.ok(first.snapshot, 'the first frame is a snapshot');
  assert.deepEqual(Object.keys(first.objects).map(Number), [0, 1, 2]);
  for (const o of Object.values(first.objects)) {
    assert.equal(o.info.length, 4);
    assert.ok(o.info[2] > 0 && o.nvert > o.info[2], `cape ${o.info[2]} of ${o.nvert} vertices`);
    assert.ok(o.nelem > o.info[3], 'a body after the cape');
  }
  const before = newest(c).objects;
  // Force character 0 to the coarsest LOD: its object re-keys with fewer vertices; the
  // others keep their keys.
  c.send({ type: 'force_lod', seq: 1, character: 0, lod: 2 });
  await c.until(() => newest(c).objects[0].lod === 2, 10000, 'switch');
  const sw = c.frames.find((f) => f.objects[0].lod === 2);
  assert.ok(sw.key && !sw.snapshot, 'the switch is structural, not a snapshot');
  assert.ok(sw.objects[0].nvert < before[0].nvert);
  assert.notEqual(sw.objects[0].key, before[0].key);
  for (const id of [1, 2]) assert.equal(sw.objects[id].key, before[id].key, `character ${id} re-keyed`);
  // Walking: the roots move (transforms), deltas keep applying (the client counts any that
  // would not), and no frame is a snapshot (a cape that flutters far from its key re-keys
  // alone).
  c.send({ type: 'motion', seq: 2, character: -1, motion: 'walk' });
  c.send({ type: 'wind', seq: 3, impulse: [-2, 0, 1] });
  const n0 = c.frames.length;
  await c.until(() => c.frames.length > n0 + 30, 10000, 'frames while walking');
  assert.equal(c.errors, 0, c.refusals.join('; '));
  const walked = newest(c).objects[1].transform.t, stood = before[1].transform.t;
  assert.ok(Math.hypot(walked[0] - stood[0], walked[1] - stood[1]) > 0.1, 'character 1 walked');
  assert.ok(c.frames.slice(n0).every((f) => !f.snapshot), 'a snapshot while walking');
  // Hold a bottom corner of character 1 at a hand 5 cm behind and 5 cm above it: the
  // corner goes to the hand and stays; then let go.
  c.send({ type: 'motion', seq: 4, character: -1, motion: 'idle' });
  await c.until(() => c.frames.some((f) => f.lastSeq >= 4), 10000, 'idle applied');
  const corner = newest(c).objects[1].info[2] - 1;
  const p0 = where(c, 1, corner), hand = [p0[0] - 0.05, p0[1], p0[2] + 0.05];
  c.send({ type: 'grab', seq: 5, character: 1, vertex: corner, point: hand });
  await c.until(() => c.frames.some((f) => f.lastSeq >= 5), 10000, 'grab applied');
  const n1 = c.frames.length;
  await c.until(() => c.frames.length > n1 + 3, 10000, 'frames while held');
  assert.equal(newest(c).objects[1].qbits, 10, 'the held character at the precision the driver sees');
  const held = where(c, 1, corner);
  const off = Math.hypot(held[0] - hand[0], held[1] - hand[1], held[2] - hand[2]);
  assert.ok(off < 0.01, `the held vertex is ${off.toFixed(3)} m from the hand`);
  c.send({ type: 'release', seq: 6 });
  await c.until(() => c.frames.some((f) => f.lastSeq >= 6), 10000, 'release applied');
  // The volume's events and bad ones: refused, with the reason, the connection kept.
  c.send({ type: 'slice', seq: 7, plane: 'axial', index: 1, level: 40, width: 400 });
  c.send({ type: 'motion', seq: 8, character: 0, motion: 'moonwalk' });
  c.send({ type: 'grab', seq: 9, point: [0, 0, 1], radius: 3 });
  c.send({ type: 'set_params', seq: 10, params: { substeps: 12 } });
  await c.until(() => c.texts.filter((t) => t.type === 'error').length >= 3 &&
                      lastState(c).params.substeps === 12, 10000, 'refusals and params');
  const errs = c.texts.filter((t) => t.type === 'error');
  assert.ok(errs.some((t) => t.seq === 7 && t.error === 'not in this scene'));
  assert.ok(errs.some((t) => t.seq === 8 && /motion must be/.test(t.detail)));
  assert.ok(errs.some((t) => t.seq === 9 && /character and vertex/.test(t.detail)));
  // A late joiner starts at a snapshot of every character, character 0 still coarse, and
  // then shows what the driver shows.
  const v = await new Client(wsUrl(s, s.view_token)).open();
  await v.until(() => v.frames.length > 5, 10000, 'joiner frames');
  assert.ok(v.frames[0].snapshot, 'the joiner starts at a snapshot');
  assert.deepEqual(Object.keys(v.frames[0].objects).map(Number), [0, 1, 2]);
  assert.equal(v.frames[0].objects[0].lod, 2);
  const same = v.frames.at(-1), there = c.frames.find((f) => f.frame === same.frame);
  if (there) assert.deepEqual(Array.from(same.q[2]), Array.from(there.q[2]));
  assert.equal(v.errors + c.errors, 0, [...v.refusals, ...c.refusals].join('; '));
  await v.close();
  await c.close();
  const del = await api(srv.base, 'DELETE', `/api/sessions/${s.id}`, undefined, { authorization: `Bearer ${s.control_token}` });
  assert.equal(del.status, 204);
});
