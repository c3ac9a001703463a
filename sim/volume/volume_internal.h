/* volume_internal.h: the volume scene's model, state and backend interface, shared by
 * volume_model.c, volume_state.c and the backends. Not part of the public surface. */
#ifndef SIM_VOLUME_INTERNAL_H
#define SIM_VOLUME_INTERNAL_H

#include "../core/backend_internal.h"
#include "kernels.h"
#include "surface.h"
#include "volume.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Blocks of 8^3 elements: the unit of activity tracking (relaxation and velocity run
 * only on blocks where something moved), as SP-ChainMail's active blocks. */
#define VOL_BLOCK_SHIFT 3
#define VOL_BLOCK       8
#define VOL_BLOCK_ROWS  64 /* rows of VOL_BLOCK elements along x in a block: one bit each */
#define VOL_QUEUE_CAP   256
#define VOL_MAX_GRAB    65536
/* Propagation passes between looks at the wave (the CUDA backend reads its counters back
 * this often): max_wave is checked at these boundaries on both backends, so both stop
 * after the same pass. */
#define VOL_PASS_BATCH 8

struct sim_volume_model {
    sim_volume vol; /* rest volume, HU */
    sim_surface_data surf[SIM_NSURFACE];
    sim_surface view[SIM_NSURFACE]; /* public read-only views of surf */
    sim_volume_model_options opt;   /* opt.class_override points at class_override below */
    uint8_t *class_override;        /* (nelem) or NULL: a sim_tissue or SIM_CLASS_BY_HU, owned */
};

typedef struct sim_volume_backend_i sim_volume_backend_i; /* below */

/* Block activity flags (bits of blk_flags). */
#define BLK_DIRTY   0x001u /* something in the block moved since relaxation last converged */
#define BLK_TOUCHED 0x002u /* moved this frame: the velocity step visits its rows (blk_rows) */
#define BLK_VEL     0x004u /* holds a non-zero velocity */
#define BLK_RIGID   0x200u /* holds rigid tissue the wave moved: it goes home when free */
#define BLK_SEEDS   0x010u /* holds seeds: elements that moved since relaxation last saw them */
#define BLK_INERT   0x020u /* within inertia: the inertial step moved something in it */
/* Relaxation's bookkeeping within one frame (see relax in sim/volume/cpu.c). */
#define BLK_INIT 0x008u /* dirty at the frame's start: the first iteration looks at it */

struct sim_volume_state {
    const sim_volume_model *m;
    sim_backend *be;
    const sim_volume_backend_i *impl; /* this scene's entry points on be */
    int threads;                      /* CPU threads for the next step, 1 to be->threads */
    sim_volume_params params;
    cm_kparams kp;
    int64_t nelem;

    /* Host arrays. On CUDA the device copy is authoritative and host_valid says
     * whether pos/vel here are current. */
    float *pos;      /* (nelem x 3) X, lattice units */
    float *pos_prev; /* (nelem x 3) X- of the next frame (== pos between frames) */
    float *vel;      /* (nelem x 3) V, lattice units per frame */
    uint8_t *flags;  /* (nelem) class | CM_FLAG_GRABBED */
    float *t_reach;  /* (nelem) wave arrival time, CM_UNREACHED if not reached */
    int host_valid;
    int64_t class_count[SIM_NTISSUE];

    /* Grab. */
    uint32_t *grab_idx; /* (ngrab) */
    float *grab_start;  /* (ngrab x 3) positions when grabbed */
    uint32_t *grab_old; /* (VOL_MAX_GRAB) scratch: the set just released */
    int ngrab;
    float grab_anchor[3]; /* lattice units */
    /* Offsets the grabbed set may be moved by (from grab_start), per axis: inside the
     * lattice box with room for the links ahead at their shortest. */
    float grab_off_lo[3], grab_off_hi[3];
    int grab_moved;   /* a move was applied this frame: seed the wave */
    int grab_clamped; /* ... and was cut short at the box */
    /* The probe: the last grab's elements (grab_idx[0..nprobe), kept after the release,
     * when the ringing happens), their mean rest position, their mean position at the end
     * of the last frame, and the offset of the last move (the pull), lattice units. */
    int nprobe;
    float probe_rest[3], probe_prev[3], probe_pull[3];
    float *probe_pos; /* (VOL_MAX_GRAB x 3) scratch: the probe's positions */

    /* Propagation wave of this frame (CPU frontier lists; CUDA keeps its own). */
    float clock;
    uint32_t *cand, *cand_next; /* (nelem) candidate elements of this / next pass */
    int64_t ncand;
    uint32_t *cand_stamp; /* (nelem) pass id that last queued the element */
    uint32_t pass_id;
    uint32_t *reached; /* (nelem) elements the wave moved */
    int64_t nreached;
    float *scratch_pos;      /* (nelem x 3) */
    float *scratch_t;        /* (nelem) */
    uint8_t *scratch_status; /* (nelem) */

    /* Blocks. */
    int bx, by, bz;
    int64_t nblocks;
    uint16_t *blk_flags; /* (nblocks) BLK_* */
    uint32_t *blk_list;  /* (nblocks) scratch list of block ids */
    /* The active blocks: every block with a flag or a displacement is listed (blk_listed),
     * so that a frame walks these, never every block (vol_flag_block keeps it so). */
    uint32_t *blk_active; /* (nblocks), nactive of them, in no order */
    int64_t nactive;
    uint8_t *blk_listed; /* (nblocks) 1: in blk_active */
    /* Relaxation's seeds: the elements that moved since relaxation last looked at them
     * (the wave, the inertial step, relaxation's own last moves), so that the first
     * iteration looks at them and their neighbours rather than at their whole blocks (a
     * BLK_DIRTY block is looked at whole: events, rigid tissue going home, and seeds past
     * the cap). seed_next fills during a frame; relaxation takes it as seed_cur. */
    uint32_t *seed_cur, *seed_next; /* (seed_cap) */
    int64_t nseed_cur, nseed_next, seed_cap;
    uint32_t *seed_exp; /* (7 seed_cap) seed_cur and its neighbours, by phase (take_seeds) */
    int64_t seed_at[CM_RELAX_PHASES + 1];
    uint8_t *seeded; /* (nelem) 1: in seed_next */
    /* Elements a pull iteration of relaxation looked at outside the lattice box grown by the
     * margin, since the last repair began: the repair's first iteration looks at them again.
     * A band may hold an element out there; a pull iteration then leaves it where it is,
     * while a clip-only (repair) one, with the same neighbours, clips it to the box (the
     * band accepts the box within CM_BAND_TOL). Inside the box, an element a pull iteration
     * left alone a repair iteration leaves alone too (see relax in cpu.c). outside_unknown:
     * more than seed_cap of them; the repair's first iteration looks at every element of the
     * active blocks. */
    uint32_t *outside; /* (seed_cap) */
    int64_t noutside;
    int outside_unknown;
    double *blk_kinetic;    /* (nblocks) per-block sums, reduced in block order */
    float *blk_maxdisp;     /* (nblocks) */
    double *blk_speed;      /* (nblocks x SIM_NTISSUE) */
    int64_t *blk_nonfinite; /* (nblocks) elements found NaN or infinite */
    uint8_t *blk_classes;   /* (nblocks) bit c set: the block holds tissue class c */
    /* Within a block, the rows (VOL_BLOCK elements along x; row (y & 7) + 8 (z & 7)) that
     * may hold motion: bit r of blk_rows[b] is set for every row with a velocity and every
     * row with a position written since the velocity step last looked at it (vol_moved).
     * The inertial and velocity steps visit these rows of their blocks, not the whole
     * blocks: a pull moves a few rows of each block it reaches, and with cold caches a
     * visit costs its memory reads. A row left out would not change (bit for bit).
     * row_maxdisp: each row's largest finite displacement, as the velocity step last found
     * it (a row it did not visit did not move), so a block's is the largest of 64. */
    uint64_t *blk_rows; /* (nblocks) */
    float *row_maxdisp; /* (nblocks x VOL_BLOCK_ROWS) */
    /* Where positions changed, for the surfaces' incremental evaluation
     * (sim_volume_surface_update): a block's positions may have changed since generation g
     * when blk_pos_gen[b] >= g. Every position write stamps its block with pos_gen (the
     * velocity step stamps every block it visits, which is every block moved this frame);
     * a surface update advances pos_gen. Not part of the physics: not in snapshots.
     * The stamp log lists the blocks in the order they were stamped, each once a
     * generation (a ring of nblocks: one generation always fits), so that an update
     * looks at the blocks stamped since its viewer's last, not at every run of the
     * surface; generations up to stamp_lost may have left the ring (an update from
     * that far back, or after vol_stamp_all, looks at every run). */
    uint64_t *blk_pos_gen; /* (nblocks) */
    uint64_t pos_gen;
    uint32_t *stamp_log;     /* (nblocks) ring of block ids ... */
    uint64_t *stamp_log_gen; /* (nblocks) ... and the generation each was stamped in */
    int64_t stamp_log_n;     /* entries ever logged: the next goes to stamp_log_n % nblocks */
    uint64_t stamp_lost;
    uint32_t *run_scratch; /* (the surfaces' largest nrun) the runs an update looks at, */
    uint64_t *run_bits;    /* (as many bits) gathered here first: each once, in order */

    /* Events queued by push_event for the next step (VOL_QUEUE_CAP, allocated by the first
     * push: a caller that applies its events at once, as the server does, never pays). */
    sim_volume_event *queue;
    int qhead, qcount;

    uint64_t frame;
    uint32_t last_seq;
    uint32_t guard_resets; /* resets after a NaN or infinity (MuJoCo's mj_checkPos idea) */
    int settled;
    sim_volume_metrics last;
    double step_ms; /* the step under way's own time so far, ms (step_begin, the frame) */

    void *dev; /* backend private state */
    /* Tests only: the CPU backend visits every block, as the CUDA backend does, so a
     * test can show that visiting only the active blocks changes nothing. */
    int full_sweeps;
};

/* blk_classes from the elements' classes: after anything that sets them. */
void vol_block_classes(sim_volume_state *s);

/* The 8^3 block that holds element i. */
static inline int64_t vol_block_of(const sim_volume_state *s, int64_t i)
{
    int x, y, z;
    cm_coords(&s->kp, i, &x, &y, &z);
    return (x >> VOL_BLOCK_SHIFT) +
           (int64_t)s->bx * ((y >> VOL_BLOCK_SHIFT) + (int64_t)s->by * (z >> VOL_BLOCK_SHIFT));
}

/* The elements of block b: [x0,x1) x [y0,y1) x [z0,z1), into r[6]. */
static inline void vol_block_range(const sim_volume_state *s, int64_t b, int r[6])
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

/* qsort's order of element and block ids (uint32_t), ascending. */
static inline int vol_cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

/* Block b gets flags f, and joins the active list (sequential code only: the list is not
 * thread safe; a parallel step only sets flags on blocks it was handed from the list). */
static inline void vol_flag_block(sim_volume_state *s, int64_t b, uint16_t f)
{
    s->blk_flags[b] |= f;
    if (!s->blk_listed[b]) {
        s->blk_listed[b] = 1;
        s->blk_active[s->nactive++] = (uint32_t)b;
    }
}

/* The row bit (in blk_rows) of element i within its block b. */
static inline uint64_t vol_row_bit(const sim_volume_state *s, int64_t i, int64_t *b)
{
    int x, y, z;
    cm_coords(&s->kp, i, &x, &y, &z);
    *b = (x >> VOL_BLOCK_SHIFT) +
         (int64_t)s->bx * ((y >> VOL_BLOCK_SHIFT) + (int64_t)s->by * (z >> VOL_BLOCK_SHIFT));
    return 1ull << ((y & (VOL_BLOCK - 1)) + VOL_BLOCK * (z & (VOL_BLOCK - 1)));
}

/* Element i's position was written: its block gets BLK_TOUCHED and flags f, and its row is
 * one the velocity step visits. Sequential code only (vol_flag_block). */
static inline void vol_moved(sim_volume_state *s, int64_t i, uint16_t f)
{
    int64_t b;
    uint64_t bit = vol_row_bit(s, i, &b);
    s->blk_rows[b] |= bit;
    vol_flag_block(s, b, (uint16_t)(f | BLK_TOUCHED));
}

/* Element i moved: relaxation's next first iteration looks at it and its neighbours (a seed);
 * past the cap, at its whole block. Sequential code only. */
static inline void vol_seed(sim_volume_state *s, int64_t i)
{
    int64_t b = vol_block_of(s, i);
    if (s->seeded[i])
        return;
    if (s->nseed_next == s->seed_cap) {
        vol_flag_block(s, b, BLK_DIRTY);
        return;
    }
    s->seeded[i] = 1;
    s->seed_next[s->nseed_next++] = (uint32_t)i;
    vol_flag_block(s, b, BLK_SEEDS);
}

/* The active list again from blk_flags and blk_maxdisp, after they were set wholesale (a
 * reset, a restore, a reclassification). */
void vol_list_active(sim_volume_state *s);

/* Block bookkeeping from the positions and velocities themselves (a restore): each block's
 * largest displacement, and on top of the flags it has, dirty wherever something is away
 * from home and BLK_VEL wherever something moves. A snapshot's own block fields are only
 * as good as its backend's: the CUDA backend keeps none on the host. O(volume), once. */
void vol_blocks_from_state(sim_volume_state *s);

/* Positions of block b may have changed (sim_volume_surface_update looks again): its
 * stamp, logged the first time in a generation. Sequential code only. */
static inline void vol_stamp_block(sim_volume_state *s, int64_t b)
{
    if (s->blk_pos_gen[b] == s->pos_gen)
        return; /* stamped and logged already in this generation */
    s->blk_pos_gen[b] = s->pos_gen;
    int64_t at = s->stamp_log_n++ % s->nblocks;
    /* The ring's oldest entry goes. stamp_lost never goes back: after vol_stamp_all it is
     * newer than anything the ring still holds. */
    if (s->stamp_log_n > s->nblocks && s->stamp_log_gen[at] > s->stamp_lost)
        s->stamp_lost = s->stamp_log_gen[at];
    s->stamp_log[at] = (uint32_t)b;
    s->stamp_log_gen[at] = s->pos_gen;
}

/* Every position may have changed: a reset, a restore, a download from the device. */
static inline void vol_stamp_all(sim_volume_state *s)
{
    for (int64_t b = 0; b < s->nblocks; b++)
        s->blk_pos_gen[b] = s->pos_gen;
    s->stamp_lost = s->pos_gen; /* not logged: an update looks at every run */
}

/* What one frame asks of the backend after the events are applied. */
typedef struct vol_frame_in {
    int deform; /* a grab moved this frame: run a propagation wave from it */
} vol_frame_in;

/* The volume scene's backend entry points (ggml's backend_i). Called on the state's
 * thread. The generic layer applies events on the host arrays and then calls
 * sync_grab so the backend can take the grabbed elements' positions and flags. */
struct sim_volume_backend_i {
    const char *name;
    sim_status (*init)(sim_volume_state *s, char *err, size_t err_sz);
    void (*fini)(sim_volume_state *s);
    /* All host arrays changed (create, reset, reclassification). */
    sim_status (*upload_all)(sim_volume_state *s, char *err, size_t err_sz);
    /* The grabbed set, its flags or positions changed on the host. old_idx/nold: the
     * elements that were grabbed before (their flags changed back). */
    sim_status (*sync_grab)(sim_volume_state *s, const uint32_t *old_idx, int nold, char *err,
                            size_t err_sz);
    /* Propagate (when in->deform), relax, velocity; fill metrics (nonfinite included);
     * set s->settled. */
    sim_status (*frame)(sim_volume_state *s, const vol_frame_in *in, sim_volume_metrics *mt,
                        char *err, size_t err_sz);
    /* Optional: frame for n states of this backend at once, as n calls of frame would (bit
     * for bit), each launch covering them all. One status for the batch. */
    sim_status (*frame_many)(sim_volume_state *const *s, const vol_frame_in *in,
                             sim_volume_metrics *const *mt, int n, char *err, size_t err_sz);
    /* Make host pos/vel current. */
    sim_status (*download)(sim_volume_state *s, char *err, size_t err_sz);
    /* Positions of the probe (the first nprobe grabbed indices, as grab_idx holds them
     * since the last grab) into s->probe_pos, without a whole download. */
    sim_status (*probe)(sim_volume_state *s, char *err, size_t err_sz);
};

/* Back to the state sim_volume_state_create leaves (under s->params): classes from the HU,
 * everything at rest, nothing grabbed; the backend's copy too (a failed restore). */
void vol_state_reset(sim_volume_state *s);

extern const sim_volume_backend_i vol_cpu_backend;
/* The entry points for a backend's kind. */
const sim_volume_backend_i *vol_backend_for(const sim_backend *b);
#if SIM_HAVE_CUDA
extern const sim_volume_backend_i vol_cuda_backend;

#endif

/* Flatten params into kernel tables (model dims from m). */
void vol_pack_kparams(cm_kparams *kp, const sim_volume_params *p, const sim_volume *vol);
/* Tissue class of a HU value under the thresholds. */
int vol_classify(const sim_volume_params *p, float hu);
/* 1 when s ends with the lower-case suffix, ignoring case (volume_load.c). */
int vol_ends_with_ci(const char *s, const char *suffix);
/* The smallest block-average factor f that brings dims n, each grown by pad after the
 * averaging, to at most budget elements (volume_io.c; sim_volume_fit and the loader). */
int vol_fit_factor(const int n[3], const int pad[3], size_t budget);
/* The RAS axis an orientation letter names (a sim_volume's orientation: where each stored
 * axis points): 0 for L or R, 1 for P or A, 2 for I or S. */
static inline int vol_letter_axis(char c)
{
    return (c == 'L' || c == 'R') ? 0 : (c == 'P' || c == 'A') ? 1 : 2;
}

/* Loaders (volume_orient.c): turn v, as stored, to the RAS lattice. dir[3w+a] is the RAS
 * component w (x right, y anterior, z superior) of stored axis a's direction, any length
 * (NIfTI's affine as it is; DICOM's LPS with x and y negated). Each axis goes to its nearest
 * patient axis, voxels permuted and flipped exactly; sets v->orientation (where the stored
 * axes pointed, "LPS") and v->oblique_deg. `what` names the source in messages. */
sim_status vol_to_ras(sim_volume *v, const double dir[9], const char *what, char *err,
                      size_t err_sz);

/* DICOM (dicom.cpp, built with GDCM): read a series of the folder dir (or of the file dir
 * alone), as sim_volume_load_dicom; pick_file (may be NULL): without series_uid, read this
 * file's series. Turned to the RAS lattice; *out zeroed on failure. */
sim_status vol_dicom_read(sim_volume *out, const char *dir, const char *series_uid,
                          const char *pick_file, const sim_volume_limits *lim,
                          sim_volume_info *info, char *err, size_t err_sz);
/* .zip (volume_zip.c, built with libzip): unpack path into a new private folder (its name
 * into dir), refusing traversal, links, encryption, more than max_bytes uncompressed (0: 4
 * GiB) and zip bombs before anything is written; nothing is left behind on failure. */
/* The same checks from the central directory, nothing unpacked (an upload, once whole). */
sim_status vol_zip_check(const char *path, uint64_t max_bytes, char *err, size_t err_sz);
sim_status vol_unzip(const char *path, uint64_t max_bytes, char *dir, size_t dir_sz, int *nentries,
                     char *err, size_t err_sz);
/* Remove a file or a folder and all it holds (links removed, never followed); 0 on success. */
int vol_remove_tree(const char *path);

#ifdef __cplusplus
}
#endif
#endif
