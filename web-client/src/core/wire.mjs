// wire.mjs: the session's WebSocket and all the work a binary frame needs before the page
// can draw it: zstd (fzstd), meshoptimizer's decoders, deltas against the keyframe,
// positions in world units, vertex normals and bounding spheres. wire.worker.mjs runs it in
// a Web Worker, so none of it lands on the page's main thread.
//
// Latest wins, as on the server, and the page never waits for a decode: frames are decoded
// as they arrive (of those that arrived together, only the newest, with the keyframe it
// needs), and the newest decoded frame waits in a one-frame outbox while the page holds
// the last one posted; the page takes a frame (ack) and gets the newest at once. A page
// that was busy for a second gets the present, not a backlog, and the decoding went on
// meanwhile on another core.
//
// Commands (page -> wire): {op: 'open', url}, {op: 'send', text}, {op: 'close'}, {op: 'ack'},
// {op: 'log'} (answered by {ev: 'log', decodes: [[frame, decodedAt], ...]}, the last 64).
// Events (wire -> page): {ev: 'open'}, {ev: 'close', code}, {ev: 'text', data},
// {ev: 'mesh', ...} (see post), {ev: 'slice', ...}, {ev: 'error', message}. Every event
// carries the counters {bytes, received, skipped, decodeMs}. Times (decodedAt) are
// performance.timeOrigin + performance.now(), comparable across the page and the worker.
import { decompress } from 'fzstd';
import { MeshoptDecoder } from 'meshoptimizer';
import { createDecoder, readHeader, KIND } from '../../../protocol/js/softcast-proto.mjs';

const decoderReady = MeshoptDecoder.ready.then(() => createDecoder({ decompress, MeshoptDecoder }));
const now = () => performance.timeOrigin + performance.now();

/** post(message, transferList): how events leave (the worker's postMessage). */
export function createWire(post) {
  let dec = null;
  let ws = null;
  let queue = [];          // {h, bytes}: mesh frames and LOD tables that arrived, not yet decoded
  let scheduled = false;   // a decode is due once the messages already here are read
  let key = null;          // the keyframe deltas apply to: decoded, with its LOD table
  let outbox = [];         // decoded, not yet posted: the newest frame only
  let withPage = false;    // a mesh frame posted and not yet taken
  let postedTri = [];      // per surface slot: the topology the page holds
  let postedKey = null;    // the keyframe the page's last frame was built on
  let decodes = [];        // [frame, decodedAt] of the last 64 frames decoded
  const count = { bytes: 0, received: 0, skipped: 0, decodeMs: 0 };

  const emit = (m, transfer = []) => post({ ...m, ...count }, transfer);

  async function open(url) {
    dec = dec ?? await decoderReady;
    if (ws) { ws.onclose = ws.onmessage = null; ws.close(); }
    queue = [];
    key = null;
    outbox = [];
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
    if (h.kind !== KIND.LOD_TABLE) count.received++;
    queue.push({ h, bytes });
    // Decode after the messages already waiting have been read, so a burst costs one decode.
    if (!scheduled) {
      scheduled = true;
      setTimeout(decodeNewest, 0);
    }
  }

  /** Decode the newest mesh frame that arrived (and the keyframe it needs), skip the rest. */
  function decodeNewest() {
    scheduled = false;
    let i = queue.length - 1;
    while (i >= 0 && queue[i].h.kind === KIND.LOD_TABLE) i--;
    if (i < 0) return;
    const t0 = performance.now();
    const waiting = queue;
    queue = waiting.slice(i + 1); // LOD tables of keyframes still to come
    try {
      const f = dec.decodeMesh(waiting[i].bytes);
      let base = key;
      if (f.header.kind === KIND.MESH_KEY) {
        base = keyframe(f, waiting, i);
      } else if (!key || key.header.frame !== f.keyFrame) {
        // Its keyframe came with it, or is gone (the server sends a new one).
        const k = findLast(waiting, i, (x) => x.h.kind === KIND.MESH_KEY && x.h.frame === f.keyFrame);
        base = k >= 0 ? keyframe(dec.decodeMesh(waiting[k].bytes), waiting, k) : null;
      }
      count.skipped += waiting.slice(0, i).filter((x) => x.h.kind !== KIND.LOD_TABLE).length + (base ? 0 : 1);
      if (!base) return;
      const surfaces = base.surfaces.map((s, n) => {
        const q = f === base ? s.q : dec.applyDelta(base, f, n);
        const pos = dequantise(q, base.bmin, base.bmax);
        return { id: s.id, nvert: s.nvert, pos, nrm: normals(pos, s.tri), sphere: sphere(pos) };
      });
      count.decodeMs = performance.now() - t0;
      decodes.push([f.header.frame, now()]);
      if (decodes.length > 64) decodes.shift();
      count.skipped += outbox.length; // decoded, never shown: the page was busy
      outbox = [{ f, base, surfaces }];
      postNext();
    } catch (e) {
      emit({ ev: 'error', message: `frame dropped: ${e.message}` });
    }
  }

  function findLast(list, before, pred) {
    for (let k = before - 1; k >= 0; k--) if (pred(list[k])) return k;
    return -1;
  }

  /** A decoded keyframe becomes the base for deltas, with the LOD table of its frame. */
  function keyframe(k, list, at) {
    const t = findLast(list, at, (x) => x.h.kind === KIND.LOD_TABLE && x.h.frame === k.header.frame);
    k.table = t >= 0 ? dec.decodeLodTable(list[t].bytes) : null;
    key = k;
    return k;
  }

  /** Post the oldest frame in the outbox (there is one at most), once the page is free. */
  function postNext() {
    if (withPage || !outbox.length) return;
    const { f, base, surfaces } = outbox.shift();
    const transfer = [];
    for (let n = 0; n < surfaces.length; n++) {
      const s = surfaces[n], tri = base.surfaces[n].tri;
      s.tri = null;
      // Topology goes to the page only when it changed: a walking crowd is all keyframes,
      // and an unchanged index buffer need not be copied, uploaded or rebuilt.
      if (!sameArray(postedTri[n], tri)) {
        postedTri[n] = tri;
        s.tri = tri.slice();
        transfer.push(s.tri.buffer);
      }
      transfer.push(s.pos.buffer, s.nrm.buffer);
    }
    postedTri.length = surfaces.length;
    const table = base !== postedKey && base.table ? { frame: base.header.frame, lods: base.table.lods } : null;
    postedKey = base;
    withPage = true;
    emit({
      ev: 'mesh', frame: f.header.frame, lastSeq: f.header.lastSeq, key: f === base, keyFrame: base.header.frame,
      bmin: base.bmin, bmax: base.bmax, table, surfaces, decodedAt: decodes[decodes.length - 1][1],
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
      else if (m.op === 'close') { if (ws) ws.close(); }
      else if (m.op === 'ack') { withPage = false; postNext(); }
      else if (m.op === 'log') emit({ ev: 'log', decodes: decodes.slice() });
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
