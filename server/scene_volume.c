/* scene_volume.c: the volume scene in a session: a CT volume (the server's default, or a
 * phantom of the asked size) deformed by HP-ChainMail; its skin and bone surfaces are
 * the view; slices are answered to the client that asks.
 *
 * Events: each is parsed once, when it arrives, into a small struct below, and applied to
 * the sim at once when the worker takes it from the inbox (sim_volume_apply_event): the
 * sim keeps no queue of the server's events and the adapter no copy of parameters. */
#define _GNU_SOURCE /* realpath */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "reader.h"
#include "scene.h"
#include "sim/volume/volume.h"

/* ------------------------------------------------ process-wide (main thread) */

/* Options, then the default volume shared by the sessions that ask for no dims. Written
 * by main before any other thread starts and after they all stopped; read-only between. */
static struct {
    char path[512];       /* --volume: NIfTI file or DICOM series ("" = phantom) */
    char series[65];      /* --series: DICOM SeriesInstanceUID ("" = the largest) */
    int dims[3];          /* --dims: phantom size of the default scene */
    int64_t max_elements; /* --max-elements: largest volume a session may create */
    int64_t fit_elements; /* --fit-elements: a --volume over this is block-averaged to fit
                             (-1: to --max-elements; 0: refused instead) */
    sim_volume_model *model;
    sim_volume_info info;    /* what the default volume is (a file's, or the phantom's) */
    char labels[512];        /* --volume-labels: segmentation NIfTI of the default volume */
    char label_classes[512]; /* --volume-label-classes: its LABEL=CLASS,... table */
    char preset[16];         /* --hu-preset: "default" or "contrast" (sim_volume_params_preset) */
    /* A frame's work, bounded whatever a driver asks (--max-passes, --max-relax-iterations,
     * --max-wave): sessions start within these and a set_params past them is refused. */
    int max_passes, max_relax_iterations, max_wave;
} g_vol = {.path = "",
           .dims = {128, 128, 75},
           .max_elements = 4 << 20,
           .fit_elements = -1,
           .preset = "default",
           /* Measured on the default volume (release build, 2 workers, 2 cores): dragging a
            * 20 mm grab 100 mm each frame took 3.1-3.7 s a frame unbounded, 0.29-0.39 s with
            * the wave cut at 50,000 elements, 0.57-0.96 s with 16 relaxation iterations; an
            * ordinary drag moves about a thousand elements (server/README.md). */
           .max_passes = 1024,
           .max_relax_iterations = 8,
           .max_wave = 50000};

/* The caps of a frame's work as "what, its value, its cap, its flag" (the first exceeded),
 * or NULL when p keeps within them. */
static const char *over_cap(const sim_volume_params *p, int *val, int *cap)
{
    const char *what = NULL;
    if (p->max_passes > g_vol.max_passes)
        what = "max_passes", *val = p->max_passes, *cap = g_vol.max_passes;
    else if (p->relax_iterations > g_vol.max_relax_iterations)
        what = "relax_iterations", *val = p->relax_iterations, *cap = g_vol.max_relax_iterations;
    else if (p->max_wave == 0 || p->max_wave > g_vol.max_wave)
        what = "max_wave", *val = p->max_wave, *cap = g_vol.max_wave;
    return what;
}

/* The class thresholds of a preset on the defaults: 1 and *p set, or -1 with err. */
static int preset_params(const char *name, sim_volume_params *p, char *err, size_t err_sz)
{
    *p = sim_default_volume_params();
    return sim_volume_params_preset(p, name, err, err_sz) == SIM_OK ? 1 : -1;
}

/* A model of v with the bone surface at the preset's threshold (and override's classes). */
static sim_status preset_model(sim_volume_model **m, const sim_volume *v, const char *preset,
                               const uint8_t *override, char *err, size_t err_sz)
{
    sim_volume_model_options mo = sim_default_volume_model_options();
    sim_volume_params p;
    preset_params(preset, &p, err, err_sz);
    mo.bone_iso_hu = p.hu_threshold[2];
    mo.class_override = override;
    return sim_volume_model_create(m, v, &mo, err, err_sz);
}

static int vol_option(const char *name, const char *val, char *err, size_t err_sz)
{
    if (!strcmp(name, "volume-labels"))
        return srv_option_string(name, val, g_vol.labels, sizeof g_vol.labels, err, err_sz);
    if (!strcmp(name, "volume-label-classes"))
        return srv_option_string(name, val, g_vol.label_classes, sizeof g_vol.label_classes, err,
                                 err_sz);
    if (!strcmp(name, "hu-preset")) {
        sim_volume_params p;
        if (preset_params(val, &p, err, err_sz) < 0)
            return -1;
        return srv_option_string(name, val, g_vol.preset, sizeof g_vol.preset, err, err_sz);
    }
    if (!strcmp(name, "volume")) {
        if (strlen(val) >= sizeof g_vol.path) {
            snprintf(err, err_sz, "--volume: longer than %zu characters", sizeof g_vol.path - 1);
            return -1;
        }
        strcpy(g_vol.path, val);
        return 1;
    }
    if (!strcmp(name, "series")) {
        if (strlen(val) >= sizeof g_vol.series || strspn(val, "0123456789.") != strlen(val)) {
            snprintf(err, err_sz, "--series %s: a DICOM UID (digits and dots, at most 64)", val);
            return -1;
        }
        strcpy(g_vol.series, val);
        return 1;
    }
    if (!strcmp(name, "dims")) {
        char tail;
        if (sscanf(val, "%dx%dx%d%c", &g_vol.dims[0], &g_vol.dims[1], &g_vol.dims[2], &tail) != 3) {
            snprintf(err, err_sz, "--dims %s: must be WxHxD", val);
            return -1;
        }
        return 1;
    }
    if (!strcmp(name, "fit-elements")) {
        char *end = NULL;
        long long n = strtoll(val, &end, 10);
        if (!*val || *end || (n != 0 && n < 512) || n > (1LL << 31)) {
            snprintf(err, err_sz, "--fit-elements %s: 0 (refuse) or an integer in [512, 2^31]",
                     val);
            return -1;
        }
        g_vol.fit_elements = n;
        return 1;
    }
    int *cap = !strcmp(name, "max-passes")             ? &g_vol.max_passes
               : !strcmp(name, "max-relax-iterations") ? &g_vol.max_relax_iterations
               : !strcmp(name, "max-wave")             ? &g_vol.max_wave
                                                       : NULL;
    if (cap) {
        char *end = NULL;
        long n = strtol(val, &end, 10);
        if (!*val || *end || n < 1 || n > 100000000) {
            snprintf(err, err_sz, "--%s %s: must be an integer in [1, 100000000]", name, val);
            return -1;
        }
        *cap = (int)n;
        return 1;
    }
    if (!strcmp(name, "max-elements")) {
        char *end = NULL;
        long long n = strtoll(val, &end, 10);
        if (!*val || *end || n < 512 || n > (1LL << 31)) {
            snprintf(err, err_sz, "--max-elements %s: must be an integer in [512, 2^31]", val);
            return -1;
        }
        g_vol.max_elements = n;
        return 1;
    }
    return 0;
}

/* Tell the operator what loading the --volume did to it (the clinician's view of it
 * follows from this: orientation, fit, body, margin, suspicious values). */
static void vol_log_loaded(const char *path, const sim_volume *v, const sim_volume_info *in,
                           int64_t fit)
{
    if (!strcmp(in->format, "dicom"))
        fprintf(stderr,
                "softcast-server: volume %s: DICOM series %s (%s, %d slices; %d series found, "
                "%d files skipped; from %s)\n",
                path, in->series_uid, in->modality[0] ? in->modality : "no modality",
                in->slice_count, in->series_count, in->skipped_files, in->source);
    fprintf(stderr, "softcast-server: volume %s: %s %dx%dx%d, %s%s%s\n", path, in->format,
            in->stored_dims[0], in->stored_dims[1], in->stored_dims[2],
            v->orientation[0] ? "stored " : "no orientation in the file: kept as stored",
            v->orientation, v->orientation[0] ? ", read as RAS (z up, y anterior)" : "");
    if (v->oblique_deg > 0.5f)
        fprintf(stderr,
                "softcast-server: warning: volume %s is oblique by %.1f degrees: taken to its "
                "nearest axes, not resampled\n",
                path, (double)v->oblique_deg);
    if (in->fit_factor > 1)
        fprintf(stderr,
                "softcast-server: volume %s: %dx%dx%d is over the budget of %lld elements: "
                "block-averaged by %d\n",
                path, in->stored_dims[0], in->stored_dims[1], in->stored_dims[2], (long long)fit,
                in->fit_factor);
    if (in->removed_elements > 0)
        fprintf(stderr,
                "softcast-server: volume %s: %lld elements of tissue apart from the body (couch, "
                "noise) made air\n",
                path, (long long)in->removed_elements);
    const int *m = in->margin;
    if (m[0] | m[1] | m[2] | m[3] | m[4] | m[5])
        fprintf(stderr,
                "softcast-server: volume %s: tissue touches the edge: air margin added "
                "(-x %d, +x %d, -y %d, +y %d, -z %d, +z %d elements)\n",
                path, m[0], m[1], m[2], m[3], m[4], m[5]);
    fprintf(stderr,
            "softcast-server: volume %s: simulated as %dx%dx%d at %.2f x %.2f x %.2f mm, HU %.0f "
            "to %.0f\n",
            path, v->nx, v->ny, v->nz, (double)v->spacing_mm[0], (double)v->spacing_mm[1],
            (double)v->spacing_mm[2], (double)in->hu_min, (double)in->hu_max);
    if (in->warning[0])
        fprintf(stderr, "softcast-server: warning: volume %s: %s\n", path, in->warning);
}

/* The element budget a user's file is fitted to: --fit-elements, at most --max-elements. */
static int64_t vol_fit_budget(void)
{
    int64_t fit = g_vol.fit_elements < 0 ? g_vol.max_elements : g_vol.fit_elements;
    return fit > g_vol.max_elements ? g_vol.max_elements : fit;
}

/* How a file is read: fitted to fit elements, or (fit 0: --fit-elements 0) refused when over
 * --max-elements by its stored dims. */
static sim_volume_load_opts load_opts_fitted(int64_t fit)
{
    sim_volume_load_opts lo = sim_default_volume_load_opts();
    lo.fit_elements = (size_t)fit;
    if (fit == 0)
        lo.limits.max_elements = (size_t)g_vol.max_elements;
    return lo;
}

/* A user's file: fitted to the server's budget. */
static sim_volume_load_opts vol_load_opts(void)
{
    return load_opts_fitted(vol_fit_budget());
}

/* A phantom's facts, as a file's would be told. */
static void phantom_info(const sim_volume *v, sim_volume_info *in)
{
    memset(in, 0, sizeof *in);
    snprintf(in->format, sizeof in->format, "phantom");
    snprintf(in->name, sizeof in->name, "phantom");
    in->stored_dims[0] = v->nx, in->stored_dims[1] = v->ny, in->stored_dims[2] = v->nz;
    in->fit_factor = 1;
    size_t n = (size_t)v->nx * (size_t)v->ny * (size_t)v->nz;
    in->hu_min = in->hu_max = v->hu[0];
    for (size_t i = 1; i < n; i++) {
        in->hu_min = fminf(in->hu_min, v->hu[i]);
        in->hu_max = fmaxf(in->hu_max, v->hu[i]);
    }
}

/* What a default volume is made from: a file (--volume, --series) fitted to a budget, or the
 * phantom of --dims; the classes of --volume-labels; the surfaces of --hu-preset. vol_start
 * builds the server's; a session made on it keeps which (vol_origin_default), so that a
 * restart under other flags builds that one again for it (vol_create_default). */
typedef struct vol_source {
    char path[512], series[65];
    int dims[3];
    int64_t fit; /* the elements a file is fitted to (0: refused over --max-elements) */
    char labels[512], label_classes[512], preset[16];
} vol_source;

/* A path made absolute (as given when it cannot be): 0, or -1 when it does not fit. */
static int absolute(const char *path, char *out, size_t n)
{
    char *abs = path[0] ? realpath(path, NULL) : NULL;
    int fits = snprintf(out, n, "%s", abs ? abs : path) < (int)n;
    free(abs);
    return fits ? 0 : -1;
}

/* The server's default as its flags say, once, at start (the paths made absolute, so that a
 * session's record of it does not depend on the directory the server starts in, nor on
 * where a link points later): 0, or -1 with err. */
static int server_source(vol_source *src, char *err, size_t err_sz)
{
    memset(src, 0, sizeof *src);
    src->fit = vol_fit_budget();
    if (absolute(g_vol.path, src->path, sizeof src->path) != 0 ||
        absolute(g_vol.labels, src->labels, sizeof src->labels) != 0) {
        snprintf(err, err_sz, "--volume or --volume-labels: its absolute path is over %zu bytes",
                 sizeof src->path - 1);
        return -1;
    }
    strcpy(src->series, g_vol.series);
    memcpy(src->dims, g_vol.dims, sizeof src->dims);
    strcpy(src->label_classes, g_vol.label_classes);
    strcpy(src->preset, g_vol.preset);
    return 0;
}

/* A default's model and facts: the file read (logged when log) or the phantom made, its label
 * map's classes, the preset's surfaces. */
static sim_status source_model(const vol_source *src, int log, sim_volume_model **model,
                               sim_volume_info *info, char *err, size_t err_sz)
{
    sim_volume v;
    sim_status st;
    if (!src->labels[0] != !src->label_classes[0]) {
        snprintf(err, err_sz, "--volume-labels and --volume-label-classes go together");
        return SIM_ERR_ARG;
    }
    if (src->path[0]) {
        sim_volume_load_opts lo = load_opts_fitted(src->fit);
        lo.series_uid = src->series; /* the operator's pick, for --volume alone */
        st = sim_volume_load_file(&v, src->path, &lo, info, err, err_sz);
        if (st == SIM_OK && log)
            vol_log_loaded(src->path, &v, info, src->fit);
    } else {
        st = sim_volume_phantom(&v, src->dims[0], src->dims[1], src->dims[2], err, err_sz);
        if (st == SIM_OK)
            phantom_info(&v, info);
    }
    if (st != SIM_OK)
        return st;
    uint8_t *ov = NULL;
    if ((int64_t)v.nx * v.ny * v.nz > g_vol.max_elements) {
        snprintf(err, err_sz, "default volume %dx%dx%d is over --max-elements %lld", v.nx, v.ny,
                 v.nz, (long long)g_vol.max_elements);
        st = SIM_ERR_LIMIT;
    } else if (src->labels[0]) {
        st = sim_volume_label_classes(&ov, src->labels, src->label_classes, &v, info, NULL, err,
                                      err_sz);
        if (st == SIM_OK && log)
            fprintf(stderr, "softcast-server: classes from %s (%s), the other labels by HU\n",
                    src->labels, src->label_classes);
    }
    if (st == SIM_OK)
        st = preset_model(model, &v, src->preset, ov, err, err_sz);
    free(ov);
    sim_volume_free(&v);
    return st;
}

static vol_source g_source; /* the server's default as vol_start built it */

static int vol_start(sim_backend *b, char *err, size_t err_sz)
{
    (void)b;
    if (server_source(&g_source, err, err_sz) != 0)
        return -1;
    return source_model(&g_source, 1, &g_vol.model, &g_vol.info, err, err_sz) == SIM_OK ? 0 : -1;
}

static void vol_stop(void)
{
    sim_volume_model_destroy(g_vol.model);
    g_vol.model = NULL;
}

/* --------------------------------------------------------------- a session */

/* The probe's object: the pull (vertex 0 at rest, 1 where the region is now), three rings of
 * 16 round the rest position that mark the region and stay still, so that a frame's delta
 * (the pull's end and the trail) never costs more than the object's key (which would key
 * it), and the trail: vertex VOL_PROBE_TRAIL_AT + k - 1 is where the region was k frames
 * before (k = 1..VOL_PROBE_TRAIL), its scalar the speed then. A viewer is skipped frames (a
 * busy page shows the newest of a burst; the server sends a slow client the newest), and the
 * trail gives the page those frames' samples all the same, so its plot misses no swing. */
#define VOL_PROBE_RING     16
#define VOL_PROBE_TRAIL    16
#define VOL_PROBE_TRAIL_AT (2 + 3 * VOL_PROBE_RING)
#define VOL_PROBE_NVERT    (VOL_PROBE_TRAIL_AT + VOL_PROBE_TRAIL)

/* One frame's probe sample (world mm from the rest position; mm/s). */
typedef struct vol_probe_sample {
    uint64_t frame;
    float disp[3], speed;
} vol_probe_sample;

typedef struct vol_scene {
    sim_volume_model *model; /* the server's default, or this session's own */
    int own_model;
    sim_volume_state *state;
    float bmin[3], bmax[3]; /* quantisation box, world mm */
    float *pos[SIM_NSURFACE];
    /* What the last view evaluated (sim_volume_surface_update): pos[k] is the surface as of
     * seen[k]; ranges[k], the vertices that changed then, go to the encoder. */
    uint64_t seen[SIM_NSURFACE];
    uint32_t *ranges[SIM_NSURFACE], nranges[SIM_NSURFACE];
    /* The view: skin (id 0) and bone (id 1), world mm; and the probe (id 2). */
    proto_object_in obj[SIM_NSURFACE + 1];
    int clamp_noticed;    /* the driver was told that this pull stops at the box */
    sim_volume_info info; /* the dataset, as the lobby and the session show it */
    const char *source;   /* "default", "phantom" or "file" */
    vol_source made_on;   /* "default": the default it was made on (this server's or, built
                           * again after a restart under other flags, the one it had) */
    /* The probe after the last step: the grabbed region's mean rest and present positions
     * (world mm), a segment between them, its speed (mm/s) at both ends. */
    float probe_pos[VOL_PROBE_NVERT * 3], probe_speed[VOL_PROBE_NVERT], probe_at[3];
    float probe_box[3];
    uint32_t probe_seg[(VOL_PROBE_NVERT - 1) * 2];
    /* The trail's source: the samples of the last steps, newest first (a frame that stepped
     * nothing, paused, shows the step before it); only this grab's (a new one starts again). */
    vol_probe_sample probe_hist[VOL_PROBE_TRAIL + 1];
    int probe_nhist;
    char preset[16]; /* its class thresholds' preset (sim_volume_params_preset) */
} vol_scene;

/* The session's preset: "preset" in its options, else --hu-preset. 201, or 400 with err. */
static int parse_preset(const cJSON *opts, char out[16], char *err, size_t err_sz)
{
    const cJSON *pj = cJSON_GetObjectItemCaseSensitive(opts, "preset");
    const char *name = g_vol.preset;
    if (pj && (!cJSON_IsString(pj) || strlen(pj->valuestring) >= 16)) {
        snprintf(err, err_sz, "\"preset\" must be \"default\" or \"contrast\"");
        return 400;
    }
    if (pj)
        name = pj->valuestring;
    sim_volume_params p;
    if (preset_params(name, &p, err, err_sz) < 0)
        return 400;
    strcpy(out, name);
    return 201;
}

static int parse_dims(const cJSON *dj, int dims[3], char *err, size_t err_sz)
{
    if (!cJSON_IsArray(dj) || cJSON_GetArraySize(dj) != 3) {
        snprintf(err, err_sz, "\"dims\" must be [x, y, z]");
        return 400;
    }
    for (int b = 0; b < 3; b++) {
        const cJSON *e = cJSON_GetArrayItem(dj, b);
        if (!srv_json_int_in(e, 8, 4096)) {
            snprintf(err, err_sz, "\"dims\" entries must be integers 8 to 4096");
            return 400;
        }
        dims[b] = (int)e->valuedouble;
    }
    int64_t n = (int64_t)dims[0] * dims[1] * dims[2];
    if (n > g_vol.max_elements) {
        snprintf(err, err_sz, "dims %dx%dx%d: at most %lld elements", dims[0], dims[1], dims[2],
                 (long long)g_vol.max_elements);
        return 413;
    }
    return 201;
}

static int vol_finish(sim_backend *b, vol_scene *v, char *err, size_t err_sz);
static int vol_status(sim_status st);
static void probe_view(vol_scene *v, const sim_volume_metrics *mt, uint64_t frame, double period_s);

static int vol_create(sim_backend *b, const cJSON *opts, void **out, char *err, size_t err_sz)
{
    static const char *const known[] = {"dims", "preset", NULL};
    const cJSON *dj = cJSON_GetObjectItemCaseSensitive(opts, "dims");
    int dims[3], status = srv_create_fields(opts, "volume", known, err, err_sz);
    if (status == 201 && dj)
        status = parse_dims(dj, dims, err, err_sz);
    char preset[16];
    if (status == 201)
        status = parse_preset(opts, preset, err, err_sz);
    if (status != 201)
        return status;
    vol_scene *v = calloc(1, sizeof *v);
    if (!v) {
        snprintf(err, err_sz, "out of memory");
        return 500;
    }
    *out = v;
    strcpy(v->preset, preset);
    v->model = g_vol.model;
    v->info = g_vol.info;
    v->source = "default";
    v->made_on = g_source;
    if (dj) {
        sim_volume vol;
        if (sim_volume_phantom(&vol, dims[0], dims[1], dims[2], err, err_sz) != SIM_OK)
            return 400;
        phantom_info(&vol, &v->info);
        v->source = "phantom";
        sim_status st = preset_model(&v->model, &vol, v->preset, NULL, err, err_sz);
        sim_volume_free(&vol);
        if (st != SIM_OK)
            return 500;
        v->own_model = 1;
    }
    return vol_finish(b, v, err, err_sz);
}

/* A default as kept in a session's origin: {"file", "series", "fit"} or {"phantom": dims},
 * with "labels", "label_classes" when set, and "preset". */
static cJSON *source_json(const vol_source *src)
{
    cJSON *j = cJSON_CreateObject();
    if (src->path[0]) {
        cJSON_AddStringToObject(j, "file", src->path);
        cJSON_AddStringToObject(j, "series", src->series);
        cJSON_AddNumberToObject(j, "fit", (double)src->fit);
    } else {
        cJSON_AddItemToObject(j, "phantom", cJSON_CreateIntArray(src->dims, 3));
    }
    if (src->labels[0]) {
        cJSON_AddStringToObject(j, "labels", src->labels);
        cJSON_AddStringToObject(j, "label_classes", src->label_classes);
    }
    cJSON_AddStringToObject(j, "preset", src->preset);
    return j;
}

static int json_text(const cJSON *j, const char *key, char *out, size_t n)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, key);
    if (!v) {
        out[0] = 0;
        return 0;
    }
    return cJSON_IsString(v) && strlen(v->valuestring) < n ? (strcpy(out, v->valuestring), 0) : -1;
}

/* source_json's object read back: 0, or -1 when it is not one. */
static int source_of_json(const cJSON *j, vol_source *src)
{
    memset(src, 0, sizeof *src);
    const cJSON *ph = cJSON_GetObjectItemCaseSensitive(j, "phantom");
    const cJSON *fit = cJSON_GetObjectItemCaseSensitive(j, "fit");
    if (json_text(j, "file", src->path, sizeof src->path) ||
        json_text(j, "series", src->series, sizeof src->series) ||
        json_text(j, "labels", src->labels, sizeof src->labels) ||
        json_text(j, "label_classes", src->label_classes, sizeof src->label_classes) ||
        json_text(j, "preset", src->preset, sizeof src->preset) || !src->preset[0])
        return -1;
    sim_volume_params p;
    char why[128];
    if (preset_params(src->preset, &p, why, sizeof why) < 0)
        return -1;
    if (src->path[0])
        return srv_json_int_in(fit, 0, 1e15) ? (src->fit = (int64_t)fit->valuedouble, 0) : -1;
    /* As a session's "dims" are: within --max-elements before a phantom of them is made (a
     * recording is anyone's upload). */
    return parse_dims(ph, src->dims, why, sizeof why) == 201 ? 0 : -1;
}

/* A session on the server's default: which one, for its origin (durable.c). */
static cJSON *vol_origin_default(const void *scene)
{
    const vol_scene *v = scene;
    if (strcmp(v->source, "default"))
        return NULL; /* a phantom of its own dims, or a user's file: its options or file say */
    return source_json(&v->made_on);
}

/* A session made on a default built again: as vol_create on the server's default when it is
 * that one still; else on the one it was made on, its own model now. files: whether a file it
 * names may be read (a session kept by this server); a recording's (anyone's upload) may
 * only name a phantom or the server's own default. */
static int vol_create_default(sim_backend *b, const cJSON *opts, const cJSON *def, int files,
                              void **out, char *err, size_t err_sz)
{
    vol_source was;
    if (source_of_json(def, &was) != 0) {
        snprintf(err, err_sz,
                 "its default volume is not told as this server tells one, or is "
                 "over --max-elements");
        return 400;
    }
    cJSON *a = source_json(&was), *c = source_json(&g_source);
    int same = cJSON_Compare(a, c, 1);
    cJSON_Delete(a);
    cJSON_Delete(c);
    if (same)
        return vol_create(b, opts, out, err, err_sz);
    if ((was.path[0] || was.labels[0]) && !files) { /* only a plain phantom is made again */
        snprintf(err, err_sz,
                 "it was made on another server's default volume (%.300s), which this server "
                 "does not have",
                 was.path[0] ? was.path : was.labels);
        return 400;
    }
    static const char *const known[] = {"preset", NULL};
    int status = srv_create_fields(opts, "volume", known, err, err_sz);
    char preset[16];
    if (status == 201)
        status = cJSON_GetObjectItemCaseSensitive(opts, "preset")
                     ? parse_preset(opts, preset, err, err_sz)
                     : (strcpy(preset, was.preset), 201);
    vol_scene *v = status == 201 ? calloc(1, sizeof *v) : NULL;
    if (!v)
        return status == 201 ? (snprintf(err, err_sz, "out of memory"), 500) : status;
    *out = v;
    strcpy(v->preset, preset);
    v->source = "default"; /* still the one it was made on: a later restart builds it again */
    v->made_on = was;
    sim_status st = source_model(&was, 0, &v->model, &v->info, err, err_sz);
    if (st != SIM_OK) {
        size_t at = strlen(err);
        snprintf(err + at, err_sz - at, " (the default volume it was made on)");
        return vol_status(st);
    }
    v->own_model = 1;
    return vol_finish(b, v, err, err_sz);
}

/* What every session needs once its model is there: its state, its box, its buffers. */
static int vol_finish(sim_backend *b, vol_scene *v, char *err, size_t err_sz)
{
    if (sim_volume_state_create(&v->state, v->model, b, err, err_sz) != SIM_OK)
        return 500;
    sim_volume_params p = sim_volume_get_params(v->state), pp;
    preset_params(v->preset, &pp, err, err_sz);
    /* The preset's classes, and the frame's work within the server's caps, from the start. */
    sim_volume_event ev = {.type = SIM_EV_SET_PARAMS, .params = p};
    ev.params.hu_threshold[2] = pp.hu_threshold[2];
    ev.params.max_passes = p.max_passes < g_vol.max_passes ? p.max_passes : g_vol.max_passes;
    ev.params.relax_iterations = p.relax_iterations < g_vol.max_relax_iterations
                                     ? p.relax_iterations
                                     : g_vol.max_relax_iterations;
    ev.params.max_wave = g_vol.max_wave;
    if (sim_volume_apply_event(v->state, &ev, err, err_sz) != SIM_OK)
        return 500;
    p = ev.params;
    const sim_volume *vol = sim_volume_model_volume(v->model);
    int n[3] = {vol->nx, vol->ny, vol->nz};
    for (int k = 0; k < 3; k++) {
        v->bmin[k] = -p.boundary_margin * vol->spacing_mm[k];
        v->bmax[k] = ((float)(n[k] - 1) + p.boundary_margin) * vol->spacing_mm[k];
    }
    for (int k = 0; k < SIM_NSURFACE; k++) {
        const sim_surface *sf = sim_volume_model_surface(v->model, (sim_surface_kind)k);
        v->pos[k] = malloc(((size_t)sf->nvert * 3 + 3) * sizeof(float));
        v->ranges[k] = malloc(((size_t)sf->nrun * 2 + 2) * sizeof(uint32_t));
        v->seen[k] = 0; /* the first view evaluates every vertex */
        if (!v->pos[k] || !v->ranges[k]) {
            snprintf(err, err_sz, "out of memory");
            return 500;
        }
    }
    sim_volume_metrics none;
    memset(&none, 0, sizeof none);
    probe_view(v, &none, 0, 0.0); /* nothing grabbed yet: at the centre, at rest */
    return 201;
}

/* An HTTP status for what the loader said. */
static int vol_status(sim_status st)
{
    return st == SIM_ERR_LIMIT ? 413 : st == SIM_ERR_NOMEM ? 500 : 400;
}

static int vol_check_file(const char *path, int partial, char *err, size_t err_sz)
{
    sim_volume_load_opts lo = vol_load_opts();
    lo.header_only = partial ? SIM_LOAD_HEADER_PARTIAL : SIM_LOAD_HEADER;
    sim_volume v;
    sim_volume_info info;
    /* Here, on the HTTP thread: a header check reads a NIfTI header or a zip's directory
     * (our code, zlib, libzip), never an image decoder, and must answer at once. */
    sim_status st = sim_volume_load_file(&v, path, &lo, &info, err, err_sz);
    return st == SIM_OK ? 0 : vol_status(st);
}

/* A session on a user's file: its own model, told as the dataset the user named. */
static int vol_create_file(sim_backend *b, const char *path, const char *name,
                           void (*stage)(void *ctx, const char *stage), void *ctx, void **out,
                           char *err, size_t err_sz)
{
    vol_scene *v = calloc(1, sizeof *v);
    if (!v) {
        snprintf(err, err_sz, "out of memory");
        return 500;
    }
    *out = v;
    v->source = "file";
    strcpy(v->preset, g_vol.preset);
    sim_volume_load_opts lo = vol_load_opts();
    lo.progress = stage;
    lo.progress_ctx = ctx;
    lo.dicom_file_alone = 1; /* an upload sits among other users' files */
    sim_volume vol;
    sim_status st = srv_volume_load_isolated(&vol, path, &lo, &v->info, err, err_sz);
    if (st != SIM_OK)
        return vol_status(st);
    snprintf(v->info.name, sizeof v->info.name, "%s", name);
    stage(ctx, "surfaces");
    st = preset_model(&v->model, &vol, v->preset, NULL, err, err_sz);
    sim_volume_free(&vol);
    if (st != SIM_OK)
        return vol_status(st);
    v->own_model = 1;
    return vol_finish(b, v, err, err_sz);
}

static void vol_destroy(void *scene)
{
    vol_scene *v = scene;
    if (!v)
        return;
    for (int k = 0; k < SIM_NSURFACE; k++) {
        free(v->pos[k]);
        free(v->ranges[k]);
    }
    sim_volume_state_destroy(v->state);
    if (v->own_model)
        sim_volume_model_destroy(v->model);
    free(v);
}

/* ------------------------------------------------------------------ events */

/* The payloads, as they wait in the inbox. */
typedef struct vol_point {
    float point[3];
    uint8_t world; /* 1: point in world mm, 0: lattice units */
} vol_point;       /* a move's */
typedef struct vol_grab {
    vol_point at;
    float radius;
} vol_grab;
typedef struct vol_slice {
    int32_t index;
    float level_hu, width_hu;
    uint8_t plane; /* sim_plane */
} vol_slice;

static int parse_point(const cJSON *msg, vol_point *p, char *err, size_t err_sz)
{
    int world;
    if (proto_read_vec3(msg, "point", 1e7, p->point, err, err_sz) != PROTO_OK ||
        proto_read_choice(msg, "space", "lattice|world", 1, &world, err, err_sz) != PROTO_OK)
        return -1;
    p->world = (uint8_t)world;
    return 0;
}

static int parse_grab(const cJSON *msg, void *out, const char **error, char *err, size_t err_sz)
{
    vol_grab *g = out;
    double r;
    if (cJSON_GetObjectItemCaseSensitive(msg, "vertex")) {
        *error = "not in this scene";
        snprintf(err, err_sz, "a volume is grabbed at a point with a radius, not by vertex");
        return -1;
    }
    if (proto_read_number(msg, "radius", 1e-6, 1e4, &r, err, err_sz) != PROTO_OK ||
        parse_point(msg, &g->at, err, err_sz) != 0)
        return -1;
    g->radius = (float)r;
    return (int)sizeof *g;
}

static int parse_move(const cJSON *msg, void *out, const char **error, char *err, size_t err_sz)
{
    (void)error;
    return parse_point(msg, out, err, err_sz) ? -1 : (int)sizeof(vol_point);
}

static int parse_params(const cJSON *msg, void *out, const char **error, char *err, size_t err_sz)
{
    int n;
    const sim_param_desc *t = sim_volume_params_table(&n);
    return srv_params_parse(t, n, msg, out, error, err, err_sz);
}

/* set_condition is set_params of the one choice parameter of that name. */
static int parse_condition(const cJSON *msg, void *out, const char **error, char *err,
                           size_t err_sz)
{
    int n;
    const sim_param_desc *t = sim_volume_params_table(&n);
    return srv_param_parse_one(t, n, "condition",
                               cJSON_GetObjectItemCaseSensitive(msg, "condition"), out, error, err,
                               err_sz);
}

static int parse_slice(const cJSON *msg, void *out, const char **error, char *err, size_t err_sz)
{
    (void)error;
    vol_slice *sl = out;
    double level, width;
    int plane;
    if (proto_read_choice(msg, "plane", "axial|coronal|sagittal", -1, &plane, err, err_sz) ||
        proto_read_int(msg, "index", 0, 65535, &sl->index, err, err_sz) ||
        proto_read_number(msg, "level", -4000, 40000, &level, err, err_sz) ||
        proto_read_number(msg, "width", 1, 40000, &width, err, err_sz))
        return -1;
    sl->plane = (uint8_t)plane;
    sl->level_hu = (float)level;
    sl->width_hu = (float)width;
    return (int)sizeof *sl;
}

/* Hand one event to the sim now; a refusal goes back to its sender (-1). */
static int to_sim(srv_scene_ctx *c, vol_scene *v, const srv_event *e, sim_volume_event *ev)
{
    char err[256] = "";
    ev->seq = e->seq;
    if (sim_volume_apply_event(v->state, ev, err, sizeof err) == SIM_OK)
        return 0;
    c->error(c, e->client, e->seq, "event refused", err);
    return -1;
}

static void to_sim_at(srv_scene_ctx *c, void *scene, const srv_event *e, sim_event_type type,
                      const vol_point *p, float radius)
{
    sim_volume_event ev;
    memset(&ev, 0, sizeof ev);
    ev.type = type;
    ev.space = p->world ? SIM_SPACE_WORLD : SIM_SPACE_LATTICE;
    memcpy(ev.point, p->point, sizeof ev.point);
    ev.radius = radius;
    to_sim(c, scene, e, &ev);
}

static void on_grab(srv_scene_ctx *c, void *scene, const srv_event *e)
{
    const vol_grab *g = e->data;
    to_sim_at(c, scene, e, SIM_EV_GRAB, &g->at, g->radius);
}

static void on_move(srv_scene_ctx *c, void *scene, const srv_event *e)
{
    to_sim_at(c, scene, e, SIM_EV_MOVE, e->data, 0.0f);
}

static void on_simple(srv_scene_ctx *c, void *scene, const srv_event *e, sim_event_type type)
{
    sim_volume_event ev;
    memset(&ev, 0, sizeof ev);
    ev.type = type;
    to_sim(c, scene, e, &ev);
}

static void on_release(srv_scene_ctx *c, void *scene, const srv_event *e)
{
    on_simple(c, scene, e, SIM_EV_RELEASE);
}

static void on_reset(srv_scene_ctx *c, void *scene, const srv_event *e)
{
    on_simple(c, scene, e, SIM_EV_RESET);
}

/* On the parameters in force: an earlier set_params of this frame is applied already. */
static void on_params(srv_scene_ctx *c, void *scene, const srv_event *e)
{
    vol_scene *v = scene;
    int n;
    const sim_param_desc *t = sim_volume_params_table(&n);
    sim_volume_event ev;
    memset(&ev, 0, sizeof ev);
    ev.type = SIM_EV_SET_PARAMS;
    ev.params = sim_volume_get_params(v->state);
    srv_params_apply(t, n, e->data, &ev.params);
    int val, cap;
    const char *what = over_cap(&ev.params, &val, &cap);
    if (what) { /* the client hears which cap, and how to raise it */
        char d[256];
        snprintf(d, sizeof d,
                 "%s %d: this server bounds a frame's work at %s %d (--%s); nothing was changed",
                 what, val, what, cap,
                 !strcmp(what, "max_passes")         ? "max-passes"
                 : !strcmp(what, "relax_iterations") ? "max-relax-iterations"
                                                     : "max-wave");
        c->error(c, e->client, e->seq, "over the server's limit", d);
        return;
    }
    if (to_sim(c, v, e, &ev) == 0)
        c->params_changed = 1;
}

/* The damping condition alone: the sim changes nothing else (no new links to relax). */
static void on_condition(srv_scene_ctx *c, void *scene, const srv_event *e)
{
    const srv_param_set *ps = e->data;
    sim_volume_event ev;
    memset(&ev, 0, sizeof ev);
    ev.type = SIM_EV_SET_CONDITION;
    ev.condition = (sim_condition)(int)ps->v[0].value;
    if (to_sim(c, scene, e, &ev) == 0)
        c->params_changed = 1;
}

static void on_slice(srv_scene_ctx *c, void *scene, const srv_event *e)
{
    vol_scene *v = scene;
    const vol_slice *q = e->data;
    char err[256];
    int w, h;
    sim_volume_slice_size(v->model, (sim_plane)q->plane, &w, &h);
    uint8_t *img = malloc((size_t)w * (size_t)h + 1);
    if (!img)
        return;
    if (sim_volume_slice(v->state, (sim_plane)q->plane, q->index, q->level_hu, q->width_hu, NULL,
                         img, err, sizeof err) != SIM_OK) {
        free(img);
        c->error(c, e->client, e->seq, "bad slice", err);
        return;
    }
    proto_slice sl = {q->plane,    (uint32_t)q->index, (uint32_t)w, (uint32_t)h,
                      q->level_hu, q->width_hu,        img};
    proto_header hd;
    memset(&hd, 0, sizeof hd);
    hd.frame = c->frame;
    hd.last_seq = e->seq;
    hd.sim_time_s = c->sim_time_s;
    proto_buf b = {0};
    if (proto_encode_slice(&b, &hd, &sl, 1) == PROTO_OK)
        c->reply_frame(c, e->client, b.data, b.len);
    proto_buf_free(&b);
    free(img);
}

static const srv_event_desc k_events[] = {
    {"grab", 0, parse_grab, on_grab},
    {"move", 0, parse_move, on_move},
    {"release", 0, srv_parse_no_payload, on_release},
    {"reset", 0, srv_parse_no_payload, on_reset},
    {"set_params", 0, parse_params, on_params},
    {"set_condition", 0, parse_condition, on_condition},
    {"slice", SRV_EV_QUERY, parse_slice, on_slice},
};
_Static_assert(SRV_ITEM_BYTES(sizeof(vol_point)) == 40 && SRV_ITEM_BYTES(sizeof(vol_grab)) == 48,
               "a move or a grab stays small in the inbox");

/* ------------------------------------------------------------ step and view */

/* The sim cuts a pull short where the tissue would leave the lattice box: tell the
 * driver once each time the hand reaches that edge, so a pull that stops is explained. */
static void notice_grab_clamp(srv_scene_ctx *c, vol_scene *v, const sim_volume_metrics *mt)
{
    if (!mt->grab_clamped) {
        if (mt->grabbed == 0 || mt->passes > 0) /* let go, or moved freely again */
            v->clamp_noticed = 0;
        return;
    }
    if (v->clamp_noticed)
        return;
    v->clamp_noticed = 1;
    sim_volume_params p = sim_volume_get_params(v->state);
    char text[400];
    snprintf(text, sizeof text,
             "{\"type\":\"notice\",\"code\":\"grab_at_boundary\",\"seq\":%u,"
             "\"detail\":\"the pull stops here: further out the tissue would leave the volume's "
             "box (the lattice plus %g voxels), so the grab holds at its edge\"}",
             mt->last_seq, (double)p.boundary_margin);
    if (c->driver)
        c->reply_text(c, c->driver, text);
}

/* The probe's trail (see VOL_PROBE_TRAIL): this frame's sample joins the history, and trail
 * vertex k (1..VOL_PROBE_TRAIL) is the newest sample of frame - k or before, the oldest held
 * where the history starts later (the first frames, or a new grab, which starts it again: a
 * sample of another region was measured from another rest position). Segments join the
 * pull's end and the trail, so the view shows the path the region took. */
static void probe_trail(vol_scene *v, uint64_t frame, int regrab)
{
    if (regrab || (v->probe_nhist && v->probe_hist[0].frame >= frame))
        v->probe_nhist = 0; /* another region, or the frames went back (a replay's seek) */
    memmove(&v->probe_hist[1], &v->probe_hist[0],
            (size_t)(VOL_PROBE_TRAIL < v->probe_nhist ? VOL_PROBE_TRAIL : v->probe_nhist) *
                sizeof v->probe_hist[0]);
    if (v->probe_nhist <= VOL_PROBE_TRAIL)
        v->probe_nhist++;
    vol_probe_sample *now = &v->probe_hist[0];
    now->frame = frame;
    memcpy(now->disp, &v->probe_pos[3], sizeof now->disp);
    now->speed = v->probe_speed[1];
    int h = 0;
    for (int k = 1; k <= VOL_PROBE_TRAIL; k++) {
        uint64_t want = frame >= (uint64_t)k ? frame - (uint64_t)k : 0;
        while (h + 1 < v->probe_nhist && v->probe_hist[h].frame > want)
            h++;
        const vol_probe_sample *at = &v->probe_hist[h];
        int j = VOL_PROBE_TRAIL_AT + k - 1;
        memcpy(&v->probe_pos[j * 3], at->disp, sizeof at->disp);
        v->probe_speed[j] = at->speed;
        v->probe_seg[2 * (j - 1)] = (uint32_t)(k == 1 ? 1 : j - 1);
        v->probe_seg[2 * (j - 1) + 1] = (uint32_t)j;
    }
}

/* The probe as the viewers get it (server/README.md, the volume scene): placed by its
 * transform at the grabbed region's mean rest position (world mm), a segment from there
 * (vertex 0, local origin) to the region's mean position now (vertex 1), each end's scalar
 * the region's mean speed in mm/s (the frame's motion over the frame's period), rings
 * marking the region, and the trail (the region at the frames before this one). Before any
 * grab, at the lattice's centre with a segment of length 0: the object is there from the
 * first frame, and a new grab moves its transform, so neither costs a key. */
#define VOL_PROBE_MAX_SPEED 10000.0f /* mm/s: the scalar's range */
static void probe_view(vol_scene *v, const sim_volume_metrics *mt, uint64_t frame, double period_s)
{
    const sim_volume *vol = sim_volume_model_volume(v->model);
    const float *sp = vol->spacing_mm;
    int n[3] = {vol->nx, vol->ny, vol->nz}, any = mt->probe_elements > 0, regrab = 0;
    double speed = 0.0;
    float ring = 2.5f * fmaxf(sp[0], fmaxf(sp[1], sp[2]));
    for (int b = 0; b < 3; b++) {
        float at = (any ? mt->probe_rest[b] : 0.5f * (float)(n[b] - 1)) * sp[b];
        regrab |= at != v->probe_at[b];
        v->probe_at[b] = at;
        v->probe_box[b] = (float)n[b] * sp[b] + ring;
        v->probe_pos[b] = 0.0f;
        v->probe_pos[3 + b] = any ? mt->probe_disp[b] * sp[b] : 0.0f;
        speed += (double)(mt->probe_vel[b] * sp[b]) * (double)(mt->probe_vel[b] * sp[b]);
    }
    speed = period_s > 0.0 ? sqrt(speed) / period_s : 0.0;
    v->probe_speed[0] = v->probe_speed[1] = (float)fmin(speed, (double)VOL_PROBE_MAX_SPEED);
    v->probe_seg[0] = 0;
    v->probe_seg[1] = 1;
    for (int r = 0; r < 3; r++) /* rings in the planes across x, y and z */
        for (int k = 0; k < VOL_PROBE_RING; k++) {
            int j = 2 + r * VOL_PROBE_RING + k;
            double a = 2.0 * 3.14159265358979 * k / VOL_PROBE_RING;
            float *q = &v->probe_pos[j * 3];
            q[r] = 0.0f;
            q[(r + 1) % 3] = ring * (float)cos(a);
            q[(r + 2) % 3] = ring * (float)sin(a);
            v->probe_speed[j] = 0.0f;
            v->probe_seg[2 * (j - 1)] = (uint32_t)j;
            v->probe_seg[2 * (j - 1) + 1] =
                (uint32_t)(2 + r * VOL_PROBE_RING + (k + 1) % VOL_PROBE_RING);
        }
    probe_trail(v, frame, regrab);
}

/* What a step's metrics tell the session: returns 1 when the view changed. */
static int vol_stepped(srv_scene_ctx *c, vol_scene *v, const sim_volume_metrics *mt, sim_status st,
                       const char *err, double *ms)
{
    *ms = mt->total_ms; /* a failed step took its time too (the scheduler charges it) */
    if (st != SIM_OK) {
        fprintf(stderr, "softcast-server: session %s: step: %s\n", c->session_id, err);
        return 0;
    }
    notice_grab_clamp(c, v, mt);
    /* The step makes frame c->frame + 1 (the worker numbers it after the step). */
    probe_view(v, mt, c->frame + 1, c->frame > 0 ? c->sim_time_s / (double)c->frame : 0.0);
    return !mt->skipped;
}

static int vol_step(srv_scene_ctx *c, void *scene, double *ms)
{
    vol_scene *v = scene;
    sim_volume_metrics mt;
    char err[256];
    sim_volume_set_threads(v->state, c->threads);
    sim_status st = sim_volume_step(v->state, &mt, err, sizeof err);
    return vol_stepped(c, v, &mt, st, err, ms);
}

/* Sessions of one backend stepped together (sim_volume_step_many: on CUDA one batch of
 * launches for them all). A failure is its own session's, as in vol_step. */
enum { VOL_STEP_MANY_MAX = 256 };
static void vol_step_many(srv_scene_ctx *const *c, void *const *scene, int n, int *changed,
                          double *ms)
{
    for (int at = 0; at < n; at += VOL_STEP_MANY_MAX) {
        int m = n - at < VOL_STEP_MANY_MAX ? n - at : VOL_STEP_MANY_MAX;
        sim_volume_state *st[VOL_STEP_MANY_MAX];
        sim_volume_metrics mt[VOL_STEP_MANY_MAX];
        sim_status status[VOL_STEP_MANY_MAX];
        char err[256] = "";
        for (int k = 0; k < m; k++) {
            vol_scene *v = scene[at + k];
            sim_volume_set_threads(v->state, c[at + k]->threads);
            st[k] = v->state;
        }
        /* err names the batch's first failure and its state; a session's log line shows it. */
        (void)sim_volume_step_many(st, m, mt, status, err, sizeof err);
        for (int k = 0; k < m; k++)
            changed[at + k] =
                vol_stepped(c[at + k], scene[at + k], &mt[k], status[k], err, &ms[at + k]);
    }
}

/* Two objects in world millimetres (the identity transform), 16 bits over the volume's
 * box and its margin: the surfaces are bound to the lattice, so their triangles never
 * change and a dent costs its moved vertices: only the vertices of the blocks that moved
 * since the last view are evaluated again, and the encoder is told which (ranges). */
static void vol_view(void *scene, uint64_t frame, const srv_view_budget *budget, srv_view *out)
{
    (void)frame, (void)budget; /* a dent costs its moved vertices: nothing to leave out */
    vol_scene *v = scene;
    for (int k = 0; k < SIM_NSURFACE; k++) {
        const sim_surface *sf = sim_volume_model_surface(v->model, (sim_surface_kind)k);
        sim_volume_surface_update(v->state, (sim_surface_kind)k, v->pos[k], &v->seen[k],
                                  v->ranges[k], &v->nranges[k]);
        proto_object_in *o = &v->obj[k];
        memset(o, 0, sizeof *o);
        o->ranges = v->ranges[k];
        o->nranges = v->nranges[k];
        o->id = (uint16_t)k;
        o->primitive = PROTO_PRIM_TRIANGLES;
        o->qbits = 16;
        memcpy(o->bmin, v->bmin, sizeof o->bmin);
        memcpy(o->bmax, v->bmax, sizeof o->bmax);
        o->nvert = (uint32_t)sf->nvert;
        o->pos = v->pos[k];
        o->nelem = (uint32_t)sf->ntri;
        o->elem = sf->tri;
        o->topo_version = 1;
        o->xf = proto_transform_identity();
    }
    out->obj = v->obj;
    {
        proto_object_in *o = &v->obj[SIM_NSURFACE];
        memset(o, 0, sizeof *o);
        o->id = SIM_NSURFACE;
        o->primitive = PROTO_PRIM_LINES;
        o->qbits = 16;
        for (int b = 0; b < 3; b++) {
            o->bmin[b] = -v->probe_box[b];
            o->bmax[b] = v->probe_box[b];
        }
        o->nvert = VOL_PROBE_NVERT;
        o->pos = v->probe_pos;
        o->scalar = v->probe_speed;
        o->smin = 0.0f;
        o->smax = VOL_PROBE_MAX_SPEED;
        o->nelem = VOL_PROBE_NVERT - 1;
        o->elem = v->probe_seg;
        o->topo_version = 1;
        o->xf = proto_transform_identity();
        memcpy(o->xf.t, v->probe_at, sizeof v->probe_at);
    }
    out->n = SIM_NSURFACE + 1;
}

static char *vol_params_json(const void *scene)
{
    const vol_scene *v = scene;
    sim_volume_params p = sim_volume_get_params(v->state);
    int n;
    const sim_param_desc *t = sim_volume_params_table(&n);
    return srv_params_json(t, n, &p);
}

static void vol_describe(const void *scene, cJSON *j)
{
    const vol_scene *v = scene;
    const sim_volume *vol = sim_volume_model_volume(v->model);
    int dims[3] = {vol->nx, vol->ny, vol->nz};
    cJSON_AddItemToObject(j, "dims", cJSON_CreateIntArray(dims, 3));
    double sp[3] = {vol->spacing_mm[0], vol->spacing_mm[1], vol->spacing_mm[2]};
    cJSON_AddItemToObject(j, "spacing", cJSON_CreateDoubleArray(sp, 3));
    cJSON_AddStringToObject(j, "hu_preset", v->preset);
    /* What the data is and what was done to it; never anything about the patient (the
     * readers put none in info). */
    const sim_volume_info *in = &v->info;
    cJSON *d = cJSON_AddObjectToObject(j, "dataset");
    cJSON_AddStringToObject(d, "name", in->name);
    cJSON_AddStringToObject(d, "format", in->format);
    cJSON_AddStringToObject(d, "source", v->source);
    cJSON_AddItemToObject(d, "stored_dims", cJSON_CreateIntArray(in->stored_dims, 3));
    cJSON_AddNumberToObject(d, "fit_factor", in->fit_factor);
    double hu[2] = {in->hu_min, in->hu_max};
    cJSON_AddItemToObject(d, "hu_range", cJSON_CreateDoubleArray(hu, 2));
    if (vol->orientation[0])
        cJSON_AddStringToObject(d, "orientation", vol->orientation);
    if (in->warning[0])
        cJSON_AddStringToObject(d, "warning", in->warning);
    /* "RAS" when the lattice's x, y, z are known to run toward the patient's right,
     * anterior and superior (a phantom, or a file that said how it was stored), so slices
     * can carry orientation letters; "" for a file kept as stored. file_orientation: what
     * the file said ("LPS", ...), "" when nothing. */
    int known = !strcmp(in->format, "phantom") || vol->orientation[0] != 0;
    cJSON_AddStringToObject(j, "orientation", known ? "RAS" : "");
    cJSON_AddStringToObject(j, "file_orientation", vol->orientation);
}

/* What the session holds: its state, and its model when it has its own (a phantom of other
 * dims, a user's file); the shared default model is the server's, not the session's. */
static size_t vol_bytes(const void *scene)
{
    const vol_scene *v = scene;
    size_t b = sizeof *v + sim_volume_state_bytes(v->state);
    for (int k = 0; k < SIM_NSURFACE; k++)
        b += ((size_t)sim_volume_model_surface(v->model, (sim_surface_kind)k)->nvert * 3 + 3) *
             sizeof(float);
    return b + (v->own_model ? sim_volume_model_bytes(v->model) : 0);
}

/* Kept across restarts (durable.c): the sim's state, and whether the driver was told that
 * its pull stops at the box (the probe and the surfaces follow from the state at the next
 * step). */
/* The scene's part of a snapshot (a restart, a recording's start): VSRV version 2, then the
 * sim's state. Besides the sim, the probe's trail: a replay or a restarted session shows the
 * frames after it with the trail the original showed. Version 1 (no trail) is still read:
 * its trail starts again at the next step. */
#define VOL_SNAPSHOT_VERSION 2
static int vol_save(void *scene, sc_blob *out, char *err, size_t err_sz)
{
    vol_scene *v = scene;
    sc_blob_tag(out, "VSRV", VOL_SNAPSHOT_VERSION);
    SC_PUT(out, v->clamp_noticed);
    SC_PUT(out, v->probe_at);
    int32_t nhist = v->probe_nhist;
    SC_PUT(out, nhist);
    for (int k = 0; k < nhist; k++) {
        SC_PUT(out, v->probe_hist[k].frame);
        SC_PUT(out, v->probe_hist[k].disp);
        SC_PUT(out, v->probe_hist[k].speed);
    }
    return sim_volume_state_save(v->state, out, err, err_sz) == SIM_OK ? 0 : -1;
}

static int vol_restore(void *scene, const void *data, size_t n, char *err, size_t err_sz)
{
    vol_scene *v = scene;
    sc_reader r = sc_reader_of(data, n);
    int32_t nhist = 0;
    uint32_t version = sc_reader_tag_versions(&r, "VSRV", 1, VOL_SNAPSHOT_VERSION);
    SC_GET(&r, v->clamp_noticed);
    if (version >= 2) {
        SC_GET(&r, v->probe_at);
        SC_GET(&r, nhist);
        if (!r.failed && (nhist < 0 || nhist > VOL_PROBE_TRAIL + 1)) {
            snprintf(r.why, sizeof r.why, "a probe trail of %d samples", (int)nhist);
            r.failed = 1;
        }
        for (int k = 0; k < nhist && !r.failed; k++) {
            SC_GET(&r, v->probe_hist[k].frame);
            SC_GET(&r, v->probe_hist[k].disp);
            SC_GET(&r, v->probe_hist[k].speed);
        }
    }
    v->probe_nhist = r.failed ? 0 : nhist;
    if (r.failed) {
        snprintf(err, err_sz, "%s", r.why);
        return -1;
    }
    if (sim_volume_state_restore(v->state, r.p + r.at, r.n - r.at, err, err_sz) == SIM_OK)
        return 0;
    if (!strcmp(v->source, "default")) { /* built on the server's default volume, as it is now */
        size_t at = strlen(err);
        snprintf(err + at, err_sz - at,
                 " (the session was made on the server's default volume, which --volume, "
                 "--dims and --fit-elements set: start the server with those it had)");
    }
    return -1;
}

static uint64_t vol_hash(void *scene)
{
    return sim_volume_state_hash(((vol_scene *)scene)->state);
}

const srv_scene_i srv_scene_volume = {
    .name = "volume",
    .bytes = vol_bytes,
    .save = vol_save,
    .restore = vol_restore,
    .hash = vol_hash,
    .usage =
        "  --volume FILE|DIR|ZIP         the default scene's CT: NIfTI (.nii, .nii.gz), or a "
        "DICOM\n"
        "                                series (a folder, a .zip of one, or one of its files)\n"
        "                                (default: phantom)\n"
        "  --series UID                  the DICOM series to read from a folder of several\n"
        "                                (default: the one with the most slices)\n"
        "  --dims WxHxD                  phantom size of the default scene (default 128x128x75)\n"
        "  --max-elements N              largest volume a session may create (default 4194304)\n"
        "  --max-passes N                most propagation passes a frame (default 1024)\n"
        "  --max-relax-iterations N      most relaxation iterations a frame (default 8)\n"
        "  --max-wave N                  most elements a frame's wave moves (default 50000):\n"
        "                                a frame's work bounded whatever the drag\n"
        "  --fit-elements N              a --volume over N elements is block-averaged to fit\n"
        "                                (default: --max-elements; 0: refuse it instead)\n"
        "  --volume-labels FILE.nii      a segmentation of the default volume (its dims) ...\n"
        "  --volume-label-classes SPEC   ... whose LABEL=CLASS,... (air, skin_fat, muscle_organ,\n"
        "                                bone) class those labels whatever their HU\n"
        "  --hu-preset default|contrast  class thresholds: contrast puts bone at 700 HU, above\n"
        "                                contrast-filled vessels (a session's \"preset\" too)\n",
    .events = k_events,
    .nevents = (int)(sizeof k_events / sizeof k_events[0]),
    .option = vol_option,
    .start = vol_start,
    .stop = vol_stop,
    .create = vol_create,
    .destroy = vol_destroy,
    .step = vol_step,
    .step_many = vol_step_many,
    .view = vol_view,
    .params_json = vol_params_json,
    .params_table = sim_volume_params_table,
    .describe = vol_describe,
    .check_file = vol_check_file,
    .create_file = vol_create_file,
    .origin_default = vol_origin_default,
    .create_default = vol_create_default,
};
