/* cloth_internal.h: the cloth scene's model (LOD meshes, constraints, mapping tables),
 * its per-character state, and the backend interface that solves a garment. */
#ifndef SIM_CLOTH_INTERNAL_H
#define SIM_CLOTH_INTERNAL_H

#include "../core/backend_internal.h"
#include "cloth.h"
#include "kernels.h"

#ifdef __cplusplus
extern "C" {
#endif

#define CLOTH_MAX_COLOURS 64
#define CLOTH_MAX_CAPS    SIM_CLOTH_BODY_CAPS
#define CLOTH_QUEUE_CAP   256
#define CLOTH_ACCEL_HIST  8   /* frames of acceleration kept to judge settling */
#define CLOTH_SETTLE_CAP  120 /* frames a switch is watched before it counts as unsettled */

enum { CLOTH_STRETCH = 0, CLOTH_BEND = 1 };

/* One level of detail of the garment, in the character's root frame at rest. */
typedef struct cloth_lod {
    int cols, rows, n, ntri, ncons;
    /* Compliances are given for LOD 0; a coarser LOD scales them by its edge length over
     * LOD 0's, so that the garment as a whole is as stiff (a chain of fewer, longer links
     * in series; a fold held by fewer, longer bending links) at every LOD. */
    float compliance_scale;
    float *rest;   /* (n x 3) rest positions, root frame, m */
    float *w;      /* (n) inverse mass at rest: 0 = pinned to the character */
    uint32_t *tri; /* (ntri x 3) */
    /* Constraints sorted by colour: [colour_start[c], colour_start[c + 1]) share no particle. */
    int32_t *ca, *cb;
    float *crest;
    uint8_t *ckind;
    int ncolours;
    int colour_start[CLOTH_MAX_COLOURS + 1];
    int bend_start[CLOTH_MAX_COLOURS]; /* in colour c: stretch before it, bending from it */
    /* Vertex adjacency (CSR), for vertices whose mapping is invalid. */
    int32_t *adj_start, *adj;
} cloth_lod;

/* Source LOD -> target LOD: for each target vertex the source triangle at rest nearest to
 * it, the barycentric weights of the nearest point, the signed offset along the source
 * triangle's normal, and the distance (valid when within the scene's map_max_distance). */
typedef struct cloth_map {
    int n;
    int32_t *tri;
    float *bary;   /* (n x 3) */
    float *offset; /* (n) */
    float *dist;   /* (n) */
} cloth_map;

struct sim_cloth_model {
    sim_cloth_model_options opt;
    int nlod;
    cloth_lod lod[SIM_CLOTH_NLOD];
    cloth_map map[SIM_CLOTH_NLOD][SIM_CLOTH_NLOD]; /* [from][to], from != to */
};

/* The particles of one garment at one LOD. */
typedef struct cloth_garment {
    int lod, n;
    float *x, *v, *xp, *w; /* (n x 3), (n x 3), (n x 3), (n) */
    float *lambda;         /* (ncons) multipliers of the current substep */
} cloth_garment;

/* The character's pose: root position (feet) and heading, and what moves them. */
typedef struct cloth_pose {
    float pos[3], yaw;
    float vel[3], yaw_rate;
    float phase; /* gait phase, radians */
} cloth_pose;

typedef struct cloth_character {
    sim_motion motion;
    double t;          /* time in the motion, s */
    cloth_pose pose;   /* at the start of the frame */
    int forced_lod;    /* -1: by camera distance */
    int hold;          /* frames since the last switch */
    cloth_garment g;   /* the garment being shown */
    cloth_garment src; /* while blending after a switch: the source, still simulated */
    int blend;         /* frames since the switch while blending (0: not blending) */
    int grab_vertex;   /* -1: none */
    float grab_point[3];
    float accel[CLOTH_ACCEL_HIST]; /* max |dv| per frame, newest last */
    float *v_last;                 /* (n x 3) velocities at the end of the last frame */
    int has_switch;
    sim_cloth_switch last;
    float accel_base; /* mean acceleration before the last switch */
    int watching;     /* frames since the last switch while it is being watched */
} cloth_character;

/* Colliders and attachment of one substep, filled by the scene for the solver. */
typedef struct cloth_body {
    xp_capsule caps[CLOTH_MAX_CAPS];
    int ncaps;
    float root[3], yaw; /* pose at the end of the substep */
} cloth_body;

/* The cloth scene's backend entry points: advance one garment by a frame. pose0/pose1:
 * the character at the start and end of the frame (attachments and colliders are
 * interpolated per substep). Returns the deepest penetration seen. */
typedef struct sim_cloth_backend_i sim_cloth_backend_i;
struct sim_cloth_backend_i {
    const char *name;
    float (*solve)(const sim_cloth_model *m, cloth_garment *g, const cloth_pose *p0,
                   const cloth_pose *p1, const sim_cloth_params *prm, int threads);
};

extern const sim_cloth_backend_i cloth_cpu_backend;
#if SIM_HAVE_CUDA
extern const sim_cloth_backend_i cloth_cuda_backend;
#endif

/* The solver for a backend's kind. */
static inline const sim_cloth_backend_i *cloth_backend_for(const sim_backend *b)
{
#if SIM_HAVE_CUDA
    if (b->kind == SIM_BACKEND_CUDA)
        return &cloth_cuda_backend;
#endif
    (void)b;
    return &cloth_cpu_backend;
}

/* Scratch for a switch or a blend: sized for the largest LOD. */
typedef struct map_scratch {
    float *xm, *vm, *xr, *vr;
    uint8_t *valid;
} map_scratch;

/* The scene (cloth_scene.c; saved and restored by cloth_snapshot.c). */
struct sim_cloth_scene {
    const sim_cloth_model *m;
    sim_backend *be;
    const sim_cloth_backend_i *impl; /* this scene's solver on be */
    sim_cloth_params prm;
    int nchar;
    cloth_character *ch;
    float camera[3];
    uint64_t frame;
    sim_cloth_event *queue; /* (CLOTH_QUEUE_CAP) push_event's, allocated by the first push */
    int qcount;
    int threads;          /* 1 to be->threads */
    map_scratch *scratch; /* (be->threads): one per thread of a step, made with the scene */
};

/* A garment at a LOD: x, v, xp zero, w the LOD's (0, or -1 out of memory, g then empty). */
int cloth_garment_alloc(const sim_cloth_model *m, int lod, cloth_garment *g);
void cloth_garment_free(cloth_garment *g);
/* The checks every event passes (the scene's size and the model only). */
sim_status cloth_check_event(const sim_cloth_scene *s, const sim_cloth_event *ev, char *err,
                             size_t err_sz);

/* Shared by the backends (cloth_scene.c). */
void cloth_body_at(const sim_cloth_model *m, const cloth_pose *p0, const cloth_pose *p1, float s,
                   cloth_body *out);
/* World position of root-frame point q under the body's pose. */
void cloth_to_world(const cloth_body *b, const float q[3], float out[3]);
/* Unit normal of triangle t of positions x (zero when degenerate). */
void cloth_triangle_normal(const uint32_t *tri, int t, const float *x, float n[3]);
/* Pinned particles follow the character: place them for the body's pose. */
void cloth_place_pinned(const sim_cloth_model *m, cloth_garment *g, const cloth_body *b);

#ifdef __cplusplus
}
#endif
#endif
