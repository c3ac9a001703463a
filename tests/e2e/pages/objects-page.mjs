// objects-page.mjs: the client's worker code and 3D view on a page of their own, without a
// server: objects.test.mjs bundles it (esbuild), feeds it object frames through a socket of
// its own and reads back what the view drew. The wire runs on the page here (no Worker), as
// the view's input it is the same.
import { View3D } from '../../../web-client/src/core/view3d.mjs';
import { createWire } from '../../../web-client/src/core/wire.mjs';

class PageSocket {
  static OPEN = 1;
  constructor(url) {
    this.url = url;
    this.readyState = PageSocket.OPEN;
    window.socket = this;
    setTimeout(() => this.onopen?.(), 0);
  }
  send() {}
  close() {}
}

const wait = (ms) => new Promise((r) => setTimeout(r, ms));

/** The view with the scene's styleFor (a function's source, or none: the defaults). */
window.start = async (styleSource) => {
  const view = new View3D(document.querySelector('canvas'), {});
  // eslint-disable-next-line no-new-func
  view.setScene({ styleFor: styleSource ? new Function(`return (${styleSource})`)() : () => null });
  const t = { view, errors: [], updates: 0 };
  const wire = createWire((m) => {
    if (m.ev === 'objects') {
      view.update(m);
      t.updates++;
      wire.command({ op: 'ack' });
    } else if (m.ev === 'error') t.errors.push(m.message);
  }, { Socket: PageSocket });
  wire.command({ op: 'open', url: 'ws://page.test/' });
  while (!window.socket) await wait(5);
  window.t = t;
};

/** Frames (arrays of bytes) arrive together; resolves once the view has the update. */
window.feed = async (frames) => {
  const n = window.t.updates;
  for (const f of frames) window.socket.onmessage({ data: new Uint8Array(f).buffer });
  for (let i = 0; i < 200 && window.t.updates === n; i++) await wait(5);
  return window.t.updates > n;
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
