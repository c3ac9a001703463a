/* server.h: softcast-server's shared types. One process: HTTP threads (libmicrohttpd),
 * one WebSocket service thread (libwebsockets), simulation workers (sched.c).
 *
 * Who calls whom (no circles): main.c starts everything and wires the two notifications
 * below; http.c, ws.c and sched.c use session.c (the table, the inbox, the frames, the
 * replies) and scene.h (the scene kinds); session.c tells the others through the srv's
 * on_event and on_news, never by name. The scene adapters (scene_*.c) see only scene.h.
 *
 * Locks: srv.lock guards the session table (slots, generations, counts). Each session's
 * lock guards its inbox, its latest frames, its reply mailbox, its state and its counters.
 * The sim state is touched only by the worker (and by creation/destruction, when no worker
 * runs it). Never hold a session lock while taking srv.lock. */
#ifndef SERVER_SERVER_H
#define SERVER_SERVER_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "sim/sim.h"
#include "protocol/proto.h"

/* "[PROCESS.]s<slot>-<generation>-<random>": a process name (a DNS label, 63 at most) and the
 * rest (31 at most). */
#define SRV_ID_LEN 96
/* Places of a session's --max-clients-per-session that only the control token may take. */
#define SRV_DRIVER_RESERVE 2
/* Connections one session's control token may hold at once: an instructor's tabs and
 * reconnects, not a way round --max-ws-per-address (which the control token is exempt from:
 * 8 sessions an address, each with up to --max-clients-per-session of its connections,
 * would be 2,048 sockets from one address). */
#define SRV_DRIVER_CONNS 8
#define SRV_TOKEN_LEN    33 /* 32 hex characters + NUL */

typedef struct srv_config {
    int http_port, ws_port; ///< 0: pick a free port
    char bind[64];          ///< listen address, default 127.0.0.1
    sim_backend_kind backend;
    int threads; ///< CPU threads per step (0: all cores, or 1 when workers > 1)
    int workers; ///< simulation worker threads (0: one per core); sessions are split among them
    /// Sessions a worker steps together at most (scene step_many), when they are due within
    /// half a period. 0: automatic (SRV_STEP_BATCH_MAX where the backend batches, CUDA; 1 on
    /// the CPU, where the workers' parallelism is worth more).
    int step_batch;
    /// 1: an express worker steps the short light sessions while every worker is on a heavy
    /// step (sched.c); 0: none, light sessions wait for a worker to come free; -1: 1 where
    /// the workers do not batch (the CPU), else 0 (srv_express_worker_on).
    int express_worker;
    int max_sessions;
    int max_clients_per_session;
    int max_message_bytes;     ///< largest text message a client may send
    int max_events_per_s;      ///< per client, sustained (a burst of the same size is allowed);
                               ///< the control token's connections together too
    int max_view_events_per_s; ///< the view token's connections together (a classroom)
    double rate_hz;            ///< simulation frames per second per session
    int keyframe_every;        ///< most frames between an object's keys while it moves
    int view_budget_kib;       ///< KiB/s of frames per client a scene aims at (0: no budget)
    char data_dir[512];        ///< where the web client's files are ("" = none)
    char public_host[128];     ///< host name put into URLs (default: bind address)
    /// Behind a router (deploy/): where clients reach it, "http[s]://host[:port]" without a
    /// path; the links use it, and WebSockets go to its /ws/ ("" = http://host:port).
    char public_url[256];
    char process_name[64]; ///< names this process in its sessions' ids, for the router ("" = none)
    char peers[1024];      ///< the cluster's process names, comma-separated (GET /api/cluster)
    char trusted_proxies[512]; ///< addresses or CIDRs whose X-Forwarded-For names the client
    int default_session;       ///< create a session at start (make run)
    char volume_dir[512];   ///< uploads kept here, and listed for the lobby ("" = none, upload.c)
    long long upload_limit; ///< largest upload, bytes
    int max_sessions_per_address; ///< live sessions one client address may have made
    int idle_expiry_s;            ///< a session without clients this long is closed (0: never)
    int max_http_per_address;     ///< HTTP connections open at once from one address
    int max_http_connections;     ///< HTTP connections open at once in all
    int max_ws_per_address;       ///< viewers' WebSocket connections from one address
    int http_timeout_s;           ///< an HTTP connection idle this long is closed
    char api_key[128];            ///< creating sessions needs it ("" = anyone may), --api-key-file
    int memory_budget_mib;        ///< what all sessions' scenes may hold (0: no budget)
    char state_dir[512];          ///< sessions kept here across restarts ("" = none, durable.c)
    int snapshot_interval_s;      ///< a moving session's state saved this often
    int fsync_interval_ms;        ///< the event logs reach the disk this often
} srv_config;

srv_config srv_default_config(void);
/// Parse argv (and a --config FILE of JSON); a name the server does not know goes to the
/// scenes' options. Errors go to err. Returns 0 on success, 1 for --help (usage printed),
/// -1 on error.
int srv_parse_args(srv_config *c, int argc, char **argv, char *err, size_t err_sz);

/* Bytes reserved before a frame's data for libwebsockets' header (LWS_PRE; ws.c checks). */
#define SRV_FRAME_HEADROOM 16

/* A published frame: encoded once, shared by every client (refcounted). */
typedef struct srv_frame {
    atomic_int refs;
    uint64_t frame;
    uint32_t flags; /* an object frame's PROTO_FLAG_SNAPSHOT, PROTO_FLAG_STRUCTURAL */
    size_t len;
    uint8_t *data; /* SRV_FRAME_HEADROOM bytes, then len bytes */
} srv_frame;

srv_frame *srv_frame_new(const uint8_t *bytes, size_t len, uint64_t frame, uint32_t flags);
void srv_frame_ref(srv_frame *f);
void srv_frame_unref(srv_frame *f);

/* ----------------------------------------------------------------- the inbox */

/* An event's flags (its scene's table says, scene.h; the server's own events have none). */
#define SRV_EV_QUERY                                                     \
    0x1u /* reads the scene, changes nothing: viewers may send it, it is \
            answered even while the session is paused, and frames do not \
            echo its seq (a volume's slice) */
#define SRV_EV_UNPAUSED                                                                   \
    0x2u /* applies even while the session is paused: it changes nothing shown before the \
            next step (the cloth's camera) */

/* What an inbox item is: the server's own (pause, resume, recordings, a replay's seek), or
 * event SRV_ITEM_SCENE + i of the session's scene table. */
enum {
    SRV_ITEM_PAUSE = 0,
    SRV_ITEM_RESUME = 1,
    SRV_ITEM_RECORD_START = 2, /* the driver starts a recording (recording.c) */
    SRV_ITEM_RECORD_STOP = 3,
    SRV_ITEM_SEEK = 4, /* a replay's driver moves it to a frame (payload: uint64_t) */
    SRV_ITEM_SCENE = 5
};

/* One inbox item: this header, then `size` bytes of payload (the scene's own compact
 * struct, or nothing), the whole rounded up to 8 bytes. An item costs what it carries:
 * a pause 24 bytes, a move 40, a grab 48, a set_params 32 + 16 per value. */
typedef struct srv_item {
    double arrived_ms; ///< monotonic ms, for the event-to-frame metric
    uint32_t client;   ///< who sent it (replies go to it)
    uint32_t seq;      ///< the client's seq (frames echo the driver's last)
    uint16_t size;     ///< payload bytes after the header
    uint8_t kind;      ///< SRV_ITEM_*
    uint8_t flags;     ///< SRV_EV_*
    uint32_t reserved;
} srv_item;

/* Bytes a session's inbox holds (a ring). The last SRV_INBOX_CONTROL are the server's own
 * pause and resume (a full inbox can still be resumed); events take the rest: 396 moves,
 * or 15 set_params of 64 values. */
#define SRV_INBOX_BYTES   (16u << 10)
#define SRV_INBOX_CONTROL 512u
/* The largest payload an item carries: a set_params of PROTO_MAX_PARAMS values. */
#define SRV_EVENT_MAX 1032u
/* Bytes an item with a payload of size bytes takes in the inbox. */
#define SRV_ITEM_BYTES(size) ((sizeof(srv_item) + (size_t)(size) + 7u) & ~(size_t)7u)

typedef struct srv_inbox {
    _Alignas(8) unsigned char buf[SRV_INBOX_BYTES];
    uint32_t head;  ///< byte offset of the oldest item
    uint32_t used;  ///< bytes held
    uint32_t count; ///< items held
    uint32_t held;  ///< items the last take left (paused): the worker waits for more
    uint32_t peak;  ///< most bytes held at once (metrics)
} srv_inbox;

/// Copy an item (h->size bytes of payload) in at the end. 0, or -1 when it does not fit (a
/// scene's event: in SRV_INBOX_BYTES - SRV_INBOX_CONTROL).
int srv_inbox_push(srv_inbox *ib, const srv_item *h, const void *payload);
/// The worker's take at a frame boundary, given whether the session is paused now. Items
/// come out in order, back to back in out (SRV_INBOX_BYTES): everything up to and including
/// a resume; while unpaused, everything up to a pause (the pause too, unless events that
/// change the scene came before it in this take: they are stepped first); while paused,
/// only SRV_EV_QUERY and SRV_EV_UNPAUSED items, the others waiting in order for a resume.
/// Returns the bytes written; *n the items.
size_t srv_inbox_take(srv_inbox *ib, int paused, unsigned char *out, int *n);

/* ---------------------------------------------------------------- sessions */

typedef struct srv_scene_i srv_scene_i; /* scene.h */
/* Structural frames a session keeps for clients a few frames behind (latest wins for the
 * others): a client that would lose one starts again at a snapshot. */
#define SRV_CHAIN       32
#define SRV_CHAIN_BYTES (8u << 20)
#define SRV_MAILBOX     64 /* replies from the worker waiting for the WebSocket thread */
/* Replies one client may have waiting in the mailbox: past that its own oldest goes, so a
 * client that asks much (a viewer's slices) never pushes out another's (the driver's). */
#define SRV_MAIL_PER_CLIENT 8
/* Viewers' queries (a slice) wait apart from the driver's inbox, one per viewer: a viewer's
 * newer query replaces its older one in its place in line (latest wins), so viewers,
 * however many and however fast, never fill the inbox the driver's events go through. The
 * worker answers at most SRV_QUERIES_PER_FRAME a frame, oldest first; the rest wait for the
 * next frame. There is a place for each client the session admits (--max-clients-per-session):
 * a class of viewers is answered in turn. With fewer places than viewers, those refused
 * (`busy`) would ask again at their next frame, and the ones whose frames go out first would
 * take every freed place, the same students each time (64 places: with 100 viewers about 20
 * got 4 slices or fewer in 10 s, the rest about 20). */
#define SRV_QUERY_BYTES       64 /* largest viewer query payload */
#define SRV_QUERIES_PER_FRAME 8
/* Sessions one worker steps together at most (--step-batch's ceiling). */
#define SRV_STEP_BATCH_MAX 64

/* Where a session's scene is (srv_session_create_loading): being built on a loader
 * thread, built, or refused with a reason. Only a ready session steps and takes clients. */
enum { SRV_READY = 0, SRV_LOADING = 1, SRV_FAILED = 2 };
#define SRV_FAILED_KEEP_MS 60000.0 /* a failed session stays listed (with why) this long */

typedef struct srv_session {
    /* Immutable after creation. */
    uint32_t slot, generation;
    char id[SRV_ID_LEN];
    char control_token[SRV_TOKEN_LEN], view_token[SRV_TOKEN_LEN];
    char owner[48]; /* the address that made it (per-address quota; "" the operator's) */
    /* Its dataset was named by a user (an upload, a replay carrying one): the name (a file
     * name may name the patient) and a failed load's reason go only to its token holders
     * and the operator, never to the public list. Set when made, before it is ready. */
    int user_named;
    int keep; /* the operator's (--default-session): never expires */
    const srv_scene_i *scene;
    /* The scene's own (scene_*.c); its state is the worker's. Set at creation, or by the
     * loader under lock (load_state then turns SRV_READY): read it once ready. */
    void *scene_data;

    pthread_mutex_t lock; /* guards everything below, up to "worker only" */
    int load_state;       /* SRV_READY, SRV_LOADING or SRV_FAILED */
    char load_stage[16];  /* loading: the loader's stage ("reading", "fitting", ...) */
    char *load_error;     /* failed: why */
    double failed_ms;     /* failed: when (the reaper frees it SRV_FAILED_KEEP_MS later) */
    srv_inbox inbox;
    srv_frame *latest;           /* newest object frame */
    srv_frame *snapshot;         /* newest snapshot (joiners, and clients that lost a structural
                                    frame, start here) */
    srv_frame *chain[SRV_CHAIN]; /* the newest structural frames, a ring, oldest first */
    int chain_head, nchain;
    size_t chain_bytes;
    uint64_t chain_lost; /* the newest structural frame dropped from the ring (0: none) */
    uint32_t epoch;      /* bumped when frame numbers start again lower (srv_session_rewind) */
    int nclients;
    int ndrive_conns; /* of them, on the control token (SRV_DRIVER_CONNS at most) */
    /* The driver closed control (set_control open false): with nobody driving, a viewer's
     * request_control is refused; only the control token, or a driver's handover, gives
     * control (a class whose instructor's connection drops stays the instructor's). */
    int control_closed;
    int snapshot_soon; /* kept under --state-dir: snapshot at the next frame (durable.c) */
    uint32_t driver;   /* client id holding control (0: none) */
    int paused;
    char *params_json;      /* current parameters, a JSON object (state messages) */
    uint32_t state_version; /* bumped when clients, driver, pause or parameters change */
    int want_snapshot;      /* a client waits for a snapshot: encode one next */
    uint32_t last_seq;
    int at_rest; /* its last frame stepped nothing and applied no event: no frame comes until an
                    event does (a settled scene, a paused session) */
    /* counters for /metrics */
    uint64_t frames, frames_sent, bytes_sent, events, errors, encodes;
    uint64_t batched_steps; /* steps taken in a batch with other sessions (--step-batch) */
    uint64_t client_visits; /* clients of this session the WebSocket thread looked at on wakes */
    double step_ms_sum, encode_ms_sum, latency_ms_sum;
    uint64_t latency_n;
    double last_step_ms, last_encode_ms;
    size_t backlog_peak;  /* most bytes one client had handed to lws before its socket drained */
    int closing;          /* DELETE, idle expiry or shutdown: clients get a close frame */
    double idle_since_ms; /* when its last client left (or it was made): idle expiry */
    size_t bytes;         /* what its scene holds, charged to the budget (srv.lock) */
    /* Replies to one client each (slices, errors, notices), oldest first, for the WebSocket
     * thread to move into that client's outbox (SRV_MAIL_PER_CLIENT each; when full, the
     * oldest reply to a viewer goes, the driver's last). */
    struct {
        uint32_t client;
        srv_frame *frame; /* a binary frame, or NULL and a text */
        char *text;
    } mail[SRV_MAILBOX];
    int nmail;
    /* Viewers' queries, one per viewer, oldest first (srv_session_query): query_cap places,
     * one for each client the session admits. */
    struct srv_query {
        srv_item h;
        _Alignas(8) unsigned char data[SRV_QUERY_BYTES];
    } * query;
    int nquery, query_cap;
    uint64_t queries_replaced; /* a viewer's query replaced by its newer one (metrics) */

    /* WebSocket thread only: each token's event budget, shared by all its connections
     * (token buckets beside each connection's own). */
    double drive_tokens, drive_refill_ms, view_tokens, view_refill_ms;

    /* Worker only: the worker that steps it (one at a time, sched.c). */
    proto_encoder *enc; /* what every client holds of each object (its key, its base) */
    proto_buf enc_buf;  /* the worker's encoding buffer, kept across frames (its capacity) */
    int encoded_any;    /* a frame was published since the encoder last started afresh */
    double frame_bytes; /* mean bytes of the recent frames (moving average) */
    int params_dirty;   /* parameters changed: a state message after the next step */
    uint64_t frame_no;
    double step_at_ms, due_ms; /* last step and next beat, monotonic ms */
    int stepping;              /* a worker steps it now (sched.c's lock guards it) */
    /* What a frame held its worker, ms, smoothed, for the pick (written under sched.c's lock;
     * atomic for /metrics, which reads it without). */
    _Atomic double frame_cost_ms;

    /* Durability (durable.c): how to build it again (srv_origin_options or srv_origin_file,
     * set by its maker before it is ready; NULL: not kept), and its log and snapshots (NULL:
     * not kept). The worker's, once ready. */
    char *origin;
    struct srv_durable *durable;
    /* Recordings (recording.c): the one being made (worker only); the last one made, a file
     * on disk (the session's state directory, else the server's private upload directory;
     * "" none), its size, and whether a stopped one is being written (a builder writes it;
     * no other starts meanwhile): the lock; a replay session's script (worker only, but for
     * its ended/same flags: the lock). */
    struct srv_recorder *recorder;
    char recording_path[1024];
    size_t recording_n;
    int recording_busy;
    int recording_temp; /* in the upload directory: it goes with the session */
    struct srv_replay *replay;
} srv_session;

typedef struct srv srv;
struct cJSON;

/* session.c */
int srv_sessions_init(srv *s);
void srv_sessions_fini(srv *s);
/// Create a session of the scene from its options (the POST body; may be NULL) for the client
/// at address owner ("" or NULL: the operator's, kept however idle).
srv_session *srv_session_create(srv *s, const srv_scene_i *scene, const struct cJSON *opts,
                                const char *owner, char *err, size_t err_sz, int *http_status);
/// Whether owner may make one more session now: 0, or 429 with err (the server's table is
/// full, or the address holds --max-sessions-per-address).
int srv_session_room(srv *s, const char *owner, char *err, size_t err_sz);
/// Charge add more bytes to a live session (what it holds beside its scene: a running
/// recording, as it grows): 0, or 503 with err when they do not fit --memory-budget.
int srv_session_charge_more(srv *s, srv_session *ss, size_t add, char *err, size_t err_sz);
/// Give back sub of what srv_session_charge_more charged (at most what ss holds).
void srv_session_refund(srv *s, srv_session *ss, size_t sub);
/// A session whose scene a loader thread builds (state SRV_LOADING, stage "queued"): in
/// the table at once, with its id and tokens; the caller (the loader) holds a reference
/// until srv_session_loaded. NULL with err and *http_status (429) when it cannot be had.
srv_session *srv_session_create_loading(srv *s, const srv_scene_i *scene, const char *owner,
                                        char *err, size_t err_sz, int *http_status);
/// What a session kept in --state-dir comes back with (durable.c).
typedef struct srv_session_saved {
    const srv_scene_i *scene;
    const char *id, *control_token, *view_token, *owner;
    int keep, paused;
    uint64_t frame;
    uint32_t last_seq;
    size_t extra_bytes; /* held beside its scene (a replay's script), charged with it */
} srv_session_saved;
/// A session restored at start (main thread, before any other starts): in its old slot with
/// its id and tokens, its scene built and restored; its bytes charged to the budget. NULL
/// with err (its slot is past --max-sessions or taken, the budget is spent); scene_data is
/// then still the caller's.
srv_session *srv_session_adopt(srv *s, const srv_session_saved *sv, void *scene_data, char *err,
                               size_t err_sz);
/// One more reference to a session the caller holds one of (any thread).
void srv_session_hold(srv *s, srv_session *ss);
/// Close a session whose build failed for a caller who is told so (its creator's request):
/// it leaves the table once nobody holds it (any thread).
void srv_session_discard(srv *s, srv_session *ss);
/// The loader's stage, shown to pollers (loader thread).
void srv_session_stage(srv_session *ss, const char *stage);
/// The loader is done (loader thread): scene_data built (the session turns ready), or NULL
/// and err (it turns failed, kept SRV_FAILED_KEEP_MS with err). Drops the loader's reference.
/// Its bytes are charged to --memory-budget here: past it the scene is destroyed and the
/// session fails saying so. Returns 201 (ready), 507 (over the budget) or 500.
int srv_session_loaded(srv *s, srv_session *ss, void *scene_data, const char *err);
/// Find by id (NULL: unknown or gone). The caller gets a reference: srv_session_put.
srv_session *srv_session_get(srv *s, const char *id);
void srv_session_put(srv *s, srv_session *ss);
/// Close sessions idle past --idle-expiry, free closing sessions that no thread holds
/// (worker).
void srv_sessions_reap(srv *s);
/// Mark for deletion; the worker frees it when no client holds it.
int srv_session_delete(srv *s, const char *id, const char *token);
/// Push an event into the session's inbox (any thread) and tell the worker. 0, or -1 when
/// the inbox is full.
int srv_session_push(srv *s, srv_session *ss, const srv_item *h, const void *payload);
/// A viewer's query (SRV_EV_QUERY, at most SRV_QUERY_BYTES): replaces that viewer's waiting
/// one, or waits beside the others (any thread), and tells the worker. 0, or -1 when
/// ss->query_cap viewers (one place per client it admits) have one waiting.
int srv_session_query(srv *s, srv_session *ss, const srv_item *h, const void *payload);
/// Take up to max waiting queries, oldest first, back to back as inbox items into out
/// (the worker; the session lock held). Returns how many.
int srv_session_take_queries(srv_session *ss, unsigned char *out, int max);
/// Publish an object frame (worker; takes f): the latest, kept in the chain when
/// structural, the snapshot when it is one.
void srv_session_publish(srv_session *ss, srv_frame *f);
/// Frames start again at an earlier number (a replay's seek back; worker): the frames kept
/// are dropped, the encoder starts afresh, and every client starts again at the next
/// snapshot (the epoch changes).
void srv_session_rewind(srv_session *ss);
/// Publish a snapshot of the latest frame's state (worker; takes f).
void srv_session_publish_snapshot(srv_session *ss, srv_frame *f);
/// Mail a reply for one client (worker): a binary frame (owned) or a text (copied).
void srv_session_reply(srv_session *ss, uint32_t client, srv_frame *f, const char *text);
/// Mail an error for one client (worker) and count it.
void srv_session_error(srv *s, srv_session *ss, uint32_t client, uint32_t seq, const char *error,
                       const char *detail);
/// The session has something new to send (frames, replies, state, closing): tell the
/// WebSocket thread (any thread).
void srv_session_news(srv *s, srv_session *ss);

/* The whole server. */
struct srv {
    srv_config cfg;
    pthread_mutex_t lock; /* guards the table below */
    srv_session **slots;  /* max_sessions entries */
    uint32_t *generation;
    int *refs; /* references held by HTTP/WS threads */
    int nsessions;
    size_t bytes_in_use; /* sessions' scenes, bytes (--memory-budget) */
    sim_backend *backend;
    atomic_int stop;
    atomic_uint next_client;
    atomic_int nclients; /* connected WebSocket clients (ws.c counts, /api/health reads) */
    /* Notifications, wired by main.c before any thread starts; any thread may call them. */
    void (*on_event)(srv *s, uint32_t slot); /* an event waits in the slot's inbox (sched.c) */
    void (*on_news)(srv *s, uint32_t slot);  /* the slot's session has news (ws.c) */
    void *sched;                             /* sched.c's workers */
    void *ws;                                /* ws.c context */
    void *http;                              /* MHD daemon */
    void *uploads;                           /* upload.c's */
    void *builders;                          /* builder.c's */
    int http_port, ws_port;
    uint64_t started_ms;
    atomic_ullong total_frames_sent, total_bytes_sent, total_clients, total_errors;
    /* Steps taken in batches of two or more (scene step_many), and those batches. */
    atomic_ullong batched_steps, step_batches;
    atomic_ullong express_steps; /* steps the express worker took (sched.c) */
};

/* sched.c */
int srv_worker_start(srv *s);
/// Whether the workers have the express worker beside them (--express-worker resolved).
int srv_express_worker_on(const srv *s);
/// Stop and join the workers; srv_worker_free once the WebSocket thread is gone too.
void srv_worker_stop(srv *s);
void srv_worker_free(srv *s);
/// Any thread (on_event): an event reached the session in this slot; its worker steps it now.
void srv_worker_poke(srv *s, uint32_t slot);

/* ws.c */
int srv_ws_start(srv *s, char *err, size_t err_sz);
void srv_ws_stop(srv *s);
/// Any thread (on_news): the session in this slot has news for its clients.
void srv_ws_news(srv *s, uint32_t slot);

/* http.c */
int srv_http_start(srv *s, char *err, size_t err_sz);
void srv_http_stop(srv *s);

/* upload.c: volumes users bring (POST /api/volumes) and the operator keeps (--volume-dir) */
typedef struct srv_upload srv_upload;
/// Make the private directory uploads go to (in $TMPDIR, else /tmp); check --volume-dir.
int srv_uploads_init(srv *s, char *err, size_t err_sz);
/// That directory (logged at start; the tests look into it).
const char *srv_uploads_dir(srv *s);
/// A new empty file there, named for a user's file name (its suffix kept: the scenes read
/// the format from it): its descriptor and path, or -1 (errno).
int srv_uploads_temp(srv *s, const char *name, char *path, size_t path_sz);
/// Every mention of path in err becomes name: a client never sees the server's file names.
void srv_uploads_hide_path(char *err, size_t err_sz, const char *path, const char *name);
/// After HTTP stopped: wait for the loaders, remove the directory.
void srv_uploads_fini(srv *s);
/// An upload starts (HTTP thread, its headers in): the content type, its announced length
/// against --upload-limit, room for a session and a load. NULL with *status and err.
srv_upload *srv_upload_begin(srv *s, const char *name, const char *content_type,
                             const char *content_length, const char *owner, int *status, char *err,
                             size_t err_sz);
/// Some of its bytes: 0, or an HTTP status with err (413 past the limit; the first bytes
/// refused by the reader's header check): the caller then aborts it.
int srv_upload_write(srv_upload *u, const void *data, size_t n, char *err, size_t err_sz);
/// The whole body is in: checked whole, then a loading session on it (its loader started);
/// u is consumed. NULL with *status and err.
srv_session *srv_upload_finish(srv_upload *u, int *status, char *err, size_t err_sz);
/// Refused or cut off: the file removed, u freed (NULL: nothing).
void srv_upload_abort(srv_upload *u);
/// A body arriving (an upload, a recording) takes a place among the in-flight and among its
/// address's (at most 2 at once): its slot, or -1 with *status (429 for the address, 503
/// when all are taken) and err.
int srv_arrival_take(srv *s, const char *owner, int *status, char *err, size_t err_sz);
/// It arrived, or was dropped: the slot is free; the in-flight place too, unless keep_place
/// (a load takes it over).
void srv_arrival_end(srv *s, int slot, int keep_place);
/// 408 with err when bytes since began_ms average under the floor after the grace period (a
/// body trickled to hold its place); else 0.
int srv_arrival_too_slow(double began_ms, long long bytes, char *err, size_t err_sz);
/// Places taken now (bodies arriving plus volumes loading), and of them the bodies arriving.
void srv_uploads_counts(srv *s, int *in_flight, int *arriving);
/// GET /api/volumes: {"volumes":[{name, size, format}], "upload_limit", "kept"}.
struct cJSON *srv_volumes_list(srv *s);
/// A loading session on the volume called name in --volume-dir (a plain name listed there).
srv_session *srv_volume_session(srv *s, const char *name, const char *owner, int *status, char *err,
                                size_t err_sz);

/* builder.c: sessions built off the HTTP threads, in arrival order */
#define SRV_BUILDERS 2
int srv_builders_start(srv *s);
/// Run run(arg) on a builder (any thread). 0, or -1 when stopping (run is then not called).
int srv_build_submit(srv *s, void (*run)(void *arg), void *arg);
/// Build what is queued, then join the builders (before HTTP stops: their requests wait);
/// a later srv_build_submit is refused.
void srv_builders_stop(srv *s);
/// Free them, once no thread can call srv_build_submit (after HTTP and the workers stop).
void srv_builders_free(srv *s);

/* durable.c: sessions kept in --state-dir across restarts (nothing when it is not given) */
typedef struct srv_durable srv_durable;
/// Make the directory and take its lock (one server per directory). 0, or -1 with err.
int srv_durable_init(srv *s, char *err, size_t err_sz);
void srv_durable_fini(void);
/// Bring back every session kept there (main thread, before the other threads start), each
/// said on stderr; one that cannot come back is moved to DIR/failed, saying why. Returns how
/// many came back.
int srv_durable_restore_all(srv *s);
/// The session is ready (its maker's thread, before a worker may step it): keep it, from its
/// origin. 0, or -1 (said on stderr; the session runs, not kept).
int srv_durable_begin(srv *s, srv_session *ss);
/// An item the worker applies now (worker): into this frame's log records.
void srv_durable_record(srv_session *ss, const srv_item *h, const void *payload);
/// This frame's records into the log, before its frame goes out; flushed to disk as
/// --fsync-interval says (worker).
void srv_durable_commit(srv *s, srv_session *ss);
/// After the step (worker): a snapshot when --snapshot-interval has passed and it moved.
void srv_durable_after_step(srv *s, srv_session *ss);
/// Save the state now (worker, or at shutdown once the workers stopped): 0, with its hash,
/// or -1 (said on stderr).
int srv_durable_snapshot(srv *s, srv_session *ss, uint64_t *hash);
/// The scene's state hash (0 when it has none).
uint64_t srv_durable_hash(srv_session *ss);
/// All n bytes to fd (a short write continued, EINTR retried): 0, or -1 (errno).
int srv_write_all(int fd, const void *p, size_t n);
/// A loader's stage callback for a build nobody watches (a restart's, a replay's).
void srv_stage_ignore(void *ctx, const char *stage);
/// The session's own directory in --state-dir, or NULL (not kept).
const char *srv_durable_dir(const srv_session *ss);
/// At shutdown, the workers stopped: snapshot every ready kept session, forget the closing.
void srv_durable_save_all(srv *s);
/// A session's origin, malloc'd: {"options": the options it was made with (null: none)}, and
/// "default" when its scene (data, as made) was built on the server's default (origin_default).
char *srv_origin_options(const srv_scene_i *scene, const void *data, const struct cJSON *opts);
/// A session's origin read from a file (loader thread, before it is ready), malloc'd:
/// {"file", "name", "kept"}. An upload (temp: removed once read) is kept while its session
/// lives, so that a restart and a recording read it again: in DIR/files with --state-dir,
/// else in the private upload directory; a --volume-dir file is the operator's and stays
/// where it is. NULL when it cannot be kept (said on stderr).
char *srv_origin_file(srv *s, const char *id, const char *path, const char *name, int temp);
/// A replay's origin (builder, before it is ready), malloc'd: {"recording", "file", "kept"},
/// the recording's bytes kept in DIR/files so that the replay comes back after a restart (at
/// its first frame, paused). NULL without --state-dir, or when it cannot be kept (said).
char *srv_origin_recording(srv *s, const char *id, const uint8_t *bytes, size_t n);
/// The path of an origin's field key ("file", or a replay's "recording") into out. A kept
/// file is named by its base name in the folder of kept files (DIR/files, or the uploads
/// folder), so that a state directory copied, moved or restored from a backup finds its own
/// files and never touches the ones it was copied from (a meta.json from before, with an
/// absolute path, is read by the base name there too); another (a --volume-dir file) is the
/// path written. 0, or -1 (absent, or not a file's name).
int srv_origin_path(srv *s, const struct cJSON *origin, const char *key, char *out, size_t out_sz);
/// The session does not come back (deleted, expired, or never ready): its kept upload goes.
void srv_origin_forget(srv *s, srv_session *ss);
/// Deleted or expired: its directory goes (the reaper), then srv_durable_close.
void srv_durable_remove(srv *s, srv_session *ss);
void srv_durable_close(srv_session *ss);

/* A record of an applied item, in a session's log and in recordings (durable.c): its
 * number, the frame it was applied in (before that frame's step), what it was; its payload
 * and a checksum follow it in the bytes. */
#define SRV_REC_TICK 0xffffu /* a record that only says how far the session stepped */
typedef struct srv_record {
    uint32_t magic, size;
    uint64_t lsn, frame;
    uint32_t kind, flags, client, seq;
} srv_record;
struct sc_blob;
struct srv_scene_ctx;
/// Append r (its magic set here), payload (r->size bytes) and their checksum.
void srv_record_put(struct sc_blob *b, const srv_record *r, const void *payload);
/// The record at *at of p (n bytes) into r, its payload in *payload; *at moves past it. 0,
/// or -1 at the end or at a record cut short, damaged, or of a kind that is not a pause, a
/// resume, one of the scene's events or (ticks: a log's) a tick.
int srv_record_get(const uint8_t *p, size_t n, size_t *at, const srv_scene_i *scene, int ticks,
                   srv_record *r, const uint8_t **payload);
/// A context whose replies go nowhere (a replay's: they went out the first time).
void srv_quiet_ctx(srv *s, struct srv_scene_ctx *c, uint64_t frame, const char *id);

/* recording.c: recordings and their replays */
/// record_start, record_stop (worker, at the frame boundary; replies through c).
void srv_record_start(srv *s, srv_session *ss, struct srv_scene_ctx *c, uint32_t client,
                      uint32_t seq);
void srv_record_stop(srv *s, srv_session *ss, struct srv_scene_ctx *c, uint32_t client,
                     uint32_t seq);
/// An item the worker applies now: into the recording, when one runs.
void srv_record_note(srv_session *ss, const srv_item *h, const void *payload);
/// The running recording holds all the events it may (it stops at the end of the take).
int srv_record_full(const srv_session *ss);
/// The last recording's file, opened for reading (HTTP): its descriptor (the caller's) and
/// size, or -1 when there is none.
int srv_session_recording(srv_session *ss, size_t *n);
/// A recording running at shutdown is stopped and its file written here and now (main
/// thread, no worker running): a SIGTERM keeps it with the session (durable.c).
void srv_record_finish_now(srv *s, srv_session *ss);
/// A replay session from a recording's file (HTTP thread; file is taken): loading at once
/// (202 in *status), built by a builder; the caller holds a reference. NULL with *status
/// (400: not a recording this server reads, 429, ...) and err.
srv_session *srv_replay_create(srv *s, uint8_t *file, size_t n, const char *owner, int *status,
                               char *err, size_t err_sz);
/// A replay built again from its recording's bytes (a restart): 201 with the scene kind, its
/// data at the recording's start and the script; or the status with err.
int srv_replay_rebuild(srv *s, const uint8_t *file, size_t n, const srv_scene_i **scene,
                       void **data, struct srv_replay **rp, char *err, size_t err_sz);
void srv_replay_free(struct srv_replay *rp);
/// What a replay holds beside its scene (its script and starting state), charged to the
/// memory budget with it; 0 for NULL.
size_t srv_replay_bytes(const struct srv_replay *rp);
/// The script given to its session (a new replay, or one adopted at a restart): paused at the
/// recording's first frame, before a worker may see it.
void srv_replay_adopted(srv_session *ss, struct srv_replay *rp);
/// A replay's frame (worker): a seek's next frames, unseen (paused or not), or, not paused,
/// the records of this frame then its step. Returns 1 when the view changed; *ended set
/// when it reached its last frame (it pauses there).
int srv_replay_frame(srv *s, srv_session *ss, struct srv_scene_ctx *c, int paused, double *ms,
                     int *ended);
/// A replay's seek (worker): to the frame in the item's payload (uint64_t), back from its
/// start; the frames there are stepped over the next beats, a slice a beat.
void srv_replay_seek(srv *s, srv_session *ss, struct srv_scene_ctx *c, const srv_item *h,
                     const void *payload);
/// "replay": {start_frame, end_frame, ended, same_state} into j (the session lock held).
void srv_replay_describe(srv_session *ss, struct cJSON *j);
/// What a session's recordings hold, freed (session_free).
void srv_recording_free(srv_session *ss);

/* text.c: what clients read */
/// s as the contents of a JSON string into out (NUL-terminated, out_sz > 0): quotes,
/// backslashes and control characters escaped, every byte that does not start a valid
/// UTF-8 character replaced by U+FFFD, cut only between characters. Returns the length.
/// The links' beginnings, without a trailing slash: http "http[s]://host[:port]" (pages,
/// the API) and ws "ws[s]://host[:port][/ws]" (--public-url, or the bind address or
/// --public-host and the ports).
void srv_link_bases(const srv *s, char *http, size_t http_sz, char *ws, size_t ws_sz);
/// --trusted-proxy's list (addresses, ADDR/BITS, comma-separated): 0 when well formed.
int srv_trusted_proxy_check(const char *list, char *err, size_t err_sz);
/// The address the per-address limits count: peer (text), or, when peer is a trusted proxy,
/// the last address in its X-Forwarded-For (forwarded_for, may be NULL).
void srv_client_address(const srv_config *c, const char *peer, const char *forwarded_for, char *out,
                        size_t out_sz);

size_t srv_json_string(char *out, size_t out_sz, const char *s);
/// The one error message: {"type":"error","seq":N,"error":"...","detail":"..."} for a
/// WebSocket client, or {"error":"...","detail":"..."} (HTTP) when seq < 0; valid JSON and
/// valid UTF-8 whatever error and detail hold. Returns the length (out_sz >= 64).
size_t srv_error_json(char *out, size_t out_sz, int64_t seq, const char *error, const char *detail);

/* util (session.c) */
/// nbytes (at most 64) from getrandom as 2 * nbytes hex digits and a NUL: 0, or -1 when the
/// kernel gives none (no fallback; main refuses to start without it).
int srv_random_hex(char *out, size_t nbytes);
/// 1 when given (may be NULL) is exactly token, compared in time that depends on token's
/// length only.
int srv_token_equal(const char *given, const char *token);
double srv_now_ms(void);

#endif
