/* scene_softbody.c: the softbody scene in a session: one soft organ lying in a tray
 * (sim/softbody/, SOFTBODY.md). Two models: "hybrid" (default; the phantom organ's tets by
 * region with its fine surface embedded, or a label map given with --softbody-labels) and
 * "surface" (PBD with shape matching on a closed mesh: the bean, or --softbody-mesh).
 *
 * The tray is the state's rigid parent. Every body is built with its box centred on x = y = 0
 * and its lowest point at z = 0, so the model's frame is the tray's: the floor is z = 0, the
 * four walls stand round the body's box with a margin, all five attached planes in that
 * frame. A tray event sets the parent's pose; the next step carries the organ with it
 * (sb_frame.c). The view is two objects in the tray's frame with the tray's pose as their
 * transform: the organ's surface (id 0; a hybrid's with a scalar per vertex, the region of
 * the tet it lies in) and the tray (id 1). A tray that moves costs a transform; a dent costs
 * its moved vertices.
 *
 * Events are parsed once on the WebSocket thread into sb_event and applied at the frame
 * boundary straight to the state. A settled organ (every particle slower than SLEEP_SPEED
 * for SLEEP_FRAMES frames, nothing held) stops stepping until the next event. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "scene.h"
#include "sim/core/sc_base.h"
#include "sim/softbody/softbody.h"

#define MAX_PARTICLES  20000 /* a surface session's "particles": 8 ms a frame on one core */
#define TRAY_MARGIN_M  0.02f /* between the body's rest box and each wall */
#define TRAY_REACH_M   1.0f  /* a tray event's position, each axis, m from the world origin */
#define WORLD_FLOOR_M  -3.0f /* the world floor sits below any tray (the tray's holds the organ) */
#define BOX_SIDE_M     0.25f /* the organ's quantisation box: this far beyond the walls, */
#define BOX_UP_M       0.5f  /* and this high above the floor (tray frame) */
#define HAND_INSET_M   0.02f /* the hand is kept this far inside that box */
#define ORGAN_BITS     16    /* 0.8 m / 65535: 12 um a step, far under a mm */
#define TRAY_BITS      12
#define SLEEP_SPEED    2e-3f /* m/s */
#define SLEEP_FRAMES   30
#define SETTLE_FRAMES  150
#define SETTLE_DAMPING 10.0f /* 1/s */
#define NTRAY_PLANES   5

/* ------------------------------------------------ process-wide (main thread) */

/* A region's own surface inside the organ: a range of the embedded vertices. */
typedef struct sb_inner {
    int region, vert0, nvert, ntri;
    uint32_t *tri; /* (ntri x 3) indices into its own vertices */
    float *scalar; /* (nvert) its region, for the client's palette */
} sb_inner;

/* A model and what the view needs of it; immutable once built, shared by sessions. */
typedef struct sb_body {
    sim_softbody_model *model;
    float *region; /* (surface vertices) the region of each, NULL for a surface model */
    int nregion;
    char region_name[SIM_SOFTBODY_NREGION][32];
    int outer_nvert, outer_ntri; /* the outer surface: the first vertices and triangles */
    int ninner;                  /* the regions' own surfaces inside it (a tumour, a vessel) */
    sb_inner inner[SIM_SOFTBODY_NREGION];
    const char *source; /* "phantom", "labels", "bean", "mesh" */
    float half[3];      /* the tray: inner half-lengths in x and y, wall height; m */
    float *settled;     /* (particles x 3) at rest in the tray, sagged under gravity; tray frame */
} sb_body;

/* Options (main thread, before any other starts), and the shared bodies: built at start
 * when they come from a file (its errors belong there), else by the first session that asks
 * (g_sb.lock), so servers that never hold a soft body never pay for them. */
static struct {
    float voxel_mm, mesh_size; /* mesh_size: m across for --softbody-mesh (0: the file's) */
    int surface_verts, particles;
    char mesh[512], labels[512], materials[512];
    pthread_mutex_t lock;
    sb_body hybrid, surface; /* hybrid.model: under lock until built, then read-only */
} g_sb = {3.0f, 0.0f, 3000, 2000, "", "", "", PTHREAD_MUTEX_INITIALIZER, {0}, {0}};

static int opt_number(const char *name, const char *val, double lo, double hi, double *out,
                      char *err, size_t err_sz)
{
    char *end = NULL;
    double v = strtod(val, &end);
    if (!*val || *end || !(v >= lo && v <= hi)) {
        snprintf(err, err_sz, "--%s %s: must be a number in [%g, %g]", name, val, lo, hi);
        return -1;
    }
    *out = v;
    return 1;
}

static int sb_option(const char *name, const char *val, char *err, size_t err_sz)
{
    double v;
    int r;
    if (!strcmp(name, "softbody-voxel")) {
        if ((r = opt_number(name, val, 1.0, 20.0, &v, err, err_sz)) > 0)
            g_sb.voxel_mm = (float)v;
        return r;
    }
    if (!strcmp(name, "softbody-surface") || !strcmp(name, "softbody-particles")) {
        int surf = !strcmp(name, "softbody-surface");
        if ((r = opt_number(name, val, surf ? 100 : 12, surf ? 200000 : MAX_PARTICLES, &v, err,
                            err_sz)) > 0 &&
            v != floor(v)) {
            snprintf(err, err_sz, "--%s %s: must be an integer", name, val);
            return -1;
        }
        if (r > 0)
            *(surf ? &g_sb.surface_verts : &g_sb.particles) = (int)v;
        return r;
    }
    if (!strcmp(name, "softbody-mesh-size")) {
        if ((r = opt_number(name, val, 0.0, SIM_SOFTBODY_MAX_SIZE_M, &v, err, err_sz)) > 0)
            g_sb.mesh_size = (float)v;
        return r;
    }
    if (!strcmp(name, "softbody-mesh"))
        return srv_option_string(name, val, g_sb.mesh, sizeof g_sb.mesh, err, err_sz);
    if (!strcmp(name, "softbody-labels"))
        return srv_option_string(name, val, g_sb.labels, sizeof g_sb.labels, err, err_sz);
    if (!strcmp(name, "softbody-materials"))
        return srv_option_string(name, val, g_sb.materials, sizeof g_sb.materials, err, err_sz);
    return 0;
}

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec * 1e-6;
}

static void body_free(sb_body *b)
{
    sim_softbody_model_destroy(b->model);
    free(b->region);
    free(b->settled);
    for (int k = 0; k < b->ninner; k++)
        free(b->inner[k].tri), free(b->inner[k].scalar);
    memset(b, 0, sizeof *b);
}

/* The tray round the rest box (the body rests on z = 0, centred on x = y = 0): walls a
 * margin off the box, half its height tall. */
static void body_tray(sb_body *b, const float *x, int n)
{
    float hi[3] = {0, 0, 0};
    for (int i = 0; i < n; i++)
        for (int k = 0; k < 3; k++)
            hi[k] = fmaxf(hi[k], fabsf(x[i * 3 + k]));
    b->half[0] = hi[0] + TRAY_MARGIN_M;
    b->half[1] = hi[1] + TRAY_MARGIN_M;
    b->half[2] = fmaxf(0.5f * hi[2], TRAY_MARGIN_M);
}

/* The tray's floor and four walls on a state, attached (in the tray's frame); ids, if not
 * NULL, take theirs. */
static int add_tray_planes(sim_softbody_state *s, const float half[3], int *ids, char *err,
                           size_t err_sz)
{
    const float n[NTRAY_PLANES][3] = {{0, 0, 1}, {1, 0, 0}, {-1, 0, 0}, {0, 1, 0}, {0, -1, 0}};
    const float d[NTRAY_PLANES] = {0, -half[0], -half[0], -half[1], -half[1]};
    for (int k = 0; k < NTRAY_PLANES; k++)
        if (sim_softbody_add_plane(s, n[k], d[k], 1, ids ? &ids[k] : NULL, err, err_sz) != SIM_OK)
            return -1;
    return 0;
}

/* Where sessions start: the rest pose let sag in the tray until it is still (at most
 * SETTLE_FRAMES, damped at SETTLE_DAMPING: the sag does not depend on the damping; at the
 * default damping it takes the phantom 300 frames to settle, at this one 60). So a session
 * opens on an organ lying in its tray, not one that slumps into it. */
static int body_settle(sb_body *b, sim_backend *be, char *err, size_t err_sz)
{
    sim_softbody_state *s = NULL;
    sim_softbody_params p = sim_softbody_default_params();
    p.damping = SETTLE_DAMPING;
    int rc = sim_softbody_state_create(&s, b->model, be, err, err_sz) == SIM_OK &&
                     sim_softbody_set_params(s, &p, err, err_sz) == SIM_OK &&
                     add_tray_planes(s, b->half, NULL, err, err_sz) == 0
                 ? 0
                 : -1;
    for (int f = 0; rc == 0 && f < SETTLE_FRAMES; f++) {
        sim_softbody_metrics mt;
        rc = sim_softbody_step(s, &mt, err, err_sz) == SIM_OK ? 0 : -1;
        if (mt.max_speed < SLEEP_SPEED)
            break;
    }
    int n;
    const float *x = rc == 0 ? sim_softbody_positions(s, &n) : NULL;
    b->settled = x ? malloc((size_t)n * 3 * sizeof(float)) : NULL;
    if (b->settled)
        memcpy(b->settled, x, (size_t)n * 3 * sizeof(float));
    else if (rc == 0)
        snprintf(err, err_sz, "out of memory");
    sim_softbody_state_destroy(s);
    return b->settled ? 0 : -1;
}

/* The outer surface (the first of t's surfaces, or all when it names none) and the inner
 * ones, each its own object: vertices a range of the embedded ones, triangles made local. */
static int body_inner(sb_body *b, const sim_softbody_tets *t, char *err, size_t err_sz)
{
    b->outer_nvert = t->nsurface ? t->surface[0].nvert : t->nembed;
    b->outer_ntri = t->nsurface ? t->surface[0].ntri : t->nembed_tri;
    for (int k = 1; k < t->nsurface && b->ninner < SIM_SOFTBODY_NREGION; k++) {
        const int v0 = t->surface[k].vert0, nv = t->surface[k].nvert, nt = t->surface[k].ntri;
        sb_inner *in = &b->inner[b->ninner++];
        in->region = t->surface[k].region, in->vert0 = v0, in->nvert = nv, in->ntri = nt;
        in->tri = malloc((size_t)nt * 3 * sizeof *in->tri + 1);
        in->scalar = malloc((size_t)nv * sizeof *in->scalar + 1);
        if (!in->tri || !in->scalar) {
            snprintf(err, err_sz, "out of memory");
            return -1;
        }
        for (int j = 0; j < nt * 3; j++)
            in->tri[j] = t->embed_tri[(size_t)t->surface[k].tri0 * 3 + (size_t)j] - (uint32_t)v0;
        for (int i = 0; i < nv; i++)
            in->scalar[i] = (float)in->region;
    }
    return 0;
}

/* A hybrid body from tets (moved to rest on the tray's floor): the model, each surface
 * vertex's region (its tet's, in the model's order) and the region names. */
static int body_from_tets(sb_body *b, sim_softbody_tets *t, char *err, size_t err_sz)
{
    sim_softbody_tets_rest_on_floor(t);
    if (sim_softbody_model_hybrid(&b->model, t, err, err_sz) != SIM_OK)
        return -1;
    int ntet;
    const uint8_t *region;
    sim_softbody_model_tets(b->model, &ntet, &region);
    b->region = malloc((size_t)t->nembed * sizeof(float) + 1);
    if (!b->region) {
        snprintf(err, err_sz, "out of memory");
        return -1;
    }
    for (int i = 0; i < t->nembed; i++)
        b->region[i] = (float)region[t->embed_tet[i]];
    b->nregion = t->nregion;
    memcpy(b->region_name, t->region_name, sizeof b->region_name);
    body_tray(b, t->x, t->nvert);
    return body_inner(b, t, err, err_sz);
}

/* The default hybrid body: the label map when given, else the phantom organ; settled. */
static int build_hybrid(sb_body *b, sim_backend *be, char *err, size_t err_sz)
{
    sim_softbody_tets t;
    memset(&t, 0, sizeof t);
    double t0 = now_ms();
    /* Cells of 4 to 32 voxels: fine at the surface, coarse inside (measured in
     * server/README.md); the regions' own surfaces too, which the client shows inside the
     * outer one. */
    sim_softbody_organ_opts o = sim_softbody_default_organ_opts();
    o.voxel_mm = g_sb.voxel_mm, o.surface_verts = g_sb.surface_verts;
    o.min_cell = 4, o.max_cell = 32, o.inner_surfaces = 1;
    sim_status st = g_sb.labels[0] ? sim_softbody_tets_labelmap(&t, g_sb.labels, g_sb.materials, &o,
                                                                err, err_sz)
                                   : sim_softbody_tets_phantom(&t, &o, err, err_sz);
    int rc = st == SIM_OK ? body_from_tets(b, &t, err, err_sz) : -1;
    sim_softbody_tets_free(&t);
    double t1 = now_ms();
    if (rc != 0 || body_settle(b, be, err, err_sz) != 0) {
        body_free(b);
        return -1;
    }
    b->source = g_sb.labels[0] ? "labels" : "phantom";
    sim_softbody_info in = sim_softbody_model_info(b->model);
    fprintf(stderr,
            "softcast-server: softbody: hybrid model (%s, %g mm voxels): %d particles, %d tets, "
            "%d surface vertices, built in %.0f ms, settled in the tray in %.0f ms\n",
            b->source, (double)g_sb.voxel_mm, in.particles, in.tets, in.surface_vertices, t1 - t0,
            now_ms() - t1);
    return 0;
}

/* A surface body from a closed mesh, moved to rest on the tray's floor. */
static int body_from_mesh(sb_body *b, sim_softbody_mesh *m, const char *source, char *err,
                          size_t err_sz)
{
    sim_softbody_mesh_rest_on_floor(m);
    if (sim_softbody_model_surface(&b->model, m, err, err_sz) != SIM_OK)
        return -1;
    b->source = source;
    b->outer_nvert = m->nvert, b->outer_ntri = m->ntri;
    body_tray(b, m->x, m->nvert);
    return 0;
}

/* The bean of n particles, or the mesh file (--softbody-mesh). */
static int build_surface(sb_body *b, int n, sim_backend *be, char *err, size_t err_sz)
{
    sim_softbody_mesh m;
    char why[256] = "";
    sim_status st =
        g_sb.mesh[0] ? sim_softbody_mesh_load_sized(&m, g_sb.mesh, g_sb.mesh_size, why, sizeof why)
                     : sim_softbody_mesh_organ(&m, n, why, sizeof why);
    int rc =
        st == SIM_OK ? body_from_mesh(b, &m, g_sb.mesh[0] ? "mesh" : "bean", why, sizeof why) : -1;
    if (st == SIM_OK)
        sim_softbody_mesh_free(&m);
    if (rc == 0 && body_settle(b, be, why, sizeof why) != 0)
        rc = -1;
    if (rc != 0) {
        if (g_sb.mesh[0]) /* why names the file */
            snprintf(err, err_sz, "--softbody-mesh: %s%s", why,
                     strstr(why, " m across") ? " (--softbody-mesh-size M scales it to M m)" : "");
        else
            snprintf(err, err_sz, "%s", why);
        body_free(b);
    }
    return rc;
}

static int sb_start(sim_backend *be, char *err, size_t err_sz)
{
    if (!g_sb.labels[0] != !g_sb.materials[0]) {
        snprintf(err, err_sz, "--softbody-labels and --softbody-materials go together");
        return -1;
    }
    if (g_sb.mesh[0] && build_surface(&g_sb.surface, 0, be, err, err_sz) != 0)
        return -1;
    if (g_sb.labels[0] && build_hybrid(&g_sb.hybrid, be, err, err_sz) != 0) {
        char why[256];
        snprintf(why, sizeof why, "%s", err);
        snprintf(err, err_sz, "--softbody-labels %s: %s", g_sb.labels, why);
        return -1;
    }
    return 0;
}

static void sb_stop(void)
{
    body_free(&g_sb.hybrid);
    body_free(&g_sb.surface);
}

/* A shared body, built by the first session that asks for it (HTTP thread; g_sb.lock). */
static const sb_body *shared_body(int hybrid, sim_backend *be, char *err, size_t err_sz)
{
    sb_body *b = hybrid ? &g_sb.hybrid : &g_sb.surface;
    pthread_mutex_lock(&g_sb.lock);
    int ok = b->model || (hybrid ? build_hybrid(b, be, err, err_sz)
                                 : build_surface(b, g_sb.particles, be, err, err_sz)) == 0;
    pthread_mutex_unlock(&g_sb.lock);
    return ok ? b : NULL;
}

/* --------------------------------------------------------------- a session */

typedef struct sb_scene {
    const sb_body *body; /* shared, or own */
    sb_body own;         /* a surface body of the asked particles */
    sim_softbody_state *state;
    float tray_pos[3], tray_quat[4]; /* the parent's pose: m; w, x, y, z */
    int tray_plane[NTRAY_PLANES];    /* the tray's own planes' ids */
    int still;                       /* frames in a row the organ has been settled */
    int nsurf, ntri;
    float *local;                                  /* (nsurf x 3) the surface in the tray's frame */
    float tray_x[8 * 3];                           /* the tray's corners, its frame */
    proto_object_in obj[2 + SIM_SOFTBODY_NREGION]; /* organ, tray, inner surfaces */
    size_t bytes;                                  /* what it holds, set when made (sb_bytes) */
} sb_scene;

static const uint32_t k_tray_tri[10 * 3] = {
    0, 2, 1, 0, 3, 2,                   /* floor (corners 0-3 at z = 0, 4-7 on top) */
    0, 1, 5, 0, 5, 4, 1, 2, 6, 1, 6, 5, /* walls */
    2, 3, 7, 2, 7, 6, 3, 0, 4, 3, 4, 7,
};

/* v rotated by the unit quaternion q (w, x, y, z), or by its inverse (sign -1). */
static void rotate(const float q[4], float sign, const float v[3], float out[3])
{
    float u[3] = {sign * q[1], sign * q[2], sign * q[3]}, w = q[0];
    float t[3] = {2 * (u[1] * v[2] - u[2] * v[1]), 2 * (u[2] * v[0] - u[0] * v[2]),
                  2 * (u[0] * v[1] - u[1] * v[0])};
    out[0] = v[0] + w * t[0] + (u[1] * t[2] - u[2] * t[1]);
    out[1] = v[1] + w * t[1] + (u[2] * t[0] - u[0] * t[2]);
    out[2] = v[2] + w * t[2] + (u[0] * t[1] - u[1] * t[0]);
}

/* The tray's planes on the session's state, and its corners for the view. */
static int add_tray(sb_scene *v, char *err, size_t err_sz)
{
    const float *h = v->body->half;
    if (add_tray_planes(v->state, h, v->tray_plane, err, err_sz) != 0)
        return -1;
    for (int c = 0; c < 8; c++) {
        v->tray_x[c * 3] = (c & 3) == 0 || (c & 3) == 3 ? -h[0] : h[0];
        v->tray_x[c * 3 + 1] = (c & 3) < 2 ? -h[1] : h[1];
        v->tray_x[c * 3 + 2] = c < 4 ? 0.0f : h[2];
    }
    return 0;
}

/* The organ at rest in the tray where the tray is now: the body's settled pose under the
 * tray's pose (the state's reset first, so no carry of an earlier tray move is pending). */
static int place_settled(sb_scene *v, char *err, size_t err_sz)
{
    int n;
    sim_softbody_state_reset(v->state);
    sim_softbody_positions(v->state, &n);
    float *x = malloc((size_t)n * 3 * sizeof(float) + 1);
    if (!x) {
        snprintf(err, err_sz, "out of memory");
        return -1;
    }
    for (int i = 0; i < n; i++) {
        rotate(v->tray_quat, 1.0f, &v->body->settled[i * 3], &x[i * 3]);
        for (int k = 0; k < 3; k++)
            x[i * 3 + k] += v->tray_pos[k];
    }
    int rc = sim_softbody_set_positions(v->state, x, NULL, err, err_sz) == SIM_OK ? 0 : -1;
    free(x);
    return rc;
}

/* "model": hybrid (default) or surface; "particles": the surface's count. Anything else is
 * refused by name: a misspelt option must not silently give the default. */
static int parse_create(const cJSON *opts, int *hybrid, int *particles, char *err, size_t err_sz)
{
    static const char *const known[] = {"model", "particles", NULL};
    int status = srv_create_fields(opts, "softbody", known, err, err_sz);
    if (status != 201)
        return status;
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(opts, "model");
    if (m && (!cJSON_IsString(m) ||
              (strcmp(m->valuestring, "hybrid") && strcmp(m->valuestring, "surface")))) {
        snprintf(err, err_sz, "\"model\" must be \"hybrid\" or \"surface\"");
        return 400;
    }
    *hybrid = !m || !strcmp(m->valuestring, "hybrid");
    const cJSON *n = cJSON_GetObjectItemCaseSensitive(opts, "particles");
    *particles = 0;
    if (n && *hybrid) {
        snprintf(err, err_sz, "\"particles\" is for the surface model (the hybrid's are its tets)");
        return 400;
    }
    if (n && g_sb.mesh[0]) {
        snprintf(err, err_sz, "\"particles\": the surface model is the mesh file's");
        return 400;
    }
    if (n && !srv_json_int_in(n, 12, MAX_PARTICLES)) {
        snprintf(err, err_sz, "\"particles\" must be an integer 12 to %d", MAX_PARTICLES);
        return 400;
    }
    if (n)
        *particles = (int)n->valuedouble;
    return 201;
}

static int sb_create(sim_backend *b, const cJSON *opts, void **out, char *err, size_t err_sz)
{
    int hybrid, particles;
    int status = parse_create(opts, &hybrid, &particles, err, err_sz);
    if (status != 201)
        return status;
    sb_scene *v = calloc(1, sizeof *v);
    if (!v) {
        snprintf(err, err_sz, "out of memory");
        return 500;
    }
    *out = v;
    if (particles && particles != g_sb.particles) {
        if (build_surface(&v->own, particles, b, err, err_sz) != 0)
            return 500;
        v->body = &v->own;
    } else {
        v->body = shared_body(hybrid, b, err, err_sz);
    }
    if (!v->body)
        return 500;
    v->tray_quat[0] = 1.0f;
    sim_softbody_params p = sim_softbody_default_params();
    p.floor_z = WORLD_FLOOR_M;
    if (sim_softbody_state_create(&v->state, v->body->model, b, err, err_sz) != SIM_OK ||
        sim_softbody_set_params(v->state, &p, err, err_sz) != SIM_OK ||
        add_tray(v, err, err_sz) != 0 || place_settled(v, err, err_sz) != 0)
        return 500;
    sim_softbody_model_triangles(v->body->model, &v->ntri);
    sim_softbody_surface(v->state, &v->nsurf);
    v->local = malloc((size_t)v->nsurf * 3 * sizeof(float) + 1);
    if (!v->local) {
        snprintf(err, err_sz, "out of memory");
        return 500;
    }
    int n;
    sim_softbody_model_rest(v->body->model, &n);
    v->bytes =
        sizeof *v + sim_softbody_state_bytes(v->body->model) + (size_t)v->nsurf * 3 * sizeof(float);
    if (v->body == &v->own) /* its own body: the model and where it settled */
        v->bytes += sim_softbody_model_bytes(v->own.model) + (size_t)n * 3 * sizeof(float);
    return 201;
}

/* Charged to --memory-budget: its state and view, and its body when it has its own (a
 * shared body is the server's, as the volume's default model is). Fixed when made. */
static size_t sb_bytes(const void *scene)
{
    return ((const sb_scene *)scene)->bytes;
}

static void sb_destroy(void *scene)
{
    sb_scene *v = scene;
    if (!v)
        return;
    sim_softbody_state_destroy(v->state);
    body_free(&v->own);
    free(v->local);
    free(v);
}

/* ------------------------------------------------------------------ events */

/* The payload of every softbody event but set_params, as it waits in the inbox. */
typedef struct sb_event {
    float v[3];    /* grab, move: the point (world m); tray: its position; add_plane: n */
    float quat[4]; /* tray: w, x, y, z */
    float d;       /* add_plane: n . x >= d */
    int32_t id;    /* remove_plane */
    uint8_t attached;
} sb_event;
_Static_assert(SRV_ITEM_BYTES(sizeof(sb_event)) <= 64, "a softbody event stays small");

/* A point in world metres; "space", when given, must say so (the shared hand sends it). */
static int parse_point(const cJSON *msg, void *out, const char **error, char *err, size_t err_sz)
{
    (void)error;
    sb_event *e = out;
    int world;
    memset(e, 0, sizeof *e);
    if (proto_read_vec3(msg, "point", 1e3, e->v, err, err_sz) ||
        proto_read_choice(msg, "space", "world", 0, &world, err, err_sz))
        return -1;
    return (int)sizeof *e;
}

static int parse_grab(const cJSON *msg, void *out, const char **error, char *err, size_t err_sz)
{
    if (cJSON_GetObjectItemCaseSensitive(msg, "vertex")) {
        *error = "not in this scene";
        snprintf(err, err_sz, "a soft body is grabbed at a point (world m), not by vertex");
        return -1;
    }
    return parse_point(msg, out, error, err, err_sz);
}

/* pos within TRAY_REACH_M of the origin on each axis; quat finite and of unit length. */
static int parse_tray(const cJSON *msg, void *out, const char **error, char *err, size_t err_sz)
{
    (void)error;
    sb_event *e = out;
    memset(e, 0, sizeof *e);
    if (proto_read_vec3(msg, "pos", TRAY_REACH_M, e->v, err, err_sz))
        return -1;
    const cJSON *q = cJSON_GetObjectItemCaseSensitive(msg, "quat");
    double len2 = 0;
    for (int k = 0; k < 4; k++) {
        const cJSON *x =
            cJSON_IsArray(q) && cJSON_GetArraySize(q) == 4 ? cJSON_GetArrayItem(q, k) : NULL;
        if (!cJSON_IsNumber(x) || !isfinite(x->valuedouble) || fabs(x->valuedouble) > 2) {
            snprintf(err, err_sz,
                     "field \"quat\" must be an array of 4 finite numbers [w, x, y, z]");
            return -1;
        }
        e->quat[k] = (float)x->valuedouble;
        len2 += x->valuedouble * x->valuedouble;
    }
    if (fabs(sqrt(len2) - 1.0) > 1e-3) {
        snprintf(err, err_sz, "field \"quat\" must be a unit quaternion (|q| = %.6g)", sqrt(len2));
        return -1;
    }
    return (int)sizeof *e;
}

static int parse_add_plane(const cJSON *msg, void *out, const char **error, char *err,
                           size_t err_sz)
{
    (void)error;
    sb_event *e = out;
    double d;
    memset(e, 0, sizeof *e);
    if (proto_read_vec3(msg, "n", 1e3, e->v, err, err_sz) ||
        proto_read_number(msg, "d", -1e3, 1e3, &d, err, err_sz))
        return -1;
    if (!(e->v[0] * e->v[0] + e->v[1] * e->v[1] + e->v[2] * e->v[2] > 1e-12f)) {
        snprintf(err, err_sz, "field \"n\" must not be zero");
        return -1;
    }
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(msg, "attached");
    if (a && !cJSON_IsBool(a)) {
        snprintf(err, err_sz, "field \"attached\" must be true or false");
        return -1;
    }
    e->d = (float)d;
    e->attached = (uint8_t)cJSON_IsTrue(a);
    return (int)sizeof *e;
}

static int parse_remove_plane(const cJSON *msg, void *out, const char **error, char *err,
                              size_t err_sz)
{
    (void)error;
    sb_event *e = out;
    memset(e, 0, sizeof *e);
    return proto_read_int(msg, "id", 1, INT32_MAX, &e->id, err, err_sz) ? -1 : (int)sizeof *e;
}

static int parse_params(const cJSON *msg, void *out, const char **error, char *err, size_t err_sz)
{
    int n;
    const sim_param_desc *t = sim_softbody_params_table(&n);
    return srv_params_parse(t, n, msg, out, error, err, err_sz);
}

/* The organ's quantisation box in the tray's frame. */
static void organ_box(const sb_body *b, float lo[3], float hi[3])
{
    lo[0] = -b->half[0] - BOX_SIDE_M, hi[0] = b->half[0] + BOX_SIDE_M;
    lo[1] = -b->half[1] - BOX_SIDE_M, hi[1] = b->half[1] + BOX_SIDE_M;
    lo[2] = -0.05f, hi[2] = BOX_UP_M;
}

/* The hand kept inside the organ's box, so what it pulls stays where the view can show it. */
static void clamp_hand(const sb_scene *v, const float p[3], float out[3])
{
    float d[3] = {p[0] - v->tray_pos[0], p[1] - v->tray_pos[1], p[2] - v->tray_pos[2]}, l[3];
    float lo[3], hi[3];
    rotate(v->tray_quat, -1.0f, d, l);
    organ_box(v->body, lo, hi);
    for (int k = 0; k < 3; k++)
        l[k] = fminf(fmaxf(l[k], lo[k] + HAND_INSET_M), hi[k] - HAND_INSET_M);
    rotate(v->tray_quat, 1.0f, l, out);
    for (int k = 0; k < 3; k++)
        out[k] += v->tray_pos[k];
}

static void on_grab(srv_scene_ctx *c, void *scene, const srv_event *e)
{
    sb_scene *v = scene;
    const sb_event *p = e->data;
    float at[3];
    v->still = 0;
    clamp_hand(v, p->v, at);
    if (sim_softbody_grab(v->state, at) > 0)
        return;
    char err[160];
    snprintf(err, sizeof err, "grab: no particle within grab_radius (%g m) of the point",
             (double)sim_softbody_get_params(v->state).grab_radius);
    c->error(c, e->client, e->seq, "event refused", err);
}

static void on_move(srv_scene_ctx *c, void *scene, const srv_event *e)
{
    sb_scene *v = scene;
    const sb_event *p = e->data;
    float at[3];
    char err[160];
    v->still = 0;
    clamp_hand(v, p->v, at);
    if (sim_softbody_move_hand(v->state, at, err, sizeof err) != SIM_OK)
        c->error(c, e->client, e->seq, "event refused", err);
}

static void on_release(srv_scene_ctx *c, void *scene, const srv_event *e)
{
    (void)c, (void)e;
    sb_scene *v = scene;
    v->still = 0;
    sim_softbody_release(v->state);
}

static void on_tray(srv_scene_ctx *c, void *scene, const srv_event *e)
{
    sb_scene *v = scene;
    const sb_event *p = e->data;
    char err[160];
    v->still = 0;
    if (sim_softbody_set_parent(v->state, p->v, p->quat, err, sizeof err) != SIM_OK) {
        c->error(c, e->client, e->seq, "event refused", err);
        return;
    }
    memcpy(v->tray_pos, p->v, sizeof v->tray_pos);
    memcpy(v->tray_quat, p->quat, sizeof v->tray_quat);
}

/* Attached planes are given in the tray's frame, others in the world's; the sender hears
 * the new plane's id. */
static void on_add_plane(srv_scene_ctx *c, void *scene, const srv_event *e)
{
    sb_scene *v = scene;
    const sb_event *p = e->data;
    char err[160], text[96];
    int id;
    v->still = 0;
    if (sim_softbody_add_plane(v->state, p->v, p->d, p->attached, &id, err, sizeof err) != SIM_OK) {
        c->error(c, e->client, e->seq, "event refused", err);
        return;
    }
    snprintf(text, sizeof text, "{\"type\":\"plane_added\",\"seq\":%u,\"id\":%d}", e->seq, id);
    c->reply_text(c, e->client, text);
}

static void on_remove_plane(srv_scene_ctx *c, void *scene, const srv_event *e)
{
    sb_scene *v = scene;
    const sb_event *p = e->data;
    char err[160];
    v->still = 0;
    for (int k = 0; k < NTRAY_PLANES; k++)
        if (p->id == v->tray_plane[k]) {
            snprintf(err, sizeof err, "plane %d is the tray's own", (int)p->id);
            c->error(c, e->client, e->seq, "event refused", err);
            return;
        }
    if (sim_softbody_remove_plane(v->state, p->id, err, sizeof err) != SIM_OK)
        c->error(c, e->client, e->seq, "event refused", err);
}

/* On the parameters in force: an earlier set_params of this frame is applied already. */
static void on_params(srv_scene_ctx *c, void *scene, const srv_event *e)
{
    sb_scene *v = scene;
    int n;
    const sim_param_desc *t = sim_softbody_params_table(&n);
    sim_softbody_params p = sim_softbody_get_params(v->state);
    char err[256];
    v->still = 0;
    srv_params_apply(t, n, e->data, &p);
    if (sim_softbody_set_params(v->state, &p, err, sizeof err) != SIM_OK) {
        c->error(c, e->client, e->seq, "event refused", err);
        return;
    }
    c->params_changed = 1;
}

/* The organ back at rest in the tray where it is; parameters and planes kept. */
static void on_reset(srv_scene_ctx *c, void *scene, const srv_event *e)
{
    sb_scene *v = scene;
    char err[160];
    v->still = 0;
    if (place_settled(v, err, sizeof err) != 0)
        c->error(c, e->client, e->seq, "event refused", err);
}

static const srv_event_desc k_events[] = {
    {"grab", 0, parse_grab, on_grab},
    {"move", 0, parse_point, on_move},
    {"release", 0, srv_parse_no_payload, on_release},
    {"tray", 0, parse_tray, on_tray},
    {"add_plane", 0, parse_add_plane, on_add_plane},
    {"remove_plane", 0, parse_remove_plane, on_remove_plane},
    {"set_params", 0, parse_params, on_params},
    {"reset", 0, srv_parse_no_payload, on_reset},
};

/* ------------------------------------------------------------ step and view */

/* A settled organ stops stepping until an event wakes it (every apply clears still). */
static int sb_step(srv_scene_ctx *c, void *scene, double *ms)
{
    sb_scene *v = scene;
    *ms = 0;
    if (v->still >= SLEEP_FRAMES)
        return 0;
    sim_softbody_metrics mt;
    char err[256];
    sim_softbody_set_threads(v->state, c->threads);
    if (sim_softbody_step(v->state, &mt, err, sizeof err) != SIM_OK) {
        fprintf(stderr, "softcast-server: session %s: step: %s\n", c->session_id, err);
        return 0;
    }
    if (mt.nonfinite)
        fprintf(stderr, "softcast-server: session %s: %d particles not finite: reset\n",
                c->session_id, mt.nonfinite);
    *ms = mt.step_ms;
    v->still = mt.grabbed == 0 && mt.max_speed < SLEEP_SPEED ? v->still + 1 : 0;
    return 1;
}

/* The organ (id 0) and the tray (id 1), both in the tray's frame with its pose as their
 * transform. */
static void sb_view(void *scene, uint64_t frame, const srv_view_budget *budget, srv_view *out)
{
    (void)frame, (void)budget; /* one organ: a dent costs its moved vertices */
    sb_scene *v = scene;
    int n;
    const float *x = sim_softbody_surface(v->state, &n);
    for (int i = 0; i < n; i++) {
        float d[3] = {x[i * 3] - v->tray_pos[0], x[i * 3 + 1] - v->tray_pos[1],
                      x[i * 3 + 2] - v->tray_pos[2]};
        rotate(v->tray_quat, -1.0f, d, &v->local[i * 3]);
    }
    proto_transform xf;
    memcpy(xf.t, v->tray_pos, sizeof xf.t);
    xf.r[0] = v->tray_quat[1], xf.r[1] = v->tray_quat[2], xf.r[2] = v->tray_quat[3];
    xf.r[3] = v->tray_quat[0];
    proto_object_in *o = &v->obj[0];
    memset(v->obj, 0, sizeof v->obj);
    o->id = 0;
    o->primitive = PROTO_PRIM_TRIANGLES;
    o->qbits = ORGAN_BITS;
    organ_box(v->body, o->bmin, o->bmax);
    o->nvert = (uint32_t)v->body->outer_nvert;
    o->pos = v->local;
    o->scalar = v->body->region; /* the region of each vertex: the client colours by it */
    o->smax = v->body->region ? (float)(v->body->nregion - 1) : 0.0f;
    o->elem = sim_softbody_model_triangles(v->body->model, &n); /* the outer ones first */
    o->nelem = (uint32_t)v->body->outer_ntri;
    o->topo_version = 1;
    o->xf = xf;
    o = &v->obj[1];
    o->id = 1;
    o->primitive = PROTO_PRIM_TRIANGLES;
    o->qbits = TRAY_BITS;
    for (int k = 0; k < 3; k++)
        o->bmin[k] = k < 2 ? -v->body->half[k] : 0.0f, o->bmax[k] = v->body->half[k];
    o->nvert = 8;
    o->pos = v->tray_x;
    o->nelem = 10;
    o->elem = k_tray_tri;
    o->topo_version = 1;
    o->xf = xf;
    for (int k = 0; k < v->body->ninner; k++) { /* ids 2, 3, ...: inside the organ */
        const sb_inner *in = &v->body->inner[k];
        o = &v->obj[2 + k];
        *o = v->obj[0];
        o->id = (uint16_t)(2 + k);
        o->nvert = (uint32_t)in->nvert;
        o->pos = &v->local[(size_t)in->vert0 * 3];
        o->scalar = in->scalar;
        o->nelem = (uint32_t)in->ntri;
        o->elem = in->tri;
    }
    out->obj = v->obj;
    out->n = 2 + (uint32_t)v->body->ninner;
}

static char *sb_params_json(const void *scene)
{
    const sb_scene *v = scene;
    sim_softbody_params p = sim_softbody_get_params(v->state);
    int n;
    const sim_param_desc *t = sim_softbody_params_table(&n);
    return srv_params_json(t, n, &p);
}

static void sb_describe(const void *scene, cJSON *j)
{
    const sb_scene *v = scene;
    sim_softbody_info in = sim_softbody_model_info(v->body->model);
    cJSON_AddStringToObject(j, "model", in.kind == SIM_SOFTBODY_HYBRID ? "hybrid" : "surface");
    cJSON_AddStringToObject(j, "source", v->body->source);
    cJSON_AddNumberToObject(j, "particles", in.particles);
    cJSON_AddNumberToObject(j, "tets", in.tets);
    cJSON_AddNumberToObject(j, "surface_vertices", in.surface_vertices);
    cJSON_AddNumberToObject(j, "surface_triangles", in.surface_triangles);
    cJSON *r = cJSON_AddArrayToObject(j, "regions");
    for (int k = 0; r && k < v->body->nregion; k++)
        cJSON_AddItemToArray(r, cJSON_CreateString(v->body->region_name[k]));
    cJSON *inner = cJSON_AddArrayToObject(j, "inner_surfaces"); /* object 2 + k: its region */
    for (int k = 0; inner && k < v->body->ninner; k++)
        cJSON_AddItemToArray(inner, cJSON_CreateNumber(v->body->inner[k].region));
    double half[3] = {v->body->half[0], v->body->half[1], v->body->half[2]};
    cJSON_AddItemToObject(j, "tray", cJSON_CreateDoubleArray(half, 3));
    cJSON_AddStringToObject(j, "units", "m");
}

/* ------------------------------------------------------------- durability */

/* Part "SBSC": what the session changes besides its state (the tray's pose, the frames it
 * has been still: a sleeping organ must sleep on), the tray's plane ids (fixed at create: a
 * check), then the state's own part (sim_softbody_save) with its length. The body, the
 * view's arrays and the tray's corners come from the options and are built again. */
#define SB_SCENE_VERSION 1u
static const char k_scene_tag[4] = {'S', 'B', 'S', 'C'};

static int sb_save(void *scene, sc_blob *out, char *err, size_t err_sz)
{
    sb_scene *v = scene;
    int32_t still = v->still, planes[NTRAY_PLANES];
    for (int k = 0; k < NTRAY_PLANES; k++)
        planes[k] = v->tray_plane[k];
    sc_blob_tag(out, k_scene_tag, SB_SCENE_VERSION);
    SC_PUT(out, v->tray_pos);
    SC_PUT(out, v->tray_quat);
    SC_PUT(out, planes);
    SC_PUT(out, still);
    size_t at = out->n;
    uint64_t len = 0;
    SC_PUT(out, len); /* filled in below */
    if (sim_softbody_save(v->state, out, err, err_sz) != SIM_OK)
        return -1;
    if (out->failed) {
        snprintf(err, err_sz, "softbody: out of memory");
        return -1;
    }
    len = (uint64_t)(out->n - at - sizeof len);
    memcpy(out->p + at, &len, sizeof len);
    return 0;
}

/* Nothing changes until the state's part is restored: a refused snapshot leaves the scene
 * as it was built. */
static int sb_restore(void *scene, const void *data, size_t n, char *err, size_t err_sz)
{
    sb_scene *v = scene;
    sc_reader r = sc_reader_of(data, n);
    float pos[3], quat[4];
    int32_t still, planes[NTRAY_PLANES];
    uint64_t len;
    sc_reader_tag(&r, k_scene_tag, SB_SCENE_VERSION);
    SC_GET(&r, pos);
    SC_GET(&r, quat);
    SC_GET(&r, planes);
    SC_GET(&r, still);
    SC_GET(&r, len);
    if (r.failed) {
        snprintf(err, err_sz, "softbody snapshot: %s", r.why);
        return -1;
    }
    if (len != r.n - r.at) {
        snprintf(err, err_sz, "softbody snapshot: the state's part is %llu bytes, %zu left",
                 (unsigned long long)len, r.n - r.at);
        return -1;
    }
    float q2 = quat[0] * quat[0] + quat[1] * quat[1] + quat[2] * quat[2] + quat[3] * quat[3];
    int ok =
        still >= 0 && isfinite(q2) && fabsf(sqrtf(q2) - 1.0f) < 2e-3f; /* as on_tray takes it */
    for (int k = 0; k < 3; k++)
        ok = ok && fabsf(pos[k]) <= TRAY_REACH_M;
    for (int k = 0; k < NTRAY_PLANES; k++)
        ok = ok && planes[k] == v->tray_plane[k];
    if (!ok) {
        snprintf(err, err_sz, "softbody snapshot: the tray's pose or planes are damaged");
        return -1;
    }
    if (sim_softbody_restore(v->state, r.p + r.at, (size_t)len, err, err_sz) != SIM_OK)
        return -1;
    memcpy(v->tray_pos, pos, sizeof v->tray_pos);
    memcpy(v->tray_quat, quat, sizeof v->tray_quat);
    v->still = still;
    return 0;
}

/* The state's positions and velocities, and the tray's pose the view carries. */
static uint64_t sb_hash(void *scene)
{
    const sb_scene *v = scene;
    uint64_t h = sim_softbody_hash(v->state);
    h = sc_hash_bytes(h, v->tray_pos, sizeof v->tray_pos);
    return sc_hash_bytes(h, v->tray_quat, sizeof v->tray_quat);
}

const srv_scene_i srv_scene_softbody = {
    .name = "softbody",
    .usage =
        "  --softbody-voxel MM           phantom organ's voxels for the hybrid model (default 3)\n"
        "  --softbody-surface N          its surface vertices, about (default 3000)\n"
        "  --softbody-labels FILE.nii    the hybrid model from a label map instead (NIfTI)\n"
        "  --softbody-materials SPEC     its labels' materials: LABEL=NAME[:REGION],...\n"
        "  --softbody-particles N        the surface model's bean, vertices (default 2000)\n"
        "  --softbody-mesh FILE          the surface model from a closed mesh (OFF or OBJ, m)\n"
        "  --softbody-mesh-size M        scale that mesh to M metres across (default 0: as "
        "given)\n",
    .events = k_events,
    .nevents = (int)(sizeof k_events / sizeof k_events[0]),
    .option = sb_option,
    .start = sb_start,
    .stop = sb_stop,
    .create = sb_create,
    .destroy = sb_destroy,
    .bytes = sb_bytes,
    .step = sb_step,
    .view = sb_view,
    .params_json = sb_params_json,
    .params_table = sim_softbody_params_table,
    .describe = sb_describe,
    .save = sb_save,
    .restore = sb_restore,
    .hash = sb_hash,
};
