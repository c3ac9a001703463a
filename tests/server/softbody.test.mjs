// The softbody scene through the server: both models created over REST (bad options refused
// by name), and on a hybrid session over the WebSocket: the organ coloured by region, a grab
// that pulls it, a release that lets it return, a tray move that carries it, planes added and
// removed, parameters checked against the schema, and only the driver driving. Positions are
// read from the decoded frames as a browser holds them (the organ in the tray's frame, placed
// by the tray's transform).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, api, Client, wsUrl, atRest, objectLocal, objectWorld } from './harness.mjs';
import { applyTransform } from '../../protocol/js/softcast-proto.mjs';

let srv;
before(async () => { srv = await startServer([]); });
after(async () => { assert.equal(await srv.stop(), 0, srv.stderr()); });

const ORGAN = 0, TRAY = 1;
const lastState = (c) => c.texts.filter((t) => t.type === 'state').at(-1);
const errors = (c) => c.texts.filter((t) => t.type === 'error');

const local = objectLocal, world = objectWorld; // the tray's frame, and the world's

// Largest and mean distance between two vertex lists (after subtracting a shift from b).
function gap(a, b, shift = [0, 0, 0]) {
  let max = 0, sum = 0;
  for (let i = 0; i < a.length; i += 3) {
    const d = Math.hypot(b[i] - shift[0] - a[i], b[i + 1] - shift[1] - a[i + 1], b[i + 2] - shift[2] - a[i + 2]);
    max = Math.max(max, d);
    sum += d;
  }
  return { max, mean: sum / (a.length / 3) };
}

const centroid = (x) => {
  const c = [0, 0, 0];
  for (let i = 0; i < x.length; i++) c[i % 3] += x[i] / (x.length / 3);
  return c;
};
const topZ = (x) => { let z = -Infinity; for (let i = 2; i < x.length; i += 3) z = Math.max(z, x[i]); return z; };

// Send one event and wait for the first frame that includes it (or for its error).
async function applied(c, msg, what) {
  c.send(msg);
  await c.until(() => c.frames.some((f) => f.lastSeq >= msg.seq) || errors(c).some((t) => t.seq === msg.seq), 20000, what);
}

// The organ settled: the server says the scene sleeps (every particle still) and the clients
// hold its last frame.
let session;
const settle = (clients) => atRest(srv.base, session.id, clients);

test('softbody: REST options, both models, refusals that name the field', async () => {
  const bad = [
    [{ scene: 'softbody', model: 'jelly' }, /"model" must be "hybrid" or "surface"/],
    [{ scene: 'softbody', model: 'surface', particles: 5 }, /"particles" must be an integer 12 to 20000/],
    [{ scene: 'softbody', model: 'surface', particles: 1e6 }, /"particles"/],
    [{ scene: 'softbody', model: 'surface', particles: 100.5 }, /"particles"/],
    [{ scene: 'softbody', particles: 500 }, /"particles" is for the surface model/],
    [{ scene: 'softbody', colour: 'red' }, /unknown field "colour"/],
  ];
  for (const [body, why] of bad) {
    const r = await api(srv.base, 'POST', '/api/sessions', body);
    assert.equal(r.status, 400, JSON.stringify(body));
    assert.match(r.json.detail, why);
  }
  const h = await api(srv.base, 'POST', '/api/sessions', { scene: 'softbody' });
  assert.equal(h.status, 201, h.text);
  assert.equal(h.json.model, 'hybrid');
  assert.deepEqual(h.json.regions, ['liver', 'tumour', 'vessel']);
  assert.deepEqual(h.json.inner_surfaces, [1, 2], 'the tumour\'s and the vessel\'s own surfaces');
  assert.ok(h.json.tets > 100 && h.json.particles > 100 && h.json.surface_vertices > 100, h.text);
  const s = await api(srv.base, 'POST', '/api/sessions', { scene: 'softbody', model: 'surface', particles: 500 });
  assert.equal(s.status, 201, s.text);
  assert.equal(s.json.model, 'surface');
  assert.equal(s.json.particles, 500);
  assert.equal(s.json.tets, 0);
  // The surface organ: one object of 500 vertices without a scalar, and the tray.
  const c = await new Client(wsUrl(s.json, s.json.control_token)).open();
  await c.until(() => c.frames.length && lastState(c), 20000, 'surface frames');
  const o = c.frames.at(-1).objects;
  assert.equal(o[ORGAN].nvert, 500);
  assert.equal(o[TRAY].nvert, 8);
  const q = c.frames.at(-1).q[ORGAN];
  for (let j = 0; j < 500; j++) assert.equal(q[j * 4 + 3], 0, 'a surface organ has no region scalar');
  await c.close();
  for (const x of [h.json, s.json])
    assert.equal((await api(srv.base, 'DELETE', `/api/sessions/${x.id}`, undefined, { authorization: `Bearer ${x.control_token}` })).status, 204);
});

test('softbody: regions, grab and release, the tray carries the organ, planes, parameters, the driver alone', async () => {
  const s = (await api(srv.base, 'POST', '/api/sessions', { scene: 'softbody', model: 'hybrid' })).json;
  session = s;
  const c = await new Client(wsUrl(s, s.control_token)).open();
  const v = await new Client(wsUrl(s, s.view_token)).open();
  await c.until(() => c.frames.length && lastState(c), 20000, 'first frame and state');
  assert.equal(lastState(c).scene, 'softbody');
  // Damped ten times the default: the organ settles in a second instead of five (under ASan,
  // in 4 s instead of 20), and where it comes to rest does not depend on the damping.
  await applied(c, { type: 'set_params', seq: 1, params: { damping: 10 } }, 'damping');
  await settle([c, v]);
  assert.equal(c.errors + v.errors, 0, [...c.refusals, ...v.refusals].join('; '));

  // Regions: each surface vertex carries its tet's region (0 liver, 1 tumour, 2 vessel,
  // quantised over [0, 2]); the vessel runs the organ's length and shows at its ends.
  const q0 = c.frames.at(-1).q[ORGAN], seen = new Map();
  for (let j = 3; j < q0.length; j += 4) seen.set(q0[j], (seen.get(q0[j]) ?? 0) + 1);
  assert.ok(seen.get(0) > q0.length / 8, `liver vertices: ${JSON.stringify([...seen])}`);
  assert.ok(seen.get(65535) > 0, `vessel vertices: ${JSON.stringify([...seen])}`);
  for (const k of seen.keys()) assert.ok([0, 32768, 65535].includes(k), `a scalar ${k} that is no region`);
  // Inside the organ, the tumour's (object 2) and the vessel's (3) own closed surfaces, each
  // all of its region and within the organ's outer surface's box.
  const outer = world(c, ORGAN), lo = [0, 1, 2].map((b) => Math.min(...outer.filter((_, i) => i % 3 === b)));
  const hi = [0, 1, 2].map((b) => Math.max(...outer.filter((_, i) => i % 3 === b)));
  for (const [id, code] of [[2, 32768], [3, 65535]]) {
    const qi = c.frames.at(-1).q[id], x = world(c, id);
    assert.ok(qi && x.length > 60, `inner surface ${id} missing`);
    for (let j = 3; j < qi.length; j += 4) assert.equal(qi[j], code, `inner surface ${id}: a vertex of another region`);
    for (let i = 0; i < x.length; i++) assert.ok(x[i] >= lo[i % 3] - 1e-3 && x[i] <= hi[i % 3] + 1e-3, `inner surface ${id} leaves the organ`);
  }

  // Grab at the organ's top and lift the hand 4 cm: the top follows; the rest stays put.
  const rest = world(c, ORGAN);
  let top = 0;
  for (let i = 0; i < rest.length; i += 3) if (rest[i + 2] > rest[top * 3 + 2]) top = i / 3;
  const p = [rest[top * 3], rest[top * 3 + 1], rest[top * 3 + 2]];
  let seq = 2;
  await applied(c, { type: 'grab', seq: seq++, point: p }, 'grab');
  for (let k = 1; k <= 8; k++)
    await applied(c, { type: 'move', seq: seq++, point: [p[0], p[1], p[2] + 0.005 * k], space: 'world' }, 'move');
  const n0 = c.frames.length;
  await c.until(() => c.frames.length > n0 + 20, 20000, 'frames while held');
  const held = world(c, ORGAN);
  const lift = held[top * 3 + 2] - p[2];
  assert.ok(lift > 0.02, `the grabbed top rose ${(lift * 1000).toFixed(1)} mm for a 40 mm pull`);
  // A viewer may not touch.
  v.send({ type: 'release', seq: 1 });
  v.send({ type: 'tray', seq: 2, pos: [0, 0, 0.1], quat: [1, 0, 0, 0] });
  await v.until(() => errors(v).length >= 2, 10000, 'viewer refusals');
  assert.ok(errors(v).every((t) => t.error === 'not the driver'), JSON.stringify(errors(v)));
  assert.ok(world(c, ORGAN)[top * 3 + 2] - p[2] > 0.02, 'still held after the viewer\'s release');
  // Let go: it returns near its rest shape. Friction holds the underside where it was set
  // down, so the organ may slide a little and keep some of the pull (measured here at the
  // hybrid's 10 substeps of 1 iteration: slid 4.3 mm, 8.7 mm at most and 2.8 mm on average
  // from its rest shape after a 40 mm pull; 4.2 and 0.8 at 5 x 5; without friction the sim
  // returns within 1.3 mm: sim/README.md); still held it would be 40 mm off. Bounds: 6 mm
  // slid, a quarter of the pull at most, 4 mm on average.
  await applied(c, { type: 'release', seq: seq++ }, 'release');
  await settle([c, v]);
  const after = world(c, ORGAN), slid = centroid(after).map((x, b) => x - centroid(rest)[b]);
  const back = gap(rest, after, slid), pulled = gap(rest, held);
  console.log(`softbody: held ${(pulled.max * 1000).toFixed(1)} mm max, ${(pulled.mean * 1000).toFixed(2)} mean; ` +
    `released: slid ${(Math.hypot(...slid) * 1000).toFixed(2)} mm, shape ${(back.max * 1000).toFixed(2)} max, ${(back.mean * 1000).toFixed(2)} mean`);
  assert.ok(Math.hypot(...slid) < 0.006, `the organ slid ${Math.hypot(...slid)} m`);
  assert.ok(back.max < pulled.max / 4 && back.mean < 0.004,
    `after release the shape is ${(back.max * 1000).toFixed(2)} mm from rest at most, ${(back.mean * 1000).toFixed(2)} on average`);

  // The tray moves 5 cm, -3 cm, 2 cm: the organ and the tray go with it. The carry is rigid
  // and keeps the velocities relative to the tray, so the organ, at rest before, stands at
  // rest in the tray after: within 1 mm (the 12 um quantisation, and what a few frames of
  // settling move).
  const trayBefore = world(c, TRAY), organBefore = world(c, ORGAN);
  const d = [0.05, -0.03, 0.02];
  await applied(c, { type: 'tray', seq: seq++, pos: d, quat: [1, 0, 0, 0] }, 'tray move');
  await settle([c, v]);
  const moved = gap(organBefore, world(c, ORGAN), d);
  assert.ok(moved.max < 0.001, `the organ is ${(moved.max * 1000).toFixed(2)} mm off the tray's motion`);
  assert.ok(gap(trayBefore, world(c, TRAY), d).max < 0.001, 'the tray moved by its pose');
  // Tilted 10 degrees about x (+y up): the organ turns with the tray and slides downhill in
  // it (this friction does not hold soft tissue on a slope of 0.18: measured, it slides the
  // 25 mm to the low wall) until it rests against that wall, never through it or the floor.
  const a = (10 * Math.PI) / 180, quat = [Math.cos(a / 2), Math.sin(a / 2), 0, 0];
  const flat = local(c, ORGAN);
  await applied(c, { type: 'tray', seq: seq++, pos: d, quat }, 'tray tilt');
  await settle([c, v]);
  const tilted = local(c, ORGAN), [hx, hy] = s.tray;
  const downhill = centroid(tilted)[1] - centroid(flat)[1];
  assert.ok(downhill < -0.01, `the organ slid ${(downhill * 1000).toFixed(1)} mm along y in the tilted tray`);
  let lowY = Infinity, lowZ = Infinity, far = 0;
  for (let i = 0; i < tilted.length; i += 3) {
    lowY = Math.min(lowY, tilted[i + 1]);
    lowZ = Math.min(lowZ, tilted[i + 2]);
    far = Math.max(far, Math.abs(tilted[i]));
  }
  // The surface lies inside the tets, which touch the wall: within a boundary cell (4 voxels
  // of 3 mm) of it.
  assert.ok(lowY > -hy - 0.001 && lowY < -hy + 0.012, `lowest y ${lowY} against the wall at ${-hy}`);
  assert.ok(lowZ > -0.001 && far < hx + 0.001, `inside the tray: z >= ${lowZ}, |x| <= ${far}`);
  // The tray's own corners turned: world = the pose applied to its frame.
  const corners = applyTransform(local(c, TRAY), { t: d, r: [quat[1], quat[2], quat[3], quat[0]] });
  assert.ok(gap(corners, world(c, TRAY)).max < 1e-4, 'the tray drawn at its pose');
  await applied(c, { type: 'tray', seq: seq++, pos: [0, 0, 0], quat: [1, 0, 0, 0] }, 'tray home');
  await settle([c, v]);

  // A lid 1 cm under the organ's top (a plane fixed in the world): the organ is pressed
  // under it; removed, it rises again. The tray's own planes cannot be removed.
  const z0 = topZ(world(c, ORGAN)), lid = z0 - 0.01;
  await applied(c, { type: 'add_plane', seq: seq++, n: [0, 0, -1], d: -lid, attached: false }, 'add_plane');
  const reply = c.texts.find((t) => t.type === 'plane_added');
  assert.ok(reply && reply.seq === seq - 1 && reply.id > 5, JSON.stringify(reply));
  await settle([c, v]);
  assert.ok(topZ(world(c, ORGAN)) < lid + 0.001, `under the lid: top ${topZ(world(c, ORGAN))} lid ${lid}`);
  await applied(c, { type: 'remove_plane', seq: seq++, id: reply.id }, 'remove_plane');
  await settle([c, v]);
  assert.ok(topZ(world(c, ORGAN)) > lid + 0.005, 'the organ rose once the lid went');
  const bad = [
    [{ type: 'remove_plane', id: 1 }, /tray's own/],
    [{ type: 'remove_plane', id: reply.id }, /no such plane/],
    [{ type: 'add_plane', n: [0, 0, 0], d: 0 }, /"n" must not be zero/],
    [{ type: 'tray', pos: [0, 0, 0], quat: [1, 1, 0, 0] }, /unit quaternion/],
    [{ type: 'tray', pos: [0, 0, 0], quat: [1, 0, 0] }, /"quat"/],
    [{ type: 'tray', pos: [5, 0, 0], quat: [1, 0, 0, 0] }, /pos\[0\] must be a finite number within 1/],
    [{ type: 'grab', point: [0, 0, 0.5] }, /no particle within grab_radius/],
    [{ type: 'grab', character: 0, vertex: 3, point: [0, 0, 0] }, /not by vertex/],
    [{ type: 'set_params', params: { friction: 99 } }, /friction/],
    [{ type: 'set_params', params: { dt: 0.01 } }, /no parameter "dt"/],
  ];
  const first = seq;
  for (const [m, why] of bad) {
    const n = seq++;
    c.send({ ...m, seq: n });
    await c.until(() => errors(c).some((t) => t.seq === n), 10000, `refusal of ${JSON.stringify(m)}`);
    assert.match(errors(c).find((t) => t.seq === n).detail, why);
  }
  assert.equal(errors(c).filter((t) => t.seq >= first).length, bad.length);
  // A parameter in range reaches every client's state.
  c.send({ type: 'set_params', seq: seq++, params: { gravity: 5 } });
  await v.until(() => lastState(v)?.params.gravity === 5, 10000, 'params in the viewer\'s state');
  assert.ok(c.texts.find((t) => t.param_schema).param_schema.some((e) => e.name === 'grab_radius'), 'the schema');
  assert.equal(c.errors + v.errors, 0, [...c.refusals, ...v.refusals].join('; '));
  await v.close();
  await c.close();
  assert.equal((await api(srv.base, 'DELETE', `/api/sessions/${s.id}`, undefined, { authorization: `Bearer ${s.control_token}` })).status, 204);
});
