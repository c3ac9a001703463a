// browser.mjs: Debian's Chromium, headless, through playwright-core (no browser download),
// with WebGL on SwiftShader so pages really render on a machine without a GPU.
import { existsSync } from 'node:fs';
import { chromium } from 'playwright-core';

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
