/* test_dicom.c: DICOM series read through GDCM (sim_volume_load_dicom, and
 * sim_volume_load_file's folders, single files and zips), on series written here by GDCM
 * (tests/sim/dicom_writer.cpp) with every value known: a synthetic anatomy whose value
 * tells the three axes apart, int16 with a rescale slope and intercept, stored axial in
 * LPS (and coronal), uncompressed and JPEG 2000 lossless, files written in a shuffled order
 * under shuffled names. Each load is checked against the anatomy and against the same
 * voxels written as NIfTI with the matching affine and read by sim_volume_load_nifti. */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sim/volume/volume.h"
#include "tests/harness.h"
#include "tests/sim/dicom_writer.h"

#if SIM_HAVE_DICOM
#include <zip.h>
#endif
#if SIM_HAVE_NIFTI
#include <nifti1_io.h>
#endif

#if SIM_HAVE_DICOM

#define PATIENT_NAME "DOE^JANE"
#define PATIENT_ID   "PID-7731"

/* A series: cols x rows x n slices, row and column directions (LPS), spacing, first
 * position; slice k's stored value at (i, j) is anatomy(i, j, k) + shift. */
typedef struct series {
    int cols, rows, n;
    double r[3], c[3], ps[2], dz, origin[3];
    const char *uid;
    int jpeg2000, shift;
} series;

static series axial(const char *uid, int n)
{
    series s = {12, 10, n, {1, 0, 0}, {0, 1, 0}, {0.8, 0.6}, 2.5, {-50, -40, 100}, uid, 0, 0};
    return s;
}

/* Stored value: each axis its own weight (i by 1, j by 20, k by 300) plus 12. */
static int16_t anatomy(const series *s, int i, int j, int k)
{
    return (int16_t)(12 + i + 20 * j + 300 * k + s->shift);
}

static void normal_of(const series *s, double n[3])
{
    n[0] = s->r[1] * s->c[2] - s->r[2] * s->c[1];
    n[1] = s->r[2] * s->c[0] - s->r[0] * s->c[2];
    n[2] = s->r[0] * s->c[1] - s->r[1] * s->c[0];
}

static tw_dicom_slice slice_of(const series *s, int k, int16_t *px)
{
    tw_dicom_slice d;
    memset(&d, 0, sizeof d);
    double n[3];
    normal_of(s, n);
    d.cols = s->cols, d.rows = s->rows, d.pixels = px;
    for (int a = 0; a < 3; a++) {
        d.ipp[a] = s->origin[a] + k * s->dz * n[a];
        d.iop[a] = s->r[a], d.iop[3 + a] = s->c[a];
    }
    d.ps[0] = s->ps[0], d.ps[1] = s->ps[1];
    d.slope = 2.0, d.intercept = -1024.0, d.has_ipp = 1;
    d.series_uid = s->uid, d.instance = k + 1, d.jpeg2000 = s->jpeg2000;
    d.patient_name = PATIENT_NAME, d.patient_id = PATIENT_ID;
    for (int j = 0; j < s->rows; j++)
        for (int i = 0; i < s->cols; i++)
            px[i + s->cols * j] = anatomy(s, i, j, k);
    return d;
}

/* Hook for a malformed series: change slice k before it is written (0: skip the slice). */
typedef int (*slice_edit)(tw_dicom_slice *d, int k);

/* Write the series into dir, slices in a shuffled order under shuffled names (prefix keeps
 * two series apart). */
static int write_series(const char *dir, const char *prefix, const series *s, slice_edit edit)
{
    int16_t *px = malloc((size_t)s->cols * (size_t)s->rows * 2 + 64);
    int ok = px != NULL;
    for (int q = 0; ok && q < s->n; q++) {
        int k = (q * 5 + 3) % s->n; /* n not a multiple of 5: a permutation */
        tw_dicom_slice d = slice_of(s, k, px);
        if (edit && !edit(&d, k))
            continue;
        char path[512];
        snprintf(path, sizeof path, "%s/%s%03d%s", dir, prefix, (k * 37 + 11) % 97,
                 k % 2 ? ".dcm" : "");
        ok = tw_dicom_write(path, &d);
    }
    free(px);
    return ok;
}

static int make_dir(char *out, size_t out_sz, const char *tag)
{
    snprintf(out, out_sz, "/tmp/softcast_dcm_%s_XXXXXX", tag);
    return mkdtemp(out) != NULL;
}

static void remove_tree(const char *path)
{
    struct stat st;
    if (lstat(path, &st) != 0)
        return;
    if (S_ISDIR(st.st_mode)) {
        DIR *d = opendir(path);
        struct dirent *e;
        while (d && (e = readdir(d)) != NULL) {
            if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
                continue;
            char p[1024];
            snprintf(p, sizeof p, "%s/%s", path, e->d_name);
            remove_tree(p);
        }
        if (d)
            closedir(d);
        rmdir(path);
    } else {
        unlink(path);
    }
}

static int count_entries(const char *dir)
{
    DIR *d = opendir(dir);
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL)
        n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
    if (d)
        closedir(d);
    return n;
}

/* 1 when dir/name holds the bytes of text. */
static int file_has(const char *dir, const char *name, const char *text)
{
    char p[512];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    FILE *f = fopen(p, "rb");
    static char buf[1 << 16];
    size_t n = f ? fread(buf, 1, sizeof buf, f) : 0, k = strlen(text);
    if (f)
        fclose(f);
    for (size_t i = 0; i + k <= n; i++)
        if (!memcmp(buf + i, text, k))
            return 1;
    return 0;
}

static float at(const sim_volume *v, int x, int y, int z)
{
    return v->hu[(size_t)x + (size_t)v->nx * ((size_t)y + (size_t)v->ny * (size_t)z)];
}

static int no_identifiers(const char *s)
{
    return !strstr(s, "DOE") && !strstr(s, "JANE") && !strstr(s, PATIENT_ID);
}

static int same_volume(const sim_volume *a, const sim_volume *b)
{
    if (a->nx != b->nx || a->ny != b->ny || a->nz != b->nz ||
        strcmp(a->orientation, b->orientation))
        return 0;
    for (int i = 0; i < 3; i++)
        if (a->spacing_mm[i] != b->spacing_mm[i])
            return 0;
    size_t n = (size_t)a->nx * a->ny * a->nz;
    return !memcmp(a->hu, b->hu, n * sizeof *a->hu);
}

#if SIM_HAVE_NIFTI
/* The same voxels as NIfTI (int16, the same slope and intercept), its sform the DICOM
 * geometry turned from LPS to RAS (x and y negated). */
static int write_nifti_twin(const char *path, const series *s)
{
    nifti_set_debug_level(0);
    int dims[8] = {3, s->cols, s->rows, s->n, 1, 1, 1, 1};
    nifti_image *nim = nifti_make_new_nim(dims, DT_INT16, 1);
    if (!nim)
        return 0;
    int16_t *p = (int16_t *)nim->data;
    for (int k = 0; k < s->n; k++)
        for (int j = 0; j < s->rows; j++)
            for (int i = 0; i < s->cols; i++)
                p[i + s->cols * (j + s->rows * k)] = anatomy(s, i, j, k);
    nim->scl_slope = 2.0f, nim->scl_inter = -1024.0f;
    nim->dx = nim->pixdim[1] = (float)s->ps[1];
    nim->dy = nim->pixdim[2] = (float)s->ps[0];
    nim->dz = nim->pixdim[3] = (float)s->dz;
    nim->xyz_units = NIFTI_UNITS_MM;
    double n[3];
    normal_of(s, n);
    nim->sform_code = NIFTI_XFORM_SCANNER_ANAT;
    for (int w = 0; w < 3; w++) {
        double sg = w < 2 ? -1.0 : 1.0;
        nim->sto_xyz.m[w][0] = (float)(sg * s->r[w] * s->ps[1]);
        nim->sto_xyz.m[w][1] = (float)(sg * s->c[w] * s->ps[0]);
        nim->sto_xyz.m[w][2] = (float)(sg * n[w] * s->dz);
        nim->sto_xyz.m[w][3] = (float)(sg * s->origin[w]);
    }
    nim->sto_xyz.m[3][3] = 1.0f;
    int ok = nifti_set_filenames(nim, path, 0, 1) == 0;
    if (ok)
        nifti_image_write(nim);
    nifti_image_free(nim);
    return ok;
}
#endif

/* Axial and coronal, uncompressed and JPEG 2000: the anatomy in RAS, exactly (lossless),
 * the spacing from PixelSpacing and the positions, and equal to the NIfTI twin. */
TEST(dicom_series_reads_as_its_nifti_twin_uncompressed_and_jpeg2000)
{
    for (int cor = 0; cor < 2; cor++)
        for (int j2k = 0; j2k < 2; j2k++) {
            char dir[128], err[512] = "";
            REQUIRE(make_dir(dir, sizeof dir, "twin"));
            series s = axial("1.2.826.0.1.3680043.8.498.10", 7);
            s.jpeg2000 = j2k;
            if (cor) /* coronal: columns run toward the feet, slices toward the back */
                s.c[1] = 0.0, s.c[2] = -1.0;
            REQUIRE(write_series(dir, "im", &s, NULL));
            CHECKF(file_has(dir, "im025.dcm", "1.2.840.10008.1.2.4.90") == j2k,
                   "the JPEG 2000 lossless syntax %s the file", j2k ? "missing from" : "in");
            sim_volume v;
            sim_volume_info info;
            memset(&info, 0, sizeof info);
            sim_status st = sim_volume_load_dicom(&v, dir, NULL, NULL, &info, err, sizeof err);
            CHECKF(st == SIM_OK, "%s %s: %s", cor ? "coronal" : "axial", j2k ? "j2k" : "raw", err);
            if (st != SIM_OK) {
                remove_tree(dir);
                continue;
            }
            CHECK(!strcmp(info.format, "dicom") && !strcmp(info.modality, "CT"));
            CHECK(info.slice_count == 7 && info.series_count == 1);
            CHECK(!strcmp(info.series_uid, s.uid));
            CHECKF(!strcmp(v.orientation, cor ? "LIP" : "LPS"), "orientation %s", v.orientation);
            if (!cor) {
                CHECKF(v.nx == 12 && v.ny == 10 && v.nz == 7, "dims %dx%dx%d", v.nx, v.ny, v.nz);
                CHECKF(v.spacing_mm[0] == 0.6f && v.spacing_mm[1] == 0.8f &&
                           v.spacing_mm[2] == 2.5f,
                       "spacing %g %g %g", (double)v.spacing_mm[0], (double)v.spacing_mm[1],
                       (double)v.spacing_mm[2]);
                int wrong = 0; /* RAS x = reversed i (i runs to the left), y = reversed j */
                for (int z = 0; z < 7 && v.nx == 12 && v.ny == 10 && v.nz == 7; z++)
                    for (int y = 0; y < 10; y++)
                        for (int x = 0; x < 12; x++)
                            wrong += at(&v, x, y, z) !=
                                     2.0f * (float)anatomy(&s, 11 - x, 9 - y, z) - 1024.0f;
                CHECKF(wrong == 0, "%d voxels off the anatomy", wrong);
            } else {
                CHECKF(v.nx == 12 && v.ny == 7 && v.nz == 10, "dims %dx%dx%d", v.nx, v.ny, v.nz);
            }
#if SIM_HAVE_NIFTI
            char nii[256];
            snprintf(nii, sizeof nii, "%s/twin.nii", dir);
            REQUIRE(write_nifti_twin(nii, &s));
            sim_volume t;
            REQUIRE(sim_volume_load_nifti(&t, nii, NULL, err, sizeof err) == SIM_OK);
            CHECKF(same_volume(&v, &t), "%s %s: not the NIfTI twin (%dx%dx%d %s vs %dx%dx%d %s)",
                   cor ? "coronal" : "axial", j2k ? "j2k" : "raw", v.nx, v.ny, v.nz, v.orientation,
                   t.nx, t.ny, t.nz, t.orientation);
            sim_volume_free(&t);
#endif
            sim_volume_free(&v);
            remove_tree(dir);
        }
}

/* Each slice its own intercept, so a reader that took one frame's rescale for all is seen. */
static int own_rescale(tw_dicom_slice *d, int k)
{
    d->intercept = -1024.0 + 10.0 * k;
    return 1;
}

/* The series as one multi-frame file in dir (enhanced.dcm), its frames in a shuffled order:
 * placed (Enhanced CT) or a cine (no positions). */
static int write_multiframe(const char *dir, const series *s, int placed, slice_edit edit)
{
    size_t plane = (size_t)s->cols * (size_t)s->rows;
    int16_t *px = malloc(plane * 2 * (size_t)s->n + 64);
    tw_dicom_slice *f = calloc((size_t)s->n, sizeof *f);
    int ok = px && f;
    for (int q = 0; ok && q < s->n; q++) {
        int k = (q * 5 + 3) % s->n;
        f[q] = slice_of(s, k, px + plane * (size_t)q);
        if (edit)
            edit(&f[q], k);
        f[q].instance = 1;
    }
    char path[512];
    snprintf(path, sizeof path, "%s/enhanced.dcm", dir);
    ok = ok && tw_dicom_write_multiframe(path, f, s->n, placed);
    free(px);
    free(f);
    return ok;
}

/* A series as scanners export Enhanced CT: one file of frames, each placed by its functional
 * groups (position and rescale per frame, orientation and spacing shared), stored out of
 * order, uncompressed and JPEG 2000: the same volume as the series one slice a file. A cine
 * (frames without positions: X-ray angiography) is refused as such, ours and GDCM's own
 * example when Debian installed it. */
TEST(dicom_enhanced_multiframe_reads_as_its_single_frame_twin)
{
    for (int j2k = 0; j2k < 2; j2k++) {
        char one[128], multi[128], err[512] = "";
        REQUIRE(make_dir(one, sizeof one, "single") && make_dir(multi, sizeof multi, "multi"));
        series s = axial("1.2.826.0.1.3680043.8.498.60", 7);
        s.jpeg2000 = j2k;
        s.c[1] = 0.0, s.c[2] = -1.0; /* coronal: columns toward the feet */
        REQUIRE(write_series(one, "im", &s, own_rescale));
        REQUIRE(write_multiframe(multi, &s, 1, own_rescale));
        CHECK(file_has(multi, "enhanced.dcm", "1.2.840.10008.5.1.4.1.1.2.1"));
        CHECKF(file_has(multi, "enhanced.dcm", "1.2.840.10008.1.2.4.90") == j2k,
               "the JPEG 2000 lossless syntax %s the file", j2k ? "missing from" : "in");
        sim_volume a, b;
        sim_volume_info ia, ib;
        memset(&ia, 0, sizeof ia);
        memset(&ib, 0, sizeof ib);
        REQUIRE(sim_volume_load_dicom(&a, one, NULL, NULL, &ia, err, sizeof err) == SIM_OK);
        sim_status st = sim_volume_load_dicom(&b, multi, NULL, NULL, &ib, err, sizeof err);
        CHECKF(st == SIM_OK, "%s: %s", j2k ? "j2k" : "raw", err);
        if (st == SIM_OK) {
            CHECKF(same_volume(&a, &b),
                   "%s: not its single-frame twin (%dx%dx%d %s vs %dx%dx%d %s)",
                   j2k ? "j2k" : "raw", b.nx, b.ny, b.nz, b.orientation, a.nx, a.ny, a.nz,
                   a.orientation);
            CHECKF(b.spacing_mm[0] == a.spacing_mm[0] && b.spacing_mm[1] == a.spacing_mm[1] &&
                       b.spacing_mm[2] == a.spacing_mm[2],
                   "spacing %g %g %g, its twin's %g %g %g", (double)b.spacing_mm[0],
                   (double)b.spacing_mm[1], (double)b.spacing_mm[2], (double)a.spacing_mm[0],
                   (double)a.spacing_mm[1], (double)a.spacing_mm[2]);
            CHECKF(ib.slice_count == 7 && ib.series_count == 1 && !strcmp(ib.modality, "CT"),
                   "slices %d series %d modality %s", ib.slice_count, ib.series_count, ib.modality);
            sim_volume_free(&b);
        }
        sim_volume_free(&a);
        remove_tree(one);
        remove_tree(multi);
    }
    char dir[128], err[512] = "";
    REQUIRE(make_dir(dir, sizeof dir, "cine"));
    series s = axial("1.2.826.0.1.3680043.8.498.61", 7);
    REQUIRE(write_multiframe(dir, &s, 0, NULL));
    sim_volume v;
    sim_status st = sim_volume_load_dicom(&v, dir, NULL, NULL, NULL, err, sizeof err);
    CHECKF(st == SIM_ERR_FORMAT &&
               strstr(err, "instance 1 holds 7 frames without a position each (modality XA)") &&
               no_identifiers(err),
           "status %d: %s", st, err);
    remove_tree(dir);
    const char *gdcm_xa = "/usr/share/doc/libgdcm3.0/examples/00191113.dcm";
    if (access(gdcm_xa, R_OK) != 0) {
        th_note("%s not installed: GDCM's own cine not tried", gdcm_xa);
        return;
    }
    REQUIRE(make_dir(dir, sizeof dir, "gdcmxa"));
    char cmd[512];
    snprintf(cmd, sizeof cmd, "cp '%s' '%s/'", gdcm_xa, dir);
    REQUIRE(system(cmd) == 0);
    st = sim_volume_load_dicom(&v, dir, NULL, NULL, NULL, err, sizeof err);
    CHECKF(st == SIM_ERR_FORMAT &&
               strstr(err, "holds 4 frames without a position each (modality XA)"),
           "status %d: %s", st, err);
    remove_tree(dir);
}

/* One file that holds a whole series (Enhanced CT), uploaded twice: the server's folder of
 * uploads then holds two copies. Read alone (dicom_file_alone, as the server reads users'
 * files) each is its series; read as a slice of its folder's series (the default, for a
 * file given on a command line) the copies are duplicates. */
TEST(dicom_one_file_read_alone_beside_a_copy_of_itself)
{
    char dir[128], path[256], copy[300], cmd[700], err[512] = "";
    REQUIRE(make_dir(dir, sizeof dir, "alone"));
    series s = axial("1.2.826.0.1.3680043.8.498.62", 7);
    REQUIRE(write_multiframe(dir, &s, 1, NULL));
    snprintf(path, sizeof path, "%s/enhanced.dcm", dir);
    snprintf(copy, sizeof copy, "%s/upload-2.dcm", dir);
    snprintf(cmd, sizeof cmd, "cp '%s' '%s'", path, copy);
    REQUIRE(system(cmd) == 0);
    sim_volume_load_opts o = sim_default_volume_load_opts();
    o.fit_elements = 0;
    o.air_margin = 0;
    o.keep_all = 1;
    sim_volume v;
    sim_volume_info info;
    memset(&info, 0, sizeof info);
    o.dicom_file_alone = 1;
    sim_status st = sim_volume_load_file(&v, copy, &o, &info, err, sizeof err);
    CHECKF(st == SIM_OK, "alone: %s", err);
    if (st == SIM_OK) {
        CHECKF(v.nx == 12 && v.ny == 10 && v.nz == 7, "dims %dx%dx%d", v.nx, v.ny, v.nz);
        CHECKF(!strcmp(info.source, "one file") && info.slice_count == 7, "source %s, %d slices",
               info.source, info.slice_count);
        sim_volume_free(&v);
    }
    memset(&info, 0, sizeof info);
    o.dicom_file_alone = 0;
    st = sim_volume_load_file(&v, copy, &o, &info, err, sizeof err);
    CHECKF(st == SIM_ERR_FORMAT && strstr(err, "duplicate slices: instance 1 frame"),
           "with its folder: status %d: %s", st, err);
    remove_tree(dir);
}

/* Two series in one folder (one in a subfolder): the larger by default, the other by its
 * UID, an unknown UID refused with those found; a single file reads its own series. */
TEST(dicom_two_series_largest_by_default_other_by_uid)
{
    char dir[128], sub[192], err[512] = "";
    REQUIRE(make_dir(dir, sizeof dir, "two"));
    snprintf(sub, sizeof sub, "%s/second", dir);
    REQUIRE(mkdir(sub, 0700) == 0);
    series a = axial("1.2.826.0.1.3680043.8.498.21", 7),
           b = axial("1.2.826.0.1.3680043.8.498.22", 4);
    b.shift = 5;
    REQUIRE(write_series(dir, "a", &a, NULL));
    REQUIRE(write_series(sub, "b", &b, NULL));
    sim_volume v;
    sim_volume_info info;
    memset(&info, 0, sizeof info);
    REQUIRE(sim_volume_load_dicom(&v, dir, NULL, NULL, &info, err, sizeof err) == SIM_OK);
    CHECK(v.nz == 7 && info.series_count == 2 && !strcmp(info.series_uid, a.uid));
    CHECK(info.skipped_files == 4);
    sim_volume_free(&v);
    memset(&info, 0, sizeof info);
    REQUIRE(sim_volume_load_dicom(&v, dir, b.uid, NULL, &info, err, sizeof err) == SIM_OK);
    CHECK(v.nz == 4 && !strcmp(info.series_uid, b.uid));
    CHECK(at(&v, 11, 9, 0) == 2.0f * (float)anatomy(&b, 0, 0, 0) - 1024.0f);
    sim_volume_free(&v);
    sim_status st = sim_volume_load_dicom(&v, dir, "9.9.9", NULL, NULL, err, sizeof err);
    CHECKF(st != SIM_OK && strstr(err, "no series with UID 9.9.9") &&
               strstr(err, "1.2.826.0.1.3680043.8.498.21 (7 slices)") &&
               strstr(err, "1.2.826.0.1.3680043.8.498.22 (4 slices)"),
           "err: %s", err);
    /* One file of the smaller series (.dcm), through sim_volume_load_file: its series. */
    char one[512];
    snprintf(one, sizeof one, "%s/b%03d.dcm", sub, (1 * 37 + 11) % 97);
    sim_volume_load_opts o = sim_default_volume_load_opts();
    o.fit_elements = 0, o.air_margin = 0, o.keep_all = 1;
    memset(&info, 0, sizeof info);
    st = sim_volume_load_file(&v, one, &o, &info, err, sizeof err);
    CHECKF(st == SIM_OK && v.nz == 4 && !strcmp(info.series_uid, b.uid), "err: %s", err);
    CHECKF(strstr(info.source, "read from its folder") != NULL, "source: %s", info.source);
    sim_volume_free(&v);
    /* A file without the .dcm name, told by its DICM magic. */
    snprintf(one, sizeof one, "%s/b%03d", sub, (2 * 37 + 11) % 97);
    st = sim_volume_load_file(&v, one, &o, &info, err, sizeof err);
    CHECKF(st == SIM_OK && v.nz == 4, "err: %s", err);
    sim_volume_free(&v);
    remove_tree(dir);
}

/* ------------------------------------------------------------ malformed */

static int drop_4(tw_dicom_slice *d, int k)
{
    (void)d;
    return k != 4;
}
static int dup_2(tw_dicom_slice *d, int k)
{
    if (k == 3) /* slice 3 written at slice 2's place */
        d->ipp[2] -= 2.5;
    return 1;
}
static int uneven(tw_dicom_slice *d, int k)
{
    if (k >= 3) /* 2.5 mm apart, then one gap of 3 */
        d->ipp[2] += 0.5;
    return 1;
}
static int tilt(tw_dicom_slice *d, int k)
{
    d->ipp[1] += 0.5 * k; /* advancing 0.5 mm posterior a slice: 11 degrees */
    return 1;
}
static int small_last(tw_dicom_slice *d, int k)
{
    if (k == 6)
        d->rows = 8;
    return 1;
}
static int no_position(tw_dicom_slice *d, int k)
{
    d->has_ipp = k != 2;
    return 1;
}
static int report(tw_dicom_slice *d, int k)
{
    (void)k;
    d->no_pixels = 1;
    return 1;
}

/* Each malformed series is refused with its own message, which names no patient. */
TEST(dicom_malformed_series_refused_by_name)
{
    const struct {
        const char *name;
        slice_edit edit;
        const char *want;
    } cases[] = {
        {"missing", drop_4, "missing slices: a gap of 5.00 mm"},
        {"duplicate", dup_2, "duplicate slices: instances"},
        {"uneven", uneven, "uneven spacing: slices 2.500, 3.000 mm apart"},
        {"tilt", tilt, "gantry tilt: the slices advance 11.31 degrees"},
        {"sizes", small_last, "mixed sizes: slices of 12x10 and 12x8"},
        {"noipp", no_position, "instance 3 has no ImagePositionPatient"},
        {"report", report, "no image data: its 7 DICOM files hold no images"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        char dir[128], err[512] = "";
        REQUIRE(make_dir(dir, sizeof dir, cases[c].name));
        series s = axial("1.2.826.0.1.3680043.8.498.30", 7);
        REQUIRE(write_series(dir, "x", &s, cases[c].edit));
        sim_volume v;
        sim_status st = sim_volume_load_dicom(&v, dir, NULL, NULL, NULL, err, sizeof err);
        CHECKF(st == SIM_ERR_FORMAT && strstr(err, cases[c].want) && strstr(err, dir),
               "%s: status %d, err: %s", cases[c].name, st, err);
        CHECKF(no_identifiers(err), "%s: a patient identifier in: %s", cases[c].name, err);
        CHECK(v.hu == NULL && v.nx == 0);
        remove_tree(dir);
    }
}

/* An empty folder, a folder of no DICOM, sizes over the limits (refused from the headers),
 * and a file of no known kind naming DICOM among what to give. */
TEST(dicom_empty_not_dicom_and_over_limits_refused)
{
    char dir[128], path[256], err[512] = "";
    REQUIRE(make_dir(dir, sizeof dir, "empty"));
    sim_volume v;
    CHECK(sim_volume_load_dicom(&v, dir, NULL, NULL, NULL, err, sizeof err) == SIM_ERR_FORMAT);
    CHECKF(strstr(err, "an empty folder") != NULL, "err: %s", err);
    snprintf(path, sizeof path, "%s/notes.txt", dir);
    FILE *f = fopen(path, "w");
    REQUIRE(f);
    fputs("not an image\n", f);
    fclose(f);
    CHECK(sim_volume_load_dicom(&v, dir, NULL, NULL, NULL, err, sizeof err) == SIM_ERR_FORMAT);
    CHECKF(strstr(err, "not DICOM: none of its 1 files") != NULL, "err: %s", err);
    CHECK(sim_volume_load_file(&v, path, NULL, NULL, err, sizeof err) == SIM_ERR_FORMAT);
    CHECKF(strstr(err, "not a volume this server reads") && strstr(err, "DICOM series"), "err: %s",
           err);
    unlink(path);
    series s = axial("1.2.826.0.1.3680043.8.498.40", 7);
    REQUIRE(write_series(dir, "x", &s, NULL));
    sim_volume_limits lim = {12 * 10 * 6, 0};
    CHECK(sim_volume_load_dicom(&v, dir, NULL, &lim, NULL, err, sizeof err) == SIM_ERR_LIMIT);
    CHECKF(strstr(err, "dims 12x10x7: 840 elements exceed the limit 720") != NULL, "err: %s", err);
    lim.max_elements = 0, lim.max_dim = 11;
    CHECK(sim_volume_load_dicom(&v, dir, NULL, &lim, NULL, err, sizeof err) == SIM_ERR_LIMIT);
    CHECKF(strstr(err, "longer than the limit 11") != NULL, "err: %s", err);
    remove_tree(dir);
}

/* ------------------------------------------------------------ zip */

/* Zip every file of dir (flat) into zip_path, plus extra entries: a name, its bytes (NULL:
 * `big` zero bytes), and a link flag. */
typedef struct extra_entry {
    const char *name;
    const char *text;
    size_t big;
    int link;
} extra_entry;

static int zip_folder(const char *dir, const char *zip_path, const extra_entry *x, int nx)
{
    int code;
    zip_t *z = zip_open(zip_path, ZIP_CREATE | ZIP_TRUNCATE, &code);
    if (!z)
        return 0;
    DIR *d = dir ? opendir(dir) : NULL;
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        char p[512], name[600];
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        snprintf(name, sizeof name, "series/%s", e->d_name);
        zip_source_t *src = zip_source_file(z, p, 0, -1);
        if (!src || zip_file_add(z, name, src, 0) < 0)
            return zip_discard(z), 0;
    }
    if (d)
        closedir(d);
    void *zeros = NULL;
    for (int i = 0; i < nx; i++) {
        const void *buf = x[i].text;
        size_t n = x[i].text ? strlen(x[i].text) : x[i].big;
        if (!x[i].text)
            buf = zeros = calloc(1, n);
        zip_source_t *src = zip_source_buffer(z, buf, n, 0);
        zip_int64_t at = src ? zip_file_add(z, x[i].name, src, 0) : -1;
        if (at < 0)
            return zip_discard(z), 0;
        if (x[i].link)
            zip_file_set_external_attributes(z, (zip_uint64_t)at, 0, ZIP_OPSYS_UNIX,
                                             (zip_uint32_t)0120777 << 16 /* a Unix link */);
    }
    int ok = zip_close(z) == 0;
    free(zeros);
    return ok;
}

/* A .zip of a series reads as its folder; a zip with a "../" entry, a link, or a bomb is
 * refused with its message; the private temporary folder is gone after each. */
TEST(dicom_zip_read_as_its_folder_traversal_links_and_bombs_refused)
{
    char dir[128], tmp[128], zp[256], err[512] = "";
    REQUIRE(make_dir(dir, sizeof dir, "zipsrc"));
    REQUIRE(make_dir(tmp, sizeof tmp, "ziptmp"));
    series s = axial("1.2.826.0.1.3680043.8.498.50", 7);
    s.jpeg2000 = 1;
    REQUIRE(write_series(dir, "z", &s, NULL));
    char *old_tmp = getenv("TMPDIR") ? strdup(getenv("TMPDIR")) : NULL;
    setenv("TMPDIR", tmp, 1);
    sim_volume_load_opts o = sim_default_volume_load_opts();
    o.fit_elements = 0, o.air_margin = 0, o.keep_all = 1;
    sim_volume v, ref;
    sim_volume_info info;
    REQUIRE(sim_volume_load_dicom(&ref, dir, NULL, NULL, NULL, err, sizeof err) == SIM_OK);
    snprintf(zp, sizeof zp, "%s.zip", dir);
    const extra_entry readme = {"series/README.txt", "exported\n", 0, 0};
    REQUIRE(zip_folder(dir, zp, &readme, 1));
    sim_status st = sim_volume_load_file(&v, zp, &o, &info, err, sizeof err);
    CHECKF(st == SIM_OK, "err: %s", err);
    if (st == SIM_OK) {
        CHECK(same_volume(&v, &ref) && !strcmp(info.format, "dicom"));
        CHECKF(strstr(info.source, "a .zip of 8 entries") != NULL, "source: %s", info.source);
        sim_volume_free(&v);
    }
    CHECKF(count_entries(tmp) == 0, "%d left in the temporary folder", count_entries(tmp));
    const struct {
        extra_entry e;
        const char *want;
    } bad[] = {
        {{"series/../../evil.dcm", "x", 0, 0}, "named outside the folder"},
        {{"/etc/evil.dcm", "x", 0, 0}, "named outside the folder"},
        {{"series/link.dcm", "/etc/passwd", 0, 1}, "is a symbolic link: refused"},
        {{"series/bomb.dcm", NULL, (size_t)64 << 20, 0}, "a zip bomb: entry 7 expands"},
    };
    for (size_t b = 0; b < sizeof bad / sizeof bad[0]; b++) {
        REQUIRE(zip_folder(dir, zp, &bad[b].e, 1));
        st = sim_volume_load_file(&v, zp, &o, &info, err, sizeof err);
        CHECKF(st != SIM_OK && strstr(err, bad[b].want) && strstr(err, zp), "%s: err: %s",
               bad[b].e.name, err);
        CHECKF(count_entries(tmp) == 0, "%s: %d left in the temporary folder", bad[b].e.name,
               count_entries(tmp));
    }
    /* A file of another kind named .zip (a NIfTI's first bytes): said in words, not by
     * libzip's error number. */
    FILE *f = fopen(zp, "wb");
    REQUIRE(f != NULL);
    unsigned char nifti_start[512] = {0x5c, 0x01}; /* sizeof_hdr 348, little-endian */
    fwrite(nifti_start, 1, sizeof nifti_start, f);
    fclose(f);
    st = sim_volume_load_file(&v, zp, &o, &info, err, sizeof err);
    CHECKF(st == SIM_ERR_FORMAT && strstr(err, "not a zip archive, though named .zip") &&
               !strstr(err, "libzip error"),
           "err: %s", err);
    /* Past the caller's total: refused from the headers. */
    REQUIRE(zip_folder(dir, zp, NULL, 0));
    o.zip_max_bytes = 1000;
    st = sim_volume_load_file(&v, zp, &o, &info, err, sizeof err);
    CHECKF(st == SIM_ERR_LIMIT && strstr(err, "more than 1000 bytes uncompressed"), "err: %s", err);
    CHECK(count_entries(tmp) == 0);
    if (old_tmp) {
        setenv("TMPDIR", old_tmp, 1);
        free(old_tmp);
    } else {
        unsetenv("TMPDIR");
    }
    sim_volume_free(&ref);
    unlink(zp);
    remove_tree(dir);
    remove_tree(tmp);
}

#else

TEST(dicom_series_reads_as_its_nifti_twin_uncompressed_and_jpeg2000)
{
    sim_volume v;
    char err[512];
    CHECK(sim_volume_load_dicom(&v, "/tmp", NULL, NULL, NULL, err, sizeof err) == SIM_ERR_FORMAT);
    CHECK(strstr(err, "no DICOM support") != NULL);
    SKIP("built without GDCM and libzip (SIM_HAVE_DICOM): install libgdcm-dev libzip-dev");
}

#endif
