// The local cluster (deploy/local/cluster.sh): three server processes behind the router
// (Debian's nginx with deploy/k8s/base/router/'s rules) over TLS with a certificate the
// script makes. Sessions made through the router land on every process; each session's
// driver and viewers reach it by the links the server gave; a killed process leaves the
// others streaming; a drained one comes back with its sessions and the same links; the
// lobby's listing covers every process.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { Client, tick } from '../server/harness.mjs';
import { startCluster } from './local-cluster.mjs';

const PER_PROCESS = 5; // --max-sessions of each process: 15 in the cluster
let cl, ca, req;

const processOf = (id) => id.slice(0, id.indexOf('.'));

// Clients that read frame headers only: 48 of them decoding at 60 Hz would saturate this
// test's one thread, and a client that does not keep up is sent fewer frames.
async function join(s) {
  const opts = { ca, decode: false };
  const driver = await new Client(`${s.ws_url}&token=${s.control_token}`, opts).open();
  const viewers = [];
  for (let k = 0; k < 3; k++) viewers.push(await new Client(`${s.ws_url}&token=${s.view_token}`, opts).open());
  return { s, driver, viewers, seq: 0 };
}

// The driver grabs the middle and keeps moving it a voxel up and down every 40 ms.
function drag(g, ms) {
  g.driver.send({ type: 'grab', seq: ++g.seq, point: [8, 8, 4], radius: 2, space: 'lattice' });
  const t0 = Date.now();
  return (async () => {
    for (let k = 0; Date.now() - t0 < ms; k++) {
      g.driver.send({ type: 'move', seq: ++g.seq, point: [8, 8 + (k % 2), 4], space: 'lattice' });
      await tick(40);
    }
  })();
}

// The longest time between two frames a client received after t (performance.now() ms).
function longestGap(c, t) {
  const ts = [t, ...c.frames.filter((f) => f.t > t).map((f) => f.t)];
  let worst = 0;
  for (let i = 1; i < ts.length; i++) worst = Math.max(worst, ts[i] - ts[i - 1]);
  return { worst, frames: ts.length - 1 };
}

// "session ID <what>: frame F, state hash H" from process K's log (server/durable.c).
function logged(k, id, what) {
  const log = cl.log(k);
  const m = log.match(new RegExp(`session ${id.replace('.', '\\.')} ${what}: frame (\\d+), state hash ([0-9a-f]{16})`));
  assert.ok(m, `no "${what}" line for ${id} in process ${k}'s log`);
  return { frame: Number(m[1]), hash: m[2] };
}

async function exited(pid, ms = 30000) {
  const deadline = Date.now() + ms;
  while (fs.existsSync(`/proc/${pid}`) && !/State:\s+Z/.test(fs.readFileSync(`/proc/${pid}/status`, 'utf8'))) {
    if (Date.now() > deadline) throw new Error(`process ${pid} still running after ${ms} ms`);
    await tick(50);
  }
}

before(() => {
  cl = startCluster(3, `--dims 16x16x8 --workers 1 --threads 1 --max-sessions ${PER_PROCESS}`);
  ({ ca, req } = cl);
});
after(() => cl?.stop());

test('through the router over TLS: sessions on every process, driven and watched by their links; a killed process leaves the others streaming; a drained one comes back', async () => {
  // Fill softcast-2 first (aimed at it with ?process=), then make the rest without aiming:
  // the router's picks that land on the full one are answered 503 there and tried on the
  // next process, so every create succeeds until the whole cluster is full.
  const made = [];
  for (let i = 0; i < PER_PROCESS; i++) {
    const r = await req('POST', '/api/sessions?process=softcast-2', {});
    assert.equal(r.status, 201, r.text);
    assert.equal(processOf(r.json.id), 'softcast-2');
    made.push(r.json);
  }
  for (let i = PER_PROCESS; i < 12; i++) {
    const r = await req('POST', '/api/sessions', {});
    assert.equal(r.status, 201, `create ${i + 1} of 12 with softcast-2 full: ${r.text}`);
    made.push(r.json);
  }
  const on = (p) => made.filter((s) => processOf(s.id) === p);
  for (const p of cl.processes) assert.ok(on(p.name).length > 0, `no session landed on ${p.name}`);
  // Three more fill the cluster; then every process refuses, and the client hears why.
  const extra = [];
  for (let i = 12; i < 3 * PER_PROCESS; i++) extra.push(await req('POST', '/api/sessions', {}));
  for (const r of extra) assert.equal(r.status, 201, r.text);
  const full = await req('POST', '/api/sessions', {});
  assert.equal(full.status, 503, full.text);
  assert.equal(full.json.error, 'no room');
  for (const r of extra) {
    const d = await req('DELETE', `/api/sessions/${r.json.id}`, undefined, { authorization: `Bearer ${r.json.control_token}` });
    assert.equal(d.status, 204, d.text);
  }
  const origin = new URL(cl.url);
  for (const s of made) {
    assert.equal(new URL(s.ws_url).origin, `wss://${origin.host}`, 'WebSockets through the router');
    assert.equal(new URL(s.join_url).origin, cl.url, 'pages through the router');
  }

  // The lobby's listing: the cluster's processes, each listing its own.
  const cluster_ = (await req('GET', '/api/cluster')).json;
  assert.deepEqual(cluster_.processes, cl.processes.map((p) => p.name));
  const listed = [];
  for (const p of cluster_.processes) {
    const r = await req('GET', `/api/sessions?process=${p}`);
    assert.equal(r.status, 200, r.text);
    for (const s of r.json.sessions) assert.equal(processOf(s.id), p);
    listed.push(...r.json.sessions.map((s) => s.id));
  }
  assert.deepEqual(listed.sort(), made.map((s) => s.id).sort());

  // A driver and three viewers on each; everyone sees the drag.
  const groups = [];
  for (const s of made) groups.push(await join(s));
  await Promise.all(groups.map((g) => drag(g, 600)));
  for (const g of groups)
    for (const c of [g.driver, ...g.viewers])
      await c.until(() => c.frames.some((f) => f.lastSeq >= 3), 10000, `${g.s.id}: frames after the drag`);

  // Kill one process: the others' sessions keep streaming, no gap over 1 s.
  const [victim, drained] = [cl.processes[0], cl.processes[1]];
  const others = groups.filter((g) => processOf(g.s.id) !== victim.name);
  const t = performance.now();
  const dragging = Promise.all(others.map((g) => drag(g, 3000)));
  cl.run('signal', 0, 'KILL');
  await dragging;
  for (const g of others)
    for (const c of g.viewers) {
      const { worst, frames } = longestGap(c, t);
      assert.ok(frames > 10, `${g.s.id}: ${frames} frames in 3 s`);
      assert.ok(worst <= 1000, `${g.s.id}: a gap of ${worst.toFixed(0)} ms after ${victim.name} was killed`);
    }

  // Drain another (SIGTERM: it snapshots its sessions, then exits) and start it again: its
  // sessions come back under the same links and tokens.
  const mine = groups.filter((g) => processOf(g.s.id) === drained.name);
  cl.run('signal', 1, 'TERM');
  await exited(drained.pid);
  const down = await req('GET', `/api/sessions/${mine[0].s.id}`);
  assert.equal(down.status, 502, `a stopped process's session: ${down.status} ${down.text}`);
  cl.run('restart', 1);
  for (const g of mine) {
    const r = await req('GET', `/api/sessions/${g.s.id}`);
    assert.equal(r.status, 200, r.text);
    const saved = logged(1, g.s.id, 'saved'), restored = logged(1, g.s.id, 'restored');
    assert.equal(restored.hash, saved.hash, `${g.s.id}: the state after the restart differs`);
    const back = await join(g.s);
    await drag(back, 400);
    for (const c of [back.driver, ...back.viewers])
      await c.until(() => c.frames.some((f) => f.lastSeq >= 2), 10000, `${g.s.id}: frames after the restart`);
    for (const c of [back.driver, ...back.viewers]) await c.close();
  }
  for (const g of groups)
    for (const c of [g.driver, ...g.viewers]) c.ws.terminate();
});
