// Fairness (issue 12, item 1): a session whose steps are heavy (a big grab on a big volume,
// dragged far every frame, propagation allowed its most passes) must not slow the sessions
// beside it. A small session's driver drags alone first, then beside the heavy one; the
// neighbour keeps at least 80% of its frame rate and its p99 input-to-frame latency stays
// within two frame periods. Two workers (this machine has two cores); --rate 30.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { startServer, api, Client, wsUrl, tick, latencies, summary, metric, withTimeout } from './harness.mjs';

const RATE = 30, PERIOD_MS = 1000 / RATE, DRAG_MS = 3000;
let srv;
before(async () => {
  srv = await startServer(['--workers', '2', '--rate', String(RATE), '--max-elements', '2000000']);
});
after(async () => {
  const code = await srv.stop();
  assert.equal(code, 0, `server exit ${code}; stderr:\n${srv.stderr()}`);
});

// Polls the async predicate every `every` ms until it holds; rejects after ms.
async function until(pred, ms, what, every = 100) {
  const end = performance.now() + ms;
  while (!(await pred())) {
    if (performance.now() > end) throw new Error(`timed out after ${ms} ms: ${what}`);
    await tick(every);
  }
}

const make = async (body, base = srv.base) => {
  const r = await api(base, 'POST', '/api/sessions', body);
  assert.equal(r.status, 201, r.text);
  return r.json;
};

// A driver dragging a small dent back and forth at the frame rate for ms: the frames it
// received in that time (every one a change) and its input-to-frame latencies.
async function drag(s, ms) {
  const d = await new Client(wsUrl(s, s.control_token), { decode: false }).open();
  await d.until(() => d.texts.some((t) => t.type === 'welcome'), 10000, 'welcome');
  d.send({ type: 'grab', seq: 1, point: [8, 8, 4], radius: 2, space: 'lattice' });
  const sent = new Map();
  let seq = 1;
  const t0 = performance.now();
  while (performance.now() - t0 < ms) {
    sent.set(++seq, performance.now());
    d.send({ type: 'move', seq, point: [8, 8 + 2 * Math.sin(seq / 5), 4], space: 'lattice' });
    await tick(PERIOD_MS);
  }
  const t1 = performance.now();
  await d.until(() => d.frames.some((f) => f.lastSeq >= seq), 10000, 'the last move echoed');
  const frames = d.frames.filter((f) => f.t >= t0 && f.t <= t1).length;
  const lat = summary(latencies(d, sent));
  d.send({ type: 'release', seq: ++seq });
  await d.close();
  return { fps: frames / ((t1 - t0) / 1000), lat, moves: seq - 2 };
}

// A session made as heavy as the server lets a driver make it: its caps on passes and
// iterations (past them set_params is refused), a big grab dragged far every frame (each step
// propagates across the volume, the wave cut at --max-wave elements a frame), for at most 5
// minutes. dims: the session's. seq() numbers the driver's next message; halt() ends the drag
// (the driver stays, holding the grab); stop() ends the drag and the connection.
async function heavyDriver(s, dims = [96, 96, 64]) {
  const c = dims.map((n) => n / 2), reach = 0.3 * dims[0];
  const h = await new Client(wsUrl(s, s.control_token), { decode: false }).open();
  await h.until(() => h.texts.some((t) => t.type === 'welcome'), 10000, 'welcome');
  h.send({ type: 'set_params', seq: 1, params: { max_passes: 1024, relax_iterations: 8 } });
  h.send({ type: 'grab', seq: 2, point: c, radius: 0.2 * dims[0], space: 'lattice' });
  let hs = 2, running = true;
  const loop = (async () => {
    for (let k = 0; running && k < 300 * RATE; k++) {
      h.send({ type: 'move', seq: ++hs, point: [c[0], c[1] + (k % 2 ? reach : -reach), c[2]], space: 'lattice' });
      await tick(PERIOD_MS);
    }
  })();
  const halt = async () => {
    running = false;
    await loop;
  };
  return {
    client: h,
    seq: () => ++hs,
    halt,
    stop: async () => {
      await halt();
      await h.close();
    },
  };
}

test('a heavy session beside a small one: the small one keeps its frame rate and latency', { timeout: 120000 }, async () => {
  // Slots 0, 1, 2: the heavy one, a filler, the small one (slot 2 shared a worker with slot
  // 0 when sessions were dealt to workers by slot).
  const heavy = await make({ dims: [96, 96, 64] });
  const filler = await make({ dims: [8, 8, 8] });
  const small = await make({ dims: [16, 16, 8] });
  const alone = await drag(small, DRAG_MS);

  const hd = await heavyDriver(heavy);
  const h = hd.client;
  let heavyStepMs, beside, heavyStepMsAfter;
  try {
    await h.until(() => h.frames.length >= 2, 30000, 'the heavy session stepping');
    heavyStepMs = await metric(srv.base, 'softcast_session_step_ms', heavy.id);
    beside = await drag(small, DRAG_MS);
    // Past the caps, the driver hears which one and nothing changes.
    h.send({ type: 'set_params', seq: hd.seq(), params: { max_passes: 100000 } });
    h.send({ type: 'set_params', seq: hd.seq(), params: { relax_iterations: 100 } });
    await h.until(() => h.texts.filter((t) => t.type === 'error').length >= 2, 30000, 'both refused');
    const refusals = h.texts.filter((t) => t.type === 'error');
    assert.match(refusals[0].detail, /max_passes 100000: this server bounds a frame's work at max_passes 1024 \(--max-passes\)/);
    assert.match(refusals[1].detail, /relax_iterations 100: .* at relax_iterations 8 \(--max-relax-iterations\)/);
    heavyStepMsAfter = await metric(srv.base, 'softcast_session_step_ms', heavy.id);
  } finally {
    await hd.stop(); // the heavy driver stops whatever failed
  }
  console.log(`# fairness: the small session alone ${alone.fps.toFixed(1)} frames/s, p99 ${alone.lat.p99.toFixed(1)} ms; ` +
    `beside the heavy one (its steps ${heavyStepMs.toFixed(0)} and ${heavyStepMsAfter.toFixed(0)} ms) ` +
    `${beside.fps.toFixed(1)} frames/s, p99 ${beside.lat.p99.toFixed(1)} ms`);
  assert.ok(Math.max(heavyStepMs, heavyStepMsAfter) > 2 * PERIOD_MS, `the heavy session is not heavy: ${heavyStepMs} ms a step`);
  // What this catches is a rate that falls to a frame per heavy step (under 1 frame/s);
  // 0.9 once failed a CI run on 2 cores with nothing wrong (36.0 beside, 40.4 alone).
  assert.ok(beside.fps >= 0.8 * alone.fps, `frames/s ${beside.fps} beside, ${alone.fps} alone`);
  assert.ok(beside.lat.p99 <= 2 * PERIOD_MS, `p99 ${beside.lat.p99} ms beside the heavy session`);
  for (const s of [heavy, filler, small])
    await api(srv.base, 'DELETE', `/api/sessions/${s.id}`, undefined, { authorization: `Bearer ${s.control_token}` });
});

// More heavy sessions than workers (issue 14, item 2; one heavy session must not slow the
// rest): one worker, two heavy sessions and a small one dragged. A session whose frames at
// the full rate fit in its share of the workers goes first, so the small one, due at each of
// its beats, is stepped after every heavy step; when the most overdue session went first, it
// waited for both heavy ones in turn (half as many frames). Counted in steps, so the
// machine's speed does not matter: the small session's frames at least 3/4 of the heavy ones'
// together.
async function oneWorker(more) {
  const one = await startServer(['--workers', '1', '--rate', String(RATE), '--max-elements', '2000000', ...more]);
  const frames = async (s) => metric(one.base, 'softcast_session_frames_total', s.id);
  const batched = async (s) => metric(one.base, 'softcast_session_batched_steps_total', s.id);
  try {
    const dims = [64, 64, 40];
    const heavy = [await make({ dims }, one.base), await make({ dims }, one.base)];
    const small = await make({ dims: [16, 16, 8] }, one.base);
    const drivers = [await heavyDriver(heavy[0], dims), await heavyDriver(heavy[1], dims)];
    let r;
    try {
      for (const d of drivers)
        await d.client.until(() => d.client.frames.length >= 2, 60000, 'the heavy sessions stepping');
      const stepMs = Math.max(...await Promise.all(heavy.map((s) => metric(one.base, 'softcast_session_step_ms', s.id))));
      const before = await Promise.all([...heavy, small].map(frames));
      const batchedBefore = await Promise.all([...heavy, small].map(batched));
      // Long enough for about 16 heavy steps (at least 3 s, at most 60).
      const dragged = await drag(small, Math.min(60000, Math.max(3000, 16 * stepMs)));
      const after = await Promise.all([...heavy, small].map(frames));
      const d = after.map((n, k) => n - before[k]);
      const b = (await Promise.all([...heavy, small].map(batched))).map((n, k) => n - batchedBefore[k]);
      const express = Number(/^softcast_express_steps_total (\d+)$/m.exec((await api(one.base, 'GET', '/metrics')).text)?.[1]);
      r = { stepMs, heavy: d[0] + d[1], small: d[2], moves: dragged.moves, fps: dragged.fps, heavyBatched: b[0] + b[1], smallBatched: b[2], express };
    } finally {
      for (const d of drivers) await d.stop();
    }
    console.log(`# one worker${more.length ? ` (${more.join(' ')})` : ''}: heavy steps ${r.stepMs.toFixed(0)} ms; in the small session's drag the heavy ones stepped ${r.heavy} times and the small ` +
      `one ${r.small} (${r.fps.toFixed(1)} frames/s)`);
    assert.ok(r.stepMs > 2 * PERIOD_MS, `the heavy sessions are not heavy: ${r.stepMs} ms a step`);
    assert.ok(r.heavy >= 10, `too few heavy steps to judge: ${JSON.stringify(r)}`);
    return r;
  } finally {
    assert.equal(await one.stop(), 0, one.stderr());
  }
}

test('one worker, two heavy sessions and a small one: the small one steps after every heavy step', { timeout: 180000 }, async () => {
  const r = await oneWorker(['--express-worker', '0']);
  assert.ok(r.small >= 0.75 * r.heavy, `the small session waited for both heavy ones: ${JSON.stringify(r)}`);
});

// With the express worker (the default): while the worker steps the heavy sessions, the small
// one is stepped beside them, at its own beat. Its driver sends a move a period: the small
// session must step at least 0.6 times a move. Without the express worker it steps once per
// heavy step, and a heavy step takes over two periods (asserted): under half a time a move.
test('one worker and the express worker: the small one keeps its beat beside the heavy steps', { timeout: 180000 }, async () => {
  const r = await oneWorker([]);
  assert.ok(r.express > 0, `the express worker stepped nothing: ${JSON.stringify(r)}`);
  assert.ok(r.small >= 0.6 * r.moves, `the small session waited for the heavy steps: ${JSON.stringify(r)}`);
});

// The same with sessions stepped together (--step-batch, CUDA's default): a batch's frames
// end together, so the small session is batched with light sessions only (here none), never
// with the heavy ones it would wait for, which are stepped together. It steps after every
// batch of them (two heavy steps).
test('one worker, sessions stepped together: the small one is not batched with the heavy ones', { timeout: 180000 }, async () => {
  const r = await oneWorker(['--step-batch', '4', '--express-worker', '0']);
  assert.ok(r.heavyBatched >= 10, `the heavy sessions were not stepped together: ${JSON.stringify(r)}`);
  assert.equal(r.smallBatched, 0, `the small session was batched with the heavy ones: ${JSON.stringify(r)}`);
  assert.ok(r.small >= 0.75 * r.heavy / 2, `the small session waited for more than one batch: ${JSON.stringify(r)}`);
});

// A heavy session come to rest is light again (issue 14, item 2, with batches). One worker,
// sessions stepped together, three heavy sessions dragged; then one's driver stops and resets
// its session to rest (the driver stays). Its frames then cost next to nothing, and
// it must be charged what they cost: it goes first and steps at its own beat, no longer
// batched with the heavy ones, waiting for their steps. When a batch charged each of its
// sessions its mean, the rested one kept the heavy ones' cost and their batches for good.
test('sessions stepped together: a heavy session come to rest is light again, not batched with the heavy ones', { timeout: 180000 }, async () => {
  const one = await startServer(['--workers', '1', '--rate', String(RATE), '--max-elements', '2000000',
    '--step-batch', '4', '--express-worker', '0']);
  const per = async (name, s) => metric(one.base, `softcast_session_${name}`, s.id);
  try {
    const dims = [64, 64, 40];
    const s = [await make({ dims }, one.base), await make({ dims }, one.base), await make({ dims }, one.base)];
    const drivers = [];
    try {
      for (const x of s) drivers.push(await heavyDriver(x, dims));
      for (const d of drivers)
        await d.client.until(() => d.client.frames.length >= 2, 60000, 'the heavy sessions stepping');
      const stepMs = Math.max(...await Promise.all(s.map((x) => per('step_ms', x))));
      assert.ok(stepMs > 2 * PERIOD_MS, `the sessions are not heavy: ${stepMs} ms a step`);
      const rested = s[2];
      const t0 = performance.now();
      await until(async () => await per('batched_steps_total', rested) >= 3, 60000, 'the three heavy sessions stepped together');
      await drivers[2].halt();
      drivers[2].client.send({ type: 'reset', seq: drivers[2].seq() });
      // At rest: its last steps took under a millisecond.
      let calm = 0;
      await until(async () => {
        calm = await per('step_ms', rested) < 1 ? calm + 1 : 0;
        return calm >= 3;
      }, 60000, 'the reset session at rest', 200);
      // Its cost measured again: a light session's (its frames at the rate fit its share).
      let cost;
      await until(async () => (cost = await per('frame_cost_ms', rested)) * 3 <= PERIOD_MS, 60000,
        'the rested session measured light', 200).catch(() => {
          assert.fail(`the rested session still counts as heavy: ${cost} ms a frame, its steps ${stepMs} ms when dragged`);
        });
      const who = [s[0], s[1], rested];
      const frames0 = await Promise.all(who.map((x) => per('frames_total', x)));
      const batched0 = await per('batched_steps_total', rested);
      await new Promise((r) => setTimeout(r, Math.min(60000, Math.max(3000, 16 * stepMs))));
      const frames = (await Promise.all(who.map((x) => per('frames_total', x)))).map((n, k) => n - frames0[k]);
      const batched = await per('batched_steps_total', rested) - batched0;
      const r = { stepMs, heavy: frames[0] + frames[1], rested: frames[2], restedBatched: batched, settleS: (performance.now() - t0) / 1000 };
      console.log(`# a heavy session come to rest: ${JSON.stringify(r)}`);
      assert.ok(r.heavy >= 10, `too few heavy steps to judge: ${JSON.stringify(r)}`);
      assert.equal(r.restedBatched, 0, `the rested session was batched with the heavy ones: ${JSON.stringify(r)}`);
      assert.ok(r.rested >= 0.75 * r.heavy / 2, `the rested session waited for more than one batch: ${JSON.stringify(r)}`);
    } finally {
      for (const d of drivers) await d.stop();
    }
  } finally {
    assert.equal(await one.stop(), 0, one.stderr());
  }
});

// A heavy session paused, or left by its last client, keeps its measure (issue 14, item 2):
// a frame paused or asleep steps nothing and says nothing of what its next running frame
// costs. Counted as cheap, a heavy session came back light after a pause or a page reload,
// and its first step held its worker as a light one's (the express worker stayed off; in a
// batch, light sessions waited for it). Its measure ends within half of what it was while
// dragged, after 2 s paused and 2 s asleep (some 60 frames each at --rate 30).
test('a heavy session paused or asleep keeps its measure of a frame', { timeout: 180000 }, async () => {
  const one = await startServer(['--workers', '1', '--rate', String(RATE), '--max-elements', '2000000']);
  const cost = async (s) => metric(one.base, 'softcast_session_frame_cost_ms', s.id);
  const frames = async (s) => metric(one.base, 'softcast_session_frames_total', s.id);
  try {
    const dims = [64, 64, 40];
    const heavy = await make({ dims }, one.base);
    const d = await heavyDriver(heavy, dims);
    let dragged, paused, asleep;
    try {
      await d.client.until(() => d.client.frames.length >= 6, 60000, 'the heavy session stepping');
      await d.halt();
      dragged = await cost(heavy);
      assert.ok(dragged > 2 * PERIOD_MS, `the session is not heavy: ${dragged} ms a frame`);
      d.client.send({ type: 'pause', seq: d.seq() });
      await d.client.until(() => d.client.texts.some((t) => t.type === 'state' && t.paused), 10000, 'paused');
      const f0 = await frames(heavy);
      await tick(2000);
      assert.ok(await frames(heavy) - f0 >= 10, 'the paused session was not looked at');
      paused = await cost(heavy);
    } finally {
      await d.stop();
    }
    await tick(2000); // nobody watches: the session sleeps
    asleep = await cost(heavy);
    console.log(`# a heavy session's measure: dragged ${dragged.toFixed(1)} ms, after 2 s paused ${paused.toFixed(1)}, after 2 s asleep ${asleep.toFixed(1)}`);
    assert.ok(paused >= 0.5 * dragged, `paused, it came to count as light: ${paused} ms a frame, ${dragged} dragged`);
    assert.ok(asleep >= 0.5 * dragged, `asleep, it came to count as light: ${asleep} ms a frame, ${dragged} dragged`);
  } finally {
    assert.equal(await one.stop(), 0, one.stderr());
  }
});

// Many busy sessions (issue 14, item 2): 16 sessions dragged at once on two workers, asked
// for more frames than the server can step (240 a second each), so every session competes
// for the cores. The scheduler must share them out: each session's frame rate within 25% of
// every other's, none starving. Measured by the C load generator (build/softcast-load), which
// reports the slowest and the fastest session's frames per second per client.
test('16 busy sessions: every session gets a frame rate within 25% of the others', { timeout: 120000 }, async () => {
  const busy = await startServer(['--workers', '2', '--rate', '240', '--max-elements', '2000000']);
  const tool = process.env.SOFTCAST_LOAD ?? new URL('../../build/softcast-load', import.meta.url).pathname;
  let r;
  try {
    const p = spawn(tool, ['--url', `${busy.base}/`, '--sessions', '16', '--clients', '2', '--seconds', '4',
      '--rate', '120', '--dims', '24x24x16'], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '', err = '';
    p.stdout.on('data', (d) => { out += d; });
    p.stderr.on('data', (d) => { err += d; });
    const [code] = await withTimeout(once(p, 'exit'), 60000, 'softcast-load');
    assert.equal(code, 0, err);
    r = JSON.parse(out.trim().split('\n').at(-1));
  } finally {
    assert.equal(await busy.stop(), 0, busy.stderr());
  }
  console.log(`# 16 busy sessions: ${r.fps_session_min} to ${r.fps_session_max} frames/s per client, p99 ${r.latency_ms_p99} ms`);
  assert.equal(r.errors, 0, JSON.stringify(r));
  // They competed: no session got the rate it asked for (else this shows nothing).
  assert.ok(r.fps_session_max < 0.8 * 240, `not busy: ${JSON.stringify(r)}`);
  assert.ok(r.fps_session_min >= 0.75 * r.fps_session_max, `a session starved: ${JSON.stringify(r)}`);
});
