/* cloth_cpu.c: one garment advanced by a frame on the CPU: substeps of predict, the
 * constraints colour by colour (a colour in parallel), collisions, velocities. The math
 * is sim/cloth/kernels.h, shared with the CUDA backend. A garment below PAR_MIN
 * particles runs on one thread: the scene runs characters in parallel instead. */
#include <string.h>

#include "cloth_internal.h"

#define PAR_MIN 2048

/* The constraints of colour c (no shared particle: in parallel). With a single iteration
 * each multiplier starts and ends the substep at 0 + its one change, which nothing reads:
 * it is kept in a register instead of the garment's array. */
static void solve_colour(const cloth_lod *l, int c, float a_stretch, float a_bend, cloth_garment *g,
                         int nt, int one_pass)
{
    int c0 = l->colour_start[c], cb = l->bend_start[c], c1 = l->colour_start[c + 1];
    (void)nt;
#pragma omp parallel num_threads(nt) if (nt > 1)
    {
        if (one_pass) {
#pragma omp for schedule(static) nowait
            for (int k = c0; k < cb; k++) {
                float lambda = 0.0f;
                xp_distance(l->ca[k], l->cb[k], l->crest[k], a_stretch, 1, g->x, g->w, &lambda);
            }
#pragma omp for schedule(static)
            for (int k = cb; k < c1; k++) {
                float lambda = 0.0f;
                xp_distance(l->ca[k], l->cb[k], l->crest[k], a_bend, 0, g->x, g->w, &lambda);
            }
        } else {
#pragma omp for schedule(static) nowait
            for (int k = c0; k < cb; k++)
                xp_distance(l->ca[k], l->cb[k], l->crest[k], a_stretch, 1, g->x, g->w,
                            &g->lambda[k]);
#pragma omp for schedule(static)
            for (int k = cb; k < c1; k++)
                xp_distance(l->ca[k], l->cb[k], l->crest[k], a_bend, 0, g->x, g->w, &g->lambda[k]);
        }
    }
}

static float cpu_solve(const sim_cloth_model *m, cloth_garment *g, const cloth_pose *p0,
                       const cloth_pose *p1, const sim_cloth_params *prm, int threads)
{
    const cloth_lod *l = &m->lod[g->lod];
    int n = g->n, nt = n >= PAR_MIN ? threads : 1;
    (void)nt; /* unused without OpenMP */
    float h = prm->dt / (float)prm->substeps, inv_h = 1.0f / h;
    float damp = 1.0f - prm->damping * h;
    damp = damp < 0.0f ? 0.0f : damp;
    float accel[3] = {prm->wind[0], prm->wind[1], prm->wind[2] - prm->gravity};
    float a_stretch = prm->stretch_compliance * l->compliance_scale * inv_h * inv_h;
    float a_bend = prm->bend_compliance * l->compliance_scale * inv_h * inv_h;
    float depth = 0.0f;
    for (int s = 0; s < prm->substeps; s++) {
        cloth_body body;
        cloth_body_at(m, p0, p1, (float)(s + 1) / (float)prm->substeps, &body);
#pragma omp parallel for num_threads(nt) if (nt > 1) schedule(static)
        for (int i = 0; i < n; i++)
            xp_predict(i, g->x, g->v, g->xp, g->w, accel, damp, h);
        cloth_place_pinned(m, g, &body);
        if (prm->iterations > 1) /* small steps: reset */
            memset(g->lambda, 0, (size_t)l->ncons * sizeof(float));
        for (int it = 0; it < prm->iterations; it++)
            for (int c = 0; c < l->ncolours; c++)
                solve_colour(l, c, a_stretch, a_bend, g, nt, prm->iterations == 1);
#pragma omp parallel for num_threads(nt) if (nt > 1) schedule(static)
        for (int i = 0; i < n; i++) {
            xp_collide(i, g->x, g->xp, g->w, body.caps, body.ncaps, prm->thickness, prm->friction);
            xp_velocity(i, g->x, g->xp, g->v, g->w, inv_h);
        }
        if (s == prm->substeps - 1) { /* what the frame leaves inside the body */
            float d = 0.0f;
#pragma omp parallel for num_threads(nt) if (nt > 1) schedule(static) reduction(max : d)
            for (int i = 0; i < n; i++)
                if (g->w[i] > 0.0f) {
                    float di = xp_penetration(i, g->x, body.caps, body.ncaps);
                    d = di > d ? di : d;
                }
            depth = d;
        }
    }
    /* Kinematic particles (pinned, held): the velocity of their last substep. */
    for (int i = 0; i < n; i++)
        if (g->w[i] <= 0.0f)
            for (int b = 0; b < 3; b++)
                g->v[i * 3 + b] = (g->x[i * 3 + b] - g->xp[i * 3 + b]) * inv_h;
    return depth;
}

const sim_cloth_backend_i cloth_cpu_backend = {"cpu", cpu_solve};
