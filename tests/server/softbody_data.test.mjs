// The softbody scene on data a user brings to the server: a closed mesh made by others
// (CGAL's femur, in its own units, scaled with --softbody-mesh-size), meshes the server must
// refuse at start (an open one, one read as metres that is hundreds of metres across), and a
// segmentation written here as a plain NIfTI-1 file by the tests' own writer (harness.mjs,
// not the NIfTI C library the server reads it with) with its material table, and the table's
// mistakes. The meshes come from tests/run-tests.sh's fetch (build/data/meshes): when the
// fetch could not reach a registry the mesh cases skip, saying why; when it broke although
// the registry answered, they fail.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { startServer, api, Client, wsUrl, objectWorld, writeNifti1 } from './harness.mjs';

const DATA = process.env.SOFTCAST_DATA ?? new URL('../../build/data', import.meta.url).pathname;

// A fetched mesh's path, or why there is none (skip) or an error (the fetch broke).
function fetched(name) {
  const p = path.join(DATA, 'meshes', name);
  if (fs.existsSync(p)) return { path: p };
  const marker = path.join(DATA, 'meshes', 'LIST.FETCH_FAILED');
  const why = fs.existsSync(marker) ? fs.readFileSync(marker, 'utf8').trim() : '';
  if (why.startsWith('reachable:')) throw new Error(`${name} missing although the registry answered: ${why}`);
  return { skip: why ? `${name} not fetched: ${why}` : `${name} not at ${p} (tests/run-tests.sh fetches it)` };
}

test('softbody: a mesh made by others, scaled to 15 cm, becomes the surface model', async (t) => {
  const femur = fetched('femur.off');
  if (femur.skip) return t.skip(femur.skip);
  // The truth from the file itself: its header's vertex count.
  const counts = fs.readFileSync(femur.path, 'utf8').split('\n').find((l, i) => i > 0 && /^\s*\d+\s+\d+/.test(l));
  const nvert = Number(counts.trim().split(/\s+/)[0]);
  const srv = await startServer(['--softbody-mesh', femur.path, '--softbody-mesh-size', '0.15']);
  try {
    const s = await api(srv.base, 'POST', '/api/sessions', { scene: 'softbody', model: 'surface' });
    assert.equal(s.status, 201, s.text);
    assert.equal(s.json.source, 'mesh');
    assert.equal(s.json.particles, nvert);
    const c = await new Client(wsUrl(s.json, s.json.control_token)).open();
    await c.until(() => c.frames.length > 0, 20000, 'the femur\'s first frame');
    const x = objectWorld(c, 0), lo = [1e9, 1e9, 1e9], hi = [-1e9, -1e9, -1e9];
    for (let i = 0; i < x.length; i++) { lo[i % 3] = Math.min(lo[i % 3], x[i]); hi[i % 3] = Math.max(hi[i % 3], x[i]); }
    const diag = Math.hypot(hi[0] - lo[0], hi[1] - lo[1], hi[2] - lo[2]);
    // Settled under gravity in its tray it sags a little: within 10% of the 15 cm asked.
    assert.ok(Math.abs(diag - 0.15) < 0.015, `the femur is ${diag} m across, 0.15 asked`);
    assert.ok(lo[2] > -0.002, `the femur sinks through the tray's floor: lowest z ${lo[2]}`);
    await c.close();
  } finally {
    assert.equal(await srv.stop(), 0, srv.stderr());
  }
});

test('softbody: a mesh the surface model cannot take stops the server at start, naming the file and why', async (t) => {
  for (const [name, args, why] of [
    ['elephant-with-holes.off', ['--softbody-mesh-size', '0.15'], /elephant-with-holes\.off.*open mesh/],
    ['armadillo.off', [], /armadillo\.off.*228\.8\d* m across.*--softbody-mesh-size M scales it/],
  ]) {
    const m = fetched(name);
    if (m.skip) return t.skip(m.skip);
    await assert.rejects(startServer(['--softbody-mesh', m.path, ...args]), why, name);
  }
});

// A label map (uint8, 2 mm voxels, no orientation): an ellipsoid of label 1 holding a
// sphere of label 2.
function writeSegmentation(file) {
  writeNifti1(file, {
    dims: [48, 36, 28], spacing: [2, 2, 2], type: 'uint8',
    voxel: (x, y, z) => {
      const [u, v, w] = [(x - 23.5) / 20, (y - 17.5) / 14, (z - 13.5) / 10];
      const s = Math.hypot((x - 30) / 5, (y - 17.5) / 5, (z - 13.5) / 5);
      return s <= 1 ? 2 : u * u + v * v + w * w <= 1 ? 1 : 0;
    },
  });
}

test('softbody: a segmentation with its material table becomes the hybrid organ; table mistakes stop the server', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'softcast-seg-')), seg = path.join(dir, 'seg.nii');
  try {
    writeSegmentation(seg);
    const srv = await startServer(['--softbody-labels', seg, '--softbody-materials', '1=parenchyma,2=lesion']);
    try {
      const s = await api(srv.base, 'POST', '/api/sessions', { scene: 'softbody' });
      assert.equal(s.status, 201, s.text);
      assert.equal(s.json.source, 'labels');
      assert.deepEqual(s.json.regions, ['parenchyma', 'lesion']);
      assert.deepEqual(s.json.inner_surfaces, [1], 'the lesion\'s own surface');
      assert.ok(s.json.tets > 100, s.text);
    } finally {
      assert.equal(await srv.stop(), 0, srv.stderr());
    }
    for (const [args, why] of [
      [['--softbody-materials', '1=parenchyma'], /label 2/],
      [['--softbody-materials', '1=parenchyma,2=lesion,3=a,4=b,5=c'], /at most 4 regions/],
      [[], /--softbody-labels and --softbody-materials go together/],
    ])
      await assert.rejects(startServer(['--softbody-labels', seg, ...args]), why, args.join(' '));
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
