/* scene.c: the registry of scene kinds (from scenes.def), and what scenes share: their
 * parameter tables turned into set_params payloads, state JSON and the schema. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "scene.h"

static const srv_scene_i *const k_scenes[] = {
#define X(name) &srv_scene_##name,
#include "scenes.def"
#undef X
};
#define NSCENES ((int)(sizeof k_scenes / sizeof k_scenes[0]))

/* ", volume, cloth": the names after the first two bytes. */
static const char k_names[] =
#define X(name) ", " #name
#include "scenes.def"
#undef X
    ;

const srv_scene_i *srv_scene_find(const char *name)
{
    for (int i = 0; name && i < NSCENES; i++)
        if (!strcmp(name, k_scenes[i]->name))
            return k_scenes[i];
    return NULL;
}

const srv_scene_i *srv_scene_default(void)
{
    return k_scenes[0];
}

const char *srv_scene_names(void)
{
    return k_names + 2;
}

const srv_scene_i *const *srv_scenes(int *n)
{
    *n = NSCENES;
    return k_scenes;
}

int srv_scene_event(const srv_scene_i *sc, const char *type)
{
    for (int i = 0; type && i < sc->nevents; i++)
        if (!strcmp(type, sc->events[i].name))
            return i;
    return -1;
}

int srv_create_fields(const cJSON *opts, const char *scene, const char *const *known, char *err,
                      size_t err_sz)
{
    if (opts && !cJSON_IsObject(opts)) {
        snprintf(err, err_sz, "the options must be a JSON object");
        return 400;
    }
    const cJSON *f;
    cJSON_ArrayForEach(f, opts)
    {
        int ok = !strcmp(f->string, "scene");
        for (int k = 0; known[k] && !ok; k++)
            ok = !strcmp(f->string, known[k]);
        if (ok)
            continue;
        /* Every field it takes, "scene" first: a misspelt "scene" is told what it missed. */
        char takes[200] = "scene";
        size_t at = strlen(takes);
        for (int k = 0; known[k] && at < sizeof takes; k++)
            at += (size_t)snprintf(takes + at, sizeof takes - at, "%s%s",
                                   known[k + 1] ? ", " : " and ", known[k]);
        snprintf(err, err_sz, "unknown field \"%s\": a %s session's body takes %s", f->string,
                 scene, takes);
        return 400;
    }
    return 201;
}

int srv_json_int_in(const cJSON *v, double lo, double hi)
{
    return cJSON_IsNumber(v) && v->valuedouble == floor(v->valuedouble) && v->valuedouble >= lo &&
           v->valuedouble <= hi;
}

int srv_option_string(const char *name, const char *val, char *dst, size_t cap, char *err,
                      size_t err_sz)
{
    if (strlen(val) >= cap) {
        snprintf(err, err_sz, "--%s: longer than %zu characters", name, cap - 1);
        return -1;
    }
    strcpy(dst, val);
    return 1;
}

/* ------------------------------------------------------------- parameters */

typedef struct parse_ctx {
    const sim_param_desc *t;
    int n;
    srv_param_set *out;
} parse_ctx;

/* Check one value against the table the way sim_param_set does, on a scratch struct, so
 * the range message is the sim's own. A choice may come by name. */
static int add_param(void *arg, const char *name, double number, const char *text, char *err,
                     size_t err_sz)
{
    parse_ctx *p = arg;
    const sim_param_desc *d = sim_param_find(p->t, p->n, name);
    if (!d || d->internal) {
        snprintf(err, err_sz, "no parameter \"%s\" in this scene (its state message lists them)",
                 name);
        return -1;
    }
    if (text) {
        int k = sim_param_choice(d, text);
        if (k < 0) {
            snprintf(err, err_sz, "%s = \"%s\": must be %s%s", name, text,
                     d->type == SIM_PARAM_CHOICE ? "one of " : "a number",
                     d->type == SIM_PARAM_CHOICE ? d->choices : "");
            return -1;
        }
        number = k;
    }
    _Alignas(8) unsigned char scratch[64];
    sim_param_desc at0 = *d;
    at0.offset = 0; /* any struct: only the check matters here */
    if (sim_param_set(&at0, scratch, number, err, err_sz) != SIM_OK)
        return -1;
    srv_param_set *o = p->out;
    o->v[o->n].value = number;
    o->v[o->n].index = (uint32_t)(d - p->t);
    o->v[o->n].reserved = 0;
    o->n++;
    return 0;
}

int srv_params_parse(const sim_param_desc *t, int n, const cJSON *msg, srv_param_set *out,
                     const char **error, char *err, size_t err_sz)
{
    parse_ctx p = {t, n, out};
    out->n = out->reserved = 0;
    proto_status st = proto_read_params(msg, add_param, &p, err, err_sz);
    if (st == PROTO_ERR_ARG)
        *error = "bad parameter";
    return st == PROTO_OK ? (int)SRV_PARAM_SET_BYTES(out->n) : -1;
}

int srv_param_parse_one(const sim_param_desc *t, int n, const char *name, const cJSON *value,
                        srv_param_set *out, const char **error, char *err, size_t err_sz)
{
    parse_ctx p = {t, n, out};
    out->n = out->reserved = 0;
    int text = cJSON_IsString(value);
    if (!text && (!cJSON_IsNumber(value) || !isfinite(value->valuedouble))) {
        snprintf(err, err_sz, "field \"%s\" is missing or not a number or a name", name);
        return -1;
    }
    if (add_param(&p, name, text ? 0.0 : value->valuedouble, text ? value->valuestring : NULL, err,
                  err_sz) != 0) {
        *error = "bad parameter";
        return -1;
    }
    return (int)SRV_PARAM_SET_BYTES(out->n);
}

void srv_params_apply(const sim_param_desc *t, int n, const srv_param_set *ps, void *params)
{
    /* Checked again here: a replayed recording's payloads come from a file, not a parse. */
    uint32_t count = ps->n < PROTO_MAX_PARAMS ? ps->n : PROTO_MAX_PARAMS;
    for (uint32_t i = 0; i < count; i++) {
        uint32_t k = ps->v[i].index;
        if (k < (uint32_t)n && !t[k].internal) /* the range: sim_param_set's */
            (void)sim_param_set(&t[k], params, ps->v[i].value, NULL, 0);
    }
}

char *srv_params_json(const sim_param_desc *t, int n, const void *params)
{
    cJSON *o = cJSON_CreateObject();
    for (int i = 0; o && i < n; i++) {
        if (t[i].internal)
            continue;
        double v = sim_param_get(&t[i], params);
        if (t[i].type == SIM_PARAM_CHOICE) {
            char name[64];
            sim_param_choice_name(&t[i], (int)v, name, sizeof name);
            cJSON_AddStringToObject(o, t[i].name, name);
        } else {
            cJSON_AddNumberToObject(o, t[i].name, v);
        }
    }
    char *text = o ? cJSON_PrintUnformatted(o) : NULL;
    cJSON_Delete(o);
    return text;
}

static const char *type_name(sim_param_type t)
{
    return t == SIM_PARAM_INT ? "int" : t == SIM_PARAM_CHOICE ? "choice" : "float";
}

cJSON *srv_params_schema(const sim_param_desc *t, int n)
{
    cJSON *a = cJSON_CreateArray();
    for (int i = 0; a && i < n; i++) {
        if (t[i].internal)
            continue;
        cJSON *o = cJSON_CreateObject();
        if (!o)
            break;
        cJSON_AddStringToObject(o, "name", t[i].name);
        cJSON_AddStringToObject(o, "type", type_name(t[i].type));
        cJSON_AddNumberToObject(o, "min", t[i].min);
        cJSON_AddNumberToObject(o, "max", t[i].max);
        cJSON_AddNumberToObject(o, "default", t[i].def);
        cJSON_AddStringToObject(o, "unit", t[i].unit);
        cJSON_AddStringToObject(o, "group", t[i].group);
        cJSON_AddStringToObject(o, "doc", t[i].doc);
        if (t[i].type == SIM_PARAM_CHOICE) {
            cJSON *c = cJSON_AddArrayToObject(o, "choices");
            for (int k = 0; c && k <= (int)t[i].max; k++) {
                char name[64];
                sim_param_choice_name(&t[i], k, name, sizeof name);
                cJSON_AddItemToArray(c, cJSON_CreateString(name));
            }
        }
        cJSON_AddItemToArray(a, o);
    }
    return a;
}

int srv_parse_no_payload(const cJSON *msg, void *out, const char **error, char *err, size_t err_sz)
{
    (void)msg, (void)out, (void)error, (void)err, (void)err_sz;
    return 0;
}
