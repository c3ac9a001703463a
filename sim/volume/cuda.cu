/* volume_cuda.cu: the volume scene on a CUDA device.
 *
 * The whole state lives on the device; the host copy is refreshed only when the
 * generic layer asks (grab selection, outputs, hashes). The per-element math is
 * sim/volume/kernels.h, shared with the CPU backend; each kernel here is a thin
 * wrapper around one of its functions.
 *
 * The CPU backend visits only a frontier list (propagation) and active 8^3 blocks
 * (relaxation, velocity). Here every pass sweeps the whole lattice, which gives the same
 * state: the kernels are idempotent, so an element the CPU would skip does not move
 * when evaluated. Passes stop when a device counter says nothing moved or waited (read
 * back every kPassBatch passes; relaxation reads back once per frame). Metrics sums use
 * atomics, so their low bits may differ from the CPU's; the state does not. Built with
 * --fmad=false for parity with the CPU. */
#include <cuda_runtime.h>
#include <string.h>

#include "volume_internal.h"

namespace
{

const int kThreads = 256;
const int kPassBatch = VOL_PASS_BATCH; /* propagation passes between read-backs */

struct counters {
    unsigned long long active;    /* propagation: elements moved or waiting this pass */
    unsigned long long newly;     /* propagation: elements reached for the first time */
    unsigned long long moved;     /* relaxation: elements moved this iteration */
    unsigned long long nvel;      /* velocity: elements with V != 0 */
    unsigned long long stepped;   /* rigid tissue that stepped home */
    unsigned long long nonfinite; /* velocity: elements found NaN or infinite */
    unsigned int max_disp_bits;   /* float bits: non-negative floats order as integers */
    unsigned int max_viol_bits;
    double kinetic;
    double speed[SIM_NTISSUE];
};

struct vol_cuda {
    float *pos, *pos_alt, *pos_prev, *vel;
    float *t_reach, *t_alt;
    uint8_t *flags;
    uint32_t *grab_idx;
    float *grab_pos;
    counters *ctr;
    counters *h_ctr; /* pinned */
    float *h_stage;  /* pinned staging for grabbed positions */
    int rigid_maybe; /* a wave ran since rigid tissue was last found home: look again */
    uint32_t *h_stage_idx;
};

sim_status cuda_fail(char *err, size_t err_sz, cudaError_t e, const char *what)
{
    return (sim_status)sc_fail(err, err_sz, SIM_ERR_BACKEND, "cuda: %s: %s", what,
                               cudaGetErrorString(e));
}

#define CU(call, what)                               \
    do {                                             \
        cudaError_t e_ = (call);                     \
        if (e_ != cudaSuccess)                       \
            return cuda_fail(err, err_sz, e_, what); \
    } while (0)

unsigned grid_for(int64_t n)
{
    return (unsigned)((n + kThreads - 1) / kThreads);
}

__global__ void k_fill(float *a, float v, int64_t n)
{
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        a[i] = v;
}

__global__ void k_seed(const uint32_t *idx, const float *p, int n, float *pos, float *t_reach)
{
    int g = blockIdx.x * blockDim.x + threadIdx.x;
    if (g >= n)
        return;
    uint32_t i = idx[g];
    pos[(size_t)i * 3 + 0] = p[g * 3 + 0];
    pos[(size_t)i * 3 + 1] = p[g * 3 + 1];
    pos[(size_t)i * 3 + 2] = p[g * 3 + 2];
    if (t_reach)
        t_reach[i] = 0.0f;
}

__global__ void k_propagate(cm_kparams kp, int64_t n, const float *pos, float *pos_out,
                            const float *pos_prev, const uint8_t *flags, const float *t_reach,
                            float *t_out, float clock, counters *c)
{
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    float np[3], nt = t_reach[i];
    int st = cm_propagate_element(&kp, i, pos, pos_prev, flags, t_reach, clock, np, &nt);
    if (st & CM_PROP_MOVED) {
        pos_out[i * 3 + 0] = np[0];
        pos_out[i * 3 + 1] = np[1];
        pos_out[i * 3 + 2] = np[2];
        if (t_reach[i] >= CM_UNREACHED)
            atomicAdd(&c->newly, 1ull);
    } else {
        pos_out[i * 3 + 0] = pos[i * 3 + 0];
        pos_out[i * 3 + 1] = pos[i * 3 + 1];
        pos_out[i * 3 + 2] = pos[i * 3 + 2];
    }
    t_out[i] = nt;
    if (st)
        atomicAdd(&c->active, 1ull);
}

__global__ void k_violation(cm_kparams kp, int64_t n, const float *pos, const uint8_t *flags,
                            const float *t_reach, counters *c)
{
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n || t_reach[i] >= CM_UNREACHED)
        return;
    int x, y, z;
    cm_coords(&kp, i, &x, &y, &z);
    float worst = 0.0f;
    for (int d = 0; d < 6; d++) {
        int64_t j = cm_neighbour(&kp, x, y, z, d);
        if (j >= 0)
            worst = cm_maxf(worst, cm_link_violation(&kp, i, j, d, pos, flags));
    }
    if (worst > 0.0f)
        atomicMax(&c->max_viol_bits, __float_as_uint(worst));
}

/* One relaxation phase (cm_relax_phase), in place: an element reads no other element of
 * its own phase, and only those are written in this launch. */
__global__ void k_relax(cm_kparams kp, int64_t n, float *pos, const uint8_t *flags, int phase,
                        int pull, counters *c)
{
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n || cm_relax_phase(&kp, i, flags) != phase)
        return;
    float np[3];
    if (cm_relax_element(&kp, i, pos, flags, pull, np)) {
        pos[i * 3 + 0] = np[0];
        pos[i * 3 + 1] = np[1];
        pos[i * 3 + 2] = np[2];
        atomicAdd(&c->moved, 1ull);
    }
}

__global__ void k_rigid_return(cm_kparams kp, int64_t n, float *pos, const uint8_t *flags,
                               float *t_reach, counters *c)
{
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    float np[3];
    if (cm_rigid_return_element(&kp, i, pos, flags, np)) {
        pos[i * 3 + 0] = np[0];
        pos[i * 3 + 1] = np[1];
        pos[i * 3 + 2] = np[2];
        t_reach[i] = 0.0f; /* a seed of this frame's wave */
        atomicAdd(&c->stepped, 1ull);
    }
}

__global__ void k_inertia(cm_kparams kp, int64_t n, float *pos, float *pos_prev, const float *vel,
                          const uint8_t *flags)
{
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        cm_inertia_element(&kp, i, pos, pos_prev, vel, flags);
}

__global__ void k_velocity(cm_kparams kp, int64_t n, float *pos, float *pos_prev, float *vel,
                           const uint8_t *flags, counters *c)
{
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    cm_vel_out o = cm_velocity_element(&kp, i, pos, pos_prev, vel, flags);
    if (o.speed > 0.0f) {
        atomicAdd(&c->nvel, 1ull);
        atomicAdd(&c->kinetic, (double)o.speed * (double)o.speed);
        atomicAdd(&c->speed[flags[i] & CM_CLASS_MASK], (double)o.speed);
    }
    if (!(o.disp < CM_UNREACHED && o.speed < CM_UNREACHED))
        atomicAdd(&c->nonfinite, 1ull); /* NaN or infinite: comparisons with NaN fail */
    else if (o.disp > 0.0f)
        atomicMax(&c->max_disp_bits, __float_as_uint(o.disp));
}

vol_cuda *dev_of(sim_volume_state *s)
{
    return (vol_cuda *)s->dev;
}

void cuda_fini(sim_volume_state *s)
{
    vol_cuda *d = dev_of(s);
    if (!d)
        return;
    cudaFree(d->pos);
    cudaFree(d->pos_alt);
    cudaFree(d->pos_prev);
    cudaFree(d->vel);
    cudaFree(d->t_reach);
    cudaFree(d->t_alt);
    cudaFree(d->flags);
    cudaFree(d->grab_idx);
    cudaFree(d->grab_pos);
    cudaFree(d->ctr);
    cudaFreeHost(d->h_ctr);
    cudaFreeHost(d->h_stage);
    cudaFreeHost(d->h_stage_idx);
    free(d);
    s->dev = NULL;
}

sim_status cuda_init(sim_volume_state *s, char *err, size_t err_sz)
{
    vol_cuda *d = (vol_cuda *)sc_calloc(1, sizeof *d);
    if (!d)
        return (sim_status)sc_fail(err, err_sz, SIM_ERR_NOMEM, "cuda: out of memory");
    s->dev = d;
    size_t n = (size_t)s->nelem;
    cudaError_t e = cudaSetDevice(0);
    if (e == cudaSuccess)
        e = cudaMalloc(&d->pos, n * 3 * sizeof(float));
    if (e == cudaSuccess)
        e = cudaMalloc(&d->pos_alt, n * 3 * sizeof(float));
    if (e == cudaSuccess)
        e = cudaMalloc(&d->pos_prev, n * 3 * sizeof(float));
    if (e == cudaSuccess)
        e = cudaMalloc(&d->vel, n * 3 * sizeof(float));
    if (e == cudaSuccess)
        e = cudaMalloc(&d->t_reach, n * sizeof(float));
    if (e == cudaSuccess)
        e = cudaMalloc(&d->t_alt, n * sizeof(float));
    if (e == cudaSuccess)
        e = cudaMalloc(&d->flags, n);
    if (e == cudaSuccess)
        e = cudaMalloc(&d->grab_idx, VOL_MAX_GRAB * sizeof(uint32_t));
    if (e == cudaSuccess)
        e = cudaMalloc(&d->grab_pos, VOL_MAX_GRAB * 3 * sizeof(float));
    if (e == cudaSuccess)
        e = cudaMalloc(&d->ctr, sizeof(counters));
    if (e == cudaSuccess)
        e = cudaMallocHost(&d->h_ctr, sizeof(counters));
    if (e == cudaSuccess)
        e = cudaMallocHost(&d->h_stage, VOL_MAX_GRAB * 3 * sizeof(float));
    if (e == cudaSuccess)
        e = cudaMallocHost(&d->h_stage_idx, VOL_MAX_GRAB * sizeof(uint32_t));
    if (e != cudaSuccess) {
        cuda_fini(s);
        return cuda_fail(err, err_sz, e, "allocating the volume state");
    }
    return SIM_OK;
}

sim_status cuda_upload_all(sim_volume_state *s, char *err, size_t err_sz)
{
    vol_cuda *d = dev_of(s);
    size_t n = (size_t)s->nelem;
    CU(cudaMemcpy(d->pos, s->pos, n * 3 * sizeof(float), cudaMemcpyHostToDevice),
       "upload positions");
    /* Between frames X- equals X on every backend. */
    CU(cudaMemcpy(d->pos_prev, d->pos, n * 3 * sizeof(float), cudaMemcpyDeviceToDevice), "copy X-");
    CU(cudaMemcpy(d->vel, s->vel, n * 3 * sizeof(float), cudaMemcpyHostToDevice),
       "upload velocities");
    CU(cudaMemcpy(d->flags, s->flags, n, cudaMemcpyHostToDevice), "upload flags");
    k_fill<<<grid_for(s->nelem), kThreads>>>(d->t_reach, CM_UNREACHED, s->nelem);
    CU(cudaGetLastError(), "fill t_reach");
    d->rigid_maybe = 1;
    s->host_valid = 1;
    return SIM_OK;
}

sim_status cuda_sync_grab(sim_volume_state *s, const uint32_t *old_idx, int nold, char *err,
                          size_t err_sz)
{
    vol_cuda *d = dev_of(s);
    (void)nold;
    if (old_idx) {
        /* A grab or release changed the grab bits (a move does not). */
        CU(cudaMemcpy(d->flags, s->flags, (size_t)s->nelem, cudaMemcpyHostToDevice),
           "upload flags");
    }
    if (s->ngrab == 0)
        return SIM_OK;
    for (int g = 0; g < s->ngrab; g++) {
        d->h_stage_idx[g] = s->grab_idx[g];
        memcpy(&d->h_stage[g * 3], &s->pos[(size_t)s->grab_idx[g] * 3], 3 * sizeof(float));
    }
    CU(cudaMemcpy(d->grab_idx, d->h_stage_idx, (size_t)s->ngrab * sizeof(uint32_t),
                  cudaMemcpyHostToDevice),
       "upload grab");
    CU(cudaMemcpy(d->grab_pos, d->h_stage, (size_t)s->ngrab * 3 * sizeof(float),
                  cudaMemcpyHostToDevice),
       "upload grab positions");
    k_seed<<<grid_for(s->ngrab), kThreads>>>(d->grab_idx, d->grab_pos, s->ngrab, d->pos, NULL);
    CU(cudaGetLastError(), "scatter grab positions");
    return SIM_OK;
}

/* The probe's positions (grab_idx on the device holds the last grab's indices, which
 * the probe is) into the pinned staging buffer, then to the host: nprobe x 12 bytes. */
__global__ void k_gather(const uint32_t *idx, int n, const float *pos, float *out)
{
    int g = blockIdx.x * blockDim.x + threadIdx.x;
    if (g >= n)
        return;
    uint32_t i = idx[g];
    out[g * 3 + 0] = pos[(size_t)i * 3 + 0];
    out[g * 3 + 1] = pos[(size_t)i * 3 + 1];
    out[g * 3 + 2] = pos[(size_t)i * 3 + 2];
}

sim_status cuda_probe(sim_volume_state *s, char *err, size_t err_sz)
{
    if (s->nprobe == 0)
        return SIM_OK;
    if (s->host_valid) {
        for (int g = 0; g < s->nprobe; g++)
            memcpy(&s->probe_pos[g * 3], &s->pos[(size_t)s->grab_idx[g] * 3], 3 * sizeof(float));
        return SIM_OK;
    }
    vol_cuda *d = dev_of(s);
    /* grab_pos is free between frames: the next move uploads it again. */
    k_gather<<<grid_for(s->nprobe), kThreads>>>(d->grab_idx, s->nprobe, d->pos, d->grab_pos);
    CU(cudaGetLastError(), "gather probe");
    CU(cudaMemcpy(s->probe_pos, d->grab_pos, (size_t)s->nprobe * 3 * sizeof(float),
                  cudaMemcpyDeviceToHost),
       "download probe");
    return SIM_OK;
}

sim_status read_counters(vol_cuda *d, char *err, size_t err_sz)
{
    CU(cudaMemcpy(d->h_ctr, d->ctr, sizeof(counters), cudaMemcpyDeviceToHost), "read counters");
    return SIM_OK;
}

template <typename T> void swap_ptr(T *&a, T *&b)
{
    T *t = a;
    a = b;
    b = t;
}

/* The propagation wave of a frame, from the seeded grab or the rigid tissue that went
 * home: passes until nothing moves or max_passes, then the violation it left. */
sim_status cuda_wave(sim_volume_state *s, vol_cuda *d, const cm_kparams &kp, unsigned grid,
                     sim_volume_metrics *mt, char *err, size_t err_sz)
{
    int64_t n = s->nelem;
    d->rigid_maybe = 1;
    CU(cudaMemset(d->ctr, 0, sizeof(counters)), "clear counters");
    /* Passes run in batches between read-backs of the counter: a pass after the wave
     * has stopped (nothing moved or waiting) changes nothing, so up to
     * kPassBatch - 1 spare passes cost time, never results. */
    int passes = 0;
    unsigned long long active = 1, newly = 0;
    while (active && passes < s->params.max_passes) {
        int batch =
            s->params.max_passes - passes < kPassBatch ? s->params.max_passes - passes : kPassBatch;
        for (int k = 0; k < batch; k++) {
            CU(cudaMemsetAsync(&d->ctr->active, 0, sizeof(unsigned long long)),
               "clear pass counter");
            k_propagate<<<grid, kThreads>>>(kp, n, d->pos, d->pos_alt, d->pos_prev, d->flags,
                                            d->t_reach, d->t_alt, (float)(passes + 1), d->ctr);
            CU(cudaGetLastError(), "propagate");
            swap_ptr(d->pos, d->pos_alt);
            swap_ptr(d->t_reach, d->t_alt);
            passes++;
        }
        sim_status st = read_counters(d, err, err_sz);
        if (st != SIM_OK)
            return st;
        active = d->h_ctr->active; /* of the batch's last pass */
        newly = d->h_ctr->newly;
        if (s->params.max_wave > 0 && newly >= (unsigned long long)s->params.max_wave)
            break; /* the frame's budget (the CPU stops at the same boundary) */
    }
    k_violation<<<grid, kThreads>>>(kp, n, d->pos, d->flags, d->t_reach, d->ctr);
    CU(cudaGetLastError(), "violation");
    k_fill<<<grid, kThreads>>>(d->t_reach, CM_UNREACHED, n);
    CU(cudaGetLastError(), "reset wave");
    sim_status st = read_counters(d, err, err_sz);
    if (st != SIM_OK)
        return st;
    float viol;
    memcpy(&viol, &d->h_ctr->max_viol_bits, sizeof viol);
    mt->passes = passes;
    mt->propagation_capped = active > 0;
    mt->max_violation = viol;
    /* The grabbed elements were seeded as reached: count only what the wave moved. */
    mt->moved_elements = (int64_t)newly;
    return SIM_OK;
}

sim_status cuda_frame(sim_volume_state *s, const vol_frame_in *in, sim_volume_metrics *mt,
                      char *err, size_t err_sz)
{
    vol_cuda *d = dev_of(s);
    const cm_kparams kp = s->kp;
    int64_t n = s->nelem;
    unsigned grid = grid_for(n);
    s->host_valid = 0;
    double t0 = sc_now_ms();
    k_inertia<<<grid, kThreads>>>(kp, n, d->pos, d->pos_prev, d->vel, d->flags);
    CU(cudaGetLastError(), "inertia");
    unsigned long long stepped = 0;
    if (kp.rigid_free && d->rigid_maybe) {
        CU(cudaMemset(d->ctr, 0, sizeof(counters)), "clear counters");
        k_rigid_return<<<grid, kThreads>>>(kp, n, d->pos, d->flags, d->t_reach, d->ctr);
        CU(cudaGetLastError(), "rigid return");
        sim_status st = read_counters(d, err, err_sz);
        if (st != SIM_OK)
            return st;
        stepped = d->h_ctr->stepped;
        d->rigid_maybe = stepped > 0;
    }
    int seed_grab = in->deform && s->ngrab > 0;
    if (seed_grab || stepped > 0) {
        if (seed_grab) {
            k_seed<<<grid_for(s->ngrab), kThreads>>>(d->grab_idx, d->grab_pos, s->ngrab, d->pos,
                                                     d->t_reach);
            CU(cudaGetLastError(), "seed wave");
        }
        sim_status st = cuda_wave(s, d, kp, grid, mt, err, err_sz);
        if (st != SIM_OK)
            return st;
    }
    double t1 = sc_now_ms();
    /* Every iteration runs without a read-back: once relaxation has converged an
     * iteration moves nothing, so the counter after the last one says whether it had. */
    unsigned long long last_moved = 0;
    int iters = s->params.relax_iterations;
    for (int it = 0; iters > 0 && it < iters + CM_REPAIR_ITERATIONS; it++) {
        CU(cudaMemsetAsync(&d->ctr->moved, 0, sizeof(unsigned long long)), "clear relax counter");
        for (int phase = 0; phase < CM_RELAX_PHASES; phase++) {
            k_relax<<<grid, kThreads>>>(kp, n, d->pos, d->flags, phase, it < iters, d->ctr);
            CU(cudaGetLastError(), "relax");
        }
        mt->relax_evaluations += s->nelem; /* every element once an iteration */
        if (it + 1 >= iters) {
            /* The repair iterations stop once one moved nothing (every band held), as the
             * CPU's do; running on would change nothing. The volume is at rest when the
             * last elastic iteration moved nothing either. */
            sim_status st = read_counters(d, err, err_sz);
            if (st != SIM_OK)
                return st;
            last_moved |= d->h_ctr->moved;
            if (!d->h_ctr->moved)
                break;
        }
    }
    double t2 = sc_now_ms();
    CU(cudaMemset(d->ctr, 0, sizeof(counters)), "clear counters");
    k_velocity<<<grid, kThreads>>>(kp, n, d->pos, d->pos_prev, d->vel, d->flags, d->ctr);
    CU(cudaGetLastError(), "velocity");
    sim_status st = read_counters(d, err, err_sz);
    if (st != SIM_OK)
        return st;
    const counters *c = d->h_ctr;
    memcpy(&mt->max_displacement, &c->max_disp_bits, sizeof(float));
    mt->kinetic = c->kinetic;
    mt->nonfinite = (int64_t)c->nonfinite;
    for (int k = 0; k < SIM_NTISSUE; k++)
        mt->mean_speed[k] =
            s->class_count[k] ? (float)(c->speed[k] / (double)s->class_count[k]) : 0.0f;
    s->settled = !last_moved && !c->nvel && !stepped;
    double t3 = sc_now_ms();
    mt->propagate_ms = t1 - t0;
    mt->relax_ms = t2 - t1;
    mt->velocity_ms = t3 - t2;
    return SIM_OK;
}

sim_status cuda_download(sim_volume_state *s, char *err, size_t err_sz)
{
    if (s->host_valid)
        return SIM_OK;
    vol_cuda *d = dev_of(s);
    size_t n = (size_t)s->nelem;
    CU(cudaMemcpy(s->pos, d->pos, n * 3 * sizeof(float), cudaMemcpyDeviceToHost),
       "download positions");
    CU(cudaMemcpy(s->vel, d->vel, n * 3 * sizeof(float), cudaMemcpyDeviceToHost),
       "download velocities");
    memcpy(s->pos_prev, s->pos, n * 3 * sizeof(float));
    s->host_valid = 1;
    vol_stamp_all(s); /* which blocks moved stays on the device: the surfaces look at all */
    return SIM_OK;
}

} // namespace

extern "C" {

const sim_volume_backend_i vol_cuda_backend = {
    "cuda",         cuda_init,  cuda_fini,     cuda_upload_all,
    cuda_sync_grab, cuda_frame, cuda_download, cuda_probe,
};
}
