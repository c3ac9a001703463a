/* cloth_scenes.h: the cloth scene's LOD-switch scenarios, written once for the tests
 * and the bench, and the switch judged against ground truth. */
#ifndef TESTS_SCENES_CLOTH_SCENES_H
#define TESTS_SCENES_CLOTH_SCENES_H

#include "sim/cloth/cloth.h"

typedef enum cs_scenario {
    CS_WALK = 0, /* walking with root motion */
    CS_RUN,      /* running */
    CS_TURN,     /* mid sharp turn */
    CS_JUMP,     /* just after a jump's landing */
    CS_WIND,     /* three frames after a wind impulse */
    CS_PRESSED,  /* walking into a steady wind that presses the cape onto the body */
    CS_NSCENARIO
} cs_scenario;

const char *cs_scenario_name(int s);

/* A way to switch: the strategy, and the blend on (the default parameters: positions over
 * 2 frames, velocities over 4) or off (the source stops at the switch). */
typedef struct cs_variant {
    sim_switch_strategy strategy;
    int blend;
} cs_variant;

#define CS_TRUTH_MAX_WINDOW 120
#define CS_TRUTH_EARLY      5 /* the first frames after the switch, where a pop shows */

/* A switch against ground truth: the same scenario run again from the same state without
 * the switch, on the source LOD (what the viewer was watching, and would have gone on
 * watching). Each frame k = 1..window after the switch, every free target vertex of the
 * switched run is compared with the reference's surface point it maps to (the model's
 * table, interpolated in world space: sim_cloth_model_map_world). Errors in m and m/s. */
typedef struct cs_truth {
    cs_variant variant;
    int window;
    float pos_mean, vel_mean;   /* over the window: mean of the per-frame vertex means */
    float pos_max, vel_max;     /* over the window: the largest vertex error */
    float pos_early, vel_early; /* the same means over frames 1..CS_TRUTH_EARLY */
    float pos_frame[CS_TRUTH_MAX_WINDOW], vel_frame[CS_TRUTH_MAX_WINDOW]; /* per-frame means */
    sim_cloth_switch sw; /* the switched run's own record */
} cs_truth;

/* Run the reference and every variant (nvariant, at most 8) of one scenario in lockstep:
 * bitwise the same until the switch frame, then the variants switch `from` -> `to` and
 * the reference does not. out[i] for variant i. */
sim_status cs_run_truth(const sim_cloth_model *m, sim_backend *b, cs_scenario sc, int from, int to,
                        int window, const cs_variant *variants, int nvariant, cs_truth *out,
                        char *err, size_t err_sz);

#endif
