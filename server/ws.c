/* ws.c: the WebSocket side (libwebsockets 4.1, one service thread).
 *
 * Runs on the lws service thread, all of it. Other threads reach it only through
 * lws_cancel_service() (srv_ws_wake), which lands here as EVENT_WAIT_CANCELLED: then
 * every client with something new asks for a WRITEABLE callback. Each WRITEABLE makes one
 * lws_write: a queued text reply first, then a reply from the worker (slice, error),
 * then a state message if the session's state changed (clients, driver, pause,
 * parameters; latest-wins too), then the session's newest mesh frame. Delivery is latest-wins: a
 * slow client is sent the newest frame when its socket drains, never a backlog, so it costs at most
 * one frame in flight and never stalls the others. A client whose keyframe is older than the
 * session's gets that keyframe first.
 *
 * Connect: ws://host:port/?session=ID&token=TOKEN. The control token drives; the view
 * token watches; anything else is refused at the handshake. */
#include <libwebsockets.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "scene.h"

_Static_assert(LWS_PRE <= SRV_FRAME_HEADROOM, "srv_frame headroom must hold LWS_PRE");

#define OUT_TEXT_CAP 16

struct srv_client {
    struct lws *wsi;
    srv_session *ss;
    uint32_t id;
    char session_id[SRV_ID_LEN + 16]; /* room for "session=" while parsing */
    char token[SRV_TOKEN_LEN + 16];
    uint64_t sent_frame; /* newest mesh frame number sent */
    uint64_t have_key;   /* keyframe the client holds (its deltas apply to it) */
    uint64_t have_table; /* LOD table sent (cloth), by frame number */
    int got_any;
    uint32_t sent_state; /* session state_version last sent */
    int got_state;
    size_t unsent; /* bytes handed to lws since the socket last drained (its WRITEABLE) */
    double tokens, last_refill_ms; /* event rate limit: token bucket */
    char *rx;
    size_t rx_len;
    int rx_too_big;
    char *out[OUT_TEXT_CAP];
    int nout;
    int closing;
    srv_client *next;
};

typedef struct ws_ctx {
    struct lws_context *ctx;
    struct lws_vhost *vh;
    pthread_t thread;
    srv_client *clients; /* service thread only */
    atomic_int nclients; /* read by HTTP threads for /api/health */
    srv *s;
} ws_ctx;

static void queue_text(srv_client *c, const char *text)
{
    if (c->nout == OUT_TEXT_CAP) { /* a peer that does not read loses the oldest reply */
        free(c->out[0]);
        memmove(&c->out[0], &c->out[1], (OUT_TEXT_CAP - 1) * sizeof c->out[0]);
        c->nout--;
    }
    c->out[c->nout++] = strdup(text);
    lws_callback_on_writable(c->wsi);
}

static void queue_error(srv *s, srv_client *c, uint32_t seq, const char *error, const char *detail)
{
    char text[600], clean[400];
    size_t j = 0;
    for (const char *d = detail; d && *d && j + 1 < sizeof clean; d++)
        clean[j++] = (*d == '"' || *d == '\\' || (unsigned char)*d < 0x20) ? '\'' : *d;
    clean[j] = 0;
    snprintf(text, sizeof text,
             "{\"type\":\"error\",\"seq\":%u,\"error\":\"%s\",\"detail\":\"%s\"}", seq, error,
             clean);
    queue_text(c, text);
    atomic_fetch_add(&s->total_errors, 1);
    if (c->ss) {
        pthread_mutex_lock(&c->ss->lock);
        c->ss->errors++;
        pthread_mutex_unlock(&c->ss->lock);
    }
}

static int is_driver(srv_client *c)
{
    pthread_mutex_lock(&c->ss->lock);
    int d = c->ss->driver == c->id;
    pthread_mutex_unlock(&c->ss->lock);
    return d;
}

static srv_client *find_client(ws_ctx *w, srv_session *ss, uint32_t id)
{
    for (srv_client *c = w->clients; c; c = c->next)
        if (c->ss == ss && c->id == id)
            return c;
    return NULL;
}

/* n more bytes went to lws for this client. lws calls WRITEABLE only once it has handed
 * everything to the kernel, so c->unsent bounds what lws holds for the client; the
 * session keeps the peak for /metrics (one frame when a slow client skips frames). */
static void note_unsent(srv_client *c, size_t n)
{
    c->unsent += n;
    if (!c->ss)
        return;
    pthread_mutex_lock(&c->ss->lock);
    if (c->unsent > c->ss->backlog_peak)
        c->ss->backlog_peak = c->unsent;
    pthread_mutex_unlock(&c->ss->lock);
}

static void send_role(srv_client *c, const char *why)
{
    char text[256];
    int driver = is_driver(c);
    pthread_mutex_lock(&c->ss->lock);
    int n = c->ss->nclients;
    pthread_mutex_unlock(&c->ss->lock);
    snprintf(
        text, sizeof text,
        "{\"type\":\"%s\",\"session\":\"%s\",\"client_id\":\"c%u\",\"role\":\"%s\",\"clients\":%d}",
        why, c->ss->id, c->id, driver ? "driver" : "viewer", n);
    queue_text(c, text);
}

/* The session's state for one client (its role included), composed when sent so that a
 * burst of changes costs one message. Caller frees. */
static char *state_text(srv_client *c)
{
    srv_session *ss = c->ss;
    cJSON *j = cJSON_CreateObject();
    char id[16];
    snprintf(id, sizeof id, "c%u", c->id);
    cJSON_AddStringToObject(j, "type", "state");
    cJSON_AddStringToObject(j, "session", ss->id);
    cJSON_AddStringToObject(j, "scene", ss->scene->name);
    cJSON_AddStringToObject(j, "client_id", id);
    ss->scene->describe(ss, j); /* fixed at creation: no lock needed */
    pthread_mutex_lock(&ss->lock);
    cJSON_AddStringToObject(j, "role", ss->driver == c->id ? "driver" : "viewer");
    if (ss->driver) {
        char d[16];
        snprintf(d, sizeof d, "c%u", ss->driver);
        cJSON_AddStringToObject(j, "driver", d);
    } else {
        cJSON_AddNullToObject(j, "driver");
    }
    cJSON_AddNumberToObject(j, "clients", ss->nclients);
    cJSON_AddBoolToObject(j, "paused", ss->paused);
    if (ss->driver == c->id) /* the driver may share the viewer link */
        cJSON_AddStringToObject(j, "view_token", ss->view_token);
    cJSON_AddRawToObject(j, "params", ss->params_json);
    if (!c->got_state) { /* the schema once per connection: it never changes */
        int n;
        const sim_param_desc *t = ss->scene->params_table(&n);
        cJSON_AddItemToObject(j, "param_schema", srv_params_schema(t, n));
    }
    c->sent_state = ss->state_version;
    c->got_state = 1;
    pthread_mutex_unlock(&ss->lock);
    char *t = cJSON_PrintUnformatted(j);
    cJSON_Delete(j);
    return t;
}

/* Clients, driver or pause changed in this thread: every client of the session hears. */
static void state_changed(ws_ctx *w, srv_session *ss)
{
    pthread_mutex_lock(&ss->lock);
    ss->state_version++;
    pthread_mutex_unlock(&ss->lock);
    for (srv_client *k = w->clients; k; k = k->next)
        if (k->ss == ss)
            lws_callback_on_writable(k->wsi);
}

static void handle_text(ws_ctx *w, srv_client *c, const char *msg, size_t len)
{
    srv *s = w->s;
    proto_event ev;
    char err[256];
    proto_status st = proto_parse_event(&ev, msg, len, err, sizeof err);
    if (st != PROTO_OK) {
        queue_error(s, c, ev.seq, st == PROTO_ERR_KIND ? "unknown message type" : "bad message",
                    err);
        return;
    }
    /* Token bucket: max_events_per_s a second, bursts up to the same number. */
    double now = srv_now_ms(), rate = s->cfg.max_events_per_s;
    c->tokens += (now - c->last_refill_ms) * rate / 1000.0;
    if (c->tokens > rate)
        c->tokens = rate;
    c->last_refill_ms = now;
    if (c->tokens < 1.0) {
        queue_error(s, c, ev.seq, "rate limited", "more events a second than the server allows");
        return;
    }
    c->tokens -= 1.0;
    if (ev.type == PROTO_EV_PING) {
        char text[160];
        snprintf(text, sizeof text, "{\"type\":\"pong\",\"seq\":%u,\"t\":%.17g,\"server_ms\":%.3f}",
                 ev.seq, ev.client_time_ms, now);
        queue_text(c, text);
        return;
    }
    if (ev.type == PROTO_EV_REQUEST_CONTROL) {
        /* Nobody drives: the asker does. Otherwise the driver is asked and decides. */
        pthread_mutex_lock(&c->ss->lock);
        uint32_t d = c->ss->driver;
        if (!d)
            c->ss->driver = c->id;
        pthread_mutex_unlock(&c->ss->lock);
        srv_client *dc = d ? find_client(w, c->ss, d) : NULL;
        if (!d) {
            send_role(c, "role");
            state_changed(w, c->ss);
        } else if (d == c->id) {
            queue_error(s, c, ev.seq, "already the driver", "this client holds control");
        } else if (dc) {
            char text[96];
            snprintf(text, sizeof text, "{\"type\":\"control_request\",\"from\":\"c%u\"}", c->id);
            queue_text(dc, text);
        }
        return;
    }
    int viewer_ok = ev.type == PROTO_EV_SLICE; /* a viewer may look, not touch */
    if (!viewer_ok && !is_driver(c)) {
        queue_error(s, c, ev.seq, "not the driver", "this client watches; events need control");
        return;
    }
    if (ev.type == PROTO_EV_HANDOVER) {
        unsigned to = 0;
        srv_client *t = sscanf(ev.target, "c%u", &to) == 1 ? find_client(w, c->ss, to) : NULL;
        if (!t) {
            queue_error(s, c, ev.seq, "unknown client", ev.target);
            return;
        }
        pthread_mutex_lock(&c->ss->lock);
        c->ss->driver = t->id;
        pthread_mutex_unlock(&c->ss->lock);
        send_role(c, "role");
        send_role(t, "role");
        state_changed(w, c->ss);
        return;
    }
    if (srv_session_push(c->ss, &ev, c->id) != 0)
        queue_error(s, c, ev.seq, "busy", "the session's inbox is full");
    else
        srv_worker_poke(s, c->ss->slot);
}

/* One lws_write of whatever is most urgent. Returns -1 to close. */
static int write_next(ws_ctx *w, srv_client *c)
{
    srv_session *ss = c->ss;
    if (c->nout) {
        char *t = c->out[0];
        size_t n = strlen(t);
        unsigned char *buf = malloc(LWS_PRE + n);
        if (!buf)
            return -1;
        memcpy(buf + LWS_PRE, t, n);
        int r = lws_write(c->wsi, buf + LWS_PRE, n, LWS_WRITE_TEXT);
        note_unsent(c, n);
        free(buf);
        free(t);
        memmove(&c->out[0], &c->out[1], (size_t)(c->nout - 1) * sizeof c->out[0]);
        c->nout--;
        if (r < (int)n)
            return -1;
        lws_callback_on_writable(c->wsi); /* frames or more replies may be waiting */
        return 0;
    }
    srv_frame *f = NULL;
    char *text = NULL;
    int closing;
    pthread_mutex_lock(&ss->lock);
    closing = ss->closing;
    for (int i = 0; i < ss->nreplies; i++)
        if (ss->replies[i].client == c->id) {
            f = ss->replies[i].frame;
            text = ss->replies[i].text;
            memmove(&ss->replies[i], &ss->replies[i + 1],
                    (size_t)(ss->nreplies - i - 1) * sizeof ss->replies[0]);
            ss->nreplies--;
            break;
        }
    int state_due =
        !f && !text && !closing && (!c->got_state || c->sent_state != ss->state_version);
    int is_mesh = 0, is_table = 0;
    if (!f && !text && !closing && !state_due) {
        srv_frame *latest = ss->latest, *key = ss->keyframe, *table = ss->lod_table;
        if (key && (!c->got_any || c->have_key != key->frame)) {
            /* Join, or the client's deltas no longer apply: the keyframe, after the LOD
             * table that describes it when the scene has one. */
            is_table = table && c->have_table != table->frame;
            f = is_table ? table : key;
        } else if (latest && (!c->got_any || latest->frame > c->sent_frame)) {
            f = latest;
        }
        if (f) {
            srv_frame_ref(f);
            is_mesh = !is_table;
        }
    }
    pthread_mutex_unlock(&ss->lock);
    if (closing && !f && !text) {
        lws_close_reason(c->wsi, LWS_CLOSE_STATUS_GOINGAWAY, (unsigned char *)"session closed", 14);
        return -1;
    }
    if (state_due && !text)
        text = state_text(c);
    if (text) {
        queue_text(c, text);
        free(text);
        return 0;
    }
    if (!f)
        return 0;
    size_t flen = f->len;
    int r = lws_write(c->wsi, f->data + SRV_FRAME_HEADROOM, flen, LWS_WRITE_BINARY);
    note_unsent(c, flen);
    if (is_table) {
        c->have_table = f->frame;
    } else if (is_mesh) {
        c->got_any = 1;
        c->sent_frame = f->frame;
        if (f->keyframe)
            c->have_key = f->frame;
    }
    pthread_mutex_lock(&ss->lock);
    ss->frames_sent++;
    ss->bytes_sent += flen;
    pthread_mutex_unlock(&ss->lock);
    atomic_fetch_add(&w->s->total_frames_sent, 1);
    atomic_fetch_add(&w->s->total_bytes_sent, flen);
    srv_frame_unref(f);
    if (r >= 0 && (size_t)r < flen)
        return -1;
    /* More may be waiting (a reply, a newer frame): ask again. */
    lws_callback_on_writable(c->wsi);
    return r < 0 ? -1 : 0;
}

static int has_news(srv_client *c)
{
    if (c->nout)
        return 1;
    srv_session *ss = c->ss;
    pthread_mutex_lock(&ss->lock);
    int news = ss->closing || (ss->latest && (!c->got_any || ss->latest->frame > c->sent_frame)) ||
               (ss->keyframe && c->have_key != ss->keyframe->frame) || !c->got_state ||
               c->sent_state != ss->state_version;
    for (int i = 0; !news && i < ss->nreplies; i++)
        news = ss->replies[i].client == c->id;
    pthread_mutex_unlock(&ss->lock);
    return news;
}

static void unlink_client(ws_ctx *w, srv_client *c)
{
    for (srv_client **p = &w->clients; *p; p = &(*p)->next)
        if (*p == c) {
            *p = c->next;
            w->nclients--;
            break;
        }
}

/* A URL argument's value: lws copies the whole "name=value" into buf and points at the
 * value inside it. */
static int url_arg(struct lws *wsi, const char *name, char *buf, int len)
{
    const char *v = lws_get_urlarg_by_name(wsi, name, buf, len);
    if (!v)
        return 0;
    memmove(buf, v, strlen(v) + 1);
    return buf[0] != 0;
}

static int callback(struct lws *wsi, enum lws_callback_reasons reason, void *user, void *in,
                    size_t len)
{
    struct lws_context *ctx = lws_get_context(wsi);
    ws_ctx *w = ctx ? lws_context_user(ctx) : NULL;
    srv_client *c = user;
    if (!w)
        return 0;
    srv *s = w->s;
    switch (reason) {
    case LWS_CALLBACK_FILTER_PROTOCOL_CONNECTION:
        /* Accept the handshake and judge the credentials once established, so a refused
         * client learns why (an error message, then close 1008) instead of a bare hang-up. */
        memset(c, 0, sizeof *c);
        url_arg(wsi, "session=", c->session_id, sizeof c->session_id);
        url_arg(wsi, "token=", c->token, sizeof c->token);
        return 0;
    case LWS_CALLBACK_ESTABLISHED: {
        c->wsi = wsi;
        const char *why = NULL;
        srv_session *ss = c->session_id[0] ? srv_session_get(s, c->session_id) : NULL;
        if (!c->session_id[0])
            why = "the URL needs ?session=ID&token=TOKEN";
        else if (!ss)
            why = "unknown session";
        if (ss) {
            pthread_mutex_lock(&ss->lock);
            int driver = !strcmp(c->token, ss->control_token);
            int viewer = !strcmp(c->token, ss->view_token);
            if (!driver && !viewer)
                why = "wrong or missing token";
            else if (ss->nclients >= s->cfg.max_clients_per_session)
                why = "the session holds its limit of clients";
            if (!why) {
                c->id = atomic_fetch_add(&s->next_client, 1) + 1;
                ss->nclients++;
                if (driver)
                    ss->driver = c->id; /* the newest holder of the control token drives */
                /* A joiner starts from the session's keyframe (deltas are relative to it);
                 * only a session that has none yet must make one. */
                if (!ss->keyframe)
                    ss->want_keyframe = 1;
            }
            pthread_mutex_unlock(&ss->lock);
            if (why)
                srv_session_put(s, ss);
        }
        memset(c->token, 0, sizeof c->token);
        if (why) {
            char text[200];
            snprintf(text, sizeof text,
                     "{\"type\":\"error\",\"seq\":0,\"error\":\"refused\",\"detail\":\"%s\"}", why);
            c->closing = 1;
            queue_text(c, text);
            atomic_fetch_add(&s->total_errors, 1);
            return 0;
        }
        c->ss = ss;
        c->tokens = s->cfg.max_events_per_s;
        c->last_refill_ms = srv_now_ms();
        c->next = w->clients;
        w->clients = c;
        w->nclients++;
        atomic_fetch_add(&s->total_clients, 1);
        send_role(c, "welcome");
        state_changed(w, ss);
        return 0;
    }
    case LWS_CALLBACK_RECEIVE: {
        if (c->closing)
            return 0;
        if (!c->ss)
            return -1;
        if (lws_frame_is_binary(wsi)) {
            if (lws_is_final_fragment(wsi))
                queue_error(s, c, 0, "bad message", "binary messages are not accepted");
            return 0;
        }
        if (c->rx_len + len > (size_t)s->cfg.max_message_bytes) {
            c->rx_too_big = 1;
        } else {
            char *nb = realloc(c->rx, c->rx_len + len + 1);
            if (!nb)
                return -1;
            c->rx = nb;
            memcpy(c->rx + c->rx_len, in, len);
            c->rx_len += len;
        }
        if (!lws_is_final_fragment(wsi) || lws_remaining_packet_payload(wsi))
            return 0;
        if (c->rx_too_big) {
            char d[96];
            snprintf(d, sizeof d, "messages are limited to %d bytes", s->cfg.max_message_bytes);
            queue_error(s, c, 0, "message too large", d);
        } else {
            handle_text(w, c, c->rx, c->rx_len);
        }
        free(c->rx);
        c->rx = NULL;
        c->rx_len = 0;
        c->rx_too_big = 0;
        return 0;
    }
    case LWS_CALLBACK_SERVER_WRITEABLE:
        if (c->closing) { /* refused: say why, then close */
            if (c->nout)
                return write_next(w, c) < 0 ? -1 : (lws_callback_on_writable(wsi), 0);
            lws_close_reason(wsi, LWS_CLOSE_STATUS_POLICY_VIOLATION, (unsigned char *)"refused", 7);
            return -1;
        }
        if (!c->ss)
            return -1;
        if (atomic_load(&s->stop)) {
            lws_close_reason(wsi, LWS_CLOSE_STATUS_GOINGAWAY, (unsigned char *)"shutdown", 8);
            return -1;
        }
        c->unsent = 0; /* lws holds nothing for it now */
        return write_next(w, c);
    case LWS_CALLBACK_CLOSED:
        if (c->ss) {
            unlink_client(w, c);
            pthread_mutex_lock(&c->ss->lock);
            c->ss->nclients--;
            if (c->ss->driver == c->id)
                c->ss->driver = 0;
            for (int i = 0; i < c->ss->nreplies;)
                if (c->ss->replies[i].client == c->id) {
                    srv_frame_unref(c->ss->replies[i].frame);
                    free(c->ss->replies[i].text);
                    memmove(&c->ss->replies[i], &c->ss->replies[i + 1],
                            (size_t)(c->ss->nreplies - i - 1) * sizeof c->ss->replies[0]);
                    c->ss->nreplies--;
                } else {
                    i++;
                }
            pthread_mutex_unlock(&c->ss->lock);
            state_changed(w, c->ss); /* the others hear that one left */
            srv_session_put(s, c->ss);
            c->ss = NULL;
        }
        free(c->rx);
        c->rx = NULL;
        for (int i = 0; i < c->nout; i++)
            free(c->out[i]);
        c->nout = 0;
        return 0;
    case LWS_CALLBACK_EVENT_WAIT_CANCELLED:
        for (srv_client *k = w->clients; k; k = k->next) {
            if (atomic_load(&s->stop) || has_news(k))
                lws_callback_on_writable(k->wsi);
            /* A deleted session must not be held by a client that stopped reading (its
             * WRITEABLE, where the close is sent, never comes): give it 2 s. Replies the
             * worker made for clients that have gone since are dropped here. */
            pthread_mutex_lock(&k->ss->lock);
            int closing = k->ss->closing;
            for (int i = 0; i < k->ss->nreplies;) {
                if (find_client(w, k->ss, k->ss->replies[i].client)) {
                    i++;
                    continue;
                }
                srv_frame_unref(k->ss->replies[i].frame);
                free(k->ss->replies[i].text);
                memmove(&k->ss->replies[i], &k->ss->replies[i + 1],
                        (size_t)(k->ss->nreplies - i - 1) * sizeof k->ss->replies[0]);
                k->ss->nreplies--;
            }
            pthread_mutex_unlock(&k->ss->lock);
            if (closing)
                lws_set_timeout(k->wsi, PENDING_TIMEOUT_CLOSE_SEND, 2);
        }
        return 0;
    default:
        return 0;
    }
}

static const struct lws_protocols k_protocols[] = {
    {"softcast", callback, sizeof(srv_client), 4096, 0, NULL, 0},
    {NULL, NULL, 0, 0, 0, NULL, 0},
};

static void *ws_main(void *arg)
{
    ws_ctx *w = arg;
    while (!atomic_load(&w->s->stop))
        lws_service(w->ctx, 0);
    /* Shutdown: every client gets a close frame; a few rounds let them go out. */
    for (int i = 0; i < 50 && w->clients; i++) {
        lws_cancel_service(w->ctx);
        lws_service(w->ctx, 0);
    }
    return NULL;
}

int srv_ws_start(srv *s, char *err, size_t err_sz)
{
    ws_ctx *w = calloc(1, sizeof *w);
    if (!w)
        return -1;
    w->s = s;
    lws_set_log_level(
        getenv("SOFTCAST_LWS_DEBUG") ? LLL_ERR | LLL_WARN | LLL_NOTICE | LLL_INFO : LLL_ERR, NULL);
    struct lws_context_creation_info info;
    memset(&info, 0, sizeof info);
    info.port = s->cfg.ws_port;
    info.iface = s->cfg.bind;
    info.protocols = k_protocols;
    info.user = w;
    info.options = LWS_SERVER_OPTION_DISABLE_IPV6;
    w->ctx = lws_create_context(&info);
    if (!w->ctx) {
        snprintf(err, err_sz, "WebSocket: cannot listen on %s:%d", s->cfg.bind, s->cfg.ws_port);
        free(w);
        return -1;
    }
    w->vh = lws_get_vhost_by_name(w->ctx, "default");
    s->ws_port = w->vh ? lws_get_vhost_listen_port(w->vh) : s->cfg.ws_port;
    s->ws = w;
    if (pthread_create(&w->thread, NULL, ws_main, w) != 0) {
        lws_context_destroy(w->ctx);
        free(w);
        s->ws = NULL;
        snprintf(err, err_sz, "WebSocket: cannot start its thread");
        return -1;
    }
    return 0;
}

void srv_ws_wake(srv *s)
{
    ws_ctx *w = s->ws;
    if (w)
        lws_cancel_service(w->ctx);
}

int srv_ws_clients(srv *s)
{
    ws_ctx *w = s->ws;
    return w ? atomic_load(&w->nclients) : 0;
}

void srv_ws_stop(srv *s)
{
    ws_ctx *w = s->ws;
    if (!w)
        return;
    atomic_store(&s->stop, 1);
    lws_cancel_service(w->ctx);
    pthread_join(w->thread, NULL);
    lws_context_destroy(w->ctx);
    free(w);
    s->ws = NULL;
}
