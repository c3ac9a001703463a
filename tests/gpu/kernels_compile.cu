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

#include "sim/softbody/kernels.h"

/* The softbody kernels that sim/softbody/cuda.cu does not call on the device (the carry, the
 * embedding and the penetration run on the host for now). */
__global__ void k_softbody(float *x, float *v, const float *w, const int32_t *tet,
                           const int32_t *et, const float *ew, float *out, sb_plane pl)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float R[9] = {1, 0, 0, 0, 1, 0, 0, 0, 1}, t[3] = {0, 0, 0}, q[4] = {1, 0, 0, 0}, r[4];
    sb_carry(i, x, v, R, t);
    sb_embed(i, et, ew, tet, x, out);
    sb_quat_mul_conj(q, q, r);
    out[i] += sb_penetration(i, x, &pl, 1) + r[0] + w[i];
}
