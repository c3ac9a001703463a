/* fuzz_uploads.h: the upload directory the handler targets' sessions keep their recordings
 * in (server/upload.c is not linked): a private scratch directory, made at the first call,
 * emptied and removed at exit. Included once by a target. */
#ifndef TESTS_FUZZ_FUZZ_UPLOADS_H
#define TESTS_FUZZ_FUZZ_UPLOADS_H

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "server/server.h"

static char g_uploads[64];

static void fuzz_uploads_remove(void)
{
    DIR *d = opendir(g_uploads);
    struct dirent *e;
    char path[512];
    while (d && (e = readdir(d)) != NULL)
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
            snprintf(path, sizeof path, "%s/%s", g_uploads, e->d_name), unlink(path);
    if (d)
        closedir(d);
    rmdir(g_uploads);
}

const char *srv_uploads_dir(srv *s)
{
    (void)s;
    if (!g_uploads[0]) {
        snprintf(g_uploads, sizeof g_uploads, "/tmp/softcast-fuzz-XXXXXX");
        if (!mkdtemp(g_uploads))
            abort();
        atexit(fuzz_uploads_remove);
    }
    return g_uploads;
}

int srv_uploads_temp(srv *s, const char *name, char *path, size_t path_sz)
{
    (void)name;
    snprintf(path, path_sz, "%s/.file-XXXXXX", srv_uploads_dir(s));
    return mkostemp(path, O_CLOEXEC);
}

void srv_uploads_hide_path(char *err, size_t err_sz, const char *path, const char *name)
{
    (void)err, (void)err_sz, (void)path, (void)name;
}

#endif
