// softcast-load against a real server: it runs, reports every field, sees no errors.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import fs from 'node:fs';
import os from 'node:os';
import { startServer, withTimeout } from './harness.mjs';

let srv;
before(async () => { srv = await startServer(['--dims', '24x24x16']); });
after(async () => { assert.equal(await srv.stop(), 0, srv.stderr()); });

test('softcast-load: 2 sessions x 3 clients for 2 s', async () => {
  const tool = new URL('../../deploy/load/softcast-load.mjs', import.meta.url).pathname;
  const p = spawn(process.execPath, [tool, '--url', `${srv.base}/`, '--sessions', '2', '--clients', '3', '--seconds', '2', '--dims', '32x32x20'], { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '', err = '';
  p.stdout.on('data', (d) => { out += d; });
  p.stderr.on('data', (d) => { err += d; });
  const [code] = await withTimeout(once(p, 'exit'), 30000, 'softcast-load');
  assert.equal(code, 0, err);
  const r = JSON.parse(out.trim().split('\n').at(-1));
  for (const k of ['sessions', 'clients', 'frames', 'bytes', 'fps_per_client', 'latency_ms_p50', 'latency_ms_p99', 'errors'])
    assert.ok(k in r, k);
  assert.equal(r.sessions, 2);
  assert.equal(r.clients, 6);
  assert.equal(r.errors, 0);
  assert.ok(r.frames > 6 && r.bytes > 0 && r.latency_ms_p50 > 0, JSON.stringify(r));
  // The sessions it made are gone again.
  const list = await (await fetch(`${srv.base}/api/sessions`)).json();
  assert.equal(list.sessions.length, 0);
});

// The soft body under load: the driver grabs the hybrid organ near its top, pulls, lets go
// and slides and tilts the tray, in a bounded loop. No refusal (a grab that found nothing to
// hold would be one), frames that echo the driver's events, and the sessions gone after.
test('softcast-load --scene softbody: 1 session x 2 clients for 3 s', async () => {
  const tool = new URL('../../deploy/load/softcast-load.mjs', import.meta.url).pathname;
  const p = spawn(process.execPath, [tool, '--url', `${srv.base}/`, '--scene', 'softbody', '--sessions', '1', '--clients', '2', '--seconds', '3'],
    { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '', err = '';
  p.stdout.on('data', (d) => { out += d; });
  p.stderr.on('data', (d) => { err += d; });
  const [code] = await withTimeout(once(p, 'exit'), 60000, 'softcast-load softbody');
  assert.equal(code, 0, err);
  const r = JSON.parse(out.trim().split('\n').at(-1));
  assert.equal(r.sessions, 1);
  assert.equal(r.clients, 2);
  assert.equal(r.errors, 0, JSON.stringify(r));
  assert.ok(r.frames > 20 && r.latency_samples > 10 && r.latency_ms_p50 > 0, JSON.stringify(r));
  const list = await (await fetch(`${srv.base}/api/sessions`)).json();
  assert.equal(list.sessions.length, 0);
});

// A server that makes sessions for its operator's key only: with --key-file the tool
// sends it and runs; without, it stops at the first create and says why.
test('softcast-load --key-file against a server with --api-key-file', async () => {
  const dir = fs.mkdtempSync(`${os.tmpdir()}/softcast-loadkey-`);
  const key = 'an-operators-load-test-key-0123456789';
  fs.writeFileSync(`${dir}/key`, `${key}\n`);
  const keyed = await startServer(['--dims', '16x16x8', '--api-key-file', `${dir}/key`]);
  const tool = new URL('../../deploy/load/softcast-load.mjs', import.meta.url).pathname;
  const run = async (extra) => {
    const p = spawn(process.execPath, [tool, '--url', `${keyed.base}/`, '--sessions', '1', '--clients', '2', '--seconds', '1', ...extra], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '', err = '';
    p.stdout.on('data', (d) => { out += d; });
    p.stderr.on('data', (d) => { err += d; });
    const [code] = await withTimeout(once(p, 'exit'), 30000, 'softcast-load');
    return { code, out, err };
  };
  try {
    const without = await run([]);
    assert.notEqual(without.code, 0);
    assert.match(without.err, /creating session 0: HTTP 401/);
    const withKey = await run(['--key-file', `${dir}/key`]);
    assert.equal(withKey.code, 0, withKey.err);
    const r = JSON.parse(withKey.out.trim().split('\n').at(-1));
    assert.equal(r.sessions, 1);
    assert.equal(r.errors, 0);
  } finally {
    assert.equal(await keyed.stop(), 0, keyed.stderr());
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
