/* kernels_compile.cu: every shared kernel header compiled as CUDA, each function called
 * from device code, so `make cuda-check` catches C-only constructs on a GPU-less machine. */
#include "sim/cloth/kernels.h"
#include "sim/volume/kernels.h"

__global__ void k_all(cm_kparams kp, float *pos, float *prev, float *vel, uint8_t *flags, float *t)
{
    int64_t i = blockIdx.x * blockDim.x + threadIdx.x;
    float o[3], ot = 0.0f;
    int st = cm_propagate_element(&kp, i, pos, prev, flags, t, 1.0f, o, &ot);
    st += cm_relax_phase(&kp, i, flags) + cm_relax_element(&kp, i, pos, flags, 1, o);
    st += cm_inertia_element(&kp, i, pos, prev, vel, flags);
    cm_vel_out v = cm_velocity_element(&kp, i, pos, prev, vel, flags);
    int x, y, z;
    cm_coords(&kp, i, &x, &y, &z);
    int64_t j = cm_neighbour(&kp, x, y, z, 1);
    float viol = j >= 0 ? cm_link_violation(&kp, i, j, 1, pos, flags) : 0.0f;
    t[i] = (float)st + v.speed + viol + ot;
}
