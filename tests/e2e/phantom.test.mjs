// The default phantom as a new user first sees it: the lobby's "server default" volume
// session (the 128 x 128 x 75 phantom the server builds at start), drawn in 3D from the
// front and from the side, and its axial and coronal slices; screenshots in build/e2e/
// (phantom.png, phantom-side.png, phantom-axial.png, phantom-coronal.png). Every wait is
// bounded and on what the page shows (window.softcast).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { OUT, openPage, closePage } from './browser.mjs';


let srv, browser;

before(async () => ({ srv, browser } = await openPage(['--threads', '0'])));

after(async () => {
  await closePage({ srv, browser });
});

const until = (page, fn, arg, what, ms = 30000) =>
  page.waitForFunction(fn, arg, { timeout: ms, polling: 50 }).catch((e) => {
    throw new Error(`timeout waiting for ${what}: ${e.message.split('\n')[0]}`);
  });

// Look at the skin (object 0) from azimuth yaw (0: from the front, +y) and elevation pitch,
// framed on its own box, wait until that is drawn, then take its picture.
async function shoot(page, yaw, pitch, file) {
  const n = await page.evaluate(([y, p]) => {
    const v = window.softcast.view, { bmin, bmax } = v.worldBox([0]);
    const c = [0, 1, 2].map((b) => (bmin[b] + bmax[b]) / 2);
    const r = Math.hypot(bmax[0] - bmin[0], bmax[1] - bmin[1], bmax[2] - bmin[2]) / 2;
    const a = (y * Math.PI) / 180, e = (p * Math.PI) / 180, d = 2.2 * r;
    v.lookAt(c, [c[0] + d * Math.cos(e) * Math.sin(a), c[1] + d * Math.cos(e) * Math.cos(a),
      c[2] + d * Math.sin(e)], r / 20, r * 20);
    return v.framesDrawn;
  }, [yaw, pitch]);
  await until(page, (k) => window.softcast.view.framesDrawn > k, n, `the view at ${yaw} degrees drawn`);
  await page.locator('#view3d').screenshot({ path: `${OUT}/${file}` });
  return page.evaluate(() => window.softcast.pixels3d());
}

test('the default phantom from the lobby: a torso in 3D and in its slices (build/e2e/phantom.png)', { timeout: 120000 }, async () => {
  const ctx = await browser.newContext({ viewport: { width: 1280, height: 760 } });
  ctx.setDefaultTimeout(15000);
  const page = await ctx.newPage();
  await page.goto(`${srv.base}/`);
  await page.locator('#lobby').waitFor({ state: 'visible', timeout: 10000 });
  await page.selectOption('select[name=dims]', ''); // "server default"
  await page.click('#create button[type=submit]');
  await page.waitForURL(/session=.*token=/, { timeout: 10000 });
  await until(page, () => window.softcast?.view.framesDrawn > 0, null, 'first rendered frame', 60000);
  const st = await page.evaluate(() => ({ dims: window.softcast.st.state.dims,
    skin: window.softcast.view.meshes[0].geometry.attributes.position.count }));
  assert.deepEqual(st.dims, [128, 128, 75], 'the server default is the 128 x 128 x 75 phantom');
  const front = await shoot(page, 0, 10, 'phantom.png');
  const side = await shoot(page, 60, 15, 'phantom-side.png');
  console.log(`# phantom: ${st.skin} skin vertices; ${front.lit} of ${front.total} pixels drawn from the front, ${side.lit} from the side`);
  assert.ok(front.lit > front.total * 0.2 && side.lit > side.total * 0.2, 'the body fills its view');
  await until(page, () => window.softcast.sliceHash() !== null, null, 'first slice');
  await page.locator('#sliceview').screenshot({ path: `${OUT}/phantom-axial.png` });
  await page.click('#planes button[data-plane=coronal]');
  await until(page, () => window.softcast.sliceHash().plane === 1, null, 'coronal slice');
  await page.locator('#sliceview').screenshot({ path: `${OUT}/phantom-coronal.png` });
  await ctx.close();
});
