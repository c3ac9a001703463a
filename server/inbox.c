/* inbox.c: a session's inbox, the one queue between a client's event and the step. A ring
 * of SRV_INBOX_BYTES in which each item takes its header and what it carries (a move 40
 * bytes): no item is sized for the largest event. The WebSocket thread pushes; the worker
 * takes at each frame boundary and applies what it took straight to the scene. Guarded by
 * the session's lock (the caller's).
 *
 * Pause: the items a paused session may not apply yet stay here, in order, until a resume
 * arrives (srv_inbox_take); the scene never holds events of its own. */
#include <string.h>

#include "server.h"

_Static_assert(SRV_INBOX_BYTES % 8 == 0 && sizeof(srv_item) % 8 == 0, "items stay 8-aligned");
_Static_assert(SRV_ITEM_BYTES(SRV_EVENT_MAX) <= SRV_INBOX_BYTES / 8, "a big item fits 8 times");

/* Copy n bytes between the ring (at logical offset off from head) and flat memory. */
static void ring_read(const srv_inbox *ib, uint32_t off, void *dst, size_t n)
{
    size_t at = (ib->head + off) % SRV_INBOX_BYTES, first = SRV_INBOX_BYTES - at;
    if (first > n)
        first = n;
    memcpy(dst, ib->buf + at, first);
    memcpy((unsigned char *)dst + first, ib->buf, n - first);
}

static void ring_write(srv_inbox *ib, uint32_t off, const void *src, size_t n)
{
    size_t at = (ib->head + off) % SRV_INBOX_BYTES, first = SRV_INBOX_BYTES - at;
    if (first > n)
        first = n;
    memcpy(ib->buf + at, src, first);
    memcpy(ib->buf, (const unsigned char *)src + first, n - first);
}

int srv_inbox_push(srv_inbox *ib, const srv_item *h, const void *payload)
{
    size_t bytes = SRV_ITEM_BYTES(h->size);
    size_t cap = h->kind >= SRV_ITEM_SCENE ? SRV_INBOX_BYTES - SRV_INBOX_CONTROL : SRV_INBOX_BYTES;
    if (h->size > SRV_EVENT_MAX || ib->used + bytes > cap)
        return -1;
    ring_write(ib, ib->used, h, sizeof *h);
    if (h->size)
        ring_write(ib, ib->used + (uint32_t)sizeof *h, payload, h->size);
    ib->used += (uint32_t)bytes;
    ib->count++;
    if (ib->used > ib->peak)
        ib->peak = ib->used;
    return 0;
}

/* How many items, from the oldest, the worker takes in order (srv_inbox_take's rule). */
static uint32_t in_order(const srv_inbox *ib, int paused, int *stopped_at_pause)
{
    uint32_t k = 0, off = 0;
    int took_change = 0, held_change = 0;
    *stopped_at_pause = 0;
    for (uint32_t i = 0; i < ib->count; i++) {
        srv_item h;
        ring_read(ib, off, &h, sizeof h);
        off += (uint32_t)SRV_ITEM_BYTES(h.size);
        if (h.kind == SRV_ITEM_PAUSE) {
            if (!paused && took_change) { /* step what came before it first */
                *stopped_at_pause = 1;
                break;
            }
            paused = 1;
            k = i + 1;
        } else if (h.kind == SRV_ITEM_RESUME) {
            paused = 0;
            took_change |= held_change;
            k = i + 1;
        } else if (!paused) {
            took_change |= !(h.flags & SRV_EV_QUERY);
            k = i + 1;
        } else {
            held_change |= !(h.flags & (SRV_EV_QUERY | SRV_EV_UNPAUSED));
        }
    }
    return k;
}

size_t srv_inbox_take(srv_inbox *ib, int paused, unsigned char *out, int *n)
{
    int stopped;
    uint32_t k = in_order(ib, paused, &stopped);
    size_t taken = 0;
    uint32_t rd = 0, wr = 0, kept = 0; /* logical offsets: kept items move up to wr */
    *n = 0;
    for (uint32_t i = 0; i < ib->count; i++) {
        srv_item h;
        ring_read(ib, rd, &h, sizeof h);
        uint32_t bytes = (uint32_t)SRV_ITEM_BYTES(h.size);
        /* After the in-order part a paused session still answers queries and takes what
         * applies while paused; a take cut at a pause leaves the rest for the next. */
        int take = i < k || (!stopped && (h.flags & (SRV_EV_QUERY | SRV_EV_UNPAUSED)));
        if (take) {
            ring_read(ib, rd, out + taken, bytes);
            taken += bytes;
            (*n)++;
        } else {
            if (wr != rd) /* wr < rd: a byte at a time never reads what it wrote */
                for (uint32_t b = 0; b < bytes; b++)
                    ib->buf[(ib->head + wr + b) % SRV_INBOX_BYTES] =
                        ib->buf[(ib->head + rd + b) % SRV_INBOX_BYTES];
            wr += bytes;
            kept++;
        }
        rd += bytes;
    }
    ib->used = wr;
    ib->count = kept;
    ib->held = stopped ? 0 : kept; /* cut at a pause: the rest can go at the next boundary */
    if (kept == 0)
        ib->head = 0;
    return taken;
}
