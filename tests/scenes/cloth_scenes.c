/* cloth_scenes.c: see cloth_scenes.h. */
#include <stdio.h>
#include <string.h>

#include "tests/scenes/cloth_scenes.h"

const char *cs_scenario_name(int s)
{
    static const char *const k[CS_NSCENARIO] = {
        "walk", "run", "sharp_turn", "jump_landing", "wind_impulse", "pressed_against_body"};
    return s >= 0 && s < CS_NSCENARIO ? k[s] : "?";
}

static sim_status push(sim_cloth_scene *s, sim_cloth_event ev, char *err, size_t err_sz)
{
    return sim_cloth_push_event(s, &ev, err, err_sz);
}

sim_status cs_run_switch(const sim_cloth_model *m, sim_backend *b, cs_scenario sc,
                         sim_switch_strategy strategy, int from, int to, int after,
                         sim_cloth_switch *out, char *err, size_t err_sz)
{
    sim_cloth_scene *s;
    sim_status st = sim_cloth_scene_create(&s, m, b, 1, err, err_sz);
    if (st != SIM_OK)
        return st;
    sim_cloth_event ev;
    memset(&ev, 0, sizeof ev);
    ev.type = SIM_CLOTH_EV_SET_PARAMS;
    ev.params = sim_cloth_get_params(s);
    ev.params.strategy = strategy;
    static const sim_motion motion[CS_NSCENARIO] = {SIM_MOTION_WALK, SIM_MOTION_RUN,
                                                    SIM_MOTION_TURN, SIM_MOTION_JUMP,
                                                    SIM_MOTION_IDLE, SIM_MOTION_WALK};
    /* Frames before the switch: mid-stride; 0.1 s into the turn (turns at 1.6-2.0 s);
     * the frame after the second landing (1.2 s + 0.606 s); 3 frames after the gust. */
    static const int warm[CS_NSCENARIO] = {90, 90, 102, 109, 63, 90};
    if (sc == CS_PRESSED)
        ev.params.wind[0] = 14.0f; /* from behind: onto the back and legs */
    st = push(s, ev, err, err_sz);
    memset(&ev, 0, sizeof ev);
    ev.type = SIM_CLOTH_EV_MOTION;
    ev.motion = motion[sc];
    if (st == SIM_OK)
        st = push(s, ev, err, err_sz);
    ev.type = SIM_CLOTH_EV_FORCE_LOD;
    ev.lod = from;
    if (st == SIM_OK)
        st = push(s, ev, err, err_sz);
    for (int f = 0; st == SIM_OK && f < warm[sc] + after; f++) {
        if (sc == CS_WIND && f == warm[sc] - 3) {
            memset(&ev, 0, sizeof ev);
            ev.type = SIM_CLOTH_EV_WIND;
            ev.point[0] = -3.0f, ev.point[2] = 1.5f; /* a gust lifting the cape back */
            st = push(s, ev, err, err_sz);
        }
        if (f == warm[sc]) {
            memset(&ev, 0, sizeof ev);
            ev.type = SIM_CLOTH_EV_FORCE_LOD;
            ev.lod = to;
            st = push(s, ev, err, err_sz);
        }
        if (st == SIM_OK)
            st = sim_cloth_step(s, NULL, err, err_sz);
    }
    if (st == SIM_OK && !sim_cloth_last_switch(s, 0, out)) {
        snprintf(err, err_sz, "scenario %s: no switch happened", cs_scenario_name(sc));
        st = SIM_ERR_ARG;
    }
    sim_cloth_scene_destroy(s);
    return st;
}
