/* durable.c: sessions that survive a restart (--state-dir DIR).
 *
 * DIR/sessions/<id>/ holds one session:
 *   meta.json  how to build it again: id, tokens, scene, owner, the options it was made with
 *              (written once, when it turns ready; 0600, the tokens are its secrets)
 *   snapshot   its state at a frame: a header (frame, paused, last seq, the first log record
 *              it does not hold), the scene's save() bytes compressed with zstd, a checksum;
 *              written whole to snapshot.tmp, flushed, then renamed over the old one
 *   log        what was applied since: each record its number, frame, kind, client, seq and
 *              payload (the parsed event, as the inbox held it) and a checksum; and a tick
 *              every second saying how far the session has stepped
 *
 * A restart builds each session from meta.json, restores the snapshot, and replays the log's
 * records past it as the worker applied them: the events of frame F, then its step, frame by
 * frame (a paused frame steps nothing), so the scene comes back where it was (scenes step
 * the same on the same backend and thread count). A record cut short by a crash ends the log
 * there. Policy (server/README.md, "Limits and durability"):
 *   - SIGTERM: every session is snapshotted after the workers stop: nothing is lost.
 *   - the process killed (SIGKILL, a crash): the log is written (write(2)) in the frame that
 *     applies its events, before the frame that acknowledges them goes out, so nothing
 *     acknowledged is lost; the motion since the last tick (at most a second) is replayed
 *     from that tick on, not from where it was.
 *   - the machine lost: the log reaches the disk every --fsync-interval ms (fdatasync), so
 *     at most that much of each session's events, at most --max-events-per-s a second.
 * Worker thread for a session's log and snapshots; main thread at start and at shutdown. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <zstd.h>

#include "scene.h"
#include "sim/core/sc_base.h"

#define META_FORMAT   1
#define SNAP_MAGIC    "SCSNAP1\n"
#define REC_MAGIC     0x56454353u /* "SCEV" */
#define REC_TICK      SRV_REC_TICK
#define TICK_EVERY_MS 1000.0

struct srv_durable {
    char dir[768];
    int log_fd;
    uint64_t next_lsn; /* the next record's number */
    sc_blob pending;   /* this frame's records, not yet written */
    size_t unsynced;   /* bytes written since the last fdatasync */
    double synced_ms, ticked_ms, snapshot_ms;
    uint64_t ticked_frame; /* frame of the last tick */
    uint64_t snapshot_frame;
    int broken; /* a write failed: said once, the session is no longer kept */
};

/* The snapshot's header (the compressed state and an 8-byte checksum follow). */
typedef struct snap_head {
    char magic[8];
    uint64_t next_lsn, frame;
    uint32_t flags, last_seq; /* SNAP_PAUSED, SNAP_CONTROL_CLOSED */
    uint64_t raw_bytes, z_bytes, hash;
} snap_head;

#define SNAP_PAUSED         1u /* the session was paused */
#define SNAP_CONTROL_CLOSED 2u /* its driver closed control (set_control: ws.c) */

static int g_lock_fd = -1; /* DIR/lock, held while the server runs (one server per DIR) */

static int enabled(const srv *s)
{
    return s->cfg.state_dir[0] != 0;
}

static void session_dir(const srv *s, const char *id, char *out, size_t n)
{
    if (snprintf(out, n, "%s/sessions/%s", s->cfg.state_dir, id) >= (int)n)
        out[0] = 0;
}

/* ------------------------------------------------------------- small files */

/* a/b into out: 0, or -1 when it does not fit (never a cut path). */
static int path_join(char *out, size_t n, const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la + 1 + lb >= n) {
        if (n)
            out[0] = 0;
        return -1;
    }
    memcpy(out, a, la);
    out[la] = '/';
    memcpy(out + la + 1, b, lb + 1);
    return 0;
}

/* Flush a directory, so that a rename or a new file in it survives the machine. */
static void sync_dir(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        (void)fsync(fd);
        close(fd);
    }
}

/* path gets parts (n of them) whole or not at all: tmp, flushed, renamed. 0 or -1. */
static int write_file_atomic(const char *dir, const char *name, const void *const *part,
                             const size_t *len, int n)
{
    char tmp[900], path[900];
    if (snprintf(tmp, sizeof tmp, "%s/%s.tmp", dir, name) >= (int)sizeof tmp)
        return -1;
    (void)path_join(path, sizeof path, dir, name);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0)
        return -1;
    int rc = 0;
    for (int k = 0; k < n && rc == 0; k++)
        rc = srv_write_all(fd, part[k], len[k]);
    if (rc == 0)
        rc = fdatasync(fd);
    close(fd);
    if (rc == 0)
        rc = rename(tmp, path);
    if (rc != 0) {
        unlink(tmp);
        return -1;
    }
    sync_dir(dir);
    return 0;
}

/* The whole file, malloc'd (NULL when absent or over max bytes). */
static uint8_t *read_file(const char *path, size_t max, size_t *n)
{
    *n = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return NULL;
    struct stat st;
    uint8_t *buf = NULL;
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && (size_t)st.st_size <= max)
        buf = malloc((size_t)st.st_size + 1);
    size_t got = 0;
    while (buf && got < (size_t)st.st_size) {
        ssize_t r = read(fd, buf + got, (size_t)st.st_size - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        got += (size_t)r;
    }
    close(fd);
    if (buf && got != (size_t)st.st_size) {
        free(buf);
        return NULL;
    }
    if (buf)
        buf[got] = 0;
    *n = got;
    return buf;
}

/* ------------------------------------------------------------------ start */

int srv_durable_init(srv *s, char *err, size_t err_sz)
{
    if (!enabled(s))
        return 0;
    char path[900];
    (void)path_join(path, sizeof path, s->cfg.state_dir, "sessions");
    if ((mkdir(s->cfg.state_dir, 0700) != 0 && errno != EEXIST) ||
        (mkdir(path, 0700) != 0 && errno != EEXIST)) {
        snprintf(err, err_sz, "--state-dir %s: cannot make it: %s", s->cfg.state_dir,
                 strerror(errno));
        return -1;
    }
    (void)path_join(path, sizeof path, s->cfg.state_dir, "lock");
    g_lock_fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (g_lock_fd < 0) {
        snprintf(err, err_sz, "--state-dir %s: cannot write there: %s", s->cfg.state_dir,
                 strerror(errno));
        return -1;
    }
    if (flock(g_lock_fd, LOCK_EX | LOCK_NB) != 0) {
        snprintf(err, err_sz, "--state-dir %s: another server uses it", s->cfg.state_dir);
        close(g_lock_fd);
        g_lock_fd = -1;
        return -1;
    }
    return 0;
}

void srv_durable_fini(void)
{
    if (g_lock_fd >= 0)
        close(g_lock_fd);
    g_lock_fd = -1;
}

/* The session's durable half, its log open for appending (NULL, and errno, on failure). */
static srv_durable *durable_open(const char *dir)
{
    srv_durable *d = calloc(1, sizeof *d);
    if (!d)
        return NULL;
    snprintf(d->dir, sizeof d->dir, "%s", dir);
    char path[900];
    (void)path_join(path, sizeof path, dir, "log");
    d->log_fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (d->log_fd < 0) {
        free(d);
        return NULL;
    }
    d->synced_ms = d->ticked_ms = d->snapshot_ms = srv_now_ms();
    return d;
}

int srv_durable_begin(srv *s, srv_session *ss)
{
    if (!enabled(s) || !ss->origin || !ss->scene->save)
        return 0;
    char dir[768];
    session_dir(s, ss->id, dir, sizeof dir);
    cJSON *m = cJSON_CreateObject();
    cJSON_AddNumberToObject(m, "format", META_FORMAT);
    cJSON_AddStringToObject(m, "id", ss->id);
    cJSON_AddStringToObject(m, "scene", ss->scene->name);
    cJSON_AddStringToObject(m, "control_token", ss->control_token);
    cJSON_AddStringToObject(m, "view_token", ss->view_token);
    cJSON_AddStringToObject(m, "owner", ss->owner);
    cJSON_AddBoolToObject(m, "keep", ss->keep);
    cJSON *origin = cJSON_Parse(ss->origin), *item;
    if (!origin) {
        cJSON_Delete(m);
        return -1;
    }
    while ((item = origin->child) != NULL) /* options, or the file */
        cJSON_AddItemToObject(m, item->string, cJSON_DetachItemViaPointer(origin, item));
    cJSON_Delete(origin);
    char *text = cJSON_PrintUnformatted(m);
    cJSON_Delete(m);
    int rc = -1;
    if (text && (mkdir(dir, 0700) == 0 || errno == EEXIST)) {
        const void *part[1] = {text};
        size_t len[1] = {strlen(text)};
        rc = write_file_atomic(dir, "meta.json", part, len, 1);
    }
    free(text);
    srv_durable *d = rc == 0 ? durable_open(dir) : NULL;
    if (!d) {
        fprintf(stderr, "softcast-server: session %s: not kept across restarts: %s: %s\n", ss->id,
                dir, strerror(errno));
        char meta[900];
        if (rc == 0 && path_join(meta, sizeof meta, dir, "meta.json") == 0)
            unlink(meta);
        return -1;
    }
    sync_dir(dir); /* the log's name survives the machine too */
    char sessions[900];
    (void)path_join(sessions, sizeof sessions, s->cfg.state_dir, "sessions");
    sync_dir(sessions);
    ss->durable = d;
    return 0;
}

char *srv_origin_options(const srv_scene_i *scene, const void *data, const cJSON *opts)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddItemToObject(o, "options", opts ? cJSON_Duplicate(opts, 1) : cJSON_CreateNull());
    cJSON *def = data && scene->origin_default ? scene->origin_default(data) : NULL;
    if (def) /* made on the server's default: which, for a restart under other flags */
        cJSON_AddItemToObject(o, "default", def);
    char *text = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return text;
}

/* Copy from into a new file to (0600): 0, or -1 (nothing left behind). */
static int copy_file(const char *from, const char *to)
{
    int in = open(from, O_RDONLY | O_CLOEXEC), rc = -1;
    int out = in >= 0 ? open(to, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600) : -1;
    char buf[1 << 16];
    ssize_t r = 0;
    while (out >= 0 && (r = read(in, buf, sizeof buf)) > 0 &&
           srv_write_all(out, buf, (size_t)r) == 0)
        ;
    if (out >= 0 && r == 0 && fdatasync(out) == 0)
        rc = 0;
    if (in >= 0)
        close(in);
    if (out >= 0) {
        close(out);
        if (rc)
            unlink(to);
    }
    return rc;
}

/* The folder of kept files: DIR/files under --state-dir, else the uploads folder. */
static void kept_dir(srv *s, char *out, size_t n)
{
    if (enabled(s))
        (void)path_join(out, n, s->cfg.state_dir, "files");
    else
        snprintf(out, n, "%s", srv_uploads_dir(s));
}

int srv_origin_path(srv *s, const cJSON *origin, const char *key, char *out, size_t out_sz)
{
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(origin, key);
    if (!cJSON_IsString(f))
        return -1;
    if (!cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(origin, "kept")))
        return snprintf(out, out_sz, "%s", f->valuestring) < (int)out_sz ? 0 : -1;
    const char *base = strrchr(f->valuestring, '/');
    base = base ? base + 1 : f->valuestring;
    if (!base[0] || !strcmp(base, ".") || !strcmp(base, ".."))
        return -1;
    char files[700];
    kept_dir(s, files, sizeof files);
    return path_join(out, out_sz, files, base);
}

char *srv_origin_file(srv *s, const char *id, const char *path, const char *name, int temp)
{
    char kept[900] = "", files[700], base[128] = "";
    if (temp) {
        kept_dir(s, files, sizeof files);
        (void)mkdir(files, 0700);
        const char *dot = strrchr(path, '/');
        snprintf(base, sizeof base, "%s-%s", id, dot ? dot + 1 : path);
        if (path_join(kept, sizeof kept, files, base) != 0 ||
            (link(path, kept) != 0 && copy_file(path, kept) != 0)) {
            fprintf(stderr, "softcast-server: session %s: its file cannot be kept in %s: %s\n", id,
                    files, strerror(errno));
            return NULL;
        }
        if (enabled(s))
            sync_dir(files);
    }
    cJSON *o = cJSON_CreateObject();
    /* A kept file by its name alone (srv_origin_path): the state directory can move. */
    cJSON_AddStringToObject(o, "file", kept[0] ? base : path);
    cJSON_AddStringToObject(o, "name", name);
    cJSON_AddBoolToObject(o, "kept", kept[0] != 0);
    char *text = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return text;
}

char *srv_origin_recording(srv *s, const char *id, const uint8_t *bytes, size_t n)
{
    char files[700], kept[900], name[96];
    if (!enabled(s))
        return NULL;
    kept_dir(s, files, sizeof files);
    (void)mkdir(files, 0700);
    snprintf(name, sizeof name, "%s.screc", id);
    int fd = path_join(kept, sizeof kept, files, name) == 0
                 ? open(kept, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600)
                 : -1;
    int rc = fd >= 0 && srv_write_all(fd, bytes, n) == 0 && fdatasync(fd) == 0 ? 0 : -1;
    if (fd >= 0)
        close(fd);
    if (rc != 0) {
        fprintf(stderr, "softcast-server: replay %s: its recording cannot be kept in %s: %s\n", id,
                files, strerror(errno));
        if (fd >= 0)
            unlink(kept);
        return NULL;
    }
    sync_dir(files);
    cJSON *o = cJSON_CreateObject(); /* by its name alone, in DIR/files (srv_origin_path) */
    cJSON_AddStringToObject(o, "recording", name);
    cJSON_AddStringToObject(o, "file", name); /* srv_origin_forget removes it with the session */
    cJSON_AddBoolToObject(o, "kept", 1);
    char *text = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return text;
}

void srv_origin_forget(srv *s, srv_session *ss)
{
    cJSON *o = ss->origin ? cJSON_Parse(ss->origin) : NULL;
    char path[1024];
    if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, "kept")) &&
        srv_origin_path(s, o, "file", path, sizeof path) == 0)
        unlink(path); /* the upload kept for it (DIR/files) */
    cJSON_Delete(o);
    free(ss->origin);
    ss->origin = NULL;
}

/* ------------------------------------------------------------ the worker */

void srv_record_put(sc_blob *b, const srv_record *h, const void *payload)
{
    srv_record r = *h;
    r.magic = REC_MAGIC;
    uint64_t sum = sc_hash_bytes(sc_hash_bytes(SC_HASH_SEED, &r, sizeof r), payload, r.size);
    sc_blob_put(b, &r, sizeof r);
    sc_blob_put(b, payload, r.size);
    SC_PUT(b, sum);
}

int srv_record_get(const uint8_t *p, size_t n, size_t *at, const srv_scene_i *scene, int ticks,
                   srv_record *r, const uint8_t **payload)
{
    if (n < *at || n - *at < sizeof *r + sizeof(uint64_t))
        return -1;
    memcpy(r, p + *at, sizeof *r);
    size_t len = sizeof *r + (size_t)r->size + sizeof(uint64_t);
    int known = (ticks && r->kind == REC_TICK) || r->kind == SRV_ITEM_PAUSE ||
                r->kind == SRV_ITEM_RESUME ||
                (r->kind >= SRV_ITEM_SCENE && r->kind - SRV_ITEM_SCENE < (uint32_t)scene->nevents);
    if (r->magic != REC_MAGIC || r->size > SRV_EVENT_MAX || len > n - *at || !known)
        return -1;
    uint64_t sum, want = sc_hash_bytes(sc_hash_bytes(SC_HASH_SEED, r, sizeof *r),
                                       p + *at + sizeof *r, r->size);
    memcpy(&sum, p + *at + sizeof *r + r->size, sizeof sum);
    if (sum != want)
        return -1;
    *payload = p + *at + sizeof *r;
    *at += len;
    return 0;
}

void srv_durable_record(srv_session *ss, const srv_item *h, const void *payload)
{
    srv_durable *d = ss->durable;
    if (!d || d->broken || ss->replay || (h->flags & SRV_EV_QUERY) ||
        (h->kind != SRV_ITEM_PAUSE && h->kind != SRV_ITEM_RESUME && h->kind < SRV_ITEM_SCENE))
        return; /* a query changes nothing, nor a recording's start or stop: nothing to replay */
    srv_record r = {REC_MAGIC, h->size,  d->next_lsn++, ss->frame_no,
                    h->kind,   h->flags, h->client,     h->seq};
    srv_record_put(&d->pending, &r, payload);
}

/* A write that failed: the session goes on, no longer kept (said once). */
static void broken(srv_session *ss, const char *what)
{
    srv_durable *d = ss->durable;
    if (!d->broken) {
        fprintf(stderr,
                "softcast-server: session %s: %s failed (%s): its state is no longer kept\n",
                ss->id, what, strerror(errno));
        char meta[900]; /* without it a restart does not bring back an older state */
        if (path_join(meta, sizeof meta, d->dir, "meta.json") == 0)
            unlink(meta);
    }
    d->broken = 1;
}

void srv_durable_commit(srv *s, srv_session *ss)
{
    srv_durable *d = ss->durable;
    if (!d || d->broken || ss->replay) /* a replay comes back from its recording alone */
        return;
    double now = srv_now_ms();
    if (now - d->ticked_ms >= TICK_EVERY_MS && ss->frame_no > d->ticked_frame) {
        srv_record r = {REC_MAGIC, 0, d->next_lsn++, ss->frame_no, REC_TICK, 0, 0, 0};
        srv_record_put(&d->pending, &r, NULL);
        d->ticked_ms = now;
        d->ticked_frame = ss->frame_no;
    }
    if (d->pending.failed) {
        errno = ENOMEM;
        broken(ss, "the log");
        return;
    }
    if (d->pending.n) {
        if (srv_write_all(d->log_fd, d->pending.p, d->pending.n) != 0) {
            broken(ss, "writing the log");
            return;
        }
        d->unsynced += d->pending.n;
        d->pending.n = 0;
    }
    if (d->unsynced && now - d->synced_ms >= s->cfg.fsync_interval_ms) {
        if (fdatasync(d->log_fd) != 0)
            broken(ss, "flushing the log");
        d->unsynced = 0;
        d->synced_ms = now;
    }
}

uint64_t srv_durable_hash(srv_session *ss)
{
    return ss->scene->hash ? ss->scene->hash(ss->scene_data) : 0;
}

int srv_durable_snapshot(srv *s, srv_session *ss, uint64_t *hash)
{
    srv_durable *d = ss->durable;
    if (!d || d->broken)
        return -1;
    srv_durable_commit(s, ss); /* nothing pending stays behind the snapshot */
    char err[256] = "";
    sc_blob raw = {0};
    if (ss->scene->save(ss->scene_data, &raw, err, sizeof err) != 0 || raw.failed) {
        fprintf(stderr, "softcast-server: session %s: snapshot: %s\n", ss->id,
                err[0] ? err : "out of memory");
        sc_blob_free(&raw);
        return -1;
    }
    size_t bound = ZSTD_compressBound(raw.n);
    uint8_t *z = malloc(bound ? bound : 1);
    size_t zn = z ? ZSTD_compress(z, bound, raw.p, raw.n, 1) : 0;
    int rc = -1;
    if (z && !ZSTD_isError(zn)) {
        snap_head h;
        memset(&h, 0, sizeof h);
        memcpy(h.magic, SNAP_MAGIC, 8);
        h.next_lsn = d->next_lsn;
        h.frame = ss->frame_no;
        pthread_mutex_lock(&ss->lock);
        h.flags = (ss->paused ? SNAP_PAUSED : 0) | (ss->control_closed ? SNAP_CONTROL_CLOSED : 0);
        h.last_seq = ss->last_seq;
        ss->snapshot_soon = 0;
        pthread_mutex_unlock(&ss->lock);
        h.raw_bytes = raw.n;
        h.z_bytes = zn;
        h.hash = srv_durable_hash(ss);
        uint64_t sum = sc_hash_bytes(sc_hash_bytes(SC_HASH_SEED, &h, sizeof h), z, zn);
        const void *part[3] = {&h, z, &sum};
        size_t len[3] = {sizeof h, zn, sizeof sum};
        rc = write_file_atomic(d->dir, "snapshot", part, len, 3);
        if (rc == 0) { /* everything in the log is in the snapshot now */
            (void)ftruncate(d->log_fd, 0);
            d->snapshot_frame = ss->frame_no;
            if (hash)
                *hash = h.hash;
        } else {
            broken(ss, "writing its snapshot");
        }
    }
    free(z);
    sc_blob_free(&raw);
    d->snapshot_ms = srv_now_ms();
    return rc;
}

void srv_durable_after_step(srv *s, srv_session *ss)
{
    srv_durable *d = ss->durable;
    pthread_mutex_lock(&ss->lock);
    int soon = ss->snapshot_soon; /* a setting the log does not hold changed (set_control) */
    pthread_mutex_unlock(&ss->lock);
    if (d && !d->broken && !ss->replay && ss->frame_no != d->snapshot_frame &&
        (soon || srv_now_ms() - d->snapshot_ms >= 1000.0 * s->cfg.snapshot_interval_s))
        (void)srv_durable_snapshot(s, ss, NULL);
}

static void durable_free(srv_durable *d)
{
    if (!d)
        return;
    if (d->log_fd >= 0)
        close(d->log_fd);
    sc_blob_free(&d->pending);
    free(d);
}

void srv_durable_close(srv_session *ss)
{
    durable_free(ss->durable);
    ss->durable = NULL;
}

const char *srv_durable_dir(const srv_session *ss)
{
    return ss->durable ? ss->durable->dir : NULL;
}

void srv_durable_remove(srv *s, srv_session *ss)
{
    srv_durable *d = ss->durable;
    if (!d) {
        srv_origin_forget(s, ss); /* an upload kept for it, though its state was not */
        return;
    }
    static const char *const files[] = {
        "log",           "snapshot",        "snapshot.tmp",       "meta.json",
        "meta.json.tmp", "recording.screc", "recording.screc.tmp"};
    char path[900];
    for (size_t k = 0; k < sizeof files / sizeof files[0]; k++) {
        (void)path_join(path, sizeof path, d->dir, files[k]);
        unlink(path);
    }
    char dir[768];
    snprintf(dir, sizeof dir, "%s", d->dir);
    srv_durable_close(ss);
    rmdir(dir);
    srv_origin_forget(s, ss);
}

/* --------------------------------------------------------------- shutdown */

void srv_durable_save_all(srv *s)
{
    for (int i = 0; enabled(s) && i < s->cfg.max_sessions; i++) {
        srv_session *ss = s->slots[i];
        if (!ss || !ss->durable)
            continue;
        pthread_mutex_lock(&ss->lock);
        int closing = ss->closing, ready = ss->load_state == SRV_READY;
        pthread_mutex_unlock(&ss->lock);
        if (closing || !ready) {
            srv_durable_remove(s, ss); /* deleted: it does not come back */
            continue;
        }
        if (ss->replay) { /* its recording is kept: it comes back from that, at its start */
            fprintf(stderr, "softcast-server: replay %s kept: it comes back at its first frame\n",
                    ss->id);
            continue;
        }
        srv_record_finish_now(s, ss); /* kept as the session's last recording */
        double t0 = srv_now_ms();
        uint64_t hash = 0;
        if (srv_durable_snapshot(s, ss, &hash) == 0)
            fprintf(stderr,
                    "softcast-server: session %s saved: frame %llu, state hash %016llx (%.0f ms)\n",
                    ss->id, (unsigned long long)ss->frame_no, (unsigned long long)hash,
                    srv_now_ms() - t0);
    }
}

/* ---------------------------------------------------------------- restart */

/* What a session is replayed with: its scene, and where the worker had it. */
typedef struct replay {
    srv *s;
    const srv_scene_i *scene;
    void *data;
    uint64_t frame;
    int paused, control_closed;
    uint32_t last_seq;
    uint64_t next_lsn;  /* the first record not yet in the state */
    int events, ticks;  /* replayed */
    size_t valid_bytes; /* of the log, up to its first torn record */
} replay;

static void quiet_text(srv_scene_ctx *c, uint32_t client, const char *text)
{
    (void)c, (void)client, (void)text; /* its replies went out before the restart */
}
static void quiet_frame(srv_scene_ctx *c, uint32_t client, const uint8_t *b, size_t n)
{
    (void)c, (void)client, (void)b, (void)n;
}
static void quiet_error(srv_scene_ctx *c, uint32_t client, uint32_t seq, const char *error,
                        const char *detail)
{
    (void)c, (void)client, (void)seq, (void)error, (void)detail;
}

void srv_quiet_ctx(srv *s, srv_scene_ctx *c, uint64_t frame, const char *id)
{
    memset(c, 0, sizeof *c);
    c->backend = s->backend;
    c->threads = s->cfg.threads ? s->cfg.threads : sim_backend_threads(s->backend);
    c->frame = frame;
    c->sim_time_s = (double)frame / s->cfg.rate_hz;
    c->session_id = id;
    c->reply_text = quiet_text;
    c->reply_frame = quiet_frame;
    c->error = quiet_error;
}

static void replay_ctx(replay *r, srv_scene_ctx *c, const char *id)
{
    srv_quiet_ctx(r->s, c, r->frame, id);
}

/* Step as the worker did up to frame (a paused frame counts, and steps nothing). */
static void replay_to(replay *r, uint64_t frame, const char *id)
{
    while (r->frame < frame) {
        if (!r->paused) {
            srv_scene_ctx c;
            replay_ctx(r, &c, id);
            double ms;
            (void)r->scene->step(&c, r->data, &ms);
        }
        r->frame++;
    }
}

/* One record, as apply_taken (sched.c) applied it. */
static void replay_record(replay *r, const srv_record *h, const uint8_t *payload, const char *id)
{
    replay_to(r, h->frame, id);
    if (h->kind == REC_TICK) {
        r->ticks++;
        return;
    }
    if (h->kind == SRV_ITEM_PAUSE || h->kind == SRV_ITEM_RESUME) {
        r->paused = h->kind == SRV_ITEM_PAUSE;
    } else {
        _Alignas(8) unsigned char data[SRV_EVENT_MAX] = {0};
        memcpy(data, payload, h->size);
        srv_event ev = {h->client, h->seq, data, h->size};
        srv_scene_ctx c;
        replay_ctx(r, &c, id);
        r->scene->events[h->kind - SRV_ITEM_SCENE].apply(&c, r->data, &ev);
    }
    if (!(h->flags & SRV_EV_QUERY))
        r->last_seq = h->seq;
    r->events++;
}

/* The log's records past the snapshot, in order, up to the first that is cut short or
 * damaged (a crash in the middle of a write): where the log is valid goes in r. */
static void replay_log(replay *r, const uint8_t *log, size_t n, const char *id)
{
    size_t at = 0, next = 0;
    srv_record h;
    const uint8_t *payload;
    while (srv_record_get(log, n, &next, r->scene, 1, &h, &payload) == 0) {
        if (h.lsn >= r->next_lsn && h.frame < r->frame)
            break; /* out of order: not this log's */
        if (h.lsn >= r->next_lsn) {
            replay_record(r, &h, payload, id);
            r->next_lsn = h.lsn + 1;
        }
        at = next;
    }
    r->valid_bytes = at;
}

/* The snapshot in dir (if any) into r's scene: 0 (none, or restored), or -1 with err. */
static int restore_snapshot(replay *r, const char *dir, char *err, size_t err_sz)
{
    char path[900];
    (void)path_join(path, sizeof path, dir, "snapshot");
    size_t n;
    uint8_t *file = read_file(path, (size_t)16 << 30, &n);
    if (!file)
        return access(path, F_OK) == 0 ? (snprintf(err, err_sz, "snapshot: unreadable"), -1) : 0;
    snap_head h;
    int rc = -1;
    uint8_t *raw = NULL;
    if (n < sizeof h + sizeof(uint64_t)) {
        snprintf(err, err_sz, "snapshot: cut short (%zu bytes)", n);
        goto out;
    }
    memcpy(&h, file, sizeof h);
    uint64_t sum;
    memcpy(&sum, file + n - sizeof sum, sizeof sum);
    if (memcmp(h.magic, SNAP_MAGIC, 8) != 0 || h.z_bytes != n - sizeof h - sizeof sum ||
        sum != sc_hash_bytes(sc_hash_bytes(SC_HASH_SEED, &h, sizeof h), file + sizeof h,
                             (size_t)h.z_bytes)) {
        snprintf(err, err_sz, "snapshot: damaged (its checksum or its length is wrong)");
        goto out;
    }
    raw = malloc(h.raw_bytes ? (size_t)h.raw_bytes : 1);
    size_t got =
        raw ? ZSTD_decompress(raw, (size_t)h.raw_bytes, file + sizeof h, (size_t)h.z_bytes) : 0;
    if (!raw || ZSTD_isError(got) || got != h.raw_bytes) {
        snprintf(err, err_sz, "snapshot: cannot decompress it");
        goto out;
    }
    char why[256] = "";
    if (r->scene->restore(r->data, raw, got, why, sizeof why) != 0) {
        snprintf(err, err_sz, "snapshot: %s", why);
        goto out;
    }
    uint64_t hash = r->scene->hash ? r->scene->hash(r->data) : 0;
    if (hash != h.hash) {
        snprintf(err, err_sz, "snapshot: restored to state hash %016llx, saved at %016llx",
                 (unsigned long long)hash, (unsigned long long)h.hash);
        goto out;
    }
    r->frame = h.frame;
    r->paused = (h.flags & SNAP_PAUSED) != 0;
    r->control_closed = (h.flags & SNAP_CONTROL_CLOSED) != 0;
    r->last_seq = h.last_seq;
    r->next_lsn = h.next_lsn;
    rc = 0;
out:
    free(raw);
    free(file);
    return rc;
}

/* meta.json's field as a string ("" when absent). */
static const char *meta_str(const cJSON *m, const char *name)
{
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(m, name);
    return cJSON_IsString(j) ? j->valuestring : "";
}

void srv_stage_ignore(void *ctx, const char *stage)
{
    (void)ctx, (void)stage;
}

/* The scene built again as its maker built it: from its options, or from its file. */
static int build(srv *s, const srv_scene_i *scene, const cJSON *meta, void **data, char *err,
                 size_t err_sz)
{
    const cJSON *file = cJSON_GetObjectItemCaseSensitive(meta, "file");
    char path[1024];
    if (!file) {
        const cJSON *opts = cJSON_GetObjectItemCaseSensitive(meta, "options");
        const cJSON *def = cJSON_GetObjectItemCaseSensitive(meta, "default");
        if (opts && !cJSON_IsNull(opts) && !cJSON_IsObject(opts)) /* scenes read an object */
            return snprintf(err, err_sz, "meta.json: its options are not a JSON object"), 400;
        if (def && scene->create_default) /* on the default it was made on, whatever it is now */
            return scene->create_default(s->backend, cJSON_IsNull(opts) ? NULL : opts, def, 1, data,
                                         err, err_sz);
        return scene->create(s->backend, cJSON_IsNull(opts) ? NULL : opts, data, err, err_sz);
    }
    if (!cJSON_IsString(file) || !scene->create_file ||
        srv_origin_path(s, meta, "file", path, sizeof path) != 0)
        return snprintf(err, err_sz, "meta.json: a file this scene cannot read"), 400;
    if (access(path, R_OK) != 0)
        return snprintf(err, err_sz, "its file %.400s: %s", path, strerror(errno)), 404;
    return scene->create_file(s->backend, path, meta_str(meta, "name"), srv_stage_ignore, NULL,
                              data, err, err_sz);
}

/* meta.json's origin again (what srv_origin_options or srv_origin_file made). */
static char *origin_of(const cJSON *meta)
{
    cJSON *o = cJSON_CreateObject();
    static const char *const keys[] = {"options", "default", "file", "name", "kept", "recording"};
    for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++) {
        const cJSON *j = cJSON_GetObjectItemCaseSensitive(meta, keys[k]);
        if (j)
            cJSON_AddItemToObject(o, keys[k], cJSON_Duplicate(j, 1));
    }
    char *text = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return text;
}

/* A kept session's scene (data, built and brought to its frame) put back in its old slot with
 * meta.json's id and tokens, its log reopened and its origin kept. NULL with err; the data is
 * freed then. */
static srv_session *adopt_kept(srv *s, const char *dir, const cJSON *meta, const srv_scene_i *scene,
                               void *data, int paused, uint64_t frame, uint32_t last_seq,
                               size_t extra_bytes, char *err, size_t err_sz)
{
    srv_session_saved sv = {scene,
                            meta_str(meta, "id"),
                            meta_str(meta, "control_token"),
                            meta_str(meta, "view_token"),
                            meta_str(meta, "owner"),
                            cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(meta, "keep")),
                            paused,
                            frame,
                            last_seq,
                            extra_bytes};
    srv_durable *d = durable_open(dir);
    if (!d)
        snprintf(err, err_sz, "its log: %s", strerror(errno));
    srv_session *ss = d ? srv_session_adopt(s, &sv, data, err, err_sz) : NULL;
    if (!ss) {
        scene->destroy(data);
        durable_free(d);
        return NULL;
    }
    ss->durable = d;
    ss->origin = origin_of(meta);
    /* An upload kept, or a replay (its recording may carry one): named by a user. */
    ss->user_named = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(meta, "kept")) ||
                     cJSON_GetObjectItemCaseSensitive(meta, "recording") != NULL;
    return ss;
}

/* A kept replay built again from its recording, paused at its first frame, in its slot (its
 * id and tokens): 0, or -1 with err. */
static int restore_replay(srv *s, const char *dir, const cJSON *meta, char *err, size_t err_sz)
{
    const char *id = meta_str(meta, "id");
    size_t n = 0;
    char path[1024] = "";
    uint8_t *file = srv_origin_path(s, meta, "recording", path, sizeof path) == 0
                        ? read_file(path, (size_t)s->cfg.upload_limit, &n)
                        : NULL;
    const srv_scene_i *scene = NULL;
    void *data = NULL;
    struct srv_replay *rp = NULL;
    if (!file)
        return snprintf(err, err_sz,
                        "its recording %.400s cannot be read (gone, or over --upload-limit)",
                        path[0] ? path : meta_str(meta, "recording")),
               -1;
    int status = srv_replay_rebuild(s, file, n, &scene, &data, &rp, err, err_sz);
    free(file);
    if (status != 201)
        return -1;
    srv_session *ss =
        adopt_kept(s, dir, meta, scene, data, 1, 0, 0, srv_replay_bytes(rp), err, err_sz);
    if (!ss) {
        srv_replay_free(rp);
        return -1;
    }
    srv_replay_adopted(ss, rp); /* its frame, pause and seq: the recording's first */
    fprintf(stderr, "softcast-server: replay %s restored: at its first frame, paused\n", id);
    return 0;
}

/* Build, restore and replay one kept session, then put it in its slot. 0, or -1 with err. */
static int restore_one(srv *s, const char *dir, const cJSON *meta, char *err, size_t err_sz)
{
    const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(meta, "format");
    const srv_scene_i *scene = srv_scene_find(meta_str(meta, "scene"));
    if (!cJSON_IsNumber(fmt) || fmt->valueint != META_FORMAT)
        return snprintf(err, err_sz, "meta.json: not format %d", META_FORMAT), -1;
    if (!scene || !scene->restore)
        return snprintf(err, err_sz, "scene \"%s\" is not kept", meta_str(meta, "scene")), -1;
    if (cJSON_GetObjectItemCaseSensitive(meta, "recording"))
        return restore_replay(s, dir, meta, err, err_sz);
    replay r;
    memset(&r, 0, sizeof r);
    r.s = s;
    r.scene = scene;
    int status = build(s, scene, meta, &r.data, err, err_sz);
    int rc = status == 201 ? restore_snapshot(&r, dir, err, err_sz) : -1;
    char path[900];
    (void)path_join(path, sizeof path, dir, "log");
    size_t n = 0;
    uint8_t *log = rc == 0 ? read_file(path, (size_t)1 << 30, &n) : NULL;
    const char *id = meta_str(meta, "id");
    if (rc == 0)
        replay_log(&r, log, n, id);
    free(log);
    if (rc != 0) {
        if (r.data)
            scene->destroy(r.data);
        return -1;
    }
    srv_session *ss =
        adopt_kept(s, dir, meta, scene, r.data, r.paused, r.frame, r.last_seq, 0, err, err_sz);
    if (!ss)
        return -1;
    ss->control_closed = r.control_closed; /* before any client joins */
    srv_durable *d = ss->durable;
    if (ftruncate(d->log_fd, (off_t)r.valid_bytes) != 0 && r.valid_bytes < n)
        fprintf(stderr, "softcast-server: session %s: cannot cut its log's torn end\n", id);
    d->next_lsn = r.next_lsn;
    d->snapshot_frame = d->ticked_frame = r.frame;
    struct stat st;
    if (path_join(path, sizeof path, dir, "recording.screc") == 0 && stat(path, &st) == 0 &&
        S_ISREG(st.st_mode)) { /* its last recording, downloadable again */
        snprintf(ss->recording_path, sizeof ss->recording_path, "%s", path);
        ss->recording_n = (size_t)st.st_size;
    }
    fprintf(stderr,
            "softcast-server: session %s restored: frame %llu, state hash %016llx, %d events "
            "replayed%s\n",
            id, (unsigned long long)r.frame, (unsigned long long)srv_durable_hash(ss), r.events,
            r.valid_bytes < n ? " (its log's torn end dropped)" : "");
    return 0;
}

/* A session that cannot come back is kept aside for the operator, not retried. */
static void set_aside(srv *s, const char *name, const char *dir)
{
    char failed[900], to[1100];
    (void)path_join(failed, sizeof failed, s->cfg.state_dir, "failed");
    (void)mkdir(failed, 0700);
    (void)path_join(to, sizeof to, failed, name);
    if (rename(dir, to) != 0)
        fprintf(stderr, "softcast-server: cannot move %s aside: %s\n", dir, strerror(errno));
}

int srv_durable_restore_all(srv *s)
{
    if (!enabled(s))
        return 0;
    char top[900];
    (void)path_join(top, sizeof top, s->cfg.state_dir, "sessions");
    DIR *dp = opendir(top);
    int restored = 0;
    struct dirent *e;
    while (dp && (e = readdir(dp)) != NULL) {
        if (e->d_name[0] == '.' || strlen(e->d_name) >= SRV_ID_LEN)
            continue;
        char dir[900], path[1000], err[512] = "";
        (void)path_join(dir, sizeof dir, top, e->d_name);
        (void)path_join(path, sizeof path, dir, "meta.json");
        double t0 = srv_now_ms();
        size_t n;
        char *text = (char *)read_file(path, 1 << 20, &n);
        cJSON *meta = text ? cJSON_Parse(text) : NULL;
        free(text);
        int rc = -1;
        if (!meta)
            snprintf(err, sizeof err, "meta.json: missing or not JSON");
        else if (strcmp(meta_str(meta, "id"), e->d_name) != 0)
            snprintf(err, sizeof err, "meta.json: another session's");
        else
            rc = restore_one(s, dir, meta, err, sizeof err);
        cJSON_Delete(meta);
        if (rc == 0) {
            restored++;
            fprintf(stderr, "softcast-server: session %s back in %.0f ms\n", e->d_name,
                    srv_now_ms() - t0);
        } else {
            fprintf(stderr,
                    "softcast-server: session %s cannot come back: %s (moved to %s/failed)\n",
                    e->d_name, err, s->cfg.state_dir);
            set_aside(s, e->d_name, dir);
        }
    }
    if (dp)
        closedir(dp);
    return restored;
}
