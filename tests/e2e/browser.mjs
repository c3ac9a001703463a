// browser.mjs: Debian's Chromium, headless, through playwright-core (no browser download),
// with WebGL on SwiftShader so pages really render on a machine without a GPU.
import assert from 'node:assert/strict';
import { existsSync, mkdirSync } from 'node:fs';
import { chromium } from 'playwright-core';
import { startServer } from '../server/harness.mjs';

export const CHROMIUM = process.env.SOFTCAST_CHROMIUM ?? '/usr/bin/chromium';

export function launch() {
  if (!existsSync(CHROMIUM)) throw new Error(`${CHROMIUM} missing: deploy/install-deps.sh --test installs chromium`);
  return chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    // WebGL without a GPU: ANGLE on SwiftShader. Chromium's own network chatter is off
    // (this machine has no outside network). Two windows of one classroom side by side:
    // neither is a background tab.
    args: ['--no-sandbox', '--use-gl=angle', '--use-angle=swiftshader', '--enable-unsafe-swiftshader',
      '--ignore-gpu-blocklist', '--disable-background-networking', '--disable-component-update',
      '--disable-sync', '--no-first-run', '--disable-quic', '--disable-renderer-backgrounding',
      '--disable-background-timer-throttling', '--disable-backgrounding-occluded-windows'],
  });
}

export const ROOT = new URL('../../', import.meta.url).pathname;
export const OUT = `${ROOT}build/e2e`; // screenshots and figures

// A test file's page: the built client checked, build/e2e made, the server serving the client
// started with serverArgs (null: the file starts its own servers) and the browser launched.
export async function openPage(serverArgs) {
  assert.ok(existsSync(`${ROOT}web-client/dist/app.js`), 'web-client/dist/app.js missing: run make web');
  mkdirSync(OUT, { recursive: true });
  const srv = serverArgs ? await startServer(['--data-dir', `${ROOT}web-client`, ...serverArgs]) : null;
  return { srv, browser: await launch() };
}

// The browser closed and the server stopped, which must exit cleanly.
export async function closePage({ srv, browser }) {
  await browser?.close();
  if (srv) assert.equal(await srv.stop(), 0, srv.stderr());
}
