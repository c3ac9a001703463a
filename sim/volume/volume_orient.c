/* volume_orient.c: one lattice orientation for every loaded volume, whatever its format.
 *
 * A reader gives the voxel-to-patient directions of its stored axes in RAS (x toward the
 * patient's right, y anterior, z superior): NIfTI's sform or qform as they are, DICOM's
 * LPS directions with x and y negated. Each stored axis goes to the patient axis it is
 * nearest, found as the NIfTI library does it (nifti_mat44_to_orientation): the columns
 * made unit, the matrix made orthogonal by its polar decomposition, then of the 48 signed
 * permutations of the same handedness the one whose product with it has the largest trace
 * (the smallest rotation). The voxels are then permuted and flipped exactly; an oblique
 * volume is taken to its nearest axes without resampling, and says by how much. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/sc_base.h"
#include "volume_internal.h"

static double det3(double m[3][3])
{
    return m[0][0] * (m[1][1] * m[2][2] - m[1][2] * m[2][1]) -
           m[0][1] * (m[1][0] * m[2][2] - m[1][2] * m[2][0]) +
           m[0][2] * (m[1][0] * m[2][1] - m[1][1] * m[2][0]);
}

/* q <- its orthogonal polar factor (Newton's iteration q = (q + q^-T) / 2); 0 if singular. */
static int polar3(double q[3][3])
{
    for (int it = 0; it < 40; it++) {
        double d = det3(q);
        if (!(fabs(d) > 1e-9))
            return 0;
        double inv_t[3][3], change = 0.0; /* inverse transposed: the cofactors over det */
        for (int r = 0; r < 3; r++)
            for (int c = 0; c < 3; c++) {
                int r1 = (r + 1) % 3, r2 = (r + 2) % 3, c1 = (c + 1) % 3, c2 = (c + 2) % 3;
                inv_t[r][c] = (q[r1][c1] * q[r2][c2] - q[r1][c2] * q[r2][c1]) / d;
            }
        for (int r = 0; r < 3; r++)
            for (int c = 0; c < 3; c++) {
                double nq = 0.5 * (q[r][c] + inv_t[r][c]);
                change = fmax(change, fabs(nq - q[r][c]));
                q[r][c] = nq;
            }
        if (change < 1e-12)
            break;
    }
    return 1;
}

/* The patient axis (0..2) and sign (+1, -1) of each stored axis: the signed permutation of
 * q's handedness nearest to q. */
static void nearest_axes(double q[3][3], int axis[3], int sign[3])
{
    static const int perm[6][3] = {{0, 1, 2}, {0, 2, 1}, {1, 0, 2},
                                   {1, 2, 0}, {2, 0, 1}, {2, 1, 0}};
    static const int parity[6] = {1, -1, -1, 1, 1, -1};
    double best = -1e300, dq = det3(q);
    for (int p = 0; p < 6; p++)
        for (int s = 0; s < 8; s++) {
            int sg[3] = {(s & 1) ? -1 : 1, (s & 2) ? -1 : 1, (s & 4) ? -1 : 1};
            if ((double)(parity[p] * sg[0] * sg[1] * sg[2]) * dq <= 0.0)
                continue;
            double trace = 0.0; /* stored axis a sent to patient axis perm[p][a] */
            for (int a = 0; a < 3; a++)
                trace += sg[a] * q[perm[p][a]][a];
            if (trace > best) {
                best = trace;
                for (int a = 0; a < 3; a++)
                    axis[a] = perm[p][a], sign[a] = sg[a];
            }
        }
}

/* Copy v's voxels into the RAS lattice: patient axis w is stored axis src_axis[w],
 * reversed when flip[w]. */
static sim_status permute_flip(sim_volume *v, const int src_axis[3], const int flip[3],
                               const char *what, char *err, size_t err_sz)
{
    int dims[3] = {v->nx, v->ny, v->nz}, od[3];
    float osp[3];
    for (int w = 0; w < 3; w++)
        od[w] = dims[src_axis[w]], osp[w] = v->spacing_mm[src_axis[w]];
    size_t n = (size_t)od[0] * (size_t)od[1] * (size_t)od[2];
    float *hu = (float *)sc_calloc(n, sizeof *hu);
    if (!hu)
        return sc_fail(err, err_sz, SIM_ERR_NOMEM, "%s: out of memory to reorient", what);
    size_t stride[3] = {1, (size_t)dims[0], (size_t)dims[0] * (size_t)dims[1]};
    for (int z = 0; z < od[2]; z++)
        for (int y = 0; y < od[1]; y++)
            for (int x = 0; x < od[0]; x++) {
                int o[3] = {x, y, z};
                size_t src = 0;
                for (int w = 0; w < 3; w++)
                    src += (size_t)(flip[w] ? od[w] - 1 - o[w] : o[w]) * stride[src_axis[w]];
                hu[(size_t)x + (size_t)od[0] * ((size_t)y + (size_t)od[1] * (size_t)z)] =
                    v->hu[src];
            }
    free(v->hu);
    v->hu = hu;
    v->nx = od[0], v->ny = od[1], v->nz = od[2];
    memcpy(v->spacing_mm, osp, sizeof osp);
    return SIM_OK;
}

sim_status vol_to_ras(sim_volume *v, const double dir[9], const char *what, char *err,
                      size_t err_sz)
{
    double q[3][3], worst = 0.0;
    for (int a = 0; a < 3; a++) {
        double len = 0.0, big = 0.0;
        for (int w = 0; w < 3; w++) {
            len += dir[3 * w + a] * dir[3 * w + a];
            big = fmax(big, fabs(dir[3 * w + a]));
        }
        if (!isfinite(len) || !(len > 0.0))
            return sc_fail(err, err_sz, SIM_ERR_FORMAT,
                           "%s's axis %d is %s: no orientation can be read from it", what, a,
                           isfinite(len) ? "zero" : "not finite");
        worst = fmax(worst, acos(fmin(1.0, big / sqrt(len))));
        for (int w = 0; w < 3; w++)
            q[w][a] = dir[3 * w + a] / sqrt(len);
    }
    if (!polar3(q))
        return sc_fail(err, err_sz, SIM_ERR_FORMAT,
                       "%s's axes are not independent (two point the same way): no orientation "
                       "can be read from it",
                       what);
    int axis[3], sign[3], src_axis[3], flip[3];
    nearest_axes(q, axis, sign);
    static const char pos[3] = {'R', 'A', 'S'}, neg[3] = {'L', 'P', 'I'};
    for (int a = 0; a < 3; a++) {
        src_axis[axis[a]] = a;
        flip[axis[a]] = sign[a] < 0;
        v->orientation[a] = sign[a] > 0 ? pos[axis[a]] : neg[axis[a]];
    }
    v->orientation[3] = 0;
    v->oblique_deg = (float)(worst * 180.0 / 3.14159265358979323846);
    return permute_flip(v, src_axis, flip, what, err, err_sz);
}
