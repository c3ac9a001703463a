// What a restart costs (server/README.md, "Durability"): a server with --state-dir and the
// default session, a driver's 30 moves on its volume, SIGTERM (the save), then a second
// server on the same directory (the restore). Prints the server's own lines (frame, state
// hash, ms) and the snapshot's size on disk.
//   node tests/bench/restart.mjs [build/softcast-server] [server flags...]
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, readdirSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import WebSocket from '../server/node_modules/ws/index.js';

const bin = process.argv[2] ?? 'build/softcast-server';
const dir = mkdtempSync(join(tmpdir(), 'softcast-restart-'));
const flags = ['--http-port', '0', '--ws-port', '0', '--state-dir', dir, '--default-session', ...process.argv.slice(3)];

function start() {
  const p = spawn(bin, flags, { stdio: ['ignore', 'pipe', 'pipe'] });
  let err = '';
  p.stderr.on('data', (d) => { err += d; });
  return new Promise((resolve, reject) => {
    let out = '';
    p.stdout.on('data', (d) => {
      out += d;
      if (out.includes('\n')) resolve({ p, info: JSON.parse(out.split('\n')[0]), err: () => err });
    });
    p.on('exit', (code) => reject(new Error(`server exited ${code}: ${err}`)));
  });
}
const stop = (srv) => { srv.p.kill('SIGTERM'); return new Promise((r) => srv.p.on('exit', r)); };
const lines = (srv, re) => srv.err().split('\n').filter((l) => re.test(l)).join('\n');

try {
  const a = await start();
  const token = new URL(a.info.control_url).searchParams.get('token');
  const ws = new WebSocket(`ws://127.0.0.1:${a.info.ws_port}/?session=${a.info.session}&token=${token}`);
  await new Promise((r) => ws.on('open', r));
  ws.send(JSON.stringify({ type: 'grab', seq: 1, point: [64, 100, 37], radius: 4, space: 'lattice' }));
  for (let k = 1; k <= 30; k++) {
    ws.send(JSON.stringify({ type: 'move', seq: 1 + k, point: [64, 100 + 0.3 * k, 37], space: 'lattice' }));
    await new Promise((r) => setTimeout(r, 33)); // a driver's pace
  }
  await stop(a);
  console.log(lines(a, /saved/));
  const sdir = join(dir, 'sessions', readdirSync(join(dir, 'sessions'))[0]);
  console.log(`snapshot: ${statSync(join(sdir, 'snapshot')).size} bytes`);
  const t0 = performance.now();
  const b = await start();
  console.log(`second server listening after ${(performance.now() - t0).toFixed(0)} ms`);
  console.log(lines(b, /restored|back in/));
  await stop(b);
} finally {
  rmSync(dir, { recursive: true, force: true });
}
