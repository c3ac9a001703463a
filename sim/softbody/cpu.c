/* cpu.c: one softbody frame on the CPU: substeps of predict, the constraints colour by
 * colour (a colour in parallel), the hand, shape matching (partial sums over fixed chunks
 * of SB_CHUNK particles, added in chunk order), collisions and velocities. The math is
 * sim/softbody/kernels.h, shared with the CUDA backend. Nothing here depends on the thread
 * count: 1 and N threads give bitwise the same state. A body below parallel_min particles
 * runs on one thread (a barrier per colour costs more than its work).
 * Threads: one OpenMP region for the whole frame; every loop inside is an `omp for` whose
 * implicit barrier orders it before the next (a region per loop cost about a microsecond
 * each to open, and a frame has thousands of loops: colours x iterations x substeps).
 * Lanes: the hybrid's tets go SB_LANES of a colour at a time through kernels_tet.h compiled
 * for GCC vectors (below); its edges one at a time. */
#include <math.h>
#include <string.h>

#include "softbody_internal.h"

/* for (i = lo; i < hi; i++) stmt: shared among the frame's threads (static schedule, then a
 * barrier) inside the frame's region, or a plain loop on one thread. */
#define SB_FOR(nt, i, lo, hi, stmt)                                                     \
    do {                                                                                \
        if ((nt) > 1) {                                                                 \
            _Pragma("omp for schedule(static)") for (int i = (lo); i < (hi); i++) stmt; \
        } else {                                                                        \
            for (int i = (lo); i < (hi); i++)                                           \
                stmt;                                                                   \
        }                                                                               \
    } while (0)

/* stmt on one thread of the frame's, the others waiting for it. */
#define SB_SINGLE(nt, stmt)             \
    do {                                \
        if ((nt) > 1) {                 \
            _Pragma("omp single") stmt; \
        } else {                        \
            stmt;                       \
        }                               \
    } while (0)

/* Colours smaller than this (items) go to one thread, several in a row before one barrier:
 * the barrier would cost more than sharing them saves. Same order, same result. */
#define SB_SMALL_COLOUR 128

typedef struct sb_step {
    float h, inv_h, inv_h2, damp, acc[3];
    int nt;
} sb_step;

/* The first colour at or after c that has SB_SMALL_COLOUR items or more (nt > 1). */
static int big_colour(const sb_colours *col, int c, int nt)
{
    while (nt > 1 && c < col->n && col->start[c + 1] - col->start[c] < SB_SMALL_COLOUR)
        c++;
    return c;
}

static void surface_constraints(const sim_softbody_model *m, sim_softbody_state *s,
                                const sb_step *c)
{
    int nt = c->nt;
    const float *sh = s->ecoef; /* the stiffness and the masses, per edge (sb_edge_update) */
    for (int it = 0; it < s->prm.iterations; it++)
        for (int col = 0; col < m->ecol.n; col++) {
            int c0 = m->ecol.start[col], c1 = m->ecol.start[col + 1];
            SB_FOR(nt, e, c0, c1,
                   sb_distance(m->ea[e], m->eb[e], m->erest[e], sh[e * 4], sh[e * 4 + 1], s->x));
        }
}

/* The hybrid model's per-tet math on SB_LANES tets of a colour at once (kernels_tet.h with
 * GCC vector lanes): the tets of a colour share no vertex, so each lane is what the one-tet
 * code gives for its tet, and the grouping (fixed: from the colour's start) changes nothing. */
#define SB_LANES 4 /* 8 (two SSE registers) was slower, measured */
typedef float sb_vf __attribute__((vector_size(16)));
typedef int32_t sb_vi __attribute__((vector_size(16)));

static inline __attribute__((always_inline)) sb_vf sb_vsqrt(sb_vf a)
{
#if defined(__SSE__)
    return __builtin_ia32_sqrtps(a);
#else
    for (int l = 0; l < SB_LANES; l++)
        a[l] = sqrtf(a[l]);
    return a;
#endif
}

static inline __attribute__((always_inline)) int sb_vany(sb_vi m)
{
    int32_t any = 0;
    for (int l = 0; l < SB_LANES; l++)
        any |= m[l];
    return any != 0;
}

#define SBT              sb_vf
#define SBM              sb_vi
#define SBT_FN(name)     name##_v
#define SBT_SQRT(x)      sb_vsqrt(x)
#define SBT_SEL(m, a, b) ((sb_vf)(((sb_vi)(a) & (m)) | ((sb_vi)(b) & ~(m))))
#define SBT_ANY(m)       sb_vany(m)
#define SBT_INLINE       static inline __attribute__((always_inline))
#include "kernels_tet.h"
#undef SBT
#undef SBM
#undef SBT_FN
#undef SBT_SQRT
#undef SBT_SEL
#undef SBT_ANY
#undef SBT_INLINE

/* What one pass of the hybrid constraints needs besides the model and state. keep: the
 * multipliers are read and stored; with one iteration a substep each starts at 0 and is not
 * used again, so it is neither (same result, less memory traffic). */
typedef struct sb_pass {
    float inv_h2;
    int springs, keep;
} sb_pass;

/* A vector from one expression per lane, built in registers: lanes written one by one into
 * memory and read back as a vector would wait for the stores each time. */
#define SB_AT(l, i, expr) \
    __extension__({       \
        const int l = i;  \
        expr;             \
    })
#define SB_GATHER(l, expr) \
    ((sb_vf){SB_AT(l, 0, expr), SB_AT(l, 1, expr), SB_AT(l, 2, expr), SB_AT(l, 3, expr)})
#define SB_GATHERI(l, expr) \
    ((sb_vi){SB_AT(l, 0, expr), SB_AT(l, 1, expr), SB_AT(l, 2, expr), SB_AT(l, 3, expr)})

/* Items j0 .. j0 + n - 1 of a colour in lanes; a missing lane repeats the first item, computed
 * and not kept. */
typedef struct sb_group {
    int n, j[SB_LANES];
} sb_group;

static sb_group group_at(int c0, int c1, int gi)
{
    sb_group g;
    int j0 = c0 + gi * SB_LANES;
    g.n = c1 - j0 < SB_LANES ? c1 - j0 : SB_LANES;
    for (int l = 0; l < SB_LANES; l++)
        g.j[l] = l < g.n ? j0 + l : j0;
    return g;
}

/* Edge e (one at a time: in lanes the gathers cost more than the lanes save, measured). */
static inline void edge_item(const sim_softbody_model *m, sim_softbody_state *s, int e,
                             const sb_pass *pp)
{
    float l0 = 0.0f;
    sb_xpbd_distance(m->ea[e], m->eb[e], m->erest[e], &s->ecoef[e * 4], s->x,
                     pp->keep ? &s->lambda[e] : &l0);
}

/* Tets of a colour, SB_LANES at a time: the volume (sb_xpbd_volume_p), then the springs where
 * any lane's tet is on a region boundary (sb_tets.c puts those last within spans of a colour). */
static void tet_group(const sim_softbody_model *m, sim_softbody_state *s, int c0, int c1, int gi,
                      const sb_pass *pp)
{
    float inv_h2 = pp->inv_h2;
    int springs = pp->springs, keep = pp->keep;
    sb_group g = group_at(c0, c1, gi);
    float *x = s->x, *lv = &s->lambda[m->nedge], *ls = &s->lambda[m->nedge + m->ntet];
    const int32_t *tet = m->tet;
    sb_vf p[4][3], wv[4];
    for (int j = 0; j < 4; j++) {
        for (int k = 0; k < 3; k++)
            p[j][k] = SB_GATHER(l, x[tet[g.j[l] * 4 + j] * 3 + k]);
        wv[j] = SB_GATHER(l, s->w[tet[g.j[l] * 4 + j]]);
    }
    sb_vf vl = SB_GATHER(l, keep ? lv[g.j[l]] : 0.0f);
    sb_vi on = SB_GATHERI(l, -(l < g.n));
    if (s->prm.tet_volumes)
        sb_xpbd_volume_p_v(p, wv, SB_GATHER(l, m->tvol[g.j[l]]),
                           SB_GATHER(l, s->talpha[g.j[l]] * inv_h2), &vl, on);
    int b[SB_LANES], any = 0;
    for (int l = 0; l < SB_LANES; l++) {
        b[l] = springs && l < g.n ? m->bidx[g.j[l]] : -1;
        any |= b[l] >= 0;
    }
    sb_vf sl[4];
    if (any) {
        sb_vf rest[4], at[4];
        for (int k = 0; k < 4; k++) {
            rest[k] = SB_GATHER(l, b[l] >= 0 ? m->brest[b[l] * 4 + k] : 0.0f);
            at[k] = SB_GATHER(l, b[l] >= 0 ? s->balpha[b[l] * 4 + k] * inv_h2 : 0.0f);
            sl[k] = SB_GATHER(l, keep && b[l] >= 0 ? ls[b[l] * 4 + k] : 0.0f);
        }
        sb_tet_springs_p_v(p, wv, rest, at, sl, SB_GATHERI(l, -(b[l] >= 0)));
    }
    for (int l = 0; l < g.n; l++) {
        const int32_t *t4 = &tet[g.j[l] * 4];
        for (int j = 0; j < 4; j++)
            for (int k = 0; k < 3; k++)
                x[t4[j] * 3 + k] = p[j][k][l];
        if (!keep)
            continue;
        lv[g.j[l]] = vl[l];
        for (int k = 0; b[l] >= 0 && k < 4; k++)
            ls[b[l] * 4 + k] = sl[k][l];
    }
}

static int ngroups(int c0, int c1)
{
    return (c1 - c0 + SB_LANES - 1) / SB_LANES;
}

/* Colours c0 .. c1 - 1 of col, in order, on the calling thread. */
static void small_colours(const sim_softbody_model *m, sim_softbody_state *s, const sb_colours *col,
                          int c0, int c1, const sb_pass *pp)
{
    for (int c = c0; c < c1; c++) {
        int a = col->start[c], b = col->start[c + 1];
        if (col == &m->ecol)
            for (int e = a; e < b; e++)
                edge_item(m, s, e, pp);
        else
            for (int gi = 0; gi < ngroups(a, b); gi++)
                tet_group(m, s, a, b, gi, pp);
    }
}

/* One pass over the colours of col (the edges or the tets): a colour in parallel, a run of
 * small ones on one thread. */
static void colour_pass(const sim_softbody_model *m, sim_softbody_state *s, const sb_colours *col,
                        int nt, const sb_pass *pp)
{
    for (int c = 0; c < col->n;) {
        int big = big_colour(col, c, nt);
        if (big > c) {
            SB_SINGLE(nt, small_colours(m, s, col, c, big, pp));
            c = big;
            continue;
        }
        int c0 = col->start[c], c1 = col->start[c + 1];
        if (col == &m->ecol)
            SB_FOR(nt, e, c0, c1, edge_item(m, s, e, pp));
        else
            SB_FOR(nt, gi, 0, ngroups(c0, c1), tet_group(m, s, c0, c1, gi, pp));
        c++;
    }
}

/* Each iteration: the edges colour by colour, then the tets (volume, then springs on a region
 * boundary) colour by colour. */
static void tet_constraints(const sim_softbody_model *m, sim_softbody_state *s, const sb_step *c)
{
    int nt = c->nt, nl = m->nedge + m->ntet + 4 * m->nbound;
    sb_pass pp;
    pp.inv_h2 = c->inv_h2;
    pp.springs = s->prm.spring_mode != SIM_SPRING_OFF;
    pp.keep = s->prm.hybrid_iterations > 1;
    if (pp.keep) /* XPBD: multipliers start each substep at 0 */
        SB_FOR(nt, i, 0, nl, s->lambda[i] = 0.0f);
    for (int it = 0; it < s->prm.hybrid_iterations; it++) {
        colour_pass(m, s, &m->ecol, nt, &pp);
        if (s->prm.tet_volumes || pp.springs)
            colour_pass(m, s, &m->tcol, nt, &pp);
    }
}

/* Shared results of the one-thread parts: s->scratch holds the centre (0..2), R (3..11) and
 * the volume's scale (12). */
static void shape_match(const sim_softbody_model *m, sim_softbody_state *s, const sb_step *c)
{
    int n = m->n, nch = sb_nchunk(n), nt = c->nt;
    float *psum = s->partial, *papq = s->partial + (size_t)nch * 3, *cen = s->scratch,
          *R = s->scratch + 3;
    SB_FOR(nt, k, 0, nch,
           sb_sum_x(k * SB_CHUNK, k == nch - 1 ? n : (k + 1) * SB_CHUNK, s->x, &psum[k * 3]));
    SB_SINGLE(nt, sb_reduce_centre(nch, psum, n, cen));
    SB_FOR(nt, k, 0, nch,
           sb_sum_apq(k * SB_CHUNK, k == nch - 1 ? n : (k + 1) * SB_CHUNK, s->x, cen, m->q,
                      &papq[k * 9]));
    SB_SINGLE(nt, sb_reduce_rotation(nch, papq, s->quat, R));
    float ks = s->prm.shape_stiffness;
    SB_FOR(nt, i, 0, n, sb_shape_goal(i, s->x, s->w, cen, R, m->q, ks));
}

/* Chunk k's volume gradients, then its partial sums over them (one pass: the sums read the
 * chunk's gradients just made, in the same order as two passes would). */
static void volume_chunk(const sim_softbody_model *m, sim_softbody_state *s, int k,
                         const float o[3])
{
    int i0 = k * SB_CHUNK, i1 = i0 + SB_CHUNK < m->n ? i0 + SB_CHUNK : m->n;
    for (int i = i0; i < i1; i++)
        sb_volume_grad(i, m->vt_start, m->vt_jk, s->x, o, s->grad);
    sb_sum_volume_wg2(i0, i1, s->x, o, s->w, s->grad, &s->vpart[k * 2]);
}

/* The closed surface's volume constraint (Mueller et al. 2007, section 4.4): one global
 * projection, its sums over fixed chunks added in order. Its scale goes to s->scratch[12];
 * substep applies it with the collisions (one pass over the particles fewer). */
static void volume_constraint(const sim_softbody_model *m, sim_softbody_state *s, const sb_step *c)
{
    int nch = sb_nchunk(m->n), nt = c->nt;
    float o[3] = {s->x[0], s->x[1], s->x[2]}; /* any point on the body (see the kernel) */
    SB_FOR(nt, k, 0, nch, volume_chunk(m, s, k, o));
    SB_SINGLE(nt,
              s->scratch[12] = sb_volume_scale(nch, s->vpart, m->rest6, s->prm.volume_stiffness));
}

/* One substep after its prediction; the next substep's prediction is made with this one's
 * velocities, particle by particle (one pass over the particles fewer; the same result). */
static void substep(const sim_softbody_model *m, sim_softbody_state *s, const sb_frame *f,
                    const sb_step *c, int last)
{
    int n = m->n, nt = c->nt;
    if (m->info.kind == SIM_SOFTBODY_SURFACE)
        surface_constraints(m, s, c);
    else
        tet_constraints(m, s, c);
    /* distinct particles: any order gives the same */
    SB_FOR(nt, j, 0, s->ngrab,
           sb_grab(j, s->grab_idx, s->grab_off, s->hand, s->prm.grab_stiffness, s->x, s->w));
    if (m->info.kind == SIM_SOFTBODY_SURFACE && s->prm.shape_stiffness > 0.0f)
        shape_match(m, s, c);
    int vol = m->info.kind == SIM_SOFTBODY_SURFACE && s->prm.volume_stiffness > 0.0f;
    if (vol)
        volume_constraint(m, s, c);
    float mu = s->prm.friction, vmax = s->prm.v_max, vs = vol ? s->scratch[12] : 0.0f;
    SB_FOR(nt, i, 0, n, {
        if (vol)
            sb_volume_apply(i, s->x, s->w, s->grad, vs);
        sb_collide(i, s->x, s->xp, s->w, f->planes, f->nplanes, mu);
        sb_velocity(i, s->x, s->xp, s->v, s->w, c->inv_h, c->damp, vmax);
        if (!last)
            sb_predict(i, s->x, s->v, s->xp, s->w, c->acc, c->h);
    });
}

static void substeps(const sim_softbody_model *m, sim_softbody_state *s, const sb_frame *f,
                     const sb_step *c)
{
    int n = m->n, nt = c->nt, ns = sb_substeps(m, &s->prm);
    SB_FOR(nt, i, 0, n, sb_predict(i, s->x, s->v, s->xp, s->w, c->acc, c->h));
    for (int k = 0; k < ns; k++)
        substep(m, s, f, c, k == ns - 1);
}

static sim_status cpu_solve(const sim_softbody_model *m, sim_softbody_state *s, const sb_frame *f,
                            int threads)
{
    const sim_softbody_params *p = &s->prm;
    sb_step c;
    c.h = p->dt / (float)sb_substeps(m, p);
    c.inv_h = 1.0f / c.h;
    c.inv_h2 = c.inv_h * c.inv_h;
    c.damp = 1.0f - p->damping * c.h;
    c.damp = c.damp < 0.0f ? 0.0f : c.damp;
    c.acc[0] = c.acc[1] = 0.0f;
    c.acc[2] = -p->gravity;
    c.nt = m->n >= p->parallel_min ? threads : 1;
    if (c.nt > 1) {
#pragma omp parallel num_threads(c.nt)
        substeps(m, s, f, &c);
    } else {
        substeps(m, s, f, &c);
    }
    return SIM_OK;
}

const sim_softbody_backend_i sb_cpu_backend = {"cpu", cpu_solve};
