// softcast-proto.mjs: the wire format (protocol/README.md) decoded in JavaScript, for the
// browser client and the node tests. Dependencies are passed in, so the same file runs
// under node and in the browser: a zstd decompressor (fzstd's decompress) and
// meshoptimizer's MeshoptDecoder (await its .ready first).
//
// Version 2: object frames (kind 5), decoded by a stateful decoder (createObjectDecoder)
// that holds each object's key across frames, and slices (kind 3). Any other version is
// refused (code 'version'), version 1 included.

export const MAGIC = 0x31464353; // "SCF1"
export const VERSION = 2;
export const HEADER_SIZE = 40;
export const KIND = { SLICE: 3, OBJECTS: 5 };
export const FLAG = { SNAPSHOT: 1, STRUCTURAL: 2 };
export const PART = { REMOVE: 1, KEY: 2, APPEND: 4, TRANSFORM: 8, DELTA: 16, HOLD: 32, SPARSE: 64 };
export const PRIM = { TRIANGLES: 1, LINES: 2 };
/** The limits every decoder keeps (protocol/README.md "Limits"; proto.h PROTO_MAX_*). */
export const LIMITS = {
  PAYLOAD: 64 << 20,
  OBJECTS: 4096,
  OBJECT_VERTS: 1 << 22,
  OBJECT_ELEMS: 1 << 22,
  TOTAL_VERTS: 1 << 23,
  TOTAL_ELEMS: 1 << 23,
  INFO: 4,
};
const MAX_PAYLOAD = LIMITS.PAYLOAD;

/** A refused frame. code: 'short', 'magic', 'version', 'kind', 'limit', 'corrupt' (the
 * bytes disagree with themselves) or 'state' (a well-formed frame that does not fit the
 * objects held: an object or key not held, an append that does not start at the end). */
export class ProtocolError extends Error {
  constructor(message, code = 'corrupt') {
    super(message);
    this.code = code;
  }
}

export function readHeader(bytes) {
  if (bytes.length < 8) throw new ProtocolError('frame too short', 'short');
  const dv = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  if (dv.getUint32(0, true) !== MAGIC) throw new ProtocolError('not a Softcast frame', 'magic');
  const version = dv.getUint8(4);
  if (version !== VERSION) throw new ProtocolError(`unknown protocol version ${version}`, 'version');
  if (dv.getUint16(6, true) !== HEADER_SIZE) throw new ProtocolError('bad header size');
  if (bytes.length < HEADER_SIZE) throw new ProtocolError('frame too short', 'short');
  const h = {
    version,
    kind: dv.getUint8(5),
    frame: Number(dv.getBigUint64(8, true)),
    lastSeq: dv.getUint32(16, true),
    rawSize: dv.getUint32(20, true),
    simTime: dv.getFloat64(24, true),
    payloadSize: dv.getUint32(32, true),
    flags: dv.getUint32(36, true),
  };
  if (h.kind !== KIND.SLICE && h.kind !== KIND.OBJECTS) {
    throw new ProtocolError(`unknown kind ${h.kind}`, 'kind');
  } else if (h.flags & ~(h.kind === KIND.OBJECTS ? FLAG.SNAPSHOT | FLAG.STRUCTURAL : 0)) {
    throw new ProtocolError(`unknown flags ${h.flags}`);
  } else if ((h.flags & FLAG.SNAPSHOT) && !(h.flags & FLAG.STRUCTURAL)) {
    throw new ProtocolError('a snapshot without the structural flag');
  }
  if (h.rawSize > MAX_PAYLOAD || h.payloadSize > MAX_PAYLOAD)
    throw new ProtocolError('payload over the limit', 'limit');
  if (h.payloadSize !== bytes.length - HEADER_SIZE)
    throw new ProtocolError('bad payload size', bytes.length - HEADER_SIZE < h.payloadSize ? 'short' : 'corrupt');
  return h;
}

/** world = rotate(transform.r, local) + transform.t for n points (local: n x 3); out may be
 * local. transform: {t: [x, y, z], r: [x, y, z, w]} (a unit quaternion). */
export function applyTransform(local, transform, out = new Float32Array(local.length)) {
  const [x, y, z, w] = transform.r;
  const [tx, ty, tz] = transform.t;
  for (let i = 0; i < local.length; i += 3) {
    const vx = local[i], vy = local[i + 1], vz = local[i + 2];
    const cx = 2 * (y * vz - z * vy), cy = 2 * (z * vx - x * vz), cz = 2 * (x * vy - y * vx);
    out[i] = vx + w * cx + (y * cz - z * cy) + tx;
    out[i + 1] = vy + w * cy + (z * cx - x * cz) + ty;
    out[i + 2] = vz + w * cz + (x * cy - y * cx) + tz;
  }
  return out;
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
  u16() { this.need(2); const v = this.dv.getUint16(this.p, true); this.p += 2; return v; }
  i16() { this.need(2); const v = this.dv.getInt16(this.p, true); this.p += 2; return v; }
  u32() { this.need(4); const v = this.dv.getUint32(this.p, true); this.p += 4; return v; }
  i32() { this.need(4); const v = this.dv.getInt32(this.p, true); this.p += 4; return v; }
  f32() { this.need(4); const v = this.dv.getFloat32(this.p, true); this.p += 4; return v; }
  bytes(n) { this.need(n); const v = this.b.subarray(this.p, this.p + n); this.p += n; return v; }
}

/** The content size a zstd frame's header declares (RFC 8878 3.1.1.1), or -1. */
function zstdContentSize(z) {
  if (z.length < 6 || z[0] !== 0x28 || z[1] !== 0xb5 || z[2] !== 0x2f || z[3] !== 0xfd) return -1;
  const fhd = z[4], fcf = fhd >> 6, single = (fhd >> 5) & 1, dictFlag = fhd & 3;
  let p = 5 + (single ? 0 : 1) + [0, 1, 2, 4][dictFlag];
  const n = fcf ? 1 << fcf : single;
  if (!n || p + n > z.length) return -1;
  let v = 0;
  for (let i = n - 1; i >= 0; i--) v = v * 256 + z[p + i];
  return fcf === 1 ? v + 256 : v;
}

/* Object frames: the layout (protocol/README.md "Object frames"). */
const XF_SCALE = 32767 * Math.SQRT2;
const f32 = Math.fround;
const elemSize = (prim) => (prim === PRIM.TRIANGLES ? 3 : prim === PRIM.LINES ? 2 : 0);

export function createDecoder({ decompress, MeshoptDecoder }) {
  function payload(bytes, h) {
    const z = bytes.subarray(HEADER_SIZE);
    if (zstdContentSize(z) !== h.rawSize) throw new ProtocolError('zstd content size disagrees with raw_size');
    let raw;
    try {
      raw = decompress(z);
    } catch (e) {
      throw new ProtocolError(`undecodable payload: ${e.message}`);
    }
    if (raw.length !== h.rawSize) throw new ProtocolError('payload size mismatch');
    return raw;
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

  /* ------------------------------------------------------------ object frames */

  /** A vertex stream of n vertices: (n x 4) u16, x y z scalar (little-endian hosts). */
  function vertexStream(c, n, id) {
    const bytes = c.u32();
    const enc = c.bytes(bytes);
    if (n === 0) {
      if (bytes) throw new ProtocolError(`object ${id}: vertex bytes for no vertex`);
      return new Uint16Array(0);
    }
    const out = new Uint16Array(n * 4);
    try {
      MeshoptDecoder.decodeVertexBuffer(new Uint8Array(out.buffer), n, 8, enc);
    } catch (e) {
      throw new ProtocolError(`object ${id}: undecodable vertex stream`);
    }
    return out;
  }

  /** An element stream of n triangles or segments, each index below nvert. */
  function elementStream(c, prim, n, nvert, id) {
    const bytes = c.u32();
    const enc = c.bytes(bytes);
    const es = elemSize(prim);
    if (n === 0) {
      if (bytes) throw new ProtocolError(`object ${id}: element bytes for no element`);
      return new Uint32Array(0);
    }
    const out = new Uint32Array(n * es);
    try {
      if (prim === PRIM.TRIANGLES) MeshoptDecoder.decodeIndexBuffer(new Uint8Array(out.buffer), n * 3, 4, enc);
      else MeshoptDecoder.decodeIndexSequence(new Uint8Array(out.buffer), n * 2, 4, enc);
    } catch (e) {
      throw new ProtocolError(`object ${id}: undecodable element stream`);
    }
    for (let i = 0; i < out.length; i++)
      if (out[i] >= nvert)
        throw new ProtocolError(`object ${id}: element ${Math.floor(i / es)} names vertex ${out[i]} of ${nvert}`);
    return out;
  }

  /** Every x, y, z at most top; the scalar 0 without one. base: v holds zigzag-coded
   * differences (turned into plain ones here) and the check is on base + difference. */
  function checkVertices(v, top, hasScalar, base, id) {
    for (let i = 0; i < v.length; i++) {
      if (base) v[i] = (v[i] >>> 1) ^ (v[i] & 1 ? 0xffff : 0);
      const val = base ? (base[i] + v[i]) & 0xffff : v[i];
      if ((i & 3) === 3 ? !hasScalar && val : val > top)
        throw new ProtocolError(`object ${id}: vertex ${i >> 2} outside its box (or a scalar without one)`);
    }
  }

  function keyTransform(c, id) {
    const t = [c.f32(), c.f32(), c.f32()], r = [c.f32(), c.f32(), c.f32(), c.f32()];
    const n2 = r[0] * r[0] + r[1] * r[1] + r[2] * r[2] + r[3] * r[3];
    if (![...t, ...r].every(Number.isFinite) || !(Math.abs(n2 - 1) <= f32(1e-3)))
      throw new ProtocolError(`object ${id}: transform not finite or not a unit rotation`);
    return { t, r };
  }

  /** A frame's transform, coded against the key's (README "Transforms"). */
  function frameTransform(c, o, id) {
    const dt = [c.i32(), c.i32(), c.i32()], code = [c.i16(), c.i16(), c.i16()], largest = c.u8();
    let s = 0;
    const comp = code.map((k) => k / XF_SCALE);
    for (const k of comp) s += k * k;
    if (largest > 3 || s > 1) throw new ProtocolError(`object ${id}: transform code names no rotation`);
    const t = dt.map((d, k) => f32(o.keyTransform.t[k] + d * o.tstep));
    const r = [];
    for (let k = 0, j = 0; k < 4; k++) r.push(k === largest ? f32(Math.sqrt(1 - s)) : f32(comp[j++]));
    return { t, r };
  }

  function readKey(c, rec, frame) {
    const prim = c.u8(), qbits = c.u8(), flags = c.u8(), lod = c.u8(), ninfo = c.u8();
    const pad = [c.u8(), c.u8(), c.u8()];
    const id = rec.id;
    if (!elemSize(prim) || qbits < 1 || qbits > 16 || (flags & ~1) || ninfo > LIMITS.INFO || pad.some((x) => x))
      throw new ProtocolError(`object ${id}: bad key (primitive ${prim}, qbits ${qbits}, flags ${flags})`);
    const info = [];
    for (let i = 0; i < ninfo; i++) info.push(c.f32());
    const keyXf = keyTransform(c, id);
    const bmin = [c.f32(), c.f32(), c.f32()], bmax = [c.f32(), c.f32(), c.f32()];
    const smin = c.f32(), smax = c.f32(), tstep = c.f32();
    const nvert = c.u32(), nelem = c.u32();
    const hasScalar = (flags & 1) === 1;
    const ok = [...bmin, ...bmax, ...info].every(Number.isFinite) && [0, 1, 2].every((k) => bmax[k] >= bmin[k]) &&
      Number.isFinite(tstep) && tstep > 0 &&
      (hasScalar ? Number.isFinite(smin) && Number.isFinite(smax) && smax >= smin : smin === 0 && smax === 0);
    if (!ok) throw new ProtocolError(`object ${id}: bad box, scalar range, step or info`);
    if (nvert > LIMITS.OBJECT_VERTS || nelem > LIMITS.OBJECT_ELEMS)
      throw new ProtocolError(`object ${id}: ${nvert} vertices, ${nelem} elements`, 'limit');
    const elements = elementStream(c, prim, nelem, nvert, id);
    const base = vertexStream(c, nvert, id);
    checkVertices(base, (1 << qbits) - 1, hasScalar, null, id);
    return {
      id, key: rec.key, primitive: prim, qbits, lod, hasScalar, info, bmin, bmax, smin, smax, tstep,
      keyTransform: keyXf, transform: keyXf, nvert, nelem, keyFrame: frame,
      _base: base, _cur: base.slice(), _elem: elements, moved: false,
    };
  }

  function readAppend(c, rec, t) {
    const vert0 = c.u32(), elem0 = c.u32(), nv = c.u32(), ne = c.u32();
    const id = rec.id;
    if (vert0 !== t.nvert || elem0 !== t.nelem)
      throw new ProtocolError(`object ${id}: append at vertex ${vert0}, element ${elem0}; it has ${t.nvert} and ${t.nelem}`, 'state');
    if (vert0 + nv > LIMITS.OBJECT_VERTS || elem0 + ne > LIMITS.OBJECT_ELEMS)
      throw new ProtocolError(`object ${id}: append past the object limits`, 'limit');
    const elements = elementStream(c, t.primitive, ne, vert0 + nv, id);
    const v = vertexStream(c, nv, id);
    checkVertices(v, (1 << t.qbits) - 1, t.hasScalar, null, id);
    return { nvert: nv, nelem: ne, elements, v };
  }

  /** Arrays with room for n items of size k, the first `keep` kept. */
  function grown(arr, n, k, keep, Type) {
    if (arr.length >= n * k) return arr;
    let cap = Math.max(16, arr.length / k);
    while (cap < n) cap *= 2;
    const a = new Type(cap * k);
    a.set(arr.subarray(0, keep));
    return a;
  }

  /** The decoder's public view of an object (arrays are views of its own). */
  function publish(o) {
    const es = elemSize(o.primitive);
    o.elements = o._elem.subarray(0, o.nelem * es);
    o.baseQ = o._base.subarray(0, o.nvert * 4);
    o.q = o._cur.subarray(0, o.nvert * 4);
    if (o.dirty || !o.positions) {
      o.positions = positionsOf(o);
      o.scalars = o.hasScalar ? scalarsOf(o) : null;
      o.dirty = false;
    }
    return o;
  }

  /** Local positions of this frame (nvert x 3), each operation rounded to float32 as the
   * C decoder computes them. */
  function positionsOf(o) {
    const top = f32((1 << o.qbits) - 1), p = new Float32Array(o.nvert * 3);
    const ext = [0, 1, 2].map((b) => f32(o.bmax[b] - o.bmin[b]));
    for (let i = 0; i < o.nvert; i++)
      for (let b = 0; b < 3; b++) p[i * 3 + b] = f32(o.bmin[b] + f32(ext[b] * f32(o._cur[i * 4 + b] / top)));
    return p;
  }

  function scalarsOf(o) {
    const s = new Float32Array(o.nvert), ext = f32(o.smax - o.smin);
    for (let i = 0; i < o.nvert; i++) s[i] = f32(o.smin + f32(ext * f32(o._cur[i * 4 + 3] / 65535)));
    return s;
  }

  /**
   * A stateful decoder of object frames: it holds each object's key across frames.
   * apply(bytes) applies one frame and returns {header, objects, removed, named}: objects,
   * every live object in id order ({id, key, primitive, qbits, lod, hasScalar, info, bmin,
   * bmax, smin, smax, tstep, keyTransform, transform, nvert, nelem, elements, q, baseQ,
   * positions, scalars, parts, keyFrame}); removed, the ids gone (a snapshot drops every
   * object it does not name); named, the ids the frame named. A refused frame throws a
   * ProtocolError (code 'state' when it does not fit what is held) and changes nothing.
   * positions and scalars are new arrays whenever they change (safe to transfer);
   * elements, q and baseQ are the decoder's own (copy before transferring). parts: the PART
   * bits the frame had for the object (0: not named, it shows its key); with HOLD, its
   * vertices are the last frame's (positions and scalars the same arrays) and only its
   * transform may have changed (HOLD | TRANSFORM): move it, upload nothing.
   */
  function createObjectDecoder() {
    let objs = new Map(); // id -> object
    let sorted = [];

    function readRecord(c, h, prevId) {
      const id = c.u16(), key = c.u16(), parts = c.u8(), pad = c.u8();
      const rec = { id, key, parts };
      if (id <= prevId) throw new ProtocolError(`object ${id} after object ${prevId}: ids must increase`);
      if (!parts || (parts & ~0x7f) || pad || ((parts & PART.SPARSE) && !(parts & PART.DELTA)) ||
          ((parts & PART.REMOVE) && parts !== PART.REMOVE) ||
          ((parts & PART.HOLD) && (parts & ~(PART.HOLD | PART.TRANSFORM))))
        throw new ProtocolError(`object ${id}: bad parts ${parts}`);
      if ((h.flags & FLAG.SNAPSHOT) && !(parts & PART.KEY))
        throw new ProtocolError(`object ${id}: a snapshot keys every object`);
      rec.held = objs.get(id) ?? null;
      if (!(parts & PART.KEY)) {
        if (!rec.held) throw new ProtocolError(`object ${id}: not held`, 'state');
        if (rec.held.key !== key)
          throw new ProtocolError(`object ${id}: for key ${key}; the key held is ${rec.held.key}`, 'state');
      }
      if (parts & PART.KEY) rec.fresh = readKey(c, rec, h.frame);
      const t = rec.fresh ?? rec.held;
      let nvert = t.nvert;
      if (parts & PART.APPEND) {
        rec.append = readAppend(c, rec, t);
        nvert += rec.append.nvert;
      }
      if (parts & PART.TRANSFORM) rec.transform = frameTransform(c, t, id);
      if (parts & PART.DELTA) {
        const n = c.u32();
        if (n !== nvert) throw new ProtocolError(`object ${id}: delta of ${n} vertices; it has ${nvert}`, 'state');
        let base = t._base.subarray(0, t.nvert * 4);
        if (rec.append) {
          const b = new Uint16Array(nvert * 4);
          b.set(base);
          b.set(rec.append.v, t.nvert * 4);
          base = b;
        }
        if (parts & PART.SPARSE) { // the ranges that differ from the base, then their vertices
          const nr = c.u32();
          if (nr > n) throw new ProtocolError(`object ${id}: truncated or too many delta ranges`);
          const ranges = [];
          let m = 0, end = 0;
          for (let r = 0; r < nr; r++) {
            const a = c.u32(), k = c.u32();
            if (k === 0 || a < end || a + k > n)
              throw new ProtocolError(`object ${id}: delta range ${r} (${a}, ${k}) not ascending, disjoint, inside`);
            ranges.push(a, k);
            end = a + k;
            m += k;
          }
          const dd = vertexStream(c, m, id), gb = new Uint16Array(m * 4);
          for (let r = 0, q = 0; r < nr; r++) { // the ranges' base, gathered
            gb.set(base.subarray(ranges[2 * r] * 4, (ranges[2 * r] + ranges[2 * r + 1]) * 4), q * 4);
            q += ranges[2 * r + 1];
          }
          checkVertices(dd, (1 << t.qbits) - 1, t.hasScalar, gb, id);
          const d = new Uint16Array(n * 4);
          for (let r = 0, q = 0; r < nr; r++) {
            d.set(dd.subarray(q * 4, (q + ranges[2 * r + 1]) * 4), ranges[2 * r] * 4);
            q += ranges[2 * r + 1];
          }
          rec.delta = d;
        } else {
          const d = vertexStream(c, n, id);
          checkVertices(d, (1 << t.qbits) - 1, t.hasScalar, base, id);
          rec.delta = d;
        }
      }
      return rec;
    }

    /** The new state of a named object (a new object for a key; the held one changed in place
     * only here, after every check passed). */
    function commitRecord(rec) {
      const o = rec.fresh ?? rec.held;
      const es = elemSize(o.primitive);
      if (rec.parts & PART.HOLD) { // it shows the vertices it showed (the same arrays)
        if (rec.transform) { // and walks on: this frame's transform
          o.transform = rec.transform;
          o.moved = true;
        }
        o.parts = rec.parts;
        return o;
      }
      if (rec.append) {
        const a = rec.append, nv = o.nvert + a.nvert, ne = o.nelem + a.nelem;
        o._base = grown(o._base, nv, 4, o.nvert * 4, Uint16Array);
        o._cur = grown(o._cur, nv, 4, o.nvert * 4, Uint16Array);
        o._elem = grown(o._elem, ne, es, o.nelem * es, Uint32Array);
        o._base.set(a.v, o.nvert * 4);
        o._elem.set(a.elements, o.nelem * es);
        o.nvert = nv;
        o.nelem = ne;
      }
      if (rec.delta) {
        for (let i = 0; i < o.nvert * 4; i++) o._cur[i] = (o._base[i] + rec.delta[i]) & 0xffff;
        o.dirty = true;
      } else if (o.moved || rec.append || rec.fresh) {
        o._cur.set(o._base.subarray(0, o.nvert * 4));
        o.dirty = true;
      }
      o.transform = rec.transform ?? o.keyTransform;
      o.moved = !!(rec.delta || rec.transform);
      o.parts = rec.parts;
      return o;
    }

    function apply(bytes) {
      const h = readHeader(bytes);
      if (h.kind !== KIND.OBJECTS) throw new ProtocolError(`not an object frame (kind ${h.kind})`, 'kind');
      const c = new Cursor(payload(bytes, h));
      const n = c.u32();
      if (n > LIMITS.OBJECTS) throw new ProtocolError(`${n} records`, 'limit');
      const recs = [];
      let structural = (h.flags & FLAG.SNAPSHOT) !== 0;
      for (let i = 0; i < n; i++) {
        const r = readRecord(c, h, i ? recs[i - 1].id : -1);
        structural ||= (r.parts & (PART.REMOVE | PART.KEY | PART.APPEND)) !== 0;
        recs.push(r);
      }
      if (c.p !== c.b.length) throw new ProtocolError(`${c.b.length - c.p} bytes after the last record`);
      if (structural !== ((h.flags & FLAG.STRUCTURAL) !== 0))
        throw new ProtocolError(`structural flag ${h.flags & FLAG.STRUCTURAL ? 'set' : 'clear'}, records say ${structural ? 'set' : 'clear'}`);
      // The limits after the frame.
      const snap = (h.flags & FLAG.SNAPSHOT) !== 0;
      const named = new Map(recs.map((r) => [r.id, r]));
      let nobj = 0, tv = 0, te = 0;
      for (const o of sorted) {
        if (named.has(o.id) || snap) continue;
        nobj++, tv += o.nvert, te += o.nelem;
      }
      for (const r of recs) {
        if (r.parts === PART.REMOVE) continue;
        const t = r.fresh ?? r.held;
        nobj++;
        tv += t.nvert + (r.append?.nvert ?? 0);
        te += t.nelem + (r.append?.nelem ?? 0);
      }
      if (nobj > LIMITS.OBJECTS || tv > LIMITS.TOTAL_VERTS || te > LIMITS.TOTAL_ELEMS)
        throw new ProtocolError(`after this frame: ${nobj} objects, ${tv} vertices, ${te} elements`, 'limit');
      // Commit: nothing below can fail.
      const removed = [];
      const next = new Map();
      for (const o of sorted) {
        if (named.has(o.id)) continue;
        if (snap) {
          removed.push(o.id);
          continue;
        }
        if (o.moved) {
          o._cur.set(o._base.subarray(0, o.nvert * 4));
          o.dirty = true;
        }
        o.transform = o.keyTransform;
        o.moved = false;
        o.parts = 0;
        next.set(o.id, o);
      }
      for (const r of recs) {
        if (r.parts === PART.REMOVE) removed.push(r.id);
        else next.set(r.id, commitRecord(r));
      }
      objs = next;
      sorted = [...next.values()].sort((a, b) => a.id - b.id).map(publish);
      removed.sort((a, b) => a - b);
      return { header: h, objects: sorted, removed, named: recs.map((r) => r.id) };
    }

    return {
      apply,
      get: (id) => objs.get(id) ?? null,
      get objects() { return sorted; },
    };
  }

  /** Stateless decoding of a slice (object frames need createObjectDecoder). */
  function decode(bytes) {
    const h = readHeader(bytes);
    if (h.kind === KIND.OBJECTS) throw new ProtocolError('object frames need createObjectDecoder()', 'kind');
    return decodeSlice(bytes);
  }

  return { decode, decodeSlice, createObjectDecoder, applyTransform, readHeader };
}
