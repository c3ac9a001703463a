// Classes from a segmentation (--volume-labels with --volume-label-classes) and the contrast
// preset (--hu-preset, or a session's "preset"), end to end. The label map is written here by
// the tests' own NIfTI writer (harness.mjs): a block at the front of the phantom's belly
// mapped to bone moves as one piece under a pull that dents the same phantom without it.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { startServer, api, Client, wsUrl, objectWorld, writeNifti1 } from './harness.mjs';

const DIMS = [48, 48, 28];
const SP = [400 / 48, 400 / 48, 300 / 28]; // the phantom's field of view, 400 x 400 x 300 mm
// The block, in lattice elements: x 16..31, y 30..43 (the belly's front, its skin at y 38.5),
// z 10..17 (the middle of the torso).
const BLOCK = { lo: [16, 30, 10], hi: [31, 43, 17] };
const inBlock = (x, y, z) => [x, y, z].every((v, k) => v >= BLOCK.lo[k] && v <= BLOCK.hi[k]);

const lastState = (c) => c.texts.filter((t) => t.type === 'state').at(-1);

// Pull the belly 3 elements forward from inside the block; the spread (largest distance
// from the mean) of the displacements of the skin vertices well inside the block, mm.
async function pullSpread(srv, body) {
  const s = (await api(srv.base, 'POST', '/api/sessions', body)).json;
  const d = await new Client(wsUrl(s, s.control_token)).open();
  try {
    await d.until(() => d.frames.length > 0, 10000, 'first frame');
    const rest = objectWorld(d, 0);
    d.send({ type: 'grab', seq: 1, point: [24, 37, 14], radius: 2, space: 'lattice' });
    d.send({ type: 'move', seq: 2, point: [24, 40, 14], space: 'lattice' });
    await d.until(() => d.frames.some((f) => f.lastSeq >= 2), 10000, 'the pull framed');
    const f0 = d.frames.at(-1).frame;
    await d.until(() => d.frames.at(-1).frame >= f0 + 5, 10000, 'five frames held');
    const now = objectWorld(d, 0), disp = [];
    for (let j = 0; j < rest.length / 3; j++) {
      const l = [0, 1, 2].map((b) => rest[j * 3 + b] / SP[b]);
      const inner = l.every((v, b) => v >= BLOCK.lo[b] + 1.5 && v <= BLOCK.hi[b] - 1.5);
      if (inner) disp.push([0, 1, 2].map((b) => now[j * 3 + b] - rest[j * 3 + b]));
    }
    assert.ok(disp.length > 20, `${disp.length} skin vertices inside the block`);
    const mean = [0, 1, 2].map((b) => disp.reduce((a, v) => a + v[b], 0) / disp.length);
    const spread = Math.max(...disp.map((v) => Math.hypot(...v.map((x, b) => x - mean[b]))));
    return { spread, mean, n: disp.length };
  } finally {
    await d.close();
  }
}

test('volume labels: a block of the phantom mapped to bone moves as one piece; bad labels are refused', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'softcast-labels-'));
  const labels = path.join(dir, 'labels.nii'), small = path.join(dir, 'small.nii');
  try {
    writeLabels(labels, DIMS, (x, y, z) => (inBlock(x, y, z) ? 7 : 0));
    const srv = await startServer(['--dims', DIMS.join('x'), '--volume-labels', labels,
      '--volume-label-classes', '7=bone']);
    try {
      assert.match(srv.stderr(), /classes from .*labels\.nii \(7=bone\)/);
      const mapped = await pullSpread(srv, {}); // the default session: the server's volume, mapped
      const byHu = await pullSpread(srv, { dims: DIMS }); // its own phantom: classes by HU
      console.log(`# skin in the block: spread ${mapped.spread.toFixed(3)} mm mapped to bone ` +
        `(moved ${mapped.mean.map((x) => x.toFixed(1))} mm, ${mapped.n} vertices), ` +
        `${byHu.spread.toFixed(3)} mm by HU`);
      assert.ok(mapped.spread < 0.2 && mapped.mean[1] > 20, `mapped: ${JSON.stringify(mapped)}`);
      assert.ok(byHu.spread > 5, `by HU: ${JSON.stringify(byHu)}`);
    } finally {
      assert.equal(await srv.stop(), 0, srv.stderr());
    }
    writeLabels(small, [20, 20, 12], () => 0);
    const start = (extra) => startServer(['--dims', DIMS.join('x'), ...extra]);
    await assert.rejects(start(['--volume-labels', labels]), /go together/);
    await assert.rejects(start(['--volume-labels', small, '--volume-label-classes', '7=bone']),
      /label map dims 20x20x12 .* differ from the volume's 48x48x28/);
    await assert.rejects(start(['--volume-labels', labels, '--volume-label-classes', '7=cartilage']),
      /cartilage.*must be air, skin_fat, muscle_organ or bone/);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

function writeLabels(file, dims, voxel) {
  // uint8, RAS sform like the CT's: read to the same lattice.
  writeNifti1(file, { dims, spacing: SP, type: 'uint8', sform: true, voxel });
}

test('hu preset: contrast puts the bone threshold at 700 HU, per session or for the server', async () => {
  const threshold = (c) => lastState(c)?.params['hu_threshold.2'];
  const srv = await startServer(['--dims', '24x24x16']);
  try {
    for (const [body, want, name] of [[{}, 375, 'default'], [{ preset: 'contrast' }, 700, 'contrast']]) {
      const s = await api(srv.base, 'POST', '/api/sessions', body);
      assert.equal(s.status, 201, s.text);
      assert.equal(s.json.hu_preset, name);
      const c = await new Client(wsUrl(s.json, s.json.control_token)).open();
      await c.until(() => threshold(c) !== undefined, 10000, 'state');
      assert.equal(threshold(c), want);
      await c.close();
    }
    const bad = await api(srv.base, 'POST', '/api/sessions', { preset: 'venous' });
    assert.equal(bad.status, 400);
    assert.match(bad.text, /venous.*must be default or contrast/);
  } finally {
    assert.equal(await srv.stop(), 0, srv.stderr());
  }
  const srv2 = await startServer(['--dims', '24x24x16', '--hu-preset', 'contrast']);
  try {
    const s = await api(srv2.base, 'POST', '/api/sessions', {});
    assert.equal(s.json.hu_preset, 'contrast');
    const c = await new Client(wsUrl(s.json, s.json.control_token)).open();
    await c.until(() => threshold(c) !== undefined, 10000, 'state');
    assert.equal(threshold(c), 700);
    await c.close();
  } finally {
    assert.equal(await srv2.stop(), 0, srv2.stderr());
  }
  await assert.rejects(startServer(['--hu-preset', 'venous']), /venous/);
});
