/* rpc_text_new() writes the bytes json-c writes (rpc_serialise()), for every kind of value:
 * a reply must not change by a byte however it is written. */
#include "b64.h"
#include "macro.h"
#include "rpc.h"
#include "tests/check-util.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* o written both ways: the same bytes, then '\n' and a NUL. */
static void check_same(json_object *o)
{
    size_t ref_len, len;
    const char *ref = rpc_serialise(o, &ref_len);
    _cleanup_free_ char *ref_copy = NULL, *text = NULL;

    ck_assert_ptr_nonnull(ref);
    ref_copy = malloc(ref_len + 1);
    memcpy(ref_copy, ref, ref_len + 1);
    ck_assert_int_eq(rpc_text_new(o, rpc_size_hint(o), &text, &len), 0);
    ck_assert_uint_eq(len, ref_len);
    ck_assert_msg(memcmp(text, ref_copy, len) == 0, "written %.*s\njson-c  %s", (int)len, text,
                  ref_copy);
    ck_assert_int_eq(text[len], '\n');
    ck_assert_int_eq(text[len + 1], '\0');
}

static void check_text(const char *json)
{
    json_object *o = json_tokener_parse(json);

    ck_assert_msg(o != NULL, "%s", json);
    check_same(o);
    json_object_put(o);
}

START_TEST(test_scalars)
{
    static const char *const texts[] = {
        "0",
        "-1",
        "7",
        "9223372036854775807",
        "-9223372036854775808",
        "18446744073709551615",
        "9223372036854775808",
        "1.5",
        "1.50",
        "-0.0",
        "1e300",
        "2E-7",
        "true",
        "false",
        "\"\"",
        "\"a/b\"",
        "\"q\\\"b\\\\s\"",
        "\"\\u0000x\\u001f\\u007f\"",
        "\"\\b\\f\\n\\r\\t\"",
        "\"é€😀\"",
        "[]",
        "{}",
        "[[],{},[null]]",
        "{\"\":{\"\\n\":[1,-2,3.25]}}",
    };
    json_object *o;

    for (size_t i = 0; i < ELEMENTSOF(texts); i++)
        check_text(texts[i]);
    check_same(NULL);
    o = json_object_new_int64(INT64_MIN);
    check_same(o);
    json_object_put(o);
    o = json_object_new_uint64(UINT64_MAX);
    check_same(o);
    json_object_put(o);
    o = json_object_new_double(0.1);
    check_same(o);
    json_object_put(o);
    o = json_object_new_double(NAN);
    check_same(o);
    json_object_put(o);
    o = json_object_new_double(-INFINITY);
    check_same(o);
    json_object_put(o);
}
END_TEST

/* Every byte value in a string and in a member name. */
START_TEST(test_every_byte)
{
    char s[256], key[2] = "k";
    json_object *o = json_object_new_object();

    for (int i = 0; i < 256; i++)
        s[i] = (char)i;
    json_object_object_add(o, "all", json_object_new_string_len(s, 256));
    for (int i = 1; i < 256; i++) {
        key[0] = (char)i;
        json_object_object_add(o, key, json_object_new_int(i));
    }
    check_same(o);
    json_object_put(o);

    /* Long ones: a string past the short path, a name over several chunks. */
    char longs[1031], longk[200];

    for (size_t i = 0; i < sizeof longs; i++)
        longs[i] = (char)(i * 7 % 256);
    for (size_t i = 0; i < sizeof longk - 1; i++)
        longk[i] = (char)(1 + i % 255);
    longk[sizeof longk - 1] = '\0';
    o = json_object_new_object();
    json_object_object_add(o, longk, json_object_new_string_len(longs, (int)sizeof longs));
    longk[64] = '\0'; /* ends at a chunk's end */
    json_object_object_add(o, longk, json_object_new_string_len(longs + 1, 300));
    check_same(o);
    json_object_put(o);
}
END_TEST

/* b64.c's strings written as they are, beside json-c's own, long and short, and a value
 * with a serialiser of its own (a parsed double keeps its text). */
START_TEST(test_plain_strings)
{
    json_object *o = json_object_new_object(), *parsed = json_tokener_parse("[1.250, 3e2]");
    char *big = malloc(300000);

    for (size_t i = 0; i < 300000; i++)
        big[i] = "ab/+=\"\\\n"[i % 5]; /* no quote, backslash or newline (i % 5 < 5) */
    ck_assert_int_eq(b64_object_add_data(o, "data", big, 300000), 0);
    ck_assert(b64_is_plain(json_object_object_get(o, "data")));
    ck_assert_int_eq(b64_object_add_data(o, "short", "x/y", 3), 0);
    ck_assert_int_eq(b64_object_add_data(o, "bin", "\xff\xfe", 2), 0);
    big[7] = '"';
    ck_assert_int_eq(b64_object_add_data(o, "quoted", big, 300000), 0);
    ck_assert(!b64_is_plain(json_object_object_get(o, "quoted")));
    json_object_object_add(o, "parsed", parsed);
    check_same(o);
    json_object_put(o);
    free(big);
}
END_TEST

static uint64_t rnd_state = 0x9e3779b97f4a7c15u;

static uint64_t rnd(void)
{
    rnd_state ^= rnd_state << 13;
    rnd_state ^= rnd_state >> 7;
    rnd_state ^= rnd_state << 17;
    return rnd_state;
}

static json_object *random_value(int depth)
{
    unsigned kind = (unsigned)(rnd() % (depth > 5 ? 6 : 8));
    char s[24];
    size_t n;

    switch (kind) {
    case 0:
        return NULL;
    case 1:
        return json_object_new_boolean(rnd() & 1);
    case 2:
        return json_object_new_int64((int64_t)rnd() >> (rnd() % 64));
    case 3:
        return json_object_new_double((double)(int64_t)rnd() / (double)(rnd() | 1));
    case 4:
    case 5:
        n = rnd() % sizeof s;
        for (size_t i = 0; i < n; i++)
            s[i] = (char)(rnd() % 4 ? 0x20 + rnd() % 0x60 : rnd() % 256);
        return json_object_new_string_len(s, (int)n);
    case 6: {
        json_object *a = json_object_new_array();

        for (unsigned i = 0, k = (unsigned)(rnd() % 5); i < k; i++)
            json_object_array_add(a, random_value(depth + 1));
        return a;
    }
    default: {
        json_object *o = json_object_new_object();

        for (unsigned i = 0, k = (unsigned)(rnd() % 6); i < k; i++) {
            n = 1 + rnd() % 8;
            for (size_t j = 0; j < n; j++)
                s[j] = (char)(1 + rnd() % 255);
            s[n] = '\0';
            json_object_object_add(o, s, random_value(depth + 1));
        }
        return o;
    }
    }
}

START_TEST(test_random_trees)
{
    for (int i = 0; i < 3000; i++) {
        json_object *o = random_value(0);

        check_same(o);
        json_object_put(o);
    }
}
END_TEST

/* rpc_to_line() is the same writer: the line is the text and its '\n'. */
START_TEST(test_to_line)
{
    json_object *o = rpc_result_new(NULL, json_tokener_parse("{\"a\":[1,\"x\\ty\"]}"));
    size_t len;
    char *line = rpc_to_line(o, &len);

    ck_assert_str_eq(line, "{\"jsonrpc\":\"2.0\",\"result\":{\"a\":[1,\"x\\ty\"]},\"id\":null}\n");
    ck_assert_uint_eq(len, strlen(line));
    free(line);
    json_object_put(o);
}
END_TEST

static Suite *rpc_write_suite(void)
{
    Suite *s = suite_create("rpc-write");
    TCase *tc = tcase_create("write");

    tcase_add_test(tc, test_scalars);
    tcase_add_test(tc, test_every_byte);
    tcase_add_test(tc, test_plain_strings);
    tcase_add_test(tc, test_random_trees);
    tcase_add_test(tc, test_to_line);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return check_run_suite(rpc_write_suite());
}
