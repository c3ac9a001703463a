// softcast-load against a real server: it runs, reports every field, sees no errors.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import fs from 'node:fs';
import os from 'node:os';
import { startServer, withTimeout } from './harness.mjs';

// Both load generators, the node one and the C one (build/softcast-load), take the same flags
// and print the same JSON line: each test below runs them both.
const NODE_TOOL = new URL('../../deploy/load/softcast-load.mjs', import.meta.url).pathname;
const C_TOOL = process.env.SOFTCAST_LOAD ?? new URL('../../build/softcast-load', import.meta.url).pathname;
const TOOLS = [
  { name: 'node', cmd: (args) => [process.execPath, [NODE_TOOL, ...args]] },
  { name: 'c', cmd: (args) => [C_TOOL, args] },
];
const runTool = async (tool, args, ms) => {
  const [bin, argv] = tool.cmd(args);
  const p = spawn(bin, argv, { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '', err = '';
  p.stdout.on('data', (d) => { out += d; });
  p.stderr.on('data', (d) => { err += d; });
  const [code] = await withTimeout(once(p, 'exit'), ms, `softcast-load (${tool.name})`);
  return { code, out, err, r: code === 0 ? JSON.parse(out.trim().split('\n').at(-1)) : null };
};

let srv;
before(async () => { srv = await startServer(['--dims', '24x24x16']); });
after(async () => { assert.equal(await srv.stop(), 0, srv.stderr()); });

for (const tool of TOOLS) {
test(`softcast-load (${tool.name}): 2 sessions x 3 clients for 2 s`, async () => {
  const { code, err, r } = await runTool(tool, ['--url', `${srv.base}/`, '--sessions', '2', '--clients', '3', '--seconds', '2', '--dims', '32x32x20'], 30000);
  assert.equal(code, 0, err);
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

// --stagger 1: session i starts its loop i/N of a cycle late (at 30 moves a second the third
// of 3 sessions starts at 2 s; the run lasts 4 s): no refusal, and every session gets frames.
test(`softcast-load (${tool.name}) --stagger 1: 3 sessions, each framed, no errors`, async () => {
  const { code, err, r } = await runTool(tool, ['--url', `${srv.base}/`, '--sessions', '3', '--clients', '2', '--seconds', '4', '--dims', '24x24x16', '--stagger', '1'], 30000);
  assert.equal(code, 0, err);
  assert.equal(r.stagger, 1);
  assert.equal(r.errors, 0, JSON.stringify(r));
  assert.ok(r.fps_session_min > 0 && r.latency_samples > 0, JSON.stringify(r));
});

// The soft body under load: the driver grabs the hybrid organ near its top, pulls, lets go
// and slides and tilts the tray, in a bounded loop. No refusal (a grab that found nothing to
// hold would be one), frames that echo the driver's events, and the sessions gone after.
test(`softcast-load (${tool.name}) --scene softbody: 1 session x 2 clients for 3 s`, async () => {
  const { code, err, r } = await runTool(tool, ['--url', `${srv.base}/`, '--scene', 'softbody', '--sessions', '1', '--clients', '2', '--seconds', '3'], 60000);
  assert.equal(code, 0, err);
  assert.equal(r.sessions, 1);
  assert.equal(r.clients, 2);
  assert.equal(r.errors, 0, JSON.stringify(r));
  assert.ok(r.frames > 20 && r.latency_samples > 10 && r.latency_ms_p50 > 0, JSON.stringify(r));
  const list = await (await fetch(`${srv.base}/api/sessions`)).json();
  assert.equal(list.sessions.length, 0);
});

// A server that makes sessions for its operator's key only: with --key-file the tool
// sends it and runs; without, it stops at the first create and says why.
test(`softcast-load (${tool.name}) --key-file against a server with --api-key-file`, async () => {
  const dir = fs.mkdtempSync(`${os.tmpdir()}/softcast-loadkey-`);
  const key = 'an-operators-load-test-key-0123456789';
  fs.writeFileSync(`${dir}/key`, `${key}\n`);
  const keyed = await startServer(['--dims', '16x16x8', '--api-key-file', `${dir}/key`]);
  const run = (extra) => runTool(tool, ['--url', `${keyed.base}/`, '--sessions', '1', '--clients', '2', '--seconds', '1', ...extra], 30000);
  try {
    const without = await run([]);
    assert.notEqual(without.code, 0);
    assert.match(without.err, /creating session 0: HTTP 401/);
    const withKey = await run(['--key-file', `${dir}/key`]);
    assert.equal(withKey.code, 0, withKey.err);
    assert.equal(withKey.r.sessions, 1);
    assert.equal(withKey.r.errors, 0);
  } finally {
    assert.equal(await keyed.stop(), 0, keyed.stderr());
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
}

// The C tool stops where the node tool would, and says why: bad flags, and a run that
// fails half-way through making its sessions leaves none behind.
test('softcast-load (c): bad flags are refused by name; a failed run deletes what it made', async () => {
  for (const [args, re] of [
    [['--sessions', '2'], /no --url/],
    [['--url', 'https://x/'], /must be http:\/\/HOST:PORT\//],
    [['--url', `${srv.base}/`, '--dims', '32x32'], /--dims 32x32: must be WxHxD/],
    [['--url', `${srv.base}/`, '--scene', 'fluid'], /--scene fluid: volume, cloth or softbody/],
    [['--url', `${srv.base}/`, '--decode', '1'], /--decode: .*softcast-load\.mjs decodes/],
  ]) {
    const { code, err } = await runTool(TOOLS[1], args, 10000);
    assert.notEqual(code, 0, args.join(' '));
    assert.match(err, re);
  }
  // Refused half-way (the address may hold 2 sessions, the run asks for 3): the two it made
  // are deleted before it stops.
  const capped = await startServer(['--dims', '16x16x8', '--max-sessions-per-address', '2']);
  try {
    const { code, err } = await runTool(TOOLS[1], ['--url', `${capped.base}/`, '--sessions', '3', '--clients', '1', '--seconds', '1', '--dims', '8x8x8'], 30000);
    assert.notEqual(code, 0);
    assert.match(err, /creating session 2: HTTP 429/);
    const list = await (await fetch(`${capped.base}/api/sessions`)).json();
    assert.equal(list.sessions.length, 0, JSON.stringify(list));
  } finally {
    assert.equal(await capped.stop(), 0, capped.stderr());
  }
});
