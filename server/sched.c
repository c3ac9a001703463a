/* sched.c: the simulation worker. At a fixed rate it visits every session: drains its
 * inbox, applies the events at the frame boundary, steps the scene (scene.h), encodes
 * one frame for all its clients (a keyframe on join, on a new topology and when deltas
 * grow; deltas between) and publishes it, then wakes the WebSocket thread. A session with
 * no clients sleeps; a settled scene costs nothing and sends nothing until an event. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "scene.h"

void srv_reply_error(srv_session *ss, uint32_t client, uint32_t seq, const char *error,
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

/* Pause and resume are the session's; everything else is the scene's. */
static void apply(srv *s, srv_session *ss, const srv_inbox_item *it, int *params_changed,
                  int *state_changed)
{
    const proto_event *e = &it->ev;
    if (e->type == PROTO_EV_PAUSE || e->type == PROTO_EV_RESUME) {
        pthread_mutex_lock(&ss->lock);
        ss->paused = e->type == PROTO_EV_PAUSE;
        pthread_mutex_unlock(&ss->lock);
        *state_changed = 1;
        return;
    }
    ss->scene->apply(s, ss, it, params_changed);
}

/* Quantise the view now; encode a keyframe (after the scene's LOD table, if any) or a
 * delta; publish. A new topology always makes a keyframe. */
static void encode_and_publish(srv *s, srv_session *ss, int keyframe, uint32_t last_seq)
{
    double t0 = srv_now_ms();
    srv_view view;
    ss->scene->view(ss, &view);
    if (view.topology != ss->key_topology || view.nsurf != ss->enc_nsurf)
        keyframe = 1;
    for (int k = 0; k < view.nsurf; k++)
        if (view.surf[k].nvert != ss->enc_nvert[k]) { /* all or nothing: the next frame retries */
            size_t n = (size_t)view.surf[k].nvert * 3 + 3;
            uint16_t *c = realloc(ss->cur_q[k], n * sizeof(uint16_t));
            if (c)
                ss->cur_q[k] = c;
            uint16_t *q = c ? realloc(ss->key_q[k], n * sizeof(uint16_t)) : NULL;
            if (q)
                ss->key_q[k] = q;
            if (!c || !q) {
                ss->enc_nsurf = 0;
                return;
            }
            ss->enc_nvert[k] = view.surf[k].nvert;
            keyframe = 1;
        }
    ss->enc_nsurf = view.nsurf;
    proto_mesh cur, key;
    memset(&cur, 0, sizeof cur);
    memcpy(cur.bmin, view.bmin, sizeof cur.bmin);
    memcpy(cur.bmax, view.bmax, sizeof cur.bmax);
    cur.nsurf = (uint32_t)view.nsurf;
    for (int k = 0; k < view.nsurf; k++) {
        proto_quantise(view.surf[k].pos, view.surf[k].nvert, view.bmin, view.bmax, ss->cur_q[k]);
        cur.surf[k].id = view.surf[k].id;
        cur.surf[k].nvert = view.surf[k].nvert;
        cur.surf[k].ntri = view.surf[k].ntri;
        cur.surf[k].tri = view.surf[k].tri;
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
        for (int k = 0; k < view.nsurf; k++)
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
    srv_frame *table = NULL;
    if (keyframe && view.nlods) { /* the LOD table that describes the keyframe */
        proto_buf t = {0};
        st = proto_encode_lod_table(&t, &h, view.lods, view.nlods, 1);
        table = st == PROTO_OK ? srv_frame_new(t.data, t.len, ss->frame_no, 0) : NULL;
        if (!table)
            st = PROTO_ERR_NOMEM;
        proto_buf_free(&t);
    }
    if (keyframe && st == PROTO_OK)
        st = proto_encode_mesh_key(&b, &h, &cur, 1);
    srv_frame *f = st == PROTO_OK ? srv_frame_new(b.data, b.len, ss->frame_no, keyframe) : NULL;
    if (f && keyframe) { /* the reference moves only with a published keyframe */
        for (int k = 0; k < view.nsurf; k++)
            memcpy(ss->key_q[k], ss->cur_q[k], (size_t)view.surf[k].nvert * 3 * sizeof(uint16_t));
        ss->key_frame_no = ss->frame_no;
        ss->key_bytes = b.len;
        ss->key_topology = view.topology;
    }
    if (f)
        srv_session_publish(ss, f, table);
    else
        srv_frame_unref(table);
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

int srv_step_threads(srv *s)
{
    if (s->cfg.threads)
        return s->cfg.threads;
    int share = sim_backend_threads(s->backend) / workers_with_sessions(s);
    return share > 0 ? share : 1;
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
        apply(s, ss, &items[i], &params_changed, &state_changed);
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
    double step_ms = 0;
    int moved = !paused && ss->scene->step(s, ss, &step_ms);
    ss->frame_no++;
    /* Every client hears of new parameters in a state message, once a step has applied
     * them (a paused session holds them until it resumes). */
    ss->params_dirty |= params_changed;
    char *pj = NULL;
    if (ss->params_dirty && !paused) {
        pj = ss->scene->params_json(ss);
        ss->params_dirty = 0;
    }
    int news = pj || state_changed; /* a state message is due: wake the ws thread */
    if (news) {
        pthread_mutex_lock(&ss->lock);
        if (pj) {
            free(ss->params_json);
            ss->params_json = pj;
        }
        ss->state_version++;
        pthread_mutex_unlock(&ss->lock);
    }
    /* A paused session sends nothing new (its events wait in the scene for resume); a
     * joiner still gets its keyframe. Keyframes: the first, one a joiner asked for, and at
     * most every keyframe_every frames while the shape moves (0: only when a delta grows
     * past half a keyframe, see encode_and_publish). A keyframe to every viewer is the one
     * burst that the clients of a big classroom feel, so a settled scene never sends one. */
    int changed = moved || (n > 0 && !paused);
    int keyframe = want_key || ss->key_frame_no == 0 ||
                   (changed && s->cfg.keyframe_every > 0 &&
                    ss->frame_no - ss->key_frame_no >= (uint64_t)s->cfg.keyframe_every);
    if (changed || keyframe)
        encode_and_publish(s, ss, keyframe, last_seq);
    pthread_mutex_lock(&ss->lock);
    int replies = ss->nreplies;
    ss->frames++;
    ss->last_step_ms = step_ms;
    ss->step_ms_sum += step_ms;
    if (n) {
        ss->latency_ms_sum += srv_now_ms() - oldest;
        ss->latency_n++;
    }
    pthread_mutex_unlock(&ss->lock);
    return changed || keyframe || replies || news;
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
