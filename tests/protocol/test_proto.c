/* test_proto.c: the wire format: round trips, deltas, and hostile bytes. */
#include <math.h>
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

/* A grid surface of n x n vertices with two triangles per cell, heights from f. */
typedef struct grid {
    uint32_t nvert, ntri;
    uint32_t *tri;
    float *pos;
    uint16_t *q;
} grid;

static void grid_make(grid *g, int n, float dent)
{
    g->nvert = (uint32_t)(n * n);
    g->ntri = (uint32_t)(2 * (n - 1) * (n - 1));
    g->tri = malloc(sizeof(uint32_t) * 3 * g->ntri);
    g->pos = malloc(sizeof(float) * 3 * g->nvert);
    g->q = malloc(sizeof(uint16_t) * 3 * g->nvert);
    uint32_t t = 0;
    for (int y = 0; y + 1 < n; y++)
        for (int x = 0; x + 1 < n; x++) {
            uint32_t a = (uint32_t)(y * n + x), b = a + 1, c = a + (uint32_t)n, d = c + 1;
            uint32_t tri[6] = {a, b, d, a, d, c};
            memcpy(&g->tri[t * 3], tri, sizeof tri);
            t += 2;
        }
    for (int y = 0; y < n; y++)
        for (int x = 0; x < n; x++) {
            float r2 = (float)((x - n / 2) * (x - n / 2) + (y - n / 2) * (y - n / 2));
            float *p = &g->pos[(y * n + x) * 3];
            p[0] = (float)x * 2.0f;
            p[1] = (float)y * 2.0f;
            p[2] = 50.0f + dent * expf(-r2 / 20.0f);
        }
}

static void grid_free(grid *g)
{
    free(g->tri);
    free(g->pos);
    free(g->q);
}

static proto_mesh mesh_of(grid *g, const float bmin[3], const float bmax[3], uint64_t key)
{
    proto_mesh m;
    memset(&m, 0, sizeof m);
    memcpy(m.bmin, bmin, sizeof m.bmin);
    memcpy(m.bmax, bmax, sizeof m.bmax);
    m.key_frame = key;
    m.nsurf = 1;
    m.surf[0].id = 0;
    m.surf[0].nvert = g->nvert;
    m.surf[0].ntri = g->ntri;
    m.surf[0].tri = g->tri;
    proto_quantise(g->pos, g->nvert, bmin, bmax, g->q);
    m.surf[0].q = g->q;
    return m;
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
    memcpy(c, b, sizeof c);
    c[5] = 42;
    CHECK(proto_header_read(&r, c, sizeof c) == PROTO_ERR_KIND);
    memcpy(c, b, sizeof c);
    c[32] = 5; /* claims 5 payload bytes that are not there */
    CHECK(proto_header_read(&r, c, sizeof c) == PROTO_ERR_SHORT);
}

TEST(proto_mesh_keyframe_round_trip)
{
    grid g;
    grid_make(&g, 60, 0.0f);
    float bmin[3] = {-10, -10, 0}, bmax[3] = {130, 130, 100};
    proto_mesh m = mesh_of(&g, bmin, bmax, 0);
    proto_buf out = {0};
    proto_header h = header(7, 3);
    REQUIRE(proto_encode_mesh_key(&out, &h, &m, 1) == PROTO_OK);
    proto_decoded_mesh d;
    REQUIRE(proto_decode_mesh(&d, out.data, out.len) == PROTO_OK);
    CHECK(d.h.kind == PROTO_KIND_MESH_KEY && d.h.frame == 7 && d.h.last_seq == 3);
    CHECK(d.nsurf == 1 && d.surf[0].nvert == g.nvert && d.surf[0].ntri == g.ntri);
    /* The index codec keeps triangle order and winding but may rotate a triangle. */
    int same = 1;
    for (uint32_t t = 0; t < g.ntri; t++) {
        const uint32_t *a = &d.surf[0].tri[t * 3], *b = &g.tri[t * 3];
        int rot = 0;
        for (int r = 0; r < 3; r++)
            rot |= a[0] == b[r] && a[1] == b[(r + 1) % 3] && a[2] == b[(r + 2) % 3];
        same &= rot;
    }
    CHECK(same);
    CHECK(memcmp(d.surf[0].q, g.q, sizeof(uint16_t) * 3 * g.nvert) == 0);
    CHECK(memcmp(d.bmin, bmin, sizeof bmin) == 0 && memcmp(d.bmax, bmax, sizeof bmax) == 0);
    /* Quantisation error is at most half a step of the box. */
    float *back = malloc(sizeof(float) * 3 * g.nvert), worst = 0;
    proto_dequantise(d.surf[0].q, g.nvert, d.bmin, d.bmax, back);
    for (uint32_t i = 0; i < g.nvert * 3; i++)
        worst = fmaxf(worst, fabsf(back[i] - g.pos[i]));
    CHECKF(worst <= 140.0f / 65535.0f * 0.51f, "quantisation error %g mm", (double)worst);
    th_note("keyframe of %u vertices, %u triangles: %zu bytes (float32 positions alone: %u)",
            g.nvert, g.ntri, out.len, g.nvert * 12);
    free(back);
    proto_decoded_mesh_free(&d);
    proto_buf_free(&out);
    grid_free(&g);
}

TEST(proto_mesh_delta_round_trip_and_small)
{
    float bmin[3] = {-10, -10, 0}, bmax[3] = {130, 130, 100};
    grid key, cur;
    grid_make(&key, 200, 0.0f); /* 40,000 vertices, as DESIGN.md's dent */
    grid_make(&cur, 200, 6.0f);
    proto_mesh mk = mesh_of(&key, bmin, bmax, 0), mc = mesh_of(&cur, bmin, bmax, 10);
    proto_buf kb = {0}, db = {0};
    proto_header hk = header(10, 1), hd = header(11, 2);
    REQUIRE(proto_encode_mesh_key(&kb, &hk, &mk, 1) == PROTO_OK);
    REQUIRE(proto_encode_mesh_delta(&db, &hd, &mk, &mc, 1) == PROTO_OK);
    proto_decoded_mesh dk, dd;
    REQUIRE(proto_decode_mesh(&dk, kb.data, kb.len) == PROTO_OK);
    REQUIRE(proto_decode_mesh(&dd, db.data, db.len) == PROTO_OK);
    CHECK(dd.h.kind == PROTO_KIND_MESH_DELTA && dd.key_frame == 10);
    uint16_t *q = malloc(sizeof(uint16_t) * 3 * cur.nvert);
    REQUIRE(proto_apply_delta(&dk, &dd, 0, q) == PROTO_OK);
    CHECK(memcmp(q, cur.q, sizeof(uint16_t) * 3 * cur.nvert) == 0);
    th_note("40k-vertex dent: keyframe %zu bytes, delta %zu bytes", kb.len, db.len);
    CHECKF(db.len <= 4096, "delta of a local dent is %zu bytes", db.len);
    /* A delta against another keyframe is refused. */
    dd.key_frame = 9;
    CHECK(proto_apply_delta(&dk, &dd, 0, q) == PROTO_ERR_ARG);
    free(q);
    proto_decoded_mesh_free(&dk);
    proto_decoded_mesh_free(&dd);
    proto_buf_free(&kb);
    proto_buf_free(&db);
    grid_free(&key);
    grid_free(&cur);
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

TEST(proto_lod_table_round_trip_and_refusals)
{
    proto_lod_entry e[3] = {{0, 0, 680, 0, 0}, {2, 680, 54, 0.01f, 0.2f}, {1, 734, 216, 0, 0}};
    proto_lod_entry *r = NULL;
    uint32_t n = 0;
    proto_buf out = {0};
    proto_header h = header(12, 3), rh;
    REQUIRE(proto_encode_lod_table(&out, &h, e, 3, 1) == PROTO_OK);
    REQUIRE(proto_decode_lod_table(&rh, &r, &n, out.data, out.len) == PROTO_OK);
    CHECK(rh.kind == PROTO_KIND_LOD_TABLE && rh.frame == 12 && n == 3);
    for (uint32_t i = 0; i < n; i++)
        CHECK(r[i].lod == e[i].lod && r[i].first_vertex == e[i].first_vertex &&
              r[i].nvert == e[i].nvert && r[i].e_pos == e[i].e_pos && r[i].e_vel == e[i].e_vel);
    free(r);
    /* Any truncation is refused; a mesh decoder refuses the kind. */
    for (size_t len = 0; len < out.len; len++)
        CHECK(proto_decode_lod_table(&rh, &r, &n, out.data, len) != PROTO_OK && !r);
    proto_decoded_mesh m;
    CHECK(proto_decode_mesh(&m, out.data, out.len) == PROTO_ERR_KIND);
    proto_decoded_mesh_free(&m);
    proto_buf_free(&out);
}

/* Every prefix of a valid frame, and frames with random bytes flipped, decode to an
 * error or to a consistent frame: never a crash, a leak or an out-of-bounds read (ASan). */
TEST(proto_decoders_survive_truncation_and_corruption)
{
    grid g;
    grid_make(&g, 12, 3.0f);
    float bmin[3] = {0, 0, 0}, bmax[3] = {30, 30, 60};
    proto_mesh m = mesh_of(&g, bmin, bmax, 0);
    proto_buf out = {0};
    proto_header h = header(1, 1);
    REQUIRE(proto_encode_mesh_key(&out, &h, &m, 1) == PROTO_OK);
    int ok_prefix = 0;
    for (size_t n = 0; n < out.len; n++) {
        proto_decoded_mesh d;
        if (proto_decode_mesh(&d, out.data, n) == PROTO_OK)
            ok_prefix++;
        proto_decoded_mesh_free(&d);
    }
    CHECK(ok_prefix == 0);
    uint8_t *c = malloc(out.len);
    int decoded = 0, refused = 0;
    for (int t = 0; t < 2000; t++) {
        memcpy(c, out.data, out.len);
        int flips = 1 + (int)(rnd() % 4);
        for (int k = 0; k < flips; k++)
            c[rnd() % out.len] ^= (uint8_t)(1u << (rnd() % 8));
        proto_decoded_mesh d;
        if (proto_decode_mesh(&d, c, out.len) == PROTO_OK) {
            decoded++;
            for (int s = 0; s < d.nsurf; s++)
                for (uint32_t i = 0; i < d.surf[s].ntri * 3; i++)
                    CHECK(d.surf[s].tri[i] < d.surf[s].nvert);
        } else {
            refused++;
        }
        proto_decoded_mesh_free(&d);
    }
    th_note("2000 corrupted keyframes: %d refused, %d decoded consistently", refused, decoded);
    CHECK(refused > 0);
    for (int t = 0; t < 500; t++) {
        size_t n = rnd() % 300;
        for (size_t i = 0; i < n; i++)
            c[i % out.len] = (uint8_t)rnd();
        if (n >= 4 && t % 2)
            memcpy(c, "SCF1", 4);
        proto_decoded_mesh d;
        proto_header sh;
        proto_slice sl;
        (void)proto_decode_mesh(&d, c, n < out.len ? n : out.len);
        proto_decoded_mesh_free(&d);
        if (proto_decode_slice(&sh, &sl, c, n < out.len ? n : out.len) == PROTO_OK)
            free((void *)sl.pixels);
    }
    free(c);
    proto_buf_free(&out);
    grid_free(&g);
}
