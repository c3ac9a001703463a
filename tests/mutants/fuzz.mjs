// Mutations of the protocol's decoders against the checks that claim to catch them: the
// replayed fuzz corpus (tests/fuzz/: the targets' own checks must fail on the committed
// corpus without ASan, as the mutants are built), the refusal tests (tests/protocol/
// test_objects.c), and the test vectors, which the C decoder (test_vectors.c) and the
// JavaScript one (tests/server/vectors.test.mjs) must both reproduce, refusals included.
const tests = ['$BUILD/softcast-tests'];
const vectorsC = '$BUILD/softcast-tests proto_vectors_object';
const vectorsJs = 'node --test tests/server/vectors.test.mjs';
const refusals = '$BUILD/softcast-tests proto_objects_refuse';

export default [
  // Version 1 (deprecated): applying a delta to a keyframe.
  {
    name: 'proto_apply_delta: vertex-count check removed (writes past the keyframe surface)',
    file: 'protocol/proto_v1.c',
    find: ' || key->surf[surface].nvert != delta->surf[surface].nvert)',
    replace: ')',
    build: tests,
    test: '$BUILD/softcast-tests fuzz_corpus_deltas_replay',
    caught_by: 'test_fuzz_corpus: fuzz_corpus_deltas_replay_clean',
  },
  {
    name: "proto_apply_delta: keyframe check removed (applies another keyframe's delta)",
    file: 'protocol/proto_v1.c',
    find: 'delta->key_frame != key->h.frame || ',
    replace: '',
    build: tests,
    test: '$BUILD/softcast-tests fuzz_corpus_deltas_replay',
    caught_by: 'test_fuzz_corpus: fuzz_corpus_deltas_replay_clean',
  },
  // Version 2: object frames, C decoder.
  {
    name: 'object decoder (C): element index bound removed (an index past the vertices is kept)',
    file: 'protocol/proto_objects_dec.c',
    find: '        if (out[i] >= nvert) {',
    replace: '        if (0) {',
    build: tests,
    test: '$BUILD/softcast-tests fuzz_corpus_frames_replay',
    caught_by: 'test_fuzz_corpus: fuzz_corpus_frames_replay_clean',
  },
  {
    name: 'object decoder (C): a key\'s position range check removed (a vertex outside its box)',
    file: 'protocol/proto_objects_dec.c',
    find: '(st = read_verts(x, k->nvert, &o->base, (uint16_t)((1u << qbits) - 1u),',
    replace: '(st = read_verts(x, k->nvert, &o->base, (uint16_t)((1u << qbits) - 1u) | 0xffffu,',
    build: tests,
    test: refusals,
    caught_by: 'test_objects: proto_objects_refuse_malformed_and_unfitting_frames',
  },
  {
    name: "object decoder (C): key serial check removed (a delta for a key replaced since)",
    file: 'protocol/proto_objects_dec.c',
    find: '(!r->held || r->held->pub.key != r->key)',
    replace: '(!r->held)',
    build: tests,
    test: vectorsC,
    caught_by: 'test_vectors: proto_vectors_object_frames_decode_to_stated_values',
  },
  {
    name: 'object decoder (C): append start check removed (the same append twice)',
    file: 'protocol/proto_objects_dec.c',
    find: '    if (r->a_vert0 != k->nvert || r->a_elem0 != k->nelem)',
    replace: '    if (0)',
    build: tests,
    test: vectorsC,
    caught_by: 'test_vectors: proto_vectors_object_frames_decode_to_stated_values',
  },
  {
    name: 'object decoder (C): delta vertex count check removed (a delta that missed an append)',
    file: 'protocol/proto_objects_dec.c',
    find: '    if (n != have)',
    replace: '    if (0)',
    build: tests,
    test: vectorsC,
    caught_by: 'test_vectors: proto_vectors_object_frames_decode_to_stated_values',
  },
  {
    name: 'object decoder (C): a snapshot keeps the objects it does not name',
    file: 'protocol/proto_objects_dec.c',
    find: '            if (snap) {',
    replace: '            if (snap && 0) {',
    build: tests,
    test: vectorsC,
    caught_by: 'test_vectors: proto_vectors_object_frames_decode_to_stated_values',
  },
  {
    name: 'object decoder (C): structural flag not checked against the records',
    file: 'protocol/proto_objects_dec.c',
    find: 'if (st == PROTO_OK && structural != ((hh.flags & PROTO_FLAG_STRUCTURAL) != 0))',
    replace: 'if (0)',
    build: tests,
    test: refusals,
    caught_by: 'test_objects: proto_objects_refuse_malformed_and_unfitting_frames',
  },
  {
    name: 'object encoder: new elements that are not a prefix append instead of re-keying',
    file: 'protocol/proto_objects_enc.c',
    find: '        return -1;',
    replace: '        return 1;',
    build: tests,
    test: '$BUILD/softcast-tests proto_objects_random',
    caught_by: 'test_objects: proto_objects_random_round_trips_and_snapshots',
  },
  // Version 2: the JavaScript decoder.
  {
    name: 'object decoder (JS): key serial check removed (a delta for a key replaced since)',
    file: 'protocol/js/softcast-proto.mjs',
    find: '        if (rec.held.key !== key)',
    replace: '        if (false)',
    build: tests,
    test: vectorsJs,
    caught_by: 'vectors.test.mjs: object frame sequence',
  },
  {
    name: 'object decoder (JS): append start check removed (the same append twice)',
    file: 'protocol/js/softcast-proto.mjs',
    find: '    if (vert0 !== t.nvert || elem0 !== t.nelem)',
    replace: '    if (false)',
    build: tests,
    test: vectorsJs,
    caught_by: 'vectors.test.mjs: object frame sequence',
  },
  {
    name: 'object decoder (JS): delta vertex count check removed (a delta that missed an append)',
    file: 'protocol/js/softcast-proto.mjs',
    find: '        if (n !== nvert) throw',
    replace: '        if (false) throw',
    build: tests,
    test: vectorsJs,
    caught_by: 'vectors.test.mjs: object frame sequence',
  },
  {
    name: 'object decoder (JS): a snapshot keeps the objects it does not name',
    file: 'protocol/js/softcast-proto.mjs',
    find: '        if (snap) {',
    replace: '        if (snap && false) {',
    build: tests,
    test: vectorsJs,
    caught_by: 'vectors.test.mjs: object frame sequence',
  },
  {
    name: 'object decoder (JS): element index bound removed (an index past the vertices is kept)',
    file: 'protocol/js/softcast-proto.mjs',
    find: '      if (out[i] >= nvert)',
    replace: '      if (false)',
    build: tests,
    test: vectorsJs,
    caught_by: 'vectors.test.mjs: garbage is refused (flipped bits decode consistently)',
  },
];
