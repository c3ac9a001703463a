/* fuzz_check.h: what every object decoder state must satisfy, whatever bytes made it, and
 * what every text a client reads must be (valid UTF-8); shared by the fuzz targets (an
 * abort is what libFuzzer and the corpus replay catch). */
#ifndef TESTS_FUZZ_FUZZ_CHECK_H
#define TESTS_FUZZ_FUZZ_CHECK_H

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "protocol/proto.h"

/* The checks below are the judge, not the code under test: under clang they are kept out of
 * the coverage map, and out of instrumented callers (they run on every write, and their
 * branches are no progress). */
#if defined(__clang__)
#define FUZZ_JUDGE __attribute__((no_sanitize("coverage"), noinline))
#else
#define FUZZ_JUDGE
#endif

/* Valid UTF-8 (RFC 3629), checked here without server/text.c's code. */
FUZZ_JUDGE static inline int fuzz_valid_utf8(const unsigned char *s, size_t n)
{
    for (size_t i = 0; i < n;) {
        unsigned c = s[i], len = c < 0x80         ? 1
                                 : (c >> 5) == 6  ? 2
                                 : (c >> 4) == 14 ? 3
                                 : (c >> 3) == 30 ? 4
                                                  : 0;
        if (!len || i + len > n)
            return 0;
        unsigned cp = len == 1 ? c : c & (0x7f >> len);
        for (unsigned k = 1; k < len; k++) {
            if ((s[i + k] & 0xc0) != 0x80)
                return 0;
            cp = (cp << 6) | (s[i + k] & 0x3f);
        }
        static const unsigned min[5] = {0, 0, 0x80, 0x800, 0x10000};
        if (cp < min[len] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
            return 0;
        i += len;
    }
    return 1;
}

/* A strict JSON reader (RFC 8259), recursive descent over [p, end) that allocates nothing
 * (cJSON's allocations under ASan were a third of the handler targets' time): fuzz_json_value
 * moves p past one value and returns 1, or returns 0. In the outermost object it notes what
 * the member `key` holds in key_kind ('s' a string, 'o' anything else, 0 absent). */
typedef struct {
    const unsigned char *p, *end;
    const char *key;
    int key_kind;
} fuzz_json;

FUZZ_JUDGE static inline void fuzz_json_space(fuzz_json *j)
{
    while (j->p < j->end && (*j->p == ' ' || *j->p == '\t' || *j->p == '\n' || *j->p == '\r'))
        j->p++;
}

FUZZ_JUDGE static inline int fuzz_json_lit(fuzz_json *j, const char *w)
{
    size_t n = strlen(w);
    if ((size_t)(j->end - j->p) < n || memcmp(j->p, w, n))
        return 0;
    j->p += n;
    return 1;
}

/* A string; *matches says whether it equals `want` (NULL: not asked). */
FUZZ_JUDGE static inline int fuzz_json_string(fuzz_json *j, const char *want, int *matches)
{
    const unsigned char *start = ++j->p;
    int escaped = 0;
    for (; j->p < j->end && *j->p != '"'; j->p++) {
        if (*j->p < 0x20)
            return 0;
        if (*j->p != '\\')
            continue;
        escaped = 1;
        if (++j->p >= j->end || !strchr("\"\\/bfnrtu", *j->p))
            return 0;
        if (*j->p == 'u')
            for (int k = 0; k < 4; k++)
                if (++j->p >= j->end || !strchr("0123456789abcdefABCDEF", *j->p))
                    return 0;
    }
    if (j->p >= j->end)
        return 0;
    if (matches)
        *matches = !escaped && (size_t)(j->p - start) == strlen(want) &&
                   !memcmp(start, want, strlen(want));
    j->p++;
    return 1;
}

FUZZ_JUDGE static inline int fuzz_json_number(fuzz_json *j)
{
    const unsigned char *s = j->p;
    if (j->p < j->end && *j->p == '-')
        j->p++;
    if (j->p < j->end && *j->p == '0')
        j->p++;
    else if (j->p < j->end && *j->p >= '1' && *j->p <= '9')
        while (j->p < j->end && *j->p >= '0' && *j->p <= '9')
            j->p++;
    else
        return 0;
    if (j->p < j->end && *j->p == '.') {
        if (++j->p >= j->end || *j->p < '0' || *j->p > '9')
            return 0;
        while (j->p < j->end && *j->p >= '0' && *j->p <= '9')
            j->p++;
    }
    if (j->p < j->end && (*j->p == 'e' || *j->p == 'E')) {
        if (++j->p < j->end && (*j->p == '+' || *j->p == '-'))
            j->p++;
        if (j->p >= j->end || *j->p < '0' || *j->p > '9')
            return 0;
        while (j->p < j->end && *j->p >= '0' && *j->p <= '9')
            j->p++;
    }
    return j->p > s;
}

FUZZ_JUDGE static int fuzz_json_value(fuzz_json *j, int depth)
{
    fuzz_json_space(j);
    if (j->p >= j->end || depth > 64)
        return 0;
    if (*j->p == '"')
        return fuzz_json_string(j, NULL, NULL);
    if (*j->p != '{' && *j->p != '[')
        return fuzz_json_lit(j, "true") || fuzz_json_lit(j, "false") || fuzz_json_lit(j, "null") ||
               fuzz_json_number(j);
    unsigned char close = *j->p == '{' ? '}' : ']';
    j->p++;
    fuzz_json_space(j);
    if (j->p < j->end && *j->p == close)
        return j->p++, 1;
    for (;;) {
        int is_key = 0;
        if (close == '}') {
            fuzz_json_space(j);
            if (j->p >= j->end || *j->p != '"' || !fuzz_json_string(j, j->key, &is_key))
                return 0;
            fuzz_json_space(j);
            if (j->p >= j->end || *j->p++ != ':')
                return 0;
            fuzz_json_space(j);
            is_key = is_key && depth == 0;
            if (is_key)
                j->key_kind = j->p < j->end && *j->p == '"' ? 's' : 'o';
        }
        if (!fuzz_json_value(j, depth + 1))
            return 0;
        fuzz_json_space(j);
        if (j->p < j->end && *j->p == ',') {
            j->p++;
            continue;
        }
        return j->p < j->end && *j->p++ == close;
    }
}

/* What a client may read: valid UTF-8 and one JSON value with nothing after it; where `key`
 * is given, an object whose member `key` is a string. */
FUZZ_JUDGE static inline int fuzz_json_text(const unsigned char *s, size_t n, const char *key)
{
    fuzz_json j = {s, s + n, key ? key : "", 0};
    if (!fuzz_valid_utf8(s, n) || !fuzz_json_value(&j, 0))
        return 0;
    fuzz_json_space(&j);
    return j.p == j.end && (!key || j.key_kind == 's');
}

/* Every object: ids increasing, counts within the limits, every element index below nvert,
 * every position inside its box (x, y, z at most 2^qbits - 1), no scalar without one, a
 * finite unit rotation. Returns the total vertices held (for a cheap state checksum). */
static inline uint64_t fuzz_check_decoder(const proto_decoder *d)
{
    uint64_t tv = 0, te = 0;
    int prev = -1;
    if (proto_decoder_count(d) > PROTO_MAX_OBJECTS)
        abort();
    for (uint32_t i = 0; i < proto_decoder_count(d); i++) {
        const proto_object *o = proto_decoder_object(d, i);
        size_t es = o->primitive == PROTO_PRIM_TRIANGLES ? 3
                    : o->primitive == PROTO_PRIM_LINES   ? 2
                                                         : 0;
        if (!o || (int)o->id <= prev || !es || o->qbits < 1 || o->qbits > 16 ||
            o->nvert > PROTO_MAX_OBJECT_VERTS || o->nelem > PROTO_MAX_OBJECT_ELEMS)
            abort();
        prev = o->id;
        for (size_t j = 0; j < (size_t)o->nelem * es; j++)
            if (o->elem[j] >= o->nvert)
                abort();
        uint16_t top = (uint16_t)((1u << o->qbits) - 1u);
        for (size_t j = 0; j < (size_t)o->nvert * 4; j++) {
            int s = j % 4 == 3;
            if ((s && !o->has_scalar && (o->q[j] || o->base_q[j])) ||
                (!s && (o->q[j] > top || o->base_q[j] > top)))
                abort();
        }
        float n2 = 0.0f;
        for (int k = 0; k < 4; k++)
            n2 += o->xf.r[k] * o->xf.r[k];
        if (!(n2 > 0.99f && n2 < 1.01f))
            abort();
        tv += o->nvert;
        te += o->nelem;
    }
    if (tv > PROTO_MAX_TOTAL_VERTS || te > PROTO_MAX_TOTAL_ELEMS)
        abort();
    return tv;
}

/* A checksum of everything the decoder shows (a refused frame must leave it as it was). */
static inline uint64_t fuzz_state_sum(const proto_decoder *d)
{
    uint64_t s = 1469598103934665603ull;
    for (uint32_t i = 0; i < proto_decoder_count(d); i++) {
        const proto_object *o = proto_decoder_object(d, i);
        size_t es = o->primitive == PROTO_PRIM_TRIANGLES ? 3 : 2;
        const unsigned char *p[4] = {(const unsigned char *)o, (const unsigned char *)o->q,
                                     (const unsigned char *)o->base_q,
                                     (const unsigned char *)o->elem};
        size_t n[4] = {offsetof(proto_object, elem), (size_t)o->nvert * 8, (size_t)o->nvert * 8,
                       (size_t)o->nelem * es * 4};
        for (int k = 0; k < 4; k++)
            for (size_t j = 0; j < n[k]; j++)
                s = (s ^ p[k][j]) * 1099511628211ull;
    }
    return s;
}

#endif
