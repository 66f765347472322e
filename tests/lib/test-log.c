/* Tests for lib/base/log: level names, filtering, the line format with and without
 * journal priority prefixes, $JOURNAL_STREAM detection, newline folding,
 * truncation of long messages and the errno helpers. */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "log.h"
#include "tests/check-util.h"

static void setup(void)
{
    log_set_max_level(LOG_INFO);
    log_set_prefix(false);
}

START_TEST(test_level_from_string)
{
    ck_assert_int_eq(log_level_from_string("debug"), LOG_DEBUG);
    ck_assert_int_eq(log_level_from_string("info"), LOG_INFO);
    ck_assert_int_eq(log_level_from_string("notice"), LOG_NOTICE);
    ck_assert_int_eq(log_level_from_string("warning"), LOG_WARNING);
    ck_assert_int_eq(log_level_from_string("err"), LOG_ERR);
    ck_assert_int_eq(log_level_from_string("error"), LOG_ERR);
    ck_assert_int_eq(log_level_from_string("crit"), LOG_CRIT);
    ck_assert_int_eq(log_level_from_string(NULL), -EINVAL);
    ck_assert_int_eq(log_level_from_string(""), -EINVAL);
    ck_assert_int_eq(log_level_from_string("Info"), -EINVAL);
    ck_assert_int_eq(log_level_from_string("warn"), -EINVAL);
    ck_assert_int_eq(log_level_from_string("debug "), -EINVAL);
}
END_TEST

START_TEST(test_level_to_string)
{
    ck_assert_str_eq(log_level_to_string(LOG_DEBUG), "debug");
    ck_assert_str_eq(log_level_to_string(LOG_INFO), "info");
    ck_assert_str_eq(log_level_to_string(LOG_ERR), "err");
    ck_assert_str_eq(log_level_to_string(LOG_EMERG), "emerg");
    ck_assert_str_eq(log_level_to_string(-1), "unknown");
    ck_assert_str_eq(log_level_to_string(LOG_DEBUG + 1), "unknown");
    /* Every name maps back to its level. */
    for (int l = LOG_EMERG; l <= LOG_DEBUG; l++)
        ck_assert_int_eq(log_level_from_string(log_level_to_string(l)), l);
}
END_TEST

START_TEST(test_max_level_filters)
{
    const char *out;

    ck_assert_int_eq(log_get_max_level(), LOG_INFO);
    ck_assert(log_is_enabled(LOG_ERR));
    ck_assert(log_is_enabled(LOG_INFO));
    ck_assert(!log_is_enabled(LOG_DEBUG));

    capture_begin();
    log_debug("test", "hidden %d", 1);
    log_emit(LOG_DEBUG, "test", "hidden %d", 2);
    log_info("test", "shown");
    out = capture_end();
    ck_assert_str_eq(out, "info: [test  ] shown\n");

    log_set_max_level(LOG_DEBUG);
    ck_assert_int_eq(log_get_max_level(), LOG_DEBUG);
    capture_begin();
    log_debug("test", "now %s", "visible");
    out = capture_end();
    ck_assert_str_eq(out, "debug: [test  ] now visible\n");

    log_set_max_level(LOG_ERR);
    capture_begin();
    log_warning("test", "hidden");
    log_notice("test", "hidden");
    log_error("test", "kept");
    out = capture_end();
    ck_assert_str_eq(out, "err: [test  ] kept\n");
}
END_TEST

START_TEST(test_format_plain)
{
    const char *out;

    capture_begin();
    log_info("http", "GET %s -> %d", "/nodes", 200);
    log_warning("registry-writer", "long tag");
    log_emit(LOG_NOTICE, NULL, "no component");
    out = capture_end();
    ck_assert_str_eq(out, "info: [http  ] GET /nodes -> 200\n"
                          "warning: [registry-writer] long tag\n"
                          "notice: [      ] no component\n");
}
END_TEST

START_TEST(test_format_journal_prefix)
{
    const char *out;

    log_set_prefix(true);
    capture_begin();
    log_info("pve", "one");
    log_error("pve", "two");
    out = capture_end();
    ck_assert_str_eq(out, "<6>[pve   ] one\n"
                          "<3>[pve   ] two\n");
}
END_TEST

START_TEST(test_newlines_folded)
{
    const char *out;

    capture_begin();
    log_info("test", "a\nb\r\nc%s", "\nd\n");
    out = capture_end();
    ck_assert_str_eq(out, "info: [test  ] a b  c d \n");
}
END_TEST

START_TEST(test_long_message_truncated)
{
    static char big[5000];
    const char *out, *msg, *nl;

    memset(big, 'x', sizeof big - 1);
    capture_begin();
    log_info("test", "%s", big);
    log_info("test", "after");
    out = capture_end();

    /* One line of at most 2047 message bytes, still newline-terminated,
     * and the next message starts on a line of its own. */
    msg = strstr(out, "] ");
    ck_assert_ptr_nonnull(msg);
    msg += 2;
    nl = strchr(msg, '\n');
    ck_assert_ptr_nonnull(nl);
    ck_assert_int_eq(nl - msg, 2047);
    for (const char *p = msg; p < nl; p++)
        ck_assert_int_eq(*p, 'x');
    ck_assert_str_eq(nl + 1, "info: [test  ] after\n");
}
END_TEST

START_TEST(test_errno_helpers)
{
    char want[256];
    const char *out;
    int r;

    capture_begin();
    r = log_error_errno(-ENOENT, "test", "open %s: %m", "/nope");
    ck_assert_int_eq(r, -ENOENT);
    /* A positive value is taken as the errno too. */
    r = log_warning_errno(EACCES, "test", "denied: %m");
    ck_assert_int_eq(r, EACCES);
    out = capture_end();
    snprintf(want, sizeof want, "err: [test  ] open /nope: %s\nwarning: [test  ] denied: %s\n",
             strerror(ENOENT), strerror(EACCES));
    ck_assert_str_eq(out, want);

    /* Below the level: nothing written, r still returned. */
    capture_begin();
    r = log_debug_errno(-EIO, "test", "hidden: %m");
    out = capture_end();
    ck_assert_int_eq(r, -EIO);
    ck_assert_str_eq(out, "");
}
END_TEST

START_TEST(test_errno_preserved)
{
    capture_begin();
    errno = EBUSY;
    log_info("test", "something");
    ck_assert_int_eq(errno, EBUSY);
    log_set_max_level(LOG_ERR);
    log_info("test", "filtered");
    ck_assert_int_eq(errno, EBUSY);
    (void)capture_end();
}
END_TEST

/* Logs one line in a child whose stderr is the capture file and whose
 * $JOURNAL_STREAM is as given ("match": the capture file's own device:inode,
 * NULL: unset). The child has not logged yet, so it detects the mode. */
static const char *log_in_child(const char *journal_stream)
{
    struct stat st;
    char value[64];
    pid_t pid;
    int status;

    capture_begin();
    pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        if (!journal_stream)
            unsetenv("JOURNAL_STREAM");
        else if (strcmp(journal_stream, "match") == 0) {
            if (fstat(STDERR_FILENO, &st) < 0)
                _exit(2);
            snprintf(value, sizeof value, "%llu:%llu", (unsigned long long)st.st_dev,
                     (unsigned long long)st.st_ino);
            setenv("JOURNAL_STREAM", value, 1);
        } else
            setenv("JOURNAL_STREAM", journal_stream, 1);
        log_notice("detect", "hello");
        fflush(stderr);
        _exit(0);
    }
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    return capture_end();
}

START_TEST(test_journal_detection)
{
    ck_assert_str_eq(log_in_child("match"), "<5>[detect] hello\n");
    ck_assert_str_eq(log_in_child(NULL), "notice: [detect] hello\n");
    ck_assert_str_eq(log_in_child("1:2"), "notice: [detect] hello\n");
    ck_assert_str_eq(log_in_child("garbage"), "notice: [detect] hello\n");
}
END_TEST

int main(void)
{
    Suite *s = suite_create("log");
    TCase *tc;

    /* Detection happens once per process, on the first message unless a mode
     * was forced: this case comes first and never forces one, so its children
     * detect even when Check runs without fork (CK_FORK=no). */
    tc = tcase_create("detect");
    tcase_add_test(tc, test_journal_detection);
    suite_add_tcase(s, tc);

    tc = tcase_create("log");
    tcase_add_checked_fixture(tc, setup, NULL);
    tcase_add_test(tc, test_level_from_string);
    tcase_add_test(tc, test_level_to_string);
    tcase_add_test(tc, test_max_level_filters);
    tcase_add_test(tc, test_format_plain);
    tcase_add_test(tc, test_format_journal_prefix);
    tcase_add_test(tc, test_newlines_folded);
    tcase_add_test(tc, test_long_message_truncated);
    tcase_add_test(tc, test_errno_helpers);
    tcase_add_test(tc, test_errno_preserved);
    suite_add_tcase(s, tc);
    return check_run_suite(s);
}
