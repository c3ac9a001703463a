// cloth.mjs: the cloth LOD switch's checks against the bugs they claim to catch. Each
// mutation breaks one ingredient of the handoff; cloth_handoff_against_ground_truth_...
// (tests/sim/test_cloth.c) judges every switch against the same run without it.
const scene = 'sim/cloth/cloth_scene.c';
const build = ['$BUILD/softcast-tests'];
const test = '$BUILD/softcast-tests cloth_handoff_against_ground_truth';
const caught_by = '`cloth_handoff_against_ground_truth_in_six_scenarios_both_ways`';

export default [
  {
    name: 'cloth: handoff velocity zeroed',
    file: scene,
    find: `        settle(m, &dst, p, prm);
        break;
    case SIM_SWITCH_NAIVE_ZERO_VELOCITY:`,
    replace: `        settle(m, &dst, p, prm);
        memset(dst.v, 0, (size_t)dst.n * 3 * sizeof(float));
        break;
    case SIM_SWITCH_NAIVE_ZERO_VELOCITY:`,
    build, test, caught_by,
  },
  {
    name: 'cloth: blend disabled',
    file: scene,
    find: 'if (prm->blend_vel_frames > 0) {',
    replace: 'if (0) {',
    build, test, caught_by,
  },
  {
    name: 'cloth: handoff without the settle (a plain copy)',
    file: scene,
    find: `        settle(m, &dst, p, prm);
        break;
    case SIM_SWITCH_NAIVE_ZERO_VELOCITY:`,
    replace: `        break;
    case SIM_SWITCH_NAIVE_ZERO_VELOCITY:`,
    build, test, caught_by,
  },
  {
    name: 'cloth: settle at zero compliance (strain projected away, as before)',
    file: scene,
    find: '    float a_stretch = prm->stretch_compliance * l->compliance_scale * inv_h * inv_h;\n    cloth_body b;',
    replace: '    float a_stretch = 0.0f * inv_h;\n    cloth_body b;',
    build, test, caught_by,
  },
  {
    name: 'cloth: mapped velocity not turned back to the world (root frame kept)',
    file: scene,
    find: `        v[0] = rvel[0] + c * qv[0] - s * qv[1];
        v[1] = rvel[1] + s * qv[0] + c * qv[1];`,
    replace: `        v[0] = rvel[0] + qv[0];
        v[1] = rvel[1] + qv[1];`,
    build, test, caught_by,
  },
];
