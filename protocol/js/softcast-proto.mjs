// softcast-proto.mjs: the wire format (protocol/README.md) decoded in JavaScript, for the
// browser client and the node tests. Dependencies are passed in, so the same file runs
// under node and in the browser: a zstd decompressor (fzstd's decompress) and
// meshoptimizer's MeshoptDecoder (await its .ready first).

export const MAGIC = 0x31464353; // "SCF1"
export const VERSION = 1;
export const HEADER_SIZE = 40;
export const KIND = { MESH_KEY: 1, MESH_DELTA: 2, SLICE: 3, LOD_TABLE: 4 };
const MAX_PAYLOAD = 64 << 20;

export class ProtocolError extends Error {}

export function readHeader(bytes) {
  if (bytes.length < HEADER_SIZE) throw new ProtocolError('frame too short');
  const dv = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  if (dv.getUint32(0, true) !== MAGIC) throw new ProtocolError('not a Softcast frame');
  const version = dv.getUint8(4);
  if (version !== VERSION) throw new ProtocolError(`unknown protocol version ${version}`);
  if (dv.getUint16(6, true) !== HEADER_SIZE) throw new ProtocolError('bad header size');
  const h = {
    version,
    kind: dv.getUint8(5),
    frame: Number(dv.getBigUint64(8, true)),
    lastSeq: dv.getUint32(16, true),
    rawSize: dv.getUint32(20, true),
    simTime: dv.getFloat64(24, true),
    payloadSize: dv.getUint32(32, true),
  };
  if (h.kind < 1 || h.kind > 4) throw new ProtocolError(`unknown kind ${h.kind}`);
  if (h.rawSize > MAX_PAYLOAD || h.payloadSize !== bytes.length - HEADER_SIZE)
    throw new ProtocolError('bad payload size');
  return h;
}

class Cursor {
  constructor(bytes) {
    this.b = bytes;
    this.dv = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    this.p = 0;
  }
  need(n) {
    if (this.p + n > this.b.length) throw new ProtocolError('truncated payload');
  }
  u8() { this.need(1); return this.b[this.p++]; }
  u32() { this.need(4); const v = this.dv.getUint32(this.p, true); this.p += 4; return v; }
  u64() { this.need(8); const v = Number(this.dv.getBigUint64(this.p, true)); this.p += 8; return v; }
  f32() { this.need(4); const v = this.dv.getFloat32(this.p, true); this.p += 4; return v; }
  bytes(n) { this.need(n); const v = this.b.subarray(this.p, this.p + n); this.p += n; return v; }
}

export function createDecoder({ decompress, MeshoptDecoder }) {
  function payload(bytes, h) {
    const raw = decompress(bytes.subarray(HEADER_SIZE));
    if (raw.length !== h.rawSize) throw new ProtocolError('payload size mismatch');
    return raw;
  }

  function vertices(c, nvert) {
    const enc = c.bytes(c.u32());
    const out = new Uint8Array(nvert * 8);
    if (nvert) MeshoptDecoder.decodeVertexBuffer(out, nvert, 8, enc);
    const v16 = new Uint16Array(out.buffer, out.byteOffset, nvert * 4); // little-endian hosts
    const q = new Uint16Array(nvert * 3);
    for (let i = 0; i < nvert; i++) {
      q[i * 3] = v16[i * 4];
      q[i * 3 + 1] = v16[i * 4 + 1];
      q[i * 3 + 2] = v16[i * 4 + 2];
    }
    return q;
  }

  /** Decode a mesh frame (keyframe or delta) into {header, bmin, bmax, keyFrame, surfaces}. */
  function decodeMesh(bytes) {
    const h = readHeader(bytes);
    if (h.kind !== KIND.MESH_KEY && h.kind !== KIND.MESH_DELTA) throw new ProtocolError('not a mesh frame');
    const c = new Cursor(payload(bytes, h));
    const key = h.kind === KIND.MESH_KEY;
    const nsurf = c.u32();
    if (nsurf > 4) throw new ProtocolError('too many surfaces');
    const m = { header: h, surfaces: [] };
    if (key) {
      m.bmin = [c.f32(), c.f32(), c.f32()];
      m.bmax = [c.f32(), c.f32(), c.f32()];
    } else {
      m.keyFrame = c.u64();
    }
    for (let s = 0; s < nsurf; s++) {
      const id = c.u8();
      c.bytes(3);
      const nvert = c.u32();
      const surf = { id, nvert };
      if (key) {
        surf.ntri = c.u32();
        const ib = c.u32();
        const enc = c.bytes(ib);
        surf.tri = new Uint32Array(surf.ntri * 3);
        if (surf.ntri) MeshoptDecoder.decodeIndexBuffer(new Uint8Array(surf.tri.buffer), surf.ntri * 3, 4, enc);
        for (const i of surf.tri) if (i >= nvert) throw new ProtocolError('index out of range');
        surf.q = vertices(c, nvert);
      } else {
        surf.delta = vertices(c, nvert);
      }
      m.surfaces.push(surf);
    }
    if (c.p !== c.b.length) throw new ProtocolError('trailing bytes');
    return m;
  }

  /** Positions after a delta: (key + delta) mod 2^16, per surface. */
  function applyDelta(keyMesh, deltaMesh, s) {
    if (deltaMesh.keyFrame !== keyMesh.header.frame) throw new ProtocolError('delta for another keyframe');
    const k = keyMesh.surfaces[s].q, d = deltaMesh.surfaces[s].delta;
    const out = new Uint16Array(k.length);
    for (let i = 0; i < k.length; i++) out[i] = (k[i] + d[i]) & 0xffff;
    return out;
  }

  /** Quantised positions to world mm. */
  function dequantise(q, bmin, bmax) {
    const p = new Float32Array(q.length);
    for (let i = 0; i < q.length; i++) {
      const b = i % 3;
      p[i] = bmin[b] + (bmax[b] - bmin[b]) * (q[i] / 65535);
    }
    return p;
  }

  function decodeSlice(bytes) {
    const h = readHeader(bytes);
    if (h.kind !== KIND.SLICE) throw new ProtocolError('not a slice frame');
    const c = new Cursor(payload(bytes, h));
    const plane = c.u8();
    c.bytes(3);
    const index = c.u32(), width = c.u32(), height = c.u32();
    const level = c.f32(), window = c.f32();
    const pixels = c.bytes(width * height);
    if (c.p !== c.b.length || plane > 2) throw new ProtocolError('bad slice');
    return { header: h, plane, index, width, height, level, window, pixels };
  }

  /** Kind 4: each character's LOD and vertex range in the keyframe of the same frame. */
  function decodeLodTable(bytes) {
    const h = readHeader(bytes);
    if (h.kind !== KIND.LOD_TABLE) throw new ProtocolError('not a LOD table');
    const c = new Cursor(payload(bytes, h));
    const n = c.u32();
    if (n * 20 + 4 !== c.b.length) throw new ProtocolError('bad LOD table');
    const entries = [];
    for (let i = 0; i < n; i++) {
      const lod = c.u8();
      if (c.u8() || c.u8() || c.u8()) throw new ProtocolError('bad LOD table');
      const e = { lod, firstVertex: c.u32(), nvert: c.u32(), ePos: c.f32(), eVel: c.f32() };
      if (!Number.isFinite(e.ePos) || !Number.isFinite(e.eVel)) throw new ProtocolError('bad LOD table');
      entries.push(e);
    }
    return { header: h, lods: entries };
  }

  function decode(bytes) {
    const h = readHeader(bytes);
    return h.kind === KIND.SLICE ? decodeSlice(bytes)
      : h.kind === KIND.LOD_TABLE ? decodeLodTable(bytes) : decodeMesh(bytes);
  }

  return { decode, decodeMesh, decodeSlice, decodeLodTable, applyDelta, dequantise, readHeader };
}
