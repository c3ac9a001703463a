/* test_vectors.c: the committed test vectors (protocol/vectors/) decode to the values
 * vectors.json states: the object frame sequence (each step applied to the decoder it names,
 * refusals included), the slice, and a version 1 header (refused). The browser's decoder
 * checks the same files (tests/server/vectors.test.mjs). */
#include <cjson/cJSON.h>
#include <math.h>
#include <stddef.h>
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
    return num(want, "version") == h->version && num(want, "kind") == h->kind &&
           num(want, "flags") == h->flags && num(want, "frame") == (double)h->frame &&
           num(want, "last_seq") == h->last_seq &&
           fabs(num(want, "sim_time_s") - h->sim_time_s) < 1e-12;
}

static const cJSON *item(const cJSON *o, const char *k)
{
    return cJSON_GetObjectItemCaseSensitive(o, k);
}

/* float32 values stated with 9 digits: exact. */
static int same_floats(const cJSON *a, const float *v, int n)
{
    if (cJSON_GetArraySize(a) != n)
        return 0;
    for (int i = 0; i < n; i++)
        if ((float)cJSON_GetArrayItem(a, i)->valuedouble != v[i])
            return 0;
    return 1;
}

static int same_xf(const cJSON *a, const proto_transform *xf)
{
    return same_floats(item(a, "t"), xf->t, 3) && same_floats(item(a, "r"), xf->r, 4);
}

static int same_elems(const cJSON *a, const proto_object *o)
{
    size_t es = o->primitive == PROTO_PRIM_TRIANGLES ? 3 : 2;
    if (cJSON_GetArraySize(a) != (int)(o->nelem * es))
        return 0;
    for (uint32_t e = 0; e < o->nelem; e++) {
        uint32_t b[3];
        for (size_t k = 0; k < es; k++)
            b[k] = (uint32_t)cJSON_GetArrayItem(a, (int)(e * es + k))->valuedouble;
        const uint32_t *g = &o->elem[e * es];
        int ok = 0;
        if (es == 2)
            ok = g[0] == b[0] && g[1] == b[1];
        else
            for (int r = 0; r < 3; r++)
                ok |= g[0] == b[r] && g[1] == b[(r + 1) % 3] && g[2] == b[(r + 2) % 3];
        if (!ok)
            return 0;
    }
    return 1;
}

static const char *check_object(const cJSON *w, const proto_object *o)
{
    if (!o)
        return "missing";
    if (num(w, "id") != o->id || num(w, "key") != o->key || num(w, "parts") != o->parts ||
        num(w, "primitive") != o->primitive || num(w, "qbits") != o->qbits ||
        num(w, "lod") != o->lod || num(w, "has_scalar") != o->has_scalar ||
        num(w, "nvert") != o->nvert || num(w, "nelem") != o->nelem)
        return "id, key, parts, primitive, qbits, lod, has_scalar or counts";
    if (!same_floats(item(w, "info"), o->info, o->ninfo) ||
        !same_floats(item(w, "bmin"), o->bmin, 3) || !same_floats(item(w, "bmax"), o->bmax, 3) ||
        (float)num(w, "smin") != o->smin || (float)num(w, "smax") != o->smax ||
        (float)num(w, "tstep") != o->tstep)
        return "info, box, scalar range or step";
    if (!same_xf(item(w, "key_transform"), &o->key_xf))
        return "key transform";
    if (!same_xf(item(w, "transform"), &o->xf))
        return "transform";
    if (!same_elems(item(w, "elements"), o))
        return "elements";
    if (!same_u16(item(w, "base_q"), o->base_q, (size_t)o->nvert * 4))
        return "base_q";
    if (!same_u16(item(w, "q"), o->q, (size_t)o->nvert * 4))
        return "q";
    return NULL;
}

static proto_status status_named(const char *s)
{
    static const struct {
        const char *name;
        proto_status st;
    } t[] = {{"short", PROTO_ERR_SHORT}, {"magic", PROTO_ERR_MAGIC}, {"version", PROTO_ERR_VERSION},
             {"kind", PROTO_ERR_KIND},   {"limit", PROTO_ERR_LIMIT}, {"corrupt", PROTO_ERR_CORRUPT},
             {"state", PROTO_ERR_STATE}};
    for (size_t i = 0; s && i < sizeof t / sizeof t[0]; i++)
        if (!strcmp(s, t[i].name))
            return t[i].st;
    return PROTO_OK;
}

/* Everything a decoder shows, hashed (a refusal must not change it). */
static uint64_t state_sum(const proto_decoder *d)
{
    uint64_t s = 1469598103934665603ull;
    for (uint32_t i = 0; i < proto_decoder_count(d); i++) {
        const proto_object *o = proto_decoder_object(d, i);
        size_t es = o->primitive == PROTO_PRIM_TRIANGLES ? 3 : 2;
        const uint8_t *parts[4] = {(const uint8_t *)o, (const uint8_t *)o->q,
                                   (const uint8_t *)o->base_q, (const uint8_t *)o->elem};
        size_t lens[4] = {offsetof(proto_object, elem), (size_t)o->nvert * 8, (size_t)o->nvert * 8,
                          (size_t)o->nelem * es * 4};
        for (int k = 0; k < 4; k++)
            for (size_t j = 0; j < lens[k]; j++)
                s = (s ^ parts[k][j]) * 1099511628211ull;
    }
    return s;
}

TEST(proto_vectors_object_frames_decode_to_stated_values)
{
    cJSON *j = load_json();
    REQUIRE(j != NULL);
    const cJSON *steps = item(j, "objects");
    REQUIRE(cJSON_GetArraySize(steps) >= 10);
    enum { NDEC = 5 };
    const char *names[NDEC] = {0};
    proto_decoder *dec[NDEC] = {0};
    int accepted = 0, refused = 0;
    for (int i = 0; i < cJSON_GetArraySize(steps); i++) {
        const cJSON *w = cJSON_GetArrayItem(steps, i);
        const char *file = cJSON_GetStringValue(item(w, "file"));
        const char *dname = cJSON_GetStringValue(item(w, "decoder"));
        REQUIRE(file && dname);
        int k = 0;
        while (k < NDEC && names[k] && strcmp(names[k], dname))
            k++;
        REQUIRE(k < NDEC);
        if (!names[k]) {
            names[k] = dname;
            REQUIRE(proto_decoder_create(&dec[k]) == PROTO_OK);
        }
        size_t n;
        uint8_t *bin = slurp(file, &n);
        REQUIRE(bin != NULL);
        proto_header h;
        char err[200] = "";
        uint64_t before = state_sum(dec[k]);
        proto_status st = proto_decoder_apply(dec[k], bin, n, &h, err, sizeof err);
        free(bin);
        const char *want_refused = cJSON_GetStringValue(item(w, "refused"));
        if (want_refused) {
            refused++;
            CHECKF(st == status_named(want_refused) && st != PROTO_OK,
                   "step %d (%s on %s): %s (%s)", i, file, dname, proto_status_str(st), err);
            CHECKF(state_sum(dec[k]) == before, "step %d: the refusal changed the decoder", i);
            continue;
        }
        accepted++;
        CHECKF(st == PROTO_OK, "step %d (%s on %s): %s (%s)", i, file, dname, proto_status_str(st),
               err);
        CHECKF(check_header(w, &h), "step %d: header", i);
        const cJSON *rm = item(w, "removed");
        const uint16_t *ids;
        uint32_t nrm = proto_decoder_removed(dec[k], &ids);
        int same = cJSON_GetArraySize(rm) == (int)nrm;
        for (uint32_t r = 0; same && r < nrm; r++)
            same = cJSON_GetArrayItem(rm, (int)r)->valuedouble == ids[r];
        CHECKF(same, "step %d: removed ids", i);
        const cJSON *objs = item(w, "objects");
        CHECKF(cJSON_GetArraySize(objs) == (int)proto_decoder_count(dec[k]),
               "step %d: %u objects held, %d stated", i, proto_decoder_count(dec[k]),
               cJSON_GetArraySize(objs));
        for (int o = 0; o < cJSON_GetArraySize(objs); o++) {
            const cJSON *wo = cJSON_GetArrayItem(objs, o);
            const char *why = check_object(wo, proto_decoder_find(dec[k], (uint16_t)num(wo, "id")));
            CHECKF(!why, "step %d (%s), object %g: %s", i, file, num(wo, "id"), why);
        }
    }
    th_note("%d steps applied as stated, %d refused as stated", accepted, refused);
    CHECK(accepted >= 8 && refused >= 3);
    for (int k = 0; k < NDEC; k++)
        proto_decoder_destroy(dec[k]);
    cJSON_Delete(j);
}

TEST(proto_vectors_slice_decodes_to_stated_values_and_version_1_is_refused)
{
    cJSON *j = load_json();
    REQUIRE(j != NULL);
    size_t n;
    uint8_t *bin = slurp("slice.bin", &n);
    REQUIRE(bin != NULL);
    proto_header h;
    proto_slice sl;
    REQUIRE(proto_decode_slice(&h, &sl, bin, n) == PROTO_OK);
    free(bin);
    const cJSON *ws = item(j, "slice.bin");
    CHECK(check_header(ws, &h));
    CHECK(num(ws, "plane") == sl.plane && num(ws, "index") == sl.index &&
          num(ws, "width") == sl.width && num(ws, "height") == sl.height &&
          num(ws, "level") == (double)sl.level_hu && num(ws, "window") == (double)sl.width_hu);
    const cJSON *px = item(ws, "pixels");
    int same = cJSON_GetArraySize(px) == (int)(sl.width * sl.height);
    for (uint32_t i = 0; same && i < sl.width * sl.height; i++)
        same = cJSON_GetArrayItem(px, (int)i)->valuedouble == sl.pixels[i];
    CHECK(same);
    free((void *)sl.pixels);
    /* A version 1 header: refused by the header reader and by each decoder. */
    const char *want = cJSON_GetStringValue(item(item(j, "refused-version-1.bin"), "refused"));
    REQUIRE(want && status_named(want) == PROTO_ERR_VERSION);
    bin = slurp("refused-version-1.bin", &n);
    REQUIRE(bin != NULL);
    CHECK(proto_header_read(&h, bin, n) == PROTO_ERR_VERSION);
    CHECK(proto_decode_slice(&h, &sl, bin, n) == PROTO_ERR_VERSION && !sl.pixels);
    proto_decoder *d;
    REQUIRE(proto_decoder_create(&d) == PROTO_OK);
    CHECK(proto_decoder_apply(d, bin, n, NULL, NULL, 0) == PROTO_ERR_VERSION);
    proto_decoder_destroy(d);
    free(bin);
    cJSON_Delete(j);
}
