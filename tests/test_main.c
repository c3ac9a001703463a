/* test_main.c: runs registered tests, optionally those whose name contains argv[1]. */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "sim/core/sc_base.h"

#define TH_MAX 512

static struct {
    const char *name, *file;
    th_fn fn;
} g_tests[TH_MAX];
static int g_ntests;
static int g_cur_failed, g_cur_skipped;

void th_register(const char *name, th_fn fn, const char *file)
{
    SC_ASSERT(g_ntests < TH_MAX);
    g_tests[g_ntests].name = name;
    g_tests[g_ntests].file = file;
    g_tests[g_ntests].fn = fn;
    g_ntests++;
}

int th_check(int ok, const char *expr, const char *file, int line)
{
    if (!ok) {
        printf("  FAIL %s:%d: %s\n", file, line, expr);
        g_cur_failed++;
    }
    return ok;
}

void th_checkf(int ok, const char *file, int line, const char *fmt, ...)
{
    if (ok)
        return;
    va_list ap;
    va_start(ap, fmt);
    printf("  FAIL %s:%d: ", file, line);
    vprintf(fmt, ap);
    printf("\n");
    va_end(ap);
    g_cur_failed++;
}

void th_note(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    printf("  note: ");
    vprintf(fmt, ap);
    printf("\n");
    va_end(ap);
}

int th_data(const char *name, char *path, size_t path_sz, char *msg, size_t msg_sz)
{
    const char *dir = getenv("SOFTCAST_DATA");
    dir = dir ? dir : "build/data";
    snprintf(path, path_sz, "%s/%s", dir, name);
    FILE *f = fopen(path, "rb");
    if (f) {
        fclose(f);
        return 1;
    }
    char marker[1100], why[600] = "";
    snprintf(marker, sizeof marker, "%s.FETCH_FAILED", path);
    FILE *w = fopen(marker, "r");
    if (w) {
        if (!fgets(why, sizeof why, w))
            why[0] = 0;
        fclose(w);
        why[strcspn(why, "\n")] = 0;
    }
    if (!strncmp(why, "reachable:", 10)) {
        snprintf(msg, msg_sz, "%s missing although the package registry answered: %s", name,
                 why + 11);
        return -1;
    }
    if (why[0])
        snprintf(msg, msg_sz, "%s not fetched: %s", name, why);
    else
        snprintf(msg, msg_sz,
                 "%s not at %s and no fetch was tried (tests/run-tests.sh, run by make test, "
                 "fetches it)",
                 name, path);
    return 0;
}

void th_skip(const char *reason)
{
    printf("  SKIP: %s\n", reason);
    g_cur_skipped = 1;
}

static int by_file_then_name(const void *a, const void *b)
{
    const char *const *x = a, *const *y = b; /* name, file pairs: compare file first */
    int c = strcmp(x[0], y[0]);
    return c ? c : strcmp(x[1], y[1]);
}

int main(int argc, char **argv)
{
    const char *filter = argc > 1 ? argv[1] : NULL;
    int idx[TH_MAX];
    /* Constructors run in link order; sort by file then name for a stable log. */
    for (int i = 0; i < g_ntests; i++)
        idx[i] = i;
    for (int i = 1; i < g_ntests; i++) {
        int k = idx[i], j = i - 1;
        const char *key[2] = {g_tests[k].file, g_tests[k].name};
        while (j >= 0) {
            const char *cur[2] = {g_tests[idx[j]].file, g_tests[idx[j]].name};
            if (by_file_then_name(cur, key) <= 0)
                break;
            idx[j + 1] = idx[j];
            j--;
        }
        idx[j + 1] = k;
    }
    int passed = 0, failed = 0, skipped = 0;
    setvbuf(stdout, NULL, _IOLBF, 0);
    for (int n = 0; n < g_ntests; n++) {
        int i = idx[n];
        if (filter && !strstr(g_tests[i].name, filter))
            continue;
        g_cur_failed = 0;
        g_cur_skipped = 0;
        printf("RUN  %s\n", g_tests[i].name);
        double t0 = sc_now_ms();
        g_tests[i].fn();
        double ms = sc_now_ms() - t0;
        if (g_cur_failed) {
            failed++;
            printf("FAIL %s (%.0f ms)\n", g_tests[i].name, ms);
        } else if (g_cur_skipped) {
            skipped++;
            printf("SKIP %s\n", g_tests[i].name);
        } else {
            passed++;
            printf("ok   %s (%.0f ms)\n", g_tests[i].name, ms);
        }
    }
    printf("%d passed, %d failed, %d skipped\n", passed, failed, skipped);
    return failed ? 1 : 0;
}
