/* surface.h: iso-surfaces of the rest volume, bound to lattice cells (internal).
 *
 * A surface is extracted once from the rest volume (naive Surface Nets) and each vertex
 * stays bound to its cell: at run time its position is the trilinear blend of the current
 * positions of the cell's 8 corner elements. Threads: extract and eval touch only their
 * arguments; any number may run at once on distinct outputs. */
#ifndef SIM_VOLUME_SURFACE_H
#define SIM_VOLUME_SURFACE_H

#include <stddef.h>
#include <stdint.h>

#include "volume.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Owned arrays (malloc); layout as sim_surface in sim.h, which views these arrays. */
typedef struct sim_surface_data {
    int nvert, ntri;
    uint32_t *tri;       // (ntri x 3) vertex indices, counter-clockwise seen from outside
    uint32_t *vert_cell; // (nvert) element index of the cell's lowest corner
    float *vert_frac;    // (nvert x 3) offsets in the cell, [0,1]^3, lattice units
    /* Vertices are numbered block by block (the state's 8^3 blocks, VOL_BLOCK, of each
     * vertex's cell's lowest corner, in block order) and, within a block, by how far their
     * cells reach: run r is the vertices [run_start[r], run_start[r+1]) of block run_block[r]
     * whose cells also reach the next block along x (bit 0 of run_reach[r]), y (bit 1) or
     * z (bit 2), their lowest corner on the block's last layer. The vertices that a block's
     * motion can move are then a few contiguous ranges (sim_volume_surface_update). */
    int nrun;
    uint32_t *run_block; // (nrun)
    uint8_t *run_reach;  // (nrun)
    uint32_t *run_start; // (nrun + 1)
    uint32_t *block_run; // (blocks + 1) block b's runs are [block_run[b], block_run[b + 1])
} sim_surface_data;

/* Extract the iso-surface hu == iso_hu from the rest volume with naive Surface Nets:
 * one vertex per cell (2x2x2 elements; lowest corner = vert_cell) whose corners straddle
 * the iso level, at the mean of its edge crossings (linear interpolation on the 12
 * edges); one quad (two triangles) per lattice edge crossing the iso level, joining the 4
 * cells around that edge. Inside is hu >= iso_hu; triangles are counter-clockwise seen
 * from outside (normals point from inside to outside). Cells exist only where all 8
 * corners do, so a surface reaching the volume border is open there. An element exactly at
 * iso_hu puts crossings on itself, so vertices of neighbouring cells can coincide there and
 * some triangles have zero area (topology stays sound; they follow the same element, so
 * they stay degenerate and add nothing to summed normals). An empty surface
 * (nvert == ntri == 0, NULL arrays) is a success.
 * On failure *out is zeroed: SIM_ERR_ARG (NULL or bad volume, non-finite iso),
 * SIM_ERR_NOMEM, SIM_ERR_LIMIT (more than INT_MAX vertices or triangles). */
sim_status sim_surface_extract(sim_surface_data *out, const sim_volume *v, float iso_hu, char *err,
                               size_t err_sz);

/* Free the arrays and zero *s (NULL or already freed is fine). */
void sim_surface_data_free(sim_surface_data *s);

/* sim_surface_eval for the vertices [first, end) only. */
void sim_surface_eval_range(const sim_surface_data *s, int nx, int ny, const float *elem_pos,
                            const float spacing_mm[3], float *out, uint32_t first, uint32_t end);

/* Positions of the surface vertices in world mm: each vertex is the trilinear blend
 * (weights from vert_frac) of the current lattice positions of its cell's 8 corner
 * elements, times spacing_mm. nx, ny: the volume's lattice dims the surface came from.
 * elem_pos: (nelem x 3) lattice units. out: (nvert x 3) mm. */
void sim_surface_eval(const sim_surface_data *s, int nx, int ny, const float *elem_pos,
                      const float spacing_mm[3], float *out);

#ifdef __cplusplus
}
#endif
#endif
