/* test_softbody.c: the softbody scene's surface model (PBD with shape matching), its
 * kernels, its loader and its parent (the tray). Each check is judged against ground truth
 * computed here (a rigid fit by Horn's method, the mesh's volume, analytic poses), not
 * against the code's own output. The hybrid model: test_softbody_hybrid.c. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sim/softbody/kernels.h"
#include "sim/softbody/softbody.h"
#include "tests/harness.h"
#include "tests/scenes/softbody_scenes.h"

#define PI_D 3.14159265358979

typedef struct fixture {
    sim_softbody_model *m;
    sim_backend *b;
    sim_softbody_state *s;
} fixture;

static int organ_open(fixture *f, int n, int threads)
{
    char err[256];
    memset(f, 0, sizeof *f);
    f->m = sbs_organ_model(n);
    return f->m && sim_backend_create(&f->b, SIM_BACKEND_CPU, threads, err, sizeof err) == SIM_OK &&
           sim_softbody_state_create(&f->s, f->m, f->b, err, sizeof err) == SIM_OK;
}

static void fixture_close(fixture *f)
{
    sim_softbody_state_destroy(f->s);
    sim_backend_destroy(f->b);
    sim_softbody_model_destroy(f->m);
}

static void set(sim_softbody_state *s, const sim_softbody_params *p)
{
    char err[256];
    if (sim_softbody_set_params(s, p, err, sizeof err) != SIM_OK)
        fprintf(stderr, "params: %s\n", err);
}

static int run(sim_softbody_state *s, int frames, sim_softbody_metrics *last)
{
    char err[256];
    sim_softbody_metrics mt = {0};
    for (int f = 0; f < frames; f++)
        if (sim_softbody_step(s, &mt, err, sizeof err) != SIM_OK)
            return 0;
    if (last)
        *last = mt;
    return 1;
}

static double rot_angle_deg(const double R[9])
{
    double c = (R[0] + R[4] + R[8] - 1.0) / 2.0;
    return acos(c > 1.0 ? 1.0 : c < -1.0 ? -1.0 : c) * 180.0 / PI_D;
}

/* ---------------------------------------------------------------- kernels */

/* A = R S with S symmetric positive definite: the extraction finds R (the polar rotation),
 * and on flat or inverted A it still returns a unit quaternion. */
TEST(softbody_rotation_extraction_finds_the_polar_rotation)
{
    srand(7);
    float worst = 0.0f;
    for (int trial = 0; trial < 200; trial++) {
        float q[4], len = 0.0f;
        for (int k = 0; k < 4; k++) {
            q[k] = (float)rand() / (float)RAND_MAX - 0.5f;
            len += q[k] * q[k];
        }
        for (int k = 0; k < 4; k++)
            q[k] /= sqrtf(len);
        float R[9], U[9], S[9] = {0}, A[9];
        sb_quat_to_mat(q, R);
        float u[4] = {0.3f, -0.2f, 0.9f, 0.1f * (float)trial}; /* a frame for S */
        float ul = sqrtf(u[0] * u[0] + u[1] * u[1] + u[2] * u[2] + u[3] * u[3]);
        for (int k = 0; k < 4; k++)
            u[k] /= ul;
        sb_quat_to_mat(u, U);
        float ev[3] = {0.5f + (float)(trial % 5) * 0.3f, 1.0f, 2.0f - (float)(trial % 3) * 0.4f};
        for (int r = 0; r < 3; r++) /* S = U diag(ev) U^T */
            for (int c = 0; c < 3; c++)
                for (int k = 0; k < 3; k++)
                    S[r * 3 + c] += U[r * 3 + k] * ev[k] * U[c * 3 + k];
        for (int r = 0; r < 3; r++)
            for (int c = 0; c < 3; c++)
                A[r * 3 + c] = R[r * 3] * S[c] + R[r * 3 + 1] * S[3 + c] + R[r * 3 + 2] * S[6 + c];
        float e[4] = {1.0f, 0.0f, 0.0f, 0.0f}, Re[9];
        sb_extract_rotation(A, e, 100);
        sb_quat_to_mat(e, Re);
        for (int k = 0; k < 9; k++)
            worst = fmaxf(worst, fabsf(Re[k] - R[k]));
    }
    CHECKF(worst < 1e-4f, "largest entry error %g", (double)worst);
    float flat[9] = {1, 0, 0, 0, 1, 0, 0, 0, 0}, inv[9] = {-1, 0, 0, 0, 1, 0, 0, 0, 1};
    float *bad[2] = {flat, inv};
    for (int k = 0; k < 2; k++) {
        float e[4] = {0.5f, 0.5f, 0.5f, 0.5f};
        sb_extract_rotation(bad[k], e, 20);
        float l = sqrtf(e[0] * e[0] + e[1] * e[1] + e[2] * e[2] + e[3] * e[3]);
        CHECKF(isfinite(l) && fabsf(l - 1.0f) < 1e-5f, "degenerate A %d: |q| = %g", k, (double)l);
    }
}

/* The volume gradient of the tet and closed-mesh constraints against finite differences. */
TEST(softbody_volume_gradients_match_finite_differences)
{
    float x[12] = {0.01f,  0.0f,   0.0f,   0.03f,  0.002f, 0.0f,
                   0.012f, 0.025f, 0.001f, 0.015f, 0.01f,  0.02f};
    int32_t t4[4] = {0, 1, 2, 3};
    float worst = 0.0f;
    float g4[4][3];
    CHECK(fabsf(sb_tet_grads(t4, x, g4) - sb_tet_volume(t4, x)) < 1e-12f);
    for (int j = 0; j < 4; j++) {
        const float *g = g4[j];
        for (int k = 0; k < 3; k++) {
            float h = 1e-4f, s = x[j * 3 + k];
            x[j * 3 + k] = s + h;
            double vp = (double)sb_tet_volume(t4, x);
            x[j * 3 + k] = s - h;
            double vm = (double)sb_tet_volume(t4, x);
            x[j * 3 + k] = s;
            worst = fmaxf(worst, fabsf((float)((vp - vm) / (2.0 * (double)h)) - g[k]));
        }
    }
    CHECKF(worst < 1e-6f, "tet volume gradient off by %g m^2", (double)worst);
    CHECK(sb_tet_volume(t4, x) > 0.0f);
}

/* ---------------------------------------------------------------- meshes */

TEST(softbody_organ_is_closed_with_exactly_n_vertices_and_the_ellipsoid_volume)
{
    char err[256];
    int ns[] = {12, 100, 500, 5000};
    for (int k = 0; k < 4; k++) {
        sim_softbody_mesh mesh;
        REQUIRE(sim_softbody_mesh_organ(&mesh, ns[k], err, sizeof err) == SIM_OK);
        CHECK(mesh.nvert == ns[k] && mesh.ntri == 2 * ns[k] - 4);
        CHECKF(sim_softbody_mesh_check(&mesh, err, sizeof err) == SIM_OK, "%d: %s", ns[k], err);
        /* The bend is a shear (y += f(x)): the ellipsoid's volume, 4/3 pi a b c. */
        double v = sim_softbody_mesh_volume(mesh.tri, mesh.ntri, mesh.x),
               ve = 4.0 / 3.0 * PI_D * 0.06 * 0.035 * 0.03;
        if (ns[k] >= 500)
            CHECKF(fabs(v / ve - 1.0) < 0.02, "%d vertices: volume %.3g, ellipsoid %.3g", ns[k], v,
                   ve);
        float lo = 1e9f;
        for (int i = 0; i < mesh.nvert; i++)
            lo = fminf(lo, mesh.x[i * 3 + 2]);
        CHECK(fabsf(lo) < 1e-6f);
        sim_softbody_mesh_free(&mesh);
    }
}

/* A cube read from OFF (triangles) and from OBJ (quads, split into triangles) gives the
 * same closed mesh of volume 1 cm^3; an inward-facing file is turned outward. */
TEST(softbody_loader_reads_off_and_obj)
{
    static const char off[] = "OFF\n# a 1 cm cube\n8 12 0\n"
                              "0 0 0\n0.01 0 0\n0.01 0.01 0\n0 0.01 0\n"
                              "0 0 0.01\n0.01 0 0.01\n0.01 0.01 0.01\n0 0.01 0.01\n"
                              "3 0 2 1\n3 0 3 2\n3 4 5 6\n3 4 6 7\n3 0 1 5\n3 0 5 4\n"
                              "3 1 2 6\n3 1 6 5\n3 2 3 7\n3 2 7 6\n3 3 0 4\n3 3 4 7\n";
    static const char obj[] = "# inward-facing quads\no cube\nv 0 0 0\nv 0.01 0 0\nv 0.01 0.01 0\n"
                              "v 0 0.01 0\nv 0 0 0.01\nv 0.01 0 0.01\nv 0.01 0.01 0.01\n"
                              "v 0 0.01 0.01\nvn 0 0 1\nf 1/1/1 2/1/1 3/1/1 4/1/1\nf 8 7 6 5\n"
                              "f 1 5 6 2\nf 2 6 7 3\nf 3 7 8 4\nf -5 -1 -4 -8\n";
    char err[256];
    sim_softbody_mesh a, b;
    REQUIRE(sim_softbody_mesh_parse(&a, off, sizeof off - 1, "off", err, sizeof err) == SIM_OK);
    REQUIRE(sim_softbody_mesh_parse(&b, obj, sizeof obj - 1, "obj", err, sizeof err) == SIM_OK);
    CHECK(a.nvert == 8 && a.ntri == 12 && b.nvert == 8 && b.ntri == 12);
    CHECK(fabs(sim_softbody_mesh_volume(a.tri, a.ntri, a.x) - 1e-6) < 1e-12);
    CHECK(fabs(sim_softbody_mesh_volume(b.tri, b.ntri, b.x) - 1e-6) < 1e-12);
    sim_softbody_mesh_free(&a);
    sim_softbody_mesh_free(&b);
    /* The same through a file. */
    char path[64];
    snprintf(path, sizeof path, "/tmp/softbody_cube_%ld.off", (long)getpid()); /* one a process */
    FILE *f = fopen(path, "w");
    REQUIRE(f);
    fputs(off, f);
    fclose(f);
    CHECKF(sim_softbody_mesh_load(&a, path, err, sizeof err) == SIM_OK, "%s", err);
    CHECK(a.ntri == 12);
    sim_softbody_mesh_free(&a);
    remove(path);
    CHECK(sim_softbody_mesh_load(&a, "/nonexistent/organ.obj", err, sizeof err) == SIM_ERR_IO);
}

/* Every refusal names its problem. */
TEST(softbody_bad_meshes_are_refused_with_a_reason)
{
    struct {
        const char *text, *fmt, *want;
        sim_status st;
    } cases[] = {
        /* a cube missing a triangle: open */
        {"OFF\n8 11 0\n0 0 0\n0.01 0 0\n0.01 0.01 0\n0 0.01 0\n0 0 0.01\n0.01 0 0.01\n"
         "0.01 0.01 0.01\n0 0.01 0.01\n3 0 2 1\n3 0 3 2\n3 4 5 6\n3 4 6 7\n3 0 1 5\n3 0 5 4\n"
         "3 1 2 6\n3 1 6 5\n3 2 3 7\n3 2 7 6\n3 3 0 4\n",
         "off", "open mesh", SIM_ERR_FORMAT},
        /* a fourth triangle on the edge 0-1: non-manifold */
        {"OFF\n5 5 0\n0 0 0\n0.01 0 0\n0 0.01 0\n0 0 0.01\n0 -0.01 0.01\n3 0 2 1\n3 0 1 3\n"
         "3 1 2 3\n3 0 3 2\n3 0 1 4\n",
         "off", "non-manifold", SIM_ERR_FORMAT},
        /* two tetrahedra sharing one vertex: non-manifold vertex */
        {"OFF\n7 8 0\n0 0 0\n0.01 0 0\n0 0.01 0\n0 0 0.01\n-0.01 0 0\n0 -0.01 0\n0 0 -0.01\n"
         "3 0 2 1\n3 0 1 3\n3 1 2 3\n3 0 3 2\n3 0 4 5\n3 0 6 4\n3 0 5 6\n3 4 6 5\n",
         "off", "vertex 0", SIM_ERR_FORMAT},
        {"OFF\n4 4 0\n0 0 0\n0.01 0 0\nnan 0.01 0\n0 0 0.01\n3 0 2 1\n3 0 1 3\n3 1 2 3\n3 0 3 2\n",
         "off", "not finite", SIM_ERR_FORMAT},
        {"OFF\n4 4 0\n0 0 0\n100 0 0\n0 100 0\n0 0 100\n3 0 2 1\n3 0 1 3\n3 1 2 3\n3 0 3 2\n",
         "off", "across", SIM_ERR_LIMIT},
        {"OFF\n2000000000 4 0\n", "off", "at most", SIM_ERR_LIMIT},
        {"OFF\n4 4 0\n0 0 0\n0.01 0 0\n0 0.01 0\n0 0 0.01\n3 0 2 1\n3 0 1 3\n3 1 2 9\n3 0 3 2\n",
         "off", "vertex index", SIM_ERR_FORMAT},
        {"OFF\n4 4 0\n0 0 0\n0.01 0 0\n", "off", "truncated", SIM_ERR_FORMAT},
        {"v 0 0 0\nv 0.01 0 0\nv 0 0.01 0\nf 1 2 3\nf 1 3 2\n", "obj", "4", SIM_ERR_LIMIT},
        {"v 0 0 0\nf 1 2 3\n", "obj", "face index", SIM_ERR_FORMAT},
        {"OFF\n4 4 0\n0 0 0\n0.01 0 0\n0 0.01 0\n0 0 0.01\n3 0 2 1\n3 0 1 3\n3 1 2 3\n3 0 3 3\n",
         "off", "degenerate", SIM_ERR_FORMAT},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        char err[256] = "";
        sim_softbody_mesh m;
        sim_status st = sim_softbody_mesh_parse(&m, cases[k].text, strlen(cases[k].text),
                                                cases[k].fmt, err, sizeof err);
        CHECKF(st == cases[k].st && strstr(err, cases[k].want), "case %zu: status %d, message '%s'",
               k, (int)st, err);
        CHECK(m.x == NULL && m.tri == NULL);
    }
}

/* ---------------------------------------------------------------- dynamics */

/* Squash (x 1.5, y 1.3, z 0.4 about the centre), twist about x (1.5 rad over the half
 * length), then turn the whole by rot about x. */
static void squash_twist(const float *rest, int n, float rot, float *x)
{
    float c[3] = {0.0f, 0.0f, 0.0f};
    for (int i = 0; i < n; i++)
        for (int k = 0; k < 3; k++)
            c[k] += rest[i * 3 + k] / (float)n;
    for (int i = 0; i < n; i++) {
        float p[3] = {(rest[i * 3] - c[0]) * 1.5f, (rest[i * 3 + 1] - c[1]) * 1.3f,
                      (rest[i * 3 + 2] - c[2]) * 0.4f};
        float a = 1.5f * p[0] / 0.06f, y = p[1] * cosf(a) - p[2] * sinf(a);
        p[2] = p[1] * sinf(a) + p[2] * cosf(a);
        p[1] = y;
        x[i * 3] = c[0] + p[0];
        x[i * 3 + 1] = c[1] + cosf(rot) * p[1] - sinf(rot) * p[2];
        x[i * 3 + 2] = c[2] + sinf(rot) * p[1] + cosf(rot) * p[2];
    }
}

/* Released from a squash, twist and quarter turn with no velocity and nothing acting, the
 * body is back in its rest shape after 2 s, up to a rigid motion: the largest vertex
 * distance after the best rigid fit (Horn) is under 1% of its size (the rest bounding box's
 * diagonal). With distance constraints alone (the source's failed try) the shape does not
 * come back. Both without the volume constraint: the source's pair, edges and shape matching. (How
 * it is turned after 2 s says little: PBD's first, large corrections do not conserve angular
 * momentum, and it spins; rotation is checked by the spinning body below.) */
TEST(softbody_shape_matching_returns_to_rest_and_edges_alone_do_not)
{
    double err_pct[2];
    for (int sm = 0; sm < 2; sm++) {
        fixture fx;
        REQUIRE(organ_open(&fx, 300, 1));
        sim_softbody_params p = sim_softbody_get_params(fx.s);
        p.gravity = 0.0f;
        p.floor_z = -10.0f;
        p.volume_stiffness = 0.0f; /* the source's pair alone: edges and the volume also
                                      restore this shape, so the volume would hide a fault */
        if (!sm)
            p.shape_stiffness = 0.0f;
        set(fx.s, &p);
        int n;
        const float *rest = sim_softbody_model_rest(fx.m, &n);
        float *x = malloc((size_t)n * 3 * sizeof(float));
        char err[256];
        squash_twist(rest, n, (float)(PI_D / 2), x);
        REQUIRE(sim_softbody_set_positions(fx.s, x, NULL, err, sizeof err) == SIM_OK);
        REQUIRE(run(fx.s, 120, NULL));
        double R[9], t[3];
        double worst = sbs_rigid_fit(rest, sim_softbody_positions(fx.s, &n), n, R, t);
        err_pct[sm] = 100.0 * worst / (double)sim_softbody_model_info(fx.m).size;
        free(x);
        fixture_close(&fx);
    }
    th_note("after 2 s: shape matching %.3f%% of the size off rest; edges alone %.1f%%", err_pct[1],
            err_pct[0]);
    CHECKF(err_pct[1] < 1.0, "with shape matching: %.3f%% of the size off rest", err_pct[1]);
    CHECKF(err_pct[0] > 10.0, "edges alone came back to %.3f%% of the size", err_pct[0]);
}

/* Meshes made by others (CGAL's test data, fetched by tests/run-tests.sh): closed ones of
 * any genus, with colours (COFF) or in other units, load at a chosen size and come back to
 * their rest shape as the bean does (within 1% of their size, 2 s after a squash and twist);
 * the ones their authors made open are refused naming the hole; a mesh hundreds of units
 * across read as metres is refused saying so. */
TEST(softbody_meshes_made_by_others_load_and_return_or_are_refused)
{
    char path[1024], msg[1200], err[512];
    TH_DATA("meshes/LIST", path, msg);
    const char *closed[] = {"elephant", "femur", "dino", "knot"};
    for (int k = 0; k < 4; k++) {
        char file[64];
        snprintf(file, sizeof file, "meshes/%s.off", closed[k]);
        TH_DATA(file, path, msg);
        sim_softbody_mesh mesh;
        sim_status st = sim_softbody_mesh_load_sized(&mesh, path, 0.15f, err, sizeof err);
        CHECKF(st == SIM_OK, "%s", err);
        if (st != SIM_OK)
            continue;
        sim_softbody_model *m = NULL;
        sim_backend *b = NULL;
        sim_softbody_state *s = NULL;
        REQUIRE(sim_softbody_model_surface(&m, &mesh, err, sizeof err) == SIM_OK);
        REQUIRE(sim_backend_create(&b, SIM_BACKEND_CPU, 2, err, sizeof err) == SIM_OK);
        REQUIRE(sim_softbody_state_create(&s, m, b, err, sizeof err) == SIM_OK);
        sim_softbody_params p = sim_softbody_get_params(s);
        p.gravity = 0.0f;
        p.floor_z = -10.0f;
        set(s, &p);
        int n;
        const float *rest = sim_softbody_model_rest(m, &n);
        float *x = malloc((size_t)n * 3 * sizeof(float));
        squash_twist(rest, n, (float)(PI_D / 2), x);
        REQUIRE(sim_softbody_set_positions(s, x, NULL, err, sizeof err) == SIM_OK);
        REQUIRE(run(s, 120, NULL));
        double R[9], t[3];
        double worst = sbs_rigid_fit(rest, sim_softbody_positions(s, &n), n, R, t);
        double pct = 100.0 * worst / (double)sim_softbody_model_info(m).size;
        th_note("%s: %d vertices, %d triangles; 2 s after the squash %.3f%% of its size off rest",
                closed[k], mesh.nvert, mesh.ntri, pct);
        CHECKF(pct < 1.0, "%s: %.3f%% of its size off rest", closed[k], pct);
        float size = sim_softbody_model_info(m).size;
        CHECKF(fabsf(size - 0.15f) < 1e-4f, "%s: %g m across, not the 0.15 m asked", closed[k],
               (double)size);
        CHECKF(sim_softbody_guard_resets(s) == 0, "%s: guard resets", closed[k]);
        free(x);
        sim_softbody_state_destroy(s);
        sim_backend_destroy(b);
        sim_softbody_model_destroy(m);
        sim_softbody_mesh_free(&mesh);
    }
    const struct {
        const char *name, *says;
        float size;
    } refused[] = {
        {"elephant-with-holes", "open mesh", 0.15f},
        {"hedra_open", "open mesh", 0.15f},
        {"armadillo", "m across", 0.0f},
    };
    for (int k = 0; k < 3; k++) {
        char file[64];
        snprintf(file, sizeof file, "meshes/%s.off", refused[k].name);
        TH_DATA(file, path, msg);
        sim_softbody_mesh mesh;
        sim_status st = sim_softbody_mesh_load_sized(&mesh, path, refused[k].size, err, sizeof err);
        CHECKF(st != SIM_OK && strstr(err, refused[k].says) && strstr(err, refused[k].name),
               "%s: status %d: %s", refused[k].name, st, st ? err : "loaded");
        th_note("%s", strrchr(err, '/') ? strrchr(err, '/') + 1 : err);
        if (st == SIM_OK)
            sim_softbody_mesh_free(&mesh);
    }
}

/* A body spun about a tilted axis at 3 rad/s with nothing acting keeps spinning in its rest
 * shape: shape matching's rotation follows it (a goal that ignored rotation would stop it).
 * After 1 s it has turned by the angle its damped spin gives (w0 (1 - e^-d) / d for damping
 * d: 1.90 rad) within 10%, and its shape is within 1% of rest. */
TEST(softbody_a_spinning_body_keeps_spinning_in_shape)
{
    fixture fx;
    REQUIRE(organ_open(&fx, 300, 1));
    sim_softbody_params p = sim_softbody_get_params(fx.s);
    p.gravity = 0.0f;
    p.floor_z = -10.0f;
    set(fx.s, &p);
    int n;
    const float *rest = sim_softbody_model_rest(fx.m, &n);
    float c[3] = {0, 0, 0}, w[3] = {0.0f, 3.0f * 0.6f, 3.0f * 0.8f},
          *v = malloc((size_t)n * 3 * sizeof(float));
    for (int i = 0; i < n * 3; i++)
        c[i % 3] += rest[i] / (float)n;
    for (int i = 0; i < n; i++) {
        float r[3] = {rest[i * 3] - c[0], rest[i * 3 + 1] - c[1], rest[i * 3 + 2] - c[2]};
        sb_cross3(w, r, &v[i * 3]);
    }
    char err[256];
    REQUIRE(sim_softbody_set_positions(fx.s, rest, v, err, sizeof err) == SIM_OK);
    REQUIRE(run(fx.s, 60, NULL));
    double R[9], t[3];
    double worst = sbs_rigid_fit(rest, sim_softbody_positions(fx.s, &n), n, R, t);
    double turned = rot_angle_deg(R) * PI_D / 180.0, d = (double)p.damping;
    double want = 3.0 * (1.0 - exp(-d)) / d;
    th_note("turned %.3f rad in 1 s (damped spin: %.3f), shape %.3f%% off rest", turned, want,
            100.0 * worst / (double)sim_softbody_model_info(fx.m).size);
    CHECKF(fabs(turned / want - 1.0) < 0.1, "turned %.3f rad, the damped spin %.3f", turned, want);
    CHECKF(worst < 0.01 * (double)sim_softbody_model_info(fx.m).size, "shape %.3g m off rest",
           worst);
    free(v);
    fixture_close(&fx);
}

static float lowest_z(const float *x, int n)
{
    float lo = INFINITY;
    for (int i = 0; i < n; i++)
        lo = fminf(lo, x[i * 3 + 2]);
    return lo;
}

static float height(const float *x, int n)
{
    float hi = -INFINITY;
    for (int i = 0; i < n; i++)
        hi = fmaxf(hi, x[i * 3 + 2]);
    return hi - lowest_z(x, n);
}

static float lowest_of(const sim_softbody_state *s)
{
    int n;
    const float *x = sim_softbody_positions(s, &n);
    return lowest_z(x, n);
}

static float height_of(const sim_softbody_state *s)
{
    int n;
    const float *x = sim_softbody_positions(s, &n);
    return height(x, n);
}

/* 10 s on the floor under gravity: the volume (the closed mesh's, by the divergence theorem)
 * stays within 5% of rest, no particle ever lies more than 1 mm below the floor, and it comes
 * to rest. Beside it, figures only: the source's settings alone (no volume constraint) lose
 * 8%; distance constraints alone flatten it (the source's "flattens": measured 0.5% left). */
TEST(softbody_rests_on_the_floor_keeping_its_volume)
{
    const char *names[3] = {"default", "source (no volume constraint)", "edges alone"};
    double vol[3];
    float pen = 0.0f, speed = 0.0f;
    for (int v = 0; v < 3; v++) {
        fixture fx;
        REQUIRE(organ_open(&fx, 300, 1));
        sim_softbody_params p = sim_softbody_get_params(fx.s);
        p.volume_stiffness = v ? 0.0f : p.volume_stiffness;
        p.shape_stiffness = v == 2 ? 0.0f : p.shape_stiffness;
        set(fx.s, &p);
        int n, ntri;
        const uint32_t *tri = sim_softbody_model_triangles(fx.m, &ntri);
        sim_softbody_metrics mt = {0};
        for (int f = 0; f < 600; f++) {
            REQUIRE(run(fx.s, 1, &mt));
            if (v == 0)
                pen = fmaxf(pen, -lowest_of(fx.s));
        }
        if (v == 0)
            speed = mt.max_speed;
        vol[v] = sim_softbody_mesh_volume(tri, ntri, sim_softbody_positions(fx.s, &n)) /
                 (double)sim_softbody_model_info(fx.m).rest_volume;
        th_note("%s: volume %.4f of rest after 10 s", names[v], vol[v]);
        fixture_close(&fx);
    }
    CHECKF(fabs(vol[0] - 1.0) < 0.05, "volume %.4f of rest", vol[0]);
    CHECKF(pen < 1e-3f, "a particle %.3g m below the floor", (double)pen);
    CHECKF(speed < 0.01f, "still moving at %.3g m/s after 10 s", (double)speed);
    CHECKF(vol[2] < 0.5, "edges alone kept %.3f of the volume (the source saw it flatten)", vol[2]);
}

static float frand(float lo, float hi)
{
    return lo + (hi - lo) * (float)rand() / (float)RAND_MAX;
}

static void random_quat(float q[4])
{
    float l = 0.0f;
    for (int k = 0; k < 4; k++) {
        q[k] = frand(-1.0f, 1.0f);
        l += q[k] * q[k];
    }
    for (int k = 0; k < 4; k++)
        q[k] /= sqrtf(l);
}

/* One random event of the stability run: grabs, hand jumps of up to a metre, releases,
 * tray jumps and turns, planes added and removed. */
static void random_event(sim_softbody_state *s, int n, int *planes, int *nplanes)
{
    char err[256];
    const float *x = sim_softbody_positions(s, &n);
    float pt[3], q[4];
    switch (rand() % 8) {
    case 0: {
        int i = rand() % n;
        for (int k = 0; k < 3; k++)
            pt[k] = x[i * 3 + k] + frand(-0.01f, 0.01f);
        sim_softbody_grab(s, pt);
        break;
    }
    case 1:
        for (int k = 0; k < 3; k++)
            pt[k] = frand(-1.0f, 1.0f);
        sim_softbody_move_hand(s, pt, err, sizeof err);
        break;
    case 2:
        sim_softbody_release(s);
        break;
    case 3:
        for (int k = 0; k < 3; k++)
            pt[k] = frand(-0.5f, 0.5f);
        random_quat(q);
        sim_softbody_set_parent(s, pt, q, err, sizeof err);
        break;
    case 4:
        if (*nplanes < 4) {
            for (int k = 0; k < 3; k++)
                pt[k] = frand(-1.0f, 1.0f);
            sim_softbody_add_plane(s, pt, frand(-0.3f, 0.0f), rand() % 2, &planes[*nplanes], err,
                                   sizeof err);
            ++*nplanes;
        }
        break;
    case 5:
        if (*nplanes > 0)
            sim_softbody_remove_plane(s, planes[--*nplanes], err, sizeof err);
        break;
    default:
        break;
    }
}

/* Stiffness 1 everywhere (distance, shape, volume, hand), a 1/60 s frame: 10,000 frames, each
 * with a random grab, hand jump, release, tray jump or plane change, never give a NaN (no
 * guard reset) or a speed above the clamp. */
TEST(softbody_stiffness_1_survives_10000_random_grabs_and_tray_moves)
{
    fixture fx;
    REQUIRE(organ_open(&fx, 60, 1));
    sim_softbody_params p = sim_softbody_get_params(fx.s);
    p.distance_stiffness = p.shape_stiffness = p.volume_stiffness = p.grab_stiffness = 1.0f;
    p.grab_radius = 0.03f;
    set(fx.s, &p);
    srand(11);
    int planes[4], nplanes = 0, nonfinite = 0, over = 0, n;
    float fastest = 0.0f;
    for (int f = 0; f < 10000; f++) {
        random_event(fx.s, 60, planes, &nplanes);
        sim_softbody_metrics mt = {0};
        REQUIRE(run(fx.s, 1, &mt));
        const float *x = sim_softbody_positions(fx.s, &n), *v = sim_softbody_velocities(fx.s, &n);
        for (int i = 0; i < n * 3; i++)
            nonfinite += !isfinite(x[i]) || !isfinite(v[i]);
        over += mt.max_speed > p.v_max * 1.0001f;
        fastest = fmaxf(fastest, mt.max_speed);
    }
    th_note("fastest particle %.2f m/s (clamp %.1f)", (double)fastest, (double)p.v_max);
    CHECK(nonfinite == 0);
    CHECK(sim_softbody_guard_resets(fx.s) == 0);
    CHECKF(over == 0, "%d frames above the clamp", over);
    fixture_close(&fx);
}

static void quat_mat_d(const float q[4], double R[9])
{
    double w = q[0], x = q[1], y = q[2], z = q[3];
    double M[9] = {1 - 2 * (y * y + z * z), 2 * (x * y - w * z),     2 * (x * z + w * y),
                   2 * (x * y + w * z),     1 - 2 * (x * x + z * z), 2 * (y * z - w * x),
                   2 * (x * z - w * y),     2 * (y * z + w * x),     1 - 2 * (x * x + y * y)};
    memcpy(R, M, sizeof M);
}

static void axis_quat(float ax, float ay, float az, float angle, float q[4])
{
    float l = sqrtf(ax * ax + ay * ay + az * az);
    q[0] = cosf(angle / 2);
    q[1] = sinf(angle / 2) * ax / l;
    q[2] = sinf(angle / 2) * ay / l;
    q[3] = sinf(angle / 2) * az / l;
}

/* With nothing else acting (no gravity, nothing to touch), a tray translated and turned
 * along a path carries the body rigidly: each particle stays within 1 mm of the tray's pose
 * applied to its rest position, every frame for 3 s. */
TEST(softbody_tray_carries_the_body_rigidly)
{
    fixture fx;
    REQUIRE(organ_open(&fx, 200, 1));
    sim_softbody_params p = sim_softbody_get_params(fx.s);
    p.gravity = 0.0f;
    p.floor_z = -100.0f;
    set(fx.s, &p);
    int n;
    const float *rest = sim_softbody_model_rest(fx.m, &n);
    double worst = 0.0;
    char err[256];
    for (int f = 0; f < 180; f++) {
        float t = (float)(f + 1) / 60.0f, q[4];
        float pos[3] = {0.3f * sinf(2.0f * t), 0.2f * sinf(3.0f * t), 0.1f * t};
        axis_quat(1.0f, 2.0f, 3.0f, 1.5f * sinf(t) + 0.5f * t, q);
        REQUIRE(sim_softbody_set_parent(fx.s, pos, q, err, sizeof err) == SIM_OK);
        REQUIRE(run(fx.s, 1, NULL));
        double R[9];
        quat_mat_d(q, R);
        const float *x = sim_softbody_positions(fx.s, &n);
        for (int i = 0; i < n; i++) {
            double d2 = 0.0;
            for (int r = 0; r < 3; r++) {
                double e = R[r * 3] * (double)rest[i * 3] + R[r * 3 + 1] * (double)rest[i * 3 + 1] +
                           R[r * 3 + 2] * (double)rest[i * 3 + 2] + (double)pos[r] -
                           (double)x[i * 3 + r];
                d2 += e * e;
            }
            worst = fmax(worst, sqrt(d2));
        }
    }
    th_note("largest distance from the carried rest pose: %.3g m", worst);
    CHECKF(worst < 1e-3, "a particle %.3g m from where the tray carries it", worst);
    fixture_close(&fx);
}

/* Gravity once: the body resting in the tray (its floor a plane attached to the tray, the
 * tray lifted, turned about z and moved while the body rests in it) sags as much as the
 * body resting on the world's floor: their heights agree within 0.1 mm, and the sag is real
 * (over 2 mm). Gravity counted twice would double it. */
TEST(softbody_in_the_tray_sags_as_on_the_floor)
{
    float h[2], rest_h = 0.0f;
    char err[256];
    for (int tray = 0; tray < 2; tray++) {
        fixture fx;
        REQUIRE(organ_open(&fx, 300, 1));
        int n;
        const float *rest = sim_softbody_model_rest(fx.m, &n);
        rest_h = height(rest, n);
        if (tray) {
            sim_softbody_params p = sim_softbody_get_params(fx.s);
            p.floor_z = -10.0f;
            set(fx.s, &p);
            float nrm[3] = {0.0f, 0.0f, 1.0f}, pos[3] = {0.3f, -0.2f, 0.8f}, q[4];
            axis_quat(0.0f, 0.0f, 1.0f, 0.7f, q);
            REQUIRE(sim_softbody_add_plane(fx.s, nrm, 0.0f, 1, NULL, err, sizeof err) == SIM_OK);
            REQUIRE(sim_softbody_set_parent(fx.s, pos, q, err, sizeof err) == SIM_OK);
            sim_softbody_state_reset(fx.s); /* at rest in the tray */
        }
        for (int f = 0; f < 300; f++) {
            if (tray && f >= 90 && f < 150) { /* the tray moves and turns, then stays */
                float s = (float)(f - 89) / 60.0f, q[4];
                float pos[3] = {0.3f - 0.5f * s, -0.2f + 0.3f * s, 0.8f - 0.3f * s};
                axis_quat(0.0f, 0.0f, 1.0f, 0.7f + 1.0f * s, q);
                REQUIRE(sim_softbody_set_parent(fx.s, pos, q, err, sizeof err) == SIM_OK);
            }
            REQUIRE(run(fx.s, 1, NULL));
        }
        h[tray] = height_of(fx.s);
        if (tray)
            CHECKF(fabsf(lowest_of(fx.s) - 0.5f) < 1e-3f, "not on the tray's floor: lowest at %g",
                   (double)lowest_of(fx.s));
        fixture_close(&fx);
    }
    th_note("rest height %.2f mm; resting on the floor %.3f mm, in the tray %.3f mm",
            1e3 * (double)rest_h, 1e3 * (double)h[0], 1e3 * (double)h[1]);
    CHECKF(rest_h - h[0] > 2e-3f, "no measurable sag on the floor: %g m", (double)(rest_h - h[0]));
    CHECKF(fabsf(h[1] - h[0]) < 1e-4f, "in the tray %.3f mm, on the floor %.3f mm",
           1e3 * (double)h[1], 1e3 * (double)h[0]);
}

/* Friction: on the tray tilted 20 degrees (tan 20 = 0.36), a body with friction 0.5 holds:
 * once it has sagged into the slope and stopped ringing (2 s; it slips 7 mm more than with
 * friction 3 while it sags), its centre moves under 1 mm down the slope in the next 2 s. With
 * 0.1 it slides
 * (over 10 cm: Coulomb's 2.4 m/s^2 down the slope). */
TEST(softbody_friction_holds_on_a_slope_or_lets_it_slide)
{
    float moved[2];
    float mu[2] = {0.5f, 0.1f};
    char err[256];
    for (int k = 0; k < 2; k++) {
        fixture fx;
        REQUIRE(organ_open(&fx, 200, 1));
        sim_softbody_params p = sim_softbody_get_params(fx.s);
        p.floor_z = -10.0f;
        p.friction = mu[k];
        set(fx.s, &p);
        float nrm[3] = {0.0f, 0.0f, 1.0f}, pos[3] = {0.0f, 0.0f, 0.0f}, q[4];
        axis_quat(0.0f, 1.0f, 0.0f, 20.0f * (float)PI_D / 180.0f, q);
        REQUIRE(sim_softbody_add_plane(fx.s, nrm, 0.0f, 1, NULL, err, sizeof err) == SIM_OK);
        REQUIRE(sim_softbody_set_parent(fx.s, pos, q, err, sizeof err) == SIM_OK);
        sim_softbody_state_reset(fx.s);
        REQUIRE(run(fx.s, 120, NULL)); /* sag into the slope, stop ringing */
        int n;
        float c0[3] = {0}, c1[3] = {0};
        const float *x = sim_softbody_positions(fx.s, &n);
        for (int i = 0; i < n * 3; i++)
            c0[i % 3] += x[i] / (float)n;
        REQUIRE(run(fx.s, 120, NULL));
        x = sim_softbody_positions(fx.s, &n);
        for (int i = 0; i < n * 3; i++)
            c1[i % 3] += x[i] / (float)n;
        /* Down the slope: (cos 20, 0, -sin 20). (Across it the bent organ rocks.) */
        float th = 20.0f * (float)PI_D / 180.0f;
        moved[k] = (c1[0] - c0[0]) * cosf(th) - (c1[2] - c0[2]) * sinf(th);
        fixture_close(&fx);
    }
    th_note("on a 20 degree slope from 2 s to 4 s: friction 0.5 moved %.2f mm, 0.1 moved %.1f cm",
            1e3 * (double)moved[0], 1e2 * (double)moved[1]);
    CHECKF(fabsf(moved[0]) < 1e-3f, "friction 0.5 let it move %.3g m", (double)moved[0]);
    CHECKF(moved[1] > 0.1f, "friction 0.1 held it (moved %.3g m)", (double)moved[1]);
}

/* A wall added while running holds the body back; removed, it no longer does. */
TEST(softbody_planes_come_and_go_while_running)
{
    float reach[2];
    char err[256];
    for (int removed = 0; removed < 2; removed++) {
        fixture fx;
        REQUIRE(organ_open(&fx, 200, 1));
        sim_softbody_params p = sim_softbody_get_params(fx.s);
        p.gravity = 0.0f;
        p.floor_z = -10.0f;
        p.damping = 0.0f;
        set(fx.s, &p);
        REQUIRE(run(fx.s, 5, NULL));
        float wall[3] = {-1.0f, 0.0f, 0.0f};
        int id, n;
        REQUIRE(sim_softbody_add_plane(fx.s, wall, -0.09f, 0, &id, err, sizeof err) == SIM_OK);
        REQUIRE(run(fx.s, 30, NULL));
        if (removed)
            REQUIRE(sim_softbody_remove_plane(fx.s, id, err, sizeof err) == SIM_OK);
        const float *x = sim_softbody_positions(fx.s, &n);
        float *v = malloc((size_t)n * 3 * sizeof(float));
        for (int i = 0; i < n * 3; i++)
            v[i] = i % 3 == 0 ? 0.5f : 0.0f; /* thrown at the wall at 0.5 m/s */
        float *xc = malloc((size_t)n * 3 * sizeof(float));
        memcpy(xc, x, (size_t)n * 3 * sizeof(float));
        REQUIRE(sim_softbody_set_positions(fx.s, xc, v, err, sizeof err) == SIM_OK);
        REQUIRE(run(fx.s, 30, NULL));
        x = sim_softbody_positions(fx.s, &n);
        reach[removed] = -INFINITY;
        for (int i = 0; i < n; i++)
            reach[removed] = fmaxf(reach[removed], x[i * 3]);
        free(v);
        free(xc);
        fixture_close(&fx);
    }
    CHECKF(reach[0] <= 0.09f + 1e-4f, "with the wall at x = 0.09 the body reached %g",
           (double)reach[0]);
    CHECKF(reach[1] > 0.09f + 0.1f, "with the wall removed the body reached only %g",
           (double)reach[1]);
}

/* The hand holds exactly the particles within grab_radius of the picked point (counted
 * here), lifts them (their mean follows at least 60% of the hand's 5 cm), and once let go the
 * body falls back and rests on the floor in its rest shape (within 10% of its size: it sags). */
TEST(softbody_grab_follows_the_hand_and_lets_go)
{
    fixture fx;
    REQUIRE(organ_open(&fx, 300, 1));
    REQUIRE(run(fx.s, 60, NULL));
    int n;
    const float *x = sim_softbody_positions(fx.s, &n);
    int top = 0;
    for (int i = 0; i < n; i++)
        top = x[i * 3 + 2] > x[top * 3 + 2] ? i : top;
    float pick[3] = {x[top * 3], x[top * 3 + 1], x[top * 3 + 2]},
          r = sim_softbody_get_params(fx.s).grab_radius;
    int near = 0;
    for (int i = 0; i < n; i++) {
        float d2 = 0.0f;
        for (int k = 0; k < 3; k++)
            d2 += (x[i * 3 + k] - pick[k]) * (x[i * 3 + k] - pick[k]);
        near += d2 <= r * r;
    }
    int held = sim_softbody_grab(fx.s, pick);
    CHECKF(held == near && held > 0, "held %d, %d within the radius", held, near);
    int *idx = malloc((size_t)held * sizeof(int)), k = 0;
    for (int i = 0; i < n; i++) {
        float d2 = 0.0f;
        for (int b = 0; b < 3; b++)
            d2 += (x[i * 3 + b] - pick[b]) * (x[i * 3 + b] - pick[b]);
        if (d2 <= r * r && k < held)
            idx[k++] = i;
    }
    float z0 = 0.0f, z1 = 0.0f;
    for (int j = 0; j < k; j++)
        z0 += x[idx[j] * 3 + 2] / (float)k;
    char err[256];
    for (int f = 1; f <= 60; f++) {
        float hand[3] = {pick[0], pick[1], pick[2] + 0.05f * (float)f / 60.0f};
        REQUIRE(sim_softbody_move_hand(fx.s, hand, err, sizeof err) == SIM_OK);
        REQUIRE(run(fx.s, 1, NULL));
    }
    x = sim_softbody_positions(fx.s, &n);
    for (int j = 0; j < k; j++)
        z1 += x[idx[j] * 3 + 2] / (float)k;
    CHECKF(z1 - z0 > 0.6f * 0.05f, "the held particles rose %.1f mm of the hand's 50",
           1e3 * (double)(z1 - z0));
    sim_softbody_release(fx.s);
    REQUIRE(run(fx.s, 180, NULL));
    double R[9], t[3];
    const float *rest = sim_softbody_model_rest(fx.m, &n);
    double worst = sbs_rigid_fit(rest, sim_softbody_positions(fx.s, &n), n, R, t);
    CHECKF(lowest_of(fx.s) < 1e-3f, "not back on the floor");
    CHECKF(worst < 0.1 * (double)sim_softbody_model_info(fx.m).size, "%.3g m off its rest shape",
           worst);
    free(idx);
    fixture_close(&fx);
}

/* Everything a step does in parallel (constraint colours, shape matching's chunks, the volume
 * sums, the carry) gives bitwise the same state on 1 and 2 threads. */
TEST(softbody_surface_same_state_with_1_and_2_threads)
{
    uint64_t h[2];
    char err[256];
    for (int t = 0; t < 2; t++) {
        fixture fx;
        REQUIRE(organ_open(&fx, 3000, 2));
        sim_softbody_set_threads(fx.s, t + 1);
        sim_softbody_params p = sim_softbody_get_params(fx.s);
        p.parallel_min = 1;
        set(fx.s, &p);
        int n;
        float wall[3] = {-1.0f, 0.0f, 0.2f}, pos[3] = {0.0f, 0.0f, 0.0f}, q[4];
        REQUIRE(sim_softbody_add_plane(fx.s, wall, -0.05f, 1, NULL, err, sizeof err) == SIM_OK);
        for (int f = 0; f < 40; f++) {
            const float *x = sim_softbody_positions(fx.s, &n);
            if (f == 5)
                sim_softbody_grab(fx.s, &x[(n / 2) * 3]);
            if (f > 5) {
                float hand[3] = {x[(n / 2) * 3] + 0.002f, x[(n / 2) * 3 + 1],
                                 x[(n / 2) * 3 + 2] + 0.003f};
                sim_softbody_move_hand(fx.s, hand, err, sizeof err);
            }
            if (f >= 20) {
                pos[0] += 0.004f;
                axis_quat(0.0f, 0.3f, 1.0f, 0.02f * (float)(f - 19), q);
                sim_softbody_set_parent(fx.s, pos, q, err, sizeof err);
            }
            REQUIRE(run(fx.s, 1, NULL));
        }
        h[t] = sim_softbody_hash(fx.s);
        fixture_close(&fx);
    }
    CHECKF(h[0] == h[1], "1 thread %016llx, 2 threads %016llx", (unsigned long long)h[0],
           (unsigned long long)h[1]);
}

TEST(softbody_bad_settings_are_refused_with_a_reason)
{
    fixture fx;
    REQUIRE(organ_open(&fx, 100, 1));
    char err[256] = "";
    sim_softbody_params p = sim_softbody_get_params(fx.s), good = p;
    p.substeps = 0;
    CHECK(sim_softbody_set_params(fx.s, &p, err, sizeof err) == SIM_ERR_ARG &&
          strstr(err, "substeps"));
    p = good;
    p.region_compliance[1] = 0.0f;
    CHECK(sim_softbody_set_params(fx.s, &p, err, sizeof err) == SIM_ERR_ARG &&
          strstr(err, "region_compliance.1"));
    p = good;
    p.spring_mode = 3;
    CHECK(sim_softbody_set_params(fx.s, &p, err, sizeof err) == SIM_ERR_ARG &&
          strstr(err, "spring_mode"));
    CHECK(sim_softbody_get_params(fx.s).substeps == good.substeps);
    float pos[3] = {0, 0, 0}, q[4] = {1.0f, 0.5f, 0.0f, 0.0f}, zero[3] = {0, 0, 0},
          nanp[3] = {NAN, 0, 0};
    CHECK(sim_softbody_set_parent(fx.s, pos, q, err, sizeof err) == SIM_ERR_ARG &&
          strstr(err, "quaternion"));
    CHECK(sim_softbody_add_plane(fx.s, zero, 0.0f, 0, NULL, err, sizeof err) == SIM_ERR_ARG &&
          strstr(err, "normal"));
    float up[3] = {0, 0, 1};
    for (int k = 0; k < SIM_SOFTBODY_MAX_PLANES; k++)
        CHECK(sim_softbody_add_plane(fx.s, up, -1.0f, 0, NULL, err, sizeof err) == SIM_OK);
    CHECK(sim_softbody_add_plane(fx.s, up, -1.0f, 0, NULL, err, sizeof err) == SIM_ERR_LIMIT);
    CHECK(sim_softbody_remove_plane(fx.s, 999, err, sizeof err) == SIM_ERR_ARG &&
          strstr(err, "no such"));
    CHECK(sim_softbody_grab(fx.s, nanp) == -1);
    CHECK(sim_softbody_move_hand(fx.s, nanp, err, sizeof err) == SIM_ERR_ARG);
    int n = 0;
    const float *now = sim_softbody_positions(fx.s, &n); /* n set before it sizes the copy */
    REQUIRE(n == 100);
    float *x = malloc(100 * 3 * sizeof(float));
    memcpy(x, now, (size_t)n * 3 * sizeof(float));
    x[17] = INFINITY;
    CHECK(sim_softbody_set_positions(fx.s, x, NULL, err, sizeof err) == SIM_ERR_ARG &&
          strstr(err, "particle 5"));
    free(x);
    sim_softbody_mesh mesh;
    CHECK(sim_softbody_mesh_organ(&mesh, 5, err, sizeof err) == SIM_ERR_ARG && strstr(err, "12"));
    fixture_close(&fx);
}

/* CUDA against the CPU (the same kernels, no FMA contraction): the organ pulled by the hand
 * and the two-region box, 60 frames, positions within 0.1 mm. */
TEST(softbody_cuda_matches_cpu)
{
    if (!sim_cuda_available())
        SKIP("no CUDA device answers on this machine (softcast-bench softbody --parity runs in "
             "tests/gpu/check.sh)");
    char err[256];
    sim_softbody_model *m = sbs_organ_model(500);
    REQUIRE(m);
    float *x[2];
    int n = 0;
    sim_backend_kind kinds[2] = {SIM_BACKEND_CPU, SIM_BACKEND_CUDA};
    for (int k = 0; k < 2; k++) {
        sim_backend *b;
        sim_softbody_state *s;
        REQUIRE(sim_backend_create(&b, kinds[k], 1, err, sizeof err) == SIM_OK);
        REQUIRE(sim_softbody_state_create(&s, m, b, err, sizeof err) == SIM_OK);
        const float *p = sim_softbody_positions(s, &n);
        float pick[3] = {p[0], p[1], p[2]}, hand[3] = {p[0], p[1], p[2] + 0.03f};
        sim_softbody_grab(s, pick);
        sim_softbody_move_hand(s, hand, err, sizeof err);
        REQUIRE(run(s, 60, NULL));
        x[k] = malloc((size_t)n * 3 * sizeof(float));
        memcpy(x[k], sim_softbody_positions(s, &n), (size_t)n * 3 * sizeof(float));
        sim_softbody_state_destroy(s);
        sim_backend_destroy(b);
    }
    float d = 0.0f;
    for (int i = 0; i < n * 3; i++)
        d = fmaxf(d, fabsf(x[0][i] - x[1][i]));
    CHECKF(d < 1e-4f, "CUDA differs from the CPU by %g m", (double)d);
    free(x[0]);
    free(x[1]);
    sim_softbody_model_destroy(m);
}

/* The fraction of the edges' length error left after one substep of distance constraints
 * alone, from the organ's rest shape with every particle moved at random by up to 1 mm
 * (local errors, which a substep's projections reach; a uniform stretch of a closed surface
 * hardly moves under them). */
static double residual_after_one_substep(int iterations)
{
    fixture fx;
    double r = NAN;
    if (!organ_open(&fx, 300, 1))
        return r;
    sim_softbody_params p = sim_softbody_get_params(fx.s);
    p.gravity = 0.0f;
    p.floor_z = -10.0f;
    p.shape_stiffness = p.volume_stiffness = 0.0f;
    p.substeps = 1;
    p.iterations = iterations;
    set(fx.s, &p);
    int n, ntri;
    const float *rest = sim_softbody_model_rest(fx.m, &n);
    float *x = malloc((size_t)n * 3 * sizeof(float));
    srand(5);
    for (int i = 0; i < n * 3; i++)
        x[i] = rest[i] + frand(-1e-3f, 1e-3f);
    double before = 0.0, after = 0.0;
    char err[256];
    if (sim_softbody_set_positions(fx.s, x, NULL, err, sizeof err) == SIM_OK &&
        run(fx.s, 1, NULL)) {
        const uint32_t *tri = sim_softbody_model_triangles(fx.m, &ntri);
        const float *y = sim_softbody_positions(fx.s, &n);
        for (int t = 0; t < ntri * 3; t++) {
            uint32_t a = tri[t], b = tri[t % 3 == 2 ? t - 2 : t + 1];
            double l = 0.0, l0 = 0.0, lx = 0.0;
            for (int k = 0; k < 3; k++) {
                double d = (double)(y[a * 3 + k] - y[b * 3 + k]),
                       d0 = (double)(rest[a * 3 + k] - rest[b * 3 + k]),
                       dx = (double)(x[a * 3 + k] - x[b * 3 + k]);
                l += d * d;
                l0 += d0 * d0;
                lx += dx * dx;
            }
            after += fabs(sqrt(l) - sqrt(l0));
            before += fabs(sqrt(lx) - sqrt(l0));
        }
        r = after / before;
    }
    free(x);
    fixture_close(&fx);
    return r;
}

/* The distance stiffness is per substep, whatever the iterations (k' = 1 - (1 - k)^(1/n)):
 * the same fraction of the edges' error is left after 5 and after 10 iterations (measured
 * 0.136 and 0.132; a single edge would keep 1 - k = 10%): claimed within a factor 1.2.
 * Projected with k itself each iteration, 5 iterations left 0.079 and 10 left 0.055. */
TEST(softbody_distance_stiffness_does_not_depend_on_the_iteration_count)
{
    double r5 = residual_after_one_substep(5), r10 = residual_after_one_substep(10);
    th_note("length error left after one substep: %.3f (5 iterations), %.3f (10)", r5, r10);
    CHECKF(r5 > 0.03 && r5 < 0.5 && r10 > 0.03 && r10 < 0.5, "left %.3f and %.3f", r5, r10);
    CHECKF(r5 / r10 < 1.2 && r10 / r5 < 1.2, "5 iterations left %.3f, 10 left %.3f", r5, r10);
}
