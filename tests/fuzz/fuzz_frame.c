/* fuzz_frame.c: the frame decoders against arbitrary bytes: an object frame applied to a
 * fresh decoder (the state it leaves must be consistent, or the decoder untouched), a slice,
 * and the deprecated version 1 mesh and LOD table frames. */
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
    /* Version 1 (deprecated). */
    proto_decoded_mesh m;
    if (proto_decode_mesh(&m, data, size) == PROTO_OK) {
        for (int s = 0; s < m.nsurf; s++)
            for (uint32_t i = 0; i < m.surf[s].ntri * 3; i++)
                if (m.surf[s].tri[i] >= m.surf[s].nvert)
                    abort();
    }
    proto_decoded_mesh_free(&m);
    proto_lod_entry *e;
    uint32_t n;
    if (proto_decode_lod_table(&h, &e, &n, data, size) == PROTO_OK)
        free(e);
    return 0;
}

#ifdef FUZZ_MAIN
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    return fuzz_frame_one(data, size);
}
#endif
