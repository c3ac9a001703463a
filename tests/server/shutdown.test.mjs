// SIGTERM: connected clients get a close frame (1001, going away) and the server exits 0
// with its sessions freed (LeakSanitizer would fail the exit code otherwise).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, api, Client, wsUrl, withTimeout } from './harness.mjs';

test('SIGTERM closes clients with 1001 and exits 0', async () => {
  const srv = await startServer(['--dims', '16x16x8']);
  const s = (await api(srv.base, 'POST', '/api/sessions', {})).json;
  const a = await new Client(wsUrl(s, s.control_token)).open();
  const b = await new Client(wsUrl(s, s.view_token)).open();
  await b.until(() => b.frames.length > 0, 10000, 'keyframe');
  const late = await new Client(wsUrl(s, s.view_token)).open();
  await late.until(() => late.frames.length > 0, 10000, 'late joiner keyframe');
  assert.equal(late.frames[0].key, true, 'a late joiner starts with a keyframe');
  const code = await srv.stop();
  assert.equal(code, 0, srv.stderr());
  for (const c of [a, b, late]) assert.equal(await withTimeout(c.closed, 5000, 'close'), 1001);
});
