/* session.c: the session table. Sessions live in fixed slots with generations, so a
 * stale id is "unknown session", never a use-after-free (Box2D's b2BodyId). HTTP and
 * WebSocket threads hold references; only the worker frees a session, once it is closing
 * and nobody holds it. It calls no other thread's code by name: an event pushed pokes the
 * worker through srv.on_event, news reaches the WebSocket thread through srv.on_news. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "scene.h"
#include "sim/core/sc_base.h"

double srv_now_ms(void)
{
    return sc_now_ms();
}

/* A session id's slot and generation: "s<slot>-<generation>-<random>", after the process
 * name and its dot when there is one (--process-name). 0 when it is one. */
static int id_numbers(const char *id, unsigned *slot, unsigned *gen)
{
    const char *dot = strrchr(id, '.');
    return sscanf(dot ? dot + 1 : id, "s%u-%u-", slot, gen) == 2 ? 0 : -1;
}

int srv_random_hex(char *out, size_t nbytes)
{
    unsigned char b[64];
    if (nbytes > sizeof b)
        nbytes = sizeof b;
    size_t got = 0;
    while (got < nbytes) {
        ssize_t r = getrandom(b + got, nbytes - got, 0);
        if (r < 0 && errno != EINTR)
            return -1; /* no fallback: a guessable token is worse than no session */
        if (r > 0)
            got += (size_t)r;
    }
    for (size_t i = 0; i < nbytes; i++)
        snprintf(out + 2 * i, 3, "%02x", b[i]);
    return 0;
}

int srv_token_equal(const char *given, const char *token)
{
    /* Every byte of the secret is looked at whatever the guess, so the time taken tells
     * nothing about how much of it was right. */
    size_t n = strlen(token);
    unsigned char diff = given ? 0 : 1;
    size_t glen = given ? strnlen(given, n + 1) : 0;
    diff |= (unsigned char)(glen != n);
    for (size_t i = 0; i < n; i++)
        diff |= (unsigned char)((i < glen ? (unsigned char)given[i] : 0) ^ (unsigned char)token[i]);
    return diff == 0;
}

srv_frame *srv_frame_new(const uint8_t *bytes, size_t len, uint64_t frame, uint32_t flags)
{
    srv_frame *f = calloc(1, sizeof *f);
    if (!f)
        return NULL;
    f->data = malloc(SRV_FRAME_HEADROOM + len);
    if (!f->data) {
        free(f);
        return NULL;
    }
    memcpy(f->data + SRV_FRAME_HEADROOM, bytes, len);
    f->len = len;
    f->frame = frame;
    f->flags = flags;
    atomic_init(&f->refs, 1);
    return f;
}

void srv_frame_ref(srv_frame *f)
{
    atomic_fetch_add(&f->refs, 1);
}

void srv_frame_unref(srv_frame *f)
{
    if (f && atomic_fetch_sub(&f->refs, 1) == 1) {
        free(f->data);
        free(f);
    }
}

int srv_sessions_init(srv *s)
{
    int n = s->cfg.max_sessions;
    s->slots = calloc((size_t)n, sizeof *s->slots);
    s->generation = calloc((size_t)n, sizeof *s->generation);
    s->refs = calloc((size_t)n, sizeof *s->refs);
    if (!s->slots || !s->generation || !s->refs)
        return -1;
    return pthread_mutex_init(&s->lock, NULL) == 0 ? 0 : -1;
}

static void session_free(srv_session *ss)
{
    for (int i = 0; i < ss->nmail; i++) {
        srv_frame_unref(ss->mail[i].frame);
        free(ss->mail[i].text);
    }
    proto_encoder_destroy(ss->enc);
    proto_buf_free(&ss->enc_buf);
    free(ss->query);
    if (ss->scene && ss->scene_data)
        ss->scene->destroy(ss->scene_data);
    srv_durable_close(ss);
    srv_recording_free(ss);
    free(ss->origin);
    free(ss->params_json);
    free(ss->load_error);
    srv_frame_unref(ss->latest);
    srv_frame_unref(ss->snapshot);
    for (int i = 0; i < ss->nchain; i++)
        srv_frame_unref(ss->chain[(ss->chain_head + i) % SRV_CHAIN]);
    pthread_mutex_destroy(&ss->lock);
    free(ss);
}

void srv_sessions_fini(srv *s)
{
    for (int i = 0; s->slots && i < s->cfg.max_sessions; i++)
        if (s->slots[i])
            session_free(s->slots[i]);
    free(s->slots);
    free(s->generation);
    free(s->refs);
    pthread_mutex_destroy(&s->lock);
}

/* 1 when the table holds its limit (deleted sessions nobody holds are freed first). */
static int table_full(srv *s)
{
    pthread_mutex_lock(&s->lock);
    int full = s->nsessions >= s->cfg.max_sessions;
    pthread_mutex_unlock(&s->lock);
    if (full) {
        /* Deleted sessions nobody holds free their slots now, not at the next frame. */
        srv_sessions_reap(s);
        pthread_mutex_lock(&s->lock);
        full = s->nsessions >= s->cfg.max_sessions;
        pthread_mutex_unlock(&s->lock);
    }
    return full;
}

/* Live sessions made from this address (srv.lock held), and of them *failed those that failed
 * (listed a while with why: they hold a slot of the table until the reaper frees them).
 * Closing ones are on their way out: a client that deletes its session may make another at
 * once. */
static int owned_locked(srv *s, const char *owner, int *failed)
{
    int n = 0;
    *failed = 0;
    for (int i = 0; owner[0] && i < s->cfg.max_sessions; i++) {
        srv_session *ss = s->slots[i];
        if (!ss || strcmp(ss->owner, owner) != 0)
            continue;
        pthread_mutex_lock(&ss->lock);
        n += !ss->closing;
        *failed += !ss->closing && ss->load_state == SRV_FAILED;
        pthread_mutex_unlock(&ss->lock);
    }
    return n;
}

static size_t budget_bytes(const srv *s)
{
    return (size_t)s->cfg.memory_budget_mib << 20;
}

/* Charge a session's bytes to the budget for all sessions (srv.lock held): 0, or 503 with
 * err when they do not fit (the session is then refused, the others untouched). */
static int charge_locked(srv *s, srv_session *ss, size_t bytes, char *err, size_t err_sz)
{
    size_t budget = budget_bytes(s);
    if (budget && s->bytes_in_use + bytes > budget) {
        snprintf(err, err_sz,
                 "memory budget: this session needs %zu MiB and sessions hold %zu of the "
                 "server's %d MiB (--memory-budget)",
                 (bytes + (1u << 20) - 1) >> 20, s->bytes_in_use >> 20, s->cfg.memory_budget_mib);
        return 503;
    }
    s->bytes_in_use += bytes;
    ss->bytes = bytes;
    return 0;
}

int srv_session_charge_more(srv *s, srv_session *ss, size_t add, char *err, size_t err_sz)
{
    pthread_mutex_lock(&s->lock);
    size_t budget = budget_bytes(s);
    int full = budget && s->bytes_in_use + add > budget;
    if (full)
        snprintf(err, err_sz,
                 "memory budget: it needs %zu MiB more and sessions hold %zu of the server's "
                 "%d MiB (--memory-budget)",
                 (add + (1u << 20) - 1) >> 20, s->bytes_in_use >> 20, s->cfg.memory_budget_mib);
    else
        s->bytes_in_use += add, ss->bytes += add;
    pthread_mutex_unlock(&s->lock);
    return full ? 503 : 0;
}

void srv_session_refund(srv *s, srv_session *ss, size_t sub)
{
    pthread_mutex_lock(&s->lock);
    sub = sub < ss->bytes ? sub : ss->bytes;
    s->bytes_in_use -= sub;
    ss->bytes -= sub;
    pthread_mutex_unlock(&s->lock);
}

/* 0, or with err: 503 when this process has no room (its table is full, or the sessions
 * hold the whole memory budget: a router tries another process), 429 when owner holds its
 * share (srv.lock held). */
static int room_locked(srv *s, const char *owner, char *err, size_t err_sz)
{
    if (budget_bytes(s) && s->bytes_in_use >= budget_bytes(s)) {
        snprintf(err, err_sz,
                 "memory budget: sessions hold all of the server's %d MiB "
                 "(--memory-budget): try again when one has gone",
                 s->cfg.memory_budget_mib);
        return 503;
    }
    if (s->nsessions >= s->cfg.max_sessions) {
        snprintf(err, err_sz, "the server holds its limit of %d sessions", s->cfg.max_sessions);
        return 503;
    }
    int failed;
    if (owner[0] && owned_locked(s, owner, &failed) >= s->cfg.max_sessions_per_address) {
        char of[160] = "";
        if (failed)
            snprintf(of, sizeof of,
                     "; %d of them failed, and each is freed %.0f s after it failed (or "
                     "delete it)",
                     failed, SRV_FAILED_KEEP_MS / 1000.0);
        snprintf(err, err_sz,
                 "this address holds its limit of %d sessions (--max-sessions-per-address): "
                 "delete one, or let one without clients expire%s",
                 s->cfg.max_sessions_per_address, of);
        return 429;
    }
    return 0;
}

int srv_session_room(srv *s, const char *owner, char *err, size_t err_sz)
{
    owner = owner ? owner : "";
    if (table_full(s)) {
        snprintf(err, err_sz, "the server holds its limit of %d sessions", s->cfg.max_sessions);
        return 503;
    }
    pthread_mutex_lock(&s->lock);
    int rc = room_locked(s, owner, err, err_sz);
    pthread_mutex_unlock(&s->lock);
    return rc;
}

/* A session of the scene with its encoder, without tokens or scene data (NULL: no memory). */
static srv_session *session_alloc(srv *s, const srv_scene_i *scene, const char *owner)
{
    srv_session *ss = calloc(1, sizeof *ss);
    if (!ss)
        return NULL;
    pthread_mutex_init(&ss->lock, NULL);
    ss->scene = scene;
    snprintf(ss->owner, sizeof ss->owner, "%s", owner ? owner : "");
    ss->keep = !ss->owner[0];
    ss->idle_since_ms = srv_now_ms();
    ss->drive_tokens = s->cfg.max_events_per_s;
    ss->view_tokens = s->cfg.max_view_events_per_s;
    ss->drive_refill_ms = ss->view_refill_ms = srv_now_ms();
    ss->query_cap = s->cfg.max_clients_per_session;
    ss->query = calloc((size_t)ss->query_cap, sizeof *ss->query);
    if (!ss->query) {
        session_free(ss);
        return NULL;
    }
    proto_encoder_options eo = proto_default_encoder_options();
    eo.key_every = (uint32_t)s->cfg.keyframe_every;
    if (proto_encoder_create(&ss->enc, &eo) != PROTO_OK) {
        session_free(ss);
        return NULL;
    }
    return ss;
}

/* A new session of the scene without its scene data yet: tokens and encoder. */
static srv_session *session_new(srv *s, const srv_scene_i *scene, const char *owner, char *err,
                                size_t err_sz, int *http_status)
{
    *http_status = srv_session_room(s, owner, err, err_sz);
    if (*http_status) /* checked again when a slot is taken; this only spares the build */
        return NULL;
    *http_status = 500;
    srv_session *ss = session_alloc(s, scene, owner);
    if (!ss) {
        snprintf(err, err_sz, "out of memory");
        return NULL;
    }
    if (srv_random_hex(ss->control_token, 16) || srv_random_hex(ss->view_token, 16)) {
        *http_status = 503;
        snprintf(err, err_sz, "no random source for the session's tokens");
        session_free(ss);
        return NULL;
    }
    return ss;
}

/* Put ss into a free slot (refs: the references its creator keeps). 201, or 503 (ss is
 * then the caller's to free). */
static int session_insert(srv *s, srv_session *ss, int refs, char *err, size_t err_sz)
{
    pthread_mutex_lock(&s->lock);
    int slot = -1;
    for (int i = 0; i < s->cfg.max_sessions; i++)
        if (!s->slots[i]) {
            slot = i;
            break;
        }
    int full = room_locked(s, ss->owner, err, err_sz);
    if (!full && ss->scene_data) /* built already (srv_session_create): its bytes count now */
        full = charge_locked(s, ss, ss->scene->bytes ? ss->scene->bytes(ss->scene_data) : 0, err,
                             err_sz);
    if (slot < 0 || full) {
        pthread_mutex_unlock(&s->lock);
        if (!full)
            snprintf(err, err_sz, "the server holds its limit of %d sessions", s->cfg.max_sessions);
        return full ? full : 503;
    }
    ss->slot = (uint32_t)slot;
    ss->generation = ++s->generation[slot];
    char rnd[9] = "0";
    (void)srv_random_hex(rnd, 4); /* the tokens are the secrets; this only tells ids apart */
    const char *name = s->cfg.process_name;
    snprintf(ss->id, sizeof ss->id, "%s%ss%u-%u-%s", name, name[0] ? "." : "", ss->slot,
             ss->generation, rnd);
    s->slots[slot] = ss;
    s->refs[slot] = refs;
    s->nsessions++;
    pthread_mutex_unlock(&s->lock);
    return 201;
}

srv_session *srv_session_create(srv *s, const srv_scene_i *scene, const struct cJSON *opts,
                                const char *owner, char *err, size_t err_sz, int *http_status)
{
    srv_session *ss = session_new(s, scene, owner, err, err_sz, http_status);
    if (!ss)
        return NULL;
    *http_status = scene->create(s->backend, opts, &ss->scene_data, err, err_sz);
    if (*http_status != 201)
        goto fail;
    *http_status = 500;
    ss->params_json = scene->params_json(ss->scene_data);
    if (!ss->params_json) {
        snprintf(err, err_sz, "out of memory");
        goto fail;
    }
    ss->origin = srv_origin_options(scene, ss->scene_data, opts);
    ss->load_state = SRV_LOADING; /* no worker takes it until it is kept (durable.c) */
    *http_status = session_insert(s, ss, 0, err, err_sz);
    if (*http_status == 201) {
        (void)srv_durable_begin(s, ss);
        pthread_mutex_lock(&ss->lock);
        ss->load_state = SRV_READY;
        pthread_mutex_unlock(&ss->lock);
        return ss;
    }
fail:
    session_free(ss);
    return NULL;
}

srv_session *srv_session_adopt(srv *s, const srv_session_saved *sv, void *scene_data, char *err,
                               size_t err_sz)
{
    unsigned slot, gen;
    if (id_numbers(sv->id, &slot, &gen) != 0 || strlen(sv->id) >= SRV_ID_LEN ||
        strlen(sv->control_token) >= SRV_TOKEN_LEN || strlen(sv->view_token) >= SRV_TOKEN_LEN) {
        snprintf(err, err_sz, "not a session id with its tokens");
        return NULL;
    }
    if (slot >= (unsigned)s->cfg.max_sessions) {
        snprintf(err, err_sz, "its slot %u is past --max-sessions %d", slot, s->cfg.max_sessions);
        return NULL;
    }
    srv_session *ss = session_alloc(s, sv->scene, sv->owner);
    char *pj = ss ? sv->scene->params_json(scene_data) : NULL;
    if (!pj) {
        snprintf(err, err_sz, "out of memory");
        if (ss)
            session_free(ss);
        return NULL;
    }
    snprintf(ss->id, sizeof ss->id, "%s", sv->id);
    snprintf(ss->control_token, sizeof ss->control_token, "%s", sv->control_token);
    snprintf(ss->view_token, sizeof ss->view_token, "%s", sv->view_token);
    ss->keep = sv->keep;
    ss->params_json = pj;
    ss->frame_no = sv->frame;
    ss->paused = sv->paused;
    ss->last_seq = sv->last_seq;
    pthread_mutex_lock(&s->lock);
    int rc = s->slots[slot] ? -1 : 0;
    if (rc)
        snprintf(err, err_sz, "its slot %u is taken by %s", slot, s->slots[slot]->id);
    else if (charge_locked(s, ss,
                           (sv->scene->bytes ? sv->scene->bytes(scene_data) : 0) + sv->extra_bytes,
                           err, err_sz))
        rc = -1;
    if (rc == 0) {
        ss->scene_data = scene_data;
        ss->slot = slot;
        ss->generation = gen;
        if (s->generation[slot] < gen)
            s->generation[slot] = gen;
        s->slots[slot] = ss;
        s->nsessions++;
    }
    pthread_mutex_unlock(&s->lock);
    if (rc) {
        session_free(ss); /* scene_data stays the caller's */
        return NULL;
    }
    return ss;
}

srv_session *srv_session_create_loading(srv *s, const srv_scene_i *scene, const char *owner,
                                        char *err, size_t err_sz, int *http_status)
{
    srv_session *ss = session_new(s, scene, owner, err, err_sz, http_status);
    if (!ss)
        return NULL;
    ss->load_state = SRV_LOADING;
    snprintf(ss->load_stage, sizeof ss->load_stage, "queued");
    *http_status = session_insert(s, ss, 1, err, err_sz);
    if (*http_status == 201)
        return ss;
    session_free(ss);
    return NULL;
}

void srv_session_hold(srv *s, srv_session *ss)
{
    pthread_mutex_lock(&s->lock);
    s->refs[ss->slot]++;
    pthread_mutex_unlock(&s->lock);
}

void srv_session_discard(srv *s, srv_session *ss)
{
    pthread_mutex_lock(&ss->lock);
    ss->closing = 1;
    pthread_mutex_unlock(&ss->lock);
    s->on_news(s, ss->slot);
}

void srv_session_stage(srv_session *ss, const char *stage)
{
    pthread_mutex_lock(&ss->lock);
    snprintf(ss->load_stage, sizeof ss->load_stage, "%s", stage);
    pthread_mutex_unlock(&ss->lock);
}

int srv_session_loaded(srv *s, srv_session *ss, void *scene_data, const char *err)
{
    char over[256] = "";
    int status = scene_data ? 201 : 500;
    if (scene_data) { /* what it holds, against what all sessions may (a replay: its script too) */
        size_t bytes =
            (ss->scene->bytes ? ss->scene->bytes(scene_data) : 0) + srv_replay_bytes(ss->replay);
        pthread_mutex_lock(&s->lock);
        if (charge_locked(s, ss, bytes, over, sizeof over)) {
            ss->scene->destroy(scene_data);
            scene_data = NULL;
            err = over;
            status = 503;
        }
        pthread_mutex_unlock(&s->lock);
    }
    char *pj = scene_data ? ss->scene->params_json(scene_data) : NULL;
    char *why = pj ? NULL : strdup(err && err[0] ? err : "out of memory");
    if (!pj && scene_data) {
        ss->scene->destroy(scene_data);
        scene_data = NULL;
    }
    if (!pj) /* never ready: nothing of it is kept */
        srv_origin_forget(s, ss);
    if (pj) /* kept across restarts from now on: before a worker may step it */
        (void)srv_durable_begin(s, ss);
    pthread_mutex_lock(&ss->lock);
    ss->scene_data = scene_data;
    ss->params_json = pj;
    ss->load_error = why;
    ss->load_state = pj ? SRV_READY : SRV_FAILED;
    ss->failed_ms = ss->idle_since_ms = srv_now_ms(); /* idle from when it can be joined */
    pthread_mutex_unlock(&ss->lock);
    srv_session_put(s, ss); /* the loader's reference */
    return pj ? 201 : status == 201 ? 500 : status;
}

/* "[PROCESS.]s<slot>-<generation>-<random>" to the live session with exactly that id. */
static srv_session *lookup_locked(srv *s, const char *id)
{
    unsigned slot, gen;
    if (!id || id_numbers(id, &slot, &gen) != 0 || slot >= (unsigned)s->cfg.max_sessions)
        return NULL;
    srv_session *ss = s->slots[slot];
    if (!ss || ss->generation != gen || strcmp(ss->id, id) != 0)
        return NULL;
    return ss;
}

srv_session *srv_session_get(srv *s, const char *id)
{
    pthread_mutex_lock(&s->lock);
    srv_session *ss = lookup_locked(s, id);
    if (ss) {
        pthread_mutex_lock(&ss->lock);
        int closing = ss->closing;
        pthread_mutex_unlock(&ss->lock);
        if (closing)
            ss = NULL;
        else
            s->refs[ss->slot]++;
    }
    pthread_mutex_unlock(&s->lock);
    return ss;
}

void srv_session_put(srv *s, srv_session *ss)
{
    if (!ss)
        return;
    pthread_mutex_lock(&s->lock);
    s->refs[ss->slot]--;
    pthread_mutex_unlock(&s->lock);
}

int srv_session_delete(srv *s, const char *id, const char *token)
{
    pthread_mutex_lock(&s->lock);
    srv_session *ss = lookup_locked(s, id);
    int rc = 404;
    uint32_t slot = ss ? ss->slot : 0; /* ss may be freed once the lock is let go */
    if (ss) {
        rc = srv_token_equal(token, ss->control_token) ? 204 : 403;
        if (rc == 204) {
            pthread_mutex_lock(&ss->lock);
            ss->closing = 1;
            pthread_mutex_unlock(&ss->lock);
        }
    }
    pthread_mutex_unlock(&s->lock);
    if (rc == 204)
        s->on_news(s, slot); /* clients get their close frames */
    return rc;
}

int srv_session_push(srv *s, srv_session *ss, const srv_item *h, const void *payload)
{
    srv_item it = *h;
    it.arrived_ms = srv_now_ms();
    pthread_mutex_lock(&ss->lock);
    int rc = srv_inbox_push(&ss->inbox, &it, payload);
    if (rc == 0) {
        ss->events++;
        ss->at_rest = 0; /* until a frame that applied nothing says otherwise */
    }
    pthread_mutex_unlock(&ss->lock);
    if (rc == 0)
        s->on_event(s, ss->slot);
    return rc;
}

/* Keep a structural frame in the ring (the lock held); the oldest go when it is full or
 * holds too many bytes. Returns the frames to unreference, NULL-terminated in out. */
static void chain_push(srv_session *ss, srv_frame *f, srv_frame **out)
{
    int nout = 0;
    while (ss->nchain > 0 &&
           (ss->nchain == SRV_CHAIN || ss->chain_bytes + f->len > SRV_CHAIN_BYTES)) {
        srv_frame *old = ss->chain[ss->chain_head];
        ss->chain_lost = old->frame > ss->chain_lost ? old->frame : ss->chain_lost;
        ss->chain_bytes -= old->len;
        ss->chain_head = (ss->chain_head + 1) % SRV_CHAIN;
        ss->nchain--;
        out[nout++] = old;
    }
    srv_frame_ref(f);
    ss->chain[(ss->chain_head + ss->nchain) % SRV_CHAIN] = f;
    ss->nchain++;
    ss->chain_bytes += f->len;
    out[nout] = NULL;
}

void srv_session_publish(srv_session *ss, srv_frame *f)
{
    srv_frame *drop[SRV_CHAIN + 3] = {NULL};
    pthread_mutex_lock(&ss->lock);
    srv_frame *old = ss->latest, *oldsnap = NULL;
    ss->latest = f;
    if (f->flags & PROTO_FLAG_STRUCTURAL)
        chain_push(ss, f, drop);
    if (f->flags & PROTO_FLAG_SNAPSHOT) {
        oldsnap = ss->snapshot;
        srv_frame_ref(f);
        ss->snapshot = f;
    }
    pthread_mutex_unlock(&ss->lock);
    srv_frame_unref(old);
    srv_frame_unref(oldsnap);
    for (int i = 0; drop[i]; i++)
        srv_frame_unref(drop[i]);
}

void srv_session_rewind(srv_session *ss)
{
    srv_frame *drop[SRV_CHAIN + 2] = {NULL};
    int n = 0;
    pthread_mutex_lock(&ss->lock);
    drop[n++] = ss->latest;
    drop[n++] = ss->snapshot;
    for (int i = 0; i < ss->nchain; i++)
        drop[n++] = ss->chain[(ss->chain_head + i) % SRV_CHAIN];
    ss->latest = ss->snapshot = NULL;
    ss->nchain = ss->chain_head = 0;
    ss->chain_bytes = 0;
    ss->chain_lost = 0;
    ss->epoch++;
    pthread_mutex_unlock(&ss->lock);
    for (int i = 0; i < n; i++)
        srv_frame_unref(drop[i]);
    proto_encoder_reset(ss->enc); /* the next frame keys everything: where clients start */
    ss->encoded_any = 0;
}

void srv_session_publish_snapshot(srv_session *ss, srv_frame *f)
{
    pthread_mutex_lock(&ss->lock);
    srv_frame *old = ss->snapshot;
    ss->snapshot = f;
    pthread_mutex_unlock(&ss->lock);
    srv_frame_unref(old);
}

/* Drop mail k (the lock held). */
static void mail_drop(srv_session *ss, int k)
{
    srv_frame_unref(ss->mail[k].frame);
    free(ss->mail[k].text);
    memmove(&ss->mail[k], &ss->mail[k + 1], (size_t)(ss->nmail - k - 1) * sizeof ss->mail[0]);
    ss->nmail--;
}

/* Which mail goes to make room for one to client (the lock held): that client's oldest when
 * it has its share waiting; when the mailbox is full, the oldest to anyone but the driver
 * (the oldest of all when the driver's fill it). -1: none needs to. */
static int mail_victim(const srv_session *ss, uint32_t client)
{
    int mine = 0, first_mine = -1, first_other = -1;
    for (int i = 0; i < ss->nmail; i++) {
        uint32_t to = ss->mail[i].client;
        if (to == client && mine++ == 0)
            first_mine = i;
        if (to != ss->driver && first_other < 0)
            first_other = i;
    }
    if (mine >= SRV_MAIL_PER_CLIENT)
        return first_mine;
    if (ss->nmail < SRV_MAILBOX)
        return -1;
    return first_other >= 0 ? first_other : 0;
}

void srv_session_reply(srv_session *ss, uint32_t client, srv_frame *f, const char *text)
{
    pthread_mutex_lock(&ss->lock);
    int k = mail_victim(ss, client);
    if (k >= 0) /* the WebSocket thread fell behind this client */
        mail_drop(ss, k);
    ss->mail[ss->nmail].client = client;
    ss->mail[ss->nmail].frame = f;
    ss->mail[ss->nmail].text = text ? strdup(text) : NULL;
    ss->nmail++;
    pthread_mutex_unlock(&ss->lock);
}

int srv_session_query(srv *s, srv_session *ss, const srv_item *h, const void *payload)
{
    if (h->size > SRV_QUERY_BYTES)
        return -1;
    pthread_mutex_lock(&ss->lock);
    int k = 0;
    while (k < ss->nquery && ss->query[k].h.client != h->client)
        k++;
    int rc = 0;
    if (k < ss->nquery) { /* latest wins, in the older one's place in line */
        ss->queries_replaced++;
    } else if (ss->nquery == ss->query_cap) {
        rc = -1;
    } else {
        ss->nquery++;
    }
    if (rc == 0) {
        ss->query[k].h = *h;
        ss->query[k].h.arrived_ms = srv_now_ms();
        memcpy(ss->query[k].data, payload, h->size);
        ss->events++;
    }
    pthread_mutex_unlock(&ss->lock);
    if (rc == 0)
        s->on_event(s, ss->slot);
    return rc;
}

int srv_session_take_queries(srv_session *ss, unsigned char *out, int max)
{
    int n = ss->nquery < max ? ss->nquery : max;
    for (int i = 0; i < n; i++) {
        memcpy(out, &ss->query[i].h, sizeof(srv_item));
        memcpy(out + sizeof(srv_item), ss->query[i].data, ss->query[i].h.size);
        out += SRV_ITEM_BYTES(ss->query[i].h.size);
    }
    memmove(&ss->query[0], &ss->query[n], (size_t)(ss->nquery - n) * sizeof ss->query[0]);
    ss->nquery -= n;
    return n;
}

void srv_session_error(srv *s, srv_session *ss, uint32_t client, uint32_t seq, const char *error,
                       const char *detail)
{
    char text[1536];
    srv_error_json(text, sizeof text, seq, error, detail);
    srv_session_reply(ss, client, NULL, text);
    pthread_mutex_lock(&ss->lock);
    ss->errors++;
    pthread_mutex_unlock(&ss->lock);
    atomic_fetch_add(&s->total_errors, 1);
}

void srv_session_news(srv *s, srv_session *ss)
{
    s->on_news(s, ss->slot);
}

/* A ready session nobody has watched for --idle-expiry seconds closes (the lock held): a
 * table filled and forgotten empties by itself. The operator's own session stays. */
static int expire_idle_locked(srv *s, srv_session *ss, double now)
{
    double limit_ms = 1000.0 * s->cfg.idle_expiry_s;
    if (limit_ms <= 0 || ss->keep || ss->closing || ss->load_state != SRV_READY ||
        ss->nclients > 0 || now - ss->idle_since_ms < limit_ms)
        return 0;
    ss->closing = 1;
    fprintf(stderr, "softcast-server: session %s: no clients for %d s, closed (--idle-expiry)\n",
            ss->id, s->cfg.idle_expiry_s);
    return 1;
}

/* The worker frees closing sessions nobody holds; called with no session lock held. */
void srv_sessions_reap(srv *s)
{
    double now = srv_now_ms();
    for (int i = 0; i < s->cfg.max_sessions; i++) {
        srv_session *dead = NULL;
        pthread_mutex_lock(&s->lock);
        srv_session *ss = s->slots[i];
        if (ss) {
            pthread_mutex_lock(&ss->lock);
            expire_idle_locked(s, ss, now);
            pthread_mutex_unlock(&ss->lock);
        }
        if (ss && s->refs[i] == 0) {
            pthread_mutex_lock(&ss->lock);
            /* A session that failed to load is shown for a while (its creator polls for the
             * reason), then freed. */
            int failed =
                ss->load_state == SRV_FAILED && srv_now_ms() - ss->failed_ms > SRV_FAILED_KEEP_MS;
            int closing = (ss->closing || failed) && ss->nclients == 0;
            pthread_mutex_unlock(&ss->lock);
            if (closing) {
                s->slots[i] = NULL;
                s->nsessions--;
                s->bytes_in_use -= ss->bytes;
                dead = ss;
            }
        }
        pthread_mutex_unlock(&s->lock);
        if (dead) {
            srv_durable_remove(s, dead); /* deleted or expired: it does not come back */
            session_free(dead);
        }
    }
}

void srv_link_bases(const srv *s, char *http, size_t http_sz, char *ws, size_t ws_sz)
{
    const char *u = s->cfg.public_url;
    if (u[0]) { /* behind a router: one host for both, WebSockets under /ws/ */
        int tls = !strncmp(u, "https://", 8);
        snprintf(http, http_sz, "%s", u);
        snprintf(ws, ws_sz, "%s://%s/ws", tls ? "wss" : "ws", u + (tls ? 8 : 7));
        return;
    }
    const char *host = s->cfg.public_host[0] ? s->cfg.public_host : s->cfg.bind;
    snprintf(http, http_sz, "http://%s:%d", host, s->http_port);
    snprintf(ws, ws_sz, "ws://%s:%d", host, s->ws_port);
}
