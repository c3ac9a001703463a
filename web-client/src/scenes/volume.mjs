// volume.mjs: the CT volume scene (HP-ChainMail) in the page. Its objects are the skin,
// translucent, over the bone (triangles, world millimetres, no transform); a press on the body grabs a point with a radius of three
// lattice cells; beside the 3D view, a slice of the deformed volume (core/sliceview.mjs, in
// radiological convention with orientation letters), and under it the live plot of the
// grabbed region (core/plot.mjs): its displacement along the pull and the magnitude of its
// velocity over the last 5 s, for driver and viewers alike, from object 2 of the frames
// (server/scene_volume.c: a segment from the region's mean rest position to where it is, its
// scalar that magnitude in mm/s). The first view faces the patient's front (camera on the +y,
// anterior, side), head (+z) up, so the patient's right (+x) is on the screen's left, as when
// facing a person.
// Its parameters are the panel's, drawn from the schema (core/panel.mjs): none is named
// here. The module contract: web-client/README.md, "Adding a scene".
import { h } from '../core/dom.mjs';
import { SliceView } from '../core/sliceview.mjs';
import { datasetShort, datasetLines } from '../core/dataset.mjs';
import { TracePlot } from '../core/plot.mjs';

// Object ids in this scene's frames (server/scene_volume.c).
const SKIN = 0, BONE = 1, PROBE = 2;
const STYLES = {
  // Translucent, drawn after the bone; the surface a press grabs.
  [SKIN]: { color: 0xd9a087, opacity: 0.42, transparent: true, depthWrite: false, renderOrder: 1, side: 'double', pick: 0 },
  // Opaque ivory, closed and wound counter-clockwise seen from outside (front faces
  // suffice); grabbed where the ray misses the skin (a bone poking out).
  [BONE]: { color: 0xeee8d5, opacity: 1, transparent: false, depthWrite: true, renderOrder: 0, side: 'front', pick: 1 },
  // The grabbed region's pull, rest to now, coloured by how fast it moves; never grabbed.
  [PROBE]: { color: 0xffffff, opacity: 1, transparent: false, depthWrite: false, renderOrder: 2, side: 'front', pick: null },
};
const DISPLACEMENT_COLOR = '#ff9f40', VELOCITY_COLOR = '#4fc3f7';

/** The first view: from the patient's front (+y), a little above, the body's box filling
 *  the narrower field of view. */
function frameFront(view) {
  // The body's box (skin and bone), not the probe's: its quantisation box is twice the
  // volume's, so that the region can be anywhere in it, and would leave the body small.
  const { bmin, bmax } = view.worldBox([0, 1]);
  const c = [0, 1, 2].map((b) => (bmin[b] + bmax[b]) / 2);
  const r = Math.hypot(bmax[0] - bmin[0], bmax[1] - bmin[1], bmax[2] - bmin[2]) / 2 || 1;
  const cam = view.camera, vfov = (cam.fov * Math.PI) / 180, hfov = 2 * Math.atan(Math.tan(vfov / 2) * cam.aspect);
  const d = (0.9 * r) / Math.sin(Math.min(vfov, hfov) / 2), el = (12 * Math.PI) / 180;
  view.lookAt(c, [c[0], c[1] + d * Math.cos(el), c[2] + d * Math.sin(el)], r / 20, r * 20);
}

/** The live plot's state: samples from object 2 (placed at the region's rest position by
 *  its transform; vertex 0 there, vertex 1 where the region is now, local mm; the scalar its
 *  velocity's magnitude; vertex TRAIL_AT + k - 1 where it was k frames before), the
 *  displacement taken along the pull (the largest displacement seen since the region was
 *  grabbed: a new grab moves the transform and starts again). The page shows the newest of a
 *  burst, so an update may come several frames after the last: the trail fills the frames
 *  between, and the plot has every frame's sample (up to TRAIL frames apart). */
const TRAIL_AT = 50, TRAIL = 16; // server/scene_volume.c: VOL_PROBE_TRAIL_AT, VOL_PROBE_TRAIL
class ProbeTrace {
  constructor(plot) {
    this.plot = plot;
    this.dir = null;
    this.p = null;        // the probe's positions and scalars as last shown
    this.s = null;
    this.samples = 0;     // samples plotted
    this.updates = 0;     // updates taken (the rest came from the trail)
    this.rate = 0;        // frames per simulated second (the state's rate_hz)
    this.frame = -1;      // the newest frame plotted
  }

  /** An update of object 2 (wire.mjs: positions and scalars when they changed, the
   *  transform when it did) of frame `frame` at simulated time t (s). */
  add(t, u, frame) {
    // A new grab moves the transform (the region's rest position); a key sends it unmoved.
    const at = u.transform?.t, regrab = !!at && !(this.restAt && at.every((x, b) => x === this.restAt[b]));
    if (at) this.restAt = at;
    if (regrab) this.dir = null;
    if (frame < this.frame) this.frame = -1; // the frames went back (a replay's seek)
    if (u.positions) { this.p = u.positions; this.s = u.scalars ?? null; }
    const p = this.p, s = this.s;
    if (!p) return;
    this.updates++;
    // The frames between the last plotted and this one, from the trail: none for the first
    // update, or one that brings a new grab (the trail before it is another region's).
    const gap = this.frame >= 0 && !regrab && this.rate > 0 ? Math.min(frame - this.frame - 1, TRAIL) : 0;
    for (let k = gap; k >= 0; k--) {
      const j = k ? TRAIL_AT + k - 1 : 1; // vertex 1: this frame's
      this.sample(t - k / this.rate, [p[3 * j] - p[0], p[3 * j + 1] - p[1], p[3 * j + 2] - p[2]], s?.[j] ?? 0, k === 0);
    }
    this.frame = frame;
  }

  sample(t, d, vmag, draw) {
    const len = Math.hypot(...d);
    if (!this.dir || len > this.dir.len) this.dir = { len, u: d.map((x) => (len > 0 ? x / len : 0)) };
    const along = d[0] * this.dir.u[0] + d[1] * this.dir.u[1] + d[2] * this.dir.u[2];
    this.last = { t, along, vmag };
    this.at = performance.now();
    this.samples++;
    this.plot.push(t, along, vmag, draw);
  }
}

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
    view.setScene({ styleFor: (o) => STYLES[o.id] ?? null, frameCamera: frameFront });
    const info = h('div', { id: 'dataset', class: 'hint' });
    const el = h('div');
    side.append(info, el);
    const slice = new SliceView(el, (plane, index, level, width) => conn.send('slice', { plane, index, level, width }));
    const plotCanvas = h('canvas', { id: 'probe-plot', title: 'the grabbed region: displacement along the pull and velocity (magnitude), last 5 s' });
    plotCanvas.style.cssText = 'display:block;width:100%;height:150px;margin-top:6px';
    side.append(plotCanvas);
    const plot = new TracePlot(plotCanvas, {
      seconds: 5,
      a: { label: 'displacement', unit: 'mm', color: DISPLACEMENT_COLOR },
      b: { label: '|velocity|', unit: 'mm/s', color: VELOCITY_COLOR, signed: false },
    });
    const probe = new ProbeTrace(plot);
    plot.draw();
    let radius = 3; // world units: three lattice cells once the state says how large they are
    return {
      hint: (driver) => (driver ? 'drag on the body to pull it · drag elsewhere to orbit · wheel to zoom · right-drag to pan' : null),
      state(t) {
        radius = 3 * Math.max(...t.spacing);
        probe.rate = t.rate_hz ?? 0;
        slice.setOrientation(t.orientation, t.file_orientation);
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
        const p = m.objects.find((o) => o.id === PROBE);
        if (p) probe.add(m.simTime, p, m.frame);
        if (m.removed.includes(PROBE)) plot.clear();
      },
      text(t) {
        if (t.type === 'error' && t.seq && t.seq === slice.inFlight) slice.inFlight = 0;
      },
      // window.softcast: the slice, and a hash of its last pixels (the e2e tests).
      expose: {
        slice,
        plot,
        probe,
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
