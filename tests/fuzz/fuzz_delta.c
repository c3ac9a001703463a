/* fuzz_delta.c: frames applied in order to one object decoder, the way a client receives them:
 * keys, then deltas, transforms, appends and removals that must fit what it holds.
 * Input: frames one after another, each a u32 LE length and its bytes; when fewer than 4
 * bytes remain or a length runs past the end, the rest is the last frame. After each frame
 * the decoder must be consistent (fuzz_check.h), and a refused frame must leave it exactly as
 * it was (the client waits for a snapshot with what it had). */
#include <stdlib.h>
#include <string.h>

#include "protocol/proto.h"
#include "tests/fuzz/fuzz_check.h"
#include "tests/fuzz/fuzz_targets.h"

#define MAXFRAMES 32

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
