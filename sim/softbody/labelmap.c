/* labelmap.c: label maps in (the procedural phantom organ, NIfTI-1 segmentations) and
 * checked against a label -> material table.
 *
 * The phantom is drawn in canonical coordinates, where every shape has a closed-form
 * volume (an ellipsoid with two equal semi-axes, a sphere, and the ellipsoid's core
 * around its long axis, whose volume is (4 pi / 3) A B^2 (1 - (1 - r^2/B^2)^(3/2))), then
 * mapped by a shear y += bend (x/A)^2 (determinant 1) and a scale of z by flatten: the
 * organ bends like a liver's lobe and every volume scales by flatten exactly. Each voxel
 * samples its centre through the inverse map, so the build is deterministic and the
 * voxel volumes converge on the analytic ones as voxels shrink.
 *
 * NIfTI label maps are read by sim_volume_load_nifti (one reader: its header checks,
 * limits, byte order, scaling, and its orientation: stored order, no reorientation),
 * then every voxel must be a whole number 0..65535: that refuses a CT or MR image
 * (fractions, negative HU) with the voxel that gives it away.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../core/sc_base.h"
#include "geometry.h"
#include "geometry_internal.h"

#define PH_MAX_VOXELS ((size_t)128 << 20)

sim_phantom_organ sim_default_phantom_organ(void)
{
    sim_phantom_organ s;
    memset(&s, 0, sizeof s);
    s.half_length_mm = 95.0f;
    s.radius_mm = 50.0f;
    s.flatten = 0.7f;
    s.bend_mm = 20.0f;
    s.tumour_centre_mm[0] = 35.0f;
    s.tumour_centre_mm[1] = 27.0f;
    s.tumour_centre_mm[2] = 0.0f;
    s.tumour_radius_mm = 14.0f;
    s.vessel_radius_mm = 8.0f;
    s.margin_vox = 2;
    return s;
}

static const sim_material k_phantom_materials[] = {
    {SIM_PHANTOM_PARENCHYMA, 0, "liver"},
    {SIM_PHANTOM_TUMOUR, 1, "tumour"},
    {SIM_PHANTOM_VESSEL, 2, "vessel"},
};

sim_material_table sim_phantom_materials(void)
{
    sim_material_table t;
    t.entry = k_phantom_materials;
    t.n = (int)(sizeof k_phantom_materials / sizeof k_phantom_materials[0]);
    return t;
}

static int finite_pos(float v)
{
    return isfinite(v) && v > 0.0f;
}

/* The shape's own sanity: positive sizes, the tumour inside the organ and clear of the
 * vessel (so the analytic volumes do not overlap). */
static sim_status check_shape(const sim_phantom_organ *s, char *err, size_t err_sz)
{
    if (!finite_pos(s->half_length_mm) || !finite_pos(s->radius_mm) || !finite_pos(s->flatten) ||
        s->flatten > 1.0f || !isfinite(s->bend_mm) || s->bend_mm < 0.0f ||
        !finite_pos(s->tumour_radius_mm) || !finite_pos(s->vessel_radius_mm))
        return sc_fail(err, err_sz, SIM_ERR_ARG,
                       "phantom: sizes must be finite and > 0, flatten in (0, 1], bend >= 0");
    if (s->margin_vox < 1 || s->margin_vox > 64)
        return sc_fail(err, err_sz, SIM_ERR_ARG, "phantom: margin %d voxels: must be 1..64",
                       s->margin_vox);
    const float *c = s->tumour_centre_mm;
    float r = s->tumour_radius_mm, a = s->half_length_mm, b = s->radius_mm;
    if (!isfinite(c[0]) || !isfinite(c[1]) || !isfinite(c[2]))
        return sc_fail(err, err_sz, SIM_ERR_ARG, "phantom: tumour centre not finite");
    /* In (|x|, distance from the x axis) the sphere lies in the rectangle up to
     * (|cx| + r, rho + r); the ellipse is convex and symmetric, so that corner inside it
     * puts the whole sphere inside (conservative). */
    float ca = fabsf(c[0]) + r, cb = sqrtf(c[1] * c[1] + c[2] * c[2]) + r;
    if (r >= b || (ca / a) * (ca / a) + (cb / b) * (cb / b) > 1.0f)
        return sc_fail(err, err_sz, SIM_ERR_ARG, "phantom: the tumour (r %g mm) leaves the organ",
                       (double)r);
    if (sqrtf(c[1] * c[1] + c[2] * c[2]) - r <= s->vessel_radius_mm)
        return sc_fail(err, err_sz, SIM_ERR_ARG, "phantom: the tumour touches the vessel");
    if (s->vessel_radius_mm >= b)
        return sc_fail(err, err_sz, SIM_ERR_ARG, "phantom: the vessel is wider than the organ");
    return SIM_OK;
}

/* World extent of the organ's box, before the margin: x [-A, A], y [-B, B + bend],
 * z [-fB, fB]. */
static void organ_box(const sim_phantom_organ *s, float lo[3], float hi[3])
{
    lo[0] = -s->half_length_mm;
    hi[0] = s->half_length_mm;
    lo[1] = -s->radius_mm;
    hi[1] = s->radius_mm + s->bend_mm;
    lo[2] = -s->radius_mm * s->flatten;
    hi[2] = s->radius_mm * s->flatten;
}

void sim_phantom_centre_mm(const sim_phantom_organ *s, float voxel_mm, float out[3])
{
    float lo[3], hi[3];
    organ_box(s, lo, hi);
    for (int a = 0; a < 3; a++)
        out[a] = (float)s->margin_vox * voxel_mm - lo[a];
}

/* Label of a point p relative to the organ's centre (world axes, mm). */
static uint16_t phantom_label(const sim_phantom_organ *s, float px, float py, float pz)
{
    float a = s->half_length_mm, b = s->radius_mm;
    float cx = px, cy = py - s->bend_mm * (px / a) * (px / a), cz = pz / s->flatten;
    float e = (cx / a) * (cx / a) + (cy * cy + cz * cz) / (b * b);
    if (e > 1.0f)
        return 0;
    float rv = s->vessel_radius_mm;
    if (cy * cy + cz * cz <= rv * rv)
        return SIM_PHANTOM_VESSEL;
    const float *t = s->tumour_centre_mm;
    float dx = cx - t[0], dy = cy - t[1], dz = cz - t[2];
    if (dx * dx + dy * dy + dz * dz <= s->tumour_radius_mm * s->tumour_radius_mm)
        return SIM_PHANTOM_TUMOUR;
    return SIM_PHANTOM_PARENCHYMA;
}

sim_status sim_labelmap_phantom(sim_labelmap *out, const sim_phantom_organ *shape, float voxel_mm,
                                char *err, size_t err_sz)
{
    if (!out)
        return sc_fail(err, err_sz, SIM_ERR_ARG, "phantom: out is NULL");
    memset(out, 0, sizeof *out);
    sim_phantom_organ s = shape ? *shape : sim_default_phantom_organ();
    sim_status st = check_shape(&s, err, err_sz);
    if (st != SIM_OK)
        return st;
    if (!isfinite(voxel_mm) || voxel_mm < 0.01f)
        return sc_fail(err, err_sz, SIM_ERR_ARG, "phantom: voxel %g mm: must be >= 0.01 mm",
                       (double)voxel_mm);
    float lo[3], hi[3], c[3];
    organ_box(&s, lo, hi);
    sim_phantom_centre_mm(&s, voxel_mm, c);
    double dims[3];
    for (int a = 0; a < 3; a++)
        dims[a] = ceil((double)(hi[a] - lo[a]) / (double)voxel_mm) + 2.0 * s.margin_vox;
    if (dims[0] > 4096 || dims[1] > 4096 || dims[2] > 4096 ||
        dims[0] * dims[1] * dims[2] > (double)PH_MAX_VOXELS)
        return sc_fail(err, err_sz, SIM_ERR_LIMIT,
                       "phantom: voxel %g mm gives %.0fx%.0fx%.0f voxels: over the limits (4096 "
                       "per axis, %zu in all)",
                       (double)voxel_mm, dims[0], dims[1], dims[2], PH_MAX_VOXELS);
    int nx = (int)dims[0], ny = (int)dims[1], nz = (int)dims[2];
    size_t n = (size_t)nx * (size_t)ny * (size_t)nz;
    uint16_t *lab = (uint16_t *)sc_calloc(n, sizeof *lab);
    if (!lab)
        return sc_fail(err, err_sz, SIM_ERR_NOMEM, "phantom: out of memory for %zu voxels", n);
    size_t i = 0;
    for (int z = 0; z < nz; z++)
        for (int y = 0; y < ny; y++)
            for (int x = 0; x < nx; x++, i++)
                lab[i] = phantom_label(&s, ((float)x + 0.5f) * voxel_mm - c[0],
                                       ((float)y + 0.5f) * voxel_mm - c[1],
                                       ((float)z + 0.5f) * voxel_mm - c[2]);
    out->nx = nx;
    out->ny = ny;
    out->nz = nz;
    out->spacing_mm[0] = out->spacing_mm[1] = out->spacing_mm[2] = voxel_mm;
    out->label = lab;
    return SIM_OK;
}

/* ------------------------------------------------------------------ NIfTI */

sim_status sim_labelmap_load_nifti(sim_labelmap *out, const char *path,
                                   const sim_volume_limits *lim, char *err, size_t err_sz)
{
    const char *name = path ? path : "nifti";
    if (!out)
        return sc_fail(err, err_sz, SIM_ERR_ARG, "%s: out is NULL", name);
    memset(out, 0, sizeof *out);
    sim_volume v;
    sim_status st = sim_volume_load_nifti(&v, path, lim, err, err_sz);
    if (st != SIM_OK)
        return st;
    size_t n = (size_t)v.nx * (size_t)v.ny * (size_t)v.nz;
    uint16_t *lab = (uint16_t *)sc_calloc(n, sizeof *lab);
    if (!lab) {
        sim_volume_free(&v);
        return sc_fail(err, err_sz, SIM_ERR_NOMEM, "%s: out of memory for %zu voxels", name, n);
    }
    size_t plane = (size_t)v.nx * (size_t)v.ny;
    for (size_t i = 0; i < n; i++) {
        float f = v.hu[i];
        if (f != floorf(f) || f < 0.0f || f > 65535.0f) {
            st = sc_fail(err, err_sz, SIM_ERR_FORMAT,
                         "%s: not a label map: voxel %zu (x=%zu, y=%zu, z=%zu) is %g; labels are "
                         "whole numbers 0..65535 (an image such as a CT or MR is not a "
                         "segmentation)",
                         name, i, i % (size_t)v.nx, (i % plane) / (size_t)v.nx, i / plane,
                         (double)f);
            free(lab);
            sim_volume_free(&v);
            return st;
        }
        lab[i] = (uint16_t)f;
    }
    out->nx = v.nx;
    out->ny = v.ny;
    out->nz = v.nz;
    memcpy(out->spacing_mm, v.spacing_mm, sizeof out->spacing_mm);
    out->label = lab;
    sim_volume_free(&v);
    return SIM_OK;
}

/* ------------------------------------------------------------------ checks */

sim_status sb_check_table(const sim_material_table *mat, char *err, size_t err_sz)
{
    if (!mat || (mat->n > 0 && !mat->entry))
        return sc_fail(err, err_sz, SIM_ERR_ARG, "materials: table is NULL");
    if (mat->n < 1 || mat->n > 65535)
        return sc_fail(err, err_sz, SIM_ERR_ARG, "materials: %d entries: need 1..65535", mat->n);
    for (int i = 0; i < mat->n; i++) {
        const sim_material *e = &mat->entry[i];
        if (e->label < 1 || e->label > 65535)
            return sc_fail(err, err_sz, SIM_ERR_ARG,
                           "materials: entry %d: label %d: must be 1..65535", i, e->label);
        if (e->region < 0 || e->region > SIM_MAX_REGION)
            return sc_fail(err, err_sz, SIM_ERR_ARG,
                           "materials: label %d: region %d: must be 0..%d", e->label, e->region,
                           SIM_MAX_REGION);
        if (!e->name || !e->name[0])
            return sc_fail(err, err_sz, SIM_ERR_ARG, "materials: label %d has no material name",
                           e->label);
        for (int j = 0; j < i; j++)
            if (mat->entry[j].label == e->label)
                return sc_fail(err, err_sz, SIM_ERR_ARG,
                               "materials: label %d is listed twice (%s, %s)", e->label,
                               mat->entry[j].name, e->name);
    }
    return SIM_OK;
}

sim_status sb_check_map(const sim_labelmap *m, char *err, size_t err_sz)
{
    if (!m || !m->label)
        return sc_fail(err, err_sz, SIM_ERR_ARG, "label map: empty (no voxels)");
    if (m->nx < 1 || m->ny < 1 || m->nz < 1 || m->nx > 4096 || m->ny > 4096 || m->nz > 4096)
        return sc_fail(err, err_sz, SIM_ERR_ARG, "label map: dims %dx%dx%d: each must be 1..4096",
                       m->nx, m->ny, m->nz);
    if ((size_t)m->nx * (size_t)m->ny * (size_t)m->nz > PH_MAX_VOXELS)
        return sc_fail(err, err_sz, SIM_ERR_ARG, "label map: dims %dx%dx%d: over %zu voxels", m->nx,
                       m->ny, m->nz, PH_MAX_VOXELS);
    for (int a = 0; a < 3; a++)
        if (!finite_pos(m->spacing_mm[a]))
            return sc_fail(err, err_sz, SIM_ERR_ARG,
                           "label map: spacing %g x %g x %g mm: each must be finite and > 0",
                           (double)m->spacing_mm[0], (double)m->spacing_mm[1],
                           (double)m->spacing_mm[2]);
    return SIM_OK;
}

sim_status sim_labelmap_check(const sim_labelmap *m, const sim_material_table *mat, char *err,
                              size_t err_sz)
{
    sim_status st = sb_check_map(m, err, err_sz);
    if (st == SIM_OK)
        st = sb_check_table(mat, err, err_sz);
    if (st != SIM_OK)
        return st;
    size_t *count = (size_t *)sc_calloc(65536, sizeof *count);
    if (!count)
        return sc_fail(err, err_sz, SIM_ERR_NOMEM, "label map: out of memory");
    sim_labelmap_count(m, count, 65536);
    size_t n = (size_t)m->nx * (size_t)m->ny * (size_t)m->nz;
    st = count[0] == n ? sc_fail(err, err_sz, SIM_ERR_ARG,
                                 "label map: empty: all %zu voxels are background (label 0)", n)
                       : SIM_OK;
    for (int l = 1; l < 65536 && st == SIM_OK; l++) {
        if (!count[l])
            continue;
        int found = 0;
        for (int i = 0; i < mat->n && !found; i++)
            found = mat->entry[i].label == l;
        if (found)
            continue;
        size_t at = 0;
        while (m->label[at] != l)
            at++;
        size_t plane = (size_t)m->nx * (size_t)m->ny;
        st = sc_fail(err, err_sz, SIM_ERR_ARG,
                     "label map: label %d (%zu voxels, first at x=%zu y=%zu z=%zu) has no "
                     "material",
                     l, count[l], at % (size_t)m->nx, (at % plane) / (size_t)m->nx, at / plane);
    }
    free(count);
    return st;
}

void sim_labelmap_count(const sim_labelmap *m, size_t *counts, int ncounts)
{
    SC_ASSERT(m && counts && ncounts >= 0);
    memset(counts, 0, (size_t)ncounts * sizeof *counts);
    size_t n = (size_t)m->nx * (size_t)m->ny * (size_t)m->nz;
    for (size_t i = 0; i < n; i++)
        if (m->label[i] < ncounts)
            counts[m->label[i]]++;
}

void sim_labelmap_free(sim_labelmap *m)
{
    if (!m)
        return;
    free(m->label);
    memset(m, 0, sizeof *m);
}
