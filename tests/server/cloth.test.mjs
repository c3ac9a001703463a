// The cloth scene through the server: a crowd session, the LOD table before every
// keyframe, a forced LOD switch that changes the topology, motions, wind and a grab, and
// the events that belong to the other scene refused with a reason.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, api, Client, wsUrl } from './harness.mjs';

let srv;
before(async () => { srv = await startServer([]); });
after(async () => { assert.equal(await srv.stop(), 0); });

const lastState = (c) => c.texts.filter((t) => t.type === 'state').at(-1);
const capeSurface = (c) => c.key.surfaces.find((s) => s.id === 2);

test('cloth: REST options, LOD table before each keyframe, a forced switch re-keys the topology', async () => {
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
  await c.until(() => c.key && lastState(c), 10000, 'first keyframe and state');
  assert.equal(lastState(c).scene, 'cloth');
  assert.equal(lastState(c).params.substeps, 10);
  // The table came first and describes the keyframe: same frame, vertex ranges cover the capes.
  assert.ok(c.tables.length >= 1);
  const table = c.tables.at(-1);
  assert.equal(table.header.frame, c.key.header.frame);
  assert.equal(table.lods.length, 3);
  const cape = capeSurface(c);
  assert.equal(table.lods.reduce((n, e) => n + e.nvert, 0), cape.nvert);
  assert.ok(c.key.surfaces.some((x) => x.id === 3 && x.ntri > 0), 'bodies');
  const before = table.lods[0];
  // Force character 0 to the coarsest LOD: a new table and a keyframe with fewer vertices.
  c.send({ type: 'force_lod', seq: 1, character: 0, lod: 2 });
  await c.until(() => c.tables.length >= 2 && c.key.header.frame === c.tables.at(-1).header.frame &&
                      c.tables.at(-1).lods[0].lod === 2, 10000, 'switch keyframe');
  const after = c.tables.at(-1).lods[0];
  assert.ok(after.nvert < before.nvert);
  assert.equal(capeSurface(c).nvert, cape.nvert - before.nvert + after.nvert);
  // Deltas keep applying to the new keyframe (the client counts any that would not).
  c.send({ type: 'motion', seq: 2, character: -1, motion: 'walk' });
  c.send({ type: 'wind', seq: 3, impulse: [-2, 0, 1] });
  const n0 = c.frames.length;
  await c.until(() => c.frames.length > n0 + 20, 10000, 'frames while walking');
  assert.equal(c.errors, 0);
  // Hold a bottom corner of character 1 at a hand 5 cm behind and 5 cm above it: the
  // corner goes to the hand and stays; then let go.
  const capeIndex = () => c.key.surfaces.findIndex((x) => x.id === 2);
  const where = (j) => {
    const q = c.q[capeIndex()], { bmin, bmax } = c.key;
    return [0, 1, 2].map((b) => bmin[b] + (bmax[b] - bmin[b]) * (q[j * 3 + b] / 65535));
  };
  c.send({ type: 'motion', seq: 4, character: -1, motion: 'idle' });
  const e1 = c.tables.at(-1).lods[1], corner = e1.nvert - 1, j = e1.firstVertex + corner;
  const p0 = where(j), hand = [p0[0] - 0.05, p0[1], p0[2] + 0.05];
  c.send({ type: 'grab', seq: 5, character: 1, vertex: corner, point: hand });
  await c.until(() => c.frames.some((f) => f.lastSeq >= 5), 10000, 'grab applied');
  const n1 = c.frames.length;
  await c.until(() => c.frames.length > n1 + 3, 10000, 'frames while held');
  const held = where(c.tables.at(-1).lods[1].firstVertex + corner);
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
  // A late joiner gets the table, then the keyframe it describes.
  const v = await new Client(wsUrl(s, s.view_token)).open();
  await v.until(() => v.key, 10000, 'joiner keyframe');
  assert.equal(v.tables.at(-1).header.frame, v.key.header.frame);
  await v.close();
  await c.close();
  const del = await api(srv.base, 'DELETE', `/api/sessions/${s.id}`, undefined, { authorization: `Bearer ${s.control_token}` });
  assert.equal(del.status, 204);
});
