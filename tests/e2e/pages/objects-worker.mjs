// objects-worker.mjs: the client's wire (web-client/src/core/wire.mjs) in a Web Worker, as
// wire.worker.mjs runs it, with a socket of its own: the page hands it frames ({op:
// 'frames', frames: [ArrayBuffer, ...]}: one burst) and every other command goes to the wire.
// Its updates reach the page by postMessage with their arrays transferred, as in the client.
import { createWire } from '../../../web-client/src/core/wire.mjs';

// Frames the page sent before the wire's socket exists (its open awaits the decoder, which
// takes a while in a new worker on a busy machine) wait here, in order, for the socket.
let socket = null;
const pending = [];
const flush = () => {
  if (socket?.onmessage) for (const b of pending.splice(0)) socket.onmessage({ data: b });
};
class WorkerSocket {
  static OPEN = 1;
  constructor(url) {
    this.url = url;
    this.readyState = WorkerSocket.OPEN;
    socket = this;
    setTimeout(() => { this.onopen?.(); flush(); }, 0); // the wire sets onmessage right after
  }
  send() {}
  close() {}
}

const wire = createWire((m, transfer) => self.postMessage(m, transfer), { Socket: WorkerSocket });
self.onmessage = (e) => {
  if (e.data.op === 'frames') {
    pending.push(...e.data.frames);
    flush();
  }
  else wire.command(e.data);
};
