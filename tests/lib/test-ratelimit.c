/* Tests for lib/base/ratelimit.c: per-key bursts, intervals and the suppressed count. */
#include <check.h>

#include "macro.h"
#include "ratelimit.h"
#include "tests/check-util.h"

static const char CAUSE_A[] = "a", CAUSE_B[] = "b";

START_TEST(test_burst_then_suppressed)
{
    struct ratelimit rl;
    unsigned n = 99, passed = 0;

    ratelimit_init(&rl, 1000, 3);
    for (int i = 0; i < 10; i++)
        passed += ratelimit_pass(&rl, 1000, CAUSE_A, 5, &n);
    ck_assert_uint_eq(passed, 3);
    ck_assert_uint_eq(n, 0); /* the passed ones followed nothing suppressed */
    /* Another uid and another cause have their own budget. */
    ck_assert(ratelimit_pass(&rl, 1001, CAUSE_A, 5, NULL));
    ck_assert(ratelimit_pass(&rl, 1000, CAUSE_B, 5, NULL));
    /* Still inside the interval: suppressed. */
    ck_assert(!ratelimit_pass(&rl, 1000, CAUSE_A, 1004, &n));
    /* A new interval: the first message says how many were suppressed (7 + 1). */
    ck_assert(ratelimit_pass(&rl, 1000, CAUSE_A, 1005, &n));
    ck_assert_uint_eq(n, 8);
    ck_assert(ratelimit_pass(&rl, 1000, CAUSE_A, 1006, &n));
    ck_assert_uint_eq(n, 0);
}
END_TEST

START_TEST(test_table_is_bounded)
{
    struct ratelimit rl;

    ratelimit_init(&rl, 1000, 1);
    /* More keys than slots: each new key gets a slot (the oldest is reused). */
    for (uint64_t uid = 0; uid < 10 * RATELIMIT_SLOTS; uid++)
        ck_assert(ratelimit_pass(&rl, uid, CAUSE_A, uid, NULL));
    ck_assert(!ratelimit_pass(&rl, 10 * RATELIMIT_SLOTS - 1, CAUSE_A, 10 * RATELIMIT_SLOTS, NULL));
}
END_TEST

int main(void)
{
    Suite *s = suite_create("ratelimit");
    TCase *tc = tcase_create("ratelimit");

    tcase_add_test(tc, test_burst_then_suppressed);
    tcase_add_test(tc, test_table_is_bounded);
    suite_add_tcase(s, tc);
    return check_run_suite(s);
}
