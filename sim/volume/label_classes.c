/* label_classes.c: tissue classes from a segmentation instead of HU: a label map (NIfTI,
 * read to the RAS lattice by sim_volume_load_nifti, so its orientation code is the CT's)
 * and a table "LABEL=CLASS,..." give each element a class it keeps whatever its HU and
 * the thresholds (sim_volume_model_options.class_override); unlisted labels class by HU.
 * When the CT was fitted to a budget (sim_volume_fit, block averages of f^3), each block of
 * the override takes the class most of its elements have (ties to the lower class, with
 * "by HU" last), so a label map at the scan's own resolution serves the fitted CT. */
#include "volume.h"

#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../core/sc_base.h"

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

sim_status sim_volume_label_classes(uint8_t **out, const char *path, const char *spec, int nx,
                                    int ny, int nz, int factor, const sim_volume_limits *lim,
                                    char *err, size_t err_sz)
{
    if (!out || !path || !spec || factor < 1)
        return sc_fail(err, err_sz, SIM_ERR_ARG, "label classes: bad argument");
    *out = NULL;
    uint8_t table[256];
    sim_status st = sim_label_classes_parse(table, spec, err, err_sz);
    if (st != SIM_OK)
        return st;
    sim_volume lab;
    st = sim_volume_load_nifti(&lab, path, lim, err, err_sz);
    if (st != SIM_OK)
        return st;
    if (lab.nx != nx || lab.ny != ny || lab.nz != nz) {
        st = (sim_status)sc_fail(
            err, err_sz, SIM_ERR_ARG,
            "%s: label map dims %dx%dx%d (read to RAS) differ from the volume's %dx%dx%d", path,
            lab.nx, lab.ny, lab.nz, nx, ny, nz);
        sim_volume_free(&lab);
        return st;
    }
    size_t n = (size_t)nx * (size_t)ny * (size_t)nz;
    uint8_t *cls = sc_calloc(n, 1);
    st = cls ? classes_of(cls, &lab, table, path, err, err_sz)
             : (sim_status)sc_fail(err, err_sz, SIM_ERR_NOMEM, "%s: out of memory", path);
    sim_volume_free(&lab);
    if (st == SIM_OK && factor > 1) {
        size_t on = (size_t)((nx + factor - 1) / factor) * (size_t)((ny + factor - 1) / factor) *
                    (size_t)((nz + factor - 1) / factor);
        uint8_t *red = sc_calloc(on, 1);
        if (red)
            reduce_mode(red, cls, nx, ny, nz, factor);
        else
            st = (sim_status)sc_fail(err, err_sz, SIM_ERR_NOMEM, "%s: out of memory", path);
        free(cls);
        cls = red;
    }
    if (st != SIM_OK) {
        free(cls);
        return st;
    }
    *out = cls;
    return SIM_OK;
}
