/* chainmail.h: per-element math of the volume scene, written once and compiled by the
 * CPU backend (C11) and the CUDA backend (C++17). The CPU loop and the CUDA kernel
 * are thin wrappers around these functions, so the CPU tests cover the GPU's math.
 *
 * Method (see ../shared/CHAINMAIL.md):
 * - 3D ChainMail (Gibson 1997): each element is linked to its six lattice neighbours;
 *   a link from sponsor s to candidate c along axis a keeps c inside a box around s:
 *   along a, [min, max] from s (mirrored on the minus side); across a, +-shear.
 *   A violating candidate is moved minimally, component by component.
 * - HP-ChainMail (Rodriguez et al.): per-tissue tolerances and propagation speed; the
 *   wave is propagated in parallel with timestamps. Our reading: one Jacobi pass per
 *   unit of wave clock; an element follows the reached neighbours whose wave has
 *   arrived and that lead it (moved further this frame), moving minimally into the
 *   intersection of their boxes. With one sponsor this is exactly the original rule;
 *   with several it is the Bellman-Ford form of the same minimal-move solution, so the
 *   result does not depend on visit order (see cm_propagate_element).
 * - Relaxation (Gibson 1997, Frisken-Gibson 1999): an element moves toward the mean
 *   of its neighbours' positions minus rest offsets, each neighbour weighted by the
 *   inverse of its tissue's tolerance (air: weight 0, it carries no load), plus its own
 *   rest position as `home_weight` extra neighbours (elastic memory, our addition);
 *   rigid tissue (inverse mass 0) does not relax.
 * - Velocity layer (the seed's contribution): dX = X+ - X- is this frame's ChainMail
 *   correction; it accumulates into V scaled by inverse mass, damped by condition
 *   A (none), B (alpha) or C (implicit viscoelastic, Xu et al. 2018), clamped, and
 *   X += k V.
 * All lengths in lattice units. Keep to the common subset of C11 and C++17. */
#ifndef SIM_KERNELS_CHAINMAIL_H
#define SIM_KERNELS_CHAINMAIL_H

#include <math.h>
#include <stdint.h>

#include "../core/sc_base.h"

#define CM_NCLASS       4
#define CM_CLASS_MASK   0x03u
#define CM_FLAG_GRABBED 0x04u
/* t_reach of an element the current wave has not reached. */
#define CM_UNREACHED 1e30f
/* A propagation move shorter than this (any component) is not a move: it ends the wave. */
#define CM_MOVE_EPS 1e-5f
/* Relaxation weight cap: a tolerance below this counts as this (rigid neighbours). */
#define CM_MIN_TOLERANCE 0.02f

/* Propagation status bits for one element and one pass. */
#define CM_PROP_MOVED   1
#define CM_PROP_WAITING 2 /* a reached neighbour's wave has not arrived yet */

/* Everything the kernels read, flattened from sim_volume_params. POD, passed by value
 * to CUDA kernels. Pair tables are indexed [class_a * CM_NCLASS + class_b]. */
typedef struct cm_kparams {
    int nx, ny, nz;
    float link_min[CM_NCLASS * CM_NCLASS];
    float link_max[CM_NCLASS * CM_NCLASS];
    float link_shear[CM_NCLASS * CM_NCLASS];
    float link_tau[CM_NCLASS * CM_NCLASS]; /* wave passes to cross the link */
    float relax_w[CM_NCLASS];              /* pull of a neighbour of this class */
    float inv_mass[CM_NCLASS];
    float b1[CM_NCLASS];
    int condition; /* 0 A, 1 B, 2 C */
    float alpha, b0, k, v_max, dead_zone, margin;
    float relax_step, relax_threshold;
    float home_weight; /* pull toward the rest position, in neighbours of the own tissue */
} cm_kparams;

SIM_HD static inline float cm_minf(float a, float b)
{
    return a < b ? a : b;
}
SIM_HD static inline float cm_maxf(float a, float b)
{
    return a > b ? a : b;
}

/* Neighbour d (0..5: -x,+x,-y,+y,-z,+z) of element (x,y,z); -1 outside the lattice. */
SIM_HD static inline int64_t cm_neighbour(const cm_kparams *kp, int x, int y, int z, int d)
{
    int c[3];
    c[0] = x;
    c[1] = y;
    c[2] = z;
    int a = d >> 1;
    c[a] += (d & 1) ? 1 : -1;
    if (c[0] < 0 || c[1] < 0 || c[2] < 0 || c[0] >= kp->nx || c[1] >= kp->ny || c[2] >= kp->nz)
        return -1;
    return (int64_t)c[0] + (int64_t)kp->nx * ((int64_t)c[1] + (int64_t)kp->ny * (int64_t)c[2]);
}

SIM_HD static inline void cm_coords(const cm_kparams *kp, int64_t i, int *x, int *y, int *z)
{
    int64_t plane = (int64_t)kp->nx * kp->ny;
    *z = (int)(i / plane);
    int64_t r = i - (int64_t)(*z) * plane;
    *y = (int)(r / kp->nx);
    *x = (int)(r - (int64_t)(*y) * kp->nx);
}

/* The box that sponsor j (neighbour d of candidate i) allows for i, component b.
 * Neighbour d on the plus side along a means i = j - e_a: i[a] in [pj[a]-max, pj[a]-min]. */
SIM_HD static inline void cm_link_box(const cm_kparams *kp, int pair, int d, int b, float pj,
                                      float *lo, float *hi)
{
    int a = d >> 1;
    if (b == a) {
        float mn = kp->link_min[pair], mx = kp->link_max[pair];
        if (d & 1) {
            *lo = pj - mx;
            *hi = pj - mn;
        } else {
            *lo = pj + mn;
            *hi = pj + mx;
        }
    } else {
        float sh = kp->link_shear[pair];
        *lo = pj - sh;
        *hi = pj + sh;
    }
}

/* One propagation pass for element i at wave clock `clock`. Reads pos, flags, t_reach
 * of i and its neighbours; on CM_PROP_MOVED writes the new position and arrival time.
 *
 * Sponsors, per component: reached neighbours whose wave has arrived (t_j + tau <= clock)
 * and that have moved further along that component than i since the frame began
 * (leaders; pos_start is the frame-start position X-). i moves
 * minimally into the intersection of its leaders' boxes; where they disagree, the box of
 * the leader that moved furthest wins. A follower moves toward its leaders and never
 * past them, so this frame's motions grow monotonically and the wave converges; and on
 * every link one end leads or both moved equally (then the link keeps its frame-start
 * offset along that component, inside its band if it was), so a converged wave leaves
 * every link in band.
 * Idempotent: evaluating an element whose inputs did not change never moves it. */
SIM_HD static inline int cm_propagate_element(const cm_kparams *kp, int64_t i, const float *pos,
                                              const float *pos_start, const uint8_t *flags,
                                              const float *t_reach, float clock, float out_pos[3],
                                              float *out_t)
{
    if (flags[i] & CM_FLAG_GRABBED)
        return 0;
    int x, y, z;
    cm_coords(kp, i, &x, &y, &z);
    int ci = (int)(flags[i] & CM_CLASS_MASK);
    float disp[3], lo[3], hi[3], lo_lead[3], hi_lead[3];
    for (int b = 0; b < 3; b++) {
        disp[b] = fabsf(pos[i * 3 + b] - pos_start[i * 3 + b]);
        lo[b] = -CM_UNREACHED;
        hi[b] = CM_UNREACHED;
        lo_lead[b] = 0.0f;
        hi_lead[b] = 0.0f;
    }
    int waiting = 0, sponsored = 0;
    float t_first = t_reach[i];
    for (int d = 0; d < 6; d++) {
        int64_t j = cm_neighbour(kp, x, y, z, d);
        if (j < 0)
            continue;
        float tj = t_reach[j];
        if (tj >= CM_UNREACHED)
            continue;
        int pair = ci * CM_NCLASS + (int)(flags[j] & CM_CLASS_MASK);
        float due = tj + kp->link_tau[pair];
        if (due > clock) {
            waiting = 1;
            continue;
        }
        int leads = 0;
        for (int b = 0; b < 3; b++) {
            float dj = fabsf(pos[j * 3 + b] - pos_start[j * 3 + b]);
            if (dj <= disp[b])
                continue; /* j has not moved further than i along b: it follows, not leads */
            float l, h;
            cm_link_box(kp, pair, d, b, pos[j * 3 + b], &l, &h);
            if (l > lo[b]) {
                lo[b] = l;
                lo_lead[b] = dj;
            }
            if (h < hi[b]) {
                hi[b] = h;
                hi_lead[b] = dj;
            }
            leads = 1;
        }
        if (leads) {
            sponsored = 1;
            t_first = cm_minf(t_first, due);
        }
    }
    int status = waiting ? CM_PROP_WAITING : 0;
    if (!sponsored)
        return status;
    int moved = 0;
    for (int b = 0; b < 3; b++) {
        float p = pos[i * 3 + b], v;
        if (lo[b] <= hi[b])
            v = cm_minf(cm_maxf(p, lo[b]), hi[b]);
        else
            v = lo_lead[b] >= hi_lead[b] ? lo[b] : hi[b];
        out_pos[b] = v;
        if (fabsf(v - p) > CM_MOVE_EPS)
            moved = 1;
    }
    if (!moved)
        return status;
    *out_t = t_first;
    return status | CM_PROP_MOVED;
}

/* Largest amount by which the link from i to its neighbour d is outside its band. */
SIM_HD static inline float cm_link_violation(const cm_kparams *kp, int64_t i, int64_t j, int d,
                                             const float *pos, const uint8_t *flags)
{
    int pair = (int)(flags[i] & CM_CLASS_MASK) * CM_NCLASS + (int)(flags[j] & CM_CLASS_MASK);
    float worst = 0.0f;
    for (int b = 0; b < 3; b++) {
        float l, h, p = pos[i * 3 + b];
        cm_link_box(kp, pair, d, b, pos[j * 3 + b], &l, &h);
        worst = cm_maxf(worst, cm_maxf(l - p, p - h));
    }
    return worst;
}

/* One Jacobi relaxation iteration for element i: returns 1 and writes out_pos when it
 * moves. Grabbed and rigid elements stay; corrections within relax_threshold are dropped
 * so the volume can come to rest. */
SIM_HD static inline int cm_relax_element(const cm_kparams *kp, int64_t i, const float *pos,
                                          const uint8_t *flags, float out_pos[3])
{
    uint8_t f = flags[i];
    if ((f & CM_FLAG_GRABBED) || kp->inv_mass[f & CM_CLASS_MASK] <= 0.0f)
        return 0;
    int x, y, z;
    cm_coords(kp, i, &x, &y, &z);
    float acc[3] = {0.0f, 0.0f, 0.0f}, wsum = 0.0f;
    for (int d = 0; d < 6; d++) {
        int64_t j = cm_neighbour(kp, x, y, z, d);
        if (j < 0)
            continue;
        float w = kp->relax_w[flags[j] & CM_CLASS_MASK];
        float rest = (d & 1) ? 1.0f : -1.0f; /* neighbour's rest offset along its axis */
        for (int b = 0; b < 3; b++) {
            float target = pos[j * 3 + b] - (b == (d >> 1) ? rest : 0.0f);
            acc[b] += w * target;
        }
        wsum += w;
    }
    /* Elastic memory: the element's own rest position counts as home_weight more
     * neighbours of its own tissue. Without it a smooth bump is nearly harmonic (the
     * neighbour mean sits on it), feels almost no pull and stays as a plastic dent inside
     * the threshold; with it every shape, smooth or sharp, is pulled back by at least
     * home_weight / (links + home_weight) of its displacement per iteration, so the
     * tissue returns to rest and the velocity layer has a restoring force to ring against. */
    float wh = kp->home_weight * kp->relax_w[f & CM_CLASS_MASK];
    acc[0] += wh * (float)x;
    acc[1] += wh * (float)y;
    acc[2] += wh * (float)z;
    wsum += wh;
    if (wsum <= 0.0f)
        return 0;
    float delta[3], len2 = 0.0f;
    for (int b = 0; b < 3; b++) {
        delta[b] = acc[b] / wsum - pos[i * 3 + b];
        len2 += delta[b] * delta[b];
    }
    if (len2 <= kp->relax_threshold * kp->relax_threshold)
        return 0;
    /* Correct only the part beyond the threshold: the pull then grows from zero at the
     * edge of the dead band, so with the velocity layer on top the band cannot act as a
     * kick that pumps energy into a limit cycle. */
    float len = sqrtf(len2);
    float move = kp->relax_step * (len - kp->relax_threshold);
    if (move < kp->dead_zone)
        return 0; /* below what the velocity layer counts: the element is at rest */
    float gain = move / len;
    for (int b = 0; b < 3; b++)
        out_pos[b] = pos[i * 3 + b] + gain * delta[b];
    return 1;
}

/* What the velocity step of one element reports, for metrics. */
typedef struct cm_vel_out {
    float speed; /* |V| after the step */
    float disp;  /* |X - X0| after the step */
    int moved;   /* X changed in the inertial step */
} cm_vel_out;

/* The velocity layer for element i. pos holds X+ on entry and the frame-end X on exit;
 * pos_prev holds X- on entry and is set to the frame-end X (next frame's X-). */
SIM_HD static inline cm_vel_out cm_velocity_element(const cm_kparams *kp, int64_t i, float *pos,
                                                    float *pos_prev, float *vel,
                                                    const uint8_t *flags)
{
    cm_vel_out o;
    uint8_t f = flags[i];
    float s = kp->inv_mass[f & CM_CLASS_MASK];
    int x, y, z;
    cm_coords(kp, i, &x, &y, &z);
    float rest[3];
    rest[0] = (float)x;
    rest[1] = (float)y;
    rest[2] = (float)z;
    float *X = pos + i * 3, *V = vel + i * 3, *Xm = pos_prev + i * 3;
    float dx[3], dlen2 = 0.0f, disp2 = 0.0f;
    for (int b = 0; b < 3; b++) {
        dx[b] = X[b] - Xm[b];
        dlen2 += dx[b] * dx[b];
        float e = X[b] - rest[b];
        disp2 += e * e;
    }
    if (dlen2 < kp->dead_zone * kp->dead_zone)
        dx[0] = dx[1] = dx[2] = 0.0f;
    float v[3];
    if (kp->condition == 0 || s <= 0.0f || (f & CM_FLAG_GRABBED)) {
        v[0] = v[1] = v[2] = 0.0f;
    } else if (kp->condition == 1) {
        for (int b = 0; b < 3; b++)
            v[b] = kp->alpha * V[b] + s * dx[b];
    } else {
        float damp = 1.0f + kp->b0 + kp->b1[f & CM_CLASS_MASK] * sqrtf(disp2);
        for (int b = 0; b < 3; b++)
            v[b] = (V[b] + s * dx[b]) / damp;
    }
    float vlen = sqrtf(v[0] * v[0] + v[1] * v[1] + v[2] * v[2]);
    if (vlen > kp->v_max) {
        float sc = kp->v_max / vlen;
        for (int b = 0; b < 3; b++)
            v[b] *= sc;
        vlen = kp->v_max;
    }
    if (vlen < kp->dead_zone) {
        v[0] = v[1] = v[2] = 0.0f;
        vlen = 0.0f;
    }
    float hi[3];
    hi[0] = (float)(kp->nx - 1) + kp->margin;
    hi[1] = (float)(kp->ny - 1) + kp->margin;
    hi[2] = (float)(kp->nz - 1) + kp->margin;
    o.moved = 0;
    disp2 = 0.0f;
    for (int b = 0; b < 3; b++) {
        float nxp = X[b] + kp->k * v[b];
        nxp = cm_minf(cm_maxf(nxp, -kp->margin), hi[b]);
        if (nxp != X[b])
            o.moved = 1;
        X[b] = nxp;
        Xm[b] = nxp;
        V[b] = v[b];
        float e = nxp - rest[b];
        disp2 += e * e;
    }
    o.speed = vlen;
    o.disp = sqrtf(disp2);
    return o;
}

#endif
