/* test_scene_growth_snapshot.c: the growth adapter's durability hooks (save, restore, hash:
 * server/scene.h) through the adapter itself, as durable.c drives them. A session A runs a
 * script (the plant: a faster pace, a rule changed mid-growth, a step event; the truss: grown,
 * a load dragged by the hand, a support moved, solved in sweeps), is saved part-way (the
 * plant mid-growth, the truss mid-drag with the load held and mid-solve); B, built again from
 * the same options, is restored; both run the script on and must give the same hash and the
 * same view on every frame. A plant made without a seed comes back with its own. A truss
 * its supports no longer hold names the support that freed it, restored or not. Damaged
 * snapshots are refused with a reason. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "sim/core/sc_base.h"
#include "sim/growth/growth.h"
#include "tests/harness.h"
#include "tests/server/scene_session.h"

typedef scene_session sess;

static int open_sess(sess *s, const char *opts)
{
    return scene_session_open(s, "growth", opts, 1);
}

#define close_sess scene_session_close
#define send       scene_session_send

/* One frame at 60 Hz: its events, the step, the view's hash. */
static uint64_t frame(sess *s, int f, void (*script)(sess *, int), int *changed)
{
    double ms;
    s->ctx.frame = (uint64_t)f;
    s->ctx.sim_time_s = f / 60.0;
    script(s, f);
    *changed = s->sc->step(&s->ctx, s->scene, &ms);
    srv_view v;
    srv_view_budget b = {0, 0};
    s->sc->view(s->scene, s->ctx.frame, &b, &v);
    uint64_t h = SC_HASH_SEED;
    for (uint32_t k = 0; k < v.n; k++) {
        h = sc_hash_bytes(h, v.obj[k].pos, v.obj[k].nvert * 3 * sizeof(float));
        h = sc_hash_bytes(h, v.obj[k].scalar, v.obj[k].nvert * sizeof(float));
    }
    return h;
}

static void plant_script(sess *s, int f)
{
    if (f == 0)
        send(s, "{\"type\":\"set_params\",\"seq\":1,\"params\":{\"steps_per_s\":6}}");
    if (f == 50)
        send(s, "{\"type\":\"set_params\",\"seq\":2,\"params\":{\"side_angle_max\":40}}");
    if (f == 70)
        send(s, "{\"type\":\"step\",\"seq\":3}");
}

static void truss_script(sess *s, int f)
{
    char m[160];
    if (f == 0)
        send(s, "{\"type\":\"set_params\",\"seq\":1,\"params\":{\"steps_per_s\":60,"
                "\"sweeps_per_frame\":8}}");
    if (f == 30)
        send(s, "{\"type\":\"grab\",\"seq\":2,\"point\":[0.6,0,0.6],\"space\":\"world\"}");
    if (f > 30 && f < 40) {
        snprintf(m, sizeof m, "{\"type\":\"move\",\"seq\":%d,\"point\":[%g,0,0.6]}", f,
                 0.6 - 0.05 * (f - 30));
        send(s, m);
    }
    if (f == 40)
        send(s, "{\"type\":\"release\",\"seq\":40}");
    if (f == 45) { /* the roller moved in one frame: never unheld */
        send(s, "{\"type\":\"support\",\"seq\":41,\"node\":[12,0],\"fix\":\"free\"}");
        send(s, "{\"type\":\"support\",\"seq\":42,\"node\":[10,0],\"fix\":\"roller\"}");
    }
}

/* A runs to save_at, is saved; B is made from the same options and restored; both run on to
 * frames and must agree on every frame. */
static void run_twice(const char *opts, void (*script)(sess *, int), int save_at, int frames)
{
    sess a, b;
    REQUIRE(open_sess(&a, opts) && open_sess(&b, opts));
    int ca, cb, moving = 0;
    for (int f = 0; f < save_at; f++)
        frame(&a, f, script, &ca);
    sc_blob blob = {0};
    char err[256];
    REQUIRE(a.sc->save(a.scene, &blob, err, sizeof err) == 0);
    REQUIRE(b.sc->restore(b.scene, blob.p, blob.n, err, sizeof err) == 0);
    CHECK(a.sc->hash(a.scene) == b.sc->hash(b.scene));
    int same = 1;
    for (int f = save_at; f < frames; f++) {
        uint64_t ha = frame(&a, f, script, &ca), hb = frame(&b, f, script, &cb);
        same &= ha == hb && ca == cb && a.sc->hash(a.scene) == b.sc->hash(b.scene);
        moving += ca;
    }
    CHECKF(same, "%s: the restored session went its own way", opts);
    CHECKF(moving >= 5, "%s: only %d frames changed after the save", opts, moving);
    CHECK(a.errors == 0 && b.errors == 0);
    /* Damaged: cut short, or a byte of the header flipped. */
    CHECK(b.sc->restore(b.scene, blob.p, blob.n / 2, err, sizeof err) != 0);
    blob.p[9] ^= 0x40;
    CHECK(b.sc->restore(b.scene, blob.p, blob.n, err, sizeof err) != 0);
    sc_blob_free(&blob);
    close_sess(&a), close_sess(&b);
}

TEST(growth_scene_plant_restored_mid_growth_grows_on_as_the_original)
{
    run_twice("{\"model\":\"plant\",\"seed\":77}", plant_script, 25, 200);
}

TEST(growth_scene_truss_restored_mid_drag_and_mid_solve_steps_on_as_the_original)
{
    run_twice("{\"model\":\"truss\",\"cells\":[12,6]}", truss_script, 35, 120);
}

TEST(growth_scene_plant_without_a_seed_comes_back_with_its_own)
{
    sess a, b;
    REQUIRE(open_sess(&a, "{\"model\":\"plant\"}"));
    int c;
    for (int f = 0; f < 20; f++)
        frame(&a, f, plant_script, &c);
    sc_blob blob = {0};
    char err[256];
    REQUIRE(a.sc->save(a.scene, &blob, err, sizeof err) == 0);
    struct timespec pause = {0, 2000000}; /* a fresh seed comes from the clock: let it move */
    nanosleep(&pause, NULL);
    REQUIRE(open_sess(&b, "{\"model\":\"plant\"}"));
    cJSON *ja = cJSON_CreateObject(), *jb = cJSON_CreateObject();
    a.sc->describe(a.scene, ja), b.sc->describe(b.scene, jb);
    double seed_a = cJSON_GetObjectItem(ja, "seed")->valuedouble;
    CHECKF(cJSON_GetObjectItem(jb, "seed")->valuedouble != seed_a, "two fresh seeds alike: %g",
           seed_a);
    cJSON_Delete(jb);
    CHECKF(b.sc->restore(b.scene, blob.p, blob.n, err, sizeof err) == 0, "%s", err);
    CHECK(a.sc->hash(a.scene) == b.sc->hash(b.scene));
    jb = cJSON_CreateObject();
    b.sc->describe(b.scene, jb);
    CHECK(cJSON_GetObjectItem(jb, "seed")->valuedouble == seed_a);
    cJSON_Delete(ja), cJSON_Delete(jb);
    sc_blob_free(&blob);
    close_sess(&a), close_sess(&b);
}

/* n frames from frame `from`; returns the next frame's number. */
static int step_frames(sess *s, int from, int n)
{
    for (int f = from; f < from + n; f++) {
        double ms;
        s->ctx.frame = (uint64_t)f;
        s->ctx.sim_time_s = f / 60.0;
        (void)s->sc->step(&s->ctx, s->scene, &ms);
    }
    return from + n;
}

/* The roller freed (seq 5): "not held", as the answer to seq 5. Saved then, and restored
 * into B: a load moved (seq 6) solves again, and each says "not held" again naming seq 5,
 * the support that freed the beam, not the load's move (nor 0, what a restore that lost it
 * would name). The same snapshot as a version 1 part (from before the seq was kept) is still
 * read into C, the same truss, whose "not held" can only name 0. */
TEST(growth_scene_truss_not_held_names_the_support_that_freed_it_after_a_restore)
{
    const char *opts = "{\"model\":\"truss\",\"cells\":[6,3]}";
    sess a, b, c;
    REQUIRE(open_sess(&a, opts) && open_sess(&b, opts) && open_sess(&c, opts));
    int f = step_frames(&a, 0, 120); /* grown (6 x 3 cells) and solved */
    send(&a, "{\"type\":\"support\",\"seq\":5,\"node\":[6,0],\"fix\":\"free\"}");
    f = step_frames(&a, f, 5);
    CHECKF(a.errors == 1 && a.last_error_seq == 5 && strstr(a.last_error, "not held"),
           "%d refusals, the last seq %u: %s", a.errors, a.last_error_seq, a.last_error);
    sc_blob blob = {0};
    char err[256];
    REQUIRE(a.sc->save(a.scene, &blob, err, sizeof err) == 0);
    REQUIRE(b.sc->restore(b.scene, blob.p, blob.n, err, sizeof err) == 0);
    /* Version 1: the seq's 4 bytes (after the tag, the head, the parameters and the pace)
     * taken out. */
    size_t at = 4 + 4 + 8 * sizeof(int32_t) + sizeof(sim_growth_params) + sizeof(double);
    uint32_t v1 = 1, seq_kept;
    REQUIRE(blob.n > at + 4);
    memcpy(&seq_kept, blob.p + at, sizeof seq_kept);
    CHECK(seq_kept == 5);
    memcpy(blob.p + 4, &v1, sizeof v1);
    memmove(blob.p + at, blob.p + at + 4, blob.n - at - 4);
    CHECKF(c.sc->restore(c.scene, blob.p, blob.n - 4, err, sizeof err) == 0, "version 1: %s", err);
    CHECK(c.sc->hash(c.scene) == a.sc->hash(a.scene));
    sc_blob_free(&blob);
    sess *all[3] = {&a, &b, &c};
    const char *name[3] = {"original", "restored", "restored from version 1"};
    for (int k = 0; k < 3; k++) {
        sess *s = all[k];
        int before = s->errors;
        uint32_t named = k < 2 ? 5 : 0;
        send(s, "{\"type\":\"load\",\"seq\":6,\"point\":[0.2,0,0.3]}");
        step_frames(s, f, 5);
        CHECKF(s->errors == before + 1 && s->last_error_seq == named &&
                   strstr(s->last_error, "not held"),
               "%s: %d refusals after the load, the last seq %u: %s", name[k], s->errors - before,
               s->last_error_seq, s->last_error);
    }
    close_sess(&a), close_sess(&b), close_sess(&c);
}
