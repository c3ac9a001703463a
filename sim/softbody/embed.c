/* embed.c: the hybrid model's mapping (SOFTBODY.md, claim 1 and 5): every surface vertex
 * gets the tet that contains it and its barycentric weights, so that at rest
 * sum_k w_k x_k gives the vertex back and, when the tets deform, the surface follows
 * (SOFA's BarycentricMapping, Ten Minute Physics 12's skinning).
 *
 * Point location: a uniform grid over the mesh's box, each cell listing the tets whose
 * bounding box overlaps it (a CSR table built by counting, then filling). The cell size
 * starts at the mean tet's size and grows until the table holds at most 16 entries per
 * tet, so a mesh whose coarse interior tets span many cells stays cheap. A point tests
 * the tets of its cell (then of the 26 around it if none contains it); the tet whose
 * smallest weight is largest wins, so a point just outside by rounding gets the nearest
 * tet. Weights are solved in double (Cramer's rule) and the first is 1 minus the others.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../core/sc_base.h"
#include "geometry.h"

typedef struct tet_grid {
    double lo[3], h;
    int d[3];
    uint32_t *start; /* (ncell + 1) */
    uint32_t *item;  /* tets per cell */
} tet_grid;

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

static int cell_coord(const tet_grid *g, double x, int a)
{
    double c = floor((x - g->lo[a]) / g->h);
    return c < 0.0 ? 0 : c >= (double)g->d[a] ? g->d[a] - 1 : (int)c;
}

/* Cells tet k's box overlaps: lo and hi cell coordinates. */
static void tet_cells(const tet_grid *g, const sim_tetmesh *t, size_t k, int clo[3], int chi[3])
{
    double lo[3], hi[3];
    tet_box(t, k, lo, hi);
    for (int a = 0; a < 3; a++)
        clo[a] = cell_coord(g, lo[a], a), chi[a] = cell_coord(g, hi[a], a);
}

static size_t grid_entries(const tet_grid *g, const sim_tetmesh *t)
{
    size_t n = 0;
    for (size_t k = 0; k < (size_t)t->ntet; k++) {
        int lo[3], hi[3];
        tet_cells(g, t, k, lo, hi);
        n +=
            (size_t)(hi[0] - lo[0] + 1) * (size_t)(hi[1] - lo[1] + 1) * (size_t)(hi[2] - lo[2] + 1);
    }
    return n;
}

static void grid_size(tet_grid *g, const sim_tetmesh *t)
{
    double hi[3];
    for (int a = 0; a < 3; a++)
        g->lo[a] = (double)INFINITY, hi[a] = -(double)INFINITY;
    for (size_t v = 0; v < (size_t)t->nvert; v++)
        for (int a = 0; a < 3; a++) {
            double x = (double)t->vert[3 * v + (size_t)a];
            g->lo[a] = x < g->lo[a] ? x : g->lo[a];
            hi[a] = x > hi[a] ? x : hi[a];
        }
    double vol = 1.0;
    for (int a = 0; a < 3; a++)
        vol *= hi[a] - g->lo[a] > 0.0 ? hi[a] - g->lo[a] : 1.0;
    g->h = cbrt(vol / (double)t->ntet);
    for (;;) {
        for (int a = 0; a < 3; a++) {
            double n = floor((hi[a] - g->lo[a]) / g->h) + 1.0;
            g->d[a] = n > 1024.0 ? 1024 : (int)n;
        }
        if (g->d[0] < 1024 && g->d[1] < 1024 && g->d[2] < 1024 &&
            grid_entries(g, t) <= 16 * (size_t)t->ntet)
            return;
        g->h *= 1.5;
    }
}

static int grid_build(tet_grid *g, const sim_tetmesh *t)
{
    grid_size(g, t);
    size_t ncell = (size_t)g->d[0] * (size_t)g->d[1] * (size_t)g->d[2];
    size_t nent = grid_entries(g, t);
    g->start = (uint32_t *)sc_calloc(ncell + 1, sizeof *g->start);
    g->item = (uint32_t *)sc_calloc(nent + 1, sizeof *g->item);
    uint32_t *fill = (uint32_t *)sc_calloc(ncell + 1, sizeof *fill);
    if (!g->start || !g->item || !fill || nent >= UINT32_MAX) {
        free(fill);
        return 0;
    }
    for (int pass = 0; pass < 2; pass++) {
        for (size_t k = 0; k < (size_t)t->ntet; k++) {
            int lo[3], hi[3];
            tet_cells(g, t, k, lo, hi);
            for (int z = lo[2]; z <= hi[2]; z++)
                for (int y = lo[1]; y <= hi[1]; y++)
                    for (int x = lo[0]; x <= hi[0]; x++) {
                        size_t c =
                            (size_t)x + (size_t)g->d[0] * ((size_t)y + (size_t)g->d[1] * (size_t)z);
                        if (pass == 0)
                            g->start[c + 1]++;
                        else
                            g->item[fill[c]++] = (uint32_t)k;
                    }
        }
        if (pass == 0) {
            for (size_t c = 0; c < ncell; c++)
                g->start[c + 1] += g->start[c];
            memcpy(fill, g->start, ncell * sizeof *fill);
        }
    }
    free(fill);
    return 1;
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

/* The best tet among the cells within ring r of p's cell; -(double)INFINITY when none listed. */
static double locate(const tet_grid *g, const sim_tetmesh *t, const double p[3], int r,
                     uint32_t *best, double bw[4])
{
    double best_min = -(double)INFINITY;
    int c[3];
    for (int a = 0; a < 3; a++)
        c[a] = cell_coord(g, p[a], a);
    for (int z = c[2] - r; z <= c[2] + r; z++)
        for (int y = c[1] - r; y <= c[1] + r; y++)
            for (int x = c[0] - r; x <= c[0] + r; x++) {
                if (x < 0 || y < 0 || z < 0 || x >= g->d[0] || y >= g->d[1] || z >= g->d[2])
                    continue;
                size_t cell =
                    (size_t)x + (size_t)g->d[0] * ((size_t)y + (size_t)g->d[1] * (size_t)z);
                for (uint32_t k = g->start[cell]; k < g->start[cell + 1]; k++) {
                    double w[4], mn = barycentric(t, g->item[k], p, w);
                    if (mn > best_min) {
                        best_min = mn;
                        *best = g->item[k];
                        memcpy(bw, w, sizeof w);
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
        if (mn < 0.0)
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
    free(g.start);
    free(g.item);
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
