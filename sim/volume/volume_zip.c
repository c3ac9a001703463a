/* volume_zip.c: a .zip of a DICOM series, unpacked safely into a private temporary folder
 * (libzip, Debian's libzip-dev), for the DICOM reader to read as a folder.
 *
 * Everything is checked from the zip's central directory before a byte is written: at most
 * VZ_MAX_ENTRIES entries; no entry named with "..", an absolute path or a drive; no link
 * (Unix mode S_IFLNK), no encryption; the sizes declared uncompressed add up to at most the
 * caller's limit; no entry over 1 MiB that expands more than VZ_MAX_RATIO times (a zip
 * bomb). Then each entry is written under a folder made by mkdtemp (mode 0700) with
 * O_EXCL | O_NOFOLLOW, reading at most its declared size plus one byte, so an entry that
 * lies about its size is caught too. On any failure the folder is removed; the caller
 * removes it after reading (vol_remove_tree). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <dirent.h>

#include "../core/sc_base.h"
#include "volume_internal.h"

#if SIM_HAVE_DICOM
#include <zip.h>
#endif

#define VZ_MAX_ENTRIES      65536
#define VZ_MAX_RATIO        100.0
#define VZ_RATIO_FROM_BYTES ((zip_uint64_t)1 << 20)
#define VZ_DEFAULT_MAX      ((uint64_t)4 << 30)
/* Unix file type bits as zip stores them (the high 16 bits of the external attributes). */
#define VZ_UNIX_TYPE 0170000u
#define VZ_UNIX_LINK 0120000u

int vol_remove_tree(const char *path)
{
    struct stat st;
    if (lstat(path, &st) != 0)
        return errno == ENOENT ? 0 : -1;
    if (!S_ISDIR(st.st_mode))
        return unlink(path);
    DIR *d = opendir(path);
    int bad = 0;
    if (d) {
        struct dirent *e;
        char p[4096];
        while ((e = readdir(d)) != NULL) {
            if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
                continue;
            if (snprintf(p, sizeof p, "%s/%s", path, e->d_name) >= (int)sizeof p)
                bad = 1;
            else
                bad |= vol_remove_tree(p) != 0;
        }
        closedir(d);
    }
    return rmdir(path) != 0 || bad ? -1 : 0;
}

#if SIM_HAVE_DICOM

/* 1 when an entry's name stays inside the folder: relative, no "..", no drive letter. */
static int name_is_safe(const char *name)
{
    if (!name[0] || name[0] == '/' || name[0] == '\\' || (name[0] && name[1] == ':'))
        return 0;
    const char *p = name;
    while (*p) {
        size_t n = strcspn(p, "/\\");
        if (n == 2 && p[0] == '.' && p[1] == '.')
            return 0;
        p += n;
        if (*p)
            p++;
    }
    return 1;
}

/* Every entry against the limits, from the central directory, before anything is written. */
static sim_status check_entries(zip_t *z, const char *path, uint64_t max_bytes, char *err,
                                size_t err_sz)
{
    zip_int64_t n = zip_get_num_entries(z, 0);
    if (n <= 0)
        return sc_fail(err, err_sz, SIM_ERR_FORMAT,
                       "%s: an empty zip: zip the folder that holds the DICOM series", path);
    if (n > VZ_MAX_ENTRIES)
        return sc_fail(err, err_sz, SIM_ERR_LIMIT,
                       "%s: %lld entries, over the limit of %d: refused", path, (long long)n,
                       VZ_MAX_ENTRIES);
    uint64_t total = 0;
    for (zip_int64_t i = 0; i < n; i++) {
        zip_stat_t s;
        zip_uint8_t os = 0;
        zip_uint32_t attr = 0;
        if (zip_stat_index(z, (zip_uint64_t)i, 0, &s) != 0 || !(s.valid & ZIP_STAT_NAME) ||
            !(s.valid & ZIP_STAT_SIZE) || !(s.valid & ZIP_STAT_COMP_SIZE))
            return sc_fail(err, err_sz, SIM_ERR_FORMAT, "%s: entry %lld cannot be read", path,
                           (long long)i);
        if (!name_is_safe(s.name))
            return sc_fail(err, err_sz, SIM_ERR_FORMAT,
                           "%s: entry %lld is named outside the folder (an absolute path or "
                           "\"..\"): refused",
                           path, (long long)i);
        zip_file_get_external_attributes(z, (zip_uint64_t)i, 0, &os, &attr);
        if (os == ZIP_OPSYS_UNIX && ((attr >> 16) & VZ_UNIX_TYPE) == VZ_UNIX_LINK)
            return sc_fail(err, err_sz, SIM_ERR_FORMAT,
                           "%s: entry %lld is a symbolic link: refused (a zip of a series holds "
                           "files and folders only)",
                           path, (long long)i);
        if ((s.valid & ZIP_STAT_ENCRYPTION_METHOD) && s.encryption_method != ZIP_EM_NONE)
            return sc_fail(err, err_sz, SIM_ERR_FORMAT,
                           "%s: entry %lld is encrypted: zip the series without a password", path,
                           (long long)i);
        if (s.size >= VZ_RATIO_FROM_BYTES && (double)s.size > VZ_MAX_RATIO * (double)s.comp_size)
            return sc_fail(err, err_sz, SIM_ERR_LIMIT,
                           "%s: a zip bomb: entry %lld expands %.0f times (%llu bytes from "
                           "%llu), over the limit of %.0f: refused",
                           path, (long long)i, (double)s.size / (double)(s.comp_size + 1),
                           (unsigned long long)s.size, (unsigned long long)s.comp_size,
                           VZ_MAX_RATIO);
        total += s.size;
        if (total > max_bytes)
            return sc_fail(err, err_sz, SIM_ERR_LIMIT,
                           "%s: its entries hold more than %llu bytes uncompressed: refused "
                           "(a zip bomb, or a series too large)",
                           path, (unsigned long long)max_bytes);
    }
    return SIM_OK;
}

/* mkdir -p of the folders in `rel` (relative, checked safe) under root; the last part too
 * when it ends with '/'. */
static int make_parents(const char *root, const char *rel, char *full, size_t full_sz)
{
    if (snprintf(full, full_sz, "%s/%s", root, rel) >= (int)full_sz)
        return -1;
    for (char *p = full + strlen(root) + 1; *p; p++) {
        if (*p != '/' && *p != '\\')
            continue;
        *p = 0;
        if (mkdir(full, 0700) != 0 && errno != EEXIST)
            return -1;
        *p = '/';
    }
    return 0;
}

/* Write entry i under root, reading at most its declared size (one byte more: a lie). */
static sim_status extract_entry(zip_t *z, zip_int64_t i, const char *root, const char *path,
                                char *err, size_t err_sz)
{
    zip_stat_t s;
    char full[4096];
    zip_stat_index(z, (zip_uint64_t)i, 0, &s);
    size_t len = strlen(s.name);
    if (make_parents(root, s.name, full, sizeof full) != 0)
        return sc_fail(err, err_sz, SIM_ERR_IO, "%s: entry %lld: cannot make its folder", path,
                       (long long)i);
    if (len && (s.name[len - 1] == '/' || s.name[len - 1] == '\\'))
        return SIM_OK;
    int fd = open(full, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0600);
    zip_file_t *f = fd >= 0 ? zip_fopen_index(z, (zip_uint64_t)i, 0) : NULL;
    zip_uint64_t got = 0;
    char buf[65536];
    int bad = !f;
    while (!bad) {
        zip_int64_t r = zip_fread(f, buf, sizeof buf);
        if (r <= 0) {
            bad = r < 0;
            break;
        }
        got += (zip_uint64_t)r;
        bad = got > s.size || write(fd, buf, (size_t)r) != (ssize_t)r;
    }
    if (f)
        zip_fclose(f);
    if (fd >= 0 && close(fd) != 0)
        bad = 1;
    if (bad)
        return sc_fail(err, err_sz, got > s.size ? SIM_ERR_LIMIT : SIM_ERR_IO, "%s: entry %lld %s",
                       path, (long long)i,
                       got > s.size ? "holds more than its header says: refused"
                                    : "cannot be unpacked (corrupt, or the disk is full)");
    return SIM_OK;
}

/* Why a .zip did not open, in words: above all a file of another kind given a .zip name. */
static sim_status open_failed(const char *path, int code, char *err, size_t err_sz)
{
    if (code == ZIP_ER_NOZIP)
        return sc_fail(err, err_sz, SIM_ERR_FORMAT,
                       "%s: not a zip archive, though named .zip (a NIfTI or DICOM file is read "
                       "under its own extension: .nii, .nii.gz, .dcm)",
                       path);
    zip_error_t ze;
    zip_error_init_with_code(&ze, code);
    sim_status st = sc_fail(err, err_sz, SIM_ERR_FORMAT, "%s: not a readable .zip: %s", path,
                            zip_error_strerror(&ze));
    zip_error_fini(&ze);
    return st;
}

sim_status vol_zip_check(const char *path, uint64_t max_bytes, char *err, size_t err_sz)
{
    int code = 0;
    zip_t *z = zip_open(path, ZIP_RDONLY, &code);
    if (!z)
        return open_failed(path, code, err, err_sz);
    sim_status st = check_entries(z, path, max_bytes ? max_bytes : VZ_DEFAULT_MAX, err, err_sz);
    zip_discard(z);
    return st;
}

sim_status vol_unzip(const char *path, uint64_t max_bytes, char *dir, size_t dir_sz, int *nentries,
                     char *err, size_t err_sz)
{
    int code = 0;
    dir[0] = 0;
    zip_t *z = zip_open(path, ZIP_RDONLY, &code);
    if (!z)
        return open_failed(path, code, err, err_sz);
    sim_status st = check_entries(z, path, max_bytes ? max_bytes : VZ_DEFAULT_MAX, err, err_sz);
    const char *tmp = getenv("TMPDIR");
    if (st == SIM_OK && (snprintf(dir, dir_sz, "%s/softcast-zip-XXXXXX",
                                  tmp && *tmp ? tmp : "/tmp") >= (int)dir_sz ||
                         !mkdtemp(dir))) {
        st = sc_fail(err, err_sz, SIM_ERR_IO, "%s: cannot make a temporary folder: %s", path,
                     strerror(errno));
        dir[0] = 0;
    }
    zip_int64_t n = zip_get_num_entries(z, 0);
    for (zip_int64_t i = 0; st == SIM_OK && i < n; i++)
        st = extract_entry(z, i, dir, path, err, err_sz);
    zip_discard(z);
    if (st != SIM_OK && dir[0]) {
        vol_remove_tree(dir);
        dir[0] = 0;
    }
    if (nentries)
        *nentries = (int)n;
    return st;
}

#endif /* SIM_HAVE_DICOM */
