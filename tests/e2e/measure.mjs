#!/usr/bin/env node
// measure.mjs: the browser client's figures against the release server, in headless
// Chromium on this machine (SwiftShader: no GPU). One JSON line per lattice size:
// bytes on the wire for the first load (gzip) and decoded, time from navigation to the
// first rendered frame, frames drawn and decoded per second while dragging, input-to-
// frame latency. Usage: node tests/e2e/measure.mjs [WxHxD ...]   (make bench-client)
const ROOT = new URL('../../', import.meta.url).pathname;
process.env.SOFTCAST_SERVER ??= `${ROOT}build/softcast-server`;
const { startServer } = await import('../server/harness.mjs');
const { launch } = await import('./browser.mjs');

const sizes = process.argv.slice(2).length ? process.argv.slice(2) : ['128x128x75', '64x64x40'];
const srv = await startServer(['--data-dir', `${ROOT}web-client`, '--threads', '0']);
const browser = await launch();
try {
  for (const dims of sizes) {
    const body = { scene: 'volume', dims: dims.split('x').map(Number) };
    const s = await (await fetch(`${srv.base}/api/sessions`, { method: 'POST', body: JSON.stringify(body) })).json();
    const ctx = await browser.newContext({ viewport: { width: 1280, height: 760 } });
    const page = await ctx.newPage();
    await page.goto(`${srv.base}/${new URL(s.control_url).search}`);
    await page.waitForFunction(() => window.softcast?.view.framesDrawn > 0, null, { timeout: 60000 });
    const load = await page.evaluate(() => {
      const e = [...performance.getEntriesByType('navigation'), ...performance.getEntriesByType('resource')];
      return { wire: e.reduce((a, x) => a + x.transferSize, 0), decoded: e.reduce((a, x) => a + x.decodedBodySize, 0),
        first: window.softcast.firstFrameAt() };
    });
    const [from, to] = await page.evaluate(() => {
      const { dims: d, spacing: sp } = window.softcast.st.state;
      window.softcast.view.setView(50, 15);
      const b = [(d[0] - 1) / 2 * sp[0], 0.8 * (d[1] - 1) * sp[1], (d[2] - 1) / 2 * sp[2]];
      return [window.softcast.view.screenOf(b), window.softcast.view.screenOf([b[0], b[1] + 40, b[2]])];
    });
    await page.waitForTimeout(500);
    const box = await page.locator('#canvas3d').boundingBox();
    await page.mouse.move(box.x + from[0], box.y + from[1]);
    await page.mouse.down();
    const c0 = await page.evaluate(() => [window.softcast.view.framesDrawn, window.softcast.st.frames.length]);
    const t0 = Date.now();
    for (let i = 0; i < 250; i++) {
      const k = (1 - Math.cos(i / 20)) / 2;
      await page.mouse.move(box.x + from[0] + k * (to[0] - from[0]), box.y + from[1] + k * (to[1] - from[1]));
      await page.waitForTimeout(16);
    }
    const secs = (Date.now() - t0) / 1000;
    const r = await page.evaluate(() => {
      const l = [...window.softcast.conn.latencies].sort((a, b) => a - b);
      return { drawn: window.softcast.view.framesDrawn, decoded: window.softcast.st.frames.length,
        grabbing: window.softcast.view.grabbing, p50: l[l.length >> 1], p90: l[Math.floor(l.length * 0.9)],
        gpu: window.softcast.view.gpu.name };
    });
    await page.mouse.up();
    console.log(JSON.stringify({
      dims, first_load_bytes_on_wire: load.wire, first_load_bytes_decoded: load.decoded,
      first_frame_ms_after_navigation: Math.round(load.first),
      drag_seconds: Number(secs.toFixed(1)), grabbed: r.grabbing,
      fps_drawn: Number(((r.drawn - c0[0]) / secs).toFixed(1)),
      fps_decoded: Number(((r.decoded - c0[1]) / secs).toFixed(1)),
      latency_ms_p50: Math.round(r.p50), latency_ms_p90: Math.round(r.p90), renderer: r.gpu,
    }));
    await ctx.close();
  }
} finally {
  await browser.close();
  await srv.stop();
}
