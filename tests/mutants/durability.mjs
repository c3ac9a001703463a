// Mutations of what brings sessions back after a restart (issue 12, item 5; server/durable.c):
// each undoes one part of the snapshot, the log or the clean-up, and names the test that
// must fail. The scenes' own save and restore have theirs (durability_cloth.mjs,
// durability_softbody.mjs, and the volume's below).
const server = ['$BUILD/test/softcast-server'];
const node = (pattern) => `node --test --test-name-pattern "${pattern}" tests/server/durability.test.mjs`;

export default [
  {
    name: 'SIGTERM saves nothing (the sessions come back from their logs alone)',
    file: 'server/main.c',
    find: '    srv_durable_save_all(s); /* SIGTERM loses nothing',
    replace: '    (void)srv_durable_save_all; /* SIGTERM loses nothing',
    build: server,
    test: node('SIGTERM mid-drag'),
    caught_by: 'durability: SIGTERM mid-drag: the session comes back with the same state, links and tokens',
  },
  {
    name: 'the log never replayed (a killed server\'s sessions come back at their last snapshot)',
    file: 'server/durable.c',
    find: '        replay_log(&r, log, n, id);',
    replace: '        (void)replay_log;',
    build: server,
    test: node('SIGKILL'),
    caught_by: 'durability: SIGKILL: every acknowledged event comes back from the log; ...',
  },
  {
    name: 'events never logged (only queries would be skipped)',
    file: 'server/durable.c',
    find: '    if (!d || d->broken || (h->flags & SRV_EV_QUERY))',
    replace: '    if (1 || !d || d->broken || (h->flags & SRV_EV_QUERY))',
    build: server,
    test: node('SIGKILL'),
    caught_by: 'durability: SIGKILL: every acknowledged event comes back from the log; ...',
  },
  {
    name: 'a deleted session\'s state left behind (it comes back after a restart)',
    file: 'server/session.c',
    find: '            srv_durable_remove(dead); /* deleted or expired: it does not come back */',
    replace: '            (void)srv_durable_remove;',
    build: server,
    test: node('SIGKILL'),
    caught_by: 'durability: SIGKILL: ... a deleted session does not',
  },
  {
    name: 'an upload not kept (its session cannot be read again after a restart)',
    file: 'server/durable.c',
    find: '    if (enabled(s) && temp) {',
    replace: '    if (enabled(s) && temp && 0) {',
    build: server,
    test: node('uploaded CT'),
    caught_by: 'durability: an uploaded CT comes back after a restart, read again from the copy kept for it',
  },
  {
    name: 'the volume\'s velocities not restored (the tissue stops ringing after a restart)',
    file: 'sim/volume/volume_snapshot.c',
    find: '        sc_reader_get(&r, s->vel, n * 3 * sizeof(float));',
    replace: '        { float *t = sc_calloc(n * 3, sizeof(float)); sc_reader_get(&r, t, n * 3 * sizeof(float)); free(t); }',
    build: ['$BUILD/softcast-tests'],
    test: '$BUILD/softcast-tests volume_snapshot_mid_drag',
    caught_by: 'volume_snapshot_mid_drag_steps_on_as_the_original',
  },
  {
    name: 'a replay that applies none of the recorded events (it only steps)',
    file: 'server/recording.c',
    find: '        } else if (h.kind >= SRV_ITEM_SCENE) {',
    replace: '        } else if (0 && h.kind >= SRV_ITEM_SCENE) {',
    build: server,
    test: 'node --test tests/server/recording.test.mjs',
    caught_by: 'recording: a recorded drag replays frame for frame, ends at the same state, pauses and seeks',
  },
  {
    name: 'a seek back without starting the clients again (frame numbers go back, nobody is sent them)',
    file: 'server/recording.c',
    find: '        srv_session_rewind(ss);',
    replace: '        (void)srv_session_rewind;',
    build: server,
    test: 'node --test tests/server/recording.test.mjs',
    caught_by: 'recording: ... pauses and seeks',
  },
];
