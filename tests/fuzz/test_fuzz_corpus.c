/* test_fuzz_corpus.c: replay the committed fuzz corpora (tests/fuzz/corpus/) through the
 * fuzz targets under ASan and UBSan, so every input a fuzzer once found interesting is
 * checked on every test run; and check that the corpora still hold what the fuzzers need
 * to start from (a frame of every kind that decodes; sequences in which every object part,
 * key, append, transform, delta, hold and removal, and a hold with a transform, is applied for
 * both primitives, and frames refused for not fitting what the decoder holds), so a corpus left
 * behind by a format change fails here instead of fuzzing nothing but the header checks. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "protocol/proto.h"
#include "tests/fuzz/fuzz_check.h"
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
    th_note("%d frame sequences", n);
    CHECK(n >= 3);
}

/* The kinds the protocol has (proto.h): a new kind belongs here and in the corpus. */
static const struct {
    uint8_t kind;
    const char *name;
} k_kinds[] = {{PROTO_KIND_SLICE, "slice"}, {PROTO_KIND_OBJECTS, "objects"}};
#define NKINDS (sizeof k_kinds / sizeof k_kinds[0])

static void count_kind(const uint8_t *data, size_t len, void *arg)
{
    int *decoded = arg;
    proto_header h;
    if (proto_header_read(&h, data, len) != PROTO_OK)
        return;
    int ok = 0;
    if (h.kind == PROTO_KIND_OBJECTS) {
        proto_decoder *d;
        ok = proto_decoder_create(&d) == PROTO_OK &&
             proto_decoder_apply(d, data, len, NULL, NULL, 0) == PROTO_OK;
        proto_decoder_destroy(d);
    } else {
        proto_slice s;
        ok = proto_decode_slice(&h, &s, data, len) == PROTO_OK;
        if (ok)
            free((void *)s.pixels);
    }
    for (size_t k = 0; k < NKINDS; k++)
        decoded[k] += ok && h.kind == k_kinds[k].kind;
}

TEST(fuzz_corpus_frames_decode_as_every_kind)
{
    int decoded[NKINDS] = {0};
    int n = each_input("tests/fuzz/corpus/frame", count_kind, decoded);
    REQUIRE(n > 0);
    for (size_t k = 0; k < NKINDS; k++) {
        th_note("kind %u (%s): %d of %d inputs decode", k_kinds[k].kind, k_kinds[k].name,
                decoded[k], n);
        CHECKF(decoded[k] > 0, "no input of kind %u (%s) decodes", k_kinds[k].kind,
               k_kinds[k].name);
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

/* The handler targets' judge of what a client reads (fuzz_json_text): RFC 8259 and 3629
 * cases, each with the answer the RFCs give. A judge that passed everything would let the
 * ws and http targets find nothing. */
TEST(fuzz_json_judge_follows_the_rfcs)
{
    static const struct {
        const char *text, *key;
        int ok;
    } cases[] = {
        {"{\"type\":\"hello\",\"n\":[1,-2.5e3,0,true,false,null,{}]}", "type", 1},
        {" {\"a\":{\"type\":1},\"type\":\"x\"}\n", "type", 1},
        {"{\"type\":\"\\u00e9\\n\\\"\"}", "type", 1},
        {"{\"type\":\"caf\xc3\xa9\"}", "type", 1},
        {"[1,2]", NULL, 1},
        {"\"s\"", NULL, 1},
        {"{\"a\":{\"type\":\"x\"}}", "type", 0},    /* only in an inner object */
        {"{\"type\":7}", "type", 0},                /* not a string */
        {"{\"ty\\u0070e\":\"x\"}", "type", 0},      /* an escaped name is not matched */
        {"[{\"type\":\"x\"}]", "type", 0},          /* not an object */
        {"{\"type\":\"x\"} {}", "type", 0},         /* trailing text */
        {"{\"type\":\"x\"", "type", 0},             /* cut short */
        {"{\"type\":\"x\",}", "type", 0},           /* trailing comma */
        {"{\"type\":\"a\tb\"}", "type", 0},         /* raw control character */
        {"{\"type\":\"\\x\"}", "type", 0},          /* bad escape */
        {"{\"type\":\"\\u12\"}", "type", 0},        /* short \\u */
        {"{\"type\":\"\xc3\"}", "type", 0},         /* broken UTF-8 */
        {"{\"type\":\"\xed\xa0\x80\"}", "type", 0}, /* a surrogate */
        {"{\"type\":\"\xc0\xaf\"}", "type", 0},     /* overlong */
        {"[01]", NULL, 0},
        {"[1.]", NULL, 0},
        {"[-]", NULL, 0},
        {"[1e]", NULL, 0},
        {"[tru]", NULL, 0},
        {"{\"a\" 1}", NULL, 0},
        {"{1:2}", NULL, 0},
        {"", NULL, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int got = fuzz_json_text((const unsigned char *)cases[i].text, strlen(cases[i].text),
                                 cases[i].key);
        if (got != cases[i].ok)
            fprintf(stderr, "  case %zu (%s): got %d\n", i, cases[i].text, got);
        CHECK(got == cases[i].ok);
    }
    char deep[200];
    memset(deep, '[', 100);
    memset(deep + 100, ']', 100);
    CHECK(!fuzz_json_text((const unsigned char *)deep, sizeof deep, NULL)); /* depth bound */
    CHECK(fuzz_json_text((const unsigned char *)deep + 40, 120, NULL));
}
