/* scene_session.h: one scene's session driven as the server drives it, for the adapter tests
 * (test_scene_*_snapshot.c): the worker's context (replies dropped, refusals counted and
 * printed), client messages parsed as the WebSocket thread does and applied as the worker
 * does, at the scene's own parse and apply. */
#ifndef TESTS_SERVER_SCENE_SESSION_H
#define TESTS_SERVER_SCENE_SESSION_H

#include "server/scene.h"

typedef struct scene_session {
    const srv_scene_i *sc;
    void *scene;
    sim_backend *be;
    srv_scene_ctx ctx;       /* ctx.impl: this session */
    int errors;              /* events refused by apply */
    uint32_t last_error_seq; /* the last refusal's seq and detail */
    char last_error[256];
} scene_session;

/// A session of scene `name` made from the POST options opts_json on a CPU backend of
/// `threads`, driven by client 1. 1 when made (else the reason printed, 0).
int scene_session_open(scene_session *s, const char *name, const char *opts_json, int threads);
void scene_session_close(scene_session *s);
/// One client message: parsed, then applied now. 0, or -1 when parse refused it (a test
/// failure recorded with the reason).
int scene_session_send(scene_session *s, const char *json);

#endif
