// sliceview.mjs: one slice of a deformed volume beside the 3D view (the slice frames of
// protocol/README.md). Axial, coronal or sagittal, an index slider, window presets and
// free level/width. It follows the deformation: after each new mesh frame it asks again,
// one request in flight at a time. A scene that has slices mounts one (scenes/volume.mjs).
const PLANES = ['axial', 'coronal', 'sagittal'];

const MARKUP = `
  <div class="row">
    <span class="seg" id="planes">
      <button data-plane="axial" class="on">Axial</button><button data-plane="coronal">Coronal</button><button data-plane="sagittal">Sagittal</button>
    </span>
  </div>
  <canvas id="slice"></canvas>
  <label class="row">Index <input type="range" id="slice-index" min="0" max="0" value="0"><output id="slice-index-out"></output></label>
  <div class="row">
    <span class="seg" id="presets">
      <button data-level="40" data-width="400" class="on">Soft tissue</button><button data-level="500" data-width="2000">Bone</button><button data-level="-600" data-width="1500">Lung</button>
    </span>
  </div>
  <div class="row">
    <label>Level <input type="number" id="level" value="40" step="10"></label>
    <label>Width <input type="number" id="width" value="400" min="1" step="10"></label>
  </div>`;

export class SliceView {
  /** root: an empty element the view fills (id sliceview); request(plane, index, level,
   *  width) sends the slice event and returns its seq. */
  constructor(root, request) {
    root.id = 'sliceview';
    root.innerHTML = MARKUP;
    this.request = request;
    this.canvas = root.querySelector('#slice');
    this.ctx = this.canvas.getContext('2d');
    this.index = root.querySelector('#slice-index');
    this.indexOut = root.querySelector('#slice-index-out');
    this.level = root.querySelector('#level');
    this.width = root.querySelector('#width');
    this.plane = 'axial';
    this.dims = null;
    this.spacing = [1, 1, 1];
    this.inFlight = 0;     // seq of the outstanding request (0: none)
    this.wantFrame = -1;   // newest mesh frame the slice should show
    this.shownFrame = -1;
    this.changed = true;   // plane, index or window changed since the last request
    this.received = 0;
    this.lastPixels = null;
    root.querySelectorAll('#planes button').forEach((b) => b.addEventListener('click', () => {
      root.querySelectorAll('#planes button').forEach((o) => o.classList.toggle('on', o === b));
      this.setPlane(b.dataset.plane);
    }));
    root.querySelectorAll('#presets button').forEach((b) => b.addEventListener('click', () => {
      root.querySelectorAll('#presets button').forEach((o) => o.classList.toggle('on', o === b));
      this.level.value = b.dataset.level;
      this.width.value = b.dataset.width;
      this.touch();
    }));
    this.index.addEventListener('input', () => this.touch());
    for (const el of [this.level, this.width]) el.addEventListener('input', () => {
      root.querySelectorAll('#presets button').forEach((o) => o.classList.remove('on'));
      this.touch();
    });
  }

  /** Lattice size from the session state. */
  setDims(dims, spacing) {
    const first = !this.dims;
    this.dims = dims;
    this.spacing = spacing;
    if (first) this.setPlane(this.plane);
  }

  setPlane(plane) {
    this.plane = plane;
    if (!this.dims) return;
    const n = this.dims[2 - PLANES.indexOf(plane)]; // axial: z, coronal: y, sagittal: x
    this.index.max = String(n - 1);
    this.index.value = String(Math.floor(n / 2));
    this.touch();
  }

  touch() {
    this.indexOut.value = this.index.value;
    this.changed = true;
    this.pump();
  }

  /** A mesh frame arrived: the slice should catch up with it. */
  meshFrame(frame) {
    this.wantFrame = frame;
    this.pump();
  }

  /** Called when a request may be due (also after a reply). */
  pump() {
    if (this.inFlight || !this.dims) return;
    if (!this.changed && this.shownFrame >= this.wantFrame) return;
    const w = Math.max(1, Number(this.width.value) || 1), l = Number(this.level.value) || 0;
    const seq = this.request(this.plane, Number(this.index.value), l, w);
    if (seq) {
      this.inFlight = seq;
      this.changed = false;
      this.requestedFor = this.wantFrame;
    }
  }

  /** A decoded slice frame (wire.mjs: grey pixels and their RGBA). */
  show(s) {
    this.inFlight = 0;
    this.received++;
    this.shownFrame = Math.max(this.shownFrame, this.requestedFor ?? s.frame);
    const img = new ImageData(s.rgba, s.width, s.height);
    // Physical aspect: axial x by y, coronal x by z, sagittal y by z (spacing in mm).
    const ax = { 0: [0, 1], 1: [0, 2], 2: [1, 2] }[s.plane];
    const wmm = s.width * this.spacing[ax[0]], hmm = s.height * this.spacing[ax[1]];
    const scale = Math.min(this.canvas.clientWidth / wmm, this.canvas.clientHeight / hmm) || 1;
    const cw = Math.max(1, Math.round(this.canvas.clientWidth)), ch = Math.max(1, Math.round(this.canvas.clientHeight));
    if (this.canvas.width !== cw || this.canvas.height !== ch) { this.canvas.width = cw; this.canvas.height = ch; }
    const off = new OffscreenCanvas(s.width, s.height);
    off.getContext('2d').putImageData(img, 0, 0);
    this.ctx.fillStyle = '#000';
    this.ctx.fillRect(0, 0, cw, ch);
    this.ctx.imageSmoothingEnabled = false;
    const dw = wmm * scale, dh = hmm * scale;
    // Axial: anterior (+y) up, as radiologists read it; the others as they come.
    this.ctx.save();
    if (s.plane === 0) {
      this.ctx.translate(0, ch);
      this.ctx.scale(1, -1);
    }
    this.ctx.drawImage(off, (cw - dw) / 2, (ch - dh) / 2, dw, dh);
    this.ctx.restore();
    this.lastPixels = s.pixels;
    this.lastPlane = s.plane;
    this.pump();
  }
}
