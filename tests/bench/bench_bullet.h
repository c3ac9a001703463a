/* bench_bullet.h: the Bullet peer of `softcast-bench cloth --dims WxH` (bench_bullet.cpp),
 * callable from C and C++. */
#ifndef TESTS_BENCH_BENCH_BULLET_H
#define TESTS_BENCH_BENCH_BULLET_H

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

#ifdef __cplusplus
}
#endif
#endif
