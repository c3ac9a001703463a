/* softbody_internal.h: the softbody scene's model (topology, rest data, constraint colours),
 * its state, and the backend interface that advances a state by a frame. */
#ifndef SIM_SOFTBODY_INTERNAL_H
#define SIM_SOFTBODY_INTERNAL_H

#include "../core/backend_internal.h"
#include "kernels.h"
#include "softbody.h"

#ifdef __cplusplus
extern "C" {
#endif

#define SB_CHUNK   256 /* particles per partial sum of shape matching (a fixed order) */
#define SB_NPLANES (SIM_SOFTBODY_MAX_PLANES + 1) /* the user's planes and the floor */

/* Constraints sorted by colour: items [start[c], start[c + 1]) share no particle, so a
 * colour is solved in parallel with the same result as in sequence; colours go in order. */
typedef struct sb_colours {
    int n;
    int *start; /* (n + 1) */
} sb_colours;

struct sim_softbody_model {
    sim_softbody_info info;
    int n;       /* particles */
    float *rest; /* (n x 3) m */
    int ntri;
    uint32_t *tri; /* (ntri x 3) the rendered surface: the mesh or the embedded one */
    /* Distance constraints (mesh or tet edges), sorted by colour. */
    int nedge;
    int32_t *ea, *eb;
    float *erest; /* (nedge) m */
    float *evol;  /* hybrid: (nedge x NREGION) tet volume each region lends the edge */
    sb_colours ecol;
    /* Surface: shape matching's rest offsets from the rest centre; the volume constraint's
     * triangles round each vertex, as (j, k) of its triangles (i, j, k), and 6 V0. */
    float *q;                  /* (n x 3) */
    int32_t *vt_start, *vt_jk; /* (n + 1), (3 ntri x 2) */
    float rest6;
    /* Hybrid: tets sorted by colour (a colour's tets are read in sequence), within a colour
     * those without springs first; tet_user is tet in the caller's order, for
     * sim_softbody_model_tets. */
    int ntet, nregion;
    int32_t *tet;      /* (ntet x 4), turned positive */
    uint8_t *region;   /* (ntet) */
    float *tvol;       /* (ntet) rest volume, m^3 */
    int32_t *tet_user; /* (ntet x 4) */
    uint8_t *region_user;
    sb_colours tcol;
    /* Boundary tets (a vertex shared with a tet of another region) carry four springs. */
    int nbound;
    int32_t *bidx;   /* (ntet) index into the boundary arrays, -1 when not on one */
    uint8_t *bother; /* (nbound) the other region (most of its vertices touch) */
    float *brest;    /* (nbound x 4) rest distance of each vertex to the centre */
    int32_t *btet;   /* (nbound) the tet */
    int nembed;
    int32_t *etet; /* (nembed) */
    float *ew;     /* (nembed x 4) */
};

typedef struct sb_userplane {
    int id, attached; /* attached: n, d in the parent's frame */
    float n[3], d;
} sb_userplane;

struct sim_softbody_state {
    const sim_softbody_model *m;
    sim_backend *b;
    int threads;
    sim_softbody_params prm;
    float *x, *v, *xp; /* (n x 3) world m, velocity relative to the parent m/s, substep start */
    float *w_free;     /* (n) inverse mass from the parameters, 1/kg */
    float *w;          /* (n) the solver's: 0 where pinned */
    uint8_t *pinned;   /* (n) */
    float *ealpha;     /* (nedge) hybrid edge compliance, m/N */
    float *ecoef;      /* (nedge x 4) per edge from the masses and parameters (sb_edge_update):
                        * surface: each end's share of a projection (sb_distance); hybrid: w_a,
                        * w_b, alpha / h^2, 1 / (w_a + w_b + alpha / h^2) (sb_xpbd_distance) */
    float *talpha;     /* (ntet) volume compliance, m^6/J */
    float *balpha;     /* (nbound x 4) spring compliance, m/N */
    float *lambda;     /* (nedge + ntet + 4 nbound) multipliers of the current substep */
    float *surf;       /* (nembed x 3) hybrid: the embedded surface */
    float *partial;    /* (nchunk x 12) shape matching's partial sums: x (3), then A_pq (9) */
    float *grad;       /* (n x 3) the volume constraint's gradient */
    float *vpart;      /* (nchunk x 2) its partial sums: (x - o) . g and w |g|^2 */
    float quat[4];     /* shape matching's rotation, the warm start of the next */
    float scratch[16]; /* a frame's values shared by its threads (cpu.c) */
    float ppos[3], pquat[4]; /* parent pose set by the caller */
    float cpos[3], cquat[4]; /* parent pose the particles were last carried to */
    sb_userplane planes[SIM_SOFTBODY_MAX_PLANES];
    int nplanes, next_plane_id;
    int ngrab;
    int32_t *grab_idx; /* (n) */
    float *grab_off;   /* (n x 3) */
    float hand[3];
    int guard_resets;
};

/* What a backend gets for one frame: the planes in the world, already placed. */
typedef struct sb_frame {
    sb_plane planes[SB_NPLANES];
    int nplanes;
} sb_frame;

typedef struct sim_softbody_backend_i {
    const char *name;
    /* Advance s by one frame (substeps); the carry by the parent is done. */
    sim_status (*solve)(const sim_softbody_model *m, sim_softbody_state *s, const sb_frame *f,
                        int threads);
} sim_softbody_backend_i;

extern const sim_softbody_backend_i sb_cpu_backend;
#if SIM_HAVE_CUDA
extern const sim_softbody_backend_i sb_cuda_backend;
#endif

static inline const sim_softbody_backend_i *sb_backend_for(const sim_backend *b)
{
#if SIM_HAVE_CUDA
    if (b->kind == SIM_BACKEND_CUDA)
        return &sb_cuda_backend;
#endif
    (void)b;
    return &sb_cpu_backend;
}

/* Shared by the backends (sb_state.c). */
/* Per-iteration PBD stiffness that removes k of the error over n iterations. */
float sb_iteration_stiffness(float k, int n);
/* Substeps per frame and iterations per substep of model m's kind (params.def). */
static inline int sb_substeps(const sim_softbody_model *m, const sim_softbody_params *p)
{
    return m->info.kind == SIM_SOFTBODY_HYBRID ? p->hybrid_substeps : p->substeps;
}
static inline int sb_iterations(const sim_softbody_model *m, const sim_softbody_params *p)
{
    return m->info.kind == SIM_SOFTBODY_HYBRID ? p->hybrid_iterations : p->iterations;
}
static inline int sb_nchunk(int n)
{
    return (n + SB_CHUNK - 1) / SB_CHUNK;
}

/* sb_state.c: the rigid motion from pose (q0, t0) to pose (q1, t1): x -> R x + t. */
void sb_pose_delta(const float q0[4], const float t0[3], const float q1[4], const float t1[3],
                   float R[9], float t[3]);
/* sb_state.c: the edges' coefficients (ecoef) from the solver's masses and parameters (after
 * either changes). */
void sb_edge_update(sim_softbody_state *s);
/* sb_frame.c: the embedded surface at the current positions (hybrid; nothing for surface). */
void sb_place_surface(sim_softbody_state *s);
/* Translate n points (x, y, z) so their box is centred on x = y = 0 with its lowest point at
 * z = 0 (sb_mesh.c): a mesh or a tet model put on a floor at the origin. */
void sb_rest_on_floor(float *x, int n);

/* sb_model.c: greedy colouring by passes of items of k particles each (idx: nitem x k);
 * order receives the items sorted by colour. */
int sb_colour(const int32_t *idx, int nitem, int k, int n, int32_t *order, sb_colours *out);

/* An edge found in an element, with the tet volume it lends from region `region`. */
typedef struct sb_raw_edge {
    uint64_t key; /* lo << 32 | hi */
    float vol;
    int region;
} sb_raw_edge;
sb_raw_edge sb_make_edge(int32_t a, int32_t b, float vol, int region);
/* The unique edges of raw (sorted here), coloured, into m->ea, eb, erest, ecol, and evol
 * (nedge x NREGION) when volumes is set. Needs m->n and m->rest. Returns 0 when out of
 * memory. */
int sb_build_edges(sim_softbody_model *m, sb_raw_edge *raw, int nraw, int volumes);
/* m->info's sizes and counts from the built model. */
void sb_model_bounds(sim_softbody_model *m);

#ifdef __cplusplus
}
#endif
#endif
