/* kernels.h: the truss's per-node math, one source for the CPU (cpu.c) and CUDA (cuda.cu).
 *
 * The cellular automaton of the source: a node takes the displacement that puts it in
 * equilibrium with its neighbours as they stand, K_ii du = f_i - sum_j K_ij u_j (its 2 x 2
 * block from the members at it), here moved omega times that step (over-relaxation). Nodes of
 * one colour, (i & 1) + 2 (j & 1), share no member (every member joins nodes that differ in i
 * or j by one), so a colour updates in parallel and the four colours in order are a
 * Gauss-Seidel sweep: the same result on every thread count and on both backends.
 *
 * Compiled as C11 and as CUDA C++17: keep to their common subset. Doubles: the beam's
 * stiffness spans bending and stretching, and the reference asks 0.1% of the displacement. */
#ifndef SIM_GROWTH_KERNELS_H
#define SIM_GROWTH_KERNELS_H

#include <math.h>
#include <stdint.h>

#include "sim/core/sc_base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A fixed degree of freedom of a node (truss_view.fix). */
#define TRUSS_FIX_X 1u
#define TRUSS_FIX_Y 2u

/* The truss as the kernels see it (host or device pointers). Members: horizontal h[j nx + i]
 * joins (i, j)-(i+1, j); vertical v[j (nx+1) + i] joins (i, j)-(i, j+1); in cell c = i + j nx,
 * d1[c] joins (i, j)-(i+1, j+1) and d2[c] joins (i+1, j)-(i, j+1). An area of 0: no member. */
typedef struct truss_view {
    int nx, ny;
    double k_orth, k_diag; /* E / L for an orthogonal and a diagonal member (times its area) */
    const double *ah, *av, *ad1, *ad2;
    const uint8_t *fix; /* (nodes): TRUSS_FIX_* */
    const double *f;    /* (nodes x 2) */
    double *u;          /* (nodes x 2) */
} truss_view;

/* Add one member's share at node a: stiffness k along unit (ex, ey) to the node's block K and
 * its pull K (u_other - u_a) to the residual r. */
SIM_HD static inline void truss_member_at(double k, double ex, double ey, const double *ua,
                                          const double *ub, double K[3], double r[2])
{
    if (k == 0.0)
        return;
    double kxx = k * ex * ex, kxy = k * ex * ey, kyy = k * ey * ey;
    double dx = ub[0] - ua[0], dy = ub[1] - ua[1];
    K[0] += kxx, K[1] += kxy, K[2] += kyy;
    r[0] += kxx * dx + kxy * dy;
    r[1] += kxy * dx + kyy * dy;
}

/* Node (i, j)'s block K (xx, xy, yy) and residual r = f - (K u)_node. */
SIM_HD static inline void truss_node_residual(const truss_view *t, int i, int j, double K[3],
                                              double r[2])
{
    const int nx = t->nx, ny = t->ny, w = nx + 1, n = i + j * w;
    const double s = 0.70710678118654752440;
    const double *u = t->u, *un = &u[n * 2];
    K[0] = K[1] = K[2] = 0.0;
    r[0] = t->f[n * 2], r[1] = t->f[n * 2 + 1];
    if (i < nx)
        truss_member_at(t->k_orth * t->ah[j * nx + i], 1.0, 0.0, un, &u[(n + 1) * 2], K, r);
    if (i > 0)
        truss_member_at(t->k_orth * t->ah[j * nx + i - 1], 1.0, 0.0, un, &u[(n - 1) * 2], K, r);
    if (j < ny)
        truss_member_at(t->k_orth * t->av[j * w + i], 0.0, 1.0, un, &u[(n + w) * 2], K, r);
    if (j > 0)
        truss_member_at(t->k_orth * t->av[(j - 1) * w + i], 0.0, 1.0, un, &u[(n - w) * 2], K, r);
    if (i < nx && j < ny) /* d1 of cell (i, j), up right */
        truss_member_at(t->k_diag * t->ad1[j * nx + i], s, s, un, &u[(n + w + 1) * 2], K, r);
    if (i > 0 && j > 0) /* d1 of cell (i-1, j-1), down left */
        truss_member_at(t->k_diag * t->ad1[(j - 1) * nx + i - 1], s, s, un, &u[(n - w - 1) * 2], K,
                        r);
    if (i > 0 && j < ny) /* d2 of cell (i-1, j), up left */
        truss_member_at(t->k_diag * t->ad2[j * nx + i - 1], -s, s, un, &u[(n + w - 1) * 2], K, r);
    if (i < nx && j > 0) /* d2 of cell (i, j-1), down right */
        truss_member_at(t->k_diag * t->ad2[(j - 1) * nx + i], -s, s, un, &u[(n - w + 1) * 2], K, r);
}

/* One node's relaxation: to equilibrium with its neighbours, omega times the step. Fixed
 * degrees of freedom stay at zero; a node with no member stays where it is. */
SIM_HD static inline void truss_relax_node(const truss_view *t, int i, int j, double omega)
{
    const int n = i + j * (t->nx + 1);
    const unsigned fix = t->fix[n];
    if (fix == (TRUSS_FIX_X | TRUSS_FIX_Y))
        return;
    double K[3], r[2];
    truss_node_residual(t, i, j, K, r);
    double dx = 0.0, dy = 0.0;
    if (fix == TRUSS_FIX_X) {
        if (K[2] > 0.0)
            dy = r[1] / K[2];
    } else if (fix == TRUSS_FIX_Y) {
        if (K[0] > 0.0)
            dx = r[0] / K[0];
    } else {
        double det = K[0] * K[2] - K[1] * K[1];
        if (!(det > 1e-12 * (K[0] * K[2])))
            return; /* a node held by members along one line only: no equilibrium of its own */
        dx = (K[2] * r[0] - K[1] * r[1]) / det;
        dy = (K[0] * r[1] - K[1] * r[0]) / det;
    }
    t->u[n * 2] += omega * dx;
    t->u[n * 2 + 1] += omega * dy;
}

/* The colour of node (i, j): nodes of one colour share no member. */
SIM_HD static inline int truss_colour(int i, int j)
{
    return (i & 1) + 2 * (j & 1);
}

/* The k-th node of colour c on a grid (nx + 1) wide: its (i, j); 0 when past the grid. */
SIM_HD static inline int truss_colour_node(int nx, int ny, int c, int k, int *i, int *j)
{
    int ci = c & 1, cj = c >> 1;
    int per_row = (nx + 1 - ci + 1) / 2; /* i = ci, ci + 2, ... <= nx */
    if (per_row <= 0)
        return 0;
    int row = k / per_row;
    *i = ci + 2 * (k - row * per_row);
    *j = cj + 2 * row;
    return *j <= ny;
}

/* How many nodes of colour c a grid (nx + 1) x (ny + 1) has (the kernel's thread count). */
SIM_HD static inline int truss_colour_count(int nx, int ny, int c)
{
    int per_row = (nx + 1 - (c & 1) + 1) / 2, rows = (ny + 1 - (c >> 1) + 1) / 2;
    return per_row > 0 && rows > 0 ? per_row * rows : 0;
}

#ifdef __cplusplus
}
#endif
#endif
