// growth.mjs: the growth scene (../shared/GROWTH.md) in the page: a plant grown by a
// stochastic L-system, or the equivalent truss of a deep beam built by cloning cells. Both are
// line sets and surfaces with a scalar per vertex, coloured through viridis (the shell's
// worker does it), drawn with z up; the frames grow by appends. The plant: one line set, two
// vertices a branch, the scalar how thick the branch is drawn. The truss: its cells (triangles) and members
// (lines), the scalar log10 of the internal energy in joules on the server's fixed range; a
// press on the beam puts the load there and dragging moves it (the shell's hand sends the
// moves). Beside the view: the colour legend and the growth controls (a step, grow again, a
// new seed, what a press on the beam does); the pace, the rules, the load and the displacements' magnification are the panel's, drawn from
// the schema (core/panel.mjs): none is named here. The module contract: web-client/README.md.
import { h } from '../core/dom.mjs';
import { viridis } from '../core/colormap.mjs';

const PLANT = { color: 0x6b8f4e, opacity: 1, transparent: false, depthWrite: true, renderOrder: 0, side: 'double', pick: null };
const CELLS = { color: 0xffffff, opacity: 0.9, transparent: true, depthWrite: false, renderOrder: 0, side: 'double', pick: 0 };
const MEMBERS = { color: 0xffffff, opacity: 1, transparent: false, depthWrite: true, renderOrder: 1, side: 'double', pick: null };

/** The first view: straight at the scene's plane (x-z), its box filling the view. */
function frameFront(view) {
  const { bmin, bmax } = view.worldBox();
  const c = [0, 1, 2].map((b) => (bmin[b] + bmax[b]) / 2);
  const half = Math.max(bmax[0] - bmin[0], bmax[2] - bmin[2]) / 2 || 1;
  const cam = view.camera, vfov = (cam.fov * Math.PI) / 180, hfov = 2 * Math.atan(Math.tan(vfov / 2) * cam.aspect);
  const d = (0.8 * half) / Math.tan(Math.min(vfov, hfov) / 2);
  view.lookAt(c, [c[0], c[1] - d, c[2]], d / 100, d * 20);
}

/** A legend: the colour map from lo to hi, with its name and ends. */
function legend(title, lo, hi) {
  const stops = Array.from({ length: 9 }, (_, k) => `rgb(${viridis(k / 8).map(Math.round).join(',')}) ${k * 12.5}%`);
  return h('div', { id: 'growth-legend' },
    h('div', { class: 'hint' }, title),
    h('div', { style: `height:0.9em;border-radius:3px;background:linear-gradient(to right,${stops.join(',')})` }),
    h('div', { class: 'row', style: 'justify-content:space-between' }, h('span', {}, lo), h('span', {}, hi)));
}

export default {
  title: 'Growth: a plant (stochastic L-system) or a deep beam cloned cell by cell',

  lobby: {
    fields: () => [
      h('label', {}, 'Model', h('select', { name: 'model' },
        h('option', { value: 'plant' }, 'plant (L-system)'), h('option', { value: 'truss' }, 'truss (deep beam)'))),
      h('label', {}, 'Seed (plant)', h('input', { type: 'number', name: 'seed', placeholder: 'random', min: 1, max: 2147483647 })),
      h('label', {}, '3D (plant)', h('input', { type: 'checkbox', name: 'three_d' })),
      h('label', {}, 'Cells (truss)', h('input', { type: 'text', name: 'cells', placeholder: '50x25', pattern: '\\d+x\\d+' })),
    ],
    body: (f) => {
      const model = f.get('model') || 'plant';
      if (model === 'truss') {
        const m = /^(\d+)x(\d+)$/.exec(f.get('cells') || '');
        return m ? { model, cells: [Number(m[1]), Number(m[2])] } : { model };
      }
      const out = { model };
      if (f.get('seed')) out.seed = Number(f.get('seed'));
      if (f.get('three_d')) out.three_d = true;
      return out;
    },
    size: (s) => (s.model === 'truss' ? `truss, ${s.cells?.join('x')} cells` : s.model ? `plant, seed ${s.seed}` : ''),
  },

  open({ conn, view, st, side }) {
    const truss = () => st.state?.model === 'truss';
    view.setScene({
      styleFor: (o) => (o.primitive === 2 ? (truss() ? MEMBERS : PLANT) : CELLS),
      frameCamera: frameFront,
    });
    const seed = h('input', { id: 'growth-seed', type: 'number', min: 1, max: 2147483647, 'aria-label': 'seed' });
    const button = (id, label, title, on) => h('button', { id, title, 'aria-label': title, on: { click: on } }, label);
    const buttons = [
      button('growth-step', 'Step', 'grow one generation now', () => conn.send('step', {})),
      button('growth-regrow', 'Grow again', 'start again from one branch or one cell', () => conn.send('regrow', {})),
    ];
    const reseed = button('growth-reseed', 'New seed', 'a new tree from this seed (empty: a random one)', () => {
      const n = Number(seed.value) || 1 + Math.floor(Math.random() * 2147483646);
      seed.value = String(n);
      conn.send('reseed', { seed: n });
    });
    // What a press on the beam does: move the load there (and drag it), or hold that node.
    const press = h('select', { id: 'growth-press', 'aria-label': 'a press on the beam' },
      h('option', { value: 'load' }, 'moves the load'), h('option', { value: 'pin' }, 'pins the node'),
      h('option', { value: 'roller' }, 'puts a roller (y held)'), h('option', { value: 'free' }, 'frees the node'));
    const pressRow = h('label', { class: 'row', id: 'growth-press-row' }, 'A press on the beam ', press);
    const key = h('div', {});
    const info = h('p', { id: 'growth-info', class: 'hint' });
    side.append(h('div', { id: 'growthview' },
      h('h3', {}, 'Growth'),
      h('div', { class: 'row seg', role: 'group', 'aria-label': 'growth controls' }, buttons),
      h('div', { class: 'row', id: 'growth-seed-row' }, seed, reseed),
      pressRow, key, info));
    let shown = '';

    return {
      hint: (isDriver) => (isDriver && truss() ? 'press on the beam to put the load there, drag to move it · wheel to zoom · right-drag to pan'
        : 'drag to orbit · wheel to zoom · right-drag to pan'), // a plant is watched, not pulled
      state(t) {
        for (const el of [...buttons, reseed, seed, press]) el.disabled = t.role !== 'driver';
        seed.parentElement.hidden = t.model === 'truss';
        pressRow.hidden = t.model !== 'truss';
        const what = t.model === 'truss' ? 'truss' : 'plant';
        if (what !== shown) {
          shown = what;
          const [lo, hi] = t.scalar_range ?? [0, 1];
          key.replaceChildren(what === 'truss'
            ? legend('internal energy of each cell and member (J, log scale)', `1e${lo} J`, `1e${hi} J`)
            : legend('branch girth', 'thin', 'thick'));
        }
        if (what === 'plant' && t.seed && !seed.value) seed.value = String(t.seed);
        info.textContent = what === 'truss'
          ? `${t.cells?.join(' x ')} cells of ${t.cell_m} m, a ${t.thickness_m * 1000} mm plate: pin bottom left, roller bottom right`
          : `seed ${t.seed}${t.three_d ? ', 3D' : ''}`;
      },
      /** A press on the beam: the load goes to the nearest node (and the hand drags it), or
       *  that node is held as chosen beside the view. */
      grab(point, hit) {
        if (!truss() || hit.object !== 0) return;
        if (press.value === 'load') { conn.send('grab', { point }); return; }
        const l = st.state.cell_m, node = [Math.round(point[0] / l), Math.round(point[2] / l)];
        conn.send('support', { node, fix: press.value });
      },
    };
  },
};
