/* cloth_scenes.h: the cloth scene's LOD-switch scenarios, written once for the tests
 * and the bench. */
#ifndef TESTS_SCENES_CLOTH_SCENES_H
#define TESTS_SCENES_CLOTH_SCENES_H

#include "sim/sim.h"

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

/* One character plays the scenario at LOD `from` (forced) until the switch frame, then is
 * forced to `to` with the given strategy, and runs `after` more frames. The switch record
 * (E_pos, E_vel, settle frames, penetration) goes to *out. */
sim_status cs_run_switch(const sim_cloth_model *m, sim_backend *b, cs_scenario sc,
                         sim_switch_strategy strategy, int from, int to, int after,
                         sim_cloth_switch *out, char *err, size_t err_sz);

#endif
