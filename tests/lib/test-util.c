/* Tests for lib/base/util: ids, atomic writes, RFC 3339, hashes, shell quoting. */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "util.h"
#include "macro.h"
#include "tests/check-util.h"

static char tmpdir[256];

static int rm_cb(const char *p, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st, (void)flag, (void)ftw;
    return remove(p);
}

static void setup(void)
{
    const char *t = getenv("TMPDIR");
    snprintf(tmpdir, sizeof(tmpdir), "%s/test-util-XXXXXX", t ? t : "/tmp");
    ck_assert_ptr_nonnull(mkdtemp(tmpdir));
}

static void teardown(void)
{
    nftw(tmpdir, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
}

static size_t count_entries(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *de;
    size_t n = 0;

    ck_assert_ptr_nonnull(d);
    while ((de = readdir(d)))
        if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
            n++;
    closedir(d);
    return n;
}

START_TEST(test_id_random)
{
    uv_loop_t loop;
    char a[ID_MAX + 1], b[ID_MAX + 1], small[8];

    ck_assert_int_eq(uv_loop_init(&loop), 0);
    ck_assert_int_eq(id_random(a, sizeof(a), "sb-"), 0);
    ck_assert_uint_eq(strlen(a), 3 + ID_RANDOM_CHARS);
    ck_assert_ptr_nonnull(startswith(a, "sb-"));
    ck_assert(id_is_valid(a));
    for (const char *p = a + 3; *p; p++)
        ck_assert_msg(strchr("0123456789abcdefghjkmnpqrstvwxyz", *p), "bad char in %s", a);
    ck_assert_int_eq(id_random(b, sizeof(b), "sb-"), 0);
    ck_assert_str_ne(a, b);
    ck_assert_int_eq(id_random(small, sizeof(small), "sb-"), -ENOBUFS);
    ck_assert_int_eq(id_random(a, sizeof(a), "SB-"), -EINVAL);
    ck_assert_int_eq(id_random(a, sizeof(a), NULL), 0);
    ck_assert_uint_eq(strlen(a), ID_RANDOM_CHARS);

    /* 20000 ids: no duplicates, every symbol used in every position. */
    {
        enum { N = 20000 };
        char(*ids)[ID_MAX + 1] = calloc(N, sizeof(*ids));
        unsigned used[ID_RANDOM_CHARS][128] = {{0}};
        ck_assert_ptr_nonnull(ids);
        for (int i = 0; i < N; i++) {
            ck_assert_int_eq(id_random(ids[i], sizeof(ids[i]), "x-"), 0);
            for (int j = 0; j < ID_RANDOM_CHARS; j++)
                used[j][(unsigned char)ids[i][2 + j]]++;
        }
        qsort(ids, N, sizeof(*ids), (int (*)(const void *, const void *))strcmp);
        for (int i = 1; i < N; i++)
            ck_assert_str_ne(ids[i - 1], ids[i]);
        for (int j = 0; j < ID_RANDOM_CHARS; j++)
            for (const char *p = "0123456789abcdefghjkmnpqrstvwxyz"; *p; p++)
                ck_assert_msg(used[j][(unsigned char)*p] > 400 && used[j][(unsigned char)*p] < 900,
                              "symbol %c at %d used %u times", *p, j, used[j][(unsigned char)*p]);
        free(ids);
    }

    ck_assert(!id_is_valid(""));
    ck_assert(!id_is_valid(NULL));
    ck_assert(!id_is_valid("sb_x"));
    ck_assert(!id_is_valid("Sb-x"));
    ck_assert(!id_is_valid("sb-x/.."));
    {
        char longid[ID_MAX + 2];
        memset(longid, 'a', sizeof(longid) - 1);
        longid[ID_MAX + 1] = '\0';
        ck_assert(!id_is_valid(longid));
        longid[ID_MAX] = '\0';
        ck_assert(id_is_valid(longid));
    }
    check_loop_done(&loop);
}
END_TEST

START_TEST(test_atomic_write)
{
    uv_loop_t loop;
    _cleanup_close_ int dfd = -1;
    _cleanup_free_ char *data = NULL;
    char path[512];
    struct stat st;
    size_t n;

    ck_assert_int_eq(uv_loop_init(&loop), 0);
    dfd = open(tmpdir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    ck_assert_int_ge(dfd, 0);

    /* relative to a dir fd */
    ck_assert_int_eq(atomic_write_file(dfd, "a.txt", "hello\n", 6, 0640), 0);
    ck_assert_int_eq(read_file_max(dfd, "a.txt", 100, &data, &n), 0);
    ck_assert_uint_eq(n, 6);
    ck_assert_str_eq(data, "hello\n");
    ck_assert_int_eq(fstatat(dfd, "a.txt", &st, 0), 0);
    ck_assert_uint_eq(st.st_mode & 07777, 0640);

    /* replace, with an exact mode regardless of umask */
    {
        mode_t old = umask(077);
        ck_assert_int_eq(atomic_write_file(dfd, "a.txt", "bye", 3, 0644), 0);
        umask(old);
    }
    free(TAKE_PTR(data));
    ck_assert_int_eq(read_file_max(dfd, "a.txt", 100, &data, &n), 0);
    ck_assert_str_eq(data, "bye");
    ck_assert_int_eq(fstatat(dfd, "a.txt", &st, 0), 0);
    ck_assert_uint_eq(st.st_mode & 07777, 0644);

    /* absolute path with AT_FDCWD, empty content */
    snprintf(path, sizeof(path), "%s/b.txt", tmpdir);
    ck_assert_int_eq(atomic_write_file(AT_FDCWD, path, NULL, 0, 0600), 0);
    free(TAKE_PTR(data));
    ck_assert_int_eq(read_file_max(AT_FDCWD, path, 100, &data, &n), 0);
    ck_assert_uint_eq(n, 0);
    ck_assert_uint_eq(count_entries(tmpdir), 2); /* no temp files left */

    /* failure: the target is a folder; nothing left behind, folder intact */
    ck_assert_int_eq(mkdirat(dfd, "dir", 0700), 0);
    ck_assert_int_eq(mkdirat(dfd, "dir/x", 0700), 0);
    ck_assert_int_lt(atomic_write_file(dfd, "dir/x", "z", 1, 0600), 0);
    ck_assert_uint_eq(count_entries(tmpdir), 3);
    snprintf(path, sizeof(path), "%s/dir", tmpdir);
    ck_assert_uint_eq(count_entries(path), 1);
    /* failure: the folder does not exist */
    ck_assert_int_eq(atomic_write_file(dfd, "nope/x", "z", 1, 0600), -ENOENT);
    ck_assert_int_eq(atomic_write_file(dfd, "", "z", 1, 0600), -EINVAL);
    ck_assert_int_eq(atomic_write_file(dfd, "dir/", "z", 1, 0600), -EISDIR);

    /* a large file */
    {
        size_t big = 3 * 1024 * 1024;
        char *buf = malloc(big);
        ck_assert_ptr_nonnull(buf);
        for (size_t i = 0; i < big; i++)
            buf[i] = (char)(i * 7);
        ck_assert_int_eq(atomic_write_file(dfd, "big", buf, big, 0600), 0);
        free(TAKE_PTR(data));
        ck_assert_int_eq(read_file_max(dfd, "big", big - 1, &data, &n), -EFBIG);
        ck_assert_int_eq(read_file_max(dfd, "big", big, &data, &n), 0);
        ck_assert_uint_eq(n, big);
        ck_assert(memcmp(data, buf, big) == 0);
        free(buf);
    }

    /* read_file_max refuses folders and symlinks */
    ck_assert_int_eq(read_file_max(dfd, "dir", 100, &data, &n), -EBADFD);
    ck_assert_int_eq(symlinkat("a.txt", dfd, "link"), 0);
    ck_assert_int_eq(read_file_max(dfd, "link", 100, &data, &n), -ELOOP);

    /* unlink_durable */
    ck_assert_int_eq(unlink_durable(dfd, "a.txt"), 0);
    ck_assert_int_eq(unlink_durable(dfd, "a.txt"), -ENOENT);
    ck_assert_int_eq(fsync_parent(dfd, "big"), 0);
    check_loop_done(&loop);
}
END_TEST

START_TEST(test_temp_names)
{
    uv_loop_t loop;

    ck_assert_int_eq(uv_loop_init(&loop), 0);
    ck_assert(atomic_is_temp_name(".#sb-x.json.abcd1234"));
    ck_assert(atomic_is_temp_name(".#instance.00000000"));
    ck_assert(!atomic_is_temp_name("sb-x.json"));
    ck_assert(!atomic_is_temp_name(".#sb-x.json"));
    ck_assert(!atomic_is_temp_name(".#.abcd1234"));
    ck_assert(!atomic_is_temp_name(NULL));
    ck_assert(!atomic_is_temp_name(".hidden"));
    check_loop_done(&loop);
}
END_TEST

START_TEST(test_mkdir_p)
{
    uv_loop_t loop;
    char path[512];
    struct stat st;

    ck_assert_int_eq(uv_loop_init(&loop), 0);
    snprintf(path, sizeof(path), "%s/a/b/c", tmpdir);
    ck_assert_int_eq(mkdir_p(path, 0700), 0);
    ck_assert_int_eq(stat(path, &st), 0);
    ck_assert(S_ISDIR(st.st_mode));
    ck_assert_int_eq(mkdir_p(path, 0700), 0);
    snprintf(path, sizeof(path), "%s/a/b/c/", tmpdir);
    ck_assert_int_eq(mkdir_p(path, 0700), 0);
    snprintf(path, sizeof(path), "%s/f", tmpdir);
    ck_assert_int_eq(atomic_write_file(AT_FDCWD, path, "x", 1, 0600), 0);
    snprintf(path, sizeof(path), "%s/f/g", tmpdir);
    ck_assert_int_eq(mkdir_p(path, 0700), -ENOTDIR);
    check_loop_done(&loop);
}
END_TEST

START_TEST(test_rfc3339)
{
    uv_loop_t loop;
    char buf[RFC3339_MAX];
    time_t t;

    ck_assert_int_eq(uv_loop_init(&loop), 0);
    ck_assert_int_eq(time_format_rfc3339(0, buf, sizeof(buf)), 0);
    ck_assert_str_eq(buf, "1970-01-01T00:00:00Z");
    ck_assert_int_eq(time_format_rfc3339(1796212800, buf, sizeof(buf)), 0);
    ck_assert_str_eq(buf, "2026-12-02T12:00:00Z");
    ck_assert_int_eq(time_format_rfc3339(1796212800, buf, sizeof(buf) - 1), -ENOBUFS);
    ck_assert_int_eq(time_format_rfc3339((time_t)300000000000LL, buf, sizeof(buf)), -ERANGE);

    ck_assert_int_eq(time_parse_rfc3339("2026-12-02T12:00:00Z", &t), 0);
    ck_assert_int_eq(t, 1796212800);
    ck_assert_int_eq(time_parse_rfc3339("2026-12-02t12:00:00z", &t), 0);
    ck_assert_int_eq(t, 1796212800);
    ck_assert_int_eq(time_parse_rfc3339("2026-12-02T13:30:00+01:30", &t), 0);
    ck_assert_int_eq(t, 1796212800);
    ck_assert_int_eq(time_parse_rfc3339("2026-12-02T10:00:00.999-02:00", &t), 0);
    ck_assert_int_eq(t, 1796212800);
    ck_assert_int_eq(time_parse_rfc3339("2024-02-29T00:00:00Z", &t), 0);
    ck_assert_int_eq(time_parse_rfc3339("2016-12-31T23:59:60Z", &t), 0);

    static const char *const bad[] = {
        "",
        "2026-12-02",
        "2026-12-02T12:00:00",
        "2026-12-02 12:00:00Z",
        "2026-12-02T12:00:00Zx",
        "2026-13-02T12:00:00Z",
        "2026-00-02T12:00:00Z",
        "2026-02-29T12:00:00Z",
        "2026-04-31T12:00:00Z",
        "2026-12-02T24:00:00Z",
        "2026-12-02T12:60:00Z",
        "2026-12-02T12:00:61Z",
        "2026-12-02T12:00:00.Z",
        "2026-12-02T12:00:00+1:00",
        "2026-12-02T12:00:00+24:00",
        "+026-12-02T12:00:00Z",
        "2026-1-02T12:00:00Z",
    };
    for (size_t i = 0; i < ELEMENTSOF(bad); i++)
        ck_assert_msg(time_parse_rfc3339(bad[i], &t) == -EINVAL, "accepted '%s'", bad[i]);

    /* round trip over a range of times */
    for (time_t x = 0; x < (time_t)4102444800LL; x += 86399 * 37 + 13) {
        ck_assert_int_eq(time_format_rfc3339(x, buf, sizeof(buf)), 0);
        ck_assert_int_eq(time_parse_rfc3339(buf, &t), 0);
        ck_assert_int_eq(t, x);
    }
    check_loop_done(&loop);
}
END_TEST

START_TEST(test_clock_hash)
{
    uv_loop_t loop;
    char hex[SHA256_HEX_SIZE];
    uint64_t a, b;

    ck_assert_int_eq(uv_loop_init(&loop), 0);
    a = now_monotonic_ms();
    usleep(20000);
    b = now_monotonic_ms();
    ck_assert_uint_ge(b - a, 19);
    ck_assert_uint_lt(b - a, 2000);
    ck_assert_int_gt(now_realtime(), 1700000000);

    ck_assert_int_eq(sha256_hex("abc", 3, hex), 0);
    ck_assert_str_eq(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    ck_assert_int_eq(sha256_hex(NULL, 0, hex), 0);
    ck_assert_str_eq(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    ck_assert(hex_is_valid(hex, 64));
    ck_assert(!hex_is_valid(hex, 63));
    ck_assert(hex_is_valid("0a", 0));
    ck_assert(!hex_is_valid("0A", 0));
    ck_assert(!hex_is_valid("", 0));
    check_loop_done(&loop);
}
END_TEST

START_TEST(test_strings)
{
    uv_loop_t loop;
    char *s = NULL;

    ck_assert_int_eq(uv_loop_init(&loop), 0);
    ck_assert_str_eq(startswith("sandboxd:v1", "sandboxd:"), "v1");
    ck_assert_ptr_null(startswith("sandbox", "sandboxd"));
    ck_assert(endswith("a.json", ".json"));
    ck_assert(!endswith("json", ".json"));
    ck_assert(streq_ptr(NULL, NULL));
    ck_assert(!streq_ptr("a", NULL));
    ck_assert(streq_ptr("a", "a"));
    ck_assert(!streq_ptr("a", "ab"));
    ck_assert_int_eq(strdup_replace(&s, "x"), 0);
    ck_assert_str_eq(s, "x");
    ck_assert_int_eq(strdup_replace(&s, "yz"), 0);
    ck_assert_str_eq(s, "yz");
    ck_assert_int_eq(strdup_replace(&s, NULL), 0);
    ck_assert_ptr_null(s);
    check_loop_done(&loop);
}
END_TEST

START_TEST(test_read_secret)
{
    _cleanup_close_ int dfd = -1;
    char *data = NULL;
    size_t n;

    dfd = open(tmpdir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    ck_assert_int_ge(dfd, 0);
    ck_assert_int_eq(atomic_write_file(dfd, "key", "s3cret\n", 7, 0600), 0);
    ck_assert_int_eq(symlinkat("key", dfd, "link"), 0);
    ck_assert_int_eq(mkdirat(dfd, "dir", 0700), 0);

    ck_assert_int_eq(read_file_flags(dfd, "key", 7, READ_FILE_SECRET, &data, &n), 0);
    ck_assert_uint_eq(n, 7);
    ck_assert_str_eq(data, "s3cret\n");
    free(TAKE_PTR(data));
    /* a secret may be behind a link (read_file_max does not follow one) */
    ck_assert_int_eq(read_file_flags(dfd, "link", 100, READ_FILE_SECRET, &data, NULL), 0);
    ck_assert_str_eq(data, "s3cret\n");
    free(TAKE_PTR(data));
    ck_assert_int_eq(read_file_max(dfd, "link", 100, &data, NULL), -ELOOP);
    /* too large, not a file, absent: nothing returned */
    ck_assert_int_eq(read_file_flags(dfd, "key", 6, READ_FILE_SECRET, &data, &n), -EFBIG);
    ck_assert_int_eq(read_file_flags(dfd, "dir", 100, READ_FILE_SECRET, &data, &n), -EINVAL);
    ck_assert_int_eq(read_file_flags(dfd, "none", 100, READ_FILE_SECRET, &data, &n), -ENOENT);
    ck_assert_ptr_null(data);
}
END_TEST

static void count_call(void *userdata)
{
    (*(int *)userdata)++;
}

START_TEST(test_close_notify)
{
    int calls = 0;
    struct close_notify *held = malloc(sizeof *held), copy;

    ck_assert_ptr_nonnull(held);
    *held = (struct close_notify){.cb = count_call, .userdata = &calls};
    copy = *held;
    free(held); /* the holder goes first; the copy still calls back */
    close_notify_run(copy);
    ck_assert_int_eq(calls, 1);
    close_notify_run((struct close_notify){0}); /* no callback: nothing */
    ck_assert_int_eq(calls, 1);
}
END_TEST

START_TEST(test_free_close_many)
{
    char *a = strdup("a"), *b = NULL, *c = strdup("c");
    int p[2], q[2], none = -1;

    ck_assert_ptr_nonnull(a);
    ck_assert_ptr_nonnull(c);
    /* NULL among the pointers; LSan fails the test should one leak */
    FREE_MANY(a, b, c);
    free_many(NULL, 0);

    ck_assert_int_eq(pipe(p), 0);
    ck_assert_int_eq(pipe(q), 0);
    int p0 = p[0];
    errno = EAGAIN;
    CLOSE_MANY(&p[0], &none, &p[1], &q[0]);
    ck_assert_int_eq(errno, EAGAIN);
    ck_assert_int_eq(p[0], -1);
    ck_assert_int_eq(p[1], -1);
    ck_assert_int_eq(q[0], -1);
    ck_assert_int_eq(none, -1);
    /* the descriptors are closed: q's write end sees no reader */
    ck_assert_int_eq(fcntl(p0, F_GETFD), -1); /* closed (no other thread opens files here) */
    ck_assert_int_eq(errno, EBADF);
    {
        struct sigaction sa = {.sa_handler = SIG_IGN}, old;

        ck_assert_int_eq(sigaction(SIGPIPE, &sa, &old), 0);
        ck_assert_int_eq(write(q[1], "x", 1), -1);
        ck_assert_int_eq(errno, EPIPE);
        ck_assert_int_eq(sigaction(SIGPIPE, &old, NULL), 0);
    }
    CLOSE_MANY(&q[1]);
    ck_assert_int_eq(q[1], -1);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("util");
    TCase *tc = tcase_create("util");

    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_id_random);
    tcase_add_test(tc, test_atomic_write);
    tcase_add_test(tc, test_temp_names);
    tcase_add_test(tc, test_mkdir_p);
    tcase_add_test(tc, test_rfc3339);
    tcase_add_test(tc, test_clock_hash);
    tcase_add_test(tc, test_strings);
    tcase_add_test(tc, test_free_close_many);
    tcase_add_test(tc, test_read_secret);
    tcase_add_test(tc, test_close_notify);
    suite_add_tcase(s, tc);
    return check_run_suite(s);
}
