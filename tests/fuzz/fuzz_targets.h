/* fuzz_targets.h: the fuzz entry points, callable from libFuzzer (tests/fuzz/fuzz_*.c with
 * FUZZ_MAIN) and from the C tests, which replay the committed corpora (zstd's
 * tests/fuzz idea). */
#ifndef TESTS_FUZZ_FUZZ_TARGETS_H
#define TESTS_FUZZ_FUZZ_TARGETS_H

#include <stddef.h>
#include <stdint.h>

/* Decode the bytes as a frame of every kind; never crash, leak or read out of bounds. */
int fuzz_frame_one(const uint8_t *data, size_t size);
/* Parse the bytes as a client JSON event; same promise. */
int fuzz_event_one(const uint8_t *data, size_t size);
/* A keyframe and a delta (u32 LE length of the first, then both): apply every surface;
 * never write past the keyframe's surface, refuse what does not match, add correctly. */
int fuzz_delta_one(const uint8_t *data, size_t size);

#endif
