/* test_surface_update.c: the surfaces' incremental update (sim_volume_surface_update), which
 * evaluates only the vertices of blocks whose positions may have changed, against a full
 * evaluation of every vertex (sim_volume_surface_positions), bit for bit, through everything
 * that moves a volume: grabs at random places dragged across block borders, releases and
 * their ringing, a reset, a parameter change, a snapshot restored; for a viewer that looks
 * every frame and for one that looks every ninth (the blocks stamped since it last looked
 * are more than the stamp log holds, or not). And that it is incremental: a settled volume
 * evaluates nothing, a local pull a small part. */
#include <stdlib.h>
#include <string.h>

#include "sim/volume/volume.h"
#include "sim/volume/volume_internal.h" /* the stamp log's ring: one white-box check */
#include "tests/harness.h"
#include "tests/scenes/volume_scenes.h"

enum { UPD_NX = 40, UPD_NY = 40, UPD_NZ = 32, UPD_FRAMES = 240, UPD_LAG = 9 };

typedef struct upd_surface {
    int nvert, nrun;
    float *inc, *full, *before;
    uint32_t *ranges;
    uint64_t seen;
} upd_surface;

/* A viewer of surface sf: its arrays, nothing seen yet. */
static int upd_alloc(upd_surface *u, const sim_surface *sf)
{
    u->nvert = sf->nvert, u->nrun = sf->nrun, u->seen = 0;
    u->inc = calloc(3 * (size_t)sf->nvert, sizeof(float));
    u->full = calloc(3 * (size_t)sf->nvert, sizeof(float));
    u->before = calloc(3 * (size_t)sf->nvert, sizeof(float));
    u->ranges = calloc(2 * (size_t)sf->nrun, sizeof(uint32_t));
    return u->inc && u->full && u->before && u->ranges;
}

static void upd_free(upd_surface *u)
{
    free(u->inc);
    free(u->full);
    free(u->before);
    free(u->ranges);
}

/* Update one surface; it must equal the full evaluation, and change only inside the ranges
 * it names. Returns how many vertices it evaluated. */
static int64_t update_and_compare(sim_volume_state *s, int kind, upd_surface *u, int frame)
{
    uint32_t nr = 0;
    memcpy(u->before, u->inc, sizeof(float) * 3 * (size_t)u->nvert);
    if (sim_volume_surface_update(s, (sim_surface_kind)kind, u->inc, &u->seen, u->ranges, &nr) !=
            SIM_OK ||
        sim_volume_surface_positions(s, (sim_surface_kind)kind, u->full) != SIM_OK) {
        CHECKF(0, "frame %d: surface %d not evaluated", frame, kind);
        return 0;
    }
    int bad = -1;
    for (int v = 0; v < u->nvert && bad < 0; v++)
        if (memcmp(u->inc + 3 * v, u->full + 3 * v, 3 * sizeof(float)))
            bad = v;
    CHECKF(bad < 0, "frame %d, surface %d: vertex %d stale (%.4f %.4f %.4f against %.4f %.4f %.4f)",
           frame, kind, bad, bad < 0 ? 0.0 : (double)u->inc[3 * bad],
           bad < 0 ? 0.0 : (double)u->inc[3 * bad + 1], bad < 0 ? 0.0 : (double)u->inc[3 * bad + 2],
           bad < 0 ? 0.0 : (double)u->full[3 * bad], bad < 0 ? 0.0 : (double)u->full[3 * bad + 1],
           bad < 0 ? 0.0 : (double)u->full[3 * bad + 2]);
    int64_t evaluated = 0;
    uint32_t prev_end = 0;
    for (uint32_t r = 0; r < nr; r++) {
        uint32_t a = u->ranges[2 * r], n = u->ranges[2 * r + 1];
        CHECKF(n > 0 && a >= prev_end && a + n <= (uint32_t)u->nvert,
               "frame %d: range %u (%u, %u) not ascending, disjoint and inside", frame, r, a, n);
        for (uint32_t v = prev_end; v < a && v < (uint32_t)u->nvert; v++)
            if (memcmp(u->before + 3 * v, u->inc + 3 * v, 3 * sizeof(float)))
                CHECKF(0, "frame %d: vertex %u changed outside the ranges", frame, v);
        prev_end = a + n;
        evaluated += n;
    }
    return evaluated;
}

TEST(surface_update_equals_full_evaluation_through_grabs_resets_and_restores)
{
    sim_volume vol;
    vs_scene sc;
    char err[256];
    REQUIRE(sim_volume_phantom(&vol, UPD_NX, UPD_NY, UPD_NZ, err, sizeof err) == SIM_OK);
    REQUIRE(vs_scene_create(&sc, &vol, SIM_BACKEND_CPU, 2, err, sizeof err) == SIM_OK);
    sim_volume_params p = sim_default_volume_params();
    p.condition = SIM_CONDITION_B; /* rings after a release: the velocity layer moves blocks */
    REQUIRE(vs_set_params(sc.state, &p) == SIM_OK);
    /* u: a viewer that looks every frame; lag: one that looks every UPD_LAG frames. */
    upd_surface u[SIM_NSURFACE], lag[SIM_NSURFACE];
    for (int k = 0; k < SIM_NSURFACE; k++) {
        const sim_surface *sf = sim_volume_model_surface(sc.model, (sim_surface_kind)k);
        REQUIRE(sf->nvert > 100 && sf->nrun > 1);
        REQUIRE(upd_alloc(&u[k], sf) && upd_alloc(&lag[k], sf));
    }
    sc_blob snap = {0};
    uint32_t rng = 12345;
    float at[3] = {0, 0, 0};
    int64_t settled_eval = -1;
    for (int f = 0; f < UPD_FRAMES; f++) {
        int phase = f % 40;
        if (phase == 0) { /* a grab somewhere in the middle of the volume */
            at[0] = vs_uniform(&rng, 6, UPD_NX - 6);
            at[1] = vs_uniform(&rng, 6, UPD_NY - 6);
            at[2] = vs_uniform(&rng, 6, UPD_NZ - 6);
            REQUIRE(vs_push(sc.state, SIM_EV_GRAB, at, vs_uniform(&rng, 1.5f, 3.5f)) == SIM_OK);
        } else if (phase < 14) { /* dragged, across block borders */
            for (int b = 0; b < 3; b++)
                at[b] += vs_uniform(&rng, -1.2f, 1.2f);
            REQUIRE(vs_push(sc.state, SIM_EV_MOVE, at, 0) == SIM_OK);
        } else if (phase == 14) {
            REQUIRE(vs_push(sc.state, SIM_EV_RELEASE, NULL, 0) == SIM_OK);
        }
        if (f == 70)
            REQUIRE(sim_volume_state_save(sc.state, &snap, err, sizeof err) == SIM_OK);
        if (f == 100)
            REQUIRE(vs_push(sc.state, SIM_EV_RESET, NULL, 0) == SIM_OK);
        if (f == 150) {
            p.condition = SIM_CONDITION_C;
            p.hu_threshold[0] += 20.0f; /* reclassifies: every link may change */
            REQUIRE(vs_set_params(sc.state, &p) == SIM_OK);
        }
        REQUIRE(sim_volume_step(sc.state, NULL, err, sizeof err) == SIM_OK);
        if (f == 190) /* back to frame 70's state, between frames */
            REQUIRE(sim_volume_state_restore(sc.state, snap.p, snap.n, err, sizeof err) == SIM_OK);
        for (int k = 0; k < SIM_NSURFACE; k++) {
            (void)update_and_compare(sc.state, k, &u[k], f);
            if (f % UPD_LAG == UPD_LAG - 1)
                (void)update_and_compare(sc.state, k, &lag[k], f);
        }
    }
    /* Left alone until settled, then once more: nothing to evaluate. */
    for (int f = 0; f < 2000 && !sim_volume_is_settled(sc.state); f++)
        REQUIRE(sim_volume_step(sc.state, NULL, err, sizeof err) == SIM_OK);
    REQUIRE(sim_volume_is_settled(sc.state));
    for (int k = 0; k < SIM_NSURFACE; k++)
        (void)update_and_compare(sc.state, k, &u[k], -1);
    REQUIRE(sim_volume_step(sc.state, NULL, err, sizeof err) == SIM_OK);
    settled_eval = 0;
    for (int k = 0; k < SIM_NSURFACE; k++)
        settled_eval += update_and_compare(sc.state, k, &u[k], -2);
    CHECKF(settled_eval == 0, "a settled volume evaluated %lld vertices", (long long)settled_eval);
    sc_blob_free(&snap);
    for (int k = 0; k < SIM_NSURFACE; k++) {
        upd_free(&u[k]);
        upd_free(&lag[k]);
    }
    vs_scene_destroy(&sc);
    sim_volume_free(&vol);
}

/* A small pull at the belly's skin (ChainMail alone: no ringing to spread it) re-evaluates the
 * vertices of the few blocks it moved, not the surface. */
TEST(surface_update_of_a_small_pull_evaluates_a_small_part)
{
    sim_volume vol;
    vs_scene sc;
    char err[256];
    REQUIRE(sim_volume_phantom(&vol, 64, 64, 48, err, sizeof err) == SIM_OK);
    REQUIRE(vs_scene_create(&sc, &vol, SIM_BACKEND_CPU, 2, err, sizeof err) == SIM_OK);
    sim_volume_params p = sim_default_volume_params();
    p.condition = SIM_CONDITION_A;
    REQUIRE(vs_set_params(sc.state, &p) == SIM_OK);
    REQUIRE(sim_volume_step(sc.state, NULL, err, sizeof err) == SIM_OK);
    upd_surface u;
    REQUIRE(upd_alloc(&u, sim_volume_model_surface(sc.model, SIM_SURFACE_SKIN)));
    int64_t first = update_and_compare(sc.state, SIM_SURFACE_SKIN, &u, 0);
    float g[3];
    vs_belly_point(&vol, p.hu_threshold[0], g);
    REQUIRE(vs_push(sc.state, SIM_EV_GRAB, g, 1.5f) == SIM_OK);
    REQUIRE(sim_volume_step(sc.state, NULL, err, sizeof err) == SIM_OK);
    (void)update_and_compare(sc.state, SIM_SURFACE_SKIN, &u, 1);
    g[1] += 0.5f; /* half a lattice cell outward */
    REQUIRE(vs_push(sc.state, SIM_EV_MOVE, g, 0) == SIM_OK);
    REQUIRE(sim_volume_step(sc.state, NULL, err, sizeof err) == SIM_OK);
    int64_t pulled = update_and_compare(sc.state, SIM_SURFACE_SKIN, &u, 2);
    th_note("skin: %d vertices in %d runs; evaluated %lld first, %lld for the pull", u.nvert,
            u.nrun, (long long)first, (long long)pulled);
    CHECKF(first == u.nvert, "the first update evaluated %lld of %d", (long long)first, u.nvert);
    CHECKF(pulled > 0 && pulled * 10 < u.nvert, "a small pull evaluated %lld of %d vertices",
           (long long)pulled, u.nvert);
    upd_free(&u);
    vs_scene_destroy(&sc);
    sim_volume_free(&vol);
}

/* A viewer that last looked before a reset, once the stamp log's ring has wrapped: the reset
 * stamped every block without logging them, and the entries the ring drops afterwards are
 * older than the reset, so that viewer must look at every run, not at what the log holds. */
TEST(surface_update_of_a_late_viewer_sees_a_reset_after_the_ring_wrapped)
{
    sim_volume vol;
    vs_scene sc;
    char err[256];
    REQUIRE(sim_volume_phantom(&vol, UPD_NX, UPD_NY, UPD_NZ, err, sizeof err) == SIM_OK);
    REQUIRE(vs_scene_create(&sc, &vol, SIM_BACKEND_CPU, 2, err, sizeof err) == SIM_OK);
    sim_volume_state *s = sc.state;
    const sim_surface *sf = sim_volume_model_surface(sc.model, SIM_SURFACE_SKIN);
    upd_surface often, late; /* one looks every frame, the other twice */
    REQUIRE(upd_alloc(&often, sf) && upd_alloc(&late, sf));
    float at[3] = {20.0f, 20.0f, 16.0f};
    REQUIRE(vs_push(s, SIM_EV_GRAB, at, 3.0f) == SIM_OK);
    int f = 0;
    for (; f < 20; f++) { /* a big pull: many blocks stamped, frame after frame */
        if (f < 10) {
            at[1] += 1.0f;
            REQUIRE(vs_push(s, SIM_EV_MOVE, at, 0) == SIM_OK);
        }
        REQUIRE(sim_volume_step(s, NULL, err, sizeof err) == SIM_OK);
        (void)update_and_compare(s, SIM_SURFACE_SKIN, &often, f);
    }
    REQUIRE(vs_push(s, SIM_EV_RELEASE, NULL, 0) == SIM_OK);
    for (; f < 3000 && !sim_volume_is_settled(s); f++) {
        REQUIRE(sim_volume_step(s, NULL, err, sizeof err) == SIM_OK);
        (void)update_and_compare(s, SIM_SURFACE_SKIN, &often, f);
    }
    CHECKF(s->stamp_log_n > 2 * s->nblocks, "the ring did not wrap (%lld stamps, %lld blocks)",
           (long long)s->stamp_log_n, (long long)s->nblocks);
    (void)update_and_compare(s, SIM_SURFACE_SKIN, &late, f);
    REQUIRE(vs_push(s, SIM_EV_RESET, NULL, 0) == SIM_OK);
    REQUIRE(sim_volume_step(s, NULL, err, sizeof err) == SIM_OK);
    (void)update_and_compare(s, SIM_SURFACE_SKIN, &often, ++f);
    at[1] = 20.0f;
    REQUIRE(vs_push(s, SIM_EV_GRAB, at, 1.0f) == SIM_OK);
    at[0] += 0.5f;
    REQUIRE(vs_push(s, SIM_EV_MOVE, at, 0) == SIM_OK);
    REQUIRE(sim_volume_step(s, NULL, err, sizeof err) == SIM_OK); /* stamps a few blocks */
    int64_t looked = update_and_compare(s, SIM_SURFACE_SKIN, &late, ++f);
    th_note("the late viewer evaluated %lld of %d vertices after the reset", (long long)looked,
            late.nvert);
    upd_free(&often);
    upd_free(&late);
    vs_scene_destroy(&sc);
    sim_volume_free(&vol);
}
