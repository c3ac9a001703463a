/* gen_vectors.c: writes protocol/vectors/: small frames and vectors.json, what they decode to.
 * Run by `make protocol-vectors`; the outputs are committed, and both the C tests and the
 * browser's decoder check them, so a decoder change that breaks old bytes shows up.
 *
 * The object frames are a sequence a client receives: two triangle objects keyed,
 * a transform-only frame, vertex deltas, a hold, a hold that moves (HOLD | TRANSFORM), one
 * object re-keyed (a LOD switch), a line set with scalars, its growth (an append), a removal,
 * then a snapshot a joiner starts from; and frames that must be refused by a decoder in a given
 * state, or by any (a record no encoder writes: HOLD | DELTA). The values vectors.json states are
 * computed here from the encoder's inputs by the formulas of protocol/README.md (quantisation,
 * the transform code), not by the decoder, so the decoders are checked against the spec.
 * Besides: a slice, and the same slice with version 1 in its header (refused). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include "protocol/proto.h"

static const char *g_dir;
static int g_ok = 1;

static void write_bin(const char *name, const proto_buf *b, proto_status st)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", g_dir, name);
    FILE *f = st == PROTO_OK ? fopen(path, "wb") : NULL;
    if (!f || fwrite(b->data, 1, b->len, f) != b->len) {
        fprintf(stderr, "gen_vectors: cannot write %s (%s)\n", path, proto_status_str(st));
        g_ok = 0;
    }
    if (f && fclose(f) != 0)
        g_ok = 0;
}

/* The encoder's frame b with the parts byte of its first record set to parts: a record no
 * encoder writes, for a refusal. */
static void write_first_parts(const char *name, const proto_buf *b, unsigned was, unsigned parts)
{
    proto_header h;
    proto_buf out = {0};
    uint8_t *raw = NULL;
    proto_status st = proto_header_read(&h, b->data, b->len);
    size_t bound = ZSTD_compressBound(h.raw_size);
    if (st == PROTO_OK && (raw = malloc(h.raw_size + 1)) &&
        (out.data = malloc(PROTO_HEADER_SIZE + bound)) &&
        ZSTD_decompress(raw, h.raw_size, b->data + PROTO_HEADER_SIZE, h.payload_size) ==
            h.raw_size &&
        h.raw_size > 8 && raw[8] == was) {
        raw[8] = (uint8_t)parts; /* after u32 nrecords, u16 id, u16 key */
        size_t z = ZSTD_compress(out.data + PROTO_HEADER_SIZE, bound, raw, h.raw_size, 1);
        h.payload_size = (uint32_t)z;
        proto_header_write(out.data, &h);
        out.len = ZSTD_isError(z) ? 0 : PROTO_HEADER_SIZE + z;
    }
    write_bin(name, &out, out.len ? PROTO_OK : PROTO_ERR_CORRUPT);
    free(raw);
    free(out.data);
}

/* ------------------------------------------------------------------ the spec's formulas */

static uint16_t quant(float p, float lo, float hi, unsigned bits)
{
    float ext = hi - lo, t = ext > 0.0f ? (p - lo) / ext : 0.0f;
    t = t < 0.0f ? 0.0f : t > 1.0f ? 1.0f : t;
    return (uint16_t)lrintf(t * (float)((1u << bits) - 1u));
}

/* A frame's transform as a decoder shows it: coded against the key, then decoded. */
static proto_transform coded(const proto_transform *key, float tstep, const proto_transform *xf)
{
    const double scale = 32767.0 * 1.41421356237309504880;
    proto_transform out;
    for (int k = 0; k < 3; k++) {
        double dt = rint(((double)xf->t[k] - (double)key->t[k]) / (double)tstep);
        out.t[k] = (float)((double)key->t[k] + dt * (double)tstep);
    }
    int big = 0;
    for (int k = 1; k < 4; k++)
        if (fabsf(xf->r[k]) > fabsf(xf->r[big]))
            big = k;
    double sign = xf->r[big] < 0.0f ? -1.0 : 1.0, c[3], s = 0.0;
    for (int k = 0, j = 0; k < 4; k++)
        if (k != big) {
            double v = rint((double)xf->r[k] * sign * scale);
            v = v > 32767.0 ? 32767.0 : v < -32767.0 ? -32767.0 : v;
            c[j] = (double)(int16_t)v / scale;
            s += c[j] * c[j];
            j++;
        }
    for (int k = 0, j = 0; k < 4; k++)
        out.r[k] = k == big ? (float)sqrt(1.0 - s) : (float)c[j++];
    return out;
}

/* ------------------------------------------------------------------ the model */

#define MAXV 80

/* One object as the server has it, and what a decoder must show for it. */
typedef struct vobj {
    proto_object_in in;
    float pos[MAXV * 3], scalar[MAXV];
    uint32_t elem[MAXV * 3];
    int live;
    /* expected */
    uint16_t key;
    unsigned parts;
    proto_transform key_xf;
    float tstep, info[PROTO_MAX_INFO];
    uint8_t ninfo;
    uint16_t base[MAXV * 4];
    uint32_t nbase, nbase_elem;
    /* what a client shows: the vertices of the last frame that did not hold the object, the
     * transform of this one */
    float shown_pos[MAXV * 3], shown_scalar[MAXV];
    proto_transform shown_xf;
} vobj;

static void show(vobj *o)
{
    memcpy(o->shown_pos, o->pos, sizeof o->pos);
    memcpy(o->shown_scalar, o->scalar, sizeof o->scalar);
    o->shown_xf = o->in.xf;
}

static float tstep_of(const proto_object_in *o)
{
    if (o->tstep > 0.0f)
        return o->tstep;
    float ext = 0.0f;
    for (int k = 0; k < 3; k++)
        ext = fmaxf(ext, o->bmax[k] - o->bmin[k]);
    return ext / 65535.0f;
}

static unsigned bits_of(const vobj *o)
{
    return o->in.qbits ? o->in.qbits : 16;
}

static void quant_vertex(const vobj *o, uint32_t v, uint16_t *q)
{
    for (int b = 0; b < 3; b++)
        q[b] = quant(o->pos[v * 3 + b], o->in.bmin[b], o->in.bmax[b], bits_of(o));
    q[3] = o->in.scalar ? quant(o->scalar[v], o->in.smin, o->in.smax, 16) : 0;
}

static void quant_shown(const vobj *o, uint32_t v, uint16_t *q)
{
    for (int b = 0; b < 3; b++)
        q[b] = quant(o->shown_pos[v * 3 + b], o->in.bmin[b], o->in.bmax[b], bits_of(o));
    q[3] = o->in.scalar ? quant(o->shown_scalar[v], o->in.smin, o->in.smax, 16) : 0;
}

/* The object is keyed in this step: its base is its vertices now. */
static void expect_key(vobj *o, uint16_t serial)
{
    o->key = serial;
    o->key_xf = o->in.xf;
    o->tstep = tstep_of(&o->in);
    o->ninfo = o->in.ninfo;
    memcpy(o->info, o->in.info, sizeof o->info);
    for (uint32_t v = 0; v < o->in.nvert; v++)
        quant_vertex(o, v, &o->base[v * 4]);
    o->nbase = o->in.nvert;
    o->nbase_elem = o->in.nelem;
}

/* The vertices the input added since the base are appended to it. */
static void expect_append(vobj *o)
{
    for (uint32_t v = o->nbase; v < o->in.nvert; v++)
        quant_vertex(o, v, &o->base[v * 4]);
    o->nbase = o->in.nvert;
    o->nbase_elem = o->in.nelem;
}

/* ------------------------------------------------------------------ JSON */

static FILE *g_json;

static void j_floats(const char *name, const float *v, int n)
{
    fprintf(g_json, "\"%s\": [", name);
    for (int i = 0; i < n; i++)
        fprintf(g_json, "%s%.9g", i ? ", " : "", (double)v[i]);
    fprintf(g_json, "]");
}

static void j_u32s(const char *name, const uint32_t *v, size_t n)
{
    fprintf(g_json, "\"%s\": [", name);
    for (size_t i = 0; i < n; i++)
        fprintf(g_json, "%s%u", i ? ", " : "", v[i]);
    fprintf(g_json, "]");
}

static void j_u16s(const char *name, const uint16_t *v, size_t n)
{
    fprintf(g_json, "\"%s\": [", name);
    for (size_t i = 0; i < n; i++)
        fprintf(g_json, "%s%u", i ? ", " : "", v[i]);
    fprintf(g_json, "]");
}

static void j_xf(const char *name, const proto_transform *xf)
{
    fprintf(g_json, "\"%s\": {", name);
    j_floats("t", xf->t, 3);
    fprintf(g_json, ", ");
    j_floats("r", xf->r, 4);
    fprintf(g_json, "}");
}

static void j_header(const proto_header *h, unsigned kind, unsigned flags)
{
    fprintf(g_json,
            "\"version\": %d, \"kind\": %u, \"flags\": %u, \"frame\": %llu, \"last_seq\": %u, "
            "\"sim_time_s\": %.17g",
            PROTO_VERSION, kind, flags, (unsigned long long)h->frame, h->last_seq, h->sim_time_s);
}

static void j_object(const vobj *o)
{
    const proto_object_in *in = &o->in;
    unsigned es = in->primitive == PROTO_PRIM_TRIANGLES ? 3 : 2;
    fprintf(g_json,
            "\n        {\"id\": %u, \"key\": %u, \"parts\": %u, \"primitive\": %u, \"qbits\": %u, "
            "\"lod\": %u, \"has_scalar\": %d, ",
            in->id, o->key, o->parts, in->primitive, bits_of(o), in->lod, in->scalar != NULL);
    j_floats("info", o->info, o->ninfo);
    fprintf(g_json, ", ");
    j_floats("bmin", in->bmin, 3);
    fprintf(g_json, ", ");
    j_floats("bmax", in->bmax, 3);
    float s[3] = {in->scalar ? in->smin : 0.0f, in->scalar ? in->smax : 0.0f, o->tstep};
    fprintf(g_json, ", \"smin\": %.9g, \"smax\": %.9g, \"tstep\": %.9g,\n         ", (double)s[0],
            (double)s[1], (double)s[2]);
    j_xf("key_transform", &o->key_xf);
    fprintf(g_json, ", ");
    proto_transform xf = memcmp(&o->shown_xf, &o->key_xf, sizeof xf)
                             ? coded(&o->key_xf, o->tstep, &o->shown_xf)
                             : o->key_xf;
    j_xf("transform", &xf);
    fprintf(g_json, ",\n         \"nvert\": %u, \"nelem\": %u, ", in->nvert, in->nelem);
    j_u32s("elements", in->elem, (size_t)in->nelem * es);
    fprintf(g_json, ",\n         ");
    j_u16s("base_q", o->base, (size_t)o->nbase * 4);
    uint16_t q[MAXV * 4];
    for (uint32_t v = 0; v < in->nvert; v++)
        quant_shown(o, v, &q[v * 4]);
    fprintf(g_json, ",\n         ");
    j_u16s("q", q, (size_t)in->nvert * 4);
    fprintf(g_json, "}");
}

static int g_nstep;

/* A step a decoder must accept: the objects it then holds, the ids removed. */
static void j_step(const char *file, const char *decoder, const proto_header *h, unsigned flags,
                   vobj *objs, int n, const uint16_t *removed, int nremoved, const char *about)
{
    fprintf(g_json, "%s\n    {\"file\": \"%s\", \"decoder\": \"%s\", \"about\": \"%s\",\n     ",
            g_nstep++ ? "," : "", file, decoder, about);
    j_header(h, PROTO_KIND_OBJECTS, flags);
    fprintf(g_json, ",\n     \"removed\": [");
    for (int i = 0; i < nremoved; i++)
        fprintf(g_json, "%s%u", i ? ", " : "", removed[i]);
    fprintf(g_json, "],\n     \"objects\": [");
    int first = 1;
    for (int i = 0; i < n; i++)
        if (objs[i].live) {
            fprintf(g_json, "%s", first ? "" : ",");
            j_object(&objs[i]);
            first = 0;
        }
    fprintf(g_json, "]}");
}

/* A step a decoder must refuse, with the status's name, leaving it as it was. */
static void j_refusal(const char *file, const char *decoder, const char *status, const char *about)
{
    fprintf(g_json,
            "%s\n    {\"file\": \"%s\", \"decoder\": \"%s\", \"about\": \"%s\", \"refused\": "
            "\"%s\"}",
            g_nstep++ ? "," : "", file, decoder, about, status);
}

/* ------------------------------------------------------------------ the sequence */

static proto_transform yaw(float deg, float x, float y, float z)
{
    float a = deg * 3.14159265f / 180.0f;
    proto_transform xf = {{x, y, z}, {0.0f, 0.0f, sinf(a / 2), cosf(a / 2)}};
    return xf;
}

static proto_header hdr(uint64_t frame, uint32_t seq)
{
    proto_header h;
    memset(&h, 0, sizeof h);
    h.frame = frame;
    h.last_seq = seq;
    h.sim_time_s = (double)frame / 60.0;
    return h;
}

static void objects_sequence(void)
{
    static vobj o[3];
    memset(o, 0, sizeof o);
    vobj *a = &o[0], *b = &o[1], *c = &o[2];
    /* A: a tetrahedron, mm, 16 bits. */
    static const float a_pos[12] = {-50, -50, 0, 50, -50, 0, -50, 50, 0, -50, -50, 100};
    static const uint32_t a_tri[12] = {0, 2, 1, 0, 1, 3, 1, 2, 3, 0, 3, 2};
    a->in = (proto_object_in){.id = 1, .primitive = PROTO_PRIM_TRIANGLES, .nvert = 4, .nelem = 4};
    memcpy(a->pos, a_pos, sizeof a_pos);
    memcpy(a->elem, a_tri, sizeof a_tri);
    float abox[6] = {-50, -50, 0, 50, 50, 100};
    memcpy(a->in.bmin, abox, 12);
    memcpy(a->in.bmax, abox + 3, 12);
    a->in.xf = proto_transform_identity();
    show(a);
    /* B: a quad with a scalar (stress in [-1, 1]), 12 bits, turned 90 degrees, 1 mm steps. */
    static const float b_pos[12] = {0, 0, 0, 1, 0, 0, 0, 1, 0, 1, 1, 0};
    static const uint32_t b_tri[6] = {0, 1, 2, 2, 1, 3};
    static const float b_s[4] = {-1.0f, 0.0f, 0.5f, 1.0f};
    b->in = (proto_object_in){.id = 2,
                              .primitive = PROTO_PRIM_TRIANGLES,
                              .qbits = 12,
                              .nvert = 4,
                              .nelem = 2,
                              .smin = -1.0f,
                              .smax = 1.0f,
                              .tstep = 0.001f};
    memcpy(b->pos, b_pos, sizeof b_pos);
    memcpy(b->elem, b_tri, sizeof b_tri);
    memcpy(b->scalar, b_s, sizeof b_s);
    b->in.scalar = b->scalar;
    b->in.bmax[0] = b->in.bmax[1] = b->in.bmax[2] = 1.0f;
    b->in.xf = yaw(90.0f, 10.0f, 0.0f, 0.0f);
    show(b);
    /* C: a stem of 4 vertices and 3 segments with an energy in [0, 2], 10 bits. */
    static const float c_pos[12] = {0, 0, 0, 0, 0, 1, 0.2f, 0, 2, 0.3f, 0.1f, 3};
    static const uint32_t c_seg[6] = {0, 1, 1, 2, 2, 3};
    static const float c_s[4] = {2.0f, 1.5f, 1.0f, 0.5f};
    c->in = (proto_object_in){.id = 7,
                              .primitive = PROTO_PRIM_LINES,
                              .qbits = 10,
                              .nvert = 4,
                              .nelem = 3,
                              .smin = 0.0f,
                              .smax = 2.0f};
    memcpy(c->pos, c_pos, sizeof c_pos);
    memcpy(c->elem, c_seg, sizeof c_seg);
    memcpy(c->scalar, c_s, sizeof c_s);
    c->in.scalar = c->scalar;
    float cbox[6] = {-1, -1, 0, 1, 1, 4};
    memcpy(c->in.bmin, cbox, 12);
    memcpy(c->in.bmax, cbox + 3, 12);
    c->in.xf = yaw(0.0f, 0.0f, 5.0f, 0.0f);
    show(c);
    for (int i = 0; i < 3; i++) {
        o[i].in.pos = o[i].pos;
        o[i].in.elem = o[i].elem;
    }
    a->live = b->live = 1;

    proto_encoder *e;
    proto_decoder *check; /* the C decoder follows, so a broken encoder stops the gen */
    if (proto_encoder_create(&e, NULL) != PROTO_OK || proto_decoder_create(&check) != PROTO_OK) {
        g_ok = 0;
        return;
    }
    proto_buf buf = {0};
    proto_object_in in[3];
    proto_frame_stats st;
    uint16_t removed[3] = {0, 0, 0};
#define ENCODE(file, frame, about, nrm)                                                         \
    do {                                                                                        \
        int n = 0;                                                                              \
        for (int i = 0; i < 3; i++)                                                             \
            if (o[i].live) {                                                                    \
                if (!o[i].in.hold)                                                              \
                    show(&o[i]);                                                                \
                else                                                                            \
                    o[i].shown_xf = o[i].in.xf;                                                 \
                in[n++] = o[i].in;                                                              \
            }                                                                                   \
        proto_header h = hdr(frame, (uint32_t)(frame)-90u);                                     \
        proto_status s = proto_encode_frame2(e, &buf, &h, in, (uint32_t)n, &st);                \
        write_bin(file, &buf, s);                                                               \
        char err[200];                                                                          \
        if (proto_decoder_apply(check, buf.data, buf.len, NULL, err, sizeof err) != PROTO_OK) { \
            fprintf(stderr, "gen_vectors: %s does not decode: %s\n", file, err);                \
            g_ok = 0;                                                                           \
        }                                                                                       \
        j_step(file, "main", &h, st.flags, o, 3, removed, nrm, about);                          \
    } while (0)

    expect_key(a, 0);
    expect_key(b, 1);
    a->parts = b->parts = PROTO_PART_KEY;
    ENCODE("objects-01-key.bin", 100, "two triangle objects keyed (a first frame: a snapshot)", 0);
    proto_header h1 = hdr(100, 10);
    j_step("objects-01-key.bin", "late", &h1, PROTO_FLAG_SNAPSHOT | PROTO_FLAG_STRUCTURAL, o, 3,
           removed, 0, "a client that will miss everything until the snapshot");

    b->in.xf = yaw(100.0f, 10.5f, 0.25f, 0.0f);
    a->parts = 0;
    b->parts = PROTO_PART_TRANSFORM;
    ENCODE("objects-02-transform.bin", 101, "B moves rigidly: a transform, no vertex", 0);

    a->pos[11] = 98.4741f; /* vertex 3 down about 1000 steps */
    b->pos[3] = 0.9f;
    b->scalar[0] = -0.5f;
    a->parts = PROTO_PART_DELTA;
    b->parts = PROTO_PART_TRANSFORM | PROTO_PART_DELTA;
    ENCODE("objects-03-delta.bin", 102, "vertex deltas on A and B, B still moved", 0);

    /* B is far: the server updates its shape every few frames and holds it between. Its
     * shape moved on, it stands still: HOLD alone. */
    b->pos[3] = 0.8f;
    b->in.hold = 1;
    b->parts = PROTO_PART_HOLD;
    ENCODE("objects-04-hold.bin", 103,
           "B held: it shows frame 102's vertices while the server's B changed shape", 0);
    /* It walks on while held: HOLD | TRANSFORM (the old vertices, this frame's transform). */
    b->in.xf = yaw(110.0f, 10.75f, 0.5f, 0.0f);
    b->pos[5] = 0.1f;
    b->parts = PROTO_PART_HOLD | PROTO_PART_TRANSFORM;
    ENCODE("objects-05-hold-transform.bin", 104,
           "B held and moved: frame 102's vertices, frame 104's transform", 0);
    write_first_parts("objects-refused-hold-delta.bin", &buf, PROTO_PART_DELTA,
                      PROTO_PART_HOLD | PROTO_PART_DELTA);
    j_refusal("objects-refused-hold-delta.bin", "main", "corrupt",
              "frame 104 with A's record (a delta) marked HOLD | DELTA: HOLD takes no part but "
              "TRANSFORM (without the HOLD bit the frame applies)");
    b->in.hold = 0;
    b->parts = PROTO_PART_TRANSFORM | PROTO_PART_DELTA;

    /* A's LOD switch: another topology (a quad: as many vertices as before, so only the key's
     * serial tells a stale delta), lod 1, the switch's E_pos and E_vel. */
    static const float a1[12] = {-40, -40, 10, 40, -40, 10, -40, 40, 60, 40, 40, 60};
    static const uint32_t a1_tri[6] = {0, 1, 2, 2, 1, 3};
    memcpy(a->pos, a1, sizeof a1);
    memcpy(a->elem, a1_tri, sizeof a1_tri);
    a->in.nvert = 4, a->in.nelem = 2, a->in.lod = 1, a->in.topo_version = 1;
    a->in.ninfo = 2, a->in.info[0] = 0.0125f, a->in.info[1] = 0.5f;
    expect_key(a, 2);
    a->parts = PROTO_PART_KEY;
    ENCODE("objects-06-rekey.bin", 105, "A re-keyed alone (a LOD switch); B goes on as a delta", 0);
    j_refusal("objects-03-delta.bin", "empty", "state", "a delta for objects a decoder never held");
    j_refusal("objects-03-delta.bin", "main", "state",
              "a delta for A's first key (0) after its re-key (2)");

    c->live = 1;
    expect_key(c, 3);
    a->parts = 0;
    c->parts = PROTO_PART_KEY;
    ENCODE("objects-07-lines.bin", 106, "a line set with a scalar per vertex keyed", 0);
    j_refusal("objects-09-remove.bin", "main", "state",
              "a frame of after the growth: the line set's delta has 6 vertices, it holds 4 "
              "(nothing of it applies: B stays)");

    /* Growth: two vertices, two segments, nothing else (an append alone: only its start
     * tells it was applied already). */
    static const float c_new[6] = {0.5f, 0.2f, 3.5f, 0.1f, -0.2f, 3.6f};
    memcpy(c->pos + 12, c_new, sizeof c_new);
    c->scalar[4] = 0.25f, c->scalar[5] = 0.1f;
    c->elem[6] = 3, c->elem[7] = 4, c->elem[8] = 3, c->elem[9] = 5;
    c->in.nvert = 6, c->in.nelem = 5, c->in.topo_version = 1;
    expect_append(c);
    c->parts = PROTO_PART_APPEND;
    ENCODE("objects-08-append.bin", 107, "the line set grows: two vertices, two segments", 0);
    j_refusal("objects-08-append.bin", "main", "state",
              "the same append again: it starts at vertex 4, the line set has 6");

    b->live = 0;
    removed[0] = 2;
    c->scalar[0] = 1.8f; /* the root's energy changes */
    c->parts = PROTO_PART_DELTA;
    ENCODE("objects-09-remove.bin", 108, "B removed; the line set's root energy changes", 1);

    /* The snapshot of frame 108, for a joiner. */
    proto_header h = hdr(108, 18);
    proto_status s = proto_encode_snapshot(e, &buf, &h, &st);
    write_bin("objects-10-snapshot.bin", &buf, s);
    a->parts = PROTO_PART_KEY;
    c->parts = PROTO_PART_KEY | PROTO_PART_DELTA;
    j_step("objects-10-snapshot.bin", "joiner", &h, st.flags, o, 3, removed, 0,
           "a joiner starts from the snapshot of frame 108: what main holds");
    /* The main client may take it too; B is gone already. */
    j_step("objects-10-snapshot.bin", "main", &h, st.flags, o, 3, removed, 0,
           "the snapshot applied by a client that has everything changes nothing but parts");
    static const uint16_t gone[1] = {2};
    j_step("objects-10-snapshot.bin", "late", &h, st.flags, o, 3, gone, 1,
           "the client that missed frames 101-108 takes the snapshot: B, which it still held, is "
           "dropped, A re-keyed, the line set added");

    proto_buf_free(&buf);
    proto_encoder_destroy(e);
    proto_decoder_destroy(check);
}

/* A sparse delta (PROTO_PART_SPARSE): an 80-vertex line set keyed, then two vertices far
 * apart moved: the delta names two ranges and carries those two vertices; every other vertex
 * shows its key's. A decoder of its own. */
static void sparse_sequence(void)
{
    static vobj d;
    memset(&d, 0, sizeof d);
    d.in = (proto_object_in){
        .id = 9, .primitive = PROTO_PRIM_LINES, .qbits = 12, .nvert = 80, .nelem = 79};
    for (int v = 0; v < 80; v++) {
        d.pos[3 * v] = 0.8f * cosf(0.3f * (float)v);
        d.pos[3 * v + 1] = 0.8f * sinf(0.3f * (float)v);
        d.pos[3 * v + 2] = 0.1f * (float)v;
        if (v < 79)
            d.elem[2 * v] = (uint32_t)v, d.elem[2 * v + 1] = (uint32_t)v + 1;
    }
    float box[6] = {-1, -1, 0, 1, 1, 9};
    memcpy(d.in.bmin, box, 12);
    memcpy(d.in.bmax, box + 3, 12);
    d.in.xf = yaw(0.0f, 0.0f, 0.0f, 0.0f);
    d.in.pos = d.pos;
    d.in.elem = d.elem;
    d.live = 1;
    proto_encoder *e;
    if (proto_encoder_create(&e, NULL) != PROTO_OK) {
        g_ok = 0;
        return;
    }
    proto_buf buf = {0};
    proto_frame_stats st;
    show(&d);
    proto_header h = hdr(200, 1);
    write_bin("objects-11-sparse-key.bin", &buf, proto_encode_frame2(e, &buf, &h, &d.in, 1, &st));
    expect_key(&d, 0);
    d.parts = PROTO_PART_KEY;
    j_step("objects-11-sparse-key.bin", "sparse", &h, st.flags, &d, 1, NULL, 0,
           "an 80-vertex line set keyed by a fresh encoder (a snapshot)");
    d.pos[3 * 5 + 2] += 0.3f;
    d.pos[3 * 60] -= 0.2f;
    show(&d);
    h = hdr(201, 2);
    write_bin("objects-12-sparse-delta.bin", &buf, proto_encode_frame2(e, &buf, &h, &d.in, 1, &st));
    d.parts = PROTO_PART_DELTA | PROTO_PART_SPARSE;
    j_step("objects-12-sparse-delta.bin", "sparse", &h, st.flags, &d, 1, NULL, 0,
           "vertices 5 and 60 moved: a sparse delta of two ranges, the rest as keyed");
    proto_buf_free(&buf);
    proto_encoder_destroy(e);
}

/* ------------------------------------------------------------------ slices */

static void slices(void)
{
    proto_buf b = {0};
    /* A 4 x 3 coronal slice. */
    static const uint8_t px[12] = {0, 16, 32, 48, 64, 80, 96, 112, 128, 160, 192, 255};
    proto_slice s = {1, 37, 4, 3, 40.0f, 400.0f, px};
    proto_header h = hdr(102, 9);
    write_bin("slice.bin", &b, proto_encode_slice(&b, &h, &s, 1));
    fprintf(g_json, "  \"slice.bin\": {");
    j_header(&h, PROTO_KIND_SLICE, 0);
    fprintf(g_json, ",\n    \"plane\": 1, \"index\": 37, \"width\": 4, \"height\": 3, \"level\": "
                    "40, \"window\": 400,\n    ");
    fprintf(g_json, "\"pixels\": [");
    for (int i = 0; i < 12; i++)
        fprintf(g_json, "%s%u", i ? ", " : "", px[i]);
    fprintf(g_json, "]},\n");
    /* Version 1 (mesh frames) is gone: its header is refused whatever follows. */
    b.data[4] = 1;
    write_bin("refused-version-1.bin", &b, PROTO_OK);
    fprintf(g_json, "  \"refused-version-1.bin\": {\"refused\": \"version\", \"about\": "
                    "\"slice.bin with version 1 in its header: every decoder refuses it\"},\n");
    proto_buf_free(&b);
}

int main(int argc, char **argv)
{
    g_dir = argc > 1 ? argv[1] : "protocol/vectors";
    char path[1024];
    snprintf(path, sizeof path, "%s/vectors.json", g_dir);
    g_json = fopen(path, "w");
    if (!g_json) {
        fprintf(stderr, "gen_vectors: cannot write %s\n", path);
        return 1;
    }
    fprintf(g_json,
            "{\n  \"about\": \"Written by tests/protocol/gen_vectors.c (make protocol-vectors): "
            "frames and what they decode to (protocol/README.md, Test vectors). objects: apply "
            "the steps in order, each to the decoder it names (a decoder starts empty the first "
            "time it is named); a step either gives the objects that decoder then holds, in id "
            "order, or says it must be refused with that status and change nothing. Positions "
            "are quantised (q: x, y, z, scalar per vertex); triangles may come back rotated "
            "(same winding). The other entries: a slice, and a frame with version 1 in its header "
            "(refused: version 1 is gone).\",\n");
    slices();
    fprintf(g_json, "  \"objects\": [");
    objects_sequence();
    sparse_sequence();
    fprintf(g_json, "\n  ]\n}\n");
    if (fclose(g_json) != 0)
        g_ok = 0;
    if (!g_ok)
        return 1;
    printf("gen_vectors: wrote %s/*.bin and vectors.json\n", g_dir);
    return 0;
}
