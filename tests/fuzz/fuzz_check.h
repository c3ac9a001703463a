/* fuzz_check.h: what every object decoder state must satisfy, whatever bytes made it, and
 * what every text a client reads must be (valid UTF-8); shared by the fuzz targets (an
 * abort is what libFuzzer and the corpus replay catch). */
#ifndef TESTS_FUZZ_FUZZ_CHECK_H
#define TESTS_FUZZ_FUZZ_CHECK_H

#include <stddef.h>
#include <stdlib.h>

#include "protocol/proto.h"

/* Valid UTF-8 (RFC 3629), checked here without server/text.c's code. */
static inline int fuzz_valid_utf8(const unsigned char *s, size_t n)
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
