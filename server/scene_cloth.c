/* scene_cloth.c: the cloth scene in a session: a crowd of characters wearing capes at
 * levels of detail (sim/cloth/). The view is two surfaces: every cape in one (id 2,
 * characters one after another, each at its LOD; the LOD table frame says which) and the
 * bodies as boxes round their capsules (id 3). A LOD switch changes the cape surface's
 * topology: the next frame is a keyframe, after its table. Units: metres, z up. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "scene.h"
#include "sim/cloth/cloth.h"

#define MAX_CHARACTERS 400
#define BODY_CAPS      5
#define BOX_VERTS      8
#define BOX_TRIS       12

typedef struct cloth_srv {
    sim_cloth_model *model;
    sim_cloth_scene *sim;
    int nchar;
    int grabbed;     /* the character whose vertex is held (move and release go to it) */
    float camera[3]; /* the camera's last position, kept across a reset */
    int has_camera;
    /* The view, rebuilt by view(). */
    float bmin[3], bmax[3];
    float *cape_pos, *body_pos;
    uint32_t *cape_tri, *body_tri;
    uint32_t cape_nvert, cape_ntri, body_nvert, body_ntri;
    int *lod_shown; /* per character: the LOD the cape surface was built for */
    proto_lod_entry *lods;
    uint32_t topology;
} cloth_srv;

static char *cl_params_json(const void *scene)
{
    const cloth_srv *c = scene;
    sim_cloth_params p = sim_cloth_get_params(c->sim);
    int n;
    const sim_param_desc *t = sim_cloth_params_table(&n);
    return srv_params_json(t, n, &p);
}

/* The quantisation box: the crowd's square with 40 m round it, 4 m up (16 bits over
 * 90 m: 1.4 mm). Characters who walk out of it are shown at its edge. */
static void crowd_box(cloth_srv *c)
{
    float lo[2] = {0, 0}, hi[2] = {0, 0};
    for (int i = 0; i < c->nchar; i++) {
        float p[3], yaw;
        sim_cloth_root(c->sim, i, p, &yaw);
        for (int k = 0; k < 2; k++) {
            lo[k] = p[k] < lo[k] ? p[k] : lo[k];
            hi[k] = p[k] > hi[k] ? p[k] : hi[k];
        }
    }
    for (int k = 0; k < 2; k++) {
        c->bmin[k] = lo[k] - 40.0f;
        c->bmax[k] = hi[k] + 40.0f;
    }
    c->bmin[2] = -0.1f;
    c->bmax[2] = 4.0f;
}

static int cl_create(sim_backend *b, const cJSON *opts, void **out, char *err, size_t err_sz)
{
    const cJSON *n = cJSON_GetObjectItemCaseSensitive(opts, "characters");
    int nchar = 1;
    if (n) {
        if (!cJSON_IsNumber(n) || n->valuedouble != floor(n->valuedouble) || n->valuedouble < 1 ||
            n->valuedouble > MAX_CHARACTERS) {
            snprintf(err, err_sz, "\"characters\" must be an integer 1 to %d", MAX_CHARACTERS);
            return 400;
        }
        nchar = (int)n->valuedouble;
    }
    cloth_srv *c = calloc(1, sizeof *c);
    if (!c) {
        snprintf(err, err_sz, "out of memory");
        return 500;
    }
    *out = c;
    c->nchar = nchar;
    c->grabbed = -1;
    if (sim_cloth_model_create(&c->model, NULL, err, err_sz) != SIM_OK ||
        sim_cloth_scene_create(&c->sim, c->model, b, nchar, err, err_sz) != SIM_OK)
        return 500;
    int ntri0 = 0, nv0 = 0; /* the largest LOD, whichever it is */
    for (int k = 0; k < sim_cloth_model_nlod(c->model); k++) {
        int nt, nv = sim_cloth_model_lod_size(c->model, k, &nt);
        nv0 = nv > nv0 ? nv : nv0;
        ntri0 = nt > ntri0 ? nt : ntri0;
    }
    c->cape_pos = malloc((size_t)nchar * nv0 * 3 * sizeof(float));
    c->cape_tri = malloc((size_t)nchar * ntri0 * 3 * sizeof(uint32_t));
    c->body_pos = malloc((size_t)nchar * BODY_CAPS * BOX_VERTS * 3 * sizeof(float));
    c->body_tri = malloc((size_t)nchar * BODY_CAPS * BOX_TRIS * 3 * sizeof(uint32_t));
    c->lod_shown = malloc((size_t)nchar * sizeof(int));
    c->lods = malloc((size_t)nchar * sizeof *c->lods);
    if (!c->cape_pos || !c->cape_tri || !c->body_pos || !c->body_tri || !c->lod_shown || !c->lods) {
        snprintf(err, err_sz, "out of memory");
        return 500;
    }
    for (int i = 0; i < nchar; i++)
        c->lod_shown[i] = -1;
    crowd_box(c);
    return 201;
}

static void cl_destroy(void *scene)
{
    cloth_srv *c = scene;
    if (!c)
        return;
    sim_cloth_scene_destroy(c->sim);
    sim_cloth_model_destroy(c->model);
    free(c->cape_pos), free(c->cape_tri), free(c->body_pos), free(c->body_tri);
    free(c->lod_shown), free(c->lods);
    free(c);
}

/* ------------------------------------------------------------------ events */

/* The payload of every cloth event but set_params, as it waits in the inbox. */
typedef struct cl_event {
    float point[3]; /* camera, grab, move: m; wind: the impulse, m/s */
    int32_t character, vertex, lod;
    uint8_t motion; /* sim_motion */
} cl_event;

static int parse_camera(const cJSON *msg, void *out, const char **error, char *err, size_t err_sz)
{
    (void)error;
    cl_event *e = out;
    memset(e, 0, sizeof *e);
    return proto_read_vec3(msg, "point", 1e6, e->point, err, err_sz) ? -1 : (int)sizeof *e;
}

static int parse_wind(const cJSON *msg, void *out, const char **error, char *err, size_t err_sz)
{
    (void)error;
    cl_event *e = out;
    memset(e, 0, sizeof *e);
    return proto_read_vec3(msg, "impulse", 100, e->point, err, err_sz) ? -1 : (int)sizeof *e;
}

static int parse_force_lod(const cJSON *msg, void *out, const char **error, char *err,
                           size_t err_sz)
{
    (void)error;
    cl_event *e = out;
    memset(e, 0, sizeof *e);
    if (proto_read_int(msg, "character", -1, MAX_CHARACTERS - 1, &e->character, err, err_sz) ||
        proto_read_int(msg, "lod", -1, SIM_CLOTH_NLOD - 1, &e->lod, err, err_sz))
        return -1;
    return (int)sizeof *e;
}

static int parse_motion(const cJSON *msg, void *out, const char **error, char *err, size_t err_sz)
{
    (void)error;
    cl_event *e = out;
    memset(e, 0, sizeof *e);
    if (proto_read_int(msg, "character", -1, MAX_CHARACTERS - 1, &e->character, err, err_sz))
        return -1;
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(msg, "motion");
    int k = cJSON_IsString(m) ? sim_motion_parse(m->valuestring) : -1;
    if (k < 0) {
        size_t at = (size_t)snprintf(err, err_sz, "motion must be");
        for (int i = 0; i < SIM_NMOTION && at < err_sz; i++)
            at += (size_t)snprintf(err + at, err_sz - at, "%s %s",
                                   i == 0                 ? ""
                                   : i + 1 == SIM_NMOTION ? " or"
                                                          : ",",
                                   sim_motion_name(i));
        return -1;
    }
    e->motion = (uint8_t)k;
    return (int)sizeof *e;
}

static int parse_grab(const cJSON *msg, void *out, const char **error, char *err, size_t err_sz)
{
    cl_event *e = out;
    memset(e, 0, sizeof *e);
    if (!cJSON_GetObjectItemCaseSensitive(msg, "vertex")) {
        *error = "not in this scene";
        snprintf(err, err_sz, "cloth is grabbed by character and vertex");
        return -1;
    }
    if (proto_read_int(msg, "character", 0, MAX_CHARACTERS - 1, &e->character, err, err_sz) ||
        proto_read_int(msg, "vertex", 0, 1 << 20, &e->vertex, err, err_sz) ||
        proto_read_vec3(msg, "point", 1e6, e->point, err, err_sz))
        return -1;
    return (int)sizeof *e;
}

static int parse_move(const cJSON *msg, void *out, const char **error, char *err, size_t err_sz)
{
    return parse_camera(msg, out, error, err, err_sz); /* a point, m */
}

static int parse_nothing(const cJSON *msg, void *out, const char **error, char *err, size_t err_sz)
{
    (void)msg, (void)out, (void)error, (void)err, (void)err_sz;
    return 0;
}

static int parse_params(const cJSON *msg, void *out, const char **error, char *err, size_t err_sz)
{
    int n;
    const sim_param_desc *t = sim_cloth_params_table(&n);
    return srv_params_parse(t, n, msg, out, error, err, err_sz);
}

/* Hand one event to the sim now; a refusal goes back to its sender. */
static int to_sim(srv_scene_ctx *c, cloth_srv *cs, const srv_event *e, const sim_cloth_event *ev)
{
    char err[256] = "";
    if (sim_cloth_apply_event(cs->sim, ev, err, sizeof err) == SIM_OK)
        return 0;
    c->error(c, e->client, e->seq, "event refused", err);
    return -1;
}

/* A sim event from a payload: type, character, point, vertex, lod, motion. */
static sim_cloth_event sim_event(sim_cloth_event_type type, const cl_event *p)
{
    sim_cloth_event ev;
    memset(&ev, 0, sizeof ev);
    ev.type = type;
    if (p) {
        ev.character = p->character;
        ev.vertex = p->vertex;
        ev.lod = p->lod;
        ev.motion = (sim_motion)p->motion;
        memcpy(ev.point, p->point, sizeof ev.point);
    }
    return ev;
}

/* The camera moves at pointer rate and applies even while paused: the sim reads it only
 * when it steps. */
static void on_camera(srv_scene_ctx *c, void *scene, const srv_event *e)
{
    cloth_srv *cs = scene;
    sim_cloth_event ev = sim_event(SIM_CLOTH_EV_CAMERA, e->data);
    if (to_sim(c, cs, e, &ev) == 0) {
        memcpy(cs->camera, ev.point, sizeof cs->camera);
        cs->has_camera = 1;
    }
}

static void on_force_lod(srv_scene_ctx *c, void *scene, const srv_event *e)
{
    sim_cloth_event ev = sim_event(SIM_CLOTH_EV_FORCE_LOD, e->data);
    to_sim(c, scene, e, &ev);
}

static void on_motion(srv_scene_ctx *c, void *scene, const srv_event *e)
{
    sim_cloth_event ev = sim_event(SIM_CLOTH_EV_MOTION, e->data);
    to_sim(c, scene, e, &ev);
}

static void on_wind(srv_scene_ctx *c, void *scene, const srv_event *e)
{
    sim_cloth_event ev = sim_event(SIM_CLOTH_EV_WIND, e->data);
    to_sim(c, scene, e, &ev);
}

/* One hand: a grab of another character lets go of the first. */
static void on_grab(srv_scene_ctx *c, void *scene, const srv_event *e)
{
    cloth_srv *cs = scene;
    const cl_event *p = e->data;
    if (cs->grabbed >= 0 && cs->grabbed != p->character) {
        sim_cloth_event rel = sim_event(SIM_CLOTH_EV_RELEASE, NULL);
        rel.character = cs->grabbed;
        (void)sim_cloth_apply_event(cs->sim, &rel, NULL, 0);
        cs->grabbed = -1;
    }
    sim_cloth_event ev = sim_event(SIM_CLOTH_EV_GRAB, p);
    if (to_sim(c, cs, e, &ev) == 0)
        cs->grabbed = p->character;
}

static void on_move(srv_scene_ctx *c, void *scene, const srv_event *e)
{
    cloth_srv *cs = scene;
    if (cs->grabbed < 0)
        return; /* nothing held */
    sim_cloth_event ev = sim_event(SIM_CLOTH_EV_MOVE, e->data);
    ev.character = cs->grabbed;
    to_sim(c, cs, e, &ev);
}

static void on_release(srv_scene_ctx *c, void *scene, const srv_event *e)
{
    cloth_srv *cs = scene;
    if (cs->grabbed < 0)
        return;
    sim_cloth_event ev = sim_event(SIM_CLOTH_EV_RELEASE, NULL);
    ev.character = cs->grabbed;
    cs->grabbed = -1;
    to_sim(c, cs, e, &ev);
}

/* On the parameters in force: an earlier set_params of this frame is applied already. */
static void on_params(srv_scene_ctx *c, void *scene, const srv_event *e)
{
    cloth_srv *cs = scene;
    int n;
    const sim_param_desc *t = sim_cloth_params_table(&n);
    sim_cloth_event ev = sim_event(SIM_CLOTH_EV_SET_PARAMS, NULL);
    ev.params = sim_cloth_get_params(cs->sim);
    srv_params_apply(t, e->data, &ev.params);
    if (to_sim(c, cs, e, &ev) == 0)
        c->params_changed = 1;
}

/* The crowd back where it started; parameters and camera kept. */
static void on_reset(srv_scene_ctx *c, void *scene, const srv_event *e)
{
    cloth_srv *cs = scene;
    char err[256] = "";
    sim_cloth_scene *fresh;
    if (sim_cloth_scene_create(&fresh, cs->model, c->backend, cs->nchar, err, sizeof err) !=
        SIM_OK) {
        c->error(c, e->client, e->seq, "event refused", err);
        return;
    }
    sim_cloth_event prm = sim_event(SIM_CLOTH_EV_SET_PARAMS, NULL);
    prm.params = sim_cloth_get_params(cs->sim);
    sim_cloth_scene_destroy(cs->sim);
    cs->sim = fresh;
    cs->grabbed = -1;
    (void)sim_cloth_apply_event(cs->sim, &prm, NULL, 0); /* valid: they were in force */
    if (cs->has_camera) {
        sim_cloth_event cam = sim_event(SIM_CLOTH_EV_CAMERA, NULL);
        memcpy(cam.point, cs->camera, sizeof cam.point);
        (void)sim_cloth_apply_event(cs->sim, &cam, NULL, 0);
    }
}

static const srv_event_desc k_events[] = {
    {"camera", SRV_EV_UNPAUSED, parse_camera, on_camera},
    {"force_lod", 0, parse_force_lod, on_force_lod},
    {"motion", 0, parse_motion, on_motion},
    {"wind", 0, parse_wind, on_wind},
    {"grab", 0, parse_grab, on_grab},
    {"move", 0, parse_move, on_move},
    {"release", 0, parse_nothing, on_release},
    {"set_params", 0, parse_params, on_params},
    {"reset", 0, parse_nothing, on_reset},
};
_Static_assert(sizeof(cl_event) + sizeof(srv_item) <= 64, "a cloth event stays small");

/* ------------------------------------------------------------ step and view */

static int cl_step(srv_scene_ctx *c, void *scene, double *ms)
{
    cloth_srv *cs = scene;
    sim_cloth_metrics mt;
    char err[256];
    sim_cloth_set_threads(cs->sim, c->threads);
    if (sim_cloth_step(cs->sim, &mt, err, sizeof err) != SIM_OK) {
        fprintf(stderr, "softcast-server: session %s: step: %s\n", c->session_id, err);
        *ms = 0;
        return 0;
    }
    *ms = mt.step_ms;
    return 1; /* cloth is never quite still while anyone watches */
}

static void body_boxes(cloth_srv *c)
{
    uint32_t nv = 0, nt = 0;
    static const int quads[6][4] = {{0, 1, 3, 2}, {4, 6, 7, 5}, {0, 4, 5, 1},
                                    {2, 3, 7, 6}, {0, 2, 6, 4}, {1, 5, 7, 3}};
    for (int i = 0; i < c->nchar; i++) {
        float caps[BODY_CAPS][7];
        int n = sim_cloth_body(c->sim, i, caps, BODY_CAPS);
        for (int k = 0; k < n; k++) {
            const float *a = caps[k], *b = caps[k] + 3, r = caps[k][6];
            float ax[3] = {b[0] - a[0], b[1] - a[1], b[2] - a[2]};
            float len = sqrtf(ax[0] * ax[0] + ax[1] * ax[1] + ax[2] * ax[2]);
            float u[3] = {0, 0, 1};
            if (len > 1e-6f)
                for (int q = 0; q < 3; q++)
                    u[q] = ax[q] / len;
            /* Two unit vectors across the axis. */
            float t[3] = {fabsf(u[0]) < 0.9f ? 1.0f : 0.0f, fabsf(u[0]) < 0.9f ? 0.0f : 1.0f, 0};
            float d = t[0] * u[0] + t[1] * u[1] + t[2] * u[2];
            for (int q = 0; q < 3; q++)
                t[q] -= d * u[q];
            float tl = sqrtf(t[0] * t[0] + t[1] * t[1] + t[2] * t[2]);
            for (int q = 0; q < 3; q++)
                t[q] /= tl;
            float w[3] = {u[1] * t[2] - u[2] * t[1], u[2] * t[0] - u[0] * t[2],
                          u[0] * t[1] - u[1] * t[0]};
            for (int v = 0; v < BOX_VERTS; v++) {
                float su = v & 4 ? 1.0f : 0.0f, st = v & 2 ? r : -r, sw = v & 1 ? r : -r;
                float *p = &c->body_pos[(nv + (uint32_t)v) * 3];
                for (int q = 0; q < 3; q++)
                    p[q] = a[q] - u[q] * r + u[q] * su * (len + 2 * r) + t[q] * st + w[q] * sw;
            }
            for (int f = 0; f < 6; f++) {
                const int *q = quads[f];
                uint32_t tri[6] = {nv + (uint32_t)q[0], nv + (uint32_t)q[1], nv + (uint32_t)q[2],
                                   nv + (uint32_t)q[0], nv + (uint32_t)q[2], nv + (uint32_t)q[3]};
                memcpy(&c->body_tri[nt * 3], tri, sizeof tri);
                nt += 2;
            }
            nv += BOX_VERTS;
        }
    }
    c->body_nvert = nv;
    c->body_ntri = nt;
}

static void cl_view(void *scene, srv_view *out)
{
    cloth_srv *c = scene;
    int changed = 0;
    for (int i = 0; i < c->nchar; i++)
        changed |= sim_cloth_lod(c->sim, i) != c->lod_shown[i];
    uint32_t at = 0, tat = 0;
    for (int i = 0; i < c->nchar; i++) {
        int n, lod = sim_cloth_lod(c->sim, i), ntri;
        const float *x = sim_cloth_positions(c->sim, i, &n);
        memcpy(&c->cape_pos[(size_t)at * 3], x, (size_t)n * 3 * sizeof(float));
        if (changed) { /* a new topology: the triangles again, and the table */
            sim_cloth_model_lod_size(c->model, lod, &ntri);
            const uint32_t *tri = sim_cloth_model_triangles(c->model, lod);
            for (int t = 0; t < ntri * 3; t++)
                c->cape_tri[tat * 3 + (uint32_t)t] = tri[t] + at;
            tat += (uint32_t)ntri;
            sim_cloth_switch sw;
            int has = sim_cloth_last_switch(c->sim, i, &sw);
            c->lods[i].lod = (uint8_t)lod;
            c->lods[i].first_vertex = at;
            c->lods[i].nvert = (uint32_t)n;
            c->lods[i].e_pos = has ? sw.e_pos : 0.0f;
            c->lods[i].e_vel = has ? sw.e_vel : 0.0f;
            c->lod_shown[i] = lod;
        }
        at += (uint32_t)n;
    }
    if (changed) {
        c->cape_ntri = tat;
        c->topology++;
    }
    c->cape_nvert = at;
    body_boxes(c);
    memset(out, 0, sizeof *out);
    memcpy(out->bmin, c->bmin, sizeof out->bmin);
    memcpy(out->bmax, c->bmax, sizeof out->bmax);
    out->nsurf = 2;
    out->surf[0].id = 2;
    out->surf[0].nvert = c->cape_nvert;
    out->surf[0].ntri = c->cape_ntri;
    out->surf[0].tri = c->cape_tri;
    out->surf[0].pos = c->cape_pos;
    out->surf[1].id = 3;
    out->surf[1].nvert = c->body_nvert;
    out->surf[1].ntri = c->body_ntri;
    out->surf[1].tri = c->body_tri;
    out->surf[1].pos = c->body_pos;
    out->topology = c->topology;
    out->lods = c->lods;
    out->nlods = (uint32_t)c->nchar;
}

static void cl_describe(const void *scene, cJSON *j)
{
    const cloth_srv *c = scene;
    cJSON_AddNumberToObject(j, "characters", c->nchar);
    cJSON_AddNumberToObject(j, "lods", sim_cloth_model_nlod(c->model));
    cJSON_AddStringToObject(j, "units", "m");
}

const srv_scene_i srv_scene_cloth = {
    .name = "cloth",
    .usage = "",
    .events = k_events,
    .nevents = (int)(sizeof k_events / sizeof k_events[0]),
    .create = cl_create,
    .destroy = cl_destroy,
    .step = cl_step,
    .view = cl_view,
    .params_json = cl_params_json,
    .params_table = sim_cloth_params_table,
    .describe = cl_describe,
};
