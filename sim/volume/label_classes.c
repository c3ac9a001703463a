/* label_classes.c: tissue classes from a segmentation instead of HU: a label map (NIfTI,
 * read to the RAS lattice by sim_volume_load_nifti, so its orientation code is the CT's)
 * and a table "LABEL=CLASS,..." give each element a class it keeps whatever its HU and
 * the thresholds (sim_volume_model_options.class_override); unlisted labels class by HU.
 * A label map is of the scan as stored: it is taken through the loader's steps as the CT
 * was (sim_volume_info): read to RAS, then where the CT was fitted to a budget (block
 * averages of f^3) each block takes the class most of its elements have (ties to the lower
 * class, with "by HU" last), then the air margin the loader added is added ("by HU"). */
#include "volume.h"

#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../core/sc_base.h"
#include "volume_internal.h"

static int class_by_name(const char *s, size_t len)
{
    for (int t = 0; t < SIM_NTISSUE; t++) {
        const char *nm = sim_tissue_name(t);
        if (strlen(nm) == len && !strncmp(nm, s, len))
            return t;
    }
    return -1;
}

/* One "LABEL=CLASS" item of len bytes. */
static sim_status parse_item(uint8_t table[256], const char *item, size_t len, char *err,
                             size_t err_sz)
{
    const char *eq = memchr(item, '=', len);
    char lab[16];
    size_t nl = eq ? (size_t)(eq - item) : 0;
    if (!eq || nl == 0 || nl >= sizeof lab)
        return sc_fail(err, err_sz, SIM_ERR_ARG,
                       "label classes: \"%.*s\": write LABEL=CLASS (CLASS air, skin_fat, "
                       "muscle_organ or bone)",
                       (int)len, item);
    memcpy(lab, item, nl);
    lab[nl] = 0;
    char *end = NULL;
    long l = strtol(lab, &end, 10);
    if (!isdigit((unsigned char)lab[0]) || *end || l < 0 || l > 255)
        return sc_fail(err, err_sz, SIM_ERR_ARG, "label classes: label \"%s\": must be 0..255",
                       lab);
    const char *cn = eq + 1;
    size_t cl = len - nl - 1;
    int c = class_by_name(cn, cl);
    if (c < 0)
        return sc_fail(err, err_sz, SIM_ERR_ARG,
                       "label classes: label %ld: class \"%.*s\": must be air, skin_fat, "
                       "muscle_organ or bone",
                       l, (int)cl, cn);
    if (table[l] != SIM_CLASS_BY_HU)
        return sc_fail(err, err_sz, SIM_ERR_ARG, "label classes: label %ld is listed twice", l);
    table[l] = (uint8_t)c;
    return SIM_OK;
}

sim_status sim_label_classes_parse(uint8_t table[256], const char *spec, char *err, size_t err_sz)
{
    if (!table || !spec)
        return sc_fail(err, err_sz, SIM_ERR_ARG, "label classes: NULL argument");
    memset(table, SIM_CLASS_BY_HU, 256);
    if (!*spec)
        return sc_fail(err, err_sz, SIM_ERR_ARG,
                       "label classes: empty: write LABEL=CLASS,... (CLASS air, skin_fat, "
                       "muscle_organ or bone)");
    const char *p = spec;
    for (;;) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        sim_status st = parse_item(table, p, len, err, err_sz);
        if (st != SIM_OK)
            return st;
        if (!comma)
            return SIM_OK;
        p = comma + 1;
    }
}

/* Labels (read as floats) to classes through the table, at the label map's resolution. */
static sim_status classes_of(uint8_t *cls, const sim_volume *lab, const uint8_t table[256],
                             const char *path, char *err, size_t err_sz)
{
    size_t n = (size_t)lab->nx * (size_t)lab->ny * (size_t)lab->nz;
    size_t plane = (size_t)lab->nx * (size_t)lab->ny;
    for (size_t i = 0; i < n; i++) {
        float f = lab->hu[i];
        if (f != floorf(f) || f < 0.0f || f > 255.0f)
            return sc_fail(err, err_sz, SIM_ERR_FORMAT,
                           "%s: not a label map: voxel (x=%zu, y=%zu, z=%zu) is %g; labels are "
                           "whole numbers 0..255",
                           path, i % (size_t)lab->nx, (i % plane) / (size_t)lab->nx, i / plane,
                           (double)f);
        cls[i] = table[(int)f];
    }
    return SIM_OK;
}

/* The most common class of each f^3 block (trailing blocks partial, as sim_volume_fit). */
static void reduce_mode(uint8_t *out, const uint8_t *in, int nx, int ny, int nz, int f)
{
    int ox = (nx + f - 1) / f, oy = (ny + f - 1) / f, oz = (nz + f - 1) / f;
    for (int z = 0; z < oz; z++)
        for (int y = 0; y < oy; y++)
            for (int x = 0; x < ox; x++) {
                int count[SIM_NTISSUE + 1] = {0};
                for (int k = z * f; k < nz && k < (z + 1) * f; k++)
                    for (int j = y * f; j < ny && j < (y + 1) * f; j++)
                        for (int i = x * f; i < nx && i < (x + 1) * f; i++) {
                            uint8_t c = in[(size_t)i + (size_t)nx * ((size_t)j + (size_t)ny * k)];
                            count[c == SIM_CLASS_BY_HU ? SIM_NTISSUE : c]++;
                        }
                int best = 0;
                for (int c = 1; c <= SIM_NTISSUE; c++)
                    best = count[c] > count[best] ? c : best;
                out[(size_t)x + (size_t)ox * ((size_t)y + (size_t)oy * z)] =
                    (uint8_t)(best == SIM_NTISSUE ? SIM_CLASS_BY_HU : best);
            }
}

/* The volume's dims on the RAS lattice before the fit: its stored dims, each to the patient
 * axis its orientation letter names (kept in order when the file said nothing). */
static void ras_dims(const sim_volume *vol, const sim_volume_info *info, int out[3])
{
    for (int a = 0; a < 3; a++)
        out[a] = info->stored_dims[a];
    if (!vol->orientation[0])
        return;
    for (int a = 0; a < 3; a++)
        out[vol_letter_axis(vol->orientation[a])] = info->stored_dims[a];
}

/* cls (n[] elements) into *out with vol's dims: margin m[] of "by HU" around it. */
static sim_status pad_margin(uint8_t **out, uint8_t *cls, const int n[3], const int m[6],
                             const sim_volume *vol, const char *path, char *err, size_t err_sz)
{
    int d[3] = {n[0] + m[0] + m[1], n[1] + m[2] + m[3], n[2] + m[4] + m[5]};
    if (d[0] != vol->nx || d[1] != vol->ny || d[2] != vol->nz)
        return sc_fail(err, err_sz, SIM_ERR_ARG,
                       "%s: the label map fitted and padded is %dx%dx%d, the volume %dx%dx%d", path,
                       d[0], d[1], d[2], vol->nx, vol->ny, vol->nz);
    if (!(m[0] | m[1] | m[2] | m[3] | m[4] | m[5])) {
        *out = cls;
        return SIM_OK;
    }
    uint8_t *p = sc_calloc((size_t)d[0] * (size_t)d[1] * (size_t)d[2], 1);
    if (!p)
        return sc_fail(err, err_sz, SIM_ERR_NOMEM, "%s: out of memory", path);
    memset(p, SIM_CLASS_BY_HU, (size_t)d[0] * (size_t)d[1] * (size_t)d[2]);
    for (int z = 0; z < n[2]; z++)
        for (int y = 0; y < n[1]; y++)
            memcpy(p + (size_t)m[0] +
                       (size_t)d[0] * ((size_t)(y + m[2]) + (size_t)d[1] * (z + m[4])),
                   cls + (size_t)n[0] * ((size_t)y + (size_t)n[1] * z), (size_t)n[0]);
    free(cls);
    *out = p;
    return SIM_OK;
}

/* Labels read to RAS into classes at their own resolution; *cls malloc'd. */
static sim_status read_classes(uint8_t **cls, const char *path, const uint8_t table[256],
                               const int want[3], const sim_volume_limits *lim, char *err,
                               size_t err_sz)
{
    sim_volume lab;
    sim_status st = sim_volume_load_nifti(&lab, path, lim, err, err_sz);
    if (st != SIM_OK)
        return st;
    if (lab.nx != want[0] || lab.ny != want[1] || lab.nz != want[2]) {
        st = (sim_status)sc_fail(err, err_sz, SIM_ERR_ARG,
                                 "%s: label map dims %dx%dx%d (read to RAS) differ from the "
                                 "volume's %dx%dx%d (as read, RAS)",
                                 path, lab.nx, lab.ny, lab.nz, want[0], want[1], want[2]);
        sim_volume_free(&lab);
        return st;
    }
    size_t n = (size_t)want[0] * (size_t)want[1] * (size_t)want[2];
    *cls = sc_calloc(n, 1);
    st = *cls ? classes_of(*cls, &lab, table, path, err, err_sz)
              : (sim_status)sc_fail(err, err_sz, SIM_ERR_NOMEM, "%s: out of memory", path);
    sim_volume_free(&lab);
    if (st != SIM_OK) {
        free(*cls);
        *cls = NULL;
    }
    return st;
}

sim_status sim_volume_label_classes(uint8_t **out, const char *path, const char *spec,
                                    const sim_volume *vol, const sim_volume_info *info,
                                    const sim_volume_limits *lim, char *err, size_t err_sz)
{
    if (!out || !path || !spec || !vol)
        return sc_fail(err, err_sz, SIM_ERR_ARG, "label classes: NULL argument");
    *out = NULL;
    uint8_t table[256];
    sim_status st = sim_label_classes_parse(table, spec, err, err_sz);
    if (st != SIM_OK)
        return st;
    int dims[3] = {vol->nx, vol->ny, vol->nz}, f = 1, none[6] = {0, 0, 0, 0, 0, 0};
    const int *margin = none;
    if (info) {
        ras_dims(vol, info, dims);
        f = info->fit_factor > 1 ? info->fit_factor : 1;
        margin = info->margin;
    }
    uint8_t *cls = NULL;
    st = read_classes(&cls, path, table, dims, lim, err, err_sz);
    if (st != SIM_OK)
        return st;
    int n[3] = {(dims[0] + f - 1) / f, (dims[1] + f - 1) / f, (dims[2] + f - 1) / f};
    if (f > 1) {
        uint8_t *red = sc_calloc((size_t)n[0] * (size_t)n[1] * (size_t)n[2], 1);
        if (red)
            reduce_mode(red, cls, dims[0], dims[1], dims[2], f);
        free(cls);
        if (!red)
            return sc_fail(err, err_sz, SIM_ERR_NOMEM, "%s: out of memory", path);
        cls = red;
    }
    st = pad_margin(out, cls, n, margin, vol, path, err, err_sz);
    if (st != SIM_OK)
        free(cls);
    return st;
}
