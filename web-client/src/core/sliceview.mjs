// sliceview.mjs: one slice of a deformed volume beside the 3D view (the slice frames of
// protocol/README.md). Axial, coronal or sagittal, an index slider, window presets and
// free level/width. It follows the deformation: after each new mesh frame it asks again,
// one request in flight at a time. A scene that has slices mounts one (scenes/volume.mjs).
//
// Radiological convention, and where the flips live: the server sends a slice in lattice
// order (protocol/README.md, kind 3: column u along the plane's first axis, x, x or y; row v
// along its second, y, z or z). A volume's lattice is RAS (x toward the patient's right, y
// anterior, z superior), so every slice axis points toward R, A or S, and radiologists want
// each of them toward the screen's left or top: axial seen from the feet (anterior up, the
// patient's right on the screen's left), coronal seen from the front (head up, right on the
// left), sagittal seen from the patient's right (head up, anterior on the left). One display
// transform does all three: the image turned by 180 degrees (drawImage under scale(-1, -1)).
// It lives here and nowhere else; canvasOf and pixelAt map between slice pixels and the
// canvas through it, for anything that points at a slice. The letters at the edges name the
// patient's directions when the session says the lattice is RAS (state.orientation); a file
// kept as stored gets a line saying so instead.
const PLANES = ['axial', 'coronal', 'sagittal'];
// The patient's direction at each screen edge, per plane (after the 180-degree turn).
const LETTERS = [
  { top: 'A', bottom: 'P', left: 'R', right: 'L' },
  { top: 'S', bottom: 'I', left: 'R', right: 'L' },
  { top: 'S', bottom: 'I', left: 'A', right: 'P' },
];

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
    this.orientation = null; // 'RAS' when the lattice is known to be RAS; '' when not
    this.rect = null;        // where the last slice was drawn: {x, y, w, h, width, height} (CSS px)
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

  /** The lattice's orientation from the session state ('RAS', or '' for a file kept as
   *  stored) and what the file said. */
  setOrientation(orientation, fileOrientation) {
    this.orientation = orientation ?? '';
    this.fileOrientation = fileOrientation ?? '';
  }

  /** The letters shown at the slice's edges now ({top, bottom, left, right}), or null when
   *  the orientation is not known. */
  letters(plane = this.lastPlane) {
    return this.orientation === 'RAS' && plane !== undefined ? LETTERS[plane] : null;
  }

  /** Canvas position (CSS px, the pixel's centre) of slice pixel (u, v) as last drawn. */
  canvasOf(u, v) {
    const r = this.rect;
    return [r.x + r.w - ((u + 0.5) * r.w) / r.width, r.y + r.h - ((v + 0.5) * r.h) / r.height];
  }

  /** The slice pixel [u, v] shown at canvas position (cx, cy) (CSS px), or null outside it. */
  pixelAt(cx, cy) {
    const r = this.rect;
    if (!r) return null;
    const u = Math.floor(((r.x + r.w - cx) / r.w) * r.width), v = Math.floor(((r.y + r.h - cy) / r.h) * r.height);
    return u >= 0 && v >= 0 && u < r.width && v < r.height ? [u, v] : null;
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
    // Radiological convention: turned by 180 degrees (see the top of this file).
    this.ctx.save();
    this.ctx.translate(cw, ch);
    this.ctx.scale(-1, -1);
    this.ctx.drawImage(off, (cw - dw) / 2, (ch - dh) / 2, dw, dh);
    this.ctx.restore();
    this.rect = { x: (cw - dw) / 2, y: (ch - dh) / 2, w: dw, h: dh, width: s.width, height: s.height };
    this.lastPixels = s.pixels;
    this.lastPlane = s.plane;
    this.drawLetters(s.plane);
    this.pump();
  }

  /** The patient's directions at the image's four edges, or a line saying they are not
   *  known (a file kept as stored). */
  drawLetters(plane) {
    const c = this.ctx, r = this.rect, L = this.letters(plane);
    c.save();
    c.font = 'bold 15px sans-serif';
    c.fillStyle = '#ffd54f';
    c.shadowColor = '#000';
    c.shadowBlur = 3;
    const x0 = Math.max(r.x, 0), y0 = Math.max(r.y, 0);
    const x1 = Math.min(r.x + r.w, this.canvas.width), y1 = Math.min(r.y + r.h, this.canvas.height);
    if (L) {
      c.textAlign = 'center';
      c.textBaseline = 'top';
      c.fillText(L.top, (x0 + x1) / 2, y0 + 4);
      c.textBaseline = 'bottom';
      c.fillText(L.bottom, (x0 + x1) / 2, y1 - 4);
      c.textBaseline = 'middle';
      c.textAlign = 'left';
      c.fillText(L.left, x0 + 5, (y0 + y1) / 2);
      c.textAlign = 'right';
      c.fillText(L.right, x1 - 5, (y0 + y1) / 2);
    } else if (this.orientation === '') {
      c.font = '12px sans-serif';
      c.textAlign = 'left';
      c.textBaseline = 'top';
      c.fillText('orientation unknown: shown as stored', x0 + 5, y0 + 4);
    }
    c.restore();
  }
}
