/* proto_event.c: the envelope of client JSON messages and the readers their owners parse
 * payloads with (cJSON). See proto_event.h.
 *
 * Untrusted input: length-bounded parse, case-sensitive keys, every number checked finite
 * and in range, every string bounded, unknown keys ignored (forward compatible). Each
 * message names the offending field; field names come from the caller, never from the
 * client, except parameter names, which the server's error helper escapes. */
#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "proto_event.h"

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

proto_status proto_read_number(const cJSON *o, const char *name, double lo, double hi, double *out,
                               char *err, size_t err_sz)
{
    const cJSON *v = field(o, name);
    if (!v)
        return fail(err, err_sz, PROTO_ERR_CORRUPT, "field \"%s\" is missing", name);
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble))
        return fail(err, err_sz, PROTO_ERR_CORRUPT, "field \"%s\" must be a finite number", name);
    if (v->valuedouble < lo || v->valuedouble > hi)
        return fail(err, err_sz, PROTO_ERR_CORRUPT,
                    "field \"%s\" = %.10g: must be in [%.10g, %.10g]", name, v->valuedouble, lo,
                    hi);
    *out = v->valuedouble;
    return PROTO_OK;
}

proto_status proto_read_int(const cJSON *o, const char *name, int32_t lo, int32_t hi, int32_t *out,
                            char *err, size_t err_sz)
{
    double d;
    proto_status st = proto_read_number(o, name, lo, hi, &d, err, err_sz);
    if (st != PROTO_OK)
        return st;
    if (d != floor(d))
        return fail(err, err_sz, PROTO_ERR_CORRUPT, "field \"%s\" must be an integer", name);
    *out = (int32_t)d;
    return PROTO_OK;
}

proto_status proto_read_vec3(const cJSON *o, const char *name, double lim, float out[3], char *err,
                             size_t err_sz)
{
    const cJSON *p = field(o, name);
    if (!cJSON_IsArray(p) || cJSON_GetArraySize(p) != 3)
        return fail(err, err_sz, PROTO_ERR_CORRUPT, "field \"%s\" must be an array of 3 numbers",
                    name);
    for (int b = 0; b < 3; b++) {
        const cJSON *v = cJSON_GetArrayItem(p, b);
        if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) || fabs(v->valuedouble) > lim) {
            int e = (int)lrint(log10(lim));
            char lt[32]; /* 1e7 rather than 1e+07 */
            if (e >= 4 && pow(10.0, e) == lim)
                snprintf(lt, sizeof lt, "1e%d", e);
            else
                snprintf(lt, sizeof lt, "%g", lim);
            return fail(err, err_sz, PROTO_ERR_CORRUPT, "%s[%d] must be a finite number within %s",
                        name, b, lt);
        }
        out[b] = (float)v->valuedouble;
    }
    return PROTO_OK;
}

/* The index of s among "a|b|c", or -1. */
static int choice_index(const char *choices, const char *s)
{
    size_t len = strlen(s);
    int i = 0;
    for (const char *c = choices; c; i++) {
        const char *bar = strchr(c, '|');
        size_t n = bar ? (size_t)(bar - c) : strlen(c);
        if (n == len && !strncmp(c, s, n))
            return i;
        c = bar ? bar + 1 : NULL;
    }
    return -1;
}

proto_status proto_read_choice(const cJSON *o, const char *name, const char *choices, int def,
                               int *out, char *err, size_t err_sz)
{
    const cJSON *v = field(o, name);
    if (!v && def >= 0) {
        *out = def;
        return PROTO_OK;
    }
    int i = cJSON_IsString(v) ? choice_index(choices, v->valuestring) : -1;
    if (i < 0)
        return fail(err, err_sz, PROTO_ERR_CORRUPT, "field \"%s\" must be one of %s", name,
                    choices);
    *out = i;
    return PROTO_OK;
}

proto_status proto_read_string(const cJSON *o, const char *name, char *out, size_t out_sz,
                               char *err, size_t err_sz)
{
    const cJSON *v = field(o, name);
    if (!cJSON_IsString(v) || !*v->valuestring || strlen(v->valuestring) >= out_sz)
        return fail(err, err_sz, PROTO_ERR_CORRUPT,
                    "field \"%s\" must be a string of 1 to %zu bytes", name, out_sz - 1);
    memcpy(out, v->valuestring, strlen(v->valuestring) + 1);
    return PROTO_OK;
}

typedef struct flat {
    proto_param_fn fn;
    void *ctx;
    int n;
} flat;

/* Walk one level of the params object (or array), prefix being its dotted name. */
static proto_status flatten(flat *f, const cJSON *o, const char *prefix, int depth, char *err,
                            size_t err_sz)
{
    if (depth > 3)
        return fail(err, err_sz, PROTO_ERR_CORRUPT, "params nest deeper than 3 levels at \"%s\"",
                    prefix);
    int i = 0;
    for (const cJSON *c = o->child; c; c = c->next, i++) {
        char name[PROTO_PARAM_NAME];
        int n = cJSON_IsArray(o)
                    ? snprintf(name, sizeof name, "%s%s%d", prefix, *prefix ? "." : "", i)
                    : snprintf(name, sizeof name, "%s%s%s", prefix, *prefix ? "." : "",
                               c->string ? c->string : "");
        if (n < 0 || (size_t)n >= sizeof name)
            return fail(err, err_sz, PROTO_ERR_CORRUPT, "parameter name longer than %d bytes",
                        PROTO_PARAM_NAME - 1);
        if (cJSON_IsObject(c) || cJSON_IsArray(c)) {
            proto_status st = flatten(f, c, name, depth + 1, err, err_sz);
            if (st != PROTO_OK)
                return st;
            continue;
        }
        int text = cJSON_IsString(c) && strlen(c->valuestring) < PROTO_PARAM_NAME;
        if (!text && (!cJSON_IsNumber(c) || !isfinite(c->valuedouble)))
            return fail(err, err_sz, PROTO_ERR_CORRUPT,
                        "parameter \"%s\" must be a finite number or a choice's name", name);
        if (f->n == PROTO_MAX_PARAMS)
            return fail(err, err_sz, PROTO_ERR_LIMIT, "more than %d parameters in one message",
                        PROTO_MAX_PARAMS);
        f->n++;
        if (f->fn(f->ctx, name, text ? 0.0 : c->valuedouble, text ? c->valuestring : NULL, err,
                  err_sz))
            return PROTO_ERR_ARG;
    }
    return PROTO_OK;
}

proto_status proto_read_params(const cJSON *o, proto_param_fn fn, void *ctx, char *err,
                               size_t err_sz)
{
    const cJSON *p = field(o, "params");
    if (!cJSON_IsObject(p))
        return fail(err, err_sz, PROTO_ERR_CORRUPT, "field \"params\" must be an object");
    flat f = {fn, ctx, 0};
    return flatten(&f, p, "", 0, err, err_sz);
}

proto_status proto_envelope_parse(proto_envelope *env, const char *json, size_t len, char *err,
                                  size_t err_sz)
{
    memset(env, 0, sizeof *env);
    if (err && err_sz)
        err[0] = 0;
    if (!json || len == 0)
        return fail(err, err_sz, PROTO_ERR_CORRUPT, "empty message");
    const char *end = NULL;
    cJSON *o = cJSON_ParseWithLengthOpts(json, len, &end, 0);
    if (!o)
        return fail(err, err_sz, PROTO_ERR_CORRUPT, "malformed JSON near byte %zu",
                    end ? (size_t)(end - json) : (size_t)0);
    proto_status st = PROTO_OK;
    /* Nothing but white space may follow the object. */
    for (const char *p = end; p && p < json + len && st == PROTO_OK; p++)
        if (!isspace((unsigned char)*p) && *p)
            st = fail(err, err_sz, PROTO_ERR_CORRUPT, "trailing bytes after the JSON object");
    const cJSON *t = field(o, "type"), *sq = cJSON_IsObject(o) ? field(o, "seq") : NULL;
    double seq = 0;
    /* A refusal still names the message it refuses when its seq is readable. */
    if (cJSON_IsNumber(sq) && sq->valuedouble >= 0 && sq->valuedouble <= 4294967295.0 &&
        sq->valuedouble == floor(sq->valuedouble))
        env->seq = (uint32_t)sq->valuedouble;
    if (st == PROTO_OK && !cJSON_IsObject(o))
        st = fail(err, err_sz, PROTO_ERR_CORRUPT, "a message must be a JSON object");
    else if (st == PROTO_OK && !cJSON_IsString(t))
        st = fail(err, err_sz, PROTO_ERR_CORRUPT, "field \"type\" must be a string");
    else if (st == PROTO_OK)
        st = proto_read_number(o, "seq", 0, 4294967295.0, &seq, err, err_sz);
    if (st == PROTO_OK && seq != floor(seq))
        st = fail(err, err_sz, PROTO_ERR_CORRUPT, "field \"seq\" must be an integer");
    if (st != PROTO_OK) {
        cJSON_Delete(o);
        return st;
    }
    env->type = t->valuestring;
    env->seq = (uint32_t)seq;
    env->msg = o;
    env->root = o;
    return PROTO_OK;
}

void proto_envelope_free(proto_envelope *env)
{
    cJSON_Delete(env->root);
    memset(env, 0, sizeof *env);
}
