// A CT over the server's element budget (--volume): block-averaged by the smallest factor
// that fits, and said so; with --fit-elements 0 refused instead. The file is written here as
// plain NIfTI-1 (int16, RAS sform) by this test's own writer.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { startServer, api } from './harness.mjs';

// nx x ny x nz int16 voxels of spacing sp (mm), an identity-oriented sform; value: a body
// (a cylinder of 40 HU along z) in air (-1000).
function writeCt(file, [nx, ny, nz], sp) {
  const hdr = Buffer.alloc(352);
  hdr.writeInt32LE(348, 0);
  [3, nx, ny, nz, 1, 1, 1, 1].forEach((d, k) => hdr.writeInt16LE(d, 40 + 2 * k));
  hdr.writeInt16LE(4, 70); // datatype: signed short
  hdr.writeInt16LE(16, 72);
  [1, ...sp, 1, 1, 1, 1].forEach((d, k) => hdr.writeFloatLE(d, 76 + 4 * k));
  hdr.writeFloatLE(352, 108);
  hdr.writeFloatLE(1, 112);
  hdr.writeUInt8(2, 123);
  hdr.writeInt16LE(1, 254); // sform_code: scanner
  [[sp[0], 0, 0, 0], [0, sp[1], 0, 0], [0, 0, sp[2], 0]].forEach((row, r) =>
    row.forEach((v, c) => hdr.writeFloatLE(v, 280 + 16 * r + 4 * c)));
  hdr.write('n+1\0', 344, 'latin1');
  const data = Buffer.alloc(nx * ny * nz * 2);
  for (let z = 0; z < nz; z++)
    for (let y = 0; y < ny; y++)
      for (let x = 0; x < nx; x++) {
        const inside = Math.hypot(x - nx / 2, y - ny / 2) < nx / 3;
        data.writeInt16LE(inside ? 40 : -1000, 2 * (x + nx * (y + ny * z)));
      }
  fs.writeFileSync(file, Buffer.concat([hdr, data]));
}

test('volume: a CT over the element budget is block-averaged to fit, and said so; --fit-elements 0 refuses it', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'softcast-fit-')), ct = path.join(dir, 'big.nii');
  try {
    // 200 x 200 x 110 = 4,400,000 elements, over the default 4,194,304: by 2, 100 x 100 x 55.
    writeCt(ct, [200, 200, 110], [0.8, 0.8, 1.25]);
    const srv = await startServer(['--volume', ct]);
    try {
      assert.match(srv.stderr(), /200x200x110 is over the budget of 4194304 elements: block-averaged by 2 to 100x100x55 \(1\.60 x 1\.60 x 2\.50 mm\)/);
      const s = await api(srv.base, 'POST', '/api/sessions', { scene: 'volume' });
      assert.equal(s.status, 201, s.text);
      assert.deepEqual(s.json.dims, [100, 100, 55]);
      assert.deepEqual(s.json.spacing.map((x) => Math.round(x * 100) / 100), [1.6, 1.6, 2.5]);
    } finally {
      assert.equal(await srv.stop(), 0, srv.stderr());
    }
    await assert.rejects(startServer(['--volume', ct, '--fit-elements', '0']), /200x200x110 is over --max-elements 4194304/);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
