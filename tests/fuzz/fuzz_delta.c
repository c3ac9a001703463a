/* fuzz_delta.c: frames applied in order to one object decoder, the way a client receives them:
 * keys, then deltas, transforms, appends and removals that must fit what it holds.
 * Input: frames one after another, each a u32 LE length and its bytes; when fewer than 4
 * bytes remain or a length runs past the end, the rest is the last frame. After each frame
 * the decoder must be consistent (fuzz_check.h), and a refused frame must leave it exactly as
 * it was (the client waits for a snapshot with what it had).
 *
 * The deprecated version 1 pair (a keyframe and a delta, the format this target had before):
 * when the first two frames decode as version 1 mesh frames, every surface index (and one
 * past each end) is applied into an output of exactly the keyframe surface's size followed
 * by guard words: the call must never write past nvert x 3 entries, must refuse a delta of
 * another keyframe, another vertex count or a surface that is not in both, and when it
 * applies, every entry is key + delta (mod 2^16). */
#include <stdlib.h>
#include <string.h>

#include "protocol/proto.h"
#include "tests/fuzz/fuzz_check.h"
#include "tests/fuzz/fuzz_targets.h"

#define GUARD     64
#define MAXFRAMES 32

static void apply_one(const proto_decoded_mesh *key, const proto_decoded_mesh *delta, int s)
{
    int in_key = s >= 0 && s < key->nsurf;
    size_t n = in_key ? (size_t)key->surf[s].nvert * 3 : 0;
    uint16_t *out = malloc((n + GUARD) * sizeof *out);
    if (!out)
        return;
    for (size_t i = 0; i < n + GUARD; i++)
        out[i] = (uint16_t)(0xA5A5u ^ i);
    proto_status st = proto_apply_delta(key, delta, s, out);
    for (size_t i = n; i < n + GUARD; i++)
        if (out[i] != (uint16_t)(0xA5A5u ^ i))
            abort(); /* wrote past the keyframe's surface */
    if (st == PROTO_OK) {
        if (!in_key || s >= delta->nsurf || key->h.kind != PROTO_KIND_MESH_KEY ||
            delta->h.kind != PROTO_KIND_MESH_DELTA || delta->key_frame != key->h.frame ||
            delta->surf[s].nvert != key->surf[s].nvert)
            abort(); /* applied what it must refuse */
        for (size_t i = 0; i < n; i++)
            if (out[i] != (uint16_t)(key->surf[s].q[i] + delta->surf[s].q[i]))
                abort();
    }
    free(out);
}

static void v1_pair(const uint8_t *kb, size_t klen, const uint8_t *db, size_t dlen)
{
    proto_decoded_mesh key, delta;
    proto_status ks = proto_decode_mesh(&key, kb, klen);
    proto_status ds = proto_decode_mesh(&delta, db, dlen);
    if (ks == PROTO_OK && ds == PROTO_OK)
        for (int s = -1; s <= PROTO_MAX_SURFACES; s++) {
            apply_one(&key, &delta, s);
            apply_one(&delta, &key, s); /* swapped: never a keyframe and a delta */
        }
    proto_decoded_mesh_free(&key);
    proto_decoded_mesh_free(&delta);
}

/* Split the input into frames; returns how many (at most MAXFRAMES). */
int fuzz_split_frames(const uint8_t *data, size_t size, const uint8_t **f, size_t *len)
{
    int n = 0;
    while (size > 0 && n < MAXFRAMES) {
        size_t l = size >= 4 ? (size_t)data[0] | (size_t)data[1] << 8 | (size_t)data[2] << 16 |
                                   (size_t)data[3] << 24
                             : 0;
        if (size < 4 || l > size - 4) { /* the rest is the last frame */
            f[n] = data;
            len[n++] = size;
            break;
        }
        f[n] = data + 4;
        len[n++] = l;
        data += 4 + l;
        size -= 4 + l;
    }
    return n;
}

int fuzz_delta_one(const uint8_t *data, size_t size)
{
    const uint8_t *f[MAXFRAMES];
    size_t len[MAXFRAMES];
    int n = fuzz_split_frames(data, size, f, len);
    proto_decoder *d;
    if (proto_decoder_create(&d) != PROTO_OK)
        return 0;
    for (int i = 0; i < n; i++) {
        /* An exact-size copy: ASan sees any read past the frame. */
        uint8_t *b = malloc(len[i] ? len[i] : 1);
        if (!b)
            break;
        memcpy(b, f[i], len[i]);
        uint64_t before = fuzz_state_sum(d);
        proto_status st = proto_decoder_apply(d, b, len[i], NULL, NULL, 0);
        fuzz_check_decoder(d);
        if (st != PROTO_OK && fuzz_state_sum(d) != before)
            abort(); /* a refused frame changed the decoder */
        if (i == 1) {
            uint8_t *k = malloc(len[0] ? len[0] : 1);
            if (k) {
                memcpy(k, f[0], len[0]);
                v1_pair(k, len[0], b, len[1]);
            }
            free(k);
        }
        free(b);
    }
    proto_decoder_destroy(d);
    return 0;
}

#ifdef FUZZ_MAIN
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    return fuzz_delta_one(data, size);
}
#endif
