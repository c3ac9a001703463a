/* sb_state.c: the softbody state: parameters (the declared table), the materials derived
 * from them, the parent (tray), planes, hand and pins, and the frame.
 *
 * A frame: (1) the parent's motion since the last frame carries every particle rigidly,
 * positions and velocities (the source's first fix: PBD runs in world space and would
 * leave the body behind); attached planes are placed at the parent's new pose; (2) the
 * backend runs the substeps; (3) the embedded surface follows its tets; (4) the guard.
 * Gravity is the body's own and is applied once, in the substeps: the carry adds none
 * (the source's second fix; the tray is kinematic, its motion comes from the caller).
 *
 * Materials of the hybrid model, from a region's compliance c = 1/E and density rho:
 *   a particle's mass is a quarter of each of its tets' rho V;
 *   an edge is a spring of stiffness E V_e / L^2 (V_e: a sixth of each tet's volume it
 *   belongs to, by region: a mixed edge adds the regions in parallel), so compliance
 *   alpha = L^2 / sum_r (V_e,r / c_r): a uniform stretch stores E/2 strain^2 V in the edges;
 *   a tet's volume constraint C = V - V0 has stiffness K / V0 with K = bulk_ratio E, so
 *   alpha = V0 c / bulk_ratio;
 *   a virtual spring (a quarter of its tet's volume) alpha = L^2 c_s / (V / 4), c_s from
 *   the two regions by spring_mode (params.def says why harmonic). */
#include <math.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "softbody_internal.h"

/* ---------------------------------------------------------------- parameters */

#define SIM_PARAMS_STRUCT sim_softbody_params
#include "../core/param_rows.h"
static const sim_param_desc k_params[] = {
#include "params.def"
};
#include "../core/param_rows_end.h"
#define N_PARAMS ((int)(sizeof k_params / sizeof k_params[0]))

const sim_param_desc *sim_softbody_params_table(int *n)
{
    *n = N_PARAMS;
    return k_params;
}

sim_softbody_params sim_softbody_default_params(void)
{
    sim_softbody_params p;
    memset(&p, 0, sizeof p);
    sim_params_default(k_params, N_PARAMS, &p);
    return p;
}

sim_status sim_softbody_params_validate(const sim_softbody_params *p, char *err, size_t err_sz)
{
    return sim_params_check(k_params, N_PARAMS, p, err, err_sz);
}

float sb_iteration_stiffness(float k, int n)
{
    return 1.0f - powf(1.0f - k, 1.0f / (float)n);
}

/* ---------------------------------------------------------------- materials */

static float spring_compliance(const sim_softbody_params *p, int r, int o)
{
    float cr = p->region_compliance[r], co = p->region_compliance[o];
    if (p->spring_mode == SIM_SPRING_ARITHMETIC) /* E = (E_r + E_o) / 2 */
        return 2.0f * cr * co / (cr + co);
    return 0.5f * (cr + co); /* harmonic mean of the moduli: the mean of the compliances */
}

static void hybrid_materials(const sim_softbody_model *m, sim_softbody_state *s)
{
    const sim_softbody_params *p = &s->prm;
    for (int i = 0; i < m->n; i++)
        s->w_free[i] = 0.0f;
    for (int e = 0; e < m->ntet; e++) {
        int r = m->region[e];
        float mq = 0.25f * p->region_density[r] * m->tvol[e];
        for (int j = 0; j < 4; j++)
            s->w_free[m->tet[e * 4 + j]] += mq; /* mass for now */
        s->talpha[e] = m->tvol[e] * p->region_compliance[r] / p->bulk_ratio;
    }
    for (int i = 0; i < m->n; i++) /* a vertex in no tet has no mass: it never moves */
        s->w_free[i] = s->w_free[i] > 0.0f ? 1.0f / s->w_free[i] : 0.0f;
    for (int e = 0; e < m->nedge; e++) {
        float k = 0.0f;
        for (int r = 0; r < SIM_SOFTBODY_NREGION; r++)
            k += m->evol[e * SIM_SOFTBODY_NREGION + r] / p->region_compliance[r];
        s->ealpha[e] = m->erest[e] * m->erest[e] / k;
    }
    for (int b = 0; b < m->nbound; b++) {
        int t = m->btet[b];
        float cs = spring_compliance(p, m->region[t], m->bother[b]);
        for (int j = 0; j < 4; j++) {
            float l = m->brest[b * 4 + j];
            s->balpha[b * 4 + j] = l * l * cs / (0.25f * m->tvol[t]);
        }
    }
}

void sb_edge_update(sim_softbody_state *s)
{
    const sim_softbody_model *m = s->m;
    if (m->info.kind == SIM_SOFTBODY_HYBRID) {
        float h = s->prm.dt / (float)s->prm.hybrid_substeps, inv_h2 = 1.0f / (h * h);
        for (int e = 0; e < m->nedge; e++)
            sb_xpbd_coefs(s->w[m->ea[e]], s->w[m->eb[e]], s->ealpha[e] * inv_h2, &s->ecoef[e * 4]);
        return;
    }
    float k = sb_iteration_stiffness(s->prm.distance_stiffness, s->prm.iterations);
    for (int e = 0; e < m->nedge; e++)
        sb_edge_shares(k, s->w[m->ea[e]], s->w[m->eb[e]], &s->ecoef[e * 4], &s->ecoef[e * 4 + 1]);
}

/* Inverse masses and compliances from the parameters; pins zero the solver's masses. */
static void update_materials(sim_softbody_state *s)
{
    const sim_softbody_model *m = s->m;
    if (m->info.kind == SIM_SOFTBODY_HYBRID)
        hybrid_materials(m, s);
    else
        for (int i = 0; i < m->n; i++)
            s->w_free[i] = 1.0f / s->prm.particle_mass;
    for (int i = 0; i < m->n; i++)
        s->w[i] = s->pinned[i] ? 0.0f : s->w_free[i];
    sb_edge_update(s);
}

/* ---------------------------------------------------------------- poses */

/* The rigid motion from pose (q0, t0) to pose (q1, t1): x -> R x + t. */
void sb_pose_delta(const float q0[4], const float t0[3], const float q1[4], const float t1[3],
                   float R[9], float t[3])
{
    float R0[9], R1[9];
    sb_quat_to_mat(q0, R0);
    sb_quat_to_mat(q1, R1);
    for (int r = 0; r < 3; r++) /* R = R1 R0^T */
        for (int c = 0; c < 3; c++)
            R[r * 3 + c] = R1[r * 3] * R0[c * 3] + R1[r * 3 + 1] * R0[c * 3 + 1] +
                           R1[r * 3 + 2] * R0[c * 3 + 2];
    for (int r = 0; r < 3; r++) /* t = t1 - R t0 */
        t[r] = t1[r] - (R[r * 3] * t0[0] + R[r * 3 + 1] * t0[1] + R[r * 3 + 2] * t0[2]);
}

/* The particles at rest under the parent's pose. */
static void place_rest(sim_softbody_state *s)
{
    const sim_softbody_model *m = s->m;
    float R[9];
    sb_quat_to_mat(s->pquat, R);
    for (int i = 0; i < m->n; i++) {
        const float *r = &m->rest[i * 3];
        for (int k = 0; k < 3; k++) {
            s->x[i * 3 + k] =
                R[k * 3] * r[0] + R[k * 3 + 1] * r[1] + R[k * 3 + 2] * r[2] + s->ppos[k];
            s->v[i * 3 + k] = 0.0f;
        }
    }
    memcpy(s->xp, s->x, (size_t)m->n * 3 * sizeof(float));
    memcpy(s->cpos, s->ppos, sizeof s->cpos);
    memcpy(s->cquat, s->pquat, sizeof s->cquat);
    memcpy(s->quat, s->pquat, sizeof s->quat); /* shape matching's R at rest is the parent's */
}

/* ---------------------------------------------------------------- lifecycle */

static int state_alloc(sim_softbody_state *s, const sim_softbody_model *m)
{
    size_t n = (size_t)m->n, nl = (size_t)m->nedge + (size_t)m->ntet + 4 * (size_t)m->nbound;
    s->x = malloc(n * 3 * sizeof(float));
    s->v = malloc(n * 3 * sizeof(float));
    s->xp = malloc(n * 3 * sizeof(float));
    s->w_free = malloc(n * sizeof(float));
    s->w = malloc(n * sizeof(float));
    s->pinned = sc_calloc(n, 1);
    s->ealpha = sc_calloc((size_t)m->nedge + 1, sizeof(float));
    s->ecoef = sc_calloc((size_t)m->nedge * 4 + 1, sizeof(float));
    s->talpha = sc_calloc((size_t)m->ntet + 1, sizeof(float));
    s->balpha = sc_calloc(4 * (size_t)m->nbound + 1, sizeof(float));
    s->lambda = sc_calloc(nl + 1, sizeof(float));
    s->surf = sc_calloc((size_t)m->nembed * 3 + 1, sizeof(float));
    s->partial = sc_calloc((size_t)sb_nchunk(m->n) * 12, sizeof(float));
    s->grad = sc_calloc(n * 3, sizeof(float));
    s->vpart = sc_calloc((size_t)sb_nchunk(m->n) * 2, sizeof(float));
    s->grab_idx = malloc(n * sizeof(int32_t));
    s->grab_off = malloc(n * 3 * sizeof(float));
    return s->x && s->v && s->xp && s->w_free && s->w && s->pinned && s->ealpha && s->ecoef &&
           s->talpha && s->balpha && s->lambda && s->surf && s->partial && s->grad && s->vpart &&
           s->grab_idx && s->grab_off;
}

size_t sim_softbody_state_bytes(const sim_softbody_model *m)
{
    size_t n = (size_t)m->n, f = sizeof(float);
    size_t nl = (size_t)m->nedge + (size_t)m->ntet + 4 * (size_t)m->nbound;
    size_t nchunk = (size_t)sb_nchunk(m->n);
    return sizeof(sim_softbody_state) + n * (3 * 3 + 2 + 3) * f + n /* x v xp, w, grad; pinned */
           + (size_t)m->nedge * 5 * f + (size_t)m->ntet * f + 4 * (size_t)m->nbound * f + nl * f +
           (size_t)m->nembed * 3 * f + nchunk * 14 * f /* partial sums */
           + n * (sizeof(int32_t) + 3 * f);            /* the grab */
}

void sim_softbody_state_destroy(sim_softbody_state *s)
{
    if (!s)
        return;
    void *p[] = {s->ecoef,   s->x,      s->v,      s->xp,       s->w_free,  s->w,
                 s->pinned,  s->ealpha, s->talpha, s->balpha,   s->lambda,  s->surf,
                 s->partial, s->grad,   s->vpart,  s->grab_idx, s->grab_off};
    for (size_t i = 0; i < sizeof p / sizeof p[0]; i++)
        free(p[i]);
    free(s);
}

sim_status sim_softbody_state_create(sim_softbody_state **out, const sim_softbody_model *m,
                                     sim_backend *b, char *err, size_t err_sz)
{
    *out = NULL;
    sim_softbody_state *s = sc_calloc(1, sizeof *s);
    if (!s || !state_alloc(s, m)) {
        sim_softbody_state_destroy(s);
        return (sim_status)sc_fail(err, err_sz, SIM_ERR_NOMEM, "softbody state: out of memory");
    }
    s->m = m;
    s->b = b;
    s->threads = sim_backend_threads(b);
    s->prm = sim_softbody_default_params();
    s->pquat[0] = 1.0f;
    s->next_plane_id = 1;
    update_materials(s);
    place_rest(s);
    sb_place_surface(s);
    *out = s;
    return SIM_OK;
}

void sim_softbody_state_reset(sim_softbody_state *s)
{
    place_rest(s);
    s->ngrab = 0;
    sb_place_surface(s);
}

sim_status sim_softbody_state_copy(sim_softbody_state *dst, const sim_softbody_state *src,
                                   char *err, size_t err_sz)
{
    if (dst->m != src->m)
        return (sim_status)sc_fail(err, err_sz, SIM_ERR_ARG,
                                   "softbody state copy: the states are of different models");
    const sim_softbody_model *m = src->m;
    size_t n = (size_t)m->n, nl = (size_t)m->nedge + (size_t)m->ntet + 4 * (size_t)m->nbound;
    memcpy(dst->x, src->x, n * 3 * sizeof(float));
    memcpy(dst->v, src->v, n * 3 * sizeof(float));
    memcpy(dst->xp, src->xp, n * 3 * sizeof(float));
    memcpy(dst->pinned, src->pinned, n);
    memcpy(dst->lambda, src->lambda, nl * sizeof(float));
    memcpy(dst->surf, src->surf, (size_t)m->nembed * 3 * sizeof(float));
    memcpy(dst->grab_idx, src->grab_idx, (size_t)src->ngrab * sizeof(int32_t));
    memcpy(dst->grab_off, src->grab_off, (size_t)src->ngrab * 3 * sizeof(float));
    dst->prm = src->prm;
    dst->ngrab = src->ngrab;
    dst->nplanes = src->nplanes;
    dst->next_plane_id = src->next_plane_id;
    memcpy(dst->planes, src->planes, sizeof dst->planes);
    memcpy(dst->hand, src->hand, sizeof dst->hand);
    memcpy(dst->quat, src->quat, sizeof dst->quat);
    memcpy(dst->ppos, src->ppos, sizeof dst->ppos);
    memcpy(dst->pquat, src->pquat, sizeof dst->pquat);
    memcpy(dst->cpos, src->cpos, sizeof dst->cpos);
    memcpy(dst->cquat, src->cquat, sizeof dst->cquat);
    update_materials(dst);
    return SIM_OK;
}

void sim_softbody_set_threads(sim_softbody_state *s, int threads)
{
    int bt = sim_backend_threads(s->b);
    s->threads = threads <= 0 || threads > bt ? bt : threads;
}

sim_softbody_params sim_softbody_get_params(const sim_softbody_state *s)
{
    return s->prm;
}

sim_status sim_softbody_set_params(sim_softbody_state *s, const sim_softbody_params *p, char *err,
                                   size_t err_sz)
{
    sim_status st = sim_softbody_params_validate(p, err, err_sz);
    if (st != SIM_OK)
        return st;
    s->prm = *p;
    update_materials(s);
    return SIM_OK;
}
