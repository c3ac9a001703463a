/* geometry_internal.h: what the geometry pipeline's files share (not public): growable
 * arrays and the octree's leaves. */
#ifndef SIM_SOFTBODY_GEOMETRY_INTERNAL_H
#define SIM_SOFTBODY_GEOMETRY_INTERNAL_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "geometry.h"

/* Grow *p (cap elements of size sz) to hold need elements; 0 on overflow or no memory. */
static inline int sb_grow(void **p, size_t *cap, size_t need, size_t sz)
{
    if (need <= *cap)
        return 1;
    size_t c = *cap ? *cap : 256;
    while (c < need) {
        if (c > SIZE_MAX / 2)
            return 0;
        c *= 2;
    }
    if (c > SIZE_MAX / sz)
        return 0;
    void *q = realloc(*p, c * sz);
    if (!q)
        return 0;
    *p = q;
    *cap = c;
    return 1;
}

typedef struct sb_vec_f {
    float *p;
    size_t n, cap;
} sb_vec_f;

typedef struct sb_vec_u32 {
    uint32_t *p;
    size_t n, cap;
} sb_vec_u32;

static inline int sb_vec_f_push(sb_vec_f *v, const float *x, size_t k)
{
    if (!sb_grow((void **)&v->p, &v->cap, v->n + k, sizeof(float)))
        return 0;
    memcpy(v->p + v->n, x, k * sizeof(float));
    v->n += k;
    return 1;
}

static inline int sb_vec_u32_push(sb_vec_u32 *v, const uint32_t *x, size_t k)
{
    if (!sb_grow((void **)&v->p, &v->cap, v->n + k, sizeof(uint32_t)))
        return 0;
    memcpy(v->p + v->n, x, k * sizeof(uint32_t));
    v->n += k;
    return 1;
}

/* The label map's dims and spacing, and the material table (labelmap.c). */
sim_status sb_check_map(const sim_labelmap *m, char *err, size_t err_sz);
sim_status sb_check_table(const sim_material_table *mat, char *err, size_t err_sz);

/* An octree leaf: a cube of 1 << level finest cells from finest cell (x, y, z); region
 * SB_EMPTY for a leaf outside the covered region (no tets). */
#define SB_EMPTY 255
typedef struct sb_leaf {
    int32_t x, y, z;
    uint8_t level;
    uint8_t region;
} sb_leaf;

/* The balanced octree over the covered region (octree.c): its leaves partition a box of
 * fx x fy x fz finest cells (the label map padded to whole top blocks); cell: a finest
 * cell's side in voxels; covered: finest cells under non-empty leaves. */
typedef struct sb_octree {
    sb_leaf *leaf;
    size_t nleaf, cap;
    int fx, fy, fz, cell;
    int balance_splits;
    size_t covered;
} sb_octree;

sim_status sb_octree_build(sb_octree *o, const sim_labelmap *m, const sim_material_table *mat,
                           const sim_trimesh *surfaces, int nsurf, const sim_tetmesh_opts *opts,
                           char *err, size_t err_sz);
void sb_octree_free(sb_octree *o);

#endif
