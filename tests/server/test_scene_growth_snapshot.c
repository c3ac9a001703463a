/* test_scene_growth_snapshot.c: the growth adapter's durability hooks (save, restore, hash:
 * server/scene.h) through the adapter itself, as durable.c drives them. A session A runs a
 * script (the plant: a faster pace, a rule changed mid-growth, a step event; the truss: grown,
 * a load dragged by the hand, a support moved, solved in sweeps), is saved part-way (the
 * plant mid-growth, the truss mid-drag with the load held and mid-solve); B, built again from
 * the same options, is restored; both run the script on and must give the same hash and the
 * same view on every frame. A plant made without a seed comes back with its own. Damaged
 * snapshots are refused with a reason. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "sim/core/sc_base.h"
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
