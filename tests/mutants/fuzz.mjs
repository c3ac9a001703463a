// Mutations of the protocol's delta application, against the replayed fuzz corpus
// (tests/fuzz/): the fuzz_delta target's own checks (guard words after the output, refusals,
// sums) must fail on the committed corpus without ASan, as the mutants are built.
const tests = ['$BUILD/softcast-tests'];

export default [
  {
    name: 'proto_apply_delta: vertex-count check removed (writes past the keyframe surface)',
    file: 'protocol/proto_frame.c',
    find: ' || key->surf[surface].nvert != delta->surf[surface].nvert)',
    replace: ')',
    build: tests,
    test: '$BUILD/softcast-tests fuzz_corpus_deltas_replay',
    caught_by: 'test_fuzz_corpus: fuzz_corpus_deltas_replay_clean',
  },
  {
    name: "proto_apply_delta: keyframe check removed (applies another keyframe's delta)",
    file: 'protocol/proto_frame.c',
    find: 'delta->key_frame != key->h.frame || ',
    replace: '',
    build: tests,
    test: '$BUILD/softcast-tests fuzz_corpus_deltas_replay',
    caught_by: 'test_fuzz_corpus: fuzz_corpus_deltas_replay_clean',
  },
];
