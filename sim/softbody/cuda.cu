/* cuda.cu: one softbody frame on the GPU, the same substeps and the same colour order as
 * sim/softbody/cpu.c with the math of sim/softbody/kernels.h: one thread per particle, per
 * constraint of a colour, or per chunk of shape matching's partial sums, whose chunks one
 * thread then adds in order (as the CPU does), so both backends sum in the same order.
 *
 * This first version moves the state's arrays to the device and back every frame and keeps
 * no device copy of the model: simple and correct, not yet fast (as the cloth's first
 * version). If a CUDA call fails, the frame is solved on the CPU instead and the failure
 * printed once. Never run here (no device): the parity test skips without one. */
#include <cuda_runtime.h>
#include <string.h>

#include "softbody_internal.h"

namespace
{

const int kThreads = 256;

unsigned blocks(int n)
{
    return (unsigned)((n + kThreads - 1) / kThreads);
}

struct planes_t {
    sb_plane p[SB_NPLANES];
};

__global__ void k_predict(int n, float *x, float *v, float *xp, const float *w, float az, float h)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float a[3] = {0.0f, 0.0f, az};
    if (i < n)
        sb_predict(i, x, v, xp, w, a, h);
}

__global__ void k_distance(int c0, int c1, const int32_t *ea, const int32_t *eb, const float *rest,
                           const float *share, float *x)
{
    int e = c0 + blockIdx.x * blockDim.x + threadIdx.x;
    if (e < c1)
        sb_distance(ea[e], eb[e], rest[e], share[e * 4], share[e * 4 + 1], x);
}

__global__ void k_xdistance(int c0, int c1, const int32_t *ea, const int32_t *eb, const float *rest,
                            const float *coef, float *x, float *lambda)
{
    int e = c0 + blockIdx.x * blockDim.x + threadIdx.x;
    if (e < c1)
        sb_xpbd_distance(ea[e], eb[e], rest[e], &coef[e * 4], x, &lambda[e]);
}

struct dev_tets {
    int32_t *tet, *bidx;
    float *tvol, *talpha, *brest, *balpha;
};

__global__ void k_tets(int c0, int c1, dev_tets d, float inv_h2, int volumes, int springs, float *x,
                       const float *w, float *lv, float *ls)
{
    int j = c0 + blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= c1)
        return;
    int t = j, b = d.bidx[t];
    if (volumes)
        sb_xpbd_volume(&d.tet[t * 4], d.tvol[t], d.talpha[t] * inv_h2, x, w, &lv[t]);
    if (springs && b >= 0)
        sb_tet_springs(&d.tet[t * 4], &d.brest[b * 4], &d.balpha[b * 4], inv_h2, x, w, &ls[b * 4]);
}

__global__ void k_grab(int ng, const int32_t *idx, const float *off, float hx, float hy, float hz,
                       float k, float *x, const float *w)
{
    int j = blockIdx.x * blockDim.x + threadIdx.x;
    float hand[3] = {hx, hy, hz};
    if (j < ng)
        sb_grab(j, idx, off, hand, k, x, w);
}

/* small: cen[0..3), R[3..12), quat[12..16), the volume scale [16] */
__global__ void k_sum_x(int nch, int n, const float *x, float *psum)
{
    int k = blockIdx.x * blockDim.x + threadIdx.x;
    if (k < nch)
        sb_sum_x(k * SB_CHUNK, k == nch - 1 ? n : (k + 1) * SB_CHUNK, x, &psum[k * 3]);
}

__global__ void k_centre(int nch, const float *psum, int n, float *small)
{
    sb_reduce_centre(nch, psum, n, small);
}

__global__ void k_sum_apq(int nch, int n, const float *x, const float *small, const float *q,
                          float *papq)
{
    int k = blockIdx.x * blockDim.x + threadIdx.x;
    if (k < nch)
        sb_sum_apq(k * SB_CHUNK, k == nch - 1 ? n : (k + 1) * SB_CHUNK, x, small, q, &papq[k * 9]);
}

__global__ void k_rotation(int nch, const float *papq, float *small)
{
    sb_reduce_rotation(nch, papq, &small[12], &small[3]);
}

__global__ void k_goal(int n, float *x, const float *w, const float *small, const float *q, float k)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        sb_shape_goal(i, x, w, small, &small[3], q, k);
}

/* The closed surface's volume constraint; o is the first particle (as on the CPU). */
__global__ void k_vol_grad(int n, const int32_t *vt_start, const int32_t *vt_jk, const float *x,
                           float *grad)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        sb_volume_grad(i, vt_start, vt_jk, x, x, grad);
}

__global__ void k_vol_sums(int nch, int n, const float *x, const float *w, const float *grad,
                           float *vpart)
{
    int k = blockIdx.x * blockDim.x + threadIdx.x;
    if (k < nch)
        sb_sum_volume_wg2(k * SB_CHUNK, k == nch - 1 ? n : (k + 1) * SB_CHUNK, x, x, w, grad,
                          &vpart[k * 2]);
}

__global__ void k_vol_scale(int nch, const float *vpart, float rest6, float k, float *small)
{
    small[16] = sb_volume_scale(nch, vpart, rest6, k);
}

__global__ void k_vol_apply(int n, float *x, const float *w, const float *grad, const float *small)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        sb_volume_apply(i, x, w, grad, small[16]);
}

__global__ void k_collide(int n, float *x, const float *xp, float *v, const float *w, planes_t pl,
                          int npl, float mu, float inv_h, float damp, float vmax)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    sb_collide(i, x, xp, w, pl.p, npl, mu);
    sb_velocity(i, x, xp, v, w, inv_h, damp, vmax);
}

/* Every device array of one frame; freed together. */
struct dev_state {
    float *x, *v, *xp, *w, *erest, *ecoef, *q, *partial, *small, *lambda, *goff, *grad, *vpart;
    int32_t *ea, *eb, *gidx, *vt_start, *vt_jk;
    dev_tets t;
};

void dev_free(dev_state *d)
{
    void *p[] = {d->ecoef,    d->x,      d->v,        d->xp,      d->w,
                 d->erest,    d->q,      d->partial,  d->small,   d->lambda,
                 d->goff,     d->ea,     d->eb,       d->gidx,    d->t.tet,
                 d->t.bidx,   d->t.tvol, d->t.talpha, d->t.brest, d->t.balpha,
                 d->vt_start, d->vt_jk,  d->grad,     d->vpart}; /* the last four were not freed */
    for (void *a : p)
        cudaFree(a);
}

/* Allocate *d of bytes (at least 4) and copy host into it (when host is given). */
template <typename T> bool up(T **d, const void *host, size_t bytes)
{
    bytes = bytes < 4 ? 4 : bytes;
    if (cudaMalloc((void **)d, bytes) != cudaSuccess)
        return false;
    return !host || cudaMemcpy(*d, host, bytes, cudaMemcpyHostToDevice) == cudaSuccess;
}

bool upload(const sim_softbody_model *m, const sim_softbody_state *s, dev_state *d)
{
    size_t n = (size_t)m->n, ne = (size_t)m->nedge, nt = (size_t)m->ntet, nb = (size_t)m->nbound;
    size_t nl = ne + nt + 4 * nb, nch = (size_t)sb_nchunk(m->n), f = sizeof(float);
    float small[20] = {0};
    memcpy(&small[12], s->quat, sizeof s->quat);
    bool ok =
        up(&d->x, s->x, n * 3 * f) && up(&d->v, s->v, n * 3 * f) && up(&d->xp, s->xp, n * 3 * f) &&
        up(&d->w, s->w, n * f) && up(&d->erest, m->erest, ne * f) && up(&d->ea, m->ea, ne * 4) &&
        up(&d->eb, m->eb, ne * 4) && up(&d->small, small, sizeof small) &&
        up(&d->gidx, s->grab_idx, (size_t)s->ngrab * 4) &&
        up(&d->goff, s->grab_off, (size_t)s->ngrab * 3 * f) && up(&d->partial, NULL, nch * 12 * f);
    size_t nt3 = (size_t)m->ntri * 3, nvp = nch * 2;
    if (m->info.kind == SIM_SOFTBODY_SURFACE)
        return ok && up(&d->q, m->q, n * 3 * f) && up(&d->ecoef, s->ecoef, ne * 4 * f) &&
               up(&d->vt_start, m->vt_start, (n + 1) * 4) && up(&d->vt_jk, m->vt_jk, nt3 * 8) &&
               up(&d->grad, NULL, n * 3 * f) && up(&d->vpart, NULL, nvp * f);
    return ok && up(&d->ecoef, s->ecoef, ne * 4 * f) && up(&d->lambda, NULL, nl * f) &&
           up(&d->t.tet, m->tet, nt * 16) && up(&d->t.bidx, m->bidx, nt * 4) &&
           up(&d->t.tvol, m->tvol, nt * f) && up(&d->t.talpha, s->talpha, nt * f) &&
           up(&d->t.brest, m->brest, nb * 4 * f) && up(&d->t.balpha, s->balpha, nb * 4 * f);
}

void constraints(const sim_softbody_model *m, const sim_softbody_state *s, dev_state *d,
                 float inv_h2)
{
    const sim_softbody_params *p = &s->prm;
    size_t nl = (size_t)m->nedge + (size_t)m->ntet + 4 * (size_t)m->nbound;
    if (m->info.kind == SIM_SOFTBODY_HYBRID)
        cudaMemsetAsync(d->lambda, 0, nl * sizeof(float));
    for (int it = 0; it < sb_iterations(m, p); it++) {
        for (int c = 0; c < m->ecol.n; c++) {
            int c0 = m->ecol.start[c], c1 = m->ecol.start[c + 1];
            if (m->info.kind == SIM_SOFTBODY_SURFACE)
                k_distance<<<blocks(c1 - c0), kThreads>>>(c0, c1, d->ea, d->eb, d->erest, d->ecoef,
                                                          d->x);
            else
                k_xdistance<<<blocks(c1 - c0), kThreads>>>(c0, c1, d->ea, d->eb, d->erest, d->ecoef,
                                                           d->x, d->lambda);
        }
        for (int c = 0; c < m->tcol.n; c++) {
            int c0 = m->tcol.start[c], c1 = m->tcol.start[c + 1];
            k_tets<<<blocks(c1 - c0), kThreads>>>(
                c0, c1, d->t, inv_h2, p->tet_volumes, p->spring_mode != SIM_SPRING_OFF, d->x, d->w,
                d->lambda + m->nedge, d->lambda + m->nedge + m->ntet);
        }
    }
}

void shape_match(const sim_softbody_model *m, const sim_softbody_state *s, dev_state *d)
{
    int n = m->n, nch = sb_nchunk(n);
    float *psum = d->partial, *papq = d->partial + (size_t)nch * 3;
    k_sum_x<<<blocks(nch), kThreads>>>(nch, n, d->x, psum);
    k_centre<<<1, 1>>>(nch, psum, n, d->small);
    k_sum_apq<<<blocks(nch), kThreads>>>(nch, n, d->x, d->small, d->q, papq);
    k_rotation<<<1, 1>>>(nch, papq, d->small);
    k_goal<<<blocks(n), kThreads>>>(n, d->x, d->w, d->small, d->q, s->prm.shape_stiffness);
}

void volume_constraint(const sim_softbody_model *m, const sim_softbody_state *s, dev_state *d)
{
    int n = m->n, nch = sb_nchunk(n);
    k_vol_grad<<<blocks(n), kThreads>>>(n, d->vt_start, d->vt_jk, d->x, d->grad);
    k_vol_sums<<<blocks(nch), kThreads>>>(nch, n, d->x, d->w, d->grad, d->vpart);
    k_vol_scale<<<1, 1>>>(nch, d->vpart, m->rest6, s->prm.volume_stiffness, d->small);
    k_vol_apply<<<blocks(n), kThreads>>>(n, d->x, d->w, d->grad, d->small);
}

bool gpu_solve(const sim_softbody_model *m, sim_softbody_state *s, const sb_frame *f)
{
    dev_state d;
    memset(&d, 0, sizeof d);
    bool ok = upload(m, s, &d);
    const sim_softbody_params *p = &s->prm;
    float h = p->dt / (float)sb_substeps(m, p), inv_h = 1.0f / h, damp = 1.0f - p->damping * h;
    damp = damp < 0.0f ? 0.0f : damp;
    planes_t pl;
    memcpy(pl.p, f->planes, sizeof pl.p);
    int n = m->n;
    for (int k = 0; ok && k < sb_substeps(m, p); k++) {
        k_predict<<<blocks(n), kThreads>>>(n, d.x, d.v, d.xp, d.w, -p->gravity, h);
        constraints(m, s, &d, inv_h * inv_h);
        if (s->ngrab)
            k_grab<<<blocks(s->ngrab), kThreads>>>(s->ngrab, d.gidx, d.goff, s->hand[0], s->hand[1],
                                                   s->hand[2], p->grab_stiffness, d.x, d.w);
        if (m->info.kind == SIM_SOFTBODY_SURFACE && p->shape_stiffness > 0.0f)
            shape_match(m, s, &d);
        if (m->info.kind == SIM_SOFTBODY_SURFACE && p->volume_stiffness > 0.0f)
            volume_constraint(m, s, &d);
        k_collide<<<blocks(n), kThreads>>>(n, d.x, d.xp, d.v, d.w, pl, f->nplanes, p->friction,
                                           inv_h, damp, p->v_max);
    }
    /* Into a scratch copy first: a failure half way must leave the state as it was, for the
     * CPU to solve the frame from. */
    float small[20];
    size_t v3 = (size_t)n * 3 * sizeof(float);
    float *hx = (float *)malloc(3 * v3);
    ok = ok && hx && cudaGetLastError() == cudaSuccess &&
         cudaMemcpy(hx, d.x, v3, cudaMemcpyDeviceToHost) == cudaSuccess &&
         cudaMemcpy(hx + (size_t)n * 3, d.v, v3, cudaMemcpyDeviceToHost) == cudaSuccess &&
         cudaMemcpy(hx + (size_t)n * 6, d.xp, v3, cudaMemcpyDeviceToHost) == cudaSuccess &&
         cudaMemcpy(small, d.small, sizeof small, cudaMemcpyDeviceToHost) == cudaSuccess;
    if (ok) {
        memcpy(s->x, hx, v3);
        memcpy(s->v, hx + (size_t)n * 3, v3);
        memcpy(s->xp, hx + (size_t)n * 6, v3);
        memcpy(s->quat, &small[12], sizeof s->quat);
    }
    free(hx);
    dev_free(&d);
    return ok;
}

sim_status cuda_solve(const sim_softbody_model *m, sim_softbody_state *s, const sb_frame *f,
                      int threads)
{
    if (gpu_solve(m, s, f))
        return SIM_OK;
    static bool said;
    if (!said) {
        said = true;
        fprintf(stderr, "softcast: softbody on CUDA failed (%s); solving on the CPU\n",
                cudaGetErrorString(cudaGetLastError()));
    }
    return sb_cpu_backend.solve(m, s, f, threads);
}

} // namespace

extern "C" const sim_softbody_backend_i sb_cuda_backend = {"cuda", cuda_solve};
