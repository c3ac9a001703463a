/* truss.c: the equivalent truss of a deep beam, built by cloning one cell
 * (../shared/GROWTH.md, section 2).
 *
 * The cell is a square of side l: four orthogonal members and two diagonals. For a plate of
 * thickness t the areas are A_o = 3/4 l t and A_d = 3 sqrt(2) / 8 l t (Tatting and Guerdal
 * 2000): with these, a lattice of such cells has the plane-stress stiffness of the plate with
 * Poisson's ratio 1/3 (C11 = E t (A_o + A_d / sqrt 2) / (l t) = 9/8 E t = E t / (1 - 1/9)).
 * In that lattice each orthogonal member is shared by the two cells beside it, so a cloned
 * cell carries each of its four as a half member (A_o / 2); where two cells meet their halves
 * add up to A_o, and a member on the beam's edge keeps its half. (Our reading: with whole
 * members on the edges the beam comes out 1/ny stiffer than the plate; with halves a uniform
 * tension gives E t exactly, tests/sim/test_growth_truss.c.)
 *
 * Growth: one cell at the bottom left; each generation every cell clones itself to its right
 * and upward, where the beam has room and no cell stands (a wave across the beam: nx + ny - 2
 * generations).
 *
 * Solving: the source's cellular automaton (kernels.h) from the current displacements, so a
 * moved load starts from the last answer. Plain Gauss-Seidel needs sweeps in the order of the
 * square of the beam's size or worse (bending is stiffer to relax than stretching).
 * Over-relaxation: Young's optimum for the Laplacian, omega = 2 / (1 + sin(pi / n)) with n the
 * longer side in cells, is too timid here; omega = 2 / (1 + sin(pi / n) / 8) was the best of
 * those tried on the simply supported beam (softcast-bench growth, to a residual of 1e-6:
 * 50x25 in 1,040 sweeps against 8,480 with the Laplacian's 1.88; 200x100 in about 6,100 against
 * 12,500 at 1.993). The residual is checked every RESIDUAL_EVERY sweeps. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "growth_internal.h"
#include "sim/core/sc_base.h"
#include "sim/core/sc_blob.h"

#define RESIDUAL_EVERY 16

sim_truss_params sim_truss_default_params(void)
{
    sim_truss_params p = {50, 25, 0.1, 0.01, 200e9};
    return p;
}

sim_status sim_truss_params_check(const sim_truss_params *p, char *err, size_t err_sz)
{
    if (p->nx < 1 || p->ny < 1 || p->nx > 2000 || p->ny > 2000)
        return (sim_status)sc_fail(err, err_sz, SIM_ERR_ARG,
                                   "truss: cells %dx%d: each side must be 1 to 2000", p->nx, p->ny);
    if ((double)p->nx * p->ny > 1e6)
        return (sim_status)sc_fail(err, err_sz, SIM_ERR_LIMIT,
                                   "truss: %dx%d cells: at most 1,000,000", p->nx, p->ny);
    if (!(p->cell_m > 0 && p->cell_m <= 1e3) || !(p->thickness_m > 0 && p->thickness_m <= 1e3))
        return (sim_status)sc_fail(err, err_sz, SIM_ERR_ARG,
                                   "truss: cell size and thickness must be in (0, 1000] m");
    if (!(p->youngs_pa > 0 && p->youngs_pa <= 1e13))
        return (sim_status)sc_fail(err, err_sz, SIM_ERR_ARG,
                                   "truss: Young's modulus must be in (0, 1e13] Pa");
    return SIM_OK;
}

double sim_truss_area_orthogonal(double l, double t)
{
    return 0.75 * l * t;
}

double sim_truss_area_diagonal(double l, double t)
{
    return 3.0 * sqrt(2.0) / 8.0 * l * t;
}

truss_view truss_view_of(sim_truss *t)
{
    truss_view v;
    v.nx = t->p.nx, v.ny = t->p.ny;
    v.k_orth = t->p.youngs_pa / t->p.cell_m;
    v.k_diag = t->p.youngs_pa / (t->p.cell_m * sqrt(2.0));
    v.ah = t->ah, v.av = t->av, v.ad1 = t->ad1, v.ad2 = t->ad2;
    v.fix = t->fix, v.f = t->f, v.u = t->u;
    return v;
}

/* Every member slot in a fixed order: horizontals, verticals, then each cell's two diagonals. */
static void list_members(sim_truss *t)
{
    const int nx = t->p.nx, ny = t->p.ny, w = nx + 1;
    sim_truss_member *m = t->members;
    for (int j = 0; j <= ny; j++)
        for (int i = 0; i < nx; i++)
            *m++ = (sim_truss_member){i + j * w, i + 1 + j * w, 0, -1, t->ah[j * nx + i]};
    for (int j = 0; j < ny; j++)
        for (int i = 0; i <= nx; i++)
            *m++ = (sim_truss_member){i + j * w, i + (j + 1) * w, 1, -1, t->av[j * w + i]};
    for (int j = 0; j < ny; j++)
        for (int i = 0; i < nx; i++) {
            int c = i + j * nx;
            *m++ = (sim_truss_member){i + j * w, i + 1 + (j + 1) * w, 2, c, t->ad1[c]};
            *m++ = (sim_truss_member){i + 1 + j * w, i + (j + 1) * w, 3, c, t->ad2[c]};
        }
}

/* Clone the cell into (i, j): its members' areas added where they land. */
static void add_cell(sim_truss *t, int i, int j)
{
    const int nx = t->p.nx, w = nx + 1, c = i + j * nx;
    const double half = 0.5 * t->a_orth;
    t->cell[c] = 1;
    t->ncell++;
    t->ah[j * nx + i] += half;       /* bottom */
    t->ah[(j + 1) * nx + i] += half; /* top */
    t->av[j * w + i] += half;        /* left */
    t->av[j * w + i + 1] += half;    /* right */
    t->ad1[c] += t->a_diag;
    t->ad2[c] += t->a_diag;
}

sim_status sim_truss_create(sim_truss **out, const sim_truss_params *p, sim_backend *b, char *err,
                            size_t err_sz)
{
    *out = NULL;
    sim_status st = sim_truss_params_check(p, err, err_sz);
    if (st != SIM_OK)
        return st;
    sim_truss *t = sc_calloc(1, sizeof *t);
    if (!t)
        return (sim_status)sc_fail(err, err_sz, SIM_ERR_NOMEM, "truss: out of memory");
    const size_t nx = (size_t)p->nx, ny = (size_t)p->ny, nn = (nx + 1) * (ny + 1);
    t->p = *p;
    t->b = b;
    t->nnode = (int)nn;
    t->a_orth = sim_truss_area_orthogonal(p->cell_m, p->thickness_m);
    t->a_diag = sim_truss_area_diagonal(p->cell_m, p->thickness_m);
    t->nmember = (int)(nx * (ny + 1) + (nx + 1) * ny + 2 * nx * ny);
    t->cell = sc_calloc(nx * ny, 1);
    t->ah = sc_calloc(nx * (ny + 1), sizeof(double));
    t->av = sc_calloc((nx + 1) * ny, sizeof(double));
    t->ad1 = sc_calloc(nx * ny, sizeof(double));
    t->ad2 = sc_calloc(nx * ny, sizeof(double));
    t->fix = sc_calloc(nn, 1);
    t->f = sc_calloc(nn * 2, sizeof(double));
    t->u = sc_calloc(nn * 2, sizeof(double));
    t->members = sc_calloc((size_t)t->nmember, sizeof *t->members);
    if (!t->cell || !t->ah || !t->av || !t->ad1 || !t->ad2 || !t->fix || !t->f || !t->u ||
        !t->members) {
        sim_truss_destroy(t);
        return (sim_status)sc_fail(err, err_sz, SIM_ERR_NOMEM, "truss: out of memory");
    }
    double n = (double)(p->nx > p->ny ? p->nx : p->ny);
    t->omega = 2.0 / (1.0 + sin(3.14159265358979323846 / n) / 8.0);
    add_cell(t, 0, 0);
    list_members(t);
    *out = t;
    return SIM_OK;
}

void sim_truss_destroy(sim_truss *t)
{
    if (!t)
        return;
    free(t->cell), free(t->ah), free(t->av), free(t->ad1), free(t->ad2);
    free(t->fix), free(t->f), free(t->u), free(t->members);
    free(t);
}

int sim_truss_grow(sim_truss *t)
{
    const int nx = t->p.nx, ny = t->p.ny;
    /* This generation's clones, found before any is placed (a clone clones next time). */
    uint8_t *born = sc_calloc((size_t)nx * ny, 1);
    if (!born)
        return 0;
    for (int j = 0; j < ny; j++)
        for (int i = 0; i < nx; i++) {
            if (!t->cell[i + j * nx])
                continue;
            if (i + 1 < nx && !t->cell[i + 1 + j * nx])
                born[i + 1 + j * nx] = 1;
            if (j + 1 < ny && !t->cell[i + (j + 1) * nx])
                born[i + (j + 1) * nx] = 1;
        }
    int added = 0;
    for (int c = 0; c < nx * ny; c++)
        if (born[c]) {
            add_cell(t, c % nx, c / nx);
            added++;
        }
    free(born);
    if (added)
        list_members(t);
    return added;
}

void sim_truss_grow_all(sim_truss *t)
{
    while (sim_truss_grow(t) > 0) {
    }
}

int sim_truss_cell_count(const sim_truss *t)
{
    return t->ncell;
}

int sim_truss_has_cell(const sim_truss *t, int i, int j)
{
    return i >= 0 && j >= 0 && i < t->p.nx && j < t->p.ny && t->cell[i + j * t->p.nx];
}

const sim_truss_params *sim_truss_params_of(const sim_truss *t)
{
    return &t->p;
}

static int node_of(const sim_truss *t, int i, int j)
{
    return i >= 0 && j >= 0 && i <= t->p.nx && j <= t->p.ny ? i + j * (t->p.nx + 1) : -1;
}

sim_status sim_truss_support(sim_truss *t, int i, int j, int fix_x, int fix_y)
{
    int n = node_of(t, i, j);
    if (n < 0)
        return SIM_ERR_ARG;
    t->fix[n] = (uint8_t)((fix_x ? TRUSS_FIX_X : 0u) | (fix_y ? TRUSS_FIX_Y : 0u));
    if (fix_x)
        t->u[n * 2] = 0.0;
    if (fix_y)
        t->u[n * 2 + 1] = 0.0;
    return SIM_OK;
}

void sim_truss_clear(sim_truss *t)
{
    memset(t->fix, 0, (size_t)t->nnode);
    memset(t->f, 0, (size_t)t->nnode * 2 * sizeof(double));
}

sim_status sim_truss_load(sim_truss *t, int i, int j, double fx, double fy)
{
    int n = node_of(t, i, j);
    if (n < 0 || !isfinite(fx) || !isfinite(fy))
        return SIM_ERR_ARG;
    t->f[n * 2] = fx;
    t->f[n * 2 + 1] = fy;
    return SIM_OK;
}

void sim_truss_load_case_beam(sim_truss *t, double fy)
{
    sim_truss_clear(t);
    sim_truss_support(t, 0, 0, 1, 1);
    sim_truss_support(t, t->p.nx, 0, 0, 1);
    sim_truss_load(t, t->p.nx / 2, t->p.ny, 0.0, fy);
}

void sim_truss_set_threads(sim_truss *t, int threads)
{
    t->threads = threads > 0 ? threads : 0;
}

void sim_truss_set_omega(sim_truss *t, double omega)
{
    if (omega > 0.0 && omega < 2.0)
        t->omega = omega;
}

double sim_truss_omega(const sim_truss *t)
{
    return t->omega;
}

void sim_truss_reset(sim_truss *t)
{
    memset(t->u, 0, (size_t)t->nnode * 2 * sizeof(double));
}

const double *sim_truss_displacements(const sim_truss *t)
{
    return t->u;
}

/* A node stands when a member reaches it. */
static int node_present(const sim_truss *t, int i, int j)
{
    for (int dj = -1; dj <= 0; dj++)
        for (int di = -1; di <= 0; di++)
            if (sim_truss_has_cell(t, i + di, j + dj))
                return 1;
    return 0;
}

/* Held: the fixed degrees of freedom on standing nodes stop the three rigid motions (x, y and
 * turning). Each fix is a row of the rigid motions' constraint ([1, 0, -y] for x, [0, 1, x]
 * for y, in cells about the beam's middle); held when those rows have rank 3. */
int truss_held(const sim_truss *t)
{
    double G[3][3] = {{0}};
    const double cx = 0.5 * t->p.nx, cy = 0.5 * t->p.ny;
    for (int j = 0; j <= t->p.ny; j++)
        for (int i = 0; i <= t->p.nx; i++) {
            unsigned fx = t->fix[node_of(t, i, j)];
            if (!fx || !node_present(t, i, j))
                continue;
            double rows[2][3] = {{1.0, 0.0, -(j - cy)}, {0.0, 1.0, i - cx}};
            for (int d = 0; d < 2; d++)
                if (fx & (d ? TRUSS_FIX_Y : TRUSS_FIX_X))
                    for (int a = 0; a < 3; a++)
                        for (int b = 0; b < 3; b++)
                            G[a][b] += rows[d][a] * rows[d][b];
        }
    double det = G[0][0] * (G[1][1] * G[2][2] - G[1][2] * G[2][1]) -
                 G[0][1] * (G[1][0] * G[2][2] - G[1][2] * G[2][0]) +
                 G[0][2] * (G[1][0] * G[2][1] - G[1][1] * G[2][0]);
    return det > 1e-9;
}

/* |f - K u| and |f| over the free degrees of freedom of standing nodes. */
static void residual_norms(const sim_truss *t, double *r_norm, double *f_norm)
{
    truss_view v = truss_view_of((sim_truss *)t);
    double rr = 0.0, ff = 0.0;
    for (int j = 0; j <= t->p.ny; j++)
        for (int i = 0; i <= t->p.nx; i++) {
            int n = node_of(t, i, j);
            double K[3], r[2];
            truss_node_residual(&v, i, j, K, r);
            if (K[0] + K[2] == 0.0)
                continue;
            for (int d = 0; d < 2; d++)
                if (!(t->fix[n] & (d ? TRUSS_FIX_Y : TRUSS_FIX_X))) {
                    rr += r[d] * r[d];
                    ff += t->f[n * 2 + d] * t->f[n * 2 + d];
                }
        }
    *r_norm = sqrt(rr), *f_norm = sqrt(ff);
}

double sim_truss_residual(const sim_truss *t)
{
    double r, f;
    residual_norms(t, &r, &f);
    return f > 0.0 ? r / f : r;
}

sim_status sim_truss_relax(sim_truss *t, int max_sweeps, double tol, sim_truss_solve_info *info,
                           char *err, size_t err_sz)
{
    double t0 = sc_now_ms();
    memset(info, 0, sizeof *info);
    if (!truss_held(t))
        return (sim_status)sc_fail(err, err_sz, SIM_ERR_ARG, "%s", TRUSS_NOT_HELD);
    const truss_backend_i *be = truss_backend_for(t->b);
    int done = 0;
    double res = sim_truss_residual(t);
    while (done < max_sweeps && !(res < tol)) {
        int k = max_sweeps - done < RESIDUAL_EVERY ? max_sweeps - done : RESIDUAL_EVERY;
        sim_status st = be->sweeps(t, k, err, err_sz);
        if (st != SIM_OK)
            return st;
        done += k;
        res = sim_truss_residual(t);
    }
    info->iterations = done;
    info->residual = res;
    info->ms = sc_now_ms() - t0;
    return SIM_OK;
}

double sim_truss_member_strain(const sim_truss *t, const sim_truss_member *m)
{
    const int w = t->p.nx + 1;
    double dx = (double)(m->b % w - m->a % w), dy = (double)(m->b / w - m->a / w);
    double len = sqrt(dx * dx + dy * dy);
    double du = t->u[m->b * 2] - t->u[m->a * 2], dv = t->u[m->b * 2 + 1] - t->u[m->a * 2 + 1];
    return (dx * du + dy * dv) / (len * len * t->p.cell_m);
}

void sim_truss_cell_energy(const sim_truss *t, double *out)
{
    const int nx = t->p.nx, ny = t->p.ny, w = nx + 1;
    const double E = t->p.youngs_pa, l = t->p.cell_m, half = 0.5 * t->a_orth;
    for (int j = 0; j < ny; j++)
        for (int i = 0; i < nx; i++) {
            int c = i + j * nx;
            out[c] = 0.0;
            if (!t->cell[c])
                continue;
            int n = i + j * w;
            sim_truss_member o[4] = {{n, n + 1, 0, c, 0},
                                     {n + w, n + w + 1, 0, c, 0},
                                     {n, n + w, 1, c, 0},
                                     {n + 1, n + w + 1, 1, c, 0}};
            sim_truss_member d[2] = {{n, n + w + 1, 2, c, 0}, {n + 1, n + w, 3, c, 0}};
            double so = 0.0, sd = 0.0;
            for (int k = 0; k < 4; k++) {
                double e = sim_truss_member_strain(t, &o[k]);
                so += e * e;
            }
            for (int k = 0; k < 2; k++) {
                double e = sim_truss_member_strain(t, &d[k]);
                sd += e * e;
            }
            out[c] = 0.5 * E * l * (half * so + sqrt(2.0) * t->a_diag * sd);
        }
}

double sim_truss_energy(const sim_truss *t)
{
    double e = 0.0, len[2] = {t->p.cell_m, t->p.cell_m * sqrt(2.0)};
    for (int k = 0; k < t->nmember; k++) {
        const sim_truss_member *m = &t->members[k];
        if (m->area == 0.0)
            continue;
        double s = sim_truss_member_strain(t, m);
        e += 0.5 * t->p.youngs_pa * m->area * s * s * len[m->kind >= 2];
    }
    return e;
}

double sim_truss_load_work(const sim_truss *t)
{
    double w = 0.0;
    for (int k = 0; k < t->nnode * 2; k++)
        w += t->f[k] * t->u[k];
    return w;
}

const sim_truss_member *sim_truss_members(const sim_truss *t, int *n)
{
    *n = t->nmember;
    return t->members;
}

/* Part "GRTR": the extent (a check), the cells, supports, loads and displacements. The areas
 * follow from the cells. */
#define TRUSS_SNAPSHOT_VERSION 1u
static const char k_truss_tag[4] = {'G', 'R', 'T', 'R'};

sim_status sim_truss_save(const sim_truss *t, sc_blob *out)
{
    int32_t dims[2] = {t->p.nx, t->p.ny};
    const size_t nc = (size_t)t->p.nx * (size_t)t->p.ny, nn = (size_t)t->nnode;
    sc_blob_tag(out, k_truss_tag, TRUSS_SNAPSHOT_VERSION);
    SC_PUT(out, dims);
    sc_blob_put(out, t->cell, nc);
    sc_blob_put(out, t->fix, nn);
    sc_blob_put(out, t->f, nn * 2 * sizeof(double));
    sc_blob_put(out, t->u, nn * 2 * sizeof(double));
    return out->failed ? SIM_ERR_NOMEM : SIM_OK;
}

sim_status sim_truss_restore(sim_truss *t, const void *data, size_t n, char *err, size_t err_sz)
{
    sc_reader r = sc_reader_of(data, n);
    int32_t dims[2];
    const size_t nc = (size_t)t->p.nx * (size_t)t->p.ny, nn = (size_t)t->nnode;
    sc_reader_tag(&r, k_truss_tag, TRUSS_SNAPSHOT_VERSION);
    SC_GET(&r, dims);
    if (r.failed || dims[0] != t->p.nx || dims[1] != t->p.ny ||
        r.n - r.at != nc + nn + nn * 4 * sizeof(double))
        return (sim_status)sc_fail(err, err_sz, SIM_ERR_FORMAT,
                                   "truss snapshot: another extent, or damaged%s%s",
                                   r.failed ? ": " : "", r.failed ? r.why : "");
    const uint8_t *p = r.p + r.at;
    for (size_t k = 0; k < nc; k++)
        if (p[k] > 1)
            return (sim_status)sc_fail(err, err_sz, SIM_ERR_FORMAT, "truss snapshot: damaged");
    for (size_t k = 0; k < nn; k++)
        if (p[nc + k] > (TRUSS_FIX_X | TRUSS_FIX_Y))
            return (sim_status)sc_fail(err, err_sz, SIM_ERR_FORMAT, "truss snapshot: damaged");
    for (size_t k = 0; k < nn * 4; k++) {
        double v;
        memcpy(&v, p + nc + nn + k * sizeof v, sizeof v);
        if (!isfinite(v))
            return (sim_status)sc_fail(err, err_sz, SIM_ERR_FORMAT,
                                       "truss snapshot: a load or displacement not finite");
    }
    memset(t->cell, 0, nc), t->ncell = 0;
    memset(t->ah, 0, (size_t)t->p.nx * (size_t)(t->p.ny + 1) * sizeof(double));
    memset(t->av, 0, (size_t)(t->p.nx + 1) * (size_t)t->p.ny * sizeof(double));
    memset(t->ad1, 0, nc * sizeof(double)), memset(t->ad2, 0, nc * sizeof(double));
    for (size_t k = 0; k < nc; k++)
        if (p[k])
            add_cell(t, (int)(k % (size_t)t->p.nx), (int)(k / (size_t)t->p.nx));
    list_members(t);
    memcpy(t->fix, p + nc, nn);
    memcpy(t->f, p + nc + nn, nn * 2 * sizeof(double));
    memcpy(t->u, p + nc + nn + nn * 2 * sizeof(double), nn * 2 * sizeof(double));
    return SIM_OK;
}

uint64_t sim_truss_hash(const sim_truss *t)
{
    const size_t nn = (size_t)t->nnode;
    uint64_t h = sc_hash_bytes(SC_HASH_SEED, t->cell, (size_t)t->p.nx * (size_t)t->p.ny);
    h = sc_hash_bytes(h, t->fix, nn);
    h = sc_hash_bytes(h, t->f, nn * 2 * sizeof(double));
    return sc_hash_bytes(h, t->u, nn * 2 * sizeof(double));
}
