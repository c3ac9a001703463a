/* surface.c: iso-surface extraction by naive Surface Nets, and evaluation on the moving
 * lattice.
 *
 * Surface Nets (S. Gibson, "Constrained Elastic SurfaceNets", MICCAI 1998; the "naive"
 * form as written up by Mikola Lysenko, 2012) is the dual of Marching Cubes: a cell
 * (2x2x2 elements) whose corners straddle the iso level gets one vertex, and every lattice
 * edge whose two ends straddle it gets one quad joining the vertices of the 4 cells that
 * share the edge. We place the vertex at the mean of the linear-interpolation crossings on
 * the cell's 12 edges (no relaxation), and keep it as fractional offsets in its cell, so
 * the surface rides on the deforming lattice by trilinear blending of the cell corners.
 *
 * One raster pass over the cells, x fastest. The quads of the 3 edges leaving a cell's
 * lowest corner join that cell to neighbours at x-1, y-1 and z-1, all already visited, so
 * two layers of a cell -> vertex index map (this z and the one below) are all the memory
 * the pass needs beyond the output. Quad winding follows which end of the edge is inside
 * so that triangles are counter-clockwise seen from outside.
 */
#include "surface.h"
#include "volume_internal.h" /* VOL_BLOCK_SHIFT: the runs are the state's blocks */

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../core/sc_base.h"

#define NO_VERT UINT32_MAX

/* Corner c of a cell is at offset (c & 1, (c >> 1) & 1, (c >> 2) & 1). */
static const uint8_t k_edges[12][2] = {
    {0, 1}, {2, 3}, {4, 5}, {6, 7}, /* along x */
    {0, 2}, {1, 3}, {4, 6}, {5, 7}, /* along y */
    {0, 4}, {1, 5}, {2, 6}, {3, 7}, /* along z */
};

/* Bit j of a 4-bit column code (j = dy + 2*dz) moved to corner bit 2*j (dx = 0). */
static const uint8_t k_spread[16] = {
    0x00, 0x01, 0x04, 0x05, 0x10, 0x11, 0x14, 0x15, 0x40, 0x41, 0x44, 0x45, 0x50, 0x51, 0x54, 0x55,
};

typedef struct sn_build {
    uint32_t *tri; // (cap_tri x 3)
    size_t ntri, cap_tri;
    uint32_t *vert_cell; // (cap_vert)
    float *vert_frac;    // (cap_vert x 3)
    size_t nvert, cap_vert;
} sn_build;

static int sn_grow(void **p, size_t *cap, size_t need, size_t elem_size)
{
    if (need <= *cap)
        return 1;
    size_t c = *cap ? *cap : 1024;
    while (c < need)
        c *= 2;
    if (c > SIZE_MAX / elem_size)
        return 0;
    void *q = realloc(*p, c * elem_size);
    if (!q)
        return 0;
    *p = q;
    *cap = c;
    return 1;
}

static sim_status sn_add_vert(sn_build *b, uint32_t cell, const float frac[3], char *err,
                              size_t err_sz)
{
    if (b->nvert >= (size_t)INT_MAX)
        return (sim_status)sc_fail(err, err_sz, SIM_ERR_LIMIT, "surface: more than %d vertices",
                                   INT_MAX);
    if (b->nvert == b->cap_vert) {
        size_t cap = b->cap_vert;
        if (!sn_grow((void **)&b->vert_cell, &cap, b->nvert + 1, sizeof(uint32_t)))
            goto nomem;
        cap = b->cap_vert;
        if (!sn_grow((void **)&b->vert_frac, &cap, b->nvert + 1, 3 * sizeof(float)))
            goto nomem;
        b->cap_vert = cap;
    }
    b->vert_cell[b->nvert] = cell;
    memcpy(b->vert_frac + 3 * b->nvert, frac, 3 * sizeof(float));
    b->nvert++;
    return SIM_OK;
nomem:
    return (sim_status)sc_fail(err, err_sz, SIM_ERR_NOMEM, "surface: out of memory at %zu vertices",
                               b->nvert);
}

/* Quad a, b, c, d (counter-clockwise seen from outside) as triangles abc, acd. */
static sim_status sn_add_quad(sn_build *b, uint32_t q0, uint32_t q1, uint32_t q2, uint32_t q3,
                              char *err, size_t err_sz)
{
    SC_ASSERT(q0 != NO_VERT && q1 != NO_VERT && q2 != NO_VERT && q3 != NO_VERT);
    if (b->ntri > (size_t)INT_MAX - 2)
        return (sim_status)sc_fail(err, err_sz, SIM_ERR_LIMIT, "surface: more than %d triangles",
                                   INT_MAX);
    if (!sn_grow((void **)&b->tri, &b->cap_tri, b->ntri + 2, 3 * sizeof(uint32_t)))
        return (sim_status)sc_fail(err, err_sz, SIM_ERR_NOMEM,
                                   "surface: out of memory at %zu triangles", b->ntri);
    uint32_t *t = b->tri + 3 * b->ntri;
    t[0] = q0, t[1] = q1, t[2] = q2;
    t[3] = q0, t[4] = q2, t[5] = q3;
    b->ntri += 2;
    return SIM_OK;
}

/* Mean of the iso crossings on the cell's edges; h: the 8 corner values. */
static void sn_place(const float h[8], int mask, float iso, float frac[3])
{
    float sx = 0.0f, sy = 0.0f, sz = 0.0f;
    int n = 0;
    for (int e = 0; e < 12; e++) {
        int a = k_edges[e][0], c = k_edges[e][1];
        if (((mask >> a) & 1) == ((mask >> c) & 1))
            continue;
        float t = (iso - h[a]) / (h[c] - h[a]);
        if (!(t >= 0.0f)) /* also catches NaN from inf - inf */
            t = 0.0f;
        if (t > 1.0f)
            t = 1.0f;
        float pa[3] = {(float)(a & 1), (float)((a >> 1) & 1), (float)((a >> 2) & 1)};
        float pc[3] = {(float)(c & 1), (float)((c >> 1) & 1), (float)((c >> 2) & 1)};
        sx += pa[0] + t * (pc[0] - pa[0]);
        sy += pa[1] + t * (pc[1] - pa[1]);
        sz += pa[2] + t * (pc[2] - pa[2]);
        n++;
    }
    float inv = 1.0f / (float)n;
    frac[0] = fminf(fmaxf(sx * inv, 0.0f), 1.0f);
    frac[1] = fminf(fmaxf(sy * inv, 0.0f), 1.0f);
    frac[2] = fminf(fmaxf(sz * inv, 0.0f), 1.0f);
}

static void *sn_shrink(void *p, size_t n, size_t elem_size)
{
    if (n == 0) {
        free(p);
        return NULL;
    }
    void *q = realloc(p, n * elem_size);
    return q ? q : p;
}

static void sn_build_free(sn_build *b)
{
    free(b->tri);
    free(b->vert_cell);
    free(b->vert_frac);
    memset(b, 0, sizeof(*b));
}

/* The quads of the edges leaving cell (x, y, z)'s corner 0, whose vertex is m; cur and
 * prev are this and the previous layer's cell-to-vertex maps (cw cells a row). */
static sim_status sn_cell_quads(sn_build *b, uint32_t m, int mask, const uint32_t *cur,
                                const uint32_t *prev, size_t cw, size_t x, size_t y, size_t z,
                                char *err, size_t err_sz)
{
    sim_status st;
    /* Edges leaving corner 0 along x, y, z (corners 1, 2, 4). For the edge along
     * axis d, with u = d+1, v = d+2 (cyclic), the quad m, m-u, m-u-v, m-v is
     * counter-clockwise seen from +d: right when corner 0 is inside. */
    const int in0 = mask & 1;
    const size_t i = cw * y + x;
    if (y >= 1 && z >= 1 && in0 != ((mask >> 1) & 1)) { /* x: u = y, v = z */
        uint32_t mu = cur[i - cw], muv = prev[i - cw], mv = prev[i];
        st = in0 ? sn_add_quad(b, m, mu, muv, mv, err, err_sz)
                 : sn_add_quad(b, m, mv, muv, mu, err, err_sz);
        if (st != SIM_OK)
            return st;
    }
    if (z >= 1 && x >= 1 && in0 != ((mask >> 2) & 1)) { /* y: u = z, v = x */
        uint32_t mu = prev[i], muv = prev[i - 1], mv = cur[i - 1];
        st = in0 ? sn_add_quad(b, m, mu, muv, mv, err, err_sz)
                 : sn_add_quad(b, m, mv, muv, mu, err, err_sz);
        if (st != SIM_OK)
            return st;
    }
    if (x >= 1 && y >= 1 && in0 != ((mask >> 4) & 1)) { /* z: u = x, v = y */
        uint32_t mu = cur[i - 1], muv = cur[i - 1 - cw], mv = cur[i - cw];
        st = in0 ? sn_add_quad(b, m, mu, muv, mv, err, err_sz)
                 : sn_add_quad(b, m, mv, muv, mu, err, err_sz);
        if (st != SIM_OK)
            return st;
    }
    return SIM_OK;
}

/* Renumber the vertices block by block and reach by reach (a stable counting sort on the
 * 8^3 block of each vertex's cell and which next blocks the cell reaches, so within a run
 * the raster order stays), remap the triangles, and write the runs into out. */
static sim_status sn_order_by_block(sn_build *b, sim_surface_data *out, size_t nx, size_t ny,
                                    size_t nz, char *err, size_t err_sz)
{
    const size_t bx = (nx + VOL_BLOCK - 1) >> VOL_BLOCK_SHIFT;
    const size_t by = (ny + VOL_BLOCK - 1) >> VOL_BLOCK_SHIFT;
    const size_t nb = 8 * bx * by * ((nz + VOL_BLOCK - 1) >> VOL_BLOCK_SHIFT); /* keys */
    const size_t n = b->nvert;
    if (n == 0)
        return SIM_OK; /* an empty surface: no runs, NULL arrays */
    uint32_t *count = (uint32_t *)sc_calloc(nb + 1, sizeof(uint32_t));
    uint32_t *blk = (uint32_t *)sc_calloc(n, sizeof(uint32_t));
    uint32_t *newidx = (uint32_t *)sc_calloc(n, sizeof(uint32_t));
    uint32_t *cell2 = (uint32_t *)sc_calloc(n, sizeof(uint32_t));
    float *frac2 = (float *)sc_calloc(3 * n, sizeof(float));
    sim_status st = SIM_OK;
    if (!count || !blk || !newidx || !cell2 || !frac2) {
        st = (sim_status)sc_fail(err, err_sz, SIM_ERR_NOMEM,
                                 "surface: out of memory ordering %zu vertices", n);
        goto done;
    }
    size_t nrun = 0;
    for (size_t k = 0; k < n; k++) {
        size_t c = b->vert_cell[k], x = c % nx, y = (c / nx) % ny, z = c / (nx * ny);
        const size_t last = VOL_BLOCK - 1;
        size_t reach = ((x & last) == last) | ((y & last) == last) << 1 | ((z & last) == last) << 2;
        blk[k] = (uint32_t)(8 * ((x >> VOL_BLOCK_SHIFT) +
                                 bx * ((y >> VOL_BLOCK_SHIFT) + by * (z >> VOL_BLOCK_SHIFT))) +
                            reach);
        nrun += count[blk[k] + 1]++ == 0;
    }
    out->run_block = (uint32_t *)sc_calloc(nrun, sizeof(uint32_t)); /* nrun >= 1: n > 0 */
    out->run_reach = (uint8_t *)sc_calloc(nrun, 1);
    out->run_start = (uint32_t *)sc_calloc(nrun + 1, sizeof(uint32_t));
    out->block_run = (uint32_t *)sc_calloc(nb / 8 + 1, sizeof(uint32_t));
    if (!out->run_block || !out->run_reach || !out->run_start || !out->block_run) {
        st = (sim_status)sc_fail(err, err_sz, SIM_ERR_NOMEM, "surface: out of memory for runs");
        goto done;
    }
    int r = 0;
    for (size_t q = 0; q < nb; q++) { /* count[q]: the first index of key q, after this */
        if (q % 8 == 0)
            out->block_run[q / 8] = (uint32_t)r;
        if (count[q + 1]) {
            out->run_block[r] = (uint32_t)(q / 8);
            out->run_reach[r] = (uint8_t)(q % 8);
            out->run_start[r++] = count[q];
        }
        count[q + 1] += count[q];
    }
    out->run_start[r] = (uint32_t)n;
    out->block_run[nb / 8] = (uint32_t)r;
    out->nrun = r;
    for (size_t k = 0; k < n; k++) {
        uint32_t j = count[blk[k]]++;
        newidx[k] = j;
        cell2[j] = b->vert_cell[k];
        memcpy(frac2 + 3 * (size_t)j, b->vert_frac + 3 * k, 3 * sizeof(float));
    }
    for (size_t t = 0; t < 3 * b->ntri; t++)
        b->tri[t] = newidx[b->tri[t]];
    memcpy(b->vert_cell, cell2, n * sizeof(uint32_t));
    memcpy(b->vert_frac, frac2, 3 * n * sizeof(float));
done:
    free(count);
    free(blk);
    free(newidx);
    free(cell2);
    free(frac2);
    return st;
}

sim_status sim_surface_extract(sim_surface_data *out, const sim_volume *v, float iso_hu, char *err,
                               size_t err_sz)
{
    if (!out)
        return (sim_status)sc_fail(err, err_sz, SIM_ERR_ARG, "surface: out is NULL");
    memset(out, 0, sizeof(*out));
    if (!v || !v->hu)
        return (sim_status)sc_fail(err, err_sz, SIM_ERR_ARG, "surface: volume is NULL");
    if (v->nx < 2 || v->ny < 2 || v->nz < 2)
        return (sim_status)sc_fail(err, err_sz, SIM_ERR_ARG,
                                   "surface: volume %dx%dx%d needs >= 2 elements per axis", v->nx,
                                   v->ny, v->nz);
    if (!isfinite(iso_hu))
        return (sim_status)sc_fail(err, err_sz, SIM_ERR_ARG, "surface: iso level not finite");
    const size_t nx = (size_t)v->nx, ny = (size_t)v->ny, nz = (size_t)v->nz;
    const size_t nxny = nx * ny;
    if (nxny > (size_t)UINT32_MAX / nz)
        return (sim_status)sc_fail(err, err_sz, SIM_ERR_LIMIT,
                                   "surface: volume %dx%dx%d has more than 2^32-1 elements", v->nx,
                                   v->ny, v->nz);

    const size_t cw = nx - 1, ch = ny - 1; /* cells per layer: cw x ch */
    uint32_t *layer_a = (uint32_t *)sc_calloc(cw * ch, sizeof(uint32_t));
    uint32_t *layer_b = (uint32_t *)sc_calloc(cw * ch, sizeof(uint32_t));
    sn_build b;
    memset(&b, 0, sizeof(b));
    sim_status st = SIM_OK;
    if (!layer_a || !layer_b) {
        st = (sim_status)sc_fail(err, err_sz, SIM_ERR_NOMEM,
                                 "surface: out of memory for %zux%zu cell maps", cw, ch);
        goto done;
    }

    const float *hu = v->hu;
    const float iso = iso_hu;
    uint32_t *cur = layer_a, *prev = layer_b;
    for (size_t z = 0; z + 1 < nz; z++) {
        uint32_t *tmp = prev;
        prev = cur;
        cur = tmp;
        for (size_t y = 0; y + 1 < ny; y++) {
            const float *r00 = hu + nx * (y + ny * z); /* rows at (y, z), (y+1, z), ... */
            const float *r10 = r00 + nx;
            const float *r01 = r00 + nxny;
            const float *r11 = r01 + nx;
            uint32_t *crow = cur + cw * y;
            /* Column code of element column x: bit j = inside at (dy, dz), j = dy + 2*dz. */
            int col = (r00[0] >= iso) | (r10[0] >= iso) << 1 | (r01[0] >= iso) << 2 |
                      (r11[0] >= iso) << 3;
            for (size_t x = 0; x + 1 < nx; x++) {
                const size_t x1 = x + 1;
                int col1 = (r00[x1] >= iso) | (r10[x1] >= iso) << 1 | (r01[x1] >= iso) << 2 |
                           (r11[x1] >= iso) << 3;
                int mask = k_spread[col] | k_spread[col1] << 1;
                col = col1;
                if (mask == 0 || mask == 0xff) {
                    crow[x] = NO_VERT;
                    continue;
                }
                const float h[8] = {r00[x], r00[x1], r10[x], r10[x1],
                                    r01[x], r01[x1], r11[x], r11[x1]};
                float frac[3];
                sn_place(h, mask, iso, frac);
                const uint32_t m = (uint32_t)b.nvert;
                st = sn_add_vert(&b, (uint32_t)(x + nx * (y + ny * z)), frac, err, err_sz);
                if (st != SIM_OK)
                    goto done;
                crow[x] = m;

                st = sn_cell_quads(&b, m, mask, cur, prev, cw, x, y, z, err, err_sz);
                if (st != SIM_OK)
                    goto done;
            }
        }
    }

    st = sn_order_by_block(&b, out, nx, ny, nz, err, err_sz);
    if (st != SIM_OK)
        goto done;
    out->nvert = (int)b.nvert;
    out->ntri = (int)b.ntri;
    out->tri = (uint32_t *)sn_shrink(b.tri, 3 * b.ntri, sizeof(uint32_t));
    out->vert_cell = (uint32_t *)sn_shrink(b.vert_cell, b.nvert, sizeof(uint32_t));
    out->vert_frac = (float *)sn_shrink(b.vert_frac, 3 * b.nvert, sizeof(float));
    memset(&b, 0, sizeof(b));
done:
    if (st != SIM_OK)
        sim_surface_data_free(out); /* the runs, when ordering got that far */
    sn_build_free(&b);
    free(layer_a);
    free(layer_b);
    return st;
}

void sim_surface_data_free(sim_surface_data *s)
{
    if (!s)
        return;
    free(s->tri);
    free(s->vert_cell);
    free(s->vert_frac);
    free(s->run_block);
    free(s->run_reach);
    free(s->run_start);
    free(s->block_run);
    memset(s, 0, sizeof(*s));
}

void sim_surface_eval(const sim_surface_data *s, int nx, int ny, const float *elem_pos,
                      const float spacing_mm[3], float *out)
{
    SC_ASSERT(s && elem_pos && spacing_mm && (out || s->nvert == 0));
    sim_surface_eval_range(s, nx, ny, elem_pos, spacing_mm, out, 0, (uint32_t)s->nvert);
}

void sim_surface_eval_range(const sim_surface_data *s, int nx, int ny, const float *elem_pos,
                            const float spacing_mm[3], float *out, uint32_t first, uint32_t end)
{
    SC_ASSERT(end <= (uint32_t)s->nvert);
    const size_t sx = 3, sy = 3 * (size_t)nx, sz = 3 * (size_t)nx * (size_t)ny;
    for (uint32_t k = first; k < end; k++) {
        const float *f = s->vert_frac + 3 * (size_t)k;
        const float *p000 = elem_pos + 3 * (size_t)s->vert_cell[k];
        const float fx = f[0], fy = f[1], fz = f[2];
        const float gx = 1.0f - fx, gy = 1.0f - fy, gz = 1.0f - fz;
        const float w[8] = {gx * gy * gz, fx * gy * gz, gx * fy * gz, fx * fy * gz,
                            gx * gy * fz, fx * gy * fz, gx * fy * fz, fx * fy * fz};
        float acc[3] = {0.0f, 0.0f, 0.0f};
        for (int c = 0; c < 8; c++) {
            const float *p = p000 + (c & 1) * sx + ((c >> 1) & 1) * sy + ((c >> 2) & 1) * sz;
            acc[0] += w[c] * p[0];
            acc[1] += w[c] * p[1];
            acc[2] += w[c] * p[2];
        }
        float *o = out + 3 * (size_t)k;
        o[0] = acc[0] * spacing_mm[0];
        o[1] = acc[1] * spacing_mm[1];
        o[2] = acc[2] * spacing_mm[2];
    }
}
