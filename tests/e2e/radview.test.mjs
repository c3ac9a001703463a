// The volume as a radiologist reads it, and the live plot, in the browser against the
// server, each checked against ground truth written here:
// - A CT of known anatomy (a body with a bright marker at the patient's right-anterior-
//   superior corner), written as NIfTI in RAS and again with its axes permuted and flipped
//   (the affine changed to match): the three slice planes show the marker where radiological
//   convention puts it (axial: screen left and top; coronal: left and top; sagittal: left,
//   anterior, and top), the letter at the edges it is near name its directions, the two
//   files give the same slice pixels, and the 3D view opens from the patient's front (the
//   patient's right on the screen's left, head up). A file without orientation says so.
// - The Debian head CT written as NIfTI with its stated orientation: screenshots of the
//   three planes with their letters and of the 3D view (build/e2e/ct-*.png).
// - The plot after a release under condition B: its displacement trace drawn on both sides
//   of the zero line (build/e2e/plot-condition-b.png), with a sample for every frame from the
//   release to rest though the page was busy and skipped frames (the probe's trail).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ROOT, OUT, openPage, closePage } from './browser.mjs';
import { startServer, api, writeNifti1 } from '../server/harness.mjs';

const DATA = process.env.SOFTCAST_DATA ?? `${ROOT}build/data`;
let browser, dir;

before(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'softcast-radview-'));
  ({ browser } = await openPage(null)); // each test starts its own server
});
after(async () => {
  await closePage({ browser });
  if (dir) fs.rmSync(dir, { recursive: true, force: true });
});

const until = (page, fn, arg, what, ms = 30000) =>
  page.waitForFunction(fn, arg, { timeout: ms, polling: 50 }).catch((e) => {
    throw new Error(`timeout waiting for ${what}: ${e.message.split('\n')[0]}`);
  });

async function session(srv, viewport = { width: 1280, height: 760 }) {
  const s = (await api(srv.base, 'POST', '/api/sessions', { scene: 'volume' })).json;
  const ctx = await browser.newContext({ viewport });
  ctx.setDefaultTimeout(15000);
  const page = await ctx.newPage();
  await page.goto(`${srv.base}/?session=${encodeURIComponent(s.id)}&token=${s.control_token}`);
  await until(page, () => window.softcast?.view.framesDrawn > 0 && window.softcast.sliceHash() !== null, null, 'first frame and slice');
  return { s, page, ctx };
}

// The anatomy in RAS lattice order: soft tissue (40 HU) inside a 2-voxel air margin, a bone
// marker (1000 HU) near the patient's right (high x), anterior (high y), superior (high z)
// corner.
const N = [40, 32, 24], SP = [2, 2.5, 3];
const M0 = [N[0] - 10, N[1] - 10, N[2] - 8], M1 = [N[0] - 4, N[1] - 4, N[2] - 3]; // marker [M0, M1)
const anat = (x, y, z) => {
  const inBody = x >= 2 && y >= 2 && z >= 2 && x < N[0] - 2 && y < N[1] - 2 && z < N[2] - 2;
  const inMarker = x >= M0[0] && y >= M0[1] && z >= M0[2] && x < M1[0] && y < M1[1] && z < M1[2];
  return inMarker ? 1000 : inBody ? 40 : -1000;
};
const MC = [0, 1, 2].map((b) => Math.floor((M0[b] + M1[b] - 1) / 2)); // the marker's middle

function writeFiles() {
  const ras = path.join(dir, 'ras.nii'), perm = path.join(dir, 'perm.nii'), none = path.join(dir, 'none.nii');
  writeNifti1(ras, { dims: N, spacing: SP, type: 'int16', sform: true, voxel: anat });
  // Stored i toward the feet, j toward the patient's left, k toward the front.
  writeNifti1(perm, {
    dims: [N[2], N[0], N[1]], spacing: [SP[2], SP[0], SP[1]], type: 'int16',
    sform: [[0, -SP[0], 0, (N[0] - 1) * SP[0]], [0, 0, SP[1], 0], [-SP[2], 0, 0, (N[2] - 1) * SP[2]]],
    voxel: (i, j, k) => anat(N[0] - 1 - j, k, N[2] - 1 - i),
  });
  writeNifti1(none, { dims: N, spacing: SP, type: 'int16', voxel: anat });
  return { ras, perm, none };
}

// Show plane at index; wait for its slice; what the canvas shows.
async function showPlane(page, plane, index) {
  const before = await page.evaluate(() => window.softcast.slice.received);
  await page.click(`#planes button[data-plane=${plane}]`);
  await page.evaluate((i) => {
    const el = document.querySelector('#slice-index');
    el.value = String(i);
    el.dispatchEvent(new Event('input'));
  }, index);
  const p = ['axial', 'coronal', 'sagittal'].indexOf(plane);
  await until(page, ([p, n, i]) => {
    const s = window.softcast;
    return s.slice.received > n && s.sliceHash().plane === p && s.slice.inFlight === 0 && !s.slice.changed &&
      Number(s.slice.index.value) === i;
  }, [p, before, index], `${plane} slice ${index}`);
  return page.evaluate(() => {
    const s = window.softcast, sl = s.slice, c = sl.canvas, r = sl.rect;
    const px = sl.ctx.getImageData(0, 0, c.width, c.height).data;
    // The marker's pixels: white (bone in the soft-tissue window), never the letters' yellow.
    let n = 0, sx = 0, sy = 0;
    for (let y = 0; y < c.height; y++)
      for (let x = 0; x < c.width; x++) {
        const k = 4 * (x + c.width * y);
        if (px[k] > 240 && px[k + 1] > 240 && px[k + 2] > 240) { n++; sx += x; sy += y; }
      }
    return { hash: s.sliceHash().hash, n, cx: sx / n, cy: sy / n, rect: r, letters: sl.letters(),
      orientation: s.st.state.orientation, file: s.st.state.file_orientation };
  });
}

// Per plane: the index through the marker, the marker's pixel (u, v) in the slice's own
// order, and the letters its position must meet (horizontal, vertical edge).
const PLANES = [
  ['axial', MC[2], [MC[0], MC[1]], ['R', 'A']],
  ['coronal', MC[1], [MC[0], MC[2]], ['R', 'S']],
  ['sagittal', MC[0], [MC[1], MC[2]], ['A', 'S']],
];

test('slices in radiological convention with their letters; the same anatomy stored permuted and flipped shows the same; the 3D view from the front', { timeout: 240000 }, async () => {
  const files = writeFiles();
  const seen = {};
  for (const which of ['ras', 'perm']) {
    const srv = await startServer(['--volume', files[which], '--data-dir', `${ROOT}web-client`]);
    try {
      const { page, ctx } = await session(srv);
      seen[which] = {};
      for (const [plane, index, [u, v], [hLetter, vLetter]] of PLANES) {
        const r = await showPlane(page, plane, index);
        seen[which][plane] = r;
        assert.equal(r.orientation, 'RAS');
        const midX = r.rect.x + r.rect.w / 2, midY = r.rect.y + r.rect.h / 2;
        assert.ok(r.n > 4, `${which} ${plane}: no marker pixels`);
        // Where the marker is drawn, and the letters at those edges.
        const side = r.cx < midX ? 'left' : 'right', end = r.cy < midY ? 'top' : 'bottom';
        assert.equal(r.letters[side], hLetter, `${which} ${plane}: marker on the ${side}, lettered ${r.letters[side]}`);
        assert.equal(r.letters[end], vLetter, `${which} ${plane}: marker at the ${end}, lettered ${r.letters[end]}`);
        assert.equal(side, 'left', `${which} ${plane}: the marker (patient ${hLetter}) on the screen's ${side}`);
        assert.equal(end, 'top', `${which} ${plane}: the marker (${vLetter}) at the screen's ${end}`);
        // The display transform maps the marker's slice pixel to where its pixels are drawn,
        // and back.
        const [x, y] = await page.evaluate(([a, b]) => window.softcast.slice.canvasOf(a, b), [u, v]);
        assert.ok(Math.abs(x - r.cx) < r.rect.w / 8 && Math.abs(y - r.cy) < r.rect.h / 8,
          `${which} ${plane}: pixel (${u}, ${v}) drawn at ${x.toFixed(0)},${y.toFixed(0)}; marker at ${r.cx.toFixed(0)},${r.cy.toFixed(0)}`);
        assert.deepEqual(await page.evaluate(([a, b]) => window.softcast.slice.pixelAt(a, b), [x, y]), [u, v]);
        if (which === 'ras') await page.locator('#sliceview').screenshot({ path: `${OUT}/marker-${plane}.png` });
      }
      if (which === 'ras') {
        // The first view: the patient's right (+x) left of their left, the head (+z) above
        // the feet, the front (+y) nearer the camera than the back.
        const v = await page.evaluate(([n, s]) => {
          const w = window.softcast.view, c = [0, 1, 2].map((b) => ((n[b] - 1) * s[b]) / 2);
          const at = (d) => w.screenOf(c.map((x, b) => x + d[b]));
          const cam = w.camera.position;
          return { right: at([30, 0, 0]), left: at([-30, 0, 0]), head: at([0, 0, 30]), feet: at([0, 0, -30]),
            cam: [cam.x - c[0], cam.y - c[1], cam.z - c[2]] };
        }, [N, SP]);
        assert.ok(v.right[0] < v.left[0], `patient's right drawn at x ${v.right[0].toFixed(0)}, left at ${v.left[0].toFixed(0)}`);
        assert.ok(v.head[1] < v.feet[1], `head drawn at y ${v.head[1].toFixed(0)}, feet at ${v.feet[1].toFixed(0)}`);
        assert.ok(v.cam[1] > 2 * Math.hypot(v.cam[0], v.cam[2]), `camera at ${v.cam.map((x) => x.toFixed(0))}: not in front`);
      }
      await ctx.close();
    } finally {
      assert.equal(await srv.stop(), 0, srv.stderr());
    }
  }
  for (const [plane] of PLANES) assert.equal(seen.perm[plane].hash, seen.ras[plane].hash, `${plane}: the permuted file's slice differs`);
  assert.equal(seen.ras.axial.file, 'RAS');
  assert.equal(seen.perm.axial.file, 'ILA');
  // A file that says nothing of its axes: kept as stored, and the page is told so.
  const srv = await startServer(['--volume', files.none, '--data-dir', `${ROOT}web-client`]);
  try {
    const { page, ctx } = await session(srv);
    const r = await showPlane(page, 'axial', MC[2]);
    assert.equal(r.orientation, '');
    assert.equal(r.letters, null);
    await page.locator('#sliceview').screenshot({ path: `${OUT}/marker-unknown-orientation.png` });
    await ctx.close();
  } finally {
    assert.equal(await srv.stop(), 0, srv.stderr());
  }
});

test('a real head CT: the three planes with their letters, the 3D view from the front', { timeout: 240000 }, async (t) => {
  const raw = path.join(DATA, 'cranium_256x256x108_i16.raw');
  if (!fs.existsSync(raw)) { t.skip(`${raw} missing: tests/run-tests.sh fetches it`); return; }
  // Debian's invesalius head CT, raw int16 i fastest. Its anatomy says j runs toward the
  // face (sinuses at high j, the head holder at low j) and k toward the vertex (the skull's
  // dome at high k); left and right cannot be told from it, and DICOM's rows run toward the
  // patient's left: stated LAS.
  const b = fs.readFileSync(raw), ct = path.join(dir, 'cranium.nii'), sp = [0.957, 0.957, 1.5];
  writeNifti1(ct, {
    dims: [256, 256, 108], spacing: sp, type: 'int16',
    sform: [[-sp[0], 0, 0, 255 * sp[0]], [0, sp[1], 0, 0], [0, 0, sp[2], 0]],
    voxel: (i, j, k) => b.readInt16LE(2 * (i + 256 * (j + 256 * k))),
  });
  const srv = await startServer(['--volume', ct, '--data-dir', `${ROOT}web-client`]);
  try {
    const { page, ctx } = await session(srv, { width: 1400, height: 800 });
    const st = await page.evaluate(() => window.softcast.st.state);
    assert.equal(st.orientation, 'RAS');
    assert.equal(st.file_orientation, 'LAS');
    await page.click('#presets button:has-text("Bone")');
    for (const [plane, index] of [['axial', Math.round(st.dims[2] * 0.45)], ['coronal', Math.round(st.dims[1] * 0.55)], ['sagittal', Math.round(st.dims[0] / 2)]]) {
      const r = await showPlane(page, plane, index);
      assert.ok(r.letters, `${plane}: no letters`);
      await page.locator('#sliceview').screenshot({ path: `${OUT}/ct-${plane}.png` });
    }
    await page.locator('#view3d').screenshot({ path: `${OUT}/ct-3d.png` });
    await ctx.close();
  } finally {
    assert.equal(await srv.stop(), 0, srv.stderr());
  }
});

test('the plot after a release under condition B: the displacement trace swings past zero', { timeout: 180000 }, async () => {
  // --keyframe-every 5: the probe is keyed again every few frames while it moves; a key is
  // not a new grab, and the page must go on filling skipped frames from the trail through it.
  const srv = await startServer(['--dims', '48x48x28', '--data-dir', `${ROOT}web-client`, '--keyframe-every', '5']);
  try {
    const { page, ctx } = await session(srv);
    // The driver's events as the page sends them: condition B, a grab at the belly, a pull
    // of 6 lattice units out (+y) over 16 frames, a hold, the release.
    await page.evaluate(async () => {
      const c = window.softcast.conn, tick = (ms) => new Promise((r) => setTimeout(r, ms));
      const { spacing: s } = window.softcast.st.state;
      c.send('set_condition', { condition: 'B' });
      const g = [24 * s[0], 38 * s[1], 14 * s[2]];
      c.send('grab', { point: g, radius: 2.5 * s[1], space: 'world' });
      for (let k = 1; k <= 16; k++) {
        c.send('move', { point: [g[0], g[1] + (6 * k * s[1]) / 16, g[2]], space: 'world' });
        await tick(40);
      }
      await tick(300);
      c.send('release', {});
    });
    await until(page, () => window.softcast.conn.sent.size === 0, null, 'the release applied');
    // While it rings the page is busy three times for 120 ms (7 frames at 60 Hz): it shows the
    // newest of each burst, and the probe's trail must give the plot the frames it skipped.
    const released = await page.evaluate(async () => {
      const frame = window.softcast.st.frame, tick = (ms) => new Promise((r) => setTimeout(r, ms));
      for (let k = 0; k < 3; k++) {
        for (const end = performance.now() + 120; performance.now() < end;); // the page's thread held
        await tick(40);
      }
      return frame;
    });
    // Rung and settled: the server says the volume is at rest and the page shows its last
    // frame (not "no frame for a second": a busy machine fakes that); then the plot must have
    // samples past rest. (Not a count of samples: the page shows the newest of a burst, so how
    // many frames it drew depends on the machine's load; 24 to 26 here, fewer on a busy CI.)
    const id = new URL(page.url()).searchParams.get('session');
    for (const deadline = Date.now() + 60000; ;) {
      const st = (await api(srv.base, 'GET', `/api/sessions/${id}`)).json;
      if (st?.at_rest && (await page.evaluate(() => window.softcast.st.frame)) >= st.latest_frame) break;
      if (Date.now() > deadline) throw new Error(`not at rest after 60 s: ${JSON.stringify(st)}`);
      await page.waitForTimeout(50); // polling the server, bounded by the deadline
    }
    const seen = await page.evaluate(() => ({ n: window.softcast.probe.samples, min: Math.min(...window.softcast.probe.plot.samples.map((x) => x[1])) }));
    assert.ok(seen.n > 5 && seen.min < -1, `the region swung past rest: ${seen.n} samples, least ${seen.min} mm`);
    // From the release to rest every frame moved something, so every frame has its sample,
    // though the page took fewer updates than that.
    const ring = await page.evaluate((from) => {
      const pr = window.softcast.probe, dt = 1 / pr.rate;
      const t = pr.plot.samples.map((x) => x[0]).filter((x) => x >= from * dt - 1e-9);
      let gaps = 0;
      for (let i = 1; i < t.length; i++) if (Math.abs(t[i] - t[i - 1] - dt) > 1e-6) gaps++;
      return { samples: t.length, gaps, updates: pr.updates, plotted: pr.samples, rate: pr.rate };
    }, released);
    console.log(`# ring: ${ring.samples} frames plotted from the release at frame ${released}, ${ring.gaps} gaps; ${ring.updates} updates gave ${ring.plotted} samples`);
    // How many frames the ring lasts depends on where the drag stood at the release (27 and
    // 19 seen): at least 10, so that no gap is a finding.
    assert.ok(ring.rate > 0 && ring.samples >= 10 && ring.gaps === 0, `frames missing from the plot: ${JSON.stringify(ring)}`);
    assert.ok(ring.updates < ring.plotted, `the trail filled no frame: ${JSON.stringify(ring)}`);
    const r = await page.evaluate(() => {
      const pl = window.softcast.plot, c = pl.canvas, { zeroY, box } = pl.layout();
      const px = pl.ctx.getImageData(0, 0, c.width, c.height).data;
      let above = 0, below = 0;
      for (let y = box.y; y < box.y + box.h; y++)
        for (let x = box.x; x < box.x + box.w; x++) {
          const k = 4 * (x + c.width * y);
          // The displacement trace's orange (#ff9f40), away from the zero line.
          if (Math.abs(px[k] - 255) < 30 && Math.abs(px[k + 1] - 159) < 40 && px[k + 2] < 110) {
            if (y < zeroY - 1.5) above++;
            else if (y > zeroY + 1.5) below++;
          }
        }
      const d = pl.samples.map((x) => x[1]);
      return { above, below, max: Math.max(...d), min: Math.min(...d), n: d.length };
    });
    console.log(`# plot: ${r.n} samples, displacement ${r.min.toFixed(1)} to ${r.max.toFixed(1)} mm; trace pixels ${r.above} above zero, ${r.below} below`);
    assert.ok(r.above > 20, `trace pixels above zero: ${r.above}`);
    assert.ok(r.below >= 4, `trace pixels below zero: ${r.below}`);
    assert.ok(r.max > 30 && r.min < -1, `displacement ${r.min} to ${r.max} mm after a 50 mm pull`);
    await page.locator('#probe-plot').screenshot({ path: `${OUT}/plot-condition-b.png` });
    await page.locator('#view3d').screenshot({ path: `${OUT}/plot-condition-b-3d.png` });
    await ctx.close();
  } finally {
    assert.equal(await srv.stop(), 0, srv.stderr());
  }
});
