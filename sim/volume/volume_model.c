/* volume_model.c: parameters of the volume scene and its immutable model.
 *
 * Classification rule (see sim/volume/README.md): air < t0 <= skin_fat < t1 <=
 * muscle_organ < t2 <= bone. The reference experiment quotes -1000, 25 and 375 HU;
 * taken as strict bin edges, real CT air (about -1000 HU with noise of tens of HU) would
 * fall half into skin and fat, so our air edge is -400 HU: half-way between air and fat
 * (about -100), far from both with any CT noise. Lung (-500 to -900) counts as air. */
#include <math.h>
#include <string.h>
#include <stdlib.h>

#include "volume_internal.h"

static const char *const k_tissue_names[SIM_NTISSUE] = {"air", "skin_fat", "muscle_organ", "bone"};

const char *sim_tissue_name(int tissue)
{
    return (tissue >= 0 && tissue < SIM_NTISSUE) ? k_tissue_names[tissue] : "unknown";
}

/* The table, generated from params.def. Tissue fields appear once per class, named
 * "tissue.<class>.<field>" and grouped by class. */
#define TISSUE_OFF(c, f)                                                             \
    (offsetof(sim_volume_params, tissue) + (size_t)(c) * sizeof(sim_tissue_params) + \
     offsetof(sim_tissue_params, f))
#define SIM_PARAMS_STRUCT sim_volume_params
#include "../core/param_rows.h"
#define T1(c, cname, type, f, def, lo, hi, unit, doc) \
    {"tissue." cname "." #f,                          \
     "tissue: " cname,                                \
     unit,                                            \
     doc,                                             \
     NULL,                                            \
     SIM_PARAM_##type,                                \
     0,                                               \
     TISSUE_OFF(c, f),                                \
     def,                                             \
     lo,                                              \
     hi},
#define T(type, f, d0, d1, d2, d3, lo, hi, unit, doc)     \
    T1(0, "air", type, f, d0, lo, hi, unit, doc)          \
    T1(1, "skin_fat", type, f, d1, lo, hi, unit, doc)     \
    T1(2, "muscle_organ", type, f, d2, lo, hi, unit, doc) \
    T1(3, "bone", type, f, d3, lo, hi, unit, doc)
static const sim_param_desc k_params[] = {
#include "params.def"
};
#include "../core/param_rows_end.h"
#undef T
#undef T1
#undef TISSUE_OFF
#define N_PARAMS ((int)(sizeof k_params / sizeof k_params[0]))

const sim_param_desc *sim_volume_params_table(int *n)
{
    *n = N_PARAMS;
    return k_params;
}

/* Why the defaults are what they are (params.def holds the values):
 * - C: b0 = 0.4 makes C's small-motion damping 1/1.4 = 0.71 per frame against B's 0.85,
 *   so C settles sooner; b1 grows the damping with |X - X0| (Xu et al. 2018), stiffer
 *   tissue more (skin 0.15 < muscle 0.3): at the 8-10 units of a large pull skin gets
 *   d = 1.6-1.9, which cuts the overshoot, while near rest it still moves softly.
 * - Relaxation per frame is the elastic pull of one frame, not a solve to convergence.
 *   It is Gauss-Seidel (red-black), which for a smooth displacement converges about twice
 *   as fast per iteration as the Jacobi sweeps these defaults were first tuned with (6
 *   iterations of step 0.5); 3 iterations remove about the same 0.6 of a smooth
 *   displacement per frame. That is enough for condition A to come to rest within 10-20
 *   frames, and little enough that the velocity layer is not cancelled each frame: in the
 *   per-mode reading x' = (1-c)x + kV', V' = alpha V - s c x, c = 0.6 with alpha 0.85,
 *   s k 0.9 gives complex roots of modulus sqrt(alpha (1-c)) = 0.58 per frame, period
 *   about 7 frames: B overshoots and rings a few half-periods (measured on the 48x48x28
 *   phantom after a pull of 6: 2 sign changes, overshoot 0.81; on the earlier cylindrical
 *   phantom 3 and 0.96, and with 6 Gauss-Seidel iterations there B barely rang, 2 sign
 *   changes and half the overshoot). The clip-only
 *   repair iterations after them (CM_REPAIR_ITERATIONS) restore the bands without adding
 *   pull. The soft threshold stays (it cannot pump energy) but is small, 0.002, so it does
 *   not freeze the tail of the ringing into a plastic dent; the dead zone still lets the
 *   volume come to rest.
 * - home_weight 2: the tissue's memory of its rest shape (see cm_relax_element): without
 *   it a smooth bump feels almost no pull and stays as a plastic dent, and nothing rings.
 * - Air at -400 HU: real CT air (about -1000 HU with noise) must class as air. */
sim_volume_params sim_default_volume_params(void)
{
    sim_volume_params p;
    memset(&p, 0, sizeof p);
    sim_params_default(k_params, N_PARAMS, &p);
    return p;
}

sim_status sim_volume_params_validate(const sim_volume_params *p, char *err, size_t err_sz)
{
    sim_status st = sim_params_check(k_params, N_PARAMS, p, err, err_sz);
    if (st != SIM_OK)
        return st;
    if (!(p->hu_threshold[0] < p->hu_threshold[1] && p->hu_threshold[1] < p->hu_threshold[2]))
        return (sim_status)sc_fail(
            err, err_sz, SIM_ERR_ARG, "hu_threshold %g, %g, %g: must increase strictly",
            (double)p->hu_threshold[0], (double)p->hu_threshold[1], (double)p->hu_threshold[2]);
    return SIM_OK;
}

int vol_classify(const sim_volume_params *p, float hu)
{
    if (hu < p->hu_threshold[0])
        return SIM_TISSUE_AIR;
    if (hu < p->hu_threshold[1])
        return SIM_TISSUE_SKIN_FAT;
    if (hu < p->hu_threshold[2])
        return SIM_TISSUE_MUSCLE_ORGAN;
    return SIM_TISSUE_BONE;
}

void vol_pack_kparams(cm_kparams *kp, const sim_volume_params *p, const sim_volume *vol)
{
    memset(kp, 0, sizeof *kp);
    kp->nx = vol->nx;
    kp->ny = vol->ny;
    kp->nz = vol->nz;
    for (int a = 0; a < CM_NCLASS; a++) {
        const sim_tissue_params *ta = &p->tissue[a];
        for (int b = 0; b < CM_NCLASS; b++) {
            const sim_tissue_params *tb = &p->tissue[b];
            int k = a * CM_NCLASS + b;
            /* A link is as loose as its softer end (symmetric in the pair): the interface
             * deforms as the soft tissue does. With the tighter end instead, soft tissue
             * touching bone was bound rigidly to it, so a skin pull dragged the skeleton
             * sooner (measured: 190k elements moved per frame on the head CT against 130k,
             * 6.7 against 4.9 ms per frame on the phantom). */
            kp->link_min[k] = fminf(ta->min_len, tb->min_len);
            kp->link_max[k] = fmaxf(ta->max_len, tb->max_len);
            kp->link_shear[k] = fmaxf(ta->shear, tb->shear);
            kp->link_tau[k] = 0.5f * (1.0f / ta->speed + 1.0f / tb->speed);
        }
        float tol = (ta->max_len - ta->min_len) + 2.0f * ta->shear;
        kp->relax_w[a] = 1.0f / fmaxf(tol, CM_MIN_TOLERANCE);
        kp->rigid[a] = tol < CM_MIN_TOLERANCE;
        /* Air carries no load: it must not pull on the tissue it touches. With a weight
         * (1/tolerance, about 0.17) the air a pull had pushed outward, which is passive
         * and never relaxes back, held the skin out as a permanent dent (about 1 lattice
         * unit after a pull of 8). The skin surface is then a free surface, as it is. */
        if (a == SIM_TISSUE_AIR)
            kp->relax_w[a] = 0.0f;
        kp->inv_mass[a] = ta->inv_mass;
        kp->b1[a] = ta->b1;
    }
    kp->condition = (int)p->condition;
    kp->alpha = p->alpha;
    kp->b0 = p->b0;
    kp->k = p->inertia_gain;
    kp->v_max = p->v_max;
    kp->dead_zone = p->dead_zone;
    kp->margin = p->boundary_margin;
    kp->relax_step = p->relax_step;
    kp->relax_threshold = p->relax_threshold;
    kp->home_weight = p->home_weight;
}

sim_volume_model_options sim_default_volume_model_options(void)
{
    sim_volume_model_options o;
    o.skin_iso_hu = -400.0f;
    o.bone_iso_hu = 375.0f;
    o.class_override = NULL;
    return o;
}

sim_status sim_volume_params_preset(sim_volume_params *p, const char *name, char *err,
                                    size_t err_sz)
{
    if (!p || !name)
        return (sim_status)sc_fail(err, err_sz, SIM_ERR_ARG, "preset: NULL argument");
    sim_volume_params d = sim_default_volume_params();
    if (!strcmp(name, "default"))
        p->hu_threshold[2] = d.hu_threshold[2];
    else if (!strcmp(name, "contrast"))
        p->hu_threshold[2] = SIM_HU_BONE_CONTRAST;
    else
        return (sim_status)sc_fail(err, err_sz, SIM_ERR_ARG,
                                   "preset \"%s\": must be default or contrast", name);
    return SIM_OK;
}

/* The override copied into the model; every entry a class or SIM_CLASS_BY_HU. */
static sim_status copy_override(sim_volume_model *m, const uint8_t *ov, size_t n, char *err,
                                size_t err_sz)
{
    m->opt.class_override = NULL;
    if (!ov)
        return SIM_OK;
    for (size_t i = 0; i < n; i++)
        if (ov[i] >= SIM_NTISSUE && ov[i] != SIM_CLASS_BY_HU)
            return (sim_status)sc_fail(err, err_sz, SIM_ERR_ARG,
                                       "model: class override %d at element %zu: must be 0..%d "
                                       "or SIM_CLASS_BY_HU",
                                       ov[i], i, SIM_NTISSUE - 1);
    m->class_override = sc_calloc(n, 1);
    if (!m->class_override)
        return (sim_status)sc_fail(err, err_sz, SIM_ERR_NOMEM, "model: out of memory");
    memcpy(m->class_override, ov, n);
    m->opt.class_override = m->class_override;
    return SIM_OK;
}

sim_status sim_volume_model_create(sim_volume_model **out, const sim_volume *vol,
                                   const sim_volume_model_options *opt, char *err, size_t err_sz)
{
    *out = NULL;
    sim_status st = sim_volume_validate(vol, NULL, "volume", err, err_sz);
    if (st != SIM_OK)
        return st;
    sim_volume_model *m = sc_calloc(1, sizeof *m);
    if (!m)
        return (sim_status)sc_fail(err, err_sz, SIM_ERR_NOMEM, "model: out of memory");
    m->opt = opt ? *opt : sim_default_volume_model_options();
    size_t n = (size_t)vol->nx * (size_t)vol->ny * (size_t)vol->nz;
    m->vol = *vol;
    m->vol.hu = sc_calloc(n, sizeof(float));
    if (!m->vol.hu) {
        free(m);
        return (sim_status)sc_fail(err, err_sz, SIM_ERR_NOMEM,
                                   "model: out of memory for %zu elements", n);
    }
    memcpy(m->vol.hu, vol->hu, n * sizeof(float));
    st = copy_override(m, m->opt.class_override, n, err, err_sz);
    if (st != SIM_OK) {
        sim_volume_model_destroy(m);
        return st;
    }
    float iso[SIM_NSURFACE] = {m->opt.skin_iso_hu, m->opt.bone_iso_hu};
    for (int k = 0; k < SIM_NSURFACE; k++) {
        st = sim_surface_extract(&m->surf[k], &m->vol, iso[k], err, err_sz);
        if (st != SIM_OK) {
            sim_volume_model_destroy(m);
            return st;
        }
        m->view[k].nvert = m->surf[k].nvert;
        m->view[k].ntri = m->surf[k].ntri;
        m->view[k].tri = m->surf[k].tri;
        m->view[k].vert_cell = m->surf[k].vert_cell;
        m->view[k].vert_frac = m->surf[k].vert_frac;
        m->view[k].nrun = m->surf[k].nrun;
    }
    *out = m;
    return SIM_OK;
}

size_t sim_volume_model_bytes(const sim_volume_model *m)
{
    size_t n = (size_t)m->vol.nx * (size_t)m->vol.ny * (size_t)m->vol.nz;
    size_t b = sizeof *m + n * sizeof(float) + (m->class_override ? n : 0);
    size_t blocks = (size_t)((m->vol.nx + VOL_BLOCK - 1) / VOL_BLOCK) *
                    (size_t)((m->vol.ny + VOL_BLOCK - 1) / VOL_BLOCK) *
                    (size_t)((m->vol.nz + VOL_BLOCK - 1) / VOL_BLOCK);
    for (int k = 0; k < SIM_NSURFACE; k++)
        b += (size_t)m->surf[k].ntri * 3 * sizeof(uint32_t) +
             (size_t)m->surf[k].nvert * (sizeof(uint32_t) + 3 * sizeof(float)) +
             (2 * (size_t)m->surf[k].nrun + 1) * sizeof(uint32_t) + (size_t)m->surf[k].nrun +
             (m->surf[k].nrun ? (blocks + 1) * sizeof(uint32_t) : 0);
    return b;
}

void sim_volume_model_destroy(sim_volume_model *m)
{
    if (!m)
        return;
    for (int k = 0; k < SIM_NSURFACE; k++)
        sim_surface_data_free(&m->surf[k]);
    free(m->class_override);
    free(m->vol.hu);
    free(m);
}

const sim_volume *sim_volume_model_volume(const sim_volume_model *m)
{
    return &m->vol;
}

const sim_surface *sim_volume_model_surface(const sim_volume_model *m, sim_surface_kind kind)
{
    if ((int)kind < 0 || kind >= SIM_NSURFACE)
        return NULL;
    return &m->view[kind];
}
