/* harness.h: a small test harness. Tests register themselves:
 *
 *   TEST(volume_band_holds) { ... CHECK(x < 1e-5f); REQUIRE(ptr != NULL); }
 *
 * CHECK records a failure and goes on; REQUIRE records it and leaves the test;
 * SKIP leaves the test and counts it skipped, with its reason printed. The runner
 * (test_main.c) ends with "N passed, N failed, N skipped".
 *
 * TEST_LONG marks a long run (thousands of frames of physics): under ASan and UBSan such a
 * run takes minutes where the optimized build takes seconds, so make test runs it in
 * softcast-tests-fast (the same tests, -O2, no sanitizers: `--long`) and leaves it out of the
 * sanitized run (`--short`); each long run keeps a short sanitized sibling. Without either
 * flag a binary runs every test. */
#ifndef TESTS_HARNESS_H
#define TESTS_HARNESS_H

#include <stdio.h>

typedef void (*th_fn)(void);
void th_register(const char *name, th_fn fn, const char *file, int long_run);
int th_check(int ok, const char *expr, const char *file, int line);
void th_checkf(int ok, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
void th_skip(const char *reason);
/* Print a measured figure in the test log: "  note: ...". */
void th_note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Data made by others that tests/run-tests.sh fetches into $SOFTCAST_DATA (default
 * build/data): name's path into path. Returns 1 when the file is there; otherwise 0 (skip:
 * no registry reachable, or no fetch tried) or -1 (fail: the registry answered and the fetch
 * still broke), with why in msg. Data never goes missing quietly. */
int th_data(const char *name, char *path, size_t path_sz, char *msg, size_t msg_sz);
/* Use th_data's verdict in a test: leave it (skip or fail) unless the file is there. */
#define TH_DATA(name, path, msg)                                          \
    do {                                                                  \
        int th_have_ = th_data(name, path, sizeof path, msg, sizeof msg); \
        if (th_have_ < 0) {                                               \
            CHECKF(0, "%s", msg);                                         \
            return;                                                       \
        }                                                                 \
        if (th_have_ == 0)                                                \
            SKIP(msg);                                                    \
    } while (0)

#define TH_TEST(name, long_run)                                    \
    static void name(void);                                        \
    __attribute__((constructor)) static void name##_register(void) \
    {                                                              \
        th_register(#name, name, __FILE__, long_run);              \
    }                                                              \
    static void name(void)
#define TEST(name)      TH_TEST(name, 0)
#define TEST_LONG(name) TH_TEST(name, 1)

#define CHECK(c)       ((void)th_check(!!(c), #c, __FILE__, __LINE__))
#define CHECKF(c, ...) th_checkf(!!(c), __FILE__, __LINE__, __VA_ARGS__)
#define REQUIRE(c)                                    \
    do {                                              \
        if (!th_check(!!(c), #c, __FILE__, __LINE__)) \
            return;                                   \
    } while (0)
#define SKIP(reason)     \
    do {                 \
        th_skip(reason); \
        return;          \
    } while (0)

#endif
