/* lib/ssh/sshexec-super: the exec supervisor's framing, the daemon's side (pure). */
#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "sshexec-super.h"
#include "tests/check-util.h"

struct seen {
    char out[256], err[256];
    size_t out_len, err_len;
    int code, signo, ends;
};

static void on_output(void *ud, bool is_stderr, const void *data, size_t len)
{
    struct seen *s = ud;
    char *b = is_stderr ? s->err : s->out;
    size_t *n = is_stderr ? &s->err_len : &s->out_len;

    ck_assert_uint_le(*n + len, 256);
    memcpy(b + *n, data, len);
    *n += len;
}

static void on_exited(void *ud, int code)
{
    struct seen *s = ud;

    s->code = code;
    s->ends++;
}

static void on_signalled(void *ud, int signo)
{
    struct seen *s = ud;

    s->signo = signo;
    s->ends++;
}

static const struct super_events ev = {on_output, on_exited, on_signalled};

/* stdout "hello", stderr "err", stdout " world", exit 3: each split at every place. */
static const unsigned char stream[] = {
    'O', 0, 0, 0, 5,   'h', 'e', 'l', 'l', 'o', 'R', 0, 0, 0, 3, 'e', 'r', 'r', 'O',
    0,   0, 0, 6, ' ', 'w', 'o', 'r', 'l', 'd', 'X', 0, 0, 0, 4, 0,   0,   0,   3,
};

START_TEST(test_feed_any_split)
{
    for (size_t cut = 0; cut <= sizeof(stream); cut++) {
        struct super_parser sp = {};
        struct seen s = {};

        super_feed(&sp, stream, cut, &ev, &s);
        super_feed(&sp, stream + cut, sizeof(stream) - cut, &ev, &s);
        ck_assert(!sp.error && sp.ended);
        ck_assert_int_eq(s.ends, 1);
        ck_assert_int_eq(s.code, 3);
        ck_assert_uint_eq(s.out_len, 11);
        ck_assert(!memcmp(s.out, "hello world", 11));
        ck_assert_uint_eq(s.err_len, 3);
    }
}
END_TEST

START_TEST(test_feed_signal_and_errors)
{
    static const unsigned char sig[] = {'S', 0, 0, 0, 4, 0, 0, 0, 9, 'O', 0, 0, 0, 1, 'x'};
    static const unsigned char bad_type[] = {'Z', 0, 0, 0, 0};
    static const unsigned char bad_len[] = {'X', 0, 0, 0, 5};
    static const unsigned char too_big[] = {'O', 0, 2, 0, 0};
    struct super_parser sp = {};
    struct seen s = {};

    super_feed(&sp, sig, sizeof(sig), &ev, &s);
    ck_assert(sp.ended && s.signo == 9 && s.out_len == 0); /* nothing after the end */
    sp = (struct super_parser){};
    super_feed(&sp, bad_type, sizeof(bad_type), &ev, &s);
    ck_assert(sp.error);
    sp = (struct super_parser){};
    super_feed(&sp, bad_len, sizeof(bad_len), &ev, &s);
    ck_assert(sp.error);
    sp = (struct super_parser){};
    super_feed(&sp, too_big, sizeof(too_big), &ev, &s);
    ck_assert(sp.error);
}
END_TEST

START_TEST(test_request)
{
    const char *argv[] = {"printf", "%s", "a b", NULL};
    const char *env[] = {"FOO=bar", NULL};
    struct sshexec_params p = {
        .argv = argv, .env = env, .cwd = "/tmp", .stdin_data = "in", .stdin_len = 2};
    const char token[] = "0123456789abcdef0123456789abcdef";
    char *r;
    size_t n;

    ck_assert_int_eq(super_request(&p, "abc", token, &r, &n), 0);
    /* Q frame: its length, then tagged entries */
    ck_assert_int_eq(r[0], 'Q');
    {
        size_t q = (size_t)((unsigned char)r[3] << 8 | (unsigned char)r[4]);
        const char want[] =
            "t0123456789abcdef0123456789abcdef\0mabc\0c/tmp\0aprintf\0a%s\0aa b\0eFOO=bar";

        ck_assert_uint_eq(q, sizeof(want));
        ck_assert(!memcmp(r + 5, want, sizeof(want)));
        /* then the stdin frame and its end */
        ck_assert(!memcmp(r + 5 + q, "I\0\0\0\2in", 7));
        ck_assert(!memcmp(r + 5 + q + 7, "E\0\0\0\0", 5));
        ck_assert_uint_eq(n, 5 + q + 7 + 5);
    }
    free(r);
    p.argv = NULL;
    p.command = "true";
    p.stdin_len = 0;
    p.cwd = "";
    ck_assert_int_eq(super_request(&p, "abc", token, &r, &n), -EINVAL);
}
END_TEST

START_TEST(test_parse_line)
{
    uint16_t port;
    char token[33];

    ck_assert_int_eq(
        super_parse_line("sandboxd-nsexec serving 777 0123456789abcdef0123456789abcdef\n", &port,
                         token),
        0);
    ck_assert_uint_eq(port, 777);
    ck_assert_str_eq(token, "0123456789abcdef0123456789abcdef");
    ck_assert_int_eq(super_parse_line("", &port, token), -EINVAL);
    ck_assert_int_eq(super_parse_line(NULL, &port, token), -EINVAL);
    ck_assert_int_eq(
        super_parse_line("sandboxd-nsexec serving 0 0123456789abcdef0123456789abcdef\n", &port,
                         token),
        -EINVAL);
    ck_assert_int_eq(
        super_parse_line("sandboxd-nsexec serving 4321 0123456789abcdef0123456789abcdef\n", &port,
                         token),
        -EINVAL);
    ck_assert_int_eq(super_parse_line("sandboxd-nsexec serving 777 0123\n", &port, token), -EINVAL);
    ck_assert_int_eq(
        super_parse_line("sandboxd-nsexec serving 777 0123456789abcdef0123456789abcdeX\n", &port,
                         token),
        -EINVAL);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("sshexec-super");
    TCase *tc = tcase_create("framing");

    tcase_add_test(tc, test_feed_any_split);
    tcase_add_test(tc, test_feed_signal_and_errors);
    tcase_add_test(tc, test_request);
    tcase_add_test(tc, test_parse_line);
    suite_add_tcase(s, tc);
    return check_run_suite(s);
}
