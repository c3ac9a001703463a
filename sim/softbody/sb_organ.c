/* sb_organ.c: the phantom organ as the hybrid model's input: geometry.h's label map,
 * surface, multi-resolution tets and embedding (all in mm) turned into sim_softbody_tets
 * (m, the dynamics' regions). */
#include <stdlib.h>
#include <string.h>

#include "../core/sc_base.h"
#include "geometry.h"
#include "softbody.h"

/* The outer surface: marching cubes, Taubin, then meshoptimizer down to about target. */
static sim_status organ_surface(sim_trimesh *surf, const sim_labelmap *m, int target, char *err,
                                size_t err_sz)
{
    sim_surface_opts o = sim_default_surface_opts();
    sim_status st = sim_labelmap_surface(surf, m, NULL, 0, &o, err, err_sz);
    if (st == SIM_OK && target > 0 && target < surf->nvert)
        st = sim_trimesh_decimate(surf, target, o.max_error_mm, err, err_sz);
    return st;
}

/* The tets (mm) and the embedded surface into out (m). */
static sim_status to_tets(sim_softbody_tets *out, const sim_tetmesh *t, const sim_trimesh *surf,
                          const sim_embedding *e, char *err, size_t err_sz)
{
    memset(out, 0, sizeof *out);
    out->nvert = t->nvert, out->ntet = t->ntet, out->nregion = 3;
    out->nembed = surf->nvert, out->nembed_tri = surf->ntri;
    out->x = malloc((size_t)t->nvert * 3 * sizeof *out->x);
    out->tet = malloc((size_t)t->ntet * 4 * sizeof *out->tet);
    out->region = malloc((size_t)t->ntet);
    out->embed_tet = malloc((size_t)surf->nvert * sizeof *out->embed_tet);
    out->embed_w = malloc((size_t)surf->nvert * 4 * sizeof *out->embed_w);
    out->embed_tri = malloc((size_t)surf->ntri * 3 * sizeof *out->embed_tri);
    if (!out->x || !out->tet || !out->region || !out->embed_tet || !out->embed_w ||
        !out->embed_tri) {
        sim_softbody_tets_free(out);
        return sc_fail(err, err_sz, SIM_ERR_NOMEM, "phantom organ: out of memory");
    }
    for (size_t i = 0; i < (size_t)t->nvert * 3; i++)
        out->x[i] = t->vert[i] * 1e-3f;
    for (size_t i = 0; i < (size_t)t->ntet * 4; i++)
        out->tet[i] = (int32_t)t->tet[i];
    memcpy(out->region, t->region, (size_t)t->ntet);
    for (int i = 0; i < surf->nvert; i++)
        out->embed_tet[i] = (int32_t)e->tet[i];
    memcpy(out->embed_w, e->weight, (size_t)surf->nvert * 4 * sizeof *out->embed_w);
    memcpy(out->embed_tri, surf->tri, (size_t)surf->ntri * 3 * sizeof *out->embed_tri);
    return SIM_OK;
}

sim_status sim_softbody_tets_phantom(sim_softbody_tets *out, float voxel_mm, int surface_verts,
                                     int min_cell, int max_cell, char *err, size_t err_sz)
{
    memset(out, 0, sizeof *out);
    sim_labelmap m;
    sim_trimesh surf;
    sim_tetmesh t;
    sim_embedding e;
    memset(&m, 0, sizeof m), memset(&surf, 0, sizeof surf), memset(&t, 0, sizeof t);
    memset(&e, 0, sizeof e);
    sim_material_table mat = sim_phantom_materials();
    sim_tetmesh_opts to = {min_cell, max_cell};
    sim_status st = sim_labelmap_phantom(&m, NULL, voxel_mm, err, err_sz);
    if (st == SIM_OK)
        st = organ_surface(&surf, &m, surface_verts, err, err_sz);
    if (st == SIM_OK)
        st = sim_tetmesh_build(&t, &m, &mat, &surf, 1, &to, NULL, err, err_sz);
    if (st == SIM_OK)
        st = sim_embed_points(&e, &t, surf.vert, surf.nvert, err, err_sz);
    if (st == SIM_OK)
        st = to_tets(out, &t, &surf, &e, err, err_sz);
    sim_embedding_free(&e);
    sim_tetmesh_free(&t);
    sim_trimesh_free(&surf);
    sim_labelmap_free(&m);
    return st;
}
