/* proto_event.c: client JSON events into validated structs (cJSON).
 *
 * Untrusted input: length-bounded parse, case-sensitive keys, every number checked
 * finite and in range, every string bounded, unknown keys ignored (forward compatible),
 * unknown "type" refused. The message names the offending field. */
#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "proto.h"

static proto_status fail(char *err, size_t err_sz, proto_status st, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static proto_status fail(char *err, size_t err_sz, proto_status st, const char *fmt, ...)
{
    if (err && err_sz) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, err_sz, fmt, ap);
        va_end(ap);
    }
    return st;
}

static const cJSON *field(const cJSON *o, const char *name)
{
    return cJSON_GetObjectItemCaseSensitive(o, name);
}

/* A required finite number in [lo, hi]. */
static int number(const cJSON *o, const char *name, double lo, double hi, double *out, char *err,
                  size_t err_sz)
{
    const cJSON *v = field(o, name);
    if (!v) {
        fail(err, err_sz, PROTO_ERR_CORRUPT, "field \"%s\" is missing", name);
        return 0;
    }
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble)) {
        fail(err, err_sz, PROTO_ERR_CORRUPT, "field \"%s\" must be a finite number", name);
        return 0;
    }
    if (v->valuedouble < lo || v->valuedouble > hi) {
        fail(err, err_sz, PROTO_ERR_CORRUPT, "field \"%s\" = %g: must be in [%g, %g]", name,
             v->valuedouble, lo, hi);
        return 0;
    }
    *out = v->valuedouble;
    return 1;
}

/* An integer field in [lo, hi]. */
static int integer(const cJSON *o, const char *name, int lo, int hi, int32_t *out, char *err,
                   size_t err_sz)
{
    double d;
    if (!number(o, name, lo, hi, &d, err, err_sz))
        return 0;
    if (d != floor(d)) {
        fail(err, err_sz, PROTO_ERR_CORRUPT, "field \"%s\" must be an integer", name);
        return 0;
    }
    *out = (int32_t)d;
    return 1;
}

/* A field of 3 finite numbers within lim. */
static int vec3(const cJSON *o, const char *name, double lim, const char *lim_text, float out[3],
                char *err, size_t err_sz)
{
    const cJSON *p = field(o, name);
    if (!cJSON_IsArray(p) || cJSON_GetArraySize(p) != 3) {
        fail(err, err_sz, PROTO_ERR_CORRUPT, "field \"%s\" must be an array of 3 numbers", name);
        return 0;
    }
    for (int b = 0; b < 3; b++) {
        const cJSON *v = cJSON_GetArrayItem(p, b);
        if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) || fabs(v->valuedouble) > lim) {
            fail(err, err_sz, PROTO_ERR_CORRUPT, "%s[%d] must be a finite number within %s", name,
                 b, lim_text);
            return 0;
        }
        out[b] = (float)v->valuedouble;
    }
    return 1;
}

static int point(const cJSON *o, float out[3], char *err, size_t err_sz)
{
    return vec3(o, "point", 1e7, "1e7", out, err, err_sz);
}

/* Optional "space": "world" (default) or "lattice". */
static int space(const cJSON *o, int *world, char *err, size_t err_sz)
{
    const cJSON *v = field(o, "space");
    *world = 1;
    if (!v)
        return 1;
    if (cJSON_IsString(v) && !strcmp(v->valuestring, "world"))
        return 1;
    if (cJSON_IsString(v) && !strcmp(v->valuestring, "lattice")) {
        *world = 0;
        return 1;
    }
    fail(err, err_sz, PROTO_ERR_CORRUPT, "field \"space\" must be \"world\" or \"lattice\"");
    return 0;
}

/* Flatten the params object into dotted names: {"tissue":{"bone":{"b1":0.5}}} gives
 * "tissue.bone.b1"; arrays give "name.0", "name.1", ... Numbers only. */
static int flatten(proto_event *ev, const cJSON *o, const char *prefix, int depth, char *err,
                   size_t err_sz)
{
    if (depth > 3) {
        fail(err, err_sz, PROTO_ERR_CORRUPT, "params nest deeper than 3 levels at \"%s\"", prefix);
        return 0;
    }
    int i = 0;
    for (const cJSON *c = o->child; c; c = c->next, i++) {
        char name[PROTO_PARAM_NAME];
        int n;
        if (cJSON_IsArray(o))
            n = snprintf(name, sizeof name, "%s%s%d", prefix, *prefix ? "." : "", i);
        else
            n = snprintf(name, sizeof name, "%s%s%s", prefix, *prefix ? "." : "",
                         c->string ? c->string : "");
        if (n < 0 || (size_t)n >= sizeof name) {
            fail(err, err_sz, PROTO_ERR_CORRUPT, "parameter name longer than %d characters",
                 PROTO_PARAM_NAME - 1);
            return 0;
        }
        if (cJSON_IsObject(c) || cJSON_IsArray(c)) {
            if (!flatten(ev, c, name, depth + 1, err, err_sz))
                return 0;
            continue;
        }
        if (!cJSON_IsNumber(c) || !isfinite(c->valuedouble)) {
            fail(err, err_sz, PROTO_ERR_CORRUPT, "parameter \"%s\" must be a finite number", name);
            return 0;
        }
        if (ev->nparams == PROTO_MAX_PARAMS) {
            fail(err, err_sz, PROTO_ERR_LIMIT, "more than %d parameters in one message",
                 PROTO_MAX_PARAMS);
            return 0;
        }
        memcpy(ev->param_name[ev->nparams], name, (size_t)n + 1);
        ev->param_value[ev->nparams] = c->valuedouble;
        ev->nparams++;
    }
    return 1;
}

static const struct {
    const char *name;
    proto_event_type type;
} k_types[] = {
    {"grab", PROTO_EV_GRAB},
    {"move", PROTO_EV_MOVE},
    {"release", PROTO_EV_RELEASE},
    {"set_params", PROTO_EV_SET_PARAMS},
    {"set_condition", PROTO_EV_SET_CONDITION},
    {"slice", PROTO_EV_SLICE},
    {"pause", PROTO_EV_PAUSE},
    {"resume", PROTO_EV_RESUME},
    {"reset", PROTO_EV_RESET},
    {"ping", PROTO_EV_PING},
    {"handover", PROTO_EV_HANDOVER},
    {"request_control", PROTO_EV_REQUEST_CONTROL},
    {"camera", PROTO_EV_CAMERA},
    {"force_lod", PROTO_EV_FORCE_LOD},
    {"motion", PROTO_EV_MOTION},
    {"wind", PROTO_EV_WIND},
};

static proto_status parse_body(proto_event *ev, const cJSON *o, char *err, size_t err_sz)
{
    if (!cJSON_IsObject(o))
        return fail(err, err_sz, PROTO_ERR_CORRUPT, "a message must be a JSON object");
    const cJSON *t = field(o, "type");
    if (!cJSON_IsString(t))
        return fail(err, err_sz, PROTO_ERR_CORRUPT, "field \"type\" must be a string");
    size_t k;
    for (k = 0; k < sizeof k_types / sizeof k_types[0]; k++)
        if (!strcmp(t->valuestring, k_types[k].name))
            break;
    if (k == sizeof k_types / sizeof k_types[0]) {
        char shown[40];
        size_t j = 0;
        for (const char *c = t->valuestring; *c && j + 1 < sizeof shown; c++)
            shown[j++] = isprint((unsigned char)*c) ? *c : '?';
        shown[j] = 0;
        return fail(err, err_sz, PROTO_ERR_KIND, "unknown message type \"%s\"", shown);
    }
    ev->type = k_types[k].type;
    double d;
    if (!number(o, "seq", 0, 4294967295.0, &d, err, err_sz))
        return PROTO_ERR_CORRUPT;
    if (d != floor(d))
        return fail(err, err_sz, PROTO_ERR_CORRUPT, "field \"seq\" must be an integer");
    ev->seq = (uint32_t)d;
    ev->character = -1;
    ev->vertex = -1;
    ev->lod = -1;
    switch (ev->type) {
    case PROTO_EV_GRAB:
        if (field(o, "vertex")) { /* cloth: a garment vertex of one character */
            if (!integer(o, "character", 0, 9999, &ev->character, err, err_sz) ||
                !integer(o, "vertex", 0, 1 << 20, &ev->vertex, err, err_sz) ||
                !point(o, ev->point, err, err_sz))
                return PROTO_ERR_CORRUPT;
            ev->world = 1;
            break;
        }
        if (!number(o, "radius", 1e-6, 1e4, &d, err, err_sz))
            return PROTO_ERR_CORRUPT;
        ev->radius = (float)d;
        /* fall through */
    case PROTO_EV_MOVE:
        if (!point(o, ev->point, err, err_sz) || !space(o, &ev->world, err, err_sz))
            return PROTO_ERR_CORRUPT;
        break;
    case PROTO_EV_SET_PARAMS: {
        const cJSON *p = field(o, "params");
        if (!cJSON_IsObject(p))
            return fail(err, err_sz, PROTO_ERR_CORRUPT, "field \"params\" must be an object");
        if (!flatten(ev, p, "", 0, err, err_sz))
            return ev->nparams == PROTO_MAX_PARAMS ? PROTO_ERR_LIMIT : PROTO_ERR_CORRUPT;
        break;
    }
    case PROTO_EV_SET_CONDITION: {
        const cJSON *c = field(o, "condition");
        if (!cJSON_IsString(c) || strlen(c->valuestring) != 1 || c->valuestring[0] < 'A' ||
            c->valuestring[0] > 'C')
            return fail(err, err_sz, PROTO_ERR_CORRUPT,
                        "field \"condition\" must be \"A\", \"B\" or \"C\"");
        ev->condition = c->valuestring[0];
        break;
    }
    case PROTO_EV_SLICE: {
        static const char *const planes[3] = {"axial", "coronal", "sagittal"};
        const cJSON *pl = field(o, "plane");
        int found = -1;
        for (int i = 0; i < 3 && cJSON_IsString(pl); i++)
            if (!strcmp(pl->valuestring, planes[i]))
                found = i;
        if (found < 0)
            return fail(err, err_sz, PROTO_ERR_CORRUPT,
                        "field \"plane\" must be \"axial\", \"coronal\" or \"sagittal\"");
        ev->plane = (uint8_t)found;
        if (!number(o, "index", 0, 65535, &d, err, err_sz))
            return PROTO_ERR_CORRUPT;
        if (d != floor(d))
            return fail(err, err_sz, PROTO_ERR_CORRUPT, "field \"index\" must be an integer");
        ev->index = (int32_t)d;
        if (!number(o, "level", -4000, 40000, &d, err, err_sz))
            return PROTO_ERR_CORRUPT;
        ev->level_hu = (float)d;
        if (!number(o, "width", 1, 40000, &d, err, err_sz))
            return PROTO_ERR_CORRUPT;
        ev->width_hu = (float)d;
        break;
    }
    case PROTO_EV_PING:
        if (!number(o, "t", -1e15, 1e15, &ev->client_time_ms, err, err_sz))
            return PROTO_ERR_CORRUPT;
        break;
    case PROTO_EV_CAMERA:
        if (!point(o, ev->point, err, err_sz))
            return PROTO_ERR_CORRUPT;
        break;
    case PROTO_EV_WIND: /* m/s added to every cloth particle */
        if (!vec3(o, "impulse", 100, "100", ev->point, err, err_sz))
            return PROTO_ERR_CORRUPT;
        break;
    case PROTO_EV_FORCE_LOD:
        if (!integer(o, "character", -1, 9999, &ev->character, err, err_sz) ||
            !integer(o, "lod", -1, 15, &ev->lod, err, err_sz))
            return PROTO_ERR_CORRUPT;
        break;
    case PROTO_EV_MOTION: {
        const cJSON *mo = field(o, "motion");
        if (!integer(o, "character", -1, 9999, &ev->character, err, err_sz))
            return PROTO_ERR_CORRUPT;
        if (!cJSON_IsString(mo) || !*mo->valuestring ||
            strlen(mo->valuestring) >= sizeof ev->motion)
            return fail(err, err_sz, PROTO_ERR_CORRUPT, "field \"motion\" must be a motion name");
        strcpy(ev->motion, mo->valuestring);
        break;
    }
    case PROTO_EV_HANDOVER: {
        const cJSON *to = field(o, "to");
        if (!cJSON_IsString(to) || !*to->valuestring ||
            strlen(to->valuestring) >= sizeof ev->target)
            return fail(err, err_sz, PROTO_ERR_CORRUPT,
                        "field \"to\" must be a client id of 1 to %zu characters",
                        sizeof ev->target - 1);
        strcpy(ev->target, to->valuestring);
        break;
    }
    case PROTO_EV_RELEASE:
    case PROTO_EV_PAUSE:
    case PROTO_EV_RESUME:
    case PROTO_EV_RESET:
    case PROTO_EV_REQUEST_CONTROL:
        break;
    }
    return PROTO_OK;
}

proto_status proto_parse_event(proto_event *ev, const char *json, size_t len, char *err,
                               size_t err_sz)
{
    memset(ev, 0, sizeof *ev);
    if (err && err_sz)
        err[0] = 0;
    if (!json || len == 0)
        return fail(err, err_sz, PROTO_ERR_CORRUPT, "empty message");
    const char *end = NULL;
    cJSON *o = cJSON_ParseWithLengthOpts(json, len, &end, 0);
    if (!o) {
        size_t at = end ? (size_t)(end - json) : 0;
        return fail(err, err_sz, PROTO_ERR_CORRUPT, "malformed JSON near byte %zu", at);
    }
    /* Nothing but white space may follow the object. */
    for (const char *p = end; p && p < json + len; p++)
        if (!isspace((unsigned char)*p) && *p) {
            cJSON_Delete(o);
            return fail(err, err_sz, PROTO_ERR_CORRUPT, "trailing bytes after the JSON object");
        }
    proto_status st = parse_body(ev, o, err, err_sz);
    cJSON_Delete(o);
    if (st != PROTO_OK) {
        proto_event_type t = ev->type;
        memset(ev, 0, sizeof *ev);
        ev->type = t;
    }
    return st;
}
