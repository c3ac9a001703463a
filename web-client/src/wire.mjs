// wire.mjs: the session's WebSocket and all the work a binary frame needs before the page
// can draw it: zstd (fzstd), meshoptimizer's decoders, deltas against the keyframe,
// positions in world units, vertex normals and bounding spheres. wire.worker.mjs runs it in
// a Web Worker, so none of it lands on the page's main thread.
//
// Latest wins, as on the server: at most one decoded mesh frame is with the page at a time.
// Frames that arrive before the page takes it (ack) wait here undecoded; the next one posted
// is the newest, decoded with the keyframe it needs, and those between are skipped unread.
//
// Commands (page -> wire): {op: 'open', url}, {op: 'send', text}, {op: 'close'}, {op: 'ack'}.
// Events (wire -> page): {ev: 'open'}, {ev: 'close', code}, {ev: 'text', data},
// {ev: 'mesh', ...} (see postMesh), {ev: 'slice', ...}, {ev: 'error', message}.
// Every event carries the counters {bytes, received, skipped, decodeMs}.
import { decompress } from 'fzstd';
import { MeshoptDecoder } from 'meshoptimizer';
import { createDecoder, readHeader, KIND } from '../../protocol/js/softcast-proto.mjs';

const decoderReady = MeshoptDecoder.ready.then(() => createDecoder({ decompress, MeshoptDecoder }));

/** post(message, transferList): how events leave (the worker's postMessage). */
export function createWire(post) {
  let dec = null;
  let ws = null;
  let queue = [];          // {h, bytes}: mesh frames and LOD tables not yet decoded
  let key = null;          // the keyframe deltas apply to: decoded, with its LOD table
  let withPage = false;    // a mesh frame posted and not yet taken
  let postedTri = [];      // per surface slot: the topology the page holds
  let postedKey = null;    // the keyframe the page's last frame was built on
  const count = { bytes: 0, received: 0, skipped: 0, decodeMs: 0 };

  const emit = (m, transfer = []) => post({ ...m, ...count }, transfer);

  async function open(url) {
    dec = dec ?? await decoderReady;
    if (ws) { ws.onclose = ws.onmessage = null; ws.close(); }
    queue = [];
    key = null;
    withPage = false;
    postedTri = [];
    postedKey = null;
    const s = new WebSocket(url);
    s.binaryType = 'arraybuffer';
    ws = s;
    s.onopen = () => emit({ ev: 'open' });
    s.onclose = (e) => { if (ws === s) { ws = null; emit({ ev: 'close', code: e.code }); } };
    s.onmessage = (m) => receive(m.data);
  }

  function receive(data) {
    if (typeof data === 'string') { emit({ ev: 'text', data }); return; }
    const bytes = new Uint8Array(data);
    count.bytes += bytes.length;
    let h;
    try {
      h = readHeader(bytes);
    } catch (e) {
      emit({ ev: 'error', message: e.message });
      return;
    }
    if (h.kind === KIND.SLICE) { postSlice(bytes); return; }
    if (h.kind !== KIND.LOD_TABLE) {
      count.received++;
      // Deltas are against the newest keyframe: a keyframe makes all before it (but its
      // own table) useless, a delta the deltas before it. The queue stays a few frames long.
      const obsolete = (x) => x.h.kind === KIND.MESH_DELTA ||
        (h.kind === KIND.MESH_KEY && !(x.h.kind === KIND.LOD_TABLE && x.h.frame === h.frame));
      const gone = queue.filter(obsolete);
      count.skipped += gone.filter((x) => x.h.kind !== KIND.LOD_TABLE).length;
      queue = queue.filter((x) => !obsolete(x));
    }
    queue.push({ h, bytes });
    pump();
  }

  /** Decode and post the newest mesh frame in the queue, if the page is free for it. */
  function pump() {
    if (withPage) return;
    let i = queue.length - 1;
    while (i >= 0 && queue[i].h.kind === KIND.LOD_TABLE) i--;
    if (i < 0) return;
    const t0 = performance.now();
    try {
      const newest = dec.decodeMesh(queue[i].bytes);
      let base = key;
      if (newest.header.kind === KIND.MESH_KEY) {
        base = keyframe(newest, i);
      } else if (!key || key.header.frame !== newest.keyFrame) {
        // Its keyframe is waiting in the queue, or gone (the server sends a new one).
        const k = findLast(i, (x) => x.h.kind === KIND.MESH_KEY && x.h.frame === newest.keyFrame);
        base = k >= 0 ? keyframe(dec.decodeMesh(queue[k].bytes), k) : null;
        if (!base) count.skipped++;
      }
      queue = queue.slice(i + 1);
      if (!base) return;
      const qs = newest === base ? base.surfaces.map((s) => s.q)
        : newest.surfaces.map((_, s) => dec.applyDelta(base, newest, s));
      postMesh(newest, base, qs, t0);
    } catch (e) {
      queue = queue.slice(i + 1);
      emit({ ev: 'error', message: `frame dropped: ${e.message}` });
    }
  }

  function findLast(before, pred) {
    for (let k = before - 1; k >= 0; k--) if (pred(queue[k])) return k;
    return -1;
  }

  /** A decoded keyframe becomes the base for deltas, with the LOD table of its frame. */
  function keyframe(k, at) {
    const t = findLast(at, (x) => x.h.kind === KIND.LOD_TABLE && x.h.frame === k.header.frame);
    k.table = t >= 0 ? dec.decodeLodTable(queue[t].bytes) : null;
    key = k;
    return k;
  }

  function postMesh(f, base, qs, t0) {
    const transfer = [];
    const surfaces = base.surfaces.map((s, n) => {
      const pos = dequantise(qs[n], base.bmin, base.bmax);
      const out = { id: s.id, nvert: s.nvert, pos, nrm: normals(pos, s.tri), sphere: sphere(pos), tri: null };
      // Topology goes to the page only when it changed: a walking crowd is all keyframes,
      // and an unchanged index buffer need not be copied, uploaded or rebuilt.
      if (!sameArray(postedTri[n], s.tri)) {
        postedTri[n] = s.tri;
        out.tri = s.tri.slice();
        transfer.push(out.tri.buffer);
      }
      transfer.push(pos.buffer, out.nrm.buffer);
      return out;
    });
    postedTri.length = surfaces.length;
    const table = base !== postedKey && base.table ? { frame: base.header.frame, lods: base.table.lods } : null;
    postedKey = base;
    withPage = true;
    count.decodeMs = performance.now() - t0;
    emit({
      ev: 'mesh', frame: f.header.frame, lastSeq: f.header.lastSeq, key: f === base, keyFrame: base.header.frame,
      bmin: base.bmin, bmax: base.bmax, table, surfaces,
    }, transfer);
  }

  function postSlice(bytes) {
    let s;
    try {
      s = dec.decodeSlice(bytes);
    } catch (e) {
      emit({ ev: 'error', message: `slice dropped: ${e.message}` });
      return;
    }
    const pixels = s.pixels.slice();
    const rgba = new Uint8ClampedArray(pixels.length * 4);
    for (let i = 0; i < pixels.length; i++) {
      const v = pixels[i];
      rgba[i * 4] = v; rgba[i * 4 + 1] = v; rgba[i * 4 + 2] = v; rgba[i * 4 + 3] = 255;
    }
    emit({ ev: 'slice', seq: s.header.lastSeq, frame: s.header.frame, plane: s.plane, index: s.index, width: s.width,
      height: s.height, level: s.level, window: s.window, pixels, rgba }, [pixels.buffer, rgba.buffer]);
  }

  return {
    command(m) {
      if (m.op === 'open') open(m.url);
      else if (m.op === 'send') { if (ws?.readyState === WebSocket.OPEN) ws.send(m.text); }
      else if (m.op === 'close') { if (ws) { ws.close(); } }
      else if (m.op === 'ack') { withPage = false; pump(); }
    },
  };
}

function sameArray(a, b) {
  if (a === b) return true;
  if (!a || a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

/** Quantised positions (16 bits within the box) to world units. */
export function dequantise(q, bmin, bmax) {
  const p = new Float32Array(q.length);
  const s = [(bmax[0] - bmin[0]) / 65535, (bmax[1] - bmin[1]) / 65535, (bmax[2] - bmin[2]) / 65535];
  for (let i = 0; i < q.length; i += 3) {
    p[i] = bmin[0] + s[0] * q[i];
    p[i + 1] = bmin[1] + s[1] * q[i + 1];
    p[i + 2] = bmin[2] + s[2] * q[i + 2];
  }
  return p;
}

/** Area-weighted vertex normals, as three.js's computeVertexNormals makes them. */
export function normals(p, tri) {
  const n = new Float32Array(p.length);
  for (let t = 0; t < tri.length; t += 3) {
    const a = tri[t] * 3, b = tri[t + 1] * 3, c = tri[t + 2] * 3;
    const ux = p[b] - p[a], uy = p[b + 1] - p[a + 1], uz = p[b + 2] - p[a + 2];
    const vx = p[c] - p[a], vy = p[c + 1] - p[a + 1], vz = p[c + 2] - p[a + 2];
    const x = uy * vz - uz * vy, y = uz * vx - ux * vz, z = ux * vy - uy * vx;
    n[a] += x; n[a + 1] += y; n[a + 2] += z;
    n[b] += x; n[b + 1] += y; n[b + 2] += z;
    n[c] += x; n[c + 1] += y; n[c + 2] += z;
  }
  for (let i = 0; i < n.length; i += 3) {
    const l = Math.hypot(n[i], n[i + 1], n[i + 2]) || 1;
    n[i] /= l; n[i + 1] /= l; n[i + 2] /= l;
  }
  return n;
}

/** [cx, cy, cz, r]: the box centre and the farthest vertex from it (three.js's way). */
export function sphere(p) {
  if (!p.length) return [0, 0, 0, 0];
  const lo = [Infinity, Infinity, Infinity], hi = [-Infinity, -Infinity, -Infinity];
  for (let i = 0; i < p.length; i += 3) {
    for (let b = 0; b < 3; b++) {
      if (p[i + b] < lo[b]) lo[b] = p[i + b];
      if (p[i + b] > hi[b]) hi[b] = p[i + b];
    }
  }
  const c = [(lo[0] + hi[0]) / 2, (lo[1] + hi[1]) / 2, (lo[2] + hi[2]) / 2];
  let r2 = 0;
  for (let i = 0; i < p.length; i += 3) {
    const d = (p[i] - c[0]) ** 2 + (p[i + 1] - c[1]) ** 2 + (p[i + 2] - c[2]) ** 2;
    if (d > r2) r2 = d;
  }
  return [c[0], c[1], c[2], Math.sqrt(r2)];
}
