/* test_volume_load.c: a user's volume made ready (sim_volume_prepare, which
 * sim_volume_load_file runs after reading): the body kept apart from the couch and the
 * noise, an air margin where tissue meets the lattice's edge, a fit that counts the
 * margin, and warnings for values that are not Hounsfield units. Each volume is built
 * here with its anatomy known element by element: the checks compare against that. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sim/volume/volume.h"
#include "tests/harness.h"

static float *at(sim_volume *v, int x, int y, int z)
{
    return &v->hu[(size_t)x + (size_t)v->nx * ((size_t)y + (size_t)v->ny * z)];
}

/* A cropped abdomen as a scanner gives it: a body (an elliptic cylinder of muscle, 40 HU,
 * running the whole z range: the scan cut it top and bottom) lying on a couch (a slab of
 * 200 HU below it, across the whole width, 2 elements of air apart), with a few isolated
 * specks of noise (100 HU) in the air. */
static void cropped_abdomen(sim_volume *v, int nx, int ny, int nz)
{
    memset(v, 0, sizeof *v);
    v->nx = nx;
    v->ny = ny;
    v->nz = nz;
    v->spacing_mm[0] = v->spacing_mm[1] = v->spacing_mm[2] = 2.0f;
    v->hu = malloc((size_t)nx * ny * nz * sizeof *v->hu);
    for (int z = 0; z < nz; z++)
        for (int y = 0; y < ny; y++)
            for (int x = 0; x < nx; x++) {
                float u = (x - 0.5f * nx) / (0.35f * nx), w = (y - 0.55f * ny) / (0.3f * ny);
                float hu = -1000.0f;
                if (u * u + w * w < 1.0f)
                    hu = 40.0f;
                else if (y >= 2 && y < 0.55f * ny - 0.3f * ny - 2) /* the couch, below */
                    hu = 200.0f;
                *at(v, x, y, z) = hu;
            }
    *at(v, 1, ny - 2, 1) = 100.0f; /* specks of noise in the air */
    *at(v, nx - 2, ny - 2, nz / 2) = 100.0f;
}

static int64_t count_at_least(const sim_volume *v, float hu)
{
    int64_t n = 0;
    for (size_t i = 0; i < (size_t)v->nx * v->ny * v->nz; i++)
        n += v->hu[i] >= hu;
    return n;
}

TEST(volume_load_keeps_the_body_and_gives_a_cropped_scan_an_air_margin)
{
    sim_volume v;
    cropped_abdomen(&v, 40, 40, 20);
    /* Ground truth from the construction: the body's elements, the couch's. */
    int64_t body = 0, couch = 0;
    for (int y = 0; y < 40; y++)
        for (int x = 0; x < 40; x++) {
            float hu = *at(&v, x, y, 0);
            body += hu == 40.0f;
            couch += hu == 200.0f;
        }
    body *= 20;
    couch *= 20;
    REQUIRE(body > 1000 && couch > 100);
    sim_volume_load_opts o = sim_default_volume_load_opts();
    sim_volume_info info;
    memset(&info, 0, sizeof info);
    char err[256];
    REQUIRE(sim_volume_prepare(&v, &o, &info, err, sizeof err) == SIM_OK);
    /* The couch and the two specks are air now; the body is all there. */
    CHECKF(info.removed_elements == couch + 2, "removed %lld, couch %lld + 2 specks",
           (long long)info.removed_elements, (long long)couch);
    CHECK(count_at_least(&v, 150.0f) == 0);
    CHECK(count_at_least(&v, -400.0f) == body);
    /* The body met the lattice's edge only at both ends of z: 8 elements of air there. */
    CHECK(info.margin[0] == 0 && info.margin[1] == 0 && info.margin[2] == 0 && info.margin[3] == 0);
    CHECK(info.margin[4] == 8 && info.margin[5] == 8);
    CHECK(v.nx == 40 && v.ny == 40 && v.nz == 36);
    /* Shifted by the margin: the body's old first slice is slice 8, air below it. */
    CHECK(*at(&v, 20, 22, 8) == 40.0f && *at(&v, 20, 22, 7) == -1000.0f);
    CHECK(*at(&v, 20, 22, 27) == 40.0f && *at(&v, 20, 22, 28) == -1000.0f);
    CHECK(info.warning[0] == 0);
    sim_volume_free(&v);
}

TEST(volume_load_keep_all_keeps_the_couch)
{
    sim_volume v;
    cropped_abdomen(&v, 40, 40, 20);
    int64_t before = count_at_least(&v, -400.0f);
    sim_volume_load_opts o = sim_default_volume_load_opts();
    o.keep_all = 1;
    o.air_margin = 0;
    sim_volume_info info;
    memset(&info, 0, sizeof info);
    char err[256];
    REQUIRE(sim_volume_prepare(&v, &o, &info, err, sizeof err) == SIM_OK);
    CHECK(count_at_least(&v, -400.0f) == before);
    CHECK(info.removed_elements == 0 && v.nz == 20);
    sim_volume_free(&v);
}

TEST(volume_load_fit_counts_the_margin)
{
    /* 40 x 40 x 20 = 32,000 elements; with the margin 40 x 40 x 36 = 57,600. A budget of
     * 40,000 holds the scan but not its margin: the fit must take 2 (20 x 20 x 10, then 26
     * with the margin: 10,400), where one that forgot the margin would leave 57,600. */
    sim_volume v;
    cropped_abdomen(&v, 40, 40, 20);
    sim_volume_load_opts o = sim_default_volume_load_opts();
    o.fit_elements = 40000;
    sim_volume_info info;
    memset(&info, 0, sizeof info);
    char err[256];
    REQUIRE(sim_volume_prepare(&v, &o, &info, err, sizeof err) == SIM_OK);
    CHECKF(info.fit_factor == 2, "fit factor %d", info.fit_factor);
    CHECKF((size_t)v.nx * v.ny * v.nz <= 40000, "%dx%dx%d", v.nx, v.ny, v.nz);
    CHECK(info.stored_dims[0] == 40 && info.stored_dims[2] == 20);
    CHECK(fabsf(v.spacing_mm[0] - 4.0f) < 1e-6f);
    sim_volume_free(&v);
}

/* Values that are not HU: an 8-bit greyscale export, a scan without air (slope lost). */
TEST(volume_load_warns_when_values_are_not_hounsfield_units)
{
    const struct {
        float lo, hi;
        const char *says; /* NULL: no warning */
    } cases[] = {
        {0.0f, 255.0f, "8-bit greyscale"},
        {24.0f, 3000.0f, "no air"},
        {-1024.0f, 9000.0f, "outside what CT gives"},
        {-1024.0f, 2500.0f, NULL},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        sim_volume v;
        cropped_abdomen(&v, 24, 24, 8);
        for (size_t i = 0; i < (size_t)24 * 24 * 8; i++) /* the body's shape, rescaled */
            v.hu[i] = v.hu[i] < -400.0f ? cases[k].lo : v.hu[i] > 100.0f ? cases[k].hi : v.hu[i];
        sim_volume_load_opts o = sim_default_volume_load_opts();
        sim_volume_info info;
        memset(&info, 0, sizeof info);
        char err[256];
        REQUIRE(sim_volume_prepare(&v, &o, &info, err, sizeof err) == SIM_OK);
        if (cases[k].says)
            CHECKF(strstr(info.warning, cases[k].says) != NULL, "[%g, %g]: \"%s\"",
                   (double)cases[k].lo, (double)cases[k].hi, info.warning);
        else
            CHECKF(info.warning[0] == 0, "[%g, %g]: \"%s\"", (double)cases[k].lo,
                   (double)cases[k].hi, info.warning);
        CHECK(info.hu_min == cases[k].lo && info.hu_max == cases[k].hi);
        sim_volume_free(&v);
    }
}

TEST(volume_load_refuses_what_it_does_not_read)
{
    char err[512];
    sim_volume v;
    CHECK(sim_volume_load_file(&v, "/nonexistent/ct.nii", NULL, NULL, err, sizeof err) ==
          SIM_ERR_IO);
    CHECK(strstr(err, "/nonexistent/ct.nii") != NULL);
    CHECK(sim_volume_load_file(&v, "/etc/hostname", NULL, NULL, err, sizeof err) == SIM_ERR_FORMAT);
    CHECKF(strstr(err, "NIfTI") != NULL, "%s", err);
}

/* A NIfTI-1 of int16 written byte by byte (nx x ny x nz, 1 mm, body 40 HU in air), cut to
 * `keep` bytes when keep > 0: an upload still arriving, or one cut short. */
static int write_small_nifti(const char *path, int nx, int ny, int nz, long keep)
{
    unsigned char hdr[352] = {0};
    int32_t sizeof_hdr = 348;
    int16_t dim[8] = {3, (int16_t)nx, (int16_t)ny, (int16_t)nz, 1, 1, 1, 1}, dt = 4, bits = 16;
    float pixdim[8] = {1, 1, 1, 1, 1, 1, 1, 1}, vox = 352.0f, slope = 1.0f;
    memcpy(hdr, &sizeof_hdr, 4);
    memcpy(hdr + 40, dim, sizeof dim);
    memcpy(hdr + 70, &dt, 2);
    memcpy(hdr + 72, &bits, 2);
    memcpy(hdr + 76, pixdim, sizeof pixdim);
    memcpy(hdr + 108, &vox, 4);
    memcpy(hdr + 112, &slope, 4);
    hdr[123] = 2; /* mm */
    memcpy(hdr + 344, "n+1", 4);
    FILE *f = fopen(path, "wb");
    if (!f)
        return 0;
    long total = 352 + 2L * nx * ny * nz, n = keep > 0 && keep < total ? keep : total;
    for (long i = 0; i < n; i++) {
        int16_t v = (int16_t)((i - 352) / 2 % nx > 2 ? 40 : -1000);
        unsigned char b = i < 352 ? hdr[i] : ((unsigned char *)&v)[(i - 352) % 2];
        fputc(b, f);
    }
    return fclose(f) == 0;
}

static void note_stage(void *ctx, const char *stage)
{
    char *seen = ctx;
    if (strlen(seen) + strlen(stage) + 2 < 64) {
        strcat(seen, seen[0] ? "," : "");
        strcat(seen, stage);
    }
}

TEST(volume_load_header_only_checks_an_upload_from_its_first_bytes)
{
    char dir[] = "/tmp/softcast-header-XXXXXX", path[64], err[512] = "", seen[64] = "";
    REQUIRE(mkdtemp(dir) != NULL);
    snprintf(path, sizeof path, "%s/ct.nii", dir);
    sim_volume v;
    sim_volume_info info;
    sim_volume_load_opts o = sim_default_volume_load_opts();
    o.progress = note_stage;
    o.progress_ctx = seen;
    /* Whole: the header alone is read, its dims told, nothing allocated, no stage. */
    REQUIRE(write_small_nifti(path, 20, 16, 10, 0));
    o.header_only = SIM_LOAD_HEADER;
    CHECKF(sim_volume_load_file(&v, path, &o, &info, err, sizeof err) == SIM_OK, "%s", err);
    CHECK(v.hu == NULL && info.stored_dims[0] == 20 && info.stored_dims[1] == 16 &&
          info.stored_dims[2] == 10 && !strcmp(info.format, "nifti") && seen[0] == 0);
    /* Half of it: still arriving, the header passes; whole, it is truncated. */
    REQUIRE(write_small_nifti(path, 20, 16, 10, 352 + 3200));
    o.header_only = SIM_LOAD_HEADER_PARTIAL;
    CHECKF(sim_volume_load_file(&v, path, &o, &info, err, sizeof err) == SIM_OK, "%s", err);
    o.header_only = SIM_LOAD_HEADER;
    CHECK(sim_volume_load_file(&v, path, &o, &info, err, sizeof err) == SIM_ERR_FORMAT);
    CHECKF(strstr(err, "truncated") != NULL, "%s", err);
    /* Over the limits by its header: refused from the first bytes. */
    o.limits.max_dim = 16;
    o.header_only = SIM_LOAD_HEADER_PARTIAL;
    CHECK(sim_volume_load_file(&v, path, &o, &info, err, sizeof err) != SIM_OK);
    CHECKF(strstr(err, "20") != NULL, "%s", err);
    /* Loaded, its stages are told in order. */
    o = sim_default_volume_load_opts();
    o.progress = note_stage;
    o.progress_ctx = seen;
    REQUIRE(write_small_nifti(path, 20, 16, 10, 0));
    CHECKF(sim_volume_load_file(&v, path, &o, &info, err, sizeof err) == SIM_OK, "%s", err);
    CHECKF(!strcmp(seen, "reading,fitting,body"), "%s", seen);
    sim_volume_free(&v);
    unlink(path);
    rmdir(dir);
}
