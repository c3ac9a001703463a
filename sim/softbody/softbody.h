/* softbody.h: the softbody scene's public surface: soft organs lying in a tray, in two
 * models (SOFTBODY.md):
 *   surface  particles on a closed triangle mesh; PBD distance constraints on its edges plus
 *            shape matching (the VR surgery source);
 *   hybrid   a tetrahedral mesh with a region (material) per tet, XPBD edge and volume
 *            constraints with the region's compliance, virtual springs in the tets on the
 *            boundary between regions, and a fine surface embedded by barycentric weights
 *            (the patent).
 * Metres, seconds, kilograms, z up. A model is immutable and may be shared by any number of
 * states (sessions); a state belongs to one thread at a time. Everything set on a state
 * (parameters, parent, planes, grab, pins) takes effect at its next step. */
#ifndef SIM_SOFTBODY_SOFTBODY_H
#define SIM_SOFTBODY_SOFTBODY_H

#include "../core/sc_blob.h"
#include "../sim.h"

#ifdef __cplusplus
extern "C" {
#endif

#define SIM_SOFTBODY_NREGION    4       ///< materials a hybrid model may use
#define SIM_SOFTBODY_MAX_PLANES 16      ///< contact planes a state holds, besides the floor
#define SIM_SOFTBODY_MAX_VERTS  2000000 ///< particles, tet vertices or embedded vertices
#define SIM_SOFTBODY_MAX_ELEMS  8000000 ///< triangles or tets
#define SIM_SOFTBODY_MIN_SIZE_M 1e-3f   ///< a body smaller than this across is refused
#define SIM_SOFTBODY_MAX_SIZE_M 10.0f   ///< and one larger than this

/* ================================================================ closed meshes */

/// A triangle mesh; owned arrays (sim_softbody_mesh_free).
typedef struct sim_softbody_mesh {
    int nvert, ntri;
    float *x;      ///< (nvert x 3) m
    uint32_t *tri; ///< (ntri x 3), counter-clockwise seen from outside
} sim_softbody_mesh;

/// Read a closed mesh from an OFF or OBJ file (by its extension, case-insensitive); polygons
/// are split into triangles. Refuses, naming the problem: an unreadable or truncated file,
/// counts beyond the limits, a coordinate that is not finite, an index out of range, then
/// whatever sim_softbody_mesh_check refuses.
sim_status sim_softbody_mesh_load(sim_softbody_mesh *out, const char *path, char *err,
                                  size_t err_sz);
/// The same for a mesh in any unit (a scan in mm, a model in inches): scaled uniformly so
/// that its bounding box's diagonal is size_m, centred over x = y = 0, its lowest point at
/// z = 0; size_m 0 reads it as sim_softbody_mesh_load does.
sim_status sim_softbody_mesh_load_sized(sim_softbody_mesh *out, const char *path, float size_m,
                                        char *err, size_t err_sz);
/// Translate a mesh so that its box is centred on x = y = 0 with its lowest point at z = 0.
void sim_softbody_mesh_rest_on_floor(sim_softbody_mesh *mesh);
/// The same from text in memory; format is "off" or "obj".
sim_status sim_softbody_mesh_parse(sim_softbody_mesh *out, const char *text, size_t len,
                                   const char *format, char *err, size_t err_sz);
/// A closed 2-manifold: every edge in exactly two triangles of opposite orientation, one
/// fan round every vertex, every vertex used, no degenerate triangle, finite coordinates,
/// between SIM_SOFTBODY_MIN_SIZE_M and SIM_SOFTBODY_MAX_SIZE_M across. An inward-facing mesh
/// is turned outward (mesh->tri rewritten), so the volume is positive.
sim_status sim_softbody_mesh_check(sim_softbody_mesh *mesh, char *err, size_t err_sz);
/// The default organ: a bean (a bent ellipsoid, 12 x 7 x 6 cm) with exactly n vertices
/// (12 to SIM_SOFTBODY_MAX_VERTS), resting with its lowest point at z = 0.
sim_status sim_softbody_mesh_organ(sim_softbody_mesh *out, int n, char *err, size_t err_sz);
void sim_softbody_mesh_free(sim_softbody_mesh *mesh);
/// Enclosed volume of a closed mesh at positions x (nvert x 3), m^3 (divergence theorem).
double sim_softbody_mesh_volume(const uint32_t *tri, int ntri, const float *x);

/* ================================================================ tet meshes */

/// A tetrahedral mesh for the hybrid model: the geometry side's mesher output in plain
/// arrays (the caller owns them; the model copies what it needs). tet[4t..4t+3] is
/// positively oriented (a negative one is turned, a flat one refused). embed_*: the fine
/// surface, each vertex as a tet and four barycentric weights (each in [0, 1], summing to
/// 1), with its triangles; nembed may be 0.
typedef struct sim_softbody_tets {
    int nvert, ntet;
    int nregion;     ///< materials the regions use (1 to SIM_SOFTBODY_NREGION): a tet's region
                     ///< must be below it
    float *x;        ///< (nvert x 3) rest positions, m
    int32_t *tet;    ///< (ntet x 4)
    uint8_t *region; ///< (ntet) material of each tet
    int nembed, nembed_tri;
    int32_t *embed_tet;  ///< (nembed) the tet each surface vertex lies in
    float *embed_w;      ///< (nembed x 4) its barycentric weights in that tet
    uint32_t *embed_tri; ///< (nembed_tri x 3) surface triangles over the embedded vertices
    char region_name[SIM_SOFTBODY_NREGION][32]; ///< each region's material ("": unnamed)
    /// The closed surfaces the embedded vertices and triangles form, one after the other
    /// (nsurface 0: one, or not said): the organ's outer surface (region -1), then the
    /// surfaces of the regions inside it (a tumour within the liver), each a closed mesh.
    int nsurface;
    struct {
        int vert0, nvert; ///< its embedded vertices [vert0, vert0 + nvert)
        int tri0, ntri;   ///< its triangles, whose indices are into all embedded vertices
        int region;       ///< the region it encloses; -1 for the outer surface
    } surface[SIM_SOFTBODY_NREGION + 1];
} sim_softbody_tets;

/// Free the arrays of a sim_softbody_tets made by a builder of this library or the tests.
void sim_softbody_tets_free(sim_softbody_tets *t);

/// How an organ's label map becomes a hybrid model's geometry (geometry.h's pipeline): its
/// outer surface by marching cubes and Taubin smoothing, decimated to about surface_verts
/// (0: as marching cubes made it), embedded in its multi-resolution tets (octree cells of
/// min_cell to max_cell voxels); with inner_surfaces, also the surface of each region but
/// the first (region 0, the organ's tissue: a tumour, a vessel), decimated in proportion,
/// embedded after the outer one (sim_softbody_tets.surface).
typedef struct sim_softbody_organ_opts {
    float voxel_mm; ///< the phantom's cubic voxels (a label map keeps its own)
    int surface_verts;
    int min_cell, max_cell;
    int inner_surfaces;
} sim_softbody_organ_opts;
/// Defaults: 3 mm voxels, 3,000 surface vertices, cells of 1 to 8 voxels, no inner surfaces.
sim_softbody_organ_opts sim_softbody_default_organ_opts(void);

/// The phantom organ (geometry.h: a liver with a tumour and a vessel) as a hybrid model's
/// geometry, in metres, regions as the phantom's materials (0 liver, 1 tumour, 2 vessel).
/// Free it with sim_softbody_tets_free.
sim_status sim_softbody_tets_phantom(sim_softbody_tets *out, const sim_softbody_organ_opts *o,
                                     char *err, size_t err_sz);
/// A label map (NIfTI-1 .nii or .nii.gz: a segmentation a clinician brings, in its own
/// orientation and spacing) as a hybrid model's geometry, built as the phantom's is. materials
/// names every label the map uses: "LABEL=NAME[:REGION],..." (e.g. "1=liver,2=tumour,
/// 3=vessel" or "5=liver:0,6=liver:0,9=tumour:1"); a label without :REGION takes the region
/// of its name, numbered by first appearance. Refuses, naming the culprit: a malformed
/// table, a repeated label, more than SIM_SOFTBODY_NREGION regions, a label in the map with
/// no material, an empty map, a file that is not a label map; and what the geometry
/// refuses. Positions in metres as the file places them (sim_softbody_tets_rest_on_floor
/// moves it into a tray).
sim_status sim_softbody_tets_labelmap(sim_softbody_tets *out, const char *path,
                                      const char *materials, const sim_softbody_organ_opts *o,
                                      char *err, size_t err_sz);
/// Translate the tets (the embedded surface with them) so that their box is centred on
/// x = y = 0 and their lowest vertex is at z = 0.
void sim_softbody_tets_rest_on_floor(sim_softbody_tets *t);

/* ================================================================ model */

typedef enum sim_softbody_kind {
    SIM_SOFTBODY_SURFACE = 0, ///< PBD on the surface particles, with shape matching
    SIM_SOFTBODY_HYBRID,      ///< XPBD tets by region, virtual springs, embedded surface
} sim_softbody_kind;

typedef struct sim_softbody_model sim_softbody_model;
/// Build a surface model from a closed mesh (checked as sim_softbody_mesh_check does; the
/// mesh is not kept). Immutable; may be shared by states.
sim_status sim_softbody_model_surface(sim_softbody_model **out, const sim_softbody_mesh *mesh,
                                      char *err, size_t err_sz);
/// Build a hybrid model from a tet mesh: refuses, naming the tet or vertex, indices out of
/// range, repeated vertices in a tet, flat tets, a region without a material (>= nregion),
/// weights out of [0, 1] or not summing to 1, non-finite values, absurd sizes.
sim_status sim_softbody_model_hybrid(sim_softbody_model **out, const sim_softbody_tets *t,
                                     char *err, size_t err_sz);
void sim_softbody_model_destroy(sim_softbody_model *m);
/// Bytes the model holds (its particles, constraints, tets and embedding, as allocated).
size_t sim_softbody_model_bytes(const sim_softbody_model *m);
sim_softbody_kind sim_softbody_model_kind(const sim_softbody_model *m);

/// What a model holds, for benches and the view.
typedef struct sim_softbody_info {
    sim_softbody_kind kind;
    int particles;        ///< simulated points: surface vertices or tet vertices
    int tets;             ///< 0 for a surface model
    int surface_vertices; ///< rendered: the particles (surface) or the embedded vertices
    int surface_triangles;
    int edges;         ///< distance constraints
    int boundary_tets; ///< tets carrying virtual springs
    int colours;       ///< constraint colours (edges, then tets)
    float rest_volume; ///< m^3: the mesh's (surface) or the tets' (hybrid)
    float size;        ///< m, the rest bounding box's diagonal
} sim_softbody_info;
sim_softbody_info sim_softbody_model_info(const sim_softbody_model *m);
/// The rendered surface's triangles (3 indices each into sim_softbody_surface's vertices).
const uint32_t *sim_softbody_model_triangles(const sim_softbody_model *m, int *ntri);
/// Rest positions of the particles (nparticles x 3).
const float *sim_softbody_model_rest(const sim_softbody_model *m, int *n);
/// Tets (4 indices each) and their regions in the caller's order (a tet given negatively
/// oriented has its last two vertices swapped, its embedded weights with them); NULL for a
/// surface model.
const int32_t *sim_softbody_model_tets(const sim_softbody_model *m, int *ntet,
                                       const uint8_t **region);

/* ================================================================ parameters */

#define P(type, f, def, lo, hi, unit, group, doc)       SIM_PARAM_FIELD(type, f)
#define A(type, f, i, n, def, lo, hi, unit, group, doc) SIM_PARAM_ARRAY_##i(type, f, n)
#define C(f, def, n, choices, group, doc)               int f;
#define I(type, f, def, lo, hi, unit, doc)              SIM_PARAM_FIELD(type, f)
/// Declared once, in sim/softbody/params.def. spring_mode is a sim_softbody_spring_mode.
typedef struct sim_softbody_params {
#include "params.def"
} sim_softbody_params;
#undef P
#undef A
#undef C
#undef I

typedef enum sim_softbody_spring_mode {
    SIM_SPRING_HARMONIC = 0, ///< 2 E1 E2 / (E1 + E2): the mean of the compliances
    SIM_SPRING_ARITHMETIC,   ///< (E1 + E2) / 2
    SIM_SPRING_OFF,
} sim_softbody_spring_mode;

/// The declared table (params.def).
const sim_param_desc *sim_softbody_params_table(int *n);
sim_softbody_params sim_softbody_default_params(void);
/// The table's ranges.
sim_status sim_softbody_params_validate(const sim_softbody_params *p, char *err, size_t err_sz);

/* ================================================================ state */

typedef struct sim_softbody_metrics {
    double step_ms;
    float max_speed;       ///< m/s, the fastest particle relative to the tray after the frame
    float max_penetration; ///< m, the deepest particle behind any plane after the frame
    int nonfinite;         ///< particles found NaN or infinite (the state was reset)
    int grabbed;           ///< particles held by the hand
} sim_softbody_metrics;

typedef struct sim_softbody_state sim_softbody_state;
/// A state at rest (the model's rest pose, parent at the identity, nothing held, default
/// parameters) on backend b (which must outlive it).
sim_status sim_softbody_state_create(sim_softbody_state **out, const sim_softbody_model *m,
                                     sim_backend *b, char *err, size_t err_sz);
void sim_softbody_state_destroy(sim_softbody_state *s);
/// Bytes a state of model m holds (not the model's own), as allocated.
size_t sim_softbody_state_bytes(const sim_softbody_model *m);
/// Back to the rest pose under the current parent; velocities zero, nothing held. Keeps the
/// parameters, planes and pins.
void sim_softbody_state_reset(sim_softbody_state *s);
/// dst takes src's positions, velocities, parent, planes, grab, pins and parameters
/// (snapshots, replays). Both must be of the same model.
sim_status sim_softbody_state_copy(sim_softbody_state *dst, const sim_softbody_state *src,
                                   char *err, size_t err_sz);
/// CPU threads for the next steps, at most the backend's (0: the backend's). Results do not
/// depend on it.
void sim_softbody_set_threads(sim_softbody_state *s, int threads);
sim_softbody_params sim_softbody_get_params(const sim_softbody_state *s);
/// Checked (SIM_ERR_ARG names the parameter); unchanged when refused.
sim_status sim_softbody_set_params(sim_softbody_state *s, const sim_softbody_params *p, char *err,
                                   size_t err_sz);

/// The rigid parent (the tray): its pose, a position and a unit quaternion (w, x, y, z). The
/// next step carries every particle and every attached plane by the parent's motion since
/// the last step, rigidly (the body keeps its velocity relative to the tray), then
/// simulates. The parent is kinematic: its motion holds no gravity, and the body's own
/// gravity is applied once, in the step.
sim_status sim_softbody_set_parent(sim_softbody_state *s, const float pos[3], const float quat[4],
                                   char *err, size_t err_sz);
/// A contact plane: particles are kept on the side n points to (n . x >= d, n normalised
/// here). attached: the plane is given in the parent's frame and moves with it (the tray's
/// floor and walls); otherwise it is fixed in the world. *id identifies it for removal.
sim_status sim_softbody_add_plane(sim_softbody_state *s, const float n[3], float d, int attached,
                                  int *id, char *err, size_t err_sz);
sim_status sim_softbody_remove_plane(sim_softbody_state *s, int id, char *err, size_t err_sz);

/// Hold the particles within grab_radius of point (world m) by the hand, which starts at
/// point; replaces any earlier grab. Returns how many are held (0: none near, nothing held),
/// or -1 for a point that is not finite.
int sim_softbody_grab(sim_softbody_state *s, const float point[3]);
/// Move the hand: each held particle is pulled toward the hand plus its offset at the grab
/// (grab_stiffness of the way each substep).
sim_status sim_softbody_move_hand(sim_softbody_state *s, const float point[3], char *err,
                                  size_t err_sz);
void sim_softbody_release(sim_softbody_state *s);
/// Pin particles to the parent (attached to the tray, moving only with it): pinned[i] != 0
/// (nparticles bytes), or NULL to pin none.
sim_status sim_softbody_set_pinned(sim_softbody_state *s, const uint8_t *pinned, char *err,
                                   size_t err_sz);
/// Set positions (and velocities, may be NULL for zero), world m and m/s: a deformation to
/// release, a snapshot to restore. Refused when not finite.
sim_status sim_softbody_set_positions(sim_softbody_state *s, const float *x, const float *v,
                                      char *err, size_t err_sz);

/// Advance one frame (dt). A particle found not finite resets the state to rest and is
/// counted; it never fails for that (SIM_ERR_BACKEND only when the backend fails).
sim_status sim_softbody_step(sim_softbody_state *s, sim_softbody_metrics *mt, char *err,
                             size_t err_sz);

/// The particles (surface vertices or tet vertices), world m, and their velocities relative
/// to the parent, m/s.
const float *sim_softbody_positions(const sim_softbody_state *s, int *n);
const float *sim_softbody_velocities(const sim_softbody_state *s, int *n);
/// The rendered surface's vertices, world m: the particles (surface model) or the embedded
/// vertices placed by their weights in their tets (hybrid), as of the last step.
const float *sim_softbody_surface(const sim_softbody_state *s, int *n);
/// Guard resets since the state was made.
int sim_softbody_guard_resets(const sim_softbody_state *s);
/// Bitwise hash of positions and velocities.
uint64_t sim_softbody_hash(const sim_softbody_state *s);

/* Snapshots (sb_snapshot.c): a state as bytes, so that a state made again from the same
 * model and restored from them steps on bitwise as the original would have. */
/// Append s's changing state to out (part "SBST"): positions, velocities, parameters, the
/// parent's pose and its pending carry, planes, the grab (particles, offsets, hand), pins,
/// shape matching's warm start, the guard's count. SIM_ERR_NOMEM when out failed.
sim_status sim_softbody_save(const sim_softbody_state *s, sc_blob *out, char *err, size_t err_sz);
/// Put back what sim_softbody_save wrote (exactly n bytes) into a state of the same model.
/// Refuses (SIM_ERR_ARG, err saying why), leaving s unchanged: bytes cut short or left over,
/// another part or version, a state of another model kind, size or rest shape, values out of
/// range. The thread count is the caller's and is kept.
sim_status sim_softbody_restore(sim_softbody_state *s, const void *data, size_t n, char *err,
                                size_t err_sz);

#ifdef __cplusplus
}
#endif
#endif
