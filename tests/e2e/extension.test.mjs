// extension.test.mjs: a scene gains a parameter by one line in its list, and nothing else.
// The tree is copied to build/e2e-extension/src (the real tree is never edited); ONE line
// is appended to sim/cloth/params.def there, the copy is checked to differ from the tree in
// that line only, and the copy's own test server and browser client are built from it
// (make, as in the tree). Against that server: the new parameter is validated (out of
// range refused, the range named), listed in state.param_schema with its range, default,
// unit, group and doc, settable over the WebSocket (state.params follows), and drawn in
// the browser's panel (an input with its range, the value set, the doc as its caption).
//
// The copy is kept between runs, so make rebuilds only what changed. Its first build starts
// from the tree's own test build (the objects, their dependency files and the flags file,
// copied with their times, and the same SANITIZE and CUDA), so even then make rebuilds only
// what the one line touches; a tree without a test build gets a whole build (CUDA=0, UBSan
// only). The build's duration is printed and written to build/e2e/extension.json.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { launch } from './browser.mjs';
import { declaredParams } from './paramsdef.mjs';
import { api, Client, wsUrl, withTimeout } from '../server/harness.mjs';

const ROOT = path.resolve(new URL('../../', import.meta.url).pathname);
const SCRATCH = path.join(ROOT, 'build/e2e-extension/src');
const OUT = path.join(ROOT, 'build/e2e');
const DEF = 'sim/cloth/params.def';
const KNOB = { name: 'test_knob', type: 'float', min: 0, max: 2, default: 0.5, unit: 'm', group: 'test',
  doc: 'a throwaway parameter for the extension test' };
const LINE = `P(FLOAT, ${KNOB.name}, ${KNOB.default}, ${KNOB.min.toFixed(1)}, ${KNOB.max.toFixed(1)}, "${KNOB.unit}", ` +
  `"${KNOB.group}", "${KNOB.doc}")`;
const BUILD_LIMIT_S = 600;

/** The files of the tree: git's tracked files in a checkout; otherwise (a copy, such as the
 *  mutation runner's) every file but build outputs and npm packages. */
function treeFiles() {
  const top = spawnSync('git', ['rev-parse', '--show-toplevel'], { cwd: ROOT, encoding: 'utf8' });
  if (top.status === 0 && path.resolve(top.stdout.trim()) === ROOT) {
    return execFileSync('git', ['ls-files', '-z'], { cwd: ROOT }).toString().split('\0')
      .filter((f) => f && fs.existsSync(path.join(ROOT, f)));
  }
  const walk = (dir) => fs.readdirSync(path.join(ROOT, dir), { withFileTypes: true }).flatMap((e) => {
    const rel = dir ? `${dir}/${e.name}` : e.name;
    if (['build', 'node_modules', 'dist', '.git'].includes(e.name)) return [];
    return e.isDirectory() ? walk(rel) : e.isFile() ? [rel] : [];
  });
  return walk('');
}

/** Copy the tree into SCRATCH: a file is written only when its bytes differ, with the
 *  source's time, so make's view of what is newer stays the tree's (npm ci is not rerun
 *  for a lock file that only looks new); files no longer in the tree are removed. */
function copyTree(files) {
  const keep = new Set(files);
  for (const f of files) {
    const src = path.join(ROOT, f), dst = path.join(SCRATCH, f);
    const data = fs.readFileSync(src);
    if (fs.existsSync(dst) && fs.readFileSync(dst).equals(data)) continue;
    fs.mkdirSync(path.dirname(dst), { recursive: true });
    fs.writeFileSync(dst, data);
    const st = fs.statSync(src);
    fs.chmodSync(dst, st.mode);
    fs.utimesSync(dst, st.atime, st.mtime);
  }
  const prune = (dir) => {
    for (const e of fs.readdirSync(path.join(SCRATCH, dir), { withFileTypes: true })) {
      const rel = dir ? `${dir}/${e.name}` : e.name;
      if (['build', 'node_modules', 'dist'].includes(e.name)) continue;
      if (e.isDirectory()) prune(rel);
      else if (!keep.has(rel)) fs.rmSync(path.join(SCRATCH, rel));
    }
  };
  prune('');
  // The client's npm packages are the tree's (make installed them there).
  const link = path.join(SCRATCH, 'web-client/node_modules');
  if (!fs.existsSync(link)) fs.symlinkSync(path.join(ROOT, 'web-client/node_modules'), link);
}

/** The make variables that give the copy the tree's test flags, and on the copy's first build
 *  the tree's test objects to start from (seeded with their times: make rebuilds only what
 *  is newer, the one line's dependents). Without a test build in the tree: a whole build. */
function seedBuild() {
  const flagsFile = path.join(ROOT, 'build/test.flags');
  if (!fs.existsSync(flagsFile)) return ['CUDA=0', 'SANITIZE=undefined'];
  const flags = fs.readFileSync(flagsFile, 'utf8');
  const vars = [`SANITIZE=${/-fsanitize=(\S+)/.exec(flags)?.[1] ?? 'undefined'}`];
  const cuda = flags.includes('-DSIM_HAVE_CUDA=1');
  if (!cuda) vars.push('CUDA=0');
  if (fs.existsSync(path.join(SCRATCH, 'build/test.flags'))) return vars;
  const opts = { recursive: true, preserveTimestamps: true };
  fs.mkdirSync(path.join(SCRATCH, 'build'), { recursive: true });
  fs.cpSync(path.join(ROOT, 'build/test'), path.join(SCRATCH, 'build/test'), opts);
  if (cuda) { // the CUDA objects are the release build's (the Makefile's TST_SIM_O)
    fs.cpSync(path.join(ROOT, 'build/rel'), path.join(SCRATCH, 'build/rel'),
      { ...opts, filter: (src) => fs.statSync(src).isDirectory() || /\.cu\.[od]$/.test(src) });
  }
  fs.cpSync(flagsFile, path.join(SCRATCH, 'build/test.flags'), opts);
  return vars;
}

async function startScratchServer() {
  const proc = spawn(path.join(SCRATCH, 'build/test/softcast-server'), ['--http-port', '0', '--ws-port', '0',
    '--bind', '127.0.0.1', '--threads', '1', '--data-dir', path.join(SCRATCH, 'web-client')],
  { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, UBSAN_OPTIONS: 'print_stacktrace=1:halt_on_error=1' } });
  let stderr = '';
  proc.stderr.on('data', (d) => { stderr += d; });
  const info = JSON.parse(await withTimeout(new Promise((resolve, reject) => {
    let buf = '';
    proc.stdout.on('data', (d) => {
      buf += d;
      if (buf.includes('\n')) resolve(buf.slice(0, buf.indexOf('\n')));
    });
    proc.on('exit', (code) => reject(new Error(`scratch server exited ${code}: ${stderr}`)));
  }), 20000, 'scratch server start'));
  return {
    base: `http://127.0.0.1:${info.http_port}`,
    async stop() {
      proc.kill('SIGTERM');
      const code = await withTimeout(new Promise((r) => proc.on('exit', r)), 20000, 'scratch server stop');
      assert.equal(code, 0, `scratch server exit: ${stderr.slice(-2000)}`);
    },
  };
}

test('a parameter added by one line in sim/cloth/params.def is validated, listed, settable and in the panel',
  { timeout: (BUILD_LIMIT_S + 120) * 1000 }, async (t) => {
    const lock = path.join(ROOT, 'web-client/package-lock.json'), installed = path.join(ROOT, 'web-client/node_modules/.package-lock.json');
    assert.ok(fs.existsSync(installed) && fs.statSync(installed).mtimeMs >= fs.statSync(lock).mtimeMs,
      'web-client/node_modules missing or older than its lock file: run make web first');

    // The copy, and the one line.
    const files = treeFiles();
    assert.ok(files.includes(DEF) && files.length > 50, `the tree's files were not found (${files.length})`);
    fs.mkdirSync(SCRATCH, { recursive: true });
    copyTree(files);
    const orig = fs.readFileSync(path.join(ROOT, DEF), 'utf8');
    assert.ok(!orig.includes(KNOB.name), `${DEF} already declares ${KNOB.name}`);
    const edited = `${orig}${orig.endsWith('\n') ? '' : '\n'}${LINE}\n`;
    if (fs.readFileSync(path.join(SCRATCH, DEF), 'utf8') !== edited) fs.writeFileSync(path.join(SCRATCH, DEF), edited);
    // Nothing else differs from the tree: the parameter takes that line and no other file.
    const differ = files.filter((f) => !fs.readFileSync(path.join(SCRATCH, f)).equals(fs.readFileSync(path.join(ROOT, f))));
    assert.deepEqual(differ, [DEF], 'the copy differs from the tree elsewhere');
    const added = edited.split('\n').filter((l, i) => l !== orig.split('\n')[i] && l !== '');
    assert.deepEqual(added, [LINE], 'the copy differs from the tree by more than one line');
    assert.ok(declaredParams(SCRATCH).some((d) => d.scene === 'cloth' && d.name === KNOB.name));

    // The copy's own server (the tree's test flags) and browser client.
    const vars = seedBuild();
    const t0 = Date.now();
    const b = spawnSync('make', ['-s', '-j2', 'BUILD=build', ...vars, 'build/test/softcast-server', 'web'],
      { cwd: SCRATCH, encoding: 'utf8', timeout: BUILD_LIMIT_S * 1000, maxBuffer: 64 << 20 });
    const buildS = (Date.now() - t0) / 1000;
    assert.equal(b.status, 0, `the copy did not build (${buildS.toFixed(0)} s${b.error ? `, ${b.error.code}` : ''}):\n${(b.stdout + b.stderr).slice(-4000)}`);
    t.diagnostic(`scratch build: ${buildS.toFixed(1)} s`);
    console.log(`e2e extension: the copy's server and client built in ${buildS.toFixed(1)} s`);
    fs.mkdirSync(OUT, { recursive: true });
    fs.writeFileSync(path.join(OUT, 'extension.json'), `${JSON.stringify({ scratch_build_s: Number(buildS.toFixed(1)) })}\n`);

    const srv = await startScratchServer();
    let browser, c;
    try {
      const s = (await api(srv.base, 'POST', '/api/sessions', { scene: 'cloth', characters: 1 })).json;
      c = await new Client(wsUrl(s, s.control_token), { decode: false }).open();
      await c.until(() => c.texts.some((x) => x.type === 'state'), 10000, 'first state');
      // (2) Listed in the schema, with everything its line says; its default in params.
      const first = c.texts.find((x) => x.type === 'state');
      const entry = first.param_schema.find((p) => p.name === KNOB.name);
      assert.ok(entry, `${KNOB.name} not in param_schema: ${first.param_schema.map((p) => p.name)}`);
      for (const k of Object.keys(KNOB)) assert.equal(entry[k], KNOB[k], `param_schema ${KNOB.name}.${k}`);
      assert.equal(first.params[KNOB.name], KNOB.default);
      // (1) Validated: out of range is refused, the range named.
      c.send({ type: 'set_params', seq: 1, params: { [KNOB.name]: 2.5 } });
      await c.until(() => c.texts.some((x) => x.type === 'error' && x.seq === 1), 10000, 'refusal');
      const err = c.texts.find((x) => x.type === 'error' && x.seq === 1);
      assert.equal(err.error, 'bad parameter');
      assert.match(err.detail, /test_knob = 2\.5: must be in \[0, 2\]/);
      // (3) Settable: state.params follows.
      c.send({ type: 'set_params', seq: 2, params: { [KNOB.name]: 1.25 } });
      await c.until(() => c.texts.some((x) => x.type === 'state' && x.params?.[KNOB.name] === 1.25), 10000, 'state with 1.25');
      assert.ok(!c.texts.some((x) => x.type === 'error' && x.seq === 2), 'set_params 1.25 refused');

      // (4) The browser's panel, a viewer's page: the input, its range, the value, the doc.
      browser = await launch();
      const ctx = await browser.newContext({ viewport: { width: 1280, height: 760 } });
      ctx.setDefaultTimeout(15000);
      const page = await ctx.newPage();
      await page.goto(`${srv.base}/${new URL(s.join_url).search}`);
      const sel = `#params input[data-param="${KNOB.name}"]`;
      await page.waitForFunction((q) => document.querySelector(q)?.value === '1.25', sel, { timeout: 30000, polling: 50 })
        .catch(async (e) => {
          const seen = await page.evaluate((q) => document.querySelector(q)?.outerHTML ?? 'no such input', sel);
          throw new Error(`the panel never showed ${KNOB.name} = 1.25 (${seen}): ${e.message.split('\n')[0]}`);
        });
      const shown = await page.evaluate(([q, name]) => {
        const el = document.querySelector(q), row = document.querySelector(`[data-param-row="${name}"]`);
        return { min: el.min, max: el.max, type: el.type, disabled: el.disabled, doc: row?.querySelector('.doc')?.textContent,
          label: row?.querySelector('label')?.textContent, group: row?.closest('details')?.querySelector('summary')?.textContent };
      }, [sel, KNOB.name]);
      assert.deepEqual(shown, { min: '0', max: '2', type: 'number', disabled: true, doc: KNOB.doc,
        label: `test knob (${KNOB.unit})`, group: KNOB.group });
      await page.locator(`[data-param-row="${KNOB.name}"]`).scrollIntoViewIfNeeded();
      await page.locator('#panel').screenshot({ path: path.join(OUT, 'extension-panel.png') });
    } finally {
      await c?.close().catch(() => {});
      await browser?.close();
      await srv.stop();
    }
  });
