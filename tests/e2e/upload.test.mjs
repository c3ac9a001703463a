// A CT of one's own from the lobby (headless Chromium against the real server): a NIfTI
// dropped on the lobby's card is uploaded with a progress bar, loaded on the server through
// its stages with the bar following, and opened as a session that draws it and tells its
// name, dims, spacing and HU range (build/e2e/upload.png). A DICOM folder chosen with the
// folder input is packed into a stored zip in the page and sent; until the server reads
// DICOM the card shows the server's refusal. The page's zip writer is checked against
// Python's zipfile. Every wait is bounded and waits for what the page shows.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { execFileSync } from 'node:child_process';
import { OUT, openPage, closePage } from './browser.mjs';
import { writeNifti1, uploadsIn } from '../server/harness.mjs';
import { storedZip, crc32 } from '../../web-client/src/core/upload.mjs';

let srv, browser, dir;

before(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'softcast-e2e-upload-'));
  ({ srv, browser } = await openPage(['--threads', '0']));
});

after(async () => {
  await closePage({ srv, browser });
  if (dir) fs.rmSync(dir, { recursive: true, force: true });
});

// A body (40 HU, a bone core of 700) in air, 96 x 96 x 40 int16 at 0.9 x 0.9 x 2.5 mm.
function writeCt(file) {
  const [nx, ny] = [96, 96];
  writeNifti1(file, {
    dims: [nx, ny, 40], spacing: [0.9, 0.9, 2.5], type: 'int16', sform: true,
    voxel: (x, y) => {
      const r = Math.hypot(x - nx / 2, y - ny / 2);
      return r < nx / 10 ? 700 : r < nx / 3 ? 40 : -1000;
    },
  });
}

test('a NIfTI dropped on the lobby: upload and loading progress, then a session showing the dataset (build/e2e/upload.png)', { timeout: 120000 }, async () => {
  const ct = path.join(dir, 'pelvis-ct.nii');
  writeCt(ct);
  const ctx = await browser.newContext({ viewport: { width: 1100, height: 720 } });
  ctx.setDefaultTimeout(15000);
  const page = await ctx.newPage();
  await page.goto(`${srv.base}/`);
  await page.locator('#dropzone').waitFor({ state: 'visible', timeout: 10000 });
  await page.waitForFunction(() => /Uploads up to 200\.0 MiB/.test(document.querySelector('#upload-status').textContent), null, { timeout: 10000 });
  await page.screenshot({ path: `${OUT}/upload-lobby.png` });
  // A drop as the browser makes one: a DataTransfer holding the file.
  const bytes = [...fs.readFileSync(ct)];
  await page.evaluate(({ bytes: b }) => {
    const dt = new DataTransfer();
    dt.items.add(new File([new Uint8Array(b)], 'pelvis-ct.nii'));
    document.querySelector('#dropzone').dispatchEvent(new DragEvent('drop', { dataTransfer: dt, bubbles: true, cancelable: true }));
  }, { bytes });
  await page.waitForURL(/session=.*token=/, { timeout: 60000 });
  // What the card showed on the way (recorded before it left the page).
  const phases = await page.evaluate(() => JSON.parse(sessionStorage.getItem('softcast-upload-phases') ?? '[]'));
  const up = phases.filter((p) => p.phase === 'uploading'), load = phases.filter((p) => p.phase === 'loading');
  assert.ok(up.length >= 1 && up.at(-1).value === 1, `upload progress: ${JSON.stringify(up)}`);
  assert.match(up.at(-1).text, /Uploading pelvis-ct\.nii: 0\.7 of 0\.7 MiB/);
  assert.ok(load.length >= 1 && load.every((p) => p.value > 0 && p.value < 1), `loading progress: ${JSON.stringify(load)}`);
  assert.ok(load.some((p) => /Loading on the server: (queued|reading|fitting|body|surfaces)/.test(p.text)));
  assert.equal(phases.at(-1).phase, 'ready');
  // The session draws it and says what it is.
  await page.waitForFunction(() => window.softcast?.view.framesDrawn > 0 && window.softcast.view.objects.size === 3, null, { timeout: 30000 }); // skin, bone, the probe
  const info = await page.locator('#dataset').innerText();
  assert.match(info, /pelvis-ct\.nii \(nifti\)/);
  assert.match(info, /stored 96 x 96 x 40/);
  assert.match(info, /simulated 96 x 96 x 56/);
  assert.match(info, /spacing 0\.90 x 0\.90 x 2\.50 mm/);
  assert.match(info, /HU -1000 to 700/);
  assert.ok((await page.evaluate(() => window.softcast.pixels3d())).lit > 1000, 'the body is drawn');
  await page.screenshot({ path: `${OUT}/upload.png` });
  // Kept, as one file named for its session, while the session lives (restarts, recordings).
  const kept = uploadsIn(srv.info.upload_dir);
  assert.ok(kept.length === 1 && /^s\d+-\d+-[0-9a-f]+-.*\.nii$/.test(kept[0]), `kept: ${kept}`);
  await ctx.close();
});

test('a DICOM folder chosen with the folder input is zipped in the page and sent; the server\'s answer is shown', { timeout: 60000 }, async () => {
  const folder = path.join(dir, 'series1');
  fs.mkdirSync(folder);
  for (let i = 1; i <= 3; i++) fs.writeFileSync(path.join(folder, `IM${i}.dcm`), Buffer.alloc(300, i));
  const ctx = await browser.newContext({ viewport: { width: 1100, height: 720 } });
  ctx.setDefaultTimeout(15000);
  const page = await ctx.newPage();
  await page.goto(`${srv.base}/`);
  await page.locator('#upload-folder').setInputFiles(folder);
  await page.locator('#upload-error').waitFor({ state: 'visible', timeout: 30000 });
  const text = await page.locator('#upload-error').innerText();
  // Three files of filler are no DICOM: the reader says so, naming the zip the page made.
  assert.match(text, /Could not open it: .*series1\.zip.*(no DICOM|not DICOM)/i, text);
  const phases = await page.evaluate(() => window.softcastUpload.phases);
  const up = phases.filter((p) => p.phase === 'uploading').at(-1);
  assert.match(up.text, /Uploading series1\.zip/);
  assert.equal(await page.locator('#upload-file').isEnabled(), true, 'the card takes another file');
  await ctx.close();
});

test('the page\'s stored zip reads back in Python\'s zipfile, names, bytes and CRCs', () => {
  const files = [
    { name: 'series/IM0001.dcm', bytes: new Uint8Array(1000).map((_, i) => (i * 31) & 255) },
    { name: 'series/sub/IM0002.dcm', bytes: new Uint8Array(0) },
    { name: 'séries/ü.dcm', bytes: new TextEncoder().encode('DICM') },
  ];
  assert.equal(crc32(new TextEncoder().encode('123456789')), 0xcbf43926); // the CRC-32 check value
  return storedZip(files).arrayBuffer().then((buf) => {
    const zip = path.join(dir, 'page.zip');
    fs.writeFileSync(zip, Buffer.from(buf));
    const out = execFileSync('python3', ['-c', `
import sys, zipfile, json
z = zipfile.ZipFile(sys.argv[1])
assert z.testzip() is None
print(json.dumps([[i.filename, i.compress_type, i.file_size, list(z.read(i)[:4])] for i in z.infolist()]))`, zip]).toString();
    assert.deepEqual(JSON.parse(out), files.map((f) => [f.name, 0, f.bytes.length, [...f.bytes.slice(0, 4)]]));
  });
});
