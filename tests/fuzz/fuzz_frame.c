/* fuzz_frame.c: the frame decoders against arbitrary bytes. */
#include <stdlib.h>

#include "protocol/proto.h"
#include "tests/fuzz/fuzz_targets.h"

int fuzz_frame_one(const uint8_t *data, size_t size)
{
    proto_decoded_mesh m;
    if (proto_decode_mesh(&m, data, size) == PROTO_OK) {
        /* A frame that decodes must be self-consistent. */
        for (int s = 0; s < m.nsurf; s++)
            for (uint32_t i = 0; i < m.surf[s].ntri * 3; i++)
                if (m.surf[s].tri[i] >= m.surf[s].nvert)
                    abort();
    }
    proto_decoded_mesh_free(&m);
    proto_header h;
    proto_slice sl;
    if (proto_decode_slice(&h, &sl, data, size) == PROTO_OK)
        free((void *)sl.pixels);
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
