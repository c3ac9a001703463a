/* fuzz_ws.c: the WebSocket message handler end to end, without a socket. server/ws.c is
 * compiled in whole with the few libwebsockets calls it makes stubbed below, on a real
 * session table with one volume session (server/session.c, the scenes): each input is one
 * client connecting with the control token, the view token or a wrong one (its first byte
 * says which), then its messages (the rest, split at NUL bytes), each received as a text
 * frame and followed by the writes the handler asks for, then its leaving. Promises: no
 * crash, leak or read out of bounds; everything written as text is one JSON object with a
 * "type", in valid UTF-8, whatever the client sent; the session's inbox and mailbox stay
 * within their bounds. (zstd's tests/fuzz: the real code, its I/O replaced.) */
#define _GNU_SOURCE
#include "server/ws.c"

#include "tests/fuzz/fuzz_check.h"
#include "tests/fuzz/fuzz_uploads.h"
#include "tests/fuzz/fuzz_targets.h"

/* ------------------------------------------------------------ stubbed lws */

static ws_ctx *g_w;
static struct lws_context *g_ctx = (struct lws_context *)&g_w; /* any non-NULL address */
static struct lws *g_wsi = (struct lws *)&g_ctx;
static int g_writable, g_binary;
static char g_session[64], g_token[64];

FUZZ_JUDGE int lws_write(struct lws *wsi, unsigned char *buf, size_t len,
                         enum lws_write_protocol wp)
{
    (void)wsi;
    /* what a browser would read: never broken */
    if ((wp & 0xf) == LWS_WRITE_TEXT && !fuzz_json_text(buf, len, "type"))
        abort();
    return (int)len;
}
int lws_callback_on_writable(struct lws *wsi)
{
    (void)wsi;
    g_writable++;
    return 0;
}
void lws_close_reason(struct lws *wsi, enum lws_close_status status, unsigned char *buf, size_t len)
{
    (void)wsi, (void)status, (void)buf, (void)len;
}
void lws_set_timeout(struct lws *wsi, enum pending_timeout reason, int secs)
{
    (void)wsi, (void)reason, (void)secs;
}
struct lws_context *lws_get_context(const struct lws *wsi)
{
    (void)wsi;
    return g_ctx;
}
void *lws_context_user(struct lws_context *context)
{
    (void)context;
    return g_w;
}
void lws_cancel_service(struct lws_context *context)
{
    (void)context;
}
int lws_frame_is_binary(struct lws *wsi)
{
    (void)wsi;
    return g_binary;
}
int lws_is_final_fragment(struct lws *wsi)
{
    (void)wsi;
    return 1;
}
size_t lws_remaining_packet_payload(struct lws *wsi)
{
    (void)wsi;
    return 0;
}
const char *lws_get_urlarg_by_name(struct lws *wsi, const char *name, char *buf, int len)
{
    (void)wsi;
    const char *v = !strcmp(name, "session=") ? g_session : !strcmp(name, "token=") ? g_token : "";
    snprintf(buf, (size_t)len, "%s%s", name, v); /* as lws does: the whole "name=value" */
    return buf + strlen(name);
}
const char *lws_get_peer_simple(struct lws *wsi, char *name, size_t namelen)
{
    (void)wsi;
    snprintf(name, namelen, "127.0.0.1");
    return name;
}
int lws_hdr_copy(struct lws *wsi, char *dest, int len, enum lws_token_indexes h)
{
    (void)wsi;
    (void)h;
    if (len > 0)
        dest[0] = 0;
    return 0;
}
/* Start and stop only (never called here). */
struct lws_context *lws_create_context(const struct lws_context_creation_info *info)
{
    (void)info;
    return NULL;
}
void lws_context_destroy(struct lws_context *context)
{
    (void)context;
}
int lws_service(struct lws_context *context, int timeout_ms)
{
    (void)context, (void)timeout_ms;
    return 0;
}
struct lws_vhost *lws_get_vhost_by_name(struct lws_context *context, const char *name)
{
    (void)context, (void)name;
    return NULL;
}
int lws_get_vhost_listen_port(struct lws_vhost *vhost)
{
    (void)vhost;
    return 0;
}
void lws_set_log_level(int level, void (*func)(int level, const char *line))
{
    (void)level, (void)func;
}

/* ------------------------------------------------------------- the server */

static srv g_s;
static srv_session *g_ss;

static void no_event(srv *s, uint32_t slot)
{
    (void)s, (void)slot;
}

/* One server, one small volume session, the WebSocket side's tables: made once. */
static int setup(void)
{
    if (g_ss)
        return 0;
    char err[512];
    g_s.cfg = srv_default_config();
    g_s.cfg.max_sessions = 2;
    g_s.cfg.memory_budget_mib = 0;
    g_s.cfg.max_clients_per_session = 8;
    g_s.on_event = no_event;
    g_s.on_news = no_event;
    if (sim_backend_create(&g_s.backend, SIM_BACKEND_CPU, 1, err, sizeof err) != SIM_OK ||
        srv_scene_volume.option("dims", "12x12x8", err, sizeof err) != 1 ||
        srv_scene_volume.start(g_s.backend, err, sizeof err) != 0 || srv_sessions_init(&g_s) != 0)
        return -1;
    int status;
    g_ss = srv_session_create(&g_s, &srv_scene_volume, NULL, "", err, sizeof err, &status);
    g_w = calloc(1, sizeof *g_w);
    if (!g_ss || !g_w)
        return -1;
    pthread_mutex_init(&g_w->news_lock, NULL);
    g_w->s = &g_s;
    g_w->rooms = calloc(2, sizeof *g_w->rooms);
    g_w->news = calloc(2, sizeof *g_w->news);
    g_w->taking = calloc(2, sizeof *g_w->taking);
    g_w->queued = calloc(2, 1);
    g_s.ws = g_w;
    return g_w->rooms && g_w->news && g_w->taking && g_w->queued ? make_schemas(g_w) : -1;
}

/* Whatever the client left for the worker goes, as the worker would take it (unapplied:
 * the handler is what is fuzzed), and the bounds hold. */
static void drain(void)
{
    static _Alignas(8) unsigned char batch[SRV_INBOX_BYTES + SRV_QUERIES_PER_FRAME * 128];
    int n;
    pthread_mutex_lock(&g_ss->lock);
    if (g_ss->inbox.used > SRV_INBOX_BYTES || g_ss->nquery > g_ss->query_cap ||
        g_ss->nmail > SRV_MAILBOX)
        abort();
    srv_inbox_take(&g_ss->inbox, 0, batch, &n);
    while (srv_session_take_queries(g_ss, batch, SRV_QUERIES_PER_FRAME) > 0)
        ;
    g_ss->paused = 0;
    pthread_mutex_unlock(&g_ss->lock);
}

/* The writes the handler asked for, as lws would call them (bounded). */
static void flush(srv_client *c)
{
    for (int k = 0; k < 64 && g_writable > 0; k++) {
        g_writable = 0;
        if (callback(g_wsi, LWS_CALLBACK_SERVER_WRITEABLE, c, NULL, 0) != 0)
            break;
    }
    g_writable = 0;
}

int fuzz_ws_one(const uint8_t *data, size_t size)
{
    if (setup() != 0)
        abort();
    if (size < 1)
        return 0;
    snprintf(g_session, sizeof g_session, "%s", (data[0] & 4) ? "s0-1-00000000" : g_ss->id);
    snprintf(g_token, sizeof g_token, "%s",
             (data[0] & 3) == 0   ? g_ss->control_token
             : (data[0] & 3) == 1 ? g_ss->view_token
                                  : "nope");
    g_binary = (data[0] & 8) != 0;
    srv_client c;
    callback(g_wsi, LWS_CALLBACK_FILTER_PROTOCOL_CONNECTION, &c, NULL, 0);
    callback(g_wsi, LWS_CALLBACK_ESTABLISHED, &c, NULL, 0);
    flush(&c);
    const uint8_t *p = data + 1, *end = data + size;
    while (p < end) {
        const uint8_t *nul = memchr(p, 0, (size_t)(end - p));
        size_t n = nul ? (size_t)(nul - p) : (size_t)(end - p);
        callback(g_wsi, LWS_CALLBACK_RECEIVE, &c, (void *)(uintptr_t)p, n);
        flush(&c);
        p += n + (nul != NULL);
    }
    drain();
    callback(g_wsi, LWS_CALLBACK_EVENT_WAIT_CANCELLED, &c, NULL, 0);
    flush(&c);
    callback(g_wsi, LWS_CALLBACK_CLOSED, &c, NULL, 0);
    return 0;
}

#ifdef FUZZ_MAIN
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    return fuzz_ws_one(data, size);
}
#endif
