// The client's object drawing on a page of its own (tests/e2e/pages/objects-page.mjs, no
// server), in headless Chromium: object frames from the protocol's vectors and from
// objectframe.mjs go through the worker's code into the 3D view, and the test reads back what
// was drawn. A line set with a scalar per vertex is drawn in the colormap's colours, one
// without in grey; an object drawn in two groups (the cloth's cape and body) gets its
// groups split where the scene says, and each object is placed by its transform; a page
// busy while structural frames arrive gets them all in one update (the worker in a real
// Worker: its arrays transferred, as in the client).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdirSync, readFileSync, readdirSync } from 'node:fs';
import { launch } from './browser.mjs';
import { encodeKeys, PRIM } from './objectframe.mjs';

const ROOT = new URL('../../', import.meta.url).pathname;
const OUT = `${ROOT}build/e2e`;
// The vectors' frames by what they do (objects-NN-<what>.bin: the numbers move when the
// vectors gain a step), as arrays for the page; a frame's number from its header.
const vector = (what) => {
  const f = readdirSync(`${ROOT}protocol/vectors`).find((n) => new RegExp(`^objects-\\d+-${what}\\.bin$`).test(n));
  assert.ok(f, `protocol/vectors/objects-NN-${what}.bin missing`);
  return Array.from(readFileSync(`${ROOT}protocol/vectors/${f}`));
};
const frameOf = (bytes) => Number(new DataView(Uint8Array.from(bytes).buffer).getBigUint64(8, true));

let browser, page;

before(async () => {
  mkdirSync(`${OUT}/objects-page`, { recursive: true });
  execFileSync(`${ROOT}web-client/node_modules/.bin/esbuild`, [`page=${ROOT}tests/e2e/pages/objects-page.mjs`,
    `worker=${ROOT}tests/e2e/pages/objects-worker.mjs`, '--bundle', '--format=esm', '--log-level=warning',
    `--outdir=${OUT}/objects-page`]);
  browser = await launch();
  const ctx = await browser.newContext({ viewport: { width: 700, height: 420 } });
  ctx.setDefaultTimeout(15000);
  page = await ctx.newPage();
  page.on('pageerror', (e) => console.log(`page error: ${e.message}`));
  await page.route('http://page.test/**', (r) => {
    const path = new URL(r.request().url()).pathname;
    if (path === '/page.js' || path === '/worker.js')
      return r.fulfill({ contentType: 'text/javascript', body: readFileSync(`${OUT}/objects-page${path}`) });
    return r.fulfill({ contentType: 'text/html', body: '<!doctype html><body style="margin:0;background:#000">' +
      '<canvas style="width:640px;height:360px;display:block"></canvas><script type="module" src="/page.js"></script>' });
  });
  await page.goto('http://page.test/');
  await page.waitForFunction(() => typeof window.start === 'function');
});

after(async () => {
  await browser?.close();
});

test('a line set with a scalar per vertex is drawn in the colormap\'s colours (the protocol\'s vectors)', { timeout: 60000 }, async () => {
  await page.evaluate(() => window.start(null));
  for (const f of ['key', 'rekey', 'lines'])
    assert.ok(await page.evaluate((b) => window.feed([b]), vector(f)), `${f}: no update`);
  let lines = (await page.evaluate(() => window.info())).find((o) => o.id === 7);
  assert.deepEqual([lines.type, lines.count, lines.colors, lines.position], ['LineSegments', 6, true, [0, 5, 0]]);
  const n = await page.evaluate(() => window.look([7]));
  assert.ok(n.coloured > 20, `the line set drew ${n.coloured} coloured pixels of ${n.drawn}`);
  assert.ok(n.low > 0 && n.high > 0, `both ends of the colormap expected (scalars 0.1 to 2 of 0..2): ${JSON.stringify(n)}`);
  assert.ok(n.grey < n.coloured / 10, `grey pixels on a line set with a scalar: ${JSON.stringify(n)}`);
  await page.locator('canvas').screenshot({ path: `${OUT}/lines-scalar.png` });
  // Its growth: two vertices and two segments appended, drawn.
  assert.ok(await page.evaluate((b) => window.feed([b]), vector('append')));
  lines = (await page.evaluate(() => window.info())).find((o) => o.id === 7);
  assert.deepEqual([lines.count, lines.colors], [10, true]);
  const m = await page.evaluate(() => window.look([7]));
  assert.ok(m.coloured > n.coloured, `the append drew no more: ${m.coloured} coloured pixels, ${n.coloured} before`);
  assert.deepEqual(await page.evaluate(() => window.t.errors), []);
});

test('a line set without a scalar is grey; a two-part object gets its groups and its transform', { timeout: 60000 }, async () => {
  await page.reload();
  await page.waitForFunction(() => typeof window.start === 'function');
  // The cloth's way: one style for triangles [0, info[3]), another for the rest.
  await page.evaluate(() => window.start(`(() => {
    const CAPE = { color: 0xb0303a, opacity: 1, transparent: false, depthWrite: true, renderOrder: 0, side: 'double', pick: 0 };
    const BODY = { color: 0x8a93a0, opacity: 1, transparent: false, depthWrite: true, renderOrder: 0, side: 'front', pick: null };
    return (o) => (o.primitive === 1 && o.info.length > 3 ? [{ style: CAPE, from: 0 }, { style: BODY, from: o.info[3] }] : null);
  })()`));
  const zigzag = (x0) => Array.from({ length: 8 }, (_, i) => [x0 + (i % 2) * 0.5, i * 0.3, 0.5 * (i % 3)]).flat();
  const segs = Array.from({ length: 7 }, (_, i) => [i, i + 1]).flat();
  const frame = encodeKeys({
    frame: 1,
    objects: [
      { id: 0, primitive: PRIM.LINES, bmin: [0, 0, 0], bmax: [0.5, 2.1, 1], positions: zigzag(0), elements: segs },
      { id: 1, primitive: PRIM.LINES, bmin: [2, 0, 0], bmax: [2.5, 2.1, 1], positions: zigzag(2), elements: segs,
        scalars: [0, 1, 2, 3, 4, 5, 6, 7], smin: 0, smax: 7 },
      // Two quads of a "cape" (4 triangles, 6 vertices) and one of a "body" (2 triangles).
      { id: 2, primitive: PRIM.TRIANGLES, info: [0, 0, 6, 4], t: [5, 1, 0], r: [0, 0, Math.SQRT1_2, Math.SQRT1_2],
        bmin: [0, 0, 0], bmax: [2, 1, 1],
        positions: [0, 0, 1, 1, 0, 1, 2, 0, 1, 0, 0, 0, 1, 0, 0, 2, 0, 0, 0, 1, 0, 1, 1, 0, 1, 1, 1, 0, 1, 1],
        elements: [0, 3, 1, 1, 3, 4, 1, 4, 2, 2, 4, 5, 6, 7, 8, 6, 8, 9] },
    ],
  });
  assert.ok(await page.evaluate((b) => window.feed([b]), Array.from(frame)));
  const info = await page.evaluate(() => window.info());
  assert.deepEqual(info.map((o) => [o.id, o.type, o.count, o.colors]),
    [[0, 'LineSegments', 14, false], [1, 'LineSegments', 14, true], [2, 'Mesh', 18, false]]);
  assert.deepEqual(info[2].groups, [[0, 12, 0], [12, 6, 1]], 'the cape\'s 4 triangles, then the body\'s 2');
  assert.deepEqual(info[2].position, [5, 1, 0]);
  assert.ok(Math.abs(info[2].quaternion[2] - Math.SQRT1_2) < 1e-6 && Math.abs(info[2].quaternion[3] - Math.SQRT1_2) < 1e-6);
  const grey = await page.evaluate(() => window.look([0]));
  assert.ok(grey.grey > 20 && grey.coloured === 0, `a line set without a scalar: ${JSON.stringify(grey)}`);
  const coloured = await page.evaluate(() => window.look([1]));
  assert.ok(coloured.coloured > 20 && coloured.low > 0 && coloured.high > 0, `a line set with a scalar: ${JSON.stringify(coloured)}`);
  assert.deepEqual(await page.evaluate(() => window.t.errors), []);
});

test('a busy page takes the structural frames it missed in one update, the arrays transferred from a Worker', { timeout: 60000 }, async () => {
  await page.reload();
  await page.waitForFunction(() => typeof window.start === 'function');
  await page.evaluate(() => window.start(null));
  assert.ok(await page.evaluate((b) => window.feed([b]), vector('key')));
  // Busy: the re-key's update waits on the page; three structural frames come after it, one
  // at a time, each decoded while the page holds the update before.
  assert.equal(await page.evaluate(() => window.busy(true)), 1);
  assert.ok(await page.evaluate((b) => window.feed([b]), vector('rekey')));
  for (const f of ['lines', 'append', 'remove']) {
    const bytes = vector(f);
    await page.evaluate((b) => window.feed([b], false), bytes);
    assert.ok(await page.evaluate((n) => window.decoded(n), frameOf(bytes)), `frame ${frameOf(bytes)} (${f}) not decoded`);
  }
  assert.equal(await page.evaluate(() => window.t.updates.length), 2, 'an update posted while the page held one');
  await page.evaluate(() => window.busy(false));
  await page.waitForFunction(() => window.t.updates.length === 3 && window.t.applied === 3);
  const last = await page.evaluate(() => { const u = window.t.updates[2]; return { frame: u.frame, removed: u.removed, ids: u.objects.map((o) => o.id) }; });
  assert.deepEqual(last, { frame: frameOf(vector('remove')), removed: [2], ids: [7] },
    'the update after the busy time: the line set (keyed, grown), B removed');
  const info = await page.evaluate(() => window.info());
  assert.deepEqual(info.map((o) => [o.id, o.type, o.count, o.colors]), [[1, 'Mesh', 6, false], [7, 'LineSegments', 10, true]]);
  assert.deepEqual(await page.evaluate(() => window.t.errors), []);
});
