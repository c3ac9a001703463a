/* sched.c: the simulation worker. At a fixed rate it visits every session: drains its
 * inbox, applies the events at the frame boundary, steps the scene, encodes one frame
 * for all its clients (keyframe on join and every N frames, deltas between) and
 * publishes it, then wakes the WebSocket thread. A session with no clients sleeps; a
 * settled volume costs nothing and sends nothing until an event arrives. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "server.h"

/* Parameter names a client may set (protocol/README.md): flat names for globals,
 * "tissue.<class>.<field>" and "hu_threshold.<i>". */
static const struct {
    const char *name;
    size_t off;
    int is_int;
} k_globals[] = {
    {"alpha", offsetof(sim_volume_params, alpha), 0},
    {"b0", offsetof(sim_volume_params, b0), 0},
    {"inertia_gain", offsetof(sim_volume_params, inertia_gain), 0},
    {"v_max", offsetof(sim_volume_params, v_max), 0},
    {"dead_zone", offsetof(sim_volume_params, dead_zone), 0},
    {"boundary_margin", offsetof(sim_volume_params, boundary_margin), 0},
    {"relax_iterations", offsetof(sim_volume_params, relax_iterations), 1},
    {"relax_step", offsetof(sim_volume_params, relax_step), 0},
    {"relax_threshold", offsetof(sim_volume_params, relax_threshold), 0},
    {"home_weight", offsetof(sim_volume_params, home_weight), 0},
    {"max_passes", offsetof(sim_volume_params, max_passes), 1},
};
#define N_GLOBALS (sizeof k_globals / sizeof k_globals[0])
static const char *const k_tissue_fields[] = {"min_len", "max_len",  "shear",
                                              "speed",   "inv_mass", "b1"};

static float *tissue_field(sim_volume_params *p, int c, int j)
{
    float *f[6] = {&p->tissue[c].min_len, &p->tissue[c].max_len,  &p->tissue[c].shear,
                   &p->tissue[c].speed,   &p->tissue[c].inv_mass, &p->tissue[c].b1};
    return f[j];
}

static int set_param(sim_volume_params *p, const char *name, double v)
{
    for (size_t i = 0; i < N_GLOBALS; i++)
        if (!strcmp(name, k_globals[i].name)) {
            char *base = (char *)p + k_globals[i].off;
            if (k_globals[i].is_int) {
                if (v != floor(v) || fabs(v) > 1e6)
                    return -1;
                *(int *)(void *)base = (int)v;
            } else {
                *(float *)(void *)base = (float)v;
            }
            return 0;
        }
    unsigned t;
    if (sscanf(name, "hu_threshold.%u", &t) == 1 && t < 3) {
        p->hu_threshold[t] = (float)v;
        return 0;
    }
    for (int c = 0; c < SIM_NTISSUE; c++) {
        char prefix[64];
        size_t n = (size_t)snprintf(prefix, sizeof prefix, "tissue.%s.", sim_tissue_name(c));
        if (strncmp(name, prefix, n) != 0)
            continue;
        for (int j = 0; j < 6; j++)
            if (!strcmp(name + n, k_tissue_fields[j])) {
                *tissue_field(p, c, j) = (float)v;
                return 0;
            }
    }
    return -1;
}

char *srv_params_json(const sim_volume_params *params)
{
    sim_volume_params p = *params;
    cJSON *o = cJSON_CreateObject();
    if (!o)
        return NULL;
    char cond[2] = {(char)('A' + (int)p.condition), 0};
    cJSON_AddStringToObject(o, "condition", cond);
    for (size_t i = 0; i < N_GLOBALS; i++) {
        const char *base = (const char *)&p + k_globals[i].off;
        double v = k_globals[i].is_int ? (double)*(const int *)(const void *)base
                                       : (double)*(const float *)(const void *)base;
        cJSON_AddNumberToObject(o, k_globals[i].name, v);
    }
    char name[96];
    for (int t = 0; t < 3; t++) {
        snprintf(name, sizeof name, "hu_threshold.%d", t);
        cJSON_AddNumberToObject(o, name, (double)p.hu_threshold[t]);
    }
    for (int c = 0; c < SIM_NTISSUE; c++)
        for (int j = 0; j < 6; j++) {
            snprintf(name, sizeof name, "tissue.%s.%s", sim_tissue_name(c), k_tissue_fields[j]);
            cJSON_AddNumberToObject(o, name, (double)*tissue_field(&p, c, j));
        }
    char *text = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return text;
}

static void reply_error(srv_session *ss, uint32_t client, uint32_t seq, const char *error,
                        const char *detail)
{
    /* detail may carry client bytes (a parameter name): keep it printable ASCII without
     * quotes or backslashes, so the reply stays valid JSON and valid UTF-8. */
    char clean[300], text[512];
    size_t j = 0;
    for (const char *d = detail; d && *d && j + 1 < sizeof clean; d++) {
        unsigned char ch = (unsigned char)*d;
        clean[j++] = (ch < 0x20 || ch > 0x7e || ch == '"' || ch == '\\') ? '?' : (char)ch;
    }
    clean[j] = 0;
    snprintf(text, sizeof text,
             "{\"type\":\"error\",\"seq\":%u,\"error\":\"%s\",\"detail\":\"%s\"}", seq, error,
             clean);
    srv_session_reply(ss, client, NULL, text);
    pthread_mutex_lock(&ss->lock);
    ss->errors++;
    pthread_mutex_unlock(&ss->lock);
}

static void apply(srv *s, srv_session *ss, const srv_inbox_item *it)
{
    const proto_event *e = &it->ev;
    sim_volume_event ev;
    memset(&ev, 0, sizeof ev);
    ev.seq = e->seq;
    char err[256] = "";
    switch (e->type) {
    case PROTO_EV_GRAB:
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
        ev.params = sim_volume_get_params(ss->state);
        for (int i = 0; i < e->nparams; i++)
            if (set_param(&ev.params, e->param_name[i], e->param_value[i]) != 0) {
                reply_error(ss, it->client, e->seq, "unknown parameter", e->param_name[i]);
                return;
            }
        break;
    case PROTO_EV_PAUSE:
    case PROTO_EV_RESUME:
        pthread_mutex_lock(&ss->lock);
        ss->paused = e->type == PROTO_EV_PAUSE;
        ss->last_seq = e->seq;
        pthread_mutex_unlock(&ss->lock);
        return;
    case PROTO_EV_SLICE: {
        int w, h;
        sim_volume_slice_size(ss->model, (sim_plane)e->plane, &w, &h);
        uint8_t *img = malloc((size_t)w * (size_t)h + 1);
        if (!img)
            return;
        if (sim_volume_slice(ss->state, (sim_plane)e->plane, e->index, e->level_hu, e->width_hu,
                             NULL, img, err, sizeof err) != SIM_OK) {
            free(img);
            reply_error(ss, it->client, e->seq, "bad slice", err);
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
    case PROTO_EV_PING:
    case PROTO_EV_HANDOVER:
    case PROTO_EV_REQUEST_CONTROL:
        return; /* answered by the WebSocket thread */
    }
    if (sim_volume_push_event(ss->state, &ev, err, sizeof err) != SIM_OK)
        reply_error(ss, it->client, e->seq, "event refused", err);
}

/* Quantise the surfaces now; encode a keyframe or a delta; publish. */
static void encode_and_publish(srv *s, srv_session *ss, int keyframe, uint32_t last_seq)
{
    double t0 = srv_now_ms();
    if (!ss->nsurf) {
        ss->nsurf = 2;
        for (int k = 0; k < 2; k++) {
            const sim_surface *sf = sim_volume_model_surface(ss->model, (sim_surface_kind)k);
            ss->surf_nvert[k] = (uint32_t)sf->nvert;
            size_t n = (size_t)sf->nvert * 3 + 3;
            ss->surf_pos[k] = malloc(n * sizeof(float));
            ss->cur_q[k] = malloc(n * sizeof(uint16_t));
            ss->key_q[k] = malloc(n * sizeof(uint16_t));
            if (!ss->surf_pos[k] || !ss->cur_q[k] || !ss->key_q[k]) {
                for (int j = 0; j <= k; j++) { /* all or nothing: the next frame retries */
                    free(ss->surf_pos[j]);
                    free(ss->cur_q[j]);
                    free(ss->key_q[j]);
                    ss->surf_pos[j] = NULL;
                    ss->cur_q[j] = ss->key_q[j] = NULL;
                }
                ss->nsurf = 0;
                return;
            }
        }
    }
    proto_mesh cur, key;
    memset(&cur, 0, sizeof cur);
    memcpy(cur.bmin, ss->bmin, sizeof cur.bmin);
    memcpy(cur.bmax, ss->bmax, sizeof cur.bmax);
    cur.nsurf = 2;
    for (int k = 0; k < 2; k++) {
        const sim_surface *sf = sim_volume_model_surface(ss->model, (sim_surface_kind)k);
        sim_volume_surface_positions(ss->state, (sim_surface_kind)k, ss->surf_pos[k]);
        proto_quantise(ss->surf_pos[k], ss->surf_nvert[k], ss->bmin, ss->bmax, ss->cur_q[k]);
        cur.surf[k].id = (uint8_t)k;
        cur.surf[k].nvert = ss->surf_nvert[k];
        cur.surf[k].ntri = (uint32_t)sf->ntri;
        cur.surf[k].tri = sf->tri;
        cur.surf[k].q = ss->cur_q[k];
    }
    proto_header h;
    memset(&h, 0, sizeof h);
    h.frame = ss->frame_no;
    h.last_seq = last_seq;
    h.sim_time_s = (double)ss->frame_no / s->cfg.rate_hz;
    proto_buf b = {0};
    proto_status st = PROTO_OK;
    if (!keyframe) {
        key = cur;
        for (int k = 0; k < 2; k++)
            key.surf[k].q = ss->key_q[k];
        cur.key_frame = ss->key_frame_no;
        st = proto_encode_mesh_delta(&b, &h, &key, &cur, 1);
        /* Once the shape has drifted so far from the keyframe that a delta costs half a
         * keyframe, a new keyframe pays for itself within two frames. */
        if (st == PROTO_OK && b.len * 2 > ss->key_bytes) {
            keyframe = 1;
            b.len = 0;
        }
    }
    if (keyframe) {
        st = proto_encode_mesh_key(&b, &h, &cur, 1);
        for (int k = 0; k < 2; k++)
            memcpy(ss->key_q[k], ss->cur_q[k], (size_t)ss->surf_nvert[k] * 3 * sizeof(uint16_t));
        ss->key_frame_no = ss->frame_no;
        ss->key_bytes = b.len;
    }
    if (st == PROTO_OK) {
        srv_frame *f = srv_frame_new(b.data, b.len, ss->frame_no, keyframe);
        if (f)
            srv_session_publish(ss, f);
    }
    proto_buf_free(&b);
    pthread_mutex_lock(&ss->lock);
    ss->last_encode_ms = srv_now_ms() - t0;
    ss->encode_ms_sum += ss->last_encode_ms;
    ss->encodes++;
    pthread_mutex_unlock(&ss->lock);
}

typedef struct worker_arg {
    srv *s;
    int index;
    pthread_mutex_t lock; /* guards poked */
    pthread_cond_t cond;  /* CLOCK_MONOTONIC */
    int poked;
    atomic_int has_sessions; /* it had live sessions on its last pass */
} worker_arg;

static worker_arg *g_worker_args;

/* Workers whose slots hold live sessions (at least 1). Counted per pass rather than per
 * step, so two steps never both take all the cores for a moment. */
static int workers_with_sessions(srv *s)
{
    int n = 0;
    for (int k = 0; k < s->cfg.workers; k++)
        n += atomic_load(&g_worker_args[k].has_sessions) != 0;
    return n > 0 ? n : 1;
}

static int run_session(srv *s, srv_session *ss)
{
    srv_inbox_item items[SRV_INBOX_CAP];
    pthread_mutex_lock(&ss->lock);
    int n = ss->inbox_count, nclients = ss->nclients, want_key = ss->want_keyframe;
    for (int i = 0; i < n; i++)
        items[i] = ss->inbox[(ss->inbox_head + i) % SRV_INBOX_CAP];
    ss->inbox_head = (ss->inbox_head + n) % SRV_INBOX_CAP;
    ss->inbox_count = 0;
    ss->want_keyframe = 0;
    pthread_mutex_unlock(&ss->lock);
    if (nclients == 0 && n == 0)
        return 0; /* nobody watches: the session sleeps */
    /* Frames echo the seq of the driver's last applied event (its input-to-frame latency).
     * Slices are answered to their asker in their own frame, and viewers may ask: their
     * seqs, counted by another client, stay out of the echo. */
    uint32_t last_seq = 0;
    int driven = 0;
    double oldest = 0;
    int params_changed = 0, state_changed = 0;
    for (int i = 0; i < n; i++) {
        proto_event_type t = items[i].ev.type;
        params_changed |= t == PROTO_EV_SET_PARAMS || t == PROTO_EV_SET_CONDITION;
        state_changed |= t == PROTO_EV_PAUSE || t == PROTO_EV_RESUME;
        apply(s, ss, &items[i]);
        if (t != PROTO_EV_SLICE) {
            last_seq = items[i].ev.seq;
            driven = 1;
        }
        if (i == 0)
            oldest = items[i].arrived_ms;
    }
    pthread_mutex_lock(&ss->lock);
    if (driven)
        ss->last_seq = last_seq;
    last_seq = ss->last_seq;
    int paused = ss->paused;
    pthread_mutex_unlock(&ss->lock);
    sim_volume_metrics mt;
    memset(&mt, 0, sizeof mt);
    mt.skipped = 1;
    if (!paused) {
        char err[256];
        /* Share the cores among the workers that have sessions; with --threads, use that. */
        if (!s->cfg.threads) {
            int share = sim_backend_threads(s->backend) / workers_with_sessions(s);
            sim_volume_set_threads(ss->state, share > 0 ? share : 1);
        }
        if (sim_volume_step(ss->state, &mt, err, sizeof err) != SIM_OK)
            fprintf(stderr, "softcast-server: session %s: step: %s\n", ss->id, err);
    }
    ss->frame_no++;
    /* Every client hears of new parameters (applied by the step above) in a state message. */
    char *pj = NULL;
    if (params_changed) {
        sim_volume_params now_params = sim_volume_get_params(ss->state);
        pj = srv_params_json(&now_params);
    }
    if (pj || state_changed) {
        pthread_mutex_lock(&ss->lock);
        if (pj) {
            free(ss->params_json);
            ss->params_json = pj;
        }
        ss->state_version++;
        pthread_mutex_unlock(&ss->lock);
    }
    /* Keyframes: the first, one a joiner asked for, and at most every keyframe_every
     * frames while the shape moves (0: only when a delta grows past half a keyframe, see
     * encode_and_publish). A keyframe to every viewer is the one burst that the clients
     * of a big classroom feel, so a settled scene never sends one. */
    int changed = !mt.skipped || n > 0;
    int keyframe = want_key || ss->key_frame_no == 0 ||
                   (changed && s->cfg.keyframe_every > 0 &&
                    ss->frame_no - ss->key_frame_no >= (uint64_t)s->cfg.keyframe_every);
    if (changed || keyframe)
        encode_and_publish(s, ss, keyframe, last_seq);
    pthread_mutex_lock(&ss->lock);
    int replies = ss->nreplies;
    ss->frames++;
    ss->last_step_ms = mt.total_ms;
    ss->step_ms_sum += mt.total_ms;
    if (n) {
        ss->latency_ms_sum += srv_now_ms() - oldest;
        ss->latency_n++;
    }
    pthread_mutex_unlock(&ss->lock);
    return changed || keyframe || replies;
}

void srv_worker_poke(srv *s, uint32_t slot)
{
    if (!g_worker_args || s->cfg.workers <= 0)
        return;
    worker_arg *wa = &g_worker_args[slot % (uint32_t)s->cfg.workers];
    pthread_mutex_lock(&wa->lock);
    wa->poked = 1;
    pthread_cond_signal(&wa->cond);
    pthread_mutex_unlock(&wa->lock);
}

/* Sleep until the absolute monotonic time `until_ms`, or until poked or stopped. */
static void wait_until(worker_arg *wa, double until_ms)
{
    struct timespec ts;
    ts.tv_sec = (time_t)(until_ms / 1000.0);
    ts.tv_nsec = (long)(fmod(until_ms, 1000.0) * 1e6);
    pthread_mutex_lock(&wa->lock);
    while (!wa->poked && !atomic_load(&wa->s->stop))
        if (pthread_cond_timedwait(&wa->cond, &wa->lock, &ts) != 0)
            break;
    wa->poked = 0;
    pthread_mutex_unlock(&wa->lock);
}

/* Worker k steps the sessions in slots k, k + workers, k + 2 workers, ...: a session is
 * only ever stepped by one thread, and many sessions spread over the cores. Each session
 * keeps its own beat at rate_hz; an event that arrives between beats is stepped at once
 * (but never sooner than half a period after the last step), so input waits for a step,
 * not for the next tick, and the step rate stays bounded. */
static void *worker_main(void *arg)
{
    worker_arg *wa = arg;
    srv *s = wa->s;
    int k = wa->index, nw = s->cfg.workers;
    double period = 1000.0 / s->cfg.rate_hz;
    while (!atomic_load(&s->stop)) {
        if (k == 0)
            srv_sessions_reap(s);
        int woke = 0, live = 0;
        double now = srv_now_ms(), wake_at = now + period;
        for (int i = k; i < s->cfg.max_sessions; i += nw) {
            pthread_mutex_lock(&s->lock);
            srv_session *ss = s->slots[i];
            int closing = 1, pending = 0;
            if (ss) {
                pthread_mutex_lock(&ss->lock);
                closing = ss->closing;
                pending = ss->inbox_count > 0;
                pthread_mutex_unlock(&ss->lock);
                if (!closing)
                    s->refs[i]++; /* the worker holds it while it steps it */
            }
            pthread_mutex_unlock(&s->lock);
            if (!ss || closing)
                continue;
            if (!live++)
                atomic_store(&wa->has_sessions, 1);
            int early = pending && now - ss->step_at_ms >= 0.5 * period;
            if (now >= ss->due_ms || early) {
                woke |= run_session(s, ss);
                ss->step_at_ms = now;
                /* Keep the beat; after an early step or a stall, restart it from now. */
                ss->due_ms =
                    early || ss->due_ms + period < now ? now + period : ss->due_ms + period;
            }
            if (ss->due_ms < wake_at)
                wake_at = ss->due_ms;
            if (pending && !early && ss->step_at_ms + 0.5 * period < wake_at)
                wake_at = ss->step_at_ms + 0.5 * period;
            srv_session_put(s, ss);
        }
        if (!live)
            atomic_store(&wa->has_sessions, 0);
        if (woke)
            srv_ws_wake(s);
        wait_until(wa, wake_at);
    }
    return NULL;
}

int srv_worker_start(srv *s)
{
    int n = s->cfg.workers;
    s->workers = calloc((size_t)n, sizeof *s->workers);
    g_worker_args = calloc((size_t)n, sizeof *g_worker_args);
    if (!s->workers || !g_worker_args)
        return -1;
    for (int k = 0; k < n; k++) {
        worker_arg *wa = &g_worker_args[k];
        wa->s = s;
        wa->index = k;
        pthread_condattr_t ca;
        pthread_condattr_init(&ca);
        pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
        pthread_cond_init(&wa->cond, &ca);
        pthread_condattr_destroy(&ca);
        pthread_mutex_init(&wa->lock, NULL);
    }
    for (int k = 0; k < n; k++)
        if (pthread_create(&s->workers[k], NULL, worker_main, &g_worker_args[k]) != 0) {
            atomic_store(&s->stop, 1);
            for (int j = 0; j < k; j++) {
                srv_worker_poke(s, (uint32_t)j);
                pthread_join(s->workers[j], NULL);
            }
            s->cfg.workers = 0;
            return -1;
        }
    return 0;
}

void srv_worker_stop(srv *s)
{
    atomic_store(&s->stop, 1);
    for (int k = 0; s->workers && k < s->cfg.workers; k++) {
        srv_worker_poke(s, (uint32_t)k);
        pthread_join(s->workers[k], NULL);
    }
}

/* After the WebSocket thread has stopped too: nobody can poke a worker any more. */
void srv_worker_free(srv *s)
{
    for (int k = 0; g_worker_args && k < s->cfg.workers; k++) {
        pthread_cond_destroy(&g_worker_args[k].cond);
        pthread_mutex_destroy(&g_worker_args[k].lock);
    }
    free(s->workers);
    free(g_worker_args);
    s->workers = NULL;
    g_worker_args = NULL;
}
