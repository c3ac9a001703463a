/* bench_cloth.h: `softcast-bench cloth ...` (bench_cloth.c). */
#ifndef TESTS_BENCH_BENCH_CLOTH_H
#define TESTS_BENCH_BENCH_CLOTH_H
int bench_cloth_main(int argc, char **argv);
#endif
