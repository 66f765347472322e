/* Tests for lib/base/list.h: the intrusive doubly linked list macros. */
#include <check.h>
#include <stddef.h>

#include "list.h"
#include "macro.h"
#include "tests/check-util.h"

struct item {
    int v;
    struct item *next, *prev;
};

/* Asserts that the list holds exactly the values want[0..n) in order, with
 * consistent back links. */
static void check_list(struct item *head, const int *want, size_t n)
{
    struct item *prev = NULL;
    size_t i = 0;

    for (struct item *it = head; it; prev = it, it = it->next, i++) {
        ck_assert_uint_lt(i, n);
        ck_assert_int_eq(it->v, want[i]);
        ck_assert_ptr_eq(it->prev, prev);
    }
    ck_assert_uint_eq(i, n);
}

START_TEST(test_prepend_remove)
{
    struct item a = {.v = 1}, b = {.v = 2}, c = {.v = 3};
    struct item *head = NULL;

    LIST_PREPEND(head, &a);
    check_list(head, (int[]){1}, 1);
    LIST_PREPEND(head, &b);
    LIST_PREPEND(head, &c);
    check_list(head, (int[]){3, 2, 1}, 3);

    /* the middle */
    LIST_REMOVE(head, &b);
    check_list(head, (int[]){3, 1}, 2);
    ck_assert_ptr_null(b.next);
    ck_assert_ptr_null(b.prev);
    /* removing an unlinked item changes nothing */
    LIST_REMOVE(head, &b);
    check_list(head, (int[]){3, 1}, 2);

    /* the head, then the last */
    LIST_PREPEND(head, &b);
    check_list(head, (int[]){2, 3, 1}, 3);
    LIST_REMOVE(head, &b);
    check_list(head, (int[]){3, 1}, 2);
    LIST_REMOVE(head, &a);
    check_list(head, (int[]){3}, 1);
    ck_assert_ptr_null(a.prev);
    LIST_REMOVE(head, &c);
    ck_assert_ptr_null(head);

    /* an item taken out may go in again, with stale links cleared on insert */
    a.next = &c;
    a.prev = &b;
    LIST_PREPEND(head, &a);
    check_list(head, (int[]){1}, 1);
}
END_TEST

START_TEST(test_head_expression)
{
    /* head and item may be any lvalue / expression, each evaluated once */
    struct holder {
        struct item *items;
    } h = {0}, *hp = &h;
    struct item v[3] = {{.v = 0}, {.v = 1}, {.v = 2}};
    size_t i = 0;

    for (size_t k = 0; k < ELEMENTSOF(v); k++)
        LIST_PREPEND(hp->items, &v[i++]);
    ck_assert_uint_eq(i, 3);
    check_list(h.items, (int[]){2, 1, 0}, 3);
    i = 0;
    LIST_REMOVE(hp->items, &v[i++]);
    ck_assert_uint_eq(i, 1);
    check_list(h.items, (int[]){2, 1}, 2);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("list");
    TCase *tc = tcase_create("list");

    tcase_add_test(tc, test_prepend_remove);
    tcase_add_test(tc, test_head_expression);
    suite_add_tcase(s, tc);
    return check_run_suite(s);
}
