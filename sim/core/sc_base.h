/* sc_base.h: the small shared base (SIM_HD, asserts, error text, clocks).
 * Compiled as C11 and as CUDA C++17 (host functions): keep to their common subset. */
#ifndef SIM_CORE_SC_BASE_H
#define SIM_CORE_SC_BASE_H

#include <stddef.h>
#include <stdint.h>

#if defined(__CUDACC__)
#define SIM_HD __host__ __device__
#else
#define SIM_HD
#endif

#include <stdio.h>
#include <stdlib.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Programmer errors only: bad input is a status, never an assert. */
#define SC_ASSERT(c)                                                                  \
    do {                                                                              \
        if (!(c)) {                                                                   \
            fprintf(stderr, "%s:%d: assertion failed: %s\n", __FILE__, __LINE__, #c); \
            abort();                                                                  \
        }                                                                             \
    } while (0)

#if defined(__GNUC__)
#define SC_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define SC_PRINTF(a, b)
#endif

/* Write a message into err (may be NULL) and return status, for one-line error returns:
 *   return sc_fail(err, err_sz, SIM_ERR_ARG, "%s: bad dims", path); */
int sc_fail(char *err, size_t err_sz, int status, const char *fmt, ...) SC_PRINTF(4, 5);

/* Monotonic wall clock in milliseconds. */
double sc_now_ms(void);

/* Allocation that returns NULL for n == 0 or overflow of n*size. Zeroed. */
void *sc_calloc(size_t n, size_t size);

/* FNV-1a over bytes, chained through h (start with SC_HASH_SEED). */
#define SC_HASH_SEED 1469598103934665603ull
uint64_t sc_hash_bytes(uint64_t h, const void *p, size_t n);

#ifdef __cplusplus
}
#endif

#endif
