// The soft-body scene in the browser (headless Chromium, WebGL on SwiftShader) against the
// real server on 127.0.0.1: a hybrid organ made from the lobby renders coloured by region;
// a press on it and a drag pull it; let go, it settles back near its rest shape; the tray's
// buttons (by pointer and by keyboard) move the tray and the organ rides in it. The image goes
// to build/e2e/softbody.png. Positions are the page's own (the organ's geometry placed by its
// object's transform); every wait is bounded and waits for what the page shows.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { OUT, openPage, closePage } from './browser.mjs';
import { api } from '../server/harness.mjs';

let srv, browser, page;

before(async () => ({ srv, browser } = await openPage(['--threads', '0'])));

after(async () => {
  await closePage({ srv, browser });
});

const until = (fn, arg, what, ms = 30000) =>
  page.waitForFunction(fn, arg, { timeout: ms, polling: 50 }).catch(async (e) => {
    const seen = await page.evaluate(() => ({ frame: window.softcast?.st.frame, texts: window.softcast?.st.texts.slice(-4) })).catch(() => null);
    throw new Error(`timeout waiting for ${what}: ${e.message.split('\n')[0]}; page: ${JSON.stringify(seen)}`);
  });

// Settled: the server says the organ sleeps (no frame comes until an event) and the page shows
// its last frame; a server slowed by a busy machine cannot pass for a settled one.
async function settled(what) {
  const id = new URL(page.url()).searchParams.get('session');
  const deadline = Date.now() + 40000;
  for (;;) {
    const s = (await api(srv.base, 'GET', `/api/sessions/${id}`)).json;
    if (s?.at_rest && (await page.evaluate(() => window.softcast.st.frame)) >= s.latest_frame) return;
    if (Date.now() > deadline) throw new Error(`not at rest after 40 s while waiting for ${what}: ${JSON.stringify(s)}`);
    await page.waitForTimeout(50); // polling the server, bounded by the deadline
  }
}

// The organ's (object 0) vertices in world metres as the page holds them, and their centroid.
const organ = () => page.evaluate(() => {
  const e = window.softcast.view.objects.get(0), a = e.obj.geometry.attributes.position.array;
  e.obj.updateMatrixWorld();
  const m = e.obj.matrixWorld.elements, out = new Array(a.length);
  for (let i = 0; i < a.length; i += 3)
    for (let r = 0; r < 3; r++) out[i + r] = m[r] * a[i] + m[4 + r] * a[i + 1] + m[8 + r] * a[i + 2] + m[12 + r];
  return out;
});
const centroid = (x) => [0, 1, 2].map((b) => x.filter((_, i) => i % 3 === b).reduce((s, v) => s + v, 0) / (x.length / 3));
function gap(a, b, shift = [0, 0, 0]) {
  let max = 0, sum = 0;
  for (let i = 0; i < a.length; i += 3) {
    const d = Math.hypot(b[i] - shift[0] - a[i], b[i + 1] - shift[1] - a[i + 1], b[i + 2] - shift[2] - a[i + 2]);
    max = Math.max(max, d);
    sum += d;
  }
  return { max, mean: sum / (a.length / 3) };
}

test('a hybrid organ: drawn by region, pulled by the pointer, settles back, rides the tray (build/e2e/softbody.png)', { timeout: 180000 }, async () => {
  const ctx = await browser.newContext({ viewport: { width: 1100, height: 720 } });
  ctx.setDefaultTimeout(15000);
  page = await ctx.newPage();
  await page.goto(`${srv.base}/`);
  await page.locator('#lobby').waitFor({ state: 'visible', timeout: 10000 });
  await page.selectOption('#create select[name=scene]', 'softbody');
  await page.selectOption('select[name=model]', 'hybrid');
  await page.click('#create button[type=submit]');
  await page.waitForURL(/session=.*token=/, { timeout: 10000 });
  // The organ, the tray, and inside the organ the tumour's and the vessel's own surfaces.
  await until(() => window.softcast?.view.objects.size === 4 && window.softcast.view.framesDrawn > 0, null, 'organ, tray and inner surfaces drawn');
  assert.deepEqual(await page.evaluate(() => window.softcast.st.state.regions), ['liver', 'tumour', 'vessel']);
  // Damped ten times the default, so each settling takes a second, not five: where the organ
  // rests does not depend on it. (Sent as the panel would; the page names no parameter.)
  await page.evaluate(() => {
    window.sent = [];
    const conn = window.softcast.conn, send = conn.send.bind(conn);
    conn.send = (type, fields) => { window.sent.push({ type, ...fields }); return send(type, fields); };
    conn.send('set_params', { params: { damping: 10 } });
  });
  await settled('the organ at rest');
  const rest = await organ();

  // Coloured by region, on the page's own pixels: the liver's reddish brown, seen through;
  // inside it the vessel's blue along its length and the tumour's pale tissue.
  const colours = await page.evaluate(() => {
    const { px } = window.softcast.view.readPixels();
    let red = 0, blue = 0, pale = 0;
    for (let i = 0; i < px.length; i += 4) {
      const [r, g, b] = [px[i], px[i + 1], px[i + 2]];
      if (r > 60 && r > g * 1.3 && r > b * 1.3) red++;
      if (b > 60 && b > g * 1.4) blue++; // the vessel, also behind the liver (its red added)
      if (r > 150 && g > 100 && r > b * 1.2 && g > b) pale++;
    }
    return { red, blue, pale };
  });
  await page.screenshot({ path: `${OUT}/softbody.png` });
  assert.ok(colours.red > 2000, `liver-coloured pixels: ${colours.red}`);
  assert.ok(colours.blue > 500, `vessel-coloured pixels: ${colours.blue}`);
  assert.ok(colours.pale > 100, `tumour-coloured pixels: ${colours.pale}`);

  // Press on the organ's top (the vertex highest up, on screen) and drag 60 px up: the page
  // sends a grab at the picked surface point, and the organ stretches toward the hand.
  let top = 0;
  for (let i = 0; i < rest.length; i += 3) if (rest[i + 2] > rest[top * 3 + 2]) top = i / 3;
  const s = await page.evaluate((p) => window.softcast.view.screenOf(p), rest.slice(top * 3, top * 3 + 3));
  const box = await page.locator('#canvas3d').boundingBox();
  await page.mouse.move(box.x + s[0], box.y + s[1] + 3);
  await page.mouse.down();
  for (let i = 1; i <= 15; i++) {
    await page.mouse.move(box.x + s[0], box.y + s[1] + 3 - 4 * i);
    await page.waitForTimeout(16); // pointer pacing like a hand
  }
  const grab = await page.evaluate(() => window.sent.find((m) => m.type === 'grab'));
  assert.ok(grab && grab.point.length === 3, 'the press sent no grab');
  assert.ok(Math.hypot(...grab.point.map((x, b) => x - rest[top * 3 + b])) < 0.02, 'the grab is at the pressed surface point');
  await until((r) => {
    const e = window.softcast.view.objects.get(0), a = e.obj.geometry.attributes.position.array, m = e.obj.matrixWorld.elements;
    let max = 0;
    for (let i = 0; i < a.length; i += 3) {
      const z = m[2] * a[i] + m[6] * a[i + 1] + m[10] * a[i + 2] + m[14];
      max = Math.max(max, z - r[i + 2]);
    }
    return max > 0.015;
  }, rest, 'the organ pulled up by 15 mm');
  const pulled = gap(rest, await organ());
  await page.mouse.up();
  await settled('the organ let go');
  const after = await organ(), slid = centroid(after).map((x, b) => x - centroid(rest)[b]);
  const back = gap(rest, after, slid);
  console.log(`softbody e2e: pulled ${(pulled.max * 1000).toFixed(1)} mm; released: slid ${(Math.hypot(...slid) * 1000).toFixed(2)} mm, ` +
    `shape ${(back.max * 1000).toFixed(2)} mm max, ${(back.mean * 1000).toFixed(2)} mean`);
  // As in tests/server/softbody.test.mjs: friction may keep some of the pull.
  assert.ok(pulled.max > 0.015 && back.max < pulled.max / 4 && back.mean < 0.004,
    `pulled ${pulled.max} m, back within ${back.max} m (mean ${back.mean})`);

  // The tray: raise twice and right three times with the pointer, then left once by keyboard.
  for (const id of ['#tray-raise', '#tray-raise', '#tray-right', '#tray-right', '#tray-right']) await page.click(id);
  await page.focus('#tray-left');
  await page.keyboard.press('Enter');
  await until(() => {
    const p = window.softcast.view.objects.get(1).obj.position;
    return Math.abs(p.x - 0.02) < 1e-4 && Math.abs(p.y) < 1e-4 && Math.abs(p.z - 0.02) < 1e-4;
  }, null, 'the tray at (0.02, 0, 0.02)');
  await settled('the organ in the moved tray');
  const rode = gap(after, await organ(), [0.02, 0, 0.02]);
  assert.ok(rode.max < 0.001, `the organ is ${(rode.max * 1000).toFixed(2)} mm off the tray's motion`);
  await page.screenshot({ path: `${OUT}/softbody.png` });
  assert.equal(await page.evaluate(() => window.softcast.st.texts.filter((t) => t.type === 'error').length), 0,
    JSON.stringify(await page.evaluate(() => window.softcast.st.texts.filter((t) => t.type === 'error'))));
  await ctx.close();
});
