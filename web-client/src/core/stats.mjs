// stats.mjs: the overlay on the 3D view, four times a second: frames drawn in the last
// second, the median input-to-frame latency of the last 30 events, kB/s received, the
// frame shown and the connection's state.
export class Stats {
  constructor(el, conn, st) {
    this.drawnAt = []; // performance.now() of the frames drawn in the last second
    let lastBytes = 0, lastT = performance.now(), kbps = 0;
    setInterval(() => {
      const now = performance.now();
      this.trim(now);
      if (now - lastT >= 1000) {
        kbps = (conn.bytes - lastBytes) / 1024 / ((now - lastT) / 1000);
        lastBytes = conn.bytes;
        lastT = now;
      }
      const lat = conn.latencies.slice(-30).sort((a, b) => a - b);
      const med = lat.length ? lat[lat.length >> 1].toFixed(0) : '-';
      // A scene at rest sends nothing: say so, rather than a bare "0 fps" that looks stalled;
      // with events of this page still waiting for their frame it is "0 fps", not at rest.
      const rest = !this.drawnAt.length && conn.connected && conn.sent.size === 0;
      const rate = rest ? 'at rest' : `${this.drawnAt.length} fps`;
      el.textContent = `${rate}   latency ${med} ms\n${kbps.toFixed(1)} kB/s   frame ${st.frame}\n${conn.state}`;
    }, 250);
  }

  trim(now) {
    while (this.drawnAt.length && this.drawnAt[0] < now - 1000) this.drawnAt.shift();
  }

  /** A frame was drawn at now (performance.now()). */
  drawn(now) {
    this.drawnAt.push(now);
  }

  fps() {
    this.trim(performance.now());
    return this.drawnAt.length;
  }
}
