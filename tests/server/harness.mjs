// harness.mjs: start softcast-server on 127.0.0.1 with ephemeral ports, talk to it.
// Every wait is bounded; nothing sleeps and hopes.
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import WebSocket from 'ws';
import { decompress } from 'fzstd';
import { MeshoptDecoder } from 'meshoptimizer';
import { createDecoder } from '../../protocol/js/softcast-proto.mjs';

await MeshoptDecoder.ready;
export const dec = createDecoder({ decompress, MeshoptDecoder });

const BIN = process.env.SOFTCAST_SERVER ?? new URL('../../build/test/softcast-server', import.meta.url).pathname;

export async function startServer(args = []) {
  const proc = spawn(BIN, ['--http-port', '0', '--ws-port', '0', '--bind', '127.0.0.1', '--threads', '1', ...args], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, ASAN_OPTIONS: 'detect_leaks=1:abort_on_error=0:exitcode=23' },
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

export function withTimeout(p, ms, what) {
  let t;
  return Promise.race([
    p.finally(() => clearTimeout(t)),
    new Promise((_, reject) => { t = setTimeout(() => reject(new Error(`timeout: ${what}`)), ms); }),
  ]);
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

// A client that decodes every frame and keeps a per-surface position state.
export class Client {
  constructor(url) {
    this.url = url;
    this.texts = [];
    this.frames = [];      // decoded mesh frames (header + positions after applying)
    this.slices = [];
    this.tables = [];      // LOD tables (cloth)
    this.key = null;
    this.q = null;         // current quantised positions per surface
    this.waiters = [];
    this.errors = 0;
  }
  async open() {
    this.ws = new WebSocket(this.url);
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
      const f = dec.decode(bytes);
      if (f.pixels) {
        this.slices.push(f);
      } else if (f.lods) {
        this.tables.push(f);
      } else if (f.header.kind === 1) {
        this.key = f;
        this.q = f.surfaces.map((s) => s.q);
        this.frames.push({ frame: f.header.frame, lastSeq: f.header.lastSeq, key: true, q: this.q });
      } else if (this.key && f.keyFrame === this.key.header.frame) {
        this.q = f.surfaces.map((_, s) => dec.applyDelta(this.key, f, s));
        this.frames.push({ frame: f.header.frame, lastSeq: f.header.lastSeq, key: false, q: this.q });
      } else {
        this.errors++; // a delta for a keyframe we do not hold: the server must never send one
      }
    }
    for (const w of this.waiters.splice(0)) w();
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
