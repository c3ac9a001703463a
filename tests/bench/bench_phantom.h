/* bench_phantom.h: `softcast-bench phantom ...` (bench_phantom.c). */
#ifndef TESTS_BENCH_BENCH_PHANTOM_H
#define TESTS_BENCH_BENCH_PHANTOM_H
int bench_phantom_main(int argc, char **argv);
#endif
