/* gen_vectors.c: writes protocol/vectors/: small frames and the values they decode to.
 * Run by `make protocol-vectors`; the outputs are committed, and both the C tests and the
 * browser's decoder check them, so a decoder change that breaks old bytes shows up. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "protocol/proto.h"

static int write_file(const char *dir, const char *name, const void *data, size_t len)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(data, 1, len, f) != len) {
        fprintf(stderr, "gen_vectors: cannot write %s\n", path);
        if (f)
            fclose(f);
        return 0;
    }
    return fclose(f) == 0;
}

int main(int argc, char **argv)
{
    const char *dir = argc > 1 ? argv[1] : "protocol/vectors";
    /* A tetrahedron (skin) and a triangle (bone) in a 100 mm box. */
    static const uint32_t tet_tri[12] = {0, 2, 1, 0, 1, 3, 1, 2, 3, 0, 3, 2};
    static const uint32_t one_tri[3] = {0, 1, 2};
    static uint16_t tet_q[12] = {0, 0, 0, 65535, 0, 0, 0, 65535, 0, 0, 0, 65535};
    static uint16_t tri_q[9] = {32768, 32768, 32768, 40000, 32768, 32768, 32768, 40000, 32768};
    proto_mesh key;
    memset(&key, 0, sizeof key);
    float bmin[3] = {-50.0f, -50.0f, 0.0f}, bmax[3] = {50.0f, 50.0f, 100.0f};
    memcpy(key.bmin, bmin, sizeof bmin);
    memcpy(key.bmax, bmax, sizeof bmax);
    key.nsurf = 2;
    key.surf[0] = (proto_surface){0, 4, 4, tet_tri, tet_q};
    key.surf[1] = (proto_surface){1, 3, 1, one_tri, tri_q};
    proto_header h;
    memset(&h, 0, sizeof h);
    h.frame = 100;
    h.last_seq = 7;
    h.sim_time_s = 100.0 / 60.0;
    proto_buf b = {0};
    int ok = proto_encode_mesh_key(&b, &h, &key, 1) == PROTO_OK &&
             write_file(dir, "mesh_key.bin", b.data, b.len);
    /* The delta: vertex 3 of the tetrahedron moves down by 1000 steps (wraps), the bone
     * triangle's vertex 1 moves by +5. */
    static uint16_t tet_q2[12] = {0, 0, 0, 65535, 0, 0, 0, 65535, 0, 0, 0, 64535};
    static uint16_t tri_q2[9] = {32768, 32768, 32768, 40005, 32768, 32768, 32768, 40000, 32768};
    proto_mesh cur = key;
    cur.key_frame = 100;
    cur.surf[0].q = tet_q2;
    cur.surf[1].q = tri_q2;
    h.frame = 101;
    h.last_seq = 8;
    h.sim_time_s = 101.0 / 60.0;
    ok = ok && proto_encode_mesh_delta(&b, &h, &key, &cur, 1) == PROTO_OK &&
         write_file(dir, "mesh_delta.bin", b.data, b.len);
    /* A 4 x 3 coronal slice. */
    static const uint8_t px[12] = {0, 16, 32, 48, 64, 80, 96, 112, 128, 160, 192, 255};
    proto_slice s = {1, 37, 4, 3, 40.0f, 400.0f, px};
    h.frame = 102;
    h.last_seq = 9;
    h.sim_time_s = 102.0 / 60.0;
    ok = ok && proto_encode_slice(&b, &h, &s, 1) == PROTO_OK &&
         write_file(dir, "slice.bin", b.data, b.len);
    /* A cloth LOD table: two characters, the second at LOD 2. */
    static const proto_lod_entry lods[2] = {{0, 0, 680, 0.0f, 0.0f}, {2, 680, 54, 0.0125f, 0.5f}};
    h.frame = 120;
    h.last_seq = 10;
    h.sim_time_s = 2.0;
    ok = ok && proto_encode_lod_table(&b, &h, lods, 2, 1) == PROTO_OK &&
         write_file(dir, "lod_table.bin", b.data, b.len);
    proto_buf_free(&b);
    if (!ok)
        return 1;
    printf("gen_vectors: wrote mesh_key.bin, mesh_delta.bin, slice.bin, lod_table.bin to %s\n",
           dir);
    return 0;
}
