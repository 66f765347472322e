/* proto/b64: strict RFC 4648 base64, UTF-8 validation, the name/name_b64
 * output spelling. */
#include "b64.h"
#include "tests/check-util.h"

#include <errno.h>
#include <stdint.h>
#include <string.h>

static uv_loop_t loop;

static void setup(void)
{
    ck_assert_int_eq(uv_loop_init(&loop), 0);
}

static void teardown(void)
{
    check_loop_done(&loop);
}

START_TEST(test_rfc4648_vectors)
{
    /* RFC 4648 section 10. */
    static const char *const plain[] = {"", "f", "fo", "foo", "foob", "fooba", "foobar"};
    static const char *const enc[] = {"",         "Zg==",     "Zm8=",    "Zm9v",
                                      "Zm9vYg==", "Zm9vYmE=", "Zm9vYmFy"};

    for (size_t i = 0; i < 7; i++) {
        char *e;
        uint8_t *d;
        size_t n;

        ck_assert_int_eq(b64_encode(plain[i], strlen(plain[i]), &e, &n), 0);
        ck_assert_str_eq(e, enc[i]);
        ck_assert_uint_eq(n, strlen(enc[i]));
        free(e);
        ck_assert_int_eq(b64_decode(enc[i], strlen(enc[i]), &d, &n), 0);
        ck_assert_uint_eq(n, strlen(plain[i]));
        ck_assert_uint_eq(b64_decoded_size(enc[i], strlen(enc[i])), n);
        ck_assert_mem_eq(d, plain[i], n);
        ck_assert_int_eq(d[n], 0);
        free(d);
    }
}
END_TEST

START_TEST(test_round_trip_binary)
{
    uint8_t in[1024];
    uint32_t seed = 42;

    for (size_t len = 0; len <= sizeof(in); len += (len < 16 ? 1 : 97)) {
        char *e;
        uint8_t *d;
        size_t n, dn;

        for (size_t i = 0; i < len; i++) {
            seed = seed * 1103515245u + 12345u;
            in[i] = (uint8_t)(seed >> 16);
        }
        ck_assert_int_eq(b64_encode(in, len, &e, &n), 0);
        ck_assert_uint_eq(n, (len + 2) / 3 * 4);
        ck_assert_int_eq(b64_decode(e, n, &d, &dn), 0);
        ck_assert_uint_eq(dn, len);
        if (len)
            ck_assert_mem_eq(d, in, len);
        free(e);
        free(d);
    }
}
END_TEST

START_TEST(test_bad_input)
{
    static const char *const bad[] = {
        "Zg",                         /* missing padding */
        "Zg=",                        /* short padding */
        "Zg===",                      /* length */
        "Z===",                       /* three '=' */
        "====",   "Zg==Zg==",         /* padding in the middle */
        "Zm9v\n",                     /* whitespace */
        " Zm9v",  "Zm 9v",    "Zm9-", /* base64url alphabet */
        "Zm9_",   "Zm9\x80",  "Zh==", /* non-zero unused bits */
        "Zm9=",   "A",
    };

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        uint8_t *d = (uint8_t *)"untouched";
        size_t n = 77;

        ck_assert_msg(b64_decode(bad[i], strlen(bad[i]), &d, &n) == -EINVAL, "accepted: %s",
                      bad[i]);
        ck_assert_uint_eq(n, 77); /* out-params untouched on failure */
    }
    /* An embedded NUL is a bad character too. */
    uint8_t *d;
    size_t n;
    ck_assert_int_eq(b64_decode("Zm\0v", 4, &d, &n), -EINVAL);
}
END_TEST

START_TEST(test_utf8)
{
    ck_assert(utf8_valid("", 0));
    ck_assert(utf8_valid("plain ascii", 11));
    ck_assert(utf8_valid("a\0b", 3));
    ck_assert(utf8_valid("\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80", 9));
    ck_assert(utf8_valid("\xf4\x8f\xbf\xbf", 4)); /* U+10FFFF */
    ck_assert(utf8_valid("\xed\x9f\xbf", 3));     /* U+D7FF */
    ck_assert(!utf8_valid("\xff", 1));
    ck_assert(!utf8_valid("\x80", 1)); /* lone continuation */
    ck_assert(!utf8_valid("\xc3", 1)); /* truncated */
    ck_assert(!utf8_valid("\xe2\x82", 2));
    ck_assert(!utf8_valid("\xc0\xaf", 2)); /* overlong */
    ck_assert(!utf8_valid("\xe0\x80\xaf", 3));
    ck_assert(!utf8_valid("\xf0\x80\x80\xaf", 4));
    ck_assert(!utf8_valid("\xed\xa0\x80", 3));     /* surrogate */
    ck_assert(!utf8_valid("\xf4\x90\x80\x80", 4)); /* above U+10FFFF */
    ck_assert(!utf8_valid("\xc3(", 2));
}
END_TEST

START_TEST(test_object_add_data)
{
    json_object *o = json_object_new_object(), *v;

    ck_assert_int_eq(b64_object_add_data(o, "stdout", "h\xc3\xa9llo\n", 7), 0);
    ck_assert_int_eq(b64_object_add_data(o, "stderr", "\xff\xfe", 2), 0);
    ck_assert_int_eq(b64_object_add_data(o, "content", "", 0), 0);
    ck_assert(json_object_object_get_ex(o, "stdout", &v));
    ck_assert_str_eq(json_object_get_string(v), "h\xc3\xa9llo\n");
    ck_assert(!json_object_object_get_ex(o, "stderr", NULL));
    ck_assert(json_object_object_get_ex(o, "stderr_b64", &v));
    ck_assert_str_eq(json_object_get_string(v), "//4=");
    ck_assert(json_object_object_get_ex(o, "content", &v));
    ck_assert_str_eq(json_object_get_string(v), "");
    json_object_put(o);
}
END_TEST

static Suite *b64_suite(void)
{
    Suite *s = suite_create("b64");
    TCase *tc = tcase_create("b64");

    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_rfc4648_vectors);
    tcase_add_test(tc, test_round_trip_binary);
    tcase_add_test(tc, test_bad_input);
    tcase_add_test(tc, test_utf8);
    tcase_add_test(tc, test_object_add_data);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return check_run_suite(b64_suite());
}
