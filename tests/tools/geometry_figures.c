/* geometry_figures.c: `make geometry-figures`: how long the soft-body geometry pipeline
 * takes for a hybrid organ (release build, one thread), stage by stage, as one JSON line
 * per stage and a summary line.
 *
 *   softcast-geometry [--voxel MM] [--target VERTS] [--cells MIN..MAX] [--nifti PATH]
 *
 * Default: the phantom organ at 1 mm voxels, its outer surface decimated to 30,000
 * vertices, tets of 4 to 32 voxels, the tumour and vessel surfaces embedded as well. With
 * --nifti the label map comes from the file, with the phantom's material table (labels 1,
 * 2, 3). Times are wall clock (sc_now_ms), the best of --repeat runs (default 3). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/core/sc_base.h"
#include "sim/softbody/geometry.h"

typedef struct figs_args {
    float voxel;
    int target, min_cell, max_cell, repeat;
    const char *nifti;
} figs_args;

static int parse(int argc, char **argv, figs_args *a)
{
    a->voxel = 1.0f, a->target = 30000, a->min_cell = 4, a->max_cell = 32, a->repeat = 3;
    a->nifti = NULL;
    for (int i = 1; i < argc; i++) {
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(argv[i], "--voxel") && v)
            a->voxel = (float)atof(v), i++;
        else if (!strcmp(argv[i], "--target") && v)
            a->target = atoi(v), i++;
        else if (!strcmp(argv[i], "--cells") && v &&
                 sscanf(v, "%d..%d", &a->min_cell, &a->max_cell) == 2)
            i++;
        else if (!strcmp(argv[i], "--nifti") && v)
            a->nifti = v, i++;
        else if (!strcmp(argv[i], "--repeat") && v)
            a->repeat = atoi(v), i++;
        else {
            fprintf(stderr,
                    "usage: %s [--voxel MM] [--target VERTS] [--cells MIN..MAX] "
                    "[--nifti PATH] [--repeat N]\n",
                    argv[0]);
            return 0;
        }
    }
    return a->repeat >= 1;
}

static void stage(const char *name, double ms, const char *extra)
{
    printf("{\"stage\":\"%s\",\"ms\":%.2f%s%s}\n", name, ms, extra[0] ? "," : "", extra);
}

typedef struct figs_run {
    double ms[8];
    sim_trimesh surf[3];
    sim_tetmesh tets;
    sim_tetmesh_stats st;
    int inner_verts, nsurf;
} figs_run;

enum { T_MAP, T_MC, T_TAUBIN, T_DECIMATE, T_INNER, T_TETS, T_EMBED, T_EVAL };

static int run_surfaces(const sim_labelmap *m, const figs_args *a, figs_run *r, char *err, size_t n)
{
    sim_surface_opts raw = sim_default_surface_opts(), o = raw;
    raw.smooth_iters = 0;
    double t0 = sc_now_ms();
    if (sim_labelmap_surface(&r->surf[0], m, NULL, 0, &raw, err, n) != SIM_OK)
        return 0;
    double t1 = sc_now_ms();
    if (sim_trimesh_taubin(&r->surf[0], o.smooth_iters, o.taubin_lambda, o.taubin_mu, err, n))
        return 0;
    double t2 = sc_now_ms();
    if (a->target > 0 && sim_trimesh_decimate(&r->surf[0], a->target, o.max_error_mm, err, n))
        return 0;
    double t3 = sc_now_ms();
    r->nsurf = 1;
    for (int l = SIM_PHANTOM_TUMOUR; l <= SIM_PHANTOM_VESSEL; l++) {
        if (sim_labelmap_surface(&r->surf[r->nsurf], m, &l, 1, &o, err, n) == SIM_OK)
            r->inner_verts += r->surf[r->nsurf++].nvert;
    }
    double t4 = sc_now_ms();
    r->ms[T_MC] = t1 - t0, r->ms[T_TAUBIN] = t2 - t1, r->ms[T_DECIMATE] = t3 - t2;
    r->ms[T_INNER] = t4 - t3;
    return 1;
}

static int run_once(const figs_args *a, figs_run *r, char *err, size_t n)
{
    memset(r, 0, sizeof *r);
    sim_labelmap m;
    double t0 = sc_now_ms();
    sim_status st = a->nifti ? sim_labelmap_load_nifti(&m, a->nifti, NULL, err, n)
                             : sim_labelmap_phantom(&m, NULL, a->voxel, err, n);
    if (st != SIM_OK)
        return 0;
    r->ms[T_MAP] = sc_now_ms() - t0;
    sim_material_table mat = sim_phantom_materials();
    sim_tetmesh_opts to = {a->min_cell, a->max_cell};
    int ok = run_surfaces(&m, a, r, err, n);
    double t1 = sc_now_ms();
    ok = ok &&
         sim_tetmesh_build(&r->tets, &m, &mat, r->surf, r->nsurf, &to, &r->st, err, n) == SIM_OK;
    double t2 = sc_now_ms();
    sim_embedding e[3];
    memset(e, 0, sizeof e);
    for (int k = 0; ok && k < r->nsurf; k++)
        ok = sim_embed_points(&e[k], &r->tets, r->surf[k].vert, r->surf[k].nvert, err, n) == SIM_OK;
    double t3 = sc_now_ms();
    float *out = ok ? (float *)malloc(3 * (size_t)r->surf[0].nvert * sizeof *out) : NULL;
    if (out)
        sim_embed_eval(&e[0], r->tets.tet, r->tets.vert, out);
    double t4 = sc_now_ms();
    r->ms[T_TETS] = t2 - t1, r->ms[T_EMBED] = t3 - t2, r->ms[T_EVAL] = t4 - t3;
    free(out);
    for (int k = 0; k < 3; k++)
        sim_embedding_free(&e[k]);
    sim_labelmap_free(&m);
    return ok;
}

static void free_run(figs_run *r)
{
    for (int k = 0; k < 3; k++)
        sim_trimesh_free(&r->surf[k]);
    sim_tetmesh_free(&r->tets);
}

int main(int argc, char **argv)
{
    figs_args a;
    if (!parse(argc, argv, &a))
        return 2;
    char err[512];
    double best[8];
    figs_run r;
    for (int rep = 0; rep < a.repeat; rep++) {
        if (!run_once(&a, &r, err, sizeof err)) {
            fprintf(stderr, "geometry: %s\n", err);
            free_run(&r);
            return 1;
        }
        for (int k = 0; k < 8; k++)
            best[k] = rep == 0 || r.ms[k] < best[k] ? r.ms[k] : best[k];
        if (rep + 1 < a.repeat)
            free_run(&r);
    }
    char x[256];
    stage(a.nifti ? "nifti" : "phantom", best[T_MAP], "");
    stage("marching_cubes", best[T_MC], "");
    stage("taubin_x10", best[T_TAUBIN], "");
    snprintf(x, sizeof x, "\"verts\":%d", r.surf[0].nvert);
    stage("decimate", best[T_DECIMATE], x);
    snprintf(x, sizeof x, "\"verts\":%d", r.inner_verts);
    stage("inner_surfaces", best[T_INNER], x);
    snprintf(x, sizeof x, "\"tets\":%d,\"verts\":%d,\"kuhn\":%d,\"corner\":%d,\"centre\":%d",
             r.tets.ntet, r.tets.nvert, r.st.kuhn_leaves, r.st.corner_leaves, r.st.centre_leaves);
    stage("tet_mesh", best[T_TETS], x);
    snprintf(x, sizeof x, "\"points\":%d", r.surf[0].nvert + r.inner_verts);
    stage("embed", best[T_EMBED], x);
    stage("map_outer_once", best[T_EVAL], "");
    double total = 0.0;
    for (int k = 0; k < T_EVAL; k++)
        total += best[k];
    printf("{\"summary\":\"geometry\",\"voxel_mm\":%g,\"surface_verts\":%d,\"inner_verts\":%d,"
           "\"tets\":%d,\"cells\":\"%d..%d\",\"total_ms\":%.1f}\n",
           (double)a.voxel, r.surf[0].nvert, r.inner_verts, r.tets.ntet, a.min_cell, a.max_cell,
           total);
    free_run(&r);
    return 0;
}
