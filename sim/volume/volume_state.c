/* volume_state.c: a session's volume state. An event is applied on the host arrays at a
 * frame boundary: at once by apply_event (the caller is at the boundary), or queued by
 * push_event and applied by the next step; both go through the same check and apply.
 * The backend then runs the frame (propagation, relaxation, velocity layer). Everything
 * here runs on the state's thread. */
#include <math.h>
#include <string.h>

#include "slice.h"
#include "volume_internal.h"

/* Element i moved (by the hand): its block's flags and row (vol_moved), and its stamp for the
 * surfaces. Rigid tissue moved flags its block BLK_RIGID, as the wave's moves do: it goes
 * home once free even where the hand alone moved it (a move within the links' slack). */
static void mark_moved(sim_volume_state *s, int64_t i)
{
    vol_moved(s, i, s->kp.rigid[s->flags[i] & CM_CLASS_MASK] ? BLK_RIGID : 0);
    vol_stamp_block(s, vol_block_of(s, i));
}

void vol_list_active(sim_volume_state *s)
{
    /* Blocks set wholesale hold no seed list: a block with seeds is looked at whole. */
    for (int64_t k = 0; k < s->nseed_next; k++)
        s->seeded[s->seed_next[k]] = 0;
    s->nseed_next = s->nseed_cur = 0;
    for (int64_t b = 0; b < s->nblocks; b++)
        if (s->blk_flags[b] & BLK_SEEDS)
            s->blk_flags[b] = (uint16_t)((s->blk_flags[b] & ~BLK_SEEDS) | BLK_DIRTY);
    s->nactive = 0;
    for (int64_t b = 0; b < s->nblocks; b++) {
        s->blk_listed[b] = s->blk_flags[b] != 0 || s->blk_maxdisp[b] > 0.0f;
        if (s->blk_listed[b])
            s->blk_active[s->nactive++] = (uint32_t)b;
    }
}

static void set_rest(sim_volume_state *s)
{
    for (int64_t i = 0; i < s->nelem; i++) {
        int x, y, z;
        cm_coords(&s->kp, i, &x, &y, &z);
        s->pos[i * 3 + 0] = (float)x;
        s->pos[i * 3 + 1] = (float)y;
        s->pos[i * 3 + 2] = (float)z;
        s->t_reach[i] = CM_UNREACHED;
    }
    memcpy(s->pos_prev, s->pos, (size_t)s->nelem * 3 * sizeof(float));
    memset(s->vel, 0, (size_t)s->nelem * 3 * sizeof(float));
    memset(s->blk_flags, 0, (size_t)s->nblocks * sizeof *s->blk_flags);
    memset(s->blk_maxdisp, 0, (size_t)s->nblocks * sizeof(float));
    memset(s->blk_rows, 0, (size_t)s->nblocks * sizeof *s->blk_rows);
    memset(s->row_maxdisp, 0, (size_t)s->nblocks * VOL_BLOCK_ROWS * sizeof(float));
    vol_list_active(s);
    s->ngrab = 0;
    s->nprobe = 0;
    s->grab_moved = 0;
    s->clock = 0.0f;
    s->ncand = 0;
    s->nreached = 0;
    s->settled = 1;
    s->host_valid = 1;
    vol_stamp_all(s);
}

/* Tissue class of every element under the current thresholds (keeps the grab bit). */
static void classify_all(sim_volume_state *s)
{
    memset(s->class_count, 0, sizeof s->class_count);
    const float *hu = s->m->vol.hu;
    const uint8_t *ov = s->m->class_override;
    for (int64_t i = 0; i < s->nelem; i++) {
        int c = ov && ov[i] != SIM_CLASS_BY_HU ? ov[i] : vol_classify(&s->params, hu[i]);
        s->flags[i] = (uint8_t)((s->flags[i] & CM_FLAG_GRABBED) | (uint8_t)c);
        s->class_count[c]++;
    }
    vol_block_classes(s);
}

void vol_block_classes(sim_volume_state *s)
{
    memset(s->blk_classes, 0, (size_t)s->nblocks);
    for (int64_t i = 0; i < s->nelem; i++)
        s->blk_classes[vol_block_of(s, i)] |= (uint8_t)(1u << (s->flags[i] & CM_CLASS_MASK));
}

void vol_blocks_from_state(sim_volume_state *s)
{
    memset(s->blk_maxdisp, 0, (size_t)s->nblocks * sizeof(float));
    memset(s->row_maxdisp, 0, (size_t)s->nblocks * VOL_BLOCK_ROWS * sizeof(float));
    /* Every row may hold motion (a velocity of -0 is one, for the velocity step): a visit of
     * each block the frame lists finds out. */
    for (int64_t b = 0; b < s->nblocks; b++)
        s->blk_rows[b] = ~0ull;
    for (int64_t i = 0; i < s->nelem; i++) {
        int x, y, z;
        cm_coords(&s->kp, i, &x, &y, &z);
        const float *X = &s->pos[i * 3], *V = &s->vel[i * 3];
        float e[3] = {X[0] - (float)x, X[1] - (float)y, X[2] - (float)z};
        float d = sqrtf(e[0] * e[0] + e[1] * e[1] + e[2] * e[2]);
        int64_t b;
        uint64_t bit = vol_row_bit(s, i, &b);
        float *row_max = &s->row_maxdisp[b * VOL_BLOCK_ROWS + __builtin_ctzll(bit)];
        if (d > *row_max && d < CM_UNREACHED)
            *row_max = d; /* as the velocity step keeps it: finite values only */
        s->blk_maxdisp[b] = cm_maxf(s->blk_maxdisp[b], *row_max);
        if (d != 0.0f) /* NaN too: the velocity step visits the block and the guard sees it */
            s->blk_flags[b] |= BLK_DIRTY | BLK_TOUCHED | BLK_RIGID;
        uint32_t vbits[3]; /* any bit: a -0 too (an older kernel's), which full sweeps turn +0 */
        memcpy(vbits, V, sizeof vbits);
        if (vbits[0] | vbits[1] | vbits[2])
            s->blk_flags[b] |= BLK_VEL;
    }
}

void vol_state_reset(sim_volume_state *s)
{
    vol_pack_kparams(&s->kp, &s->params, &s->m->vol);
    s->kp.rigid_free = 1;
    memset(s->flags, 0, (size_t)s->nelem);
    classify_all(s);
    set_rest(s);
    (void)s->impl->upload_all(s, NULL, 0);
}

const sim_volume_backend_i *vol_backend_for(const sim_backend *b)
{
#if SIM_HAVE_CUDA
    if (b->kind == SIM_BACKEND_CUDA)
        return &vol_cuda_backend;
#endif
    (void)b;
    return &vol_cpu_backend;
}

/* The most runs of any of the model's surfaces (sim_volume_surface_update's scratch). */
static size_t max_runs(const sim_volume_model *m)
{
    size_t n = 0;
    for (int k = 0; k < SIM_NSURFACE; k++)
        n = (size_t)m->surf[k].nrun > n ? (size_t)m->surf[k].nrun : n;
    return n;
}

size_t sim_volume_state_bytes(const sim_volume_state *s)
{
    /* As allocated in sim_volume_state_create. */
    size_t n = (size_t)s->nelem, nb = (size_t)s->nblocks;
    size_t per_elem = 3 * 3 * sizeof(float) + 1 + sizeof(float) + 4 * sizeof(uint32_t) +
                      3 * sizeof(float) + sizeof(float) + 1 + 1 /* seeded */ +
                      10 * sizeof(uint32_t) / 8 /* the seed lists, the outside list */;
    size_t grab = (size_t)VOL_MAX_GRAB * (2 * sizeof(uint32_t) + 6 * sizeof(float));
    size_t per_block = sizeof *s->blk_flags + 2 * sizeof(uint32_t) + 1 + sizeof(double) +
                       sizeof(float) + SIM_NTISSUE * sizeof(double) + sizeof(int64_t) + 1 +
                       sizeof *s->blk_pos_gen + sizeof *s->blk_rows +
                       VOL_BLOCK_ROWS * sizeof(float) /* row_maxdisp */ + sizeof(uint32_t) +
                       sizeof(uint64_t) /* the stamp log */;
    return sizeof *s + n * per_elem + grab + nb * per_block +
           (max_runs(s->m) + 1) * sizeof(uint32_t) + (max_runs(s->m) / 64 + 1) * sizeof(uint64_t);
}

sim_status sim_volume_state_create(sim_volume_state **out, const sim_volume_model *m,
                                   sim_backend *b, char *err, size_t err_sz)
{
    *out = NULL;
    if (!m || !b)
        return (sim_status)sc_fail(err, err_sz, SIM_ERR_ARG, "state: model and backend required");
    sim_volume_state *s = sc_calloc(1, sizeof *s);
    if (!s)
        return (sim_status)sc_fail(err, err_sz, SIM_ERR_NOMEM, "state: out of memory");
    s->m = m;
    s->be = b;
    s->impl = vol_backend_for(b);
    s->threads = b->threads;
    s->params = sim_default_volume_params();
    vol_pack_kparams(&s->kp, &s->params, &m->vol);
    s->kp.rigid_free = 1;
    s->nelem = (int64_t)m->vol.nx * m->vol.ny * m->vol.nz;
    s->bx = (m->vol.nx + VOL_BLOCK - 1) / VOL_BLOCK;
    s->by = (m->vol.ny + VOL_BLOCK - 1) / VOL_BLOCK;
    s->bz = (m->vol.nz + VOL_BLOCK - 1) / VOL_BLOCK;
    s->nblocks = (int64_t)s->bx * s->by * s->bz;
    size_t n = (size_t)s->nelem, nb = (size_t)s->nblocks;
    s->pos = sc_calloc(n * 3, sizeof(float));
    s->pos_prev = sc_calloc(n * 3, sizeof(float));
    s->vel = sc_calloc(n * 3, sizeof(float));
    s->flags = sc_calloc(n, 1);
    s->t_reach = sc_calloc(n, sizeof(float));
    s->grab_idx = sc_calloc(VOL_MAX_GRAB, sizeof(uint32_t));
    s->grab_start = sc_calloc(VOL_MAX_GRAB * 3, sizeof(float));
    s->grab_old = sc_calloc(VOL_MAX_GRAB, sizeof(uint32_t));
    s->probe_pos = sc_calloc(VOL_MAX_GRAB * 3, sizeof(float));
    s->cand = sc_calloc(n, sizeof(uint32_t));
    s->cand_next = sc_calloc(n, sizeof(uint32_t));
    s->cand_stamp = sc_calloc(n, sizeof(uint32_t));
    s->reached = sc_calloc(n, sizeof(uint32_t));
    s->scratch_pos = sc_calloc(n * 3, sizeof(float));
    s->scratch_t = sc_calloc(n, sizeof(float));
    s->scratch_status = sc_calloc(n, 1);
    s->blk_flags = sc_calloc(nb, sizeof *s->blk_flags);
    s->blk_list = sc_calloc(nb, sizeof(uint32_t));
    s->blk_active = sc_calloc(nb, sizeof(uint32_t));
    s->blk_listed = sc_calloc(nb, 1);
    s->seed_cap = (int64_t)n / 8 + 64; /* more than that: whole blocks cost less */
    s->seed_cur = sc_calloc((size_t)s->seed_cap, sizeof(uint32_t));
    s->seed_next = sc_calloc((size_t)s->seed_cap, sizeof(uint32_t));
    s->seed_exp = sc_calloc(7 * (size_t)s->seed_cap, sizeof(uint32_t));
    s->seeded = sc_calloc(n, 1);
    s->outside = sc_calloc((size_t)s->seed_cap, sizeof(uint32_t));
    s->blk_kinetic = sc_calloc(nb, sizeof(double));
    s->blk_maxdisp = sc_calloc(nb, sizeof(float));
    s->blk_speed = sc_calloc(nb * SIM_NTISSUE, sizeof(double));
    s->blk_nonfinite = sc_calloc(nb, sizeof(int64_t));
    s->blk_classes = sc_calloc(nb, 1);
    s->blk_rows = sc_calloc(nb, sizeof *s->blk_rows);
    s->row_maxdisp = sc_calloc(nb * VOL_BLOCK_ROWS, sizeof(float));
    s->blk_pos_gen = sc_calloc(nb, sizeof(uint64_t));
    s->pos_gen = 1;
    s->stamp_log = sc_calloc(nb, sizeof(uint32_t));
    s->stamp_log_gen = sc_calloc(nb, sizeof(uint64_t));
    s->run_scratch = sc_calloc(max_runs(m) + 1, sizeof(uint32_t));
    s->run_bits = sc_calloc(max_runs(m) / 64 + 1, sizeof(uint64_t));
    if (!s->pos || !s->pos_prev || !s->vel || !s->flags || !s->t_reach || !s->grab_idx ||
        !s->grab_start || !s->grab_old || !s->cand || !s->cand_next || !s->cand_stamp ||
        !s->reached || !s->scratch_pos || !s->scratch_t || !s->scratch_status || !s->blk_flags ||
        !s->blk_list || !s->blk_active || !s->blk_listed || !s->seed_cur || !s->seed_next ||
        !s->seed_exp || !s->seeded || !s->outside || !s->blk_kinetic || !s->blk_maxdisp ||
        !s->blk_nonfinite || !s->blk_classes || !s->blk_speed || !s->probe_pos || !s->blk_pos_gen ||
        !s->blk_rows || !s->row_maxdisp || !s->stamp_log || !s->stamp_log_gen || !s->run_scratch ||
        !s->run_bits) {
        sim_volume_state_destroy(s);
        return (sim_status)sc_fail(err, err_sz, SIM_ERR_NOMEM,
                                   "state: out of memory for %zu elements", n);
    }
    classify_all(s);
    set_rest(s);
    sim_status st = s->impl->init(s, err, err_sz);
    if (st == SIM_OK)
        st = s->impl->upload_all(s, err, err_sz);
    if (st != SIM_OK) {
        sim_volume_state_destroy(s);
        return st;
    }
    *out = s;
    return SIM_OK;
}

void sim_volume_state_destroy(sim_volume_state *s)
{
    if (!s)
        return;
    if (s->dev)
        s->impl->fini(s);
    free(s->pos);
    free(s->pos_prev);
    free(s->vel);
    free(s->flags);
    free(s->t_reach);
    free(s->grab_idx);
    free(s->grab_start);
    free(s->grab_old);
    free(s->probe_pos);
    free(s->cand);
    free(s->cand_next);
    free(s->cand_stamp);
    free(s->reached);
    free(s->scratch_pos);
    free(s->scratch_t);
    free(s->scratch_status);
    free(s->blk_flags);
    free(s->blk_list);
    free(s->blk_active);
    free(s->blk_listed);
    free(s->seed_cur);
    free(s->seed_next);
    free(s->seed_exp);
    free(s->seeded);
    free(s->outside);
    free(s->blk_kinetic);
    free(s->blk_maxdisp);
    free(s->blk_speed);
    free(s->blk_nonfinite);
    free(s->blk_classes);
    free(s->blk_rows);
    free(s->row_maxdisp);
    free(s->blk_pos_gen);
    free(s->stamp_log);
    free(s->stamp_log_gen);
    free(s->run_scratch);
    free(s->run_bits);
    free(s->queue);
    free(s);
}

/* ------------------------------------------------------------------ events */

static int finite3(const float *p)
{
    return isfinite(p[0]) && isfinite(p[1]) && isfinite(p[2]);
}

/* The checks every event passes, queued or applied at once; the state is not touched. */
static sim_status check_event(const sim_volume_event *ev, char *err, size_t err_sz)
{
    switch (ev->type) {
    case SIM_EV_GRAB:
        if (!(isfinite(ev->radius) && ev->radius > 0.0f))
            return (sim_status)sc_fail(err, err_sz, SIM_ERR_ARG,
                                       "grab: radius %g must be finite and > 0",
                                       (double)ev->radius);
        /* fall through */
    case SIM_EV_MOVE:
        if (!finite3(ev->point))
            return (sim_status)sc_fail(err, err_sz, SIM_ERR_ARG, "%s: point must be finite",
                                       ev->type == SIM_EV_GRAB ? "grab" : "move");
        if (ev->space != SIM_SPACE_LATTICE && ev->space != SIM_SPACE_WORLD)
            return (sim_status)sc_fail(err, err_sz, SIM_ERR_ARG,
                                       "space %d: must be lattice or world", (int)ev->space);
        return SIM_OK;
    case SIM_EV_SET_PARAMS:
        return sim_volume_params_validate(&ev->params, err, err_sz);
    case SIM_EV_SET_CONDITION:
        if (ev->condition != SIM_CONDITION_A && ev->condition != SIM_CONDITION_B &&
            ev->condition != SIM_CONDITION_C)
            return (sim_status)sc_fail(err, err_sz, SIM_ERR_ARG, "condition %d: must be A, B or C",
                                       (int)ev->condition);
        return SIM_OK;
    case SIM_EV_RELEASE:
    case SIM_EV_RESET:
        return SIM_OK;
    }
    return (sim_status)sc_fail(err, err_sz, SIM_ERR_ARG, "event type %d unknown", (int)ev->type);
}

sim_status sim_volume_push_event(sim_volume_state *s, const sim_volume_event *ev, char *err,
                                 size_t err_sz)
{
    if (s->qcount >= VOL_QUEUE_CAP)
        return (sim_status)sc_fail(err, err_sz, SIM_ERR_LIMIT,
                                   "event queue full (%d events): step before pushing more",
                                   VOL_QUEUE_CAP);
    sim_status st = check_event(ev, err, err_sz);
    if (st != SIM_OK)
        return st;
    if (!s->queue && !(s->queue = sc_calloc(VOL_QUEUE_CAP, sizeof *s->queue)))
        return (sim_status)sc_fail(err, err_sz, SIM_ERR_NOMEM, "event queue: out of memory");
    s->queue[(s->qhead + s->qcount) % VOL_QUEUE_CAP] = *ev;
    s->qcount++;
    return SIM_OK;
}

static void to_lattice(const sim_volume_state *s, sim_space space, const float *in, float *out)
{
    for (int b = 0; b < 3; b++)
        out[b] = space == SIM_SPACE_WORLD ? in[b] / s->m->vol.spacing_mm[b] : in[b];
}

/* Let go of the grabbed set; its indices go to old (capacity VOL_MAX_GRAB). */
static int release_grab(sim_volume_state *s, uint32_t *old)
{
    int nold = s->ngrab;
    for (int g = 0; g < s->ngrab; g++) {
        uint32_t i = s->grab_idx[g];
        old[g] = i;
        s->flags[i] &= (uint8_t)~CM_FLAG_GRABBED;
        /* A released element is free again: it must relax even if nothing near it moves
         * this frame (after a long hold the volume around it may have converged, and
         * without this the release would leave it pinned where the hand left it). A
         * seed: relaxation looks at it and its neighbours, not at its whole block. */
        vol_seed(s, i);
        mark_moved(s, i);
    }
    s->ngrab = 0;
    return nold;
}

static sim_status grab_offset_range(sim_volume_state *s, char *err, size_t err_sz);

/* The grab just made becomes the probe: its mean rest position, and its mean position now
 * as the last frame's end (so its first motion is measured from where it was grabbed). */
static void set_probe(sim_volume_state *s)
{
    double r[3] = {0, 0, 0}, p[3] = {0, 0, 0};
    for (int g = 0; g < s->ngrab; g++) {
        int c[3];
        cm_coords(&s->kp, s->grab_idx[g], &c[0], &c[1], &c[2]);
        for (int b = 0; b < 3; b++) {
            r[b] += c[b];
            p[b] += (double)s->grab_start[g * 3 + b];
        }
    }
    s->nprobe = s->ngrab;
    for (int b = 0; b < 3; b++) {
        s->probe_rest[b] = s->ngrab ? (float)(r[b] / s->ngrab) : 0.0f;
        s->probe_prev[b] = s->ngrab ? (float)(p[b] / s->ngrab) : 0.0f;
        s->probe_pull[b] = 0.0f;
    }
}

/* The probe's figures at the end of a frame (metrics.probe_*), summed in index order on
 * every backend. */
static sim_status measure_probe(sim_volume_state *s, sim_volume_metrics *mt, char *err,
                                size_t err_sz)
{
    mt->probe_elements = s->nprobe;
    if (s->nprobe == 0)
        return SIM_OK;
    sim_status st = s->impl->probe(s, err, err_sz);
    if (st != SIM_OK)
        return st;
    double p[3] = {0, 0, 0};
    for (int g = 0; g < s->nprobe; g++)
        for (int b = 0; b < 3; b++)
            p[b] += (double)s->probe_pos[g * 3 + b];
    for (int b = 0; b < 3; b++) {
        float mean = (float)(p[b] / s->nprobe);
        mt->probe_rest[b] = s->probe_rest[b];
        mt->probe_disp[b] = mean - s->probe_rest[b];
        mt->probe_vel[b] = mean - s->probe_prev[b];
        mt->probe_pull[b] = s->probe_pull[b];
        s->probe_prev[b] = mean;
    }
    return SIM_OK;
}

/* Element i is within the hand's reach (centre c, per-axis weights w, radius squared r2):
 * tissue, not air (grabbing air moves nothing anyone can see). */
static int grab_reaches(const sim_volume_state *s, int64_t i, const float c[3], const float w[3],
                        float r2)
{
    if ((s->flags[i] & CM_CLASS_MASK) == SIM_TISSUE_AIR)
        return 0;
    float d2 = 0.0f;
    for (int b = 0; b < 3; b++) {
        float d = (s->pos[i * 3 + b] - c[b]) * w[b];
        d2 += d * d;
    }
    return !(d2 > r2);
}

/* The elements of the lattice box e[6] ([x0,x1) x [y0,y1) x [z0,z1)) within reach, appended
 * to sel at *n; 0 once more than VOL_MAX_GRAB were found. */
static int grab_box(const sim_volume_state *s, const int e[6], const float c[3], const float w[3],
                    float r2, uint32_t *sel, int *n)
{
    for (int z = e[4]; z < e[5]; z++)
        for (int y = e[2]; y < e[3]; y++)
            for (int x = e[0]; x < e[1]; x++) {
                int64_t i = x + (int64_t)s->kp.nx * (y + (int64_t)s->kp.ny * z);
                if (!grab_reaches(s, i, c, w, r2))
                    continue;
                if (*n == VOL_MAX_GRAB)
                    return 0;
                sel[(*n)++] = (uint32_t)i;
            }
    return 1;
}

/* The elements within the hand's reach (grab_reaches), in index order, into sel (room for
 * VOL_MAX_GRAB); -1 past that. On the CPU backend the cost follows the reach, not the volume:
 * an element that is not in an active block is at its lattice point (a block leaves the list
 * only with nothing displaced), so of those only the reach's lattice box is looked at; of the
 * active blocks, those whose elements, each within its block's largest displacement of its
 * lattice point, may lie in that box. A block touched since the velocity step measured it (a
 * move, a release, a parameter change) or holding a non-finite position is looked at whole.
 * The CUDA backend keeps no block bookkeeping on the host, and full_sweeps is the tests'
 * reference: they look at every element, as does a reach whose float distance rounds by
 * more than the box allows (its square overflows, or it reaches 2^20 lattice units out).
 * The same set either way. */
static int grab_select(sim_volume_state *s, const float c[3], const float w[3], float radius,
                       uint32_t *sel)
{
    float r2 = radius * radius;
    int n = 0, far = !(r2 < INFINITY);
    double rb[3];
    for (int a = 0; a < 3; a++) {
        rb[a] = (double)radius / (double)w[a];
        far |= !(fabs((double)c[a]) + rb[a] < 1048576.0);
    }
    if (s->impl != &vol_cpu_backend || s->full_sweeps || far) {
        for (int64_t i = 0; i < s->nelem; i++)
            if (grab_reaches(s, i, c, w, r2)) {
                if (n == VOL_MAX_GRAB)
                    return -1;
                sel[n++] = (uint32_t)i;
            }
        return n;
    }
    /* The reach's lattice box, a lattice unit wider each way: within 2^20 lattice units the
     * float distance of grab_reaches rounds by less than half of one. */
    int dims[3] = {s->kp.nx, s->kp.ny, s->kp.nz}, box[6];
    double lo[3], hi[3];
    for (int a = 0; a < 3; a++) {
        lo[a] = (double)c[a] - rb[a] - 1.0;
        hi[a] = (double)c[a] + rb[a] + 1.0;
        box[2 * a] = lo[a] <= 0.0 ? 0 : lo[a] >= dims[a] ? dims[a] : (int)ceil(lo[a]);
        box[2 * a + 1] = hi[a] < 0.0 ? 0 : hi[a] >= dims[a] - 1 ? dims[a] : (int)floor(hi[a]) + 1;
    }
    for (int64_t k = 0; k < s->nactive; k++) {
        int64_t b = s->blk_active[k];
        int e[6], reach = 1;
        vol_block_range(s, b, e);
        double m = (s->blk_flags[b] & BLK_TOUCHED) || s->blk_nonfinite[b]
                       ? (double)INFINITY
                       : (double)s->blk_maxdisp[b] * 1.001 + 1e-3;
        for (int a = 0; a < 3; a++)
            reach &= e[2 * a] - m <= hi[a] && e[2 * a + 1] - 1 + m >= lo[a];
        if (reach && !grab_box(s, e, c, w, r2, sel, &n))
            return -1;
    }
    if (box[0] < box[1] && box[2] < box[3] && box[4] < box[5]) {
        int bb[6];
        for (int a = 0; a < 6; a++)
            bb[a] = (box[a] - (a & 1)) >> VOL_BLOCK_SHIFT; /* first and last block per axis */
        for (int bz = bb[4]; bz <= bb[5]; bz++)
            for (int by = bb[2]; by <= bb[3]; by++)
                for (int bx = bb[0]; bx <= bb[1]; bx++) {
                    int64_t b = bx + (int64_t)s->bx * (by + (int64_t)s->by * bz);
                    if (s->blk_listed[b])
                        continue; /* active: looked at above */
                    int e[6];
                    vol_block_range(s, b, e);
                    for (int a = 0; a < 6; a += 2) { /* the block's part of the box */
                        e[a] = e[a] > box[a] ? e[a] : box[a];
                        e[a + 1] = e[a + 1] < box[a + 1] ? e[a + 1] : box[a + 1];
                    }
                    if (!grab_box(s, e, c, w, r2, sel, &n))
                        return -1;
                }
    }
    qsort(sel, (size_t)n, sizeof *sel, vol_cmp_u32);
    return n;
}

static sim_status apply_grab(sim_volume_state *s, const sim_volume_event *ev, uint32_t *old,
                             char *err, size_t err_sz)
{
    sim_status st = s->impl->download(s, err, err_sz);
    if (st != SIM_OK)
        return st;
    int nold = release_grab(s, old);
    float c[3], w[3];
    to_lattice(s, ev->space, ev->point, c);
    for (int b = 0; b < 3; b++)
        w[b] = ev->space == SIM_SPACE_WORLD ? s->m->vol.spacing_mm[b] : 1.0f;
    /* Selected into scratch (free between frames, room for the volume): a grab refused leaves
     * the last grab's elements where the probe reads them. */
    uint32_t *sel = s->cand_next;
    int n = grab_select(s, c, w, ev->radius, sel);
    if (n < 0) {
        s->ngrab = 0;
        s->impl->sync_grab(s, old, nold, NULL, 0);
        return (sim_status)sc_fail(err, err_sz, SIM_ERR_LIMIT,
                                   "grab: radius %g selects more than %d elements",
                                   (double)ev->radius, VOL_MAX_GRAB);
    }
    memcpy(s->grab_idx, sel, (size_t)n * sizeof *sel);
    for (int g = 0; g < n; g++) {
        uint32_t i = s->grab_idx[g];
        memcpy(&s->grab_start[g * 3], &s->pos[(size_t)i * 3], 3 * sizeof(float));
        s->flags[i] |= CM_FLAG_GRABBED;
    }
    s->ngrab = n;
    set_probe(s);
    memcpy(s->grab_anchor, c, sizeof c);
    sim_status room = grab_offset_range(s, err, err_sz);
    sim_status st_sync = s->impl->sync_grab(s, old, nold, err, err_sz);
    return st_sync != SIM_OK ? st_sync : room;
}

/* Sorts v[0..n) by its high 32 bits (LSD radix, 11 bits a pass), tmp holding n more;
 * returns whichever of the two holds the result. */
static uint64_t *sort_by_high_word(uint64_t *v, uint64_t *tmp, int n)
{
    for (int shift = 32; shift < 64; shift += 11) {
        int count[2049] = {0};
        for (int k = 0; k < n; k++)
            count[((v[k] >> shift) & 2047) + 1]++;
        for (int d = 0; d < 2048; d++)
            count[d + 1] += count[d];
        for (int k = 0; k < n; k++)
            tmp[count[(v[k] >> shift) & 2047]++] = v[k];
        uint64_t *t = v;
        v = tmp;
        tmp = t;
    }
    return v;
}

/* The shortest link between elements i and j (neighbours): as short as its softer end. */
static float shortest_link(const sim_volume_state *s, int64_t i, int64_t j)
{
    return s->kp
        .link_min[(s->flags[i] & CM_CLASS_MASK) * CM_NCLASS + (s->flags[j] & CM_CLASS_MASK)];
}

/* The range of offsets along each axis that keeps every grabbed element inside the lattice
 * box grown by the margin, with room for the elements ahead of it on its lattice line
 * compressed to their shortest links (propagation pushes them ahead of the hand; without
 * that room they would be pressed against the box and their links broken). Element i at p
 * on a line of n along axis a, at c: p + off <= (n - 1) + margin - (the shortest links from
 * c to the line's end), and p + off >= -margin + (those from c back to its start).
 * The grabbed elements of one line share its sums, so each line is walked once, its
 * elements grouped (sorted by line). Walked once per element, a 57,777-element grab on
 * 256x256x128 took 54-57 ms (its whole first frame; 10-12 ms now, one thread). Out of
 * memory: no room (the grab holds still), SIM_ERR_NOMEM. */
static sim_status grab_offset_range(sim_volume_state *s, char *err, size_t err_sz)
{
    const cm_kparams *kp = &s->kp;
    int n[3] = {kp->nx, kp->ny, kp->nz}, ng = s->ngrab;
    int nmax = n[0] > n[1] ? n[0] : n[1];
    nmax = nmax > n[2] ? nmax : n[2];
    if (ng == 0) { /* nothing held: no bound */
        for (int a = 0; a < 3; a++)
            s->grab_off_lo[a] = -CM_UNREACHED, s->grab_off_hi[a] = CM_UNREACHED;
        return SIM_OK;
    }
    uint64_t *v = malloc((size_t)ng * 2 * sizeof *v);
    float *ahead = malloc((size_t)nmax * 2 * sizeof *ahead), *behind = ahead ? ahead + nmax : NULL;
    if (!v || !ahead) {
        free(v), free(ahead);
        for (int a = 0; a < 3; a++)
            s->grab_off_lo[a] = s->grab_off_hi[a] = 0.0f;
        return (sim_status)sc_fail(err, err_sz, SIM_ERR_NOMEM,
                                   "grab: out of memory for the room of %d elements", ng);
    }
    for (int a = 0; a < 3; a++) {
        int64_t stride = a == 0 ? 1 : a == 1 ? (int64_t)kp->nx : (int64_t)kp->nx * kp->ny;
        float lo = -CM_UNREACHED, hi = CM_UNREACHED;
        /* Each element's line: its id with its coordinate along a taken away. The ids are
         * sorted, so along x the lines come grouped already. */
        for (int g = 0; g < ng; g++) {
            int c[3];
            cm_coords(kp, s->grab_idx[g], &c[0], &c[1], &c[2]);
            uint64_t line = (uint64_t)(s->grab_idx[g] - (int64_t)c[a] * stride);
            v[g] = line << 32 | (uint32_t)g;
        }
        const uint64_t *by_line = a == 0 ? v : sort_by_high_word(v, v + ng, ng);
        for (int k = 0; k < ng;) {
            int64_t first = (int64_t)(by_line[k] >> 32); /* the line's element at 0 */
            ahead[n[a] - 1] = 0.0f;
            for (int e = n[a] - 2; e >= 0; e--) {
                int64_t i = first + (int64_t)e * stride;
                ahead[e] = shortest_link(s, i, i + stride) + ahead[e + 1];
            }
            behind[0] = 0.0f;
            for (int e = 1; e < n[a]; e++) {
                int64_t i = first + (int64_t)e * stride;
                behind[e] = shortest_link(s, i, i - stride) + behind[e - 1];
            }
            for (; k < ng && (int64_t)(by_line[k] >> 32) == first; k++) {
                int g = (int)(by_line[k] & 0xffffffffu), c[3];
                cm_coords(kp, s->grab_idx[g], &c[0], &c[1], &c[2]);
                float p = s->grab_start[g * 3 + a];
                hi = cm_minf(hi, (float)(n[a] - 1) + kp->margin - ahead[c[a]] - p);
                lo = cm_maxf(lo, -kp->margin + behind[c[a]] - p);
            }
        }
        if (lo > hi) /* no room at all: stay in the middle */
            lo = hi = 0.5f * (lo + hi);
        s->grab_off_lo[a] = lo;
        s->grab_off_hi[a] = hi;
    }
    free(v), free(ahead);
    return SIM_OK;
}

/* Translate the grabbed set rigidly. The offset is cut to the range that keeps every
 * band satisfiable inside the lattice box; a cut is reported (metrics.grab_clamped), so
 * the user hears why the tissue stops instead of seeing the grab flattened. */
static sim_status apply_move(sim_volume_state *s, const sim_volume_event *ev, char *err,
                             size_t err_sz)
{
    if (s->ngrab == 0)
        return SIM_OK; /* nothing held: a move is a no-op (the grab found no tissue) */
    float t[3], off[3];
    to_lattice(s, ev->space, ev->point, t);
    s->grab_clamped = 0; /* the last move of the frame decides */
    for (int b = 0; b < 3; b++) {
        float want = t[b] - s->grab_anchor[b];
        off[b] = cm_minf(cm_maxf(want, s->grab_off_lo[b]), s->grab_off_hi[b]);
        if (off[b] != want)
            s->grab_clamped = 1;
    }
    for (int g = 0; g < s->ngrab; g++) {
        uint32_t i = s->grab_idx[g];
        for (int b = 0; b < 3; b++)
            s->pos[(size_t)i * 3 + b] = s->grab_start[g * 3 + b] + off[b];
        /* Moved: its neighbours may want to follow (a seed: relaxation looks at them;
         * marking the block dirty made it evaluate the whole block every frame of a drag,
         * two thirds of a small pull's evaluations). */
        vol_seed(s, i);
        mark_moved(s, i);
    }
    memcpy(s->probe_pull, off, sizeof off);
    s->grab_moved = 1;
    return s->impl->sync_grab(s, NULL, 0, err, err_sz);
}

static sim_status apply_params(sim_volume_state *s, const sim_volume_params *p, char *err,
                               size_t err_sz)
{
    int reclass = memcmp(p->hu_threshold, s->params.hu_threshold, sizeof p->hu_threshold) != 0;
    s->params = *p;
    int rigid_free = s->kp.rigid_free;
    vol_pack_kparams(&s->kp, &s->params, &s->m->vol);
    s->kp.rigid_free = rigid_free;
    sim_status st = s->impl->download(s, err, err_sz);
    if (st != SIM_OK)
        return st;
    if (reclass)
        classify_all(s);
    /* Margin and link lengths may have changed. */
    sim_status room = grab_offset_range(s, err, err_sz);
    /* Links may have changed: relaxation must look again at whatever is away from home or
     * moving, and tissue that became rigid may be away from home. That is the active list
     * (every displaced or flagged block is on it). An element at home among neighbours at
     * home satisfies any links (min_len <= 1 <= max_len, no shear) and feels no pull, so
     * the rest of the volume needs nothing: a change on a settled volume costs nothing,
     * where marking every block cost a full relaxation (143 ms at 128^3, one thread). */
    for (int64_t k = 0; k < s->nactive; k++) {
        s->blk_flags[s->blk_active[k]] |= BLK_DIRTY | BLK_TOUCHED | BLK_RIGID;
        s->blk_rows[s->blk_active[k]] = ~0ull;
    }
    st = s->impl->upload_all(s, err, err_sz);
    return st != SIM_OK ? st : room;
}

/* Back to rest: nothing grabbed, velocities zero; parameters kept. */
static sim_status reset_to_rest(sim_volume_state *s, char *err, size_t err_sz)
{
    for (int64_t i = 0; i < s->nelem; i++)
        s->flags[i] &= CM_CLASS_MASK;
    set_rest(s);
    return s->impl->upload_all(s, err, err_sz);
}

static sim_status apply_event(sim_volume_state *s, const sim_volume_event *ev, char *err,
                              size_t err_sz)
{
    sim_status st = SIM_OK;
    switch (ev->type) {
    case SIM_EV_GRAB:
        st = apply_grab(s, ev, s->grab_old, err, err_sz);
        break;
    case SIM_EV_MOVE:
        st = apply_move(s, ev, err, err_sz);
        break;
    case SIM_EV_RELEASE: {
        int nold = release_grab(s, s->grab_old);
        st = s->impl->sync_grab(s, s->grab_old, nold, err, err_sz);
        break;
    }
    case SIM_EV_SET_PARAMS:
        st = apply_params(s, &ev->params, err, err_sz);
        break;
    case SIM_EV_SET_CONDITION:
        s->params.condition = ev->condition;
        s->kp.condition = (int)ev->condition;
        break;
    case SIM_EV_RESET:
        st = reset_to_rest(s, err, err_sz);
        break;
    }
    s->last_seq = ev->seq;
    s->settled = 0;
    return st;
}

sim_status sim_volume_apply_event(sim_volume_state *s, const sim_volume_event *ev, char *err,
                                  size_t err_sz)
{
    sim_status st = check_event(ev, err, err_sz);
    return st == SIM_OK ? apply_event(s, ev, err, err_sz) : st;
}

/* A step's first half: the queued events, then whether the frame needs the backend (*run; 0
 * when settled and nothing asked to move: the frame costs nothing). */
static sim_status take_events(sim_volume_state *s, sim_volume_metrics *mt, int *run, char *err,
                              size_t err_sz)
{
    int had_events = s->qcount > 0;
    sim_status st = SIM_OK;
    /* Events apply in order; one that fails stops the loop and the rest wait for the
     * next step. */
    while (s->qcount > 0 && st == SIM_OK) {
        sim_volume_event ev = s->queue[s->qhead];
        s->qhead = (s->qhead + 1) % VOL_QUEUE_CAP;
        s->qcount--;
        st = apply_event(s, &ev, err, err_sz);
    }
    s->kp.rigid_free = s->ngrab == 0; /* see cm_rigid_return_element */
    memset(mt, 0, sizeof *mt);
    *run = 0;
    if (st != SIM_OK)
        return st;
    if (!had_events && s->settled) {
        *mt = s->last;
        mt->skipped = 1;
        mt->passes = 0;
        mt->propagation_capped = 0;
        mt->moved_elements = 0;
        mt->max_violation = 0.0f;
        mt->relax_evaluations = 0;
        mt->propagate_ms = mt->relax_ms = mt->velocity_ms = 0.0;
    } else {
        *run = 1;
    }
    return st;
}

/* A step's first half, timed: the step's own time (s->step_ms) adds up its parts, so that
 * states stepped together (sim_volume_step_many) each measure their own frame. */
static sim_status step_begin(sim_volume_state *s, sim_volume_metrics *mt, int *run, char *err,
                             size_t err_sz)
{
    double t0 = sc_now_ms();
    sim_status st = take_events(s, mt, run, err, err_sz);
    s->step_ms = sc_now_ms() - t0;
    return st;
}

/* A step's second half, after the backend's frame (st: how the step went so far). */
static sim_status step_end(sim_volume_state *s, sim_volume_metrics *mt, sim_status st, char *err,
                           size_t err_sz)
{
    double t0 = sc_now_ms();
    if (st == SIM_OK && mt->nonfinite > 0) {
        /* A blow-up costs this session its deformation, never the process. */
        s->guard_resets++;
        st = reset_to_rest(s, err, err_sz);
    }
    if (st == SIM_OK && !mt->skipped)
        st = measure_probe(s, mt, err, err_sz);
    else if (mt->skipped) /* settled: the probe is where the last frame left it, at rest */
        memset(mt->probe_vel, 0, sizeof mt->probe_vel);
    mt->guard_resets = s->guard_resets;
    s->frame++;
    mt->frame = s->frame;
    mt->last_seq = s->last_seq;
    mt->grabbed = s->ngrab;
    mt->grab_clamped = s->grab_clamped;
    mt->total_ms = s->step_ms + (sc_now_ms() - t0);
    s->last = *mt;
    /* The next frame's events, applied at once or queued, start from here. */
    s->grab_moved = 0;
    s->grab_clamped = 0;
    return st;
}

sim_status sim_volume_step(sim_volume_state *s, sim_volume_metrics *metrics, char *err,
                           size_t err_sz)
{
    sim_volume_metrics mt;
    int run;
    sim_status st = step_begin(s, &mt, &run, err, err_sz);
    if (st == SIM_OK && run) {
        vol_frame_in in;
        in.deform = s->grab_moved;
        double t0 = sc_now_ms();
        st = s->impl->frame(s, &in, &mt, err, err_sz);
        s->step_ms += sc_now_ms() - t0;
    }
    st = step_end(s, &mt, st, err, err_sz);
    if (metrics)
        *metrics = mt;
    return st;
}

/* The states' frames: in one batch where the backend has one (each launch covers every
 * state of the batch; its time shared alike), else one after another (each its own time). */
static void frames_of(sim_volume_state *const *run, const vol_frame_in *in,
                      sim_volume_metrics *const *mt, sim_status *st, int n, char (*errs)[256])
{
    const sim_volume_backend_i *impl = run[0]->impl;
    if (impl->frame_many && n > 1) {
        double t0 = sc_now_ms();
        sim_status bst = impl->frame_many(run, in, mt, n, errs[0], sizeof errs[0]);
        double share = (sc_now_ms() - t0) / n;
        for (int r = 0; r < n; r++) {
            st[r] = bst;
            run[r]->step_ms += share;
            if (r > 0)
                memcpy(errs[r], errs[0], sizeof errs[0]);
        }
        return;
    }
    for (int r = 0; r < n; r++) {
        double t0 = sc_now_ms();
        st[r] = impl->frame(run[r], &in[r], mt[r], errs[r], sizeof errs[r]);
        run[r]->step_ms += sc_now_ms() - t0;
    }
}

sim_status sim_volume_step_many(sim_volume_state *const *states, int n, sim_volume_metrics *metrics,
                                sim_status *status, char *err, size_t err_sz)
{
    for (int k = 1; k < n; k++) {
        int dup = -1;
        for (int j = 0; j < k && dup < 0; j++)
            dup = states[j] == states[k] ? j : -1;
        if (states[k]->be == states[0]->be && dup < 0)
            continue;
        for (int j = 0; status && j < n; j++)
            status[j] = SIM_ERR_ARG;
        if (metrics) /* nothing stepped: no frame, no time */
            memset(metrics, 0, (size_t)n * sizeof *metrics);
        if (dup >= 0)
            snprintf(err, err_sz, "sim_volume_step_many: state %d is state %d again", k, dup);
        else
            snprintf(err, err_sz,
                     "sim_volume_step_many: state %d is on another backend than state 0", k);
        return SIM_ERR_ARG;
    }
    if (n <= 0)
        return SIM_OK;
    sim_volume_metrics *mt = calloc((size_t)n, sizeof *mt);
    sim_volume_metrics **run_mt = calloc((size_t)n, sizeof *run_mt);
    sim_volume_state **run = calloc((size_t)n, sizeof *run);
    vol_frame_in *in = calloc((size_t)n, sizeof *in);
    sim_status *st = calloc((size_t)n, sizeof *st), *run_st = calloc((size_t)n, sizeof *run_st);
    int *which = calloc((size_t)n, sizeof *which);
    char(*errs)[256] = calloc((size_t)n, sizeof *errs);
    if (!mt || !run_mt || !run || !in || !st || !run_st || !which || !errs) {
        free(mt), free(run_mt), free(run), free(in), free(st), free(run_st), free(which);
        free(errs);
        for (int j = 0; status && j < n; j++)
            status[j] = SIM_ERR_NOMEM;
        if (metrics)
            memset(metrics, 0, (size_t)n * sizeof *metrics);
        snprintf(err, err_sz, "sim_volume_step_many: out of memory for %d states", n);
        return SIM_ERR_NOMEM;
    }
    int nrun = 0;
    for (int k = 0; k < n; k++) {
        int go;
        st[k] = step_begin(states[k], &mt[k], &go, errs[k], sizeof errs[k]);
        if (st[k] == SIM_OK && go) {
            which[nrun] = k;
            run[nrun] = states[k];
            run_mt[nrun] = &mt[k];
            in[nrun].deform = states[k]->grab_moved;
            nrun++;
        }
    }
    if (nrun > 0) {
        char(*run_errs)[256] = calloc((size_t)nrun, sizeof *run_errs);
        if (!run_errs) {
            for (int r = 0; r < nrun; r++) {
                st[which[r]] = SIM_ERR_NOMEM;
                snprintf(errs[which[r]], sizeof errs[0], "out of memory for the batch");
            }
        } else {
            frames_of(run, in, run_mt, run_st, nrun, run_errs);
            for (int r = 0; r < nrun; r++) {
                st[which[r]] = run_st[r];
                memcpy(errs[which[r]], run_errs[r], sizeof errs[0]);
            }
            free(run_errs);
        }
    }
    sim_status first = SIM_OK;
    for (int k = 0; k < n; k++) {
        st[k] = step_end(states[k], &mt[k], st[k], errs[k], sizeof errs[k]);
        if (st[k] != SIM_OK && first == SIM_OK) {
            first = st[k];
            snprintf(err, err_sz, "state %d: %s", k, errs[k]);
        }
        if (metrics)
            metrics[k] = mt[k];
        if (status)
            status[k] = st[k];
    }
    free(mt), free(run_mt), free(run), free(in), free(st), free(run_st), free(which);
    free(errs);
    return first;
}

/* ----------------------------------------------------------------- outputs */

void sim_volume_set_threads(sim_volume_state *s, int threads)
{
    s->threads = threads > 0 && threads < s->be->threads ? threads : s->be->threads;
}

sim_volume_params sim_volume_get_params(const sim_volume_state *s)
{
    return s->params;
}
int sim_volume_is_settled(const sim_volume_state *s)
{
    return s->settled && s->qcount == 0;
}
int sim_volume_grabbed_count(const sim_volume_state *s)
{
    return s->ngrab;
}

static void ensure_host(sim_volume_state *s)
{
    if (!s->host_valid)
        (void)s->impl->download(s, NULL, 0);
}

const float *sim_volume_positions(sim_volume_state *s)
{
    ensure_host(s);
    return s->pos;
}

const float *sim_volume_velocities(sim_volume_state *s)
{
    ensure_host(s);
    return s->vel;
}

const uint8_t *sim_volume_classes(sim_volume_state *s)
{
    /* The grab bit lives in the same byte; callers get the class alone. */
    for (int64_t i = 0; i < s->nelem; i++)
        s->scratch_status[i] = s->flags[i] & CM_CLASS_MASK;
    return s->scratch_status;
}

uint64_t sim_volume_state_hash(sim_volume_state *s)
{
    ensure_host(s);
    uint64_t h = SC_HASH_SEED;
    h = sc_hash_bytes(h, s->pos, (size_t)s->nelem * 3 * sizeof(float));
    h = sc_hash_bytes(h, s->vel, (size_t)s->nelem * 3 * sizeof(float));
    return h;
}

float sim_volume_max_violation(sim_volume_state *s)
{
    ensure_host(s);
    float worst = 0.0f;
    for (int64_t i = 0; i < s->nelem; i++) {
        int x, y, z;
        cm_coords(&s->kp, i, &x, &y, &z);
        for (int d = 1; d < 6; d += 2) { /* +x, +y, +z: each link once */
            int64_t j = cm_neighbour(&s->kp, x, y, z, d);
            if (j >= 0)
                worst = cm_maxf(worst, cm_link_violation(&s->kp, i, j, d, s->pos, s->flags));
        }
    }
    return worst;
}

sim_status sim_volume_surface_positions(sim_volume_state *s, sim_surface_kind kind, float *out)
{
    if ((int)kind < 0 || kind >= SIM_NSURFACE)
        return SIM_ERR_ARG;
    ensure_host(s);
    sim_surface_eval(&s->m->surf[kind], s->m->vol.nx, s->m->vol.ny, s->pos, s->m->vol.spacing_mm,
                     out);
    return SIM_OK;
}

/* Whether the vertices of run r may have moved since generation g: their block, and the next
 * blocks their cells reach (run_reach). */
static int run_moved(const sim_volume_state *s, const sim_surface_data *sf, int r, uint64_t g)
{
    int64_t b = sf->run_block[r];
    int reach = sf->run_reach[r];
    int x = (int)(b % s->bx), y = (int)((b / s->bx) % s->by), z = (int)(b / s->bx / s->by);
    for (int dz = 0; dz <= (reach >> 2 & 1) && z + dz < s->bz; dz++)
        for (int dy = 0; dy <= (reach >> 1 & 1) && y + dy < s->by; dy++)
            for (int dx = 0; dx <= (reach & 1) && x + dx < s->bx; dx++)
                if (s->blk_pos_gen[b + dx + s->bx * (dy + (int64_t)s->by * dz)] >= g)
                    return 1;
    return 0;
}

/* The runs whose vertices may have moved since generation g, ascending, into s->run_scratch,
 * from the blocks stamped since (the stamp log): each such block's own runs, and the runs of
 * the blocks below it whose cells reach into it. Returns how many, or -1 when the log may
 * not hold every block stamped since g. */
static int runs_stamped_since(sim_volume_state *s, const sim_surface_data *sf, uint64_t g)
{
    if (g <= s->stamp_lost)
        return -1;
    if (sf->nrun == 0)
        return 0;
    for (int64_t e = s->stamp_log_n - 1; e >= 0 && e >= s->stamp_log_n - s->nblocks; e--) {
        int64_t at = e % s->nblocks;
        if (s->stamp_log_gen[at] < g)
            break; /* the log is in stamp order: the rest are older */
        int64_t b = s->stamp_log[at];
        int bx = (int)(b % s->bx), by = (int)((b / s->bx) % s->by), bz = (int)(b / s->bx / s->by);
        for (int off = 0; off < 8; off++) { /* bit 0: the block below along x, 1: y, 2: z */
            int ox = off & 1, oy = off >> 1 & 1, oz = off >> 2 & 1;
            if (bx < ox || by < oy || bz < oz)
                continue;
            int64_t a = b - ox - (int64_t)s->bx * (oy + (int64_t)s->by * oz);
            for (uint32_t r = sf->block_run[a]; r < sf->block_run[a + 1]; r++)
                if ((sf->run_reach[r] & off) == off) /* its cells reach block b */
                    s->run_bits[r >> 6] |= 1ull << (r & 63);
        }
    }
    int n = 0; /* the runs in order from the bits (a word per 64 runs), cleared as read */
    for (int w = 0; w < (sf->nrun + 63) / 64; w++)
        for (; s->run_bits[w]; s->run_bits[w] &= s->run_bits[w] - 1)
            s->run_scratch[n++] = (uint32_t)(64 * w + __builtin_ctzll(s->run_bits[w]));
    return n;
}

sim_status sim_volume_surface_update(sim_volume_state *s, sim_surface_kind kind, float *out,
                                     uint64_t *seen, uint32_t *ranges, uint32_t *nranges)
{
    if ((int)kind < 0 || kind >= SIM_NSURFACE || !seen || !ranges || !nranges)
        return SIM_ERR_ARG;
    ensure_host(s);
    const sim_surface_data *sf = &s->m->surf[kind];
    uint32_t n = 0;
    /* The runs to look at: those of the blocks stamped since the last update, from the log;
     * the first update, or one from before what the log holds, looks at every run. */
    int nlisted = *seen ? runs_stamped_since(s, sf, *seen) : -1;
    int count = nlisted >= 0 ? nlisted : sf->nrun;
    for (int k = 0; k < count; k++) {
        int r = nlisted >= 0 ? (int)s->run_scratch[k] : k;
        if (nlisted < 0 && *seen && !run_moved(s, sf, r, *seen))
            continue;
        uint32_t a = sf->run_start[r], e = sf->run_start[r + 1];
        sim_surface_eval_range(sf, s->m->vol.nx, s->m->vol.ny, s->pos, s->m->vol.spacing_mm, out, a,
                               e);
        if (n && ranges[2 * n - 2] + ranges[2 * n - 1] == a)
            ranges[2 * n - 1] += e - a; /* joins the last range */
        else
            ranges[2 * n] = a, ranges[2 * n + 1] = e - a, n++;
    }
    *nranges = n;
    *seen = ++s->pos_gen; /* later writes stamp at least this */
    return SIM_OK;
}

void sim_volume_slice_size(const sim_volume_model *m, sim_plane plane, int *w, int *h)
{
    sim_slice_size(m->vol.nx, m->vol.ny, m->vol.nz, plane, w, h);
}

sim_status sim_volume_slice(sim_volume_state *s, sim_plane plane, int index, float level_hu,
                            float width_hu, float *hu_out, uint8_t *img_out, char *err,
                            size_t err_sz)
{
    ensure_host(s);
    return sim_slice_resample(&s->m->vol, s->pos, plane, index, level_hu, width_hu, hu_out, img_out,
                              err, err_sz);
}
