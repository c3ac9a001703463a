/* proto.h: Softcast's wire format, bytes to structs and back. No sockets, no simulation
 * internals: everything here can be fuzzed alone. The format is specified in
 * protocol/README.md; this header is its C binding.
 *
 * Binary frames (server to client): a 40-byte little-endian header, then a zstd payload.
 * Text messages (client to server): JSON events, see proto_event.h. */
#ifndef PROTO_PROTO_H
#define PROTO_PROTO_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define PROTO_MAGIC       0x31464353u /* "SCF1" read as a little-endian u32 */
#define PROTO_VERSION     1
#define PROTO_HEADER_SIZE 40
/* Decoders refuse anything that would decompress past this (a hostile or broken peer). */
#define PROTO_MAX_PAYLOAD  (64u << 20)
#define PROTO_MAX_SURFACES 4

typedef enum proto_kind {
    PROTO_KIND_MESH_KEY = 1,   ///< topology and absolute quantised positions
    PROTO_KIND_MESH_DELTA = 2, ///< positions as wrapping u16 differences from a keyframe
    PROTO_KIND_SLICE = 3,      ///< an 8-bit windowed image of one plane
    PROTO_KIND_LOD_TABLE = 4,  ///< cloth: each character's LOD and vertex range
} proto_kind;

typedef enum proto_status {
    PROTO_OK = 0,
    PROTO_ERR_SHORT,   ///< fewer bytes than the format needs
    PROTO_ERR_MAGIC,   ///< not a Softcast frame
    PROTO_ERR_VERSION, ///< a version this decoder does not know
    PROTO_ERR_KIND,    ///< unknown frame kind
    PROTO_ERR_LIMIT,   ///< a size over the decoder's limits
    PROTO_ERR_CORRUPT, ///< inconsistent sizes or undecodable payload
    PROTO_ERR_NOMEM,
    PROTO_ERR_ARG, ///< bad argument to an encoder
} proto_status;

const char *proto_status_str(proto_status s);

typedef struct proto_header {
    uint8_t version;
    uint8_t kind;          ///< proto_kind
    uint64_t frame;        ///< session frame number
    uint32_t last_seq;     ///< last client event sequence applied in this frame
    double sim_time_s;     ///< simulated time of the frame
    uint32_t payload_size; ///< compressed bytes after the header
    uint32_t raw_size;     ///< payload bytes once decompressed
} proto_header;

/// Write the 40-byte header into out.
void proto_header_write(uint8_t out[PROTO_HEADER_SIZE], const proto_header *h);
/// Read and check a header from the first bytes of a frame of len bytes.
proto_status proto_header_read(proto_header *h, const uint8_t *buf, size_t len);

/* ------------------------------------------------------------------ meshes */

/// One surface of a mesh frame. Positions are in world mm inside [bmin, bmax]; on the
/// wire each component is quantised to u16: q = round((p - bmin) / (bmax - bmin) * 65535).
typedef struct proto_surface {
    uint8_t id; ///< 0 skin, 1 bone (the scene says)
    uint32_t nvert;
    uint32_t ntri;       ///< keyframes only
    const uint32_t *tri; ///< (ntri x 3), keyframes only
    uint16_t *q;         ///< (nvert x 3) quantised positions, owned by the caller
} proto_surface;

typedef struct proto_mesh {
    float bmin[3], bmax[3]; ///< the quantisation box, world mm (keyframes carry it)
    uint64_t key_frame;     ///< deltas: the frame number of the keyframe they apply to
    int nsurf;
    proto_surface surf[PROTO_MAX_SURFACES];
} proto_mesh;

/// Quantise n points (n x 3 floats, world mm) into q (n x 3) inside the box.
void proto_quantise(const float *p, uint32_t n, const float bmin[3], const float bmax[3],
                    uint16_t *q);
/// The inverse: q (n x 3) to world mm.
void proto_dequantise(const uint16_t *q, uint32_t n, const float bmin[3], const float bmax[3],
                      float *p);

/// A growable output buffer. Free with proto_buf_free.
typedef struct proto_buf {
    uint8_t *data;
    size_t len, cap;
} proto_buf;
void proto_buf_free(proto_buf *b);

/// Encode a keyframe (topology + absolute positions) as one whole frame into out.
/// zstd_level: 1 is fast and good (DESIGN.md).
proto_status proto_encode_mesh_key(proto_buf *out, const proto_header *h, const proto_mesh *m,
                                   int zstd_level);
/// Encode a delta frame: key holds the keyframe's quantised positions, cur the current
/// ones (same surfaces, same vertex counts).
proto_status proto_encode_mesh_delta(proto_buf *out, const proto_header *h, const proto_mesh *key,
                                     const proto_mesh *cur, int zstd_level);

/// A decoded mesh frame; arrays owned by the struct (free with proto_decoded_mesh_free).
typedef struct proto_decoded_mesh {
    proto_header h;
    float bmin[3], bmax[3]; ///< keyframes
    uint64_t key_frame;     ///< deltas
    int nsurf;
    struct {
        uint8_t id;
        uint32_t nvert, ntri;
        uint32_t *tri; ///< keyframes: (ntri x 3)
        uint16_t *q;   ///< keyframes: positions; deltas: wrapping differences
    } surf[PROTO_MAX_SURFACES];
} proto_decoded_mesh;

/// Decode a mesh frame (either kind). Every size is checked against the buffer and
/// PROTO_MAX_PAYLOAD; indices are checked against nvert.
proto_status proto_decode_mesh(proto_decoded_mesh *out, const uint8_t *buf, size_t len);
void proto_decoded_mesh_free(proto_decoded_mesh *m);
/// Apply a decoded delta to a decoded keyframe's positions: out = key + delta (mod 2^16).
proto_status proto_apply_delta(const proto_decoded_mesh *key, const proto_decoded_mesh *delta,
                               int surface, uint16_t *out);

/* ------------------------------------------------------------------ slices */

typedef struct proto_slice {
    uint8_t plane; ///< 0 axial, 1 coronal, 2 sagittal
    uint32_t index, width, height;
    float level_hu, width_hu;
    const uint8_t *pixels; ///< (width x height), row-major; decoded: owned
} proto_slice;

proto_status proto_encode_slice(proto_buf *out, const proto_header *h, const proto_slice *s,
                                int zstd_level);
/// Decode a slice frame; out->pixels is malloc'd (free it).
proto_status proto_decode_slice(proto_header *h, proto_slice *out, const uint8_t *buf, size_t len);

/* ------------------------------------------------------------- LOD table */

/// Kind 4: which LOD each character of a cloth scene shows, where its vertices sit in the
/// keyframe of the same frame number (the capes' surface), and its latest switch's E_pos
/// and E_vel (m, m/s; 0 before any). Sent just before every keyframe.
typedef struct proto_lod_entry {
    uint8_t lod;
    uint32_t first_vertex, nvert;
    float e_pos, e_vel;
} proto_lod_entry;

proto_status proto_encode_lod_table(proto_buf *out, const proto_header *h, const proto_lod_entry *e,
                                    uint32_t n, int zstd_level);
/// Decode; *entries is malloc'd (free it).
proto_status proto_decode_lod_table(proto_header *h, proto_lod_entry **entries, uint32_t *n,
                                    const uint8_t *buf, size_t len);

#ifdef __cplusplus
}
#endif
#endif
