/* volume.h: the volume scene's public surface: CT volumes deformed by HP-ChainMail with
 * an independent velocity layer (sim/README.md, ../shared/CHAINMAIL.md).
 *
 * Units: positions inside the library are in lattice units (element (x,y,z) rests at
 * (x,y,z)); world millimetres are lattice * spacing_mm. */
#ifndef SIM_VOLUME_VOLUME_H
#define SIM_VOLUME_VOLUME_H

#include "../sim.h"
#include "../core/sc_blob.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------- volume */

/// A CT volume in Hounsfield units, x fastest: hu[x + nx*(y + ny*z)].
typedef struct sim_volume {
    int nx, ny, nz;
    float spacing_mm[3]; ///< element spacing along x, y, z
    float *hu;           ///< (nz x ny x nx), owned
    /// Where a loaded file's i, j, k axes pointed in the patient ("LPS": i toward the left,
    /// j posterior, k superior), before the loader turned the lattice to RAS (x toward the
    /// patient's right, y anterior, z superior); "" when the file said nothing (kept as
    /// stored) or the volume was not loaded from a file.
    char orientation[4];
    float oblique_deg; ///< how far the file's axes were off the nearest patient axes
} sim_volume;

typedef struct sim_volume_limits {
    size_t max_elements; ///< refuse volumes with more elements than this
    int max_dim;         ///< refuse any axis longer than this
} sim_volume_limits;

/// Defaults: 128M elements (a 512x512x300 CT is 79M), 4096 per axis.
sim_volume_limits sim_default_volume_limits(void);

/// The phantom's labels (sim_volume_phantom_labels; the table in sim/README.md).
typedef enum sim_phantom_label {
    SIM_LABEL_AIR = 0,   ///< outside the body
    SIM_LABEL_SKIN_FAT,  ///< skin, subcutaneous, mesenteric and perirenal fat
    SIM_LABEL_MUSCLE,    ///< the abdominal wall, psoas, back, iliacus and gluteal muscles
    SIM_LABEL_LIVER,     ///< patient's right, upper abdomen
    SIM_LABEL_KIDNEY,    ///< both, posterior, beside the spine
    SIM_LABEL_SPLEEN,    ///< patient's left, upper, posterior
    SIM_LABEL_BOWEL,     ///< stomach, colon and small bowel: wall and contents
    SIM_LABEL_BOWEL_GAS, ///< gas in the stomach and bowel (-1000 HU)
    SIM_LABEL_BONE,      ///< vertebrae, sacrum, ribs, iliac wings
    SIM_LABEL_DISC,      ///< intervertebral discs
    SIM_LABEL_VESSEL,    ///< aorta, vena cava, iliac vessels
    SIM_LABEL_CORD,      ///< spinal canal
    SIM_NLABEL
} sim_phantom_label;

/// "air", "skin_fat", "muscle", "liver", ... ("unknown" out of range).
const char *sim_phantom_label_name(int label);

/// Phantom options (sim_default_phantom_opts: blood at 45 HU).
typedef struct sim_phantom_opts {
    float vessel_hu; ///< HU of the vessels' contents: 45 (blood), 200-500 (contrast, arterial)
} sim_phantom_opts;

sim_phantom_opts sim_default_phantom_opts(void);

/// The embedded default: a procedural abdominal phantom in HU of any size (each axis >= 8),
/// on the RAS lattice, its field of view 400 x 400 x 300 mm: a tapering torso (skin, fat,
/// muscle), liver, kidneys, spleen, stomach and bowel with gas, spine, ribs, pelvis.
sim_status sim_volume_phantom(sim_volume *out, int nx, int ny, int nz, char *err, size_t err_sz);
/// The phantom's label map alone: labels (nx*ny*nz, caller's) gets a sim_phantom_label each.
sim_status sim_volume_phantom_labels(uint8_t *labels, int nx, int ny, int nz, char *err,
                                     size_t err_sz);
/// Both at once, with options (opt NULL: defaults); out or labels may be NULL (not both).
sim_status sim_volume_phantom_ex(sim_volume *out, uint8_t *labels, int nx, int ny, int nz,
                                 const sim_phantom_opts *opt, char *err, size_t err_sz);
/// Write a volume as NIfTI-1 (.nii, or .nii.gz when built with the NIfTI library): int16 HU
/// (scl_slope 1 and scl_inter 0 when the rounded values fit, else a linear scale), pixdim
/// from spacing_mm, an RAS qform and sform (code 1) centred on the volume.
sim_status sim_volume_save_nifti(const sim_volume *v, const char *path, char *err, size_t err_sz);
/// Write a uint8 label map (nx*ny*nz, x fastest) as NIfTI-1 the same way (no scaling).
sim_status sim_labels_save_nifti(const uint8_t *labels, int nx, int ny, int nz,
                                 const float spacing_mm[3], const char *path, char *err,
                                 size_t err_sz);
/// Load NIfTI-1 (.nii or .nii.gz), applying scl_slope/scl_inter and pixdim, and turned to
/// the RAS lattice by the file's sform (its qform when the sform's code is 0): axes
/// permuted and flipped exactly, an oblique affine to its nearest axes (out->oblique_deg
/// says how far). A file with neither keeps its stored order (out->orientation "").
sim_status sim_volume_load_nifti(sim_volume *out, const char *path, const sim_volume_limits *lim,
                                 char *err, size_t err_sz);
/// Read and check a NIfTI file's header against lim, allocating nothing big (dims: as
/// stored). partial: the file is still arriving, so the bytes its header needs are not
/// checked against the disk. sim_volume_load_file's header-only modes come here.
sim_status sim_volume_check_nifti(const char *path, const sim_volume_limits *lim, int partial,
                                  int dims[3], char *err, size_t err_sz);
/// Load raw little-endian int16 HU with the given dims and spacing.
sim_status sim_volume_load_raw_i16(sim_volume *out, const char *path, int nx, int ny, int nz,
                                   const float spacing_mm[3], const sim_volume_limits *lim,
                                   char *err, size_t err_sz);
/// Block-average by an integer factor per axis (trailing partial blocks are averaged
/// over what they hold); spacing grows by the factor.
sim_status sim_volume_downsample(sim_volume *out, const sim_volume *in, int fx, int fy, int fz,
                                 char *err, size_t err_sz);
/// Fit a volume to a budget of elements: block-average it in place by the smallest factor
/// f (the same on every axis) that brings it to max_elements or under (*factor = f; 1 when it
/// already fits, left as it is).
sim_status sim_volume_fit(sim_volume *v, size_t max_elements, int *factor, char *err,
                          size_t err_sz);
/// How sim_volume_load_file makes a user's file ready (sim_default_volume_load_opts).
typedef struct sim_volume_load_opts {
    sim_volume_limits limits; ///< for the file as stored (zeroed: the defaults)
    /// Block-average a volume over this many elements (with its air margin) by the smallest
    /// factor that fits; 0: no fit (limits alone decide). Default 4M (a 512x512x300 CT fits
    /// by 3, to 171x171x100).
    size_t fit_elements;
    /// Air elements added on each face that tissue touches (cropped scans), so a pull near
    /// the edge has room: default 8.
    int air_margin;
    float body_hu; ///< tissue from here up (default -400, the air threshold)
    /// 1: keep every connected piece of tissue; 0 (default): keep only the largest (the
    /// body), and make the couch, its pad and the noise around it air.
    int keep_all;
    /// SIM_LOAD_ALL (0): load. SIM_LOAD_HEADER: read and check only what the file's header
    /// says (its kind, dims, type, the limits, the bytes it needs), allocate nothing big,
    /// leave out empty (info: format, name, stored_dims). SIM_LOAD_HEADER_PARTIAL: the same
    /// on a file still arriving (an upload's first bytes): what needs the whole file waits.
    int header_only;
    /// Called as each stage starts ("reading", "fitting", "body"), on the caller's thread
    /// (the server shows a loading session's stage); NULL: none.
    void (*progress)(void *ctx, const char *stage);
    void *progress_ctx;
    /// DICOM: the SeriesInstanceUID to read from a folder of several (NULL or "": the one
    /// with the most slices; a single file given: its own series).
    const char *series_uid;
    /// .zip: most bytes its entries may hold uncompressed, all together (0: 4 GiB).
    uint64_t zip_max_bytes;
    /// 1: one DICOM file is read alone (its frames, or its one slice), not as a slice of the
    /// series in the folder it sits in: a user's upload sits among other users' files.
    /// 0 (default): its folder's series.
    int dicom_file_alone;
} sim_volume_load_opts;

enum { SIM_LOAD_ALL = 0, SIM_LOAD_HEADER = 1, SIM_LOAD_HEADER_PARTIAL = 2 };

sim_volume_load_opts sim_default_volume_load_opts(void);

/// What sim_volume_load_file found and did, for the user (no patient identifiers).
typedef struct sim_volume_info {
    char format[8];           ///< "nifti" or "dicom"
    char name[128];           ///< the file's base name
    int stored_dims[3];       ///< as stored, before the fit and the margin
    int fit_factor;           ///< block-average factor (1: none)
    int margin[6];            ///< air elements added at -x, +x, -y, +y, -z, +z
    int64_t removed_elements; ///< tissue-valued elements outside the body made air
    float hu_min, hu_max;     ///< of the file's values
    char warning[256];        ///< "" or why the values look wrong (not refused)
    /* DICOM (format "dicom"): what was read; nothing that identifies the patient. */
    char series_uid[65]; ///< SeriesInstanceUID of the series read
    char modality[17];   ///< its Modality ("CT")
    int series_count;    ///< image series found in the folder
    int slice_count;     ///< slices (files) of the series read
    int skipped_files;   ///< files not read: not DICOM, no image, or another series
    /// How the series was found: "a folder", "a .zip (N entries)", "the folder of FILE".
    char source[160];
} sim_volume_info;

/// Load a user's volume by its kind (.nii, .nii.gz; a DICOM folder, a .zip of one, or one
/// DICOM file, .dcm or the DICM magic, read as its folder's series), turned to the RAS
/// lattice, fitted to opts->fit_elements, the body kept (largest connected tissue), an air
/// margin added where tissue touches the edge, and its HU range checked (info->warning).
/// opts NULL: defaults.
sim_status sim_volume_load_file(sim_volume *out, const char *path, const sim_volume_load_opts *opts,
                                sim_volume_info *info, char *err, size_t err_sz);
/// Load a DICOM series from a folder (searched recursively, bounded) holding one series or
/// several: series_uid picks one (NULL or "": the one with the most slices), slices sorted
/// along their normal, rescale slope and intercept applied, spacing from PixelSpacing and the
/// slice positions, turned to the RAS lattice from DICOM's LPS (out->orientation "LPS" for
/// an axial series stored as usual). Refuses, by name: an empty folder, no DICOM, no image
/// data, an unknown series (listing those found), mixed sizes, gantry tilt, duplicate and
/// missing slices, uneven spacing. info (may be NULL) gets the series, its slice count and
/// how many series there were (format "dicom"). Needs a build with GDCM (SIM_HAVE_DICOM).
sim_status sim_volume_load_dicom(sim_volume *out, const char *path, const char *series_uid,
                                 const sim_volume_limits *lim, sim_volume_info *info, char *err,
                                 size_t err_sz);
/// The steps after reading, on a volume already in memory (a raw file, a test's own):
/// the HU check, the fit, the body, the margin, as sim_volume_load_file does them. info
/// must be zeroed or filled by the reader; v is left valid (free it) on failure.
sim_status sim_volume_prepare(sim_volume *v, const sim_volume_load_opts *opts,
                              sim_volume_info *info, char *err, size_t err_sz);
/// Keep the box box[0..2] (inclusive) to box[3..5] (exclusive) of the lattice: a cropped
/// scan made from a whole one.
sim_status sim_volume_crop(sim_volume *v, const int box[6], char *err, size_t err_sz);
/// Keep the largest 6-connected piece of elements >= body_hu; every other such element
/// becomes air (*removed counts them).
sim_status sim_volume_keep_body(sim_volume *v, float body_hu, int64_t *removed, char *err,
                                size_t err_sz);
/// Add `margin` elements of air (-1000 HU) outside each face that holds an element >=
/// body_hu; added[6] (may be NULL) says which faces grew.
sim_status sim_volume_pad_air(sim_volume *v, int margin, float body_hu, int added[6], char *err,
                              size_t err_sz);
/// Check dims, spacing and values (finite) against limits.
sim_status sim_volume_validate(const sim_volume *v, const sim_volume_limits *lim, const char *name,
                               char *err, size_t err_sz);
void sim_volume_free(sim_volume *v);

/* ---------------------------------------------------------- volume model */

typedef enum sim_tissue {
    SIM_TISSUE_AIR = 0,
    SIM_TISSUE_SKIN_FAT,
    SIM_TISSUE_MUSCLE_ORGAN,
    SIM_TISSUE_BONE,
    SIM_NTISSUE
} sim_tissue;

/// "air", "skin_fat", "muscle_organ", "bone".
const char *sim_tissue_name(int tissue);

typedef enum sim_condition {
    SIM_CONDITION_A = 0, ///< ChainMail only: no velocity
    SIM_CONDITION_B,     ///< linear damping: V = alpha V + s dX
    SIM_CONDITION_C,     ///< viscoelastic implicit: V = (V + s dX) / (1 + b0 + b1 |X - X0|)
} sim_condition;

/* The parameters are declared once, in sim/volume/params.def; the structs below, the
 * defaults, the checks and the table clients see are generated from it. */
#define P(type, f, def, lo, hi, unit, group, doc)
#define A(type, f, i, n, def, lo, hi, unit, group, doc)
#define C(f, def, n, choices, group, doc)

/// Per tissue class. Lengths are in lattice units (rest link length 1).
typedef struct sim_tissue_params {
#define T(type, f, d0, d1, d2, d3, lo, hi, unit, doc) SIM_PARAM_FIELD(type, f)
#include "params.def"
#undef T
} sim_tissue_params;

#undef P
#undef A
#undef C
#define T(type, f, d0, d1, d2, d3, lo, hi, unit, doc)
#define P(type, f, def, lo, hi, unit, group, doc)       SIM_PARAM_FIELD(type, f)
#define A(type, f, i, n, def, lo, hi, unit, group, doc) SIM_PARAM_ARRAY_##i(type, f, n)
#define C(f, def, n, choices, group, doc)               int f;

/// Everything a session can change while it runs (condition: a sim_condition).
typedef struct sim_volume_params {
#include "params.def"
    sim_tissue_params tissue[SIM_NTISSUE];
} sim_volume_params;
#undef T
#undef P
#undef A
#undef C

/// The declared table (params.def): one entry per settable value.
const sim_param_desc *sim_volume_params_table(int *n);
/// Defaults (documented in sim/volume/README.md). Real CT air (-1000 HU with noise) is air.
sim_volume_params sim_default_volume_params(void);
/// Check ranges and finiteness (the table), and that the HU thresholds increase; names
/// the first bad field in err.
sim_status sim_volume_params_validate(const sim_volume_params *p, char *err, size_t err_sz);

/// Bone threshold of the "contrast" preset, HU: above contrast-filled vessels (200-500 HU in
/// the arterial phase), at the cost of cancellous bone (vertebral bodies) classing as soft.
#define SIM_HU_BONE_CONTRAST 700.0f

/// Set the class thresholds of a named preset: "default" (bone from 375 HU) or "contrast"
/// (bone from SIM_HU_BONE_CONTRAST); other fields unchanged. SIM_ERR_ARG names a bad name.
sim_status sim_volume_params_preset(sim_volume_params *p, const char *name, char *err,
                                    size_t err_sz);

/// A class override entry meaning "class this element by its HU, as usual".
#define SIM_CLASS_BY_HU 255

typedef struct sim_volume_model_options {
    float skin_iso_hu; ///< iso level of the skin surface
    float bone_iso_hu; ///< iso level of the bone surface
    /// (nelem) or NULL: per element a sim_tissue that it keeps whatever its HU and the
    /// thresholds, or SIM_CLASS_BY_HU; copied by sim_volume_model_create
    const uint8_t *class_override;
} sim_volume_model_options;

sim_volume_model_options sim_default_volume_model_options(void);

/// Parse a label-to-class table "LABEL=CLASS,..." (LABEL 0..255, CLASS air, skin_fat,
/// muscle_organ or bone) into table (256 entries; SIM_CLASS_BY_HU where unlisted).
sim_status sim_label_classes_parse(uint8_t table[256], const char *spec, char *err, size_t err_sz);
/// A class override from a segmentation NIfTI and its table, for the volume vol as the loader
/// made it (info, from sim_volume_load_file; NULL: vol as it is). The file is read to the RAS
/// lattice as the CT was (sim_volume_load_nifti), its voxels must be whole numbers 0..255 and
/// its dims the CT's as read (the error names both); then, as the CT was, each block of the
/// fit takes its elements' most common class and the air margin is added (by HU).
/// *out: (vol's elements) malloc'd, the caller frees it.
sim_status sim_volume_label_classes(uint8_t **out, const char *path, const char *spec,
                                    const sim_volume *vol, const sim_volume_info *info,
                                    const sim_volume_limits *lim, char *err, size_t err_sz);

typedef struct sim_volume_model sim_volume_model;

/// Build the immutable model: copies the volume, extracts the surfaces.
sim_status sim_volume_model_create(sim_volume_model **out, const sim_volume *vol,
                                   const sim_volume_model_options *opt, char *err, size_t err_sz);
void sim_volume_model_destroy(sim_volume_model *m);
/// Bytes the model holds (its HU volume, surfaces, class table): what a session that owns
/// it costs beyond its state.
size_t sim_volume_model_bytes(const sim_volume_model *m);
/// The model's volume (read-only, HU at rest).
const sim_volume *sim_volume_model_volume(const sim_volume_model *m);

typedef enum sim_surface_kind {
    SIM_SURFACE_SKIN = 0,
    SIM_SURFACE_BONE,
    SIM_NSURFACE
} sim_surface_kind;

/// An iso-surface extracted once from the rest volume. Each vertex is bound to the
/// lattice cell whose lowest corner is element `vert_cell` with fractional offsets
/// `vert_frac` in [0,1]^3 (trilinear weights), and moves with that cell.
typedef struct sim_surface {
    int nvert, ntri;
    const uint32_t *tri;       ///< (ntri x 3) vertex indices, counter-clockwise seen from outside
    const uint32_t *vert_cell; ///< (nvert) element index of the cell's lowest corner
    const float *vert_frac;    ///< (nvert x 3)
    int nrun; ///< vertex runs (one per 8^3 block holding vertices): sim_volume_surface_update
} sim_surface;

const sim_surface *sim_volume_model_surface(const sim_volume_model *m, sim_surface_kind kind);

/* ---------------------------------------------------------- volume state */

typedef enum sim_space { SIM_SPACE_LATTICE = 0, SIM_SPACE_WORLD } sim_space;

typedef enum sim_event_type {
    SIM_EV_GRAB = 0,      ///< grab tissue (not air) within radius of point
    SIM_EV_MOVE,          ///< move the grabbed set so the grab point lands on point
    SIM_EV_RELEASE,       ///< let go
    SIM_EV_SET_PARAMS,    ///< replace all parameters with params
    SIM_EV_SET_CONDITION, ///< change the damping condition only
    SIM_EV_RESET,         ///< back to rest, velocities zero, nothing grabbed
} sim_event_type;

typedef struct sim_volume_event {
    sim_event_type type;
    uint32_t seq;    ///< caller's sequence number, echoed in metrics
    sim_space space; ///< for point and radius
    float point[3];  ///< grab: where; move: the grab point's target
    float radius;    ///< grab only
    sim_condition condition;
    sim_volume_params params;
} sim_volume_event;

/// Per-frame figures. Times in milliseconds of wall clock.
typedef struct sim_volume_metrics {
    uint64_t frame;    ///< frames stepped since create (reset does not restart it)
    uint32_t last_seq; ///< seq of the last event applied
    int skipped;       ///< 1 when the volume was settled and the frame cost nothing
    int grabbed;       ///< elements currently grabbed
    /// 1 when this frame's move was cut short so that the grabbed tissue, and the tissue
    /// it pushes ahead of it, stay inside the lattice box grown by boundary_margin
    int grab_clamped;
    int propagation_capped; ///< 1 when the wave stopped at max_passes or max_wave, not at rest
    int passes;             ///< propagation passes run this frame
    int64_t moved_elements; ///< distinct elements moved by propagation this frame
    float max_violation;    ///< largest band violation on the links propagation reached (before
                            ///< relaxation; sim_volume_max_violation measures the whole state)
    double kinetic;         ///< sum of |V|^2
    float max_displacement; ///< largest |X - X0|, lattice units
    float mean_speed[SIM_NTISSUE]; ///< mean |V| per tissue class
    int64_t relax_evaluations;     ///< elements relaxation evaluated (summed over its phases)
    int64_t nonfinite;     ///< elements found NaN or infinite this frame (then the state resets)
    uint32_t guard_resets; ///< times the state was reset by that guard since create
    /// The probe: the elements of the last grab, followed after the release (the ringing
    /// is then) until the next grab or a reset; 0 before any grab.
    int probe_elements;
    float probe_rest[3]; ///< the probe's mean rest position, lattice units
    float probe_disp[3]; ///< its mean displacement from rest (X - X0) at frame end, lattice
    float probe_vel[3];  ///< its mean motion since the last frame's end, lattice units/frame
    float probe_pull[3]; ///< the offset of the grab's last move (the pull), lattice units
    double propagate_ms, relax_ms, velocity_ms, total_ms;
} sim_volume_metrics;

typedef struct sim_volume_state sim_volume_state;

/// A state at rest with default parameters. The model must outlive the state.
sim_status sim_volume_state_create(sim_volume_state **out, const sim_volume_model *m,
                                   sim_backend *b, char *err, size_t err_sz);
void sim_volume_state_destroy(sim_volume_state *s);
/// Bytes the state holds on the host (its arrays and scratch; a CUDA state as much again on
/// its device): 74 an element, 2 MB for the grab, a little per block.
size_t sim_volume_state_bytes(const sim_volume_state *s);

/// Apply an event now, at the frame boundary (between two steps): the next step runs the
/// frame it starts. Fails with SIM_ERR_ARG (bad field, named in err, the state unchanged)
/// or with what applying it met (SIM_ERR_LIMIT: a grab that selects too many elements).
sim_status sim_volume_apply_event(sim_volume_state *s, const sim_volume_event *ev, char *err,
                                  size_t err_sz);
/// Queue an event for the next step, which applies it as sim_volume_apply_event would.
/// Fails with SIM_ERR_ARG (bad field, named in err) or SIM_ERR_LIMIT (queue full); the
/// state is unchanged on failure.
sim_status sim_volume_push_event(sim_volume_state *s, const sim_volume_event *ev, char *err,
                                 size_t err_sz);
/// Apply queued events, then advance one frame. metrics may be NULL.
sim_status sim_volume_step(sim_volume_state *s, sim_volume_metrics *metrics, char *err,
                           size_t err_sz);
/// Step n states of one backend, each as sim_volume_step would (bit for bit): on CUDA the
/// frames that need the device run as one batch, each kernel launch covering every state,
/// so 64 sessions cost one frame's launches and read-backs rather than 64 frames'. metrics
/// and status (n each) may be NULL. Returns the first failure (err names its state): a
/// state's own failure (an event it was sent) leaves the others stepping; a failure of the
/// backend's batch (a CUDA error) fails every state of it. SIM_ERR_ARG, stepping nothing,
/// when the states' backends differ or a state appears twice.
sim_status sim_volume_step_many(sim_volume_state *const *states, int n, sim_volume_metrics *metrics,
                                sim_status *status, char *err, size_t err_sz);

/// CPU threads for this state's next steps, at most the backend's count (0: the backend's
/// count). Results do not depend on it. A server stepping many states at once gives each
/// a share of the cores.
void sim_volume_set_threads(sim_volume_state *s, int threads);

/// Current parameters.
sim_volume_params sim_volume_get_params(const sim_volume_state *s);
/// 1 when nothing moves: relaxation converged, all V == 0, no events queued.
int sim_volume_is_settled(const sim_volume_state *s);
/// Number of grabbed elements (after the last step applied the events).
int sim_volume_grabbed_count(const sim_volume_state *s);

/// Element positions, lattice units, (nelem x 3), valid until the next step.
const float *sim_volume_positions(sim_volume_state *s);
/// Element velocities, lattice units per frame, (nelem x 3), valid until the next step.
const float *sim_volume_velocities(sim_volume_state *s);
/// Tissue class per element (uint8), under the current thresholds.
const uint8_t *sim_volume_classes(sim_volume_state *s);
/// The state as bytes (appended to out): everything a later frame reads, so that a state
/// made on the same model and restored from them steps on exactly as this one would (same
/// backend and thread count). For session snapshots and recordings.
sim_status sim_volume_state_save(sim_volume_state *s, sc_blob *out, char *err, size_t err_sz);
/// Put back what sim_volume_state_save wrote. SIM_ERR_FORMAT, saying why, for bytes cut short
/// or damaged, of another kind or version, or of another volume's size; the state is then
/// back at its start (rest, default parameters).
sim_status sim_volume_state_restore(sim_volume_state *s, const void *data, size_t n, char *err,
                                    size_t err_sz);
/// 64-bit hash of positions and velocities (bitwise), for determinism checks.
uint64_t sim_volume_state_hash(sim_volume_state *s);
/// Largest band violation over every link of the volume (O(elements)); for tests.
float sim_volume_max_violation(sim_volume_state *s);

/// Surface vertex positions in world mm, (nvert x 3), into out.
sim_status sim_volume_surface_positions(sim_volume_state *s, sim_surface_kind kind, float *out);

/// The same positions brought up to date in out, which holds them as of *seen (a value an
/// earlier call left there for this surface and this state; 0: none, every vertex is
/// evaluated): only the vertices whose cells may have moved since are evaluated again, and
/// only they can differ from what out held. Their ranges go to ranges as (first, count)
/// pairs, ascending and disjoint (room for the surface's nrun pairs, sim_surface), their
/// number to *nranges; *seen is advanced. Bit for bit what sim_volume_surface_positions
/// gives. A settled session evaluates nothing; a local pull, the blocks it moved.
sim_status sim_volume_surface_update(sim_volume_state *s, sim_surface_kind kind, float *out,
                                     uint64_t *seen, uint32_t *ranges, uint32_t *nranges);

typedef enum sim_plane { SIM_PLANE_AXIAL = 0, SIM_PLANE_CORONAL, SIM_PLANE_SAGITTAL } sim_plane;

/// Size in pixels of a slice image of the plane: axial nx x ny, coronal nx x nz,
/// sagittal ny x nz.
void sim_volume_slice_size(const sim_volume_model *m, sim_plane plane, int *w, int *h);

/// A slice of the deformed volume: for each pixel (a rest-lattice point on the plane at
/// `index`), the HU of the tissue that now occupies it, found by inverting the
/// deformation locally. hu_out: (w x h) floats; pass NULL to skip.
/// img_out: (w x h) bytes windowed by level/width; pass NULL to skip.
sim_status sim_volume_slice(sim_volume_state *s, sim_plane plane, int index, float level_hu,
                            float width_hu, float *hu_out, uint8_t *img_out, char *err,
                            size_t err_sz);

#ifdef __cplusplus
}
#endif
#endif
