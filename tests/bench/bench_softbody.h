/* bench_softbody.h: `softcast-bench softbody ...` (bench_softbody.c, bench_softbody_peer.c). */
#ifndef TESTS_BENCH_BENCH_SOFTBODY_H
#define TESTS_BENCH_BENCH_SOFTBODY_H
int bench_softbody_main(int argc, char **argv);
/* CPU (1 thread) against CUDA on both models, frames each; prints one line per model. */
int bench_softbody_parity(int frames);
/* One of our runs: median and p90 wall ms a frame, mean CPU ms, lowest point after the frames. */
typedef struct bench_sb_figures {
    double ms_median, ms_p90, cpu_ms, lowest_z;
} bench_sb_figures;
/* The Bullet peer of the hybrid bench (with Bullet installed): its settings converted from
 * state s's (masses, per-region link stiffness, damping), its line, and a line comparing it
 * with ours: full (edges, tet volumes, virtual springs) and like for like (edges only, the
 * same substeps and iterations: what Bullet's links do). */
typedef struct sim_softbody_model sim_softbody_model;
typedef struct sim_softbody_state sim_softbody_state;
void bench_softbody_peer(const sim_softbody_model *m, const sim_softbody_state *s, int frames,
                         const bench_sb_figures *full, const bench_sb_figures *edges_only);
#endif
