/* fuzz_delta.c: proto_apply_delta on a keyframe and a delta decoded from arbitrary bytes.
 * Input: u32 LE length of the keyframe, its bytes, then the delta's. When both decode as
 * mesh frames, every surface index (and one past each end) is applied into an output of
 * exactly the keyframe surface's size followed by guard words: the call must never write
 * past nvert x 3 entries (checked without ASan too), must refuse a delta of another
 * keyframe, another vertex count or a surface that is not in both, and when it applies,
 * every entry is key + delta (mod 2^16). */
#include <stdlib.h>
#include <string.h>

#include "protocol/proto.h"
#include "tests/fuzz/fuzz_targets.h"

#define GUARD 64

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

int fuzz_delta_one(const uint8_t *data, size_t size)
{
    if (size < 4)
        return 0;
    size_t klen =
        (size_t)data[0] | (size_t)data[1] << 8 | (size_t)data[2] << 16 | (size_t)data[3] << 24;
    if (klen > size - 4)
        return 0;
    /* Exact-size copies: ASan sees any read past either frame. */
    size_t dlen = size - 4 - klen;
    uint8_t *kb = malloc(klen ? klen : 1), *db = malloc(dlen ? dlen : 1);
    if (kb && db) {
        memcpy(kb, data + 4, klen);
        memcpy(db, data + 4 + klen, dlen);
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
    free(kb);
    free(db);
    return 0;
}

#ifdef FUZZ_MAIN
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    return fuzz_delta_one(data, size);
}
#endif
