// Volumes from users through the real HTTP API (server/upload.c): a NIfTI uploaded as the
// body of POST /api/volumes becomes a session that is "loading" at once and "ready" after,
// with the dataset told as it is and the file kept only while its session lives (a restart
// and a recording read it again); every bad upload is refused with its
// reason and leaves nothing behind (the server's private upload directory is looked into);
// --volume-dir lists what it keeps and starts sessions on it, by plain names only.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import zlib from 'node:zlib';
import { startServer, api, withTimeout, Client, ctNifti, wsUrl, heldPost, uploadsIn } from './harness.mjs';

const tmp = (p) => fs.mkdtempSync(path.join(os.tmpdir(), p));
const DATA = process.env.SOFTCAST_DATA ?? new URL('../../build/data', import.meta.url).pathname;

// One of pydicom's test files (DICOM made by others: tests/run-tests.sh fetches Debian's
// python3-pydicom into DATA/pydicom): its path, or why there is none (skip when no package
// registry could be reached; an error when the fetch broke although one answered).
function pydicom(name) {
  const p = path.join(DATA, 'pydicom', 'test_files', name);
  if (fs.existsSync(p)) return { path: p };
  const marker = path.join(DATA, 'pydicom', 'LIST.FETCH_FAILED');
  const why = fs.existsSync(marker) ? fs.readFileSync(marker, 'utf8').trim() : '';
  if (why.startsWith('reachable:')) throw new Error(`${name} missing although the registry answered: ${why}`);
  return { skip: why ? `${name} not fetched: ${why}` : `${name} not at ${p} (tests/run-tests.sh fetches it)` };
}

async function upload(base, name, body, type = 'application/octet-stream') {
  const r = await fetch(`${base}/api/volumes?name=${encodeURIComponent(name)}`, {
    method: 'POST', headers: { 'content-type': type }, body,
  });
  const text = await r.text();
  let json = null;
  try { json = JSON.parse(text); } catch { /* not JSON */ }
  if (json?.id) tokens.set(json.id, json.control_token);
  return { status: r.status, json, text };
}
const tokens = new Map(); // session id -> its control token, from the upload's answer

// Poll the session until it leaves "loading" (asked with its token, as its maker's page does:
// the name and a failure's reason are told to its token holders only); the stages seen.
async function settle(base, id, ms = 60000) {
  const stages = [];
  const deadline = Date.now() + ms;
  for (;;) {
    const r = await api(base, 'GET', `/api/sessions/${id}`, undefined,
      tokens.has(id) ? { authorization: `Bearer ${tokens.get(id)}` } : {});
    assert.equal(r.status, 200, r.text);
    if (r.json.state !== 'loading') return { ...r.json, stages };
    if (stages.at(-1) !== r.json.stage) stages.push(r.json.stage);
    if (Date.now() > deadline) throw new Error(`still loading: ${r.text}`);
    await new Promise((res) => setTimeout(res, 20));
  }
}

const leftIn = uploadsIn; // users' files left, not a running server's lock


test('upload: a NIfTI becomes a session, loading then ready, told as it is, its file kept while the session lives', async () => {
  const srv = await startServer([]);
  try {
    const dir = srv.info.upload_dir;
    assert.ok(dir && fs.statSync(dir).isDirectory(), `upload dir ${dir}`);
    assert.equal(fs.statSync(dir).mode & 0o077, 0, 'the upload directory is private');
    const body = ctNifti([96, 96, 40], [0.9, 0.9, 2.5]);
    const r = await upload(srv.base, 'abdomen ct.nii', body);
    assert.equal(r.status, 202, r.text);
    assert.equal(r.json.state, 'loading');
    assert.ok(r.json.control_token && r.json.view_token && r.json.control_url);
    assert.equal(r.json.dims, undefined, 'nothing about the volume before it is read');
    const s = await settle(srv.base, r.json.id);
    assert.equal(s.state, 'ready', JSON.stringify(s));
    assert.ok(s.stages.every((x) => ['queued', 'reading', 'fitting', 'body', 'surfaces'].includes(x)), s.stages.join());
    // 96 x 96 x 40 fits; the body runs the whole length, so 8 elements of air at each z end.
    assert.deepEqual(s.dims, [96, 96, 56]);
    assert.deepEqual(s.spacing.map((x) => Math.round(x * 100) / 100), [0.9, 0.9, 2.5]);
    assert.equal(s.dataset.name, 'abdomen_ct.nii');
    assert.equal(s.dataset.format, 'nifti');
    assert.deepEqual(s.dataset.stored_dims, [96, 96, 40]);
    assert.equal(s.dataset.fit_factor, 1);
    assert.deepEqual(s.dataset.hu_range, [-1000, 700]);
    const kept = leftIn(dir);
    assert.equal(kept.length, 1, `one file kept for the session: ${kept}`);
    assert.ok(kept[0].startsWith(`${r.json.id}-`) && kept[0].endsWith('.nii'), kept[0]);
    assert.equal(fs.statSync(path.join(dir, kept[0])).size, body.length);
    // The lobby's public list says the same but its name (its maker's: a file name may name
    // the patient), and the session drives like any other.
    const list = await api(srv.base, 'GET', '/api/sessions');
    const mine = list.json.sessions.find((x) => x.id === r.json.id);
    assert.equal(mine.state, 'ready');
    assert.equal(mine.dataset.name, 'an upload');
    assert.deepEqual(mine.dataset.stored_dims, [96, 96, 40]);
    const c = await new Client(`${r.json.ws_url}&token=${r.json.control_token}`).open();
    await c.until(() => c.frames.length > 0, 20000, 'a frame');
    assert.equal(c.texts.find((t) => t.type === 'state')?.dataset?.name, 'abdomen_ct.nii');
    c.ws.close();
    // Deleted: its file goes with it (the reaper frees it once its clients have left).
    const del = await api(srv.base, 'DELETE', `/api/sessions/${r.json.id}`, undefined, { authorization: `Bearer ${r.json.control_token}` });
    assert.equal(del.status, 204, del.text);
    for (let k = 0; k < 200 && leftIn(dir).length; k++) await new Promise((res) => setTimeout(res, 25));
    assert.deepEqual(leftIn(dir), [], 'the file outlived its session');
  } finally {
    assert.equal(await srv.stop(), 0, srv.stderr());
  }
});

test('upload: a file sent without its extension, or under a long name, is read as what its bytes say', async () => {
  const srv = await startServer([]);
  try {
    const nii = ctNifti([24, 24, 16], [1, 1, 2]);
    const long = `${'a'.repeat(2000)}.nii`; // longer than any buffer the server cleans it in
    const cases = [
      ['scan', nii, 'nifti'], // no extension
      ['scan', zlib.gzipSync(nii), 'nifti'], // gzip, no extension
      ['scan', zlib.gzipSync(ctNifti([16, 16, 8], [1, 1, 2])), 'nifti', [16, 16, 8]], // gzip shorter than a NIfTI header
      [long, nii, 'nifti'], // longer than a name is kept: the stem is cut, not the extension
      [null, nii, 'nifti'], // no name at all
    ];
    for (const [name, body, format, dims = [24, 24, 16]] of cases) {
      const r = name === null
        ? await fetch(`${srv.base}/api/volumes`, { method: 'POST', headers: { 'content-type': 'application/octet-stream' }, body })
          .then(async (x) => ({ status: x.status, text: await x.text() })).then((x) => ({ ...x, json: JSON.parse(x.text) }))
        : await upload(srv.base, name, body);
      if (r.json?.id) tokens.set(r.json.id, r.json.control_token);
      const label = `${name === null ? 'no name' : name.slice(0, 12)} (${body.length} bytes)`;
      assert.equal(r.status, 202, `${label}: ${r.text}`);
      const st = await settle(srv.base, r.json.id);
      assert.equal(st.state, 'ready', `${label}: ${JSON.stringify(st)}`);
      assert.equal(st.dataset.format, format, label);
      assert.deepEqual(st.dataset.stored_dims, dims, label);
      if (name === long) assert.ok(st.dataset.name.length < 128 && st.dataset.name.endsWith('.nii') && st.dataset.name.startsWith('aaaa'), st.dataset.name);
      // A name without an extension gains the one its bytes say: a recording carries the file
      // under that name, and the replay's reader goes by it.
      if (name === 'scan') assert.match(st.dataset.name, /^scan\.nii(\.gz)?$/, st.dataset.name);
      if (name === null) assert.equal(st.dataset.name, 'upload.nii');
      await api(srv.base, 'DELETE', `/api/sessions/${r.json.id}`, undefined, { authorization: `Bearer ${r.json.control_token}` });
    }
    // Bytes that say nothing are still refused, naming what the server reads.
    const t = await upload(srv.base, 'notes', Buffer.from('just some text, not a scan\n'.repeat(40)));
    assert.equal(t.status, 400, t.text);
    assert.match(t.json.detail, /NIfTI/);
  } finally {
    assert.equal(await srv.stop(), 0, srv.stderr());
  }
});

test('upload: every bad upload is refused with its reason, and nothing is left behind', async () => {
  const srv = await startServer(['--upload-limit', '2000000']);
  try {
    const dir = srv.info.upload_dir;
    const good = ctNifti([64, 64, 32], [1, 1, 2]);
    // Truncated: the header needs more bytes than came.
    let r = await upload(srv.base, 'cut.nii', good.subarray(0, 352 + 5000));
    assert.equal(r.status, 400, r.text);
    assert.match(r.json.detail, /^cut\.nii: truncated: the header needs 262496 bytes/);
    // Not a volume: random bytes called .nii, and a text file.
    const noise = Buffer.alloc(4000);
    for (let i = 0; i < noise.length; i++) noise[i] = (i * 7919 + 13) & 255;
    r = await upload(srv.base, 'noise.nii', noise);
    assert.equal(r.status, 400, r.text);
    assert.match(r.json.detail, /noise\.nii: not a NIfTI-1 file/);
    r = await upload(srv.base, 'notes.txt', Buffer.from('patient notes, not a scan\n'));
    assert.equal(r.status, 400, r.text);
    assert.match(r.json.detail, /notes\.txt: not a volume this server reads/);
    // A zip bomb: refused from its directory once whole, before anything is unpacked.
    r = await upload(srv.base, 'bomb.zip', zipBomb());
    assert.equal(r.status, 413, r.text);
    assert.match(r.json.detail, /bomb\.zip: a zip bomb: entry 0 expands \d+ times/);
    // Wrong content type (a form post from another page, say).
    r = await upload(srv.base, 'ct.nii', good, 'application/x-www-form-urlencoded');
    assert.equal(r.status, 415, r.text);
    assert.match(r.json.detail, /application\/octet-stream/);
    // Empty.
    r = await upload(srv.base, 'empty.nii', Buffer.alloc(0));
    assert.equal(r.status, 400, r.text);
    // Too large by its length: 413 before any of the body is sent.
    let raw = heldPost(srv.base, '/api/volumes?name=big.nii', { 'content-length': '50000000' });
    raw.req.flushHeaders();
    let res = await withTimeout(raw.response, 10000, '413 before the body');
    assert.equal(res.status, 413);
    assert.match(res.json.detail, /uploads are limited to 2000000 bytes/);
    raw.req.destroy();
    // Too large without a length (chunked): cut off once past the limit (MHD 0.9.75 can
    // answer nothing in the middle of a body, and nothing bounds this one).
    raw = heldPost(srv.base, '/api/volumes?name=big.nii', { 'transfer-encoding': 'chunked' });
    const chunk = Buffer.concat([good.subarray(0, 352), Buffer.alloc(65536 - 352)]);
    let sent = 0, closed = false;
    raw.req.on('error', () => { closed = true; });
    raw.req.on('close', () => { closed = true; });
    while (!closed && sent < 8000000) {
      raw.req.write(chunk);
      sent += chunk.length;
      await new Promise((res2) => setTimeout(res2, 2));
    }
    assert.ok(closed && sent < 8000000, `cut off after ${sent} bytes`);
    assert.match(srv.stderr(), /upload refused \(413\): more than 2000000 bytes/);
    raw.req.destroy();
    // Refused from its first bytes: a header that declares 5000 x 100 x 100 (over 4096 a
    // side) is refused, its file removed, before the rest of the body is sent; the rest is
    // read and dropped, and the reason comes at its end.
    const bad = Buffer.from(good.subarray(0, 352));
    bad.writeInt16LE(5000, 42); bad.writeInt16LE(100, 44); bad.writeInt16LE(100, 46);
    raw = heldPost(srv.base, '/api/volumes?name=huge.nii', { 'content-length': String(1500000) });
    raw.req.write(Buffer.concat([bad, Buffer.alloc(100000 - 352)]));
    const deadline = Date.now() + 10000;
    while (!/upload refused \(\d+\): huge\.nii/.test(srv.stderr()) && Date.now() < deadline)
      await new Promise((res2) => setTimeout(res2, 10));
    assert.match(srv.stderr(), /upload refused \(413\): huge\.nii: .*5000/);
    assert.deepEqual(leftIn(dir), [], 'refused from the header: its file is gone at once');
    raw.req.end(Buffer.alloc(1500000 - 100000));
    res = await withTimeout(raw.response, 10000, 'the reason');
    assert.equal(res.status, 413);
    assert.match(res.json.detail, /huge\.nii: .*5000/);
    // A .nii.gz cut short passes its header check; its load fails with the reader's words.
    const gz = zlib.gzipSync(good);
    r = await upload(srv.base, 'cut.nii.gz', gz.subarray(0, gz.length >> 1));
    assert.equal(r.status, 202, r.text);
    const s = await settle(srv.base, r.json.id);
    assert.equal(s.state, 'failed');
    assert.match(s.error, /^cut\.nii\.gz: truncated or corrupt/);
    assert.ok(!s.error.includes(dir), 'our file names stay ours');
    // Nobody joins a session without its scene.
    const c = await new Client(`${r.json.ws_url}&token=${r.json.control_token}`).open();
    await c.until(() => c.texts.some((t) => t.type === 'error'), 10000, 'a refusal');
    assert.equal(c.texts[0].error, 'refused');
    assert.match(c.texts[0].detail, /the session's volume could not be loaded/);
    c.ws.close();
    // Nothing left: no file, no session but the failed one.
    await new Promise((res2) => setTimeout(res2, 200));
    assert.deepEqual(leftIn(dir), []);
    const list = await api(srv.base, 'GET', '/api/sessions');
    assert.deepEqual(list.json.sessions.map((x) => x.state), ['failed']);
    assert.equal((await api(srv.base, 'GET', '/api/health')).status, 200);
  } finally {
    assert.equal(await srv.stop(), 0, srv.stderr());
  }
});

test('upload: a file that crashes the reader fails its own session; the server and its other sessions go on', async (t) => {
  // pydicom's DICOMDIR-nooffset makes Debian 12's GDCM (3.0.21) assert as it reads the file's
  // meta header: read in the server's own process, it took the server and every session down.
  const f = pydicom('dicomdirtests/DICOMDIR-nooffset');
  if (f.skip) return t.skip(f.skip);
  const tmpdir = tmp('softcast-reader-test-');
  const srv = await startServer([], { env: { TMPDIR: tmpdir } });
  try {
    const other = await api(srv.base, 'POST', '/api/sessions', { scene: 'volume', dims: [24, 24, 16] });
    assert.equal(other.status, 201, other.text);
    const r = await upload(srv.base, 'scan.zip', zipStored([['DICOMDIR', fs.readFileSync(f.path)]]));
    assert.equal(r.status, 202, r.text);
    const s = await settle(srv.base, r.json.id);
    assert.equal(s.state, 'failed', JSON.stringify(s));
    assert.match(s.error, /^scan\.zip: the reader stopped on this file \(signal SIGABRT\): it is malformed/);
    assert.equal(srv.proc.exitCode, null, `the server died with its reader: ${srv.stderr()}`);
    // The other user's session still serves: a client joins and gets its frame.
    const c = await new Client(wsUrl(other.json, other.json.control_token)).open();
    await c.until(() => c.frames.length > 0, 20000, 'the other session\'s first frame');
    await c.close();
    // Nothing of the read is left: not the reader's private folder (with the zip unpacked
    // in it), not the upload.
    const left = fs.readdirSync(tmpdir);
    assert.deepEqual(left.filter((e) => !e.startsWith('softcast-uploads-')), [], `left in TMPDIR: ${left}`);
    for (const u of left) assert.deepEqual(leftIn(path.join(tmpdir, u)), [], `left in ${u}`);
  } finally {
    assert.equal(await srv.stop(), 0, srv.stderr());
    fs.rmSync(tmpdir, { recursive: true, force: true });
  }
});

// A zip of stored (uncompressed) entries, [name, bytes] each.
function zipStored(entries) {
  const parts = [], central = [];
  let off = 0;
  for (const [n, data] of entries) {
    const name = Buffer.from(n), crc = zlib.crc32(data);
    const local = Buffer.alloc(30);
    local.writeUInt32LE(0x04034b50, 0); local.writeUInt16LE(20, 4);
    local.writeUInt32LE(crc, 14); local.writeUInt32LE(data.length, 18); local.writeUInt32LE(data.length, 22);
    local.writeUInt16LE(name.length, 26);
    const cd = Buffer.alloc(46);
    cd.writeUInt32LE(0x02014b50, 0); cd.writeUInt16LE(20, 4); cd.writeUInt16LE(20, 6);
    cd.writeUInt32LE(crc, 16); cd.writeUInt32LE(data.length, 20); cd.writeUInt32LE(data.length, 24);
    cd.writeUInt16LE(name.length, 28); cd.writeUInt32LE(off, 42);
    parts.push(local, name, data);
    central.push(cd, name);
    off += 30 + name.length + data.length;
  }
  const cdBytes = Buffer.concat(central), end = Buffer.alloc(22);
  end.writeUInt32LE(0x06054b50, 0); end.writeUInt16LE(entries.length, 8); end.writeUInt16LE(entries.length, 10);
  end.writeUInt32LE(cdBytes.length, 12); end.writeUInt32LE(off, 16);
  return Buffer.concat([...parts, cdBytes, end]);
}

// A zip of one entry whose headers declare 4 GiB uncompressed (deflate, 22 bytes of data).
// A zip bomb, well formed: one entry of 64 MiB of zeros deflated to about 64 KiB (1000
// times), which the zip's own directory declares.
function zipBomb() {
  const raw = Buffer.alloc(64 << 20), data = zlib.deflateRawSync(raw, { level: 9 });
  const name = Buffer.from('slice0001.dcm'), crc = zlib.crc32(raw);
  const local = Buffer.alloc(30);
  local.writeUInt32LE(0x04034b50, 0); local.writeUInt16LE(20, 4); local.writeUInt16LE(8, 8);
  local.writeUInt32LE(crc, 14); local.writeUInt32LE(data.length, 18); local.writeUInt32LE(raw.length, 22);
  local.writeUInt16LE(name.length, 26);
  const central = Buffer.alloc(46);
  central.writeUInt32LE(0x02014b50, 0); central.writeUInt16LE(20, 4); central.writeUInt16LE(20, 6);
  central.writeUInt16LE(8, 10); central.writeUInt32LE(crc, 16); central.writeUInt32LE(data.length, 20);
  central.writeUInt32LE(raw.length, 24); central.writeUInt16LE(name.length, 28);
  const end = Buffer.alloc(22);
  const cdOff = 30 + name.length + data.length;
  end.writeUInt32LE(0x06054b50, 0); end.writeUInt16LE(1, 8); end.writeUInt16LE(1, 10);
  end.writeUInt32LE(46 + name.length, 12); end.writeUInt32LE(cdOff, 16);
  return Buffer.concat([local, name, data, central, name, end]);
}

test('upload: --volume-dir keeps uploads under safe names, lists its volumes, and starts sessions on plain names only', async () => {
  const vdir = tmp('softcast-vols-'), outside = tmp('softcast-outside-');
  fs.writeFileSync(path.join(vdir, 'chest.nii'), ctNifti([48, 48, 24], [1, 1, 2]));
  fs.writeFileSync(path.join(vdir, '.hidden.nii'), ctNifti([16, 16, 8], [1, 1, 1]));
  fs.writeFileSync(path.join(vdir, 'readme.txt'), 'not a volume');
  fs.writeFileSync(path.join(outside, 'secret.nii'), ctNifti([16, 16, 8], [1, 1, 1]));
  fs.symlinkSync(path.join(outside, 'secret.nii'), path.join(vdir, 'link.nii'));
  const srv = await startServer(['--volume-dir', vdir]);
  try {
    let v = await api(srv.base, 'GET', '/api/volumes');
    assert.equal(v.status, 200, v.text);
    assert.equal(v.json.kept, true);
    assert.deepEqual(v.json.volumes, [{ name: 'chest.nii', size: fs.statSync(path.join(vdir, 'chest.nii')).size, format: 'nifti' }]);
    // A session on a kept volume: loading, then ready; the file stays.
    const r = await api(srv.base, 'POST', '/api/sessions', { scene: 'volume', volume: 'chest.nii' });
    assert.equal(r.status, 202, r.text);
    assert.equal(r.json.state, 'loading');
    const s = await settle(srv.base, r.json.id);
    assert.equal(s.state, 'ready', JSON.stringify(s));
    assert.equal(s.dataset.name, 'chest.nii');
    assert.deepEqual(s.dataset.stored_dims, [48, 48, 24]);
    assert.ok(fs.existsSync(path.join(vdir, 'chest.nii')));
    // Names that are not plain names there are refused, and nothing is read.
    for (const [name, status] of [['../' + path.basename(outside) + '/secret.nii', 400],
      ['link.nii', 404], ['.hidden.nii', 400], ['readme.txt', 404], ['none.nii', 404], ['', 400]]) {
      const x = await api(srv.base, 'POST', '/api/sessions', { scene: 'volume', volume: name });
      assert.equal(x.status, status, `${name}: ${x.text}`);
    }
    const x = await api(srv.base, 'POST', '/api/sessions', { scene: 'volume', volume: 'chest.nii', dims: [8, 8, 8] });
    assert.equal(x.status, 400, x.text);
    // An upload is kept under a name of its own, and listed; the lobby's name is cleaned.
    const u = await upload(srv.base, '../../evil name.nii', ctNifti([32, 32, 16], [1, 1, 2]));
    assert.equal(u.status, 202, u.text);
    assert.equal((await settle(srv.base, u.json.id)).state, 'ready');
    v = await api(srv.base, 'GET', '/api/volumes');
    const kept = v.json.volumes.map((e) => e.name).filter((n) => n !== 'chest.nii');
    assert.equal(kept.length, 1, JSON.stringify(v.json));
    assert.match(kept[0], /^_.*evil_name-[0-9a-f]{6}\.nii$/);
    assert.deepEqual(fs.readdirSync(vdir).filter((n) => n.startsWith('.upload')), []);
    assert.deepEqual(leftIn(outside), ['secret.nii']);
  } finally {
    assert.equal(await srv.stop(), 0, srv.stderr());
    fs.rmSync(vdir, { recursive: true, force: true });
    fs.rmSync(outside, { recursive: true, force: true });
  }
});


// /api/health's count of bodies arriving, polled until it is n (bounded).
async function arrivingIs(base, n, what) {
  const deadline = Date.now() + 10000;
  for (;;) {
    const h = (await api(base, 'GET', '/api/health')).json;
    if (h.uploads_arriving === n) return h;
    if (Date.now() > deadline) throw new Error(`${what}: ${h.uploads_arriving} bodies arriving, not ${n}`);
    await new Promise((res) => setTimeout(res, 20));
  }
}

test('upload: bodies arriving take places: two per address at once (uploads and recordings alike), a trickle cut off, each place given back', async () => {
  const srv = await startServer(['--upload-limit', '4000000']);
  const A = '127.0.0.3', B = '127.0.0.4';
  const held = [];
  try {
    // Two bodies from A, an upload (a CT whose header passed the check) and a recording,
    // each part sent and held there.
    const ct = ctNifti([64, 64, 32], [1, 1, 2]);
    for (const [p, body] of [['/api/volumes?name=a.nii', ct], ['/api/recordings', Buffer.alloc(1000000)]]) {
      const h = heldPost(srv.base, p, { 'content-length': String(body.length) }, { localAddress: A });
      h.req.write(body.subarray(0, 100000));
      held.push(h);
    }
    await arrivingIs(srv.base, 2, 'two held from A');
    // A third from A waits for neither: 429 at once, for an upload or a recording.
    for (const p of ['/api/volumes?name=c.nii', '/api/recordings']) {
      const third = heldPost(srv.base, p, { 'content-length': '1000' }, { localAddress: A });
      third.req.flushHeaders();
      const r = await withTimeout(third.response, 5000, `a third body from A (${p})`);
      assert.equal(r.status, 429, JSON.stringify(r.json));
      assert.match(r.json.detail, /2 uploads from this address are arriving already/);
      third.req.destroy();
    }
    // B is not held up by A: its file arrives and is read (and refused, for what it is).
    let r = await upload(srv.base, 'notes.txt', Buffer.from('not a scan'));
    assert.equal(r.status, 400, r.text);
    // A's bodies dropped by their client: their places come back, and A's next is read.
    for (const h of held) h.req.destroy();
    assert.equal((await arrivingIs(srv.base, 0, 'A\'s places given back')).uploads_in_flight, 0);
    r = await upload(srv.base, 'notes.txt', Buffer.from('not a scan either'));
    assert.equal(r.status, 400, r.text);
    // B trickles an upload and a recording, 1 KB every 250 ms (4 KB/s): each cut off once
    // the grace of 10 s is over (before the idle timeout could: it never idles 10 s), its
    // place given back.
    const t0 = Date.now();
    const trickles = ['/api/volumes?name=slow.nii', '/api/recordings'].map((p) => {
      const h = heldPost(srv.base, p, { 'content-length': String(ct.length) }, { localAddress: B });
      let at = 0;
      const timer = setInterval(() => { h.req.write(ct.subarray(at, at + 1000)); at += 1000; }, 250);
      h.closed.then(() => clearInterval(timer));
      return h;
    });
    await arrivingIs(srv.base, 2, 'B\'s two trickles');
    await withTimeout(Promise.all(trickles.map((h) => h.closed)), 30000, 'the trickles cut off');
    const took = Date.now() - t0;
    assert.ok(took >= 9500 && took < 25000, `cut off after ${took} ms`);
    assert.equal((await arrivingIs(srv.base, 0, 'the trickles\' places given back')).uploads_in_flight, 0);
  } finally {
    for (const h of held) h.req.destroy();
    assert.equal(await srv.stop(), 0);
  }
});

// Files accepted then failed (one DICOM slice: not a volume) count against the address's
// sessions while they are listed with why; the refusal says so, and deleting one makes room.
test('upload: failed sessions count against the address until freed, and the refusal says so', async (t) => {
  const slice = pydicom('CT_small.dcm');
  if (slice.skip) return t.skip(slice.skip);
  const srv = await startServer(['--max-sessions-per-address', '2']);
  try {
    const made = [];
    for (let k = 0; k < 2; k++) {
      const r = await upload(srv.base, 'slice.dcm', fs.readFileSync(slice.path));
      assert.equal(r.status, 202, r.text);
      const st = await settle(srv.base, r.json.id);
      assert.equal(st.state, 'failed', JSON.stringify(st));
      made.push(r.json);
    }
    let r = await upload(srv.base, 'slice.dcm', fs.readFileSync(slice.path));
    assert.equal(r.status, 429, r.text);
    assert.match(r.json.detail, /holds its limit of 2 sessions .*; 2 of them failed, and each is freed 60 s after it failed \(or delete it\)/);
    const del = await api(srv.base, 'DELETE', `/api/sessions/${made[0].id}`, undefined, { authorization: `Bearer ${made[0].control_token}` });
    assert.equal(del.status, 204, del.text);
    r = await upload(srv.base, 'slice.dcm', fs.readFileSync(slice.path));
    assert.equal(r.status, 202, r.text);
  } finally {
    assert.equal(await srv.stop(), 0);
  }
});

// A file's name may name the patient ("Doe_Jane_1961-04-02.nii"): the public list and a
// look at the session without its token say "an upload", and a failed load's reason stays
// with its maker too. Its token holders (Bearer or ?token=) and the operator's key see
// them; a file of --volume-dir (the operator's library, listed publicly) keeps its name.
test('an upload\'s name and its failure are told to its token holders and the operator only', async () => {
  const dir = tmp('softcast-key-');
  const keyFile = path.join(dir, 'key');
  fs.writeFileSync(keyFile, 'k'.repeat(32) + '\n', { mode: 0o600 });
  const srv = await startServer(['--dims', '16x16x8', '--api-key-file', keyFile]);
  const operator = { authorization: `Bearer ${'k'.repeat(32)}` };
  const send = (name, body) => fetch(`${srv.base}/api/volumes?name=${encodeURIComponent(name)}`, {
    method: 'POST', headers: { 'content-type': 'application/octet-stream', ...operator }, body,
  }).then(async (r) => ({ status: r.status, json: await r.json() }));
  try {
    const up = await send('Doe_Jane_1961-04-02.nii', ctNifti([24, 24, 12], [1, 1, 2]));
    assert.equal(up.status, 202, JSON.stringify(up.json));
    const gz = zlib.gzipSync(ctNifti([24, 24, 12], [1, 1, 2])); // cut short: its load fails
    const bad = await send('Roe_Richard_1950.nii.gz', gz.subarray(0, gz.length >> 1));
    assert.equal(bad.status, 202, JSON.stringify(bad.json));
    for (const [u, state] of [[up, 'ready'], [bad, 'failed']]) {
      tokens.set(u.json.id, u.json.control_token);
      assert.equal((await settle(srv.base, u.json.id)).state, state);
    }
    const one = (u, headers = {}, q = '') => api(srv.base, 'GET', `/api/sessions/${u.json.id}${q}`, undefined, headers).then((r) => r.json);
    const list = (headers = {}) => api(srv.base, 'GET', '/api/sessions', undefined, headers).then((r) => r.text);
    const publicList = await list();
    assert.doesNotMatch(publicList, /Doe|Jane|1961|Roe|Richard/, publicList);
    assert.equal((await one(up)).dataset.name, 'an upload');
    const failed = await one(bad);
    assert.doesNotMatch(JSON.stringify(failed), /Roe|Richard/);
    assert.match(failed.error, /its session's token tells why/);
    // Its token holders, the viewer's too, and the operator see them.
    assert.equal((await one(up, { authorization: `Bearer ${up.json.view_token}` })).dataset.name, 'Doe_Jane_1961-04-02.nii');
    assert.equal((await one(up, {}, `?token=${up.json.control_token}`)).dataset.name, 'Doe_Jane_1961-04-02.nii');
    assert.doesNotMatch((await one(bad, {}, `?token=${bad.json.control_token}`)).error, /token tells why/);
    assert.equal((await one(up, { authorization: `Bearer ${bad.json.control_token}` })).dataset.name, 'an upload', 'another session\'s token');
    assert.match(await list(operator), /Doe_Jane_1961-04-02\.nii/);
    // A phantom's name is no user's.
    const ph = await api(srv.base, 'POST', '/api/sessions', { dims: [16, 16, 8] }, operator);
    assert.equal((await one(ph)).dataset.name, 'phantom');
  } finally {
    assert.equal(await srv.stop(), 0, srv.stderr());
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

// A server killed outright (no clean-up) leaves its upload directory, and in it the files
// kept for its sessions: its users' scans. The next server started on the same TMPDIR
// removes it (its lock is free) and says so; a running server's directory is left alone.
test('a crashed server\'s uploads are removed by the next server to start; a running one\'s are kept', async () => {
  const tmpdir = tmp('softcast-crash-');
  const servers = [];
  const start = async () => { const x = await startServer([], { env: { TMPDIR: tmpdir } }); servers.push(x); return x; };
  try {
    const a = await start();
    const r = await upload(a.base, 'Doe_Jane.nii', ctNifti([24, 24, 16], [1, 1, 2]));
    assert.equal(r.status, 202, r.text);
    assert.equal((await settle(a.base, r.json.id)).state, 'ready');
    const crashed = a.info.upload_dir;
    assert.ok(fs.readdirSync(crashed).some((f) => f.startsWith(r.json.id) && f.endsWith('.nii')), 'the scan kept while its session lives');
    a.proc.kill('SIGKILL');
    await withTimeout(new Promise((res) => a.proc.once('exit', res)), 10000, 'the kill');
    servers.shift();
    assert.ok(fs.existsSync(crashed), 'a killed server cleans nothing up');
    const b = await start();
    assert.ok(!fs.existsSync(crashed), 'the crashed server\'s uploads are still there');
    assert.match(b.stderr(), new RegExp(`removed ${crashed.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}, the uploads of a server that stopped without removing them`));
    await start();
    assert.ok(fs.existsSync(b.info.upload_dir), 'a running server\'s uploads were removed');
  } finally {
    for (const x of servers) assert.equal(await x.stop(), 0, x.stderr());
    fs.rmSync(tmpdir, { recursive: true, force: true });
  }
});
