/* test_volume_snapshot.c: a volume state saved and restored (sim_volume_state_save/_restore,
 * the server's session snapshots and recordings) steps on exactly as the original: judged
 * against the original run itself, frame by frame, never against the saved bytes. And a
 * damaged snapshot is refused by name, leaving a state at rest. */
#include <stdlib.h>
#include <string.h>

#include "sim/volume/volume.h"
#include "sim/volume/volume_internal.h" /* VOL_BLOCK: the snapshot's block fields */
#include "tests/harness.h"
#include "tests/scenes/volume_scenes.h"

#define SNAP_NX 40
#define SNAP_NY 40
#define SNAP_NZ 24

/* The script both runs follow: frame f's events, pushed before its step. A grab at the belly
 * at frame 2, pulled outward a little each frame to frame 20, released at 21 (the ringing
 * under condition B follows). */
static sim_status script(sim_volume_state *s, const sim_volume *v, int f)
{
    float at[3];
    vs_belly_point(v, sim_default_volume_params().hu_threshold[0], at);
    if (f == 2)
        return vs_push(s, SIM_EV_GRAB, at, 2.5f);
    if (f > 2 && f <= 20) {
        at[1] += 0.35f * (float)(f - 2);
        return vs_push(s, SIM_EV_MOVE, at, 0);
    }
    if (f == 21)
        return vs_push(s, SIM_EV_RELEASE, NULL, 0);
    return SIM_OK;
}

static int make(vs_scene *sc, sim_volume *v, int nx)
{
    char err[256];
    if (sim_volume_phantom(v, nx, SNAP_NY, SNAP_NZ, err, sizeof err) != SIM_OK ||
        vs_scene_create(sc, v, SIM_BACKEND_CPU, 2, err, sizeof err) != SIM_OK)
        return 0;
    sim_volume_params p = sim_default_volume_params();
    p.condition = SIM_CONDITION_B; /* rings: velocities matter after the release */
    return vs_set_params(sc->state, &p) == SIM_OK;
}

static void done(vs_scene *sc, sim_volume *v)
{
    vs_scene_destroy(sc);
    sim_volume_free(v);
}

/* Run a to frame `at`, save, restore into a fresh b; then both go on with the same script
 * to frame 70 and must agree bit for bit on every frame. */
TEST(volume_snapshot_mid_drag_steps_on_as_the_original)
{
    sim_volume va, vb;
    vs_scene a, b;
    char err[256];
    REQUIRE(make(&a, &va, SNAP_NX) && make(&b, &vb, SNAP_NX));
    const int at = 12; /* mid-drag: the grab held, the tissue moving */
    for (int f = 0; f < at; f++) {
        REQUIRE(script(a.state, &va, f) == SIM_OK);
        REQUIRE(sim_volume_step(a.state, NULL, err, sizeof err) == SIM_OK);
    }
    sc_blob blob = {0};
    REQUIRE(sim_volume_state_save(a.state, &blob, err, sizeof err) == SIM_OK);
    CHECKF(sim_volume_state_restore(b.state, blob.p, blob.n, err, sizeof err) == SIM_OK, "%s", err);
    CHECK(sim_volume_grabbed_count(b.state) == sim_volume_grabbed_count(a.state));
    CHECK(sim_volume_grabbed_count(b.state) > 0);
    int differ = 0, changed = 0;
    uint64_t h0 = sim_volume_state_hash(a.state);
    CHECK(sim_volume_state_hash(b.state) == h0);
    for (int f = at; f < 70; f++) {
        sim_volume_metrics ma, mb;
        REQUIRE(script(a.state, &va, f) == SIM_OK && script(b.state, &vb, f) == SIM_OK);
        REQUIRE(sim_volume_step(a.state, &ma, err, sizeof err) == SIM_OK);
        REQUIRE(sim_volume_step(b.state, &mb, err, sizeof err) == SIM_OK);
        uint64_t ha = sim_volume_state_hash(a.state), hb = sim_volume_state_hash(b.state);
        if (ha != hb && !differ++)
            CHECKF(0, "frame %d: original %016llx, restored %016llx", f, (unsigned long long)ha,
                   (unsigned long long)hb);
        CHECKF(ma.frame == mb.frame && ma.skipped == mb.skipped && ma.passes == mb.passes &&
                   memcmp(ma.probe_vel, mb.probe_vel, sizeof ma.probe_vel) == 0,
               "frame %d: metrics differ (frame %llu/%llu, passes %d/%d)", f,
               (unsigned long long)ma.frame, (unsigned long long)mb.frame, ma.passes, mb.passes);
        changed += ha != h0;
        h0 = ha;
    }
    CHECKF(changed > 30, "the state changed on only %d of 58 frames: nothing to compare", changed);
    th_note("snapshot of a %dx%dx%d volume: %zu bytes", SNAP_NX, SNAP_NY, SNAP_NZ, blob.n);
    sc_blob_free(&blob);
    done(&a, &va);
    done(&b, &vb);
}

/* A snapshot whose block bookkeeping says nothing (zeros: what a CUDA state's holds, since
 * that backend keeps no block flags on the host) restored on the CPU after the release, while
 * the tissue rings: the restore finds what is displaced and moving from the positions and
 * velocities themselves, so it steps on as the original, bit for bit. */
TEST(volume_snapshot_without_block_flags_steps_on_as_the_original)
{
    sim_volume va, vb;
    vs_scene a, b;
    char err[256];
    REQUIRE(make(&a, &va, SNAP_NX) && make(&b, &vb, SNAP_NX));
    /* b's queued parameters apply now, not after the restore (a change marks the active
     * blocks for a look, which would hide what the restore itself leaves out). */
    REQUIRE(sim_volume_step(b.state, NULL, err, sizeof err) == SIM_OK);
    const int at = 26; /* released at 21: ringing under condition B */
    for (int f = 0; f < at; f++) {
        REQUIRE(script(a.state, &va, f) == SIM_OK);
        REQUIRE(sim_volume_step(a.state, NULL, err, sizeof err) == SIM_OK);
    }
    sc_blob blob = {0};
    REQUIRE(sim_volume_state_save(a.state, &blob, err, sizeof err) == SIM_OK);
    /* The snapshot ends with the block flags (uint16) and largest displacements (float). */
    size_t nb = (size_t)((SNAP_NX + VOL_BLOCK - 1) / VOL_BLOCK) *
                ((SNAP_NY + VOL_BLOCK - 1) / VOL_BLOCK) * ((SNAP_NZ + VOL_BLOCK - 1) / VOL_BLOCK);
    REQUIRE(blob.n > nb * 6);
    memset((char *)blob.p + blob.n - nb * 6, 0, nb * 6);
    CHECKF(sim_volume_state_restore(b.state, blob.p, blob.n, err, sizeof err) == SIM_OK, "%s", err);
    int differ = 0, changed = 0;
    uint64_t h0 = sim_volume_state_hash(a.state);
    for (int f = at; f < 70; f++) {
        REQUIRE(script(a.state, &va, f) == SIM_OK && script(b.state, &vb, f) == SIM_OK);
        REQUIRE(sim_volume_step(a.state, NULL, err, sizeof err) == SIM_OK);
        REQUIRE(sim_volume_step(b.state, NULL, err, sizeof err) == SIM_OK);
        uint64_t ha = sim_volume_state_hash(a.state), hb = sim_volume_state_hash(b.state);
        if (ha != hb && !differ++)
            CHECKF(0, "frame %d: original %016llx, restored %016llx", f, (unsigned long long)ha,
                   (unsigned long long)hb);
        changed += ha != h0;
        h0 = ha;
    }
    CHECKF(changed > 20, "the state changed on only %d of 44 frames: nothing to compare", changed);
    sc_blob_free(&blob);
    done(&a, &va);
    done(&b, &vb);
}

/* A snapshot cut short, of another kind or of another volume's size is refused, saying why,
 * and leaves the state it was read into at rest (the hash of a state just made). */
TEST(volume_snapshot_damaged_or_foreign_is_refused)
{
    sim_volume va, vb, vc;
    vs_scene a, b, c;
    char err[256];
    REQUIRE(make(&a, &va, SNAP_NX) && make(&b, &vb, SNAP_NX) && make(&c, &vc, SNAP_NX - 8));
    REQUIRE(sim_volume_step(b.state, NULL, err, sizeof err) == SIM_OK);
    uint64_t fresh = sim_volume_state_hash(b.state);
    for (int f = 0; f < 10; f++) {
        REQUIRE(script(a.state, &va, f) == SIM_OK);
        REQUIRE(sim_volume_step(a.state, NULL, err, sizeof err) == SIM_OK);
    }
    sc_blob blob = {0};
    REQUIRE(sim_volume_state_save(a.state, &blob, err, sizeof err) == SIM_OK);
    size_t cuts[] = {0, 3, 20, 200, blob.n / 2, blob.n - 1};
    for (size_t k = 0; k < sizeof cuts / sizeof cuts[0]; k++) {
        err[0] = 0;
        sim_status st = sim_volume_state_restore(b.state, blob.p, cuts[k], err, sizeof err);
        CHECKF(st == SIM_ERR_FORMAT && strstr(err, "snapshot"), "cut at %zu: status %d, \"%s\"",
               cuts[k], st, err);
        CHECKF(sim_volume_state_hash(b.state) == fresh, "cut at %zu: not back at rest", cuts[k]);
        CHECK(sim_volume_grabbed_count(b.state) == 0);
    }
    memcpy(blob.p, "CLTH", 4);
    CHECK(sim_volume_state_restore(b.state, blob.p, blob.n, err, sizeof err) == SIM_ERR_FORMAT);
    CHECKF(strstr(err, "VOLS") != NULL, "a foreign part: \"%s\"", err);
    memcpy(blob.p, "VOLS", 4);
    CHECK(sim_volume_state_restore(c.state, blob.p, blob.n, err, sizeof err) == SIM_ERR_FORMAT);
    CHECKF(strstr(err, "40x40x24") != NULL, "another size: \"%s\"", err);
    /* Whole again, it restores. */
    CHECK(sim_volume_state_restore(b.state, blob.p, blob.n, err, sizeof err) == SIM_OK);
    CHECK(sim_volume_state_hash(b.state) == sim_volume_state_hash(a.state));
    sc_blob_free(&blob);
    done(&a, &va);
    done(&b, &vb);
    done(&c, &vc);
}
