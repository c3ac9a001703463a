/* test_growth_plant.c: the stochastic L-system plant (sim/growth/plant.c) against its rules
 * (../shared/GROWTH.md, section 1). Every branch is judged from its geometry (its start, its
 * tip, its parent's), not from the fields the code stores; the counts and heights of 100
 * trees are held to the rules' expectation computed here from the rules alone (a renewal
 * equation for the branch count; the main stem's expected height from the characteristic
 * function of the uniform turns). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sim/growth/growth.h"
#include "tests/harness.h"

/* The rules are floats; every check here computes in doubles. */
#pragma GCC diagnostic ignored "-Wdouble-promotion"

#define PI_D 3.14159265358979323846

static sim_plant *grow(const sim_plant_params *p, uint64_t seed, int *generations)
{
    sim_plant *pl = NULL;
    char err[256];
    if (sim_plant_create(&pl, p, seed, err, sizeof err) != SIM_OK)
        return NULL;
    int g = 0;
    while (!sim_plant_done(pl) && g < 200) { /* growth must stop by itself: bounded here */
        if (sim_plant_step(pl) < 0)
            break;
        g++;
    }
    *generations = g;
    return pl;
}

static void vec(const sim_branch *b, double v[3])
{
    for (int a = 0; a < 3; a++)
        v[a] = (double)b->tip[a] - (double)b->start[a];
}

static double norm3(const double v[3])
{
    return sqrt(v[0] * v[0] + v[1] * v[1] + v[2] * v[2]);
}

/* The angle from a to b in degrees: signed in the xy plane (counter-clockwise positive) when
 * planar, else unsigned. */
static double angle_deg(const double a[3], const double b[3], int planar)
{
    if (planar)
        return atan2(a[0] * b[1] - a[1] * b[0], a[0] * b[0] + a[1] * b[1]) * 180.0 / PI_D;
    double c = (a[0] * b[0] + a[1] * b[1] + a[2] * b[2]) / (norm3(a) * norm3(b));
    return acos(fmin(1.0, fmax(-1.0, c))) * 180.0 / PI_D;
}

TEST(plant_same_seed_same_tree_another_seed_another)
{
    sim_plant_params p = sim_plant_default_params();
    int g1, g2, g3;
    sim_plant *a = grow(&p, 42, &g1), *b = grow(&p, 42, &g2), *c = grow(&p, 43, &g3);
    REQUIRE(a && b && c);
    int na, nb, nc;
    sim_plant_branches(a, &na), sim_plant_branches(b, &nb), sim_plant_branches(c, &nc);
    CHECK(na == nb && g1 == g2);
    CHECK(sim_plant_hash(a) == sim_plant_hash(b));
    CHECK(sim_plant_hash(a) != sim_plant_hash(c));
    sim_plant_destroy(a), sim_plant_destroy(b), sim_plant_destroy(c);
}

/* Every branch of one tree against the rules; returns the number of branches checked. */
static int check_rules(const sim_plant *pl, const sim_plant_params *p, int planar)
{
    int n;
    const sim_branch *b = sim_plant_branches(pl, &n);
    int *children = calloc((size_t)n, sizeof *children);
    int *side_child = malloc((size_t)n * sizeof *side_child);
    if (!children || !side_child) {
        free(children), free(side_child);
        return 0;
    }
    for (int k = 0; k < n; k++)
        side_child[k] = -1;
    double r[3];
    vec(&b[0], r);
    CHECKF(b[0].parent == -1 && norm3(r) >= 0.9 * p->ref_length - 1e-3 &&
               norm3(r) <= 1.1 * p->ref_length + 1e-3 && fabs(r[0]) < 1e-6 && r[1] > 0,
           "the root: %g long, (%g, %g)", norm3(r), r[0], r[1]);
    for (int k = 1; k < n; k++) {
        int q = b[k].parent;
        if (!(q >= 0 && q < k)) {
            CHECKF(0, "branch %d has parent %d", k, q);
            break;
        }
        children[q]++;
        double v[3], pv[3];
        vec(&b[k], v), vec(&b[q], pv);
        double gap = fabs((double)b[k].start[0] - b[q].tip[0]) +
                     fabs((double)b[k].start[1] - b[q].tip[1]) +
                     fabs((double)b[k].start[2] - b[q].tip[2]);
        double ratio = norm3(v) / norm3(pv), ang = angle_deg(pv, v, planar);
        CHECKF(gap < 1e-3, "branch %d starts %g from its parent's tip", k, gap);
        CHECKF(norm3(pv) >= p->min_length, "branch %d grew from a parent of %g, under the limit", k,
               norm3(pv));
        if (b[k].kind == SIM_BRANCH_CONTINUATION) {
            CHECKF(fabs(ratio - 0.8) < 1e-4, "continuation %d at %g of its parent", k, ratio);
            CHECKF(fabs(ang) <= 5.0 + 1e-3, "continuation %d turned %g degrees", k, ang);
        } else {
            side_child[q] = k;
            CHECKF(ratio >= 0.6 - 1e-4 && ratio <= 0.8 + 1e-4, "side %d at %g of its parent", k,
                   ratio);
            CHECKF(fabs(ang) >= 30.0 - 1e-3 && fabs(ang) <= 45.0 + 1e-3,
                   "side %d turned %g degrees", k, ang);
        }
    }
    for (int k = 0; k < n; k++) {
        double v[3];
        vec(&b[k], v);
        int expect = norm3(v) >= p->min_length ? 2 : 0;
        CHECKF(children[k] == expect, "branch %d (%g long) has %d children, not %d", k, norm3(v),
               children[k], expect);
    }
    /* Alternating sides (2D): along a stem, each side branch turns the other way from the side
     * branch of the stem's previous clone. */
    for (int k = 1; planar && k < n; k++) {
        int q = b[k].parent;
        if (b[k].kind != SIM_BRANCH_CONTINUATION || side_child[k] < 0 || side_child[q] < 0)
            continue;
        double a1[3], a2[3], s1[3], s2[3];
        vec(&b[q], a1), vec(&b[side_child[q]], s1), vec(&b[k], a2), vec(&b[side_child[k]], s2);
        double t1 = angle_deg(a1, s1, 1), t2 = angle_deg(a2, s2, 1);
        CHECKF(t1 * t2 < 0, "side branches of %d and %d turn %g and %g: the same side", q, k, t1,
               t2);
    }
    free(children), free(side_child);
    return n;
}

TEST(plant_every_branch_obeys_the_rules_and_growth_stops)
{
    sim_plant_params p = sim_plant_default_params();
    for (int three = 0; three < 2; three++) {
        p.three_d = three;
        double zmax = 0.0;
        for (uint64_t seed = 1; seed <= 8; seed++) {
            int g;
            sim_plant *pl = grow(&p, seed, &g);
            REQUIRE(pl);
            CHECKF(sim_plant_done(pl) && g < 200, "seed %llu: still growing after %d generations",
                   (unsigned long long)seed, g);
            CHECK(sim_plant_step(pl) == 0); /* done: nothing more */
            CHECK(check_rules(pl, &p, !three) > 100);
            int n;
            const sim_branch *b = sim_plant_branches(pl, &n);
            for (int k = 0; k < n; k++)
                zmax = fmax(zmax, fabs((double)b[k].tip[2]));
            sim_plant_destroy(pl);
        }
        CHECKF(three ? zmax > 1.0 : zmax == 0.0, "3D %d: the tree reaches %g off the plane", three,
               zmax);
    }
}

/* E[branches] of a tree from a first branch of length L: N(L) = 1 for L < min, else
 * 1 + N(0.8 L) + mean of N(u L), u uniform in [0.6, 0.8]. Tabulated on a fine grid from the
 * bottom up (every term on the right is shorter than L), linear between grid points. */
typedef struct renewal {
    double h;
    int n;
    double *N;
} renewal;

static double at(const renewal *r, double L)
{
    double x = L / r->h;
    int k = (int)x;
    if (k >= r->n - 1)
        return r->N[r->n - 1];
    return r->N[k] + (x - k) * (r->N[k + 1] - r->N[k]);
}

static void tabulate(renewal *r, const sim_plant_params *p, double Lmax)
{
    r->h = 0.01, r->n = (int)(Lmax / r->h) + 2;
    r->N = malloc((size_t)r->n * sizeof *r->N);
    for (int k = 0; k < r->n; k++) {
        double L = k * r->h;
        if (L < p->min_length) {
            r->N[k] = 1.0;
            continue;
        }
        double side = 0.0;
        const int m = 200; /* midpoint rule over u */
        for (int q = 0; q < m; q++) {
            double u = p->side_ratio_min + (p->side_ratio_max - p->side_ratio_min) * (q + 0.5) / m;
            side += at(r, u * L) / m;
        }
        r->N[k] = 1.0 + at(r, p->cont_ratio * L) + side;
    }
}

/* E[height of the main stem's tip]: the stem is the root and its continuations, lengths
 * L 0.8^k while the last one cloned; each continuation turns by an independent uniform
 * +-5 degrees, so E[cos(sum of k turns)] = (sin a / a)^k. */
static double stem_height(const sim_plant_params *p, double L)
{
    double a = p->cont_turn_deg * PI_D / 180.0, sinc = sin(a) / a, h = 0.0, len = L, c = 1.0;
    for (;;) {
        h += len * c;
        if (len < p->min_length)
            return h;
        len *= p->cont_ratio, c *= sinc;
    }
}

static void mean_sd(const double *x, int n, double *mean, double *sd)
{
    double s = 0.0, ss = 0.0;
    for (int k = 0; k < n; k++)
        s += x[k];
    *mean = s / n;
    for (int k = 0; k < n; k++)
        ss += (x[k] - *mean) * (x[k] - *mean);
    *sd = sqrt(ss / (n - 1));
}

TEST(plant_count_height_and_draws_over_100_seeds_match_the_rules)
{
    sim_plant_params p = sim_plant_default_params();
    enum { SEEDS = 100 };
    double count[SEEDS], height[SEEDS];
    /* every draw of every tree: continuation turns, side ratios, side angles */
    double s_turn = 0, ss_turn = 0, s_ratio = 0, ss_ratio = 0, s_ang = 0, ss_ang = 0;
    long nturn = 0, nside = 0;
    for (int s = 0; s < SEEDS; s++) {
        int g, n;
        sim_plant *pl = grow(&p, 1000 + (uint64_t)s, &g);
        REQUIRE(pl);
        const sim_branch *b = sim_plant_branches(pl, &n);
        count[s] = n;
        int k = 0;
        for (int q = 1; q < n; q++) /* the stem: the root's continuations */
            if (b[q].parent == k && b[q].kind == SIM_BRANCH_CONTINUATION)
                k = q;
        height[s] = b[k].tip[1];
        for (int q = 1; q < n; q++) {
            double v[3], pv[3];
            vec(&b[q], v), vec(&b[b[q].parent], pv);
            double ang = angle_deg(pv, v, 1);
            if (b[q].kind == SIM_BRANCH_CONTINUATION) {
                s_turn += ang, ss_turn += ang * ang, nturn++;
            } else {
                double r = norm3(v) / norm3(pv);
                s_ratio += r, ss_ratio += r * r, s_ang += fabs(ang), ss_ang += ang * ang;
                nside++;
            }
        }
        sim_plant_destroy(pl);
    }
    renewal r;
    tabulate(&r, &p, 1.1 * p.ref_length + 1.0);
    double e_count = 0.0, e_height = 0.0;
    const int m = 2000; /* over the root's length, uniform in [0.9, 1.1] x 100 */
    for (int q = 0; q < m; q++) {
        double L = p.ref_length * (p.base_min + (p.base_max - p.base_min) * (q + 0.5) / m);
        e_count += at(&r, L) / m;
        e_height += stem_height(&p, L) / m;
    }
    free(r.N);
    double mc, sc, mh, sh;
    mean_sd(count, SEEDS, &mc, &sc);
    mean_sd(height, SEEDS, &mh, &sh);
    th_note("branches: %.1f mean (sd %.1f) over %d seeds, rules' expectation %.1f; stem height "
            "%.2f (sd %.2f), expectation %.2f",
            mc, sc, SEEDS, e_count, mh, sh, e_height);
    /* Within 4 standard errors of the mean, plus the quadrature's own error (0.5%). */
    CHECKF(fabs(mc - e_count) < 4.0 * sc / sqrt(SEEDS) + 0.005 * e_count,
           "mean branch count %.1f against %.1f", mc, e_count);
    CHECKF(fabs(mh - e_height) < 4.0 * sh / sqrt(SEEDS) + 0.005 * e_height,
           "mean stem height %.2f against %.2f", mh, e_height);
    /* The draws themselves: uniform on their ranges (mean and variance of a uniform; the
     * thousands of draws put 5 standard errors at a few percent). */
    double mt = s_turn / nturn, vt = ss_turn / nturn - mt * mt;
    double mr = s_ratio / nside, vr = ss_ratio / nside - mr * mr;
    double ma = s_ang / nside, va = ss_ang / nside - ma * ma;
    th_note("%ld turns: mean %.3f var %.3f (0, 8.333); %ld sides: ratio %.4f var %.5f (0.7, "
            "0.00333), angle %.3f var %.3f (37.5, 18.75)",
            nturn, mt, vt, nside, mr, vr, ma, va);
    CHECKF(fabs(mt) < 5.0 * sqrt(25.0 / 3.0 / nturn) && fabs(vt / (25.0 / 3.0) - 1.0) < 0.1,
           "continuation turns: mean %g, variance %g", mt, vt);
    CHECKF(fabs(mr - 0.7) < 5.0 * sqrt(0.04 / 12.0 / nside) && fabs(vr / (0.04 / 12.0) - 1.0) < 0.1,
           "side ratios: mean %g, variance %g", mr, vr);
    CHECKF(fabs(ma - 37.5) < 5.0 * sqrt(225.0 / 12.0 / nside) && fabs(va / 18.75 - 1.0) < 0.1,
           "side angles: mean %g, variance %g", ma, va);
}

TEST(plant_bad_rules_refused_and_the_cap_holds)
{
    char err[256];
    sim_plant *pl = NULL;
    sim_plant_params p = sim_plant_default_params();
    p.min_length = p.ref_length * 2;
    CHECK(sim_plant_create(&pl, &p, 1, err, sizeof err) == SIM_ERR_ARG &&
          strstr(err, "min_length"));
    p = sim_plant_default_params();
    p.side_ratio_min = 0.9f, p.side_ratio_max = 0.7f;
    CHECK(sim_plant_create(&pl, &p, 1, err, sizeof err) == SIM_ERR_ARG &&
          strstr(err, "side_ratio"));
    p = sim_plant_default_params();
    p.side_angle_max = 120.0f;
    CHECK(sim_plant_create(&pl, &p, 1, err, sizeof err) == SIM_ERR_ARG &&
          strstr(err, "side_angle"));
    p = sim_plant_default_params();
    p.cont_ratio = NAN;
    CHECK(sim_plant_create(&pl, &p, 1, err, sizeof err) == SIM_ERR_ARG &&
          strstr(err, "cont_ratio"));
    CHECK(pl == NULL);
    /* A cap of 50 branches: the step that would pass it adds nothing and says so. */
    p = sim_plant_default_params();
    p.max_branches = 50;
    REQUIRE(sim_plant_create(&pl, &p, 1, err, sizeof err) == SIM_OK);
    int n = 0, last = 0;
    for (int g = 0; g < 50 && (last = sim_plant_step(pl)) > 0; g++)
        sim_plant_branches(pl, &n);
    int after;
    sim_plant_branches(pl, &after);
    CHECKF(last == -1 && after <= 50 && after == n, "cap 50: last step %d, %d branches", last,
           after);
    sim_plant_destroy(pl);
}
