/* volume_load.c: a CT as a user brings it, made ready to simulate: read by its kind (a
 * NIfTI file by its name; a DICOM series as a folder, a .zip of one, or one of its files by
 * its name or the DICM magic), fitted to the element budget, the body
 * kept apart from the couch and the noise around it, an air margin added where tissue
 * touches the edge, and its HU range checked for the usual export mistakes. Each step says
 * what it did in sim_volume_info, so the server can tell the user. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../core/sc_base.h"
#include "volume_internal.h"

sim_volume_load_opts sim_default_volume_load_opts(void)
{
    sim_volume_load_opts o;
    memset(&o, 0, sizeof o);
    o.fit_elements = (size_t)4 << 20;
    o.air_margin = 8;
    o.body_hu = -400.0f;
    return o;
}

int vol_ends_with_ci(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    if (k > n)
        return 0;
    for (size_t i = 0; i < k; i++) {
        char a = s[n - k + i], b = suffix[i];
        if (a >= 'A' && a <= 'Z')
            a = (char)(a - 'A' + 'a');
        if (a != b)
            return 0;
    }
    return 1;
}

static void base_name(const char *path, char *out, size_t out_sz)
{
    size_t n = strlen(path);
    while (n > 1 && path[n - 1] == '/')
        n--; /* "dir/" names dir */
    size_t b = n;
    while (b > 0 && path[b - 1] != '/')
        b--;
    size_t k = n - b < out_sz - 1 ? n - b : out_sz - 1;
    memcpy(out, path + b, k);
    out[k] = 0;
}

/* 1 when the file's first bytes at `at` are `magic`. */
static int has_magic(const char *path, long at, const char *magic)
{
    char b[8] = {0};
    size_t n = strlen(magic);
    FILE *f = fopen(path, "rb");
    int ok = f && fseek(f, at, SEEK_SET) == 0 && fread(b, 1, n, f) == n && !memcmp(b, magic, n);
    if (f)
        fclose(f);
    return ok;
}

sim_status sim_volume_load_dicom(sim_volume *out, const char *path, const char *series_uid,
                                 const sim_volume_limits *lim, sim_volume_info *info, char *err,
                                 size_t err_sz)
{
    if (!out || !path)
        return sc_fail(err, err_sz, SIM_ERR_ARG, "dicom: out or path is NULL");
    memset(out, 0, sizeof *out);
#if !SIM_HAVE_DICOM
    (void)series_uid, (void)lim, (void)info;
    return sc_fail(err, err_sz, SIM_ERR_FORMAT,
                   "%s: this build has no DICOM support (built without GDCM and libzip: install "
                   "libgdcm-dev and libzip-dev, `make deps`, and rebuild), or convert the series "
                   "to NIfTI (dcm2niix)",
                   path);
#else
    struct stat sb;
    if (stat(path, &sb) != 0)
        return sc_fail(err, err_sz, SIM_ERR_IO, "%s: %s", path, strerror(errno));
    if (S_ISDIR(sb.st_mode)) {
        if (info)
            snprintf(info->source, sizeof info->source, "a folder");
        return vol_dicom_read(out, path, series_uid, NULL, lim, info, err, err_sz);
    }
    /* One file: the series it belongs to, from the folder it sits in. */
    char dir[4096], file[4096 + 256];
    const char *slash = strrchr(path, '/');
    size_t dn = slash ? (size_t)(slash - path) : 0;
    if (dn >= sizeof dir)
        return sc_fail(err, err_sz, SIM_ERR_ARG, "%s: path too long", path);
    memcpy(dir, slash ? path : ".", slash ? dn : 1);
    dir[slash ? (dn ? dn : 1) : 1] = 0; /* "/x.dcm" sits in "/" */
    snprintf(file, sizeof file, "%s/%s", strcmp(dir, "/") ? dir : "", slash ? slash + 1 : path);
    if (info)
        snprintf(info->source, sizeof info->source, "the series of %s, read from its folder",
                 slash ? slash + 1 : path);
    return vol_dicom_read(out, dir, series_uid, file, lim, info, err, err_sz);
#endif
}

#if SIM_HAVE_DICOM
/* A .zip of a series: unpacked to a private folder, read, and the folder removed whatever
 * happened. Messages name the zip, not the temporary folder. */
static sim_status load_zip(sim_volume *v, const char *path, const sim_volume_load_opts *o,
                           sim_volume_info *info, char *err, size_t err_sz)
{
    char dir[4096];
    int nent = 0;
    sim_status st = vol_unzip(path, o->zip_max_bytes, dir, sizeof dir, &nent, err, err_sz);
    if (st != SIM_OK)
        return st;
    st = vol_dicom_read(v, dir, o->series_uid, NULL, &o->limits, info, err, err_sz);
    size_t dl = strlen(dir);
    if (st != SIM_OK && err && !strncmp(err, dir, dl)) {
        char rest[1024];
        snprintf(rest, sizeof rest, "%s", err + dl);
        snprintf(err, err_sz, "%s%s", path, rest);
    }
    vol_remove_tree(dir);
    snprintf(info->source, sizeof info->source, "a .zip of %d entries", nent);
    return st;
}
#endif

/* Read the file as its kind, as stored (the loaders turn it to the RAS lattice). */
static sim_status load_by_kind(sim_volume *v, const char *path, const sim_volume_load_opts *o,
                               sim_volume_info *info, char *err, size_t err_sz)
{
    struct stat sb;
    if (stat(path, &sb) != 0)
        return sc_fail(err, err_sz, SIM_ERR_IO, "%s: %s", path, strerror(errno));
    if (S_ISDIR(sb.st_mode) && !o->header_only)
        return sim_volume_load_dicom(v, path, o->series_uid, &o->limits, info, err, err_sz);
    if (vol_ends_with_ci(path, ".nii") || vol_ends_with_ci(path, ".nii.gz")) {
        snprintf(info->format, sizeof info->format, "nifti");
        if (o->header_only)
            return sim_volume_check_nifti(path, &o->limits,
                                          o->header_only == SIM_LOAD_HEADER_PARTIAL,
                                          info->stored_dims, err, err_sz);
        return sim_volume_load_nifti(v, path, &o->limits, err, err_sz);
    }
    int zip = vol_ends_with_ci(path, ".zip") || has_magic(path, 0, "PK\003\004");
    if (o->header_only && (zip || S_ISDIR(sb.st_mode) || vol_ends_with_ci(path, ".dcm") ||
                           has_magic(path, 128, "DICM"))) {
        /* A series is checked slice by slice by the load itself, which refuses it by name;
         * a whole zip's directory is checked here (bombs, traversal, links), one still
         * arriving waits: its directory is at its end. */
        snprintf(info->format, sizeof info->format, "dicom");
#if SIM_HAVE_DICOM
        if (zip && o->header_only == SIM_LOAD_HEADER)
            return vol_zip_check(path, o->zip_max_bytes, err, err_sz);
#endif
        return SIM_OK;
    }
    if (zip) {
#if SIM_HAVE_DICOM
        return load_zip(v, path, o, info, err, err_sz);
#else
        return sim_volume_load_dicom(v, path, o->series_uid, &o->limits, info, err, err_sz);
#endif
    }
    if (vol_ends_with_ci(path, ".dcm") || has_magic(path, 128, "DICM")) {
#if SIM_HAVE_DICOM
        if (o->dicom_file_alone) {
            snprintf(info->source, sizeof info->source, "one file");
            return vol_dicom_read(v, path, o->series_uid, NULL, &o->limits, info, err, err_sz);
        }
#endif
        return sim_volume_load_dicom(v, path, o->series_uid, &o->limits, info, err, err_sz);
    }
    return sc_fail(err, err_sz, SIM_ERR_FORMAT,
                   "%s: not a volume this server reads: give a NIfTI file (.nii or .nii.gz) or a "
                   "DICOM series (a folder of its files, a .zip of that folder, or one of its "
                   "files)",
                   path);
}

/* 1 when any element of face f (0..5: -x,+x,-y,+y,-z,+z) is at or above hu. */
static int face_touches(const sim_volume *v, int f, float hu)
{
    int a = f >> 1, at = (f & 1) ? (a == 0 ? v->nx : a == 1 ? v->ny : v->nz) - 1 : 0;
    int n[3] = {v->nx, v->ny, v->nz};
    int u = a == 0 ? 1 : 0, w = a == 2 ? 1 : 2;
    for (int j = 0; j < n[w]; j++)
        for (int i = 0; i < n[u]; i++) {
            int c[3];
            c[a] = at;
            c[u] = i;
            c[w] = j;
            if (v->hu[(size_t)c[0] + (size_t)v->nx * ((size_t)c[1] + (size_t)v->ny * c[2])] >= hu)
                return 1;
        }
    return 0;
}

/* The smallest block-average factor that brings the volume, with `margin` air elements on
 * each face that touches tissue, to the budget. */
static int fit_factor(const sim_volume *v, size_t budget, int margin, float body_hu)
{
    int pad[3] = {0, 0, 0}, n[3] = {v->nx, v->ny, v->nz};
    for (int f = 0; f < 6; f++)
        pad[f >> 1] += face_touches(v, f, body_hu) ? margin : 0;
    return vol_fit_factor(n, pad, budget);
}

sim_status sim_volume_keep_body(sim_volume *v, float body_hu, int64_t *removed, char *err,
                                size_t err_sz)
{
    size_t n = (size_t)v->nx * v->ny * v->nz;
    int32_t *comp = sc_calloc(n, sizeof *comp), *queue = sc_calloc(n, sizeof *queue);
    if (!comp || !queue) {
        free(comp);
        free(queue);
        return sc_fail(err, err_sz, SIM_ERR_NOMEM, "keep body: out of memory for %zu elements", n);
    }
    /* Label the 6-connected components of non-air; keep the one with the most elements. */
    int32_t label = 0, best = 0;
    size_t best_size = 0;
    size_t plane = (size_t)v->nx * v->ny;
    for (size_t s = 0; s < n; s++) {
        if (comp[s] || v->hu[s] < body_hu)
            continue;
        comp[s] = ++label;
        size_t head = 0, tail = 0;
        queue[tail++] = (int32_t)s;
        while (head < tail) {
            size_t i = (size_t)queue[head++];
            int x = (int)(i % v->nx), y = (int)((i / v->nx) % v->ny), z = (int)(i / plane);
            size_t nb[6];
            int k = 0;
            if (x > 0)
                nb[k++] = i - 1;
            if (x + 1 < v->nx)
                nb[k++] = i + 1;
            if (y > 0)
                nb[k++] = i - v->nx;
            if (y + 1 < v->ny)
                nb[k++] = i + v->nx;
            if (z > 0)
                nb[k++] = i - plane;
            if (z + 1 < v->nz)
                nb[k++] = i + plane;
            for (int q = 0; q < k; q++)
                if (!comp[nb[q]] && v->hu[nb[q]] >= body_hu) {
                    comp[nb[q]] = label;
                    queue[tail++] = (int32_t)nb[q];
                }
        }
        if (tail > best_size) {
            best_size = tail;
            best = label;
        }
    }
    /* What is not the body becomes air: the couch, its pad, noise, a second patient. The
     * air value is the scan's own lowest, so the slices still look like the scan. */
    float air = v->hu[0];
    for (size_t i = 0; i < n; i++)
        air = fminf(air, v->hu[i]);
    air = fminf(air, -1000.0f);
    int64_t gone = 0;
    for (size_t i = 0; i < n; i++)
        if (comp[i] && comp[i] != best) {
            v->hu[i] = air;
            gone++;
        }
    free(comp);
    free(queue);
    if (removed)
        *removed = gone;
    return SIM_OK;
}

sim_status sim_volume_pad_air(sim_volume *v, int margin, float body_hu, int added[6], char *err,
                              size_t err_sz)
{
    int pad[6];
    for (int f = 0; f < 6; f++)
        pad[f] = margin > 0 && face_touches(v, f, body_hu) ? margin : 0;
    if (added)
        memcpy(added, pad, sizeof pad);
    if (!(pad[0] | pad[1] | pad[2] | pad[3] | pad[4] | pad[5]))
        return SIM_OK;
    int nx = v->nx + pad[0] + pad[1], ny = v->ny + pad[2] + pad[3], nz = v->nz + pad[4] + pad[5];
    size_t n = (size_t)nx * ny * nz;
    float *hu = sc_calloc(n, sizeof *hu);
    if (!hu)
        return sc_fail(err, err_sz, SIM_ERR_NOMEM, "air margin: out of memory for %zu elements", n);
    for (size_t i = 0; i < n; i++)
        hu[i] = -1000.0f;
    for (int z = 0; z < v->nz; z++)
        for (int y = 0; y < v->ny; y++)
            memcpy(hu + (size_t)pad[0] +
                       (size_t)nx * ((size_t)(y + pad[2]) + (size_t)ny * (size_t)(z + pad[4])),
                   v->hu + (size_t)v->nx * ((size_t)y + (size_t)v->ny * z),
                   (size_t)v->nx * sizeof *hu);
    free(v->hu);
    v->hu = hu;
    v->nx = nx;
    v->ny = ny;
    v->nz = nz;
    return SIM_OK;
}

sim_status sim_volume_crop(sim_volume *v, const int box[6], char *err, size_t err_sz)
{
    const int *c = box;
    if (c[0] < 0 || c[1] < 0 || c[2] < 0 || c[3] > v->nx || c[4] > v->ny || c[5] > v->nz ||
        c[3] <= c[0] || c[4] <= c[1] || c[5] <= c[2])
        return sc_fail(err, err_sz, SIM_ERR_ARG,
                       "crop %d,%d,%d,%d,%d,%d: not a box inside %dx%dx%d", c[0], c[1], c[2], c[3],
                       c[4], c[5], v->nx, v->ny, v->nz);
    int nx = c[3] - c[0], ny = c[4] - c[1], nz = c[5] - c[2];
    float *hu = sc_calloc((size_t)nx * ny * nz, sizeof *hu);
    if (!hu)
        return sc_fail(err, err_sz, SIM_ERR_NOMEM, "crop: out of memory");
    for (int z = 0; z < nz; z++)
        for (int y = 0; y < ny; y++)
            memcpy(hu + (size_t)nx * (y + (size_t)ny * z),
                   v->hu + c[0] + (size_t)v->nx * (c[1] + y + (size_t)v->ny * (c[2] + z)),
                   (size_t)nx * sizeof *hu);
    free(v->hu);
    v->hu = hu;
    v->nx = nx;
    v->ny = ny;
    v->nz = nz;
    return SIM_OK;
}

/* Warn (not refuse) when the values do not look like Hounsfield units. */
static void check_hu_range(sim_volume_info *info)
{
    float lo = info->hu_min, hi = info->hu_max;
    if (lo >= 0.0f && hi <= 255.0f)
        snprintf(info->warning, sizeof info->warning,
                 "values %.0f to %.0f look like an 8-bit greyscale export, not Hounsfield units: "
                 "air will not class as air; export the scan in HU (DICOM or NIfTI of the "
                 "original values)",
                 (double)lo, (double)hi);
    else if (lo > -500.0f)
        snprintf(info->warning, sizeof info->warning,
                 "no value below -500 HU (lowest %.0f): no air in the scan, or not in Hounsfield "
                 "units (rescale slope and intercept lost?)",
                 (double)lo);
    else if (hi > 4000.0f || lo < -3100.0f)
        snprintf(info->warning, sizeof info->warning,
                 "values %.0f to %.0f HU are outside what CT gives (-1024 to about 3000, metal "
                 "up to 4000): unscaled data?",
                 (double)lo, (double)hi);
}

/* v's dims as its file stored them: the loaders turned it to RAS, stored axis a to the
 * patient axis its orientation letter names (kept in order when the file said nothing). */
static void stored_dims_of(const sim_volume *v, int out[3])
{
    int n[3] = {v->nx, v->ny, v->nz};
    for (int a = 0; a < 3; a++) {
        char c = v->orientation[0] ? v->orientation[a] : 0;
        out[a] = n[c ? vol_letter_axis(c) : a];
    }
}

sim_status sim_volume_prepare(sim_volume *v, const sim_volume_load_opts *opts,
                              sim_volume_info *info, char *err, size_t err_sz)
{
    sim_volume_load_opts o = opts ? *opts : sim_default_volume_load_opts();
    size_t n = (size_t)v->nx * v->ny * v->nz;
    info->hu_min = info->hu_max = v->hu[0];
    for (size_t i = 1; i < n; i++) {
        info->hu_min = fminf(info->hu_min, v->hu[i]);
        info->hu_max = fmaxf(info->hu_max, v->hu[i]);
    }
    check_hu_range(info);
    stored_dims_of(v, info->stored_dims);
    info->fit_factor = 1;
    sim_status st = SIM_OK;
    if (o.progress)
        o.progress(o.progress_ctx, "fitting");
    int f = o.fit_elements > 0 ? fit_factor(v, o.fit_elements, o.air_margin, o.body_hu) : 1;
    if (f > 1) {
        sim_volume small;
        st = sim_volume_downsample(&small, v, f, f, f, err, err_sz);
        if (st != SIM_OK)
            return st;
        sim_volume_free(v);
        *v = small;
        info->fit_factor = f;
    }
    if (o.progress)
        o.progress(o.progress_ctx, "body");
    if (!o.keep_all)
        st = sim_volume_keep_body(v, o.body_hu, &info->removed_elements, err, err_sz);
    if (st == SIM_OK)
        st = sim_volume_pad_air(v, o.air_margin, o.body_hu, info->margin, err, err_sz);
    return st;
}

sim_status sim_volume_load_file(sim_volume *out, const char *path, const sim_volume_load_opts *opts,
                                sim_volume_info *info, char *err, size_t err_sz)
{
    sim_volume_load_opts o = opts ? *opts : sim_default_volume_load_opts();
    sim_volume_info scratch;
    if (!info)
        info = &scratch;
    memset(info, 0, sizeof *info);
    if (!out || !path)
        return sc_fail(err, err_sz, SIM_ERR_ARG, "load: out or path is NULL");
    memset(out, 0, sizeof *out);
    base_name(path, info->name, sizeof info->name);
    if (o.progress && !o.header_only)
        o.progress(o.progress_ctx, "reading");
    sim_status st = load_by_kind(out, path, &o, info, err, err_sz);
    if (o.header_only)
        return st; /* nothing was allocated */
    if (st == SIM_OK)
        st = sim_volume_prepare(out, &o, info, err, err_sz);
    if (st != SIM_OK)
        sim_volume_free(out);
    return st;
}
