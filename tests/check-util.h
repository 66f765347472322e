/* Helpers shared by the Check tests. */
#pragma once

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <uv.h>

/* Closes every handle still open on the loop, runs it to completion and
 * asserts that uv_loop_close() succeeds: a leaked handle fails the test. */
static inline void check_walk_close(uv_handle_t *h, void *arg)
{
    (void)arg;
    if (!uv_is_closing(h))
        uv_close(h, NULL);
}

static inline void check_loop_done(uv_loop_t *loop)
{
    int r;

    /* Let pending close callbacks run; anything still active is a leak. */
    for (int i = 0; i < 16; i++)
        uv_run(loop, UV_RUN_NOWAIT);
    r = uv_loop_close(loop);
    if (r != 0) {
        uv_walk(loop, check_walk_close, NULL);
        uv_run(loop, UV_RUN_DEFAULT);
        (void)uv_loop_close(loop);
    }
    ck_assert_msg(r == 0, "uv_loop_close: %s (a handle leaked)", uv_strerror(r));
}

/* Runs a Check suite with output on stdout and returns the exit status. */
static inline int check_run_suite(Suite *s)
{
    SRunner *sr = srunner_create(s);
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}

/* Everything written to stderr between capture_begin() and capture_end() goes
 * to an unlinked temporary file; capture_end() returns what was written. */
static int check_saved_stderr = -1;
static FILE *check_capture_file;
static char check_captured[8192];

static inline void capture_begin(void)
{
    fflush(stderr);
    check_capture_file = tmpfile();
    ck_assert_ptr_nonnull(check_capture_file);
    check_saved_stderr = dup(STDERR_FILENO);
    ck_assert_int_ge(check_saved_stderr, 0);
    ck_assert_int_eq(dup2(fileno(check_capture_file), STDERR_FILENO), STDERR_FILENO);
}

static inline const char *capture_end(void)
{
    size_t n;

    fflush(stderr);
    ck_assert_int_eq(dup2(check_saved_stderr, STDERR_FILENO), STDERR_FILENO);
    close(check_saved_stderr);
    check_saved_stderr = -1;
    rewind(check_capture_file);
    n = fread(check_captured, 1, sizeof check_captured - 1, check_capture_file);
    check_captured[n] = '\0';
    fclose(check_capture_file);
    check_capture_file = NULL;
    return check_captured;
}
