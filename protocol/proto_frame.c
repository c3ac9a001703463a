/* proto_frame.c: binary frames (header, mesh keyframes and deltas, slices).
 *
 * Topology travels through meshoptimizer's index codec. Positions travel as u16 triples
 * quantised in a fixed box, padded to 8-byte vertices and run through its vertex codec (which
 * predicts each vertex from the previous one, byte-plane wise), then zstd. Deltas carry (q_now -
 * q_key) mod 2^16 against the session's last keyframe: a local dent leaves most deltas zero, which
 * the codec and zstd shrink to almost nothing (DESIGN.md measured 3-4 KB a frame for a 40k-vertex
 * surface). Every read is bounds-checked: this is the code that meets hostile bytes. */
#include "proto.h"

#include <math.h>
#include <meshoptimizer.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

const char *proto_status_str(proto_status s)
{
    switch (s) {
    case PROTO_OK:
        return "ok";
    case PROTO_ERR_SHORT:
        return "frame too short";
    case PROTO_ERR_MAGIC:
        return "not a Softcast frame";
    case PROTO_ERR_VERSION:
        return "unknown protocol version";
    case PROTO_ERR_KIND:
        return "unknown kind";
    case PROTO_ERR_LIMIT:
        return "over a size limit";
    case PROTO_ERR_CORRUPT:
        return "corrupt frame";
    case PROTO_ERR_NOMEM:
        return "out of memory";
    case PROTO_ERR_ARG:
        return "bad argument";
    }
    return "unknown status";
}

/* ------------------------------------------------------- little-endian bytes */

static void put_u16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}
static void put_u32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}
static void put_u64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}
static void put_f32(uint8_t *p, float f)
{
    uint32_t v;
    memcpy(&v, &f, 4);
    put_u32(p, v);
}
static void put_f64(uint8_t *p, double f)
{
    uint64_t v;
    memcpy(&v, &f, 8);
    put_u64(p, v);
}
static uint16_t get_u16(const uint8_t *p)
{
    return (uint16_t)(p[0] | (p[1] << 8));
}
static uint32_t get_u32(const uint8_t *p)
{
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}
static uint64_t get_u64(const uint8_t *p)
{
    return get_u32(p) | ((uint64_t)get_u32(p + 4) << 32);
}
static float get_f32(const uint8_t *p)
{
    uint32_t v = get_u32(p);
    float f;
    memcpy(&f, &v, 4);
    return f;
}
static double get_f64(const uint8_t *p)
{
    uint64_t v = get_u64(p);
    double f;
    memcpy(&f, &v, 8);
    return f;
}

/* ------------------------------------------------------------------ buffers */

void proto_buf_free(proto_buf *b)
{
    free(b->data);
    memset(b, 0, sizeof *b);
}

static int buf_reserve(proto_buf *b, size_t extra)
{
    if (extra > PROTO_MAX_PAYLOAD * 2u || b->len + extra <= b->cap)
        return extra <= PROTO_MAX_PAYLOAD * 2u;
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->len + extra)
        cap *= 2;
    uint8_t *d = realloc(b->data, cap);
    if (!d)
        return 0;
    b->data = d;
    b->cap = cap;
    return 1;
}

/* Append n bytes (NULL: zeros); returns where they went or NULL. */
static uint8_t *buf_put(proto_buf *b, const void *src, size_t n)
{
    if (!buf_reserve(b, n))
        return NULL;
    uint8_t *p = b->data + b->len;
    if (src)
        memcpy(p, src, n);
    else
        memset(p, 0, n);
    b->len += n;
    return p;
}

/* A read cursor that never passes its end. */
typedef struct cursor {
    const uint8_t *p, *end;
    int bad;
} cursor;

static const uint8_t *take(cursor *c, size_t n)
{
    if (c->bad || (size_t)(c->end - c->p) < n) {
        c->bad = 1;
        return NULL;
    }
    const uint8_t *r = c->p;
    c->p += n;
    return r;
}
static uint32_t take_u32(cursor *c)
{
    const uint8_t *p = take(c, 4);
    return p ? get_u32(p) : 0;
}

/* ------------------------------------------------------------------- header */

void proto_header_write(uint8_t out[PROTO_HEADER_SIZE], const proto_header *h)
{
    memset(out, 0, PROTO_HEADER_SIZE);
    put_u32(out, PROTO_MAGIC);
    out[4] = PROTO_VERSION;
    out[5] = h->kind;
    put_u16(out + 6, PROTO_HEADER_SIZE);
    put_u64(out + 8, h->frame);
    put_u32(out + 16, h->last_seq);
    put_u32(out + 20, h->raw_size);
    put_f64(out + 24, h->sim_time_s);
    put_u32(out + 32, h->payload_size);
}

proto_status proto_header_read(proto_header *h, const uint8_t *buf, size_t len)
{
    memset(h, 0, sizeof *h);
    if (len < 8)
        return PROTO_ERR_SHORT;
    if (get_u32(buf) != PROTO_MAGIC)
        return PROTO_ERR_MAGIC;
    if (buf[4] != PROTO_VERSION)
        return PROTO_ERR_VERSION;
    if (get_u16(buf + 6) != PROTO_HEADER_SIZE)
        return PROTO_ERR_CORRUPT;
    if (len < PROTO_HEADER_SIZE)
        return PROTO_ERR_SHORT;
    h->version = buf[4];
    h->kind = buf[5];
    h->frame = get_u64(buf + 8);
    h->last_seq = get_u32(buf + 16);
    h->raw_size = get_u32(buf + 20);
    h->sim_time_s = get_f64(buf + 24);
    h->payload_size = get_u32(buf + 32);
    if (h->kind < PROTO_KIND_MESH_KEY || h->kind > PROTO_KIND_LOD_TABLE)
        return PROTO_ERR_KIND;
    if (h->raw_size > PROTO_MAX_PAYLOAD || h->payload_size > PROTO_MAX_PAYLOAD)
        return PROTO_ERR_LIMIT;
    if ((size_t)h->payload_size != len - PROTO_HEADER_SIZE)
        return len - PROTO_HEADER_SIZE < h->payload_size ? PROTO_ERR_SHORT : PROTO_ERR_CORRUPT;
    return PROTO_OK;
}

/* Header + zstd(raw) into out. */
static proto_status finish_frame(proto_buf *out, const proto_header *h0, uint8_t kind,
                                 const proto_buf *raw, int level)
{
    if (raw->len > PROTO_MAX_PAYLOAD)
        return PROTO_ERR_LIMIT;
    size_t bound = ZSTD_compressBound(raw->len);
    out->len = 0;
    if (!buf_reserve(out, PROTO_HEADER_SIZE + bound))
        return PROTO_ERR_NOMEM;
    size_t z = ZSTD_compress(out->data + PROTO_HEADER_SIZE, bound,
                             raw->data ? raw->data : (const void *)"", raw->len, level);
    if (ZSTD_isError(z))
        return PROTO_ERR_CORRUPT;
    proto_header h = *h0;
    h.kind = kind;
    h.raw_size = (uint32_t)raw->len;
    h.payload_size = (uint32_t)z;
    proto_header_write(out->data, &h);
    out->len = PROTO_HEADER_SIZE + z;
    return PROTO_OK;
}

/* Decompress a frame's payload into a fresh buffer of exactly raw_size bytes. */
static proto_status open_frame(proto_header *h, uint8_t **raw, const uint8_t *buf, size_t len,
                               uint8_t want_kind)
{
    *raw = NULL;
    proto_status st = proto_header_read(h, buf, len);
    if (st != PROTO_OK)
        return st;
    if (h->kind != want_kind &&
        !(want_kind == PROTO_KIND_MESH_KEY && h->kind == PROTO_KIND_MESH_DELTA))
        return PROTO_ERR_KIND;
    const uint8_t *z = buf + PROTO_HEADER_SIZE;
    unsigned long long content = ZSTD_getFrameContentSize(z, h->payload_size);
    if (content == ZSTD_CONTENTSIZE_ERROR || content != h->raw_size)
        return PROTO_ERR_CORRUPT;
    *raw = malloc(h->raw_size ? h->raw_size : 1);
    if (!*raw)
        return PROTO_ERR_NOMEM;
    size_t n = ZSTD_decompress(*raw, h->raw_size, z, h->payload_size);
    if (ZSTD_isError(n) || n != h->raw_size) {
        free(*raw);
        *raw = NULL;
        return PROTO_ERR_CORRUPT;
    }
    return PROTO_OK;
}

/* -------------------------------------------------------------------- meshes */

void proto_quantise(const float *p, uint32_t n, const float bmin[3], const float bmax[3],
                    uint16_t *q)
{
    for (uint32_t i = 0; i < n; i++)
        for (int b = 0; b < 3; b++) {
            float ext = bmax[b] - bmin[b];
            float t = ext > 0.0f ? (p[i * 3 + b] - bmin[b]) / ext : 0.0f;
            t = t < 0.0f ? 0.0f : t > 1.0f ? 1.0f : t; /* also maps NaN to 0 */
            q[i * 3 + b] = (uint16_t)lrintf(t * 65535.0f);
        }
}

void proto_dequantise(const uint16_t *q, uint32_t n, const float bmin[3], const float bmax[3],
                      float *p)
{
    for (uint32_t i = 0; i < n; i++)
        for (int b = 0; b < 3; b++)
            p[i * 3 + b] = bmin[b] + (bmax[b] - bmin[b]) * ((float)q[i * 3 + b] / 65535.0f);
}

/* Vertex stream: n vertices of 8 bytes (x, y, z, 0 as u16), meshopt-encoded, prefixed
 * with its byte length. The u16 values are laid out little-endian. */
static proto_status put_vertices(proto_buf *raw, const uint16_t *q, const uint16_t *base,
                                 uint32_t n)
{
    uint8_t *v = malloc((size_t)n * 8 + 1);
    if (!v)
        return PROTO_ERR_NOMEM;
    for (uint32_t i = 0; i < n; i++) {
        for (int b = 0; b < 3; b++) {
            uint16_t x = base ? (uint16_t)(q[i * 3 + b] - base[i * 3 + b]) : q[i * 3 + b];
            put_u16(v + (size_t)i * 8 + (size_t)b * 2, x);
        }
        put_u16(v + (size_t)i * 8 + 6, 0);
    }
    size_t bound = meshopt_encodeVertexBufferBound(n, 8);
    if (!buf_put(raw, NULL, 4) || !buf_reserve(raw, bound)) {
        free(v);
        return PROTO_ERR_NOMEM;
    }
    size_t enc = meshopt_encodeVertexBuffer(raw->data + raw->len, bound, v, n, 8);
    free(v);
    if (enc == 0 && n > 0)
        return PROTO_ERR_CORRUPT;
    put_u32(raw->data + raw->len - 4, (uint32_t)enc);
    raw->len += enc;
    return PROTO_OK;
}

static proto_status take_vertices(cursor *c, uint32_t n, uint16_t **out)
{
    uint32_t enc = take_u32(c);
    const uint8_t *p = take(c, enc);
    if (!p)
        return PROTO_ERR_CORRUPT;
    if ((uint64_t)n * 8 > PROTO_MAX_PAYLOAD)
        return PROTO_ERR_LIMIT;
    uint8_t *v = malloc((size_t)n * 8 + 1);
    *out = malloc((size_t)n * 6 + 1);
    if (!v || !*out) {
        free(v);
        return PROTO_ERR_NOMEM;
    }
    if (n > 0 && meshopt_decodeVertexBuffer(v, n, 8, p, enc) != 0) {
        free(v);
        return PROTO_ERR_CORRUPT;
    }
    for (uint32_t i = 0; i < n; i++)
        for (int b = 0; b < 3; b++)
            (*out)[i * 3 + b] = get_u16(v + (size_t)i * 8 + (size_t)b * 2);
    free(v);
    return PROTO_OK;
}

static int mesh_ok(const proto_mesh *m)
{
    if (m->nsurf < 0 || m->nsurf > PROTO_MAX_SURFACES)
        return 0;
    for (int k = 0; k < m->nsurf; k++)
        if (!m->surf[k].q && m->surf[k].nvert)
            return 0;
    return 1;
}

proto_status proto_encode_mesh_key(proto_buf *out, const proto_header *h, const proto_mesh *m,
                                   int zstd_level)
{
    if (!mesh_ok(m))
        return PROTO_ERR_ARG;
    proto_buf raw = {0};
    proto_status st = PROTO_OK;
    uint8_t *p = buf_put(&raw, NULL, 4 + 24);
    if (!p)
        return PROTO_ERR_NOMEM;
    put_u32(p, (uint32_t)m->nsurf);
    for (int b = 0; b < 3; b++) {
        put_f32(p + 4 + 4 * b, m->bmin[b]);
        put_f32(p + 16 + 4 * b, m->bmax[b]);
    }
    for (int k = 0; k < m->nsurf && st == PROTO_OK; k++) {
        const proto_surface *s = &m->surf[k];
        if ((uint64_t)s->ntri * 12 > PROTO_MAX_PAYLOAD || (s->ntri && !s->tri)) {
            st = PROTO_ERR_ARG;
            break;
        }
        /* Topology through meshoptimizer's index codec (the browser decoder reads it). */
        size_t ibound = meshopt_encodeIndexBufferBound((size_t)s->ntri * 3, s->nvert);
        size_t at = raw.len;
        if (!buf_put(&raw, NULL, 16) || !buf_reserve(&raw, ibound)) {
            st = PROTO_ERR_NOMEM;
            break;
        }
        size_t ienc =
            meshopt_encodeIndexBuffer(raw.data + raw.len, ibound, s->tri, (size_t)s->ntri * 3);
        if (ienc == 0 && s->ntri) {
            st = PROTO_ERR_ARG;
            break;
        }
        raw.len += ienc;
        uint8_t *sp = raw.data + at;
        sp[0] = s->id;
        put_u32(sp + 4, s->nvert);
        put_u32(sp + 8, s->ntri);
        put_u32(sp + 12, (uint32_t)ienc);
        st = put_vertices(&raw, s->q, NULL, s->nvert);
    }
    if (st == PROTO_OK)
        st = finish_frame(out, h, PROTO_KIND_MESH_KEY, &raw, zstd_level);
    proto_buf_free(&raw);
    return st;
}

proto_status proto_encode_mesh_delta(proto_buf *out, const proto_header *h, const proto_mesh *key,
                                     const proto_mesh *cur, int zstd_level)
{
    if (!mesh_ok(key) || !mesh_ok(cur) || key->nsurf != cur->nsurf)
        return PROTO_ERR_ARG;
    for (int k = 0; k < cur->nsurf; k++)
        if (key->surf[k].nvert != cur->surf[k].nvert || key->surf[k].id != cur->surf[k].id)
            return PROTO_ERR_ARG;
    proto_buf raw = {0};
    proto_status st = PROTO_OK;
    uint8_t *p = buf_put(&raw, NULL, 4 + 8);
    if (!p)
        return PROTO_ERR_NOMEM;
    put_u32(p, (uint32_t)cur->nsurf);
    put_u64(p + 4, cur->key_frame);
    for (int k = 0; k < cur->nsurf && st == PROTO_OK; k++) {
        uint8_t *sp = buf_put(&raw, NULL, 8);
        if (!sp) {
            st = PROTO_ERR_NOMEM;
            break;
        }
        sp[0] = cur->surf[k].id;
        put_u32(sp + 4, cur->surf[k].nvert);
        st = put_vertices(&raw, cur->surf[k].q, key->surf[k].q, cur->surf[k].nvert);
    }
    if (st == PROTO_OK)
        st = finish_frame(out, h, PROTO_KIND_MESH_DELTA, &raw, zstd_level);
    proto_buf_free(&raw);
    return st;
}

void proto_decoded_mesh_free(proto_decoded_mesh *m)
{
    for (int k = 0; k < PROTO_MAX_SURFACES; k++) {
        free(m->surf[k].tri);
        free(m->surf[k].q);
    }
    memset(m, 0, sizeof *m);
}

proto_status proto_decode_mesh(proto_decoded_mesh *out, const uint8_t *buf, size_t len)
{
    memset(out, 0, sizeof *out);
    uint8_t *raw;
    proto_status st = open_frame(&out->h, &raw, buf, len, PROTO_KIND_MESH_KEY);
    if (st != PROTO_OK)
        return st;
    cursor c = {raw, raw + out->h.raw_size, 0};
    int key = out->h.kind == PROTO_KIND_MESH_KEY;
    uint32_t nsurf = take_u32(&c);
    if (nsurf > PROTO_MAX_SURFACES)
        st = PROTO_ERR_LIMIT;
    if (key) {
        const uint8_t *b = take(&c, 24);
        for (int i = 0; b && i < 3; i++) {
            out->bmin[i] = get_f32(b + 4 * i);
            out->bmax[i] = get_f32(b + 12 + 4 * i);
            if (!isfinite(out->bmin[i]) || !isfinite(out->bmax[i]))
                st = PROTO_ERR_CORRUPT;
        }
    } else {
        const uint8_t *b = take(&c, 8);
        out->key_frame = b ? get_u64(b) : 0;
    }
    for (uint32_t k = 0; k < nsurf && st == PROTO_OK && !c.bad; k++) {
        const uint8_t *sp = take(&c, key ? 16 : 8);
        if (!sp)
            break;
        out->nsurf = (int)k + 1;
        out->surf[k].id = sp[0];
        out->surf[k].nvert = get_u32(sp + 4);
        if ((uint64_t)out->surf[k].nvert * 8 > PROTO_MAX_PAYLOAD) {
            st = PROTO_ERR_LIMIT;
            break;
        }
        if (key) {
            uint32_t ntri = get_u32(sp + 8), ib = get_u32(sp + 12);
            if ((uint64_t)ntri * 12 > PROTO_MAX_PAYLOAD) {
                st = PROTO_ERR_LIMIT;
                break;
            }
            const uint8_t *ip = take(&c, ib);
            if (!ip)
                break;
            out->surf[k].ntri = ntri;
            out->surf[k].tri = malloc((size_t)ntri * 12 + 1);
            if (!out->surf[k].tri) {
                st = PROTO_ERR_NOMEM;
                break;
            }
            if (ntri &&
                meshopt_decodeIndexBuffer(out->surf[k].tri, (size_t)ntri * 3, 4, ip, ib) != 0) {
                st = PROTO_ERR_CORRUPT;
                break;
            }
            for (size_t i = 0; i < (size_t)ntri * 3; i++)
                if (out->surf[k].tri[i] >= out->surf[k].nvert)
                    st = PROTO_ERR_CORRUPT;
        }
        if (st == PROTO_OK)
            st = take_vertices(&c, out->surf[k].nvert, &out->surf[k].q);
    }
    if (st == PROTO_OK && (c.bad || c.p != c.end))
        st = PROTO_ERR_CORRUPT; /* short, or trailing bytes the format does not have */
    free(raw);
    if (st != PROTO_OK)
        proto_decoded_mesh_free(out);
    return st;
}

proto_status proto_apply_delta(const proto_decoded_mesh *key, const proto_decoded_mesh *delta,
                               int surface, uint16_t *out)
{
    if (key->h.kind != PROTO_KIND_MESH_KEY || delta->h.kind != PROTO_KIND_MESH_DELTA ||
        surface < 0 || surface >= key->nsurf || surface >= delta->nsurf ||
        delta->key_frame != key->h.frame || key->surf[surface].nvert != delta->surf[surface].nvert)
        return PROTO_ERR_ARG;
    for (size_t i = 0; i < (size_t)key->surf[surface].nvert * 3; i++)
        out[i] = (uint16_t)(key->surf[surface].q[i] + delta->surf[surface].q[i]);
    return PROTO_OK;
}

/* -------------------------------------------------------------------- slices */

proto_status proto_encode_slice(proto_buf *out, const proto_header *h, const proto_slice *s,
                                int zstd_level)
{
    uint64_t npx = (uint64_t)s->width * s->height;
    if (s->plane > 2 || npx > PROTO_MAX_PAYLOAD - 28 || (npx && !s->pixels))
        return PROTO_ERR_ARG;
    proto_buf raw = {0};
    uint8_t *p = buf_put(&raw, NULL, 24 + (size_t)npx);
    if (!p)
        return PROTO_ERR_NOMEM;
    p[0] = s->plane;
    put_u32(p + 4, s->index);
    put_u32(p + 8, s->width);
    put_u32(p + 12, s->height);
    put_f32(p + 16, s->level_hu);
    put_f32(p + 20, s->width_hu);
    if (npx)
        memcpy(p + 24, s->pixels, (size_t)npx);
    proto_status st = finish_frame(out, h, PROTO_KIND_SLICE, &raw, zstd_level);
    proto_buf_free(&raw);
    return st;
}

proto_status proto_decode_slice(proto_header *h, proto_slice *out, const uint8_t *buf, size_t len)
{
    memset(out, 0, sizeof *out);
    uint8_t *raw;
    proto_status st = open_frame(h, &raw, buf, len, PROTO_KIND_SLICE);
    if (st != PROTO_OK)
        return st;
    if (h->raw_size < 24) {
        free(raw);
        return PROTO_ERR_CORRUPT;
    }
    out->plane = raw[0];
    out->index = get_u32(raw + 4);
    out->width = get_u32(raw + 8);
    out->height = get_u32(raw + 12);
    out->level_hu = get_f32(raw + 16);
    out->width_hu = get_f32(raw + 20);
    uint64_t npx = (uint64_t)out->width * out->height;
    if (out->plane > 2 || npx != (uint64_t)h->raw_size - 24 || !isfinite(out->level_hu) ||
        !isfinite(out->width_hu)) {
        free(raw);
        memset(out, 0, sizeof *out);
        return PROTO_ERR_CORRUPT;
    }
    uint8_t *px = malloc((size_t)npx + 1);
    if (!px) {
        free(raw);
        return PROTO_ERR_NOMEM;
    }
    memcpy(px, raw + 24, (size_t)npx);
    out->pixels = px;
    free(raw);
    return PROTO_OK;
}

/* ----------------------------------------------------------------- LOD table */

#define LOD_ENTRY 20 /* bytes per character */

proto_status proto_encode_lod_table(proto_buf *out, const proto_header *h, const proto_lod_entry *e,
                                    uint32_t n, int zstd_level)
{
    if ((uint64_t)n * LOD_ENTRY + 4 > PROTO_MAX_PAYLOAD || (n && !e))
        return PROTO_ERR_ARG;
    for (uint32_t i = 0; i < n; i++)
        if (!isfinite(e[i].e_pos) || !isfinite(e[i].e_vel))
            return PROTO_ERR_ARG;
    proto_buf raw = {0};
    uint8_t *p = buf_put(&raw, NULL, 4 + (size_t)n * LOD_ENTRY);
    if (!p)
        return PROTO_ERR_NOMEM;
    put_u32(p, n);
    for (uint32_t i = 0; i < n; i++) {
        uint8_t *q = p + 4 + (size_t)i * LOD_ENTRY;
        q[0] = e[i].lod;
        q[1] = q[2] = q[3] = 0;
        put_u32(q + 4, e[i].first_vertex);
        put_u32(q + 8, e[i].nvert);
        put_f32(q + 12, e[i].e_pos);
        put_f32(q + 16, e[i].e_vel);
    }
    proto_status st = finish_frame(out, h, PROTO_KIND_LOD_TABLE, &raw, zstd_level);
    proto_buf_free(&raw);
    return st;
}

proto_status proto_decode_lod_table(proto_header *h, proto_lod_entry **entries, uint32_t *n,
                                    const uint8_t *buf, size_t len)
{
    *entries = NULL;
    *n = 0;
    uint8_t *raw;
    proto_status st = open_frame(h, &raw, buf, len, PROTO_KIND_LOD_TABLE);
    if (st != PROTO_OK)
        return st;
    uint32_t cnt = h->raw_size >= 4 ? get_u32(raw) : 0;
    if (h->raw_size < 4 || (uint64_t)cnt * LOD_ENTRY + 4 != h->raw_size) {
        free(raw);
        return PROTO_ERR_CORRUPT;
    }
    proto_lod_entry *e = malloc((size_t)cnt * sizeof *e + 1);
    if (!e) {
        free(raw);
        return PROTO_ERR_NOMEM;
    }
    for (uint32_t i = 0; i < cnt; i++) {
        const uint8_t *q = raw + 4 + (size_t)i * LOD_ENTRY;
        e[i].lod = q[0];
        e[i].first_vertex = get_u32(q + 4);
        e[i].nvert = get_u32(q + 8);
        e[i].e_pos = get_f32(q + 12);
        e[i].e_vel = get_f32(q + 16);
        if (q[1] || q[2] || q[3] || (uint64_t)e[i].first_vertex + e[i].nvert > UINT32_MAX ||
            !isfinite(e[i].e_pos) || !isfinite(e[i].e_vel)) {
            free(e);
            free(raw);
            return PROTO_ERR_CORRUPT;
        }
    }
    free(raw);
    *entries = e;
    *n = cnt;
    return PROTO_OK;
}
