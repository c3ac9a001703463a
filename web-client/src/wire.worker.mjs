// wire.worker.mjs: the Web Worker that runs wire.mjs (the socket and the frame decoding)
// for the page; bundled on its own into dist/wire.js. Typed arrays go back transferred.
import { createWire } from './core/wire.mjs';

const wire = createWire((m, transfer) => self.postMessage(m, transfer));
self.onmessage = (e) => wire.command(e.data);
