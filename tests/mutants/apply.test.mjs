// Every mutant still applies: its text occurs exactly once in its file. A refactor that
// rewrites the code a mutant breaks leaves the mutant stale, and `make mutants` then stops
// at it; this check, in `make test`, says so the day it happens (it once found six stale
// mutants, left by the batched scheduler and the relaxation seeds).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, '../..');
const lists = fs.readdirSync(here).filter((f) => f.endsWith('.mjs') && f !== 'run.mjs' && !f.endsWith('.test.mjs'));

test('every mutant\'s text occurs exactly once in its file', async () => {
  const stale = [];
  let count = 0;
  for (const f of lists) {
    const mod = await import(pathToFileURL(path.join(here, f)).href);
    for (const m of mod.default) {
      count++;
      const file = path.join(root, m.file);
      const n = fs.existsSync(file) ? fs.readFileSync(file, 'utf8').split(m.find).length - 1 : -1;
      if (n !== 1) stale.push(`${f}: "${m.name}": ${n < 0 ? 'no such file' : `${n} times`} in ${m.file}`);
    }
  }
  assert.ok(count > 100, `only ${count} mutants found`);
  assert.deepEqual(stale, [], `stale mutants:\n${stale.join('\n')}`);
});
