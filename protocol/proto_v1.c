/* proto_v1.c: the version 1 mesh frames (kinds 1, 2, 4), DEPRECATED: server/sched.c and
 * server/scene_cloth.c still encode them; object frames (proto_objects_*.c) replace them, and
 * this file goes once the server and the browser have switched.
 *
 * Topology travels through meshoptimizer's index codec. Positions travel as u16 triples
 * quantised in one fixed box, padded to 8-byte vertices and run through its vertex codec, then
 * zstd; deltas carry (q_now - q_key) mod 2^16 against the session's last keyframe. Every read
 * is bounds-checked: this is the code that meets hostile bytes. */
#include "proto.h"
#include "proto_wire.h"

#include <math.h>
#include <meshoptimizer.h>
#include <stdlib.h>
#include <string.h>

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
            wire_put_u16(v + (size_t)i * 8 + (size_t)b * 2, x);
        }
        wire_put_u16(v + (size_t)i * 8 + 6, 0);
    }
    size_t bound = meshopt_encodeVertexBufferBound(n, 8);
    if (!wire_put(raw, NULL, 4) || !wire_reserve(raw, bound)) {
        free(v);
        return PROTO_ERR_NOMEM;
    }
    size_t enc = meshopt_encodeVertexBuffer(raw->data + raw->len, bound, v, n, 8);
    free(v);
    if (enc == 0 && n > 0)
        return PROTO_ERR_CORRUPT;
    wire_put_u32(raw->data + raw->len - 4, (uint32_t)enc);
    raw->len += enc;
    return PROTO_OK;
}

static proto_status take_vertices(wire_cursor *c, uint32_t n, uint16_t **out)
{
    uint32_t enc = wire_take_u32(c);
    const uint8_t *p = wire_take(c, enc);
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
            (*out)[i * 3 + b] = wire_get_u16(v + (size_t)i * 8 + (size_t)b * 2);
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
    uint8_t *p = wire_put(&raw, NULL, 4 + 24);
    if (!p)
        return PROTO_ERR_NOMEM;
    wire_put_u32(p, (uint32_t)m->nsurf);
    for (int b = 0; b < 3; b++) {
        wire_put_f32(p + 4 + 4 * b, m->bmin[b]);
        wire_put_f32(p + 16 + 4 * b, m->bmax[b]);
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
        if (!wire_put(&raw, NULL, 16) || !wire_reserve(&raw, ibound)) {
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
        wire_put_u32(sp + 4, s->nvert);
        wire_put_u32(sp + 8, s->ntri);
        wire_put_u32(sp + 12, (uint32_t)ienc);
        st = put_vertices(&raw, s->q, NULL, s->nvert);
    }
    if (st == PROTO_OK)
        st = wire_finish(out, h, PROTO_KIND_MESH_KEY, 0, &raw, zstd_level);
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
    uint8_t *p = wire_put(&raw, NULL, 4 + 8);
    if (!p)
        return PROTO_ERR_NOMEM;
    wire_put_u32(p, (uint32_t)cur->nsurf);
    wire_put_u64(p + 4, cur->key_frame);
    for (int k = 0; k < cur->nsurf && st == PROTO_OK; k++) {
        uint8_t *sp = wire_put(&raw, NULL, 8);
        if (!sp) {
            st = PROTO_ERR_NOMEM;
            break;
        }
        sp[0] = cur->surf[k].id;
        wire_put_u32(sp + 4, cur->surf[k].nvert);
        st = put_vertices(&raw, cur->surf[k].q, key->surf[k].q, cur->surf[k].nvert);
    }
    if (st == PROTO_OK)
        st = wire_finish(out, h, PROTO_KIND_MESH_DELTA, 0, &raw, zstd_level);
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
    proto_status st =
        wire_open(&out->h, &raw, buf, len, 1u << PROTO_KIND_MESH_KEY | 1u << PROTO_KIND_MESH_DELTA);
    if (st != PROTO_OK)
        return st;
    wire_cursor c = {raw, raw + out->h.raw_size, 0};
    int key = out->h.kind == PROTO_KIND_MESH_KEY;
    uint32_t nsurf = wire_take_u32(&c);
    if (nsurf > PROTO_MAX_SURFACES)
        st = PROTO_ERR_LIMIT;
    if (key) {
        const uint8_t *b = wire_take(&c, 24);
        for (int i = 0; b && i < 3; i++) {
            out->bmin[i] = wire_get_f32(b + 4 * i);
            out->bmax[i] = wire_get_f32(b + 12 + 4 * i);
            if (!isfinite(out->bmin[i]) || !isfinite(out->bmax[i]))
                st = PROTO_ERR_CORRUPT;
        }
    } else {
        const uint8_t *b = wire_take(&c, 8);
        out->key_frame = b ? wire_get_u64(b) : 0;
    }
    for (uint32_t k = 0; k < nsurf && st == PROTO_OK && !c.bad; k++) {
        const uint8_t *sp = wire_take(&c, key ? 16 : 8);
        if (!sp)
            break;
        out->nsurf = (int)k + 1;
        out->surf[k].id = sp[0];
        out->surf[k].nvert = wire_get_u32(sp + 4);
        if ((uint64_t)out->surf[k].nvert * 8 > PROTO_MAX_PAYLOAD) {
            st = PROTO_ERR_LIMIT;
            break;
        }
        if (key) {
            uint32_t ntri = wire_get_u32(sp + 8), ib = wire_get_u32(sp + 12);
            if ((uint64_t)ntri * 12 > PROTO_MAX_PAYLOAD) {
                st = PROTO_ERR_LIMIT;
                break;
            }
            const uint8_t *ip = wire_take(&c, ib);
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
    uint8_t *p = wire_put(&raw, NULL, 4 + (size_t)n * LOD_ENTRY);
    if (!p)
        return PROTO_ERR_NOMEM;
    wire_put_u32(p, n);
    for (uint32_t i = 0; i < n; i++) {
        uint8_t *q = p + 4 + (size_t)i * LOD_ENTRY;
        q[0] = e[i].lod;
        q[1] = q[2] = q[3] = 0;
        wire_put_u32(q + 4, e[i].first_vertex);
        wire_put_u32(q + 8, e[i].nvert);
        wire_put_f32(q + 12, e[i].e_pos);
        wire_put_f32(q + 16, e[i].e_vel);
    }
    proto_status st = wire_finish(out, h, PROTO_KIND_LOD_TABLE, 0, &raw, zstd_level);
    proto_buf_free(&raw);
    return st;
}

proto_status proto_decode_lod_table(proto_header *h, proto_lod_entry **entries, uint32_t *n,
                                    const uint8_t *buf, size_t len)
{
    *entries = NULL;
    *n = 0;
    uint8_t *raw;
    proto_status st = wire_open(h, &raw, buf, len, 1u << PROTO_KIND_LOD_TABLE);
    if (st != PROTO_OK)
        return st;
    uint32_t cnt = h->raw_size >= 4 ? wire_get_u32(raw) : 0;
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
        e[i].first_vertex = wire_get_u32(q + 4);
        e[i].nvert = wire_get_u32(q + 8);
        e[i].e_pos = wire_get_f32(q + 12);
        e[i].e_vel = wire_get_f32(q + 16);
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
