/* Egress allow-list entries: what is accepted and how it is kept, what is refused and why,
 * the limits, and matching of addresses and names. */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "egress.h"

static struct egress_entry ok(const char *s)
{
    struct egress_entry e;
    const char *reason = NULL;
    int r = egress_entry_parse(s, strlen(s), &e, &reason);

    ck_assert_msg(r == 0, "'%s' refused: %s", s, reason);
    return e;
}

static void norm(const char *s, const char *want)
{
    struct egress_entry e = ok(s);
    char buf[EGRESS_ENTRY_MAX + 1];

    ck_assert_int_eq(egress_entry_format(&e, buf, sizeof(buf)), (int)strlen(want));
    ck_assert_str_eq(buf, want);
}

static void bad(const char *s, const char *reason_part)
{
    struct egress_entry e = {.kind = EGRESS_NAME, .name = "untouched"};
    const char *reason = NULL;

    ck_assert_msg(egress_entry_parse(s, strlen(s), &e, &reason) == -EINVAL, "'%s' accepted", s);
    ck_assert_msg(reason && strstr(reason, reason_part), "'%s': reason '%s' lacks '%s'", s,
                  reason ? reason : "(none)", reason_part);
    ck_assert_str_eq(e.name, "untouched"); /* *ret written only on success */
}

START_TEST(test_cidr)
{
    struct egress_entry e = ok("203.0.113.0/24:443");

    ck_assert_int_eq(e.kind, EGRESS_CIDR);
    ck_assert_uint_eq(e.addr, 0xcb007100u);
    ck_assert_uint_eq(e.prefix, 24);
    ck_assert_uint_eq(e.port, 443);
    norm("203.0.113.0/24:443", "203.0.113.0/24:443");
    norm("203.0.113.7", "203.0.113.7");
    norm("203.0.113.7/32", "203.0.113.7");
    norm("203.0.113.7:8080", "203.0.113.7:8080");
    norm("10.9.8.7/8", "10.0.0.0/8"); /* host bits masked, as Proxmox keeps IP set entries */
    norm("255.255.255.255/1:65535", "128.0.0.0/1:65535");
    bad("0.0.0.0/0", "/0");
    bad("10.0.0.0/33", "prefix");
    bad("10.0.0.0/", "prefix");
    bad("10.0.0.0/08", "prefix");
    bad("10.0.0.256", "IPv4");
    bad("10.0.0", "IPv4");
    bad("10.0.0.01", "IPv4");
    bad("10.0.0.0.0", "unexpected");
    bad("10.0.0.1:0", "port");
    bad("10.0.0.1:65536", "port");
    bad("10.0.0.1:", "port");
    bad("10.0.0.1:443:1", "unexpected");
    bad("10.0.0.1/24/24", "unexpected");
    bad("1234567.0.0.1", "IPv4");
}
END_TEST

START_TEST(test_names)
{
    struct egress_entry e = ok("*.GitHub.com.");

    ck_assert_int_eq(e.kind, EGRESS_NAME);
    ck_assert(e.wildcard);
    ck_assert_str_eq(e.name, "github.com");
    norm("PyPI.org", "pypi.org");
    norm("*.github.com", "*.github.com");
    norm("a-b.c0.example", "a-b.c0.example");
    norm("1.example", "1.example");
    bad("localhost", "two labels");
    bad("*.com.", "two labels");
    bad("example.123", "not a number");
    bad("pypi.org:443", "no port");
    bad("*.*.github.com", "'*.' only first");
    bad("api.*.github.com", "'*.' only first");
    bad("*", "'*.' only first");
    bad("-a.example", "'*.' only first");
    bad("a-.example", "do not end with '-'");
    bad("a..example", "1 to 63");
    bad(".example.org", "1 to 63");
    bad("under_score.example", "letters, digits");
    bad("sp ace.example", "letters, digits");
    bad("", "1 to 260");
    bad("::1", "IPv4");
    char lab[80];
    memset(lab, 'a', 64);
    strcpy(lab + 64, ".example");
    bad(lab, "1 to 63");
    ok(lab + 1); /* a label of 63 */
}
END_TEST

START_TEST(test_lengths)
{
    char s[EGRESS_ENTRY_MAX + 8];
    char buf[EGRESS_ENTRY_MAX + 1];
    struct egress_entry e;
    size_t n = 0;

    /* 253 characters: labels of 63 and a last of 61 */
    for (int i = 0; i < 3; i++) {
        memset(s + n, 'a' + i, 63);
        n += 63;
        s[n++] = '.';
    }
    memset(s + n, 'z', 61);
    n += 61;
    s[n] = '\0';
    ck_assert_uint_eq(strlen(s), EGRESS_NAME_MAX);
    e = ok(s);
    ck_assert_int_eq(egress_entry_format(&e, buf, sizeof(buf)), EGRESS_NAME_MAX);
    ck_assert_int_eq(egress_entry_format(&e, buf, 10), -ENOBUFS);
    memmove(s + 2, s, n + 1);
    memcpy(s, "*.", 2);
    e = ok(s); /* a wildcard of the longest name fits an entry */
    ck_assert_int_eq(egress_entry_format(&e, buf, sizeof(buf)), EGRESS_NAME_MAX + 2);
    strcat(s, "z");
    bad(s, "1 to 253");
    memset(s, 'a', EGRESS_ENTRY_MAX + 1);
    s[EGRESS_ENTRY_MAX + 1] = '\0';
    bad(s, "1 to 260");
}
END_TEST

static int parse_list(const char *json, struct egress_allow *a, struct params_error *err)
{
    json_object *o = json_tokener_parse(json);
    int r;

    ck_assert_ptr_nonnull(o);
    memset(err, 0, sizeof(*err));
    r = egress_allow_parse(o, "internet.allow", a, err);
    json_object_put(o);
    return r;
}

static void bad_list(const char *json, const char *reason_part)
{
    static struct egress_allow a;
    struct params_error err;

    ck_assert_msg(parse_list(json, &a, &err) == -EINVAL, "%s accepted", json);
    ck_assert_str_eq(err.param, "internet.allow");
    ck_assert_msg(strstr(err.reason, reason_part), "%s: reason '%s' lacks '%s'", json, err.reason,
                  reason_part);
}

START_TEST(test_list)
{
    static struct egress_allow a;
    struct params_error err;
    char json[EGRESS_ALLOW_MAX * 24 + 16];
    size_t n = 0;

    ck_assert_int_eq(parse_list("[]", &a, &err), 0);
    ck_assert_uint_eq(a.n, 0);
    ck_assert(!egress_has_names(&a));
    ck_assert_int_eq(
        parse_list("[\"pypi.org\", \"*.github.com\", \"203.0.113.0/24:443\"]", &a, &err), 0);
    ck_assert_uint_eq(a.n, 3);
    ck_assert(egress_has_names(&a));
    bad_list("{}", "array");
    bad_list("[1]", "entry 0 is not a string");
    bad_list("[\"pypi.org\", \"x\"]", "entry 1: ");
    bad_list("[\"10.0.0.0/8\", \"10.1.2.3/8\"]", "entry 1 repeats entry 0"); /* after masking */
    bad_list("[\"PyPI.org\", \"pypi.org.\"]", "entry 1 repeats entry 0");
    ck_assert_int_eq(
        parse_list("[\"pypi.org\", \"*.pypi.org\", \"10.0.0.0/8:1\", \"10.0.0.0/8\"]", &a, &err),
        0);
    n += (size_t)snprintf(json + n, sizeof(json) - n, "[");
    for (int i = 0; i < EGRESS_ALLOW_MAX; i++)
        n += (size_t)snprintf(json + n, sizeof(json) - n, "%s\"10.0.%d.0/24\"", i ? "," : "", i);
    snprintf(json + n, sizeof(json) - n, "]");
    ck_assert_int_eq(parse_list(json, &a, &err), 0);
    ck_assert_uint_eq(a.n, EGRESS_ALLOW_MAX);
    snprintf(json + n, sizeof(json) - n, ",\"10.1.0.0/24\"]");
    bad_list(json, "more than 64 entries");
}
END_TEST

START_TEST(test_match)
{
    static struct egress_allow a;
    struct params_error err;

    ck_assert_int_eq(parse_list("[\"pypi.org\", \"*.github.com\", \"203.0.113.0/24:443\", "
                                "\"198.51.100.3\"]",
                                &a, &err),
                     0);
    ck_assert(egress_allows_addr(&a, 0xcb007101u, 443));
    ck_assert(!egress_allows_addr(&a, 0xcb007101u, 80));
    ck_assert(!egress_allows_addr(&a, 0xcb007201u, 443));
    ck_assert(egress_allows_addr(&a, 0xc6336403u, 1));
    ck_assert(egress_allows_addr(&a, 0xc6336403u, 65535));
    ck_assert(!egress_allows_addr(&a, 0xc6336404u, 80));
#define NAME(s) (s), strlen(s)
    ck_assert(egress_allows_name(&a, NAME("pypi.org")));
    ck_assert(egress_allows_name(&a, NAME("PYPI.ORG.")));
    ck_assert(!egress_allows_name(&a, NAME("files.pypi.org")));
    ck_assert(!egress_allows_name(&a, NAME("xpypi.org")));
    ck_assert(egress_allows_name(&a, NAME("api.github.com")));
    ck_assert(egress_allows_name(&a, NAME("a.b.GitHub.com")));
    ck_assert(!egress_allows_name(&a, NAME("github.com")));
    ck_assert(!egress_allows_name(&a, NAME("evilgithub.com")));
    ck_assert(!egress_allows_name(&a, NAME("github.com.evil.org")));
    ck_assert(!egress_allows_name(&a, NAME("*.github.com")));
    ck_assert(!egress_allows_name(&a, NAME("")));
    ck_assert(!egress_allows_name(&a, NAME("203.0.113.1"))); /* addresses only by CIDR */
    ck_assert(
        !egress_allows_name(&a, NAME("pypi.org:443"))); /* a Host with its port is cut first */
    ck_assert(!egress_allows_name(&a, "pypi.org\0.evil", 14)); /* embedded NUL */
#undef NAME
}
END_TEST

START_TEST(test_public)
{
    static const char *const pub[] = {
        "203.0.113.0/24:443", "198.51.100.3",  "8.8.8.8:53", "11.0.0.0/8",
        "192.0.2.1",          "198.20.0.0/16", "pypi.org"};
    static const char *const not_pub[] = {"10.1.2.3",        "10.0.0.0/8",      "172.16.0.0/12:22",
                                          "172.31.255.255",  "192.168.1.0/24",  "127.0.0.1",
                                          "169.254.169.254", "100.64.0.1",      "0.1.2.3",
                                          "224.0.0.1",       "255.255.255.255", "198.19.0.1",
                                          "8.0.0.0/5",       "192.0.0.8",       "128.0.0.0/1"};

    for (size_t i = 0; i < sizeof(pub) / sizeof(pub[0]); i++) {
        struct egress_entry e = ok(pub[i]);

        ck_assert_msg(egress_entry_public(&e), "%s: not public", pub[i]);
    }
    for (size_t i = 0; i < sizeof(not_pub) / sizeof(not_pub[0]); i++) {
        struct egress_entry e = ok(not_pub[i]);

        ck_assert_msg(!egress_entry_public(&e), "%s: public", not_pub[i]);
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("egress");
    TCase *tc = tcase_create("egress");
    SRunner *sr;
    int failed;

    tcase_add_test(tc, test_cidr);
    tcase_add_test(tc, test_names);
    tcase_add_test(tc, test_lengths);
    tcase_add_test(tc, test_list);
    tcase_add_test(tc, test_match);
    tcase_add_test(tc, test_public);
    suite_add_tcase(s, tc);
    sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
