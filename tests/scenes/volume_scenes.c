/* volume_scenes.c: see volume_scenes.h. */
#include "volume_scenes.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

sim_status vs_uniform_volume(sim_volume *out, int nx, int ny, int nz, float hu)
{
    memset(out, 0, sizeof *out);
    size_t n = (size_t)nx * (size_t)ny * (size_t)nz;
    out->hu = malloc(n * sizeof(float));
    if (!out->hu)
        return SIM_ERR_NOMEM;
    for (size_t i = 0; i < n; i++)
        out->hu[i] = hu;
    out->nx = nx;
    out->ny = ny;
    out->nz = nz;
    out->spacing_mm[0] = out->spacing_mm[1] = out->spacing_mm[2] = 1.0f;
    return SIM_OK;
}

void vs_belly_point(const sim_volume *v, float hu_skin, float out[3])
{
    int x = v->nx / 2, z = v->nz / 2, y = v->ny - 1;
    while (y > 0 && v->hu[x + (size_t)v->nx * ((size_t)y + (size_t)v->ny * (size_t)z)] < hu_skin)
        y--;
    out[0] = (float)x;
    out[1] = (float)y;
    out[2] = (float)z;
}

sim_status vs_scene_create(vs_scene *sc, const sim_volume *vol, sim_backend_kind kind, int threads,
                           char *err, size_t err_sz)
{
    memset(sc, 0, sizeof *sc);
    sim_status st = sim_volume_model_create(&sc->model, vol, NULL, err, err_sz);
    if (st == SIM_OK)
        st = sim_backend_create(&sc->backend, kind, threads, err, err_sz);
    if (st == SIM_OK)
        st = sim_volume_state_create(&sc->state, sc->model, sc->backend, err, err_sz);
    if (st != SIM_OK)
        vs_scene_destroy(sc);
    return st;
}

void vs_scene_destroy(vs_scene *sc)
{
    sim_volume_state_destroy(sc->state);
    sim_backend_destroy(sc->backend);
    sim_volume_model_destroy(sc->model);
    memset(sc, 0, sizeof *sc);
}

sim_status vs_push(sim_volume_state *s, sim_event_type type, const float *point, float radius)
{
    sim_volume_event ev;
    memset(&ev, 0, sizeof ev);
    ev.type = type;
    ev.space = SIM_SPACE_LATTICE;
    if (point)
        memcpy(ev.point, point, sizeof ev.point);
    ev.radius = radius;
    return sim_volume_push_event(s, &ev, NULL, 0);
}

uint32_t vs_rand(uint32_t *x)
{
    *x = *x * 1664525u + 1013904223u;
    return *x >> 8;
}

float vs_uniform(uint32_t *x, float lo, float hi)
{
    return lo + (hi - lo) * (float)(vs_rand(x) & 0xffff) / 65535.0f;
}

sim_status vs_set_params(sim_volume_state *s, const sim_volume_params *p)
{
    sim_volume_event ev;
    memset(&ev, 0, sizeof ev);
    ev.type = SIM_EV_SET_PARAMS;
    ev.params = *p;
    return sim_volume_push_event(s, &ev, NULL, 0);
}

vs_release_opts vs_default_release_opts(void)
{
    vs_release_opts o;
    o.pull = 8.0f;
    o.radius = 2.5f;
    o.pull_frames = 16;
    o.hold_frames = 10;
    o.max_after = 600;
    return o;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Accumulate one frame's cost into r; ms holds every frame's total for the quantiles.
 * Also checks ChainMail's invariant over the whole state (not timed). */
static void add_cost(vs_release_result *r, double *ms, const sim_volume_metrics *mt,
                     sim_volume_state *s)
{
    float after = sim_volume_max_violation(s);
    if (after > r->max_violation_after_frame)
        r->max_violation_after_frame = after;
    r->grab_clamped_frames += mt->grab_clamped;
    ms[r->frames++] = mt->total_ms;
    r->propagate_ms += mt->propagate_ms;
    r->relax_ms += mt->relax_ms;
    r->velocity_ms += mt->velocity_ms;
    r->moved_elements += (double)mt->moved_elements;
    if (mt->max_violation > r->max_violation)
        r->max_violation = mt->max_violation;
}

static int64_t nearest_element(sim_volume_state *s, int64_t n, const float p[3])
{
    const float *pos = sim_volume_positions(s);
    int64_t best = 0;
    float bd = INFINITY;
    for (int64_t i = 0; i < n; i++) {
        float d = 0.0f;
        for (int b = 0; b < 3; b++)
            d += (pos[i * 3 + b] - p[b]) * (pos[i * 3 + b] - p[b]);
        if (d < bd) {
            bd = d;
            best = i;
        }
    }
    return best;
}

/* The grab's elements as the sim's rule picks them (tissue, not air, within radius of the
 * point, at rest): the probe's ground truth. */
static uint8_t *grab_mask(const sim_volume *v, const uint8_t *cls, const float g[3], float radius)
{
    int64_t n = (int64_t)v->nx * v->ny * v->nz;
    uint8_t *m = calloc((size_t)n, 1);
    if (!m)
        return NULL;
    for (int64_t i = 0; i < n; i++) {
        float p[3] = {(float)(i % v->nx), (float)(i / v->nx % v->ny),
                      (float)(i / ((int64_t)v->nx * v->ny))},
              d2 = 0.0f;
        for (int b = 0; b < 3; b++)
            d2 += (p[b] - g[b]) * (p[b] - g[b]);
        m[i] = cls[i] != SIM_TISSUE_AIR && d2 <= radius * radius;
    }
    return m;
}

/* The mean X - X0 over the masked elements, computed here from the positions. */
static void mask_mean_disp(const sim_volume *v, const uint8_t *m, const float *pos, float out[3])
{
    double sum[3] = {0, 0, 0};
    int64_t k = 0, n = (int64_t)v->nx * v->ny * v->nz;
    for (int64_t i = 0; i < n; i++) {
        if (!m[i])
            continue;
        float r[3] = {(float)(i % v->nx), (float)(i / v->nx % v->ny),
                      (float)(i / ((int64_t)v->nx * v->ny))};
        for (int b = 0; b < 3; b++)
            sum[b] += (double)(pos[i * 3 + b] - r[b]);
        k++;
    }
    for (int b = 0; b < 3; b++)
        out[b] = k ? (float)(sum[b] / (double)k) : 0.0f;
}

/* One frame after release: the sim's probe against the truth, along the pull. */
static void track_probe(vs_release_result *r, const sim_volume_metrics *mt, const float truth[3],
                        float prev_truth[3], int *last_sign)
{
    float pn = sqrtf(mt->probe_pull[0] * mt->probe_pull[0] + mt->probe_pull[1] * mt->probe_pull[1] +
                     mt->probe_pull[2] * mt->probe_pull[2]),
          along = 0.0f;
    for (int b = 0; b < 3; b++) {
        r->probe_disp_err = fmaxf(r->probe_disp_err, fabsf(mt->probe_disp[b] - truth[b]));
        r->probe_vel_err =
            fmaxf(r->probe_vel_err, fabsf(mt->probe_vel[b] - (truth[b] - prev_truth[b])));
        along += pn > 0.0f ? mt->probe_disp[b] * mt->probe_pull[b] / pn : 0.0f;
        prev_truth[b] = truth[b];
    }
    r->probe_elements = mt->probe_elements;
    r->probe_disp_min = fminf(r->probe_disp_min, along);
    int sign = along > 1e-3f ? 1 : along < -1e-3f ? -1 : 0;
    if (sign && *last_sign && sign != *last_sign)
        r->probe_disp_crossings++;
    if (sign)
        *last_sign = sign;
}

sim_status vs_run_release(sim_volume_state *s, const sim_volume *vol, const vs_release_opts *o,
                          vs_release_result *r, char *err, size_t err_sz)
{
    memset(r, 0, sizeof *r);
    r->settle_frames = -1;
    r->probe_monotone = 1;
    int64_t n = (int64_t)vol->nx * vol->ny * vol->nz;
    sim_volume_params p = sim_volume_get_params(s);
    float grab[3];
    vs_belly_point(vol, p.hu_threshold[0], grab);
    int64_t probe = nearest_element(s, n, grab);
    uint8_t *cls = malloc((size_t)n);
    if (!cls)
        return SIM_ERR_NOMEM;
    memcpy(cls, sim_volume_classes(s), (size_t)n);
    double *ms = calloc((size_t)(o->pull_frames + o->hold_frames + o->max_after), sizeof(double));
    if (!ms) {
        free(cls);
        return SIM_ERR_NOMEM;
    }
    sim_status st = vs_push(s, SIM_EV_GRAB, grab, o->radius);
    sim_volume_metrics mt;
    float target[3] = {grab[0], grab[1], grab[2]};
    int total = o->pull_frames + o->hold_frames;
    for (int f = 0; f < total && st == SIM_OK; f++) {
        if (f < o->pull_frames) {
            target[1] = grab[1] + o->pull * (float)(f + 1) / (float)o->pull_frames;
            st = vs_push(s, SIM_EV_MOVE, target, 0.0f);
        }
        if (st == SIM_OK)
            st = sim_volume_step(s, &mt, err, err_sz);
        r->grabbed = mt.grabbed;
        add_cost(r, ms, &mt, s);
    }
    if (st == SIM_OK)
        st = vs_push(s, SIM_EV_RELEASE, NULL, 0.0f);
    float rest_y = grab[1];
    r->probe_release_y = sim_volume_positions(s)[probe * 3 + 1] - rest_y;
    float *ys = calloc((size_t)o->max_after + 1, sizeof(float));
    uint8_t *mask = grab_mask(vol, cls, grab, o->radius);
    if (!ys || !mask) {
        free(ys);
        free(mask);
        free(ms);
        free(cls);
        return SIM_ERR_NOMEM;
    }
    float truth[3], prev_truth[3];
    mask_mean_disp(vol, mask, sim_volume_positions(s), prev_truth);
    r->probe_disp_release = prev_truth[1];
    r->probe_disp_min = prev_truth[1];
    int nys = 0, last_sign = 0, probe_sign = 1;
    float prev_y = r->probe_release_y;
    for (int f = 0; f < o->max_after && st == SIM_OK; f++) {
        st = sim_volume_step(s, &mt, err, err_sz);
        add_cost(r, ms, &mt, s);
        const float *pos = sim_volume_positions(s), *vel = sim_volume_velocities(s);
        mask_mean_disp(vol, mask, pos, truth);
        track_probe(r, &mt, truth, prev_truth, &probe_sign);
        float y = pos[probe * 3 + 1] - rest_y, vy = vel[probe * 3 + 1];
        ys[nys++] = y;
        if (y != prev_y)
            r->probe_stop_frame = f + 1;
        if (y > prev_y + 1e-6f)
            r->probe_monotone = 0;
        prev_y = y;
        int sign = vy > 0.0f ? 1 : vy < 0.0f ? -1 : 0;
        if (sign && last_sign && sign != last_sign)
            r->sign_changes++;
        if (sign)
            last_sign = sign;
        if (f < 30)
            for (int c = 0; c < SIM_NTISSUE; c++)
                r->mean_speed[c] += mt.mean_speed[c] / 30.0f;
        for (int64_t i = 0; i < n; i++) {
            const float *v = &vel[i * 3];
            float sp = sqrtf(v[0] * v[0] + v[1] * v[1] + v[2] * v[2]);
            if (sp > r->max_speed)
                r->max_speed = sp;
            if (cls[i] == SIM_TISSUE_BONE && sp > r->max_bone_speed)
                r->max_bone_speed = sp;
        }
        if (sim_volume_is_settled(s)) {
            r->settle_frames = f + 1;
            break;
        }
    }
    r->probe_final_y = prev_y;
    for (int k = 0; k < nys; k++)
        if (r->probe_final_y - ys[k] > r->peak_residual)
            r->peak_residual = r->probe_final_y - ys[k];
    if (r->frames > 0) {
        for (int k = 0; k < r->frames; k++)
            r->ms_mean += ms[k] / r->frames;
        r->propagate_ms /= r->frames;
        r->relax_ms /= r->frames;
        r->velocity_ms /= r->frames;
        r->moved_elements /= r->frames;
        qsort(ms, (size_t)r->frames, sizeof(double), cmp_double);
        r->ms_median = ms[r->frames / 2];
        r->ms_p90 = ms[(r->frames * 9) / 10];
    }
    free(ms);
    free(ys);
    free(mask);
    free(cls);
    return st;
}
