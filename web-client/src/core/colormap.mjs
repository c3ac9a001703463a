// colormap.mjs: a scalar per vertex (energy, stress, growth) to a colour per vertex, through
// viridis (van der Walt and Smith's perceptually uniform map, matplotlib's default): its
// lightness rises evenly from dark purple to yellow, so equal steps of the scalar look like
// equal steps, also in grey print and to most colour-blind eyes. Runs in the worker.

// viridis at 0, 1/8, ..., 1 (sRGB, 0-255; R's viridis(9)), linearly interpolated between.
const VIRIDIS = [
  [0x44, 0x01, 0x54], [0x47, 0x2d, 0x7b], [0x3b, 0x52, 0x8b], [0x2c, 0x72, 0x8e], [0x21, 0x90, 0x8c],
  [0x27, 0xad, 0x81], [0x5d, 0xc8, 0x63], [0xaa, 0xdc, 0x32], [0xfd, 0xe7, 0x25],
];

/** sRGB 0-255 to three.js's linear working space (vertex colours are linear). */
const linear = (c) => {
  const s = c / 255;
  return s <= 0.04045 ? s / 12.92 : ((s + 0.055) / 1.055) ** 2.4;
};

/** viridis(t) for t in [0, 1] (clamped), as sRGB 0-255 [r, g, b]. */
export function viridis(t) {
  const x = Math.min(1, Math.max(0, Number.isFinite(t) ? t : 0)) * (VIRIDIS.length - 1);
  const i = Math.min(VIRIDIS.length - 2, Math.floor(x)), f = x - i;
  return [0, 1, 2].map((b) => VIRIDIS[i][b] + f * (VIRIDIS[i + 1][b] - VIRIDIS[i][b]));
}

// 1024 steps of the map in linear RGB, made once: a vertex costs a lookup.
const STEPS = 1024;
const LUT = new Float32Array(STEPS * 3);
for (let k = 0; k < STEPS; k++) {
  const c = viridis(k / (STEPS - 1));
  for (let b = 0; b < 3; b++) LUT[k * 3 + b] = linear(c[b]);
}

/** Linear RGB per vertex (n x 3, float) of scalars over [smin, smax]; a range of zero width
 *  is drawn at its bottom colour. */
export function scalarColors(scalars, smin, smax) {
  const out = new Float32Array(scalars.length * 3);
  const k = smax > smin ? (STEPS - 1) / (smax - smin) : 0;
  for (let i = 0; i < scalars.length; i++) {
    const x = (scalars[i] - smin) * k;
    const j = (x > 0 ? (x < STEPS - 1 ? Math.round(x) : STEPS - 1) : 0) * 3;
    out[i * 3] = LUT[j];
    out[i * 3 + 1] = LUT[j + 1];
    out[i * 3 + 2] = LUT[j + 2];
  }
  return out;
}

/** Linear RGB per vertex (n x 3) of categorical scalars: colors[round(s)] (0xRRGGBB, sRGB),
 *  clamped to the list (a region id to its tissue's colour). */
export function paletteColors(scalars, colors) {
  const lut = colors.map((c) => [(c >> 16) & 255, (c >> 8) & 255, c & 255].map(linear));
  const out = new Float32Array(scalars.length * 3);
  for (let i = 0; i < scalars.length; i++) {
    const k = Math.min(lut.length - 1, Math.max(0, Math.round(scalars[i]) || 0));
    out[i * 3] = lut[k][0];
    out[i * 3 + 1] = lut[k][1];
    out[i * 3 + 2] = lut[k][2];
  }
  return out;
}
