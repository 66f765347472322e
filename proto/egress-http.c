/* The head of a request to the egress proxy (RFC 9112 sections 3 and 5, RFC 9110 section
 * 7.2). See egress-http.h. */
#include "egress-http.h"

#include <errno.h>
#include <string.h>
#include <strings.h>

#define METHOD_MAX 16
#define HOST_MAX 253

struct span {
    const char *p;
    size_t n;
};

static bool is_tchar(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           (c != '\0' && strchr("!#$%&'*+-.^_`|~", c) != NULL);
}

static bool span_ieq(struct span s, const char *lit)
{
    return s.n == strlen(lit) && strncasecmp(s.p, lit, s.n) == 0;
}

/* 1 to 5 digits, no leading zero, 1 to 65535. */
static int parse_port(struct span s, uint16_t *ret)
{
    unsigned v = 0;

    if (s.n == 0 || s.n > 5 || s.p[0] == '0')
        return -EINVAL;
    for (size_t i = 0; i < s.n; i++) {
        if (s.p[i] < '0' || s.p[i] > '9')
            return -EINVAL;
        v = v * 10 + (unsigned)(s.p[i] - '0');
    }
    if (v > 65535)
        return -EINVAL;
    *ret = (uint16_t)v;
    return 0;
}

/* host[:port]: letters, digits, '.' and '-' only (no IPv6 literal, no userinfo); host
 * lower-cased into host; *port written when the authority has one (*has_port says so). */
static int parse_authority(struct span a, char *host, uint16_t *port, bool *has_port)
{
    const char *colon = memchr(a.p, ':', a.n);
    size_t hn = colon ? (size_t)(colon - a.p) : a.n;

    if (hn == 0 || hn > HOST_MAX)
        return -EINVAL;
    for (size_t i = 0; i < hn; i++) {
        char c = a.p[i];

        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '-'))
            return -EINVAL;
        host[i] = (c >= 'A' && c <= 'Z') ? (char)(c - 'A' + 'a') : c;
    }
    host[hn] = '\0';
    *has_port = colon != NULL;
    if (colon && parse_port((struct span){colon + 1, a.n - hn - 1}, port) < 0)
        return -EINVAL;
    return 0;
}

/* METHOD SP target SP HTTP/1.x: the method, the target and the version into r. */
static int request_line(const char *buf, struct span line, struct egress_request *r)
{
    const char *sp1 = memchr(line.p, ' ', line.n), *sp2;
    struct span target, version, auth;
    bool has_port;
    size_t mlen;

    if (!sp1 || (mlen = (size_t)(sp1 - line.p)) == 0 || mlen > METHOD_MAX)
        return -EINVAL;
    for (size_t i = 0; i < mlen; i++)
        if (line.p[i] < 'A' || line.p[i] > 'Z')
            return -EINVAL;
    memcpy(r->method, line.p, mlen);
    r->method[mlen] = '\0';
    target.p = sp1 + 1;
    sp2 = memchr(target.p, ' ', line.n - mlen - 1);
    if (!sp2)
        return -EINVAL;
    target.n = (size_t)(sp2 - target.p);
    version = (struct span){sp2 + 1, line.n - mlen - 1 - target.n - 1};
    if (span_ieq(version, "HTTP/1.1") && memcmp(version.p, "HTTP", 4) == 0)
        r->http10 = false;
    else if (span_ieq(version, "HTTP/1.0") && memcmp(version.p, "HTTP", 4) == 0)
        r->http10 = true;
    else
        return -EINVAL;
    for (size_t i = 0; i < target.n; i++)
        if (target.p[i] <= ' ' || target.p[i] > '~' || target.p[i] == '#')
            return -EINVAL;
    r->connect = strcmp(r->method, "CONNECT") == 0;
    if (r->connect) {
        if (parse_authority(target, r->host, &r->port, &has_port) < 0 || !has_port)
            return -EINVAL;
        return 0;
    }
    if (target.n < 7 || strncasecmp(target.p, "http://", 7) != 0)
        return -EINVAL;
    auth.p = target.p + 7;
    auth.n = 0;
    while (auth.n < target.n - 7 && auth.p[auth.n] != '/' && auth.p[auth.n] != '?')
        auth.n++;
    if (parse_authority(auth, r->host, &r->port, &has_port) < 0)
        return -EINVAL;
    if (!has_port)
        r->port = 80;
    r->target_off = (size_t)(auth.p + auth.n - buf);
    r->target_len = target.n - 7 - auth.n;
    return 0;
}

/* One header line: name ":" OWS value OWS; Host, Content-Length and Transfer-Encoding
 * checked against the target and each other. */
static int header(struct span line, struct egress_request *r, bool *seen_host, bool *seen_te)
{
    const char *colon = memchr(line.p, ':', line.n);
    struct span name, val;
    char host[HOST_MAX + 1];
    uint16_t port = 0;
    bool has_port;

    if (!colon || colon == line.p)
        return -EINVAL;
    name = (struct span){line.p, (size_t)(colon - line.p)};
    for (size_t i = 0; i < name.n; i++)
        if (!is_tchar(name.p[i]))
            return -EINVAL; /* also a space before the colon */
    val = (struct span){colon + 1, line.n - name.n - 1};
    while (val.n > 0 && (val.p[0] == ' ' || val.p[0] == '\t'))
        val.p++, val.n--;
    while (val.n > 0 && (val.p[val.n - 1] == ' ' || val.p[val.n - 1] == '\t'))
        val.n--;
    for (size_t i = 0; i < val.n; i++)
        if (((unsigned char)val.p[i] < ' ' && val.p[i] != '\t') || val.p[i] == 0x7f)
            return -EINVAL;
    if (span_ieq(name, "Host")) {
        if (*seen_host || parse_authority(val, host, &port, &has_port) < 0 ||
            strcmp(host, r->host) != 0 || (has_port && port != r->port))
            return -EINVAL;
        *seen_host = true;
    } else if (span_ieq(name, "Content-Length")) {
        int64_t v = 0;

        if (val.n == 0 || val.n > 18)
            return -EINVAL;
        for (size_t i = 0; i < val.n; i++) {
            if (val.p[i] < '0' || val.p[i] > '9')
                return -EINVAL;
            v = v * 10 + (val.p[i] - '0');
        }
        if (r->content_length >= 0 && r->content_length != v)
            return -EINVAL;
        r->content_length = v;
    } else if (span_ieq(name, "Transfer-Encoding")) {
        if (*seen_te || !span_ieq(val, "chunked"))
            return -EINVAL;
        *seen_te = true;
        r->chunked = true;
    }
    return 0;
}

/* The first line so far, before its end arrived: a method of capitals, then a space. */
static int early_check(const char *buf, size_t len)
{
    for (size_t i = 0; i < len && i <= METHOD_MAX; i++) {
        if (buf[i] == ' ')
            return i > 0 ? 0 : -EINVAL;
        if (buf[i] < 'A' || buf[i] > 'Z')
            return -EINVAL;
    }
    return len > METHOD_MAX ? -EINVAL : 0;
}

int egress_http_parse(const char *buf, size_t len, struct egress_request *ret)
{
    struct egress_request r = {.content_length = -1};
    bool seen_host = false, seen_te = false;
    size_t pos = 0, lines = 0;
    int e;

    if (early_check(buf, len) < 0)
        return -EINVAL;
    for (;;) {
        size_t lim = len < EGRESS_HEAD_MAX ? len : EGRESS_HEAD_MAX;
        const char *end = memchr(buf + pos, '\n', lim - pos);
        const char *cr = memchr(buf + pos, '\r', end ? (size_t)(end - buf) - pos : lim - pos);
        struct span line;

        if (cr && cr + 1 < buf + lim && cr[1] != '\n')
            return -EINVAL; /* a bare CR */
        if (!end)
            return len >= EGRESS_HEAD_MAX ? -E2BIG : -EAGAIN;
        if (end == buf + pos || end[-1] != '\r' || cr != end - 1)
            return -EINVAL; /* a bare LF, or a CR inside the line */
        line = (struct span){buf + pos, (size_t)(end - 1 - (buf + pos))};
        if (memchr(line.p, '\0', line.n))
            return -EINVAL;
        pos = (size_t)(end + 1 - buf);
        if (lines == 0) {
            if ((e = request_line(buf, line, &r)) < 0)
                return e;
        } else if (line.n == 0) {
            break;
        } else if (++lines > EGRESS_HEAD_LINES_MAX + 1) {
            return -E2BIG;
        } else if (line.p[0] == ' ' || line.p[0] == '\t') {
            return -EINVAL; /* obsolete line folding */
        } else if ((e = header(line, &r, &seen_host, &seen_te)) < 0) {
            return e;
        }
        if (lines == 0)
            lines = 1;
    }
    if ((r.chunked && r.content_length >= 0) ||
        (r.connect && (r.chunked || r.content_length >= 0)) ||
        (!r.http10 && !r.connect && !seen_host))
        return -EINVAL;
    r.head_len = pos;
    *ret = r;
    return 0;
}

/* The host as an IPv4 address (host byte order), when it is one. */
static bool host_addr(const char *host, uint32_t *ret)
{
    struct egress_entry e;
    const char *reason;

    if (egress_entry_parse(host, strlen(host), &e, &reason) < 0 || e.kind != EGRESS_CIDR)
        return false;
    *ret = e.addr; /* a bare address: prefix 32, no port (the host has no '/' or ':') */
    return true;
}

int egress_request_allowed(const struct egress_allow *a, const struct egress_request *r,
                           const char **ret_reason)
{
    uint32_t addr;

    if (host_addr(r->host, &addr)) {
        if (egress_allows_addr(a, addr, r->port))
            return 0;
        *ret_reason = "the address and port are not on the allow-list";
        return -EACCES;
    }
    if (!egress_allows_name(a, r->host, strlen(r->host))) {
        *ret_reason = "the name is not on the allow-list";
        return -EACCES;
    }
    if (r->port != (r->connect ? 443 : 80)) {
        *ret_reason =
            r->connect ? "names are allowed on port 443 only" : "names are allowed on port 80 only";
        return -EACCES;
    }
    return 0;
}

int egress_tunnel_allowed(const struct egress_allow *a, const struct egress_request *r,
                          const char *sni, int sni_len, const char **ret_reason)
{
    uint32_t addr;

    if (sni_len < 0 && sni_len != -ENOENT) {
        *ret_reason = "the tunnel does not start with a TLS ClientHello";
        return -EACCES;
    }
    if (host_addr(r->host, &addr)) {
        if (sni_len > 0 && !egress_allows_name(a, sni, (size_t)sni_len)) {
            *ret_reason = "the TLS server name is not on the allow-list";
            return -EACCES;
        }
        return 0;
    }
    if (sni_len <= 0) {
        *ret_reason = "the TLS ClientHello names no server";
        return -EACCES;
    }
    if ((size_t)sni_len != strlen(r->host) || strncasecmp(sni, r->host, (size_t)sni_len) != 0) {
        *ret_reason = "the TLS server name is not the CONNECT host";
        return -EACCES;
    }
    return 0;
}
