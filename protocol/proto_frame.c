/* proto_frame.c: what every frame kind shares (the 40-byte header, the zstd envelope,
 * buffers, transforms) and the slice frame. Object frames live in proto_objects_enc.c and
 * proto_objects_dec.c.
 * Every read is bounds-checked: this is the code that meets hostile bytes. */
#include "proto.h"
#include "proto_wire.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

const char *proto_status_str(proto_status s)
{
    switch (s) {
    case PROTO_OK:
        return "ok";
    case PROTO_ERR_SHORT:
        return "frame too short";
    case PROTO_ERR_MAGIC:
        return "not a Softcast frame";
    case PROTO_ERR_VERSION:
        return "unknown protocol version";
    case PROTO_ERR_KIND:
        return "unknown kind";
    case PROTO_ERR_LIMIT:
        return "over a size limit";
    case PROTO_ERR_CORRUPT:
        return "corrupt frame";
    case PROTO_ERR_NOMEM:
        return "out of memory";
    case PROTO_ERR_ARG:
        return "bad argument";
    case PROTO_ERR_STATE:
        return "frame does not fit the objects held";
    }
    return "unknown status";
}

/* ------------------------------------------------------------------ buffers */

void proto_buf_free(proto_buf *b)
{
    free(b->data);
    memset(b, 0, sizeof *b);
}

int wire_reserve(proto_buf *b, size_t extra)
{
    if (extra > PROTO_MAX_PAYLOAD * 2u || b->len + extra <= b->cap)
        return extra <= PROTO_MAX_PAYLOAD * 2u;
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->len + extra)
        cap *= 2;
    uint8_t *d = realloc(b->data, cap);
    if (!d)
        return 0;
    b->data = d;
    b->cap = cap;
    return 1;
}

int wire_grow(void **p, uint32_t *cap, uint32_t need, size_t item)
{
    if (need <= *cap)
        return 1;
    uint32_t c = *cap ? *cap : 16;
    while (c < need)
        c = c > UINT32_MAX / 2 ? need : c * 2;
    void *q = realloc(*p, (size_t)c * item);
    if (!q)
        return 0;
    *p = q;
    *cap = c;
    return 1;
}

uint8_t *wire_put(proto_buf *b, const void *src, size_t n)
{
    if (!wire_reserve(b, n))
        return NULL;
    uint8_t *p = b->data + b->len;
    if (src)
        memcpy(p, src, n);
    else
        memset(p, 0, n);
    b->len += n;
    return p;
}

/* ------------------------------------------------------------------- header */

void proto_header_write(uint8_t out[PROTO_HEADER_SIZE], const proto_header *h)
{
    uint64_t t;
    memcpy(&t, &h->sim_time_s, 8);
    memset(out, 0, PROTO_HEADER_SIZE);
    wire_put_u32(out, PROTO_MAGIC);
    out[4] = PROTO_VERSION;
    out[5] = h->kind;
    wire_put_u16(out + 6, PROTO_HEADER_SIZE);
    wire_put_u64(out + 8, h->frame);
    wire_put_u32(out + 16, h->last_seq);
    wire_put_u32(out + 20, h->raw_size);
    wire_put_u64(out + 24, t);
    wire_put_u32(out + 32, h->payload_size);
    wire_put_u32(out + 36, h->kind == PROTO_KIND_OBJECTS ? h->flags : 0);
}

proto_status proto_header_read(proto_header *h, const uint8_t *buf, size_t len)
{
    memset(h, 0, sizeof *h);
    if (len < 8)
        return PROTO_ERR_SHORT;
    if (wire_get_u32(buf) != PROTO_MAGIC)
        return PROTO_ERR_MAGIC;
    if (buf[4] != PROTO_VERSION) /* version 1 (mesh frames) is gone: refused like any other */
        return PROTO_ERR_VERSION;
    if (wire_get_u16(buf + 6) != PROTO_HEADER_SIZE)
        return PROTO_ERR_CORRUPT;
    if (len < PROTO_HEADER_SIZE)
        return PROTO_ERR_SHORT;
    uint64_t t = wire_get_u64(buf + 24);
    h->version = buf[4];
    h->kind = buf[5];
    h->frame = wire_get_u64(buf + 8);
    h->last_seq = wire_get_u32(buf + 16);
    h->raw_size = wire_get_u32(buf + 20);
    memcpy(&h->sim_time_s, &t, 8);
    h->payload_size = wire_get_u32(buf + 32);
    h->flags = wire_get_u32(buf + 36);
    /* Slices and object frames; flags only on the latter. */
    if (h->kind != PROTO_KIND_SLICE && h->kind != PROTO_KIND_OBJECTS) {
        return PROTO_ERR_KIND;
    } else if (h->flags &
               ~(h->kind == PROTO_KIND_OBJECTS ? PROTO_FLAG_SNAPSHOT | PROTO_FLAG_STRUCTURAL
                                               : 0u)) {
        return PROTO_ERR_CORRUPT;
    } else if ((h->flags & PROTO_FLAG_SNAPSHOT) && !(h->flags & PROTO_FLAG_STRUCTURAL)) {
        return PROTO_ERR_CORRUPT; /* a snapshot keys every object it names */
    }
    if (h->raw_size > PROTO_MAX_PAYLOAD || h->payload_size > PROTO_MAX_PAYLOAD)
        return PROTO_ERR_LIMIT;
    if ((size_t)h->payload_size != len - PROTO_HEADER_SIZE)
        return len - PROTO_HEADER_SIZE < h->payload_size ? PROTO_ERR_SHORT : PROTO_ERR_CORRUPT;
    return PROTO_OK;
}

proto_status wire_finish(proto_buf *out, const proto_header *h0, uint8_t kind, uint32_t flags,
                         const proto_buf *raw, int level)
{
    return wire_finish_cctx(out, h0, kind, flags, raw, level, NULL);
}

proto_status wire_finish_cctx(proto_buf *out, const proto_header *h0, uint8_t kind, uint32_t flags,
                              const proto_buf *raw, int level, void *cctx)
{
    if (raw->len > PROTO_MAX_PAYLOAD)
        return PROTO_ERR_LIMIT;
    size_t bound = ZSTD_compressBound(raw->len);
    out->len = 0;
    if (!wire_reserve(out, PROTO_HEADER_SIZE + bound))
        return PROTO_ERR_NOMEM;
    const void *src = raw->data ? raw->data : (const void *)"";
    size_t z = cctx ? ZSTD_compressCCtx((ZSTD_CCtx *)cctx, out->data + PROTO_HEADER_SIZE, bound,
                                        src, raw->len, level)
                    : ZSTD_compress(out->data + PROTO_HEADER_SIZE, bound, src, raw->len, level);
    if (ZSTD_isError(z))
        return PROTO_ERR_CORRUPT;
    proto_header h = *h0;
    h.kind = kind;
    h.flags = flags;
    h.raw_size = (uint32_t)raw->len;
    h.payload_size = (uint32_t)z;
    proto_header_write(out->data, &h);
    out->len = PROTO_HEADER_SIZE + z;
    return PROTO_OK;
}

proto_status wire_open(proto_header *h, uint8_t **raw, const uint8_t *buf, size_t len,
                       unsigned kinds)
{
    *raw = NULL;
    proto_status st = proto_header_read(h, buf, len);
    if (st != PROTO_OK)
        return st;
    if (!(kinds & (1u << h->kind)))
        return PROTO_ERR_KIND;
    const uint8_t *z = buf + PROTO_HEADER_SIZE;
    unsigned long long content = ZSTD_getFrameContentSize(z, h->payload_size);
    if (content == ZSTD_CONTENTSIZE_ERROR || content != h->raw_size)
        return PROTO_ERR_CORRUPT;
    *raw = malloc(h->raw_size ? h->raw_size : 1);
    if (!*raw)
        return PROTO_ERR_NOMEM;
    size_t n = ZSTD_decompress(*raw, h->raw_size, z, h->payload_size);
    if (ZSTD_isError(n) || n != h->raw_size) {
        free(*raw);
        *raw = NULL;
        return PROTO_ERR_CORRUPT;
    }
    return PROTO_OK;
}

/* ---------------------------------------------------------------- transforms */

proto_transform proto_transform_identity(void)
{
    proto_transform xf = {{0.0f, 0.0f, 0.0f}, {0.0f, 0.0f, 0.0f, 1.0f}};
    return xf;
}

void proto_transform_apply(const proto_transform *xf, const float *local, uint32_t n, float *world)
{
    /* v' = v + 2w (u x v) + 2 u x (u x v), u = (x, y, z): the unit quaternion's rotation. */
    const float x = xf->r[0], y = xf->r[1], z = xf->r[2], w = xf->r[3];
    for (uint32_t i = 0; i < n; i++) {
        float vx = local[i * 3], vy = local[i * 3 + 1], vz = local[i * 3 + 2];
        float cx = 2.0f * (y * vz - z * vy), cy = 2.0f * (z * vx - x * vz),
              cz = 2.0f * (x * vy - y * vx);
        world[i * 3] = vx + w * cx + (y * cz - z * cy) + xf->t[0];
        world[i * 3 + 1] = vy + w * cy + (z * cx - x * cz) + xf->t[1];
        world[i * 3 + 2] = vz + w * cz + (x * cy - y * cx) + xf->t[2];
    }
}

/* A frame's rotation in 16 bits a component: the largest component is left out (and made
 * positive, q and -q being the same rotation); the other three lie in [-1/sqrt 2, 1/sqrt 2]
 * and are scaled by 32767 sqrt 2. Decoding is in double, rounded to float at the end, so
 * every decoder (C, JavaScript) gets the same bits. */
#define XF_SCALE (32767.0 * 1.41421356237309504880)

int wire_xf_encode(const proto_transform *key, float tstep, const proto_transform *xf,
                   wire_xf_code *code)
{
    for (int k = 0; k < 3; k++) {
        double dt = rint(((double)xf->t[k] - (double)key->t[k]) / (double)tstep);
        if (!(fabs(dt) <= 2147483647.0))
            return 0;
        code->dt[k] = (int32_t)dt;
    }
    unsigned big = 0;
    for (unsigned k = 1; k < 4; k++)
        if (fabsf(xf->r[k]) > fabsf(xf->r[big]))
            big = k;
    double sign = xf->r[big] < 0.0f ? -1.0 : 1.0;
    for (unsigned k = 0, j = 0; k < 4; k++) {
        if (k == big)
            continue;
        double v = rint((double)xf->r[k] * sign * XF_SCALE);
        code->c[j++] = (int16_t)(v > 32767.0 ? 32767.0 : v < -32767.0 ? -32767.0 : v);
    }
    code->largest = (uint8_t)big;
    return 1;
}

int wire_xf_decode(const proto_transform *key, float tstep, const wire_xf_code *code,
                   proto_transform *out)
{
    if (code->largest > 3)
        return 0;
    double c[3], s = 0.0;
    for (int k = 0; k < 3; k++) {
        c[k] = (double)code->c[k] / XF_SCALE;
        s += c[k] * c[k];
    }
    if (s > 1.0)
        return 0;
    for (int k = 0; k < 3; k++)
        out->t[k] = (float)((double)key->t[k] + (double)code->dt[k] * (double)tstep);
    for (unsigned k = 0, j = 0; k < 4; k++)
        out->r[k] = k == code->largest ? (float)sqrt(1.0 - s) : (float)c[j++];
    return 1;
}

void wire_xf_put(uint8_t *p, const wire_xf_code *code)
{
    for (int k = 0; k < 3; k++)
        wire_put_u32(p + 4 * k, (uint32_t)code->dt[k]);
    for (int k = 0; k < 3; k++)
        wire_put_u16(p + 12 + 2 * k, (uint16_t)code->c[k]);
    p[18] = code->largest;
}

void wire_xf_get(const uint8_t *p, wire_xf_code *code)
{
    for (int k = 0; k < 3; k++)
        code->dt[k] = (int32_t)wire_get_u32(p + 4 * k);
    for (int k = 0; k < 3; k++)
        code->c[k] = (int16_t)wire_get_u16(p + 12 + 2 * k);
    code->largest = p[18];
}

/* -------------------------------------------------------------------- slices */

proto_status proto_encode_slice(proto_buf *out, const proto_header *h, const proto_slice *s,
                                int zstd_level)
{
    uint64_t npx = (uint64_t)s->width * s->height;
    if (s->plane > 2 || npx > PROTO_MAX_PAYLOAD - 28 || (npx && !s->pixels))
        return PROTO_ERR_ARG;
    proto_buf raw = {0};
    uint8_t *p = wire_put(&raw, NULL, 24 + (size_t)npx);
    if (!p)
        return PROTO_ERR_NOMEM;
    p[0] = s->plane;
    wire_put_u32(p + 4, s->index);
    wire_put_u32(p + 8, s->width);
    wire_put_u32(p + 12, s->height);
    wire_put_f32(p + 16, s->level_hu);
    wire_put_f32(p + 20, s->width_hu);
    if (npx)
        memcpy(p + 24, s->pixels, (size_t)npx);
    proto_status st = wire_finish(out, h, PROTO_KIND_SLICE, 0, &raw, zstd_level);
    proto_buf_free(&raw);
    return st;
}

proto_status proto_decode_slice(proto_header *h, proto_slice *out, const uint8_t *buf, size_t len)
{
    memset(out, 0, sizeof *out);
    uint8_t *raw;
    proto_status st = wire_open(h, &raw, buf, len, 1u << PROTO_KIND_SLICE);
    if (st != PROTO_OK)
        return st;
    if (h->raw_size < 24) {
        free(raw);
        return PROTO_ERR_CORRUPT;
    }
    out->plane = raw[0];
    out->index = wire_get_u32(raw + 4);
    out->width = wire_get_u32(raw + 8);
    out->height = wire_get_u32(raw + 12);
    out->level_hu = wire_get_f32(raw + 16);
    out->width_hu = wire_get_f32(raw + 20);
    uint64_t npx = (uint64_t)out->width * out->height;
    if (out->plane > 2 || npx != (uint64_t)h->raw_size - 24 || !isfinite(out->level_hu) ||
        !isfinite(out->width_hu)) {
        free(raw);
        memset(out, 0, sizeof *out);
        return PROTO_ERR_CORRUPT;
    }
    uint8_t *px = malloc((size_t)npx + 1);
    if (!px) {
        free(raw);
        return PROTO_ERR_NOMEM;
    }
    memcpy(px, raw + 24, (size_t)npx);
    out->pixels = px;
    free(raw);
    return PROTO_OK;
}
