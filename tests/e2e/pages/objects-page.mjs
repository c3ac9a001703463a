// objects-page.mjs: the client's worker (objects-worker.mjs: web-client/src/core/wire.mjs in
// a Web Worker, its arrays transferred) and 3D view on a page of their own, without a
// server: objects.test.mjs bundles both (esbuild), feeds the worker object frames and reads
// back what the view drew. The page takes each update (ack) at once, or holds them while
// window.t.busy is set, as a busy page does.
import { View3D } from '../../../web-client/src/core/view3d.mjs';

const wait = (ms) => new Promise((r) => setTimeout(r, ms));

/** The view with the scene's styleFor (a function's source, or none: the defaults). */
window.start = async (styleSource) => {
  const view = new View3D(document.querySelector('canvas'), {});
  // eslint-disable-next-line no-new-func
  view.setScene({ styleFor: styleSource ? new Function(`return (${styleSource})`)() : () => null });
  const worker = new Worker('/worker.js', { type: 'module' });
  const t = { view, worker, errors: [], updates: [], applied: 0, busy: false };
  t.take = () => {
    for (; t.applied < t.updates.length; t.applied++) {
      view.update(t.updates[t.applied]);
      worker.postMessage({ op: 'ack' });
    }
  };
  worker.onmessage = (e) => {
    const m = e.data;
    if (m.ev === 'objects') {
      t.updates.push(m);
      if (!t.busy) t.take();
    } else if (m.ev === 'error') t.errors.push(m.message);
    else if (m.ev === 'log') t.logWaiter?.(m.decodes);
  };
  worker.onerror = (e) => t.errors.push(`worker: ${e.message}`);
  worker.postMessage({ op: 'open', url: 'ws://page.test/' });
  window.t = t;
};

/** Frames (arrays of bytes) arrive together; resolves once the worker has posted an update
 *  (false after 15 s without one: a worker starting on a busy machine takes a while), at
 *  once when posts is false. */
window.feed = async (frames, posts = true) => {
  const n = window.t.updates.length;
  const buffers = frames.map((f) => new Uint8Array(f).buffer);
  window.t.worker.postMessage({ op: 'frames', frames: buffers }, buffers);
  if (!posts) return false;
  for (const end = performance.now() + 15000; performance.now() < end && window.t.updates.length === n;) await wait(5);
  return window.t.updates.length > n;
};

/** Resolves once the worker has applied that frame (its decode log says so). */
window.decoded = async (frame) => {
  for (const end = performance.now() + 15000; performance.now() < end;) {
    const log = await new Promise((resolve) => {
      window.t.logWaiter = resolve;
      window.t.worker.postMessage({ op: 'log' });
    });
    if (log.some(([f]) => f === frame)) return true;
    await wait(5);
  }
  return false;
};

/** The page is busy (holds the updates posted) or free again (takes them). */
window.busy = (on) => {
  window.t.busy = on;
  if (!on) window.t.take();
  return window.t.updates.length;
};

/** Only these objects visible, the camera on their world box; then the drawn pixels by
 *  kind: background, grey (the unstyled colour, unlit lines), coloured (saturated: the
 *  colormap), and the colormap's ends (dark purple-blue, yellow-green). */
window.look = (ids) => {
  const { view } = window.t;
  for (const [id, e] of view.objects) e.obj.visible = ids.includes(id);
  view.box = view.worldBox(ids);
  view.frameBox();
  const { px } = view.readPixels();
  const n = { drawn: 0, grey: 0, coloured: 0, low: 0, high: 0 };
  for (let i = 0; i < px.length; i += 4) {
    const [r, g, b] = [px[i], px[i + 1], px[i + 2]];
    if (r < 24 && g < 24 && b < 30) continue;
    n.drawn++;
    const sat = Math.max(r, g, b) - Math.min(r, g, b);
    if (sat < 24 && r > 120) n.grey++;
    if (sat > 50) n.coloured++;
    if (sat > 50 && b > g && r < 120) n.low++; // viridis below 0.3: purple to blue
    if (sat > 50 && g > 150 && r > 120 && b < 110) n.high++; // above 0.8: green-yellow to yellow
  }
  return n;
};

window.info = () => [...window.t.view.objects.values()].map((e) => ({
  id: e.id, type: e.obj.type, count: e.obj.geometry.index.count, colors: !!e.obj.geometry.attributes.color,
  groups: e.obj.geometry.groups.map((g) => [g.start, g.count, g.materialIndex]),
  position: e.obj.position.toArray(), quaternion: e.obj.quaternion.toArray(),
}));
