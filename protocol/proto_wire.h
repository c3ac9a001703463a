/* proto_wire.h: what the frame files of protocol/ share and nobody else sees: little-endian
 * bytes, growable buffers, a read cursor that never passes its end, and the header + zstd
 * envelope every frame kind has. Not part of the API (proto.h is). */
#ifndef PROTO_WIRE_H
#define PROTO_WIRE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "proto.h"

static inline void wire_put_u16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}
static inline void wire_put_u32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}
static inline void wire_put_u64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}
static inline void wire_put_f32(uint8_t *p, float f)
{
    uint32_t v;
    memcpy(&v, &f, 4);
    wire_put_u32(p, v);
}
static inline uint16_t wire_get_u16(const uint8_t *p)
{
    return (uint16_t)(p[0] | (p[1] << 8));
}
static inline uint32_t wire_get_u32(const uint8_t *p)
{
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}
static inline uint64_t wire_get_u64(const uint8_t *p)
{
    return wire_get_u32(p) | ((uint64_t)wire_get_u32(p + 4) << 32);
}
static inline float wire_get_f32(const uint8_t *p)
{
    uint32_t v = wire_get_u32(p);
    float f;
    memcpy(&f, &v, 4);
    return f;
}

/// Make room for extra more bytes (refused past twice PROTO_MAX_PAYLOAD). 1 on success.
int wire_reserve(proto_buf *b, size_t extra);
/// Room for need items of item bytes in the array *p of *cap items (doubling; contents
/// kept). 1, with *cap updated; 0 when out of memory, *p and *cap unchanged.
int wire_grow(void **p, uint32_t *cap, uint32_t need, size_t item);
/// Append n bytes (src NULL: zeros); returns where they went, or NULL.
uint8_t *wire_put(proto_buf *b, const void *src, size_t n);

/* A read cursor that never passes its end; once bad, every take fails. */
typedef struct wire_cursor {
    const uint8_t *p, *end;
    int bad;
} wire_cursor;

static inline const uint8_t *wire_take(wire_cursor *c, size_t n)
{
    if (c->bad || (size_t)(c->end - c->p) < n) {
        c->bad = 1;
        return NULL;
    }
    const uint8_t *r = c->p;
    c->p += n;
    return r;
}
static inline uint32_t wire_take_u32(wire_cursor *c)
{
    const uint8_t *p = wire_take(c, 4);
    return p ? wire_get_u32(p) : 0;
}

/// Header + zstd(raw) into out (out->len reset first); kind and flags from the arguments.
proto_status wire_finish(proto_buf *out, const proto_header *h, uint8_t kind, uint32_t flags,
                         const proto_buf *raw, int level);
/// The same with a zstd compression context (a ZSTD_CCtx) the caller keeps, so that no
/// context is made and freed per frame; NULL: as wire_finish.
proto_status wire_finish_cctx(proto_buf *out, const proto_header *h, uint8_t kind, uint32_t flags,
                              const proto_buf *raw, int level, void *cctx);
/// Check the header, that its kind is in kinds (a bit mask: 1 << kind), and decompress the
/// payload into a fresh malloc'd buffer of exactly raw_size bytes (*raw; free it).
proto_status wire_open(proto_header *h, uint8_t **raw, const uint8_t *buf, size_t len,
                       unsigned kinds);

/* Object frames (kind 5, README "Object frames"): byte sizes of the fixed parts. */
#define OBJ_RECORD_HEAD 6  /* u16 id, u16 key, u8 parts, u8 0 */
#define OBJ_KEY_HEAD    8  /* u8 primitive, qbits, flags, lod, ninfo, u8 0 x 3 */
#define OBJ_XF          28 /* the key's transform: f32 t[3], r[4] */
#define OBJ_XF_CODE     19 /* a frame's transform: i32 dt[3], i16 c[3], u8 largest */
#define OBJ_KEY_BODY    44 /* f32 bmin[3], bmax[3], smin, smax, tstep, u32 nvert, nelem */
#define OBJ_APPEND_HEAD 16 /* u32 first_vertex, first_elem, nvert, nelem */
#define OBJ_VERTEX      8  /* u16 x, y, z, s on the wire; (n x 4) u16 in memory */
#define OBJ_KEY_SCALAR  1u /* key flags: the vertices carry a scalar */
/* A transform's rotation is a unit quaternion: |r|^2 within this of 1. */
#define OBJ_UNIT_TOL 1e-3f

/* A frame's transform relative to its key (README "Transforms"): the position in steps of
 * tstep from the key's, the rotation as its smallest three components in 16 bits. */
typedef struct wire_xf_code {
    int32_t dt[3];
    int16_t c[3];
    uint8_t largest; /* 0-3: the component left out (x, y, z, w), made positive */
} wire_xf_code;

/// Code xf (a unit rotation) against the key; 0 when a step count passes the i32 range.
int wire_xf_encode(const proto_transform *key, float tstep, const proto_transform *xf,
                   wire_xf_code *code);
/// The transform a code stands for; 0 when it stands for none (largest > 3, or three
/// components whose squares pass 1).
int wire_xf_decode(const proto_transform *key, float tstep, const wire_xf_code *code,
                   proto_transform *out);
void wire_xf_put(uint8_t *p, const wire_xf_code *code);
void wire_xf_get(const uint8_t *p, wire_xf_code *code);

/// A difference (q - base) mod 2^16, read as int16, zigzag-coded: 0, -1, 1, -2... as 0, 1, 2,
/// 3... (small differences of either sign keep their high byte 0 for the vertex codec).
static inline uint16_t wire_zigzag(uint16_t d)
{
    return (uint16_t)((uint16_t)(d << 1) ^ (uint16_t)((d & 0x8000u) ? 0xffffu : 0u));
}
/// The inverse: the difference mod 2^16.
static inline uint16_t wire_unzigzag(uint16_t z)
{
    return (uint16_t)((z >> 1) ^ (uint16_t)((z & 1u) ? 0xffffu : 0u));
}

/// Elements per primitive: 3 (triangles), 2 (lines), 0 (neither).
static inline uint32_t wire_elem_size(unsigned primitive)
{
    return primitive == PROTO_PRIM_TRIANGLES ? 3u : primitive == PROTO_PRIM_LINES ? 2u : 0u;
}

#endif
