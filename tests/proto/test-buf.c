/* Tests for proto/buf: the growable byte buffer. */
#include <check.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "tests/check-util.h"

START_TEST(test_append)
{
    struct buf b = {0};
    char *s;

    /* nothing appended: no memory */
    ck_assert_ptr_null(b.data);
    ck_assert_int_eq(buf_append(&b, "", 0), 0);
    ck_assert_str_eq(b.data, "");
    ck_assert_int_eq(buf_append(&b, "abc", 3), 0);
    ck_assert_int_eq(buf_append(&b, "de\0f", 4), 0);
    ck_assert_uint_eq(b.len, 7);
    ck_assert_mem_eq(b.data, "abcde\0f", 8); /* NUL after the bytes */
    ck_assert_uint_eq(b.cap, BUF_MIN_ALLOC);

    /* growth keeps the bytes */
    for (int i = 0; i < 3000; i++)
        ck_assert_int_eq(buf_append(&b, "0123456789", 10), 0);
    ck_assert_uint_eq(b.len, 30007);
    ck_assert_uint_ge(b.cap, b.len + 1);
    ck_assert_uint_le(b.cap, 2 * (b.len + 1));
    ck_assert_mem_eq(b.data + 7, "0123456789", 10);
    ck_assert_mem_eq(b.data + 29997, "0123456789", 10);
    ck_assert_int_eq(b.data[b.len], 0);

    /* clear keeps the memory, or frees it */
    buf_clear(&b, false);
    ck_assert_uint_eq(b.len, 0);
    ck_assert_ptr_nonnull(b.data);
    ck_assert_str_eq(b.data, "");
    ck_assert_int_eq(buf_append(&b, "x", 1), 0);
    buf_clear(&b, true);
    ck_assert_ptr_null(b.data);
    ck_assert_uint_eq(b.cap, 0);

    /* steal hands over the text */
    ck_assert_int_eq(buf_append(&b, "hello", 5), 0);
    s = buf_steal(&b);
    ck_assert_str_eq(s, "hello");
    ck_assert_ptr_null(b.data);
    ck_assert_uint_eq(b.len, 0);
    free(s);
    ck_assert_ptr_null(buf_steal(&b));

    /* a size past what can be counted: -ENOMEM, nothing changed */
    ck_assert_int_eq(buf_append(&b, "y", 1), 0);
    ck_assert_int_eq(buf_append(&b, "y", SIZE_MAX - 1), -ENOMEM);
    ck_assert_uint_eq(b.len, 1);
    ck_assert_str_eq(b.data, "y");
    buf_clear(&b, true);
}
END_TEST

START_TEST(test_max)
{
    struct buf b = {.max = 10};
    char *s;

    ck_assert_int_eq(buf_append(&b, "0123456", 7), 0);
    /* past max: refused, nothing changed */
    ck_assert_int_eq(buf_append(&b, "abcd", 4), -E2BIG);
    ck_assert_uint_eq(b.len, 7);
    ck_assert_str_eq(b.data, "0123456");
    ck_assert_int_eq(buf_append(&b, "abc", 3), 0);
    ck_assert_str_eq(b.data, "0123456abc");
    ck_assert_int_eq(buf_append(&b, "x", 1), -E2BIG);
    ck_assert_int_eq(buf_append(&b, "x", SIZE_MAX), -E2BIG);
    /* the allocation stays within max and the NUL */
    ck_assert_uint_eq(b.cap, 11);
    s = buf_steal(&b);
    ck_assert_uint_eq(b.max, 10); /* kept for the next use */
    free(s);
}
END_TEST

START_TEST(test_grow)
{
    char *d = NULL;
    size_t cap = 0;

    ck_assert_int_eq(buf_grow(&d, &cap, 1, 0), 0);
    ck_assert_uint_eq(cap, BUF_MIN_ALLOC);
    /* enough already: unchanged */
    ck_assert_int_eq(buf_grow(&d, &cap, BUF_MIN_ALLOC, 0), 0);
    ck_assert_uint_eq(cap, BUF_MIN_ALLOC);
    /* doubles ... */
    ck_assert_int_eq(buf_grow(&d, &cap, BUF_MIN_ALLOC + 1, 0), 0);
    ck_assert_uint_eq(cap, 2 * BUF_MIN_ALLOC);
    /* ... but not past the ceiling ... */
    ck_assert_int_eq(buf_grow(&d, &cap, 2 * BUF_MIN_ALLOC + 1, 3 * BUF_MIN_ALLOC), 0);
    ck_assert_uint_eq(cap, 3 * BUF_MIN_ALLOC);
    /* ... unless the need is larger */
    ck_assert_int_eq(buf_grow(&d, &cap, 5 * BUF_MIN_ALLOC, 4 * BUF_MIN_ALLOC), 0);
    ck_assert_uint_eq(cap, 5 * BUF_MIN_ALLOC);
    memset(d, 'z', cap); /* ASan: all of it is ours */
    free(d);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("buf");
    TCase *tc = tcase_create("buf");

    tcase_add_test(tc, test_append);
    tcase_add_test(tc, test_max);
    tcase_add_test(tc, test_grow);
    suite_add_tcase(s, tc);
    return check_run_suite(s);
}
