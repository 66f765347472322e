/* proto/rpc-batch.c: the replies of a batch, sent once the last entry completed. */
#include "rpc-batch.h"
#include "tests/check-util.h"

START_TEST(test_replies_after_the_last)
{
    struct rpc_batch *b = rpc_batch_new();
    json_object *a;

    ck_assert_ptr_nonnull(b);
    rpc_batch_hold(b);
    rpc_batch_hold(b);
    rpc_batch_add(b, json_object_new_int(1)); /* answered while dispatching */
    ck_assert_ptr_null(rpc_batch_release(b)); /* the dispatcher is done */
    rpc_batch_add(b, NULL);                   /* a notification */
    ck_assert_ptr_null(rpc_batch_release(b));
    rpc_batch_add(b, json_object_new_int(2));
    a = rpc_batch_release(b);
    ck_assert_ptr_nonnull(a);
    ck_assert_str_eq(json_object_to_json_string(a), "[ 1, 2 ]");
    json_object_put(a);
}
END_TEST

START_TEST(test_notifications_only)
{
    struct rpc_batch *b = rpc_batch_new();

    ck_assert_ptr_nonnull(b);
    rpc_batch_hold(b);
    rpc_batch_add(b, NULL);
    ck_assert_ptr_null(rpc_batch_release(b));
    ck_assert_ptr_null(rpc_batch_release(b)); /* nothing to send: no array */
}
END_TEST

int main(void)
{
    Suite *s = suite_create("rpc-batch");
    TCase *tc = tcase_create("core");

    tcase_add_test(tc, test_replies_after_the_last);
    tcase_add_test(tc, test_notifications_only);
    suite_add_tcase(s, tc);
    return check_run_suite(s);
}
