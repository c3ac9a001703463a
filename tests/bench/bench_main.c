/* softcast-bench: benches of the simulation, one JSON object per line.
 *
 *   softcast-bench volume [--dims WxHxD | --volume FILE|DIR|ZIP [--series UID]
 *                          | --volume FILE --raw WxHxD --spacing X,Y,Z]
 *                         [--downsample N] [--frames N] [--threads N] [--backend cpu|cuda]
 *                         [--condition A|B|C] [--scenario pull|drag|release] [--pull L]
 *                         [--uniform HU]   a homogeneous block instead of the phantom
 *   softcast-bench parity [--dims WxHxD] [--frames N]   CUDA against CPU, same script
 *   softcast-bench phantom --out CT.nii.gz [--labels L.nii.gz] [--dims WxHxD] [--keep L,...]
 *                          the default phantom and its labels as files (bench_phantom.c)
 *
 * Needs only the sim library: it runs on the GPU machines too. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/cloth/cloth.h"
#include "sim/core/sc_base.h"
#include "sim/volume/volume.h"
#include "tests/bench/bench_growth.h"
#include "tests/bench/bench_cloth.h"
#include "tests/bench/bench_phantom.h"
#include "tests/bench/bench_softbody.h"
#include "tests/scenes/volume_scenes.h"

typedef struct bench_opts {
    int nx, ny, nz;
    const char *volume, *raw_dims, *series; /* --series: a DICOM series' UID */
    float spacing[3];
    int downsample;
    int frames, threads;
    sim_backend_kind backend;
    sim_condition condition;
    const char *scenario;
    float pull;
    long long fit_elements; /* --volume: block-average to this budget (0: as stored) */
    int air_margin;         /* --air-margin: elements of air where tissue meets the edge */
    int crop[6];            /* --crop: x0,y0,z0,x1,y1,z1 of the stored lattice (x1 > 0: on) */
    int uniform;            /* 1: a homogeneous soft-tissue block instead of the phantom */
    float uniform_hu;
    int sessions; /* --sessions N: N states of one model stepped together (the drag script) */
    int check;    /* --check: with --sessions, each also alone, and the states must be equal */
} bench_opts;

static void usage(void)
{
    fprintf(
        stderr,
        "usage: softcast-bench volume [--dims WxHxD | --volume FILE|DIR|ZIP [--raw WxHxD --spacing "
        "X,Y,Z]]\n"
        "                             [--series UID] [--fit-elements N] [--air-margin N]\n"
        "                             [--crop X0,Y0,Z0,X1,Y1,Z1]\n"
        "                             [--downsample N] [--frames N] [--threads N]\n"
        "                             [--sessions N [--check]]   (N states dragged together: "
        "steps/s;\n"
        "                             --check: and alone, the states compared bit for bit)\n"
        "                             [--backend cpu|cuda] [--condition A|B|C]\n"
        "                             [--scenario pull|drag|release] [--pull L] [--uniform HU]\n"
        "       softcast-bench parity [--dims WxHxD] [--frames N]\n"
        "       softcast-bench cloth --lod-scenarios | --dims WxH ... | --characters N ...\n"
        "       softcast-bench softbody --model surface|hybrid [--particles N] ... | --parity\n"
        "       softcast-bench phantom --out CT.nii.gz [--labels L.nii.gz] [--dims WxHxD] ...\n");
    exit(2);
}

static int parse_dims(const char *s, int *x, int *y, int *z)
{
    char tail;
    return sscanf(s, "%dx%dx%d%c", x, y, z, &tail) == 3 && *x > 0 && *y > 0 && *z > 0;
}

static void parse_args(int argc, char **argv, bench_opts *o)
{
    memset(o, 0, sizeof *o);
    o->nx = 128;
    o->ny = 128;
    o->nz = 75;
    o->downsample = 1;
    o->frames = 120;
    o->threads = 0;
    o->backend = SIM_BACKEND_CPU;
    o->condition = SIM_CONDITION_C;
    o->scenario = "pull";
    o->pull = 8.0f;
    o->spacing[0] = o->spacing[1] = o->spacing[2] = 1.0f;
    o->fit_elements = (long long)sim_default_volume_load_opts().fit_elements;
    o->air_margin = sim_default_volume_load_opts().air_margin;
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--check")) { /* the one flag without a value */
            o->check = 1;
            continue;
        }
        if (!v)
            usage();
        i++;
        if (!strcmp(a, "--dims")) {
            if (!parse_dims(v, &o->nx, &o->ny, &o->nz))
                usage();
        } else if (!strcmp(a, "--volume")) {
            o->volume = v;
        } else if (!strcmp(a, "--series")) {
            o->series = v;
        } else if (!strcmp(a, "--raw")) {
            o->raw_dims = v;
        } else if (!strcmp(a, "--spacing")) {
            if (sscanf(v, "%f,%f,%f", &o->spacing[0], &o->spacing[1], &o->spacing[2]) != 3)
                usage();
        } else if (!strcmp(a, "--fit-elements")) {
            o->fit_elements = atoll(v);
        } else if (!strcmp(a, "--air-margin")) {
            o->air_margin = atoi(v);
        } else if (!strcmp(a, "--crop")) {
            int *c = o->crop;
            if (sscanf(v, "%d,%d,%d,%d,%d,%d", &c[0], &c[1], &c[2], &c[3], &c[4], &c[5]) != 6)
                usage();
        } else if (!strcmp(a, "--downsample")) {
            o->downsample = atoi(v);
        } else if (!strcmp(a, "--frames")) {
            o->frames = atoi(v);
        } else if (!strcmp(a, "--threads")) {
            o->threads = atoi(v);
        } else if (!strcmp(a, "--backend")) {
            int k = sim_backend_kind_parse(v);
            if (k < 0)
                usage();
            o->backend = (sim_backend_kind)k;
        } else if (!strcmp(a, "--condition")) {
            if (strlen(v) != 1 || v[0] < 'A' || v[0] > 'C')
                usage();
            o->condition = (sim_condition)(v[0] - 'A');
        } else if (!strcmp(a, "--scenario")) {
            if (strcmp(v, "pull") && strcmp(v, "drag") && strcmp(v, "release"))
                usage();
            o->scenario = v;
        } else if (!strcmp(a, "--pull")) {
            o->pull = (float)atof(v);
        } else if (!strcmp(a, "--sessions")) {
            o->sessions = atoi(v);
            if (o->sessions < 1 || o->sessions > 1024)
                usage();
        } else if (!strcmp(a, "--uniform")) {
            o->uniform = 1;
            o->uniform_hu = (float)atof(v);
        } else {
            usage();
        }
    }
    if (o->frames < 1 || o->downsample < 1 || (o->check && !o->sessions))
        usage();
}

/* What loading a --volume did (printed with every result), and how long reading it took. */
static sim_volume_info g_info;
static double g_read_ms;

/* A user's file as the server reads it (sim_volume_load_file's steps), cropped first when
 * asked; a raw file too. */
static sim_status load_file_volume(const bench_opts *o, sim_volume *v, char *err, size_t err_sz)
{
    sim_volume_load_opts read_only = sim_default_volume_load_opts(), lo = read_only;
    read_only.fit_elements = 0;
    read_only.air_margin = 0;
    read_only.keep_all = 1;
    read_only.series_uid = o->series;
    lo.fit_elements = (size_t)(o->fit_elements > 0 ? o->fit_elements : 0);
    lo.air_margin = o->air_margin;
    sim_status st;
    if (o->raw_dims) {
        int x, y, z;
        if (!parse_dims(o->raw_dims, &x, &y, &z))
            usage();
        st = sim_volume_load_raw_i16(v, o->volume, x, y, z, o->spacing, NULL, err, err_sz);
    } else {
        double t0 = sc_now_ms();
        st = sim_volume_load_file(v, o->volume, &read_only, &g_info, err, err_sz);
        g_read_ms = sc_now_ms() - t0;
        if (st == SIM_OK && !strcmp(g_info.format, "dicom"))
            fprintf(stderr,
                    "softcast-bench: DICOM series %s (%s, %d slices of %dx%d; %d series found; "
                    "from %s)\n",
                    g_info.series_uid, g_info.modality, g_info.slice_count, v->nx, v->ny,
                    g_info.series_count, g_info.source);
    }
    if (st == SIM_OK && o->crop[3] > 0)
        st = sim_volume_crop(v, o->crop, err, err_sz);
    if (st == SIM_OK)
        st = sim_volume_prepare(v, &lo, &g_info, err, err_sz);
    if (st != SIM_OK)
        sim_volume_free(v);
    return st;
}

static int load_volume(const bench_opts *o, sim_volume *v)
{
    char err[512];
    sim_status st;
    g_info.fit_factor = 1;
    if (o->uniform) {
        st = vs_uniform_volume(v, o->nx, o->ny, o->nz, o->uniform_hu);
        snprintf(err, sizeof err, "uniform volume: out of memory");
    } else if (!o->volume) {
        st = sim_volume_phantom(v, o->nx, o->ny, o->nz, err, sizeof err);
    } else {
        st = load_file_volume(o, v, err, sizeof err);
    }
    if (st == SIM_OK && o->downsample > 1) {
        sim_volume d;
        st = sim_volume_downsample(&d, v, o->downsample, o->downsample, o->downsample, err,
                                   sizeof err);
        sim_volume_free(v);
        *v = d;
    }
    if (st != SIM_OK) {
        fprintf(stderr, "softcast-bench: %s\n", err);
        return 0;
    }
    if (g_info.warning[0])
        fprintf(stderr, "softcast-bench: warning: %s\n", g_info.warning);
    return 1;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void print_common(const bench_opts *o, const vs_scene *sc, const sim_volume *v)
{
    printf("{\"scene\":\"volume\",\"backend\":\"%s\",\"threads\":%d,\"dims\":\"%dx%dx%d\","
           "\"elements\":%lld,\"condition\":\"%c\",\"scenario\":\"%s\",\"frames\":%d",
           sim_backend_name(sc->backend), sim_backend_threads(sc->backend), v->nx, v->ny, v->nz,
           (long long)v->nx * v->ny * v->nz, 'A' + (int)o->condition, o->scenario, o->frames);
    printf(",\"spacing\":[%.3f,%.3f,%.3f],\"fit_factor\":%d", (double)v->spacing_mm[0],
           (double)v->spacing_mm[1], (double)v->spacing_mm[2], g_info.fit_factor);
    if (o->volume)
        printf(",\"format\":\"%s\",\"read_ms\":%.1f", g_info.format, g_read_ms);
}

/* Between the frames of a pull run (untimed): nothing (back to back); the whole state's band
 * violation, ChainMail's invariant, which streams the whole volume through the caches; or a
 * read of PULL_EVICT_BYTES of other memory, which empties the caches at every size alike. */
typedef enum { PULL_BACK_TO_BACK, PULL_CHECKED, PULL_EVICTED } pull_between;
#define PULL_EVICT_BYTES ((size_t)64 << 20) /* twice this machine's 32 MiB L3 */

static volatile unsigned char g_evict_sink;

/* Returns 0 when the buffer cannot be had: a run that emptied nothing must not report as one
 * that did. */
static int evict_caches(void)
{
    static unsigned char *buf;
    if (!buf) {
        buf = malloc(PULL_EVICT_BYTES);
        if (!buf) {
            fprintf(stderr, "softcast-bench: no memory for the %zu MiB that empty the caches\n",
                    PULL_EVICT_BYTES >> 20);
            return 0;
        }
        memset(buf, 1, PULL_EVICT_BYTES);
    }
    unsigned char acc = 0;
    for (size_t k = 0; k < PULL_EVICT_BYTES; k += 64)
        acc ^= buf[k];
    g_evict_sink = acc;
    return 1;
}

/* One run of the pull scenario on sc: per-frame times into ms (sorted on return) and the
 * means, with `between` done between frames. */
typedef struct pull_run {
    double med, p90, prop, relax, vel, moved, evals;
    double grab_ms; /* the first frame: the grab (its search of the volume) and the first move */
    float viol, viol_after;
    int clamped;
    uint64_t hash;
} pull_run;

static int run_pull(const bench_opts *o, vs_scene *sc, const sim_volume *v, pull_between between,
                    pull_run *r)
{
    char err[512];
    sim_volume_params p = sim_volume_get_params(sc->state);
    float g[3], t[3];
    vs_belly_point(v, p.hu_threshold[0], g);
    memcpy(t, g, sizeof t);
    vs_push(sc->state, SIM_EV_GRAB, g, 2.5f);
    double *ms = calloc((size_t)o->frames, sizeof(double));
    if (!ms)
        return 0;
    memset(r, 0, sizeof *r);
    int half = o->frames / 2 > 0 ? o->frames / 2 : 1;
    for (int f = 0; f < o->frames; f++) {
        float phase =
            f < half ? (float)(f + 1) / (float)half : (float)(o->frames - f - 1) / (float)half;
        t[1] = g[1] + o->pull * phase;
        vs_push(sc->state, SIM_EV_MOVE, t, 0);
        if (between == PULL_EVICTED && !evict_caches())
            return 0;
        sim_volume_metrics mt;
        if (sim_volume_step(sc->state, &mt, err, sizeof err) != SIM_OK) {
            fprintf(stderr, "softcast-bench: step: %s\n", err);
            free(ms);
            return 0;
        }
        ms[f] = mt.total_ms;
        r->prop += mt.propagate_ms / o->frames;
        r->relax += mt.relax_ms / o->frames;
        r->vel += mt.velocity_ms / o->frames;
        r->moved += (double)mt.moved_elements / o->frames;
        r->evals += (double)mt.relax_evaluations / o->frames;
        r->viol = fmaxf(r->viol, mt.max_violation);
        /* Over the whole state after the frame (not timed): ChainMail's invariant. */
        if (between == PULL_CHECKED)
            r->viol_after = fmaxf(r->viol_after, sim_volume_max_violation(sc->state));
        r->clamped += mt.grab_clamped;
    }
    r->grab_ms = ms[0];
    qsort(ms, (size_t)o->frames, sizeof(double), cmp_double);
    r->med = ms[o->frames / 2];
    r->p90 = ms[(o->frames * 9) / 10];
    r->hash = sim_volume_state_hash(sc->state);
    free(ms);
    return 1;
}

/* run_pull on a fresh state of the same volume and options. */
static int run_pull_fresh(const bench_opts *o, const sim_volume *v, pull_between between,
                          pull_run *r)
{
    char err[512];
    vs_scene again;
    if (vs_scene_create(&again, v, o->backend, o->threads, err, sizeof err) != SIM_OK) {
        fprintf(stderr, "softcast-bench: %s\n", err);
        return 0;
    }
    sim_volume_params p = sim_volume_get_params(again.state);
    p.condition = o->condition;
    vs_set_params(again.state, &p);
    int ok = run_pull(o, &again, v, between, r);
    vs_scene_destroy(&again);
    return ok;
}

/* A continuous drag: out to `pull` lattice units along +y and back, in `frames` frames, run
 * three times on fresh states. The first run checks the whole state after every frame, as
 * this bench always has: ms_per_frame_median, and the means. That check leaves the caches
 * full of the volume, which holds the frame's data at small sizes (32^3: 0.4 MB of
 * positions) and not at large ones (128^3: 25 MB), so across sizes it compares warm frames
 * with cold ones. The second times frames back to back (what a frame costs when its
 * session's work is all that runs): ms_per_frame_median_back_to_back. The third empties the
 * caches before every frame, at every size alike (much as a server stepping many sessions
 * does): ms_per_frame_median_evicted. All must end in the same state. The first frame of
 * the first and the third run (the grab's, caches warm and emptied) is printed on its own:
 * ms_grab_frame, ms_grab_frame_evicted. */
static int bench_pull(const bench_opts *o, vs_scene *sc, const sim_volume *v)
{
    pull_run checked, alone, evicted;
    if (!run_pull(o, sc, v, PULL_CHECKED, &checked) ||
        !run_pull_fresh(o, v, PULL_BACK_TO_BACK, &alone) ||
        !run_pull_fresh(o, v, PULL_EVICTED, &evicted))
        return 0;
    if (checked.hash != alone.hash || checked.hash != evicted.hash) {
        fprintf(stderr, "softcast-bench: the three runs of the pull ended in different states\n");
        return 0;
    }
    print_common(o, sc, v);
    printf(",\"ms_per_frame_median\":%.3f,\"ms_per_frame_p90\":%.3f,\"frames_per_s\":%.1f,"
           "\"ms_per_frame_median_back_to_back\":%.3f,\"ms_per_frame_p90_back_to_back\":%.3f,"
           "\"ms_per_frame_median_evicted\":%.3f,\"ms_per_frame_p90_evicted\":%.3f,"
           "\"propagate_ms\":%.3f,\"relax_ms\":%.3f,\"velocity_ms\":%.3f,"
           "\"moved_elements\":%.0f,\"ns_per_moved_element\":%.1f,\"relax_evaluations\":%.0f,"
           "\"max_violation\":%.6f,"
           "\"max_violation_after_frame\":%.6f,\"grab_clamped_frames\":%d,\"pull\":%.2f,"
           "\"ms_grab_frame\":%.3f,\"ms_grab_frame_evicted\":%.3f}\n",
           checked.med, checked.p90, checked.med > 0 ? 1000.0 / checked.med : 0.0, alone.med,
           alone.p90, evicted.med, evicted.p90, checked.prop, checked.relax, checked.vel,
           checked.moved, checked.moved > 0 ? checked.prop * 1e6 / checked.moved : 0.0,
           checked.evals, (double)fmaxf(fmaxf(checked.viol, alone.viol), evicted.viol),
           (double)checked.viol_after, checked.clamped, (double)o->pull, checked.grab_ms,
           evicted.grab_ms);
    return 1;
}

/* softcast-load's loop, one move per two frames (30 Hz input, 60 Hz steps): grab the
 * belly, drag it 4 units in and out along y on a sine for 75 moves, release, rest 15,
 * again. A server's input-to-frame latency follows the slowest of these steps. */
static int bench_drag(const bench_opts *o, vs_scene *sc, const sim_volume *v)
{
    char err[512];
    sim_volume_params p = sim_volume_get_params(sc->state);
    float g[3], t[3];
    vs_belly_point(v, p.hu_threshold[0], g);
    double *ms = calloc((size_t)o->frames, sizeof(double));
    double sum = 0, prop = 0, relax = 0, vel = 0, worst = 0, worst_prop = 0, worst_relax = 0;
    double moved = 0, evals = 0;
    if (!ms)
        return 0;
    for (int f = 0; f < o->frames; f++) {
        int phase = (f / 2) % 90;
        if (f % 2 == 0) {
            memcpy(t, g, sizeof t);
            t[1] += 4.0f * sinf((float)phase / 12.0f);
            if (phase == 0)
                vs_push(sc->state, SIM_EV_GRAB, g, 2.5f);
            else if (phase < 75)
                vs_push(sc->state, SIM_EV_MOVE, t, 0);
            else if (phase == 75)
                vs_push(sc->state, SIM_EV_RELEASE, NULL, 0);
        }
        sim_volume_metrics mt;
        if (sim_volume_step(sc->state, &mt, err, sizeof err) != SIM_OK) {
            fprintf(stderr, "softcast-bench: step: %s\n", err);
            free(ms);
            return 0;
        }
        ms[f] = mt.total_ms;
        sum += mt.total_ms;
        prop += mt.propagate_ms;
        relax += mt.relax_ms;
        vel += mt.velocity_ms;
        moved += (double)mt.moved_elements;
        evals += (double)mt.relax_evaluations;
        if (mt.total_ms > worst) {
            worst = mt.total_ms;
            worst_prop = mt.propagate_ms;
            worst_relax = mt.relax_ms;
        }
    }
    qsort(ms, (size_t)o->frames, sizeof(double), cmp_double);
    print_common(o, sc, v);
    printf(",\"ms_per_frame_mean\":%.3f,\"ms_per_frame_median\":%.3f,"
           "\"ms_per_frame_p99\":%.3f,\"ms_per_frame_max\":%.3f,\"propagate_ms\":%.3f,"
           "\"relax_ms\":%.3f,\"velocity_ms\":%.3f,\"worst_propagate_ms\":%.3f,"
           "\"worst_relax_ms\":%.3f,\"moved_elements\":%.0f,\"relax_evaluations\":%.0f}\n",
           sum / o->frames, ms[o->frames / 2], ms[(o->frames * 99) / 100], ms[o->frames - 1],
           prop / o->frames, relax / o->frames, vel / o->frames, worst_prop, worst_relax,
           moved / o->frames, evals / o->frames);
    free(ms);
    return 1;
}

/* Session k's input before frame f: softcast-load's loop (bench_drag), the sessions' phases
 * 7 frames apart. */
static void session_script(sim_volume_state *st, int k, int f, const float g[3])
{
    int ff = f + 7 * k, phase = (ff / 2) % 90;
    if (ff % 2)
        return;
    float t[3] = {g[0], g[1] + 4.0f * sinf((float)phase / 12.0f), g[2]};
    if (phase == 0)
        vs_push(st, SIM_EV_GRAB, g, 2.5f);
    else if (phase < 75)
        vs_push(st, SIM_EV_MOVE, t, 0);
    else if (phase == 75)
        vs_push(st, SIM_EV_RELEASE, NULL, 0);
}

/* n states of sc's model (session k's parameters: p, or with vary a schedule of its own). */
static sim_volume_state **make_sessions(const vs_scene *sc, int n, int vary)
{
    char err[512];
    sim_volume_state **st = calloc((size_t)n, sizeof *st);
    sim_volume_params p0 = sim_volume_get_params(sc->state);
    for (int k = 0; st && k < n; k++) {
        sim_volume_params p = p0;
        if (vary) { /* per-state schedules: the batch must keep each one's own */
            p.relax_iterations =
                p0.relax_iterations + k % 3 - 1 > 0 ? p0.relax_iterations + k % 3 - 1 : 1;
            if (k % 4 == 3)
                p.max_passes = 5; /* stops inside a pass batch */
            if (k % 5 == 4)
                p.max_wave = 50; /* the frame's wave budget */
        }
        if (sim_volume_state_create(&st[k], sc->model, sc->backend, err, sizeof err) != SIM_OK ||
            vs_set_params(st[k], &p) != SIM_OK) {
            fprintf(stderr, "softcast-bench: session %d: %s\n", k, err);
            for (int j = 0; j <= k; j++)
                if (st[j])
                    sim_volume_state_destroy(st[j]);
            free(st);
            return NULL;
        }
    }
    return st;
}

static void free_sessions(sim_volume_state **st, int n)
{
    for (int k = 0; st && k < n; k++)
        sim_volume_state_destroy(st[k]);
    free(st);
}

/* frames frames of every session's script: all stepped together (sim_volume_step_many: one
 * batch of launches on CUDA) or each alone (sim_volume_step). */
static int run_sessions(sim_volume_state **st, int n, int frames, int together, const float g[3])
{
    char err[512];
    for (int f = 0; f < frames; f++) {
        for (int k = 0; k < n; k++)
            session_script(st[k], k, f, g);
        if (together) {
            if (sim_volume_step_many(st, n, NULL, NULL, err, sizeof err) != SIM_OK) {
                fprintf(stderr, "softcast-bench: step: %s\n", err);
                return 0;
            }
            continue;
        }
        for (int k = 0; k < n; k++)
            if (sim_volume_step(st[k], NULL, err, sizeof err) != SIM_OK) {
                fprintf(stderr, "softcast-bench: session %d: step: %s\n", k, err);
                return 0;
            }
    }
    return 1;
}

/* Many sessions on one backend: N states of one model (the server's sessions of one volume),
 * each dragged by softcast-load's loop, all stepped together each frame for --frames frames
 * (on CUDA one batch of launches a frame). Steps per second over every session: what one
 * backend keeps up. A step of a session that has settled (after a release) counts too, and
 * costs almost nothing: the figure is the drag's mix, not a moving step's cost. With
 * --check, every session also runs alone with the same script, each with a schedule of its
 * own (iterations, pass cap, wave budget), and the two runs' state hashes must be equal. */
static int bench_sessions(const bench_opts *o, vs_scene *sc, const sim_volume *v)
{
    int n = o->sessions;
    sim_volume_params p = sim_volume_get_params(sc->state);
    float g[3];
    vs_belly_point(v, p.hu_threshold[0], g);
    sim_volume_state **st = make_sessions(sc, n, o->check);
    if (!st)
        return 0;
    double t0 = sc_now_ms();
    int ok = run_sessions(st, n, o->frames, 1, g);
    double ms = sc_now_ms() - t0, alone_ms = 0;
    int equal = 0;
    if (ok && o->check) {
        sim_volume_state **ref = make_sessions(sc, n, 1);
        double t1 = sc_now_ms();
        ok = ref && run_sessions(ref, n, o->frames, 0, g);
        alone_ms = sc_now_ms() - t1;
        for (int k = 0; ok && k < n; k++) {
            uint64_t a = sim_volume_state_hash(st[k]), b = sim_volume_state_hash(ref[k]);
            equal += a == b;
            if (a != b)
                fprintf(stderr, "softcast-bench: session %d: together %016llx, alone %016llx\n", k,
                        (unsigned long long)a, (unsigned long long)b);
        }
        free_sessions(ref, n);
    }
    free_sessions(st, n);
    if (!ok)
        return 0;
    print_common(o, sc, v);
    printf(",\"sessions\":%d,\"steps\":%lld,\"steps_per_s\":%.1f,\"ms_per_step\":%.3f", n,
           (long long)o->frames * n, 1000.0 * o->frames * n / ms, ms / ((double)o->frames * n));
    if (o->check)
        printf(",\"alone_steps_per_s\":%.1f,\"sessions_equal_alone\":%d,\"check\":\"%s\"",
               1000.0 * o->frames * n / alone_ms, equal, equal == n ? "ok" : "FAILED");
    printf("}\n");
    return !o->check || equal == n;
}

static int bench_release(const bench_opts *o, vs_scene *sc, const sim_volume *v)
{
    char err[512];
    vs_release_opts ro = vs_default_release_opts();
    ro.pull = o->pull;
    ro.max_after = o->frames;
    vs_release_result r;
    if (vs_run_release(sc->state, v, &ro, &r, err, sizeof err) != SIM_OK) {
        fprintf(stderr, "softcast-bench: release: %s\n", err);
        return 0;
    }
    print_common(o, sc, v);
    printf(",\"frames_run\":%d,\"ms_per_frame_median\":%.3f,\"ms_per_frame_p90\":%.3f,"
           "\"ms_per_frame_mean\":%.3f,\"propagate_ms\":%.3f,\"relax_ms\":%.3f,"
           "\"velocity_ms\":%.3f,\"moved_elements\":%.0f,\"max_violation\":%.6f,"
           "\"max_violation_after_frame\":%.6f,\"settle_frames\":%d,\"sign_changes\":%d,\"peak_"
           "residual\":%.4f,"
           "\"probe_release_disp\":%.3f,\"probe_final_disp\":%.3f,\"max_bone_speed\":%g,"
           "\"mean_speed_by_class\":{",
           r.frames, r.ms_median, r.ms_p90, r.ms_mean, r.propagate_ms, r.relax_ms, r.velocity_ms,
           r.moved_elements, (double)r.max_violation, (double)r.max_violation_after_frame,
           r.settle_frames, r.sign_changes, (double)r.peak_residual, (double)r.probe_release_y,
           (double)r.probe_final_y, (double)r.max_bone_speed);
    for (int c = 0; c < SIM_NTISSUE; c++)
        printf("%s\"%s\":%.5f", c ? "," : "", sim_tissue_name(c), (double)r.mean_speed[c]);
    printf("}}\n");
    return 1;
}

static int run_volume(const bench_opts *o)
{
    sim_volume v;
    if (!load_volume(o, &v))
        return 1;
    vs_scene sc;
    char err[512];
    if (vs_scene_create(&sc, &v, o->backend, o->threads, err, sizeof err) != SIM_OK) {
        fprintf(stderr, "softcast-bench: %s\n", err);
        sim_volume_free(&v);
        return 1;
    }
    sim_volume_params p = sim_volume_get_params(sc.state);
    p.condition = o->condition;
    vs_set_params(sc.state, &p);
    int ok = o->sessions                    ? bench_sessions(o, &sc, &v)
             : !strcmp(o->scenario, "pull") ? bench_pull(o, &sc, &v)
             : !strcmp(o->scenario, "drag") ? bench_drag(o, &sc, &v)
                                            : bench_release(o, &sc, &v);
    vs_scene_destroy(&sc);
    sim_volume_free(&v);
    return ok ? 0 : 1;
}

/* The same scripted pull and release on CPU (1 thread) and CUDA; prints the largest
 * position and velocity differences after the frames. Both run the same kernels without
 * FMA contraction, so the stated tolerance (lattice units) is tight. */
#define PARITY_ATOL 1e-4
/* One frame's events of the restore check: a grab at the belly at frame 2, pulled outward a
 * little each frame to frame 20, released at 21 (as tests/sim/test_volume_snapshot.c). */
static void restore_script(sim_volume_state *s, const sim_volume *v, int f)
{
    float at[3];
    vs_belly_point(v, sim_default_volume_params().hu_threshold[0], at);
    if (f == 2)
        vs_push(s, SIM_EV_GRAB, at, 2.5f);
    if (f > 2 && f <= 20) {
        at[1] += 0.35f * (float)(f - 2);
        vs_push(s, SIM_EV_MOVE, at, 0);
    }
    if (f == 21)
        vs_push(s, SIM_EV_RELEASE, NULL, 0);
}

/* The snapshot restore on CUDA (the server's durability and recordings on a GPU): a CUDA state
 * saved mid-drag is restored into a fresh CUDA state; both go on with the same script and must
 * agree bit for bit, frame by frame. Returns 1 when they do not. */
static int restore_check(const sim_volume *v, int frames)
{
    vs_scene a, b;
    char err[512] = "";
    if (vs_scene_create(&a, v, SIM_BACKEND_CUDA, 1, err, sizeof err) != SIM_OK ||
        vs_scene_create(&b, v, SIM_BACKEND_CUDA, 1, err, sizeof err) != SIM_OK) {
        fprintf(stderr, "softcast-bench: %s\n", err);
        return 1;
    }
    const int at = 12;
    int differ = 0, changed = 0, ok = 1;
    for (int f = 0; f < at && ok; f++) {
        restore_script(a.state, v, f);
        ok = sim_volume_step(a.state, NULL, err, sizeof err) == SIM_OK;
    }
    sc_blob blob = {0};
    ok = ok && sim_volume_state_save(a.state, &blob, err, sizeof err) == SIM_OK &&
         sim_volume_state_restore(b.state, blob.p, blob.n, err, sizeof err) == SIM_OK;
    uint64_t h0 = ok ? sim_volume_state_hash(a.state) : 0;
    ok = ok && sim_volume_state_hash(b.state) == h0;
    for (int f = at; f < at + frames && ok; f++) {
        restore_script(a.state, v, f), restore_script(b.state, v, f);
        ok = sim_volume_step(a.state, NULL, err, sizeof err) == SIM_OK &&
             sim_volume_step(b.state, NULL, err, sizeof err) == SIM_OK;
        uint64_t ha = sim_volume_state_hash(a.state), hb = sim_volume_state_hash(b.state);
        differ += ha != hb, changed += ha != h0;
        h0 = ha;
    }
    ok = ok && differ == 0 && changed > frames / 2;
    printf("{\"parity\":\"restore\",\"backend\":\"cuda\",\"dims\":\"%dx%dx%d\",\"saved_at\":%d,"
           "\"frames\":%d,\"snapshot_bytes\":%zu,\"frames_differing\":%d,\"frames_changed\":%d,"
           "\"ok\":%s%s%s}\n",
           v->nx, v->ny, v->nz, at, frames, blob.n, differ, changed, ok ? "true" : "false",
           ok ? "" : ",\"error\":", ok ? "" : "\"see stderr\"");
    if (!ok && err[0])
        fprintf(stderr, "softcast-bench: restore check: %s\n", err);
    sc_blob_free(&blob);
    vs_scene_destroy(&a), vs_scene_destroy(&b);
    return !ok;
}

static int run_parity(const bench_opts *o)
{
    if (!sim_cuda_available()) {
        printf("{\"parity\":\"skipped\",\"reason\":\"no CUDA device answers\"}\n");
        return 0;
    }
    sim_volume v;
    if (!load_volume(o, &v))
        return 1;
    vs_scene sc[2];
    char err[512];
    sim_backend_kind kinds[2] = {SIM_BACKEND_CPU, SIM_BACKEND_CUDA};
    for (int k = 0; k < 2; k++)
        if (vs_scene_create(&sc[k], &v, kinds[k], 1, err, sizeof err) != SIM_OK) {
            fprintf(stderr, "softcast-bench: %s\n", err);
            return 1;
        }
    int failed = 0;
    for (int cond = 0; cond < 3; cond++) {
        vs_release_result r[2];
        for (int k = 0; k < 2; k++) {
            vs_push(sc[k].state, SIM_EV_RESET, NULL, 0);
            sim_volume_params p = sim_volume_get_params(sc[k].state);
            p.condition = (sim_condition)cond;
            vs_set_params(sc[k].state, &p);
            vs_release_opts ro = vs_default_release_opts();
            ro.max_after = o->frames - ro.pull_frames - ro.hold_frames;
            if (ro.max_after < 1)
                ro.max_after = 1;
            vs_run_release(sc[k].state, &v, &ro, &r[k], err, sizeof err);
        }
        size_t n = (size_t)v.nx * v.ny * v.nz * 3;
        const float *pa = sim_volume_positions(sc[0].state),
                    *pb = sim_volume_positions(sc[1].state);
        const float *va = sim_volume_velocities(sc[0].state),
                    *vb = sim_volume_velocities(sc[1].state);
        double dp = 0, dv = 0;
        size_t ndiff = 0;
        for (size_t i = 0; i < n; i++) {
            dp = fmax(dp, fabs((double)pa[i] - (double)pb[i]));
            dv = fmax(dv, fabs((double)va[i] - (double)vb[i]));
            ndiff += pa[i] != pb[i];
        }
        int ok = dp <= PARITY_ATOL && dv <= PARITY_ATOL;
        failed |= !ok;
        printf("{\"parity\":\"volume\",\"dims\":\"%dx%dx%d\",\"condition\":\"%c\",\"frames\":%d,"
               "\"max_pos_diff\":%.3g,\"max_vel_diff\":%.3g,\"tolerance\":%g,\"ok\":%s,"
               "\"differing_values\":%zu,\"cpu_hash\":\"%016llx\",\"cuda_hash\":\"%016llx\"}\n",
               v.nx, v.ny, v.nz, 'A' + cond, o->frames, dp, dv, PARITY_ATOL, ok ? "true" : "false",
               ndiff, (unsigned long long)sim_volume_state_hash(sc[0].state),
               (unsigned long long)sim_volume_state_hash(sc[1].state));
    }
    for (int k = 0; k < 2; k++)
        vs_scene_destroy(&sc[k]);
    failed |= restore_check(&v, 58);
    sim_volume_free(&v);
    return failed;
}

int main(int argc, char **argv)
{
    if (argc < 2)
        usage();
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (!strcmp(argv[1], "cloth"))
        return bench_cloth_main(argc, argv);
    if (!strcmp(argv[1], "softbody"))
        return bench_softbody_main(argc, argv);
    if (!strcmp(argv[1], "phantom"))
        return bench_phantom_main(argc, argv);
    if (!strcmp(argv[1], "growth"))
        return bench_growth_main(argc, argv);
    bench_opts o;
    parse_args(argc, argv, &o);
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (!strcmp(argv[1], "volume"))
        return run_volume(&o);
    if (!strcmp(argv[1], "parity"))
        return run_parity(&o);
    usage();
    return 2;
}
