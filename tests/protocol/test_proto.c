/* test_proto.c: the frame header and the slice frame: round trips and hostile bytes (object
 * frames: test_objects.c). */
#include <stdlib.h>
#include <string.h>

#include "protocol/proto.h"
#include "tests/harness.h"

static uint32_t rng_state = 2463534242u;
static uint32_t rnd(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 17;
    rng_state ^= rng_state << 5;
    return rng_state;
}

static proto_header header(uint64_t frame, uint32_t seq)
{
    proto_header h;
    memset(&h, 0, sizeof h);
    h.frame = frame;
    h.last_seq = seq;
    h.sim_time_s = (double)frame / 60.0;
    return h;
}

TEST(proto_header_round_trip_and_refusals)
{
    uint8_t b[PROTO_HEADER_SIZE];
    proto_header h = header(123456789012ull, 4000000000u), r;
    h.kind = PROTO_KIND_SLICE;
    h.payload_size = 0;
    h.raw_size = 77;
    proto_header_write(b, &h);
    REQUIRE(proto_header_read(&r, b, sizeof b) == PROTO_OK);
    CHECK(r.frame == h.frame && r.last_seq == h.last_seq && r.kind == PROTO_KIND_SLICE);
    CHECK(r.sim_time_s == h.sim_time_s && r.raw_size == 77);
    CHECK(b[0] == 'S' && b[1] == 'C' && b[2] == 'F' && b[3] == '1' && b[4] == PROTO_VERSION);
    CHECK(proto_header_read(&r, b, 20) == PROTO_ERR_SHORT);
    uint8_t c[PROTO_HEADER_SIZE];
    memcpy(c, b, sizeof c);
    c[0] = 'X';
    CHECK(proto_header_read(&r, c, sizeof c) == PROTO_ERR_MAGIC);
    memcpy(c, b, sizeof c);
    c[4] = 9;
    CHECK(proto_header_read(&r, c, sizeof c) == PROTO_ERR_VERSION);
    /* Version 1 is gone: refused with any kind it had (1 mesh keyframe, 2 mesh delta, 4 LOD
     * table) and with the kinds of version 2. */
    c[4] = 1;
    for (uint8_t k = 1; k <= 5; k++) {
        c[5] = k;
        CHECK(proto_header_read(&r, c, sizeof c) == PROTO_ERR_VERSION);
    }
    /* Version 2 has no kinds but 3 and 5. */
    memcpy(c, b, sizeof c);
    for (int k = 0; k < 256; k++) {
        c[5] = (uint8_t)k;
        CHECK((proto_header_read(&r, c, sizeof c) == PROTO_ERR_KIND) ==
              (k != PROTO_KIND_SLICE && k != PROTO_KIND_OBJECTS));
    }
    memcpy(c, b, sizeof c);
    c[32] = 5; /* claims 5 payload bytes that are not there */
    CHECK(proto_header_read(&r, c, sizeof c) == PROTO_ERR_SHORT);
}

TEST(proto_slice_round_trip)
{
    uint8_t px[64 * 48];
    for (int i = 0; i < 64 * 48; i++)
        px[i] = (uint8_t)(i * 7);
    proto_slice s = {1, 17, 64, 48, 40.0f, 400.0f, px}, r;
    proto_buf out = {0};
    proto_header h = header(5, 9), rh;
    REQUIRE(proto_encode_slice(&out, &h, &s, 1) == PROTO_OK);
    REQUIRE(proto_decode_slice(&rh, &r, out.data, out.len) == PROTO_OK);
    CHECK(rh.kind == PROTO_KIND_SLICE && rh.frame == 5 && rh.last_seq == 9);
    CHECK(r.plane == 1 && r.index == 17 && r.width == 64 && r.height == 48);
    CHECK(r.level_hu == 40.0f && r.width_hu == 400.0f);
    CHECK(memcmp(r.pixels, px, sizeof px) == 0);
    free((void *)r.pixels);
    s.plane = 3;
    CHECK(proto_encode_slice(&out, &h, &s, 1) == PROTO_ERR_ARG);
    proto_buf_free(&out);
}

/* Every prefix of a slice frame, and slices with random bytes flipped or made up, decode to
 * an error or to a consistent slice: never a crash, a leak or an out-of-bounds read (ASan).
 * Object frames have theirs in test_objects.c. */
TEST(proto_slice_survives_truncation_and_corruption)
{
    uint8_t px[24 * 16];
    for (int i = 0; i < 24 * 16; i++)
        px[i] = (uint8_t)(i * 13);
    proto_slice s = {2, 40, 24, 16, -600.0f, 1500.0f, px}, r;
    proto_buf out = {0};
    proto_header h = header(1, 1), rh;
    REQUIRE(proto_encode_slice(&out, &h, &s, 1) == PROTO_OK);
    int ok_prefix = 0;
    for (size_t n = 0; n < out.len; n++)
        if (proto_decode_slice(&rh, &r, out.data, n) == PROTO_OK) {
            ok_prefix++;
            free((void *)r.pixels);
        }
    CHECK(ok_prefix == 0);
    uint8_t *c = malloc(out.len);
    REQUIRE(c != NULL);
    int decoded = 0, refused = 0;
    for (int t = 0; t < 2000; t++) {
        memcpy(c, out.data, out.len);
        int flips = 1 + (int)(rnd() % 4);
        for (int k = 0; k < flips; k++)
            c[rnd() % out.len] ^= (uint8_t)(1u << (rnd() % 8));
        if (proto_decode_slice(&rh, &r, c, out.len) == PROTO_OK) {
            decoded++;
            CHECK(r.plane <= 2 && (size_t)r.width * r.height == (size_t)rh.raw_size - 24);
            free((void *)r.pixels);
        } else {
            refused++;
        }
    }
    th_note("2000 corrupted slices: %d refused, %d decoded consistently", refused, decoded);
    CHECK(refused > 0);
    for (int t = 0; t < 500; t++) {
        size_t n = rnd() % 300;
        for (size_t i = 0; i < n; i++)
            c[i % out.len] = (uint8_t)rnd();
        if (n >= 4 && t % 2)
            memcpy(c, "SCF1", 4);
        if (proto_decode_slice(&rh, &r, c, n < out.len ? n : out.len) == PROTO_OK)
            free((void *)r.pixels);
    }
    free(c);
    proto_buf_free(&out);
}
