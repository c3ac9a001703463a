// softbody.mjs: the soft-body scene (an organ in a tray: hybrid tets by region, or surface
// PBD) in the page. Objects in the tray's frame (metres, z up), placed by the tray's pose:
// the organ's surface, each vertex carrying its region (the hybrid's tissue: liver, tumour,
// vessel) drawn in that tissue's colour, translucent when it has regions so that what lies
// inside shows; the tray, translucent; and the inner regions' own surfaces (a tumour, a
// vessel), opaque in their tissue's colour. A press on the organ grabs
// there (the picked surface point, world metres); the shell's hand moves it in the plane facing
// the camera and lets go. Beside the view, the tray's controls (buttons: keyboard and pointer
// alike) move and tilt the tray; the organ rides in it.
// Its parameters are the panel's, drawn from the schema (core/panel.mjs): none is named here.
// The module contract: web-client/README.md, "Adding a scene".
import { h } from '../core/dom.mjs';

// server/scene_softbody.c: object 0 the organ (scalar: region), object 1 the tray, 2 and up
// the inner surfaces (scalar: their region).
const ORGAN = 0, TRAY = 1, INNER = [2, 3, 4, 5];
// Region k's colour (sRGB): liver reddish-brown, tumour pale, vessel blue-purple, a fourth.
const TISSUE = [0x9a3b2a, 0xeadcb4, 0x5548c8, 0x6f9a52];
const ORGAN_STYLE = { color: TISSUE[0], opacity: 1, transparent: false, depthWrite: true, renderOrder: 0, side: 'double', pick: 0 };
// A hybrid organ (its vertices carry regions) is seen through: its front faces only, drawn
// after the opaque inner surfaces, writing no depth so they show behind it.
const SEE_THROUGH_STYLE = { color: TISSUE[0], opacity: 0.55, transparent: true, depthWrite: false, renderOrder: 1, side: 'front', pick: 0 };
const INNER_STYLE = { color: TISSUE[1], opacity: 1, transparent: false, depthWrite: true, renderOrder: 0, side: 'double', pick: null };
const TRAY_STYLE = { color: 0x9fb4c8, opacity: 0.28, transparent: true, depthWrite: false, renderOrder: 2, side: 'double', pick: null };
const styleFor = (o) => (o.id === ORGAN ? (o.hasScalar ? SEE_THROUGH_STYLE : ORGAN_STYLE)
  : o.id === TRAY ? TRAY_STYLE : INNER_STYLE);
const STEP_M = 0.01, TILT_DEG = 5, REACH_M = 0.95; // the server refuses a tray beyond 1 m

/** Quaternions as [w, x, y, z]: a b. */
const qmul = (a, b) => [
  a[0] * b[0] - a[1] * b[1] - a[2] * b[2] - a[3] * b[3],
  a[0] * b[1] + a[1] * b[0] + a[2] * b[3] - a[3] * b[2],
  a[0] * b[2] - a[1] * b[3] + a[2] * b[0] + a[3] * b[1],
  a[0] * b[3] + a[1] * b[2] - a[2] * b[1] + a[3] * b[0],
];
const qnorm = (q) => { const l = Math.hypot(...q); return q.map((x) => x / l); };

/** The first view: the whole tray from the front, above and off to the +x side, where the
 *  vessel leaves the organ's end. */
function frameTray(view) {
  if (!view.objects.has(TRAY)) { view.frameBox(); return; }
  const { bmin, bmax } = view.worldBox([TRAY]);
  const c = [0, 1, 2].map((b) => (bmin[b] + bmax[b]) / 2);
  const r = Math.hypot(bmax[0] - bmin[0], bmax[1] - bmin[1], bmax[2] - bmin[2]) / 2 || 0.2;
  // Far enough that the tray's sphere fits the narrower of the two fields of view.
  const cam = view.camera, vfov = (cam.fov * Math.PI) / 180, hfov = 2 * Math.atan(Math.tan(vfov / 2) * cam.aspect);
  const d = (1.05 * r) / Math.sin(Math.min(vfov, hfov) / 2), dir = [0.62, -0.62, 0.48];
  view.lookAt(c, c.map((x, b) => x + d * dir[b]), r / 50, d * 20);
}

export default {
  title: 'Soft body: an organ in a tray (tets by region, or surface PBD)',

  lobby: {
    fields: () => [
      h('label', {}, 'Model', h('select', { name: 'model' },
        h('option', { value: 'hybrid' }, 'hybrid (tets by region)'), h('option', { value: 'surface' }, 'surface (PBD)'))),
      h('label', {}, 'Particles (surface)', h('input', { type: 'number', name: 'particles', placeholder: 'default', min: 12, max: 20000 })),
    ],
    body: (f) => {
      const model = f.get('model') || 'hybrid', n = f.get('particles');
      return model === 'surface' && n ? { model, particles: Number(n) } : { model };
    },
    size: (s) => (s.model ? `${s.model}, ${s.particles} particles` : ''),
  },

  open({ conn, view, st, side }) {
    view.setScene({ styleFor, frameCamera: frameTray });
    for (const id of [ORGAN, ...INNER]) conn.palette(id, TISSUE);
    // The pose asked for last, while the frames catch up with it; else the tray's as shown.
    let asked = null, askedAt = 0;
    const pose = () => {
      if (asked && performance.now() - askedAt < 1000) return asked;
      const o = view.objects.get(TRAY)?.obj;
      if (!o) return { pos: [0, 0, 0], quat: [1, 0, 0, 0] };
      return { pos: o.position.toArray(), quat: [o.quaternion.w, o.quaternion.x, o.quaternion.y, o.quaternion.z] };
    };
    const send = (p) => {
      asked = { pos: p.pos.map((x) => Math.max(-REACH_M, Math.min(REACH_M, x))), quat: qnorm(p.quat) };
      askedAt = performance.now();
      conn.send('tray', asked);
    };
    const shift = (axis, d) => () => { const p = pose(); const pos = [...p.pos]; pos[axis] += d; send({ pos, quat: p.quat }); };
    const tilt = (axis, deg) => () => {
      const p = pose(), a = (deg * Math.PI) / 180, r = [Math.cos(a / 2), 0, 0, 0];
      r[1 + axis] = Math.sin(a / 2);
      send({ pos: p.pos, quat: qmul(r, p.quat) }); // about the world's axis, through the tray's centre
    };
    const button = (id, label, title, on) => h('button', { id, title, 'aria-label': title, on: { click: on } }, label);
    const buttons = [
      button('tray-left', '\u2190 x', 'move the tray 1 cm along -x', shift(0, -STEP_M)),
      button('tray-right', 'x \u2192', 'move the tray 1 cm along +x', shift(0, STEP_M)),
      button('tray-back', '\u2193 y', 'move the tray 1 cm along -y', shift(1, -STEP_M)),
      button('tray-fore', 'y \u2191', 'move the tray 1 cm along +y', shift(1, STEP_M)),
      button('tray-lower', 'lower', 'lower the tray 1 cm', shift(2, -STEP_M)),
      button('tray-raise', 'raise', 'raise the tray 1 cm', shift(2, STEP_M)),
      button('tray-tilt-x-', 'tilt \u21b6 x', `tilt the tray ${TILT_DEG} degrees about -x`, tilt(0, -TILT_DEG)),
      button('tray-tilt-x+', 'tilt \u21b7 x', `tilt the tray ${TILT_DEG} degrees about +x`, tilt(0, TILT_DEG)),
      button('tray-tilt-y-', 'tilt \u21b6 y', `tilt the tray ${TILT_DEG} degrees about -y`, tilt(1, -TILT_DEG)),
      button('tray-tilt-y+', 'tilt \u21b7 y', `tilt the tray ${TILT_DEG} degrees about +y`, tilt(1, TILT_DEG)),
      button('tray-level', 'level', 'level the tray where it is', () => send({ pos: pose().pos, quat: [1, 0, 0, 0] })),
      button('tray-home', 'home', 'the tray back at the origin, level', () => send({ pos: [0, 0, 0], quat: [1, 0, 0, 0] })),
    ];
    const legend = h('p', { id: 'regions', class: 'hint' });
    side.append(h('div', { id: 'softbodyview' },
      h('h3', {}, 'Tray'),
      h('div', { class: 'row seg', role: 'group', 'aria-label': 'tray controls' }, buttons),
      legend,
      h('p', { class: 'hint' }, 'Drag the organ to pull it; let go and it settles back. The buttons move and tilt the tray: ' +
        'the organ rides in it, and slides where the tray slopes.')));

    return {
      hint: (isDriver) => (isDriver ? 'drag the organ to pull it · drag elsewhere to orbit · wheel to zoom · right-drag to pan' : null),
      state(t) {
        for (const el of buttons) el.disabled = t.role !== 'driver';
        const names = t.regions ?? [];
        legend.replaceChildren(...names.map((name, k) => h('span', { class: 'region' },
          h('span', { class: 'swatch', style: `display:inline-block;width:0.8em;height:0.8em;margin:0 0.3em 0 0.6em;` +
            `background:#${TISSUE[k % TISSUE.length].toString(16).padStart(6, '0')}` }), name)));
      },
      /** A press on the organ: hold what lies within the grab radius of the picked point. */
      grab(point, hit) {
        if (hit.object === ORGAN) conn.send('grab', { point });
      },
      expose: { tray: () => pose() },
    };
  },
};
