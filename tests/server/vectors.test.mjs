// The JavaScript decoder against the protocol's test vectors (the same files the C tests check).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { decompress } from 'fzstd';
import { MeshoptDecoder } from 'meshoptimizer';
import { createDecoder, ProtocolError } from '../../protocol/js/softcast-proto.mjs';

const dir = new URL('../../protocol/vectors/', import.meta.url);
const want = JSON.parse(readFileSync(new URL('vectors.json', dir)));
const bin = (n) => new Uint8Array(readFileSync(new URL(n, dir)));

await MeshoptDecoder.ready;
const d = createDecoder({ decompress, MeshoptDecoder });

function sameTriangles(got, exp) {
  for (let t = 0; t < exp.length / 3; t++) {
    const a = got.slice(t * 3, t * 3 + 3), b = exp.slice(t * 3, t * 3 + 3);
    const ok = [0, 1, 2].some((r) => a[0] === b[r] && a[1] === b[(r + 1) % 3] && a[2] === b[(r + 2) % 3]);
    assert.ok(ok, `triangle ${t}: ${a} vs ${b}`);
  }
}

test('mesh keyframe vector', () => {
  const w = want['mesh_key.bin'];
  const m = d.decodeMesh(bin('mesh_key.bin'));
  assert.equal(m.header.kind, w.kind);
  assert.equal(m.header.frame, w.frame);
  assert.equal(m.header.lastSeq, w.last_seq);
  assert.equal(m.header.simTime, w.sim_time_s);
  assert.deepEqual(m.bmin, w.bmin);
  assert.deepEqual(m.bmax, w.bmax);
  w.surfaces.forEach((ws, s) => {
    assert.equal(m.surfaces[s].id, ws.id);
    assert.equal(m.surfaces[s].ntri, ws.ntri);
    assert.deepEqual(Array.from(m.surfaces[s].q), ws.q);
    sameTriangles(Array.from(m.surfaces[s].tri), ws.tri);
  });
});

test('mesh delta vector applies to its keyframe', () => {
  const w = want['mesh_delta.bin'];
  const key = d.decodeMesh(bin('mesh_key.bin'));
  const m = d.decodeMesh(bin('mesh_delta.bin'));
  assert.equal(m.header.frame, w.frame);
  assert.equal(m.keyFrame, w.key_frame);
  w.surfaces.forEach((ws, s) => {
    assert.deepEqual(Array.from(m.surfaces[s].delta), ws.delta);
    assert.deepEqual(Array.from(d.applyDelta(key, m, s)), ws.q_after);
  });
});

test('slice vector', () => {
  const w = want['slice.bin'];
  const s = d.decodeSlice(bin('slice.bin'));
  assert.equal(s.header.frame, w.frame);
  assert.equal(s.plane, w.plane);
  assert.equal(s.index, w.index);
  assert.equal(s.width, w.width);
  assert.equal(s.height, w.height);
  assert.equal(s.level, w.level);
  assert.equal(s.window, w.window);
  assert.deepEqual(Array.from(s.pixels), w.pixels);
});

test('LOD table vector', () => {
  const w = want['lod_table.bin'];
  const t = d.decode(bin('lod_table.bin'));
  assert.equal(t.header.kind, w.kind);
  assert.equal(t.header.frame, w.frame);
  assert.equal(t.header.lastSeq, w.last_seq);
  assert.deepEqual(t.lods.map((e) => [e.lod, e.firstVertex, e.nvert, e.ePos, e.eVel]),
    w.lods.map((e) => [e.lod, e.first_vertex, e.nvert, Math.fround(e.e_pos), e.e_vel]));
});

test('garbage is refused with a ProtocolError', () => {
  const b = bin('mesh_key.bin');
  assert.throws(() => d.decode(b.subarray(0, 20)), ProtocolError);
  const c = b.slice();
  c[0] ^= 1;
  assert.throws(() => d.decode(c), ProtocolError);
});
