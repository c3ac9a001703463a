// Static files: the web client's files from --data-dir, the .gz copy to a browser that
// takes gzip, the same bytes either way, and nothing outside the folder.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync, rmSync } from 'node:fs';
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
