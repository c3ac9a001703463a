/* bench_growth.h: `softcast-bench growth ...` (bench_growth.c). */
#ifndef TESTS_BENCH_BENCH_GROWTH_H
#define TESTS_BENCH_BENCH_GROWTH_H
int bench_growth_main(int argc, char **argv);
#endif
