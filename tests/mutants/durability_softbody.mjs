// durability_softbody.mjs: the softbody scene's snapshot and restore (sim/softbody/sb_snapshot.c,
// server/scene_softbody.c's save, restore and hash) against the bugs their tests claim to
// catch (see run.mjs). Each mutation loses one part of the state on restore; the tests step
// the restored state (tests/sim/test_softbody_snapshot.c) or session
// (tests/server/test_scene_softbody_snapshot.c) beside the original and compare hashes.
const snap = 'sim/softbody/sb_snapshot.c';
const build = ['$BUILD/softcast-tests'];
const run = (filter) => `$BUILD/softcast-tests ${filter}`;

export default [
  {
    name: 'durability softbody: restore forgets the velocities (skipped over)',
    file: snap,
    find: '    sc_reader_get(r, s->v, n * 3 * sizeof(float));',
    replace: '    r->at += n * 3 * sizeof(float);',
    build, test: run('softbody_snapshot_surface_restored_steps_on_bitwise'),
    caught_by: '`softbody_snapshot_surface_restored_steps_on_bitwise`',
  },
  {
    name: 'durability softbody: restore lets go of the grab held at the save',
    file: snap,
    find: '    s->ngrab = sn->ngrab, s->guard_resets = sn->guard_resets;',
    replace: '    s->ngrab = 0, s->guard_resets = sn->guard_resets;',
    build, test: run('softbody_snapshot_hybrid_restored_steps_on_bitwise'),
    caught_by: '`softbody_snapshot_hybrid_restored_steps_on_bitwise`',
  },
  {
    name: "durability softbody: restore forgets shape matching's warm-start rotation",
    file: snap,
    find: '    memcpy(s->quat, sn->quat, sizeof s->quat);',
    replace: '    (void)sn->quat;',
    build, test: run('softbody_snapshot_surface_restored_steps_on_bitwise'),
    caught_by: '`softbody_snapshot_surface_restored_steps_on_bitwise`',
  },
  {
    name: 'durability softbody: restore drops the tray move not yet carried',
    file: snap,
    find: '    memcpy(s->cpos, sn->cpos, sizeof s->cpos);',
    replace: '    memcpy(s->cpos, sn->ppos, sizeof s->cpos);',
    build, test: run('softbody_snapshot_hybrid_restored_steps_on_bitwise'),
    caught_by: '`softbody_snapshot_hybrid_restored_steps_on_bitwise`',
  },
  {
    name: 'durability softbody: the restored session forgets it was asleep',
    file: 'server/scene_softbody.c',
    find: '    v->still = still;',
    replace: '    (void)still;',
    build, test: run('softbody_scene_restored_asleep_stays_asleep'),
    caught_by: '`softbody_scene_restored_asleep_stays_asleep`',
  },
];
