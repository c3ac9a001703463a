/* backend.c: choosing a backend. The CPU backend always exists; CUDA is compiled in
 * when nvcc was found at build time and used when a device answers at run time. */
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "backend_internal.h"
#include "sc_base.h"

int sim_cuda_available(void)
{
#if SIM_HAVE_CUDA
    return sc_cuda_device_count() > 0;
#else
    return 0;
#endif
}

int sim_backend_kind_parse(const char *s)
{
    if (!s)
        return -1;
    if (!strcmp(s, "auto"))
        return SIM_BACKEND_AUTO;
    if (!strcmp(s, "cpu"))
        return SIM_BACKEND_CPU;
    if (!strcmp(s, "cuda"))
        return SIM_BACKEND_CUDA;
    return -1;
}

sim_status sim_backend_create(sim_backend **out, sim_backend_kind kind, int threads, char *err,
                              size_t err_sz)
{
    *out = NULL;
    if (threads < 0 || threads > 1024)
        return (sim_status)sc_fail(err, err_sz, SIM_ERR_ARG,
                                   "threads %d: must be 0 (all cores) to 1024", threads);
    if (kind != SIM_BACKEND_AUTO && kind != SIM_BACKEND_CPU && kind != SIM_BACKEND_CUDA)
        return (sim_status)sc_fail(err, err_sz, SIM_ERR_ARG, "backend kind %d unknown", (int)kind);
    int cuda = sim_cuda_available();
    if (kind == SIM_BACKEND_CUDA && !cuda) {
#if SIM_HAVE_CUDA
        return (sim_status)sc_fail(err, err_sz, SIM_ERR_BACKEND,
                                   "cuda backend: no CUDA device answers on this machine");
#else
        return (sim_status)sc_fail(err, err_sz, SIM_ERR_BACKEND,
                                   "cuda backend: this build has no CUDA (nvcc was not found)");
#endif
    }
    sim_backend *b = sc_calloc(1, sizeof *b);
    if (!b)
        return (sim_status)sc_fail(err, err_sz, SIM_ERR_NOMEM, "backend: out of memory");
    if (kind == SIM_BACKEND_CUDA || (kind == SIM_BACKEND_AUTO && cuda)) {
#if SIM_HAVE_CUDA
        b->kind = SIM_BACKEND_CUDA;
        b->threads = 1;
#endif
    } else {
        b->kind = SIM_BACKEND_CPU;
#ifdef _OPENMP
        b->threads = threads ? threads : omp_get_num_procs();
#else
        b->threads = 1;
#endif
    }
    *out = b;
    return SIM_OK;
}

void sim_backend_destroy(sim_backend *b)
{
    free(b);
}
const char *sim_backend_name(const sim_backend *b)
{
    return b->kind == SIM_BACKEND_CUDA ? "cuda" : "cpu";
}
int sim_backend_threads(const sim_backend *b)
{
    return b->threads;
}
int sim_backend_batches(const sim_backend *b)
{
    return b->kind == SIM_BACKEND_CUDA;
}
