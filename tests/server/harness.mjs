// harness.mjs: start softcast-server on 127.0.0.1 with ephemeral ports, talk to it.
// Every wait is bounded; nothing sleeps and hopes.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import WebSocket from 'ws';
import { decompress } from 'fzstd';
import { MeshoptDecoder } from 'meshoptimizer';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import http from 'node:http';
import https from 'node:https';
import { createDecoder, readHeader, KIND, FLAG, applyTransform } from '../../protocol/js/softcast-proto.mjs';

await MeshoptDecoder.ready;
export const dec = createDecoder({ decompress, MeshoptDecoder });

const BIN = process.env.SOFTCAST_SERVER ?? new URL('../../build/test/softcast-server', import.meta.url).pathname;

export async function startServer(args = [], { env = {} } = {}) {
  // Tests make many sessions from one address: the per-address quota is tested on its own
  // (quotas.test.mjs), with its own flags, which come after these and win.
  const proc = spawn(BIN, ['--http-port', '0', '--ws-port', '0', '--bind', '127.0.0.1', '--threads', '1',
    '--max-sessions-per-address', '1000', ...args], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, ASAN_OPTIONS: 'detect_leaks=1:abort_on_error=0:exitcode=23', ...env },
  });
  let stderr = '';
  proc.stderr.on('data', (d) => { stderr += d; });
  const line = await withTimeout(new Promise((resolve, reject) => {
    let buf = '';
    proc.stdout.on('data', (d) => {
      buf += d;
      const nl = buf.indexOf('\n');
      if (nl >= 0) resolve(buf.slice(0, nl));
    });
    proc.on('exit', (code) => reject(new Error(`server exited ${code}: ${stderr}`)));
  }), 20000, 'server start');
  const info = JSON.parse(line);
  const base = `http://127.0.0.1:${info.http_port}`;
  return {
    proc, info, base,
    stderr: () => stderr,
    async stop() {
      proc.kill('SIGTERM');
      const [code] = await withTimeout(once(proc, 'exit'), 20000, 'server stop');
      return code;
    },
  };
}

// The session's state once it leaves "loading" (a session takes clients once ready); a
// bounded poll, failing on "failed" or after ms.
export async function waitReady(base, id, ms = 30000) {
  for (const deadline = Date.now() + ms; ;) {
    const st = (await api(base, 'GET', `/api/sessions/${id}`)).json;
    if (st.state === 'ready') return st;
    if (st.state !== 'loading') throw new Error(`session ${id}: ${JSON.stringify(st)}`);
    if (Date.now() > deadline) throw new Error(`session ${id}: still loading after ${ms} ms`);
    await tick(20);
  }
}

export function withTimeout(p, ms, what) {
  let t;
  return Promise.race([
    p.finally(() => clearTimeout(t)),
    new Promise((_, reject) => { t = setTimeout(() => reject(new Error(`timeout: ${what}`)), ms); }),
  ]);
}

// A response read whole: { status, json (null when not JSON), text }.
function bodyOf(res) {
  return new Promise((resolve) => {
    let text = '';
    res.on('data', (d) => { text += d; });
    res.on('end', () => {
      let json = null;
      try { json = JSON.parse(text); } catch { /* not JSON */ }
      resolve({ status: res.statusCode, json, text });
    });
  });
}

// A POST whose body the test sends by hand (req.write, req.end, or its headers alone with
// req.flushHeaders()): `response` resolves on the answer ({ status, json, text }) even while
// the body is unsent, `closed` when the socket closes. localAddress picks the client's
// address (the per-address limits).
export function heldPost(base, path, headers = {}, { localAddress } = {}) {
  const u = new URL(base);
  const req = http.request({
    host: u.hostname, port: u.port, method: 'POST', path, localAddress,
    headers: { 'content-type': 'application/octet-stream', ...headers },
  });
  req.on('error', () => {}); // the server may close the socket once it answered
  const response = new Promise((resolve) => req.on('response', (res) => resolve(bodyOf(res))));
  const closed = new Promise((resolve) => req.on('close', resolve));
  return { req, response, closed };
}

// One request through node's http or https, for what fetch cannot do (choose the local
// address, trust a certificate): opts go to http(s).request. { status, json, text }.
export function rawRequest(url, { method, body, headers = {}, ...opts }) {
  const mod = url.startsWith('https:') ? https : http;
  return new Promise((resolve, reject) => {
    const r = mod.request(url, { method, headers: { 'content-type': 'application/json', ...headers }, ...opts },
      (res) => resolve(bodyOf(res)));
    r.on('error', reject);
    r.end(body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body));
  });
}

export async function api(base, method, path, body, headers = {}) {
  const r = await fetch(base + path, {
    method,
    headers: { 'content-type': 'application/json', ...headers },
    body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
  });
  const text = await r.text();
  let json = null;
  try { json = text ? JSON.parse(text) : null; } catch { /* not JSON */ }
  return { status: r.status, json, text };
}

// A client that decodes every frame and keeps the objects it holds, as a browser must:
// from a snapshot on, every structural frame applied in order (protocol/README.md). Every
// object frame is recorded with its arrival time (performance.now(), ms) and size in
// bytes; decoded, with each object's quantised vertices (q[id]: x, y, z, scalar per
// vertex) and what it holds of each (objects[id]: lod, info, counts, transform, parts).
// A frame the decoder refuses counts in errors (the server must never send one). With
// { decode: false } it reads headers only (kind, frame, last seq, flags): a cheap client
// for the tests that push many large frames.
export class Client {
  constructor(url, { decode = true, ca } = {}) {
    this.url = url;
    this.decode = decode;
    this.ca = ca; // wss: the certificate to trust (the local cluster's, deploy/local/)
    this.texts = [];
    this.frames = [];      // object frames: {frame, lastSeq, key, snapshot, bytes, t, q, objects}
    this.slices = [];
    this.objects = dec.createObjectDecoder();
    this.q = null;         // the newest frame's q
    this.waiters = [];
    this.errors = 0;
    this.refusals = [];    // why the decoder refused frames
    this.bytes = 0;        // binary bytes received
  }
  async open() {
    this.ws = new WebSocket(this.url, this.ca ? { ca: this.ca } : undefined);
    this.ws.binaryType = 'nodebuffer';
    this.ws.on('message', (data, isBinary) => this.onMessage(data, isBinary));
    this.closed = new Promise((resolve) => this.ws.on('close', (code) => resolve(code)));
    await withTimeout(new Promise((resolve, reject) => {
      this.ws.once('open', resolve);
      this.ws.once('error', reject);
      this.ws.once('unexpected-response', (req, res) => reject(new Error(`refused: HTTP ${res.statusCode}`)));
    }), 10000, 'ws open');
    return this;
  }
  onMessage(data, isBinary) {
    if (!isBinary) {
      this.texts.push(JSON.parse(data.toString()));
    } else {
      const bytes = new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
      const t = performance.now();
      this.bytes += bytes.length;
      const h = readHeader(bytes);
      if (h.kind === KIND.SLICE) {
        if (this.decode) this.slices.push(dec.decode(bytes));
      } else if (h.kind === KIND.OBJECTS) {
        const f = {
          frame: h.frame, lastSeq: h.lastSeq, key: (h.flags & FLAG.STRUCTURAL) !== 0,
          snapshot: (h.flags & FLAG.SNAPSHOT) !== 0, bytes: bytes.length, t,
        };
        if (!this.decode || this.applyObjects(bytes, f)) this.frames.push(f);
      } else {
        this.errors++; // the server sends object frames and slices only
      }
    }
    for (const w of this.waiters.splice(0)) w();
  }
  applyObjects(bytes, f) {
    let r;
    try {
      r = this.objects.apply(bytes);
    } catch (e) {
      this.errors++;
      this.refusals.push(`frame ${f.frame}: ${e.code ?? ''} ${e.message}`);
      return false;
    }
    f.q = [];
    f.objects = [];
    f.named = r.named;
    for (const o of r.objects) {
      f.q[o.id] = o.q.slice();
      f.objects[o.id] = {
        id: o.id, lod: o.lod, info: [...o.info], nvert: o.nvert, nelem: o.nelem, key: o.key,
        parts: o.parts, transform: { t: [...o.transform.t], r: [...o.transform.r] },
        bmin: [...o.bmin], bmax: [...o.bmax], qbits: o.qbits, smin: o.smin, smax: o.smax,
      };
    }
    this.q = f.q;
    return true;
  }
  send(obj) { this.ws.send(typeof obj === 'string' ? obj : JSON.stringify(obj)); }
  async until(pred, ms = 10000, what = 'condition') {
    const deadline = Date.now() + ms;
    while (!pred()) {
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`timeout waiting for ${what}`);
      await withTimeout(new Promise((r) => this.waiters.push(r)), left, what).catch(() => {});
    }
  }
  close() { this.ws.close(); return withTimeout(this.closed, 5000, 'close'); }
}

export function wsUrl(session, token) {
  return `${session.ws_url}&token=${token}`;
}

// Input-to-frame latency (ms) of each event sent: from its sending to the arrival at c of
// the first object frame whose last seq includes it. sent: Map of seq -> performance.now().
export function latencies(c, sent) {
  const out = [];
  for (const [seq, t] of sent) {
    const f = c.frames.find((x) => x.lastSeq >= seq && x.t >= t);
    if (f) out.push(f.t - t);
  }
  return out;
}

// n, p50, p99 and max of a list of milliseconds.
export function summary(ms) {
  const s = [...ms].sort((a, b) => a - b);
  const q = (p) => (s.length ? s[Math.min(s.length - 1, Math.floor(p * s.length))] : NaN);
  return { n: s.length, p50: q(0.5), p99: q(0.99), max: s.length ? s.at(-1) : NaN };
}

// One session's value of a Prometheus metric from /metrics (undefined when absent).
export async function metric(base, name, session) {
  const text = (await api(base, 'GET', '/metrics')).text;
  const m = new RegExp(`^${name}\\{session="${session}"\\} (\\S+)$`, 'm').exec(text);
  return m ? Number(m[1]) : undefined;
}

export const tick = (ms) => new Promise((r) => setTimeout(r, ms)); // paces a driver; never a wait-and-hope

// Wait until none of the clients has had an object frame for ms milliseconds (at most limit ms).
export async function quiet(clients, ms, limit = 10000) {
  const t0 = performance.now();
  for (;;) {
    const last = Math.max(t0, ...clients.filter((c) => c.frames.length).map((c) => c.frames.at(-1).t));
    const left = last + ms - performance.now();
    if (left <= 0) return;
    if (performance.now() - t0 > limit) throw new Error(`frames kept coming for ${limit} ms`);
    await tick(Math.min(left, 50));
  }
}

// Wait until session id is at rest (the server says no frame comes until an event: a settled
// scene) and every client holds its latest frame, at most limit ms. Unlike quiet(), a server
// slowed by a busy machine cannot pass for a settled one.
export async function atRest(base, id, clients, limit = 30000) {
  const t0 = performance.now();
  for (;;) {
    const s = (await api(base, 'GET', `/api/sessions/${id}`)).json;
    assert.ok(s && typeof s.at_rest === 'boolean', `session ${id}: no at_rest in ${JSON.stringify(s)}`);
    if (s.at_rest && clients.every((c) => c.frames.length && c.frames.at(-1).frame >= s.latest_frame)) return;
    if (performance.now() - t0 > limit) throw new Error(`session ${id} not at rest after ${limit} ms`);
    await tick(50); // polling, bounded by limit
  }
}

/** Object id's vertices in its own frame, as a client holds them after its latest frame. */
export function objectLocal(c, id) {
  const f = c.frames.at(-1), o = f.objects[id], q = f.q[id], top = 2 ** o.qbits - 1;
  const x = new Float32Array(o.nvert * 3);
  for (let j = 0; j < o.nvert; j++)
    for (let b = 0; b < 3; b++) x[j * 3 + b] = o.bmin[b] + (o.bmax[b] - o.bmin[b]) * (q[j * 4 + b] / top);
  return x;
}

/** The same placed by the object's transform: world units. */
export const objectWorld = (c, id) => applyTransform(objectLocal(c, id), c.frames.at(-1).objects[id].transform);

/** A single-file NIfTI-1 written byte by byte (not by the NIfTI C library the server reads
 *  it with): dims [nx, ny, nz], spacing in mm, type 'uint8' or 'int16', an identity-oriented
 *  sform when sform is true, the sform's three rows (4 numbers each: voxel i, j, k to RAS mm)
 *  when it is an array (else no orientation), voxel(x, y, z) its value. */
export function writeNifti1(file, { dims: [nx, ny, nz], spacing, type, sform = false, voxel }) {
  const bytes = type === 'int16' ? 2 : 1, hdr = Buffer.alloc(352);
  hdr.writeInt32LE(348, 0);
  [3, nx, ny, nz, 1, 1, 1, 1].forEach((d, k) => hdr.writeInt16LE(d, 40 + 2 * k));
  hdr.writeInt16LE(type === 'int16' ? 4 : 2, 70); // datatype: signed short or unsigned char
  hdr.writeInt16LE(8 * bytes, 72);
  [1, ...spacing, 1, 1, 1, 1].forEach((d, k) => hdr.writeFloatLE(d, 76 + 4 * k));
  hdr.writeFloatLE(352, 108); // vox_offset
  hdr.writeFloatLE(1, 112); // scl_slope
  hdr.writeUInt8(2, 123); // xyzt_units: mm
  if (sform) {
    hdr.writeInt16LE(1, 254); // sform_code: scanner
    for (let r = 0; r < 3; r++)
      for (let c = 0; c < 4; c++)
        hdr.writeFloatLE(Array.isArray(sform) ? sform[r][c] : r === c ? spacing[r] : 0, 280 + 16 * r + 4 * c);
  }
  hdr.write('n+1\0', 344, 'latin1');
  const data = Buffer.alloc(nx * ny * nz * bytes);
  for (let z = 0; z < nz; z++)
    for (let y = 0; y < ny; y++)
      for (let x = 0; x < nx; x++) {
        const i = x + nx * (y + ny * z), v = voxel(x, y, z);
        if (bytes === 2) data.writeInt16LE(v, 2 * i); else data[i] = v;
      }
  fs.writeFileSync(file, Buffer.concat([hdr, data]));
}

/** A CT of a body (a cylinder of 40 HU with a bone core of 700) in air as NIfTI-1 bytes:
 *  int16, RAS sform. */
export function ctNifti([nx, ny, nz], spacing) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'softcast-ct-')), file = path.join(dir, 'ct.nii');
  writeNifti1(file, {
    dims: [nx, ny, nz], spacing, type: 'int16', sform: true,
    voxel: (x, y) => {
      const r = Math.hypot(x - nx / 2, y - ny / 2);
      return r < nx / 10 ? 700 : r < nx / 3 ? 40 : -1000;
    },
  });
  const b = fs.readFileSync(file);
  fs.rmSync(dir, { recursive: true, force: true });
  return b;
}

// What a server's upload directory holds: users' files (kept, or arriving as .file-*), not
// the lock a running server holds there (.alive: upload.c's sweep of crashed servers' ones).
export function uploadsIn(dir) {
  return fs.readdirSync(dir).filter((f) => f !== '.alive');
}
