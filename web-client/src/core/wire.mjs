// wire.mjs: the session's WebSocket and all the work a binary frame needs before the page
// can draw it: object frames (protocol/README.md "Kind 5") through the protocol's stateful
// object decoder (fzstd, meshoptimizer's decoders), and per object what changed since the
// page's last update, with vertex normals, bounding spheres and scalar colours.
// wire.worker.mjs runs it in a Web Worker, so none of it lands on the page's main thread.
//
// Which frames are applied (protocol/README.md "Sending object frames"): a frame with the
// STRUCTURAL flag (it keys, appends or removes) is applied always, in arrival order; a frame
// without it is skipped when a newer frame is already here (latest wins, as on the server).
// Frames are read as they arrive and decoded once the messages already waiting have been
// read, so a burst costs the structural frames in it and its newest. Frames are ignored
// until a SNAPSHOT (the first frame of a connection) and again after a refusal of a
// structural frame ('state': one was missed): what the page shows stays until the next.
//
// The page is sent updates, not frames: per object that changed since the last update
// posted, what changed (a key or an append: the elements and the key's fields; new
// positions; a new transform), and the ids removed. One update at a time: the next waits in
// a one-frame outbox until the page takes the last (ack). A newer decode replaces the
// outbox with the update from the page's objects to the newest state, so an update the page
// never saw loses nothing (its key, append or removal is in the next) and a page that was
// busy for a second gets the present, not a backlog, while the decoding went on meanwhile
// on another core.
//
// Commands (page -> wire): {op: 'open', url}, {op: 'send', text}, {op: 'close'}, {op: 'ack'},
// {op: 'log'} (answered by {ev: 'log', decodes: [[frame, decodedAt], ...]}, the last 64).
// Events (wire -> page): {ev: 'open'}, {ev: 'close', code}, {ev: 'text', data},
// {ev: 'objects', ...} (see update), {ev: 'slice', ...}, {ev: 'error', message}. Every event
// carries the counters {bytes, received, skipped, decodeMs}. Times (decodedAt) are
// performance.timeOrigin + performance.now(), comparable across the page and the worker.
import { decompress } from 'fzstd';
import { MeshoptDecoder } from 'meshoptimizer';
import { createDecoder, readHeader, KIND, FLAG, PRIM } from '../../../protocol/js/softcast-proto.mjs';
import { scalarColors, paletteColors } from './colormap.mjs';

const decoderReady = MeshoptDecoder.ready.then(() => createDecoder({ decompress, MeshoptDecoder }));
const now = () => performance.timeOrigin + performance.now();

/** post(message, transferList): how events leave (the worker's postMessage). Socket: the
 *  WebSocket class (the tests pass their own). */
export function createWire(post, { Socket = globalThis.WebSocket } = {}) {
  let dec = null;          // the protocol's decoders (slices; object decoders)
  let objects = null;      // this connection's object decoder: the objects as the frames left them
  let ws = null;
  let queue = [];          // {h, bytes}: object frames that arrived, not yet decoded
  let scheduled = false;   // a decode is due once the messages already here are read
  let awaitSnapshot = true; // ignore frames until a snapshot (a new connection, a refusal)
  let outbox = [];         // the update due to the page, not yet posted (one at most)
  let withPage = false;    // an update posted and not yet taken
  const shown = new Map(); // id -> what the page holds once it has taken every update posted
  let derived = new WeakMap(); // positions -> {normals, sphere, colors}: made once per array
  const palettes = new Map(); // object id -> sRGB per category, when the scene colours its scalar so
  let lastH = null;        // the header of the newest frame applied
  let decodes = [];        // [frame, decodedAt] of the last 64 frames applied
  const count = { bytes: 0, received: 0, skipped: 0, decodeMs: 0 };

  const emit = (m, transfer = []) => post({ ...m, ...count }, transfer);

  async function open(url) {
    dec = dec ?? await decoderReady;
    if (ws) { ws.onclose = ws.onmessage = null; ws.close(); }
    // A new connection starts at its snapshot. The page keeps what it shows until then, and
    // `shown` stays what it holds: the snapshot's objects are new objects, so the update
    // after it re-sends each one and removes what the snapshot dropped.
    objects = dec.createObjectDecoder();
    queue = [];
    awaitSnapshot = true;
    const s = new Socket(url);
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
    if (h.kind !== KIND.OBJECTS) {
      emit({ ev: 'error', message: `frame ${h.frame} of kind ${h.kind} (version ${h.version}) ignored: this page draws object frames` });
      return;
    }
    count.received++;
    queue.push({ h, bytes });
    // Decode after the messages already waiting have been read, so a burst costs one update.
    if (!scheduled) {
      scheduled = true;
      setTimeout(decodeQueued, 0);
    }
  }

  /** Apply the frames that arrived: every structural one, in order, and the newest. */
  function decodeQueued() {
    scheduled = false;
    const waiting = queue;
    queue = [];
    const t0 = performance.now();
    let last = null;
    for (let i = 0; i < waiting.length; i++) {
      const { h, bytes } = waiting[i];
      const structural = (h.flags & FLAG.STRUCTURAL) !== 0;
      if ((awaitSnapshot && !(h.flags & FLAG.SNAPSHOT)) || (!structural && i < waiting.length - 1)) {
        count.skipped++;
        continue;
      }
      try {
        objects.apply(bytes);
        awaitSnapshot = false;
        last = h;
        decodes.push([h.frame, now()]);
        if (decodes.length > 64) decodes.shift();
      } catch (e) {
        count.skipped++;
        // A structural frame refused: the objects lack what it keyed, appended or removed,
        // and later frames may name it. What is shown stays until the next snapshot.
        if (structural || e.code === 'state') awaitSnapshot = true;
        emit({ ev: 'error', message: `frame ${h.frame} dropped (${e.code ?? 'error'}): ${e.message}` +
          (awaitSnapshot ? '; waiting for a snapshot' : '') });
      }
    }
    if (!last) return;
    lastH = last;
    count.skipped += outbox.length; // an update made and never shown: the page was busy
    outbox = [update(last)];
    count.decodeMs = performance.now() - t0;
    postNext();
  }

  /** What the page must change to show the objects now: per object, against `shown`. */
  function update(h) {
    const list = [], next = [], transfer = [], live = new Set();
    for (const o of objects.objects) {
      live.add(o.id);
      const was = shown.get(o.id);
      const keyed = !was || was.obj !== o; // a key makes a new object in the decoder
      const grown = !keyed && (o.nvert !== was.nvert || o.nelem !== was.nelem);
      // The decoder makes new positions whenever they may have changed (an object that moved
      // the frame before goes back to its base); the quantised values say whether they did.
      const moved = keyed || grown || (o.positions !== was.positions && !sameValues(o.q, was.q));
      const turned = keyed || !sameTransform(o.transform, was.transform);
      const recolour = !moved && was.recolour && o.scalars; // a palette came: colours alone
      if (!moved && !turned && !recolour) continue;
      const u = { id: o.id };
      if (keyed || grown) {
        // The elements only with a key or an append: the decoder's own, copied to transfer.
        u.keyed = keyed;
        u.meta = meta(o);
        u.elements = o.elements.slice();
        transfer.push(u.elements.buffer);
      }
      if (moved) {
        const d = derive(o);
        u.positions = o.positions; // a new array whenever they change: the page may have it
        u.sphere = d.sphere;
        transfer.push(o.positions.buffer);
        if (d.normals) { u.normals = d.normals; transfer.push(d.normals.buffer); }
        if (d.colors) { u.colors = d.colors; transfer.push(d.colors.buffer); }
        if (o.scalars) { u.scalars = o.scalars.slice(); transfer.push(u.scalars.buffer); } // the values (a scene may plot them)
      }
      if (recolour) {
        u.colors = colorsOf(o);
        transfer.push(u.colors.buffer);
      }
      if (turned) u.transform = { t: [...o.transform.t], r: [...o.transform.r] };
      list.push(u);
      next.push({ id: o.id, obj: o, nvert: o.nvert, nelem: o.nelem, positions: o.positions,
        q: moved ? o.q.slice() : was.q, transform: u.transform ?? was.transform });
    }
    const removed = [...shown.keys()].filter((id) => !live.has(id)).sort((a, b) => a - b);
    return {
      message: { ev: 'objects', frame: h.frame, lastSeq: h.lastSeq, simTime: h.simTime, decodedAt: decodes.at(-1)[1], objects: list, removed },
      transfer, next, removed,
    };
  }

  /** Normals (triangles), the bounding sphere and the scalars' colours of this frame's
   *  positions, in the object's local frame. */
  function derive(o) {
    let d = derived.get(o.positions);
    if (!d) {
      d = {
        sphere: sphere(o.positions),
        normals: o.primitive === PRIM.TRIANGLES ? normals(o.positions, o.elements) : null,
        colors: o.scalars ? colorsOf(o) : null,
      };
      derived.set(o.positions, d);
    }
    return d;
  }

  /** A vertex colour per scalar: the object's palette (categories), else viridis. */
  function colorsOf(o) {
    return palettes.has(o.id) ? paletteColors(o.scalars, palettes.get(o.id)) : scalarColors(o.scalars, o.smin, o.smax);
  }

  /** Post the update in the outbox, once the page is free; `shown` becomes what it holds. */
  function postNext() {
    if (withPage || !outbox.length) return;
    const { message, transfer, next, removed } = outbox.shift();
    for (const id of removed) shown.delete(id);
    for (const s of next) shown.set(s.id, s);
    withPage = true;
    emit(message, transfer);
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

  /** Object id's scalar is a category (its value rounded): colour k is colors[k] (0xRRGGBB),
   *  instead of viridis over its range. What the page shows already is coloured again. */
  function palette(id, colors) {
    palettes.set(id, colors);
    derived = new WeakMap();
    const was = shown.get(id);
    if (was) was.recolour = true;
    if (lastH) {
      count.skipped += outbox.length;
      outbox = [update(lastH)];
      postNext();
    }
  }

  return {
    command(m) {
      if (m.op === 'open') open(m.url);
      else if (m.op === 'send') { if (ws?.readyState === Socket.OPEN) ws.send(m.text); }
      else if (m.op === 'close') { if (ws) ws.close(); }
      else if (m.op === 'ack') { withPage = false; postNext(); }
      else if (m.op === 'log') emit({ ev: 'log', decodes: decodes.slice() });
      else if (m.op === 'palette') palette(m.id, m.colors);
    },
  };
}

/** The key's fields the page and the scene need (cloth: lod, info). */
function meta(o) {
  return {
    key: o.key, primitive: o.primitive, lod: o.lod, info: [...o.info], nvert: o.nvert, nelem: o.nelem,
    bmin: [...o.bmin], bmax: [...o.bmax], hasScalar: o.hasScalar, smin: o.smin, smax: o.smax,
  };
}

function sameValues(a, b) {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

function sameTransform(a, b) {
  if (!b) return false;
  for (let k = 0; k < 3; k++) if (a.t[k] !== b.t[k]) return false;
  for (let k = 0; k < 4; k++) if (a.r[k] !== b.r[k]) return false;
  return true;
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
