/* upload.c: volumes from users. A browser uploads a file (POST /api/volumes, the body the
 * file itself); the operator may keep volumes in --volume-dir, which the lobby lists
 * (GET /api/volumes) and starts sessions on (POST /api/sessions {"volume": NAME}).
 *
 * An upload streams to a private file (mkstemps in a directory of our own, 0700, or in
 * --volume-dir under a dot name while it arrives): the name the client gives is shown and
 * lends its extension, never a path. It is refused as soon as it passes --upload-limit,
 * and checked by the scene's own reader from its first bytes (the NIfTI header: kind,
 * dims against the limits) before the rest is taken and before anything big is allocated.
 * Once whole, the session is made at once in state "loading" and a loader thread of its own
 * builds the scene (reading, fitting, body, surfaces), so no HTTP thread ever waits on a
 * volume; the session turns "ready", or "failed" with the reader's words. Refused, failed,
 * or the request cut off, an uploaded file is removed; read, it is kept while its session
 * lives (restarts, recordings). Our directory goes when the server stops; one a crashed
 * server left is removed by the next server to start (sweep_crashed).
 *
 * Threads: the srv_upload_* calls run on HTTP threads, one request at a time each; the
 * loaders on their own threads. g->lock guards the loader table and the in-flight count. */
#define _GNU_SOURCE
#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "scene.h"

#define MAX_INFLIGHT 4          /* uploads arriving plus volumes loading, at once */
#define PROBE_BYTES  (64 << 10) /* the header is checked once this much has arrived */
/* Bodies (uploads, recordings) arriving from one address at once: half the places, so that
 * one address cannot hold them all. */
#define MAX_ARRIVING_PER_ADDRESS 2
/* A body slower than this on average since its headers, once ARRIVAL_GRACE_MS have passed,
 * is cut off (a client that trickles a byte now and then would hold its place for ever;
 * the server's idle timeout only ends one that sends nothing). 64 KiB/s is half a megabit. */
#define ARRIVAL_MIN_BYTES_PER_S (64 << 10)
#define ARRIVAL_GRACE_MS        10000.0

typedef struct loader {
    srv *s;
    srv_session *ss;
    const srv_scene_i *scene;
    pthread_t thread;
    int used, done;
    int temp;        /* remove the file once read */
    char path[1024]; /* the file (ours) */
    char name[128];  /* the user's name for it */
} loader;

typedef struct uploads {
    char tmpdir[512]; /* ours, 0700 */
    int alive_fd;     /* tmpdir/.alive, locked while we run (sweep_crashed) */
    pthread_mutex_t lock;
    int inflight; /* uploads arriving + loaders running */
    loader loaders[MAX_INFLIGHT];
    char arriving[MAX_INFLIGHT][48]; /* the address of each body arriving ("" free) */
} uploads;

struct srv_upload {
    srv *s;
    const srv_scene_i *scene;
    int fd;
    int arrival; /* its place among the bodies arriving (-1 once arrived) */
    double began_ms;
    long long bytes;
    int probed;
    char path[1024]; /* where it is written */
    char name[128];  /* the user's name, cleaned: shown, and its extension kept */
    char suffix[16]; /* the extension the reader goes by ("" when unknown) */
    char owner[48];  /* the client's address (its session counts against its quota) */
};

/* ------------------------------------------------------------- names */

/* The extensions a volume reader goes by; another name is kept without one, so the reader
 * says what it reads. */
static const char *known_suffix(const char *name)
{
    static const char *const k[] = {".nii.gz", ".nii", ".zip", ".dcm"};
    size_t n = strlen(name);
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
        size_t m = strlen(k[i]);
        if (n > m && !strcasecmp(name + n - m, k[i]))
            return k[i];
    }
    return "";
}

/* The user's name made safe to show and to build a file name from: letters, digits and
 * ._- kept, anything else '_', no leading dot, at most out_sz - 1 bytes. A longer name loses
 * the end of its stem, never its extension (.nii.gz, .nii, .zip, .dcm), which says how to
 * read the file. */
static void clean_name(const char *in, char *out, size_t out_sz)
{
    in = in ? in : "";
    size_t n = strlen(in), ext = strlen(known_suffix(in)); /* its characters are all safe */
    size_t stem = n - ext, room = out_sz - 1 - ext, k = 0;
    for (size_t i = 0; i < stem && k < room; i++) {
        unsigned char ch = (unsigned char)in[i];
        int ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
                 strchr("._-", ch);
        out[k] = ok && !(k == 0 && ch == '.') ? (char)ch : '_';
        k++;
    }
    if (k == 0 && ext == 0) {
        snprintf(out, out_sz, "upload");
        return;
    }
    memcpy(out + k, in + stem, ext + 1); /* with its NUL */
}

/* A --volume-dir name the lobby may ask for: a plain name there, no dot first (no "..", no
 * hidden files), no '/', and a regular file or a folder, not a link. */
static int plain_entry(const char *dir, const char *name, struct stat *st)
{
    if (!name[0] || name[0] == '.' || strchr(name, '/') || strlen(name) > 200)
        return 0;
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return lstat(path, st) == 0 && (S_ISREG(st->st_mode) || S_ISDIR(st->st_mode));
}

/* Every mention of path in err becomes name: the client never sees our file names. */
void srv_uploads_hide_path(char *err, size_t err_sz, const char *path, const char *name)
{
    size_t pl = strlen(path), nl = strlen(name);
    char *at;
    while (pl && (at = strstr(err, path)) != NULL) {
        size_t tail = strlen(at + pl);
        if ((size_t)(at - err) + nl + tail + 1 > err_sz)
            break;
        memmove(at + nl, at + pl, tail + 1);
        memcpy(at, name, nl);
    }
}

/* ------------------------------------------------------------ loaders */

static void loader_stage(void *ctx, const char *stage)
{
    loader *l = ctx;
    /* Read: an upload's file is not needed any more. */
    if (l->temp && strcmp(stage, "reading") != 0 && l->path[0]) {
        unlink(l->path);
        l->path[0] = 0;
    }
    srv_session_stage(l->ss, stage);
}

static void *loader_main(void *arg)
{
    loader *l = arg;
    char err[512] = "";
    void *scene = NULL;
    char path[1024];
    snprintf(path, sizeof path, "%s", l->path);
    srv_session_stage(l->ss, "reading");
    /* Before the upload goes: how to read it again after a restart (durable.c). */
    l->ss->origin = srv_origin_file(l->s, l->ss->id, path, l->name, l->temp);
    int status = l->scene->create_file(l->s->backend, path, l->name, loader_stage, l, &scene, err,
                                       sizeof err);
    if (l->temp && l->path[0])
        unlink(l->path);
    if (status != 201) {
        srv_uploads_hide_path(err, sizeof err, path, l->name);
        if (scene)
            l->scene->destroy(scene);
        scene = NULL;
    }
    fprintf(stderr, "softcast-server: session %s: %s %s%s\n", l->ss->id, l->name,
            scene ? "loaded" : "failed: ", scene ? "" : err);
    srv_session_loaded(l->s, l->ss, scene, err);
    uploads *g = l->s->uploads;
    pthread_mutex_lock(&g->lock);
    l->done = 1;
    g->inflight--;
    pthread_mutex_unlock(&g->lock);
    return NULL;
}

/* Join the loaders that finished (g->lock held). */
static void join_done(uploads *g)
{
    for (int i = 0; i < MAX_INFLIGHT; i++)
        if (g->loaders[i].used && g->loaders[i].done) {
            pthread_join(g->loaders[i].thread, NULL);
            memset(&g->loaders[i], 0, sizeof g->loaders[i]);
        }
}

/* Take a place among the in-flight (an upload arriving, then its load). 0, or -1: busy. */
static int take_place(uploads *g)
{
    pthread_mutex_lock(&g->lock);
    join_done(g);
    int ok = g->inflight < MAX_INFLIGHT;
    g->inflight += ok;
    pthread_mutex_unlock(&g->lock);
    return ok ? 0 : -1;
}

static void give_place(uploads *g)
{
    pthread_mutex_lock(&g->lock);
    g->inflight--;
    pthread_mutex_unlock(&g->lock);
}

int srv_arrival_take(srv *s, const char *owner, int *status, char *err, size_t err_sz)
{
    uploads *g = s->uploads;
    pthread_mutex_lock(&g->lock);
    join_done(g);
    int mine = 0, slot = -1;
    for (int i = 0; i < MAX_INFLIGHT; i++) {
        if (g->arriving[i][0] && !strcmp(g->arriving[i], owner))
            mine++;
        else if (!g->arriving[i][0] && slot < 0)
            slot = i;
    }
    if (mine >= MAX_ARRIVING_PER_ADDRESS) {
        *status = 429;
        snprintf(err, err_sz,
                 "%d uploads from this address are arriving already: send one once another "
                 "is in",
                 mine);
        slot = -1;
    } else if (g->inflight >= MAX_INFLIGHT || slot < 0) {
        *status = 503;
        snprintf(err, err_sz, "%d uploads or loads are under way: try again shortly", MAX_INFLIGHT);
        slot = -1;
    } else {
        g->inflight++;
        snprintf(g->arriving[slot], sizeof g->arriving[slot], "%s", owner[0] ? owner : "?");
    }
    pthread_mutex_unlock(&g->lock);
    return slot;
}

void srv_arrival_end(srv *s, int slot, int keep_place)
{
    uploads *g = s->uploads;
    if (slot < 0)
        return;
    pthread_mutex_lock(&g->lock);
    g->arriving[slot][0] = 0;
    g->inflight -= !keep_place;
    pthread_mutex_unlock(&g->lock);
}

void srv_uploads_counts(srv *s, int *in_flight, int *arriving)
{
    uploads *g = s->uploads;
    *in_flight = *arriving = 0;
    if (!g)
        return;
    pthread_mutex_lock(&g->lock);
    *in_flight = g->inflight;
    for (int i = 0; i < MAX_INFLIGHT; i++)
        *arriving += g->arriving[i][0] != 0;
    pthread_mutex_unlock(&g->lock);
}

int srv_arrival_too_slow(double began_ms, long long bytes, char *err, size_t err_sz)
{
    double ms = srv_now_ms() - began_ms;
    if (ms < ARRIVAL_GRACE_MS || (double)bytes * 1000.0 >= ARRIVAL_MIN_BYTES_PER_S * ms)
        return 0;
    snprintf(err, err_sz,
             "%lld bytes in %.0f s: under the %d KiB/s an upload must average (after its "
             "first %.0f s); cut off",
             bytes, ms / 1000.0, ARRIVAL_MIN_BYTES_PER_S >> 10, ARRIVAL_GRACE_MS / 1000.0);
    return 408;
}

/* A loading session on the file, its loader started (the caller's in-flight place passes
 * to the loader). NULL with *status and err when it cannot be had (the place is given back,
 * a temp file removed). */
static srv_session *start_load(srv *s, const srv_scene_i *scene, const char *path, const char *name,
                               const char *owner, int temp, int *status, char *err, size_t err_sz)
{
    uploads *g = s->uploads;
    srv_session *ss = srv_session_create_loading(s, scene, owner, err, err_sz, status);
    if (ss)
        ss->user_named = temp; /* an upload's name is the user's; a library file's is public */
    pthread_mutex_lock(&g->lock);
    loader *l = NULL;
    for (int i = 0; ss && i < MAX_INFLIGHT && !l; i++)
        if (!g->loaders[i].used)
            l = &g->loaders[i];
    if (l) {
        *l = (loader){.s = s, .ss = ss, .scene = scene, .used = 1, .temp = temp};
        snprintf(l->path, sizeof l->path, "%s", path);
        snprintf(l->name, sizeof l->name, "%s", name);
        if (pthread_create(&l->thread, NULL, loader_main, l) != 0)
            l->used = 0, l = NULL;
    }
    if (!l)
        g->inflight--;
    pthread_mutex_unlock(&g->lock);
    if (l)
        return ss;
    if (ss) { /* no thread: the session fails at once, with why */
        snprintf(err, err_sz, "cannot start a loader thread");
        srv_session_loaded(s, ss, NULL, err);
        *status = 503;
    }
    if (temp)
        unlink(path);
    return NULL;
}

/* ------------------------------------------------------------- uploads */

/* The scene that takes users' files (the first that does). */
static const srv_scene_i *file_scene(void)
{
    int n;
    const srv_scene_i *const *sc = srv_scenes(&n);
    for (int k = 0; k < n; k++)
        if (sc[k]->create_file && sc[k]->check_file)
            return sc[k];
    return NULL;
}

srv_upload *srv_upload_begin(srv *s, const char *name, const char *content_type,
                             const char *content_length, const char *owner, int *status, char *err,
                             size_t err_sz)
{
    size_t tl = strcspn(content_type ? content_type : "", ";");
    if (!content_type || tl != 24 || strncasecmp(content_type, "application/octet-stream", 24)) {
        *status = 415;
        snprintf(err, err_sz,
                 "send the file itself as the body, Content-Type: "
                 "application/octet-stream (got %s)",
                 content_type ? content_type : "none");
        return NULL;
    }
    long long len = content_length ? strtoll(content_length, NULL, 10) : -1;
    if (len > s->cfg.upload_limit) {
        *status = 413;
        snprintf(err, err_sz, "%lld bytes: uploads are limited to %lld bytes (--upload-limit)", len,
                 s->cfg.upload_limit);
        return NULL;
    }
    const srv_scene_i *scene = file_scene();
    if (!scene) {
        *status = 404;
        snprintf(err, err_sz, "no scene here takes a volume");
        return NULL;
    }
    if ((*status = srv_session_room(s, owner, err, err_sz)) != 0)
        return NULL;
    int arrival = srv_arrival_take(s, owner ? owner : "", status, err, err_sz);
    if (arrival < 0)
        return NULL;
    srv_upload *u = calloc(1, sizeof *u);
    if (!u) {
        srv_arrival_end(s, arrival, 0);
        *status = 500;
        snprintf(err, err_sz, "out of memory");
        return NULL;
    }
    u->s = s;
    u->arrival = arrival;
    u->began_ms = srv_now_ms();
    u->scene = scene;
    snprintf(u->owner, sizeof u->owner, "%s", owner ? owner : "");
    clean_name(name, u->name, sizeof u->name);
    snprintf(u->suffix, sizeof u->suffix, "%s", known_suffix(u->name));
    const char *dir = s->cfg.volume_dir[0] ? s->cfg.volume_dir : ((uploads *)s->uploads)->tmpdir;
    snprintf(u->path, sizeof u->path, "%s/.upload-XXXXXX%s", dir, u->suffix);
    u->fd = mkostemps(u->path, (int)strlen(u->suffix), O_CLOEXEC);
    if (u->fd < 0) {
        *status = 500;
        snprintf(err, err_sz, "cannot make a file for the upload: %s", strerror(errno));
        u->path[0] = 0;
        srv_upload_abort(u);
        return NULL;
    }
    return u;
}

/* A name without a known extension (none given, or "scan"): the extension its first bytes
 * say, the file renamed to carry it, so that the reader reads it as what it is. A gzip
 * stream is taken for a .nii.gz (the reader says so if it is not one). Nothing when the bytes
 * say nothing: the reader's refusal names the extensions it takes. */
static void sniff_suffix(srv_upload *u)
{
    unsigned char h[348] = {0}; /* a NIfTI-1 header's size; a small .nii.gz may be shorter */
    ssize_t got = u->suffix[0] ? 0 : pread(u->fd, h, sizeof h, 0);
    if (got < 4)
        return;
    int32_t le = (int32_t)(h[0] | h[1] << 8 | h[2] << 16 | (uint32_t)h[3] << 24);
    int32_t be = (int32_t)(h[3] | h[2] << 8 | h[1] << 16 | (uint32_t)h[0] << 24);
    const char *suf = h[0] == 0x1f && h[1] == 0x8b                       ? ".nii.gz"
                      : !memcmp(h, "PK\3\4", 4)                          ? ".zip"
                      : got >= 132 && !memcmp(h + 128, "DICM", 4)        ? ".dcm"
                      : le == 348 || be == 348 || le == 540 || be == 540 ? ".nii"
                                                                         : "";
    char path[sizeof u->path + 8];
    snprintf(path, sizeof path, "%s%s", u->path, suf);
    if (!suf[0] || strlen(path) >= sizeof u->path || rename(u->path, path) != 0)
        return;
    memcpy(u->path, path, strlen(path) + 1);
    snprintf(u->suffix, sizeof u->suffix, "%s", suf);
    /* The name gains it too: it is what a recording of the session carries the file under,
     * and the replay's reader goes by it. */
    char named[sizeof u->name + sizeof u->suffix];
    snprintf(named, sizeof named, "%s%s", u->name, suf);
    clean_name(named, u->name, sizeof u->name);
}

/* Check the file by its first bytes, or whole; 0, or the status with err. */
static int check(srv_upload *u, int partial, char *err, size_t err_sz)
{
    sniff_suffix(u);
    int st = u->scene->check_file(u->path, partial, err, err_sz);
    if (st)
        srv_uploads_hide_path(err, err_sz, u->path, u->name);
    return st;
}

int srv_upload_write(srv_upload *u, const void *data, size_t n, char *err, size_t err_sz)
{
    if (u->bytes + (long long)n > u->s->cfg.upload_limit) {
        snprintf(err, err_sz,
                 "more than %lld bytes: uploads are limited to %lld bytes "
                 "(--upload-limit)",
                 u->s->cfg.upload_limit, u->s->cfg.upload_limit);
        return 413;
    }
    for (const char *p = data; n > 0;) {
        ssize_t w = write(u->fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            snprintf(err, err_sz, "cannot store the upload: %s", strerror(errno));
            return 507;
        }
        p += w;
        n -= (size_t)w;
        u->bytes += w;
    }
    int slow = srv_arrival_too_slow(u->began_ms, u->bytes, err, err_sz);
    if (slow)
        return slow;
    if (!u->probed && u->bytes >= PROBE_BYTES) {
        u->probed = 1;
        return check(u, 1, err, err_sz);
    }
    return 0;
}

srv_session *srv_upload_finish(srv_upload *u, int *status, char *err, size_t err_sz)
{
    srv *s = u->s;
    srv_arrival_end(s, u->arrival, 1); /* arrived: its place is its load's, if it gets one */
    u->arrival = -1;
    sniff_suffix(u); /* a file shorter than PROBE_BYTES: not looked at yet */
    close(u->fd);
    u->fd = -1;
    *status = u->bytes == 0 ? 400 : check(u, 0, err, err_sz);
    if (u->bytes == 0)
        snprintf(err, err_sz, "the body is empty: send the file itself");
    if (*status) {
        srv_upload_abort(u);
        return NULL;
    }
    int temp = !s->cfg.volume_dir[0];
    char path[1024];
    snprintf(path, sizeof path, "%s", u->path);
    if (!temp) { /* kept: a name of its own beside the others, never one it replaces */
        char base[128], rnd[9] = "000000"; /* link() refuses a name that exists */
        snprintf(base, sizeof base, "%.*s", (int)(strlen(u->name) - strlen(known_suffix(u->name))),
                 u->name); /* the suffix goes by the file's (it may have been sniffed) */
        (void)srv_random_hex(rnd, 3);
        snprintf(path, sizeof path, "%s/%.80s-%s%s", s->cfg.volume_dir, base, rnd, u->suffix);
        if (link(u->path, path) != 0) {
            *status = 500;
            snprintf(err, err_sz, "cannot keep the upload in --volume-dir: %s", strerror(errno));
            srv_upload_abort(u);
            return NULL;
        }
        unlink(u->path);
    }
    fprintf(stderr, "softcast-server: upload %s: %lld bytes%s%s\n", u->name, u->bytes,
            temp ? "" : ", kept as ", temp ? "" : strrchr(path, '/') + 1);
    srv_session *ss = start_load(s, u->scene, path, u->name, u->owner, temp, status, err, err_sz);
    free(u); /* its place in flight is the loader's now, or given back */
    return ss;
}

void srv_upload_abort(srv_upload *u)
{
    if (!u)
        return;
    if (u->fd >= 0)
        close(u->fd);
    if (u->path[0])
        unlink(u->path);
    if (u->arrival >= 0)
        srv_arrival_end(u->s, u->arrival, 0);
    else
        give_place(u->s->uploads);
    free(u);
}

/* ------------------------------------------------------- --volume-dir */

static const char *format_of(const char *name, int is_dir)
{
    const char *suf = known_suffix(name);
    if (is_dir)
        return "folder";
    return !strcmp(suf, ".nii") || !strcmp(suf, ".nii.gz") ? "nifti"
           : !strcmp(suf, ".zip")                          ? "zip"
           : !strcmp(suf, ".dcm")                          ? "dicom"
                                                           : NULL;
}

cJSON *srv_volumes_list(srv *s)
{
    cJSON *j = cJSON_CreateObject(), *arr = cJSON_AddArrayToObject(j, "volumes");
    cJSON_AddNumberToObject(j, "upload_limit", (double)s->cfg.upload_limit);
    cJSON_AddBoolToObject(j, "kept", s->cfg.volume_dir[0] != 0);
    const srv_scene_i *scene = file_scene();
    if (scene) /* the scene POST /api/sessions {scene, volume} starts */
        cJSON_AddStringToObject(j, "scene", scene->name);
    DIR *d = s->cfg.volume_dir[0] ? opendir(s->cfg.volume_dir) : NULL;
    for (struct dirent *e; d && (e = readdir(d)) != NULL;) {
        struct stat st;
        if (!plain_entry(s->cfg.volume_dir, e->d_name, &st))
            continue;
        const char *fmt = format_of(e->d_name, S_ISDIR(st.st_mode));
        if (!fmt)
            continue;
        cJSON *v = cJSON_CreateObject();
        cJSON_AddStringToObject(v, "name", e->d_name);
        cJSON_AddNumberToObject(v, "size", S_ISDIR(st.st_mode) ? 0 : (double)st.st_size);
        cJSON_AddStringToObject(v, "format", fmt);
        cJSON_AddItemToArray(arr, v);
    }
    if (d)
        closedir(d);
    return j;
}

srv_session *srv_volume_session(srv *s, const char *name, const char *owner, int *status, char *err,
                                size_t err_sz)
{
    struct stat st;
    const srv_scene_i *scene = file_scene();
    *status = 400;
    if (!s->cfg.volume_dir[0]) {
        *status = 404;
        snprintf(err, err_sz, "this server keeps no volumes (no --volume-dir)");
        return NULL;
    }
    if (!scene || !plain_entry(s->cfg.volume_dir, name, &st) ||
        !format_of(name, S_ISDIR(st.st_mode))) {
        *status = !scene || (name[0] && name[0] != '.' && !strchr(name, '/')) ? 404 : 400;
        snprintf(err, err_sz,
                 "\"%.200s\" is not a volume in this server's --volume-dir (give "
                 "a name GET /api/volumes lists)",
                 name);
        return NULL;
    }
    if (take_place(s->uploads) != 0) {
        *status = 503;
        snprintf(err, err_sz, "%d uploads or loads are under way: try again shortly", MAX_INFLIGHT);
        return NULL;
    }
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", s->cfg.volume_dir, name);
    return start_load(s, scene, path, name, owner, 0, status, err, err_sz);
}

/* ------------------------------------------------------------ start, stop */

static void empty_dir(const char *dir);

/* Upload directories (softcast-uploads-*) that a server of ours left when it crashed: their
 * .alive lock is free (a running server holds its own for its life). Removed, with what they
 * held (its users' files, kept while their sessions lived). A directory with no .alive is
 * another server's being made, or one from before the lock: left alone until an hour old. */
static void sweep_crashed(const char *base, const char *ours)
{
    DIR *d = opendir(base);
    struct dirent *e;
    char dir[1024], alive[1100];
    while (d && (e = readdir(d)) != NULL) {
        struct stat st;
        if (strncmp(e->d_name, "softcast-uploads-", 17) ||
            snprintf(dir, sizeof dir, "%s/%s", base, e->d_name) >= (int)sizeof dir ||
            !strcmp(dir, ours) || lstat(dir, &st) != 0 || !S_ISDIR(st.st_mode) ||
            st.st_uid != geteuid())
            continue;
        snprintf(alive, sizeof alive, "%s/.alive", dir);
        int fd = open(alive, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        int crashed = fd >= 0 ? flock(fd, LOCK_EX | LOCK_NB) == 0
                              : errno == ENOENT && time(NULL) - st.st_mtime > 3600;
        if (crashed) {
            empty_dir(dir);
            if (rmdir(dir) == 0)
                fprintf(stderr,
                        "softcast-server: removed %s, the uploads of a server that stopped "
                        "without removing them (a crash)\n",
                        dir);
        }
        if (fd >= 0)
            close(fd); /* and with it the lock */
    }
    if (d)
        closedir(d);
}

int srv_uploads_init(srv *s, char *err, size_t err_sz)
{
    uploads *g = calloc(1, sizeof *g);
    if (!g) {
        snprintf(err, err_sz, "out of memory");
        return -1;
    }
    const char *tmp = getenv("TMPDIR");
    snprintf(g->tmpdir, sizeof g->tmpdir, "%s/softcast-uploads-XXXXXX",
             tmp && tmp[0] && strlen(tmp) < 400 ? tmp : "/tmp");
    if (!mkdtemp(g->tmpdir)) { /* mode 0700: nobody else reads what users send */
        snprintf(err, err_sz, "cannot make a private directory for uploads in %s: %s",
                 tmp && tmp[0] ? tmp : "/tmp", strerror(errno));
        free(g);
        return -1;
    }
    char alive[600];
    snprintf(alive, sizeof alive, "%s/.alive", g->tmpdir);
    g->alive_fd = open(alive, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (g->alive_fd < 0 || flock(g->alive_fd, LOCK_EX | LOCK_NB) != 0) {
        snprintf(err, err_sz, "cannot lock %s: %s", alive, strerror(errno));
        if (g->alive_fd >= 0)
            close(g->alive_fd), unlink(alive);
        rmdir(g->tmpdir);
        free(g);
        return -1;
    }
    sweep_crashed(tmp && tmp[0] && strlen(tmp) < 400 ? tmp : "/tmp", g->tmpdir);
    if (s->cfg.volume_dir[0]) {
        struct stat st;
        if (stat(s->cfg.volume_dir, &st) != 0 || !S_ISDIR(st.st_mode) ||
            access(s->cfg.volume_dir, W_OK | X_OK) != 0) {
            snprintf(err, err_sz, "--volume-dir %s: not a directory this server can write to",
                     s->cfg.volume_dir);
            empty_dir(g->tmpdir);
            rmdir(g->tmpdir);
            close(g->alive_fd);
            free(g);
            return -1;
        }
    }
    pthread_mutex_init(&g->lock, NULL);
    s->uploads = g;
    return 0;
}

const char *srv_uploads_dir(srv *s)
{
    return s->uploads ? ((uploads *)s->uploads)->tmpdir : "";
}

int srv_uploads_temp(srv *s, const char *name, char *path, size_t path_sz)
{
    char clean[128];
    clean_name(name, clean, sizeof clean);
    const char *suffix = known_suffix(clean);
    if (!s->uploads ||
        snprintf(path, path_sz, "%s/.file-XXXXXX%s", srv_uploads_dir(s), suffix) >= (int)path_sz) {
        errno = ENAMETOOLONG;
        return -1;
    }
    return mkostemps(path, (int)strlen(suffix), O_CLOEXEC);
}

/* What is left in the directory: the files kept for sessions and their recordings (with no
 * --state-dir they end with the server). */
static void empty_dir(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    char path[1024];
    while (d && (e = readdir(d)) != NULL)
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") &&
            snprintf(path, sizeof path, "%s/%s", dir, e->d_name) < (int)sizeof path)
            unlink(path);
    if (d)
        closedir(d);
}

/* After HTTP has stopped (no upload arrives): wait for the loaders, remove our directory. */
void srv_uploads_fini(srv *s)
{
    uploads *g = s->uploads;
    if (!g)
        return;
    for (int i = 0; i < MAX_INFLIGHT; i++)
        if (g->loaders[i].used)
            pthread_join(g->loaders[i].thread, NULL);
    empty_dir(g->tmpdir);
    rmdir(g->tmpdir);
    close(g->alive_fd);
    pthread_mutex_destroy(&g->lock);
    free(g);
    s->uploads = NULL;
}
