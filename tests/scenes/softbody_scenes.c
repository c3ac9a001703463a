/* softbody_scenes.c: see softbody_scenes.h. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/core/sc_base.h"
#include "tests/scenes/softbody_scenes.h"

/* Kuhn's 6 tets of a cube, corners by bits (x 1, y 2, z 4): a path 0 -> 7 along each
 * ordering of the axes. */
static const int k_kuhn[6][4] = {{0, 1, 3, 7}, {0, 1, 5, 7}, {0, 2, 3, 7},
                                 {0, 2, 6, 7}, {0, 4, 5, 7}, {0, 4, 6, 7}};

int sbs_barycentric(const float *p0, const float *p1, const float *p2, const float *p3,
                    const float *p, double w[4])
{
    double a[3][3], r[3];
    for (int k = 0; k < 3; k++) {
        a[k][0] = (double)p1[k] - (double)p0[k];
        a[k][1] = (double)p2[k] - (double)p0[k];
        a[k][2] = (double)p3[k] - (double)p0[k];
        r[k] = (double)p[k] - (double)p0[k];
    }
    double det = a[0][0] * (a[1][1] * a[2][2] - a[1][2] * a[2][1]) -
                 a[0][1] * (a[1][0] * a[2][2] - a[1][2] * a[2][0]) +
                 a[0][2] * (a[1][0] * a[2][1] - a[1][1] * a[2][0]);
    if (fabs(det) < 1e-30)
        return 0;
    for (int c = 0; c < 3; c++) { /* Cramer's rule: column c replaced by r */
        double m[3][3];
        memcpy(m, a, sizeof m);
        for (int k = 0; k < 3; k++)
            m[k][c] = r[k];
        w[c + 1] = (m[0][0] * (m[1][1] * m[2][2] - m[1][2] * m[2][1]) -
                    m[0][1] * (m[1][0] * m[2][2] - m[1][2] * m[2][0]) +
                    m[0][2] * (m[1][0] * m[2][1] - m[1][1] * m[2][0])) /
                   det;
    }
    w[0] = 1.0 - w[1] - w[2] - w[3];
    return 1;
}

static int vid(int nx, int ny, int i, int j, int k)
{
    return (k * (ny + 1) + j) * (nx + 1) + i;
}

static void box_lattice(sim_softbody_tets *t, int nx, int ny, int nz, float cell, float z0,
                        int split_x)
{
    for (int k = 0; k <= nz; k++)
        for (int j = 0; j <= ny; j++)
            for (int i = 0; i <= nx; i++) {
                float *p = &t->x[vid(nx, ny, i, j, k) * 3];
                p[0] = (float)i * cell;
                p[1] = (float)j * cell;
                p[2] = z0 + (float)k * cell;
            }
    int e = 0;
    for (int k = 0; k < nz; k++)
        for (int j = 0; j < ny; j++)
            for (int i = 0; i < nx; i++)
                for (int q = 0; q < 6; q++, e++) {
                    for (int c = 0; c < 4; c++) {
                        int b = k_kuhn[q][c];
                        t->tet[e * 4 + c] =
                            vid(nx, ny, i + (b & 1), j + (b >> 1 & 1), k + (b >> 2 & 1));
                    }
                    t->region[e] = i < split_x ? 0 : 1;
                }
}

/* Locate p in the box (its cell, then the cell's tet where it is the most inside). */
static void locate(const sim_softbody_tets *t, int nx, int ny, int nz, float cell, float z0,
                   const float p[3], int32_t *tet, float w[4])
{
    int c[3], n[3] = {nx, ny, nz};
    float o[3] = {0.0f, 0.0f, z0};
    for (int k = 0; k < 3; k++) {
        c[k] = (int)floorf((p[k] - o[k]) / cell);
        c[k] = c[k] < 0 ? 0 : c[k] >= n[k] ? n[k] - 1 : c[k];
    }
    int base = ((c[2] * ny + c[1]) * nx + c[0]) * 6, best = base;
    double bw[4] = {0, 0, 0, 0}, bmin = -1e30;
    for (int q = 0; q < 6; q++) {
        const int32_t *v = &t->tet[(base + q) * 4];
        double ww[4];
        sbs_barycentric(&t->x[v[0] * 3], &t->x[v[1] * 3], &t->x[v[2] * 3], &t->x[v[3] * 3], p, ww);
        double mn = fmin(fmin(ww[0], ww[1]), fmin(ww[2], ww[3]));
        if (mn > bmin) {
            bmin = mn;
            best = base + q;
            memcpy(bw, ww, sizeof bw);
        }
    }
    double s = 0.0;
    for (int k = 0; k < 4; k++) {
        bw[k] = bw[k] < 0.0 ? 0.0 : bw[k];
        s += bw[k];
    }
    *tet = best;
    for (int k = 0; k < 4; k++)
        w[k] = (float)(bw[k] / s);
}

/* One face of the box as a grid: axis a fixed at side s (0 or 1), u and v the others. */
static void box_face(sim_softbody_tets *t, const int *n, float cell, float z0, int a, int side,
                     int res, int *nv, int *nt)
{
    int u = (a + 1) % 3, v = (a + 2) % 3, nu = n[u] * res, nw = n[v] * res, v0 = *nv;
    float o[3] = {0.0f, 0.0f, z0};
    for (int j = 0; j <= nw; j++)
        for (int i = 0; i <= nu; i++) {
            float p[3];
            p[a] = o[a] + (float)(side * n[a]) * cell;
            p[u] = o[u] + (float)i * cell / (float)res;
            p[v] = o[v] + (float)j * cell / (float)res;
            locate(t, n[0], n[1], n[2], cell, z0, p, &t->embed_tet[*nv], &t->embed_w[*nv * 4]);
            (*nv)++;
        }
    for (int j = 0; j < nw; j++)
        for (int i = 0; i < nu; i++) {
            uint32_t q0 = (uint32_t)(v0 + j * (nu + 1) + i), q1 = q0 + 1,
                     q2 = q0 + (uint32_t)(nu + 1), q3 = q2 + 1;
            uint32_t tri[6] = {q0, q1, q3, q0, q3, q2};
            if (!side) { /* outward: flip the low side */
                tri[1] = q3, tri[2] = q1, tri[4] = q2, tri[5] = q3;
            }
            memcpy(&t->embed_tri[*nt * 3], tri, sizeof tri);
            *nt += 2;
        }
}

sim_status sbs_box_tets(sim_softbody_tets *out, int nx, int ny, int nz, float cell, float z0,
                        int split_x, int res, char *err, size_t err_sz)
{
    memset(out, 0, sizeof *out);
    int n[3] = {nx, ny, nz}, ne = 0, nt = 0;
    for (int a = 0; res > 0 && a < 3; a++) {
        int u = n[(a + 1) % 3] * res, v = n[(a + 2) % 3] * res;
        ne += 2 * (u + 1) * (v + 1);
        nt += 4 * u * v;
    }
    out->nvert = (nx + 1) * (ny + 1) * (nz + 1);
    out->ntet = nx * ny * nz * 6;
    out->nregion = split_x >= nx ? 1 : 2;
    out->x = malloc((size_t)out->nvert * 3 * sizeof(float));
    out->tet = malloc((size_t)out->ntet * 4 * sizeof(int32_t));
    out->region = malloc((size_t)out->ntet);
    out->embed_tet = malloc(((size_t)ne + 1) * sizeof(int32_t));
    out->embed_w = malloc(((size_t)ne + 1) * 4 * sizeof(float));
    out->embed_tri = malloc(((size_t)nt + 1) * 3 * sizeof(uint32_t));
    if (!out->x || !out->tet || !out->region || !out->embed_tet || !out->embed_w ||
        !out->embed_tri) {
        sim_softbody_tets_free(out);
        return (sim_status)sc_fail(err, err_sz, SIM_ERR_NOMEM, "box tets: out of memory");
    }
    box_lattice(out, nx, ny, nz, cell, z0, split_x);
    for (int a = 0; res > 0 && a < 3; a++)
        for (int side = 0; side < 2; side++)
            box_face(out, n, cell, z0, a, side, res, &out->nembed, &out->nembed_tri);
    return SIM_OK;
}

/* ---------------------------------------------------------------- rigid fit */

/* Largest eigenvector of symmetric 4x4 N (Jacobi rotations). */
static void eigen_max4(double N[4][4], double q[4])
{
    double V[4][4] = {{1, 0, 0, 0}, {0, 1, 0, 0}, {0, 0, 1, 0}, {0, 0, 0, 1}};
    for (int sweep = 0; sweep < 50; sweep++)
        for (int p = 0; p < 3; p++)
            for (int r = p + 1; r < 4; r++) {
                if (fabs(N[p][r]) < 1e-300)
                    continue;
                double th = 0.5 * atan2(2.0 * N[p][r], N[r][r] - N[p][p]);
                double c = cos(th), s = sin(th);
                for (int k = 0; k < 4; k++) { /* N = J^T N J */
                    double a = N[k][p], b = N[k][r];
                    N[k][p] = c * a - s * b;
                    N[k][r] = s * a + c * b;
                }
                for (int k = 0; k < 4; k++) {
                    double a = N[p][k], b = N[r][k];
                    N[p][k] = c * a - s * b;
                    N[r][k] = s * a + c * b;
                }
                for (int k = 0; k < 4; k++) {
                    double a = V[k][p], b = V[k][r];
                    V[k][p] = c * a - s * b;
                    V[k][r] = s * a + c * b;
                }
            }
    int best = 0;
    for (int k = 1; k < 4; k++)
        best = N[k][k] > N[best][best] ? k : best;
    for (int k = 0; k < 4; k++)
        q[k] = V[k][best];
}

double sbs_rigid_fit(const float *a, const float *b, int n, double R[9], double t[3])
{
    double ca[3] = {0, 0, 0}, cb[3] = {0, 0, 0}, S[3][3] = {{0}};
    for (int i = 0; i < n; i++)
        for (int k = 0; k < 3; k++) {
            ca[k] += (double)a[i * 3 + k] / n;
            cb[k] += (double)b[i * 3 + k] / n;
        }
    for (int i = 0; i < n; i++)
        for (int r = 0; r < 3; r++)
            for (int c = 0; c < 3; c++)
                S[r][c] += ((double)a[i * 3 + r] - ca[r]) * ((double)b[i * 3 + c] - cb[c]);
    /* Horn 1987: the rotation is the eigenvector of N with the largest eigenvalue. */
    double N[4][4] = {
        {S[0][0] + S[1][1] + S[2][2], S[1][2] - S[2][1], S[2][0] - S[0][2], S[0][1] - S[1][0]},
        {S[1][2] - S[2][1], S[0][0] - S[1][1] - S[2][2], S[0][1] + S[1][0], S[2][0] + S[0][2]},
        {S[2][0] - S[0][2], S[0][1] + S[1][0], -S[0][0] + S[1][1] - S[2][2], S[1][2] + S[2][1]},
        {S[0][1] - S[1][0], S[2][0] + S[0][2], S[1][2] + S[2][1], -S[0][0] - S[1][1] + S[2][2]}};
    double q[4];
    eigen_max4(N, q);
    double w = q[0], x = q[1], y = q[2], z = q[3];
    double M[9] = {1 - 2 * (y * y + z * z), 2 * (x * y - w * z),     2 * (x * z + w * y),
                   2 * (x * y + w * z),     1 - 2 * (x * x + z * z), 2 * (y * z - w * x),
                   2 * (x * z - w * y),     2 * (y * z + w * x),     1 - 2 * (x * x + y * y)};
    memcpy(R, M, sizeof M);
    for (int r = 0; r < 3; r++)
        t[r] = cb[r] - (R[r * 3] * ca[0] + R[r * 3 + 1] * ca[1] + R[r * 3 + 2] * ca[2]);
    double worst = 0.0;
    for (int i = 0; i < n; i++) {
        double d2 = 0.0;
        for (int r = 0; r < 3; r++) {
            double p = R[r * 3] * (double)a[i * 3] + R[r * 3 + 1] * (double)a[i * 3 + 1] +
                       R[r * 3 + 2] * (double)a[i * 3 + 2] + t[r] - (double)b[i * 3 + r];
            d2 += p * p;
        }
        worst = fmax(worst, sqrt(d2));
    }
    return worst;
}

sim_softbody_model *sbs_organ_model(int n)
{
    char err[256];
    sim_softbody_mesh mesh;
    sim_softbody_model *m = NULL;
    if (sim_softbody_mesh_organ(&mesh, n, err, sizeof err) != SIM_OK ||
        sim_softbody_model_surface(&m, &mesh, err, sizeof err) != SIM_OK)
        fprintf(stderr, "organ model: %s\n", err);
    sim_softbody_mesh_free(&mesh);
    return m;
}
