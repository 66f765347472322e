/* lib/ssh/sshfile-fs: list, stat, remove, mkdir, rename and in-place writes over SFTP, against a
 * throwaway sshd on this host (so the results can be checked locally): argument checks, the
 * size bound of a recursive removal, links never followed out of a tree, the deadline, and
 * requests cancelled by a close. */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <uv.h>

#include "log.h"
#include "sshfile-fs.h"
#include "sshfile.h"
#include "sshs.h"
#include "ssh-fixture/fixture.h"
#include "tests/check-util.h"

static uv_loop_t loop;
static struct sshd_fixture fx;
static struct sshfile *sf;
static bool sf_closed;
static char work[320];

static void on_sf_closed(void *ud)
{
    sf_closed = true;
}

static void on_flag(void *ud)
{
    *(bool *)ud = true;
}

static void setup_sshd(void)
{
    struct sshs_config cfg;

    ck_assert_int_eq(uv_loop_init(&loop), 0);
    fixture_start(&fx);
    cfg = fixture_config(&fx);
    ck_assert_int_eq(sshfile_new(&loop, &cfg, 0, &sf), 0);
    sf_closed = false;
    snprintf(work, sizeof(work), "%s/files", fx.dir);
    ck_assert_int_eq(mkdir(work, 0755), 0);
}

static void teardown_sshd(void)
{
    if (sf) {
        sshfile_close(sf, on_sf_closed, NULL);
        fixture_run_until(&loop, &sf_closed, 30000);
        sf = NULL;
    }
    check_loop_done(&loop);
    fixture_stop(&fx);
}

struct done {
    bool done;
    int error;
    uint64_t count;
    size_t n;
    bool truncated;
    char first[256];
    enum sshfile_type type;
};

static void on_done(int error, uint64_t count, void *ud)
{
    struct done *d = ud;

    ck_assert(!d->done);
    d->done = true;
    d->error = error;
    d->count = count;
}

static void on_list(int error, const struct sshfile_list_result *res, void *ud)
{
    struct done *d = ud;

    ck_assert(!d->done);
    d->done = true;
    d->error = error;
    if (error == 0) {
        d->n = res->n;
        d->truncated = res->truncated;
        if (res->n)
            snprintf(d->first, sizeof(d->first), "%s", res->entries[0].name);
    }
}

static void on_stat(int error, const struct sshfile_entry *st, void *ud)
{
    struct done *d = ud;

    ck_assert(!d->done);
    d->done = true;
    d->error = error;
    if (error == 0)
        d->type = st->type;
}

static void wait_done(struct done *d)
{
    fixture_run_until(&loop, &d->done, 290000);
}

/* A removal on its own sshfile with a deadline long enough for 100000 entries on a busy
 * machine (the count and the removal each take a few seconds on an idle one). */
static int do_remove(const char *path, bool recursive, uint64_t *ret_count)
{
    struct sshs_config cfg = fixture_config(&fx);
    struct sshfile *f;
    struct done d = {};
    bool closed = false;

    ck_assert_int_eq(sshfile_new(&loop, &cfg, 280000, &f), 0);
    ck_assert_int_eq(sshfile_remove(f, path, recursive, on_done, &d), 0);
    wait_done(&d);
    sshfile_close(f, on_flag, &closed);
    fixture_run_until(&loop, &closed, 30000);
    if (ret_count)
        *ret_count = d.count;
    return d.error;
}

static void touch(const char *path)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);

    ck_assert_int_ge(fd, 0);
    close(fd);
}

START_TEST(test_argument_checks)
{
    struct done d = {};

    ck_assert_int_eq(sshfile_list(sf, "rel", 10, on_list, &d), -EINVAL);
    ck_assert_int_eq(sshfile_list(sf, "/", 0, on_list, &d), -EINVAL);
    ck_assert_int_eq(sshfile_list(sf, "/", SSHFILE_LIST_MAX + 1, on_list, &d), -EFBIG);
    ck_assert_int_eq(sshfile_stat(sf, "", false, on_stat, &d), -EINVAL);
    ck_assert_int_eq(sshfile_remove(sf, NULL, false, on_done, &d), -EINVAL);
    ck_assert_int_eq(sshfile_mkdir(sf, "/x", false, 010000, on_done, &d), -EINVAL);
    ck_assert_int_eq(sshfile_rename(sf, "/x", "y", on_done, &d), -EINVAL);
    ck_assert_int_eq(sshfile_rename(sf, "x", "/y", on_done, &d), -EINVAL);
    ck_assert(!d.done);
}
END_TEST

/* More than SSHFILE_REMOVE_MAX entries: -E2BIG and nothing removed; one fewer removes it all,
 * and a link inside the tree to a folder outside leaves that folder whole. */
static int do_rename(const char *from, const char *to)
{
    struct done d = {};

    ck_assert_int_eq(sshfile_rename(sf, from, to, on_done, &d), 0);
    wait_done(&d);
    return d.error;
}

/* The errno rename(2) and opendir(3) gave, where OpenSSH's v3 server folds it into another
 * status: a folder into itself EINVAL, the root EBUSY, another file system EXDEV, a link
 * loop ELOOP. */
START_TEST(test_folded_errnos)
{
    char d[400], in[420], a[400], b[400], shm[64];
    struct done l = {};

    snprintf(d, sizeof(d), "%s/dir", work);
    ck_assert_int_eq(mkdir(d, 0755), 0);
    snprintf(in, sizeof(in), "%s/inside", d);
    ck_assert_int_eq(do_rename(d, in), -EINVAL);
    ck_assert_int_eq(do_rename("/", in), -EBUSY);
    snprintf(shm, sizeof(shm), "/dev/shm/sandboxd-test-%d", (int)getpid());
    ck_assert_int_eq(do_rename(d, shm), -EXDEV);
    ck_assert_int_eq(access(d, F_OK), 0);
    ck_assert_int_eq(access(shm, F_OK), -1);

    snprintf(a, sizeof(a), "%s/loop-a", work);
    snprintf(b, sizeof(b), "%s/loop-b", work);
    ck_assert_int_eq(symlink(b, a), 0);
    ck_assert_int_eq(symlink(a, b), 0);
    ck_assert_int_eq(sshfile_list(sf, a, 10, on_list, &l), 0);
    wait_done(&l);
    ck_assert_int_eq(l.error, -ELOOP);
}
END_TEST

START_TEST(test_remove_bound)
{
    char tree[400], sub[420], p[480], outside[400];
    uint64_t removed = 0;
    struct stat st;

    snprintf(tree, sizeof(tree), "%s/tree", work);
    snprintf(outside, sizeof(outside), "%s/outside", work);
    ck_assert_int_eq(mkdir(tree, 0755), 0);
    ck_assert_int_eq(mkdir(outside, 0755), 0);
    snprintf(p, sizeof(p), "%s/keep", outside);
    touch(p);
    /* 100 folders of 999 files, a link and a file: 100 + 99900 + 2 = 100002 entries. */
    for (int i = 0; i < 100; i++) {
        snprintf(sub, sizeof(sub), "%s/d%03d", tree, i);
        ck_assert_int_eq(mkdir(sub, 0755), 0);
        for (int k = 0; k < 999; k++) {
            snprintf(p, sizeof(p), "%s/f%03d", sub, k);
            touch(p);
        }
    }
    snprintf(p, sizeof(p), "%s/out", tree);
    ck_assert_int_eq(symlink(outside, p), 0);
    snprintf(p, sizeof(p), "%s/last", tree);
    touch(p);
    ck_assert_int_eq(do_remove(tree, true, NULL), -E2BIG);
    snprintf(p, sizeof(p), "%s/d099/f998", tree);
    ck_assert_int_eq(stat(p, &st), 0); /* nothing removed */
    ck_assert_int_eq(unlink(p), 0);
    snprintf(p, sizeof(p), "%s/last", tree);
    ck_assert_int_eq(unlink(p), 0);
    ck_assert_int_eq(do_remove(tree, true, &removed), 0);
    ck_assert_uint_eq(removed, SSHFILE_REMOVE_MAX + 1); /* the entries and the folder */
    ck_assert_int_eq(lstat(tree, &st), -1);
    snprintf(p, sizeof(p), "%s/keep", outside);
    ck_assert_int_eq(stat(p, &st), 0);
}
END_TEST

START_TEST(test_list_bound)
{
    char dir[400], p[480];
    struct done d = {};

    snprintf(dir, sizeof(dir), "%s/many", work);
    ck_assert_int_eq(mkdir(dir, 0755), 0);
    for (int i = 0; i < 20; i++) {
        snprintf(p, sizeof(p), "%s/\xff%02d", dir, i); /* not UTF-8: bytes come back as they are */
        touch(p);
    }
    ck_assert_int_eq(sshfile_list(sf, dir, 20, on_list, &d), 0);
    wait_done(&d);
    ck_assert_int_eq(d.error, 0);
    ck_assert_uint_eq(d.n, 20);
    ck_assert(!d.truncated);
    ck_assert_str_eq(d.first, "\xff"
                              "00");
    d = (struct done){};
    ck_assert_int_eq(sshfile_list(sf, dir, 19, on_list, &d), 0);
    wait_done(&d);
    ck_assert_uint_eq(d.n, 19);
    ck_assert(d.truncated);
}
END_TEST

/* Queued requests are cancelled by a close, each callback run once. */
START_TEST(test_close_cancels)
{
    struct done d[4] = {};

    ck_assert_int_eq(sshfile_stat(sf, "/", false, on_stat, &d[0]), 0);
    ck_assert_int_eq(sshfile_list(sf, "/", 10, on_list, &d[1]), 0);
    ck_assert_int_eq(sshfile_mkdir(sf, "/nonexistent-dir-x", false, 0755, on_done, &d[2]), 0);
    ck_assert_int_eq(sshfile_remove(sf, "/nonexistent-dir-x", false, on_done, &d[3]), 0);
    sshfile_close(sf, on_sf_closed, NULL);
    sf = NULL;
    for (int i = 1; i < 4; i++) {
        ck_assert(d[i].done);
        ck_assert_int_eq(d[i].error, -ECANCELED);
    }
    fixture_run_until(&loop, &sf_closed, 30000);
    ck_assert(d[0].done); /* the running one finished (or met its deadline) */
}
END_TEST

/* A file system request stuck on a session that stopped answering is answered -ETIME at the
 * deadline, and the next one runs on a new session. */
START_TEST(test_deadline)
{
    struct sshs_config cfg = fixture_config(&fx);
    struct sshfile *f;
    struct done d = {};
    pid_t frozen[64];
    int n_frozen;
    bool closed = false;

    ck_assert_int_eq(sshfile_new(&loop, &cfg, 1500, &f), 0);
    ck_assert_int_eq(sshfile_stat(f, work, false, on_stat, &d), 0);
    wait_done(&d);
    ck_assert_int_eq(d.error, 0);
    ck_assert_int_eq(d.type, SSHFILE_DIR);
    n_frozen = fixture_freeze_sessions(&fx, frozen, ELEMENTSOF(frozen), SIGSTOP);
    ck_assert_int_ge(n_frozen, 1);
    d = (struct done){};
    ck_assert_int_eq(sshfile_list(f, work, 10, on_list, &d), 0);
    wait_done(&d);
    ck_assert_int_eq(d.error, -ETIME);
    d = (struct done){};
    ck_assert_int_eq(sshfile_mkdir(f, "/tmp", true, 0755, on_done, &d), 0);
    wait_done(&d);
    ck_assert_int_eq(d.error, 0);
    ck_assert_uint_eq(d.count, 0); /* existed */
    fixture_freeze_sessions(&fx, frozen, n_frozen, SIGCONT);
    sshfile_close(f, on_flag, &closed);
    fixture_run_until(&loop, &closed, 30000);
}
END_TEST

static Suite *sftp_fs_suite(void)
{
    Suite *s = suite_create("sftp-fs");
    TCase *tc = tcase_create("sshd");

    tcase_add_checked_fixture(tc, setup_sshd, teardown_sshd);
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, test_argument_checks);
    tcase_add_test(tc, test_folded_errnos);
    tcase_add_test(tc, test_remove_bound);
    tcase_add_test(tc, test_list_bound);
    tcase_add_test(tc, test_close_cancels);
    tcase_add_test(tc, test_deadline);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    if (getenv("SANDBOXD_TEST_DEBUG"))
        log_set_max_level(LOG_DEBUG);
    return check_run_suite(sftp_fs_suite());
}
