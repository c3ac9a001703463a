/* reader.c: users' volume files are read in a child process.
 *
 * A user's file is parsed by third-party decoders: GDCM with its JPEG, JPEG 2000 and JPEG-LS
 * codecs, libzip, NIfTI's zlib. An assert() or a crash in any of them, on a malformed file,
 * would take every session of the server down with it: pydicom's test file
 * DICOMDIR-nooffset, uploaded in a zip, makes GDCM's FileMetaInformation::ReadCompat
 * assert, and Debian's GDCM keeps its asserts. So the server reads users' files in a child:
 * itself again (/proc/self/exe SRV_READER_ARG ...), which runs sim_volume_load_file and
 * writes what it found to a pipe. A child that dies costs that one read, and the user is
 * told so. The child
 * - gets a private TMPDIR (a zip is unpacked there), removed by the parent whatever
 *   happened, so a crash leaves no unpacked scan behind;
 * - dumps no core (it would hold a patient's scan) and has READER_CPU_S of CPU;
 * - dies with the thread that started it (a server killed outright leaves none running);
 * - runs at nice 10: reading a scan is background work beside running sessions;
 * - has stdin from /dev/null, stdout on stderr (the server's stdout is JSON lines), and no
 *   other descriptor of the server's.
 * The pipe carries records: a type byte, a uint32 length, the payload. 'S': a stage name
 * (progress); 'R': a reader_result, then the volume's values (nx ny nz floats) when it has
 * one. Parent and child are the same executable, so the structs cross as they are. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <signal.h>
#include <spawn.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "reader.h"
#include "server.h"
#include "sim/core/sc_base.h"

#define READER_FD   3  /* the child's end of the pipe */
#define READER_NICE 10 /* below the sessions */
/* CPU seconds a read may take: a 512x512x1000 JPEG 2000 series takes about a minute. */
#define READER_CPU_S 600
#define STAGE_MAX    32

extern char **environ;

typedef struct reader_result {
    int32_t status; /* sim_status */
    int32_t has_volume;
    char err[512];
    sim_volume_info info;
    sim_volume vol; /* hu NULL: the values follow the record */
} reader_result;

/* Here, not in durable.c, which uses it too: the C tests and the fuzzers link this file
 * without durable.c. */
int srv_write_all(int fd, const void *p, size_t n)
{
    const char *b = p;
    while (n > 0) {
        ssize_t k = write(fd, b, n);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return -1;
        b += k;
        n -= (size_t)k;
    }
    return 0;
}

static int read_all(int fd, void *p, size_t n)
{
    char *b = p;
    while (n > 0) {
        ssize_t k = read(fd, b, n);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return -1;
        b += k;
        n -= (size_t)k;
    }
    return 0;
}

static int write_record(int fd, char type, const void *p, uint32_t n)
{
    char head[5];
    head[0] = type;
    memcpy(head + 1, &n, sizeof n);
    return srv_write_all(fd, head, sizeof head) || srv_write_all(fd, p, n) ? -1 : 0;
}

/* ---------------------------------------------------------------- the child */

static void child_stage(void *ctx, const char *stage)
{
    (void)ctx;
    size_t n = strnlen(stage, STAGE_MAX - 1);
    write_record(READER_FD, 'S', stage, (uint32_t)n);
}

int srv_reader_main(int argc, char **argv)
{
    if (argc != 13) {
        fprintf(stderr,
                "softcast reader: %d arguments, 13 expected (this mode is the server's "
                "own, not for use by hand)\n",
                argc);
        return 2;
    }
    /* Killed with the thread that started it (the loader, which waits for it): a server
     * killed outright leaves no reader running on. */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    struct rlimit no_core = {0, 0}, cpu = {READER_CPU_S, READER_CPU_S + 10};
    setrlimit(RLIMIT_CORE, &no_core);
    setrlimit(RLIMIT_CPU, &cpu);
    if (setpriority(PRIO_PROCESS, 0, READER_NICE) != 0)
        perror("softcast reader: setpriority");
    sim_volume_load_opts lo = sim_default_volume_load_opts();
    const char *path = argv[2];
    lo.series_uid = argv[3][0] ? argv[3] : NULL;
    lo.header_only = atoi(argv[4]);
    lo.limits.max_elements = (size_t)strtoull(argv[5], NULL, 10);
    lo.limits.max_dim = atoi(argv[6]);
    lo.fit_elements = (size_t)strtoull(argv[7], NULL, 10);
    lo.air_margin = atoi(argv[8]);
    lo.body_hu = strtof(argv[9], NULL);
    lo.keep_all = atoi(argv[10]);
    lo.zip_max_bytes = strtoull(argv[11], NULL, 10);
    lo.dicom_file_alone = atoi(argv[12]);
    lo.progress = child_stage;
    static reader_result r; /* zeroed: no stray bytes of ours cross */
    sim_volume v = {0};
    r.status = sim_volume_load_file(&v, path, &lo, &r.info, r.err, sizeof r.err);
    r.has_volume = r.status == SIM_OK && v.hu != NULL;
    r.vol = v;
    r.vol.hu = NULL;
    int bad = write_record(READER_FD, 'R', &r, sizeof r);
    if (!bad && r.has_volume)
        bad = srv_write_all(READER_FD, v.hu, (size_t)v.nx * v.ny * v.nz * sizeof(float));
    sim_volume_free(&v);
    return bad ? 1 : 0;
}

/* --------------------------------------------------------------- the parent */

static int remove_entry(const char *p, const struct stat *st, int flag, struct FTW *f)
{
    (void)st;
    (void)flag;
    (void)f;
    return remove(p) != 0 ? -1 : 0;
}

/* What became of a child that sent no result, for the user. */
static void why_no_result(int ws, const char *path, char *err, size_t err_sz)
{
    if (WIFSIGNALED(ws) && WTERMSIG(ws) == SIGXCPU)
        snprintf(err, err_sz, "%s: reading it took over %d s of CPU, and was stopped", path,
                 READER_CPU_S);
    else if (WIFSIGNALED(ws))
        snprintf(err, err_sz,
                 "%s: the reader stopped on this file (signal SIG%s): it is malformed, or of a "
                 "kind the reader cannot take; the server and its other sessions go on",
                 path, sigabbrev_np(WTERMSIG(ws)) ? sigabbrev_np(WTERMSIG(ws)) : "?");
    else
        snprintf(err, err_sz, "%s: the reader exited (status %d) without a result", path,
                 WIFEXITED(ws) ? WEXITSTATUS(ws) : -1);
}

/* The child's environment: ours, TMPDIR replaced by tmpdir. NULL when out of memory. */
static char **child_env(const char *tmpdir_var)
{
    size_t n = 0;
    while (environ && environ[n])
        n++;
    char **env = calloc(n + 2, sizeof *env);
    if (!env)
        return NULL;
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (strncmp(environ[i], "TMPDIR=", 7) != 0)
            env[k++] = environ[i];
    env[k] = (char *)tmpdir_var;
    return env;
}

/* Start the reader on path with opts; *fd_out the read end of its pipe. 0, or an errno. */
static int spawn_reader(const char *path, const sim_volume_load_opts *o, const char *tmpdir,
                        pid_t *pid, int *fd_out)
{
    char a[9][32], tmpvar[600];
    snprintf(a[0], sizeof a[0], "%d", o->header_only);
    snprintf(a[1], sizeof a[1], "%zu", o->limits.max_elements);
    snprintf(a[2], sizeof a[2], "%d", o->limits.max_dim);
    snprintf(a[3], sizeof a[3], "%zu", o->fit_elements);
    snprintf(a[4], sizeof a[4], "%d", o->air_margin);
    snprintf(a[5], sizeof a[5], "%.9g", (double)o->body_hu);
    snprintf(a[6], sizeof a[6], "%d", o->keep_all);
    snprintf(a[7], sizeof a[7], "%" PRIu64, o->zip_max_bytes);
    snprintf(a[8], sizeof a[8], "%d", o->dicom_file_alone);
    snprintf(tmpvar, sizeof tmpvar, "TMPDIR=%s", tmpdir);
    char *argv[] = {"softcast-reader",
                    SRV_READER_ARG,
                    (char *)path,
                    (char *)(o->series_uid ? o->series_uid : ""),
                    a[0],
                    a[1],
                    a[2],
                    a[3],
                    a[4],
                    a[5],
                    a[6],
                    a[7],
                    a[8],
                    NULL};
    char **env = child_env(tmpvar);
    int fds[2];
    if (!env)
        return ENOMEM;
    if (pipe2(fds, O_CLOEXEC) != 0) {
        int e = errno;
        free(env);
        return e;
    }
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t at;
    sigset_t none, all;
    sigemptyset(&none);
    sigfillset(&all);
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&fa, 2, 1);
    posix_spawn_file_actions_adddup2(&fa, fds[1], READER_FD);
    posix_spawn_file_actions_addclosefrom_np(&fa, READER_FD + 1);
    posix_spawnattr_init(&at);
    posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
    posix_spawnattr_setsigmask(&at, &none); /* the server's threads block some */
    posix_spawnattr_setsigdefault(&at, &all);
    int e = posix_spawn(pid, "/proc/self/exe", &fa, &at, argv, env);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&at);
    free(env);
    close(fds[1]);
    if (e != 0)
        close(fds[0]);
    else
        *fd_out = fds[0];
    return e;
}

/* At most how many elements the air margin can have added to v (margin layers on every face,
 * counted at v's own size: more than it added). */
static size_t margin_cells(const sim_volume_load_opts *o, const sim_volume *v)
{
    size_t m = o->air_margin > 0 ? (size_t)o->air_margin : 0;
    size_t x = (size_t)v->nx, y = (size_t)v->ny, z = (size_t)v->nz;
    return 2 * m * (x * y + y * z + z * x);
}

/* Read the child's records until its result: 1 with *r (and out->hu) filled, 0 without. */
static int take_records(int fd, const sim_volume_load_opts *o, reader_result *r, sim_volume *out)
{
    for (;;) {
        char head[5];
        uint32_t n;
        if (read_all(fd, head, sizeof head) != 0)
            return 0;
        memcpy(&n, head + 1, sizeof n);
        if (head[0] == 'S' && n < STAGE_MAX) {
            char stage[STAGE_MAX];
            if (read_all(fd, stage, n) != 0)
                return 0;
            stage[n] = 0;
            if (o->progress)
                o->progress(o->progress_ctx, stage);
            continue;
        }
        if (head[0] != 'R' || n != sizeof *r || read_all(fd, r, sizeof *r) != 0)
            return 0;
        /* The child is the one that read the user's file: what it says is checked like the
         * file itself. Every string ends inside its field; the volume is within what the
         * load was allowed to make (a volume the fit would have shrunk never comes back). */
        r->err[sizeof r->err - 1] = 0;
        sim_volume_info *in = &r->info;
        in->format[sizeof in->format - 1] = 0, in->name[sizeof in->name - 1] = 0;
        in->warning[sizeof in->warning - 1] = 0, in->series_uid[sizeof in->series_uid - 1] = 0;
        in->modality[sizeof in->modality - 1] = 0, in->source[sizeof in->source - 1] = 0;
        r->vol.orientation[sizeof r->vol.orientation - 1] = 0;
        if (!r->has_volume)
            return 1;
        sim_volume v = r->vol;
        size_t cells = (size_t)(v.nx > 0 ? v.nx : 0) * (size_t)(v.ny > 0 ? v.ny : 0) *
                       (size_t)(v.nz > 0 ? v.nz : 0);
        size_t most =
            o->fit_elements > o->limits.max_elements ? o->fit_elements : o->limits.max_elements;
        if (v.nx <= 0 || v.ny <= 0 || v.nz <= 0 || v.nx > 65536 || v.ny > 65536 || v.nz > 65536 ||
            cells > ((size_t)1 << 31) || (most > 0 && cells > most + margin_cells(o, &v)))
            return 0;
        v.hu = malloc(cells * sizeof(float));
        if (!v.hu) {
            r->status = SIM_ERR_NOMEM;
            snprintf(r->err, sizeof r->err, "out of memory for %zu elements", cells);
            r->has_volume = 0;
            return 1;
        }
        if (read_all(fd, v.hu, cells * sizeof(float)) != 0) {
            free(v.hu);
            return 0;
        }
        *out = v;
        return 1;
    }
}

sim_status srv_volume_load_isolated(sim_volume *out, const char *path,
                                    const sim_volume_load_opts *opts, sim_volume_info *info,
                                    char *err, size_t err_sz)
{
    static atomic_int warned;
    sim_volume_load_opts o = opts ? *opts : sim_default_volume_load_opts();
    memset(out, 0, sizeof *out);
    const char *base = getenv("TMPDIR");
    char tmpdir[512];
    snprintf(tmpdir, sizeof tmpdir, "%s/softcast-reader-XXXXXX", base && base[0] ? base : "/tmp");
    if (!mkdtemp(tmpdir))
        return (sim_status)sc_fail(err, err_sz, SIM_ERR_IO,
                                   "%s: no private folder for the reader "
                                   "(%s: %s)",
                                   path, tmpdir, strerror(errno));
    pid_t pid = -1;
    int fd = -1;
    int e = spawn_reader(path, &o, tmpdir, &pid, &fd);
    if (e != 0) { /* never read in the server's own process: a decoder's abort would end it */
        rmdir(tmpdir);
        if (!atomic_exchange(&warned, 1))
            fprintf(stderr, "softcast-server: cannot start the volume reader (%s)\n", strerror(e));
        return (sim_status)sc_fail(err, err_sz, SIM_ERR_IO,
                                   "%s: the server cannot start its volume reader now (%s): "
                                   "try again later",
                                   path, strerror(e));
    }
    reader_result *r = malloc(sizeof *r);
    int got = r && take_records(fd, &o, r, out);
    close(fd);
    if (!got)
        kill(pid, SIGKILL); /* it said something else: do not wait for it */
    int ws = 0;
    while (waitpid(pid, &ws, 0) < 0 && errno == EINTR) {
    }
    nftw(tmpdir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
    sim_status st;
    if (got) {
        st = (sim_status)r->status;
        if (info)
            *info = r->info;
        if (st != SIM_OK)
            snprintf(err, err_sz, "%s", r->err);
    } else {
        if (info)
            memset(info, 0, sizeof *info);
        why_no_result(ws, path, err, err_sz);
        st = r ? SIM_ERR_FORMAT : SIM_ERR_NOMEM;
    }
    free(r);
    return st;
}
