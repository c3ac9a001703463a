/* test_volume_batch.c: sim_volume_step_many, which steps many sessions' states together (on
 * CUDA one batch of launches for them all), against each state stepped alone with
 * sim_volume_step, bit for bit: states with schedules of their own (iteration counts, a pass
 * cap that stops a wave inside a pass batch, a wave budget), in different phases of a drag,
 * settled ones among moving ones; one whose grab fails while the others step. On this machine
 * the batch runs on the CPU backend; the GPU script (tests/gpu/check.sh) runs the same
 * comparison on CUDA with softcast-bench volume --sessions N --check. */
#include <math.h>
#include <string.h>

#include "sim/core/sc_base.h"
#include "sim/volume/volume.h"
#include "tests/harness.h"
#include "tests/scenes/volume_scenes.h"

enum { BATCH_N = 5, BATCH_FRAMES = 80 };

/* Session k's input before frame f: a drag loop, the sessions 11 frames apart. */
static void script(sim_volume_state *st, int k, int f, const float g[3])
{
    int ff = f + 11 * k, phase = ff % 60;
    float t[3] = {g[0], g[1] + 3.0f * sinf((float)phase / 8.0f), g[2]};
    if (phase == 0)
        vs_push(st, SIM_EV_GRAB, g, 2.5f);
    else if (phase < 30)
        vs_push(st, SIM_EV_MOVE, t, 0);
    else if (phase == 30)
        vs_push(st, SIM_EV_RELEASE, NULL, 0);
}

static void make_states(const vs_scene *sc, sim_volume_state **st)
{
    char err[256];
    sim_volume_params p0 = sim_volume_get_params(sc->state);
    for (int k = 0; k < BATCH_N; k++) {
        sim_volume_params p = p0;
        p.condition = (sim_condition)(k % 3);
        p.relax_iterations = p0.relax_iterations + k - 2 > 0 ? p0.relax_iterations + k - 2 : 1;
        if (k == 3)
            p.max_passes = 5; /* stops inside a pass batch */
        if (k == 4)
            p.max_wave = 40; /* the frame's wave budget */
        REQUIRE(sim_volume_state_create(&st[k], sc->model, sc->backend, err, sizeof err) == SIM_OK);
        REQUIRE(vs_set_params(st[k], &p) == SIM_OK);
    }
}

TEST(step_many_equals_each_state_stepped_alone)
{
    sim_volume vol;
    vs_scene sc;
    char err[256];
    REQUIRE(sim_volume_phantom(&vol, 28, 28, 20, err, sizeof err) == SIM_OK);
    REQUIRE(vs_scene_create(&sc, &vol, SIM_BACKEND_CPU, 2, err, sizeof err) == SIM_OK);
    float g[3];
    vs_belly_point(&vol, sim_volume_get_params(sc.state).hu_threshold[0], g);
    sim_volume_state *together[BATCH_N], *alone[BATCH_N];
    make_states(&sc, together);
    make_states(&sc, alone);
    int stepped_frames = 0, skipped = 0, moving = 0;
    for (int f = 0; f < BATCH_FRAMES; f++) {
        sim_volume_metrics mt_t[BATCH_N], mt_a[BATCH_N];
        sim_status st_t[BATCH_N], st_a[BATCH_N];
        for (int k = 0; k < BATCH_N; k++) {
            script(together[k], k, f, g);
            script(alone[k], k, f, g);
        }
        CHECKF(sim_volume_step_many(together, BATCH_N, mt_t, st_t, err, sizeof err) == SIM_OK,
               "frame %d: %s", f, err);
        for (int k = 0; k < BATCH_N; k++)
            st_a[k] = sim_volume_step(alone[k], &mt_a[k], err, sizeof err);
        for (int k = 0; k < BATCH_N; k++) {
            CHECKF(st_t[k] == st_a[k], "frame %d, state %d: status %d together, %d alone", f, k,
                   (int)st_t[k], (int)st_a[k]);
            CHECKF(mt_t[k].frame == mt_a[k].frame && mt_t[k].skipped == mt_a[k].skipped &&
                       mt_t[k].passes == mt_a[k].passes &&
                       mt_t[k].moved_elements == mt_a[k].moved_elements &&
                       mt_t[k].relax_evaluations == mt_a[k].relax_evaluations,
                   "frame %d, state %d: metrics differ (passes %d/%d, moved %lld/%lld)", f, k,
                   mt_t[k].passes, mt_a[k].passes, (long long)mt_t[k].moved_elements,
                   (long long)mt_a[k].moved_elements);
            skipped += mt_t[k].skipped;
            moving += mt_t[k].moved_elements > 0;
        }
        if (f % 10 == 9)
            for (int k = 0; k < BATCH_N; k++)
                CHECKF(sim_volume_state_hash(together[k]) == sim_volume_state_hash(alone[k]),
                       "frame %d, state %d: states differ", f, k);
        stepped_frames++;
    }
    /* The script really mixed settled and moving states in the batches. */
    CHECKF(skipped > 0 && moving > BATCH_FRAMES, "skipped %d, moving %d state-frames", skipped,
           moving);
    CHECK(stepped_frames == BATCH_FRAMES);
    for (int k = 0; k < BATCH_N; k++) {
        sim_volume_state_destroy(together[k]);
        sim_volume_state_destroy(alone[k]);
    }
    vs_scene_destroy(&sc);
    sim_volume_free(&vol);
}

/* n more states of the scene's model and backend; 0 when one could not be made. */
static int create_states(const vs_scene *sc, sim_volume_state **st, int n)
{
    char err[256];
    for (int k = 0; k < n; k++)
        if (sim_volume_state_create(&st[k], sc->model, sc->backend, err, sizeof err) != SIM_OK)
            return 0;
    return 1;
}

/* A grab too large fails its own state, named in the error; the others step on. */
TEST(step_many_fails_one_state_and_steps_the_others)
{
    sim_volume vol;
    vs_scene sc;
    char err[256] = "";
    /* Soft tissue everywhere, 69,696 elements: more than one grab may hold. */
    REQUIRE(vs_uniform_volume(&vol, 44, 44, 36, 0.0f) == SIM_OK);
    REQUIRE(vs_scene_create(&sc, &vol, SIM_BACKEND_CPU, 2, err, sizeof err) == SIM_OK);
    sim_volume_state *st[3];
    REQUIRE(create_states(&sc, st, 3));
    float g[3] = {22.0f, 0.0f, 18.0f}, t[3] = {22.0f, 2.0f, 18.0f};
    for (int k = 0; k < 3; k++)
        vs_push(st[k], SIM_EV_GRAB, g, k == 1 ? 1000.0f : 2.5f); /* 1: every element */
    for (int k = 0; k < 3; k++)
        vs_push(st[k], SIM_EV_MOVE, t, 0);
    sim_volume_metrics mt[3];
    sim_status status[3];
    CHECK(sim_volume_step_many(st, 3, mt, status, err, sizeof err) == SIM_ERR_LIMIT);
    CHECKF(strstr(err, "state 1:") && strstr(err, "grab"),
           "the failure names its state and its cause: \"%s\"", err);
    CHECK(status[0] == SIM_OK && status[1] == SIM_ERR_LIMIT && status[2] == SIM_OK);
    for (int k = 0; k < 3; k += 2)
        CHECKF(mt[k].grabbed > 0 && mt[k].moved_elements > 0, "state %d grabbed %d and moved %lld",
               k, mt[k].grabbed, (long long)mt[k].moved_elements);
    /* The failed state's move waits for the next step, which applies it to no grab. */
    CHECK(sim_volume_step_many(st, 3, mt, status, err, sizeof err) == SIM_OK);
    CHECK(mt[1].grabbed == 0);
    for (int k = 0; k < 3; k++)
        sim_volume_state_destroy(st[k]);
    vs_scene_destroy(&sc);
    sim_volume_free(&vol);
}

TEST(step_many_refuses_states_of_two_backends_or_one_twice)
{
    sim_volume vol;
    vs_scene a, b;
    char err[256] = "";
    REQUIRE(sim_volume_phantom(&vol, 16, 16, 16, err, sizeof err) == SIM_OK);
    REQUIRE(vs_scene_create(&a, &vol, SIM_BACKEND_CPU, 1, err, sizeof err) == SIM_OK);
    REQUIRE(vs_scene_create(&b, &vol, SIM_BACKEND_CPU, 1, err, sizeof err) == SIM_OK);
    sim_volume_state *two[2] = {a.state, b.state};
    sim_volume_metrics before;
    REQUIRE(sim_volume_step(a.state, &before, err, sizeof err) == SIM_OK);
    CHECK(sim_volume_step_many(two, 2, NULL, NULL, err, sizeof err) == SIM_ERR_ARG);
    CHECKF(strstr(err, "another backend") != NULL, "err: \"%s\"", err);
    sim_volume_state *twice[2] = {a.state, a.state}; /* would seed its wave twice */
    CHECK(sim_volume_step_many(twice, 2, NULL, NULL, err, sizeof err) == SIM_ERR_ARG);
    CHECKF(strstr(err, "state 1 is state 0 again") != NULL, "err: \"%s\"", err);
    sim_volume_metrics after;
    REQUIRE(sim_volume_step(a.state, &after, err, sizeof err) == SIM_OK);
    CHECKF(after.frame == before.frame + 1, "the refused call stepped nothing (frame %llu, %llu)",
           (unsigned long long)before.frame, (unsigned long long)after.frame);
    vs_scene_destroy(&a);
    vs_scene_destroy(&b);
    sim_volume_free(&vol);
}

/* Each state of a batch measures its own frame (total_ms), not the batch's time up to its
 * end: the server's scheduler charges a session what its frame took, so a settled session
 * stepped after two dragged ones must not look as costly as both. On the CPU backend the
 * frames run one after another, so their own times are disjoint pieces of the call: they add
 * up to no more than its wall time. */
TEST(step_many_times_each_state_by_its_own_frame)
{
    sim_volume vol;
    vs_scene sc;
    char err[256] = "";
    REQUIRE(vs_uniform_volume(&vol, 40, 40, 32, 0.0f) == SIM_OK);
    REQUIRE(vs_scene_create(&sc, &vol, SIM_BACKEND_CPU, 1, err, sizeof err) == SIM_OK);
    sim_volume_state *st[3];
    REQUIRE(create_states(&sc, st, 3));
    float g[3] = {20.0f, 0.0f, 16.0f};
    for (int k = 0; k < 2; k++) /* the last state stays at rest */
        vs_push(st[k], SIM_EV_GRAB, g, 6.0f);
    for (int f = 0; f < 6; f++) {
        float t[3] = {20.0f, (f % 2 ? 6.0f : -6.0f), 16.0f};
        for (int k = 0; k < 2; k++)
            vs_push(st[k], SIM_EV_MOVE, t, 0);
        sim_volume_metrics mt[3];
        sim_status status[3];
        double t0 = sc_now_ms();
        REQUIRE(sim_volume_step_many(st, 3, mt, status, err, sizeof err) == SIM_OK);
        double wall = sc_now_ms() - t0, sum = mt[0].total_ms + mt[1].total_ms + mt[2].total_ms;
        CHECKF(mt[0].moved_elements > 0 && mt[1].moved_elements > 0 && mt[2].skipped,
               "frame %d: two dragged states and one at rest (moved %lld, %lld; skipped %d)", f,
               (long long)mt[0].moved_elements, (long long)mt[1].moved_elements, mt[2].skipped);
        CHECKF(sum <= wall + 1e-3,
               "frame %d: the states' times add up to %.3f ms in a %.3f ms call", f, sum, wall);
        CHECKF(mt[2].total_ms < 0.5 * mt[0].total_ms && mt[2].total_ms < 0.5 * mt[1].total_ms,
               "frame %d: the state at rest took %.3f ms beside %.3f and %.3f ms", f,
               mt[2].total_ms, mt[0].total_ms, mt[1].total_ms);
    }
    for (int k = 0; k < 3; k++)
        sim_volume_state_destroy(st[k]);
    vs_scene_destroy(&sc);
    sim_volume_free(&vol);
}
