/* The operation driver (lib/engine/op-step.c) on its own, with a table of test steps on a bare
 * sandbox: rows run in order and skipped rows do not, an optional row that cannot start lets
 * the next one run, a start that fails ends the operation with its row's text and kind, a
 * poll is issued again until its step's deadline and then fails with the operation's
 * deadline message, a finishing step skips the rows after it, and a completion aborts on the
 * engine closing and on a destroy for an operation that yields to one (and not for one that
 * does not). */
#include "macro.h"

#include <check.h>
#include <errno.h>
#include <string.h>
#include <uv.h>

#include "op-step.h"
#include "sandbox-internal.h"
#include "tests/check-util.h"

/* What the test steps did and how the operation ended. */
static char trace[256];
static int ended; /* 0 running, 1 done, -1 failed */
static struct engine_error end_err;
static char end_msg[256];
static unsigned polls;
static bool skip_b;
static int start_b_result; /* what step b's start returns */

static void note(const char *s)
{
    strncat(trace, s, sizeof trace - strlen(trace) - 1);
}

static void on_fail(struct sandbox *sb, const struct engine_error *err)
{
    ended = -1;
    end_err = *err;
    snprintf(end_msg, sizeof end_msg, "%s", err->message ? err->message : "");
    end_err.message = end_msg;
}

static void on_done(struct sandbox *sb)
{
    ended = 1;
}

static void on_timer(uv_timer_t *t)
{
    op_step_done(t->data, NULL);
}

/* Step a: completes from the loop. */
static int start_a(struct sandbox *sb, uint64_t timeout_ms, const char **ret_fail)
{
    note("a");
    uv_timer_start(&sb->timer, on_timer, 1, 0);
    return 0;
}

static bool skip_b_fn(const struct sandbox *sb)
{
    return skip_b;
}

/* Step b: completes at once, or fails to start (start_b_result). */
static int start_b(struct sandbox *sb, uint64_t timeout_ms, const char **ret_fail)
{
    note("b");
    if (start_b_result < 0) {
        *ret_fail = "b could not start";
        return start_b_result;
    }
    op_step_done(sb, NULL);
    return 0;
}

/* Step c: completes at once, finishing the operation. */
static int start_c_finish(struct sandbox *sb, uint64_t timeout_ms, const char **ret_fail)
{
    note("c");
    op_step_finish(sb);
    return 0;
}

static int start_d(struct sandbox *sb, uint64_t timeout_ms, const char **ret_fail)
{
    note("d");
    op_step_done(sb, NULL);
    return 0;
}

/* Step p: polls forever (every 10 ms) until its deadline. */
static int start_poll(struct sandbox *sb, uint64_t timeout_ms, const char **ret_fail)
{
    polls++;
    op_step_again(sb, 10);
    return 0;
}

/* Step e: moves its deadline by extend_ms, notes the time left, completes. */
static uint64_t extend_ms, left_ms;

static int start_extend(struct sandbox *sb, uint64_t timeout_ms, const char **ret_fail)
{
    op_step_extend(sb, extend_ms);
    left_ms = op_step_left(sb);
    op_step_done(sb, NULL);
    return 0;
}

static const struct op_step extending_steps[] = {
    {.what = "extending", .start = start_extend, .cap_ms = 60, .fail = "e failed"},
};

static const struct op_step optional_steps[] = {
    {.what = "doing a", .start = start_a, .cap_ms = OP_STEP_OP_DEADLINE},
    {.what = "doing b", .start = start_b, .cap_ms = OP_STEP_OP_DEADLINE, .skip = skip_b_fn},
    {.what = "doing d", .start = start_d, .cap_ms = OP_STEP_OP_DEADLINE, .fail = "d failed"},
};

static const struct op_step failing_steps[] = {
    {.what = "doing a", .start = start_a, .cap_ms = OP_STEP_OP_DEADLINE},
    {.what = "doing b",
     .start = start_b,
     .cap_ms = OP_STEP_OP_DEADLINE,
     .fail = "b failed",
     .fail_kind = ENGINE_E_SSH},
    {.what = "doing d", .start = start_d, .cap_ms = OP_STEP_OP_DEADLINE, .fail = "d failed"},
};

static const struct op_step finishing_steps[] = {
    {.what = "doing a", .start = start_a, .cap_ms = OP_STEP_OP_DEADLINE},
    {.what = "doing c", .start = start_c_finish, .cap_ms = OP_STEP_OP_DEADLINE, .fail = "c"},
    {.what = "doing d", .start = start_d, .cap_ms = OP_STEP_OP_DEADLINE, .fail = "d failed"},
};

static const struct op_step polling_steps[] = {
    {.what = "doing a", .start = start_a, .cap_ms = OP_STEP_OP_DEADLINE},
    {.what = "polling", .start = start_poll, .cap_ms = 60, .fail = "p failed"},
};

#define KIND(name_, steps_, destroyed_)                                                            \
    {                                                                                              \
        .name = name_, .steps = steps_, .n_steps = ELEMENTSOF(steps_), .destroyed = destroyed_,    \
        .fail = on_fail, .done = on_done                                                           \
    }

static const struct op_kind optional_kind = KIND("test", optional_steps, NULL);
static const struct op_kind failing_kind = KIND("test", failing_steps, NULL);
static const struct op_kind finishing_kind = KIND("test", finishing_steps, NULL);
static const struct op_kind polling_kind = KIND("poll", polling_steps, NULL);
static const struct op_kind extending_kind = KIND("extend", extending_steps, NULL);
static const struct op_kind yielding_kind = KIND("test", optional_steps, "destroyed meanwhile");

static uv_loop_t loop;
static struct engine eng;
static struct sandbox sb;

static void setup(void)
{
    ck_assert_int_eq(uv_loop_init(&loop), 0);
    memset(&eng, 0, sizeof eng);
    memset(&sb, 0, sizeof sb);
    eng.loop = &loop;
    sb.engine = &eng;
    snprintf(sb.id, sizeof sb.id, "sb-test");
    uv_timer_init(&loop, &sb.timer);
    sb.timer.data = &sb;
    trace[0] = '\0';
    ended = 0;
    polls = 0;
    skip_b = false;
    start_b_result = 0;
}

static void teardown(void)
{
    uv_close((uv_handle_t *)&sb.timer, NULL);
    uv_run(&loop, UV_RUN_DEFAULT);
    ck_assert_int_eq(uv_loop_close(&loop), 0);
}

static void run(const struct op_kind *kind, uint64_t timeout_ms)
{
    op_step_run(&sb, kind, timeout_ms);
    while (ended == 0 && uv_run(&loop, UV_RUN_ONCE))
        ;
    ck_assert(!sb.run.running);
}

START_TEST(test_in_order)
{
    run(&optional_kind, OP_NO_DEADLINE);
    ck_assert_str_eq(trace, "abd");
    ck_assert_int_eq(ended, 1);
}
END_TEST

START_TEST(test_skipped)
{
    skip_b = true;
    run(&optional_kind, OP_NO_DEADLINE);
    ck_assert_str_eq(trace, "ad");
    ck_assert_int_eq(ended, 1);
}
END_TEST

START_TEST(test_optional_start_fails)
{
    start_b_result = -ENOMEM;
    run(&optional_kind, OP_NO_DEADLINE);
    ck_assert_str_eq(trace, "abd");
    ck_assert_int_eq(ended, 1);
}
END_TEST

START_TEST(test_start_fails)
{
    start_b_result = -ENOMEM;
    run(&failing_kind, OP_NO_DEADLINE);
    ck_assert_str_eq(trace, "ab");
    ck_assert_int_eq(ended, -1);
    ck_assert_int_eq(end_err.kind, ENGINE_E_SSH);
    ck_assert_int_eq(end_err.error, -ENOMEM);
    ck_assert_str_eq(end_err.message, "b could not start");
}
END_TEST

START_TEST(test_finish)
{
    run(&finishing_kind, OP_NO_DEADLINE);
    ck_assert_str_eq(trace, "ac");
    ck_assert_int_eq(ended, 1);
}
END_TEST

START_TEST(test_poll_deadline)
{
    run(&polling_kind, 5000);
    ck_assert_int_eq(ended, -1);
    ck_assert_int_eq(end_err.kind, ENGINE_E_DEADLINE);
    ck_assert_int_eq(end_err.error, -ETIMEDOUT);
    ck_assert_str_eq(end_err.message, "poll deadline (5s) passed while polling");
    ck_assert_uint_ge(polls, 3); /* every 10 ms within the step's 60 ms */
}
END_TEST

START_TEST(test_step_extend)
{
    extend_ms = 1000; /* 60 ms cap + 1 s, within the operation's 5 s */
    run(&extending_kind, 5000);
    ck_assert_int_eq(ended, 1);
    ck_assert_uint_gt(left_ms, 1000);
    ck_assert_uint_le(left_ms, 1060);
    extend_ms = 3600000; /* never past the operation's deadline */
    ended = 0;
    run(&extending_kind, 5000);
    ck_assert_uint_gt(left_ms, 4000);
    ck_assert_uint_le(left_ms, 5000);
}
END_TEST

START_TEST(test_op_deadline_before_step)
{
    run(&polling_kind, 0); /* passed before the first row starts */
    ck_assert_str_eq(trace, "");
    ck_assert_int_eq(ended, -1);
    ck_assert_str_eq(end_err.message, "poll deadline (0s) passed while doing a");
}
END_TEST

START_TEST(test_abort_closing)
{
    op_step_run(&sb, &optional_kind, OP_NO_DEADLINE); /* step a waits for the loop */
    eng.closing = true;
    while (ended == 0 && uv_run(&loop, UV_RUN_ONCE))
        ;
    ck_assert_str_eq(trace, "a");
    ck_assert_int_eq(ended, -1);
    ck_assert_int_eq(end_err.kind, ENGINE_E_SHUTDOWN);
}
END_TEST

START_TEST(test_abort_destroyed)
{
    op_step_run(&sb, &yielding_kind, OP_NO_DEADLINE);
    sb.destroy_requested = true;
    while (ended == 0 && uv_run(&loop, UV_RUN_ONCE))
        ;
    ck_assert_str_eq(trace, "a");
    ck_assert_int_eq(ended, -1);
    ck_assert_int_eq(end_err.kind, ENGINE_E_STATE);
    ck_assert_str_eq(end_err.message, "destroyed meanwhile");
}
END_TEST

START_TEST(test_destroy_waits)
{
    op_step_run(&sb, &optional_kind, OP_NO_DEADLINE);
    sb.destroy_requested = true; /* the operation does not yield: it runs to its end */
    while (ended == 0 && uv_run(&loop, UV_RUN_ONCE))
        ;
    ck_assert_str_eq(trace, "abd");
    ck_assert_int_eq(ended, 1);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("op-step");
    TCase *tc = tcase_create("driver");

    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_in_order);
    tcase_add_test(tc, test_skipped);
    tcase_add_test(tc, test_optional_start_fails);
    tcase_add_test(tc, test_start_fails);
    tcase_add_test(tc, test_finish);
    tcase_add_test(tc, test_poll_deadline);
    tcase_add_test(tc, test_step_extend);
    tcase_add_test(tc, test_op_deadline_before_step);
    tcase_add_test(tc, test_abort_closing);
    tcase_add_test(tc, test_abort_destroyed);
    tcase_add_test(tc, test_destroy_waits);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return check_run_suite(suite());
}
