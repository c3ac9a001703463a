/* test_softbody_snapshot.c: a softbody state saved and restored (sim_softbody_save /
 * sim_softbody_restore) steps on bitwise as the original does. Judged against the original
 * run itself: A runs a script of events (parameters, pins, planes, a grab dragged, the tray
 * moved and turned) for 40 frames, is saved with the grab held and a tray move not yet
 * carried, then B, a state made again from the same model, already stepped elsewhere (its
 * scratch spoilt) and on another thread count, is restored from the bytes; both run the same
 * script for 60 more frames and must agree bitwise on every frame. Then the refusals: a
 * snapshot cut short, of another part or version, of another body, damaged, leaves the state
 * as it was and says why. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sim/softbody/softbody.h"
#include "tests/harness.h"
#include "tests/scenes/softbody_scenes.h"

#define SAVE_AT 40
#define FRAMES  100

/* What the script remembers between frames: where it grabbed, its planes. */
typedef struct script {
    float pick[3];
    int plane[2];
} script;

static int top_particle(const sim_softbody_state *s)
{
    int n, top = 0;
    const float *x = sim_softbody_positions(s, &n);
    for (int i = 0; i < n; i++)
        top = x[i * 3 + 2] > x[top * 3 + 2] ? i : top;
    return top;
}

static int lowest_particle(const sim_softbody_state *s)
{
    int n, low = 0;
    const float *x = sim_softbody_positions(s, &n);
    for (int i = 0; i < n; i++)
        low = x[i * 3 + 2] < x[low * 3 + 2] ? i : low;
    return low;
}

/* The tray at frame f of its move (frames 25 to 60): along x and turning about a tilted
 * axis. */
static void tray_at(int f, float pos[3], float q[4])
{
    float a = 0.01f * (float)(f - 25), ax[3] = {0.2f, 0.3f, 1.0f};
    float l = sqrtf(ax[0] * ax[0] + ax[1] * ax[1] + ax[2] * ax[2]);
    pos[0] = 0.002f * (float)(f - 25), pos[1] = -0.001f * (float)(f - 25), pos[2] = 0.0f;
    q[0] = cosf(0.5f * a);
    for (int k = 0; k < 3; k++)
        q[k + 1] = sinf(0.5f * a) * ax[k] / l;
}

/* The events of frame f (before its step), the same for every state that runs it. */
static void events(sim_softbody_state *s, script *sc, int f)
{
    char err[256];
    int n;
    if (f == 0) {
        sim_softbody_params p = sim_softbody_get_params(s);
        p.friction = 0.3f, p.damping = 2.0f, p.parallel_min = 1, p.grab_stiffness = 0.4f;
        p.hybrid_iterations = 2; /* the multipliers kept across iterations: still scratch */
        CHECK(sim_softbody_set_params(s, &p, err, sizeof err) == SIM_OK);
        float wall[3] = {-1.0f, 0.0f, 0.1f}, floor[3] = {0.0f, 0.0f, 1.0f};
        CHECK(sim_softbody_add_plane(s, wall, -0.05f, 1, &sc->plane[0], err, sizeof err) == SIM_OK);
        CHECK(sim_softbody_add_plane(s, floor, 0.0f, 1, NULL, err, sizeof err) == SIM_OK);
        sim_softbody_positions(s, &n);
        uint8_t *pin = calloc((size_t)n, 1);
        if (pin) {
            pin[lowest_particle(s)] = 1;
            CHECK(sim_softbody_set_pinned(s, pin, err, sizeof err) == SIM_OK);
        }
        free(pin);
    }
    if (f == 10) {
        const float *x = sim_softbody_positions(s, &n);
        memcpy(sc->pick, &x[top_particle(s) * 3], sizeof sc->pick);
        CHECK(sim_softbody_grab(s, sc->pick) > 0);
    }
    if (f > 10 && f < 75) {
        float t = (float)(f - 10), hand[3] = {sc->pick[0] + 0.0008f * t, sc->pick[1],
                                              sc->pick[2] + 0.0012f * t - 0.00002f * t * t};
        CHECK(sim_softbody_move_hand(s, hand, err, sizeof err) == SIM_OK);
    }
    if (f >= 25 && f <= 60) {
        float pos[3], q[4];
        tray_at(f, pos, q);
        CHECK(sim_softbody_set_parent(s, pos, q, err, sizeof err) == SIM_OK);
    }
    if (f == 62) {
        float n2[3] = {0.0f, -1.0f, 0.0f};
        CHECK(sim_softbody_add_plane(s, n2, -0.2f, 0, &sc->plane[1], err, sizeof err) == SIM_OK);
    }
    if (f == 70)
        CHECK(sim_softbody_remove_plane(s, sc->plane[0], err, sizeof err) == SIM_OK);
    if (f == 75)
        sim_softbody_release(s);
}

static int step(sim_softbody_state *s)
{
    char err[256];
    if (sim_softbody_step(s, NULL, err, sizeof err) == SIM_OK)
        return 1;
    fprintf(stderr, "step: %s\n", err);
    return 0;
}

static int same_surface(const sim_softbody_state *a, const sim_softbody_state *b)
{
    int na, nb;
    const float *xa = sim_softbody_surface(a, &na), *xb = sim_softbody_surface(b, &nb);
    return na == nb && !memcmp(xa, xb, (size_t)na * 3 * sizeof(float));
}

/* A on one thread through the script; saved at SAVE_AT with the grab held and a tray move
 * set but not carried; B (two threads, spoilt by 5 frames of its own) restored; both on. */
static void round_trip(const sim_softbody_model *m)
{
    char err[256];
    sim_backend *b1 = NULL, *b2 = NULL;
    sim_softbody_state *a = NULL, *b = NULL;
    sc_blob snap = {0};
    script sc;
    memset(&sc, 0, sizeof sc);
    REQUIRE(sim_backend_create(&b1, SIM_BACKEND_CPU, 1, err, sizeof err) == SIM_OK);
    REQUIRE(sim_backend_create(&b2, SIM_BACKEND_CPU, 2, err, sizeof err) == SIM_OK);
    REQUIRE(sim_softbody_state_create(&a, m, b1, err, sizeof err) == SIM_OK);
    for (int f = 0; f < SAVE_AT; f++) {
        events(a, &sc, f);
        REQUIRE(step(a));
    }
    events(a, &sc, SAVE_AT);
    REQUIRE(sim_softbody_save(a, &snap, err, sizeof err) == SIM_OK);
    th_note("snapshot of %d particles: %zu bytes", sim_softbody_model_info(m).particles, snap.n);

    REQUIRE(sim_softbody_state_create(&b, m, b2, err, sizeof err) == SIM_OK);
    float spot[3] = {0.0f, 0.0f, 0.03f};
    sim_softbody_grab(b, spot);
    for (int f = 0; f < 5; f++)
        REQUIRE(step(b));
    sim_softbody_set_threads(b, 2);
    REQUIRE(sim_softbody_restore(b, snap.p, snap.n, err, sizeof err) == SIM_OK);
    CHECK(sim_softbody_hash(a) == sim_softbody_hash(b) && same_surface(a, b));

    int differ = 0, changed = 0;
    uint64_t last = sim_softbody_hash(a);
    script sb = sc; /* B takes the script where A's stands */
    for (int f = SAVE_AT; f < FRAMES; f++) {
        if (f > SAVE_AT) {
            events(a, &sc, f);
            events(b, &sb, f);
        }
        REQUIRE(step(a) && step(b));
        uint64_t ha = sim_softbody_hash(a), hb = sim_softbody_hash(b);
        if ((ha != hb || !same_surface(a, b)) && differ++ == 0)
            CHECKF(0, "frame %d: A %016llx, restored B %016llx", f, (unsigned long long)ha,
                   (unsigned long long)hb);
        changed += ha != last;
        last = ha;
    }
    CHECKF(differ == 0, "the restored state differed on %d of %d frames", differ, FRAMES - SAVE_AT);
    CHECKF(changed == FRAMES - SAVE_AT, "the state changed on only %d of %d frames", changed,
           FRAMES - SAVE_AT);
    CHECK(sc.plane[1] == sb.plane[1]); /* plane ids go on as they would have */
    CHECK(sim_softbody_guard_resets(a) == sim_softbody_guard_resets(b));
    sc_blob_free(&snap);
    sim_softbody_state_destroy(a);
    sim_softbody_state_destroy(b);
    sim_backend_destroy(b1);
    sim_backend_destroy(b2);
}

TEST(softbody_snapshot_surface_restored_steps_on_bitwise)
{
    sim_softbody_model *m = sbs_organ_model(400);
    REQUIRE(m);
    round_trip(m);
    sim_softbody_model_destroy(m);
}

static sim_softbody_model *box_model(float cell)
{
    sim_softbody_tets t;
    sim_softbody_model *m = NULL;
    char err[256];
    if (sbs_box_tets(&t, 6, 3, 3, cell, 0.0f, 3, 2, err, sizeof err) != SIM_OK ||
        sim_softbody_model_hybrid(&m, &t, err, sizeof err) != SIM_OK)
        fprintf(stderr, "box: %s\n", err);
    sim_softbody_tets_free(&t);
    return m;
}

TEST(softbody_snapshot_hybrid_restored_steps_on_bitwise)
{
    sim_softbody_model *m = box_model(0.01f);
    REQUIRE(m);
    REQUIRE(sim_softbody_model_info(m).boundary_tets > 0 &&
            sim_softbody_model_info(m).surface_vertices > 0);
    round_trip(m);
    sim_softbody_model_destroy(m);
}

/* ------------------------------------------------------------------ refusals */

/* s refuses bytes (n of them) with an err containing want, and is left as it was. */
static void refused(sim_softbody_state *s, const void *bytes, size_t n, const char *want,
                    const char *what)
{
    char err[256] = "";
    int ns;
    uint64_t h = sim_softbody_hash(s);
    const float *surf = sim_softbody_surface(s, &ns);
    float first[3];
    memcpy(first, surf, sizeof first);
    sim_softbody_params p = sim_softbody_get_params(s);
    sim_status st = sim_softbody_restore(s, bytes, n, err, sizeof err);
    CHECKF(st != SIM_OK, "%s: taken", what);
    CHECKF(strstr(err, want) != NULL, "%s: err \"%s\" does not say \"%s\"", what, err, want);
    sim_softbody_params q = sim_softbody_get_params(s);
    CHECKF(sim_softbody_hash(s) == h &&
               !memcmp(first, sim_softbody_surface(s, &ns), sizeof first) &&
               !memcmp(&p, &q, sizeof p),
           "%s: the state changed", what);
}

/* A surface state of n particles run 20 frames with a grab, saved into out. */
static sim_softbody_state *saved_state(const sim_softbody_model *m, sim_backend *be, sc_blob *out)
{
    char err[256];
    sim_softbody_state *s = NULL;
    script sc;
    memset(&sc, 0, sizeof sc);
    if (sim_softbody_state_create(&s, m, be, err, sizeof err) != SIM_OK)
        return NULL;
    for (int f = 0; f < 20; f++) {
        events(s, &sc, f);
        step(s);
    }
    if (sim_softbody_save(s, out, err, sizeof err) != SIM_OK)
        fprintf(stderr, "save: %s\n", err);
    return s;
}

/* Cut short at each of several points (in the tag, the model, the parameters, the planes,
 * the arrays, one byte from the end), of another tag or version, one byte too many: each
 * refused by what it is. */
TEST(softbody_snapshot_cut_short_or_of_another_part_is_refused)
{
    char err[256];
    sim_backend *be = NULL;
    sim_softbody_model *m = sbs_organ_model(300);
    REQUIRE(m && sim_backend_create(&be, SIM_BACKEND_CPU, 1, err, sizeof err) == SIM_OK);
    sc_blob snap = {0};
    sim_softbody_state *a = saved_state(m, be, &snap), *b = NULL;
    REQUIRE(a && snap.n > 300 * 24 && !snap.failed);
    REQUIRE(sim_softbody_state_create(&b, m, be, err, sizeof err) == SIM_OK);
    REQUIRE(step(b));
    const size_t cuts[] = {0, 3, 6, 12, 40, 100, 300, snap.n / 2, snap.n - 3 * 300, snap.n - 1};
    for (size_t k = 0; k < sizeof cuts / sizeof cuts[0]; k++) {
        char what[64];
        snprintf(what, sizeof what, "cut at %zu of %zu", cuts[k], snap.n);
        refused(b, snap.p, cuts[k], "cut short", what);
    }
    refused(b, NULL, 0, "cut short", "no bytes");
    uint8_t *bad = malloc(snap.n + 1);
    REQUIRE(bad);
    memcpy(bad, snap.p, snap.n);
    bad[0] = 'X';
    refused(b, bad, snap.n, "expected part SBST version 1, found XBST", "another tag");
    bad[0] = snap.p[0];
    bad[4] ^= 2;
    refused(b, bad, snap.n, "found SBST version 3", "another version");
    bad[4] = snap.p[4];
    bad[snap.n] = 0;
    refused(b, bad, snap.n + 1, "too many", "a byte left over");
    /* The layout, as sb_snapshot.c says: tag (8), model (32), the parameters' size (4) and
     * them, seven poses (84), four counts (16), 24 bytes a plane, then positions and
     * velocities. */
    size_t counts = 44 + sizeof(sim_softbody_params) + 84;
    int32_t nplanes;
    memcpy(&nplanes, snap.p + counts, sizeof nplanes);
    REQUIRE(nplanes == 2);
    size_t v0 = counts + 16 + (size_t)nplanes * 24 + 300 * 12;
    float nan = NAN;
    memcpy(bad + v0 + 4, &nan, sizeof nan);
    refused(b, bad, snap.n, "not finite", "a velocity not finite");
    memcpy(bad + v0 + 4, snap.p + v0 + 4, sizeof nan);
    bad[v0 + 300 * 12 + 7] = 2;
    refused(b, bad, snap.n, "neither 0 nor 1", "a pin of 2");
    REQUIRE(sim_softbody_restore(b, snap.p, snap.n, err, sizeof err) == SIM_OK); /* still good */
    CHECK(sim_softbody_hash(a) == sim_softbody_hash(b));
    free(bad);
    sc_blob_free(&snap);
    sim_softbody_state_destroy(a);
    sim_softbody_state_destroy(b);
    sim_backend_destroy(be);
    sim_softbody_model_destroy(m);
}

/* A snapshot of another body: more particles, the other model kind, the same sizes in
 * another shape; and one whose parameters are out of their range. */
TEST(softbody_snapshot_of_another_body_is_refused)
{
    char err[256];
    sim_backend *be = NULL;
    REQUIRE(sim_backend_create(&be, SIM_BACKEND_CPU, 1, err, sizeof err) == SIM_OK);
    sim_softbody_model *m300 = sbs_organ_model(300), *m301 = sbs_organ_model(301);
    sim_softbody_model *box = box_model(0.01f), *big = box_model(0.012f);
    REQUIRE(m300 && m301 && box && big);
    sc_blob s300 = {0}, sbox = {0};
    sim_softbody_state *a = saved_state(m300, be, &s300), *h = saved_state(box, be, &sbox);
    sim_softbody_state *b = NULL, *c = NULL, *d = NULL;
    REQUIRE(a && h && sim_softbody_state_create(&b, m301, be, err, sizeof err) == SIM_OK);
    REQUIRE(sim_softbody_state_create(&c, m300, be, err, sizeof err) == SIM_OK);
    REQUIRE(sim_softbody_state_create(&d, big, be, err, sizeof err) == SIM_OK);
    refused(b, s300.p, s300.n, "of a body of 300 particles", "300 into 301");
    refused(c, sbox.p, sbox.n, "of a hybrid model, this state's is surface", "hybrid into surface");
    refused(h, s300.p, s300.n, "of a surface model, this state's is hybrid", "surface into hybrid");
    refused(d, sbox.p, sbox.n, "another rest shape", "a box of 1 cm cells into one of 1.2 cm");
    /* friction follows the model's part (8 + 24 + 8 bytes) and the parameters' size (4) */
    int np;
    const sim_param_desc *t = sim_softbody_params_table(&np);
    size_t at = 44;
    for (int k = 0; k < np; k++)
        if (!strcmp(t[k].name, "friction"))
            at += t[k].offset;
    uint8_t *bad = malloc(s300.n);
    REQUIRE(bad);
    memcpy(bad, s300.p, s300.n);
    float f = 99.0f;
    memcpy(bad + at, &f, sizeof f);
    refused(c, bad, s300.n, "parameters: friction", "friction out of range");
    free(bad);
    sc_blob_free(&s300);
    sc_blob_free(&sbox);
    sim_softbody_state *all[] = {a, h, b, c, d};
    for (int k = 0; k < 5; k++)
        sim_softbody_state_destroy(all[k]);
    sim_softbody_model *ms[] = {m300, m301, box, big};
    for (int k = 0; k < 4; k++)
        sim_softbody_model_destroy(ms[k]);
    sim_backend_destroy(be);
}
