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

// A CT slice: stored int16 values, HU = 2 * stored - 1024.
function writeSlice(file, { uid, instance, rows, cols, ipp, spacing, pixels }) {
  const sop = `1.2.826.0.1.3680043.8.498.${uid.split('.').at(-1)}.${instance}`;
  const ct = '1.2.840.10008.5.1.4.1.1.2', explicitLE = '1.2.840.10008.1.2.1';
  const meta = Buffer.concat([
    element(0x0002, 0x0001, 'OB', Buffer.from([0, 1])),
    element(0x0002, 0x0002, 'UI', ct),
    element(0x0002, 0x0003, 'UI', sop),
    element(0x0002, 0x0010, 'UI', explicitLE),
  ]);
  const groupLength = Buffer.alloc(4);
  groupLength.writeUInt32LE(meta.length);
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
  fs.writeFileSync(file, Buffer.concat([Buffer.alloc(128), Buffer.from('DICM'),
    element(0x0002, 0x0000, 'UL', groupLength), meta, ...data]));
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
