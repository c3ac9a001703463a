/* scene.h: the scene kinds a session can hold (scene_volume.c, scene_cloth.c). The
 * session, the worker's beat, the encoding and the delivery are the same for all; a
 * scene says how it is built from the POST options, how events apply, how it steps, what
 * it shows, and what its parameters are. */
#ifndef SERVER_SCENE_H
#define SERVER_SCENE_H

#include <cjson/cJSON.h>

#include "server.h"

/* What a session shows: up to SRV_MAX_SURF surfaces in world units inside a box fixed
 * for the session (the quantisation box). The topology number changes whenever any
 * surface's triangles change (a cloth LOD switch): the next frame is then a keyframe,
 * preceded by the scene's table frame when it has one. */
typedef struct srv_view {
    float bmin[3], bmax[3];
    int nsurf;
    struct {
        uint8_t id;
        uint32_t nvert, ntri;
        const uint32_t *tri;
        const float *pos;
    } surf[SRV_MAX_SURF];
    uint32_t topology;
    /* Optional: a table frame (kind 4, cloth LODs) to send with every keyframe. */
    const proto_lod_entry *lods;
    uint32_t nlods;
} srv_view;

struct srv_scene_i {
    const char *name;
    /* Build ss->scene_data from the POST body. Returns an HTTP status (201 when built);
     * on failure err names the field or the limit. */
    int (*create)(srv *s, srv_session *ss, const cJSON *opts, char *err, size_t err_sz);
    void (*destroy)(srv *s, srv_session *ss);
    /* One inbox event (worker); errors go back through srv_reply_error. Sets
     * *params_changed when the parameters in the state message change. */
    void (*apply)(srv *s, srv_session *ss, const srv_inbox_item *it, int *params_changed);
    /* One frame (worker). Returns 1 when the view changed; *ms: the step's time. */
    int (*step)(srv *s, srv_session *ss, double *ms);
    /* The view after the last step (worker); valid until the next step. */
    void (*view)(srv_session *ss, srv_view *out);
    /* The parameters as one flat JSON object, malloc'd (worker, or before publication). */
    char *(*params_json)(srv_session *ss);
    /* The scene's declared parameter table (any thread): names, ranges, the schema. */
    const sim_param_desc *(*params_table)(int *n);
    /* Facts fixed at creation, for REST and state messages (any thread). */
    void (*describe)(srv_session *ss, cJSON *j);
};

extern const srv_scene_i srv_scene_volume;
extern const srv_scene_i srv_scene_cloth;
/// "volume" or "cloth"; NULL for anything else.
const srv_scene_i *srv_scene_find(const char *name);
/// The names, for error messages: "volume, cloth".
#define SRV_SCENE_NAMES "volume, cloth"

/* A scene's parameters come from its declared table (sim_param_desc, the scene's
 * params.def): the server knows no parameter by name. */
/// Set one by the name a client used: SIM_OK, or SIM_ERR_ARG with err saying why (unknown,
/// internal, out of range).
sim_status srv_params_set(const sim_param_desc *t, int n, void *params, const char *name, double v,
                          char *err, size_t err_sz);
/// The values as one flat JSON object (choices by name), malloc'd.
char *srv_params_json(const sim_param_desc *t, int n, const void *params);
/// The schema clients render their panel from: [{name, type, min, max, default, unit,
/// doc, group, choices?}, ...] in the table's order, internal entries left out.
cJSON *srv_params_schema(const sim_param_desc *t, int n);

/* sched.c: an error reply to one client, from the worker. */
void srv_reply_error(srv_session *ss, uint32_t client, uint32_t seq, const char *error,
                     const char *detail);
/* sched.c: CPU threads a step may use now (the cores shared among busy workers). */
int srv_step_threads(srv *s);

#endif
