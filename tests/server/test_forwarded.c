/* test_forwarded.c: the client's address behind a router (server/forwarded.c): who may
 * name it (--trusted-proxy: addresses and CIDRs, IPv4 and IPv6) and which X-Forwarded-For
 * entry counts (the last: the one the trusted router wrote). */
#include <stdio.h>
#include <string.h>

#include "server/server.h"
#include "tests/harness.h"

static const char *addr_of(const char *trusted, const char *peer, const char *xff)
{
    static char out[64];
    srv_config c;
    memset(&c, 0, sizeof c);
    snprintf(c.trusted_proxies, sizeof c.trusted_proxies, "%s", trusted);
    srv_client_address(&c, peer, xff, out, sizeof out);
    return out;
}

TEST(forwarded_for_counts_only_from_a_trusted_router)
{
    /* Nobody trusted (the default): a client cannot pick its own address. */
    CHECK(!strcmp(addr_of("", "198.51.100.7", "10.9.9.9"), "198.51.100.7"));
    /* Trusted by address, by CIDR; an address outside the CIDR is not. */
    CHECK(!strcmp(addr_of("127.0.0.1", "127.0.0.1", "203.0.113.5"), "203.0.113.5"));
    CHECK(!strcmp(addr_of("10.0.0.0/8", "10.244.1.17", "203.0.113.5"), "203.0.113.5"));
    CHECK(!strcmp(addr_of("10.0.0.0/8", "11.0.0.1", "203.0.113.5"), "11.0.0.1"));
    CHECK(!strcmp(addr_of("10.1.0.0/17", "10.1.127.255", "203.0.113.5"), "203.0.113.5"));
    CHECK(!strcmp(addr_of("10.1.0.0/17", "10.1.128.0", "203.0.113.5"), "10.1.128.0"));
    /* A list; the second entry matches. IPv4-mapped IPv6 peers count as IPv4. */
    CHECK(
        !strcmp(addr_of("192.0.2.1,10.0.0.0/8", "::ffff:10.0.0.5", "203.0.113.5"), "203.0.113.5"));
    CHECK(!strcmp(addr_of("fd00::/8", "fd12::1", "2001:db8::9"), "2001:db8::9"));
    CHECK(!strcmp(addr_of("fd00::/8", "fe80::1", "2001:db8::9"), "fe80::1"));
    /* The last entry is the router's: the ones before it the client may have written. */
    CHECK(!strcmp(addr_of("127.0.0.1", "127.0.0.1", "6.6.6.6, 203.0.113.5"), "203.0.113.5"));
    /* Not an address, or none: the peer. */
    CHECK(!strcmp(addr_of("127.0.0.1", "127.0.0.1", "<script>"), "127.0.0.1"));
    CHECK(!strcmp(addr_of("127.0.0.1", "127.0.0.1", ""), "127.0.0.1"));
    CHECK(!strcmp(addr_of("127.0.0.1", "127.0.0.1", NULL), "127.0.0.1"));
}

TEST(trusted_proxy_lists_are_checked)
{
    char err[256];
    CHECK(srv_trusted_proxy_check("127.0.0.1", err, sizeof err) == 0);
    CHECK(srv_trusted_proxy_check("10.0.0.0/8,fd00::/8,::1", err, sizeof err) == 0);
    const char *bad[] = {"", "10.0.0.0/33", "fd00::/129", "example.com", "10.0.0.0/", "1.2.3.4,"};
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++)
        CHECKF(srv_trusted_proxy_check(bad[k], err, sizeof err) != 0, "\"%s\" accepted", bad[k]);
    CHECK(strstr(err, "--trusted-proxy") != NULL);
}
