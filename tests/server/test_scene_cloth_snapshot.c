/* test_scene_cloth_snapshot.c: the cloth adapter's durability hooks (server/scene.h's save,
 * restore, hash). A session's scene saved mid-run (a vertex held, a LOD blend running, the
 * view's budget spacing its updates, a box grown by a gust), restored into one created
 * again from the same options, shows the same views and hashes as the original on every
 * later frame of the same events; a damaged or foreign snapshot is refused with a reason. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "server/scene.h"
#include "sim/cloth/cloth.h"
#include "tests/harness.h"

typedef struct test_ctx {
    srv_scene_ctx c;
    int errors;
} test_ctx;

static void ctx_text(srv_scene_ctx *c, uint32_t client, const char *text)
{
    (void)c, (void)client, (void)text;
}
static void ctx_frame(srv_scene_ctx *c, uint32_t client, const uint8_t *bytes, size_t len)
{
    (void)c, (void)client, (void)bytes, (void)len;
}
static void ctx_error(srv_scene_ctx *c, uint32_t client, uint32_t seq, const char *error,
                      const char *detail)
{
    (void)client, (void)seq;
    fprintf(stderr, "  event refused: %s: %s\n", error, detail);
    ((test_ctx *)c)->errors++;
}

static void ctx_init(test_ctx *t, sim_backend *b)
{
    memset(t, 0, sizeof *t);
    t->c.backend = b;
    t->c.threads = 1;
    t->c.session_id = "test";
    t->c.reply_text = ctx_text;
    t->c.reply_frame = ctx_frame;
    t->c.error = ctx_error;
}

/* One client message through the scene's own parse and apply, as the inbox hands it on. */
static int send(const srv_scene_i *sc, void *scene, test_ctx *t, const char *json)
{
    proto_envelope env;
    char err[256];
    if (proto_envelope_parse(&env, json, strlen(json), err, sizeof err) != PROTO_OK)
        return -1;
    _Alignas(8) unsigned char payload[SRV_EVENT_MAX];
    const char *error = "bad message";
    int i = srv_scene_event(sc, env.type);
    int size = i >= 0 ? sc->events[i].parse(env.msg, payload, &error, err, sizeof err) : -1;
    proto_envelope_free(&env);
    if (size < 0)
        return -1;
    srv_event ev = {1, 1, payload, (size_t)size};
    sc->events[i].apply(&t->c, scene, &ev);
    return 0;
}

/* Frame f's events: character 1 held at LOD 0 and dragged on odd frames, the camera
 * creeping away until 35 (12 m off: character 2 goes coarser, and so does everyone after
 * the reset at 66, with the camera kept across it), a gust at 10 (the capes blown out of
 * their boxes and back: the grown boxes are kept through the snapshot, to the 90s), character 0
 * forced to LOD 1 at 38 (blending at the snapshot), character 2 to LOD 2 at 60, character 1 let go
 * at 64. */
static void events_at(const srv_scene_i *sc, void *scene, test_ctx *t, int f)
{
    char msg[256];
    if (f == 0) {
        send(sc, scene, t, "{\"type\":\"motion\",\"seq\":1,\"character\":-1,\"motion\":\"walk\"}");
        send(sc, scene, t, "{\"type\":\"force_lod\",\"seq\":2,\"character\":1,\"lod\":0}");
        send(sc, scene, t,
             "{\"type\":\"grab\",\"seq\":3,\"character\":1,\"vertex\":679,"
             "\"point\":[-0.3,2.8,0.6]}");
    }
    if (f % 2 == 1 && f < 64) {
        snprintf(msg, sizeof msg, "{\"type\":\"move\",\"seq\":4,\"point\":[%.3f,2.8,0.6]}",
                 -0.3 + 0.0233 * f);
        send(sc, scene, t, msg);
    }
    if (f % 7 == 0 && f <= 35) {
        snprintf(msg, sizeof msg, "{\"type\":\"camera\",\"seq\":5,\"point\":[%.2f,1,1.5]}",
                 f == 35 ? 12.0 : 3.0 + 0.05 * f);
        send(sc, scene, t, msg);
    }
    if (f == 38)
        send(sc, scene, t, "{\"type\":\"force_lod\",\"seq\":6,\"character\":0,\"lod\":1}");
    if (f == 10)
        send(sc, scene, t, "{\"type\":\"wind\",\"seq\":7,\"impulse\":[-12,0,8]}");
    if (f == 60)
        send(sc, scene, t, "{\"type\":\"force_lod\",\"seq\":8,\"character\":2,\"lod\":2}");
    if (f == 64)
        send(sc, scene, t, "{\"type\":\"release\",\"seq\":9}");
    if (f == 66)
        send(sc, scene, t, "{\"type\":\"reset\",\"seq\":10}");
}

/* The budget: over it for the first 70 frames (updates spaced further), then well under. */
static srv_view_budget budget_at(int f)
{
    srv_view_budget b = {f < 70 ? 3000.0 : 500.0, 1000.0};
    return b;
}

static int same_object(const proto_object_in *a, const proto_object_in *b)
{
    return a->id == b->id && a->qbits == b->qbits && a->lod == b->lod && a->ninfo == b->ninfo &&
           !memcmp(a->info, b->info, sizeof a->info) && !memcmp(a->bmin, b->bmin, sizeof a->bmin) &&
           !memcmp(a->bmax, b->bmax, sizeof a->bmax) && a->nvert == b->nvert &&
           a->nelem == b->nelem && a->topo_version == b->topo_version && a->hold == b->hold &&
           !memcmp(&a->xf, &b->xf, sizeof a->xf) &&
           !memcmp(a->pos, b->pos, (size_t)a->nvert * 3 * sizeof(float)) &&
           !memcmp(a->elem, b->elem, (size_t)a->nelem * 3 * sizeof(uint32_t));
}

/* A box grown past the normal one (scene_cloth.c's k_box) to hold a cape blown out of it. */
static int grown(const proto_object_in *o)
{
    return o->bmin[0] < -1.0f || o->bmin[1] < -0.9f || o->bmin[2] < -0.05f || o->bmax[0] > 0.6f ||
           o->bmax[1] > 0.9f || o->bmax[2] > 2.0f;
}

static void *create(const srv_scene_i *sc, sim_backend *b, int characters)
{
    char json[64], err[256] = "";
    snprintf(json, sizeof json, "{\"characters\":%d}", characters);
    cJSON *opts = cJSON_Parse(json);
    void *scene = NULL;
    int st = sc->create(b, opts, &scene, err, sizeof err);
    cJSON_Delete(opts);
    if (st != 201) {
        fprintf(stderr, "  create: %d %s\n", st, err);
        sc->destroy(scene);
        return NULL;
    }
    return scene;
}

TEST(scene_cloth_restored_session_shows_what_the_original_does)
{
    const srv_scene_i *sc = srv_scene_find("cloth");
    REQUIRE(sc && sc->save && sc->restore && sc->hash);
    char err[256] = "";
    sim_backend *be = NULL;
    REQUIRE(sim_backend_create(&be, SIM_BACKEND_CPU, 1, err, sizeof err) == SIM_OK);
    test_ctx ta, tb;
    ctx_init(&ta, be);
    ctx_init(&tb, be);
    void *a = create(sc, be, 3), *b = create(sc, be, 3);
    REQUIRE(a && b);
    srv_view va, vb;
    double ms;
    for (int f = 0; f < 40; f++) {
        events_at(sc, a, &ta, f);
        sc->step(&ta.c, a, &ms);
        srv_view_budget bu = budget_at(f);
        sc->view(a, (uint64_t)f, &bu, &va);
    }
    int was_grown = 0;
    for (uint32_t k = 0; k < va.n; k++)
        was_grown += grown(&va.obj[k]);
    REQUIRE(was_grown > 0 && va.obj[1].qbits == 10); /* the held character: finer */
    sc_blob blob = {0};
    REQUIRE(sc->save(a, &blob, err, sizeof err) == 0);
    CHECKF(sc->restore(b, blob.p, blob.n, err, sizeof err) == 0, "%s", err);
    CHECK(sc->hash(b) == sc->hash(a));
    int differ = 0, held = 0, shrank = 0;
    uint64_t prev = sc->hash(a);
    for (int f = 40; f < 100; f++) {
        events_at(sc, a, &ta, f);
        events_at(sc, b, &tb, f);
        sc->step(&ta.c, a, &ms);
        sc->step(&tb.c, b, &ms);
        srv_view_budget bu = budget_at(f);
        sc->view(a, (uint64_t)f, &bu, &va);
        sc->view(b, (uint64_t)f, &bu, &vb);
        int same = sc->hash(a) == sc->hash(b) && va.n == vb.n && sc->hash(a) != prev;
        for (uint32_t k = 0; k < va.n; k++) {
            same = same && same_object(&va.obj[k], &vb.obj[k]);
            held += va.obj[k].hold;
            shrank += !grown(&va.obj[k]);
        }
        if (!same && differ++ == 0)
            CHECKF(0, "frame %d: the restored session's view or hash left the original's", f);
        prev = sc->hash(a);
    }
    /* The budget spaced the updates; the boxes grown before the snapshot went back after. */
    CHECKF(held > 0 && shrank > 0, "the views held %d shapes, %d normal boxes", held, shrank);
    CHECK(ta.errors == 0 && tb.errors == 0);
    char *pa = sc->params_json(a), *pb = sc->params_json(b);
    CHECK(pa && pb && !strcmp(pa, pb));
    free(pa), free(pb);
    /* Refused, the session as it was: cut short, another crowd. */
    void *c2 = create(sc, be, 2);
    REQUIRE(c2);
    uint64_t h = sc->hash(b);
    size_t cuts[] = {0, 6, 30, 200, blob.n / 2, blob.n - 1};
    for (size_t k = 0; k < sizeof cuts / sizeof cuts[0]; k++) {
        err[0] = 0;
        CHECKF(sc->restore(b, blob.p, cuts[k], err, sizeof err) == -1 && strstr(err, "cut short"),
               "cut at %zu of %zu: \"%s\"", cuts[k], blob.n, err);
    }
    CHECK(sc->hash(b) == h);
    err[0] = 0;
    CHECKF(sc->restore(c2, blob.p, blob.n, err, sizeof err) == -1 && strstr(err, "characters"),
           "a crowd of 2: \"%s\"", err);
    sc->destroy(c2);
    sc_blob_free(&blob);
    sc->destroy(a);
    sc->destroy(b);
    sim_backend_destroy(be);
}
