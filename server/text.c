/* text.c: the text clients read when something is refused. Every error message, on the
 * WebSocket and over HTTP, is built here, so that none can break JSON or UTF-8: an error's
 * detail often quotes the client (a parameter name, an unknown type, a client id), and a
 * browser's WebSocket closes the connection (1007) on a text message that is not valid
 * UTF-8 (RFC 6455, 8.1). */
#include <stdio.h>
#include <string.h>

#include "server.h"

/* Length of the valid UTF-8 character at s (RFC 3629: no overlong forms, no surrogates,
 * nothing above U+10FFFF), or 0 when s does not start one. s is NUL-terminated. */
static int utf8_char(const unsigned char *s)
{
    unsigned char c = s[0];
    if (c < 0x80)
        return 1;
    unsigned char lo = 0x80, hi = 0xbf;
    int n;
    if (c >= 0xc2 && c <= 0xdf) {
        n = 2;
    } else if (c >= 0xe0 && c <= 0xef) {
        n = 3;
        lo = c == 0xe0 ? 0xa0 : 0x80;
        hi = c == 0xed ? 0x9f : 0xbf;
    } else if (c >= 0xf0 && c <= 0xf4) {
        n = 4;
        lo = c == 0xf0 ? 0x90 : 0x80;
        hi = c == 0xf4 ? 0x8f : 0xbf;
    } else {
        return 0;
    }
    if (s[1] < lo || s[1] > hi)
        return 0;
    for (int k = 2; k < n; k++)
        if (s[k] < 0x80 || s[k] > 0xbf)
            return 0;
    return n;
}

size_t srv_json_string(char *out, size_t out_sz, const char *s)
{
    size_t j = 0;
    for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p;) {
        char esc[8];
        const char *piece = esc;
        size_t len;
        int n = utf8_char(p);
        if (n == 0) { /* not UTF-8: U+FFFD, one byte consumed */
            piece = "\xef\xbf\xbd";
            len = 3;
            n = 1;
        } else if (*p == '"' || *p == '\\') {
            esc[0] = '\\', esc[1] = (char)*p;
            len = 2;
        } else if (*p < 0x20) {
            len = (size_t)snprintf(esc, sizeof esc, "\\u%04x", *p);
        } else {
            piece = (const char *)p;
            len = (size_t)n;
        }
        if (j + len + 1 > out_sz)
            break; /* cut between characters */
        memcpy(out + j, piece, len);
        j += len;
        p += n;
    }
    if (out_sz)
        out[j] = 0;
    return j;
}

size_t srv_error_json(char *out, size_t out_sz, int64_t seq, const char *error, const char *detail)
{
    char e[128], d[1024];
    srv_json_string(e, sizeof e, error);
    /* The detail takes what is left after the fixed parts (about 60 bytes). */
    size_t room = out_sz > strlen(e) + 64 ? out_sz - strlen(e) - 64 : 1;
    srv_json_string(d, room < sizeof d ? room : sizeof d, detail);
    int n = seq < 0
                ? snprintf(out, out_sz, "{\"error\":\"%s\",\"detail\":\"%s\"}", e, d)
                : snprintf(out, out_sz,
                           "{\"type\":\"error\",\"seq\":%lld,\"error\":\"%s\",\"detail\":\"%s\"}",
                           (long long)seq, e, d);
    return n < 0 ? 0 : (size_t)n < out_sz ? (size_t)n : out_sz - 1;
}
