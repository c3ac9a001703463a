/* recording.c: recordings and their replays (issue 12, item 6).
 *
 * The driver starts a recording (record_start): the worker saves the scene (its save hook,
 * as a snapshot) and from then on keeps every item it applies as a record (the log's format,
 * durable.c), until record_stop, when a builder writes the recording as one file on disk
 * that the driver downloads (GET /api/sessions/ID/recording with the control token):
 *   "SCREC01\n", a header (uint32 length, then JSON: format, scene, the options the session
 *   was made with, backend, rate, first and last frame, the state hash at both ends, sizes),
 *   the starting state (zstd), the session's file when it was made from one (zstd, format
 *   2), the records, a checksum of all before it.
 * Uploading it (POST /api/recordings) makes a replay session: its scene built from the same
 * options or the file it carries, the state restored, its frames numbered as the original's; each
 * frame applies the records of that frame and steps, so viewers see the frames the original showed
 * (the same backend and thread count; the scenes step the same: sim/test_*snapshot*). It starts
 * paused; its driver resumes, pauses, and seeks (a seek back restores the start and steps
 * forward unseen). At the last frame it stops and says whether its state hash is the
 * recorded one. Worker thread, but for the file's writing and building (a builder) and its
 * parsing (HTTP). */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <zstd.h>

#include "scene.h"
#include "sim/core/sc_base.h"

#define REC_FILE_MAGIC  "SCREC01\n"
#define REC_FORMAT      2                  /* 1: no source part; read still */
#define REC_MAX_RECORDS ((size_t)32 << 20) /* a recording's events: ~800,000 moves */
#define REC_MAX_SOURCE  ((size_t)1 << 32)  /* a session's file a recording carries */
#define REC_CHARGE_STEP ((size_t)1 << 20)  /* records are charged to the budget a MiB at once */

typedef struct srv_recorder {
    sc_blob start;   /* the scene's state when it started */
    sc_blob records; /* what was applied since */
    uint64_t start_frame, start_hash, lsn;
    int start_paused, events, full;
    uint32_t start_seq;
    char *source, *source_name; /* a session made from a file: that file, and its name */
    /* What it holds, charged to --memory-budget with its session (its starting state, then
     * its records a MiB at once) until it is written; over_budget: it filled for want of it. */
    srv *s;
    size_t charged;
    int over_budget;
} srv_recorder;

typedef struct srv_replay {
    uint8_t *start; /* the starting state (seeks back restore it) */
    size_t start_n;
    uint8_t *records;
    size_t records_n, at; /* the next record */
    uint64_t start_frame, end_frame, end_hash;
    uint64_t seek_to; /* a seek on its way there (0: none) */
    uint32_t start_seq;
    int start_paused, scene_paused; /* the original's pause, as recorded */
    int ended, same;                /* at the end: whether the state hash is the recorded one */
} srv_replay;

static void say(srv_scene_ctx *c, uint32_t client, const char *fmt, ...) SC_PRINTF(3, 4);
static void say(srv_scene_ctx *c, uint32_t client, const char *fmt, ...)
{
    char text[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    c->reply_text(c, client, text);
}

/* ------------------------------------------------------------ recording */

static void recorder_free(srv_recorder *r)
{
    if (!r)
        return;
    sc_blob_free(&r->start);
    sc_blob_free(&r->records);
    free(r->source);
    free(r->source_name);
    free(r);
}

/* A session made from a file: the file (still there, not too large), which its recording
 * will carry. 0 (also for a session made from options: *path NULL), or -1 with why. */
static int origin_source(srv *s, const srv_session *ss, char **path, char **name, char *why,
                         size_t why_sz)
{
    *path = *name = NULL;
    cJSON *o = cJSON_Parse(ss->origin);
    const cJSON *file = cJSON_GetObjectItemCaseSensitive(o, "file");
    const cJSON *nm = cJSON_GetObjectItemCaseSensitive(o, "name");
    char at[1024];
    struct stat st;
    int rc = 0;
    if (!file) {
        rc = 0; /* made from options */
    } else if (srv_origin_path(s, o, "file", at, sizeof at) != 0) {
        rc = -1, snprintf(why, why_sz, "this session cannot be built again");
    } else if (stat(at, &st) != 0 || !S_ISREG(st.st_mode)) {
        rc = -1, snprintf(why, why_sz, "its file %s is gone, so a recording could not carry it",
                          cJSON_IsString(nm) ? nm->valuestring : "");
    } else if ((uint64_t)st.st_size > REC_MAX_SOURCE) {
        rc = -1, snprintf(why, why_sz, "its file is %lld bytes: a recording carries at most %zu",
                          (long long)st.st_size, REC_MAX_SOURCE);
    } else {
        *path = strdup(at);
        *name = strdup(cJSON_IsString(nm) ? nm->valuestring : "file");
        if (!*path || !*name)
            rc = -1, snprintf(why, why_sz, "out of memory");
    }
    cJSON_Delete(o);
    return rc;
}

void srv_record_start(srv *s, srv_session *ss, srv_scene_ctx *c, uint32_t client, uint32_t seq)
{
    char why[300] = "";
    const char *no = ss->replay         ? "a replay is not recorded again"
                     : ss->recorder     ? "a recording runs already"
                     : !ss->scene->save ? "this scene cannot be recorded"
                     : !ss->origin      ? "this session cannot be built again"
                                        : NULL;
    pthread_mutex_lock(&ss->lock);
    int busy = ss->recording_busy;
    pthread_mutex_unlock(&ss->lock);
    if (!no && busy)
        no = "the last recording is still being written: start again in a moment";
    char *source = NULL, *source_name = NULL;
    if (!no && origin_source(s, ss, &source, &source_name, why, sizeof why) != 0)
        no = why;
    if (no) {
        c->error(c, client, seq, "cannot record", no);
        free(source);
        free(source_name);
        return;
    }
    srv_recorder *r = calloc(1, sizeof *r);
    char err[256] = "";
    if (!r || ss->scene->save(ss->scene_data, &r->start, err, sizeof err) != 0 || r->start.failed) {
        c->error(c, client, seq, "cannot record", err[0] ? err : "out of memory");
        if (r)
            sc_blob_free(&r->start);
        free(r);
        free(source);
        free(source_name);
        return;
    }
    r->source = source;
    r->source_name = source_name;
    if (srv_session_charge_more(s, ss, r->start.n + REC_CHARGE_STEP, err, sizeof err) != 0) {
        c->error(c, client, seq, "cannot record", err); /* its starting state does not fit */
        recorder_free(r);
        return;
    }
    r->s = s;
    r->charged = r->start.n + REC_CHARGE_STEP;
    r->start_frame = ss->frame_no;
    r->start_hash = ss->scene->hash ? ss->scene->hash(ss->scene_data) : 0;
    pthread_mutex_lock(&ss->lock);
    r->start_paused = ss->paused;
    r->start_seq = ss->last_seq;
    pthread_mutex_unlock(&ss->lock);
    ss->recorder = r;
    say(c, client, "{\"type\":\"recording\",\"state\":\"recording\",\"seq\":%u,\"frame\":%llu}",
        seq, (unsigned long long)ss->frame_no);
}

void srv_record_note(srv_session *ss, const srv_item *h, const void *payload)
{
    srv_recorder *r = ss->recorder;
    if (!r || (h->flags & SRV_EV_QUERY) ||
        (h->kind != SRV_ITEM_PAUSE && h->kind != SRV_ITEM_RESUME && h->kind < SRV_ITEM_SCENE))
        return; /* a query changes nothing; a recording's own start and stop are not in it */
    if (r->full || r->records.n > REC_MAX_RECORDS) {
        r->full = 1; /* record_stop's at the end of this take; no event after a missed one */
        return;
    }
    char err[256];
    size_t need = r->start.n + r->records.n + sizeof(srv_record) + h->size + 8 /* its sum */;
    if (need > r->charged) {
        size_t more = need - r->charged > REC_CHARGE_STEP ? need - r->charged : REC_CHARGE_STEP;
        if (srv_session_charge_more(r->s, ss, more, err, sizeof err) != 0) {
            r->full = r->over_budget = 1; /* it stops taking events, as when full */
            return;
        }
        r->charged += more;
    }
    srv_record rec = {0, h->size, r->lsn++, ss->frame_no, h->kind, h->flags, h->client, h->seq};
    srv_record_put(&r->records, &rec, payload);
    r->events++;
}

/* A recording stopped, its file yet to write (a builder: the source file may be large):
 * what the worker knew at the stop. */
typedef struct finish_job {
    srv *s;
    srv_session *ss; /* held */
    srv_recorder *r;
    cJSON *head; /* the header, but for the sizes of the parts */
    uint64_t end_frame;
    uint32_t client, seq;
} finish_job;

static finish_job *finish_prepare(srv *s, srv_session *ss, srv_recorder *r, uint32_t client,
                                  uint32_t seq)
{
    finish_job *j = calloc(1, sizeof *j);
    cJSON *h = cJSON_CreateObject();
    if (!j || !h) {
        free(j);
        cJSON_Delete(h);
        return NULL;
    }
    uint64_t end_hash = ss->scene->hash ? ss->scene->hash(ss->scene_data) : 0;
    char hex[2][17];
    snprintf(hex[0], sizeof hex[0], "%016llx", (unsigned long long)r->start_hash);
    snprintf(hex[1], sizeof hex[1], "%016llx", (unsigned long long)end_hash);
    cJSON_AddNumberToObject(h, "format", REC_FORMAT);
    cJSON_AddStringToObject(h, "scene", ss->scene->name);
    cJSON_AddStringToObject(h, "session", ss->id);
    cJSON *origin = cJSON_Parse(ss->origin);
    cJSON *opts = cJSON_DetachItemFromObjectCaseSensitive(origin, "options");
    cJSON *def = cJSON_DetachItemFromObjectCaseSensitive(origin, "default");
    cJSON_Delete(origin);
    cJSON_AddItemToObject(h, "options", opts ? opts : cJSON_CreateNull());
    if (def) /* made on its server's default: a replay elsewhere builds that one or says why */
        cJSON_AddItemToObject(h, "default", def);
    cJSON_AddStringToObject(h, "backend", sim_backend_name(s->backend));
    cJSON_AddNumberToObject(h, "rate_hz", s->cfg.rate_hz);
    cJSON_AddNumberToObject(h, "start_frame", (double)r->start_frame);
    cJSON_AddNumberToObject(h, "end_frame", (double)ss->frame_no);
    cJSON_AddBoolToObject(h, "start_paused", r->start_paused);
    cJSON_AddNumberToObject(h, "start_seq", r->start_seq);
    cJSON_AddStringToObject(h, "start_hash", hex[0]);
    cJSON_AddStringToObject(h, "end_hash", hex[1]);
    cJSON_AddNumberToObject(h, "events", r->events);
    if (r->source_name)
        cJSON_AddStringToObject(h, "source_name", r->source_name);
    j->s = s;
    j->ss = ss;
    j->r = r;
    j->head = h;
    j->end_frame = ss->frame_no;
    j->client = client;
    j->seq = seq;
    pthread_mutex_lock(&ss->lock);
    ss->recording_busy = 1;
    pthread_mutex_unlock(&ss->lock);
    return j;
}

/* The file at path, zstd-compressed into out, streamed (1 MiB at a time): its size in *raw.
 * 0, or -1 with err. */
static int compress_file(const char *path, sc_blob *out, uint64_t *raw, char *err, size_t err_sz)
{
    FILE *f = fopen(path, "rb");
    ZSTD_CCtx *z = f ? ZSTD_createCCtx() : NULL;
    size_t in_cap = (size_t)1 << 20, out_cap = ZSTD_CStreamOutSize();
    uint8_t *in = malloc(in_cap), *buf = malloc(out_cap);
    int rc = f && z && in && buf ? 0 : -1;
    *raw = 0;
    if (z)
        ZSTD_CCtx_setParameter(z, ZSTD_c_compressionLevel, 3);
    for (int last = 0; rc == 0 && !last;) {
        size_t n = fread(in, 1, in_cap, f);
        last = n < in_cap;
        if (last && ferror(f))
            rc = -1;
        *raw += n;
        ZSTD_inBuffer ib = {in, n, 0};
        size_t left;
        do {
            ZSTD_outBuffer ob = {buf, out_cap, 0};
            left = ZSTD_compressStream2(z, &ob, &ib, last ? ZSTD_e_end : ZSTD_e_continue);
            if (ZSTD_isError(left))
                rc = -1;
            else
                sc_blob_put(out, buf, ob.pos);
        } while (rc == 0 && (last ? left != 0 : ib.pos < ib.size));
    }
    if (rc != 0 || out->failed)
        snprintf(err, err_sz, "its file cannot be read into the recording: %s",
                 f ? "read or compression failed" : strerror(errno));
    if (f)
        fclose(f);
    ZSTD_freeCCtx(z);
    free(in);
    free(buf);
    return rc != 0 || out->failed ? -1 : 0;
}

/* parts written to fd one after the other, their checksum after them. 0 or -1. */
static int write_parts(int fd, const void *const *part, const size_t *len, int n)
{
    uint64_t sum = SC_HASH_SEED;
    for (int k = 0; k < n; k++) {
        const uint8_t *p = part[k];
        sum = sc_hash_bytes(sum, p, len[k]);
        if (srv_write_all(fd, p, len[k]) != 0)
            return -1;
    }
    return srv_write_all(fd, &sum, sizeof sum);
}

/* The recording's file at path (through path.tmp, flushed when kept across restarts):
 *   "SCREC01\n", uint32 header length, the header (JSON), the starting state (zstd), the
 *   session's file (zstd; format 2, when it was made from one), the records, a checksum.
 * Its size, or 0 with err. */
static size_t write_recording(finish_job *j, const char *path, int flush, char *err, size_t err_sz)
{
    srv_recorder *r = j->r;
    size_t bound = ZSTD_compressBound(r->start.n);
    uint8_t *z = malloc(bound);
    size_t zn = z ? ZSTD_compress(z, bound, r->start.p, r->start.n, 3) : 0;
    sc_blob src = {0};
    uint64_t src_raw = 0;
    int ok = z && !ZSTD_isError(zn) && !r->records.failed;
    if (!ok)
        snprintf(err, err_sz, "out of memory");
    if (ok && r->source)
        ok = compress_file(r->source, &src, &src_raw, err, err_sz) == 0;
    cJSON_AddNumberToObject(j->head, "start_bytes", (double)r->start.n);
    cJSON_AddNumberToObject(j->head, "start_z", (double)zn);
    cJSON_AddNumberToObject(j->head, "source_bytes", (double)src_raw);
    cJSON_AddNumberToObject(j->head, "source_z", (double)src.n);
    cJSON_AddNumberToObject(j->head, "records_bytes", (double)r->records.n);
    char *json = ok ? cJSON_PrintUnformatted(j->head) : NULL;
    char tmp[1100];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    int fd = json ? open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600) : -1;
    size_t total = 0;
    if (fd >= 0) {
        uint32_t jn = (uint32_t)strlen(json);
        const void *part[] = {REC_FILE_MAGIC, &jn, json, z, src.p, r->records.p};
        size_t len[] = {8, 4, jn, zn, src.n, r->records.n};
        int rc = write_parts(fd, part, len, 6);
        if (rc == 0 && flush)
            rc = fdatasync(fd);
        close(fd);
        if (rc == 0 && rename(tmp, path) == 0)
            total = 8 + 4 + jn + zn + src.n + r->records.n + 8;
        else
            unlink(tmp), snprintf(err, err_sz, "cannot write it: %s", strerror(errno));
    } else if (ok) {
        snprintf(err, err_sz, "cannot write it: %s", json ? strerror(errno) : "out of memory");
    }
    free(json);
    free(z);
    sc_blob_free(&src);
    return total;
}

/* Where the session's recording lives: its state directory, or the upload directory. */
static void recording_path(srv *s, srv_session *ss, char *out, size_t n, int *temp)
{
    const char *dir = srv_durable_dir(ss);
    *temp = dir == NULL;
    if (dir)
        snprintf(out, n, "%s/recording.screc", dir);
    else
        snprintf(out, n, "%s/%s.screc", srv_uploads_dir(s), ss->id);
}

/* Write the file, make it the session's last recording, tell the driver. */
static void finish_run(void *arg)
{
    finish_job *j = arg;
    srv *s = j->s;
    srv_session *ss = j->ss;
    char path[1024], err[512] = "";
    int temp;
    recording_path(s, ss, path, sizeof path, &temp);
    size_t n = write_recording(j, path, !temp, err, sizeof err);
    srv_session_refund(s, ss, j->r->charged); /* written: what it held is let go */
    pthread_mutex_lock(&ss->lock);
    if (n) {
        snprintf(ss->recording_path, sizeof ss->recording_path, "%s", path);
        ss->recording_n = n;
        ss->recording_temp = temp;
    }
    ss->recording_busy = 0;
    pthread_mutex_unlock(&ss->lock);
    if (!n) {
        srv_session_error(s, ss, j->client, j->seq, "cannot record", err);
    } else {
        char text[768];
        long long over = (long long)n - s->cfg.upload_limit;
        snprintf(text, sizeof text,
                 "{\"type\":\"recording\",\"state\":\"stopped\",\"seq\":%u,\"start_frame\":%llu,"
                 "\"end_frame\":%llu,\"events\":%d,\"bytes\":%zu,\"full\":%s,%s\"replayable\":%s,"
                 "\"download\":\"/api/sessions/%s/recording\"}",
                 j->seq, (unsigned long long)j->r->start_frame, (unsigned long long)j->end_frame,
                 j->r->events, n, j->r->full ? "true" : "false",
                 j->r->over_budget
                     ? "\"full_why\":\"the server's memory budget (--memory-budget)\","
                 : j->r->full ? "\"full_why\":\"32 MiB of records\","
                              : "",
                 over > 0 ? "false" : "true", ss->id);
        srv_session_reply(ss, j->client, NULL, text);
        if (over > 0)
            srv_session_error(s, ss, j->client, j->seq, "recording too large to replay here",
                              "the recording is larger than --upload-limit, which a replay "
                              "upload is held to: raise it to replay it on this server");
    }
    srv_session_news(s, ss);
    srv_session_put(s, ss);
    cJSON_Delete(j->head);
    recorder_free(j->r);
    free(j);
}

void srv_record_stop(srv *s, srv_session *ss, srv_scene_ctx *c, uint32_t client, uint32_t seq)
{
    srv_recorder *r = ss->recorder;
    if (!r) {
        c->error(c, client, seq, "not recording", "record_start first");
        return;
    }
    ss->recorder = NULL;
    finish_job *j = finish_prepare(s, ss, r, client, seq);
    if (!j) {
        c->error(c, client, seq, "cannot record", "out of memory");
        srv_session_refund(s, ss, r->charged);
        recorder_free(r);
        return;
    }
    srv_session_hold(s, ss); /* the job's */
    if (srv_build_submit(s, finish_run, j) != 0)
        finish_run(j); /* stopping: here, then */
}

void srv_record_finish_now(srv *s, srv_session *ss)
{
    srv_recorder *r = ss->recorder;
    if (!r)
        return;
    ss->recorder = NULL;
    finish_job *j = finish_prepare(s, ss, r, 0, 0);
    if (!j) {
        srv_session_refund(s, ss, r->charged);
        recorder_free(r);
        return;
    }
    fprintf(stderr,
            "softcast-server: session %s: its recording (frames %llu to %llu) stopped by "
            "the shutdown, kept as its last recording\n",
            ss->id, (unsigned long long)r->start_frame, (unsigned long long)ss->frame_no);
    srv_session_hold(s, ss);
    finish_run(j);
}

int srv_record_full(const srv_session *ss)
{
    return ss->recorder && ss->recorder->full;
}

int srv_session_recording(srv_session *ss, size_t *n)
{
    pthread_mutex_lock(&ss->lock);
    int fd = ss->recording_path[0] ? open(ss->recording_path, O_RDONLY | O_CLOEXEC) : -1;
    *n = ss->recording_n;
    pthread_mutex_unlock(&ss->lock);
    return fd;
}

void srv_recording_free(srv_session *ss)
{
    recorder_free(ss->recorder);
    ss->recorder = NULL;
    if (ss->recording_temp && ss->recording_path[0]) /* kept across restarts otherwise */
        unlink(ss->recording_path);
    ss->recording_path[0] = 0;
    srv_replay_free(ss->replay);
    ss->replay = NULL;
}

void srv_replay_free(srv_replay *rp)
{
    if (!rp)
        return;
    free(rp->start);
    free(rp->records);
    free(rp);
}

/* --------------------------------------------------------------- replays */

/* A recording file read and checked (HTTP thread): its header, and where its parts are. */
typedef struct rec_file {
    cJSON *head;
    const srv_scene_i *scene;
    const uint8_t *z, *source_z, *records;
    size_t z_n, source_z_n, records_n, start_n;
    uint64_t start_frame, end_frame, start_seq, source_n;
    const char *source_name; /* the session's file's name (in head), or NULL: none */
} rec_file;

#define REC_MAX_COUNT 9007199254740992.0 /* 2^53: a whole number a JSON double holds */
#define REC_MAX_START ((size_t)1 << 30)  /* the starting state, decompressed */

/* The header's field as a whole number in [0, max]: 0, or -1 (absent, fractional, out of
 * range: the file is refused, never cast). */
static int head_count(const cJSON *h, const char *name, double max, uint64_t *out)
{
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(h, name);
    double v = cJSON_IsNumber(j) ? j->valuedouble : -1;
    if (!(v >= 0 && v <= max) || v != (double)(uint64_t)v)
        return -1;
    *out = (uint64_t)v;
    return 0;
}

/* The records, each checked (a kind the scene has, frames in order within the recording):
 * 0, or -1 with err. */
static int check_records(const rec_file *f, char *err, size_t err_sz)
{
    size_t at = 0;
    uint64_t last = f->start_frame;
    srv_record h;
    const uint8_t *payload;
    while (at < f->records_n) {
        if (srv_record_get(f->records, f->records_n, &at, f->scene, 0, &h, &payload) != 0)
            return snprintf(err, err_sz, "the recording's event at byte %zu is damaged", at), -1;
        if (h.frame < last || h.frame > f->end_frame)
            return snprintf(err, err_sz, "the recording's events are out of order"), -1;
        last = h.frame;
    }
    return 0;
}

static uint64_t head_hash(const cJSON *h, const char *name)
{
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(h, name);
    return cJSON_IsString(j) ? strtoull(j->valuestring, NULL, 16) : 0;
}

/* 0, or 400 with err saying what is wrong with the file. */
static int read_file_parts(srv *s, const uint8_t *p, size_t n, rec_file *f, char *err,
                           size_t err_sz)
{
    memset(f, 0, sizeof *f);
    uint32_t jn;
    uint64_t sum;
    if (n < 8 + 4 + 8 || memcmp(p, REC_FILE_MAGIC, 8) != 0)
        return snprintf(err, err_sz, "not a Softcast recording (SCREC01)"), 400;
    memcpy(&sum, p + n - 8, 8);
    if (sum != sc_hash_bytes(SC_HASH_SEED, p, n - 8))
        return snprintf(err, err_sz, "the recording is damaged (its checksum is wrong)"), 400;
    memcpy(&jn, p + 8, 4);
    if (jn > n - 20)
        return snprintf(err, err_sz, "the recording's header is cut short"), 400;
    char *json = malloc(jn + 1);
    if (!json)
        return snprintf(err, err_sz, "out of memory"), 500;
    memcpy(json, p + 12, jn);
    json[jn] = 0;
    f->head = cJSON_Parse(json);
    free(json);
    const cJSON *sc = cJSON_GetObjectItemCaseSensitive(f->head, "scene");
    f->scene = cJSON_IsString(sc) ? srv_scene_find(sc->valuestring) : NULL;
    uint64_t format = 0, z, sz = 0, rb, start_n;
    size_t body = n - 20 - jn;
    const cJSON *sn = cJSON_GetObjectItemCaseSensitive(f->head, "source_name");
    int bad = head_count(f->head, "format", 1e6, &format) || format < 1 || format > REC_FORMAT ||
              !f->scene || !f->scene->restore || head_count(f->head, "start_z", (double)body, &z) ||
              (format >= 2 &&
               (head_count(f->head, "source_z", (double)body, &sz) ||
                head_count(f->head, "source_bytes", (double)REC_MAX_SOURCE, &f->source_n))) ||
              head_count(f->head, "records_bytes", (double)body, &rb) || z > body ||
              sz > body - z || rb != body - z - sz ||
              (sz && (!cJSON_IsString(sn) || !f->scene->create_file)) ||
              head_count(f->head, "start_bytes", (double)REC_MAX_START, &start_n) ||
              head_count(f->head, "start_frame", REC_MAX_COUNT, &f->start_frame) ||
              head_count(f->head, "end_frame", REC_MAX_COUNT, &f->end_frame) ||
              head_count(f->head, "start_seq", 4294967295.0, &f->start_seq) ||
              f->end_frame < f->start_frame;
    if (!bad) {
        f->z = p + 12 + jn;
        f->z_n = (size_t)z;
        f->source_z = f->z + f->z_n;
        f->source_z_n = (size_t)sz;
        f->source_name = sz ? sn->valuestring : NULL;
        f->records = f->source_z + f->source_z_n;
        f->records_n = (size_t)rb;
        f->start_n = (size_t)start_n;
        /* What the starting state says it decompresses to, before any of it is allocated. */
        bad = ZSTD_getFrameContentSize(f->z, f->z_n) != start_n;
    }
    if (!bad && f->source_name && f->source_n > (uint64_t)s->cfg.upload_limit) {
        cJSON_Delete(f->head);
        f->head = NULL;
        return snprintf(err, err_sz,
                        "the recording carries a file of %llu bytes: more than --upload-limit "
                        "(%lld), which an upload of it would be held to",
                        (unsigned long long)f->source_n, s->cfg.upload_limit),
               413;
    }
    const cJSON *be = cJSON_GetObjectItemCaseSensitive(f->head, "backend");
    int rc =
        bad ? (snprintf(err, err_sz, "not a recording this server reads (format %d)", REC_FORMAT),
               400)
        : !cJSON_IsString(be) || strcmp(be->valuestring, sim_backend_name(s->backend))
            ? (snprintf(err, err_sz,
                        "recorded on the %s backend; this server steps on %s, which would not "
                        "show the same frames",
                        cJSON_IsString(be) ? be->valuestring : "?", sim_backend_name(s->backend)),
               400)
        : check_records(f, err, err_sz) ? 400
                                        : 0;
    if (rc) {
        cJSON_Delete(f->head);
        f->head = NULL;
    }
    return rc;
}

typedef struct replay_job {
    srv *s;
    srv_session *ss;
    rec_file f;
    uint8_t *file; /* the upload, the job's */
    size_t n;
} replay_job;

/* The session's file, carried by the recording, into a new file of the upload directory
 * (streamed). 0, or -1 with err (nothing left behind). */
static int unpack_source(srv *s, const rec_file *f, char *path, size_t path_sz, char *err,
                         size_t err_sz)
{
    int fd = srv_uploads_temp(s, f->source_name, path, path_sz);
    ZSTD_DCtx *z = fd >= 0 ? ZSTD_createDCtx() : NULL;
    size_t cap = ZSTD_DStreamOutSize();
    uint8_t *buf = malloc(cap);
    uint64_t got = 0;
    int rc = z && buf ? 0 : -1;
    ZSTD_inBuffer ib = {f->source_z, f->source_z_n, 0};
    size_t left = 1;
    while (rc == 0 && ib.pos < ib.size) {
        ZSTD_outBuffer ob = {buf, cap, 0};
        left = ZSTD_decompressStream(z, &ob, &ib);
        got += ob.pos;
        if (ZSTD_isError(left) || got > f->source_n || (ob.pos == 0 && ib.pos < ib.size && left))
            rc = -1;
        if (rc == 0 && srv_write_all(fd, buf, ob.pos) != 0)
            rc = -1;
    }
    if (rc == 0 && (left != 0 || got != f->source_n))
        rc = -1;
    if (rc != 0)
        snprintf(err, err_sz,
                 "the file the recording carries does not decompress to its %llu bytes",
                 (unsigned long long)f->source_n);
    if (fd >= 0)
        close(fd);
    if (fd < 0)
        snprintf(err, err_sz, "cannot make a file for it: %s", strerror(errno));
    else if (rc != 0)
        unlink(path);
    ZSTD_freeDCtx(z);
    free(buf);
    return fd >= 0 && rc == 0 ? 0 : -1;
}

/* The recorded scene built as its session was: from its options, or from the file the
 * recording carries. The scene's status (201 built). */
static int build_scene(srv *s, const rec_file *f, void **data, char *err, size_t err_sz)
{
    if (!f->source_name) {
        const cJSON *opts = cJSON_GetObjectItemCaseSensitive(f->head, "options");
        const cJSON *def = cJSON_GetObjectItemCaseSensitive(f->head, "default");
        if (opts && !cJSON_IsNull(opts) && !cJSON_IsObject(opts)) /* scenes read an object */
            return snprintf(err, err_sz, "its options are not a JSON object"), 400;
        if (def && f->scene->create_default) /* anyone's upload: it may not name a file */
            return f->scene->create_default(s->backend, cJSON_IsNull(opts) ? NULL : opts, def, 0,
                                            data, err, err_sz);
        return f->scene->create(s->backend, cJSON_IsNull(opts) ? NULL : opts, data, err, err_sz);
    }
    char path[1024];
    if (unpack_source(s, f, path, sizeof path, err, err_sz) != 0)
        return 400;
    int status = f->scene->create_file(s->backend, path, f->source_name, srv_stage_ignore, NULL,
                                       data, err, err_sz);
    srv_uploads_hide_path(err, err_sz, path, f->source_name); /* our file names stay ours */
    unlink(path);
    return status;
}

/* The scene at the recording's start and its script, from the file's parts: 201 with *data
 * and *out, or the status with err (nothing left). */
static int replay_build(srv *s, const rec_file *f, void **data, srv_replay **out, char *err,
                        size_t err_sz)
{
    *data = NULL;
    *out = NULL;
    srv_replay *rp = calloc(1, sizeof *rp);
    int status = rp ? build_scene(s, f, data, err, err_sz) : 500;
    /* A scene's state is about what the scene holds: a header that says more is a bomb. */
    size_t most = status == 201 && f->scene->bytes && *data /* a failed build may be half made */
                      ? 2 * f->scene->bytes(*data) + ((size_t)1 << 20)
                      : (size_t)64 << 20;
    if (status == 201 && f->start_n > most)
        status = 400,
        snprintf(err, err_sz, "the recording's state says %zu bytes: more than this scene holds",
                 f->start_n);
    if (status == 201) {
        rp->start = malloc(f->start_n ? f->start_n : 1);
        rp->records = malloc(f->records_n ? f->records_n : 1);
        size_t got =
            rp->start && rp->records ? ZSTD_decompress(rp->start, f->start_n, f->z, f->z_n) : 0;
        if (!rp->start || !rp->records || ZSTD_isError(got) || got != f->start_n)
            status = 400, snprintf(err, err_sz, "the recording's state does not decompress");
        else
            rp->start_n = got;
    }
    if (status == 201 && f->scene->restore(*data, rp->start, rp->start_n, err, err_sz) != 0)
        status = 400;
    if (status == 201 && f->scene->hash &&
        f->scene->hash(*data) != head_hash(f->head, "start_hash"))
        status = 400, snprintf(err, err_sz,
                               "this server does not build the recorded scene as it was (the "
                               "state hash at the start differs: another build or backend?)");
    if (status == 201) {
        memcpy(rp->records, f->records, f->records_n);
        rp->records_n = f->records_n;
        rp->start_frame = f->start_frame;
        rp->end_frame = f->end_frame;
        rp->start_seq = (uint32_t)f->start_seq;
        rp->end_hash = head_hash(f->head, "end_hash");
        rp->start_paused = rp->scene_paused =
            cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(f->head, "start_paused"));
        *out = rp;
        return 201;
    }
    if (*data)
        f->scene->destroy(*data);
    *data = NULL;
    srv_replay_free(rp);
    return status;
}

size_t srv_replay_bytes(const srv_replay *rp)
{
    return rp ? rp->records_n + rp->start_n : 0;
}

/* A replay session at its recording's first frame: paused, its driver starts it. */
void srv_replay_adopted(srv_session *ss, srv_replay *rp)
{
    pthread_mutex_lock(&ss->lock); /* before it is ready: no worker sees it yet */
    ss->replay = rp;
    ss->frame_no = rp->start_frame;
    ss->paused = 1;
    ss->last_seq = rp->start_seq;
    pthread_mutex_unlock(&ss->lock);
}

/* The scene at the recording's start, and its script (a builder). Under --state-dir the
 * recording is kept (DIR/files), so that the replay comes back after a restart. */
static void build_replay(void *arg)
{
    replay_job *j = arg;
    srv *s = j->s;
    char err[512] = "";
    void *data = NULL;
    srv_replay *rp = NULL;
    if (replay_build(s, &j->f, &data, &rp, err, sizeof err) == 201) {
        srv_replay_adopted(j->ss, rp);
        j->ss->origin = srv_origin_recording(s, j->ss->id, j->file, j->n);
    }
    srv_session_loaded(s, j->ss, data, err);
    cJSON_Delete(j->f.head);
    free(j->file);
    free(j);
}

int srv_replay_rebuild(srv *s, const uint8_t *file, size_t n, const srv_scene_i **scene,
                       void **data, srv_replay **rp, char *err, size_t err_sz)
{
    rec_file f;
    memset(&f, 0, sizeof f);
    int status = read_file_parts(s, file, n, &f, err, err_sz);
    if (status == 0)
        status = replay_build(s, &f, data, rp, err, err_sz);
    *scene = f.scene;
    cJSON_Delete(f.head);
    return status;
}

srv_session *srv_replay_create(srv *s, uint8_t *file, size_t n, const char *owner, int *status,
                               char *err, size_t err_sz)
{
    replay_job *j = calloc(1, sizeof *j);
    if (!j) {
        free(file);
        *status = 500;
        snprintf(err, err_sz, "out of memory");
        return NULL;
    }
    *status = read_file_parts(s, file, n, &j->f, err, err_sz);
    srv_session *ss =
        *status ? NULL : srv_session_create_loading(s, j->f.scene, owner, err, err_sz, status);
    if (!ss) {
        cJSON_Delete(j->f.head);
        free(file);
        free(j);
        return NULL;
    }
    ss->user_named = j->f.source_name != NULL; /* the file it carries has its user's name */
    j->s = s;
    j->ss = ss;
    j->file = file;
    j->n = n;
    srv_session_hold(s, ss); /* the caller's, for its answer */
    if (srv_build_submit(s, build_replay, j) != 0) {
        srv_session_loaded(s, ss, NULL, "the server is stopping");
        cJSON_Delete(j->f.head);
        free(file);
        free(j);
    }
    *status = 202;
    return ss;
}

/* The records of this frame, applied as the worker applied them. */
static void apply_records(srv *s, srv_session *ss, srv_replay *rp)
{
    srv_record h;
    const uint8_t *payload;
    size_t at = rp->at;
    while (srv_record_get(rp->records, rp->records_n, &at, ss->scene, 0, &h, &payload) == 0 &&
           h.frame <= ss->frame_no) {
        rp->at = at;
        if (h.kind == SRV_ITEM_PAUSE || h.kind == SRV_ITEM_RESUME) {
            rp->scene_paused = h.kind == SRV_ITEM_PAUSE;
        } else if (h.kind >= SRV_ITEM_SCENE) {
            _Alignas(8) unsigned char data[SRV_EVENT_MAX] = {0};
            memcpy(data, payload, h.size);
            srv_event ev = {h.client, h.seq, data, h.size};
            srv_scene_ctx c;
            srv_quiet_ctx(s, &c, ss->frame_no, ss->id);
            ss->scene->events[h.kind - SRV_ITEM_SCENE].apply(&c, ss->scene_data, &ev);
        }
        if (!(h.flags & SRV_EV_QUERY)) {
            pthread_mutex_lock(&ss->lock);
            ss->last_seq = h.seq;
            pthread_mutex_unlock(&ss->lock);
        }
    }
}

/* The last frame reached: paused there, its state hash against the recorded one. */
static void replay_end(srv_session *ss, srv_replay *rp)
{
    uint64_t h = ss->scene->hash ? ss->scene->hash(ss->scene_data) : 0;
    pthread_mutex_lock(&ss->lock);
    rp->ended = 1;
    rp->same = h == rp->end_hash;
    ss->paused = 1;
    ss->state_version++;
    pthread_mutex_unlock(&ss->lock);
    fprintf(stderr,
            "softcast-server: replay %s ended at frame %llu: state hash %016llx, recorded "
            "%016llx (%s)\n",
            ss->id, (unsigned long long)ss->frame_no, (unsigned long long)h,
            (unsigned long long)rp->end_hash, rp->same ? "the same" : "DIFFERENT");
}

/* One frame of the recording: its records, then its step (not at the last frame, where the
 * replay ends). Returns 1 when the view changed. */
static int frame_once(srv *s, srv_session *ss, srv_replay *rp, srv_scene_ctx *c, double *ms,
                      int *ended)
{
    apply_records(s, ss, rp);
    if (ss->frame_no >= rp->end_frame) {
        replay_end(ss, rp); /* no frame past the last: a client sees each number once */
        *ended = 1;
        return 0;
    }
    int moved = !rp->scene_paused && ss->scene->step(c, ss->scene_data, ms);
    ss->frame_no++;
    return moved || !rp->scene_paused;
}

#define SEEK_SLICE_MS 30.0 /* a seek's frames a beat: its worker stays the others' too */

/* A seek's frames, unseen, for at most SEEK_SLICE_MS. Returns 1 while it is on its way. */
static int seek_on(srv *s, srv_session *ss, srv_replay *rp)
{
    double t0 = srv_now_ms(), ms;
    int ended = 0;
    while (ss->frame_no < rp->seek_to && !rp->ended && !atomic_load(&s->stop)) {
        srv_scene_ctx q;
        srv_quiet_ctx(s, &q, ss->frame_no, ss->id);
        (void)frame_once(s, ss, rp, &q, &ms, &ended);
        if (srv_now_ms() - t0 > SEEK_SLICE_MS)
            return ss->frame_no < rp->seek_to && !rp->ended;
    }
    rp->seek_to = 0;
    return 0;
}

int srv_replay_frame(srv *s, srv_session *ss, srv_scene_ctx *c, int paused, double *ms, int *ended)
{
    srv_replay *rp = ss->replay;
    *ms = 0;
    if (rp->seek_to) /* shown once there, paused or not */
        return !seek_on(s, ss, rp);
    if (paused || rp->ended)
        return 0;
    return frame_once(s, ss, rp, c, ms, ended);
}

void srv_replay_seek(srv *s, srv_session *ss, srv_scene_ctx *c, const srv_item *h,
                     const void *payload)
{
    (void)s;
    srv_replay *rp = ss->replay;
    uint64_t to;
    memcpy(&to, payload, sizeof to);
    if (!rp || to < rp->start_frame || to > rp->end_frame) {
        char d[160];
        snprintf(d, sizeof d,
                 rp ? "frame %llu is outside this replay's %llu to %llu" : "only a replay seeks",
                 (unsigned long long)to, (unsigned long long)(rp ? rp->start_frame : 0),
                 (unsigned long long)(rp ? rp->end_frame : 0));
        c->error(c, h->client, h->seq, "bad seek", d);
        return;
    }
    if (to < ss->frame_no || rp->ended) { /* back to the start, then forward */
        char err[256];
        if (ss->scene->restore(ss->scene_data, rp->start, rp->start_n, err, sizeof err) != 0) {
            c->error(c, h->client, h->seq, "bad seek", err);
            return;
        }
        ss->frame_no = rp->start_frame;
        srv_session_rewind(ss);
        rp->at = 0;
        rp->scene_paused = rp->start_paused;
        pthread_mutex_lock(&ss->lock);
        rp->ended = 0;
        ss->last_seq = rp->start_seq;
        pthread_mutex_unlock(&ss->lock);
    }
    rp->seek_to = to > ss->frame_no ? to : 0; /* stepped there over the next beats */
    pthread_mutex_lock(&ss->lock);
    ss->state_version++;
    pthread_mutex_unlock(&ss->lock);
}

void srv_replay_describe(srv_session *ss, cJSON *j)
{
    srv_replay *rp = ss->replay;
    if (!rp)
        return;
    cJSON *r = cJSON_AddObjectToObject(j, "replay");
    cJSON_AddNumberToObject(r, "start_frame", (double)rp->start_frame);
    cJSON_AddNumberToObject(r, "end_frame", (double)rp->end_frame);
    cJSON_AddBoolToObject(r, "ended", rp->ended);
    if (rp->ended)
        cJSON_AddBoolToObject(r, "same_state", rp->same);
}
