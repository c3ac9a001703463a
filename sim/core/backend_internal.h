/* backend_internal.h: what a backend is, for the scenes that run on it. */
#ifndef SIM_CORE_BACKEND_INTERNAL_H
#define SIM_CORE_BACKEND_INTERNAL_H

#include "../sim.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sim_volume_backend_i sim_volume_backend_i; /* volume/volume_internal.h */
typedef struct sim_cloth_backend_i sim_cloth_backend_i;   /* cloth/cloth_internal.h */

struct sim_backend {
    sim_backend_kind kind;
    int threads;
    const sim_volume_backend_i *volume; /* each scene's entry points on this backend */
    const sim_cloth_backend_i *cloth;
    void *ctx; /* backend-wide context (CUDA device) */
};

#ifdef __cplusplus
}
#endif
#endif
