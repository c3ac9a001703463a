/* direct.c: the truss's reference solution, K u = f by a sparse Cholesky factorisation
 * (SuiteSparse's CHOLMOD, Debian's libsuitesparse-dev), over the free degrees of freedom of
 * the nodes that stand. Built only where CHOLMOD is (SIM_HAVE_CHOLMOD): the GPU machines
 * build the sim without it, and say so. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "growth_internal.h"
#include "sim/core/sc_base.h"

#if SIM_HAVE_CHOLMOD
#include <cholmod.h>

int sim_truss_have_direct(void)
{
    return 1;
}

/* Number each free degree of freedom of a standing node (-1: fixed or no member). */
static int number_dofs(const sim_truss *t, int *eq)
{
    truss_view v = truss_view_of((sim_truss *)t);
    int neq = 0;
    for (int j = 0; j <= t->p.ny; j++)
        for (int i = 0; i <= t->p.nx; i++) {
            int n = i + j * (t->p.nx + 1);
            double K[3], r[2];
            truss_node_residual(&v, i, j, K, r);
            for (int d = 0; d < 2; d++)
                eq[n * 2 + d] = K[0] + K[2] > 0.0 && !(t->fix[n] & (d ? TRUSS_FIX_Y : TRUSS_FIX_X))
                                    ? neq++
                                    : -1;
        }
    return neq;
}

/* One member's 4 x 4 stiffness into the triplets (upper triangle of the free dofs). */
static void add_member(cholmod_triplet *T, const int *eq, const sim_truss *t,
                       const sim_truss_member *m)
{
    const int w = t->p.nx + 1;
    double dx = (double)(m->b % w - m->a % w), dy = (double)(m->b / w - m->a / w);
    double len = sqrt(dx * dx + dy * dy), e[2] = {dx / len, dy / len};
    double k = t->p.youngs_pa * m->area / (len * t->p.cell_m);
    int dof[4] = {eq[m->a * 2], eq[m->a * 2 + 1], eq[m->b * 2], eq[m->b * 2 + 1]};
    double sign[4] = {1.0, 1.0, -1.0, -1.0};
    int *ri = T->i, *ci = T->j;
    double *x = T->x;
    for (int r = 0; r < 4; r++)
        for (int c = 0; c < 4; c++) {
            if (dof[r] < 0 || dof[c] < 0 || dof[r] > dof[c])
                continue;
            size_t z = T->nnz++;
            ri[z] = dof[r], ci[z] = dof[c];
            x[z] = sign[r] * sign[c] * k * e[r & 1] * e[c & 1];
        }
}

sim_status sim_truss_solve_direct(sim_truss *t, sim_truss_solve_info *info, char *err,
                                  size_t err_sz)
{
    double t0 = sc_now_ms();
    memset(info, 0, sizeof *info);
    if (!truss_held(t))
        return (sim_status)sc_fail(err, err_sz, SIM_ERR_ARG, "%s", TRUSS_NOT_HELD);
    int *eq = malloc((size_t)t->nnode * 2 * sizeof *eq);
    if (!eq)
        return (sim_status)sc_fail(err, err_sz, SIM_ERR_NOMEM, "truss: out of memory");
    int neq = number_dofs(t, eq);
    cholmod_common cc;
    cholmod_start(&cc);
    cc.print = 0;
    cholmod_triplet *T = cholmod_allocate_triplet((size_t)neq, (size_t)neq, (size_t)t->nmember * 10,
                                                  1, CHOLMOD_REAL, &cc);
    cholmod_dense *b = cholmod_zeros((size_t)neq, 1, CHOLMOD_REAL, &cc);
    cholmod_sparse *A = NULL;
    cholmod_factor *L = NULL;
    cholmod_dense *x = NULL;
    sim_status st = SIM_ERR_NOMEM;
    if (T && b) {
        for (int k = 0; k < t->nmember; k++)
            if (t->members[k].area > 0.0)
                add_member(T, eq, t, &t->members[k]);
        for (int n = 0; n < t->nnode * 2; n++)
            if (eq[n] >= 0)
                ((double *)b->x)[eq[n]] = t->f[n];
        A = cholmod_triplet_to_sparse(T, T->nnz, &cc);
        L = A ? cholmod_analyze(A, &cc) : NULL;
        if (L && cholmod_factorize(A, L, &cc) && cc.status == CHOLMOD_OK)
            x = cholmod_solve(CHOLMOD_A, L, b, &cc);
        st = x ? SIM_OK : (L ? SIM_ERR_ARG : SIM_ERR_NOMEM);
    }
    if (x)
        for (int n = 0; n < t->nnode * 2; n++)
            t->u[n] = eq[n] >= 0 ? ((double *)x->x)[eq[n]] : 0.0;
    else
        sc_fail(err, err_sz, st, "truss: the direct solve failed (CHOLMOD status %d)", cc.status);
    cholmod_free_dense(&x, &cc), cholmod_free_dense(&b, &cc);
    cholmod_free_factor(&L, &cc), cholmod_free_sparse(&A, &cc), cholmod_free_triplet(&T, &cc);
    cholmod_finish(&cc);
    free(eq);
    info->residual = st == SIM_OK ? sim_truss_residual(t) : 0.0;
    info->ms = sc_now_ms() - t0;
    return st;
}

#else

int sim_truss_have_direct(void)
{
    return 0;
}

sim_status sim_truss_solve_direct(sim_truss *t, sim_truss_solve_info *info, char *err,
                                  size_t err_sz)
{
    (void)t;
    memset(info, 0, sizeof *info);
    return (sim_status)sc_fail(err, err_sz, SIM_ERR_BACKEND,
                               "truss: this build has no direct solver (CHOLMOD: install "
                               "libsuitesparse-dev and rebuild)");
}

#endif
