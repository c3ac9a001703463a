/* growth_internal.h: the truss's insides, shared by truss.c, its backends (cpu.c, cuda.cu)
 * and its direct solve (direct.c). */
#ifndef SIM_GROWTH_GROWTH_INTERNAL_H
#define SIM_GROWTH_GROWTH_INTERNAL_H

#include "growth.h"
#include "kernels.h"
#include "sim/core/backend_internal.h"

#ifdef __cplusplus
extern "C" {
#endif

struct sim_truss {
    sim_truss_params p;
    sim_backend *b;
    double a_orth, a_diag; /* the cell's areas (A_o, A_d) */
    int nnode;
    uint8_t *cell; /* (nx x ny): a cell stands there */
    int ncell;
    double *ah, *av, *ad1, *ad2; /* member areas, summed over the cells that cloned them */
    uint8_t *fix;                /* (nodes): TRUSS_FIX_* */
    double *f, *u;               /* (nodes x 2) */
    double omega;
    int threads;               /* 0: the backend's */
    sim_truss_member *members; /* every slot, for drawing (areas refreshed on growth) */
    int nmember;
};

/* Whether the supports on standing nodes stop the rigid motions (x, y, turning), and what a
 * solve says when they do not. */
int truss_held(const sim_truss *t);
#define TRUSS_NOT_HELD "truss: not held: its supports must stop it moving in x, in y and turning"

/* The kernels' view of a truss (host pointers). */
truss_view truss_view_of(sim_truss *t);

/* A backend's relaxation: `sweeps` sweeps of the four colours over the whole grid. */
typedef struct truss_backend_i {
    sim_status (*sweeps)(sim_truss *t, int sweeps, char *err, size_t err_sz);
} truss_backend_i;

extern const truss_backend_i truss_cpu_backend;
#if SIM_HAVE_CUDA
extern const truss_backend_i truss_cuda_backend;
#endif

static inline const truss_backend_i *truss_backend_for(const sim_backend *b)
{
#if SIM_HAVE_CUDA
    if (b && b->kind == SIM_BACKEND_CUDA)
        return &truss_cuda_backend;
#endif
    (void)b;
    return &truss_cpu_backend;
}

#ifdef __cplusplus
}
#endif
#endif
