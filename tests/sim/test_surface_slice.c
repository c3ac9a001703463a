/* test_surface_slice.c: Surface Nets extraction and evaluation (sim/volume/surface.c),
 * slices of the deformed volume (sim/volume/slice.c). Volumes are built here. */
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "../harness.h"
#include "sim/core/sc_base.h"
#include "sim/volume/slice.h"
#include "sim/volume/surface.h"

#define SPH_N  20
#define SPH_R  6.0f
#define SPH_C  10.0f
#define ISO_HU (-450.0f)

/* Sphere of radius r at (c,c,c) in an n^3 lattice, spacing 1: 100 HU inside, -1000 HU
 * outside. ramp: HU falls linearly with distance across a 2-unit shell (-450 HU at d = r),
 * so linear edge interpolation finds the sphere; !ramp: a hard step at d = r. */
static int make_sphere(sim_volume *v, int n, float c, float r, int ramp)
{
    memset(v, 0, sizeof(*v));
    v->nx = v->ny = v->nz = n;
    v->spacing_mm[0] = v->spacing_mm[1] = v->spacing_mm[2] = 1.0f;
    v->hu = (float *)sc_calloc((size_t)n * (size_t)n * (size_t)n, sizeof(float));
    if (!v->hu)
        return 0;
    for (int z = 0; z < n; z++)
        for (int y = 0; y < n; y++)
            for (int x = 0; x < n; x++) {
                float dx = (float)x - c, dy = (float)y - c, dz = (float)z - c;
                float d = sqrtf(dx * dx + dy * dy + dz * dz);
                float hu;
                if (ramp)
                    hu = fminf(fmaxf(ISO_HU - 550.0f * (d - r), -1000.0f), 100.0f);
                else
                    hu = d <= r ? 100.0f : -1000.0f;
                v->hu[x + n * (y + n * z)] = hu;
            }
    return 1;
}

static float *rest_positions(int nx, int ny, int nz)
{
    float *p = (float *)sc_calloc((size_t)nx * (size_t)ny * (size_t)nz * 3, sizeof(float));
    if (!p)
        return NULL;
    for (int z = 0; z < nz; z++)
        for (int y = 0; y < ny; y++)
            for (int x = 0; x < nx; x++) {
                float *q = p + 3 * ((size_t)x + (size_t)nx * ((size_t)y + (size_t)ny * (size_t)z));
                q[0] = (float)x, q[1] = (float)y, q[2] = (float)z;
            }
    return p;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Topology of a triangle mesh: undirected edges used by exactly two triangles, directed
 * edges used once (consistent winding), Euler characteristic. Returns 0 on NOMEM. */
typedef struct mesh_topo {
    long nedge;          // distinct undirected edges
    long bad_undirected; // edges not shared by exactly two triangles
    long bad_directed;   // directed edges used more than once
    long degenerate;     // triangles with a repeated vertex
    long euler;          // V - E + F
} mesh_topo;

static int mesh_topology(const sim_surface_data *s, mesh_topo *t)
{
    memset(t, 0, sizeof(*t));
    size_t ne = 3 * (size_t)s->ntri;
    uint64_t *und = (uint64_t *)sc_calloc(ne, sizeof(uint64_t));
    uint64_t *dir = (uint64_t *)sc_calloc(ne, sizeof(uint64_t));
    if (!und || !dir) {
        free(und);
        free(dir);
        return 0;
    }
    for (int f = 0; f < s->ntri; f++) {
        const uint32_t *tr = s->tri + 3 * (size_t)f;
        if (tr[0] == tr[1] || tr[1] == tr[2] || tr[0] == tr[2])
            t->degenerate++;
        for (int k = 0; k < 3; k++) {
            uint64_t a = tr[k], b = tr[(k + 1) % 3];
            dir[3 * (size_t)f + (size_t)k] = a << 32 | b;
            und[3 * (size_t)f + (size_t)k] = a < b ? (a << 32 | b) : (b << 32 | a);
        }
    }
    qsort(und, ne, sizeof(uint64_t), cmp_u64);
    qsort(dir, ne, sizeof(uint64_t), cmp_u64);
    for (size_t i = 0; i < ne;) {
        size_t j = i;
        while (j < ne && und[j] == und[i])
            j++;
        t->nedge++;
        if (j - i != 2)
            t->bad_undirected++;
        i = j;
    }
    for (size_t i = 1; i < ne; i++)
        if (dir[i] == dir[i - 1])
            t->bad_directed++;
    t->euler = (long)s->nvert - t->nedge + (long)s->ntri;
    free(und);
    free(dir);
    return 1;
}

static void check_closed_sphere(int ramp)
{
    sim_volume v;
    REQUIRE(make_sphere(&v, SPH_N, SPH_C, SPH_R, ramp));
    sim_surface_data s;
    char err[256] = "";
    sim_status st = sim_surface_extract(&s, &v, ISO_HU, err, sizeof(err));
    CHECKF(st == SIM_OK, "extract: %s", err);
    mesh_topo t;
    int ok = st == SIM_OK && s.ntri > 0 && mesh_topology(&s, &t);
    CHECK(ok);
    if (ok) {
        th_note("%s sphere r=%.0f: V=%d F=%d E=%ld chi=%ld", ramp ? "ramp" : "step", (double)SPH_R,
                s.nvert, s.ntri, t.nedge, t.euler);
        CHECKF(t.bad_undirected == 0, "%ld edges not shared by exactly 2 triangles",
               t.bad_undirected);
        CHECKF(t.bad_directed == 0, "%ld directed edges repeated (inconsistent winding)",
               t.bad_directed);
        CHECK(t.degenerate == 0);
        CHECKF(t.euler == 2, "Euler characteristic %ld, want 2", t.euler);
        CHECK(2 * t.nedge == 3L * s.ntri);
    }
    sim_surface_data_free(&s);
    free(v.hu);
}

TEST(surface_sphere_is_closed_manifold)
{
    check_closed_sphere(1);
    check_closed_sphere(0);
}

TEST(surface_sphere_vertices_on_sphere)
{
    sim_volume v;
    REQUIRE(make_sphere(&v, SPH_N, SPH_C, SPH_R, 1));
    sim_surface_data s;
    char err[256] = "";
    sim_status st = sim_surface_extract(&s, &v, ISO_HU, err, sizeof(err));
    float *rest = rest_positions(v.nx, v.ny, v.nz);
    float *pos = (float *)sc_calloc((size_t)s.nvert * 3, sizeof(float));
    int ok = st == SIM_OK && s.nvert > 0 && rest && pos;
    CHECKF(ok, "extract: %s", err);
    if (ok) {
        const float one[3] = {1.0f, 1.0f, 1.0f};
        sim_surface_eval(&s, v.nx, v.ny, rest, one, pos);
        float max_err = 0.0f;
        int frac_bad = 0, cell_bad = 0;
        for (int k = 0; k < s.nvert; k++) {
            const float *f = s.vert_frac + 3 * k;
            for (int j = 0; j < 3; j++)
                frac_bad += !(f[j] >= 0.0f && f[j] <= 1.0f);
            uint32_t c = s.vert_cell[k];
            int cx = (int)(c % (uint32_t)v.nx), cy = (int)(c / (uint32_t)v.nx % (uint32_t)v.ny),
                cz = (int)(c / ((uint32_t)v.nx * (uint32_t)v.ny));
            cell_bad += cx >= v.nx - 1 || cy >= v.ny - 1 || cz >= v.nz - 1;
            /* at rest the vertex is its cell corner plus frac */
            const float *p = pos + 3 * k;
            float e0 = fabsf(p[0] - ((float)cx + f[0])), e1 = fabsf(p[1] - ((float)cy + f[1])),
                  e2 = fabsf(p[2] - ((float)cz + f[2]));
            CHECK(e0 < 1e-5f && e1 < 1e-5f && e2 < 1e-5f);
            float dx = p[0] - SPH_C, dy = p[1] - SPH_C, dz = p[2] - SPH_C;
            float e = fabsf(sqrtf(dx * dx + dy * dy + dz * dz) - SPH_R);
            max_err = fmaxf(max_err, e);
        }
        th_note("max |r - %.0f| over %d vertices: %.4f lattice units", (double)SPH_R, s.nvert,
                (double)max_err);
        CHECKF(max_err < 0.6f, "max radial error %.4f >= 0.6", (double)max_err);
        CHECKF(frac_bad == 0, "%d vert_frac components outside [0,1]", frac_bad);
        CHECKF(cell_bad == 0, "%d vert_cell not a valid cell", cell_bad);
    }
    free(rest);
    free(pos);
    sim_surface_data_free(&s);
    free(v.hu);
}

TEST(surface_sphere_normals_outward_and_volume)
{
    sim_volume v;
    REQUIRE(make_sphere(&v, SPH_N, SPH_C, SPH_R, 1));
    sim_surface_data s;
    char err[256] = "";
    sim_status st = sim_surface_extract(&s, &v, ISO_HU, err, sizeof(err));
    float *rest = rest_positions(v.nx, v.ny, v.nz);
    float *pos = (float *)sc_calloc((size_t)s.nvert * 3, sizeof(float));
    int ok = st == SIM_OK && s.ntri > 0 && rest && pos;
    CHECKF(ok, "extract: %s", err);
    if (ok) {
        const float one[3] = {1.0f, 1.0f, 1.0f};
        sim_surface_eval(&s, v.nx, v.ny, rest, one, pos);
        double vol = 0.0;
        int inward = 0, zero_area = 0;
        for (int f = 0; f < s.ntri; f++) {
            const float *a = pos + 3 * s.tri[3 * f], *b = pos + 3 * s.tri[3 * f + 1],
                        *c = pos + 3 * s.tri[3 * f + 2];
            /* relative to the centre so the sum is well conditioned */
            double A[3], B[3], C[3];
            for (int j = 0; j < 3; j++) {
                A[j] = (double)a[j] - (double)SPH_C;
                B[j] = (double)b[j] - (double)SPH_C;
                C[j] = (double)c[j] - (double)SPH_C;
            }
            double bxc[3] = {B[1] * C[2] - B[2] * C[1], B[2] * C[0] - B[0] * C[2],
                             B[0] * C[1] - B[1] * C[0]};
            vol += (A[0] * bxc[0] + A[1] * bxc[1] + A[2] * bxc[2]) / 6.0;
            double u[3] = {B[0] - A[0], B[1] - A[1], B[2] - A[2]};
            double w[3] = {C[0] - A[0], C[1] - A[1], C[2] - A[2]};
            double n[3] = {u[1] * w[2] - u[2] * w[1], u[2] * w[0] - u[0] * w[2],
                           u[0] * w[1] - u[1] * w[0]};
            double cen[3] = {(A[0] + B[0] + C[0]) / 3, (A[1] + B[1] + C[1]) / 3,
                             (A[2] + B[2] + C[2]) / 3};
            /* Elements exactly at the iso level (here those at distance 6 on the axes)
             * collapse neighbouring vertices onto them: zero area, no normal to check. */
            if (n[0] * n[0] + n[1] * n[1] + n[2] * n[2] < 1e-12)
                zero_area++;
            else if (n[0] * cen[0] + n[1] * cen[1] + n[2] * cen[2] <= 0.0)
                inward++;
        }
        double want = 4.0 / 3.0 * 3.14159265358979 * (double)(SPH_R * SPH_R * SPH_R);
        th_note("signed volume %.1f, sphere %.1f (%.2f%%); of %d triangles %d face inward, "
                "%d have zero area",
                vol, want, 100.0 * (vol - want) / want, s.ntri, inward, zero_area);
        CHECKF(vol > 0.0 && fabs(vol - want) < 0.1 * want, "signed volume %.1f vs %.1f", vol, want);
        CHECKF(inward == 0, "%d triangles face the centre", inward);
        CHECKF(zero_area <= 36, "%d zero-area triangles (36 expected: 6 on-axis poles)", zero_area);
    }
    free(rest);
    free(pos);
    sim_surface_data_free(&s);
    free(v.hu);
}

/* A half space touching the border: inside for z <= 4 in 8x7x10. The surface is an open
 * plane: one vertex per cell of the crossing layer, one quad per interior z edge, normals
 * +z, all vertices at the interpolated height. */
TEST(surface_open_at_border_plane)
{
    const int nx = 8, ny = 7, nz = 10;
    sim_volume v;
    memset(&v, 0, sizeof(v));
    v.nx = nx, v.ny = ny, v.nz = nz;
    v.spacing_mm[0] = v.spacing_mm[1] = v.spacing_mm[2] = 1.0f;
    v.hu = (float *)sc_calloc((size_t)(nx * ny * nz), sizeof(float));
    REQUIRE(v.hu);
    for (int i = 0; i < nx * ny * nz; i++)
        v.hu[i] = i / (nx * ny) <= 4 ? 100.0f : -1000.0f;
    sim_surface_data s;
    char err[256] = "";
    sim_status st = sim_surface_extract(&s, &v, 0.0f, err, sizeof(err));
    CHECKF(st == SIM_OK, "extract: %s", err);
    CHECK(s.nvert == (nx - 1) * (ny - 1));
    CHECK(s.ntri == 2 * (nx - 2) * (ny - 2));
    float *rest = rest_positions(nx, ny, nz);
    float *pos = (float *)sc_calloc((size_t)s.nvert * 3, sizeof(float));
    if (st == SIM_OK && rest && pos) {
        const float one[3] = {1.0f, 1.0f, 1.0f};
        sim_surface_eval(&s, nx, ny, rest, one, pos);
        float want_z = 4.0f + 100.0f / 1100.0f, max_dz = 0.0f;
        for (int k = 0; k < s.nvert; k++)
            max_dz = fmaxf(max_dz, fabsf(pos[3 * k + 2] - want_z));
        CHECKF(max_dz < 1e-5f, "plane vertices off z=%.4f by %.2g", (double)want_z, (double)max_dz);
        int wrong = 0;
        for (int f = 0; f < s.ntri; f++) {
            const float *a = pos + 3 * s.tri[3 * f], *b = pos + 3 * s.tri[3 * f + 1],
                        *c = pos + 3 * s.tri[3 * f + 2];
            float nz_ = (b[0] - a[0]) * (c[1] - a[1]) - (b[1] - a[1]) * (c[0] - a[0]);
            wrong += !(nz_ > 0.0f);
        }
        CHECKF(wrong == 0, "%d triangles not facing +z (outside)", wrong);
        mesh_topo t;
        CHECK(mesh_topology(&s, &t));
        CHECK(t.bad_directed == 0);
        CHECK(t.degenerate == 0);
        /* a disc: chi = 1, boundary edges are used once */
        CHECKF(t.euler == 1, "open plane chi %ld, want 1", t.euler);
    }
    free(rest);
    free(pos);
    sim_surface_data_free(&s);
    free(v.hu);
}

TEST(surface_eval_follows_translation)
{
    sim_volume v;
    REQUIRE(make_sphere(&v, SPH_N, SPH_C, SPH_R, 1));
    sim_surface_data s;
    char err[256] = "";
    sim_status st = sim_surface_extract(&s, &v, ISO_HU, err, sizeof(err));
    size_t nelem = (size_t)v.nx * (size_t)v.ny * (size_t)v.nz;
    float *rest = rest_positions(v.nx, v.ny, v.nz);
    float *moved = (float *)sc_calloc(nelem * 3, sizeof(float));
    float *p0 = (float *)sc_calloc((size_t)s.nvert * 3, sizeof(float));
    float *p1 = (float *)sc_calloc((size_t)s.nvert * 3, sizeof(float));
    int ok = st == SIM_OK && s.nvert > 0 && rest && moved && p0 && p1;
    CHECKF(ok, "extract: %s", err);
    if (ok) {
        const float t[3] = {1.5f, -2.0f, 0.25f}, sp[3] = {0.5f, 1.0f, 2.0f};
        for (size_t i = 0; i < nelem; i++)
            for (int j = 0; j < 3; j++)
                moved[3 * i + (size_t)j] = rest[3 * i + (size_t)j] + t[j];
        sim_surface_eval(&s, v.nx, v.ny, rest, sp, p0);
        sim_surface_eval(&s, v.nx, v.ny, moved, sp, p1);
        float max_e = 0.0f;
        for (int k = 0; k < s.nvert; k++)
            for (int j = 0; j < 3; j++) {
                float want = p0[3 * k + j] + t[j] * sp[j];
                max_e = fmaxf(max_e, fabsf(p1[3 * k + j] - want));
            }
        th_note("translation by (1.5,-2,0.25) lattice, spacing (0.5,1,2): max error %.3g mm",
                (double)max_e);
        CHECKF(max_e < 1e-5f, "max error %.3g mm", (double)max_e);
        /* and the rest positions are (cell + frac) * spacing */
        float max_r = 0.0f;
        for (int k = 0; k < s.nvert; k++) {
            uint32_t c = s.vert_cell[k];
            float cc[3] = {(float)(c % (uint32_t)v.nx),
                           (float)(c / (uint32_t)v.nx % (uint32_t)v.ny),
                           (float)(c / ((uint32_t)v.nx * (uint32_t)v.ny))};
            for (int j = 0; j < 3; j++)
                max_r =
                    fmaxf(max_r, fabsf(p0[3 * k + j] - (cc[j] + s.vert_frac[3 * k + j]) * sp[j]));
        }
        CHECKF(max_r < 1e-5f, "rest eval off by %.3g mm", (double)max_r);
    }
    free(rest);
    free(moved);
    free(p0);
    free(p1);
    sim_surface_data_free(&s);
    free(v.hu);
}

TEST(surface_extract_errors_and_empty)
{
    char err[256] = "";
    sim_surface_data s;
    CHECK(sim_surface_extract(&s, NULL, 0.0f, err, sizeof(err)) == SIM_ERR_ARG);
    CHECK(err[0] != '\0');
    CHECK(s.nvert == 0 && s.tri == NULL);
    float hu[8] = {0};
    sim_volume v;
    memset(&v, 0, sizeof(v));
    v.nx = 8, v.ny = 1, v.nz = 1;
    v.hu = hu;
    err[0] = '\0';
    CHECK(sim_surface_extract(&s, &v, 0.0f, err, sizeof(err)) == SIM_ERR_ARG);
    CHECK(strstr(err, "8x1x1") != NULL);
    v.nx = 2, v.ny = 2, v.nz = 2;
    CHECK(sim_surface_extract(&s, &v, NAN, err, sizeof(err)) == SIM_ERR_ARG);
    /* iso above every value: empty and fine */
    CHECK(sim_surface_extract(&s, &v, 50.0f, err, sizeof(err)) == SIM_OK);
    CHECK(s.nvert == 0 && s.ntri == 0 && s.tri == NULL && s.vert_cell == NULL);
    /* one corner inside: one vertex, no quad (its edges lie on the border) */
    hu[0] = 100.0f;
    CHECK(sim_surface_extract(&s, &v, 50.0f, err, sizeof(err)) == SIM_OK);
    CHECK(s.nvert == 1 && s.ntri == 0 && s.vert_cell && s.vert_cell[0] == 0);
    if (s.nvert == 1) {
        /* crossings at 0.5 on the 3 edges from corner 0: mean (1/6, 1/6, 1/6) */
        for (int j = 0; j < 3; j++)
            CHECK(fabsf(s.vert_frac[j] - 1.0f / 6.0f) < 1e-6f);
    }
    sim_surface_data_free(&s);
    sim_surface_data_free(&s); /* twice is fine */
}

/* ------------------------------------------------------------------- slices */

TEST(slice_sizes)
{
    int w = -1, h = -1;
    sim_slice_size(5, 6, 7, SIM_PLANE_AXIAL, &w, &h);
    CHECK(w == 5 && h == 6);
    sim_slice_size(5, 6, 7, SIM_PLANE_CORONAL, &w, &h);
    CHECK(w == 5 && h == 7);
    sim_slice_size(5, 6, 7, SIM_PLANE_SAGITTAL, &w, &h);
    CHECK(w == 6 && h == 7);
    sim_slice_size(5, 6, 7, (sim_plane)9, &w, &h);
    CHECK(w == 0 && h == 0);
}

/* At rest each plane's slice is the volume's plane, exactly. */
TEST(slice_at_rest_equals_volume_plane)
{
    sim_volume v;
    REQUIRE(make_sphere(&v, SPH_N, SPH_C, SPH_R, 1));
    const int n = SPH_N, c = (int)SPH_C;
    float *rest = rest_positions(n, n, n);
    float *img = (float *)sc_calloc((size_t)(n * n), sizeof(float));
    char err[256] = "";
    if (rest && img) {
        for (int plane = 0; plane < 3; plane++) {
            for (int index = 0; index < n; index += n - 1 - c) { /* 0, c, n-1: borders too */
                sim_status st = sim_slice_resample(&v, rest, (sim_plane)plane, index, 0.0f, 200.0f,
                                                   img, NULL, err, sizeof(err));
                CHECKF(st == SIM_OK, "plane %d index %d: %s", plane, index, err);
                int diff = 0;
                for (int b = 0; b < n; b++)
                    for (int a = 0; a < n; a++) {
                        int x = plane == 2 ? index : a;
                        int y = plane == 0 ? b : plane == 1 ? index : a;
                        int z = plane == 0 ? index : b;
                        diff += img[a + n * b] != v.hu[x + n * (y + n * z)];
                    }
                CHECKF(diff == 0, "plane %d index %d: %d pixels differ from the volume", plane,
                       index, diff);
            }
        }
    }
    CHECK(rest && img);
    free(rest);
    free(img);
    free(v.hu);
}

/* A uniform translation by (2,0,0) lattice units shifts the axial slice by 2 pixels in x;
 * pixels whose rest point falls outside the lattice are air. */
TEST(slice_follows_integer_translation)
{
    sim_volume v;
    REQUIRE(make_sphere(&v, SPH_N, SPH_C, SPH_R, 1));
    const int n = SPH_N, c = (int)SPH_C;
    for (int i = 0; i < n * n * n;
         i++) /* no air border: the shifted-in air must come from outside */
        v.hu[i] += 50.0f;
    size_t nelem = (size_t)n * (size_t)n * (size_t)n;
    float *rest = rest_positions(n, n, n);
    float *moved = (float *)sc_calloc(nelem * 3, sizeof(float));
    float *a = (float *)sc_calloc((size_t)(n * n), sizeof(float));
    float *b = (float *)sc_calloc((size_t)(n * n), sizeof(float));
    char err[256] = "";
    int ok = rest && moved && a && b;
    CHECK(ok);
    if (ok) {
        memcpy(moved, rest, nelem * 3 * sizeof(float));
        for (size_t i = 0; i < nelem; i++)
            moved[3 * i] += 2.0f;
        CHECK(sim_slice_resample(&v, rest, SIM_PLANE_AXIAL, c, 0, 200, a, NULL, err, sizeof(err)) ==
              SIM_OK);
        CHECK(sim_slice_resample(&v, moved, SIM_PLANE_AXIAL, c, 0, 200, b, NULL, err,
                                 sizeof(err)) == SIM_OK);
        int diff = 0, air_bad = 0;
        for (int y = 0; y < n; y++)
            for (int x = 0; x < n; x++) {
                if (x >= 2)
                    diff += b[x + n * y] != a[(x - 2) + n * y];
                else
                    air_bad += b[x + n * y] != -1000.0f;
            }
        CHECKF(diff == 0, "%d pixels differ from the rest slice shifted by 2", diff);
        CHECKF(air_bad == 0, "%d uncovered pixels not -1000 HU", air_bad);
    }
    free(rest);
    free(moved);
    free(a);
    free(b);
    free(v.hu);
}

/* A smooth non-uniform deformation along x: hu = 10 x at rest, so a pixel's HU reads back
 * the rest x it found; that rest point must map forward (through the trilinear field) onto
 * the pixel. */
TEST(slice_inverts_smooth_deformation)
{
    const int n = 24;
    sim_volume v;
    memset(&v, 0, sizeof(v));
    v.nx = v.ny = v.nz = n;
    v.spacing_mm[0] = v.spacing_mm[1] = v.spacing_mm[2] = 1.0f;
    size_t nelem = (size_t)n * (size_t)n * (size_t)n;
    v.hu = (float *)sc_calloc(nelem, sizeof(float));
    float *pos = rest_positions(n, n, n);
    float *img = (float *)sc_calloc((size_t)(n * n), sizeof(float));
    int ok = v.hu && pos && img;
    CHECK(ok);
    if (ok) {
        for (size_t i = 0; i < nelem; i++) {
            float x = (float)(i % (size_t)n);
            v.hu[i] = 10.0f * x;
            pos[3 * i] = x + 0.6f * sinf(0.25f * x); /* |du/dx| <= 0.15: a contraction */
        }
        char err[256] = "";
        CHECK(sim_slice_resample(&v, pos, SIM_PLANE_AXIAL, 7, 0, 200, img, NULL, err,
                                 sizeof(err)) == SIM_OK);
        float max_res = 0.0f;
        int moved = 0;
        for (int y = 0; y < n; y++)
            for (int x = 2; x < n - 2; x++) { /* stay clear of the clamped ends */
                float q = img[x + n * y] / 10.0f;
                int i0 = (int)floorf(q);
                if (i0 > n - 2)
                    i0 = n - 2;
                float f = q - (float)i0;
                float d0 = pos[3 * (size_t)i0] - (float)i0,
                      d1 = pos[3 * (size_t)(i0 + 1)] - (float)(i0 + 1);
                float fwd = q + (1.0f - f) * d0 + f * d1;
                max_res = fmaxf(max_res, fabsf(fwd - (float)x));
                moved += fabsf(q - (float)x) > 0.1f;
            }
        th_note("fixed-point inversion: max |q + d(q) - p| = %.3g lattice units", (double)max_res);
        CHECKF(max_res < 2e-3f, "residual %.3g", (double)max_res);
        CHECK(moved > n * 4); /* the deformation actually moved tissue */
    }
    free(v.hu);
    free(pos);
    free(img);
}

/* A pulled tent: elements 8..13 stretch to carry a 10-unit pull (|du/dx| = 1.67 > 1), so
 * the plain fixed-point iteration oscillates; the damped steps must still invert it. */
TEST(slice_inverts_steep_tent)
{
    const int n = 24;
    sim_volume v;
    memset(&v, 0, sizeof(v));
    v.nx = v.ny = v.nz = n;
    v.spacing_mm[0] = v.spacing_mm[1] = v.spacing_mm[2] = 1.0f;
    size_t nelem = (size_t)n * (size_t)n * (size_t)n;
    v.hu = (float *)sc_calloc(nelem, sizeof(float));
    float *pos = rest_positions(n, n, n);
    float *img = (float *)sc_calloc((size_t)(n * n), sizeof(float));
    REQUIRE(v.hu && pos && img);
    for (size_t i = 0; i < nelem; i++) {
        float x = (float)(i % (size_t)n);
        v.hu[i] = 10.0f * x;
        float t = (x - 8.0f) / 6.0f;
        pos[3 * i] = x + 10.0f * (t < 0.0f ? 0.0f : t > 1.0f ? 1.0f : t);
    }
    char err[256] = "";
    CHECK(sim_slice_resample(&v, pos, SIM_PLANE_AXIAL, 7, 0, 200, img, NULL, err, sizeof(err)) ==
          SIM_OK);
    float max_res = 0.0f;
    for (int y = 0; y < n; y++)
        for (int x = 9; x < 23; x++) { /* the stretched span lands on 8..23 */
            float q = img[x + n * y] / 10.0f;
            int i0 = (int)floorf(q);
            if (i0 > n - 2)
                i0 = n - 2;
            float f = q - (float)i0;
            float fwd = (1.0f - f) * pos[3 * (size_t)i0] + f * pos[3 * (size_t)(i0 + 1)];
            max_res = fmaxf(max_res, fabsf(fwd - (float)x));
        }
    th_note("steep tent inversion: max |x(q) - p| = %.3g lattice units", (double)max_res);
    CHECKF(max_res < 0.02f, "residual %.3g", (double)max_res);
    free(v.hu);
    free(pos);
    free(img);
}

TEST(slice_window_mapping)
{
    sim_volume v;
    memset(&v, 0, sizeof(v));
    float hu[8] = {-100.0f, 0.0f, 100.0f, -5000.0f, 5000.0f, -50.0f, 50.0f, 99.0f};
    v.nx = 8, v.ny = 1, v.nz = 1;
    v.spacing_mm[0] = v.spacing_mm[1] = v.spacing_mm[2] = 1.0f;
    v.hu = hu;
    float *rest = rest_positions(8, 1, 1);
    REQUIRE(rest);
    uint8_t img[8];
    float got[8];
    char err[256] = "";
    CHECKF(sim_slice_resample(&v, rest, SIM_PLANE_AXIAL, 0, 0.0f, 200.0f, got, img, err,
                              sizeof(err)) == SIM_OK,
           "%s", err);
    /* round((hu + 100) / 200 * 255), clamped */
    const uint8_t want[8] = {0, 128, 255, 0, 255, 64, 191, 254};
    for (int i = 0; i < 8; i++) {
        CHECKF(img[i] == want[i], "hu %.0f -> %d, want %d", (double)hu[i], img[i], want[i]);
        CHECK(got[i] == hu[i]);
    }
    /* img only */
    memset(img, 0xAB, sizeof(img));
    CHECK(sim_slice_resample(&v, rest, SIM_PLANE_AXIAL, 0, 0.0f, 200.0f, NULL, img, err,
                             sizeof(err)) == SIM_OK);
    CHECK(img[1] == 128);
    free(rest);
}

TEST(slice_rejects_bad_arguments)
{
    sim_volume v;
    REQUIRE(make_sphere(&v, 12, 6.0f, 4.0f, 1));
    float *rest = rest_positions(12, 12, 12);
    float img[144];
    char err[256];
    if (rest) {
        err[0] = '\0';
        CHECK(sim_slice_resample(&v, rest, SIM_PLANE_CORONAL, 12, 0, 200, img, NULL, err,
                                 sizeof(err)) == SIM_ERR_ARG);
        th_note("index 12: %s", err);
        CHECK(strstr(err, "coronal") && strstr(err, "[0, 11]"));
        err[0] = '\0';
        CHECK(sim_slice_resample(&v, rest, SIM_PLANE_SAGITTAL, -1, 0, 200, img, NULL, err,
                                 sizeof(err)) == SIM_ERR_ARG);
        CHECK(strstr(err, "sagittal") && strstr(err, "[0, 11]"));
        err[0] = '\0';
        CHECK(sim_slice_resample(&v, rest, SIM_PLANE_AXIAL, 3, 0, 0, img, NULL, err, sizeof(err)) ==
              SIM_ERR_ARG);
        th_note("width 0: %s", err);
        CHECK(strstr(err, "axial") && strstr(err, "width"));
        err[0] = '\0';
        CHECK(sim_slice_resample(&v, rest, SIM_PLANE_AXIAL, 3, NAN, 200, img, NULL, err,
                                 sizeof(err)) == SIM_ERR_ARG);
        CHECK(err[0] != '\0');
        CHECK(sim_slice_resample(&v, rest, SIM_PLANE_AXIAL, 3, 0, INFINITY, img, NULL, err,
                                 sizeof(err)) == SIM_ERR_ARG);
        CHECK(sim_slice_resample(&v, rest, (sim_plane)7, 3, 0, 200, img, NULL, err, sizeof(err)) ==
              SIM_ERR_ARG);
        CHECK(sim_slice_resample(&v, NULL, SIM_PLANE_AXIAL, 3, 0, 200, img, NULL, err,
                                 sizeof(err)) == SIM_ERR_ARG);
        /* NULL err buffer is fine */
        CHECK(sim_slice_resample(&v, rest, SIM_PLANE_AXIAL, 99, 0, 200, img, NULL, NULL, 0) ==
              SIM_ERR_ARG);
    }
    CHECK(rest != NULL);
    free(rest);
    free(v.hu);
}

/* Same bytes with 1, 2 and 3 OpenMP threads, under a non-uniform 3D deformation. */
TEST(slice_deterministic_across_threads)
{
    const int n = SPH_N;
    sim_volume v;
    REQUIRE(make_sphere(&v, n, SPH_C, SPH_R, 1));
    size_t nelem = (size_t)n * (size_t)n * (size_t)n;
    float *pos = rest_positions(n, n, n);
    float *h[3] = {NULL, NULL, NULL};
    uint8_t *g[3] = {NULL, NULL, NULL};
    int ok = pos != NULL;
    for (int k = 0; k < 3; k++) {
        h[k] = (float *)sc_calloc((size_t)(n * n), sizeof(float));
        g[k] = (uint8_t *)sc_calloc((size_t)(n * n), 1);
        ok = ok && h[k] && g[k];
    }
    CHECK(ok);
    if (ok) {
        for (size_t i = 0; i < nelem; i++) {
            float *p = pos + 3 * i;
            float x = p[0], y = p[1], z = p[2];
            p[0] += 0.7f * sinf(0.3f * y + 0.1f * z);
            p[1] += 0.5f * cosf(0.2f * x) * sinf(0.25f * z);
            p[2] += 0.4f * sinf(0.35f * x + 0.2f * y);
        }
        int saved = omp_get_max_threads();
        char err[256] = "";
        for (int plane = 0; plane < 3; plane++) {
            for (int k = 0; k < 3; k++) {
                omp_set_num_threads(k + 1);
                CHECK(sim_slice_resample(&v, pos, (sim_plane)plane, 9, 0, 400, h[k], g[k], err,
                                         sizeof(err)) == SIM_OK);
            }
            for (int k = 1; k < 3; k++) {
                CHECKF(memcmp(h[0], h[k], (size_t)(n * n) * sizeof(float)) == 0,
                       "plane %d: HU differ with %d threads", plane, k + 1);
                CHECKF(memcmp(g[0], g[k], (size_t)(n * n)) == 0,
                       "plane %d: image differs with %d threads", plane, k + 1);
            }
            /* and the deformation changed the slice */
            float *r = rest_positions(n, n, n);
            float *h0 = (float *)sc_calloc((size_t)(n * n), sizeof(float));
            if (r && h0) {
                CHECK(sim_slice_resample(&v, r, (sim_plane)plane, 9, 0, 400, h0, NULL, err,
                                         sizeof(err)) == SIM_OK);
                CHECK(memcmp(h0, h[0], (size_t)(n * n) * sizeof(float)) != 0);
            }
            free(r);
            free(h0);
        }
        omp_set_num_threads(saved);
    }
    free(pos);
    for (int k = 0; k < 3; k++) {
        free(h[k]);
        free(g[k]);
    }
    free(v.hu);
}
