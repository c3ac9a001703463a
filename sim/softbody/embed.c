/* embed.c: the hybrid model's mapping (SOFTBODY.md, claim 1 and 5): every surface vertex
 * gets the tet that contains it and its barycentric weights, so that at rest
 * sum_k w_k x_k gives the vertex back and, when the tets deform, the surface follows
 * (SOFA's BarycentricMapping, Ten Minute Physics 12's skinning).
 *
 * Point location: a hierarchy of uniform grids (cells of h0, 2 h0, 4 h0, ... with h0 the
 * smallest tet's extent); each tet lives on the level whose cells are at least its size,
 * listed in the (at most 8) cells its box overlaps there, as one sorted table of
 * (level, cell) keys. So the fine tets at a surface and the coarse tets inside cost the
 * same few entries each. A point tests the tets of its cell on every level (then of the
 * 26 cells around it where none contains it); the tet whose smallest weight is largest
 * wins, so a point just outside by rounding gets the nearest tet. Weights are solved in double
 * (Cramer's rule) and the first is 1 minus the others.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../core/sc_base.h"
#include "geometry.h"

#define GRID_LEVELS 16

/* One entry per (cell, tet): key = level << 60 | cx << 40 | cy << 20 | cz. */
typedef struct grid_entry {
    uint64_t key;
    uint32_t tet;
} grid_entry;

typedef struct tet_grid {
    double lo[3], h0;
    int levels_used; /* bit l: some tet lives on level l */
    grid_entry *e;
    size_t n;
} tet_grid;

static int cmp_entry(const void *a, const void *b)
{
    const grid_entry *x = (const grid_entry *)a, *y = (const grid_entry *)b;
    if (x->key != y->key)
        return x->key < y->key ? -1 : 1;
    return x->tet < y->tet ? -1 : x->tet > y->tet;
}

static uint64_t cell_key(int level, const int64_t c[3])
{
    return (uint64_t)level << 60 | (uint64_t)c[0] << 40 | (uint64_t)c[1] << 20 | (uint64_t)c[2];
}

static void tet_box(const sim_tetmesh *t, size_t k, double lo[3], double hi[3])
{
    for (int a = 0; a < 3; a++)
        lo[a] = (double)INFINITY, hi[a] = -(double)INFINITY;
    for (int j = 0; j < 4; j++)
        for (int a = 0; a < 3; a++) {
            double x = (double)t->vert[3 * (size_t)t->tet[4 * k + (size_t)j] + (size_t)a];
            lo[a] = x < lo[a] ? x : lo[a];
            hi[a] = x > hi[a] ? x : hi[a];
        }
}

static double box_extent(const double lo[3], const double hi[3])
{
    double e = 0.0;
    for (int a = 0; a < 3; a++)
        e = hi[a] - lo[a] > e ? hi[a] - lo[a] : e;
    return e;
}

/* The grid's corner, and the base cell: the smallest tet's extent (at least 1e-6 of the
 * mesh's), so every tet lives on the level whose cells are as large as it. */
static int grid_frame(tet_grid *g, const sim_tetmesh *t)
{
    double hi[3], emin = (double)INFINITY;
    for (int a = 0; a < 3; a++)
        g->lo[a] = (double)INFINITY, hi[a] = -(double)INFINITY;
    for (size_t v = 0; v < (size_t)t->nvert; v++)
        for (int a = 0; a < 3; a++) {
            double x = (double)t->vert[3 * v + (size_t)a];
            g->lo[a] = x < g->lo[a] ? x : g->lo[a];
            hi[a] = x > hi[a] ? x : hi[a];
        }
    for (size_t k = 0; k < (size_t)t->ntet; k++) {
        double lo[3], h[3];
        tet_box(t, k, lo, h);
        double e = box_extent(lo, h);
        emin = e < emin ? e : emin;
    }
    double span = box_extent(g->lo, hi);
    if (!(span > 0.0) || !isfinite(span))
        return 0;
    g->h0 = emin > span * 1e-6 ? emin : span * 1e-6;
    /* cell coordinates must fit their 20 bits */
    while (span / g->h0 >= (double)(1 << 19))
        g->h0 *= 2.0;
    /* The corner on a multiple of the top level's cell: an octree mesh's leaves then sit
     * on the cells of their own size, one cell each. */
    double top = g->h0 * (double)(1 << (GRID_LEVELS - 1));
    for (int a = 0; a < 3; a++)
        g->lo[a] = floor(g->lo[a] / top) * top;
    return 1;
}

/* Tet k's level and the cells (at most 2 a side) its box, shrunk by a hair, overlaps. */
static int tet_cells(const tet_grid *g, const sim_tetmesh *t, size_t k, int *level, int64_t clo[3],
                     int64_t chi[3])
{
    double lo[3], hi[3];
    tet_box(t, k, lo, hi);
    double ext = box_extent(lo, hi), h = g->h0;
    int l = 0;
    /* Float positions put a cube's tets a few ulps off the grid: a tolerance keeps a tet
     * as large as a cell on that cell's level, and in that one cell, instead of the next
     * level up among eight times as many, or in eight cells. */
    while (h < ext * (1.0 - 1e-3) && l < GRID_LEVELS - 1)
        h *= 2.0, l++;
    *level = l;
    int n = 1;
    for (int a = 0; a < 3; a++) {
        double eps = 1e-3 * h;
        clo[a] = (int64_t)floor((lo[a] + eps - g->lo[a]) / h);
        chi[a] = (int64_t)floor((hi[a] - eps - g->lo[a]) / h);
        chi[a] = chi[a] < clo[a] ? clo[a] : chi[a];
        n *= (int)(chi[a] - clo[a] + 1);
    }
    return n;
}

static int grid_build(tet_grid *g, const sim_tetmesh *t)
{
    if (!grid_frame(g, t))
        return 0;
    size_t cap = 8 * (size_t)t->ntet;
    g->e = (grid_entry *)sc_calloc(cap, sizeof *g->e);
    if (!g->e)
        return 0;
    for (size_t k = 0; k < (size_t)t->ntet; k++) {
        int l;
        int64_t lo[3], hi[3], c[3];
        tet_cells(g, t, k, &l, lo, hi);
        g->levels_used |= 1 << l;
        for (c[2] = lo[2]; c[2] <= hi[2]; c[2]++)
            for (c[1] = lo[1]; c[1] <= hi[1]; c[1]++)
                for (c[0] = lo[0]; c[0] <= hi[0]; c[0]++) {
                    g->e[g->n].key = cell_key(l, c);
                    g->e[g->n++].tet = (uint32_t)k;
                }
    }
    qsort(g->e, g->n, sizeof *g->e, cmp_entry);
    return 1;
}

/* First entry with this key, or g->n. */
static size_t grid_find(const tet_grid *g, uint64_t key)
{
    size_t a = 0, b = g->n;
    while (a < b) {
        size_t m = a + (b - a) / 2;
        if (g->e[m].key < key)
            a = m + 1;
        else
            b = m;
    }
    return a;
}

/* Barycentric weights of p in tet k (double). Returns the smallest. */
static double barycentric(const sim_tetmesh *t, size_t k, const double p[3], double w[4])
{
    const uint32_t *i = t->tet + 4 * k;
    double a[3], e[3][3], r[3];
    for (int c = 0; c < 3; c++)
        a[c] = (double)t->vert[3 * (size_t)i[0] + (size_t)c];
    for (int j = 0; j < 3; j++)
        for (int c = 0; c < 3; c++)
            e[j][c] = (double)t->vert[3 * (size_t)i[j + 1] + (size_t)c] - a[c];
    for (int c = 0; c < 3; c++)
        r[c] = p[c] - a[c];
    /* e[j] are the columns; Cramer's rule with triple products. */
    double det = e[0][0] * (e[1][1] * e[2][2] - e[1][2] * e[2][1]) -
                 e[1][0] * (e[0][1] * e[2][2] - e[0][2] * e[2][1]) +
                 e[2][0] * (e[0][1] * e[1][2] - e[0][2] * e[1][1]);
    double m[3][3];
    for (int j = 0; j < 3; j++) {
        memcpy(m, e, sizeof m);
        memcpy(m[j], r, sizeof r);
        w[j + 1] = (m[0][0] * (m[1][1] * m[2][2] - m[1][2] * m[2][1]) -
                    m[1][0] * (m[0][1] * m[2][2] - m[0][2] * m[2][1]) +
                    m[2][0] * (m[0][1] * m[1][2] - m[0][2] * m[1][1])) /
                   det;
    }
    w[0] = 1.0 - w[1] - w[2] - w[3];
    double mn = w[0];
    for (int j = 1; j < 4; j++)
        mn = w[j] < mn ? w[j] : mn;
    return mn;
}

/* The best tet among the cells within ring r of p's cell on every level; -INFINITY when
 * none is listed there. */
static double locate(const tet_grid *g, const sim_tetmesh *t, const double p[3], int r,
                     uint32_t *best, double bw[4])
{
    double best_min = -(double)INFINITY, h = g->h0;
    for (int l = 0; l < GRID_LEVELS; l++, h *= 2.0) {
        if (!((g->levels_used >> l) & 1))
            continue;
        int64_t c[3], q[3];
        for (int a = 0; a < 3; a++)
            c[a] = (int64_t)floor((p[a] - g->lo[a]) / h);
        for (q[2] = c[2] - r; q[2] <= c[2] + r; q[2]++)
            for (q[1] = c[1] - r; q[1] <= c[1] + r; q[1]++)
                for (q[0] = c[0] - r; q[0] <= c[0] + r; q[0]++) {
                    if (q[0] < 0 || q[1] < 0 || q[2] < 0 || q[0] >= (1 << 20) ||
                        q[1] >= (1 << 20) || q[2] >= (1 << 20))
                        continue;
                    uint64_t key = cell_key(l, q);
                    for (size_t i = grid_find(g, key); i < g->n && g->e[i].key == key; i++) {
                        double w[4], mn = barycentric(t, g->e[i].tet, p, w);
                        if (mn > best_min) {
                            best_min = mn;
                            *best = g->e[i].tet;
                            memcpy(bw, w, sizeof w);
                        }
                    }
                }
    }
    return best_min;
}

static sim_status embed_all(sim_embedding *out, const tet_grid *g, const sim_tetmesh *t,
                            const float *points, char *err, size_t err_sz)
{
    out->min_weight = 1.0f;
    for (int i = 0; i < out->npoint; i++) {
        double p[3] = {(double)points[3 * (size_t)i], (double)points[3 * (size_t)i + 1],
                       (double)points[3 * (size_t)i + 2]};
        uint32_t k = 0;
        double w[4];
        double mn = locate(g, t, p, 0, &k, w);
        /* rounding leaves points on a cell's face a hair outside; only a miss looks wider */
        if (mn < -1e-9)
            mn = locate(g, t, p, 1, &k, w);
        if (mn == -(double)INFINITY)
            return sc_fail(err, err_sz, SIM_ERR_ARG,
                           "embed: point %d (%g, %g, %g mm) is far from every tet", i, p[0], p[1],
                           p[2]);
        out->outside += mn < -1e-6;
        out->tet[i] = k;
        for (int j = 0; j < 4; j++)
            out->weight[4 * (size_t)i + (size_t)j] = (float)w[j];
        out->min_weight = mn < (double)out->min_weight ? (float)mn : out->min_weight;
    }
    return SIM_OK;
}

sim_status sim_embed_points(sim_embedding *out, const sim_tetmesh *t, const float *points,
                            int npoint, char *err, size_t err_sz)
{
    if (!out)
        return sc_fail(err, err_sz, SIM_ERR_ARG, "embed: out is NULL");
    memset(out, 0, sizeof *out);
    if (!t || t->ntet < 1 || !t->tet || !t->vert || npoint < 0 || (npoint > 0 && !points))
        return sc_fail(err, err_sz, SIM_ERR_ARG, "embed: need a tet mesh and points");
    tet_grid g;
    memset(&g, 0, sizeof g);
    out->npoint = npoint;
    out->tet = (uint32_t *)sc_calloc((size_t)npoint + 1, sizeof *out->tet);
    out->weight = (float *)sc_calloc(4 * (size_t)npoint + 1, sizeof *out->weight);
    sim_status st = SIM_OK;
    if (!out->tet || !out->weight || !grid_build(&g, t))
        st = sc_fail(err, err_sz, SIM_ERR_NOMEM, "embed: out of memory");
    if (st == SIM_OK)
        st = embed_all(out, &g, t, points, err, err_sz);
    free(g.e);
    if (st != SIM_OK)
        sim_embedding_free(out);
    return st;
}

void sim_embed_eval(const sim_embedding *e, const uint32_t *tets, const float *vert, float *out)
{
    SC_ASSERT(e && tets && vert && (out || e->npoint == 0));
    for (int i = 0; i < e->npoint; i++) {
        const uint32_t *q = tets + 4 * (size_t)e->tet[i];
        const float *w = e->weight + 4 * (size_t)i;
        for (int a = 0; a < 3; a++)
            out[3 * (size_t)i + (size_t)a] = w[0] * vert[3 * (size_t)q[0] + (size_t)a] +
                                             w[1] * vert[3 * (size_t)q[1] + (size_t)a] +
                                             w[2] * vert[3 * (size_t)q[2] + (size_t)a] +
                                             w[3] * vert[3 * (size_t)q[3] + (size_t)a];
    }
}

void sim_embedding_free(sim_embedding *e)
{
    if (!e)
        return;
    free(e->tet);
    free(e->weight);
    memset(e, 0, sizeof *e);
}
