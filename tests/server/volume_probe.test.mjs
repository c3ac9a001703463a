// The live plot's data: every viewer of a volume session receives the grabbed region (the
// sim's probe, metrics.probe_*) with the frames, as object 2, a segment from its mean rest
// position to its mean position now (world mm), each end's scalar its mean speed (mm/s).
// After a release the region is still followed: under condition B its displacement along
// the pull swings past rest (it rings), under A it comes back without passing rest. The
// phantom of 48x48x28 and the pull of 6 lattice units are test_volume_dynamics.c's.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, api, Client, wsUrl, objectLocal, tick, atRest } from './harness.mjs';

let srv;
before(async () => { srv = await startServer(['--dims', '48x48x28', '--rate', '30']); });
after(async () => {
  const code = await srv.stop();
  assert.equal(code, 0, `server exit ${code}; stderr:\n${srv.stderr()}`);
});

// One pull and release under a condition: the viewer's series of [sim time, displacement
// along the pull (mm), speed (mm/s)], one sample per frame it was sent.
async function pullAndRelease(condition) {
  const s = (await api(srv.base, 'POST', '/api/sessions', { scene: 'volume' })).json;
  const d = await new Client(wsUrl(s, s.control_token)).open();
  const v = await new Client(wsUrl(s, s.view_token)).open();
  const series = [];
  let dir = null;
  const sample = () => {
    const f = v.frames.at(-1);
    if (!f?.objects[2]) return;
    const p = objectLocal(v, 2), o = f.objects[2];
    const disp = [p[3] - p[0], p[4] - p[1], p[5] - p[2]];
    const len = Math.hypot(...disp);
    if (!dir || len > dir.len) dir = { len, u: disp.map((x) => x / (len || 1)) };
    const speed = o.smin + (o.smax - o.smin) * (f.q[2][3] / 65535);
    series.push({ frame: f.frame, disp, speed, near: [p[0], p[1], p[2]] });
  };
  v.ws.on('message', (data, isBinary) => { if (isBinary) sample(); });
  await v.until(() => v.frames.length > 0 && v.texts.some((t) => t.type === 'state'), 10000, 'viewer state');
  // Before any grab: there (so a grab costs no key), of length 0, still.
  const p0 = objectLocal(v, 2);
  assert.deepEqual([...p0.slice(3, 6)], [...p0.slice(0, 3)], 'a probe of some length before any grab');
  series.length = 0;
  let seq = 1;
  d.send({ type: 'set_condition', seq: seq++, condition });
  const g = [24, 38, 14];
  d.send({ type: 'grab', seq: seq++, point: g, radius: 2.5, space: 'lattice' });
  for (let k = 1; k <= 16; k++) {
    d.send({ type: 'move', seq: seq++, point: [g[0], g[1] + (6 * k) / 16, g[2]], space: 'lattice' });
    await tick(35); // a hand's pace, one move a frame or so
  }
  for (let k = 0; k < 10; k++) await tick(35);
  const released = seq;
  d.send({ type: 'release', seq: seq++ });
  await d.until(() => d.frames.some((f) => f.lastSeq >= released), 10000, 'release framed');
  const atRelease = series.length;
  // Until the volume settles (the server says it steps no more; the viewer has its last frame).
  await atRest(srv.base, s.id, [d, v]);
  await d.close();
  await v.close();
  await api(srv.base, 'DELETE', `/api/sessions/${s.id}`, undefined, { authorization: `Bearer ${s.control_token}` });
  const along = (x) => x.disp[0] * dir.u[0] + x.disp[1] * dir.u[1] + x.disp[2] * dir.u[2];
  return { series, along: series.map(along), atRelease, spacing: s.spacing, dir };
}

for (const [condition, rings] of [['A', false], ['B', true]]) {
  test(`volume probe: viewers get the grabbed region after release; condition ${condition} ${rings ? 'rings' : 'does not'}`, { timeout: 60000 }, async () => {
    const r = await pullAndRelease(condition);
    const pulled = 6 * r.spacing[1];
    const peak = Math.max(...r.along);
    assert.ok(Math.abs(peak - pulled) < 0.5, `peak ${peak.toFixed(2)} mm of a ${pulled.toFixed(2)} mm pull`);
    assert.ok(r.dir.u[1] > 0.99, `the pull's direction ${r.dir.u}`);
    const after = r.along.slice(r.atRelease);
    const least = Math.min(...after), last = after.at(-1);
    // The region keeps being sent after the release, moving, then still near rest.
    assert.ok(after.length > 5, `${after.length} samples after the release`);
    assert.ok(Math.max(...r.series.slice(r.atRelease).map((x) => x.speed)) > 10, 'no speed after the release');
    assert.ok(Math.abs(last) < 0.05 * pulled, `left at ${last.toFixed(2)} mm`);
    let crossings = 0, sign = 1;
    for (const a of after) {
      const s = a > 0.01 ? 1 : a < -0.01 ? -1 : 0;
      if (s && s !== sign) crossings++;
      if (s) sign = s;
    }
    console.log(`# ${condition}: ${r.series.length} samples, ${after.length} after release; peak ${peak.toFixed(2)} mm, least after ${least.toFixed(2)} mm, ${crossings} crossings of rest`);
    if (rings) {
      assert.ok(crossings >= 1 && least < -0.1 * r.spacing[1], `B: least ${least.toFixed(2)} mm, ${crossings} crossings`);
    } else {
      assert.equal(crossings, 0, `A crossed rest (least ${least.toFixed(2)} mm)`);
      assert.ok(least > -0.01 * pulled, `A: least ${least.toFixed(2)} mm`);
    }
  });
}
