// objects.mjs: a client that decodes object frames (protocol/README.md "Kind 5") as the
// browser's worker does (web-client/src/core/wire.mjs), for the load tools. Frames that
// arrive together are applied after the messages already waiting have been read: every
// STRUCTURAL frame, in order, and the newest; a frame without the flag is skipped when a
// newer one is already here (latest wins). Frames are ignored until a SNAPSHOT, at the start
// and after a refusal of a structural frame (a 'state' refusal: one was missed).
import { decompress } from 'fzstd';
import { MeshoptDecoder } from 'meshoptimizer';
import { createDecoder, readHeader, KIND, FLAG, PART } from '../../protocol/js/softcast-proto.mjs';

await MeshoptDecoder.ready;
const proto = createDecoder({ decompress, MeshoptDecoder });

/** A decoding client's frames: receive(bytes) each binary message. stats: frames applied,
 *  skipped (latest wins, or before a snapshot), refused, decode time (ms, all frames), the
 *  records applied by part. */
export function createObjectClient() {
  const dec = proto.createObjectDecoder();
  let queue = [], scheduled = false, awaitSnapshot = true;
  const stats = {
    applied: 0, skipped: 0, refused: 0, structural: 0, decodeMs: 0, objects: 0,
    parts: { key: 0, append: 0, transform: 0, delta: 0, sparse: 0, hold: 0, remove: 0 },
  };

  function run() {
    scheduled = false;
    const waiting = queue;
    queue = [];
    waiting.forEach(({ h, bytes }, i) => {
      const structural = (h.flags & FLAG.STRUCTURAL) !== 0;
      if ((awaitSnapshot && !(h.flags & FLAG.SNAPSHOT)) || (!structural && i < waiting.length - 1)) {
        stats.skipped++;
        return;
      }
      const t0 = performance.now();
      try {
        const r = dec.apply(bytes);
        stats.decodeMs += performance.now() - t0;
        awaitSnapshot = false;
        stats.applied++;
        if (structural) stats.structural++;
        stats.objects = r.objects.length;
        if (!(h.flags & FLAG.SNAPSHOT)) stats.parts.remove += r.removed.length;
        const named = new Set(r.named);
        for (const o of r.objects) {
          if (!named.has(o.id)) continue;
          for (const [name, bit] of [['key', PART.KEY], ['append', PART.APPEND], ['transform', PART.TRANSFORM],
            ['delta', PART.DELTA], ['sparse', PART.SPARSE], ['hold', PART.HOLD]]) if (o.parts & bit) stats.parts[name]++;
        }
      } catch (e) {
        stats.refused++;
        if (structural || e.code === 'state') awaitSnapshot = true;
      }
    });
  }

  return {
    stats,
    /** One binary message (a Buffer or Uint8Array); slices and other kinds are not decoded. */
    receive(bytes) {
      const b = new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength);
      const h = readHeader(b);
      if (h.kind !== KIND.OBJECTS) return;
      queue.push({ h, bytes: b });
      if (!scheduled) {
        scheduled = true;
        setImmediate(run);
      }
    },
    get objects() { return dec.objects; },
  };
}
