// objects-worker.mjs: the client's wire (web-client/src/core/wire.mjs) in a Web Worker, as
// wire.worker.mjs runs it, with a socket of its own: the page hands it frames ({op:
// 'frames', frames: [ArrayBuffer, ...]}: one burst) and every other command goes to the wire.
// Its updates reach the page by postMessage with their arrays transferred, as in the client.
import { createWire } from '../../../web-client/src/core/wire.mjs';

let socket = null;
class WorkerSocket {
  static OPEN = 1;
  constructor(url) {
    this.url = url;
    this.readyState = WorkerSocket.OPEN;
    socket = this;
    setTimeout(() => this.onopen?.(), 0);
  }
  send() {}
  close() {}
}

const wire = createWire((m, transfer) => self.postMessage(m, transfer), { Socket: WorkerSocket });
self.onmessage = (e) => {
  if (e.data.op === 'frames') for (const b of e.data.frames) socket.onmessage({ data: b });
  else wire.command(e.data);
};
