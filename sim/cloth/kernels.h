/* xpbd.h: per-particle and per-constraint math of the cloth scene, written once and
 * compiled by the CPU backend (C11) and the CUDA backend (C++17).
 *
 * Method: XPBD (Macklin, Mueller, Chentanez 2016) in its small-steps form (Macklin et al.
 * 2019): several substeps a frame, one constraint iteration each, the Lagrange
 * multipliers reset at every substep. Stretch and bending are distance constraints with
 * compliance (bending across each interior edge, between the two opposite vertices).
 * Constraints are grouped by colour at model build: within a colour no two share a
 * particle, so a colour is solved in parallel with the same result as in sequence, and
 * the order (colour by colour) is the same on every backend and thread count.
 * Units: metres, seconds, z up. Keep to the common subset of C11 and C++17. */
#ifndef SIM_KERNELS_XPBD_H
#define SIM_KERNELS_XPBD_H

#include <math.h>
#include <stdint.h>

#include "../core/sc_base.h"

/* A capsule collider (a sphere when a == b), world metres. */
typedef struct xp_capsule {
    float a[3], b[3];
    float r;
} xp_capsule;

/* Root frame -> world: out = root + Rz(yaw) q. */
SIM_HD static inline void xp_to_world(const float root[3], float yaw, const float q[3],
                                      float out[3])
{
    float c = cosf(yaw), s = sinf(yaw);
    out[0] = root[0] + c * q[0] - s * q[1];
    out[1] = root[1] + s * q[0] + c * q[1];
    out[2] = root[2] + q[2];
}

/* Predict: gravity and wind, damping, then move. Kinematic particles (w == 0) keep the
 * position their owner sets. */
SIM_HD static inline void xp_predict(int i, float *x, float *v, float *xp, const float *w,
                                     const float accel[3], float damp, float h)
{
    for (int b = 0; b < 3; b++)
        xp[i * 3 + b] = x[i * 3 + b];
    if (w[i] <= 0.0f)
        return;
    for (int b = 0; b < 3; b++) {
        float vb = (v[i * 3 + b] + accel[b] * h) * damp;
        v[i * 3 + b] = vb;
        x[i * 3 + b] += vb * h;
    }
}

/* One XPBD distance constraint between particles a and b: C = |xa - xb| - rest.
 * alpha_t = compliance / h^2; *lambda is this substep's multiplier (0 at its start).
 * tension_only: act only when stretched (C > 0), as cloth does: it buckles rather than
 * resists compression, and its bending constraints hold the folds. */
SIM_HD static inline void xp_distance(int a, int b, float rest, float alpha_t, int tension_only,
                                      float *x, const float *w, float *lambda)
{
    float wa = w[a], wb = w[b], ws = wa + wb + alpha_t;
    if (ws <= 0.0f)
        return;
    /* Written out per component (the hot loop of a frame): the same operations in the
     * same order as a loop over k, without its loop. */
    float *pa = &x[a * 3], *pb = &x[b * 3];
    float d0 = pa[0] - pb[0], d1 = pa[1] - pb[1], d2 = pa[2] - pb[2];
    float len2 = d0 * d0 + d1 * d1 + d2 * d2;
    if (len2 < 1e-18f)
        return;
    float len = sqrtf(len2);
    float c = len - rest;
    if (tension_only && c <= 0.0f)
        return;
    float dl = (-c - alpha_t * *lambda) / ws;
    *lambda += dl;
    float n0 = d0 / len, n1 = d1 / len, n2 = d2 / len;
    pa[0] += wa * dl * n0;
    pa[1] += wa * dl * n1;
    pa[2] += wa * dl * n2;
    pb[0] -= wb * dl * n0;
    pb[1] -= wb * dl * n1;
    pb[2] -= wb * dl * n2;
}

/* Closest point on segment [a, b] to p. */
SIM_HD static inline void xp_closest_on_segment(const float a[3], const float b[3],
                                                const float p[3], float out[3])
{
    float ab[3], ap[3], den = 0.0f, num = 0.0f;
    for (int k = 0; k < 3; k++) {
        ab[k] = b[k] - a[k];
        ap[k] = p[k] - a[k];
        den += ab[k] * ab[k];
        num += ab[k] * ap[k];
    }
    float t = den > 0.0f ? num / den : 0.0f;
    t = t < 0.0f ? 0.0f : t > 1.0f ? 1.0f : t;
    for (int k = 0; k < 3; k++)
        out[k] = a[k] + t * ab[k];
}

/* Push particle i out of the capsules (by radius + thickness) and above the ground
 * (z = thickness); friction takes off that fraction of the tangential move made this
 * substep while in contact. Returns how deep it was before the push (radius, ground). */
SIM_HD static inline float xp_collide(int i, float *x, const float *xp, const float *w,
                                      const xp_capsule *caps, int ncaps, float thickness,
                                      float friction)
{
    if (w[i] <= 0.0f)
        return 0.0f;
    float *p = &x[i * 3];
    float depth = 0.0f;
    int contact = 0;
    float nrm[3] = {0.0f, 0.0f, 0.0f};
    for (int c = 0; c < ncaps; c++) {
        float q[3], d[3], len2 = 0.0f;
        xp_closest_on_segment(caps[c].a, caps[c].b, p, q);
        for (int k = 0; k < 3; k++) {
            d[k] = p[k] - q[k];
            len2 += d[k] * d[k];
        }
        float reach = caps[c].r + thickness;
        if (len2 >= reach * reach)
            continue;
        float len = sqrtf(len2);
        if (caps[c].r - len > depth)
            depth = caps[c].r - len;
        if (len < 1e-9f) { /* on the axis: push out sideways, any direction will do */
            d[0] = 1.0f;
            d[1] = d[2] = 0.0f;
            len = 1.0f;
        }
        for (int k = 0; k < 3; k++) {
            nrm[k] = d[k] / len;
            p[k] = q[k] + nrm[k] * reach;
        }
        contact = 1;
    }
    if (p[2] < thickness) {
        if (-p[2] > depth)
            depth = -p[2];
        p[2] = thickness;
        nrm[0] = nrm[1] = 0.0f;
        nrm[2] = 1.0f;
        contact = 1;
    }
    if (contact && friction > 0.0f) {
        float mv[3], dn = 0.0f;
        for (int k = 0; k < 3; k++) {
            mv[k] = p[k] - xp[i * 3 + k];
            dn += mv[k] * nrm[k];
        }
        for (int k = 0; k < 3; k++)
            p[k] -= friction * (mv[k] - dn * nrm[k]);
    }
    return depth;
}

/* How deep particle i sits inside the colliders or below the ground (0: outside). */
SIM_HD static inline float xp_penetration(int i, const float *x, const xp_capsule *caps, int ncaps)
{
    const float *p = &x[i * 3];
    float depth = -p[2] > 0.0f ? -p[2] : 0.0f;
    for (int c = 0; c < ncaps; c++) {
        float q[3], len2 = 0.0f;
        xp_closest_on_segment(caps[c].a, caps[c].b, p, q);
        for (int k = 0; k < 3; k++)
            len2 += (p[k] - q[k]) * (p[k] - q[k]);
        float d = caps[c].r - sqrtf(len2);
        depth = d > depth ? d : depth;
    }
    return depth;
}

/* Velocity from the substep's motion. */
SIM_HD static inline void xp_velocity(int i, const float *x, const float *xp, float *v,
                                      const float *w, float inv_h)
{
    if (w[i] <= 0.0f)
        return;
    for (int b = 0; b < 3; b++)
        v[i * 3 + b] = (x[i * 3 + b] - xp[i * 3 + b]) * inv_h;
}

#endif
