/* The egress proxy's request heads: CONNECT and absolute-form requests as curl, pip and
 * browsers send them; every prefix of a good head waits for more; what is refused (bare
 * LF or CR, folding, smuggling-prone framing, a Host naming another host, https://,
 * origin-form, IPv6 literals, userinfo); the limits; the proxy's verdicts on a head and on the
 * tunnel's ClientHello. Buffers are exactly as long as the
 * input (no NUL after it): ASan sees any read past it. */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "egress-http.h"

/* Parses s from a heap copy of exactly its length. */
static int parse_n(const char *s, size_t n, struct egress_request *r)
{
    char *b = malloc(n ? n : 1);
    int e;

    ck_assert_ptr_nonnull(b);
    memcpy(b, s, n);
    e = egress_http_parse(b, n, r);
    free(b);
    return e;
}

static int parse(const char *s, struct egress_request *r)
{
    return parse_n(s, strlen(s), r);
}

static void bad(const char *s)
{
    struct egress_request r = {.port = 7};

    ck_assert_msg(parse(s, &r) == -EINVAL, "accepted or not refused at once: %s", s);
    ck_assert_uint_eq(r.port, 7);
}

START_TEST(test_connect)
{
    const char *s = "CONNECT Allowed.Test:443 HTTP/1.1\r\nHost: allowed.test:443\r\n"
                    "User-Agent: curl/7.88.1\r\nProxy-Connection: Keep-Alive\r\n\r\n\x16\x03\x01";
    struct egress_request r;

    ck_assert_int_eq(parse(s, &r), 0);
    ck_assert(r.connect);
    ck_assert_str_eq(r.method, "CONNECT");
    ck_assert_str_eq(r.host, "allowed.test");
    ck_assert_uint_eq(r.port, 443);
    ck_assert_uint_eq(r.head_len, strlen(s) - 3);
    ck_assert_int_eq(r.content_length, -1);
    /* every prefix of the head: more is needed */
    for (size_t k = 0; k < strlen(s) - 3; k++)
        ck_assert_int_eq(parse_n(s, k, &r), -EAGAIN);
    ck_assert_int_eq(parse("CONNECT 203.0.113.7:8443 HTTP/1.0\r\n\r\n", &r), 0);
    ck_assert_str_eq(r.host, "203.0.113.7");
    ck_assert_uint_eq(r.port, 8443);
    bad("CONNECT allowed.test HTTP/1.1\r\n\r\n"); /* no port */
    bad("CONNECT allowed.test:0 HTTP/1.1\r\n\r\n");
    bad("CONNECT allowed.test:65536 HTTP/1.1\r\n\r\n");
    bad("CONNECT allowed.test:0443 HTTP/1.1\r\n\r\n");
    bad("CONNECT [::1]:443 HTTP/1.1\r\n\r\n");
    bad("CONNECT user@allowed.test:443 HTTP/1.1\r\n\r\n");
    bad("CONNECT allowed.test:443 HTTP/1.1\r\nHost: denied.test:443\r\n\r\n");
    bad("CONNECT allowed.test:443 HTTP/1.1\r\nHost: allowed.test:80\r\n\r\n");
    bad("CONNECT allowed.test:443 HTTP/1.1\r\nContent-Length: 0\r\n\r\n");
}
END_TEST

START_TEST(test_absolute)
{
    const char *s = "GET http://PyPI.org/simple/pip/?x=1 HTTP/1.1\r\nHost: pypi.org\r\n"
                    "Accept: */*\r\n\r\n";
    struct egress_request r;

    ck_assert_int_eq(parse(s, &r), 0);
    ck_assert(!r.connect);
    ck_assert_str_eq(r.method, "GET");
    ck_assert_str_eq(r.host, "pypi.org");
    ck_assert_uint_eq(r.port, 80);
    ck_assert_uint_eq(r.target_len, strlen("/simple/pip/?x=1"));
    ck_assert(strncmp(s + r.target_off, "/simple/pip/?x=1", r.target_len) == 0);
    ck_assert_uint_eq(r.head_len, strlen(s));
    ck_assert_int_eq(parse("GET http://a.test:8080 HTTP/1.1\r\nHost: a.test:8080\r\n\r\n", &r), 0);
    ck_assert_uint_eq(r.port, 8080);
    ck_assert_uint_eq(r.target_len, 0);
    ck_assert_int_eq(parse("GET http://a.test?q HTTP/1.0\r\n\r\n", &r),
                     0); /* 1.0: no Host needed */
    ck_assert(r.http10);
    ck_assert_uint_eq(r.target_len, 2);
    ck_assert_int_eq(parse("POST http://a.test/x HTTP/1.1\r\nHost: a.test\r\nContent-Length: 5\r\n"
                           "content-length:5\r\n\r\nhello",
                           &r),
                     0);
    ck_assert_int_eq(r.content_length, 5);
    ck_assert_int_eq(parse("POST http://a.test/x HTTP/1.1\r\nHost: a.test\r\n"
                           "Transfer-Encoding:  Chunked \r\n\r\n",
                           &r),
                     0);
    ck_assert(r.chunked);
    bad("GET /simple/ HTTP/1.1\r\nHost: pypi.org\r\n\r\n");          /* origin-form */
    bad("GET https://pypi.org/ HTTP/1.1\r\nHost: pypi.org\r\n\r\n"); /* not through CONNECT */
    bad("GET http://pypi.org/ HTTP/1.1\r\n\r\n");                    /* 1.1 without Host */
    bad("GET http://pypi.org/ HTTP/1.1\r\nHost: evil.org\r\n\r\n");
    bad("GET http://pypi.org/ HTTP/1.1\r\nHost: pypi.org\r\nHost: pypi.org\r\n\r\n");
    bad("GET http://pypi.org/ HTTP/1.1\r\nHost: pypi.org:81\r\n\r\n");
    bad("GET http://u:p@pypi.org/ HTTP/1.1\r\nHost: pypi.org\r\n\r\n");
    bad("GET http://pypi.org/#f HTTP/1.1\r\nHost: pypi.org\r\n\r\n");
    bad("POST http://a.test/ HTTP/1.1\r\nHost: a.test\r\nContent-Length: 5\r\nContent-Length: "
        "6\r\n\r\n");
    bad("POST http://a.test/ HTTP/1.1\r\nHost: a.test\r\nContent-Length: 5\r\n"
        "Transfer-Encoding: chunked\r\n\r\n");
    bad("POST http://a.test/ HTTP/1.1\r\nHost: a.test\r\nTransfer-Encoding: gzip, chunked\r\n\r\n");
    bad("POST http://a.test/ HTTP/1.1\r\nHost: a.test\r\nContent-Length: -1\r\n\r\n");
    bad("POST http://a.test/ HTTP/1.1\r\nHost: a.test\r\nContent-Length: "
        "1234567890123456789\r\n\r\n");
}
END_TEST

START_TEST(test_syntax)
{
    static const char nul[] = "GET http://a.test/ HTTP/1.1\r\nHost: a.test\r\nX: \0\r\n\r\n";
    struct egress_request r;

    bad("get http://a.test/ HTTP/1.1\r\n");
    bad("\x16\x03\x01\x02\x00"); /* TLS without CONNECT: refused at once */
    bad("ABCDEFGHIJKLMNOPQ");    /* a method over 16 letters, no need to wait */
    bad(" GET");
    bad("GET http://a.test/ HTTP/1.1\nHost: a.test\r\n\r\n"); /* bare LF */
    bad("GET http://a.test/ HTTP/1.1\rHost: a.test\r\n\r\n"); /* bare CR */
    bad("GET http://a.test/ HTTP/1.1\r\nHost: a.test\r\nX: a\rb\r\n\r\n");
    bad("GET http://a.test/ HTTP/1.1\r\nHost: a.test\r\n folded\r\n\r\n");
    bad("GET http://a.test/ HTTP/1.1\r\nHost : a.test\r\n\r\n");
    bad("GET http://a.test/ HTTP/1.1\r\n: x\r\nHost: a.test\r\n\r\n");
    bad("GET http://a.test/ HTTP/1.1\r\nHost: a.test\r\nX: \x01\r\n\r\n");
    bad("GET http://a.test/ HTTP/2.0\r\nHost: a.test\r\n\r\n");
    bad("GET http://a.test/ http/1.1\r\nHost: a.test\r\n\r\n");
    bad("GET http://a.test/  HTTP/1.1\r\nHost: a.test\r\n\r\n");
    bad("\r\nGET http://a.test/ HTTP/1.1\r\nHost: a.test\r\n\r\n");
    ck_assert_int_eq(parse_n(nul, sizeof(nul) - 1, &r), -EINVAL);
    ck_assert_int_eq(parse("GET http://a.test/ HTTP/1.1\r", &r), -EAGAIN);
    ck_assert_int_eq(parse("", &r), -EAGAIN);
}
END_TEST

START_TEST(test_limits)
{
    static char s[EGRESS_HEAD_MAX * 2];
    struct egress_request r;
    size_t n = (size_t)snprintf(s, sizeof(s), "GET http://a.test/ HTTP/1.1\r\nHost: a.test\r\n");

    /* EGRESS_HEAD_LINES_MAX header lines in all: accepted; one more: too big */
    for (int i = 1; i < EGRESS_HEAD_LINES_MAX; i++)
        n += (size_t)snprintf(s + n, sizeof(s) - n, "X-%d: y\r\n", i);
    strcpy(s + n, "\r\n");
    ck_assert_int_eq(parse(s, &r), 0);
    n += (size_t)snprintf(s + n, sizeof(s) - n, "X-last: y\r\n\r\n");
    ck_assert_int_eq(parse(s, &r), -E2BIG);
    /* a head of exactly EGRESS_HEAD_MAX bytes: accepted; one byte longer: too big, and a
     * line that never ends is too big once EGRESS_HEAD_MAX bytes arrived */
    n = (size_t)snprintf(s, sizeof(s), "GET http://a.test/ HTTP/1.1\r\nHost: a.test\r\nX: ");
    memset(s + n, 'v', EGRESS_HEAD_MAX - n - 4);
    memcpy(s + EGRESS_HEAD_MAX - 4, "\r\n\r\n", 5);
    ck_assert_int_eq(parse(s, &r), 0);
    ck_assert_uint_eq(r.head_len, EGRESS_HEAD_MAX);
    memset(s + n, 'v', EGRESS_HEAD_MAX - n - 3);
    memcpy(s + EGRESS_HEAD_MAX - 3, "\r\n\r\n", 5);
    ck_assert_int_eq(parse(s, &r), -E2BIG);
    memset(s + n, 'v', sizeof(s) - n);
    ck_assert_int_eq(parse_n(s, EGRESS_HEAD_MAX - 1, &r), -EAGAIN);
    ck_assert_int_eq(parse_n(s, EGRESS_HEAD_MAX, &r), -E2BIG);
    ck_assert_int_eq(parse_n(s, sizeof(s), &r), -E2BIG);
    /* the longest host name */
    n = (size_t)snprintf(s, sizeof(s), "CONNECT ");
    memset(s + n, 'h', 253);
    n += 253;
    n += (size_t)snprintf(s + n, sizeof(s) - n, ":443 HTTP/1.1\r\n\r\n");
    ck_assert_int_eq(parse(s, &r), 0);
    ck_assert_uint_eq(strlen(r.host), 253);
    n = (size_t)snprintf(s, sizeof(s), "CONNECT ");
    memset(s + n, 'h', 254);
    n += 254;
    snprintf(s + n, sizeof(s) - n, ":443 HTTP/1.1\r\n\r\n");
    bad(s);
}
END_TEST

static void allow_list(struct egress_allow *a)
{
    static const char *entries[] = {"allowed.test", "*.github.com", "198.51.100.5:8443",
                                    "203.0.113.0/24"};
    const char *reason;

    a->n = 0;
    for (size_t i = 0; i < sizeof(entries) / sizeof(entries[0]); i++)
        ck_assert_int_eq(egress_entry_parse(entries[i], strlen(entries[i]), &a->e[a->n++], &reason),
                         0);
}

static int req_verdict(const struct egress_allow *a, const char *head)
{
    struct egress_request r;
    const char *reason = NULL;
    int e;

    ck_assert_int_eq(parse(head, &r), 0);
    e = egress_request_allowed(a, &r, &reason);
    ck_assert(e == 0 || (e == -EACCES && reason));
    return e;
}

static int tunnel_verdict(const struct egress_allow *a, const char *target, const char *sni,
                          int sni_len)
{
    char head[600];
    struct egress_request r;
    const char *reason = NULL;
    int e;

    snprintf(head, sizeof(head), "CONNECT %s HTTP/1.1\r\n\r\n", target);
    ck_assert_int_eq(parse(head, &r), 0);
    e = egress_tunnel_allowed(a, &r, sni, sni_len, &reason);
    ck_assert(e == 0 || (e == -EACCES && reason));
    return e;
}

START_TEST(test_policy)
{
    static struct egress_allow a;

    allow_list(&a);
    /* by name: on the list, on the proxy's port for the kind of request */
    ck_assert_int_eq(req_verdict(&a, "CONNECT Allowed.Test:443 HTTP/1.1\r\n\r\n"), 0);
    ck_assert_int_eq(req_verdict(&a, "CONNECT api.github.com:443 HTTP/1.1\r\n\r\n"), 0);
    ck_assert_int_eq(
        req_verdict(&a, "GET http://allowed.test/x HTTP/1.1\r\nHost: allowed.test\r\n\r\n"), 0);
    ck_assert_int_eq(req_verdict(&a, "CONNECT denied.test:443 HTTP/1.1\r\n\r\n"), -EACCES);
    ck_assert_int_eq(req_verdict(&a, "CONNECT github.com:443 HTTP/1.1\r\n\r\n"), -EACCES);
    ck_assert_int_eq(req_verdict(&a, "CONNECT allowed.test:22 HTTP/1.1\r\n\r\n"), -EACCES);
    ck_assert_int_eq(req_verdict(&a, "CONNECT allowed.test:80 HTTP/1.1\r\n\r\n"), -EACCES);
    ck_assert_int_eq(
        req_verdict(&a, "GET http://allowed.test:443/ HTTP/1.1\r\nHost: allowed.test:443\r\n\r\n"),
        -EACCES);
    ck_assert_int_eq(
        req_verdict(&a, "GET http://denied.test/ HTTP/1.1\r\nHost: denied.test\r\n\r\n"), -EACCES);
    /* by address: a CIDR entry holding it and the port */
    ck_assert_int_eq(req_verdict(&a, "CONNECT 198.51.100.5:8443 HTTP/1.1\r\n\r\n"), 0);
    ck_assert_int_eq(req_verdict(&a, "CONNECT 198.51.100.5:443 HTTP/1.1\r\n\r\n"), -EACCES);
    ck_assert_int_eq(req_verdict(&a, "GET http://203.0.113.9:8080/ HTTP/1.0\r\n\r\n"), 0);
    ck_assert_int_eq(req_verdict(&a, "GET http://203.0.114.9/ HTTP/1.0\r\n\r\n"), -EACCES);
    /* the tunnel: the ClientHello names the CONNECT host itself */
    ck_assert_int_eq(tunnel_verdict(&a, "allowed.test:443", "allowed.test", 12), 0);
    ck_assert_int_eq(tunnel_verdict(&a, "allowed.test:443", "ALLOWED.test", 12), 0);
    ck_assert_int_eq(tunnel_verdict(&a, "allowed.test:443", "denied.test", 11), -EACCES);
    ck_assert_int_eq(tunnel_verdict(&a, "allowed.test:443", "api.github.com", 14),
                     -EACCES); /* allowed, but another */
    ck_assert_int_eq(tunnel_verdict(&a, "allowed.test:443", "allowed.test.", 13), -EACCES);
    ck_assert_int_eq(tunnel_verdict(&a, "allowed.test:443", "allowed.tes", 11), -EACCES);
    ck_assert_int_eq(tunnel_verdict(&a, "allowed.test:443", NULL, -ENOENT), -EACCES);
    ck_assert_int_eq(tunnel_verdict(&a, "allowed.test:443", NULL, -EINVAL), -EACCES);
    ck_assert_int_eq(tunnel_verdict(&a, "198.51.100.5:8443", NULL, -ENOENT), 0);
    ck_assert_int_eq(tunnel_verdict(&a, "198.51.100.5:8443", "allowed.test", 12), 0);
    ck_assert_int_eq(tunnel_verdict(&a, "198.51.100.5:8443", "denied.test", 11), -EACCES);
    ck_assert_int_eq(tunnel_verdict(&a, "198.51.100.5:8443", NULL, -EINVAL), -EACCES);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("egress-http");
    TCase *tc = tcase_create("egress-http");
    SRunner *sr;
    int failed;

    tcase_add_test(tc, test_connect);
    tcase_add_test(tc, test_absolute);
    tcase_add_test(tc, test_syntax);
    tcase_add_test(tc, test_limits);
    tcase_add_test(tc, test_policy);
    suite_add_tcase(s, tc);
    sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
