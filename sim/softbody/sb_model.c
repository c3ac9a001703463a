/* sb_model.c: building the immutable models.
 * Surface: the mesh's edges as distance constraints, coloured; shape matching's rest
 * offsets from the rest centre.
 * Hybrid: the tets' edges (each with the tet volume every region lends it: the material
 * sets its stiffness, see sb_state.c), the tets coloured for the volume constraints, the
 * boundary tets and their virtual springs, the embedded surface.
 * Boundary tets, our reading of the patent's "tets that lie on the boundary between two
 * regions": a tet with a vertex that a tet of another region also uses. That takes both
 * sides of an interface and the tets touching it only along an edge or at a corner, where
 * a soft tet pinned between stiff ones inverts first; face adjacency alone would miss those.
 * Colouring: greedy by passes (each pass takes every remaining item that shares no particle
 * with one taken in the pass), fixed at build: the solve order is the same on every thread
 * count and backend (Box2D's constraint graph, Jolt's Optimize). */
#include <math.h>
#include <string.h>

#include "softbody_internal.h"

int sb_colour(const int32_t *idx, int nitem, int k, int n, int32_t *order, sb_colours *out)
{
    int32_t *mark = malloc((size_t)n * sizeof(int32_t));
    uint8_t *done = sc_calloc((size_t)nitem + 1, 1);
    int *start = malloc(((size_t)nitem + 2) * sizeof(int));
    if (!mark || !done || !start) {
        free(mark);
        free(done);
        free(start);
        return 0;
    }
    for (int i = 0; i < n; i++)
        mark[i] = -1;
    int placed = 0, c = 0;
    while (placed < nitem) {
        start[c] = placed;
        for (int t = 0; t < nitem; t++) {
            if (done[t])
                continue;
            int ok = 1;
            for (int j = 0; j < k && ok; j++)
                ok = mark[idx[t * k + j]] != c;
            if (!ok)
                continue;
            for (int j = 0; j < k; j++)
                mark[idx[t * k + j]] = c;
            done[t] = 1;
            order[placed++] = t;
        }
        c++;
    }
    start[c] = placed;
    out->n = c;
    out->start = start;
    free(mark);
    free(done);
    return 1;
}

void sim_softbody_model_destroy(sim_softbody_model *m)
{
    if (!m)
        return;
    void *p[] = {m->rest,       m->tri,      m->ea,          m->eb,         m->erest, m->evol,
                 m->ecol.start, m->q,        m->vt_start,    m->vt_jk,      m->tet,   m->region,
                 m->tvol,       m->tet_user, m->region_user, m->tcol.start, m->bidx,  m->bother,
                 m->brest,      m->btet,     m->etet,        m->ew};
    for (size_t i = 0; i < sizeof p / sizeof p[0]; i++)
        free(p[i]);
    free(m);
}

size_t sim_softbody_model_bytes(const sim_softbody_model *m)
{
    size_t n = (size_t)m->n, ne = (size_t)m->nedge, nt = (size_t)m->ntet, nb = (size_t)m->nbound;
    size_t f = sizeof(float), i = sizeof(int32_t);
    size_t b = sizeof *m + n * 3 * f + (size_t)m->ntri * 3 * sizeof(uint32_t) + ne * (2 * i + f) +
               (ne + 2) * sizeof(int); /* colours: sized by the edges */
    b += m->evol ? ne * SIM_SOFTBODY_NREGION * f : 0;
    b += m->q ? n * 3 * f : 0;
    b += m->vt_start ? (n + 1) * i + (size_t)m->ntri * 6 * i : 0;
    b += nt * (4 * i + 1 + f + 4 * i + 1 + i) +
         (m->tcol.start ? (nt + 2) * sizeof(int) : 0);           /* tets */
    b += nb * (1 + 4 * f + i) + (size_t)m->nembed * (i + 4 * f); /* springs, embedding */
    return b;
}

sim_softbody_kind sim_softbody_model_kind(const sim_softbody_model *m)
{
    return m->info.kind;
}

sim_softbody_info sim_softbody_model_info(const sim_softbody_model *m)
{
    return m->info;
}

const uint32_t *sim_softbody_model_triangles(const sim_softbody_model *m, int *ntri)
{
    *ntri = m->ntri;
    return m->tri;
}

const float *sim_softbody_model_rest(const sim_softbody_model *m, int *n)
{
    *n = m->n;
    return m->rest;
}

const int32_t *sim_softbody_model_tets(const sim_softbody_model *m, int *ntet,
                                       const uint8_t **region)
{
    *ntet = m->ntet;
    if (region)
        *region = m->region_user;
    return m->tet_user;
}

/* ---------------------------------------------------------------- edges */

static int raw_edge_cmp(const void *a, const void *b)
{
    const sb_raw_edge *x = a, *y = b;
    if (x->key != y->key)
        return x->key < y->key ? -1 : 1;
    return x->region - y->region;
}

sb_raw_edge sb_make_edge(int32_t a, int32_t b, float vol, int region)
{
    sb_raw_edge e;
    uint64_t lo = (uint64_t)(a < b ? a : b), hi = (uint64_t)(a < b ? b : a);
    e.key = lo << 32 | hi;
    e.vol = vol;
    e.region = region;
    return e;
}

int sb_build_edges(sim_softbody_model *m, sb_raw_edge *raw, int nraw, int volumes)
{
    qsort(raw, (size_t)nraw, sizeof *raw, raw_edge_cmp);
    int ne = 0;
    for (int i = 0; i < nraw; i++)
        ne += i == 0 || raw[i].key != raw[i - 1].key;
    int32_t *ab = malloc((size_t)ne * 2 * sizeof(int32_t)),
            *order = malloc((size_t)ne * sizeof(int32_t));
    float *vol = sc_calloc((size_t)ne * SIM_SOFTBODY_NREGION, sizeof(float));
    m->ea = malloc((size_t)ne * sizeof(int32_t));
    m->eb = malloc((size_t)ne * sizeof(int32_t));
    m->erest = malloc((size_t)ne * sizeof(float));
    m->evol = volumes ? sc_calloc((size_t)ne * SIM_SOFTBODY_NREGION, sizeof(float)) : NULL;
    int ok = ab && order && vol && m->ea && m->eb && m->erest && (!volumes || m->evol);
    for (int i = 0, e = -1; ok && i < nraw; i++) {
        if (i == 0 || raw[i].key != raw[i - 1].key) {
            e++;
            ab[e * 2] = (int32_t)(raw[i].key >> 32);
            ab[e * 2 + 1] = (int32_t)(raw[i].key & 0xffffffffu);
        }
        vol[e * SIM_SOFTBODY_NREGION + raw[i].region] += raw[i].vol;
    }
    ok = ok && sb_colour(ab, ne, 2, m->n, order, &m->ecol);
    for (int i = 0; ok && i < ne; i++) {
        int e = order[i];
        m->ea[i] = ab[e * 2];
        m->eb[i] = ab[e * 2 + 1];
        float d[3];
        for (int k = 0; k < 3; k++)
            d[k] = m->rest[m->ea[i] * 3 + k] - m->rest[m->eb[i] * 3 + k];
        m->erest[i] = sqrtf(sb_dot3(d, d));
        if (volumes)
            memcpy(&m->evol[i * SIM_SOFTBODY_NREGION], &vol[e * SIM_SOFTBODY_NREGION],
                   SIM_SOFTBODY_NREGION * sizeof(float));
    }
    m->nedge = ne;
    free(ab);
    free(order);
    free(vol);
    return ok;
}

void sb_model_bounds(sim_softbody_model *m)
{
    float lo[3] = {INFINITY, INFINITY, INFINITY}, hi[3] = {-INFINITY, -INFINITY, -INFINITY};
    for (int i = 0; i < m->n * 3; i++) {
        lo[i % 3] = fminf(lo[i % 3], m->rest[i]);
        hi[i % 3] = fmaxf(hi[i % 3], m->rest[i]);
    }
    float d[3] = {hi[0] - lo[0], hi[1] - lo[1], hi[2] - lo[2]};
    m->info.size = sqrtf(sb_dot3(d, d));
    m->info.particles = m->n;
    m->info.edges = m->nedge;
    m->info.colours = m->ecol.n + m->tcol.n;
    m->info.tets = m->ntet;
    m->info.boundary_tets = m->nbound;
    m->info.surface_triangles = m->ntri;
}

/* ---------------------------------------------------------------- surface */

static sim_status surface_shape(sim_softbody_model *m)
{
    double c[3] = {0.0, 0.0, 0.0};
    for (int i = 0; i < m->n; i++)
        for (int k = 0; k < 3; k++)
            c[k] += (double)m->rest[i * 3 + k];
    m->q = malloc((size_t)m->n * 3 * sizeof(float));
    if (!m->q)
        return SIM_ERR_NOMEM;
    for (int i = 0; i < m->n; i++)
        for (int k = 0; k < 3; k++)
            m->q[i * 3 + k] = (float)((double)m->rest[i * 3 + k] - c[k] / m->n);
    return SIM_OK;
}

/* The triangles round each vertex for the volume constraint's gradient (CSR, in
 * triangle order): for (a, b, c), a gets (b, c), b gets (c, a), c gets (a, b). */
static int surface_volume(sim_softbody_model *m)
{
    m->vt_start = sc_calloc((size_t)m->n + 1, sizeof(int32_t));
    m->vt_jk = malloc((size_t)m->ntri * 6 * sizeof(int32_t));
    int32_t *fill = sc_calloc((size_t)m->n, sizeof(int32_t));
    if (!m->vt_start || !m->vt_jk || !fill) {
        free(fill);
        return 0;
    }
    for (int k = 0; k < m->ntri * 3; k++)
        m->vt_start[m->tri[k] + 1]++;
    for (int i = 0; i < m->n; i++)
        m->vt_start[i + 1] += m->vt_start[i];
    for (int t = 0; t < m->ntri; t++)
        for (int k = 0; k < 3; k++) {
            int32_t a = (int32_t)m->tri[t * 3 + k], at = m->vt_start[a] + fill[a]++;
            m->vt_jk[at * 2] = (int32_t)m->tri[t * 3 + (k + 1) % 3];
            m->vt_jk[at * 2 + 1] = (int32_t)m->tri[t * 3 + (k + 2) % 3];
        }
    free(fill);
    m->rest6 = sb_sum_volume6(0, m->ntri, m->tri, m->rest, m->rest);
    return 1;
}

sim_status sim_softbody_model_surface(sim_softbody_model **out, const sim_softbody_mesh *mesh,
                                      char *err, size_t err_sz)
{
    *out = NULL;
    sim_softbody_mesh copy = *mesh;
    copy.x = malloc((size_t)mesh->nvert * 3 * sizeof(float));
    copy.tri = malloc((size_t)mesh->ntri * 3 * sizeof(uint32_t));
    sim_softbody_model *m = sc_calloc(1, sizeof *m);
    if (!copy.x || !copy.tri || !m || mesh->nvert < 0 || mesh->ntri < 0) {
        sim_softbody_mesh_free(&copy);
        free(m);
        return (sim_status)sc_fail(err, err_sz, SIM_ERR_NOMEM, "surface model: out of memory");
    }
    memcpy(copy.x, mesh->x, (size_t)mesh->nvert * 3 * sizeof(float));
    memcpy(copy.tri, mesh->tri, (size_t)mesh->ntri * 3 * sizeof(uint32_t));
    sim_status st = sim_softbody_mesh_check(&copy, err, err_sz);
    if (st != SIM_OK) {
        sim_softbody_mesh_free(&copy);
        free(m);
        return st;
    }
    m->info.kind = SIM_SOFTBODY_SURFACE;
    m->n = copy.nvert;
    m->rest = copy.x;
    m->ntri = copy.ntri;
    m->tri = copy.tri;
    sb_raw_edge *raw = malloc((size_t)m->ntri * 3 * sizeof *raw);
    int ok = raw != NULL;
    for (int t = 0; ok && t < m->ntri; t++)
        for (int k = 0; k < 3; k++)
            raw[t * 3 + k] = sb_make_edge((int32_t)m->tri[t * 3 + k],
                                          (int32_t)m->tri[t * 3 + (k + 1) % 3], 0.0f, 0);
    ok = ok && sb_build_edges(m, raw, m->ntri * 3, 0) && surface_shape(m) == SIM_OK &&
         surface_volume(m);
    free(raw);
    if (!ok) {
        sim_softbody_model_destroy(m);
        return (sim_status)sc_fail(err, err_sz, SIM_ERR_NOMEM, "surface model: out of memory");
    }
    sb_model_bounds(m);
    m->info.surface_vertices = m->n;
    m->info.rest_volume = (float)sim_softbody_mesh_volume(m->tri, m->ntri, m->rest);
    *out = m;
    return SIM_OK;
}
