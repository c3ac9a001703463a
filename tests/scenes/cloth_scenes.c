/* cloth_scenes.c: see cloth_scenes.h. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/scenes/cloth_scenes.h"

const char *cs_scenario_name(int s)
{
    static const char *const k[CS_NSCENARIO] = {
        "walk", "run", "sharp_turn", "jump_landing", "wind_impulse", "pressed_against_body"};
    return s >= 0 && s < CS_NSCENARIO ? k[s] : "?";
}

/* Frames before the switch: mid-stride; 0.1 s into the turn (turns at 1.6-2.0 s); the
 * frame after the second landing (1.2 s + 0.606 s); 3 frames after the gust. */
static const int k_warm[CS_NSCENARIO] = {90, 90, 102, 109, 63, 90};

static sim_status push(sim_cloth_scene *s, sim_cloth_event ev, char *err, size_t err_sz)
{
    return sim_cloth_push_event(s, &ev, err, err_sz);
}

/* The scenario's parameters: the defaults, and the wind of CS_PRESSED. */
static sim_cloth_params scenario_params(cs_scenario sc)
{
    sim_cloth_params p = sim_cloth_default_params();
    if (sc == CS_PRESSED)
        p.wind[0] = 14.0f; /* from behind: onto the back and legs */
    return p;
}

/* One character playing scenario sc at LOD `from` (forced). A scene starts at LOD 0, so
 * for another `from` its first frame is a switch too: with the default strategy and
 * blend in every run, so that the runs of cs_run_truth stay bitwise the same until the
 * switch they are compared on. */
static sim_status scenario_open(const sim_cloth_model *m, sim_backend *b, cs_scenario sc, int from,
                                sim_cloth_scene **out, char *err, size_t err_sz)
{
    sim_cloth_scene *s;
    sim_status st = sim_cloth_scene_create(&s, m, b, 1, err, err_sz);
    if (st != SIM_OK)
        return st;
    sim_cloth_event ev;
    memset(&ev, 0, sizeof ev);
    ev.type = SIM_CLOTH_EV_SET_PARAMS;
    ev.params = scenario_params(sc);
    static const sim_motion motion[CS_NSCENARIO] = {SIM_MOTION_WALK, SIM_MOTION_RUN,
                                                    SIM_MOTION_TURN, SIM_MOTION_JUMP,
                                                    SIM_MOTION_IDLE, SIM_MOTION_WALK};
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
    if (st != SIM_OK) {
        sim_cloth_scene_destroy(s);
        return st;
    }
    *out = s;
    return SIM_OK;
}

/* Frame f of the scenario: its events (the gust; at the switch frame the variant's
 * strategy and blend, and the switch to `to`, unless to < 0), then the step. */
static sim_status scenario_frame(sim_cloth_scene *s, cs_scenario sc, int f, cs_variant v, int to,
                                 char *err, size_t err_sz)
{
    sim_cloth_event ev;
    sim_status st = SIM_OK;
    if (sc == CS_WIND && f == k_warm[sc] - 3) {
        memset(&ev, 0, sizeof ev);
        ev.type = SIM_CLOTH_EV_WIND;
        ev.point[0] = -3.0f, ev.point[2] = 1.5f; /* a gust lifting the cape back */
        st = push(s, ev, err, err_sz);
    }
    if (st == SIM_OK && f == k_warm[sc] && to >= 0) {
        memset(&ev, 0, sizeof ev);
        ev.type = SIM_CLOTH_EV_SET_PARAMS;
        ev.params = scenario_params(sc);
        ev.params.strategy = v.strategy;
        if (!v.blend)
            ev.params.blend_pos_frames = ev.params.blend_vel_frames = 0;
        st = push(s, ev, err, err_sz);
        memset(&ev, 0, sizeof ev);
        ev.type = SIM_CLOTH_EV_FORCE_LOD;
        ev.lod = to;
        st = push(s, ev, err, err_sz);
    }
    return st == SIM_OK ? sim_cloth_step(s, NULL, err, err_sz) : st;
}

/* Frame k of the window: variant scene s against the reference mapped to its LOD. */
static void truth_frame(const sim_cloth_model *m, const sim_cloth_scene *s, int to, int k,
                        const float *xm, const float *vm, const unsigned char *valid, cs_truth *t)
{
    int n;
    const float *x = sim_cloth_positions(s, 0, &n), *v = sim_cloth_velocities(s, 0, NULL);
    const float *w = sim_cloth_model_inv_mass(m, to);
    double sp = 0, sv = 0;
    int cnt = 0;
    for (int j = 0; j < n; j++) {
        if (w[j] <= 0.0f || !valid[j])
            continue;
        float dp = 0.0f, dv = 0.0f;
        for (int q = 0; q < 3; q++) {
            float a = x[j * 3 + q] - xm[j * 3 + q], c = v[j * 3 + q] - vm[j * 3 + q];
            dp += a * a;
            dv += c * c;
        }
        dp = sqrtf(dp), dv = sqrtf(dv);
        sp += (double)dp, sv += (double)dv, cnt++;
        t->pos_max = dp > t->pos_max ? dp : t->pos_max;
        t->vel_max = dv > t->vel_max ? dv : t->vel_max;
    }
    t->pos_frame[k - 1] = cnt ? (float)(sp / cnt) : 0.0f;
    t->vel_frame[k - 1] = cnt ? (float)(sv / cnt) : 0.0f;
}

static void truth_summarise(cs_truth *t)
{
    double p = 0, v = 0, pe = 0, ve = 0;
    for (int k = 1; k <= t->window; k++) {
        p += (double)t->pos_frame[k - 1], v += (double)t->vel_frame[k - 1];
        if (k <= CS_TRUTH_EARLY)
            pe += (double)t->pos_frame[k - 1], ve += (double)t->vel_frame[k - 1];
    }
    int early = t->window < CS_TRUTH_EARLY ? t->window : CS_TRUTH_EARLY;
    t->pos_mean = (float)(p / t->window), t->vel_mean = (float)(v / t->window);
    t->pos_early = (float)(pe / early), t->vel_early = (float)(ve / early);
}

#define CS_MAX_VARIANTS 8

sim_status cs_run_truth(const sim_cloth_model *m, sim_backend *b, cs_scenario sc, int from, int to,
                        int window, const cs_variant *variants, int nvariant, cs_truth *out,
                        char *err, size_t err_sz)
{
    if (nvariant < 1 || nvariant > CS_MAX_VARIANTS || window < 1 || window > CS_TRUTH_MAX_WINDOW) {
        snprintf(err, err_sz, "cs_run_truth: 1 to %d variants, window 1 to %d", CS_MAX_VARIANTS,
                 CS_TRUTH_MAX_WINDOW);
        return SIM_ERR_ARG;
    }
    sim_cloth_scene *s[CS_MAX_VARIANTS + 1] = {NULL};
    int nt = sim_cloth_model_lod_size(m, to, NULL);
    float *xm = malloc((size_t)nt * 3 * sizeof(float)),
          *vm = malloc((size_t)nt * 3 * sizeof(float));
    unsigned char *valid = malloc((size_t)nt);
    sim_status st = xm && vm && valid ? SIM_OK : SIM_ERR_NOMEM;
    for (int i = 0; st == SIM_OK && i <= nvariant; i++) {
        st = scenario_open(m, b, sc, from, &s[i], err, err_sz);
        if (i) {
            memset(&out[i - 1], 0, sizeof out[i - 1]);
            out[i - 1].variant = variants[i - 1];
            out[i - 1].window = window;
        }
    }
    sim_cloth_params prm = scenario_params(sc);
    for (int f = 0; st == SIM_OK && f < k_warm[sc] + window; f++) {
        /* Until the switch every run is the reference, bit for bit, or this is no truth. */
        for (int i = 1; f == k_warm[sc] && i <= nvariant; i++)
            if (sim_cloth_hash(s[i]) != sim_cloth_hash(s[0])) {
                snprintf(err, err_sz,
                         "scenario %s: run %d parted from the reference before "
                         "the switch",
                         cs_scenario_name(sc), i);
                st = SIM_ERR_ARG;
            }
        for (int i = 0; st == SIM_OK && i <= nvariant; i++)
            st = scenario_frame(s[i], sc, f, i ? variants[i - 1] : variants[0], i ? to : -1, err,
                                err_sz);
        int k = f - k_warm[sc] + 1;
        if (st != SIM_OK || k < 1)
            continue;
        sim_cloth_model_map_world(m, from, to, sim_cloth_positions(s[0], 0, NULL),
                                  sim_cloth_velocities(s[0], 0, NULL), prm.map_max_distance, xm, vm,
                                  valid);
        for (int i = 1; i <= nvariant; i++)
            truth_frame(m, s[i], to, k, xm, vm, valid, &out[i - 1]);
    }
    for (int i = 1; st == SIM_OK && i <= nvariant; i++) {
        truth_summarise(&out[i - 1]);
        if (sim_cloth_lod(s[i], 0) != to || !sim_cloth_last_switch(s[i], 0, &out[i - 1].sw)) {
            snprintf(err, err_sz, "scenario %s: no switch happened", cs_scenario_name(sc));
            st = SIM_ERR_ARG;
        }
    }
    for (int i = 0; i <= nvariant; i++)
        sim_cloth_scene_destroy(s[i]);
    free(xm), free(vm), free(valid);
    return st;
}
