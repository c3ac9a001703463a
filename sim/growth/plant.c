/* plant.c: a plant grown by a stochastic L-system, as the component-cloning study gives it
 * (../shared/GROWTH.md, section 1). Each generation, every branch that is not complete clones
 * once and stops growing:
 *   - a continuation in its own direction turned by a uniform -5..+5 degrees, at 80% of its
 *     length;
 *   - a side branch at 60-80% of its length (uniform), turned by a uniform 30-45 degrees to
 *     the parent's preferred side.
 * A branch shorter than the length limit stops without cloning: growth ends by itself.
 * Children start at their parent's tip (the new position is the parent's plus the rotated
 * direction times the new length).
 *
 * Our readings (GROWTH.md leaves them open):
 *   - Both children take the side opposite to their parent's, so that along every axis the
 *     side branches alternate left and right (with the continuation keeping the parent's
 *     side, every side branch of a stem would grow to one side).
 *   - The 0.9-1.1 factor scales the first branch: the tree's base length.
 *   - The draws come from one seeded generator in a fixed order (per cloning branch, in the
 *     order branches were made: the continuation's turn, the side's length ratio, the side's
 *     angle, and in 3D the roll), so a seed grows one tree on every machine and thread count.
 *   - 3D: each clone first rolls its parent's turning plane about the parent's direction by a
 *     uniform 0-360 degrees, then turns both children in that plane.
 *   - Thickness (the pipe model: a branch's cross-section carries the tips above it). For
 *     these rules the tips above a branch of length L grow as L^d with d solving
 *     cont_ratio^d + E[u^d] = 1 (u the side ratio), d = 2.46 for the defaults, so a branch is
 *     drawn new_size * (L / min_length)^(d/2) thick, at least new_size. It is fixed at birth:
 *     growth only appends, and a frame carries only the new branches. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "growth.h"
#include "sim/core/sc_base.h"
#include "sim/core/sc_blob.h"

#define DEG (3.14159265358979323846 / 180.0)

struct sim_plant {
    sim_plant_params p;
    uint64_t seed, rng;
    double pipe_exponent; /* d / 2, see above */
    sim_branch *b;
    int n, cap, generation;
};

sim_plant_params sim_plant_default_params(void)
{
    sim_plant_params p;
    memset(&p, 0, sizeof p);
    p.ref_length = 100.0f;
    p.min_length = 10.0f;
    p.cont_ratio = 0.8f;
    p.cont_turn_deg = 5.0f;
    p.side_ratio_min = 0.6f;
    p.side_ratio_max = 0.8f;
    p.side_angle_min = 30.0f;
    p.side_angle_max = 45.0f;
    p.base_min = 0.9f;
    p.base_max = 1.1f;
    p.new_size = 0.05f;
    p.three_d = 0;
    p.max_branches = 100000;
    return p;
}

static int in(float v, float lo, float hi)
{
    return isfinite(v) && v >= lo && v <= hi;
}

sim_status sim_plant_params_check(const sim_plant_params *p, char *err, size_t err_sz)
{
    struct {
        const char *name;
        int ok;
    } rules[] = {
        {"ref_length must be in (0, 1e6]", in(p->ref_length, 1e-6f, 1e6f)},
        {"min_length must be in (0, ref_length)",
         in(p->min_length, 1e-6f, 1e6f) && p->min_length < p->ref_length},
        {"cont_ratio must be in (0, 0.95]", in(p->cont_ratio, 1e-3f, 0.95f)},
        {"cont_turn_deg must be in [0, 90]", in(p->cont_turn_deg, 0.0f, 90.0f)},
        {"side_ratio_min..max must lie in (0, 0.95], min <= max",
         in(p->side_ratio_min, 1e-3f, 0.95f) && in(p->side_ratio_max, p->side_ratio_min, 0.95f)},
        {"side_angle_min..max must lie in [0, 90] degrees, min <= max",
         in(p->side_angle_min, 0.0f, 90.0f) && in(p->side_angle_max, p->side_angle_min, 90.0f)},
        {"base_min..max must lie in (0, 10], min <= max",
         in(p->base_min, 1e-3f, 10.0f) && in(p->base_max, p->base_min, 10.0f)},
        {"new_size must be in (0, 1e3]", in(p->new_size, 1e-6f, 1e3f)},
        {"three_d must be 0 or 1", p->three_d == 0 || p->three_d == 1},
        {"max_branches must be in [1, 10000000]",
         p->max_branches >= 1 && p->max_branches <= 10000000},
    };
    for (size_t k = 0; k < sizeof rules / sizeof rules[0]; k++)
        if (!rules[k].ok)
            return (sim_status)sc_fail(err, err_sz, SIM_ERR_ARG, "plant: %s", rules[k].name);
    return SIM_OK;
}

/* splitmix64: small, fast, and the same on every platform. */
static uint64_t next_u64(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Uniform in [lo, hi] (53 bits). */
static double uniform(uint64_t *s, double lo, double hi)
{
    return lo + (hi - lo) * ((double)(next_u64(s) >> 11) * (1.0 / 9007199254740992.0));
}

/* v rotated about the unit axis k by angle a (radians): Rodrigues' formula, in doubles. */
static void rotate(const float vf[3], const float kf[3], double a, float out[3])
{
    double v[3] = {(double)vf[0], (double)vf[1], (double)vf[2]};
    double k[3] = {(double)kf[0], (double)kf[1], (double)kf[2]};
    double c = cos(a), s = sin(a), kv = k[0] * v[0] + k[1] * v[1] + k[2] * v[2];
    double x[3] = {k[1] * v[2] - k[2] * v[1], k[2] * v[0] - k[0] * v[2], k[0] * v[1] - k[1] * v[0]};
    for (int d = 0; d < 3; d++)
        out[d] = (float)(v[d] * c + x[d] * s + k[d] * kv * (1.0 - c));
}

/* d with cont_ratio^d + E[u^d] = 1, u uniform in [side_ratio_min, side_ratio_max]. */
static double tips_exponent(const sim_plant_params *p)
{
    double a = p->side_ratio_min, b = p->side_ratio_max, lo = 0.0, hi = 64.0;
    for (int it = 0; it < 100; it++) {
        double d = 0.5 * (lo + hi);
        double eu =
            b - a < 1e-9 ? pow(a, d) : (pow(b, d + 1.0) - pow(a, d + 1.0)) / ((d + 1.0) * (b - a));
        if (pow(p->cont_ratio, d) + eu > 1.0)
            lo = d;
        else
            hi = d;
    }
    return 0.5 * (lo + hi);
}

float sim_plant_branch_size(const sim_plant_params *p, float length)
{
    double d = tips_exponent(p), r = (double)length / (double)p->min_length;
    return (float)((double)p->new_size * (r > 1.0 ? pow(r, 0.5 * d) : 1.0));
}

static void set_tip(sim_plant *pl, sim_branch *c)
{
    for (int a = 0; a < 3; a++)
        c->tip[a] = c->start[a] + c->dir[a] * c->length;
    double r = (double)c->length / (double)pl->p.min_length;
    c->size = (float)((double)pl->p.new_size * fmax(1.0, pow(r, pl->pipe_exponent)));
}

sim_status sim_plant_create(sim_plant **out, const sim_plant_params *p, uint64_t seed, char *err,
                            size_t err_sz)
{
    *out = NULL;
    sim_status st = sim_plant_params_check(p, err, err_sz);
    if (st != SIM_OK)
        return st;
    sim_plant *pl = sc_calloc(1, sizeof *pl);
    if (!pl || !(pl->b = sc_calloc(64, sizeof *pl->b))) {
        free(pl);
        return (sim_status)sc_fail(err, err_sz, SIM_ERR_NOMEM, "plant: out of memory");
    }
    pl->p = *p;
    pl->seed = pl->rng = seed;
    pl->cap = 64;
    pl->pipe_exponent = 0.5 * tips_exponent(p);
    sim_branch *r = &pl->b[pl->n++];
    r->dir[1] = 1.0f;
    r->normal[2] = 1.0f;
    r->length = (float)((double)p->ref_length * uniform(&pl->rng, p->base_min, p->base_max));
    r->parent = -1;
    r->side = 1;
    r->kind = SIM_BRANCH_ROOT;
    set_tip(pl, r);
    *out = pl;
    return SIM_OK;
}

void sim_plant_destroy(sim_plant *pl)
{
    if (!pl)
        return;
    free(pl->b);
    free(pl);
}

/* A child of parent k: turned by angle_deg (signed) about the turning axis, ratio of its
 * length, preferred side opposite its parent's. */
static void add_child(sim_plant *pl, int k, const float axis[3], double angle_deg, double ratio,
                      int kind)
{
    const sim_branch *p = &pl->b[k];
    sim_branch *c = &pl->b[pl->n++];
    memset(c, 0, sizeof *c);
    memcpy(c->start, p->tip, sizeof c->start);
    rotate(p->dir, axis, angle_deg * DEG, c->dir);
    memcpy(c->normal, axis, sizeof c->normal);
    c->length = (float)((double)p->length * ratio);
    c->turn_deg = (float)angle_deg;
    c->parent = k;
    c->generation = p->generation + 1;
    c->side = (int8_t)-p->side;
    c->kind = (int8_t)kind;
    set_tip(pl, c);
}

int sim_plant_step(sim_plant *pl)
{
    int n0 = pl->n, cloning = 0;
    for (int k = 0; k < n0; k++)
        cloning += !pl->b[k].complete && pl->b[k].length >= pl->p.min_length;
    if (pl->n + 2 * cloning > pl->p.max_branches)
        return -1;
    if (pl->n + 2 * cloning > pl->cap) {
        int cap = pl->cap;
        while (cap < pl->n + 2 * cloning)
            cap *= 2;
        sim_branch *b = realloc(pl->b, (size_t)cap * sizeof *b);
        if (!b)
            return -2;
        pl->b = b, pl->cap = cap;
    }
    const sim_plant_params *p = &pl->p;
    for (int k = 0; k < n0; k++) {
        if (pl->b[k].complete)
            continue;
        pl->b[k].complete = 1;
        if (pl->b[k].length < p->min_length)
            continue; /* too short: stops without cloning */
        double turn = uniform(&pl->rng, -p->cont_turn_deg, p->cont_turn_deg);
        double ratio = uniform(&pl->rng, p->side_ratio_min, p->side_ratio_max);
        double angle = uniform(&pl->rng, p->side_angle_min, p->side_angle_max);
        float axis[3];
        if (p->three_d)
            rotate(pl->b[k].normal, pl->b[k].dir, uniform(&pl->rng, 0.0, 360.0) * DEG, axis);
        else
            memcpy(axis, pl->b[k].normal, sizeof axis);
        int side = pl->b[k].side;
        add_child(pl, k, axis, turn, p->cont_ratio, SIM_BRANCH_CONTINUATION);
        add_child(pl, k, axis, side * angle, ratio, SIM_BRANCH_SIDE);
    }
    pl->generation++;
    return pl->n - n0;
}

int sim_plant_done(const sim_plant *pl)
{
    for (int k = 0; k < pl->n; k++)
        if (!pl->b[k].complete)
            return 0;
    return 1;
}

const sim_branch *sim_plant_branches(const sim_plant *pl, int *n)
{
    *n = pl->n;
    return pl->b;
}

int sim_plant_generation(const sim_plant *pl)
{
    return pl->generation;
}

const sim_plant_params *sim_plant_params_of(const sim_plant *pl)
{
    return &pl->p;
}

uint64_t sim_plant_seed(const sim_plant *pl)
{
    return pl->seed;
}

sim_status sim_plant_set_params(sim_plant *pl, const sim_plant_params *p, char *err, size_t err_sz)
{
    sim_status st = sim_plant_params_check(p, err, err_sz);
    if (st == SIM_OK) {
        pl->p = *p;
        pl->pipe_exponent = 0.5 * tips_exponent(p);
    }
    return st;
}

uint64_t sim_plant_hash(const sim_plant *pl)
{
    return sc_hash_bytes(SC_HASH_SEED, pl->b, (size_t)pl->n * sizeof *pl->b);
}

/* Part "GRPL": the rules, the generator, the generation, the branches. */
#define PLANT_SNAPSHOT_VERSION 1u
static const char k_plant_tag[4] = {'G', 'R', 'P', 'L'};

sim_status sim_plant_save(const sim_plant *pl, sc_blob *out)
{
    int32_t n = pl->n, gen = pl->generation;
    sc_blob_tag(out, k_plant_tag, PLANT_SNAPSHOT_VERSION);
    SC_PUT(out, pl->p);
    SC_PUT(out, pl->seed);
    SC_PUT(out, pl->rng);
    SC_PUT(out, gen);
    SC_PUT(out, n);
    sc_blob_put(out, pl->b, (size_t)pl->n * sizeof *pl->b);
    return out->failed ? SIM_ERR_NOMEM : SIM_OK;
}

sim_status sim_plant_restore(sim_plant *pl, const void *data, size_t n, char *err, size_t err_sz)
{
    sc_reader r = sc_reader_of(data, n);
    sim_plant_params p;
    uint64_t seed, rng;
    int32_t gen, nb;
    sc_reader_tag(&r, k_plant_tag, PLANT_SNAPSHOT_VERSION);
    SC_GET(&r, p);
    SC_GET(&r, seed);
    SC_GET(&r, rng);
    SC_GET(&r, gen);
    SC_GET(&r, nb);
    if (r.failed)
        return (sim_status)sc_fail(err, err_sz, SIM_ERR_FORMAT, "plant snapshot: %s", r.why);
    /* The rules a session cannot change must be this plant's (its cap, its lengths, 2D or 3D):
     * only the live ones (the turns, the length limit) may differ. */
    sim_plant_params fixed = p;
    fixed.cont_turn_deg = pl->p.cont_turn_deg, fixed.side_angle_min = pl->p.side_angle_min;
    fixed.side_angle_max = pl->p.side_angle_max, fixed.min_length = pl->p.min_length;
    if (memcmp(&fixed, &pl->p, sizeof fixed) != 0)
        return (sim_status)sc_fail(err, err_sz, SIM_ERR_FORMAT,
                                   "plant snapshot: of a plant with other fixed rules");
    if (gen < 0 || nb < 1 || nb > p.max_branches || (size_t)nb * sizeof(sim_branch) != r.n - r.at ||
        sim_plant_params_check(&p, NULL, 0) != SIM_OK)
        return (sim_status)sc_fail(err, err_sz, SIM_ERR_FORMAT, "plant snapshot: damaged");
    sim_branch *b = malloc((size_t)nb * sizeof *b);
    if (!b)
        return (sim_status)sc_fail(err, err_sz, SIM_ERR_NOMEM, "plant: out of memory");
    sc_reader_get(&r, b, (size_t)nb * sizeof *b);
    free(pl->b);
    pl->b = b, pl->n = pl->cap = nb, pl->generation = gen, pl->rng = rng, pl->seed = seed;
    pl->p = p;
    pl->pipe_exponent = 0.5 * tips_exponent(&p);
    return SIM_OK;
}
