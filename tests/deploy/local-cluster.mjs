// local-cluster.mjs: deploy/local/cluster.sh from a test: start it, call its commands, and
// make requests through its router, trusting the certificate it made.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { rawRequest, withTimeout } from '../server/harness.mjs';

const ROOT = new URL('../..', import.meta.url).pathname;
const BIN = process.env.SOFTCAST_SERVER ?? `${ROOT}build/test/softcast-server`;

// n processes, each run with serverArgs (a string of flags). Returns { dir, url, ca,
// processes, run(cmd, ...args), req(method, path, body, headers), log(k), stop() }.
export function startCluster(n, serverArgs) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'softcast-cluster-'));
  const run = (cmd, ...args) => {
    const r = spawnSync(`${ROOT}deploy/local/cluster.sh`, [cmd, dir, ...args.map(String)], {
      env: { ...process.env, SOFTCAST_SERVER: BIN, SOFTCAST_SERVER_ARGS: serverArgs },
      encoding: 'utf8', timeout: 120000,
    });
    if (r.status !== 0) throw new Error(`cluster.sh ${cmd} ${args.join(' ')}: ${r.stderr}`);
    const last = r.stdout.trim().split('\n').at(-1);
    return last ? JSON.parse(last) : null;
  };
  const info = run('start', n);
  const ca = fs.readFileSync(info.ca);
  const req = (method, p, body, headers = {}) =>
    withTimeout(rawRequest(info.url + p, { method, body, headers, ca }), 10000, `${method} ${p}`);
  return {
    dir, url: info.url, ca, processes: info.processes, run, req,
    log: (k) => fs.readFileSync(path.join(dir, `server-${k}.log`), 'utf8'),
    stop() {
      run('stop');
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}
