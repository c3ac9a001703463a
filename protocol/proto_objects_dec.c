/* proto_objects_dec.c: the object frame decoder (kind 5, protocol/README.md "Object frames").
 *
 * A decoder holds the objects a client knows: each one's key (box, topology, base vertices:
 * the key's and every append since), and this frame's vertices and transform. A frame is
 * applied in two passes. The first reads every record and checks it against the bytes
 * (sizes, codecs, every index below its vertex count, every value inside its box) and
 * against the objects held (a delta, transform, append or removal names the key the object
 * holds; an append starts where the object ends; the limits hold after the frame); it
 * allocates all it will need, growing arrays only past what is visible. The second pass
 * cannot fail: it moves the records in. A refused frame therefore changes nothing, and the
 * client can wait for a snapshot with what it had. */
#include "proto.h"
#include "proto_wire.h"

#include <math.h>
#include <meshoptimizer.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct dobj {
    proto_object pub;
    uint16_t *base, *cur; /* (cap_vert x 4) */
    uint32_t *elem;       /* (cap_elem x elem size) */
    uint32_t cap_vert, cap_elem;
    int moved; /* cur differs from base, or xf from key_xf */
} dobj;

struct proto_decoder {
    dobj **obj; /* sorted by id */
    uint32_t nobj;
    uint16_t *removed; /* (PROTO_MAX_OBJECTS) */
    uint32_t nremoved;
};

/* One record of the frame being applied, read and checked. */
typedef struct rec {
    uint16_t id, key;
    unsigned parts;
    dobj *held;  /* the object held under this id, or NULL */
    dobj *fresh; /* KEY: the new object, built in full */
    uint32_t a_vert0, a_nvert, a_elem0, a_nelem;
    uint32_t *a_elem; /* APPEND on a held object: (a_nelem x elem size) */
    uint16_t *a_v;    /* (a_nvert x 4) */
    proto_transform xf;
    uint16_t *d; /* DELTA on a held object: (nvert x 4) */
} rec;

typedef struct ctx {
    proto_decoder *d;
    const proto_header *h;
    wire_cursor c;
    char *err;
    size_t err_sz;
} ctx;

static proto_status fail(ctx *x, proto_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static proto_status fail(ctx *x, proto_status st, const char *fmt, ...)
{
    if (x->err && x->err_sz) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(x->err, x->err_sz, fmt, ap);
        va_end(ap);
    }
    return st;
}

static void dobj_free(dobj *o)
{
    if (!o)
        return;
    free(o->base);
    free(o->cur);
    free(o->elem);
    free(o);
}

proto_status proto_decoder_create(proto_decoder **out)
{
    proto_decoder *d = calloc(1, sizeof *d);
    if (d)
        d->removed = malloc(PROTO_MAX_OBJECTS * sizeof *d->removed);
    if (!d || !d->removed) {
        free(d);
        *out = NULL;
        return PROTO_ERR_NOMEM;
    }
    *out = d;
    return PROTO_OK;
}

void proto_decoder_destroy(proto_decoder *d)
{
    if (!d)
        return;
    for (uint32_t i = 0; i < d->nobj; i++)
        dobj_free(d->obj[i]);
    free(d->obj);
    free(d->removed);
    free(d);
}

uint32_t proto_decoder_count(const proto_decoder *d)
{
    return d->nobj;
}

const proto_object *proto_decoder_object(const proto_decoder *d, uint32_t i)
{
    return i < d->nobj ? &d->obj[i]->pub : NULL;
}

static dobj *find(const proto_decoder *d, uint16_t id)
{
    uint32_t lo = 0, hi = d->nobj;
    while (lo < hi) {
        uint32_t mid = (lo + hi) / 2;
        if (d->obj[mid]->pub.id < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < d->nobj && d->obj[lo]->pub.id == id ? d->obj[lo] : NULL;
}

const proto_object *proto_decoder_find(const proto_decoder *d, uint16_t id)
{
    dobj *o = find(d, id);
    return o ? &o->pub : NULL;
}

uint32_t proto_decoder_removed(const proto_decoder *d, const uint16_t **ids)
{
    *ids = d->removed;
    return d->nremoved;
}

void proto_object_positions(const proto_object *o, float *local)
{
    float top = (float)((1u << o->qbits) - 1u);
    for (uint32_t i = 0; i < o->nvert; i++)
        for (int b = 0; b < 3; b++)
            local[i * 3 + b] =
                o->bmin[b] + (o->bmax[b] - o->bmin[b]) * ((float)o->q[i * 4 + b] / top);
}

void proto_object_scalars(const proto_object *o, float *s)
{
    for (uint32_t i = 0; i < o->nvert; i++)
        s[i] = o->has_scalar ? o->smin + (o->smax - o->smin) * ((float)o->q[i * 4 + 3] / 65535.0f)
                             : 0.0f;
}

/* ------------------------------------------------------------------ reading */

/* Room for n vertices and m elements, contents kept (the object stays as it was). */
static int reserve(dobj *o, uint32_t n, uint32_t m)
{
    uint32_t cv = o->cap_vert, cv2 = o->cap_vert;
    int ok = wire_grow((void **)&o->base, &cv, n, 4 * sizeof(uint16_t)) &&
             wire_grow((void **)&o->cur, &cv2, n, 4 * sizeof(uint16_t));
    if (ok)
        o->cap_vert = cv;
    ok = ok && wire_grow((void **)&o->elem, &o->cap_elem, m,
                         wire_elem_size(o->pub.primitive) * sizeof(uint32_t));
    o->pub.base_q = o->base;
    o->pub.q = o->cur;
    o->pub.elem = o->elem;
    return ok;
}

static int finite_n(const float *v, int n)
{
    for (int k = 0; k < n; k++)
        if (!isfinite(v[k]))
            return 0;
    return 1;
}

static proto_status read_xf(ctx *x, proto_transform *xf, uint16_t id)
{
    const uint8_t *p = wire_take(&x->c, OBJ_XF);
    if (!p)
        return fail(x, PROTO_ERR_CORRUPT, "object %u: truncated transform", id);
    for (int k = 0; k < 3; k++)
        xf->t[k] = wire_get_f32(p + 4 * k);
    for (int k = 0; k < 4; k++)
        xf->r[k] = wire_get_f32(p + 12 + 4 * k);
    double n2 = 0;
    for (int k = 0; k < 4; k++)
        n2 += (double)xf->r[k] * (double)xf->r[k];
    if (!finite_n(xf->t, 3) || !finite_n(xf->r, 4) || fabs(n2 - 1.0) > (double)OBJ_UNIT_TOL)
        return fail(x, PROTO_ERR_CORRUPT, "object %u: transform not finite or not a unit rotation",
                    id);
    return PROTO_OK;
}

/* TRANSFORM: a frame's transform, coded against t's key. */
static proto_status read_xf_code(ctx *x, rec *r, const dobj *t)
{
    const uint8_t *p = wire_take(&x->c, OBJ_XF_CODE);
    if (!p)
        return fail(x, PROTO_ERR_CORRUPT, "object %u: truncated transform", r->id);
    wire_xf_code code;
    wire_xf_get(p, &code);
    if (!wire_xf_decode(&t->pub.key_xf, t->pub.tstep, &code, &r->xf))
        return fail(x, PROTO_ERR_CORRUPT, "object %u: transform code names no rotation", r->id);
    return PROTO_OK;
}

/* A vertex stream of n vertices into v (n x 4, malloc'd), each x, y, z at most top and the
 * scalar 0 unless scalar. base given: the values are zigzag-coded differences from it (the
 * first split vertices from base, the rest from base2), v gets the differences and the
 * check is on base + difference. */
static proto_status read_verts(ctx *x, uint32_t n, uint16_t **v, uint16_t top, int scalar,
                               const uint16_t *base, const uint16_t *base2, uint32_t split,
                               uint16_t id)
{
    int delta = base != NULL;
    *v = NULL;
    uint32_t bytes = wire_take_u32(&x->c);
    const uint8_t *p = wire_take(&x->c, bytes);
    if (!p)
        return fail(x, PROTO_ERR_CORRUPT, "object %u: truncated vertex stream", id);
    if (n == 0)
        return bytes ? fail(x, PROTO_ERR_CORRUPT, "object %u: vertex bytes for no vertex", id)
                     : PROTO_OK;
    uint16_t *out = malloc((size_t)n * OBJ_VERTEX);
    if (!out)
        return PROTO_ERR_NOMEM;
    if (meshopt_decodeVertexBuffer(out, n, OBJ_VERTEX, p, bytes) != 0) {
        free(out);
        return fail(x, PROTO_ERR_CORRUPT, "object %u: undecodable vertex stream", id);
    }
    const uint8_t *raw = (const uint8_t *)out;
    for (size_t i = 0; i < (size_t)n * 4; i++) {
        out[i] = wire_get_u16(raw + 2 * i); /* little-endian on the wire, any host */
        const uint16_t *b = i < (size_t)split * 4 ? base : base2;
        size_t bi = i < (size_t)split * 4 ? i : i - (size_t)split * 4;
        if (delta)
            out[i] = wire_unzigzag(out[i]);
        uint16_t val = b ? (uint16_t)(b[bi] + out[i]) : out[i];
        if ((i % 4 == 3) ? (!scalar && val) : val > top) {
            free(out);
            return fail(x, PROTO_ERR_CORRUPT,
                        "object %u: vertex %zu outside its box (or a scalar without one)", id,
                        i / 4);
        }
    }
    *v = out;
    return PROTO_OK;
}

/* An element stream of n elements (triangles or segments) into e (malloc'd); each index
 * below nvert. */
static proto_status read_elems(ctx *x, unsigned primitive, uint32_t n, uint32_t nvert, uint32_t **e,
                               uint16_t id)
{
    *e = NULL;
    uint32_t bytes = wire_take_u32(&x->c);
    const uint8_t *p = wire_take(&x->c, bytes);
    if (!p)
        return fail(x, PROTO_ERR_CORRUPT, "object %u: truncated element stream", id);
    if (n == 0)
        return bytes ? fail(x, PROTO_ERR_CORRUPT, "object %u: element bytes for no element", id)
                     : PROTO_OK;
    size_t nidx = (size_t)n * wire_elem_size(primitive);
    uint32_t *out = malloc(nidx * sizeof *out);
    if (!out)
        return PROTO_ERR_NOMEM;
    int r = primitive == PROTO_PRIM_TRIANGLES
                ? meshopt_decodeIndexBuffer(out, nidx, sizeof *out, p, bytes)
                : meshopt_decodeIndexSequence(out, nidx, sizeof *out, p, bytes);
    if (r != 0) {
        free(out);
        return fail(x, PROTO_ERR_CORRUPT, "object %u: undecodable element stream", id);
    }
    for (size_t i = 0; i < nidx; i++)
        if (out[i] >= nvert) {
            uint32_t bad = out[i];
            free(out);
            return fail(x, PROTO_ERR_CORRUPT, "object %u: element %zu names vertex %u of %u", id,
                        i / wire_elem_size(primitive), bad, nvert);
        }
    *e = out;
    return PROTO_OK;
}

/* KEY: a whole new object in r->fresh. */
static proto_status read_key(ctx *x, rec *r)
{
    const uint8_t *p = wire_take(&x->c, OBJ_KEY_HEAD);
    if (!p)
        return fail(x, PROTO_ERR_CORRUPT, "object %u: truncated key", r->id);
    unsigned prim = p[0], qbits = p[1], flags = p[2], ninfo = p[4];
    if (!wire_elem_size(prim) || qbits < 1 || qbits > 16 || (flags & ~OBJ_KEY_SCALAR) ||
        ninfo > PROTO_MAX_INFO || p[5] || p[6] || p[7])
        return fail(x, PROTO_ERR_CORRUPT, "object %u: bad key (primitive %u, qbits %u, flags %u)",
                    r->id, prim, qbits, flags);
    dobj *o = r->fresh = calloc(1, sizeof *o);
    if (!o)
        return PROTO_ERR_NOMEM;
    proto_object *k = &o->pub;
    k->id = r->id;
    k->key = r->key;
    k->primitive = (uint8_t)prim;
    k->qbits = (uint8_t)qbits;
    k->has_scalar = (uint8_t)(flags & OBJ_KEY_SCALAR);
    k->lod = p[3];
    k->ninfo = (uint8_t)ninfo;
    k->key_frame = x->h->frame;
    const uint8_t *info = wire_take(&x->c, 4u * ninfo);
    for (unsigned i = 0; info && i < ninfo; i++)
        k->info[i] = wire_get_f32(info + 4 * i);
    proto_status st = read_xf(x, &k->key_xf, r->id);
    if (st != PROTO_OK)
        return st;
    const uint8_t *b = wire_take(&x->c, OBJ_KEY_BODY);
    if (!b || !info)
        return fail(x, PROTO_ERR_CORRUPT, "object %u: truncated key", r->id);
    for (int i = 0; i < 3; i++) {
        k->bmin[i] = wire_get_f32(b + 4 * i);
        k->bmax[i] = wire_get_f32(b + 12 + 4 * i);
    }
    k->smin = wire_get_f32(b + 24);
    k->smax = wire_get_f32(b + 28);
    k->tstep = wire_get_f32(b + 32);
    k->nvert = wire_get_u32(b + 36);
    k->nelem = wire_get_u32(b + 40);
    int box_ok = finite_n(k->bmin, 3) && finite_n(k->bmax, 3) && finite_n(k->info, PROTO_MAX_INFO);
    for (int i = 0; i < 3; i++)
        box_ok = box_ok && k->bmax[i] >= k->bmin[i];
    box_ok = box_ok && isfinite(k->tstep) && k->tstep > 0.0f;
    box_ok = box_ok && (k->has_scalar ? isfinite(k->smin) && isfinite(k->smax) && k->smax >= k->smin
                                      : k->smin == 0.0f && k->smax == 0.0f);
    if (!box_ok)
        return fail(x, PROTO_ERR_CORRUPT, "object %u: bad box, scalar range, step or info", r->id);
    if (k->nvert > PROTO_MAX_OBJECT_VERTS || k->nelem > PROTO_MAX_OBJECT_ELEMS)
        return fail(x, PROTO_ERR_LIMIT, "object %u: %u vertices, %u elements", r->id, k->nvert,
                    k->nelem);
    k->xf = k->key_xf;
    if ((st = read_elems(x, prim, k->nelem, k->nvert, &o->elem, r->id)) != PROTO_OK ||
        (st = read_verts(x, k->nvert, &o->base, (uint16_t)((1u << qbits) - 1u), k->has_scalar, NULL,
                         NULL, 0, r->id)) != PROTO_OK)
        return st;
    o->cap_vert = k->nvert;
    o->cap_elem = k->nelem;
    o->cur = malloc((size_t)k->nvert * OBJ_VERTEX + 1);
    if (!o->cur)
        return PROTO_ERR_NOMEM;
    if (k->nvert)
        memcpy(o->cur, o->base, (size_t)k->nvert * OBJ_VERTEX);
    k->base_q = o->base;
    k->q = o->cur;
    k->elem = o->elem;
    return PROTO_OK;
}

/* APPEND onto t (the record's fresh object, or the held one). */
static proto_status read_append(ctx *x, rec *r, dobj *t)
{
    const uint8_t *p = wire_take(&x->c, OBJ_APPEND_HEAD);
    if (!p)
        return fail(x, PROTO_ERR_CORRUPT, "object %u: truncated append", r->id);
    r->a_vert0 = wire_get_u32(p);
    r->a_elem0 = wire_get_u32(p + 4);
    r->a_nvert = wire_get_u32(p + 8);
    r->a_nelem = wire_get_u32(p + 12);
    const proto_object *k = &t->pub;
    if (r->a_vert0 != k->nvert || r->a_elem0 != k->nelem)
        return fail(x, PROTO_ERR_STATE,
                    "object %u: append at vertex %u, element %u; it has %u and %u", r->id,
                    r->a_vert0, r->a_elem0, k->nvert, k->nelem);
    if ((uint64_t)r->a_vert0 + r->a_nvert > PROTO_MAX_OBJECT_VERTS ||
        (uint64_t)r->a_elem0 + r->a_nelem > PROTO_MAX_OBJECT_ELEMS)
        return fail(x, PROTO_ERR_LIMIT, "object %u: append past the object limits", r->id);
    uint32_t nv = r->a_vert0 + r->a_nvert, ne = r->a_elem0 + r->a_nelem;
    proto_status st = read_elems(x, k->primitive, r->a_nelem, nv, &r->a_elem, r->id);
    if (st == PROTO_OK)
        st = read_verts(x, r->a_nvert, &r->a_v, (uint16_t)((1u << k->qbits) - 1u), k->has_scalar,
                        NULL, NULL, 0, r->id);
    if (st == PROTO_OK && !reserve(t, nv ? nv : 1, ne ? ne : 1))
        st = PROTO_ERR_NOMEM;
    if (st != PROTO_OK || t != r->fresh)
        return st;
    /* A fresh object is private: the append goes in at once. */
    size_t es = wire_elem_size(k->primitive);
    if (r->a_nvert) {
        memcpy(t->base + (size_t)r->a_vert0 * 4, r->a_v, (size_t)r->a_nvert * OBJ_VERTEX);
        memcpy(t->cur + (size_t)r->a_vert0 * 4, r->a_v, (size_t)r->a_nvert * OBJ_VERTEX);
    }
    if (r->a_nelem)
        memcpy(t->elem + (size_t)r->a_elem0 * es, r->a_elem, (size_t)r->a_nelem * es * 4);
    t->pub.nvert = nv;
    t->pub.nelem = ne;
    free(r->a_v);
    free(r->a_elem);
    r->a_v = NULL;
    r->a_elem = NULL;
    return PROTO_OK;
}

/* A sparse DELTA's ranges and their vertices into d (n x 4 differences, malloc'd; zero
 * outside the ranges): the ranges ascending, disjoint, non-empty and inside n; the vertices
 * checked against their base (base below split, base2 past it) as read_verts does. */
static proto_status read_sparse(ctx *x, uint32_t n, uint16_t **d, uint16_t top, int scalar,
                                const uint16_t *base, const uint16_t *base2, uint32_t split,
                                uint16_t id)
{
    *d = NULL;
    uint32_t nr = wire_take_u32(&x->c);
    const uint8_t *p = x->c.bad || nr > n ? NULL : wire_take(&x->c, 8 * (size_t)nr);
    if (!p)
        return fail(x, PROTO_ERR_CORRUPT, "object %u: truncated or too many delta ranges", id);
    uint64_t m = 0, end = 0;
    for (uint32_t r = 0; r < nr; r++) {
        uint64_t a = wire_get_u32(p + 8 * r), c = wire_get_u32(p + 8 * r + 4);
        if (c == 0 || a < end || a + c > n)
            return fail(x, PROTO_ERR_CORRUPT,
                        "object %u: delta range %u (%llu, %llu) not ascending, disjoint, inside",
                        id, r, (unsigned long long)a, (unsigned long long)c);
        end = a + c;
        m += c;
    }
    uint16_t *gb = malloc((size_t)(m ? m : 1) * OBJ_VERTEX), *dd = NULL;
    uint16_t *out = calloc((size_t)n * 4 + 4, sizeof(uint16_t));
    proto_status st = gb && out ? PROTO_OK : PROTO_ERR_NOMEM;
    for (uint32_t r = 0, k = 0; st == PROTO_OK && r < nr; r++) { /* the ranges' base */
        uint32_t a = wire_get_u32(p + 8 * r), c = wire_get_u32(p + 8 * r + 4);
        for (uint32_t v = a; v < a + c; v++, k++)
            memcpy(gb + 4 * (size_t)k,
                   v < split ? base + 4 * (size_t)v : base2 + 4 * (size_t)(v - split), OBJ_VERTEX);
    }
    if (st == PROTO_OK)
        st = read_verts(x, (uint32_t)m, &dd, top, scalar, gb, NULL, (uint32_t)m, id);
    for (uint32_t r = 0, k = 0; st == PROTO_OK && r < nr; r++) {
        uint32_t a = wire_get_u32(p + 8 * r), c = wire_get_u32(p + 8 * r + 4);
        memcpy(out + 4 * (size_t)a, dd + 4 * (size_t)k, (size_t)c * OBJ_VERTEX);
        k += c;
    }
    free(gb);
    free(dd);
    if (st != PROTO_OK) {
        free(out);
        return st;
    }
    *d = out;
    return PROTO_OK;
}

/* DELTA against t's base (with this record's append, for a held object). */
static proto_status read_delta(ctx *x, rec *r, dobj *t)
{
    uint32_t n = wire_take_u32(&x->c);
    const proto_object *k = &t->pub;
    uint32_t have = t == r->fresh ? k->nvert : k->nvert + r->a_nvert;
    if (x->c.bad)
        return fail(x, PROTO_ERR_CORRUPT, "object %u: truncated delta", r->id);
    if (n != have)
        return fail(x, PROTO_ERR_STATE, "object %u: delta of %u vertices; it has %u", r->id, n,
                    have);
    uint16_t top = (uint16_t)((1u << k->qbits) - 1u);
    const uint16_t *b2 = t == r->fresh ? NULL : r->a_v;
    uint16_t *d;
    proto_status st = (r->parts & PROTO_PART_SPARSE)
                          ? read_sparse(x, n, &d, top, k->has_scalar, t->base, b2, k->nvert, r->id)
                          : read_verts(x, n, &d, top, k->has_scalar, t->base, b2, k->nvert, r->id);
    if (st != PROTO_OK || t != r->fresh) {
        r->d = d;
        return st;
    }
    for (size_t i = 0; i < (size_t)n * 4; i++)
        t->cur[i] = (uint16_t)(t->base[i] + d[i]);
    t->moved = 1;
    free(d);
    return PROTO_OK;
}

/* Read one record and check it against the objects held. */
static proto_status read_record(ctx *x, rec *r, int prev_id)
{
    const uint8_t *p = wire_take(&x->c, OBJ_RECORD_HEAD);
    if (!p)
        return fail(x, PROTO_ERR_CORRUPT, "truncated record");
    r->id = wire_get_u16(p);
    r->key = wire_get_u16(p + 2);
    r->parts = p[4];
    if ((int)r->id <= prev_id)
        return fail(x, PROTO_ERR_CORRUPT, "object %u after object %d: ids must increase", r->id,
                    prev_id);
    if (!r->parts || (r->parts & ~0x7fu) || p[5] ||
        ((r->parts & PROTO_PART_SPARSE) && !(r->parts & PROTO_PART_DELTA)) ||
        ((r->parts & PROTO_PART_REMOVE) && r->parts != PROTO_PART_REMOVE) ||
        ((r->parts & PROTO_PART_HOLD) && (r->parts & ~(PROTO_PART_HOLD | PROTO_PART_TRANSFORM))))
        return fail(x, PROTO_ERR_CORRUPT, "object %u: bad parts %u", r->id, r->parts);
    if ((x->h->flags & PROTO_FLAG_SNAPSHOT) && !(r->parts & PROTO_PART_KEY))
        return fail(x, PROTO_ERR_CORRUPT, "object %u: a snapshot keys every object", r->id);
    r->held = find(x->d, r->id);
    if (!(r->parts & PROTO_PART_KEY) && (!r->held || r->held->pub.key != r->key)) {
        if (!r->held)
            return fail(x, PROTO_ERR_STATE, "object %u: not held", r->id);
        return fail(x, PROTO_ERR_STATE, "object %u: for key %u; the key held is %u", r->id, r->key,
                    r->held->pub.key);
    }
    proto_status st = PROTO_OK;
    if (r->parts & PROTO_PART_KEY)
        st = read_key(x, r);
    dobj *t = r->fresh ? r->fresh : r->held;
    if (st == PROTO_OK && (r->parts & PROTO_PART_APPEND))
        st = read_append(x, r, t);
    if (st == PROTO_OK && (r->parts & PROTO_PART_TRANSFORM))
        st = read_xf_code(x, r, t);
    if (st == PROTO_OK && (r->parts & PROTO_PART_DELTA))
        st = read_delta(x, r, t);
    if (st == PROTO_OK && r->fresh) {
        if (r->parts & PROTO_PART_TRANSFORM) {
            r->fresh->pub.xf = r->xf;
            r->fresh->moved = 1;
        }
        r->fresh->pub.parts = (uint8_t)r->parts;
    }
    return st;
}

/* ------------------------------------------------------------------ applying */

static void rec_free(rec *r)
{
    dobj_free(r->fresh);
    free(r->a_elem);
    free(r->a_v);
    free(r->d);
}

/* Bring a held object named by a record (no key) to this frame. */
static void update_held(dobj *o, rec *r)
{
    proto_object *k = &o->pub;
    k->parts = (uint8_t)r->parts;
    if (r->parts & PROTO_PART_HOLD) { /* it shows the vertices it showed */
        if (r->parts & PROTO_PART_TRANSFORM) {
            k->xf = r->xf; /* and walks on: this frame's transform */
            o->moved = 1;
        }
        return;
    }
    if (r->parts & PROTO_PART_APPEND) {
        size_t es = wire_elem_size(k->primitive);
        if (r->a_nvert)
            memcpy(o->base + (size_t)k->nvert * 4, r->a_v, (size_t)r->a_nvert * OBJ_VERTEX);
        if (r->a_nelem)
            memcpy(o->elem + (size_t)k->nelem * es, r->a_elem, (size_t)r->a_nelem * es * 4);
        k->nvert += r->a_nvert;
        k->nelem += r->a_nelem;
    }
    if (r->parts & PROTO_PART_DELTA)
        for (size_t i = 0; i < (size_t)k->nvert * 4; i++)
            o->cur[i] = (uint16_t)(o->base[i] + r->d[i]);
    else if (o->moved || (r->parts & PROTO_PART_APPEND))
        memcpy(o->cur, o->base, (size_t)k->nvert * OBJ_VERTEX);
    k->xf = (r->parts & PROTO_PART_TRANSFORM) ? r->xf : k->key_xf;
    o->moved = (r->parts & (PROTO_PART_DELTA | PROTO_PART_TRANSFORM)) != 0;
    k->parts = (uint8_t)r->parts;
}

/* A held object the frame does not name: its key state. */
static void rest_held(dobj *o)
{
    if (o->moved)
        memcpy(o->cur, o->base, (size_t)o->pub.nvert * OBJ_VERTEX);
    o->pub.xf = o->pub.key_xf;
    o->moved = 0;
    o->pub.parts = 0;
}

/* Totals after the frame within the limits; the new object array allocated. */
static proto_status check_totals(ctx *x, const rec *r, uint32_t n, dobj ***next)
{
    const proto_decoder *d = x->d;
    int snap = (x->h->flags & PROTO_FLAG_SNAPSHOT) != 0;
    uint64_t nobj = 0, tv = 0, te = 0;
    for (uint32_t i = 0, j = 0; i < d->nobj || j < n;) {
        uint16_t hid = i < d->nobj ? d->obj[i]->pub.id : 0;
        if (j >= n || (i < d->nobj && hid < r[j].id)) { /* held, not named */
            if (!snap) {
                nobj++;
                tv += d->obj[i]->pub.nvert;
                te += d->obj[i]->pub.nelem;
            }
            i++;
            continue;
        }
        const rec *q = &r[j++];
        i += i < d->nobj && hid == q->id;
        const proto_object *k = q->fresh ? &q->fresh->pub : q->held ? &q->held->pub : NULL;
        if (q->parts == PROTO_PART_REMOVE || !k)
            continue;
        nobj++;
        tv += k->nvert + (q->fresh ? 0 : q->a_nvert);
        te += k->nelem + (q->fresh ? 0 : q->a_nelem);
    }
    if (nobj > PROTO_MAX_OBJECTS || tv > PROTO_MAX_TOTAL_VERTS || te > PROTO_MAX_TOTAL_ELEMS)
        return fail(x, PROTO_ERR_LIMIT,
                    "after this frame: %llu objects, %llu vertices, %llu elements",
                    (unsigned long long)nobj, (unsigned long long)tv, (unsigned long long)te);
    *next = malloc(((size_t)nobj + 1) * sizeof **next);
    return *next ? PROTO_OK : PROTO_ERR_NOMEM;
}

/* The second pass: cannot fail. */
static void commit(proto_decoder *d, rec *r, uint32_t n, int snap, dobj **next)
{
    uint32_t m = 0;
    d->nremoved = 0;
    for (uint32_t i = 0, j = 0; i < d->nobj || j < n;) {
        dobj *h = i < d->nobj ? d->obj[i] : NULL;
        if (j >= n || (h && h->pub.id < r[j].id)) {
            if (snap) {
                d->removed[d->nremoved++] = h->pub.id;
                dobj_free(h);
            } else {
                rest_held(h);
                next[m++] = h;
            }
            i++;
            continue;
        }
        rec *q = &r[j++];
        if (h && h->pub.id == q->id)
            i++;
        else
            h = NULL;
        if (q->parts == PROTO_PART_REMOVE) {
            d->removed[d->nremoved++] = q->id;
            dobj_free(h);
        } else if (q->fresh) {
            dobj_free(h);
            next[m++] = q->fresh;
            q->fresh = NULL;
        } else {
            update_held(h, q);
            next[m++] = h;
        }
    }
    free(d->obj);
    d->obj = next;
    d->nobj = m;
}

proto_status proto_decoder_apply(proto_decoder *d, const uint8_t *buf, size_t len, proto_header *h,
                                 char *err, size_t err_sz)
{
    proto_header hh;
    uint8_t *raw = NULL;
    ctx x = {d, &hh, {NULL, NULL, 0}, err, err_sz};
    if (err && err_sz)
        err[0] = 0;
    proto_status st = wire_open(&hh, &raw, buf, len, 1u << PROTO_KIND_OBJECTS);
    if (h)
        *h = hh;
    if (st != PROTO_OK)
        return fail(&x, st, "%s", proto_status_str(st));
    x.c = (wire_cursor){raw, raw + hh.raw_size, 0};
    uint32_t n = wire_take_u32(&x.c);
    rec *r = NULL;
    if (x.c.bad)
        st = fail(&x, PROTO_ERR_CORRUPT, "no record count");
    else if (n > PROTO_MAX_OBJECTS)
        st = fail(&x, PROTO_ERR_LIMIT, "%u records", n);
    else if (!(r = calloc((size_t)n + 1, sizeof *r)))
        st = PROTO_ERR_NOMEM;
    uint32_t nread = 0;
    int structural = (hh.flags & PROTO_FLAG_SNAPSHOT) != 0;
    for (; st == PROTO_OK && nread < n; nread++) {
        st = read_record(&x, &r[nread], nread ? r[nread - 1].id : -1);
        structural |=
            (r[nread].parts & (PROTO_PART_REMOVE | PROTO_PART_KEY | PROTO_PART_APPEND)) != 0;
    }
    if (st == PROTO_OK && x.c.p != x.c.end)
        st = fail(&x, PROTO_ERR_CORRUPT, "%zu bytes after the last record",
                  (size_t)(x.c.end - x.c.p));
    if (st == PROTO_OK && structural != ((hh.flags & PROTO_FLAG_STRUCTURAL) != 0))
        st = fail(&x, PROTO_ERR_CORRUPT, "structural flag %s, records say %s",
                  (hh.flags & PROTO_FLAG_STRUCTURAL) ? "set" : "clear",
                  structural ? "set" : "clear");
    dobj **next = NULL;
    if (st == PROTO_OK)
        st = check_totals(&x, r, n, &next);
    if (st == PROTO_OK)
        commit(d, r, n, (hh.flags & PROTO_FLAG_SNAPSHOT) != 0, next);
    for (uint32_t i = 0; i < nread; i++)
        rec_free(&r[i]);
    free(r);
    free(raw);
    return st;
}
