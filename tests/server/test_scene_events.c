/* test_scene_events.c: the server's pieces that need no sockets: each scene's event
 * parsers (what a client message becomes in the inbox, and how big), parameters set by
 * index or by a choice's name, the one error message builder (escaping, UTF-8), and the
 * inbox (sizes, capacity, what a take applies now and what waits for resume). The
 * adapters see only scene.h, so they link here without libwebsockets or libmicrohttpd. */
#include <stdio.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "server/scene.h"
#include "sim/cloth/cloth.h"
#include "sim/volume/volume.h"
#include "tests/harness.h"

/* Parse json as scene's event: the payload size, or -1 with error and err. */
static int parse(const char *scene, const char *json, void *out, const char **error, char *err)
{
    proto_envelope env;
    if (proto_envelope_parse(&env, json, strlen(json), err, 256) != PROTO_OK)
        return -2;
    const srv_scene_i *sc = srv_scene_find(scene);
    int i = srv_scene_event(sc, env.type), size = -3;
    *error = "bad message";
    if (i >= 0)
        size = sc->events[i].parse(env.msg, out, error, err, 256);
    proto_envelope_free(&env);
    return size;
}

TEST(scene_registry_from_scenes_def)
{
    int n;
    const srv_scene_i *const *sc = srv_scenes(&n);
    CHECK(n == 4 && !strcmp(srv_scene_names(), "volume, cloth, softbody, growth"));
    CHECK(srv_scene_default() == sc[0] && srv_scene_find("cloth") == sc[1] &&
          srv_scene_find("softbody") == sc[2] && srv_scene_find("growth") == sc[3]);
    CHECK(srv_scene_find("Cloth") == NULL && srv_scene_find(NULL) == NULL);
    for (int k = 0; k < n; k++)
        for (int i = 0; i < sc[k]->nevents; i++) /* the server's own names stay its own */
            CHECK(strcmp(sc[k]->events[i].name, "pause") && strcmp(sc[k]->events[i].name, "ping"));
}

TEST(scene_events_parse_into_small_payloads)
{
    _Alignas(8) unsigned char out[SRV_EVENT_MAX];
    const char *error;
    char err[256];
    static const struct {
        const char *scene, *json;
    } ok[] = {
        {"volume", "{\"type\":\"grab\",\"seq\":1,\"point\":[1,2.5,-3],\"radius\":4}"},
        {"volume", "{\"type\":\"move\",\"seq\":2,\"point\":[0,0,9],\"space\":\"lattice\"}"},
        {"volume", "{\"type\":\"release\",\"seq\":3}"},
        {"volume", "{\"type\":\"reset\",\"seq\":3}"},
        {"volume", "{\"type\":\"set_condition\",\"seq\":5,\"condition\":\"B\"}"},
        {"volume", "{\"type\":\"slice\",\"seq\":6,\"plane\":\"sagittal\",\"index\":12,"
                   "\"level\":40,\"width\":400}"},
        {"cloth", "{\"type\":\"grab\",\"seq\":10,\"character\":2,\"vertex\":33,"
                  "\"point\":[0.1,0.2,1.3]}"},
        {"cloth", "{\"type\":\"camera\",\"seq\":11,\"point\":[6,2,1.7]}"},
        {"cloth", "{\"type\":\"force_lod\",\"seq\":12,\"character\":-1,\"lod\":2}"},
        {"cloth", "{\"type\":\"motion\",\"seq\":13,\"character\":0,\"motion\":\"run\"}"},
        {"cloth", "{\"type\":\"wind\",\"seq\":14,\"impulse\":[-3,0,1.5]}"},
        {"cloth", "{\"type\":\"move\",\"seq\":15,\"point\":[0,0,1]}"},
        {"cloth", "{\"type\":\"set_params\",\"seq\":16,\"params\":{\"substeps\":12}}"},
        {"softbody", "{\"type\":\"grab\",\"seq\":20,\"point\":[0,0.01,0.07]}"},
        {"softbody", "{\"type\":\"move\",\"seq\":21,\"point\":[0,0,0.1],\"space\":\"world\"}"},
        {"softbody", "{\"type\":\"tray\",\"seq\":22,\"pos\":[0.1,0,0],\"quat\":[0.8,0.6,0,0]}"},
        {"softbody", "{\"type\":\"add_plane\",\"seq\":23,\"n\":[0,0,-2],\"d\":-0.1,"
                     "\"attached\":true}"},
        {"softbody", "{\"type\":\"remove_plane\",\"seq\":24,\"id\":6}"},
        {"softbody", "{\"type\":\"set_params\",\"seq\":25,\"params\":{\"friction\":0.2}}"},
    };
    for (size_t k = 0; k < sizeof ok / sizeof ok[0]; k++) {
        int size = parse(ok[k].scene, ok[k].json, out, &error, err);
        CHECKF(size >= 0, "%s: %s", ok[k].json, err);
        /* An event in the inbox costs what it carries: these all fit 64 bytes with the
         * item's header (a 3.7 KB union each before). */
        CHECKF(SRV_ITEM_BYTES(size) <= 64, "%s: %zu bytes in the inbox", ok[k].json,
               SRV_ITEM_BYTES(size));
    }
    th_note("inbox item: header %zu B; move %zu B, grab %zu B, set_params of 1 value %zu B, of "
            "64 values %zu B",
            sizeof(srv_item), SRV_ITEM_BYTES(parse("volume", ok[1].json, out, &error, err)),
            SRV_ITEM_BYTES(parse("volume", ok[0].json, out, &error, err)),
            SRV_ITEM_BYTES(SRV_PARAM_SET_BYTES(1)), SRV_ITEM_BYTES(SRV_PARAM_SET_BYTES(64)));
    CHECK(SRV_PARAM_SET_BYTES(PROTO_MAX_PARAMS) <= SRV_EVENT_MAX);
}

TEST(scene_events_refuse_bad_payloads_with_reasons)
{
    _Alignas(8) unsigned char out[SRV_EVENT_MAX];
    static const struct {
        const char *scene, *json, *error, *want;
    } bad[] = {
        {"volume", "{\"type\":\"grab\",\"seq\":1,\"point\":[1,2],\"radius\":1}", "bad message",
         "point"},
        {"volume", "{\"type\":\"grab\",\"seq\":1,\"point\":[1,2,1e999],\"radius\":1}",
         "bad message", "point[2]"},
        {"volume", "{\"type\":\"grab\",\"seq\":1,\"point\":[1,2,3]}", "bad message",
         "\"radius\" is missing"},
        {"volume", "{\"type\":\"grab\",\"seq\":1,\"point\":[1,2,3],\"radius\":\"big\"}",
         "bad message", "finite number"},
        {"volume", "{\"type\":\"grab\",\"seq\":1,\"vertex\":3,\"point\":[1,2,3]}",
         "not in this scene", "not by vertex"},
        {"volume", "{\"type\":\"move\",\"seq\":1,\"point\":[1,2,3],\"space\":\"mars\"}",
         "bad message", "\"space\""},
        {"volume", "{\"type\":\"set_condition\",\"seq\":1,\"condition\":\"D\"}", "bad parameter",
         "one of A|B|C"},
        {"volume", "{\"type\":\"set_params\",\"seq\":1,\"params\":{\"alpha\":true}}", "bad message",
         "\"alpha\""},
        {"volume", "{\"type\":\"set_params\",\"seq\":1,\"params\":{\"alpha\":7}}", "bad parameter",
         "alpha = 7: must be in [0, 1]"},
        {"volume", "{\"type\":\"set_params\",\"seq\":1,\"params\":{\"no_such_knob\":1}}",
         "bad parameter", "no parameter \"no_such_knob\""},
        {"volume", "{\"type\":\"set_params\",\"seq\":1,\"params\":{\"alpha\":\"high\"}}",
         "bad parameter", "must be a number"},
        {"volume",
         "{\"type\":\"slice\",\"seq\":1,\"plane\":\"top\",\"index\":1,\"level\":0,"
         "\"width\":1}",
         "bad message", "\"plane\""},
        {"volume",
         "{\"type\":\"slice\",\"seq\":1,\"plane\":\"axial\",\"index\":1,\"level\":0,"
         "\"width\":0}",
         "bad message", "\"width\""},
        {"cloth", "{\"type\":\"wind\",\"seq\":15,\"impulse\":[300,0,0]}", "bad message",
         "impulse[0]"},
        {"cloth", "{\"type\":\"force_lod\",\"seq\":16,\"character\":0,\"lod\":1.5}", "bad message",
         "\"lod\" must be an integer"},
        {"cloth", "{\"type\":\"grab\",\"seq\":17,\"vertex\":3,\"point\":[0,0,0]}", "bad message",
         "character"},
        {"cloth", "{\"type\":\"grab\",\"seq\":9,\"point\":[0,0,1],\"radius\":3}",
         "not in this scene", "character and vertex"},
        {"cloth", "{\"type\":\"motion\",\"seq\":8,\"character\":0,\"motion\":\"moonwalk\"}",
         "bad message", "motion must be idle, walk, run, turn or jump"},
        {"cloth", "{\"type\":\"set_params\",\"seq\":1,\"params\":{\"dt\":0.01}}", "bad parameter",
         "no parameter \"dt\""}, /* internal: not a client's to set */
        {"softbody", "{\"type\":\"tray\",\"seq\":1,\"pos\":[0,0,0],\"quat\":[1,1,0,0]}",
         "bad message", "unit quaternion"},
        {"softbody", "{\"type\":\"tray\",\"seq\":1,\"pos\":[0,0,2],\"quat\":[1,0,0,0]}",
         "bad message", "pos[2]"},
        {"softbody", "{\"type\":\"tray\",\"seq\":1,\"pos\":[0,0,0],\"quat\":[1,0,0,1e999]}",
         "bad message", "\"quat\""},
        {"softbody", "{\"type\":\"add_plane\",\"seq\":1,\"n\":[0,0,0],\"d\":0}", "bad message",
         "\"n\" must not be zero"},
        {"softbody", "{\"type\":\"add_plane\",\"seq\":1,\"n\":[0,0,1],\"d\":0,\"attached\":1}",
         "bad message", "\"attached\""},
        {"softbody", "{\"type\":\"remove_plane\",\"seq\":1,\"id\":0}", "bad message", "\"id\""},
        {"softbody", "{\"type\":\"grab\",\"seq\":1,\"vertex\":3,\"point\":[0,0,0]}",
         "not in this scene", "not by vertex"},
        {"softbody", "{\"type\":\"move\",\"seq\":1,\"point\":[0,0,0],\"space\":\"lattice\"}",
         "bad message", "\"space\""},
        {"softbody", "{\"type\":\"set_params\",\"seq\":1,\"params\":{\"friction\":99}}",
         "bad parameter", "friction"},
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        const char *error;
        char err[256] = "";
        int size = parse(bad[k].scene, bad[k].json, out, &error, err);
        CHECKF(size == -1, "%s: size %d", bad[k].json, size);
        CHECKF(!strcmp(error, bad[k].error), "%s: error \"%s\", want \"%s\"", bad[k].json, error,
               bad[k].error);
        CHECKF(strstr(err, bad[k].want) != NULL, "%s: detail \"%s\" lacks \"%s\"", bad[k].json, err,
               bad[k].want);
    }
}

TEST(scene_params_by_index_or_by_choice_name)
{
    _Alignas(8) unsigned char out[SRV_EVENT_MAX];
    const char *error;
    char err[256];
    int n;
    /* A choice by its name, or by its index, with a number beside it. */
    int size = parse("volume",
                     "{\"type\":\"set_params\",\"seq\":1,\"params\":{\"condition\":\"B\","
                     "\"tissue\":{\"bone\":{\"b1\":0.25}}}}",
                     out, &error, err);
    REQUIRE(size == (int)SRV_PARAM_SET_BYTES(2));
    const sim_param_desc *vt = sim_volume_params_table(&n);
    sim_volume_params vp = sim_default_volume_params();
    srv_params_apply(vt, n, (const srv_param_set *)out, &vp);
    CHECK(vp.condition == SIM_CONDITION_B && vp.tissue[SIM_TISSUE_BONE].b1 == 0.25f);
    REQUIRE(parse("volume", "{\"type\":\"set_params\",\"seq\":1,\"params\":{\"condition\":0}}", out,
                  &error, err) > 0);
    srv_params_apply(vt, n, (const srv_param_set *)out, &vp);
    CHECK(vp.condition == SIM_CONDITION_A && vp.tissue[SIM_TISSUE_BONE].b1 == 0.25f);
    /* The cloth's strategy by name; a wrong name lists the choices. */
    REQUIRE(parse("cloth",
                  "{\"type\":\"set_params\",\"seq\":1,\"params\":{\"strategy\":\"naive_copy\"}}",
                  out, &error, err) > 0);
    const sim_param_desc *ct = sim_cloth_params_table(&n);
    sim_cloth_params cp = sim_cloth_default_params();
    srv_params_apply(ct, n, (const srv_param_set *)out, &cp);
    CHECK(cp.strategy == SIM_SWITCH_NAIVE_COPY);
    CHECK(parse("cloth", "{\"type\":\"set_params\",\"seq\":1,\"params\":{\"strategy\":\"fast\"}}",
                out, &error, err) == -1 &&
          !strcmp(error, "bad parameter") && strstr(err, "one of handoff|"));
    /* The state message names choices the same way. */
    char *json = srv_params_json(ct, n, &cp);
    CHECK(json && strstr(json, "\"strategy\":\"naive_copy\""));
    cJSON_free(json);
}

TEST(error_json_escapes_and_stays_utf8)
{
    char out[1536];
    /* A quote, a backslash and a control character from a client are escaped. */
    srv_error_json(out, sizeof out, 7, "bad parameter", "no \"a\\b\n\" here");
    CHECK(!strcmp(out, "{\"type\":\"error\",\"seq\":7,\"error\":\"bad parameter\","
                       "\"detail\":\"no \\\"a\\\\b\\u000a\\\" here\"}"));
    /* Valid UTF-8 passes; bytes that are not become U+FFFD, one each. */
    srv_error_json(out, sizeof out, -1, "not found",
                   "caf\xc3\xa9 \xf0\x9f\x98\x80 \xff\xc3(\xed\xa0\x80");
    CHECK(!strcmp(out, "{\"error\":\"not found\",\"detail\":\"caf\xc3\xa9 \xf0\x9f\x98\x80 "
                       "\xef\xbf\xbd\xef\xbf\xbd(\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\"}"));
    cJSON *j = cJSON_Parse(out);
    CHECK(cJSON_IsObject(j));
    cJSON_Delete(j);
    /* Cut between characters when it does not fit, and still valid JSON. */
    char big[4000];
    for (size_t i = 0; i + 2 < sizeof big; i += 2)
        big[i] = '\xc3', big[i + 1] = '\xa9';
    big[sizeof big - 2] = 0;
    size_t n = srv_error_json(out, sizeof out, 1, "bad message", big);
    CHECK(n < sizeof out && out[n - 1] == '}' && out[n - 2] == '"' && out[n - 4] == '\xc3');
    j = cJSON_Parse(out);
    CHECK(cJSON_IsObject(j));
    cJSON_Delete(j);
}

/* An item of kind with size payload bytes (filled with seq). */
static int push(srv_inbox *ib, int kind, unsigned flags, uint32_t seq, uint16_t size)
{
    unsigned char payload[64];
    memset(payload, (int)(seq & 0xff), sizeof payload);
    srv_item h;
    memset(&h, 0, sizeof h);
    h.kind = (uint8_t)kind;
    h.flags = (uint8_t)flags;
    h.seq = seq;
    h.size = size;
    return srv_inbox_push(ib, &h, payload);
}

/* The seqs of a take, in order, into seqs; checks each payload. Returns the count. */
static int take(srv_inbox *ib, int paused, uint32_t *seqs)
{
    static _Alignas(8) unsigned char out[SRV_INBOX_BYTES];
    int n;
    size_t bytes = srv_inbox_take(ib, paused, out, &n), at = 0;
    for (int i = 0; i < n; i++) {
        srv_item h;
        memcpy(&h, out + at, sizeof h);
        seqs[i] = h.seq;
        for (int b = 0; b < h.size; b++)
            CHECK(out[at + sizeof h + (size_t)b] == (unsigned char)(h.seq & 0xff));
        at += SRV_ITEM_BYTES(h.size);
    }
    CHECK(at == bytes);
    return n;
}

TEST(inbox_holds_what_items_carry)
{
    static srv_inbox ib;
    memset(&ib, 0, sizeof ib);
    uint32_t seqs[512];
    /* 16-byte payloads (a move): 40 bytes each, 396 of them in 16 KB less the room kept
     * for pause and resume; a full inbox still takes a resume. */
    int n = 0;
    while (push(&ib, SRV_ITEM_SCENE, 0, (uint32_t)n, 16) == 0)
        n++;
    CHECK(n == (int)((SRV_INBOX_BYTES - SRV_INBOX_CONTROL) / 40) && n == 396);
    CHECK(ib.used == (uint32_t)n * 40 && ib.peak == ib.used);
    CHECK(push(&ib, SRV_ITEM_RESUME, 0, (uint32_t)n, 0) == 0);
    n++;
    CHECK(take(&ib, 0, seqs) == n && seqs[0] == 0 && seqs[n - 1] == (uint32_t)n - 1);
    CHECK(ib.used == 0 && ib.count == 0);
    /* Many rounds of odd sizes wrap round the ring and come out whole and in order. */
    uint32_t seq = 1000;
    for (int round = 0; round < 200; round++) {
        int k = 1 + round % 7;
        for (int i = 0; i < k; i++)
            CHECK(push(&ib, SRV_ITEM_SCENE, 0, seq + (uint32_t)i, (uint16_t)(round * 13 % 61)) ==
                  0);
        CHECK(take(&ib, 0, seqs) == k);
        for (int i = 0; i < k; i++)
            CHECK(seqs[i] == seq + (uint32_t)i);
        seq += (uint32_t)k;
    }
    th_note("sizeof(srv_session) %zu B (inbox %u B); before: 963240 B (256 x 3760 B items)",
            sizeof(srv_session), SRV_INBOX_BYTES);
    CHECK(sizeof(srv_session) < 32 * 1024);
}

TEST(inbox_take_holds_events_while_paused)
{
    static srv_inbox ib;
    memset(&ib, 0, sizeof ib);
    uint32_t s[64];
    enum { P = SRV_ITEM_PAUSE, R = SRV_ITEM_RESUME, E = SRV_ITEM_SCENE };
    /* Unpaused, a change then a pause: the change is stepped first, the pause next time. */
    push(&ib, E, 0, 1, 16), push(&ib, P, 0, 2, 0), push(&ib, E, 0, 3, 16);
    CHECK(take(&ib, 0, s) == 1 && s[0] == 1 && ib.held == 0);
    CHECK(take(&ib, 0, s) == 1 && s[0] == 2); /* now paused: event 3 waits */
    CHECK(ib.count == 1 && ib.held == 1);
    /* Paused: a query and an unpaused event are taken past the waiting one. */
    push(&ib, E, SRV_EV_QUERY, 4, 16), push(&ib, E, 0, 5, 16), push(&ib, E, SRV_EV_UNPAUSED, 6, 12);
    CHECK(take(&ib, 1, s) == 2 && s[0] == 4 && s[1] == 6);
    CHECK(ib.count == 2 && ib.held == 2);
    /* A resume takes what waited, in order, and what follows. */
    push(&ib, R, 0, 7, 0), push(&ib, E, 0, 8, 16);
    CHECK(take(&ib, 1, s) == 4 && s[0] == 3 && s[1] == 5 && s[2] == 7 && s[3] == 8);
    CHECK(ib.count == 0);
    /* Paused, then resume and pause again in one take: what came before the resume goes,
     * what came after the second pause waits. */
    push(&ib, E, 0, 9, 16), push(&ib, R, 0, 10, 0), push(&ib, E, 0, 11, 16);
    push(&ib, P, 0, 12, 0), push(&ib, E, 0, 13, 16);
    CHECK(take(&ib, 1, s) == 3 && s[0] == 9 && s[1] == 10 && s[2] == 11); /* cut at the pause */
    CHECK(take(&ib, 0, s) == 1 && s[0] == 12);
    CHECK(ib.count == 1 && take(&ib, 1, s) == 0);
}
