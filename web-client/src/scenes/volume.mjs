// volume.mjs: the CT volume scene (HP-ChainMail) in the page. Its objects are the skin,
// translucent, over the bone (triangles, world millimetres, no transform); a press on the body grabs a point with a radius of three
// lattice cells; beside the 3D view, a slice of the deformed volume (core/sliceview.mjs).
// Its parameters are the panel's, drawn from the schema (core/panel.mjs): none is named
// here. The module contract: web-client/README.md, "Adding a scene".
import { h } from '../core/dom.mjs';
import { SliceView } from '../core/sliceview.mjs';
import { datasetShort, datasetLines } from '../core/dataset.mjs';

// Object ids in this scene's frames (server/scene_volume.c).
const SKIN = 0, BONE = 1;
const STYLES = {
  // Translucent, drawn after the bone; the surface a press grabs.
  [SKIN]: { color: 0xd9a087, opacity: 0.42, transparent: true, depthWrite: false, renderOrder: 1, side: 'double', pick: 0 },
  // Opaque ivory, closed and wound counter-clockwise seen from outside (front faces
  // suffice); grabbed where the ray misses the skin (a bone poking out).
  [BONE]: { color: 0xeee8d5, opacity: 1, transparent: false, depthWrite: true, renderOrder: 0, side: 'front', pick: 1 },
};

const LATTICES = [
  ['', 'server default'],
  ['64x64x40', '64 x 64 x 40 (light)'],
  ['96x96x56', '96 x 96 x 56'],
  ['128x128x75', '128 x 128 x 75'],
];

export default {
  title: 'Volume: CT phantom (HP-ChainMail)',

  lobby: {
    /** The create form's fields for this scene (their names are FormData keys). */
    fields: () => [h('label', {}, 'Lattice',
      h('select', { name: 'dims' }, LATTICES.map(([v, text]) => h('option', { value: v }, text))))],
    /** POST /api/sessions options from the form. */
    body: (f) => (f.get('dims') ? { dims: f.get('dims').split('x').map(Number) } : {}),
    /** The lobby's size column for a session of GET /api/sessions. */
    size: (s) => datasetShort(s),
  },

  /** The session: ctx = { conn, view, st, side } (see main.mjs). Returns its hooks. */
  open({ conn, view, side }) {
    view.setScene({ styleFor: (o) => STYLES[o.id] ?? null });
    const info = h('div', { id: 'dataset', class: 'hint' });
    const el = h('div');
    side.append(info, el);
    const slice = new SliceView(el, (plane, index, level, width) => conn.send('slice', { plane, index, level, width }));
    let radius = 3; // world units: three lattice cells once the state says how large they are
    return {
      hint: (driver) => (driver ? 'drag on the body to pull it · drag elsewhere to orbit · wheel to zoom · right-drag to pan' : null),
      state(t) {
        radius = 3 * Math.max(...t.spacing);
        slice.setDims(t.dims, t.spacing);
        info.replaceChildren(...datasetLines(t).map((l) => h('div', {}, l)));
      },
      grab(point) {
        conn.send('grab', { point, radius, space: 'world' });
      },
      /** A slice frame (core/wire.mjs), the answer to the slice view's request. */
      sliceFrame(s) {
        slice.show(s);
      },
      /** An update was shown: the slice follows its frame. */
      objects(m) {
        slice.meshFrame(m.frame);
      },
      text(t) {
        if (t.type === 'error' && t.seq && t.seq === slice.inFlight) slice.inFlight = 0;
      },
      // window.softcast: the slice, and a hash of its last pixels (the e2e tests).
      expose: {
        slice,
        sliceHash() {
          const p = slice.lastPixels;
          if (!p) return null;
          let x = 2166136261;
          for (let i = 0; i < p.length; i++) x = Math.imul(x ^ p[i], 16777619);
          return { plane: slice.lastPlane, received: slice.received, n: p.length, hash: x >>> 0 };
        },
      },
    };
  },
};
