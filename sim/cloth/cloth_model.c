/* cloth_model.c: the garment at every LOD (mesh, constraints in colour order, adjacency)
 * and the mapping tables between every pair of LODs, built once per model. */
#include <math.h>
#include <string.h>

#include "cloth_internal.h"

sim_cloth_model_options sim_cloth_default_model_options(void)
{
    sim_cloth_model_options o;
    memset(&o, 0, sizeof o);
    o.nlod = 3;
    o.cols[0] = 20, o.rows[0] = 34;
    o.cols[1] = 12, o.rows[1] = 18;
    o.cols[2] = 6, o.rows[2] = 9;
    o.width = 0.6f;
    o.length = 1.05f;
    o.body = 1;
    return o;
}

/* The cape hangs from the shoulder line behind the torso (root frame: x forward, y left,
 * z up), curving forward at its edges as it wraps the shoulders. The sheet hangs in the
 * plane x = 0 from z = length. */
#define CAPE_TOP  1.45f
#define CAPE_BACK -0.25f
#define CAPE_WRAP 0.08f

static void rest_point(const sim_cloth_model_options *o, float u, float v, float out[3])
{
    float y = (u - 0.5f) * o->width;
    if (o->body) {
        float e = 2.0f * y / o->width;
        out[0] = CAPE_BACK + CAPE_WRAP * e * e;
        out[1] = y;
        out[2] = CAPE_TOP - v * o->length;
    } else {
        out[0] = 0.0f;
        out[1] = y;
        out[2] = o->length - v * o->length + 0.2f;
    }
}

/* Edge records for building stretch and bending constraints. */
typedef struct half_edge {
    int32_t lo, hi, opp;
} half_edge;

static int cmp_half_edge(const void *pa, const void *pb)
{
    const half_edge *a = pa, *b = pb;
    if (a->lo != b->lo)
        return a->lo < b->lo ? -1 : 1;
    if (a->hi != b->hi)
        return a->hi < b->hi ? -1 : 1;
    return (a->opp > b->opp) - (a->opp < b->opp);
}

static void lod_free(cloth_lod *l)
{
    free(l->rest);
    free(l->w);
    free(l->tri);
    free(l->ca);
    free(l->cb);
    free(l->crest);
    free(l->ckind);
    free(l->adj_start);
    free(l->adj);
    memset(l, 0, sizeof *l);
}

/* Greedy colouring in constraint order; then a stable sort by colour. */
static int colour_constraints(cloth_lod *l, int32_t *ca, int32_t *cb, float *crest, uint8_t *ckind)
{
    uint64_t *used = sc_calloc((size_t)l->n, sizeof *used);
    uint8_t *col = sc_calloc((size_t)l->ncons, 1);
    if (!used || !col) {
        free(used);
        free(col);
        return -1;
    }
    int ncol = 0, ok = 1;
    for (int c = 0; c < l->ncons; c++) {
        uint64_t busy = used[ca[c]] | used[cb[c]];
        int k = 0;
        while (k < CLOTH_MAX_COLOURS && (busy >> k & 1u))
            k++;
        if (k == CLOTH_MAX_COLOURS) {
            ok = 0;
            break;
        }
        col[c] = (uint8_t)k;
        used[ca[c]] |= 1ull << k;
        used[cb[c]] |= 1ull << k;
        if (k + 1 > ncol)
            ncol = k + 1;
    }
    if (ok) {
        l->ncolours = ncol;
        int at = 0;
        for (int k = 0; k < ncol; k++) {
            l->colour_start[k] = at;
            /* Within a colour (no shared particle: any order gives the same result) stretch
             * first, then bending: the solver runs each part with its constants. */
            for (int kind = CLOTH_STRETCH; kind <= CLOTH_BEND; kind++) {
                if (kind == CLOTH_BEND)
                    l->bend_start[k] = at;
                for (int c = 0; c < l->ncons; c++)
                    if (col[c] == k && ckind[c] == kind) {
                        l->ca[at] = ca[c];
                        l->cb[at] = cb[c];
                        l->crest[at] = crest[c];
                        l->ckind[at] = ckind[c];
                        at++;
                    }
            }
        }
        l->colour_start[ncol] = at;
    }
    free(used);
    free(col);
    return ok ? 0 : -1;
}

/* LOD k's rest positions, pins and triangles (l's arrays allocated). */
static void grid_and_triangles(const sim_cloth_model_options *o, int k, cloth_lod *l)
{
    int cols = l->cols, rows = l->rows;
    for (int j = 0; j < rows; j++)
        for (int i = 0; i < cols; i++) {
            int v = j * cols + i;
            rest_point(o, (float)i / (float)(cols - 1), (float)j / (float)(rows - 1),
                       &l->rest[v * 3]);
            int pinned = o->body ? j == 0 : (j == 0 && (i == 0 || i == cols - 1));
            l->w[v] = pinned ? 0.0f : 1.0f;
        }
    /* Each LOD its own triangulation (checkerboard, all "\", all "/"): even where the grids
     * coincide, vertex indices and triangles differ. */
    int t = 0;
    for (int j = 0; j + 1 < rows; j++)
        for (int i = 0; i + 1 < cols; i++) {
            uint32_t a = (uint32_t)(j * cols + i), b = a + 1, c = a + (uint32_t)cols, d = c + 1;
            int diag = k == 0 ? (i + j) & 1 : k == 1 ? 0 : 1;
            uint32_t q[6];
            if (!diag) { /* a-d diagonal */
                uint32_t q0[6] = {a, d, b, a, c, d};
                memcpy(q, q0, sizeof q);
            } else { /* b-c diagonal */
                uint32_t q1[6] = {a, c, b, b, c, d};
                memcpy(q, q1, sizeof q);
            }
            memcpy(&l->tri[t * 3], q, sizeof q);
            t += 2;
        }
}

static sim_status build_lod(const sim_cloth_model_options *o, int k, cloth_lod *l, char *err,
                            size_t err_sz)
{
    int cols = o->cols[k], rows = o->rows[k];
    l->cols = cols;
    l->rows = rows;
    l->n = cols * rows;
    l->ntri = 2 * (cols - 1) * (rows - 1);
    l->rest = sc_calloc((size_t)l->n * 3, sizeof(float));
    l->w = sc_calloc((size_t)l->n, sizeof(float));
    l->tri = sc_calloc((size_t)l->ntri * 3, sizeof(uint32_t));
    half_edge *he = sc_calloc((size_t)l->ntri * 3, sizeof *he);
    if (!l->rest || !l->w || !l->tri || !he) {
        free(he);
        return (sim_status)sc_fail(err, err_sz, SIM_ERR_NOMEM, "cloth model: out of memory");
    }
    grid_and_triangles(o, k, l);
    for (int tr = 0; tr < l->ntri; tr++)
        for (int e = 0; e < 3; e++) {
            int32_t p = (int32_t)l->tri[tr * 3 + e], q = (int32_t)l->tri[tr * 3 + (e + 1) % 3];
            he[tr * 3 + e].lo = p < q ? p : q;
            he[tr * 3 + e].hi = p < q ? q : p;
            he[tr * 3 + e].opp = (int32_t)l->tri[tr * 3 + (e + 2) % 3];
        }
    int nhe = l->ntri * 3;
    qsort(he, (size_t)nhe, sizeof *he, cmp_half_edge);
    /* Stretch on every edge, bending across every interior edge. */
    int cap = nhe * 2;
    int32_t *ca = sc_calloc((size_t)cap, sizeof *ca), *cb = sc_calloc((size_t)cap, sizeof *cb);
    float *cr = sc_calloc((size_t)cap, sizeof *cr);
    uint8_t *ck = sc_calloc((size_t)cap, 1);
    l->ca = sc_calloc((size_t)cap, sizeof *l->ca);
    l->cb = sc_calloc((size_t)cap, sizeof *l->cb);
    l->crest = sc_calloc((size_t)cap, sizeof *l->crest);
    l->ckind = sc_calloc((size_t)cap, 1);
    l->adj_start = sc_calloc((size_t)l->n + 1, sizeof *l->adj_start);
    l->adj = sc_calloc((size_t)nhe * 2, sizeof *l->adj);
    if (!ca || !cb || !cr || !ck || !l->ca || !l->cb || !l->crest || !l->ckind || !l->adj_start ||
        !l->adj) {
        free(he), free(ca), free(cb), free(cr), free(ck);
        return (sim_status)sc_fail(err, err_sz, SIM_ERR_NOMEM, "cloth model: out of memory");
    }
    int m = 0;
    for (int e = 0; e < nhe;) {
        int f = e + 1;
        while (f < nhe && he[f].lo == he[e].lo && he[f].hi == he[e].hi)
            f++;
        int32_t pairs[2][2] = {{he[e].lo, he[e].hi}, {he[e].opp, f > e + 1 ? he[e + 1].opp : -1}};
        for (int kind = 0; kind < 2; kind++) {
            int32_t p = pairs[kind][0], q = pairs[kind][1];
            if (q < 0 || (l->w[p] == 0.0f && l->w[q] == 0.0f))
                continue;
            float d2 = 0.0f;
            for (int b = 0; b < 3; b++) {
                float d = l->rest[p * 3 + b] - l->rest[q * 3 + b];
                d2 += d * d;
            }
            ca[m] = p;
            cb[m] = q;
            cr[m] = sqrtf(d2);
            ck[m] = (uint8_t)kind;
            m++;
        }
        /* Adjacency: count both directions of each unique edge. */
        l->adj_start[he[e].lo + 1]++;
        l->adj_start[he[e].hi + 1]++;
        e = f;
    }
    l->ncons = m;
    for (int v = 0; v < l->n; v++)
        l->adj_start[v + 1] += l->adj_start[v];
    int32_t *fill = sc_calloc((size_t)l->n, sizeof *fill);
    for (int e = 0; fill && e < nhe;) {
        int f = e + 1;
        while (f < nhe && he[f].lo == he[e].lo && he[f].hi == he[e].hi)
            f++;
        l->adj[l->adj_start[he[e].lo] + fill[he[e].lo]++] = he[e].hi;
        l->adj[l->adj_start[he[e].hi] + fill[he[e].hi]++] = he[e].lo;
        e = f;
    }
    int bad = !fill || colour_constraints(l, ca, cb, cr, ck) != 0;
    free(fill), free(he), free(ca), free(cb), free(cr), free(ck);
    if (bad)
        return (sim_status)sc_fail(err, err_sz, SIM_ERR_NOMEM,
                                   "cloth model: out of memory or more than %d colours",
                                   CLOTH_MAX_COLOURS);
    return SIM_OK;
}

/* Closest point on triangle abc to p (Ericson, Real-Time Collision Detection 5.1.5), as
 * barycentric weights. */
static void closest_on_triangle(const float *a, const float *b, const float *c, const float *p,
                                float bary[3])
{
    float ab[3], ac[3], ap[3], bp[3], cp[3];
    for (int k = 0; k < 3; k++) {
        ab[k] = b[k] - a[k];
        ac[k] = c[k] - a[k];
        ap[k] = p[k] - a[k];
        bp[k] = p[k] - b[k];
        cp[k] = p[k] - c[k];
    }
#define DOT(u, v) ((u)[0] * (v)[0] + (u)[1] * (v)[1] + (u)[2] * (v)[2])
    float d1 = DOT(ab, ap), d2 = DOT(ac, ap), d3 = DOT(ab, bp), d4 = DOT(ac, bp);
    float d5 = DOT(ab, cp), d6 = DOT(ac, cp);
#undef DOT
    float u, v, w;
    if (d1 <= 0 && d2 <= 0) {
        u = 1, v = 0, w = 0;
    } else if (d3 >= 0 && d4 <= d3) {
        u = 0, v = 1, w = 0;
    } else if (d6 >= 0 && d5 <= d6) {
        u = 0, v = 0, w = 1;
    } else {
        float vc = d1 * d4 - d3 * d2, vb = d5 * d2 - d1 * d6, va = d3 * d6 - d5 * d4;
        if (vc <= 0 && d1 >= 0 && d3 <= 0) {
            v = d1 / (d1 - d3), u = 1 - v, w = 0;
        } else if (vb <= 0 && d2 >= 0 && d6 <= 0) {
            w = d2 / (d2 - d6), u = 1 - w, v = 0;
        } else if (va <= 0 && (d4 - d3) >= 0 && (d5 - d6) >= 0) {
            w = (d4 - d3) / ((d4 - d3) + (d5 - d6)), v = 1 - w, u = 0;
        } else {
            float den = 1.0f / (va + vb + vc);
            v = vb * den, w = vc * den, u = 1 - v - w;
        }
    }
    bary[0] = u, bary[1] = v, bary[2] = w;
}

void cloth_triangle_normal(const uint32_t *tri, int t, const float *x, float n[3])
{
    const float *a = &x[tri[t * 3] * 3], *b = &x[tri[t * 3 + 1] * 3], *c = &x[tri[t * 3 + 2] * 3];
    float u[3] = {b[0] - a[0], b[1] - a[1], b[2] - a[2]};
    float v[3] = {c[0] - a[0], c[1] - a[1], c[2] - a[2]};
    n[0] = u[1] * v[2] - u[2] * v[1];
    n[1] = u[2] * v[0] - u[0] * v[2];
    n[2] = u[0] * v[1] - u[1] * v[0];
    float len = sqrtf(n[0] * n[0] + n[1] * n[1] + n[2] * n[2]);
    for (int k = 0; k < 3; k++)
        n[k] = len > 0.0f ? n[k] / len : 0.0f;
}

static sim_status build_map(const cloth_lod *from, const cloth_lod *to, cloth_map *mp, char *err,
                            size_t err_sz)
{
    mp->n = to->n;
    mp->tri = sc_calloc((size_t)to->n, sizeof *mp->tri);
    mp->bary = sc_calloc((size_t)to->n * 3, sizeof *mp->bary);
    mp->offset = sc_calloc((size_t)to->n, sizeof *mp->offset);
    mp->dist = sc_calloc((size_t)to->n, sizeof *mp->dist);
    if (!mp->tri || !mp->bary || !mp->offset || !mp->dist)
        return (sim_status)sc_fail(err, err_sz, SIM_ERR_NOMEM, "cloth model: out of memory");
    for (int j = 0; j < to->n; j++) {
        const float *p = &to->rest[j * 3];
        float best = INFINITY;
        for (int t = 0; t < from->ntri; t++) {
            const uint32_t *tr = &from->tri[t * 3];
            float bc[3], q[3], d2 = 0.0f;
            closest_on_triangle(&from->rest[tr[0] * 3], &from->rest[tr[1] * 3],
                                &from->rest[tr[2] * 3], p, bc);
            for (int k = 0; k < 3; k++) {
                q[k] = bc[0] * from->rest[tr[0] * 3 + k] + bc[1] * from->rest[tr[1] * 3 + k] +
                       bc[2] * from->rest[tr[2] * 3 + k];
                d2 += (p[k] - q[k]) * (p[k] - q[k]);
            }
            if (d2 < best) {
                best = d2;
                mp->tri[j] = t;
                float n[3];
                cloth_triangle_normal(from->tri, t, from->rest, n);
                mp->offset[j] = (p[0] - q[0]) * n[0] + (p[1] - q[1]) * n[1] + (p[2] - q[2]) * n[2];
                memcpy(&mp->bary[j * 3], bc, sizeof bc);
            }
        }
        mp->dist[j] = sqrtf(best);
    }
    return SIM_OK;
}

static float mean_stretch_length(const cloth_lod *l)
{
    double sum = 0;
    int n = 0;
    for (int k = 0; k < l->ncons; k++)
        if (l->ckind[k] == CLOTH_STRETCH) {
            sum += (double)l->crest[k];
            n++;
        }
    return n ? (float)(sum / n) : 1.0f;
}

static void map_free(cloth_map *mp)
{
    free(mp->tri);
    free(mp->bary);
    free(mp->offset);
    free(mp->dist);
    memset(mp, 0, sizeof *mp);
}

sim_status sim_cloth_model_create(sim_cloth_model **out, const sim_cloth_model_options *o,
                                  char *err, size_t err_sz)
{
    *out = NULL;
    sim_cloth_model_options d = o ? *o : sim_cloth_default_model_options();
    if (d.nlod < 1 || d.nlod > SIM_CLOTH_NLOD)
        return (sim_status)sc_fail(err, err_sz, SIM_ERR_ARG, "cloth model: nlod %d: 1 to %d",
                                   d.nlod, SIM_CLOTH_NLOD);
    for (int k = 0; k < d.nlod; k++)
        if (d.cols[k] < 2 || d.rows[k] < 2 || d.cols[k] > 512 || d.rows[k] > 512)
            return (sim_status)sc_fail(err, err_sz, SIM_ERR_ARG,
                                       "cloth model: LOD %d is %dx%d: 2 to 512 each way", k,
                                       d.cols[k], d.rows[k]);
    if (!(d.width > 0.01f && d.width < 100.0f && d.length > 0.01f && d.length < 100.0f))
        return (sim_status)sc_fail(err, err_sz, SIM_ERR_ARG,
                                   "cloth model: width and length: 0.01 to 100 m");
    sim_cloth_model *m = sc_calloc(1, sizeof *m);
    if (!m)
        return (sim_status)sc_fail(err, err_sz, SIM_ERR_NOMEM, "cloth model: out of memory");
    m->opt = d;
    m->nlod = d.nlod;
    sim_status st = SIM_OK;
    for (int k = 0; k < d.nlod && st == SIM_OK; k++)
        st = build_lod(&d, k, &m->lod[k], err, err_sz);
    for (int k = 0; k < d.nlod && st == SIM_OK; k++)
        m->lod[k].compliance_scale =
            mean_stretch_length(&m->lod[k]) / mean_stretch_length(&m->lod[0]);
    for (int a = 0; a < d.nlod && st == SIM_OK; a++)
        for (int b = 0; b < d.nlod && st == SIM_OK; b++)
            if (a != b)
                st = build_map(&m->lod[a], &m->lod[b], &m->map[a][b], err, err_sz);
    if (st != SIM_OK) {
        sim_cloth_model_destroy(m);
        return st;
    }
    *out = m;
    return SIM_OK;
}

void sim_cloth_model_destroy(sim_cloth_model *m)
{
    if (!m)
        return;
    for (int a = 0; a < SIM_CLOTH_NLOD; a++) {
        lod_free(&m->lod[a]);
        for (int b = 0; b < SIM_CLOTH_NLOD; b++)
            map_free(&m->map[a][b]);
    }
    free(m);
}

size_t sim_cloth_model_bytes(const sim_cloth_model *m)
{
    size_t b = sizeof *m;
    for (int a = 0; a < m->nlod; a++) {
        const cloth_lod *l = &m->lod[a];
        size_t n = (size_t)l->n, nhe = (size_t)l->ntri * 3, cap = nhe * 2;
        b += n * 4 * sizeof(float) + nhe * sizeof(uint32_t);        /* rest, w, tri */
        b += cap * (2 * sizeof(int32_t) + sizeof(float) + 1);       /* constraints */
        b += (n + 1) * sizeof(int32_t) + nhe * 2 * sizeof(int32_t); /* adjacency */
        for (int c = 0; c < m->nlod; c++)                           /* maps from it */
            b += (size_t)m->map[a][c].n * (sizeof(int32_t) + 5 * sizeof(float));
    }
    return b;
}

int sim_cloth_model_nlod(const sim_cloth_model *m)
{
    return m->nlod;
}

int sim_cloth_model_lod_size(const sim_cloth_model *m, int lod, int *ntri)
{
    if (lod < 0 || lod >= m->nlod) {
        if (ntri)
            *ntri = 0;
        return 0;
    }
    if (ntri)
        *ntri = m->lod[lod].ntri;
    return m->lod[lod].n;
}

const uint32_t *sim_cloth_model_triangles(const sim_cloth_model *m, int lod)
{
    return lod >= 0 && lod < m->nlod ? m->lod[lod].tri : NULL;
}

const float *sim_cloth_model_inv_mass(const sim_cloth_model *m, int lod)
{
    return lod >= 0 && lod < m->nlod ? m->lod[lod].w : NULL;
}

int sim_cloth_model_constraints(const sim_cloth_model *m, int lod, int *nstretch, int *nbend)
{
    int ns = 0, nb = 0;
    for (int k = 0; lod >= 0 && lod < m->nlod && k < m->lod[lod].ncons; k++)
        m->lod[lod].ckind[k] == CLOTH_STRETCH ? ns++ : nb++;
    if (nstretch)
        *nstretch = ns;
    if (nbend)
        *nbend = nb;
    return ns + nb;
}

float sim_cloth_model_compliance_scale(const sim_cloth_model *m, int lod)
{
    return lod >= 0 && lod < m->nlod ? m->lod[lod].compliance_scale : 0.0f;
}

int sim_cloth_model_map_world(const sim_cloth_model *m, int from, int to, const float *x,
                              const float *v, float max_dist_m, float *x_out, float *v_out,
                              unsigned char *valid)
{
    if (from < 0 || from >= m->nlod || to < 0 || to >= m->nlod || from == to)
        return -1;
    const cloth_lod *ls = &m->lod[from];
    const cloth_map *mp = &m->map[from][to];
    int nvalid = 0;
    for (int j = 0; j < mp->n; j++) {
        const uint32_t *tr = &ls->tri[mp->tri[j] * 3];
        const float *bc = &mp->bary[j * 3];
        float nw[3];
        cloth_triangle_normal(ls->tri, mp->tri[j], x, nw);
        for (int q = 0; q < 3; q++) {
            x_out[j * 3 + q] = bc[0] * x[tr[0] * 3 + q] + bc[1] * x[tr[1] * 3 + q] +
                               bc[2] * x[tr[2] * 3 + q] + mp->offset[j] * nw[q];
            if (v && v_out)
                v_out[j * 3 + q] =
                    bc[0] * v[tr[0] * 3 + q] + bc[1] * v[tr[1] * 3 + q] + bc[2] * v[tr[2] * 3 + q];
        }
        int ok = mp->dist[j] <= max_dist_m;
        nvalid += ok;
        if (valid)
            valid[j] = (unsigned char)ok;
    }
    return nvalid;
}
