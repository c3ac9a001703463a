/* geometry.h: the soft-body scene's geometry pipeline (pure CPU, no dynamics): a label
 * map in, a hybrid model's geometry out (SOFTBODY.md, section 2).
 *
 *   label map (phantom or NIfTI) + label -> material table
 *     -> surfaces (marching cubes per label set, Taubin smoothing, meshoptimizer
 *        decimation; closed, manifold, outward)
 *     -> multi-resolution tet mesh (octree over the label map, 2:1 balanced, leaves split
 *        into conforming tets; a region per tet)
 * The method and its measured figures: GEOMETRY.md beside this file.
 *     -> embedding (each surface vertex: its tet and 4 barycentric weights).
 *
 * Frame: world millimetres. Voxel (i, j, k) of a label map fills
 * [i, i+1) x [j, j+1) x [k, k+1) times spacing_mm; its centre is (i + 0.5) * spacing.
 * Voxels keep their stored order, as sim_volume_load_nifti does: no reorientation by
 * qform/sform. Every output array is owned by its struct (malloc) and freed by its _free.
 * Errors: a status and a message in err (may be NULL) that names the input and the
 * problem; on error the output struct is zeroed. Threads: every function touches only
 * its arguments. */
#ifndef SIM_SOFTBODY_GEOMETRY_H
#define SIM_SOFTBODY_GEOMETRY_H

#include <stddef.h>
#include <stdint.h>

#include "../sim.h"
#include "../volume/volume.h"

#ifdef __cplusplus
extern "C" {
#endif

/* -------------------------------------------------------------- label maps */

/// Integer labels on a regular lattice, x fastest: label[x + nx*(y + ny*z)].
typedef struct sim_labelmap {
    int nx, ny, nz;      ///< voxels per axis
    float spacing_mm[3]; ///< voxel size along x, y, z, mm
    uint16_t *label;     ///< (nz x ny x nx) 0 = background (no tissue); owned
} sim_labelmap;

/// Highest region index (tets carry regions as uint8; the octree keeps two codes).
#define SIM_MAX_REGION 253

/// One label's material: which region its tets belong to, and the material's name.
typedef struct sim_material {
    int label;        ///< label value in the map, 1..65535
    int region;       ///< region index of its tets, 0..SIM_MAX_REGION (labels may share one)
    const char *name; ///< material name ("liver"), not owned, non-empty
} sim_material;

typedef struct sim_material_table {
    const sim_material *entry; ///< (n) not owned
    int n;
} sim_material_table;

/// The phantom organ: a liver-like bent, flattened ellipsoid (label 1) holding a stiffer
/// spherical tumour (label 2) and a vessel, a tube along its length (label 3). Built in
/// canonical coordinates c, then mapped to p = (c.x, c.y + bend (c.x/A)^2, flatten c.z):
/// a shear (volume-preserving) and a scale, so every label's volume is analytic
/// (the canonical volume times flatten).
typedef struct sim_phantom_organ {
    float half_length_mm;      ///< A: canonical semi-axis along x
    float radius_mm;           ///< B: canonical semi-axes along y and z
    float flatten;             ///< z scale after, (0, 1]
    float bend_mm;             ///< y shift of the organ's ends (x = +-A)
    float tumour_centre_mm[3]; ///< canonical, from the organ's centre
    float tumour_radius_mm;    ///< canonical sphere
    float vessel_radius_mm;    ///< canonical tube around the x axis, clipped by the organ
    int margin_vox;            ///< background voxels around the organ's box, >= 1
} sim_phantom_organ;

enum {
    SIM_PHANTOM_PARENCHYMA = 1, ///< label of the organ's tissue
    SIM_PHANTOM_TUMOUR = 2,
    SIM_PHANTOM_VESSEL = 3,
};

/// Defaults: A 95 mm, B 50 mm, flatten 0.7, bend 20 mm, tumour r 14 mm at (35, 27, 0),
/// vessel r 8 mm, margin 2 voxels.
sim_phantom_organ sim_default_phantom_organ(void);
/// Materials of the phantom's labels: 1 liver (region 0), 2 tumour (1), 3 vessel (2).
sim_material_table sim_phantom_materials(void);
/// The phantom at cubic voxels of voxel_mm (each voxel samples its centre); the organ's
/// canonical centre sits at sim_phantom_centre_mm(). Deterministic. SIM_ERR_ARG for a
/// bad shape (tumour outside the organ or touching the vessel) or voxel size,
/// SIM_ERR_LIMIT past the default volume limits.
sim_status sim_labelmap_phantom(sim_labelmap *out, const sim_phantom_organ *shape, float voxel_mm,
                                char *err, size_t err_sz);
/// World mm of the organ's canonical centre in the phantom of that voxel size.
void sim_phantom_centre_mm(const sim_phantom_organ *shape, float voxel_mm, float out[3]);

/// Load a NIfTI-1 label map (.nii, .nii.gz) through sim_volume_load_nifti (same checks,
/// limits and orientation). Every voxel must be a whole number in 0..65535 after
/// scaling (a float image such as a CT or MR is refused, naming the first voxel that is
/// not a label); SIM_ERR_FORMAT otherwise.
sim_status sim_labelmap_load_nifti(sim_labelmap *out, const char *path,
                                   const sim_volume_limits *lim, char *err, size_t err_sz);
/// Check a map against its material table: the table (labels 1..65535 and unique,
/// regions 0..SIM_MAX_REGION, names non-empty), the map (dims, spacing, at least one non-zero
/// voxel), and that every non-zero label has a material (the error names the label, its
/// voxel count and a voxel). SIM_ERR_ARG for a bad table or map.
sim_status sim_labelmap_check(const sim_labelmap *m, const sim_material_table *mat, char *err,
                              size_t err_sz);
/// Voxels carrying each label: counts[label] for label < ncounts (others ignored).
void sim_labelmap_count(const sim_labelmap *m, size_t *counts, int ncounts);
void sim_labelmap_free(sim_labelmap *m);

/* ---------------------------------------------------------------- surfaces */

/// A triangle surface; triangles counter-clockwise seen from outside.
typedef struct sim_trimesh {
    int nvert, ntri;
    float *vert;   ///< (nvert x 3) world mm; owned
    uint32_t *tri; ///< (ntri x 3) vertex indices; owned
} sim_trimesh;

typedef struct sim_surface_opts {
    int presmooth;       ///< 1: box-blur the inside indicator (3x3x3) first (thins thin parts)
    int smooth_iters;    ///< Taubin iterations (each a lambda and a mu step), 0 = none
    float taubin_lambda; ///< > 0, shrinking step
    float taubin_mu;     ///< < -lambda, inflating step
    int target_verts;    ///< decimate to about this many vertices; 0 = keep all
    float max_error_mm;  ///< decimation's geometric error bound, mm
} sim_surface_opts;

/// Defaults: presmooth 0 (Taubin smooths the staircase; a blur shrank a 6-voxel-wide
/// vessel by 25%), 10 Taubin iterations, lambda 0.5, mu -0.53, no decimation,
/// error bound 1 mm.
sim_surface_opts sim_default_surface_opts(void);

/// The surface around the voxels whose label is in labels[0..nlabels) (nlabels 0: every
/// non-zero label), by marching cubes on the voxel-centre lattice, then opts' smoothing
/// and decimation. Closed, manifold, outward (checked: SIM_ERR_LIMIT names the defect if
/// decimation broke it). An empty set of voxels is SIM_ERR_ARG.
sim_status sim_labelmap_surface(sim_trimesh *out, const sim_labelmap *m, const int *labels,
                                int nlabels, const sim_surface_opts *opts, char *err,
                                size_t err_sz);

/// Marching cubes of a scalar field f (nx x ny x nz, x fastest), inside f > iso, samples
/// at origin + i * step. Cases come from a face rule (inside corners of an ambiguous face
/// are kept apart), so the surface is closed and manifold wherever it stays inside the
/// lattice; the caller pads the field to close it. Vertices are shared along lattice
/// edges.
sim_status sim_marching_cubes(sim_trimesh *out, const float *f, int nx, int ny, int nz, float iso,
                              const float origin[3], const float step[3], char *err, size_t err_sz);
/// Taubin smoothing (lambda | mu), uniform umbrella weights, in place.
sim_status sim_trimesh_taubin(sim_trimesh *m, int iters, float lambda, float mu, char *err,
                              size_t err_sz);
/// Decimate with meshoptimizer's simplifier toward target_verts (keeping error under
/// max_error_mm), then drop unused vertices. SIM_ERR_FORMAT in a build without it.
sim_status sim_trimesh_decimate(sim_trimesh *m, int target_verts, float max_error_mm, char *err,
                                size_t err_sz);

/// What sim_trimesh_check finds.
typedef struct sim_mesh_report {
    int boundary_edges;    ///< edges used by one triangle
    int nonmanifold_edges; ///< edges used by more than two triangles
    int misoriented_edges; ///< edges two triangles traverse the same way
    int nonmanifold_verts; ///< vertices whose triangle fan is not one disc
    int degenerate_tris;   ///< triangles with a repeated vertex index
    int components;        ///< edge-connected pieces
    double volume_mm3;     ///< signed enclosed volume (> 0 when outward)
    double area_mm2;
} sim_mesh_report;

/// Check closure, manifoldness and orientation. SIM_ERR_NOMEM only.
sim_status sim_trimesh_check(const sim_trimesh *m, sim_mesh_report *rep, char *err, size_t err_sz);
/// 1 when the report shows a closed, manifold, consistently oriented, outward surface.
int sim_mesh_report_ok(const sim_mesh_report *rep);
void sim_trimesh_free(sim_trimesh *m);

/* --------------------------------------------------------------- tet meshes */

typedef struct sim_tetmesh {
    int nvert, ntet;
    float *vert;     ///< (nvert x 3) world mm; owned
    uint32_t *tet;   ///< (ntet x 4) vertex indices, positive volume; owned
    uint8_t *region; ///< (ntet) region index from the material table; owned
} sim_tetmesh;

typedef struct sim_tetmesh_opts {
    int min_cell_vox; ///< finest octree cell, voxels a side (power of two, >= 1)
    int max_cell_vox; ///< coarsest cell (power of two, >= min_cell_vox, <= 256)
} sim_tetmesh_opts;

/// Defaults: cells of 1 to 16 voxels.
sim_tetmesh_opts sim_default_tetmesh_opts(void);

/// Figures of one build.
typedef struct sim_tetmesh_stats {
    int leaves[9];         ///< octree leaves kept, by level (cell side min_cell_vox << level)
    int kuhn_leaves;       ///< leaves split into 6 Kuhn tets (no finer neighbour)
    int corner_leaves;     ///< transition leaves coned from a corner
    int centre_leaves;     ///< transition leaves coned from a new centre vertex
    int balance_splits;    ///< leaves split by the 2:1 balance
    size_t covered_blocks; ///< finest cells covered (leaf volume / finest cell volume)
} sim_tetmesh_stats;

/// The multi-resolution tet mesh of a label map (method: octree.c, tetmesh.c). The covered
/// region is every finest cell (min_cell_vox a side) holding a labelled voxel or a vertex
/// of one of the surfaces (within 1e-4 cells of its box), so every surface vertex lies in
/// a tet. An octree over it splits where a cell holds more than one region (or covered and
/// uncovered cells) or a surface vertex, down to min_cell_vox, and stays coarse up to
/// max_cell_vox inside a region; then leaves sharing a face or an edge are balanced to
/// differ by one level at most. Each leaf face is triangulated by one rule both of its
/// sides share (its quarters where the leaf across is finer; a fan over its edge midpoints
/// where finer leaves touch its edges; else the diagonal from its lowest to its highest
/// corner), and each leaf is coned to its face triangles from its lowest corner (6 Kuhn
/// tets for a leaf with no finer neighbour), its highest, or a new centre vertex: the mesh
/// conforms (no hanging vertex), every tet has positive volume, and the tets fill the
/// covered region exactly. Region per tet: its leaf's (a finest cell's: the most common
/// region of its labelled voxels, ties to the lower; a cell with a surface vertex only:
/// its covered neighbours'). surfaces may be NULL when nsurf is 0.
sim_status sim_tetmesh_build(sim_tetmesh *out, const sim_labelmap *m, const sim_material_table *mat,
                             const sim_trimesh *surfaces, int nsurf, const sim_tetmesh_opts *opts,
                             sim_tetmesh_stats *stats, char *err, size_t err_sz);
void sim_tetmesh_free(sim_tetmesh *t);

/* ---------------------------------------------------------------- embedding */

/// Each point's tet and barycentric weights: point = sum_k weight[k] * vert[tet[k]].
typedef struct sim_embedding {
    int npoint;
    uint32_t *tet;    ///< (npoint) tet index; owned
    float *weight;    ///< (npoint x 4) barycentric weights, summing to 1; owned
    int outside;      ///< points in no tet (given the nearest, weights extrapolated)
    float min_weight; ///< smallest weight over all points (< 0: outside by that much)
} sim_embedding;

/// Locate every point (npoint x 3, mm) in the tet mesh through a hierarchy of grids over
/// the tets' boxes (embed.c); the tet whose smallest barycentric weight is largest wins,
/// so a point outside by float error gets the nearest tet. A point farther than one grid
/// cell from every tet is SIM_ERR_ARG, naming it. Each call builds its grid: embed several
/// surfaces in one call (points concatenated) to build it once.
sim_status sim_embed_points(sim_embedding *out, const sim_tetmesh *t, const float *points,
                            int npoint, char *err, size_t err_sz);
/// Positions of the embedded points for tet vertex positions vert (nvert x 3): out is
/// (npoint x 3).
void sim_embed_eval(const sim_embedding *e, const uint32_t *tets, const float *vert, float *out);
void sim_embedding_free(sim_embedding *e);

#ifdef __cplusplus
}
#endif
#endif
