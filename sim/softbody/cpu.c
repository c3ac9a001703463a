/* cpu.c: one softbody frame on the CPU: substeps of predict, the constraints colour by
 * colour (a colour in parallel), the hand, shape matching (partial sums over fixed chunks
 * of SB_CHUNK particles, added in chunk order), collisions and velocities. The math is
 * sim/softbody/kernels.h, shared with the CUDA backend. Nothing here depends on the thread
 * count: 1 and N threads give bitwise the same state. A body below parallel_min particles
 * runs on one thread (a barrier per colour costs more than its work). */
#include <string.h>

#include "softbody_internal.h"

/* for (i = lo; i < hi; i++) stmt, on nt threads (static schedule), or as a plain loop on one:
 * an OpenMP region costs about a microsecond even when its `if` keeps it on one thread, and a
 * 500-particle frame opens 245 of them (a fifth of its time, measured). */
#define SB_LOOP(nt, i, lo, hi, stmt)                                                               \
    do {                                                                                           \
        if ((nt) > 1) {                                                                            \
            _Pragma("omp parallel for num_threads(nt) schedule(static)") for (int i = (lo);        \
                                                                              i < (hi); i++) stmt; \
        } else {                                                                                   \
            for (int i = (lo); i < (hi); i++)                                                      \
                stmt;                                                                              \
        }                                                                                          \
    } while (0)

typedef struct sb_step {
    float h, inv_h, inv_h2, damp, acc[3];
    int nt;
} sb_step;

static void surface_constraints(const sim_softbody_model *m, sim_softbody_state *s,
                                const sb_step *c)
{
    float k = sb_iteration_stiffness(s->prm.distance_stiffness, s->prm.iterations);
    int nt = c->nt;
    for (int it = 0; it < s->prm.iterations; it++)
        for (int col = 0; col < m->ecol.n; col++) {
            int c0 = m->ecol.start[col], c1 = m->ecol.start[col + 1];
            SB_LOOP(nt, e, c0, c1, sb_distance(m->ea[e], m->eb[e], m->erest[e], k, s->x, s->w));
        }
}

/* The volume constraint of tet t, then its springs when it is on a region boundary. */
static void tet_item(const sim_softbody_model *m, sim_softbody_state *s, int t, float inv_h2,
                     int springs)
{
    float *lv = &s->lambda[m->nedge], *ls = &s->lambda[m->nedge + m->ntet];
    const int32_t *t4 = &m->tet[t * 4];
    sb_xpbd_volume(t4, m->tvol[t], s->talpha[t] * inv_h2, s->x, s->w, &lv[t]);
    int b = m->bidx[t];
    if (springs && b >= 0)
        sb_tet_springs(t4, &m->brest[b * 4], &s->balpha[b * 4], inv_h2, s->x, s->w, &ls[b * 4]);
}

static void tet_constraints(const sim_softbody_model *m, sim_softbody_state *s, const sb_step *c)
{
    int nt = c->nt, springs = s->prm.spring_mode != SIM_SPRING_OFF;
    float inv_h2 = c->inv_h2;
    size_t nl = (size_t)m->nedge + (size_t)m->ntet + 4 * (size_t)m->nbound;
    memset(s->lambda, 0, nl * sizeof(float)); /* XPBD: multipliers start each substep at 0 */
    for (int it = 0; it < s->prm.iterations; it++) {
        for (int col = 0; col < m->ecol.n; col++) {
            int c0 = m->ecol.start[col], c1 = m->ecol.start[col + 1];
            SB_LOOP(nt, e, c0, c1,
                    sb_xpbd_distance(m->ea[e], m->eb[e], m->erest[e], s->ealpha[e] * inv_h2, s->x,
                                     s->w, &s->lambda[e]));
        }
        for (int col = 0; col < m->tcol.n; col++) {
            int c0 = m->tcol.start[col], c1 = m->tcol.start[col + 1];
            SB_LOOP(nt, j, c0, c1, tet_item(m, s, j, inv_h2, springs));
        }
    }
}

static void shape_match(const sim_softbody_model *m, sim_softbody_state *s, const sb_step *c)
{
    int n = m->n, nch = sb_nchunk(n), nt = c->nt;
    float *psum = s->partial, *papq = s->partial + (size_t)nch * 3, cen[3], R[9];
    SB_LOOP(nt, k, 0, nch,
            sb_sum_x(k * SB_CHUNK, k == nch - 1 ? n : (k + 1) * SB_CHUNK, s->x, &psum[k * 3]));
    sb_reduce_centre(nch, psum, n, cen);
    SB_LOOP(nt, k, 0, nch,
            sb_sum_apq(k * SB_CHUNK, k == nch - 1 ? n : (k + 1) * SB_CHUNK, s->x, cen, m->q,
                       &papq[k * 9]));
    sb_reduce_rotation(nch, papq, s->quat, R);
    float ks = s->prm.shape_stiffness;
    SB_LOOP(nt, i, 0, n, sb_shape_goal(i, s->x, s->w, cen, R, m->q, ks));
}

/* The closed surface's volume constraint (Mueller et al. 2007, section 4.4): one global
 * projection, its sums over fixed chunks added in order. */
static void volume_constraint(const sim_softbody_model *m, sim_softbody_state *s, const sb_step *c)
{
    int n = m->n, nch = sb_nchunk(n), nt = c->nt;
    float o[3] = {s->x[0], s->x[1], s->x[2]}; /* any point on the body (see the kernel) */
    SB_LOOP(nt, i, 0, n, sb_volume_grad(i, m->vt_start, m->vt_jk, s->x, o, s->grad));
    SB_LOOP(nt, k, 0, nch,
            sb_sum_volume_wg2(k * SB_CHUNK, k == nch - 1 ? n : (k + 1) * SB_CHUNK, s->x, o, s->w,
                              s->grad, &s->vpart[k * 2]));
    float sc = sb_volume_scale(nch, s->vpart, m->rest6, s->prm.volume_stiffness);
    SB_LOOP(nt, i, 0, n, sb_volume_apply(i, s->x, s->w, s->grad, sc));
}

static void substep(const sim_softbody_model *m, sim_softbody_state *s, const sb_frame *f,
                    const sb_step *c)
{
    int n = m->n, nt = c->nt;
    SB_LOOP(nt, i, 0, n, sb_predict(i, s->x, s->v, s->xp, s->w, c->acc, c->h));
    if (m->info.kind == SIM_SOFTBODY_SURFACE)
        surface_constraints(m, s, c);
    else
        tet_constraints(m, s, c);
    for (int j = 0; j < s->ngrab; j++) /* distinct particles: any order gives the same */
        sb_grab(j, s->grab_idx, s->grab_off, s->hand, s->prm.grab_stiffness, s->x, s->w);
    if (m->info.kind == SIM_SOFTBODY_SURFACE && s->prm.shape_stiffness > 0.0f)
        shape_match(m, s, c);
    if (m->info.kind == SIM_SOFTBODY_SURFACE && s->prm.volume_stiffness > 0.0f)
        volume_constraint(m, s, c);
    float mu = s->prm.friction, vmax = s->prm.v_max;
    SB_LOOP(nt, i, 0, n, {
        sb_collide(i, s->x, s->xp, s->w, f->planes, f->nplanes, mu);
        sb_velocity(i, s->x, s->xp, s->v, s->w, c->inv_h, c->damp, vmax);
    });
}

static sim_status cpu_solve(const sim_softbody_model *m, sim_softbody_state *s, const sb_frame *f,
                            int threads)
{
    const sim_softbody_params *p = &s->prm;
    sb_step c;
    c.h = p->dt / (float)p->substeps;
    c.inv_h = 1.0f / c.h;
    c.inv_h2 = c.inv_h * c.inv_h;
    c.damp = 1.0f - p->damping * c.h;
    c.damp = c.damp < 0.0f ? 0.0f : c.damp;
    c.acc[0] = c.acc[1] = 0.0f;
    c.acc[2] = -p->gravity;
    c.nt = m->n >= p->parallel_min ? threads : 1;
    for (int k = 0; k < p->substeps; k++)
        substep(m, s, f, &c);
    return SIM_OK;
}

const sim_softbody_backend_i sb_cpu_backend = {"cpu", cpu_solve};
