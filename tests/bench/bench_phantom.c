/* bench_phantom.c: `softcast-bench phantom`: the default phantom and its label map as
 * NIfTI-1 files, for other tools and for the soft-body organs (--softbody-labels).
 *
 *   softcast-bench phantom --out CT.nii[.gz] [--labels LABELS.nii[.gz]] [--dims WxHxD]
 *                          [--keep L,L,...] [--vessel-hu HU]
 *
 * --keep writes only those labels into the label map (the others 0): the soft-body scene
 * makes an organ of every non-zero label, so `--keep 3` gives it the liver alone.
 * --vessel-hu fills the vessels with contrast (the default 45 HU is blood). Prints one JSON
 * line: dims, spacing, and the elements of each label. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/volume/volume.h"
#include "tests/bench/bench_phantom.h"

typedef struct ph_args {
    const char *out, *labels;
    int dims[3];
    int keep[SIM_NLABEL]; /* 1: write this label; all 1 without --keep */
    sim_phantom_opts opt;
} ph_args;

static int ph_usage(void)
{
    fprintf(stderr, "usage: softcast-bench phantom --out CT.nii[.gz] [--labels L.nii[.gz]] "
                    "[--dims WxHxD] [--keep L,L,...] [--vessel-hu HU]\n");
    return 2;
}

static int parse_keep(ph_args *a, const char *s)
{
    memset(a->keep, 0, sizeof a->keep);
    while (*s) {
        char *end = NULL;
        long l = strtol(s, &end, 10);
        if (end == s || l < 1 || l >= SIM_NLABEL) {
            fprintf(stderr, "softcast-bench phantom: --keep: labels are 1..%d\n", SIM_NLABEL - 1);
            return -1;
        }
        a->keep[l] = 1;
        s = *end == ',' ? end + 1 : end;
        if (*end && *end != ',')
            return -1;
    }
    return 0;
}

static int ph_parse(ph_args *a, int argc, char **argv)
{
    memset(a, 0, sizeof *a);
    a->dims[0] = 128, a->dims[1] = 128, a->dims[2] = 75;
    for (int k = 0; k < SIM_NLABEL; k++)
        a->keep[k] = 1;
    a->opt = sim_default_phantom_opts();
    for (int i = 2; i < argc; i += 2) {
        const char *k = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        char tail;
        if (!v)
            return -1;
        if (!strcmp(k, "--out"))
            a->out = v;
        else if (!strcmp(k, "--labels"))
            a->labels = v;
        else if (!strcmp(k, "--dims")) {
            if (sscanf(v, "%dx%dx%d%c", &a->dims[0], &a->dims[1], &a->dims[2], &tail) != 3)
                return -1;
        } else if (!strcmp(k, "--keep")) {
            if (parse_keep(a, v) != 0)
                return -1;
        } else if (!strcmp(k, "--vessel-hu"))
            a->opt.vessel_hu = strtof(v, NULL);
        else
            return -1;
    }
    return a->out || a->labels ? 0 : -1;
}

int bench_phantom_main(int argc, char **argv)
{
    ph_args a;
    if (ph_parse(&a, argc, argv) != 0)
        return ph_usage();
    char err[512] = "";
    size_t n = (size_t)a.dims[0] * (size_t)a.dims[1] * (size_t)a.dims[2];
    uint8_t *lab = malloc(n > 0 ? n : 1);
    sim_volume v;
    if (!lab || sim_volume_phantom_ex(&v, lab, a.dims[0], a.dims[1], a.dims[2], &a.opt, err,
                                      sizeof err) != SIM_OK) {
        fprintf(stderr, "softcast-bench phantom: %s\n", lab ? err : "out of memory");
        free(lab);
        return 1;
    }
    size_t count[SIM_NLABEL] = {0};
    for (size_t i = 0; i < n; i++) {
        count[lab[i]]++;
        lab[i] = a.keep[lab[i]] ? lab[i] : 0;
    }
    int rc = 0;
    if (a.out && sim_volume_save_nifti(&v, a.out, err, sizeof err) != SIM_OK)
        rc = 1;
    if (!rc && a.labels &&
        sim_labels_save_nifti(lab, v.nx, v.ny, v.nz, v.spacing_mm, a.labels, err, sizeof err) !=
            SIM_OK)
        rc = 1;
    if (rc)
        fprintf(stderr, "softcast-bench phantom: %s\n", err);
    else {
        printf("{\"bench\":\"phantom\",\"dims\":[%d,%d,%d],\"spacing\":[%.4f,%.4f,%.4f]", v.nx,
               v.ny, v.nz, (double)v.spacing_mm[0], (double)v.spacing_mm[1],
               (double)v.spacing_mm[2]);
        for (int l = 0; l < SIM_NLABEL; l++)
            printf(",\"%s\":%zu", sim_phantom_label_name(l), count[l]);
        printf("}\n");
    }
    sim_volume_free(&v);
    free(lab);
    return rc;
}
