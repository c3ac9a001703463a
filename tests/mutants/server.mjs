// Mutations of softcast-server, each against the server test that claims to catch it
// (tests/server/). The runner builds the scratch server without ASan; each test command
// runs one test file, or one test of it, so the whole list stays quick.
const server = ['$BUILD/test/softcast-server'];
const node = (file, pattern) =>
  `node --test${pattern ? ` --test-name-pattern "${pattern}"` : ''} tests/server/${file}.test.mjs`;

export default [
  {
    name: 'element-limit check removed (any volume size is built)',
    file: 'server/scene_volume.c',
    find: 'if (n > s->cfg.max_elements) {',
    replace: 'if (n > s->cfg.max_elements && 0) {',
    build: server,
    test: node('behaviour', '^limits'),
    caught_by: 'behaviour: limits: volume size (413), ...',
  },
  {
    name: 'pause ignored by the worker (a paused session still steps)',
    file: 'server/sched.c',
    find: 'int moved = !paused && ss->scene->step(s, ss, &step_ms);',
    replace: 'int moved = ss->scene->step(s, ss, &step_ms);',
    build: server,
    test: node('behaviour', 'pause stops frames'),
    caught_by: 'behaviour: a settled volume sends nothing; pause stops frames ...',
  },
  {
    name: 'pause event ignored (never paused)',
    file: 'server/sched.c',
    find: 'ss->paused = e->type == PROTO_EV_PAUSE;',
    replace: 'ss->paused = 0;',
    build: server,
    test: node('behaviour', 'pause stops frames'),
    caught_by: 'behaviour: a settled volume sends nothing; pause stops frames ...',
  },
  {
    name: 'frames while settled or paused (every beat publishes)',
    file: 'server/sched.c',
    find: 'int changed = moved || (n > 0 && !paused);',
    replace: 'int changed = moved || 1;',
    build: server,
    test: node('behaviour', 'pause stops frames'),
    caught_by: 'behaviour: a settled volume sends nothing; pause stops frames ...',
  },
  {
    name: 'keyframes while idle (the periodic keyframe without motion)',
    file: 'server/sched.c',
    find: '(changed && s->cfg.keyframe_every > 0 &&',
    replace: '(s->cfg.keyframe_every > 0 &&',
    build: server,
    test: node('keyframes', 'keyframe-every N'),
    caught_by: 'keyframes: --keyframe-every N: ... none once settled',
  },
  {
    name: 'an unbounded per-client queue (frames written whenever ready, not when the socket drains)',
    file: 'server/ws.c',
    find: 'if (atomic_load(&s->stop) || has_news(k))\n                lws_callback_on_writable(k->wsi);',
    replace: 'if (atomic_load(&s->stop) || has_news(k))\n                write_next(w, k);',
    build: server,
    test: node('behaviour', 'never reads'),
    caught_by: 'behaviour: a client that never reads does not stall the others, ...',
  },
  {
    name: 'a frame stuck: the worker stalls 1.2 s every 100 frames',
    file: 'server/sched.c',
    find: '    ss->frame_no++;\n',
    replace: '    ss->frame_no++;\n    if (ss->frame_no % 100 == 0) {\n        struct timespec stall = {1, 200000000};\n        nanosleep(&stall, NULL);\n    }\n',
    build: server,
    test: node('latency'),
    caught_by: 'latency: input-to-frame latency: p99 under 500 ms, no event later than 1 s',
  },
  {
    name: 'a lost wake-up: frames wait until something else wakes the WebSocket thread',
    file: 'server/sched.c',
    find: 'if (woke)\n            srv_ws_wake(s);',
    replace: 'if (woke && 0)\n            srv_ws_wake(s);',
    build: server,
    test: node('latency'),
    caught_by: 'latency: input-to-frame latency: p99 under 500 ms, no event later than 1 s',
  },
  {
    name: "a viewer's refused event is applied all the same",
    file: 'server/ws.c',
    find: '"this client watches; events need control");\n        return;',
    replace: '"this client watches; events need control");',
    build: server,
    test: node('server', 'same deformation'),
    caught_by: 'server: driver and two viewers see the same deformation ...',
  },
  {
    name: 'no close timeout: a deleted session stays held by a client whose socket is full',
    file: 'server/ws.c',
    find: 'if (closing)\n                lws_set_timeout(k->wsi, PENDING_TIMEOUT_CLOSE_SEND, 2);',
    replace: 'if (closing && 0)\n                lws_set_timeout(k->wsi, PENDING_TIMEOUT_CLOSE_SEND, 2);',
    build: server,
    test: node('behaviour', 'deleted session'),
    caught_by: 'behaviour: a deleted session is freed even if a client stopped reading with its socket full',
  },
];
