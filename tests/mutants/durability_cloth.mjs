// durability_cloth.mjs: the cloth scene's snapshot and restore (sim/cloth/cloth_snapshot.c,
// server/scene_cloth.c's save and restore) against the bugs their tests claim to catch. Each
// mutation loses one part of the state; cloth_snapshot_restores_mid_blend_and_held_bitwise
// (tests/sim/test_cloth.c) steps the restored scene beside the original, and
// scene_cloth_restored_session_shows_what_the_original_does
// (tests/server/test_scene_cloth_snapshot.c) compares the session's views.
const snap = 'sim/cloth/cloth_snapshot.c';
const adapter = 'server/scene_cloth.c';
const build = ['$BUILD/softcast-tests'];
const test = '$BUILD/softcast-tests cloth_snapshot_restores_mid_blend_and_held_bitwise';
const caught_by = '`cloth_snapshot_restores_mid_blend_and_held_bitwise`';

export default [
  {
    name: 'durability cloth: restore forgets the velocities (read into the scratch)',
    file: snap,
    find: '    sc_reader_get(&in->r, g->v, (size_t)n * 3 * sizeof(float));',
    replace: '    sc_reader_get(&in->r, g->xp, (size_t)n * 3 * sizeof(float));',
    build, test, caught_by,
  },
  {
    name: 'durability cloth: restore ends a running LOD blend',
    file: snap,
    find: '        *c = in.ch[i];',
    replace: `        *c = in.ch[i];
        if (c->blend) {
            cloth_garment_free(&c->src);
            c->blend = 0;
        }`,
    build, test, caught_by,
  },
  {
    name: 'durability cloth: restore forgets the hold since the last switch',
    file: snap,
    find: '    c->hold = get_in(in, "hold", i, 0, INT32_MAX);',
    replace: '    c->hold = get_in(in, "hold", i, 0, INT32_MAX) * 0 + in->prm.lod_hold_frames;',
    build, test, caught_by,
  },
  {
    name: 'durability cloth: the session forgets how long a grown box is kept',
    file: adapter,
    find: '        v->wide = vs[i].wide;',
    replace: '        v->wide = 0;',
    build,
    test: '$BUILD/softcast-tests scene_cloth_restored_session_shows_what_the_original_does',
    caught_by: '`scene_cloth_restored_session_shows_what_the_original_does`',
  },
];
