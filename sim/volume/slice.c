/* slice.c: slices of the deformed volume by inverting the displacement field.
 *
 * The simulation moves elements forward: the element resting at lattice point q sits at
 * x(q) = q + d(q), with d the displacement, known at elements and interpolated trilinearly
 * between them. A slice pixel is a fixed lattice point p, and shows the tissue now there,
 * so we need the rest point q with q + d(q) = p. For displacements whose gradient has norm
 * below 1 (the tissue is not folded over itself) the map q -> p - d(q) is a contraction and
 * the fixed-point iteration q_{k+1} = p - d(q_k), q_0 = p converges geometrically; 4 steps
 * suffice for small strains. Large local strains (a pulled tent) can exceed that bound, so
 * damped steps follow while the residual is above 0.01 lattice units. This is the classic
 * backward-warp inversion (e.g. Chen et al., "A simple fixed-point approach to invert a
 * deformation field", Med. Phys. 2008). Then the pixel is the rest HU at q.
 *
 * Every pixel is independent and computed the same way whatever the thread count, so the
 * OpenMP split over rows cannot change the result.
 */
#include "slice.h"

#include <math.h>
#include <string.h>

#include "../core/sc_base.h"

#define SL_ITERATIONS        4
#define SL_DAMPED_ITERATIONS 16
#define SL_TOLERANCE         0.01f /* lattice units */
#define SL_AIR_HU            (-1000.0f)

static const char *sl_plane_name(sim_plane plane)
{
    switch (plane) {
    case SIM_PLANE_AXIAL:
        return "axial";
    case SIM_PLANE_CORONAL:
        return "coronal";
    case SIM_PLANE_SAGITTAL:
        return "sagittal";
    }
    return "unknown";
}

void sim_slice_size(int nx, int ny, int nz, sim_plane plane, int *w, int *h)
{
    int a = 0, b = 0;
    switch (plane) {
    case SIM_PLANE_AXIAL:
        a = nx, b = ny;
        break;
    case SIM_PLANE_CORONAL:
        a = nx, b = nz;
        break;
    case SIM_PLANE_SAGITTAL:
        a = ny, b = nz;
        break;
    }
    if (w)
        *w = a;
    if (h)
        *h = b;
}

/* The cell of one axis holding q in [0, n-1]: lower element i0, upper i0 + step, weight f
 * of the upper one. A 1-element axis has step 0. */
typedef struct sl_axis {
    int i0, step;
    float f;
} sl_axis;

static sl_axis sl_axis_at(float q, int n)
{
    sl_axis a;
    if (n < 2) {
        a.i0 = 0, a.step = 0, a.f = 0.0f;
        return a;
    }
    int i = (int)floorf(q);
    if (i > n - 2)
        i = n - 2;
    if (i < 0)
        i = 0;
    a.i0 = i, a.step = 1, a.f = q - (float)i;
    return a;
}

static float sl_clampf(float q, float hi)
{
    if (!(q >= 0.0f)) /* also NaN */
        return 0.0f;
    return q > hi ? hi : q;
}

static float sl_lerp(float a, float b, float f)
{
    return (1.0f - f) * a + f * b;
}

/* Trilinear displacement (elem_pos - rest) at q, clamped to the lattice. */
static void sl_displacement(const float *elem_pos, int nx, int ny, int nz, const float q[3],
                            float d[3])
{
    sl_axis ax = sl_axis_at(sl_clampf(q[0], (float)(nx - 1)), nx);
    sl_axis ay = sl_axis_at(sl_clampf(q[1], (float)(ny - 1)), ny);
    sl_axis az = sl_axis_at(sl_clampf(q[2], (float)(nz - 1)), nz);
    float c[8][3];
    for (int k = 0; k < 8; k++) {
        int x = ax.i0 + (k & 1) * ax.step;
        int y = ay.i0 + ((k >> 1) & 1) * ay.step;
        int z = az.i0 + ((k >> 2) & 1) * az.step;
        const float *p =
            elem_pos + 3 * ((size_t)x + (size_t)nx * ((size_t)y + (size_t)ny * (size_t)z));
        c[k][0] = p[0] - (float)x;
        c[k][1] = p[1] - (float)y;
        c[k][2] = p[2] - (float)z;
    }
    for (int j = 0; j < 3; j++) {
        float y0 = sl_lerp(sl_lerp(c[0][j], c[1][j], ax.f), sl_lerp(c[2][j], c[3][j], ax.f), ay.f);
        float y1 = sl_lerp(sl_lerp(c[4][j], c[5][j], ax.f), sl_lerp(c[6][j], c[7][j], ax.f), ay.f);
        d[j] = sl_lerp(y0, y1, az.f);
    }
}

/* Trilinear rest HU at q; air outside the lattice. */
static float sl_hu_at(const sim_volume *v, const float q[3])
{
    if (!(q[0] >= 0.0f && q[0] <= (float)(v->nx - 1) && q[1] >= 0.0f &&
          q[1] <= (float)(v->ny - 1) && q[2] >= 0.0f && q[2] <= (float)(v->nz - 1)))
        return SL_AIR_HU;
    sl_axis ax = sl_axis_at(q[0], v->nx), ay = sl_axis_at(q[1], v->ny),
            az = sl_axis_at(q[2], v->nz);
    const size_t sy = (size_t)v->nx, sz = (size_t)v->nx * (size_t)v->ny;
    const float *h = v->hu + (size_t)ax.i0 + sy * (size_t)ay.i0 + sz * (size_t)az.i0;
    const size_t dx = (size_t)ax.step, dy = sy * (size_t)ay.step, dz = sz * (size_t)az.step;
    float y0 = sl_lerp(sl_lerp(h[0], h[dx], ax.f), sl_lerp(h[dy], h[dy + dx], ax.f), ay.f);
    float y1 =
        sl_lerp(sl_lerp(h[dz], h[dz + dx], ax.f), sl_lerp(h[dz + dy], h[dz + dy + dx], ax.f), ay.f);
    return sl_lerp(y0, y1, az.f);
}

static uint8_t sl_window(float hu, float lo, float width)
{
    float g = roundf((hu - lo) / width * 255.0f);
    if (!(g >= 0.0f)) /* also NaN */
        return 0;
    return g >= 255.0f ? 255 : (uint8_t)g;
}

sim_status sim_slice_resample(const sim_volume *rest, const float *elem_pos, sim_plane plane,
                              int index, float level_hu, float width_hu, float *hu_out,
                              uint8_t *img_out, char *err, size_t err_sz)
{
    const char *name = sl_plane_name(plane);
    if (!rest || !rest->hu || !elem_pos)
        return (sim_status)sc_fail(err, err_sz, SIM_ERR_ARG, "%s slice: NULL volume or positions",
                                   name);
    if (rest->nx < 1 || rest->ny < 1 || rest->nz < 1)
        return (sim_status)sc_fail(err, err_sz, SIM_ERR_ARG, "%s slice: bad volume dims %dx%dx%d",
                                   name, rest->nx, rest->ny, rest->nz);
    int n_index;
    switch (plane) {
    case SIM_PLANE_AXIAL:
        n_index = rest->nz;
        break;
    case SIM_PLANE_CORONAL:
        n_index = rest->ny;
        break;
    case SIM_PLANE_SAGITTAL:
        n_index = rest->nx;
        break;
    default:
        return (sim_status)sc_fail(err, err_sz, SIM_ERR_ARG,
                                   "slice: unknown plane %d (axial 0, coronal 1, sagittal 2)",
                                   (int)plane);
    }
    if (index < 0 || index >= n_index)
        return (sim_status)sc_fail(err, err_sz, SIM_ERR_ARG,
                                   "%s slice: index %d out of range [0, %d]", name, index,
                                   n_index - 1);
    if (!isfinite(level_hu) || !isfinite(width_hu) || !(width_hu > 0.0f))
        return (sim_status)sc_fail(err, err_sz, SIM_ERR_ARG,
                                   "%s slice: window level %g / width %g: need finite level and "
                                   "width in (0, inf)",
                                   name, (double)level_hu, (double)width_hu);
    if (!hu_out && !img_out)
        return SIM_OK;

    int w, h;
    sim_slice_size(rest->nx, rest->ny, rest->nz, plane, &w, &h);
    const float lo = level_hu - 0.5f * width_hu;
    const int nx = rest->nx, ny = rest->ny, nz = rest->nz;

#pragma omp parallel for schedule(static)
    for (int v = 0; v < h; v++) {
        for (int u = 0; u < w; u++) {
            float p[3];
            switch (plane) {
            case SIM_PLANE_AXIAL:
                p[0] = (float)u, p[1] = (float)v, p[2] = (float)index;
                break;
            case SIM_PLANE_CORONAL:
                p[0] = (float)u, p[1] = (float)index, p[2] = (float)v;
                break;
            default:
                p[0] = (float)index, p[1] = (float)u, p[2] = (float)v;
                break;
            }
            float q[3] = {p[0], p[1], p[2]};
            for (int it = 0; it < SL_ITERATIONS; it++) {
                float d[3];
                sl_displacement(elem_pos, nx, ny, nz, q, d);
                q[0] = p[0] - d[0];
                q[1] = p[1] - d[1];
                q[2] = p[2] - d[2];
            }
            /* Where the field is steep (a pulled tent: stretch and shear together can give
             * the gradient a norm above 1) the plain iteration oscillates and draws ghost
             * copies of the skin; a damped step converges there: q += (p - d(q) - q) / 2. */
            for (int it = 0; it < SL_DAMPED_ITERATIONS; it++) {
                float d[3], r[3];
                sl_displacement(elem_pos, nx, ny, nz, q, d);
                for (int b = 0; b < 3; b++)
                    r[b] = p[b] - d[b] - q[b];
                if (r[0] * r[0] + r[1] * r[1] + r[2] * r[2] < SL_TOLERANCE * SL_TOLERANCE)
                    break;
                for (int b = 0; b < 3; b++)
                    q[b] += 0.5f * r[b];
            }
            const float hu = sl_hu_at(rest, q);
            const size_t o = (size_t)u + (size_t)w * (size_t)v;
            if (hu_out)
                hu_out[o] = hu;
            if (img_out)
                img_out[o] = sl_window(hu, lo, width_hu);
        }
    }
    return SIM_OK;
}
