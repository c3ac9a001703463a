/* slice.h: 2D slices of the deformed volume (internal).
 *
 * Threads: sim_slice_resample splits its rows over OpenMP threads; the result does not
 * depend on the thread count. It reads its inputs only, so distinct calls may overlap. */
#ifndef SIM_VOLUME_SLICE_H
#define SIM_VOLUME_SLICE_H

#include <stddef.h>
#include <stdint.h>

#include "volume.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Slice image size in pixels: axial nx x ny (index along z), coronal nx x nz (index along
 * y), sagittal ny x nz (index along x). An unknown plane gives 0 x 0. */
void sim_slice_size(int nx, int ny, int nz, sim_plane plane, int *w, int *h);

/* A slice of the deformed volume at rest-lattice plane `index`. Pixel (u,v) is the lattice
 * point p on that plane (axial (u,v,index), coronal (u,index,v), sagittal (index,u,v)); the
 * rest point q whose element now sits at p is found by fixed-point inversion of the
 * displacement field: q0 = p, q_{k+1} = p - d(q_k), 4 iterations, where d(q) is the
 * trilinear interpolation of (elem_pos - rest) at q clamped to the lattice. The pixel's HU
 * is the trilinear HU of the rest volume at q, -1000 (air) when q lies outside the lattice.
 * rest: the rest volume (dims, HU). elem_pos: (nelem x 3) lattice units.
 * hu_out: (w x h) floats, may be NULL. img_out: (w x h) bytes, may be NULL, windowed:
 *   round(clamp((hu - (level_hu - width_hu/2)) / width_hu * 255, 0, 255)), so level-width/2
 *   -> 0, level -> 128 (127.5 rounds up), level+width/2 -> 255.
 * Row-major: pixel (u,v) at out[u + w*v].
 * Errors: SIM_ERR_ARG for NULL rest/elem_pos, an unknown plane, index out of range, width
 * <= 0 or non-finite level/width; the message names the plane and the valid range. */
sim_status sim_slice_resample(const sim_volume *rest, const float *elem_pos, sim_plane plane,
                              int index, float level_hu, float width_hu, float *hu_out,
                              uint8_t *img_out, char *err, size_t err_sz);

#ifdef __cplusplus
}
#endif
#endif
