/* phantom.c: the embedded default volume: a procedural abdominal phantom in HU with its
 * label map (sim/README.md, "The default phantom", has the table).
 *
 * Layout (the loader's RAS lattice, sim_volume.orientation):
 *   x: patient left (x = 0) to patient right (x = nx-1): the liver is at high x.
 *   y: posterior (y = 0: the back, the spine) to anterior (y = ny-1: the belly front).
 *   z: inferior (z = 0: the iliac wings) to superior (z = nz-1: the lower ribs): z is up.
 * The field of view is fixed in millimetres and the spacing scales with the dims, so the
 * anatomy is the same at any size: spacing_mm = {400/nx, 400/ny, 300/nz}. At the default
 * 128x128x75 that is 3.125 x 3.125 x 4 mm: a 512x512x300 scan at 0.78 x 0.78 x 1 mm (a
 * 400 mm field of view) downsampled by 4. Each element samples its centre (no partial
 * volume) at patient mm u (left-right from the centre, + right), v (posterior-anterior
 * from the centre, + anterior) and w (from the inferior end), then gets a deterministic
 * hash noise in [-10, +10) HU.
 *
 * The torso is cut by both z ends, like a real scan from the iliac wings to the lower
 * chest, and tapers: its half width goes from 176 mm at the hips to 146 mm at the top,
 * its half depth from 125 to 117 mm; the cross-section is an ellipse in front and
 * squarer behind (|v/b|^3 there: a flatter back). From the outside in: skin 3 mm, fat
 * 20 mm, a muscle wall 12 mm with the ribs inside it from w = 165 mm up (12 mm bands every
 * 30 mm sloping down to the front, open at the front midline and beside the spine), then
 * the cavity. The lumbar spine runs up the back midline (vertebral bodies with discs
 * every 34 mm, the neural arch, the spinous and transverse processes, the cord in its
 * canal), the sacrum below w = 85 mm between the iliac wings, which flare out from the
 * sacroiliac joints to the crest at w = 90 mm with the iliacus inside them and the
 * gluteal muscles outside. In the cavity: the aorta (left of the midline, dividing into
 * the iliac arteries at w = 100 mm) and the vena cava (right), the kidneys beside the
 * spine (the right one lower) in perirenal fat, the liver (right, upper), the spleen
 * (left, upper, posterior), the stomach (left, upper) with a gas cap at its front, the
 * colon round the edge (ascending right, transverse, descending left, sigmoid, rectum)
 * with gas in the front half of its lumen, the psoas muscles, the back muscles, and the
 * small bowel elsewhere: a smooth hash field splits it into bowel, mesenteric fat and a
 * little gas.
 *
 * Values, HU (each at least 5 HU from the default class edges -400, 25, 375 after the
 * noise, and from the contrast preset's bone edge 700): air and gas -1000, fat -100,
 * mesenteric and perirenal fat -90, skin +10, muscle +50, liver +60, spleen +48, kidney
 * +40 (a real +30 would sit on the 25 HU edge), bowel +40, blood +45 (sim_phantom_opts:
 * contrast), cord +40, disc +80, vertebral body +650 and sacrum +600 (cancellous bone
 * with its cortex at this resolution), neural arch and processes +900, ribs +800, iliac
 * wings +950.
 */
#include "volume.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../core/sc_base.h"

/* Field of view in mm. */
#define PH_FOV_X 400.0f
#define PH_FOV_Y 400.0f
#define PH_FOV_Z 300.0f

/* Layers, mm. */
#define PH_SKIN     3.0f
#define PH_FAT      20.0f
#define PH_WALL     12.0f
#define PH_NOISE_HU 10.0f

/* What an element is: its value and its label. */
typedef enum ph_kind {
    K_AIR = 0,
    K_SKIN,
    K_FAT,
    K_VFAT,
    K_MUSCLE,
    K_LIVER,
    K_KIDNEY,
    K_SPLEEN,
    K_BOWEL,
    K_GAS,
    K_VERTEBRA,
    K_SACRUM,
    K_ARCH,
    K_RIB,
    K_PELVIS,
    K_DISC,
    K_CORD,
    K_BLOOD,
    K_NKIND
} ph_kind;

static const struct {
    float hu;
    uint8_t label;
} k_kind[K_NKIND] = {
    {-1000.0f, SIM_LABEL_AIR},       {10.0f, SIM_LABEL_SKIN_FAT}, {-100.0f, SIM_LABEL_SKIN_FAT},
    {-90.0f, SIM_LABEL_SKIN_FAT},    {50.0f, SIM_LABEL_MUSCLE},   {60.0f, SIM_LABEL_LIVER},
    {40.0f, SIM_LABEL_KIDNEY},       {48.0f, SIM_LABEL_SPLEEN},   {40.0f, SIM_LABEL_BOWEL},
    {-1000.0f, SIM_LABEL_BOWEL_GAS}, {650.0f, SIM_LABEL_BONE},    {600.0f, SIM_LABEL_BONE},
    {900.0f, SIM_LABEL_BONE},        {800.0f, SIM_LABEL_BONE},    {950.0f, SIM_LABEL_BONE},
    {80.0f, SIM_LABEL_DISC},         {40.0f, SIM_LABEL_CORD},     {45.0f, SIM_LABEL_VESSEL},
};

static const char *const k_label_names[SIM_NLABEL] = {
    "air",   "skin_fat",  "muscle", "liver", "kidney", "spleen",
    "bowel", "bowel_gas", "bone",   "disc",  "vessel", "cord",
};

const char *sim_phantom_label_name(int label)
{
    return (label >= 0 && label < SIM_NLABEL) ? k_label_names[label] : "unknown";
}

sim_phantom_opts sim_default_phantom_opts(void)
{
    sim_phantom_opts o;
    o.vessel_hu = 45.0f;
    return o;
}

/* ------------------------------------------------------------------ noise */

static uint32_t hash_u32(uint32_t h)
{
    /* lowbias32 (Chris Wellons): a cheap, well-mixed 32-bit integer hash. */
    h ^= h >> 16;
    h *= 0x7feb352du;
    h ^= h >> 15;
    h *= 0x846ca68bu;
    h ^= h >> 16;
    return h;
}

static uint32_t hash3(int32_t x, int32_t y, int32_t z, uint32_t seed)
{
    uint32_t h = hash_u32(seed ^ (uint32_t)x);
    h = hash_u32(h ^ (uint32_t)y);
    return hash_u32(h ^ (uint32_t)z);
}

/* Uniform in [0, 1) from the top 24 bits. */
static float unit_from_hash(uint32_t h)
{
    return (float)(h >> 8) * (1.0f / 16777216.0f);
}

static float smooth01(float t)
{
    return t * t * (3.0f - 2.0f * t);
}

static float lerpf(float a, float b, float t)
{
    return a + (b - a) * t;
}

/* Smooth value noise in [0, 1) on a lattice of `cell` mm, in patient mm, so the pattern
 * is the same at every resolution. */
static float value_noise(float u, float v, float w, float cell, uint32_t seed)
{
    float gx = u / cell, gy = v / cell, gz = w / cell;
    float fx = floorf(gx), fy = floorf(gy), fz = floorf(gz);
    int32_t ix = (int32_t)fx, iy = (int32_t)fy, iz = (int32_t)fz;
    float tx = smooth01(gx - fx), ty = smooth01(gy - fy), tz = smooth01(gz - fz);
    float c[2][2][2];
    for (int k = 0; k < 2; k++)
        for (int j = 0; j < 2; j++)
            for (int i = 0; i < 2; i++)
                c[k][j][i] = unit_from_hash(hash3(ix + i, iy + j, iz + k, seed));
    float y0 = lerpf(lerpf(c[0][0][0], c[0][0][1], tx), lerpf(c[0][1][0], c[0][1][1], tx), ty);
    float y1 = lerpf(lerpf(c[1][0][0], c[1][0][1], tx), lerpf(c[1][1][0], c[1][1][1], tx), ty);
    return lerpf(y0, y1, tz);
}

/* ------------------------------------------------------------------ shapes */

/* (u/a)^2 + (v/b)^2: <= 1 inside the ellipse. */
static float ell2(float u, float v, float a, float b)
{
    float p = u / a, q = v / b;
    return p * p + q * q;
}

static float ell3(float u, float v, float w, float a, float b, float c)
{
    float r = w / c;
    return ell2(u, v, a, b) + r * r;
}

/* Position within a repeating period, in [0, period). */
static float wrapf(float x, float period)
{
    return x - period * floorf(x / period);
}

/* The torso's half width and half depth at height w: it tapers from the hips up. */
static float body_a(float w)
{
    return 176.0f - 30.0f * (w / PH_FOV_Z);
}

static float body_b(float w)
{
    return 125.0f - 8.0f * (w / PH_FOV_Z);
}

/* Is (u, v, w) inside the torso's outline shrunk by depth t mm (close to a layer of
 * uniform thickness t for these aspect ratios)? An ellipse in front, squarer behind. */
static int inside_depth(float u, float v, float w, float t)
{
    float p = u / (body_a(w) - t), q = fabsf(v) / (body_b(w) - t);
    return p * p + (v < 0.0f ? q * q * q : q * q) <= 1.0f;
}

/* Squared distance from p to the segment a-b (3D), and where along it (0..1). */
static float seg_d2(const float p[3], const float a[3], const float b[3], float *at)
{
    float ab[3], ap[3], dot = 0.0f, len2 = 0.0f;
    for (int k = 0; k < 3; k++) {
        ab[k] = b[k] - a[k];
        ap[k] = p[k] - a[k];
        dot += ab[k] * ap[k];
        len2 += ab[k] * ab[k];
    }
    float t = len2 > 0.0f ? dot / len2 : 0.0f;
    t = t < 0.0f ? 0.0f : (t > 1.0f ? 1.0f : t);
    float d2 = 0.0f;
    for (int k = 0; k < 3; k++) {
        float d = ap[k] - t * ab[k];
        d2 += d * d;
    }
    *at = t;
    return d2;
}

/* ------------------------------------------------------------------ skeleton */

/* Lumbar spine above w = 85 mm: vertebral bodies with 8 mm discs every 34 mm (L5/S1 at
 * w = 85), the arch round the canal, the spinous and transverse processes. */
static int spine_at(float u, float v, float w, ph_kind *k)
{
    const float body_v = -50.0f, body_r = 20.0f; /* vertebral body */
    const float canal_v = -80.0f, canal_r = 8.0f, arch_r = 14.0f;
    int in_disc = wrapf(w - 85.0f, 34.0f) < 8.0f;
    float dv = v - body_v;
    if (u * u + dv * dv <= body_r * body_r) {
        *k = in_disc ? K_DISC : K_VERTEBRA;
        return 1;
    }
    dv = v - canal_v;
    float r2 = u * u + dv * dv;
    if (r2 <= canal_r * canal_r) {
        *k = K_CORD;
        return 1;
    }
    if (in_disc)
        return 0;
    int arch = r2 <= arch_r * arch_r;
    int spinous = u >= -4.0f && u <= 4.0f && v >= -105.0f && v <= canal_v;
    int transverse = u >= -38.0f && u <= 38.0f && v >= -85.0f && v <= -75.0f;
    if (arch || spinous || transverse) {
        *k = K_ARCH;
        return 1;
    }
    return 0;
}

/* The sacrum below w = 85 mm: a plate that narrows downward and tilts back. */
static int sacrum_at(float u, float v, float w)
{
    float f = w / 85.0f;
    float hw = 22.0f + 28.0f * f, sv = -62.0f - 15.0f * (1.0f - f);
    return ell2(u, v - sv, hw, 16.0f) <= 1.0f;
}

/* The iliac wings below the crest (w = 90 mm): a 9 mm plate each side, from the
 * sacroiliac joint (u = +-45, v = -70 mm) forward and out at 50 degrees toward the
 * anterior superior spine, bowed out behind (the iliac fossa is hollow in front) and
 * longer as it rises (it flares). Returns 1 bone, 2 muscle (the iliacus in front of the
 * wing, the gluteal muscles behind it), 0 neither. */
static int pelvis_at(float u, float v, float w)
{
    if (w >= 90.0f)
        return 0;
    const float c = 0.6428f, s = 0.7660f; /* cos and sin of 50 degrees */
    float side = u >= 0.0f ? 1.0f : -1.0f, du = side * u - 45.0f, dv = v + 70.0f;
    float len = 60.0f + 55.0f * (w / 90.0f);
    float t = (du * c + dv * s) / len; /* along the wing, 0 at the joint */
    if (t < 0.0f || t > 1.0f)
        return 0;
    float off = (du * s - dv * c) - 18.0f * 4.0f * t * (1.0f - t); /* + behind the plate */
    if (fabsf(off) < 4.5f)
        return 1;
    return (off > -20.0f && off < 40.0f) ? 2 : 0;
}

/* Ribs: 12 mm bands every 30 mm inside the muscle wall above w = 165 mm, sloping down
 * toward the front, with a gap at the front midline (cartilage) and at the spine. */
static int rib_at(float u, float v, float w)
{
    if (w < 165.0f)
        return 0;
    const float outer = PH_SKIN + PH_FAT + 2.0f, inner = PH_SKIN + PH_FAT + 10.0f;
    if (!inside_depth(u, v, w, outer) || inside_depth(u, v, w, inner))
        return 0;
    if (v > 0.0f && u > -45.0f && u < 45.0f)
        return 0;
    if (v < 0.0f && u > -30.0f && u < 30.0f)
        return 0;
    return wrapf(w + 0.25f * v, 30.0f) < 12.0f;
}

/* ------------------------------------------------------------------ organs */

/* Aorta (left of the midline) and vena cava (right) in front of the spine; below
 * w = 100 mm each divides into two iliac vessels that part as they go down. */
static int vessel_at(float u, float v, float w)
{
    if (w >= 100.0f)
        return ell2(u + 18.0f, v + 20.0f, 11.0f, 11.0f) <= 1.0f ||
               ell2(u - 22.0f, v + 18.0f, 12.0f, 10.0f) <= 1.0f;
    float d = 100.0f - w, off = 10.0f + 0.45f * d, au = fabsf(u) - off;
    return ell2(au, v + 20.0f - 0.15f * d, 7.0f, 7.0f) <= 1.0f ||
           ell2(au, v + 33.0f - 0.15f * d, 8.0f, 8.0f) <= 1.0f;
}

/* The colon's centre line, mm (u, v, w): ascending (right), transverse with a forward
 * bow (the splenic flexure higher than the hepatic), descending (left), sigmoid, rectum. */
static const float k_colon[][3] = {
    {100.0f, 0.0f, 40.0f},  {100.0f, 0.0f, 150.0f},  {60.0f, 25.0f, 158.0f},
    {0.0f, 45.0f, 170.0f},  {-60.0f, 30.0f, 182.0f}, {-100.0f, 0.0f, 192.0f},
    {-100.0f, 0.0f, 60.0f}, {-30.0f, 20.0f, 35.0f},  {0.0f, -45.0f, -10.0f},
};
#define COLON_R    22.0f /* outer radius */
#define COLON_WALL 4.0f

/* The colon: 1 wall or content, 2 gas (the front half of the lumen), 0 outside. */
static int colon_at(float u, float v, float w)
{
    const float p[3] = {u, v, w};
    int nseg = (int)(sizeof k_colon / sizeof k_colon[0]) - 1;
    float best = 1e30f, best_v = 0.0f;
    for (int s = 0; s < nseg; s++) {
        float t, d2 = seg_d2(p, k_colon[s], k_colon[s + 1], &t);
        if (d2 < best) {
            best = d2;
            best_v = lerpf(k_colon[s][1], k_colon[s + 1][1], t);
        }
    }
    if (best > COLON_R * COLON_R)
        return 0;
    float lumen = COLON_R - COLON_WALL;
    return (best < lumen * lumen && v > best_v) ? 2 : 1;
}

/* The solid organs: liver, spleen, kidneys in their fat, stomach. K_NKIND when none. */
static ph_kind organ_at(float u, float v, float w)
{
    for (int side = -1; side <= 1; side += 2) { /* the right kidney sits lower */
        float ku = u - (float)side * 70.0f, kv = v + 55.0f;
        float kw = w - (side > 0 ? 175.0f : 187.0f);
        if (ell3(ku, kv, kw, 25.0f, 18.0f, 55.0f) <= 1.0f)
            return K_KIDNEY;
        if (ell3(ku, kv, kw, 35.0f, 28.0f, 65.0f) <= 1.0f)
            return K_VFAT;
    }
    if (ell3(u - 60.0f, v - 5.0f, w - 250.0f, 85.0f, 80.0f, 95.0f) <= 1.0f)
        return K_LIVER;
    if (ell3(u + 95.0f, v + 35.0f, w - 240.0f, 28.0f, 40.0f, 45.0f) <= 1.0f)
        return K_SPLEEN;
    /* Stomach: gas rises to the front of a supine patient. */
    if (ell3(u + 45.0f, v - 35.0f, w - 235.0f, 45.0f, 40.0f, 45.0f) <= 1.0f)
        return v > 57.0f ? K_GAS : K_BOWEL;
    return K_NKIND;
}

/* Contents of the cavity inside the muscle wall. */
static ph_kind cavity_at(float u, float v, float w)
{
    if (vessel_at(u, v, w))
        return K_BLOOD;
    ph_kind k = organ_at(u, v, w);
    if (k != K_NKIND)
        return k;
    int c = colon_at(u, v, w);
    if (c)
        return c == 2 ? K_GAS : K_BOWEL;
    /* Psoas muscles beside the spine, thickening downward. */
    if (w < 170.0f) {
        float r = 8.0f + 17.0f * (170.0f - w) / 170.0f;
        if (ell2(u - 42.0f, v + 50.0f, r, r) <= 1.0f || ell2(u + 42.0f, v + 50.0f, r, r) <= 1.0f)
            return K_MUSCLE;
    }
    /* Back muscles behind the transverse processes. */
    if (v < -72.0f)
        return K_MUSCLE;
    /* Small bowel loops, mesenteric fat between them, a little gas in them. */
    float f = value_noise(u, v, w, 16.0f, 0x5eed0001u);
    if (f < 0.36f)
        return K_VFAT;
    float g = value_noise(u, v, w, 9.0f, 0x5eed0002u);
    return (f > 0.55f && g > 0.82f) ? K_GAS : K_BOWEL;
}

/* What is at patient mm (u, v, w), noiseless. */
static ph_kind phantom_at(float u, float v, float w)
{
    if (!inside_depth(u, v, w, 0.0f))
        return K_AIR;
    if (!inside_depth(u, v, w, PH_SKIN))
        return K_SKIN;
    ph_kind k;
    if (w >= 85.0f ? spine_at(u, v, w, &k) : sacrum_at(u, v, w) ? (k = K_SACRUM, 1) : 0)
        return k;
    if (!inside_depth(u, v, w, PH_SKIN + PH_FAT))
        return K_FAT;
    int pelvis = pelvis_at(u, v, w);
    if (pelvis == 1)
        return K_PELVIS;
    if (rib_at(u, v, w))
        return K_RIB;
    if (!inside_depth(u, v, w, PH_SKIN + PH_FAT + PH_WALL) || pelvis == 2)
        return K_MUSCLE;
    return cavity_at(u, v, w);
}

/* ------------------------------------------------------------------ public */

sim_status sim_volume_phantom_ex(sim_volume *out, uint8_t *labels, int nx, int ny, int nz,
                                 const sim_phantom_opts *opt, char *err, size_t err_sz)
{
    if (out)
        memset(out, 0, sizeof *out);
    if (!out && !labels)
        return sc_fail(err, err_sz, SIM_ERR_ARG, "phantom: out and labels are both NULL");
    if (nx < 8 || ny < 8 || nz < 8)
        return sc_fail(err, err_sz, SIM_ERR_ARG, "phantom: dims %dx%dx%d: every axis must be >= 8",
                       nx, ny, nz);
    sim_volume_limits lim = sim_default_volume_limits();
    size_t n = (size_t)nx * (size_t)ny * (size_t)nz;
    if (nx > lim.max_dim || ny > lim.max_dim || nz > lim.max_dim || n > lim.max_elements)
        return sc_fail(err, err_sz, SIM_ERR_LIMIT,
                       "phantom: dims %dx%dx%d: over the limits (%d per axis, %zu elements)", nx,
                       ny, nz, lim.max_dim, lim.max_elements);
    sim_phantom_opts o = opt ? *opt : sim_default_phantom_opts();
    if (!isfinite(o.vessel_hu) || o.vessel_hu < -1024.0f || o.vessel_hu > 3071.0f)
        return sc_fail(err, err_sz, SIM_ERR_ARG, "phantom: vessel_hu %g: must be -1024..3071",
                       (double)o.vessel_hu);
    float *hu = NULL;
    if (out && !(hu = (float *)sc_calloc(n, sizeof *hu)))
        return sc_fail(err, err_sz, SIM_ERR_NOMEM, "phantom: out of memory for %zu elements", n);
    float sx = PH_FOV_X / (float)nx, sy = PH_FOV_Y / (float)ny, sz = PH_FOV_Z / (float)nz;
    size_t i = 0;
    for (int z = 0; z < nz; z++) {
        float w = ((float)z + 0.5f) * sz;
        for (int y = 0; y < ny; y++) {
            float v = ((float)y + 0.5f) * sy - 0.5f * PH_FOV_Y;
            for (int x = 0; x < nx; x++, i++) {
                float u = ((float)x + 0.5f) * sx - 0.5f * PH_FOV_X;
                ph_kind k = phantom_at(u, v, w);
                if (labels)
                    labels[i] = k_kind[k].label;
                if (!hu)
                    continue;
                float noise =
                    (unit_from_hash(hash3(x, y, z, 0x7a11c0deu)) * 2.0f - 1.0f) * PH_NOISE_HU;
                hu[i] = (k == K_BLOOD ? o.vessel_hu : k_kind[k].hu) + noise;
            }
        }
    }
    if (out) {
        out->nx = nx;
        out->ny = ny;
        out->nz = nz;
        out->spacing_mm[0] = sx;
        out->spacing_mm[1] = sy;
        out->spacing_mm[2] = sz;
        out->hu = hu;
    }
    return SIM_OK;
}

sim_status sim_volume_phantom(sim_volume *out, int nx, int ny, int nz, char *err, size_t err_sz)
{
    if (!out)
        return sc_fail(err, err_sz, SIM_ERR_ARG, "phantom: out is NULL");
    return sim_volume_phantom_ex(out, NULL, nx, ny, nz, NULL, err, err_sz);
}

sim_status sim_volume_phantom_labels(uint8_t *labels, int nx, int ny, int nz, char *err,
                                     size_t err_sz)
{
    if (!labels)
        return sc_fail(err, err_sz, SIM_ERR_ARG, "phantom: labels is NULL");
    return sim_volume_phantom_ex(NULL, labels, nx, ny, nz, NULL, err, err_sz);
}
