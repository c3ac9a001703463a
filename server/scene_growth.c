/* scene_growth.c: the growth scene in a session (sim/growth/, ../shared/GROWTH.md): one of two
 * models whose structure grows while the session runs.
 *
 * "plant": the stochastic L-system, one generation every 1 / steps_per_s simulated seconds
 * (or on a step event) until it stops by itself. Its view is one line set (object 0), two
 * vertices a branch with the branch's thickness as their scalar, in the order the branches
 * were made: growth only appends, so a frame carries the new branches and nothing else.
 *
 * Both are drawn with z up (the plant grows along +z; the beam stands in the x-z plane).
 *
 * "truss": the deep beam cloned cell by cell at the same pace, then solved: the cellular
 * automaton shown converging, sweeps_per_frame sweeps a frame (or the direct solve at once),
 * again after every change of load or support. Its view: the cells as triangles (object 0)
 * and the members as lines (object 1), each vertex with log10 of its cell's or member's
 * internal energy (J) as its scalar on a fixed range (ENERGY_LOG_MIN..MAX, the legend), the
 * nodes displaced by the exaggeration. Cells and members are listed in the order they were
 * cloned, so while it grows the frames append.
 *
 * A plant that has stopped, and a truss grown and solved, step nothing until an event. */
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "scene.h"
#include "sim/core/sc_base.h"
#include "sim/growth/growth.h"

#define MAX_CELLS_X     400 /* a session's truss: 80,000 cells at most, */
#define MAX_CELLS_Y     200 /* relaxation about 0.2 ms a sweep each 1,000 cells */
#define SOLVED_RESIDUAL 1e-8
#define ENERGY_LOG_MIN \
    -5.0f /* J: the colour legend's ends (the 100 kN beam spans about 1e-4 to 1 J) */
#define ENERGY_LOG_MAX 1.0f
#define PLANT_BITS     16
#define TRUSS_BITS     16

typedef struct gr_scene {
    int is_truss;
    sim_backend *backend;
    sim_growth_params p;
    double next_s; /* simulated time of the next generation */
    int pending;   /* generations asked for by step events */
    /* the plant */
    sim_plant *plant;
    sim_plant_params rules;
    _Atomic uint64_t seed; /* the worker sets it (reseed); describe reads it on any thread */
    float box_lo[3], box_hi[3];
    float smax;
    /* the truss */
    sim_truss *truss;
    int nx, ny, load_i, load_j;
    sim_truss_params tparams; /* fixed at creation */
    int solved;               /* the displacements answer the current supports and loads */
    int holding;              /* the page's hand holds the load: its moves drag it */
    int not_held;             /* said so to the driver once for this setup */
    uint32_t support_seq; /* the event that last changed the supports (what "not held" answers) */
    int32_t *cell_order, *member_order; /* in the order they stood; counts below */
    int ncell, nmember;
    int vcap; /* the plant's view arrays: branches they hold room for */
    uint8_t *cell_listed, *member_seen;
    int stopped; /* the plant met its branch limit */
    double *energy;
    /* the view (both): vertices, scalars, elements */
    float *v0, *s0, *v1, *s1;
    uint32_t *e0, *e1;
    proto_object_in obj[2];
    int nobj;
} gr_scene;

/* ------------------------------------------------------------------ create */

static uint64_t fresh_seed(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)(ts.tv_nsec ^ ts.tv_sec * 1000003) % 1000000000u + 1u;
}

/* A plant's clones take the scene's live rules. */
static void rules_from_params(gr_scene *v)
{
    v->rules.cont_turn_deg = v->p.cont_turn_deg;
    v->rules.side_angle_min = v->p.side_angle_min;
    v->rules.side_angle_max = v->p.side_angle_max;
    v->rules.min_length = v->p.min_length;
}

/* A plant from the first branch again (its seed: v->seed), swapped in only once made: a failed
 * reseed leaves the plant that was there. */
static int plant_create(gr_scene *v, char *err, size_t err_sz)
{
    const sim_plant_params *r = &v->rules;
    sim_plant *pl = NULL;
    if (sim_plant_create(&pl, r, atomic_load(&v->seed), err, err_sz) != SIM_OK)
        return -1;
    sim_plant_destroy(v->plant);
    v->plant = pl;
    /* Every branch lies within the longest possible path from the root. */
    float reach =
        r->ref_length * r->base_max / (1.0f - fmaxf(r->cont_ratio, r->side_ratio_max)) * 1.01f;
    for (int k = 0; k < 3; k++) /* drawn with z up: the plant grows along +z */
        v->box_lo[k] = -reach, v->box_hi[k] = reach;
    v->box_lo[2] = 0.0f;
    if (!r->three_d)
        v->box_lo[1] = -1.0f, v->box_hi[1] = 1.0f;
    v->smax = sim_plant_branch_size(r, r->ref_length * r->base_max);
    v->next_s = 0.0, v->pending = 0, v->stopped = 0;
    return 0;
}

/* The default case: a pin bottom left, a roller bottom right, the load at the top's middle. */
static void truss_load_case(gr_scene *v)
{
    sim_truss_clear(v->truss);
    sim_truss_support(v->truss, 0, 0, 1, 1);
    sim_truss_support(v->truss, v->nx, 0, 0, 1);
    v->load_i = v->nx / 2, v->load_j = v->ny;
    sim_truss_load(v->truss, v->load_i, v->load_j, 0.0, -1e3 * (double)v->p.load_kn);
    v->solved = 0, v->not_held = 0;
}

/* Cells and members that stood up since the last look join the view's order (so that the
 * frames append them). */
static void list_new_parts(gr_scene *v)
{
    for (int c = 0; c < v->nx * v->ny; c++)
        if (!v->cell_listed[c] && sim_truss_has_cell(v->truss, c % v->nx, c / v->nx)) {
            v->cell_listed[c] = 1;
            v->cell_order[v->ncell++] = c;
        }
    int nm;
    const sim_truss_member *m = sim_truss_members(v->truss, &nm);
    for (int k = 0; k < nm; k++)
        if (!v->member_seen[k] && m[k].area > 0.0) {
            v->member_seen[k] = 1;
            v->member_order[v->nmember++] = k;
        }
}

/* A truss of one cell again, swapped in only once made (a failed regrow leaves the beam that
 * was there), with the default supports and load and its first cell in the view. */
static int truss_create(gr_scene *v, char *err, size_t err_sz)
{
    sim_truss *t = NULL;
    if (sim_truss_create(&t, &v->tparams, v->backend, err, err_sz) != SIM_OK)
        return -1;
    sim_truss_destroy(v->truss);
    v->truss = t;
    int nm;
    sim_truss_members(t, &nm);
    memset(v->cell_listed, 0, (size_t)v->nx * (size_t)v->ny);
    memset(v->member_seen, 0, (size_t)nm);
    v->ncell = v->nmember = 0;
    v->next_s = 0.0, v->pending = 0, v->holding = 0;
    list_new_parts(v);
    truss_load_case(v);
    return 0;
}

/* The truss's view arrays, for its extent, once (gr_create). */
static int truss_alloc(gr_scene *v, char *err, size_t err_sz)
{
    sim_truss_params tp = sim_truss_default_params();
    tp.nx = v->nx, tp.ny = v->ny;
    v->tparams = tp;
    size_t nc = (size_t)v->nx * (size_t)v->ny;
    size_t nm = (size_t)v->nx * (size_t)(v->ny + 1) + (size_t)(v->nx + 1) * (size_t)v->ny + 2 * nc;
    v->cell_listed = calloc(nc, 1);
    v->cell_order = malloc(nc * sizeof *v->cell_order);
    v->member_order = malloc(nm * sizeof *v->member_order);
    v->member_seen = calloc(nm, 1);
    v->energy = calloc(nc, sizeof *v->energy);
    v->v0 = malloc(nc * 4 * 3 * sizeof(float)), v->s0 = malloc(nc * 4 * sizeof(float));
    v->e0 = malloc(nc * 2 * 3 * sizeof(uint32_t));
    v->v1 = malloc(nm * 2 * 3 * sizeof(float)), v->s1 = malloc(nm * 2 * sizeof(float));
    v->e1 = malloc(nm * 2 * sizeof(uint32_t));
    if (!v->cell_listed || !v->cell_order || !v->member_order || !v->member_seen || !v->energy ||
        !v->v0 || !v->s0 || !v->e0 || !v->v1 || !v->s1 || !v->e1) {
        snprintf(err, err_sz, "out of memory");
        return -1;
    }
    return truss_create(v, err, err_sz);
}

/* "model": plant (default) or truss; plant: "seed" (1 to 2^31 - 1, default a fresh one),
 * "three_d" (bool); truss: "cells" [nx, ny]. Anything else is refused by name. */
static int parse_create(const cJSON *o, gr_scene *v, char *err, size_t err_sz)
{
    static const char *const known[] = {"model", "seed", "three_d", "cells", NULL};
    int status = srv_create_fields(o, "growth", known, err, err_sz);
    if (status != 201)
        return status;
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(o, "model");
    if (m && (!cJSON_IsString(m) ||
              (strcmp(m->valuestring, "plant") && strcmp(m->valuestring, "truss")))) {
        snprintf(err, err_sz, "\"model\" must be \"plant\" or \"truss\"");
        return 400;
    }
    v->is_truss = m && !strcmp(m->valuestring, "truss");
    const cJSON *seed = cJSON_GetObjectItemCaseSensitive(o, "seed");
    const cJSON *three = cJSON_GetObjectItemCaseSensitive(o, "three_d");
    const cJSON *cells = cJSON_GetObjectItemCaseSensitive(o, "cells");
    if (v->is_truss && (seed || three)) {
        snprintf(err, err_sz, "\"%s\" is for the plant", seed ? "seed" : "three_d");
        return 400;
    }
    if (!v->is_truss && cells) {
        snprintf(err, err_sz, "\"cells\" is for the truss");
        return 400;
    }
    if (seed && !srv_json_int_in(seed, 1, 2147483647.0)) {
        snprintf(err, err_sz, "\"seed\" must be an integer 1 to 2147483647");
        return 400;
    }
    if (three && !cJSON_IsBool(three)) {
        snprintf(err, err_sz, "\"three_d\" must be true or false");
        return 400;
    }
    atomic_store(&v->seed, seed ? (uint64_t)seed->valuedouble : fresh_seed());
    v->rules.three_d = three && cJSON_IsTrue(three);
    v->nx = 50, v->ny = 25;
    if (cells) {
        const cJSON *x = cJSON_IsArray(cells) && cJSON_GetArraySize(cells) == 2
                             ? cJSON_GetArrayItem(cells, 0)
                             : NULL;
        const cJSON *y = x ? cJSON_GetArrayItem(cells, 1) : NULL;
        if (!srv_json_int_in(x, 1, MAX_CELLS_X) || !srv_json_int_in(y, 1, MAX_CELLS_Y)) {
            snprintf(err, err_sz, "\"cells\" must be [nx, ny], integers 1 to %d and 1 to %d",
                     MAX_CELLS_X, MAX_CELLS_Y);
            return 400;
        }
        v->nx = (int)x->valuedouble, v->ny = (int)y->valuedouble;
    }
    return 201;
}

static int gr_create(sim_backend *b, const cJSON *opts, void **out, char *err, size_t err_sz)
{
    gr_scene *v = calloc(1, sizeof *v);
    if (!v) {
        snprintf(err, err_sz, "out of memory");
        return 500;
    }
    *out = v;
    v->backend = b;
    v->p = sim_growth_default_params();
    v->rules = sim_plant_default_params();
    int status = parse_create(opts, v, err, err_sz);
    if (status != 201)
        return status;
    rules_from_params(v);
    if (v->is_truss ? truss_alloc(v, err, err_sz) : plant_create(v, err, err_sz))
        return 500;
    return 201;
}

static void gr_destroy(void *scene)
{
    gr_scene *v = scene;
    if (!v)
        return;
    sim_plant_destroy(v->plant);
    sim_truss_destroy(v->truss);
    free(v->cell_order), free(v->member_order), free(v->member_seen), free(v->energy);
    free(v->cell_listed);
    free(v->v0), free(v->s0), free(v->e0), free(v->v1), free(v->s1), free(v->e1);
    free(v);
}

/* From what is fixed at creation only (any thread may ask while the worker regrows): a plant
 * at its branch cap, a truss of its extent. */
static size_t gr_bytes(const void *scene)
{
    const gr_scene *v = scene;
    if (!v->is_truss) /* a branch, and its two vertices (position, scalar) and segment */
        return (size_t)v->rules.max_branches *
               (sizeof(sim_branch) + 2 * 4 * sizeof(float) + 2 * sizeof(uint32_t));
    size_t nc = (size_t)v->nx * (size_t)v->ny, nn = (size_t)(v->nx + 1) * (size_t)(v->ny + 1);
    size_t nm = (size_t)v->nx * (size_t)(v->ny + 1) + (size_t)(v->nx + 1) * (size_t)v->ny + 2 * nc;
    return nc * (1 + 2 * 8 + 8 + 1 + 4) +                /* flag, diagonals, energy, order */
           nm * (sizeof(sim_truss_member) + 8 + 1 + 4) + /* members, areas, order */
           nn * (1 + 4 * 8) +                            /* supports, loads, displacements */
           nc * (4 * 4 * sizeof(float) + 6 * sizeof(uint32_t)) + /* the view's cells */
           nm * (2 * 4 * sizeof(float) + 2 * sizeof(uint32_t));  /* and its members */
}

/* ------------------------------------------------------------------ events */

/* Every growth event's payload but set_params. */
typedef struct gr_event {
    float point[3]; /* load: a point (m) instead of a node */
    int32_t node[2];
    int32_t has_node, fix; /* support: 0 free, 1 roller (y fixed), 2 pin */
    int32_t seed;
} gr_event;
_Static_assert(SRV_ITEM_BYTES(sizeof(gr_event)) <= 64, "a growth event stays small");

static int parse_node(const cJSON *msg, gr_event *e, char *err, size_t err_sz)
{
    const cJSON *n = cJSON_GetObjectItemCaseSensitive(msg, "node");
    const cJSON *i =
        cJSON_IsArray(n) && cJSON_GetArraySize(n) == 2 ? cJSON_GetArrayItem(n, 0) : NULL;
    const cJSON *j = i ? cJSON_GetArrayItem(n, 1) : NULL;
    if (!cJSON_IsNumber(i) || !cJSON_IsNumber(j) || i->valuedouble != floor(i->valuedouble) ||
        j->valuedouble != floor(j->valuedouble) || fabs(i->valuedouble) > 1e6 ||
        fabs(j->valuedouble) > 1e6) {
        snprintf(err, err_sz, "field \"node\" must be [i, j], two integers");
        return -1;
    }
    e->node[0] = (int32_t)i->valuedouble, e->node[1] = (int32_t)j->valuedouble;
    e->has_node = 1;
    return 0;
}

/* load: {"node": [i, j]} or {"point": [x, y, z]} (world m, the beam in x-z: the nearest node
 * takes it); grab and move (the page's hand) are a load at their point. */
static int parse_load(const cJSON *msg, void *out, const char **error, char *err, size_t err_sz)
{
    (void)error;
    gr_event *e = out;
    int world;
    memset(e, 0, sizeof *e);
    if (cJSON_GetObjectItemCaseSensitive(msg, "node"))
        return parse_node(msg, e, err, err_sz) ? -1 : (int)sizeof *e;
    if (proto_read_vec3(msg, "point", 1e4, e->point, err, err_sz) ||
        proto_read_choice(msg, "space", "world", 0, &world, err, err_sz))
        return -1;
    return (int)sizeof *e;
}

static int parse_support(const cJSON *msg, void *out, const char **error, char *err, size_t err_sz)
{
    (void)error;
    gr_event *e = out;
    memset(e, 0, sizeof *e);
    if (parse_node(msg, e, err, err_sz) ||
        proto_read_choice(msg, "fix", "free|roller|pin", 1, &e->fix, err, err_sz))
        return -1;
    return (int)sizeof *e;
}

static int parse_reseed(const cJSON *msg, void *out, const char **error, char *err, size_t err_sz)
{
    (void)error;
    gr_event *e = out;
    memset(e, 0, sizeof *e);
    return proto_read_int(msg, "seed", 1, INT32_MAX, &e->seed, err, err_sz) ? -1 : (int)sizeof *e;
}

static int parse_params(const cJSON *msg, void *out, const char **error, char *err, size_t err_sz)
{
    int n;
    const sim_param_desc *t = sim_growth_params_table(&n);
    return srv_params_parse(t, n, msg, out, error, err, err_sz);
}

/* Refuse an event meant for the other model: 1 when refused. */
static int wrong_model(srv_scene_ctx *c, const gr_scene *v, const srv_event *e, int truss)
{
    if (v->is_truss == truss)
        return 0;
    c->error(c, e->client, e->seq, "not in this scene",
             truss ? "this is a plant: loads and supports are the truss's"
                   : "this is a truss: seeds are the plant's");
    return 1;
}

/* Node n's drawn position: its place plus the exaggerated displacement, kept in the box. */
static void node_at(const gr_scene *v, const double *u, int n, const float lo[3], const float hi[3],
                    float out[3])
{
    double l = v->tparams.cell_m, e = (double)v->p.exaggeration;
    int w = v->nx + 1;
    out[0] = (float)fmin(fmax((n % w) * l + e * u[n * 2], (double)lo[0]), (double)hi[0]);
    out[1] = 0.0f; /* the beam in x-z, z up */
    out[2] = (float)fmin(fmax((n / w) * l + e * u[n * 2 + 1], (double)lo[2]), (double)hi[2]);
}

/* The truss's quantisation box (world m, the beam in x-z): the beam and half its longer side
 * round it, room for the exaggerated displacements. */
static void truss_box(const gr_scene *v, float lo[3], float hi[3])
{
    double l = v->tparams.cell_m;
    float margin = (float)(0.5 * l * (v->nx > v->ny ? v->nx : v->ny));
    lo[0] = -margin, lo[1] = -0.01f, lo[2] = -margin;
    hi[0] = (float)(v->nx * l) + margin, hi[1] = 0.01f, hi[2] = (float)(v->ny * l) + margin;
}

/* The node drawn nearest to a world point: where the page's pointer was, on the beam as it is
 * shown (displaced and exaggerated), not on the beam at rest. */
static void nearest_node(const gr_scene *v, const float p[3], int *ni, int *nj)
{
    const double *u = sim_truss_displacements(v->truss);
    float lo[3], hi[3], at[3];
    truss_box(v, lo, hi);
    double best = INFINITY;
    for (int n = 0; n < (v->nx + 1) * (v->ny + 1); n++) {
        node_at(v, u, n, lo, hi, at);
        double dx = (double)at[0] - (double)p[0], dz = (double)at[2] - (double)p[2];
        if (dx * dx + dz * dz < best)
            best = dx * dx + dz * dz, *ni = n % (v->nx + 1), *nj = n / (v->nx + 1);
    }
}

/* Returns 1 when the load stands at the event's node or point now, 0 when refused. */
static int move_load(srv_scene_ctx *c, gr_scene *v, const srv_event *e)
{
    const gr_event *p = e->data;
    if (wrong_model(c, v, e, 1))
        return 0;
    int i = p->node[0], j = p->node[1];
    if (!p->has_node)
        nearest_node(v, p->point, &i, &j);
    if (i < 0 || j < 0 || i > v->nx || j > v->ny) {
        char err[128];
        snprintf(err, sizeof err, "node [%d, %d] is off the beam (0..%d, 0..%d)", i, j, v->nx,
                 v->ny);
        c->error(c, e->client, e->seq, "event refused", err);
        return 0;
    }
    if (i == v->load_i && j == v->load_j)
        return 1;
    sim_truss_load(v->truss, v->load_i, v->load_j, 0.0, 0.0);
    v->load_i = i, v->load_j = j;
    sim_truss_load(v->truss, i, j, 0.0, -1e3 * (double)v->p.load_kn);
    v->solved = 0, v->not_held = 0;
    return 1;
}

static void on_load(srv_scene_ctx *c, void *scene, const srv_event *e)
{
    move_load(c, scene, e);
}

/* The page's hand: a grab puts the load at its point and holds it, moves drag it while held
 * (a press that placed a support sends no grab: its drag moves nothing), a release lets go
 * with the load where it is. */
static void on_grab(srv_scene_ctx *c, void *scene, const srv_event *e)
{
    gr_scene *v = scene;
    v->holding = move_load(c, v, e);
}

static void on_move(srv_scene_ctx *c, void *scene, const srv_event *e)
{
    gr_scene *v = scene;
    if (v->holding)
        move_load(c, v, e);
}

static void on_release(srv_scene_ctx *c, void *scene, const srv_event *e)
{
    (void)c, (void)e;
    ((gr_scene *)scene)->holding = 0;
}

static void on_support(srv_scene_ctx *c, void *scene, const srv_event *e)
{
    gr_scene *v = scene;
    const gr_event *p = e->data;
    if (wrong_model(c, v, e, 1))
        return;
    if (sim_truss_support(v->truss, p->node[0], p->node[1], p->fix == 2, p->fix >= 1) != SIM_OK) {
        char err[128];
        snprintf(err, sizeof err, "node [%d, %d] is off the beam (0..%d, 0..%d)", p->node[0],
                 p->node[1], v->nx, v->ny);
        c->error(c, e->client, e->seq, "event refused", err);
        return;
    }
    v->solved = 0, v->not_held = 0, v->support_seq = e->seq;
}

static void on_reseed(srv_scene_ctx *c, void *scene, const srv_event *e)
{
    gr_scene *v = scene;
    char err[160];
    if (wrong_model(c, v, e, 0))
        return;
    atomic_store(&v->seed, (uint64_t)((const gr_event *)e->data)->seed);
    if (plant_create(v, err, sizeof err) != 0)
        c->error(c, e->client, e->seq, "event refused", err);
}

/* regrow (and reset): from the first branch or the first cell again, the same seed. */
static void on_regrow(srv_scene_ctx *c, void *scene, const srv_event *e)
{
    gr_scene *v = scene;
    char err[160];
    int rc = v->is_truss ? truss_create(v, err, sizeof err) : plant_create(v, err, sizeof err);
    if (rc != 0)
        c->error(c, e->client, e->seq, "event refused", err);
}

static void on_step(srv_scene_ctx *c, void *scene, const srv_event *e)
{
    (void)c, (void)e;
    gr_scene *v = scene;
    if (v->pending < 1000)
        v->pending++;
}

static void on_params(srv_scene_ctx *c, void *scene, const srv_event *e)
{
    gr_scene *v = scene;
    int n;
    const sim_param_desc *t = sim_growth_params_table(&n);
    sim_growth_params p = v->p;
    char err[256];
    srv_params_apply(t, n, e->data, &p);
    sim_plant_params rules = v->rules;
    rules.cont_turn_deg = p.cont_turn_deg, rules.side_angle_min = p.side_angle_min;
    rules.side_angle_max = p.side_angle_max, rules.min_length = p.min_length;
    if (sim_growth_params_validate(&p, err, sizeof err) != SIM_OK ||
        (v->plant && sim_plant_set_params(v->plant, &rules, err, sizeof err) != SIM_OK)) {
        c->error(c, e->client, e->seq, "event refused", err);
        return;
    }
    v->rules = rules;
    if (v->truss && (p.load_kn != v->p.load_kn || p.solver != v->p.solver)) {
        sim_truss_load(v->truss, v->load_i, v->load_j, 0.0, -1e3 * (double)p.load_kn);
        v->solved = 0, v->not_held = 0;
    }
    if (p.steps_per_s != v->p.steps_per_s)
        v->next_s = 0.0; /* the new pace from now */
    v->p = p;
    c->params_changed = 1;
}

static const srv_event_desc k_events[] = {
    {"load", 0, parse_load, on_load},
    {"grab", 0, parse_load, on_grab},
    {"move", 0, parse_load, on_move},
    {"release", 0, srv_parse_no_payload, on_release},
    {"support", 0, parse_support, on_support},
    {"reseed", 0, parse_reseed, on_reseed},
    {"regrow", 0, srv_parse_no_payload, on_regrow},
    {"step", 0, srv_parse_no_payload, on_step},
    {"set_params", 0, parse_params, on_params},
    {"reset", 0, srv_parse_no_payload, on_regrow},
};

/* ------------------------------------------------------------ step and view */

/* A generation is due: the pace's beat came, or a step event asked. */
static int generation_due(gr_scene *v, double t_s)
{
    if (v->pending > 0) {
        v->pending--;
        return 1;
    }
    if (v->p.steps_per_s <= 0.0f)
        return 0;
    if (v->next_s == 0.0)
        v->next_s = t_s; /* the first beat now */
    if (t_s + 1e-9 < v->next_s)
        return 0;
    v->next_s += 1.0 / (double)v->p.steps_per_s;
    if (v->next_s < t_s) /* never a burst of catch-up generations */
        v->next_s = t_s + 1.0 / (double)v->p.steps_per_s;
    return 1;
}

static int plant_step(srv_scene_ctx *c, gr_scene *v)
{
    if (v->stopped || sim_plant_done(v->plant) || !generation_due(v, c->sim_time_s))
        return 0;
    int added = sim_plant_step(v->plant);
    if (added < 0) {
        v->stopped = 1;
        if (c->driver)
            c->error(c, c->driver, 0, "limit",
                     added == -1 ? "the plant reached its branch limit: it stops"
                                 : "the server ran out of memory for the plant: it stops");
    }
    return added > 0;
}

/* Grown: a generation when one is due. Then solved: relaxation's sweeps, or the direct solve. */
static int truss_step(srv_scene_ctx *c, gr_scene *v)
{
    if (sim_truss_cell_count(v->truss) < v->nx * v->ny) {
        if (!generation_due(v, c->sim_time_s))
            return 0;
        sim_truss_grow(v->truss);
        list_new_parts(v);
        return 1;
    }
    if (v->solved)
        return 0;
    char err[256];
    sim_truss_solve_info info;
    sim_truss_set_threads(v->truss, c->threads);
    sim_status st = v->p.solver == SIM_GROWTH_SOLVER_DIRECT && sim_truss_have_direct()
                        ? sim_truss_solve_direct(v->truss, &info, err, sizeof err)
                        : sim_truss_relax(v->truss, v->p.sweeps_per_frame, SOLVED_RESIDUAL, &info,
                                          err, sizeof err);
    if (st != SIM_OK) {
        sim_truss_reset(v->truss); /* nothing to show but the unloaded beam */
        if (!v->not_held && c->driver)
            c->error(c, c->driver, v->support_seq, "event refused", err);
        v->not_held = 1, v->solved = 1;
        return 1;
    }
    v->solved = info.residual < SOLVED_RESIDUAL;
    return 1;
}

static int gr_step(srv_scene_ctx *c, void *scene, double *ms)
{
    gr_scene *v = scene;
    double t0 = sc_now_ms();
    int changed = v->is_truss ? truss_step(c, v) : plant_step(c, v);
    *ms = sc_now_ms() - t0;
    return changed;
}

/* Nothing more without an event: the plant has stopped, the truss stands solved, or growth
 * waits for step events (steps_per_s 0). */
static int gr_at_rest(const void *scene)
{
    const gr_scene *v = scene;
    if (v->pending > 0)
        return 0;
    if (!v->is_truss)
        return v->stopped || sim_plant_done(v->plant) || v->p.steps_per_s <= 0.0f;
    if (sim_truss_cell_count(v->truss) < v->nx * v->ny)
        return v->p.steps_per_s <= 0.0f;
    return v->solved;
}

/* Room in the plant's view arrays for n branches: each array grown on its own (one that
 * moved is valid at its new size); the room is what all three have. */
static int plant_room(gr_scene *v, int n)
{
    if (n <= v->vcap)
        return n;
    int cap = v->vcap > 0 ? v->vcap : 64;
    while (cap < n)
        cap *= 2;
    float *nv = realloc(v->v0, (size_t)cap * 2 * 3 * sizeof(float));
    if (nv)
        v->v0 = nv;
    float *ns = nv ? realloc(v->s0, (size_t)cap * 2 * sizeof(float)) : NULL;
    if (ns)
        v->s0 = ns;
    uint32_t *ne = ns ? realloc(v->e0, (size_t)cap * 2 * sizeof(uint32_t)) : NULL;
    if (ne)
        v->e0 = ne, v->vcap = cap;
    return n <= v->vcap ? n : v->vcap; /* out of memory: the branches that fit */
}

static void plant_view(gr_scene *v, srv_view *out)
{
    int n;
    const sim_branch *b = sim_plant_branches(v->plant, &n);
    n = plant_room(v, n);
    for (int k = 0; k < n; k++) { /* the sim's (x, y up, z) drawn as (x, -z, y): z up */
        const float *a = b[k].start, *t = b[k].tip;
        float seg[6] = {a[0], -a[2], a[1], t[0], -t[2], t[1]};
        memcpy(&v->v0[k * 6], seg, sizeof seg);
        v->s0[k * 2] = v->s0[k * 2 + 1] = b[k].size;
        v->e0[k * 2] = (uint32_t)k * 2, v->e0[k * 2 + 1] = (uint32_t)k * 2 + 1;
    }
    proto_object_in *o = &v->obj[0];
    memset(o, 0, sizeof *o);
    o->primitive = PROTO_PRIM_LINES;
    o->qbits = PLANT_BITS;
    memcpy(o->bmin, v->box_lo, sizeof o->bmin);
    memcpy(o->bmax, v->box_hi, sizeof o->bmax);
    o->nvert = (uint32_t)n * 2;
    o->pos = v->v0;
    o->scalar = v->s0;
    o->smin = 0.0f, o->smax = v->smax;
    o->nelem = (uint32_t)n;
    o->elem = v->e0;
    o->topo_version = (uint32_t)n;
    o->xf.r[3] = 1.0f;
    v->nobj = 1;
    out->obj = v->obj, out->n = 1;
}

static float energy_scalar(double joules)
{
    double s = log10(fmax(joules, 1e-30));
    return (float)fmin(fmax(s, (double)ENERGY_LOG_MIN), (double)ENERGY_LOG_MAX);
}

static void truss_view(gr_scene *v, srv_view *out)
{
    const sim_truss_params *tp = sim_truss_params_of(v->truss);
    const double *u = sim_truss_displacements(v->truss), l = tp->cell_m;
    const int w = v->nx + 1;
    float lo[3], hi[3];
    truss_box(v, lo, hi);
    sim_truss_cell_energy(v->truss, v->energy);
    for (int k = 0; k < v->ncell; k++) {
        int c = v->cell_order[k], n = c % v->nx + c / v->nx * w;
        int corner[4] = {n, n + 1, n + w + 1, n + w};
        float sc = energy_scalar(v->energy[c]);
        for (int q = 0; q < 4; q++) {
            node_at(v, u, corner[q], lo, hi, &v->v0[(k * 4 + q) * 3]);
            v->s0[k * 4 + q] = sc;
        }
        uint32_t b = (uint32_t)k * 4, tri[6] = {b, b + 1, b + 2, b, b + 2, b + 3};
        memcpy(&v->e0[k * 6], tri, sizeof tri);
    }
    int nm;
    const sim_truss_member *m = sim_truss_members(v->truss, &nm);
    for (int k = 0; k < v->nmember; k++) {
        const sim_truss_member *mk = &m[v->member_order[k]];
        double eps = sim_truss_member_strain(v->truss, mk);
        double len = mk->kind >= 2 ? l * sqrt(2.0) : l;
        float sc = energy_scalar(0.5 * tp->youngs_pa * mk->area * eps * eps * len);
        node_at(v, u, mk->a, lo, hi, &v->v1[k * 6]);
        node_at(v, u, mk->b, lo, hi, &v->v1[k * 6 + 3]);
        v->s1[k * 2] = v->s1[k * 2 + 1] = sc;
        v->e1[k * 2] = (uint32_t)k * 2, v->e1[k * 2 + 1] = (uint32_t)k * 2 + 1;
    }
    for (int k = 0; k < 2; k++) {
        proto_object_in *o = &v->obj[k];
        memset(o, 0, sizeof *o);
        o->id = (uint16_t)k;
        o->primitive = k ? PROTO_PRIM_LINES : PROTO_PRIM_TRIANGLES;
        o->qbits = TRUSS_BITS;
        memcpy(o->bmin, lo, sizeof lo);
        memcpy(o->bmax, hi, sizeof hi);
        o->nvert = (uint32_t)(k ? v->nmember * 2 : v->ncell * 4);
        o->pos = k ? v->v1 : v->v0;
        o->scalar = k ? v->s1 : v->s0;
        o->smin = ENERGY_LOG_MIN, o->smax = ENERGY_LOG_MAX;
        o->nelem = (uint32_t)(k ? v->nmember : v->ncell * 2);
        o->elem = k ? v->e1 : v->e0;
        o->topo_version = (uint32_t)(k ? v->nmember : v->ncell);
        o->xf.r[3] = 1.0f;
    }
    v->nobj = 2;
    out->obj = v->obj, out->n = 2;
}

static void gr_view(void *scene, uint64_t frame, const srv_view_budget *budget, srv_view *out)
{
    (void)frame, (void)budget;
    gr_scene *v = scene;
    if (v->is_truss)
        truss_view(v, out);
    else
        plant_view(v, out);
}

static char *gr_params_json(const void *scene)
{
    const gr_scene *v = scene;
    int n;
    const sim_param_desc *t = sim_growth_params_table(&n);
    return srv_params_json(t, n, &v->p);
}

static void gr_describe(const void *scene, cJSON *j)
{
    const gr_scene *v = scene;
    cJSON_AddStringToObject(j, "model", v->is_truss ? "truss" : "plant");
    /* the panel's groups that apply to this model (params.def's groups) */
    const char *groups[2] = {"growth", v->is_truss ? "truss" : "plant"};
    cJSON_AddItemToObject(j, "param_groups", cJSON_CreateStringArray(groups, 2));
    if (!v->is_truss) {
        cJSON_AddNumberToObject(j, "seed", (double)atomic_load(&v->seed));
        cJSON_AddBoolToObject(j, "three_d", v->rules.three_d);
        cJSON_AddStringToObject(j, "units", "the source's (the first branch is about 100)");
        cJSON_AddStringToObject(j, "scalar", "thickness");
        return;
    }
    const sim_truss_params *tp = &v->tparams; /* not the truss's: a regrow makes it anew */
    int cells[2] = {v->nx, v->ny};
    cJSON_AddItemToObject(j, "cells", cJSON_CreateIntArray(cells, 2));
    cJSON_AddNumberToObject(j, "cell_m", tp->cell_m);
    cJSON_AddNumberToObject(j, "thickness_m", tp->thickness_m);
    cJSON_AddNumberToObject(j, "youngs_pa", tp->youngs_pa);
    cJSON_AddBoolToObject(j, "direct_solver", sim_truss_have_direct());
    cJSON_AddStringToObject(j, "units", "m");
    cJSON_AddStringToObject(j, "scalar", "log10 internal energy (J)");
    double range[2] = {ENERGY_LOG_MIN, ENERGY_LOG_MAX};
    cJSON_AddItemToObject(j, "scalar_range", cJSON_CreateDoubleArray(range, 2));
}

/* ------------------------------------------------------------- durability */

/* Part "GRSC": the model (a check), the live parameters, the pace, the truss's load node, how
 * far its solve has come, the support event a "not held" names (version 2; a version 1 part
 * is still read, naming seq 0) and the order its view lists cells and members in (the order
 * they stood up: a replay's frames must be the original's); then the plant's or the truss's
 * part. */
#define GR_SCENE_VERSION 2u
static const char k_scene_tag[4] = {'G', 'R', 'S', 'C'};

static int gr_save(void *scene, sc_blob *out, char *err, size_t err_sz)
{
    gr_scene *v = scene;
    int32_t head[8] = {v->is_truss, v->pending,  v->load_i,  v->load_j,
                       v->solved,   v->not_held, v->stopped, v->holding};
    sc_blob_tag(out, k_scene_tag, GR_SCENE_VERSION);
    SC_PUT(out, head);
    SC_PUT(out, v->p);
    SC_PUT(out, v->next_s);
    SC_PUT(out, v->support_seq);
    if (v->is_truss) { /* the view's order: the cells and members as they stood up */
        int32_t counts[2] = {v->ncell, v->nmember};
        SC_PUT(out, counts);
        sc_blob_put(out, v->cell_order, (size_t)v->ncell * sizeof *v->cell_order);
        sc_blob_put(out, v->member_order, (size_t)v->nmember * sizeof *v->member_order);
    }
    sim_status st = v->is_truss ? sim_truss_save(v->truss, out) : sim_plant_save(v->plant, out);
    if (st != SIM_OK || out->failed) {
        snprintf(err, err_sz, "growth: out of memory");
        return -1;
    }
    return 0;
}

/* The truss view's order from a snapshot into cells[] and members[] (malloc'd): each index in
 * range and listed once. 0, or -1 with err. */
static int read_order(gr_scene *v, sc_reader *r, int32_t **cells, int32_t **members, int *nc,
                      int *nmem, char *err, size_t err_sz)
{
    int32_t counts[2];
    int nm;
    sim_truss_members(v->truss, &nm);
    SC_GET(r, counts);
    int ok = !r->failed && counts[0] >= 0 && counts[0] <= v->nx * v->ny && counts[1] >= 0 &&
             counts[1] <= nm;
    *cells = ok ? malloc((size_t)counts[0] * sizeof **cells + 1) : NULL;
    *members = ok ? malloc((size_t)counts[1] * sizeof **members + 1) : NULL;
    uint8_t *seen = ok ? calloc((size_t)(v->nx * v->ny + nm), 1) : NULL;
    if (seen && *cells && *members) {
        sc_reader_get(r, *cells, (size_t)counts[0] * sizeof **cells);
        sc_reader_get(r, *members, (size_t)counts[1] * sizeof **members);
        for (int k = 0; k < counts[0] && ok; k++)
            ok = (*cells)[k] >= 0 && (*cells)[k] < v->nx * v->ny && !seen[(*cells)[k]]++;
        for (int k = 0; k < counts[1] && ok; k++)
            ok = (*members)[k] >= 0 && (*members)[k] < nm && !seen[v->nx * v->ny + (*members)[k]]++;
        ok = ok && !r->failed;
    } else {
        ok = 0;
    }
    free(seen);
    if (!ok) {
        free(*cells), free(*members);
        *cells = *members = NULL;
        snprintf(err, err_sz, "growth snapshot: the truss's view order is damaged");
        return -1;
    }
    *nc = counts[0], *nmem = counts[1];
    return 0;
}

static int gr_restore(void *scene, const void *data, size_t n, char *err, size_t err_sz)
{
    gr_scene *v = scene;
    sc_reader r = sc_reader_of(data, n);
    int32_t head[8], *cells = NULL, *members = NULL;
    int nc = 0, nmem = 0;
    sim_growth_params p;
    double next_s;
    uint32_t support_seq = 0;
    uint32_t version = sc_reader_tag_versions(&r, k_scene_tag, 1, GR_SCENE_VERSION);
    SC_GET(&r, head);
    SC_GET(&r, p);
    SC_GET(&r, next_s);
    if (version >= 2)
        SC_GET(&r, support_seq);
    if (r.failed || head[0] != v->is_truss || head[1] < 0 || head[1] > 1000 || !isfinite(next_s) ||
        sim_growth_params_validate(&p, NULL, 0) != SIM_OK ||
        (v->is_truss && (head[2] < 0 || head[2] > v->nx || head[3] < 0 || head[3] > v->ny))) {
        snprintf(err, err_sz, "growth snapshot: %s", r.failed ? r.why : "damaged");
        return -1;
    }
    if (v->is_truss && read_order(v, &r, &cells, &members, &nc, &nmem, err, err_sz) != 0)
        return -1;
    sim_status st = v->is_truss ? sim_truss_restore(v->truss, r.p + r.at, r.n - r.at, err, err_sz)
                                : sim_plant_restore(v->plant, r.p + r.at, r.n - r.at, err, err_sz);
    if (st != SIM_OK) {
        free(cells), free(members);
        return -1;
    }
    if (v->plant) /* a plant made without a seed was given a fresh one: the snapshot's stands */
        atomic_store(&v->seed, sim_plant_seed(v->plant));
    v->pending = head[1], v->load_i = head[2], v->load_j = head[3];
    v->solved = head[4], v->not_held = head[5], v->stopped = head[6], v->holding = head[7];
    v->p = p, v->next_s = next_s, v->support_seq = support_seq;
    if (v->plant)
        v->rules = *sim_plant_params_of(v->plant);
    if (v->is_truss) { /* the view's order as the original had it, its flags to match */
        int nm;
        sim_truss_members(v->truss, &nm);
        memset(v->cell_listed, 0, (size_t)v->nx * (size_t)v->ny);
        memset(v->member_seen, 0, (size_t)nm);
        memcpy(v->cell_order, cells, (size_t)nc * sizeof *cells);
        memcpy(v->member_order, members, (size_t)nmem * sizeof *members);
        v->ncell = nc, v->nmember = nmem;
        for (int k = 0; k < nc; k++)
            v->cell_listed[cells[k]] = 1;
        for (int k = 0; k < nmem; k++)
            v->member_seen[members[k]] = 1;
        list_new_parts(v); /* (nothing, for a snapshot of a consistent truss) */
    }
    free(cells), free(members);
    return 0;
}

static uint64_t gr_hash(void *scene)
{
    const gr_scene *v = scene;
    return v->is_truss ? sim_truss_hash(v->truss) : sim_plant_hash(v->plant);
}

const srv_scene_i srv_scene_growth = {
    .name = "growth",
    .usage = "",
    .events = k_events,
    .nevents = (int)(sizeof k_events / sizeof k_events[0]),
    .create = gr_create,
    .destroy = gr_destroy,
    .bytes = gr_bytes,
    .step = gr_step,
    .at_rest = gr_at_rest,
    .view = gr_view,
    .params_json = gr_params_json,
    .params_table = sim_growth_params_table,
    .describe = gr_describe,
    .save = gr_save,
    .restore = gr_restore,
    .hash = gr_hash,
};
