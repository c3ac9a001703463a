// The growth scene in the browser (headless Chromium, WebGL on SwiftShader) against the real
// server on 127.0.0.1: a plant made from the lobby grows frame by frame on the page (its
// branches counted as the page holds them) until it stops, coloured by thickness; a truss
// grows cell by cell, is solved, and when the pointer drags its load from the middle of the
// top to a quarter span, the colours (viridis: lighter is more energy) move with it. Images go
// to build/e2e/growth-plant.png and growth-truss.png. Every wait is bounded and waits for what
// the page or the server says.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { OUT, openPage, closePage } from './browser.mjs';
import { api } from '../server/harness.mjs';

let srv, browser;

before(async () => ({ srv, browser } = await openPage([])));

after(async () => {
  await closePage({ srv, browser });
});

const until = (page, fn, arg, what, ms = 30000) =>
  page.waitForFunction(fn, arg, { timeout: ms, polling: 50 }).catch((e) => {
    throw new Error(`timeout waiting for ${what}: ${e.message.split('\n')[0]}`);
  });

// The server says the session is at rest and the page shows its last frame.
async function atRest(page, what) {
  const id = new URL(page.url()).searchParams.get('session');
  const deadline = Date.now() + 60000;
  for (;;) {
    const s = (await api(srv.base, 'GET', `/api/sessions/${id}`)).json;
    if (s?.at_rest && (await page.evaluate(() => window.softcast.st.frame)) >= s.latest_frame) return s;
    if (Date.now() > deadline) throw new Error(`not at rest after 60 s: ${what}`);
    await page.waitForTimeout(50); // polling the server, bounded by the deadline
  }
}

async function create(fields) {
  const ctx = await browser.newContext({ viewport: { width: 1100, height: 720 } });
  ctx.setDefaultTimeout(15000);
  const page = await ctx.newPage();
  await page.goto(`${srv.base}/`);
  await page.locator('#lobby').waitFor({ state: 'visible', timeout: 10000 });
  await page.selectOption('#create select[name=scene]', 'growth');
  await fields(page);
  await page.click('#create button[type=submit]');
  await page.waitForURL(/session=.*token=/, { timeout: 10000 });
  return { ctx, page };
}

test('a plant grows on the page, frame by frame, until it stops (build/e2e/growth-plant.png)', { timeout: 120000 }, async () => {
  const { ctx, page } = await create(async (p) => {
    await p.locator('select[name=model]:visible').selectOption('plant');
    await p.fill('input[name=seed]', '5');
  });
  await until(page, () => window.softcast?.view.objects.size === 1, null, 'the plant drawn');
  // Watch it grow: the branches the page holds, sampled as the frames come.
  const seen = new Set();
  const deadline = Date.now() + 60000;
  let s;
  for (;;) {
    seen.add(await page.evaluate(() => window.softcast.view.objects.get(0).meta.nvert / 2));
    s = (await api(srv.base, 'GET', `/api/sessions/${new URL(page.url()).searchParams.get('session')}`)).json;
    if (s.at_rest || Date.now() > deadline) break;
    await page.waitForTimeout(40); // sampling the page while it grows, bounded by the deadline
  }
  await atRest(page, 'the plant grown');
  const counts = [...seen].sort((a, b) => a - b), last = await page.evaluate(() => window.softcast.view.objects.get(0).meta.nvert / 2);
  console.log(`growth e2e: plant seed 5, branches seen ${counts.join(' ')}, at rest ${last}`);
  assert.ok(counts.length >= 5 && last > 300 && counts.at(-1) <= last, `branches seen: ${counts.join(', ')}; at rest ${last}`);
  assert.equal(s.seed, 5);
  // The panel shows the groups that apply to a plant (the truss's load is not one).
  const shown = () => page.evaluate(() => [...document.querySelectorAll('.param-group')].filter((e) => !e.hidden).map((e) => e.dataset.group));
  assert.deepEqual(await shown(), ['growth', 'plant']);
  // Coloured by thickness through viridis: thin branches purple-blue, the trunk yellow-green.
  const px = await page.evaluate(() => {
    const { px } = window.softcast.view.readPixels();
    let dark = 0, light = 0;
    for (let i = 0; i < px.length; i += 4) {
      const [r, g, b] = [px[i], px[i + 1], px[i + 2]];
      if (b > 70 && b > r + 20 && b > g) dark++;      // viridis' low end
      if (g > 150 && r > 80 && g > b + 40) light++;   // its high end
    }
    return { dark, light };
  });
  await page.screenshot({ path: `${OUT}/growth-plant.png` });
  assert.ok(px.dark > 200 && px.light > 20, `thin and thick branches: ${JSON.stringify(px)}`);
  assert.equal(await page.evaluate(() => window.softcast.st.texts.filter((t) => t.type === 'error').length), 0);
  await ctx.close();
});

// The mean lightness of the beam's cells left and right of its middle, from the page's own
// vertex colours (viridis rises in lightness with energy).
const sides = (page) => page.evaluate(() => {
  const e = window.softcast.view.objects.get(0), g = e.obj.geometry;
  const pos = g.attributes.position.array, col = g.attributes.color.array;
  let xmin = Infinity, xmax = -Infinity;
  for (let i = 0; i < pos.length; i += 3) xmin = Math.min(xmin, pos[i]), xmax = Math.max(xmax, pos[i]);
  const mid = (xmin + xmax) / 2, acc = [[0, 0], [0, 0]];
  for (let i = 0; i < pos.length / 3; i++) {
    const s = pos[i * 3] < mid ? 0 : 1;
    acc[s][0] += 0.2126 * col[i * 3] + 0.7152 * col[i * 3 + 1] + 0.0722 * col[i * 3 + 2];
    acc[s][1]++;
  }
  return { left: acc[0][0] / acc[0][1], right: acc[1][0] / acc[1][1], xmin, xmax };
});

test('a truss grows, is solved, and its colours follow the dragged load (build/e2e/growth-truss.png)', { timeout: 120000 }, async () => {
  const { ctx, page } = await create(async (p) => {
    await p.locator('select[name=model]:visible').selectOption('truss');
    await p.fill('input[name=cells]', '20x10');
  });
  await until(page, () => window.softcast?.view.objects.size === 2, null, 'cells and members drawn');
  await atRest(page, 'the truss grown and solved');
  assert.equal(await page.evaluate(() => window.softcast.view.objects.get(0).meta.nvert / 4), 200, 'every cell cloned');
  assert.deepEqual(await page.evaluate(() => [...document.querySelectorAll('.param-group')].filter((e) => !e.hidden)
    .map((e) => e.dataset.group)), ['growth', 'truss']);
  const before = await sides(page);
  assert.ok(Math.abs(before.left - before.right) < 0.02 * before.left, `a symmetric load: ${JSON.stringify(before)}`);
  // Press at the top's middle (where the load is) and drag to a quarter span.
  const box = await page.locator('#canvas3d').boundingBox();
  const { xmin, xmax } = before;
  const beamTop = await page.evaluate(() => {
    const a = window.softcast.view.objects.get(0).obj.geometry.attributes.position.array;
    let z = -Infinity;
    for (let i = 2; i < a.length; i += 3) z = Math.max(z, a[i]);
    return z;
  });
  const from = await page.evaluate((p) => window.softcast.view.screenOf(p), [(xmin + xmax) / 2, 0, beamTop - 0.05]);
  const to = await page.evaluate((p) => window.softcast.view.screenOf(p), [xmin + (xmax - xmin) / 4, 0, beamTop - 0.05]);
  await page.mouse.move(box.x + from[0], box.y + from[1]);
  await page.mouse.down();
  for (let i = 1; i <= 12; i++) {
    await page.mouse.move(box.x + from[0] + ((to[0] - from[0]) * i) / 12, box.y + from[1] + ((to[1] - from[1]) * i) / 12);
    await page.waitForTimeout(16); // pointer pacing like a hand
  }
  await page.mouse.up();
  // Every event of the drag acknowledged by a frame, then the server at rest: in that order
  // (the events go on the WebSocket, the question over HTTP).
  await until(page, () => window.softcast.conn.sent.size === 0, null, 'the drag framed');
  await atRest(page, 'the truss solved for the moved load');
  const after = await sides(page);
  console.log(`growth e2e: truss lightness left/right ${before.left.toFixed(3)}/${before.right.toFixed(3)} -> ${after.left.toFixed(3)}/${after.right.toFixed(3)}`);
  assert.ok(after.left > after.right * 1.1, `the energy moved left with the load: ${JSON.stringify(after)}`);
  await page.screenshot({ path: `${OUT}/growth-truss.png` });
  assert.equal(await page.evaluate(() => window.softcast.st.texts.filter((t) => t.type === 'error').length), 0,
    JSON.stringify(await page.evaluate(() => window.softcast.st.texts.filter((t) => t.type === 'error'))));
  // Supports by the pointer: "frees the node", then a press on the bottom right corner (its
  // roller): a pin alone cannot stop the beam turning, and the server says so.
  await page.selectOption('#growth-press', 'free');
  const corner = await page.evaluate((p) => window.softcast.view.screenOf(p), [xmax - 0.03, 0, 0.03]);
  await page.mouse.move(box.x + corner[0], box.y + corner[1]);
  await page.mouse.down();
  await page.mouse.up();
  await until(page, () => window.softcast.st.texts.some((t) => t.type === 'error' && /not held/.test(t.detail ?? '')),
    null, 'the beam without its roller reported not held');
  await ctx.close();
});
