/* bench_growth.c: the growth benches, one JSON object per line.
 *   softcast-bench growth --model truss [--cells NXxNY] [--tol T] [--omega W] [--threads N]
 *                         [--backend cpu|cuda]
 *     the deep beam of NX x NY cells (50x25) grown by cloning, simply supported (a pin at the
 *     bottom left, a roller at the bottom right), 100 kN down at the middle of its top;
 *     solved by the cellular-automata relaxation from rest to |f - K u| / |f| < T (1e-8) and
 *     by the direct sparse solve (CHOLMOD, when built with it). Prints cells, members,
 *     ca_iterations, ca_ms, direct_ms, max_rel_error (the largest displacement difference
 *     over the largest displacement), and the settings.
 *   softcast-bench growth --parity [--cells NXxNY]
 *     the same beam relaxed 400 sweeps on the CPU (1 thread) and on CUDA: the largest
 *     displacement difference (the kernels are shared and each colour's nodes independent, so
 *     bit for bit is expected; exit 1 past 1e-12 of the largest displacement; "skipped"
 *     without a device).
 *   softcast-bench growth --model plant [--seed N] [--3d]
 *     one tree grown until it stops: branches, height (source units), generations and
 *     ms_per_step (a generation's wall time, mean). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/core/sc_base.h"
#include "sim/growth/growth.h"
#include "tests/bench/bench_growth.h"

static void usage(void)
{
    fprintf(stderr, "usage: softcast-bench growth --model truss [--cells NXxNY] [--tol T] "
                    "[--omega W] [--threads N] [--backend cpu|cuda]\n"
                    "       softcast-bench growth --parity [--cells NXxNY]\n"
                    "       softcast-bench growth --model plant [--seed N] [--3d]\n");
    exit(2);
}

typedef struct growth_opts {
    int truss, nx, ny, threads, three_d, parity;
    double tol, omega;
    unsigned long long seed;
    sim_backend_kind backend;
} growth_opts;

static void parse(int argc, char **argv, growth_opts *o)
{
    memset(o, 0, sizeof *o);
    o->truss = -1, o->nx = 50, o->ny = 25, o->threads = 1, o->tol = 1e-8, o->seed = 1;
    o->backend = SIM_BACKEND_CPU;
    for (int a = 2; a < argc; a++) {
        const char *k = argv[a], *v = a + 1 < argc ? argv[a + 1] : NULL;
        if (!strcmp(k, "--3d") || !strcmp(k, "--parity")) {
            *(k[2] == '3' ? &o->three_d : &o->parity) = 1;
            continue;
        }
        if (!v)
            usage();
        a++;
        if (!strcmp(k, "--model") && (!strcmp(v, "truss") || !strcmp(v, "plant")))
            o->truss = !strcmp(v, "truss");
        else if (!strcmp(k, "--cells") && sscanf(v, "%dx%d", &o->nx, &o->ny) == 2)
            ;
        else if (!strcmp(k, "--tol") && (o->tol = atof(v)) >= 0)
            ;
        else if (!strcmp(k, "--omega") && (o->omega = atof(v)) > 0 && o->omega < 2)
            ;
        else if (!strcmp(k, "--threads") && (o->threads = atoi(v)) >= 0)
            ;
        else if (!strcmp(k, "--seed"))
            o->seed = strtoull(v, NULL, 10);
        else if (!strcmp(k, "--backend") && sim_backend_kind_parse(v) > 0)
            o->backend = (sim_backend_kind)sim_backend_kind_parse(v);
        else
            usage();
    }
    if (o->parity)
        o->truss = 1;
    if (o->truss < 0)
        usage();
}

static int run_truss(const growth_opts *o)
{
    char err[256];
    sim_backend *b = NULL;
    sim_truss *t = NULL;
    sim_truss_params p = sim_truss_default_params();
    p.nx = o->nx, p.ny = o->ny;
    if (sim_backend_create(&b, o->backend, o->threads, err, sizeof err) != SIM_OK ||
        sim_truss_create(&t, &p, b, err, sizeof err) != SIM_OK) {
        fprintf(stderr, "softcast-bench growth: %s\n", err);
        sim_backend_destroy(b);
        return 1;
    }
    if (o->omega > 0)
        sim_truss_set_omega(t, o->omega);
    double t0 = sc_now_ms();
    sim_truss_grow_all(t);
    double grow_ms = sc_now_ms() - t0;
    sim_truss_load_case_beam(t, -1e5);
    int nn = (o->nx + 1) * (o->ny + 1), nm, members = 0;
    const sim_truss_member *m = sim_truss_members(t, &nm);
    for (int k = 0; k < nm; k++)
        members += m[k].area > 0;
    sim_truss_solve_info di = {0, 0, -1}, ci;
    double *ref = malloc((size_t)nn * 2 * sizeof *ref), max_rel = -1.0;
    int have_direct = sim_truss_have_direct();
    if (have_direct && sim_truss_solve_direct(t, &di, err, sizeof err) != SIM_OK) {
        fprintf(stderr, "softcast-bench growth: %s\n", err);
        have_direct = 0;
    }
    if (have_direct && ref)
        memcpy(ref, sim_truss_displacements(t), (size_t)nn * 2 * sizeof *ref);
    sim_truss_reset(t);
    if (sim_truss_relax(t, 10000000, o->tol, &ci, err, sizeof err) != SIM_OK) {
        fprintf(stderr, "softcast-bench growth: %s\n", err);
        return 1;
    }
    if (have_direct && ref) {
        const double *u = sim_truss_displacements(t);
        double umax = 0.0, dmax = 0.0;
        for (int k = 0; k < nn * 2; k++)
            umax = fmax(umax, fabs(ref[k])), dmax = fmax(dmax, fabs(u[k] - ref[k]));
        max_rel = dmax / umax;
    }
    printf("{\"bench\":\"growth\",\"model\":\"truss\",\"cells\":%d,\"cells_grid\":\"%dx%d\","
           "\"members\":%d,\"nodes\":%d,\"grow_ms\":%.2f,\"ca_iterations\":%d,\"ca_ms\":%.1f,"
           "\"ca_residual\":%.3g,\"direct_ms\":%.1f,\"max_rel_error\":%.3g,\"backend\":\"%s\","
           "\"threads\":%d,\"omega\":%.5f,\"tol\":%g,\"direct\":\"%s\"}\n",
           sim_truss_cell_count(t), o->nx, o->ny, members, nn, grow_ms, ci.iterations, ci.ms,
           ci.residual, di.ms, max_rel, sim_backend_name(b), sim_backend_threads(b),
           sim_truss_omega(t), o->tol, have_direct ? "cholmod" : "none (no CHOLMOD in this build)");
    free(ref);
    sim_truss_destroy(t);
    sim_backend_destroy(b);
    return 0;
}

static int run_plant(const growth_opts *o)
{
    char err[256];
    sim_plant_params p = sim_plant_default_params();
    p.three_d = o->three_d;
    sim_plant *pl = NULL;
    if (sim_plant_create(&pl, &p, o->seed, err, sizeof err) != SIM_OK) {
        fprintf(stderr, "softcast-bench growth: %s\n", err);
        return 1;
    }
    double t0 = sc_now_ms();
    int steps = 0;
    while (sim_plant_step(pl) > 0)
        steps++;
    double ms = sc_now_ms() - t0;
    int n;
    const sim_branch *b = sim_plant_branches(pl, &n);
    double height = 0.0;
    for (int k = 0; k < n; k++)
        height = fmax(height, (double)b[k].tip[1]);
    printf("{\"bench\":\"growth\",\"model\":\"plant\",\"seed\":%llu,\"3d\":%s,\"branches\":%d,"
           "\"height\":%.2f,\"generations\":%d,\"ms_per_step\":%.4f,\"hash\":\"%016llx\"}\n",
           o->seed, o->three_d ? "true" : "false", n, height, sim_plant_generation(pl),
           steps ? ms / steps : 0.0, (unsigned long long)sim_plant_hash(pl));
    sim_plant_destroy(pl);
    return 0;
}

/* The beam relaxed `sweeps` sweeps from rest on backend kind k: its displacements (malloc'd). */
static double *relaxed(const growth_opts *o, sim_backend_kind k, int sweeps, char *err,
                       size_t err_sz)
{
    sim_backend *b = NULL;
    sim_truss *t = NULL;
    sim_truss_params p = sim_truss_default_params();
    p.nx = o->nx, p.ny = o->ny;
    double *u = NULL;
    sim_truss_solve_info info;
    size_t n = (size_t)(o->nx + 1) * (size_t)(o->ny + 1) * 2;
    if (sim_backend_create(&b, k, 1, err, err_sz) == SIM_OK &&
        sim_truss_create(&t, &p, b, err, err_sz) == SIM_OK) {
        sim_truss_grow_all(t);
        sim_truss_load_case_beam(t, -1e5);
        if (sim_truss_relax(t, sweeps, 0.0, &info, err, err_sz) == SIM_OK &&
            (u = malloc(n * sizeof *u)))
            memcpy(u, sim_truss_displacements(t), n * sizeof *u);
    }
    sim_truss_destroy(t);
    sim_backend_destroy(b);
    return u;
}

static int run_parity(const growth_opts *o)
{
    char err[256] = "";
    if (!sim_cuda_available()) {
        printf("{\"parity\":\"growth\",\"skipped\":\"no CUDA device\"}\n");
        return 0;
    }
    double *c = relaxed(o, SIM_BACKEND_CPU, 400, err, sizeof err);
    double *g = c ? relaxed(o, SIM_BACKEND_CUDA, 400, err, sizeof err) : NULL;
    if (!c || !g) {
        fprintf(stderr, "softcast-bench growth: %s\n", err);
        free(c), free(g);
        return 1;
    }
    size_t n = (size_t)(o->nx + 1) * (size_t)(o->ny + 1) * 2, differ = 0;
    double umax = 0.0, dmax = 0.0;
    for (size_t k = 0; k < n; k++) {
        umax = fmax(umax, fabs(c[k])), dmax = fmax(dmax, fabs(c[k] - g[k]));
        differ += c[k] != g[k];
    }
    int ok = dmax <= 1e-12 * umax;
    printf("{\"parity\":\"growth\",\"cells\":\"%dx%d\",\"sweeps\":400,\"max_rel_diff\":%.3g,"
           "\"differing_values\":%zu,\"ok\":%s}\n",
           o->nx, o->ny, umax > 0 ? dmax / umax : dmax, differ, ok ? "true" : "false");
    free(c), free(g);
    return !ok;
}

int bench_growth_main(int argc, char **argv)
{
    growth_opts o;
    parse(argc, argv, &o);
    if (o.parity)
        return run_parity(&o);
    return o.truss ? run_truss(&o) : run_plant(&o);
}
