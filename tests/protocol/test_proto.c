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

static proto_status parse(const char *s, proto_event *ev, char *err)
{
    return proto_parse_event(ev, s, strlen(s), err, 200);
}

TEST(proto_events_parse_every_type)
{
    proto_event ev;
    char err[200];
    REQUIRE(parse("{\"type\":\"grab\",\"seq\":1,\"point\":[1,2.5,-3],\"radius\":4}", &ev, err) ==
            PROTO_OK);
    CHECK(ev.type == PROTO_EV_GRAB && ev.seq == 1 && ev.world == 1 && ev.radius == 4.0f);
    CHECK(ev.point[0] == 1.0f && ev.point[1] == 2.5f && ev.point[2] == -3.0f);
    REQUIRE(parse("{\"type\":\"move\",\"seq\":2,\"point\":[0,0,9],\"space\":\"lattice\"}", &ev,
                  err) == PROTO_OK);
    CHECK(ev.type == PROTO_EV_MOVE && ev.world == 0 && ev.point[2] == 9.0f);
    REQUIRE(parse("{\"type\":\"release\",\"seq\":3}", &ev, err) == PROTO_OK);
    CHECK(ev.type == PROTO_EV_RELEASE);
    REQUIRE(parse("{\"type\":\"set_params\",\"seq\":4,\"params\":{\"alpha\":0.9,"
                  "\"tissue\":{\"skin_fat\":{\"inv_mass\":0.8}},\"hu_threshold\":[-500,20,400]}}",
                  &ev, err) == PROTO_OK);
    CHECK(ev.type == PROTO_EV_SET_PARAMS && ev.nparams == 5);
    CHECK(!strcmp(ev.param_name[0], "alpha") && ev.param_value[0] == 0.9);
    CHECK(!strcmp(ev.param_name[1], "tissue.skin_fat.inv_mass") && ev.param_value[1] == 0.8);
    CHECK(!strcmp(ev.param_name[4], "hu_threshold.2") && ev.param_value[4] == 400.0);
    REQUIRE(parse("{\"type\":\"set_condition\",\"seq\":5,\"condition\":\"B\"}", &ev, err) ==
            PROTO_OK);
    CHECK(ev.condition == 'B');
    REQUIRE(parse("{\"type\":\"slice\",\"seq\":6,\"plane\":\"sagittal\",\"index\":12,"
                  "\"level\":40,\"width\":400}",
                  &ev, err) == PROTO_OK);
    CHECK(ev.plane == 2 && ev.index == 12 && ev.level_hu == 40.0f && ev.width_hu == 400.0f);
    REQUIRE(parse(" {\"type\":\"ping\",\"seq\":7,\"t\":1234.5} \n", &ev, err) == PROTO_OK);
    CHECK(ev.type == PROTO_EV_PING && ev.client_time_ms == 1234.5);
    REQUIRE(parse("{\"type\":\"handover\",\"seq\":8,\"to\":\"c7\"}", &ev, err) == PROTO_OK);
    CHECK(!strcmp(ev.target, "c7"));
    for (int k = 0; k < 3; k++) {
        const char *m[3] = {"{\"type\":\"pause\",\"seq\":9}", "{\"type\":\"resume\",\"seq\":9}",
                            "{\"type\":\"reset\",\"seq\":9}"};
        CHECK(parse(m[k], &ev, err) == PROTO_OK);
    }
    /* The cloth's. */
    REQUIRE(parse("{\"type\":\"grab\",\"seq\":10,\"character\":2,\"vertex\":33,"
                  "\"point\":[0.1,0.2,1.3]}",
                  &ev, err) == PROTO_OK);
    CHECK(ev.type == PROTO_EV_GRAB && ev.character == 2 && ev.vertex == 33 && ev.point[2] == 1.3f);
    REQUIRE(parse("{\"type\":\"camera\",\"seq\":11,\"point\":[6,2,1.7]}", &ev, err) == PROTO_OK);
    CHECK(ev.type == PROTO_EV_CAMERA && ev.point[0] == 6.0f);
    REQUIRE(parse("{\"type\":\"force_lod\",\"seq\":12,\"character\":-1,\"lod\":2}", &ev, err) ==
            PROTO_OK);
    CHECK(ev.type == PROTO_EV_FORCE_LOD && ev.character == -1 && ev.lod == 2);
    REQUIRE(parse("{\"type\":\"motion\",\"seq\":13,\"character\":0,\"motion\":\"run\"}", &ev,
                  err) == PROTO_OK);
    CHECK(ev.type == PROTO_EV_MOTION && !strcmp(ev.motion, "run"));
    REQUIRE(parse("{\"type\":\"wind\",\"seq\":14,\"impulse\":[-3,0,1.5]}", &ev, err) == PROTO_OK);
    CHECK(ev.type == PROTO_EV_WIND && ev.point[0] == -3.0f);
    CHECK(parse("{\"type\":\"wind\",\"seq\":15,\"impulse\":[300,0,0]}", &ev, err) ==
              PROTO_ERR_CORRUPT &&
          strstr(err, "impulse[0]"));
    CHECK(parse("{\"type\":\"force_lod\",\"seq\":16,\"character\":0,\"lod\":1.5}", &ev, err) ==
              PROTO_ERR_CORRUPT &&
          strstr(err, "\"lod\" must be an integer"));
    CHECK(parse("{\"type\":\"grab\",\"seq\":17,\"vertex\":3,\"point\":[0,0,0]}", &ev, err) ==
              PROTO_ERR_CORRUPT &&
          strstr(err, "character"));
}

TEST(proto_events_refuse_bad_input_with_reasons)
{
    static const struct {
        const char *json, *want;
        proto_status st;
    } bad[] = {
        {"{\"type\":\"grab\",", "malformed", PROTO_ERR_CORRUPT},
        {"[1,2,3]", "object", PROTO_ERR_CORRUPT},
        {"{\"type\":\"jump\",\"seq\":1}", "unknown message type \"jump\"", PROTO_ERR_KIND},
        {"{\"type\":\"Grab\",\"seq\":1}", "unknown", PROTO_ERR_KIND},
        {"{\"seq\":1}", "\"type\"", PROTO_ERR_CORRUPT},
        {"{\"type\":\"release\"}", "\"seq\" is missing", PROTO_ERR_CORRUPT},
        {"{\"type\":\"release\",\"seq\":-1}", "\"seq\"", PROTO_ERR_CORRUPT},
        {"{\"type\":\"release\",\"seq\":1.5}", "integer", PROTO_ERR_CORRUPT},
        {"{\"type\":\"grab\",\"seq\":1,\"point\":[1,2],\"radius\":1}", "point", PROTO_ERR_CORRUPT},
        {"{\"type\":\"grab\",\"seq\":1,\"point\":[1,2,1e999],\"radius\":1}", "point[2]",
         PROTO_ERR_CORRUPT},
        {"{\"type\":\"grab\",\"seq\":1,\"point\":[1,2,3]}", "\"radius\" is missing",
         PROTO_ERR_CORRUPT},
        {"{\"type\":\"grab\",\"seq\":1,\"point\":[1,2,3],\"radius\":\"big\"}", "finite number",
         PROTO_ERR_CORRUPT},
        {"{\"type\":\"move\",\"seq\":1,\"point\":[1,2,3],\"space\":\"mars\"}", "\"space\"",
         PROTO_ERR_CORRUPT},
        {"{\"type\":\"set_condition\",\"seq\":1,\"condition\":\"D\"}", "\"condition\"",
         PROTO_ERR_CORRUPT},
        {"{\"type\":\"set_params\",\"seq\":1,\"params\":{\"alpha\":\"x\"}}", "\"alpha\"",
         PROTO_ERR_CORRUPT},
        {"{\"type\":\"slice\",\"seq\":1,\"plane\":\"top\",\"index\":1,\"level\":0,\"width\":1}",
         "\"plane\"", PROTO_ERR_CORRUPT},
        {"{\"type\":\"slice\",\"seq\":1,\"plane\":\"axial\",\"index\":1,\"level\":0,\"width\":0}",
         "\"width\"", PROTO_ERR_CORRUPT},
        {"{\"type\":\"release\",\"seq\":1} garbage", "trailing", PROTO_ERR_CORRUPT},
        {"", "empty", PROTO_ERR_CORRUPT},
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        proto_event ev;
        char err[200] = "";
        proto_status st = proto_parse_event(&ev, bad[k].json, strlen(bad[k].json), err, sizeof err);
        CHECKF(st == bad[k].st, "%s: status %d, want %d", bad[k].json, (int)st, (int)bad[k].st);
        CHECKF(strstr(err, bad[k].want) != NULL, "%s: message \"%s\" lacks \"%s\"", bad[k].json,
               err, bad[k].want);
    }
    /* Too many parameters. */
    char big[8192];
    size_t n = (size_t)snprintf(big, sizeof big, "{\"type\":\"set_params\",\"seq\":1,\"params\":{");
    for (int i = 0; i < 70; i++)
        n += (size_t)snprintf(big + n, sizeof big - n, "%s\"p%d\":%d", i ? "," : "", i, i);
    snprintf(big + n, sizeof big - n, "}}");
    proto_event ev;
    char err[200];
    CHECK(proto_parse_event(&ev, big, strlen(big), err, sizeof err) == PROTO_ERR_LIMIT);
    /* Not NUL-terminated: the parse must stay inside the given length. */
    char unterminated[] = {'{', '"', 't', 'y', 'p', 'e', '"', ':', '"'};
    CHECK(proto_parse_event(&ev, unterminated, sizeof unterminated, err, sizeof err) ==
          PROTO_ERR_CORRUPT);
}
