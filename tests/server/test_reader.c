/* test_reader.c: users' files read in a child process (server/reader.c). The child's answer
 * is the in-process reader's, bit for bit (volume, info, message, stages), for a load with a
 * fit, a header check and a refusal; a file that makes the decoder abort (pydicom's
 * DICOMDIR-nooffset, fetched by tests/run-tests.sh) fails that read alone, this process goes
 * on, and nothing is left in TMPDIR; a reader that cannot start fails the read, which is never
 * done in this process instead. The child is this test binary again: tests/test_main.c
 * hands SRV_READER_ARG to srv_reader_main, as the server's main does. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "server/reader.h"
#include "tests/harness.h"

/* The stages a read reported, comma-separated. */
typedef struct stages {
    char seen[256];
} stages;

static void note_stage(void *ctx, const char *stage)
{
    stages *s = ctx;
    size_t n = strlen(s->seen);
    snprintf(s->seen + n, sizeof s->seen - n, "%s%s", n ? "," : "", stage);
}

/* Entries in dir other than . and .. */
static int entries(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    int n = 0;
    while (d && (e = readdir(d)) != NULL)
        n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
    if (d)
        closedir(d);
    return n;
}

/* Read path both ways with opts; CHECK that every output is the same. */
static void same_both_ways(const char *path, sim_volume_load_opts o, sim_status want)
{
    sim_volume a, b;
    sim_volume_info ia, ib;
    char ea[512] = "", eb[512] = "";
    stages sa = {""}, sb = {""};
    memset(&ia, 0, sizeof ia);
    memset(&ib, 0, sizeof ib);
    o.progress = note_stage;
    o.progress_ctx = &sa;
    sim_status st_a = sim_volume_load_file(&a, path, &o, &ia, ea, sizeof ea);
    o.progress_ctx = &sb;
    sim_status st_b = srv_volume_load_isolated(&b, path, &o, &ib, eb, sizeof eb);
    CHECKF(st_a == want && st_b == want, "%s: status %d here, %d in the child, %d wanted (%s | %s)",
           path, st_a, st_b, want, ea, eb);
    CHECKF(!strcmp(ea, eb), "messages differ: '%s' here, '%s' in the child", ea, eb);
    CHECKF(!strcmp(sa.seen, sb.seen), "stages differ: '%s' here, '%s' in the child", sa.seen,
           sb.seen);
    CHECK(!memcmp(&ia, &ib, sizeof ia));
    if (st_a == SIM_OK && st_b == SIM_OK) {
        CHECK(a.nx == b.nx && a.ny == b.ny && a.nz == b.nz);
        CHECK(!memcmp(a.spacing_mm, b.spacing_mm, sizeof a.spacing_mm));
        CHECK(!strcmp(a.orientation, b.orientation) && a.oblique_deg == b.oblique_deg);
        CHECK((a.hu == NULL) == (b.hu == NULL));
        if (a.hu && b.hu && a.nx == b.nx && a.ny == b.ny && a.nz == b.nz)
            CHECK(!memcmp(a.hu, b.hu, (size_t)a.nx * a.ny * a.nz * sizeof(float)));
        th_note("%s: %dx%dx%d, stages %s", path, b.nx, b.ny, b.nz, sb.seen);
        sim_volume_free(&a);
        sim_volume_free(&b);
    }
}

TEST(reader_child_answers_as_the_process_reader_does)
{
    char dir[] = "/tmp/softcast_reader_XXXXXX", nii[600], bad[600], err[256];
    REQUIRE(mkdtemp(dir) != NULL);
    snprintf(nii, sizeof nii, "%s/phantom.nii.gz", dir);
    snprintf(bad, sizeof bad, "%s/notes.nii", dir);
    sim_volume v;
    REQUIRE(sim_volume_phantom(&v, 48, 40, 30, err, sizeof err) == SIM_OK);
    REQUIRE(sim_volume_save_nifti(&v, nii, err, sizeof err) == SIM_OK);
    sim_volume_free(&v);
    FILE *f = fopen(bad, "w");
    REQUIRE(f != NULL);
    fputs("not a volume, a clinician's notes\n", f);
    fclose(f);
    sim_volume_load_opts o = sim_default_volume_load_opts();
    o.fit_elements = 20000; /* 48x40x30 with its margin is over: fitted by 2 */
    same_both_ways(nii, o, SIM_OK);
    o.header_only = SIM_LOAD_HEADER;
    same_both_ways(nii, o, SIM_OK);
    o.header_only = SIM_LOAD_ALL;
    same_both_ways(bad, o, SIM_ERR_FORMAT);
    unlink(nii);
    unlink(bad);
    rmdir(dir);
}

TEST(reader_child_that_aborts_fails_that_read_alone_and_leaves_nothing)
{
    char list[1024], msg[1200];
    TH_DATA("pydicom/LIST", list, msg);
    char src[1100], dir[] = "/tmp/softcast_reader_XXXXXX", tmp[] = "/tmp/softcast_tmpdir_XXXXXX";
    snprintf(src, sizeof src, "%.*s/test_files/dicomdirtests/DICOMDIR-nooffset",
             (int)(strlen(list) - strlen("/LIST")), list);
    REQUIRE(mkdtemp(dir) != NULL && mkdtemp(tmp) != NULL);
    /* The file alone in a folder, as a zip of it unpacks. */
    char dst[600], cmd[2400];
    snprintf(dst, sizeof dst, "%s/DICOMDIR", dir);
    snprintf(cmd, sizeof cmd, "cp '%s' '%s'", src, dst);
    REQUIRE(system(cmd) == 0);
    char *old = getenv("TMPDIR") ? strdup(getenv("TMPDIR")) : NULL;
    setenv("TMPDIR", tmp, 1);
    sim_volume v;
    sim_volume_info info;
    char err[512] = "";
    sim_status st = srv_volume_load_isolated(&v, dir, NULL, &info, err, sizeof err);
    if (old)
        setenv("TMPDIR", old, 1);
    else
        unsetenv("TMPDIR");
    free(old);
    th_note("%s", err);
    /* Debian 12's GDCM (3.0.21) asserts reading its meta header: the child dies of it. */
    CHECK(st == SIM_ERR_FORMAT);
    CHECKF(strstr(err, "the reader stopped on this file (signal SIGABRT)") != NULL, "%s", err);
    CHECKF(!strncmp(err, dir, strlen(dir)), "the message names the folder: %s", err);
    CHECK(v.hu == NULL && info.format[0] == 0);
    CHECKF(entries(tmp) == 0, "%d entries left in the reader's TMPDIR %s", entries(tmp), tmp);
    unlink(dst);
    rmdir(dir);
    rmdir(tmp);
}

/* No file descriptor left for the reader's pipe (a server at its limit): the read fails with
 * the reason, and is not done in the server's own process instead (where a decoder's abort
 * would end every session). */
TEST(reader_that_cannot_start_fails_the_read_and_never_reads_in_process)
{
    char dir[] = "/tmp/softcast_reader_XXXXXX", nii[600], err[512] = "";
    REQUIRE(mkdtemp(dir) != NULL);
    snprintf(nii, sizeof nii, "%s/phantom.nii.gz", dir);
    sim_volume v;
    REQUIRE(sim_volume_phantom(&v, 24, 20, 16, err, sizeof err) == SIM_OK);
    REQUIRE(sim_volume_save_nifti(&v, nii, err, sizeof err) == SIM_OK);
    sim_volume_free(&v);
    struct rlimit was, none;
    REQUIRE(getrlimit(RLIMIT_NOFILE, &was) == 0);
    int lowest = dup(0); /* the lowest free descriptor: with the limit there, none is free */
    REQUIRE(lowest >= 0);
    close(lowest);
    none = was;
    none.rlim_cur = (rlim_t)lowest;
    REQUIRE(setrlimit(RLIMIT_NOFILE, &none) == 0);
    sim_volume_info info;
    err[0] = 0;
    sim_status st = srv_volume_load_isolated(&v, nii, NULL, &info, err, sizeof err);
    setrlimit(RLIMIT_NOFILE, &was);
    th_note("%s", err);
    CHECK(st == SIM_ERR_IO && v.hu == NULL);
    CHECKF(strstr(err, "cannot start its volume reader") != NULL, "%s", err);
    unlink(nii);
    rmdir(dir);
}
