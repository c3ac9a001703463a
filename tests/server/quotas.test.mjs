// Quotas on a shared server (issue 12, item 2): one address cannot fill the session table,
// sessions nobody joins expire, a flood of slow-header connections from one address leaves
// the others served, making sessions takes a JSON body of the right type and nothing after
// it, and with --api-key-file only the operator's key makes sessions. Other addresses are
// loopback's own (127.0.0.2 and 127.0.0.3: the whole 127/8 is this machine).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { mkdtempSync, writeFileSync, rmSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import WebSocket from 'ws';
import { startServer, api, Client, wsUrl, withTimeout, rawRequest, heldPost } from './harness.mjs';

// A request from a given local address (fetch cannot choose one).
function from(localAddress, base, method, path, body, headers = {}) {
  return withTimeout(rawRequest(`${base}${path}`, { method, body, headers, localAddress }), 10000,
    `${method} ${path} from ${localAddress}`);
}

test('one address cannot fill the table: its sessions are capped, other addresses still make theirs', async () => {
  const srv = await startServer(['--dims', '16x16x8', '--max-sessions', '12', '--max-sessions-per-address', '4']);
  try {
    const mine = [];
    for (let i = 0; i < 4; i++) {
      const r = await from('127.0.0.2', srv.base, 'POST', '/api/sessions', {});
      assert.equal(r.status, 201, r.text);
      mine.push(r.json);
    }
    for (let i = 0; i < 3; i++) { // as fast as it likes: every further one is refused
      const r = await from('127.0.0.2', srv.base, 'POST', '/api/sessions', {});
      assert.equal(r.status, 429, r.text);
      assert.match(r.json.detail, /this address holds its limit of 4 sessions/);
    }
    const other = await from('127.0.0.3', srv.base, 'POST', '/api/sessions', {});
    assert.equal(other.status, 201, other.text);
    // A deleted session gives its place back at once.
    const del = await api(srv.base, 'DELETE', `/api/sessions/${mine[0].id}`, undefined, { authorization: `Bearer ${mine[0].control_token}` });
    assert.equal(del.status, 204);
    assert.equal((await from('127.0.0.2', srv.base, 'POST', '/api/sessions', {})).status, 201);
  } finally {
    assert.equal(await srv.stop(), 0);
  }
});

test('a session without clients for --idle-expiry seconds closes; one with a client stays', async () => {
  const srv = await startServer(['--dims', '16x16x8', '--idle-expiry', '1']);
  try {
    const idle = (await api(srv.base, 'POST', '/api/sessions', {})).json;
    const watched = (await api(srv.base, 'POST', '/api/sessions', {})).json;
    const left = (await api(srv.base, 'POST', '/api/sessions', {})).json;
    const c = await new Client(wsUrl(watched, watched.view_token), { decode: false }).open();
    const l = await new Client(wsUrl(left, left.view_token), { decode: false }).open();
    await l.until(() => l.texts.some((t) => t.type === 'welcome'), 10000, 'welcome');
    await l.close(); // its second starts now
    const gone = async (s) => (await api(srv.base, 'GET', `/api/sessions/${s.id}`)).status === 404;
    const t0 = Date.now();
    while (!(await gone(idle)) || !(await gone(left))) {
      assert.ok(Date.now() - t0 < 15000, 'idle sessions still there after 15 s');
      await new Promise((r) => setTimeout(r, 100));
    }
    // Both idle ones went, past their second; the one watched all along is there, its
    // client still connected.
    assert.equal((await api(srv.base, 'GET', `/api/sessions/${watched.id}`)).status, 200);
    assert.equal(c.ws.readyState, 1);
    await c.close();
    while (!(await gone(watched))) {
      assert.ok(Date.now() - t0 < 30000, 'the watched session did not expire once left');
      await new Promise((r) => setTimeout(r, 100));
    }
  } finally {
    assert.equal(await srv.stop(), 0);
  }
});

test('slow headers: a thousand trickling connections from one address; the others are served at once', { timeout: 60000 }, async () => {
  const srv = await startServer(['--dims', '16x16x8']);
  const port = Number(new URL(srv.base).port);
  const socks = [];
  try {
    for (let i = 0; i < 1100; i++) {
      const s = net.connect({ host: '127.0.0.1', port, localAddress: '127.0.0.2' });
      s.on('error', () => {});
      s.write('GET /api/health HTTP/1.1\r\nHost: x\r\nX-Slow: ');
      socks.push(s);
    }
    await new Promise((r) => setTimeout(r, 500)); // paces the flood's writes out; nothing is asserted on it
    for (let k = 0; k < 5; k++) {
      const t0 = performance.now();
      const r = await from('127.0.0.1', srv.base, 'GET', '/api/health');
      assert.equal(r.status, 200);
      assert.ok(performance.now() - t0 < 2000, `health took ${performance.now() - t0} ms`);
    }
    const open = socks.filter((s) => !s.destroyed && s.readyState === 'open').length;
    assert.ok(open <= 64 + 8, `${open} of the flood's connections held open (at most 64 an address)`);
  } finally {
    for (const s of socks) s.destroy();
    assert.equal(await srv.stop(), 0);
  }
});

test('making a session: application/json, one JSON object and nothing after it', async () => {
  const srv = await startServer(['--dims', '16x16x8']);
  try {
    const post = (body, type) => fetch(`${srv.base}/api/sessions`, { method: 'POST', body, headers: type ? { 'content-type': type } : {} });
    for (const [body, type, status] of [
      ['{}', null, 415], // a cross-site form or fetch without preflight sends text/plain
      ['{}', 'text/plain', 415],
      ['{}', 'application/x-www-form-urlencoded', 415],
      ['', 'application/json', 400],
      ['{} trailing', 'application/json', 400],
      ['{}{}', 'application/json', 400],
      ['[]', 'application/json', 400],
      ['{} \n', 'application/json; charset=utf-8', 201],
    ]) {
      const r = await post(body, type), text = await r.text();
      assert.equal(r.status, status, `${JSON.stringify(body)} as ${type}: ${text}`);
      if (status !== 201) assert.ok(JSON.parse(text).detail);
    }
  } finally {
    assert.equal(await srv.stop(), 0);
  }
});

test('--api-key-file: only the operator\'s key makes sessions and uploads; joining needs none', async () => {
  const dir = mkdtempSync(`${tmpdir()}/softcast-key-`);
  const key = 'k3y-0f-the-0perat0r-1234567890';
  writeFileSync(`${dir}/key`, `${key}\n`);
  writeFileSync(`${dir}/short`, 'short\n');
  const bad = await startServer(['--api-key-file', `${dir}/short`]).catch((e) => e);
  assert.match(String(bad), /the key must be 16 to 127 characters/);
  const srv = await startServer(['--dims', '16x16x8', '--api-key-file', `${dir}/key`]);
  try {
    assert.equal((await api(srv.base, 'GET', '/api/health')).json.api_key_required, true);
    for (const headers of [{}, { authorization: 'Bearer nope' }, { authorization: `Bearer ${key}x` }, { authorization: key }]) {
      const r = await api(srv.base, 'POST', '/api/sessions', {}, headers);
      assert.equal(r.status, 401, r.text);
      assert.equal(r.json.error, 'operator key required');
    }
    const up = await fetch(`${srv.base}/api/volumes?name=a.nii`, { method: 'POST', body: Buffer.alloc(400), headers: { 'content-type': 'application/octet-stream' } });
    assert.equal(up.status, 401);
    // A recording without the key: 401 before its body is read, whatever its size (not the
    // size's 413, which would read up to --upload-limit of an anonymous client's bytes).
    const record = (headers, body) => {
      const h = heldPost(srv.base, '/api/recordings', headers);
      if (body) h.req.end(body); else h.req.flushHeaders();
      return h.response;
    };
    for (const [what, headers, body] of [
      ['announced over --upload-limit, nothing sent', { 'content-length': '100000000000' }, null],
      ['announced within it, nothing sent', { 'content-length': '4096' }, null],
      ['sent', {}, Buffer.alloc(4096)],
    ]) {
      const r = await withTimeout(record(headers, body), 5000, `the answer to a recording ${what}`);
      assert.equal(r.status, 401, `a recording ${what}: ${JSON.stringify(r.json)}`);
      assert.equal(r.json.error, 'operator key required');
    }
    const r = await api(srv.base, 'POST', '/api/sessions', {}, { authorization: `Bearer ${key}` });
    assert.equal(r.status, 201, r.text);
    const c = await new Client(wsUrl(r.json, r.json.view_token), { decode: false }).open();
    await c.until(() => c.texts.some((t) => t.type === 'welcome'), 10000, 'a viewer joins without the key');
    await c.close();
  } finally {
    assert.equal(await srv.stop(), 0);
    rmSync(dir, { recursive: true, force: true });
  }
});

// A WebSocket from a given local address: its first text message (welcome or refusal).
function joinFrom(localAddress, url) {
  return withTimeout(new Promise((resolve, reject) => {
    const ws = new WebSocket(url, { localAddress });
    ws.once('message', (d) => resolve({ ws, msg: JSON.parse(d.toString()) }));
    ws.once('error', reject);
  }), 10000, `join from ${localAddress}`);
}

test('viewers\' connections from one address are capped; other addresses and the control token still join', async () => {
  const srv = await startServer(['--dims', '16x16x8', '--max-ws-per-address', '3']);
  const open = [];
  try {
    const a = (await api(srv.base, 'POST', '/api/sessions', {})).json;
    const b = (await api(srv.base, 'POST', '/api/sessions', {})).json;
    // The cap counts an address's viewers across sessions: 2 on a, 1 on b, then no more.
    for (const s of [a, a, b]) {
      const j = await joinFrom('127.0.0.2', wsUrl(s, s.view_token));
      assert.equal(j.msg.type, 'welcome');
      open.push(j.ws);
    }
    const refused = await joinFrom('127.0.0.2', wsUrl(b, b.view_token));
    assert.equal(refused.msg.type, 'error');
    assert.match(refused.msg.detail, /too many connections from this address/);
    const other = await joinFrom('127.0.0.3', wsUrl(b, b.view_token));
    assert.equal(other.msg.type, 'welcome');
    const driver = await joinFrom('127.0.0.2', wsUrl(a, a.control_token));
    assert.equal(driver.msg.role, 'driver');
    open.push(other.ws, driver.ws);
    // One leaves: its place is free again.
    open.shift().close();
    const t0 = Date.now();
    for (;;) {
      const j = await joinFrom('127.0.0.2', wsUrl(b, b.view_token));
      open.push(j.ws);
      if (j.msg.type === 'welcome') break;
      assert.ok(Date.now() - t0 < 10000, 'the place was not given back');
    }
  } finally {
    for (const ws of open) ws.terminate();
    assert.equal(await srv.stop(), 0);
  }
});

test('sessions are built off the HTTP threads: six large creates at once, /api/health answers throughout', { timeout: 120000 }, async () => {
  const srv = await startServer(['--dims', '16x16x8', '--max-elements', '3000000']);
  try {
    let worst = 0, polls = 0, building = true;
    const poller = (async () => {
      while (building) {
        const t0 = performance.now();
        assert.equal((await api(srv.base, 'GET', '/api/health')).status, 200);
        worst = Math.max(worst, performance.now() - t0);
        polls++;
        await new Promise((r) => setTimeout(r, 20));
      }
    })();
    const t0 = performance.now();
    const made = await Promise.all(Array.from({ length: 6 }, () => api(srv.base, 'POST', '/api/sessions', { dims: [160, 160, 96] })));
    const took = performance.now() - t0;
    building = false;
    await poller;
    for (const r of made) assert.equal(r.status, 201, r.text);
    console.log(`# six 160x160x96 sessions built in ${took.toFixed(0)} ms; /api/health asked ${polls} times, at worst ${worst.toFixed(0)} ms`);
    // Built on the HTTP threads, a health request would wait for a whole build (about a third
    // of the six, two at a time): the bound follows the machine's speed, not a fixed time.
    assert.ok(took > 600, `the builds were too quick (${took} ms) to show anything`);
    assert.ok(worst < Math.min(500, took / 4), `/api/health took ${worst} ms while six sessions were built in ${took} ms`);
    // Answered at once on request: 202 loading, then ready; a refused option then shows as
    // failed with its reason (the waiting request gets its 400 as before).
    const later = await api(srv.base, 'POST', '/api/sessions', { dims: [32, 32, 20] }, { prefer: 'respond-async' });
    assert.equal(later.status, 202, later.text);
    assert.equal(later.json.state, 'loading');
    assert.ok(later.json.control_token && later.json.join_url);
    for (const t1 = Date.now(); ;) {
      const g = await api(srv.base, 'GET', `/api/sessions/${later.json.id}`);
      if (g.json.state === 'ready') break;
      assert.equal(g.json.state, 'loading');
      assert.ok(Date.now() - t1 < 20000, 'never ready');
      await new Promise((r) => setTimeout(r, 20));
    }
    const bad = await api(srv.base, 'POST', '/api/sessions', { dims: [1, 2] }, { prefer: 'respond-async' });
    assert.equal(bad.status, 202);
    for (const t1 = Date.now(); ;) {
      const g = await api(srv.base, 'GET', `/api/sessions/${bad.json.id}`);
      if (g.json.state === 'failed') { assert.match(g.json.error, /dims/); break; }
      assert.ok(Date.now() - t1 < 20000, 'never failed');
      await new Promise((r) => setTimeout(r, 20));
    }
    const badSync = await api(srv.base, 'POST', '/api/sessions', { dims: [1, 2] });
    assert.equal(badSync.status, 400);
    assert.equal((await api(srv.base, 'GET', '/api/sessions')).json.sessions.filter((x) => x.state === 'failed').length, 1,
      'a refused request leaves nothing behind but the async one shown as failed');
  } finally {
    assert.equal(await srv.stop(), 0);
  }
});

test('a memory budget for all sessions: past it a session is refused, saying so; a deleted one frees its share', async () => {
  const srv = await startServer(['--dims', '16x16x8', '--memory-budget', '100']);
  try {
    const h0 = (await api(srv.base, 'GET', '/api/health')).json;
    assert.equal(h0.memory_budget_bytes, 100 << 20);
    // A 64^3 phantom session holds 74 bytes an element of state and its own model (4 bytes
    // an element and its surfaces): about 22 MiB; four fit in 100 MiB, the fifth does not.
    const made = [];
    let refused = null;
    for (let i = 0; i < 6 && !refused; i++) {
      const r = await api(srv.base, 'POST', '/api/sessions', { dims: [64, 64, 64] });
      if (r.status === 201) made.push(r.json);
      else refused = r;
    }
    assert.ok(refused, 'six sessions of 64^3 fit in 100 MiB');
    assert.equal(refused.status, 503, refused.text);
    assert.equal(refused.json.error, 'no room');
    assert.match(refused.json.detail, /this session needs \d+ MiB and sessions hold \d+ of the server's 100 MiB \(--memory-budget\)/);
    const h1 = (await api(srv.base, 'GET', '/api/health')).json;
    const each = h1.memory_in_use_bytes / made.length;
    assert.ok(each > 18 << 20 && each < 32 << 20, `${each} bytes a 64^3 session`);
    assert.ok(h1.memory_in_use_bytes + each > 100 << 20, 'refused with room for it');
    // The refused one left nothing behind; a small one still fits; a deleted one frees its share.
    assert.equal((await api(srv.base, 'GET', '/api/sessions')).json.sessions.length, made.length);
    const del = await api(srv.base, 'DELETE', `/api/sessions/${made[0].id}`, undefined, { authorization: `Bearer ${made[0].control_token}` });
    assert.equal(del.status, 204);
    for (const t0 = Date.now(); (await api(srv.base, 'GET', '/api/health')).json.memory_in_use_bytes > h1.memory_in_use_bytes - each / 2;) {
      assert.ok(Date.now() - t0 < 10000, 'the deleted session\'s bytes were not given back');
      await new Promise((r) => setTimeout(r, 20));
    }
    assert.equal((await api(srv.base, 'POST', '/api/sessions', { dims: [64, 64, 64] })).status, 201);
  } finally {
    assert.equal(await srv.stop(), 0);
  }
});

// Cloth and soft-body sessions are charged too, by what they allocate, judged against the
// server's resident memory (/proc: the ground truth): a 400-character crowd is charged as
// large as it may grow (every character blending between two LODs at the finest), at least
// what it made the server hold and at most three times it; a soft body of its own particles
// (not the shared one) what it holds, within 0.7 to 1.5 times. Past the budget, the next is
// refused.
test('cloth and soft-body sessions are charged to the memory budget, against the resident memory', async () => {
  // ASan's quarantine keeps what a build freed resident: without it, resident memory is what
  // the sessions hold (and ASan's shadow, an eighth more).
  const srv = await startServer(['--memory-budget', '120'], { env: { ASAN_OPTIONS: 'detect_leaks=1:abort_on_error=0:exitcode=23:quarantine_size_mb=0' } });
  const rss = () => Number(/VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${srv.proc.pid}/status`, 'utf8'))[1]) * 1024;
  const used = async () => (await api(srv.base, 'GET', '/api/health')).json.memory_in_use_bytes;
  try {
    const r0 = rss(), m0 = await used();
    const crowd = await api(srv.base, 'POST', '/api/sessions', { scene: 'cloth', characters: 400 });
    assert.equal(crowd.status, 201, crowd.text);
    const r1 = rss(), m1 = await used();
    const body = await api(srv.base, 'POST', '/api/sessions', { scene: 'softbody', model: 'surface', particles: 20000 });
    assert.equal(body.status, 201, body.text);
    const r2 = rss(), m2 = await used();
    console.log(`# charged: a crowd of 400 ${((m1 - m0) / 2 ** 20).toFixed(1)} MiB (resident +${((r1 - r0) / 2 ** 20).toFixed(1)}), ` +
      `a soft body of 20000 particles ${((m2 - m1) / 2 ** 20).toFixed(1)} MiB (resident +${((r2 - r1) / 2 ** 20).toFixed(1)})`);
    assert.ok(m1 - m0 >= r1 - r0 && m1 - m0 <= 3 * (r1 - r0), `crowd charged ${m1 - m0}, resident +${r1 - r0}`);
    assert.ok(m2 - m1 >= 0.7 * (r2 - r1) && m2 - m1 <= 1.5 * (r2 - r1), `soft body charged ${m2 - m1}, resident +${r2 - r1}`);
    // 120 MiB hold two crowds, not three.
    const second = await api(srv.base, 'POST', '/api/sessions', { scene: 'cloth', characters: 400 });
    assert.equal(second.status, 201, second.text);
    const third = await api(srv.base, 'POST', '/api/sessions', { scene: 'cloth', characters: 400 });
    assert.equal(third.status, 503, third.text);
    assert.match(third.json.detail, /memory budget: this session needs \d+ MiB/);
  } finally {
    assert.equal(await srv.stop(), 0);
  }
});
