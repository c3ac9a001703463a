/* test_scene_volume_probe.c: the volume probe's trail (server/scene_volume.c, object 2). Each
 * view carries, after the pull's end (vertex 1), where the grabbed region was at each of the
 * 16 frames before (vertex 50 + k - 1: k frames before), with its speed then, so that a
 * viewer skipped frames still plots every frame. Driven as the worker drives a session (the
 * step with ctx.frame f makes frame f + 1; a paused frame counts and steps nothing), under
 * condition B: a pull, a release, a pause while it rings, a second grab elsewhere. Ground
 * truth: the pull's end and speed as the views of those frames showed them (a paused frame
 * shows the last step's), and for the frames before a grab, none of the old region's (its
 * displacement was measured from another rest position): the new grab's first sample.
 * A session saved mid-ring (a restart, a recording's start) and restored into one made afresh
 * shows the same probe, trail included, on every frame after. */
#include <math.h>
#include <string.h>

#include "sim/core/sc_blob.h"

#include "tests/harness.h"
#include "tests/server/scene_session.h"

#define PROBE_ID 2
#define TRAIL_AT 50 /* VOL_PROBE_TRAIL_AT */
#define TRAIL    16 /* VOL_PROBE_TRAIL */
#define NVERT    (TRAIL_AT + TRAIL)
#define FRAMES   160
#define REGRAB   38 /* the step that takes the second grab: frame REGRAB + 1 shows it */

typedef struct shown {
    float end[3], speed, at[3]; /* the pull's end, its speed, the transform (rest position) */
    float trail[TRAIL][4];      /* end and speed, k = 1..TRAIL frames before */
    int grab_from;              /* the first frame of the grab this frame shows */
} shown;

static void script(scene_session *s, int f)
{
    char m[160];
    if (f == 0) {
        scene_session_send(s, "{\"type\":\"set_condition\",\"seq\":1,\"condition\":\"B\"}");
        scene_session_send(s, "{\"type\":\"grab\",\"seq\":2,\"point\":[24,38,14],\"radius\":2.5,"
                              "\"space\":\"lattice\"}");
    }
    if (f >= 1 && f <= 16) {
        snprintf(m, sizeof m,
                 "{\"type\":\"move\",\"seq\":%d,\"point\":[24,%g,14],\"space\":\"lattice\"}", 2 + f,
                 38.0 + 6.0 * f / 16.0);
        scene_session_send(s, m);
    }
    if (f == 30)
        scene_session_send(s, "{\"type\":\"release\",\"seq\":40}");
    if (f == REGRAB) /* while the first region still rings */
        scene_session_send(s, "{\"type\":\"grab\",\"seq\":41,\"point\":[14,36,10],\"radius\":2.5,"
                              "\"space\":\"lattice\"}");
    if (f > REGRAB && f <= REGRAB + 8) {
        snprintf(m, sizeof m,
                 "{\"type\":\"move\",\"seq\":%d,\"point\":[%g,36,10],\"space\":\"lattice\"}",
                 41 + f - REGRAB, 14.0 - 0.5 * (f - REGRAB));
        scene_session_send(s, m);
    }
    if (f == REGRAB + 20)
        scene_session_send(s, "{\"type\":\"release\",\"seq\":60}");
}

static int paused_at(int f)
{
    return f >= 70 && f < 78; /* while the second region rings, for 8 frames */
}

/* The worker's frame f (unless paused): the script's events, the step that makes frame f + 1,
 * and that frame's view's probe. NULL when the view has no probe of NVERT vertices. */
static const proto_object_in *step_frame(scene_session *s, int f)
{
    double ms;
    s->ctx.frame = (uint64_t)f;
    s->ctx.sim_time_s = f / 60.0;
    script(s, f);
    (void)s->sc->step(&s->ctx, s->scene, &ms);
    srv_view v;
    srv_view_budget b = {0, 0};
    s->sc->view(s->scene, (uint64_t)f + 1, &b, &v);
    CHECK(v.n > PROBE_ID && v.obj[PROBE_ID].nvert == NVERT);
    return v.n > PROBE_ID && v.obj[PROBE_ID].nvert == NVERT ? &v.obj[PROBE_ID] : NULL;
}

TEST(volume_probe_trail_holds_the_region_at_each_of_the_frames_before)
{
    scene_session s;
    CHECK(scene_session_open(&s, "volume", "{\"dims\":[48,48,28]}", 1));
    if (!s.scene)
        return;
    static shown sh[FRAMES + 1];
    memset(sh, 0, sizeof sh);
    int last = -1, grab_from = 0, checked = 0, held = 0, before_grab = 0, segments_ok = 1;
    for (int f = 0; f < FRAMES; f++) {
        int F = f + 1; /* the frame this step makes */
        if (paused_at(f)) {
            sh[F] = sh[F - 1]; /* nothing steps: the frame shows what the last step left */
            continue;
        }
        const proto_object_in *o = step_frame(&s, f);
        if (!o)
            break;
        shown *x = &sh[F];
        memcpy(x->end, &o->pos[3], sizeof x->end);
        x->speed = o->scalar[1];
        memcpy(x->at, o->xf.t, sizeof x->at);
        if (last < 0 || memcmp(x->at, sh[last].at, sizeof x->at))
            grab_from = F; /* the transform moved: a new grab */
        x->grab_from = grab_from;
        for (int k = 1; k <= TRAIL; k++) {
            int j = TRAIL_AT + k - 1;
            memcpy(x->trail[k - 1], &o->pos[j * 3], 3 * sizeof(float));
            x->trail[k - 1][3] = o->scalar[j];
            /* The trail is a path: the pull's end, then each frame before in turn. */
            segments_ok &= o->elem[2 * (j - 1)] == (uint32_t)(k == 1 ? 1 : j - 1) &&
                           o->elem[2 * (j - 1) + 1] == (uint32_t)j;
        }
        last = F;
    }
    CHECK(segments_ok);
    /* Every trail entry against the frame it names. */
    for (int F = 2; F <= FRAMES; F++) {
        if (paused_at(F - 1))
            continue; /* no view was made */
        const shown *x = &sh[F];
        for (int k = 1; k <= TRAIL && F - k >= 1; k++) {
            int was = F - k >= x->grab_from ? F - k : x->grab_from;
            const shown *y = &sh[was];
            int same =
                !memcmp(x->trail[k - 1], y->end, sizeof y->end) && x->trail[k - 1][3] == y->speed;
            CHECKF(same, "frame %d, %d before (frame %d): (%g %g %g, %g) against (%g %g %g, %g)", F,
                   k, was, (double)x->trail[k - 1][0], (double)x->trail[k - 1][1],
                   (double)x->trail[k - 1][2], (double)x->trail[k - 1][3], (double)y->end[0],
                   (double)y->end[1], (double)y->end[2], (double)y->speed);
            if (!same) {
                scene_session_close(&s);
                return;
            }
            checked++;
            held += paused_at(F - k - 1);
            before_grab += F - k < x->grab_from && x->grab_from > 1;
        }
    }
    /* What the script made: a ring to follow, a pause inside the trail's reach, and a second
     * grab whose first frames reach back before it, to frames where the old region was not
     * where the new one's first sample is (else "none of the old region's" proves nothing). */
    float ring = 0.0f;
    for (int F = 31; F <= FRAMES; F++)
        ring = fmaxf(ring, fabsf(sh[F].speed));
    CHECKF(ring > 10.0f, "the regions' speed after a release: %g mm/s", (double)ring);
    int G = REGRAB + 1, differs = 0;
    CHECKF(sh[G].grab_from == G, "the second grab shown from frame %d", sh[G].grab_from);
    for (int F = G - TRAIL; F < G; F++)
        differs += memcmp(sh[F].end, sh[G].end, sizeof sh[G].end) != 0;
    CHECKF(differs >= TRAIL / 2, "%d of the old region's last samples differ from the new one's",
           differs);
    CHECKF(checked > 100 * TRAIL && held >= 8 && before_grab >= TRAIL,
           "%d entries checked, %d of paused frames, %d from before a grab", checked, held,
           before_grab);
    scene_session_close(&s);
}

TEST(volume_probe_trail_comes_back_with_a_restored_session)
{
    enum { SAVE_AT = 60 }; /* the second region rings; the trail holds 16 frames of it */
    scene_session a, b;
    char err[256] = "";
    CHECK(scene_session_open(&a, "volume", "{\"dims\":[48,48,28]}", 1));
    CHECK(scene_session_open(&b, "volume", "{\"dims\":[48,48,28]}", 1));
    if (!a.scene || !b.scene)
        goto out;
    for (int f = 0; f < SAVE_AT; f++)
        (void)step_frame(&a, f);
    sc_blob blob = {0};
    CHECKF(a.sc->save(a.scene, &blob, err, sizeof err) == 0, "%s", err);
    CHECKF(b.sc->restore(b.scene, blob.p, blob.n, err, sizeof err) == 0, "%s", err);
    int same = 1, trail_moved = 0;
    float first[TRAIL * 3];
    for (int f = SAVE_AT; f < SAVE_AT + TRAIL && same; f++) {
        const proto_object_in *oa = step_frame(&a, f);
        float pa[NVERT * 3], sa[NVERT];
        if (!oa)
            break;
        memcpy(pa, oa->pos, sizeof pa); /* the view's arrays are the scene's, overwritten next */
        memcpy(sa, oa->scalar, sizeof sa);
        const proto_object_in *ob = step_frame(&b, f);
        if (!ob)
            break;
        same = !memcmp(pa, ob->pos, sizeof pa) && !memcmp(sa, ob->scalar, sizeof sa) &&
               !memcmp(oa->xf.t, ob->xf.t, sizeof oa->xf.t);
        CHECKF(same, "frame %d: the restored session's probe differs", f + 1);
        if (f == SAVE_AT)
            memcpy(first, &pa[TRAIL_AT * 3], sizeof first);
        else
            trail_moved |= memcmp(first, &pa[TRAIL_AT * 3], sizeof first) != 0;
    }
    /* The trail at the save held more than one sample (else a lost history would not show). */
    int distinct = 0;
    for (int k = 1; k < TRAIL; k++)
        distinct += memcmp(&first[3 * k], &first[0], 3 * sizeof(float)) != 0;
    CHECKF(distinct >= TRAIL / 2 && (trail_moved || !same),
           "%d distinct trail samples at the save; the trail moved after it: %d", distinct,
           trail_moved);
    /* A snapshot of version 1 (before the trail: a --state-dir kept across the upgrade) is
     * still read: the same part without the trail, then the sim's state. */
    size_t at = 8 + sizeof(int) + 3 * sizeof(float), sim_at = at + 4 + (size_t)(TRAIL + 1) * 24;
    int32_t nhist;
    memcpy(&nhist, blob.p + at, sizeof nhist);
    CHECKF(nhist == TRAIL + 1, "%d samples in the snapshot", (int)nhist);
    sc_blob old = {0};
    uint32_t v1 = 1;
    sc_blob_put(&old, blob.p, 4);
    SC_PUT(&old, v1);
    sc_blob_put(&old, blob.p + 8, sizeof(int));
    sc_blob_put(&old, blob.p + sim_at, blob.n - sim_at);
    CHECKF(b.sc->restore(b.scene, old.p, old.n, err, sizeof err) == 0, "version 1: %s", err);
    sc_blob_free(&old);
    /* A damaged trail is refused by name: its count out of range. */
    int32_t bad = 1000;
    memcpy(blob.p + at, &bad, sizeof bad);
    CHECK(b.sc->restore(b.scene, blob.p, blob.n, err, sizeof err) != 0 &&
          strstr(err, "probe trail of 1000") != NULL);
    sc_blob_free(&blob);
out:
    scene_session_close(&a);
    scene_session_close(&b);
}
