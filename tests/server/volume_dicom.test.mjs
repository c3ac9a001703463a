// A DICOM series as the server's --volume: a folder of CT slices (written here by hand as
// DICOM Part 10, explicit VR little endian, so the reader is met by a writer not its own),
// read with the series' dims and spacing, the largest of two series by default and the
// other by --series; the log says what was read and never the patient's name or ID.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { startServer, api } from './harness.mjs';

const LONG_LENGTH = new Set(['OB', 'OW', 'OF', 'SQ', 'UT', 'UN']);

// One data element, explicit VR little endian; the value padded to an even length.
function element(group, elem, vr, value) {
  let v = Buffer.isBuffer(value) ? value : Buffer.from(String(value), 'latin1');
  if (v.length % 2) v = Buffer.concat([v, Buffer.from(vr === 'UI' || vr === 'OB' ? [0] : [0x20])]);
  const long = LONG_LENGTH.has(vr), h = Buffer.alloc(long ? 12 : 8);
  h.writeUInt16LE(group, 0);
  h.writeUInt16LE(elem, 2);
  h.write(vr, 4, 'latin1');
  if (long) h.writeUInt32LE(v.length, 8);
  else h.writeUInt16LE(v.length, 6);
  return Buffer.concat([h, v]);
}
const us = (n) => { const b = Buffer.alloc(2); b.writeUInt16LE(n); return b; };

// A DICOM Part 10 file: the preamble, the file meta group (explicit VR little endian) for the
// SOP class and instance, then the data set's elements (in tag order).
function writePart10(file, sopClass, sop, data) {
  const meta = Buffer.concat([
    element(0x0002, 0x0001, 'OB', Buffer.from([0, 1])),
    element(0x0002, 0x0002, 'UI', sopClass),
    element(0x0002, 0x0003, 'UI', sop),
    element(0x0002, 0x0010, 'UI', '1.2.840.10008.1.2.1'),
  ]);
  const groupLength = Buffer.alloc(4);
  groupLength.writeUInt32LE(meta.length);
  fs.writeFileSync(file, Buffer.concat([Buffer.alloc(128), Buffer.from('DICM'),
    element(0x0002, 0x0000, 'UL', groupLength), meta, ...data]));
}

// A CT slice: stored int16 values, HU = 2 * stored - 1024.
function writeSlice(file, { uid, instance, rows, cols, ipp, spacing, pixels }) {
  const sop = `1.2.826.0.1.3680043.8.498.${uid.split('.').at(-1)}.${instance}`;
  const ct = '1.2.840.10008.5.1.4.1.1.2';
  const px = Buffer.alloc(rows * cols * 2);
  pixels.forEach((v, i) => px.writeInt16LE(v, 2 * i));
  const data = [
    element(0x0008, 0x0016, 'UI', ct), element(0x0008, 0x0018, 'UI', sop),
    element(0x0008, 0x0060, 'CS', 'CT'),
    element(0x0010, 0x0010, 'PN', 'ROE^RICHARD'), element(0x0010, 0x0020, 'LO', 'MRN-99812'),
    element(0x0020, 0x000d, 'UI', '1.2.826.0.1.3680043.8.498.7'), element(0x0020, 0x000e, 'UI', uid),
    element(0x0020, 0x0013, 'IS', instance), element(0x0020, 0x0032, 'DS', ipp.join('\\')),
    element(0x0020, 0x0037, 'DS', '1\\0\\0\\0\\1\\0'),
    element(0x0028, 0x0002, 'US', us(1)), element(0x0028, 0x0004, 'CS', 'MONOCHROME2'),
    element(0x0028, 0x0010, 'US', us(rows)), element(0x0028, 0x0011, 'US', us(cols)),
    element(0x0028, 0x0030, 'DS', `${spacing[1]}\\${spacing[0]}`),
    element(0x0028, 0x0100, 'US', us(16)), element(0x0028, 0x0101, 'US', us(16)),
    element(0x0028, 0x0102, 'US', us(15)), element(0x0028, 0x0103, 'US', us(1)),
    element(0x0028, 0x1052, 'DS', '-1024'), element(0x0028, 0x1053, 'DS', '2'),
    element(0x7fe0, 0x0010, 'OW', px),
  ];
  writePart10(file, ct, sop, data);
}

// A sequence of items, explicit lengths; each item the elements given.
function item(...elements) {
  const body = Buffer.concat(elements), h = Buffer.alloc(8);
  h.writeUInt16LE(0xfffe, 0); h.writeUInt16LE(0xe000, 2); h.writeUInt32LE(body.length, 4);
  return Buffer.concat([h, body]);
}
const seq = (group, elem, ...items) => element(group, elem, 'SQ', Buffer.concat(items));

// A whole series in one Enhanced CT file, as scanners export it: the frames in a shuffled
// order, each placed by its own PlanePosition group; orientation and pixel spacing shared;
// rescale per frame (HU = 2 * stored - 1024). The body as writeSeries's.
function writeEnhanced(file, uid, [nx, ny, nz], spacing) {
  const sop = `1.2.826.0.1.3680043.8.498.${uid.split('.').at(-1)}.1`;
  const enhanced = '1.2.840.10008.5.1.4.1.1.2.1';
  const px = Buffer.alloc(nx * ny * nz * 2), perFrame = [];
  for (let q = 0; q < nz; q++) {
    const k = (q * 7 + 3) % nz;
    for (let j = 0; j < ny; j++) {
      for (let i = 0; i < nx; i++) px.writeInt16LE(Math.hypot(i - nx / 2, j - ny / 2) < nx / 3 ? 532 : 12, 2 * (i + nx * (j + ny * q)));
    }
    perFrame.push(item(
      seq(0x0020, 0x9113, item(element(0x0020, 0x0032, 'DS', [-20, -30, 50 + k * spacing[2]].join('\\')))),
      seq(0x0028, 0x9145, item(element(0x0028, 0x1052, 'DS', '-1024'), element(0x0028, 0x1053, 'DS', '2'),
        element(0x0028, 0x1054, 'LO', 'HU'))),
    ));
  }
  const shared = item(
    seq(0x0020, 0x9116, item(element(0x0020, 0x0037, 'DS', '1\\0\\0\\0\\1\\0'))),
    seq(0x0028, 0x9110, item(element(0x0018, 0x0050, 'DS', spacing[2]), element(0x0028, 0x0030, 'DS', `${spacing[1]}\\${spacing[0]}`))),
  );
  const data = [
    element(0x0008, 0x0016, 'UI', enhanced), element(0x0008, 0x0018, 'UI', sop),
    element(0x0008, 0x0060, 'CS', 'CT'),
    element(0x0010, 0x0010, 'PN', 'ROE^RICHARD'), element(0x0010, 0x0020, 'LO', 'MRN-99812'),
    element(0x0020, 0x000d, 'UI', '1.2.826.0.1.3680043.8.498.7'), element(0x0020, 0x000e, 'UI', uid),
    element(0x0020, 0x0013, 'IS', 1),
    element(0x0028, 0x0002, 'US', us(1)), element(0x0028, 0x0004, 'CS', 'MONOCHROME2'),
    element(0x0028, 0x0008, 'IS', nz),
    element(0x0028, 0x0010, 'US', us(ny)), element(0x0028, 0x0011, 'US', us(nx)),
    element(0x0028, 0x0100, 'US', us(16)), element(0x0028, 0x0101, 'US', us(16)),
    element(0x0028, 0x0102, 'US', us(15)), element(0x0028, 0x0103, 'US', us(1)),
    seq(0x5200, 0x9229, shared), seq(0x5200, 0x9230, ...perFrame),
    element(0x7fe0, 0x0010, 'OW', px),
  ];
  writePart10(file, enhanced, sop, data);
}

// A body (a cylinder of 40 HU along the slices) in air, nz slices, in a shuffled order.
function writeSeries(dir, uid, [nx, ny, nz], spacing) {
  for (let q = 0; q < nz; q++) {
    const k = (q * 7 + 3) % nz, pixels = [];
    for (let j = 0; j < ny; j++) {
      for (let i = 0; i < nx; i++) pixels.push(Math.hypot(i - nx / 2, j - ny / 2) < nx / 3 ? 532 : 12);
    }
    writeSlice(path.join(dir, `${uid.split('.').at(-1)}-${(k * 13) % 101}.dcm`), {
      uid, instance: k + 1, rows: ny, cols: nx, ipp: [-20, -30, 50 + k * spacing[2]], spacing, pixels,
    });
  }
}

test('volume: a DICOM folder as --volume, the largest series by default and another by --series', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'softcast-dicom-'));
  const big = '1.2.826.0.1.3680043.8.498.101', small = '1.2.826.0.1.3680043.8.498.102';
  try {
    writeSeries(dir, big, [40, 36, 20], [0.7, 0.8, 2.0]);
    writeSeries(dir, small, [24, 24, 9], [1.5, 1.5, 3.0]);
    let srv = await startServer(['--volume', dir]);
    try {
      const log = srv.stderr();
      assert.match(log, new RegExp(`DICOM series ${big.replaceAll('.', '\\.')} \\(CT, 20 slices; 2 series found, 9 files skipped; from a folder\\)`));
      assert.match(log, /dicom 40x36x20, stored LPS, read as RAS/);
      assert.doesNotMatch(log, /ROE|RICHARD|MRN-99812/);
      const s = await api(srv.base, 'POST', '/api/sessions', { scene: 'volume' });
      assert.equal(s.status, 201, s.text);
      // The body runs the whole length: 8 elements of air at each end (z).
      assert.deepEqual(s.json.dims, [40, 36, 36]);
      assert.deepEqual(s.json.spacing.map((x) => Math.round(x * 1000) / 1000), [0.7, 0.8, 2]);
      assert.doesNotMatch(s.text, /ROE|RICHARD|MRN-99812/);
    } finally {
      assert.equal(await srv.stop(), 0, srv.stderr());
    }
    srv = await startServer(['--volume', dir, '--series', small]);
    try {
      const s = await api(srv.base, 'POST', '/api/sessions', { scene: 'volume' });
      assert.equal(s.status, 201, s.text);
      assert.deepEqual(s.json.dims, [24, 24, 25]);
      assert.deepEqual(s.json.spacing.map((x) => Math.round(x * 1000) / 1000), [1.5, 1.5, 3]);
    } finally {
      assert.equal(await srv.stop(), 0, srv.stderr());
    }
    await assert.rejects(startServer(['--volume', dir, '--series', '1.2.3']),
      /no series with UID 1\.2\.3 here; the folder holds 2: .*101 \(20 slices\), .*102 \(9 slices\)/);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test('volume: one Enhanced CT file uploaded (a series in one .dcm) is read alone, again beside its first copy', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'softcast-enhanced-'));
  const srv = await startServer([]);
  try {
    const file = path.join(dir, 'series.dcm');
    writeEnhanced(file, '1.2.826.0.1.3680043.8.498.103', [40, 36, 20], [0.7, 0.8, 2.0]);
    // Twice: the first upload's file is kept beside where the second arrives (the server's
    // folder of uploads); a file read as a slice of its folder's series meets its copy.
    for (let n = 0; n < 2; n++) {
      const r = await fetch(`${srv.base}/api/volumes?name=series.dcm`, {
        method: 'POST', headers: { 'content-type': 'application/octet-stream' }, body: fs.readFileSync(file),
      });
      const up = await r.json();
      assert.equal(r.status, 202, JSON.stringify(up));
      let s;
      for (const deadline = Date.now() + 60000; ;) {
        s = (await api(srv.base, 'GET', `/api/sessions/${up.id}`)).json;
        if (s.state !== 'loading' || Date.now() > deadline) break;
        await new Promise((res) => setTimeout(res, 20));
      }
      assert.equal(s.state, 'ready', `upload ${n + 1}: ${JSON.stringify(s)}`);
      assert.deepEqual(s.dims, [40, 36, 36]); // the body runs the whole length: air at each end
      assert.deepEqual(s.spacing.map((x) => Math.round(x * 1000) / 1000), [0.7, 0.8, 2]);
      assert.deepEqual(s.dataset.stored_dims, [40, 36, 20]);
      assert.deepEqual(s.dataset.hu_range, [-1000, 40]);
      assert.doesNotMatch(JSON.stringify(s), /ROE|RICHARD|MRN-99812/);
    }
  } finally {
    assert.equal(await srv.stop(), 0, srv.stderr());
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
