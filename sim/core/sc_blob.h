/* sc_blob.h: a scene's state as bytes (sim_*_save / sim_*_restore: the server's session
 * snapshots and recordings). A writer appends fields to a growing buffer; a reader takes
 * them back in the same order, checking every length, so a short or damaged snapshot is a
 * clear error and never a read past its end. Each part of a snapshot starts with a tag
 * and a version (sc_blob_tag / sc_reader_tag): a snapshot from another scene or another
 * layout is refused by name.
 * Compiled as C11 and as CUDA C++17 (host functions). */
#ifndef SIM_CORE_SC_BLOB_H
#define SIM_CORE_SC_BLOB_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sc_blob {
    uint8_t *p;
    size_t n, cap;
    int failed; /* out of memory: every later put is ignored, the caller checks once */
} sc_blob;

/// Append n bytes (nothing when failed).
void sc_blob_put(sc_blob *b, const void *data, size_t n);
/// A part's tag (4 characters) and layout version.
void sc_blob_tag(sc_blob *b, const char tag[4], uint32_t version);
void sc_blob_free(sc_blob *b);
/* One value, by its size. */
#define SC_PUT(b, v) sc_blob_put((b), &(v), sizeof(v))

typedef struct sc_reader {
    const uint8_t *p;
    size_t n, at;
    int failed; /* a get ran past the end or a tag did not match: the rest read zeros */
    char why[96];
} sc_reader;

sc_reader sc_reader_of(const void *data, size_t n);
/// Take n bytes into out (zeros, and failed set, when fewer are left).
void sc_reader_get(sc_reader *r, void *out, size_t n);
/// Expect the part's tag and version (failed, saying which, otherwise).
void sc_reader_tag(sc_reader *r, const char tag[4], uint32_t version);
/// A part whose layout grew: any version from oldest to newest is read. Returns the version
/// found, or 0 (and the reader failed) for another part or version.
uint32_t sc_reader_tag_versions(sc_reader *r, const char tag[4], uint32_t oldest, uint32_t newest);
#define SC_GET(r, v) sc_reader_get((r), &(v), sizeof(v))

#ifdef __cplusplus
}
#endif

#endif
