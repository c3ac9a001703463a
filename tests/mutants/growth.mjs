// growth.mjs: the growth scenes' checks (tests/sim/test_growth_*.c) against the bugs they claim
// to catch (see run.mjs). Each mutation breaks one rule of the plant or one ingredient of the
// truss; the test named beside it must fail.
const build = ['$BUILD/softcast-tests'];
const run = (filter) => `$BUILD/softcast-tests ${filter}`;
const plant = 'sim/growth/plant.c';
const truss = 'sim/growth/truss.c';
const kernels = 'sim/growth/kernels.h';
// The scene in the server, against its end-to-end tests (tests/server/growth.test.mjs).
const server = ['$BUILD/test/softcast-server'];
const node = (pattern) => `node --test --test-name-pattern "${pattern}" tests/server/growth.test.mjs`;
const adapter = 'server/scene_growth.c';

export default [
  {
    name: 'truss snapshot: the support that freed the beam not restored ("not held" names seq 0 after a restart)',
    file: 'server/scene_growth.c',
    find: '    v->p = p, v->next_s = next_s, v->support_seq = support_seq;',
    replace: '    v->p = p, v->next_s = next_s;',
    build, test: run('not_held_names'), caught_by: 'growth_scene_truss_not_held_names_the_support_that_freed_it_after_a_restore',
  },
  {
    name: 'truss snapshot: a version 1 part refused (a --state-dir kept before the seq was kept)',
    file: 'server/scene_growth.c',
    find: '    uint32_t version = sc_reader_tag_versions(&r, k_scene_tag, 1, GR_SCENE_VERSION);',
    replace: '    uint32_t version = sc_reader_tag_versions(&r, k_scene_tag, GR_SCENE_VERSION, GR_SCENE_VERSION);',
    build, test: run('not_held_names'), caught_by: 'growth_scene_truss_not_held_names_the_support_that_freed_it_after_a_restore',
  },
  {
    name: 'truss: "not held" told with seq 0, not as the answer to the support event that freed it',
    file: 'server/scene_growth.c',
    find: 'v->solved = 0, v->not_held = 0, v->support_seq = e->seq;',
    replace: 'v->solved = 0, v->not_held = 0;',
    build: ['$BUILD/test/softcast-server'],
    test: 'node --test tests/server/growth.test.mjs',
    caught_by: 'growth: the truss ... (not held: told as the answer to the support that freed it)',
  },
  {
    name: 'plant: the continuation keeps its parent\'s side (side branches stop alternating)',
    file: plant,
    find: '    c->side = (int8_t)-p->side;',
    replace: '    c->side = (int8_t)(kind == SIM_BRANCH_CONTINUATION ? p->side : -p->side);',
    build, test: run('plant_every_branch'),
    caught_by: '`plant_every_branch_obeys_the_rules_and_growth_stops`',
  },
  {
    name: 'plant: side branches up to 90% of their parent',
    file: plant,
    find: '        double ratio = uniform(&pl->rng, p->side_ratio_min, p->side_ratio_max);',
    replace: '        double ratio = uniform(&pl->rng, p->side_ratio_min, 0.9);',
    build, test: run('plant_every_branch'),
    caught_by: '`plant_every_branch_obeys_the_rules_and_growth_stops`',
  },
  {
    name: 'plant: continuations never turn (the draw dropped)',
    file: plant,
    find: '        double turn = uniform(&pl->rng, -p->cont_turn_deg, p->cont_turn_deg);',
    replace: '        double turn = 0.0 * uniform(&pl->rng, -p->cont_turn_deg, p->cont_turn_deg);',
    build, test: run('plant_count_height'),
    caught_by: '`plant_count_height_and_draws_over_100_seeds_match_the_rules`',
  },
  {
    name: 'plant: side angles drawn from 30 to 40 degrees only (still within the rule\'s range)',
    file: plant,
    find: '        double angle = uniform(&pl->rng, p->side_angle_min, p->side_angle_max);',
    replace: '        double angle = uniform(&pl->rng, p->side_angle_min, p->side_angle_max - 5.0f);',
    build, test: run('plant_count_height'),
    caught_by: '`plant_count_height_and_draws_over_100_seeds_match_the_rules`',
  },
  {
    name: 'plant: a branch at the length limit stops (clones only above it)',
    file: plant,
    find: '        if (pl->b[k].length < p->min_length)\n            continue; /* too short: stops without cloning */',
    replace: '        if (pl->b[k].length < 1.3f * p->min_length)\n            continue; /* too short: stops without cloning */',
    build, test: run('plant_every_branch'),
    caught_by: '`plant_every_branch_obeys_the_rules_and_growth_stops`',
  },
  {
    name: 'truss: edge members cloned whole (A_o, not its half)',
    file: truss,
    find: '    const double half = 0.5 * t->a_orth;\n    t->cell[c] = 1;',
    replace: '    const double half = (i == 0 || j == 0 || i == t->p.nx - 1 || j == t->p.ny - 1 ? 1.0 : 0.5) * t->a_orth;\n    t->cell[c] = 1;',
    build, test: run('truss_uniform_tension'),
    caught_by: '`truss_uniform_tension_gives_the_plates_stiffness`',
  },
  {
    name: 'truss: diagonals as stiff as if they were l long, not l sqrt 2',
    file: truss,
    find: '    v.k_diag = t->p.youngs_pa / (t->p.cell_m * sqrt(2.0));',
    replace: '    v.k_diag = t->p.youngs_pa / t->p.cell_m;',
    build, test: run('truss_relaxation_matches'),
    caught_by: '`truss_relaxation_matches_the_direct_solve`',
  },
  {
    name: 'truss: relaxation ignores the diagonals down and to the left',
    file: kernels,
    find: '    if (i > 0 && j > 0) /* d1 of cell (i-1, j-1), down left */',
    replace: '    if (0 && i > 0 && j > 0) /* d1 of cell (i-1, j-1), down left */',
    build, test: run('truss_relaxation_matches'),
    caught_by: '`truss_relaxation_matches_the_direct_solve`',
  },
  {
    name: 'truss: cells\' energies count the diagonals at length l (the source\'s formula as written)',
    file: truss,
    find: '            out[c] = 0.5 * E * l * (half * so + sqrt(2.0) * t->a_diag * sd);',
    replace: '            out[c] = 0.5 * E * l * (half * so + t->a_diag * sd);',
    build, test: run('truss_energy_adds_up'),
    caught_by: '`truss_energy_adds_up_concentrates_at_load_and_supports_and_is_symmetric`',
  },
  {
    name: 'truss: a pin alone counts as held (the turning check dropped)',
    file: truss,
    find: '    return det > 1e-9;',
    replace: '    return det > 1e-9 || G[0][0] * G[1][1] > 0.0;',
    build, test: run('truss_bad_setups'),
    caught_by: '`truss_bad_setups_refused`',
  },
  {
    name: 'truss: clones only to the right (the beam never grows up)',
    file: truss,
    find: '            if (j + 1 < ny && !t->cell[i + (j + 1) * nx])',
    replace: '            if (0 && j + 1 < ny && !t->cell[i + (j + 1) * nx])',
    build, test: run('truss_grows_by_cloning'),
    caught_by: '`truss_grows_by_cloning_with_the_sources_areas`',
  },
  {
    name: 'growth scene: the plant\'s branches re-keyed every generation (no append)',
    file: adapter,
    find: '    o->topo_version = (uint32_t)n;',
    replace: '    o->topo_version = (uint32_t)n;\n    o->force_key = 1;',
    build: server, test: node('appends only'),
    caught_by: 'growth: a plant grows by appends only, stops by itself, the same tree on 1 and 2 threads',
  },
  {
    name: 'growth scene: at rest between the beats of its growth',
    file: adapter,
    find: '        return v->stopped || sim_plant_done(v->plant) || v->p.steps_per_s <= 0.0f;',
    replace: '        return 1;',
    build: server, test: node('appends only'),
    caught_by: 'growth: a plant grows by appends only, stops by itself, the same tree on 1 and 2 threads',
  },
  {
    name: 'growth scene: a dragged load read from the point\'s y, not its height z',
    file: adapter,
    find: '        double dx = (double)at[0] - (double)p[0], dz = (double)at[2] - (double)p[2];',
    replace: '        double dx = (double)at[0] - (double)p[0], dz = (double)at[2] - (double)p[1];',
    build: server, test: node('energy follows the load'),
    caught_by: 'growth: a truss clones cell by cell, is solved, and its energy follows the load',
  },
  {
    name: 'growth scene: a load change leaves the old solution standing',
    file: adapter,
    find: '        sim_truss_load(v->truss, v->load_i, v->load_j, 0.0, -1e3 * (double)p.load_kn);\n        v->solved = 0, v->not_held = 0;',
    replace: '        sim_truss_load(v->truss, v->load_i, v->load_j, 0.0, -1e3 * (double)p.load_kn);',
    build: server, test: node('energy follows the load'),
    caught_by: 'growth: a truss clones cell by cell, is solved, and its energy follows the load',
  },
  {
    name: 'growth scene: a new truss\'s first cell left out of the view until the first clone',
    file: adapter,
    find: '    list_new_parts(v);\n    truss_load_case(v);',
    replace: '    truss_load_case(v);',
    build: server, test: node('REST options'),
    caught_by: 'growth: REST options for both models, refusals that name the field',
  },

];
