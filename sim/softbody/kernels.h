/* kernels.h: per-particle and per-constraint math of the softbody scene, written once and
 * compiled by the CPU backend (C11) and the CUDA backend (C++17). Keep to their common
 * subset: no VLAs, no designated initialisers, float math functions only.
 *
 * Surface model: position-based dynamics (Mueller et al. 2007) with distance constraints on
 * the mesh edges and shape matching (Mueller et al. 2005, "Meshless deformations based on
 * shape matching"); the rotation of shape matching by the robust extraction of Mueller,
 * Bender, Chentanez, Macklin 2016 ("A Robust Method to Extract the Rotational Part of
 * Deformations"), warm-started from the last substep's quaternion.
 * Hybrid model: XPBD (Macklin, Mueller, Chentanez 2016) edge and tet volume constraints
 * (Ten Minute Physics 10), virtual springs from each vertex of a boundary tet to its
 * centre (SOFTBODY.md, claims 2-4).
 * Both: collisions with planes as position corrections with Coulomb friction (Macklin et
 * al. 2014, "Unified particle physics", section 6.1).
 * Inverse mass w = 0 marks a particle pinned to the parent: the solvers leave it alone. */
#ifndef SIM_SOFTBODY_KERNELS_H
#define SIM_SOFTBODY_KERNELS_H

#include <math.h>
#include <stdint.h>

#include "../core/sc_base.h"

/* Rotation extraction iterations a substep, at most; it stops once its step is below 1e-7
 * rad. Each iteration removes the error about axis i but for a fraction s_i / tr S (S = the
 * rest shape's second moment, A = R S at rest): 0.63 for the long axis of the default organ,
 * so 10 iterations left 1% of each substep's turn behind, enough for a turning tray to
 * drag the body round at mm/s; 30 leave 1e-6. */
#define SB_ROT_ITERS 30

/* A contact plane in the world: a particle is outside when n . x >= d (n unit). */
typedef struct sb_plane {
    float n[3];
    float d;
} sb_plane;

SIM_HD static inline float sb_dot3(const float a[3], const float b[3])
{
    return a[0] * b[0] + a[1] * b[1] + a[2] * b[2];
}

SIM_HD static inline void sb_cross3(const float a[3], const float b[3], float out[3])
{
    out[0] = a[1] * b[2] - a[2] * b[1];
    out[1] = a[2] * b[0] - a[0] * b[2];
    out[2] = a[0] * b[1] - a[1] * b[0];
}

/* x = R x + t, v = R v (R row-major 3x3): the parent's motion carries a particle rigidly,
 * keeping its velocity relative to the parent. */
SIM_HD static inline void sb_carry(int i, float *x, float *v, const float R[9], const float t[3])
{
    float p[3] = {x[i * 3], x[i * 3 + 1], x[i * 3 + 2]};
    float u[3] = {v[i * 3], v[i * 3 + 1], v[i * 3 + 2]};
    for (int r = 0; r < 3; r++) {
        x[i * 3 + r] = R[r * 3] * p[0] + R[r * 3 + 1] * p[1] + R[r * 3 + 2] * p[2] + t[r];
        v[i * 3 + r] = R[r * 3] * u[0] + R[r * 3 + 1] * u[1] + R[r * 3 + 2] * u[2];
    }
}

/* Predict (the source's Verlet written with an explicit velocity): keep the start of the
 * substep, then move by the velocity after external acceleration. */
SIM_HD static inline void sb_predict(int i, float *x, float *v, float *xp, const float *w,
                                     const float acc[3], float h)
{
    for (int b = 0; b < 3; b++)
        xp[i * 3 + b] = x[i * 3 + b];
    if (w[i] <= 0.0f)
        return;
    for (int b = 0; b < 3; b++) {
        v[i * 3 + b] += acc[b] * h;
        x[i * 3 + b] += v[i * 3 + b] * h;
    }
}

/* PBD distance constraint between a and b (Mueller et al. 2007, eq. 10-11): moves the ends
 * by k of the way to the rest length, shared by inverse mass: ka = k w_a / (w_a + w_b) and
 * kb = k w_b / (w_a + w_b) (sb_edge_shares; 0 where both ends are pinned), so a projection
 * reads two numbers in sequence instead of two masses at random. k is the per-iteration
 * stiffness 1 - (1 - k_user)^(1/iterations), so that the iterations of a substep together
 * remove the fraction k_user of the error whatever their count. */
SIM_HD static inline void sb_distance(int a, int b, float rest, float ka, float kb, float *x)
{
    float *pa = &x[a * 3], *pb = &x[b * 3];
    float d0 = pa[0] - pb[0], d1 = pa[1] - pb[1], d2 = pa[2] - pb[2];
    float len2 = d0 * d0 + d1 * d1 + d2 * d2;
    if (len2 < 1e-24f)
        return;
    float len = sqrtf(len2);
    float f = (len - rest) / len, sa = ka * f, sb = kb * f;
    pa[0] -= sa * d0;
    pa[1] -= sa * d1;
    pa[2] -= sa * d2;
    pb[0] += sb * d0;
    pb[1] += sb * d1;
    pb[2] += sb * d2;
}

/* The shares of a distance constraint's correction at each end (sb_distance). */
SIM_HD static inline void sb_edge_shares(float k, float wa, float wb, float *ka, float *kb)
{
    float ws = wa + wb;
    *ka = ws > 0.0f ? k * wa / ws : 0.0f;
    *kb = ws > 0.0f ? k * wb / ws : 0.0f;
}

/* Signed volume of tet (a, b, c, d) at positions x: positive when d lies on the side of
 * (b - a) x (c - a). */
SIM_HD static inline float sb_tet_volume(const int32_t *t4, const float *x)
{
    const float *p0 = &x[t4[0] * 3];
    float e1[3], e2[3], e3[3], c[3];
    for (int k = 0; k < 3; k++) {
        e1[k] = x[t4[1] * 3 + k] - p0[k];
        e2[k] = x[t4[2] * 3 + k] - p0[k];
        e3[k] = x[t4[3] * 3 + k] - p0[k];
    }
    sb_cross3(e1, e2, c);
    return sb_dot3(c, e3) / 6.0f;
}

/* The hybrid model's per-tet math, one tet per call (float lanes). */
#define SBT              float
#define SBM              int
#define SBT_FN(name)     name
#define SBT_SQRT(x)      sqrtf(x)
#define SBT_SEL(m, a, b) ((m) ? (a) : (b))
#define SBT_ANY(m)       (m)
#define SBT_INLINE       static inline
#include "kernels_tet.h"
#undef SBT
#undef SBM
#undef SBT_FN
#undef SBT_SQRT
#undef SBT_SEL
#undef SBT_ANY
#undef SBT_INLINE

/* The tet volume's gradients from the tet's indices into x (the tests check them against
 * finite differences). Returns the signed volume. */
SIM_HD static inline float sb_tet_grads(const int32_t *t4, const float *x, float g[4][3])
{
    float p[4][3];
    for (int j = 0; j < 4; j++)
        for (int k = 0; k < 3; k++)
            p[j][k] = x[t4[j] * 3 + k];
    return sb_tet_grads_p(p, g);
}

/* An XPBD edge's coefficients from its ends' inverse masses and its compliance over h^2:
 * c4 = {w_a, w_b, alpha_t, 1 / (w_a + w_b + alpha_t)}, the last 0 where both ends are pinned. */
SIM_HD static inline void sb_xpbd_coefs(float wa, float wb, float alpha_t, float c4[4])
{
    c4[0] = wa;
    c4[1] = wb;
    c4[2] = alpha_t;
    c4[3] = wa + wb > 0.0f ? 1.0f / (wa + wb + alpha_t) : 0.0f;
}

/* XPBD distance constraint C = |xa - xb| - rest (Macklin et al. 2016), its coefficients c4
 * (sb_xpbd_coefs: read in sequence, one multiplication where a division was), *lambda this
 * substep's multiplier (0 at its start). */
SIM_HD static inline void sb_xpbd_distance(int a, int b, float rest, const float *c4, float *x,
                                           float *lambda)
{
    float *pa = &x[a * 3], *pb = &x[b * 3];
    float d0 = pa[0] - pb[0], d1 = pa[1] - pb[1], d2 = pa[2] - pb[2];
    float len2 = d0 * d0 + d1 * d1 + d2 * d2;
    if (len2 < 1e-24f)
        return;
    float len = sqrtf(len2);
    float dl = (-(len - rest) - c4[2] * *lambda) * c4[3];
    *lambda += dl;
    float s = dl / len, sa = c4[0] * s, sb = c4[1] * s;
    pa[0] += sa * d0;
    pa[1] += sa * d1;
    pa[2] += sa * d2;
    pb[0] -= sb * d0;
    pb[1] -= sb * d1;
    pb[2] -= sb * d2;
}

/* The tet t4's four vertices from x, and their inverse masses. */
SIM_HD static inline void sb_tet_load(const int32_t *t4, const float *x, const float *w,
                                      float p[4][3], float wv[4])
{
    for (int j = 0; j < 4; j++) {
        p[j][0] = x[t4[j] * 3];
        p[j][1] = x[t4[j] * 3 + 1];
        p[j][2] = x[t4[j] * 3 + 2];
        wv[j] = w[t4[j]];
    }
}

SIM_HD static inline void sb_tet_store(const int32_t *t4, float p[4][3], float *x)
{
    for (int j = 0; j < 4; j++) {
        x[t4[j] * 3] = p[j][0];
        x[t4[j] * 3 + 1] = p[j][1];
        x[t4[j] * 3 + 2] = p[j][2];
    }
}

/* XPBD volume constraint C = V - V0 of one tet (alpha_t = alpha / h^2). */
SIM_HD static inline void sb_xpbd_volume(const int32_t *t4, float rest_vol, float alpha_t, float *x,
                                         const float *w, float *lambda)
{
    float p[4][3], wv[4];
    sb_tet_load(t4, x, w, p, wv);
    sb_xpbd_volume_p(p, wv, rest_vol, alpha_t, lambda, 1);
    sb_tet_store(t4, p, x);
}

/* The four virtual springs of a boundary tet (sb_spring), compliance alpha4[i] (alpha_t =
 * alpha4[i] inv_h2). */
SIM_HD static inline void sb_tet_springs(const int32_t *t4, const float *rest4, const float *alpha4,
                                         float inv_h2, float *x, const float *w, float *lambda4)
{
    float p[4][3], wv[4], at[4];
    sb_tet_load(t4, x, w, p, wv);
    for (int k = 0; k < 4; k++)
        at[k] = alpha4[k] * inv_h2;
    sb_tet_springs_p(p, wv, rest4, at, lambda4, 1);
    sb_tet_store(t4, p, x);
}

/* ---------------------------------------------------------------- shape matching */

/* Sum of x over particles [i0, i1), in index order (a fixed order: the same sums on every
 * thread count and backend). */
SIM_HD static inline void sb_sum_x(int i0, int i1, const float *x, float out[3])
{
    float s0 = 0.0f, s1 = 0.0f, s2 = 0.0f;
    for (int i = i0; i < i1; i++) {
        s0 += x[i * 3];
        s1 += x[i * 3 + 1];
        s2 += x[i * 3 + 2];
    }
    out[0] = s0;
    out[1] = s1;
    out[2] = s2;
}

/* A_pq = sum (x_i - c) q_i^T over [i0, i1) (row-major), q the rest offsets from the rest
 * centre. Equal masses (the surface model's) cancel out of the rotation. */
SIM_HD static inline void sb_sum_apq(int i0, int i1, const float *x, const float c[3],
                                     const float *q, float out[9])
{
    float a[9] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
    for (int i = i0; i < i1; i++) {
        float p[3] = {x[i * 3] - c[0], x[i * 3 + 1] - c[1], x[i * 3 + 2] - c[2]};
        for (int r = 0; r < 3; r++)
            for (int k = 0; k < 3; k++)
                a[r * 3 + k] += p[r] * q[i * 3 + k];
    }
    for (int k = 0; k < 9; k++)
        out[k] = a[k];
}

/* Unit quaternion (w, x, y, z) to a row-major rotation matrix. */
SIM_HD static inline void sb_quat_to_mat(const float q[4], float R[9])
{
    float w = q[0], x = q[1], y = q[2], z = q[3];
    R[0] = 1.0f - 2.0f * (y * y + z * z);
    R[1] = 2.0f * (x * y - w * z);
    R[2] = 2.0f * (x * z + w * y);
    R[3] = 2.0f * (x * y + w * z);
    R[4] = 1.0f - 2.0f * (x * x + z * z);
    R[5] = 2.0f * (y * z - w * x);
    R[6] = 2.0f * (x * z - w * y);
    R[7] = 2.0f * (y * z + w * x);
    R[8] = 1.0f - 2.0f * (x * x + y * y);
}

/* out = a b (quaternions, w first). */
SIM_HD static inline void sb_quat_mul(const float a[4], const float b[4], float out[4])
{
    out[0] = a[0] * b[0] - a[1] * b[1] - a[2] * b[2] - a[3] * b[3];
    out[1] = a[0] * b[1] + a[1] * b[0] + a[2] * b[3] - a[3] * b[2];
    out[2] = a[0] * b[2] - a[1] * b[3] + a[2] * b[0] + a[3] * b[1];
    out[3] = a[0] * b[3] + a[1] * b[2] - a[2] * b[1] + a[3] * b[0];
}

/* out = a conj(b): for unit b, a b^-1. */
SIM_HD static inline void sb_quat_mul_conj(const float a[4], const float b[4], float out[4])
{
    float c[4] = {b[0], -b[1], -b[2], -b[3]};
    sb_quat_mul(a, c, out);
}

/* The rotational part of A (row-major), Mueller et al. 2016, Algorithm 1: starting from q
 * (the last result: warm start), rotate q by omega = sum_k r_k x a_k / (|sum_k r_k . a_k| +
 * eps) over the columns r_k of R(q) and a_k of A until omega is tiny. Always returns a unit
 * quaternion, also for a flat or inverted A, where a polar decomposition by SVD flips or
 * fails. */
SIM_HD static inline void sb_extract_rotation(const float A[9], float q[4], int max_iter)
{
    for (int it = 0; it < max_iter; it++) {
        float R[9], om[3] = {0.0f, 0.0f, 0.0f}, dots = 0.0f;
        sb_quat_to_mat(q, R);
        for (int k = 0; k < 3; k++) {
            float r[3] = {R[k], R[3 + k], R[6 + k]}, a[3] = {A[k], A[3 + k], A[6 + k]}, c[3];
            sb_cross3(r, a, c);
            om[0] += c[0];
            om[1] += c[1];
            om[2] += c[2];
            dots += sb_dot3(r, a);
        }
        float inv = 1.0f / (fabsf(dots) + 1e-9f);
        for (int k = 0; k < 3; k++)
            om[k] *= inv;
        float ang = sqrtf(sb_dot3(om, om));
        if (ang < 1e-7f)
            break;
        float s = sinf(0.5f * ang) / ang,
              dq[4] = {cosf(0.5f * ang), om[0] * s, om[1] * s, om[2] * s};
        float n[4];
        sb_quat_mul(dq, q, n);
        float len = sqrtf(n[0] * n[0] + n[1] * n[1] + n[2] * n[2] + n[3] * n[3]);
        for (int k = 0; k < 4; k++)
            q[k] = n[k] / len;
    }
}

/* The centre from the chunks' sums, added in chunk order (the same on every backend). */
SIM_HD static inline void sb_reduce_centre(int nchunk, const float *psum, int n, float c[3])
{
    float s[3] = {0.0f, 0.0f, 0.0f};
    for (int k = 0; k < nchunk; k++)
        for (int b = 0; b < 3; b++)
            s[b] += psum[k * 3 + b];
    for (int b = 0; b < 3; b++)
        c[b] = s[b] / (float)n;
}

/* A_pq from the chunks' sums in chunk order, its rotation (warm-started from quat, which
 * keeps the result for the next substep) as a matrix. */
SIM_HD static inline void sb_reduce_rotation(int nchunk, const float *papq, float quat[4],
                                             float R[9])
{
    float a[9] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
    for (int k = 0; k < nchunk; k++)
        for (int j = 0; j < 9; j++)
            a[j] += papq[k * 9 + j];
    sb_extract_rotation(a, quat, SB_ROT_ITERS);
    sb_quat_to_mat(quat, R);
}

/* Shape matching's goal for particle i: g = c + R q_i; x += (g - x) k. */
SIM_HD static inline void sb_shape_goal(int i, float *x, const float *w, const float c[3],
                                        const float R[9], const float *q, float k)
{
    if (w[i] <= 0.0f)
        return;
    const float *qi = &q[i * 3];
    for (int r = 0; r < 3; r++) {
        float g = c[r] + R[r * 3] * qi[0] + R[r * 3 + 1] * qi[1] + R[r * 3 + 2] * qi[2];
        x[i * 3 + r] += (g - x[i * 3 + r]) * k;
    }
}

/* ---------------------------------------------------------------- closed-mesh volume */

/* x[i] - o. */
SIM_HD static inline void sb_rel(const float *x, int i, const float o[3], float out[3])
{
    out[0] = x[i * 3] - o[0];
    out[1] = x[i * 3 + 1] - o[1];
    out[2] = x[i * 3 + 2] - o[2];
}

/* Six times the volume enclosed by triangles [t0, t1) (divergence theorem), in order, about
 * a point o on the body: about the world's origin a body 0.3 m away sums terms 200 times its
 * volume, and float rounding read as a 0.1% volume error drove it at mm/s. */
SIM_HD static inline float sb_sum_volume6(int t0, int t1, const uint32_t *tri, const float *x,
                                          const float o[3])
{
    float s = 0.0f;
    for (int t = t0; t < t1; t++) {
        float a[3], b[3], c[3], bc[3];
        sb_rel(x, (int)tri[t * 3], o, a);
        sb_rel(x, (int)tri[t * 3 + 1], o, b);
        sb_rel(x, (int)tri[t * 3 + 2], o, c);
        sb_cross3(b, c, bc);
        s += sb_dot3(a, bc);
    }
    return s;
}

/* Gradient of six times the volume at vertex i: the sum of x_j x x_k (about o) over its triangles
 * (i, j, k), listed as (j, k) pairs in vt_jk[vt_start[i] .. vt_start[i + 1]). */
SIM_HD static inline void sb_volume_grad(int i, const int32_t *vt_start, const int32_t *vt_jk,
                                         const float *x, const float o[3], float *g)
{
    float s[3] = {0.0f, 0.0f, 0.0f};
    for (int k = vt_start[i]; k < vt_start[i + 1]; k++) {
        float a[3], b[3], c[3];
        sb_rel(x, vt_jk[k * 2], o, a);
        sb_rel(x, vt_jk[k * 2 + 1], o, b);
        sb_cross3(a, b, c);
        s[0] += c[0];
        s[1] += c[1];
        s[2] += c[2];
    }
    g[i * 3] = s[0];
    g[i * 3 + 1] = s[1];
    g[i * 3 + 2] = s[2];
}

/* Over [i0, i1), in order: sum (x_i - o) . g_i, which is three times the volume sum (6 V is
 * homogeneous of degree 3 about o: Euler), and sum w_i |g_i|^2: one pass over the vertices
 * gives the constraint and its denominator. */
SIM_HD static inline void sb_sum_volume_wg2(int i0, int i1, const float *x, const float o[3],
                                            const float *w, const float *g, float out[2])
{
    float xg = 0.0f, wg = 0.0f;
    for (int i = i0; i < i1; i++) {
        float p[3];
        sb_rel(x, i, o, p);
        xg += sb_dot3(p, &g[i * 3]);
        wg += w[i] * sb_dot3(&g[i * 3], &g[i * 3]);
    }
    out[0] = xg;
    out[1] = wg;
}

/* The projection's scale from the chunks' pairs (in order): the volume constraint
 * C = V6 - V6_0 moves each vertex by s w_i g_i, s = -k C / sum w |g|^2. */
SIM_HD static inline float sb_volume_scale(int nch, const float *part, float rest6, float k)
{
    float xg = 0.0f, den = 0.0f;
    for (int c = 0; c < nch; c++) {
        xg += part[c * 2];
        den += part[c * 2 + 1];
    }
    return den > 0.0f ? -k * (xg / 3.0f - rest6) / den : 0.0f;
}

SIM_HD static inline void sb_volume_apply(int i, float *x, const float *w, const float *g, float s)
{
    for (int b = 0; b < 3; b++)
        x[i * 3 + b] += s * w[i] * g[i * 3 + b];
}

/* ---------------------------------------------------------------- hand, planes, velocity */

/* A held particle moves k of the way to the hand plus its offset at the grab. */
SIM_HD static inline void sb_grab(int j, const int32_t *idx, const float *off, const float hand[3],
                                  float k, float *x, const float *w)
{
    int i = idx[j];
    if (w[i] <= 0.0f)
        return;
    for (int b = 0; b < 3; b++)
        x[i * 3 + b] += (hand[b] + off[j * 3 + b] - x[i * 3 + b]) * k;
}

/* Push particle i out of every plane it is behind, then Coulomb friction on its move this
 * substep along the plane (from xp): a slide shorter than mu times the depth is undone
 * (static), a longer one is shortened by that much (kinetic). Returns the deepest it was. */
SIM_HD static inline float sb_collide(int i, float *x, const float *xp, const float *w,
                                      const sb_plane *pl, int npl, float mu)
{
    if (w[i] <= 0.0f)
        return 0.0f;
    float *p = &x[i * 3], deepest = 0.0f;
    for (int k = 0; k < npl; k++) {
        float depth = pl[k].d - sb_dot3(pl[k].n, p);
        if (depth <= 0.0f)
            continue;
        deepest = depth > deepest ? depth : deepest;
        float mv[3];
        for (int b = 0; b < 3; b++) {
            p[b] += depth * pl[k].n[b];
            mv[b] = p[b] - xp[i * 3 + b];
        }
        float dn = sb_dot3(mv, pl[k].n), t[3];
        for (int b = 0; b < 3; b++)
            t[b] = mv[b] - dn * pl[k].n[b];
        float tl = sqrtf(sb_dot3(t, t)), lim = mu * depth;
        float f = tl <= lim ? 1.0f : lim / tl;
        for (int b = 0; b < 3; b++)
            p[b] -= f * t[b];
    }
    return deepest;
}

/* How far particle i lies behind the planes (0: in front of all). */
SIM_HD static inline float sb_penetration(int i, const float *x, const sb_plane *pl, int npl)
{
    float deepest = 0.0f;
    for (int k = 0; k < npl; k++) {
        float depth = pl[k].d - sb_dot3(pl[k].n, &x[i * 3]);
        deepest = depth > deepest ? depth : deepest;
    }
    return deepest;
}

/* Velocity from the substep's motion, damped (damp = 1 - damping h), clamped to vmax.
 * Pinned particles are at rest relative to the parent. Returns the speed. */
SIM_HD static inline float sb_velocity(int i, const float *x, const float *xp, float *v,
                                       const float *w, float inv_h, float damp, float vmax)
{
    float u[3];
    for (int b = 0; b < 3; b++)
        u[b] = w[i] > 0.0f ? (x[i * 3 + b] - xp[i * 3 + b]) * inv_h * damp : 0.0f;
    float sp = sqrtf(sb_dot3(u, u));
    float f = sp > vmax ? vmax / sp : 1.0f;
    for (int b = 0; b < 3; b++)
        v[i * 3 + b] = u[b] * f;
    return sp * f;
}

/* An embedded surface vertex at its weights in its tet's current vertices. */
SIM_HD static inline void sb_embed(int i, const int32_t *etet, const float *ew, const int32_t *tet,
                                   const float *x, float *out)
{
    const int32_t *t4 = &tet[etet[i] * 4];
    const float *wi = &ew[i * 4];
    for (int b = 0; b < 3; b++)
        out[i * 3 + b] = wi[0] * x[t4[0] * 3 + b] + wi[1] * x[t4[1] * 3 + b] +
                         wi[2] * x[t4[2] * 3 + b] + wi[3] * x[t4[3] * 3 + b];
}

#endif
