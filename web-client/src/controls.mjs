// controls.mjs: the driver's panel (damping condition, global and per-tissue parameters,
// reset, pause) and the classroom (role, viewers, viewer link, request and hand over
// control). Values come from the server's state messages; viewers see them disabled.
const GLOBALS = [
  ['alpha', 'alpha (B: velocity kept per frame)'],
  ['b0', 'b0 (C: base damping)'],
  ['inertia_gain', 'inertia gain k'],
  ['v_max', 'velocity clamp'],
];
const CLOTH = [
  ['substeps', 'substeps per frame'],
  ['stretch_compliance', 'stretch compliance (m/N)'],
  ['bend_compliance', 'bend compliance (m/N)'],
  ['damping', 'damping (per s)'],
  ['wind.0', 'steady wind x (m/s²)'],
  ['wind.1', 'steady wind y (m/s²)'],
  ['lod_enter.0', 'LOD 1 beyond (m)'],
  ['lod_exit.0', 'LOD 0 again under (m)'],
  ['lod_hold_frames', 'hold between switches (frames)'],
  ['strategy', 'switch: 0 handoff, 1 zero v, 2 reset, 3 copy'],
];
const THRESHOLDS = [
  ['hu_threshold.0', 'air | skin, HU'],
  ['hu_threshold.1', 'skin | muscle, HU'],
  ['hu_threshold.2', 'muscle | bone, HU'],
];
const TISSUES = ['air', 'skin_fat', 'muscle_organ', 'bone'];
const FIELDS = [['min_len', 'min'], ['max_len', 'max'], ['shear', 'shear'], ['speed', 'speed'],
  ['inv_mass', '1/m'], ['b1', 'b1']];

export class Controls {
  constructor(root, conn, { viewerLink }) {
    this.root = root;
    this.conn = conn;
    this.inputs = new Map(); // param name -> input
    this.driver = false;
    const numberInput = (name, step) => {
      const i = document.createElement('input');
      i.type = 'number';
      i.step = step;
      i.dataset.param = name;
      i.addEventListener('change', () => {
        const v = Number(i.value);
        if (i.value !== '' && Number.isFinite(v)) this.conn.send('set_params', { params: { [name]: v } });
      });
      this.inputs.set(name, i);
      return i;
    };
    const grid = (el, rows, step) => {
      for (const [name, label] of rows) {
        const l = document.createElement('label');
        l.textContent = label;
        el.append(l, numberInput(name, step));
      }
    };
    grid(root.querySelector('#globals'), GLOBALS, '0.05');
    grid(root.querySelector('#cloth-globals'), CLOTH, 'any');
    grid(root.querySelector('#thresholds'), THRESHOLDS, '10');
    const table = root.querySelector('#tissues');
    const head = table.insertRow();
    for (const h of ['', ...FIELDS.map((f) => f[1])]) head.appendChild(document.createElement('th')).textContent = h;
    for (const t of TISSUES) {
      const r = table.insertRow();
      r.insertCell().textContent = t.replace('_', '/');
      for (const [f] of FIELDS) r.insertCell().append(numberInput(`tissue.${t}.${f}`, '0.05'));
    }
    root.querySelectorAll('input[name=condition]').forEach((r) =>
      r.addEventListener('change', () => this.conn.send('set_condition', { condition: r.value })));
    root.querySelector('#reset').addEventListener('click', () => this.conn.send('reset'));
    this.pauseBtn = root.querySelector('#pause');
    this.pauseBtn.addEventListener('click', () => this.conn.send(this.paused ? 'resume' : 'pause'));
    root.querySelector('#copy-link').addEventListener('click', async (e) => {
      const link = viewerLink();
      try { await navigator.clipboard.writeText(link); e.target.textContent = 'Copied'; } catch { prompt('Viewer link', link); }
      setTimeout(() => { e.target.textContent = 'Copy viewer link'; }, 1500);
    });
    this.requestBtn = root.querySelector('#request-control');
    this.requestBtn.addEventListener('click', () => {
      this.conn.send('request_control');
      this.requestBtn.textContent = 'Asked the driver';
      this.requestBtn.disabled = true;
    });
    this.requests = root.querySelector('#requests');
  }

  /** A state message from the server. */
  state(st) {
    this.driver = st.role === 'driver';
    this.paused = st.paused;
    this.pauseBtn.textContent = st.paused ? 'Resume' : 'Pause';
    const viewers = st.clients - (st.driver ? 1 : 0);
    this.root.querySelector('#role').textContent = this.driver ? 'You drive' : st.driver ? 'You watch' : 'Nobody drives';
    this.root.querySelector('#viewers').textContent = `${viewers} viewer${viewers === 1 ? '' : 's'}`;
    for (const [name, input] of this.inputs) {
      input.disabled = !this.driver;
      if (document.activeElement !== input && st.params[name] !== undefined)
        input.value = String(Number(st.params[name].toPrecision(4)));
    }
    this.root.querySelectorAll('input[name=condition]').forEach((r) => {
      r.disabled = !this.driver;
      r.checked = r.value === st.params.condition;
    });
    for (const b of [this.root.querySelector('#reset'), this.pauseBtn]) b.disabled = !this.driver;
    this.requestBtn.hidden = this.driver;
    if (this.driver) {
      this.requestBtn.textContent = 'Request control';
      this.requestBtn.disabled = false;
    } else {
      this.requests.replaceChildren();
    }
  }

  /** A viewer asked the driver for control. */
  controlRequest(from) {
    if ([...this.requests.children].some((d) => d.dataset.from === from)) return;
    const d = document.createElement('div');
    d.dataset.from = from;
    d.textContent = `${from} asks for control `;
    const give = document.createElement('button');
    give.textContent = 'Hand over';
    give.addEventListener('click', () => { this.conn.send('handover', { to: from }); d.remove(); });
    const no = document.createElement('button');
    no.textContent = 'Ignore';
    no.addEventListener('click', () => d.remove());
    d.append(give, ' ', no);
    this.requests.append(d);
  }
}
