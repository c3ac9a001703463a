/* test_volume_io.c: the phantom, the raw and NIfTI loaders, downsampling, validation.
 * Files are written to a fresh mkdtemp() folder under /tmp and removed afterwards. */
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sim/volume/volume.h"
#include "tests/harness.h"

#if SIM_HAVE_NIFTI
#include <nifti1_io.h>
#endif

/* Default class edges (sim_volume_params.hu_threshold). */
#define T_AIR  (-400.0f)
#define T_SOFT 25.0f
#define T_BONE 375.0f

static int tissue_of(float hu)
{
    return hu < T_AIR    ? SIM_TISSUE_AIR
           : hu < T_SOFT ? SIM_TISSUE_SKIN_FAT
           : hu < T_BONE ? SIM_TISSUE_MUSCLE_ORGAN
                         : SIM_TISSUE_BONE;
}

static size_t vol_n(const sim_volume *v)
{
    return (size_t)v->nx * (size_t)v->ny * (size_t)v->nz;
}

static float vol_at(const sim_volume *v, int x, int y, int z)
{
    return v->hu[(size_t)x + (size_t)v->nx * ((size_t)y + (size_t)v->ny * (size_t)z)];
}

static int is_zeroed(const sim_volume *v)
{
    return v->nx == 0 && v->ny == 0 && v->nz == 0 && v->hu == NULL && v->spacing_mm[0] == 0.0f &&
           v->spacing_mm[1] == 0.0f && v->spacing_mm[2] == 0.0f;
}

/* ------------------------------------------------------------ temp files */

typedef struct tmp_dir {
    char path[64];
} tmp_dir;

static int tmp_dir_make(tmp_dir *d)
{
    snprintf(d->path, sizeof d->path, "/tmp/softcast_vio_XXXXXX");
    return mkdtemp(d->path) != NULL;
}

static void tmp_file(const tmp_dir *d, const char *name, char *out, size_t out_sz)
{
    snprintf(out, out_sz, "%s/%s", d->path, name);
}

static void tmp_dir_remove(tmp_dir *d)
{
    DIR *dir = opendir(d->path);
    if (dir) {
        struct dirent *e;
        char p[512];
        while ((e = readdir(dir)) != NULL) {
            if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
                continue;
            snprintf(p, sizeof p, "%s/%s", d->path, e->d_name);
            unlink(p);
        }
        closedir(dir);
    }
    rmdir(d->path);
}

static int write_bytes(const char *path, const void *data, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return 0;
    size_t w = n ? fwrite(data, 1, n, f) : 0;
    return (fclose(f) == 0) && w == n;
}

static long file_size(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return -1;
    fseek(f, 0, SEEK_END);
    long s = ftell(f);
    fclose(f);
    return s;
}

/* Keep the first `keep` bytes of a file. */
static int cut_file(const char *path, long keep)
{
    return truncate(path, (off_t)keep) == 0;
}

/* Write n int16 as little-endian bytes. */
static int write_i16_le(const char *path, const int16_t *v, size_t n, size_t extra_bytes)
{
    size_t bytes = 2 * n + extra_bytes;
    unsigned char *b = (unsigned char *)calloc(bytes ? bytes : 1, 1);
    if (!b)
        return 0;
    for (size_t i = 0; i < n; i++) {
        uint16_t u = (uint16_t)v[i];
        b[2 * i] = (unsigned char)(u & 0xffu);
        b[2 * i + 1] = (unsigned char)(u >> 8);
    }
    int ok = write_bytes(path, b, bytes);
    free(b);
    return ok;
}

/* ------------------------------------------------------------ defaults */

TEST(volume_io_default_limits)
{
    sim_volume_limits l = sim_default_volume_limits();
    /* The reference experiment's full-size abdominal CT must load before downsampling. */
    CHECK(l.max_elements >= (size_t)512 * 512 * 300);
    CHECK(l.max_elements == (size_t)128 * 1024 * 1024);
    CHECK(l.max_dim == 4096);
}

TEST(volume_io_free_is_safe_on_zeroed)
{
    sim_volume v;
    memset(&v, 0, sizeof v);
    sim_volume_free(&v);
    CHECK(is_zeroed(&v));
    sim_volume_free(NULL);
    char err[256] = "";
    REQUIRE(sim_volume_phantom(&v, 8, 8, 8, err, sizeof err) == SIM_OK);
    sim_volume_free(&v);
    CHECK(is_zeroed(&v));
    sim_volume_free(&v); /* twice is fine */
    CHECK(is_zeroed(&v));
}

/* ------------------------------------------------------------ phantom */

/* Class fractions, air at the corners, bone at the documented spine position. */
static void check_phantom_classes(int nx, int ny, int nz)
{
    sim_volume v;
    char err[256] = "";
    REQUIRE(sim_volume_phantom(&v, nx, ny, nz, err, sizeof err) == SIM_OK);
    CHECK(v.nx == nx && v.ny == ny && v.nz == nz);
    /* The field of view is 400 x 400 x 300 mm at any size. */
    CHECKF(fabsf(v.spacing_mm[0] * (float)nx - 400.0f) < 1e-3f &&
               fabsf(v.spacing_mm[1] * (float)ny - 400.0f) < 1e-3f &&
               fabsf(v.spacing_mm[2] * (float)nz - 300.0f) < 1e-3f,
           "spacing %g %g %g", (double)v.spacing_mm[0], (double)v.spacing_mm[1],
           (double)v.spacing_mm[2]);
    size_t n = vol_n(&v), count[SIM_NTISSUE] = {0};
    for (size_t i = 0; i < n; i++)
        count[tissue_of(v.hu[i])]++;
    double frac[SIM_NTISSUE];
    for (int t = 0; t < SIM_NTISSUE; t++)
        frac[t] = (double)count[t] / (double)n;
    th_note("%dx%dx%d: air %.3f skin_fat %.3f muscle_organ %.3f bone %.4f", nx, ny, nz, frac[0],
            frac[1], frac[2], frac[3]);
    /* The body ellipse covers ~43% of the 400x400 mm slice. */
    CHECKF(frac[SIM_TISSUE_AIR] > 0.45 && frac[SIM_TISSUE_AIR] < 0.70, "air %.3f",
           frac[SIM_TISSUE_AIR]);
    CHECKF(frac[SIM_TISSUE_SKIN_FAT] > 0.08 && frac[SIM_TISSUE_SKIN_FAT] < 0.30, "skin_fat %.3f",
           frac[SIM_TISSUE_SKIN_FAT]);
    CHECKF(frac[SIM_TISSUE_MUSCLE_ORGAN] > 0.12 && frac[SIM_TISSUE_MUSCLE_ORGAN] < 0.40,
           "muscle_organ %.3f", frac[SIM_TISSUE_MUSCLE_ORGAN]);
    CHECKF(frac[SIM_TISSUE_BONE] > 0.003 && frac[SIM_TISSUE_BONE] < 0.06, "bone %.4f",
           frac[SIM_TISSUE_BONE]);
    /* Outside corners of every slice are air. */
    int corner_air = 1;
    for (int z = 0; z < nz; z++) {
        corner_air &= tissue_of(vol_at(&v, 0, 0, z)) == SIM_TISSUE_AIR;
        corner_air &= tissue_of(vol_at(&v, nx - 1, 0, z)) == SIM_TISSUE_AIR;
        corner_air &= tissue_of(vol_at(&v, 0, ny - 1, z)) == SIM_TISSUE_AIR;
        corner_air &= tissue_of(vol_at(&v, nx - 1, ny - 1, z)) == SIM_TISSUE_AIR;
    }
    CHECK(corner_air);
    /* The vertebral body: midline, 50 mm behind the centre (y = 150 mm from y = 0), radius
     * 20 mm. Look within 25 mm of it: bone in most slices (discs are 8 of every 34 mm). */
    int slices_with_bone = 0;
    for (int z = 0; z < nz; z++) {
        int found = 0;
        for (int y = 0; y < ny && !found; y++)
            for (int x = 0; x < nx && !found; x++) {
                float u = ((float)x + 0.5f) * v.spacing_mm[0] - 200.0f;
                float dv = ((float)y + 0.5f) * v.spacing_mm[1] - 150.0f;
                if (u * u + dv * dv <= 25.0f * 25.0f &&
                    tissue_of(vol_at(&v, x, y, z)) == SIM_TISSUE_BONE)
                    found = 1;
            }
        slices_with_bone += found;
    }
    CHECKF(slices_with_bone * 2 > nz, "bone near the spine in %d of %d slices", slices_with_bone,
           nz);
    sim_volume_free(&v);
}

TEST(volume_io_phantom_classes_128x128x75)
{
    check_phantom_classes(128, 128, 75);
}

TEST(volume_io_phantom_classes_16x16x8)
{
    check_phantom_classes(16, 16, 8);
}

/* The documented axes: spine posterior at low y, belly front at high y; ribs only in the
 * upper (superior, high z) part, the iliac wings in the lowest; liver on the patient's
 * right at high x. */
TEST(volume_io_phantom_axis_convention)
{
    sim_volume v;
    char err[256] = "";
    REQUIRE(sim_volume_phantom(&v, 128, 128, 75, err, sizeof err) == SIM_OK);
    int nx = v.nx, ny = v.ny, nz = v.nz;
    /* Midline column: all bone (the spine) lies in the posterior half. */
    int bone_low_y = 0, bone_high_y = 0;
    for (int z = 0; z < nz; z++)
        for (int y = 0; y < ny; y++)
            for (int x = nx / 2 - 2; x <= nx / 2 + 1; x++)
                if (tissue_of(vol_at(&v, x, y, z)) == SIM_TISSUE_BONE)
                    (*(y < ny / 2 ? &bone_low_y : &bone_high_y))++;
    CHECKF(bone_low_y > 100 && bone_high_y == 0, "midline bone: %d at low y, %d at high y",
           bone_low_y, bone_high_y);
    /* Lateral bone (> 60 mm from the midline): the ribs above z = 160 mm, the iliac wings
     * below 95 mm (the pelvis at the inferior end), none between. */
    int wing = 0, rib_mid = 0, rib_high = 0;
    for (int z = 0; z < nz; z++)
        for (int y = 0; y < ny; y++)
            for (int x = 0; x < nx; x++) {
                float u = ((float)x + 0.5f) * v.spacing_mm[0] - 200.0f;
                float w = ((float)z + 0.5f) * v.spacing_mm[2];
                if (fabsf(u) > 60.0f && tissue_of(vol_at(&v, x, y, z)) == SIM_TISSUE_BONE)
                    (*(w < 95.0f ? &wing : w < 160.0f ? &rib_mid : &rib_high))++;
            }
    CHECKF(rib_high > 100 && wing > 100 && rib_mid == 0,
           "lateral bone: %d below 95 mm, %d at 95-160 mm, %d above", wing, rib_mid, rib_high);
    /* Upper slices: the liver (+60) makes the patient-right third (high x) denser in soft
     * tissue than the left third. */
    double right = 0.0, left = 0.0;
    int nr = 0, nl = 0;
    for (int z = nz * 3 / 4; z < nz; z++)
        for (int y = ny / 3; y < ny * 2 / 3; y++)
            for (int x = 0; x < nx; x++) {
                float h = vol_at(&v, x, y, z);
                if (tissue_of(h) != SIM_TISSUE_MUSCLE_ORGAN)
                    continue;
                if (x >= nx * 2 / 3) {
                    right += (double)h;
                    nr++;
                } else if (x < nx / 3) {
                    left += (double)h;
                    nl++;
                }
            }
    REQUIRE(nr > 0 && nl > 0);
    th_note("upper soft tissue mean: right (high x) %.1f HU, left %.1f HU", right / nr, left / nl);
    CHECKF(right / nr > left / nl + 3.0, "right %.1f, left %.1f", right / nr, left / nl);
    sim_volume_free(&v);
}

/* Class edges with margin: noise never pushes a value across a default threshold or the
 * contrast preset's bone edge; the noise is there (+-10 HU) but bounded. */
TEST(volume_io_phantom_values_clear_of_thresholds)
{
    sim_volume v;
    char err[256] = "";
    REQUIRE(sim_volume_phantom(&v, 128, 128, 75, err, sizeof err) == SIM_OK);
    size_t n = vol_n(&v);
    float margin = 1e9f, lo = 1e9f, hi = -1e9f;
    const float edges[4] = {T_AIR, T_SOFT, T_BONE, SIM_HU_BONE_CONTRAST};
    double air_sum = 0.0, air_sq = 0.0;
    size_t air_n = 0;
    for (size_t i = 0; i < n; i++) {
        float h = v.hu[i];
        for (int k = 0; k < 4; k++)
            margin = fminf(margin, fabsf(h - edges[k]));
        lo = fminf(lo, h);
        hi = fmaxf(hi, h);
    }
    /* Noise statistics in the outside air (the first row of every slice). */
    for (int z = 0; z < v.nz; z++)
        for (int x = 0; x < v.nx; x++) {
            double h = (double)vol_at(&v, x, 0, z);
            air_sum += h;
            air_sq += h * h;
            air_n++;
        }
    double mean = air_sum / (double)air_n;
    double sd = sqrt(air_sq / (double)air_n - mean * mean);
    th_note("min distance to a class edge %.2f HU; range [%.1f, %.1f]; air %.2f +- %.2f HU",
            (double)margin, (double)lo, (double)hi, mean, sd);
    CHECKF(margin >= 4.9f, "a value within %.2f HU of a class edge", (double)margin);
    CHECK(lo >= -1010.0f && hi <= 960.0f); /* air and gas -1000, iliac wings 950, +-10 */
    CHECKF(fabs(mean + 1000.0) < 1.0 && sd > 4.0 && sd < 7.0, "air %.2f +- %.2f", mean, sd);
    sim_volume_free(&v);
}

TEST(volume_io_phantom_deterministic)
{
    sim_volume a, b;
    char err[256] = "";
    REQUIRE(sim_volume_phantom(&a, 64, 48, 40, err, sizeof err) == SIM_OK);
    if (sim_volume_phantom(&b, 64, 48, 40, err, sizeof err) != SIM_OK) {
        sim_volume_free(&a);
        REQUIRE(0);
    }
    CHECK(memcmp(a.hu, b.hu, vol_n(&a) * sizeof(float)) == 0);
    CHECK(memcmp(a.spacing_mm, b.spacing_mm, sizeof a.spacing_mm) == 0);
    sim_volume_free(&a);
    sim_volume_free(&b);
}

TEST(volume_io_phantom_bad_dims)
{
    sim_volume v;
    char err[256] = "";
    CHECK(sim_volume_phantom(&v, 7, 128, 75, err, sizeof err) == SIM_ERR_ARG);
    CHECKF(strstr(err, "phantom") && strstr(err, "7x128x75"), "err: %s", err);
    CHECK(is_zeroed(&v));
    CHECK(sim_volume_phantom(&v, 128, 128, -1, err, sizeof err) == SIM_ERR_ARG);
    CHECK(is_zeroed(&v));
    CHECK(sim_volume_phantom(&v, 4096, 4096, 4096, err, sizeof err) == SIM_ERR_LIMIT);
    CHECKF(strstr(err, "phantom") != NULL, "err: %s", err);
    CHECK(is_zeroed(&v));
    CHECK(sim_volume_phantom(NULL, 8, 8, 8, err, sizeof err) == SIM_ERR_ARG);
}

/* ------------------------------------------------------------ raw int16 */

TEST(volume_io_raw_round_trip)
{
    tmp_dir d;
    REQUIRE(tmp_dir_make(&d));
    char path[256];
    tmp_file(&d, "ct.raw", path, sizeof path);
    enum { NX = 9, NY = 5, NZ = 4, N = NX * NY * NZ };
    int16_t v[N];
    for (int i = 0; i < N; i++)
        v[i] = (int16_t)(i * 997 % 65536 - 32768);
    v[0] = -32768;
    v[1] = 32767;
    v[2] = -1;
    v[3] = -1024;
    v[4] = 256; /* bytes 00 01: catches a swapped decode */
    REQUIRE(write_i16_le(path, v, N, 0));
    REQUIRE(file_size(path) == 2 * N);
    sim_volume vol;
    char err[256] = "";
    const float sp[3] = {0.75f, 0.8f, 2.5f};
    sim_status st = sim_volume_load_raw_i16(&vol, path, NX, NY, NZ, sp, NULL, err, sizeof err);
    CHECKF(st == SIM_OK, "status %d: %s", st, err);
    if (st == SIM_OK) {
        CHECK(vol.nx == NX && vol.ny == NY && vol.nz == NZ);
        CHECK(memcmp(vol.spacing_mm, sp, sizeof sp) == 0);
        int same = 1;
        for (int i = 0; i < N; i++)
            same &= vol.hu[i] == (float)v[i];
        CHECK(same);
        CHECK(sim_volume_validate(&vol, NULL, path, err, sizeof err) == SIM_OK);
    }
    sim_volume_free(&vol);
    tmp_dir_remove(&d);
}

/* Status and message for a raw file of the given size vs. the 8x8x4 dims it is read with. */
static void check_raw_size(size_t extra, int short_by, const char *want_text)
{
    tmp_dir d;
    REQUIRE(tmp_dir_make(&d));
    char path[256];
    tmp_file(&d, "ct.raw", path, sizeof path);
    int16_t v[256] = {0};
    REQUIRE(write_i16_le(path, v, 256, extra));
    if (short_by)
        REQUIRE(cut_file(path, 512 - short_by));
    sim_volume vol;
    char err[256] = "";
    const float sp[3] = {1.0f, 1.0f, 1.0f};
    sim_status st = sim_volume_load_raw_i16(&vol, path, 8, 8, 4, sp, NULL, err, sizeof err);
    CHECKF(st == SIM_ERR_FORMAT, "status %d", st);
    CHECKF(strstr(err, path) && strstr(err, want_text), "err: %s", err);
    CHECK(is_zeroed(&vol));
    sim_volume_free(&vol);
    tmp_dir_remove(&d);
}

TEST(volume_io_raw_truncated)
{
    check_raw_size(0, 1, "truncated");
}

TEST(volume_io_raw_extra_bytes)
{
    check_raw_size(3, 0, "has 3 extra bytes");
}

TEST(volume_io_raw_bad_dims_and_spacing)
{
    tmp_dir d;
    REQUIRE(tmp_dir_make(&d));
    char path[256];
    tmp_file(&d, "ct.raw", path, sizeof path);
    int16_t v[64] = {0};
    REQUIRE(write_i16_le(path, v, 64, 0));
    sim_volume vol;
    char err[256] = "";
    const float sp[3] = {1.0f, 1.0f, 1.0f};
    CHECK(sim_volume_load_raw_i16(&vol, path, 0, 8, 8, sp, NULL, err, sizeof err) == SIM_ERR_ARG);
    CHECKF(strstr(err, path) && strstr(err, "0x8x8"), "err: %s", err);
    CHECK(is_zeroed(&vol));
    CHECK(sim_volume_load_raw_i16(&vol, path, 4, -4, 4, sp, NULL, err, sizeof err) == SIM_ERR_ARG);
    CHECK(is_zeroed(&vol));
    const float bad_sp[3] = {1.0f, NAN, 1.0f};
    CHECK(sim_volume_load_raw_i16(&vol, path, 4, 4, 4, bad_sp, NULL, err, sizeof err) ==
          SIM_ERR_ARG);
    CHECKF(strstr(err, path) && strstr(err, "spacing"), "err: %s", err);
    CHECK(is_zeroed(&vol));
    CHECK(sim_volume_load_raw_i16(&vol, path, 4, 4, 4, NULL, NULL, err, sizeof err) == SIM_ERR_ARG);
    tmp_dir_remove(&d);
}

TEST(volume_io_raw_over_limits)
{
    tmp_dir d;
    REQUIRE(tmp_dir_make(&d));
    char path[256];
    tmp_file(&d, "ct.raw", path, sizeof path);
    int16_t v[512] = {0};
    REQUIRE(write_i16_le(path, v, 512, 0));
    sim_volume vol;
    char err[256] = "";
    const float sp[3] = {1.0f, 1.0f, 1.0f};
    sim_volume_limits lim = sim_default_volume_limits();
    lim.max_elements = 100;
    CHECK(sim_volume_load_raw_i16(&vol, path, 8, 8, 8, sp, &lim, err, sizeof err) == SIM_ERR_LIMIT);
    CHECKF(strstr(err, path) && strstr(err, "512") && strstr(err, "100"), "err: %s", err);
    CHECK(is_zeroed(&vol));
    lim = sim_default_volume_limits();
    lim.max_dim = 7;
    CHECK(sim_volume_load_raw_i16(&vol, path, 8, 8, 8, sp, &lim, err, sizeof err) == SIM_ERR_LIMIT);
    CHECKF(strstr(err, path) && strstr(err, "7"), "err: %s", err);
    /* Dims whose product overflows 32 bits, with default limits: refused before any read. */
    CHECK(sim_volume_load_raw_i16(&vol, path, 4096, 4096, 4096, sp, NULL, err, sizeof err) ==
          SIM_ERR_LIMIT);
    CHECKF(strstr(err, "68719476736") != NULL, "err: %s", err);
    /* The same file within limits loads. */
    lim.max_dim = 8;
    lim.max_elements = 512;
    sim_status st = sim_volume_load_raw_i16(&vol, path, 8, 8, 8, sp, &lim, err, sizeof err);
    CHECKF(st == SIM_OK, "err: %s", err);
    sim_volume_free(&vol);
    tmp_dir_remove(&d);
}

TEST(volume_io_raw_missing_file)
{
    tmp_dir d;
    REQUIRE(tmp_dir_make(&d));
    char path[256];
    tmp_file(&d, "absent.raw", path, sizeof path);
    sim_volume vol;
    char err[256] = "";
    const float sp[3] = {1.0f, 1.0f, 1.0f};
    CHECK(sim_volume_load_raw_i16(&vol, path, 8, 8, 8, sp, NULL, err, sizeof err) == SIM_ERR_IO);
    CHECKF(strstr(err, path) && strstr(err, strerror(ENOENT)), "err: %s", err);
    CHECK(is_zeroed(&vol));
    /* A folder is not a volume either. */
    CHECK(sim_volume_load_raw_i16(&vol, d.path, 8, 8, 8, sp, NULL, err, sizeof err) == SIM_ERR_IO);
    CHECKF(strstr(err, d.path) != NULL, "err: %s", err);
    tmp_dir_remove(&d);
}

/* ------------------------------------------------------------ NIfTI */

#if SIM_HAVE_NIFTI

/* Write a 5x4x3 int16 volume (value i - 30 at element i) with the library. */
static int write_nifti_i16(const char *path, float slope, float inter)
{
    nifti_set_debug_level(0);
    int dims[8] = {3, 5, 4, 3, 1, 1, 1, 1};
    nifti_image *nim = nifti_make_new_nim(dims, DT_INT16, 1);
    if (!nim)
        return 0;
    int16_t *p = (int16_t *)nim->data;
    for (int i = 0; i < 60; i++)
        p[i] = (int16_t)(i - 30);
    nim->scl_slope = slope;
    nim->scl_inter = inter;
    nim->dx = nim->pixdim[1] = 0.5f;
    nim->dy = nim->pixdim[2] = 0.7f;
    nim->dz = nim->pixdim[3] = 1.5f;
    nim->xyz_units = NIFTI_UNITS_MM;
    int ok = nifti_set_filenames(nim, path, 0, 1) == 0;
    if (ok)
        nifti_image_write(nim);
    nifti_image_free(nim);
    return ok && file_size(path) > 0;
}

/* A header built field by field, optionally big-endian, then `data` (already in the file's
 * byte order). */
typedef struct hand_nii {
    short dim[8];
    short datatype, bitpix;
    float pixdim[4];
    float slope, inter;
    char units;
    int big_endian;
} hand_nii;

static hand_nii hand_default(short datatype, short bitpix)
{
    hand_nii h;
    memset(&h, 0, sizeof h);
    h.dim[0] = 3;
    h.dim[1] = 4;
    h.dim[2] = 3;
    h.dim[3] = 2;
    for (int i = 4; i < 8; i++)
        h.dim[i] = 1;
    h.datatype = datatype;
    h.bitpix = bitpix;
    h.pixdim[1] = h.pixdim[2] = h.pixdim[3] = 1.0f;
    h.units = NIFTI_UNITS_MM;
    return h;
}

static int write_nifti_by_hand(const char *path, const hand_nii *s, const void *data, size_t bytes)
{
    nifti_1_header h;
    memset(&h, 0, sizeof h);
    h.sizeof_hdr = 348;
    memcpy(h.dim, s->dim, sizeof h.dim);
    h.datatype = s->datatype;
    h.bitpix = s->bitpix;
    h.pixdim[0] = 1.0f;
    for (int i = 1; i < 4; i++)
        h.pixdim[i] = s->pixdim[i];
    for (int i = 4; i < 8; i++)
        h.pixdim[i] = 1.0f;
    h.vox_offset = 352.0f;
    h.scl_slope = s->slope;
    h.scl_inter = s->inter;
    h.xyzt_units = s->units;
    memcpy(h.magic, "n+1", 4);
    if (s->big_endian)
        swap_nifti_header(&h, 1);
    FILE *f = fopen(path, "wb");
    if (!f)
        return 0;
    unsigned char ext[4] = {0, 0, 0, 0};
    int ok = fwrite(&h, sizeof h, 1, f) == 1 && fwrite(ext, 4, 1, f) == 1;
    if (bytes)
        ok = ok && fwrite(data, bytes, 1, f) == 1;
    return (fclose(f) == 0) && ok;
}

/* Compress src into dst with the library's own zlib stream. */
static int gzip_file(const char *src, const char *dst)
{
    long n = file_size(src);
    if (n <= 0)
        return 0;
    unsigned char *b = (unsigned char *)malloc((size_t)n);
    FILE *f = fopen(src, "rb");
    int ok = b && f && fread(b, 1, (size_t)n, f) == (size_t)n;
    if (f)
        fclose(f);
    znzFile z = ok ? znzopen(dst, "wb", 1) : NULL;
    if (znz_isnull(z))
        ok = 0;
    else {
        ok = znzwrite(b, 1, (size_t)n, z) == (size_t)n;
        ok &= znzclose(z) == 0;
    }
    free(b);
    return ok;
}

static void check_nifti_i16_scaled(const char *name)
{
    tmp_dir d;
    REQUIRE(tmp_dir_make(&d));
    char path[256];
    tmp_file(&d, name, path, sizeof path);
    REQUIRE(write_nifti_i16(path, 2.0f, -1000.0f));
    sim_volume v;
    char err[256] = "";
    sim_status st = sim_volume_load_nifti(&v, path, NULL, err, sizeof err);
    CHECKF(st == SIM_OK, "status %d: %s", st, err);
    if (st == SIM_OK) {
        CHECK(v.nx == 5 && v.ny == 4 && v.nz == 3);
        CHECKF(v.spacing_mm[0] == 0.5f && v.spacing_mm[1] == 0.7f && v.spacing_mm[2] == 1.5f,
               "spacing %g %g %g", (double)v.spacing_mm[0], (double)v.spacing_mm[1],
               (double)v.spacing_mm[2]);
        int same = 1;
        for (int i = 0; i < 60; i++)
            same &= v.hu[i] == 2.0f * (float)(i - 30) - 1000.0f;
        CHECKF(same, "hu[0] %g hu[59] %g", (double)v.hu[0], (double)v.hu[59]);
        CHECK(vol_at(&v, 4, 3, 2) == 2.0f * 29.0f - 1000.0f);
    }
    sim_volume_free(&v);
    tmp_dir_remove(&d);
}

/* The same anatomy stored in another axis order: canon (RAS, 5 x 4 x 3, spacing 0.5, 0.7,
 * 1.5 mm, voxel value x + 10 y + 100 z) laid out so that file axis a runs along patient axis
 * axis[a], reversed when neg[a], with the affine that says so (an sform, or the same as a
 * qform), optionally turned by tilt_deg about z (an oblique scan). */
typedef struct oriented {
    int axis[3], neg[3];
    int use_qform, no_codes;
    float tilt_deg;
} oriented;

static int write_oriented(const char *path, const oriented *o)
{
    const int cd[3] = {5, 4, 3};
    const float csp[3] = {0.5f, 0.7f, 1.5f};
    nifti_1_header h;
    memset(&h, 0, sizeof h);
    h.sizeof_hdr = 348;
    h.dim[0] = 3;
    for (int a = 0; a < 3; a++) {
        h.dim[1 + a] = (short)cd[o->axis[a]];
        h.pixdim[1 + a] = csp[o->axis[a]];
    }
    for (int i = 4; i < 8; i++)
        h.dim[i] = 1, h.pixdim[i] = 1.0f;
    h.datatype = DT_INT16;
    h.bitpix = 16;
    h.vox_offset = 352.0f;
    h.xyzt_units = NIFTI_UNITS_MM;
    memcpy(h.magic, "n+1", 4);
    mat44 m;
    memset(&m, 0, sizeof m);
    double t = (double)o->tilt_deg * 3.14159265358979 / 180.0;
    for (int a = 0; a < 3; a++) { /* column a: file axis a's step in the patient's RAS */
        double step[3] = {0.0, 0.0, 0.0};
        step[o->axis[a]] = (double)(o->neg[a] ? -csp[o->axis[a]] : csp[o->axis[a]]);
        m.m[0][a] = (float)(cos(t) * step[0] - sin(t) * step[1]);
        m.m[1][a] = (float)(sin(t) * step[0] + cos(t) * step[1]);
        m.m[2][a] = (float)step[2];
    }
    m.m[3][3] = 1.0f;
    if (o->use_qform) {
        float qb, qc, qd, qx, qy, qz, dx, dy, dz, qfac;
        nifti_mat44_to_quatern(m, &qb, &qc, &qd, &qx, &qy, &qz, &dx, &dy, &dz, &qfac);
        h.qform_code = NIFTI_XFORM_SCANNER_ANAT;
        h.quatern_b = qb, h.quatern_c = qc, h.quatern_d = qd;
        h.pixdim[0] = qfac;
    } else if (!o->no_codes) {
        h.sform_code = NIFTI_XFORM_SCANNER_ANAT;
        for (int c = 0; c < 4; c++)
            h.srow_x[c] = m.m[0][c], h.srow_y[c] = m.m[1][c], h.srow_z[c] = m.m[2][c];
    }
    int16_t data[60];
    int n[3] = {h.dim[1], h.dim[2], h.dim[3]};
    for (int k = 0; k < n[2]; k++)
        for (int j = 0; j < n[1]; j++)
            for (int i = 0; i < n[0]; i++) {
                int f[3] = {i, j, k}, c[3] = {0, 0, 0};
                for (int a = 0; a < 3; a++)
                    c[o->axis[a]] = o->neg[a] ? cd[o->axis[a]] - 1 - f[a] : f[a];
                data[i + n[0] * (j + n[1] * k)] = (int16_t)(c[0] + 10 * c[1] + 100 * c[2]);
            }
    FILE *fp = fopen(path, "wb");
    if (!fp)
        return 0;
    unsigned char ext[4] = {0, 0, 0, 0};
    int ok = fwrite(&h, sizeof h, 1, fp) == 1 && fwrite(ext, 4, 1, fp) == 1 &&
             fwrite(data, sizeof data, 1, fp) == 1;
    return fclose(fp) == 0 && ok;
}

/* Stored RAS, LPS, permuted (S, R, A), as a qform, and oblique by 10 degrees: each reads as
 * the same RAS lattice, voxel for voxel, with the spacing that goes with it; the file's own
 * orientation and obliquity are reported. A file without codes keeps its stored order. */
TEST(volume_io_nifti_orientation_read_to_ras)
{
    const struct {
        const char *name, *says;
        oriented o;
    } cases[] = {
        {"ras.nii", "RAS", {{0, 1, 2}, {0, 0, 0}, 0, 0, 0.0f}},
        {"lps.nii", "LPS", {{0, 1, 2}, {1, 1, 0}, 0, 0, 0.0f}},
        {"sra.nii", "SRA", {{2, 0, 1}, {0, 0, 0}, 0, 0, 0.0f}},
        {"ipl_qform.nii", "IPL", {{2, 1, 0}, {1, 1, 1}, 1, 0, 0.0f}},
        {"lps_oblique.nii", "LPS", {{0, 1, 2}, {1, 1, 0}, 0, 0, 10.0f}},
    };
    tmp_dir d;
    REQUIRE(tmp_dir_make(&d));
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        char path[256], err[256] = "";
        tmp_file(&d, cases[k].name, path, sizeof path);
        REQUIRE(write_oriented(path, &cases[k].o));
        sim_volume v;
        sim_status st = sim_volume_load_nifti(&v, path, NULL, err, sizeof err);
        CHECKF(st == SIM_OK, "%s: %s", cases[k].name, err);
        if (st != SIM_OK)
            continue;
        CHECKF(v.nx == 5 && v.ny == 4 && v.nz == 3, "%s: %d x %d x %d", cases[k].name, v.nx, v.ny,
               v.nz);
        CHECKF(v.spacing_mm[0] == 0.5f && v.spacing_mm[1] == 0.7f && v.spacing_mm[2] == 1.5f,
               "%s: spacing %g %g %g", cases[k].name, (double)v.spacing_mm[0],
               (double)v.spacing_mm[1], (double)v.spacing_mm[2]);
        int wrong = 0;
        for (int z = 0; z < 3 && v.nx == 5 && v.ny == 4 && v.nz == 3; z++)
            for (int y = 0; y < 4; y++)
                for (int x = 0; x < 5; x++)
                    wrong += vol_at(&v, x, y, z) != (float)(x + 10 * y + 100 * z);
        CHECKF(wrong == 0, "%s: %d voxels not where RAS puts them", cases[k].name, wrong);
        CHECKF(!strcmp(v.orientation, cases[k].says), "%s: orientation \"%s\"", cases[k].name,
               v.orientation);
        CHECKF(fabsf(v.oblique_deg - cases[k].o.tilt_deg) < 0.01f, "%s: oblique %g degrees",
               cases[k].name, (double)v.oblique_deg);
        sim_volume_free(&v);
        /* What the user is told was stored: the file's own dims, in its own order. */
        sim_volume_info info;
        sim_volume_load_opts lo = sim_default_volume_load_opts();
        lo.keep_all = 1;
        REQUIRE(sim_volume_load_file(&v, path, &lo, &info, err, sizeof err) == SIM_OK);
        const int cd[3] = {5, 4, 3};
        int want[3] = {cd[cases[k].o.axis[0]], cd[cases[k].o.axis[1]], cd[cases[k].o.axis[2]]};
        CHECKF(!memcmp(info.stored_dims, want, sizeof want),
               "%s: stored %d x %d x %d, not %d x %d x %d", cases[k].name, info.stored_dims[0],
               info.stored_dims[1], info.stored_dims[2], want[0], want[1], want[2]);
        sim_volume_free(&v);
    }
    /* No codes: as stored (the LPS layout read as is, x reversed), orientation unknown. */
    oriented none = {{0, 1, 2}, {1, 1, 0}, 0, 1, 0.0f};
    char path[256], err[256] = "";
    tmp_file(&d, "nocodes.nii", path, sizeof path);
    REQUIRE(write_oriented(path, &none));
    sim_volume v;
    REQUIRE(sim_volume_load_nifti(&v, path, NULL, err, sizeof err) == SIM_OK);
    CHECK(v.orientation[0] == 0 && vol_at(&v, 0, 0, 0) == (float)(4 + 10 * 3));
    sim_volume_free(&v);
    tmp_dir_remove(&d);
}

/* A volume over its budget is block-averaged by the smallest factor that fits: 20 x 14 x 9
 * (2520 elements) into 400 takes 2 (10 x 7 x 5 = 350; 1 leaves 2520), each element the mean of
 * its block, a trailing half block the mean of what it holds; into 2520 nothing changes;
 * into 1, one element, the mean of all. */
TEST(volume_io_fit_to_a_budget_by_the_smallest_factor)
{
    char err[256];
    const int nx = 20, ny = 14, nz = 9;
    sim_volume v;
    memset(&v, 0, sizeof v);
    v.nx = nx, v.ny = ny, v.nz = nz;
    v.spacing_mm[0] = 0.5f, v.spacing_mm[1] = 0.5f, v.spacing_mm[2] = 2.0f;
    v.hu = malloc((size_t)nx * ny * nz * sizeof *v.hu);
    REQUIRE(v.hu);
    for (int i = 0; i < nx * ny * nz; i++)
        v.hu[i] = (float)((i * 37) % 101);
    sim_volume keep = v;
    keep.hu = malloc((size_t)nx * ny * nz * sizeof *v.hu);
    REQUIRE(keep.hu);
    memcpy(keep.hu, v.hu, (size_t)nx * ny * nz * sizeof *v.hu);
    int f = 0;
    REQUIRE(sim_volume_fit(&v, 2520, &f, err, sizeof err) == SIM_OK);
    CHECK(f == 1 && v.nx == 20 && v.hu[5] == keep.hu[5]);
    REQUIRE(sim_volume_fit(&v, 400, &f, err, sizeof err) == SIM_OK);
    CHECKF(f == 2 && v.nx == 10 && v.ny == 7 && v.nz == 5, "factor %d: %d x %d x %d", f, v.nx, v.ny,
           v.nz);
    CHECK(v.spacing_mm[0] == 1.0f && v.spacing_mm[2] == 4.0f);
    if (v.nx == 10 && v.ny == 7 && v.nz == 5) {
        double first = 0.0, last = 0.0; /* block (0,0,0); block (9,6,4): z = 8 only */
        for (int z = 0; z < 2; z++)
            for (int y = 0; y < 2; y++)
                for (int x = 0; x < 2; x++)
                    first += (double)keep.hu[x + nx * (y + ny * z)] / 8.0;
        for (int y = 12; y < 14; y++)
            for (int x = 18; x < 20; x++)
                last += (double)keep.hu[x + nx * (y + ny * 8)] / 4.0;
        CHECKF(fabs((double)v.hu[0] - first) < 1e-4 && fabs((double)v.hu[349] - last) < 1e-4,
               "blocks %g %g, means %g %g", (double)v.hu[0], (double)v.hu[349], first, last);
    }
    REQUIRE(sim_volume_fit(&v, 1, &f, err, sizeof err) == SIM_OK);
    CHECKF(v.nx == 1 && v.ny == 1 && v.nz == 1, "%d x %d x %d", v.nx, v.ny, v.nz);
    sim_volume_free(&v);
    sim_volume_free(&keep);
}

TEST(volume_io_nifti_i16_scaled_nii)
{
    check_nifti_i16_scaled("ct.nii");
}

TEST(volume_io_nifti_i16_scaled_nii_gz)
{
    check_nifti_i16_scaled("ct.nii.gz");
}

/* Slope 0 means "no scaling" (the NIfTI-1 standard), whatever the intercept says. */
TEST(volume_io_nifti_slope_zero_means_unscaled)
{
    tmp_dir d;
    REQUIRE(tmp_dir_make(&d));
    char path[256];
    tmp_file(&d, "ct.nii", path, sizeof path);
    REQUIRE(write_nifti_i16(path, 0.0f, -1000.0f));
    sim_volume v;
    char err[256] = "";
    sim_status st = sim_volume_load_nifti(&v, path, NULL, err, sizeof err);
    CHECKF(st == SIM_OK, "%s", err);
    if (st == SIM_OK)
        CHECK(v.hu[0] == -30.0f && v.hu[59] == 29.0f);
    sim_volume_free(&v);
    tmp_dir_remove(&d);
}

/* A big-endian file with xyz units in metres: bytes are swapped, spacing becomes mm. */
TEST(volume_io_nifti_big_endian_metres)
{
    tmp_dir d;
    REQUIRE(tmp_dir_make(&d));
    char path[256];
    tmp_file(&d, "be.nii", path, sizeof path);
    hand_nii h = hand_default(DT_INT16, 16);
    h.big_endian = 1;
    h.units = NIFTI_UNITS_METER;
    h.pixdim[1] = 0.001f;
    h.pixdim[2] = 0.002f;
    h.pixdim[3] = 0.004f;
    h.slope = 1.0f;
    h.inter = 0.0f;
    unsigned char data[48];
    for (int i = 0; i < 24; i++) { /* value 300*i - 3000, big-endian */
        uint16_t u = (uint16_t)(int16_t)(300 * i - 3000);
        data[2 * i] = (unsigned char)(u >> 8);
        data[2 * i + 1] = (unsigned char)(u & 0xffu);
    }
    REQUIRE(write_nifti_by_hand(path, &h, data, sizeof data));
    sim_volume v;
    char err[256] = "";
    sim_status st = sim_volume_load_nifti(&v, path, NULL, err, sizeof err);
    CHECKF(st == SIM_OK, "status %d: %s", st, err);
    if (st == SIM_OK) {
        CHECK(v.nx == 4 && v.ny == 3 && v.nz == 2);
        CHECKF(fabsf(v.spacing_mm[0] - 1.0f) < 1e-5f && fabsf(v.spacing_mm[1] - 2.0f) < 1e-5f &&
                   fabsf(v.spacing_mm[2] - 4.0f) < 1e-5f,
               "spacing %g %g %g", (double)v.spacing_mm[0], (double)v.spacing_mm[1],
               (double)v.spacing_mm[2]);
        int same = 1;
        for (int i = 0; i < 24; i++)
            same &= v.hu[i] == (float)(300 * i - 3000);
        CHECKF(same, "hu[0] %g hu[23] %g", (double)v.hu[0], (double)v.hu[23]);
    }
    sim_volume_free(&v);
    tmp_dir_remove(&d);
}

/* Store test element i of datatype dt at b (host byte order); return its value. */
static double put_elem(unsigned char *b, int dt, int i)
{
    switch (dt) {
    case DT_UINT8: {
        uint8_t x = (uint8_t)(i * 10);
        memcpy(b, &x, 1);
        return x;
    }
    case DT_INT8: {
        int8_t x = (int8_t)(i * 5 - 60);
        memcpy(b, &x, 1);
        return x;
    }
    case DT_INT16: {
        int16_t x = (int16_t)(i * 1000 - 12000);
        memcpy(b, &x, 2);
        return x;
    }
    case DT_UINT16: {
        uint16_t x = (uint16_t)(i * 2800);
        memcpy(b, &x, 2);
        return x;
    }
    case DT_INT32: {
        int32_t x = i * 100000 - 1000000;
        memcpy(b, &x, 4);
        return x;
    }
    case DT_UINT32: {
        uint32_t x = (uint32_t)i * 150000000u; /* up to 3.45e9: above INT32_MAX */
        memcpy(b, &x, 4);
        return (double)x;
    }
    case DT_FLOAT32: {
        float x = (float)i * 0.25f - 2.0f;
        memcpy(b, &x, 4);
        return (double)x;
    }
    default: {
        double x = i * 0.125 - 1.0;
        memcpy(b, &x, 8);
        return x;
    }
    }
}

/* Every supported datatype decodes; 4D with nt = 1 is one volume. */
TEST(volume_io_nifti_datatypes)
{
    tmp_dir d;
    REQUIRE(tmp_dir_make(&d));
    char path[256];
    tmp_file(&d, "t.nii", path, sizeof path);
    static const struct {
        short dt, bits;
    } types[] = {{DT_UINT8, 8},  {DT_INT8, 8},    {DT_INT16, 16},   {DT_UINT16, 16},
                 {DT_INT32, 32}, {DT_UINT32, 32}, {DT_FLOAT32, 32}, {DT_FLOAT64, 64}};
    for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
        hand_nii h = hand_default(types[t].dt, types[t].bits);
        h.dim[0] = 4; /* nt = 1 */
        unsigned char data[24 * 8];
        double want[24];
        for (int i = 0; i < 24; i++) {
            unsigned char *b = data + (size_t)i * (size_t)(types[t].bits / 8);
            want[i] = put_elem(b, types[t].dt, i);
        }
        REQUIRE(write_nifti_by_hand(path, &h, data, (size_t)24 * (size_t)(types[t].bits / 8)));
        sim_volume v;
        char err[256] = "";
        sim_status st = sim_volume_load_nifti(&v, path, NULL, err, sizeof err);
        CHECKF(st == SIM_OK, "%s: status %d: %s", nifti_datatype_string(types[t].dt), st, err);
        if (st == SIM_OK) {
            int same = 1;
            for (int i = 0; i < 24; i++)
                same &= v.hu[i] == (float)want[i];
            CHECKF(same, "%s decoded wrong", nifti_datatype_string(types[t].dt));
        }
        sim_volume_free(&v);
    }
    /* 4D with two volumes is refused. */
    hand_nii h = hand_default(DT_UINT8, 8);
    h.dim[0] = 4;
    h.dim[4] = 2;
    unsigned char data[48] = {0};
    REQUIRE(write_nifti_by_hand(path, &h, data, sizeof data));
    sim_volume v;
    char err[256] = "";
    CHECK(sim_volume_load_nifti(&v, path, NULL, err, sizeof err) == SIM_ERR_FORMAT);
    CHECKF(strstr(err, path) && strstr(err, "dim[4] = 2"), "err: %s", err);
    CHECK(is_zeroed(&v));
    tmp_dir_remove(&d);
}

TEST(volume_io_nifti_float_nan)
{
    tmp_dir d;
    REQUIRE(tmp_dir_make(&d));
    char path[256];
    tmp_file(&d, "nan.nii", path, sizeof path);
    hand_nii h = hand_default(DT_FLOAT32, 32);
    float data[24];
    for (int i = 0; i < 24; i++)
        data[i] = (float)i;
    data[7] = NAN;
    data[9] = INFINITY;
    REQUIRE(write_nifti_by_hand(path, &h, data, sizeof data));
    sim_volume v;
    char err[256] = "";
    CHECK(sim_volume_load_nifti(&v, path, NULL, err, sizeof err) == SIM_ERR_FORMAT);
    /* Element 7 of a 4x3 slice: x=3, y=1, z=0. */
    CHECKF(strstr(err, path) && strstr(err, "element 7 ") && strstr(err, "NaN"), "err: %s", err);
    CHECK(is_zeroed(&v));
    /* A finite value that scaling sends out of float range is refused as well. */
    data[7] = 1e30f;
    data[9] = 0.0f;
    h.slope = 1e20f;
    REQUIRE(write_nifti_by_hand(path, &h, data, sizeof data));
    CHECK(sim_volume_load_nifti(&v, path, NULL, err, sizeof err) == SIM_ERR_FORMAT);
    CHECKF(strstr(err, "element 7 ") != NULL, "err: %s", err);
    /* A NaN slope is an error too, never "no scaling". */
    h.slope = NAN;
    data[7] = 0.0f;
    REQUIRE(write_nifti_by_hand(path, &h, data, sizeof data));
    CHECK(sim_volume_load_nifti(&v, path, NULL, err, sizeof err) == SIM_ERR_FORMAT);
    CHECKF(strstr(err, path) && strstr(err, "scl_slope"), "err: %s", err);
    tmp_dir_remove(&d);
}

TEST(volume_io_nifti_unsupported_datatype)
{
    tmp_dir d;
    REQUIRE(tmp_dir_make(&d));
    char path[256];
    tmp_file(&d, "cplx.nii", path, sizeof path);
    nifti_set_debug_level(0);
    int dims[8] = {3, 4, 3, 2, 1, 1, 1, 1};
    nifti_image *nim = nifti_make_new_nim(dims, DT_COMPLEX64, 1);
    REQUIRE(nim != NULL);
    int named = nifti_set_filenames(nim, path, 0, 1) == 0;
    if (named)
        nifti_image_write(nim);
    nifti_image_free(nim);
    REQUIRE(named && file_size(path) > 348);
    sim_volume v;
    char err[256] = "";
    CHECK(sim_volume_load_nifti(&v, path, NULL, err, sizeof err) == SIM_ERR_FORMAT);
    CHECKF(strstr(err, path) && strstr(err, "unsupported datatype COMPLEX64"), "err: %s", err);
    CHECK(is_zeroed(&v));
    /* RGB too. */
    hand_nii h = hand_default(DT_RGB24, 24);
    unsigned char data[72] = {0};
    REQUIRE(write_nifti_by_hand(path, &h, data, sizeof data));
    CHECK(sim_volume_load_nifti(&v, path, NULL, err, sizeof err) == SIM_ERR_FORMAT);
    CHECKF(strstr(err, "unsupported datatype RGB24") != NULL, "err: %s", err);
    tmp_dir_remove(&d);
}

TEST(volume_io_nifti_truncated)
{
    tmp_dir d;
    REQUIRE(tmp_dir_make(&d));
    char path[256], gz[256];
    tmp_file(&d, "cut.nii", path, sizeof path);
    tmp_file(&d, "cut.nii.gz", gz, sizeof gz);
    sim_volume v;
    char err[256] = "";
    /* .nii: 352 + 60*2 bytes; cut 10 from the data. */
    REQUIRE(write_nifti_i16(path, 1.0f, 0.0f));
    REQUIRE(file_size(path) == 352 + 120);
    REQUIRE(cut_file(path, 352 + 110));
    CHECK(sim_volume_load_nifti(&v, path, NULL, err, sizeof err) == SIM_ERR_FORMAT);
    CHECKF(strstr(err, path) && strstr(err, "truncated") && strstr(err, "462"), "err: %s", err);
    CHECK(is_zeroed(&v));
    /* .nii cut inside the header. */
    REQUIRE(cut_file(path, 200));
    CHECK(sim_volume_load_nifti(&v, path, NULL, err, sizeof err) == SIM_ERR_FORMAT);
    CHECKF(strstr(err, path) != NULL, "err: %s", err);
    /* .nii.gz: a random-ish 64 KiB volume, so the data does not compress to nothing and
     * the damage lands in the data, well past the header. */
    hand_nii h = hand_default(DT_INT16, 16);
    h.dim[1] = h.dim[2] = h.dim[3] = 32;
    int16_t *data = (int16_t *)calloc(32768, sizeof *data);
    REQUIRE(data != NULL);
    uint32_t s = 12345u;
    for (int i = 0; i < 32768; i++) {
        s = s * 1664525u + 1013904223u;
        data[i] = (int16_t)(s >> 20);
    }
    char plain[256];
    tmp_file(&d, "plain.nii", plain, sizeof plain);
    int wrote = write_nifti_by_hand(plain, &h, data, 32768 * sizeof *data);
    free(data);
    REQUIRE(wrote);
    REQUIRE(gzip_file(plain, gz));
    /* The intact .gz loads. */
    sim_status st = sim_volume_load_nifti(&v, gz, NULL, err, sizeof err);
    CHECKF(st == SIM_OK, "%s", err);
    sim_volume_free(&v);
    long gz_size = file_size(gz);
    REQUIRE(gz_size > 40000);
    /* Corrupt the deflate stream 3/4 in (zlib reports an error, not a short read). */
    {
        FILE *f = fopen(gz, "r+b");
        REQUIRE(f != NULL);
        unsigned char bad[64];
        memset(bad, 0xff, sizeof bad);
        int ok = fseek(f, gz_size / 4 * 3, SEEK_SET) == 0 && fwrite(bad, sizeof bad, 1, f) == 1;
        fclose(f);
        REQUIRE(ok);
    }
    CHECK(sim_volume_load_nifti(&v, gz, NULL, err, sizeof err) == SIM_ERR_FORMAT);
    CHECKF(strstr(err, gz) && strstr(err, "truncated or corrupt") && strstr(err, "elements"),
           "err: %s", err);
    CHECK(is_zeroed(&v));
    /* Rewrite it intact, then cut it in half. */
    REQUIRE(gzip_file(plain, gz));
    REQUIRE(file_size(gz) == gz_size);
    REQUIRE(cut_file(gz, gz_size / 2));
    CHECK(sim_volume_load_nifti(&v, gz, NULL, err, sizeof err) == SIM_ERR_FORMAT);
    CHECKF(strstr(err, gz) && strstr(err, "truncated or corrupt") && strstr(err, "elements"),
           "err: %s", err);
    CHECK(is_zeroed(&v));
    tmp_dir_remove(&d);
}

TEST(volume_io_nifti_garbage)
{
    tmp_dir d;
    REQUIRE(tmp_dir_make(&d));
    char path[256], gz[256], ext[256];
    tmp_file(&d, "junk.nii", path, sizeof path);
    tmp_file(&d, "junk.nii.gz", gz, sizeof gz);
    tmp_file(&d, "ct.dat", ext, sizeof ext);
    unsigned char junk[1000];
    uint32_t s = 99u;
    for (size_t i = 0; i < sizeof junk; i++) {
        s = s * 1103515245u + 12345u;
        junk[i] = (unsigned char)(s >> 16);
    }
    REQUIRE(write_bytes(path, junk, sizeof junk));
    REQUIRE(write_bytes(gz, junk, sizeof junk));
    REQUIRE(write_bytes(ext, junk, sizeof junk));
    sim_volume v;
    char err[256] = "";
    CHECK(sim_volume_load_nifti(&v, path, NULL, err, sizeof err) == SIM_ERR_FORMAT);
    CHECKF(strstr(err, path) != NULL, "err: %s", err);
    CHECK(is_zeroed(&v));
    CHECK(sim_volume_load_nifti(&v, gz, NULL, err, sizeof err) == SIM_ERR_FORMAT);
    CHECKF(strstr(err, gz) != NULL, "err: %s", err);
    CHECK(sim_volume_load_nifti(&v, ext, NULL, err, sizeof err) == SIM_ERR_FORMAT);
    CHECKF(strstr(err, ext) && strstr(err, ".nii"), "err: %s", err);
    /* An empty file. */
    REQUIRE(write_bytes(path, junk, 0));
    CHECK(sim_volume_load_nifti(&v, path, NULL, err, sizeof err) == SIM_ERR_FORMAT);
    CHECKF(strstr(err, path) != NULL, "err: %s", err);
    CHECK(is_zeroed(&v));
    tmp_dir_remove(&d);
}

TEST(volume_io_nifti_bad_header_fields)
{
    tmp_dir d;
    REQUIRE(tmp_dir_make(&d));
    char path[256];
    tmp_file(&d, "hdr.nii", path, sizeof path);
    unsigned char data[24] = {0};
    sim_volume v;
    char err[256] = "";
    /* dims 0 */
    hand_nii h = hand_default(DT_UINT8, 8);
    h.dim[1] = 0;
    REQUIRE(write_nifti_by_hand(path, &h, data, sizeof data));
    CHECK(sim_volume_load_nifti(&v, path, NULL, err, sizeof err) == SIM_ERR_FORMAT);
    CHECKF(strstr(err, path) && strstr(err, "dims 0x3x2: every axis must be >= 1"), "err: %s", err);
    CHECK(is_zeroed(&v));
    /* pixdim 0 */
    h = hand_default(DT_UINT8, 8);
    h.pixdim[2] = 0.0f;
    REQUIRE(write_nifti_by_hand(path, &h, data, sizeof data));
    CHECK(sim_volume_load_nifti(&v, path, NULL, err, sizeof err) == SIM_ERR_FORMAT);
    CHECKF(strstr(err, path) && strstr(err, "pixdim"), "err: %s", err);
    /* pixdim NaN */
    h.pixdim[2] = NAN;
    REQUIRE(write_nifti_by_hand(path, &h, data, sizeof data));
    CHECK(sim_volume_load_nifti(&v, path, NULL, err, sizeof err) == SIM_ERR_FORMAT);
    CHECKF(strstr(err, "pixdim") != NULL, "err: %s", err);
    /* a 2D image */
    h = hand_default(DT_UINT8, 8);
    h.dim[0] = 2;
    REQUIRE(write_nifti_by_hand(path, &h, data, sizeof data));
    CHECK(sim_volume_load_nifti(&v, path, NULL, err, sizeof err) == SIM_ERR_FORMAT);
    CHECKF(strstr(err, path) && strstr(err, "3D"), "err: %s", err);
    CHECK(is_zeroed(&v));
    tmp_dir_remove(&d);
}

TEST(volume_io_nifti_dims_over_limit)
{
    tmp_dir d;
    REQUIRE(tmp_dir_make(&d));
    char path[256];
    tmp_file(&d, "big.nii", path, sizeof path);
    REQUIRE(write_nifti_i16(path, 1.0f, 0.0f)); /* 5x4x3 */
    sim_volume v;
    char err[256] = "";
    sim_volume_limits lim = sim_default_volume_limits();
    lim.max_elements = 59;
    CHECK(sim_volume_load_nifti(&v, path, &lim, err, sizeof err) == SIM_ERR_LIMIT);
    CHECKF(strstr(err, path) && strstr(err, "60") && strstr(err, "59"), "err: %s", err);
    CHECK(is_zeroed(&v));
    lim = sim_default_volume_limits();
    lim.max_dim = 4;
    CHECK(sim_volume_load_nifti(&v, path, &lim, err, sizeof err) == SIM_ERR_LIMIT);
    CHECKF(strstr(err, "5x4x3") != NULL, "err: %s", err);
    lim.max_dim = 5;
    lim.max_elements = 60;
    sim_status st = sim_volume_load_nifti(&v, path, &lim, err, sizeof err);
    CHECKF(st == SIM_OK, "%s", err);
    sim_volume_free(&v);
    /* A header that claims 30000^3 float64 over a 400-byte file: refused from the header,
     * before any allocation (ASan would abort on a 216 TB request). */
    hand_nii h = hand_default(DT_FLOAT64, 64);
    h.dim[1] = h.dim[2] = h.dim[3] = 30000;
    unsigned char data[48] = {0};
    REQUIRE(write_nifti_by_hand(path, &h, data, sizeof data));
    CHECK(sim_volume_load_nifti(&v, path, NULL, err, sizeof err) == SIM_ERR_LIMIT);
    CHECKF(strstr(err, path) && strstr(err, "30000x30000x30000"), "err: %s", err);
    CHECK(is_zeroed(&v));
    /* Within max_dim but over max_elements. */
    h.dim[1] = h.dim[2] = h.dim[3] = 4000;
    REQUIRE(write_nifti_by_hand(path, &h, data, sizeof data));
    CHECK(sim_volume_load_nifti(&v, path, NULL, err, sizeof err) == SIM_ERR_LIMIT);
    CHECKF(strstr(err, "64000000000") != NULL, "err: %s", err);
    tmp_dir_remove(&d);
}

TEST(volume_io_nifti_missing_file)
{
    tmp_dir d;
    REQUIRE(tmp_dir_make(&d));
    char path[256], gz[256];
    tmp_file(&d, "absent.nii", path, sizeof path);
    tmp_file(&d, "absent.nii.gz", gz, sizeof gz);
    /* Only absent.nii.gz exists: asking for absent.nii must not pick it up. */
    REQUIRE(write_nifti_i16(gz, 1.0f, 0.0f));
    sim_volume v;
    char err[256] = "";
    CHECK(sim_volume_load_nifti(&v, path, NULL, err, sizeof err) == SIM_ERR_IO);
    CHECKF(strstr(err, path) && strstr(err, strerror(ENOENT)), "err: %s", err);
    CHECK(is_zeroed(&v));
    tmp_dir_remove(&d);
}

#else /* !SIM_HAVE_NIFTI */

TEST(volume_io_nifti_not_built)
{
    sim_volume v;
    char err[256] = "";
    CHECK(sim_volume_load_nifti(&v, "/tmp/any.nii", NULL, err, sizeof err) == SIM_ERR_FORMAT);
    CHECKF(strstr(err, "/tmp/any.nii") && strstr(err, "no NIfTI support"), "err: %s", err);
    CHECK(is_zeroed(&v));
    SKIP("built without the NIfTI C library: NIfTI loading tests skipped");
}

#endif

/* ------------------------------------------------------------ downsample */

TEST(volume_io_downsample_block_means)
{
    sim_volume in;
    memset(&in, 0, sizeof in);
    in.nx = in.ny = in.nz = 8;
    in.spacing_mm[0] = 1.0f;
    in.spacing_mm[1] = 2.0f;
    in.spacing_mm[2] = 0.5f;
    in.hu = (float *)calloc(512, sizeof(float));
    REQUIRE(in.hu != NULL);
    for (int z = 0; z < 8; z++)
        for (int y = 0; y < 8; y++)
            for (int x = 0; x < 8; x++)
                in.hu[x + 8 * (y + 8 * z)] = (float)(x + 10 * y + 100 * z);
    sim_volume out;
    char err[256] = "";
    sim_status st = sim_volume_downsample(&out, &in, 2, 2, 2, err, sizeof err);
    CHECKF(st == SIM_OK, "%s", err);
    if (st == SIM_OK) {
        CHECK(out.nx == 4 && out.ny == 4 && out.nz == 4);
        CHECK(out.spacing_mm[0] == 2.0f && out.spacing_mm[1] == 4.0f && out.spacing_mm[2] == 1.0f);
        float worst = 0.0f;
        for (int z = 0; z < 4; z++)
            for (int y = 0; y < 4; y++)
                for (int x = 0; x < 4; x++) {
                    float want = (2.0f * (float)x + 0.5f) + 10.0f * (2.0f * (float)y + 0.5f) +
                                 100.0f * (2.0f * (float)z + 0.5f);
                    worst = fmaxf(worst, fabsf(vol_at(&out, x, y, z) - want));
                }
        CHECKF(worst < 1e-4f, "worst error %g", (double)worst);
    }
    sim_volume_free(&out);
    sim_volume_free(&in);
}

TEST(volume_io_downsample_partial_blocks)
{
    sim_volume in;
    memset(&in, 0, sizeof in);
    in.nx = 7;
    in.ny = 2;
    in.nz = 3;
    in.spacing_mm[0] = in.spacing_mm[1] = in.spacing_mm[2] = 1.0f;
    in.hu = (float *)calloc(42, sizeof(float));
    REQUIRE(in.hu != NULL);
    for (int z = 0; z < 3; z++)
        for (int y = 0; y < 2; y++)
            for (int x = 0; x < 7; x++)
                in.hu[x + 7 * (y + 2 * z)] = (float)(x * x) + 1000.0f * (float)(y + 2 * z);
    sim_volume out;
    char err[256] = "";
    sim_status st = sim_volume_downsample(&out, &in, 3, 1, 1, err, sizeof err);
    CHECKF(st == SIM_OK, "%s", err);
    if (st == SIM_OK) {
        CHECK(out.nx == 3 && out.ny == 2 && out.nz == 3);
        CHECK(out.spacing_mm[0] == 3.0f && out.spacing_mm[1] == 1.0f);
        int ok = 1;
        for (int r = 0; r < 6; r++) {
            float base = 1000.0f * (float)r;
            ok &= fabsf(out.hu[3 * r + 0] - (base + 5.0f / 3.0f)) < 1e-3f;  /* (0+1+4)/3 */
            ok &= fabsf(out.hu[3 * r + 1] - (base + 50.0f / 3.0f)) < 1e-3f; /* (9+16+25)/3 */
            ok &= out.hu[3 * r + 2] == base + 36.0f;                        /* x = 6 alone */
        }
        CHECK(ok);
    }
    sim_volume_free(&out);
    /* Partial blocks along every axis: 7x2x3 by 2,2,2 -> 4x1x2; the corner holds 1x2x1. */
    st = sim_volume_downsample(&out, &in, 2, 2, 2, err, sizeof err);
    CHECKF(st == SIM_OK, "%s", err);
    if (st == SIM_OK) {
        CHECK(out.nx == 4 && out.ny == 1 && out.nz == 2);
        /* x = 6, y = 0..1, z = 2: 36 + 1000*(4, 5) -> mean 36 + 4500 */
        CHECK(fabsf(vol_at(&out, 3, 0, 1) - 4536.0f) < 1e-3f);
    }
    sim_volume_free(&out);
    sim_volume_free(&in);
}

TEST(volume_io_downsample_bad_args)
{
    sim_volume in;
    char err[256] = "";
    REQUIRE(sim_volume_phantom(&in, 8, 8, 8, err, sizeof err) == SIM_OK);
    sim_volume out;
    CHECK(sim_volume_downsample(&out, &in, 0, 1, 1, err, sizeof err) == SIM_ERR_ARG);
    CHECKF(strstr(err, "downsample") && strstr(err, "0x1x1"), "err: %s", err);
    CHECK(is_zeroed(&out));
    CHECK(sim_volume_downsample(&out, &in, 1, 1, -2, err, sizeof err) == SIM_ERR_ARG);
    CHECK(is_zeroed(&out));
    CHECK(sim_volume_downsample(&in, &in, 2, 2, 2, err, sizeof err) == SIM_ERR_ARG);
    CHECK(in.hu != NULL && in.nx == 8); /* the input survives */
    sim_volume empty;
    memset(&empty, 0, sizeof empty);
    CHECK(sim_volume_downsample(&out, &empty, 2, 2, 2, err, sizeof err) == SIM_ERR_ARG);
    /* Factor 1 is a copy; a factor larger than the axis leaves one element. */
    sim_status st = sim_volume_downsample(&out, &in, 1, 1, 1, err, sizeof err);
    CHECKF(st == SIM_OK, "%s", err);
    if (st == SIM_OK)
        CHECK(memcmp(out.hu, in.hu, vol_n(&in) * sizeof(float)) == 0);
    sim_volume_free(&out);
    st = sim_volume_downsample(&out, &in, 100, 1, 1, err, sizeof err);
    CHECKF(st == SIM_OK && out.nx == 1 && out.ny == 8, "%s", err);
    sim_volume_free(&out);
    sim_volume_free(&in);
}

/* The 512x512x300 -> 128x128x75 case, shrunk to fit an ASan test: 64x64x60 by 4. */
TEST(volume_io_downsample_64x64x60_by_4)
{
    sim_volume in, out;
    char err[256] = "";
    REQUIRE(sim_volume_phantom(&in, 64, 64, 60, err, sizeof err) == SIM_OK);
    sim_status st = sim_volume_downsample(&out, &in, 4, 4, 4, err, sizeof err);
    CHECKF(st == SIM_OK, "%s", err);
    if (st == SIM_OK) {
        CHECK(out.nx == 16 && out.ny == 16 && out.nz == 15);
        CHECK(out.spacing_mm[0] == in.spacing_mm[0] * 4.0f &&
              out.spacing_mm[1] == in.spacing_mm[1] * 4.0f &&
              out.spacing_mm[2] == in.spacing_mm[2] * 4.0f);
        /* Exact blocks: the means of the two volumes agree. */
        double a = 0.0, b = 0.0;
        for (size_t i = 0; i < vol_n(&in); i++)
            a += (double)in.hu[i];
        for (size_t i = 0; i < vol_n(&out); i++)
            b += (double)out.hu[i];
        a /= (double)vol_n(&in);
        b /= (double)vol_n(&out);
        CHECKF(fabs(a - b) < 1e-3, "mean %.5f vs %.5f", a, b);
        /* One block by hand. */
        double s = 0.0;
        for (int z = 20; z < 24; z++)
            for (int y = 28; y < 32; y++)
                for (int x = 36; x < 40; x++)
                    s += (double)vol_at(&in, x, y, z);
        CHECK(fabs((double)vol_at(&out, 9, 7, 5) - s / 64.0) < 1e-3);
        CHECK(sim_volume_validate(&out, NULL, "downsampled", err, sizeof err) == SIM_OK);
    }
    sim_volume_free(&out);
    sim_volume_free(&in);
}

/* ------------------------------------------------------------ validate */

TEST(volume_io_validate)
{
    sim_volume v;
    char err[256] = "";
    REQUIRE(sim_volume_phantom(&v, 16, 12, 10, err, sizeof err) == SIM_OK);
    CHECK(sim_volume_validate(&v, NULL, "ph", err, sizeof err) == SIM_OK);
    /* NaN at (3, 2, 1): index 3 + 16*(2 + 12*1) = 227. */
    float keep = v.hu[227];
    v.hu[227] = NAN;
    CHECK(sim_volume_validate(&v, NULL, "ph", err, sizeof err) == SIM_ERR_FORMAT);
    CHECKF(strstr(err, "ph:") && strstr(err, "element 227 (x=3, y=2, z=1) is NaN"), "err: %s", err);
    v.hu[227] = -INFINITY;
    CHECK(sim_volume_validate(&v, NULL, "ph", err, sizeof err) == SIM_ERR_FORMAT);
    CHECKF(strstr(err, "infinite") != NULL, "err: %s", err);
    v.hu[227] = keep;
    v.spacing_mm[1] = 0.0f;
    CHECK(sim_volume_validate(&v, NULL, "ph", err, sizeof err) == SIM_ERR_ARG);
    CHECKF(strstr(err, "spacing") != NULL, "err: %s", err);
    v.spacing_mm[1] = 1.0f;
    sim_volume_limits lim = sim_default_volume_limits();
    lim.max_elements = 1000;
    CHECK(sim_volume_validate(&v, &lim, "ph", err, sizeof err) == SIM_ERR_LIMIT);
    CHECKF(strstr(err, "1920") && strstr(err, "1000"), "err: %s", err);
    int nz = v.nz;
    v.nz = 0;
    CHECK(sim_volume_validate(&v, NULL, NULL, err, sizeof err) == SIM_ERR_ARG);
    CHECKF(strstr(err, "volume") != NULL, "err: %s", err);
    v.nz = nz;
    CHECK(sim_volume_validate(NULL, NULL, "ph", err, sizeof err) == SIM_ERR_ARG);
    CHECK(sim_volume_validate(&v, NULL, "ph", NULL, 0) == SIM_OK);
    sim_volume_free(&v);
}
