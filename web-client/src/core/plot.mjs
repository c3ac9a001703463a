// plot.mjs: a small live plot of two traces over the last few seconds (a canvas): samples
// (t in seconds, a, b) pushed as frames arrive, drawn against a time axis that ends at the
// newest sample, trace a on the left axis and trace b on the right one, both with their zero
// on one line across the middle (so a trace that swings past zero is seen to). It names no
// scene; a scene says what the traces are (labels, units, colours).
export class TracePlot {
  /** canvas: the element drawn on; opts: { seconds, a: {label, unit, color, signed}, b: {...} }
   *  (signed false: the trace is never below zero, its axis has no negative label). */
  constructor(canvas, { seconds = 5, a, b }) {
    this.canvas = canvas;
    this.ctx = canvas.getContext('2d');
    this.seconds = seconds;
    this.traces = [a, b];
    this.samples = []; // [t, a, b]
    this.drawn = 0;
  }

  clear() {
    this.samples = [];
    this.draw();
  }

  /** A sample; draw false: more follow at once (the last of them draws). */
  push(t, a, b, draw = true) {
    const last = this.samples.at(-1);
    if (last && t < last[0]) this.samples = []; // time went back: a reset or a new session
    this.samples.push([t, a, b]);
    while (this.samples.length && this.samples[0][0] < t - this.seconds - 1) this.samples.shift();
    if (draw) this.draw();
  }

  /** Where things are drawn (CSS px): the plot's box and the zero line. */
  layout() {
    const w = this.canvas.clientWidth || this.canvas.width, h = this.canvas.clientHeight || this.canvas.height;
    const box = { x: 44, y: 18, w: Math.max(10, w - 44 - 50), h: Math.max(10, h - 18 - 26) };
    return { w, h, box, zeroY: box.y + box.h / 2 };
  }

  draw() {
    const { w, h, box, zeroY } = this.layout();
    if (this.canvas.width !== w || this.canvas.height !== h) { this.canvas.width = w; this.canvas.height = h; }
    const c = this.ctx;
    c.fillStyle = '#11151b';
    c.fillRect(0, 0, w, h);
    const t1 = this.samples.length ? this.samples.at(-1)[0] : 0, t0 = t1 - this.seconds;
    const shown = this.samples.filter((s) => s[0] >= t0 - 0.05);
    // Each trace's half-range: a round number over its largest magnitude shown.
    const ranges = [1, 2].map((k) => nice(Math.max(...shown.map((s) => Math.abs(s[k])), 0) || 1));
    const X = (t) => box.x + ((t - t0) / this.seconds) * box.w;
    const Y = (v, k) => zeroY - (v / ranges[k]) * (box.h / 2);
    c.strokeStyle = '#3a4250';
    c.lineWidth = 1;
    c.strokeRect(box.x + 0.5, box.y + 0.5, box.w, box.h);
    c.beginPath();
    c.moveTo(box.x, Math.round(zeroY) + 0.5);
    c.lineTo(box.x + box.w, Math.round(zeroY) + 0.5);
    c.stroke();
    c.font = '11px sans-serif';
    c.fillStyle = '#9aa4b2';
    c.textBaseline = 'top';
    c.textAlign = 'center';
    for (let s = 0; s <= this.seconds; s++) c.fillText(`${s - this.seconds}`, X(t0 + s), box.y + box.h + 3);
    c.fillText('time (s)', box.x + box.w / 2, box.y + box.h + 13);
    this.traces.forEach((tr, k) => {
      const left = k === 0, x = left ? box.x - 4 : box.x + box.w + 4;
      c.fillStyle = tr.color;
      c.textAlign = left ? 'right' : 'left';
      c.textBaseline = 'middle';
      c.fillText(fmt(ranges[k]), x, box.y + 4);
      c.fillText('0', x, zeroY);
      if (tr.signed !== false) c.fillText(fmt(-ranges[k]), x, box.y + box.h - 4);
      c.textBaseline = 'top';
      c.textAlign = left ? 'left' : 'right';
      c.fillText(`${tr.label} (${tr.unit})`, left ? box.x : box.x + box.w, 2);
      c.strokeStyle = tr.color;
      c.lineWidth = 2;
      c.beginPath();
      shown.forEach((s, i) => (i ? c.lineTo(X(s[0]), Y(s[k + 1], k)) : c.moveTo(X(s[0]), Y(s[k + 1], k))));
      c.stroke();
    });
    this.drawn++;
  }
}

function nice(x) {
  const p = 10 ** Math.floor(Math.log10(x)), m = x / p;
  return (m <= 1 ? 1 : m <= 2 ? 2 : m <= 5 ? 5 : 10) * p;
}

function fmt(v) {
  return Math.abs(v) >= 100 || Number.isInteger(v) ? v.toFixed(0) : v.toPrecision(2);
}
