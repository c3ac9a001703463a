// cloth.mjs: the cloth scene (XPBD capes with levels of detail) in the page. One object per
// character (its id the character's index), in its root frame (metres, z up) placed by its
// transform: the cape's triangles first, then the body's (boxes round its colliders), drawn
// in two groups over a ground grid, the camera first behind the crowd. A press on a cape
// grabs its nearest vertex (the character's own index); the driver's camera goes to the
// server, which sets each character's LOD by its distance; beside the 3D view, the crowd's
// events: motions, a gust, a forced LOD, and the LOD counts from each object's key.
// Its parameters are the panel's, drawn from the schema (core/panel.mjs): none is named
// here. The module contract: web-client/README.md, "Adding a scene".
import { h } from '../core/dom.mjs';

// A character's key (server/scene_cloth.c): lod, the cape's level of detail; info = [E_pos m,
// E_vel m/s of its latest LOD switch, cape_nvert, cape_ntri]: vertices [0, cape_nvert) and
// triangles [0, cape_ntri) are the cape, the rest the body.
const E_POS = 0, E_VEL = 1, CAPE_NVERT = 2, CAPE_NTRI = 3;
const CAPE = { color: 0xb0303a, opacity: 1, transparent: false, depthWrite: true, renderOrder: 0, side: 'double', pick: 0 };
// Boxes round the colliders: not grabbed.
const BODY = { color: 0x8a93a0, opacity: 1, transparent: false, depthWrite: true, renderOrder: 0, side: 'front', pick: null };
const styleFor = (o) => (o.info.length > CAPE_NTRI ? [{ style: CAPE, from: 0 }, { style: BODY, from: o.info[CAPE_NTRI] }] : CAPE);
const MOTIONS = ['idle', 'walk', 'run', 'turn', 'jump'];
const GUST = [-3, 1.5, 1.5]; // m/s, one impulse

/** The first view: look at the crowd (the characters' root positions) from behind and to
 *  one side, where the capes are, over a ground grid. */
function frameCrowd(view) {
  const lo = [Infinity, Infinity, Infinity], hi = [-Infinity, -Infinity, -Infinity];
  for (const m of view.meshes)
    for (let b = 0; b < 3; b++) {
      lo[b] = Math.min(lo[b], m.position.getComponent(b));
      hi[b] = Math.max(hi[b], m.position.getComponent(b));
    }
  if (!view.meshes.length) { view.frameBox(); return; }
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
    view.setScene({ styleFor, frameCamera: frameCrowd });
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

    /** The LOD counts and the worst last switch, from the characters' keys shown. */
    const showLods = () => {
      const keys = [...view.objects.values()].sort((a, b) => a.id - b.id).map((e) => e.meta);
      const n = [0, 0, 0];
      for (const k of keys) n[k.lod] = (n[k.lod] ?? 0) + 1;
      st.lods = keys.map((k) => k.lod);
      const ep = Math.max(0, ...keys.map((k) => k.info[E_POS] ?? 0)), ev = Math.max(0, ...keys.map((k) => k.info[E_VEL] ?? 0));
      counts.textContent = `characters at LOD 0 / 1 / 2: ${n.join(' / ')}` +
        (ev > 0 || ep > 0 ? ` · worst last switch: E_pos ${(ep * 100).toFixed(1)} cm, E_vel ${ev.toFixed(2)} m/s` : '');
    };

    return {
      hint: (isDriver) => (isDriver ? 'drag a cape to pull it · drag elsewhere to orbit · wheel to zoom (LODs follow) · right-drag to pan' : null),
      state(t) {
        driver = t.role === 'driver';
        for (const el of controls) el.disabled = !driver;
      },
      /** A cape vertex: the object is the character, the vertex its own (of its LOD). */
      grab(point, hit) {
        const key = view.objects.get(hit.object)?.meta;
        if (key && hit.vertex < key.info[CAPE_NVERT]) conn.send('grab', { character: hit.object, vertex: hit.vertex, point });
      },
      /** The driver's camera sets the LODs; at most 10 updates a second. */
      camera(p) {
        if (!driver) return;
        clearTimeout(cameraTimer);
        const send = () => { lastCameraAt = performance.now(); conn.send('camera', { point: p }); };
        const wait = 100 - (performance.now() - lastCameraAt);
        if (wait <= 0) send(); else cameraTimer = setTimeout(send, wait);
      },
      /** An update was shown: a key (a LOD switch) or a character gone changes the counts. */
      objects(m) {
        if (m.removed.length || m.objects.some((o) => o.keyed)) showLods();
      },
    };
  },
};
