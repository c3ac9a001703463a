/* sc_blob.c: see sc_blob.h. */
#include "sc_blob.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void sc_blob_put(sc_blob *b, const void *data, size_t n)
{
    if (b->failed || n == 0)
        return;
    if (n > SIZE_MAX / 2 - b->n) {
        b->failed = 1;
        return;
    }
    if (b->n + n > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->n + n)
            cap *= 2;
        uint8_t *p = realloc(b->p, cap);
        if (!p) {
            b->failed = 1;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->n, data, n);
    b->n += n;
}

void sc_blob_tag(sc_blob *b, const char tag[4], uint32_t version)
{
    sc_blob_put(b, tag, 4);
    SC_PUT(b, version);
}

void sc_blob_free(sc_blob *b)
{
    free(b->p);
    memset(b, 0, sizeof *b);
}

sc_reader sc_reader_of(const void *data, size_t n)
{
    sc_reader r;
    memset(&r, 0, sizeof r);
    r.p = (const uint8_t *)data;
    r.n = data ? n : 0;
    return r;
}

void sc_reader_get(sc_reader *r, void *out, size_t n)
{
    if (r->failed || n > r->n - r->at) {
        if (!r->failed)
            snprintf(r->why, sizeof r->why, "cut short at byte %zu of %zu", r->at, r->n);
        r->failed = 1;
        memset(out, 0, n);
        return;
    }
    memcpy(out, r->p + r->at, n);
    r->at += n;
}

void sc_reader_tag(sc_reader *r, const char tag[4], uint32_t version)
{
    sc_reader_tag_versions(r, tag, version, version);
}

uint32_t sc_reader_tag_versions(sc_reader *r, const char tag[4], uint32_t oldest, uint32_t newest)
{
    char got[4];
    uint32_t v = 0;
    sc_reader_get(r, got, 4);
    SC_GET(r, v);
    if (r->failed)
        return 0;
    if (memcmp(got, tag, 4) || v < oldest || v > newest) {
        if (oldest == newest)
            snprintf(r->why, sizeof r->why, "expected part %.4s version %u, found %.4s version %u",
                     tag, newest, got, v);
        else
            snprintf(r->why, sizeof r->why,
                     "expected part %.4s version %u to %u, found %.4s version %u", tag, oldest,
                     newest, got, v);
        r->failed = 1;
        return 0;
    }
    return v;
}
