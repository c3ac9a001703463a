// objectframe.mjs: a small encoder of object frames (protocol/README.md "Kind 5") for the
// client's tests: records with KEY only (a snapshot, or new objects), triangles or line
// segments, with or without a scalar. The payload goes into a zstd frame of raw blocks (RFC
// 8878 3.1.1.2: stored, not compressed), which every zstd decoder reads; the streams through
// meshoptimizer's own encoder (the page's package, web-client/node_modules).
import { createRequire } from 'node:module';
import { pathToFileURL } from 'node:url';

const fromPage = (name) => import(pathToFileURL(createRequire(new URL('../../web-client/src/', import.meta.url)).resolve(name)));
const { MeshoptEncoder } = await fromPage('meshoptimizer');
await MeshoptEncoder.ready;

export const PRIM = { TRIANGLES: 1, LINES: 2 };
export const FLAG = { SNAPSHOT: 1, STRUCTURAL: 2 };

class Writer {
  constructor() { this.b = new Uint8Array(1024); this.n = 0; this.dv = new DataView(this.b.buffer); }
  room(k) {
    if (this.n + k <= this.b.length) return;
    const b = new Uint8Array(Math.max(this.b.length * 2, this.n + k));
    b.set(this.b);
    this.b = b;
    this.dv = new DataView(b.buffer);
  }
  u8(v) { this.room(1); this.dv.setUint8(this.n, v); this.n += 1; }
  u16(v) { this.room(2); this.dv.setUint16(this.n, v, true); this.n += 2; }
  u32(v) { this.room(4); this.dv.setUint32(this.n, v, true); this.n += 4; }
  u64(v) { this.room(8); this.dv.setBigUint64(this.n, BigInt(v), true); this.n += 8; }
  f32(v) { this.room(4); this.dv.setFloat32(this.n, v, true); this.n += 4; }
  f64(v) { this.room(8); this.dv.setFloat64(this.n, v, true); this.n += 8; }
  bytes(a) { this.room(a.length); this.b.set(a, this.n); this.n += a.length; }
  done() { return this.b.slice(0, this.n); }
}

/** A zstd frame holding raw as stored blocks. */
function zstdRaw(raw) {
  const w = new Writer();
  w.u32(0xfd2fb528);
  w.u8(0xa0); // frame header descriptor: 4-byte content size, single segment, no checksum
  w.u32(raw.length);
  const MAX = 128 * 1024;
  for (let p = 0; p === 0 || p < raw.length; p += MAX) {
    const n = Math.min(MAX, raw.length - p), last = p + n >= raw.length ? 1 : 0;
    const h = last | (0 << 1) | (n << 3); // a raw block
    w.u8(h & 0xff); w.u8((h >> 8) & 0xff); w.u8((h >> 16) & 0xff);
    w.bytes(raw.subarray(p, p + n));
  }
  return w.done();
}

/**
 * One object frame whose records all KEY their object. objects: [{id, key = 0, primitive,
 * qbits = 16, lod = 0, info = [], t = [0,0,0], r = [0,0,0,1], bmin, bmax, positions (local,
 * n x 3, inside the box), elements, scalars (n, or absent), smin, smax}], ids increasing.
 */
export function encodeKeys({ frame, lastSeq = 0, simTime = 0, flags = FLAG.SNAPSHOT | FLAG.STRUCTURAL, objects }) {
  const w = new Writer();
  w.u32(objects.length);
  for (const o of objects) {
    const qbits = o.qbits ?? 16, top = (1 << qbits) - 1, n = o.positions.length / 3;
    const hasScalar = !!o.scalars;
    w.u16(o.id); w.u16(o.key ?? 0); w.u8(2 /* KEY */); w.u8(0);
    w.u8(o.primitive); w.u8(qbits); w.u8(hasScalar ? 1 : 0); w.u8(o.lod ?? 0);
    const info = o.info ?? [];
    w.u8(info.length); w.u8(0); w.u8(0); w.u8(0);
    for (const v of info) w.f32(v);
    for (const v of o.t ?? [0, 0, 0]) w.f32(v);
    for (const v of o.r ?? [0, 0, 0, 1]) w.f32(v);
    for (const v of o.bmin) w.f32(v);
    for (const v of o.bmax) w.f32(v);
    const smin = hasScalar ? o.smin : 0, smax = hasScalar ? o.smax : 0;
    w.f32(smin); w.f32(smax);
    w.f32(Math.max(...o.bmax.map((v, k) => v - o.bmin[k])) / 65535 || 1e-6); // tstep
    const per = o.primitive === PRIM.TRIANGLES ? 3 : 2;
    w.u32(n); w.u32(o.elements.length / per);
    const idx = Uint32Array.from(o.elements);
    const enc = !idx.length ? new Uint8Array(0) : o.primitive === PRIM.TRIANGLES
      ? MeshoptEncoder.encodeIndexBuffer(new Uint8Array(idx.buffer), idx.length, 4)
      : MeshoptEncoder.encodeIndexSequence(new Uint8Array(idx.buffer), idx.length, 4);
    w.u32(enc.length); w.bytes(enc);
    const q = new Uint16Array(n * 4);
    for (let i = 0; i < n; i++) {
      for (let b = 0; b < 3; b++) {
        const ext = o.bmax[b] - o.bmin[b];
        q[i * 4 + b] = ext > 0 ? Math.max(0, Math.min(top, Math.round((o.positions[i * 3 + b] - o.bmin[b]) / ext * top))) : 0;
      }
      if (hasScalar) q[i * 4 + 3] = smax > smin ? Math.max(0, Math.min(65535, Math.round((o.scalars[i] - smin) / (smax - smin) * 65535))) : 0;
    }
    const venc = n ? MeshoptEncoder.encodeVertexBuffer(new Uint8Array(q.buffer), n, 8) : new Uint8Array(0);
    w.u32(venc.length); w.bytes(venc);
  }
  const raw = w.done(), z = zstdRaw(raw);
  const h = new Writer();
  h.u32(0x31464353); h.u8(2); h.u8(5); h.u16(40);
  h.u64(frame); h.u32(lastSeq); h.u32(raw.length); h.f64(simTime); h.u32(z.length); h.u32(flags);
  h.bytes(z);
  return h.done();
}
