// A CT over the server's element budget (--volume): block-averaged by the smallest factor
// that fits, and said so; with --fit-elements 0 refused instead. The file is written here as
// plain NIfTI-1 (int16, RAS sform) by the tests' own writer (harness.mjs).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { startServer, api, writeNifti1 } from './harness.mjs';

// A body (a cylinder of 40 HU along z) in air (-1000), int16, an identity-oriented sform.
function writeCt(file, [nx, ny, nz], spacing) {
  writeNifti1(file, {
    dims: [nx, ny, nz], spacing, type: 'int16', sform: true,
    voxel: (x, y) => (Math.hypot(x - nx / 2, y - ny / 2) < nx / 3 ? 40 : -1000),
  });
}

test('volume: a CT over the element budget is block-averaged to fit, and said so; --fit-elements 0 refuses it', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'softcast-fit-')), ct = path.join(dir, 'big.nii');
  try {
    // 200 x 200 x 110 = 4,400,000 elements, over the default 4,194,304: by 2, 100 x 100 x 55.
    writeCt(ct, [200, 200, 110], [0.8, 0.8, 1.25]);
    const srv = await startServer(['--volume', ct]);
    try {
      // The body runs the whole length: 8 elements of air are added at each end (z), after
      // the fit, which counts them: 200 x 200 x 126 would still be over.
      assert.match(srv.stderr(), /200x200x110 is over the budget of 4194304 elements: block-averaged by 2/);
      assert.match(srv.stderr(), /air margin added \(-x 0, \+x 0, -y 0, \+y 0, -z 8, \+z 8 elements\)/);
      assert.match(srv.stderr(), /simulated as 100x100x71 at 1\.60 x 1\.60 x 2\.50 mm, HU -1000 to 40/);
      const s = await api(srv.base, 'POST', '/api/sessions', { scene: 'volume' });
      assert.equal(s.status, 201, s.text);
      assert.deepEqual(s.json.dims, [100, 100, 71]);
      assert.deepEqual(s.json.spacing.map((x) => Math.round(x * 100) / 100), [1.6, 1.6, 2.5]);
    } finally {
      assert.equal(await srv.stop(), 0, srv.stderr());
    }
    await assert.rejects(startServer(['--volume', ct, '--fit-elements', '0']), /200x200x110: 4400000 elements exceed the limit 4194304/);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
