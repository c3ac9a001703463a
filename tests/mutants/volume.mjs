// The volume scene's behaviour checks and the bugs they claim to catch (see run.mjs).
const tests = ['$BUILD/softcast-tests'];
const run = (filter) => `$BUILD/softcast-tests ${filter}`;

export default [
  {
    name: 'relaxation off for condition A (a permanent dent)',
    file: 'sim/volume/cpu.c',
    find: 'int npull = CM_RELAX_PHASES * s->params.relax_iterations;',
    replace: 'int npull = CM_RELAX_PHASES * (s->kp.condition == 0 ? 0 : s->params.relax_iterations);',
    build: tests, test: run('condition_a_stops'), caught_by: 'condition_a_stops_without_overshoot_and_returns_to_rest',
  },
  {
    name: 'elastic memory off (home_weight ignored)',
    file: 'sim/volume/kernels.h',
    find: 'float wh = kp->home_weight * kp->relax_w[ci];',
    replace: 'float wh = 0.0f * kp->relax_w[ci];',
    build: tests, test: run('condition_a_stops'), caught_by: 'condition_a_stops_without_overshoot_and_returns_to_rest',
  },
  {
    name: 'settles while the elastic pull still moves (no dirty blocks after the repair)',
    file: 'sim/volume/cpu.c',
    find: 'if (h >= npull - CM_RELAX_PHASES)\n                    f |= BLK_DIRTY;',
    replace: '(void)npull;',
    build: tests, test: run('condition_a_stops'), caught_by: 'condition_a_stops_without_overshoot_and_returns_to_rest',
  },
  {
    name: 'relaxation ignores the bands (no clip)',
    file: 'sim/volume/kernels.h',
    find: 'v = cm_clip_band(v, lo[b], hi[b]);',
    replace: '(void)0;',
    build: tests, test: run('relaxation_keeps'), caught_by: 'relaxation_keeps_the_bands_and_grabs_stay_in_the_box',
  },
  {
    name: 'a grab pulled past the lattice box (offset not cut)',
    file: 'sim/volume/volume_state.c',
    find: 'off[b] = cm_minf(cm_maxf(want, s->grab_off_lo[b]), s->grab_off_hi[b]);',
    replace: 'off[b] = want;',
    build: tests, test: run('relaxation_keeps'), caught_by: 'relaxation_keeps_the_bands_and_grabs_stay_in_the_box',
  },
  {
    name: 'B without memory (alpha dropped)',
    file: 'sim/volume/kernels.h',
    find: 'v[b] = kp->alpha * V[b] + s * dx[b];',
    replace: 'v[b] = s * dx[b];',
    build: tests, test: run('condition_b_rings'), caught_by: 'condition_b_rings_for_several_frames',
  },
  {
    name: 'skin and muscle parameters swapped',
    file: 'sim/volume/volume_model.c', // the table's defaults: skin gets muscle's column and back
    find: "T1(1, \"skin_fat\", type, f, d1, lo, hi, unit, doc)     \\\n    T1(2, \"muscle_organ\", type, f, d2, lo, hi, unit, doc) \\",
    replace: "T1(1, \"skin_fat\", type, f, d2, lo, hi, unit, doc)     \\\n    T1(2, \"muscle_organ\", type, f, d1, lo, hi, unit, doc) \\",
    build: tests, test: run('skin_rings_wider'), caught_by: 'skin_rings_wider_than_muscle_in_the_same_geometry',
  },
  {
    name: 'b1 = 0 (damping that grows with distance ignored)',
    file: 'sim/volume/volume_model.c',
    find: 'kp->b1[a] = ta->b1;',
    replace: 'kp->b1[a] = 0.0f;',
    build: tests, test: run('condition_c_cuts'), caught_by: 'condition_c_cuts_ringing_and_b1_damps_large_pulls',
  },
  {
    name: 'first-leader-only propagation',
    file: 'sim/volume/kernels.h',
    find: 'sponsored = 1;\n            t_first = cm_minf(t_first, due);',
    replace: 'sponsored = 1;\n            t_first = cm_minf(t_first, due);\n            break;',
    build: tests, test: run('chainmail_many_sponsors'), caught_by: 'chainmail_many_sponsors_equal_the_least_fixpoint',
  },
  {
    name: 'active blocks forget the neighbours of what moved',
    file: 'sim/volume/cpu.c',
    find: 'dilate(s, BLK_RECENT, BLK_ACTIVE);',
    replace: 'for (int64_t b = 0; b < s->nblocks; b++)\n            bf[b] |= (uint16_t)((bf[b] & BLK_RECENT) ? BLK_ACTIVE : 0);',
    build: tests, test: run('active_blocks_give'), caught_by: 'active_blocks_give_the_same_state_as_full_sweeps',
  },
  {
    name: 'bone not rigid (relaxes like passive tissue)',
    file: 'sim/volume/volume_model.c',
    find: 'kp->rigid[a] = tol < CM_MIN_TOLERANCE;',
    replace: 'kp->rigid[a] = 0;',
    build: tests, test: run('bone_dragged'), caught_by: 'bone_dragged_stays_rigid_and_goes_home_once_released',
  },
  {
    name: 'bone steps home without carrying the tissue (no wave)',
    file: 'sim/volume/cpu.c',
    find: 'mark_reached(s, i, 0.0f);',
    replace: '(void)0;',
    build: tests, test: run('condition_a_stops'), caught_by: 'condition_a_stops_without_overshoot_and_returns_to_rest',
  },
  {
    name: 'the driver is not told why a pull stops at the box',
    file: 'server/scene_volume.c',
    find: 'if (c->driver)\n        c->reply_text(c, c->driver, text);',
    replace: '(void)c;',
    build: ['$BUILD/test/softcast-server'], test: 'node --test tests/server/grab.test.mjs', caught_by: 'grab.test.mjs: a pull past the volume box stops at its edge',
  },
  {
    name: 'NIfTI orientation: the flips not applied (an LPS scan read with its left on the right)',
    file: 'sim/volume/volume_io.c',
    find: '        flip[(code[a] - 1) / 2] = code[a] % 2 == 0;',
    replace: '        flip[(code[a] - 1) / 2] = 0;',
    build: tests, test: run('nifti_orientation'), caught_by: 'volume_io_nifti_orientation_read_to_ras',
  },
  {
    name: 'NIfTI orientation: the qform ignored (a file with only a qform kept as stored)',
    file: 'sim/volume/volume_io.c',
    find: '    if (h->qform_code > 0) {',
    replace: '    if (h->qform_code > 99) {',
    build: tests, test: run('nifti_orientation'), caught_by: 'volume_io_nifti_orientation_read_to_ras',
  },
  {
    name: 'fit to a budget: one factor too many (a volume that fits is still averaged)',
    file: 'sim/volume/volume_io.c',
    find: 'ceil_div(v->nz, f) > max_elements)',
    replace: 'ceil_div(v->nz, f) >= max_elements)',
    build: tests, test: run('volume_io_fit'), caught_by: 'volume_io_fit_to_a_budget_by_the_smallest_factor',
  },
];
