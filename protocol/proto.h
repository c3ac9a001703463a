/* proto.h: Softcast's wire format, bytes to structs and back. No sockets, no simulation
 * internals: everything here can be fuzzed alone. The format is specified in
 * protocol/README.md; this header is its C binding.
 *
 * Binary frames (server to client): a 40-byte little-endian header, then a zstd payload.
 * Frames are version 2: object frames (kind 5: objects with their own transform, triangle
 * surfaces and line sets, keyed per object, growing by appends) and slices (kind 3).
 * Text messages (client to server): JSON events, see proto_event.h. */
#ifndef PROTO_PROTO_H
#define PROTO_PROTO_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define PROTO_MAGIC       0x31464353u /* "SCF1" read as a little-endian u32 */
#define PROTO_VERSION     2           /* object frames (kind 5) and slices (kind 3) */
#define PROTO_HEADER_SIZE 40
/* Decoders refuse anything that would decompress past this (a hostile or broken peer). */
#define PROTO_MAX_PAYLOAD (64u << 20)

typedef enum proto_kind {
    PROTO_KIND_SLICE = 3,   ///< an 8-bit windowed image of one plane
    PROTO_KIND_OBJECTS = 5, ///< objects keyed, appended to, moved, removed
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
    PROTO_ERR_ARG,   ///< bad argument to an encoder
    PROTO_ERR_STATE, ///< a well-formed frame that does not fit the decoder's objects (an object
                     ///< or key it does not hold, an append that does not start where it ends)
} proto_status;

const char *proto_status_str(proto_status s);

/// Header flags (kind 5; 0 on slices).
#define PROTO_FLAG_SNAPSHOT   1u ///< every live object, each keyed: a client may start here
#define PROTO_FLAG_STRUCTURAL 2u ///< keys, appends or removes an object: never skip it

typedef struct proto_header {
    uint8_t version;       ///< PROTO_VERSION (any other is refused)
    uint8_t kind;          ///< proto_kind
    uint64_t frame;        ///< session frame number
    uint32_t last_seq;     ///< last client event sequence applied in this frame
    double sim_time_s;     ///< simulated time of the frame
    uint32_t payload_size; ///< compressed bytes after the header
    uint32_t raw_size;     ///< payload bytes once decompressed
    uint32_t flags;        ///< PROTO_FLAG_* (kind 5)
} proto_header;

/// Write the 40-byte header into out (version PROTO_VERSION).
void proto_header_write(uint8_t out[PROTO_HEADER_SIZE], const proto_header *h);
/// Read and check a header from the first bytes of a frame of len bytes.
proto_status proto_header_read(proto_header *h, const uint8_t *buf, size_t len);

/// A growable output buffer. Free with proto_buf_free.
typedef struct proto_buf {
    uint8_t *data;
    size_t len, cap;
} proto_buf;
void proto_buf_free(proto_buf *b);

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

/* ============================================================= object frames */

/* Limits every decoder keeps (README "Limits"); encoders refuse input past them. */
#define PROTO_MAX_OBJECTS      4096u      ///< live objects a decoder holds; records a frame
#define PROTO_MAX_OBJECT_VERTS (1u << 22) ///< vertices of one object
#define PROTO_MAX_OBJECT_ELEMS (1u << 22) ///< triangles or segments of one object
#define PROTO_MAX_TOTAL_VERTS  (1u << 23) ///< vertices of all live objects together
#define PROTO_MAX_TOTAL_ELEMS  (1u << 23) ///< elements of all live objects together
#define PROTO_MAX_INFO         4          ///< numbers a key may carry about itself

typedef enum proto_primitive {
    PROTO_PRIM_TRIANGLES = 1, ///< elements are (i, j, k), counter-clockwise seen from outside
    PROTO_PRIM_LINES = 2,     ///< elements are segments (i, j)
} proto_primitive;

/// What a frame's record says about one object (a bit mask).
#define PROTO_PART_REMOVE    1u  ///< the object is gone
#define PROTO_PART_KEY       2u  ///< full state: box, topology, positions, key transform
#define PROTO_PART_APPEND    4u  ///< new vertices and elements after the held ones
#define PROTO_PART_TRANSFORM 8u  ///< this frame's transform (absent: the key's)
#define PROTO_PART_DELTA     16u ///< this frame's positions as differences from the base
#define PROTO_PART_HOLD \
    32u ///< show the vertices the last frame showed (an object updated less often than every
        ///< frame); alone, its transform too; with TRANSFORM, this frame's
#define PROTO_PART_SPARSE \
    64u ///< with DELTA: the delta names the vertex ranges that differ from the base and carries
        ///< those vertices only (a dent costs its vertices, not the surface's)

/// A rigid transform: world = rotate(r, local) + t. r is a unit quaternion (x, y, z, w).
typedef struct proto_transform {
    float t[3];
    float r[4];
} proto_transform;

/// The identity transform.
proto_transform proto_transform_identity(void);
/// world (n x 3) = rotate(xf->r, local) + xf->t; world may be local.
void proto_transform_apply(const proto_transform *xf, const float *local, uint32_t n, float *world);

/* ------------------------------------------------------------------ encoder */

/// One object as the server sees it this frame. Positions are in the object's local frame
/// (a cape in its character's root frame), inside the box; the encoder quantises them.
typedef struct proto_object_in {
    uint16_t id;       ///< unique among the frame's objects; the server's choice
    uint8_t primitive; ///< proto_primitive
    uint8_t qbits;     ///< bits per position component, 1 to 16 (0: 16); a change re-keys
    uint8_t lod;       ///< the scene's level of detail (0 finest, 0 if none); a change re-keys
    uint8_t ninfo;     ///< 0 to PROTO_MAX_INFO numbers sent with each key of the object
    float info[PROTO_MAX_INFO]; ///< cloth: E_pos (m), E_vel (m/s) of the latest LOD switch
    float bmin[3], bmax[3];     ///< the quantisation box, local units; a change re-keys
    uint32_t nvert;
    const float *pos;      ///< (nvert x 3) local positions
    const float *scalar;   ///< (nvert) per-vertex scalar (energy...) or NULL; a change of
                           ///< presence re-keys
    float smin, smax;      ///< the scalar's range (quantised to 16 bits in it); a change re-keys
    uint32_t nelem;        ///< triangles or segments
    const uint32_t *elem;  ///< (nelem x 3) or (nelem x 2) vertex indices, each below nvert
    uint32_t topo_version; ///< change it whenever elem or nvert change: the encoder then
                           ///< appends (old elements a prefix of the new) or re-keys
    proto_transform xf;    ///< local to world, this frame (the encoder normalises r)
    float tstep;   ///< the position step of this object's frame transforms, scene units (0: the
                   ///< box's largest extent / 65535); a change re-keys
    int force_key; ///< 1: key this object in this frame whatever else holds
    int hold;      ///< 1: clients keep the vertices and scalars the encoder last sent (pos
                   ///< and scalar, still valid, are not sent) and take this frame's xf: update
                   ///< far objects' shapes less often while they move every frame. Ignored
                   ///< when the object must be keyed or grows
    /// Where pos and scalar may differ from this object's input in the encoder's last frame:
    /// nranges (first vertex, count) pairs, ascending and disjoint; outside them the input is
    /// the same as then, so the encoder quantises only these (a dent costs its moved
    /// vertices). NULL: any vertex may have changed. Read only for an object that was keyed
    /// or updated in the encoder's last frame and keeps its vertex count; the frame's bytes
    /// are the same as without it.
    const uint32_t *ranges;
    uint32_t nranges;
} proto_object_in;

typedef struct proto_encoder_options {
    int zstd_level;     ///< 1 is fast and good (DESIGN.md; higher levels gain 2-7% here)
    uint32_t key_every; ///< re-key an object at least every this many frames (0: never)
    float rekey_ratio;  ///< re-key an object when its delta's coded vertex stream is longer
                        ///< than this times its key's coded streams (0: never on size)
} proto_encoder_options;

/// zstd level 1, no timed re-key, re-key when a delta codes longer than the key.
proto_encoder_options proto_default_encoder_options(void);

/// What one encoded frame holds (counts of records with each part).
typedef struct proto_frame_stats {
    uint32_t nrecords, nkey, nappend, ntransform, ndelta, nremove, nhold;
    uint32_t flags; ///< the header's PROTO_FLAG_*
} proto_frame_stats;

/// The per-session encoder state: for each live object its key (serial, box, topology, base
/// quantised vertices: the key's plus every append since) and the last frame's vertices and
/// transform. One per session; only the thread that encodes the session touches it.
typedef struct proto_encoder proto_encoder;

/// o NULL: proto_default_encoder_options().
proto_status proto_encoder_create(proto_encoder **out, const proto_encoder_options *o);
void proto_encoder_destroy(proto_encoder *e);
/// Forget every object: the next frame keys them all and is a snapshot. Call it when a frame
/// the encoder made could not be published.
void proto_encoder_reset(proto_encoder *e);

/// Encode one object frame (kind 5) into out. objs are every live object this frame, in any
/// order; an object of the last frame that is not among them is removed. The encoder keys
/// an object when it is new, when its primitive, qbits, lod, box, scalar range or topology
/// (other than by appending) change, when force_key is set, after key_every frames, and when
/// its delta would cost more than rekey_ratio keys; otherwise it sends an append (topology that
/// grew), a transform (one that differs from the key's) and a delta (vertices that differ
/// from the base), or nothing. With hold set: a hold when the vertices shown differ from the
/// base, with a transform when this frame's differs from the one shown; else a transform when
/// it differs from the key's, or nothing. On error the encoder's state is unchanged. stats may
/// be NULL.
proto_status proto_encode_frame2(proto_encoder *e, proto_buf *out, const proto_header *h,
                                 const proto_object_in *objs, uint32_t n, proto_frame_stats *stats);
/// The state after the last encoded frame as a snapshot (every object keyed with its base,
/// its transform and its delta): what a joiner, or a client that missed a structural frame,
/// starts from. h carries that frame's number. Leaves the objects' state as it was (it uses
/// the encoder's scratch memory: call it from the thread that encodes the session).
proto_status proto_encode_snapshot(proto_encoder *e, proto_buf *out, const proto_header *h,
                                   proto_frame_stats *stats);

/* ------------------------------------------------------------------ decoder */

/// An object a decoder holds, as of the last frame it applied. Arrays are the decoder's,
/// valid until the next proto_decoder_apply or proto_decoder_destroy.
typedef struct proto_object {
    uint16_t id;
    uint16_t key;      ///< the serial of the key the object holds
    uint8_t primitive; ///< proto_primitive
    uint8_t qbits, lod, has_scalar, ninfo;
    uint8_t parts; ///< PROTO_PART_* the last applied frame had for it (0: not named)
    float info[PROTO_MAX_INFO];
    float bmin[3], bmax[3]; ///< the local quantisation box
    float smin, smax;       ///< the scalar's range (has_scalar)
    float tstep;            ///< the position step of frame transforms
    proto_transform key_xf; ///< the key's transform
    proto_transform xf;     ///< this frame's transform
    uint32_t nvert, nelem;
    const uint32_t *elem;   ///< (nelem x 3) triangles or (nelem x 2) segments
    const uint16_t *base_q; ///< (nvert x 4) x, y, z, scalar: the key and its appends
    const uint16_t *q;      ///< (nvert x 4) this frame's
    uint64_t key_frame;     ///< the number of the frame that brought the key
} proto_object;

typedef struct proto_decoder proto_decoder;

proto_status proto_decoder_create(proto_decoder **out);
void proto_decoder_destroy(proto_decoder *d);
/// Apply one object frame (kind 5). Every size, index and count is checked; a frame that is
/// malformed (PROTO_ERR_CORRUPT, _LIMIT, ...) or does not fit the objects held
/// (PROTO_ERR_STATE) changes nothing, and err (may be NULL) says which object and why.
/// h (may be NULL) receives the header.
proto_status proto_decoder_apply(proto_decoder *d, const uint8_t *buf, size_t len, proto_header *h,
                                 char *err, size_t err_sz);
/// Live objects, in increasing id order.
uint32_t proto_decoder_count(const proto_decoder *d);
const proto_object *proto_decoder_object(const proto_decoder *d, uint32_t i);
/// The object of that id, or NULL.
const proto_object *proto_decoder_find(const proto_decoder *d, uint16_t id);
/// The ids the last applied frame removed (a snapshot drops every object it does not name).
uint32_t proto_decoder_removed(const proto_decoder *d, const uint16_t **ids);
/// This frame's local positions (nvert x 3): bmin + (bmax - bmin) * q / (2^qbits - 1).
void proto_object_positions(const proto_object *o, float *local);
/// This frame's scalars (nvert): smin + (smax - smin) * s / 65535 (0 without a scalar).
void proto_object_scalars(const proto_object *o, float *s);

#ifdef __cplusplus
}
#endif
#endif
