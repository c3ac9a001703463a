/* bench_bullet.h: the Bullet peers of `softcast-bench cloth --dims WxH` (bench_bullet.cpp) and
 * `softcast-bench softbody --model hybrid --peer bullet` (bench_bullet_softbody.cpp),
 * callable from C and C++. */
#ifndef TESTS_BENCH_BENCH_BULLET_H
#define TESTS_BENCH_BENCH_BULLET_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* One sheet, 1 m square, cols x rows nodes of 1 kg hanging from its two top corners, the
 * same as ours. Bullet's links are position-based: each iteration moves a link's ends by
 * its error times kLST, as one XPBD iteration with compliance alpha does with
 * w / (w + alpha / h^2): the bench passes that. */
typedef struct bench_bullet_sheet {
    /* in */
    int cols, rows, substeps, iterations, frames;
    double stretch_klst; /* stiffness of the edge links (Bullet's kLST), [0, 1] */
    double bend_klst;    /* of the bending links, one across each interior edge as ours */
    double damping_kdp;  /* velocity lost per substep (Bullet's kDP), [0, 1] */
    /* out */
    int stretch_links, bend_links;
    double ms_per_step;     /* mean over the frames after the first 10, wall clock */
    double cpu_ms_per_step; /* the same, this thread's CPU time */
    double lowest_z;        /* m, after the last frame */
} bench_bullet_sheet;

/* Returns 0. */
int bench_bullet_hanging(bench_bullet_sheet *s);

/* The softbody bench's tet box as a Bullet soft body (bench_bullet_softbody.cpp): a node per
 * tet vertex with its mass, a link on every tet edge (Bullet's soft bodies solve links; its
 * tetras carry no constraint of their own), the links of region r at stiffness klst[r],
 * dropped onto a floor box at z = 0 under gravity -z, stepped frames x 1/60 s with the given
 * substeps and position iterations. */
typedef struct bench_bullet_tets {
    /* in */
    int nvert, ntet, nedge;
    const float *x;         /* (nvert x 3) m */
    const float *mass;      /* (nvert) kg */
    const int32_t *tet;     /* (ntet x 4) */
    const int32_t *edge;    /* (nedge x 2) */
    const uint8_t *eregion; /* (nedge) the region whose stiffness a link takes */
    double klst[4];
    int substeps, iterations, frames;
    double damping_kdp, gravity;
    /* out */
    int links;
    double ms_median, ms_p90, cpu_ms_mean; /* per frame, after the first 10 */
    double lowest_z;
} bench_bullet_tets;

int bench_bullet_tet_box(bench_bullet_tets *t);

#ifdef __cplusplus
}
#endif
#endif
