/* test_objects.c: object frames (kind 5): random round trips through the encoder
 * and the decoder (keys, appends, transforms, deltas, holds that stand and that move,
 * removals, snapshots), a refusal for every malformed or unfitting record we could think of
 * (each leaving the decoder as it was), and the bytes a walking crowd costs (synthetic capes;
 * the cloth scene's characters, cape and body an object). */
#include <math.h>
#include <meshoptimizer.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include "protocol/proto.h"
#include "sim/cloth/cloth.h"
#include "sim/sim.h"
#include "tests/harness.h"

static uint32_t rng = 0x9e3779b9u;
static uint32_t rnd(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 17;
    rng ^= rng << 5;
    return rng;
}
static float frand(float lo, float hi)
{
    return lo + (hi - lo) * (float)(rnd() % 1000001u) / 1000000.0f;
}

static proto_header hdr(uint64_t frame)
{
    proto_header h;
    memset(&h, 0, sizeof h);
    h.frame = frame;
    h.last_seq = (uint32_t)frame * 3u;
    h.sim_time_s = (double)frame / 60.0;
    return h;
}

/* What the README says a decoder shows for an input value (the encoder's quantisation). */
static uint16_t quant(float p, float lo, float hi, unsigned bits)
{
    float ext = hi - lo, t = ext > 0.0f ? (p - lo) / ext : 0.0f;
    t = t < 0.0f ? 0.0f : t > 1.0f ? 1.0f : t;
    return (uint16_t)lrintf(t * (float)((1u << bits) - 1u));
}

static int same_tri(const uint32_t *a, const uint32_t *b)
{
    for (int r = 0; r < 3; r++)
        if (a[0] == b[r] && a[1] == b[(r + 1) % 3] && a[2] == b[(r + 2) % 3])
            return 1;
    return 0;
}

/* ------------------------------------------------------------------ a model of the scene */

#define MAXV 400
#define MAXE 800

typedef struct mobj {
    int live;
    proto_object_in in;
    float pos[MAXV * 3], scalar[MAXV];
    uint32_t elem[MAXE * 3];
    /* what a client shows: the vertices of the last frame that did not hold the object, the
     * transform of this frame */
    float shown_pos[MAXV * 3], shown_scalar[MAXV];
    proto_transform shown_xf;
} mobj;

static void show(mobj *m)
{
    memcpy(m->shown_pos, m->pos, sizeof m->pos);
    memcpy(m->shown_scalar, m->scalar, sizeof m->scalar);
    m->shown_xf = m->in.xf;
}

/* This frame's input as a client shows it: a held object keeps its vertices, moves. */
static void show_frame(mobj *m)
{
    if (m->in.hold)
        m->shown_xf = m->in.xf;
    else
        show(m);
}

static void make_grid(mobj *m, int nx, int ny)
{
    m->in.nvert = (uint32_t)(nx * ny);
    m->in.nelem = 0;
    for (int j = 0; j < ny; j++)
        for (int i = 0; i < nx; i++) {
            float *p = &m->pos[(j * nx + i) * 3];
            p[0] = (float)i / (float)(nx - 1) * 0.6f - 0.3f;
            p[1] = 0.05f * sinf((float)(i + j));
            p[2] = -(float)j / (float)(ny - 1) * 1.0f;
            if (i + 1 < nx && j + 1 < ny) {
                uint32_t a = (uint32_t)(j * nx + i), b = a + 1, c = a + (uint32_t)nx, d = c + 1;
                uint32_t t[6] = {a, c, b, b, c, d};
                memcpy(&m->elem[m->in.nelem * 3], t, sizeof t);
                m->in.nelem += 2;
            }
        }
}

static void make_stem(mobj *m, uint32_t n)
{
    m->in.nvert = n;
    m->in.nelem = n - 1;
    for (uint32_t i = 0; i < n; i++) {
        m->pos[i * 3] = 0.01f * (float)(rnd() % 7);
        m->pos[i * 3 + 1] = 0.0f;
        m->pos[i * 3 + 2] = 0.1f * (float)i;
        m->scalar[i] = frand(0.0f, 5.0f);
        if (i + 1 < n) {
            m->elem[i * 2] = i;
            m->elem[i * 2 + 1] = i + 1;
        }
    }
}

static void make_obj(mobj *m, uint16_t id)
{
    memset(m, 0, sizeof *m);
    m->live = 1;
    proto_object_in *in = &m->in;
    in->id = id;
    in->primitive = rnd() % 2 ? PROTO_PRIM_TRIANGLES : PROTO_PRIM_LINES;
    in->qbits = (uint8_t)(rnd() % 3 == 0 ? 0 : 6 + rnd() % 11);
    for (int k = 0; k < 3; k++) {
        in->bmin[k] = -1.5f;
        in->bmax[k] = 1.5f;
    }
    in->bmax[2] = 12.0f;
    if (in->primitive == PROTO_PRIM_TRIANGLES) {
        make_grid(m, 3 + (int)(rnd() % 8), 3 + (int)(rnd() % 8));
        if (rnd() % 2) {
            in->scalar = m->scalar;
            for (uint32_t i = 0; i < in->nvert; i++)
                m->scalar[i] = frand(-1.0f, 1.0f);
            in->smin = -1.0f;
            in->smax = 1.0f;
        }
    } else {
        make_stem(m, 2 + rnd() % 20);
        in->scalar = m->scalar;
        in->smin = 0.0f;
        in->smax = 5.0f;
    }
    in->pos = m->pos;
    in->elem = m->elem;
    in->topo_version = rnd();
    in->xf = proto_transform_identity();
    in->ninfo = (uint8_t)(rnd() % 3);
    for (int k = 0; k < in->ninfo; k++)
        in->info[k] = frand(0.0f, 1.0f);
    show(m);
}

/* One frame of change for a live object. */
static void step_obj(mobj *m)
{
    proto_object_in *in = &m->in;
    uint32_t r = rnd() % 100;
    uint32_t topo0 = in->topo_version;
    uint8_t lod0 = in->lod;
    if (r < 30) { /* rigid motion */
        for (int k = 0; k < 3; k++)
            in->xf.t[k] += frand(-0.05f, 0.05f);
        float yaw = frand(-3.0f, 3.0f);
        in->xf.r[0] = 0.0f;
        in->xf.r[1] = 0.0f;
        in->xf.r[2] = sinf(yaw / 2);
        in->xf.r[3] = cosf(yaw / 2);
    }
    if (r >= 20 && r < 50) /* a local flutter of a few vertices */
        for (int k = 0; k < 3; k++) {
            uint32_t v = rnd() % in->nvert;
            m->pos[v * 3 + rnd() % 3] += frand(-0.01f, 0.01f);
            if (in->scalar)
                m->scalar[v] = frand(in->smin, in->smax);
        }
    if (r >= 50 && r < 60) /* back to rest */
        in->xf = proto_transform_identity();
    if (r >= 60 && r < 70 && in->primitive == PROTO_PRIM_LINES && in->nvert + 3 <= MAXV) {
        /* growth: a branch of three vertices from an existing one */
        uint32_t from = rnd() % in->nvert;
        for (uint32_t k = 0; k < 3; k++) {
            uint32_t v = in->nvert + k;
            m->pos[v * 3] = m->pos[from * 3] + 0.05f * (float)(k + 1);
            m->pos[v * 3 + 1] = m->pos[from * 3 + 1];
            m->pos[v * 3 + 2] = m->pos[from * 3 + 2] + 0.02f;
            m->scalar[v] = frand(0.0f, 5.0f);
            m->elem[(in->nelem + k) * 2] = k ? v - 1 : from;
            m->elem[(in->nelem + k) * 2 + 1] = v;
        }
        in->nvert += 3;
        in->nelem += 3;
        in->topo_version++;
    }
    if (r >= 70 && r < 74 && in->primitive == PROTO_PRIM_TRIANGLES) { /* a LOD switch */
        make_grid(m, 3 + (int)(rnd() % 8), 3 + (int)(rnd() % 8));
        in->lod = (uint8_t)(rnd() % 3);
        in->topo_version++;
        in->info[0] = frand(0.0f, 0.1f);
    }
    if (r >= 74 && r < 78) /* a big change: the delta would cost as much as a key */
        for (uint32_t v = 0; v < in->nvert * 3; v++)
            m->pos[v] += frand(-0.4f, 0.4f);
    in->force_key = r == 99;
    /* Far objects are updated less often: held now and then (never while the topology or
     * LOD changes, which key or append whatever the hold says), and mostly walking on while
     * held (HOLD | TRANSFORM), now and then back at the key's place. */
    in->hold = in->topo_version == topo0 && in->lod == lod0 && !in->force_key && rnd() % 5 == 0;
    if (in->hold && rnd() % 4) {
        float yaw = frand(-3.0f, 3.0f);
        in->xf.t[rnd() % 3] += frand(-0.05f, 0.05f);
        in->xf.r[0] = 0.0f, in->xf.r[1] = 0.0f;
        in->xf.r[2] = sinf(yaw / 2), in->xf.r[3] = cosf(yaw / 2);
    }
}

/* A frame's transform as decoded: the position within half a step, the rotation within
 * the 16-bit code's resolution (or exact, when the frame sent none). */
static int near_xf(const proto_transform *got, const proto_transform *want, float tstep)
{
    float dot = 0.0f;
    for (int k = 0; k < 4; k++)
        dot += got->r[k] * want->r[k];
    for (int k = 0; k < 3; k++)
        if (!(fabsf(got->t[k] - want->t[k]) <= tstep * 0.5f + 1e-5f * fabsf(want->t[k])))
            return 0;
    return fabsf(dot) >= 1.0f - 1e-6f;
}

/* The decoder holds what the model says, quantised as the README says. */
static int decoder_matches(const proto_decoder *d, const mobj *m, int nm, const char **why)
{
    int live = 0;
    for (int i = 0; i < nm; i++) {
        if (!m[i].live) {
            if (proto_decoder_find(d, m[i].in.id)) {
                *why = "a removed object is held";
                return 0;
            }
            continue;
        }
        live++;
        const proto_object_in *in = &m[i].in;
        const proto_object *o = proto_decoder_find(d, in->id);
        unsigned bits = in->qbits ? in->qbits : 16, es = in->primitive == 1 ? 3 : 2;
        if (!o || o->nvert != in->nvert || o->nelem != in->nelem || o->primitive != in->primitive ||
            o->qbits != bits || o->lod != in->lod || o->has_scalar != (in->scalar != NULL)) {
            *why = "object missing, or counts, primitive, qbits, lod differ";
            return 0;
        }
        for (uint32_t v = 0; v < in->nvert; v++) {
            for (int b = 0; b < 3; b++)
                if (o->q[v * 4 + b] !=
                    quant(m[i].shown_pos[v * 3 + b], in->bmin[b], in->bmax[b], bits)) {
                    *why = "a position differs";
                    return 0;
                }
            uint16_t s = in->scalar ? quant(m[i].shown_scalar[v], in->smin, in->smax, 16) : 0;
            if (o->q[v * 4 + 3] != s) {
                *why = "a scalar differs";
                return 0;
            }
        }
        for (uint32_t e = 0; e < in->nelem; e++)
            if (es == 3 ? !same_tri(&o->elem[e * 3], &in->elem[e * 3])
                        : memcmp(&o->elem[e * 2], &in->elem[e * 2], 8) != 0) {
                *why = "an element differs";
                return 0;
            }
        if (!near_xf(&o->xf, &m[i].shown_xf, o->tstep)) {
            *why = "the transform differs";
            return 0;
        }
    }
    if ((int)proto_decoder_count(d) != live) {
        *why = "more objects held than live";
        return 0;
    }
    return 1;
}

/* Two decoders hold the same objects (a joiner's and an old client's). */
static int decoders_same(const proto_decoder *a, const proto_decoder *b)
{
    if (proto_decoder_count(a) != proto_decoder_count(b))
        return 0;
    for (uint32_t i = 0; i < proto_decoder_count(a); i++) {
        const proto_object *x = proto_decoder_object(a, i), *y = proto_decoder_object(b, i);
        size_t es = x->primitive == PROTO_PRIM_TRIANGLES ? 3 : 2;
        if (x->id != y->id || x->key != y->key || x->nvert != y->nvert || x->nelem != y->nelem ||
            x->lod != y->lod || x->qbits != y->qbits || x->ninfo != y->ninfo ||
            memcmp(x->info, y->info, sizeof x->info) || memcmp(&x->xf, &y->xf, sizeof x->xf) ||
            memcmp(&x->key_xf, &y->key_xf, sizeof x->xf) ||
            memcmp(x->q, y->q, (size_t)x->nvert * 8) ||
            memcmp(x->base_q, y->base_q, (size_t)x->nvert * 8) || memcmp(x->bmin, y->bmin, 12) ||
            memcmp(x->bmax, y->bmax, 12))
            return 0;
        for (uint32_t e = 0; e < x->nelem; e++)
            if (es == 3 ? !same_tri(&x->elem[e * 3], &y->elem[e * 3])
                        : memcmp(&x->elem[e * 2], &y->elem[e * 2], 8) != 0)
                return 0;
    }
    return 1;
}

TEST(proto_objects_random_round_trips_and_snapshots)
{
    enum { NM = 12, FRAMES = 400 };
    static mobj m[NM];
    proto_object_in in[NM];
    for (int i = 0; i < NM; i++) {
        make_obj(&m[i], (uint16_t)(i * 37 + 5));
        m[i].live = i < 8;
    }
    proto_encoder *e;
    proto_decoder *d, *joiner = NULL;
    REQUIRE(proto_encoder_create(&e, NULL) == PROTO_OK);
    REQUIRE(proto_decoder_create(&d) == PROTO_OK);
    proto_buf b = {0}, snap = {0};
    uint32_t totals[8] = {0}; /* keys, appends, transforms, deltas, removals, records, holds,
                                 holds that moved (HOLD | TRANSFORM) */
    size_t bytes = 0;
    for (int f = 0; f < FRAMES; f++) {
        int n = 0;
        for (int i = 0; i < NM; i++) {
            int born = 0;
            if (f && rnd() % 60 == 0) { /* an object comes or goes */
                if (m[i].live)
                    m[i].live = 0;
                else
                    make_obj(&m[i], m[i].in.id), born = 1;
            }
            if (m[i].live && f && !born)
                step_obj(&m[i]);
            if (m[i].live) {
                show_frame(&m[i]);
                in[n++] = m[i].in;
            }
        }
        proto_header h = hdr((uint64_t)f + 1);
        proto_frame_stats s;
        REQUIRE(proto_encode_frame2(e, &b, &h, in, (uint32_t)n, &s) == PROTO_OK);
        bytes += b.len;
        totals[0] += s.nkey, totals[1] += s.nappend, totals[2] += s.ntransform;
        totals[3] += s.ndelta, totals[4] += s.nremove, totals[5] += s.nrecords;
        totals[6] += s.nhold;
        char err[160];
        proto_header got;
        proto_status st = proto_decoder_apply(d, b.data, b.len, &got, err, sizeof err);
        CHECKF(st == PROTO_OK, "frame %d: %s (%s)", f, proto_status_str(st), err);
        CHECK(got.frame == h.frame && got.kind == PROTO_KIND_OBJECTS && got.flags == s.flags);
        const char *why = "";
        int matches = decoder_matches(d, m, NM, &why);
        CHECKF(matches, "frame %d: %s", f, why);
        for (uint32_t i = 0; i < proto_decoder_count(d); i++)
            totals[7] +=
                proto_decoder_object(d, i)->parts == (PROTO_PART_HOLD | PROTO_PART_TRANSFORM);
        if (joiner) {
            st = proto_decoder_apply(joiner, b.data, b.len, NULL, err, sizeof err);
            CHECKF(st == PROTO_OK && decoders_same(d, joiner), "frame %d: the joiner: %s", f, err);
        }
        if (f % 50 == 25) { /* a joiner starts from a snapshot of this frame */
            REQUIRE(proto_encode_snapshot(e, &snap, &h, NULL) == PROTO_OK);
            proto_decoder_destroy(joiner);
            REQUIRE(proto_decoder_create(&joiner) == PROTO_OK);
            st = proto_decoder_apply(joiner, snap.data, snap.len, &got, err, sizeof err);
            CHECKF(st == PROTO_OK, "snapshot at frame %d: %s", f, err);
            CHECK(got.flags == (PROTO_FLAG_SNAPSHOT | PROTO_FLAG_STRUCTURAL));
            CHECKF(decoders_same(d, joiner), "snapshot at frame %d differs", f);
            /* The old client may take it too: nothing changes. */
            CHECK(proto_decoder_apply(d, snap.data, snap.len, NULL, NULL, 0) == PROTO_OK);
            matches = decoder_matches(d, m, NM, &why);
            CHECKF(matches, "after the snapshot at frame %d: %s", f, why);
        }
    }
    th_note("%d frames, %zu bytes: %u records (%u keys, %u appends, %u transforms, %u deltas, "
            "%u removals, %u holds, %u of them with a transform)",
            FRAMES, bytes, totals[5], totals[0], totals[1], totals[2], totals[3], totals[4],
            totals[6], totals[7]);
    for (int k = 0; k < 8; k++)
        CHECKF(totals[k] > 0, "the random run never made part %d", k);
    proto_buf_free(&b);
    proto_buf_free(&snap);
    proto_decoder_destroy(d);
    proto_decoder_destroy(joiner);
    proto_encoder_destroy(e);
}

/* The encoder's rules: a transform-only change sends no vertex, an unchanged object sends
 * nothing, growth appends, a LOD switch re-keys that object only, a removal is one record. */
TEST(proto_objects_encoder_sends_only_what_changed)
{
    static mobj a, c;
    make_obj(&a, 1);
    make_obj(&c, 2);
    a.in.primitive = PROTO_PRIM_TRIANGLES;
    make_grid(&a, 10, 12);
    a.in.scalar = NULL;
    c.in.primitive = PROTO_PRIM_LINES;
    make_stem(&c, 10);
    c.in.scalar = c.scalar;
    c.in.smin = 0, c.in.smax = 5;
    proto_encoder *e;
    REQUIRE(proto_encoder_create(&e, NULL) == PROTO_OK);
    proto_buf b = {0};
    proto_object_in in[2] = {a.in, c.in};
    proto_frame_stats s;
    proto_header h = hdr(1);
    REQUIRE(proto_encode_frame2(e, &b, &h, in, 2, &s) == PROTO_OK);
    CHECK(s.nkey == 2 && s.flags == (PROTO_FLAG_SNAPSHOT | PROTO_FLAG_STRUCTURAL));
    size_t key_bytes = b.len;
    h = hdr(2);
    REQUIRE(proto_encode_frame2(e, &b, &h, in, 2, &s) == PROTO_OK);
    CHECK(s.nrecords == 0 && s.flags == 0);
    in[0].xf.t[0] = 3.0f;
    h = hdr(3);
    REQUIRE(proto_encode_frame2(e, &b, &h, in, 2, &s) == PROTO_OK);
    CHECK(s.nrecords == 1 && s.ntransform == 1 && s.ndelta == 0 && s.flags == 0);
    th_note("two objects: keyframe %zu bytes, a transform-only frame %zu bytes", key_bytes, b.len);
    CHECK(b.len < 100);
    /* held at its base (its shape is the key's): a move is a transform, as without hold */
    in[0].xf.t[0] = 4.0f;
    in[0].hold = 1;
    h = hdr(31);
    REQUIRE(proto_encode_frame2(e, &b, &h, in, 2, &s) == PROTO_OK);
    CHECK(s.nrecords == 1 && s.nhold == 0 && s.ntransform == 1 && s.flags == 0);
    in[0].xf.t[0] = 0.0f; /* back at the key's transform: nothing */
    REQUIRE(proto_encode_frame2(e, &b, &h, in, 2, &s) == PROTO_OK);
    CHECK(s.nrecords == 0);
    /* away from its base: a hold, with a transform when it moved since the last frame */
    in[0].hold = 0;
    a.pos[4] += 0.05f;
    REQUIRE(proto_encode_frame2(e, &b, &h, in, 2, &s) == PROTO_OK);
    CHECK(s.nrecords == 1 && s.ndelta == 1 && s.ntransform == 0);
    in[0].hold = 1;
    a.pos[4] += 0.05f;
    REQUIRE(proto_encode_frame2(e, &b, &h, in, 2, &s) == PROTO_OK);
    CHECK(s.nrecords == 1 && s.nhold == 1 && s.ntransform == 0 && s.ndelta == 0);
    in[0].xf.t[0] = 4.0f;
    REQUIRE(proto_encode_frame2(e, &b, &h, in, 2, &s) == PROTO_OK);
    CHECK(s.nrecords == 1 && s.nhold == 1 && s.ntransform == 1 && s.ndelta == 0 && s.flags == 0);
    th_note("a held object that moved: %zu bytes", b.len);
    REQUIRE(proto_encode_frame2(e, &b, &h, in, 2, &s) == PROTO_OK);
    CHECK(s.nrecords == 1 && s.nhold == 1 && s.ntransform == 0); /* it shows that transform */
    in[0].hold = 0;
    REQUIRE(proto_encode_frame2(e, &b, &h, in, 2, &s) == PROTO_OK);
    CHECK(s.nrecords == 1 && s.ntransform == 1 && s.ndelta == 1 && s.nhold == 0);
    /* growth */
    c.pos[30] = 0.5f, c.pos[31] = 0.0f, c.pos[32] = 1.0f;
    c.scalar[10] = 2.0f;
    c.elem[18] = 9, c.elem[19] = 10;
    in[1].nvert = 11, in[1].nelem = 10, in[1].topo_version++;
    h = hdr(4);
    REQUIRE(proto_encode_frame2(e, &b, &h, in, 2, &s) == PROTO_OK);
    CHECK(s.nappend == 1 && s.nkey == 0 && s.flags == PROTO_FLAG_STRUCTURAL);
    /* a LOD switch of one object */
    make_grid(&a, 6, 7);
    in[0].nvert = a.in.nvert, in[0].nelem = a.in.nelem, in[0].lod = 1, in[0].topo_version++;
    h = hdr(5);
    REQUIRE(proto_encode_frame2(e, &b, &h, in, 2, &s) == PROTO_OK);
    CHECK(s.nkey == 1 && s.nrecords == 1);
    /* removal */
    h = hdr(6);
    REQUIRE(proto_encode_frame2(e, &b, &h, in, 1, &s) == PROTO_OK);
    CHECK(s.nremove == 1 && s.nrecords == 1 && s.flags == PROTO_FLAG_STRUCTURAL);
    /* bad input is refused and changes nothing */
    proto_object_in bad[2] = {in[0], in[0]};
    h = hdr(7);
    CHECK(proto_encode_frame2(e, &b, &h, bad, 2, &s) == PROTO_ERR_ARG); /* same id twice */
    bad[0].xf.r[3] = 0.0f, bad[0].xf.r[2] = 0.0f, bad[0].xf.r[1] = 0.0f, bad[0].xf.r[0] = 0.0f;
    CHECK(proto_encode_frame2(e, &b, &h, bad, 1, &s) == PROTO_ERR_ARG); /* no rotation */
    bad[0] = in[0];
    bad[0].bmax[1] = bad[0].bmin[1] - 1.0f;
    CHECK(proto_encode_frame2(e, &b, &h, bad, 1, &s) == PROTO_ERR_ARG);
    bad[0] = in[0];
    bad[0].qbits = 17;
    CHECK(proto_encode_frame2(e, &b, &h, bad, 1, &s) == PROTO_ERR_ARG);
    bad[0] = in[0];
    a.elem[5] = 1000; /* an index past nvert, on a new topology */
    bad[0].topo_version++;
    CHECK(proto_encode_frame2(e, &b, &h, bad, 1, &s) == PROTO_ERR_ARG);
    bad[0].primitive = 3;
    CHECK(proto_encode_frame2(e, &b, &h, bad, 1, &s) == PROTO_ERR_ARG);
    a.elem[5] = 0;
    REQUIRE(proto_encode_frame2(e, &b, &h, in, 1, &s) == PROTO_OK);
    CHECK(s.nrecords == 0); /* the refusals above left the state as it was */
    proto_buf_free(&b);
    proto_encoder_destroy(e);
}

/* A far cape held between shape updates (every 4th frame) while its character walks: a held
 * frame is one HOLD | TRANSFORM record, clients show the last shape sent at this frame's place,
 * and a snapshot taken while it is held gives a joiner exactly what an old client shows (also
 * once it is back at its key's place, which a held frame can only send as a code). */
TEST(proto_objects_held_object_walks_with_its_transform)
{
    static mobj a;
    make_obj(&a, 4);
    a.in.primitive = PROTO_PRIM_TRIANGLES;
    make_grid(&a, 6, 8);
    a.in.scalar = NULL;
    a.in.qbits = 10;
    a.in.xf.t[0] = 1.0f;
    proto_transform key_xf = a.in.xf;
    float rest[MAXV * 3];
    memcpy(rest, a.pos, sizeof rest);
    proto_encoder *e;
    proto_decoder *old, *joiner = NULL;
    REQUIRE(proto_encoder_create(&e, NULL) == PROTO_OK);
    REQUIRE(proto_decoder_create(&old) == PROTO_OK);
    proto_buf b = {0}, snap = {0};
    size_t held_bytes = 0;
    for (int f = 0; f < 40; f++) {
        float yaw = 0.01f * (float)f;
        a.in.xf.t[0] = 1.0f + 0.02f * (float)f;
        a.in.xf.r[2] = sinf(yaw / 2), a.in.xf.r[3] = cosf(yaw / 2);
        if (f == 30 || f == 31)
            a.in.xf = key_xf; /* back where it was keyed, bit for bit */
        a.in.hold = f % 4 != 0;
        if (!a.in.hold)
            for (uint32_t v = 0; v < a.in.nvert; v++)
                a.pos[v * 3 + 1] = rest[v * 3 + 1] + 0.02f * sinf(0.5f * (float)(f + (int)v));
        show_frame(&a);
        proto_header h = hdr((uint64_t)f + 1);
        proto_frame_stats s;
        REQUIRE(proto_encode_frame2(e, &b, &h, &a.in, 1, &s) == PROTO_OK);
        char err[160];
        REQUIRE(proto_decoder_apply(old, b.data, b.len, NULL, err, sizeof err) == PROTO_OK);
        const char *why = "";
        int matches = decoder_matches(old, &a, 1, &why);
        CHECKF(matches, "frame %d: %s", f, why);
        const proto_object *o = proto_decoder_find(old, 4);
        if (f > 4 && a.in.hold && f != 31) {
            CHECKF(s.nrecords == 1 && s.nhold == 1 && s.ntransform == 1 && s.ndelta == 0 &&
                       s.flags == 0 && o && o->parts == (PROTO_PART_HOLD | PROTO_PART_TRANSFORM),
                   "frame %d: parts %u", f, o ? o->parts : 0u);
            held_bytes += b.len;
        }
        if (f == 31) /* it shows the key's place already */
            CHECK(s.nrecords == 1 && s.nhold == 1 && s.ntransform == 0);
        if (joiner) {
            REQUIRE(proto_decoder_apply(joiner, b.data, b.len, NULL, err, sizeof err) == PROTO_OK);
            CHECKF(decoders_same(old, joiner), "frame %d: the joiner differs", f);
        }
        if (f == 10 || f == 30 || f == 31) {
            REQUIRE(proto_encode_snapshot(e, &snap, &h, NULL) == PROTO_OK);
            proto_decoder_destroy(joiner);
            REQUIRE(proto_decoder_create(&joiner) == PROTO_OK);
            REQUIRE(proto_decoder_apply(joiner, snap.data, snap.len, NULL, err, sizeof err) ==
                    PROTO_OK);
            CHECKF(decoders_same(old, joiner), "the snapshot of held frame %d differs", f);
        }
    }
    th_note("a held 48-vertex object walking: %.1f bytes a held frame", (double)held_bytes / 26.0);
    proto_buf_free(&b);
    proto_buf_free(&snap);
    proto_decoder_destroy(old);
    proto_decoder_destroy(joiner);
    proto_encoder_destroy(e);
}

/* ------------------------------------------------------------------ frames made by hand */

typedef struct wb {
    uint8_t b[16384];
    size_t n;
} wb;

static void w_u8(wb *w, unsigned v)
{
    w->b[w->n++] = (uint8_t)v;
}
static void w_u16(wb *w, unsigned v)
{
    w_u8(w, v & 255u);
    w_u8(w, (v >> 8) & 255u);
}
static void w_u32(wb *w, uint32_t v)
{
    w_u16(w, v & 0xffffu);
    w_u16(w, v >> 16);
}
static void w_f32(wb *w, float f)
{
    uint32_t v;
    memcpy(&v, &f, 4);
    w_u32(w, v);
}
static void w_xf(wb *w, float x, float rz, float rw)
{
    w_f32(w, x), w_f32(w, 0), w_f32(w, 0);
    w_f32(w, 0), w_f32(w, 0), w_f32(w, rz), w_f32(w, rw);
}
/* A frame's transform code: position steps, three rotation components, the one left out. */
static void w_xfc(wb *w, int32_t dx, int c0, int c1, int c2, unsigned largest)
{
    w_u32(w, (uint32_t)dx), w_u32(w, 0), w_u32(w, 0);
    w_u16(w, (unsigned)(c0 & 0xffff)), w_u16(w, (unsigned)(c1 & 0xffff));
    w_u16(w, (unsigned)(c2 & 0xffff)), w_u8(w, largest);
}

/* A vertex stream of n vertices (n x 4 u16). */
static void w_verts(wb *w, const uint16_t *v, uint32_t n)
{
    size_t at = w->n;
    w_u32(w, 0);
    if (!n)
        return;
    size_t enc = meshopt_encodeVertexBuffer(w->b + w->n, sizeof w->b - w->n, v, n, 8);
    w->n += enc;
    uint8_t *p = w->b + at;
    p[0] = (uint8_t)enc, p[1] = (uint8_t)(enc >> 8), p[2] = (uint8_t)(enc >> 16), p[3] = 0;
}
static void w_elems(wb *w, unsigned prim, const uint32_t *e, uint32_t n, uint32_t nvert)
{
    size_t at = w->n;
    w_u32(w, 0);
    if (!n)
        return;
    size_t enc = prim == 1 ? meshopt_encodeIndexBuffer(w->b + w->n, sizeof w->b - w->n, e, n * 3)
                           : meshopt_encodeIndexSequence(w->b + w->n, sizeof w->b - w->n, e, n * 2);
    (void)nvert;
    w->n += enc;
    uint8_t *p = w->b + at;
    p[0] = (uint8_t)enc, p[1] = (uint8_t)(enc >> 8), p[2] = (uint8_t)(enc >> 16), p[3] = 0;
}

/* A whole frame of kind 5 around the payload. */
static size_t w_frame(uint8_t *out, size_t cap, uint32_t flags, const wb *p, uint64_t frame)
{
    size_t z = ZSTD_compress(out + PROTO_HEADER_SIZE, cap - PROTO_HEADER_SIZE, p->b, p->n, 1);
    proto_header h = hdr(frame);
    h.kind = PROTO_KIND_OBJECTS;
    h.flags = flags;
    h.raw_size = (uint32_t)p->n;
    h.payload_size = (uint32_t)z;
    proto_header_write(out, &h);
    return PROTO_HEADER_SIZE + z;
}

/* The fields of a hand-made key record (a triangle or segment object), each one a lever a
 * refusal case can pull. */
typedef struct kspec {
    unsigned id, key, parts, prim, qbits, flags, lod, ninfo, pad;
    float info0, t0, rz, rw, bmin0, bmax0, smin, smax, tstep;
    uint32_t nvert, nelem, nvert_claim, nelem_claim;
    uint32_t elem[6];
    uint16_t v[4 * 4];
} kspec;

static kspec tri_spec(void)
{
    kspec k = {7,    3,    PROTO_PART_KEY, 1,    16,   0,      0, 1, 0, 0.5f, 1.0f, 0.0f,
               1.0f, 0.0f, 1.0f,           0.0f, 0.0f, 0.001f, 4, 2, 4, 2,    {0},  {0}};
    static const uint32_t e[6] = {0, 1, 2, 2, 1, 3};
    static const uint16_t v[16] = {0, 0, 0, 0, 65535, 0, 0, 0, 0, 65535, 0, 0, 9, 9, 9, 0};
    memcpy(k.elem, e, sizeof e);
    memcpy(k.v, v, sizeof v);
    return k;
}

static void w_key(wb *w, const kspec *k)
{
    w_u16(w, k->id), w_u16(w, k->key), w_u8(w, k->parts), w_u8(w, 0);
    w_u8(w, k->prim), w_u8(w, k->qbits), w_u8(w, k->flags), w_u8(w, k->lod), w_u8(w, k->ninfo);
    w_u8(w, k->pad), w_u8(w, 0), w_u8(w, 0);
    for (unsigned i = 0; i < k->ninfo; i++)
        w_f32(w, k->info0);
    w_xf(w, k->t0, k->rz, k->rw);
    w_f32(w, k->bmin0), w_f32(w, 0), w_f32(w, 0);
    w_f32(w, k->bmax0), w_f32(w, 1), w_f32(w, 1);
    w_f32(w, k->smin), w_f32(w, k->smax), w_f32(w, k->tstep);
    w_u32(w, k->nvert_claim), w_u32(w, k->nelem_claim);
    w_elems(w, k->prim, k->elem, k->nelem, k->nvert);
    w_verts(w, k->v, k->nvert);
}

/* A frame holding one key record. */
static size_t key_frame(uint8_t *out, size_t cap, const kspec *k, uint32_t flags)
{
    static wb w;
    w.n = 0;
    w_u32(&w, 1);
    w_key(&w, k);
    return w_frame(out, cap, flags, &w, 1);
}

/* A checksum of everything a decoder shows. */
static uint64_t state_sum(const proto_decoder *d)
{
    uint64_t s = 1469598103934665603ull;
    for (uint32_t i = 0; i < proto_decoder_count(d); i++) {
        const proto_object *o = proto_decoder_object(d, i);
        const uint8_t *parts[4] = {(const uint8_t *)o, (const uint8_t *)o->q,
                                   (const uint8_t *)o->base_q, (const uint8_t *)o->elem};
        size_t lens[4] = {offsetof(proto_object, elem), (size_t)o->nvert * 8, (size_t)o->nvert * 8,
                          (size_t)o->nelem * (o->primitive == 1 ? 12 : 8)};
        for (int k = 0; k < 4; k++)
            for (size_t j = 0; j < lens[k]; j++)
                s = (s ^ parts[k][j]) * 1099511628211ull;
    }
    return s;
}

typedef struct bad_case {
    const char *name;
    proto_status want;
    size_t len;
    uint8_t bytes[4096];
} bad_case;

/* Apply c to a decoder that holds the tri_spec object (key 3); it must be refused with the
 * status named and leave the decoder as it was. */
static void expect_refusal(proto_decoder *d, const bad_case *c)
{
    uint64_t before = state_sum(d);
    char err[200] = "";
    proto_status st = proto_decoder_apply(d, c->bytes, c->len, NULL, err, sizeof err);
    CHECKF(st == c->want, "%s: %s (%s), want %s", c->name, proto_status_str(st), err,
           proto_status_str(c->want));
    CHECKF(state_sum(d) == before, "%s: a refused frame changed the decoder", c->name);
    CHECKF(st == PROTO_OK || err[0], "%s: no message", c->name);
}

TEST(proto_objects_refuse_malformed_and_unfitting_frames)
{
    proto_decoder *d;
    REQUIRE(proto_decoder_create(&d) == PROTO_OK);
    static uint8_t good[4096];
    kspec k = tri_spec();
    size_t glen = key_frame(good, sizeof good, &k, PROTO_FLAG_STRUCTURAL);
    char err[200];
    REQUIRE(proto_decoder_apply(d, good, glen, NULL, err, sizeof err) == PROTO_OK);
    const proto_object *o = proto_decoder_find(d, 7);
    REQUIRE(o && o->nvert == 4 && o->nelem == 2 && o->key == 3 && o->ninfo == 1);
    CHECK(o->info[0] == 0.5f && o->xf.t[0] == 1.0f && o->q[4] == 65535 && o->q[12] == 9);

    static bad_case c;
    /* Key records with one field wrong. */
    static const struct {
        const char *name;
        proto_status want;
        int field;
    } keys[] = {
        {"primitive 3", PROTO_ERR_CORRUPT, 0},
        {"qbits 0", PROTO_ERR_CORRUPT, 1},
        {"qbits 17", PROTO_ERR_CORRUPT, 2},
        {"unknown key flag", PROTO_ERR_CORRUPT, 3},
        {"5 info numbers", PROTO_ERR_CORRUPT, 4},
        {"key padding not 0", PROTO_ERR_CORRUPT, 5},
        {"rotation not unit", PROTO_ERR_CORRUPT, 6},
        {"NaN position", PROTO_ERR_CORRUPT, 7},
        {"box upside down", PROTO_ERR_CORRUPT, 8},
        {"NaN box", PROTO_ERR_CORRUPT, 9},
        {"scalar range without a scalar", PROTO_ERR_CORRUPT, 10},
        {"vertex outside a 12-bit box", PROTO_ERR_CORRUPT, 11},
        {"scalar value without a scalar", PROTO_ERR_CORRUPT, 12},
        {"index past nvert", PROTO_ERR_CORRUPT, 13},
        {"nvert over the object limit", PROTO_ERR_LIMIT, 14},
        {"nelem over the object limit", PROTO_ERR_LIMIT, 15},
        {"more vertices claimed than coded", PROTO_ERR_CORRUPT, 16},
        {"transform step 0", PROTO_ERR_CORRUPT, 23},
        {"transform step NaN", PROTO_ERR_CORRUPT, 24},
        {"more elements claimed than coded", PROTO_ERR_CORRUPT, 17},
        {"unknown part bit", PROTO_ERR_CORRUPT, 18},
        {"hold with a key", PROTO_ERR_CORRUPT, 25},
        {"remove with a key", PROTO_ERR_CORRUPT, 19},
        {"NaN info", PROTO_ERR_CORRUPT, 20},
        {"scalar range upside down", PROTO_ERR_CORRUPT, 21},
        {"segment index past nvert", PROTO_ERR_CORRUPT, 22},
    };
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        k = tri_spec();
        switch (keys[i].field) {
        case 0:
            k.prim = 3;
            break;
        case 1:
            k.qbits = 0;
            break;
        case 2:
            k.qbits = 17;
            break;
        case 3:
            k.flags = 2;
            break;
        case 4:
            k.ninfo = 5;
            break;
        case 5:
            k.pad = 1;
            break;
        case 6:
            k.rw = 0.9f;
            break;
        case 7:
            k.t0 = NAN;
            break;
        case 8:
            k.bmax0 = -1.0f;
            break;
        case 9:
            k.bmin0 = NAN;
            break;
        case 10:
            k.smax = 1.0f;
            break;
        case 11:
            k.qbits = 12;
            break; /* 65535 > 4095 */
        case 12:
            k.v[7] = 1;
            break;
        case 13:
            k.elem[4] = 4;
            break;
        case 14:
            k.nvert_claim = PROTO_MAX_OBJECT_VERTS + 1;
            break;
        case 15:
            k.nelem_claim = PROTO_MAX_OBJECT_ELEMS + 1;
            break;
        case 16:
            k.nvert_claim = 600;
            break; /* the codec has no count: 5 would decode */
        case 23:
            k.tstep = 0.0f;
            break;
        case 24:
            k.tstep = NAN;
            break;
        case 17:
            k.nelem_claim = 3;
            break;
        case 18:
            k.parts |= 64;
            break;
        case 25:
            k.parts |= PROTO_PART_HOLD;
            break;
        case 19:
            k.parts |= PROTO_PART_REMOVE;
            break;
        case 20:
            k.info0 = INFINITY;
            break;
        case 21:
            k.flags = 1, k.smin = 2.0f, k.smax = 1.0f;
            break;
        case 22: {
            k.prim = 2;
            uint32_t e[4] = {0, 1, 3, 4};
            memcpy(k.elem, e, sizeof e);
            break;
        }
        }
        c.name = keys[i].name;
        c.want = keys[i].want;
        c.len = key_frame(c.bytes, sizeof c.bytes, &k, PROTO_FLAG_STRUCTURAL);
        expect_refusal(d, &c);
    }

    /* Records that do not fit the object held (key 3, 4 vertices, 2 triangles). */
    static wb w;
    static const uint16_t d4[16] = {1, 1, 1, 0};
    static const uint16_t app_v[8] = {5, 5, 5, 0, 6, 6, 6, 0};
    static const uint32_t app_e[3] = {3, 4, 5};
#define FRAME(nm, st, flags, ...)                               \
    do {                                                        \
        w.n = 0;                                                \
        __VA_ARGS__;                                            \
        c.name = nm;                                            \
        c.want = st;                                            \
        c.len = w_frame(c.bytes, sizeof c.bytes, flags, &w, 2); \
        expect_refusal(d, &c);                                  \
    } while (0)
    FRAME("delta for an object not held", PROTO_ERR_STATE, 0, {
        w_u32(&w, 1), w_u16(&w, 8), w_u16(&w, 3), w_u8(&w, PROTO_PART_DELTA), w_u8(&w, 0);
        w_u32(&w, 4), w_verts(&w, d4, 4);
    });
    FRAME("delta for another key", PROTO_ERR_STATE, 0, {
        w_u32(&w, 1), w_u16(&w, 7), w_u16(&w, 2), w_u8(&w, PROTO_PART_DELTA), w_u8(&w, 0);
        w_u32(&w, 4), w_verts(&w, d4, 4);
    });
    FRAME("transform for another key", PROTO_ERR_STATE, 0, {
        w_u32(&w, 1), w_u16(&w, 7), w_u16(&w, 4), w_u8(&w, PROTO_PART_TRANSFORM), w_u8(&w, 0);
        w_xfc(&w, 1000, 0, 0, 0, 3);
    });
    FRAME("transform code leaving out component 4", PROTO_ERR_CORRUPT, 0, {
        w_u32(&w, 1), w_u16(&w, 7), w_u16(&w, 3), w_u8(&w, PROTO_PART_TRANSFORM), w_u8(&w, 0);
        w_xfc(&w, 1000, 0, 0, 0, 4);
    });
    FRAME("transform code past the unit sphere", PROTO_ERR_CORRUPT, 0, {
        w_u32(&w, 1), w_u16(&w, 7), w_u16(&w, 3), w_u8(&w, PROTO_PART_TRANSFORM), w_u8(&w, 0);
        w_xfc(&w, 1000, 32767, 32767, 32767, 3);
    });
    FRAME("truncated transform code", PROTO_ERR_CORRUPT, 0, {
        w_u32(&w, 1), w_u16(&w, 7), w_u16(&w, 3), w_u8(&w, PROTO_PART_TRANSFORM), w_u8(&w, 0);
        w_u32(&w, 5);
    });
    FRAME("delta of 3 vertices for 4", PROTO_ERR_STATE, 0, {
        w_u32(&w, 1), w_u16(&w, 7), w_u16(&w, 3), w_u8(&w, PROTO_PART_DELTA), w_u8(&w, 0);
        w_u32(&w, 3), w_verts(&w, d4, 3);
    });
    FRAME("delta giving a scalar to an object without one", PROTO_ERR_CORRUPT, 0, {
        uint16_t sc[16] = {0, 0, 0, 1};
        w_u32(&w, 1), w_u16(&w, 7), w_u16(&w, 3), w_u8(&w, PROTO_PART_DELTA), w_u8(&w, 0);
        w_u32(&w, 4), w_verts(&w, sc, 4);
    });
    FRAME("append that does not start at the end", PROTO_ERR_STATE, PROTO_FLAG_STRUCTURAL, {
        w_u32(&w, 1), w_u16(&w, 7), w_u16(&w, 3), w_u8(&w, PROTO_PART_APPEND), w_u8(&w, 0);
        w_u32(&w, 3), w_u32(&w, 2), w_u32(&w, 2), w_u32(&w, 1);
        w_elems(&w, 1, app_e, 1, 6), w_verts(&w, app_v, 2);
    });
    FRAME("append whose index passes its vertices", PROTO_ERR_CORRUPT, PROTO_FLAG_STRUCTURAL, {
        uint32_t e2[3] = {3, 4, 6};
        w_u32(&w, 1), w_u16(&w, 7), w_u16(&w, 3), w_u8(&w, PROTO_PART_APPEND), w_u8(&w, 0);
        w_u32(&w, 4), w_u32(&w, 2), w_u32(&w, 2), w_u32(&w, 1);
        w_elems(&w, 1, e2, 1, 7), w_verts(&w, app_v, 2);
    });
    FRAME("append, then a delta of the old count", PROTO_ERR_STATE, PROTO_FLAG_STRUCTURAL, {
        w_u32(&w, 1), w_u16(&w, 7), w_u16(&w, 3), w_u8(&w, PROTO_PART_APPEND | PROTO_PART_DELTA),
            w_u8(&w, 0);
        w_u32(&w, 4), w_u32(&w, 2), w_u32(&w, 2), w_u32(&w, 1);
        w_elems(&w, 1, app_e, 1, 6), w_verts(&w, app_v, 2);
        w_u32(&w, 4), w_verts(&w, d4, 4);
    });
    FRAME("remove an object not held", PROTO_ERR_STATE, PROTO_FLAG_STRUCTURAL,
          { w_u32(&w, 1), w_u16(&w, 9), w_u16(&w, 3), w_u8(&w, PROTO_PART_REMOVE), w_u8(&w, 0); });
    FRAME("remove without the structural flag", PROTO_ERR_CORRUPT, 0,
          { w_u32(&w, 1), w_u16(&w, 7), w_u16(&w, 3), w_u8(&w, PROTO_PART_REMOVE), w_u8(&w, 0); });
    FRAME("structural flag on a delta", PROTO_ERR_CORRUPT, PROTO_FLAG_STRUCTURAL, {
        w_u32(&w, 1), w_u16(&w, 7), w_u16(&w, 3), w_u8(&w, PROTO_PART_DELTA), w_u8(&w, 0);
        w_u32(&w, 4), w_verts(&w, d4, 4);
    });
    FRAME("snapshot record without a key", PROTO_ERR_CORRUPT,
          PROTO_FLAG_SNAPSHOT | PROTO_FLAG_STRUCTURAL, {
              w_u32(&w, 1), w_u16(&w, 7), w_u16(&w, 3), w_u8(&w, PROTO_PART_TRANSFORM), w_u8(&w, 0);
              w_xfc(&w, 1000, 0, 0, 0, 3);
          });
    FRAME("no parts", PROTO_ERR_CORRUPT, 0,
          { w_u32(&w, 1), w_u16(&w, 7), w_u16(&w, 3), w_u8(&w, 0), w_u8(&w, 0); });
    FRAME("record padding not 0", PROTO_ERR_CORRUPT, 0, {
        w_u32(&w, 1), w_u16(&w, 7), w_u16(&w, 3), w_u8(&w, PROTO_PART_TRANSFORM), w_u8(&w, 1);
        w_xfc(&w, 1000, 0, 0, 0, 3);
    });
    FRAME("the same id twice", PROTO_ERR_CORRUPT, 0, {
        w_u32(&w, 2);
        for (int i = 0; i < 2; i++) {
            w_u16(&w, 7), w_u16(&w, 3), w_u8(&w, PROTO_PART_TRANSFORM), w_u8(&w, 0);
            w_xfc(&w, 1000, 0, 0, 0, 3);
        }
    });
    FRAME("more records than PROTO_MAX_OBJECTS", PROTO_ERR_LIMIT, 0,
          { w_u32(&w, PROTO_MAX_OBJECTS + 1); });
    FRAME("a record count with no records", PROTO_ERR_CORRUPT, 0, { w_u32(&w, 2); });
    FRAME("trailing bytes", PROTO_ERR_CORRUPT, 0, {
        w_u32(&w, 1), w_u16(&w, 7), w_u16(&w, 3), w_u8(&w, PROTO_PART_TRANSFORM), w_u8(&w, 0);
        w_xfc(&w, 1000, 0, 0, 0, 3);
        w_u8(&w, 0);
    });
    FRAME("empty payload", PROTO_ERR_CORRUPT, 0, {});
    FRAME("vertex bytes for no vertex", PROTO_ERR_CORRUPT, 0, {
        w_u32(&w, 1), w_u16(&w, 7), w_u16(&w, 3), w_u8(&w, PROTO_PART_DELTA), w_u8(&w, 0);
        w_u32(&w, 4), w_u32(&w, 3), w_u8(&w, 0xa0), w_u8(&w, 0), w_u8(&w, 0);
    });
    FRAME("undecodable vertex stream", PROTO_ERR_CORRUPT, 0, {
        w_u32(&w, 1), w_u16(&w, 7), w_u16(&w, 3), w_u8(&w, PROTO_PART_DELTA), w_u8(&w, 0);
        w_u32(&w, 4), w_u32(&w, 3), w_u8(&w, 0x55), w_u8(&w, 0), w_u8(&w, 0);
    });
    /* HOLD takes TRANSFORM and nothing else. */
    FRAME("hold with a delta", PROTO_ERR_CORRUPT, 0, {
        w_u32(&w, 1), w_u16(&w, 7), w_u16(&w, 3), w_u8(&w, PROTO_PART_HOLD | PROTO_PART_DELTA),
            w_u8(&w, 0);
        w_u32(&w, 4), w_verts(&w, d4, 4);
    });
    FRAME("hold with a transform and a delta", PROTO_ERR_CORRUPT, 0, {
        w_u32(&w, 1), w_u16(&w, 7), w_u16(&w, 3),
            w_u8(&w, PROTO_PART_HOLD | PROTO_PART_TRANSFORM | PROTO_PART_DELTA), w_u8(&w, 0);
        w_xfc(&w, 1000, 0, 0, 0, 3), w_u32(&w, 4), w_verts(&w, d4, 4);
    });
    FRAME("hold with an append", PROTO_ERR_CORRUPT, PROTO_FLAG_STRUCTURAL, {
        w_u32(&w, 1), w_u16(&w, 7), w_u16(&w, 3), w_u8(&w, PROTO_PART_HOLD | PROTO_PART_APPEND),
            w_u8(&w, 0);
        w_u32(&w, 4), w_u32(&w, 2), w_u32(&w, 2), w_u32(&w, 1);
        w_elems(&w, 1, app_e, 1, 6), w_verts(&w, app_v, 2);
    });
    FRAME("hold with a removal", PROTO_ERR_CORRUPT, PROTO_FLAG_STRUCTURAL, {
        w_u32(&w, 1), w_u16(&w, 7), w_u16(&w, 3), w_u8(&w, PROTO_PART_HOLD | PROTO_PART_REMOVE),
            w_u8(&w, 0);
    });
    FRAME("hold with a transform for another key", PROTO_ERR_STATE, 0, {
        w_u32(&w, 1), w_u16(&w, 7), w_u16(&w, 4), w_u8(&w, PROTO_PART_HOLD | PROTO_PART_TRANSFORM),
            w_u8(&w, 0);
        w_xfc(&w, 1000, 0, 0, 0, 3);
    });
    FRAME("hold with a transform code past the unit sphere", PROTO_ERR_CORRUPT, 0, {
        w_u32(&w, 1), w_u16(&w, 7), w_u16(&w, 3), w_u8(&w, PROTO_PART_HOLD | PROTO_PART_TRANSFORM),
            w_u8(&w, 0);
        w_xfc(&w, 1000, 32767, 32767, 32767, 3);
    });
    FRAME("hold with a truncated transform", PROTO_ERR_CORRUPT, 0, {
        w_u32(&w, 1), w_u16(&w, 7), w_u16(&w, 3), w_u8(&w, PROTO_PART_HOLD | PROTO_PART_TRANSFORM),
            w_u8(&w, 0);
    });
    /* Too many objects held after the frame: 4097 keys of empty objects. */
    w.n = 0;
    {
        static uint8_t big[PROTO_MAX_OBJECTS * 120 + 64], fb[1 << 20];
        size_t n = 0;
        uint32_t cnt = PROTO_MAX_OBJECTS;
        memcpy(big, &cnt, 4);
        n = 4;
        kspec e0 = tri_spec();
        e0.nvert = e0.nelem = e0.nvert_claim = e0.nelem_claim = 0;
        e0.ninfo = 0;
        for (uint32_t i = 0; i < cnt; i++) {
            if (i + 1 == 7)
                continue; /* the held one keeps its id: 4096 new + 1 held */
            w.n = 0;
            e0.id = i + 1;
            w_key(&w, &e0);
            memcpy(big + n, w.b, w.n);
            n += w.n;
        }
        uint32_t nrec = cnt - 1;
        memcpy(big, &nrec, 4); /* little-endian host, as the test machines are */
        /* add one more, id 5000 */
        w.n = 0;
        e0.id = 5000;
        w_key(&w, &e0);
        memcpy(big + n, w.b, w.n);
        n += w.n;
        nrec++;
        memcpy(big, &nrec, 4);
        size_t z = ZSTD_compress(fb + PROTO_HEADER_SIZE, sizeof fb - PROTO_HEADER_SIZE, big, n, 1);
        proto_header h = hdr(3);
        h.kind = PROTO_KIND_OBJECTS, h.flags = PROTO_FLAG_STRUCTURAL;
        h.raw_size = (uint32_t)n, h.payload_size = (uint32_t)z;
        proto_header_write(fb, &h);
        uint64_t before = state_sum(d);
        CHECK(proto_decoder_apply(d, fb, PROTO_HEADER_SIZE + z, NULL, err, sizeof err) ==
              PROTO_ERR_LIMIT);
        CHECK(state_sum(d) == before && strstr(err, "objects"));
    }
    /* HOLD | TRANSFORM is applied: the vertices stay, the transform is this frame's (1000 steps
     * of 1 mm from the key's t = 1); HOLD alone keeps it; a frame that does not name the object
     * takes it back to its key. */
    {
        o = proto_decoder_find(d, 7);
        REQUIRE(o && o->xf.t[0] == 1.0f);
        uint16_t q0[16];
        memcpy(q0, o->q, sizeof q0);
        static uint8_t fb[4096];
        w.n = 0;
        w_u32(&w, 1), w_u16(&w, 7), w_u16(&w, 3);
        w_u8(&w, PROTO_PART_HOLD | PROTO_PART_TRANSFORM), w_u8(&w, 0);
        w_xfc(&w, 1000, 0, 0, 0, 3);
        size_t n = w_frame(fb, sizeof fb, 0, &w, 3);
        CHECK(proto_decoder_apply(d, fb, n, NULL, err, sizeof err) == PROTO_OK);
        o = proto_decoder_find(d, 7);
        CHECK(o && o->parts == (PROTO_PART_HOLD | PROTO_PART_TRANSFORM) && o->xf.t[0] == 2.0f &&
              o->xf.r[3] == 1.0f && !memcmp(o->q, q0, sizeof q0));
        w.n = 0;
        w_u32(&w, 1), w_u16(&w, 7), w_u16(&w, 3), w_u8(&w, PROTO_PART_HOLD), w_u8(&w, 0);
        n = w_frame(fb, sizeof fb, 0, &w, 4);
        CHECK(proto_decoder_apply(d, fb, n, NULL, err, sizeof err) == PROTO_OK);
        o = proto_decoder_find(d, 7);
        CHECK(o && o->parts == PROTO_PART_HOLD && o->xf.t[0] == 2.0f);
        w.n = 0;
        w_u32(&w, 0);
        n = w_frame(fb, sizeof fb, 0, &w, 5);
        CHECK(proto_decoder_apply(d, fb, n, NULL, err, sizeof err) == PROTO_OK);
        o = proto_decoder_find(d, 7);
        CHECK(o && o->parts == 0 && o->xf.t[0] == 1.0f && !memcmp(o->q, q0, sizeof q0));
    }
    /* Every prefix of a good frame is refused. */
    for (size_t n = 0; n < glen; n++)
        CHECK(proto_decoder_apply(d, good, n, NULL, NULL, 0) != PROTO_OK);
    /* Not an object frame, a frame with flags that do not exist. */
    c.name = "flags 4";
    c.want = PROTO_ERR_CORRUPT;
    memcpy(c.bytes, good, glen);
    c.len = glen;
    c.bytes[36] = 4 | PROTO_FLAG_STRUCTURAL;
    expect_refusal(d, &c);
    c.name = "snapshot without structural";
    c.bytes[36] = PROTO_FLAG_SNAPSHOT;
    expect_refusal(d, &c);
    c.name = "version 1 (gone)";
    c.bytes[36] = PROTO_FLAG_STRUCTURAL;
    c.bytes[4] = 1;
    c.want = PROTO_ERR_VERSION;
    expect_refusal(d, &c);
    c.bytes[4] = PROTO_VERSION;
    c.bytes[5] = PROTO_KIND_SLICE;
    c.name = "a slice to the object decoder";
    c.want = PROTO_ERR_CORRUPT; /* flags on a slice */
    expect_refusal(d, &c);
    c.bytes[36] = 0;
    c.want = PROTO_ERR_KIND;
    expect_refusal(d, &c);
    proto_decoder_destroy(d);
}

/* Flipped bits in a real frame sequence: refused (state unchanged) or applied consistently;
 * never a crash or an out-of-bounds access (ASan). */
TEST(proto_objects_survive_corruption)
{
    static mobj m[4];
    proto_object_in in[4];
    for (int i = 0; i < 4; i++) {
        make_obj(&m[i], (uint16_t)(i + 1));
        in[i] = m[i].in;
    }
    proto_encoder *e;
    REQUIRE(proto_encoder_create(&e, NULL) == PROTO_OK);
    proto_buf key = {0}, next = {0};
    proto_header h = hdr(1);
    REQUIRE(proto_encode_frame2(e, &key, &h, in, 4, NULL) == PROTO_OK);
    for (int i = 0; i < 4; i++) {
        step_obj(&m[i]);
        m[i].in.xf.t[0] += 1.0f;
        m[i].pos[0] += 0.05f;
        in[i] = m[i].in;
    }
    h = hdr(2);
    REQUIRE(proto_encode_frame2(e, &next, &h, in, 4, NULL) == PROTO_OK);
    uint8_t *c = malloc(key.len > next.len ? key.len : next.len);
    int refused = 0, applied = 0;
    for (int t = 0; t < 3000; t++) {
        proto_decoder *d;
        REQUIRE(proto_decoder_create(&d) == PROTO_OK);
        const proto_buf *victim = t % 2 ? &next : &key;
        if (victim == &next)
            REQUIRE(proto_decoder_apply(d, key.data, key.len, NULL, NULL, 0) == PROTO_OK);
        memcpy(c, victim->data, victim->len);
        int flips = 1 + (int)(rnd() % 3);
        for (int k = 0; k < flips; k++)
            c[PROTO_HEADER_SIZE / 2 + rnd() % (victim->len - PROTO_HEADER_SIZE / 2)] ^=
                (uint8_t)(1u << (rnd() % 8));
        uint64_t before = state_sum(d);
        if (proto_decoder_apply(d, c, victim->len, NULL, NULL, 0) == PROTO_OK) {
            applied++;
            for (uint32_t i = 0; i < proto_decoder_count(d); i++) {
                const proto_object *o = proto_decoder_object(d, i);
                size_t es = o->primitive == PROTO_PRIM_TRIANGLES ? 3 : 2;
                for (size_t j = 0; j < o->nelem * es; j++)
                    CHECK(o->elem[j] < o->nvert);
                for (size_t j = 0; j < (size_t)o->nvert * 4; j++)
                    CHECK(j % 4 == 3 || o->q[j] < (1u << o->qbits));
            }
        } else {
            refused++;
            CHECK(state_sum(d) == before);
        }
        proto_decoder_destroy(d);
    }
    th_note("3000 corrupted object frames: %d refused, %d applied consistently", refused, applied);
    CHECK(refused > 0 && applied + refused == 3000);
    free(c);
    proto_buf_free(&key);
    proto_buf_free(&next);
    proto_encoder_destroy(e);
}

/* ------------------------------------------------------------------ the crowd's bytes */

/* A cape at LOD 0 (20 x 34 particles, 0.6 x 1.05 m) hanging in its character's root frame,
 * a little swung per character. */
static void cape(float *pos, uint32_t *tri, int ch)
{
    int nx = 20, ny = 34, t = 0;
    for (int j = 0; j < ny; j++)
        for (int i = 0; i < nx; i++) {
            float u = (float)i / (float)(nx - 1), v = (float)j / (float)(ny - 1);
            float *p = &pos[(j * nx + i) * 3];
            p[0] = -0.3f + 0.6f * u;
            p[1] = -0.12f - 0.25f * v * v * (0.5f + 0.1f * (float)(ch % 5)) -
                   0.03f * sinf(6.0f * u + (float)ch);
            p[2] = 1.45f - 1.05f * v;
            if (i + 1 < nx && j + 1 < ny) {
                uint32_t a = (uint32_t)(j * nx + i), b = a + 1, c = a + (uint32_t)nx, d = c + 1;
                uint32_t q[6] = {a, c, b, b, c, d};
                memcpy(&tri[t * 6], q, sizeof q);
                t++;
            }
        }
}

static void walk(proto_object_in *o, int ch, int frame)
{
    float yaw = 0.3f * (float)ch + 0.002f * (float)frame;
    float s = (float)frame / 60.0f * 1.4f; /* 1.4 m/s */
    o->xf.t[0] = 2.0f * (float)(ch % 10) + s * cosf(yaw);
    o->xf.t[1] = 2.0f * (float)(ch / 10) + s * sinf(yaw);
    o->xf.t[2] = 0.02f * sinf((float)frame * 0.4f + (float)ch);
    o->xf.r[0] = 0.0f, o->xf.r[1] = 0.0f;
    o->xf.r[2] = sinf(yaw / 2), o->xf.r[3] = cosf(yaw / 2);
}

static float gauss(void)
{
    float u = frand(1e-6f, 1.0f), v = frand(0.0f, 1.0f);
    return sqrtf(-2.0f * logf(u)) * cosf(6.2831853f * v);
}

/* One measurement: 100 capes keyed, then moved rigidly, then for 60 frames rigidly with
 * noise_mm of independent flutter (Gaussian, per component: the worst case, pure entropy)
 * and a smooth swing of swing_cm (a wave down the cape, larger at the hem: what cloth does);
 * the bytes of each. */
typedef struct crowd_bytes {
    size_t key, xf, steady; /* steady: mean bytes a frame over the 60 */
    uint32_t rekeys;
} crowd_bytes;

static crowd_bytes crowd(unsigned qbits, float noise_mm, float swing_cm)
{
    enum { N = 100, NV = 680, NT = 19 * 33 * 2 };
    static float rest[N][NV * 3], pos[N][NV * 3];
    static uint32_t tri[NT * 3];
    crowd_bytes r = {0, 0, 0, 0};
    proto_object_in in[N];
    for (int c = 0; c < N; c++) {
        cape(rest[c], tri, c);
        memset(&in[c], 0, sizeof in[c]);
        in[c].id = (uint16_t)(2 * c);
        in[c].primitive = PROTO_PRIM_TRIANGLES;
        in[c].qbits = (uint8_t)qbits;
        in[c].ninfo = 2;
        float lo[3] = {-0.5f, -0.9f, 0.0f}, hi[3] = {0.5f, 0.3f, 1.6f};
        memcpy(in[c].bmin, lo, sizeof lo);
        memcpy(in[c].bmax, hi, sizeof hi);
        in[c].nvert = NV;
        in[c].nelem = NT;
        in[c].elem = tri;
        in[c].pos = pos[c];
        memcpy(pos[c], rest[c], sizeof pos[c]);
        walk(&in[c], c, 0);
    }
    proto_encoder *e;
    proto_encoder_create(&e, NULL);
    proto_buf b = {0};
    proto_header h = hdr(1);
    proto_frame_stats s;
    proto_encode_frame2(e, &b, &h, in, N, &s);
    r.key = b.len;
    for (int c = 0; c < N; c++)
        walk(&in[c], c, 1);
    h = hdr(2);
    proto_encode_frame2(e, &b, &h, in, N, &s);
    r.xf = b.len;
    size_t sum = 0;
    for (int f = 2; f < 62; f++) {
        for (int c = 0; c < N; c++) {
            walk(&in[c], c, f);
            for (int v = 0; v < NV; v++) {
                float hem = (float)(v / 20) / 33.0f, u = (float)(v % 20) / 19.0f;
                float wave = 0.01f * swing_cm * hem * sinf(4.0f * hem - 0.3f * (float)f + u);
                for (int k = 0; k < 3; k++)
                    pos[c][v * 3 + k] = rest[c][v * 3 + k] + (k == 1 ? wave : 0.0f) +
                                        (noise_mm > 0.0f ? 0.001f * noise_mm * gauss() : 0.0f);
            }
        }
        h = hdr((uint64_t)f + 1);
        proto_encode_frame2(e, &b, &h, in, N, &s);
        sum += b.len;
        r.rekeys += s.nkey;
    }
    r.steady = sum / 60;
    proto_buf_free(&b);
    proto_encoder_destroy(e);
    return r;
}

TEST(proto_objects_crowd_of_capes_costs_transforms_not_vertices)
{
    static const struct {
        unsigned qbits;
        float noise_mm, swing_cm;
    } runs[] = {{16, 0, 0}, {16, 0, 3}, {12, 0, 3}, {16, 1, 0}, {12, 1, 0}, {10, 1, 0}, {12, 0, 0}};
    th_note("100 capes of 680 vertices (LOD 0, 20 x 34) walking, quantised in a 1.0 x 1.2 x "
            "1.6 m root-frame box; mean of 60 frames; KB/s at 60 Hz");
    for (size_t i = 0; i < sizeof runs / sizeof runs[0]; i++) {
        crowd_bytes r = crowd(runs[i].qbits, runs[i].noise_mm, runs[i].swing_cm);
        th_note("%2u bits, flutter %.0f mm i.i.d., swing %.0f cm: keyframe %zu B, "
                "transform-only %zu B, steady %zu B a frame (%.0f KB/s), %u re-keys",
                runs[i].qbits, (double)runs[i].noise_mm, (double)runs[i].swing_cm, r.key, r.xf,
                r.steady, (double)r.steady * 60.0 / 1000.0, r.rekeys);
        CHECK(r.xf * 15 < r.key); /* moving rigidly costs a transform, not vertices */
        if (runs[i].noise_mm == 0.0f && runs[i].swing_cm == 0.0f)
            CHECK(r.steady * 60 < 300000 && r.rekeys == 0);
    }
}

/* ------------------------------------------------------------------ the real crowd */

/* The cloth scene's crowd walking (sim/cloth/) as the server will send it: one object a
 * character, holding its cape (its current LOD) and then its body (a box round each capsule,
 * as server/scene_cloth.c's body_boxes() makes them: 8 vertices and 12 triangles), both taken
 * into the character's root frame, the object's transform (root position and yaw). Far
 * characters' shapes are updated every few frames and held between, their transforms sent
 * every frame (HOLD | TRANSFORM). A decoder follows the frames: every object must show this
 * frame's transform. */

typedef struct real_bytes {
    double bytes;              /* mean bytes a frame */
    uint32_t keys;             /* objects keyed */
    uint32_t held, held_moved; /* records: holds, holds with a transform */
    uint32_t stale;            /* objects a client showed away from their frame's transform */
    uint32_t clamped;          /* position components outside the objects' box */
    uint32_t at_lod[3];        /* characters at LOD 0, 1, 2 (or coarser) in the last frame */
    float cape_lo[3], cape_hi[3], body_lo[3], body_hi[3]; /* extents seen, root frame, m */
} real_bytes;

/* The extent [lo, hi] widened by n points. */
static void widen(const float *l, int n, float lo[3], float hi[3])
{
    for (int v = 0; v < n * 3; v++) {
        lo[v % 3] = fminf(lo[v % 3], l[v]);
        hi[v % 3] = fmaxf(hi[v % 3], l[v]);
    }
}

/* A run: the scene and each character's object. */
typedef struct crowd_run {
    sim_cloth_model *m;
    sim_backend *be;
    sim_cloth_scene *s;
    int nchar, nv, nt;   /* a character's most vertices and triangles (LOD 0 and its body) */
    proto_object_in *in; /* (nchar) */
    float *local;        /* (nchar x nv x 3) root frame */
    uint32_t *tri;       /* (nchar x nt x 3) */
} crowd_run;

/* The root-frame box of every object, cape and body (the extents the runs print, capes
 * [-0.80 -0.43 0.37]..[0.12 0.34 1.45] m and bodies [-0.34 -0.17 0.01]..[0.34 0.17 1.73] m
 * with 100 characters or 10, plus a margin). */
static const float k_crowd_lo[3] = {-0.85f, -0.45f, -0.05f}, k_crowd_hi[3] = {0.4f, 0.45f, 1.8f};

/* Character c this frame into r->in[c]: sim/cloth's mesh of it, as the server sends it. */
static void crowd_character(crowd_run *r, int c, int f, const unsigned qbits[3], const int every[3],
                            real_bytes *out)
{
    float *l = r->local + (size_t)c * (size_t)r->nv * 3;
    uint32_t *t = r->tri + (size_t)c * (size_t)r->nt * 3;
    sim_cloth_character_mesh m;
    sim_cloth_character_mesh_get(r->s, r->m, c, l, t, &m);
    int lod = m.lod, l3 = lod < 3 ? lod : 2;
    const float *p = m.root;
    float yaw = m.yaw;
    widen(l, m.cape_nvert, out->cape_lo, out->cape_hi);
    widen(l + 3 * m.cape_nvert, m.nvert - m.cape_nvert, out->body_lo, out->body_hi);
    for (int v = 0; v < m.nvert * 3; v++)
        out->clamped += l[v] < k_crowd_lo[v % 3] || l[v] > k_crowd_hi[v % 3];
    proto_object_in *o = &r->in[c];
    memset(o, 0, sizeof *o);
    o->id = (uint16_t)(2 * c);
    o->primitive = PROTO_PRIM_TRIANGLES;
    o->qbits = (uint8_t)qbits[l3];
    o->lod = (uint8_t)lod;
    memcpy(o->bmin, k_crowd_lo, sizeof o->bmin);
    memcpy(o->bmax, k_crowd_hi, sizeof o->bmax);
    o->nvert = (uint32_t)m.nvert;
    o->pos = l;
    o->nelem = (uint32_t)m.ntri;
    o->elem = t;
    o->topo_version = (uint32_t)lod;
    o->hold = (f + c) % every[l3] != 0; /* shape every every[lod] frames, staggered */
    o->xf.t[0] = p[0], o->xf.t[1] = p[1], o->xf.t[2] = p[2];
    o->xf.r[2] = sinf(yaw / 2), o->xf.r[3] = cosf(yaw / 2);
}

/* Every object a decoder holds shows this frame's transform (within its code's steps). */
static uint32_t crowd_stale(const proto_decoder *d, const crowd_run *r)
{
    uint32_t stale = 0;
    for (int c = 0; c < r->nchar; c++) {
        const proto_object *o = proto_decoder_find(d, r->in[c].id);
        stale += !o || !near_xf(&o->xf, &r->in[c].xf, o->tstep);
    }
    return stale;
}

static sim_status crowd_open(crowd_run *r, int nchar, int force_lod0)
{
    char err[256];
    memset(r, 0, sizeof *r);
    r->nchar = nchar;
    sim_status st = sim_cloth_model_create(&r->m, NULL, err, sizeof err);
    if (st == SIM_OK)
        st = sim_backend_create(&r->be, SIM_BACKEND_CPU, 2, err, sizeof err);
    if (st == SIM_OK)
        st = sim_cloth_scene_create(&r->s, r->m, r->be, nchar, err, sizeof err);
    sim_cloth_event ev;
    memset(&ev, 0, sizeof ev);
    ev.type = SIM_CLOTH_EV_MOTION;
    ev.character = -1;
    ev.motion = SIM_MOTION_WALK;
    if (st == SIM_OK)
        st = sim_cloth_push_event(r->s, &ev, err, sizeof err);
    if (st == SIM_OK && force_lod0) {
        ev.type = SIM_CLOTH_EV_FORCE_LOD;
        ev.lod = 0;
        st = sim_cloth_push_event(r->s, &ev, err, sizeof err);
    }
    if (st != SIM_OK)
        return st;
    r->nv = sim_cloth_character_mesh_max(r->m, &r->nt);
    size_t nv = (size_t)nchar * (size_t)r->nv, nt = (size_t)nchar * (size_t)r->nt;
    r->in = calloc((size_t)nchar, sizeof *r->in);
    r->local = malloc(nv * 3 * sizeof(float));
    r->tri = malloc(nt * 3 * sizeof(uint32_t));
    return r->in && r->local && r->tri ? SIM_OK : SIM_ERR_NOMEM;
}

static void crowd_close(crowd_run *r)
{
    free(r->in), free(r->local), free(r->tri);
    sim_cloth_scene_destroy(r->s);
    sim_backend_destroy(r->be);
    sim_cloth_model_destroy(r->m);
}

/* One run: warm frames, then frames measured; the means into out. */
static sim_status real_crowd(int nchar, int force_lod0, const unsigned qbits[3], const int every[3],
                             int warm, int frames, real_bytes *out)
{
    crowd_run r;
    memset(out, 0, sizeof *out);
    for (int k = 0; k < 3; k++) {
        out->cape_lo[k] = out->body_lo[k] = 1e9f;
        out->cape_hi[k] = out->body_hi[k] = -1e9f;
    }
    sim_status st = crowd_open(&r, nchar, force_lod0);
    proto_encoder *e = NULL;
    proto_decoder *d = NULL;
    if (st == SIM_OK &&
        (proto_encoder_create(&e, NULL) != PROTO_OK || proto_decoder_create(&d) != PROTO_OK))
        st = SIM_ERR_NOMEM;
    proto_buf b = {0};
    size_t bytes = 0;
    char err[256];
    for (int f = 0; st == SIM_OK && f < warm + frames; f++) {
        st = sim_cloth_step(r.s, NULL, err, sizeof err);
        if (st != SIM_OK || f < warm)
            continue;
        memset(out->at_lod, 0, sizeof out->at_lod);
        for (int c = 0; c < nchar; c++) {
            crowd_character(&r, c, f, qbits, every, out);
            out->at_lod[r.in[c].lod < 3 ? r.in[c].lod : 2]++;
        }
        proto_header h = hdr((uint64_t)f);
        proto_frame_stats fs;
        if (proto_encode_frame2(e, &b, &h, r.in, (uint32_t)nchar, &fs) != PROTO_OK ||
            proto_decoder_apply(d, b.data, b.len, NULL, NULL, 0) != PROTO_OK)
            st = SIM_ERR_ARG;
        bytes += b.len;
        out->keys += fs.nkey;
        out->held += fs.nhold;
        for (uint32_t i = 0; i < proto_decoder_count(d); i++)
            out->held_moved +=
                proto_decoder_object(d, i)->parts == (PROTO_PART_HOLD | PROTO_PART_TRANSFORM);
        out->stale += crowd_stale(d, &r);
    }
    out->bytes = (double)bytes / frames;
    proto_buf_free(&b);
    proto_encoder_destroy(e);
    proto_decoder_destroy(d);
    crowd_close(&r);
    return st;
}

TEST(proto_objects_real_walking_crowd_bytes)
{
    /* The README's table: SOFTCAST_CROWD=100 build/softcast-tests proto_objects_real (every
     * run); without it, 10 characters and one run (the test stays short). */
    const char *env = getenv("SOFTCAST_CROWD");
    int n = env ? atoi(env) : 10, full = env != NULL;
    n = n < 1 ? 1 : n > 400 ? 400 : n;
    static const struct {
        int lod0;
        unsigned qbits[3];
        int every[3];
    } runs[] = {{1, {16, 16, 16}, {1, 1, 1}}, {0, {16, 16, 16}, {1, 1, 1}},
                {0, {10, 9, 8}, {1, 1, 1}},   {0, {9, 8, 7}, {1, 2, 4}},
                {0, {9, 8, 7}, {2, 4, 8}},    {0, {8, 7, 6}, {1, 2, 4}},
                {0, {8, 7, 6}, {2, 4, 8}}};
    size_t first = full ? 0 : 4, end = full ? sizeof runs / sizeof runs[0] : 5;
    float lo[6] = {1e9f, 1e9f, 1e9f, 1e9f, 1e9f, 1e9f},
          hi[6] = {-1e9f, -1e9f, -1e9f, -1e9f, -1e9f, -1e9f};
    for (size_t i = first; i < end; i++) {
        real_bytes r;
        REQUIRE(real_crowd(n, runs[i].lod0, runs[i].qbits, runs[i].every, full ? 60 : 30,
                           full ? 60 : 20, &r) == SIM_OK);
        th_note("%d characters walking (cape and body an object), %s (%u/%u/%u at the end), "
                "%u/%u/%u bits, shape every %d/%d/%d frames (LOD 0/1/2): %.0f B a frame (%.0f "
                "KB/s at 60 Hz, %u keyed, %u held, %u of them moved)",
                n, runs[i].lod0 ? "all at LOD 0" : "LODs by camera distance", r.at_lod[0],
                r.at_lod[1], r.at_lod[2], runs[i].qbits[0], runs[i].qbits[1], runs[i].qbits[2],
                runs[i].every[0], runs[i].every[1], runs[i].every[2], r.bytes, r.bytes * 0.06,
                r.keys, r.held, r.held_moved);
        CHECKF(r.stale == 0, "%u objects shown away from their frame's transform", r.stale);
        CHECKF(r.clamped == 0, "%u position components outside the box", r.clamped);
        if (runs[i].every[2] > 1)
            CHECK(r.held > 0 && r.held_moved == r.held); /* they walk every frame */
        for (int k = 0; k < 3; k++) {
            lo[k] = fminf(lo[k], r.cape_lo[k]), hi[k] = fmaxf(hi[k], r.cape_hi[k]);
            lo[3 + k] = fminf(lo[3 + k], r.body_lo[k]), hi[3 + k] = fmaxf(hi[3 + k], r.body_hi[k]);
        }
    }
    th_note("root-frame extents: capes [%.2f %.2f %.2f]..[%.2f %.2f %.2f] m, bodies [%.2f %.2f "
            "%.2f]..[%.2f %.2f %.2f] m; the objects' box [%.2f %.2f %.2f]..[%.2f %.2f %.2f] m",
            (double)lo[0], (double)lo[1], (double)lo[2], (double)hi[0], (double)hi[1],
            (double)hi[2], (double)lo[3], (double)lo[4], (double)lo[5], (double)hi[3],
            (double)hi[4], (double)hi[5], (double)k_crowd_lo[0], (double)k_crowd_lo[1],
            (double)k_crowd_lo[2], (double)k_crowd_hi[0], (double)k_crowd_hi[1],
            (double)k_crowd_hi[2]);
}

/* ------------------------------------------------------------------ changed ranges */

/* An object's changed vertex ranges (proto_object_in.ranges) only spare the encoder work:
 * two encoders fed the same frames, one told where each frame changed and one not, write
 * the same bytes, frame after frame: local changes, none, all, a hold between, growth,
 * a rekey, the scalar. A range that overlaps, goes backwards or past the end is refused. */
TEST(objects_changed_ranges_give_the_same_bytes)
{
    enum { NV = 3000, NT = 2000, FRAMES = 80 };
    float *pos = malloc(sizeof(float) * 3 * NV), *sc = malloc(sizeof(float) * NV);
    uint32_t *tri = malloc(sizeof(uint32_t) * 3 * NT), ranges[2 * 8];
    REQUIRE(pos && sc && tri);
    for (int v = 0; v < NV; v++) {
        for (int b = 0; b < 3; b++)
            pos[3 * v + b] = frand(-1, 1);
        sc[v] = frand(0, 1);
    }
    for (int t = 0; t < 3 * NT; t++)
        tri[t] = rnd() % 2500u; /* the first 2500 vertices: growth appends the rest */
    proto_encoder *plain = NULL, *told = NULL;
    REQUIRE(proto_encoder_create(&plain, NULL) == PROTO_OK &&
            proto_encoder_create(&told, NULL) == PROTO_OK);
    proto_buf a = {0}, b = {0};
    for (int f = 0; f < FRAMES; f++) {
        proto_object_in in;
        memset(&in, 0, sizeof in);
        in.id = 7;
        in.primitive = PROTO_PRIM_TRIANGLES;
        in.qbits = 16;
        for (int k = 0; k < 3; k++)
            in.bmin[k] = -2, in.bmax[k] = 2;
        in.nvert = f < 40 ? 2500 : NV; /* grows at frame 40 */
        in.pos = pos;
        in.scalar = sc;
        in.smax = 1;
        in.nelem = NT;
        in.elem = tri;
        in.topo_version = f < 40 ? 1 : 2;
        in.xf = proto_transform_identity();
        in.hold = f == 20;
        uint32_t nr = 0;
        if (f % 10 == 5) { /* everything moves: one range over all */
            for (uint32_t v = 0; v < in.nvert; v++)
                pos[3 * v] += 0.001f;
            ranges[0] = 0, ranges[1] = in.nvert, nr = 1;
        } else if (f == 60) { /* far from the key: a rekey */
            for (uint32_t v = 0; v < in.nvert; v++)
                pos[3 * v + 1] = frand(-1, 1);
            ranges[0] = 0, ranges[1] = in.nvert, nr = 1;
        } else if (f % 10 != 9) { /* a few dents (frames ending in 9 change nothing) */
            uint32_t at = 0;
            for (int r = 0; r < 4; r++) {
                uint32_t first = at + rnd() % 300u, n = 1 + rnd() % 100u;
                if (first + n > in.nvert)
                    break;
                for (uint32_t v = first; v < first + n; v++) {
                    pos[3 * v + 2] += frand(-0.01f, 0.01f);
                    sc[v] = frand(0, 1);
                }
                ranges[2 * nr] = first, ranges[2 * nr + 1] = n, nr++;
                at = first + n + 1;
            }
        }
        proto_header h = hdr((uint64_t)f);
        REQUIRE(proto_encode_frame2(plain, &a, &h, &in, 1, NULL) == PROTO_OK);
        in.ranges = ranges;
        in.nranges = nr;
        REQUIRE(proto_encode_frame2(told, &b, &h, &in, 1, NULL) == PROTO_OK);
        CHECKF(a.len == b.len && !memcmp(a.data, b.data, a.len),
               "frame %d: %zu bytes told the ranges, %zu not", f, b.len, a.len);
        a.len = b.len = 0;
    }
    /* Ranges that are not ascending, disjoint and inside: refused. */
    proto_object_in bad;
    memset(&bad, 0, sizeof bad);
    bad.id = 7;
    bad.primitive = PROTO_PRIM_TRIANGLES;
    bad.nvert = NV;
    bad.pos = pos;
    bad.xf = proto_transform_identity();
    for (int k = 0; k < 3; k++)
        bad.bmin[k] = -2, bad.bmax[k] = 2;
    const uint32_t wrong[3][4] = {{10, 20, 25, 5}, {100, 5, 50, 5}, {2990, 20, 0, 0}};
    for (int k = 0; k < 3; k++) {
        bad.ranges = wrong[k];
        bad.nranges = k == 2 ? 1 : 2;
        proto_header h = hdr(FRAMES);
        CHECKF(proto_encode_frame2(told, &b, &h, &bad, 1, NULL) == PROTO_ERR_ARG,
               "bad ranges %d accepted", k);
    }
    proto_buf_free(&a);
    proto_buf_free(&b);
    proto_encoder_destroy(told);
    proto_encoder_destroy(plain);
    free(pos);
    free(sc);
    free(tri);
}

/* A frame's raw payload rewritten by fix (the header's sizes follow). */
static size_t reframe(const uint8_t *in, size_t len, uint8_t *out, size_t cap,
                      void (*fix)(uint8_t *raw, size_t n, int which), int which)
{
    proto_header h;
    if (proto_header_read(&h, in, len) != PROTO_OK)
        return 0;
    uint8_t *raw = malloc(h.raw_size);
    if (!raw ||
        ZSTD_decompress(raw, h.raw_size, in + PROTO_HEADER_SIZE, h.payload_size) != h.raw_size) {
        free(raw);
        return 0;
    }
    fix(raw, h.raw_size, which);
    size_t z = ZSTD_compress(out + PROTO_HEADER_SIZE, cap - PROTO_HEADER_SIZE, raw, h.raw_size, 1);
    free(raw);
    if (ZSTD_isError(z))
        return 0;
    h.payload_size = (uint32_t)z;
    proto_header_write(out, &h);
    return PROTO_HEADER_SIZE + z;
}

/* One record, no transform: u32 nrecords, u16 id, u16 key, u8 parts, u8 pad, then the
 * DELTA: u32 nvert, u32 nranges, the ranges. */
static void break_sparse(uint8_t *raw, size_t n, int which)
{
    (void)n;
    uint32_t nr = (uint32_t)raw[14] | (uint32_t)raw[15] << 8;
    switch (which) {
    case 0: /* more ranges than vertices */
        raw[14] = 0xff, raw[15] = 0xff;
        break;
    case 1: /* the second range starts inside the first */
        raw[26] = raw[18];
        break;
    case 2: /* the last range runs past the end */
        raw[18 + 8 * (nr - 1) + 4] = 0xf0;
        break;
    case 3: /* an empty range */
        raw[22] = raw[23] = raw[24] = raw[25] = 0;
        break;
    case 4: /* SPARSE without DELTA */
        raw[8] = PROTO_PART_SPARSE;
        break;
    default: /* the first range moved onto vertices that did not change: fine, if odd */
        break;
    }
}

/* A sparse delta from the encoder decodes to the vertices a whole one gives; each way of
 * breaking its ranges is refused as corrupt and leaves the decoder as it was. */
TEST(objects_sparse_delta_decodes_and_bad_ranges_are_refused)
{
    enum { NV = 200 };
    float pos[NV * 3];
    uint32_t seg[(NV - 1) * 2];
    for (int v = 0; v < NV; v++) {
        pos[3 * v] = frand(-1, 1), pos[3 * v + 1] = frand(-1, 1), pos[3 * v + 2] = frand(-1, 1);
        if (v + 1 < NV)
            seg[2 * v] = (uint32_t)v, seg[2 * v + 1] = (uint32_t)v + 1;
    }
    proto_object_in in;
    memset(&in, 0, sizeof in);
    in.id = 3;
    in.primitive = PROTO_PRIM_LINES;
    in.nvert = NV;
    in.pos = pos;
    in.nelem = NV - 1;
    in.elem = seg;
    in.topo_version = 1;
    in.xf = proto_transform_identity();
    for (int k = 0; k < 3; k++)
        in.bmin[k] = -2, in.bmax[k] = 2;
    proto_encoder *e;
    proto_decoder *d;
    REQUIRE(proto_encoder_create(&e, NULL) == PROTO_OK && proto_decoder_create(&d) == PROTO_OK);
    proto_buf key = {0}, delta = {0};
    proto_header h = hdr(1);
    proto_frame_stats st;
    char err[200];
    REQUIRE(proto_encode_frame2(e, &key, &h, &in, 1, &st) == PROTO_OK);
    REQUIRE(proto_decoder_apply(d, key.data, key.len, NULL, err, sizeof err) == PROTO_OK);
    pos[3 * 10] += 0.5f, pos[3 * 120 + 1] -= 0.5f, pos[3 * 121 + 2] += 0.25f;
    h = hdr(2);
    REQUIRE(proto_encode_frame2(e, &delta, &h, &in, 1, &st) == PROTO_OK);
    static uint8_t bad[1 << 16];
    for (int w = 0; w < 5; w++) {
        size_t n = reframe(delta.data, delta.len, bad, sizeof bad, break_sparse, w);
        REQUIRE(n > 0);
        proto_status s = proto_decoder_apply(d, bad, n, NULL, err, sizeof err);
        CHECKF(s == PROTO_ERR_CORRUPT, "broken sparse delta %d: status %d (%s)", w, (int)s, err);
    }
    REQUIRE(proto_decoder_apply(d, delta.data, delta.len, NULL, err, sizeof err) == PROTO_OK);
    const proto_object *o = proto_decoder_find(d, 3);
    REQUIRE(o && o->nvert == NV);
    CHECKF(o->parts == (PROTO_PART_DELTA | PROTO_PART_SPARSE), "parts %u", o->parts);
    int wrong = 0;
    for (int v = 0; v < NV; v++)
        for (int b = 0; b < 3; b++)
            wrong += o->q[4 * v + b] != quant(pos[3 * v + b], -2, 2, 16);
    CHECKF(wrong == 0, "%d coordinates not what the input quantises to", wrong);
    proto_buf_free(&key);
    proto_buf_free(&delta);
    proto_encoder_destroy(e);
    proto_decoder_destroy(d);
}
