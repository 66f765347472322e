/* proto/preview-http: the first request head of a preview connection (fed in pieces, limits,
 * bad input), Host matching against base_url patterns, the URL and the token's form. */
#include "preview-http.h"
#include "tests/check-util.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static enum preview_head_state feed_bytewise(struct preview_head *h, const char *s)
{
    enum preview_head_state st = PREVIEW_HEAD_MORE;

    for (size_t i = 0; s[i] && st == PREVIEW_HEAD_MORE; i++)
        st = preview_head_feed(h, s + i, 1);
    return st;
}

START_TEST(test_head_fields)
{
    static const char req[] = "GET /a/b?x=1&sandboxd_preview=pv-0123.5.ab&y=2 HTTP/1.1\r\n"
                              "Host: 8080-SB-1.Preview.Test:8090\r\n"
                              "Cookie: a=b; sandboxd_preview=pv-c00c; z=1\r\n"
                              "Upgrade: websocket\r\nConnection: Upgrade\r\n\r\nBODY";
    struct preview_head *h = preview_head_new();

    /* one byte at a time: every field split across feeds */
    ck_assert_int_eq(feed_bytewise(h, req), PREVIEW_HEAD_DONE);
    ck_assert_str_eq(preview_head_host(h), "8080-sb-1.preview.test");
    ck_assert_str_eq(preview_head_target(h), "/a/b?x=1&y=2");
    ck_assert_str_eq(preview_head_query_token(h), "pv-0123.5.ab");
    ck_assert_str_eq(preview_head_cookie_token(h), "pv-c00c");
    ck_assert_int_eq(preview_head_feed(h, "x", 1), PREVIEW_HEAD_DONE);
    preview_head_free(h);

    h = preview_head_new();
    ck_assert_int_eq(preview_head_feed(h, "GET / HTTP/1.1\r\n\r\n", 18), PREVIEW_HEAD_DONE);
    ck_assert_str_eq(preview_head_host(h), "");
    ck_assert_str_eq(preview_head_target(h), "/");
    ck_assert_ptr_null(preview_head_query_token(h));
    ck_assert_ptr_null(preview_head_cookie_token(h));
    preview_head_free(h);

    /* two Host headers: none */
    h = preview_head_new();
    ck_assert_int_eq(feed_bytewise(h, "GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n"),
                     PREVIEW_HEAD_DONE);
    ck_assert_str_eq(preview_head_host(h), "");
    preview_head_free(h);
}
END_TEST

START_TEST(test_head_bad_and_large)
{
    static const char *const bad[] = {
        "\x16\x03\x01\x00\x10garbage\r\n\r\n", "GET / HTTP/2.0\r\n\r\n", "GET / FOO/1.1\r\n\r\n",
        "GET / HTTP/1.1\r\nBad Header\r\n\r\n", "GET / HTTP/1.1\r\nHost: a\rb\r\n\r\n"};
    struct preview_head *h;
    char *big;

    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        h = preview_head_new();
        ck_assert_int_eq(preview_head_feed(h, bad[i], strlen(bad[i])), PREVIEW_HEAD_BAD);
        preview_head_free(h);
    }
    big = malloc(PREVIEW_HEAD_MAX + 100);
    memset(big, 'a', PREVIEW_HEAD_MAX + 100);
    memcpy(big, "GET / HTTP/1.1\r\nX: ", 19);
    h = preview_head_new();
    ck_assert_int_eq(preview_head_feed(h, big, PREVIEW_HEAD_MAX / 2), PREVIEW_HEAD_MORE);
    ck_assert_int_eq(preview_head_feed(h, big + PREVIEW_HEAD_MAX / 2, PREVIEW_HEAD_MAX / 2 + 100),
                     PREVIEW_HEAD_LARGE);
    preview_head_free(h);
    free(big);
}
END_TEST

START_TEST(test_base_url_and_host)
{
    static const char base[] = "https://{port}-{id}.preview.example:8443";
    char id[PARAMS_ID_MAX + 1], *url;
    unsigned port;

    ck_assert_int_eq(preview_base_url_check(base), 0);
    ck_assert_int_eq(preview_base_url_check("http://{id}.p{port}.x/"), 0);
    ck_assert_int_eq(preview_base_url_check("ftp://{port}-{id}.x"), -EINVAL);
    ck_assert_int_eq(preview_base_url_check("http://{port}.x"), -EINVAL);
    ck_assert_int_eq(preview_base_url_check("http://{port}-{id}-{id}.x"), -EINVAL);
    ck_assert_int_eq(preview_base_url_check("http://{port}-{id}.x/path"), -EINVAL);
    ck_assert_int_eq(preview_base_url_check("http://{port}-{id}.x:0"), -EINVAL);
    ck_assert_int_eq(preview_base_url_check("http://{port}_{id}.x"), -EINVAL);
    ck_assert_int_eq(preview_base_url_check(NULL), -EINVAL);

    ck_assert(preview_host_match(base, "8080-sb-a-1.preview.example", &port, id));
    ck_assert_uint_eq(port, 8080);
    ck_assert_str_eq(id, "sb-a-1");
    ck_assert(!preview_host_match(base, "8080-sb-a-1.preview.example.evil", &port, id));
    ck_assert(!preview_host_match(base, "0-sb.preview.example", &port, id));
    ck_assert(!preview_host_match(base, "065535-sb.preview.example", &port, id));
    ck_assert(!preview_host_match(base, "65536-sb.preview.example", &port, id));
    ck_assert(!preview_host_match(base, "80-.preview.example", &port, id));
    ck_assert(!preview_host_match(base, "80-a.b.preview.example", &port, id));
    ck_assert(!preview_host_match(base, "", &port, id));

    ck_assert_int_eq(preview_url(base, 3000, "sb-x", "pv-1.2.3", &url), 0);
    ck_assert_str_eq(url, "https://3000-sb-x.preview.example:8443/?sandboxd_preview=pv-1.2.3");
    free(url);
    ck_assert_int_eq(preview_url("http://{id}--{port}.x/", 1, "a", "t", &url), 0);
    ck_assert_str_eq(url, "http://a--1.x/?sandboxd_preview=t");
    free(url);
}
END_TEST

START_TEST(test_token)
{
    char mac[65], id[PREVIEW_ID_LEN + 1], tok[200];
    uint64_t exp;

    memset(mac, 'a', 64);
    mac[64] = '\0';
    snprintf(tok, sizeof tok, "pv-0123456789abcdef.1767225600.%s", mac);
    ck_assert_int_eq(preview_token_parse(tok, id, &exp, mac), 0);
    ck_assert_str_eq(id, "pv-0123456789abcdef");
    ck_assert_uint_eq(exp, 1767225600u);
    tok[strlen(tok) - 1] = 'A';
    ck_assert_int_eq(preview_token_parse(tok, id, &exp, mac), -EINVAL);
    tok[strlen(tok) - 1] = 'a';
    strcat(tok, "a");
    ck_assert_int_eq(preview_token_parse(tok, id, &exp, mac), -EINVAL);
    ck_assert_int_eq(
        preview_token_parse("pv-0123456789abcdef.99999999999999999999999.aa", id, &exp, mac),
        -EINVAL);
    ck_assert_int_eq(preview_token_parse("", id, &exp, mac), -EINVAL);
    ck_assert_int_eq(preview_token_parse(NULL, id, &exp, mac), -EINVAL);
}
END_TEST

static Suite *preview_suite(void)
{
    Suite *s = suite_create("preview-http");
    TCase *tc = tcase_create("preview-http");

    tcase_add_test(tc, test_head_fields);
    tcase_add_test(tc, test_head_bad_and_large);
    tcase_add_test(tc, test_base_url_and_host);
    tcase_add_test(tc, test_token);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return check_run_suite(preview_suite());
}
