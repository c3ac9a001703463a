/* softbody_scenes.h: softbody scenes written once for the tests and the bench: a box of tets
 * with two regions and an embedded surface (until the geometry side's mesher feeds the
 * hybrid model), and measures computed here, independently of the simulation's code: the
 * best rigid fit of two point sets, barycentric coordinates in a tet. */
#ifndef TESTS_SCENES_SOFTBODY_SCENES_H
#define TESTS_SCENES_SOFTBODY_SCENES_H

#include "sim/softbody/softbody.h"

/* A box of nx x ny x nz cubic cells of `cell` m, its corner at (0, 0, z0), each cell split
 * into 6 tets (Kuhn's triangulation: neighbouring cells share faces exactly). Cells with
 * x index below split_x are region 0, the rest region 1 (nregion 2; 1 when split_x >= nx).
 * The embedded surface: the box's six faces as grids of `res` points per cell edge (the
 * faces' border points repeated on each face), each located in its tet with barycentric
 * weights (res 0: none). Free with sim_softbody_tets_free. */
sim_status sbs_box_tets(sim_softbody_tets *out, int nx, int ny, int nz, float cell, float z0,
                        int split_x, int res, char *err, size_t err_sz);

/* The rigid motion (R row-major, t) that best maps a onto b (least squares, n points x 3,
 * Horn's quaternion method, eigenvector by Jacobi rotations, in double). Returns the largest
 * distance |R a_i + t - b_i|. */
double sbs_rigid_fit(const float *a, const float *b, int n, double R[9], double t[3]);

/* Barycentric coordinates of p in tet (p0, p1, p2, p3), in double. Returns 0 for a flat tet. */
int sbs_barycentric(const float *p0, const float *p1, const float *p2, const float *p3,
                    const float *p, double w[4]);

/* A surface model of the default organ with n vertices (NULL on failure, printed). */
sim_softbody_model *sbs_organ_model(int n);

#endif
