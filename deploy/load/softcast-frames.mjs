#!/usr/bin/env node
// softcast-frames: bytes per mesh frame and encode time for one session during a pull.
// Creates a session (server default scene unless --dims), grabs the belly, drags it in
// and out for --seconds at 30 moves/s, and prints one JSON line: keyframe and delta
// sizes (median, p90, max) and the server's mean encode and step times (/metrics).
import WebSocket from 'ws';

const args = process.argv.slice(2);
const opt = (k, d) => { const i = args.indexOf(k); return i >= 0 ? args[i + 1] : d; };
const base = (opt('--url', null) ?? (() => { throw new Error('usage: softcast-frames --url http://HOST:PORT/ [--dims WxHxD] [--seconds S]'); })()).replace(/\/+$/, '');
const dims = opt('--dims', null), seconds = Number(opt('--seconds', 4));
const body = dims ? { scene: 'volume', dims: dims.split('x').map(Number) } : { scene: 'volume' };
const r = await fetch(`${base}/api/sessions`, { method: 'POST', body: JSON.stringify(body) });
if (r.status !== 201) throw new Error(`create: HTTP ${r.status} ${await r.text()}`);
const s = await r.json();
const ws = new WebSocket(`${s.ws_url}&token=${s.control_token}`);
const sizes = { 1: [], 2: [] };
ws.on('message', (d, bin) => { if (bin) sizes[d[5]]?.push(d.length); });
await new Promise((res, rej) => { ws.once('open', res); ws.once('error', rej); });
await new Promise((res) => setTimeout(res, 500));
const d = s.dims, p = [d[0] / 2, d[1] * 0.81, d[2] / 2]; // just inside the phantom's belly skin
ws.send(JSON.stringify({ type: 'grab', seq: 1, point: p, radius: 2.5, space: 'lattice' }));
let seq = 2;
const t0 = Date.now();
while (Date.now() - t0 < seconds * 1000) {
  ws.send(JSON.stringify({ type: 'move', seq: seq++, point: [p[0], p[1] + 6 * Math.sin((seq - 2) / 15), p[2]], space: 'lattice' }));
  await new Promise((res) => setTimeout(res, 33));
}
await new Promise((res) => setTimeout(res, 500));
const q = (a, f) => [...a].sort((x, y) => x - y)[Math.min(a.length - 1, Math.floor(a.length * f))];
const m = await (await fetch(`${base}/metrics`)).text();
const metric = (k) => Number(new RegExp(`${k}\\{session="${s.id}"\\} ([0-9.]+)`).exec(m)?.[1]);
console.log(JSON.stringify({
  dims: s.dims, keyframes: sizes[1].length, keyframe_bytes: q(sizes[1], 0.5), deltas: sizes[2].length,
  delta_bytes_median: q(sizes[2], 0.5), delta_bytes_p90: q(sizes[2], 0.9), delta_bytes_max: Math.max(...sizes[2]),
  encode_ms_mean: metric('softcast_session_encode_ms_mean'), step_ms_mean: metric('softcast_session_step_ms_mean'),
}));
ws.close();
await fetch(`${base}/api/sessions/${s.id}`, { method: 'DELETE', headers: { authorization: `Bearer ${s.control_token}` } });
