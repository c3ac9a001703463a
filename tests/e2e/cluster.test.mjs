// The browser through the local cluster's router (deploy/local/: three servers behind nginx
// over TLS): the lobby lists the sessions of every process, and a session it creates opens
// through the router, its WebSocket too (wss on the page's own host), and renders.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import https from 'node:https';
import os from 'node:os';
import path from 'node:path';
import { launch } from './browser.mjs';

const ROOT = new URL('../../', import.meta.url).pathname;
const BIN = process.env.SOFTCAST_SERVER ?? `${ROOT}build/test/softcast-server`;

function cluster(dir, ...args) {
  const r = spawnSync(`${ROOT}deploy/local/cluster.sh`, [args[0], dir, ...args.slice(1)], {
    env: { ...process.env, SOFTCAST_SERVER: BIN, SOFTCAST_SERVER_ARGS: `--dims 24x24x16 --workers 1 --threads 1 --data-dir ${ROOT}web-client` },
    encoding: 'utf8', timeout: 120000,
  });
  if (r.status !== 0) throw new Error(`cluster.sh ${args.join(' ')}: ${r.stderr}`);
  const last = r.stdout.trim().split('\n').at(-1);
  return last ? JSON.parse(last) : null;
}

function post(cl, ca, p, body) {
  return new Promise((resolve, reject) => {
    const r = https.request(cl.url + p, { method: 'POST', ca, headers: { 'content-type': 'application/json' } }, (res) => {
      let text = '';
      res.on('data', (d) => { text += d; });
      res.on('end', () => resolve({ status: res.statusCode, json: JSON.parse(text) }));
    });
    r.on('error', reject);
    r.end(JSON.stringify(body));
  });
}

test('the lobby behind the router lists every process\'s sessions; one it creates opens and renders over wss', { timeout: 120000 }, async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'softcast-e2e-cluster-'));
  const cl = cluster(dir, 'start', '3');
  const ca = fs.readFileSync(cl.ca);
  const browser = await launch();
  try {
    const ids = [];
    for (const p of cl.processes) {
      const r = await post(cl, ca, `/api/sessions?process=${p.name}`, {});
      assert.equal(r.status, 201);
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
    cluster(dir, 'stop');
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
