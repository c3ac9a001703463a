// The page's worker (web-client/src/core/wire.mjs) under node, fed the protocol's object
// frame vectors (protocol/vectors/) through a socket of its own: which frames it applies
// (every structural one, in order, and the newest of a burst), that it waits for a snapshot
// at the start and after a refusal, and that the updates it posts, applied one after another
// as the page applies them, leave the page with what the protocol's decoder holds (positions,
// elements, transforms, scalar colours), however many updates the page did not take in time.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, readdirSync } from 'node:fs';
import { createRequire } from 'node:module';
import { pathToFileURL } from 'node:url';
import { createWire, normals } from '../../web-client/src/core/wire.mjs';
import { scalarColors } from '../../web-client/src/core/colormap.mjs';
import { createDecoder, PRIM } from '../../protocol/js/softcast-proto.mjs';

// The main sequence's frames by what they do (objects-NN-<what>.bin: the numbers move when
// the vectors gain a step), and each one's frame number from its header.
const dir = new URL('../../protocol/vectors/', import.meta.url);
const files = readdirSync(dir);
const bin = (what) => {
  const f = files.find((n) => new RegExp(`^objects-\\d+-${what}\\.bin$`).test(n));
  assert.ok(f, `protocol/vectors/objects-NN-${what}.bin missing`);
  return new Uint8Array(readFileSync(new URL(f, dir)));
};
const frames = Object.fromEntries(['key', 'transform', 'delta', 'hold', 'hold-transform', 'rekey', 'lines', 'append',
  'remove', 'snapshot'].map((k) => [k, bin(k)]));
const number = (k) => Number(new DataView(frames[k].buffer, frames[k].byteOffset).getBigUint64(8, true));
// The page's own packages (web-client/node_modules, make web), for the reference decoder.
const fromPage = (name) => import(pathToFileURL(createRequire(new URL('../../web-client/src/', import.meta.url)).resolve(name)));
const { decompress } = await fromPage('fzstd');
const { MeshoptDecoder } = await fromPage('meshoptimizer');
await MeshoptDecoder.ready;
const proto = createDecoder({ decompress, MeshoptDecoder });

/** A socket the test drives: every burst is delivered in one task, as a browser delivers
 *  messages that arrived together. */
class FakeSocket {
  static OPEN = 1;
  static made = [];
  constructor(url) {
    this.url = url;
    this.readyState = FakeSocket.OPEN;
    FakeSocket.made.push(this);
    setTimeout(() => this.onopen?.(), 0);
  }
  send() {}
  close() { this.readyState = 3; }
}

const tick = (ms = 10) => new Promise((r) => setTimeout(r, ms));

/** A wire with a page that applies each update to its own map of objects (as view3d.mjs
 *  does: a key or an append replaces the elements, positions replace positions, a transform
 *  replaces the transform) and takes it (ack) only when told. */
async function page() {
  const events = [];
  const shown = new Map();
  const wire = createWire((m) => events.push(m), { Socket: FakeSocket });
  const before = FakeSocket.made.length;
  wire.command({ op: 'open', url: 'ws://test/' });
  for (let i = 0; i < 100 && FakeSocket.made.length === before; i++) await tick(1);
  const sock = FakeSocket.made.at(-1);
  let taken = 0;
  return {
    events, shown,
    updates: () => events.filter((e) => e.ev === 'objects'),
    errors: () => events.filter((e) => e.ev === 'error').map((e) => e.message),
    async log() {
      wire.command({ op: 'log' });
      await tick();
      return events.filter((e) => e.ev === 'log').at(-1).decodes;
    },
    async send(...bytes) {
      for (const b of bytes) sock.onmessage({ data: b.slice().buffer });
      await tick();
    },
    /** Apply the updates posted and not yet taken (one at most), then ack. */
    async take() {
      const u = this.updates();
      assert.ok(u.length - taken <= 1, `${u.length - taken} updates posted before the page took the last`);
      for (; taken < u.length; taken++) {
        const m = u[taken];
        for (const id of m.removed) shown.delete(id);
        for (const o of m.objects) {
          const s = o.meta ? { meta: o.meta, elements: o.elements } : shown.get(o.id);
          assert.ok(s, `update of frame ${m.frame}: object ${o.id} has no key on the page`);
          if (o.positions) Object.assign(s, { positions: o.positions, normals: o.normals, colors: o.colors, sphere: o.sphere });
          if (o.transform) s.transform = o.transform;
          shown.set(o.id, s);
        }
        wire.command({ op: 'ack' });
      }
      await tick();
    },
  };
}

/** The page holds what a decoder that applied `names` holds. */
function sameAsDecoder(p, names, what) {
  const ref = proto.createObjectDecoder();
  for (const n of names) ref.apply(frames[n]);
  assert.deepEqual([...p.shown.keys()], ref.objects.map((o) => o.id), `${what}: object ids`);
  for (const o of ref.objects) {
    const s = p.shown.get(o.id), at = `${what}, object ${o.id}`;
    assert.equal(s.meta.key, o.key, `${at}: key`);
    assert.equal(s.meta.lod, o.lod, `${at}: lod`);
    assert.deepEqual(s.meta.info, o.info, `${at}: info`);
    assert.deepEqual(Array.from(s.elements), Array.from(o.elements), `${at}: elements`);
    assert.deepEqual(Array.from(s.positions), Array.from(o.positions), `${at}: positions (local)`);
    assert.deepEqual(s.transform, { t: [...o.transform.t], r: [...o.transform.r] }, `${at}: transform`);
    if (o.primitive === PRIM.TRIANGLES) assert.deepEqual(Array.from(s.normals), Array.from(normals(o.positions, o.elements)), `${at}: normals`);
    else assert.equal(s.normals, undefined, `${at}: a line set has no normals`);
    if (o.hasScalar) assert.deepEqual(Array.from(s.colors), Array.from(scalarColors(o.scalars, o.smin, o.smax)), `${at}: colours`);
    else assert.equal(s.colors, undefined, `${at}: colours without a scalar`);
  }
}

test('the worker applies every structural frame, in order, and the newest; the page loses nothing it did not take in time', async () => {
  const p = await page();
  await p.send(frames.key);
  assert.equal(p.updates().length, 1, 'the snapshot posted');
  const first = p.updates()[0];
  assert.deepEqual(first.objects.map((o) => [o.id, o.keyed, !!o.elements, !!o.positions, !!o.transform]),
    [[1, true, true, true, true], [2, true, true, true, true]]);
  // The page is busy: it does not take the first update while three bursts arrive. Of the
  // first, the transform, delta and hold frames (latest wins) give way to the re-key.
  await p.send(frames.transform, frames.delta, frames.hold, frames['hold-transform'], frames.rekey);
  await p.send(frames.lines);
  await p.send(frames.append, frames.remove);
  assert.equal(p.updates().length, 1, 'an update posted while the page held the last');
  assert.deepEqual((await p.log()).map(([f]) => f), ['key', 'rekey', 'lines', 'append', 'remove'].map(number), 'the frames applied');
  await p.take();
  assert.equal(p.updates().length, 2, 'the merged update posted at the ack');
  const u = p.updates()[1];
  assert.deepEqual(u.removed, [2], 'B, removed by the last frame');
  assert.deepEqual(u.objects.map((o) => [o.id, o.keyed]), [[1, true], [7, true]], 'A re-keyed, the line set keyed');
  assert.equal(u.frame, number('remove'));
  assert.equal(u.objects[1].elements.length, 10, 'the line set with its append: five segments');
  await p.take();
  sameAsDecoder(p, ['key', 'transform', 'delta', 'hold', 'hold-transform', 'rekey', 'lines', 'append', 'remove'], 'after the removal');
  assert.equal(u.skipped, 4 + 2, 'skipped: four frames of the burst, two updates the page never took');
  assert.equal(u.received, 9);
  assert.deepEqual(p.errors(), []);
});

test('a worker applies the structural frames it needs from a burst, not only the newest', async () => {
  const p = await page();
  await p.send(frames.key);
  await p.take();
  await p.send(frames.rekey, frames.lines, frames.append, frames.remove);
  await p.take();
  sameAsDecoder(p, ['key', 'rekey', 'lines', 'append', 'remove'], 'after one burst of four structural frames');
  assert.deepEqual(p.errors(), []);
  assert.equal(p.updates().at(-1).skipped, 0);
});

test('frames wait for a snapshot: at the start, and after a refusal (what is shown stays)', async () => {
  const p = await page();
  await p.send(frames.delta); // a frame of a stream joined late: no snapshot yet
  assert.equal(p.updates().length, 0, 'a frame before the snapshot was shown');
  await p.send(frames.key);
  await p.take();
  sameAsDecoder(p, ['key'], 'the snapshot');
  // The line set's removal without its key: a structural frame missed (a server bug).
  await p.send(frames.remove);
  assert.match(p.errors().join('\n'), /dropped \(state\).*waiting for a snapshot/);
  // A frame that would apply to what is held is not shown: the stream is broken until the
  // next snapshot.
  await p.send(frames.transform);
  await p.take();
  assert.equal(p.updates().length, 1, 'a frame shown between a refusal and the next snapshot');
  sameAsDecoder(p, ['key'], 'after the refusal');
  await p.send(frames.snapshot);
  await p.take();
  assert.equal(p.updates().length, 2);
  assert.deepEqual(p.updates()[1].removed, [2], 'the snapshot drops B');
  sameAsDecoder(p, ['key', 'transform', 'delta', 'hold', 'hold-transform', 'rekey', 'lines', 'append', 'remove', 'snapshot'],
    'after the snapshot');
});

test('a transform alone posts only the transform; a frame that changes nothing posts its number only', async () => {
  const p = await page();
  await p.send(frames.key);
  await p.take();
  await p.send(frames.transform);
  await p.take();
  const u = p.updates()[1];
  assert.deepEqual(u.objects.map((o) => [o.id, !!o.elements, !!o.positions, !!o.transform]), [[2, false, false, true]],
    'frame 101 moves B rigidly: its transform, nothing else');
  sameAsDecoder(p, ['key', 'transform'], 'after the transform');
  // The same frame again changes nothing the page holds (the decoder publishes B's
  // positions anew, the same values): an update with the frame (its last_seq times the
  // driver's events) and no object.
  await p.send(frames.transform);
  await p.take();
  assert.equal(p.updates().length, 3);
  assert.deepEqual([p.updates()[2].frame, p.updates()[2].objects, p.updates()[2].removed], [number('transform'), [], []]);
});

test('a held object that moves: its transform alone goes to the page, its shape stays', async () => {
  const p = await page();
  for (const k of ['key', 'transform', 'delta', 'hold']) {
    await p.send(frames[k]);
    await p.take();
  }
  const before = p.shown.get(2).positions;
  await p.send(frames['hold-transform']);
  await p.take();
  const u = p.updates().at(-1);
  assert.equal(u.frame, number('hold-transform'));
  assert.deepEqual(u.objects.filter((o) => o.id === 2).map((o) => [!!o.elements, !!o.positions, !!o.transform]), [[false, false, true]],
    'B held and moved: a transform, no vertex');
  assert.equal(p.shown.get(2).positions, before);
  sameAsDecoder(p, ['key', 'transform', 'delta', 'hold', 'hold-transform'], 'after the hold that moves');
});
