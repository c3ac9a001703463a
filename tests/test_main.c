/* test_main.c: runs registered tests, optionally those whose name contains a filter.
 *
 *   softcast-tests [-j N | -jN] [--long | --short] [FILTER]
 *
 * --long: only the long runs (TEST_LONG), --short: all but them (harness.h says why).
 * -j N (or SOFTCAST_TEST_JOBS=N): N worker processes, forked before any test runs, take
 * tests one at a time from the parent; each test's output (stdout and stderr, so a
 * sanitizer's report too) goes to its worker's scratch file and is printed whole when it
 * ends, so the log reads test by test. A worker that dies fails its test, with what it
 * printed, and a new worker goes on with the rest; one whose exit status is not 0 (leaks at
 * exit) fails the run. SOFTCAST_TEST_TIMES=FILE keeps each test's time: the next run hands
 * out the longest first, so a long test never starts last. */
#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "server/reader.h"
#include "sim/core/sc_base.h"

#define TH_MAX 512

static struct {
    const char *name, *file;
    th_fn fn;
    int long_run;
} g_tests[TH_MAX];
static int g_ntests;
static int g_cur_failed, g_cur_skipped;

void th_register(const char *name, th_fn fn, const char *file, int long_run)
{
    SC_ASSERT(g_ntests < TH_MAX);
    g_tests[g_ntests].name = name;
    g_tests[g_ntests].file = file;
    g_tests[g_ntests].fn = fn;
    g_tests[g_ntests].long_run = long_run;
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

enum { TH_OK, TH_FAILED, TH_SKIPPED };

/* Run test i here, printing its RUN and result lines. */
static int run_one(int i, double *ms_out)
{
    g_cur_failed = 0;
    g_cur_skipped = 0;
    printf("RUN  %s\n", g_tests[i].name);
    double t0 = sc_now_ms();
    g_tests[i].fn();
    double ms = sc_now_ms() - t0;
    *ms_out = ms;
    if (g_cur_failed) {
        printf("FAIL %s (%.0f ms)\n", g_tests[i].name, ms);
        return TH_FAILED;
    }
    if (g_cur_skipped) {
        printf("SKIP %s\n", g_tests[i].name);
        return TH_SKIPPED;
    }
    printf("ok   %s (%.0f ms)\n", g_tests[i].name, ms);
    return TH_OK;
}

typedef struct {
    int idx, status;
    double ms;
} th_result;

typedef struct {
    pid_t pid;
    int task_fd, result_fd, out_fd; /* out_fd: its scratch file (parent's copy) */
    int running;                    /* the test it holds, -1 none */
} th_worker;

/* A worker: tests by index from task_fd until -1, each one's output to out_fd from its
 * start, its result to result_fd. Exits through exit(), so LeakSanitizer looks. */
static void worker_loop(int task_fd, int result_fd, int out_fd)
{
    int idx;
    while (read(task_fd, &idx, sizeof idx) == (ssize_t)sizeof idx && idx >= 0) {
        fflush(stdout);
        if (ftruncate(out_fd, 0) != 0 || lseek(out_fd, 0, SEEK_SET) != 0)
            _exit(70);
        dup2(out_fd, 1);
        dup2(out_fd, 2);
        th_result r = {idx, 0, 0};
        r.status = run_one(idx, &r.ms);
        fflush(stdout);
        fflush(stderr);
        if (write(result_fd, &r, sizeof r) != (ssize_t)sizeof r)
            _exit(71);
    }
    if (ftruncate(out_fd, 0) != 0 || lseek(out_fd, 0, SEEK_SET) != 0) /* for what exit says */
        _exit(70);
    exit(0);
}

static int worker_start(th_worker *w)
{
    int task[2], result[2];
    const char *tmp = getenv("TMPDIR");
    char path[1024];
    snprintf(path, sizeof path, "%s/softcast-tests-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    int out = mkstemp(path); /* unlinked at once: only the two processes hold it */
    if (out < 0 || pipe(task) != 0 || pipe(result) != 0)
        return -1;
    unlink(path);
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        close(task[1]);
        close(result[0]);
        worker_loop(task[0], result[1], out);
    }
    close(task[0]);
    close(result[1]);
    *w = (th_worker){pid, task[1], result[0], out, -1};
    return 0;
}

/* What the worker's scratch file holds, to our stdout. */
static void worker_print(const th_worker *w)
{
    char buf[8192];
    ssize_t n;
    off_t at = 0;
    while ((n = pread(w->out_fd, buf, sizeof buf, at)) > 0) {
        fwrite(buf, 1, (size_t)n, stdout);
        at += n;
    }
    fflush(stdout);
}

static void worker_close(th_worker *w)
{
    close(w->task_fd);
    close(w->result_fd);
    close(w->out_fd);
    w->pid = 0;
}

static int worker_exit_status(pid_t pid)
{
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

typedef struct {
    int passed, failed, skipped;
    double ms[TH_MAX];
} th_tally;

static void tally(th_tally *t, int idx, int status, double ms)
{
    t->ms[idx] = ms;
    if (status == TH_OK)
        t->passed++;
    else if (status == TH_SKIPPED)
        t->skipped++;
    else
        t->failed++;
}

/* The worker's test ended (a result) or the worker did (EOF): print, count, and hand it
 * the next test, or a new worker when it died. */
static void worker_done(th_worker *w, th_tally *t, const int *order, int n, int *next)
{
    th_result r;
    ssize_t got = read(w->result_fd, &r, sizeof r);
    worker_print(w);
    if (got == (ssize_t)sizeof r) {
        tally(t, r.idx, r.status, r.ms);
    } else {
        int code = worker_exit_status(w->pid);
        printf("FAIL %s (its worker died: status %d)\n", g_tests[w->running].name, code);
        tally(t, w->running, TH_FAILED, 0);
        worker_close(w);
        if (*next < n && worker_start(w) != 0) {
            perror("softcast-tests: a new worker");
            exit(2);
        }
    }
    w->running = -1;
    if (w->pid && *next < n) {
        w->running = order[(*next)++];
        if (write(w->task_fd, &w->running, sizeof w->running) != (ssize_t)sizeof w->running)
            w->running = -1;
    }
}

static void run_parallel(const int *order, int n, int jobs, th_tally *t)
{
    th_worker w[16];
    jobs = jobs > 16 ? 16 : jobs > n ? n : jobs;
    int next = 0;
    for (int k = 0; k < jobs; k++) {
        if (worker_start(&w[k]) != 0) {
            perror("softcast-tests: a worker");
            exit(2);
        }
        w[k].running = order[next++];
        if (write(w[k].task_fd, &w[k].running, sizeof w[k].running) < 0)
            w[k].running = -1;
    }
    for (;;) {
        struct pollfd p[16];
        int busy = 0;
        for (int k = 0; k < jobs; k++) {
            p[k] = (struct pollfd){w[k].running >= 0 ? w[k].result_fd : -1, POLLIN, 0};
            busy += w[k].running >= 0;
        }
        if (!busy)
            break;
        if (poll(p, (nfds_t)jobs, -1) < 0 && errno != EINTR)
            exit(2);
        for (int k = 0; k < jobs; k++)
            if (w[k].running >= 0 && (p[k].revents & (POLLIN | POLLHUP | POLLERR)))
                worker_done(&w[k], t, order, n, &next);
    }
    for (int k = 0; k < jobs; k++) {
        if (!w[k].pid)
            continue;
        int stop = -1;
        if (write(w[k].task_fd, &stop, sizeof stop) < 0)
            perror("softcast-tests: stopping a worker");
        int code = worker_exit_status(w[k].pid);
        worker_print(&w[k]); /* what it said at exit (LeakSanitizer) */
        if (code != 0) {
            printf("FAIL a worker exited with status %d (above: what it printed at exit)\n", code);
            t->failed++;
        }
        worker_close(&w[k]);
    }
}

/* Times from an earlier run (SOFTCAST_TEST_TIMES: lines "MS NAME"): the longest first;
 * tests it does not name (new ones) before all. */
static void longest_first(int *order, int n, const char *times)
{
    double ms[TH_MAX];
    for (int i = 0; i < n; i++)
        ms[order[i]] = 1e18;
    FILE *f = times ? fopen(times, "r") : NULL;
    char name[256];
    double v;
    while (f && fscanf(f, "%lf %255s", &v, name) == 2)
        for (int i = 0; i < n; i++)
            if (!strcmp(g_tests[order[i]].name, name))
                ms[order[i]] = v;
    if (f)
        fclose(f);
    for (int i = 1; i < n; i++) { /* stable: equal times keep the file order */
        int k = order[i], j = i - 1;
        while (j >= 0 && ms[order[j]] < ms[k]) {
            order[j + 1] = order[j];
            j--;
        }
        order[j + 1] = k;
    }
}

static void save_times(const int *order, int n, const th_tally *t, const char *times)
{
    FILE *f = times ? fopen(times, "w") : NULL;
    for (int i = 0; f && i < n; i++)
        fprintf(f, "%.0f %s\n", t->ms[order[i]], g_tests[order[i]].name);
    if (f)
        fclose(f);
}

int main(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], SRV_READER_ARG)) /* the server's reader child, as tested */
        return srv_reader_main(argc, argv);
    const char *filter = NULL, *env = getenv("SOFTCAST_TEST_JOBS");
    int jobs = env ? atoi(env) : 1, want_long = -1; /* -1: both kinds */
    for (int a = 1; a < argc; a++) {
        if (!strcmp(argv[a], "--long") || !strcmp(argv[a], "--short"))
            want_long = argv[a][2] == 'l';
        else if (!strcmp(argv[a], "-j") && a + 1 < argc)
            jobs = atoi(argv[++a]);
        else if (!strncmp(argv[a], "-j", 2))
            jobs = atoi(argv[a] + 2);
        else
            filter = argv[a];
    }
    int idx[TH_MAX], order[TH_MAX], n = 0;
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
    for (int i = 0; i < g_ntests; i++)
        if ((!filter || strstr(g_tests[idx[i]].name, filter)) &&
            (want_long < 0 || g_tests[idx[i]].long_run == want_long))
            order[n++] = idx[i];
    setvbuf(stdout, NULL, _IOLBF, 0);
    static th_tally t;
    const char *times = getenv("SOFTCAST_TEST_TIMES");
    if (jobs > 1 && n > 1) {
        longest_first(order, n, times);
        run_parallel(order, n, jobs, &t);
    } else {
        for (int i = 0; i < n; i++) {
            double ms = 0;
            int result = run_one(order[i], &ms); /* before ms is read: argument order is free */
            tally(&t, order[i], result, ms);
        }
    }
    if (!filter)
        save_times(order, n, &t, times);
    printf("%d passed, %d failed, %d skipped\n", t.passed, t.failed, t.skipped);
    return t.failed ? 1 : 0;
}
