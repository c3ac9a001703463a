/* fuzz_frame.c: the frame decoders against arbitrary bytes: an object frame applied to a
 * fresh decoder (the state it leaves must be consistent, or the decoder untouched) and a
 * slice. */
#include <stdlib.h>

#include "protocol/proto.h"
#include "tests/fuzz/fuzz_check.h"
#include "tests/fuzz/fuzz_targets.h"

int fuzz_frame_one(const uint8_t *data, size_t size)
{
    proto_decoder *d;
    if (proto_decoder_create(&d) == PROTO_OK) {
        proto_status st = proto_decoder_apply(d, data, size, NULL, NULL, 0);
        fuzz_check_decoder(d);
        if (st != PROTO_OK && proto_decoder_count(d) != 0)
            abort(); /* a refused frame changed the decoder */
        proto_decoder_destroy(d);
    }
    proto_header h;
    proto_slice sl;
    if (proto_decode_slice(&h, &sl, data, size) == PROTO_OK)
        free((void *)sl.pixels);
    return 0;
}

#ifdef FUZZ_MAIN
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    return fuzz_frame_one(data, size);
}
#endif
