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
 * --fmad=false for parity with the CPU.
 *
 * A frame is always a batch (cuda_frame_many; one state is a batch of one): each launch
 * covers every state of the batch that takes part in it, each state's elements in blocks of
 * their own (a state's first block is found by a binary search of the launch's block list),
 * and each read-back brings every state's counters at once. So n sessions stepped together
 * cost one frame's launches and read-backs, not n frames'. Each state keeps its own schedule
 * of passes, iterations and read-back points, so a state steps bit for bit as alone. */
#include <cuda_runtime.h>
#include <pthread.h>
#include <string.h>

#include "volume_internal.h"

namespace
{

const int kThreads = 256;
const int kPassBatch = VOL_PASS_BATCH; /* propagation passes between read-backs */

/* One state's counters within a frame (a batch holds one per state). */
struct counters {
    unsigned long long newly;     /* propagation: elements reached for the first time */
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
    float *h_stage;  /* pinned staging for grabbed positions */
    int rigid_maybe; /* a wave ran since rigid tissue was last found home: look again */
    uint32_t *h_stage_idx;
    /* The wave's candidates, as the CPU's lists (sim/README.md): an element is evaluated in
     * a pass only when stamped with that pass's number, ping-pong like X. A move stamps the
     * mover's neighbours for the next pass, a wait the waiter: the CPU never looks again at
     * an element because it moved itself, and evaluated again it may move again (its own
     * move changes which neighbours lead it), so every element evaluated every pass gave
     * another wave than the CPU's, in condition B one that swung to the pass cap. Numbers
     * only grow (cand_base reserves a frame's range), so old stamps never match. */
    uint32_t *cand[2];
    uint32_t cand_base;
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

/* ------------------------------------------------------------ batch kernels */

/* One state of a batch as its kernels see it: fixed for the frame. */
struct sess_dev {
    cm_kparams kp;
    float *pos[2], *t[2]; /* X and wave times, ping-pong: run.par says which is current */
    float *pos_prev, *vel;
    uint32_t *cand[2]; /* the wave's candidates (vol_cuda), with the parity of pos */
    const uint8_t *flags;
    const uint32_t *grab_idx;
    const float *grab_pos;
    int ngrab;
    int64_t n;
};

/* What changes within the frame, uploaded at the read-backs. */
struct sess_run {
    int par;        /* pos[par], t[par] are current */
    int passes0;    /* wave passes run before this pass batch */
    int pass_limit; /* passes this state runs in this pass batch (its own schedule) */
    int iters;      /* relax_iterations */
    uint32_t cand0; /* pass p's candidates are stamped cand0 + p */
};

/* The states a launch covers: state sid[k]'s blocks start at blk0[k]; blk0[m] is the grid. */
struct blist {
    const int *sid;
    const int64_t *blk0;
    int m;
};

struct bargs {
    const sess_dev *desc;
    const sess_run *run;
    counters *ctr;             /* one per state */
    unsigned long long *act;   /* propagation: [pass k of the batch][state] moved or waiting */
    unsigned long long *moved; /* relaxation: per state, this iteration */
    int n;                     /* states in the batch */
};

/* The list slot of block b: the last k with blk0[k] <= b (blk0 ascends). */
__device__ int slot_of_block(const blist &L, int64_t b)
{
    int lo = 0, hi = L.m - 1;
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if (L.blk0[mid] <= b)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

/* This thread's state s, its descriptor D, its run R and its element i (returns when past
 * the state's last element). */
#define BATCH_ELEMENT(L, A)                                                       \
    int slot_ = slot_of_block(L, blockIdx.x);                                     \
    int s = L.sid[slot_];                                                         \
    const sess_dev &D = A.desc[s];                                                \
    const sess_run &R = A.run[s];                                                 \
    int64_t i = (int64_t)(blockIdx.x - L.blk0[slot_]) * blockDim.x + threadIdx.x; \
    if (i >= D.n)                                                                 \
        return;

__global__ void k_inertia(blist L, bargs A)
{
    BATCH_ELEMENT(L, A)
    cm_inertia_element(&D.kp, i, D.pos[R.par], D.pos_prev, D.vel, D.flags);
}

__global__ void k_rigid_return(blist L, bargs A)
{
    BATCH_ELEMENT(L, A)
    float np[3], *pos = D.pos[R.par];
    if (cm_rigid_return_element(&D.kp, i, pos, D.flags, np)) {
        pos[i * 3 + 0] = np[0];
        pos[i * 3 + 1] = np[1];
        pos[i * 3 + 2] = np[2];
        D.t[R.par][i] = 0.0f; /* a seed of this frame's wave */
        atomicAdd(&A.ctr[s].stepped, 1ull);
    }
}

/* The grabbed elements at the hand, reached at time 0: blockIdx.y is the list slot. */
__global__ void k_seed_grab(blist L, bargs A)
{
    int s = L.sid[blockIdx.y];
    const sess_dev &D = A.desc[s];
    const sess_run &R = A.run[s];
    int g = blockIdx.x * blockDim.x + threadIdx.x;
    if (g >= D.ngrab)
        return;
    uint32_t i = D.grab_idx[g];
    float *pos = D.pos[R.par];
    pos[(size_t)i * 3 + 0] = D.grab_pos[g * 3 + 0];
    pos[(size_t)i * 3 + 1] = D.grab_pos[g * 3 + 1];
    pos[(size_t)i * 3 + 2] = D.grab_pos[g * 3 + 2];
    D.t[R.par][i] = 0.0f;
}

/* Element i's neighbours that are not grabbed become candidates: stamped `stamp`. */
__device__ void stamp_neighbours(const sess_dev &D, int64_t i, uint32_t *cand, uint32_t stamp)
{
    int x, y, z;
    cm_coords(&D.kp, i, &x, &y, &z);
    for (int d = 0; d < 6; d++) {
        int64_t j = cm_neighbour(&D.kp, x, y, z, d);
        if (j >= 0 && !(D.flags[j] & CM_FLAG_GRABBED))
            cand[j] = stamp;
    }
}

/* The first pass's candidates: the neighbours of the wave's seeds (reached at the frame's
 * start: the grabbed set at the hand, the rigid tissue that stepped home). */
__global__ void k_seed_frontier(blist L, bargs A)
{
    BATCH_ELEMENT(L, A)
    if (D.t[R.par][i] < CM_UNREACHED)
        stamp_neighbours(D, i, D.cand[R.par], R.cand0 + 1u);
}

/* Pass k of a pass batch (Jacobi: from one buffer into the other), on its candidates. */
__global__ void k_propagate(blist L, bargs A, int k)
{
    BATCH_ELEMENT(L, A)
    if (k >= R.pass_limit)
        return;
    int src = (R.par + k) & 1;
    const float *pos = D.pos[src], *t_reach = D.t[src];
    float *pos_out = D.pos[src ^ 1], *t_out = D.t[src ^ 1];
    uint32_t stamp = R.cand0 + (uint32_t)(R.passes0 + k + 1);
    float np[3], nt = t_reach[i];
    int st = D.cand[src][i] != stamp
                 ? 0 /* not a candidate: carried over as it is */
                 : cm_propagate_element(&D.kp, i, pos, D.pos_prev, D.flags, t_reach,
                                        (float)(R.passes0 + k + 1), np, &nt);
    if (st & CM_PROP_WAITING)
        D.cand[src ^ 1][i] = stamp + 1u;
    if (st & CM_PROP_MOVED) {
        stamp_neighbours(D, i, D.cand[src ^ 1], stamp + 1u);
        pos_out[i * 3 + 0] = np[0];
        pos_out[i * 3 + 1] = np[1];
        pos_out[i * 3 + 2] = np[2];
        if (t_reach[i] >= CM_UNREACHED)
            atomicAdd(&A.ctr[s].newly, 1ull);
    } else {
        pos_out[i * 3 + 0] = pos[i * 3 + 0];
        pos_out[i * 3 + 1] = pos[i * 3 + 1];
        pos_out[i * 3 + 2] = pos[i * 3 + 2];
    }
    t_out[i] = nt;
    if (st)
        atomicAdd(&A.act[(int64_t)k * A.n + s], 1ull);
}

__global__ void k_violation(blist L, bargs A)
{
    BATCH_ELEMENT(L, A)
    const float *pos = D.pos[R.par];
    if (D.t[R.par][i] >= CM_UNREACHED)
        return;
    int x, y, z;
    cm_coords(&D.kp, i, &x, &y, &z);
    float worst = 0.0f;
    for (int d = 0; d < 6; d++) {
        int64_t j = cm_neighbour(&D.kp, x, y, z, d);
        if (j >= 0)
            worst = cm_maxf(worst, cm_link_violation(&D.kp, i, j, d, pos, D.flags));
    }
    if (worst > 0.0f)
        atomicMax(&A.ctr[s].max_viol_bits, __float_as_uint(worst));
}

__global__ void k_unreach(blist L, bargs A)
{
    BATCH_ELEMENT(L, A)
    D.t[R.par][i] = CM_UNREACHED;
}

/* One relaxation phase (cm_relax_phase) of iteration it, in place: an element reads no other
 * element of its own phase, and only those are written in this launch. */
__global__ void k_relax(blist L, bargs A, int phase, int it)
{
    BATCH_ELEMENT(L, A)
    if (cm_relax_phase(&D.kp, i, D.flags) != phase)
        return;
    float np[3], *pos = D.pos[R.par];
    if (cm_relax_element(&D.kp, i, pos, D.flags, it < R.iters, np)) {
        pos[i * 3 + 0] = np[0];
        pos[i * 3 + 1] = np[1];
        pos[i * 3 + 2] = np[2];
        atomicAdd(&A.moved[s], 1ull);
    }
}

__global__ void k_velocity(blist L, bargs A)
{
    BATCH_ELEMENT(L, A)
    counters *c = &A.ctr[s];
    cm_vel_out o = cm_velocity_element(&D.kp, i, D.pos[R.par], D.pos_prev, D.vel, D.flags);
    if (o.speed > 0.0f) {
        atomicAdd(&c->nvel, 1ull);
        atomicAdd(&c->kinetic, (double)o.speed * (double)o.speed);
        atomicAdd(&c->speed[D.flags[i] & CM_CLASS_MASK], (double)o.speed);
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
    cudaFree(d->cand[0]);
    cudaFree(d->cand[1]);
    cudaFree(d->flags);
    cudaFree(d->grab_idx);
    cudaFree(d->grab_pos);
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
    for (int k = 0; k < 2 && e == cudaSuccess; k++) {
        e = cudaMalloc(&d->cand[k], n * sizeof(uint32_t));
        if (e == cudaSuccess)
            e = cudaMemset(d->cand[k], 0, n * sizeof(uint32_t));
    }
    if (e == cudaSuccess)
        e = cudaMalloc(&d->flags, n);
    if (e == cudaSuccess)
        e = cudaMalloc(&d->grab_idx, VOL_MAX_GRAB * sizeof(uint32_t));
    if (e == cudaSuccess)
        e = cudaMalloc(&d->grab_pos, VOL_MAX_GRAB * 3 * sizeof(float));
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
    /* X- as the host has it: between frames it equals X, but a move applied before a
     * parameter change in the same step has moved X alone (copied from X, the grabbed
     * elements had no displacement left and the frame's wave moved nothing). */
    CU(cudaMemcpy(d->pos_prev, s->pos_prev, n * 3 * sizeof(float), cudaMemcpyHostToDevice),
       "upload X-");
    CU(cudaMemcpy(d->vel, s->vel, n * 3 * sizeof(float), cudaMemcpyHostToDevice),
       "upload velocities");
    CU(cudaMemcpy(d->flags, s->flags, n, cudaMemcpyHostToDevice), "upload flags");
    k_fill<<<grid_for(s->nelem), kThreads>>>(d->t_reach, CM_UNREACHED, s->nelem);
    CU(cudaGetLastError(), "fill t_reach");
    /* The grab's and the probe's elements (the probe reads grab_idx on the device): a
     * restored state may hold either, and its next step may bring no move that uploads
     * them; fresh device memory there made the probe read elements at random. */
    int nidx = s->ngrab > s->nprobe ? s->ngrab : s->nprobe;
    if (nidx > 0)
        CU(cudaMemcpy(d->grab_idx, s->grab_idx, (size_t)nidx * sizeof(uint32_t),
                      cudaMemcpyHostToDevice),
           "upload grab indices");
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

/* ------------------------------------------------------------ batch driver */

template <typename T> void swap_ptr(T *&a, T *&b)
{
    T *t = a;
    a = b;
    b = t;
}

enum { L_ALL, L_RIGID, L_SEED, L_WAVE, L_RELAX, L_COUNT };

/* The batch's buffers, grown to the largest batch yet and kept (allocating per frame would
 * cost more than the frame). One batch runs at a time: the device runs one anyway. */
struct batch_ctx {
    int cap;
    sess_dev *h_desc, *desc;
    sess_run *h_run, *run;
    counters *h_ctr, *ctr;
    unsigned long long *h_act, *act; /* kPassBatch x cap */
    unsigned long long *h_moved, *moved;
    int *h_sid, *sid;       /* L_COUNT lists of cap */
    int64_t *h_blk0, *blk0; /* L_COUNT lists of cap + 1 */
    int m[L_COUNT];
};

pthread_mutex_t g_batch_lock = PTHREAD_MUTEX_INITIALIZER;
batch_ctx g_batch;

void batch_free(batch_ctx *b)
{
    cudaFreeHost(b->h_desc), cudaFree(b->desc), cudaFreeHost(b->h_run), cudaFree(b->run);
    cudaFreeHost(b->h_ctr), cudaFree(b->ctr), cudaFreeHost(b->h_act), cudaFree(b->act);
    cudaFreeHost(b->h_moved), cudaFree(b->moved), cudaFreeHost(b->h_sid), cudaFree(b->sid);
    cudaFreeHost(b->h_blk0), cudaFree(b->blk0);
    memset(b, 0, sizeof *b);
}

template <typename T> cudaError_t alloc_pair(T **h, T **d, size_t n)
{
    cudaError_t e = cudaMallocHost(h, n * sizeof(T));
    return e == cudaSuccess ? cudaMalloc(d, n * sizeof(T)) : e;
}

sim_status batch_reserve(batch_ctx *b, int n, char *err, size_t err_sz)
{
    if (n <= b->cap)
        return SIM_OK;
    batch_free(b);
    int cap = 1;
    while (cap < n)
        cap *= 2;
    size_t c = (size_t)cap;
    cudaError_t e = alloc_pair(&b->h_desc, &b->desc, c);
    if (e == cudaSuccess)
        e = alloc_pair(&b->h_run, &b->run, c);
    if (e == cudaSuccess)
        e = alloc_pair(&b->h_ctr, &b->ctr, c);
    if (e == cudaSuccess)
        e = alloc_pair(&b->h_act, &b->act, (size_t)kPassBatch * c);
    if (e == cudaSuccess)
        e = alloc_pair(&b->h_moved, &b->moved, c);
    if (e == cudaSuccess)
        e = alloc_pair(&b->h_sid, &b->sid, L_COUNT * c);
    if (e == cudaSuccess)
        e = alloc_pair(&b->h_blk0, &b->blk0, L_COUNT * (c + 1));
    if (e != cudaSuccess) {
        batch_free(b);
        return cuda_fail(err, err_sz, e, "allocating a batch");
    }
    b->cap = cap;
    return SIM_OK;
}

/* List l: the states whose in[] is set, their blocks in order, uploaded. */
sim_status set_list(batch_ctx *b, int l, const int *in, int n, char *err, size_t err_sz)
{
    int *sid = b->h_sid + (size_t)l * b->cap;
    int64_t *blk0 = b->h_blk0 + (size_t)l * (b->cap + 1), blocks = 0;
    int m = 0;
    for (int s = 0; s < n; s++)
        if (in[s]) {
            sid[m] = s;
            blk0[m++] = blocks;
            blocks += grid_for(b->h_desc[s].n);
        }
    blk0[m] = blocks;
    b->m[l] = m;
    if (m == 0)
        return SIM_OK;
    CU(cudaMemcpyAsync(b->sid + (size_t)l * b->cap, sid, (size_t)m * sizeof(int),
                       cudaMemcpyHostToDevice),
       "upload a launch list");
    CU(cudaMemcpyAsync(b->blk0 + (size_t)l * (b->cap + 1), blk0, (size_t)(m + 1) * sizeof(int64_t),
                       cudaMemcpyHostToDevice),
       "upload a launch list");
    return SIM_OK;
}

blist list_of(const batch_ctx *b, int l)
{
    blist L = {b->sid + (size_t)l * b->cap, b->blk0 + (size_t)l * (b->cap + 1), b->m[l]};
    return L;
}

unsigned list_grid(const batch_ctx *b, int l)
{
    return (unsigned)b->h_blk0[(size_t)l * (b->cap + 1) + b->m[l]];
}

sim_status upload_run(batch_ctx *b, int n, char *err, size_t err_sz)
{
    CU(cudaMemcpyAsync(b->run, b->h_run, (size_t)n * sizeof(sess_run), cudaMemcpyHostToDevice),
       "upload the batch's run");
    return SIM_OK;
}

/* Every state's counters, after the launches so far (a synchronising copy). */
sim_status read_counters(batch_ctx *b, int n, char *err, size_t err_sz)
{
    CU(cudaMemcpy(b->h_ctr, b->ctr, (size_t)n * sizeof(counters), cudaMemcpyDeviceToHost),
       "read counters");
    return SIM_OK;
}

sim_status clear_counters(batch_ctx *b, int n, char *err, size_t err_sz)
{
    CU(cudaMemsetAsync(b->ctr, 0, (size_t)n * sizeof(counters)), "clear counters");
    return SIM_OK;
}

#define TRY(call)                \
    do {                         \
        sim_status st_ = (call); \
        if (st_ != SIM_OK)       \
            return st_;          \
    } while (0)

#define LAUNCHED(what) CU(cudaGetLastError(), what)

/* The first pass's candidates of the states with a wave (every wave starts at parity 0, as
 * batch_describe left the runs). */
sim_status seed_frontier(batch_ctx *b, const int *wave, int n, char *err, size_t err_sz)
{
    TRY(set_list(b, L_WAVE, wave, n, err, err_sz));
    bargs A = {b->desc, b->run, b->ctr, b->act, b->moved, n};
    k_seed_frontier<<<list_grid(b, L_WAVE), kThreads>>>(list_of(b, L_WAVE), A);
    CU(cudaGetLastError(), "the wave's first candidates");
    return SIM_OK;
}

/* The propagation waves of the states in wave[]: from the seeded grabs or the rigid tissue
 * that went home, passes until nothing moves or max_passes, then the violation they left.
 * Each state runs its own pass batches (kPassBatch passes, fewer at its max_passes) and
 * stops where it would alone; those still running share every launch. */
sim_status batch_waves(batch_ctx *b, sim_volume_state *const *S, const int *wave, int n,
                       sim_volume_metrics *const *mt, char *err, size_t err_sz)
{
    int *live = (int *)calloc((size_t)n, sizeof(int));
    int *passes = (int *)calloc((size_t)n, sizeof(int));
    int *counted = (int *)calloc((size_t)n, sizeof(int)); /* passes as the CPU counts them */
    unsigned long long *active = (unsigned long long *)calloc((size_t)n, sizeof *active);
    if (!live || !passes || !counted || !active) {
        free(live), free(passes), free(counted), free(active);
        return (sim_status)sc_fail(err, err_sz, SIM_ERR_NOMEM, "cuda: out of memory");
    }
    sim_status st = clear_counters(b, n, err, err_sz);
    if (st == SIM_OK)
        st = seed_frontier(b, wave, n, err, err_sz);
    for (int s = 0; s < n; s++)
        if (wave[s]) {
            dev_of(S[s])->rigid_maybe = 1;
            active[s] = 1;
            live[s] = S[s]->params.max_passes > 0;
        }
    for (;;) {
        int any = 0, kmax = 0;
        for (int s = 0; s < n; s++)
            if (live[s]) {
                int left = S[s]->params.max_passes - passes[s];
                b->h_run[s].pass_limit = left < kPassBatch ? left : kPassBatch;
                b->h_run[s].passes0 = passes[s];
                kmax = b->h_run[s].pass_limit > kmax ? b->h_run[s].pass_limit : kmax;
                any = 1;
            }
        if (!any || st != SIM_OK)
            break;
        st = set_list(b, L_WAVE, live, n, err, err_sz);
        if (st == SIM_OK)
            st = upload_run(b, n, err, err_sz);
        if (st != SIM_OK)
            break;
        cudaError_t e = cudaMemsetAsync(b->act, 0, (size_t)kmax * n * sizeof *b->act);
        if (e != cudaSuccess) {
            st = cuda_fail(err, err_sz, e, "clear pass counters");
            break;
        }
        bargs A = {b->desc, b->run, b->ctr, b->act, b->moved, n};
        for (int k = 0; k < kmax; k++)
            k_propagate<<<list_grid(b, L_WAVE), kThreads>>>(list_of(b, L_WAVE), A, k);
        e = cudaGetLastError();
        if (e == cudaSuccess)
            e = cudaMemcpy(b->h_act, b->act, (size_t)kmax * n * sizeof *b->act,
                           cudaMemcpyDeviceToHost);
        if (e != cudaSuccess) {
            st = cuda_fail(err, err_sz, e, "propagate");
            break;
        }
        st = read_counters(b, n, err, err_sz);
        for (int s = 0; s < n && st == SIM_OK; s++)
            if (live[s]) {
                int lim = b->h_run[s].pass_limit, ran = lim;
                /* As the CPU counts them: up to the first pass that moved nothing and left
                 * nothing waiting (the rest of the batch changed nothing). */
                for (int k = 0; k < lim; k++)
                    if (b->h_act[(size_t)k * n + s] == 0) {
                        ran = k + 1;
                        break;
                    }
                counted[s] = passes[s] + ran;
                passes[s] += lim;
                b->h_run[s].par = (b->h_run[s].par + lim) & 1;
                active[s] = b->h_act[(size_t)(lim - 1) * n + s]; /* of its batch's last pass */
                unsigned long long newly = b->h_ctr[s].newly;
                int64_t budget = S[s]->params.max_wave;
                live[s] = active[s] && passes[s] < S[s]->params.max_passes &&
                          !(budget > 0 && newly >= (unsigned long long)budget);
            }
    }
    if (st == SIM_OK)
        st = set_list(b, L_WAVE, wave, n, err, err_sz);
    if (st == SIM_OK)
        st = upload_run(b, n, err, err_sz);
    if (st == SIM_OK) {
        bargs A = {b->desc, b->run, b->ctr, b->act, b->moved, n};
        k_violation<<<list_grid(b, L_WAVE), kThreads>>>(list_of(b, L_WAVE), A);
        k_unreach<<<list_grid(b, L_WAVE), kThreads>>>(list_of(b, L_WAVE), A);
        cudaError_t e = cudaGetLastError();
        st = e == cudaSuccess ? read_counters(b, n, err, err_sz)
                              : cuda_fail(err, err_sz, e, "violation");
    }
    for (int s = 0; s < n && st == SIM_OK; s++)
        if (wave[s]) {
            float viol;
            memcpy(&viol, &b->h_ctr[s].max_viol_bits, sizeof viol);
            mt[s]->passes = counted[s];
            mt[s]->propagation_capped = active[s] > 0;
            mt[s]->max_violation = viol;
            /* The grabbed elements were seeded as reached: count only what the wave moved. */
            mt[s]->moved_elements = (int64_t)b->h_ctr[s].newly;
        }
    free(live), free(passes), free(counted), free(active);
    return st;
}

/* Relaxation of every state with iterations: each runs relax_iterations iterations, then up
 * to CM_REPAIR_ITERATIONS repair ones that stop once one moved nothing (every band held), as
 * the CPU's do. Its iterations share launches with the others still relaxing; its counter is
 * read back from its last elastic iteration on. last_moved[s]: what those iterations moved. */
sim_status batch_relax(batch_ctx *b, sim_volume_state *const *S, int n,
                       sim_volume_metrics *const *mt, unsigned long long *last_moved, char *err,
                       size_t err_sz)
{
    int *live = (int *)calloc((size_t)n, sizeof(int));
    int *listed = (int *)calloc((size_t)n, sizeof(int)); /* in L_RELAX as last uploaded */
    if (!live || !listed) {
        free(live), free(listed);
        return (sim_status)sc_fail(err, err_sz, SIM_ERR_NOMEM, "cuda: out of memory");
    }
    sim_status st = SIM_OK;
    for (int s = 0; s < n; s++)
        live[s] = S[s]->params.relax_iterations > 0;
    for (int it = 0; st == SIM_OK; it++) {
        int any = 0, read = 0, changed = 0;
        for (int s = 0; s < n; s++) {
            int iters = S[s]->params.relax_iterations;
            live[s] = live[s] && it < iters + CM_REPAIR_ITERATIONS;
            changed |= live[s] != listed[s]; /* stopped at a read-back, or past its cap */
            listed[s] = live[s];
            any |= live[s];
            read |= live[s] && it + 1 >= iters;
        }
        if (!any)
            break;
        /* The list changes only at a read-back (which waited for the last upload to be
         * read): its pinned staging is never rewritten under a copy in flight. */
        if (changed)
            st = set_list(b, L_RELAX, live, n, err, err_sz);
        if (st != SIM_OK)
            break;
        cudaError_t e = cudaMemsetAsync(b->moved, 0, (size_t)n * sizeof *b->moved);
        bargs A = {b->desc, b->run, b->ctr, b->act, b->moved, n};
        for (int phase = 0; phase < CM_RELAX_PHASES && e == cudaSuccess; phase++) {
            k_relax<<<list_grid(b, L_RELAX), kThreads>>>(list_of(b, L_RELAX), A, phase, it);
            e = cudaGetLastError();
        }
        if (e == cudaSuccess && read)
            e = cudaMemcpy(b->h_moved, b->moved, (size_t)n * sizeof *b->moved,
                           cudaMemcpyDeviceToHost);
        if (e != cudaSuccess) {
            st = cuda_fail(err, err_sz, e, "relax");
            break;
        }
        for (int s = 0; s < n; s++)
            if (live[s]) {
                mt[s]->relax_evaluations += S[s]->nelem; /* every element once an iteration */
                if (it + 1 >= S[s]->params.relax_iterations) {
                    last_moved[s] |= b->h_moved[s];
                    live[s] = b->h_moved[s] != 0;
                }
            }
    }
    free(live), free(listed);
    return st;
}

/* One batch frame's host side: the states, and per state what the steps found. */
struct bframe {
    batch_ctx *b;
    sim_volume_state *const *S;
    const vol_frame_in *in;
    sim_volume_metrics *const *mt;
    int n;
    bargs A;
    int *on, *wave;
    unsigned long long *stepped, *last_moved;
};

/* The states' descriptors and runs, uploaded. */
sim_status batch_describe(bframe *f, char *err, size_t err_sz)
{
    batch_ctx *b = f->b;
    for (int s = 0; s < f->n; s++) {
        sim_volume_state *st = f->S[s];
        vol_cuda *d = dev_of(st);
        sess_dev *D = &b->h_desc[s];
        D->kp = st->kp;
        D->pos[0] = d->pos, D->pos[1] = d->pos_alt;
        D->t[0] = d->t_reach, D->t[1] = d->t_alt;
        D->pos_prev = d->pos_prev, D->vel = d->vel, D->flags = d->flags;
        D->cand[0] = d->cand[0], D->cand[1] = d->cand[1];
        /* This frame's stamps: cand_base + 1 .. + max_passes + 1 (reserved whether or not a
         * wave runs); past 2^32, every stamp is cleared and the numbers start again. */
        uint64_t span = (uint64_t)(st->params.max_passes > 0 ? st->params.max_passes : 0) + 2;
        if ((uint64_t)d->cand_base + span > 0xffffffffull) {
            for (int k = 0; k < 2; k++)
                CU(cudaMemset(d->cand[k], 0, (size_t)st->nelem * sizeof(uint32_t)),
                   "clear the wave's candidates");
            d->cand_base = 0;
        }
        uint32_t cand0 = d->cand_base;
        d->cand_base += (uint32_t)span;
        D->grab_idx = d->grab_idx, D->grab_pos = d->grab_pos, D->ngrab = st->ngrab;
        D->n = st->nelem;
        sess_run R = {0, 0, 0, st->params.relax_iterations, cand0};
        b->h_run[s] = R;
        st->host_valid = 0;
        f->on[s] = 1;
    }
    CU(cudaMemcpyAsync(b->desc, b->h_desc, (size_t)f->n * sizeof(sess_dev), cudaMemcpyHostToDevice),
       "upload the batch");
    TRY(upload_run(b, f->n, err, err_sz));
    return set_list(b, L_ALL, f->on, f->n, err, err_sz);
}

/* Displaced rigid tissue goes home where nothing is grabbed and a wave may have left it. */
sim_status batch_rigid(bframe *f, char *err, size_t err_sz)
{
    batch_ctx *b = f->b;
    int any = 0;
    for (int s = 0; s < f->n; s++)
        any |= f->on[s] = f->S[s]->kp.rigid_free && dev_of(f->S[s])->rigid_maybe;
    if (!any)
        return SIM_OK;
    TRY(set_list(b, L_RIGID, f->on, f->n, err, err_sz));
    TRY(clear_counters(b, f->n, err, err_sz));
    k_rigid_return<<<list_grid(b, L_RIGID), kThreads>>>(list_of(b, L_RIGID), f->A);
    LAUNCHED("rigid return");
    TRY(read_counters(b, f->n, err, err_sz));
    for (int s = 0; s < f->n; s++)
        if (f->on[s]) {
            f->stepped[s] = b->h_ctr[s].stepped;
            dev_of(f->S[s])->rigid_maybe = f->stepped[s] > 0;
        }
    return SIM_OK;
}

/* The grabbed elements of the states that deform at the hand; wave[s]: s runs a wave (its
 * grab, or its rigid tissue that stepped home). Returns whether any does. */
sim_status batch_seed(bframe *f, int *any, char *err, size_t err_sz)
{
    batch_ctx *b = f->b;
    int max_grab = 0;
    *any = 0;
    for (int s = 0; s < f->n; s++) {
        f->on[s] = f->in[s].deform && f->S[s]->ngrab > 0;
        f->wave[s] = f->on[s] || f->stepped[s] > 0;
        *any |= f->wave[s];
        if (f->on[s] && f->S[s]->ngrab > max_grab)
            max_grab = f->S[s]->ngrab;
    }
    if (max_grab == 0)
        return SIM_OK;
    TRY(set_list(b, L_SEED, f->on, f->n, err, err_sz));
    dim3 grid(grid_for(max_grab), (unsigned)b->m[L_SEED]);
    k_seed_grab<<<grid, kThreads>>>(list_of(b, L_SEED), f->A);
    LAUNCHED("seed wave");
    return SIM_OK;
}

/* The velocity layer of every state, and each one's metrics from its counters. */
sim_status batch_velocity(bframe *f, char *err, size_t err_sz)
{
    batch_ctx *b = f->b;
    TRY(clear_counters(b, f->n, err, err_sz));
    k_velocity<<<list_grid(b, L_ALL), kThreads>>>(list_of(b, L_ALL), f->A);
    LAUNCHED("velocity");
    TRY(read_counters(b, f->n, err, err_sz));
    for (int s = 0; s < f->n; s++) {
        sim_volume_state *st = f->S[s];
        sim_volume_metrics *mt = f->mt[s];
        const counters *c = &b->h_ctr[s];
        memcpy(&mt->max_displacement, &c->max_disp_bits, sizeof(float));
        mt->kinetic = c->kinetic;
        mt->nonfinite = (int64_t)c->nonfinite;
        for (int k = 0; k < SIM_NTISSUE; k++)
            mt->mean_speed[k] =
                st->class_count[k] ? (float)(c->speed[k] / (double)st->class_count[k]) : 0.0f;
        st->settled = !f->last_moved[s] && !c->nvel && !f->stepped[s];
    }
    return SIM_OK;
}

/* A frame of the batch's states: inertia, rigid return, the waves, relaxation, velocity. */
sim_status batch_steps(bframe *f, double ms[4], char *err, size_t err_sz)
{
    batch_ctx *b = f->b;
    ms[0] = sc_now_ms();
    TRY(batch_describe(f, err, err_sz));
    k_inertia<<<list_grid(b, L_ALL), kThreads>>>(list_of(b, L_ALL), f->A);
    LAUNCHED("inertia");
    TRY(batch_rigid(f, err, err_sz));
    int any_wave;
    TRY(batch_seed(f, &any_wave, err, err_sz));
    if (any_wave)
        TRY(batch_waves(b, f->S, f->wave, f->n, f->mt, err, err_sz));
    ms[1] = sc_now_ms();
    TRY(upload_run(b, f->n, err, err_sz)); /* the parities the waves left */
    TRY(batch_relax(b, f->S, f->n, f->mt, f->last_moved, err, err_sz));
    ms[2] = sc_now_ms();
    TRY(batch_velocity(f, err, err_sz));
    ms[3] = sc_now_ms();
    return SIM_OK;
}

sim_status batch_frame(batch_ctx *b, sim_volume_state *const *S, const vol_frame_in *in,
                       sim_volume_metrics *const *mt, int n, char *err, size_t err_sz)
{
    TRY(batch_reserve(b, n, err, err_sz));
    for (int s = 0; s < n; s++)
        b->h_run[s].par = 0; /* read below even when the frame fails before describing them */
    bframe f = {b,    S,    in,   mt,  n, {b->desc, b->run, b->ctr, b->act, b->moved, n},
                NULL, NULL, NULL, NULL};
    f.on = (int *)calloc((size_t)n, sizeof(int));
    f.wave = (int *)calloc((size_t)n, sizeof(int));
    f.stepped = (unsigned long long *)calloc((size_t)n, sizeof *f.stepped);
    f.last_moved = (unsigned long long *)calloc((size_t)n, sizeof *f.last_moved);
    double ms[4] = {0, 0, 0, 0};
    sim_status st = !f.on || !f.wave || !f.stepped || !f.last_moved
                        ? (sim_status)sc_fail(err, err_sz, SIM_ERR_NOMEM, "cuda: out of memory")
                        : batch_steps(&f, ms, err, err_sz);
    for (int s = 0; s < n; s++) {
        vol_cuda *d = dev_of(S[s]);
        if (b->h_run[s].par) { /* the waves' current buffers become the state's own */
            swap_ptr(d->pos, d->pos_alt);
            swap_ptr(d->t_reach, d->t_alt);
        }
        mt[s]->propagate_ms = ms[1] - ms[0];
        mt[s]->relax_ms = ms[2] - ms[1];
        mt[s]->velocity_ms = ms[3] - ms[2];
    }
    free(f.on), free(f.wave), free(f.stepped), free(f.last_moved);
    return st;
}

/* Batches of at most kBatchMax states (k_seed_grab's grid.y holds a batch's grabbing states). */
const int kBatchMax = 4096;

sim_status cuda_frame_many(sim_volume_state *const *S, const vol_frame_in *in,
                           sim_volume_metrics *const *mt, int n, char *err, size_t err_sz)
{
    sim_status st = SIM_OK;
    pthread_mutex_lock(&g_batch_lock);
    for (int at = 0; at < n && st == SIM_OK; at += kBatchMax)
        st = batch_frame(&g_batch, S + at, in + at, mt + at,
                         n - at < kBatchMax ? n - at : kBatchMax, err, err_sz);
    pthread_mutex_unlock(&g_batch_lock);
    return st;
}

sim_status cuda_frame(sim_volume_state *s, const vol_frame_in *in, sim_volume_metrics *mt,
                      char *err, size_t err_sz)
{
    return cuda_frame_many(&s, in, &mt, 1, err, err_sz);
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
    /* X- too: equal to X between frames, not after a move applied this step. */
    CU(cudaMemcpy(s->pos_prev, d->pos_prev, n * 3 * sizeof(float), cudaMemcpyDeviceToHost),
       "download X-");
    s->host_valid = 1;
    vol_stamp_all(s); /* which blocks moved stays on the device: the surfaces look at all */
    return SIM_OK;
}

} // namespace

extern "C" {

const sim_volume_backend_i vol_cuda_backend = {
    "cuda",     cuda_init,       cuda_fini,     cuda_upload_all, cuda_sync_grab,
    cuda_frame, cuda_frame_many, cuda_download, cuda_probe,
};
}
