/* cpu.c: the truss's relaxation on the CPU: each colour's nodes in parallel (OpenMP, rows
 * shared out), the colours in order, with the math of kernels.h. */
#include "growth_internal.h"

static sim_status cpu_sweeps(sim_truss *t, int sweeps, char *err, size_t err_sz)
{
    (void)err, (void)err_sz;
    truss_view v = truss_view_of(t);
    const int nx = t->p.nx, ny = t->p.ny,
              threads = t->threads > 0 ? t->threads
                        : t->b         ? t->b->threads
                                       : 1;
    (void)threads; /* unused without OpenMP (tsan-check) */
    for (int s = 0; s < sweeps; s++)
        for (int c = 0; c < 4; c++) {
            /* Rows of one colour are independent; a small beam is not worth the threads. */
#pragma omp parallel for schedule(static) num_threads(threads) if (threads > 1 && nx * ny > 4096)
            for (int j = c >> 1; j <= ny; j += 2)
                for (int i = c & 1; i <= nx; i += 2)
                    truss_relax_node(&v, i, j, t->omega);
        }
    return SIM_OK;
}

const truss_backend_i truss_cpu_backend = {cpu_sweeps};
