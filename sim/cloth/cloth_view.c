/* cloth_view.c: a character as one mesh in its root frame (cloth.h): its cape's particles,
 * then a box round each body capsule. The body's boxes are a picture of the colliders the
 * cape meets, cheap to send and to draw. */
#include <math.h>
#include <string.h>

#include "cloth.h"

/* World point p into the root frame at root, heading (cos, sin) (cy, sy). */
static void to_root(const float *p, const float *root, float cy, float sy, float *out)
{
    float d[3] = {p[0] - root[0], p[1] - root[1], p[2] - root[2]};
    out[0] = cy * d[0] + sy * d[1];
    out[1] = -sy * d[0] + cy * d[1];
    out[2] = d[2];
}

/* The 8 corners of the box round capsule caps (a[3], b[3], radius) into p: along the axis
 * from a - r to b + r, across it +-r on two unit vectors square to it. */
static void capsule_box(const float caps[7], float *p)
{
    const float *a = caps, *b = caps + 3, r = caps[6];
    float ax[3] = {b[0] - a[0], b[1] - a[1], b[2] - a[2]};
    float len = sqrtf(ax[0] * ax[0] + ax[1] * ax[1] + ax[2] * ax[2]);
    float u[3] = {0, 0, 1};
    if (len > 1e-6f)
        for (int q = 0; q < 3; q++)
            u[q] = ax[q] / len;
    float t[3] = {fabsf(u[0]) < 0.9f ? 1.0f : 0.0f, fabsf(u[0]) < 0.9f ? 0.0f : 1.0f, 0};
    float d = t[0] * u[0] + t[1] * u[1] + t[2] * u[2];
    for (int q = 0; q < 3; q++)
        t[q] -= d * u[q];
    float tl = sqrtf(t[0] * t[0] + t[1] * t[1] + t[2] * t[2]);
    for (int q = 0; q < 3; q++)
        t[q] /= tl;
    float w[3] = {u[1] * t[2] - u[2] * t[1], u[2] * t[0] - u[0] * t[2], u[0] * t[1] - u[1] * t[0]};
    for (int v = 0; v < SIM_CLOTH_BOX_VERTS; v++) {
        float su = v & 4 ? 1.0f : 0.0f, st = v & 2 ? r : -r, sw = v & 1 ? r : -r;
        for (int q = 0; q < 3; q++)
            p[v * 3 + q] = a[q] - u[q] * r + u[q] * su * (len + 2 * r) + t[q] * st + w[q] * sw;
    }
}

/* The 12 triangles of a box whose corners start at vertex v0, outward. */
static void box_tris(uint32_t v0, uint32_t *tri)
{
    static const int quads[6][4] = {{0, 1, 3, 2}, {4, 6, 7, 5}, {0, 4, 5, 1},
                                    {2, 3, 7, 6}, {0, 2, 6, 4}, {1, 5, 7, 3}};
    for (int f = 0; f < 6; f++) {
        const int *q = quads[f];
        uint32_t t[6] = {v0 + (uint32_t)q[0], v0 + (uint32_t)q[1], v0 + (uint32_t)q[2],
                         v0 + (uint32_t)q[0], v0 + (uint32_t)q[2], v0 + (uint32_t)q[3]};
        memcpy(tri + f * 6, t, sizeof t);
    }
}

int sim_cloth_character_mesh_max(const sim_cloth_model *m, int *max_tris)
{
    int nv0 = 0, nt0 = 0;
    for (int k = 0; k < sim_cloth_model_nlod(m); k++) {
        int nt, nv = sim_cloth_model_lod_size(m, k, &nt);
        nv0 = nv > nv0 ? nv : nv0;
        nt0 = nt > nt0 ? nt : nt0;
    }
    if (max_tris)
        *max_tris = nt0 + SIM_CLOTH_BODY_CAPS * SIM_CLOTH_BOX_TRIS;
    return nv0 + SIM_CLOTH_BODY_CAPS * SIM_CLOTH_BOX_VERTS;
}

void sim_cloth_character_mesh_get(const sim_cloth_scene *s, const sim_cloth_model *m, int c,
                                  float *pos, uint32_t *tri, sim_cloth_character_mesh *out)
{
    int n, ntri, lod = sim_cloth_lod(s, c);
    const float *x = sim_cloth_positions(s, c, &n);
    sim_cloth_model_lod_size(m, lod, &ntri);
    sim_cloth_root(s, c, out->root, &out->yaw);
    float cy = cosf(out->yaw), sy = sinf(out->yaw);
    for (int k = 0; k < n; k++)
        to_root(x + 3 * k, out->root, cy, sy, pos + 3 * k);
    float caps[SIM_CLOTH_BODY_CAPS][7];
    int ncap = sim_cloth_body(s, c, caps, SIM_CLOTH_BODY_CAPS);
    for (int k = 0; k < ncap; k++) {
        float w[SIM_CLOTH_BOX_VERTS * 3];
        capsule_box(caps[k], w);
        float *p = pos + 3 * (n + k * SIM_CLOTH_BOX_VERTS);
        for (int v = 0; v < SIM_CLOTH_BOX_VERTS; v++)
            to_root(w + 3 * v, out->root, cy, sy, p + 3 * v);
    }
    if (tri) {
        memcpy(tri, sim_cloth_model_triangles(m, lod), (size_t)ntri * 3 * sizeof *tri);
        for (int k = 0; k < ncap; k++)
            box_tris((uint32_t)(n + k * SIM_CLOTH_BOX_VERTS),
                     tri + 3 * (ntri + k * SIM_CLOTH_BOX_TRIS));
    }
    out->cape_nvert = n, out->cape_ntri = ntri, out->lod = lod;
    out->nvert = n + ncap * SIM_CLOTH_BOX_VERTS;
    out->ntri = ntri + ncap * SIM_CLOTH_BOX_TRIS;
}
