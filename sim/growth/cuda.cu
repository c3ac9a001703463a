/* cuda.cu: the truss's relaxation on the GPU: one thread per node of a colour, the colours in
 * order, with the math of kernels.h (so the CPU tests cover it, and both backends give the
 * same sweep bit for bit: each node's update reads only nodes of other colours).
 *
 * This first version moves the truss to the device and back for each batch of sweeps (the
 * residual is checked on the host between batches): simple and correct, not yet fast. Never
 * run here (no device): the parity check in tests/gpu/check.sh runs it where one is lent. */
#include <cuda_runtime.h>
#include <stdio.h>

#include "growth_internal.h"

namespace
{

const int kThreads = 256;

__global__ void k_colour(truss_view v, int c, int count, double omega)
{
    int k = blockIdx.x * blockDim.x + threadIdx.x, i, j;
    if (k < count && truss_colour_node(v.nx, v.ny, c, k, &i, &j))
        truss_relax_node(&v, i, j, omega);
}

template <typename T> cudaError_t up(T **d, const T *h, size_t n)
{
    cudaError_t e = cudaMalloc((void **)d, n * sizeof(T));
    return e != cudaSuccess ? e : cudaMemcpy(*d, h, n * sizeof(T), cudaMemcpyHostToDevice);
}

sim_status cuda_sweeps(sim_truss *t, int sweeps, char *err, size_t err_sz)
{
    const size_t nx = (size_t)t->p.nx, ny = (size_t)t->p.ny, nn = (size_t)t->nnode;
    truss_view h = truss_view_of(t), d = h;
    double *ah = NULL, *av = NULL, *ad1 = NULL, *ad2 = NULL, *f = NULL, *u = NULL;
    uint8_t *fix = NULL;
    cudaError_t e = up(&ah, t->ah, nx * (ny + 1));
    if (e == cudaSuccess)
        e = up(&av, t->av, (nx + 1) * ny);
    if (e == cudaSuccess)
        e = up(&ad1, t->ad1, nx * ny);
    if (e == cudaSuccess)
        e = up(&ad2, t->ad2, nx * ny);
    if (e == cudaSuccess)
        e = up(&fix, t->fix, nn);
    if (e == cudaSuccess)
        e = up(&f, t->f, nn * 2);
    if (e == cudaSuccess)
        e = up(&u, t->u, nn * 2);
    d.ah = ah, d.av = av, d.ad1 = ad1, d.ad2 = ad2, d.fix = fix, d.f = f, d.u = u;
    for (int s = 0; s < sweeps && e == cudaSuccess; s++)
        for (int c = 0; c < 4 && e == cudaSuccess; c++) {
            int count = truss_colour_count(h.nx, h.ny, c);
            k_colour<<<(unsigned)((count + kThreads - 1) / kThreads), kThreads>>>(d, c, count,
                                                                                  t->omega);
            e = cudaGetLastError();
        }
    if (e == cudaSuccess)
        e = cudaMemcpy(t->u, u, nn * 2 * sizeof(double), cudaMemcpyDeviceToHost);
    cudaFree(ah), cudaFree(av), cudaFree(ad1), cudaFree(ad2), cudaFree(fix), cudaFree(f),
        cudaFree(u);
    if (e != cudaSuccess) {
        if (err && err_sz)
            snprintf(err, err_sz, "truss: CUDA: %s", cudaGetErrorString(e));
        return SIM_ERR_BACKEND;
    }
    return SIM_OK;
}

} // namespace

extern "C" const truss_backend_i truss_cuda_backend = {cuda_sweeps};
