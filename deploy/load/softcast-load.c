/* softcast-load (C): the operators' load generator, light enough to measure the server with.
 * The same flags and the same JSON line as softcast-load.mjs: N sessions of M clients (1 driver
 * and M-1 viewers), each driver running the scene's loop (the volume's grab-drag-release, the
 * cloth's walking crowd and circling camera, the soft body's pull and tray), for S seconds.
 * Every client reads only the 40-byte header of each frame (the node tool's --decode, which
 * decodes as the browser does, stays in node). One thread and one libwebsockets context hold
 * every connection; the session table is made and emptied over plain HTTP/1.1.
 *
 * The line adds what the node tool cannot tell apart from its own cost: the tool's CPU
 * (cpu_percent of one core, from getrusage), and the slowest and fastest session's frame rate
 * per client (fps_session_min/max: a starved session shows there, not in the mean), and the
 * server's own mean step and encode times for its sessions (server_step_ms, server_encode_ms,
 * from GET /metrics at the run's end). */
#include <errno.h>
#include <math.h>
#include <netdb.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <libwebsockets.h>

#define HEADER_BYTES    40    /* a frame's header (protocol/README.md) */
#define TEXT_MAX        65536 /* a text message longer than this is not the server's */
#define OUT_SLOTS       16    /* a driver's messages not yet written */
#define OUT_BYTES       384   /* one event, as JSON */
#define CONNECT_SECONDS 30    /* every client open by then, or the run stops */
#define HTTP_REPLY_MAX  (1u << 20)

static const char k_usage[] =
    "usage: softcast-load --url http://HOST:PORT/ [--sessions N] [--clients M] [--seconds S]\n"
    "                     [--dims WxHxD] [--rate HZ]   (moves per second per driver, default 30)\n"
    "                     [--scene volume|cloth|softbody] [--characters N]   (cloth: the camera\n"
    "                     circles a walking crowd instead of a drag)\n"
    "                     [--model hybrid|surface]   (softbody: the organ is grabbed at its top\n"
    "                     and pulled, let go, and its tray slides and tilts under it)\n"
    "                     [--key-file FILE]   (a server with --api-key-file: its key, sent as\n"
    "                     Authorization: Bearer when making sessions)\n"
    "                     [--stagger 1]   (session i starts its loop i/N of a cycle late, so\n"
    "                     that the sessions do not all grab and release at the same tick)\n"
    "Frames are read by their headers only; to decode them as the browser does, use\n"
    "softcast-load.mjs --decode D.\n";

typedef enum { SCENE_VOLUME, SCENE_CLOTH, SCENE_SOFTBODY } scene_kind;

typedef struct opts {
    char host[256];
    int port;
    int sessions, clients, characters;
    double seconds, rate;
    int dims[3], have_dims;
    int stagger; /* the sessions' scripts start spread over one cycle, not all at once */
    scene_kind scene;
    const char *model;
    char key[512];
} opts;

typedef struct session session;

typedef struct client {
    session *s;
    struct lws *wsi;
    int driver, open, gone, ready; /* ready: its first frame (the joiner's snapshot) is in */
    uint32_t last_seq;
    /* the message being received */
    int in_msg, binary;
    size_t msg_len, head_len;
    unsigned char head[HEADER_BYTES];
    char *text;
    size_t text_len;
    /* the driver's events not yet written (a ring) */
    char out[OUT_SLOTS][LWS_PRE + OUT_BYTES];
    size_t out_len[OUT_SLOTS];
    int out_head, out_n;
} client;

struct session {
    char id[64], control[128], view[128];
    char ws_host[256], ws_path[512];
    int ws_port, ws_tls;
    int dims[3];
    double tray[3];
    uint64_t start;  /* --stagger: the tick its script starts at */
    double *sent_ms; /* by seq: when the driver sent it; NAN when it did not */
    size_t sent_cap;
    uint64_t frames;
    client *cl;
};

typedef struct run {
    opts o;
    session *ss;
    struct lws_context *ctx;
    int made; /* sessions created, not yet deleted */
    int opened, ready, failed, closing;
    char failure[256];
    lws_sorted_usec_list_t tick_sul;
    double t0_ms, period_ms;
    uint64_t ticks;
    int done;
    /* what every client saw */
    uint64_t frames, structural, other, bytes, errors, dropped_moves;
    double *lat;
    size_t nlat, lat_cap;
} run;

static run g_run; /* the one run: lws's callbacks reach it (one tool, one run) */

static void delete_sessions(run *R);

/* Stop with the reason; the sessions made so far are deleted first, so that a failed run
 * leaves the server's table (and this address's quota) as it found them. */
static void die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("softcast-load: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    delete_sessions(&g_run);
    exit(1);
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* ------------------------------------------------------------- flags */

static int pos_int(const char *k, const char *v)
{
    char *end;
    long n = strtol(v, &end, 10);
    if (*v == 0 || *end != 0 || n < 1 || n > 10000)
        die("%s %s: an integer 1 to 10000", k, v);
    return (int)n;
}

static double number(const char *k, const char *v)
{
    char *end;
    double x = strtod(v, &end);
    if (*v == 0 || *end != 0 || !isfinite(x))
        die("%s %s: not a number", k, v);
    return x;
}

/* The server's own rule (--api-key-file): the first line, white space at its ends dropped. */
static void read_key(const char *path, char *key, size_t cap)
{
    FILE *f = fopen(path, "r");
    if (!f)
        die("--key-file %s: %s", path, strerror(errno));
    char line[1024] = {0};
    if (!fgets(line, sizeof line, f))
        line[0] = 0;
    fclose(f);
    char *a = line, *b = line + strlen(line);
    while (*a == ' ' || *a == '\t' || *a == '\r' || *a == '\n')
        a++;
    while (b > a && (b[-1] == ' ' || b[-1] == '\t' || b[-1] == '\r' || b[-1] == '\n'))
        *--b = 0;
    if (!*a)
        die("--key-file %s: empty", path);
    if (strlen(a) >= cap)
        die("--key-file %s: longer than %zu bytes", path, cap - 1);
    strcpy(key, a);
}

/* http://HOST:PORT[/...] into host and port (80 when none). */
static int parse_http_url(const char *url, char *host, size_t cap, int *port)
{
    if (strncmp(url, "http://", 7) != 0)
        return -1;
    const char *h = url + 7, *end = h + strcspn(h, ":/");
    if (end == h || (size_t)(end - h) >= cap)
        return -1;
    memcpy(host, h, (size_t)(end - h));
    host[end - h] = 0;
    *port = 80;
    if (*end == ':') {
        char *after;
        long p = strtol(end + 1, &after, 10);
        if (p < 1 || p > 65535 || (*after && *after != '/'))
            return -1;
        *port = (int)p;
    }
    return 0;
}

static void parse_opts(int argc, char **argv, opts *o)
{
    memset(o, 0, sizeof *o);
    o->sessions = 1, o->clients = 5, o->seconds = 10, o->rate = 30, o->characters = 1;
    o->scene = SCENE_VOLUME, o->model = "hybrid";
    const char *url = NULL;
    for (int i = 1; i < argc; i++) {
        const char *k = argv[i], *v = argv[i + 1];
        if (!strcmp(k, "--help") || !strcmp(k, "-h")) {
            fputs(k_usage, stdout);
            exit(0);
        }
        if (!v)
            die("%s needs a value\n%s", k, k_usage);
        i++;
        if (!strcmp(k, "--url"))
            url = v;
        else if (!strcmp(k, "--sessions"))
            o->sessions = pos_int(k, v);
        else if (!strcmp(k, "--clients"))
            o->clients = pos_int(k, v);
        else if (!strcmp(k, "--seconds"))
            o->seconds = number(k, v);
        else if (!strcmp(k, "--rate"))
            o->rate = number(k, v);
        else if (!strcmp(k, "--characters"))
            o->characters = pos_int(k, v);
        else if (!strcmp(k, "--scene")) {
            if (!strcmp(v, "volume"))
                o->scene = SCENE_VOLUME;
            else if (!strcmp(v, "cloth"))
                o->scene = SCENE_CLOTH;
            else if (!strcmp(v, "softbody"))
                o->scene = SCENE_SOFTBODY;
            else
                die("--scene %s: volume, cloth or softbody", v);
        } else if (!strcmp(k, "--model")) {
            if (strcmp(v, "hybrid") && strcmp(v, "surface"))
                die("--model %s: hybrid or surface", v);
            o->model = v;
        } else if (!strcmp(k, "--dims")) {
            char tail;
            if (sscanf(v, "%dx%dx%d%c", &o->dims[0], &o->dims[1], &o->dims[2], &tail) != 3 ||
                o->dims[0] < 1 || o->dims[1] < 1 || o->dims[2] < 1)
                die("--dims %s: must be WxHxD", v);
            o->have_dims = 1;
        } else if (!strcmp(k, "--key-file"))
            read_key(v, o->key, sizeof o->key);
        else if (!strcmp(k, "--stagger")) {
            if (strcmp(v, "0") && strcmp(v, "1"))
                die("--stagger %s: 0 or 1", v);
            o->stagger = v[0] == '1';
        } else if (!strcmp(k, "--decode"))
            die("--decode: this tool reads frame headers only; softcast-load.mjs decodes");
        else
            die("unknown option %s\n%s", k, k_usage);
    }
    if (!url)
        die("no --url\n%s", k_usage);
    if (parse_http_url(url, o->host, sizeof o->host, &o->port) != 0)
        die("--url %s: must be http://HOST:PORT/ (plain HTTP; the node tool speaks TLS)", url);
    if (!(o->seconds > 0 && o->seconds <= 3600))
        die("--seconds: 0 to 3600");
    if (!(o->rate > 0 && o->rate <= 1000))
        die("--rate: 0 to 1000");
}

/* ------------------------------------------------------------- HTTP, blocking */

/* One request on its own connection (Connection: close): the status, the body in *body (to
 * free). Returns -1 with *body the reason when the server cannot be reached. */
static int http_request(const opts *o, const char *method, const char *path, const char *auth,
                        const char *json, char **body)
{
    char port[16];
    snprintf(port, sizeof port, "%d", o->port);
    struct addrinfo hints = {0}, *ai = NULL;
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    int rc = getaddrinfo(o->host, port, &hints, &ai);
    if (rc != 0) {
        *body = strdup(gai_strerror(rc));
        return -1;
    }
    int fd = -1, why = 0;
    for (struct addrinfo *a = ai; a && fd < 0; a = a->ai_next) {
        fd = socket(a->ai_family, a->ai_socktype, a->ai_protocol);
        if (fd < 0 || connect(fd, a->ai_addr, a->ai_addrlen) != 0) {
            why = errno; /* before close() may change it */
            if (fd >= 0)
                close(fd);
            fd = -1;
        }
    }
    freeaddrinfo(ai);
    if (fd < 0) {
        char msg[400];
        snprintf(msg, sizeof msg, "%s:%d: %s", o->host, o->port, strerror(why));
        *body = strdup(msg);
        return -1;
    }
    struct timeval tv = {30, 0}; /* a server that never answers does not hang the tool */
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    size_t jlen = json ? strlen(json) : 0;
    char head[1024];
    int hl = snprintf(head, sizeof head,
                      "%s %s HTTP/1.1\r\nHost: %s:%d\r\nConnection: close\r\n"
                      "%s%s%s%sContent-Length: %zu\r\n\r\n",
                      method, path, o->host, o->port, auth ? "Authorization: Bearer " : "",
                      auth ? auth : "", auth ? "\r\n" : "",
                      json ? "Content-Type: application/json\r\n" : "", jlen);
    if (hl < 0 || (size_t)hl >= sizeof head || write(fd, head, (size_t)hl) != hl ||
        (jlen && write(fd, json, jlen) != (ssize_t)jlen)) {
        close(fd);
        *body = strdup("cannot send the request");
        return -1;
    }
    char *buf = malloc(HTTP_REPLY_MAX + 1);
    size_t n = 0;
    ssize_t r;
    while (buf && n < HTTP_REPLY_MAX && (r = read(fd, buf + n, HTTP_REPLY_MAX - n)) > 0)
        n += (size_t)r;
    close(fd);
    if (!buf)
        die("out of memory");
    buf[n] = 0;
    int status = 0;
    char *sep = strstr(buf, "\r\n\r\n");
    if (sscanf(buf, "HTTP/1.%*d %d", &status) != 1 || !sep) {
        free(buf);
        *body = strdup("no HTTP reply");
        return -1;
    }
    *body = strdup(sep + 4);
    free(buf);
    return status;
}

/* ws://HOST:PORT/PATH?QUERY (or wss://) into the session's connection parts. */
static int parse_ws_url(const char *url, session *s)
{
    const char *h;
    if (!strncmp(url, "ws://", 5))
        h = url + 5, s->ws_tls = 0, s->ws_port = 80;
    else if (!strncmp(url, "wss://", 6))
        h = url + 6, s->ws_tls = 1, s->ws_port = 443;
    else
        return -1;
    const char *end = h + strcspn(h, ":/?");
    if (end == h || (size_t)(end - h) >= sizeof s->ws_host)
        return -1;
    memcpy(s->ws_host, h, (size_t)(end - h));
    s->ws_host[end - h] = 0;
    if (*end == ':')
        s->ws_port = atoi(end + 1), end += 1 + strspn(end + 1, "0123456789");
    int n = snprintf(s->ws_path, sizeof s->ws_path, "%s%s", *end == '/' ? "" : "/", end);
    return n > 0 && (size_t)n < sizeof s->ws_path ? 0 : -1;
}

static void copy_str(const cJSON *j, const char *name, char *dst, size_t cap, int i)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, name);
    if (!cJSON_IsString(v) || strlen(v->valuestring) >= cap)
        die("creating session %d: the reply has no %s", i, name);
    strcpy(dst, v->valuestring);
}

static void create_session(run *R, int i)
{
    const opts *o = &R->o;
    session *s = &R->ss[i];
    char body[256];
    if (o->scene == SCENE_CLOTH)
        snprintf(body, sizeof body, "{\"scene\":\"cloth\",\"characters\":%d}", o->characters);
    else if (o->scene == SCENE_SOFTBODY)
        snprintf(body, sizeof body, "{\"scene\":\"softbody\",\"model\":\"%s\"}", o->model);
    else if (o->have_dims)
        snprintf(body, sizeof body, "{\"scene\":\"volume\",\"dims\":[%d,%d,%d]}", o->dims[0],
                 o->dims[1], o->dims[2]);
    else
        snprintf(body, sizeof body, "{\"scene\":\"volume\"}");
    char *reply = NULL;
    int status = http_request(o, "POST", "/api/sessions", o->key[0] ? o->key : NULL, body, &reply);
    if (status < 0)
        die("creating session %d: %s", i, reply ? reply : "no answer");
    if (status != 201)
        die("creating session %d: HTTP %d %s", i, status, reply ? reply : "");
    cJSON *j = cJSON_Parse(reply);
    free(reply);
    if (!j)
        die("creating session %d: the reply is not JSON", i);
    char ws_url[1024];
    copy_str(j, "id", s->id, sizeof s->id, i);
    copy_str(j, "control_token", s->control, sizeof s->control, i);
    copy_str(j, "view_token", s->view, sizeof s->view, i);
    copy_str(j, "ws_url", ws_url, sizeof ws_url, i);
    if (parse_ws_url(ws_url, s) != 0)
        die("creating session %d: ws_url %s is not ws://HOST:PORT/...", i, ws_url);
    const cJSON *dims = cJSON_GetObjectItemCaseSensitive(j, "dims");
    const cJSON *tray = cJSON_GetObjectItemCaseSensitive(j, "tray");
    for (int k = 0; k < 3; k++) {
        const cJSON *d = cJSON_GetArrayItem(dims, k), *t = cJSON_GetArrayItem(tray, k);
        s->dims[k] = cJSON_IsNumber(d) ? d->valueint : 0;
        s->tray[k] = cJSON_IsNumber(t) ? t->valuedouble : 0;
    }
    cJSON_Delete(j);
    R->made = i + 1;
    if (o->scene == SCENE_VOLUME && (s->dims[0] < 1 || s->dims[1] < 1 || s->dims[2] < 1))
        die("creating session %d: the reply has no dims", i);
}

/* ------------------------------------------------------------- what the drivers send */

static void note_sent(session *s, uint32_t seq)
{
    if (seq >= s->sent_cap) {
        size_t cap = s->sent_cap ? s->sent_cap : 1024;
        while (cap <= seq)
            cap *= 2;
        double *p = realloc(s->sent_ms, cap * sizeof *p);
        if (!p)
            die("out of memory");
        for (size_t k = s->sent_cap; k < cap; k++)
            p[k] = NAN;
        s->sent_ms = p, s->sent_cap = cap;
    }
    s->sent_ms[seq] = now_ms();
}

/* The driver's event at tick `tick`, as the node tool sends it; 0 when it sends none. With
 * --stagger the session's script starts s->start ticks late (t counts from there). */
static int driver_event(const run *R, const session *s, uint64_t tick, char *out, size_t cap)
{
    uint32_t seq = (uint32_t)tick + 1;
    if (tick < s->start)
        return 0;
    uint64_t t = tick - s->start;
    if (R->o.scene == SCENE_CLOTH) { /* walk, then circle the crowd at 6 to 20 m: LODs switch */
        double a = t / 60.0, r = 13 + 7 * sin(t / 45.0);
        if (t == 0)
            return snprintf(out, cap,
                            "{\"type\":\"motion\",\"seq\":%u,\"character\":-1,\"motion\":\"walk\"}",
                            seq);
        return snprintf(out, cap, "{\"type\":\"camera\",\"seq\":%u,\"point\":[%.6f,%.6f,1.7]}", seq,
                        r * cos(a), r * sin(a));
    }
    if (R->o.scene == SCENE_SOFTBODY) { /* grab the top, pull up and sideways, let go; tray */
        int phase = (int)(t % 90);
        double top[3] = {0, 0, 1.7 * s->tray[2]};
        if (phase == 0)
            return snprintf(out, cap, "{\"type\":\"grab\",\"seq\":%u,\"point\":[%.6f,%.6f,%.6f]}",
                            seq, top[0], top[1], top[2]);
        if (phase < 75) {
            double k = sin(3.14159265358979323846 * phase / 75.0);
            return snprintf(out, cap,
                            "{\"type\":\"move\",\"seq\":%u,\"point\":[%.6f,%.6f,%.6f],"
                            "\"space\":\"world\"}",
                            seq, top[0] + 0.02 * k, top[1], top[2] + 0.03 * k);
        }
        if (phase == 75)
            return snprintf(out, cap, "{\"type\":\"release\",\"seq\":%u}", seq);
        if (phase % 5 != 0)
            return 0;
        double a = 0.05 * sin(t / 40.0) / 2;
        return snprintf(out, cap,
                        "{\"type\":\"tray\",\"seq\":%u,\"pos\":[%.6f,0,0],"
                        "\"quat\":[%.9f,%.9f,0,0]}",
                        seq, 0.02 * sin(t / 30.0), cos(a), sin(a));
    }
    /* The volume: grab just inside the belly skin (the phantom's front is at 0.825 ny), drag
     * it in and out, release, again. */
    int phase = (int)(t % 90);
    double p[3] = {s->dims[0] / 2.0, s->dims[1] * 0.81, s->dims[2] / 2.0};
    if (phase == 0)
        return snprintf(out, cap,
                        "{\"type\":\"grab\",\"seq\":%u,\"point\":[%.6f,%.6f,%.6f],"
                        "\"radius\":2.5,\"space\":\"lattice\"}",
                        seq, p[0], p[1], p[2]);
    if (phase < 75)
        return snprintf(out, cap,
                        "{\"type\":\"move\",\"seq\":%u,\"point\":[%.6f,%.6f,%.6f],"
                        "\"space\":\"lattice\"}",
                        seq, p[0], p[1] + 4 * sin(phase / 12.0), p[2]);
    if (phase == 75)
        return snprintf(out, cap, "{\"type\":\"release\",\"seq\":%u}", seq);
    return 0;
}

static void tick(lws_sorted_usec_list_t *sul)
{
    run *R = lws_container_of(sul, run, tick_sul);
    double elapsed = now_ms() - R->t0_ms;
    if (elapsed >= R->o.seconds * 1000) {
        R->done = 1;
        lws_cancel_service(R->ctx);
        return;
    }
    for (int i = 0; i < R->o.sessions; i++) {
        session *s = &R->ss[i];
        client *d = &s->cl[0];
        if (!d->open)
            continue;
        if (d->out_n == OUT_SLOTS) { /* the socket has not taken the last 16: skip, say so */
            R->dropped_moves++;
            continue;
        }
        int slot = (d->out_head + d->out_n) % OUT_SLOTS;
        int n = driver_event(R, s, R->ticks, d->out[slot] + LWS_PRE, OUT_BYTES);
        if (n <= 0)
            continue;
        if (n >= OUT_BYTES)
            die("an event longer than %d bytes", OUT_BYTES);
        d->out_len[slot] = (size_t)n;
        d->out_n++;
        note_sent(s, (uint32_t)R->ticks + 1);
        lws_callback_on_writable(d->wsi);
    }
    R->ticks++;
    /* The next tick on the run's own clock: a late tick does not push the later ones back. */
    double next = R->t0_ms + R->ticks * R->period_ms, wait = next - now_ms();
    lws_sul_schedule(R->ctx, 0, &R->tick_sul, tick, wait > 0 ? (lws_usec_t)(wait * 1000) : 0);
}

/* ------------------------------------------------------------- what the clients receive */

static void push_latency(run *R, double ms)
{
    if (R->nlat == R->lat_cap) {
        R->lat_cap = R->lat_cap ? 2 * R->lat_cap : 4096;
        R->lat = realloc(R->lat, R->lat_cap * sizeof *R->lat);
        if (!R->lat)
            die("out of memory");
    }
    R->lat[R->nlat++] = ms;
}

static uint32_t u32le(const unsigned char *p)
{
    return p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* A whole message has arrived: an object frame (version 2, kind 5) is counted, and its echoed
 * seq gives the latency of every move it acknowledges first at this client; a text that is an
 * error is counted. */
static void on_message(run *R, client *c)
{
    session *s = c->s;
    if (!c->binary) {
        cJSON *j = c->text ? cJSON_ParseWithLength(c->text, c->text_len) : NULL;
        const cJSON *type = cJSON_GetObjectItemCaseSensitive(j, "type");
        if (cJSON_IsString(type) && !strcmp(type->valuestring, "error"))
            R->errors++;
        cJSON_Delete(j);
        return;
    }
    R->bytes += c->msg_len;
    if (c->head_len < HEADER_BYTES || c->head[4] != 2 || c->head[5] != 5) {
        R->other++;
        return;
    }
    if (!c->ready) {
        c->ready = 1;
        R->ready++;
    }
    R->frames++;
    s->frames++;
    if (u32le(c->head + 36) & 2)
        R->structural++;
    uint32_t seq = u32le(c->head + 16);
    double t = now_ms();
    for (uint32_t q = c->last_seq + 1; q <= seq && q < s->sent_cap; q++)
        if (!isnan(s->sent_ms[q]))
            push_latency(R, t - s->sent_ms[q]);
    if (seq > c->last_seq)
        c->last_seq = seq;
}

static void on_receive(run *R, client *c, struct lws *wsi, const unsigned char *in, size_t len)
{
    if (!c->in_msg) {
        c->in_msg = 1;
        c->binary = lws_frame_is_binary(wsi);
        c->msg_len = c->head_len = c->text_len = 0;
    }
    c->msg_len += len;
    if (c->binary) {
        size_t take = HEADER_BYTES - c->head_len;
        take = take < len ? take : len;
        memcpy(c->head + c->head_len, in, take);
        c->head_len += take;
    } else if (c->text_len + len <= TEXT_MAX) {
        if (!c->text && !(c->text = malloc(TEXT_MAX)))
            die("out of memory");
        memcpy(c->text + c->text_len, in, len);
        c->text_len += len;
    }
    if (lws_is_final_fragment(wsi) && lws_remaining_packet_payload(wsi) == 0) {
        c->in_msg = 0;
        on_message(R, c);
    }
}

static int on_writeable(client *c, struct lws *wsi)
{
    if (!c->out_n)
        return 0;
    int k = c->out_head;
    size_t n = c->out_len[k];
    if (lws_write(wsi, (unsigned char *)c->out[k] + LWS_PRE, n, LWS_WRITE_TEXT) < (int)n)
        return -1;
    c->out_head = (k + 1) % OUT_SLOTS;
    if (--c->out_n)
        lws_callback_on_writable(wsi);
    return 0;
}

static int callback(struct lws *wsi, enum lws_callback_reasons reason, void *user, void *in,
                    size_t len)
{
    (void)user;
    run *R = &g_run;
    client *c = lws_get_opaque_user_data(wsi);
    switch (reason) {
    case LWS_CALLBACK_CLIENT_ESTABLISHED:
        if (!c)
            return 0;
        c->open = 1;
        R->opened++;
        return 0;
    case LWS_CALLBACK_CLIENT_CONNECTION_ERROR:
        if (c && !c->gone) {
            c->gone = 1;
            if (!c->open && !R->failed++)
                snprintf(R->failure, sizeof R->failure, "%s", in ? (const char *)in : "refused");
            else if (!R->closing)
                R->errors++;
        }
        return 0;
    case LWS_CALLBACK_CLIENT_RECEIVE:
        if (c)
            on_receive(R, c, wsi, in, len);
        return 0;
    case LWS_CALLBACK_CLIENT_WRITEABLE:
        return c ? on_writeable(c, wsi) : 0;
    case LWS_CALLBACK_CLIENT_CLOSED:
        if (c && !c->gone) {
            c->gone = 1;
            if (!R->closing) /* the server hung up on a client mid-run */
                R->errors++;
        }
        return 0;
    default:
        return 0;
    }
}

static const struct lws_protocols k_protocols[] = {
    /* A big receive buffer: a frame of a few hundred kilobytes arrives in few callbacks. */
    {"softcast", callback, 0, 65536, 0, NULL, 0},
    {NULL, NULL, 0, 0, 0, NULL, 0},
};

static void connect_client(run *R, session *s, client *c, int driver)
{
    char path[1024];
    snprintf(path, sizeof path, "%s&token=%s", s->ws_path, driver ? s->control : s->view);
    char host[300];
    snprintf(host, sizeof host, "%s:%d", s->ws_host, s->ws_port);
    struct lws_client_connect_info ci;
    memset(&ci, 0, sizeof ci);
    ci.context = R->ctx;
    ci.address = s->ws_host;
    ci.port = s->ws_port;
    ci.ssl_connection = s->ws_tls ? LCCSCF_USE_SSL : 0;
    ci.path = path;
    ci.host = host;
    ci.origin = host;
    ci.protocol = k_protocols[0].name;
    ci.opaque_user_data = c;
    ci.pwsi = &c->wsi;
    c->s = s;
    c->driver = driver;
    if (!lws_client_connect_via_info(&ci) && !c->gone) {
        c->gone = 1;
        if (!R->failed++)
            snprintf(R->failure, sizeof R->failure, "cannot start the connection");
    }
}

/* ------------------------------------------------------------- the run */

/* Every client closed, then every session made deleted (once: die calls it too). */
static void delete_sessions(run *R)
{
    R->closing = 1;
    if (R->ctx)
        lws_context_destroy(R->ctx);
    R->ctx = NULL;
    int n = R->made;
    R->made = 0;
    for (int i = 0; i < n; i++) {
        char path[128], *reply = NULL;
        snprintf(path, sizeof path, "/api/sessions/%s", R->ss[i].id);
        int st = http_request(&R->o, "DELETE", path, R->ss[i].control, NULL, &reply);
        if (st < 200 || st >= 300)
            fprintf(stderr, "softcast-load: deleting session %s: %d %s\n", R->ss[i].id, st,
                    reply ? reply : "");
        free(reply);
    }
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double quantile(const double *sorted, size_t n, double q)
{
    size_t k = (size_t)floor(q * (double)n);
    return sorted[k < n ? k : n - 1];
}

static double cpu_seconds(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + ru.ru_stime.tv_sec +
           ru.ru_stime.tv_usec / 1e6;
}

/* The server's own mean step and encode times over this run's sessions (GET /metrics: each
 * session's softcast_session_step_ms_mean and _encode_ms_mean), read before they are deleted;
 * NAN when the server does not say. */
static void server_means(run *R, double *step_ms, double *encode_ms)
{
    *step_ms = *encode_ms = NAN;
    char *text = NULL;
    if (http_request(&R->o, "GET", "/metrics", NULL, NULL, &text) != 200) {
        free(text);
        return;
    }
    double sum[2] = {0, 0};
    int n[2] = {0, 0};
    static const char *const names[2] = {"softcast_session_step_ms_mean{session=\"",
                                         "softcast_session_encode_ms_mean{session=\""};
    for (int k = 0; k < 2; k++)
        for (const char *p = text; (p = strstr(p, names[k])); p++) {
            const char *id = p + strlen(names[k]), *end = strchr(id, '"');
            for (int i = 0; end && i < R->made; i++)
                if ((size_t)(end - id) == strlen(R->ss[i].id) &&
                    !strncmp(id, R->ss[i].id, (size_t)(end - id)) && end[1] == '}') {
                    sum[k] += strtod(end + 2, NULL);
                    n[k]++;
                }
        }
    free(text);
    if (n[0])
        *step_ms = sum[0] / n[0];
    if (n[1])
        *encode_ms = sum[1] / n[1];
}

static void json_ms(char *buf, size_t cap, double x)
{
    if (isnan(x))
        snprintf(buf, cap, "null");
    else
        snprintf(buf, cap, "%.3f", x);
}

static void report(run *R, double seconds, double cpu_s, double step_ms, double encode_ms)
{
    const opts *o = &R->o;
    int nclients = o->sessions * o->clients;
    double fmin = INFINITY, fmax = 0;
    for (int i = 0; i < o->sessions; i++) {
        double f = R->ss[i].frames / (double)o->clients / seconds;
        fmin = f < fmin ? f : fmin;
        fmax = f > fmax ? f : fmax;
    }
    char p50[32] = "null", p99[32] = "null", step[32], encode[32];
    if (R->nlat) {
        qsort(R->lat, R->nlat, sizeof *R->lat, cmp_double);
        snprintf(p50, sizeof p50, "%.2f", quantile(R->lat, R->nlat, 0.5));
        snprintf(p99, sizeof p99, "%.2f", quantile(R->lat, R->nlat, 0.99));
    }
    json_ms(step, sizeof step, step_ms);
    json_ms(encode, sizeof encode, encode_ms);
    printf("{\"sessions\":%d,\"clients\":%d,\"seconds\":%.2f,\"frames\":%llu,"
           "\"structural_frames\":%llu,\"other_frames\":%llu,\"bytes\":%llu,"
           "\"fps_per_client\":%.2f,\"fps_session_min\":%.2f,\"fps_session_max\":%.2f,"
           "\"kbytes_per_s\":%.1f,\"latency_ms_p50\":%s,\"latency_ms_p99\":%s,"
           "\"latency_samples\":%zu,\"errors\":%llu,\"moves_not_sent\":%llu,"
           "\"cpu_percent\":%.1f,\"stagger\":%d,\"server_step_ms\":%s,\"server_encode_ms\":%s,"
           "\"tool\":\"c\"}\n",
           o->sessions, nclients, seconds, (unsigned long long)R->frames,
           (unsigned long long)R->structural, (unsigned long long)R->other,
           (unsigned long long)R->bytes, R->frames / (double)nclients / seconds, fmin, fmax,
           R->bytes / 1024.0 / seconds, p50, p99, R->nlat, (unsigned long long)R->errors,
           (unsigned long long)R->dropped_moves, 100.0 * cpu_s / seconds, o->stagger, step, encode);
}

int main(int argc, char **argv)
{
    run *R = &g_run;
    parse_opts(argc, argv, &R->o);
    const opts *o = &R->o;
    R->ss = calloc((size_t)o->sessions, sizeof *R->ss);
    if (!R->ss)
        die("out of memory");
    for (int i = 0; i < o->sessions; i++) {
        create_session(R, i);
        /* A cycle: the volume's and the soft body's 90 ticks (the cloth has none). */
        R->ss[i].start = o->stagger ? (uint64_t)(90 * i / o->sessions) : 0;
        R->ss[i].cl = calloc((size_t)o->clients, sizeof(client));
        if (!R->ss[i].cl)
            die("out of memory");
    }
    lws_set_log_level(getenv("SOFTCAST_LWS_DEBUG") ? LLL_ERR | LLL_WARN | LLL_NOTICE : 0, NULL);
    struct lws_context_creation_info info;
    memset(&info, 0, sizeof info);
    info.port = CONTEXT_PORT_NO_LISTEN;
    info.protocols = k_protocols;
    info.options = LWS_SERVER_OPTION_DO_SSL_GLOBAL_INIT;
    info.fd_limit_per_thread = (unsigned)(o->sessions * o->clients + 64);
    R->ctx = lws_create_context(&info);
    if (!R->ctx)
        die("cannot start libwebsockets");
    /* Connect everyone, wait for every client's first frame (a join's snapshot is not what
     * this tool measures), then drive. */
    int total = o->sessions * o->clients;
    for (int i = 0; i < o->sessions; i++)
        for (int c = 0; c < o->clients; c++)
            connect_client(R, &R->ss[i], &R->ss[i].cl[c], c == 0);
    double deadline = now_ms() + CONNECT_SECONDS * 1000.0;
    while (R->ready < total && !R->failed && now_ms() < deadline)
        lws_service(R->ctx, 0);
    if (R->failed || R->ready < total)
        die("connecting: %d of %d clients open, %d with a first frame%s%s", R->opened, total,
            R->ready, R->failed ? ": " : "", R->failed ? R->failure : " after 30 s");
    R->frames = R->structural = R->other = R->bytes = 0; /* the run's own, from here */
    for (int i = 0; i < o->sessions; i++)
        R->ss[i].frames = 0;
    double cpu0 = cpu_seconds();
    R->t0_ms = now_ms();
    R->period_ms = 1000.0 / o->rate;
    lws_sul_schedule(R->ctx, 0, &R->tick_sul, tick, 0);
    while (!R->done)
        lws_service(R->ctx, 0);
    double seconds = (now_ms() - R->t0_ms) / 1000.0, cpu_s = cpu_seconds() - cpu0;
    double step_ms, encode_ms;
    server_means(R, &step_ms, &encode_ms);
    delete_sessions(R);
    report(R, seconds, cpu_s, step_ms, encode_ms);
    return 0;
}
