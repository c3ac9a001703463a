/* scene_cloth.c: the cloth scene in a session: a crowd of characters wearing capes at
 * levels of detail (sim/cloth/). The view is one object per character (id = its index):
 * its cape's triangles, then its body as boxes round its capsules, in the character's root
 * frame (x forward, y left, z up, metres), with the root's position and heading as the
 * object's transform. A character who walks costs its transform and its cape's flutter; a
 * LOD switch re-keys that character alone, its key saying the LOD and the switch's
 * errors. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "scene.h"
#include "sim/cloth/cloth.h"

#define MAX_CHARACTERS 400

/* Bits per position and frames between shape updates, by LOD (at most: the budget may
 * space the updates further). A quantum of a quarter of the
 * LOD's own triangle edge is far below the error the LOD itself makes (LOD 0's edge is
 * 3 cm, LOD 1's 6, LOD 2's 12; 8 bits over the 2 m box is 8 mm, 7 bits 16 mm, 6 bits
 * 32 mm), and at the distances where the LOD is chosen each is 1 to 2 pixels of a 1080-line
 * view at 50 degrees. Between shape updates a character keeps its shape and takes its
 * transform each frame (hold), so the crowd walks at the frame rate while capes flutter
 * at up to 60, 30 and 15 Hz (60 Hz frames). The character a driver holds updates every frame
 * with 10 bits (2 mm): the hand and the cloth it pulls are what the driver looks at.
 * Measured on the walking crowd of 100 (protocol/README.md, "Sizes measured"): these
 * choices are what keep five viewers of it under 300 KB/s each. */
static const uint8_t k_lod_bits[SIM_CLOTH_NLOD] = {8, 7, 6};
static const int k_lod_every[SIM_CLOTH_NLOD] = {1, 2, 4};

/* The view's budget: when the frames cost more than it allows, every shape update is
 * spaced further, in proportion (at least one more time its LOD's interval, up to SLOW_MAX
 * times); when they cost under 60% of it, one time less. A change waits SLOW_FRAMES
 * frames, about as long as the server's moving average of frame bytes takes to show it. */
#define SLOW_MAX    8
#define SLOW_FRAMES 30
#define HELD_BITS   10

/* The root-frame box of a character: cape and body as walking, running, turning and
 * jumping take them (measured over 400 frames of 50 characters each). A narrower box would
 * not save bytes: the bits are chosen for a quantum, and a narrower box only makes it
 * finer. A cape that leaves it (a pull, a gust) takes a box grown to hold it, in 0.25 m
 * steps, until it has been back inside for WIDE_FRAMES frames; each change re-keys that
 * character. */
static const float k_box[2][3] = {{-1.0f, -0.9f, -0.05f}, {0.6f, 0.9f, 2.0f}};
#define BOX_STEP    0.25f
#define WIDE_FRAMES 60

typedef struct character_view {
    float *pos;    /* local: cape then body boxes */
    uint32_t *tri; /* cape then body */
    int lod;       /* of the cape triangles in tri (-1: none yet) */
    uint32_t topo; /* changes with tri */
    int wide;      /* frames left in the grown box (0: the normal box) */
    float box[2][3];
} character_view;

typedef struct cloth_srv {
    sim_cloth_model *model;
    sim_cloth_scene *sim;
    int nchar;
    int grabbed;     /* the character whose vertex is held (move and release go to it) */
    float camera[3]; /* the camera's last position, kept across a reset */
    int has_camera;
    character_view *cv;
    proto_object_in *obj; /* the view: one object per character */
    int slow;             /* shape updates spaced this many times their LOD's interval */
    uint64_t slow_at;     /* the frame slow last changed */
    size_t bytes;         /* what it may hold, set when made (cl_bytes) */
} cloth_srv;

static char *cl_params_json(const void *scene)
{
    const cloth_srv *c = scene;
    sim_cloth_params p = sim_cloth_get_params(c->sim);
    int n;
    const sim_param_desc *t = sim_cloth_params_table(&n);
    return srv_params_json(t, n, &p);
}

static int cl_create(sim_backend *b, const cJSON *opts, void **out, char *err, size_t err_sz)
{
    static const char *const known[] = {"characters", NULL};
    int status = srv_create_fields(opts, "cloth", known, err, err_sz);
    if (status != 201)
        return status;
    const cJSON *n = cJSON_GetObjectItemCaseSensitive(opts, "characters");
    int nchar = 1;
    if (n) {
        if (!srv_json_int_in(n, 1, MAX_CHARACTERS)) {
            snprintf(err, err_sz, "\"characters\" must be an integer 1 to %d", MAX_CHARACTERS);
            return 400;
        }
        nchar = (int)n->valuedouble;
    }
    cloth_srv *c = calloc(1, sizeof *c);
    if (!c) {
        snprintf(err, err_sz, "out of memory");
        return 500;
    }
    *out = c;
    c->nchar = nchar;
    c->grabbed = -1;
    c->slow = 1;
    if (sim_cloth_model_create(&c->model, NULL, err, err_sz) != SIM_OK ||
        sim_cloth_scene_create(&c->sim, c->model, b, nchar, err, err_sz) != SIM_OK)
        return 500;
    int maxt, maxv = sim_cloth_character_mesh_max(c->model, &maxt);
    c->cv = calloc((size_t)nchar, sizeof *c->cv);
    c->obj = calloc((size_t)nchar, sizeof *c->obj);
    for (int i = 0; c->cv && c->obj && i < nchar; i++) {
        character_view *v = &c->cv[i];
        v->pos = malloc((size_t)maxv * 3 * sizeof(float));
        v->tri = malloc((size_t)maxt * 3 * sizeof(uint32_t));
        v->lod = -1;
        if (!v->pos || !v->tri)
            break;
    }
    if (!c->cv || !c->obj || !c->cv[nchar - 1].tri) {
        snprintf(err, err_sz, "out of memory");
        return 500;
    }
    c->bytes = sizeof *c + sim_cloth_model_bytes(c->model) + sim_cloth_scene_bytes(c->sim) +
               (size_t)nchar * (sizeof *c->cv + sizeof *c->obj + (size_t)maxv * 3 * sizeof(float) +
                                (size_t)maxt * 3 * sizeof(uint32_t));
    return 201;
}

/* Charged to --memory-budget: its model, its scene as large as it may grow, and its view
 * (fixed when made, so any thread may ask while the worker steps or resets it). */
static size_t cl_bytes(const void *scene)
{
    return ((const cloth_srv *)scene)->bytes;
}

static void cl_destroy(void *scene)
{
    cloth_srv *c = scene;
    if (!c)
        return;
    sim_cloth_scene_destroy(c->sim);
    sim_cloth_model_destroy(c->model);
    for (int i = 0; c->cv && i < c->nchar; i++)
        free(c->cv[i].pos), free(c->cv[i].tri);
    free(c->cv), free(c->obj);
    free(c);
}

/* ------------------------------------------------------------------ events */

/* The payload of every cloth event but set_params, as it waits in the inbox. */
typedef struct cl_event {
    float point[3]; /* camera, grab, move: m; wind: the impulse, m/s */
    int32_t character, vertex, lod;
    uint8_t motion; /* sim_motion */
} cl_event;

static int parse_camera(const cJSON *msg, void *out, const char **error, char *err, size_t err_sz)
{
    (void)error;
    cl_event *e = out;
    memset(e, 0, sizeof *e);
    return proto_read_vec3(msg, "point", 1e6, e->point, err, err_sz) ? -1 : (int)sizeof *e;
}

static int parse_wind(const cJSON *msg, void *out, const char **error, char *err, size_t err_sz)
{
    (void)error;
    cl_event *e = out;
    memset(e, 0, sizeof *e);
    return proto_read_vec3(msg, "impulse", 100, e->point, err, err_sz) ? -1 : (int)sizeof *e;
}

static int parse_force_lod(const cJSON *msg, void *out, const char **error, char *err,
                           size_t err_sz)
{
    (void)error;
    cl_event *e = out;
    memset(e, 0, sizeof *e);
    if (proto_read_int(msg, "character", -1, MAX_CHARACTERS - 1, &e->character, err, err_sz) ||
        proto_read_int(msg, "lod", -1, SIM_CLOTH_NLOD - 1, &e->lod, err, err_sz))
        return -1;
    return (int)sizeof *e;
}

static int parse_motion(const cJSON *msg, void *out, const char **error, char *err, size_t err_sz)
{
    (void)error;
    cl_event *e = out;
    memset(e, 0, sizeof *e);
    if (proto_read_int(msg, "character", -1, MAX_CHARACTERS - 1, &e->character, err, err_sz))
        return -1;
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(msg, "motion");
    int k = cJSON_IsString(m) ? sim_motion_parse(m->valuestring) : -1;
    if (k < 0) {
        size_t at = (size_t)snprintf(err, err_sz, "motion must be");
        for (int i = 0; i < SIM_NMOTION && at < err_sz; i++)
            at += (size_t)snprintf(err + at, err_sz - at, "%s %s",
                                   i == 0                 ? ""
                                   : i + 1 == SIM_NMOTION ? " or"
                                                          : ",",
                                   sim_motion_name(i));
        return -1;
    }
    e->motion = (uint8_t)k;
    return (int)sizeof *e;
}

static int parse_grab(const cJSON *msg, void *out, const char **error, char *err, size_t err_sz)
{
    cl_event *e = out;
    memset(e, 0, sizeof *e);
    if (!cJSON_GetObjectItemCaseSensitive(msg, "vertex")) {
        *error = "not in this scene";
        snprintf(err, err_sz, "cloth is grabbed by character and vertex");
        return -1;
    }
    if (proto_read_int(msg, "character", 0, MAX_CHARACTERS - 1, &e->character, err, err_sz) ||
        proto_read_int(msg, "vertex", 0, 1 << 20, &e->vertex, err, err_sz) ||
        proto_read_vec3(msg, "point", 1e6, e->point, err, err_sz))
        return -1;
    return (int)sizeof *e;
}

static int parse_move(const cJSON *msg, void *out, const char **error, char *err, size_t err_sz)
{
    return parse_camera(msg, out, error, err, err_sz); /* a point, m */
}

static int parse_params(const cJSON *msg, void *out, const char **error, char *err, size_t err_sz)
{
    int n;
    const sim_param_desc *t = sim_cloth_params_table(&n);
    return srv_params_parse(t, n, msg, out, error, err, err_sz);
}

/* Hand one event to the sim now; a refusal goes back to its sender. */
static int to_sim(srv_scene_ctx *c, cloth_srv *cs, const srv_event *e, const sim_cloth_event *ev)
{
    char err[256] = "";
    if (sim_cloth_apply_event(cs->sim, ev, err, sizeof err) == SIM_OK)
        return 0;
    c->error(c, e->client, e->seq, "event refused", err);
    return -1;
}

/* A sim event from a payload: type, character, point, vertex, lod, motion. */
static sim_cloth_event sim_event(sim_cloth_event_type type, const cl_event *p)
{
    sim_cloth_event ev;
    memset(&ev, 0, sizeof ev);
    ev.type = type;
    if (p) {
        ev.character = p->character;
        ev.vertex = p->vertex;
        ev.lod = p->lod;
        ev.motion = (sim_motion)p->motion;
        memcpy(ev.point, p->point, sizeof ev.point);
    }
    return ev;
}

/* The camera moves at pointer rate and applies even while paused: the sim reads it only
 * when it steps. */
static void on_camera(srv_scene_ctx *c, void *scene, const srv_event *e)
{
    cloth_srv *cs = scene;
    sim_cloth_event ev = sim_event(SIM_CLOTH_EV_CAMERA, e->data);
    if (to_sim(c, cs, e, &ev) == 0) {
        memcpy(cs->camera, ev.point, sizeof cs->camera);
        cs->has_camera = 1;
    }
}

static void on_force_lod(srv_scene_ctx *c, void *scene, const srv_event *e)
{
    sim_cloth_event ev = sim_event(SIM_CLOTH_EV_FORCE_LOD, e->data);
    to_sim(c, scene, e, &ev);
}

static void on_motion(srv_scene_ctx *c, void *scene, const srv_event *e)
{
    sim_cloth_event ev = sim_event(SIM_CLOTH_EV_MOTION, e->data);
    to_sim(c, scene, e, &ev);
}

static void on_wind(srv_scene_ctx *c, void *scene, const srv_event *e)
{
    sim_cloth_event ev = sim_event(SIM_CLOTH_EV_WIND, e->data);
    to_sim(c, scene, e, &ev);
}

/* One hand: a grab of another character lets go of the first. */
static void on_grab(srv_scene_ctx *c, void *scene, const srv_event *e)
{
    cloth_srv *cs = scene;
    const cl_event *p = e->data;
    if (cs->grabbed >= 0 && cs->grabbed != p->character) {
        sim_cloth_event rel = sim_event(SIM_CLOTH_EV_RELEASE, NULL);
        rel.character = cs->grabbed;
        (void)sim_cloth_apply_event(cs->sim, &rel, NULL, 0);
        cs->grabbed = -1;
    }
    sim_cloth_event ev = sim_event(SIM_CLOTH_EV_GRAB, p);
    if (to_sim(c, cs, e, &ev) == 0)
        cs->grabbed = p->character;
}

static void on_move(srv_scene_ctx *c, void *scene, const srv_event *e)
{
    cloth_srv *cs = scene;
    if (cs->grabbed < 0)
        return; /* nothing held */
    sim_cloth_event ev = sim_event(SIM_CLOTH_EV_MOVE, e->data);
    ev.character = cs->grabbed;
    to_sim(c, cs, e, &ev);
}

static void on_release(srv_scene_ctx *c, void *scene, const srv_event *e)
{
    cloth_srv *cs = scene;
    if (cs->grabbed < 0)
        return;
    sim_cloth_event ev = sim_event(SIM_CLOTH_EV_RELEASE, NULL);
    ev.character = cs->grabbed;
    cs->grabbed = -1;
    to_sim(c, cs, e, &ev);
}

/* On the parameters in force: an earlier set_params of this frame is applied already. */
static void on_params(srv_scene_ctx *c, void *scene, const srv_event *e)
{
    cloth_srv *cs = scene;
    int n;
    const sim_param_desc *t = sim_cloth_params_table(&n);
    sim_cloth_event ev = sim_event(SIM_CLOTH_EV_SET_PARAMS, NULL);
    ev.params = sim_cloth_get_params(cs->sim);
    srv_params_apply(t, n, e->data, &ev.params);
    if (to_sim(c, cs, e, &ev) == 0)
        c->params_changed = 1;
}

/* The crowd back where it started; parameters and camera kept. */
static void on_reset(srv_scene_ctx *c, void *scene, const srv_event *e)
{
    cloth_srv *cs = scene;
    char err[256] = "";
    sim_cloth_scene *fresh;
    if (sim_cloth_scene_create(&fresh, cs->model, c->backend, cs->nchar, err, sizeof err) !=
        SIM_OK) {
        c->error(c, e->client, e->seq, "event refused", err);
        return;
    }
    sim_cloth_event prm = sim_event(SIM_CLOTH_EV_SET_PARAMS, NULL);
    prm.params = sim_cloth_get_params(cs->sim);
    sim_cloth_scene_destroy(cs->sim);
    cs->sim = fresh;
    cs->grabbed = -1;
    (void)sim_cloth_apply_event(cs->sim, &prm, NULL, 0); /* valid: they were in force */
    if (cs->has_camera) {
        sim_cloth_event cam = sim_event(SIM_CLOTH_EV_CAMERA, NULL);
        memcpy(cam.point, cs->camera, sizeof cam.point);
        (void)sim_cloth_apply_event(cs->sim, &cam, NULL, 0);
    }
}

static const srv_event_desc k_events[] = {
    {"camera", SRV_EV_UNPAUSED, parse_camera, on_camera},
    {"force_lod", 0, parse_force_lod, on_force_lod},
    {"motion", 0, parse_motion, on_motion},
    {"wind", 0, parse_wind, on_wind},
    {"grab", 0, parse_grab, on_grab},
    {"move", 0, parse_move, on_move},
    {"release", 0, srv_parse_no_payload, on_release},
    {"set_params", 0, parse_params, on_params},
    {"reset", 0, srv_parse_no_payload, on_reset},
};
_Static_assert(sizeof(cl_event) + sizeof(srv_item) <= 64, "a cloth event stays small");

/* ------------------------------------------------------------ step and view */

static int cl_step(srv_scene_ctx *c, void *scene, double *ms)
{
    cloth_srv *cs = scene;
    sim_cloth_metrics mt;
    char err[256];
    sim_cloth_set_threads(cs->sim, c->threads);
    if (sim_cloth_step(cs->sim, &mt, err, sizeof err) != SIM_OK) {
        fprintf(stderr, "softcast-server: session %s: step: %s\n", c->session_id, err);
        *ms = 0;
        return 0;
    }
    *ms = mt.step_ms;
    return 1; /* cloth is never quite still while anyone watches */
}

/* Character i's positions in its root frame (sim/cloth's mesh of it: cape, then body
 * boxes); its triangles again after a LOD switch. */
static void character_shape(cloth_srv *c, int i, proto_object_in *o)
{
    character_view *v = &c->cv[i];
    int retri = sim_cloth_lod(c->sim, i) != v->lod;
    sim_cloth_character_mesh m;
    sim_cloth_character_mesh_get(c->sim, c->model, i, v->pos, retri ? v->tri : NULL, &m);
    if (retri) {
        v->lod = m.lod;
        v->topo++;
    }
    o->nvert = (uint32_t)m.nvert;
    o->nelem = (uint32_t)m.ntri;
    o->xf.t[0] = m.root[0], o->xf.t[1] = m.root[1], o->xf.t[2] = m.root[2];
    o->xf.r[0] = 0.0f, o->xf.r[1] = 0.0f;
    o->xf.r[2] = sinf(m.yaw / 2), o->xf.r[3] = cosf(m.yaw / 2);
    o->info[2] = (float)m.cape_nvert, o->info[3] = (float)m.cape_ntri;
}

/* The normal box, or one grown to hold every vertex while any is (or lately was) out. */
static void character_box(character_view *v, uint32_t nvert, float box[2][3])
{
    float lo[3], hi[3];
    memcpy(lo, k_box[0], sizeof lo);
    memcpy(hi, k_box[1], sizeof hi);
    for (uint32_t k = 0; k < nvert; k++)
        for (int a = 0; a < 3; a++) {
            float x = v->pos[k * 3 + (uint32_t)a];
            lo[a] = x < lo[a] ? x : lo[a];
            hi[a] = x > hi[a] ? x : hi[a];
        }
    int out = 0;
    for (int a = 0; a < 3; a++)
        out |= lo[a] < k_box[0][a] || hi[a] > k_box[1][a];
    if (!out && v->wide && --v->wide == 0)
        memcpy(v->box, k_box, sizeof v->box);
    if (out) {
        if (!v->wide)
            memcpy(v->box, k_box, sizeof v->box);
        v->wide = WIDE_FRAMES;
        for (int a = 0; a < 3; a++) { /* grown only, in steps: a flutter keys it once */
            float l = k_box[0][a] - BOX_STEP * ceilf((k_box[0][a] - lo[a]) / BOX_STEP);
            float h = k_box[1][a] + BOX_STEP * ceilf((hi[a] - k_box[1][a]) / BOX_STEP);
            v->box[0][a] = l < v->box[0][a] ? l : v->box[0][a];
            v->box[1][a] = h > v->box[1][a] ? h : v->box[1][a];
        }
    }
    if (!v->wide)
        memcpy(v->box, k_box, sizeof v->box);
    memcpy(box, v->box, sizeof v->box);
}

static void follow_budget(cloth_srv *c, uint64_t frame, const srv_view_budget *b)
{
    if (b->allowed <= 0 || frame < c->slow_at + SLOW_FRAMES)
        return;
    int was = c->slow;
    if (b->used > b->allowed) {
        int k = (int)ceil(c->slow * b->used / b->allowed);
        c->slow = k > SLOW_MAX ? SLOW_MAX : k > c->slow ? k : c->slow + 1;
        c->slow = c->slow > SLOW_MAX ? SLOW_MAX : c->slow;
    } else if (b->used < 0.6 * b->allowed && c->slow > 1)
        c->slow--;
    if (c->slow != was)
        c->slow_at = frame;
}

static void cl_view(void *scene, uint64_t frame, const srv_view_budget *budget, srv_view *out)
{
    cloth_srv *c = scene;
    follow_budget(c, frame, budget);
    for (int i = 0; i < c->nchar; i++) {
        character_view *v = &c->cv[i];
        proto_object_in *o = &c->obj[i];
        memset(o, 0, sizeof *o);
        character_shape(c, i, o);
        float box[2][3];
        character_box(v, o->nvert, box);
        memcpy(o->bmin, box[0], sizeof o->bmin);
        memcpy(o->bmax, box[1], sizeof o->bmax);
        int lod = v->lod < SIM_CLOTH_NLOD ? v->lod : SIM_CLOTH_NLOD - 1;
        o->id = (uint16_t)i;
        o->primitive = PROTO_PRIM_TRIANGLES;
        o->qbits = i == c->grabbed ? HELD_BITS : k_lod_bits[lod];
        o->lod = (uint8_t)v->lod;
        o->pos = v->pos;
        o->elem = v->tri;
        o->topo_version = v->topo;
        sim_cloth_switch sw;
        int has = sim_cloth_last_switch(c->sim, i, &sw);
        o->ninfo = 4;
        o->info[0] = has ? sw.e_pos : 0.0f;
        o->info[1] = has ? sw.e_vel : 0.0f;
        /* Shapes staggered over the frames, so every frame carries about as many. */
        uint64_t every = (uint64_t)(k_lod_every[lod] * c->slow);
        o->hold = i != c->grabbed && (frame + (uint64_t)i) % every != 0;
    }
    out->obj = c->obj;
    out->n = (uint32_t)c->nchar;
}

/* ------------------------------------------------------------ durability */

/* The adapter's own part (what changes after create and shapes later views: the hand, the
 * camera kept across a reset, the budget's spacing, each character's LOD shown, topology
 * version and box), then the sim's (sim_cloth_scene_save) to the end. The view's arrays
 * are rebuilt by every view; the triangles only on a LOD change, so restore fills them
 * for the LOD shown. */
#define CL_TAG     "CLSV"
#define CL_VERSION 1u

static void put_i32(sc_blob *b, int v)
{
    int32_t x = (int32_t)v;
    SC_PUT(b, x);
}

static int cl_save(void *scene, sc_blob *out, char *err, size_t err_sz)
{
    cloth_srv *c = scene;
    sc_blob_tag(out, CL_TAG, CL_VERSION);
    put_i32(out, c->nchar);
    put_i32(out, c->grabbed);
    put_i32(out, c->has_camera);
    sc_blob_put(out, c->camera, sizeof c->camera);
    put_i32(out, c->slow);
    SC_PUT(out, c->slow_at);
    for (int i = 0; i < c->nchar; i++) {
        const character_view *v = &c->cv[i];
        put_i32(out, v->lod);
        SC_PUT(out, v->topo);
        put_i32(out, v->wide);
        sc_blob_put(out, v->box, sizeof v->box);
    }
    return sim_cloth_scene_save(c->sim, out, err, err_sz) == SIM_OK ? 0 : -1;
}

/* What cl_restore reads of one character's view. */
typedef struct view_state {
    int lod, wide;
    uint32_t topo;
    float box[2][3];
} view_state;

static int get_in(sc_reader *r, const char *what, int lo, int hi)
{
    int32_t x;
    SC_GET(r, x);
    if (!r->failed && (x < lo || x > hi)) {
        snprintf(r->why, sizeof r->why, "%s %d, not in %d to %d", what, (int)x, lo, hi);
        r->failed = 1;
    }
    return r->failed ? lo : (int)x;
}

static int cl_restore(void *scene, const void *data, size_t n, char *err, size_t err_sz)
{
    cloth_srv *c = scene;
    sc_reader r = sc_reader_of(data, n);
    sc_reader_tag(&r, CL_TAG, CL_VERSION);
    int nchar = get_in(&r, "characters", 1, MAX_CHARACTERS);
    if (!r.failed && nchar != c->nchar) {
        snprintf(r.why, sizeof r.why, "a snapshot of %d characters, the session has %d", nchar,
                 c->nchar);
        r.failed = 1;
    }
    int grabbed = get_in(&r, "held character", -1, nchar - 1);
    int has_camera = get_in(&r, "has_camera", 0, 1);
    float camera[3];
    sc_reader_get(&r, camera, sizeof camera);
    int slow = get_in(&r, "slow", 1, SLOW_MAX);
    uint64_t slow_at;
    SC_GET(&r, slow_at);
    view_state *vs = r.failed ? NULL : calloc((size_t)nchar, sizeof *vs);
    if (!vs && !r.failed) {
        snprintf(err, err_sz, "out of memory");
        return -1;
    }
    for (int i = 0; !r.failed && i < nchar; i++) {
        vs[i].lod = get_in(&r, "LOD shown", -1, SIM_CLOTH_NLOD - 1);
        SC_GET(&r, vs[i].topo);
        vs[i].wide = get_in(&r, "wide frames", 0, WIDE_FRAMES);
        sc_reader_get(&r, vs[i].box, sizeof vs[i].box);
    }
    if (r.failed) {
        snprintf(err, err_sz, "cloth session snapshot: %s", r.why);
        free(vs);
        return -1;
    }
    if (sim_cloth_scene_restore(c->sim, r.p + r.at, r.n - r.at, err, err_sz) != SIM_OK) {
        free(vs);
        return -1;
    }
    c->grabbed = grabbed;
    c->has_camera = has_camera;
    memcpy(c->camera, camera, sizeof camera);
    c->slow = slow;
    c->slow_at = slow_at;
    for (int i = 0; i < nchar; i++) {
        character_view *v = &c->cv[i];
        v->lod = vs[i].lod;
        v->topo = vs[i].topo;
        v->wide = vs[i].wide;
        memcpy(v->box, vs[i].box, sizeof v->box);
        if (v->lod >= 0 && v->lod == sim_cloth_lod(c->sim, i)) { /* else the next view's */
            sim_cloth_character_mesh m;
            sim_cloth_character_mesh_get(c->sim, c->model, i, v->pos, v->tri, &m);
        }
    }
    free(vs);
    return 0;
}

static uint64_t cl_hash(void *scene)
{
    const cloth_srv *c = scene;
    return sim_cloth_hash(c->sim);
}

static void cl_describe(const void *scene, cJSON *j)
{
    const cloth_srv *c = scene;
    cJSON_AddNumberToObject(j, "characters", c->nchar);
    cJSON_AddNumberToObject(j, "lods", sim_cloth_model_nlod(c->model));
    cJSON_AddStringToObject(j, "units", "m");
}

const srv_scene_i srv_scene_cloth = {
    .name = "cloth",
    .usage = "",
    .events = k_events,
    .nevents = (int)(sizeof k_events / sizeof k_events[0]),
    .create = cl_create,
    .destroy = cl_destroy,
    .bytes = cl_bytes,
    .step = cl_step,
    .view = cl_view,
    .params_json = cl_params_json,
    .params_table = sim_cloth_params_table,
    .describe = cl_describe,
    .save = cl_save,
    .restore = cl_restore,
    .hash = cl_hash,
};
