/* sb_organ.c: organs as the hybrid model's input: a label map (the phantom's, or a NIfTI
 * segmentation with its material table) through geometry.h's surface, multi-resolution
 * tets and embedding (all in mm), turned into sim_softbody_tets (m, the dynamics'
 * regions). */
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/sc_base.h"
#include "geometry.h"
#include "softbody_internal.h"

#define ORGAN_MAX_SURF (SIM_SOFTBODY_NREGION + 1)

sim_softbody_organ_opts sim_softbody_default_organ_opts(void)
{
    sim_softbody_organ_opts o = {3.0f, 3000, 1, 8, 0};
    return o;
}

/* A surface of labels (n 0: every label): marching cubes, then Taubin. */
static sim_status organ_surface(sim_trimesh *surf, const sim_labelmap *m, const int *labels, int n,
                                char *err, size_t err_sz)
{
    sim_surface_opts o = sim_default_surface_opts();
    return sim_labelmap_surface(surf, m, labels, n, &o, err, err_sz);
}

/* The organ's surfaces: the outer one, decimated to about o->surface_verts, then (inner)
 * each region's but region 0 that has voxels, decimated to the outer one's share of its
 * marching-cubes vertices (meshoptimizer, within the surface options' error bound). */
typedef struct organ_surfaces {
    sim_trimesh s[ORGAN_MAX_SURF];
    int region[ORGAN_MAX_SURF];
    int n, nvert, ntri;
} organ_surfaces;

static sim_status organ_surfaces_build(organ_surfaces *os, const sim_labelmap *m,
                                       const sim_material_table *mat,
                                       const sim_softbody_organ_opts *o, char *err, size_t err_sz)
{
    sim_status st = organ_surface(&os->s[0], m, NULL, 0, err, err_sz);
    if (st != SIM_OK)
        return st;
    os->n = 1, os->region[0] = -1;
    int mc_outer = os->s[0].nvert;
    if (o->surface_verts > 0 && o->surface_verts < mc_outer)
        st = sim_trimesh_decimate(&os->s[0], o->surface_verts,
                                  sim_default_surface_opts().max_error_mm, err, err_sz);
    size_t *counts = o->inner_surfaces ? calloc(65536, sizeof *counts) : NULL;
    if (o->inner_surfaces && !counts)
        return sc_fail(err, err_sz, SIM_ERR_NOMEM, "organ: out of memory");
    if (counts)
        sim_labelmap_count(m, counts, 65536);
    for (int r = 1; st == SIM_OK && counts && r < SIM_SOFTBODY_NREGION; r++) {
        int labels[64], nl = 0;
        size_t voxels = 0;
        for (int k = 0; k < mat->n && nl < 64; k++)
            if (mat->entry[k].region == r) {
                labels[nl++] = mat->entry[k].label;
                voxels += counts[mat->entry[k].label];
            }
        if (!voxels) /* a region no voxel carries has no surface */
            continue;
        sim_trimesh *t = &os->s[os->n];
        st = organ_surface(t, m, labels, nl, err, err_sz);
        if (st != SIM_OK)
            break;
        os->region[os->n++] = r;
        int target = (int)((double)t->nvert * o->surface_verts / (mc_outer ? mc_outer : 1));
        if (o->surface_verts > 0 && target >= 100 && target < t->nvert)
            st = sim_trimesh_decimate(t, target, sim_default_surface_opts().max_error_mm, err,
                                      err_sz);
    }
    free(counts);
    for (int k = 0; k < os->n; k++)
        os->nvert += os->s[k].nvert, os->ntri += os->s[k].ntri;
    return st;
}

static void organ_surfaces_free(organ_surfaces *os)
{
    for (int k = 0; k < ORGAN_MAX_SURF; k++)
        sim_trimesh_free(&os->s[k]);
}

/* The tets (mm) and the embedded surfaces into out (m). */
static sim_status to_tets(sim_softbody_tets *out, const sim_tetmesh *t, const organ_surfaces *os,
                          const sim_embedding *e, char *err, size_t err_sz)
{
    memset(out, 0, sizeof *out);
    out->nvert = t->nvert, out->ntet = t->ntet;
    out->nembed = os->nvert, out->nembed_tri = os->ntri;
    out->x = malloc((size_t)t->nvert * 3 * sizeof *out->x);
    out->tet = malloc((size_t)t->ntet * 4 * sizeof *out->tet);
    out->region = malloc((size_t)t->ntet);
    out->embed_tet = malloc((size_t)os->nvert * sizeof *out->embed_tet);
    out->embed_w = malloc((size_t)os->nvert * 4 * sizeof *out->embed_w);
    out->embed_tri = malloc((size_t)os->ntri * 3 * sizeof *out->embed_tri);
    if (!out->x || !out->tet || !out->region || !out->embed_tet || !out->embed_w ||
        !out->embed_tri) {
        sim_softbody_tets_free(out);
        return sc_fail(err, err_sz, SIM_ERR_NOMEM, "organ: out of memory");
    }
    for (size_t i = 0; i < (size_t)t->nvert * 3; i++)
        out->x[i] = t->vert[i] * 1e-3f;
    for (size_t i = 0; i < (size_t)t->ntet * 4; i++)
        out->tet[i] = (int32_t)t->tet[i];
    memcpy(out->region, t->region, (size_t)t->ntet);
    for (int i = 0; i < os->nvert; i++)
        out->embed_tet[i] = (int32_t)e->tet[i];
    memcpy(out->embed_w, e->weight, (size_t)os->nvert * 4 * sizeof *out->embed_w);
    out->nsurface = os->n;
    for (int k = 0, v0 = 0, t0 = 0; k < os->n; k++) {
        const sim_trimesh *s = &os->s[k];
        for (int j = 0; j < s->ntri * 3; j++)
            out->embed_tri[(size_t)t0 * 3 + (size_t)j] = s->tri[j] + (uint32_t)v0;
        out->surface[k].vert0 = v0, out->surface[k].nvert = s->nvert;
        out->surface[k].tri0 = t0, out->surface[k].ntri = s->ntri;
        out->surface[k].region = os->region[k];
        v0 += s->nvert, t0 += s->ntri;
    }
    return SIM_OK;
}

/* The surfaces' vertices, one after the other (mm), for one embedding. */
static float *organ_points(const organ_surfaces *os)
{
    float *p = malloc((size_t)os->nvert * 3 * sizeof *p);
    for (int k = 0, v0 = 0; p && k < os->n; v0 += os->s[k].nvert, k++)
        memcpy(&p[(size_t)v0 * 3], os->s[k].vert, (size_t)os->s[k].nvert * 3 * sizeof *p);
    return p;
}

/* Surfaces, tets and embedding of a map, into out with the materials' names. */
static sim_status organ_from_map(sim_softbody_tets *out, const sim_labelmap *m,
                                 const sim_material_table *mat, const sim_softbody_organ_opts *o,
                                 char *err, size_t err_sz)
{
    organ_surfaces os;
    sim_tetmesh t;
    sim_embedding e;
    memset(&os, 0, sizeof os), memset(&t, 0, sizeof t), memset(&e, 0, sizeof e);
    sim_tetmesh_opts to = {o->min_cell, o->max_cell};
    float *pts = NULL;
    sim_status st = organ_surfaces_build(&os, m, mat, o, err, err_sz);
    if (st == SIM_OK)
        st = sim_tetmesh_build(&t, m, mat, os.s, os.n, &to, NULL, err, err_sz);
    if (st == SIM_OK && !(pts = organ_points(&os)))
        st = sc_fail(err, err_sz, SIM_ERR_NOMEM, "organ: out of memory");
    if (st == SIM_OK)
        st = sim_embed_points(&e, &t, pts, os.nvert, err, err_sz);
    if (st == SIM_OK)
        st = to_tets(out, &t, &os, &e, err, err_sz);
    if (st == SIM_OK) {
        out->nregion = 0;
        for (int k = mat->n - 1; k >= 0; k--) { /* the first entry of a region names it */
            int r = mat->entry[k].region;
            out->nregion = r + 1 > out->nregion ? r + 1 : out->nregion;
            snprintf(out->region_name[r], sizeof out->region_name[r], "%s", mat->entry[k].name);
        }
    }
    free(pts);
    sim_embedding_free(&e);
    sim_tetmesh_free(&t);
    organ_surfaces_free(&os);
    return st;
}

sim_status sim_softbody_tets_phantom(sim_softbody_tets *out, const sim_softbody_organ_opts *o,
                                     char *err, size_t err_sz)
{
    memset(out, 0, sizeof *out);
    sim_labelmap m;
    memset(&m, 0, sizeof m);
    sim_material_table mat = sim_phantom_materials();
    sim_status st = sim_labelmap_phantom(&m, NULL, o->voxel_mm, err, err_sz);
    if (st == SIM_OK)
        st = organ_from_map(out, &m, &mat, o, err, err_sz);
    sim_labelmap_free(&m);
    return st;
}

/* A material table written "LABEL=NAME[:REGION],...", parsed into entries whose names
 * point into names. */
#define ORGAN_MAX_LABELS 64
typedef struct organ_materials {
    sim_material entry[ORGAN_MAX_LABELS];
    char name[ORGAN_MAX_LABELS][32];
    int n;
} organ_materials;

/* The region of a name given without one: that of the name's first entry, else the next
 * unused. */
static int region_of_name(const organ_materials *t, const char *name)
{
    int next = 0;
    for (int k = 0; k < t->n; k++) {
        if (!strcmp(t->entry[k].name, name))
            return t->entry[k].region;
        next = t->entry[k].region + 1 > next ? t->entry[k].region + 1 : next;
    }
    return next;
}

static sim_status parse_one_material(organ_materials *t, const char *item, size_t len, char *err,
                                     size_t err_sz)
{
    char buf[96], *eq, *colon, *end;
    if (len == 0 || len >= sizeof buf)
        return sc_fail(err, err_sz, SIM_ERR_ARG,
                       "materials: entry %d is %s; write LABEL=NAME[:REGION]", t->n + 1,
                       len ? "too long" : "empty");
    memcpy(buf, item, len), buf[len] = 0;
    if (!(eq = strchr(buf, '=')))
        return sc_fail(err, err_sz, SIM_ERR_ARG, "materials: \"%s\": write LABEL=NAME[:REGION]",
                       buf);
    *eq = 0;
    long label = strtol(buf, &end, 10);
    if (end == buf || *end || label < 1 || label > 65535)
        return sc_fail(err, err_sz, SIM_ERR_ARG,
                       "materials: label \"%s\" must be a whole number in 1..65535", buf);
    char *name = eq + 1;
    long region = -1;
    if ((colon = strchr(name, ':'))) {
        *colon = 0;
        region = strtol(colon + 1, &end, 10);
        if (end == colon + 1 || *end || region < 0)
            return sc_fail(err, err_sz, SIM_ERR_ARG,
                           "materials: label %ld: region \"%s\" must be a whole number >= 0", label,
                           colon + 1);
    }
    size_t nl = strlen(name);
    for (size_t i = 0; i < nl; i++)
        if (!isalnum((unsigned char)name[i]) && name[i] != '_' && name[i] != '-' && name[i] != ' ')
            return sc_fail(err, err_sz, SIM_ERR_ARG,
                           "materials: label %ld: the name \"%s\" may hold letters, digits, "
                           "spaces, '_' and '-' only",
                           label, name);
    if (nl == 0 || nl >= sizeof t->name[0])
        return sc_fail(err, err_sz, SIM_ERR_ARG,
                       "materials: label %ld: a name of 1 to %zu "
                       "characters",
                       label, sizeof t->name[0] - 1);
    for (int k = 0; k < t->n; k++)
        if (t->entry[k].label == label)
            return sc_fail(err, err_sz, SIM_ERR_ARG, "materials: label %ld is given twice", label);
    if (region < 0)
        region = region_of_name(t, name);
    if (region >= SIM_SOFTBODY_NREGION)
        return sc_fail(err, err_sz, SIM_ERR_ARG,
                       "materials: label %ld (%s) would be region %ld; a soft body holds at most "
                       "%d regions (0..%d): give labels of one tissue the same name or region",
                       label, name, region, SIM_SOFTBODY_NREGION, SIM_SOFTBODY_NREGION - 1);
    memcpy(t->name[t->n], name, nl + 1);
    t->entry[t->n] = (sim_material){(int)label, (int)region, t->name[t->n]};
    t->n++;
    return SIM_OK;
}

static sim_status parse_materials(organ_materials *t, const char *spec, char *err, size_t err_sz)
{
    memset(t, 0, sizeof *t);
    if (!spec || !*spec)
        return sc_fail(err, err_sz, SIM_ERR_ARG,
                       "materials: none given; name every label of the map, as "
                       "\"1=liver,2=tumour,3=vessel\"");
    for (const char *p = spec;;) {
        const char *q = strchr(p, ',');
        size_t len = q ? (size_t)(q - p) : strlen(p);
        if (t->n == ORGAN_MAX_LABELS)
            return sc_fail(err, err_sz, SIM_ERR_ARG, "materials: more than %d labels",
                           ORGAN_MAX_LABELS);
        sim_status st = parse_one_material(t, p, len, err, err_sz);
        if (st != SIM_OK)
            return st;
        if (!q)
            return SIM_OK;
        p = q + 1;
    }
}

sim_status sim_softbody_tets_labelmap(sim_softbody_tets *out, const char *path,
                                      const char *materials, const sim_softbody_organ_opts *o,
                                      char *err, size_t err_sz)
{
    memset(out, 0, sizeof *out);
    organ_materials t;
    sim_status st = parse_materials(&t, materials, err, err_sz);
    if (st != SIM_OK)
        return st;
    sim_material_table mat = {t.entry, t.n};
    sim_labelmap m;
    memset(&m, 0, sizeof m);
    st = sim_labelmap_load_nifti(&m, path, NULL, err, err_sz);
    if (st == SIM_OK) /* sim_tetmesh_build checks the map against the table */
        st = organ_from_map(out, &m, &mat, o, err, err_sz);
    sim_labelmap_free(&m);
    return st;
}

void sim_softbody_tets_rest_on_floor(sim_softbody_tets *t)
{
    sb_rest_on_floor(t->x, t->nvert);
}
