/* gen_fuzz_seeds.c: writes the encoder-made seeds of the fuzz corpora (`make fuzz-seeds`):
 * tests/fuzz/corpus/frame/seed-*: a frame of every kind: object frames (keys of triangle
 * objects and of a line set, a snapshot with transforms and deltas, an empty frame, and every
 * frame of the sequences below) and slices; tests/fuzz/corpus/delta/seed-*: frame sequences
 * for fuzz_delta.c (each frame a u32 LE length and its bytes): a crowd keyed, moved, re-keyed
 * and thinned; a line set that grows; far objects held, standing and walking (HOLD |
 * TRANSFORM); a joiner's snapshot; sequences that miss a structural frame or repeat an append
 * (refused). `make fuzz` grows the corpora from these; test_fuzz_corpus.c checks that every
 * kind, primitive and part is still there. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "protocol/proto.h"

static int g_ok = 1;

static void write_file(const char *dir, const char *name, const uint8_t *a, size_t alen)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/seed-%s", dir, name);
    FILE *f = fopen(path, "wb");
    int ok = f && fwrite(a, 1, alen, f) == alen;
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
    write_file(dir, name, b->data, b->len);
}

/* ------------------------------------------------------------------ object frames */

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
    write_file(dir, name, all.data, all.len);
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

/* ------------------------------------------------------------------ slices */

static void slices(const char *fdir)
{
    proto_header h;
    memset(&h, 0, sizeof h);
    h.frame = 101;
    h.last_seq = 7;
    h.sim_time_s = 100.0 / 60.0;
    proto_buf b = {0};
    static const uint8_t px[12] = {0, 16, 32, 48, 64, 80, 96, 112, 128, 160, 192, 255};
    proto_slice sl = {2, 5, 4, 3, -600.0f, 1500.0f, px};
    frame(fdir, "slice-4x3", &b, proto_encode_slice(&b, &h, &sl, 1));
    sl = (proto_slice){0, 0, 1, 1, 40.0f, 400.0f, px};
    frame(fdir, "slice-1x1", &b, proto_encode_slice(&b, &h, &sl, 1));
    proto_buf_free(&b);
}

int main(int argc, char **argv)
{
    const char *fdir = argc > 2 ? argv[1] : "tests/fuzz/corpus/frame";
    const char *ddir = argc > 2 ? argv[2] : "tests/fuzz/corpus/delta";
    objects(fdir, ddir);
    slices(fdir);
    if (!g_ok)
        return 1;
    printf("gen_fuzz_seeds: wrote seeds to %s and %s\n", fdir, ddir);
    return 0;
}
