// operator.test.mjs: a server that makes sessions for its operator's key only
// (--api-key-file): the lobby asks for the key, tells a wrong one's refusal, and with the
// right one creates the session and opens it to drive.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { launch } from './browser.mjs';
import { startServer } from '../server/harness.mjs';

const ROOT = new URL('../../', import.meta.url).pathname;

test('the lobby asks for the operator key when the server wants one', { timeout: 90000 }, async () => {
  const dir = mkdtempSync(`${tmpdir()}/softcast-key-`);
  const key = 'the-operators-own-key-0123456789';
  writeFileSync(`${dir}/key`, key);
  const srv = await startServer(['--data-dir', `${ROOT}web-client`, '--dims', '24x24x16', '--api-key-file', `${dir}/key`]);
  const browser = await launch();
  try {
    const page = await (await browser.newContext()).newPage();
    await page.goto(`${srv.base}/`);
    const field = page.locator('#operator-key');
    await field.waitFor({ state: 'visible', timeout: 15000 });
    await field.locator('input').fill('wrong-key-wrong-key');
    await page.click('#create button[type=submit]');
    await page.locator('#create-error').waitFor({ state: 'visible', timeout: 15000 });
    assert.match(await page.locator('#create-error').textContent(), /operator key required/);
    await field.locator('input').fill(key);
    await page.click('#create button[type=submit]');
    await page.waitForURL(/\?session=.*&token=/, { timeout: 30000 });
    const s = await (await fetch(`${srv.base}/api/sessions`)).json();
    assert.equal(s.sessions.length, 1);
  } finally {
    await browser.close();
    assert.equal(await srv.stop(), 0);
    rmSync(dir, { recursive: true, force: true });
  }
});
