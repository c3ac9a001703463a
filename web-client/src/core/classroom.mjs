// classroom.mjs: who drives and who watches (role, viewers, the viewer link, asking for
// control and handing it over) and the session's own buttons (reset, pause), the same in
// every scene. Values come from the server's state messages; viewers see them disabled.
// The markup is index.html's #panel (#role, #viewers, #copy-link, #request-control,
// #requests, #reset, #pause).
import { h } from './dom.mjs';

export class Classroom {
  constructor(root, conn, { viewerLink }) {
    this.root = root;
    this.conn = conn;
    this.driver = false;
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
      this.conn.send('request_control');
      this.requestBtn.textContent = 'Asked the driver';
      this.requestBtn.disabled = true;
    });
    this.requests = root.querySelector('#requests');
  }

  /** A state message from the server. */
  state(st) {
    this.driver = st.role === 'driver';
    this.paused = st.paused;
    this.pauseBtn.textContent = st.paused ? 'Resume' : 'Pause';
    const viewers = st.clients - (st.driver ? 1 : 0);
    this.root.querySelector('#role').textContent = this.driver ? 'You drive' : st.driver ? 'You watch' : 'Nobody drives';
    this.root.querySelector('#viewers').textContent = `${viewers} viewer${viewers === 1 ? '' : 's'}`;
    for (const b of [this.root.querySelector('#reset'), this.pauseBtn]) b.disabled = !this.driver;
    this.requestBtn.hidden = this.driver;
    if (this.driver) {
      this.requestBtn.textContent = 'Request control';
      this.requestBtn.disabled = false;
    } else {
      this.requests.replaceChildren();
    }
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
