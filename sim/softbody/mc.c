/* mc.c: marching cubes (Lorensen and Cline, SIGGRAPH 1987) with its case table built at
 * run time from one face rule, so the surface is closed and manifold by construction.
 *
 * The classic 256-case table resolves ambiguous faces case by case, and a table that
 * resolves a face differently from the cube next to it leaves holes (Duerst 1988;
 * Nielson and Hamann 1991). Here the cases come from the faces: walk each face's four
 * corners counter-clockwise as seen from outside the cube; where the walk enters the
 * inside (outside corner, then inside corner) a segment starts at that edge's crossing
 * and ends at the next crossing of the walk. On an ambiguous face (inside corners
 * diagonal) that keeps the two inside corners apart, and the neighbouring cube, walking
 * the same face the other way, pairs the same crossings: the two cubes agree on every
 * face. Each crossing starts one segment (on the face where the walk enters) and ends one
 * (on the face where it leaves), so the segments close into loops. A fan over each loop
 * gives the triangles, counter-clockwise seen from outside (inside = f > iso; with one
 * inside corner at the origin the loop runs x edge, y edge, z edge, normal (1,1,1)). The
 * fan's hub is a crossing whose chords all cross the cube's inside: a chord between two
 * crossings of one face could be drawn by the cube across it too, and that edge would
 * carry four triangles (random fields found it). Every loop of the 256 cases has such a
 * hub (asserted as the table is built): 820 triangles over all cases, at most 4 loops.
 *
 * Vertices live on lattice edges and are shared through two layers of edge slots (this z
 * and the next) and one of z edges, so memory beyond the output is O(nx ny).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../core/sc_base.h"
#include "geometry.h"
#include "geometry_internal.h"

#define NONE UINT32_MAX

/* Corner c sits at (c & 1, (c >> 1) & 1, (c >> 2) & 1). */
static const uint8_t k_edge[12][2] = {
    {0, 1}, {2, 3}, {4, 5}, {6, 7}, /* along x */
    {0, 2}, {1, 3}, {4, 6}, {5, 7}, /* along y */
    {0, 4}, {1, 5}, {2, 6}, {3, 7}, /* along z */
};

/* Each face's corners, counter-clockwise seen from outside the cube. */
static const uint8_t k_face[6][4] = {
    {0, 4, 6, 2}, {1, 3, 7, 5}, /* x = 0, x = 1 */
    {0, 1, 5, 4}, {2, 6, 7, 3}, /* y = 0, y = 1 */
    {0, 2, 3, 1}, {4, 5, 7, 6}, /* z = 0, z = 1 */
};

/* One case: its loops of crossings (edge indices, in order) and each loop's fan hub (an
 * index into the loop). */
typedef struct mc_case {
    uint8_t nloop;
    uint8_t n[4];
    int8_t hub[4];
    uint8_t e[4][12];
} mc_case;

static int edge_of(int a, int b)
{
    for (int e = 0; e < 12; e++)
        if ((k_edge[e][0] == a && k_edge[e][1] == b) || (k_edge[e][0] == b && k_edge[e][1] == a))
            return e;
    SC_ASSERT(0);
    return -1;
}

/* The segments of one case: next[e] is the crossing after e on its loop. */
static void case_segments(int mask, int next[12])
{
    for (int e = 0; e < 12; e++)
        next[e] = -1;
    for (int f = 0; f < 6; f++) {
        const uint8_t *q = k_face[f];
        for (int k = 0; k < 4; k++) {
            int a = q[k], b = q[(k + 1) & 3];
            if (((mask >> a) & 1) || !((mask >> b) & 1))
                continue; /* not entering the inside */
            for (int j = 1; j < 4; j++) {
                int c = q[(k + j) & 3], d = q[(k + j + 1) & 3];
                if (((mask >> c) & 1) != ((mask >> d) & 1)) {
                    next[edge_of(a, b)] = edge_of(c, d);
                    break;
                }
            }
        }
    }
}

/* Faces (bit f) each edge lies on. */
static int edge_faces(int e)
{
    int bits = 0;
    for (int f = 0; f < 6; f++) {
        int on = 0;
        for (int k = 0; k < 4; k++)
            on += k_face[f][k] == k_edge[e][0] || k_face[f][k] == k_edge[e][1];
        bits |= (on == 2) << f;
    }
    return bits;
}

/* A hub whose chords join it to no crossing on a face it lies on (other than its two
 * neighbours on the loop). A chord between two crossings of one face could be drawn by the
 * cube across that face as well (a loop that visits an ambiguous face twice), and an edge
 * of four triangles is not manifold; a chord through the cube's inside is this cube's
 * alone. -1 when no hub qualifies (no loop of the 256 cases lacks one). */
static int loop_hub(const uint8_t *loop, int n)
{
    for (int h = 0; h < n; h++) {
        int ok = 1;
        for (int k = 2; k + 1 < n && ok; k++)
            ok = !(edge_faces(loop[h]) & edge_faces(loop[(h + k) % n]));
        if (ok)
            return h;
    }
    return -1;
}

static void build_case(int mask, mc_case *out)
{
    int next[12], seen[12] = {0};
    case_segments(mask, next);
    out->nloop = 0;
    for (int s = 0; s < 12; s++) {
        if (next[s] < 0 || seen[s])
            continue;
        SC_ASSERT(out->nloop < 4);
        uint8_t *loop = out->e[out->nloop];
        int n = 0;
        for (int e = s; !seen[e]; e = next[e]) {
            SC_ASSERT(next[e] >= 0 && n < 12);
            seen[e] = 1;
            loop[n++] = (uint8_t)e;
        }
        out->n[out->nloop] = (uint8_t)n;
        out->hub[out->nloop] = (int8_t)loop_hub(loop, n);
        SC_ASSERT(out->hub[out->nloop] >= 0); /* true in all 256 cases */
        out->nloop++;
    }
}

/* ------------------------------------------------------------------ build */

typedef struct mc_build {
    sb_vec_f vert;
    sb_vec_u32 tri;
    const float *f;
    int nx, ny;
    float iso, origin[3], step[3];
} mc_build;

/* The vertex on the lattice edge from sample a to sample b (indices into f), made once
 * and kept in its slot. */
static int edge_vertex(mc_build *b, uint32_t *slot, size_t a, size_t c, uint32_t *out)
{
    if (*slot == NONE) {
        float fa = b->f[a], fc = b->f[c];
        float t = (b->iso - fa) / (fc - fa);
        t = t > 0.0f ? (t < 1.0f ? t : 1.0f) : 0.0f;
        size_t nxy = (size_t)b->nx * (size_t)b->ny;
        float pa[3] = {(float)(a % (size_t)b->nx), (float)((a % nxy) / (size_t)b->nx),
                       (float)(a / nxy)};
        float pc[3] = {(float)(c % (size_t)b->nx), (float)((c % nxy) / (size_t)b->nx),
                       (float)(c / nxy)};
        float p[3];
        for (int k = 0; k < 3; k++)
            p[k] = b->origin[k] + (pa[k] + t * (pc[k] - pa[k])) * b->step[k];
        if (b->vert.n / 3 >= (size_t)INT32_MAX || !sb_vec_f_push(&b->vert, p, 3))
            return 0;
        *slot = (uint32_t)(b->vert.n / 3 - 1);
    }
    *out = *slot;
    return 1;
}

/* Edge slots around the cube at (x, y) of this layer: lo and hi hold the x and y edges of
 * the bottom and top sample layers (2 per sample), ez the z edges between them. */
static uint32_t *slot_of(int e, size_t x, size_t y, size_t nx, uint32_t *lo, uint32_t *hi,
                         uint32_t *ez)
{
    size_t i = x + nx * y;
    switch (e) {
    case 0:
        return &lo[2 * i];
    case 1:
        return &lo[2 * (i + nx)];
    case 2:
        return &hi[2 * i];
    case 3:
        return &hi[2 * (i + nx)];
    case 4:
        return &lo[2 * i + 1];
    case 5:
        return &lo[2 * (i + 1) + 1];
    case 6:
        return &hi[2 * i + 1];
    case 7:
        return &hi[2 * (i + 1) + 1];
    case 8:
        return &ez[i];
    case 9:
        return &ez[i + 1];
    case 10:
        return &ez[i + nx];
    default:
        return &ez[i + nx + 1];
    }
}

/* Fan one loop (vertex ids v[0..n)) from its hub. */
static int mc_fan(mc_build *b, const uint32_t *v, int n, int hub)
{
    for (int k = 1; k + 1 < n; k++) {
        uint32_t t[3] = {v[hub], v[(hub + k) % n], v[(hub + k + 1) % n]};
        if (!sb_vec_u32_push(&b->tri, t, 3))
            return 0;
    }
    return 1;
}

static int mc_cube(mc_build *b, const mc_case *cs, size_t x, size_t y, size_t z, uint32_t *lo,
                   uint32_t *hi, uint32_t *ez)
{
    size_t nx = (size_t)b->nx, nxy = nx * (size_t)b->ny;
    size_t base = x + nx * y + nxy * z;
    for (int l = 0; l < cs->nloop; l++) {
        uint32_t v[12];
        for (int k = 0; k < cs->n[l]; k++) {
            int e = cs->e[l][k];
            int a = k_edge[e][0], c = k_edge[e][1];
            size_t sa =
                base + (size_t)(a & 1) + nx * (size_t)((a >> 1) & 1) + nxy * (size_t)((a >> 2) & 1);
            size_t sc =
                base + (size_t)(c & 1) + nx * (size_t)((c >> 1) & 1) + nxy * (size_t)((c >> 2) & 1);
            if (!edge_vertex(b, slot_of(e, x, y, nx, lo, hi, ez), sa, sc, &v[k]))
                return 0;
        }
        if (!mc_fan(b, v, cs->n[l], cs->hub[l]))
            return 0;
    }
    return 1;
}

static int cube_mask(const float *f, size_t base, size_t nx, size_t nxy, float iso)
{
    int m = 0;
    for (int c = 0; c < 8; c++) {
        size_t s = base + (size_t)(c & 1) + nx * (size_t)((c >> 1) & 1) + nxy * (size_t)(c >> 2);
        m |= (f[s] > iso) << c;
    }
    return m;
}

static int mc_layers(mc_build *b, const mc_case *cases, int nz, uint32_t *lo, uint32_t *hi,
                     uint32_t *ez)
{
    size_t nx = (size_t)b->nx, ny = (size_t)b->ny, nxy = nx * ny;
    for (size_t i = 0; i < 2 * nxy; i++)
        lo[i] = NONE;
    for (size_t z = 0; z + 1 < (size_t)nz; z++) {
        for (size_t i = 0; i < 2 * nxy; i++)
            hi[i] = NONE;
        for (size_t i = 0; i < nxy; i++)
            ez[i] = NONE;
        for (size_t y = 0; y + 1 < ny; y++)
            for (size_t x = 0; x + 1 < nx; x++) {
                int m = cube_mask(b->f, x + nx * y + nxy * z, nx, nxy, b->iso);
                if (m != 0 && m != 0xff && !mc_cube(b, &cases[m], x, y, z, lo, hi, ez))
                    return 0;
            }
        uint32_t *t = lo;
        lo = hi;
        hi = t;
    }
    return 1;
}

sim_status sim_marching_cubes(sim_trimesh *out, const float *f, int nx, int ny, int nz, float iso,
                              const float origin[3], const float step[3], char *err, size_t err_sz)
{
    if (!out)
        return sc_fail(err, err_sz, SIM_ERR_ARG, "marching cubes: out is NULL");
    memset(out, 0, sizeof *out);
    if (!f || !origin || !step || nx < 2 || ny < 2 || nz < 2 || !isfinite(iso))
        return sc_fail(err, err_sz, SIM_ERR_ARG,
                       "marching cubes: need a field of >= 2 samples per axis and a finite iso");
    mc_case *cases = (mc_case *)sc_calloc(256, sizeof *cases);
    size_t nxy = (size_t)nx * (size_t)ny;
    uint32_t *lo = (uint32_t *)sc_calloc(2 * nxy, sizeof *lo);
    uint32_t *hi = (uint32_t *)sc_calloc(2 * nxy, sizeof *hi);
    uint32_t *ez = (uint32_t *)sc_calloc(nxy, sizeof *ez);
    mc_build b;
    memset(&b, 0, sizeof b);
    b.f = f, b.nx = nx, b.ny = ny, b.iso = iso;
    memcpy(b.origin, origin, sizeof b.origin);
    memcpy(b.step, step, sizeof b.step);
    sim_status st = SIM_OK;
    if (!cases || !lo || !hi || !ez) {
        st = sc_fail(err, err_sz, SIM_ERR_NOMEM, "marching cubes: out of memory");
    } else {
        for (int m = 0; m < 256; m++)
            build_case(m, &cases[m]);
        if (!mc_layers(&b, cases, nz, lo, hi, ez))
            st = sc_fail(err, err_sz, SIM_ERR_NOMEM,
                         "marching cubes: out of memory at %zu "
                         "vertices",
                         b.vert.n / 3);
    }
    if (st == SIM_OK && b.tri.n / 3 > (size_t)INT32_MAX)
        st = sc_fail(err, err_sz, SIM_ERR_LIMIT, "marching cubes: too many triangles");
    if (st == SIM_OK) {
        out->nvert = (int)(b.vert.n / 3);
        out->ntri = (int)(b.tri.n / 3);
        out->vert = b.vert.p;
        out->tri = b.tri.p;
    } else {
        free(b.vert.p);
        free(b.tri.p);
    }
    free(cases);
    free(lo);
    free(hi);
    free(ez);
    return st;
}
