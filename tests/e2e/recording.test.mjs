// recording.test.mjs: an instructor records a demonstration in the browser and a class
// replays it: the driver's Record and Stop buttons, the download link (the file, through the
// browser's own download), the lobby's "Replay a recording", and the replay session's panel:
// resumed, it plays to the end and says it ended at the recorded state.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { launch } from './browser.mjs';
import { startServer, api } from '../server/harness.mjs';

const ROOT = new URL('../../', import.meta.url).pathname;

test('record in the browser, download, replay from the lobby to the same state', { timeout: 120000 }, async () => {
  const dir = mkdtempSync(`${tmpdir()}/softcast-rec-`);
  const srv = await startServer(['--data-dir', `${ROOT}web-client`, '--dims', '24x24x16']);
  const browser = await launch();
  try {
    const s = (await api(srv.base, 'POST', '/api/sessions', {})).json;
    const page = await (await browser.newContext({ acceptDownloads: true })).newPage();
    await page.goto(`${srv.base}/${new URL(s.control_url).search}`);
    await page.locator('#badge', { hasText: 'driver' }).waitFor({ timeout: 30000 });
    await page.click('#record');
    await page.locator('#record', { hasText: 'Stop recording' }).waitFor({ timeout: 15000 });
    // A pull, as the hand sends it (the drag itself is the client tests').
    await page.evaluate(async () => {
      const c = window.softcast.conn;
      c.send('grab', { point: [12, 20, 8], radius: 3, space: 'lattice' });
      for (let k = 1; k <= 10; k++) {
        c.send('move', { point: [12, 20 + 0.3 * k, 8], space: 'lattice' });
        await new Promise((r) => requestAnimationFrame(r));
      }
      c.send('release');
    });
    await page.waitForFunction(() => window.softcast.st.frame > 20, null, { timeout: 15000 });
    await page.click('#record');
    const link = page.locator('#download-recording');
    await link.waitFor({ state: 'visible', timeout: 15000 });
    const [download] = await Promise.all([page.waitForEvent('download'), link.click()]);
    const file = `${dir}/demo.screc`;
    await download.saveAs(file);
    assert.ok(statSync(file).size > 1000);

    await page.goto(`${srv.base}/`);
    await page.setInputFiles('#recording-file', file);
    await page.waitForURL(/\?session=.*&token=/, { timeout: 30000 });
    await page.locator('#replay').waitFor({ state: 'visible', timeout: 30000 });
    assert.equal(await page.locator('#record').isHidden(), true, 'a replay offers to record');
    await page.locator('#pause', { hasText: 'Resume' }).waitFor({ timeout: 15000 }); // starts paused
    await page.click('#pause');
    await page.locator('#replay-end', { hasText: 'the same state as the recording' }).waitFor({ timeout: 30000 });
    await page.screenshot({ path: `${ROOT}build/e2e/replay.png` });
  } finally {
    await browser.close();
    assert.equal(await srv.stop(), 0, srv.stderr());
    rmSync(dir, { recursive: true, force: true });
  }
});
