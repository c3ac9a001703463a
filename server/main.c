/* main.c: softcast-server. Parses flags (and an optional JSON config; a scene's own options
 * go to that scene), starts the scenes (the volume loads its default volume), wires the
 * notifications between the threads, starts WebSocket, the simulation workers and HTTP,
 * prints one JSON line {"event":"listening",...} and runs until SIGINT or SIGTERM, then
 * shuts down cleanly: clients get a close frame, sessions are freed, exit 0. */
#include <cjson/cJSON.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "reader.h"
#include "scene.h"

static const char k_usage[] =
    "usage: softcast-server [options]\n"
    "  --http-port N                 HTTP port (0: pick a free one; default 8080)\n"
    "  --ws-port N                   WebSocket port (0: pick a free one; default 8081)\n"
    "  --bind ADDR                   listen address (default 127.0.0.1)\n"
    "  --backend auto|cpu|cuda       simulation backend (default auto)\n"
    "  --threads N                   CPU threads per simulation step (default: the cores\n"
    "                                shared among the sessions stepping at that moment)\n"
    "  --workers N                   simulation worker threads (default: one per core);\n"
    "                                the express worker (below) is one thread more\n"
    "  --step-batch N                sessions of a scene a worker steps together, 1 to 64\n"
    "                                (default: 64 on CUDA, one batch of launches for all;\n"
    "                                1 on the CPU, where the workers share the sessions)\n"
    "  --express-worker 0|1          1: while every worker is busy with a heavy session (one\n"
    "                                whose frames take more than its share of the workers),\n"
    "                                one more thread steps the due sessions whose frames are\n"
    "                                short, so they do not wait for the heavy steps to end.\n"
    "                                Default: 1 on the CPU, 0 where the workers batch (CUDA)\n"
    "  --max-sessions N              sessions per server (default 64)\n"
    "  --max-clients-per-session N   (default 256)\n"
    "  --max-message-bytes N         largest client message (default 65536)\n"
    "  --max-events-per-s N          per connection, and the control token's connections\n"
    "                                together (default 240)\n"
    "  --max-view-events-per-s N     the view token's connections together (default 2400:\n"
    "                                a classroom's pings and slices)\n"
    "  --rate HZ                     frames per second per session (default 60)\n"
    "  --keyframe-every N            most frames between an object's keys while it moves\n"
    "                                (default 3600; 0: only when its delta outgrows a key)\n"
    "  --view-budget KIB             frames per client a scene aims at, KiB/s (default\n"
    "                                250; 0: none): the crowd updates far capes less often\n"
    "  --data-dir DIR                web client files (default web-client if present)\n"
    "  --public-host NAME            host name written into session URLs\n";
/* (two strings: C99 promises 4095 characters in one) */
static const char k_usage_more[] =
    "  --public-url URL              behind a router: http[s]://HOST[:PORT] that clients\n"
    "                                reach; links use it, WebSockets its /ws/ path\n"
    "  --process-name NAME           name this process in its session ids (a pod name), so\n"
    "                                a router can send a session's traffic to it\n"
    "  --peers NAME,NAME             the cluster's process names (GET /api/cluster; the\n"
    "                                lobby lists every process's sessions)\n"
    "  --trusted-proxy ADDR[/BITS],.. X-Forwarded-For from these is the client's address\n"
    "                                (the per-address limits count clients, not the router)\n"
    "  --default-session             create a session at start and print its links\n"
    "  --upload-limit BYTES          largest volume upload (default 209715200: a 512x512x300\n"
    "                                int16 series, 150 MiB, uncompressed, with room to spare)\n"
    "  --volume-dir DIR              keep uploads here, and list its volumes in the lobby\n"
    "                                (default: none; an upload is kept while its session\n"
    "                                lives, then removed)\n"
    "  --max-sessions-per-address N  live sessions one client address may make (default 8)\n"
    "  --idle-expiry S               close a session nobody has joined for S seconds\n"
    "                                (default 900; 0: never; not the --default-session)\n"
    "  --max-http-per-address N      HTTP connections open at once from one address\n"
    "                                (default 64)\n"
    "  --max-http-connections N      HTTP connections open at once in all (default 1000)\n"
    "  --http-timeout S              close an HTTP connection idle for S seconds (default 10)\n"
    "  --max-ws-per-address N        viewers' WebSocket connections from one address\n"
    "                                (default 512; the control token is never refused for it)\n"
    "  --memory-budget MIB           what all sessions' scenes may hold (default: half the\n"
    "                                machine's memory; 0: no budget)\n"
    "  --api-key-file FILE           making sessions and uploads needs Authorization: Bearer\n"
    "                                KEY, KEY this file's first line (16 to 127 characters)\n"
    "  --state-dir DIR               keep sessions here: they come back after a restart with\n"
    "                                their ids, tokens and state (a replay at its first\n"
    "                                frame) (default: none)\n"
    "  --snapshot-interval S         save a moving session's state every S seconds (default\n"
    "                                60; its events since are in its log)\n"
    "  --fsync-interval MS           flush the event logs to disk every MS ms (default 1000;\n"
    "                                0: at every frame that applies events)\n"
    "  --config FILE                 JSON object with any of these, without dashes\n";

/* An option the server does not know: one of a scene's, or an error. */
static int scene_option(const char *name, const char *val, char *err, size_t err_sz)
{
    int n;
    const srv_scene_i *const *sc = srv_scenes(&n);
    for (int k = 0; k < n; k++) {
        int r = sc[k]->option ? sc[k]->option(name, val, err, err_sz) : 0;
        if (r)
            return r < 0 ? -1 : 0;
    }
    snprintf(err, err_sz, "unknown option --%s (see --help)", name);
    return -1;
}

static void usage(void)
{
    int n;
    const srv_scene_i *const *sc = srv_scenes(&n);
    fputs(k_usage, stdout);
    fputs(k_usage_more, stdout);
    for (int k = 0; k < n; k++)
        fputs(sc[k]->usage, stdout);
}

/* Whether --name is an option --help lists (the server's or a scene's): an option given last,
 * without a value, is then told it needs one, and any other is unknown. */
static int known_option(const char *name)
{
    char key[80];
    snprintf(key, sizeof key, "  --%s ", name);
    int n;
    const srv_scene_i *const *sc = srv_scenes(&n);
    int known = strstr(k_usage, key) || strstr(k_usage_more, key);
    for (int k = 0; k < n && !known; k++)
        known = sc[k]->usage && strstr(sc[k]->usage, key);
    return known;
}

/* The operator's key: the file's first line, white space at its ends dropped; a short one
 * is refused (guessable). */
static int read_api_key(srv_config *c, const char *path, char *err, size_t err_sz)
{
    FILE *f = fopen(path, "r");
    char line[256] = "";
    if (!f || !fgets(line, sizeof line, f)) {
        if (f)
            fclose(f);
        snprintf(err, err_sz, "--api-key-file %s: cannot read it", path);
        return -1;
    }
    fclose(f);
    char *k = line, *e;
    while (*k == ' ' || *k == '\t')
        k++;
    for (e = k + strlen(k); e > k && strchr(" \t\r\n", e[-1]); e--)
        ;
    *e = 0;
    if (strlen(k) < 16 || strlen(k) >= sizeof c->api_key) {
        snprintf(err, err_sz, "--api-key-file %s: the key must be 16 to %zu characters", path,
                 sizeof c->api_key - 1);
        return -1;
    }
    strcpy(c->api_key, k);
    return 0;
}

/* The options whose value is kept as text: where, and how much room. */
typedef struct {
    const char *name;
    char *field;
    size_t size;
} string_opt;

static int string_option(srv_config *c, const char *name, string_opt *out)
{
#define S(key, f)              \
    {                          \
        key, c->f, sizeof c->f \
    }
    const string_opt opts[] = {
        S("bind", bind),
        S("data-dir", data_dir),
        S("public-host", public_host),
        S("volume-dir", volume_dir),
        S("state-dir", state_dir),
        S("public-url", public_url),
        S("process-name", process_name),
        S("peers", peers),
        S("trusted-proxy", trusted_proxies),
    };
#undef S
    for (size_t k = 0; k < sizeof opts / sizeof opts[0]; k++)
        if (!strcmp(name, opts[k].name)) {
            *out = opts[k];
            return 1;
        }
    return 0;
}

/* A DNS label (what a pod name is): 1 to 63 of a-z, 0-9 and '-', not starting or ending
 * with '-'. */
static int is_dns_label(const char *v, size_t n)
{
    if (n == 0 || n > 63 || v[0] == '-' || v[n - 1] == '-')
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!((v[i] >= 'a' && v[i] <= 'z') || (v[i] >= '0' && v[i] <= '9') || v[i] == '-'))
            return 0;
    return 1;
}

/* What the cluster options must look like, checked where they are given. */
static int check_cluster_option(const char *name, const char *val, char *err, size_t err_sz)
{
    if (!strcmp(name, "process-name") && !is_dns_label(val, strlen(val))) {
        snprintf(err, err_sz, "--process-name %s: a DNS label (a-z, 0-9, '-'; 63 at most)", val);
        return -1;
    }
    if (!strcmp(name, "peers"))
        for (const char *p = val;; p++) {
            const char *e = strchr(p, ',');
            size_t n = e ? (size_t)(e - p) : strlen(p);
            if (!is_dns_label(p, n)) {
                snprintf(err, err_sz, "--peers %s: process names (DNS labels) split by commas",
                         val);
                return -1;
            }
            if (!e)
                break;
            p = e;
        }
    if (!strcmp(name, "public-url")) {
        const char *h = !strncmp(val, "https://", 8)  ? val + 8
                        : !strncmp(val, "http://", 7) ? val + 7
                                                      : NULL;
        if (!h || !*h || strpbrk(h, "/?#@ \"\\")) {
            snprintf(err, err_sz, "--public-url %s: http://HOST[:PORT] or https://HOST[:PORT]",
                     val);
            return -1;
        }
    }
    if (!strcmp(name, "trusted-proxy") && srv_trusted_proxy_check(val, err, err_sz) != 0)
        return -1;
    return 0;
}

static int set_string_option(const string_opt *o, const char *val, char *err, size_t err_sz)
{
    if (strlen(val) >= o->size) {
        snprintf(err, err_sz, "--%s: longer than %zu characters", o->name, o->size - 1);
        return -1;
    }
    if (check_cluster_option(o->name, val, err, err_sz) != 0)
        return -1;
    strcpy(o->field, val);
    return 0;
}

/* One option by name (without dashes) and value; shared by flags and the config file. */
static int set_option(srv_config *c, const char *name, const char *val, char *err, size_t err_sz)
{
    string_opt so;
    char *end = NULL;
    long long n = val ? strtoll(val, &end, 10) : 0;
    int is_int = val && *val && end && *end == 0;
#define INT_OPT(key, field, lo, hi)                                                   \
    if (!strcmp(name, key)) {                                                         \
        if (!is_int || n < (lo) || n > (hi)) {                                        \
            snprintf(err, err_sz, "--%s %s: must be an integer in [%lld, %lld]", key, \
                     val ? val : "(missing)", (long long)(lo), (long long)(hi));      \
            return -1;                                                                \
        }                                                                             \
        c->field = (int)n;                                                            \
        return 0;                                                                     \
    }
    INT_OPT("http-port", http_port, 0, 65535)
    INT_OPT("ws-port", ws_port, 0, 65535)
    INT_OPT("threads", threads, 0, 1024)
    INT_OPT("workers", workers, 1, 64)
    INT_OPT("step-batch", step_batch, 1, SRV_STEP_BATCH_MAX)
    INT_OPT("express-worker", express_worker, 0, 1)
    INT_OPT("max-sessions", max_sessions, 1, 100000)
    INT_OPT("max-clients-per-session", max_clients_per_session, SRV_DRIVER_RESERVE + 1, 100000)
    INT_OPT("max-message-bytes", max_message_bytes, 64, 16 << 20)
    INT_OPT("max-events-per-s", max_events_per_s, 1, 100000)
    INT_OPT("max-view-events-per-s", max_view_events_per_s, 1, 1000000)
    INT_OPT("keyframe-every", keyframe_every, 0, 1000000)
    INT_OPT("view-budget", view_budget_kib, 0, 10000000)
    INT_OPT("max-sessions-per-address", max_sessions_per_address, 1, 100000)
    INT_OPT("idle-expiry", idle_expiry_s, 0, 100000000)
    INT_OPT("max-http-per-address", max_http_per_address, 1, 100000)
    INT_OPT("max-http-connections", max_http_connections, 1, 100000)
    INT_OPT("max-ws-per-address", max_ws_per_address, 1, 1000000)
    INT_OPT("memory-budget", memory_budget_mib, 0, 1 << 30)
    INT_OPT("http-timeout", http_timeout_s, 1, 3600)
    INT_OPT("snapshot-interval", snapshot_interval_s, 1, 86400)
    INT_OPT("fsync-interval", fsync_interval_ms, 0, 600000)
#undef INT_OPT
    if (!val && !known_option(name)) {
        snprintf(err, err_sz, "unknown option --%s (see --help)", name);
        return -1;
    }
    if (!val) {
        snprintf(err, err_sz, "--%s needs a value", name);
        return -1;
    }
    if (!strcmp(name, "upload-limit")) {
        long long b = strtoll(val, &end, 10);
        if (!*val || *end || b < 1024 || b > (64LL << 30)) {
            snprintf(err, err_sz, "--upload-limit %s: bytes, 1024 to 64 GiB", val);
            return -1;
        }
        c->upload_limit = b;
    } else if (!strcmp(name, "rate")) {
        double r = strtod(val, &end);
        if (*end || !(r >= 1 && r <= 1000)) {
            snprintf(err, err_sz, "--rate %s: must be 1 to 1000 Hz", val);
            return -1;
        }
        c->rate_hz = r;
    } else if (string_option(c, name, &so)) {
        return set_string_option(&so, val, err, err_sz);
    } else if (!strcmp(name, "api-key-file")) {
        return read_api_key(c, val, err, err_sz);
    } else if (!strcmp(name, "backend")) {
        int k = sim_backend_kind_parse(val);
        if (k < 0) {
            snprintf(err, err_sz, "--backend %s: must be auto, cpu or cuda", val);
            return -1;
        }
        c->backend = (sim_backend_kind)k;
    } else {
        return scene_option(name, val, err, err_sz);
    }
    return 0;
}

static int load_config_file(srv_config *c, const char *path, char *err, size_t err_sz)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, err_sz, "--config %s: cannot open", path);
        return -1;
    }
    char buf[65536];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    cJSON *j = cJSON_ParseWithLength(buf, n);
    if (!cJSON_IsObject(j)) {
        cJSON_Delete(j);
        snprintf(err, err_sz, "--config %s: not a JSON object", path);
        return -1;
    }
    int rc = 0;
    for (cJSON *e = j->child; e && rc == 0; e = e->next) {
        char val[600];
        if (cJSON_IsString(e))
            snprintf(val, sizeof val, "%s", e->valuestring);
        else if (cJSON_IsNumber(e))
            snprintf(val, sizeof val, "%.17g", e->valuedouble);
        else if (cJSON_IsBool(e) && !strcmp(e->string, "default-session")) {
            c->default_session = cJSON_IsTrue(e);
            continue;
        } else {
            snprintf(err, err_sz, "--config %s: \"%s\" must be a string or a number", path,
                     e->string);
            rc = -1;
            break;
        }
        rc = set_option(c, e->string, val, err, err_sz);
    }
    cJSON_Delete(j);
    return rc;
}

int srv_parse_args(srv_config *c, int argc, char **argv, char *err, size_t err_sz)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage();
            return 1;
        }
        if (strncmp(a, "--", 2) != 0) {
            snprintf(err, err_sz, "unexpected argument %s (see --help)", a);
            return -1;
        }
        if (!strcmp(a, "--default-session")) {
            c->default_session = 1;
            continue;
        }
        const char *val = i + 1 < argc ? argv[++i] : NULL;
        if (!strcmp(a, "--config") && !val)
            snprintf(err, err_sz, "--config needs a value");
        int rc = !strcmp(a, "--config") ? (val ? load_config_file(c, val, err, err_sz) : -1)
                                        : set_option(c, a + 2, val, err, err_sz);
        if (rc)
            return -1;
    }
    return 0;
}

/* Stop in the order that keeps every thread's peers alive while it runs: no new HTTP
 * requests, then no stepping, then close the WebSocket clients (1001), then free. Safe
 * on a server that only half started. */
/* The first n scenes let go of what their sessions shared. */
static void stop_scenes(int n)
{
    int all;
    const srv_scene_i *const *sc = srv_scenes(&all);
    for (int k = 0; k < n && k < all; k++)
        if (sc[k]->stop)
            sc[k]->stop();
}

static void shutdown_all(srv *s, int nstarted)
{
    atomic_store(&s->stop, 1);
    srv_builders_stop(s); /* their requests are answered while HTTP still runs */
    srv_http_stop(s);
    srv_uploads_fini(s); /* the loaders finish what they read */
    srv_worker_stop(s);
    srv_durable_save_all(s); /* SIGTERM loses nothing: saved with no worker running */
    srv_ws_stop(s);
    srv_builders_free(s); /* after every thread that submits (HTTP, workers): they are refused */
    srv_worker_free(s);
    srv_sessions_fini(s);
    srv_durable_fini();
    stop_scenes(nstarted);
    sim_backend_destroy(s->backend);
}

/* Each scene builds what its sessions share. Returns how many started (all: n). */
static int start_scenes(srv *s, char *err, size_t err_sz)
{
    int n;
    const srv_scene_i *const *sc = srv_scenes(&n);
    for (int k = 0; k < n; k++)
        if (sc[k]->start && sc[k]->start(s->backend, err, err_sz) != 0)
            return k;
    return n;
}

int main(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], SRV_READER_ARG)) /* a user's file, read apart (reader.c) */
        return srv_reader_main(argc, argv);
    static srv s; /* big and process-wide */
    char err[512] = "";
    s.cfg = srv_default_config();
    int rc = srv_parse_args(&s.cfg, argc, argv, err, sizeof err);
    if (rc != 0) {
        if (rc < 0)
            fprintf(stderr, "softcast-server: %s\n", err[0] ? err : "bad arguments");
        return rc < 0 ? 2 : 0;
    }
    char probe[3];
    if (srv_random_hex(probe, 1) != 0) { /* tokens come from it: no session without it */
        fprintf(stderr, "softcast-server: getrandom() fails: no good random source for the "
                        "session tokens, so the server does not start\n");
        return 1;
    }
    s.started_ms = (uint64_t)srv_now_ms();
    if (s.cfg.workers == 0) {
        long cores = sysconf(_SC_NPROCESSORS_ONLN);
        s.cfg.workers = cores < 1 ? 1 : cores > 64 ? 64 : (int)cores;
    }
    /* Without --threads a step takes the cores divided among the workers stepping at that
     * moment (sched.c): one busy session gets them all, many get one each. */
    if (sim_backend_create(&s.backend, s.cfg.backend, s.cfg.threads, err, sizeof err) != SIM_OK) {
        fprintf(stderr, "softcast-server: %s\n", err);
        return 1;
    }
    int nscenes, started = start_scenes(&s, err, sizeof err);
    srv_scenes(&nscenes);
    if (started < nscenes) {
        fprintf(stderr, "softcast-server: %s\n", err);
        stop_scenes(started);
        sim_backend_destroy(s.backend);
        return 1;
    }
    atomic_init(&s.stop, 0);
    /* SIGINT and SIGTERM are taken by sigwait below: block them before any thread starts,
     * so every thread inherits the mask and none can miss or steal them. */
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);
    signal(SIGPIPE, SIG_IGN);
    /* Who hears of what: an event pokes its session's worker, news wakes the WebSocket
     * thread. Wired here, before any thread starts, so no file calls another in a circle. */
    s.on_event = srv_worker_poke;
    s.on_news = srv_ws_news;
    /* WebSocket, then the workers it pokes, then HTTP, through which sessions appear. */
    /* Uploads before the restore: a kept replay unpacks the file its recording carries there. */
    if (srv_sessions_init(&s) != 0 || srv_durable_init(&s, err, sizeof err) != 0 ||
        srv_uploads_init(&s, err, sizeof err) != 0 || srv_durable_restore_all(&s) < 0 ||
        srv_builders_start(&s) != 0 || srv_ws_start(&s, err, sizeof err) != 0 ||
        srv_worker_start(&s) != 0 || srv_http_start(&s, err, sizeof err) != 0) {
        fprintf(stderr, "softcast-server: %s\n", err[0] ? err : "cannot start");
        shutdown_all(&s, nscenes);
        return 1;
    }
    srv_session *first = NULL;
    if (s.cfg.default_session) { /* one kept from before, or a new one */
        for (int i = 0; !first && i < s.cfg.max_sessions; i++)
            if (s.slots[i] && s.slots[i]->keep)
                first = s.slots[i];
    }
    if (s.cfg.default_session && !first) {
        int status;
        first = srv_session_create(&s, srv_scene_default(), NULL, "", err, sizeof err, &status);
        if (!first)
            fprintf(stderr, "softcast-server: default session: %s\n", err);
    }
    char http[300], ws[300];
    srv_link_bases(&s, http, sizeof http, ws, sizeof ws);
    printf("{\"event\":\"listening\",\"http_port\":%d,\"ws_port\":%d,\"bind\":\"%s\","
           "\"backend\":\"%s\",\"workers\":%d,\"express_worker\":%s,\"threads\":%d,"
           "\"url\":\"%s/\"",
           s.http_port, s.ws_port, s.cfg.bind, sim_backend_name(s.backend), s.cfg.workers,
           srv_express_worker_on(&s) ? "true" : "false", sim_backend_threads(s.backend), http);
    char dir[1100];
    srv_json_string(dir, sizeof dir, srv_uploads_dir(&s));
    printf(",\"upload_dir\":\"%s\"", dir);
    if (first)
        printf(",\"session\":\"%s\",\"control_url\":\"%s/?session=%s&token=%s\","
               "\"join_url\":\"%s/?session=%s&token=%s\"",
               first->id, http, first->id, first->control_token, http, first->id,
               first->view_token);
    printf("}\n");
    fflush(stdout);

    int sig = 0;
    while (sigwait(&sigs, &sig) != 0)
        ;
    fprintf(stderr, "softcast-server: signal %d, shutting down\n", sig);
    shutdown_all(&s, nscenes);
    return 0;
}
