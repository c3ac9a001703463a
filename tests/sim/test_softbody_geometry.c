/* test_softbody_geometry.c: the soft-body geometry pipeline (sim/softbody/geometry.h),
 * each property judged against ground truth computed here: analytic volumes of the
 * phantom's shapes, voxel counts, the covered region recounted from the label map and the
 * surfaces, a deformation applied to the surface directly. Sizes are small (voxels of 2 to
 * 3 mm) so the whole file runs in a few seconds under the sanitisers. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sim/core/sc_base.h"
#include "sim/softbody/geometry.h"
#include "sim/softbody/softbody.h"
#include "tests/harness.h"

#if SIM_HAVE_NIFTI
#include <nifti1_io.h>
#endif

#define PI_D 3.14159265358979323846
/* CHECKF that also gives its verdict. */
#define CHECKF_R(c, ...) (th_checkf(!!(c), __FILE__, __LINE__, __VA_ARGS__), !!(c))

/* ------------------------------------------------------------ helpers */

/* Analytic volume of each phantom label, mm3 (geometry.h: canonical volumes times
 * flatten; the vessel is the ellipsoid's core of radius rv around its long axis). */
static void phantom_volumes(const sim_phantom_organ *s, double vol[4])
{
    double a = s->half_length_mm, b = s->radius_mm, f = s->flatten;
    double rv = s->vessel_radius_mm, rt = s->tumour_radius_mm;
    double organ = 4.0 / 3.0 * PI_D * a * b * b * f;
    vol[SIM_PHANTOM_VESSEL] =
        4.0 / 3.0 * PI_D * a * b * b * (1.0 - pow(1.0 - rv * rv / (b * b), 1.5)) * f;
    vol[SIM_PHANTOM_TUMOUR] = 4.0 / 3.0 * PI_D * rt * rt * rt * f;
    vol[SIM_PHANTOM_PARENCHYMA] = organ - vol[SIM_PHANTOM_VESSEL] - vol[SIM_PHANTOM_TUMOUR];
    vol[0] = organ;
}

static double voxel_mm3(const sim_labelmap *m)
{
    return (double)m->spacing_mm[0] * (double)m->spacing_mm[1] * (double)m->spacing_mm[2];
}

static int make_phantom(sim_labelmap *m, float vox)
{
    char err[256];
    sim_status st = sim_labelmap_phantom(m, NULL, vox, err, sizeof err);
    if (st != SIM_OK)
        printf("  phantom: %s\n", err);
    return st == SIM_OK;
}

/* A surface of the phantom: labels (n of them, 0 = all), opts' defaults otherwise. */
static int make_surface(sim_trimesh *s, const sim_labelmap *m, const int *labels, int n, int iters,
                        int target)
{
    char err[256];
    sim_surface_opts o = sim_default_surface_opts();
    o.smooth_iters = iters;
    o.target_verts = target;
    sim_status st = sim_labelmap_surface(s, m, labels, n, &o, err, sizeof err);
    if (st != SIM_OK)
        printf("  surface: %s\n", err);
    return st == SIM_OK;
}

static double tet_volume(const float *v, const uint32_t *t)
{
    double e[3][3];
    for (int j = 0; j < 3; j++)
        for (int a = 0; a < 3; a++)
            e[j][a] = (double)v[3 * t[j + 1] + (uint32_t)a] - (double)v[3 * t[0] + (uint32_t)a];
    return (e[0][0] * (e[1][1] * e[2][2] - e[1][2] * e[2][1]) -
            e[0][1] * (e[1][0] * e[2][2] - e[1][2] * e[2][0]) +
            e[0][2] * (e[1][0] * e[2][1] - e[1][1] * e[2][0])) /
           6.0;
}

/* ------------------------------------------------------------ the phantom */

TEST(softbody_geometry_phantom_labels_and_analytic_volumes)
{
    sim_labelmap m, m2;
    REQUIRE(make_phantom(&m, 1.5f));
    REQUIRE(make_phantom(&m2, 1.5f));
    size_t n = (size_t)m.nx * (size_t)m.ny * (size_t)m.nz;
    CHECK(m.nx == m2.nx && m.ny == m2.ny && m.nz == m2.nz);
    CHECK(memcmp(m.label, m2.label, n * sizeof *m.label) == 0); /* deterministic */
    size_t count[8];
    sim_labelmap_count(&m, count, 8);
    size_t labelled = count[1] + count[2] + count[3];
    CHECKF(labelled + count[0] == n, "labels other than 0..3: %zu voxels", n - labelled - count[0]);
    sim_phantom_organ s = sim_default_phantom_organ();
    double vol[4];
    phantom_volumes(&s, vol);
    double vx = voxel_mm3(&m);
    const char *name[4] = {"organ", "parenchyma", "tumour", "vessel"};
    for (int l = 0; l < 4; l++) {
        double got = (double)(l == 0 ? labelled : count[l]) * vx;
        CHECKF(fabs(got / vol[l] - 1.0) < 0.02, "%s: %.0f mm3 in voxels, %.0f analytic", name[l],
               got, vol[l]);
        th_note("%s: %.0f mm3 in voxels, %.0f analytic (%+.2f%%)", name[l], got, vol[l],
                100.0 * (got / vol[l] - 1.0));
    }
    /* A background margin all round: the organ never touches the box. */
    int touches = 0;
    for (int z = 0; z < m.nz; z++)
        for (int y = 0; y < m.ny; y++)
            for (int x = 0; x < m.nx; x++)
                if ((x == 0 || y == 0 || z == 0 || x == m.nx - 1 || y == m.ny - 1 ||
                     z == m.nz - 1) &&
                    m.label[(size_t)x + (size_t)m.nx * ((size_t)y + (size_t)m.ny * (size_t)z)])
                    touches = 1;
    CHECK(!touches);
    sim_material_table mat = sim_phantom_materials();
    char err[256];
    CHECKF(sim_labelmap_check(&m, &mat, err, sizeof err) == SIM_OK, "%s", err);
    th_note("phantom %dx%dx%d at 1.5 mm", m.nx, m.ny, m.nz);
    sim_labelmap_free(&m);
    sim_labelmap_free(&m2);
}

/* ------------------------------------------------------------ surfaces */

static int report_ok(const sim_trimesh *s, const char *what, sim_mesh_report *r)
{
    char err[256];
    if (sim_trimesh_check(s, r, err, sizeof err) != SIM_OK)
        return 0;
    int ok = sim_mesh_report_ok(r);
    CHECKF(ok,
           "%s: %d open, %d non-manifold, %d misoriented edges, %d non-manifold vertices, %d "
           "degenerate, volume %g",
           what, r->boundary_edges, r->nonmanifold_edges, r->misoriented_edges,
           r->nonmanifold_verts, r->degenerate_tris, r->volume_mm3);
    return ok;
}

/* Random binary fields exercise every cube case: the surface is closed, manifold and
 * outward in each. */
TEST(softbody_geometry_marching_cubes_closed_manifold_in_every_case)
{
    enum { N = 14 };
    static float f[N * N * N];
    int seen[256] = {0};
    uint32_t h = 12345u;
    for (int trial = 0; trial < 6; trial++) {
        for (int i = 0; i < N * N * N; i++) {
            int x = i % N, y = (i / N) % N, z = i / (N * N);
            h = h * 1664525u + 1013904223u;
            int border = x == 0 || y == 0 || z == 0 || x == N - 1 || y == N - 1 || z == N - 1;
            /* values off the iso level; densities from sparse to dense */
            f[i] = border ? 0.0f : ((h >> 8) % 100u < (uint32_t)(20 + 12 * trial) ? 1.0f : 0.0f);
            f[i] += (float)((h >> 4) & 7u) * 0.01f;
        }
        for (int z = 0; z + 1 < N; z++)
            for (int y = 0; y + 1 < N; y++)
                for (int x = 0; x + 1 < N; x++) {
                    int mask = 0;
                    for (int c = 0; c < 8; c++)
                        mask |=
                            (f[(x + (c & 1)) + N * ((y + ((c >> 1) & 1)) + N * (z + (c >> 2)))] >
                             0.5f)
                            << c;
                    seen[mask] = 1;
                }
        sim_trimesh s;
        float origin[3] = {0, 0, 0}, step[3] = {1, 1, 1};
        char err[256];
        REQUIRE(sim_marching_cubes(&s, f, N, N, N, 0.5f, origin, step, err, sizeof err) == SIM_OK);
        sim_mesh_report r;
        report_ok(&s, "random field", &r);
        sim_trimesh_free(&s);
    }
    int cases = 0;
    for (int k = 1; k < 255; k++)
        cases += seen[k];
    CHECKF(cases == 254, "only %d of the 254 mixed cases were exercised", cases);
}

/* A sampled sphere: the surface encloses 4/3 pi r^3 and faces out. */
TEST(softbody_geometry_marching_cubes_sphere_volume)
{
    enum { N = 40 };
    static float f[N * N * N];
    const double r = 15.3, c = 19.5;
    for (int i = 0; i < N * N * N; i++) {
        double x = i % N - c, y = (i / N) % N - c, z = i / (N * N) - c;
        f[i] = (float)(r - sqrt(x * x + y * y + z * z));
    }
    sim_trimesh s;
    float origin[3] = {0, 0, 0}, step[3] = {1, 1, 1};
    char err[256];
    REQUIRE(sim_marching_cubes(&s, f, N, N, N, 0.0f, origin, step, err, sizeof err) == SIM_OK);
    sim_mesh_report rep;
    report_ok(&s, "sphere", &rep);
    double want = 4.0 / 3.0 * PI_D * r * r * r;
    CHECKF(fabs(rep.volume_mm3 / want - 1.0) < 0.01, "sphere: %.1f enclosed, %.1f analytic",
           rep.volume_mm3, want);
    CHECK(rep.components == 1);
    sim_trimesh_free(&s);
}

/* The organ's surface and each label's: closed, manifold, outward, enclosing the label's
 * voxel volume. */
TEST(softbody_geometry_label_surfaces_closed_and_enclose_voxel_volume)
{
    sim_labelmap m;
    REQUIRE(make_phantom(&m, 2.5f));
    size_t count[4];
    sim_labelmap_count(&m, count, 4);
    const int labels[4] = {0, SIM_PHANTOM_PARENCHYMA, SIM_PHANTOM_TUMOUR, SIM_PHANTOM_VESSEL};
    const int comps[4] = {1, 2, 1, 1}; /* the parenchyma: its outside, and the tumour's hole */
    const char *name[4] = {"organ", "parenchyma", "tumour", "vessel"};
    for (int k = 0; k < 4; k++) {
        sim_trimesh s;
        double t0 = sc_now_ms();
        REQUIRE(make_surface(&s, &m, &labels[k], k ? 1 : 0, 10, 0));
        double ms = sc_now_ms() - t0;
        sim_mesh_report r;
        report_ok(&s, name[k], &r);
        double vox = (double)(k ? count[k] : count[1] + count[2] + count[3]) * voxel_mm3(&m);
        CHECKF(fabs(r.volume_mm3 / vox - 1.0) < 0.03, "%s: encloses %.0f mm3, voxels %.0f", name[k],
               r.volume_mm3, vox);
        CHECKF(r.components == comps[k], "%s: %d pieces", name[k], r.components);
        th_note("%s: %d vertices, encloses %+.2f%% of its voxels, %.1f ms", name[k], s.nvert,
                100.0 * (r.volume_mm3 / vox - 1.0), ms);
        sim_trimesh_free(&s);
    }
    sim_labelmap_free(&m);
}

/* Mean length of the umbrella vector (mean of the neighbours minus the vertex): the
 * staircase a voxel surface carries. */
static double roughness(const sim_trimesh *s)
{
    double *acc = (double *)calloc(4 * (size_t)s->nvert, sizeof(double));
    if (!acc)
        return -1.0;
    for (int t = 0; t < s->ntri; t++)
        for (int k = 0; k < 3; k++) {
            uint32_t v = s->tri[3 * t + k], a = s->tri[3 * t + (k + 1) % 3];
            for (int j = 0; j < 3; j++)
                acc[4 * v + (uint32_t)j] += (double)s->vert[3 * a + (uint32_t)j];
            acc[4 * v + 3] += 1.0;
        }
    double sum = 0.0;
    for (int v = 0; v < s->nvert; v++) {
        double d2 = 0.0;
        for (int j = 0; j < 3; j++) {
            double d = acc[4 * v + j] / acc[4 * v + 3] - (double)s->vert[3 * v + j];
            d2 += d * d;
        }
        sum += sqrt(d2);
    }
    free(acc);
    return sum / s->nvert;
}

TEST(softbody_geometry_taubin_smooths_without_shrinking)
{
    sim_labelmap m;
    REQUIRE(make_phantom(&m, 2.5f));
    sim_trimesh s;
    REQUIRE(make_surface(&s, &m, NULL, 0, 0, 0));
    sim_mesh_report r0, r1;
    report_ok(&s, "marching cubes", &r0);
    double rough0 = roughness(&s);
    char err[256];
    REQUIRE(sim_trimesh_taubin(&s, 10, 0.5f, -0.53f, err, sizeof err) == SIM_OK);
    report_ok(&s, "smoothed", &r1);
    double rough1 = roughness(&s);
    CHECKF(rough1 < 0.5 * rough0, "roughness %.3f mm before, %.3f after", rough0, rough1);
    CHECKF(fabs(r1.volume_mm3 / r0.volume_mm3 - 1.0) < 0.005,
           "volume %.0f mm3 before smoothing, %.0f after", r0.volume_mm3, r1.volume_mm3);
    th_note("Taubin x10: roughness %.3f -> %.3f mm, volume %+.3f%%", rough0, rough1,
            100.0 * (r1.volume_mm3 / r0.volume_mm3 - 1.0));
    sim_trimesh_free(&s);
    sim_labelmap_free(&m);
}

static int cmp_vec3(const void *a, const void *b)
{
    return memcmp(a, b, 3 * sizeof(float));
}

TEST(softbody_geometry_decimation_keeps_a_closed_manifold)
{
    sim_labelmap m;
    REQUIRE(make_phantom(&m, 2.0f));
    sim_trimesh full, dec;
    REQUIRE(make_surface(&full, &m, NULL, 0, 10, 0));
    double t0 = sc_now_ms();
    REQUIRE(make_surface(&dec, &m, NULL, 0, 10, 5000));
    double ms = sc_now_ms() - t0;
    sim_mesh_report rf, rd;
    report_ok(&full, "full", &rf);
    report_ok(&dec, "decimated", &rd);
    CHECKF(dec.nvert >= 4500 && dec.nvert <= 5500, "%d vertices for a target of 5000", dec.nvert);
    CHECKF(fabs(rd.volume_mm3 / rf.volume_mm3 - 1.0) < 0.01, "volume %.0f -> %.0f mm3",
           rf.volume_mm3, rd.volume_mm3);
    /* The simplifier keeps a subset of the vertices where they were. */
    qsort(full.vert, (size_t)full.nvert, 3 * sizeof(float), cmp_vec3);
    int moved = 0;
    for (int v = 0; v < dec.nvert; v++)
        moved +=
            !bsearch(dec.vert + 3 * v, full.vert, (size_t)full.nvert, 3 * sizeof(float), cmp_vec3);
    CHECKF(moved == 0, "%d decimated vertices are not vertices of the full surface", moved);
    th_note("decimated %d -> %d vertices in %.1f ms (surface included), volume %+.3f%%", full.nvert,
            dec.nvert, ms, 100.0 * (rd.volume_mm3 / rf.volume_mm3 - 1.0));
    sim_trimesh_free(&full);
    sim_trimesh_free(&dec);
    sim_labelmap_free(&m);
}

/* ------------------------------------------------------------ tet meshes */

/* The covered region, recounted from its definition (geometry.h): finest cells holding a
 * labelled voxel or a surface vertex (within 1e-4 cells of the cell's box). */
typedef struct cover {
    int d[3], cell;
    uint8_t *in;
    size_t n;
} cover;

static int cover_at(const cover *c, int x, int y, int z)
{
    if (x < 0 || y < 0 || z < 0 || x >= c->d[0] || y >= c->d[1] || z >= c->d[2])
        return 0;
    return c->in[(size_t)x + (size_t)c->d[0] * ((size_t)y + (size_t)c->d[1] * (size_t)z)];
}

static void cover_build(cover *c, const sim_labelmap *m, int cell, const sim_trimesh *s, int ns)
{
    c->cell = cell;
    c->d[0] = (m->nx + cell - 1) / cell, c->d[1] = (m->ny + cell - 1) / cell;
    c->d[2] = (m->nz + cell - 1) / cell;
    c->in = (uint8_t *)calloc((size_t)c->d[0] * c->d[1] * c->d[2], 1);
    for (int z = 0; z < m->nz; z++)
        for (int y = 0; y < m->ny; y++)
            for (int x = 0; x < m->nx; x++)
                if (m->label[(size_t)x + (size_t)m->nx * ((size_t)y + (size_t)m->ny * z)])
                    c->in[(size_t)(x / cell) +
                          (size_t)c->d[0] * ((size_t)(y / cell) + (size_t)c->d[1] * (z / cell))] =
                        1;
    for (int k = 0; k < ns; k++)
        for (int v = 0; v < s[k].nvert; v++) {
            int lo[3], hi[3];
            for (int a = 0; a < 3; a++) {
                double q = (double)s[k].vert[3 * v + a] / ((double)m->spacing_mm[a] * cell);
                lo[a] = (int)floor(q - 1e-4), hi[a] = (int)floor(q + 1e-4);
            }
            for (int z = lo[2]; z <= hi[2]; z++)
                for (int y = lo[1]; y <= hi[1]; y++)
                    for (int x = lo[0]; x <= hi[0]; x++)
                        if (x >= 0 && y >= 0 && z >= 0 && x < c->d[0] && y < c->d[1] && z < c->d[2])
                            c->in[(size_t)x + (size_t)c->d[0] * ((size_t)y + (size_t)c->d[1] * z)] =
                                1;
        }
    c->n = 0;
    for (size_t i = 0; i < (size_t)c->d[0] * c->d[1] * c->d[2]; i++)
        c->n += c->in[i];
}

typedef struct face_key {
    uint32_t v[3]; /* sorted */
    uint32_t tet;
    int8_t even, opp; /* orientation parity; the tet's vertex opposite the face */
} face_key;

static int cmp_face(const void *a, const void *b)
{
    const face_key *x = (const face_key *)a, *y = (const face_key *)b;
    for (int k = 0; k < 3; k++)
        if (x->v[k] != y->v[k])
            return x->v[k] < y->v[k] ? -1 : 1;
    return 0;
}

/* The tet's four faces, each with its vertices sorted and the parity of the sort. */
static void tet_faces(const sim_tetmesh *t, uint32_t k, face_key f[4])
{
    static const int opp_face[4][3] = {{1, 2, 3}, {0, 3, 2}, {0, 1, 3}, {0, 2, 1}};
    for (int j = 0; j < 4; j++) {
        uint32_t v[3];
        for (int i = 0; i < 3; i++)
            v[i] = t->tet[4 * k + (uint32_t)opp_face[j][i]];
        int swaps = 0;
        for (int i = 0; i < 2; i++)
            for (int q = 0; q < 2 - i; q++)
                if (v[q] > v[q + 1]) {
                    uint32_t x = v[q];
                    v[q] = v[q + 1], v[q + 1] = x;
                    swaps++;
                }
        memcpy(f[j].v, v, sizeof v);
        f[j].tet = k, f[j].even = (int8_t)(swaps % 2 == 0), f[j].opp = (int8_t)j;
    }
}

typedef struct conform_report {
    int nonpositive, overshared, same_side, off_boundary, open_edges;
    double min_vol_rel, volume, boundary_area;
    int boundary_faces;
} conform_report;

/* Is boundary triangle f on a cell face between a covered and an uncovered cell? Adds its
 * area. */
static int on_region_boundary(const sim_tetmesh *t, const sim_labelmap *m, const cover *c,
                              const face_key *f, double *area)
{
    double q[3][3], h[3];
    for (int a = 0; a < 3; a++)
        h[a] = (double)m->spacing_mm[a] * c->cell;
    for (int i = 0; i < 3; i++)
        for (int a = 0; a < 3; a++)
            q[i][a] = (double)t->vert[3 * f->v[i] + (uint32_t)a] / h[a];
    for (int a = 0; a < 3; a++) {
        double k = round(q[0][a]);
        if (fabs(q[0][a] - k) > 1e-4 || fabs(q[1][a] - k) > 1e-4 || fabs(q[2][a] - k) > 1e-4)
            continue;
        int b = (a + 1) % 3, d = (a + 2) % 3, cc[3];
        cc[b] = (int)floor((q[0][b] + q[1][b] + q[2][b]) / 3.0);
        cc[d] = (int)floor((q[0][d] + q[1][d] + q[2][d]) / 3.0);
        cc[a] = (int)k;
        int in_hi = cover_at(c, cc[0], cc[1], cc[2]);
        cc[a] -= 1;
        int in_lo = cover_at(c, cc[0], cc[1], cc[2]);
        double u = (q[1][b] - q[0][b]) * h[b], v = (q[1][d] - q[0][d]) * h[d];
        double w = (q[2][b] - q[0][b]) * h[b], x = (q[2][d] - q[0][d]) * h[d];
        *area += 0.5 * fabs(u * x - v * w);
        return in_hi != in_lo;
    }
    return 0;
}

typedef struct dir_edge {
    uint64_t key; /* low << 32 | high */
    int sign;     /* +1 when run low to high */
} dir_edge;

static int cmp_dir_edge(const void *a, const void *b)
{
    const dir_edge *x = (const dir_edge *)a, *y = (const dir_edge *)b;
    return x->key < y->key ? -1 : x->key > y->key;
}

/* Boundary edges run as often one way as the other: the boundary is closed and
 * consistently oriented (voxel unions may share an edge among four faces). */
static int count_open_edges(dir_edge *e, size_t n)
{
    qsort(e, n, sizeof *e, cmp_dir_edge);
    int open = 0;
    for (size_t i = 0; i < n;) {
        size_t j = i;
        int sum = 0;
        while (j < n && e[j].key == e[i].key)
            sum += e[j++].sign;
        open += sum != 0;
        i = j;
    }
    return open;
}

static void add_boundary_face(const face_key *f, dir_edge *e, size_t *ne)
{
    /* outward as the tet sees it: the sorted order for an even parity, else reversed */
    uint32_t cyc[3] = {f->v[0], f->even ? f->v[1] : f->v[2], f->even ? f->v[2] : f->v[1]};
    for (int k = 0; k < 3; k++) {
        uint32_t p = cyc[k], q = cyc[(k + 1) % 3];
        e[*ne].key = p < q ? ((uint64_t)p << 32 | q) : ((uint64_t)q << 32 | p);
        e[*ne].sign = p < q ? 1 : -1;
        (*ne)++;
    }
}

/* Every tet positive; every face shared by at most two tets, from opposite sides; every
 * unshared face on the covered region's boundary; the boundary closed. */
static void check_conforming(const sim_tetmesh *t, const sim_labelmap *m, const cover *c,
                             conform_report *r)
{
    memset(r, 0, sizeof *r);
    double cell_vol = voxel_mm3(m) * c->cell * c->cell * c->cell;
    r->min_vol_rel = 1e30;
    for (int k = 0; k < t->ntet; k++) {
        double v = tet_volume(t->vert, t->tet + 4 * k);
        r->nonpositive += !(v > 0.0);
        r->volume += v;
        r->min_vol_rel = fmin(r->min_vol_rel, v / cell_vol);
    }
    size_t nf = 4 * (size_t)t->ntet, ne = 0;
    face_key *f = (face_key *)malloc(nf * sizeof *f);
    dir_edge *e = (dir_edge *)malloc(3 * nf * sizeof *e);
    if (!f || !e) {
        free(f);
        free(e);
        r->overshared = -1;
        return;
    }
    for (int k = 0; k < t->ntet; k++)
        tet_faces(t, (uint32_t)k, f + 4 * k);
    qsort(f, nf, sizeof *f, cmp_face);
    for (size_t i = 0; i < nf;) {
        size_t j = i + 1;
        while (j < nf && !cmp_face(&f[i], &f[j]))
            j++;
        if (j - i > 2)
            r->overshared++;
        else if (j - i == 2 && f[i].even == f[i + 1].even)
            r->same_side++;
        else if (j - i == 1) {
            r->boundary_faces++;
            r->off_boundary += !on_region_boundary(t, m, c, &f[i], &r->boundary_area);
            add_boundary_face(&f[i], e, &ne);
        }
        i = j;
    }
    r->open_edges = count_open_edges(e, ne);
    free(e);
    free(f);
}

/* Faces between covered and uncovered cells, and their area (mm2). */
static double cover_boundary_area(const cover *c, const sim_labelmap *m)
{
    double h[3], area = 0.0;
    for (int a = 0; a < 3; a++)
        h[a] = (double)m->spacing_mm[a] * c->cell;
    for (int z = -1; z < c->d[2]; z++)
        for (int y = -1; y < c->d[1]; y++)
            for (int x = -1; x < c->d[0]; x++) {
                int here = cover_at(c, x, y, z);
                area += (here != cover_at(c, x + 1, y, z)) * h[1] * h[2];
                area += (here != cover_at(c, x, y + 1, z)) * h[0] * h[2];
                area += (here != cover_at(c, x, y, z + 1)) * h[0] * h[1];
            }
    return area;
}

/* All of check_conforming against the covered region recounted here, plus the volume and
 * the region of each tet. Returns the number of failed checks. */
static int judge_tetmesh(const sim_tetmesh *t, const sim_labelmap *m, int cell,
                         const sim_trimesh *s, int ns, const char *what)
{
    cover c;
    cover_build(&c, m, cell, s, ns);
    conform_report r;
    check_conforming(t, m, &c, &r);
    double cell_vol = voxel_mm3(m) * cell * cell * cell;
    double want_vol = (double)c.n * cell_vol, want_area = cover_boundary_area(&c, m);
    int bad = 0;
    bad += !CHECKF_R(r.nonpositive == 0, "%s: %d tets with volume <= 0", what, r.nonpositive);
    bad += !CHECKF_R(r.overshared == 0, "%s: %d faces shared by 3+ tets", what, r.overshared);
    bad += !CHECKF_R(r.same_side == 0, "%s: %d faces shared from the same side", what, r.same_side);
    bad += !CHECKF_R(r.off_boundary == 0,
                     "%s: %d of %d unshared faces are not on the covered region's boundary "
                     "(hanging vertices)",
                     what, r.off_boundary, r.boundary_faces);
    bad += !CHECKF_R(r.open_edges == 0, "%s: boundary not closed at %d edges", what, r.open_edges);
    bad += !CHECKF_R(fabs(r.volume / want_vol - 1.0) < 1e-6, "%s: tets %.3f mm3, covered %.3f",
                     what, r.volume, want_vol);
    bad +=
        !CHECKF_R(fabs(r.boundary_area / want_area - 1.0) < 1e-6,
                  "%s: boundary %.3f mm2, covered region's %.3f", what, r.boundary_area, want_area);
    th_note("%s: %d tets, %d vertices, %zu covered cells, smallest tet %.4f of a cell", what,
            t->ntet, t->nvert, c.n, r.min_vol_rel);
    free(c.in);
    return bad;
}

/* Each tet's region is its voxel's material (with 1-voxel finest cells a leaf is uniform):
 * checked at each tet's centroid where that voxel is labelled. */
static int count_wrong_regions(const sim_tetmesh *t, const sim_labelmap *m,
                               const sim_material_table *mat)
{
    int wrong = 0;
    for (int k = 0; k < t->ntet; k++) {
        int v[3];
        for (int a = 0; a < 3; a++) {
            double c = 0.0;
            for (int j = 0; j < 4; j++)
                c += (double)t->vert[3 * t->tet[4 * k + j] + (uint32_t)a];
            v[a] = (int)floor(c / 4.0 / (double)m->spacing_mm[a]);
        }
        if (v[0] < 0 || v[1] < 0 || v[2] < 0 || v[0] >= m->nx || v[1] >= m->ny || v[2] >= m->nz)
            continue;
        int l = m->label[(size_t)v[0] + (size_t)m->nx * ((size_t)v[1] + (size_t)m->ny * v[2])];
        for (int i = 0; i < mat->n && l; i++)
            if (mat->entry[i].label == l)
                wrong += t->region[k] != mat->entry[i].region;
    }
    return wrong;
}

static int make_tets(sim_tetmesh *t, const sim_labelmap *m, const sim_trimesh *s, int ns, int lo,
                     int hi, sim_tetmesh_stats *st)
{
    char err[256];
    sim_material_table mat = sim_phantom_materials();
    sim_tetmesh_opts o = {lo, hi};
    sim_status r = sim_tetmesh_build(t, m, &mat, s, ns, &o, st, err, sizeof err);
    if (r != SIM_OK)
        printf("  tet mesh: %s\n", err);
    return r == SIM_OK;
}

/* The multi-resolution meshes (finest cells of 1 and 2 voxels) judged in full; the
 * uniform one (every leaf 1 voxel) must be 6 Kuhn tets per covered cell. */
TEST(softbody_geometry_tetmesh_conforms_and_fills_the_covered_region)
{
    sim_labelmap m;
    REQUIRE(make_phantom(&m, 3.0f));
    const int tumour = SIM_PHANTOM_TUMOUR;
    sim_trimesh s[2];
    REQUIRE(make_surface(&s[0], &m, NULL, 0, 10, 0));
    REQUIRE(make_surface(&s[1], &m, &tumour, 1, 10, 0));
    sim_material_table mat = sim_phantom_materials();
    const int cfg[3][2] = {{1, 16}, {2, 16}, {1, 1}};
    const char *name[3] = {"multi-resolution 1..16 voxels", "multi-resolution 2..16 voxels",
                           "uniform 1 voxel"};
    for (int k = 0; k < 3; k++) {
        sim_tetmesh t;
        sim_tetmesh_stats st;
        double t0 = sc_now_ms();
        REQUIRE(make_tets(&t, &m, s, 2, cfg[k][0], cfg[k][1], &st));
        double ms = sc_now_ms() - t0;
        if (k < 2) {
            judge_tetmesh(&t, &m, cfg[k][0], s, 2, name[k]);
        } else {
            cover c;
            cover_build(&c, &m, 1, s, 2);
            CHECKF((size_t)t.ntet == 6 * c.n && st.kuhn_leaves == t.ntet / 6,
                   "uniform: %d tets for %zu covered cells", t.ntet, c.n);
            free(c.in);
        }
        if (cfg[k][0] == 1) {
            int wrong = count_wrong_regions(&t, &m, &mat);
            CHECKF(wrong == 0, "%s: %d tets carry another region than their voxel's", name[k],
                   wrong);
        }
        th_note("%s: %d tets; leaves by level %d %d %d %d %d, Kuhn %d, corner %d, centre %d, %d "
                "balance splits, %.1f ms",
                name[k], t.ntet, st.leaves[0], st.leaves[1], st.leaves[2], st.leaves[3],
                st.leaves[4], st.kuhn_leaves, st.corner_leaves, st.centre_leaves, st.balance_splits,
                ms);
        sim_tetmesh_free(&t);
    }
    sim_trimesh_free(&s[0]);
    sim_trimesh_free(&s[1]);
    sim_labelmap_free(&m);
}

/* ------------------------------------------------------------ embedding */

/* A smooth deformation of the organ (mm): a bend along its length and a twist about it,
 * amplitudes 10% of its half length. */
static void deform(const float c[3], float a_mm, const float *p, float *out)
{
    double a = (double)a_mm, x = ((double)p[0] - (double)c[0]) / a;
    double y = (double)p[1] - (double)c[1], z = (double)p[2] - (double)c[2];
    double bend = 0.1 * a * sin(0.5 * PI_D * x), twist = 0.3 * x;
    out[0] = (float)((double)p[0] + 0.05 * a * x * x);
    out[1] = (float)((double)c[1] + y * cos(twist) - z * sin(twist) + bend);
    out[2] = (float)((double)c[2] + y * sin(twist) + z * cos(twist));
}

/* Max distance (mm) between where the embedding puts each surface vertex when the tets
 * deform and where the deformation puts it. */
static double surface_error(const sim_embedding *e, const sim_tetmesh *t, const sim_trimesh *s,
                            const float c[3], float a_mm)
{
    float *tv = (float *)malloc(3 * (size_t)t->nvert * sizeof *tv);
    float *mp = (float *)malloc(3 * (size_t)s->nvert * sizeof *mp);
    if (!tv || !mp) {
        free(tv);
        free(mp);
        return 1e30;
    }
    for (int v = 0; v < t->nvert; v++)
        deform(c, a_mm, t->vert + 3 * v, tv + 3 * v);
    sim_embed_eval(e, t->tet, tv, mp);
    double worst = 0.0;
    for (int v = 0; v < s->nvert; v++) {
        float want[3];
        deform(c, a_mm, s->vert + 3 * v, want);
        double d2 = 0.0;
        for (int a = 0; a < 3; a++)
            d2 += ((double)mp[3 * v + a] - (double)want[a]) *
                  ((double)mp[3 * v + a] - (double)want[a]);
        worst = fmax(worst, sqrt(d2));
    }
    free(tv);
    free(mp);
    return worst;
}

static int embed_surface(sim_embedding *e, const sim_tetmesh *t, const sim_trimesh *s)
{
    char err[256];
    sim_status st = sim_embed_points(e, t, s->vert, s->nvert, err, sizeof err);
    if (st != SIM_OK)
        printf("  embed: %s\n", err);
    return st == SIM_OK;
}

/* At rest every embedded vertex maps back onto itself, weights in [0, 1]. */
TEST(softbody_geometry_embedding_exact_at_rest)
{
    sim_labelmap m;
    REQUIRE(make_phantom(&m, 3.0f));
    const int tumour = SIM_PHANTOM_TUMOUR, vessel = SIM_PHANTOM_VESSEL;
    sim_trimesh s[3];
    REQUIRE(make_surface(&s[0], &m, NULL, 0, 10, 0));
    REQUIRE(make_surface(&s[1], &m, &tumour, 1, 10, 0));
    REQUIRE(make_surface(&s[2], &m, &vessel, 1, 10, 0));
    sim_tetmesh t;
    REQUIRE(make_tets(&t, &m, s, 3, 1, 16, NULL));
    float lo[3] = {1e30f, 1e30f, 1e30f}, hi[3] = {-1e30f, -1e30f, -1e30f};
    for (int v = 0; v < s[0].nvert; v++)
        for (int a = 0; a < 3; a++)
            lo[a] = fminf(lo[a], s[0].vert[3 * v + a]), hi[a] = fmaxf(hi[a], s[0].vert[3 * v + a]);
    double size =
        sqrt((double)((hi[0] - lo[0]) * (hi[0] - lo[0]) + (hi[1] - lo[1]) * (hi[1] - lo[1]) +
                      (hi[2] - lo[2]) * (hi[2] - lo[2])));
    for (int k = 0; k < 3; k++) {
        sim_embedding e;
        double t0 = sc_now_ms();
        REQUIRE(embed_surface(&e, &t, &s[k]));
        double ms = sc_now_ms() - t0;
        float *mp = (float *)malloc(3 * (size_t)s[k].nvert * sizeof *mp);
        REQUIRE(mp);
        sim_embed_eval(&e, t.tet, t.vert, mp);
        double worst = 0.0, wmin = 1.0, wmax = 0.0, sum_err = 0.0;
        for (int v = 0; v < s[k].nvert; v++) {
            double d2 = 0.0, sum = 0.0;
            for (int a = 0; a < 3; a++)
                d2 += ((double)mp[3 * v + a] - (double)s[k].vert[3 * v + a]) *
                      ((double)mp[3 * v + a] - (double)s[k].vert[3 * v + a]);
            worst = fmax(worst, sqrt(d2));
            for (int j = 0; j < 4; j++) {
                double w = e.weight[4 * v + j];
                wmin = fmin(wmin, w), wmax = fmax(wmax, w), sum += w;
            }
            sum_err = fmax(sum_err, fabs(sum - 1.0));
        }
        CHECKF(worst < 1e-5 * size, "surface %d: a vertex maps %.3g mm off (organ %.0f mm)", k,
               worst, size);
        CHECKF(wmin >= -1e-5 && wmax <= 1.0 + 1e-5, "surface %d: weights in [%.3g, %.3g]", k, wmin,
               wmax);
        CHECKF(sum_err < 1e-5, "surface %d: weights sum off 1 by %.3g", k, sum_err);
        CHECK(e.outside == 0);
        th_note("surface %d: %d vertices in %d tets, worst %.2g mm (%.2g of the organ), weights "
                "[%.2g, %.6f], %.1f ms",
                k, s[k].nvert, t.ntet, worst, worst / size, wmin, wmax, ms);
        free(mp);
        sim_embedding_free(&e);
    }
    sim_tetmesh_free(&t);
    for (int k = 0; k < 3; k++)
        sim_trimesh_free(&s[k]);
    sim_labelmap_free(&m);
}

/* The multi-resolution mesh against the uniform fine one (every leaf at the finest size),
 * on the same label map and surface. Surface error: the largest distance, in voxels,
 * between where the embedding puts a surface vertex when the tets follow a smooth
 * deformation (deform()) and where the deformation puts it. Both meshes refine to the
 * finest cells around every surface vertex, and a finest leaf is always 6 Kuhn tets, so a
 * vertex sits in the same tet (or one sharing its face) with the same weights in both:
 * checked here at 3 mm voxels, where building the uniform mesh is cheap. */
TEST(softbody_geometry_multires_same_surface_error_as_uniform)
{
    const float vox = 3.0f;
    sim_labelmap m;
    REQUIRE(make_phantom(&m, vox));
    sim_trimesh s;
    REQUIRE(make_surface(&s, &m, NULL, 0, 10, 0));
    sim_tetmesh multi, uni;
    REQUIRE(make_tets(&multi, &m, &s, 1, 1, 16, NULL));
    REQUIRE(make_tets(&uni, &m, &s, 1, 1, 1, NULL));
    sim_embedding em, eu;
    REQUIRE(embed_surface(&em, &multi, &s));
    REQUIRE(embed_surface(&eu, &uni, &s));
    sim_phantom_organ shape = sim_default_phantom_organ();
    float c[3];
    sim_phantom_centre_mm(&shape, vox, c);
    double err_m = surface_error(&em, &multi, &s, c, shape.half_length_mm) / (double)vox;
    double err_u = surface_error(&eu, &uni, &s, c, shape.half_length_mm) / (double)vox;
    CHECKF(err_m < 0.5 && err_u < 0.5, "surface error %.3f (multi) and %.3f (uniform) voxels",
           err_m, err_u);
    CHECKF(fabs(err_m - err_u) <= 1e-4 * err_u, "surface error %.6f (multi), %.6f (uniform)", err_m,
           err_u);
    th_note("%d surface vertices at %.0f mm voxels: multi-resolution %d tets, uniform %d "
            "(%.2fx); surface error %.5f and %.5f voxels",
            s.nvert, (double)vox, multi.ntet, uni.ntet, (double)uni.ntet / multi.ntet, err_m,
            err_u);
    sim_embedding_free(&em);
    sim_embedding_free(&eu);
    sim_tetmesh_free(&multi);
    sim_tetmesh_free(&uni);
    sim_trimesh_free(&s);
    sim_labelmap_free(&m);
}

/* At 1.5 mm voxels: the multi-resolution mesh against the uniform count (6 Kuhn tets per
 * covered cell, recounted here from the label map and the surface; the test above shows the
 * uniform mesh is exactly that, with the same surface error). */
TEST(softbody_geometry_multires_3x_fewer_tets_than_uniform)
{
    const float vox = 1.5f;
    sim_labelmap m;
    REQUIRE(make_phantom(&m, vox));
    sim_trimesh s;
    REQUIRE(make_surface(&s, &m, NULL, 0, 10, 0));
    sim_tetmesh multi;
    double t0 = sc_now_ms();
    REQUIRE(make_tets(&multi, &m, &s, 1, 1, 16, NULL));
    double ms = sc_now_ms() - t0;
    cover c;
    cover_build(&c, &m, 1, &s, 1);
    double uniform = 6.0 * (double)c.n, ratio = uniform / multi.ntet;
    CHECKF(ratio >= 3.0, "uniform %.0f tets, multi-resolution %d: only %.2fx fewer", uniform,
           multi.ntet, ratio);
    sim_embedding em;
    REQUIRE(embed_surface(&em, &multi, &s));
    sim_phantom_organ shape = sim_default_phantom_organ();
    float ctr[3];
    sim_phantom_centre_mm(&shape, vox, ctr);
    double err = surface_error(&em, &multi, &s, ctr, shape.half_length_mm) / (double)vox;
    CHECKF(err < 0.5, "surface error %.3f voxels", err);
    th_note("%d surface vertices at %.1f mm voxels: multi-resolution %d tets (%.0f ms), uniform "
            "%.0f: %.2fx fewer; surface error %.5f voxels",
            s.nvert, (double)vox, multi.ntet, ms, uniform, ratio, err);
    free(c.in);
    sim_embedding_free(&em);
    sim_tetmesh_free(&multi);
    sim_trimesh_free(&s);
    sim_labelmap_free(&m);
}

/* ------------------------------------------------------------ bad input */

static int has(const char *err, const char *what)
{
    return strstr(err, what) != NULL;
}

static int map_zeroed(const sim_labelmap *m)
{
    return m->nx == 0 && m->ny == 0 && m->nz == 0 && !m->label;
}

/* A small map: a block of label 1 and, when extra is non-zero, a voxel of label extra. */
static int small_map(sim_labelmap *m, int extra)
{
    memset(m, 0, sizeof *m);
    m->nx = m->ny = m->nz = 8;
    m->spacing_mm[0] = m->spacing_mm[1] = m->spacing_mm[2] = 1.0f;
    m->label = (uint16_t *)calloc(512, sizeof *m->label);
    if (!m->label)
        return 0;
    for (int z = 2; z < 6; z++)
        for (int y = 2; y < 6; y++)
            for (int x = 2; x < 6; x++)
                m->label[x + 8 * (y + 8 * z)] = 1;
    if (extra)
        m->label[3 + 8 * (4 + 8 * 5)] = (uint16_t)extra;
    return 1;
}

TEST(softbody_geometry_bad_label_maps_and_tables_give_clear_errors)
{
    char err[256] = "";
    sim_material_table mat = sim_phantom_materials();
    sim_labelmap m;
    REQUIRE(small_map(&m, 7));
    CHECK(sim_labelmap_check(&m, &mat, err, sizeof err) == SIM_ERR_ARG);
    CHECKF(has(err, "label 7") && has(err, "no material") && has(err, "x=3 y=4 z=5"), "%s", err);
    sim_tetmesh t;
    CHECK(sim_tetmesh_build(&t, &m, &mat, NULL, 0, NULL, NULL, err, sizeof err) == SIM_ERR_ARG);
    CHECKF(has(err, "label 7") && t.ntet == 0 && !t.tet, "%s", err);
    memset(m.label, 0, 512 * sizeof *m.label);
    CHECK(sim_labelmap_check(&m, &mat, err, sizeof err) == SIM_ERR_ARG);
    CHECKF(has(err, "empty"), "%s", err);
    sim_trimesh s;
    CHECK(sim_labelmap_surface(&s, &m, NULL, 0, NULL, err, sizeof err) == SIM_ERR_ARG);
    CHECKF(has(err, "no voxel") && s.nvert == 0 && !s.vert, "%s", err);
    CHECK(sim_tetmesh_build(&t, &m, &mat, NULL, 0, NULL, NULL, err, sizeof err) == SIM_ERR_ARG);
    CHECKF(has(err, "empty"), "%s", err);
    m.label[0] = 1;
    m.spacing_mm[1] = NAN;
    CHECK(sim_labelmap_check(&m, &mat, err, sizeof err) == SIM_ERR_ARG);
    CHECKF(has(err, "spacing"), "%s", err);
    m.spacing_mm[1] = 1.0f, m.nz = 0;
    CHECK(sim_labelmap_check(&m, &mat, err, sizeof err) == SIM_ERR_ARG);
    CHECKF(has(err, "dims"), "%s", err);
    m.nz = 8;
    /* tables: a duplicate label, a region out of range, no name, label 0 */
    const sim_material dup[2] = {{1, 0, "liver"}, {1, 1, "tumour"}};
    const sim_material big[1] = {{1, 300, "liver"}};
    const sim_material noname[1] = {{1, 0, ""}};
    const sim_material zero[1] = {{0, 0, "air"}};
    const sim_material *bad[4] = {dup, big, noname, zero};
    const int nbad[4] = {2, 1, 1, 1};
    const char *why[4] = {"twice", "region 300", "no material name", "label 0"};
    for (int k = 0; k < 4; k++) {
        sim_material_table bt = {bad[k], nbad[k]};
        CHECK(sim_labelmap_check(&m, &bt, err, sizeof err) == SIM_ERR_ARG);
        CHECKF(has(err, why[k]), "table %d: %s", k, err);
    }
    sim_labelmap_free(&m);
    CHECK(sim_labelmap_check(&m, &mat, err, sizeof err) == SIM_ERR_ARG);
}

TEST(softbody_geometry_absurd_sizes_and_options_give_clear_errors)
{
    char err[256] = "";
    sim_labelmap m;
    const float voxels[3] = {0.0f, -1.0f, NAN};
    for (int k = 0; k < 3; k++) {
        CHECK(sim_labelmap_phantom(&m, NULL, voxels[k], err, sizeof err) == SIM_ERR_ARG);
        CHECKF(has(err, "voxel") && map_zeroed(&m), "%s", err);
    }
    CHECK(sim_labelmap_phantom(&m, NULL, 0.05f, err, sizeof err) == SIM_ERR_LIMIT);
    CHECKF(has(err, "over the limits") && map_zeroed(&m), "%s", err);
    th_note("%s", err);
    sim_phantom_organ shape = sim_default_phantom_organ();
    shape.tumour_radius_mm = 60.0f;
    CHECK(sim_labelmap_phantom(&m, &shape, 3.0f, err, sizeof err) == SIM_ERR_ARG);
    CHECKF(has(err, "tumour"), "%s", err);
    REQUIRE(small_map(&m, 0));
    sim_material_table mat = sim_phantom_materials();
    const int opts[4][2] = {{3, 16}, {4, 2}, {1, 512}, {0, 4}};
    for (int k = 0; k < 4; k++) {
        sim_tetmesh_opts o = {opts[k][0], opts[k][1]};
        sim_tetmesh t;
        CHECK(sim_tetmesh_build(&t, &m, &mat, NULL, 0, &o, NULL, err, sizeof err) == SIM_ERR_ARG);
        CHECKF(has(err, "powers of two"), "cells %d..%d: %s", opts[k][0], opts[k][1], err);
    }
    sim_surface_opts so = sim_default_surface_opts();
    so.taubin_mu = -0.3f; /* not below -lambda: it would shrink */
    sim_trimesh s;
    CHECK(sim_labelmap_surface(&s, &m, NULL, 0, &so, err, sizeof err) == SIM_ERR_ARG);
    CHECKF(has(err, "mu < -lambda"), "%s", err);
    const int absent = 9;
    CHECK(sim_labelmap_surface(&s, &m, &absent, 1, NULL, err, sizeof err) == SIM_ERR_ARG);
    CHECKF(has(err, "no voxel"), "%s", err);
    /* a point a metre from the mesh */
    sim_tetmesh t;
    REQUIRE(sim_tetmesh_build(&t, &m, &mat, NULL, 0, NULL, NULL, err, sizeof err) == SIM_OK);
    const float far[6] = {4.0f, 4.0f, 4.0f, 1000.0f, 4.0f, 4.0f};
    sim_embedding e;
    CHECK(sim_embed_points(&e, &t, far, 2, err, sizeof err) == SIM_ERR_ARG);
    CHECKF(has(err, "point 1") && e.npoint == 0 && !e.weight, "%s", err);
    sim_tetmesh_free(&t);
    sim_labelmap_free(&m);
}

/* ------------------------------------------------------------ NIfTI */

#if SIM_HAVE_NIFTI
/* Write the map as a NIfTI-1 file of the given datatype; values go through conv (the
 * label, or a CT-like value to refuse). */
static int write_nifti_labels(const char *path, const sim_labelmap *m, int dt, float add)
{
    nifti_set_debug_level(0);
    int dims[8] = {3, m->nx, m->ny, m->nz, 1, 1, 1, 1};
    nifti_image *nim = nifti_make_new_nim(dims, dt, 1);
    if (!nim)
        return 0;
    size_t n = (size_t)m->nx * m->ny * m->nz;
    for (size_t i = 0; i < n; i++) {
        float v = (float)m->label[i] + add;
        if (dt == DT_UINT8)
            ((uint8_t *)nim->data)[i] = (uint8_t)v;
        else if (dt == DT_INT16)
            ((int16_t *)nim->data)[i] =
                (int16_t)(add < 0.0f ? (float)m->label[i] * 50.0f + add : v);
        else
            ((float *)nim->data)[i] = v;
    }
    nim->dx = nim->pixdim[1] = m->spacing_mm[0];
    nim->dy = nim->pixdim[2] = m->spacing_mm[1];
    nim->dz = nim->pixdim[3] = m->spacing_mm[2];
    nim->xyz_units = NIFTI_UNITS_MM;
    int ok = nifti_set_filenames(nim, path, 0, 1) == 0;
    if (ok)
        nifti_image_write(nim);
    nifti_image_free(nim);
    return ok && access(path, R_OK) == 0;
}
#endif

TEST(softbody_geometry_nifti_label_maps_in_and_images_refused)
{
#if !SIM_HAVE_NIFTI
    SKIP("built without the NIfTI C library");
#else
    char dir[64], path[128], err[512];
    snprintf(dir, sizeof dir, "/tmp/softcast_sbgeo_XXXXXX");
    REQUIRE(mkdtemp(dir));
    sim_labelmap m;
    REQUIRE(make_phantom(&m, 4.0f));
    size_t n = (size_t)m.nx * m.ny * m.nz;
    const struct {
        const char *name;
        int dt;
        float add;
        sim_status want;
    } cases[5] = {
        {"labels_u8.nii.gz", DT_UINT8, 0.0f, SIM_OK},
        {"labels_i16.nii", DT_INT16, 0.0f, SIM_OK},
        {"labels_f32.nii", DT_FLOAT32, 0.0f, SIM_OK}, /* whole numbers in floats: labels */
        {"ct_f32.nii", DT_FLOAT32, 0.25f, SIM_ERR_FORMAT},
        {"ct_i16.nii", DT_INT16, -1000.0f, SIM_ERR_FORMAT},
    };
    for (int k = 0; k < 5; k++) {
        snprintf(path, sizeof path, "%s/%s", dir, cases[k].name);
        REQUIRE(write_nifti_labels(path, &m, cases[k].dt, cases[k].add));
        sim_labelmap got;
        sim_status st = sim_labelmap_load_nifti(&got, path, NULL, err, sizeof err);
        CHECKF(st == cases[k].want, "%s: status %d: %s", cases[k].name, st, err);
        if (st == SIM_OK) {
            CHECK(got.nx == m.nx && got.ny == m.ny && got.nz == m.nz);
            CHECK(got.spacing_mm[0] == m.spacing_mm[0] && got.spacing_mm[2] == m.spacing_mm[2]);
            CHECKF(memcmp(got.label, m.label, n * sizeof *m.label) == 0, "%s: labels differ",
                   cases[k].name);
        } else {
            CHECKF(has(err, "not a label map") && has(err, cases[k].name) && map_zeroed(&got), "%s",
                   err);
            th_note("%s", strrchr(err, '/') ? strrchr(err, '/') + 1 : err);
        }
        sim_labelmap_free(&got);
        unlink(path);
    }
    rmdir(dir);
    sim_labelmap_free(&m);
#endif
}

/* A segmentation as a clinician brings it (the phantom written to NIfTI) with its material
 * table: the same organ as the phantom's own path, bit for bit; labels sharing a name share
 * a region; every mistake in the table named. */
TEST(softbody_geometry_nifti_segmentation_becomes_a_hybrid_organ)
{
#if !SIM_HAVE_NIFTI
    SKIP("built without the NIfTI C library");
#else
    char dir[64], path[128], err[512];
    snprintf(dir, sizeof dir, "/tmp/softcast_sborg_XXXXXX");
    REQUIRE(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/seg.nii.gz", dir);
    sim_labelmap m;
    REQUIRE(make_phantom(&m, 6.0f));
    REQUIRE(write_nifti_labels(path, &m, DT_UINT8, 0.0f));
    sim_softbody_tets ref, got, shared;
    sim_softbody_organ_opts oo = {6.0f, 800, 1, 8, 0};
    REQUIRE(sim_softbody_tets_phantom(&ref, &oo, err, sizeof err) == SIM_OK);
    sim_status st =
        sim_softbody_tets_labelmap(&got, path, "1=liver,2=tumour,3=vessel", &oo, err, sizeof err);
    CHECKF(st == SIM_OK, "%s", err);
    if (st == SIM_OK) {
        CHECK(got.ntet == ref.ntet && got.nvert == ref.nvert && got.nembed == ref.nembed);
        CHECK(got.nregion == 3 && !strcmp(got.region_name[1], "tumour"));
        CHECK(!memcmp(got.x, ref.x, (size_t)ref.nvert * 3 * sizeof *ref.x));
        CHECK(!memcmp(got.region, ref.region, (size_t)ref.ntet));
    }
    /* The tumour named liver: two regions, the tumour's tets in the liver's. */
    st =
        sim_softbody_tets_labelmap(&shared, path, "1=liver,2=liver,3=vessel", &oo, err, sizeof err);
    CHECKF(st == SIM_OK, "%s", err);
    if (st == SIM_OK && got.ntet == shared.ntet) {
        int moved = 0, wrong = 0;
        for (int t = 0; t < got.ntet; t++) {
            int want = got.region[t] == 2 ? 1 : 0;
            wrong += shared.region[t] != want;
            moved += got.region[t] == 1;
        }
        CHECK(shared.nregion == 2 && !strcmp(shared.region_name[1], "vessel"));
        CHECKF(wrong == 0 && moved > 0, "%d tets in the wrong region (%d tumour tets)", wrong,
               moved);
    }
    const struct {
        const char *spec, *says;
    } bad[] = {
        {"", "none given"},
        {"1=liver,2=tumour", "label 3"},
        {"1=liver,1=vessel,2=a,3=b", "label 1 is given twice"},
        {"1=a,2=b,3=c,4=d,5=e", "at most 4 regions"},
        {"x=liver", "label \"x\""},
        {"1=liver:9", "region 9"},
        {"1=li$ver", "may hold letters"},
        {"1liver", "LABEL=NAME"},
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        sim_softbody_tets t;
        st = sim_softbody_tets_labelmap(&t, path, bad[k].spec, &oo, err, sizeof err);
        CHECKF(st == SIM_ERR_ARG && has(err, bad[k].says) && t.x == NULL,
               "\"%s\": status %d, \"%s\" (want \"%s\")", bad[k].spec, st, err, bad[k].says);
        sim_softbody_tets_free(&t);
    }
    /* Into the tray: centred over the origin, lowest vertex on z = 0. */
    sim_softbody_tets_rest_on_floor(&ref);
    float lo[3] = {1e9f, 1e9f, 1e9f}, hi[3] = {-1e9f, -1e9f, -1e9f};
    for (int i = 0; i < ref.nvert * 3; i++)
        lo[i % 3] = fminf(lo[i % 3], ref.x[i]), hi[i % 3] = fmaxf(hi[i % 3], ref.x[i]);
    CHECKF(fabsf(lo[0] + hi[0]) < 1e-6f && fabsf(lo[1] + hi[1]) < 1e-6f && lo[2] == 0.0f,
           "box %g..%g, %g..%g, %g..", (double)lo[0], (double)hi[0], (double)lo[1], (double)hi[1],
           (double)lo[2]);
    sim_softbody_tets_free(&ref);
    sim_softbody_tets_free(&got);
    sim_softbody_tets_free(&shared);
    sim_labelmap_free(&m);
    unlink(path);
    rmdir(dir);
#endif
}

/* The phantom organ with its inner surfaces: the outer one, the tumour's and the vessel's,
 * each closed and manifold on its own, each enclosing its label's analytic volume (within
 * 10%: 3 mm voxels, smoothed and decimated), each vertex inside its tet at rest. */
TEST(softbody_geometry_organ_inner_surfaces_closed_with_their_volumes)
{
    char err[256];
    sim_softbody_organ_opts oo = sim_softbody_default_organ_opts();
    oo.inner_surfaces = 1;
    sim_softbody_tets t;
    REQUIRE(sim_softbody_tets_phantom(&t, &oo, err, sizeof err) == SIM_OK);
    sim_phantom_organ shape = sim_default_phantom_organ();
    double want[4];
    phantom_volumes(&shape, want);
    const double want_by_region[3] = {want[0], want[SIM_PHANTOM_TUMOUR], want[SIM_PHANTOM_VESSEL]};
    CHECKF(t.nsurface == 3, "%d surfaces", t.nsurface);
    int covered = 0;
    for (int k = 0; k < t.nsurface && k < 3; k++) {
        sim_trimesh m = {t.surface[k].nvert, t.surface[k].ntri, NULL, NULL};
        m.vert = malloc((size_t)m.nvert * 3 * sizeof *m.vert);
        m.tri = malloc((size_t)m.ntri * 3 * sizeof *m.tri);
        REQUIRE(m.vert && m.tri);
        for (int i = 0; i < m.nvert; i++) { /* at rest, mm, by its weights in its tet */
            int v = t.surface[k].vert0 + i;
            const int32_t *t4 = &t.tet[t.embed_tet[v] * 4];
            for (int c = 0; c < 3; c++) {
                float p = 0.0f;
                for (int j = 0; j < 4; j++)
                    p += t.embed_w[v * 4 + j] * t.x[t4[j] * 3 + c];
                m.vert[i * 3 + c] = p * 1e3f;
            }
            for (int j = 0; j < 4; j++)
                covered += t.embed_w[v * 4 + j] >= -1e-5f && t.embed_w[v * 4 + j] <= 1.0f + 1e-5f;
        }
        int bad = 0;
        for (int j = 0; j < m.ntri * 3; j++) {
            int64_t local = (int64_t)t.embed_tri[(size_t)t.surface[k].tri0 * 3 + (size_t)j] -
                            t.surface[k].vert0;
            bad += local < 0 || local >= m.nvert;
            m.tri[j] = (uint32_t)(local < 0 ? 0 : local);
        }
        CHECKF(bad == 0, "surface %d: %d triangle corners outside its vertices", k, bad);
        sim_mesh_report r;
        int region = t.surface[k].region;
        CHECK(region == k - 1 + (k > 0)); /* -1 outer, then regions 1 and 2 */
        if (bad == 0 && report_ok(&m, k ? t.region_name[region] : "outer", &r)) {
            double rel = r.volume_mm3 / want_by_region[k] - 1.0;
            th_note("%s: %d vertices, %.0f mm3 against %.0f analytic (%+.1f%%)",
                    k ? t.region_name[region] : "outer", m.nvert, r.volume_mm3, want_by_region[k],
                    100.0 * rel);
            CHECKF(fabs(rel) < 0.10, "surface %d: volume %+.1f%% off its label's", k, 100.0 * rel);
        }
        free(m.vert);
        free(m.tri);
    }
    CHECKF(covered == t.nembed * 4, "%d of %d weights outside [0, 1]", t.nembed * 4 - covered,
           t.nembed * 4);
    sim_softbody_tets_free(&t);
}
