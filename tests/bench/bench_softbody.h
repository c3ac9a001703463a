/* bench_softbody.h: `softcast-bench softbody ...` (bench_softbody.c, bench_softbody_peer.c). */
#ifndef TESTS_BENCH_BENCH_SOFTBODY_H
#define TESTS_BENCH_BENCH_SOFTBODY_H
int bench_softbody_main(int argc, char **argv);
/* CPU (1 thread) against CUDA on both models, frames each; prints one line per model. */
int bench_softbody_parity(int frames);
/* The Bullet peer of the hybrid bench (with Bullet installed): its settings converted from
 * state s's (masses, per-region link stiffness, damping), its line, and a line comparing it
 * with ours (median wall ms, mean CPU ms, lowest point after the frames). */
typedef struct sim_softbody_model sim_softbody_model;
typedef struct sim_softbody_state sim_softbody_state;
void bench_softbody_peer(const sim_softbody_model *m, const sim_softbody_state *s, int frames,
                         double ms_median, double cpu_ms, double lowest_z);
#endif
