// connection.mjs: one WebSocket to a session, with event sequence numbers, latency from
// the seq echoed in frames, and reconnection with back-off. Refusals (unknown session,
// wrong token) are final: they are reported, never retried.
import { decompress } from 'fzstd';
import { MeshoptDecoder } from 'meshoptimizer';
import { createDecoder, KIND } from '../../protocol/js/softcast-proto.mjs';

export const decoderReady = MeshoptDecoder.ready.then(() => createDecoder({ decompress, MeshoptDecoder }));

const BACKOFF_MS = [500, 1000, 2000, 4000, 8000, 10000];
const UNTIMED = new Set(['slice', 'ping', 'request_control', 'handover', 'camera']);

export class Connection {
  /** url: ws://host:port/?session=ID&token=T; handlers: onMesh, onSlice, onTable (cloth LODs),
   *  onText, onStatus. */
  constructor(url, handlers) {
    this.url = url;
    this.h = handlers;
    this.seq = 0;
    this.sent = new Map();        // seq -> performance.now() at send, for latency
    this.latencies = [];          // recent input-to-frame latencies, ms
    this.bytes = 0;
    this.attempt = 0;
    this.final = null;            // a refusal: no more retries
    this.state = 'connecting';
    this.key = null;              // the keyframe the deltas apply to
  }

  async start() {
    this.dec = await decoderReady;
    this.open();
  }

  open() {
    this.status('connecting');
    const ws = new WebSocket(this.url);
    ws.binaryType = 'arraybuffer';
    this.ws = ws;
    ws.onopen = () => { this.attempt = 0; this.status('connected'); };
    ws.onmessage = (m) => this.message(m.data);
    ws.onclose = (e) => {
      if (this.ws !== ws) return;
      this.key = null;
      if (this.final) { this.status('refused', this.final); return; }
      const wait = BACKOFF_MS[Math.min(this.attempt++, BACKOFF_MS.length - 1)];
      this.status('reconnecting', `connection lost (${e.code || 'no code'}); retrying in ${(wait / 1000).toFixed(1)} s`);
      this.timer = setTimeout(() => this.open(), wait);
    };
  }

  close() {
    clearTimeout(this.timer);
    this.final = this.final ?? 'closed';
    this.ws?.close();
  }

  status(state, detail = '') {
    this.state = state;
    this.h.onStatus?.(state, detail);
  }

  /** Send an event; returns its seq. Events that change the scene are timed until a mesh
   *  frame echoes them; slices, pings and control requests are not (frames echo only the
   *  driver's scene events). */
  send(type, fields = {}) {
    if (!this.ws || this.ws.readyState !== WebSocket.OPEN) return 0;
    const seq = ++this.seq;
    if (!UNTIMED.has(type)) this.sent.set(seq, performance.now());
    if (this.sent.size > 512) this.sent.delete(this.sent.keys().next().value);
    this.ws.send(JSON.stringify({ type, seq, ...fields }));
    return seq;
  }

  message(data) {
    if (typeof data === 'string') {
      const t = JSON.parse(data);
      if (t.type === 'error' && t.error === 'refused') {
        // "unknown session" or "wrong or missing token": retrying cannot help.
        this.final = t.detail === 'unknown session'
          ? 'This session does not exist (any more). Ask for a new link, or start one from the lobby.'
          : `The server refused this link: ${t.detail}.`;
      }
      this.h.onText?.(t);
      return;
    }
    const bytes = new Uint8Array(data);
    this.bytes += bytes.length;
    const f = this.dec.decode(bytes);
    const now = performance.now();
    if (f.header.kind === KIND.SLICE) { this.h.onSlice?.(f); return; }
    // A LOD table describes the keyframe of the same frame number, which follows it.
    if (f.header.kind === KIND.LOD_TABLE) { this.pendingTable = f; return; }
    for (const [seq, t0] of this.sent) {
      if (seq > f.header.lastSeq) break;
      this.latencies.push(now - t0);
      this.sent.delete(seq);
    }
    if (this.latencies.length > 240) this.latencies.splice(0, this.latencies.length - 240);
    if (f.header.kind === KIND.MESH_KEY) {
      this.key = f;
      if (this.pendingTable?.header.frame === f.header.frame) {
        this.table = this.pendingTable;
        this.h.onTable?.(this.table);
      }
      this.h.onMesh?.(f, f.surfaces.map((s) => s.q));
    } else if (this.key && f.keyFrame === this.key.header.frame) {
      this.h.onMesh?.(f, f.surfaces.map((_, s) => this.dec.applyDelta(this.key, f, s)));
    } // else: a delta for a keyframe we do not hold; the server sends the keyframe next
  }
}
