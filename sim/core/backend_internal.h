/* backend_internal.h: what a backend is, for the scenes that run on it. */
#ifndef SIM_CORE_BACKEND_INTERNAL_H
#define SIM_CORE_BACKEND_INTERNAL_H

#include "../sim.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A backend is a kind and a thread budget; it knows no scene. Each scene keeps its own
 * table of entry points per backend kind and picks one for the backend it is given
 * (vol_backend_for, cloth_backend_for). */
struct sim_backend {
    sim_backend_kind kind; /* SIM_BACKEND_CPU or SIM_BACKEND_CUDA, never AUTO */
    int threads;
};

#if SIM_HAVE_CUDA
/* core/cuda_probe.cu: devices that answer (0 without a driver). */
int sc_cuda_device_count(void);
#endif

#ifdef __cplusplus
}
#endif
#endif
