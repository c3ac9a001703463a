/* test_vectors.c: the committed test vectors (protocol/vectors/) decode to the values
 * vectors.json states. The browser's decoder checks the same files. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "protocol/proto.h"
#include "tests/harness.h"

static uint8_t *slurp(const char *name, size_t *len)
{
    char path[512];
    snprintf(path, sizeof path, "protocol/vectors/%s", name);
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    uint8_t *d = malloc(1 << 20);
    *len = d ? fread(d, 1, 1 << 20, f) : 0;
    fclose(f);
    return d;
}

static cJSON *load_json(void)
{
    size_t n;
    uint8_t *d = slurp("vectors.json", &n);
    cJSON *j = d ? cJSON_ParseWithLength((const char *)d, n) : NULL;
    free(d);
    return j;
}

static double num(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsNumber(v) ? v->valuedouble : (double)NAN;
}

/* Compare an array of numbers with u16 or u32 values. */
static int same_u16(const cJSON *a, const uint16_t *v, size_t n)
{
    if (cJSON_GetArraySize(a) != (int)n)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (cJSON_GetArrayItem(a, (int)i)->valuedouble != (double)v[i])
            return 0;
    return 1;
}

static int check_header(const cJSON *want, const proto_header *h)
{
    return num(want, "kind") == h->kind && num(want, "frame") == (double)h->frame &&
           num(want, "last_seq") == h->last_seq &&
           fabs(num(want, "sim_time_s") - h->sim_time_s) < 1e-12;
}

TEST(proto_vectors_decode_to_stated_values)
{
    cJSON *j = load_json();
    REQUIRE(j != NULL);
    size_t n;
    uint8_t *bin = slurp("mesh_key.bin", &n);
    REQUIRE(bin != NULL);
    proto_decoded_mesh key, delta;
    REQUIRE(proto_decode_mesh(&key, bin, n) == PROTO_OK);
    free(bin);
    const cJSON *wk = cJSON_GetObjectItemCaseSensitive(j, "mesh_key.bin");
    CHECK(check_header(wk, &key.h));
    const cJSON *bmin = cJSON_GetObjectItemCaseSensitive(wk, "bmin");
    const cJSON *bmax = cJSON_GetObjectItemCaseSensitive(wk, "bmax");
    for (int b = 0; b < 3; b++) {
        CHECK(cJSON_GetArrayItem(bmin, b)->valuedouble == (double)key.bmin[b]);
        CHECK(cJSON_GetArrayItem(bmax, b)->valuedouble == (double)key.bmax[b]);
    }
    const cJSON *surfs = cJSON_GetObjectItemCaseSensitive(wk, "surfaces");
    REQUIRE(cJSON_GetArraySize(surfs) == key.nsurf);
    for (int s = 0; s < key.nsurf; s++) {
        const cJSON *ws = cJSON_GetArrayItem(surfs, s);
        CHECK(num(ws, "id") == key.surf[s].id && num(ws, "nvert") == key.surf[s].nvert &&
              num(ws, "ntri") == key.surf[s].ntri);
        CHECK(same_u16(cJSON_GetObjectItemCaseSensitive(ws, "q"), key.surf[s].q,
                       key.surf[s].nvert * 3));
        const cJSON *tri = cJSON_GetObjectItemCaseSensitive(ws, "tri");
        for (uint32_t t = 0; t < key.surf[s].ntri; t++) {
            const uint32_t *a = &key.surf[s].tri[t * 3];
            uint32_t b[3];
            for (int k = 0; k < 3; k++)
                b[k] = (uint32_t)cJSON_GetArrayItem(tri, (int)(t * 3) + k)->valuedouble;
            int rot = 0;
            for (int r = 0; r < 3; r++)
                rot |= a[0] == b[r] && a[1] == b[(r + 1) % 3] && a[2] == b[(r + 2) % 3];
            CHECKF(rot, "surface %d triangle %u", s, t);
        }
    }
    bin = slurp("mesh_delta.bin", &n);
    REQUIRE(bin != NULL);
    REQUIRE(proto_decode_mesh(&delta, bin, n) == PROTO_OK);
    free(bin);
    const cJSON *wd = cJSON_GetObjectItemCaseSensitive(j, "mesh_delta.bin");
    CHECK(check_header(wd, &delta.h));
    CHECK(num(wd, "key_frame") == (double)delta.key_frame);
    surfs = cJSON_GetObjectItemCaseSensitive(wd, "surfaces");
    for (int s = 0; s < delta.nsurf; s++) {
        const cJSON *ws = cJSON_GetArrayItem(surfs, s);
        CHECK(same_u16(cJSON_GetObjectItemCaseSensitive(ws, "delta"), delta.surf[s].q,
                       delta.surf[s].nvert * 3));
        uint16_t after[64];
        REQUIRE(delta.surf[s].nvert * 3 <= 64);
        REQUIRE(proto_apply_delta(&key, &delta, s, after) == PROTO_OK);
        CHECK(same_u16(cJSON_GetObjectItemCaseSensitive(ws, "q_after"), after,
                       delta.surf[s].nvert * 3));
    }
    proto_decoded_mesh_free(&key);
    proto_decoded_mesh_free(&delta);
    bin = slurp("slice.bin", &n);
    REQUIRE(bin != NULL);
    proto_header h;
    proto_slice sl;
    REQUIRE(proto_decode_slice(&h, &sl, bin, n) == PROTO_OK);
    free(bin);
    const cJSON *ws = cJSON_GetObjectItemCaseSensitive(j, "slice.bin");
    CHECK(check_header(ws, &h));
    CHECK(num(ws, "plane") == sl.plane && num(ws, "index") == sl.index &&
          num(ws, "width") == sl.width && num(ws, "height") == sl.height &&
          num(ws, "level") == (double)sl.level_hu && num(ws, "window") == (double)sl.width_hu);
    const cJSON *px = cJSON_GetObjectItemCaseSensitive(ws, "pixels");
    int same = cJSON_GetArraySize(px) == (int)(sl.width * sl.height);
    for (uint32_t i = 0; same && i < sl.width * sl.height; i++)
        same = cJSON_GetArrayItem(px, (int)i)->valuedouble == sl.pixels[i];
    CHECK(same);
    free((void *)sl.pixels);
    bin = slurp("lod_table.bin", &n);
    REQUIRE(bin != NULL);
    proto_lod_entry *lods;
    uint32_t nl;
    REQUIRE(proto_decode_lod_table(&h, &lods, &nl, bin, n) == PROTO_OK);
    free(bin);
    ws = cJSON_GetObjectItemCaseSensitive(j, "lod_table.bin");
    CHECK(check_header(ws, &h));
    const cJSON *wl = cJSON_GetObjectItemCaseSensitive(ws, "lods");
    REQUIRE(cJSON_GetArraySize(wl) == (int)nl);
    for (uint32_t i = 0; i < nl; i++) {
        const cJSON *e = cJSON_GetArrayItem(wl, (int)i);
        CHECK(num(e, "lod") == lods[i].lod && num(e, "first_vertex") == lods[i].first_vertex &&
              num(e, "nvert") == lods[i].nvert && (float)num(e, "e_pos") == lods[i].e_pos &&
              (float)num(e, "e_vel") == lods[i].e_vel);
    }
    free(lods);
    cJSON_Delete(j);
}
