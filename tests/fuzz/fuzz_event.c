/* fuzz_event.c: a client text message from arbitrary bytes (not NUL-terminated), as the
 * WebSocket thread takes it: the envelope (protocol/proto_event.c), then the parser of
 * every scene that has an event of that type (server/scene_*.c), then the error message
 * a refusal would send (server/text.c). Promises: no crash, leak or read out of bounds;
 * every refusal says why; a payload never passes SRV_EVENT_MAX; every error message is
 * valid JSON and valid UTF-8, whatever bytes the client sent. */
#include <stdlib.h>
#include <string.h>

#include "protocol/proto_event.h"
#include "server/scene.h"
#include "tests/fuzz/fuzz_check.h"
#include "tests/fuzz/fuzz_targets.h"

/* What the client would read: one parseable JSON object in valid UTF-8 with our fields. */
static void check_error_json(int64_t seq, const char *error, const char *detail)
{
    char text[1536];
    size_t n = srv_error_json(text, sizeof text, seq, error, detail);
    if (n != strlen(text) || !fuzz_json_text((const unsigned char *)text, n, "detail"))
        abort();
}

static void parse_payloads(const proto_envelope *env)
{
    int n;
    const srv_scene_i *const *sc = srv_scenes(&n);
    for (int k = 0; k < n; k++) {
        int i = srv_scene_event(sc[k], env->type);
        if (i < 0)
            continue;
        _Alignas(8) unsigned char out[SRV_EVENT_MAX + 16];
        memset(out + SRV_EVENT_MAX, 0xa5, 16);
        const char *error = "bad message";
        char err[256] = "";
        int size = sc[k]->events[i].parse(env->msg, out, &error, err, sizeof err);
        if (size > (int)SRV_EVENT_MAX || (size < 0 && !err[0]))
            abort();
        for (int g = 0; g < 16; g++)
            if (out[SRV_EVENT_MAX + g] != 0xa5)
                abort();
        if (size < 0)
            check_error_json(env->seq, error, err);
    }
}

int fuzz_event_one(const uint8_t *data, size_t size)
{
    /* Copy into an exact-size buffer so ASan sees any read past the given length. */
    char *buf = malloc(size ? size : 1);
    char *text = malloc(size + 1);
    if (!buf || !text) {
        free(buf);
        free(text);
        return 0;
    }
    memcpy(buf, data, size);
    proto_envelope env;
    char err[256];
    if (proto_envelope_parse(&env, buf, size, err, sizeof err) == PROTO_OK) {
        parse_payloads(&env);
        check_error_json(env.seq, "unknown message type", env.type); /* quotes the type */
        proto_envelope_free(&env);
    } else if (!err[0]) {
        abort(); /* every refusal says why */
    }
    /* The raw bytes as an error's detail, as if a client's text were quoted whole. */
    memcpy(text, data, size);
    text[size] = 0;
    check_error_json(-1, "bad request", text);
    free(text);
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
