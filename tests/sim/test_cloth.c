/* test_cloth.c: the cloth scene. LOD handoff against ground truth (the run that did not
 * switch) and both naive switches, in six scenarios both ways; hysteresis, a long random run,
 * thread-count independence, the invalid mapping path, bad input, and snapshots (restored
 * mid-blend with a vertex held, stepped beside the original; damaged ones refused). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sim/cloth/cloth_internal.h"
#include "sim/cloth/cloth.h"
#include "tests/harness.h"
#include "tests/scenes/cloth_scenes.h"

/* Guards on the switch itself: no material point moved further than this at the switch
 * (the settle moves the hem up to 4.3 cm, wind_impulse 0->2; a wrong table moves
 * decimetres), and no deeper penetration while settling. */
#define E_POS_SWITCH    0.05f
#define MAX_PENETRATION 0.01f
/* Frames compared with the run that did not switch (cs_run_truth). */
#define GT_WINDOW 30

static sim_cloth_model *default_model(void)
{
    char err[256];
    sim_cloth_model *m = NULL;
    if (sim_cloth_model_create(&m, NULL, err, sizeof err) != SIM_OK)
        fprintf(stderr, "model: %s\n", err);
    return m;
}

static sim_backend *cpu(int threads)
{
    char err[256];
    sim_backend *b = NULL;
    sim_backend_create(&b, SIM_BACKEND_CPU, threads, err, sizeof err);
    return b;
}

static sim_status push(sim_cloth_scene *s, sim_cloth_event ev)
{
    char err[256];
    return sim_cloth_push_event(s, &ev, err, sizeof err);
}

static sim_cloth_event event(sim_cloth_event_type t)
{
    sim_cloth_event ev;
    memset(&ev, 0, sizeof ev);
    ev.type = t;
    return ev;
}

/* The default model, a CPU backend and a scene of n characters, made and freed together. */
typedef struct fixture {
    sim_cloth_model *m;
    sim_backend *b;
    sim_cloth_scene *s;
} fixture;

static int fixture_open(fixture *f, int threads, int characters)
{
    char err[256];
    memset(f, 0, sizeof *f);
    f->m = default_model();
    f->b = cpu(threads);
    return f->m && f->b &&
           sim_cloth_scene_create(&f->s, f->m, f->b, characters, err, sizeof err) == SIM_OK;
}

static void fixture_close(fixture *f)
{
    sim_cloth_scene_destroy(f->s);
    sim_backend_destroy(f->b);
    sim_cloth_model_destroy(f->m);
}

TEST(cloth_model_lods_differ_and_tables_cover_every_pair)
{
    sim_cloth_model *m = default_model();
    REQUIRE(m);
    CHECK(sim_cloth_model_nlod(m) == 3);
    int nt[3], n[3];
    for (int k = 0; k < 3; k++)
        n[k] = sim_cloth_model_lod_size(m, k, &nt[k]);
    CHECK(n[0] > n[1] && n[1] > n[2] && n[2] > 0);
    CHECK(nt[0] > nt[1] && nt[1] > nt[2]);
    /* Different triangulations even where grids would coincide: copying by index is
     * impossible (the first triangles already differ). */
    const uint32_t *t0 = sim_cloth_model_triangles(m, 0), *t2 = sim_cloth_model_triangles(m, 2);
    CHECK(memcmp(t0, t2, 6 * sizeof(uint32_t)) != 0);
    sim_cloth_model_destroy(m);
}

/* The switch judged against ground truth: the same scenario run on without the switch
 * (cs_run_truth), GT_WINDOW frames, every free vertex against the reference's surface
 * point it maps to. Six scenarios, both ways, each of handoff / naive copy (x and v through
 * the table in world space) / naive zero velocity, with the blend off and on. Measured
 * figures and the margins below: sim/README.md, "The LOD switch against ground truth".
 * What is claimed, and where it is not:
 *  - the velocity transfer: with the blend off the handoff beats zero velocity, over the
 *    window, in position and velocity, everywhere (measured 1.33x at the least);
 *  - the settle (all that the handoff adds to the copy): with the blend off, in the
 *    velocity error of the first CS_TRUTH_EARLY frames (where a pop shows), 1.3x better
 *    to the coarse LOD (measured 1.44x at the least) and 1.05x to the fine one (1.12x);
 *    not at a jump's landing to the coarse LOD (0.99x: the coarse cape's own landing
 *    dominates), where it is only no worse; and over the window never worse than 3%;
 *  - the blend earns its place: on, the first frames' velocity error is lower than off
 *    (1.17x at the least), and it beats zero velocity with the blend on too (1.19x), but
 *    for the same jump landing (1.02x);
 *  - with the blend on, the handoff is not better than the copy (0.94x to 1.23x): no
 *    claim, only that it is within 10%. */
typedef struct gt_claim {
    const char *what;
    float ratio, need; /* baseline error / handoff error, and the least it must be */
} gt_claim;

static void gt_check(const char *sc, int from, int to, const gt_claim *c, int n)
{
    for (int i = 0; i < n; i++)
        CHECKF(c[i].ratio >= c[i].need, "%s %d->%d: %s: %.3fx, claimed >= %.2fx", sc, from, to,
               c[i].what, (double)c[i].ratio, (double)c[i].need);
}

TEST_LONG(cloth_handoff_against_ground_truth_in_six_scenarios_both_ways)
{
    sim_cloth_model *m = default_model();
    sim_backend *b = cpu(1);
    REQUIRE(m && b);
    enum { H0, C0, Z0, H1, C1, Z1, NV };
    const cs_variant v[NV] = {
        {SIM_SWITCH_HANDOFF, 0}, {SIM_SWITCH_NAIVE_COPY, 0}, {SIM_SWITCH_NAIVE_ZERO_VELOCITY, 0},
        {SIM_SWITCH_HANDOFF, 1}, {SIM_SWITCH_NAIVE_COPY, 1}, {SIM_SWITCH_NAIVE_ZERO_VELOCITY, 1}};
    int dirs[2][2] = {{0, 2}, {2, 0}};
    for (int sc = 0; sc < CS_NSCENARIO; sc++)
        for (int d = 0; d < 2; d++) {
            int from = dirs[d][0], to = dirs[d][1];
            const char *name = cs_scenario_name(sc);
            cs_truth t[NV];
            char err[256];
            REQUIRE(cs_run_truth(m, b, (cs_scenario)sc, from, to, GT_WINDOW, v, NV, t, err,
                                 sizeof err) == SIM_OK);
            th_note("%s %d->%d, cm and m/s over %d frames (first %d): handoff %.2f %.3f (%.2f "
                    "%.3f), copy %.2f %.3f (%.2f %.3f), zero %.2f %.3f; blend on: handoff %.2f "
                    "%.3f (%.2f %.3f), copy %.2f %.3f, zero %.2f %.3f",
                    name, from, to, GT_WINDOW, CS_TRUTH_EARLY, 100.0 * (double)t[H0].pos_mean,
                    (double)t[H0].vel_mean, 100.0 * (double)t[H0].pos_early,
                    (double)t[H0].vel_early, 100.0 * (double)t[C0].pos_mean, (double)t[C0].vel_mean,
                    100.0 * (double)t[C0].pos_early, (double)t[C0].vel_early,
                    100.0 * (double)t[Z0].pos_mean, (double)t[Z0].vel_mean,
                    100.0 * (double)t[H1].pos_mean, (double)t[H1].vel_mean,
                    100.0 * (double)t[H1].pos_early, (double)t[H1].vel_early,
                    100.0 * (double)t[C1].pos_mean, (double)t[C1].vel_mean,
                    100.0 * (double)t[Z1].pos_mean, (double)t[Z1].vel_mean);
            int landing_to_coarse = sc == CS_JUMP && to == 2;
            gt_claim c[] = {
                {"velocity transfer, position (blend off)", t[Z0].pos_mean / t[H0].pos_mean, 1.25f},
                {"velocity transfer, velocity (blend off)", t[Z0].vel_mean / t[H0].vel_mean, 1.25f},
                {"settle, first frames' velocity (blend off)", t[C0].vel_early / t[H0].vel_early,
                 landing_to_coarse ? 0.97f
                 : to == 2         ? 1.3f
                                   : 1.05f},
                {"settle, window position (blend off)", t[C0].pos_mean / t[H0].pos_mean, 0.97f},
                {"settle, window velocity (blend off)", t[C0].vel_mean / t[H0].vel_mean, 0.97f},
                {"blend, first frames' velocity", t[H0].vel_early / t[H1].vel_early, 1.1f},
                {"blend on, against zero velocity", t[Z1].vel_early / t[H1].vel_early,
                 landing_to_coarse ? 0.97f : 1.1f},
                {"blend on, against the copy, first frames", t[C1].vel_early / t[H1].vel_early,
                 0.9f},
                {"blend on, against the copy, window", t[C1].pos_mean / t[H1].pos_mean, 0.9f},
            };
            gt_check(name, from, to, c, (int)(sizeof c / sizeof c[0]));
            const sim_cloth_switch *h = &t[H1].sw;
            CHECK(h->from == from && h->to == to && h->strategy == SIM_SWITCH_HANDOFF);
            CHECKF(t[Z1].sw.e_vel > 0.5f, "%s: the garment was not moving (zero E_vel %.3f)", name,
                   (double)t[Z1].sw.e_vel);
            CHECKF(h->e_pos <= E_POS_SWITCH, "%s %d->%d: E_pos %.4f", name, from, to,
                   (double)h->e_pos);
            CHECKF(h->max_penetration <= MAX_PENETRATION, "%s: penetration %.4f", name,
                   (double)h->max_penetration);
            CHECK(h->invalid_mappings == 0);
        }
    sim_backend_destroy(b);
    sim_cloth_model_destroy(m);
}

/* Carrying multipliers over a switch would be inert: the solver resets them at every
 * substep (small steps), and constraint ids of different LODs never match. So nothing is
 * carried, and this shows the reset: a frame solved from garbage multipliers is bitwise
 * the frame solved from zeros, with one iteration a substep (where the CPU solver keeps
 * each multiplier in a register) and with two (where it resets the array). (White box:
 * the garment and the CPU solver directly.) */
TEST(cloth_multipliers_from_before_a_frame_change_nothing)
{
    sim_cloth_model *m = default_model();
    REQUIRE(m);
    const cloth_lod *l = &m->lod[0];
    for (int iters = 1; iters <= 2; iters++) {
        sim_cloth_params prm = sim_cloth_default_params();
        prm.iterations = iters;
        cloth_pose p0, p1;
        memset(&p0, 0, sizeof p0);
        p1 = p0;
        p1.pos[0] = 0.02f; /* the body moves: the constraints work */
        p1.vel[0] = 1.2f;
        float *x[2], *v[2];
        for (int k = 0; k < 2; k++) {
            cloth_garment g;
            memset(&g, 0, sizeof g);
            g.lod = 0;
            g.n = l->n;
            g.x = malloc((size_t)l->n * 3 * sizeof(float));
            g.v = calloc((size_t)l->n * 3, sizeof(float));
            g.xp = malloc((size_t)l->n * 3 * sizeof(float));
            g.w = malloc((size_t)l->n * sizeof(float));
            g.lambda = malloc((size_t)l->ncons * sizeof(float));
            REQUIRE(g.x && g.v && g.xp && g.w && g.lambda);
            memcpy(g.x, l->rest, (size_t)l->n * 3 * sizeof(float));
            memcpy(g.w, l->w, (size_t)l->n * sizeof(float));
            for (int c = 0; c < l->ncons; c++)
                g.lambda[c] = k ? 1000.0f * (float)((c % 7) - 3) : 0.0f;
            for (int f = 0; f < 3; f++)
                cloth_cpu_backend.solve(m, &g, &p0, &p1, &prm, 1);
            x[k] = g.x;
            v[k] = g.v;
            free(g.xp), free(g.w), free(g.lambda);
        }
        CHECK(memcmp(x[0], x[1], (size_t)l->n * 3 * sizeof(float)) == 0);
        CHECK(memcmp(v[0], v[1], (size_t)l->n * 3 * sizeof(float)) == 0);
        float moved = 0.0f;
        for (int i = 0; i < l->n * 3; i++)
            moved = fabsf(x[0][i] - l->rest[i]) > moved ? fabsf(x[0][i] - l->rest[i]) : moved;
        CHECK(moved > 1e-3f); /* it did solve something */
        for (int k = 0; k < 2; k++)
            free(x[k]), free(v[k]);
    }
    sim_cloth_model_destroy(m);
}

TEST(cloth_lod_hysteresis_and_hold_time)
{
    fixture fx;
    REQUIRE(fixture_open(&fx, 1, 1));
    sim_cloth_scene *s = fx.s;
    char err[256];
    sim_cloth_params p = sim_cloth_get_params(s);
    /* Hovering at the LOD 0/1 enter distance, 0.3 m either side: one switch, then the
     * exit distance is never crossed. */
    int hover = 0;
    for (int f = 0; f < 300; f++) {
        sim_cloth_event ev = event(SIM_CLOTH_EV_CAMERA);
        ev.point[0] = p.lod_enter[0] + ((f / 5) % 2 ? 0.3f : -0.3f);
        ev.point[2] = 1.0f; /* 1 m up: the distance is measured from the chest */
        push(s, ev);
        sim_cloth_metrics mt;
        REQUIRE(sim_cloth_step(s, &mt, err, sizeof err) == SIM_OK);
        hover += mt.switches;
    }
    CHECK(hover == 1 && sim_cloth_lod(s, 0) == 1);
    /* Swinging across both distances every 5 frames: the LOD changes at most once per
     * hold time. */
    int switches = 0, last_switch = -100000, min_gap = 100000;
    for (int f = 0; f < 600; f++) {
        sim_cloth_event ev = event(SIM_CLOTH_EV_CAMERA);
        float d = (f / 5) % 2 ? p.lod_enter[0] + 0.5f : p.lod_exit[0] - 0.5f;
        ev.point[0] = d, ev.point[2] = 1.0f;
        push(s, ev);
        sim_cloth_metrics mt;
        REQUIRE(sim_cloth_step(s, &mt, err, sizeof err) == SIM_OK);
        if (mt.switches) {
            switches++;
            if (f - last_switch < min_gap)
                min_gap = f - last_switch;
            last_switch = f;
        }
    }
    CHECK(switches >= 2); /* it does switch */
    CHECKF(min_gap >= p.lod_hold_frames, "switches %d frames apart, hold %d", min_gap,
           p.lod_hold_frames);
    CHECK(switches <= 600 / p.lod_hold_frames + 1);
    /* Between the exit and the enter distances nothing switches, however long. */
    sim_cloth_event ev = event(SIM_CLOTH_EV_CAMERA);
    ev.point[0] = 0.5f * (p.lod_enter[0] + p.lod_exit[0]), ev.point[2] = 1.0f;
    push(s, ev);
    REQUIRE(sim_cloth_step(s, NULL, err, sizeof err) == SIM_OK);
    int lod = sim_cloth_lod(s, 0), flips = 0;
    for (int f = 0; f < 200; f++) {
        ev.point[0] = 0.5f * (p.lod_enter[0] + p.lod_exit[0]) + 0.3f * sinf((float)f);
        push(s, ev);
        sim_cloth_metrics mt;
        REQUIRE(sim_cloth_step(s, &mt, err, sizeof err) == SIM_OK);
        flips += mt.switches;
    }
    CHECK(flips == 0 && sim_cloth_lod(s, 0) == lod);
    fixture_close(&fx);
}

/* 10,000 frames of random motion, camera, wind, grabs and forced LODs: never a NaN, never
 * deeper than the stated penetration. */
TEST(cloth_random_10000_frames_no_nan_no_deep_penetration)
{
    fixture fx;
    REQUIRE(fixture_open(&fx, 0, 2));
    sim_cloth_scene *s = fx.s;
    char err[256];
    srand(12345);
    float worst = 0.0f;
    int nonfinite = 0, switches = 0;
    for (int f = 0; f < 10000; f++) {
        int r = rand() % 100;
        sim_cloth_event ev = event(SIM_CLOTH_EV_CAMERA);
        ev.character = rand() % 2;
        if (r < 3) {
            ev.type = SIM_CLOTH_EV_MOTION;
            ev.motion = (sim_motion)(rand() % SIM_NMOTION);
        } else if (r < 5) {
            ev.type = SIM_CLOTH_EV_WIND;
            for (int k = 0; k < 3; k++)
                ev.point[k] = (float)(rand() % 800 - 400) / 100.0f;
        } else if (r < 8) {
            float pos[3];
            sim_cloth_root(s, ev.character, pos, NULL);
            ev.point[0] = pos[0] + (float)(rand() % 3000) / 100.0f;
            ev.point[1] = pos[1];
            ev.point[2] = 1.5f;
        } else if (r < 9) {
            ev.type = SIM_CLOTH_EV_FORCE_LOD;
            ev.lod = rand() % 4 - 1;
        } else if (r < 10) {
            int n;
            const float *x = sim_cloth_positions(s, ev.character, &n);
            ev.type = SIM_CLOTH_EV_GRAB;
            ev.vertex = n - 1 - rand() % (n / 2);
            for (int k = 0; k < 3; k++)
                ev.point[k] = x[ev.vertex * 3 + k] + (float)(rand() % 20 - 10) / 100.0f;
        } else if (r < 12) {
            ev.type = SIM_CLOTH_EV_RELEASE;
        } else {
            continue;
        }
        push(s, ev);
        sim_cloth_metrics mt;
        REQUIRE(sim_cloth_step(s, &mt, err, sizeof err) == SIM_OK);
        nonfinite += mt.nonfinite;
        switches += mt.switches;
        worst = mt.max_penetration > worst ? mt.max_penetration : worst;
    }
    for (int c = 0; c < 2; c++) {
        int n;
        const float *x = sim_cloth_positions(s, c, &n);
        for (int i = 0; i < n * 3; i++)
            CHECK(isfinite(x[i]));
    }
    CHECK(nonfinite == 0);
    CHECK(switches > 20); /* the run did exercise the handoff */
    CHECKF(worst <= MAX_PENETRATION, "deepest penetration %.4f m", (double)worst);
    fixture_close(&fx);
}

/* A crowd (characters in parallel) and a big sheet (constraints of a colour in parallel)
 * give bitwise the same result on 1 and 2 threads. */
TEST_LONG(cloth_same_hash_with_1_and_2_threads)
{
    char err[256];
    sim_cloth_model_options big = sim_cloth_default_model_options();
    big.nlod = 1;
    big.cols[0] = big.rows[0] = 50;
    big.body = 0;
    big.width = big.length = 1.0f;
    for (int kind = 0; kind < 2; kind++) {
        sim_cloth_model *m;
        REQUIRE(sim_cloth_model_create(&m, kind ? &big : NULL, err, sizeof err) == SIM_OK);
        uint64_t h[2];
        for (int t = 0; t < 2; t++) {
            sim_backend *b = cpu(t + 1);
            sim_cloth_scene *s;
            REQUIRE(sim_cloth_scene_create(&s, m, b, kind ? 1 : 6, err, sizeof err) == SIM_OK);
            sim_cloth_event ev = event(SIM_CLOTH_EV_MOTION);
            ev.character = -1;
            ev.motion = SIM_MOTION_TURN;
            push(s, ev);
            for (int f = 0; f < 120; f++) {
                if (f == 30) {
                    ev = event(SIM_CLOTH_EV_CAMERA); /* some characters switch */
                    ev.point[0] = 3.0f, ev.point[1] = 9.0f, ev.point[2] = 1.5f;
                    push(s, ev);
                }
                REQUIRE(sim_cloth_step(s, NULL, err, sizeof err) == SIM_OK);
            }
            h[t] = sim_cloth_hash(s);
            sim_cloth_scene_destroy(s);
            sim_backend_destroy(b);
        }
        CHECKF(h[0] == h[1], "%s: 1 thread %016llx, 2 threads %016llx", kind ? "sheet" : "crowd",
               (unsigned long long)h[0], (unsigned long long)h[1]);
        sim_cloth_model_destroy(m);
    }
}

/* With every mapping invalid, the target takes the animated rest pose and the mean
 * velocity of valid neighbours (none: the body's): finite, counted, and it settles. */
TEST(cloth_invalid_mappings_take_the_animation)
{
    fixture fx;
    REQUIRE(fixture_open(&fx, 1, 1));
    sim_cloth_scene *s = fx.s;
    sim_cloth_model *m = fx.m;
    char err[256];
    sim_cloth_event ev = event(SIM_CLOTH_EV_SET_PARAMS);
    ev.params = sim_cloth_get_params(s);
    ev.params.map_max_distance = -1.0f;
    push(s, ev);
    ev = event(SIM_CLOTH_EV_MOTION);
    ev.motion = SIM_MOTION_WALK;
    push(s, ev);
    for (int f = 0; f < 60; f++) {
        if (f == 30) {
            ev = event(SIM_CLOTH_EV_FORCE_LOD);
            ev.lod = 1;
            push(s, ev);
        }
        REQUIRE(sim_cloth_step(s, NULL, err, sizeof err) == SIM_OK);
    }
    sim_cloth_switch r;
    REQUIRE(sim_cloth_last_switch(s, 0, &r));
    int ntri, n = sim_cloth_model_lod_size(m, 1, &ntri);
    CHECK(r.invalid_mappings > 0 && r.invalid_mappings <= n);
    CHECK(r.e_pos == 0.0f && r.e_vel == 0.0f); /* no valid point to compare */
    const float *x = sim_cloth_positions(s, 0, &n);
    for (int i = 0; i < n * 3; i++)
        CHECK(isfinite(x[i]));
    fixture_close(&fx);
}

TEST(cloth_bad_input_is_refused_with_a_reason)
{
    char err[256] = "";
    sim_cloth_model *m = NULL;
    sim_cloth_model_options o = sim_cloth_default_model_options();
    o.cols[1] = 1;
    CHECK(sim_cloth_model_create(&m, &o, err, sizeof err) == SIM_ERR_ARG && !m);
    CHECK(strstr(err, "LOD 1") != NULL);
    o = sim_cloth_default_model_options();
    o.nlod = 4;
    CHECK(sim_cloth_model_create(&m, &o, err, sizeof err) == SIM_ERR_ARG);
    m = default_model();
    sim_backend *b = cpu(1);
    REQUIRE(m && b);
    sim_cloth_scene *s = NULL;
    CHECK(sim_cloth_scene_create(&s, m, b, 0, err, sizeof err) == SIM_ERR_ARG);
    REQUIRE(sim_cloth_scene_create(&s, m, b, 2, err, sizeof err) == SIM_OK);
    sim_cloth_event ev = event(SIM_CLOTH_EV_FORCE_LOD);
    ev.character = 2;
    CHECK(sim_cloth_push_event(s, &ev, err, sizeof err) == SIM_ERR_ARG && strstr(err, "character"));
    ev.character = 0;
    ev.lod = 3;
    CHECK(sim_cloth_push_event(s, &ev, err, sizeof err) == SIM_ERR_ARG && strstr(err, "lod"));
    ev = event(SIM_CLOTH_EV_GRAB);
    ev.character = -1;
    CHECK(sim_cloth_push_event(s, &ev, err, sizeof err) == SIM_ERR_ARG);
    ev = event(SIM_CLOTH_EV_CAMERA);
    ev.point[1] = NAN;
    CHECK(sim_cloth_push_event(s, &ev, err, sizeof err) == SIM_ERR_ARG && strstr(err, "point[1]"));
    ev = event(SIM_CLOTH_EV_SET_PARAMS);
    ev.params = sim_cloth_get_params(s);
    ev.params.lod_exit[0] = ev.params.lod_enter[0] + 1.0f; /* no hysteresis band */
    CHECK(sim_cloth_push_event(s, &ev, err, sizeof err) == SIM_ERR_ARG && strstr(err, "LOD"));
    ev.params = sim_cloth_get_params(s);
    ev.params.substeps = 0;
    CHECK(sim_cloth_push_event(s, &ev, err, sizeof err) == SIM_ERR_ARG && strstr(err, "substeps"));
    sim_cloth_scene_destroy(s);
    sim_backend_destroy(b);
    sim_cloth_model_destroy(m);
}

/* A held vertex follows the hand (kept outside the body); pulled far beyond the cloth's
 * length it slips out of the hand and falls back. */
TEST(cloth_grab_follows_the_hand_and_slips_when_pulled_too_far)
{
    fixture fx;
    REQUIRE(fixture_open(&fx, 1, 1));
    sim_cloth_scene *s = fx.s;
    char err[256];
    for (int f = 0; f < 30; f++)
        REQUIRE(sim_cloth_step(s, NULL, err, sizeof err) == SIM_OK);
    int n;
    const float *x = sim_cloth_positions(s, 0, &n);
    int v = n - 1; /* a bottom corner */
    sim_cloth_event ev = event(SIM_CLOTH_EV_GRAB);
    ev.vertex = v;
    float hand[3] = {x[v * 3] - 0.2f, x[v * 3 + 1], x[v * 3 + 2] + 0.3f}; /* back and up */
    memcpy(ev.point, hand, sizeof hand);
    push(s, ev);
    for (int f = 0; f < 20; f++)
        REQUIRE(sim_cloth_step(s, NULL, err, sizeof err) == SIM_OK);
    x = sim_cloth_positions(s, 0, &n);
    for (int k = 0; k < 3; k++)
        CHECKF(fabsf(x[v * 3 + k] - hand[k]) < 1e-5f, "held vertex off the hand by %.4f",
               (double)fabsf(x[v * 3 + k] - hand[k]));
    ev = event(SIM_CLOTH_EV_MOVE);
    ev.point[0] = hand[0] - 5.0f, ev.point[1] = hand[1], ev.point[2] = hand[2];
    push(s, ev);
    for (int f = 0; f < 60; f++)
        REQUIRE(sim_cloth_step(s, NULL, err, sizeof err) == SIM_OK);
    x = sim_cloth_positions(s, 0, &n);
    CHECKF(x[v * 3] > hand[0] - 2.0f, "the cloth stayed 5 m away in the hand (x %.2f)",
           (double)x[v * 3]);
    fixture_close(&fx);
}

/* lod_switch_every N: automatic switches land only on frames that are multiples of N. */
TEST(cloth_lod_switch_every_groups_switches)
{
    fixture fx;
    REQUIRE(fixture_open(&fx, 1, 4));
    sim_cloth_scene *s = fx.s;
    char err[256];
    sim_cloth_event ev = event(SIM_CLOTH_EV_SET_PARAMS);
    ev.params = sim_cloth_get_params(s);
    ev.params.lod_switch_every = 10;
    ev.params.lod_hold_frames = 0;
    push(s, ev);
    int switched = 0;
    for (int f = 0; f < 200; f++) {
        ev = event(SIM_CLOTH_EV_CAMERA); /* in and out across both distances */
        ev.point[0] = (f / 7) % 2 ? 30.0f : 3.0f;
        ev.point[2] = 1.0f;
        push(s, ev);
        sim_cloth_metrics mt;
        REQUIRE(sim_cloth_step(s, &mt, err, sizeof err) == SIM_OK);
        if (mt.switches) {
            switched++;
            CHECKF(f % 10 == 0, "a switch on frame %d", f);
        }
    }
    CHECK(switched > 5);
    fixture_close(&fx);
}

/* ------------------------------------------------------------------ snapshots */

/* The same frame's events for the original and the restored scene: character 1 held and
 * dragged in a circle behind its hem on odd frames (the hand stays put on the others), the
 * camera creeping, character 0 back to automatic at 50 (it waits out its hold to switch),
 * character 2 back to automatic at 80, a gust, character 1 let go at 90. */
static void snapshot_events(sim_cloth_scene *s, int f)
{
    sim_cloth_event ev;
    if (f % 3 == 0) {
        ev = event(SIM_CLOTH_EV_CAMERA);
        ev.point[0] = 3.0f + 0.02f * (float)f, ev.point[1] = 1.0f, ev.point[2] = 1.5f;
        push(s, ev);
    }
    if (f % 2 == 1 && f < 90) {
        ev = event(SIM_CLOTH_EV_MOVE);
        ev.character = 1;
        float a = 0.2f * (float)f, root[3];
        sim_cloth_root(s, 1, root, NULL);
        ev.point[0] = root[0] - 0.4f + 0.08f * cosf(a);
        ev.point[1] = root[1] + 0.3f + 0.08f * sinf(a);
        ev.point[2] = root[2] + 0.55f;
        push(s, ev);
    }
    if (f == 50 || f == 80) {
        ev = event(SIM_CLOTH_EV_FORCE_LOD);
        ev.character = f == 50 ? 0 : 2, ev.lod = -1;
        push(s, ev);
    }
    if (f == 62) {
        ev = event(SIM_CLOTH_EV_WIND);
        ev.point[0] = 1.5f, ev.point[2] = 0.5f;
        push(s, ev);
    }
    if (f == 90) {
        ev = event(SIM_CLOTH_EV_RELEASE);
        ev.character = 1;
        push(s, ev);
    }
}

/* Scene A's first 40 frames: walking and turning, parameters changed (a longer blend),
 * character 2 forced to LOD 2 at frame 20, character 1 grabbed at frame 5 and dragged,
 * character 0 forced to LOD 1 at frame 38 in a gust, so that frame 40 is mid-blend, its
 * switch still watched as it settles, with a vertex held; and a gust queued, not yet
 * stepped. */
static int snapshot_prefix(sim_cloth_scene *s)
{
    char err[256];
    sim_cloth_event ev = event(SIM_CLOTH_EV_MOTION);
    ev.character = -1, ev.motion = SIM_MOTION_WALK;
    push(s, ev);
    ev.character = 2, ev.motion = SIM_MOTION_TURN;
    push(s, ev);
    for (int f = 0; f < 40; f++) {
        if (f == 2) {
            ev = event(SIM_CLOTH_EV_SET_PARAMS);
            ev.params = sim_cloth_get_params(s);
            ev.params.blend_pos_frames = 3, ev.params.blend_vel_frames = 8;
            ev.params.damping *= 1.5f;
            push(s, ev);
        }
        if (f == 5) {
            int n;
            float root[3];
            sim_cloth_positions(s, 1, &n);
            sim_cloth_root(s, 1, root, NULL);
            ev = event(SIM_CLOTH_EV_GRAB); /* a bottom corner, taken back and up */
            ev.character = 1, ev.vertex = n - 1;
            ev.point[0] = root[0] - 0.4f, ev.point[1] = root[1] + 0.3f;
            ev.point[2] = root[2] + 0.55f;
            push(s, ev);
        }
        if (f >= 6)
            snapshot_events(s, f);
        if (f == 20 || f == 38) {
            ev = event(SIM_CLOTH_EV_FORCE_LOD);
            ev.character = f == 20 ? 2 : 0, ev.lod = f == 20 ? 2 : 1;
            push(s, ev);
        }
        if (f == 38) { /* a gust with the switch: it is still settling at the snapshot */
            ev = event(SIM_CLOTH_EV_WIND);
            ev.point[0] = -3.0f;
            push(s, ev);
        }
        if (sim_cloth_step(s, NULL, err, sizeof err) != SIM_OK)
            return -1;
    }
    ev = event(SIM_CLOTH_EV_WIND);
    ev.point[1] = -0.7f;
    return push(s, ev) == SIM_OK ? 0 : -1;
}

static int same_switch(const sim_cloth_switch *a, const sim_cloth_switch *b)
{
    return a->frame == b->frame && a->character == b->character && a->from == b->from &&
           a->to == b->to && a->strategy == b->strategy && a->e_pos == b->e_pos &&
           a->e_vel == b->e_vel && a->e_pos_next == b->e_pos_next &&
           a->e_vel_next == b->e_vel_next && a->settle_frames == b->settle_frames &&
           a->max_penetration == b->max_penetration && a->invalid_mappings == b->invalid_mappings;
}

static int same_floats(const float *a, const float *b, int n)
{
    return n == 0 || !memcmp(a, b, (size_t)n * sizeof(float));
}

static int same_garment(const cloth_garment *a, const cloth_garment *b)
{
    return a->lod == b->lod && a->n == b->n && same_floats(a->x, b->x, a->n * 3) &&
           same_floats(a->v, b->v, a->n * 3) && same_floats(a->w, b->w, a->n);
}

/* Every field a later frame reads, bitwise, the restored scene against the original: what
 * a frame's hash and switches would show only much later (the hold, the acceleration
 * history, the settle watch) shows here at once. Returns what differs first, or NULL. */
static const char *state_differs(const sim_cloth_scene *a, const sim_cloth_scene *b)
{
    if (a->frame != b->frame || !same_floats(a->camera, b->camera, 3))
        return "frame or camera";
    if (memcmp(&a->prm, &b->prm, sizeof a->prm) || a->qcount != b->qcount)
        return "parameters or queue";
    for (int i = 0; i < a->qcount; i++)
        if (a->queue[i].type != b->queue[i].type ||
            !same_floats(a->queue[i].point, b->queue[i].point, 3))
            return "a queued event";
    for (int i = 0; i < a->nchar; i++) {
        const cloth_character *p = &a->ch[i], *q = &b->ch[i];
        if (p->motion != q->motion || p->t != q->t || memcmp(&p->pose, &q->pose, sizeof p->pose))
            return "motion, time or pose";
        if (p->forced_lod != q->forced_lod || p->hold != q->hold)
            return "forced LOD or hold";
        if (!same_garment(&p->g, &q->g) || p->blend != q->blend ||
            (p->blend && !same_garment(&p->src, &q->src)))
            return "garment or blend";
        if (p->grab_vertex != q->grab_vertex || !same_floats(p->grab_point, q->grab_point, 3))
            return "hand";
        if (!same_floats(p->accel, q->accel, CLOTH_ACCEL_HIST) ||
            !same_floats(p->v_last, q->v_last, p->g.n * 3))
            return "acceleration history or last velocities";
        if (p->has_switch != q->has_switch || !same_switch(&p->last, &q->last) ||
            p->accel_base != q->accel_base || p->watching != q->watching)
            return "switch record or its watch";
    }
    return NULL;
}

/* A snapshot taken mid-blend with a vertex held, restored into a scene built again, steps
 * on bitwise as the original does: the same hash, LODs, switches and metrics (and state)
 * on each of 60 frames of the same events, judged against the original run going on. */
TEST(cloth_snapshot_restores_mid_blend_and_held_bitwise)
{
    fixture fa, fb;
    REQUIRE(fixture_open(&fa, 1, 3));
    sim_cloth_scene *a = fa.s, *b = NULL;
    char err[256];
    REQUIRE(snapshot_prefix(a) == 0);
    /* The state the test is about, or it proves less than it says. */
    REQUIRE(a->ch[0].blend > 1 && a->ch[0].src.n > 0 && a->ch[0].g.lod == 1);
    REQUIRE(a->ch[0].watching > 0 && a->ch[1].grab_vertex >= 0 && a->ch[2].forced_lod == 2);
    REQUIRE(a->qcount == 1);
    sc_blob blob = {0};
    REQUIRE(sim_cloth_scene_save(a, &blob, err, sizeof err) == SIM_OK);
    th_note("cloth snapshot of 3 characters: %zu bytes", blob.n);
    REQUIRE(fixture_open(&fb, 2, 3)); /* a thread count of its own: results do not depend on it */
    b = fb.s;
    CHECK(sim_cloth_hash(b) != sim_cloth_hash(a));
    CHECKF(sim_cloth_scene_restore(b, blob.p, blob.n, err, sizeof err) == SIM_OK, "%s", err);
    const char *what = state_differs(a, b);
    CHECKF(!what, "restored: %s differs", what);
    uint64_t prev = sim_cloth_hash(a);
    int changed = 0, differ = 0, switches = 0;
    for (int f = 40; f < 100; f++) {
        snapshot_events(a, f);
        snapshot_events(b, f);
        sim_cloth_metrics ma, mb;
        REQUIRE(sim_cloth_step(a, &ma, err, sizeof err) == SIM_OK);
        REQUIRE(sim_cloth_step(b, &mb, err, sizeof err) == SIM_OK);
        uint64_t ha = sim_cloth_hash(a), hb = sim_cloth_hash(b);
        int same = ha == hb && ma.switches == mb.switches && ma.particles == mb.particles &&
                   !memcmp(ma.lod_count, mb.lod_count, sizeof ma.lod_count);
        for (int c = 0; c < 3; c++) {
            sim_cloth_switch sa, sb;
            int ka = sim_cloth_last_switch(a, c, &sa), kb = sim_cloth_last_switch(b, c, &sb);
            same = same && ka == kb && (!ka || same_switch(&sa, &sb)) &&
                   sim_cloth_lod(a, c) == sim_cloth_lod(b, c);
        }
        what = state_differs(a, b);
        if ((!same || what) && differ++ == 0)
            CHECKF(0, "frame %d: the restored scene left the original (hash %016llx, %016llx; %s)",
                   f, (unsigned long long)ha, (unsigned long long)hb, what ? what : "state same");
        changed += ha != prev;
        switches += ma.switches;
        prev = ha;
    }
    CHECKF(changed == 60, "the hash changed on %d of 60 frames", changed);
    CHECKF(switches >= 2, "%d switches after the restore", switches);
    sc_blob_free(&blob);
    fixture_close(&fa);
    fixture_close(&fb);
}

/* Restore one damaged snapshot: SIM_ERR_FORMAT with err naming want, the scene unchanged. */
static void refused(sim_cloth_scene *s, const void *p, size_t n, const char *what, const char *want)
{
    char err[256] = "";
    uint64_t h = sim_cloth_hash(s);
    sim_status st = sim_cloth_scene_restore(s, p, n, err, sizeof err);
    CHECKF(st == SIM_ERR_FORMAT && strstr(err, want), "%s: status %d, \"%s\" (wanted \"%s\")", what,
           (int)st, err, want);
    CHECKF(sim_cloth_hash(s) == h, "%s: the refused restore changed the scene", what);
}

/* Snapshots cut short anywhere, of another scene or layout version, with bytes left over,
 * or of another crowd or model are refused by name; the scene is left as it was, and the
 * whole snapshot still restores it after. */
TEST(cloth_snapshot_refuses_damaged_foreign_and_other_sizes)
{
    fixture fa, fb;
    REQUIRE(fixture_open(&fa, 1, 3) && fixture_open(&fb, 1, 3));
    char err[256];
    REQUIRE(snapshot_prefix(fa.s) == 0); /* mid-blend: the source garment is in it too */
    sc_blob blob = {0};
    REQUIRE(sim_cloth_scene_save(fa.s, &blob, err, sizeof err) == SIM_OK);
    for (size_t cut = 0; cut < blob.n; cut += cut < 64 ? 1 : 997)
        refused(fb.s, blob.p, cut, "cut short", "cut short");
    refused(fb.s, blob.p, blob.n - 1, "one byte short", "cut short");
    refused(fb.s, NULL, 0, "no bytes", "cut short");
    uint8_t *copy = malloc(blob.n + 1);
    REQUIRE(copy);
    memcpy(copy, blob.p, blob.n);
    copy[blob.n] = 0;
    refused(fb.s, copy, blob.n + 1, "a byte over", "left after");
    memcpy(copy, "VOLM", 4);
    refused(fb.s, copy, blob.n, "another scene's tag", "expected part CLTH");
    memcpy(copy, blob.p, blob.n);
    copy[4] ^= 2; /* the version */
    refused(fb.s, copy, blob.n, "another version", "version");
    free(copy);
    /* Other sizes: a crowd of 2, and a model whose LOD 1 is 12 x 17. */
    sim_cloth_scene *two;
    REQUIRE(sim_cloth_scene_create(&two, fa.m, fa.b, 2, err, sizeof err) == SIM_OK);
    refused(two, blob.p, blob.n, "2 characters", "characters");
    sim_cloth_scene_destroy(two);
    sim_cloth_model_options mo = sim_cloth_default_model_options();
    mo.rows[1] = 17;
    sim_cloth_model *m17;
    sim_cloth_scene *s17;
    REQUIRE(sim_cloth_model_create(&m17, &mo, err, sizeof err) == SIM_OK);
    REQUIRE(sim_cloth_scene_create(&s17, m17, fa.b, 3, err, sizeof err) == SIM_OK);
    refused(s17, blob.p, blob.n, "LOD 1 of 12 x 17", "LOD 1");
    sim_cloth_scene_destroy(s17);
    sim_cloth_model_destroy(m17);
    /* After all that, the whole snapshot restores. */
    CHECKF(sim_cloth_scene_restore(fb.s, blob.p, blob.n, err, sizeof err) == SIM_OK, "%s", err);
    CHECK(sim_cloth_hash(fb.s) == sim_cloth_hash(fa.s));
    sc_blob_free(&blob);
    fixture_close(&fa);
    fixture_close(&fb);
}
