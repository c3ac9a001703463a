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

#define MAX_CHARACTERS 400
#define BODY_CAPS      5
#define BOX_VERTS      8
#define BOX_TRIS       12

typedef struct cloth_srv {
    sim_cloth_model *model;
    sim_cloth_scene *sim;
    int nchar;
    int grabbed; /* the character whose vertex is held (move and release go to it) */
    /* Parameters already queued this frame (the next set_params builds on them). */
    sim_cloth_params pending;
    int has_pending;
    /* The camera moves at pointer rate: only its latest position goes to the sim, once a
     * frame (and a paused session's queue does not fill with it). */
    float camera[3];
    int camera_due;
    /* The view, rebuilt by view(). */
    float bmin[3], bmax[3];
    float *cape_pos, *body_pos;
    uint32_t *cape_tri, *body_tri;
    uint32_t cape_nvert, cape_ntri, body_nvert, body_ntri;
    int *lod_shown; /* per character: the LOD the cape surface was built for */
    proto_lod_entry *lods;
    uint32_t topology;
} cloth_srv;

static char *cl_params_json(srv_session *ss)
{
    cloth_srv *c = ss->scene_data;
    sim_cloth_params p = sim_cloth_get_params(c->sim);
    int n;
    const sim_param_desc *t = sim_cloth_params_table(&n);
    return srv_params_json(t, n, &p);
}

static int cl_create(srv *s, srv_session *ss, const cJSON *opts, char *err, size_t err_sz)
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
    ss->scene_data = c;
    c->nchar = nchar;
    c->grabbed = -1;
    if (sim_cloth_model_create(&c->model, NULL, err, err_sz) != SIM_OK ||
        sim_cloth_scene_create(&c->sim, c->model, s->backend, nchar, err, err_sz) != SIM_OK)
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
    /* The quantisation box: the crowd's square with 40 m round it, 4 m up (16 bits over
     * 90 m: 1.4 mm). Characters who walk out of it are shown at its edge. */
    float lo[2] = {0, 0}, hi[2] = {0, 0};
    for (int i = 0; i < nchar; i++) {
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
    return 201;
}

static void cl_destroy(srv *s, srv_session *ss)
{
    (void)s;
    cloth_srv *c = ss->scene_data;
    if (!c)
        return;
    sim_cloth_scene_destroy(c->sim);
    sim_cloth_model_destroy(c->model);
    free(c->cape_pos), free(c->cape_tri), free(c->body_pos), free(c->body_tri);
    free(c->lod_shown), free(c->lods);
    free(c);
    ss->scene_data = NULL;
}

static void cl_apply(srv *s, srv_session *ss, const srv_inbox_item *it, int *params_changed)
{
    cloth_srv *c = ss->scene_data;
    const proto_event *e = &it->ev;
    sim_cloth_event ev;
    memset(&ev, 0, sizeof ev);
    ev.character = e->character;
    memcpy(ev.point, e->point, sizeof ev.point);
    char err[256] = "";
    switch (e->type) {
    case PROTO_EV_CAMERA:
        memcpy(c->camera, e->point, sizeof c->camera);
        c->camera_due = 1;
        return;
    case PROTO_EV_FORCE_LOD:
        ev.type = SIM_CLOTH_EV_FORCE_LOD;
        ev.lod = e->lod;
        break;
    case PROTO_EV_MOTION: {
        int m = sim_motion_parse(e->motion);
        if (m < 0) {
            srv_reply_error(ss, it->client, e->seq, "bad message",
                            "motion must be idle, walk, run, turn or jump");
            return;
        }
        ev.type = SIM_CLOTH_EV_MOTION;
        ev.motion = (sim_motion)m;
        break;
    }
    case PROTO_EV_WIND:
        ev.type = SIM_CLOTH_EV_WIND;
        break;
    case PROTO_EV_GRAB:
        if (e->vertex < 0) {
            srv_reply_error(ss, it->client, e->seq, "not in this scene",
                            "cloth is grabbed by character and vertex");
            return;
        }
        if (c->grabbed >= 0 && c->grabbed != e->character) { /* one hand: let go first */
            sim_cloth_event rel;
            memset(&rel, 0, sizeof rel);
            rel.type = SIM_CLOTH_EV_RELEASE;
            rel.character = c->grabbed;
            sim_cloth_push_event(c->sim, &rel, err, sizeof err);
            c->grabbed = -1;
        }
        ev.type = SIM_CLOTH_EV_GRAB;
        ev.vertex = e->vertex;
        if (sim_cloth_push_event(c->sim, &ev, err, sizeof err) != SIM_OK)
            srv_reply_error(ss, it->client, e->seq, "event refused", err);
        else
            c->grabbed = e->character;
        return;
    case PROTO_EV_MOVE:
    case PROTO_EV_RELEASE:
        if (c->grabbed < 0)
            return; /* nothing held */
        ev.type = e->type == PROTO_EV_MOVE ? SIM_CLOTH_EV_MOVE : SIM_CLOTH_EV_RELEASE;
        ev.character = c->grabbed;
        if (e->type == PROTO_EV_RELEASE)
            c->grabbed = -1;
        break;
    case PROTO_EV_SET_PARAMS:
        ev.type = SIM_CLOTH_EV_SET_PARAMS;
        ev.params = c->has_pending ? c->pending : sim_cloth_get_params(c->sim);
        for (int i = 0; i < e->nparams; i++) {
            int n;
            const sim_param_desc *t = sim_cloth_params_table(&n);
            if (srv_params_set(t, n, &ev.params, e->param_name[i], e->param_value[i], err,
                               sizeof err) != SIM_OK) {
                srv_reply_error(ss, it->client, e->seq, "bad parameter", err);
                return;
            }
        }
        if (sim_cloth_push_event(c->sim, &ev, err, sizeof err) != SIM_OK) {
            srv_reply_error(ss, it->client, e->seq, "event refused", err);
            return;
        }
        c->pending = ev.params;
        c->has_pending = 1;
        *params_changed = 1;
        return;
    case PROTO_EV_RESET: { /* the crowd back where it started; parameters and camera kept */
        sim_cloth_params p = c->has_pending ? c->pending : sim_cloth_get_params(c->sim);
        sim_cloth_scene *fresh;
        if (sim_cloth_scene_create(&fresh, c->model, s->backend, c->nchar, err, sizeof err) !=
            SIM_OK) {
            srv_reply_error(ss, it->client, e->seq, "event refused", err);
            return;
        }
        sim_cloth_scene_destroy(c->sim);
        c->sim = fresh;
        c->grabbed = -1;
        c->camera_due = 1;
        ev.type = SIM_CLOTH_EV_SET_PARAMS;
        ev.params = p;
        break;
    }
    default:
        srv_reply_error(ss, it->client, e->seq, "not in this scene",
                        "the cloth scene takes camera, force_lod, motion, wind, grab (character, "
                        "vertex), move, release, set_params, pause, resume, reset");
        return;
    }
    if (sim_cloth_push_event(c->sim, &ev, err, sizeof err) != SIM_OK)
        srv_reply_error(ss, it->client, e->seq, "event refused", err);
}

static int cl_step(srv *s, srv_session *ss, double *ms)
{
    cloth_srv *c = ss->scene_data;
    sim_cloth_metrics mt;
    char err[256];
    if (c->camera_due) {
        sim_cloth_event ev;
        memset(&ev, 0, sizeof ev);
        ev.type = SIM_CLOTH_EV_CAMERA;
        memcpy(ev.point, c->camera, sizeof ev.point);
        if (sim_cloth_push_event(c->sim, &ev, err, sizeof err) == SIM_OK)
            c->camera_due = 0;
    }
    sim_cloth_set_threads(c->sim, srv_step_threads(s));
    c->has_pending = 0; /* the step applies what was queued */
    if (sim_cloth_step(c->sim, &mt, err, sizeof err) != SIM_OK) {
        fprintf(stderr, "softcast-server: session %s: step: %s\n", ss->id, err);
        *ms = 0;
        return 0;
    }
    *ms = mt.step_ms;
    return 1; /* cloth is never quite still while anyone watches */
}

/* A box round each capsule, oriented along it: the bodies, cheaply. */
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

static void cl_view(srv_session *ss, srv_view *out)
{
    cloth_srv *c = ss->scene_data;
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

static void cl_describe(srv_session *ss, cJSON *j)
{
    cloth_srv *c = ss->scene_data;
    cJSON_AddNumberToObject(j, "characters", c->nchar);
    cJSON_AddNumberToObject(j, "lods", sim_cloth_model_nlod(c->model));
    cJSON_AddStringToObject(j, "units", "m");
}

const srv_scene_i srv_scene_cloth = {"cloth",    cl_create, cl_destroy,     cl_apply,
                                     cl_step,    cl_view,   cl_params_json, sim_cloth_params_table,
                                     cl_describe};
