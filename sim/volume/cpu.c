/* cpu.c: the volume scene on the CPU (OpenMP, thread count from the backend).
 *
 * The per-element math is sim/volume/kernels.h; this file only decides which
 * elements to visit, so that cost follows what moves, not the volume size:
 * - propagation visits a frontier list: the neighbours of elements moved in the last
 *   pass plus elements still waiting for a wave to arrive (per-tissue speed). Each pass
 *   computes every candidate from the old positions (Jacobi) in parallel, then applies the
 *   moves and builds the next list in one sequential sweep, so the result does not depend
 *   on the thread count.
 * - relaxation (red-black, in place) evaluates, in each phase, the elements that moved at
 *   their last evaluation and the neighbours of what moved since (at a frame's start: the
 *   seeds, the elements that moved since it last looked, and their neighbours; and the 8^3
 *   blocks a parameter change or bone going home left dirty, with the face layers beside
 *   them).
 * - the velocity layer (the inertial step and the velocity step) visits, in the blocks where
 *   something moved or holds a velocity, the rows of 8 elements that may move (blk_rows).
 * A settled volume visits none.
 * An element that is not visited would not have moved, so visiting a subset gives bit for
 * bit the result of visiting everything, which is what the CUDA backend does. */
#include <stdlib.h>
#include <string.h>

#include "volume_internal.h"

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

/* One wave from the grabbed set: passes until nothing moves, max_passes, or max_wave elements
 * moved (looked at every VOL_PASS_BATCH passes). Returns the
 * elements it moved. The wave ends with the frame: a wave kept across frames would read
 * the velocity layer's inertial motion as deformation and feed it back (CHAINMAIL.md). */
static int64_t propagate(sim_volume_state *s, sim_volume_metrics *mt)
{
    const cm_kparams *kp = &s->kp;
    int64_t moved_count = 0;
    s->pass_id++;
    s->ncand = 0;
    s->clock = 0.0f;
    /* Seeds: the grabbed set when the hand moved, and rigid tissue that stepped home
     * (already in the reached list, from rigid_return). */
    if (s->grab_moved)
        for (int g = 0; g < s->ngrab; g++)
            mark_reached(s, s->grab_idx[g], 0.0f);
    for (int64_t r = 0; r < s->nreached; r++)
        enqueue_neighbours(s, s->reached[r]);
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
                vol_moved(s, i, kp->rigid[s->flags[i] & CM_CLASS_MASK] ? BLK_RIGID : 0);
                vol_seed(s, i);
                enqueue_neighbours(s, i);
            }
            if (st & CM_PROP_WAITING)
                enqueue(s, i);
        }
        swap_lists(s);
        passes++;
        /* The frame's budget, looked at where the CUDA backend looks (VOL_PASS_BATCH). */
        if (s->params.max_wave > 0 && passes % VOL_PASS_BATCH == 0 &&
            moved_count >= s->params.max_wave)
            break;
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

/* The active blocks with a flag of mask, into blk_list in block order (the order of every
 * sum, whatever the thread count), from the active list, which this also prunes of blocks
 * with no flag and no displacement left: the cost is the active blocks', not the volume's. */
static int64_t list_blocks(sim_volume_state *s, uint16_t mask)
{
    int64_t n = 0;
    if (s->full_sweeps) { /* the reference: every block (flagged, in parallel, unlisted) */
        vol_list_active(s);
        for (int64_t b = 0; b < s->nblocks; b++)
            s->blk_list[n++] = (uint32_t)b;
        return n;
    }
    int64_t keep = 0;
    for (int64_t k = 0; k < s->nactive; k++) {
        uint32_t b = s->blk_active[k];
        if (!s->blk_flags[b] && !(s->blk_maxdisp[b] > 0.0f)) {
            s->blk_listed[b] = 0; /* at rest and at home: out until something moves it */
            continue;
        }
        s->blk_active[keep++] = b;
        if (s->blk_flags[b] & mask)
            s->blk_list[n++] = b;
    }
    s->nactive = keep;
    qsort(s->blk_list, (size_t)n, sizeof *s->blk_list, vol_cmp_u32);
    return n;
}

#define FOR_BLOCK_ELEMENTS(s, r, i)                                                          \
    for (int z_ = (r)[4]; z_ < (r)[5]; z_++)                                                 \
        for (int y_ = (r)[2]; y_ < (r)[3]; y_++)                                             \
            for (int64_t i = (r)[0] + (int64_t)(s)->kp.nx * (y_ + (int64_t)(s)->kp.ny * z_), \
                         i##_end = i + ((r)[1] - (r)[0]);                                    \
                 i < i##_end; i++)

/* Relaxation's bookkeeping within one frame, in the propagation's scratch (free by then):
 * a ring (s->cand) of the elements each of the last CM_RELAX_PHASES phases moved, phase h's
 * at [lo[h % P], hi[h % P]) counted from the frame's start (an element belongs to one phase,
 * so those are distinct elements and fit in nelem), and the next phase's candidates in
 * s->cand_next, each queued once (cand_stamp against pass_id). */
typedef struct {
    int64_t lo[CM_RELAX_PHASES], hi[CM_RELAX_PHASES], end; /* end: appended so far */
    int npull; /* phases of the elastic (pull) iterations: the repair's begin at npull */
    uint8_t
        classes[CM_RELAX_PHASES]; /* bit c: class c's elements of the phase's parity are in it */
} relax_work;

static void queue_relax(sim_volume_state *s, uint32_t i, int64_t *n)
{
    if (s->cand_stamp[i] == s->pass_id || (s->flags[i] & CM_FLAG_GRABBED))
        return; /* queued already, or held by the hand (relaxation never moves it) */
    s->cand_stamp[i] = s->pass_id;
    s->cand_next[(*n)++] = i;
}

/* Every element of the phase in the element range r: every other x of the phase's parity. */
static void queue_phase_range(sim_volume_state *s, int phase, const int r[6], int64_t *n)
{
    const cm_kparams *kp = &s->kp;
    for (int z = r[4]; z < r[5]; z++)
        for (int y = r[2]; y < r[3]; y++)
            for (int x = r[0] + ((phase + r[0] + y + z) & 1); x < r[1]; x += 2) {
                int64_t i = x + (int64_t)kp->nx * (y + (int64_t)kp->ny * z);
                if (cm_relax_phase_of(kp, s->flags[i] & CM_CLASS_MASK, x, y, z) == phase)
                    queue_relax(s, (uint32_t)i, n);
            }
}

/* The frame's first candidates of the phase: every element of the blocks that were dirty at
 * the frame's start (nb of them in blk_list, flagged BLK_INIT), and of the blocks beside them
 * the face layer that touches them (the rest of those blocks has no neighbour that moved).
 * Blocks without a class of the phase are skipped. */
static void queue_dirty_blocks(sim_volume_state *s, int phase, uint8_t classes, int64_t nb,
                               int64_t *n)
{
    for (int64_t k = 0; k < nb; k++) {
        int64_t b = s->blk_list[k];
        int bc[3] = {(int)(b % s->bx), (int)((b / s->bx) % s->by),
                     (int)(b / ((int64_t)s->bx * s->by))};
        const int nbk[3] = {s->bx, s->by, s->bz};
        int r[6];
        vol_block_range(s, b, r);
        if (s->blk_classes[b] & classes)
            queue_phase_range(s, phase, r, n);
        for (int d = 0; d < 6; d++) {
            int a = d >> 1, up = d & 1, c[3] = {bc[0], bc[1], bc[2]};
            c[a] += up ? 1 : -1;
            if (c[a] < 0 || c[a] >= nbk[a])
                continue;
            int64_t nbr = blk_id(s, c[0], c[1], c[2]);
            if ((s->blk_flags[nbr] & BLK_INIT) || !(s->blk_classes[nbr] & classes))
                continue; /* queued whole, or nothing of the phase there */
            int face[6];
            memcpy(face, r, sizeof face);
            face[2 * a] = up ? r[2 * a + 1] : r[2 * a] - 1;
            face[2 * a + 1] = face[2 * a] + 1;
            queue_phase_range(s, phase, face, n);
        }
    }
}

/* The seeds gathered since the last relaxation become this one's first candidates: each seed
 * and its neighbours, once each, sorted by phase into seed_exp (phase p's at
 * [seed_at[p], seed_at[p + 1])); what moves from here on seeds the next relaxation. */
static void take_seeds(sim_volume_state *s)
{
    const cm_kparams *kp = &s->kp;
    uint32_t *t = s->seed_cur;
    s->seed_cur = s->seed_next;
    s->seed_next = t;
    s->nseed_cur = s->nseed_next;
    s->nseed_next = 0;
    int64_t count[CM_RELAX_PHASES] = {0};
    uint8_t *phase_of = s->scratch_status; /* free until the first phase is evaluated */
    s->pass_id++;
    int64_t m = 0;
    for (int64_t k = 0; k < s->nseed_cur; k++) {
        uint32_t i = s->seed_cur[k];
        s->seeded[i] = 0;
        s->blk_flags[vol_block_of(s, i)] &= (uint16_t)~BLK_SEEDS;
        int x, y, z;
        cm_coords(kp, i, &x, &y, &z);
        for (int d = -1; d < 6; d++) { /* the seed itself, then its neighbours */
            int64_t j = d < 0 ? (int64_t)i : cm_neighbour_of(kp, i, x, y, z, d);
            if (j < 0 || s->cand_stamp[j] == s->pass_id)
                continue;
            s->cand_stamp[j] = s->pass_id;
            int jx = x + (d == 1) - (d == 0), jy = y + (d == 3) - (d == 2),
                jz = z + (d == 5) - (d == 4);
            int p = cm_relax_phase_of(kp, s->flags[j] & CM_CLASS_MASK, jx, jy, jz);
            if (p < 0 || p >= CM_RELAX_PHASES)
                continue; /* in no phase: relaxation never moves it */
            s->cand_next[m] = (uint32_t)j;
            phase_of[m++] = (uint8_t)p;
            count[p]++;
        }
    }
    s->seed_at[0] = 0;
    for (int p = 0; p < CM_RELAX_PHASES; p++)
        s->seed_at[p + 1] = s->seed_at[p] + count[p];
    int64_t at[CM_RELAX_PHASES];
    memcpy(at, s->seed_at, sizeof at);
    for (int64_t k = 0; k < m; k++)
        s->seed_exp[at[phase_of[k]]++] = s->cand_next[k];
}

/* The frame's first candidates of the phase from the seeds (take_seeds). */
static void queue_seeds(sim_volume_state *s, int phase, int64_t *n)
{
    for (int64_t k = s->seed_at[phase]; k < s->seed_at[phase + 1]; k++)
        queue_relax(s, s->seed_exp[k], n);
}

/* Whether position p is outside the lattice box grown by the margin: what relaxation's clip
 * to the box would change (cm_relax_element_at). */
static int outside_box(const cm_kparams *kp, const float *p)
{
    const float hi[3] = {(float)(kp->nx - 1) + kp->margin, (float)(kp->ny - 1) + kp->margin,
                         (float)(kp->nz - 1) + kp->margin};
    for (int b = 0; b < 3; b++)
        if (p[b] < -kp->margin || p[b] > hi[b])
            return 1;
    return 0;
}

/* The repair's first candidates of the phase beyond the usual ones: the elements a pull
 * iteration left outside the box (s->outside), or, when those are unknown, every element of
 * the active blocks (whatever is away from its lattice point is in one). */
static void queue_outside(sim_volume_state *s, int phase, int64_t *n)
{
    if (s->outside_unknown) {
        for (int64_t k = 0; k < s->nactive; k++) {
            int r[6];
            vol_block_range(s, s->blk_active[k], r);
            queue_phase_range(s, phase, r, n);
        }
        return;
    }
    for (int64_t k = 0; k < s->noutside; k++)
        if (cm_relax_phase(&s->kp, s->outside[k], s->flags) == phase)
            queue_relax(s, s->outside[k], n);
}

/* Phase h's candidates: the elements an evaluation could move. One moves only when it moved at
 * its last evaluation (phase h - P: not at rest yet) or a neighbour moved since (phases h - P + 1
 * to h - 1); before any has been evaluated this frame (h < P), the elements in and beside the
 * blocks where something moved since relaxation last converged (queue_dirty_blocks). */
_Static_assert(CM_RELAX_PHASES == 4, "relax_candidates: phases are 2 x passive + parity");
static int64_t relax_candidates(sim_volume_state *s, const relax_work *w, int h, int64_t nb_init)
{
    const cm_kparams *kp = &s->kp;
    int phase = h % CM_RELAX_PHASES;
    int64_t n = 0, cap = s->nelem;
    s->pass_id++;
    if (s->full_sweeps) { /* the reference: every element of the phase, found the plain way */
        for (int64_t i = 0; i < s->nelem; i++)
            if (cm_relax_phase(kp, i, s->flags) == phase)
                queue_relax(s, (uint32_t)i, &n);
        return n;
    }
    if (h < CM_RELAX_PHASES) {
        queue_dirty_blocks(s, phase, w->classes[phase], nb_init, &n);
        queue_seeds(s, phase, &n);
    } else
        for (int64_t k = w->lo[phase]; k < w->hi[phase]; k++)
            queue_relax(s, s->cand[k % cap], &n);
    if (h >= w->npull && h < w->npull + CM_RELAX_PHASES)
        queue_outside(s, phase, &n);
    /* back = 2 is skipped: an element's neighbours have the other parity (x + y + z), and a
     * phase's parity is its own (cm_relax_phase_of), so phase h - 2's moves have no
     * neighbour in phase h. */
    for (int back = 1; back < CM_RELAX_PHASES && back <= h; back += 2) {
        int q = (h - back) % CM_RELAX_PHASES;
        for (int64_t k = w->lo[q]; k < w->hi[q]; k++) {
            uint32_t i = s->cand[k % cap];
            int x, y, z;
            cm_coords(kp, i, &x, &y, &z);
            for (int d = 0; d < 6; d++) {
                int64_t j = cm_neighbour_of(kp, i, x, y, z, d);
                int jx = x + (d == 1) - (d == 0), jy = y + (d == 3) - (d == 2),
                    jz = z + (d == 5) - (d == 4);
                if (j >= 0 &&
                    cm_relax_phase_of(kp, s->flags[j] & CM_CLASS_MASK, jx, jy, jz) == phase)
                    queue_relax(s, (uint32_t)j, &n);
            }
        }
    }
    return n;
}

/* Evaluate phase h's n candidates (s->cand_next) in place: no element reads another of its
 * own phase, so no thread reads what another writes and the order does not matter. Then, in
 * order, the ones that moved go on the ring as phase h's and mark their blocks. */
static void relax_evaluate(sim_volume_state *s, relax_work *w, int h, int64_t n, int npull)
{
    const cm_kparams *kp = &s->kp;
    const uint32_t *cand = s->cand_next;
    int pull = h < npull, nt = s->threads;
    (void)nt; /* unused when built without OpenMP */
#pragma omp parallel for num_threads(nt) schedule(static) if (n > 2048)
    for (int64_t k = 0; k < n; k++) {
        int64_t i = cand[k];
        int x, y, z;
        float o[3];
        cm_coords(kp, i, &x, &y, &z);
        s->scratch_status[k] =
            (uint8_t)cm_relax_element_at(kp, i, x, y, z, s->pos, s->flags, pull, o);
        if (s->scratch_status[k])
            memcpy(&s->pos[i * 3], o, sizeof o);
    }
    /* What a pull iteration left outside the box, the repair looks at again (what it moved
     * is looked at again anyway). */
    for (int64_t k = 0; pull && !s->full_sweeps && k < n; k++) {
        if (s->scratch_status[k] || s->outside_unknown ||
            !outside_box(kp, &s->pos[(size_t)cand[k] * 3]))
            continue;
        if (s->noutside == s->seed_cap)
            s->outside_unknown = 1;
        else
            s->outside[s->noutside++] = cand[k];
    }
    int phase = h % CM_RELAX_PHASES;
    w->lo[phase] = w->end;
    /* Moved in the last elastic iteration or in the repair: the pull may move it (or a
     * neighbour) again next frame. */
    int seed = h >= npull - CM_RELAX_PHASES;
    for (int64_t k = 0; k < n; k++)
        if (s->scratch_status[k]) {
            s->cand[w->end++ % s->nelem] = cand[k];
            vol_moved(s, cand[k], 0);
            if (seed)
                vol_seed(s, cand[k]);
        }
    w->hi[phase] = w->end;
}

/* Relaxation: relax_iterations iterations of CM_RELAX_PHASES phases, then up to
 * CM_REPAIR_ITERATIONS clip-only ones, each phase on its candidates alone (relax_candidates):
 * the elements that moved, their neighbours, and at the frame's start the elements in and
 * beside the blocks where something moved since relaxation last converged. Any other element would
 * not move, so the result is the CUDA backend's full sweeps bit for bit (full_sweeps here: every
 * element, every phase). Returns the elements evaluated. */
static int64_t relax(sim_volume_state *s)
{
    int64_t evaluated = 0, nb_init;
    int npull = CM_RELAX_PHASES * s->params.relax_iterations;
    int nphases = npull + (npull > 0 ? CM_RELAX_PHASES * CM_REPAIR_ITERATIONS : 0);
    relax_work w;
    memset(&w, 0, sizeof w);
    w.npull = npull;
    for (int phase = 0; phase < CM_RELAX_PHASES; phase++)
        for (int c = 0; c < CM_NCLASS; c++)
            if (cm_relax_phase_of(&s->kp, c, 0, 0, phase & 1) == phase)
                w.classes[phase] |= (uint8_t)(1u << c);
    nb_init = list_blocks(s, BLK_DIRTY);
    for (int64_t k = 0; k < nb_init; k++) { /* dirty at the start: BLK_INIT, until the end */
        uint16_t *f = &s->blk_flags[s->blk_list[k]];
        *f = (uint16_t)((*f | BLK_INIT) & ~BLK_DIRTY);
    }
    take_seeds(s);
    for (int h = 0; h < nphases; h++) {
        int64_t n = relax_candidates(s, &w, h, nb_init);
        evaluated += n;
        relax_evaluate(s, &w, h, n, npull);
        if (h == npull + CM_RELAX_PHASES - 1) /* the repair's first iteration looked at them */
            s->noutside = 0, s->outside_unknown = 0;
        int64_t recent = 0; /* moved in the last CM_RELAX_PHASES phases */
        for (int q = 0; q < CM_RELAX_PHASES; q++)
            recent += w.hi[q] - w.lo[q];
        if (!recent && h + 1 >= CM_RELAX_PHASES)
            break; /* nothing moved in a whole iteration: at rest, every band held */
    }
    /* What moved in the last elastic iteration or the repair may not have converged: those
     * elements seeded the next frame as they moved (relax_evaluate). */
    for (int64_t k = 0; k < nb_init; k++)
        s->blk_flags[s->blk_list[k]] &= (uint16_t)~BLK_INIT;
    return evaluated;
}

/* Displaced rigid tissue steps home (cm_rigid_return_element) on the blocks the wave left
 * it in; the elements that stepped seed this frame's wave. Returns how many stepped. */
static int64_t rigid_return(sim_volume_state *s)
{
    const cm_kparams *kp = &s->kp;
    if (!kp->rigid_free)
        return 0;
    int64_t n = list_blocks(s, BLK_RIGID), stepped = 0;
    for (int64_t k = 0; k < n; k++) { /* sequential: the seed list must be in a fixed order */
        int64_t b = s->blk_list[k];
        int r[6], moved = 0;
        vol_block_range(s, b, r);
        FOR_BLOCK_ELEMENTS(s, r, i)
        {
            float o[3];
            if (cm_rigid_return_element(kp, i, s->pos, s->flags, o)) {
                memcpy(&s->pos[i * 3], o, sizeof o);
                mark_reached(s, i, 0.0f);
                s->blk_rows[b] |= 1ull << ((y_ - r[2]) + VOL_BLOCK * (z_ - r[4]));
                moved = 1;
                stepped++;
            }
        }
        s->blk_flags[b] = moved ? (uint16_t)(s->blk_flags[b] | BLK_DIRTY | BLK_TOUCHED)
                                : (uint16_t)(s->blk_flags[b] & ~BLK_RIGID);
    }
    return stepped;
}

/* The rows of block b (range r) the inertial and velocity steps visit: those that may hold
 * motion (blk_rows), every one for the reference (full_sweeps); rows past the lattice's
 * edge left out. */
static uint64_t block_rows(const sim_volume_state *s, int64_t b, const int r[6])
{
    uint64_t rows = s->full_sweeps ? ~0ull : s->blk_rows[b];
    int ny = r[3] - r[2], nz = r[5] - r[4];
    if (ny == VOL_BLOCK && nz == VOL_BLOCK)
        return rows;
    uint64_t in = 0;
    for (int z = 0; z < nz; z++)
        in |= ((1ull << ny) - 1) << (VOL_BLOCK * z);
    return rows & in;
}

/* The elements of the rows of block range r, in order (rows ascending, then x), with their
 * row (row_, its bit in rows) and coordinates (x_, y_, z_). The middle loop runs once per
 * row: it only declares the row's coordinates for the loop over its elements. */
#define FOR_ROW_ELEMENTS(s, r, rows, i)                                                  \
    for (uint64_t m_ = (rows); m_; m_ &= m_ - 1)                                         \
        for (int row_ = __builtin_ctzll(m_), y_ = (r)[2] + (row_ & (VOL_BLOCK - 1)),     \
                 z_ = (r)[4] + (row_ >> VOL_BLOCK_SHIFT), x_ = (r)[0];                   \
             x_ < (r)[1]; x_ = (r)[1])                                                   \
            for (int64_t i = x_ + (int64_t)(s)->kp.nx * (y_ + (int64_t)(s)->kp.ny * z_), \
                         i##_end = i + ((r)[1] - (r)[0]);                                \
                 i < i##_end; i++, x_++)

/* The inertial step on the rows that hold a velocity, before anything else in a frame. */
static void inertia(sim_volume_state *s)
{
    const cm_kparams *kp = &s->kp;
    int nt = s->threads;
    (void)nt; /* unused when built without OpenMP */
    int64_t n = list_blocks(s, BLK_VEL);
#pragma omp parallel for num_threads(nt) schedule(dynamic, 4)
    for (int64_t k = 0; k < n; k++) {
        int64_t b = s->blk_list[k];
        int r[6], moved = 0;
        vol_block_range(s, b, r);
        FOR_ROW_ELEMENTS(s, r, block_rows(s, b, r), i)
        {
            moved |= cm_inertia_element(kp, i, s->pos, s->pos_prev, s->vel, s->flags);
        }
        if (moved)
            s->blk_flags[b] |= BLK_INERT | BLK_TOUCHED;
    }
    /* In order: what moved seeds relaxation (every element with a velocity, in the rows
     * where something may have moved: a superset of what moved costs an evaluation, never a
     * result). */
    for (int64_t k = 0; k < n; k++) {
        int64_t b = s->blk_list[k];
        if (!(s->blk_flags[b] & BLK_INERT))
            continue;
        s->blk_flags[b] &= (uint16_t)~BLK_INERT;
        int r[6];
        vol_block_range(s, b, r);
        FOR_ROW_ELEMENTS(s, r, block_rows(s, b, r), i)
        {
            const float *v = &s->vel[i * 3];
            if ((v[0] != 0.0f || v[1] != 0.0f || v[2] != 0.0f) && !(s->flags[i] & CM_FLAG_GRABBED))
                vol_seed(s, i);
        }
    }
}

/* 1 when each of v's three floats is +0 (-0 is not: the velocity step would turn it +0). */
static int vel_bits_zero(const float *v)
{
    uint32_t u[3];
    memcpy(u, v, sizeof u);
    return (u[0] | u[1] | u[2]) == 0;
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
        int r[6];
        int64_t bad = 0;
        double kin = 0.0, sp[SIM_NTISSUE] = {0.0, 0.0, 0.0, 0.0};
        uint64_t moving = 0; /* rows that hold a velocity after the step */
        float *row_max = &s->row_maxdisp[b * VOL_BLOCK_ROWS];
        vol_block_range(s, b, r);
        uint64_t rows = block_rows(s, b, r);
        for (uint64_t m = rows; m; m &= m - 1)
            row_max[__builtin_ctzll(m)] = 0.0f;
        FOR_ROW_ELEMENTS(s, r, rows, i)
        {
            cm_vel_out o =
                cm_velocity_element_at(kp, i, x_, y_, z_, s->pos, s->pos_prev, s->vel, s->flags);
            if (o.speed > 0.0f) {
                kin += (double)o.speed * (double)o.speed;
                sp[s->flags[i] & CM_CLASS_MASK] += (double)o.speed;
            }
            if (!(o.disp < CM_UNREACHED && o.speed < CM_UNREACHED))
                bad++; /* NaN or infinite: the step blew up (comparisons with NaN fail) */
            else
                row_max[row_] = cm_maxf(row_max[row_], o.disp);
            if (!vel_bits_zero(&s->vel[i * 3]))
                moving |= 1ull << row_;
        }
        /* A row left out did not move: its largest displacement is the one it had. */
        float maxd = 0.0f;
        for (int row = 0; row < VOL_BLOCK_ROWS; row++)
            maxd = cm_maxf(maxd, row_max[row]);
        s->blk_rows[b] = moving;
        s->blk_kinetic[b] = kin;
        for (int c = 0; c < SIM_NTISSUE; c++)
            s->blk_speed[b * SIM_NTISSUE + c] = sp[c];
        s->blk_maxdisp[b] = maxd;
        s->blk_nonfinite[b] = bad;
        uint16_t f = (uint16_t)(s->blk_flags[b] & ~(BLK_TOUCHED | BLK_VEL));
        if (moving)       /* any velocity bit (a NaN one too, whose speed is no number) */
            f |= BLK_VEL; /* the next frame's inertial step moves it */
        s->blk_flags[b] = f;
    }
    /* Reduce in block order: the same sums whatever the thread count; stamps in order too
     * (the stamp log is not thread safe). */
    double kin = 0.0, sp[SIM_NTISSUE] = {0.0, 0.0, 0.0, 0.0};
    int64_t bad = 0;
    for (int64_t k = 0; k < n; k++) {
        int64_t b = s->blk_list[k];
        vol_stamp_block(s, b); /* moved this frame, or holds a velocity: the surfaces look */
        bad += s->blk_nonfinite[b];
        kin += s->blk_kinetic[b];
        for (int c = 0; c < SIM_NTISSUE; c++)
            sp[c] += s->blk_speed[b * SIM_NTISSUE + c];
    }
    float maxd = 0.0f;
    int settled = 1;
    if (s->full_sweeps)
        vol_list_active(s);                    /* it visited unlisted blocks */
    for (int64_t k = 0; k < s->nactive; k++) { /* every displaced or flagged block is there */
        int64_t b = s->blk_active[k];
        maxd = cm_maxf(maxd, s->blk_maxdisp[b]);
        if (s->blk_flags[b] & (BLK_DIRTY | BLK_SEEDS | BLK_VEL))
            settled = 0;
        if ((s->blk_flags[b] & BLK_RIGID) && s->kp.rigid_free)
            settled = 0; /* bone still on its way home */
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
    inertia(s);
    int64_t stepped = rigid_return(s);
    if (in->deform || stepped > 0)
        mt->moved_elements = propagate(s, mt);
    double t1 = sc_now_ms();
    mt->relax_evaluations = relax(s);
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

/* The host arrays are the state: the probe's positions are read where they lie. */
static sim_status cpu_probe(sim_volume_state *s, char *err, size_t err_sz)
{
    (void)err;
    (void)err_sz;
    for (int g = 0; g < s->nprobe; g++)
        memcpy(&s->probe_pos[g * 3], &s->pos[(size_t)s->grab_idx[g] * 3], 3 * sizeof(float));
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
    .name = "cpu",
    .init = cpu_init,
    .fini = cpu_fini,
    .upload_all = cpu_noop,
    .sync_grab = cpu_sync_grab,
    .frame = cpu_frame,
    .frame_many = NULL, /* one after another: each frame already uses every thread it is given */
    .download = cpu_noop,
    .probe = cpu_probe,
};
