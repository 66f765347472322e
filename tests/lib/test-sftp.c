/* lib/ssh/sshfile: file write/read over SFTP on the thread pool, against a throwaway sshd on this
 * host (so the files written remotely can be checked locally). */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <libssh/sftp.h>
#include <string.h>
#include <signal.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <uv.h>

#include "filepool.h"
#include "log.h"
#include "sshfile.h"
#include "sshs.h"
#include "ssh-fixture/fixture.h"
#include "tests/check-util.h"

static uv_loop_t loop;
static struct sshd_fixture fx;
static struct sshfile *sf;
static bool sf_closed;
static char work[320];

static void setup_loop(void)
{
    ck_assert_int_eq(uv_loop_init(&loop), 0);
}

static void teardown_loop(void)
{
    check_loop_done(&loop);
}

static void on_sf_closed(void *ud)
{
    sf_closed = true;
}

static void setup_sshd(void)
{
    struct sshs_config cfg;

    setup_loop();
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
    teardown_loop();
    fixture_stop(&fx);
}

struct wr {
    bool done;
    int error;
    uint64_t bytes;
};

struct rd {
    bool done;
    int error;
    char *data;
    size_t len;
    uint64_t size;
    bool eof;
};

static void on_written(int error, uint64_t bytes, void *ud)
{
    struct wr *w = ud;

    ck_assert(!w->done);
    w->done = true;
    w->error = error;
    w->bytes = bytes;
}

static void on_read(int error, struct sshfile_read_result *res, void *ud)
{
    struct rd *r = ud;

    ck_assert(!r->done);
    r->done = true;
    r->error = error;
    if (error)
        return;
    r->data = res->data;
    res->data = NULL; /* taken */
    r->len = res->len;
    r->size = res->size;
    r->eof = res->eof;
}

/* A write of a copy of data (sshfile_write() takes the buffer). */
static int write_file(const char *path, const void *data, size_t len, mode_t mode, bool parents)
{
    struct sshfile_write_params p = {
        .path = path, .data = malloc(len + 1), .len = len, .mode = mode, .make_parents = parents};
    struct wr w = {};

    ck_assert_ptr_nonnull(p.data);
    memcpy(p.data, data, len);
    ck_assert_int_eq(sshfile_write(sf, &p, on_written, &w), 0);
    ck_assert(!w.done);
    fixture_run_until(&loop, &w.done, 60000);
    if (w.error == 0)
        ck_assert_uint_eq(w.bytes, len);
    return w.error;
}

static int read_on(struct sshfile *f, const char *path, uint64_t off, uint64_t len, struct rd *r)
{
    memset(r, 0, sizeof(*r));
    ck_assert_int_eq(sshfile_read(f, path, off, len, on_read, r), 0);
    ck_assert(!r->done);
    fixture_run_until(&loop, &r->done, 60000);
    return r->error;
}

static int read_file(const char *path, uint64_t off, uint64_t len, struct rd *r)
{
    memset(r, 0, sizeof(*r));
    ck_assert_int_eq(sshfile_read(sf, path, off, len, on_read, r), 0);
    ck_assert(!r->done);
    fixture_run_until(&loop, &r->done, 60000);
    return r->error;
}

static char *local_slurp(const char *path, size_t *ret_len)
{
    FILE *f = fopen(path, "rb");
    char *buf;
    long n;

    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    n = ftell(f);
    fseek(f, 0, SEEK_SET);
    buf = malloc((size_t)n + 1);
    ck_assert_uint_eq(fread(buf, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    *ret_len = (size_t)n;
    return buf;
}

static void fill_random(char *buf, size_t n)
{
    for (size_t off = 0; off < n;) {
        ssize_t k = getrandom(buf + off, n - off, 0);
        ck_assert_int_gt(k, 0);
        off += (size_t)k;
    }
}

/* No temporary files left behind in dir. */
static unsigned count_temps(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *de;
    unsigned n = 0;

    ck_assert_ptr_nonnull(d);
    while ((de = readdir(d)))
        n += strstr(de->d_name, ".sandboxd-") != NULL;
    closedir(d);
    return n;
}

START_TEST(test_status_to_errno)
{
    ck_assert_int_eq(sshfile_status_to_errno(SSH_FX_OK), 0);
    ck_assert_int_eq(sshfile_status_to_errno(SSH_FX_NO_SUCH_FILE), -ENOENT);
    ck_assert_int_eq(sshfile_status_to_errno(SSH_FX_PERMISSION_DENIED), -EACCES);
    ck_assert_int_eq(sshfile_status_to_errno(SSH_FX_FAILURE), -EIO);
    ck_assert_int_eq(sshfile_status_to_errno(SSH_FX_FILE_ALREADY_EXISTS), -EEXIST);
    ck_assert_int_eq(sshfile_status_to_errno(SSH_FX_WRITE_PROTECT), -EROFS);
    ck_assert_int_eq(sshfile_status_to_errno(SSH_FX_OP_UNSUPPORTED), -EOPNOTSUPP);
    ck_assert_int_eq(sshfile_status_to_errno(SSH_FX_CONNECTION_LOST), -ECONNRESET);
    ck_assert(sshs_error_is_ssh(sshfile_status_to_errno(SSH_FX_CONNECTION_LOST)));
    ck_assert(!sshs_error_is_ssh(sshfile_status_to_errno(SSH_FX_NO_SUCH_FILE)));
    ck_assert(!sshs_error_is_ssh(-EISDIR));
}
END_TEST

START_TEST(test_roundtrip_sizes)
{
    static const size_t sizes[] = {0, 1, 5 * 1024 * 1024};
    char path[512];

    for (size_t i = 0; i < ELEMENTSOF(sizes); i++) {
        size_t n = sizes[i], local_len = 0;
        char *data = malloc(n + 1), *local;
        struct rd r;

        fill_random(data, n);
        snprintf(path, sizeof(path), "%s/bin-%zu", work, n);
        ck_assert_int_eq(write_file(path, data, n, 0644, false), 0);
        /* What landed on disk is exactly what was sent. */
        local = local_slurp(path, &local_len);
        ck_assert_ptr_nonnull(local);
        ck_assert_uint_eq(local_len, n);
        ck_assert_int_eq(memcmp(local, data, n), 0);
        free(local);
        /* And it reads back byte for byte. */
        ck_assert_int_eq(read_file(path, 0, SSHFILE_READ_MAX, &r), 0);
        ck_assert_uint_eq(r.len, n);
        ck_assert_uint_eq(r.size, n);
        ck_assert(r.eof);
        ck_assert_int_eq(memcmp(r.data, data, n), 0);
        free(r.data);
        free(data);
    }
    ck_assert_uint_eq(count_temps(work), 0);
}
END_TEST

START_TEST(test_read_offset_length)
{
    char path[512], data[1000];
    struct rd r;

    for (int i = 0; i < 1000; i++)
        data[i] = (char)(i * 7);
    snprintf(path, sizeof(path), "%s/ranges", work);
    ck_assert_int_eq(write_file(path, data, sizeof(data), 0600, false), 0);

    ck_assert_int_eq(read_file(path, 100, 50, &r), 0);
    ck_assert_uint_eq(r.len, 50);
    ck_assert_uint_eq(r.size, 1000);
    ck_assert(!r.eof);
    ck_assert_int_eq(memcmp(r.data, data + 100, 50), 0);
    free(r.data);

    ck_assert_int_eq(read_file(path, 990, 50, &r), 0);
    ck_assert_uint_eq(r.len, 10);
    ck_assert(r.eof);
    ck_assert_int_eq(memcmp(r.data, data + 990, 10), 0);
    free(r.data);

    ck_assert_int_eq(read_file(path, 950, 50, &r), 0);
    ck_assert_uint_eq(r.len, 50);
    ck_assert(r.eof);
    free(r.data);

    ck_assert_int_eq(read_file(path, 5000, 10, &r), 0);
    ck_assert_uint_eq(r.len, 0);
    ck_assert_uint_eq(r.size, 1000);
    ck_assert(r.eof);
    free(r.data);
}
END_TEST

/* Ranges spanning many pipelined read requests land at the right place. */
START_TEST(test_read_large_ranges)
{
    size_t n = 3 * 1024 * 1024 + 11;
    char *data = malloc(n), path[512];
    struct rd r;

    fill_random(data, n);
    snprintf(path, sizeof(path), "%s/large", work);
    ck_assert_int_eq(write_file(path, data, n, 0644, false), 0);
    ck_assert_int_eq(read_file(path, 100001, 2 * 1024 * 1024 + 3, &r), 0);
    ck_assert_uint_eq(r.len, 2 * 1024 * 1024 + 3);
    ck_assert_uint_eq(r.size, n);
    ck_assert(!r.eof);
    ck_assert_int_eq(memcmp(r.data, data + 100001, r.len), 0);
    free(r.data);
    ck_assert_int_eq(read_file(path, n - 5, SSHFILE_READ_MAX, &r), 0);
    ck_assert_uint_eq(r.len, 5);
    ck_assert(r.eof);
    ck_assert_int_eq(memcmp(r.data, data + n - 5, 5), 0);
    free(r.data);
    free(data);
}
END_TEST

START_TEST(test_make_parents)
{
    char path[512], dir[512];
    struct stat st;

    snprintf(path, sizeof(path), "%s/a/b c/d'e/file", work);
    /* Without make_parents a missing directory is ENOENT and nothing is created. */
    ck_assert_int_eq(write_file(path, "x", 1, 0644, false), -ENOENT);
    snprintf(dir, sizeof(dir), "%s/a", work);
    ck_assert_int_ne(stat(dir, &st), 0);
    /* With it, every missing parent is created. */
    ck_assert_int_eq(write_file(path, "x", 1, 0644, true), 0);
    ck_assert_int_eq(stat(path, &st), 0);
    ck_assert_int_eq(st.st_size, 1);
    snprintf(dir, sizeof(dir), "%s/a/b c", work);
    ck_assert_int_eq(stat(dir, &st), 0);
    ck_assert(S_ISDIR(st.st_mode));
    /* Existing parents are fine. */
    ck_assert_int_eq(write_file(path, "yy", 2, 0644, true), 0);
    /* A parent that is a file. */
    snprintf(path, sizeof(path), "%s/a/b c/d'e/file/sub/f", work);
    ck_assert_int_eq(write_file(path, "x", 1, 0644, true), -ENOTDIR);
    ck_assert_int_eq(write_file(path, "x", 1, 0644, false), -ENOTDIR);
}
END_TEST

START_TEST(test_errors)
{
    char path[512];
    struct rd r;

    snprintf(path, sizeof(path), "%s/missing", work);
    ck_assert_int_eq(read_file(path, 0, SSHFILE_READ_MAX, &r), -ENOENT);
    ck_assert(!sshs_error_is_ssh(r.error));
    snprintf(path, sizeof(path), "%s/missing/deeper", work);
    ck_assert_int_eq(read_file(path, 0, SSHFILE_READ_MAX, &r), -ENOENT);
    /* A directory is neither readable nor replaceable as a file. */
    ck_assert_int_eq(read_file(work, 0, SSHFILE_READ_MAX, &r), -EISDIR);
    ck_assert_int_eq(write_file(work, "x", 1, 0644, false), -EISDIR);
    /* Through a file as if it were a directory. */
    snprintf(path, sizeof(path), "%s/plain", work);
    ck_assert_int_eq(write_file(path, "x", 1, 0644, false), 0);
    snprintf(path, sizeof(path), "%s/plain/x", work);
    ck_assert_int_eq(read_file(path, 0, SSHFILE_READ_MAX, &r), -ENOTDIR);
    ck_assert_uint_eq(count_temps(work), 0);
}
END_TEST

/* What OpenSSH's v3 server folds into one status comes back as the errno rename(2), open(2)
 * and write(2) gave: a link loop is ELOOP, an offset past the largest file the file system
 * holds reads as the end and writes as EFBIG (leaving no file behind), a name too long is
 * ENAMETOOLONG. */
START_TEST(test_folded_errnos)
{
    struct sshfile_write_params p = {.in_place = true, .offset = 1ull << 44, .mode = 0644};
    char path[512], a[512], b[512], name[300];
    struct wr w = {};
    struct rd r;

    snprintf(a, sizeof(a), "%s/loop-a", work);
    snprintf(b, sizeof(b), "%s/loop-b", work);
    ck_assert_int_eq(symlink(b, a), 0);
    ck_assert_int_eq(symlink(a, b), 0);
    ck_assert_int_eq(read_file(a, 0, SSHFILE_READ_MAX, &r), -ELOOP);
    snprintf(path, sizeof(path), "%s/dangling", work);
    ck_assert_int_eq(symlink("/nonexistent-target", path), 0);
    ck_assert_int_eq(read_file(path, 0, SSHFILE_READ_MAX, &r), -ENOENT);

    snprintf(path, sizeof(path), "%s/small", work);
    ck_assert_int_eq(write_file(path, "abc", 3, 0644, false), 0);
    ck_assert_int_eq(read_file(path, 1ull << 44, 16, &r), 0);
    ck_assert_uint_eq(r.len, 0);
    ck_assert(r.eof);
    free(r.data);

    snprintf(path, sizeof(path), "%s/huge", work);
    p.path = path;
    p.data = strdup("x");
    p.len = 1;
    ck_assert_int_eq(sshfile_write(sf, &p, on_written, &w), 0);
    fixture_run_until(&loop, &w.done, 60000);
    ck_assert_int_eq(w.error, -EFBIG);
    ck_assert_int_eq(access(path, F_OK), -1); /* the write made it: it is gone again */

    memset(name, 'n', 280);
    name[280] = 0;
    snprintf(path, sizeof(path), "%s/%s", work, name);
    ck_assert_int_eq(read_file(path, 0, SSHFILE_READ_MAX, &r), -ENAMETOOLONG);
}
END_TEST

START_TEST(test_argument_checks)
{
    static char x[] = "x";
    struct sshfile_write_params p = {.path = "relative", .data = x, .len = 1, .mode = 0644};
    struct wr w = {};

    ck_assert_int_eq(sshfile_write(sf, &p, on_written, &w), -EINVAL);
    p.path = "/tmp/dir/";
    ck_assert_int_eq(sshfile_write(sf, &p, on_written, &w), -EINVAL);
    p.path = "/tmp/x";
    p.mode = 010000;
    ck_assert_int_eq(sshfile_write(sf, &p, on_written, &w), -EINVAL);
    p.mode = 0644;
    p.len = SSHFILE_WRITE_MAX + 1;
    ck_assert_int_eq(sshfile_write(sf, &p, on_written, &w), -EFBIG);
    ck_assert_int_eq(sshfile_read(sf, "/tmp/x", 0, SSHFILE_READ_MAX + 1, on_read, NULL), -EFBIG);
    ck_assert_int_eq(sshfile_read(sf, "x", 0, 0, on_read, NULL), -EINVAL);
    ck_assert(!w.done);
}
END_TEST

START_TEST(test_mode_applied)
{
    static const mode_t modes[] = {0640, 0755, 0600, 0444, 04711};
    char path[512];
    struct stat st;

    umask(022);
    for (size_t i = 0; i < ELEMENTSOF(modes); i++) {
        snprintf(path, sizeof(path), "%s/mode-%zu", work, i);
        ck_assert_int_eq(write_file(path, "m", 1, modes[i], false), 0);
        ck_assert_int_eq(stat(path, &st), 0);
        ck_assert_uint_eq(st.st_mode & 07777, modes[i]);
    }
    /* Replacing keeps the newly asked mode. */
    snprintf(path, sizeof(path), "%s/mode-0", work);
    ck_assert_int_eq(write_file(path, "n", 1, 0700, false), 0);
    ck_assert_int_eq(stat(path, &st), 0);
    ck_assert_uint_eq(st.st_mode & 07777, 0700);
}
END_TEST

/* A reader on this host polls the target while a large replacement is written: it only
 * ever sees the complete old content or the complete new content. */
struct watcher {
    const char *path;
    size_t old_len, new_len;
    unsigned seen_old, seen_new, seen_other;
};

static void on_watch(uv_timer_t *t)
{
    struct watcher *w = t->data;
    size_t len = 0;
    char *buf = local_slurp(w->path, &len);
    bool all_a = true, all_b = true;

    if (!buf) {
        w->seen_other++; /* missing: not allowed during a replace */
        return;
    }
    for (size_t i = 0; i < len; i++) {
        all_a &= buf[i] == 'a';
        all_b &= buf[i] == 'b';
    }
    if (len == w->old_len && all_a)
        w->seen_old++;
    else if (len == w->new_len && all_b)
        w->seen_new++;
    else
        w->seen_other++;
    free(buf);
}

START_TEST(test_atomic_replace)
{
    size_t old_len = 1024 * 1024, new_len = 5 * 1024 * 1024;
    char *old_data = malloc(old_len), *new_data = malloc(new_len);
    struct sshfile_write_params p = {.mode = 0644};
    struct watcher wt = {.old_len = old_len, .new_len = new_len};
    char path[512];
    struct stat st1, st2;
    uv_timer_t timer;
    struct wr w = {};

    memset(old_data, 'a', old_len);
    memset(new_data, 'b', new_len);
    snprintf(path, sizeof(path), "%s/atomic", work);
    ck_assert_int_eq(write_file(path, old_data, old_len, 0644, false), 0);
    ck_assert_int_eq(stat(path, &st1), 0);

    wt.path = path;
    uv_timer_init(&loop, &timer);
    timer.data = &wt;
    uv_timer_start(&timer, on_watch, 1, 1);
    p.path = path;
    p.data = new_data;
    p.len = new_len;
    ck_assert_int_eq(sshfile_write(sf, &p, on_written, &w), 0);
    fixture_run_until(&loop, &w.done, 60000);
    ck_assert_int_eq(w.error, 0);
    on_watch(&timer);
    uv_close((uv_handle_t *)&timer, NULL);
    uv_run(&loop, UV_RUN_NOWAIT);

    ck_assert_uint_eq(wt.seen_other, 0);
    ck_assert_uint_gt(wt.seen_old, 0);
    ck_assert_uint_gt(wt.seen_new, 0);
    /* Replaced by rename (a new inode), not rewritten in place. */
    ck_assert_int_eq(stat(path, &st2), 0);
    ck_assert_uint_ne(st1.st_ino, st2.st_ino);
    ck_assert_int_eq(st2.st_size, (off_t)new_len);
    ck_assert_uint_eq(count_temps(work), 0);
    free(old_data); /* new_data was taken by the write */
}
END_TEST

START_TEST(test_queue_and_close)
{
    struct sshfile_write_params p = {.len = 1, .mode = 0644};
    char paths[6][512];
    struct wr w[6] = {};

    /* Several requests for one sandbox run one at a time, in order. */
    for (int i = 0; i < 6; i++) {
        snprintf(paths[i], sizeof(paths[i]), "%s/q%d", work, i);
        p.path = paths[i];
        p.data = strdup("q");
        ck_assert_int_eq(sshfile_write(sf, &p, on_written, &w[i]), 0);
    }
    fixture_run_until(&loop, &w[5].done, 60000);
    for (int i = 0; i < 6; i++)
        ck_assert_int_eq(w[i].error, 0);

    /* Close with one running and some queued: the queued ones are cancelled at once. */
    memset(w, 0, sizeof(w));
    for (int i = 0; i < 4; i++) {
        p.path = paths[i];
        p.data = strdup("q");
        ck_assert_int_eq(sshfile_write(sf, &p, on_written, &w[i]), 0);
    }
    sshfile_close(sf, on_sf_closed, NULL);
    sf = NULL;
    for (int i = 1; i < 4; i++) {
        ck_assert(w[i].done);
        ck_assert_int_eq(w[i].error, -ECANCELED);
    }
    fixture_run_until(&loop, &sf_closed, 30000);
    ck_assert(w[0].done);
    ck_assert_int_eq(w[0].error, 0);
}
END_TEST

START_TEST(test_reconnect_after_sshd_restart)
{
    char path[512];
    struct rd r;

    snprintf(path, sizeof(path), "%s/re", work);
    ck_assert_int_eq(write_file(path, "1", 1, 0644, false), 0);
    /* The kept session dies with sshd. */
    ck_assert_int_eq(fixture_sshd_run(&fx, "stop"), 0);
    ck_assert_int_eq(read_file(path, 0, SSHFILE_READ_MAX, &r), -ECONNREFUSED);
    ck_assert(sshs_error_is_ssh(r.error));
    ck_assert_int_eq(fixture_sshd_run(&fx, "start"), 0);
    ck_assert_int_eq(read_file(path, 0, SSHFILE_READ_MAX, &r), 0);
    ck_assert_uint_eq(r.len, 1);
    free(r.data);
    /* Restart again while the session is idle: the next request reconnects by itself. */
    ck_assert_int_eq(fixture_sshd_run(&fx, "stop"), 0);
    ck_assert_int_eq(fixture_sshd_run(&fx, "start"), 0);
    ck_assert_int_eq(write_file(path, "22", 2, 0644, false), 0);
}
END_TEST

START_TEST(test_wrong_host_key)
{
    struct sshs_config cfg = fixture_config(&fx);
    struct sshfile *other = NULL;
    struct rd r = {};
    bool closed = false;

    cfg.host_key_pins = "SHA256:uNiVztksCsDhcc0u9e8BujQXVUpKZIDTMczCvj3tD2s";
    ck_assert_int_eq(sshfile_new(&loop, &cfg, 0, &other), 0);
    ck_assert_int_eq(sshfile_read(other, "/etc/hostname", 0, SSHFILE_READ_MAX, on_read, &r), 0);
    fixture_run_until(&loop, &r.done, 30000);
    ck_assert_int_eq(r.error, -EBADE);
    sshfile_close(other, on_sf_closed, NULL);
    (void)closed;
    fixture_run_until(&loop, &sf_closed, 30000);
    sf_closed = false;
}
END_TEST

static bool is_type(const char *path, mode_t type)
{
    struct stat st;

    return lstat(path, &st) == 0 && (st.st_mode & S_IFMT) == type;
}

/* FIFOs, sockets and devices are neither read nor replaced, and refused at once (a FIFO's
 * open would block); symbolic links are followed. */
START_TEST(test_not_regular)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    char fifo[512], dev[512], sock[512], link[512], plain[512], buf[512];
    const char *special[] = {fifo, dev, sock};
    const mode_t types[] = {S_IFIFO, S_IFCHR, S_IFSOCK};
    uint64_t t0 = uv_hrtime();
    struct stat st;
    struct rd r;
    int fd;

    snprintf(fifo, sizeof(fifo), "%s/fifo", work);
    ck_assert_int_eq(mkfifo(fifo, 0644), 0);
    snprintf(dev, sizeof(dev), "%s/null", work);
    ck_assert_int_eq(mknod(dev, S_IFCHR | 0666, makedev(1, 3)), 0);
    snprintf(sock, sizeof(sock), "%s/sock", work);
    snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", sock);
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    for (size_t i = 0; i < ELEMENTSOF(special); i++) {
        ck_assert_int_eq(read_file(special[i], 0, SSHFILE_READ_MAX, &r), -EINVAL);
        ck_assert_int_eq(write_file(special[i], "x", 1, 0644, false), -EINVAL);
        ck_assert_int_eq(write_file(special[i], "x", 1, 0644, true), -EINVAL);
        ck_assert(is_type(special[i], types[i])); /* left untouched */
    }
    ck_assert_int_eq(stat(dev, &st), 0);
    ck_assert_uint_eq(st.st_rdev, makedev(1, 3));
    close(fd);

    /* A link to a FIFO is the FIFO; a link to nothing is not written through. */
    snprintf(link, sizeof(link), "%s/to-fifo", work);
    ck_assert_int_eq(symlink(fifo, link), 0);
    ck_assert_int_eq(read_file(link, 0, SSHFILE_READ_MAX, &r), -EINVAL);
    ck_assert_int_eq(write_file(link, "x", 1, 0644, false), -EINVAL);
    ck_assert(is_type(link, S_IFLNK));
    ck_assert(is_type(fifo, S_IFIFO));
    snprintf(link, sizeof(link), "%s/dangling", work);
    ck_assert_int_eq(symlink("nowhere", link), 0);
    ck_assert_int_eq(write_file(link, "x", 1, 0644, false), -EINVAL);
    ck_assert(is_type(link, S_IFLNK));
    snprintf(buf, sizeof(buf), "%s/nowhere", work);
    ck_assert_int_ne(access(buf, F_OK), 0);
    snprintf(link, sizeof(link), "%s/to-dir", work);
    ck_assert_int_eq(symlink(".", link), 0);
    ck_assert_int_eq(read_file(link, 0, SSHFILE_READ_MAX, &r), -EISDIR);
    ck_assert_int_eq(write_file(link, "x", 1, 0644, false), -EISDIR);

    /* A link to a regular file (relative here): the file is replaced, the link stays. */
    snprintf(plain, sizeof(plain), "%s/plain", work);
    ck_assert_int_eq(write_file(plain, "old", 3, 0644, false), 0);
    snprintf(link, sizeof(link), "%s/to-plain", work);
    ck_assert_int_eq(symlink("plain", link), 0);
    ck_assert_int_eq(write_file(link, "new!", 4, 0600, false), 0);
    ck_assert(is_type(link, S_IFLNK));
    ck_assert_int_eq(readlink(link, buf, sizeof(buf)), 5);
    ck_assert_int_eq(stat(plain, &st), 0);
    ck_assert_int_eq(st.st_size, 4);
    ck_assert_uint_eq(st.st_mode & 07777, 0600);
    ck_assert_int_eq(read_file(link, 0, SSHFILE_READ_MAX, &r), 0);
    ck_assert_uint_eq(r.len, 4);
    ck_assert_int_eq(memcmp(r.data, "new!", 4), 0);
    free(r.data);
    ck_assert_uint_eq(count_temps(work), 0);
    ck_assert_uint_lt(uv_hrtime() - t0, 20ull * 1000000000ull);
}
END_TEST

/* Reads go to the end of the file, not to the size stat reports (0 for /proc files). */
START_TEST(test_read_to_eof)
{
    char path[512];
    struct rd r;

    ck_assert_int_eq(read_file("/proc/self/status", 0, SSHFILE_READ_MAX, &r), 0);
    ck_assert_uint_gt(r.len, 0);
    ck_assert_ptr_nonnull(strstr(r.data, "Name:"));
    ck_assert(r.eof);
    ck_assert_uint_eq(r.size, r.len);
    free(r.data);
    ck_assert_int_eq(read_file("/proc/cpuinfo", 0, SSHFILE_READ_MAX, &r), 0);
    ck_assert_ptr_nonnull(strstr(r.data, "processor"));
    ck_assert_uint_eq(strlen(r.data), r.len);
    ck_assert(r.eof);
    free(r.data);
    /* A part: the end is not known yet. */
    ck_assert_int_eq(read_file("/proc/self/status", 5, 10, &r), 0);
    ck_assert_uint_eq(r.len, 10);
    ck_assert(!r.eof);
    ck_assert_uint_eq(r.size, 15);
    free(r.data);
    /* Many requests' worth, one after the other. */
    ck_assert_int_eq(read_file("/proc/kallsyms", 0, 1024 * 1024 + 7, &r), 0);
    ck_assert_uint_eq(r.len, 1024 * 1024 + 7);
    ck_assert(!r.eof);
    free(r.data);

    /* Length 0 reads nothing and says what stat knows. */
    snprintf(path, sizeof(path), "%s/five", work);
    ck_assert_int_eq(write_file(path, "hello", 5, 0644, false), 0);
    ck_assert_int_eq(read_file(path, 0, 0, &r), 0);
    ck_assert_uint_eq(r.len, 0);
    ck_assert_ptr_nonnull(r.data);
    ck_assert_str_eq(r.data, "");
    ck_assert_uint_eq(r.size, 5);
    ck_assert(!r.eof);
    free(r.data);
    ck_assert_int_eq(read_file(path, 5, 0, &r), 0);
    ck_assert_uint_eq(r.len, 0);
    ck_assert_uint_eq(r.size, 5);
    ck_assert(r.eof);
    free(r.data);
    /* Past the end: still the size from stat, not the offset. */
    ck_assert_int_eq(read_file(path, 9, 0, &r), 0);
    ck_assert_uint_eq(r.len, 0);
    ck_assert_uint_eq(r.size, 5);
    ck_assert(r.eof);
    free(r.data);
    /* Exactly to the end, and past it. */
    ck_assert_int_eq(read_file(path, 0, 5, &r), 0);
    ck_assert(r.eof);
    free(r.data);
    ck_assert_int_eq(read_file(path, 3, 100, &r), 0);
    ck_assert_uint_eq(r.len, 2);
    ck_assert_uint_eq(r.size, 5);
    ck_assert(r.eof);
    free(r.data);
}
END_TEST

static void on_file_closed(void *ud)
{
    (*(int *)ud)++;
}

/* A request that does not finish in time is answered with -ETIME at its deadline, queued ones
 * too, and its thread is released: with more sshfiles stuck than libuv has threads, every
 * request is answered on time and each sshfile works again right after, on a new session.
 * Run twice: on libuv's pool, then on a file pool of 4 workers where a uid alone gets 2, so
 * that most requests reach their deadline still waiting for a worker. */
START_TEST(test_deadline)
{
    enum { N = 6, TIMEOUT_MS = 1500 };
    struct sshs_config cfg = fixture_config(&fx);
    struct filepool *pool = NULL;
    struct sshfile *fs[N];
    struct rd r[N + 1];
    pid_t frozen[64];
    char path[512];
    uint64_t t0, ms;
    int n_frozen, closed = 0;

    snprintf(path, sizeof(path), "%s/dl", work);
    ck_assert_int_eq(write_file(path, "data", 4, 0644, false), 0);
    if (_i == 1)
        ck_assert_int_eq(filepool_new(&loop, 4, &pool), 0);
    for (int i = 0; i < N; i++) {
        ck_assert_int_eq(sshfile_new(&loop, &cfg, TIMEOUT_MS, &fs[i]), 0);
        if (pool)
            sshfile_set_pool(fs[i], pool, 1000, &fs[i]);
        ck_assert_int_eq(read_on(fs[i], path, 0, SSHFILE_READ_MAX, &r[0]), 0);
        free(r[0].data);
    }
    n_frozen = fixture_freeze_sessions(&fx, frozen, ELEMENTSOF(frozen), SIGSTOP);
    ck_assert_int_ge(n_frozen, N);

    /* The deadlines count from the loop's clock, which stood still while the sessions were
     * frozen: bring it to now, so they count from t0 as the figure does. */
    uv_update_time(&loop);
    t0 = uv_hrtime();
    memset(r, 0, sizeof(r));
    for (int i = 0; i < N; i++)
        ck_assert_int_eq(sshfile_read(fs[i], path, 0, SSHFILE_READ_MAX, on_read, &r[i]), 0);
    ck_assert_int_eq(sshfile_read(fs[0], path, 0, SSHFILE_READ_MAX, on_read, &r[N]), 0);
    for (int i = 0; i <= N; i++) {
        fixture_run_until(&loop, &r[i].done, 10000);
        ck_assert_int_eq(r[i].error, -ETIME);
    }
    ms = (uv_hrtime() - t0) / 1000000u;
    printf("sftp: %d stuck requests on %d sessions (%s) answered -ETIME after %" PRIu64 " ms "
           "(deadline %d ms)\n",
           N + 1, N, pool ? "file pool" : "libuv's pool", ms, TIMEOUT_MS);
    ck_assert_uint_ge(ms, TIMEOUT_MS - 100);
    ck_assert_uint_lt(ms, TIMEOUT_MS + 2500);

    /* The old sessions are still frozen: new ones serve the next requests. */
    for (int i = 0; i < N; i++) {
        ck_assert_int_eq(read_on(fs[i], path, 0, SSHFILE_READ_MAX, &r[0]), 0);
        ck_assert_uint_eq(r[0].len, 4);
        free(r[0].data);
    }
    fixture_freeze_sessions(&fx, frozen, n_frozen, SIGCONT);
    for (int i = 0; i < N; i++)
        sshfile_close(fs[i], on_file_closed, &closed);
    filepool_unref(pool); /* its workers end with the last sshfile */
    for (int i = 0; i < 400 && closed < N; i++)
        uv_run(&loop, UV_RUN_ONCE);
    ck_assert_int_eq(closed, N);
}
END_TEST

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

START_TEST(test_throughput)
{
    size_t n = 8 * 1024 * 1024;
    char *data = malloc(n), path[512];
    double w_mbs[3], r_mbs[3];
    struct rd r;

    fill_random(data, n);
    snprintf(path, sizeof(path), "%s/big", work);
    ck_assert_int_eq(write_file(path, data, 1, 0644, false), 0); /* warm the session */
    for (int i = 0; i < 3; i++) {
        uint64_t t0 = uv_hrtime();
        ck_assert_int_eq(write_file(path, data, n, 0644, false), 0);
        w_mbs[i] = n / 1e6 / ((uv_hrtime() - t0) / 1e9);
        t0 = uv_hrtime();
        ck_assert_int_eq(read_file(path, 0, SSHFILE_READ_MAX, &r), 0);
        r_mbs[i] = n / 1e6 / ((uv_hrtime() - t0) / 1e9);
        ck_assert_uint_eq(r.len, n);
        free(r.data);
    }
    qsort(w_mbs, 3, sizeof(double), cmp_double);
    qsort(r_mbs, 3, sizeof(double), cmp_double);
    printf("sftp: 8 MiB write %.1f MB/s, read %.1f MB/s (median of 3)\n", w_mbs[1], r_mbs[1]);
    free(data);
}
END_TEST

static Suite *sftp_suite(void)
{
    Suite *s = suite_create("sftp");
    TCase *tc;

    tc = tcase_create("unit");
    tcase_add_checked_fixture(tc, setup_loop, teardown_loop);
    tcase_add_test(tc, test_status_to_errno);
    suite_add_tcase(s, tc);

    tc = tcase_create("sshd");
    tcase_add_checked_fixture(tc, setup_sshd, teardown_sshd);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_roundtrip_sizes);
    tcase_add_test(tc, test_read_offset_length);
    tcase_add_test(tc, test_read_large_ranges);
    tcase_add_test(tc, test_make_parents);
    tcase_add_test(tc, test_errors);
    tcase_add_test(tc, test_folded_errnos);
    tcase_add_test(tc, test_argument_checks);
    tcase_add_test(tc, test_mode_applied);
    tcase_add_test(tc, test_atomic_replace);
    tcase_add_test(tc, test_queue_and_close);
    tcase_add_test(tc, test_reconnect_after_sshd_restart);
    tcase_add_test(tc, test_wrong_host_key);
    tcase_add_test(tc, test_not_regular);
    tcase_add_test(tc, test_read_to_eof);
    tcase_add_loop_test(tc, test_deadline, 0, 2);
    tcase_add_test(tc, test_throughput);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    if (getenv("SANDBOXD_TEST_DEBUG"))
        log_set_max_level(LOG_DEBUG);
    return check_run_suite(sftp_suite());
}
