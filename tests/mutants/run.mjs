#!/usr/bin/env node
// run.mjs: `make mutants`. Proves that each behaviour check catches the bug it names.
//
// Every other .mjs file in this folder exports a list of mutations:
//   { name, file, find, replace, build, test, caught_by }
// - find: literal text that must occur exactly once in `file` (a stale mutation whose
//   text moved away is an error, never a silent pass);
// - build: make targets to rebuild after the edit ($BUILD is the scratch build folder);
// - test: a shell command that must pass on the clean tree and fail on the mutant;
// - caught_by: the test named in the table.
// The runner copies the tracked files into build/mutants/src (the real tree is never
// edited), checks each test command once on the clean copy, then applies one mutation at
// a time, rebuilds incrementally, runs its test and restores the file. It prints a
// Markdown table and exits non-zero unless every mutation was caught. With
// --update-readme it writes the table into tests/README.md between the markers.
// Usage: node tests/mutants/run.mjs [--only SUBSTRING] [--update-readme]
import { execFileSync, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, '../..');
const argv = process.argv.slice(2);
const only = argv.includes('--only') ? argv[argv.indexOf('--only') + 1] : null;
const updateReadme = argv.includes('--update-readme');
const scratch = path.join(root, 'build/mutants/src');
const build = path.join(root, 'build/mutants/build');
const TEST_TIMEOUT_S = Number(process.env.MUTANT_TIMEOUT_S ?? 300);

async function loadMutants() {
  const lists = fs.readdirSync(here).filter((f) => f.endsWith('.mjs') && f !== 'run.mjs' && !f.endsWith('.test.mjs')).sort();
  const all = [];
  for (const f of lists) {
    const mod = await import(pathToFileURL(path.join(here, f)).href);
    for (const m of mod.default) all.push({ ...m, list: f });
  }
  return all.filter((m) => !only || m.name.includes(only) || m.list.includes(only));
}

// Files of the scratch copy that the tree no longer tracks (moved or deleted sources) go:
// the Makefile takes sources by wildcard, so a stale copy would be built and linked.
function pruneScratch(tracked, dir = scratch) {
  for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, e.name), rel = path.relative(scratch, p);
    if (e.isSymbolicLink()) continue; // node_modules links
    if (e.isDirectory()) pruneScratch(tracked, p);
    else if (!tracked.has(rel)) fs.rmSync(p);
  }
}

function copyTree() {
  const files = execFileSync('git', ['ls-files', '-z'], { cwd: root }).toString().split('\0').filter(Boolean);
  if (fs.existsSync(scratch)) pruneScratch(new Set(files.filter((f) => fs.existsSync(path.join(root, f)))));
  for (const f of files) {
    const src = path.join(root, f), dst = path.join(scratch, f);
    if (!fs.existsSync(src)) continue; // deleted in the working tree
    const data = fs.readFileSync(src);
    if (fs.existsSync(dst) && fs.readFileSync(dst).equals(data)) continue; // keep mtimes: make stays incremental
    fs.mkdirSync(path.dirname(dst), { recursive: true });
    fs.writeFileSync(dst, data);
    // A changed file is stamped now, so make rebuilds what it feeds: stamped with the tree's
    // time it could look older than an object the scratch built since (after an earlier
    // run, from the file before this change), which make would then keep. Lock files keep
    // the tree's time: stamped now one would look newer than the tree's installed packages,
    // and `make web` would run npm ci through the node_modules link below, emptying the
    // tree's own.
    const st = fs.statSync(src);
    fs.chmodSync(dst, st.mode);
    if (path.basename(f) === 'package-lock.json') fs.utimesSync(dst, st.atime, st.mtime);
  }
  // The npm packages the tests need were installed by `make` in the real tree.
  for (const d of ['web-client', 'tests/server', 'tests/e2e', 'tests/deploy', 'deploy/load']) {
    const link = path.join(scratch, d, 'node_modules');
    if (!fs.existsSync(link) && fs.existsSync(path.join(root, d, 'node_modules')))
      fs.symlinkSync(path.join(root, d, 'node_modules'), link);
  }
}

const env = {
  ...process.env,
  BUILD: build,
  SOFTCAST_SERVER: path.join(build, 'test/softcast-server'),
  SOFTCAST_DATA: process.env.SOFTCAST_DATA ?? path.join(root, 'build/data'),
  // The load generator the tests drive servers with (a mutant of the tool itself builds its
  // own and names it in its test command).
  SOFTCAST_LOAD: process.env.SOFTCAST_LOAD ?? path.join(root, 'build/softcast-load'),
  ASAN_OPTIONS: 'detect_leaks=0:abort_on_error=0',
  UBSAN_OPTIONS: 'print_stacktrace=1:halt_on_error=1',
};
const subst = (s) => s.replaceAll('$BUILD', build);

// The command runs in a session of its own (setsid), so that on a timeout the whole group
// goes (a test runner's children and their servers), not only its shell.
function sh(cmd, timeoutS) {
  const t0 = Date.now();
  const r = spawnSync('setsid', ['sh', '-c', cmd], { cwd: scratch, env, encoding: 'utf8', timeout: timeoutS * 1000, maxBuffer: 64 << 20 });
  if (r.pid) try { process.kill(-r.pid, 'SIGKILL'); } catch { /* the group is gone already */ }
  return { ok: r.status === 0, status: r.status, timedOut: r.error?.code === 'ETIMEDOUT', out: (r.stdout ?? '') + (r.stderr ?? ''), s: (Date.now() - t0) / 1000 };
}

function make(targets) {
  if (!targets.length) return; // a mutation of files no build reads (the router's rules, manifests)
  // The mutants build without ASan (UBSan only): the same code, several times faster.
  const r = sh(`make -s BUILD=${build} SANITIZE=undefined ${targets.map(subst).join(' ')}`, 900);
  if (!r.ok) throw new Error(`build failed:\n${r.out.slice(-4000)}`);
}

function lastLines(out, n = 6) {
  return out.trim().split('\n').filter((l) => /FAIL|not ok|Error|error|failed/.test(l)).slice(-n).join('\n');
}

const mutants = await loadMutants();
if (!mutants.length) { console.error('mutants: none selected'); process.exit(2); }
fs.mkdirSync(scratch, { recursive: true });
copyTree();

// Every mutation must apply to exactly one place before anything is run.
for (const m of mutants) {
  const text = fs.readFileSync(path.join(scratch, m.file), 'utf8');
  const count = text.split(m.find).length - 1;
  if (count !== 1) {
    console.error(`mutants: "${m.name}": the text to replace occurs ${count} times in ${m.file}`);
    process.exit(2);
  }
}

const T0 = Date.now();
const allTargets = [...new Set(mutants.flatMap((m) => m.build))];
console.log(`mutants: ${mutants.length} mutations; building the clean copy (${allTargets.join(' ')})`);
make(allTargets);

// The clean tree must pass each test command: a mutant "caught" by a test that fails
// anyway proves nothing.
const baseline = new Map();
for (const cmd of [...new Set(mutants.map((m) => m.test))]) {
  const r = sh(subst(cmd), TEST_TIMEOUT_S);
  baseline.set(cmd, r);
  console.log(`clean  ${r.ok ? 'pass' : 'FAIL'}  ${r.s.toFixed(1)} s  ${cmd}`);
  if (!r.ok) console.log(r.out.slice(-3000));
}

const rows = [];
for (const m of mutants) {
  const file = path.join(scratch, m.file);
  const orig = fs.readFileSync(file, 'utf8');
  let result, detail = '', secs = 0;
  try {
    fs.writeFileSync(file, orig.replace(m.find, m.replace));
    make(m.build);
    if (!baseline.get(m.test).ok) {
      result = 'clean tree fails';
    } else {
      const r = sh(subst(m.test), TEST_TIMEOUT_S);
      secs = r.s;
      result = r.ok ? 'MISSED' : r.timedOut ? 'caught (timeout)' : 'caught';
      detail = lastLines(r.out);
    }
  } catch (e) {
    result = 'build failed';
    detail = String(e.message).slice(-1500);
  } finally {
    fs.writeFileSync(file, orig);
  }
  rows.push({ ...m, result, secs });
  console.log(`${result.padEnd(16)} ${secs.toFixed(1).padStart(6)} s  ${m.name}`);
  if (result !== 'caught' && detail) console.log(detail);
}
// Leave the scratch build matching the clean tree.
make(allTargets);

const table = [
  '| mutation | file | caught by | result |',
  '|---|---|---|---|',
  ...rows.map((r) => `| ${r.name} | \`${r.file}\` | ${r.caught_by} | ${r.result} |`),
].join('\n');
console.log(`\n${table}\n`);
const caught = rows.filter((r) => r.result.startsWith('caught')).length;
console.log(`mutants: ${caught} of ${rows.length} caught in ${((Date.now() - T0) / 1000).toFixed(0)} s`);

if (updateReadme && !only) {
  const readme = path.join(root, 'tests/README.md');
  const text = fs.readFileSync(readme, 'utf8');
  const begin = '<!-- mutants:begin -->', end = '<!-- mutants:end -->';
  const i = text.indexOf(begin), j = text.indexOf(end);
  if (i < 0 || j < i) { console.error('mutants: tests/README.md has no mutants markers'); process.exit(2); }
  fs.writeFileSync(readme, `${text.slice(0, i + begin.length)}\n${table}\n${text.slice(j)}`);
  console.log('mutants: table written to tests/README.md');
}
process.exit(caught === rows.length ? 0 : 1);
