// Classroom: state messages (clients, driver, parameters) reach everyone; a viewer asks for
// control, the driver hands it over; when nobody drives, asking is enough.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { once } from 'node:events';
import WebSocket from 'ws';
import { startServer, api, Client, wsUrl, tick } from './harness.mjs';

let srv;
before(async () => { srv = await startServer(['--dims', '24x24x16']); });
after(async () => { assert.equal(await srv.stop(), 0); });

const lastState = (c) => c.texts.filter((t) => t.type === 'state').at(-1);

test('state: role, clients, dims and parameters; changes reach every client', async () => {
  const s = (await api(srv.base, 'POST', '/api/sessions', {})).json;
  const d = await new Client(wsUrl(s, s.control_token)).open();
  await d.until(() => lastState(d), 5000, 'driver state');
  const st = lastState(d);
  assert.equal(st.role, 'driver');
  assert.deepEqual(st.dims, [24, 24, 16]);
  assert.equal(st.params.condition, 'C');
  assert.ok(Number.isFinite(st.params.alpha) && Number.isFinite(st.params['tissue.bone.inv_mass']));
  const v = await new Client(wsUrl(s, s.view_token)).open();
  await v.until(() => lastState(v)?.clients === 2, 5000, 'viewer state');
  await d.until(() => lastState(d)?.clients === 2, 5000, 'driver hears of the viewer');
  assert.equal(lastState(v).role, 'viewer');
  assert.equal(lastState(d).view_token, s.view_token, 'the driver can share the viewer link');
  assert.equal(lastState(v).view_token, undefined);
  assert.equal(lastState(v).driver, st.client_id);
  d.send({ type: 'set_params', seq: 1, params: { alpha: 0.5, tissue: { skin_fat: { b1: 0.25 } } } });
  d.send({ type: 'set_condition', seq: 2, condition: 'B' });
  for (const c of [d, v])
    await c.until(() => lastState(c)?.params.alpha === 0.5 && lastState(c).params.condition === 'B' &&
                        lastState(c).params['tissue.skin_fat.b1'] === 0.25, 5000, 'new parameters');
  await v.close();
  await d.until(() => lastState(d)?.clients === 1, 5000, 'driver hears the viewer left');
  await d.close();
});

test('request control: the driver is asked and hands over; with no driver the asker drives', async () => {
  const s = (await api(srv.base, 'POST', '/api/sessions', {})).json;
  const d = await new Client(wsUrl(s, s.control_token)).open();
  const v = await new Client(wsUrl(s, s.view_token)).open();
  await v.until(() => lastState(v)?.clients === 2, 5000, 'viewer state');
  const vid = lastState(v).client_id;
  v.send({ type: 'grab', seq: 1, point: [12, 20, 8], radius: 2, space: 'lattice' });
  await v.until(() => v.texts.some((t) => t.error === 'not the driver'), 5000, 'refused');
  v.send({ type: 'request_control', seq: 2 });
  await d.until(() => d.texts.some((t) => t.type === 'control_request' && t.from === vid), 5000, 'request');
  d.send({ type: 'handover', seq: 3, to: vid });
  await v.until(() => lastState(v)?.role === 'driver', 5000, 'viewer drives');
  await d.until(() => lastState(d)?.role === 'viewer' && lastState(d).driver === vid, 5000, 'old driver watches');
  // The new driver leaves: nobody drives, and the next viewer to ask gets control at once.
  await v.close();
  await d.until(() => lastState(d)?.driver === null, 5000, 'no driver');
  d.send({ type: 'request_control', seq: 4 });
  await d.until(() => lastState(d)?.role === 'driver', 5000, 'control granted');
  await d.close();
});

// An instructor whose connection drops must not find a student driving: the driver may close
// control (set_control, open false). With nobody driving, a viewer's request is then refused
// saying so, and the control token still takes control; opened again, the next viewer to ask
// gets it. Every client's state says which; only the driver may set it.
test('the driver closes control: while nobody drives a student cannot take it, the control token can', async () => {
  const s = (await api(srv.base, 'POST', '/api/sessions', {})).json;
  const d = await new Client(wsUrl(s, s.control_token)).open();
  const v = await new Client(wsUrl(s, s.view_token)).open();
  await v.until(() => lastState(v)?.clients === 2, 5000, 'viewer state');
  assert.equal(lastState(v).control_open, true, 'open unless closed');
  v.send({ type: 'set_control', seq: 1, open: false });
  await v.until(() => v.texts.some((t) => t.error === 'not the driver'), 5000, 'a viewer may not close it');
  d.send({ type: 'set_control', seq: 1, open: false });
  await v.until(() => lastState(v)?.control_open === false, 5000, 'closed, told to all');
  await d.close();
  await v.until(() => lastState(v)?.driver === null, 5000, 'nobody drives');
  v.send({ type: 'request_control', seq: 2 });
  await v.until(() => v.texts.some((t) => t.type === 'error' && t.error === 'control closed'), 5000, 'refused');
  assert.match(v.texts.find((t) => t.error === 'control closed').detail, /its control link takes it/);
  assert.equal(lastState(v).role, 'viewer');
  const d2 = await new Client(wsUrl(s, s.control_token)).open();
  await d2.until(() => lastState(d2)?.role === 'driver', 5000, 'the control token drives');
  d2.send({ type: 'set_control', seq: 1, open: 'no' });
  await d2.until(() => d2.texts.some((t) => t.error === 'bad message' && /open/.test(t.detail)), 5000, 'a bad value');
  d2.send({ type: 'set_control', seq: 2, open: true });
  await v.until(() => lastState(v)?.control_open === true, 5000, 'opened');
  await d2.close();
  await v.until(() => lastState(v)?.driver === null, 5000, 'nobody drives again');
  v.send({ type: 'request_control', seq: 3 });
  await v.until(() => lastState(v)?.role === 'driver', 5000, 'the student drives (control open)');
  await v.close();
});

// The instructor's page reloads while a student drives: the control token takes control
// again at once, and the student is told so (its role, as well as the next state).
test('the control token joining takes control back; the driver it displaced is told its role', async () => {
  const s = (await api(srv.base, 'POST', '/api/sessions', {})).json;
  const v = await new Client(wsUrl(s, s.view_token)).open();
  await v.until(() => lastState(v), 5000, 'viewer state');
  v.send({ type: 'request_control', seq: 1 });
  await v.until(() => lastState(v)?.role === 'driver', 5000, 'the student drives (nobody did)');
  const roles = () => v.texts.filter((t) => t.type === 'role').map((t) => t.role);
  assert.deepEqual(roles(), ['driver']);
  const d = await new Client(wsUrl(s, s.control_token)).open();
  await d.until(() => lastState(d)?.role === 'driver', 5000, 'the control token drives again');
  await v.until(() => roles().at(-1) === 'viewer', 5000, 'the student told it watches');
  assert.equal(lastState(v).role, 'viewer');
  v.send({ type: 'grab', seq: 2, point: [12, 20, 8], radius: 2, space: 'lattice' });
  await v.until(() => v.texts.some((t) => t.error === 'not the driver' && t.seq === 2), 5000, 'refused');
  await v.close();
  await d.close();
});

// A class of 100 viewers, each asking for a slice after each frame once its last one came
// back (as the page does), while the driver drags for 6 s: each is answered in turn, none
// refused busy. With 64 places the 36 refused asked again at their next frame and the
// viewers whose frames went out first took every freed place (about 20 got 4 slices or
// fewer while the rest got about 20).
test('a class of 100 viewers asking for slices while the driver drags: each answered in turn', { timeout: 120000 }, async () => {
  const s = (await api(srv.base, 'POST', '/api/sessions', {})).json;
  const d = await new Client(wsUrl(s, s.control_token)).open();
  await d.until(() => lastState(d), 5000, 'driver state');
  const N = 100, viewers = [];
  for (let i = 0; i < N; i++) {
    const v = { ws: new WebSocket(wsUrl(s, s.view_token)), seq: 0, inFlight: 0, ok: 0, busy: 0, asking: false };
    v.ws.on('message', (data, binary) => {
      if (!binary) {
        const m = JSON.parse(data.toString());
        if (m.type === 'error' && m.seq === v.inFlight) { v.busy += m.error === 'busy'; v.inFlight = 0; }
        return;
      }
      if (data[5] === 3) { v.ok++; v.inFlight = 0; return; } // a slice
      if (v.asking && !v.inFlight) { // a frame: ask for the next slice
        v.inFlight = ++v.seq;
        v.ws.send(JSON.stringify({ type: 'slice', seq: v.seq, plane: 'axial', index: 4 + (i % 8), level: 40, width: 400 }));
      }
    });
    viewers.push(v);
  }
  // One more viewer asks every 10 ms without waiting: each newer request replaces its older
  // one in its place in line, so it is answered in its turn too (sent to the back of the
  // line each time, it never was).
  const eager = { ws: new WebSocket(wsUrl(s, s.view_token)), seq: 0, ok: 0 };
  eager.ws.on('message', (data, binary) => { eager.ok += binary && data[5] === 3; });
  await Promise.all([...viewers, eager].map((v) => once(v.ws, 'open')));
  const pester = setInterval(() => eager.ws.send(JSON.stringify({ type: 'slice', seq: ++eager.seq, plane: 'axial', index: 6, level: 40, width: 400 })), 10);
  for (const v of viewers) v.asking = true;
  d.send({ type: 'grab', seq: 1, point: [12, 20, 8], radius: 2, space: 'lattice' });
  const t0 = Date.now();
  for (let k = 0; Date.now() - t0 < 6000; k++) {
    d.send({ type: 'move', seq: 2 + k, point: [12, 20 + 2 * Math.sin(k / 8), 8], space: 'lattice' });
    await tick(33);
  }
  for (const v of viewers) v.asking = false;
  clearInterval(pester);
  const deadline = Date.now() + 20000;
  while (viewers.some((v) => v.inFlight) && Date.now() < deadline) await tick(50);
  const ok = viewers.map((v) => v.ok).sort((a, b) => a - b), busy = viewers.reduce((n, v) => n + v.busy, 0);
  console.log(`# slices per viewer: min ${ok[0]}, median ${ok[N >> 1]}, max ${ok[N - 1]}; busy ${busy}; the eager one ${eager.ok} of ${eager.seq} asked`);
  assert.equal(busy, 0, 'a viewer was refused busy');
  assert.ok(ok[N >> 1] >= 3, `median ${ok[N >> 1]}: too few slices to judge turns`);
  // Turns, not equal shares: a viewer whose frames reach it late (a loaded machine: the
  // test's own clients share its cores) asks later and less often. Measured here: min 53,
  // median 55 alone; min 14, and once 9 against a median of 50 (a CI run on 2 cores),
  // under the whole suite; before the fix, min 3 and median 79 alone, with 11,123 busy.
  assert.ok(ok[0] >= ok[N >> 1] / 8, `slices per viewer: min ${ok[0]}, median ${ok[N >> 1]}`);
  assert.ok(eager.ok >= ok[N >> 1] / 5, `the eager viewer: ${eager.ok} slices, the median ${ok[N >> 1]}`);
  for (const v of [...viewers, eager]) v.ws.close();
  await d.close();
});

// The control token is exempt from --max-ws-per-address (the driver always gets in), so it
// holds at most 8 connections to a session: an instructor's tabs, not a way round the cap.
test('the control token holds at most 8 connections to a session; one closed makes room', async () => {
  const s = (await api(srv.base, 'POST', '/api/sessions', {})).json;
  const open = [];
  for (let k = 0; k < 8; k++) {
    const c = await new Client(wsUrl(s, s.control_token)).open();
    await c.until(() => c.texts.some((t) => t.type === 'welcome'), 5000, `control connection ${k + 1}`);
    open.push(c);
  }
  const ninth = await new Client(wsUrl(s, s.control_token)).open();
  await ninth.until(() => ninth.texts.some((t) => t.type === 'error'), 5000, 'the ninth refused');
  assert.match(ninth.texts.find((t) => t.type === 'error').detail, /the control token holds 8 connections to this session already/);
  await open.shift().close();
  await open[0].until(() => lastState(open[0])?.clients === 7, 5000, 'the others hear that one left');
  const again = await new Client(wsUrl(s, s.control_token)).open();
  await again.until(() => again.texts.some((t) => t.type === 'welcome'), 5000, 'a control connection once one closed');
  const v = await new Client(wsUrl(s, s.view_token)).open();
  await v.until(() => v.texts.some((t) => t.type === 'welcome'), 5000, 'a viewer still joins');
  for (const c of [...open, again, v]) await c.close();
});
