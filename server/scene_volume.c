/* scene_volume.c: the volume scene in a session: a CT volume (the server's default, or a
 * phantom of the asked size) deformed by HP-ChainMail; its skin and bone surfaces are
 * the view; slices are answered to the client that asks. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "scene.h"

typedef struct vol_scene {
    sim_volume_model *model; /* the server's default, or this session's own */
    int own_model;
    sim_volume_state *state;
    float bmin[3], bmax[3]; /* quantisation box, world mm */
    float *pos[SIM_NSURFACE];
    /* Parameters already queued this frame: the next set_params builds on them. */
    sim_volume_params pending;
    int has_pending;
    int clamp_noticed; /* the driver was told that this pull stops at the box */
} vol_scene;

static void vol_apply(srv *s, srv_session *ss, const srv_inbox_item *it, int *params_changed)
{
    vol_scene *v = ss->scene_data;
    const proto_event *e = &it->ev;
    sim_volume_event ev;
    memset(&ev, 0, sizeof ev);
    ev.seq = e->seq;
    char err[256] = "";
    switch (e->type) {
    case PROTO_EV_GRAB:
        if (e->vertex >= 0) {
            srv_reply_error(ss, it->client, e->seq, "not in this scene",
                            "a volume is grabbed at a point with a radius, not by vertex");
            return;
        }
        /* fall through */
    case PROTO_EV_MOVE:
        ev.type = e->type == PROTO_EV_GRAB ? SIM_EV_GRAB : SIM_EV_MOVE;
        ev.space = e->world ? SIM_SPACE_WORLD : SIM_SPACE_LATTICE;
        memcpy(ev.point, e->point, sizeof ev.point);
        ev.radius = e->radius;
        break;
    case PROTO_EV_RELEASE:
        ev.type = SIM_EV_RELEASE;
        break;
    case PROTO_EV_RESET:
        ev.type = SIM_EV_RESET;
        break;
    case PROTO_EV_SET_CONDITION:
        ev.type = SIM_EV_SET_CONDITION;
        ev.condition = (sim_condition)(e->condition - 'A');
        break;
    case PROTO_EV_SET_PARAMS:
        ev.type = SIM_EV_SET_PARAMS;
        ev.params = v->has_pending ? v->pending : sim_volume_get_params(v->state);
        for (int i = 0; i < e->nparams; i++) {
            int n;
            const sim_param_desc *t = sim_volume_params_table(&n);
            if (srv_params_set(t, n, &ev.params, e->param_name[i], e->param_value[i], err,
                               sizeof err) != SIM_OK) {
                srv_reply_error(ss, it->client, e->seq, "bad parameter", err);
                return;
            }
        }
        break;
    case PROTO_EV_SLICE: {
        int w, h;
        sim_volume_slice_size(v->model, (sim_plane)e->plane, &w, &h);
        uint8_t *img = malloc((size_t)w * (size_t)h + 1);
        if (!img)
            return;
        if (sim_volume_slice(v->state, (sim_plane)e->plane, e->index, e->level_hu, e->width_hu,
                             NULL, img, err, sizeof err) != SIM_OK) {
            free(img);
            srv_reply_error(ss, it->client, e->seq, "bad slice", err);
            return;
        }
        proto_slice sl = {e->plane,    (uint32_t)e->index, (uint32_t)w, (uint32_t)h,
                          e->level_hu, e->width_hu,        img};
        proto_header hd;
        memset(&hd, 0, sizeof hd);
        hd.frame = ss->frame_no;
        hd.last_seq = e->seq;
        hd.sim_time_s = (double)ss->frame_no / s->cfg.rate_hz;
        proto_buf b = {0};
        if (proto_encode_slice(&b, &hd, &sl, 1) == PROTO_OK)
            srv_session_reply(ss, it->client, srv_frame_new(b.data, b.len, ss->frame_no, 0), NULL);
        proto_buf_free(&b);
        free(img);
        return;
    }
    default: /* the cloth's events */
        srv_reply_error(ss, it->client, e->seq, "not in this scene",
                        "the volume scene takes grab, move, release, set_params, set_condition, "
                        "slice, pause, resume, reset");
        return;
    }
    if (sim_volume_push_event(v->state, &ev, err, sizeof err) != SIM_OK) {
        srv_reply_error(ss, it->client, e->seq, "event refused", err);
        return;
    }
    if (e->type == PROTO_EV_SET_PARAMS || e->type == PROTO_EV_SET_CONDITION) {
        if (!v->has_pending)
            v->pending = sim_volume_get_params(v->state);
        if (e->type == PROTO_EV_SET_PARAMS)
            v->pending = ev.params;
        else
            v->pending.condition = ev.condition;
        v->has_pending = 1;
        *params_changed = 1;
    }
}

static int vol_create(srv *s, srv_session *ss, const cJSON *opts, char *err, size_t err_sz)
{
    const cJSON *dj = cJSON_GetObjectItemCaseSensitive(opts, "dims");
    int dims[3];
    if (dj) {
        if (!cJSON_IsArray(dj) || cJSON_GetArraySize(dj) != 3) {
            snprintf(err, err_sz, "\"dims\" must be [x, y, z]");
            return 400;
        }
        for (int b = 0; b < 3; b++) {
            const cJSON *e = cJSON_GetArrayItem(dj, b);
            if (!cJSON_IsNumber(e) || e->valuedouble < 8 || e->valuedouble > 4096) {
                snprintf(err, err_sz, "\"dims\" entries must be 8 to 4096");
                return 400;
            }
            dims[b] = (int)e->valuedouble;
        }
        int64_t n = (int64_t)dims[0] * dims[1] * dims[2];
        if (n > s->cfg.max_elements) {
            snprintf(err, err_sz, "dims %dx%dx%d: at most %lld elements", dims[0], dims[1], dims[2],
                     (long long)s->cfg.max_elements);
            return 413;
        }
    }
    vol_scene *v = calloc(1, sizeof *v);
    if (!v) {
        snprintf(err, err_sz, "out of memory");
        return 500;
    }
    ss->scene_data = v;
    if (dj) {
        sim_volume vol;
        if (sim_volume_phantom(&vol, dims[0], dims[1], dims[2], err, err_sz) != SIM_OK)
            return 400;
        sim_status st = sim_volume_model_create(&v->model, &vol, NULL, err, err_sz);
        sim_volume_free(&vol);
        if (st != SIM_OK)
            return 500;
        v->own_model = 1;
    } else {
        v->model = s->default_model;
    }
    if (sim_volume_state_create(&v->state, v->model, s->backend, err, err_sz) != SIM_OK)
        return 500;
    const sim_volume *vol = sim_volume_model_volume(v->model);
    int n[3] = {vol->nx, vol->ny, vol->nz};
    sim_volume_params p = sim_volume_get_params(v->state);
    for (int b = 0; b < 3; b++) {
        v->bmin[b] = -p.boundary_margin * vol->spacing_mm[b];
        v->bmax[b] = ((float)(n[b] - 1) + p.boundary_margin) * vol->spacing_mm[b];
    }
    for (int k = 0; k < SIM_NSURFACE; k++) {
        const sim_surface *sf = sim_volume_model_surface(v->model, (sim_surface_kind)k);
        v->pos[k] = malloc(((size_t)sf->nvert * 3 + 3) * sizeof(float));
        if (!v->pos[k]) {
            snprintf(err, err_sz, "out of memory");
            return 500;
        }
    }
    return 201;
}

static void vol_destroy(srv *s, srv_session *ss)
{
    vol_scene *v = ss->scene_data;
    if (!v)
        return;
    for (int k = 0; k < SIM_NSURFACE; k++)
        free(v->pos[k]);
    sim_volume_state_destroy(v->state);
    if (v->own_model && v->model != s->default_model)
        sim_volume_model_destroy(v->model);
    free(v);
    ss->scene_data = NULL;
}

/* The sim cuts a pull short where the tissue would leave the lattice box: tell the
 * driver once each time the hand reaches that edge, so a pull that stops is explained. */
static void notice_grab_clamp(srv *s, srv_session *ss, const sim_volume_metrics *mt)
{
    vol_scene *v = ss->scene_data;
    if (!mt->grab_clamped) {
        if (mt->grabbed == 0 || mt->passes > 0) /* let go, or moved freely again */
            v->clamp_noticed = 0;
        return;
    }
    if (v->clamp_noticed)
        return;
    v->clamp_noticed = 1;
    sim_volume_params p = sim_volume_get_params(v->state);
    char text[400];
    snprintf(text, sizeof text,
             "{\"type\":\"notice\",\"code\":\"grab_at_boundary\",\"seq\":%u,"
             "\"detail\":\"the pull stops here: further out the tissue would leave the volume's "
             "box (the lattice plus %g voxels), so the grab holds at its edge\"}",
             mt->last_seq, (double)p.boundary_margin);
    (void)s;
    pthread_mutex_lock(&ss->lock);
    uint32_t driver = ss->driver;
    pthread_mutex_unlock(&ss->lock);
    if (driver)
        srv_session_reply(ss, driver, NULL, text);
}

static int vol_step(srv *s, srv_session *ss, double *ms)
{
    vol_scene *v = ss->scene_data;
    sim_volume_metrics mt;
    char err[256];
    sim_volume_set_threads(v->state, srv_step_threads(s));
    v->has_pending = 0; /* the step applies what was queued */
    if (sim_volume_step(v->state, &mt, err, sizeof err) != SIM_OK) {
        fprintf(stderr, "softcast-server: session %s: step: %s\n", ss->id, err);
        *ms = 0;
        return 0;
    }
    *ms = mt.total_ms;
    notice_grab_clamp(s, ss, &mt);
    return !mt.skipped;
}

static void vol_view(srv_session *ss, srv_view *out)
{
    vol_scene *v = ss->scene_data;
    memset(out, 0, sizeof *out);
    memcpy(out->bmin, v->bmin, sizeof out->bmin);
    memcpy(out->bmax, v->bmax, sizeof out->bmax);
    out->nsurf = SIM_NSURFACE;
    for (int k = 0; k < SIM_NSURFACE; k++) {
        const sim_surface *sf = sim_volume_model_surface(v->model, (sim_surface_kind)k);
        sim_volume_surface_positions(v->state, (sim_surface_kind)k, v->pos[k]);
        out->surf[k].id = (uint8_t)k;
        out->surf[k].nvert = (uint32_t)sf->nvert;
        out->surf[k].ntri = (uint32_t)sf->ntri;
        out->surf[k].tri = sf->tri;
        out->surf[k].pos = v->pos[k];
    }
}

static char *vol_params_json(srv_session *ss)
{
    vol_scene *v = ss->scene_data;
    sim_volume_params p = sim_volume_get_params(v->state);
    int n;
    const sim_param_desc *t = sim_volume_params_table(&n);
    return srv_params_json(t, n, &p);
}

static void vol_describe(srv_session *ss, cJSON *j)
{
    vol_scene *v = ss->scene_data;
    const sim_volume *vol = sim_volume_model_volume(v->model);
    int dims[3] = {vol->nx, vol->ny, vol->nz};
    cJSON_AddItemToObject(j, "dims", cJSON_CreateIntArray(dims, 3));
    double sp[3] = {vol->spacing_mm[0], vol->spacing_mm[1], vol->spacing_mm[2]};
    cJSON_AddItemToObject(j, "spacing", cJSON_CreateDoubleArray(sp, 3));
}

const srv_scene_i srv_scene_volume = {
    "volume",    vol_create, vol_destroy,     vol_apply,
    vol_step,    vol_view,   vol_params_json, sim_volume_params_table,
    vol_describe};
