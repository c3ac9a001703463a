// classroom.mjs: who drives and who watches (role, viewers, the viewer link, asking for
// control and handing it over) and the session's own buttons (reset, pause), the same in
// every scene. Values come from the server's state messages; viewers see them disabled.
// The markup is index.html's #panel (#role, #viewers, #copy-link, #request-control,
// #control-open, #requests, #reset, #pause, #record, #download-recording, and #replay in a
// replay session).
import { h } from './dom.mjs';

// A request the driver has not answered in this long may be made again.
const ASK_AGAIN_MS = 20000;

export class Classroom {
  constructor(root, conn, { viewerLink }) {
    this.root = root;
    this.conn = conn;
    this.driver = false;
    this.drivenBy = null; // the driver's name, from the last state
    this.askedOf = undefined; // the driver this page asked for control, while it waits
    root.querySelector('#reset').addEventListener('click', () => this.conn.send('reset'));
    this.pauseBtn = root.querySelector('#pause');
    this.pauseBtn.addEventListener('click', () => this.conn.send(this.paused ? 'resume' : 'pause'));
    root.querySelector('#copy-link').addEventListener('click', async (e) => {
      const link = viewerLink();
      try { await navigator.clipboard.writeText(link); e.target.textContent = 'Copied'; } catch { prompt('Viewer link', link); }
      setTimeout(() => { e.target.textContent = 'Copy viewer link'; }, 1500);
    });
    this.requestBtn = root.querySelector('#request-control');
    this.requestBtn.addEventListener('click', () => {
      if (!this.conn.send('request_control')) return; // not connected: nothing was asked
      this.askedOf = this.drivenBy; // pending while that driver drives
      this.requestBtn.textContent = 'Asked the driver';
      this.requestBtn.disabled = true;
      // The driver may ignore a request, and nothing says so: the page may ask again later.
      clearTimeout(this.askAgain);
      this.askAgain = setTimeout(() => {
        if (this.askedOf === undefined || this.driver) return;
        this.ignoredBy = this.askedOf; // "Ask again" while that driver drives
        this.askedOf = undefined;
        this.requestBtn.textContent = 'Ask again';
        this.requestBtn.disabled = false;
      }, ASK_AGAIN_MS);
    });
    this.requests = root.querySelector('#requests');
    // The driver's: whether a viewer may take control while nobody drives.
    this.controlOpen = root.querySelector('#control-open');
    this.controlOpen.addEventListener('change', () => this.conn.send('set_control', { open: this.controlOpen.checked }));
    // Recording: the driver starts and stops it; the file comes with the control token.
    this.recording = false;
    this.recordBtn = root.querySelector('#record');
    this.recordBtn.addEventListener('click', () => this.conn.send(this.recording ? 'record_stop' : 'record_start'));
    this.downloadLink = root.querySelector('#download-recording');
    this.downloadLink.addEventListener('click', (e) => { e.preventDefault(); this.download(); });
    this.seek = root.querySelector('#seek');
    this.seek.addEventListener('change', () => this.conn.send('seek', { frame: Number(this.seek.value) }));
  }

  /** A recording message: started, or stopped with its download. */
  recordingState(t) {
    this.recording = t.state === 'recording';
    this.recordBtn.textContent = this.recording ? 'Stop recording' : 'Record';
    if (t.state === 'stopped') {
      this.downloadPath = t.download;
      this.downloadLink.hidden = false;
      this.downloadLink.textContent = `Download recording (${t.end_frame - t.start_frame} frames, ${(t.bytes / 1048576).toFixed(1)} MiB)`;
    }
  }

  async download() {
    const r = await fetch(this.downloadPath, { headers: { authorization: `Bearer ${this.token}` } });
    if (!r.ok) { this.downloadLink.textContent = `Download failed: HTTP ${r.status}`; return; }
    const url = URL.createObjectURL(await r.blob());
    const a = Object.assign(document.createElement('a'), { href: url, download: `${this.sessionId}.screc` });
    document.body.append(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(url), 10000);
  }

  /** The frame shown now (a replay's slider follows it). */
  frame(n) {
    if (this.replay && document.activeElement !== this.seek) {
      this.seek.value = String(n);
      this.root.querySelector('#replay-at').textContent = `frame ${n} of ${this.replay.start_frame}-${this.replay.end_frame}`;
    }
  }

  /** A state message from the server. */
  state(st) {
    this.driver = st.role === 'driver';
    this.paused = st.paused;
    this.pauseBtn.textContent = st.paused ? 'Resume' : 'Pause';
    const viewers = st.clients - (st.driver ? 1 : 0);
    this.root.querySelector('#role').textContent = this.driver ? 'You drive' : st.driver ? 'You watch' : 'Nobody drives';
    this.root.querySelector('#viewers').textContent = `${viewers} viewer${viewers === 1 ? '' : 's'}`;
    for (const b of [this.root.querySelector('#reset'), this.pauseBtn, this.recordBtn, this.seek]) b.disabled = !this.driver;
    this.replay = st.replay ?? null;
    this.root.querySelector('#replay').hidden = !this.replay;
    this.recordBtn.hidden = !!this.replay;
    this.root.querySelector('#reset').hidden = !!this.replay;
    if (this.replay) {
      this.seek.min = String(this.replay.start_frame);
      this.seek.max = String(this.replay.end_frame);
      this.root.querySelector('#replay-end').textContent = !this.replay.ended ? ''
        : this.replay.same_state ? 'ended: the same state as the recording' : 'ended: the state differs from the recording';
    }
    this.requestBtn.hidden = this.driver;
    this.controlOpen.checked = st.control_open !== false;
    this.root.querySelector('#control-open-row').hidden = !this.driver;
    // The request button follows the state: closed with nobody driving; waiting while the
    // driver asked still drives (it may hand over or ignore us); else free to ask again.
    this.drivenBy = st.driver ?? null;
    const closed = !st.driver && st.control_open === false;
    if (this.driver || closed || !st.driver || st.driver !== this.askedOf) this.askedOf = undefined;
    const waiting = this.askedOf !== undefined;
    const again = !waiting && st.driver && st.driver === this.ignoredBy;
    this.requestBtn.textContent = closed ? 'Control is closed' : waiting ? 'Asked the driver' : again ? 'Ask again' : 'Request control';
    this.requestBtn.disabled = closed || waiting;
    if (!this.driver) this.requests.replaceChildren();
  }

  /** A viewer asked the driver for control. */
  controlRequest(from) {
    if ([...this.requests.children].some((d) => d.dataset.from === from)) return;
    const d = h('div', { dataset: { from } }, `${from} asks for control `);
    d.append(
      h('button', { on: { click: () => { this.conn.send('handover', { to: from }); d.remove(); } } }, 'Hand over'),
      ' ',
      h('button', { on: { click: () => d.remove() } }, 'Ignore'));
    this.requests.append(d);
  }
}
