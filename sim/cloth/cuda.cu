/* cloth_cuda.cu: one garment advanced by a frame on the GPU, the same substeps and the
 * same colour order as sim/cloth/cpu.c, with the math of sim/cloth/kernels.h: one
 * thread per particle (predict, pin, collide, velocity) or per constraint of a colour.
 *
 * This first version moves the garment's arrays to the device and back every frame and
 * keeps no device copy of the model: simple and correct, not yet fast. A crowd on the
 * GPU wants every garment of a LOD in one launch with the model's arrays resident.
 * If a CUDA call fails, the frame is solved on the CPU instead and the failure printed
 * once. Never run here (no device): `sh tests/gpu/check.sh` on a machine with one. */
#include <cuda_runtime.h>
#include <string.h>

#include "cloth_internal.h"

namespace
{

const int kThreads = 256;

unsigned blocks(int n)
{
    return (unsigned)((n + kThreads - 1) / kThreads);
}

struct caps_t {
    xp_capsule c[CLOTH_MAX_CAPS];
};

__global__ void k_predict(int n, float *x, float *v, float *xp, const float *w, float ax, float ay,
                          float az, float damp, float h)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float a[3] = {ax, ay, az};
    if (i < n)
        xp_predict(i, x, v, xp, w, a, damp, h);
}

__global__ void k_pin(int n, float *x, const float *rest, const float *w_rest, float rx, float ry,
                      float rz, float yaw)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float root[3] = {rx, ry, rz};
    if (i < n && w_rest[i] <= 0.0f)
        xp_to_world(root, yaw, &rest[i * 3], &x[i * 3]);
}

__global__ void k_distance(int c0, int c1, const int32_t *ca, const int32_t *cb, const float *crest,
                           const uint8_t *ckind, float a_stretch, float a_bend, float *x,
                           const float *w, float *lambda)
{
    int k = c0 + blockIdx.x * blockDim.x + threadIdx.x;
    if (k < c1)
        xp_distance(ca[k], cb[k], crest[k], ckind[k] == CLOTH_BEND ? a_bend : a_stretch,
                    ckind[k] == CLOTH_STRETCH, x, w, &lambda[k]);
}

__global__ void k_collide(int n, float *x, const float *xp, float *v, const float *w, caps_t caps,
                          int ncaps, float thickness, float friction, float inv_h,
                          unsigned *depth_bits)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    xp_collide(i, x, xp, w, caps.c, ncaps, thickness, friction);
    xp_velocity(i, x, xp, v, w, inv_h);
    float d = w[i] > 0.0f ? xp_penetration(i, x, caps.c, ncaps) : 0.0f;
    if (d > 0.0f) /* the last substep's value is the frame's: cleared before it */
        atomicMax(depth_bits, __float_as_uint(d)); /* non-negative floats order as uints */
}

struct dev_garment {
    float *x, *v, *xp, *w, *lambda, *rest, *wr, *crest;
    int32_t *ca, *cb;
    uint8_t *ckind;
    unsigned *depth;
};

void dev_free(dev_garment *d)
{
    void *p[] = {d->x,  d->v,     d->xp, d->w,  d->lambda, d->rest,
                 d->wr, d->crest, d->ca, d->cb, d->ckind,  d->depth};
    for (void *q : p)
        cudaFree(q);
}

/* The GPU path; returns false on any CUDA error (the caller solves on the CPU). */
bool gpu_solve(const sim_cloth_model *m, cloth_garment *g, const cloth_pose *p0,
               const cloth_pose *p1, const sim_cloth_params *prm, float *depth_out)
{
    const cloth_lod *l = &m->lod[g->lod];
    int n = g->n, nc = l->ncons;
    size_t v3 = (size_t)n * 3 * sizeof(float), v1 = (size_t)n * sizeof(float);
    dev_garment d;
    memset(&d, 0, sizeof d);
    bool ok = cudaMalloc(&d.x, v3) == cudaSuccess && cudaMalloc(&d.v, v3) == cudaSuccess &&
              cudaMalloc(&d.xp, v3) == cudaSuccess && cudaMalloc(&d.w, v1) == cudaSuccess &&
              cudaMalloc(&d.rest, v3) == cudaSuccess && cudaMalloc(&d.wr, v1) == cudaSuccess &&
              cudaMalloc(&d.lambda, (size_t)nc * sizeof(float)) == cudaSuccess &&
              cudaMalloc(&d.crest, (size_t)nc * sizeof(float)) == cudaSuccess &&
              cudaMalloc(&d.ca, (size_t)nc * sizeof(int32_t)) == cudaSuccess &&
              cudaMalloc(&d.cb, (size_t)nc * sizeof(int32_t)) == cudaSuccess &&
              cudaMalloc(&d.ckind, (size_t)nc) == cudaSuccess &&
              cudaMalloc(&d.depth, sizeof(unsigned)) == cudaSuccess;
    ok = ok && cudaMemcpy(d.x, g->x, v3, cudaMemcpyHostToDevice) == cudaSuccess &&
         cudaMemcpy(d.v, g->v, v3, cudaMemcpyHostToDevice) == cudaSuccess &&
         cudaMemcpy(d.w, g->w, v1, cudaMemcpyHostToDevice) == cudaSuccess &&
         cudaMemcpy(d.rest, l->rest, v3, cudaMemcpyHostToDevice) == cudaSuccess &&
         cudaMemcpy(d.wr, l->w, v1, cudaMemcpyHostToDevice) == cudaSuccess &&
         cudaMemcpy(d.crest, l->crest, (size_t)nc * sizeof(float), cudaMemcpyHostToDevice) ==
             cudaSuccess &&
         cudaMemcpy(d.ca, l->ca, (size_t)nc * sizeof(int32_t), cudaMemcpyHostToDevice) ==
             cudaSuccess &&
         cudaMemcpy(d.cb, l->cb, (size_t)nc * sizeof(int32_t), cudaMemcpyHostToDevice) ==
             cudaSuccess &&
         cudaMemcpy(d.ckind, l->ckind, (size_t)nc, cudaMemcpyHostToDevice) == cudaSuccess &&
         cudaMemset(d.depth, 0, sizeof(unsigned)) == cudaSuccess;
    if (ok) {
        float h = prm->dt / (float)prm->substeps, inv_h = 1.0f / h;
        float damp = 1.0f - prm->damping * h;
        damp = damp < 0.0f ? 0.0f : damp;
        float a_s = prm->stretch_compliance * l->compliance_scale * inv_h * inv_h;
        float a_b = prm->bend_compliance * l->compliance_scale * inv_h * inv_h;
        for (int s = 0; s < prm->substeps; s++) {
            cloth_body body;
            cloth_body_at(m, p0, p1, (float)(s + 1) / (float)prm->substeps, &body);
            caps_t caps;
            memcpy(caps.c, body.caps, sizeof caps.c);
            k_predict<<<blocks(n), kThreads>>>(n, d.x, d.v, d.xp, d.w, prm->wind[0], prm->wind[1],
                                               prm->wind[2] - prm->gravity, damp, h);
            k_pin<<<blocks(n), kThreads>>>(n, d.x, d.rest, d.wr, body.root[0], body.root[1],
                                           body.root[2], body.yaw);
            cudaMemsetAsync(d.lambda, 0, (size_t)nc * sizeof(float));
            for (int it = 0; it < prm->iterations; it++)
                for (int c = 0; c < l->ncolours; c++) {
                    int c0 = l->colour_start[c], c1 = l->colour_start[c + 1];
                    if (c1 > c0)
                        k_distance<<<blocks(c1 - c0), kThreads>>>(
                            c0, c1, d.ca, d.cb, d.crest, d.ckind, a_s, a_b, d.x, d.w, d.lambda);
                }
            if (s == prm->substeps - 1)
                cudaMemsetAsync(d.depth, 0, sizeof(unsigned));
            k_collide<<<blocks(n), kThreads>>>(n, d.x, d.xp, d.v, d.w, caps, body.ncaps,
                                               prm->thickness, prm->friction, inv_h, d.depth);
        }
        unsigned bits = 0;
        ok = cudaGetLastError() == cudaSuccess &&
             cudaMemcpy(g->x, d.x, v3, cudaMemcpyDeviceToHost) == cudaSuccess &&
             cudaMemcpy(g->v, d.v, v3, cudaMemcpyDeviceToHost) == cudaSuccess &&
             cudaMemcpy(g->xp, d.xp, v3, cudaMemcpyDeviceToHost) == cudaSuccess &&
             cudaMemcpy(&bits, d.depth, sizeof bits, cudaMemcpyDeviceToHost) == cudaSuccess;
        float depth;
        memcpy(&depth, &bits, sizeof depth);
        *depth_out = depth;
        /* Kinematic particles: the velocity of their last substep (as the CPU does). */
        for (int i = 0; ok && i < n; i++)
            if (g->w[i] <= 0.0f)
                for (int b = 0; b < 3; b++)
                    g->v[i * 3 + b] = (g->x[i * 3 + b] - g->xp[i * 3 + b]) * inv_h;
    }
    dev_free(&d);
    return ok;
}

float cuda_solve(const sim_cloth_model *m, cloth_garment *g, const cloth_pose *p0,
                 const cloth_pose *p1, const sim_cloth_params *prm, int threads)
{
    float depth = 0.0f;
    if (gpu_solve(m, g, p0, p1, prm, &depth))
        return depth;
    static bool said;
    if (!said) {
        said = true;
        fprintf(stderr, "softcast: cloth on CUDA failed (%s); solving on the CPU\n",
                cudaGetErrorString(cudaGetLastError()));
    }
    return cloth_cpu_backend.solve(m, g, p0, p1, prm, threads);
}

} // namespace

extern "C" const sim_cloth_backend_i cloth_cuda_backend = {"cuda", cuda_solve};
