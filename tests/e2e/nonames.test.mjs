// nonames.test.mjs: the browser client knows no scene's parameters and no scene outside
// its module. Every parameter a scene declares (sim/<scene>/params.def, read by
// paramsdef.mjs) is absent from every file of web-client/src/, as a whole word, comments
// included: the panel is drawn from state.param_schema, so a name written in the client
// is a second declaration waiting to disagree. The shell and core/ name no scene (no
// 'volume' or 'cloth' string, no surface id compared with a number): what differs by
// scene lives in scenes/<scene>.mjs. The reader is checked against a live server's
// param_schema of each scene, both ways.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { declaredParams, matches } from './paramsdef.mjs';
import { startServer, api, Client, wsUrl } from '../server/harness.mjs';

const ROOT = new URL('../../', import.meta.url).pathname;
const SRC = path.join(ROOT, 'web-client/src');

function sources(dir) {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? sources(path.join(dir, e.name)) : /\.m?js$/.test(e.name) ? [path.join(dir, e.name)] : []);
}
const escape = (s) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
// A whole word: no identifier character on either side ("params.x" and "'x'" are found).
const word = (s) => new RegExp(`(?<![\\w$])${escape(s)}(?![\\w$])`, 'g');

function lineOf(text, index) {
  return text.slice(0, index).split('\n').length;
}

test('no scene parameter is named in web-client/src/, and the shell and core/ name no scene', () => {
  const declared = declaredParams();
  const scenes = [...new Set(declared.map((d) => d.scene))];
  assert.ok(scenes.includes('volume') && scenes.includes('cloth'), `scenes read: ${scenes}`);
  assert.ok(declared.length >= 30, `only ${declared.length} parameters read from sim/*/params.def`);
  const files = sources(SRC);
  assert.ok(files.some((f) => f.endsWith('core/panel.mjs')), 'web-client/src/core/panel.mjs missing');
  const found = [];
  for (const f of files) {
    const text = fs.readFileSync(f, 'utf8');
    const rel = path.relative(ROOT, f);
    for (const d of declared)
      for (const m of text.matchAll(word(d.name))) found.push(`${rel}:${lineOf(text, m.index)}: ${d.scene} parameter "${d.name}"`);
    if (rel.startsWith('web-client/src/scenes/')) continue;
    for (const s of scenes)
      for (const m of text.matchAll(new RegExp(`['"\`]${escape(s)}['"\`]`, 'g')))
        found.push(`${rel}:${lineOf(text, m.index)}: the scene name ${m[0]} outside scenes/`);
    for (const m of text.matchAll(/\bid\s*[!=]==?\s*\d/g))
      found.push(`${rel}:${lineOf(text, m.index)}: a surface id compared with a number outside scenes/ (${m[0]})`);
  }
  assert.deepEqual(found, [], `the client names what only the schema and the scene modules should:\n${found.join('\n')}`);
});

test('the names read from params.def are the live param_schema of each scene', { timeout: 60000 }, async () => {
  const srv = await startServer(['--threads', '1']);
  try {
    for (const [scene, opts] of [['volume', { dims: [16, 16, 12] }], ['cloth', { characters: 1 }], ['softbody', { model: 'surface', particles: 100 }]]) {
      const s = (await api(srv.base, 'POST', '/api/sessions', { scene, ...opts })).json;
      const c = await new Client(wsUrl(s, s.control_token), { decode: false }).open();
      await c.until(() => c.texts.some((t) => t.type === 'state'), 10000, `${scene} state`);
      const schema = c.texts.find((t) => t.type === 'state').param_schema;
      await c.close();
      assert.ok(Array.isArray(schema) && schema.length > 0, `${scene}: no param_schema in the first state`);
      const declared = declaredParams().filter((d) => d.scene === scene);
      const unread = schema.filter((p) => !declared.some((d) => matches(d, p.name))).map((p) => p.name);
      assert.deepEqual(unread, [], `${scene}: in param_schema, not read from params.def`);
      const absent = declared.filter((d) => d.kind !== 'I' && !schema.some((p) => matches(d, p.name))).map((d) => d.name);
      assert.deepEqual(absent, [], `${scene}: read from params.def, not in param_schema`);
    }
  } finally {
    assert.equal(await srv.stop(), 0);
  }
});
