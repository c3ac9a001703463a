// softcast-server end to end: a real server on 127.0.0.1, real WebSocket clients.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import WebSocket from 'ws';
import { startServer, api, Client, wsUrl, withTimeout, heldPost } from './harness.mjs';

let srv;
before(async () => { srv = await startServer(['--dims', '32x32x20', '--max-events-per-s', '50']); });
after(async () => {
  const code = await srv.stop();
  assert.equal(code, 0, `server exit ${code}; stderr:\n${srv.stderr()}`);
});

const maxAbsDiff = (a, b) => a.reduce((m, v, i) => Math.max(m, Math.abs(v - b[i])), 0);

test('health, create, list, get, unknown session is 404', async () => {
  const h = await api(srv.base, 'GET', '/api/health');
  assert.equal(h.status, 200);
  assert.equal(h.json.status, 'ok');
  assert.equal(h.json.backend, 'cpu');
  const c = await api(srv.base, 'POST', '/api/sessions', { scene: 'volume', dims: [24, 24, 16] });
  assert.equal(c.status, 201);
  for (const k of ['id', 'control_token', 'view_token', 'ws_url', 'join_url', 'control_url']) assert.ok(c.json[k], k);
  const l = await api(srv.base, 'GET', '/api/sessions');
  assert.ok(l.json.sessions.some((s) => s.id === c.json.id));
  assert.ok(!JSON.stringify(l.json).includes(c.json.control_token), 'list leaks tokens');
  assert.equal((await api(srv.base, 'GET', `/api/sessions/${c.json.id}`)).status, 200);
  const u = await api(srv.base, 'GET', '/api/sessions/s7-3-deadbeef');
  assert.equal(u.status, 404);
  assert.equal(u.json.error, 'unknown session');
  assert.equal((await api(srv.base, 'DELETE', `/api/sessions/${c.json.id}`)).status, 403);
  const del = await api(srv.base, 'DELETE', `/api/sessions/${c.json.id}`, undefined, { authorization: `Bearer ${c.json.control_token}` });
  assert.equal(del.status, 204);
  assert.equal((await api(srv.base, 'POST', '/api/sessions', '{nope')).status, 400);
  assert.equal((await api(srv.base, 'POST', '/api/sessions', { scene: 'cloth9' })).status, 400);
  for (const url of ['/api/health', '/api/cluster']) { // GET's alone: another method is 405, not "not found"
    const r = await api(srv.base, 'POST', url, {});
    assert.equal(r.status, 405, `POST ${url}: ${r.text}`);
    assert.equal(r.json.error, 'method not allowed');
  }
  const m = await api(srv.base, 'GET', '/metrics');
  assert.match(m.text, /softcast_sessions \d+/);
});

// Prometheus' text format (prometheus.io/docs/instrumenting/exposition_formats): a metric's
// samples are one group, after its HELP and TYPE; a counter's name ends in _total.
test('/metrics: every metric has HELP and TYPE, and its samples (one per session) together', async () => {
  const made = [];
  for (let k = 0; k < 2; k++) {
    const c = await api(srv.base, 'POST', '/api/sessions', { scene: 'volume', dims: [16, 16, 8] });
    assert.equal(c.status, 201, c.text);
    made.push(c.json);
  }
  try {
    const text = (await api(srv.base, 'GET', '/metrics')).text;
    const help = new Map(), type = new Map(), samples = new Map();
    let current = null;
    for (const line of text.split('\n').filter(Boolean)) {
      const h = line.match(/^# (HELP|TYPE) (\w+) (.+)$/);
      if (h) {
        assert.ok(!samples.has(h[2]), `${h[1]} of ${h[2]} after its samples`);
        (h[1] === 'HELP' ? help : type).set(h[2], h[3]);
        continue;
      }
      const m = line.match(/^(\w+)(\{session="([^"]+)"\})? (-?[0-9.]+)$/);
      assert.ok(m, `not a sample: ${line}`);
      if (m[1] !== current) {
        assert.ok(!samples.has(m[1]), `${m[1]}'s samples are not together`);
        current = m[1];
        samples.set(m[1], []);
      }
      samples.get(m[1]).push(m[3]);
    }
    assert.ok(samples.size >= 20, `${samples.size} metrics`);
    for (const [name, of] of samples) {
      assert.ok(help.get(name)?.length > 5, `${name} has no HELP`);
      assert.ok(['gauge', 'counter'].includes(type.get(name)), `${name}'s TYPE ${type.get(name)}`);
      if (type.get(name) === 'counter') assert.match(name, /_total$/);
      if (name.startsWith('softcast_session_')) {
        for (const { id } of made) assert.ok(of.includes(id), `${name} lacks session ${id}`);
        assert.equal(new Set(of).size, of.length, `${name} lists a session twice`);
      }
    }
    assert.ok(samples.has('softcast_session_step_ms') && samples.has('softcast_express_steps_total'));
  } finally {
    for (const c of made) await api(srv.base, 'DELETE', `/api/sessions/${c.id}`, undefined, { authorization: `Bearer ${c.control_token}` });
  }
});

test('a session\'s options: a misspelt or unknown field, or a fraction where an integer goes, is refused by name in every scene', async () => {
  const cases = [
    [{ scene: 'volume', dim: [32, 32, 32] }, /unknown field "dim": a volume session's body takes scene, dims and preset/],
    [{ Scene: 'volume' }, /unknown field "Scene"/],
    [{ scene: 'volume', dims: [32.5, 32, 32] }, /"dims" entries must be integers 8 to 4096/],
    [{ scene: 'cloth', character: 3 }, /unknown field "character": a cloth session's body takes scene and characters/],
    [{ scene: 'cloth', characters: 2.5 }, /"characters" must be an integer/],
    [{ scene: 'softbody', modle: 'surface' }, /unknown field "modle": a softbody session's body takes scene, model and particles/],
    [{ scene: 'growth', model: 'truss', cell: [4, 4] }, /unknown field "cell": a growth session's body takes scene, model, seed, three_d and cells/],
  ];
  for (const [body, why] of cases) {
    const r = await api(srv.base, 'POST', '/api/sessions', body);
    assert.equal(r.status, 400, `${JSON.stringify(body)}: ${r.status} ${r.text}`);
    assert.match(r.json.detail, why, JSON.stringify(body));
  }
  // What each takes still makes a session.
  for (const body of [{ scene: 'volume', dims: [16, 16, 8], preset: 'contrast' }, { scene: 'cloth', characters: 2 }]) {
    const r = await api(srv.base, 'POST', '/api/sessions', body);
    assert.equal(r.status, 201, `${JSON.stringify(body)}: ${r.text}`);
    await api(srv.base, 'DELETE', `/api/sessions/${r.json.id}`, undefined, { authorization: `Bearer ${r.json.control_token}` });
  }
});

test('a JSON body over 64 KiB: refused with 413, at once when its length says so (no byte of it sent)', async () => {
  const post = (headers, body) => {
    const h = heldPost(srv.base, '/api/sessions', { 'content-type': 'application/json', ...headers });
    if (body) h.req.end(body); else h.req.flushHeaders();
    return h.response;
  };
  const t0 = Date.now();
  const announced = await withTimeout(post({ 'content-length': '10000000' }), 5000, 'the answer to a body announced over the limit');
  assert.equal(announced.status, 413);
  assert.match(announced.json.detail, /limited to 64 KiB/);
  assert.ok(Date.now() - t0 < 3000, `answered after ${Date.now() - t0} ms`);
  const sent = await withTimeout(post({}, JSON.stringify({ scene: 'volume', pad: 'x'.repeat(70000) })), 10000, 'the answer to a body over the limit');
  assert.equal(sent.status, 413);
  assert.match(sent.json.detail, /limited to 64 KiB/);
});

test('command-line mistakes: an unknown option is called unknown, with or without a value; a known one without its value is told so', () => {
  const bin = process.env.SOFTCAST_SERVER ?? new URL('../../build/test/softcast-server', import.meta.url).pathname;
  const cases = [
    [['--bogus'], /unknown option --bogus \(see --help\)/],
    [['--bogus', '1'], /unknown option --bogus \(see --help\)/],
    [['--rate'], /--rate needs a value/],
    [['--volume'], /--volume needs a value/], // a scene's option
  ];
  for (const [args, why] of cases) {
    const r = spawnSync(bin, args, { encoding: 'utf8', timeout: 10000 });
    assert.notEqual(r.status, 0, `${args.join(' ')}: exit ${r.status}`);
    assert.match(r.stderr, why, args.join(' '));
  }
});

test('driver and two viewers see the same deformation at the same frame numbers', async () => {
  const s = (await api(srv.base, 'POST', '/api/sessions', { scene: 'volume', dims: [32, 32, 20] })).json;
  const driver = await new Client(wsUrl(s, s.control_token)).open();
  const v1 = await new Client(wsUrl(s, s.view_token)).open();
  const v2 = await new Client(wsUrl(s, s.view_token)).open();
  const all = [driver, v1, v2];
  for (const c of all) await c.until(() => c.frames.length > 0 && c.texts.some((t) => t.type === 'welcome'), 10000, 'keyframe');
  assert.equal(driver.texts.find((t) => t.type === 'welcome').role, 'driver');
  assert.equal(v1.texts.find((t) => t.type === 'welcome').role, 'viewer');
  const rest = driver.frames.at(-1).q[0];
  // Grab the belly (front is high y) in lattice units and pull it out.
  driver.send({ type: 'grab', seq: 1, point: [16, 26, 10], radius: 2.5, space: 'lattice' });
  for (let k = 1; k <= 6; k++) driver.send({ type: 'move', seq: 1 + k, point: [16, 26 + k, 10], space: 'lattice' });
  for (const c of all) await c.until(() => c.frames.some((f) => f.lastSeq >= 7), 15000, 'seq 7 echoed');
  const target = driver.frames.find((f) => f.lastSeq >= 7).frame;
  for (const c of all) {
    const f = c.frames.find((x) => x.frame === target);
    assert.ok(f, `client lacks frame ${target}`);
    assert.ok(maxAbsDiff(f.q[0], rest) > 1000, 'skin did not move');
    assert.equal(c.errors, 0);
  }
  assert.deepEqual(Array.from(v1.frames.find((x) => x.frame === target).q[0]), Array.from(driver.frames.find((x) => x.frame === target).q[0]));
  assert.deepEqual(Array.from(v2.frames.find((x) => x.frame === target).q[0]), Array.from(driver.frames.find((x) => x.frame === target).q[0]));
  // A slice, decoded.
  driver.send({ type: 'slice', seq: 20, plane: 'axial', index: 10, level: 40, width: 400 });
  await driver.until(() => driver.slices.length > 0, 10000, 'slice');
  const sl = driver.slices[0];
  assert.equal(sl.width, 32);
  assert.equal(sl.height, 32);
  assert.ok(new Set(sl.pixels).size > 3, 'slice is flat');
  // A viewer's event is refused and changes nothing: a reset from a viewer would echo its
  // seq in the next frame and put the skin back at rest; the driver's grab still holds.
  const pulled = driver.frames.at(-1).q[0];
  v1.send({ type: 'reset', seq: 777 });
  await v1.until(() => v1.texts.some((t) => t.type === 'error'), 5000, 'viewer error');
  assert.equal(v1.texts.find((t) => t.type === 'error').error, 'not the driver');
  driver.send({ type: 'move', seq: 21, point: [16, 33, 10], space: 'lattice' });
  await driver.until(() => driver.frames.some((f) => f.lastSeq === 21), 10000, 'seq 21 echoed');
  assert.ok(!driver.frames.some((f) => f.lastSeq === 777), 'a frame includes the viewer\'s reset');
  const after = driver.frames.find((f) => f.lastSeq === 21).q[0];
  assert.ok(maxAbsDiff(after, rest) >= maxAbsDiff(pulled, rest), 'the skin went back towards rest');
  for (const c of all) await c.close();
});

test('wrong or missing token, unknown session: refused at connect with a reason', async () => {
  const s = (await api(srv.base, 'POST', '/api/sessions', { dims: [16, 16, 8] })).json;
  const urls = [
    [wsUrl(s, 'f'.repeat(32)), /token/],
    [s.ws_url, /token/],
    [`ws://127.0.0.1:${srv.info.ws_port}/?session=s1-9-00000000&token=${s.view_token}`, /unknown session/],
  ];
  for (const [url, why] of urls) {
    const c = await new Client(url).open();
    const code = await c.closed;
    assert.equal(code, 1008);
    const e = c.texts.find((t) => t.type === 'error');
    assert.ok(e && e.error === 'refused', JSON.stringify(c.texts));
    assert.match(e.detail, why);
    assert.equal(c.frames.length, 0);
  }
});

test('bad messages get errors and the connection stays', async () => {
  const s = (await api(srv.base, 'POST', '/api/sessions', { dims: [16, 16, 8] })).json;
  const c = await new Client(wsUrl(s, s.control_token)).open();
  const cases = [
    ['{not json', 'bad message'],
    [{ type: 'teleport', seq: 1 }, 'unknown message type'],
    [{ type: 'grab', seq: 2, point: [1, 2] , radius: 1 }, 'bad message'],
    [{ type: 'grab', seq: 3, point: [1, 2, 3] }, 'bad message'],
    ['{"type":"move","seq":4,"point":[1,2,1e999]}', 'bad message'],
    ['x'.repeat(70000), 'message too large'],
  ];
  for (const [msg, want] of cases) {
    const n = c.texts.filter((t) => t.type === 'error').length;
    c.send(msg);
    await c.until(() => c.texts.filter((t) => t.type === 'error').length > n, 5000, `error for ${String(msg).slice(0, 30)}`);
    assert.equal(c.texts.filter((t) => t.type === 'error').at(-1).error, want);
  }
  c.ws.send(Buffer.from([1, 2, 3, 4]), { binary: true });
  await c.until(() => c.texts.some((t) => /binary/.test(t.detail ?? '')), 5000, 'binary refused');
  // Still alive: a ping is answered.
  c.send({ type: 'ping', seq: 99, t: 1234.5 });
  await c.until(() => c.texts.some((t) => t.type === 'pong'), 5000, 'pong');
  assert.equal(c.texts.find((t) => t.type === 'pong').t, 1234.5);
  // A flood over the rate limit is refused, not queued.
  for (let i = 0; i < 200; i++) c.send({ type: 'ping', seq: 1000 + i, t: i });
  await c.until(() => c.texts.some((t) => t.error === 'rate limited'), 5000, 'rate limit');
  await c.close();
});

test('200 connect/disconnect cycles, abrupt ones included; the server keeps serving', async () => {
  const s = (await api(srv.base, 'POST', '/api/sessions', { dims: [16, 16, 8] })).json;
  for (let i = 0; i < 200; i++) {
    const ws = new WebSocket(wsUrl(s, s.view_token));
    await withTimeout(new Promise((resolve, reject) => { ws.once('open', resolve); ws.once('error', reject); }), 5000, 'open');
    if (i % 2) ws.terminate(); // abrupt: no close frame
    else ws.close();
  }
  const h = await api(srv.base, 'GET', '/api/health');
  assert.equal(h.status, 200);
  const c = await new Client(wsUrl(s, s.control_token)).open();
  await c.until(() => c.frames.length > 0, 10000, 'frame after churn');
  await c.close();
});

// A slice asked of a session at rest is answered and makes no frame: answering changes nothing.
// (It once made one, and the page's slice view, which asks again for each new frame, kept a
// resting session framing and encoding for ever: at_rest never came.)
test('a slice asked at rest is answered without a frame; the session stays at rest', async () => {
  const s = (await api(srv.base, 'POST', '/api/sessions', { scene: 'volume' })).json;
  const d = await new Client(wsUrl(s, s.control_token)).open();
  const rest = async () => {
    for (const deadline = Date.now() + 20000; ;) { // polling, bounded by the deadline
      const st = (await api(srv.base, 'GET', `/api/sessions/${s.id}`)).json;
      if (st.at_rest && d.frames.length && d.frames.at(-1).frame >= st.latest_frame) return st;
      if (Date.now() > deadline) throw new Error(`not at rest: ${JSON.stringify(st)}`);
      await new Promise((r) => setTimeout(r, 20));
    }
  };
  const before = await rest();
  for (let k = 1; k <= 5; k++) {
    d.send({ type: 'slice', seq: k, plane: 'coronal', index: 10, level: 40, width: 400 });
    await d.until(() => d.slices.length >= k, 10000, `slice ${k}`);
  }
  const after = await rest();
  assert.equal(after.latest_frame, before.latest_frame, 'five slices made frames');
  await d.close();
  await api(srv.base, 'DELETE', `/api/sessions/${s.id}`);
});
