/* test_growth_truss.c: the equivalent truss built by cloning (sim/growth/truss.c), judged
 * against ground truth: the plate it stands for (a uniform tension gives E t and Poisson's
 * ratio 1/3 for these areas), a direct sparse solve of the same truss (CHOLMOD) for the
 * cellular automaton, Clapeyron's theorem (the strain energy is half the work of the loads)
 * for the energies, and the mirror symmetry of a symmetric load case. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sim/growth/growth.h"
#include "sim/growth/kernels.h"
#include "tests/harness.h"

static sim_truss *truss(int nx, int ny, sim_backend *b)
{
    sim_truss_params p = sim_truss_default_params();
    p.nx = nx, p.ny = ny;
    sim_truss *t = NULL;
    char err[256];
    return sim_truss_create(&t, &p, b, err, sizeof err) == SIM_OK ? t : NULL;
}

TEST(truss_grows_by_cloning_with_the_sources_areas)
{
    const double l = 0.1, th = 0.01;
    CHECK(fabs(sim_truss_area_orthogonal(l, th) - 0.75 * l * th) < 1e-15);
    CHECK(fabs(sim_truss_area_diagonal(l, th) - 3.0 * sqrt(2.0) / 8.0 * l * th) < 1e-15);
    sim_truss *t = truss(7, 4, NULL);
    REQUIRE(t);
    CHECK(sim_truss_cell_count(t) == 1 && sim_truss_has_cell(t, 0, 0));
    /* A wave: after g generations the cells with i + j <= g stand. */
    for (int g = 1; g <= 7 + 4 - 2; g++) {
        int added = sim_truss_grow(t), expect = 0, wrong = 0;
        for (int j = 0; j < 4; j++)
            for (int i = 0; i < 7; i++) {
                expect += i + j == g;
                wrong += sim_truss_has_cell(t, i, j) != (i + j <= g);
            }
        CHECKF(added == expect && wrong == 0, "generation %d: %d added (%d expected), %d misplaced",
               g, added, expect, wrong);
    }
    CHECK(sim_truss_grow(t) == 0 && sim_truss_cell_count(t) == 28);
    /* Areas: an orthogonal member inside is A_o (two half members), on the edge A_o / 2. */
    int n, bad = 0;
    const sim_truss_member *m = sim_truss_members(t, &n);
    const double ao = 0.75 * l * th, ad = 3.0 * sqrt(2.0) / 8.0 * l * th;
    for (int k = 0; k < n; k++) {
        int ai = m[k].a % 8, aj = m[k].a / 8;
        double want = ad;
        if (m[k].kind == 0)
            want = aj == 0 || aj == 4 ? ao / 2 : ao;
        else if (m[k].kind == 1)
            want = ai == 0 || ai == 7 ? ao / 2 : ao;
        bad += fabs(m[k].area - want) > 1e-12 * want;
    }
    CHECKF(bad == 0 && n == 7 * 5 + 8 * 4 + 2 * 28, "%d of %d members with the wrong area", bad, n);
    sim_truss_destroy(t);
}

/* Uniform tension N (N/m) on a free strip: rollers on the left edge, the bottom-left node also
 * held in y, the right edge's nodes pulled by N l (half at the corners). */
static void tension_case(sim_truss *t, int nx, int ny, double N, double l)
{
    sim_truss_clear(t);
    for (int j = 0; j <= ny; j++) {
        sim_truss_support(t, 0, j, 1, j == 0);
        sim_truss_load(t, nx, j, N * l * (j == 0 || j == ny ? 0.5 : 1.0), 0.0);
    }
}

TEST(truss_uniform_tension_gives_the_plates_stiffness)
{
    const int nx = 20, ny = 10;
    const double N = 1e5;
    sim_truss *t = truss(nx, ny, NULL);
    REQUIRE(t);
    sim_truss_grow_all(t);
    const sim_truss_params *p = sim_truss_params_of(t);
    tension_case(t, nx, ny, N, p->cell_m);
    sim_truss_solve_info info;
    char err[256];
    REQUIRE(sim_truss_relax(t, 200000, 1e-10, &info, err, sizeof err) == SIM_OK);
    REQUIRE(info.residual < 1e-10);
    const double *u = sim_truss_displacements(t);
    double ux = 0.0, uy = 0.0;
    for (int j = 0; j <= ny; j++)
        ux += u[(nx + j * (nx + 1)) * 2] / (ny + 1);
    for (int i = 0; i <= nx; i++)
        uy += (u[(i + ny * (nx + 1)) * 2 + 1] - u[i * 2 + 1]) / (nx + 1);
    double exx = ux / (nx * p->cell_m), eyy = uy / (ny * p->cell_m);
    double Et = N / exx, want = p->youngs_pa * p->thickness_m, nu = -eyy / exx;
    th_note(
        "uniform tension: E t %.6g against %.6g (%.4f%%), Poisson %.5f; %d sweeps, residual %.2g",
        Et, want, 100.0 * (Et / want - 1.0), nu, info.iterations, info.residual);
    CHECKF(fabs(Et / want - 1.0) < 0.02, "E t %g against the plate's %g", Et, want);
    CHECKF(fabs(nu - 1.0 / 3.0) < 0.01, "Poisson's ratio %g against 1/3", nu);
    sim_truss_destroy(t);
}

TEST(truss_relaxation_matches_the_direct_solve)
{
    if (!sim_truss_have_direct())
        SKIP("this build has no CHOLMOD (libsuitesparse-dev): no direct solve to compare with");
    sim_truss *t = truss(50, 25, NULL);
    REQUIRE(t);
    sim_truss_grow_all(t);
    sim_truss_load_case_beam(t, -1e5);
    sim_truss_solve_info di, ci;
    char err[256];
    REQUIRE(sim_truss_solve_direct(t, &di, err, sizeof err) == SIM_OK);
    int nn = 51 * 26;
    double *ref = malloc((size_t)nn * 2 * sizeof *ref);
    REQUIRE(ref);
    memcpy(ref, sim_truss_displacements(t), (size_t)nn * 2 * sizeof *ref);
    /* Clapeyron: the strain energy, summed over the members from their strains, is half the
     * loads' work. */
    double U = sim_truss_energy(t), W = sim_truss_load_work(t);
    CHECKF(fabs(U - 0.5 * W) < 1e-9 * W, "direct: strain energy %.9g, half the work %.9g", U,
           0.5 * W);
    sim_truss_reset(t);
    REQUIRE(sim_truss_relax(t, 100000, 1e-9, &ci, err, sizeof err) == SIM_OK);
    const double *u = sim_truss_displacements(t);
    double umax = 0.0, dmax = 0.0;
    int finite = 1;
    for (int k = 0; k < nn * 2; k++) {
        finite &= isfinite(u[k]) && isfinite(ref[k]);
        umax = fmax(umax, fabs(ref[k]));
        dmax = fmax(dmax, fabs(u[k] - ref[k]));
    }
    CHECKF(finite && ci.residual < 1e-9, "relaxation: residual %g after %d sweeps%s", ci.residual,
           ci.iterations, finite ? "" : ", values not finite");
    th_note("50x25 beam: direct %.1f ms; relaxation %d sweeps (omega %.4f) in %.1f ms, residual "
            "%.2g; largest difference %.3g of the largest displacement %.4g mm",
            di.ms, ci.iterations, sim_truss_omega(t), ci.ms, ci.residual, dmax / umax, umax * 1e3);
    CHECKF(dmax < 1e-3 * umax, "relaxation is %g of the largest displacement off the direct solve",
           dmax / umax);
    free(ref);
    sim_truss_destroy(t);
}

TEST(truss_energy_adds_up_concentrates_at_load_and_supports_and_is_symmetric)
{
    const int nx = 50, ny = 25;
    sim_truss *t = truss(nx, ny, NULL);
    REQUIRE(t);
    sim_truss_grow_all(t);
    sim_truss_load_case_beam(t, -1e5);
    sim_truss_solve_info info;
    char err[256];
    REQUIRE(sim_truss_relax(t, 100000, 1e-10, &info, err, sizeof err) == SIM_OK);
    REQUIRE(info.residual < 1e-10);
    double *e = malloc((size_t)nx * ny * sizeof *e);
    REQUIRE(e);
    sim_truss_cell_energy(t, e);
    double sum = 0.0, asym = 0.0, emax = 0.0;
    for (int j = 0; j < ny; j++)
        for (int i = 0; i < nx; i++) {
            double a = e[i + j * nx], b = e[nx - 1 - i + j * nx];
            sum += a, emax = fmax(emax, a);
            asym = fmax(asym, fabs(a - b));
        }
    double W = sim_truss_load_work(t);
    CHECKF(fabs(sum - 0.5 * W) < 1e-6 * W, "cells' energies add to %.9g, half the work %.9g", sum,
           0.5 * W);
    CHECKF(asym < 1e-5 * emax, "a symmetric load, energies %g (of %g) apart across the middle",
           asym, emax);
    /* The three cells of most energy each touch the load or a support (within a cell). */
    const int hot[3][2] = {{nx / 2, ny}, {0, 0}, {nx, 0}};
    for (int r = 0; r < 3; r++) {
        int best = 0;
        for (int c = 1; c < nx * ny; c++)
            if (e[c] > e[best])
                best = c;
        int bi = best % nx, bj = best / nx, near = 0;
        for (int h = 0; h < 3; h++) /* a node (x, y) touches cells x-1..x, y-1..y */
            near |= bi >= hot[h][0] - 2 && bi <= hot[h][0] + 1 && bj >= hot[h][1] - 2 &&
                    bj <= hot[h][1] + 1;
        CHECKF(near, "energy's %d. highest cell (%d, %d) is far from the load and the supports",
               r + 1, bi, bj);
        e[best] = -1.0;
    }
    /* And far from them, in the middle of the beam's height at a quarter span, less than a
     * tenth of the peak. */
    sim_truss_cell_energy(t, e);
    CHECK(e[nx / 4 + (ny / 2) * nx] < 0.1 * emax);
    free(e);
    sim_truss_destroy(t);
}

TEST(truss_relaxation_is_the_same_on_one_and_two_threads)
{
    sim_backend *b1 = NULL, *b2 = NULL;
    char err[256];
    REQUIRE(sim_backend_create(&b1, SIM_BACKEND_CPU, 1, err, sizeof err) == SIM_OK);
    REQUIRE(sim_backend_create(&b2, SIM_BACKEND_CPU, 2, err, sizeof err) == SIM_OK);
    sim_truss *t1 = truss(100, 50, b1), *t2 = truss(100, 50, b2);
    REQUIRE(t1 && t2);
    sim_truss *ts[2] = {t1, t2};
    for (int k = 0; k < 2; k++) {
        sim_truss_grow_all(ts[k]);
        sim_truss_load_case_beam(ts[k], -1e5);
        sim_truss_solve_info info;
        REQUIRE(sim_truss_relax(ts[k], 160, 0.0, &info, err, sizeof err) == SIM_OK);
        CHECK(info.iterations == 160);
    }
    CHECK(memcmp(sim_truss_displacements(t1), sim_truss_displacements(t2),
                 (size_t)101 * 51 * 2 * sizeof(double)) == 0);
    sim_truss_destroy(t1), sim_truss_destroy(t2);
    sim_backend_destroy(b1), sim_backend_destroy(b2);
}

TEST(truss_bad_setups_refused)
{
    char err[256];
    sim_truss *t = NULL;
    sim_truss_params p = sim_truss_default_params();
    p.nx = 0;
    CHECK(sim_truss_create(&t, &p, NULL, err, sizeof err) == SIM_ERR_ARG && strstr(err, "cells"));
    p = sim_truss_default_params();
    p.thickness_m = -1;
    CHECK(sim_truss_create(&t, &p, NULL, err, sizeof err) == SIM_ERR_ARG &&
          strstr(err, "thickness"));
    p = sim_truss_default_params();
    p.youngs_pa = NAN;
    CHECK(sim_truss_create(&t, &p, NULL, err, sizeof err) == SIM_ERR_ARG && strstr(err, "Young"));
    CHECK(t == NULL);
    t = truss(10, 5, NULL);
    REQUIRE(t);
    sim_truss_grow_all(t);
    sim_truss_solve_info info;
    CHECK(sim_truss_relax(t, 10, 1e-9, &info, err, sizeof err) == SIM_ERR_ARG &&
          strstr(err, "not held"));
    /* Two rollers in y: free to slide in x. A pin alone: free to turn. */
    sim_truss_support(t, 0, 0, 0, 1), sim_truss_support(t, 10, 0, 0, 1);
    CHECK(sim_truss_relax(t, 10, 1e-9, &info, err, sizeof err) == SIM_ERR_ARG);
    sim_truss_clear(t);
    sim_truss_support(t, 0, 0, 1, 1);
    CHECK(sim_truss_relax(t, 10, 1e-9, &info, err, sizeof err) == SIM_ERR_ARG);
    sim_truss_support(t, 10, 0, 0, 1);
    CHECK(sim_truss_relax(t, 10, 1e-9, &info, err, sizeof err) == SIM_OK);
    CHECK(sim_truss_load(t, 11, 0, 0, 1) == SIM_ERR_ARG &&
          sim_truss_load(t, 0, -1, 0, 1) == SIM_ERR_ARG);
    CHECK(sim_truss_load(t, 5, 5, NAN, 1) == SIM_ERR_ARG);
    CHECK(sim_truss_support(t, 0, 6, 1, 1) == SIM_ERR_ARG);
    sim_truss_destroy(t);
}

/* The CUDA kernel's thread k of colour c relaxes node truss_colour_node(k): over the four
 * colours every node of every grid once, in its own colour (the CPU loops rows instead, so the
 * mapping is checked here, where it runs). */
TEST(truss_colours_cover_every_node_once)
{
    int bad = 0;
    for (int nx = 1; nx <= 9; nx++)
        for (int ny = 1; ny <= 9; ny++) {
            int seen[10 * 10] = {0};
            for (int c = 0; c < 4; c++)
                for (int k = 0; k < truss_colour_count(nx, ny, c); k++) {
                    int i, j;
                    if (!truss_colour_node(nx, ny, c, k, &i, &j) || i > nx || j > ny ||
                        truss_colour(i, j) != c) {
                        bad++;
                        continue;
                    }
                    seen[i + j * (nx + 1)]++;
                }
            for (int n = 0; n < (nx + 1) * (ny + 1); n++)
                bad += seen[n] != 1;
        }
    CHECKF(bad == 0, "%d nodes missed, doubled or in the wrong colour", bad);
}
