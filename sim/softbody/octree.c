/* octree.c: the multi-resolution octree under the tet mesh: coarse inside a region, fine
 * at region boundaries and around the surfaces, 2:1 balanced.
 *
 * Finest cells are min_cell_vox voxels a side. A finest cell is covered when it holds a
 * labelled voxel (its region: the most common region among them, ties to the lower) or a
 * surface vertex (then the region of its covered neighbours, spreading outward), so the
 * tets enclose every surface vertex and the embedding never extrapolates. A pyramid of
 * codes (0: nothing covered, r + 1: all region r, MIXED: anything else, or a surface
 * vertex inside) gives the leaves top-down: a block of max_cell_vox that is uniform is one
 * leaf, a MIXED one splits, down to the finest cells. Uncovered blocks are leaves too
 * (SB_EMPTY, no tets): the leaves partition the padded grid's box, so the corners of all
 * of them tell tetmesh.c where a face is subdivided or an edge has a midpoint.
 *
 * Balance: leaves that share a face or an edge differ by at most one level (leaves that
 * share only a corner put no point on each other's faces, so they need not). A leaf
 * whose ring of neighbouring finest cells holds a leaf two or more levels finer is
 * split in eight (empty leaves too), repeated until no leaf splits (Sundar, Sampath and Biros,
 * "Bottom-up construction and 2:1 balance refinement of linear octrees", SISC 2008, in its simplest
 * ripple form). With it every leaf edge holds at most its midpoint as an extra vertex, which
 * tetmesh.c's face rule relies on.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../core/sc_base.h"
#include "geometry.h"
#include "geometry_internal.h"

#define MIXED     255
#define UNCOVERED 255

typedef struct oct_grid {
    int d[3];      /* finest cells per axis */
    uint8_t *code; /* (d) 0 or region + 1 */
    uint8_t *surf; /* (d) 1 where a surface vertex lies */
} oct_grid;

static size_t gidx(const int d[3], int x, int y, int z)
{
    return (size_t)x + (size_t)d[0] * ((size_t)y + (size_t)d[1] * (size_t)z);
}

/* Most common region among the labelled voxels of finest cell (cx, cy, cz). */
static uint8_t cell_region(const sim_labelmap *m, const uint8_t *reg_of, int cell, int cx, int cy,
                           int cz)
{
    int count[256] = {0};
    int any = 0;
    for (int z = cz * cell; z < (cz + 1) * cell && z < m->nz; z++)
        for (int y = cy * cell; y < (cy + 1) * cell && y < m->ny; y++)
            for (int x = cx * cell; x < (cx + 1) * cell && x < m->nx; x++) {
                uint8_t r =
                    reg_of[m->label[(size_t)x +
                                    (size_t)m->nx * ((size_t)y + (size_t)m->ny * (size_t)z)]];
                if (r) {
                    count[r]++;
                    any = 1;
                }
            }
    if (!any)
        return 0;
    int best = 1;
    for (int r = 2; r < 256; r++)
        if (count[r] > count[best])
            best = r;
    return (uint8_t)best;
}

/* Flag the finest cells whose closed box (grown by a hair) holds a surface vertex. */
static void mark_surfaces(oct_grid *g, const sim_labelmap *m, int cell, const sim_trimesh *s,
                          int nsurf)
{
    for (int k = 0; k < nsurf; k++)
        for (int v = 0; v < s[k].nvert; v++) {
            int lo[3], hi[3];
            for (int a = 0; a < 3; a++) {
                double q = (double)s[k].vert[3 * (size_t)v + (size_t)a] /
                           ((double)m->spacing_mm[a] * (double)cell);
                lo[a] = (int)floor(q - 1e-4), hi[a] = (int)floor(q + 1e-4);
                lo[a] = lo[a] < 0 ? 0 : lo[a];
                hi[a] = hi[a] >= g->d[a] ? g->d[a] - 1 : hi[a];
            }
            for (int z = lo[2]; z <= hi[2]; z++)
                for (int y = lo[1]; y <= hi[1]; y++)
                    for (int x = lo[0]; x <= hi[0]; x++)
                        g->surf[gidx(g->d, x, y, z)] = 1;
        }
}

/* The most common region among the covered neighbours (26) of finest cell i, 0 if none. */
static uint8_t neighbour_region(const oct_grid *g, size_t i)
{
    int x = (int)(i % (size_t)g->d[0]), y = (int)((i / (size_t)g->d[0]) % (size_t)g->d[1]);
    int z = (int)(i / ((size_t)g->d[0] * (size_t)g->d[1]));
    int count[256] = {0}, best = 0;
    for (int dz = -1; dz <= 1; dz++)
        for (int dy = -1; dy <= 1; dy++)
            for (int dx = -1; dx <= 1; dx++) {
                int p[3] = {x + dx, y + dy, z + dz};
                if (p[0] < 0 || p[1] < 0 || p[2] < 0 || p[0] >= g->d[0] || p[1] >= g->d[1] ||
                    p[2] >= g->d[2])
                    continue;
                count[g->code[gidx(g->d, p[0], p[1], p[2])]]++;
            }
    for (int r = 1; r < 256; r++)
        if (count[r] > count[best] || (best == 0 && count[r] > 0))
            best = r;
    return (uint8_t)best;
}

/* Give surface-only cells the most common region of their covered neighbours, ring by
 * ring (each ring from the one before, through next). Returns the cells left without. */
static size_t spread_regions(oct_grid *g, uint8_t *next)
{
    size_t n = (size_t)g->d[0] * (size_t)g->d[1] * (size_t)g->d[2], left = 0;
    int changed = 1;
    while (changed) {
        changed = 0, left = 0;
        memcpy(next, g->code, n);
        for (size_t i = 0; i < n; i++) {
            if (g->code[i] || !g->surf[i])
                continue;
            next[i] = neighbour_region(g, i);
            changed |= next[i] != 0;
            left += next[i] == 0;
        }
        memcpy(g->code, next, n);
    }
    return left;
}

/* ---------------------------------------------------------------- pyramid */

typedef struct oct_pyramid {
    int levels;
    int d[9][3];
    uint8_t *code[9];
} oct_pyramid;

static void pyramid_free(oct_pyramid *p)
{
    for (int l = 1; l < p->levels; l++)
        free(p->code[l]);
}

static uint8_t child_code(const oct_pyramid *p, const oct_grid *g, int l, int x, int y, int z,
                          int *surf)
{
    const int *d = p->d[l];
    if (x >= d[0] || y >= d[1] || z >= d[2])
        return 0;
    size_t i = gidx(d, x, y, z);
    if (l == 0)
        *surf |= g->surf[i];
    return p->code[l][i];
}

/* Level l + 1 from level l: uniform children (no surface vertex among the finest) keep
 * their code, anything else is MIXED. */
static int pyramid_level(oct_pyramid *p, const oct_grid *g, int l)
{
    int *d = p->d[l + 1];
    for (int a = 0; a < 3; a++)
        d[a] = (p->d[l][a] + 1) / 2;
    p->code[l + 1] = (uint8_t *)sc_calloc((size_t)d[0] * (size_t)d[1] * (size_t)d[2], 1);
    if (!p->code[l + 1])
        return 0;
    for (int z = 0; z < d[2]; z++)
        for (int y = 0; y < d[1]; y++)
            for (int x = 0; x < d[0]; x++) {
                int surf = 0;
                uint8_t c0 = child_code(p, g, l, 2 * x, 2 * y, 2 * z, &surf), c = c0;
                for (int k = 1; k < 8 && c != MIXED; k++) {
                    uint8_t ck = child_code(p, g, l, 2 * x + (k & 1), 2 * y + ((k >> 1) & 1),
                                            2 * z + (k >> 2), &surf);
                    if (ck != c0)
                        c = MIXED;
                }
                p->code[l + 1][gidx(d, x, y, z)] = (c != MIXED && surf) ? MIXED : c;
            }
    p->levels = l + 2;
    return 1;
}

static int push_leaf(sb_octree *o, int x, int y, int z, int level, int region)
{
    if (!sb_grow((void **)&o->leaf, &o->cap, o->nleaf + 1, sizeof(sb_leaf)))
        return 0;
    sb_leaf *f = &o->leaf[o->nleaf++];
    f->x = x, f->y = y, f->z = z, f->level = (uint8_t)level, f->region = (uint8_t)region;
    return 1;
}

static int descend(sb_octree *o, const oct_pyramid *p, int l, int x, int y, int z)
{
    const int *d = p->d[l];
    if (x >= d[0] || y >= d[1] || z >= d[2])
        return 1;
    uint8_t c = p->code[l][gidx(d, x, y, z)];
    if (c != MIXED)
        return push_leaf(o, x << l, y << l, z << l, l, c ? c - 1 : SB_EMPTY);
    for (int k = 0; k < 8; k++)
        if (!descend(o, p, l - 1, 2 * x + (k & 1), 2 * y + ((k >> 1) & 1), 2 * z + (k >> 2)))
            return 0;
    return 1;
}

/* ---------------------------------------------------------------- balance */

static void paint(uint8_t *lev, const int d[3], const sb_leaf *f)
{
    int s = 1 << f->level;
    for (int z = f->z; z < f->z + s; z++)
        for (int y = f->y; y < f->y + s; y++)
            memset(lev + gidx(d, f->x, y, z), f->level, (size_t)s);
}

/* Finest level among the leaves that share a face or an edge with f: its ring of finest
 * cells less the 8 corner cells (every cell of the padded grid belongs to a leaf). */
static int ring_min_level(const uint8_t *lev, const int d[3], const sb_leaf *f)
{
    int s = 1 << f->level, best = UNCOVERED;
    int lo[3] = {f->x - 1, f->y - 1, f->z - 1}, hi[3] = {f->x + s, f->y + s, f->z + s};
    for (int z = lo[2]; z <= hi[2]; z++) {
        if (z < 0 || z >= d[2])
            continue;
        for (int y = lo[1]; y <= hi[1]; y++) {
            if (y < 0 || y >= d[1])
                continue;
            int inner = z > lo[2] && z < hi[2] && y > lo[1] && y < hi[1];
            int zy_out = (z == lo[2] || z == hi[2]) && (y == lo[1] || y == hi[1]);
            for (int x = lo[0]; x <= hi[0]; x += (inner ? hi[0] - lo[0] : 1)) {
                /* a cell touching only f's corner puts no point on f's faces or edges */
                if (x < 0 || x >= d[0] || (zy_out && (x == lo[0] || x == hi[0])))
                    continue;
                int v = lev[gidx(d, x, y, z)];
                best = v < best ? v : best;
            }
        }
    }
    return best;
}

static int balance(sb_octree *o, uint8_t *lev, const int d[3])
{
    for (size_t i = 0; i < o->nleaf; i++)
        paint(lev, d, &o->leaf[i]);
    int split = 1;
    while (split) {
        split = 0;
        for (size_t i = 0; i < o->nleaf; i++) {
            sb_leaf f = o->leaf[i];
            if (f.level < 2 || ring_min_level(lev, d, &f) + 1 >= f.level)
                continue;
            int h = 1 << (f.level - 1);
            o->leaf[i].level = (uint8_t)(f.level - 1);
            for (int k = 1; k < 8; k++)
                if (!push_leaf(o, f.x + h * (k & 1), f.y + h * ((k >> 1) & 1), f.z + h * (k >> 2),
                               f.level - 1, f.region))
                    return 0;
            for (size_t j = o->nleaf - 7; j < o->nleaf; j++)
                paint(lev, d, &o->leaf[j]);
            paint(lev, d, &o->leaf[i]);
            o->balance_splits++;
            split = 1;
        }
    }
    return 1;
}

/* ------------------------------------------------------------------ build */

static sim_status opts_check(const sim_tetmesh_opts *op, char *err, size_t err_sz)
{
    int a = op->min_cell_vox, b = op->max_cell_vox;
    if (a < 1 || b < a || b > 256 || (a & (a - 1)) || (b & (b - 1)))
        return sc_fail(err, err_sz, SIM_ERR_ARG,
                       "tet mesh: cells %d..%d voxels: need powers of two with 1 <= min <= max "
                       "<= 256",
                       a, b);
    return SIM_OK;
}

static sim_status finest_grid(oct_grid *g, const sim_labelmap *m, const sim_material_table *mat,
                              int cell, int levels, const sim_trimesh *s, int nsurf, char *err,
                              size_t err_sz)
{
    uint8_t reg_of[65536];
    memset(reg_of, 0, sizeof reg_of);
    for (int i = 0; i < mat->n; i++)
        reg_of[mat->entry[i].label] = (uint8_t)(mat->entry[i].region + 1);
    /* Padded to whole top blocks: the octree then partitions a box, empty leaves too. */
    int block = 1 << (levels - 1);
    g->d[0] = ((m->nx + cell - 1) / cell + block - 1) / block * block;
    g->d[1] = ((m->ny + cell - 1) / cell + block - 1) / block * block;
    g->d[2] = ((m->nz + cell - 1) / cell + block - 1) / block * block;
    size_t n = (size_t)g->d[0] * (size_t)g->d[1] * (size_t)g->d[2];
    g->code = (uint8_t *)sc_calloc(n, 1);
    g->surf = (uint8_t *)sc_calloc(n, 1);
    if (!g->code || !g->surf)
        return sc_fail(err, err_sz, SIM_ERR_NOMEM, "tet mesh: out of memory for %zu cells", n);
    for (int z = 0; z < g->d[2]; z++)
        for (int y = 0; y < g->d[1]; y++)
            for (int x = 0; x < g->d[0]; x++)
                g->code[gidx(g->d, x, y, z)] = cell_region(m, reg_of, cell, x, y, z);
    mark_surfaces(g, m, cell, s, nsurf);
    uint8_t *next = (uint8_t *)sc_calloc(n, 1);
    if (!next)
        return sc_fail(err, err_sz, SIM_ERR_NOMEM, "tet mesh: out of memory for %zu cells", n);
    size_t left = spread_regions(g, next);
    free(next);
    if (left)
        return sc_fail(err, err_sz, SIM_ERR_ARG,
                       "tet mesh: %zu cells hold surface vertices but touch no labelled voxel "
                       "(a surface from another label map?)",
                       left);
    return SIM_OK;
}

static sim_status build_leaves(sb_octree *o, const oct_grid *g, int levels, char *err,
                               size_t err_sz)
{
    oct_pyramid p;
    memset(&p, 0, sizeof p);
    memcpy(p.d[0], g->d, sizeof g->d);
    p.code[0] = g->code;
    p.levels = 1;
    sim_status st = SIM_OK;
    for (int l = 0; l + 1 < levels && st == SIM_OK; l++)
        if (!pyramid_level(&p, g, l))
            st = sc_fail(err, err_sz, SIM_ERR_NOMEM, "tet mesh: out of memory (pyramid)");
    int top = p.levels - 1;
    for (int z = 0; st == SIM_OK && z < p.d[top][2]; z++)
        for (int y = 0; st == SIM_OK && y < p.d[top][1]; y++)
            for (int x = 0; st == SIM_OK && x < p.d[top][0]; x++)
                if (!descend(o, &p, top, x, y, z))
                    st = sc_fail(err, err_sz, SIM_ERR_NOMEM, "tet mesh: out of memory (leaves)");
    pyramid_free(&p);
    return st;
}

sim_status sb_octree_build(sb_octree *o, const sim_labelmap *m, const sim_material_table *mat,
                           const sim_trimesh *surfaces, int nsurf, const sim_tetmesh_opts *opts,
                           char *err, size_t err_sz)
{
    memset(o, 0, sizeof *o);
    sim_status st = opts_check(opts, err, err_sz);
    if (st == SIM_OK)
        st = sim_labelmap_check(m, mat, err, err_sz);
    if (st == SIM_OK && (nsurf < 0 || (nsurf > 0 && !surfaces)))
        st = sc_fail(err, err_sz, SIM_ERR_ARG, "tet mesh: bad surface list");
    if (st != SIM_OK)
        return st;
    int levels = 1;
    while ((opts->min_cell_vox << (levels - 1)) < opts->max_cell_vox)
        levels++;
    oct_grid g;
    memset(&g, 0, sizeof g);
    st = finest_grid(&g, m, mat, opts->min_cell_vox, levels, surfaces, nsurf, err, err_sz);
    if (st == SIM_OK)
        st = build_leaves(o, &g, levels, err, err_sz);
    /* The finest-cell codes are no longer needed: reuse them as the level map. */
    if (st == SIM_OK) {
        memset(g.code, UNCOVERED, (size_t)g.d[0] * (size_t)g.d[1] * (size_t)g.d[2]);
        if (!balance(o, g.code, g.d))
            st = sc_fail(err, err_sz, SIM_ERR_NOMEM, "tet mesh: out of memory (balance)");
    }
    free(g.code);
    free(g.surf);
    if (st != SIM_OK) {
        sb_octree_free(o);
        return st;
    }
    o->fx = g.d[0], o->fy = g.d[1], o->fz = g.d[2], o->cell = opts->min_cell_vox;
    for (size_t i = 0; i < o->nleaf; i++)
        if (o->leaf[i].region != SB_EMPTY)
            o->covered += (size_t)1 << (3 * o->leaf[i].level);
    return SIM_OK;
}

void sb_octree_free(sb_octree *o)
{
    if (!o)
        return;
    free(o->leaf);
    memset(o, 0, sizeof *o);
}
