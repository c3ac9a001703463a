// web.mjs: the browser client's behaviour checks (tests/e2e/client.test.mjs) against the
// bugs they claim to catch. Each test runs the crowd tests by name (the busy-page test
// uses the crowd test's page, so both run).
const build = ['web', '$BUILD/test/softcast-server'];
const crowd = 'node --test --test-name-pattern "cloth crowd|page busy" tests/e2e/';

export default [
  {
    name: 'frames decoded on the page\'s main thread (the wire module in the page, no Worker)',
    file: 'web-client/src/core/connection.mjs',
    find: "this.worker = new Worker(new URL('./wire.js', import.meta.url), { type: 'module' });",
    replace: "this.worker = { postMessage: (m) => this.inPage.then((w) => w.command(m)) };\n" +
      "    this.inPage = import('./wire.mjs').then(({ createWire }) => createWire((m) => this.worker.onmessage({ data: m })));",
    build,
    test: crowd,
    caught_by: 'e2e "a page busy for a second shows the newest frame next, decoded meanwhile off its main thread"',
  },
  {
    name: 'the worker hands the page every decoded frame in turn (a backlog, not the newest)',
    file: 'web-client/src/core/wire.mjs',
    find: 'outbox = [{ f, base, surfaces }];',
    replace: 'outbox.push({ f, base, surfaces });',
    build,
    test: crowd,
    caught_by: 'e2e "a page busy for a second shows the newest frame next, decoded meanwhile off its main thread"',
  },
  {
    name: 'a new material for each keyframe, the old one disposed (its shader program recompiled)',
    file: 'web-client/src/core/view3d.mjs',
    find: 'if (!this.materials.has(key)) {',
    replace: 'if (this.materials.get(key)?.dispose() ?? true) {',
    build,
    test: crowd,
    caught_by: 'e2e "a cloth crowd: renders, walks, the page stays responsive, a forced LOD re-keys every cape"',
  },
];
