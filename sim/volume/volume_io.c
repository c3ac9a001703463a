/* volume_io.c: CT volumes in, checked: NIfTI-1, raw int16, block-average downsampling,
 * fitting to a budget and validation (the procedural phantom is in phantom.c).
 *
 * Loaders: every error names the file and the problem; on error *out is left zeroed.
 * Statuses: a missing or unreadable file SIM_ERR_IO; a bad header, size or value
 * SIM_ERR_FORMAT; dims over lim SIM_ERR_LIMIT; bad caller arguments (raw dims < 1,
 * spacing) SIM_ERR_ARG. lim NULL, or a zero field in it, means the default.
 * NIfTI-1 (.nii, .nii.gz) is read through the NIfTI C library's znzlib stream on exactly
 * the given path: the 348-byte nifti_1_header (swap_nifti_header for the other byte
 * order), every header field checked against the limits before the voxel buffer is
 * allocated, then the data streamed in 1 MiB chunks and decoded here byte by byte. We do
 * not use nifti_image_read/nifti_image_load: they silently turn NaN/Inf voxels and a NaN
 * scl_slope into 0, and nifti_read_header opens x.nii.gz when asked for a missing x.nii;
 * this loader must report those instead. The lattice is then turned to RAS (x toward the
 * patient's right, y anterior, z superior: z up) by the file's sform, or its qform when the
 * sform's code is 0: each lattice axis goes to the patient axis its direction is nearest
 * (nifti_mat44_to_orientation), permuted and flipped exactly, so the same anatomy stored in
 * any axis order reads the same. A file with neither code keeps its stored order.
 */
#include "volume.h"

#include <errno.h>
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../core/sc_base.h"
#include "volume_internal.h"

#if SIM_HAVE_NIFTI
#include <nifti1_io.h>
#endif

enum { SIM_DEFAULT_MAX_DIM = 4096 };
#define SIM_DEFAULT_MAX_ELEMENTS ((size_t)128 << 20)

sim_volume_limits sim_default_volume_limits(void)
{
    sim_volume_limits lim;
    lim.max_elements = SIM_DEFAULT_MAX_ELEMENTS;
    lim.max_dim = SIM_DEFAULT_MAX_DIM;
    return lim;
}

/* NULL means defaults; so does a zero field, so a zeroed struct is usable. */
static sim_volume_limits effective_limits(const sim_volume_limits *lim)
{
    sim_volume_limits d = sim_default_volume_limits();
    if (lim) {
        if (lim->max_elements > 0)
            d.max_elements = lim->max_elements;
        if (lim->max_dim > 0)
            d.max_dim = lim->max_dim;
    }
    return d;
}

/* Dims against limits. bad_dim_status: what a dim < 1 is (an argument or a file fault). */
static sim_status check_dims(const char *name, long long nx, long long ny, long long nz,
                             const sim_volume_limits *lim, sim_status bad_dim_status, char *err,
                             size_t err_sz)
{
    if (nx < 1 || ny < 1 || nz < 1)
        return sc_fail(err, err_sz, bad_dim_status,
                       "%s: dims %lldx%lldx%lld: every axis must be >= 1", name, nx, ny, nz);
    if (nx > lim->max_dim || ny > lim->max_dim || nz > lim->max_dim)
        return sc_fail(err, err_sz, SIM_ERR_LIMIT,
                       "%s: dims %lldx%lldx%lld: an axis is longer than the limit %d", name, nx, ny,
                       nz, lim->max_dim);
    /* Each factor is <= max_dim <= INT_MAX < 2^31: nx*ny fits in 64 bits, the third
     * factor may not. */
    unsigned long long n = (unsigned long long)nx * (unsigned long long)ny;
    int overflow = n > ULLONG_MAX / (unsigned long long)nz;
    n *= (unsigned long long)nz;
    if (overflow)
        return sc_fail(err, err_sz, SIM_ERR_LIMIT,
                       "%s: dims %lldx%lldx%lld: the element count overflows 64 bits", name, nx, ny,
                       nz);
    if (n > (unsigned long long)lim->max_elements)
        return sc_fail(err, err_sz, SIM_ERR_LIMIT,
                       "%s: dims %lldx%lldx%lld: %llu elements exceed the limit %zu", name, nx, ny,
                       nz, n, lim->max_elements);
    return SIM_OK;
}

static int spacing_ok(float s)
{
    return isfinite(s) && s > 0.0f;
}

static sim_status check_spacing(const char *name, const float sp[3], sim_status status, char *err,
                                size_t err_sz)
{
    if (!spacing_ok(sp[0]) || !spacing_ok(sp[1]) || !spacing_ok(sp[2]))
        return sc_fail(err, err_sz, status,
                       "%s: spacing %g x %g x %g mm: each must be finite and > 0", name,
                       (double)sp[0], (double)sp[1], (double)sp[2]);
    return SIM_OK;
}

static size_t volume_count(const sim_volume *v)
{
    return (size_t)v->nx * (size_t)v->ny * (size_t)v->nz;
}

/* Report element i of an nx x ny volume as its index and its coordinates. */
static sim_status bad_value(const char *name, size_t i, int nx, int ny, const char *what, char *err,
                            size_t err_sz)
{
    size_t plane = (size_t)nx * (size_t)ny;
    return sc_fail(err, err_sz, SIM_ERR_FORMAT, "%s: element %zu (x=%zu, y=%zu, z=%zu) is %s", name,
                   i, i % (size_t)nx, (i % plane) / (size_t)nx, i / plane, what);
}

static const char *nonfinite_name(double d)
{
    return isnan(d) ? "NaN" : "infinite";
}

void sim_volume_free(sim_volume *v)
{
    if (!v)
        return;
    free(v->hu);
    memset(v, 0, sizeof *v);
}

sim_status sim_volume_validate(const sim_volume *v, const sim_volume_limits *lim, const char *name,
                               char *err, size_t err_sz)
{
    const char *nm = name ? name : "volume";
    if (!v)
        return sc_fail(err, err_sz, SIM_ERR_ARG, "%s: volume is NULL", nm);
    sim_volume_limits l = effective_limits(lim);
    sim_status st = check_dims(nm, v->nx, v->ny, v->nz, &l, SIM_ERR_ARG, err, err_sz);
    if (st != SIM_OK)
        return st;
    st = check_spacing(nm, v->spacing_mm, SIM_ERR_ARG, err, err_sz);
    if (st != SIM_OK)
        return st;
    if (!v->hu)
        return sc_fail(err, err_sz, SIM_ERR_ARG, "%s: hu is NULL", nm);
    size_t n = volume_count(v);
    for (size_t i = 0; i < n; i++)
        if (!isfinite(v->hu[i]))
            return bad_value(nm, i, v->nx, v->ny, nonfinite_name((double)v->hu[i]), err, err_sz);
    return SIM_OK;
}

/* ------------------------------------------------------------------ raw int16 */

/* stat() a file that must exist and be a regular file. */
static sim_status stat_regular(const char *path, struct stat *st, char *err, size_t err_sz)
{
    if (stat(path, st) != 0)
        return sc_fail(err, err_sz, SIM_ERR_IO, "%s: %s", path, strerror(errno));
    if (!S_ISREG(st->st_mode))
        return sc_fail(err, err_sz, SIM_ERR_IO, "%s: not a regular file", path);
    return SIM_OK;
}

sim_status sim_volume_load_raw_i16(sim_volume *out, const char *path, int nx, int ny, int nz,
                                   const float spacing_mm[3], const sim_volume_limits *lim,
                                   char *err, size_t err_sz)
{
    const char *name = path ? path : "raw";
    if (!out)
        return sc_fail(err, err_sz, SIM_ERR_ARG, "%s: out is NULL", name);
    memset(out, 0, sizeof *out);
    if (!path)
        return sc_fail(err, err_sz, SIM_ERR_ARG, "raw: path is NULL");
    if (!spacing_mm)
        return sc_fail(err, err_sz, SIM_ERR_ARG, "%s: spacing is NULL", path);
    sim_volume_limits l = effective_limits(lim);
    sim_status st = check_dims(path, nx, ny, nz, &l, SIM_ERR_ARG, err, err_sz);
    if (st != SIM_OK)
        return st;
    st = check_spacing(path, spacing_mm, SIM_ERR_ARG, err, err_sz);
    if (st != SIM_OK)
        return st;
    struct stat sb;
    st = stat_regular(path, &sb, err, err_sz);
    if (st != SIM_OK)
        return st;
    size_t n = (size_t)nx * (size_t)ny * (size_t)nz;
    unsigned long long want = (unsigned long long)n * 2u;
    unsigned long long have = (unsigned long long)sb.st_size;
    if (have < want)
        return sc_fail(err, err_sz, SIM_ERR_FORMAT,
                       "%s: truncated: %dx%dx%d int16 needs %llu bytes, the file has %llu", path,
                       nx, ny, nz, want, have);
    if (have > want)
        return sc_fail(err, err_sz, SIM_ERR_FORMAT,
                       "%s: has %llu extra bytes: %dx%dx%d int16 needs %llu bytes, the file "
                       "has %llu",
                       path, have - want, nx, ny, nz, want, have);
    FILE *f = fopen(path, "rb");
    if (!f)
        return sc_fail(err, err_sz, SIM_ERR_IO, "%s: %s", path, strerror(errno));
    float *hu = (float *)sc_calloc(n, sizeof *hu);
    if (!hu) {
        fclose(f);
        return sc_fail(err, err_sz, SIM_ERR_NOMEM, "%s: out of memory for %zu elements", path, n);
    }
    unsigned char buf[1 << 14];
    size_t done = 0;
    while (done < n) {
        size_t want_n = n - done < sizeof buf / 2 ? n - done : sizeof buf / 2;
        size_t got = fread(buf, 2, want_n, f);
        /* Little-endian on disk, decoded by hand so the host's byte order is irrelevant. */
        for (size_t k = 0; k < got; k++) {
            int32_t v = (int32_t)buf[2 * k] | ((int32_t)buf[2 * k + 1] << 8);
            if (v >= 32768)
                v -= 65536;
            hu[done + k] = (float)v;
        }
        done += got;
        if (got < want_n) {
            int e = ferror(f) ? errno : 0;
            fclose(f);
            free(hu);
            return sc_fail(err, err_sz, SIM_ERR_IO, "%s: short read at element %zu of %zu%s%s",
                           path, done, n, e ? ": " : " (file shrank?)", e ? strerror(e) : "");
        }
    }
    fclose(f);
    out->nx = nx;
    out->ny = ny;
    out->nz = nz;
    memcpy(out->spacing_mm, spacing_mm, sizeof out->spacing_mm);
    out->hu = hu;
    return SIM_OK;
}

/* ------------------------------------------------------------------ NIfTI-1 */

#if SIM_HAVE_NIFTI

_Static_assert(sizeof(nifti_1_header) == 348, "nifti_1_header must be the 348 on-disk bytes");

/* Bytes per element of the datatypes we load; 0 for the rest. */
static int nifti_elem_bytes(int datatype)
{
    switch (datatype) {
    case DT_UINT8:
    case DT_INT8:
        return 1;
    case DT_INT16:
    case DT_UINT16:
        return 2;
    case DT_INT32:
    case DT_UINT32:
    case DT_FLOAT32:
        return 4;
    case DT_FLOAT64:
        return 8;
    default:
        return 0;
    }
}

/* One element of nbyper bytes in the file's byte order, as an unsigned integer. */
static uint64_t load_uint(const unsigned char *b, int nbyper, int little_endian)
{
    uint64_t v = 0;
    for (int k = 0; k < nbyper; k++) {
        int idx = little_endian ? nbyper - 1 - k : k;
        v = (v << 8) | b[idx];
    }
    return v;
}

static double decode_elem(const unsigned char *b, int datatype, int little_endian)
{
    switch (datatype) {
    case DT_UINT8:
        return (double)b[0];
    case DT_INT8:
        return (double)((int)b[0] - (b[0] >= 128 ? 256 : 0));
    case DT_UINT16:
        return (double)load_uint(b, 2, little_endian);
    case DT_INT16: {
        int32_t v = (int32_t)load_uint(b, 2, little_endian);
        return (double)(v >= 32768 ? v - 65536 : v);
    }
    case DT_UINT32:
        return (double)load_uint(b, 4, little_endian);
    case DT_INT32: {
        int64_t v = (int64_t)load_uint(b, 4, little_endian);
        return (double)(v >= 2147483648LL ? v - 4294967296LL : v);
    }
    case DT_FLOAT32: {
        uint32_t u = (uint32_t)load_uint(b, 4, little_endian);
        float f;
        memcpy(&f, &u, sizeof f);
        return (double)f;
    }
    case DT_FLOAT64: {
        uint64_t u = load_uint(b, 8, little_endian);
        double d;
        memcpy(&d, &u, sizeof d);
        return d;
    }
    default:
        return 0.0; /* unreachable: the datatype was checked */
    }
}

/* Header checks, in the order a reader of the message would want them. Fills the dims,
 * element size, spacing and data offset. */
static sim_status nifti_check_header(const char *path, const nifti_1_header *h,
                                     const sim_volume_limits *lim, long long size_on_disk, int gz,
                                     int dims[3], int *nbyper, float spacing[3], long long *offset,
                                     char *err, size_t err_sz)
{
    if (h->sizeof_hdr != 348)
        return sc_fail(err, err_sz, SIM_ERR_FORMAT,
                       "%s: not a NIfTI-1 file (sizeof_hdr %d, expected 348)", path, h->sizeof_hdr);
    if (memcmp(h->magic, "ni1", 4) == 0)
        return sc_fail(err, err_sz, SIM_ERR_FORMAT,
                       "%s: a two-file NIfTI-1 header (.hdr/.img): only single-file .nii or "
                       ".nii.gz is supported",
                       path);
    if (memcmp(h->magic, "n+1", 4) != 0)
        return sc_fail(err, err_sz, SIM_ERR_FORMAT,
                       "%s: not a NIfTI-1 file (no \"n+1\" magic; ANALYZE 7.5 is not supported)",
                       path);
    int ndim = h->dim[0];
    if (ndim < 1 || ndim > 7)
        return sc_fail(err, err_sz, SIM_ERR_FORMAT, "%s: dim[0] = %d: must be 1..7", path, ndim);
    if (ndim < 3)
        return sc_fail(err, err_sz, SIM_ERR_FORMAT, "%s: a %dD image: need a 3D volume", path,
                       ndim);
    sim_status st =
        check_dims(path, h->dim[1], h->dim[2], h->dim[3], lim, SIM_ERR_FORMAT, err, err_sz);
    if (st != SIM_OK)
        return st;
    for (int d = 4; d <= ndim; d++)
        if (h->dim[d] != 1)
            return sc_fail(err, err_sz, SIM_ERR_FORMAT,
                           "%s: a %dD image with dim[%d] = %d: need a single 3D volume (3D, "
                           "or 4D with nt = 1)",
                           path, ndim, d, h->dim[d]);
    int nb = nifti_elem_bytes(h->datatype);
    if (nb == 0)
        return sc_fail(err, err_sz, SIM_ERR_FORMAT,
                       "%s: unsupported datatype %s (code %d): need uint8, int8, int16, uint16, "
                       "int32, uint32, float32 or float64",
                       path, nifti_datatype_string(h->datatype), h->datatype);
    float scale = 1.0f;
    switch (XYZT_TO_SPACE(h->xyzt_units)) {
    case NIFTI_UNITS_METER:
        scale = 1000.0f;
        break;
    case NIFTI_UNITS_MICRON:
        scale = 0.001f;
        break;
    default:
        break; /* mm, or unknown: NIfTI readers take unknown as mm */
    }
    for (int a = 0; a < 3; a++)
        spacing[a] = h->pixdim[a + 1] * scale;
    if (!spacing_ok(h->pixdim[1]) || !spacing_ok(h->pixdim[2]) || !spacing_ok(h->pixdim[3]) ||
        !spacing_ok(spacing[0]) || !spacing_ok(spacing[1]) || !spacing_ok(spacing[2]))
        return sc_fail(err, err_sz, SIM_ERR_FORMAT,
                       "%s: pixdim %g x %g x %g: spacing must be finite and > 0", path,
                       (double)h->pixdim[1], (double)h->pixdim[2], (double)h->pixdim[3]);
    if (!isfinite(h->scl_slope))
        return sc_fail(err, err_sz, SIM_ERR_FORMAT, "%s: scl_slope is %s", path,
                       nonfinite_name((double)h->scl_slope));
    if (h->scl_slope != 0.0f && !isfinite(h->scl_inter))
        return sc_fail(err, err_sz, SIM_ERR_FORMAT, "%s: scl_inter is %s", path,
                       nonfinite_name((double)h->scl_inter));
    float vo = h->vox_offset;
    if (!isfinite(vo) || vo < 352.0f || vo > 1e12f || vo != floorf(vo))
        return sc_fail(err, err_sz, SIM_ERR_FORMAT,
                       "%s: vox_offset %g: must be a whole number >= 352", path, (double)vo);
    unsigned long long n = (unsigned long long)h->dim[1] * (unsigned long long)h->dim[2] *
                           (unsigned long long)h->dim[3];
    unsigned long long need = (unsigned long long)vo + n * (unsigned long long)nb;
    if (!gz && need > (unsigned long long)size_on_disk)
        return sc_fail(err, err_sz, SIM_ERR_FORMAT,
                       "%s: truncated: the header needs %llu bytes (offset %.0f + %llu elements "
                       "x %d bytes), the file has %lld",
                       path, need, (double)vo, n, nb, size_on_disk);
    dims[0] = h->dim[1];
    dims[1] = h->dim[2];
    dims[2] = h->dim[3];
    *nbyper = nb;
    *offset = (long long)vo;
    return SIM_OK;
}

/* Stream the data in chunks, decode, scale, check finite. */
static sim_status nifti_read_data(const char *path, znzFile fp, const nifti_1_header *h,
                                  int little_endian, int nbyper, const int dims[3], float *hu,
                                  char *err, size_t err_sz)
{
    size_t n = (size_t)dims[0] * (size_t)dims[1] * (size_t)dims[2];
    double slope = (double)h->scl_slope, inter = (double)h->scl_inter;
    int scaled = h->scl_slope != 0.0f; /* slope 0: no scaling, per the NIfTI-1 standard */
    unsigned char *buf = (unsigned char *)sc_calloc((size_t)1 << 20, 1);
    if (!buf)
        return sc_fail(err, err_sz, SIM_ERR_NOMEM, "%s: out of memory for a read buffer", path);
    size_t per_chunk = ((size_t)1 << 20) / (size_t)nbyper;
    size_t done = 0;
    sim_status st = SIM_OK;
    while (done < n && st == SIM_OK) {
        size_t want = n - done < per_chunk ? n - done : per_chunk;
        size_t got = znzread(buf, (size_t)nbyper, want, fp);
        /* znzread hands back gzread's -1 as a huge size_t on a corrupt stream. */
        if (got != want) {
            if (got > want)
                st = sc_fail(err, err_sz, SIM_ERR_FORMAT,
                             "%s: truncated or corrupt: read error after %zu of %zu elements", path,
                             done, n);
            else
                st = sc_fail(err, err_sz, SIM_ERR_FORMAT,
                             "%s: truncated or corrupt: read %zu of %zu elements", path, done + got,
                             n);
            break;
        }
        for (size_t k = 0; k < got; k++) {
            double d = decode_elem(buf + k * (size_t)nbyper, h->datatype, little_endian);
            if (scaled)
                d = d * slope + inter;
            if (!isfinite(d) || d > (double)FLT_MAX || d < -(double)FLT_MAX) {
                st = bad_value(path, done + k, dims[0], dims[1],
                               isnan(d)   ? (scaled ? "NaN after scaling" : "NaN")
                               : isinf(d) ? (scaled ? "infinite after scaling" : "infinite")
                                          : "outside the float range",
                               err, err_sz);
                break;
            }
            hu[done + k] = (float)d;
        }
        done += got;
    }
    free(buf);
    return st;
}

/* The affine from the lattice to the patient (RAS mm) the header gives: its sform when
 * sform_code is set, else its qform; 0 when it gives neither. */
static int nifti_affine(const nifti_1_header *h, mat44 *m)
{
    memset(m, 0, sizeof *m);
    if (h->sform_code > 0) {
        for (int c = 0; c < 4; c++)
            m->m[0][c] = h->srow_x[c], m->m[1][c] = h->srow_y[c], m->m[2][c] = h->srow_z[c];
        m->m[3][3] = 1.0f;
        return 1;
    }
    if (h->qform_code > 0) {
        float qfac = h->pixdim[0] < 0.0f ? -1.0f : 1.0f; /* 0 is read as 1, as the library does */
        *m = nifti_quatern_to_mat44(h->quatern_b, h->quatern_c, h->quatern_d, h->qoffset_x,
                                    h->qoffset_y, h->qoffset_z, h->pixdim[1], h->pixdim[2],
                                    h->pixdim[3], qfac);
        return 1;
    }
    return 0;
}

/* Turn v (as stored) to the RAS lattice by h's affine (vol_to_ras). */
static sim_status nifti_to_ras(const char *path, const nifti_1_header *h, sim_volume *v, char *err,
                               size_t err_sz)
{
    mat44 m;
    if (!nifti_affine(h, &m))
        return SIM_OK;
    double dir[9];
    for (int w = 0; w < 3; w++)
        for (int a = 0; a < 3; a++)
            dir[3 * w + a] = (double)m.m[w][a];
    char what[600];
    snprintf(what, sizeof what, "%s: the %s", path, h->sform_code > 0 ? "sform" : "qform");
    return vol_to_ras(v, dir, what, err, err_sz);
}

#endif /* SIM_HAVE_NIFTI */

#if SIM_HAVE_NIFTI
/* A NIfTI file opened on exactly its path, its header read and checked. */
typedef struct nifti_file {
    znzFile fp;
    nifti_1_header h;
    int swapped; /* the header (and so the data) has the other byte order */
    int dims[3], nbyper;
    float spacing[3];
    long long offset;
} nifti_file;

/* Open path and check its header against lim before anything big is allocated. partial: the
 * file is still arriving, so the size its header needs is not checked against the disk. */
static sim_status nifti_open(nifti_file *nf, const char *path, const sim_volume_limits *lim,
                             int partial, char *err, size_t err_sz)
{
    memset(nf, 0, sizeof *nf);
    struct stat sb;
    sim_status st = stat_regular(path, &sb, err, err_sz);
    if (st != SIM_OK)
        return st;
    int gz = vol_ends_with_ci(path, ".nii.gz");
    if (!gz && !vol_ends_with_ci(path, ".nii"))
        return sc_fail(err, err_sz, SIM_ERR_FORMAT, "%s: expected a .nii or .nii.gz file", path);
    if (gz && !nifti_compiled_with_zlib())
        return sc_fail(err, err_sz, SIM_ERR_FORMAT,
                       "%s: this NIfTI library was built without zlib: cannot read .nii.gz", path);
    /* One stream for header and data, on exactly this path. */
    nf->fp = znzopen(path, "rb", gz);
    if (znz_isnull(nf->fp))
        return sc_fail(err, err_sz, SIM_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    size_t got = znzread(&nf->h, 1, sizeof nf->h, nf->fp);
    if (got != sizeof nf->h) {
        znzclose(nf->fp);
        if (got > sizeof nf->h) /* gzread's -1 */
            return sc_fail(err, err_sz, SIM_ERR_FORMAT,
                           "%s: truncated or corrupt: read error in the header", path);
        return sc_fail(err, err_sz, SIM_ERR_FORMAT,
                       "%s: truncated or corrupt: read %zu of the %zu header bytes", path, got,
                       sizeof nf->h);
    }
    /* A header written on a host of the other byte order reads sizeof_hdr swapped. */
    if (nf->h.sizeof_hdr != 348) {
        nifti_1_header t = nf->h;
        swap_nifti_header(&t, 1);
        if (t.sizeof_hdr == 348) {
            nf->h = t;
            nf->swapped = 1;
        }
    }
    /* Every header check before the big allocation. */
    sim_volume_limits l = effective_limits(lim);
    st = nifti_check_header(path, &nf->h, &l, partial ? LLONG_MAX : (long long)sb.st_size, gz,
                            nf->dims, &nf->nbyper, nf->spacing, &nf->offset, err, err_sz);
    if (st != SIM_OK)
        znzclose(nf->fp);
    return st;
}
#endif /* SIM_HAVE_NIFTI */

sim_status sim_volume_check_nifti(const char *path, const sim_volume_limits *lim, int partial,
                                  int dims[3], char *err, size_t err_sz)
{
#if !SIM_HAVE_NIFTI
    (void)lim, (void)partial, (void)dims;
    return sc_fail(err, err_sz, SIM_ERR_FORMAT,
                   "%s: this build has no NIfTI support (built without the NIfTI C library, "
                   "nifti1_io.h)",
                   path);
#else
    nifti_file nf;
    sim_status st = nifti_open(&nf, path, lim, partial, err, err_sz);
    if (st != SIM_OK)
        return st;
    znzclose(nf.fp);
    memcpy(dims, nf.dims, sizeof nf.dims);
    return SIM_OK;
#endif
}

sim_status sim_volume_load_nifti(sim_volume *out, const char *path, const sim_volume_limits *lim,
                                 char *err, size_t err_sz)
{
    const char *name = path ? path : "nifti";
    if (!out)
        return sc_fail(err, err_sz, SIM_ERR_ARG, "%s: out is NULL", name);
    memset(out, 0, sizeof *out);
    if (!path)
        return sc_fail(err, err_sz, SIM_ERR_ARG, "nifti: path is NULL");
#if !SIM_HAVE_NIFTI
    (void)lim;
    return sc_fail(err, err_sz, SIM_ERR_FORMAT,
                   "%s: this build has no NIfTI support (built without the NIfTI C library, "
                   "nifti1_io.h)",
                   path);
#else
    nifti_file nf;
    sim_status st = nifti_open(&nf, path, lim, 0, err, err_sz);
    if (st != SIM_OK)
        return st;
    size_t n = (size_t)nf.dims[0] * (size_t)nf.dims[1] * (size_t)nf.dims[2];
    float *hu = (float *)sc_calloc(n, sizeof *hu);
    if (!hu) {
        znzclose(nf.fp);
        return sc_fail(err, err_sz, SIM_ERR_NOMEM, "%s: out of memory for %zu elements", path, n);
    }
    if (znzseek(nf.fp, (znz_off_t)nf.offset, SEEK_SET) < 0) {
        znzclose(nf.fp);
        free(hu);
        return sc_fail(err, err_sz, SIM_ERR_FORMAT,
                       "%s: truncated or corrupt: cannot seek to the data at byte %lld", path,
                       nf.offset);
    }
    /* The data has the header's byte order; the header was swapped iff it differs from
     * the host's. */
    const uint16_t probe = 1;
    unsigned char probe_lo;
    memcpy(&probe_lo, &probe, 1);
    int host_le = probe_lo == 1;
    int file_le = nf.swapped ? !host_le : host_le;
    st = nifti_read_data(path, nf.fp, &nf.h, file_le, nf.nbyper, nf.dims, hu, err, err_sz);
    znzclose(nf.fp);
    if (st != SIM_OK) {
        free(hu);
        return st;
    }
    out->nx = nf.dims[0];
    out->ny = nf.dims[1];
    out->nz = nf.dims[2];
    memcpy(out->spacing_mm, nf.spacing, sizeof out->spacing_mm);
    out->hu = hu;
    st = nifti_to_ras(path, &nf.h, out, err, err_sz);
    if (st != SIM_OK)
        sim_volume_free(out);
    return st;
#endif
}

/* ------------------------------------------------------------------ downsample */

sim_status sim_volume_downsample(sim_volume *out, const sim_volume *in, int fx, int fy, int fz,
                                 char *err, size_t err_sz)
{
    if (!out)
        return sc_fail(err, err_sz, SIM_ERR_ARG, "downsample: out is NULL");
    /* Zeroing *out first would wipe the input when they alias. */
    if (out == in)
        return sc_fail(err, err_sz, SIM_ERR_ARG, "downsample: out must not be the input");
    memset(out, 0, sizeof *out);
    if (!in || !in->hu)
        return sc_fail(err, err_sz, SIM_ERR_ARG, "downsample: input volume is empty");
    if (fx < 1 || fy < 1 || fz < 1)
        return sc_fail(err, err_sz, SIM_ERR_ARG, "downsample: factors %dx%dx%d: each must be >= 1",
                       fx, fy, fz);
    sim_volume_limits l = effective_limits(NULL);
    l.max_elements = SIZE_MAX; /* the output is never bigger than the input */
    l.max_dim = 0x7fffffff;
    sim_status st = check_dims("downsample", in->nx, in->ny, in->nz, &l, SIM_ERR_ARG, err, err_sz);
    if (st != SIM_OK)
        return st;
    int nx = in->nx, ny = in->ny, nz = in->nz;
    /* ceil(n / f) without overflow near INT_MAX */
    int ox = nx / fx + (nx % fx != 0), oy = ny / fy + (ny % fy != 0), oz = nz / fz + (nz % fz != 0);
    size_t n = (size_t)ox * (size_t)oy * (size_t)oz;
    float *hu = (float *)sc_calloc(n, sizeof *hu);
    if (!hu)
        return sc_fail(err, err_sz, SIM_ERR_NOMEM, "downsample: out of memory for %zu elements", n);
    size_t o = 0;
    for (int bz = 0; bz < oz; bz++) {
        int z0 = bz * fz, z1 = nz - z0 < fz ? nz : z0 + fz;
        for (int by = 0; by < oy; by++) {
            int y0 = by * fy, y1 = ny - y0 < fy ? ny : y0 + fy;
            for (int bx = 0; bx < ox; bx++, o++) {
                int x0 = bx * fx, x1 = nx - x0 < fx ? nx : x0 + fx;
                double sum = 0.0;
                for (int z = z0; z < z1; z++)
                    for (int y = y0; y < y1; y++) {
                        const float *row =
                            in->hu + (size_t)nx * ((size_t)y + (size_t)ny * (size_t)z);
                        for (int x = x0; x < x1; x++)
                            sum += (double)row[x];
                    }
                double cnt = (double)(x1 - x0) * (double)(y1 - y0) * (double)(z1 - z0);
                hu[o] = (float)(sum / cnt);
            }
        }
    }
    out->nx = ox;
    out->ny = oy;
    out->nz = oz;
    out->spacing_mm[0] = in->spacing_mm[0] * (float)fx;
    out->spacing_mm[1] = in->spacing_mm[1] * (float)fy;
    out->spacing_mm[2] = in->spacing_mm[2] * (float)fz;
    out->hu = hu;
    memcpy(out->orientation, in->orientation, sizeof out->orientation);
    out->oblique_deg = in->oblique_deg;
    return SIM_OK;
}

/* ceil(n / f) */
static size_t ceil_div(int n, int f)
{
    return (size_t)(n / f + (n % f != 0));
}

int vol_fit_factor(const int n[3], const int pad[3], size_t budget)
{
    int f = 1;
    while ((ceil_div(n[0], f) + (size_t)pad[0]) * (ceil_div(n[1], f) + (size_t)pad[1]) *
               (ceil_div(n[2], f) + (size_t)pad[2]) >
           budget)
        f++; /* ends: at f = the longest axis, one element an axis plus the pads */
    return f;
}

sim_status sim_volume_fit(sim_volume *v, size_t max_elements, int *factor, char *err, size_t err_sz)
{
    *factor = 1;
    if (!v || !v->hu || max_elements < 1)
        return sc_fail(err, err_sz, SIM_ERR_ARG, "fit: an empty volume or a zero budget");
    const int n[3] = {v->nx, v->ny, v->nz}, none[3] = {0, 0, 0};
    int f = vol_fit_factor(n, none, max_elements);
    if (f == 1)
        return SIM_OK;
    sim_volume small;
    sim_status st = sim_volume_downsample(&small, v, f, f, f, err, err_sz);
    if (st != SIM_OK)
        return st;
    sim_volume_free(v);
    *v = small;
    *factor = f;
    return SIM_OK;
}
