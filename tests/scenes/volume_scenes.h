/* volume_scenes.h: volume scenes and interaction scripts written once, used by the
 * tests and the bench alike (Box2D's shared/benchmarks.c). */
#ifndef TESTS_SCENES_VOLUME_SCENES_H
#define TESTS_SCENES_VOLUME_SCENES_H

#include "sim/volume/volume.h"

/* A volume of one HU value everywhere, spacing 1 mm. */
sim_status vs_uniform_volume(sim_volume *out, int nx, int ny, int nz, float hu);

/* A lattice point on the skin at the front of the belly (x and z at the middle), found
 * by walking in from the anterior side until the HU reaches the skin threshold. */
void vs_belly_point(const sim_volume *v, float hu_skin, float out[3]);

/* A model + backend + state bundle. */
typedef struct vs_scene {
    sim_volume_model *model;
    sim_backend *backend;
    sim_volume_state *state;
} vs_scene;

sim_status vs_scene_create(vs_scene *sc, const sim_volume *vol, sim_backend_kind kind, int threads,
                           char *err, size_t err_sz);
void vs_scene_destroy(vs_scene *sc);

/* Push one event of the given type (no payload) or with a point. */
sim_status vs_push(sim_volume_state *s, sim_event_type type, const float *point, float radius);
/* Replace the parameters (queued, applied at the next step). */
sim_status vs_set_params(sim_volume_state *s, const sim_volume_params *p);

/* A test's own random numbers, the same on every machine: a linear congruential step of *x
 * (its top 24 bits), and a float in [lo, hi] from it. */
uint32_t vs_rand(uint32_t *x);
float vs_uniform(uint32_t *x, float lo, float hi);

/* Pull-and-release: grab at the belly, pull `pull` lattice units outward along +y over
 * pull_frames, hold hold_frames, release, then step up to max_after frames until the
 * state settles. The probe is the grabbed point's nearest element. */
typedef struct vs_release_opts {
    float pull;
    float radius;
    int pull_frames, hold_frames, max_after;
} vs_release_opts;

vs_release_opts vs_default_release_opts(void);

typedef struct vs_release_result {
    int settle_frames;     /* frames from release until settled (-1: never) */
    int sign_changes;      /* sign changes of the probe's velocity along the pull */
    int probe_stop_frame;  /* last frame after release at which the probe moved */
    float peak_residual;   /* largest excursion of the probe past its final position,
                              on the far side from the pull (overshoot), lattice units */
    float probe_release_y; /* probe displacement along the pull at release */
    float probe_final_y;   /* ... when settled */
    float
        mean_speed[SIM_NTISSUE]; /* mean |V| per class, averaged over the 30 frames after release */
    float max_bone_speed;        /* largest |V| of any bone element seen, any frame */
    float max_speed;             /* largest |V| seen */
    int probe_monotone;          /* 1 if the probe never moved back toward the pull after release */
    int grabbed;                 /* elements grabbed */
    /* Cost over every frame run (pull, hold and after release). */
    int frames;
    double ms_median, ms_p90, ms_mean;
    double propagate_ms, relax_ms, velocity_ms; /* means per frame */
    double moved_elements;                      /* mean per frame */
    float max_violation;                        /* after propagation, over the links it reached */
    float max_violation_after_frame;            /* over the whole state after each frame */
    int grab_clamped_frames;                    /* frames whose move the lattice box cut short */
    /* The sim's probe (metrics.probe_*) after release, along the pull (its last move). */
    int probe_elements;       /* metrics.probe_elements after release */
    int probe_disp_crossings; /* times its mean displacement along the pull crossed rest */
    float probe_disp_release; /* ... at release, lattice units */
    float probe_disp_min;     /* ... its least after release (< 0: past rest, overshoot) */
    float probe_disp_err;     /* largest |metrics.probe_disp - the mean X - X0 of the
                                 grabbed elements, computed here| over the frames after */
    float probe_vel_err;      /* the same for probe_vel against the frame's change of it */
} vs_release_result;

sim_status vs_run_release(sim_volume_state *s, const sim_volume *vol, const vs_release_opts *o,
                          vs_release_result *r, char *err, size_t err_sz);

#endif
