/* test_scene_softbody_snapshot.c: the softbody adapter's durability hooks (save, restore,
 * hash: server/scene.h) through the adapter itself, as durable.c drives them: events parsed
 * from client messages and applied at frame boundaries, steps, the view. A session A runs a
 * script (parameters, a plane, a grab dragged, the tray moved and turned), is saved with the
 * grab held and a tray move not yet carried; B, built again from the same options, is
 * restored; both run the script on and must give the same hash, the same step results and
 * the same view on every frame. A sleeping organ sleeps on after a restore. Damaged
 * snapshots are refused with a reason, the scene left as it was. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "tests/harness.h"
#include "tests/server/scene_session.h"

#define SAVE_AT 40
#define FRAMES  100

typedef scene_session sess;

/* Where the script grabs: the organ's top at frame 5 of the first session (every session of
 * these tests has the same body, so the same top). */
static float g_pick[3];

/* A session of the surface model with its own body of n particles (built and settled). */
static int open_sess(sess *s, int n)
{
    char opts[64];
    snprintf(opts, sizeof opts, "{\"model\":\"surface\",\"particles\":%d}", n);
    return scene_session_open(s, "softbody", opts, 1);
}

#define close_sess scene_session_close
#define send       scene_session_send

/* The organ's surface as the view shows it (the tray's frame). */
static const float *view(sess *s, uint32_t *n)
{
    srv_view v;
    srv_view_budget b = {0, 0};
    s->sc->view(s->scene, s->ctx.frame, &b, &v);
    *n = v.obj[0].nvert;
    return v.obj[0].pos;
}

static void events(sess *s, int f)
{
    char m[200];
    if (f == 0)
        send(s, "{\"type\":\"set_params\",\"seq\":1,\"params\":{\"friction\":0.3,\"damping\":2}}");
    if (f == 3)
        send(s,
             "{\"type\":\"add_plane\",\"seq\":2,\"n\":[-1,0,0.1],\"d\":-0.05,\"attached\":true}");
    if (f == 5) {
        uint32_t n;
        const float *x = view(s, &n);
        int top = 0;
        for (uint32_t i = 0; i < n; i++)
            top = x[i * 3 + 2] > x[top * 3 + 2] ? (int)i : top;
        memcpy(g_pick, &x[top * 3], sizeof g_pick); /* the tray at the origin: world */
        snprintf(m, sizeof m, "{\"type\":\"grab\",\"seq\":3,\"point\":[%.9g,%.9g,%.9g]}",
                 (double)g_pick[0], (double)g_pick[1], (double)g_pick[2]);
        send(s, m);
    }
    if (f > 5 && f < 75) {
        double t = f - 5;
        snprintf(m, sizeof m, "{\"type\":\"move\",\"seq\":4,\"point\":[%.9g,%.9g,%.9g]}",
                 (double)g_pick[0] + 0.0008 * t, (double)g_pick[1], (double)g_pick[2] + 0.001 * t);
        send(s, m);
    }
    if (f >= 20 && f <= 55) {
        double a = 0.01 * (f - 20);
        snprintf(m, sizeof m,
                 "{\"type\":\"tray\",\"seq\":5,\"pos\":[%.9g,0.01,0],\"quat\":[%.9g,0,0,%.9g]}",
                 0.003 * (f - 20), cos(0.5 * a), sin(0.5 * a));
        send(s, m);
    }
    if (f == 65)
        send(s, "{\"type\":\"remove_plane\",\"seq\":6,\"id\":6}"); /* after the tray's 1 to 5 */
    if (f == 75)
        send(s, "{\"type\":\"release\",\"seq\":7}");
    if (f == 85)
        send(s, "{\"type\":\"reset\",\"seq\":8}"); /* settled again under the tray's pose */
}

static int step(sess *s)
{
    double ms;
    int r = s->sc->step(&s->ctx, s->scene, &ms);
    s->ctx.frame++;
    return r;
}

static int same_view(sess *a, sess *b)
{
    uint32_t na, nb;
    const float *xa = view(a, &na), *xb = view(b, &nb);
    return na == nb && !memcmp(xa, xb, (size_t)na * 3 * sizeof(float));
}

TEST(softbody_scene_restored_session_steps_on_as_the_original)
{
    sess a, b;
    char err[256];
    sc_blob snap = {0};
    REQUIRE(open_sess(&a, 200));
    for (int f = 0; f < SAVE_AT; f++) {
        events(&a, f);
        step(&a);
    }
    events(&a, SAVE_AT);
    REQUIRE(a.sc->save(a.scene, &snap, err, sizeof err) == 0);
    REQUIRE(open_sess(&b, 200));
    b.ctx.frame = a.ctx.frame;
    REQUIRE(b.sc->restore(b.scene, snap.p, snap.n, err, sizeof err) == 0);
    CHECK(a.sc->hash(a.scene) == b.sc->hash(b.scene));
    int differ = 0, changed = 0;
    uint64_t last = a.sc->hash(a.scene);
    for (int f = SAVE_AT; f < FRAMES; f++) {
        if (f > SAVE_AT) {
            events(&a, f);
            events(&b, f);
        }
        int ra = step(&a), rb = step(&b);
        uint64_t ha = a.sc->hash(a.scene), hb = b.sc->hash(b.scene);
        if ((ra != rb || ha != hb || !same_view(&a, &b)) && differ++ == 0)
            CHECKF(0, "frame %d: A stepped %d, %016llx; restored B stepped %d, %016llx", f, ra,
                   (unsigned long long)ha, rb, (unsigned long long)hb);
        changed += ha != last;
        last = ha;
    }
    CHECKF(differ == 0, "the restored session differed on %d of %d frames", differ,
           FRAMES - SAVE_AT);
    CHECKF(changed == FRAMES - SAVE_AT, "the session changed on only %d of %d frames", changed,
           FRAMES - SAVE_AT);
    CHECKF(a.errors == 0 && b.errors == 0, "events refused: %d, %d", a.errors, b.errors);
    sc_blob_free(&snap);
    close_sess(&a);
    close_sess(&b);
}

/* A settled organ stops stepping; restored, it stays asleep until an event wakes both. */
TEST(softbody_scene_restored_asleep_stays_asleep)
{
    sess a, b;
    char err[256];
    sc_blob snap = {0};
    REQUIRE(open_sess(&a, 200) && open_sess(&b, 200));
    int f = 0;
    while (f < 300 && step(&a))
        f++;
    REQUIRE(f < 300); /* asleep */
    REQUIRE(a.sc->save(a.scene, &snap, err, sizeof err) == 0);
    REQUIRE(b.sc->restore(b.scene, snap.p, snap.n, err, sizeof err) == 0);
    CHECKF(step(&b) == 0, "the restored organ stepped while the original slept");
    CHECK(step(&a) == 0);
    const char *tray = "{\"type\":\"tray\",\"seq\":1,\"pos\":[0.05,0,0],\"quat\":[1,0,0,0]}";
    send(&a, tray);
    send(&b, tray);
    for (int k = 0; k < 20; k++) {
        int ra = step(&a), rb = step(&b);
        CHECKF(ra == 1 && rb == 1 && a.sc->hash(a.scene) == b.sc->hash(b.scene),
               "frame %d after waking: stepped %d and %d", k, ra, rb);
    }
    sc_blob_free(&snap);
    close_sess(&a);
    close_sess(&b);
}

/* b refuses the bytes with an err containing want, its hash unchanged. */
static void refused(sess *b, const void *bytes, size_t n, const char *want, const char *what)
{
    char err[256] = "";
    uint64_t h = b->sc->hash(b->scene);
    CHECKF(b->sc->restore(b->scene, bytes, n, err, sizeof err) != 0, "%s: taken", what);
    CHECKF(strstr(err, want) != NULL, "%s: err \"%s\" does not say \"%s\"", what, err, want);
    CHECKF(b->sc->hash(b->scene) == h, "%s: the scene changed", what);
}

TEST(softbody_scene_damaged_snapshots_are_refused)
{
    sess a, b, c;
    char err[256];
    sc_blob snap = {0}, other = {0};
    REQUIRE(open_sess(&a, 200) && open_sess(&b, 200) && open_sess(&c, 240));
    for (int f = 0; f < 30; f++) {
        events(&a, f);
        step(&a);
    }
    REQUIRE(a.sc->save(a.scene, &snap, err, sizeof err) == 0);
    REQUIRE(c.sc->save(c.scene, &other, err, sizeof err) == 0);
    const size_t cuts[] = {0, 5, 20, 40, 60, 70, snap.n / 2, snap.n - 1};
    for (size_t k = 0; k < sizeof cuts / sizeof cuts[0]; k++) {
        char what[64];
        snprintf(what, sizeof what, "cut at %zu of %zu", cuts[k], snap.n);
        refused(&b, snap.p, cuts[k], cuts[k] < 68 ? "cut short" : "the state's part", what);
    }
    uint8_t *bad = malloc(snap.n);
    REQUIRE(bad);
    memcpy(bad, snap.p, snap.n);
    bad[2] = 'x';
    refused(&b, bad, snap.n, "expected part SBSC", "another tag");
    memcpy(bad, snap.p, snap.n);
    bad[68] = 'x'; /* the state's own tag, after the scene's 68 bytes */
    refused(&b, bad, snap.n, "expected part SBST", "the state's tag");
    refused(&b, other.p, other.n, "of a body of 240 particles", "a body of 240 into one of 200");
    free(bad);
    REQUIRE(b.sc->restore(b.scene, snap.p, snap.n, err, sizeof err) == 0);
    CHECK(a.sc->hash(a.scene) == b.sc->hash(b.scene));
    sc_blob_free(&snap);
    sc_blob_free(&other);
    close_sess(&a);
    close_sess(&b);
    close_sess(&c);
}
