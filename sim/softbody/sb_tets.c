/* sb_tets.c: the hybrid model from a tet mesh (sim_softbody_tets): checks that name the
 * offending tet or vertex, tet edges with the volume each region lends them, tet colours,
 * boundary tets with their virtual springs, and the embedded surface. */
#include <math.h>
#include <string.h>

#include "softbody_internal.h"

void sim_softbody_tets_free(sim_softbody_tets *t)
{
    if (!t)
        return;
    free(t->x);
    free(t->tet);
    free(t->region);
    free(t->embed_tet);
    free(t->embed_w);
    free(t->embed_tri);
    memset(t, 0, sizeof *t);
}

static sim_status check_counts(const sim_softbody_tets *t, char *err, size_t err_sz)
{
    if (t->nvert < 4 || t->nvert > SIM_SOFTBODY_MAX_VERTS || t->ntet < 1 ||
        t->ntet > SIM_SOFTBODY_MAX_ELEMS || t->nembed < 0 || t->nembed > SIM_SOFTBODY_MAX_VERTS ||
        t->nembed_tri < 0 || t->nembed_tri > SIM_SOFTBODY_MAX_ELEMS)
        return (sim_status)sc_fail(
            err, err_sz, SIM_ERR_LIMIT,
            "tets: %d vertices, %d tets, %d embedded vertices, %d triangles: "
            "need 4 to %d vertices, 1 to %d tets and triangles",
            t->nvert, t->ntet, t->nembed, t->nembed_tri, SIM_SOFTBODY_MAX_VERTS,
            SIM_SOFTBODY_MAX_ELEMS);
    if (t->nregion < 1 || t->nregion > SIM_SOFTBODY_NREGION)
        return (sim_status)sc_fail(err, err_sz, SIM_ERR_ARG,
                                   "tets: %d regions: 1 to %d materials are available", t->nregion,
                                   SIM_SOFTBODY_NREGION);
    if (!t->x || !t->tet || !t->region || (t->nembed && (!t->embed_tet || !t->embed_w)) ||
        (t->nembed_tri && !t->embed_tri))
        return (sim_status)sc_fail(err, err_sz, SIM_ERR_ARG, "tets: an array is missing");
    float lo[3] = {INFINITY, INFINITY, INFINITY}, hi[3] = {-INFINITY, -INFINITY, -INFINITY};
    for (int i = 0; i < t->nvert * 3; i++) {
        if (!isfinite(t->x[i]))
            return (sim_status)sc_fail(err, err_sz, SIM_ERR_FORMAT,
                                       "tets: vertex %d: coordinate %d is not finite", i / 3,
                                       i % 3);
        lo[i % 3] = fminf(lo[i % 3], t->x[i]);
        hi[i % 3] = fmaxf(hi[i % 3], t->x[i]);
    }
    float d[3] = {hi[0] - lo[0], hi[1] - lo[1], hi[2] - lo[2]}, size = sqrtf(sb_dot3(d, d));
    if (!(size >= SIM_SOFTBODY_MIN_SIZE_M && size <= SIM_SOFTBODY_MAX_SIZE_M))
        return (sim_status)sc_fail(
            err, err_sz, SIM_ERR_LIMIT, "tets: the mesh is %g m across: an organ is %g to %g m",
            (double)size, (double)SIM_SOFTBODY_MIN_SIZE_M, (double)SIM_SOFTBODY_MAX_SIZE_M);
    return SIM_OK;
}

/* Each tet: indices in range and distinct, a region with a material, not flat (a volume
 * above 1e-9 of the bounding cube of its edges). Negative tets are turned in the model. */
static sim_status check_tets(const sim_softbody_tets *t, char *err, size_t err_sz)
{
    for (int e = 0; e < t->ntet; e++) {
        const int32_t *q = &t->tet[e * 4];
        for (int j = 0; j < 4; j++) {
            if (q[j] < 0 || q[j] >= t->nvert)
                return (sim_status)sc_fail(err, err_sz, SIM_ERR_FORMAT,
                                           "tet %d: vertex index %d is not in [0, %d)", e, q[j],
                                           t->nvert);
            for (int k = 0; k < j; k++)
                if (q[k] == q[j])
                    return (sim_status)sc_fail(err, err_sz, SIM_ERR_FORMAT,
                                               "tet %d: vertex %d appears twice", e, q[j]);
        }
        if (t->region[e] >= t->nregion)
            return (sim_status)sc_fail(err, err_sz, SIM_ERR_ARG,
                                       "tet %d: region %d has no material (the mesh declares %d "
                                       "region%s)",
                                       e, t->region[e], t->nregion, t->nregion == 1 ? "" : "s");
        float vol = fabsf(sb_tet_volume(q, t->x)), len = 0.0f;
        for (int j = 1; j < 4; j++)
            for (int k = 0; k < 3; k++)
                len = fmaxf(len, fabsf(t->x[q[j] * 3 + k] - t->x[q[0] * 3 + k]));
        if (!(vol > 1e-9f * len * len * len))
            return (sim_status)sc_fail(err, err_sz, SIM_ERR_FORMAT,
                                       "tet %d is flat (volume %g m^3)", e, (double)vol);
    }
    return SIM_OK;
}

static sim_status check_embed(const sim_softbody_tets *t, char *err, size_t err_sz)
{
    for (int i = 0; i < t->nembed; i++) {
        if (t->embed_tet[i] < 0 || t->embed_tet[i] >= t->ntet)
            return (sim_status)sc_fail(err, err_sz, SIM_ERR_FORMAT,
                                       "embedded vertex %d: tet %d is not in [0, %d)", i,
                                       t->embed_tet[i], t->ntet);
        float sum = 0.0f;
        for (int j = 0; j < 4; j++) {
            float w = t->embed_w[i * 4 + j];
            if (!(w >= -1e-4f && w <= 1.0f + 1e-4f))
                return (sim_status)sc_fail(err, err_sz, SIM_ERR_FORMAT,
                                           "embedded vertex %d: weight %d = %g is not in [0, 1] "
                                           "(the vertex must lie in its tet)",
                                           i, j, (double)w);
            sum += w;
        }
        if (fabsf(sum - 1.0f) > 1e-3f)
            return (sim_status)sc_fail(err, err_sz, SIM_ERR_FORMAT,
                                       "embedded vertex %d: weights sum to %g, not 1", i,
                                       (double)sum);
    }
    for (int k = 0; k < t->nembed_tri * 3; k++)
        if (t->embed_tri[k] >= (uint32_t)t->nembed)
            return (sim_status)sc_fail(err, err_sz, SIM_ERR_FORMAT,
                                       "embedded triangle %d: vertex %u is not in [0, %d)", k / 3,
                                       t->embed_tri[k], t->nembed);
    return SIM_OK;
}

/* Copy the arrays, turning negative tets (their weights follow the swapped vertices). */
static int copy_tets(sim_softbody_model *m, const sim_softbody_tets *t)
{
    m->n = t->nvert;
    m->ntet = t->ntet;
    m->nregion = t->nregion;
    m->nembed = t->nembed;
    m->ntri = t->nembed_tri;
    m->rest = malloc((size_t)m->n * 3 * sizeof(float));
    m->tet = malloc((size_t)m->ntet * 4 * sizeof(int32_t));
    m->region = malloc((size_t)m->ntet);
    m->tvol = malloc((size_t)m->ntet * sizeof(float));
    m->etet = malloc((size_t)(m->nembed + 1) * sizeof(int32_t));
    m->ew = malloc((size_t)(m->nembed + 1) * 4 * sizeof(float));
    m->tri = malloc((size_t)(m->ntri + 1) * 3 * sizeof(uint32_t));
    if (!m->rest || !m->tet || !m->region || !m->tvol || !m->etet || !m->ew || !m->tri)
        return 0;
    memcpy(m->rest, t->x, (size_t)m->n * 3 * sizeof(float));
    memcpy(m->tet, t->tet, (size_t)m->ntet * 4 * sizeof(int32_t));
    memcpy(m->region, t->region, (size_t)m->ntet);
    memcpy(m->etet, t->embed_tet, (size_t)m->nembed * sizeof(int32_t));
    memcpy(m->ew, t->embed_w, (size_t)m->nembed * 4 * sizeof(float));
    memcpy(m->tri, t->embed_tri, (size_t)m->ntri * 3 * sizeof(uint32_t));
    uint8_t *flip = sc_calloc((size_t)m->ntet, 1);
    if (!flip)
        return 0;
    for (int e = 0; e < m->ntet; e++) {
        m->tvol[e] = sb_tet_volume(&m->tet[e * 4], m->rest);
        if (m->tvol[e] < 0.0f) {
            int32_t s = m->tet[e * 4 + 2];
            m->tet[e * 4 + 2] = m->tet[e * 4 + 3];
            m->tet[e * 4 + 3] = s;
            m->tvol[e] = -m->tvol[e];
            flip[e] = 1;
        }
    }
    for (int i = 0; i < m->nembed; i++)
        if (flip[m->etet[i]]) {
            float s = m->ew[i * 4 + 2];
            m->ew[i * 4 + 2] = m->ew[i * 4 + 3];
            m->ew[i * 4 + 3] = s;
        }
    free(flip);
    return 1;
}

/* Colour the tets (a colour shares no vertex) and sort them by colour, so that the solver
 * reads a colour's tets, volumes and multipliers in sequence; the embedded vertices follow
 * their tets' new indices. The caller's order is kept in tet_user. */
static int sort_tets(sim_softbody_model *m)
{
    size_t nt = (size_t)m->ntet;
    int32_t *ord = malloc(nt * sizeof(int32_t)), *inv = malloc(nt * sizeof(int32_t));
    int32_t *tet = malloc(nt * 4 * sizeof(int32_t));
    uint8_t *reg = malloc(nt);
    float *vol = malloc(nt * sizeof(float));
    m->tet_user = malloc(nt * 4 * sizeof(int32_t));
    m->region_user = malloc(nt);
    int ok = ord && inv && tet && reg && vol && m->tet_user && m->region_user &&
             sb_colour(m->tet, m->ntet, 4, m->n, ord, &m->tcol);
    for (size_t j = 0; ok && j < nt; j++) {
        int32_t e = ord[j];
        inv[e] = (int32_t)j;
        memcpy(&tet[j * 4], &m->tet[e * 4], 4 * sizeof(int32_t));
        reg[j] = m->region[e];
        vol[j] = m->tvol[e];
    }
    for (int i = 0; ok && i < m->nembed; i++)
        m->etet[i] = inv[m->etet[i]];
    if (ok) {
        memcpy(m->tet_user, m->tet, nt * 4 * sizeof(int32_t));
        memcpy(m->region_user, m->region, nt);
        int32_t *ot = m->tet; /* the sorted arrays in, the old ones out to be freed */
        uint8_t *orr = m->region;
        float *ov = m->tvol;
        m->tet = tet, m->region = reg, m->tvol = vol;
        tet = ot, reg = orr, vol = ov;
    }
    free(ord);
    free(inv);
    free(tet);
    free(reg);
    free(vol);
    return ok;
}

/* Boundary tets (see sb_model.c for the reading): the other region is the one that most of
 * the tet's vertices touch (the lowest on a tie); springs rest at the rest distances. */
static int build_boundary(sim_softbody_model *m)
{
    uint8_t *touch = sc_calloc((size_t)m->n, 1); /* bit r: a tet of region r uses the vertex */
    m->bidx = malloc((size_t)m->ntet * sizeof(int32_t));
    if (!touch || !m->bidx) {
        free(touch);
        return 0;
    }
    for (int e = 0; e < m->ntet; e++)
        for (int j = 0; j < 4; j++)
            touch[m->tet[e * 4 + j]] |= (uint8_t)(1u << m->region[e]);
    int nb = 0;
    for (int e = 0; e < m->ntet; e++) {
        uint8_t other = 0;
        for (int j = 0; j < 4; j++)
            other |= touch[m->tet[e * 4 + j]];
        other &= (uint8_t) ~(1u << m->region[e]);
        m->bidx[e] = other ? nb++ : -1;
    }
    m->nbound = nb;
    m->bother = malloc((size_t)nb + 1);
    m->brest = malloc(((size_t)nb + 1) * 4 * sizeof(float));
    m->btet = malloc(((size_t)nb + 1) * sizeof(int32_t));
    int ok = m->bother && m->brest && m->btet;
    for (int e = 0; ok && e < m->ntet; e++) {
        int b = m->bidx[e];
        if (b < 0)
            continue;
        const int32_t *q = &m->tet[e * 4];
        int cnt[SIM_SOFTBODY_NREGION] = {0}, best = -1;
        for (int j = 0; j < 4; j++)
            for (int r = 0; r < SIM_SOFTBODY_NREGION; r++)
                cnt[r] += r != m->region[e] && (touch[q[j]] >> r & 1u);
        for (int r = 0; r < SIM_SOFTBODY_NREGION; r++)
            best = cnt[r] > 0 && (best < 0 || cnt[r] > cnt[best]) ? r : best;
        m->bother[b] = (uint8_t)best;
        m->btet[b] = e;
        float c[3] = {0.0f, 0.0f, 0.0f};
        for (int j = 0; j < 4; j++)
            for (int k = 0; k < 3; k++)
                c[k] += 0.25f * m->rest[q[j] * 3 + k];
        for (int j = 0; j < 4; j++) {
            float d[3] = {m->rest[q[j] * 3] - c[0], m->rest[q[j] * 3 + 1] - c[1],
                          m->rest[q[j] * 3 + 2] - c[2]};
            m->brest[b * 4 + j] = sqrtf(sb_dot3(d, d));
        }
    }
    free(touch);
    return ok;
}

/* The tets' edges, each lending it a sixth of the tet's volume from the tet's region. */
static int build_tet_edges(sim_softbody_model *m)
{
    static const int pairs[6][2] = {{0, 1}, {0, 2}, {0, 3}, {1, 2}, {1, 3}, {2, 3}};
    int nraw = m->ntet * 6;
    sb_raw_edge *raw = malloc((size_t)nraw * sizeof *raw);
    if (!raw)
        return 0;
    for (int e = 0; e < m->ntet; e++)
        for (int k = 0; k < 6; k++)
            raw[e * 6 + k] = sb_make_edge(m->tet[e * 4 + pairs[k][0]], m->tet[e * 4 + pairs[k][1]],
                                          m->tvol[e] / 6.0f, m->region[e]);
    int ok = sb_build_edges(m, raw, nraw, 1);
    free(raw);
    return ok;
}

/* Within each span of SB_GROUP_SPAN tets of a colour, the tets with springs after those
 * without (a stable partition): the CPU solves a colour 4 tets at a time, and a group pays for
 * the springs if one of its tets has them. Spans, not whole colours: the threads take a
 * colour in halves, and a colour's tets are in mesh order, so each thread keeps to its part of
 * the body (its vertices stay in its cache) and gets the springs of that part. A colour's tets
 * are independent, so their order changes nothing else. */
#define SB_GROUP_SPAN 64
static int group_tets(sim_softbody_model *m)
{
    size_t nt = (size_t)m->ntet;
    int32_t *ord = malloc(nt * sizeof(int32_t)), *inv = malloc(nt * sizeof(int32_t));
    int32_t *tet = malloc(nt * 4 * sizeof(int32_t)), *bidx = malloc(nt * sizeof(int32_t));
    uint8_t *reg = malloc(nt);
    float *vol = malloc(nt * sizeof(float));
    int ok = ord && inv && tet && bidx && reg && vol;
    for (int c = 0; ok && c < m->tcol.n; c++)
        for (int j0 = m->tcol.start[c]; j0 < m->tcol.start[c + 1]; j0 += SB_GROUP_SPAN) {
            int j1 = j0 + SB_GROUP_SPAN < m->tcol.start[c + 1] ? j0 + SB_GROUP_SPAN
                                                               : m->tcol.start[c + 1];
            int at = j0;
            for (int springs = 0; springs < 2; springs++)
                for (int j = j0; j < j1; j++)
                    if ((m->bidx[j] >= 0) == springs)
                        ord[at++] = j;
        }
    for (size_t j = 0; ok && j < nt; j++) {
        int32_t e = ord[j];
        inv[e] = (int32_t)j;
        memcpy(&tet[j * 4], &m->tet[e * 4], 4 * sizeof(int32_t));
        reg[j] = m->region[e];
        vol[j] = m->tvol[e];
        bidx[j] = m->bidx[e];
    }
    if (ok) {
        memcpy(m->tet, tet, nt * 4 * sizeof(int32_t));
        memcpy(m->region, reg, nt);
        memcpy(m->tvol, vol, nt * sizeof(float));
        memcpy(m->bidx, bidx, nt * sizeof(int32_t));
        for (int b = 0; b < m->nbound; b++)
            m->btet[b] = inv[m->btet[b]];
        for (int i = 0; i < m->nembed; i++)
            m->etet[i] = inv[m->etet[i]];
    }
    free(ord);
    free(inv);
    free(tet);
    free(bidx);
    free(reg);
    free(vol);
    return ok;
}

sim_status sim_softbody_model_hybrid(sim_softbody_model **out, const sim_softbody_tets *t,
                                     char *err, size_t err_sz)
{
    *out = NULL;
    sim_status st = check_counts(t, err, err_sz);
    if (st == SIM_OK)
        st = check_tets(t, err, err_sz);
    if (st == SIM_OK)
        st = check_embed(t, err, err_sz);
    if (st != SIM_OK)
        return st;
    sim_softbody_model *m = sc_calloc(1, sizeof *m);
    int ok = m && copy_tets(m, t) && sort_tets(m) && build_tet_edges(m) && build_boundary(m) &&
             group_tets(m);
    if (!ok) {
        sim_softbody_model_destroy(m);
        return (sim_status)sc_fail(err, err_sz, SIM_ERR_NOMEM, "hybrid model: out of memory");
    }
    m->info.kind = SIM_SOFTBODY_HYBRID;
    sb_model_bounds(m);
    m->info.surface_vertices = m->nembed;
    double vol = 0.0;
    for (int e = 0; e < m->ntet; e++)
        vol += (double)m->tvol[e];
    m->info.rest_volume = (float)vol;
    *out = m;
    return SIM_OK;
}
