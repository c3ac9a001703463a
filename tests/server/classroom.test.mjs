// Classroom: state messages (clients, driver, parameters) reach everyone; a viewer asks for
// control, the driver hands it over; when nobody drives, asking is enough.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, api, Client, wsUrl } from './harness.mjs';

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
