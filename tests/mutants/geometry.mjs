// geometry.mjs: the soft-body geometry pipeline's checks (tests/sim/test_softbody_geometry.c)
// against the bugs they claim to catch (see run.mjs).
const build = ['$BUILD/softcast-tests'];
const run = (filter) => `$BUILD/softcast-tests ${filter}`;
const conform = 'softbody_geometry_tetmesh_conforms';
const conform_by = '`softbody_geometry_tetmesh_conforms_and_fills_the_covered_region`';

export default [
  {
    name: 'geometry: no 2:1 balance (hanging vertices between leaves two levels apart)',
    file: 'sim/softbody/octree.c',
    find: 'if (f.level < 2 || ring_min_level(lev, d, &f) + 1 >= f.level)',
    replace: 'if (f.level < 2 || ring_min_level(lev, d, &f) + 99 >= f.level)',
    build, test: run(conform), caught_by: conform_by,
  },
  {
    name: 'geometry: plain faces split by the other diagonal (not the Kuhn one)',
    file: 'sim/softbody/tetmesh.c',
    find: '        f->hub = idx[0];',
    replace: '        f->hub = f->n == 4 ? idx[2] : idx[0];',
    build, test: run(conform), caught_by: conform_by,
  },
  {
    name: 'geometry: octree blind to regions (a leaf spans two materials)',
    file: 'sim/softbody/octree.c',
    find: 'if (ck != c0)',
    replace: 'if ((ck == 0) != (c0 == 0))',
    build, test: run(conform), caught_by: conform_by,
  },
  {
    name: 'geometry: tet mesh ignores the surfaces (vertices left outside the tets)',
    file: 'sim/softbody/octree.c',
    find: '    mark_surfaces(g, m, cell, s, nsurf);',
    replace: '    (void)mark_surfaces, (void)s, (void)nsurf;',
    build, test: run('softbody_geometry_embedding_exact'), caught_by: '`softbody_geometry_embedding_exact_at_rest`',
  },
  {
    name: 'geometry: a wrong barycentric weight (the first one misses a term)',
    file: 'sim/softbody/embed.c',
    find: 'w[0] = 1.0 - w[1] - w[2] - w[3];',
    replace: 'w[0] = 1.0 - w[1] - w[2];',
    build, test: run('softbody_geometry_embedding_exact'), caught_by: '`softbody_geometry_embedding_exact_at_rest`',
  },
  {
    name: 'geometry: Taubin without its mu step (plain Laplacian smoothing shrinks)',
    file: 'sim/softbody/trimesh.c',
    find: 'umbrella_step(m, start, nbr, tmp, m->vert, mu);',
    replace: 'memcpy(m->vert, tmp, 3 * (size_t)m->nvert * sizeof(float));',
    build, test: run('softbody_geometry_taubin'), caught_by: '`softbody_geometry_taubin_smooths_without_shrinking`',
  },
  {
    name: 'geometry: marching cubes fans every loop from its first crossing',
    file: 'sim/softbody/mc.c',
    find: 'out->hub[out->nloop] = (int8_t)loop_hub(loop, n);',
    replace: 'out->hub[out->nloop] = (int8_t)(0 * loop_hub(loop, n));',
    build, test: run('softbody_geometry_marching_cubes_closed'), caught_by: '`softbody_geometry_marching_cubes_closed_manifold_in_every_case`',
  },
  {
    name: 'organ: a label given without a region always takes region 0 (tissues merged)',
    file: 'sim/softbody/sb_organ.c',
    find: '        region = region_of_name(t, name);',
    replace: '        region = 0 * region_of_name(t, name);',
    build, test: run('softbody_geometry_nifti_segmentation'), caught_by: '`softbody_geometry_nifti_segmentation_becomes_a_hybrid_organ`',
  },
  {
    name: 'organ: an inner surface drawn round every label (the organ again, not its tumour)',
    file: 'sim/softbody/sb_organ.c',
    find: '        st = organ_surface(t, m, labels, nl, err, err_sz);',
    replace: '        st = organ_surface(t, m, labels + 0 * nl, 0, err, err_sz);',
    build, test: run('inner_surfaces'), caught_by: '`softbody_geometry_organ_inner_surfaces_closed_with_their_volumes`',
  },
  {
    name: 'organ: inner surfaces\' triangles not shifted past the outer surface\'s vertices',
    file: 'sim/softbody/sb_organ.c',
    find: 's->tri[j] + (uint32_t)v0;',
    replace: 's->tri[j];',
    build, test: run('inner_surfaces'), caught_by: '`softbody_geometry_organ_inner_surfaces_closed_with_their_volumes`',
  },
];
