// dataset.mjs: what a session's data is, in words, from the `dataset` a scene describes
// (GET /api/sessions, state messages): its name and format, the dims as stored and as
// simulated (with the fit factor), the spacing, the value range, and any warning. The server
// puts nothing about the patient in it.
const mm = (v) => v.map((x) => x.toFixed(2)).join(' x ');

/** One line for the lobby's table: "name, stored -> simulated". */
export function datasetShort(s) {
  const d = s.dataset;
  if (!d) return s.dims ? s.dims.join(' x ') : '';
  const stored = d.stored_dims?.join(' x ');
  const sim = s.dims?.join(' x ');
  return `${d.name}: ${stored}${sim && sim !== stored ? ` -> ${sim}` : ''}`;
}

/** The lines the session shows. */
export function datasetLines(s) {
  const d = s.dataset;
  if (!d) return [];
  const lines = [`${d.name} (${d.format})`];
  if (d.stored_dims) lines.push(`stored ${d.stored_dims.join(' x ')}`);
  if (s.dims) lines.push(`simulated ${s.dims.join(' x ')}${d.fit_factor > 1 ? ` (averaged by ${d.fit_factor})` : ''}`);
  if (s.spacing) lines.push(`spacing ${mm(s.spacing)} mm`);
  if (d.hu_range) lines.push(`HU ${Math.round(d.hu_range[0])} to ${Math.round(d.hu_range[1])}`);
  if (d.orientation) lines.push(`stored as ${d.orientation}`);
  if (d.warning) lines.push(`warning: ${d.warning}`);
  return lines;
}
