// Static files: the web client's files from --data-dir, the .gz copy to a browser that
// takes gzip, the same bytes either way, and nothing outside the folder.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, mkdirSync, writeFileSync, rmSync, symlinkSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import { tmpdir } from 'node:os';
import { gzipSync, gunzipSync } from 'node:zlib';
import { request } from 'node:http';
import { startServer } from './harness.mjs';

// node's fetch always asks for gzip and inflates it: use a raw request to see the wire.
function get(base, path, headers = {}) {
  return new Promise((resolve, reject) => {
    const req = request(`${base}${path}`, { headers }, (res) => {
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode, headers: res.headers, body: Buffer.concat(chunks) }));
    });
    req.on('error', reject);
    req.end();
  });
}

test('static files: gzip copy when accepted, plain otherwise, no escape from the folder', async () => {
  const dir = mkdtempSync(`${tmpdir()}/softcast-static-`);
  const js = 'export const x = 1;\n'.repeat(200);
  writeFileSync(`${dir}/index.html`, '<!doctype html><title>t</title>');
  writeFileSync(`${dir}/app.js`, js);
  writeFileSync(`${dir}/app.js.gz`, gzipSync(js));
  const srv = await startServer(['--dims', '16x16x8', '--data-dir', dir]);
  try {
    const plain = await get(srv.base, '/app.js');
    assert.equal(plain.status, 200);
    assert.equal(plain.headers['content-encoding'], undefined);
    assert.equal(plain.headers['content-type'], 'text/javascript');
    assert.equal(plain.body.toString(), js);
    const zipped = await get(srv.base, '/app.js', { 'accept-encoding': 'gzip, deflate' });
    assert.equal(zipped.headers['content-encoding'], 'gzip');
    assert.ok(zipped.body.length < js.length / 4);
    assert.equal(gunzipSync(zipped.body).toString(), js);
    const index = await get(srv.base, '/', { 'accept-encoding': 'gzip' });
    assert.equal(index.headers['content-encoding'], undefined); // no index.html.gz: plain
    assert.match(index.body.toString(), /<title>t<\/title>/);
    assert.equal((await get(srv.base, '/../etc/passwd')).status, 404);
    assert.equal((await get(srv.base, '/missing.js')).status, 404);
  } finally {
    assert.equal(await srv.stop(), 0);
    rmSync(dir, { recursive: true, force: true });
  }
});

// What an operator's folder may hold by mistake: a dotfile (.env, .git), a link to a file
// outside it, a link to a folder outside it, a FIFO (which, opened for reading, blocks until
// a writer comes: an HTTP thread and shutdown would hang on it). Each is 404, at once; the
// same folder's plain files are served.
test('static files: regular files under the root only, no dotfiles, no links out, no FIFO', { timeout: 60000 }, async () => {
  const dir = mkdtempSync(`${tmpdir()}/softcast-static-`);
  const outside = mkdtempSync(`${tmpdir()}/softcast-outside-`);
  writeFileSync(`${outside}/secret.txt`, 'secret');
  writeFileSync(`${dir}/index.html`, '<!doctype html><title>t</title>');
  writeFileSync(`${dir}/.env`, 'KEY=secret');
  mkdirSync(`${dir}/.git`);
  writeFileSync(`${dir}/.git/config`, 'secret');
  mkdirSync(`${dir}/sub`);
  writeFileSync(`${dir}/sub/ok.js`, 'export {};');
  symlinkSync(`${outside}/secret.txt`, `${dir}/link.txt`);
  symlinkSync(outside, `${dir}/out`);
  execFileSync('mkfifo', [`${dir}/fifo.js`]);
  const srv = await startServer(['--dims', '16x16x8', '--data-dir', dir]);
  try {
    assert.equal((await get(srv.base, '/sub/ok.js')).status, 200);
    for (const path of ['/.env', '/.git/config', '/sub/.hidden', '/link.txt', '/out/secret.txt', '/fifo.js']) {
      const t0 = performance.now();
      const r = await get(srv.base, path);
      assert.equal(r.status, 404, `${path}: ${r.status} ${r.body}`);
      assert.ok(!r.body.toString().includes('secret') || r.body.toString().includes(path), path);
      assert.ok(performance.now() - t0 < 5000, `${path} took ${performance.now() - t0} ms`);
    }
    assert.equal((await get(srv.base, '/api/health')).status, 200);
  } finally {
    assert.equal(await srv.stop(), 0); // a FIFO left open would hang the stop
    rmSync(dir, { recursive: true, force: true });
    rmSync(outside, { recursive: true, force: true });
  }
});
