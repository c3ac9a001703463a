/* fuzz_http.c: the HTTP request handler end to end, without a socket. server/http.c is
 * compiled in whole with the libmicrohttpd calls it makes stubbed below, on a real session
 * table (server/session.c, the scenes, durability and recordings): each input is one request
 * (its first byte: whether the operator key goes with it, and how the body is cut into the
 * chunks MHD hands over), then "METHOD URL\n", header lines "Name: value\n", an empty line,
 * and the body. The handler is called as MHD calls it: once with the headers, once per
 * chunk, then until it answers (a suspended build is resumed, the handler called again),
 * then the completion callback. Promises: no crash, leak or read out of bounds; at most one
 * answer, with a real status; a JSON answer is one valid JSON value in valid UTF-8 (an
 * error one an object naming "error"); every reference a request took is given back (after
 * each input every session is deleted and the table must empty). Uploads (POST /api/volumes)
 * stop at upload.c's door (stubbed: it has its own tests); sessions are built inline. */
#define _GNU_SOURCE
#include "server/http.c"

#include "tests/fuzz/fuzz_check.h"
#include "tests/fuzz/fuzz_uploads.h"

/* ------------------------------------------------------------ stubbed MHD */

struct MHD_Response {
    size_t len;
    char *body;
    char type[64];
};

#define FUZZ_HEADERS 16
static struct {
    const char *name[FUZZ_HEADERS], *value[FUZZ_HEADERS];
    int nheaders;
    char args[8][2][128];
    int nargs;
    int answers, suspended, resumed;
} g_rq;
static struct MHD_Connection *const g_conn = (struct MHD_Connection *)&g_rq;

const char *MHD_lookup_connection_value(struct MHD_Connection *c, enum MHD_ValueKind kind,
                                        const char *key)
{
    (void)c;
    if (kind == MHD_HEADER_KIND)
        for (int i = 0; i < g_rq.nheaders; i++)
            if (!strcasecmp(g_rq.name[i], key))
                return g_rq.value[i];
    if (kind == MHD_GET_ARGUMENT_KIND)
        for (int i = 0; i < g_rq.nargs; i++)
            if (!strcmp(g_rq.args[i][0], key))
                return g_rq.args[i][1];
    return NULL;
}

const union MHD_ConnectionInfo *MHD_get_connection_info(struct MHD_Connection *c,
                                                        enum MHD_ConnectionInfoType type, ...)
{
    static struct sockaddr_in sin;
    static union MHD_ConnectionInfo ci;
    (void)c, (void)type;
    sin.sin_family = AF_INET;
    sin.sin_addr.s_addr = htonl(0x7f000001);
    ci.client_addr = (struct sockaddr *)&sin;
    return &ci;
}

struct MHD_Response *MHD_create_response_from_buffer(size_t size, void *buffer,
                                                     enum MHD_ResponseMemoryMode mode)
{
    struct MHD_Response *r = calloc(1, sizeof *r);
    r->body = malloc(size + 1);
    memcpy(r->body, buffer, size);
    r->len = size;
    if (mode == MHD_RESPMEM_MUST_FREE)
        free(buffer);
    return r;
}

struct MHD_Response *MHD_create_response_from_fd(uint64_t size, int fd)
{
    (void)size;
    close(fd);
    return calloc(1, sizeof(struct MHD_Response));
}

enum MHD_Result MHD_add_response_header(struct MHD_Response *r, const char *header,
                                        const char *content)
{
    if (!strcasecmp(header, MHD_HTTP_HEADER_CONTENT_TYPE))
        snprintf(r->type, sizeof r->type, "%s", content);
    return MHD_YES;
}

/* What a browser or a script would read: never broken. */
FUZZ_JUDGE enum MHD_Result MHD_queue_response(struct MHD_Connection *c, unsigned int status,
                                              struct MHD_Response *r)
{
    (void)c;
    if (++g_rq.answers > 1 || status < 100 || status > 599)
        abort();
    if (!strncmp(r->type, "application/json", 16) && r->len) {
        if (!fuzz_json_text((const unsigned char *)r->body, r->len, status >= 400 ? "error" : NULL))
            abort();
    }
    return MHD_YES;
}

void MHD_destroy_response(struct MHD_Response *r)
{
    free(r->body);
    free(r);
}

void MHD_suspend_connection(struct MHD_Connection *c)
{
    (void)c;
    g_rq.suspended = 1;
}

void MHD_resume_connection(struct MHD_Connection *c)
{
    (void)c;
    g_rq.resumed = 1;
}

/* Start and stop only (never called here). */
struct MHD_Daemon *MHD_start_daemon(unsigned int flags, uint16_t port, MHD_AcceptPolicyCallback apc,
                                    void *apc_cls, MHD_AccessHandlerCallback dh, void *dh_cls, ...)
{
    (void)flags, (void)port, (void)apc, (void)apc_cls, (void)dh, (void)dh_cls;
    return NULL;
}
void MHD_stop_daemon(struct MHD_Daemon *d)
{
    (void)d;
}

/* ----------------------------------------------------- builds and uploads */

int srv_build_submit(srv *s, void (*run)(void *arg), void *arg)
{
    (void)s;
    run(arg); /* inline: the build is done before the handler suspends */
    return 0;
}

srv_upload *srv_upload_begin(srv *s, const char *name, const char *content_type,
                             const char *content_length, const char *owner, int *status, char *err,
                             size_t err_sz)
{
    (void)s, (void)name, (void)content_type, (void)content_length, (void)owner;
    *status = 415;
    snprintf(err, err_sz, "uploads are not fuzzed here");
    return NULL;
}
int srv_upload_write(srv_upload *u, const void *data, size_t n, char *err, size_t err_sz)
{
    (void)u, (void)data, (void)n, (void)err, (void)err_sz;
    return 0;
}
srv_session *srv_upload_finish(srv_upload *u, int *status, char *err, size_t err_sz)
{
    (void)u;
    *status = 500;
    snprintf(err, err_sz, "no upload");
    return NULL;
}
void srv_upload_abort(srv_upload *u)
{
    (void)u;
}
/* Bodies arriving: one place, taken and given back as upload.c does (its test is upload's). */
static int g_arriving;
int srv_arrival_take(srv *s, const char *owner, int *status, char *err, size_t err_sz)
{
    (void)s, (void)owner;
    if (g_arriving) {
        *status = 503;
        snprintf(err, err_sz, "one body arrives at a time here");
        return -1;
    }
    g_arriving = 1;
    return 0;
}
void srv_arrival_end(srv *s, int slot, int keep_place)
{
    (void)s, (void)keep_place;
    if (slot >= 0)
        g_arriving = 0;
}
int srv_arrival_too_slow(double began_ms, long long bytes, char *err, size_t err_sz)
{
    (void)began_ms, (void)bytes, (void)err, (void)err_sz;
    return 0;
}
void srv_uploads_counts(srv *s, int *in_flight, int *arriving)
{
    (void)s;
    *in_flight = *arriving = g_arriving;
}
cJSON *srv_volumes_list(srv *s)
{
    (void)s;
    return cJSON_CreateObject();
}
srv_session *srv_volume_session(srv *s, const char *name, const char *owner, int *status, char *err,
                                size_t err_sz)
{
    (void)s, (void)name, (void)owner;
    *status = 404;
    snprintf(err, err_sz, "no --volume-dir");
    return NULL;
}

/* ------------------------------------------------------------- the server */

static srv g_s;
static int make_fixed(void);

static void no_event(srv *s, uint32_t slot)
{
    (void)s, (void)slot;
}

static int setup(void)
{
    static int done;
    if (done)
        return 0;
    char err[512];
    g_s.cfg = srv_default_config();
    g_s.cfg.max_sessions = 4;
    g_s.cfg.max_sessions_per_address = 3;
    g_s.cfg.memory_budget_mib = 0;
    snprintf(g_s.cfg.api_key, sizeof g_s.cfg.api_key, "the-operator-key-0123");
    g_s.on_event = no_event;
    g_s.on_news = no_event;
    if (sim_backend_create(&g_s.backend, SIM_BACKEND_CPU, 1, err, sizeof err) != SIM_OK ||
        srv_scene_volume.option("dims", "10x10x8", err, sizeof err) != 1 ||
        srv_scene_volume.option("max-elements", "4096", err, sizeof err) != 1 ||
        srv_scene_volume.start(g_s.backend, err, sizeof err) != 0 || srv_sessions_init(&g_s) != 0) {
        fprintf(stderr, "fuzz_http: %s\n", err);
        return -1;
    }
    done = 1;
    return make_fixed();
}

/* A session every input may name: its id and tokens are fixed (the corpus uses them). */
#define FIXED_ID      "s0-1-fuzzfuzz"
#define FIXED_CONTROL "cccccccccccccccccccccccccccccccc"
#define FIXED_VIEW    "vvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvv"
static int make_fixed(void)
{
    char err[256];
    void *data = NULL;
    if (srv_scene_volume.create(g_s.backend, NULL, &data, err, sizeof err) != 201)
        return -1;
    srv_session_saved sv = {&srv_scene_volume, FIXED_ID, FIXED_CONTROL, FIXED_VIEW, "", 1, 0, 0, 0};
    return srv_session_adopt(&g_s, &sv, data, err, sizeof err) ? 0 : -1;
}

/* Every session but the fixed one deleted and freed, and the fixed one held by nobody: a
 * reference a request kept would show here. */
static void empty_table(void)
{
    for (int i = 0; i < g_s.cfg.max_sessions; i++) {
        srv_session *ss = g_s.slots[i];
        if (ss && strcmp(ss->id, FIXED_ID) != 0) {
            ss->failed_ms = -1e12; /* a failed build is kept a while: it goes now */
            ss->closing = 1;
        }
    }
    srv_sessions_reap(&g_s);
    int fixed = g_s.slots[0] && !strcmp(g_s.slots[0]->id, FIXED_ID);
    if (g_s.nsessions != fixed || g_s.refs[0] != 0)
        abort();
    if (!fixed && make_fixed() != 0) /* deleted by the input: back for the next */
        abort();
}

/* "METHOD URL\n" then headers to an empty line: into g_rq (pointers into line, which the
 * parse cuts with NULs). Returns the body's start. */
static char *parse_head(char *text, char **method, char **url)
{
    char *nl = strchr(text, '\n');
    if (!nl)
        return NULL;
    *nl = 0;
    *method = text;
    char *sp = strchr(text, ' ');
    if (!sp)
        return NULL;
    *sp = 0;
    *url = sp + 1;
    char *q = strchr(*url, '?');
    for (char *a = q ? q + 1 : NULL; a && *a && g_rq.nargs < 8;) {
        char *amp = strchr(a, '&'), *eq = strchr(a, '=');
        if (amp)
            *amp = 0;
        snprintf(g_rq.args[g_rq.nargs][0], 128, "%.*s", eq ? (int)(eq - a) : (int)strlen(a), a);
        snprintf(g_rq.args[g_rq.nargs][1], 128, "%s", eq ? eq + 1 : "");
        g_rq.nargs++;
        a = amp ? amp + 1 : NULL;
    }
    if (q)
        *q = 0;
    char *line = nl + 1;
    while (line && *line && *line != '\n' && g_rq.nheaders < FUZZ_HEADERS) {
        char *end = strchr(line, '\n'), *colon = strchr(line, ':');
        if (end)
            *end = 0;
        if (colon) {
            *colon = 0;
            g_rq.name[g_rq.nheaders] = line;
            g_rq.value[g_rq.nheaders++] = colon + 1 + (colon[1] == ' ');
        }
        line = end ? end + 1 : NULL;
    }
    return line && *line == '\n' ? line + 1 : line;
}

int fuzz_http_one(const uint8_t *data, size_t size)
{
    if (setup() != 0)
        abort();
    if (size < 2)
        return 0;
    memset(&g_rq, 0, sizeof g_rq);
    char *text = malloc(size), *method, *url;
    memcpy(text, data + 1, size - 1);
    text[size - 1] = 0;
    size_t body_n = 0;
    char *body = parse_head(text, &method, &url);
    if (body) /* the body may hold NULs: it is the rest of the input */
        body_n = size - 1 - (size_t)(body - text);
    if (body && (data[0] & 1) && g_rq.nheaders < FUZZ_HEADERS) {
        g_rq.name[g_rq.nheaders] = "Authorization";
        g_rq.value[g_rq.nheaders++] = "Bearer the-operator-key-0123";
    }
    void *con_cls = NULL;
    size_t zero = 0;
    if (body && handler(&g_s, g_conn, url, method, "HTTP/1.1", NULL, &zero, &con_cls) == MHD_YES) {
        size_t chunk = 1 + (size_t)(data[0] >> 1) * 37, at = 0;
        enum MHD_Result rc = MHD_YES;
        while (rc == MHD_YES && at < body_n) {
            size_t n = body_n - at < chunk ? body_n - at : chunk, left = n;
            rc = handler(&g_s, g_conn, url, method, "HTTP/1.1", body + at, &left, &con_cls);
            at += n - left;
            if (left == n) /* nothing taken: MHD would not call again with the same bytes */
                break;
        }
        for (int k = 0; rc == MHD_YES && k < 4 && !g_rq.answers; k++) {
            zero = 0;
            g_rq.suspended = 0;
            rc = handler(&g_s, g_conn, url, method, "HTTP/1.1", NULL, &zero, &con_cls);
        }
    }
    completed(&g_s, g_conn, &con_cls, MHD_REQUEST_TERMINATED_COMPLETED_OK);
    free(text);
    empty_table();
    return 0;
}

#ifdef FUZZ_MAIN
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    return fuzz_http_one(data, size);
}
#endif
