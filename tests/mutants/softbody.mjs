// softbody.mjs: the softbody scene's checks (tests/sim/test_softbody*.c) against the bugs they
// claim to catch (see run.mjs). Each mutation breaks one ingredient of the surface or the
// hybrid model; the test named beside it must fail.
const build = ['$BUILD/softcast-tests'];
const run = (filter) => `$BUILD/softcast-tests ${filter}`;
const cpu = 'sim/softbody/cpu.c';
const kernels = 'sim/softbody/kernels.h';

export default [
  {
    name: 'softbody: shape matching off',
    file: cpu,
    find: '        shape_match(m, s, c);',
    replace: '        (void)shape_match;',
    build, test: run('shape_matching_returns_to_rest'),
    caught_by: '`softbody_shape_matching_returns_to_rest_and_edges_alone_do_not`',
  },
  {
    name: 'softbody: rotation extraction replaced by the identity',
    file: kernels,
    find: '    sb_extract_rotation(a, quat, SB_ROT_ITERS);\n    sb_quat_to_mat(quat, R);',
    replace: '    float one[4] = {1.0f, 0.0f, 0.0f, 0.0f};\n    (void)a;\n    (void)quat;\n    sb_quat_to_mat(one, R);',
    build, test: run('spinning_body'),
    caught_by: '`softbody_a_spinning_body_keeps_spinning_in_shape`',
  },
  {
    name: 'softbody: gravity applied twice when the body rides a tray',
    file: cpu,
    find: '    c.acc[2] = -p->gravity;',
    replace: '    c.acc[2] = -p->gravity * (s->nplanes > 0 && s->planes[0].attached ? 2.0f : 1.0f);',
    build, test: run('sags_as_on_the_floor'),
    caught_by: '`softbody_in_the_tray_sags_as_on_the_floor`',
  },
  {
    name: "softbody: the tray's motion not applied to the particles",
    file: 'sim/softbody/sb_frame.c',
    find: '        sb_carry(i, s->x, s->v, R, t);',
    replace: '        (void)i;',
    build, test: run('tray_carries'),
    caught_by: '`softbody_tray_carries_the_body_rigidly`',
  },
  {
    name: 'softbody: closed-mesh volume constraint off',
    file: cpu,
    find: '        volume_constraint(m, s, c);',
    replace: '        (void)volume_constraint;',
    build, test: run('rests_on_the_floor_keeping'),
    caught_by: '`softbody_rests_on_the_floor_keeping_its_volume`',
  },
  {
    name: 'softbody: no friction against the planes',
    file: kernels,
    find: '        float f = tl <= lim ? 1.0f : lim / tl;',
    replace: '        float f = 0.0f * lim * tl;',
    build, test: run('friction_holds'),
    caught_by: '`softbody_friction_holds_on_a_slope_or_lets_it_slide`',
  },
  {
    name: 'softbody: distance stiffness used per iteration as given',
    file: cpu,
    find: '    float k = sb_iteration_stiffness(s->prm.distance_stiffness, s->prm.iterations);',
    replace: '    float k = s->prm.distance_stiffness;',
    build, test: run('iteration_count'),
    caught_by: '`softbody_distance_stiffness_does_not_depend_on_the_iteration_count`',
  },
  {
    name: 'softbody: no velocity clamp',
    file: kernels,
    find: '    float f = sp > vmax ? vmax / sp : 1.0f;',
    replace: '    float f = 1.0f + 0.0f * vmax;',
    build, test: run('stiffness_1_survives'),
    caught_by: '`softbody_stiffness_1_survives_10000_random_grabs_and_tray_moves`',
  },
  {
    name: 'softbody: virtual springs off',
    file: cpu,
    find: '    if (springs && b >= 0)',
    replace: '    if (0 && springs && b >= 0)',
    build, test: run('virtual_springs'),
    caught_by: '`softbody_hybrid_virtual_springs_hold_the_region_boundary`',
  },
  {
    name: "softbody: every region takes region 0's compliance",
    file: 'sim/softbody/sb_state.c',
    find: '/ p->region_compliance[r];',
    replace: '/ p->region_compliance[0];',
    build, test: run('strains_a_third'),
    caught_by: '`softbody_hybrid_stiff_region_strains_a_third_of_the_soft_at_most`',
  },
  {
    name: 'softbody: embedded vertices ignore their weights (sit on the first vertex)',
    file: kernels,
    find: '        out[i * 3 + b] = wi[0] * x[t4[0] * 3 + b] + wi[1] * x[t4[1] * 3 + b] +',
    replace: '        out[i * 3 + b] = x[t4[0] * 3 + b] + 0.0f * wi[1] * x[t4[1] * 3 + b] +',
    build, test: run('embedded_surface'),
    caught_by: '`softbody_hybrid_embedded_surface_rides_its_tets`',
  },
  {
    name: 'softbody: an edge in three triangles let through',
    file: 'sim/softbody/sb_mesh.c',
    find: '        if (j - i > 2)',
    replace: '        if (0 && j - i > 2)',
    build, test: run('bad_meshes'),
    caught_by: '`softbody_bad_meshes_are_refused_with_a_reason`',
  },
  {
    name: 'softbody: a region without a material let through',
    file: 'sim/softbody/sb_tets.c',
    find: '        if (t->region[e] >= t->nregion)',
    replace: '        if (t->region[e] >= SIM_SOFTBODY_NREGION)',
    build, test: run('bad_tets'),
    caught_by: '`softbody_hybrid_bad_tets_are_refused_with_a_reason`',
  },
  {
    name: "softbody: the phantom organ's tets left in millimetres",
    file: 'sim/softbody/sb_organ.c',
    find: 'out->x[i] = t->vert[i] * 1e-3f;',
    replace: 'out->x[i] = t->vert[i];',
    build, test: run('phantom_organ'),
    caught_by: '`softbody_hybrid_phantom_organ_sits_on_its_surface_and_rests`',
  },
];
