/* scene_session.c: see scene_session.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "tests/harness.h"
#include "tests/server/scene_session.h"

static void no_text(srv_scene_ctx *c, uint32_t client, const char *text)
{
    (void)c, (void)client, (void)text;
}

static void no_frame(srv_scene_ctx *c, uint32_t client, const uint8_t *bytes, size_t len)
{
    (void)c, (void)client, (void)bytes, (void)len;
}

static void on_error(srv_scene_ctx *c, uint32_t client, uint32_t seq, const char *error,
                     const char *detail)
{
    (void)client;
    scene_session *s = c->impl;
    s->errors++;
    s->last_error_seq = seq;
    snprintf(s->last_error, sizeof s->last_error, "%s", detail);
    fprintf(stderr, "event %u refused: %s: %s\n", seq, error, detail);
}

int scene_session_open(scene_session *s, const char *name, const char *opts_json, int threads)
{
    char err[256] = "";
    memset(s, 0, sizeof *s);
    s->sc = srv_scene_find(name);
    cJSON *o = cJSON_Parse(opts_json);
    int st = s->sc && o &&
                     sim_backend_create(&s->be, SIM_BACKEND_CPU, threads, err, sizeof err) == SIM_OK
                 ? s->sc->create(s->be, o, &s->scene, err, sizeof err)
                 : 500;
    cJSON_Delete(o);
    if (st != 201)
        fprintf(stderr, "create %s %s: %s\n", name, opts_json, err);
    s->ctx.backend = s->be;
    s->ctx.threads = threads;
    s->ctx.session_id = "test";
    s->ctx.driver = 1;
    s->ctx.reply_text = no_text;
    s->ctx.reply_frame = no_frame;
    s->ctx.error = on_error;
    s->ctx.impl = s;
    return st == 201;
}

void scene_session_close(scene_session *s)
{
    if (s->scene)
        s->sc->destroy(s->scene);
    sim_backend_destroy(s->be);
    s->scene = NULL, s->be = NULL;
}

int scene_session_send(scene_session *s, const char *json)
{
    _Alignas(8) unsigned char out[SRV_EVENT_MAX];
    proto_envelope env;
    char err[256];
    const char *error = "bad message";
    if (proto_envelope_parse(&env, json, strlen(json), err, sizeof err) != PROTO_OK) {
        CHECKF(0, "%s: %s", json, err);
        return -1;
    }
    int i = srv_scene_event(s->sc, env.type);
    int size = i >= 0 ? s->sc->events[i].parse(env.msg, out, &error, err, sizeof err) : -1;
    CHECKF(size >= 0, "%s: %s", json, err);
    if (size >= 0) {
        srv_event ev = {1, env.seq, out, (size_t)size}; /* from client 1 */
        s->sc->events[i].apply(&s->ctx, s->scene, &ev);
    }
    proto_envelope_free(&env);
    return size >= 0 ? 0 : -1;
}
