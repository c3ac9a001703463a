/* server.h: softcast-server's shared types. One process: HTTP threads (libmicrohttpd),
 * one WebSocket service thread (libwebsockets), one simulation worker (sched.c).
 *
 * Locks: srv.lock guards the session table (slots, generations, counts). Each session's
 * lock guards its inbox, its latest frames, its client list and its counters. The sim
 * state is touched only by the worker (and by creation/destruction, when no worker runs
 * it). Never hold a session lock while taking srv.lock. */
#ifndef SERVER_SERVER_H
#define SERVER_SERVER_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "protocol/proto.h"
#include "sim/cloth/cloth.h"
#include "sim/volume/volume.h"

#define SRV_ID_LEN    32
#define SRV_TOKEN_LEN 33 /* 32 hex characters + NUL */
#define SRV_INBOX_CAP 256

typedef struct srv_config {
    int http_port, ws_port; ///< 0: pick a free port
    char bind[64];          ///< listen address, default 127.0.0.1
    sim_backend_kind backend;
    int threads; ///< CPU threads per step (0: all cores, or 1 when workers > 1)
    int workers; ///< simulation worker threads (0: one per core); sessions are split among them
    int max_sessions;
    int max_clients_per_session;
    int max_message_bytes; ///< largest text message a client may send
    int max_events_per_s;  ///< per client, sustained (a burst of the same size is allowed)
    int64_t max_elements;  ///< largest volume a session may create
    double rate_hz;        ///< simulation frames per second per session
    int keyframe_every;    ///< frames between mesh keyframes
    char volume_path[512]; ///< the default volume scene ("" = the phantom)
    int default_dims[3];   ///< phantom size of the default scene
    char data_dir[512];    ///< where the web client's files are ("" = none)
    char public_host[128]; ///< host name put into URLs (default: bind address)
    int default_session;   ///< create a session at start (make run)
} srv_config;

srv_config srv_default_config(void);
/// Parse argv (and a --config FILE of JSON); errors go to err. Returns 0 on success,
/// 1 for --help (usage printed), -1 on error.
int srv_parse_args(srv_config *c, int argc, char **argv, char *err, size_t err_sz);

/* Bytes reserved before a frame's data for libwebsockets' header (LWS_PRE; ws.c checks). */
#define SRV_FRAME_HEADROOM 16

/* A published frame: encoded once, shared by every client (refcounted). */
typedef struct srv_frame {
    atomic_int refs;
    uint64_t frame;
    int keyframe;
    size_t len;
    uint8_t *data; /* SRV_FRAME_HEADROOM bytes, then len bytes */
} srv_frame;

srv_frame *srv_frame_new(const uint8_t *bytes, size_t len, uint64_t frame, int keyframe);
void srv_frame_ref(srv_frame *f);
void srv_frame_unref(srv_frame *f);

typedef struct srv_inbox_item {
    proto_event ev;
    uint32_t client; ///< who sent it (for slice replies and handover)
    double arrived_ms;
} srv_inbox_item;

typedef struct srv_client srv_client;   /* ws.c */
typedef struct srv_scene_i srv_scene_i; /* scene.h */
#define SRV_MAX_SURF 4

typedef struct srv_session {
    /* Immutable after creation. */
    uint32_t slot, generation;
    char id[SRV_ID_LEN];
    char control_token[SRV_TOKEN_LEN], view_token[SRV_TOKEN_LEN];
    const srv_scene_i *scene;
    void *scene_data; /* the scene's own (scene_*.c); its state is the worker's */

    pthread_mutex_t lock; /* guards everything below */
    srv_inbox_item inbox[SRV_INBOX_CAP];
    int inbox_head, inbox_count;
    srv_frame *latest;    /* newest frame */
    srv_frame *keyframe;  /* newest keyframe (late joiners and slow clients start here) */
    srv_frame *lod_table; /* cloth: the LOD table of the newest keyframe, sent before it */
    int nclients;
    uint32_t driver; /* client id holding control (0: none) */
    int paused;
    char *params_json;      /* current parameters, a JSON object (state messages) */
    uint32_t state_version; /* bumped when clients, driver, pause or parameters change */
    int want_keyframe;      /* a client joined: encode a keyframe next */
    uint32_t last_seq;
    /* counters for /metrics */
    uint64_t frames, frames_sent, bytes_sent, events, errors, encodes;
    double step_ms_sum, encode_ms_sum, latency_ms_sum;
    uint64_t latency_n;
    double last_step_ms, last_encode_ms;
    size_t backlog_peak; /* most bytes one client had handed to lws before its socket drained */
    int closing;         /* DELETE or shutdown: clients get a close frame */
    /* Replies to one client (slices, errors found by the worker), latest first served. */
    struct {
        uint32_t client;
        srv_frame *frame; /* binary frame, or text when text != NULL */
        char *text;
    } replies[8];
    int nreplies;

    /* Worker only: the surfaces' quantised positions now and at the last keyframe. */
    int enc_nsurf;
    uint32_t enc_nvert[SRV_MAX_SURF];
    uint16_t *cur_q[SRV_MAX_SURF], *key_q[SRV_MAX_SURF];
    uint32_t key_topology;
    int params_dirty; /* parameters changed: a state message after the next step */
    uint64_t key_frame_no;
    size_t key_bytes; /* encoded size of the last keyframe (adaptive keyframes) */
    uint64_t frame_no;
    double step_at_ms, due_ms; /* last step and next beat, monotonic ms */
} srv_session;

typedef struct srv srv;

/* session.c */
int srv_sessions_init(srv *s);
void srv_sessions_fini(srv *s);
/// Create a session of the scene from its options (the POST body; may be NULL).
srv_session *srv_session_create(srv *s, const srv_scene_i *scene, const struct cJSON *opts,
                                char *err, size_t err_sz, int *http_status);
/// Find by id (NULL: unknown or gone). The caller gets a reference: srv_session_put.
srv_session *srv_session_get(srv *s, const char *id);
void srv_session_put(srv *s, srv_session *ss);
/// Free closing sessions that no thread holds (worker).
void srv_sessions_reap(srv *s);
/// Mark for deletion; the worker frees it when no client holds it.
int srv_session_delete(srv *s, const char *id, const char *token);
/// Push an event into the session's inbox (any thread). 0, or -1 when full.
int srv_session_push(srv_session *ss, const proto_event *ev, uint32_t client);
/// Replace the latest frame (worker). Takes ownership of f, and of table (may be NULL):
/// a keyframe replaces the session's keyframe and LOD table together.
void srv_session_publish(srv_session *ss, srv_frame *f, srv_frame *table);
/// Queue a reply for one client (worker): a binary frame (owned) or a text (copied).
void srv_session_reply(srv_session *ss, uint32_t client, srv_frame *f, const char *text);

/* The whole server. */
struct srv {
    srv_config cfg;
    pthread_mutex_t lock; /* guards the table below */
    srv_session **slots;  /* max_sessions entries */
    uint32_t *generation;
    int *refs; /* references held by HTTP/WS threads */
    int nsessions;
    sim_backend *backend;
    sim_volume_model *default_model; /* the default volume, shared by its sessions */
    atomic_int stop;
    atomic_uint next_client;
    pthread_t *workers; /* cfg.workers threads */
    void *ws;           /* ws.c context */
    void *http;         /* MHD daemon */
    int http_port, ws_port;
    uint64_t started_ms;
    atomic_ullong total_frames_sent, total_bytes_sent, total_clients, total_errors;
};

/* sched.c */
int srv_worker_start(srv *s);
/// Stop and join the workers; srv_worker_free once the WebSocket thread is gone too.
void srv_worker_stop(srv *s);
void srv_worker_free(srv *s);
/// Any thread: an event reached the session in this slot; its worker steps it now.
void srv_worker_poke(srv *s, uint32_t slot);

/* ws.c */
int srv_ws_start(srv *s, char *err, size_t err_sz);
void srv_ws_stop(srv *s);
void srv_ws_wake(srv *s); /* any thread: new frames are ready */
int srv_ws_clients(srv *s);

/* http.c */
int srv_http_start(srv *s, char *err, size_t err_sz);
void srv_http_stop(srv *s);

/* util */
void srv_random_hex(char *out, size_t nbytes);
double srv_now_ms(void);

#endif
