#!/usr/bin/env node
// softcast-frames: bytes per object frame and encode time for one session. The volume
// (default): the belly grabbed and dragged in and out for --seconds at 30 moves/s; the cloth
// (--scene cloth --characters N): the crowd walks while the camera circles it. Prints one
// JSON line: the snapshot's size, structural frames (a key, an append or a removal) and the
// others (median, p90, max), what the frames carried (records by part, from a client that
// decodes them as the browser does: objects.mjs) and the server's mean encode and step times
// (/metrics).
import WebSocket from 'ws';
import { createObjectClient } from './objects.mjs';

const args = process.argv.slice(2);
const opt = (k, d) => { const i = args.indexOf(k); return i >= 0 ? args[i + 1] : d; };
const usage = 'usage: softcast-frames --url http://HOST:PORT/ [--dims WxHxD] [--scene volume|cloth] [--characters N] [--seconds S]';
const base = (opt('--url', null) ?? (() => { throw new Error(usage); })()).replace(/\/+$/, '');
const dims = opt('--dims', null), seconds = Number(opt('--seconds', 4)), scene = opt('--scene', 'volume');
if (scene !== 'volume' && scene !== 'cloth') throw new Error(usage);
const body = scene === 'cloth' ? { scene, characters: Number(opt('--characters', 16)) }
  : dims ? { scene, dims: dims.split('x').map(Number) } : { scene };
const r = await fetch(`${base}/api/sessions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
if (r.status !== 201) throw new Error(`create: HTTP ${r.status} ${await r.text()}`);
const s = await r.json();
const ws = new WebSocket(`${s.ws_url}&token=${s.control_token}`);
const sizes = { snapshot: [], structural: [], other: [] };
const client = createObjectClient();
ws.on('message', (d, bin) => {
  if (!bin || d.length < 40 || d[4] !== 2 || d[5] !== 5) return; // object frames only
  const flags = d.readUInt32LE(36);
  sizes[flags & 1 ? 'snapshot' : flags & 2 ? 'structural' : 'other'].push(d.length);
  client.receive(d);
});
await new Promise((res, rej) => { ws.once('open', res); ws.once('error', rej); });
await new Promise((res) => setTimeout(res, 500));
let seq = 1;
const t0 = Date.now();
if (scene === 'cloth') {
  ws.send(JSON.stringify({ type: 'motion', seq: seq++, character: -1, motion: 'walk' }));
  while (Date.now() - t0 < seconds * 1000) {
    const a = (Date.now() - t0) / 3000, rad = 13 + 7 * Math.sin(a * 1.3);
    ws.send(JSON.stringify({ type: 'camera', seq: seq++, point: [rad * Math.cos(a), rad * Math.sin(a), 1.7] }));
    await new Promise((res) => setTimeout(res, 100));
  }
} else {
  const d = s.dims, p = [d[0] / 2, d[1] * 0.81, d[2] / 2]; // just inside the phantom's belly skin
  ws.send(JSON.stringify({ type: 'grab', seq: seq++, point: p, radius: 2.5, space: 'lattice' }));
  while (Date.now() - t0 < seconds * 1000) {
    ws.send(JSON.stringify({ type: 'move', seq: seq++, point: [p[0], p[1] + 6 * Math.sin((seq - 2) / 15), p[2]], space: 'lattice' }));
    await new Promise((res) => setTimeout(res, 33));
  }
}
await new Promise((res) => setTimeout(res, 500));
const q = (a, f) => (a.length ? [...a].sort((x, y) => x - y)[Math.min(a.length - 1, Math.floor(a.length * f))] : null);
const m = await (await fetch(`${base}/metrics`)).text();
const metric = (k) => Number(new RegExp(`${k}\\{session="${s.id}"\\} ([0-9.]+)`).exec(m)?.[1]);
const c = client.stats;
console.log(JSON.stringify({
  scene, dims: s.dims, characters: s.characters,
  snapshot_bytes: sizes.snapshot[0] ?? null,
  structural_frames: sizes.structural.length, structural_bytes_median: q(sizes.structural, 0.5),
  structural_bytes_max: sizes.structural.length ? Math.max(...sizes.structural) : null,
  frames: sizes.other.length, bytes_median: q(sizes.other, 0.5), bytes_p90: q(sizes.other, 0.9),
  bytes_max: sizes.other.length ? Math.max(...sizes.other) : null,
  objects: c.objects, records: c.parts, frames_applied: c.applied, frames_refused: c.refused,
  decode_ms_per_frame: Number((c.decodeMs / Math.max(1, c.applied)).toFixed(3)),
  encode_ms_mean: metric('softcast_session_encode_ms_mean'), step_ms_mean: metric('softcast_session_step_ms_mean'),
}));
ws.close();
await fetch(`${base}/api/sessions/${s.id}`, { method: 'DELETE', headers: { authorization: `Bearer ${s.control_token}` } });
