// Recordings (issue 12, item 6; server/recording.c): the driver records a demonstration,
// downloads it as one file, and uploading that file makes a replay session whose viewers
// see the frames the original's viewers saw: the same frame numbers and, decoded, the same
// shapes, frame by frame; it ends at the same state hash; it pauses and seeks. Judged by a
// viewer of the original against a viewer of the replay, never by the server's own word.
// A session made from an uploaded CT is recorded with its file inside, so another server
// replays it; a recording running at a SIGTERM is stopped and kept with the session.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { startServer, api, Client, wsUrl, tick, waitReady, ctNifti, metric, uploadsIn } from './harness.mjs';

const stateOf = (c) => c.texts.filter((t) => t.type === 'state').at(-1);

// Every frame both saw, shape for shape; how many were compared.
function compare(orig, replay, from, to) {
  const byFrame = new Map(replay.frames.map((f) => [f.frame, f]));
  let same = 0, missing = 0;
  for (const f of orig.frames) {
    if (f.frame <= from || f.frame > to) continue;
    const g = byFrame.get(f.frame);
    if (!g) { missing++; continue; }
    for (let id = 0; id < f.q.length; id++)
      assert.deepEqual(Array.from(g.q[id] ?? []), Array.from(f.q[id] ?? []), `frame ${f.frame}, object ${id}`);
    same++;
  }
  return { same, missing };
}

// FNV-1a 64 (sc_hash_bytes): the file's and each record's checksum, to make crafted files
// that only their contents refuse.
function fnv64(bytes, h = 1469598103934665603n) { // SC_HASH_SEED
  for (const b of bytes) h = BigInt.asUintN(64, (h ^ BigInt(b)) * 0x100000001b3n);
  return h;
}
// A recording rebuilt with its header changed and bytes appended to its records.
function craft(file, edit, extra = Buffer.alloc(0)) {
  const jn = file.readUInt32LE(8);
  const head = JSON.parse(file.subarray(12, 12 + jn).toString());
  const rest = file.subarray(12 + jn, file.length - 8);
  edit(head);
  head.records_bytes += extra.length;
  const json = Buffer.from(JSON.stringify(head));
  const len = Buffer.alloc(4);
  len.writeUInt32LE(json.length);
  const body = Buffer.concat([file.subarray(0, 8), len, json, rest, extra]);
  const sum = Buffer.alloc(8);
  sum.writeBigUInt64LE(fnv64(body));
  return Buffer.concat([body, sum]);
}
// One record (server.h's srv_record, then its payload and checksum).
function record({ kind, frame, size = 0 }) {
  const h = Buffer.alloc(40);
  h.writeUInt32LE(0x56454353, 0); h.writeUInt32LE(size, 4);
  h.writeBigUInt64LE(999n, 8); h.writeBigUInt64LE(BigInt(frame), 16);
  h.writeUInt32LE(kind, 24);
  const payload = Buffer.alloc(size);
  const sum = Buffer.alloc(8);
  sum.writeBigUInt64LE(fnv64(payload, fnv64(h)));
  return Buffer.concat([h, payload, sum]);
}

const upload = (base, bytes) => fetch(`${base}/api/recordings`, {
  method: 'POST', headers: { 'content-type': 'application/octet-stream' }, body: bytes,
}).then(async (r) => ({ status: r.status, text: await r.text() }));

// A session made with no options, ready, with its driver and a viewer on their first frames.
async function plainSession(base) {
  const s = (await api(base, 'POST', '/api/sessions', {})).json;
  const v = await new Client(wsUrl(s, s.view_token)).open();
  const d = await new Client(wsUrl(s, s.control_token)).open();
  await d.until(() => d.frames.length > 0 && v.frames.length > 0, 10000, 'first frames');
  return { s, d, v };
}

test('a recorded drag replays frame for frame, ends at the same state, pauses and seeks', async () => {
  const srv = await startServer(['--dims', '24x24x16']);
  try {
    const { s, d, v } = await plainSession(srv.base);
    d.send({ type: 'record_start', seq: 1 });
    await d.until(() => d.texts.some((t) => t.type === 'recording' && t.state === 'recording'), 10000, 'recording');
    d.send({ type: 'set_params', seq: 2, params: { condition: 'B' } }); // it rings after the release
    d.send({ type: 'grab', seq: 3, point: [12, 20, 8], radius: 3, space: 'lattice' });
    for (let k = 1; k <= 12; k++) {
      d.send({ type: 'move', seq: 3 + k, point: [12, 20 + 0.3 * k, 8], space: 'lattice' });
      await tick(20);
    }
    d.send({ type: 'pause', seq: 20 });
    d.send({ type: 'resume', seq: 21 });
    d.send({ type: 'release', seq: 22 });
    await v.until(() => v.frames.some((f) => f.lastSeq >= 22), 10000, 'the release framed');
    const after = v.frames.length;
    await v.until(() => v.frames.length >= after + 20, 10000, 'the ringing framed');
    d.send({ type: 'record_stop', seq: 30 });
    await d.until(() => d.texts.some((t) => t.type === 'recording' && t.state === 'stopped'), 10000, 'stopped');
    const stopped = d.texts.find((t) => t.state === 'stopped');
    assert.ok(stopped.events >= 16, JSON.stringify(stopped));
    assert.equal((await fetch(`${srv.base}${stopped.download}`)).status, 403, 'downloaded without the control token');
    const got = await fetch(`${srv.base}${stopped.download}`, { headers: { authorization: `Bearer ${s.control_token}` } });
    assert.equal(got.status, 200);
    const file = Buffer.from(await got.arrayBuffer());
    assert.equal(file.length, stopped.bytes);
    await v.close();
    await d.close();

    // The replay: built from the file, paused at the recording's first frame.
    const up = await upload(srv.base, file);
    assert.equal(up.status, 202, up.text);
    const r = JSON.parse(up.text);
    const st = await waitReady(srv.base, r.id);
    assert.deepEqual([st.replay.start_frame, st.replay.end_frame], [stopped.start_frame, stopped.end_frame]);
    const v2 = await new Client(wsUrl(r, r.view_token)).open();
    const d2 = await new Client(wsUrl(r, r.control_token)).open();
    await d2.until(() => stateOf(d2), 10000, 'the replay\'s state');
    d2.send({ type: 'grab', seq: 1, point: [12, 20, 8], radius: 3, space: 'lattice' });
    await d2.until(() => d2.texts.some((t) => t.type === 'error' && t.error === 'a replay'), 10000, 'a grab refused');
    d2.send({ type: 'resume', seq: 2 });
    await v2.until(() => stateOf(v2)?.replay?.ended, 20000, 'the replay\'s end');
    assert.equal(stateOf(v2).replay.same_state, true, 'the replay ended at another state');
    const first = compare({ frames: v.frames }, v2, stopped.start_frame, stopped.end_frame);
    const inRange = v.frames.filter((f) => f.frame > stopped.start_frame && f.frame <= stopped.end_frame).length;
    assert.ok(first.same >= 0.8 * inRange && first.same >= 20, `${first.same} of ${inRange} frames compared`);

    // Seek back to five frames in, play again: the same frames again from there.
    const seekTo = stopped.start_frame + 5;
    const seen = v2.frames.length;
    d2.send({ type: 'seek', seq: 3, frame: seekTo });
    d2.send({ type: 'resume', seq: 4 });
    await v2.until(() => v2.frames.length > seen && stateOf(v2)?.replay?.ended && v2.frames.at(-1).frame === stopped.end_frame,
      20000, 'the replay\'s end after the seek').catch((e) => { throw new Error(`${e.message}: seen ${seen} now ${v2.frames.length} last ${v2.frames.at(-1).frame} end ${stopped.end_frame} state ${JSON.stringify(stateOf(v2).replay)} errs ${JSON.stringify(d2.texts.filter((t) => t.type === 'error'))}`); });
    const again = compare({ frames: v.frames }, { frames: v2.frames.slice(seen) }, seekTo, stopped.end_frame);
    assert.ok(again.same >= 10, `${again.same} frames compared after the seek`);
    assert.equal(stateOf(v2).replay.same_state, true);
    d2.send({ type: 'seek', seq: 5, frame: stopped.end_frame + 1 });
    await d2.until(() => d2.texts.some((t) => t.type === 'error' && t.error === 'bad seek'), 10000, 'a seek past the end refused');
    await v2.close();
    await d2.close();

    // Crafted files: sizes that would wrap or read past the file, a tick (a log's record, no
    // event of the scene), another backend: refused before anything is built.
    const checkOk = await upload(srv.base, craft(file, () => {}));
    assert.equal(checkOk.status, 202, `a file rebuilt unchanged is refused: ${checkOk.text}`);
    // Format 1 (before recordings carried a session's file) still reads.
    const v1 = await upload(srv.base, craft(file, (h) => { h.format = 1; delete h.source_bytes; delete h.source_z; }));
    assert.equal(v1.status, 202, `a format 1 recording is refused: ${v1.text}`);
    for (const [what, bytes, why] of [
      ['sizes that wrap', craft(file, (h) => { h.start_z = 18446744073709549568; }), /not a recording this server reads/],
      ['a huge starting state', craft(file, (h) => { h.start_bytes = 2 ** 40; }), /not a recording this server reads/],
      ['a carried file past the end', craft(file, (h) => { h.source_z = 64; h.source_name = 'x.nii'; }), /not a recording this server reads/],
      ['a carried file with no name', craft(file, (h) => { h.source_z = 8; h.records_bytes -= 8; }), /not a recording this server reads/],
      ['a tick', craft(file, () => {}, record({ kind: 0xffff, frame: stopped.end_frame })), /damaged/],
      ['an event past the end', craft(file, () => {}, record({ kind: 0, frame: stopped.end_frame + 1 })), /out of order/],
      ['another backend', craft(file, (h) => { h.backend = 'cuda'; }), /backend/],
    ]) {
      const r2 = await upload(srv.base, bytes);
      assert.equal(r2.status, 400, `${what}: ${r2.text}`);
      assert.match(JSON.parse(r2.text).detail, why, what);
    }
    // Options that are not an object (scenes read one) fail the replay's build, saying so.
    const arr = await upload(srv.base, craft(file, (h) => { h.options = ['dims', 24]; }));
    assert.equal(arr.status, 202, arr.text);
    const rid = JSON.parse(arr.text).id;
    let built;
    for (const t0 = Date.now(); Date.now() - t0 < 20000;) {
      built = (await api(srv.base, 'GET', `/api/sessions/${rid}`)).json;
      if (built.state !== 'loading') break;
      await tick(50); // polling the build, bounded
    }
    assert.equal(built.state, 'failed', JSON.stringify(built));
    assert.match(built.error, /options are not a JSON object/);
    // Files that are not recordings, or damaged ones, are refused by name.
    const junk = await upload(srv.base, Buffer.from('hello'));
    assert.equal(junk.status, 400);
    assert.match(JSON.parse(junk.text).detail, /not a Softcast recording/);
    const bad = Buffer.from(file);
    bad[bad.length >> 1] ^= 0x5a;
    const damaged = await upload(srv.base, bad);
    assert.equal(damaged.status, 400);
    assert.match(JSON.parse(damaged.text).detail, /damaged/);
  } finally {
    assert.equal(await srv.stop(), 0, srv.stderr());
  }
});

// The driver's recording of a drag, stopped once the viewer v has seen at least 20 of its
// frames (the count compared after, not left to the pace of the machine), downloaded:
// [stopped message, file bytes].
async function recordDrag(base, s, d, v, point, moves) {
  d.send({ type: 'record_start', seq: 1 });
  await d.until(() => d.texts.some((t) => t.type === 'recording' && t.state === 'recording'), 10000, 'recording');
  const from = d.texts.find((t) => t.type === 'recording' && t.state === 'recording').frame;
  d.send({ type: 'grab', seq: 2, point, radius: 3, space: 'lattice' });
  for (let k = 1; k <= moves; k++) {
    d.send({ type: 'move', seq: 2 + k, point: [point[0], point[1] + 0.3 * k, point[2]], space: 'lattice' });
    await tick(20);
  }
  d.send({ type: 'release', seq: 3 + moves });
  await d.until(() => d.frames.some((f) => f.lastSeq >= 3 + moves), 10000, 'the release framed');
  await v.until(() => v.frames.filter((f) => f.frame > from).length >= 20, 20000, '20 frames recorded');
  d.send({ type: 'record_stop', seq: 4 + moves });
  await d.until(() => d.texts.some((t) => t.type === 'recording' && t.state === 'stopped'), 20000, 'stopped');
  const stopped = d.texts.find((t) => t.state === 'stopped');
  const got = await fetch(`${base}${stopped.download}`, { headers: { authorization: `Bearer ${s.control_token}` } });
  assert.equal(got.status, 200);
  return [stopped, Buffer.from(await got.arrayBuffer())];
}

// A session made from a CT uploaded under name, ready, with its driver and a viewer on their
// first frames; and a point in its soft tissue (between the bone core and the skin).
async function ctSession(base, name, dims) {
  const r = await fetch(`${base}/api/volumes?name=${encodeURIComponent(name)}`, {
    method: 'POST', headers: { 'content-type': 'application/octet-stream' }, body: ctNifti(dims, [1, 1, 2]),
  });
  assert.equal(r.status, 202, await r.clone().text());
  const s = await r.json();
  const st = await waitReady(base, s.id);
  const v = await new Client(wsUrl(s, s.view_token)).open();
  const d = await new Client(wsUrl(s, s.control_token)).open();
  await d.until(() => d.frames.length > 0 && v.frames.length > 0, 20000, 'first frames');
  const [nx, ny, nz] = st.dims;
  return { s, d, v, soft: [nx / 2, Math.round(ny * 0.68), nz / 2] };
}

const headerOf = (file) => JSON.parse(file.subarray(12, 12 + file.readUInt32LE(8)).toString());

// Replayed on srv to its end: the replay's viewer (its frames), after checking the end state.
async function replayToEnd(srv, file) {
  const up = await upload(srv.base, file);
  assert.equal(up.status, 202, up.text);
  const r = JSON.parse(up.text);
  await waitReady(srv.base, r.id);
  const v = await new Client(wsUrl(r, r.view_token)).open();
  const d = await new Client(wsUrl(r, r.control_token)).open();
  await d.until(() => stateOf(d), 10000, 'the replay\'s state');
  d.send({ type: 'resume', seq: 1 });
  await v.until(() => stateOf(v)?.replay?.ended, 30000, 'the replay\'s end');
  assert.equal(stateOf(v).replay.same_state, true, 'the replay ended at another state');
  await d.close();
  await v.close();
  return v;
}

test('a session made from an uploaded CT is recorded with its file, and another server replays it', async () => {
  const a = await startServer([]);
  const b = await startServer([]); // its own upload directory: nothing of a's
  try {
    const ct = ctNifti([40, 40, 20], [1, 1, 2]);
    const { s, d, v, soft } = await ctSession(a.base, 'knee ct.nii', [40, 40, 20]);
    const [stopped, file] = await recordDrag(a.base, s, d, v, soft, 20);
    assert.equal(file.length, stopped.bytes);
    assert.equal(stopped.replayable, true);
    const head = headerOf(file);
    assert.equal(head.format, 2);
    assert.equal(head.source_name, 'knee_ct.nii');
    assert.equal(head.source_bytes, ct.length, 'the recording does not carry the whole file');
    await d.close();
    await v.close();

    const seen = await replayToEnd(b, file);
    const same = compare({ frames: v.frames }, seen, stopped.start_frame, stopped.end_frame);
    const inRange = v.frames.filter((f) => f.frame > stopped.start_frame && f.frame <= stopped.end_frame).length;
    assert.ok(same.same >= 0.8 * inRange && same.same >= 10, `${same.same} of ${inRange} frames compared`);
    assert.deepEqual(uploadsIn(b.info.upload_dir), [], 'the replay left the carried file behind');
  } finally {
    assert.equal(await a.stop(), 0, a.stderr());
    assert.equal(await b.stop(), 0, b.stderr());
  }
});

// Sessions stepped together (--step-batch: one worker steps the due sessions of a scene in
// one call, as the CUDA backend does in one batch of launches; here on the CPU, where the
// batch is stepped state by state) step each as it would alone: a drag recorded among three
// neighbours dragged at the same time, on one worker that batches them, replays on a server
// that steps one session at a time to the same frames and the same end state.
test('a session stepped in batches with its neighbours replays, stepped alone, to the same frames', { timeout: 90000 }, async () => {
  const dims = ['--dims', '24x24x16'];
  const a = await startServer([...dims, '--workers', '1', '--step-batch', '4']);
  const b = await startServer(dims);
  let dragging = true; // the neighbours' drag: stopped in finally too, or a failure hangs the run
  try {
    const neighbours = [];
    for (let k = 0; k < 3; k++) {
      const n = (await api(a.base, 'POST', '/api/sessions', {})).json;
      const c = await new Client(wsUrl(n, n.control_token), { decode: false }).open();
      c.send({ type: 'grab', seq: 1, point: [12, 20, 8], radius: 3, space: 'lattice' });
      neighbours.push(c);
    }
    let seq = 2;
    const drag = (async () => {
      while (dragging) {
        for (const c of neighbours)
          c.send({ type: 'move', seq, point: [12, 20 + (seq % 10) * 0.3, 8], space: 'lattice' });
        seq++;
        await tick(25);
      }
    })();
    const s = (await api(a.base, 'POST', '/api/sessions', {})).json;
    const v = await new Client(wsUrl(s, s.view_token)).open();
    const d = await new Client(wsUrl(s, s.control_token)).open();
    await d.until(() => d.frames.length > 0 && v.frames.length > 0, 10000, 'first frames');
    const [stopped, file] = await recordDrag(a.base, s, d, v, [12, 20, 8], 16);
    dragging = false;
    await drag;
    // The recorded session was stepped in batches (how many of its steps depends on the
    // machine's pace: the beats line up, but a late step may go alone).
    const batched = await metric(a.base, 'softcast_session_batched_steps_total', s.id);
    const frames = await metric(a.base, 'softcast_session_frames_total', s.id);
    console.log(`# batched: ${batched} of the recorded session's ${frames} steps`);
    assert.ok(batched > 0, `the recorded session's steps taken in batches: ${batched} of ${frames}`);
    for (const c of neighbours) await c.close();
    await d.close();
    await v.close();
    const seen = await replayToEnd(b, file);
    const same = compare({ frames: v.frames }, seen, stopped.start_frame, stopped.end_frame);
    const inRange = v.frames.filter((f) => f.frame > stopped.start_frame && f.frame <= stopped.end_frame).length;
    assert.ok(same.same >= 0.8 * inRange && same.same >= 10, `${same.same} of ${inRange} frames compared`);
  } finally {
    dragging = false;
    assert.equal(await a.stop(), 0, a.stderr());
    assert.equal(await b.stop(), 0, b.stderr());
  }
});

test('a recording running at a SIGTERM is stopped, kept with the session, and replays after the restart', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'softcast-state-'));
  const dims = ['--dims', '24x24x16'];
  try {
    const a = await startServer([...dims, '--state-dir', dir]);
    const s = (await api(a.base, 'POST', '/api/sessions', {})).json;
    const d = await new Client(wsUrl(s, s.control_token)).open();
    await d.until(() => d.frames.length > 0, 10000, 'first frame');
    d.send({ type: 'record_start', seq: 1 });
    await d.until(() => d.texts.some((t) => t.type === 'recording' && t.state === 'recording'), 10000, 'recording');
    d.send({ type: 'grab', seq: 2, point: [12, 20, 8], radius: 3, space: 'lattice' });
    for (let k = 1; k <= 10; k++) {
      d.send({ type: 'move', seq: 2 + k, point: [12, 20 + 0.3 * k, 8], space: 'lattice' });
      await tick(20);
    }
    await d.until(() => d.frames.some((f) => f.lastSeq >= 12), 10000, 'the drag framed');
    assert.equal(await a.stop(), 0, a.stderr()); // mid-drag, mid-recording
    const m = a.stderr().match(new RegExp(`session ${s.id}: its recording \\(frames (\\d+) to (\\d+)\\) stopped by the shutdown`));
    assert.ok(m, a.stderr());
    const saved = a.stderr().match(new RegExp(`session ${s.id} saved: frame (\\d+)`));
    assert.equal(Number(m[2]), Number(saved[1]), 'the recording ends where the session was saved');

    const b = await startServer([...dims, '--state-dir', dir, '--http-port', String(a.info.http_port),
      '--ws-port', String(a.info.ws_port)]);
    try {
      const again = (await api(b.base, 'GET', `/api/sessions/${s.id}`)).json;
      assert.equal(again.has_recording, true);
      const got = await fetch(`${b.base}/api/sessions/${s.id}/recording`, { headers: { authorization: `Bearer ${s.control_token}` } });
      assert.equal(got.status, 200);
      const file = Buffer.from(await got.arrayBuffer());
      const head = headerOf(file);
      assert.deepEqual([head.start_frame, head.end_frame], [Number(m[1]), Number(m[2])]);
      assert.ok(head.events >= 11, `${head.events} events`);
      await replayToEnd(b, file);
      // Deleted: the session's recording goes with its directory.
      const del = await api(b.base, 'DELETE', `/api/sessions/${s.id}`, undefined, { authorization: `Bearer ${s.control_token}` });
      assert.equal(del.status, 204, del.text);
      const sdir = path.join(dir, 'sessions', s.id);
      for (let k = 0; k < 200 && fs.existsSync(sdir); k++) await tick(25);
      assert.equal(fs.existsSync(sdir), false, `${sdir} outlived its session`);
    } finally {
      assert.equal(await b.stop(), 0, b.stderr());
    }
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test('a replay under --state-dir comes back after a restart with its id and tokens, at its first frame, and plays to the recorded end', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'softcast-state-'));
  const dims = ['--dims', '24x24x16'];
  try {
    const a = await startServer([...dims, '--state-dir', dir]);
    let r, head, file, held;
    try {
      // A session made from an uploaded CT: the recording carries its file, which a restart
      // unpacks again to build the replay.
      const { s, d, v, soft } = await ctSession(a.base, 'knee.nii', [24, 24, 16]);
      [, file] = await recordDrag(a.base, s, d, v, soft, 10);
      head = headerOf(file);
      assert.equal(head.source_name, 'knee.nii');
      await d.close();
      await v.close();
      const up = await upload(a.base, file);
      assert.equal(up.status, 202, up.text);
      r = JSON.parse(up.text);
      await waitReady(a.base, r.id);
      assert.ok(fs.existsSync(path.join(dir, 'files', `${r.id}.screc`)), 'the recording is not kept');
      held = (await api(a.base, 'GET', '/api/health')).json.memory_in_use_bytes;
    } finally {
      assert.equal(await a.stop(), 0, a.stderr());
    }
    assert.match(a.stderr(), new RegExp(`replay ${r.id} kept`));
    const b = await startServer([...dims, '--state-dir', dir, '--http-port', String(a.info.http_port),
      '--ws-port', String(a.info.ws_port)]);
    try {
      assert.match(b.stderr(), new RegExp(`replay ${r.id} restored`));
      const again = await api(b.base, 'GET', `/api/sessions/${r.id}`);
      assert.equal(again.status, 200, again.text);
      assert.equal(again.json.state, 'ready');
      assert.deepEqual([again.json.replay.start_frame, again.json.replay.end_frame], [head.start_frame, head.end_frame]);
      // Charged as before the restart: the CT's session, and the replay with its script.
      assert.equal((await api(b.base, 'GET', '/api/health')).json.memory_in_use_bytes, held);
      // The links handed out before work again: the driver resumes it to the recorded end.
      const v = await new Client(wsUrl(r, r.view_token)).open();
      const d = await new Client(wsUrl(r, r.control_token)).open();
      await d.until(() => stateOf(d)?.role === 'driver', 10000, 'the replay\'s driver');
      assert.equal(stateOf(d).paused, true, 'a restored replay waits at its first frame');
      d.send({ type: 'resume', seq: 1 });
      await v.until(() => stateOf(v)?.replay?.ended, 30000, 'the replay\'s end');
      assert.equal(stateOf(v).replay.same_state, true, 'the restored replay ended at another state');
      await d.close();
      await v.close();
      // Deleted: its kept recording and its directory go.
      const del = await api(b.base, 'DELETE', `/api/sessions/${r.id}`, undefined, { authorization: `Bearer ${r.control_token}` });
      assert.equal(del.status, 204, del.text);
      const sdir = path.join(dir, 'sessions', r.id), kept = path.join(dir, 'files', `${r.id}.screc`);
      for (let k = 0; k < 200 && (fs.existsSync(sdir) || fs.existsSync(kept)); k++) await tick(25);
      assert.equal(fs.existsSync(sdir) || fs.existsSync(kept), false, 'the replay outlived its deletion');
    } finally {
      assert.equal(await b.stop(), 0, b.stderr());
    }
    // A server that cannot build the file it carries (over its element limit, --fit-elements
    // 0): the replay fails with the reason; the server goes on.
    const c = await startServer(['--dims', '8x8x8', '--max-elements', '1000', '--fit-elements', '0']);
    try {
      const up = await upload(c.base, file);
      assert.equal(up.status, 202, up.text);
      const { id, control_token: token } = JSON.parse(up.text);
      let st;
      for (let k = 0; k < 400 && (st = (await api(c.base, 'GET', `/api/sessions/${id}?token=${token}`)).json)?.state === 'loading'; k++) await tick(25);
      assert.equal(st?.state, 'failed', JSON.stringify(st));
      assert.match(st.error, /1000/);
      assert.equal((await api(c.base, 'GET', '/api/health')).status, 200);
    } finally {
      assert.equal(await c.stop(), 0, c.stderr());
    }
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

// While a stopped recording is being written (on a builder, behind whatever builds were
// queued first), a new recording is refused with a reason, then taken once the file is out.
// Three large sessions queued on the two builders hold the write back: it cannot start
// until two of them are built, which the test checks after the refusal.
test('a recording started while the last one is still being written is refused, then taken', async () => {
  const srv = await startServer(['--dims', '24x24x16']);
  try {
    const s = (await api(srv.base, 'POST', '/api/sessions', {})).json;
    const d = await new Client(wsUrl(s, s.control_token)).open();
    await d.until(() => d.frames.length > 0, 10000, 'first frame');
    d.send({ type: 'record_start', seq: 1 });
    await d.until(() => d.texts.some((t) => t.type === 'recording' && t.state === 'recording'), 10000, 'recording');
    const big = [];
    for (let k = 0; k < 3; k++) {
      const r = await api(srv.base, 'POST', '/api/sessions', { dims: [160, 160, 96] }, { prefer: 'respond-async' });
      assert.equal(r.status, 202, r.text);
      big.push(r.json.id);
    }
    d.send({ type: 'record_stop', seq: 2 });
    d.send({ type: 'record_start', seq: 3 });
    await d.until(() => d.texts.some((t) => t.seq === 3), 10000, 'the answer to the second start');
    const states = [];
    for (const id of big) states.push((await api(srv.base, 'GET', `/api/sessions/${id}`)).json.state);
    assert.ok(states.every((st) => st === 'loading' || st === 'ready'), `builds: ${states}`);
    assert.ok(states.filter((st) => st === 'ready').length <= 1, `builds ${states} before the answer: the write was not held back`);
    const answer = d.texts.find((t) => t.seq === 3);
    assert.equal(answer.type, 'error', JSON.stringify(answer));
    assert.equal(answer.error, 'cannot record');
    assert.match(answer.detail, /still being written/);
    await d.until(() => d.texts.some((t) => t.type === 'recording' && t.state === 'stopped' && t.seq === 2), 30000, 'the file written');
    d.send({ type: 'record_start', seq: 4 });
    await d.until(() => d.texts.some((t) => t.seq === 4), 10000, 'the answer to the third start');
    assert.equal(d.texts.find((t) => t.seq === 4).state, 'recording');
  } finally {
    assert.equal(await srv.stop(), 0, srv.stderr());
  }
});

test('a replay\'s script and starting state are charged to the memory budget with its scene', async () => {
  const srv = await startServer(['--dims', '24x24x16']);
  try {
    const { s, d, v } = await plainSession(srv.base);
    const scene = (await api(srv.base, 'GET', '/api/health')).json.memory_in_use_bytes;
    assert.ok(scene > 0, 'the session is charged');
    const [, file] = await recordDrag(srv.base, s, d, v, [12, 20, 8], 8);
    const head = headerOf(file);
    assert.ok(head.records_bytes > 0 && head.start_bytes > 0, JSON.stringify(head));
    const up = await upload(srv.base, file);
    assert.equal(up.status, 202, up.text);
    await waitReady(srv.base, JSON.parse(up.text).id);
    // The replay holds a scene like the original's, and the recording's records and its
    // uncompressed starting state (the file's header says how many bytes each).
    const both = (await api(srv.base, 'GET', '/api/health')).json.memory_in_use_bytes;
    assert.equal(both - scene, scene + head.records_bytes + head.start_bytes,
      `charged ${both - scene} bytes for the replay: scene ${scene}, records ${head.records_bytes}, start ${head.start_bytes}`);
    await d.close();
    await v.close();
  } finally {
    assert.equal(await srv.stop(), 0);
  }
});

// A running recording holds its starting state (uncompressed) and its records: both are
// charged to --memory-budget with its session, the state and a first MiB of records at
// record_start, then a MiB at a time, and given back once the file is written. With no room
// for its state, record_start is refused; with no room for more records, the recording fills
// (it stops itself, as at 32 MiB of records) and says why. The budget is never passed.
test('a running recording is charged to the memory budget: refused without room, full at it, given back once written', async () => {
  const tight = await startServer(['--dims', '24x24x16', '--memory-budget', '3']);
  try {
    const { s, d, v } = await plainSession(tight.base); // its session holds about 2.7 MiB
    d.send({ type: 'record_start', seq: 1 });
    await d.until(() => d.texts.some((t) => t.type === 'error'), 10000, 'record_start refused');
    const no = d.texts.find((t) => t.type === 'error');
    assert.equal(no.error, 'cannot record');
    assert.match(no.detail, /memory budget: it needs 2 MiB more and sessions hold 2 of the server's 3 MiB \(--memory-budget\)/);
    await d.close();
    await v.close();
    await api(tight.base, 'DELETE', `/api/sessions/${s.id}`, undefined, { authorization: `Bearer ${s.control_token}` });
  } finally {
    assert.equal(await tight.stop(), 0);
  }
  const srv = await startServer(['--dims', '24x24x16', '--memory-budget', '5', '--max-events-per-s', '100000', '--rate', '120']);
  const used = async () => (await api(srv.base, 'GET', '/api/health')).json.memory_in_use_bytes;
  try {
    const { s, d, v } = await plainSession(srv.base);
    const scene = await used();
    d.send({ type: 'record_start', seq: 1 });
    await d.until(() => d.texts.some((t) => t.type === 'recording' && t.state === 'recording'), 10000, 'recording');
    const started = await used();
    d.send({ type: 'grab', seq: 2, point: [12, 12, 8], radius: 2, space: 'lattice' });
    // Moves as fast as the session takes them (each batch, well within the inbox's 16 KiB,
    // applied before the next is sent), until the recording fills (at most 60 s).
    let seq = 2, peak = started;
    const stopped = () => d.texts.find((t) => t.type === 'recording' && t.state === 'stopped');
    for (const t0 = performance.now(); !stopped();) {
      assert.ok(performance.now() - t0 < 60000, `the recording never filled: ${seq} moves sent`);
      for (let i = 0; i < 128; i++)
        d.send({ type: 'move', seq: ++seq, point: [12, 12 + Math.sin(seq / 50), 8], space: 'lattice' });
      const last = seq;
      await d.until(() => stopped() || d.frames.some((f) => f.lastSeq >= last), 20000, `move ${last} applied`);
      if (seq % 4096 < 128) peak = Math.max(peak, await used());
    }
    const end = stopped();
    const file = Buffer.from(await (await fetch(`${srv.base}${end.download}`, { headers: { authorization: `Bearer ${s.control_token}` } })).arrayBuffer());
    const head = headerOf(file);
    console.log(`# recording charged: its state ${head.start_bytes} bytes and a MiB at record_start; ` +
      `full at ${head.records_bytes} bytes of records (${end.events} events); the most held ${peak} of ${5 << 20}`);
    assert.equal(started - scene, head.start_bytes + (1 << 20), 'charged at record_start: its state and a MiB');
    assert.equal(end.full, true, JSON.stringify(end));
    assert.equal(end.full_why, "the server's memory budget (--memory-budget)");
    assert.ok(head.records_bytes > 1 << 20 && head.records_bytes <= (5 << 20) - started + (1 << 20), `${head.records_bytes} bytes of records`);
    assert.ok(peak <= 5 << 20, `held ${peak}, over the budget`);
    assert.equal(await used(), scene, 'written: what it held is given back');
    await d.close();
    await v.close();
  } finally {
    assert.equal(await srv.stop(), 0);
  }
});

// Until a replay's build ends: its session's state (polled, at most 20 s).
async function built(base, id) {
  for (const t0 = Date.now(); ; await tick(50)) {
    const st = (await api(base, 'GET', `/api/sessions/${id}`)).json;
    if (st.state !== 'loading' || Date.now() - t0 > 20000) return st;
  }
}

// A recording of a session on its server's default volume keeps which default (its header's
// "default"): on a server with another default, the replay is made on the phantom the
// original was, and ends at the recorded state. A default file it names is never read (a
// recording is anyone's upload): unless it is this server's own default, the build fails,
// saying so.
test('a recording made on the default volume replays on a server with another default', async () => {
  const a = await startServer(['--dims', '24x24x16']);
  let file;
  try {
    const { s, d, v } = await plainSession(a.base);
    [, file] = await recordDrag(a.base, s, d, v, [12, 20, 8], 8);
    await d.close();
    await v.close();
  } finally {
    assert.equal(await a.stop(), 0);
  }
  assert.deepEqual(headerOf(file).default, { phantom: [24, 24, 16], preset: 'default' });
  const b = await startServer(['--dims', '32x32x16']);
  try {
    const seen = await replayToEnd(b, file); // to the recorded end state
    assert.deepEqual(stateOf(seen).dims, [24, 24, 16], 'the phantom it was made on');
    // Defaults a recording may not have this server make: a file, a label map (each would be
    // read), a phantom over --max-elements (made before any check), a preset it does not know.
    for (const [def, why] of [
      [{ file: '/etc/passwd', series: '', fit: 4194304, preset: 'default' }, /made on another server's default volume \(\/etc\/passwd\), which this server does not have/],
      [{ phantom: [24, 24, 16], labels: '/etc/passwd', label_classes: '1=bone', preset: 'default' }, /made on another server's default volume \(\/etc\/passwd\)/],
      [{ phantom: [4096, 4096, 4096], preset: 'default' }, /not told as this server tells one, or is over --max-elements/],
      [{ phantom: [24, 24, 16], preset: 'bogus' }, /not told as this server tells one/],
    ]) {
      const named = await upload(b.base, craft(file, (h) => { h.default = def; }));
      assert.equal(named.status, 202, named.text);
      const st = await built(b.base, JSON.parse(named.text).id);
      assert.equal(st.state, 'failed', JSON.stringify(st));
      assert.match(st.error, why, JSON.stringify(def));
    }
  } finally {
    assert.equal(await b.stop(), 0);
  }
});
