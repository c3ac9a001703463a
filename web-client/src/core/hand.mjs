// hand.mjs: the driver's hand after a grab, the same in every scene: moves go out at most
// one per 16 ms (the server steps at 60 Hz and rate-limits events), the newest pointer
// position winning, as {point, space: 'world'}; the release sends what is still pending
// first. Timers, not animation frames, so a hidden tab still lets go of what it holds.
// (The grab itself is the scene's: what it holds differs, a point and radius or a vertex.)
export class Hand {
  constructor(conn) {
    this.conn = conn;
    this.pending = null;
    this.timer = 0;
    this.lastAt = 0;
  }

  flush() {
    clearTimeout(this.timer);
    this.timer = 0;
    if (!this.pending) return;
    this.conn.send('move', { point: this.pending, space: 'world' });
    this.pending = null;
    this.lastAt = performance.now();
  }

  move(p) {
    this.pending = p;
    const wait = 16 - (performance.now() - this.lastAt);
    if (wait <= 0) this.flush();
    else if (!this.timer) this.timer = setTimeout(() => this.flush(), wait);
  }

  release() {
    this.flush();
    this.conn.send('release');
  }
}
