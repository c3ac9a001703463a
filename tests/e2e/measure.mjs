#!/usr/bin/env node
// measure.mjs: the browser client's figures against the release server, in headless
// Chromium on this machine (SwiftShader: no GPU). One JSON line per lattice size:
// bytes on the wire for the first load (gzip) and decoded, time from navigation to the
// first rendered frame, frames drawn and decoded per second while dragging, input-to-
// frame latency. With --crowd N (repeatable): a cloth crowd of N characters walking, the
// page's main thread (its longest task and the share of time in long tasks), frames drawn
// and shown per second, the worker's decode time, and what one frame costs the renderer.
// Usage: node tests/e2e/measure.mjs [WxHxD ...] [--crowd N ...]   (make bench-client)
const ROOT = new URL('../../', import.meta.url).pathname;
process.env.SOFTCAST_SERVER ??= `${ROOT}build/softcast-server`;
const { startServer } = await import('../server/harness.mjs');
const { launch } = await import('./browser.mjs');

const args = process.argv.slice(2);
const crowds = args.flatMap((a, i) => (args[i - 1] === '--crowd' ? [Number(a)] : []));
const given = args.filter((a, i) => a !== '--crowd' && args[i - 1] !== '--crowd');
const sizes = args.length ? given : ['128x128x75', '64x64x40'];
if (!args.length) crowds.push(100);
const srv = await startServer(['--data-dir', `${ROOT}web-client`, '--threads', '0']);
const browser = await launch();
try {
  for (const dims of sizes) {
    const body = { scene: 'volume', dims: dims.split('x').map(Number) };
    const s = await (await fetch(`${srv.base}/api/sessions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) })).json();
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
  for (const n of crowds) await crowd(n);
} finally {
  await browser.close();
  await srv.stop();
}

async function crowd(n) {
  const body = { scene: 'cloth', characters: n };
  const s = await (await fetch(`${srv.base}/api/sessions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) })).json();
  const ctx = await browser.newContext({ viewport: { width: 1280, height: 760 } });
  const page = await ctx.newPage();
  await page.addInitScript(() => {
    window.longTasks = [];
    new PerformanceObserver((l) => { for (const e of l.getEntries()) window.longTasks.push([e.startTime, e.duration]); })
      .observe({ type: 'longtask', buffered: true });
  });
  await page.goto(`${srv.base}/${new URL(s.control_url).search}`);
  await page.waitForFunction(() => window.softcast?.view.framesDrawn > 0 && window.softcast.st.role === 'driver', null, { timeout: 60000 });
  const first = await page.evaluate(() => window.softcast.firstFrameAt());
  const c0 = Date.now();
  await page.click('#motions button[data-motion=walk]', { timeout: 60000 });
  const click = Date.now() - c0;
  await page.waitForTimeout(1000);
  const a = await page.evaluate(() => ({ t: performance.now(), drawn: window.softcast.view.framesDrawn,
    shown: window.softcast.st.frames.length, frame: window.softcast.st.frame, decode: [] }));
  // The worker's decode time of each frame shown, for 8 s.
  await page.evaluate(() => {
    const v = window.softcast.view, update = v.update.bind(v);
    window.decodeMs = [];
    v.update = (f) => { window.decodeMs.push(window.softcast.conn.decodeMs); return update(f); };
  });
  await page.waitForTimeout(8000);
  const b = await page.evaluate((t0) => {
    const lt = window.longTasks.filter(([t]) => t >= t0).map(([, d]) => d);
    const v = window.softcast.view;
    return { t: performance.now(), drawn: v.framesDrawn, shown: window.softcast.st.frames.length, frame: window.softcast.st.frame,
      longest: Math.max(0, ...lt), busy: lt.reduce((x, y) => x + y, 0), decode: window.decodeMs.sort((x, y) => x - y),
      vertices: v.meshes.reduce((x, m) => x + m.geometry.attributes.position.count, 0),
      buffer: [v.renderer.getContext().drawingBufferWidth, v.renderer.getContext().drawingBufferHeight] };
  }, a.t);
  // One frame's cost to the renderer: draw, then wait for it by reading a pixel (median of 5).
  const drawMs = await page.evaluate(() => {
    const v = window.softcast.view, gl = v.renderer.getContext(), px = new Uint8Array(4), t = [];
    for (let i = 0; i < 5; i++) {
      const t0 = performance.now();
      v.renderer.render(v.scene, v.camera);
      gl.readPixels(0, 0, 1, 1, gl.RGBA, gl.UNSIGNED_BYTE, px);
      t.push(performance.now() - t0);
    }
    return t.sort((x, y) => x - y)[2];
  });
  const secs = (b.t - a.t) / 1000;
  console.log(JSON.stringify({
    crowd: n, vertices: b.vertices, first_frame_ms_after_navigation: Math.round(first), click_walk_ms: click,
    fps_drawn: Number(((b.drawn - a.drawn) / secs).toFixed(1)), fps_shown: Number(((b.shown - a.shown) / secs).toFixed(1)),
    server_fps: Number(((b.frame - a.frame) / secs).toFixed(1)),
    decode_ms_p50: Number((b.decode[b.decode.length >> 1] ?? 0).toFixed(1)), decode_ms_max: Number((b.decode.at(-1) ?? 0).toFixed(1)),
    longest_task_ms: Math.round(b.longest), long_task_share: Number((b.busy / (secs * 1000)).toFixed(3)),
    draw_ms: Number(drawMs.toFixed(1)), drawing_buffer: b.buffer,
  }));
  await ctx.close();
}
