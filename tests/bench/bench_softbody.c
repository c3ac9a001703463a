/* bench_softbody.c: the softbody benches, one JSON object per line.
 *   softcast-bench softbody --model surface|hybrid [--particles N] [--threads N]
 *                           [--substeps N] [--iterations N] [--frames N] [--backend cpu|cuda]
 *                           [--peer bullet]
 *     surface: the default organ of N particles on the floor, grabbed at its top at frame 10,
 *     the hand circling 3 cm wide, let go at two thirds of the frames.
 *     [--organ phantom [--voxel MM] [--surface N] [--cells MIN..MAX]]: the hybrid model on
 *     the phantom organ (sim_softbody_tets_phantom: 1 mm voxels, 30,000 surface vertices,
 *     cells of 4 to 32 voxels by default; "tets_source":"phantom") instead of the box.
 *     hybrid: a box of tets (two regions, the embedded box surface, "tets_source":"box") of
 *     about N vertices, 12 cm long, dropped 1 cm onto the floor. --substeps and --iterations set
 *     the model's own (surface: substeps, iterations; hybrid: hybrid_substeps,
 *     hybrid_iterations). With --peer bullet, a second line: ours with the edges alone (no tet
 *     volumes, no springs: what Bullet's links do); a third: the same tets as a Bullet soft
 *     body (its links on the same edges, the same substeps and iterations, stiffness matched
 *     per region), timed the same way; a fourth comparing Bullet with both of ours.
 *     Figures: ms_per_frame_median and _p90 (wall clock of sim_softbody_step, after 10
 *     frames), cpu_ms_per_frame_mean (this thread's CPU time: the machine is shared).
 *   softcast-bench softbody --parity [--frames N]
 *     both models on the CPU (1 thread) and CUDA: largest position difference (exit 1 beyond
 *     1e-4 m; "skipped" without a device). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sim/softbody/softbody.h"
#include "tests/bench/bench_bullet.h"
#include "tests/bench/bench_softbody.h"
#include "tests/scenes/softbody_scenes.h"

typedef struct sb_opts {
    int hybrid, particles, threads, substeps, iterations, frames, parity;
    sim_backend_kind backend;
    const char *peer;
    int organ;              /* hybrid: the phantom organ (sim_softbody_tets_phantom), not a box */
    float voxel_mm;         /* its voxels */
    int surface_verts;      /* its decimated surface */
    int min_cell, max_cell; /* its octree cells, voxels a side */
} sb_opts;

static void usage(void)
{
    fprintf(stderr, "usage: softcast-bench softbody --model surface|hybrid [--particles N] "
                    "[--threads N] [--substeps N] [--iterations N] [--frames N] "
                    "[--backend cpu|cuda] [--peer bullet]\n"
                    "       [--organ phantom [--voxel MM] [--surface N] [--cells MIN..MAX]]   "
                    "(hybrid: the phantom organ's tets)\n"
                    "       softcast-bench softbody --parity [--frames N]\n");
    exit(2);
}

static int positive(const char *k, const char *v, int hi)
{
    char *end;
    long n = strtol(v, &end, 10);
    if (*end || n < 0 || n > hi) {
        fprintf(stderr, "softcast-bench softbody: %s %s: 0 to %d\n", k, v, hi);
        exit(2);
    }
    return (int)n;
}

static void parse(int argc, char **argv, sb_opts *o)
{
    memset(o, 0, sizeof *o);
    o->particles = 500, o->threads = 1, o->frames = 300, o->backend = SIM_BACKEND_CPU;
    o->voxel_mm = 1.0f, o->surface_verts = 30000, o->min_cell = 4, o->max_cell = 32;
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--parity")) {
            o->parity = 1;
            continue;
        }
        if (!v)
            usage();
        i++;
        if (!strcmp(a, "--model") && (!strcmp(v, "surface") || !strcmp(v, "hybrid")))
            o->hybrid = !strcmp(v, "hybrid");
        else if (!strcmp(a, "--particles"))
            o->particles = positive(a, v, SIM_SOFTBODY_MAX_VERTS);
        else if (!strcmp(a, "--threads"))
            o->threads = positive(a, v, 1024);
        else if (!strcmp(a, "--substeps"))
            o->substeps = positive(a, v, 64);
        else if (!strcmp(a, "--iterations"))
            o->iterations = positive(a, v, 64);
        else if (!strcmp(a, "--frames"))
            o->frames = positive(a, v, 1000000);
        else if (!strcmp(a, "--backend") && sim_backend_kind_parse(v) >= 0)
            o->backend = (sim_backend_kind)sim_backend_kind_parse(v);
        else if (!strcmp(a, "--peer") && !strcmp(v, "bullet"))
            o->peer = v;
        else if (!strcmp(a, "--organ") && !strcmp(v, "phantom"))
            o->organ = 1;
        else if (!strcmp(a, "--voxel") && atof(v) > 0)
            o->voxel_mm = (float)atof(v);
        else if (!strcmp(a, "--surface"))
            o->surface_verts = positive(a, v, SIM_SOFTBODY_MAX_VERTS);
        else if (!strcmp(a, "--cells") && sscanf(v, "%d..%d", &o->min_cell, &o->max_cell) == 2)
            ;
        else
            usage();
    }
    if (o->frames < 20)
        usage();
}

static double thread_cpu_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec * 1e-6;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The hybrid bench's box: 2k x k x k cells, 12 cm long, about n vertices. */
static int box_k(int n)
{
    int k = 1;
    while ((2 * (k + 1) + 1) * (k + 2) * (k + 2) <= n)
        k++;
    return k;
}

static sim_softbody_model *make_model(const sb_opts *o, sim_softbody_tets *t)
{
    char err[256];
    sim_softbody_model *m = NULL;
    if (!o->hybrid) {
        m = sbs_organ_model(o->particles);
    } else if (o->organ) {
        sim_softbody_organ_opts oo = {o->voxel_mm, o->surface_verts, o->min_cell, o->max_cell, 0};
        if (sim_softbody_tets_phantom(t, &oo, err, sizeof err) != SIM_OK ||
            sim_softbody_model_hybrid(&m, t, err, sizeof err) != SIM_OK)
            fprintf(stderr, "softcast-bench: %s\n", err);
    } else {
        int k = box_k(o->particles);
        float cell = 0.12f / (float)(2 * k);
        if (sbs_box_tets(t, 2 * k, k, k, cell, 0.01f, k, 2, err, sizeof err) != SIM_OK ||
            sim_softbody_model_hybrid(&m, t, err, sizeof err) != SIM_OK)
            fprintf(stderr, "softcast-bench: %s\n", err);
    }
    return m;
}

/* The scripted frame f: the surface organ is grabbed at its top and led round a circle. */
static void script(const sb_opts *o, sim_softbody_state *s, int f, float pick[3])
{
    char err[256];
    if (o->hybrid)
        return;
    if (f == 10) {
        int n, top = 0;
        const float *x = sim_softbody_positions(s, &n);
        for (int i = 0; i < n; i++)
            top = x[i * 3 + 2] > x[top * 3 + 2] ? i : top;
        memcpy(pick, &x[top * 3], 3 * sizeof(float));
        sim_softbody_grab(s, pick);
    } else if (f > 10 && f < o->frames * 2 / 3) {
        float a = (float)(f - 10) * 0.1f;
        float hand[3] = {pick[0] + 0.015f * sinf(a), pick[1] + 0.015f * (1.0f - cosf(a)),
                         pick[2] + 0.02f};
        sim_softbody_move_hand(s, hand, err, sizeof err);
    } else if (f == o->frames * 2 / 3) {
        sim_softbody_release(s);
    }
}

typedef struct sb_run {
    double med, p90, mean, cpu_mean, lowest;
    int grab_max;
} sb_run;

static int run_frames(const sb_opts *o, sim_softbody_state *s, sb_run *r)
{
    char err[256];
    double *ms = calloc((size_t)o->frames, sizeof(double)), cpu = 0.0;
    float pick[3] = {0, 0, 0};
    int nt = 0;
    memset(r, 0, sizeof *r);
    for (int f = 0; f < o->frames; f++) {
        script(o, s, f, pick);
        sim_softbody_metrics mt;
        double c0 = thread_cpu_ms();
        if (sim_softbody_step(s, &mt, err, sizeof err) != SIM_OK) {
            fprintf(stderr, "softcast-bench: %s\n", err);
            free(ms);
            return 0;
        }
        r->grab_max = mt.grabbed > r->grab_max ? mt.grabbed : r->grab_max;
        if (f >= 10) {
            cpu += thread_cpu_ms() - c0;
            ms[nt++] = mt.step_ms;
        }
    }
    for (int i = 0; i < nt; i++)
        r->mean += ms[i] / nt;
    qsort(ms, (size_t)nt, sizeof(double), cmp_double);
    r->med = ms[nt / 2];
    r->p90 = ms[(nt * 9) / 10];
    r->cpu_mean = cpu / nt;
    int n;
    const float *x = sim_softbody_positions(s, &n);
    r->lowest = INFINITY;
    for (int i = 0; i < n; i++)
        r->lowest = fmin(r->lowest, (double)x[i * 3 + 2]);
    free(ms);
    return 1;
}

static void print_line(const sb_opts *o, const sim_softbody_model *m, sim_backend *b,
                       const sim_softbody_params *p, const sb_run *r)
{
    sim_softbody_info in = sim_softbody_model_info(m);
    printf("{\"scene\":\"softbody\",\"engine\":\"softcast\",\"model\":\"%s\",\"backend\":\"%s\","
           "\"threads\":%d,\"particles\":%d,\"tets\":%d,\"surface_vertices\":%d,\"edges\":%d,"
           "\"boundary_tets\":%d,\"colours\":%d,\"substeps\":%d,\"iterations\":%d,\"frames\":%d,",
           o->hybrid ? "hybrid" : "surface", sim_backend_name(b), sim_backend_threads(b),
           in.particles, in.tets, in.surface_vertices, in.edges, in.boundary_tets, in.colours,
           o->hybrid ? p->hybrid_substeps : p->substeps,
           o->hybrid ? p->hybrid_iterations : p->iterations, o->frames);
    if (o->hybrid)
        printf("\"tets_source\":\"%s\",\"voxel_mm\":%g,\"constraints\":\"%s\","
               "\"region_compliance\":[%g,%g],"
               "\"region_density\":[%g,%g],\"bulk_ratio\":%g,\"spring_mode\":%d,",
               o->organ ? "phantom" : "box", o->organ ? (double)o->voxel_mm : 0.0,
               p->tet_volumes
                   ? (p->spring_mode == SIM_SPRING_OFF ? "edges+volumes" : "edges+volumes+springs")
                   : (p->spring_mode == SIM_SPRING_OFF ? "edges" : "edges+springs"),
               (double)p->region_compliance[0], (double)p->region_compliance[1],
               (double)p->region_density[0], (double)p->region_density[1], (double)p->bulk_ratio,
               p->spring_mode);
    else
        printf("\"distance_stiffness\":%g,\"shape_stiffness\":%g,\"volume_stiffness\":%g,"
               "\"grabbed_max\":%d,",
               (double)p->distance_stiffness, (double)p->shape_stiffness,
               (double)p->volume_stiffness, r->grab_max);
    printf("\"damping_per_s\":%g,\"ms_per_frame_median\":%.4f,\"ms_per_frame_p90\":%.4f,"
           "\"ms_per_frame_mean\":%.4f,\"cpu_ms_per_frame_mean\":%.4f,\"lowest_z\":%.5f}\n",
           (double)p->damping, r->med, r->p90, r->mean, r->cpu_mean, r->lowest);
}

/* Beside Bullet: ours again on the same tets, substeps and iterations with the edges alone
 * (no tet volumes, no virtual springs), as Bullet's links; then Bullet and the comparison. */
static int peer_runs(const sb_opts *o, const sim_softbody_model *m, sim_backend *b,
                     const sim_softbody_state *s, const sb_run *r)
{
    char err[256];
    sim_softbody_state *e = NULL;
    sim_softbody_params p = sim_softbody_get_params(s);
    p.tet_volumes = 0;
    p.spring_mode = SIM_SPRING_OFF;
    sb_run re;
    if (sim_softbody_state_create(&e, m, b, err, sizeof err) != SIM_OK ||
        sim_softbody_set_params(e, &p, err, sizeof err) != SIM_OK || !run_frames(o, e, &re)) {
        fprintf(stderr, "softcast-bench: edges only: %s\n", err);
        sim_softbody_state_destroy(e);
        return 0;
    }
    print_line(o, m, b, &p, &re);
    bench_sb_figures full = {r->med, r->p90, r->cpu_mean, r->lowest},
                     edges = {re.med, re.p90, re.cpu_mean, re.lowest};
    bench_softbody_peer(m, s, o->frames, &full, &edges);
    sim_softbody_state_destroy(e);
    return 1;
}

static int bench_model(const sb_opts *o)
{
    char err[256];
    sim_softbody_tets t;
    memset(&t, 0, sizeof t);
    sim_softbody_model *m = make_model(o, &t);
    sim_backend *b = NULL;
    sim_softbody_state *s = NULL;
    if (!m || sim_backend_create(&b, o->backend, o->threads, err, sizeof err) != SIM_OK ||
        sim_softbody_state_create(&s, m, b, err, sizeof err) != SIM_OK) {
        fprintf(stderr, "softcast-bench: %s\n", m ? err : "no model");
        return 1;
    }
    sim_softbody_params p = sim_softbody_get_params(s);
    int *sub = o->hybrid ? &p.hybrid_substeps : &p.substeps,
        *its = o->hybrid ? &p.hybrid_iterations : &p.iterations;
    *sub = o->substeps ? o->substeps : *sub;
    *its = o->iterations ? o->iterations : *its;
    if (sim_softbody_set_params(s, &p, err, sizeof err) != SIM_OK) {
        fprintf(stderr, "softcast-bench: %s\n", err);
        return 1;
    }
    sb_run r;
    int ok = run_frames(o, s, &r);
    if (ok)
        print_line(o, m, b, &p, &r);
    if (ok && o->peer && o->hybrid)
        ok = peer_runs(o, m, b, s, &r);
    sim_softbody_state_destroy(s);
    sim_backend_destroy(b);
    sim_softbody_model_destroy(m);
    sim_softbody_tets_free(&t);
    return !ok;
}

int bench_softbody_main(int argc, char **argv)
{
    sb_opts o;
    parse(argc, argv, &o);
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (o.parity)
        return bench_softbody_parity(o.frames);
    if (o.peer && !o.hybrid)
        fprintf(stderr, "softcast-bench softbody: --peer bullet runs with --model hybrid only\n");
    return bench_model(&o);
}
