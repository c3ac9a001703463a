/* proto_event.h: client text messages (JSON events), the envelope and the field readers.
 * The format is specified in protocol/README.md ("Events").
 *
 * The protocol knows the envelope every message shares: one JSON object of bounded size,
 * a "type" string and a "seq" integer. What a type means and which fields it carries is
 * its owner's business: the server's own messages (pause, ping, handover, ...) and each
 * scene's events (server/scene_*.c) read their payload from the parsed object with the
 * readers below, once. The protocol knows no event and no parameter by name. Untrusted
 * input: length-bounded parse, case-sensitive keys, numbers finite and in range, strings
 * bounded, unknown keys ignored (forward compatible); every refusal names the field. */
#ifndef PROTO_PROTO_EVENT_H
#define PROTO_PROTO_EVENT_H

#include <stddef.h>
#include <stdint.h>

#include "proto.h" /* proto_status */

#ifdef __cplusplus
extern "C" {
#endif

struct cJSON;

/// One client message, its envelope read and checked. msg stays valid (and owned) until
/// proto_envelope_free.
typedef struct proto_envelope {
    const char *type;        ///< the "type" string (client bytes: any UTF-8, or worse)
    uint32_t seq;            ///< the "seq" integer, [0, 2^32 - 1]
    const struct cJSON *msg; ///< the whole object: payload readers take their fields from it
    struct cJSON *root;      ///< owned
} proto_envelope;

/// Parse len bytes (not NUL-terminated) as one message: a JSON object with nothing but
/// white space after it, "type" a string, "seq" an integer in [0, 2^32 - 1]. On error
/// returns PROTO_ERR_CORRUPT with the reason in err; env then owns nothing and is zero but
/// for seq, kept when the object had a readable one (so the refusal can name it).
proto_status proto_envelope_parse(proto_envelope *env, const char *json, size_t len, char *err,
                                  size_t err_sz);
void proto_envelope_free(proto_envelope *env);

/* Payload readers. Each reads one field of object o, checks it and writes out; on error
 * it returns PROTO_ERR_CORRUPT with a message naming the field in err. */

/// A required finite number in [lo, hi].
proto_status proto_read_number(const struct cJSON *o, const char *name, double lo, double hi,
                               double *out, char *err, size_t err_sz);
/// A required integer in [lo, hi].
proto_status proto_read_int(const struct cJSON *o, const char *name, int32_t lo, int32_t hi,
                            int32_t *out, char *err, size_t err_sz);
/// A required array of 3 finite numbers, each within lim in magnitude.
proto_status proto_read_vec3(const struct cJSON *o, const char *name, double lim, float out[3],
                             char *err, size_t err_sz);
/// A string that is one of choices ("a|b|c"); *out is its index. When the field is absent,
/// *out = def, or an error when def < 0 (required).
proto_status proto_read_choice(const struct cJSON *o, const char *name, const char *choices,
                               int def, int *out, char *err, size_t err_sz);
/// A required string of 1 to out_sz - 1 bytes, copied into out.
proto_status proto_read_string(const struct cJSON *o, const char *name, char *out, size_t out_sz,
                               char *err, size_t err_sz);

/* Parameters: a nested object flattened to dotted names ({"tissue":{"bone":{"b1":0.5}}} is
 * "tissue.bone.b1"; arrays give "name.0", "name.1", ...), at most PROTO_MAX_PARAMS leaves,
 * 3 levels, names shorter than PROTO_PARAM_NAME. A leaf is a finite number, or a string (a
 * choice given by name) shorter than PROTO_PARAM_NAME. */
#define PROTO_MAX_PARAMS 64
#define PROTO_PARAM_NAME 48

/// One leaf: the caller resolves the name. text is NULL for a number. Return 0 to go on,
/// non-zero (with err set) to stop: proto_read_params then returns PROTO_ERR_ARG.
typedef int (*proto_param_fn)(void *ctx, const char *name, double number, const char *text,
                              char *err, size_t err_sz);
/// Flatten field "params" of o (a required object) and hand each leaf to fn, in order.
/// PROTO_ERR_CORRUPT: malformed; PROTO_ERR_LIMIT: too many; PROTO_ERR_ARG: fn refused one.
proto_status proto_read_params(const struct cJSON *o, proto_param_fn fn, void *ctx, char *err,
                               size_t err_sz);

#ifdef __cplusplus
}
#endif
#endif
