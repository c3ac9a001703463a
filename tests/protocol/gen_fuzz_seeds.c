/* gen_fuzz_seeds.c: writes the encoder-made seeds of the fuzz corpora (`make fuzz-seeds`):
 * tests/fuzz/corpus/frame/seed-*: a frame of every kind (mesh keyframe, mesh delta, slice,
 * LOD table) in a few shapes; tests/fuzz/corpus/delta/seed-*: keyframe and delta pairs
 * for fuzz_delta.c (u32 LE length of the keyframe, the keyframe, then the delta), both the
 * pair that applies and pairs that must be refused (another keyframe's delta, a vertex
 * count that differs, more surfaces in the delta, the two swapped). `make fuzz` grows the
 * corpora from these; test_fuzz_corpus.c checks that every kind is still there. */
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

int main(int argc, char **argv)
{
    const char *fdir = argc > 2 ? argv[1] : "tests/fuzz/corpus/frame";
    const char *ddir = argc > 2 ? argv[2] : "tests/fuzz/corpus/delta";
    /* The vectors' tetrahedron and triangle, and a 12 x 10 grid. */
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
