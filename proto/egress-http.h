/* The head of a request to the egress proxy: what it checks before it connects anywhere.
 * Pure and bounded, and strict where leniency would let a client make the proxy check one
 * thing while a server sees another:
 *   - the request line is METHOD SP TARGET SP HTTP/1.0 or HTTP/1.1, lines end in CRLF (a
 *     bare LF or CR is refused), no folded header lines, no space before a header's colon;
 *   - CONNECT takes "host:port" (authority form, a port from 1 to 65535); any other method
 *     takes an absolute "http://host[:port]/..." (port 80 when absent), as clients send to
 *     a proxy; "https://" targets and origin-form ("/path") are refused;
 *   - a Host header, when present (HTTP/1.1 requires it but for CONNECT), appears once and
 *     names the same host (and port, when it gives one) as the target;
 *   - a body is framed by one Content-Length (repeats must agree) or by
 *     "Transfer-Encoding: chunked" alone, never both;
 *   - host is a name or an IPv4 address (no IPv6 literal, no userinfo), lower-cased.
 * The head ends at the first empty line; what follows is the body or the tunnel's bytes. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "egress.h"

/* Bytes of a head, request line and headers, through its empty line. */
#define EGRESS_HEAD_MAX 8192
/* Header lines of a head. */
#define EGRESS_HEAD_LINES_MAX 100

struct egress_request {
    bool connect;           /* a CONNECT: a tunnel to host:port */
    char method[17];        /* as sent, 1 to 16 upper-case letters */
    char host[254];         /* lower case, without port */
    uint16_t port;          /* the target's, 80 for http:// without one */
    size_t target_off;      /* for non-CONNECT: where the path ("/...") starts in buf, */
    size_t target_len;      /*   and its length ("/" when the URI had none: 0 here) */
    int64_t content_length; /* -1 when none */
    bool chunked;           /* Transfer-Encoding: chunked */
    bool http10;            /* HTTP/1.0 */
    size_t head_len;        /* bytes through the empty line */
};

/* Parses the head at the start of buf (len bytes so far). 0 with *ret filled; -EAGAIN when
 * the head is not complete and len < EGRESS_HEAD_MAX; -E2BIG when it is longer than
 * EGRESS_HEAD_MAX or has more than EGRESS_HEAD_LINES_MAX header lines; -EINVAL when
 * malformed or refused (above). *ret is written only on success. Garbage is refused as soon
 * as it is seen, not only once the head is complete. */
int egress_http_parse(const char *buf, size_t len, struct egress_request *ret);

/* The proxy's verdict on a parsed head, before it connects anywhere: 0, or -EACCES with
 * *ret_reason (static text for the 403 and the log). A host that is an IPv4 address is
 * allowed by a CIDR entry holding it and the port; a name by a name entry, and then only
 * on port 443 for CONNECT and port 80 for plain HTTP (names take no port). */
int egress_request_allowed(const struct egress_allow *a, const struct egress_request *r,
                           const char **ret_reason);

/* After a CONNECT the proxy answered, the tunnel's first bytes: 0 when they may go to the
 * server, -EACCES (with *ret_reason) when not. sni is egress_sni_parse()'s result (sni_len
 * > 0, or its negative error) for those bytes. A CONNECT to a name needs a ClientHello
 * naming that very host (case-insensitive): no other name, even an allowed one, and no
 * ClientHello without a name or bytes that are not TLS. A CONNECT to an address needs a
 * ClientHello too, with no name or a name that is itself allowed. */
int egress_tunnel_allowed(const struct egress_allow *a, const struct egress_request *r,
                          const char *sni, int sni_len, const char **ret_reason);
