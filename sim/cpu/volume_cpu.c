/* volume_cpu.c: the volume scene on the CPU (OpenMP, thread count from the backend).
 *
 * The per-element math is sim/kernels/chainmail.h; this file only decides which
 * elements to visit, so that cost follows what moves, not the volume size:
 * - propagation visits a frontier list: the neighbours of elements moved in the last
 *   pass plus elements still waiting for a wave to arrive (per-tissue speed). Each pass
 *   computes every candidate from the old positions (Jacobi) in parallel, then applies the
 *   moves and builds the next list in one sequential sweep, so the result does not depend
 *   on the thread count.
 * - relaxation and the velocity layer visit 8^3 blocks in which something moved (and
 *   their face neighbours); a settled volume visits none.
 * Since the kernels are idempotent, visiting a subset gives bit-for-bit the result of
 * visiting everything, which is what the CUDA backend does per active block. */
#include <string.h>

#include "../volume/volume_internal.h"

static int64_t blk_id(const sim_volume_state *s, int bx, int by, int bz)
{
    return bx + (int64_t)s->bx * (by + (int64_t)s->by * bz);
}

static void enqueue(sim_volume_state *s, uint32_t i)
{
    if (s->cand_stamp[i] == s->pass_id || (s->flags[i] & CM_FLAG_GRABBED))
        return;
    s->cand_stamp[i] = s->pass_id;
    s->cand_next[s->ncand++] = i;
}

static void enqueue_neighbours(sim_volume_state *s, int64_t i)
{
    int x, y, z;
    cm_coords(&s->kp, i, &x, &y, &z);
    for (int d = 0; d < 6; d++) {
        int64_t j = cm_neighbour(&s->kp, x, y, z, d);
        if (j >= 0)
            enqueue(s, (uint32_t)j);
    }
}

static void swap_lists(sim_volume_state *s)
{
    uint32_t *t = s->cand;
    s->cand = s->cand_next;
    s->cand_next = t;
}

static void mark_reached(sim_volume_state *s, int64_t i, float t)
{
    if (s->t_reach[i] >= CM_UNREACHED)
        s->reached[s->nreached++] = (uint32_t)i;
    s->t_reach[i] = t;
}

/* One wave from the grabbed set: passes until nothing moves or max_passes. Returns the
 * elements it moved. The wave ends with the frame: a wave kept across frames would read
 * the velocity layer's inertial motion as deformation and feed it back (CHAINMAIL.md). */
static int64_t propagate(sim_volume_state *s, sim_volume_metrics *mt)
{
    const cm_kparams *kp = &s->kp;
    int64_t moved_count = 0;
    s->pass_id++;
    s->ncand = 0;
    s->clock = 0.0f;
    for (int g = 0; g < s->ngrab; g++)
        mark_reached(s, s->grab_idx[g], 0.0f);
    for (int g = 0; g < s->ngrab; g++)
        enqueue_neighbours(s, s->grab_idx[g]);
    swap_lists(s);
    int passes = 0;
    int nt = s->threads;
    (void)nt; /* unused when built without OpenMP */
    while (s->ncand > 0 && passes < s->params.max_passes) {
        s->clock += 1.0f;
        float clock = s->clock;
        int64_t n = s->ncand;
        const uint32_t *cand = s->cand;
#pragma omp parallel for num_threads(nt) schedule(static) if (n > 1024)
        for (int64_t k = 0; k < n; k++)
            s->scratch_status[k] = (uint8_t)cm_propagate_element(
                kp, cand[k], s->pos, s->pos_prev, s->flags, s->t_reach, clock,
                &s->scratch_pos[k * 3], &s->scratch_t[k]);
        s->pass_id++;
        s->ncand = 0;
        for (int64_t k = 0; k < n; k++) {
            int st = s->scratch_status[k];
            uint32_t i = cand[k];
            if (st & CM_PROP_MOVED) {
                memcpy(&s->pos[(size_t)i * 3], &s->scratch_pos[k * 3], 3 * sizeof(float));
                if (s->t_reach[i] >= CM_UNREACHED)
                    moved_count++;
                mark_reached(s, i, s->scratch_t[k]);
                s->blk_flags[vol_block_of(s, i)] |= BLK_DIRTY | BLK_TOUCHED;
                enqueue_neighbours(s, i);
            }
            if (st & CM_PROP_WAITING)
                enqueue(s, i);
        }
        swap_lists(s);
        passes++;
    }
    /* Largest violation on the links of what the wave moved. */
    float worst = 0.0f;
    for (int64_t r = 0; r < s->nreached; r++) {
        int64_t i = s->reached[r];
        int x, y, z;
        cm_coords(kp, i, &x, &y, &z);
        for (int d = 0; d < 6; d++) {
            int64_t j = cm_neighbour(kp, x, y, z, d);
            if (j >= 0)
                worst = cm_maxf(worst, cm_link_violation(kp, i, j, d, s->pos, s->flags));
        }
    }
    mt->passes = passes;
    mt->propagation_capped = s->ncand > 0;
    mt->max_violation = worst;
    for (int64_t r = 0; r < s->nreached; r++)
        s->t_reach[s->reached[r]] = CM_UNREACHED;
    s->nreached = 0;
    s->ncand = 0;
    return moved_count;
}

/* Set `to` on every block flagged `from` and on its six face neighbours. */
static void dilate(sim_volume_state *s, uint8_t from, uint8_t to)
{
    for (int bz = 0; bz < s->bz; bz++)
        for (int by = 0; by < s->by; by++)
            for (int bx = 0; bx < s->bx; bx++) {
                if (!(s->blk_flags[blk_id(s, bx, by, bz)] & from))
                    continue;
                s->blk_flags[blk_id(s, bx, by, bz)] |= to;
                if (bx > 0)
                    s->blk_flags[blk_id(s, bx - 1, by, bz)] |= to;
                if (bx + 1 < s->bx)
                    s->blk_flags[blk_id(s, bx + 1, by, bz)] |= to;
                if (by > 0)
                    s->blk_flags[blk_id(s, bx, by - 1, bz)] |= to;
                if (by + 1 < s->by)
                    s->blk_flags[blk_id(s, bx, by + 1, bz)] |= to;
                if (bz > 0)
                    s->blk_flags[blk_id(s, bx, by, bz - 1)] |= to;
                if (bz + 1 < s->bz)
                    s->blk_flags[blk_id(s, bx, by, bz + 1)] |= to;
            }
}

static int64_t list_blocks(sim_volume_state *s, uint8_t mask)
{
    int64_t n = 0;
    for (int64_t b = 0; b < s->nblocks; b++)
        if (s->blk_flags[b] & mask)
            s->blk_list[n++] = (uint32_t)b;
    return n;
}

/* Element range of block b: [x0,x1) x [y0,y1) x [z0,z1). */
static void block_range(const sim_volume_state *s, int64_t b, int r[6])
{
    int bx = (int)(b % s->bx), by = (int)((b / s->bx) % s->by),
        bz = (int)(b / ((int64_t)s->bx * s->by));
    r[0] = bx * VOL_BLOCK;
    r[1] = r[0] + VOL_BLOCK < s->kp.nx ? r[0] + VOL_BLOCK : s->kp.nx;
    r[2] = by * VOL_BLOCK;
    r[3] = r[2] + VOL_BLOCK < s->kp.ny ? r[2] + VOL_BLOCK : s->kp.ny;
    r[4] = bz * VOL_BLOCK;
    r[5] = r[4] + VOL_BLOCK < s->kp.nz ? r[4] + VOL_BLOCK : s->kp.nz;
}

#define FOR_BLOCK_ELEMENTS(s, r, i)                                                          \
    for (int z_ = (r)[4]; z_ < (r)[5]; z_++)                                                 \
        for (int y_ = (r)[2]; y_ < (r)[3]; y_++)                                             \
            for (int64_t i = (r)[0] + (int64_t)(s)->kp.nx * (y_ + (int64_t)(s)->kp.ny * z_), \
                         i##_end = i + ((r)[1] - (r)[0]);                                    \
                 i < i##_end; i++)

static int64_t relax(sim_volume_state *s)
{
    const cm_kparams *kp = &s->kp;
    int nt = s->threads;
    (void)nt; /* unused when built without OpenMP */
    int64_t visited = 0;
    if (s->params.relax_iterations == 0) {
        for (int64_t b = 0; b < s->nblocks; b++)
            s->blk_flags[b] &= (uint8_t)~BLK_DIRTY;
        return 0;
    }
    dilate(s, BLK_DIRTY, BLK_ACTIVE);
    for (int it = 0; it < s->params.relax_iterations; it++) {
        int64_t n = list_blocks(s, BLK_ACTIVE);
        if (n == 0)
            break;
        visited += n;
#pragma omp parallel for num_threads(nt) schedule(dynamic, 4)
        for (int64_t k = 0; k < n; k++) {
            int64_t b = s->blk_list[k];
            int r[6], moved = 0;
            block_range(s, b, r);
            FOR_BLOCK_ELEMENTS(s, r, i)
            {
                float *o = &s->relax_tmp[i * 3];
                if (cm_relax_element(kp, i, s->pos, s->flags, o))
                    moved = 1;
                else
                    memcpy(o, &s->pos[i * 3], 3 * sizeof(float));
            }
            s->blk_flags[b] = (uint8_t)((s->blk_flags[b] & ~(BLK_MOVED | BLK_ACTIVE | BLK_DIRTY)) |
                                        (moved ? BLK_MOVED : 0));
        }
#pragma omp parallel for num_threads(nt) schedule(static)
        for (int64_t k = 0; k < n; k++) {
            int64_t b = s->blk_list[k];
            if (!(s->blk_flags[b] & BLK_MOVED))
                continue;
            int r[6];
            block_range(s, b, r);
            FOR_BLOCK_ELEMENTS(s, r, i)
            {
                memcpy(&s->pos[i * 3], &s->relax_tmp[i * 3], 3 * sizeof(float));
            }
        }
        for (int64_t k = 0; k < n; k++)
            if (s->blk_flags[s->blk_list[k]] & BLK_MOVED)
                s->blk_flags[s->blk_list[k]] |= BLK_TOUCHED;
        dilate(s, BLK_MOVED, BLK_ACTIVE);
        for (int64_t b = 0; b < s->nblocks; b++)
            s->blk_flags[b] &= (uint8_t)~BLK_MOVED;
    }
    /* Blocks still active did not converge within the iteration cap: next frame. */
    for (int64_t b = 0; b < s->nblocks; b++)
        if (s->blk_flags[b] & BLK_ACTIVE)
            s->blk_flags[b] = (uint8_t)((s->blk_flags[b] & ~BLK_ACTIVE) | BLK_DIRTY);
    return visited;
}

static void velocity(sim_volume_state *s, sim_volume_metrics *mt)
{
    const cm_kparams *kp = &s->kp;
    int nt = s->threads;
    (void)nt; /* unused when built without OpenMP */
    int64_t n = list_blocks(s, BLK_TOUCHED | BLK_VEL);
#pragma omp parallel for num_threads(nt) schedule(dynamic, 4)
    for (int64_t k = 0; k < n; k++) {
        int64_t b = s->blk_list[k];
        int r[6], any_v = 0, moved = 0;
        int64_t bad = 0;
        double kin = 0.0, sp[SIM_NTISSUE] = {0.0, 0.0, 0.0, 0.0};
        float maxd = 0.0f;
        block_range(s, b, r);
        FOR_BLOCK_ELEMENTS(s, r, i)
        {
            cm_vel_out o = cm_velocity_element(kp, i, s->pos, s->pos_prev, s->vel, s->flags);
            if (o.speed > 0.0f) {
                any_v = 1;
                kin += (double)o.speed * (double)o.speed;
                sp[s->flags[i] & CM_CLASS_MASK] += (double)o.speed;
            }
            moved |= o.moved;
            if (!(o.disp < CM_UNREACHED && o.speed < CM_UNREACHED))
                bad++; /* NaN or infinite: the step blew up (comparisons with NaN fail) */
            else
                maxd = cm_maxf(maxd, o.disp);
        }
        s->blk_kinetic[b] = kin;
        for (int c = 0; c < SIM_NTISSUE; c++)
            s->blk_speed[b * SIM_NTISSUE + c] = sp[c];
        s->blk_maxdisp[b] = maxd;
        s->blk_nonfinite[b] = bad;
        uint8_t f = (uint8_t)(s->blk_flags[b] & ~(BLK_TOUCHED | BLK_VEL));
        if (any_v)
            f |= BLK_VEL;
        if (moved)
            f |= BLK_DIRTY; /* the inertial step may have opened links: relax next frame */
        s->blk_flags[b] = f;
    }
    /* Reduce in block order: the same sums whatever the thread count. */
    double kin = 0.0, sp[SIM_NTISSUE] = {0.0, 0.0, 0.0, 0.0};
    int64_t bad = 0;
    for (int64_t k = 0; k < n; k++) {
        int64_t b = s->blk_list[k];
        bad += s->blk_nonfinite[b];
        kin += s->blk_kinetic[b];
        for (int c = 0; c < SIM_NTISSUE; c++)
            sp[c] += s->blk_speed[b * SIM_NTISSUE + c];
    }
    float maxd = 0.0f;
    int settled = 1;
    for (int64_t b = 0; b < s->nblocks; b++) {
        maxd = cm_maxf(maxd, s->blk_maxdisp[b]);
        if (s->blk_flags[b] & (BLK_DIRTY | BLK_VEL))
            settled = 0;
    }
    mt->kinetic = kin;
    mt->max_displacement = maxd;
    mt->nonfinite = bad;
    for (int c = 0; c < SIM_NTISSUE; c++)
        mt->mean_speed[c] = s->class_count[c] ? (float)(sp[c] / (double)s->class_count[c]) : 0.0f;
    s->settled = settled;
}

static sim_status cpu_frame(sim_volume_state *s, const vol_frame_in *in, sim_volume_metrics *mt,
                            char *err, size_t err_sz)
{
    (void)err;
    (void)err_sz;
    double t0 = sc_now_ms();
    if (in->deform)
        mt->moved_elements = propagate(s, mt);
    double t1 = sc_now_ms();
    mt->active_blocks = relax(s);
    double t2 = sc_now_ms();
    velocity(s, mt);
    double t3 = sc_now_ms();
    mt->propagate_ms = t1 - t0;
    mt->relax_ms = t2 - t1;
    mt->velocity_ms = t3 - t2;
    return SIM_OK;
}

static sim_status cpu_init(sim_volume_state *s, char *err, size_t err_sz)
{
    (void)err;
    (void)err_sz;
    s->dev = s; /* nothing of its own: the host arrays are the state */
    return SIM_OK;
}

static void cpu_fini(sim_volume_state *s)
{
    s->dev = NULL;
}

static sim_status cpu_noop(sim_volume_state *s, char *err, size_t err_sz)
{
    (void)s;
    (void)err;
    (void)err_sz;
    return SIM_OK;
}

static sim_status cpu_sync_grab(sim_volume_state *s, const uint32_t *old_idx, int nold, char *err,
                                size_t err_sz)
{
    (void)old_idx;
    (void)nold;
    (void)err;
    (void)err_sz;
    (void)s;
    return SIM_OK;
}

const sim_volume_backend_i vol_cpu_backend = {
    "cpu", cpu_init, cpu_fini, cpu_noop, cpu_sync_grab, cpu_frame, cpu_noop,
};
