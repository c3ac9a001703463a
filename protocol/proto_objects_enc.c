/* proto_objects_enc.c: the object frame encoder (kind 5, protocol/README.md "Object frames").
 *
 * The server hands over every live object each frame (local positions, transform, topology);
 * the encoder keeps, per object, its key (box, topology, the base: the key's quantised
 * vertices and every append since) and decides what to send: a key for a new object, a new
 * topology or when a delta would cost more than the key (rekey_ratio), each object on its
 * own (one character's LOD switch re-keys that character only); else an append for topology
 * that grew, the transform when it differs from the key's, and the vertices as zigzag-coded
 * differences from the base, through meshoptimizer's vertex codec and zstd (zigzag keeps
 * the high bytes of small differences of either sign at 0). A cape that only moves rigidly
 * sends no vertex at all; one the server holds (far, its shape updated every few frames) keeps
 * the vertices clients show and sends its transform alone (HOLD | TRANSFORM), so its character
 * walks on between updates.
 *
 * State changes only when a frame is complete: quantised vertices go to a spare array (alt)
 * and appended ones past the held count, both invisible until the commit; a key builds new
 * arrays. An error leaves the encoder as it was, so the next frame is consistent with the
 * last one the clients got. */
#include "proto.h"
#include "proto_wire.h"

#include <math.h>
#include <meshoptimizer.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

typedef struct enc_obj {
    uint16_t id, key;
    uint8_t primitive, qbits, lod, has_scalar, ninfo;
    float info[PROTO_MAX_INFO];
    float bmin[3], bmax[3], smin, smax, tstep;
    proto_transform key_xf;
    wire_xf_code xf; /* the transform clients show, when has_xf (else the key's) */
    int has_xf;
    uint32_t nvert, nelem, topo_version;
    uint32_t cap_vert, cap_elem;
    uint16_t *base, *cur, *alt; /* (cap_vert x 4): base, the vertices clients show, spare */
    uint32_t *elem;             /* (cap_elem x elem size) */
    size_t key_bytes;           /* the key's and appends' stream bytes */
    uint64_t keyed_at;          /* the encoder's frame count when keyed */
    uint64_t input_frame;       /* cur is the quantised input of this frame (+1; 0: it is not) */
} enc_obj;

struct proto_encoder {
    proto_encoder_options o;
    enc_obj *obj; /* sorted by id */
    uint32_t nobj;
    uint64_t frames;
    uint16_t next_key;
    int fresh; /* nothing encoded since create or reset: the next frame is a snapshot */
    uint8_t *vbytes;
    size_t vbytes_cap;
    void *zctx; /* a ZSTD_CCtx kept for every frame (made by the first) */
    /* A sparse delta's scratch: its ranges, and the vertices in them and their base's. */
    uint32_t *sp_ranges;
    uint16_t *sp_cur, *sp_base;
    size_t sp_cap; /* vertices (and pairs of ranges) each has room for */
};

proto_encoder_options proto_default_encoder_options(void)
{
    proto_encoder_options o = {1, 0, 1.0f};
    return o;
}

static void obj_free(enc_obj *o)
{
    free(o->base);
    free(o->cur);
    free(o->alt);
    free(o->elem);
}

proto_status proto_encoder_create(proto_encoder **out, const proto_encoder_options *o)
{
    *out = calloc(1, sizeof **out);
    if (!*out)
        return PROTO_ERR_NOMEM;
    (*out)->o = o ? *o : proto_default_encoder_options();
    (*out)->fresh = 1;
    return PROTO_OK;
}

void proto_encoder_reset(proto_encoder *e)
{
    for (uint32_t i = 0; i < e->nobj; i++)
        obj_free(&e->obj[i]);
    free(e->obj);
    e->obj = NULL;
    e->nobj = 0;
    e->fresh = 1;
}

void proto_encoder_destroy(proto_encoder *e)
{
    if (!e)
        return;
    proto_encoder_reset(e);
    free(e->vbytes);
    ZSTD_freeCCtx((ZSTD_CCtx *)e->zctx);
    free(e->sp_ranges);
    free(e->sp_cur);
    free(e->sp_base);
    free(e);
}

/* The encoder's compression context, made on first use (NULL if that fails: then each frame
 * makes its own, as ZSTD_compress does). */
static void *zctx_of(proto_encoder *e)
{
    if (!e->zctx)
        e->zctx = ZSTD_createCCtx();
    return e->zctx;
}

/* ------------------------------------------------------------------ streams */

static uint16_t qmax(unsigned qbits)
{
    return (uint16_t)((1u << qbits) - 1u);
}

/* n vertices (n x 4 u16), minus base when given (mod 2^16), meshopt-encoded after a u32
 * byte count. *bytes: the encoded size. */
static proto_status put_verts(proto_encoder *e, proto_buf *raw, const uint16_t *v,
                              const uint16_t *base, uint32_t n, size_t *bytes)
{
    uint8_t *len = wire_put(raw, NULL, 4);
    if (!len)
        return PROTO_ERR_NOMEM;
    *bytes = 0;
    if (n == 0)
        return PROTO_OK;
    size_t need = (size_t)n * OBJ_VERTEX;
    if (need > e->vbytes_cap) {
        uint8_t *p = realloc(e->vbytes, need);
        if (!p)
            return PROTO_ERR_NOMEM;
        e->vbytes = p;
        e->vbytes_cap = need;
    }
    for (size_t i = 0; i < (size_t)n * 4; i++)
        wire_put_u16(e->vbytes + i * 2, base ? wire_zigzag((uint16_t)(v[i] - base[i])) : v[i]);
    size_t bound = meshopt_encodeVertexBufferBound(n, OBJ_VERTEX);
    if (!wire_reserve(raw, bound))
        return PROTO_ERR_NOMEM;
    size_t enc = meshopt_encodeVertexBuffer(raw->data + raw->len, bound, e->vbytes, n, OBJ_VERTEX);
    if (enc == 0 || enc > UINT32_MAX)
        return PROTO_ERR_CORRUPT;
    wire_put_u32(raw->data + raw->len - 4, (uint32_t)enc);
    raw->len += enc;
    *bytes = enc;
    return PROTO_OK;
}

/* Vertices closer than this that differ from the base join one range of a sparse delta (the
 * equal ones between cost less as zero differences than as a range). */
#define SPARSE_GAP 16u
/* Below this many vertices a delta is always whole: a few ranges would save nothing. */
#define SPARSE_MIN_VERTS 64u

static int sparse_room(proto_encoder *e, size_t n)
{
    if (n <= e->sp_cap)
        return 1;
    uint32_t *r = realloc(e->sp_ranges, n * 2 * sizeof(uint32_t));
    if (r)
        e->sp_ranges = r;
    uint16_t *c = realloc(e->sp_cur, n * OBJ_VERTEX);
    if (c)
        e->sp_cur = c;
    uint16_t *b = realloc(e->sp_base, n * OBJ_VERTEX);
    if (b)
        e->sp_base = b;
    if (!r || !c || !b)
        return 0;
    e->sp_cap = n;
    return 1;
}

/* A DELTA's body after its u32 nvert: cur against base, n vertices. Where the vertices that
 * differ from the base are at most half of them, a sparse one (*sparse set): u32 nranges,
 * the ranges (u32 first, u32 count), and the stream of those vertices alone; else the
 * stream of all n. *bytes: the stream's size. */
static proto_status put_delta(proto_encoder *e, proto_buf *raw, const uint16_t *cur,
                              const uint16_t *base, uint32_t n, size_t *bytes, int *sparse)
{
    *sparse = 0;
    if (n < SPARSE_MIN_VERTS)
        return put_verts(e, raw, cur, base, n, bytes);
    if (!sparse_room(e, n))
        return PROTO_ERR_NOMEM;
    uint32_t nr = 0, m = 0, end = 0; /* end: past the last differing vertex */
    for (uint32_t v = 0; v < n; v++) {
        uint64_t a, b;
        memcpy(&a, cur + 4 * (size_t)v, sizeof a);
        memcpy(&b, base + 4 * (size_t)v, sizeof b);
        if (a == b)
            continue;
        if (nr && v - end < SPARSE_GAP) { /* joins the last range */
            e->sp_ranges[2 * nr - 1] += v + 1 - end;
        } else {
            e->sp_ranges[2 * nr] = v, e->sp_ranges[2 * nr + 1] = 1;
            nr++;
        }
        end = v + 1;
    }
    for (uint32_t r = 0; r < nr; r++)
        m += e->sp_ranges[2 * r + 1];
    if (nr == 0 || 2 * (uint64_t)m > n)
        return put_verts(e, raw, cur, base, n, bytes);
    uint8_t *h = wire_put(raw, NULL, 4 + 8 * (size_t)nr);
    if (!h)
        return PROTO_ERR_NOMEM;
    wire_put_u32(h, nr);
    for (uint32_t r = 0, k = 0; r < nr; r++) {
        uint32_t a = e->sp_ranges[2 * r], c = e->sp_ranges[2 * r + 1];
        wire_put_u32(h + 4 + 8 * r, a);
        wire_put_u32(h + 8 + 8 * r, c);
        memcpy(e->sp_cur + 4 * (size_t)k, cur + 4 * (size_t)a, (size_t)c * OBJ_VERTEX);
        memcpy(e->sp_base + 4 * (size_t)k, base + 4 * (size_t)a, (size_t)c * OBJ_VERTEX);
        k += c;
    }
    *sparse = 1;
    return put_verts(e, raw, e->sp_cur, e->sp_base, m, bytes);
}

/* nelem elements: triangles through the index codec, segments through the index sequence
 * codec, after a u32 byte count. */
static proto_status put_elems(proto_buf *raw, unsigned primitive, const uint32_t *elem,
                              uint32_t nelem, uint32_t nvert, size_t *bytes)
{
    if (!wire_put(raw, NULL, 4))
        return PROTO_ERR_NOMEM;
    *bytes = 0;
    if (nelem == 0)
        return PROTO_OK;
    size_t nidx = (size_t)nelem * wire_elem_size(primitive);
    size_t bound = primitive == PROTO_PRIM_TRIANGLES
                       ? meshopt_encodeIndexBufferBound(nidx, nvert)
                       : meshopt_encodeIndexSequenceBound(nidx, nvert);
    if (!wire_reserve(raw, bound))
        return PROTO_ERR_NOMEM;
    size_t enc = primitive == PROTO_PRIM_TRIANGLES
                     ? meshopt_encodeIndexBuffer(raw->data + raw->len, bound, elem, nidx)
                     : meshopt_encodeIndexSequence(raw->data + raw->len, bound, elem, nidx);
    if (enc == 0 || enc > UINT32_MAX)
        return PROTO_ERR_CORRUPT;
    wire_put_u32(raw->data + raw->len - 4, (uint32_t)enc);
    raw->len += enc;
    *bytes = enc;
    return PROTO_OK;
}

static proto_status put_xf_code(proto_buf *raw, const wire_xf_code *code)
{
    uint8_t *p = wire_put(raw, NULL, OBJ_XF_CODE);
    if (!p)
        return PROTO_ERR_NOMEM;
    wire_xf_put(p, code);
    return PROTO_OK;
}

static proto_status put_xf(proto_buf *raw, const proto_transform *xf)
{
    uint8_t *p = wire_put(raw, NULL, OBJ_XF);
    if (!p)
        return PROTO_ERR_NOMEM;
    for (int k = 0; k < 3; k++)
        wire_put_f32(p + 4 * k, xf->t[k]);
    for (int k = 0; k < 4; k++)
        wire_put_f32(p + 12 + 4 * k, xf->r[k]);
    return PROTO_OK;
}

static proto_status put_record_head(proto_buf *raw, uint16_t id, uint16_t key, unsigned parts)
{
    uint8_t *p = wire_put(raw, NULL, OBJ_RECORD_HEAD);
    if (!p)
        return PROTO_ERR_NOMEM;
    wire_put_u16(p, id);
    wire_put_u16(p + 2, key);
    p[4] = (uint8_t)parts;
    return PROTO_OK;
}

/* The KEY part of o: its base, elements and key transform. *bytes: its stream bytes. */
static proto_status put_key(proto_encoder *e, proto_buf *raw, const enc_obj *o, size_t *bytes)
{
    uint8_t *p = wire_put(raw, NULL, OBJ_KEY_HEAD + 4u * o->ninfo);
    if (!p)
        return PROTO_ERR_NOMEM;
    p[0] = o->primitive;
    p[1] = o->qbits;
    p[2] = o->has_scalar ? OBJ_KEY_SCALAR : 0;
    p[3] = o->lod;
    p[4] = o->ninfo;
    for (int k = 0; k < o->ninfo; k++)
        wire_put_f32(p + OBJ_KEY_HEAD + 4 * k, o->info[k]);
    proto_status st = put_xf(raw, &o->key_xf);
    if (st != PROTO_OK)
        return st;
    if (!(p = wire_put(raw, NULL, OBJ_KEY_BODY)))
        return PROTO_ERR_NOMEM;
    for (int k = 0; k < 3; k++) {
        wire_put_f32(p + 4 * k, o->bmin[k]);
        wire_put_f32(p + 12 + 4 * k, o->bmax[k]);
    }
    wire_put_f32(p + 24, o->smin);
    wire_put_f32(p + 28, o->smax);
    wire_put_f32(p + 32, o->tstep);
    wire_put_u32(p + 36, o->nvert);
    wire_put_u32(p + 40, o->nelem);
    size_t ib, vb;
    if ((st = put_elems(raw, o->primitive, o->elem, o->nelem, o->nvert, &ib)) != PROTO_OK ||
        (st = put_verts(e, raw, o->base, NULL, o->nvert, &vb)) != PROTO_OK)
        return st;
    *bytes = ib + vb;
    return PROTO_OK;
}

/* ------------------------------------------------------------------ checks */

static int finite_n(const float *v, int n)
{
    for (int k = 0; k < n; k++)
        if (!isfinite(v[k]))
            return 0;
    return 1;
}

/* The input's rotation as a unit quaternion, or 0 when it is zero or not finite. */
static int unit_xf(const proto_transform *in, proto_transform *out)
{
    if (!finite_n(in->t, 3) || !finite_n(in->r, 4))
        return 0;
    float n2 =
        in->r[0] * in->r[0] + in->r[1] * in->r[1] + in->r[2] * in->r[2] + in->r[3] * in->r[3];
    if (!(n2 > 1e-12f) || !isfinite(n2))
        return 0;
    *out = *in;
    if (fabsf(n2 - 1.0f) > 1e-6f) {
        float s = 1.0f / sqrtf(n2);
        for (int k = 0; k < 4; k++)
            out->r[k] *= s;
    }
    return 1;
}

/* The input's transform step, defaulted. */
static float tstep_of(const proto_object_in *o)
{
    if (o->tstep > 0.0f)
        return o->tstep;
    float ext = 0.0f;
    for (int k = 0; k < 3; k++)
        ext = fmaxf(ext, o->bmax[k] - o->bmin[k]);
    return ext > 0.0f ? ext / 65535.0f : 1e-6f;
}

static int input_ok(const proto_object_in *o)
{
    uint32_t es = wire_elem_size(o->primitive);
    proto_transform xf;
    if (!es || o->qbits > 16 || o->ninfo > PROTO_MAX_INFO || !finite_n(o->info, o->ninfo) ||
        !finite_n(o->bmin, 3) || !finite_n(o->bmax, 3) || !unit_xf(&o->xf, &xf) ||
        !isfinite(o->tstep) || o->tstep < 0.0f || !isfinite(tstep_of(o)) ||
        o->nvert > PROTO_MAX_OBJECT_VERTS || o->nelem > PROTO_MAX_OBJECT_ELEMS ||
        (o->nvert && !o->pos) || (o->nelem && !o->elem))
        return 0;
    for (int k = 0; k < 3; k++)
        if (!(o->bmax[k] >= o->bmin[k]))
            return 0;
    if (o->scalar && !(isfinite(o->smin) && isfinite(o->smax) && o->smax >= o->smin))
        return 0;
    uint64_t end = 0; /* ranges: ascending, disjoint, inside */
    for (uint32_t r = 0; o->ranges && r < o->nranges; r++) {
        uint64_t a = o->ranges[2 * r], n = o->ranges[2 * r + 1];
        if (a < end || a + n > o->nvert)
            return 0;
        end = a + n;
    }
    return 1;
}

static int elems_below(const uint32_t *elem, size_t nidx, uint32_t nvert)
{
    for (size_t i = 0; i < nidx; i++)
        if (elem[i] >= nvert)
            return 0;
    return 1;
}

/* ------------------------------------------------------------------ one object */

/* Quantise the input's vertices [first, end) into v (n x 4). */
static void quantise_range(const proto_object_in *in, unsigned qbits, uint16_t *v, uint32_t first,
                           uint32_t end)
{
    float top = (float)qmax(qbits);
    for (uint32_t i = first; i < end; i++) {
        for (int b = 0; b < 3; b++) {
            float ext = in->bmax[b] - in->bmin[b];
            float t = ext > 0.0f ? (in->pos[i * 3 + b] - in->bmin[b]) / ext : 0.0f;
            t = t < 0.0f ? 0.0f : t > 1.0f ? 1.0f : t; /* also maps NaN to 0 */
            v[i * 4 + b] = (uint16_t)lrintf(t * top);
        }
        uint16_t s = 0;
        if (in->scalar) {
            float ext = in->smax - in->smin;
            float t = ext > 0.0f ? (in->scalar[i] - in->smin) / ext : 0.0f;
            t = t < 0.0f ? 0.0f : t > 1.0f ? 1.0f : t;
            s = (uint16_t)lrintf(t * 65535.0f);
        }
        v[i * 4 + 3] = s;
    }
}

static void quantise_in(const proto_object_in *in, unsigned qbits, uint16_t *v)
{
    quantise_range(in, qbits, v, 0, in->nvert);
}

/* What the encoder will do with one input. */
typedef struct plan {
    const proto_object_in *in;
    enc_obj *old; /* the held object, or NULL */
    enc_obj next; /* the state after the commit */
    unsigned parts;
    int new_arrays; /* next owns freshly allocated arrays (a key) */
} plan;

/* Room for n vertices and m elements in o's arrays (contents kept: o stays valid). */
static int reserve_obj(enc_obj *o, uint32_t n, uint32_t m)
{
    size_t vs = 4 * sizeof(uint16_t), es = wire_elem_size(o->primitive) * sizeof(uint32_t);
    uint32_t c = o->cap_vert;
    if (!wire_grow((void **)&o->base, &c, n, vs))
        return 0;
    c = o->cap_vert;
    if (!wire_grow((void **)&o->cur, &c, n, vs))
        return 0;
    c = o->cap_vert;
    if (!wire_grow((void **)&o->alt, &c, n, vs))
        return 0;
    o->cap_vert = c;
    return wire_grow((void **)&o->elem, &o->cap_elem, m, es);
}

/* A fresh key of the input in p->next (new arrays), quantised with the encoder's rules. */
static proto_status plan_key(proto_encoder *e, plan *p, const proto_transform *xf)
{
    const proto_object_in *in = p->in;
    enc_obj *n = &p->next;
    memset(n, 0, sizeof *n);
    n->id = in->id;
    n->key = e->next_key;
    n->primitive = in->primitive;
    n->qbits = in->qbits ? in->qbits : 16;
    n->lod = in->lod;
    n->has_scalar = in->scalar != NULL;
    n->ninfo = in->ninfo;
    memcpy(n->info, in->info, sizeof n->info);
    memcpy(n->bmin, in->bmin, sizeof n->bmin);
    memcpy(n->bmax, in->bmax, sizeof n->bmax);
    n->smin = in->scalar ? in->smin : 0.0f;
    n->smax = in->scalar ? in->smax : 0.0f;
    n->tstep = tstep_of(in);
    n->key_xf = *xf;
    n->nvert = in->nvert;
    n->nelem = in->nelem;
    n->topo_version = in->topo_version;
    n->keyed_at = e->frames;
    p->new_arrays = 1;
    p->parts = PROTO_PART_KEY;
    if (!elems_below(in->elem, (size_t)in->nelem * wire_elem_size(in->primitive), in->nvert))
        return PROTO_ERR_ARG;
    if (!reserve_obj(n, in->nvert ? in->nvert : 1, in->nelem ? in->nelem : 1))
        return PROTO_ERR_NOMEM;
    quantise_in(in, n->qbits, n->base);
    memcpy(n->cur, n->base, (size_t)in->nvert * 4 * sizeof(uint16_t));
    n->input_frame = e->frames + 1;
    if (in->nelem)
        memcpy(n->elem, in->elem, (size_t)in->nelem * wire_elem_size(in->primitive) * 4);
    return PROTO_OK;
}

/* Whether the held object must be keyed whatever its vertices do. */
static int must_key(const proto_encoder *e, const enc_obj *o, const proto_object_in *in)
{
    return !o || in->force_key || in->primitive != o->primitive ||
           (in->qbits ? in->qbits : 16) != o->qbits || in->lod != o->lod ||
           (in->scalar != NULL) != o->has_scalar ||
           (in->scalar && (in->smin != o->smin || in->smax != o->smax)) ||
           tstep_of(in) != o->tstep || memcmp(in->bmin, o->bmin, sizeof o->bmin) ||
           memcmp(in->bmax, o->bmax, sizeof o->bmax) ||
           (e->o.key_every && e->frames - o->keyed_at >= e->o.key_every);
}

/* The held topology against the input's: 0 the same, 1 grown by appending, -1 neither. */
static int topology_change(const enc_obj *o, const proto_object_in *in)
{
    if (in->topo_version == o->topo_version && in->nvert == o->nvert)
        return 0;
    size_t es = wire_elem_size(o->primitive);
    if (in->nvert < o->nvert || in->nelem < o->nelem ||
        (o->nelem && memcmp(in->elem, o->elem, (size_t)o->nelem * es * sizeof(uint32_t))))
        return -1;
    return in->nvert > o->nvert || in->nelem > o->nelem;
}

/* Plan a held object that is not keyed by the rules: append, transform, delta. Writes only
 * what the commit makes visible (past the held counts, the spare array). *rekey is set when
 * the delta would cost more than half the key. */
static proto_status plan_update(proto_encoder *e, plan *p, const proto_transform *xf, int topo,
                                int *rekey, size_t *delta_bytes, proto_buf *tmp)
{
    enc_obj *o = p->old;
    const proto_object_in *in = p->in;
    size_t es = wire_elem_size(o->primitive);
    *rekey = 0;
    if (!reserve_obj(o, in->nvert ? in->nvert : 1, in->nelem ? in->nelem : 1))
        return PROTO_ERR_NOMEM;
    p->next = *o;
    p->next.topo_version = in->topo_version;
    p->next.has_xf = memcmp(xf, &o->key_xf, sizeof *xf) != 0;
    if (p->next.has_xf && !wire_xf_encode(&o->key_xf, o->tstep, xf, &p->next.xf)) {
        *rekey = 1; /* so far from the key's position that the steps overflow */
        return PROTO_OK;
    }
    p->parts = p->next.has_xf ? PROTO_PART_TRANSFORM : 0;
    if (in->ranges && topo == 0 && o->input_frame == e->frames) {
        /* The last frame's input quantised is cur: copy it, then what the ranges name. */
        memcpy(o->alt, o->cur, (size_t)in->nvert * 4 * sizeof(uint16_t));
        for (uint32_t r = 0; r < in->nranges; r++)
            quantise_range(in, o->qbits, o->alt, in->ranges[2 * r],
                           in->ranges[2 * r] + in->ranges[2 * r + 1]);
    } else {
        quantise_in(in, o->qbits, o->alt);
    }
    p->next.input_frame = e->frames + 1;
    if (topo > 0) {
        if (!elems_below(in->elem + (size_t)o->nelem * es, (size_t)(in->nelem - o->nelem) * es,
                         in->nvert))
            return PROTO_ERR_ARG;
        memcpy(o->base + (size_t)o->nvert * 4, o->alt + (size_t)o->nvert * 4,
               (size_t)(in->nvert - o->nvert) * 4 * sizeof(uint16_t));
        memcpy(o->elem + (size_t)o->nelem * es, in->elem + (size_t)o->nelem * es,
               (size_t)(in->nelem - o->nelem) * es * sizeof(uint32_t));
        p->next.nvert = in->nvert;
        p->next.nelem = in->nelem;
        p->parts |= PROTO_PART_APPEND;
    }
    p->next.cur = o->alt; /* swapped at the commit */
    p->next.alt = o->cur;
    *delta_bytes = 0;
    if (memcmp(o->alt, o->base, (size_t)in->nvert * 4 * sizeof(uint16_t))) {
        tmp->len = 0;
        int sparse = 0;
        proto_status st = put_delta(e, tmp, o->alt, o->base, in->nvert, delta_bytes, &sparse);
        if (st != PROTO_OK)
            return st;
        p->parts |= PROTO_PART_DELTA | (sparse ? PROTO_PART_SPARSE : 0u);
        *rekey = e->o.rekey_ratio > 0.0f &&
                 (double)*delta_bytes > (double)e->o.rekey_ratio * (double)o->key_bytes;
    }
    return PROTO_OK;
}

static int same_code(const wire_xf_code *a, const wire_xf_code *b)
{
    return a->largest == b->largest && !memcmp(a->dt, b->dt, sizeof a->dt) &&
           !memcmp(a->c, b->c, sizeof a->c);
}

/* Plan a held object (hold set, nothing to key or append): clients keep the vertices they
 * show and take this frame's transform. Away from its base: HOLD, plus TRANSFORM when the
 * transform differs from the one shown (the key's, when it is back there, goes as a code like
 * any other); at its base: what a frame without hold sends for a rigid move (TRANSFORM when
 * it differs from the key's, else nothing). The vertices stay the last frame's. *rekey when
 * the transform is too far from the key's for its steps. */
static void plan_hold(plan *p, const proto_transform *xf, int *rekey)
{
    const enc_obj *o = p->old;
    p->next = *o;
    p->next.topo_version = p->in->topo_version;
    int has_xf = memcmp(xf, &o->key_xf, sizeof *xf) != 0;
    wire_xf_code code;
    *rekey = !wire_xf_encode(&o->key_xf, o->tstep, has_xf ? xf : &o->key_xf, &code);
    if (*rekey)
        return;
    if (!memcmp(o->cur, o->base, (size_t)o->nvert * 4 * sizeof(uint16_t))) {
        p->next.has_xf = has_xf;
        p->next.xf = code;
        p->parts = has_xf ? PROTO_PART_TRANSFORM : 0;
        return;
    }
    int same = o->has_xf ? same_code(&code, &o->xf) : !has_xf;
    p->parts = PROTO_PART_HOLD | (same ? 0u : PROTO_PART_TRANSFORM);
    if (!same) {
        p->next.has_xf = 1;
        p->next.xf = code;
    }
}

/* The record of one planned object. */
static proto_status put_record(proto_encoder *e, proto_buf *raw, plan *p, const proto_buf *tmp)
{
    enc_obj *n = &p->next;
    proto_status st = put_record_head(raw, n->id, n->key, p->parts);
    if (st != PROTO_OK)
        return st;
    if (p->parts & PROTO_PART_KEY)
        return put_key(e, raw, n, &n->key_bytes);
    if (p->parts & PROTO_PART_APPEND) {
        const enc_obj *o = p->old;
        uint8_t *h = wire_put(raw, NULL, OBJ_APPEND_HEAD);
        if (!h)
            return PROTO_ERR_NOMEM;
        wire_put_u32(h, o->nvert);
        wire_put_u32(h + 4, o->nelem);
        wire_put_u32(h + 8, n->nvert - o->nvert);
        wire_put_u32(h + 12, n->nelem - o->nelem);
        size_t ib, vb, es = wire_elem_size(n->primitive);
        if ((st = put_elems(raw, n->primitive, n->elem + (size_t)o->nelem * es, n->nelem - o->nelem,
                            n->nvert, &ib)) != PROTO_OK ||
            (st = put_verts(e, raw, n->base + (size_t)o->nvert * 4, NULL, n->nvert - o->nvert,
                            &vb)) != PROTO_OK)
            return st;
        n->key_bytes += ib + vb;
    }
    if ((p->parts & PROTO_PART_TRANSFORM) && (st = put_xf_code(raw, &n->xf)) != PROTO_OK)
        return st;
    if (p->parts & PROTO_PART_DELTA) {
        if (!wire_put(raw, NULL, 4) || !wire_put(raw, tmp->data, tmp->len))
            return PROTO_ERR_NOMEM;
        /* u32 nvert, then the stream (its own u32 byte count first; a sparse delta's
         * ranges before it) */
        wire_put_u32(raw->data + raw->len - tmp->len - 4, n->nvert);
    }
    return PROTO_OK;
}

/* ------------------------------------------------------------------ frames */

static int cmp_in(const void *a, const void *b)
{
    uint16_t x = (*(const proto_object_in *const *)a)->id,
             y = (*(const proto_object_in *const *)b)->id;
    return (x > y) - (x < y);
}

static enc_obj *find(proto_encoder *e, uint16_t id)
{
    uint32_t lo = 0, hi = e->nobj;
    while (lo < hi) {
        uint32_t mid = (lo + hi) / 2;
        if (e->obj[mid].id < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < e->nobj && e->obj[lo].id == id ? &e->obj[lo] : NULL;
}

static void count_parts(proto_frame_stats *s, unsigned parts)
{
    s->nrecords++;
    s->nkey += !!(parts & PROTO_PART_KEY);
    s->nappend += !!(parts & PROTO_PART_APPEND);
    s->ntransform += !!(parts & PROTO_PART_TRANSFORM);
    s->ndelta += !!(parts & PROTO_PART_DELTA);
    s->nremove += !!(parts & PROTO_PART_REMOVE);
    s->nhold += !!(parts & PROTO_PART_HOLD);
}

/* Sorted inputs, checked: unique ids, every field in range, totals within the limits. */
static proto_status sort_inputs(const proto_object_in *objs, uint32_t n,
                                const proto_object_in **sorted)
{
    uint64_t tv = 0, te = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (!input_ok(&objs[i]))
            return PROTO_ERR_ARG;
        sorted[i] = &objs[i];
        tv += objs[i].nvert;
        te += objs[i].nelem;
    }
    if (tv > PROTO_MAX_TOTAL_VERTS || te > PROTO_MAX_TOTAL_ELEMS)
        return PROTO_ERR_ARG;
    qsort(sorted, n, sizeof *sorted, cmp_in);
    for (uint32_t i = 1; i < n; i++)
        if (sorted[i]->id == sorted[i - 1]->id)
            return PROTO_ERR_ARG;
    return PROTO_OK;
}

/* Plan every input and write its record; removals for held objects no input names. */
static proto_status plan_all(proto_encoder *e, proto_buf *raw, const proto_object_in **sorted,
                             uint32_t n, plan *plans, proto_frame_stats *s)
{
    proto_buf tmp = {0};
    proto_status st = PROTO_OK;
    uint32_t held = 0;
    for (uint32_t i = 0; i < n && st == PROTO_OK; i++) {
        plan *p = &plans[i];
        p->in = sorted[i];
        p->old = find(e, p->in->id);
        /* Held objects before this id are gone. */
        for (; held < e->nobj && e->obj[held].id < p->in->id && st == PROTO_OK; held++) {
            st = put_record_head(raw, e->obj[held].id, e->obj[held].key, PROTO_PART_REMOVE);
            count_parts(s, PROTO_PART_REMOVE);
        }
        held += p->old != NULL;
        if (st != PROTO_OK)
            break;
        proto_transform xf;
        unit_xf(&p->in->xf, &xf);
        int topo = p->old ? topology_change(p->old, p->in) : -1, rekey = 1;
        size_t delta_bytes = 0;
        if (!must_key(e, p->old, p->in) && topo == 0 && p->in->hold)
            plan_hold(p, &xf, &rekey);
        else if (!must_key(e, p->old, p->in) && topo >= 0)
            st = plan_update(e, p, &xf, topo, &rekey, &delta_bytes, &tmp);
        if (st == PROTO_OK && rekey) {
            st = plan_key(e, p, &xf);
            e->next_key++;
        }
        if (st == PROTO_OK && p->parts)
            st = put_record(e, raw, p, &tmp);
        if (p->parts)
            count_parts(s, p->parts);
    }
    for (; held < e->nobj && st == PROTO_OK; held++) {
        st = put_record_head(raw, e->obj[held].id, e->obj[held].key, PROTO_PART_REMOVE);
        count_parts(s, PROTO_PART_REMOVE);
    }
    proto_buf_free(&tmp);
    return st;
}

proto_status proto_encode_frame2(proto_encoder *e, proto_buf *out, const proto_header *h,
                                 const proto_object_in *objs, uint32_t n, proto_frame_stats *stats)
{
    proto_frame_stats s;
    memset(&s, 0, sizeof s);
    if (n > PROTO_MAX_OBJECTS || (n && !objs))
        return PROTO_ERR_ARG;
    const proto_object_in **sorted = malloc(((size_t)n + 1) * sizeof *sorted);
    plan *plans = calloc((size_t)n + 1, sizeof *plans);
    enc_obj *next = malloc(((size_t)n + 1) * sizeof *next);
    proto_buf raw = {0};
    proto_status st = sorted && plans && next ? PROTO_OK : PROTO_ERR_NOMEM;
    uint16_t key0 = e->next_key;
    if (st == PROTO_OK)
        st = sort_inputs(objs, n, sorted);
    if (st == PROTO_OK && !wire_put(&raw, NULL, 4))
        st = PROTO_ERR_NOMEM;
    if (st == PROTO_OK)
        st = plan_all(e, &raw, sorted, n, plans, &s);
    if (st == PROTO_OK) {
        wire_put_u32(raw.data, s.nrecords);
        int structural = s.nkey || s.nappend || s.nremove;
        s.flags = (structural ? PROTO_FLAG_STRUCTURAL : 0u) |
                  (e->fresh ? PROTO_FLAG_SNAPSHOT | PROTO_FLAG_STRUCTURAL : 0u);
        st = wire_finish_cctx(out, h, PROTO_KIND_OBJECTS, s.flags, &raw, e->o.zstd_level,
                              zctx_of(e));
    }
    if (st == PROTO_OK) {
        /* Commit: every plan's next state, in id order; the held ones not planned are gone. */
        for (uint32_t i = 0; i < n; i++) {
            plan *p = &plans[i];
            if (p->old && p->new_arrays)
                obj_free(p->old);
            next[i] = p->next;
        }
        for (uint32_t i = 0; i < e->nobj; i++) {
            int kept = 0;
            for (uint32_t lo = 0, hi = n; lo < hi && !kept;) {
                uint32_t mid = (lo + hi) / 2;
                kept = sorted[mid]->id == e->obj[i].id;
                if (sorted[mid]->id < e->obj[i].id)
                    lo = mid + 1;
                else
                    hi = mid;
            }
            if (!kept)
                obj_free(&e->obj[i]);
        }
        free(e->obj);
        e->obj = next;
        e->nobj = n;
        next = NULL;
        e->frames++;
        e->fresh = 0;
    } else {
        for (uint32_t i = 0; i < n; i++)
            if (plans[i].new_arrays)
                obj_free(&plans[i].next);
        e->next_key = key0;
        /* The caller's ranges for the next frame will be relative to this frame's input,
         * which no object holds: the next frame reads every vertex. */
        for (uint32_t i = 0; i < e->nobj; i++)
            e->obj[i].input_frame = 0;
    }
    if (stats)
        *stats = s;
    free(next);
    free(plans);
    free(sorted);
    proto_buf_free(&raw);
    return st;
}

proto_status proto_encode_snapshot(proto_encoder *e, proto_buf *out, const proto_header *h,
                                   proto_frame_stats *stats)
{
    proto_frame_stats s;
    memset(&s, 0, sizeof s);
    proto_buf raw = {0};
    proto_status st = wire_put(&raw, NULL, 4) ? PROTO_OK : PROTO_ERR_NOMEM;
    for (uint32_t i = 0; i < e->nobj && st == PROTO_OK; i++) {
        enc_obj *o = &e->obj[i];
        unsigned parts = PROTO_PART_KEY;
        if (o->has_xf)
            parts |= PROTO_PART_TRANSFORM;
        if (memcmp(o->cur, o->base, (size_t)o->nvert * 4 * sizeof(uint16_t)))
            parts |= PROTO_PART_DELTA;
        count_parts(&s, parts);
        size_t bytes;
        st = put_record_head(&raw, o->id, o->key, parts);
        if (st == PROTO_OK)
            st = put_key(e, &raw, o, &bytes);
        if (st == PROTO_OK && (parts & PROTO_PART_TRANSFORM))
            st = put_xf_code(&raw, &o->xf);
        if (st == PROTO_OK && (parts & PROTO_PART_DELTA)) {
            uint8_t *p = wire_put(&raw, NULL, 4);
            st = p ? PROTO_OK : PROTO_ERR_NOMEM;
            if (p)
                wire_put_u32(p, o->nvert);
            if (st == PROTO_OK)
                st = put_verts(e, &raw, o->cur, o->base, o->nvert, &bytes);
        }
    }
    if (st == PROTO_OK) {
        wire_put_u32(raw.data, s.nrecords);
        s.flags = PROTO_FLAG_SNAPSHOT | PROTO_FLAG_STRUCTURAL;
        st = wire_finish_cctx(out, h, PROTO_KIND_OBJECTS, s.flags, &raw, e->o.zstd_level,
                              zctx_of(e));
    }
    if (stats)
        *stats = s;
    proto_buf_free(&raw);
    return st;
}
