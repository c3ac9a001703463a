/* fuzz_event.c: the JSON event parser against arbitrary bytes (not NUL-terminated). */
#include <stdlib.h>
#include <string.h>

#include "protocol/proto.h"
#include "tests/fuzz/fuzz_targets.h"

int fuzz_event_one(const uint8_t *data, size_t size)
{
    /* Copy into an exact-size buffer so ASan sees any read past the given length. */
    char *buf = malloc(size ? size : 1);
    if (!buf)
        return 0;
    memcpy(buf, data, size);
    proto_event ev;
    char err[256];
    if (proto_parse_event(&ev, buf, size, err, sizeof err) == PROTO_OK) {
        if (ev.type == PROTO_EV_SET_PARAMS && (ev.nparams < 0 || ev.nparams > PROTO_MAX_PARAMS))
            abort();
    } else if (!err[0]) {
        abort(); /* every refusal says why */
    }
    free(buf);
    return 0;
}

#ifdef FUZZ_MAIN
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    return fuzz_event_one(data, size);
}
#endif
