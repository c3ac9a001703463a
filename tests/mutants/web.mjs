// web.mjs: the browser client's behaviour checks (tests/e2e/) against the bugs they claim
// to catch. The crowd tests run by name (the busy-page test uses the crowd test's page, so
// both run); the viewer test with the lobby test, whose page it drives; the worker's frame
// rule under node (wire.test.mjs) and the drawing of objects on a page of their own
// (objects.test.mjs), neither with a server.
const build = ['web', '$BUILD/test/softcast-server'];
const crowd = 'node --test --test-name-pattern "cloth crowd|page busy" tests/e2e/';
const viewer = 'node --test --test-name-pattern "lobby creates|a viewer in a second context" tests/e2e/client.test.mjs';
const nonames = 'node --test tests/e2e/nonames.test.mjs';
const extension = 'node --test tests/e2e/extension.test.mjs';
const wire = 'node --test tests/e2e/wire.test.mjs';
const objects = 'node --test tests/e2e/objects.test.mjs';
const capeGrab = 'node --test --test-name-pattern "cloth crowd|press on a cape" tests/e2e/client.test.mjs';

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
    name: 'the worker hands the page every update in turn (a backlog, not the newest)',
    file: 'web-client/src/core/wire.mjs',
    find: 'outbox = [update(last)];',
    replace: 'outbox.push(update(last));',
    build,
    test: crowd,
    caught_by: 'e2e "a page busy for a second shows the newest frame next, decoded meanwhile off its main thread"',
  },
  {
    name: 'a new material for each key, the old one disposed (its shader program recompiled)',
    file: 'web-client/src/core/view3d.mjs',
    find: 'if (!made.has(variant)) {',
    replace: 'if (made.get(variant)?.dispose() ?? true) {',
    build,
    test: crowd,
    caught_by: 'e2e "a cloth crowd: renders, walks, the page stays responsive, a forced LOD re-keys every cape"',
  },
  {
    name: 'the volume module keeps a control of its own for a parameter (its name written in the client)',
    file: 'web-client/src/scenes/volume.mjs',
    find: 'const SKIN = 0, BONE = 1;',
    replace: "const SKIN = 0, BONE = 1;\nexport const CONDITIONS = { param: 'condition', choices: ['A', 'B', 'C'] };",
    build,
    test: nonames,
    caught_by: 'nonames.test.mjs "no scene parameter is named in web-client/src/, ..."',
  },
  {
    name: 'the shell branches on a scene name',
    file: 'web-client/src/main.mjs',
    find: '    if (!sceneName) openScene(t.scene);',
    replace: "    if (!sceneName) openScene(t.scene);\n    $('#sideview').hidden = t.scene === 'cloth' && !t.characters;",
    build,
    test: nonames,
    caught_by: 'nonames.test.mjs "... and the shell and core/ name no scene"',
  },
  {
    name: 'the 3D view leaves out an object by its id (a scene\'s choice made in core/)',
    file: 'web-client/src/core/view3d.mjs',
    find: '.filter((h) => rank(h) !== null && rank(h) !== undefined)',
    replace: '.filter((h) => rank(h) !== null && rank(h) !== undefined && h.object.userData.id !== 3)',
    build,
    test: nonames,
    caught_by: 'nonames.test.mjs "... and the shell and core/ name no scene"',
  },
  {
    name: 'a choice drawn as a free number (no select of its names)',
    file: 'web-client/src/core/panel.mjs',
    find: "if (p.type === 'choice') {\n      el = h('select'",
    replace: "if (p.type === 'choice' && p.choices?.length > 99) {\n      el = h('select'",
    build,
    test: viewer,
    caught_by: 'e2e "a viewer in a second context sees the same frames and cannot drive"',
  },
  {
    name: 'the panel enabled for viewers',
    file: 'web-client/src/core/panel.mjs',
    find: '      el.disabled = !this.driver;\n      const v = st.params?.[name];',
    replace: '      el.disabled = false;\n      const v = st.params?.[name];',
    build,
    test: viewer,
    caught_by: 'e2e "a viewer in a second context sees the same frames and cannot drive"',
  },
  {
    name: 'a refused change not shown (the server\'s words lost)',
    file: 'web-client/src/core/panel.mjs',
    find: '    this.error.hidden = false;',
    replace: '',
    build,
    test: viewer,
    caught_by: 'e2e "a viewer in a second context sees the same frames and cannot drive"',
  },
  {
    name: 'the panel drops the schema\'s range (no min and max on the input)',
    file: 'web-client/src/core/panel.mjs',
    find: "id, type: 'number', min: p.min, max: p.max, step:",
    replace: "id, type: 'number', step:",
    build,
    test: extension,
    caught_by: 'extension.test.mjs "a parameter added by one line in sim/cloth/params.def is ... in the panel"',
  },
  {
    name: 'the panel never shows the values of state.params',
    file: 'web-client/src/core/panel.mjs',
    find: 'if (v === undefined || document.activeElement === el) continue;',
    replace: 'continue;',
    build,
    test: extension,
    caught_by: 'extension.test.mjs "a parameter added by one line in sim/cloth/params.def is ... in the panel"',
  },
  {
    name: 'the worker skips a structural frame when a newer one is queued (latest wins for every frame)',
    file: 'web-client/src/core/wire.mjs',
    find: '(!structural && i < waiting.length - 1)',
    replace: '(i < waiting.length - 1)',
    build,
    test: wire,
    caught_by: 'wire.test.mjs "the worker applies every structural frame, in order, and the newest; ..."',
  },
  {
    name: 'the worker goes on after a refused structural frame (no wait for the next snapshot)',
    file: 'web-client/src/core/wire.mjs',
    find: "if (structural || e.code === 'state') awaitSnapshot = true;",
    replace: '',
    build,
    test: wire,
    caught_by: 'wire.test.mjs "frames wait for a snapshot: at the start, and after a refusal ..."',
  },
  {
    name: 'a line set drawn without its scalar\'s colours',
    file: 'web-client/src/core/view3d.mjs',
    find: "if (o.colors) g.setAttribute('color', new THREE.BufferAttribute(o.colors, 3));",
    replace: '',
    build,
    test: objects,
    caught_by: 'objects.test.mjs "a line set with a scalar per vertex is drawn in the colormap\'s colours ..."',
  },
  {
    name: 'an object drawn in one style (the cloth\'s cape and body groups not split)',
    file: 'web-client/src/core/view3d.mjs',
    find: 'if (e.groups.length > 1) {',
    replace: 'if (e.groups.length > 99) {',
    build,
    test: objects,
    caught_by: 'objects.test.mjs "a line set without a scalar is grey; a two-part object gets its groups ..."',
  },
  {
    name: 'a cape grabbed by its first vertex, not the one pressed on',
    file: 'web-client/src/scenes/cloth.mjs',
    find: "conn.send('grab', { character: hit.object, vertex: hit.vertex, point });",
    replace: "conn.send('grab', { character: hit.object, vertex: 0, point });",
    build,
    test: capeGrab,
    caught_by: 'e2e "a press on a cape grabs that character by its own vertex and pulls it"',
  },
  {
    name: "softbody scene: the regions' palette ignored (the organ in viridis)",
    file: 'web-client/src/core/wire.mjs',
    find: 'return palettes.has(o.id) ? paletteColors(',
    replace: 'return false ? paletteColors(',
    build,
    test: 'node --test tests/e2e/softbody.test.mjs',
    caught_by: 'e2e "a hybrid organ: drawn by region, pulled by the pointer, ..."',
  },
  {
    name: 'softbody scene: the tray buttons move the tray along the wrong axis',
    file: 'web-client/src/scenes/softbody.mjs',
    find: "shift(0, STEP_M)),",
    replace: "shift(1, STEP_M)),",
    build,
    test: 'node --test tests/e2e/softbody.test.mjs',
    caught_by: 'e2e "a hybrid organ: ..., rides the tray"',
  },
];
