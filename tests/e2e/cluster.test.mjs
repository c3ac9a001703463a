// The browser through the local cluster's router (deploy/local/: three servers behind nginx
// over TLS): the lobby lists the sessions of every process, and a session it creates opens
// through the router, its WebSocket too (wss on the page's own host), and renders.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { launch } from './browser.mjs';
import { startCluster } from '../deploy/local-cluster.mjs';

const ROOT = new URL('../../', import.meta.url).pathname;

test('the lobby behind the router lists every process\'s sessions; one it creates opens and renders over wss', { timeout: 120000 }, async () => {
  const cl = startCluster(3, `--dims 24x24x16 --workers 1 --threads 1 --data-dir ${ROOT}web-client`);
  const browser = await launch();
  try {
    const ids = [];
    for (const p of cl.processes) {
      const r = await cl.req('POST', `/api/sessions?process=${p.name}`, {});
      assert.equal(r.status, 201, r.text);
      ids.push(r.json.id);
    }
    // The page trusts the cluster's own certificate as a browser told to would.
    const page = await (await browser.newContext({ ignoreHTTPSErrors: true })).newPage();
    await page.goto(`${cl.url}/`);
    await page.waitForFunction((want) => {
      const cells = [...document.querySelectorAll('#sessions tbody tr td:first-child')].map((td) => td.textContent);
      return want.every((id) => cells.includes(id));
    }, ids, { timeout: 30000, polling: 100 });
    await page.click('#create button[type=submit]');
    await page.waitForURL(/\?session=softcast-\d\.s\d+-\d+-[0-9a-f]+&token=/, { timeout: 30000 });
    await page.waitForFunction(() => window.softcast?.view.framesDrawn > 0 && window.softcast.st.role === 'driver', null, { timeout: 30000, polling: 100 });
    const ws = await page.evaluate(() => window.softcast.conn.url);
    assert.match(ws, new RegExp(`^wss://${new URL(cl.url).host}/ws/\\?session=softcast-`));
  } finally {
    await browser.close();
    cl.stop();
  }
});
