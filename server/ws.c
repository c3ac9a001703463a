/* ws.c: the WebSocket side (libwebsockets 4.1, one service thread).
 *
 * Runs on the lws service thread, all of it, but srv_ws_news. Other threads reach it only
 * through srv_ws_news (srv.on_news): it notes the session's slot and calls
 * lws_cancel_service(), which lands here as EVENT_WAIT_CANCELLED; then only the clients of
 * the sessions with news are looked at (each session's clients are a list of their own,
 * its "room"): the worker's replies move into their clients' outboxes, and every client
 * with something new asks for a WRITEABLE callback. Each WRITEABLE makes one lws_write:
 * the client's outbox first (its own text messages and the replies addressed to it, in
 * order; bounded, the oldest dropped), then a state message if the session's state changed
 * (clients, driver, pause, parameters; latest-wins too), then the object frame it needs
 * next (protocol/README.md, "Sending object frames"): a joiner starts at a snapshot, then
 * gets every structural frame (keys, appends, removals) in order; other frames are
 * latest-wins: a slow client is sent the newest frame when its socket drains, never a
 * backlog, so it costs at most one frame in flight and never stalls the others. A client
 * so far behind that a structural frame it needs has left the session's chain starts again
 * at a snapshot.
 *
 * Messages: the protocol reads the envelope (type, seq); the server's own messages (ping,
 * request_control, handover, pause, resume) are handled here, every other type is looked
 * up in the session's scene, whose parser reads the payload once into the small struct the
 * inbox carries to the worker.
 *
 * Connect: ws://host:port/?session=ID&token=TOKEN. The control token drives; the view
 * token watches; anything else is refused with a reason. */
#include <libwebsockets.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "scene.h"

_Static_assert(LWS_PRE <= SRV_FRAME_HEADROOM, "srv_frame headroom must hold LWS_PRE");

#define OUTBOX_CAP 16

typedef struct srv_client srv_client;
struct srv_client {
    struct lws *wsi;
    srv_session *ss;
    uint32_t id;
    char session_id[SRV_ID_LEN + 16]; /* room for "session=" while parsing */
    char token[SRV_TOKEN_LEN + 16];
    uint64_t at;         /* the number of the last object frame sent (the state it holds) */
    int synced;          /* it holds a snapshot and every structural frame since */
    uint32_t epoch;      /* the session's epoch its frames are of (srv_session_rewind) */
    uint32_t sent_state; /* session state_version last sent */
    int got_state;
    size_t unsent; /* bytes handed to lws since the socket last drained (its WRITEABLE) */
    double tokens, last_refill_ms; /* event rate limit: token bucket */
    char *rx;
    size_t rx_len;
    int rx_too_big;
    /* The outbox: texts and reply frames for this client alone, oldest first. */
    struct {
        srv_frame *frame; /* owned reference, or NULL and text */
        char *text;
    } out[OUTBOX_CAP];
    int out_head, nout;
    int closing;      /* refused at connect: say why, then close */
    int drive_token;  /* it connected with the control token (whose event budget it spends) */
    int counted;      /* it counts against its address's connections */
    char addr[48];    /* the peer's address */
    srv_client *next; /* in its session's room */
};

/* One session's clients. Service thread only. */
typedef struct room {
    srv_session *ss; /* NULL when no client is connected */
    srv_client *clients;
} room;

typedef struct ws_ctx {
    struct lws_context *ctx;
    struct lws_vhost *vh;
    pthread_t thread;
    srv *s;
    room *rooms;               /* (max_sessions), by slot */
    pthread_mutex_t news_lock; /* guards news, nnews, queued */
    uint32_t *news, *taking;   /* (max_sessions) slots with news; the list being handled */
    uint8_t *queued;           /* (max_sessions) the slot is in news */
    int nnews;
    /* Viewers' connections by address (--max-ws-per-address); service thread only. */
    struct peer {
        char addr[48];
        int n;
    } * peers;
    int npeers, peers_cap;
    /* Each scene's parameter schema as JSON text, made at start: it never changes, and a
     * classroom joins at once. */
    struct schema_text {
        const srv_scene_i *scene;
        char *text;
    } schemas[16];
    int nschemas;
} ws_ctx;

/* How many viewers from addr are connected now. */
static int peer_viewers(const ws_ctx *w, const char *addr)
{
    for (int i = 0; i < w->npeers; i++)
        if (!strcmp(w->peers[i].addr, addr))
            return w->peers[i].n;
    return 0;
}

/* One more viewer from c's address (its entry made at the first): 0, or -1 (out of memory).
 * Only admitted viewers have an entry, so the table holds the addresses connected now, not
 * every address that ever tried. */
static int peer_join(ws_ctx *w, srv_client *c)
{
    for (int i = 0; i < w->npeers; i++)
        if (!strcmp(w->peers[i].addr, c->addr)) {
            w->peers[i].n++;
            c->counted = 1;
            return 0;
        }
    if (w->npeers == w->peers_cap) {
        int cap = w->peers_cap ? 2 * w->peers_cap : 64;
        struct peer *p = realloc(w->peers, (size_t)cap * sizeof *p);
        if (!p)
            return -1;
        w->peers = p;
        w->peers_cap = cap;
    }
    struct peer *p = &w->peers[w->npeers++];
    snprintf(p->addr, sizeof p->addr, "%s", c->addr);
    p->n = 1;
    c->counted = 1;
    return 0;
}

/* A connection from c's address leaves: its count drops, and goes at 0 (the last one moves
 * into its place), so the table holds only addresses connected now. */
static void peer_leave(ws_ctx *w, srv_client *c)
{
    if (!c->counted)
        return;
    c->counted = 0;
    for (int i = 0; i < w->npeers; i++)
        if (!strcmp(w->peers[i].addr, c->addr) && --w->peers[i].n <= 0) {
            w->peers[i] = w->peers[--w->npeers];
            return;
        }
}

/* ------------------------------------------------------------- the outbox */

static void out_push(srv_client *c, srv_frame *f, char *text)
{
    if (c->nout == OUTBOX_CAP) { /* a peer that does not read loses the oldest */
        srv_frame_unref(c->out[c->out_head].frame);
        free(c->out[c->out_head].text);
        c->out_head = (c->out_head + 1) % OUTBOX_CAP;
        c->nout--;
    }
    int k = (c->out_head + c->nout) % OUTBOX_CAP;
    c->out[k].frame = f;
    c->out[k].text = text;
    c->nout++;
    lws_callback_on_writable(c->wsi);
}

static void queue_text(srv_client *c, const char *text)
{
    char *t = strdup(text);
    if (t)
        out_push(c, NULL, t);
}

static void out_clear(srv_client *c)
{
    for (int i = 0; i < c->nout; i++) {
        int k = (c->out_head + i) % OUTBOX_CAP;
        srv_frame_unref(c->out[k].frame);
        free(c->out[k].text);
    }
    c->nout = c->out_head = 0;
}

static void queue_error(ws_ctx *w, srv_client *c, uint32_t seq, const char *error,
                        const char *detail)
{
    char text[1536];
    srv_error_json(text, sizeof text, seq, error, detail);
    queue_text(c, text);
    atomic_fetch_add(&w->s->total_errors, 1);
    if (c->ss) {
        pthread_mutex_lock(&c->ss->lock);
        c->ss->errors++;
        pthread_mutex_unlock(&c->ss->lock);
    }
}

/* ---------------------------------------------------------------- clients */

static int is_driver(srv_client *c)
{
    pthread_mutex_lock(&c->ss->lock);
    int d = c->ss->driver == c->id;
    pthread_mutex_unlock(&c->ss->lock);
    return d;
}

static room *room_of(ws_ctx *w, const srv_session *ss)
{
    return &w->rooms[ss->slot];
}

static srv_client *find_client(ws_ctx *w, srv_session *ss, uint32_t id)
{
    for (srv_client *c = room_of(w, ss)->clients; c; c = c->next)
        if (c->id == id)
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

/* Every scene's parameter schema as JSON text, made once at start. Returns -1 (out of
 * memory) or 0. */
static int make_schemas(ws_ctx *w)
{
    int nscenes;
    const srv_scene_i *const *scenes = srv_scenes(&nscenes);
    for (int k = 0; k < nscenes && w->nschemas < (int)(sizeof w->schemas / sizeof w->schemas[0]);
         k++) {
        int n;
        const sim_param_desc *t = scenes[k]->params_table(&n);
        cJSON *a = srv_params_schema(t, n);
        char *text = a ? cJSON_PrintUnformatted(a) : NULL;
        cJSON_Delete(a);
        if (!text)
            return -1;
        w->schemas[w->nschemas++] = (struct schema_text){scenes[k], text};
    }
    return w->nschemas == nscenes ? 0 : -1;
}

static const char *schema_text(const ws_ctx *w, const srv_scene_i *scene)
{
    for (int i = 0; i < w->nschemas; i++)
        if (w->schemas[i].scene == scene)
            return w->schemas[i].text;
    return "[]"; /* a scene outside srv_scenes(): none is */
}

/* The session's state for one client (its role included), composed when sent so that a
 * burst of changes costs one message. Caller frees. */
static char *state_text(const ws_ctx *w, srv_client *c)
{
    srv_session *ss = c->ss;
    cJSON *j = cJSON_CreateObject();
    char id[16];
    snprintf(id, sizeof id, "c%u", c->id);
    cJSON_AddStringToObject(j, "type", "state");
    cJSON_AddStringToObject(j, "session", ss->id);
    cJSON_AddStringToObject(j, "scene", ss->scene->name);
    cJSON_AddStringToObject(j, "client_id", id);
    ss->scene->describe(ss->scene_data, j); /* fixed at creation: no lock needed */
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
    cJSON_AddBoolToObject(j, "control_open", !ss->control_closed);
    cJSON_AddNumberToObject(j, "rate_hz", w->s->cfg.rate_hz); /* frame f is at f / rate_hz s */
    srv_replay_describe(ss, j);
    if (ss->driver == c->id) /* the driver may share the viewer link */
        cJSON_AddStringToObject(j, "view_token", ss->view_token);
    cJSON_AddRawToObject(j, "params", ss->params_json);
    if (!c->got_state) { /* the schema once per connection: it never changes */
        cJSON_AddRawToObject(j, "param_schema", schema_text(w, ss->scene));
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
    for (srv_client *k = room_of(w, ss)->clients; k; k = k->next)
        lws_callback_on_writable(k->wsi);
}

/* ------------------------------------------------- the server's own messages */

static void push_control(ws_ctx *w, srv_client *c, const proto_envelope *env, int kind)
{
    srv_item h;
    memset(&h, 0, sizeof h);
    h.client = c->id;
    h.seq = env->seq;
    h.kind = (uint8_t)kind;
    /* A recording starts and stops at the next boundary, paused or not. */
    if (kind == SRV_ITEM_RECORD_START || kind == SRV_ITEM_RECORD_STOP)
        h.flags = SRV_EV_UNPAUSED;
    if (srv_session_push(w->s, c->ss, &h, NULL) != 0)
        queue_error(w, c, env->seq, "busy", "the session's inbox is full");
}

static void on_pause(ws_ctx *w, srv_client *c, const proto_envelope *env)
{
    push_control(w, c, env, SRV_ITEM_PAUSE);
}

static void on_resume(ws_ctx *w, srv_client *c, const proto_envelope *env)
{
    push_control(w, c, env, SRV_ITEM_RESUME);
}

static void on_record_start(ws_ctx *w, srv_client *c, const proto_envelope *env)
{
    push_control(w, c, env, SRV_ITEM_RECORD_START);
}

static void on_record_stop(ws_ctx *w, srv_client *c, const proto_envelope *env)
{
    push_control(w, c, env, SRV_ITEM_RECORD_STOP);
}

/* A replay to frame N (its worker checks N against the recording). */
static void on_seek(ws_ctx *w, srv_client *c, const proto_envelope *env)
{
    char err[160];
    double f;
    if (!c->ss->replay) {
        queue_error(w, c, env->seq, "bad seek", "only a replay seeks");
        return;
    }
    if (proto_read_number(env->msg, "frame", 0, 9.0e15, &f, err, sizeof err) != PROTO_OK) {
        queue_error(w, c, env->seq, "bad message", err);
        return;
    }
    uint64_t frame = (uint64_t)f;
    srv_item h;
    memset(&h, 0, sizeof h);
    h.client = c->id;
    h.seq = env->seq;
    h.kind = SRV_ITEM_SEEK;
    h.flags = SRV_EV_UNPAUSED; /* a paused replay seeks */
    h.size = sizeof frame;
    if (srv_session_push(w->s, c->ss, &h, &frame) != 0)
        queue_error(w, c, env->seq, "busy", "the session's inbox is full");
}

static void on_ping(ws_ctx *w, srv_client *c, const proto_envelope *env)
{
    char text[160], err[160];
    double t;
    if (proto_read_number(env->msg, "t", -1e15, 1e15, &t, err, sizeof err) != PROTO_OK) {
        queue_error(w, c, env->seq, "bad message", err);
        return;
    }
    snprintf(text, sizeof text, "{\"type\":\"pong\",\"seq\":%u,\"t\":%.17g,\"server_ms\":%.3f}",
             env->seq, t, srv_now_ms());
    queue_text(c, text);
}

/* Nobody drives: the asker does, unless the driver closed control. Otherwise the driver is
 * asked and decides. */
static void on_request_control(ws_ctx *w, srv_client *c, const proto_envelope *env)
{
    pthread_mutex_lock(&c->ss->lock);
    uint32_t d = c->ss->driver;
    int closed = !d && c->ss->control_closed;
    if (!d && !closed)
        c->ss->driver = c->id;
    pthread_mutex_unlock(&c->ss->lock);
    srv_client *dc = d ? find_client(w, c->ss, d) : NULL;
    if (closed) {
        queue_error(w, c, env->seq, "control closed",
                    "the driver keeps control of this session: its control link takes it, "
                    "or a driver hands it over");
    } else if (!d) {
        send_role(c, "role");
        state_changed(w, c->ss);
    } else if (d == c->id) {
        queue_error(w, c, env->seq, "already the driver", "this client holds control");
    } else if (dc) {
        char text[96];
        snprintf(text, sizeof text, "{\"type\":\"control_request\",\"from\":\"c%u\"}", c->id);
        queue_text(dc, text);
    }
}

static void on_handover(ws_ctx *w, srv_client *c, const proto_envelope *env)
{
    char target[64], err[160];
    if (proto_read_string(env->msg, "to", target, sizeof target, err, sizeof err) != PROTO_OK) {
        queue_error(w, c, env->seq, "bad message", err);
        return;
    }
    unsigned to = 0;
    srv_client *t = sscanf(target, "c%u", &to) == 1 ? find_client(w, c->ss, to) : NULL;
    if (!t) {
        queue_error(w, c, env->seq, "unknown client", target);
        return;
    }
    pthread_mutex_lock(&c->ss->lock);
    c->ss->driver = t->id;
    pthread_mutex_unlock(&c->ss->lock);
    send_role(c, "role");
    send_role(t, "role");
    state_changed(w, c->ss);
}

/* The driver opens or closes control to viewers while nobody drives ({"open": bool}). */
static void on_set_control(ws_ctx *w, srv_client *c, const proto_envelope *env)
{
    const cJSON *o = cJSON_GetObjectItemCaseSensitive(env->msg, "open");
    if (!cJSON_IsBool(o)) {
        queue_error(w, c, env->seq, "bad message", "\"open\" must be true or false");
        return;
    }
    pthread_mutex_lock(&c->ss->lock);
    c->ss->control_closed = cJSON_IsFalse(o);
    c->ss->snapshot_soon = 1; /* kept across a restart by the next snapshot (durable.c) */
    pthread_mutex_unlock(&c->ss->lock);
    state_changed(w, c->ss);
}

static const struct {
    const char *name;
    int driver_only;
    void (*handle)(ws_ctx *w, srv_client *c, const proto_envelope *env);
} k_server_events[] = {
    {"ping", 0, on_ping},
    {"request_control", 0, on_request_control},
    {"handover", 1, on_handover},
    {"set_control", 1, on_set_control},
    {"pause", 1, on_pause},
    {"resume", 1, on_resume},
    {"record_start", 1, on_record_start},
    {"record_stop", 1, on_record_stop},
    {"seek", 1, on_seek},
};
#define NSERVER_EVENTS ((int)(sizeof k_server_events / sizeof k_server_events[0]))

/* ----------------------------------------------------------- client messages */

/* A type this scene does not take: another scene's event, or nobody's. */
static void refuse_type(ws_ctx *w, srv_client *c, const proto_envelope *env)
{
    int n;
    const srv_scene_i *const *all = srv_scenes(&n), *mine = c->ss->scene;
    char d[512];
    for (int k = 0; k < n; k++) {
        if (all[k] == mine || srv_scene_event(all[k], env->type) < 0)
            continue;
        size_t at = (size_t)snprintf(d, sizeof d, "the %s scene takes", mine->name);
        for (int i = 0; i < mine->nevents && at < sizeof d; i++)
            at += (size_t)snprintf(d + at, sizeof d - at, "%s %s", i ? "," : "",
                                   mine->events[i].name);
        for (int i = 0; i < NSERVER_EVENTS && at < sizeof d; i++)
            at += (size_t)snprintf(d + at, sizeof d - at, ", %s", k_server_events[i].name);
        queue_error(w, c, env->seq, "not in this scene", d);
        return;
    }
    snprintf(d, sizeof d, "unknown message type \"%s\"", env->type);
    queue_error(w, c, env->seq, "unknown message type", d);
}

/* One of the scene's events: its parser reads the payload once, into the inbox item. */
static void scene_event(ws_ctx *w, srv_client *c, const proto_envelope *env, int i)
{
    const srv_event_desc *d = &c->ss->scene->events[i];
    if (!(d->flags & SRV_EV_QUERY) && !is_driver(c)) { /* a viewer may look, not touch */
        queue_error(w, c, env->seq, "not the driver", "this client watches; events need control");
        return;
    }
    if (!(d->flags & SRV_EV_QUERY) && c->ss->replay) { /* its events are the recording's */
        queue_error(w, c, env->seq, "a replay",
                    "a replay takes pause, resume and seek; its events are the recording's");
        return;
    }
    _Alignas(8) unsigned char payload[SRV_EVENT_MAX];
    const char *error = "bad message";
    char err[256] = "";
    int size = d->parse(env->msg, payload, &error, err, sizeof err);
    if (size < 0) {
        queue_error(w, c, env->seq, error, err);
        return;
    }
    srv_item h;
    memset(&h, 0, sizeof h);
    h.client = c->id;
    h.seq = env->seq;
    h.size = (uint16_t)size;
    h.kind = (uint8_t)(SRV_ITEM_SCENE + i);
    h.flags = (uint8_t)d->flags;
    /* A viewer's query waits apart, latest wins (srv_session_query): viewers never fill the
     * driver's inbox. The driver's go through the inbox, in order with its events. */
    int viewer_query = (d->flags & SRV_EV_QUERY) && !is_driver(c) && size <= SRV_QUERY_BYTES;
    if (viewer_query ? srv_session_query(w->s, c->ss, &h, payload) != 0
                     : srv_session_push(w->s, c->ss, &h, payload) != 0)
        queue_error(w, c, env->seq, "busy",
                    viewer_query ? "too many viewers' queries wait: ask again"
                                 : "the session's inbox is full");
}

/* Token bucket: rate a second, bursts up to the same number. 1 when one was taken. */
static int bucket_take(double *tokens, double *last_ms, double rate, double now)
{
    *tokens += (now - *last_ms) * rate / 1000.0;
    if (*tokens > rate)
        *tokens = rate;
    *last_ms = now;
    if (*tokens < 1.0)
        return 0;
    *tokens -= 1.0;
    return 1;
}

/* The connection's own budget (max_events_per_s), then its token's, shared by every
 * connection with that token (the control token's max_events_per_s, the view token's
 * max_view_events_per_s): many connections are no way round the limit. NULL when one was
 * taken, else whose budget is spent. */
static const char *take_token(ws_ctx *w, srv_client *c)
{
    double now = srv_now_ms();
    srv_session *ss = c->ss;
    if (!bucket_take(&c->tokens, &c->last_refill_ms, w->s->cfg.max_events_per_s, now))
        return "more events a second than the server allows a connection";
    if (c->drive_token
            ? !bucket_take(&ss->drive_tokens, &ss->drive_refill_ms, w->s->cfg.max_events_per_s, now)
            : !bucket_take(&ss->view_tokens, &ss->view_refill_ms, w->s->cfg.max_view_events_per_s,
                           now))
        return c->drive_token ? "the control token's connections together send more events a "
                                "second than the server allows"
                              : "the view token's connections together send more events a "
                                "second than the server allows";
    return NULL;
}

static void handle_text(ws_ctx *w, srv_client *c, const char *msg, size_t len)
{
    proto_envelope env;
    char err[256];
    if (proto_envelope_parse(&env, msg, len, err, sizeof err) != PROTO_OK) {
        queue_error(w, c, env.seq, "bad message", err);
        return;
    }
    int k = 0;
    while (k < NSERVER_EVENTS && strcmp(env.type, k_server_events[k].name))
        k++;
    int i = k < NSERVER_EVENTS ? -1 : srv_scene_event(c->ss->scene, env.type);
    const char *spent = take_token(w, c);
    if (spent)
        queue_error(w, c, env.seq, "rate limited", spent);
    else if (k < NSERVER_EVENTS && k_server_events[k].driver_only && !is_driver(c))
        queue_error(w, c, env.seq, "not the driver", "this client watches; events need control");
    else if (k < NSERVER_EVENTS)
        k_server_events[k].handle(w, c, &env);
    else if (i >= 0)
        scene_event(w, c, &env, i);
    else
        refuse_type(w, c, &env);
    proto_envelope_free(&env);
}

/* ------------------------------------------------------------- writing */

/* The outbox's oldest item, one lws_write. Returns -1 to close. */
static int write_out(ws_ctx *w, srv_client *c)
{
    srv_frame *f = c->out[c->out_head].frame;
    char *t = c->out[c->out_head].text;
    c->out_head = (c->out_head + 1) % OUTBOX_CAP;
    c->nout--;
    size_t n = f ? f->len : strlen(t);
    unsigned char *buf = f ? f->data + SRV_FRAME_HEADROOM : malloc(LWS_PRE + n);
    int r = -1;
    if (buf && !f)
        memcpy(buf + LWS_PRE, t, n);
    if (buf)
        r = lws_write(c->wsi, f ? buf : buf + LWS_PRE, n, f ? LWS_WRITE_BINARY : LWS_WRITE_TEXT);
    note_unsent(c, n);
    if (f && c->ss) { /* a reply frame (a slice) counts as sent like the others */
        pthread_mutex_lock(&c->ss->lock);
        c->ss->frames_sent++;
        c->ss->bytes_sent += n;
        pthread_mutex_unlock(&c->ss->lock);
        atomic_fetch_add(&w->s->total_frames_sent, 1);
        atomic_fetch_add(&w->s->total_bytes_sent, n);
    }
    if (!f)
        free(buf);
    srv_frame_unref(f);
    free(t);
    if (r < (int)n)
        return -1;
    lws_callback_on_writable(c->wsi); /* frames or more replies may be waiting */
    return 0;
}

/* The object frame the client needs next, not referenced (NULL: none now); the session
 * lock held. One that must start again waits for a snapshot at least as new as the
 * newest structural frame (the worker makes one within a frame when asked). */
static srv_frame *due_frame(srv_client *c, srv_session *ss)
{
    if (c->epoch != ss->epoch) { /* frames start again lower: from a snapshot, as a joiner */
        c->epoch = ss->epoch;
        c->synced = 0;
        c->at = 0;
    }
    if (!c->synced || c->at < ss->chain_lost) {
        uint64_t newest =
            ss->nchain ? ss->chain[(ss->chain_head + ss->nchain - 1) % SRV_CHAIN]->frame : 0;
        srv_frame *snap = ss->snapshot;
        if (snap && snap->frame >= newest && snap->frame >= ss->chain_lost &&
            (!c->synced || snap->frame > c->at))
            return snap;
        ss->want_snapshot = 1;
        return NULL;
    }
    for (int i = 0; i < ss->nchain; i++) { /* oldest first: the first it has not had */
        srv_frame *f = ss->chain[(ss->chain_head + i) % SRV_CHAIN];
        if (f->frame > c->at)
            return f;
    }
    return ss->latest && ss->latest->frame > c->at ? ss->latest : NULL;
}

/* One lws_write of whatever is most urgent. Returns -1 to close. */
static int write_next(ws_ctx *w, srv_client *c)
{
    if (c->nout)
        return write_out(w, c);
    srv_session *ss = c->ss;
    srv_frame *f = NULL;
    pthread_mutex_lock(&ss->lock);
    int closing = ss->closing;
    int state_due = !closing && (!c->got_state || c->sent_state != ss->state_version);
    if (!closing && !state_due && (f = due_frame(c, ss)))
        srv_frame_ref(f);
    pthread_mutex_unlock(&ss->lock);
    if (closing) {
        lws_close_reason(c->wsi, LWS_CLOSE_STATUS_GOINGAWAY, (unsigned char *)"session closed", 14);
        return -1;
    }
    if (state_due) {
        char *text = state_text(w, c);
        if (text)
            out_push(c, NULL, text);
        return 0;
    }
    if (!f)
        return 0;
    size_t flen = f->len;
    int r = lws_write(c->wsi, f->data + SRV_FRAME_HEADROOM, flen, LWS_WRITE_BINARY);
    note_unsent(c, flen);
    c->at = f->frame;
    c->synced |= (f->flags & PROTO_FLAG_SNAPSHOT) != 0;
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
    int news =
        ss->closing || due_frame(c, ss) || !c->got_state || c->sent_state != ss->state_version;
    pthread_mutex_unlock(&ss->lock);
    return news;
}

/* ------------------------------------------------------------- wake-ups */

/* The session of room r has news: its mail goes to its clients' outboxes, and each of its
 * clients with something to send asks to write. Nobody else is looked at. */
static void visit_room(ws_ctx *w, room *r)
{
    srv_session *ss = r->ss;
    if (!ss)
        return;
    int stop = atomic_load(&w->s->stop);
    pthread_mutex_lock(&ss->lock);
    int closing = ss->closing, nmail = ss->nmail;
    uint32_t to[SRV_MAILBOX];
    srv_frame *frames[SRV_MAILBOX];
    char *texts[SRV_MAILBOX];
    for (int i = 0; i < nmail; i++)
        to[i] = ss->mail[i].client, frames[i] = ss->mail[i].frame, texts[i] = ss->mail[i].text;
    ss->nmail = 0;
    pthread_mutex_unlock(&ss->lock);
    for (int i = 0; i < nmail; i++) { /* replies to clients that have gone since are dropped */
        srv_client *c = find_client(w, ss, to[i]);
        if (c) {
            out_push(c, frames[i], texts[i]);
        } else {
            srv_frame_unref(frames[i]);
            free(texts[i]);
        }
    }
    uint64_t visits = 0;
    for (srv_client *c = r->clients; c; c = c->next, visits++) {
        if (stop || has_news(c))
            lws_callback_on_writable(c->wsi);
        /* A deleted session must not be held by a client that stopped reading (its
         * WRITEABLE, where the close is sent, never comes): give it 2 s. */
        if (closing)
            lws_set_timeout(c->wsi, PENDING_TIMEOUT_CLOSE_SEND, 2);
    }
    pthread_mutex_lock(&ss->lock);
    ss->client_visits += visits;
    pthread_mutex_unlock(&ss->lock);
}

static void on_wake(ws_ctx *w)
{
    pthread_mutex_lock(&w->news_lock);
    uint32_t *slots = w->news;
    int n = w->nnews;
    w->news = w->taking;
    w->taking = slots;
    w->nnews = 0;
    for (int i = 0; i < n; i++)
        w->queued[slots[i]] = 0;
    pthread_mutex_unlock(&w->news_lock);
    if (atomic_load(&w->s->stop)) { /* shutdown: every client gets its close */
        for (int i = 0; i < w->s->cfg.max_sessions; i++)
            visit_room(w, &w->rooms[i]);
        return;
    }
    for (int i = 0; i < n; i++)
        visit_room(w, &w->rooms[slots[i]]);
}

void srv_ws_news(srv *s, uint32_t slot)
{
    ws_ctx *w = s->ws;
    if (!w || slot >= (uint32_t)s->cfg.max_sessions)
        return;
    pthread_mutex_lock(&w->news_lock);
    int wake = 0;
    if (!w->queued[slot]) {
        w->queued[slot] = 1;
        w->news[w->nnews++] = slot;
        wake = w->nnews == 1; /* otherwise a wake-up is on its way already */
    }
    pthread_mutex_unlock(&w->news_lock);
    if (wake)
        lws_cancel_service(w->ctx);
}

/* ------------------------------------------------------ connection events */

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

/* Credentials against the session; NULL when accepted (c joins), else why not. */
_Static_assert(SRV_DRIVER_CONNS == 8, "admit's refusal says 8 connections");
static const char *admit(ws_ctx *w, srv_client *c, srv_session *ss, uint32_t *displaced)
{
    srv *s = w->s;
    const char *why = NULL;
    pthread_mutex_lock(&ss->lock);
    int driver = srv_token_equal(c->token, ss->control_token);
    int viewer = srv_token_equal(c->token, ss->view_token);
    if (!driver && !viewer)
        why = "wrong or missing token";
    else if (ss->load_state != SRV_READY) /* GET /api/sessions/ID says when it is ready */
        why = ss->load_state == SRV_LOADING ? "the session is still loading"
                                            : "the session's volume could not be loaded";
    /* The last SRV_DRIVER_RESERVE places are the control token's: viewers, however many
     * connect, never lock the driver out. */
    else if (ss->nclients >= s->cfg.max_clients_per_session ||
             (!driver && ss->nclients >= s->cfg.max_clients_per_session - SRV_DRIVER_RESERVE))
        why = driver ? "the session holds its limit of clients"
                     : "the session holds its limit of viewers";
    else if (driver && ss->ndrive_conns >= SRV_DRIVER_CONNS) /* (the text says 8) */
        why = "the control token holds 8 connections to this session already: close one";
    if (!why) {
        c->id = atomic_fetch_add(&s->next_client, 1) + 1;
        c->drive_token = driver;
        ss->nclients++;
        ss->ndrive_conns += driver;
        if (driver) { /* the newest holder of the control token drives */
            *displaced = ss->driver;
            ss->driver = c->id;
        }
    }
    pthread_mutex_unlock(&ss->lock);
    return why;
}

/* The peer's address, or behind a trusted router the one it forwarded (forwarded.c): what
 * --max-ws-per-address counts. Read while the handshake's headers are there. */
static void client_addr(srv *s, struct lws *wsi, char *out, size_t out_sz)
{
    char peer[48] = "", fwd[256] = "";
    lws_get_peer_simple(wsi, peer, sizeof peer);
    if (lws_hdr_copy(wsi, fwd, sizeof fwd, WSI_TOKEN_X_FORWARDED_FOR) < 0)
        fwd[0] = 0;
    srv_client_address(&s->cfg, peer, fwd, out, out_sz);
}

static void on_established(ws_ctx *w, srv_client *c, struct lws *wsi)
{
    srv *s = w->s;
    c->wsi = wsi;
    srv_session *ss = c->session_id[0] ? srv_session_get(s, c->session_id) : NULL;
    const char *why = !c->session_id[0] ? "the URL needs ?session=ID&token=TOKEN"
                      : !ss             ? "unknown session"
                                        : NULL;
    /* Viewers from one address, however many sessions they watch, share a cap; the control
     * token is never refused for it (a school's NAT may hold both a flood and the driver). */
    int viewer = ss && !srv_token_equal(c->token, ss->control_token);
    if (!why && viewer && peer_viewers(w, c->addr) >= s->cfg.max_ws_per_address)
        why = "too many connections from this address (--max-ws-per-address)";
    else if (!why && viewer && peer_join(w, c) != 0)
        why = "the server is out of memory";
    uint32_t displaced = 0; /* the driver the control token took over from (told so) */
    if (!why && (why = admit(w, c, ss, &displaced)) != NULL)
        peer_leave(w, c); /* counted for a moment: refused after all */
    memset(c->token, 0, sizeof c->token);
    if (why) {
        srv_session_put(s, ss);
        c->closing = 1;
        char text[256];
        srv_error_json(text, sizeof text, 0, "refused", why);
        queue_text(c, text);
        atomic_fetch_add(&s->total_errors, 1);
        return;
    }
    c->ss = ss;
    c->tokens = s->cfg.max_events_per_s;
    c->last_refill_ms = srv_now_ms();
    room *r = room_of(w, ss);
    r->ss = ss;
    c->next = r->clients;
    r->clients = c;
    atomic_fetch_add(&s->nclients, 1);
    atomic_fetch_add(&s->total_clients, 1);
    send_role(c, "welcome");
    srv_client *was = displaced ? find_client(w, ss, displaced) : NULL;
    if (was)
        send_role(was, "role"); /* a viewer now, as its next state says too */
    state_changed(w, ss);
}

static int on_receive(ws_ctx *w, srv_client *c, struct lws *wsi, const void *in, size_t len)
{
    srv *s = w->s;
    if (c->closing)
        return 0;
    if (!c->ss)
        return -1;
    if (lws_frame_is_binary(wsi)) {
        if (lws_is_final_fragment(wsi))
            queue_error(w, c, 0, "bad message", "binary messages are not accepted");
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
        queue_error(w, c, 0, "message too large", d);
    } else {
        handle_text(w, c, c->rx, c->rx_len);
    }
    free(c->rx);
    c->rx = NULL;
    c->rx_len = 0;
    c->rx_too_big = 0;
    return 0;
}

static int on_writeable(ws_ctx *w, srv_client *c, struct lws *wsi)
{
    if (c->closing) { /* refused: say why, then close */
        if (c->nout)
            return write_next(w, c) < 0 ? -1 : (lws_callback_on_writable(wsi), 0);
        lws_close_reason(wsi, LWS_CLOSE_STATUS_POLICY_VIOLATION, (unsigned char *)"refused", 7);
        return -1;
    }
    if (!c->ss)
        return -1;
    if (atomic_load(&w->s->stop)) {
        lws_close_reason(wsi, LWS_CLOSE_STATUS_GOINGAWAY, (unsigned char *)"shutdown", 8);
        return -1;
    }
    c->unsent = 0; /* lws holds nothing for it now */
    return write_next(w, c);
}

static void on_closed(ws_ctx *w, srv_client *c)
{
    srv_session *ss = c->ss;
    if (ss) {
        room *r = room_of(w, ss);
        for (srv_client **p = &r->clients; *p; p = &(*p)->next)
            if (*p == c) {
                *p = c->next;
                break;
            }
        if (!r->clients)
            r->ss = NULL;
        atomic_fetch_sub(&w->s->nclients, 1);
        pthread_mutex_lock(&ss->lock);
        ss->nclients--;
        ss->ndrive_conns -= c->drive_token;
        if (ss->nclients == 0)
            ss->idle_since_ms = srv_now_ms(); /* --idle-expiry counts from here */
        if (ss->driver == c->id)
            ss->driver = 0;
        pthread_mutex_unlock(&ss->lock);
        state_changed(w, ss); /* the others hear that one left */
        srv_session_put(w->s, ss);
        c->ss = NULL;
    }
    peer_leave(w, c);
    free(c->rx);
    c->rx = NULL;
    out_clear(c);
}

static int callback(struct lws *wsi, enum lws_callback_reasons reason, void *user, void *in,
                    size_t len)
{
    struct lws_context *ctx = lws_get_context(wsi);
    ws_ctx *w = ctx ? lws_context_user(ctx) : NULL;
    srv_client *c = user;
    if (!w)
        return 0;
    switch (reason) {
    case LWS_CALLBACK_FILTER_PROTOCOL_CONNECTION:
        /* Accept the handshake and judge the credentials once established, so a refused
         * client learns why (an error message, then close 1008) instead of a bare hang-up. */
        memset(c, 0, sizeof *c);
        url_arg(wsi, "session=", c->session_id, sizeof c->session_id);
        url_arg(wsi, "token=", c->token, sizeof c->token);
        client_addr(w->s, wsi, c->addr, sizeof c->addr);
        return 0;
    case LWS_CALLBACK_ESTABLISHED:
        on_established(w, c, wsi);
        return 0;
    case LWS_CALLBACK_RECEIVE:
        return on_receive(w, c, wsi, in, len);
    case LWS_CALLBACK_SERVER_WRITEABLE:
        return on_writeable(w, c, wsi);
    case LWS_CALLBACK_CLOSED:
        on_closed(w, c);
        return 0;
    case LWS_CALLBACK_EVENT_WAIT_CANCELLED:
        on_wake(w);
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
    for (int i = 0; i < 50 && atomic_load(&w->s->nclients) > 0; i++) {
        lws_cancel_service(w->ctx);
        lws_service(w->ctx, 0);
    }
    return NULL;
}

static void ws_free(ws_ctx *w)
{
    for (int i = 0; i < w->nschemas; i++)
        free(w->schemas[i].text);
    free(w->peers);
    free(w->rooms);
    free(w->news);
    free(w->taking);
    free(w->queued);
    pthread_mutex_destroy(&w->news_lock);
    free(w);
}

int srv_ws_start(srv *s, char *err, size_t err_sz)
{
    ws_ctx *w = calloc(1, sizeof *w);
    size_t n = (size_t)s->cfg.max_sessions;
    if (!w)
        return -1;
    pthread_mutex_init(&w->news_lock, NULL);
    w->s = s;
    w->rooms = calloc(n, sizeof *w->rooms);
    w->news = calloc(n, sizeof *w->news);
    w->taking = calloc(n, sizeof *w->taking);
    w->queued = calloc(n, 1);
    lws_set_log_level(
        getenv("SOFTCAST_LWS_DEBUG") ? LLL_ERR | LLL_WARN | LLL_NOTICE | LLL_INFO : LLL_ERR, NULL);
    struct lws_context_creation_info info;
    memset(&info, 0, sizeof info);
    info.port = s->cfg.ws_port;
    info.iface = s->cfg.bind;
    info.protocols = k_protocols;
    info.user = w;
    info.options = LWS_SERVER_OPTION_DISABLE_IPV6;
    if (!(w->rooms && w->news && w->taking && w->queued && make_schemas(w) == 0)) {
        snprintf(err, err_sz, "WebSocket: out of memory");
        ws_free(w);
        return -1;
    }
    w->ctx = lws_create_context(&info);
    if (!w->ctx) {
        snprintf(err, err_sz,
                 "WebSocket: cannot listen on %s:%d (libwebsockets says why above: error 98 is "
                 "a port another program has; --ws-port 0 picks a free one)",
                 s->cfg.bind, s->cfg.ws_port);
        ws_free(w);
        return -1;
    }
    w->vh = lws_get_vhost_by_name(w->ctx, "default");
    s->ws_port = w->vh ? lws_get_vhost_listen_port(w->vh) : s->cfg.ws_port;
    s->ws = w;
    if (pthread_create(&w->thread, NULL, ws_main, w) != 0) {
        lws_context_destroy(w->ctx);
        ws_free(w);
        s->ws = NULL;
        snprintf(err, err_sz, "WebSocket: cannot start its thread");
        return -1;
    }
    return 0;
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
    s->ws = NULL;
    ws_free(w);
}
