// connection.mjs: one session's connection, seen from the page: events with sequence
// numbers, latency from the seq echoed in frames, reconnection with back-off. Refusals
// (unknown session, wrong token) are final: they are reported, never retried.
// The socket itself and the frame decoding live in a Web Worker (wire.mjs, bundled as
// dist/wire.js): frames reach the page decoded, as updates of the objects shown, one at a
// time; the page calls ack() once it has taken one, and the worker then posts the next (all
// that changed since, up to the newest frame).

const BACKOFF_MS = [500, 1000, 2000, 4000, 8000, 10000];
const UNTIMED = new Set(['slice', 'ping', 'request_control', 'handover', 'camera']);

export class Connection {
  /** url: ws://host:port/?session=ID&token=T; handlers: onObjects (an update of the objects,
   *  see wire.mjs; call ack() when taken), onSlice, onText, onStatus. */
  constructor(url, handlers) {
    this.url = url;
    this.h = handlers;
    this.seq = 0;
    this.sent = new Map();        // seq -> performance.now() at send, for latency
    this.latencies = [];          // recent input-to-frame latencies, ms
    this.bytes = 0;               // bytes received (frames), from the worker's counters
    this.received = 0;            // object frames received by the worker
    this.skipped = 0;             // of which never shown (latest wins; refused; before a snapshot)
    this.decodeMs = 0;            // the worker's time for the last update (its frames and the diff)
    this.attempt = 0;
    this.final = null;            // a refusal: no more retries
    this.state = 'connecting';
    this.connected = false;
  }

  start() {
    this.worker = new Worker(new URL('./wire.js', import.meta.url), { type: 'module' });
    this.worker.onmessage = (e) => this.event(e.data);
    this.worker.onerror = (e) => {
      this.final = `The frame decoder did not start (${e.message || 'dist/wire.js'}).`;
      this.status('refused', this.final);
    };
    this.open();
  }

  open() {
    this.status('connecting');
    this.worker.postMessage({ op: 'open', url: this.url });
  }

  /** The socket closes as if the network dropped it: the page reconnects (tests use it). */
  drop() {
    this.worker.postMessage({ op: 'close' });
  }

  close() {
    clearTimeout(this.timer);
    this.final = this.final ?? 'closed';
    this.worker?.postMessage({ op: 'close' });
  }

  /** The worker's last 64 decodes, [frame, decodedAt] (ms since the epoch): when and what
   *  it decoded, for people debugging and the e2e tests. */
  decodeLog() {
    return new Promise((resolve) => {
      this.logWaiters = [...(this.logWaiters ?? []), resolve];
      this.worker.postMessage({ op: 'log' });
    });
  }

  /** Object id's scalar names a category: draw value k in colors[k] (0xRRGGBB) rather than
   *  through viridis (the soft body's regions). */
  palette(id, colors) {
    this.worker.postMessage({ op: 'palette', id, colors });
  }

  /** The page has taken the last update: the worker may post the next. */
  ack() {
    this.worker.postMessage({ op: 'ack' });
  }

  status(state, detail = '') {
    this.state = state;
    this.h.onStatus?.(state, detail);
  }

  /** Send an event; returns its seq. Events that change the scene are timed until an object
   *  frame shown echoes them; slices, pings and control requests are not (frames echo only the
   *  driver's scene events). */
  send(type, fields = {}) {
    if (!this.connected) return 0;
    const seq = ++this.seq;
    if (!UNTIMED.has(type)) this.sent.set(seq, performance.now());
    if (this.sent.size > 512) this.sent.delete(this.sent.keys().next().value);
    this.worker.postMessage({ op: 'send', text: JSON.stringify({ type, seq, ...fields }) });
    return seq;
  }

  event(m) {
    this.bytes = m.bytes;
    this.received = m.received;
    this.skipped = m.skipped;
    this.decodeMs = m.decodeMs;
    if (m.ev === 'open') {
      this.attempt = 0;
      this.connected = true;
      this.status('connected');
    } else if (m.ev === 'close') {
      this.connected = false;
      if (this.final) { this.status('refused', this.final); return; }
      const wait = BACKOFF_MS[Math.min(this.attempt++, BACKOFF_MS.length - 1)];
      this.status('reconnecting', `connection lost (${m.code || 'no code'}); retrying in ${(wait / 1000).toFixed(1)} s`);
      this.timer = setTimeout(() => this.open(), wait);
    } else if (m.ev === 'text') {
      this.text(JSON.parse(m.data));
    } else if (m.ev === 'slice') {
      this.h.onSlice?.(m);
    } else if (m.ev === 'objects') {
      this.objects(m);
    } else if (m.ev === 'log') {
      this.logWaiters?.shift()?.(m.decodes);
    } else if (m.ev === 'error') {
      console.warn(`softcast: ${m.message}`);
    }
  }

  text(t) {
    if (t.type === 'error' && t.error === 'refused') {
      // "unknown session" or "wrong or missing token": retrying cannot help.
      this.final = t.detail === 'unknown session'
        ? 'This session does not exist (any more). Ask for a new link, or start one from the lobby.'
        : `The server refused this link: ${t.detail}.`;
    }
    this.h.onText?.(t);
  }

  objects(m) {
    const now = performance.now();
    for (const [seq, t0] of this.sent) {
      if (seq > m.lastSeq) break;
      this.latencies.push(now - t0);
      this.sent.delete(seq);
    }
    if (this.latencies.length > 240) this.latencies.splice(0, this.latencies.length - 240);
    this.h.onObjects?.(m);
  }
}
