/* tetmesh.c: the octree's leaves (octree.c) split into tets that conform across leaves of
 * different sizes.
 *
 * Every leaf face is triangulated by one rule that depends only on the square and on the
 * set of leaf corners (all leaves, empty ones too, so the set is the same seen from either
 * side of the face):
 *   - its centre is a leaf corner (the leaf across is finer): the four quarter squares,
 *     each by this rule;
 *   - else, some edge midpoint is a leaf corner (a finer leaf touches that edge): a fan
 *     over its corners and those midpoints from the midpoint whose key is smallest;
 *   - else: two triangles split by the diagonal from its lowest to its highest corner.
 * Both leaves sharing a square make the same triangles, so the mesh conforms with no
 * hanging vertex. A leaf whose faces all take the last case becomes the 6 Kuhn tets
 * around its main diagonal (their faces on the cube are exactly those diagonals); any
 * other leaf is coned: a vertex at its centre joined to each of its face triangles. The
 * 2:1 balance keeps every face to these cases (an edge holds at most its midpoint).
 * Kuhn cells tile a cube with 6 tets; a transition leaf costs 12 to 32 (a face with m
 * midpoints gives 2 + m triangles, a subdivided face 8). A fan from a face centre would do
 * as well and cost 4 + m; a fan from the cell's corner instead of its centre would not
 * reproduce the face rule on the faces through that corner.
 *
 * Coordinates are integers in half finest cells, so corners, face centres and cell
 * centres are exact and every volume is checked exactly (int64) before it is written.
 */
#include <stdlib.h>
#include <string.h>

#include "../core/sc_base.h"
#include "geometry.h"
#include "geometry_internal.h"

#define NONE     UINT32_MAX
#define CORNER   0x80000000u
#define KEY_FREE UINT64_MAX

typedef struct vmap {
    uint64_t *key;
    uint32_t *val; /* vertex index | CORNER for leaf corners */
    size_t cap, n;
} vmap;

typedef struct tet_build {
    vmap map;
    sb_vec_u32 pos; /* (nvert x 3) half-cell coordinates */
    sb_vec_u32 tet;
    uint8_t *region;
    size_t nregion, cap_region;
    int oom;
} tet_build;

static uint64_t pack(const int32_t p[3])
{
    return (uint64_t)p[0] | (uint64_t)p[1] << 21 | (uint64_t)p[2] << 42;
}

static size_t slot_of(const vmap *m, uint64_t k)
{
    uint64_t h = k * 0x9e3779b97f4a7c15ull;
    h ^= h >> 29;
    size_t i = (size_t)h & (m->cap - 1);
    while (m->key[i] != KEY_FREE && m->key[i] != k)
        i = (i + 1) & (m->cap - 1);
    return i;
}

static int vmap_rehash(vmap *m, size_t cap)
{
    vmap n;
    n.cap = cap, n.n = m->n;
    n.key = (uint64_t *)malloc(cap * sizeof *n.key);
    n.val = (uint32_t *)malloc(cap * sizeof *n.val);
    if (!n.key || !n.val) {
        free(n.key);
        free(n.val);
        return 0;
    }
    memset(n.key, 0xff, cap * sizeof *n.key);
    for (size_t i = 0; i < m->cap; i++)
        if (m->key[i] != KEY_FREE) {
            size_t s = slot_of(&n, m->key[i]);
            n.key[s] = m->key[i], n.val[s] = m->val[i];
        }
    free(m->key);
    free(m->val);
    *m = n;
    return 1;
}

static int is_corner(const tet_build *b, const int32_t p[3])
{
    size_t s = slot_of(&b->map, pack(p));
    return b->map.key[s] != KEY_FREE && (b->map.val[s] & CORNER);
}

/* The vertex at p, made when new; corner marks a leaf corner. NONE when out of memory. */
static uint32_t vertex_at(tet_build *b, const int32_t p[3], int corner)
{
    if (2 * (b->map.n + 1) > b->map.cap && !vmap_rehash(&b->map, b->map.cap * 2)) {
        b->oom = 1;
        return NONE;
    }
    size_t s = slot_of(&b->map, pack(p));
    if (b->map.key[s] == KEY_FREE) {
        uint32_t v = (uint32_t)(b->pos.n / 3);
        if (v >= 0x7fffffffu || !sb_vec_u32_push(&b->pos, (const uint32_t *)p, 3)) {
            b->oom = 1;
            return NONE;
        }
        b->map.key[s] = pack(p);
        b->map.val[s] = v | (corner ? CORNER : 0u);
        b->map.n++;
    }
    return b->map.val[s] & ~CORNER;
}

/* Append tet (a, b, c, d) of the region, ordered for a positive volume. */
static void emit_tet(tet_build *b, uint32_t a, uint32_t c, uint32_t d, uint32_t e, uint8_t region)
{
    if (b->oom || a == NONE || c == NONE || d == NONE || e == NONE) {
        b->oom = 1;
        return;
    }
    const uint32_t *P = b->pos.p;
    int64_t u[3], v[3], w[3];
    for (int k = 0; k < 3; k++) {
        u[k] =
            (int64_t)(int32_t)P[3 * (size_t)c + (size_t)k] - (int32_t)P[3 * (size_t)a + (size_t)k];
        v[k] =
            (int64_t)(int32_t)P[3 * (size_t)d + (size_t)k] - (int32_t)P[3 * (size_t)a + (size_t)k];
        w[k] =
            (int64_t)(int32_t)P[3 * (size_t)e + (size_t)k] - (int32_t)P[3 * (size_t)a + (size_t)k];
    }
    int64_t vol = u[0] * (v[1] * w[2] - v[2] * w[1]) - u[1] * (v[0] * w[2] - v[2] * w[0]) +
                  u[2] * (v[0] * w[1] - v[1] * w[0]);
    SC_ASSERT(vol != 0);
    uint32_t t[4] = {a, c, d, e};
    if (vol < 0)
        t[2] = e, t[3] = d;
    if (!sb_vec_u32_push(&b->tet, t, 4) ||
        !sb_grow((void **)&b->region, &b->cap_region, b->nregion + 1, 1)) {
        b->oom = 1;
        return;
    }
    b->region[b->nregion++] = region;
}

/* A square: origin o, in-plane unit axes u and v (0, 1, 2), side h half-cells. */
typedef struct square {
    int32_t o[3];
    int u, v;
    int32_t h;
} square;

static void sq_point(const square *s, int32_t fu, int32_t fv, int32_t out[3])
{
    memcpy(out, s->o, sizeof s->o);
    out[s->u] += fu;
    out[s->v] += fv;
}

static int sq_subdivided(const tet_build *b, const square *s)
{
    int32_t c[3];
    sq_point(s, s->h / 2, s->h / 2, c);
    return s->h >= 4 && is_corner(b, c);
}

/* A square's triangulation by the face rule: subdivided, or a fan from pts[hub] over its
 * boundary pts[0..n) (counter-clockwise in (u, v); pts[0] its lowest corner). */
typedef struct face_fan {
    int sub, n, hub;
    int32_t pts[8][3];
} face_fan;

/* The hub: the lowest corner when no midpoint is on its edges (a plain square's diagonal
 * then runs lowest to highest), else the highest corner when none is on its edges, else
 * the midpoint with the smallest key. Both sides of the square agree on each; a fan from a
 * corner free of midpoints, or from a midpoint, has no flat triangle (only the hub's own
 * edges' points are on a line with it, and those are its two neighbours). */
static void face_rule(const tet_build *b, const square *s, face_fan *f)
{
    const int32_t h = s->h, g = s->h / 2;
    const int32_t at[8][2] = {{0, 0}, {g, 0}, {h, 0}, {h, g}, {h, h}, {g, h}, {0, h}, {0, g}};
    f->sub = sq_subdivided(b, s);
    f->n = 0, f->hub = 0;
    if (f->sub)
        return;
    int present = 0, idx[8] = {0}, best_mid = -1;
    for (int k = 0; k < 8; k++) {
        int32_t p[3];
        sq_point(s, at[k][0], at[k][1], p);
        if ((k & 1) && !is_corner(b, p))
            continue;
        present |= 1 << k;
        idx[k] = f->n;
        memcpy(f->pts[f->n++], p, sizeof p);
        if ((k & 1) && (best_mid < 0 || pack(p) < pack(f->pts[idx[best_mid]])))
            best_mid = k;
    }
    if (!(present & 0x82)) /* no midpoint on the lowest corner's edges (points 7, 1) */
        f->hub = idx[0];
    else if (!(present & 0x28)) /* nor on the highest corner's (points 3, 5) */
        f->hub = idx[4];
    else
        f->hub = idx[best_mid];
}

static void sq_cone(tet_build *b, const square *s, uint32_t apex, uint8_t region);

/* Cone square s, whose face rule gave f, to apex. */
static void fan_cone(tet_build *b, const square *s, const face_fan *f, uint32_t apex,
                     uint8_t region)
{
    if (f->sub) {
        for (int k = 0; k < 4; k++) {
            square q = *s;
            q.h = s->h / 2;
            sq_point(s, (k & 1) * q.h, (k >> 1) * q.h, q.o);
            sq_cone(b, &q, apex, region);
        }
        return;
    }
    uint32_t id[8];
    for (int k = 0; k < f->n; k++)
        id[k] = vertex_at(b, f->pts[k], 0);
    for (int k = 1; k + 1 < f->n; k++)
        emit_tet(b, apex, id[f->hub], id[(f->hub + k) % f->n], id[(f->hub + k + 1) % f->n], region);
}

/* Triangulate square s by the face rule and cone each triangle to apex. */
static void sq_cone(tet_build *b, const square *s, uint32_t apex, uint8_t region)
{
    face_fan f;
    face_rule(b, s, &f);
    fan_cone(b, s, &f, apex, region);
}

/* Faces 2a and 2a + 1: the leaf's low and high faces across axis a. */
static void leaf_faces(const sb_leaf *f, square sq[6])
{
    int32_t h = 2 << f->level, o[3] = {2 * f->x, 2 * f->y, 2 * f->z};
    for (int a = 0; a < 3; a++)
        for (int side = 0; side < 2; side++) {
            square *s = &sq[2 * a + side];
            memcpy(s->o, o, sizeof o);
            s->o[a] += side * h;
            s->u = (a + 1) % 3, s->v = (a + 2) % 3, s->h = h;
        }
}

/* Can the leaf be coned from its corner c (side 0: lowest, 1: highest)? Only if each face
 * through c is, by the face rule, a fan from c: then the cone over the other three faces
 * reproduces those faces exactly. */
static int corner_apex_ok(const face_fan ff[6], int side, const int32_t c[3])
{
    for (int a = 0; a < 3; a++) {
        const face_fan *f = &ff[2 * a + side];
        /* a plain square's diagonal joins its lowest and highest corners, one of them c */
        if (f->sub || (f->n > 4 && memcmp(f->pts[f->hub], c, sizeof f->pts[0]) != 0))
            return 0;
    }
    return 1;
}

/* Cone the leaf from its lowest corner, else its highest, else a new vertex at its centre.
 * A leaf with no finer neighbour, coned from its lowest corner, is the 6 Kuhn tets (the
 * paths from lowest to highest corner along x, y, z in every order). Returns 0 (Kuhn),
 * 1 (other corner cone) or 2 (centre). */
static int leaf_tets(tet_build *b, const sb_leaf *f)
{
    square sq[6];
    face_fan ff[6];
    leaf_faces(f, sq);
    int plain = 1;
    for (int k = 0; k < 6; k++) {
        face_rule(b, &sq[k], &ff[k]);
        plain &= !ff[k].sub && ff[k].n == 4;
    }
    int32_t s = 2 << f->level, lo[3] = {2 * f->x, 2 * f->y, 2 * f->z};
    int32_t hi[3] = {lo[0] + s, lo[1] + s, lo[2] + s},
            mid[3] = {lo[0] + s / 2, lo[1] + s / 2, lo[2] + s / 2};
    int side = corner_apex_ok(ff, 0, lo) ? 0 : corner_apex_ok(ff, 1, hi) ? 1 : 2;
    uint32_t apex = vertex_at(b, side == 0 ? lo : side == 1 ? hi : mid, side != 2);
    for (int k = 0; k < 6; k++)
        if (side == 2 || (k & 1) != side)
            fan_cone(b, &sq[k], &ff[k], apex, f->region);
    return side == 0 && plain ? 0 : side == 2 ? 2 : 1;
}

static int add_corners(tet_build *b, const sb_octree *o)
{
    for (size_t i = 0; i < o->nleaf; i++) {
        const sb_leaf *f = &o->leaf[i];
        for (int k = 0; k < 8; k++) {
            int32_t p[3] = {2 * f->x + ((k & 1) << (f->level + 1)),
                            2 * f->y + (((k >> 1) & 1) << (f->level + 1)),
                            2 * f->z + ((k >> 2) << (f->level + 1))};
            if (vertex_at(b, p, 1) == NONE)
                return 0;
        }
    }
    return 1;
}

/* Keep only the vertices tets use (empty leaves' corners go), in half-cell units. */
static sim_status finish_mesh(sim_tetmesh *out, tet_build *b, const sim_labelmap *m, int cell,
                              char *err, size_t err_sz)
{
    size_t nv = b->pos.n / 3, nt = b->tet.n / 4;
    uint32_t *remap = (uint32_t *)sc_calloc(nv + 1, sizeof *remap);
    float *vert = (float *)sc_calloc(3 * nv + 1, sizeof *vert);
    if (!remap || !vert || nt > 0x7fffffffu) {
        free(remap);
        free(vert);
        return sc_fail(err, err_sz, SIM_ERR_NOMEM, "tet mesh: out of memory (%zu tets)", nt);
    }
    for (size_t i = 0; i < 4 * nt; i++)
        remap[b->tet.p[i]] = 1;
    uint32_t n = 0;
    for (size_t v = 0; v < nv; v++) {
        if (!remap[v])
            continue;
        for (int a = 0; a < 3; a++)
            vert[3 * (size_t)n + (size_t)a] =
                (float)((double)(int32_t)b->pos.p[3 * v + (size_t)a] * 0.5 * (double)cell *
                        (double)m->spacing_mm[a]);
        remap[v] = n++;
    }
    for (size_t i = 0; i < 4 * nt; i++)
        b->tet.p[i] = remap[b->tet.p[i]];
    free(remap);
    out->nvert = (int)n;
    out->ntet = (int)nt;
    out->vert = vert;
    out->tet = b->tet.p;
    out->region = b->region;
    b->tet.p = NULL, b->region = NULL;
    return SIM_OK;
}

sim_tetmesh_opts sim_default_tetmesh_opts(void)
{
    sim_tetmesh_opts o;
    o.min_cell_vox = 1;
    o.max_cell_vox = 16;
    return o;
}

static void fill_stats(sim_tetmesh_stats *s, const sb_octree *o)
{
    s->balance_splits = o->balance_splits;
    s->covered_blocks = o->covered;
    for (size_t i = 0; i < o->nleaf; i++)
        if (o->leaf[i].region != SB_EMPTY && o->leaf[i].level < 9)
            s->leaves[o->leaf[i].level]++;
}

static sim_status tetrahedralize(sim_tetmesh *out, const sb_octree *o, const sim_labelmap *m,
                                 sim_tetmesh_stats *stats, char *err, size_t err_sz)
{
    tet_build b;
    memset(&b, 0, sizeof b);
    sim_status st = SIM_OK;
    if (!vmap_rehash(&b.map, 1024) || !add_corners(&b, o))
        b.oom = 1;
    for (size_t i = 0; i < o->nleaf && !b.oom; i++) {
        if (o->leaf[i].region == SB_EMPTY)
            continue;
        int kind = leaf_tets(&b, &o->leaf[i]);
        stats->kuhn_leaves += kind == 0;
        stats->corner_leaves += kind == 1;
        stats->centre_leaves += kind == 2;
    }
    if (b.oom)
        st =
            sc_fail(err, err_sz, SIM_ERR_NOMEM, "tet mesh: out of memory at %zu tets", b.tet.n / 4);
    else
        st = finish_mesh(out, &b, m, o->cell, err, err_sz);
    free(b.map.key);
    free(b.map.val);
    free(b.pos.p);
    free(b.tet.p);
    free(b.region);
    return st;
}

sim_status sim_tetmesh_build(sim_tetmesh *out, const sim_labelmap *m, const sim_material_table *mat,
                             const sim_trimesh *surfaces, int nsurf, const sim_tetmesh_opts *opts,
                             sim_tetmesh_stats *stats, char *err, size_t err_sz)
{
    if (!out)
        return sc_fail(err, err_sz, SIM_ERR_ARG, "tet mesh: out is NULL");
    memset(out, 0, sizeof *out);
    sim_tetmesh_stats local;
    stats = stats ? stats : &local;
    memset(stats, 0, sizeof *stats);
    sim_tetmesh_opts op = opts ? *opts : sim_default_tetmesh_opts();
    sb_octree o;
    sim_status st = sb_octree_build(&o, m, mat, surfaces, nsurf, &op, err, err_sz);
    if (st != SIM_OK)
        return st;
    fill_stats(stats, &o);
    st = tetrahedralize(out, &o, m, stats, err, err_sz);
    sb_octree_free(&o);
    return st;
}

void sim_tetmesh_free(sim_tetmesh *t)
{
    if (!t)
        return;
    free(t->vert);
    free(t->tet);
    free(t->region);
    memset(t, 0, sizeof *t);
}
