/* test_phantom.c: the default phantom's anatomy against what sim/README.md says of it (the
 * organ centres and body sizes in patient mm, written here from the documentation, not
 * read from the code), its label map, the NIfTI writer (read back by the loader), classes
 * from a label map, and the contrast preset. Files go to a fresh mkdtemp() folder. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sim/softbody/softbody.h"
#include "sim/volume/volume.h"
#include "tests/harness.h"
#include "tests/scenes/volume_scenes.h"

/* Patient mm (u right, v anterior, w up from the inferior end) to the nearest element. */
static size_t at_mm(const sim_volume *v, float u, float vv, float w)
{
    int x = (int)floorf((u + 200.0f) / v->spacing_mm[0]);
    int y = (int)floorf((vv + 200.0f) / v->spacing_mm[1]);
    int z = (int)floorf(w / v->spacing_mm[2]);
    x = x < 0 ? 0 : (x >= v->nx ? v->nx - 1 : x);
    y = y < 0 ? 0 : (y >= v->ny ? v->ny - 1 : y);
    z = z < 0 ? 0 : (z >= v->nz ? v->nz - 1 : z);
    return (size_t)x + (size_t)v->nx * ((size_t)y + (size_t)v->ny * (size_t)z);
}

typedef struct probe {
    const char *what;
    float u, v, w;
    int label;
    float hu_lo, hu_hi;
} probe;

/* The documented anatomy (sim/README.md, "The default phantom"). */
static const probe k_probes[] = {
    {"liver centre (patient right, upper)", 60.0f, 5.0f, 250.0f, SIM_LABEL_LIVER, 50, 70},
    {"spleen centre (left, upper, posterior)", -95.0f, -35.0f, 240.0f, SIM_LABEL_SPLEEN, 38, 58},
    {"right kidney (lower)", 70.0f, -55.0f, 175.0f, SIM_LABEL_KIDNEY, 30, 50},
    {"left kidney", -70.0f, -55.0f, 187.0f, SIM_LABEL_KIDNEY, 30, 50},
    {"vertebral body L3 (posterior midline)", 0.0f, -50.0f, 140.0f, SIM_LABEL_BONE, 600, 700},
    {"disc (w 153-161)", 0.0f, -50.0f, 157.0f, SIM_LABEL_DISC, 70, 90},
    {"spinal canal", 0.0f, -80.0f, 200.0f, SIM_LABEL_CORD, 30, 50},
    {"spinous process", 0.0f, -95.0f, 140.0f, SIM_LABEL_BONE, 850, 950},
    {"aorta (left of midline)", -18.0f, -20.0f, 200.0f, SIM_LABEL_VESSEL, 35, 55},
    {"stomach gas cap (left, front)", -45.0f, 67.0f, 235.0f, SIM_LABEL_BOWEL_GAS, -1010, -990},
    {"ascending colon gas (right)", 100.0f, 8.0f, 100.0f, SIM_LABEL_BOWEL_GAS, -1010, -990},
    {"descending colon gas (left)", -100.0f, 8.0f, 120.0f, SIM_LABEL_BOWEL_GAS, -1010, -990},
    {"right iliac wing", 105.0f, -12.0f, 60.0f, SIM_LABEL_BONE, 900, 1000},
    {"left iliac wing", -105.0f, -12.0f, 60.0f, SIM_LABEL_BONE, 900, 1000},
    {"sacrum", 0.0f, -65.0f, 60.0f, SIM_LABEL_BONE, 550, 650},
    {"subcutaneous fat, belly front", 0.0f, 112.0f, 150.0f, SIM_LABEL_SKIN_FAT, -110, -90},
    {"abdominal wall muscle, belly front", 0.0f, 95.0f, 150.0f, SIM_LABEL_MUSCLE, 40, 60},
    {"outside, in front of the belly", 0.0f, 140.0f, 150.0f, SIM_LABEL_AIR, -1010, -990},
};

/* At each documented centre, the right label and HU; checked at the default size and a
 * coarser one (the anatomy is in mm, the same at every size). */
TEST(phantom_anatomy_at_the_documented_centres)
{
    const int dims[2][3] = {{128, 128, 75}, {100, 100, 60}};
    for (int d = 0; d < 2; d++) {
        sim_volume v;
        char err[256] = "";
        int nx = dims[d][0], ny = dims[d][1], nz = dims[d][2];
        uint8_t *lab = malloc((size_t)nx * ny * nz);
        REQUIRE(lab);
        REQUIRE(sim_volume_phantom_ex(&v, lab, nx, ny, nz, NULL, err, sizeof err) == SIM_OK);
        for (size_t k = 0; k < sizeof k_probes / sizeof k_probes[0]; k++) {
            const probe *p = &k_probes[k];
            size_t i = at_mm(&v, p->u, p->v, p->w);
            CHECKF(lab[i] == p->label && v.hu[i] >= p->hu_lo && v.hu[i] <= p->hu_hi,
                   "%dx%dx%d: %s: label %d (%s), %.0f HU; want %s, %.0f..%.0f HU", nx, ny, nz,
                   p->what, lab[i], sim_phantom_label_name(lab[i]), (double)v.hu[i],
                   sim_phantom_label_name(p->label), (double)p->hu_lo, (double)p->hu_hi);
        }
        /* RAS: the liver's elements lie at high x (patient right), the spleen's at low x,
         * the spine's bone behind the middle (low y); ribs only above w = 160 mm and the
         * iliac wings only below w = 95 mm (lateral bone, |u| > 60 mm). */
        double lx = 0, sx = 0;
        size_t nl = 0, ns = 0, rib_mid = 0, rib_top = 0, wing = 0;
        for (int z = 0; z < nz; z++)
            for (int y = 0; y < ny; y++)
                for (int x = 0; x < nx; x++) {
                    size_t i = (size_t)x + (size_t)nx * ((size_t)y + (size_t)ny * z);
                    float u = ((float)x + 0.5f) * v.spacing_mm[0] - 200.0f;
                    float w = ((float)z + 0.5f) * v.spacing_mm[2];
                    lx += lab[i] == SIM_LABEL_LIVER ? x : 0, nl += lab[i] == SIM_LABEL_LIVER;
                    sx += lab[i] == SIM_LABEL_SPLEEN ? x : 0, ns += lab[i] == SIM_LABEL_SPLEEN;
                    if (lab[i] != SIM_LABEL_BONE || fabsf(u) <= 60.0f)
                        continue;
                    *(w < 95.0f ? &wing : w < 160.0f ? &rib_mid : &rib_top) += 1;
                }
        REQUIRE(nl > 0 && ns > 0);
        th_note("%dx%dx%d: liver mean x %.1f, spleen %.1f (of %d); lateral bone: %zu low, %zu "
                "mid, %zu high",
                nx, ny, nz, lx / (double)nl, sx / (double)ns, nx, wing, rib_mid, rib_top);
        CHECK(lx / (double)nl > 0.6 * nx && sx / (double)ns < 0.35 * nx);
        CHECK(wing > 100 && rib_top > 100 && rib_mid == 0);
        free(lab);
        sim_volume_free(&v);
    }
}

/* The torso tapers: in each slice its width and depth (outermost non-air element along
 * the midlines) match the documented half width 176 - 30 w/300 mm and half depth
 * 125 - 8 w/300 mm within an element, the section is wider than deep (not a cylinder),
 * and the top slice's area is under 0.85 of the bottom's. */
TEST(phantom_torso_tapers_from_the_hips_up)
{
    sim_volume v;
    char err[256] = "";
    const int nx = 128, ny = 128, nz = 75;
    uint8_t *lab = malloc((size_t)nx * ny * nz);
    REQUIRE(lab);
    REQUIRE(sim_volume_phantom_ex(&v, lab, nx, ny, nz, NULL, err, sizeof err) == SIM_OK);
    size_t area[75] = {0};
    float worst_w = 0.0f, worst_d = 0.0f;
    for (int z = 0; z < nz; z++) {
        float w = ((float)z + 0.5f) * v.spacing_mm[2];
        int xlo = nx, xhi = -1, ylo = ny, yhi = -1;
        for (int y = 0; y < ny; y++)
            for (int x = 0; x < nx; x++) {
                if (lab[(size_t)x + (size_t)nx * ((size_t)y + (size_t)ny * z)] == SIM_LABEL_AIR)
                    continue;
                area[z]++;
                if (y == ny / 2)
                    xlo = x < xlo ? x : xlo, xhi = x > xhi ? x : xhi;
                if (x == nx / 2)
                    ylo = y < ylo ? y : ylo, yhi = y > yhi ? y : yhi;
            }
        float width = (float)(xhi - xlo + 1) * v.spacing_mm[0];
        float depth = (float)(yhi - ylo + 1) * v.spacing_mm[1];
        float want_w = 2.0f * (176.0f - 30.0f * w / 300.0f),
              want_d = 2.0f * (125.0f - 8.0f * w / 300.0f);
        worst_w = fmaxf(worst_w, fabsf(width - want_w));
        worst_d = fmaxf(worst_d, fabsf(depth - want_d));
        CHECKF(width > 1.2f * depth, "slice %d: %.0f mm wide, %.0f deep", z, (double)width,
               (double)depth);
    }
    th_note("width within %.1f mm of the documented, depth within %.1f mm; area bottom %zu, top "
            "%zu elements (%.3f)",
            (double)worst_w, (double)worst_d, area[0], area[nz - 1],
            (double)area[nz - 1] / (double)area[0]);
    CHECK(worst_w <= 2.0f * v.spacing_mm[0] && worst_d <= 2.0f * v.spacing_mm[1]);
    CHECK((double)area[nz - 1] < 0.85 * (double)area[0]);
    for (int z = 1; z < nz; z++)
        CHECKF(area[z] <= area[z - 1] + 8, "slice %d: %zu elements, slice below %zu", z, area[z],
               area[z - 1]);
    free(lab);
    sim_volume_free(&v);
}

/* The class each label must get under the default thresholds (-400, 25, 375 HU). */
static int class_of_label(int l)
{
    switch (l) {
    case SIM_LABEL_AIR:
    case SIM_LABEL_BOWEL_GAS:
        return SIM_TISSUE_AIR;
    case SIM_LABEL_SKIN_FAT:
        return SIM_TISSUE_SKIN_FAT;
    case SIM_LABEL_BONE:
        return SIM_TISSUE_BONE;
    default:
        return SIM_TISSUE_MUSCLE_ORGAN;
    }
}

/* Under the default thresholds every element of a label gets that label's class (gas is
 * air, fat skin_fat, organs muscle_organ, bone bone), through a state's own classes. */
TEST(phantom_labels_class_as_their_tissue_by_default)
{
    sim_volume v;
    char err[256] = "";
    const int nx = 64, ny = 64, nz = 40;
    uint8_t *lab = malloc((size_t)nx * ny * nz), *lab2 = malloc((size_t)nx * ny * nz);
    REQUIRE(lab && lab2);
    REQUIRE(sim_volume_phantom_ex(&v, lab, nx, ny, nz, NULL, err, sizeof err) == SIM_OK);
    REQUIRE(sim_volume_phantom_labels(lab2, nx, ny, nz, err, sizeof err) == SIM_OK);
    CHECK(memcmp(lab, lab2, (size_t)nx * ny * nz) == 0);
    vs_scene sc;
    REQUIRE(vs_scene_create(&sc, &v, SIM_BACKEND_CPU, 1, err, sizeof err) == SIM_OK);
    const uint8_t *cls = sim_volume_classes(sc.state);
    size_t n = (size_t)nx * ny * nz, wrong = 0, count[SIM_NLABEL] = {0};
    for (size_t i = 0; i < n; i++) {
        REQUIRE(lab[i] < SIM_NLABEL);
        count[lab[i]]++;
        wrong += cls[i] != class_of_label(lab[i]);
    }
    for (int l = 0; l < SIM_NLABEL; l++)
        CHECKF(count[l] > 0, "label %s has no elements at 64x64x40", sim_phantom_label_name(l));
    CHECKF(wrong == 0, "%zu elements class otherwise than their label", wrong);
    vs_scene_destroy(&sc);
    free(lab);
    free(lab2);
    sim_volume_free(&v);
}

typedef struct tmpdir {
    char path[64];
} tmpdir;

static int tmp_make(tmpdir *d)
{
    snprintf(d->path, sizeof d->path, "/tmp/softcast_ph_XXXXXX");
    return mkdtemp(d->path) != NULL;
}

static void tmp_file(const tmpdir *d, const char *name, char *out, size_t out_sz)
{
    snprintf(out, out_sz, "%s/%s", d->path, name);
}

/* What the writer writes the loader reads back: dims, spacing, RAS, HU within rounding,
 * labels exactly; .nii and .nii.gz. */
TEST(phantom_nifti_written_reads_back)
{
#if !SIM_HAVE_NIFTI
    SKIP("built without the NIfTI library");
#else
    tmpdir d;
    REQUIRE(tmp_make(&d));
    sim_volume v;
    char err[256] = "", ct[128], lb[128];
    const int nx = 40, ny = 36, nz = 24;
    size_t n = (size_t)nx * ny * nz;
    uint8_t *lab = malloc(n);
    REQUIRE(lab);
    REQUIRE(sim_volume_phantom_ex(&v, lab, nx, ny, nz, NULL, err, sizeof err) == SIM_OK);
    const char *ext[2] = {"nii", "nii.gz"};
    for (int e = 0; e < 2; e++) {
        char nm[32];
        snprintf(nm, sizeof nm, "ct.%s", ext[e]);
        tmp_file(&d, nm, ct, sizeof ct);
        snprintf(nm, sizeof nm, "labels.%s", ext[e]);
        tmp_file(&d, nm, lb, sizeof lb);
        REQUIRE(sim_volume_save_nifti(&v, ct, err, sizeof err) == SIM_OK);
        REQUIRE(sim_labels_save_nifti(lab, nx, ny, nz, v.spacing_mm, lb, err, sizeof err) ==
                SIM_OK);
        sim_volume a, b;
        REQUIRE(sim_volume_load_nifti(&a, ct, NULL, err, sizeof err) == SIM_OK);
        REQUIRE(sim_volume_load_nifti(&b, lb, NULL, err, sizeof err) == SIM_OK);
        CHECK(a.nx == nx && a.ny == ny && a.nz == nz && b.nx == nx && b.ny == ny && b.nz == nz);
        CHECKF(!strcmp(a.orientation, "RAS") && !strcmp(b.orientation, "RAS"), "read as %s and %s",
               a.orientation, b.orientation);
        float dhu = 0.0f, dsp = 0.0f;
        size_t dlab = 0;
        for (int k = 0; k < 3; k++)
            dsp = fmaxf(dsp, fmaxf(fabsf(a.spacing_mm[k] - v.spacing_mm[k]),
                                   fabsf(b.spacing_mm[k] - v.spacing_mm[k])));
        for (size_t i = 0; i < n; i++) {
            dhu = fmaxf(dhu, fabsf(a.hu[i] - v.hu[i]));
            dlab += b.hu[i] != (float)lab[i];
        }
        th_note(".%s: HU within %.3f, spacing within %g, %zu labels differ", ext[e], (double)dhu,
                (double)dsp, dlab);
        CHECK(dhu <= 0.5f && dsp < 1e-6f && dlab == 0);
        sim_volume_free(&a);
        sim_volume_free(&b);
        remove(ct);
        remove(lb);
    }
    tmp_file(&d, "ct.img", ct, sizeof ct);
    CHECK(sim_volume_save_nifti(&v, ct, err, sizeof err) == SIM_ERR_ARG);
    CHECKF(strstr(err, ".nii") != NULL, "err: %s", err);
    free(lab);
    sim_volume_free(&v);
    rmdir(d.path);
#endif
}

/* ------------------------------------------------------------ classes from labels */

/* Pull the abdominal wall in front of the liver 3 lattice units forward (16 frames) and
 * hold 10; the spread of the liver's displacements about their mean, lattice units. */
static float pull_by_the_liver(const sim_volume *v, const uint8_t *lab, const uint8_t *override,
                               int *liver_bone)
{
    char err[256] = "";
    sim_volume_model_options mo = sim_default_volume_model_options();
    mo.class_override = override;
    sim_volume_model *m = NULL;
    sim_backend *b = NULL;
    sim_volume_state *s = NULL;
    float spread = -1.0f;
    if (sim_volume_model_create(&m, v, &mo, err, sizeof err) != SIM_OK ||
        sim_backend_create(&b, SIM_BACKEND_CPU, 1, err, sizeof err) != SIM_OK ||
        sim_volume_state_create(&s, m, b, err, sizeof err) != SIM_OK)
        goto out;
    size_t n = (size_t)v->nx * v->ny * v->nz, nl = 0, nb = 0;
    const uint8_t *cls = sim_volume_classes(s);
    for (size_t i = 0; i < n; i++)
        if (lab[i] == SIM_LABEL_LIVER)
            nl++, nb += cls[i] == SIM_TISSUE_BONE;
    *liver_bone = nl > 0 && nb == nl;
    /* The wall in front of the liver: u 60, v 90 (muscle), w 250 mm. */
    float g[3] = {(60.0f + 200.0f) / v->spacing_mm[0] - 0.5f,
                  (90.0f + 200.0f) / v->spacing_mm[1] - 0.5f, 250.0f / v->spacing_mm[2] - 0.5f};
    vs_push(s, SIM_EV_GRAB, g, 1.5f);
    for (int f = 0; f < 26; f++) {
        float t[3] = {g[0], g[1] + 3.0f * (float)(f < 16 ? f + 1 : 16) / 16.0f, g[2]};
        vs_push(s, SIM_EV_MOVE, t, 0.0f);
        if (sim_volume_step(s, NULL, err, sizeof err) != SIM_OK)
            goto out;
    }
    const float *pos = sim_volume_positions(s);
    double mean[3] = {0, 0, 0};
    for (int pass = 0; pass < 2; pass++) {
        spread = 0.0f;
        for (size_t i = 0; i < n; i++) {
            if (lab[i] != SIM_LABEL_LIVER)
                continue;
            float r[3] = {(float)(i % (size_t)v->nx), (float)(i / (size_t)v->nx % (size_t)v->ny),
                          (float)(i / ((size_t)v->nx * v->ny))};
            float d2 = 0.0f;
            for (int k = 0; k < 3; k++) {
                float dk = pos[i * 3 + k] - r[k];
                if (pass == 0)
                    mean[k] += (double)dk / (double)nl;
                d2 += (dk - (float)mean[k]) * (dk - (float)mean[k]);
            }
            spread = fmaxf(spread, sqrtf(d2));
        }
    }
    th_note("liver %s: displaced by (%.3f, %.3f, %.3f), spread %.4f lattice",
            override ? "mapped to bone" : "by HU", mean[0], mean[1], mean[2], (double)spread);
out:
    if (spread < 0.0f)
        th_note("pull_by_the_liver: %s", err);
    sim_volume_state_destroy(s);
    sim_backend_destroy(b);
    sim_volume_model_destroy(m);
    return spread;
}

/* The phantom with its own label map read back from a NIfTI file, the liver (label 3)
 * mapped to bone: every liver element classes as bone though its HU is soft tissue's, the
 * others as by HU; a pull of the wall in front of it moves it as one piece, where by HU
 * the same pull bends it. */
TEST(label_classes_liver_mapped_to_bone_stays_rigid)
{
#if !SIM_HAVE_NIFTI
    SKIP("built without the NIfTI library");
#else
    tmpdir d;
    REQUIRE(tmp_make(&d));
    char err[256] = "", path[128];
    tmp_file(&d, "labels.nii.gz", path, sizeof path);
    const int nx = 48, ny = 48, nz = 28;
    size_t n = (size_t)nx * ny * nz;
    uint8_t *lab = malloc(n);
    sim_volume v;
    REQUIRE(lab);
    REQUIRE(sim_volume_phantom_ex(&v, lab, nx, ny, nz, NULL, err, sizeof err) == SIM_OK);
    REQUIRE(sim_labels_save_nifti(lab, nx, ny, nz, v.spacing_mm, path, err, sizeof err) == SIM_OK);
    uint8_t *ov = NULL;
    REQUIRE(sim_volume_label_classes(&ov, path, "3=bone", &v, NULL, NULL, err, sizeof err) ==
            SIM_OK);
    size_t other = 0;
    for (size_t i = 0; i < n; i++)
        other += lab[i] != SIM_LABEL_LIVER && ov[i] != SIM_CLASS_BY_HU;
    CHECKF(other == 0, "%zu elements outside the liver given a class", other);
    int bone_hu = 0, bone_map = 0;
    float by_hu = pull_by_the_liver(&v, lab, NULL, &bone_hu);
    float mapped = pull_by_the_liver(&v, lab, ov, &bone_map);
    CHECK(!bone_hu && bone_map);
    CHECKF(by_hu > 0.3f && mapped >= 0.0f && mapped < 0.01f,
           "liver spread %.4f by HU, %.4f mapped to bone", (double)by_hu, (double)mapped);
    free(ov);
    free(lab);
    sim_volume_free(&v);
    remove(path);
    rmdir(d.path);
#endif
}

/* A label map of a scan stored SRA (i superior, j right, k anterior) at 10x16x12, read as
 * 16x12x10 RAS, fitted by 2 and given an air margin (one element at -x, two at +z), as the
 * loader did to the CT: each block of 2^3 takes the class most of its labels give (ties to
 * the lower class, "by HU" last), and the margin classes by HU. */
TEST(label_classes_follow_a_fitted_volume)
{
#if !SIM_HAVE_NIFTI
    SKIP("built without the NIfTI library");
#else
    tmpdir d;
    REQUIRE(tmp_make(&d));
    char err[256] = "", path[128];
    tmp_file(&d, "fit.nii", path, sizeof path);
    const int nx = 16, ny = 12, nz = 10;
    uint8_t lab[16 * 12 * 10] = {0};
    for (int z = 0; z < nz; z++)
        for (int y = 0; y < ny; y++)
            for (int x = 0; x < nx; x++)
                lab[x + nx * (y + ny * z)] = x < 8 ? 3 : 0; /* left half bone, right by HU */
    /* Block (5,0,0): 5 of its 8 labels 3 (bone wins); block (6,0,0): 3 of 8 (by HU wins);
     * block (7,0,0): 4 labels 3 (bone) and 4 labels 7 (air): a tie, to air. */
    const int five[5][3] = {{10, 0, 0}, {11, 0, 0}, {10, 1, 0}, {11, 1, 0}, {10, 0, 1}};
    for (int k = 0; k < 5; k++)
        lab[five[k][0] + nx * (five[k][1] + ny * five[k][2])] = 3;
    for (int k = 0; k < 3; k++)
        lab[five[k][0] + 2 + nx * (five[k][1] + ny * five[k][2])] = 3;
    for (int k = 0; k < 8; k++)
        lab[14 + (k & 1) + nx * ((k >> 1 & 1) + ny * (k >> 2))] = k < 4 ? 3 : 7;
    const float sp[3] = {1.0f, 1.0f, 1.0f};
    REQUIRE(sim_labels_save_nifti(lab, nx, ny, nz, sp, path, err, sizeof err) == SIM_OK);
    sim_volume ct; /* the CT as simulated: only its dims and orientation are read */
    memset(&ct, 0, sizeof ct);
    ct.nx = 8 + 1, ct.ny = 6, ct.nz = 5 + 2;
    memcpy(ct.orientation, "SRA", 4);
    sim_volume_info info;
    memset(&info, 0, sizeof info);
    info.stored_dims[0] = 10, info.stored_dims[1] = 16, info.stored_dims[2] = 12;
    info.fit_factor = 2;
    info.margin[0] = 1, info.margin[5] = 2;
    uint8_t *ov = NULL;
    REQUIRE(sim_volume_label_classes(&ov, path, "3=bone,7=air", &ct, &info, NULL, err,
                                     sizeof err) == SIM_OK);
    int bad = 0;
    for (int z = 0; z < 7; z++)
        for (int y = 0; y < 6; y++)
            for (int x = 0; x < 9; x++) {
                int bx = x - 1, want = bx < 4 ? SIM_TISSUE_BONE : SIM_CLASS_BY_HU;
                if (y == 0 && z == 0 && bx >= 5)
                    want = bx == 5 ? SIM_TISSUE_BONE : bx == 6 ? SIM_CLASS_BY_HU : SIM_TISSUE_AIR;
                if (x == 0 || z >= 5)
                    want = SIM_CLASS_BY_HU; /* the margin */
                bad += ov[x + 9 * (y + 6 * z)] != want;
            }
    CHECKF(bad == 0, "%d of 378 elements with the wrong class", bad);
    free(ov);
    info.stored_dims[0] = 12, info.stored_dims[2] = 10; /* as stored, not as read: refused */
    CHECK(sim_volume_label_classes(&ov, path, "3=bone", &ct, &info, NULL, err, sizeof err) ==
          SIM_ERR_ARG);
    CHECKF(strstr(err, "16x12x10") && strstr(err, "16x10x12"), "err: %s", err);
    remove(path);
    rmdir(d.path);
#endif
}

/* Bad tables, a label map of other dims and an image that is not a label map are refused,
 * each with its reason. */
TEST(label_classes_refused_with_a_reason)
{
    uint8_t table[256];
    char err[256] = "";
    const struct {
        const char *spec, *says;
    } bad[] = {
        {"", "empty"},
        {"3", "LABEL=CLASS"},
        {"3=cartilage", "cartilage"},
        {"x=bone", "0..255"},
        {"300=bone", "0..255"},
        {"3=bone,3=air", "twice"},
        {"3=bone,", "LABEL=CLASS"},
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        err[0] = 0;
        CHECKF(sim_label_classes_parse(table, bad[k].spec, err, sizeof err) == SIM_ERR_ARG &&
                   strstr(err, bad[k].says),
               "\"%s\": %s", bad[k].spec, err);
    }
    REQUIRE(sim_label_classes_parse(table, "3=bone,7=air,0=skin_fat", err, sizeof err) == SIM_OK);
    CHECK(table[3] == SIM_TISSUE_BONE && table[7] == SIM_TISSUE_AIR &&
          table[0] == SIM_TISSUE_SKIN_FAT && table[4] == SIM_CLASS_BY_HU);
#if SIM_HAVE_NIFTI
    tmpdir d;
    REQUIRE(tmp_make(&d));
    char lb[128], ct[128];
    tmp_file(&d, "small.nii.gz", lb, sizeof lb);
    tmp_file(&d, "ct.nii.gz", ct, sizeof ct);
    sim_volume v;
    REQUIRE(sim_volume_phantom(&v, 20, 20, 12, err, sizeof err) == SIM_OK);
    uint8_t *lab = calloc(20 * 20 * 12, 1), *ov = NULL;
    REQUIRE(lab);
    REQUIRE(sim_labels_save_nifti(lab, 20, 20, 12, v.spacing_mm, lb, err, sizeof err) == SIM_OK);
    REQUIRE(sim_volume_save_nifti(&v, ct, err, sizeof err) == SIM_OK);
    sim_volume big;
    memset(&big, 0, sizeof big);
    big.nx = 40, big.ny = 36, big.nz = 24; /* only its dims are read */
    CHECK(sim_volume_label_classes(&ov, lb, "3=bone", &big, NULL, NULL, err, sizeof err) ==
          SIM_ERR_ARG);
    CHECKF(strstr(err, "20x20x12") && strstr(err, "40x36x24") && !ov, "err: %s", err);
    CHECK(sim_volume_label_classes(&ov, ct, "3=bone", &v, NULL, NULL, err, sizeof err) ==
          SIM_ERR_FORMAT);
    CHECKF(strstr(err, "not a label map") && !ov, "err: %s", err);
    free(lab);
    sim_volume_free(&v);
    remove(lb);
    remove(ct);
    rmdir(d.path);
#endif
}

/* ------------------------------------------------------------ contrast preset */

/* Vessels filled with contrast (450 HU) class as bone under the default thresholds and as
 * muscle_organ under the contrast preset; the ribs, arches and iliac wings (800-950 HU)
 * stay bone; the vertebral bodies and sacrum (600-650 HU) go soft: the preset's cost. */
TEST(contrast_preset_vessels_soft_and_cortical_bone_stays)
{
    sim_volume v;
    char err[256] = "";
    const int nx = 64, ny = 64, nz = 40;
    size_t n = (size_t)nx * ny * nz;
    uint8_t *lab = malloc(n);
    REQUIRE(lab);
    sim_phantom_opts po = sim_default_phantom_opts();
    po.vessel_hu = 450.0f;
    REQUIRE(sim_volume_phantom_ex(&v, lab, nx, ny, nz, &po, err, sizeof err) == SIM_OK);
    vs_scene sc;
    REQUIRE(vs_scene_create(&sc, &v, SIM_BACKEND_CPU, 1, err, sizeof err) == SIM_OK);
    sim_volume_params p = sim_volume_get_params(sc.state);
    size_t cnt[2][4] = {{0}}; /* [preset][vessel bone, vessel soft, dense bone kept, body soft] */
    for (int pre = 0; pre < 2; pre++) {
        if (pre) {
            REQUIRE(sim_volume_params_preset(&p, "contrast", err, sizeof err) == SIM_OK);
            CHECK(p.hu_threshold[2] == 700.0f);
            REQUIRE(vs_set_params(sc.state, &p) == SIM_OK);
            REQUIRE(sim_volume_step(sc.state, NULL, err, sizeof err) == SIM_OK);
        }
        const uint8_t *cls = sim_volume_classes(sc.state);
        for (size_t i = 0; i < n; i++) {
            if (lab[i] == SIM_LABEL_VESSEL)
                cnt[pre][cls[i] == SIM_TISSUE_BONE ? 0 : 1] +=
                    cls[i] == SIM_TISSUE_BONE || cls[i] == SIM_TISSUE_MUSCLE_ORGAN;
            if (lab[i] == SIM_LABEL_BONE && v.hu[i] > 750.0f)
                cnt[pre][2] += cls[i] == SIM_TISSUE_BONE;
            if (lab[i] == SIM_LABEL_BONE && v.hu[i] < 700.0f)
                cnt[pre][3] += cls[i] == SIM_TISSUE_MUSCLE_ORGAN;
        }
    }
    size_t nv = 0, dense = 0, body = 0;
    for (size_t i = 0; i < n; i++) {
        nv += lab[i] == SIM_LABEL_VESSEL;
        dense += lab[i] == SIM_LABEL_BONE && v.hu[i] > 750.0f;
        body += lab[i] == SIM_LABEL_BONE && v.hu[i] < 700.0f;
    }
    th_note("%zu vessel elements: bone %zu by default, %zu under the preset; %zu dense bone kept "
            "%zu/%zu; %zu cancellous soft under the preset",
            nv, cnt[0][0], cnt[1][0], dense, cnt[0][2], cnt[1][2], cnt[1][3]);
    CHECK(nv > 0 && cnt[0][0] == nv && cnt[1][1] == nv);
    CHECK(dense > 0 && cnt[0][2] == dense && cnt[1][2] == dense);
    CHECK(body > 0 && cnt[0][3] == 0 && cnt[1][3] == body);
    CHECK(sim_volume_params_preset(&p, "venous", err, sizeof err) == SIM_ERR_ARG);
    CHECKF(strstr(err, "venous") && strstr(err, "contrast"), "err: %s", err);
    REQUIRE(sim_volume_params_preset(&p, "default", err, sizeof err) == SIM_OK);
    CHECK(p.hu_threshold[2] == 375.0f);
    vs_scene_destroy(&sc);
    free(lab);
    sim_volume_free(&v);
}

/* ------------------------------------------------------------ the soft-body organ */

/* The phantom's label map with the liver alone (what `softcast-bench phantom --keep 3`
 * writes) becomes the soft-body scene's hybrid organ through its own label-map reader: its
 * surface encloses the liver's voxels (volume within 5%, box within a voxel a side). */
TEST(phantom_liver_becomes_a_soft_body_organ)
{
#if !SIM_HAVE_NIFTI
    SKIP("built without the NIfTI library");
#else
    tmpdir d;
    REQUIRE(tmp_make(&d));
    char err[512] = "", path[128];
    tmp_file(&d, "liver.nii.gz", path, sizeof path);
    const int nx = 64, ny = 64, nz = 40;
    size_t n = (size_t)nx * ny * nz, nl = 0;
    uint8_t *lab = malloc(n);
    sim_volume v;
    REQUIRE(lab);
    REQUIRE(sim_volume_phantom_ex(&v, lab, nx, ny, nz, NULL, err, sizeof err) == SIM_OK);
    float lo[3] = {1e9f, 1e9f, 1e9f}, hi[3] = {-1e9f, -1e9f, -1e9f};
    for (size_t i = 0; i < n; i++) {
        if (lab[i] != SIM_LABEL_LIVER) {
            lab[i] = 0;
            continue;
        }
        nl++;
        size_t c[3] = {i % (size_t)nx, i / (size_t)nx % (size_t)ny, i / ((size_t)nx * ny)};
        for (int k = 0; k < 3; k++) {
            lo[k] = fminf(lo[k], (float)c[k] * v.spacing_mm[k]);
            hi[k] = fmaxf(hi[k], (float)c[k] * v.spacing_mm[k]);
        }
    }
    REQUIRE(sim_labels_save_nifti(lab, nx, ny, nz, v.spacing_mm, path, err, sizeof err) == SIM_OK);
    sim_softbody_tets t;
    sim_softbody_organ_opts o = sim_softbody_default_organ_opts();
    REQUIRE(sim_softbody_tets_labelmap(&t, path, "3=liver", &o, err, sizeof err) == SIM_OK);
    /* The organ's surface, each vertex placed by its tet and weights (as the scene draws
     * it): its box and the volume it encloses (the divergence theorem). */
    float *sp = malloc(sizeof(float) * 3 * (size_t)t.nembed);
    REQUIRE(sp);
    float tlo[3] = {1e9f, 1e9f, 1e9f}, thi[3] = {-1e9f, -1e9f, -1e9f};
    for (int k = 0; k < t.nembed; k++)
        for (int b = 0; b < 3; b++) {
            float x = 0.0f;
            for (int c = 0; c < 4; c++)
                x += t.embed_w[4 * k + c] * t.x[3 * t.tet[4 * t.embed_tet[k] + c] + b];
            sp[3 * k + b] = x * 1000.0f;
            tlo[b] = fminf(tlo[b], x * 1000.0f);
            thi[b] = fmaxf(thi[b], x * 1000.0f);
        }
    double vol = 0.0;
    for (int e = 0; e < t.nembed_tri; e++) {
        const float *p0 = sp + 3 * t.embed_tri[3 * e], *p1 = sp + 3 * t.embed_tri[3 * e + 1];
        const float *p2 = sp + 3 * t.embed_tri[3 * e + 2];
        double q0[3], q1[3], q2[3];
        for (int k = 0; k < 3; k++)
            q0[k] = (double)p0[k], q1[k] = (double)p1[k], q2[k] = (double)p2[k];
        vol += (q0[0] * (q1[1] * q2[2] - q1[2] * q2[1]) - q0[1] * (q1[0] * q2[2] - q1[2] * q2[0]) +
                q0[2] * (q1[0] * q2[1] - q1[1] * q2[0])) /
               6.0 * 1e-9;
    }
    free(sp);
    double want = (double)nl * (double)(v.spacing_mm[0] * v.spacing_mm[1] * v.spacing_mm[2]) * 1e-9;
    float worst = 0.0f;
    for (int k = 0; k < 3; k++)
        worst = fmaxf(worst, fabsf((thi[k] - tlo[k]) - (hi[k] - lo[k] + v.spacing_mm[k])) -
                                 v.spacing_mm[k]);
    th_note("liver: %zu voxels, %.0f cm3; organ: %d tets, %d vertices, its surface %.0f cm3; box "
            "%.0f x %.0f "
            "x %.0f mm against %.0f x %.0f x %.0f",
            nl, want * 1e6, t.ntet, t.nvert, vol * 1e6, (double)(thi[0] - tlo[0]),
            (double)(thi[1] - tlo[1]), (double)(thi[2] - tlo[2]), (double)(hi[0] - lo[0]),
            (double)(hi[1] - lo[1]), (double)(hi[2] - lo[2]));
    CHECK(t.ntet > 100 && t.nregion == 1 && !strcmp(t.region_name[0], "liver"));
    CHECKF(fabs(vol / want - 1.0) < 0.10, "organ %.0f cm3, liver %.0f cm3", vol * 1e6, want * 1e6);
    CHECKF(worst <= 0.0f, "organ box off the liver's by %.1f mm more than two voxels",
           (double)worst);
    sim_softbody_tets_free(&t);
    free(lab);
    sim_volume_free(&v);
    remove(path);
    rmdir(d.path);
#endif
}
