/* fuzz_targets.h: the fuzz entry points, callable from libFuzzer (tests/fuzz/fuzz_*.c with
 * FUZZ_MAIN) and from the C tests, which replay the committed corpora (zstd's
 * tests/fuzz idea). */
#ifndef TESTS_FUZZ_FUZZ_TARGETS_H
#define TESTS_FUZZ_FUZZ_TARGETS_H

#include <stddef.h>
#include <stdint.h>

/* Decode the bytes as a frame of every kind (an object frame on a fresh decoder); never
 * crash, leak or read out of bounds; leave a consistent decoder or none changed. */
int fuzz_frame_one(const uint8_t *data, size_t size);
/* Parse the bytes as a client JSON event; same promise. */
int fuzz_event_one(const uint8_t *data, size_t size);
/* Frames in order to one object decoder (each a u32 LE length and its bytes; the last may
 * take the rest): consistent after each, unchanged by a refusal. */
int fuzz_delta_one(const uint8_t *data, size_t size);
/* The frames of a fuzz_delta input: pointers into data, lengths; returns how many (<= 32). */
int fuzz_split_frames(const uint8_t *data, size_t size, const uint8_t **f, size_t *len);

#endif
