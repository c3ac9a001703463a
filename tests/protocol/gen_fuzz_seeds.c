/* gen_fuzz_seeds.c: writes the encoder-made seeds of the fuzz corpora (`make fuzz-seeds`):
 * tests/fuzz/corpus/frame/seed-*: a frame of every kind: object frames (keys of triangle
 * objects and of a line set, a snapshot with transforms and deltas, an empty frame, and every
 * frame of the sequences below), slices, and the deprecated version 1 mesh keyframe, delta and
 * LOD table; tests/fuzz/corpus/delta/seed-*: frame sequences for fuzz_delta.c (each frame a
 * u32 LE length and its bytes): a crowd keyed, moved, re-keyed and thinned; a line set that
 * grows; far objects held, standing and walking (HOLD | TRANSFORM); a joiner's snapshot;
 * sequences that miss a structural frame or repeat an append (refused); and the version 1
 * keyframe and delta pairs (the pair that applies and pairs that must be refused). `make fuzz`
 * grows the corpora from these; test_fuzz_corpus.c checks that every kind, primitive and part
 * is still there. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "protocol/proto.h"

static int g_ok = 1;

static void write_file(const char *dir, const char *name, const uint8_t *a, size_t alen,
                       const uint8_t *b, size_t blen)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/seed-%s", dir, name);
    FILE *f = fopen(path, "wb");
    int ok = f && fwrite(a, 1, alen, f) == alen && (!blen || fwrite(b, 1, blen, f) == blen);
    if (f)
        ok = fclose(f) == 0 && ok;
    if (!ok) {
        fprintf(stderr, "gen_fuzz_seeds: cannot write %s\n", path);
        g_ok = 0;
    }
}

static void frame(const char *dir, const char *name, const proto_buf *b, proto_status st)
{
    if (st != PROTO_OK) {
        fprintf(stderr, "gen_fuzz_seeds: %s: %s\n", name, proto_status_str(st));
        g_ok = 0;
        return;
    }
    write_file(dir, name, b->data, b->len, NULL, 0);
}

static void pair(const char *dir, const char *name, const proto_buf *key, const proto_buf *delta)
{
    uint8_t len[4] = {(uint8_t)key->len, (uint8_t)(key->len >> 8), (uint8_t)(key->len >> 16),
                      (uint8_t)(key->len >> 24)};
    uint8_t *both = malloc(4 + key->len);
    if (!both) {
        g_ok = 0;
        return;
    }
    memcpy(both, len, 4);
    memcpy(both + 4, key->data, key->len);
    write_file(dir, name, both, 4 + key->len, delta->data, delta->len);
    free(both);
}

/* A grid of nx x ny vertices in the box's z = 0 plane, two triangles a cell. */
static void grid(int nx, int ny, uint32_t *tri, uint16_t *q)
{
    int t = 0;
    for (int j = 0; j < ny; j++)
        for (int i = 0; i < nx; i++) {
            uint16_t *p = q + 3 * (j * nx + i);
            p[0] = (uint16_t)(i * 65535 / (nx - 1));
            p[1] = (uint16_t)(j * 65535 / (ny - 1));
            p[2] = (uint16_t)((i * 7 + j * 13) % 977);
            if (i + 1 < nx && j + 1 < ny) {
                uint32_t v = (uint32_t)(j * nx + i);
                uint32_t c[6] = {
                    v, v + 1, v + (uint32_t)nx, v + 1, v + (uint32_t)nx + 1, v + (uint32_t)nx};
                memcpy(tri + 6 * t++, c, sizeof c);
            }
        }
}

/* ------------------------------------------------------------------ object frames (v2) */

/* Frames one after another, each with its u32 LE length, as fuzz_delta.c reads them. */
static void sequence(const char *dir, const char *name, proto_buf *const *frames, int n)
{
    proto_buf all = {0};
    for (int i = 0; i < n; i++) {
        size_t at = all.len;
        uint8_t *p = realloc(all.data, at + 4 + frames[i]->len);
        if (!p) {
            g_ok = 0;
            break;
        }
        all.data = p;
        size_t l = frames[i]->len;
        p[at] = (uint8_t)l, p[at + 1] = (uint8_t)(l >> 8), p[at + 2] = (uint8_t)(l >> 16);
        p[at + 3] = (uint8_t)(l >> 24);
        memcpy(p + at + 4, frames[i]->data, l);
        all.len = at + 4 + l;
    }
    write_file(dir, name, all.data, all.len, NULL, 0);
    free(all.data);
}

typedef struct sobj {
    proto_object_in in;
    float pos[64 * 3], scalar[64];
    uint32_t elem[128 * 3];
} sobj;

static void small_grid(sobj *o, uint16_t id, int nx, int ny, unsigned qbits)
{
    memset(o, 0, sizeof *o);
    o->in.id = id;
    o->in.primitive = PROTO_PRIM_TRIANGLES;
    o->in.qbits = (uint8_t)qbits;
    o->in.nvert = (uint32_t)(nx * ny);
    for (int j = 0; j < ny; j++)
        for (int i = 0; i < nx; i++) {
            float *p = &o->pos[(j * nx + i) * 3];
            p[0] = 0.1f * (float)i - 0.3f, p[1] = 0.02f * (float)((i * j) % 3),
            p[2] = -0.1f * (float)j;
            if (i + 1 < nx && j + 1 < ny) {
                uint32_t a = (uint32_t)(j * nx + i), b = a + 1, c = a + (uint32_t)nx, d = c + 1;
                uint32_t t[6] = {a, c, b, b, c, d};
                memcpy(&o->elem[o->in.nelem * 3], t, sizeof t);
                o->in.nelem += 2;
            }
        }
    float lo[3] = {-0.5f, -0.5f, -1.0f}, hi[3] = {0.5f, 0.5f, 0.2f};
    memcpy(o->in.bmin, lo, sizeof lo);
    memcpy(o->in.bmax, hi, sizeof hi);
    o->in.pos = o->pos;
    o->in.elem = o->elem;
    o->in.xf = proto_transform_identity();
    o->in.xf.t[0] = (float)id;
}

static void stem(sobj *o, uint16_t id)
{
    memset(o, 0, sizeof *o);
    o->in.id = id;
    o->in.primitive = PROTO_PRIM_LINES;
    o->in.qbits = 11;
    o->in.nvert = 5;
    o->in.nelem = 4;
    for (uint32_t i = 0; i < 5; i++) {
        o->pos[i * 3 + 2] = 0.5f * (float)i;
        o->scalar[i] = 10.0f - (float)i;
        if (i < 4)
            o->elem[i * 2] = i, o->elem[i * 2 + 1] = i + 1;
    }
    float lo[3] = {-2, -2, 0}, hi[3] = {2, 2, 6};
    memcpy(o->in.bmin, lo, sizeof lo);
    memcpy(o->in.bmax, hi, sizeof hi);
    o->in.scalar = o->scalar;
    o->in.smin = 0.0f, o->in.smax = 10.0f;
    o->in.pos = o->pos;
    o->in.elem = o->elem;
    o->in.xf = proto_transform_identity();
}

static void grow_stem(sobj *o, uint32_t add)
{
    for (uint32_t k = 0; k < add; k++) {
        uint32_t v = o->in.nvert + k, from = k ? v - 1 : o->in.nvert / 2;
        o->pos[v * 3] = o->pos[from * 3] + 0.2f, o->pos[v * 3 + 1] = 0.1f * (float)k;
        o->pos[v * 3 + 2] = o->pos[from * 3 + 2] + 0.1f;
        o->scalar[v] = 1.0f + (float)k;
        o->elem[(o->in.nelem + k) * 2] = from;
        o->elem[(o->in.nelem + k) * 2 + 1] = v;
    }
    o->in.nvert += add;
    o->in.nelem += add;
    o->in.topo_version++;
}

static void objects(const char *fdir, const char *ddir)
{
    enum { NF = 11 };
    static sobj o[4];
    small_grid(&o[0], 1, 5, 6, 16);
    small_grid(&o[1], 2, 4, 4, 12);
    o[1].in.scalar = o[1].scalar, o[1].in.smin = -1.0f, o[1].in.smax = 1.0f;
    small_grid(&o[2], 3, 3, 3, 9);
    stem(&o[3], 9);
    int live[4] = {1, 1, 1, 0};
    proto_encoder *e;
    if (proto_encoder_create(&e, NULL) != PROTO_OK) {
        g_ok = 0;
        return;
    }
    proto_buf f[NF], snap = {0};
    memset(f, 0, sizeof f);
    proto_buf *pf[NF + 2];
    for (int i = 0; i < NF; i++)
        pf[i] = &f[i];
    proto_object_in in[4];
    static const char *const names[NF] = {"objects-key-triangles",  "objects-transform",
                                          "objects-delta",          "objects-rekey",
                                          "objects-key-lines",      "objects-append",
                                          "objects-append-delta",   "objects-remove",
                                          "objects-hold-transform", "objects-moved-after-rekey",
                                          "objects-remove-lines"};
    for (int step = 0; step < NF; step++) {
        switch (step) {
        case 1: /* the crowd moves rigidly */
            for (int i = 0; i < 3; i++)
                o[i].in.xf.t[1] += 0.3f, o[i].in.xf.r[2] = 0.6f, o[i].in.xf.r[3] = 0.8f;
            break;
        case 2: /* and flutters */
            o[0].pos[7] += 0.05f, o[1].pos[2] -= 0.04f, o[1].scalar[3] = 0.5f;
            break;
        case 3: /* object 1 switches LOD: a new topology, a new key */
            small_grid(&o[0], 1, 3, 4, 16);
            o[0].in.lod = 1, o[0].in.topo_version = 1, o[0].in.ninfo = 2;
            o[0].in.info[0] = 0.01f, o[0].in.info[1] = 0.2f;
            break;
        case 4: /* a line set appears */
            live[3] = 1;
            break;
        case 5: /* growth: the line set, and a triangle object (a row of two triangles) */
            grow_stem(&o[3], 3);
            {
                sobj *g = &o[1];
                uint32_t v = g->in.nvert;
                float np[6] = {-0.3f, 0.0f, -0.4f, -0.2f, 0.0f, -0.4f};
                memcpy(g->pos + v * 3, np, sizeof np);
                g->scalar[v] = 0.25f, g->scalar[v + 1] = -0.25f;
                uint32_t t[6] = {12, v, 13, 13, v, v + 1};
                memcpy(g->elem + g->in.nelem * 3, t, sizeof t);
                g->in.nvert += 2, g->in.nelem += 2, g->in.topo_version++;
            }
            break;
        case 6:
            grow_stem(&o[3], 2);
            o[3].scalar[0] = 4.0f, o[3].pos[1] = 0.05f;
            o[3].in.xf.t[2] = 1.0f;
            break;
        case 7: /* object 3 goes; object 2 is far: held while it walks on (HOLD | TRANSFORM);
                 * the line set held while its shape changes (HOLD) */
            live[2] = 0;
            o[1].in.hold = 1, o[1].in.xf.t[2] += 0.2f, o[1].pos[5] += 0.01f;
            o[3].in.hold = 1, o[3].pos[4] += 0.02f;
            break;
        case 8: /* still held: object 2 stands (HOLD), the line set moves (HOLD | TRANSFORM) */
            o[1].pos[5] += 0.01f;
            o[3].in.xf.t[0] += 0.1f, o[3].in.xf.r[2] = 0.28f, o[3].in.xf.r[3] = 0.96f;
            break;
        case 9: /* object 1 moves again, against its new key; 2 and the line set shown again */
            o[1].in.hold = 0, o[3].in.hold = 0;
            o[0].pos[4] += 0.03f, o[0].in.xf.t[0] += 0.5f;
            break;
        case 10: /* the line set goes */
            live[3] = 0;
            break;
        }
        int n = 0;
        for (int i = 0; i < 4; i++)
            if (live[i])
                in[n++] = o[i].in;
        proto_header h;
        memset(&h, 0, sizeof h);
        h.frame = 200u + (unsigned)step;
        h.sim_time_s = (double)h.frame / 60.0;
        char name[64];
        snprintf(name, sizeof name, "%s", names[step]);
        frame(fdir, name, &f[step], proto_encode_frame2(e, &f[step], &h, in, (uint32_t)n, NULL));
        if (step == 6) {
            frame(fdir, "objects-snapshot", &snap, proto_encode_snapshot(e, &snap, &h, NULL));
        }
    }
    /* An empty frame: an object at rest at its key (an object away from its key's transform
     * or shape is named in every frame). */
    proto_header h;
    memset(&h, 0, sizeof h);
    h.frame = 300;
    proto_buf empty = {0};
    proto_encoder *e2;
    small_grid(&o[2], 3, 3, 3, 9);
    o[2].in.xf = proto_transform_identity();
    if (proto_encoder_create(&e2, NULL) != PROTO_OK ||
        proto_encode_frame2(e2, &empty, &h, &o[2].in, 1, NULL) != PROTO_OK)
        g_ok = 0;
    h.frame = 301;
    frame(fdir, "objects-empty", &empty, proto_encode_frame2(e2, &empty, &h, &o[2].in, 1, NULL));
    proto_encoder_destroy(e2);

    /* Sequences. */
    sequence(ddir, "seq-all", pf, NF);
    proto_buf *join[5] = {&snap, &f[7], &f[8], &f[9], &f[10]};
    sequence(ddir, "seq-join-at-snapshot", join, 5);
    proto_buf *missed_rekey[3] = {&f[0], &f[1], &f[9]}; /* object 1's delta for a key not held */
    sequence(ddir, "seq-missed-rekey", missed_rekey, 3);
    proto_buf *twice[8] = {&f[0], &f[1], &f[2], &f[3], &f[4], &f[5], &f[5], &f[6]};
    sequence(ddir, "seq-append-twice", twice, 8);
    proto_buf *missed_append[6] = {&f[0], &f[1], &f[2], &f[3], &f[4], &f[6]};
    sequence(ddir, "seq-missed-append", missed_append, 6);
    proto_buf *delta_first[2] = {&f[2], &f[0]}; /* a delta before any key, then the key */
    sequence(ddir, "seq-delta-before-key", delta_first, 2);
    for (int i = 0; i < NF; i++)
        proto_buf_free(&f[i]);
    proto_buf_free(&snap);
    proto_buf_free(&empty);
    proto_encoder_destroy(e);
}

int main(int argc, char **argv)
{
    const char *fdir = argc > 2 ? argv[1] : "tests/fuzz/corpus/frame";
    const char *ddir = argc > 2 ? argv[2] : "tests/fuzz/corpus/delta";
    objects(fdir, ddir);
    /* Version 1 (deprecated): the vectors' tetrahedron and triangle, and a 12 x 10 grid. */
    static const uint32_t tet_tri[12] = {0, 2, 1, 0, 1, 3, 1, 2, 3, 0, 3, 2};
    static const uint32_t one_tri[3] = {0, 1, 2};
    static uint16_t tet_q[15] = {0, 0, 0, 65535, 0, 0, 0, 65535, 0, 0, 0, 65535, 9, 9, 9};
    static uint16_t tri_q[9] = {32768, 32768, 32768, 40000, 32768, 32768, 32768, 40000, 32768};
    static uint32_t grid_tri[11 * 9 * 6];
    static uint16_t grid_q[12 * 10 * 3], moved_q[12 * 10 * 3];
    grid(12, 10, grid_tri, grid_q);
    proto_mesh key;
    memset(&key, 0, sizeof key);
    const float bmin[3] = {-50.0f, -50.0f, 0.0f}, bmax[3] = {50.0f, 50.0f, 100.0f};
    memcpy(key.bmin, bmin, sizeof bmin);
    memcpy(key.bmax, bmax, sizeof bmax);
    key.nsurf = 3;
    key.surf[0] = (proto_surface){0, 4, 4, tet_tri, tet_q};
    key.surf[1] = (proto_surface){1, 3, 1, one_tri, tri_q};
    key.surf[2] = (proto_surface){2, 120, 11 * 9 * 2, grid_tri, grid_q};
    proto_header h;
    memset(&h, 0, sizeof h);
    h.frame = 100;
    h.last_seq = 7;
    h.sim_time_s = 100.0 / 60.0;
    proto_buf kb = {0}, db = {0}, b = {0};

    /* Frames of every kind. */
    frame(fdir, "key-3-surfaces", &kb, proto_encode_mesh_key(&kb, &h, &key, 1));
    memcpy(moved_q, grid_q, sizeof grid_q);
    for (int i = 0; i < 120 * 3; i += 7)
        moved_q[i] = (uint16_t)(moved_q[i] + 40 * i); /* wraps for some */
    proto_mesh cur = key;
    cur.key_frame = 100;
    cur.surf[2].q = moved_q;
    h.frame = 101;
    frame(fdir, "delta-3-surfaces", &db, proto_encode_mesh_delta(&db, &h, &key, &cur, 1));
    proto_mesh one = key;
    one.nsurf = 1;
    one.surf[0] = (proto_surface){3, 0, 0, NULL, NULL}; /* an empty surface */
    frame(fdir, "key-empty-surface", &b, proto_encode_mesh_key(&b, &h, &one, 1));
    static const uint8_t px[12] = {0, 16, 32, 48, 64, 80, 96, 112, 128, 160, 192, 255};
    proto_slice sl = {2, 5, 4, 3, -600.0f, 1500.0f, px};
    frame(fdir, "slice-4x3", &b, proto_encode_slice(&b, &h, &sl, 1));
    sl = (proto_slice){0, 0, 1, 1, 40.0f, 400.0f, px};
    frame(fdir, "slice-1x1", &b, proto_encode_slice(&b, &h, &sl, 1));
    static const proto_lod_entry lods[3] = {
        {0, 0, 680, 0.0f, 0.0f}, {1, 680, 180, 0.003f, 0.04f}, {2, 860, 54, 0.0125f, 0.5f}};
    frame(fdir, "lod-table-3", &b, proto_encode_lod_table(&b, &h, lods, 3, 1));
    frame(fdir, "lod-table-empty", &b, proto_encode_lod_table(&b, &h, lods, 0, 1));

    /* Keyframe and delta pairs. */
    pair(ddir, "applies", &kb, &db);
    pair(ddir, "swapped", &db, &kb);
    pair(ddir, "key-and-key", &kb, &kb);
    cur.key_frame = 99; /* the delta of another keyframe */
    frame(fdir, "delta-other-key", &b, proto_encode_mesh_delta(&b, &h, &key, &cur, 1));
    pair(ddir, "other-keyframe", &kb, &b);
    /* Vertex counts that differ from the keyframe's: the tetrahedron's surface with one
     * vertex more, and the grid with fewer. */
    proto_mesh k2 = key, c2 = key;
    k2.surf[0].nvert = c2.surf[0].nvert = 5;
    c2.key_frame = 100;
    frame(fdir, "delta-5-vertices", &b, proto_encode_mesh_delta(&b, &h, &k2, &c2, 1));
    pair(ddir, "more-vertices", &kb, &b);
    k2 = key;
    c2 = cur;
    c2.key_frame = 100;
    k2.surf[2].nvert = c2.surf[2].nvert = 100;
    frame(fdir, "delta-fewer-vertices", &b, proto_encode_mesh_delta(&b, &h, &k2, &c2, 1));
    pair(ddir, "fewer-vertices", &kb, &b);
    /* A one-surface keyframe, and a delta with three. */
    k2 = key;
    k2.nsurf = 1;
    proto_buf k1 = {0};
    h.frame = 100;
    frame(fdir, "key-1-surface", &k1, proto_encode_mesh_key(&k1, &h, &k2, 1));
    pair(ddir, "more-surfaces", &k1, &db);
    proto_buf_free(&kb);
    proto_buf_free(&db);
    proto_buf_free(&b);
    proto_buf_free(&k1);
    if (!g_ok)
        return 1;
    printf("gen_fuzz_seeds: wrote seeds to %s and %s\n", fdir, ddir);
    return 0;
}
