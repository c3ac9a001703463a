/* volume_save.c: volumes and label maps out as NIfTI-1 single files (.nii, and .nii.gz
 * through the NIfTI C library's znzlib when the build has it).
 *
 * The 348-byte header is written here field by field, little-endian, at the offsets of
 * the NIfTI-1 standard (nifti1.h), so the writer needs no library for .nii; the data
 * follow at vox_offset 352 (after the 4-byte empty extension flag). The lattice is RAS
 * (the loader's, and the phantom's): the qform is the identity rotation (quatern b = c =
 * d = 0, qfac 1) and the sform its matrix, both code 1 (scanner), with the volume's centre
 * at the origin, so any NIfTI reader shows the patient's right, front and head where we do.
 * HU go out as int16: rounded as they are when they fit (scl_slope 1, scl_inter 0), else
 * by a linear scale over their range. */
#include "volume.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/sc_base.h"

#if SIM_HAVE_NIFTI
#include <nifti1_io.h>
#endif

#define NII_HDR     348
#define NII_VOX_OFF 352

static void put_i16(uint8_t *h, int off, int v)
{
    uint16_t u = (uint16_t)(int16_t)v;
    h[off] = (uint8_t)(u & 0xff);
    h[off + 1] = (uint8_t)(u >> 8);
}

static void put_i32(uint8_t *h, int off, int32_t v)
{
    uint32_t u = (uint32_t)v;
    for (int k = 0; k < 4; k++)
        h[off + k] = (uint8_t)(u >> (8 * k));
}

static void put_f32(uint8_t *h, int off, float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    put_i32(h, off, (int32_t)u);
}

/* The header of an RAS lattice (offsets from nifti1.h's nifti_1_header). */
static void nii_header(uint8_t h[NII_VOX_OFF], const int dims[3], const float sp[3], int datatype,
                       int bitpix, float slope, float inter)
{
    memset(h, 0, NII_VOX_OFF);
    put_i32(h, 0, NII_HDR); /* sizeof_hdr */
    put_i16(h, 40, 3);      /* dim[0] */
    for (int k = 0; k < 3; k++)
        put_i16(h, 42 + 2 * k, dims[k]);
    for (int k = 3; k < 7; k++)
        put_i16(h, 42 + 2 * k, 1);
    put_i16(h, 70, datatype);
    put_i16(h, 72, bitpix);
    put_f32(h, 76, 1.0f); /* pixdim[0]: qfac */
    for (int k = 0; k < 3; k++)
        put_f32(h, 80 + 4 * k, sp[k]);
    put_f32(h, 108, (float)NII_VOX_OFF);
    put_f32(h, 112, slope);
    put_f32(h, 116, inter);
    h[123] = 2 | 8; /* xyzt_units: mm, s */
    snprintf((char *)h + 148, 80, "softcast");
    put_i16(h, 252, 1); /* qform_code: scanner */
    put_i16(h, 254, 1); /* sform_code */
    float off[3];       /* the centre of the lattice at the origin */
    for (int k = 0; k < 3; k++)
        off[k] = -0.5f * (float)(dims[k] - 1) * sp[k];
    for (int k = 0; k < 3; k++) /* quatern_b, c, d stay 0; qoffset */
        put_f32(h, 268 + 4 * k, off[k]);
    for (int r = 0; r < 3; r++) { /* srow_x, srow_y, srow_z */
        for (int c = 0; c < 3; c++)
            put_f32(h, 280 + 16 * r + 4 * c, r == c ? sp[r] : 0.0f);
        put_f32(h, 280 + 16 * r + 12, off[r]);
    }
    memcpy(h + 344, "n+1", 4);
}

static int ends_with(const char *s, const char *suf)
{
    size_t n = strlen(s), m = strlen(suf);
    return n >= m && !strcmp(s + n - m, suf);
}

/* A sink: a plain FILE, or a znz stream for .nii.gz. */
typedef struct nii_out {
    FILE *f;
#if SIM_HAVE_NIFTI
    znzFile z;
#endif
} nii_out;

static sim_status out_open(nii_out *o, const char *path, char *err, size_t err_sz)
{
    memset(o, 0, sizeof *o);
    int gz = ends_with(path, ".nii.gz");
    if (!gz && !ends_with(path, ".nii"))
        return sc_fail(err, err_sz, SIM_ERR_ARG, "%s: write a .nii or .nii.gz file", path);
#if SIM_HAVE_NIFTI
    if (gz) {
        o->z = znzopen(path, "wb", 1);
        if (znz_isnull(o->z))
            return sc_fail(err, err_sz, SIM_ERR_IO, "%s: cannot create: %s", path, strerror(errno));
        return SIM_OK;
    }
#else
    if (gz)
        return sc_fail(err, err_sz, SIM_ERR_ARG,
                       "%s: this build has no NIfTI library (zlib): write a .nii file", path);
#endif
    o->f = fopen(path, "wb");
    if (!o->f)
        return sc_fail(err, err_sz, SIM_ERR_IO, "%s: cannot create: %s", path, strerror(errno));
    return SIM_OK;
}

static int out_write(nii_out *o, const void *p, size_t n)
{
#if SIM_HAVE_NIFTI
    if (!o->f)
        return znzwrite(p, 1, n, o->z) == n;
#endif
    return fwrite(p, 1, n, o->f) == n;
}

/* Close; 0 when everything reached the file. */
static int out_close(nii_out *o)
{
#if SIM_HAVE_NIFTI
    if (!o->f)
        return Xznzclose(&o->z);
#endif
    return fclose(o->f);
}

/* Header, then n elements made by put(ctx, i, dst) bitpix/8 bytes each, in 1 MiB chunks. */
typedef void (*put_fn)(const void *ctx, size_t i, uint8_t *dst);

static sim_status write_nii(const char *path, const uint8_t hdr[NII_VOX_OFF], size_t n, int bytes,
                            put_fn put, const void *ctx, char *err, size_t err_sz)
{
    nii_out o;
    sim_status st = out_open(&o, path, err, err_sz);
    if (st != SIM_OK)
        return st;
    enum { CHUNK = 1 << 20 };
    uint8_t *buf = malloc(CHUNK);
    int ok = buf && out_write(&o, hdr, NII_VOX_OFF);
    size_t per = CHUNK / (size_t)bytes;
    for (size_t i = 0; ok && i < n; i += per) {
        size_t m = n - i < per ? n - i : per;
        for (size_t j = 0; j < m; j++)
            put(ctx, i + j, buf + j * (size_t)bytes);
        ok = out_write(&o, buf, m * (size_t)bytes);
    }
    free(buf);
    int closed = out_close(&o) == 0;
    if (!ok || !closed) {
        remove(path);
        return sc_fail(err, err_sz, buf ? SIM_ERR_IO : SIM_ERR_NOMEM, "%s: write failed: %s", path,
                       buf ? strerror(errno) : "out of memory");
    }
    return SIM_OK;
}

typedef struct hu_ctx {
    const float *hu;
    float slope, inter;
} hu_ctx;

static void put_hu(const void *ctx, size_t i, uint8_t *dst)
{
    const hu_ctx *c = ctx;
    float q = roundf((c->hu[i] - c->inter) / c->slope);
    q = q < -32768.0f ? -32768.0f : (q > 32767.0f ? 32767.0f : q);
    uint16_t u = (uint16_t)(int16_t)q;
    dst[0] = (uint8_t)(u & 0xff);
    dst[1] = (uint8_t)(u >> 8);
}

static void put_u8(const void *ctx, size_t i, uint8_t *dst)
{
    dst[0] = ((const uint8_t *)ctx)[i];
}

sim_status sim_volume_save_nifti(const sim_volume *v, const char *path, char *err, size_t err_sz)
{
    if (!path)
        return sc_fail(err, err_sz, SIM_ERR_ARG, "nifti: path is NULL");
    sim_status st = sim_volume_validate(v, NULL, path, err, err_sz);
    if (st != SIM_OK)
        return st;
    size_t n = (size_t)v->nx * (size_t)v->ny * (size_t)v->nz;
    float lo = v->hu[0], hi = v->hu[0];
    for (size_t i = 1; i < n; i++) {
        lo = fminf(lo, v->hu[i]);
        hi = fmaxf(hi, v->hu[i]);
    }
    hu_ctx c = {v->hu, 1.0f, 0.0f};
    if (roundf(lo) < -32768.0f || roundf(hi) > 32767.0f) {
        c.inter = 0.5f * (lo + hi);
        c.slope = (hi - lo) / 65534.0f;
    }
    uint8_t hdr[NII_VOX_OFF];
    int dims[3] = {v->nx, v->ny, v->nz};
    nii_header(hdr, dims, v->spacing_mm, 4 /* INT16 */, 16, c.slope, c.inter);
    return write_nii(path, hdr, n, 2, put_hu, &c, err, err_sz);
}

sim_status sim_labels_save_nifti(const uint8_t *labels, int nx, int ny, int nz,
                                 const float spacing_mm[3], const char *path, char *err,
                                 size_t err_sz)
{
    if (!labels || !path || !spacing_mm)
        return sc_fail(err, err_sz, SIM_ERR_ARG, "nifti: NULL argument");
    if (nx < 1 || ny < 1 || nz < 1 || nx > 32767 || ny > 32767 || nz > 32767)
        return sc_fail(err, err_sz, SIM_ERR_ARG, "%s: dims %dx%dx%d: each must be 1..32767", path,
                       nx, ny, nz);
    for (int k = 0; k < 3; k++)
        if (!(spacing_mm[k] > 0.0f) || !isfinite(spacing_mm[k]))
            return sc_fail(err, err_sz, SIM_ERR_ARG, "%s: spacing must be finite and > 0", path);
    uint8_t hdr[NII_VOX_OFF];
    int dims[3] = {nx, ny, nz};
    nii_header(hdr, dims, spacing_mm, 2 /* UINT8 */, 8, 0.0f, 0.0f);
    size_t n = (size_t)nx * (size_t)ny * (size_t)nz;
    return write_nii(path, hdr, n, 1, put_u8, labels, err, err_sz);
}
