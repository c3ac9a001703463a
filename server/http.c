/* http.c: the HTTP side (libmicrohttpd 0.9.75, its own polling thread and a small pool).
 *
 * REST API for sessions, health, Prometheus metrics, and the web client's files. Runs on
 * MHD threads; never blocks on the simulation: it only creates or looks up sessions and
 * reads counters under their locks. Bodies arrive over several calls and end with a call
 * of size 0; they are limited to 64 KiB. Errors are {"error":"...","detail":"..."}. */
#define _GNU_SOURCE /* realpath */
#include <arpa/inet.h>
#include <cjson/cJSON.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <unistd.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include "scene.h"

#define BODY_MAX (64 * 1024)

/* A session being built on a builder (builder.c). Answered when built, its connection
 * suspended meanwhile (no HTTP thread waits); or at once as 202 "loading" when the client
 * asked for that (Prefer: respond-async), the builder then owning the job. */
typedef struct create_job {
    srv *s;
    srv_session *ss; /* the builder's reference; then the request's (sync) */
    const srv_scene_i *kind;
    cJSON *opts;                 /* the POST body, the builder's */
    struct MHD_Connection *conn; /* to resume; NULL when answered already */
    atomic_int done;
    int status;
    char err[512];
} create_job;

typedef struct request {
    char *body;
    size_t len;
    int too_big;
    int no_key;  /* a recording without the operator's key: its 401 is queued */
    int no_room; /* a recording with no place to arrive: its 429 or 503 is queued */
    /* POST /api/volumes: the file goes to upload.c, not into body. */
    int is_upload;
    srv_upload *up;
    int is_recording;  /* POST /api/recordings: a body up to --upload-limit */
    int arrival;       /* a recording's place among the bodies arriving (-1: none) */
    double began_ms;   /* when its headers were in */
    unsigned refused;  /* the status it was refused with (the rest of the body ignored) */
    char refusal[512]; /* and why, when it could not be answered at once */
    create_job *job;   /* POST /api/sessions waiting for its build (suspended) */
} request;

static enum MHD_Result send_body(struct MHD_Connection *conn, unsigned status, const char *type,
                                 const char *body, size_t len)
{
    struct MHD_Response *r =
        MHD_create_response_from_buffer(len, (void *)(uintptr_t)body, MHD_RESPMEM_MUST_COPY);
    if (!r)
        return MHD_NO;
    MHD_add_response_header(r, "Content-Type", type);
    MHD_add_response_header(r, "Cache-Control", "no-store");
    enum MHD_Result ret = MHD_queue_response(conn, status, r);
    MHD_destroy_response(r);
    return ret;
}

static enum MHD_Result send_json(struct MHD_Connection *conn, unsigned status, cJSON *j)
{
    char *text = cJSON_PrintUnformatted(j);
    cJSON_Delete(j);
    if (!text)
        return MHD_NO;
    enum MHD_Result r = send_body(conn, status, "application/json", text, strlen(text));
    cJSON_free(text);
    return r;
}

static enum MHD_Result send_error(struct MHD_Connection *conn, unsigned status, const char *error,
                                  const char *detail)
{
    char text[1536]; /* detail may quote the request (a URL): the helper keeps it valid */
    size_t n = srv_error_json(text, sizeof text, -1, error, detail ? detail : "");
    return send_body(conn, status, "application/json", text, n);
}

/* Where a session's loading is: "state" ready, loading (with its "stage") or failed (with
 * its "error"); the scene's facts once ready. */
static void load_json(srv_session *ss, cJSON *j)
{
    pthread_mutex_lock(&ss->lock);
    int st = ss->load_state;
    static const char *const names[] = {"ready", "loading", "failed"};
    cJSON_AddStringToObject(j, "state", names[st]);
    if (st == SRV_LOADING)
        cJSON_AddStringToObject(j, "stage", ss->load_stage);
    if (st == SRV_FAILED)
        cJSON_AddStringToObject(j, "error", ss->load_error ? ss->load_error : "");
    pthread_mutex_unlock(&ss->lock);
    if (st == SRV_READY) /* scene_data is set for good once ready */
        ss->scene->describe(ss->scene_data, j);
}

/* A session as the API tells it: with its tokens and links to its maker (with_tokens); to
 * anyone else without the name a user gave its dataset, nor why that failed to load, unless
 * reveal (the asker holds one of its tokens, or the operator's key). */
static cJSON *session_json(srv *s, srv_session *ss, int with_tokens, int reveal)
{
    cJSON *j = cJSON_CreateObject();
    char buf[512];
    cJSON_AddStringToObject(j, "id", ss->id);
    cJSON_AddStringToObject(j, "scene", ss->scene->name);
    load_json(ss, j);
    pthread_mutex_lock(&ss->lock);
    cJSON_AddNumberToObject(j, "clients", ss->nclients);
    cJSON_AddNumberToObject(j, "frames", (double)ss->frames);
    cJSON_AddBoolToObject(j, "paused", ss->paused);
    /* At rest: frames stop until an event comes, and latest_frame is the last one sent
     * (tests wait on this, not on a quiet spell that a busy machine can fake). */
    cJSON_AddBoolToObject(j, "at_rest", ss->at_rest);
    cJSON_AddNumberToObject(j, "latest_frame", ss->latest ? (double)ss->latest->frame : -1.0);
    srv_replay_describe(ss, j);
    cJSON_AddBoolToObject(j, "has_recording", ss->recording_path[0] != 0);
    pthread_mutex_unlock(&ss->lock);
    char http[300], ws[300];
    srv_link_bases(s, http, sizeof http, ws, sizeof ws);
    snprintf(buf, sizeof buf, "%s/?session=%s", ws, ss->id);
    cJSON_AddStringToObject(j, "ws_url", buf);
    if (ss->user_named && !with_tokens && !reveal) { /* a file name may name the patient */
        cJSON *d = cJSON_GetObjectItemCaseSensitive(j, "dataset");
        if (cJSON_GetObjectItemCaseSensitive(d, "name"))
            cJSON_ReplaceItemInObjectCaseSensitive(d, "name", cJSON_CreateString("an upload"));
        if (cJSON_GetObjectItemCaseSensitive(j, "error"))
            cJSON_ReplaceItemInObjectCaseSensitive(
                j, "error",
                cJSON_CreateString("the upload could not be read: its session's token tells why"));
    }
    if (with_tokens) {
        cJSON_AddStringToObject(j, "control_token", ss->control_token);
        cJSON_AddStringToObject(j, "view_token", ss->view_token);
        snprintf(buf, sizeof buf, "%s/?session=%s&token=%s", http, ss->id, ss->view_token);
        cJSON_AddStringToObject(j, "join_url", buf);
        snprintf(buf, sizeof buf, "%s/?session=%s&token=%s", http, ss->id, ss->control_token);
        cJSON_AddStringToObject(j, "control_url", buf);
    }
    return j;
}

/* The name of an error status, for the JSON error. */
static const char *status_error(int status)
{
    switch (status) {
    case 400:
        return "bad volume";
    case 401:
        return "operator key required";
    case 404:
        return "not found";
    case 413:
        return "upload too large";
    case 415:
        return "unsupported media type";
    case 429:
        return "too many sessions";
    case 503:
        return "no room";
    case 507:
        return "insufficient storage";
    default:
        return "cannot create session";
    }
}

/* The client's address as text ("unknown" when MHD cannot say): what per-address quotas
 * count; behind a trusted router, the address it forwarded (forwarded.c). */
static void client_address(srv *s, struct MHD_Connection *conn, char *out, size_t out_sz)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    char peer[INET6_ADDRSTRLEN] = "";
    const struct sockaddr *sa = ci ? ci->client_addr : NULL;
    if (sa && sa->sa_family == AF_INET)
        inet_ntop(AF_INET, &((const struct sockaddr_in *)(const void *)sa)->sin_addr, peer,
                  sizeof peer);
    else if (sa && sa->sa_family == AF_INET6)
        inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr, peer,
                  sizeof peer);
    if (!peer[0])
        snprintf(peer, sizeof peer, "unknown");
    srv_client_address(&s->cfg, peer,
                       MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "X-Forwarded-For"), out,
                       out_sz);
}

static int operator_ok(srv *s, struct MHD_Connection *conn)
{
    if (!s->cfg.api_key[0])
        return 1;
    const char *auth = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Authorization");
    return auth && !strncmp(auth, "Bearer ", 7) && srv_token_equal(auth + 7, s->cfg.api_key);
}

/* Whether the request carries the operator's key (never so on a server without one). */
static int holds_operator_key(srv *s, struct MHD_Connection *conn)
{
    return s->cfg.api_key[0] && operator_ok(s, conn);
}

/* The bearer token of a request (or its ?token=); NULL: none. */
static const char *bearer(struct MHD_Connection *conn)
{
    const char *auth = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Authorization");
    return auth && !strncmp(auth, "Bearer ", 7)
               ? auth + 7
               : MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, "token");
}

static enum MHD_Result refuse_operator(struct MHD_Connection *conn)
{
    return send_error(conn, 401, "operator key required",
                      "this server makes sessions for its operator's key only: send "
                      "Authorization: Bearer KEY (--api-key-file)");
}

/* A JSON body's content type: application/json, with parameters or none. A page on another
 * site cannot send that without the browser asking first (CORS), so it cannot make
 * sessions with its visitors' browsers. */
static int is_json_type(struct MHD_Connection *conn)
{
    const char *t =
        MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_TYPE);
    size_t n = t ? strcspn(t, "; \t") : 0;
    return t && n == 16 && !strncasecmp(t, "application/json", 16);
}

/* The body as one JSON object, nothing but white space after it; NULL with why. */
static cJSON *parse_body(const request *rq, char *why, size_t why_sz)
{
    if (!rq->len) {
        snprintf(why, why_sz, "the body must be a JSON object ({} for the defaults)");
        return NULL;
    }
    const char *end = NULL;
    cJSON *body = cJSON_ParseWithLengthOpts(rq->body, rq->len, &end, 0);
    size_t at = end ? (size_t)(end - rq->body) : 0;
    while (body && at < rq->len && strchr(" \t\r\n", rq->body[at]))
        at++;
    if (!body)
        snprintf(why, why_sz, "the body must be a JSON object: malformed near byte %zu", at);
    else if (!cJSON_IsObject(body))
        snprintf(why, why_sz, "the body must be a JSON object");
    else if (at < rq->len)
        snprintf(why, why_sz, "the body must be one JSON object: bytes follow it at byte %zu", at);
    else
        return body;
    cJSON_Delete(body);
    return NULL;
}

/* POST /api/sessions {"scene":"volume","volume":NAME}: a session on a --volume-dir volume;
 * 202 with the session loading. */
static enum MHD_Result volume_session(srv *s, struct MHD_Connection *conn, const cJSON *body,
                                      const srv_scene_i *kind, const cJSON *vol)
{
    for (const cJSON *e = body->child; e; e = e->next)
        if (strcmp(e->string, "scene") && strcmp(e->string, "volume"))
            return send_error(conn, 400, "bad request",
                              "a session on a kept volume takes \"scene\" and \"volume\" only");
    if (!kind->create_file || !cJSON_IsString(vol))
        return send_error(conn, 400, "bad request",
                          kind->create_file ? "\"volume\" must be a name from GET /api/volumes"
                                            : "this scene does not take a volume");
    char err[512] = "", owner[48];
    int status;
    client_address(s, conn, owner, sizeof owner);
    srv_session *ss = srv_volume_session(s, vol->valuestring, owner, &status, err, sizeof err);
    if (!ss)
        return send_error(conn, (unsigned)status, status_error(status), err);
    return send_json(conn, 202, session_json(s, ss, 1, 1));
}

static const char *create_error(int status)
{
    return status == 429   ? "too many sessions"
           : status == 413 ? "scene too large"
           : status == 400 ? "bad request"
           : status == 503 ? "no room"
                           : "cannot create session";
}

/* Builder thread: the scene from the POST options; the session turns ready or failed.
 * A request that waits is resumed with the result (a failed session is then discarded:
 * its creator hears why, with its status); one answered already finds it in the session. */
static void build_job(void *arg)
{
    create_job *j = arg;
    srv *s = j->s;
    void *data = NULL;
    j->status = j->kind->create(s->backend, j->opts, &data, j->err, sizeof j->err);
    /* How to build it again after a restart (durable.c): the options it was made with. */
    j->ss->origin = srv_origin_options(j->kind, j->status == 201 ? data : NULL, j->opts);
    cJSON_Delete(j->opts);
    j->opts = NULL;
    if (j->status != 201 && data) {
        j->kind->destroy(data);
        data = NULL;
    }
    if (j->conn)
        srv_session_hold(s, j->ss); /* the request's, once the builder lets go of its own */
    int loaded = srv_session_loaded(s, j->ss, data, j->err);
    if (!j->conn) {
        free(j);
        return;
    }
    if (loaded != 201) {
        if (j->status == 201) { /* built, then refused: the budget's words */
            j->status = loaded;
            pthread_mutex_lock(&j->ss->lock);
            snprintf(j->err, sizeof j->err, "%s", j->ss->load_error ? j->ss->load_error : "");
            pthread_mutex_unlock(&j->ss->lock);
        }
        srv_session_discard(s, j->ss);
    }
    struct MHD_Connection *conn = j->conn;
    atomic_store(&j->done, 1);
    MHD_resume_connection(conn);
}

/* The session in the table now (loading), its scene built by a builder: 202 at once when
 * the client prefers that, else the request waits, suspended, for the build. */
static enum MHD_Result start_build(srv *s, struct MHD_Connection *conn, request *rq,
                                   const srv_scene_i *kind, cJSON *body, const char *owner)
{
    char err[512] = "";
    int status;
    srv_session *ss = srv_session_create_loading(s, kind, owner, err, sizeof err, &status);
    create_job *j = ss ? calloc(1, sizeof *j) : NULL;
    if (!j) {
        cJSON_Delete(body);
        if (ss)
            srv_session_loaded(s, ss, NULL, "out of memory");
        return send_error(conn, ss ? 500u : (unsigned)status, create_error(ss ? 500 : status),
                          ss ? "out of memory" : err);
    }
    *j = (create_job){.s = s, .ss = ss, .kind = kind, .opts = body};
    const char *prefer = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Prefer");
    if (prefer && strstr(prefer, "respond-async")) {
        cJSON *answer = session_json(s, ss, 1, 1); /* before the builder may free ss */
        if (srv_build_submit(s, build_job, j) != 0) {
            cJSON_Delete(answer);
            cJSON_Delete(body);
            srv_session_loaded(s, ss, NULL, "the server is stopping");
            free(j);
            return send_error(conn, 503, "busy", "the server is stopping");
        }
        return send_json(conn, 202, answer);
    }
    j->conn = conn;
    rq->job = j;
    MHD_suspend_connection(conn);
    if (srv_build_submit(s, build_job, j) != 0) { /* stopping: answered at once */
        cJSON_Delete(body);
        j->opts = NULL;
        srv_session_hold(s, ss);
        srv_session_loaded(s, ss, NULL, "the server is stopping");
        srv_session_discard(s, ss);
        j->status = 503;
        snprintf(j->err, sizeof j->err, "the server is stopping");
        atomic_store(&j->done, 1);
        MHD_resume_connection(conn);
    }
    return MHD_YES;
}

/* The request of a build, resumed: its answer. */
static enum MHD_Result finish_build(srv *s, struct MHD_Connection *conn, request *rq)
{
    create_job *j = rq->job;
    if (!atomic_load(&j->done))
        return MHD_YES; /* not resumed by its builder yet */
    rq->job = NULL;
    enum MHD_Result r =
        j->status == 201 ? send_json(conn, 201, session_json(s, j->ss, 1, 1))
                         : send_error(conn, (unsigned)j->status, create_error(j->status), j->err);
    srv_session_put(s, j->ss);
    free(j);
    return r;
}

static enum MHD_Result create_session(srv *s, struct MHD_Connection *conn, request *rq)
{
    char err[512] = "", owner[48];
    if (!operator_ok(s, conn))
        return refuse_operator(conn);
    if (!is_json_type(conn))
        return send_error(conn, 415, "unsupported media type",
                          "send the options as Content-Type: application/json");
    cJSON *body = parse_body(rq, err, sizeof err);
    if (!body)
        return send_error(conn, 400, "bad request", err);
    const cJSON *scene = cJSON_GetObjectItemCaseSensitive(body, "scene");
    const srv_scene_i *kind = scene ? NULL : srv_scene_default();
    if (cJSON_IsString(scene))
        kind = srv_scene_find(scene->valuestring);
    if (!kind) {
        cJSON_Delete(body);
        char d[256];
        snprintf(d, sizeof d, "scenes: %s", srv_scene_names());
        return send_error(conn, 400, "unknown scene", d);
    }
    const cJSON *vol = cJSON_GetObjectItemCaseSensitive(body, "volume");
    if (vol) { /* one the operator keeps: loaded off this thread, like an upload */
        enum MHD_Result r = volume_session(s, conn, body, kind, vol);
        cJSON_Delete(body);
        return r;
    }
    client_address(s, conn, owner, sizeof owner);
    return start_build(s, conn, rq, kind, body, owner);
}

static void metrics_line(char **out, size_t *len, size_t *cap, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void metrics_line(char **out, size_t *len, size_t *cap, const char *fmt, ...)
{
    va_list ap;
    for (;;) {
        va_start(ap, fmt);
        int n = vsnprintf(*out ? *out + *len : NULL, *out ? *cap - *len : 0, fmt, ap);
        va_end(ap);
        if (n < 0)
            return;
        if (*out && *len + (size_t)n < *cap) {
            *len += (size_t)n;
            return;
        }
        size_t nc = *cap ? *cap * 2 : 8192;
        while (nc < *len + (size_t)n + 1)
            nc *= 2;
        char *b = realloc(*out, nc);
        if (!b)
            return;
        *out = b;
        *cap = nc;
    }
}

/* The per-session metrics: name (after softcast_session_), type, help, value (of ss, under
 * its lock) and the decimals it is printed with. One table, so that each has its HELP and
 * TYPE and the exposition lists a metric's samples together (Prometheus' text format). */
#define SESSION_METRICS(X)                                                                        \
    X(step_ms, gauge, "Simulation step time of the last frame, ms.", ss->last_step_ms, 4)         \
    X(encode_ms, gauge, "Time of the last encoding pass (a frame, or a snapshot), ms.",           \
      ss->last_encode_ms, 4)                                                                      \
    X(step_ms_mean, gauge, "Mean simulation step time over the session's frames, ms.",            \
      ss->frames ? ss->step_ms_sum / (double)ss->frames : 0.0, 4)                                 \
    X(encodes_total, counter, "Encoding passes (frames and snapshots), failed ones included.",    \
      (double)ss->encodes, 0)                                                                     \
    X(encode_ms_mean, gauge, "Mean time of an encoding pass, ms.",                                \
      ss->encodes ? ss->encode_ms_sum / (double)ss->encodes : 0.0, 4)                             \
    X(frame_cost_ms, gauge,                                                                       \
      "What a frame holds a worker, ms, smoothed: the scheduler's measure of the session.",       \
      ss->frame_cost_ms, 4)                                                                       \
    X(frames_total, counter, "Frames the workers ran (a paused session's take no step).",         \
      (double)ss->frames, 0)                                                                      \
    X(batched_steps_total, counter, "Steps taken in batches of two or more (--step-batch).",      \
      (double)ss->batched_steps, 0)                                                               \
    X(frames_sent_total, counter, "Frames sent, one per client that got it.",                     \
      (double)ss->frames_sent, 0)                                                                 \
    X(bytes_sent_total, counter, "Bytes of frames sent to clients.", (double)ss->bytes_sent, 0)   \
    X(clients, gauge, "WebSocket clients joined.", (double)ss->nclients, 0)                       \
    X(events_total, counter,                                                                      \
      "Items its clients sent that were taken in: events, control items (pause, resume, record, " \
      "seek) and viewers' queries.",                                                              \
      (double)ss->events, 0)                                                                      \
    X(errors_total, counter, "Errors sent to the session's clients.", (double)ss->errors, 0)      \
    X(event_to_frame_ms, gauge,                                                                   \
      "Mean time from the oldest event a frame took to the frame published, ms.",                 \
      ss->latency_n ? ss->latency_ms_sum / (double)ss->latency_n : 0.0, 4)                        \
    X(backlog_bytes_peak, gauge, "Largest send backlog of one client, bytes.",                    \
      (double)ss->backlog_peak, 0)                                                                \
    X(inbox_bytes, gauge, "Bytes of events waiting in the inbox.", (double)ss->inbox.used, 0)     \
    X(inbox_events, gauge, "Events waiting in the inbox.", (double)ss->inbox.count, 0)            \
    X(inbox_bytes_peak, gauge, "Largest inbox fill, bytes.", (double)ss->inbox.peak, 0)           \
    X(viewer_queries, gauge, "Viewers' queries waiting for the next frame.", (double)ss->nquery,  \
      0)                                                                                          \
    X(viewer_queries_replaced_total, counter,                                                     \
      "Viewers' queries replaced by a newer one before a frame answered them.",                   \
      (double)ss->queries_replaced, 0)                                                            \
    X(client_visits_total, counter,                                                               \
      "Clients of the session the WebSocket thread looked at on its wakes.",                      \
      (double)ss->client_visits, 0)

#define COUNT_METRIC(name, type, help, value, decimals) +1
enum { N_SESSION_METRICS = 0 SESSION_METRICS(COUNT_METRIC) };
#undef COUNT_METRIC

typedef struct session_sample {
    char id[SRV_ID_LEN];
    double v[N_SESSION_METRICS];
} session_sample;

/* Each session's values, taken under its lock: *n of them (NULL when out of memory). */
static session_sample *session_samples(srv *s, int *n)
{
    *n = 0;
    session_sample *out = calloc((size_t)s->cfg.max_sessions, sizeof *out);
    if (!out)
        return NULL;
    pthread_mutex_lock(&s->lock);
    for (int i = 0; i < s->cfg.max_sessions; i++) {
        srv_session *ss = s->slots[i];
        if (!ss)
            continue;
        session_sample *o = &out[(*n)++];
        pthread_mutex_lock(&ss->lock);
        snprintf(o->id, sizeof o->id, "%s", ss->id);
        int k = 0;
#define TAKE_METRIC(name, type, help, value, decimals) o->v[k++] = (value);
        SESSION_METRICS(TAKE_METRIC)
#undef TAKE_METRIC
        pthread_mutex_unlock(&ss->lock);
    }
    pthread_mutex_unlock(&s->lock);
    return out;
}

static enum MHD_Result metrics(srv *s, struct MHD_Connection *conn)
{
    char *o = NULL;
    size_t len = 0, cap = 0;
#define M(...) metrics_line(&o, &len, &cap, __VA_ARGS__)
    int n;
    session_sample *smp = session_samples(s, &n);
    if (!smp)
        return send_error(conn, 503, "out of memory", "no memory for the metrics");
    int k = 0;
#define PRINT_METRIC(name, type, help, value, decimals)                                           \
    M("# HELP softcast_session_" #name " " help "\n# TYPE softcast_session_" #name " " #type      \
      "\n");                                                                                      \
    for (int i = 0; i < n; i++)                                                                   \
        M("softcast_session_" #name "{session=\"%s\"} %.*f\n", smp[i].id, decimals, smp[i].v[k]); \
    k++;
    SESSION_METRICS(PRINT_METRIC)
#undef PRINT_METRIC
    free(smp);
    /* The server's own: name, type, help, then its sample. */
#define G(name, type, help, fmt, ...)                                                        \
    M("# HELP softcast_" name " " help "\n# TYPE softcast_" name " " type "\nsoftcast_" name \
      " " fmt "\n",                                                                          \
      __VA_ARGS__)
    G("sessions", "gauge", "Sessions held.", "%d", n);
    G("clients", "gauge", "WebSocket clients joined, all sessions.", "%d",
      atomic_load(&s->nclients));
    G("inbox_capacity_bytes", "gauge", "Bytes of events a session's inbox holds.", "%u",
      (unsigned)(SRV_INBOX_BYTES - SRV_INBOX_CONTROL));
    G("frames_sent_total", "counter", "Frames sent, all sessions.", "%llu",
      (unsigned long long)atomic_load(&s->total_frames_sent));
    G("bytes_sent_total", "counter", "Bytes of frames sent, all sessions.", "%llu",
      (unsigned long long)atomic_load(&s->total_bytes_sent));
    G("errors_total", "counter", "Errors sent to clients, all sessions.", "%llu",
      (unsigned long long)atomic_load(&s->total_errors));
    G("batched_steps_total", "counter",
      "Session steps taken in batches of two or more (--step-batch).", "%llu",
      (unsigned long long)atomic_load(&s->batched_steps));
    G("step_batches_total", "counter", "Batches of two or more steps taken (--step-batch).", "%llu",
      (unsigned long long)atomic_load(&s->step_batches));
    G("express_steps_total", "counter",
      "Light sessions' steps taken by the express worker while every worker was stepping.", "%llu",
      (unsigned long long)atomic_load(&s->express_steps));
    G("uptime_seconds", "gauge", "Seconds since the server started.", "%.1f",
      (srv_now_ms() - (double)s->started_ms) / 1000.0);
#undef G
#undef M
    enum MHD_Result r = send_body(conn, 200, "text/plain; version=0.0.4", o ? o : "", len);
    free(o);
    return r;
}

static const char *mime_of(const char *path)
{
    const char *dot = strrchr(path, '.');
    static const char *const map[][2] = {{".html", "text/html; charset=utf-8"},
                                         {".js", "text/javascript"},
                                         {".mjs", "text/javascript"},
                                         {".css", "text/css"},
                                         {".json", "application/json"},
                                         {".wasm", "application/wasm"},
                                         {".png", "image/png"},
                                         {".svg", "image/svg+xml"}};
    for (size_t i = 0; dot && i < sizeof map / sizeof map[0]; i++)
        if (!strcmp(dot, map[i][0]))
            return map[i][1];
    return "application/octet-stream";
}

/* A name the static files may have: letters, digits and ._-/, no component that starts
 * with a dot (no "..", no dotfiles such as .git or .env). */
static int plain_url(const char *rel)
{
    for (const char *c = rel; *c; c++)
        if (!(isalnum((unsigned char)*c) || strchr("/._-", *c)) || (c[0] == '/' && c[1] == '.'))
            return 0;
    return rel[0] == '/';
}

/* Open a static file: a regular file that really lies under the data directory (no link
 * out of it, whatever the link's place in the path), never a FIFO or a device (opened
 * without blocking, then looked at). -1 when it is not one. */
static int open_static(srv *s, const char *path, struct stat *st)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOFOLLOW);
    if (fd < 0)
        return -1;
    char real[PATH_MAX], root[PATH_MAX];
    size_t rl;
    if (fstat(fd, st) != 0 || !S_ISREG(st->st_mode) || st->st_size > (64 << 20) ||
        !realpath(path, real) || !realpath(s->cfg.data_dir, root) || !(rl = strlen(root)) ||
        strncmp(real, root, rl) != 0 || (real[rl] != '/' && root[rl - 1] != '/')) {
        close(fd);
        return -1;
    }
    fcntl(fd, F_SETFL, 0); /* MHD reads it with blocking reads */
    return fd;
}

static enum MHD_Result serve_file(srv *s, struct MHD_Connection *conn, const char *url)
{
    const char *rel = !strcmp(url, "/") ? "/index.html" : url;
    if (!plain_url(rel))
        return send_error(conn, 404, "not found", url);
    if (!s->cfg.data_dir[0] || strlen(s->cfg.data_dir) + strlen(rel) + 1 > 1024)
        goto none;
    char path[2048];
    /* A browser that takes gzip gets FILE.gz where the build made one (the client bundle:
     * a quarter of the bytes on first load). */
    const char *ae = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Accept-Encoding");
    int gz = ae && strstr(ae, "gzip");
    int fd = -1;
    struct stat st;
    if (gz) {
        snprintf(path, sizeof path, "%s%s.gz", s->cfg.data_dir, rel);
        fd = open_static(s, path, &st);
        gz = fd >= 0;
    }
    snprintf(path, sizeof path, "%s%s", s->cfg.data_dir, rel);
    if (fd < 0)
        fd = open_static(s, path, &st);
    if (fd < 0)
        goto none;
    struct MHD_Response *r = MHD_create_response_from_fd((uint64_t)st.st_size, fd);
    if (!r) {
        close(fd);
        return MHD_NO;
    }
    MHD_add_response_header(r, "Content-Type", mime_of(rel)); /* MHD closes fd */
    MHD_add_response_header(r, "Vary", "Accept-Encoding");
    if (gz)
        MHD_add_response_header(r, "Content-Encoding", "gzip");
    enum MHD_Result ret = MHD_queue_response(conn, 200, r);
    MHD_destroy_response(r);
    return ret;
none:
    if (strcmp(rel, "/index.html") != 0)
        return send_error(conn, 404, "not found", url);
    static const char page[] =
        "<!doctype html><meta charset=utf-8><title>Softcast</title>"
        "<h1>Softcast server</h1><p>The browser client is not installed here. API: "
        "<code>GET /api/health</code>, <code>POST /api/sessions</code>, "
        "<code>GET /api/sessions</code>, <code>GET /metrics</code>; protocol: "
        "protocol/README.md.</p>";
    return send_body(conn, 200, "text/html; charset=utf-8", page, sizeof page - 1);
}

/* /api/sessions: create (POST) or list (GET). */
static enum MHD_Result sessions(srv *s, struct MHD_Connection *conn, const char *method,
                                request *rq)
{
    if (!strcmp(method, "POST"))
        return create_session(s, conn, rq);
    if (strcmp(method, "GET"))
        return send_error(conn, 405, "method not allowed", method);
    cJSON *arr = cJSON_CreateArray();
    int key = holds_operator_key(s, conn); /* the operator sees the names users gave */
    pthread_mutex_lock(&s->lock);
    for (int i = 0; i < s->cfg.max_sessions; i++) {
        srv_session *ss = s->slots[i];
        if (!ss)
            continue;
        pthread_mutex_lock(&ss->lock);
        int closing = ss->closing; /* deleted: gone for callers, freed soon */
        pthread_mutex_unlock(&ss->lock);
        if (!closing)
            cJSON_AddItemToArray(arr, session_json(s, ss, 0, key));
    }
    pthread_mutex_unlock(&s->lock);
    cJSON *j = cJSON_CreateObject();
    cJSON_AddItemToObject(j, "sessions", arr);
    return send_json(conn, 200, j);
}

/* GET /api/sessions/{id}/recording: the last recording's file, for the control token. */
static enum MHD_Result download_recording(srv *s, struct MHD_Connection *conn, const char *id)
{
    srv_session *ss = srv_session_get(s, id);
    if (!ss)
        return send_error(conn, 404, "unknown session", id);
    int mine = srv_token_equal(bearer(conn), ss->control_token);
    size_t n = 0;
    int fd = mine ? srv_session_recording(ss, &n) : -1;
    srv_session_put(s, ss);
    if (!mine)
        return send_error(conn, 403, "forbidden", "the control token is required");
    if (fd < 0)
        return send_error(conn, 404, "no recording", "record_start, then record_stop, first");
    struct MHD_Response *r = MHD_create_response_from_fd(n, fd); /* MHD closes it */
    if (!r) {
        close(fd);
        return MHD_NO;
    }
    char disp[SRV_ID_LEN + 40];
    snprintf(disp, sizeof disp, "attachment; filename=\"%s.screc\"", id);
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "application/octet-stream");
    MHD_add_response_header(r, "Content-Disposition", disp);
    enum MHD_Result ret = MHD_queue_response(conn, 200, r);
    MHD_destroy_response(r);
    return ret;
}

/* POST /api/recordings (the file as the body): a replay session, loading at once. */
static enum MHD_Result upload_recording(srv *s, struct MHD_Connection *conn, request *rq)
{
    if (!operator_ok(s, conn))
        return refuse_operator(conn);
    const char *type =
        MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_TYPE);
    if (!type || strncmp(type, "application/octet-stream", 24) != 0)
        return send_error(conn, 415, "unsupported media type",
                          "a recording is sent as application/octet-stream");
    char owner[48], err[512] = "";
    client_address(s, conn, owner, sizeof owner);
    int status;
    uint8_t *file = (uint8_t *)rq->body;
    rq->body = NULL; /* the replay's now */
    srv_session *ss = srv_replay_create(s, file, rq->len, owner, &status, err, sizeof err);
    if (!ss)
        return send_error(conn, (unsigned)status,
                          status == 400 ? "bad recording" : status_error(status), err);
    cJSON *j = session_json(s, ss, 1, 1);
    srv_session_put(s, ss);
    return send_json(conn, 202, j);
}

/* /api/sessions/{id}: delete it (the control token as a bearer token) or describe it. */
static enum MHD_Result one_session(srv *s, struct MHD_Connection *conn, const char *method,
                                   const char *id)
{
    const char *slash = strchr(id, '/');
    if (slash && !strcmp(slash, "/recording") && !strcmp(method, "GET")) {
        char sid[SRV_ID_LEN];
        snprintf(sid, sizeof sid, "%.*s", (int)(slash - id) < SRV_ID_LEN ? (int)(slash - id) : 0,
                 id);
        return download_recording(s, conn, sid);
    }
    if (!strcmp(method, "DELETE")) {
        int rc = srv_session_delete(s, id, bearer(conn));
        if (rc == 204)
            return send_body(conn, 204, "application/json", "", 0);
        return send_error(conn, (unsigned)rc, rc == 404 ? "unknown session" : "forbidden",
                          rc == 404 ? id : "the control token is required");
    }
    if (strcmp(method, "GET"))
        return send_error(conn, 405, "method not allowed", method);
    srv_session *ss = srv_session_get(s, id);
    if (!ss)
        return send_error(conn, 404, "unknown session", id);
    const char *tok = bearer(conn);
    int reveal = holds_operator_key(s, conn) || srv_token_equal(tok, ss->control_token) ||
                 srv_token_equal(tok, ss->view_token);
    cJSON *j = session_json(s, ss, 0, reveal);
    srv_session_put(s, ss);
    return send_json(conn, 200, j);
}

/* ------------------------------------------------------------ uploads */

/* Refuse an upload, its file removed at once. Before the body (its headers in) the answer
 * goes now and no byte of the body is read. MHD 0.9.75 queues no answer in the middle of a
 * body: then the rest of a body of announced length (at most --upload-limit) is read and
 * dropped, and the answer goes at its end; a body without a length that passes the limit
 * has its connection closed at once (nothing bounds it). */
static enum MHD_Result upload_refuse(struct MHD_Connection *conn, request *rq, int status,
                                     const char *why, int mid_body)
{
    srv_upload_abort(rq->up);
    rq->up = NULL;
    rq->refused = (unsigned)status;
    fprintf(stderr, "softcast-server: upload refused (%d): %s\n", status, why);
    if (mid_body &&
        !MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH))
        return MHD_NO;
    snprintf(rq->refusal, sizeof rq->refusal, "%s", why);
    if (!mid_body && send_error(conn, (unsigned)status, status_error(status), why) == MHD_YES)
        rq->refusal[0] = 0; /* answered */
    return MHD_YES;
}

/* POST /api/volumes?name=NAME, its headers in: refused now (content type, announced length,
 * room) before any of the body is read, or its file made. */
static enum MHD_Result upload_begin(srv *s, struct MHD_Connection *conn, request *rq)
{
    char err[512] = "", owner[48];
    int status = 0;
    rq->is_upload = 1;
    if (!operator_ok(s, conn)) {
        snprintf(err, sizeof err, "an upload makes a session: send Authorization: Bearer KEY");
        return upload_refuse(conn, rq, 401, err, 0);
    }
    client_address(s, conn, owner, sizeof owner);
    rq->up = srv_upload_begin(
        s, MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, "name"),
        MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_TYPE),
        MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH), owner,
        &status, err, sizeof err);
    return rq->up ? MHD_YES : upload_refuse(conn, rq, status, err, 0);
}

static enum MHD_Result upload_step(srv *s, struct MHD_Connection *conn, request *rq,
                                   const char *data, size_t *size)
{
    char err[512] = "";
    if (*size) {
        size_t n = *size;
        *size = 0;
        if (rq->refused)
            return MHD_YES;
        int status = srv_upload_write(rq->up, data, n, err, sizeof err);
        if (status == 408) { /* a trickle: its connection closes, not read to its end */
            upload_refuse(conn, rq, status, err, 1);
            return MHD_NO;
        }
        return status ? upload_refuse(conn, rq, status, err, 1) : MHD_YES;
    }
    if (rq->refused) /* not answered yet */
        return rq->refusal[0]
                   ? send_error(conn, rq->refused, status_error((int)rq->refused), rq->refusal)
                   : MHD_YES;
    int status;
    srv_session *ss = srv_upload_finish(rq->up, &status, err, sizeof err);
    rq->up = NULL;
    if (!ss) {
        rq->refused = (unsigned)status;
        return send_error(conn, (unsigned)status, status_error(status), err);
    }
    return send_json(conn, 202, session_json(s, ss, 1, 1));
}

/* GET /api/cluster: this process's name and the cluster's (--peers; itself when alone),
 * for the lobby to list every process's sessions (GET /api/sessions?process=NAME each). */
static cJSON *cluster_json(srv *s)
{
    cJSON *j = cJSON_CreateObject(), *a = cJSON_AddArrayToObject(j, "processes");
    cJSON_AddStringToObject(j, "process", s->cfg.process_name);
    const char *p = s->cfg.peers;
    if (!*p)
        cJSON_AddItemToArray(a, cJSON_CreateString(s->cfg.process_name));
    while (*p) {
        const char *e = strchr(p, ',');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        char name[64];
        snprintf(name, sizeof name, "%.*s", (int)n, p);
        cJSON_AddItemToArray(a, cJSON_CreateString(name));
        p += n + (e ? 1 : 0);
    }
    return j;
}

/* The most a request's body may hold: a recording's, --upload-limit; any other, 64 KiB. */
static unsigned long long body_limit(const srv *s, const request *rq)
{
    return rq->is_recording ? (unsigned long long)s->cfg.upload_limit : BODY_MAX;
}

static enum MHD_Result body_too_big(struct MHD_Connection *conn, request *rq)
{
    rq->too_big = 1;
    return send_error(conn, 413, "body too large",
                      rq->is_recording ? "a recording is limited to --upload-limit"
                                       : "request bodies are limited to 64 KiB");
}

/* A request's headers are in (its first call): what can be refused before its body is read
 * is refused now. */
static enum MHD_Result request_begin(srv *s, struct MHD_Connection *conn, const char *url,
                                     const char *method, void **con_cls)
{
    request *rq = calloc(1, sizeof *rq);
    if (!rq)
        return MHD_NO;
    rq->arrival = -1;
    *con_cls = rq;
    if (!strcmp(url, "/api/volumes") && !strcmp(method, "POST"))
        return upload_begin(s, conn, rq);
    rq->is_recording = !strcmp(url, "/api/recordings") && !strcmp(method, "POST");
    /* A recording is the operator's: without the key it is refused before a byte of its body
     * is read, whatever its size (an anonymous client cannot make the server read
     * --upload-limit bytes, nor learn the limit). */
    if (rq->is_recording && !operator_ok(s, conn)) {
        rq->no_key = 1;
        return refuse_operator(conn);
    }
    /* A body announced over the limit is refused now, before a byte of it is read (not after
     * the client has sent it all, nor never, when it waits for a 100 Continue). */
    const char *cl =
        MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
    if (cl && strtoull(cl, NULL, 10) > body_limit(s, rq))
        return body_too_big(conn, rq);
    if (rq->is_recording) { /* held in memory as it arrives: a place like an upload's */
        char owner[48], err[256];
        int status;
        client_address(s, conn, owner, sizeof owner);
        rq->arrival = srv_arrival_take(s, owner, &status, err, sizeof err);
        rq->began_ms = srv_now_ms();
        if (rq->arrival < 0) {
            rq->no_room = 1;
            return send_error(conn, (unsigned)status, status_error(status), err);
        }
    }
    return MHD_YES;
}

/* A piece of a body held in memory (JSON, a recording): kept, or dropped once answered. */
static enum MHD_Result request_body(srv *s, request *rq, const char *data, size_t n)
{
    char err[256];
    if (rq->no_key || rq->no_room || rq->too_big)
        return MHD_YES; /* answered already: the rest of the body is dropped */
    if (rq->len + n > body_limit(s, rq)) {
        rq->too_big = 1;
        return MHD_YES;
    }
    if (rq->is_recording &&
        srv_arrival_too_slow(rq->began_ms, (long long)(rq->len + n), err, sizeof err)) {
        fprintf(stderr, "softcast-server: recording refused (408): %s\n", err);
        return MHD_NO; /* MHD 0.9.75 answers nothing mid-body: the connection closes */
    }
    char *b = realloc(rq->body, rq->len + n + 1);
    if (!b)
        return MHD_NO;
    rq->body = b;
    memcpy(rq->body + rq->len, data, n);
    rq->len += n;
    return MHD_YES;
}

static enum MHD_Result handler(void *cls, struct MHD_Connection *conn, const char *url,
                               const char *method, const char *version, const char *upload,
                               size_t *upload_size, void **con_cls)
{
    (void)version;
    srv *s = cls;
    request *rq = *con_cls;
    if (!rq)
        return request_begin(s, conn, url, method, con_cls);
    if (rq->is_upload)
        return upload_step(s, conn, rq, upload, upload_size);
    if (rq->job)
        return finish_build(s, conn, rq);
    if (*upload_size) {
        size_t n = *upload_size;
        *upload_size = 0;
        return request_body(s, rq, upload, n);
    }
    if (rq->no_key)
        return refuse_operator(conn);
    if (rq->no_room)
        return MHD_YES; /* answered at its headers */
    if (rq->too_big)
        return body_too_big(conn, rq);
    if (rq->is_recording)
        return upload_recording(s, conn, rq);
    /* ?process=NAME: the router sends it to process NAME (deploy/); another is misrouted. */
    const char *proc = MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, "process");
    if (proc && strcmp(proc, s->cfg.process_name) != 0)
        return send_error(conn, 421, "misdirected",
                          "this is not that process (see the router's configuration)");
    if (!strcmp(url, "/api/cluster") && !strcmp(method, "GET"))
        return send_json(conn, 200, cluster_json(s));
    if (!strcmp(url, "/api/health") && !strcmp(method, "GET")) {
        cJSON *j = cJSON_CreateObject();
        cJSON_AddStringToObject(j, "status", "ok");
        cJSON_AddStringToObject(j, "process", s->cfg.process_name);
        cJSON_AddStringToObject(j, "backend", sim_backend_name(s->backend));
        cJSON_AddNumberToObject(j, "threads", sim_backend_threads(s->backend));
        pthread_mutex_lock(&s->lock);
        cJSON_AddNumberToObject(j, "sessions", s->nsessions);
        pthread_mutex_unlock(&s->lock);
        cJSON_AddNumberToObject(j, "clients", atomic_load(&s->nclients));
        int in_flight, arriving;
        srv_uploads_counts(s, &in_flight, &arriving);
        cJSON_AddNumberToObject(j, "uploads_in_flight", in_flight);
        cJSON_AddNumberToObject(j, "uploads_arriving", arriving);
        cJSON_AddNumberToObject(j, "max_sessions", s->cfg.max_sessions);
        cJSON_AddNumberToObject(j, "ws_port", s->ws_port);
        cJSON_AddBoolToObject(j, "api_key_required", s->cfg.api_key[0] != 0);
        pthread_mutex_lock(&s->lock);
        cJSON_AddNumberToObject(j, "memory_in_use_bytes", (double)s->bytes_in_use);
        pthread_mutex_unlock(&s->lock);
        cJSON_AddNumberToObject(j, "memory_budget_bytes",
                                (double)((size_t)s->cfg.memory_budget_mib << 20));
        return send_json(conn, 200, j);
    }
    if (!strcmp(url, "/api/sessions"))
        return sessions(s, conn, method, rq);
    if (!strncmp(url, "/api/sessions/", 14))
        return one_session(s, conn, method, url + 14);
    if (!strcmp(url, "/metrics") && !strcmp(method, "GET"))
        return metrics(s, conn);
    if (!strcmp(url, "/api/volumes"))
        return strcmp(method, "GET") ? send_error(conn, 405, "method not allowed", method)
                                     : send_json(conn, 200, srv_volumes_list(s));
    if (!strcmp(url, "/api/health") || !strcmp(url, "/api/cluster") || !strcmp(url, "/metrics"))
        return send_error(conn, 405, "method not allowed", method); /* they are GET's */
    if (!strncmp(url, "/api/", 5))
        return send_error(conn, 404, "not found", url);
    if (!strcmp(method, "GET") || !strcmp(method, "HEAD"))
        return serve_file(s, conn, url);
    return send_error(conn, 405, "method not allowed", method);
}

static void completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                      enum MHD_RequestTerminationCode toe)
{
    (void)conn;
    (void)toe;
    request *rq = *con_cls;
    /* A build's request that ended unanswered (the client went once resumed): the build is
     * done (a suspended request ends only once resumed), its session the client's to join. */
    if (rq && rq->job && atomic_load(&rq->job->done)) {
        srv_session_put(cls, rq->job->ss);
        free(rq->job);
        rq->job = NULL;
    }
    if (rq) {
        srv_upload_abort(rq->up); /* cut off mid-body: its file goes */
        if (rq->is_recording)
            srv_arrival_end(cls, rq->arrival, 0);
        free(rq->body);
        free(rq);
        *con_cls = NULL;
    }
}

int srv_http_start(srv *s, char *err, size_t err_sz)
{
    /* Bind the socket here and hand it to MHD: the port is then known (and written)
     * before any MHD thread can read it. */
    struct sockaddr_in addr;
    memset(&addr, 0, sizeof addr);
    addr.sin_family = AF_INET;
    addr.sin_port = htons((uint16_t)s->cfg.http_port);
    if (inet_pton(AF_INET, s->cfg.bind, &addr.sin_addr) != 1) {
        snprintf(err, err_sz, "HTTP: --bind %s is not an IPv4 address", s->cfg.bind);
        return -1;
    }
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;
    socklen_t alen = sizeof addr;
    if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
        bind(fd, (struct sockaddr *)&addr, sizeof addr) != 0 || listen(fd, 128) != 0 ||
        getsockname(fd, (struct sockaddr *)&addr, &alen) != 0) {
        int e = errno;
        snprintf(err, err_sz, "HTTP: cannot listen on %s:%d (%s)%s", s->cfg.bind, s->cfg.http_port,
                 strerror(e),
                 e == EADDRINUSE ? ": another program has the port; --http-port 0 picks a free one"
                                 : "");
        if (fd >= 0)
            close(fd);
        return -1;
    }
    s->http_port = ntohs(addr.sin_port);
    /* Bounded: one address holds at most --max-http-per-address connections (a slow-header
     * flood from one address leaves the others served), all at most --max-http-connections,
     * and a connection idle (or trickling nothing) for --http-timeout seconds is closed. */
    struct MHD_Daemon *d = MHD_start_daemon(
        MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_AUTO | MHD_USE_ERROR_LOG |
            MHD_ALLOW_SUSPEND_RESUME,
        0, NULL, NULL, handler, s, MHD_OPTION_LISTEN_SOCKET, fd, MHD_OPTION_CONNECTION_TIMEOUT,
        (unsigned)s->cfg.http_timeout_s, MHD_OPTION_PER_IP_CONNECTION_LIMIT,
        (unsigned)s->cfg.max_http_per_address, MHD_OPTION_CONNECTION_LIMIT,
        (unsigned)s->cfg.max_http_connections, MHD_OPTION_THREAD_POOL_SIZE, (unsigned)2,
        MHD_OPTION_NOTIFY_COMPLETED, completed, s, MHD_OPTION_END);
    if (!d) {
        snprintf(err, err_sz, "HTTP: libmicrohttpd would not start on %s:%d", s->cfg.bind,
                 s->http_port);
        close(fd);
        return -1;
    }
    s->http = d;
    return 0;
}

void srv_http_stop(srv *s)
{
    if (s->http)
        MHD_stop_daemon(s->http);
    s->http = NULL;
}
