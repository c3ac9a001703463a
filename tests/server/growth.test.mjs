// The growth scene through the server (../shared/GROWTH.md): both models created over REST
// (bad options refused by name); a plant that grows over the WebSocket with frames that only
// append (each frame's object carries the new branches and nothing else: counted in bytes and
// in parts), stops by itself, and grows the same tree for the same seed on one and two worker
// threads; a truss cloned cell by cell, solved, its energy highest at the load, the colours
// moving with the load when the driver drags it, bad nodes and a beam left unheld refused.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, api, Client, wsUrl, atRest } from './harness.mjs';
import { PART } from '../../protocol/js/softcast-proto.mjs';

let srv, srv2;
before(async () => {
  srv = await startServer([]);
  srv2 = await startServer(['--threads', '2']);
});
after(async () => {
  assert.equal(await srv.stop(), 0, srv.stderr());
  assert.equal(await srv2.stop(), 0, srv2.stderr());
});

const errors = (c) => c.texts.filter((t) => t.type === 'error');
// Send an event, wait for a frame that includes it, then for the session to come to rest (the
// event reaches the server on the WebSocket, the rest is asked over HTTP: in that order).
async function settle(base, s, c, msg) {
  c.send(msg);
  await c.until(() => c.frames.some((f) => f.lastSeq >= msg.seq), 20000, `${msg.type} framed`);
  await atRest(base, s.id, [c], 60000);
}
const drop = (s, base = srv.base) =>
  api(base, 'DELETE', `/api/sessions/${s.id}`, undefined, { authorization: `Bearer ${s.control_token}` });

test('growth: REST options for both models, refusals that name the field', async () => {
  const bad = [
    [{ scene: 'growth', model: 'tree' }, /"model" must be "plant" or "truss"/],
    [{ scene: 'growth', model: 'plant', seed: 0 }, /"seed" must be an integer/],
    [{ scene: 'growth', model: 'plant', seed: 1.5 }, /"seed" must be an integer/],
    [{ scene: 'growth', model: 'plant', three_d: 'yes' }, /"three_d" must be true or false/],
    [{ scene: 'growth', model: 'plant', cells: [5, 5] }, /"cells" is for the truss/],
    [{ scene: 'growth', model: 'truss', seed: 3 }, /"seed" is for the plant/],
    [{ scene: 'growth', model: 'truss', cells: [0, 5] }, /"cells" must be \[nx, ny\]/],
    [{ scene: 'growth', model: 'truss', cells: [401, 5] }, /"cells" must be \[nx, ny\]/],
    [{ scene: 'growth', model: 'truss', cells: 50 }, /"cells" must be \[nx, ny\]/],
    [{ scene: 'growth', leaves: 3 }, /unknown field "leaves"/],
  ];
  for (const [body, re] of bad) {
    const r = await api(srv.base, 'POST', '/api/sessions', body);
    assert.equal(r.status, 400, JSON.stringify(body));
    assert.match(r.json.error + ' ' + (r.json.detail ?? ''), re, JSON.stringify(body));
  }
  const p = (await api(srv.base, 'POST', '/api/sessions', { scene: 'growth', model: 'plant', seed: 7 })).json;
  assert.equal(p.model, 'plant');
  assert.equal(p.seed, 7);
  const t = (await api(srv.base, 'POST', '/api/sessions', { scene: 'growth', model: 'truss', cells: [12, 6] })).json;
  assert.equal(t.model, 'truss');
  assert.deepEqual(t.cells, [12, 6]);
  assert.deepEqual(t.scalar_range, [-5, 1]);
  // A beam of one cell shows that cell and its six members from its first frame.
  const one = (await api(srv.base, 'POST', '/api/sessions', { scene: 'growth', model: 'truss', cells: [1, 1] })).json;
  const c1 = await new Client(wsUrl(one, one.view_token)).open();
  await c1.until(() => c1.frames.length > 0, 20000, 'the one-cell beam');
  assert.deepEqual([c1.frames[0].objects[0].nvert, c1.frames[0].objects[1].nvert], [4, 12]);
  await c1.close();
  for (const s of [p, t, one]) assert.equal((await drop(s)).status, 204);
});

// A plant of this seed grown to its end on that server; its client (all frames decoded).
async function growPlant(base, seed) {
  const s = (await api(base, 'POST', '/api/sessions', { scene: 'growth', model: 'plant', seed })).json;
  const c = await new Client(wsUrl(s, s.control_token)).open();
  await c.until(() => c.frames.length > 0, 20000, 'first frame');
  await settle(base, s, c, { type: 'set_params', seq: 1, params: { steps_per_s: 30 } });
  return { s, c };
}

// (The plant is stepped sequentially whatever the threads: the check holds the server's whole
// path, from the seed to the frames, to the same tree.)
test('growth: a plant grows by appends only, stops by itself, the same tree on 1 and 2 threads', async () => {
  const { s, c } = await growPlant(srv.base, 11);
  const { s: s2, c: c2 } = await growPlant(srv2.base, 11);
  assert.equal(c.errors + c2.errors, 0, [...c.refusals, ...c2.refusals].join('; '));
  // The same seed, the same tree: the same vertices (quantised) on both servers.
  const a = c.frames.at(-1), b = c2.frames.at(-1);
  assert.ok(a.objects[0].nvert > 400, `a grown tree: ${a.objects[0].nvert / 2} branches`);
  assert.equal(a.objects[0].nvert, b.objects[0].nvert);
  assert.deepEqual([...a.q[0]], [...b.q[0]], 'seed 11 grew another tree on 2 threads');
  // Every frame after the first key appends: no key, no delta of what was there.
  const frames = c.frames.filter((f) => f.objects[0]);
  const growth = frames.slice(1).filter((f) => f.objects[0].parts);
  assert.ok(growth.length >= 8, `${growth.length} growth frames`);
  for (const f of growth)
    assert.equal(f.objects[0].parts & ~PART.APPEND, 0, `frame ${f.frame}: parts ${f.objects[0].parts}`);
  // Bytes: the growth frames together cost about one key of the whole tree, not the sum of
  // keys of every stage (what re-sending it would cost): measured against a fresh viewer's key.
  const v = await new Client(wsUrl(s, s.view_token)).open();
  await v.until(() => v.frames.length > 0 && v.frames.at(-1).objects[0]?.nvert === a.objects[0].nvert, 20000, 'viewer key');
  const key = v.frames.at(-1).bytes, grown = growth.reduce((n, f) => n + f.bytes, 0);
  let resend = 0;
  for (const f of growth) resend += key * (f.objects[0].nvert / a.objects[0].nvert);
  console.log(`# plant: ${a.objects[0].nvert / 2} branches in ${growth.length} frames: ${grown} bytes appended, ` +
    `key of the tree ${key} bytes, re-sending each stage about ${Math.round(resend)}`);
  assert.ok(grown < 1.6 * key + 120 * growth.length, `${grown} bytes to grow against a key of ${key}`);
  // Reseeding starts another tree; the same seed again the same one.
  await settle(srv.base, s, c, { type: 'reseed', seq: 2, seed: 12 });
  const other = c.frames.at(-1);
  assert.notDeepEqual([...other.q[0]], [...a.q[0]]);
  await settle(srv.base, s, c, { type: 'reseed', seq: 3, seed: 11 });
  assert.deepEqual([...c.frames.at(-1).q[0]], [...a.q[0]]);
  // The plant's events are refused on it for the truss's and vice versa.
  c.send({ type: 'load', seq: 4, node: [1, 1] });
  await c.until(() => errors(c).some((e) => e.seq === 4), 5000, 'load refused');
  assert.match(errors(c).find((e) => e.seq === 4).detail, /this is a plant/);
  c.send({ type: 'reseed', seq: 5, seed: -3 });
  await c.until(() => errors(c).some((e) => e.seq === 5), 5000, 'bad seed refused');
  for (const x of [c, c2, v]) await x.close();
  await drop(s);
  await drop(s2, srv2.base);
});

// Mean of the cells' energy scalar (log10 J) over cells whose centre lies left or right of x.
function cellEnergies(f) {
  const q = f.q[0], o = f.objects[0], top = 2 ** o.qbits - 1, out = [];
  for (let k = 0; k < o.nvert / 4; k++) {
    let x = 0, z = 0;
    for (let j = 0; j < 4; j++) {
      x += (o.bmin[0] + (o.bmax[0] - o.bmin[0]) * q[(k * 4 + j) * 4] / top) / 4;
      z += (o.bmin[2] + (o.bmax[2] - o.bmin[2]) * q[(k * 4 + j) * 4 + 2] / top) / 4;
    }
    out.push({ x, z, e: o.smin + (o.smax - o.smin) * q[k * 16 + 3] / 65535 });
  }
  return out;
}

test('growth: a truss clones cell by cell, is solved, and its energy follows the load', async () => {
  const s = (await api(srv.base, 'POST', '/api/sessions', { scene: 'growth', model: 'truss', cells: [20, 10] })).json;
  const c = await new Client(wsUrl(s, s.control_token)).open();
  await c.until(() => c.frames.length > 0, 20000, 'first frame');
  await settle(srv.base, s, c, { type: 'set_params', seq: 1, params: { steps_per_s: 60, sweeps_per_frame: 256 } });
  assert.equal(c.errors, 0, c.refusals.join('; '));
  const grown = c.frames.filter((f) => f.objects[0]);
  const counts = [...new Set(grown.map((f) => f.objects[0].nvert / 4))];
  assert.ok(counts.length >= 20 && counts.at(-1) === 200, `cells seen: ${counts.join(', ')}`);
  // The load at the top's middle: the hottest cells there; each side the mirror of the other.
  const e1 = cellEnergies(c.frames.at(-1)), mid = 20 * 0.1 / 2;
  const left = e1.filter((x) => x.x < mid - 0.5).map((x) => x.e), right = e1.filter((x) => x.x > mid + 0.5).map((x) => x.e);
  const hot = e1.reduce((a, b) => (b.e > a.e ? b : a));
  assert.ok(Math.abs(hot.x - mid) < 0.25 || hot.x < 0.25 || hot.x > 2 * mid - 0.25, `hottest cell at x = ${hot.x}`);
  const mean = (a) => a.reduce((n, x) => n + x, 0) / a.length;
  assert.ok(Math.abs(mean(left) - mean(right)) < 0.05, `left ${mean(left)} right ${mean(right)}`);
  // The driver drags the load to a quarter span: the energy moves left.
  await settle(srv.base, s, c, { type: 'load', seq: 2, point: [0.5, 0, 1.0] });
  const e2 = cellEnergies(c.frames.at(-1));
  const l2 = e2.filter((x) => x.x < mid - 0.5).map((x) => x.e), r2 = e2.filter((x) => x.x > mid + 0.5).map((x) => x.e);
  console.log(`# truss: log10 J left/right ${mean(left).toFixed(2)}/${mean(right).toFixed(2)} -> ${mean(l2).toFixed(2)}/${mean(r2).toFixed(2)}`);
  assert.ok(mean(l2) > mean(r2) + 0.2, `after the drag left ${mean(l2)} right ${mean(r2)}`);
  // The load went to the top at x = 0.5 m (the beam is 1 m high): the cells under it there
  // hold more energy than those at the bottom below them.
  const at = (zlo, zhi) => Math.max(...e2.filter((c) => Math.abs(c.x - 0.5) < 0.1 && c.z > zlo && c.z < zhi).map((c) => c.e));
  assert.ok(at(0.85, 2) > at(-1, 0.15) + 0.3, `top ${at(0.85, 2)} bottom ${at(-1, 0.15)} at x = 0.5 m`);
  // Twice the load, four times the energy: log10 up by log10(4) in every loaded cell.
  await settle(srv.base, s, c, { type: 'set_params', seq: 3, params: { load_kn: 200 } });
  const e3 = cellEnergies(c.frames.at(-1));
  const up = e3.map((x, k) => x.e - e2[k].e).filter((d, k) => e2[k].e > -4.9 && e3[k].e < 0.9);
  assert.ok(up.length > 100 && up.every((d) => Math.abs(d - Math.log10(4)) < 0.01),
    `log10 energy rose by ${Math.min(...up)}..${Math.max(...up)} in ${up.length} cells`);
  // Refusals: a node off the beam; a beam whose supports no longer hold it.
  c.send({ type: 'support', seq: 4, node: [21, 0], fix: 'pin' });
  await c.until(() => errors(c).some((e) => e.seq === 4), 5000, 'off-beam support refused');
  assert.match(errors(c).find((e) => e.seq === 4).detail, /off the beam/);
  c.send({ type: 'support', seq: 5, node: [20, 0], fix: 'free' });
  await c.until(() => errors(c).some((e) => /not held/.test(e.detail ?? '')), 10000, 'not held said');
  assert.equal(errors(c).find((e) => /not held/.test(e.detail ?? '')).seq, 5, 'not held: told as the answer to the support that freed it');
  c.send({ type: 'support', seq: 6, node: [0, 0], fix: 'hinge' });
  await c.until(() => errors(c).some((e) => e.seq === 6), 5000, 'bad fix refused');
  c.send({ type: 'reseed', seq: 7, seed: 3 });
  await c.until(() => errors(c).some((e) => e.seq === 7), 5000, 'reseed refused on a truss');
  assert.match(errors(c).find((e) => e.seq === 7).detail, /this is a truss/);
  await c.close();
  await drop(s);
});
