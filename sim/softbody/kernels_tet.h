/* kernels_tet.h: the hybrid model's per-tet math (XPBD volume, virtual springs), written
 * once for a lane type and included once per type (no include guard, on purpose):
 *   kernels.h        float lanes: one tet per call (the CUDA backend: one thread a tet);
 *   cpu.c            a vector of SB_LANES floats (GCC vector extensions): that many tets of
 *                    one colour at once (they share no vertex: independent).
 * The includer defines:
 *   SBT            the lane type (float or a float vector); SBM its mask (int or int vector,
 *                  non-zero or all ones where true, as C comparisons of that type give)
 *   SBT_FN(name)   the function names for this type
 *   SBT_SQRT(x)    square root lane by lane
 *   SBT_SEL(m,a,b) a where m, b elsewhere
 *   SBT_ANY(m)     whether any lane of m is true
 *   SBT_INLINE     how the functions are declared (static inline, and always inlined for
 *                  vectors: none of them is then a call that passes vectors by value)
 * A lane's arithmetic is the same sequence of IEEE operations on either type (no contraction:
 * -ffp-contract=off, --fmad=false), so a lane gives what the scalar code gives. Where the
 * scalar code would stop early (a degenerate constraint), the lane keeps its positions and
 * multiplier instead (a correction of zero, selected).
 * An element's vertices are held in locals (p), loaded once and stored once; the volume is
 * written out component by component (its arrays in loops were packed by the compiler into
 * 8-byte moves over 4-byte stores, and each such load waited for its stores: most of a
 * hybrid frame, measured). */

/* The tet volume's gradients with respect to its four vertices p (Ten Minute Physics 10's
 * pairs: each the cross product of two edges of the opposite face, over 6, pointing out of
 * the tet). Returns the signed volume. */
SIM_HD SBT_INLINE SBT SBT_FN(sb_tet_grads_p)(SBT p[4][3], SBT g[4][3])
{
    const float s = 1.0f / 6.0f;
    SBT a0 = p[1][0] - p[0][0], a1 = p[1][1] - p[0][1], a2 = p[1][2] - p[0][2];
    SBT b0 = p[2][0] - p[0][0], b1 = p[2][1] - p[0][1], b2 = p[2][2] - p[0][2];
    SBT c0 = p[3][0] - p[0][0], c1 = p[3][1] - p[0][1], c2 = p[3][2] - p[0][2];
    SBT d0 = p[3][0] - p[1][0], d1 = p[3][1] - p[1][1], d2 = p[3][2] - p[1][2];
    SBT e0 = p[2][0] - p[1][0], e1 = p[2][1] - p[1][1], e2 = p[2][2] - p[1][2];
    g[0][0] = (d1 * e2 - d2 * e1) * s; /* d x e */
    g[0][1] = (d2 * e0 - d0 * e2) * s;
    g[0][2] = (d0 * e1 - d1 * e0) * s;
    g[1][0] = (b1 * c2 - b2 * c1) * s; /* b x c */
    g[1][1] = (b2 * c0 - b0 * c2) * s;
    g[1][2] = (b0 * c1 - b1 * c0) * s;
    g[2][0] = (c1 * a2 - c2 * a1) * s; /* c x a */
    g[2][1] = (c2 * a0 - c0 * a2) * s;
    g[2][2] = (c0 * a1 - c1 * a0) * s;
    g[3][0] = (a1 * b2 - a2 * b1) * s; /* a x b */
    g[3][1] = (a2 * b0 - a0 * b2) * s;
    g[3][2] = (a0 * b1 - a1 * b0) * s;
    return g[3][0] * c0 + g[3][1] * c1 + g[3][2] * c2;
}

/* XPBD volume constraint C = V - V0 of the tet p (alpha_t = alpha / h^2). */
SIM_HD SBT_INLINE void SBT_FN(sb_xpbd_volume_p)(SBT p[4][3], const SBT wv[4], SBT rest_vol,
                                                SBT alpha_t, SBT *lambda, SBM on)
{
    SBT g[4][3];
    SBT c = SBT_FN(sb_tet_grads_p)(p, g) - rest_vol;
    SBT wsum = wv[0] * (g[0][0] * g[0][0] + g[0][1] * g[0][1] + g[0][2] * g[0][2]) +
               wv[1] * (g[1][0] * g[1][0] + g[1][1] * g[1][1] + g[1][2] * g[1][2]) +
               wv[2] * (g[2][0] * g[2][0] + g[2][1] * g[2][1] + g[2][2] * g[2][2]) +
               wv[3] * (g[3][0] * g[3][0] + g[3][1] * g[3][1] + g[3][2] * g[3][2]);
    SBM ok = on & (wsum > 0.0f);
    SBT dl = SBT_SEL(ok, (-c - alpha_t * *lambda) / (wsum + alpha_t), 0.0f * wsum);
    *lambda = SBT_SEL(ok, *lambda + dl, *lambda);
    for (int j = 0; j < 4; j++) {
        SBT s = dl * wv[j];
        p[j][0] += s * g[j][0];
        p[j][1] += s * g[j][1];
        p[j][2] += s * g[j][2];
    }
}

/* One virtual spring (SOFTBODY.md, claim 3 and our reading): it joins vertex s of the tet to
 * its centre, the mean of its four vertices recomputed for every spring (not a simulated
 * particle), C = |p_s - c| - rest, XPBD (alpha_t = alpha / h^2). The centre moves with all
 * four vertices: the gradient is 3/4 n at vertex s, -1/4 n at the three others. */
SIM_HD SBT_INLINE void SBT_FN(sb_spring)(SBT p[4][3], const SBT wv[4], int s, SBT rest, SBT alpha_t,
                                         SBT *lambda, SBM on)
{
    SBT d[3];
    for (int k = 0; k < 3; k++)
        d[k] = p[s][k] - 0.25f * (p[0][k] + p[1][k] + p[2][k] + p[3][k]);
    SBT len = SBT_SQRT(d[0] * d[0] + d[1] * d[1] + d[2] * d[2]);
    SBT wsum = wv[s] * 0.5625f;
    for (int j = 0; j < 4; j++)
        if (j != s)
            wsum += wv[j] * 0.0625f;
    SBM ok = on & (len >= 1e-12f) & (wsum > 0.0f);
    if (!SBT_ANY(ok))
        return;
    SBT dl = (-(len - rest) - alpha_t * *lambda) / (wsum + alpha_t);
    *lambda = SBT_SEL(ok, *lambda + dl, *lambda);
    SBT f = SBT_SEL(ok, dl / len, 0.0f * len);
    for (int j = 0; j < 4; j++) {
        SBT gj = (j == s ? 0.75f : -0.25f) * f * wv[j];
        p[j][0] += gj * d[0];
        p[j][1] += gj * d[1];
        p[j][2] += gj * d[2];
    }
}

/* The four virtual springs of a boundary tet in vertex order (compliance alpha4[i], already
 * over h^2). */
SIM_HD SBT_INLINE void SBT_FN(sb_tet_springs_p)(SBT p[4][3], const SBT wv[4], const SBT rest4[4],
                                                const SBT alpha_t4[4], SBT lambda4[4], SBM on)
{
    SBT_FN(sb_spring)(p, wv, 0, rest4[0], alpha_t4[0], &lambda4[0], on);
    SBT_FN(sb_spring)(p, wv, 1, rest4[1], alpha_t4[1], &lambda4[1], on);
    SBT_FN(sb_spring)(p, wv, 2, rest4[2], alpha_t4[2], &lambda4[2], on);
    SBT_FN(sb_spring)(p, wv, 3, rest4[3], alpha_t4[3], &lambda4[3], on);
}
