// The JavaScript decoder against the protocol's test vectors (the same files the C tests check):
// the object frame sequence (each step applied to the decoder it names, refusals included),
// the slice, and the deprecated version 1 frames.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { decompress } from 'fzstd';
import { MeshoptDecoder } from 'meshoptimizer';
import {
  createDecoder, ProtocolError, applyTransform, readHeader, KIND, PART, PRIM, VERSION,
} from '../../protocol/js/softcast-proto.mjs';

const dir = new URL('../../protocol/vectors/', import.meta.url);
const want = JSON.parse(readFileSync(new URL('vectors.json', dir)));
const bin = (n) => new Uint8Array(readFileSync(new URL(n, dir)));

await MeshoptDecoder.ready;
const d = createDecoder({ decompress, MeshoptDecoder });

function sameTriangles(got, exp) {
  assert.equal(got.length, exp.length);
  for (let t = 0; t < exp.length / 3; t++) {
    const a = got.slice(t * 3, t * 3 + 3), b = exp.slice(t * 3, t * 3 + 3);
    const ok = [0, 1, 2].some((r) => a[0] === b[r] && a[1] === b[(r + 1) % 3] && a[2] === b[(r + 2) % 3]);
    assert.ok(ok, `triangle ${t}: ${a} vs ${b}`);
  }
}

const f32s = (a) => a.map(Math.fround);

function checkHeader(h, w) {
  assert.equal(h.version, w.version);
  assert.equal(h.kind, w.kind);
  assert.equal(h.flags, w.flags);
  assert.equal(h.frame, w.frame);
  assert.equal(h.lastSeq, w.last_seq);
  assert.equal(h.simTime, w.sim_time_s);
}

function checkObject(o, w, where) {
  const at = `${where}, object ${w.id}`;
  assert.ok(o, `${at}: missing`);
  for (const [k, j] of [['id', 'id'], ['key', 'key'], ['parts', 'parts'], ['primitive', 'primitive'],
    ['qbits', 'qbits'], ['lod', 'lod'], ['nvert', 'nvert'], ['nelem', 'nelem']])
    assert.equal(o[k], w[j], `${at}: ${k}`);
  assert.equal(o.hasScalar, !!w.has_scalar, `${at}: hasScalar`);
  assert.deepEqual(o.info, f32s(w.info), `${at}: info`);
  assert.deepEqual(o.bmin, f32s(w.bmin), `${at}: bmin`);
  assert.deepEqual(o.bmax, f32s(w.bmax), `${at}: bmax`);
  assert.equal(o.smin, Math.fround(w.smin), `${at}: smin`);
  assert.equal(o.smax, Math.fround(w.smax), `${at}: smax`);
  assert.equal(o.tstep, Math.fround(w.tstep), `${at}: tstep`);
  assert.deepEqual(o.keyTransform, { t: f32s(w.key_transform.t), r: f32s(w.key_transform.r) }, `${at}: key transform`);
  assert.deepEqual(o.transform, { t: f32s(w.transform.t), r: f32s(w.transform.r) }, `${at}: transform`);
  if (o.primitive === PRIM.TRIANGLES) sameTriangles(Array.from(o.elements), w.elements);
  else assert.deepEqual(Array.from(o.elements), w.elements, `${at}: segments`);
  assert.deepEqual(Array.from(o.baseQ), w.base_q, `${at}: base_q`);
  assert.deepEqual(Array.from(o.q), w.q, `${at}: q`);
  // Positions: bmin + (bmax - bmin) * q / (2^qbits - 1), in float32 like the C decoder.
  const top = (1 << o.qbits) - 1;
  for (let i = 0; i < o.nvert; i++)
    for (let b = 0; b < 3; b++) {
      const p = o.bmin[b] + (o.bmax[b] - o.bmin[b]) * (w.q[i * 4 + b] / top);
      assert.ok(Math.abs(o.positions[i * 3 + b] - p) <= 1e-6 * Math.max(1, Math.abs(p)), `${at}: position ${i}`);
    }
  if (o.hasScalar)
    for (let i = 0; i < o.nvert; i++) {
      const s = o.smin + (o.smax - o.smin) * (w.q[i * 4 + 3] / 65535);
      assert.ok(Math.abs(o.scalars[i] - s) <= 1e-6 * Math.max(1, Math.abs(s)), `${at}: scalar ${i}`);
    }
  else assert.equal(o.scalars, null);
}

test('object frame sequence: every step decodes to what vectors.json states', () => {
  const decoders = new Map();
  let applied = 0, refused = 0;
  want.objects.forEach((w, i) => {
    if (!decoders.has(w.decoder)) decoders.set(w.decoder, d.createObjectDecoder());
    const dec = decoders.get(w.decoder);
    const where = `step ${i} (${w.file} on ${w.decoder})`;
    if (w.refused) {
      const before = JSON.stringify(dec.objects.map((o) => [o.id, o.key, o.nvert, Array.from(o.q), o.transform]));
      assert.throws(() => dec.apply(bin(w.file)), (e) => e instanceof ProtocolError && e.code === w.refused, where);
      const after = JSON.stringify(dec.objects.map((o) => [o.id, o.key, o.nvert, Array.from(o.q), o.transform]));
      assert.equal(after, before, `${where}: the refusal changed the decoder`);
      refused++;
      return;
    }
    const f = dec.apply(bin(w.file));
    checkHeader(f.header, w);
    assert.deepEqual(f.removed, w.removed, `${where}: removed`);
    assert.deepEqual(f.objects.map((o) => o.id), w.objects.map((o) => o.id), `${where}: ids`);
    w.objects.forEach((wo, k) => checkObject(f.objects[k], wo, where));
    applied++;
  });
  assert.ok(applied >= 8 && refused >= 3);
});

test('applyTransform turns local positions to world', () => {
  const yaw90 = { t: [10, 0, 0], r: [0, 0, Math.SQRT1_2, Math.SQRT1_2] };
  const w = applyTransform(new Float32Array([1, 0, 0, 0, 2, 3]), yaw90);
  const exp = [10, 1, 0, 8, 0, 3];
  exp.forEach((v, i) => assert.ok(Math.abs(w[i] - v) < 1e-6, `${i}: ${w[i]} vs ${v}`));
  // An object of the sequence: the stem after its growth, in world.
  const dec = d.createObjectDecoder();
  for (const n of ['objects-01-key.bin', 'objects-02-transform.bin', 'objects-03-delta.bin',
    'objects-04-hold.bin', 'objects-05-hold-transform.bin', 'objects-06-rekey.bin',
    'objects-07-lines.bin', 'objects-08-append.bin'])
    dec.apply(bin(n));
  const stem = dec.get(7);
  const world = applyTransform(stem.positions, stem.transform);
  assert.equal(world.length, 18);
  assert.ok(Math.abs(world[1] - 5) <= 2 / 1023); // the root, moved 5 along y (within a step)
});

test('a held object says so in parts: its positions stay the same arrays, its transform moves', () => {
  const dec = d.createObjectDecoder();
  for (const n of ['objects-01-key.bin', 'objects-02-transform.bin', 'objects-03-delta.bin'])
    dec.apply(bin(n));
  const { positions, scalars, transform } = dec.get(2);
  dec.apply(bin('objects-04-hold.bin'));
  let b = dec.get(2);
  assert.equal(b.parts, PART.HOLD);
  assert.ok(b.positions === positions && b.scalars === scalars, 'HOLD: the same arrays');
  assert.deepEqual(b.transform, transform);
  dec.apply(bin('objects-05-hold-transform.bin'));
  b = dec.get(2);
  assert.equal(b.parts, PART.HOLD | PART.TRANSFORM);
  assert.ok(b.positions === positions && b.scalars === scalars, 'HOLD | TRANSFORM: the same arrays');
  assert.notDeepEqual(b.transform, transform);
  dec.apply(bin('objects-06-rekey.bin')); // shown again: this frame's vertices
  b = dec.get(2);
  assert.equal(b.parts, PART.TRANSFORM | PART.DELTA);
  assert.notEqual(b.positions, positions);
});

test('slice vector', () => {
  const w = want['slice.bin'];
  const s = d.decodeSlice(bin('slice.bin'));
  checkHeader(s.header, w);
  assert.equal(s.header.version, VERSION);
  assert.equal(s.plane, w.plane);
  assert.equal(s.index, w.index);
  assert.equal(s.width, w.width);
  assert.equal(s.height, w.height);
  assert.equal(s.level, w.level);
  assert.equal(s.window, w.window);
  assert.deepEqual(Array.from(s.pixels), w.pixels);
});

test('version 1 (deprecated): mesh keyframe vector', () => {
  const w = want['mesh_key.bin'];
  const m = d.decodeMesh(bin('mesh_key.bin'));
  checkHeader(m.header, w);
  assert.deepEqual(m.bmin, w.bmin);
  assert.deepEqual(m.bmax, w.bmax);
  w.surfaces.forEach((ws, s) => {
    assert.equal(m.surfaces[s].id, ws.id);
    assert.equal(m.surfaces[s].ntri, ws.ntri);
    assert.deepEqual(Array.from(m.surfaces[s].q), ws.q);
    sameTriangles(Array.from(m.surfaces[s].tri), ws.tri);
  });
});

test('version 1 (deprecated): mesh delta vector applies to its keyframe', () => {
  const w = want['mesh_delta.bin'];
  const key = d.decodeMesh(bin('mesh_key.bin'));
  const m = d.decodeMesh(bin('mesh_delta.bin'));
  checkHeader(m.header, w);
  assert.equal(m.keyFrame, w.key_frame);
  w.surfaces.forEach((ws, s) => {
    assert.deepEqual(Array.from(m.surfaces[s].delta), ws.delta);
    assert.deepEqual(Array.from(d.applyDelta(key, m, s)), ws.q_after);
  });
});

test('version 1 (deprecated): LOD table vector', () => {
  const w = want['lod_table.bin'];
  const t = d.decode(bin('lod_table.bin'));
  checkHeader(t.header, w);
  assert.deepEqual(t.lods.map((e) => [e.lod, e.firstVertex, e.nvert, e.ePos, e.eVel]),
    w.lods.map((e) => [e.lod, e.first_vertex, e.nvert, Math.fround(e.e_pos), Math.fround(e.e_vel)]));
});

test('garbage is refused with a ProtocolError and a code', () => {
  const b = bin('objects-01-key.bin');
  const code = (bytes) => {
    try {
      d.createObjectDecoder().apply(bytes);
    } catch (e) {
      assert.ok(e instanceof ProtocolError, String(e));
      return e.code;
    }
    return 'ok';
  };
  assert.equal(code(b.subarray(0, 20)), 'short');
  const c = b.slice();
  c[0] ^= 1;
  assert.equal(code(c), 'magic');
  const v = b.slice();
  v[4] = 9;
  assert.equal(code(v), 'version');
  const k = b.slice();
  k[4] = 1; // version 1 has no kind 5
  assert.equal(code(k), 'kind');
  const f = b.slice();
  f[36] = 4 | 2;
  assert.equal(code(f), 'corrupt');
  assert.equal(code(bin('slice.bin')), 'kind');
  for (let n = 0; n < b.length; n++) assert.notEqual(code(b.subarray(0, n)), 'ok', `prefix ${n}`);
  // Flipped bits: refused, or decoded consistently.
  let refusedN = 0;
  for (let t = 0; t < 500; t++) {
    const x = b.slice();
    x[40 + ((t * 7919) % (b.length - 40))] ^= 1 << (t % 8);
    const dec = d.createObjectDecoder();
    try {
      for (const o of dec.apply(x).objects) {
        const es = o.primitive === PRIM.TRIANGLES ? 3 : 2;
        assert.equal(o.elements.length, o.nelem * es);
        for (const i of o.elements) assert.ok(i < o.nvert);
      }
    } catch (e) {
      assert.ok(e instanceof ProtocolError, String(e));
      refusedN++;
    }
  }
  assert.ok(refusedN > 0);
  // readHeader takes both versions while the server still sends version 1.
  assert.equal(readHeader(bin('mesh_key.bin')).kind, KIND.MESH_KEY);
  assert.equal(readHeader(b).kind, KIND.OBJECTS);
  assert.throws(() => d.decode(b), (e) => e.code === 'kind');
});
