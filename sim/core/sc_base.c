/* sc_base.c: error text, clock, checked allocation, hashing. */
#define _POSIX_C_SOURCE 200809L
#include "sc_base.h"

#include <stdarg.h>
#include <time.h>

#include "../sim.h"

int sc_fail(char *err, size_t err_sz, int status, const char *fmt, ...)
{
    if (err && err_sz) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, err_sz, fmt, ap);
        va_end(ap);
    }
    return status;
}

double sc_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

void *sc_calloc(size_t n, size_t size)
{
    if (n == 0 || size == 0 || n > SIZE_MAX / size)
        return NULL;
    return calloc(n, size);
}

uint64_t sc_hash_bytes(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = (const unsigned char *)p;
    for (size_t i = 0; i < n; i++) {
        h ^= b[i];
        h *= 1099511628211ull;
    }
    return h;
}

const char *sim_status_str(sim_status s)
{
    switch (s) {
    case SIM_OK:
        return "ok";
    case SIM_ERR_ARG:
        return "bad argument";
    case SIM_ERR_IO:
        return "i/o error";
    case SIM_ERR_FORMAT:
        return "bad format";
    case SIM_ERR_LIMIT:
        return "limit exceeded";
    case SIM_ERR_NOMEM:
        return "out of memory";
    case SIM_ERR_BACKEND:
        return "backend error";
    }
    return "unknown status";
}
