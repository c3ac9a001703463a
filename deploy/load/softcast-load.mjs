#!/usr/bin/env node
// softcast-load: creates N sessions with M clients each (1 driver + M-1 viewers), drives
// each session with a grab-move-release loop, stops after S seconds and prints one JSON
// line: sessions, clients, frames (object frames, kind 5), structural_frames, bytes,
// fps_per_client, latency_ms_p50/p99 (from a move's send to the first frame that echoes its
// seq, at every client), errors. Only frame headers are read (40 bytes), so the tool stays
// cheap next to the server; with --decode D the first D clients of each session also decode
// every frame as the browser does (objects.mjs: every structural frame in order, the newest
// of a burst) and the line adds what that cost and whether every frame applied.
import WebSocket from 'ws';
import fs from 'node:fs';

const usage = `usage: softcast-load --url http://HOST:PORT/ [--sessions N] [--clients M] [--seconds S]
                     [--dims WxHxD] [--rate HZ]   (moves per second per driver, default 30)
                     [--scene volume|cloth|softbody] [--characters N]   (cloth: the camera
                     circles a walking crowd instead of a drag)
                     [--model hybrid|surface]   (softbody: the organ is grabbed at its top and
                     pulled, let go, and its tray slides and tilts under it)
                     [--decode D]   (the first D clients of each session decode the frames)
                     [--stagger 1]   (session i starts its loop i/N of a cycle late, so that
                     the sessions do not all grab and release at the same tick)
                     [--key-file FILE]   (a server with --api-key-file: its key, sent as
                     Authorization: Bearer when making sessions)`;

function parse(argv) {
  const o = { url: null, sessions: 1, clients: 5, seconds: 10, dims: null, rate: 30, scene: 'volume', characters: 1, decode: 0, model: 'hybrid' };
  for (let i = 2; i < argv.length; i++) {
    const k = argv[i], v = argv[i + 1];
    if (k === '--help' || k === '-h') { console.log(usage); process.exit(0); }
    if (v === undefined) throw new Error(`${k} needs a value\n${usage}`);
    i++;
    if (k === '--url') o.url = v;
    else if (k === '--sessions') o.sessions = posInt(k, v);
    else if (k === '--clients') o.clients = posInt(k, v);
    else if (k === '--seconds') o.seconds = Number(v);
    else if (k === '--rate') o.rate = Number(v);
    else if (k === '--scene') {
      if (!['volume', 'cloth', 'softbody'].includes(v)) throw new Error(`--scene ${v}: volume, cloth or softbody`);
      o.scene = v;
    } else if (k === '--model') {
      if (v !== 'hybrid' && v !== 'surface') throw new Error(`--model ${v}: hybrid or surface`);
      o.model = v;
    } else if (k === '--characters') o.characters = posInt(k, v);
    else if (k === '--decode') o.decode = v === '0' ? 0 : posInt(k, v);
    else if (k === '--stagger') {
      if (v !== '0' && v !== '1') throw new Error(`--stagger ${v}: 0 or 1`);
      o.stagger = v === '1';
    }
    else if (k === '--key-file') {
      // The server's own rule (--api-key-file): the first line, white space at its ends dropped.
      try { o.key = fs.readFileSync(v, 'utf8').split('\n')[0].trim(); } catch (e) { throw new Error(`--key-file ${v}: ${e.message}`); }
      if (!o.key) throw new Error(`--key-file ${v}: empty`);
    }
    else if (k === '--dims') {
      const m = /^(\d+)x(\d+)x(\d+)$/.exec(v);
      if (!m) throw new Error(`--dims ${v}: must be WxHxD`);
      o.dims = m.slice(1).map(Number);
    } else throw new Error(`unknown option ${k}\n${usage}`);
  }
  if (!o.url) throw new Error(usage);
  if (!(o.seconds > 0 && o.seconds <= 3600)) throw new Error('--seconds: 0 to 3600');
  if (!(o.rate > 0 && o.rate <= 1000)) throw new Error('--rate: 0 to 1000');
  return o;
}
function posInt(k, v) {
  const n = Number(v);
  if (!Number.isInteger(n) || n < 1 || n > 10000) throw new Error(`${k} ${v}: an integer 1 to 10000`);
  return n;
}

const quantile = (xs, q) => {
  if (!xs.length) return null;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(q * s.length))];
};

// The soft body's driver at tick t: every 90 ticks a grab near the organ's top (the organ
// rests centred in its tray, its top about twice the walls' height up: describe's tray), the
// hand drawn up and sideways for 75 ticks and let go; between pulls the tray slides and
// tilts a little under it, every fifth tick.
function softbodyTick(info, t, seq) {
  const phase = t % 90, top = [0, 0, 1.7 * info.tray[2]];
  if (phase === 0) return { type: 'grab', seq, point: top };
  if (phase < 75) {
    const k = Math.sin((Math.PI * phase) / 75);
    return { type: 'move', seq, point: [top[0] + 0.02 * k, top[1], top[2] + 0.03 * k], space: 'world' };
  }
  if (phase === 75) return { type: 'release', seq };
  if (phase % 5 !== 0) return null;
  const a = (0.05 * Math.sin(t / 40)) / 2;
  return { type: 'tray', seq, pos: [0.02 * Math.sin(t / 30), 0, 0], quat: [Math.cos(a), Math.sin(a), 0, 0] };
}

async function main() {
  const o = parse(process.argv);
  const base = o.url.replace(/\/+$/, '');
  const stats = { frames: 0, structural: 0, other: 0, bytes: 0, errors: 0, latencies: [] };
  // Loaded only when asked: the header-only tool needs nothing but ws.
  const createObjectClient = o.decode ? (await import('./objects.mjs')).createObjectClient : null;
  const decoders = [];
  const sessions = [];
  for (let i = 0; i < o.sessions; i++) {
    const r = await fetch(`${base}/api/sessions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...(o.key ? { authorization: `Bearer ${o.key}` } : {}) },
      body: JSON.stringify(o.scene === 'cloth' ? { scene: 'cloth', characters: o.characters }
        : o.scene === 'softbody' ? { scene: 'softbody', model: o.model }
          : o.dims ? { scene: 'volume', dims: o.dims } : { scene: 'volume' }),
    });
    if (r.status !== 201) throw new Error(`creating session ${i}: HTTP ${r.status} ${await r.text()}`);
    sessions.push({ info: await r.json(), sent: new Map(), clients: [], frames: 0 });
  }
  // Connect everyone.
  for (const s of sessions)
    for (let c = 0; c < o.clients; c++) {
      const token = c === 0 ? s.info.control_token : s.info.view_token;
      const ws = new WebSocket(`${s.info.ws_url}&token=${token}`);
      ws.binaryType = 'nodebuffer';
      const cl = { ws, lastSeq: 0, frames: 0, decoder: c < o.decode ? createObjectClient() : null };
      if (cl.decoder) decoders.push(cl.decoder);
      ws.on('message', (data, isBinary) => {
        if (!isBinary) {
          const t = JSON.parse(data.toString());
          if (t.type === 'error') stats.errors++;
          return;
        }
        stats.bytes += data.length;
        // Object frames (version 2, kind 5) are the view; a slice answers a request (none
        // here); anything else is a server this tool does not know.
        if (data.length < 40 || data[4] !== 2 || data[5] !== 5) { stats.other++; return; }
        stats.frames++;
        s.frames++;
        if (data.readUInt32LE(36) & 2) stats.structural++;
        cl.frames++;
        cl.decoder?.receive(data);
        const seq = data.readUInt32LE(16);
        const now = performance.now();
        for (let q = cl.lastSeq + 1; q <= seq; q++) {
          const t0 = s.sent.get(q);
          if (t0 !== undefined) stats.latencies.push(now - t0);
        }
        if (seq > cl.lastSeq) cl.lastSeq = seq;
      });
      ws.on('error', () => { stats.errors++; });
      await new Promise((resolve, reject) => { ws.once('open', resolve); ws.once('error', reject); });
      s.clients.push(cl);
    }
  // Drive: grab the belly, drag it in and out, release, again.
  const t0 = performance.now(), period = 1000 / o.rate, cpu0 = process.cpuUsage();
  // What the run itself carries, as the C tool counts it (not the joins' snapshots).
  for (const s of sessions) s.frames = 0;
  Object.assign(stats, { frames: 0, structural: 0, other: 0, bytes: 0 });
  let ticks = 0;
  await new Promise((resolve) => {
    const timer = setInterval(() => {
      const elapsed = performance.now() - t0;
      if (elapsed >= o.seconds * 1000) { clearInterval(timer); resolve(); return; }
      for (const [i, s] of sessions.entries()) {
        // --stagger: session i starts its loop i/N of a 90-tick cycle late.
        const start = o.stagger ? Math.floor((90 * i) / sessions.length) : 0;
        if (ticks < start) continue;
        const t = ticks - start;
        if (o.scene === 'cloth') { // walk, then circle the crowd at 6 to 20 m: LODs switch
          const seq = ticks + 1, a = t / 60, r = 13 + 7 * Math.sin(t / 45);
          const msg = t === 0 ? { type: 'motion', seq, character: -1, motion: 'walk' }
            : { type: 'camera', seq, point: [r * Math.cos(a), r * Math.sin(a), 1.7] };
          s.sent.set(seq, performance.now());
          s.clients[0].ws.send(JSON.stringify(msg));
          continue;
        }
        if (o.scene === 'softbody') {
          const msg = softbodyTick(s.info, t, ticks + 1);
          if (msg) {
            s.sent.set(msg.seq, performance.now());
            s.clients[0].ws.send(JSON.stringify(msg));
          }
          continue;
        }
        const d = s.info.dims, phase = t % 90, seq = ticks + 1;
        const p = [d[0] / 2, d[1] * 0.81, d[2] / 2]; // just inside the belly skin (the phantom's front is at 0.825 ny)
        let msg;
        if (phase === 0) msg = { type: 'grab', seq, point: p, radius: 2.5, space: 'lattice' };
        else if (phase < 75) msg = { type: 'move', seq, point: [p[0], p[1] + 4 * Math.sin(phase / 12), p[2]], space: 'lattice' };
        else if (phase === 75) msg = { type: 'release', seq };
        if (msg) {
          s.sent.set(seq, performance.now());
          s.clients[0].ws.send(JSON.stringify(msg));
        }
      }
      ticks++;
    }, period);
  });
  const seconds = (performance.now() - t0) / 1000, cpu = process.cpuUsage(cpu0);
  const sessionFps = sessions.map((s) => s.frames / o.clients / seconds);
  for (const s of sessions) {
    for (const c of s.clients) c.ws.close();
    await fetch(`${base}/api/sessions/${s.info.id}`, { method: 'DELETE', headers: { authorization: `Bearer ${s.info.control_token}` } });
  }
  const nclients = o.sessions * o.clients;
  const sum = (f) => decoders.reduce((a, d) => a + f(d.stats), 0);
  const decoding = !decoders.length ? {} : {
    decoding_clients: decoders.length, frames_applied: sum((d) => d.applied), frames_skipped: sum((d) => d.skipped),
    frames_refused: sum((d) => d.refused), decode_ms_per_frame: Number((sum((d) => d.decodeMs) / Math.max(1, sum((d) => d.applied))).toFixed(3)),
    objects: decoders[0].stats.objects, records: decoders[0].stats.parts,
  };
  console.log(JSON.stringify({
    sessions: o.sessions, clients: nclients, seconds: Number(seconds.toFixed(2)),
    frames: stats.frames, structural_frames: stats.structural, other_frames: stats.other, bytes: stats.bytes,
    fps_per_client: Number((stats.frames / nclients / seconds).toFixed(2)),
    fps_session_min: Number(Math.min(...sessionFps).toFixed(2)),
    fps_session_max: Number(Math.max(...sessionFps).toFixed(2)),
    kbytes_per_s: Number((stats.bytes / 1024 / seconds).toFixed(1)),
    latency_ms_p50: quantile(stats.latencies, 0.5)?.toFixed(2) * 1 ?? null,
    latency_ms_p99: quantile(stats.latencies, 0.99)?.toFixed(2) * 1 ?? null,
    latency_samples: stats.latencies.length,
    errors: stats.errors,
    cpu_percent: Number(((cpu.user + cpu.system) / 1e4 / seconds).toFixed(1)),
    stagger: o.stagger ? 1 : 0,
    tool: 'node',
    ...decoding,
  }));
}

main().catch((e) => { console.error(`softcast-load: ${e.message}`); process.exit(1); });
