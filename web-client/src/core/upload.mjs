// upload.mjs: the lobby's "open a CT" card. A NIfTI file (.nii, .nii.gz), a .zip, a DICOM
// file, or a DICOM folder (packed here into a stored zip: storedZip below) is dropped on
// the card or chosen with its file inputs (keyboard users), sent as the body of POST
// /api/volumes with a progress bar (XMLHttpRequest's upload events), then the session the
// server made is polled through its loading stages (GET /api/sessions/ID) until it is
// ready, and opened. The volumes the server keeps (--volume-dir, GET /api/volumes) are
// listed with a button each that starts a session on one. Names no scene: the server says
// which scene takes volumes (GET /api/volumes: scene).
import { h } from './dom.mjs';

const STAGES = ['queued', 'reading', 'fitting', 'body', 'surfaces'];

// ----------------------------------------------------------- a stored zip

const CRC_TABLE = (() => {
  const t = new Uint32Array(256);
  for (let n = 0; n < 256; n++) {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
    t[n] = c >>> 0;
  }
  return t;
})();

export function crc32(bytes) {
  let c = 0xffffffff;
  for (let i = 0; i < bytes.length; i++) c = CRC_TABLE[(c ^ bytes[i]) & 255] ^ (c >>> 8);
  return (c ^ 0xffffffff) >>> 0;
}

/** files: [{name, bytes: Uint8Array}] -> a Blob of a zip that stores them uncompressed
 *  (method 0): a local header and the bytes for each, then the central directory and its
 *  end record (PKWARE APPNOTE 4.3). Names in UTF-8 (flag bit 11); no zip64, so at most
 *  65535 files and 4 GiB, far above what an upload may be. */
export function storedZip(files) {
  const enc = new TextEncoder(), parts = [], central = [];
  let offset = 0;
  for (const f of files) {
    const name = enc.encode(f.name), crc = crc32(f.bytes), n = f.bytes.length;
    const local = new DataView(new ArrayBuffer(30));
    local.setUint32(0, 0x04034b50, true); // local file header
    local.setUint16(4, 20, true); // version needed: 2.0
    local.setUint16(6, 0x0800, true); // UTF-8 names
    local.setUint16(8, 0, true); // stored
    local.setUint32(14, crc, true);
    local.setUint32(18, n, true); // compressed size
    local.setUint32(22, n, true); // uncompressed size
    local.setUint16(26, name.length, true);
    parts.push(local, name, f.bytes);
    const cd = new DataView(new ArrayBuffer(46));
    cd.setUint32(0, 0x02014b50, true); // central directory header
    cd.setUint16(4, 20, true); // made by
    cd.setUint16(6, 20, true); // needed
    cd.setUint16(8, 0x0800, true);
    cd.setUint16(10, 0, true);
    cd.setUint32(16, crc, true);
    cd.setUint32(20, n, true);
    cd.setUint32(24, n, true);
    cd.setUint16(28, name.length, true);
    cd.setUint32(42, offset, true); // where its local header is
    central.push(cd, name);
    offset += 30 + name.length + n;
  }
  const cdSize = central.reduce((s, p) => s + p.byteLength, 0);
  const end = new DataView(new ArrayBuffer(22));
  end.setUint32(0, 0x06054b50, true); // end of central directory
  end.setUint16(8, files.length, true);
  end.setUint16(10, files.length, true);
  end.setUint32(12, cdSize, true);
  end.setUint32(16, offset, true);
  return new Blob([...parts, ...central, end], { type: 'application/zip' });
}

// ------------------------------------------------------- what was dropped

/** Every file under a dropped directory entry, with its path inside the folder. */
async function filesOf(entry, prefix = '') {
  if (entry.isFile) {
    const file = await new Promise((res, rej) => entry.file(res, rej));
    return [{ name: prefix + entry.name, file }];
  }
  const reader = entry.createReader(), out = [];
  for (;;) { // readEntries hands over a batch at a time, an empty one at the end
    const batch = await new Promise((res, rej) => reader.readEntries(res, rej));
    if (!batch.length) break;
    for (const e of batch) out.push(...(await filesOf(e, `${prefix}${entry.name}/`)));
  }
  return out;
}

/** A folder's files packed into one stored zip named after it. */
async function packFolder(name, files) {
  const list = [];
  for (const f of files.filter((x) => !x.name.split('/').pop().startsWith('.')))
    list.push({ name: f.name, bytes: new Uint8Array(await f.file.arrayBuffer()) });
  return { name: `${name}.zip`, blob: storedZip(list) };
}

/** What a drop holds, as one {name, blob} to send: a file as it is, a folder zipped. */
async function fromDrop(transfer) {
  const entries = [...transfer.items].map((i) => i.webkitGetAsEntry?.()).filter(Boolean);
  const dir = entries.find((e) => e.isDirectory);
  if (dir) return packFolder(dir.name, await filesOf(dir));
  const file = transfer.files[0];
  return file ? { name: file.name, blob: file } : null;
}

// ------------------------------------------------------------ the card

/** The card in `root`; api(method, path, body) is the shell's JSON fetch; open(session)
 *  goes to a session the server made. window.softcastUpload.phases (and sessionStorage's
 *  softcast-upload-phases, which outlives the move to the session) record what the card
 *  showed, for the e2e tests. */
export function uploadCard(root, { api, open }) {
  const bar = h('progress', { id: 'upload-progress', max: 1, value: 0, hidden: true });
  const status = h('p', { id: 'upload-status', class: 'hint' });
  const error = h('p', { id: 'upload-error', class: 'error', hidden: true });
  const fileInput = h('input', { type: 'file', id: 'upload-file', accept: '.nii,.gz,.zip,.dcm,application/zip' });
  const folderInput = h('input', { type: 'file', id: 'upload-folder', webkitdirectory: true });
  const kept = h('div', { id: 'kept-volumes' });
  const zone = h('div', { id: 'dropzone', class: 'dropzone', tabindex: 0 },
    h('p', {}, 'Drop a CT here: a NIfTI file (.nii, .nii.gz), a DICOM folder or a .zip of one, or one multi-frame (enhanced) DICOM file.'),
    h('div', { class: 'row' },
      h('label', {}, 'File ', fileInput),
      h('label', {}, 'DICOM folder ', folderInput)),
    bar, status, error);
  root.append(zone, kept);
  const phases = [];
  window.softcastUpload = { phases };
  const show = (phase, text, value) => {
    phases.push({ phase, text, value });
    try { // kept past the page's move to the session, for the tests
      sessionStorage.setItem('softcast-upload-phases', JSON.stringify(phases));
    } catch { /* no storage: the tests read window.softcastUpload instead */ }
    status.textContent = text;
    bar.hidden = value === undefined;
    if (value !== undefined) bar.value = value;
  };
  const fail = (text) => {
    error.hidden = false;
    error.textContent = text;
    bar.hidden = true;
    phases.push({ phase: 'failed', text });
  };
  const busy = (on) => {
    fileInput.disabled = folderInput.disabled = on;
    zone.classList.toggle('busy', on);
  };

  // Poll the session through its stages until it is ready (then open it) or failed.
  const follow = async (s) => {
    // The server's answer to the upload says where the loading is already (queued, or a
    // stage): shown at once, since a small volume may be ready by the first poll.
    // With its token: the server tells the name and a failure's reason to its holders only.
    const url = `/api/sessions/${encodeURIComponent(s.id)}?token=${encodeURIComponent(s.control_token)}`;
    for (let cur = s; ; cur = await api('GET', url)) {
      if (cur.state === 'ready') {
        const d = cur.dataset ?? {};
        show('ready', `Ready: ${d.name ?? ''} ${cur.dims?.join(' x ') ?? ''}`, 1);
        open(s);
        return;
      }
      if (cur.state === 'failed') throw new Error(cur.error);
      if (cur.state === 'loading') {
        const k = Math.max(0, STAGES.indexOf(cur.stage));
        show('loading', `Loading on the server: ${cur.stage}`, (k + 0.5) / STAGES.length);
      }
      await new Promise((r) => setTimeout(r, 150));
    }
  };

  const send = ({ name, blob }) => new Promise((resolve, reject) => {
    const xhr = new XMLHttpRequest();
    xhr.open('POST', `/api/volumes?name=${encodeURIComponent(name)}`);
    xhr.setRequestHeader('content-type', 'application/octet-stream');
    const key = sessionStorage.getItem('softcast-key'); // the operator's, when the server asks
    if (key) xhr.setRequestHeader('authorization', `Bearer ${key}`);
    const mb = (n) => (n / 1048576).toFixed(1);
    xhr.upload.onprogress = (e) => {
      const total = e.lengthComputable ? e.total : blob.size;
      show('uploading', `Uploading ${name}: ${mb(e.loaded)} of ${mb(total)} MiB`, total ? e.loaded / total : 0);
    };
    xhr.onload = () => {
      let j = null;
      try { j = JSON.parse(xhr.responseText); } catch { /* not JSON */ }
      if (xhr.status === 202 && j) resolve(j);
      else reject(new Error(j?.detail ? `${j.error}: ${j.detail}` : `HTTP ${xhr.status}`));
    };
    xhr.onerror = () => reject(new Error('the upload was cut off (too large for this server, or the network)'));
    show('uploading', `Uploading ${name}`, 0);
    xhr.send(blob);
  });

  // job: a promise of the session the server made (loading).
  const run = async (job) => {
    error.hidden = true;
    busy(true);
    try {
      await follow(await job());
    } catch (e) {
      fail(`Could not open it: ${e.message}`);
    } finally {
      busy(false);
    }
  };

  const start = (what) => run(async () => {
    const w = await what;
    if (!w) throw new Error('nothing to send in what was dropped');
    return send(w);
  });

  fileInput.addEventListener('change', () => {
    const f = fileInput.files[0];
    if (f) start(Promise.resolve({ name: f.name, blob: f }));
  });
  folderInput.addEventListener('change', () => {
    const files = [...folderInput.files];
    if (!files.length) return;
    const top = files[0].webkitRelativePath.split('/')[0] || 'dicom';
    start(packFolder(top, files.map((f) => ({ name: f.webkitRelativePath || f.name, file: f }))));
  });
  zone.addEventListener('dragover', (e) => { e.preventDefault(); zone.classList.add('over'); });
  zone.addEventListener('dragleave', () => zone.classList.remove('over'));
  zone.addEventListener('drop', (e) => {
    e.preventDefault();
    zone.classList.remove('over');
    start(fromDrop(e.dataTransfer));
  });

  // The volumes the server keeps, each a button that starts a session on it.
  api('GET', '/api/volumes').then((v) => {
    const mb = (n) => `${(n / 1048576).toFixed(1)} MiB`;
    status.textContent = `Uploads up to ${mb(v.upload_limit)}${v.kept ? '; kept on the server' : ''}.`;
    if (!v.volumes.length) return;
    kept.append(h('h3', {}, 'Volumes on this server'), h('ul', {}, v.volumes.map((x) => h('li', {},
      h('button', { on: { click: () => run(() => api('POST', '/api/sessions', { scene: v.scene, volume: x.name })) } },
        'Open'), ` ${x.name} (${x.format}, ${x.size ? mb(x.size) : 'folder'})`))));
  }).catch(() => {});
}
