/* sim.h: the whole public surface of the Softcast simulation library.
 *
 * A scene is an immutable model (built once, shared read-only by every session
 * that uses it) plus a mutable state per session. Events are queued on a state
 * and applied at the next frame boundary by sim_volume_step(). A step is
 * deterministic for a given backend and thread count.
 *
 * Threads: a model may be read by any number of threads at once. A state and
 * its backend belong to one thread at a time (the caller serialises).
 *
 * Units: volume positions inside the library are in lattice units (element
 * (x,y,z) rests at (x,y,z)); world millimetres are lattice * spacing_mm.
 */
#ifndef SIM_SIM_H
#define SIM_SIM_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------- status */

typedef enum sim_status {
    SIM_OK = 0,
    SIM_ERR_ARG,     ///< an argument or parameter is out of range
    SIM_ERR_IO,      ///< a file could not be opened or read
    SIM_ERR_FORMAT,  ///< a file is corrupt, truncated or of an unsupported kind
    SIM_ERR_LIMIT,   ///< a configured limit was exceeded (elements, queue)
    SIM_ERR_NOMEM,   ///< an allocation failed
    SIM_ERR_BACKEND, ///< the backend failed (CUDA error, no device)
} sim_status;

/// Short constant name of a status ("ok", "bad argument", ...).
const char *sim_status_str(sim_status s);

/* --------------------------------------------------------------- backend */

typedef enum sim_backend_kind {
    SIM_BACKEND_AUTO = 0, ///< CUDA when a device answers, CPU otherwise
    SIM_BACKEND_CPU,
    SIM_BACKEND_CUDA,
} sim_backend_kind;

typedef struct sim_backend sim_backend;

/// Create a backend. threads: CPU worker threads (0 = all cores). Owned by caller.
sim_status sim_backend_create(sim_backend **out, sim_backend_kind kind, int threads, char *err,
                              size_t err_sz);
void sim_backend_destroy(sim_backend *b);
/// "cpu" or "cuda".
const char *sim_backend_name(const sim_backend *b);
/// Threads the CPU backend uses (1 for CUDA).
int sim_backend_threads(const sim_backend *b);
/// 1 when this build contains the CUDA backend and a device answers.
int sim_cuda_available(void);
/// Parse "auto" / "cpu" / "cuda"; returns -1 for anything else.
int sim_backend_kind_parse(const char *s);

/* ---------------------------------------------------------------- volume */

/// A CT volume in Hounsfield units, x fastest: hu[x + nx*(y + ny*z)].
typedef struct sim_volume {
    int nx, ny, nz;
    float spacing_mm[3]; ///< element spacing along x, y, z
    float *hu;           ///< (nz x ny x nx), owned
} sim_volume;

typedef struct sim_volume_limits {
    size_t max_elements; ///< refuse volumes with more elements than this
    int max_dim;         ///< refuse any axis longer than this
} sim_volume_limits;

/// Defaults: 128M elements (a 512x512x300 CT is 79M), 4096 per axis.
sim_volume_limits sim_default_volume_limits(void);

/// The embedded default: a procedural abdominal phantom in HU (air, skin and fat
/// shell, muscle and organs, spine and ribs) of any size (each axis >= 8).
sim_status sim_volume_phantom(sim_volume *out, int nx, int ny, int nz, char *err, size_t err_sz);
/// Load NIfTI-1 (.nii or .nii.gz), applying scl_slope/scl_inter and pixdim.
sim_status sim_volume_load_nifti(sim_volume *out, const char *path, const sim_volume_limits *lim,
                                 char *err, size_t err_sz);
/// Load raw little-endian int16 HU with the given dims and spacing.
sim_status sim_volume_load_raw_i16(sim_volume *out, const char *path, int nx, int ny, int nz,
                                   const float spacing_mm[3], const sim_volume_limits *lim,
                                   char *err, size_t err_sz);
/// Block-average by an integer factor per axis (trailing partial blocks are averaged
/// over what they hold); spacing grows by the factor.
sim_status sim_volume_downsample(sim_volume *out, const sim_volume *in, int fx, int fy, int fz,
                                 char *err, size_t err_sz);
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

/// Per tissue class. Lengths are in lattice units (rest link length 1).
typedef struct sim_tissue_params {
    float min_len;  ///< along-link minimum (compression limit), <= 1
    float max_len;  ///< along-link maximum (stretch limit), >= 1
    float shear;    ///< across-link limit, >= 0
    float speed;    ///< propagation speed, links per wave pass, (0, 1]
    float inv_mass; ///< normalised inverse mass in [0, 1]; 0 = rigid, never gets a velocity
    float b1;       ///< condition C: damping growth per lattice unit of displacement, [0, 1]
} sim_tissue_params;

/// Everything a session can change while it runs.
typedef struct sim_volume_params {
    /// Class edges in HU: air < t[0] <= skin_fat < t[1] <= muscle_organ < t[2] <= bone.
    float hu_threshold[3];
    sim_tissue_params tissue[SIM_NTISSUE];
    sim_condition condition;
    float alpha;           ///< condition B: velocity kept per frame, [0, 1]
    float b0;              ///< condition C: base damping, [0, 1]
    float inertia_gain;    ///< k in X += k V, [0, 1]
    float v_max;           ///< velocity clamp, lattice units per frame
    float dead_zone;       ///< |dX| and |V| below this count as 0, lattice units
    float boundary_margin; ///< positions stay within the lattice box grown by this
    int relax_iterations;  ///< Jacobi relaxation iterations per frame, >= 0
    float relax_step;      ///< fraction of the way to the relaxation target, (0, 1]
    float relax_threshold; ///< relaxation ignores this much of a correction (soft threshold)
    /// Elastic memory: weight of an element's rest position in its relaxation target, in
    /// neighbours of its own tissue. 0 is pure ChainMail (a released dent stays, plastic).
    float home_weight;
    int max_passes; ///< cap on propagation wave passes per frame (the rest is left to relaxation)
} sim_volume_params;

/// Defaults (documented in sim/volume/README.md). Real CT air (-1000 HU with noise) is air.
sim_volume_params sim_default_volume_params(void);
/// Check ranges and finiteness; names the first bad field in err.
sim_status sim_volume_params_validate(const sim_volume_params *p, char *err, size_t err_sz);

typedef struct sim_volume_model_options {
    float skin_iso_hu; ///< iso level of the skin surface
    float bone_iso_hu; ///< iso level of the bone surface
} sim_volume_model_options;

sim_volume_model_options sim_default_volume_model_options(void);

typedef struct sim_volume_model sim_volume_model;

/// Build the immutable model: copies the volume, extracts the surfaces.
sim_status sim_volume_model_create(sim_volume_model **out, const sim_volume *vol,
                                   const sim_volume_model_options *opt, char *err, size_t err_sz);
void sim_volume_model_destroy(sim_volume_model *m);
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
    int propagation_capped; ///< 1 when the wave stopped at max_passes, not at rest
    int passes;             ///< propagation passes run this frame
    int64_t moved_elements; ///< distinct elements moved by propagation this frame
    float max_violation;    ///< largest band violation on the links propagation reached (before
                            ///< relaxation; sim_volume_max_violation measures the whole state)
    double kinetic;         ///< sum of |V|^2
    float max_displacement; ///< largest |X - X0|, lattice units
    float mean_speed[SIM_NTISSUE]; ///< mean |V| per tissue class
    int64_t active_blocks;         ///< 8^3 blocks relaxed this frame (summed over iterations)
    int64_t nonfinite;     ///< elements found NaN or infinite this frame (then the state resets)
    uint32_t guard_resets; ///< times the state was reset by that guard since create
    double propagate_ms, relax_ms, velocity_ms, total_ms;
} sim_volume_metrics;

typedef struct sim_volume_state sim_volume_state;

/// A state at rest with default parameters. The model must outlive the state.
sim_status sim_volume_state_create(sim_volume_state **out, const sim_volume_model *m,
                                   sim_backend *b, char *err, size_t err_sz);
void sim_volume_state_destroy(sim_volume_state *s);

/// Queue an event for the next step. Fails with SIM_ERR_ARG (bad field, named in
/// err) or SIM_ERR_LIMIT (queue full); the state is unchanged on failure.
sim_status sim_volume_push_event(sim_volume_state *s, const sim_volume_event *ev, char *err,
                                 size_t err_sz);
/// Apply queued events, then advance one frame. metrics may be NULL.
sim_status sim_volume_step(sim_volume_state *s, sim_volume_metrics *metrics, char *err,
                           size_t err_sz);

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
/// 64-bit hash of positions and velocities (bitwise), for determinism checks.
uint64_t sim_volume_state_hash(sim_volume_state *s);
/// Largest band violation over every link of the volume (O(elements)); for tests.
float sim_volume_max_violation(sim_volume_state *s);

/// Surface vertex positions in world mm, (nvert x 3), into out.
sim_status sim_volume_surface_positions(sim_volume_state *s, sim_surface_kind kind, float *out);

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

/* ================================================================ cloth scene
 * XPBD cloth on kinematic characters, with levels of detail that hand position and
 * velocity over when they switch (see sim/README.md). Metres, seconds, z up. One scene
 * holds a crowd: every character wears the same garment at its own LOD. */

#define SIM_CLOTH_NLOD 3

typedef enum sim_motion {
    SIM_MOTION_IDLE = 0,
    SIM_MOTION_WALK, ///< 1.4 m/s forward with root motion
    SIM_MOTION_RUN,  ///< 3.5 m/s
    SIM_MOTION_TURN, ///< walking, then a sharp turn (pi/2 in 0.4 s), repeated every 2 s
    SIM_MOTION_JUMP, ///< jumps in place, 0.45 m high, landing every 1.2 s
    SIM_NMOTION
} sim_motion;
/// "idle", "walk", "run", "turn", "jump"; sim_motion_parse returns -1 for anything else.
const char *sim_motion_name(int m);
int sim_motion_parse(const char *s);

/// How a LOD switch starts the target LOD (handoff is the method; the others are the
/// baselines it is measured against).
typedef enum sim_switch_strategy {
    SIM_SWITCH_HANDOFF = 0,         ///< map position and velocity in the root frame
    SIM_SWITCH_NAIVE_ZERO_VELOCITY, ///< map positions, velocity zero
    SIM_SWITCH_RESET_TO_ANIMATION,  ///< the rest pose carried by the character
    SIM_SWITCH_NAIVE_COPY,          ///< copy position and velocity through the table in world
                                    ///< space, nothing more (the usual game-engine switch)
} sim_switch_strategy;
const char *sim_switch_strategy_name(int s);

typedef struct sim_cloth_model_options {
    int cols[SIM_CLOTH_NLOD], rows[SIM_CLOTH_NLOD]; ///< particles across and down per LOD
    int nlod;                                       ///< 1 to SIM_CLOTH_NLOD
    float width, length;                            ///< the garment's rest size, m
    int body; ///< 1: a cape on a character (pinned at the shoulders, colliders);
              ///< 0: a sheet hanging from its two top corners, nothing to hit
} sim_cloth_model_options;

/// The default: a cape 0.6 x 1.05 m, LODs 20x34, 12x18 and 6x9 particles, each
/// triangulated differently.
sim_cloth_model_options sim_cloth_default_model_options(void);

typedef struct sim_cloth_model sim_cloth_model;
/// Build the LOD meshes, their constraints and colouring, and the mapping tables
/// between every pair of LODs. Immutable; may be shared by scenes.
sim_status sim_cloth_model_create(sim_cloth_model **out, const sim_cloth_model_options *o,
                                  char *err, size_t err_sz);
void sim_cloth_model_destroy(sim_cloth_model *m);
int sim_cloth_model_nlod(const sim_cloth_model *m);
/// Particles and triangles (3 indices each, counter-clockwise seen from behind the
/// character) of one LOD.
int sim_cloth_model_lod_size(const sim_cloth_model *m, int lod, int *ntri);
const uint32_t *sim_cloth_model_triangles(const sim_cloth_model *m, int lod);
/// Inverse mass of each particle of a LOD (0: pinned to the character); NULL if no such LOD.
const float *sim_cloth_model_inv_mass(const sim_cloth_model *m, int lod);
/// Constraints of a LOD: stretch (one per edge) and bending (one per interior edge);
/// returns their sum (0 if no such LOD).
int sim_cloth_model_constraints(const sim_cloth_model *m, int lod, int *nstretch, int *nbend);
/// Compliance scale of a LOD (its mean edge length over LOD 0's; 1 for LOD 0).
float sim_cloth_model_compliance_scale(const sim_cloth_model *m, int lod);
/// Carry a garment's state at LOD `from` (x, v: world m and m/s, from's size x 3) to the
/// vertices of LOD `to` through the model's table, in world space: each target vertex at
/// the weighted source triangle point plus its offset along that triangle's current
/// normal, with the weighted velocity (v and v_out may be NULL). valid (to's size, may be
/// NULL): 1 where the table's distance is within max_dist_m. Returns the number of
/// valid vertices, or -1 when from or to is not a LOD of the model or they are equal.
int sim_cloth_model_map_world(const sim_cloth_model *m, int from, int to, const float *x,
                              const float *v, float max_dist_m, float *x_out, float *v_out,
                              unsigned char *valid);

typedef struct sim_cloth_params {
    int substeps;                        ///< per frame, 1 to 64
    int iterations;                      ///< constraint iterations per substep, 1 to 16
    float dt;                            ///< frame time, s
    float stretch_compliance;            ///< m/N, >= 0
    float bend_compliance;               ///< m/N, >= 0
    float damping;                       ///< velocity lost per second, [0, 10]
    float gravity;                       ///< m/s^2, along -z
    float wind[3];                       ///< steady wind acceleration on the cloth, m/s^2
    float thickness;                     ///< contact offset, m
    float friction;                      ///< [0, 1]
    float lod_enter[SIM_CLOTH_NLOD - 1]; ///< camera distance to go coarser than LOD i, m
    float lod_exit[SIM_CLOTH_NLOD - 1];  ///< ... to come back finer (< enter: hysteresis)
    int lod_hold_frames;  ///< at least this many frames between switches of a character
    int lod_switch_every; ///< automatic switches only on frames that are multiples of this
                          ///< (1: any frame; more: a crowd's switches share keyframes)
    int blend_pos_frames; ///< position blend after a switch, 0 to 8 frames (0: none)
    int blend_vel_frames; ///< velocity blend, >= the position blend; 0: no blend at all
                          ///< (the source LOD stops at the switch)
    float v_abnormal; ///< a mapped velocity faster than this relative to the body is clamped, m/s
    float map_max_distance; ///< a mapping farther than this is invalid, m
    sim_switch_strategy strategy;
} sim_cloth_params;
sim_cloth_params sim_cloth_default_params(void);

typedef enum sim_cloth_event_type {
    SIM_CLOTH_EV_CAMERA = 0, ///< point = camera position
    SIM_CLOTH_EV_FORCE_LOD,  ///< character (-1: all) to lod (-1: back to automatic)
    SIM_CLOTH_EV_MOTION,     ///< character (-1: all) plays motion
    SIM_CLOTH_EV_WIND,       ///< point = velocity impulse on every cloth particle, m/s
    SIM_CLOTH_EV_GRAB,       ///< character's vertex (of its current LOD) held at point
    SIM_CLOTH_EV_MOVE,       ///< the held vertex to point
    SIM_CLOTH_EV_RELEASE,
    SIM_CLOTH_EV_SET_PARAMS, ///< params
} sim_cloth_event_type;

typedef struct sim_cloth_event {
    sim_cloth_event_type type;
    int character, lod, vertex;
    sim_motion motion;
    float point[3];
    sim_cloth_params params;
} sim_cloth_event;

/// One LOD switch of one character. E_pos / E_vel: the largest change of position /
/// velocity over the garment at the switch, each target vertex against the source
/// surface point it maps to (interpolated in world space, independently of the root-frame
/// path the handoff takes); m and m/s. The _next pair: the same one frame later, the
/// shown garment against the source, which keeps running beside it while they blend
/// (-1 with the blend off: no source runs). These are not judged against ground truth;
/// tests/scenes/cloth_scenes.h does that (a second run without the switch).
typedef struct sim_cloth_switch {
    uint64_t frame;
    int character, from, to;
    sim_switch_strategy strategy;
    float e_pos, e_vel;
    float e_pos_next, e_vel_next;
    int settle_frames;     ///< frames until the garment's acceleration is back to its
                           ///< level before the switch (-1: still settling)
    float max_penetration; ///< deepest body or ground penetration while settling, m
    int invalid_mappings;  ///< target vertices that took the animated position
} sim_cloth_switch;

typedef struct sim_cloth_metrics {
    double step_ms;
    int particles;         ///< simulated this frame (all characters, blends included)
    int switches;          ///< LOD switches this frame
    float max_penetration; ///< deepest penetration after the frame's solve, m
    int nonfinite;         ///< particles with a NaN or infinite position (reset)
    int lod_count[SIM_CLOTH_NLOD];
} sim_cloth_metrics;

typedef struct sim_cloth_scene sim_cloth_scene;
/// ncharacters in a grid 2.5 m apart, all idle, camera 4 m in front of the first.
sim_status sim_cloth_scene_create(sim_cloth_scene **out, const sim_cloth_model *m, sim_backend *b,
                                  int ncharacters, char *err, size_t err_sz);
void sim_cloth_scene_destroy(sim_cloth_scene *s);
sim_cloth_params sim_cloth_get_params(const sim_cloth_scene *s);
/// CPU threads for the next steps, at most the backend's (0: the backend's). Results do
/// not depend on it.
void sim_cloth_set_threads(sim_cloth_scene *s, int threads);
/// Check an event; queue it for the next frame boundary.
sim_status sim_cloth_push_event(sim_cloth_scene *s, const sim_cloth_event *ev, char *err,
                                size_t err_sz);
sim_status sim_cloth_step(sim_cloth_scene *s, sim_cloth_metrics *mt, char *err, size_t err_sz);
int sim_cloth_characters(const sim_cloth_scene *s);
int sim_cloth_lod(const sim_cloth_scene *s, int character);
/// The character's garment particles (world m, its current LOD) and velocities.
const float *sim_cloth_positions(const sim_cloth_scene *s, int character, int *n);
const float *sim_cloth_velocities(const sim_cloth_scene *s, int character, int *n);
/// Root position (feet, world m) and heading (radians about z).
void sim_cloth_root(const sim_cloth_scene *s, int character, float pos[3], float *yaw);
/// The character's body as capsules (a[3], b[3], radius; world m) into caps[max][7];
/// returns how many (0 for a sheet without a body).
int sim_cloth_body(const sim_cloth_scene *s, int character, float caps[][7], int max);
/// The character's latest switch; 0 when it never switched.
int sim_cloth_last_switch(const sim_cloth_scene *s, int character, sim_cloth_switch *out);
/// Bitwise hash of every garment's positions and velocities.
uint64_t sim_cloth_hash(const sim_cloth_scene *s);

#ifdef __cplusplus
}
#endif
#endif
