/* test_fuzz_corpus.c: replay the committed fuzz corpora (tests/fuzz/corpus/) through the
 * fuzz targets under ASan and UBSan, so every input a fuzzer once found interesting is
 * checked on every test run; and check that the corpora still hold what the fuzzers need
 * to start from (a frame of every kind that decodes; sequences in which every object part,
 * key, append, transform, delta, hold and removal, and a hold with a transform, is applied for
 * both primitives, and frames
 * refused for not fitting what the decoder holds; the version 1 keyframe and delta pairs),
 * so a corpus left behind by a format change fails here instead of fuzzing nothing but the
 * header checks. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "protocol/proto.h"
#include "tests/fuzz/fuzz_targets.h"
#include "tests/harness.h"

/* Call fn on every file of dir, as an exact-size buffer (ASan sees overreads). Returns the
 * number of files, or -1 when dir cannot be read. */
static int each_input(const char *dir, void (*fn)(const uint8_t *, size_t, void *), void *arg)
{
    DIR *d = opendir(dir);
    if (!d)
        return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        FILE *f = fopen(path, "rb");
        if (!f)
            continue;
        uint8_t *buf = malloc(1 << 20);
        size_t len = buf ? fread(buf, 1, 1 << 20, f) : 0;
        fclose(f);
        uint8_t *exact = buf ? malloc(len ? len : 1) : NULL;
        if (exact) {
            memcpy(exact, buf, len);
            fn(exact, len, arg);
            n++;
        }
        free(exact);
        free(buf);
    }
    closedir(d);
    return n;
}

typedef struct target {
    int (*one)(const uint8_t *, size_t);
} target;

static void run_target(const uint8_t *data, size_t len, void *arg)
{
    ((const target *)arg)->one(data, len);
}

static int replay(const char *dir, int (*one)(const uint8_t *, size_t))
{
    target t = {one};
    return each_input(dir, run_target, &t);
}

TEST(fuzz_corpus_frames_replay_clean)
{
    int n = replay("tests/fuzz/corpus/frame", fuzz_frame_one);
    th_note("%d frame inputs", n);
    CHECK(n >= 3);
}

TEST(fuzz_corpus_events_replay_clean)
{
    int n = replay("tests/fuzz/corpus/event", fuzz_event_one);
    th_note("%d event inputs", n);
    CHECK(n >= 10);
}

TEST(fuzz_corpus_deltas_replay_clean)
{
    int n = replay("tests/fuzz/corpus/delta", fuzz_delta_one);
    th_note("%d keyframe and delta pairs", n);
    CHECK(n >= 3);
}

/* The kinds the protocol has (proto.h): a new kind belongs here and in the corpus. */
#define NKINDS 5

static void count_kind(const uint8_t *data, size_t len, void *arg)
{
    int *decoded = arg;
    proto_header h;
    if (proto_header_read(&h, data, len) != PROTO_OK || h.kind < 1 || h.kind > NKINDS)
        return;
    int ok = 0;
    if (h.kind == PROTO_KIND_OBJECTS) {
        proto_decoder *d;
        ok = proto_decoder_create(&d) == PROTO_OK &&
             proto_decoder_apply(d, data, len, NULL, NULL, 0) == PROTO_OK;
        proto_decoder_destroy(d);
    } else if (h.kind == PROTO_KIND_MESH_KEY || h.kind == PROTO_KIND_MESH_DELTA) {
        proto_decoded_mesh m;
        ok = proto_decode_mesh(&m, data, len) == PROTO_OK;
        proto_decoded_mesh_free(&m);
    } else if (h.kind == PROTO_KIND_SLICE) {
        proto_slice s;
        ok = proto_decode_slice(&h, &s, data, len) == PROTO_OK;
        if (ok)
            free((void *)s.pixels);
    } else {
        proto_lod_entry *e;
        uint32_t n;
        ok = proto_decode_lod_table(&h, &e, &n, data, len) == PROTO_OK;
        if (ok)
            free(e);
    }
    decoded[h.kind] += ok;
}

TEST(fuzz_corpus_frames_decode_as_every_kind)
{
    int decoded[NKINDS + 1] = {0};
    int n = each_input("tests/fuzz/corpus/frame", count_kind, decoded);
    REQUIRE(n > 0);
    static const char *const names[NKINDS + 1] = {"",      "v1 mesh keyframe", "v1 mesh delta",
                                                  "slice", "v1 LOD table",     "objects"};
    for (int k = 1; k <= NKINDS; k++) {
        th_note("kind %d (%s): %d of %d inputs decode", k, names[k], decoded[k], n);
        CHECKF(decoded[k] > 0, "no input of kind %d (%s) decodes", k, names[k]);
    }
}

/* Sequences through one object decoder: which parts were applied, per primitive (from the
 * objects' parts after each frame, and the removed ids), and how many frames were refused
 * for not fitting the state. counts[prim - 1][bit] for PROTO_PART_* bit (0-5), [6] for HOLD |
 * TRANSFORM; counts[2][0]: state refusals. */
static void count_parts(const uint8_t *data, size_t size, void *arg)
{
    int(*counts)[7] = arg;
    const uint8_t *f[32];
    size_t len[32];
    int n = fuzz_split_frames(data, size, f, len);
    proto_decoder *d;
    if (proto_decoder_create(&d) != PROTO_OK)
        return;
    uint8_t prim_of[65536] = {0};
    for (int i = 0; i < n; i++) {
        proto_status st = proto_decoder_apply(d, f[i], len[i], NULL, NULL, 0);
        counts[2][0] += st == PROTO_ERR_STATE;
        if (st != PROTO_OK)
            continue;
        const uint16_t *ids;
        uint32_t nrm = proto_decoder_removed(d, &ids);
        for (uint32_t r = 0; r < nrm; r++)
            if (prim_of[ids[r]])
                counts[prim_of[ids[r]] - 1][0]++; /* PROTO_PART_REMOVE is bit 0 */
        for (uint32_t k = 0; k < proto_decoder_count(d); k++) {
            const proto_object *o = proto_decoder_object(d, k);
            prim_of[o->id] = o->primitive;
            for (int b = 1; b < 6; b++)
                counts[o->primitive - 1][b] += (o->parts >> b) & 1;
            counts[o->primitive - 1][6] += o->parts == (PROTO_PART_HOLD | PROTO_PART_TRANSFORM);
        }
    }
    proto_decoder_destroy(d);
}

TEST(fuzz_corpus_deltas_apply_every_part_of_both_primitives)
{
    int counts[3][7];
    memset(counts, 0, sizeof counts);
    int n = each_input("tests/fuzz/corpus/delta", count_parts, counts);
    REQUIRE(n > 0);
    static const char *const part[7] = {
        "remove", "key", "append", "transform", "delta", "hold", "hold with a transform"};
    static const char *const prim[2] = {"triangles", "lines"};
    for (int p = 0; p < 2; p++)
        for (int b = 0; b < 7; b++) {
            th_note("%s %s: applied %d times", prim[p], part[b], counts[p][b]);
            CHECKF(counts[p][b] > 0, "no sequence applies a %s part to %s", part[b], prim[p]);
        }
    th_note("%d frames refused for not fitting the decoder", counts[2][0]);
    CHECK(counts[2][0] > 0);
}

/* Version 1 pairs whose keyframe and delta both decode: those that apply to some surface, and
 * those refused for every surface. */
static void count_pair(const uint8_t *data, size_t size, void *arg)
{
    int *counts = arg;
    if (size < 4)
        return;
    size_t klen =
        (size_t)data[0] | (size_t)data[1] << 8 | (size_t)data[2] << 16 | (size_t)data[3] << 24;
    if (klen > size - 4)
        return;
    proto_decoded_mesh key, delta;
    proto_status ks = proto_decode_mesh(&key, data + 4, klen);
    proto_status ds = proto_decode_mesh(&delta, data + 4 + klen, size - 4 - klen);
    if (ks == PROTO_OK && ds == PROTO_OK) {
        int applied = 0;
        for (int s = 0; s < key.nsurf; s++) {
            uint16_t *out = malloc(((size_t)key.surf[s].nvert * 3 + 1) * sizeof *out);
            applied += out && proto_apply_delta(&key, &delta, s, out) == PROTO_OK;
            free(out);
        }
        counts[applied ? 0 : 1]++;
    }
    proto_decoded_mesh_free(&key);
    proto_decoded_mesh_free(&delta);
}

TEST(fuzz_corpus_deltas_hold_pairs_that_apply_and_pairs_refused)
{
    int counts[2] = {0, 0};
    int n = each_input("tests/fuzz/corpus/delta", count_pair, counts);
    th_note("%d pairs: %d apply, %d decode but are refused", n, counts[0], counts[1]);
    CHECK(counts[0] > 0);
    CHECK(counts[1] > 0);
}
