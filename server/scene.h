/* scene.h: what a scene kind brings to a session (scene_volume.c, scene_cloth.c), and all
 * an adapter sees of the server. The session, the worker's beat, the inbox, the encoding
 * and the delivery are the same for every scene; a scene says how it is built from the
 * POST options, which events it takes (its own payload parser for each), how they apply,
 * how it steps, what it shows and what its parameters are. It talks back only through the
 * srv_scene_ctx it is handed: replies, errors, its thread budget, its frame number.
 *
 * Adding a scene: server/scene_<name>.c defining srv_scene_<name>, and one line in
 * scenes.def (server/README.md). */
#ifndef SERVER_SCENE_H
#define SERVER_SCENE_H

#include <cjson/cJSON.h>

#include "protocol/proto.h"
#include "protocol/proto_event.h"
#include "server.h"
#include "sim/core/sc_blob.h"

/* What a session shows: its objects this frame, as the object encoder takes them
 * (protocol/proto.h): local positions, a transform, elements with a topology version, box,
 * bits, level of detail, and whether the object may be held. The scene chooses all of it
 * (which objects, their frames, their precision); the encoder chooses what each frame
 * carries for each (key, append, transform, delta, hold). The arrays are the scene's. */
typedef struct srv_view {
    const proto_object_in *obj;
    uint32_t n;
} srv_view;

/* What the session's frames cost against its budget (--view-budget, KiB/s per client, each
 * client being sent the same frames). A scene that can show less, as the crowd can update
 * its far capes' shapes less often, follows it; others ignore it. */
typedef struct srv_view_budget {
    double used;    ///< mean bytes a frame over the last few dozen frames (0: none yet)
    double allowed; ///< bytes a frame the budget allows (0: no budget)
} srv_view_budget;

/* The worker's side, for one call of apply or step (worker thread). */
typedef struct srv_scene_ctx srv_scene_ctx;
struct srv_scene_ctx {
    sim_backend *backend;
    int threads;            ///< CPU threads this step may use (the cores shared out now)
    uint64_t frame;         ///< the session's frame number, for frames sent as replies
    double sim_time_s;      ///< the simulated time of that frame
    uint32_t driver;        ///< the client that drives now (0: none)
    const char *session_id; ///< for log lines
    int params_changed;     ///< apply sets it when the parameters in state messages changed
    /// A text message for one client (copied).
    void (*reply_text)(srv_scene_ctx *c, uint32_t client, const char *text);
    /// A binary frame for one client (bytes copied), numbered c->frame.
    void (*reply_frame)(srv_scene_ctx *c, uint32_t client, const uint8_t *bytes, size_t len);
    /// An error message for one client: the event with that seq was refused.
    void (*error)(srv_scene_ctx *c, uint32_t client, uint32_t seq, const char *error,
                  const char *detail);
    void *impl; ///< the worker's
};

/* An event as apply sees it: the payload its parse wrote, now out of the inbox. */
typedef struct srv_event {
    uint32_t client, seq;
    const void *data; ///< 8-aligned
    size_t size;
} srv_event;

/* One event a scene takes. parse runs on the WebSocket thread when the message arrives;
 * apply on the worker at the next frame boundary (or later: a paused session's events
 * wait in the inbox). */
typedef struct srv_event_desc {
    const char *name; ///< the message's "type"
    unsigned flags;   ///< SRV_EV_* (server.h)
    /// Read and check the payload of msg (the whole message; its envelope is read) into out
    /// (SRV_EVENT_MAX bytes, 8-aligned): the payload's size, or -1 with the reason in err
    /// and *error the error's name when not "bad message".
    int (*parse)(const cJSON *msg, void *out, const char **error, char *err, size_t err_sz);
    /// Apply it to the scene now; refusals go back through c->error.
    void (*apply)(srv_scene_ctx *c, void *scene, const srv_event *ev);
} srv_event_desc;

struct srv_scene_i {
    const char *name;
    const char *usage; ///< its command-line options, for --help ("" when none)
    const srv_event_desc *events;
    int nevents;
    /* Process-wide (main thread, before and after every other thread). */
    /// An option (--name val, or "name" in --config): 1 taken, 0 not this scene's, -1 bad.
    int (*option)(const char *name, const char *val, char *err, size_t err_sz);
    /// Before any session: build what sessions share (the default volume). 0, or -1.
    int (*start)(sim_backend *b, char *err, size_t err_sz);
    void (*stop)(void);
    /* One session. */
    /// Build the scene from the POST body (HTTP thread). Returns an HTTP status (201 when
    /// built); on failure err names the field or the limit, and *scene (maybe partly
    /// built) is destroyed by the caller.
    int (*create)(sim_backend *b, const cJSON *opts, void **scene, char *err, size_t err_sz);
    void (*destroy)(void *scene);
    /// Bytes the session's scene holds (what --memory-budget counts; any thread, once
    /// built). NULL: a scene whose sessions are small enough not to count.
    size_t (*bytes)(const void *scene);
    /// One frame (worker). Returns 1 when the view changed; *ms: the step's time.
    int (*step)(srv_scene_ctx *c, void *scene, double *ms);
    /// Optional (worker): 1 when no frame will change the view until an event comes. Without
    /// it, a step that changed nothing means that (a settled scene); a scene that also waits
    /// between changes of its own (growth paced in time) says so here.
    int (*at_rest)(const void *scene);
    /// Optional: one frame of n sessions of this scene at once, as n calls of step would
    /// (changed[k], ms[k]: step's return and *ms for c[k], scene[k]). The workers use it where
    /// the backend steps a batch in one go (sim_backend_batches) or --step-batch asks.
    void (*step_many)(srv_scene_ctx *const *c, void *const *scene, int n, int *changed, double *ms);
    /// The view after the last step (worker); valid until the next step. frame: the
    /// session's frame number (to stagger the objects a scene updates less often).
    void (*view)(void *scene, uint64_t frame, const srv_view_budget *budget, srv_view *out);
    /// The parameters as one flat JSON object, malloc'd (worker, or before publication).
    char *(*params_json)(const void *scene);
    /// The declared parameter table (any thread): names, ranges, the schema.
    const sim_param_desc *(*params_table)(int *n);
    /// Facts fixed at creation, for REST and state messages (any thread).
    void (*describe)(const void *scene, cJSON *j);
    /* Durability and recordings (durable.c): a scene's whole changing state as bytes, so
     * that the same scene built again from the same options (create, or create_file on the
     * same file) and restored from them steps on exactly as the original would have: the
     * same frames, the same hashes, on the same backend and thread count. Worker thread, or
     * when no worker runs the session. NULL in a scene whose sessions are not kept. */
    /// Append the state to out: 0, or -1 with err.
    int (*save)(void *scene, sc_blob *out, char *err, size_t err_sz);
    /// Put back a state save wrote (a scene just built, not yet stepped): 0, or -1 with err
    /// (a damaged snapshot, or one of another scene or size), the scene then unchanged or
    /// back at its start.
    int (*restore)(void *scene, const void *data, size_t n, char *err, size_t err_sz);
    /// The bitwise hash of what moves (positions and velocities), to check a restore or a
    /// replay against the original.
    uint64_t (*hash)(void *scene);
    /* A scene whose sessions can start from a user's file (the volume: a CT uploaded or in
     * --volume-dir, upload.c); NULL in the others. */
    /// Check a file by what its first bytes say (HTTP thread): its kind, its header against
    /// the limits; allocates nothing big. partial: the file is still arriving. 0, or an HTTP
    /// status with err (400: not a file it reads, 413: over its limits).
    int (*check_file)(const char *path, int partial, char *err, size_t err_sz);
    /// Build a session's scene from the file at path (a loader thread; otherwise as create).
    /// name: the user's name for it (shown, never opened). stage(ctx, name) as each stage
    /// starts ("reading", then others once the file is read).
    int (*create_file)(sim_backend *b, const char *path, const char *name,
                       void (*stage)(void *ctx, const char *stage), void *ctx, void **scene,
                       char *err, size_t err_sz);
    /* A scene whose sessions may be made on the server's own default (the volume's --volume
     * or --dims), which a restart may change; NULL in the others. */
    /// Which default the scene was made on (a JSON object, the caller's), or NULL when it
    /// does not depend on one. Kept in its origin, and in a recording's header.
    cJSON *(*origin_default)(const void *scene);
    /// Build again a scene made from opts on the default def: as create on the server's
    /// default when it is def still, else on def itself. files: def may name a file to read
    /// (this server kept it; a recording, anyone's upload, may not).
    int (*create_default)(sim_backend *b, const cJSON *opts, const cJSON *def, int files,
                          void **scene, char *err, size_t err_sz);
};

#define X(name) extern const srv_scene_i srv_scene_##name;
#include "scenes.def"
#undef X

/// The scene of that name; NULL for anything else.
const srv_scene_i *srv_scene_find(const char *name);
/// The default scene (the first in scenes.def).
const srv_scene_i *srv_scene_default(void);
/// The scenes, for error messages: "volume, cloth".
const char *srv_scene_names(void);
/// Every scene, in scenes.def's order; n their count.
const srv_scene_i *const *srv_scenes(int *n);
/// The parse of an event that carries nothing but its envelope (release, reset, ...).
int srv_parse_no_payload(const cJSON *msg, void *out, const char **error, char *err, size_t err_sz);
/// The index of the event called type in the scene's table, or -1.
int srv_scene_event(const srv_scene_i *sc, const char *type);
/// A session's create options (POST /api/sessions, or a recording's header): a JSON object
/// (or NULL: none) whose fields are "scene" and the scene's `known` ones (NULL-terminated).
/// 201, or 400 with err naming the first other field and what the scene takes: a misspelt
/// option must not silently give the default.
int srv_create_fields(const cJSON *opts, const char *scene, const char *const *known, char *err,
                      size_t err_sz);
/// 1 when v is a number with no fraction in [lo, hi].
int srv_json_int_in(const cJSON *v, double lo, double hi);
/// A string option (--name val) into a buffer of cap bytes: 1 (taken), or -1 with err when
/// it does not fit (the return a scene's option hook gives).
int srv_option_string(const char *name, const char *val, char *dst, size_t cap, char *err,
                      size_t err_sz);

/* Parameters come from the scene's declared table (sim_param_desc, its params.def): the
 * server knows none by name. A set_params payload is a srv_param_set: the values checked
 * against the table when the message arrived, applied on the current parameters. */
typedef struct srv_param_set {
    uint32_t n, reserved;
    struct {
        double value;   ///< in range for its entry (a choice: its index)
        uint32_t index; ///< in the table
        uint32_t reserved;
    } v[PROTO_MAX_PARAMS];
} srv_param_set;
/// Bytes of a set of n values.
#define SRV_PARAM_SET_BYTES(n) \
    (offsetof(srv_param_set, v) + (size_t)(n) * sizeof(((srv_param_set *)0)->v[0]))

/// Parse field "params" of msg against the table into out (a choice by index or by name).
/// Returns its size, or -1 with err saying why and *error "bad parameter" (unknown,
/// internal, out of range) or left alone (malformed: a bad message).
int srv_params_parse(const sim_param_desc *t, int n, const cJSON *msg, srv_param_set *out,
                     const char **error, char *err, size_t err_sz);
/// A set of one parameter given by name (a choice by its name): set_condition's payload.
int srv_param_parse_one(const sim_param_desc *t, int n, const char *name, const cJSON *value,
                        srv_param_set *out, const char **error, char *err, size_t err_sz);
/// Apply a parsed set to params (a scene's parameter struct; t its table of n entries).
/// Entries out of the table, internal or out of range are skipped.
void srv_params_apply(const sim_param_desc *t, int n, const srv_param_set *ps, void *params);
/// The values as one flat JSON object (choices by name), malloc'd.
char *srv_params_json(const sim_param_desc *t, int n, const void *params);
/// The schema clients render their panel from: [{name, type, min, max, default, unit,
/// doc, group, choices?}, ...] in the table's order, internal entries left out.
cJSON *srv_params_schema(const sim_param_desc *t, int n);

#endif
