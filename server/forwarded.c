/* forwarded.c: the client's address behind a router. The per-address limits (sessions,
 * viewers' connections) count clients; behind the router (deploy/) every connection comes
 * from the router's address, so for a peer in --trusted-proxy the last X-Forwarded-For
 * entry (the one that router wrote) is the client. Anyone else's X-Forwarded-For is
 * ignored: a client cannot pick its own address. */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server.h"

typedef struct {
    int family; /* AF_INET or AF_INET6 */
    unsigned char bytes[16];
} net_addr;

/* Text to an address; an IPv4-mapped IPv6 one ("::ffff:1.2.3.4") counts as IPv4. */
static int parse_addr(const char *text, size_t n, net_addr *a)
{
    char buf[64];
    if (n == 0 || n >= sizeof buf)
        return -1;
    memcpy(buf, text, n);
    buf[n] = 0;
    if (inet_pton(AF_INET, buf, a->bytes) == 1) {
        a->family = AF_INET;
        return 0;
    }
    if (inet_pton(AF_INET6, buf, a->bytes) != 1)
        return -1;
    static const unsigned char mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    if (!memcmp(a->bytes, mapped, 12)) {
        memmove(a->bytes, a->bytes + 12, 4);
        a->family = AF_INET;
    } else {
        a->family = AF_INET6;
    }
    return 0;
}

/* One list entry "ADDR" or "ADDR/BITS" (n characters): whether addr is in it; -1 if the
 * entry is not one. */
static int entry_matches(const char *e, size_t n, const net_addr *addr)
{
    const char *slash = memchr(e, '/', n);
    net_addr net;
    if (parse_addr(e, slash ? (size_t)(slash - e) : n, &net) != 0)
        return -1;
    int max = net.family == AF_INET ? 32 : 128, bits = max;
    if (slash) {
        char b[8] = "";
        size_t bn = n - (size_t)(slash + 1 - e);
        char *end;
        if (bn == 0 || bn >= sizeof b)
            return -1;
        memcpy(b, slash + 1, bn);
        bits = (int)strtol(b, &end, 10);
        if (*end || bits < 0 || bits > max)
            return -1;
    }
    if (!addr || addr->family != net.family)
        return 0;
    for (int i = 0; i < bits; i++) {
        int m = 0x80 >> (i % 8);
        if ((addr->bytes[i / 8] & m) != (net.bytes[i / 8] & m))
            return 0;
    }
    return 1;
}

/* Calls entry_matches on every comma-separated entry: 1 at the first match, -1 at the
 * first malformed entry (its start in *bad), else 0. */
static int list_matches(const char *list, const net_addr *addr, const char **bad)
{
    for (const char *p = list;;) { /* an empty entry (",," or a comma at an end) is malformed */
        const char *e = strchr(p, ',');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        int r = entry_matches(p, n, addr);
        if (r != 0) {
            if (bad)
                *bad = p;
            return r;
        }
        if (!e)
            return 0;
        p = e + 1;
    }
}

int srv_trusted_proxy_check(const char *list, char *err, size_t err_sz)
{
    const char *bad = NULL;
    if (!*list || list_matches(list, NULL, &bad) < 0) {
        snprintf(err, err_sz, "--trusted-proxy %s: addresses or ADDR/BITS split by commas%s%.40s",
                 list, bad ? "; not one: " : "", bad ? bad : "");
        return -1;
    }
    return 0;
}

void srv_client_address(const srv_config *c, const char *peer, const char *forwarded_for, char *out,
                        size_t out_sz)
{
    net_addr a, client;
    snprintf(out, out_sz, "%s", peer);
    if (!c->trusted_proxies[0] || !forwarded_for || !*forwarded_for ||
        parse_addr(peer, strlen(peer), &a) != 0 || list_matches(c->trusted_proxies, &a, NULL) != 1)
        return;
    const char *last = strrchr(forwarded_for, ',');
    last = last ? last + 1 : forwarded_for;
    while (*last == ' ')
        last++;
    size_t n = strlen(last);
    while (n > 0 && last[n - 1] == ' ')
        n--;
    /* Only an address: the text becomes a quota's key and is logged. */
    if (parse_addr(last, n, &client) == 0)
        snprintf(out, out_sz, "%.*s", (int)n, last);
}
