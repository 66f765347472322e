/* Tests for lib/ssh/filepool.c: the per-uid and per-group shares, round-robin service,
 * cancellation and the end of the workers. Work items block on a gate the test opens. */
#include <check.h>
#include <errno.h>
#include <string.h>
#include <time.h>

#include "filepool.h"
#include "macro.h"
#include "tests/check-util.h"

#define MAX_UIDS 4

struct treq {
    struct filepool_req req;
    unsigned uid;
    int status;
    bool done;
};

/* Shared with the workers, under mu. */
static uv_mutex_t mu;
static uv_cond_t cv;
static bool gate_open;
static unsigned running[MAX_UIDS], started[MAX_UIDS];
static unsigned n_done; /* loop thread only */

static void work(struct filepool_req *r)
{
    struct treq *t = container_of(r, struct treq, req);

    uv_mutex_lock(&mu);
    running[t->uid]++;
    started[t->uid]++;
    while (!gate_open)
        uv_cond_wait(&cv, &mu);
    running[t->uid]--;
    uv_mutex_unlock(&mu);
}

static void done(struct filepool_req *r, int status)
{
    struct treq *t = container_of(r, struct treq, req);

    ck_assert(!t->done);
    t->done = true;
    t->status = status;
    n_done++;
}

static void setup(void)
{
    ck_assert_int_eq(uv_mutex_init(&mu), 0);
    ck_assert_int_eq(uv_cond_init(&cv), 0);
    gate_open = false;
    memset(running, 0, sizeof(running));
    memset(started, 0, sizeof(started));
    n_done = 0;
}

static void teardown(void)
{
    uv_cond_destroy(&cv);
    uv_mutex_destroy(&mu);
}

/* started[uid] once it stayed the same for 200 ms. */
static unsigned settled(unsigned uid)
{
    unsigned last = UINT32_MAX, now;

    for (int i = 0; i < 50; i++) {
        uv_mutex_lock(&mu);
        now = started[uid];
        uv_mutex_unlock(&mu);
        if (now == last)
            return now;
        last = now;
        uv_sleep(200);
    }
    return now;
}

static void open_gate(void)
{
    uv_mutex_lock(&mu);
    gate_open = true;
    uv_cond_broadcast(&cv);
    uv_mutex_unlock(&mu);
}

static void run_until_done(uv_loop_t *loop, unsigned n)
{
    for (int i = 0; i < 1000 && n_done < n; i++)
        uv_run(loop, UV_RUN_ONCE);
    ck_assert_uint_eq(n_done, n);
}

static void finish(uv_loop_t *loop, struct filepool *p)
{
    filepool_unref(p);
    uv_run(loop, UV_RUN_DEFAULT);
    check_loop_done(loop);
}

START_TEST(test_uid_share_leaves_room)
{
    uv_loop_t loop;
    struct filepool *p;
    struct treq a[10] = {}, b[2] = {};
    int groups[10];

    uv_loop_init(&loop);
    ck_assert_int_eq(filepool_new(&loop, 4, &p), 0);
    /* Alone, uid 0 gets max(1, 4 / 2) = 2 workers, one sandbox each. */
    for (unsigned i = 0; i < ELEMENTSOF(a); i++) {
        a[i].uid = 0;
        ck_assert_int_eq(filepool_submit(p, &a[i].req, 1000, &groups[i], work, done), 0);
    }
    ck_assert_uint_eq(settled(0), 2);
    /* Another uid finds a free worker at once. */
    for (unsigned i = 0; i < ELEMENTSOF(b); i++) {
        b[i].uid = 1;
        ck_assert_int_eq(filepool_submit(p, &b[i].req, 2000, &groups[0], work, done), 0);
    }
    /* Two uids: max(1, 4 / 3) = 1 each; uid 0 keeps the 2 it had. */
    ck_assert_uint_eq(settled(1), 1);
    ck_assert_uint_eq(settled(0), 2);
    open_gate();
    run_until_done(&loop, ELEMENTSOF(a) + ELEMENTSOF(b));
    for (unsigned i = 0; i < ELEMENTSOF(a); i++)
        ck_assert_int_eq(a[i].status, 0);
    ck_assert_uint_eq(started[0], ELEMENTSOF(a));
    ck_assert_uint_eq(started[1], ELEMENTSOF(b));
    finish(&loop, p);
}
END_TEST

START_TEST(test_group_share)
{
    uv_loop_t loop;
    struct filepool *p;
    struct treq a[6] = {};
    int g1, g2;

    uv_loop_init(&loop);
    ck_assert_int_eq(filepool_new(&loop, 8, &p), 0);
    /* One uid: 4 workers; two busy sandboxes: 2 each. 1 call on g2, then 5 on g1. g2's goes
     * first: were g1 alone for a moment, idle workers would take up to 4 of its calls before
     * g2 came to halve its share. */
    for (unsigned k = 0; k < ELEMENTSOF(a); k++) {
        unsigned i = (k + 5) % ELEMENTSOF(a);

        a[i].uid = i == 5 ? 1 : 0; /* counted apart to see g2's */
        ck_assert_int_eq(filepool_submit(p, &a[i].req, 1000, i == 5 ? &g2 : &g1, work, done), 0);
    }
    ck_assert_uint_eq(settled(0), 2);
    ck_assert_uint_eq(settled(1), 1);
    open_gate();
    run_until_done(&loop, ELEMENTSOF(a));
    finish(&loop, p);
}
END_TEST

START_TEST(test_cancel)
{
    uv_loop_t loop;
    struct filepool *p;
    struct treq a[3] = {};
    int g;

    uv_loop_init(&loop);
    ck_assert_int_eq(filepool_new(&loop, 2, &p), 0);
    /* Alone on 2 workers: 1 runs, 2 wait. */
    for (unsigned i = 0; i < ELEMENTSOF(a); i++)
        ck_assert_int_eq(filepool_submit(p, &a[i].req, 1000, &g, work, done), 0);
    ck_assert_uint_eq(settled(0), 1);
    ck_assert_int_eq(filepool_cancel(p, &a[0].req), -EBUSY); /* running */
    ck_assert_int_eq(filepool_cancel(p, &a[2].req), 0);
    ck_assert_int_eq(filepool_cancel(p, &a[2].req), -EBUSY); /* over */
    run_until_done(&loop, 1);
    ck_assert(a[2].done && a[2].status == -ECANCELED);
    open_gate();
    run_until_done(&loop, 3);
    ck_assert_int_eq(a[0].status, 0);
    ck_assert_int_eq(a[1].status, 0);
    ck_assert_uint_eq(started[0], 2);
    finish(&loop, p);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("filepool");
    TCase *tc = tcase_create("filepool");

    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_uid_share_leaves_room);
    tcase_add_test(tc, test_group_share);
    tcase_add_test(tc, test_cancel);
    suite_add_tcase(s, tc);
    return check_run_suite(s);
}
