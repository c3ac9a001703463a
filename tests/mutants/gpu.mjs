// Mutations of the prepared GPU script (tests/gpu/check.sh), which runs only on a lent GPU
// machine: make cuda-check builds it here its own way, so that it keeps building.
export default [
  {
    name: 'the GPU script links without meshoptimizer (the hybrid soft body\'s decimation)',
    file: 'tests/gpu/check.sh',
    find: '    $MESHOPT_LIBS -lcudart -lstdc++ -lm',
    replace: '    -lcudart -lstdc++ -lm',
    build: [],
    test: 'make -s BUILD=$BUILD cuda-check',
    caught_by: 'make cuda-check (tests/gpu/check.sh --build-only: undefined meshopt_simplify)',
  },
];
