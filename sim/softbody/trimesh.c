/* trimesh.c: a label map's surfaces: marching cubes (mc.c) on the inside indicator, Taubin
 * smoothing, meshoptimizer's decimation, and the checks that the result is a closed,
 * manifold, outward surface.
 *
 * Taubin smoothing (G. Taubin, "A signal processing approach to fair surface design",
 * SIGGRAPH 1995): a Laplacian step with lambda > 0 (it smooths and shrinks) then one with
 * mu < -lambda (it inflates back); together a low-pass filter that removes the staircase
 * of a voxel surface without shrinking it the way plain Laplacian smoothing does. Uniform
 * umbrella weights: the neighbours of v are the vertices its triangles' edges leave v for,
 * each once on a closed oriented surface.
 *
 * Decimation is meshoptimizer's meshopt_simplify (edge collapses under a quadric error
 * bound, collapses that flip a triangle refused); the result keeps a subset of the
 * vertices at their positions. It is checked like everything else: a defect is an error,
 * never a silent output.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../core/sc_base.h"
#include "geometry.h"
#include "geometry_internal.h"

#include <meshoptimizer.h>

sim_surface_opts sim_default_surface_opts(void)
{
    sim_surface_opts o;
    o.presmooth = 0;
    o.smooth_iters = 10;
    o.taubin_lambda = 0.5f;
    o.taubin_mu = -0.53f;
    o.target_verts = 0;
    o.max_error_mm = 1.0f;
    return o;
}

void sim_trimesh_free(sim_trimesh *m)
{
    if (!m)
        return;
    free(m->vert);
    free(m->tri);
    memset(m, 0, sizeof *m);
}

/* ------------------------------------------------------------------ Taubin */

/* nbr_start (nvert + 1), nbr: v's neighbours are nbr[nbr_start[v] .. nbr_start[v+1]). */
static int build_neighbours(const sim_trimesh *m, uint32_t **start_out, uint32_t **nbr_out)
{
    uint32_t *start = (uint32_t *)sc_calloc((size_t)m->nvert + 1, sizeof *start);
    uint32_t *nbr = (uint32_t *)sc_calloc(3 * (size_t)m->ntri + 1, sizeof *nbr);
    if (!start || !nbr) {
        free(start);
        free(nbr);
        return 0;
    }
    for (size_t i = 0; i < 3 * (size_t)m->ntri; i++)
        start[m->tri[i] + 1]++;
    for (int v = 0; v < m->nvert; v++)
        start[v + 1] += start[v];
    uint32_t *fill = (uint32_t *)sc_calloc((size_t)m->nvert + 1, sizeof *fill);
    if (!fill) {
        free(start);
        free(nbr);
        return 0;
    }
    memcpy(fill, start, (size_t)m->nvert * sizeof *fill);
    for (size_t t = 0; t < (size_t)m->ntri; t++)
        for (int k = 0; k < 3; k++) {
            uint32_t v = m->tri[3 * t + (size_t)k], a = m->tri[3 * t + (size_t)((k + 1) % 3)];
            nbr[fill[v]++] = a;
        }
    free(fill);
    *start_out = start;
    *nbr_out = nbr;
    return 1;
}

/* One umbrella step: dst = src + w (mean of neighbours - src). */
static void umbrella_step(const sim_trimesh *m, const uint32_t *start, const uint32_t *nbr,
                          const float *src, float *dst, float w)
{
    for (int v = 0; v < m->nvert; v++) {
        const float *p = src + 3 * (size_t)v;
        uint32_t b = start[v], e = start[v + 1];
        if (b == e) {
            memcpy(dst + 3 * (size_t)v, p, 3 * sizeof(float));
            continue;
        }
        float s[3] = {0.0f, 0.0f, 0.0f};
        for (uint32_t k = b; k < e; k++)
            for (int a = 0; a < 3; a++)
                s[a] += src[3 * (size_t)nbr[k] + (size_t)a];
        float inv = 1.0f / (float)(e - b);
        for (int a = 0; a < 3; a++)
            dst[3 * (size_t)v + (size_t)a] = p[a] + w * (s[a] * inv - p[a]);
    }
}

sim_status sim_trimesh_taubin(sim_trimesh *m, int iters, float lambda, float mu, char *err,
                              size_t err_sz)
{
    if (!m || iters < 0 || iters > 10000 || !isfinite(lambda) || !isfinite(mu) ||
        !(lambda > 0.0f) || !(mu < -lambda))
        return sc_fail(err, err_sz, SIM_ERR_ARG,
                       "taubin: need 0..10000 iterations, lambda > 0 and mu < -lambda");
    if (iters == 0 || m->nvert == 0)
        return SIM_OK;
    uint32_t *start = NULL, *nbr = NULL;
    float *tmp = (float *)sc_calloc(3 * (size_t)m->nvert, sizeof *tmp);
    if (!tmp || !build_neighbours(m, &start, &nbr)) {
        free(tmp);
        return sc_fail(err, err_sz, SIM_ERR_NOMEM, "taubin: out of memory");
    }
    for (int it = 0; it < iters; it++) {
        umbrella_step(m, start, nbr, m->vert, tmp, lambda);
        umbrella_step(m, start, nbr, tmp, m->vert, mu);
    }
    free(tmp);
    free(start);
    free(nbr);
    return SIM_OK;
}

/* --------------------------------------------------------------- decimation */

/* Drop vertices no triangle uses, keeping the order of the rest. */
static sim_status compact_vertices(sim_trimesh *m, char *err, size_t err_sz)
{
    uint32_t *remap = (uint32_t *)sc_calloc((size_t)m->nvert + 1, sizeof *remap);
    if (!remap)
        return sc_fail(err, err_sz, SIM_ERR_NOMEM, "decimate: out of memory");
    for (size_t i = 0; i < 3 * (size_t)m->ntri; i++)
        remap[m->tri[i]] = 1;
    uint32_t n = 0;
    for (int v = 0; v < m->nvert; v++) {
        if (!remap[v]) {
            remap[v] = UINT32_MAX;
            continue;
        }
        memmove(m->vert + 3 * (size_t)n, m->vert + 3 * (size_t)v, 3 * sizeof(float));
        remap[v] = n++;
    }
    for (size_t i = 0; i < 3 * (size_t)m->ntri; i++)
        m->tri[i] = remap[m->tri[i]];
    free(remap);
    m->nvert = (int)n;
    return SIM_OK;
}

typedef struct tri_key {
    uint32_t v[3]; /* sorted */
    uint32_t t;
    int even; /* the triangle's order is an even permutation of v */
} tri_key;

static int cmp_tri_key(const void *a, const void *b)
{
    const tri_key *x = (const tri_key *)a, *y = (const tri_key *)b;
    for (int k = 0; k < 3; k++)
        if (x->v[k] != y->v[k])
            return x->v[k] < y->v[k] ? -1 : 1;
    return x->t < y->t ? -1 : x->t > y->t;
}

/* Remove fins: two triangles on the same three vertices, facing opposite ways. Edge
 * collapses leave one now and then where two sheets meet (seen on a 61k-vertex organ taken
 * to 30k: one fin on the edge four triangles shared); without both the surface is closed
 * and manifold again there. Returns the number of triangles removed, -1 on no memory. */
static int remove_fins(sim_trimesh *m)
{
    tri_key *k = (tri_key *)sc_calloc((size_t)m->ntri + 1, sizeof *k);
    uint8_t *gone = (uint8_t *)sc_calloc((size_t)m->ntri + 1, 1);
    if (!k || !gone) {
        free(k);
        free(gone);
        return -1;
    }
    for (size_t t = 0; t < (size_t)m->ntri; t++) {
        uint32_t a = m->tri[3 * t], b = m->tri[3 * t + 1], c = m->tri[3 * t + 2];
        /* rotate the smallest first; then (a, b, c) is even iff b < c */
        while (a > b || a > c) {
            uint32_t x = a;
            a = b, b = c, c = x;
        }
        k[t].even = b < c;
        k[t].v[0] = a, k[t].v[1] = b < c ? b : c, k[t].v[2] = b < c ? c : b;
        k[t].t = (uint32_t)t;
    }
    qsort(k, (size_t)m->ntri, sizeof *k, cmp_tri_key);
    int removed = 0;
    for (size_t i = 0; i + 1 < (size_t)m->ntri; i++)
        if (!memcmp(k[i].v, k[i + 1].v, sizeof k[i].v) && k[i].even != k[i + 1].even) {
            gone[k[i].t] = gone[k[i + 1].t] = 1;
            removed += 2;
            i++;
        }
    size_t n = 0;
    for (size_t t = 0; t < (size_t)m->ntri; t++)
        if (!gone[t])
            memmove(m->tri + 3 * n++, m->tri + 3 * t, 3 * sizeof(uint32_t));
    m->ntri = (int)n;
    free(k);
    free(gone);
    return removed;
}

sim_status sim_trimesh_decimate(sim_trimesh *m, int target_verts, float max_error_mm, char *err,
                                size_t err_sz)
{
    if (!m || target_verts < 4 || !isfinite(max_error_mm) || max_error_mm < 0.0f)
        return sc_fail(err, err_sz, SIM_ERR_ARG,
                       "decimate: need a mesh, a target of >= 4 vertices and an error >= 0 mm");
    if (target_verts >= m->nvert || m->ntri == 0)
        return SIM_OK;
    size_t nidx = 3 * (size_t)m->ntri;
    uint32_t *dst = (uint32_t *)sc_calloc(nidx, sizeof *dst);
    if (!dst)
        return sc_fail(err, err_sz, SIM_ERR_NOMEM, "decimate: out of memory");
    /* A closed surface of genus 0 has 2V - 4 triangles. */
    size_t target_idx = 3 * (2 * (size_t)target_verts);
    float scale = meshopt_simplifyScale(m->vert, (size_t)m->nvert, 3 * sizeof(float));
    float rel = scale > 0.0f ? max_error_mm / scale : 0.0f;
    size_t got = meshopt_simplify(dst, m->tri, nidx, m->vert, (size_t)m->nvert, 3 * sizeof(float),
                                  target_idx, rel, 0, NULL);
    free(m->tri);
    m->tri = dst;
    m->ntri = (int)(got / 3);
    if (remove_fins(m) < 0)
        return sc_fail(err, err_sz, SIM_ERR_NOMEM, "decimate: out of memory");
    return compact_vertices(m, err, err_sz);
}

/* ------------------------------------------------------------------ checks */

typedef struct half_edge {
    uint64_t key; /* min << 32 | max */
    int forward;  /* 1 when the triangle runs min -> max */
} half_edge;

static int cmp_half_edge(const void *a, const void *b)
{
    const half_edge *x = (const half_edge *)a, *y = (const half_edge *)b;
    return x->key < y->key ? -1 : x->key > y->key;
}

static void count_edges(const half_edge *h, size_t n, sim_mesh_report *r)
{
    for (size_t i = 0; i < n;) {
        size_t j = i + 1;
        while (j < n && h[j].key == h[i].key)
            j++;
        if (j - i == 1)
            r->boundary_edges++;
        else if (j - i > 2)
            r->nonmanifold_edges++;
        else if (h[i].forward == h[i + 1].forward)
            r->misoriented_edges++;
        i = j;
    }
}

static uint32_t uf_find(uint32_t *parent, uint32_t v)
{
    while (parent[v] != v) {
        parent[v] = parent[parent[v]];
        v = parent[v];
    }
    return v;
}

/* Edge-connected pieces, by union-find over the vertices triangles use. */
static int count_components(const sim_trimesh *m, uint32_t *parent)
{
    for (int v = 0; v < m->nvert; v++)
        parent[v] = (uint32_t)v;
    for (size_t t = 0; t < (size_t)m->ntri; t++)
        for (int k = 0; k < 2; k++) {
            uint32_t a = uf_find(parent, m->tri[3 * t]);
            uint32_t b = uf_find(parent, m->tri[3 * t + (size_t)k + 1]);
            if (a != b)
                parent[a] = b;
        }
    int n = 0;
    for (size_t i = 0; i < 3 * (size_t)m->ntri; i++) {
        uint32_t v = m->tri[i];
        if (parent[v] == v) {
            n++;
            parent[v] = UINT32_MAX - 1; /* counted; uf_find never runs again */
        }
    }
    return n;
}

/* A vertex is manifold when the links (a -> b) of its triangles (v, a, b) form one
 * cycle. start/nbr: each vertex's triangles as (a, b) pairs. */
static int count_nonmanifold_verts(const sim_trimesh *m, const uint32_t *start,
                                   const uint32_t *link)
{
    int bad = 0;
    for (int v = 0; v < m->nvert; v++) {
        uint32_t b = start[v], e = start[v + 1];
        if (b == e)
            continue;
        uint32_t first = link[2 * b], cur = link[2 * b + 1], steps = 1;
        while (cur != first && steps <= e - b) {
            uint32_t k = b;
            while (k < e && link[2 * k] != cur)
                k++;
            if (k == e)
                break;
            cur = link[2 * k + 1];
            steps++;
        }
        bad += cur != first || steps != e - b;
    }
    return bad;
}

static int vertex_links(const sim_trimesh *m, uint32_t **start_out, uint32_t **link_out)
{
    uint32_t *start = (uint32_t *)sc_calloc((size_t)m->nvert + 1, sizeof *start);
    uint32_t *link = (uint32_t *)sc_calloc(6 * (size_t)m->ntri + 1, sizeof *link);
    uint32_t *fill = (uint32_t *)sc_calloc((size_t)m->nvert + 1, sizeof *fill);
    if (!start || !link || !fill) {
        free(start);
        free(link);
        free(fill);
        return 0;
    }
    for (size_t i = 0; i < 3 * (size_t)m->ntri; i++)
        start[m->tri[i] + 1]++;
    for (int v = 0; v < m->nvert; v++)
        start[v + 1] += start[v];
    memcpy(fill, start, (size_t)m->nvert * sizeof *fill);
    for (size_t t = 0; t < (size_t)m->ntri; t++)
        for (int k = 0; k < 3; k++) {
            uint32_t v = m->tri[3 * t + (size_t)k];
            link[2 * fill[v]] = m->tri[3 * t + (size_t)((k + 1) % 3)];
            link[2 * fill[v] + 1] = m->tri[3 * t + (size_t)((k + 2) % 3)];
            fill[v]++;
        }
    free(fill);
    *start_out = start;
    *link_out = link;
    return 1;
}

static void volume_area(const sim_trimesh *m, sim_mesh_report *r)
{
    for (size_t t = 0; t < (size_t)m->ntri; t++) {
        const uint32_t *i = m->tri + 3 * t;
        double p[3][3];
        for (int k = 0; k < 3; k++)
            for (int a = 0; a < 3; a++)
                p[k][a] = (double)m->vert[3 * (size_t)i[k] + (size_t)a];
        if (i[0] == i[1] || i[1] == i[2] || i[0] == i[2])
            r->degenerate_tris++;
        double u[3], w[3], c[3];
        for (int a = 0; a < 3; a++)
            u[a] = p[1][a] - p[0][a], w[a] = p[2][a] - p[0][a];
        c[0] = u[1] * w[2] - u[2] * w[1];
        c[1] = u[2] * w[0] - u[0] * w[2];
        c[2] = u[0] * w[1] - u[1] * w[0];
        r->area_mm2 += 0.5 * sqrt(c[0] * c[0] + c[1] * c[1] + c[2] * c[2]);
        r->volume_mm3 += (p[0][0] * (p[1][1] * p[2][2] - p[1][2] * p[2][1]) -
                          p[0][1] * (p[1][0] * p[2][2] - p[1][2] * p[2][0]) +
                          p[0][2] * (p[1][0] * p[2][1] - p[1][1] * p[2][0])) /
                         6.0;
    }
}

sim_status sim_trimesh_check(const sim_trimesh *m, sim_mesh_report *rep, char *err, size_t err_sz)
{
    SC_ASSERT(m && rep);
    memset(rep, 0, sizeof *rep);
    size_t nh = 3 * (size_t)m->ntri;
    half_edge *h = (half_edge *)sc_calloc(nh + 1, sizeof *h);
    uint32_t *parent = (uint32_t *)sc_calloc((size_t)m->nvert + 1, sizeof *parent);
    uint32_t *start = NULL, *link = NULL;
    if (!h || !parent || !vertex_links(m, &start, &link)) {
        free(h);
        free(parent);
        return sc_fail(err, err_sz, SIM_ERR_NOMEM, "mesh check: out of memory");
    }
    for (size_t t = 0; t < (size_t)m->ntri; t++)
        for (int k = 0; k < 3; k++) {
            uint64_t a = m->tri[3 * t + (size_t)k], b = m->tri[3 * t + (size_t)((k + 1) % 3)];
            half_edge *e = &h[3 * t + (size_t)k];
            e->key = a < b ? (a << 32 | b) : (b << 32 | a);
            e->forward = a < b;
        }
    qsort(h, nh, sizeof *h, cmp_half_edge);
    count_edges(h, nh, rep);
    rep->nonmanifold_verts = count_nonmanifold_verts(m, start, link);
    rep->components = count_components(m, parent);
    volume_area(m, rep);
    free(h);
    free(parent);
    free(start);
    free(link);
    return SIM_OK;
}

int sim_mesh_report_ok(const sim_mesh_report *r)
{
    return r->boundary_edges == 0 && r->nonmanifold_edges == 0 && r->misoriented_edges == 0 &&
           r->nonmanifold_verts == 0 && r->degenerate_tris == 0 && r->volume_mm3 > 0.0;
}

/* ------------------------------------------------------------ the pipeline */

/* The inside indicator on the voxel-centre lattice padded by 2 samples a side (so a blur
 * stays inside the padding and the surface closes), box-blurred 3x3x3 when asked. */
static float *indicator_field(const sim_labelmap *m, const uint8_t *sel, int presmooth, int dims[3],
                              size_t *inside)
{
    dims[0] = m->nx + 4, dims[1] = m->ny + 4, dims[2] = m->nz + 4;
    size_t px = (size_t)dims[0], pxy = px * (size_t)dims[1];
    size_t n = pxy * (size_t)dims[2];
    float *f = (float *)sc_calloc(n, sizeof *f);
    float *g = presmooth ? (float *)sc_calloc(n, sizeof *g) : NULL;
    if (!f || (presmooth && !g)) {
        free(f);
        free(g);
        return NULL;
    }
    *inside = 0;
    size_t i = 0;
    for (int z = 0; z < m->nz; z++)
        for (int y = 0; y < m->ny; y++)
            for (int x = 0; x < m->nx; x++, i++)
                if (sel[m->label[i]]) {
                    f[(size_t)x + 2 + px * ((size_t)y + 2) + pxy * ((size_t)z + 2)] = 1.0f;
                    (*inside)++;
                }
    if (!presmooth)
        return f;
    /* Three separable passes of a 3-tap mean; the outermost samples stay 0. */
    size_t stride[3] = {1, px, pxy};
    for (int a = 0; a < 3; a++) {
        for (size_t s = 0; s < n; s++) {
            size_t c = a == 0 ? s % px : a == 1 ? (s / px) % (size_t)dims[1] : s / pxy;
            g[s] = (c == 0 || c + 1 == (size_t)dims[a])
                       ? 0.0f
                       : (f[s - stride[a]] + f[s] + f[s + stride[a]]) * (1.0f / 3.0f);
        }
        float *t = f;
        f = g;
        g = t;
    }
    free(g);
    return f;
}

static sim_status surface_opts_check(const sim_surface_opts *o, char *err, size_t err_sz)
{
    if (o->smooth_iters < 0 || o->smooth_iters > 10000 || o->target_verts < 0 ||
        !isfinite(o->max_error_mm) || o->max_error_mm < 0.0f)
        return sc_fail(err, err_sz, SIM_ERR_ARG,
                       "surface: options out of range (iterations 0..10000, target >= 0, "
                       "error >= 0 mm)");
    if (o->smooth_iters > 0 && (!(o->taubin_lambda > 0.0f) || !(o->taubin_mu < -o->taubin_lambda)))
        return sc_fail(err, err_sz, SIM_ERR_ARG, "surface: Taubin needs lambda > 0, mu < -lambda");
    return SIM_OK;
}

static sim_status surface_finish(sim_trimesh *out, const sim_surface_opts *o, char *err,
                                 size_t err_sz)
{
    sim_status st =
        sim_trimesh_taubin(out, o->smooth_iters, o->taubin_lambda, o->taubin_mu, err, err_sz);
    if (st == SIM_OK && o->target_verts > 0 && o->target_verts < out->nvert)
        st = sim_trimesh_decimate(out, o->target_verts, o->max_error_mm, err, err_sz);
    sim_mesh_report r;
    if (st == SIM_OK)
        st = sim_trimesh_check(out, &r, err, err_sz);
    if (st == SIM_OK && !sim_mesh_report_ok(&r))
        st = sc_fail(err, err_sz, SIM_ERR_LIMIT,
                     "surface: not a closed outward manifold after smoothing and decimation: %d "
                     "open, %d non-manifold, %d misoriented edges, %d non-manifold vertices, %d "
                     "degenerate triangles, volume %g mm3",
                     r.boundary_edges, r.nonmanifold_edges, r.misoriented_edges,
                     r.nonmanifold_verts, r.degenerate_tris, r.volume_mm3);
    return st;
}

sim_status sim_labelmap_surface(sim_trimesh *out, const sim_labelmap *m, const int *labels,
                                int nlabels, const sim_surface_opts *opts, char *err, size_t err_sz)
{
    if (!out)
        return sc_fail(err, err_sz, SIM_ERR_ARG, "surface: out is NULL");
    memset(out, 0, sizeof *out);
    sim_surface_opts o = opts ? *opts : sim_default_surface_opts();
    sim_status st = sb_check_map(m, err, err_sz);
    if (st == SIM_OK)
        st = surface_opts_check(&o, err, err_sz);
    if (st == SIM_OK && (nlabels < 0 || (nlabels > 0 && !labels)))
        st = sc_fail(err, err_sz, SIM_ERR_ARG, "surface: bad label list");
    if (st != SIM_OK)
        return st;
    uint8_t *sel = (uint8_t *)sc_calloc(65536, 1);
    if (!sel)
        return sc_fail(err, err_sz, SIM_ERR_NOMEM, "surface: out of memory");
    for (int l = 1; l < 65536; l++)
        sel[l] = nlabels == 0;
    for (int i = 0; i < nlabels; i++)
        if (labels[i] >= 0 && labels[i] < 65536)
            sel[labels[i]] = 1;
    int dims[3];
    size_t inside = 0;
    float *f = indicator_field(m, sel, o.presmooth, dims, &inside);
    free(sel);
    if (!f)
        return sc_fail(err, err_sz, SIM_ERR_NOMEM, "surface: out of memory for the field");
    if (inside == 0) {
        free(f);
        return sc_fail(err, err_sz, SIM_ERR_ARG, "surface: no voxel carries the labels asked for");
    }
    float origin[3], step[3];
    for (int a = 0; a < 3; a++)
        step[a] = m->spacing_mm[a], origin[a] = -1.5f * m->spacing_mm[a];
    st = sim_marching_cubes(out, f, dims[0], dims[1], dims[2], 0.5f, origin, step, err, err_sz);
    free(f);
    if (st == SIM_OK)
        st = surface_finish(out, &o, err, err_sz);
    if (st != SIM_OK)
        sim_trimesh_free(out);
    return st;
}
