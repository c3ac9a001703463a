// Sessions that survive a restart (issue 12, item 5; server/durable.c): with --state-dir,
// SIGTERM saves every session and a restart brings each back in its slot with its id, its
// tokens, its links and its state (the state hash the server had when it stopped); SIGKILL
// loses nothing acknowledged (the log is written before the frame that acknowledges it).
// Judged from outside: the links and tokens the first server handed out, the seqs its frames
// acknowledged, the shapes the client was sent.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { mkdtempSync, rmSync, readdirSync, existsSync, readFileSync, writeFileSync, cpSync, renameSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startServer, api, Client, wsUrl, tick, withTimeout, writeNifti1, waitReady } from './harness.mjs';

const DIMS = ['--dims', '24x24x16'];

// A server on the ports of one before it (the links name them), with the same state dir.
const restart = (first, dir, more = []) => startServer([...DIMS, '--state-dir', dir,
  '--http-port', String(first.info.http_port), '--ws-port', String(first.info.ws_port), ...more]);

// "session ID <what>: frame F, state hash H" from a server's stderr.
function logged(srv, id, what) {
  const m = srv.stderr().match(new RegExp(`session ${id} ${what}: frame (\\d+), state hash ([0-9a-f]{16})`));
  assert.ok(m, `no "${what}" line for ${id} in:\n${srv.stderr()}`);
  return { frame: Number(m[1]), hash: m[2] };
}

// A driver that grabs the block's side and drags it outward, a move each tick; returns the
// last seq its frames acknowledged.
async function drag(d, moves, seq0 = 1) {
  d.send({ type: 'grab', seq: seq0, point: [12, 20, 8], radius: 3, space: 'lattice' });
  for (let k = 1; k <= moves; k++) {
    d.send({ type: 'move', seq: seq0 + k, point: [12, 20 + 0.25 * k, 8], space: 'lattice' });
    await tick(20);
  }
  await d.until(() => d.frames.some((f) => f.lastSeq >= seq0 + moves), 10000, 'the drag acknowledged');
  return Math.max(...d.frames.map((f) => f.lastSeq));
}

const acked = (c) => Math.max(0, ...c.frames.map((f) => f.lastSeq));

test('SIGTERM mid-drag: the session comes back with the same state, links and tokens', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'softcast-state-'));
  try {
    const a = await startServer([...DIMS, '--state-dir', dir]);
    const s = (await api(a.base, 'POST', '/api/sessions', { preset: 'default' })).json;
    const d = await new Client(wsUrl(s, s.control_token)).open();
    await d.until(() => d.frames.length > 0, 10000, 'first frame');
    await drag(d, 12);
    for (let k = 0; k < 4; k++) d.send({ type: 'move', seq: 20 + k, point: [12, 24 + k, 8], space: 'lattice' });
    await d.until(() => d.frames.some((f) => f.lastSeq >= 20), 10000, 'a move of the last burst');
    const ackedBefore = acked(d);
    assert.equal(await a.stop(), 0, a.stderr()); // mid-drag: the grab is still held
    const saved = logged(a, s.id, 'saved');

    const b = await restart(a, dir);
    try {
      const back = logged(b, s.id, 'restored');
      assert.equal(back.hash, saved.hash, 'the state after the restart differs from the one saved');
      assert.equal(back.frame, saved.frame);
      const again = (await api(b.base, 'GET', `/api/sessions/${s.id}`)).json;
      assert.equal(again.ws_url, s.ws_url, 'the session\'s link changed');
      assert.equal(again.scene, 'volume');
      // The links handed out before the restart still work: the driver's and a viewer's.
      const d2 = await new Client(wsUrl(s, s.control_token)).open();
      const v2 = await new Client(wsUrl(s, s.view_token)).open();
      await d2.until(() => d2.frames.length > 0, 10000, 'a frame after the restart');
      assert.ok(d2.frames[0].lastSeq >= ackedBefore,
        `acknowledged seq ${ackedBefore} before the restart, ${d2.frames[0].lastSeq} after`);
      assert.ok(d2.frames[0].frame >= saved.frame);
      d2.send({ type: 'move', seq: 40, point: [12, 22, 8], space: 'lattice' }); // the grab held across
      await d2.until(() => d2.frames.some((f) => f.lastSeq >= 40), 10000, 'a move after the restart');
      await v2.until(() => v2.frames.length > 0, 10000, 'the viewer\'s frame');
      // A token it never had is still refused.
      const stranger = await new Client(wsUrl(s, 'f'.repeat(32))).open();
      assert.equal(await stranger.closed, 1008);
      assert.match(stranger.texts.find((t) => t.type === 'error').detail, /token/);
      await d2.close();
      await v2.close();
    } finally {
      assert.equal(await b.stop(), 0, b.stderr());
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

// A class's closed control (set_control) survives the server: it is in the snapshot taken
// at the next frame (the log holds events, not settings), so a crash right after still keeps
// it, and a student cannot take the session while the instructor reconnects.
test('closed control comes back after a crash: a student cannot take the session meanwhile', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'softcast-state-'));
  try {
    const a = await startServer([...DIMS, '--state-dir', dir]);
    let s;
    try {
      s = (await api(a.base, 'POST', '/api/sessions', {})).json;
      const d = await new Client(wsUrl(s, s.control_token)).open();
      await d.until(() => d.frames.length > 0, 10000, 'first frame');
      const snap = join(dir, 'sessions', s.id, 'snapshot');
      const before = existsSync(snap) ? readFileSync(snap) : Buffer.alloc(0);
      d.send({ type: 'set_control', seq: 1, open: false });
      await d.until(() => d.texts.filter((t) => t.type === 'state').at(-1)?.control_open === false, 5000, 'closed');
      for (const t0 = Date.now(); !existsSync(snap) || readFileSync(snap).equals(before); await tick(20))
        assert.ok(Date.now() - t0 < 10000, 'no snapshot after the setting changed');
    } finally {
      a.proc.kill('SIGKILL'); // the crash, or the end of a failed test
      await withTimeout(once(a.proc, 'exit'), 10000, 'killed');
    }
    const b = await restart(a, dir);
    try {
      const v = await new Client(wsUrl(s, s.view_token)).open();
      await v.until(() => v.texts.some((t) => t.type === 'state'), 10000, 'state');
      assert.equal(v.texts.filter((t) => t.type === 'state').at(-1).control_open, false);
      v.send({ type: 'request_control', seq: 1 });
      await v.until(() => v.texts.some((t) => t.error === 'control closed'), 5000, 'refused');
      await v.close();
    } finally {
      assert.equal(await b.stop(), 0, b.stderr());
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('SIGKILL: every acknowledged event comes back from the log; a deleted session does not', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'softcast-state-'));
  try {
    const a = await startServer([...DIMS, '--state-dir', dir]);
    const s = (await api(a.base, 'POST', '/api/sessions', {})).json;
    const gone = (await api(a.base, 'POST', '/api/sessions', {})).json;
    const del = await api(a.base, 'DELETE', `/api/sessions/${gone.id}`, undefined, { authorization: `Bearer ${gone.control_token}` });
    assert.equal(del.status, 204);
    const rest = await new Client(wsUrl(s, s.view_token)).open(); // the shape before the drag
    await rest.until(() => rest.frames.length > 0, 10000, 'first frame');
    const skin0 = rest.q[0].slice();
    await rest.close();
    const d = await new Client(wsUrl(s, s.control_token)).open();
    await d.until(() => d.frames.length > 0, 10000, 'first frame');
    const ackedBefore = await drag(d, 16);
    a.proc.kill('SIGKILL');
    await withTimeout(once(a.proc, 'exit'), 10000, 'killed');

    const b = await restart(a, dir);
    try {
      const m = b.stderr().match(new RegExp(`session ${s.id} restored: frame \\d+, state hash [0-9a-f]+, (\\d+) events replayed`));
      assert.ok(m, b.stderr());
      assert.ok(Number(m[1]) >= 17, `${m[1]} events replayed, 17 were acknowledged`);
      assert.equal((await api(b.base, 'GET', `/api/sessions/${gone.id}`)).status, 404, 'a deleted session came back');
      const d2 = await new Client(wsUrl(s, s.control_token)).open();
      await d2.until(() => d2.frames.length > 0, 10000, 'a frame after the restart');
      assert.ok(d2.frames[0].lastSeq >= ackedBefore, `acknowledged ${ackedBefore}, back at ${d2.frames[0].lastSeq}`);
      // The drag is in the shape the client is sent: the skin is not the one at rest.
      const skin = d2.q[0];
      assert.equal(skin.length, skin0.length);
      let moved = 0;
      for (let i = 0; i < skin.length; i++) moved = Math.max(moved, Math.abs(skin[i] - skin0[i]));
      assert.ok(moved > 0, 'the skin came back at rest: the drag was lost');
      await d2.close();
    } finally {
      assert.equal(await b.stop(), 0, b.stderr());
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('a damaged snapshot is set aside with the reason; the server and the other sessions start', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'softcast-state-'));
  try {
    const a = await startServer([...DIMS, '--state-dir', dir]);
    const good = (await api(a.base, 'POST', '/api/sessions', {})).json;
    const bad = (await api(a.base, 'POST', '/api/sessions', {})).json;
    assert.equal(await a.stop(), 0, a.stderr());
    const snap = join(dir, 'sessions', bad.id, 'snapshot');
    const bytes = readFileSync(snap);
    bytes[bytes.length >> 1] ^= 0xff;
    writeFileSync(snap, bytes);
    const b = await restart(a, dir);
    try {
      assert.match(b.stderr(), new RegExp(`session ${bad.id} cannot come back: snapshot: damaged`));
      assert.ok(existsSync(join(dir, 'failed', bad.id, 'snapshot')), 'the damaged session was not kept aside');
      assert.equal((await api(b.base, 'GET', `/api/sessions/${bad.id}`)).status, 404);
      assert.equal((await api(b.base, 'GET', `/api/sessions/${good.id}`)).status, 200);
      assert.deepEqual(readdirSync(join(dir, 'sessions')), [good.id]);
    } finally {
      assert.equal(await b.stop(), 0, b.stderr());
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('an uploaded CT comes back after a restart, read again from the copy kept for it', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'softcast-state-'));
  try {
    const file = join(dir, 'phantom.nii');
    writeNifti1(file, {
      dims: [20, 20, 12], spacing: [2, 2, 3], type: 'int16', sform: true,
      voxel: (x, y) => (Math.hypot(x - 10, y - 10) < 7 ? 40 : -1000), // a soft cylinder in air
    });
    const a = await startServer([...DIMS, '--state-dir', dir]);
    const up = await fetch(`${a.base}/api/volumes?name=cylinder.nii`, {
      method: 'POST', headers: { 'content-type': 'application/octet-stream' }, body: readFileSync(file),
    });
    const text = await up.text();
    assert.equal(up.status, 202, text);
    const s = JSON.parse(text);
    s.dims = (await waitReady(a.base, s.id)).dims;
    const d = await new Client(wsUrl(s, s.control_token)).open();
    await d.until(() => d.frames.length > 0, 30000, 'the upload loaded and framed').catch((e) => { throw new Error(`${e.message}: ${JSON.stringify(d.texts)}`); });
    d.send({ type: 'grab', seq: 1, point: [10, 16, 6], radius: 2, space: 'lattice' });
    d.send({ type: 'move', seq: 2, point: [10, 18, 6], space: 'lattice' });
    await d.until(() => d.frames.some((f) => f.lastSeq >= 2), 10000, 'the pull framed');
    assert.equal(await a.stop(), 0, a.stderr());
    const saved = logged(a, s.id, 'saved');
    assert.equal(readdirSync(join(dir, 'files')).length, 1, 'the upload was not kept');

    const b = await restart(a, dir);
    try {
      assert.equal(logged(b, s.id, 'restored').hash, saved.hash);
      const again = (await api(b.base, 'GET', `/api/sessions/${s.id}`, undefined, { authorization: `Bearer ${s.view_token}` })).json;
      assert.equal(again.state, 'ready');
      assert.equal(again.dataset.name, 'cylinder.nii', 'its name, to a token holder');
      assert.equal((await api(b.base, 'GET', `/api/sessions/${s.id}`)).json.dataset.name, 'an upload', 'an upload still');
      assert.deepEqual(again.dims, s.dims);
      const del = await api(b.base, 'DELETE', `/api/sessions/${s.id}`, undefined, { authorization: `Bearer ${s.control_token}` });
      assert.equal(del.status, 204);
    } finally {
      assert.equal(await b.stop(), 0, b.stderr());
    }
    assert.deepEqual(readdirSync(join(dir, 'files')), [], 'the deleted session\'s upload stayed');
    assert.deepEqual(readdirSync(join(dir, 'sessions')), []);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

// An operator copies a state directory (a backup, a move to another disk) and serves the
// copy: its sessions come back from its own kept files, and deleting one there leaves the
// original's file alone. A meta.json written with an absolute path (as before) is read by
// the file's name in the directory it is in.
test('a state directory copied or moved keeps its uploads: each copy reads and deletes its own files', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'softcast-state-'));
  const copy = `${dir}-copy`, moved = `${dir}-moved`;
  try {
    const file = join(dir, 'phantom.nii');
    writeNifti1(file, {
      dims: [20, 20, 12], spacing: [2, 2, 3], type: 'int16', sform: true,
      voxel: (x, y) => (Math.hypot(x - 10, y - 10) < 7 ? 40 : -1000),
    });
    const a = await startServer([...DIMS, '--state-dir', dir]);
    const up = await fetch(`${a.base}/api/volumes?name=cylinder.nii`, {
      method: 'POST', headers: { 'content-type': 'application/octet-stream' }, body: readFileSync(file),
    });
    assert.equal(up.status, 202);
    const s = await up.json();
    await waitReady(a.base, s.id);
    assert.equal(await a.stop(), 0, a.stderr());
    const [kept] = readdirSync(join(dir, 'files'));
    const meta = join('sessions', s.id, 'meta.json');
    assert.equal(JSON.parse(readFileSync(join(dir, meta))).file, kept, 'meta.json names the kept file by its name');
    rmSync(file);
    cpSync(dir, copy, { recursive: true });
    // The copy's meta.json as an older build wrote it: the original's absolute path.
    const m = JSON.parse(readFileSync(join(copy, meta)));
    m.file = join(dir, 'files', kept);
    writeFileSync(join(copy, meta), JSON.stringify(m));
    const b = await restart(a, copy);
    try {
      assert.equal((await api(b.base, 'GET', `/api/sessions/${s.id}`)).json.state, 'ready', b.stderr());
      const del = await api(b.base, 'DELETE', `/api/sessions/${s.id}`, undefined, { authorization: `Bearer ${s.control_token}` });
      assert.equal(del.status, 204);
    } finally {
      assert.equal(await b.stop(), 0, b.stderr());
    }
    assert.deepEqual(readdirSync(join(copy, 'files')), [], 'the copy\'s file stayed');
    assert.deepEqual(readdirSync(join(dir, 'files')), [kept], 'the copy deleted the original\'s file');
    // The original, moved elsewhere, still comes back.
    renameSync(dir, moved);
    const c = await restart(a, moved);
    try {
      assert.equal((await api(c.base, 'GET', `/api/sessions/${s.id}`)).json.state, 'ready', c.stderr());
    } finally {
      assert.equal(await c.stop(), 0, c.stderr());
    }
  } finally {
    for (const d of [dir, copy, moved]) rmSync(d, { recursive: true, force: true });
  }
});

test('every scene comes back: the cloth and the soft body too, moving, at the state they stopped in', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'softcast-state-'));
  try {
    const a = await startServer([...DIMS, '--state-dir', dir]);
    const made = [];
    for (const body of [{ scene: 'cloth' }, { scene: 'softbody' }]) {
      const r = await api(a.base, 'POST', '/api/sessions', body);
      assert.equal(r.status, 201, r.text);
      const c = await new Client(wsUrl(r.json, r.json.view_token)).open(); // watched: it steps
      await c.until(() => c.frames.length >= 5, 20000, `${body.scene} frames`);
      made.push({ s: r.json, c });
    }
    assert.equal(await a.stop(), 0, a.stderr());
    const b = await restart(a, dir);
    try {
      for (const { s } of made) {
        const saved = logged(a, s.id, 'saved'), back = logged(b, s.id, 'restored');
        assert.equal(back.hash, saved.hash, `${s.scene}: the state after the restart differs`);
        assert.ok(saved.frame >= 5);
        const c = await new Client(wsUrl(s, s.view_token)).open();
        await c.until(() => c.frames.length > 0, 20000, `${s.scene} frames after the restart`);
        assert.ok(c.frames[0].frame >= saved.frame);
        await c.close();
      }
    } finally {
      assert.equal(await b.stop(), 0, b.stderr());
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

// A session made on the server's default volume, and restarts with another default: it comes
// back on the one it was made on, as its own (the phantom of its dims, or the file, read again
// from where it was), with the state it was saved with; while the others' new sessions are
// made on the new default. A default file that is gone sets it aside, saying which file. A
// session kept before sessions kept their default (its meta.json without one) is set aside,
// naming the flags to start the server with.
test('a restart with another default volume builds the one each session was made on again', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'softcast-state-'));
  const ct = join(mkdtempSync(join(tmpdir(), 'softcast-ct-')), 'ct.nii');
  writeNifti1(ct, {
    dims: [20, 20, 12], spacing: [2, 2, 3], type: 'int16', sform: true,
    voxel: (x, y) => (Math.hypot(x - 10, y - 10) < 7 ? 40 : -1000), // a soft cylinder in air
  });
  const made = async (srv) => {
    const s = (await api(srv.base, 'POST', '/api/sessions', {})).json;
    const d = await new Client(wsUrl(s, s.control_token)).open();
    await d.until(() => d.frames.length > 0, 10000, 'first frame');
    d.send({ type: 'grab', seq: 1, point: [10, 16, 6], radius: 2, space: 'lattice' });
    d.send({ type: 'move', seq: 2, point: [10, 18, 6], space: 'lattice' });
    await d.until(() => d.frames.some((f) => f.lastSeq >= 2), 10000, 'the pull framed');
    await d.close();
    return s;
  };
  const dimsOf = async (srv, s) => (await api(srv.base, 'GET', `/api/sessions/${s.id}`)).json.dims;
  try {
    const a = await startServer([...DIMS, '--state-dir', dir]);
    const onPhantom = await made(a), older = await made(a);
    assert.equal(await a.stop(), 0, a.stderr());
    const metaFile = join(dir, 'sessions', older.id, 'meta.json');
    const meta = JSON.parse(readFileSync(metaFile, 'utf8'));
    assert.deepEqual(meta.default, { phantom: [24, 24, 16], preset: 'default' });
    delete meta.default;
    writeFileSync(metaFile, JSON.stringify(meta));
    const b = await startServer(['--volume', ct, '--state-dir', dir]);
    let onFile, fileDims;
    try {
      assert.equal(logged(b, onPhantom.id, 'restored').hash, logged(a, onPhantom.id, 'saved').hash);
      assert.deepEqual(await dimsOf(b, onPhantom), [24, 24, 16], 'its own phantom, as it was made');
      assert.equal((await api(b.base, 'GET', `/api/sessions/${onPhantom.id}`)).json.dataset.source, 'default',
        'still the default it was made on');
      assert.match(b.stderr(), new RegExp(`session ${older.id} cannot come back: snapshot: .*\\(the session was made on the server's default volume, which --volume, --dims and --fit-elements set: start the server with those it had\\)`));
      onFile = await made(b);
      fileDims = await dimsOf(b, onFile);
      assert.equal((await api(b.base, 'GET', `/api/sessions/${onFile.id}`)).json.dataset.format, 'nifti', 'a new session is on the new default');
    } finally {
      assert.equal(await b.stop(), 0, b.stderr());
    }
    const c = await startServer(['--dims', '32x32x16', '--state-dir', dir]);
    try {
      for (const s of [onPhantom, onFile])
        assert.equal(logged(c, s.id, 'restored').hash, logged(b, s.id, 'saved').hash, `session ${s.id}`);
      assert.deepEqual(await dimsOf(c, onFile), fileDims, 'the file it was made on, read again');
      const again = (await api(c.base, 'GET', `/api/sessions/${onFile.id}`)).json.dataset;
      assert.equal(again.format, 'nifti');
      assert.equal(again.source, 'default', 'still the default it was made on');
    } finally {
      assert.equal(await c.stop(), 0, c.stderr());
    }
    rmSync(ct);
    const e = await startServer(['--dims', '32x32x16', '--state-dir', dir]);
    try {
      logged(e, onPhantom.id, 'restored');
      assert.match(e.stderr(), new RegExp(`session ${onFile.id} cannot come back: .*ct\\.nii.*\\(the default volume it was made on\\)`));
      assert.equal((await api(e.base, 'GET', `/api/sessions/${onFile.id}`)).status, 404);
    } finally {
      assert.equal(await e.stop(), 0, e.stderr());
    }
    assert.deepEqual(readdirSync(join(dir, 'failed')).sort(), [older.id, onFile.id].sort());
  } finally {
    rmSync(dir, { recursive: true, force: true });
    rmSync(join(ct, '..'), { recursive: true, force: true });
  }
});
