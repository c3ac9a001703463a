// cloth.mjs: the cloth scene (XPBD capes with levels of detail) in the page. Its surfaces
// are the capes and the characters' bodies over a ground grid, the camera first behind
// the crowd; a press on a cape grabs its nearest vertex (by the LOD table of the keyframe
// shown); the driver's camera goes to the server, which sets each character's LOD by its
// distance; beside the 3D view, the crowd's events: motions, a gust, a forced LOD.
// Its parameters are the panel's, drawn from the schema (core/panel.mjs): none is named
// here. The module contract: web-client/README.md, "Adding a scene".
import { h } from '../core/dom.mjs';

// Surface ids in this scene's frames (server/scene_cloth.c).
const CAPES = 2, BODIES = 3;
const STYLES = {
  [CAPES]: { color: 0xb0303a, opacity: 1, transparent: false, depthWrite: true, renderOrder: 0, side: 'double', pick: 0 },
  // Boxes round the colliders: not grabbed.
  [BODIES]: { color: 0x8a93a0, opacity: 1, transparent: false, depthWrite: true, renderOrder: 0, side: 'front', pick: null },
};
const MOTIONS = ['idle', 'walk', 'run', 'turn', 'jump'];
const GUST = [-3, 1.5, 1.5]; // m/s, one impulse

/** The first view: the box is the whole walking area, so look at the crowd (its bodies)
 *  from behind and to one side, where the capes are, over a ground grid. */
function frameCrowd(view, frame) {
  const bodies = frame.surfaces.find((s) => s.id === BODIES);
  if (!bodies) { view.frameBox(); return; }
  const lo = [Infinity, Infinity, Infinity], hi = [-Infinity, -Infinity, -Infinity];
  for (let i = 0; i < bodies.pos.length; i++) {
    const b = i % 3, v = bodies.pos[i];
    lo[b] = Math.min(lo[b], v);
    hi[b] = Math.max(hi[b], v);
  }
  const c = [(lo[0] + hi[0]) / 2, (lo[1] + hi[1]) / 2, 1.0];
  const r = Math.max(2, Math.hypot(hi[0] - lo[0], hi[1] - lo[1]) / 2);
  view.lookAt(c, [lo[0] - 2.5 - r, c[1] - 1.1 * r, 1.8 + 0.4 * r], 0.05, 500);
  view.addGround(2 * Math.ceil(r + 20), c[0], c[1]);
}

export default {
  title: 'Cloth: a crowd in capes (XPBD with levels of detail)',

  lobby: {
    fields: () => [h('label', {}, 'Characters', h('input', { type: 'number', name: 'characters', value: '9', min: 1, max: 400 }))],
    body: (f) => ({ characters: Number(f.get('characters')) }),
    size: (s) => (s.characters !== undefined ? `${s.characters} characters` : ''),
  },

  open({ conn, view, st, side }) {
    view.setScene({ styles: STYLES, frameCamera: frameCrowd });
    let table = null; // the LOD table of the keyframe shown: which vertices are whose
    let driver = false, cameraTimer = 0, lastCameraAt = 0;
    const motions = MOTIONS.map((m) => h('button', {
      dataset: { motion: m },
      on: {
        click: (e) => {
          motions.forEach((o) => o.classList.toggle('on', o === e.currentTarget));
          conn.send('motion', { character: -1, motion: m });
        },
      },
    }, m[0].toUpperCase() + m.slice(1)));
    const gust = h('button', { id: 'gust', on: { click: () => conn.send('wind', { impulse: GUST }) } }, 'Gust of wind');
    const lod = h('select', { id: 'force-lod', on: { change: (e) => conn.send('force_lod', { character: -1, lod: Number(e.target.value) }) } },
      h('option', { value: '-1' }, 'by camera distance'), h('option', { value: '0' }, '0 (finest)'),
      h('option', { value: '1' }, '1'), h('option', { value: '2' }, '2 (coarsest)'));
    const counts = h('p', { id: 'lod-counts', class: 'hint' });
    side.append(h('div', { id: 'clothview' },
      h('h3', {}, 'Crowd'),
      h('div', { class: 'row seg', id: 'motions' }, motions),
      h('div', { class: 'row' }, gust),
      h('label', { class: 'row' }, 'Level of detail', lod),
      counts,
      h('p', { class: 'hint' }, 'Orbit closer or farther: each cape\'s level of detail follows the camera\'s distance ' +
        '(the distances are in the panel, under levels of detail) and hands its motion over without a pop. Drag a cape to pull it.')));
    const controls = [...motions, gust, lod];

    const showTable = (t) => {
      table = t;
      const n = [0, 0, 0];
      for (const e of t.lods) n[e.lod] = (n[e.lod] ?? 0) + 1;
      st.lods = t.lods.map((e) => e.lod);
      const ep = Math.max(...t.lods.map((e) => e.ePos)), ev = Math.max(...t.lods.map((e) => e.eVel));
      counts.textContent = `characters at LOD 0 / 1 / 2: ${n.join(' / ')}` +
        (ev > 0 || ep > 0 ? ` · worst last switch: E_pos ${(ep * 100).toFixed(1)} cm, E_vel ${ev.toFixed(2)} m/s` : '');
    };

    return {
      hint: (isDriver) => (isDriver ? 'drag a cape to pull it · drag elsewhere to orbit · wheel to zoom (LODs follow) · right-drag to pan' : null),
      state(t) {
        driver = t.role === 'driver';
        for (const el of controls) el.disabled = !driver;
      },
      /** A cape vertex: which character's, by the LOD table of the keyframe shown. */
      grab(point, hit) {
        if (hit.surface !== CAPES || !table) return;
        const e = table.lods.findIndex((x) => hit.vertex >= x.firstVertex && hit.vertex < x.firstVertex + x.nvert);
        if (e >= 0) conn.send('grab', { character: e, vertex: hit.vertex - table.lods[e].firstVertex, point });
      },
      /** The driver's camera sets the LODs; at most 10 updates a second. */
      camera(p) {
        if (!driver) return;
        clearTimeout(cameraTimer);
        const send = () => { lastCameraAt = performance.now(); conn.send('camera', { point: p }); };
        const wait = 100 - (performance.now() - lastCameraAt);
        if (wait <= 0) send(); else cameraTimer = setTimeout(send, wait);
      },
      mesh(m) {
        if (m.table) showTable(m.table);
      },
    };
  },
};
