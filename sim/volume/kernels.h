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
 *   rest position as `home_weight` extra neighbours (elastic memory, our addition),
 *   within the boxes its neighbours allow (red-black Gauss-Seidel), so relaxation keeps
 *   every link in its band; passive tissue (inverse mass 0) only follows.
 * - Velocity layer (the seed's contribution): dX = X+ - X- is this frame's ChainMail
 *   correction; it accumulates into V scaled by inverse mass, damped by condition
 *   A (none), B (alpha) or C (implicit viscoelastic, Xu et al. 2018), clamped; the next
 *   frame begins with X += k V.
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
/* A band violation up to this (lattice units) is float rounding, not a violation. */
#define CM_BAND_TOL 1e-5f
/* Largest step of rigid tissue toward home in one frame, lattice units. */
#define CM_RIGID_STEP 1.0f
/* Relaxation phases of one iteration (cm_relax_phase): the two parities of elastic
 * tissue, then the two parities of passive tissue. */
#define CM_RELAX_PHASES 4
/* Clip-only iterations after the elastic ones, while anything is out of band: they
 * restore the bands the inertial step broke without adding elastic pull (which would
 * change the dynamics the defaults are tuned for). */
#define CM_REPAIR_ITERATIONS 4
/* Relaxation weight cap: a tolerance below this counts as this (rigid neighbours); a
 * tissue whose tolerance is below it is rigid. */
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
    float home_weight;    /* pull toward the rest position, in neighbours of the own tissue */
    int rigid[CM_NCLASS]; /* 1: no tolerance (bone): moves only as a whole (see relaxation) */
    int rigid_free;       /* 1 when nothing is grabbed: displaced rigid tissue goes home */
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

/* The same as cm_neighbour for element i at (x,y,z), without rebuilding the index. */
SIM_HD static inline int64_t cm_neighbour_of(const cm_kparams *kp, int64_t i, int x, int y, int z,
                                             int d)
{
    switch (d) {
    case 0:
        return x > 0 ? i - 1 : -1;
    case 1:
        return x + 1 < kp->nx ? i + 1 : -1;
    case 2:
        return y > 0 ? i - kp->nx : -1;
    case 3:
        return y + 1 < kp->ny ? i + kp->nx : -1;
    case 4:
        return z > 0 ? i - (int64_t)kp->nx * kp->ny : -1;
    default:
        return z + 1 < kp->nz ? i + (int64_t)kp->nx * kp->ny : -1;
    }
}

SIM_HD static inline void cm_coords(const cm_kparams *kp, int64_t i, int *x, int *y, int *z)
{
    int64_t plane = (int64_t)kp->nx * kp->ny;
    if (i >= 0 && i <= 0xffffffffLL && plane <= 0xffffffffLL) {
        /* Every lattice this product builds: 32-bit division, several times cheaper. */
        uint32_t u = (uint32_t)i, p = (uint32_t)plane, nx = (uint32_t)kp->nx;
        uint32_t zz = u / p, r = u - zz * p, yy = r / nx;
        *z = (int)zz;
        *y = (int)yy;
        *x = (int)(r - yy * nx);
        return;
    }
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

/* Clip v into [lo, hi] (band first, so a band never yields to anything else). Values
 * within CM_BAND_TOL outside are left: a clip that only chases float rounding between two
 * neighbours would keep the volume from ever settling. An empty interval (neighbours
 * that disagree, only after a violation already exists) takes its midpoint, which halves
 * the worse of the two violations. */
SIM_HD static inline float cm_clip_band(float v, float lo, float hi)
{
    if (lo > hi)
        return 0.5f * (lo + hi);
    if (v < lo - CM_BAND_TOL)
        return lo;
    if (v > hi + CM_BAND_TOL)
        return hi;
    return v;
}

/* Relaxation treats three kinds of tissue differently. */
SIM_HD static inline int cm_passive(const cm_kparams *kp, int c)
{
    return !kp->rigid[c] && kp->inv_mass[c] <= 0.0f; /* air: carries no load, only follows */
}

/* The relaxation phase of element i: parity for elastic tissue, 2 + parity for passive
 * tissue (parity = (x+y+z) & 1), -1 for rigid tissue, which does not relax (it moves only
 * through propagation: see cm_rigid_return_element). One iteration runs the phases in
 * order, each in place. A lattice neighbour has the other parity, so no element reads
 * another of its own phase: every phase is race-free and independent of visit order.
 * Passive tissue comes last so that it follows this iteration's motion. */
SIM_HD static inline int cm_relax_phase_of(const cm_kparams *kp, int c, int x, int y, int z)
{
    if (kp->rigid[c])
        return -1;
    return (cm_passive(kp, c) ? 2 : 0) + ((x + y + z) & 1);
}

SIM_HD static inline int cm_relax_phase(const cm_kparams *kp, int64_t i, const uint8_t *flags)
{
    int x, y, z;
    cm_coords(kp, i, &x, &y, &z);
    return cm_relax_phase_of(kp, (int)(flags[i] & CM_CLASS_MASK), x, y, z);
}

/* Rigid tissue (bone) going home, once a frame while nothing is grabbed
 * (kp->rigid_free). Bone has no slack, so relaxation could not move it without breaking
 * its links; instead it steps toward home and the frame's propagation wave, seeded from
 * the elements that stepped, carries the tissue around it along, as a grab would. The
 * step depends on the element's own displacement alone: a piece the wave once moved as a
 * whole (every link exact, every element displaced alike) steps home as a whole, with
 * its links exact. Returns 1 and writes out_pos when i steps. */
SIM_HD static inline int cm_rigid_return_element(const cm_kparams *kp, int64_t i, const float *pos,
                                                 const uint8_t *flags, float out_pos[3])
{
    uint8_t f = flags[i];
    if (!kp->rigid_free || !kp->rigid[f & CM_CLASS_MASK] || (f & CM_FLAG_GRABBED))
        return 0;
    int x, y, z;
    cm_coords(kp, i, &x, &y, &z);
    float delta[3];
    delta[0] = (float)x - pos[i * 3 + 0];
    delta[1] = (float)y - pos[i * 3 + 1];
    delta[2] = (float)z - pos[i * 3 + 2];
    float len = sqrtf(delta[0] * delta[0] + delta[1] * delta[1] + delta[2] * delta[2]);
    if (len <= kp->relax_threshold)
        return 0;
    float move = cm_minf(kp->relax_step * (len - kp->relax_threshold), CM_RIGID_STEP);
    if (move < kp->dead_zone)
        return 0;
    for (int b = 0; b < 3; b++)
        out_pos[b] = pos[i * 3 + b] + move / len * delta[b];
    return 1;
}

/* One relaxation update of element i in its phase (cm_relax_phase), in place: every
 * neighbour it reads is fixed while it moves. Returns 1 and writes out_pos when i moves.
 * pull 0: the clip of step 2 alone (the repair iterations that follow the elastic ones).
 *
 * 1. Elastic pull: toward the mean of the neighbours' positions minus rest offsets, each
 *    neighbour weighted by its tissue's relax_w, plus the own rest position as
 *    home_weight extra neighbours (passive tissue: toward its rest position alone);
 *    corrections within relax_threshold are dropped so the volume can come to rest.
 * 2. ChainMail's invariant (Gibson 1997): the result is clipped into the intersection of
 *    the boxes its neighbours allow (and the lattice box, which yields to the bands).
 *    Elastic tissue ignores passive neighbours here, as it ignores them in the pull: air
 *    carries no load and must not hold the skin out. Passive tissue is clipped against
 *    every neighbour, in the phases after the elastic ones, so it follows.
 * Since the neighbours of i stayed in band with i's old position, that intersection
 * holds the old position and is never empty when the state was in band: after the
 * phases of an iteration every link is in band again, whatever the pull did. */
SIM_HD static inline int cm_relax_element_at(const cm_kparams *kp, int64_t i, int x, int y, int z,
                                             const float *pos, const uint8_t *flags, int pull,
                                             float out_pos[3])
{
    uint8_t f = flags[i];
    if ((f & CM_FLAG_GRABBED) || kp->rigid[f & CM_CLASS_MASK])
        return 0;
    if (!(isfinite(pos[i * 3 + 0]) && isfinite(pos[i * 3 + 1]) && isfinite(pos[i * 3 + 2])))
        return 0; /* a blow-up: left for the state's guard to see, never clipped to a number */
    /* Most elements an active block holds are at rest among neighbours at rest: their
     * pull is zero and their bands hold, so they stay. Seven compares save the boxes. */
    int at_rest =
        pos[i * 3 + 0] == (float)x && pos[i * 3 + 1] == (float)y && pos[i * 3 + 2] == (float)z;
    for (int d = 0; d < 6 && at_rest; d++) {
        int64_t j = cm_neighbour_of(kp, i, x, y, z, d);
        if (j < 0)
            continue;
        int a = d >> 1;
        float o = (d & 1) ? 1.0f : -1.0f;
        at_rest = pos[j * 3 + 0] == (float)x + (a == 0 ? o : 0.0f) &&
                  pos[j * 3 + 1] == (float)y + (a == 1 ? o : 0.0f) &&
                  pos[j * 3 + 2] == (float)z + (a == 2 ? o : 0.0f);
    }
    if (at_rest)
        return 0;
    int ci = (int)(f & CM_CLASS_MASK), passive = cm_passive(kp, ci);
    float acc[3] = {0.0f, 0.0f, 0.0f}, wsum = 0.0f, lo[3], hi[3];
    lo[0] = lo[1] = lo[2] = -CM_UNREACHED;
    hi[0] = hi[1] = hi[2] = CM_UNREACHED;
    for (int d = 0; d < 6; d++) {
        int64_t j = cm_neighbour_of(kp, i, x, y, z, d);
        if (j < 0)
            continue;
        int cj = (int)(flags[j] & CM_CLASS_MASK);
        float w = kp->relax_w[cj];
        float rest = (d & 1) ? 1.0f : -1.0f; /* neighbour's rest offset along its axis */
        int bound = passive || !cm_passive(kp, cj);
        for (int b = 0; b < 3; b++) {
            float pj = pos[j * 3 + b], l, h;
            acc[b] += w * (pj - (b == (d >> 1) ? rest : 0.0f));
            if (bound) {
                cm_link_box(kp, ci * CM_NCLASS + cj, d, b, pj, &l, &h);
                lo[b] = cm_maxf(lo[b], l);
                hi[b] = cm_minf(hi[b], h);
            }
        }
        wsum += w;
    }
    float p[3];
    p[0] = pos[i * 3 + 0];
    p[1] = pos[i * 3 + 1];
    p[2] = pos[i * 3 + 2];
    /* Elastic memory: the element's own rest position counts as home_weight more
     * neighbours of its own tissue. Without it a smooth bump is nearly harmonic (the
     * neighbour mean sits on it), feels almost no pull and stays as a plastic dent inside
     * the threshold; with it every shape is pulled back by at least
     * home_weight / (links + home_weight) of its displacement per iteration, so the
     * tissue returns to rest and the velocity layer has a restoring force to ring
     * against. Passive tissue has home alone: it pulls on no one, but finds its way back,
     * so the surfaces bound to cells it shares with the skin come back too. */
    float wh = kp->home_weight * kp->relax_w[ci];
    if (passive) {
        acc[0] = acc[1] = acc[2] = 0.0f;
        wsum = 0.0f;
        wh = 1.0f;
    }
    acc[0] += wh * (float)x;
    acc[1] += wh * (float)y;
    acc[2] += wh * (float)z;
    wsum += wh;
    float delta[3], len2 = 0.0f;
    for (int b = 0; b < 3; b++) {
        delta[b] = wsum > 0.0f ? acc[b] / wsum - p[b] : 0.0f;
        len2 += delta[b] * delta[b];
    }
    if (pull && len2 > kp->relax_threshold * kp->relax_threshold) {
        /* Correct only the part beyond the threshold: the pull then grows from zero at
         * the edge of the dead band, so with the velocity layer on top the band cannot
         * act as a kick that pumps energy into a limit cycle. A pull below what the
         * velocity layer counts is no pull: the element is at rest. */
        float len = sqrtf(len2);
        float move = kp->relax_step * (len - kp->relax_threshold);
        if (move >= kp->dead_zone)
            for (int b = 0; b < 3; b++)
                p[b] += move / len * delta[b];
    }
    float box_hi[3];
    box_hi[0] = (float)(kp->nx - 1) + kp->margin;
    box_hi[1] = (float)(kp->ny - 1) + kp->margin;
    box_hi[2] = (float)(kp->nz - 1) + kp->margin;
    int moved = 0;
    for (int b = 0; b < 3; b++) {
        float v = cm_minf(cm_maxf(p[b], -kp->margin), box_hi[b]);
        v = cm_clip_band(v, lo[b], hi[b]);
        out_pos[b] = v;
        if (v != pos[i * 3 + b])
            moved = 1;
    }
    return moved;
}

/* cm_relax_element_at for element i, its coordinates found from its index. */
SIM_HD static inline int cm_relax_element(const cm_kparams *kp, int64_t i, const float *pos,
                                          const uint8_t *flags, int pull, float out_pos[3])
{
    int x, y, z;
    cm_coords(kp, i, &x, &y, &z);
    return cm_relax_element_at(kp, i, x, y, z, pos, flags, pull, out_pos);
}

/* The inertial step of element i, first in a frame: X += k V, clamped to the lattice box
 * grown by the margin; X- moves with it, so the correction measured at the end of the
 * frame is ChainMail's alone. It comes first so that a frame ends on positions that
 * ChainMail has seen (in band); the sequence of operations is the source's, with the
 * frame boundary moved by one step. Returns 1 when X changed. */
SIM_HD static inline int cm_inertia_element(const cm_kparams *kp, int64_t i, float *pos,
                                            float *pos_prev, const float *vel, const uint8_t *flags)
{
    if (flags[i] & CM_FLAG_GRABBED)
        return 0; /* held by the hand: its velocity is zeroed at the end of this frame */
    const float *V = vel + i * 3;
    if (V[0] == 0.0f && V[1] == 0.0f && V[2] == 0.0f)
        return 0;
    float hi[3];
    hi[0] = (float)(kp->nx - 1) + kp->margin;
    hi[1] = (float)(kp->ny - 1) + kp->margin;
    hi[2] = (float)(kp->nz - 1) + kp->margin;
    int moved = 0;
    for (int b = 0; b < 3; b++) {
        float x = pos[i * 3 + b];
        float nx = cm_minf(cm_maxf(x + kp->k * V[b], -kp->margin), hi[b]);
        if (nx != x) {
            pos_prev[i * 3 + b] += nx - x;
            pos[i * 3 + b] = nx;
            moved = 1;
        }
    }
    return moved;
}

/* What the velocity step of one element reports, for metrics. */
typedef struct cm_vel_out {
    float speed; /* |V| after the step */
    float disp;  /* |X - X0| */
} cm_vel_out;

/* The velocity layer for element i, last in a frame: dX = X+ - X- (this frame's
 * ChainMail correction) accumulates into V by condition A, B or C, clamped; X- is set to
 * X for the next frame. X itself does not move here (cm_inertia_element moves it). */
SIM_HD static inline cm_vel_out cm_velocity_element_at(const cm_kparams *kp, int64_t i, int x,
                                                       int y, int z, const float *pos,
                                                       float *pos_prev, float *vel,
                                                       const uint8_t *flags)
{
    cm_vel_out o;
    uint8_t f = flags[i];
    float s = kp->inv_mass[f & CM_CLASS_MASK];
    float rest[3];
    rest[0] = (float)x;
    rest[1] = (float)y;
    rest[2] = (float)z;
    const float *X = pos + i * 3;
    float *V = vel + i * 3, *Xm = pos_prev + i * 3;
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
    /* Still (no correction, no velocity: most of a touched block): every condition gives
     * V = +0 (a -0 too: it has no length, below), so the divisions and the square root are
     * skipped, with the same bits. That needs a finite displacement (an infinite one makes
     * damp NaN under C, and V NaN). */
    int still = dx[0] == 0.0f && dx[1] == 0.0f && dx[2] == 0.0f && V[0] == 0.0f && V[1] == 0.0f &&
                V[2] == 0.0f && disp2 < CM_UNREACHED;
    if (still || kp->condition == 0 || s <= 0.0f || (f & CM_FLAG_GRABBED)) {
        v[0] = v[1] = v[2] = 0.0f;
    } else if (kp->condition == 1) {
        for (int b = 0; b < 3; b++)
            v[b] = kp->alpha * V[b] + s * dx[b];
    } else {
        float damp = 1.0f + kp->b0 + kp->b1[f & CM_CLASS_MASK] * sqrtf(disp2);
        for (int b = 0; b < 3; b++)
            v[b] = (V[b] + s * dx[b]) / damp;
    }
    float vlen = still ? 0.0f : sqrtf(v[0] * v[0] + v[1] * v[1] + v[2] * v[2]);
    if (vlen > kp->v_max) {
        float sc = kp->v_max / vlen;
        for (int b = 0; b < 3; b++)
            v[b] *= sc;
        vlen = kp->v_max;
    }
    /* Below the dead zone, or too small for its length to be a float (the squares underflow,
     * or -0): no velocity, +0 in every bit, so that a velocity is non-zero exactly when the
     * speed is (the CPU backend's rows and blocks with motion rest on that). */
    if (vlen < kp->dead_zone || vlen == 0.0f) {
        v[0] = v[1] = v[2] = 0.0f;
        vlen = 0.0f;
    }
    for (int b = 0; b < 3; b++) {
        Xm[b] = X[b];
        V[b] = v[b];
    }
    o.speed = vlen;
    o.disp = disp2 > 0.0f ? sqrtf(disp2) : disp2; /* at home: no square root */
    return o;
}

/* cm_velocity_element_at for element i, its coordinates found from its index. */
SIM_HD static inline cm_vel_out cm_velocity_element(const cm_kparams *kp, int64_t i,
                                                    const float *pos, float *pos_prev, float *vel,
                                                    const uint8_t *flags)
{
    int x, y, z;
    cm_coords(kp, i, &x, &y, &z);
    return cm_velocity_element_at(kp, i, x, y, z, pos, pos_prev, vel, flags);
}

#endif
