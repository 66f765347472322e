/* SFTP file transfer on the file pool (filepool.h): the session, the job queue and its deadlines,
 * whole-file writes and reads. See sshfile.h. */
#include <assert.h>
#include <fcntl.h>
#include <inttypes.h>
#include <libssh/libssh.h>
#include <libssh/sftp.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>

#include "log.h"
#include "macro.h"
#include "sshfile.h"
#include "sshfile-internal.h"
#include "sshexec.h"
#include "sshs-internal.h"
#include "util.h"

#define COMP "sftp"

/* ---- worker side: the session ---- */

/* hard: the session is dead or suspect; shut its socket down first, so that the teardown
 * cannot block on a peer that stopped answering. */
static void session_drop(struct sshfile *f, bool hard)
{
    if (hard && f->ssh && ssh_get_fd(f->ssh) >= 0)
        (void)shutdown(ssh_get_fd(f->ssh), SHUT_RDWR);
    if (f->sftp) {
        sftp_free(f->sftp);
        f->sftp = NULL;
    }
    if (f->ssh) {
        if (ssh_is_connected(f->ssh))
            ssh_disconnect(f->ssh);
        ssh_free(f->ssh);
        f->ssh = NULL;
    }
}

/* ---- worker side: deadlines ---- */

/* Publishes the session's socket to the loop thread for the deadline; false when the deadline
 * has passed already. */
static bool job_attach(struct sshfile *f, struct job *j)
{
    bool ok;

    uv_mutex_lock(&f->mu);
    ok = !j->expired;
    if (ok)
        f->sock = ssh_get_fd(f->ssh);
    uv_mutex_unlock(&f->mu);
    return ok;
}

/* Withdraws the socket (it may be closed after this); true when the deadline passed. */
static bool job_detach(struct sshfile *f, struct job *j)
{
    bool expired;

    uv_mutex_lock(&f->mu);
    f->sock = -1;
    expired = j->expired;
    uv_mutex_unlock(&f->mu);
    return expired;
}

/* Connects when there is no usable session, and publishes its socket for j's deadline as
 * soon as there is one (only the TCP and SSH handshake, bounded by the connect timeout, run
 * unpublished). -ETIME: j's deadline passed already. */
static int session_ensure(struct sshfile *f, struct job *j)
{
    ssh_session ssh = NULL;
    int r;

    if (f->ssh && f->sftp && ssh_is_connected(f->ssh))
        return job_attach(f, j) ? 0 : -ETIME;
    session_drop(f, true);
    r = sshs_connect_blocking(&f->conf, SSHFILE_IO_TIMEOUT_S, &ssh);
    if (r < 0)
        return r;
    f->ssh = ssh;
    if (!job_attach(f, j))
        return -ETIME;
    f->sftp = sftp_new(ssh);
    if (!f->sftp || sftp_init(f->sftp) != SSH_OK) {
        log_debug(COMP, "%s: sftp init: %s", f->conf.host, ssh_get_error(ssh));
        (void)job_detach(f, j);
        session_drop(f, true);
        return -EPROTO;
    }
    sshfile_leftovers_remove(f);
    return 0;
}

static bool is_transport_error(int r)
{
    return r == -ECONNRESET || r == -ENOTCONN || r == -EPROTO || r == -EPIPE;
}

/* Creates tmp (exclusively) in dir with the job's data, flushed and with its mode. */
static int write_temp(struct sshfile *f, const struct job *j, const char *dir, const char *tmp)
{
    sftp_file file;
    size_t off = 0;
    int r = 0;

    file = sftp_open(f->sftp, tmp, O_WRONLY | O_CREAT | O_EXCL, 0600);
    if (!file) {
        r = sshfile_last_error(f);
        if (r == -ENOENT)
            return sshfile_refine_enoent(f, tmp);
        return r == -EIO ? sshfile_refine_failure(f, NULL, dir) : r;
    }
    if (j->kind == JOB_WRITE_FD)
        r = j->fill(f, (struct job *)j, file);
    while (j->kind == JOB_WRITE && off < j->len && r == 0) {
        size_t n = MIN(j->len - off, (size_t)SSHFILE_CHUNK);
        ssize_t w = sftp_write(file, (const char *)j->data + off, n);
        if (w <= 0)
            r = sshfile_last_error(f);
        else
            off += (size_t)w;
    }
    if (r == 0 && sftp_extension_supported(f->sftp, "fsync@openssh.com", "1") &&
        sftp_fsync(file) < 0)
        r = sshfile_last_error(f);
    if (r < 0) {
        sftp_close(file);
        return r == -EIO ? sshfile_refine_failure(f, NULL, dir) : r;
    }
    if (sftp_close(file) < 0)
        return sshfile_last_error(f);
    if (sftp_chmod(f->sftp, tmp, j->mode) < 0)
        return sshfile_last_error(f);
    return 0;
}

/* Renames tmp over target; exists: target was there (a regular file) when checked. */
static int replace_target(struct sshfile *f, const char *tmp, const char *target, bool exists)
{
    int r, t;

    if (exists) /* OpenSSH's v3 rename would refuse to replace it */
        return sshfile_rename_exec(f, tmp, target);
    if (sftp_rename(f->sftp, tmp, target) == 0)
        return 0;
    r = sshfile_last_error(f);
    if (is_transport_error(r))
        return r;
    t = sshfile_path_type(f, target, NULL);
    if (t == SSH_FILEXFER_TYPE_DIRECTORY)
        return -EISDIR;
    if (t == SSH_FILEXFER_TYPE_SPECIAL)
        return -EINVAL;
    if (t <= 0)
        return r;
    /* Created by someone else meanwhile. */
    return sshfile_rename_exec(f, tmp, target);
}

static int do_write(struct sshfile *f, struct job *j)
{
    _cleanup_free_ char *parent = NULL, *real = NULL, *dir = NULL, *tmp = NULL;
    const char *target;
    char rnd[33];
    int r, exists;

    if (j->make_parents) {
        r = path_dir(j->path, &parent);
        if (r < 0)
            return r;
        r = sshfile_mkdir_parents(f, parent);
        if (r < 0)
            return r;
    }
    if (j->in_place)
        return j->write_in_place(f, j);
    exists = sshfile_write_target(f, j->path, &real);
    if (exists < 0)
        return exists;
    target = real ? real : j->path;
    r = path_dir(target, &dir);
    if (r < 0)
        return r;
    util_random_hex(rnd, 8);
    if (asprintf(&tmp, "%s%s.%s.sandboxd-%s", dir, strcmp(dir, "/") == 0 ? "" : "/",
                 strrchr(target, '/') + 1, rnd) < 0)
        return -ENOMEM;
    r = write_temp(f, j, dir, tmp);
    if (r == 0)
        r = replace_target(f, tmp, target, exists > 0);
    if (r < 0)
        sshfile_temp_discard(f, tmp);
    return r;
}

/* The bytes of one read, NUL-terminated. */
struct rdbuf {
    char *buf;
    size_t cap, got;
};

/* Room for need bytes (the NUL included), growing by doubling up to max. */
static int rdbuf_reserve(struct rdbuf *b, size_t need, size_t max)
{
    size_t n;
    char *p;

    if (need <= b->cap)
        return 0;
    n = MIN(MAX(need, b->cap * 2), max);
    p = realloc(b->buf, n);
    if (!p)
        return -ENOMEM;
    b->buf = p;
    b->cap = n;
    return 0;
}

int sshfile_read_ahead(struct sshfile *f, sftp_file file, uint64_t offset, uint64_t win,
                       const struct sshfile_read_sink *sink)
{
    int ids[SSHFILE_READ_AHEAD];
    uint32_t lens[SSHFILE_READ_AHEAD];
    unsigned head = 0, n = 0;
    uint64_t issued = 0;
    bool short_read = false;

    while (n > 0 || (!short_read && issued < win)) {
        int k, r;

        while (!short_read && n < SSHFILE_READ_AHEAD && issued < win) {
            uint32_t len = (uint32_t)MIN(win - issued, (uint64_t)SSHFILE_READ_CHUNK);
            unsigned slot = (head + n) % SSHFILE_READ_AHEAD;
            int id;

            (void)sftp_seek64(file, offset + issued); /* each request names its offset */
            id = sftp_async_read_begin(file, len);
            if (id < 0)
                return sshfile_last_error(f);
            ids[slot] = id;
            lens[slot] = len;
            n++;
            issued += len;
        }
        /* Seeking clears the end-of-file mark, so that every reply is consumed. Replies
         * after a short one are read into the sink's buffer and dropped. */
        (void)sftp_seek64(file, offset);
        k = sftp_async_read(file, sink->buf(sink->userdata), lens[head], (uint32_t)ids[head]);
        if (k < 0)
            return sshfile_last_error(f);
        if (!short_read) {
            r = sink->took(sink->userdata, (size_t)k);
            if (r < 0)
                return r;
            short_read = (uint32_t)k < lens[head];
        }
        head = (head + 1) % SSHFILE_READ_AHEAD;
        n--;
    }
    return short_read ? 1 : 0;
}

/* The read-ahead into b: each reply lands at b->got (b has room for the window), replies
 * after a short one inside the window, past b->got, where they are dropped. */
static char *rdbuf_at(void *userdata)
{
    struct rdbuf *b = userdata;

    return b->buf + b->got;
}

static int rdbuf_took(void *userdata, size_t k)
{
    struct rdbuf *b = userdata;

    b->got += k;
    return 0;
}

static int read_pipelined(struct sshfile *f, sftp_file file, uint64_t offset, uint64_t win,
                          struct rdbuf *b)
{
    const struct sshfile_read_sink sink = {rdbuf_at, rdbuf_took, b};

    return sshfile_read_ahead(f, file, offset, win, &sink);
}

/* The first read past a buffer read full, to find the end of the file. */
#define READ_PROBE 4096

/* One request at a time from offset + b->got until the end of the file (*ret_eof) or want. */
static int read_rest(struct sshfile *f, sftp_file file, uint64_t offset, size_t want,
                     struct rdbuf *b, bool *ret_eof)
{
    while (b->got < want) {
        size_t len = MIN(want - b->got, (size_t)SSHFILE_READ_CHUNK);
        char probe[READ_PROBE];
        bool full = b->got + 1 >= b->cap;
        ssize_t k;
        int r;

        /* With the buffer full (the file read whole at its stat size), the read that finds
         * the end goes to the stack first: the buffer grows (a copy of it) only when the
         * file has more. */
        if (full)
            len = MIN(len, sizeof probe);
        else if ((r = rdbuf_reserve(b, b->got + len + 1, want + 1)) < 0)
            return r;
        (void)sftp_seek64(file, offset + b->got);
        k = sftp_read(file, full ? probe : b->buf + b->got, len);
        if (k < 0) {
            r = sshfile_last_error(f);
            if (r != -EBADMSG)
                return r;
            k = 0; /* EINVAL from the seek: past the largest offset the file system has */
        }
        if (k == 0) {
            *ret_eof = true;
            return 0;
        }
        if (full) {
            r = rdbuf_reserve(b, b->got + (size_t)k + 1, want + 1);
            if (r < 0)
                return r;
            memcpy(b->buf + b->got, probe, (size_t)k);
        }
        b->got += (size_t)k;
    }
    return 0;
}

/* Reads until the end of the file or j->length bytes: the size from stat is only a hint (it
 * sizes the pipelined part), since /proc files report 0 and files grow and shrink. */
static int do_read(struct sshfile *f, struct job *j)
{
    struct rdbuf b = {};
    size_t want = (size_t)j->length;
    uint64_t size = 0, win, end;
    bool eof = false;
    sftp_file file;
    int r;

    r = sshfile_read_open(f, j->path, &size, &file);
    if (r < 0)
        return r;
    win = j->offset < size ? MIN((uint64_t)want, size - j->offset) : 0;
    r = rdbuf_reserve(&b, (size_t)win + 1, want + 1);
    if (r >= 0 && win > 0)
        r = read_pipelined(f, file, j->offset, win, &b);
    if (r >= 0)
        r = read_rest(f, file, j->offset, want, &b, &eof);
    sftp_close(file);
    if (r < 0) {
        free(b.buf);
        j->drop_session = true; /* replies may be left queued in it */
        return r;
    }
    b.buf[b.got] = 0;
    end = j->offset + b.got;
    j->rres.data = b.buf;
    j->rres.len = b.got;
    if (eof)
        j->rres.size = b.got > 0 ? end : MIN(size, j->offset);
    else if (want == 0)
        j->rres.size = size; /* nothing was read: only stat knows */
    else
        j->rres.size = MAX(size, end);
    j->rres.eof = eof || (size > 0 && end >= size) || (want == 0 && j->offset >= size);
    return 0;
}

static void job_work(struct job *j)
{
    struct sshfile *f = j->f;
    bool reused;
    int r = -ETIME;

    if (j->kind == JOB_CLOSE) {
        session_drop(f, j->fresh_session);
        return;
    }
    if (j->fresh_session)
        session_drop(f, true);
    for (int attempt = 0; attempt < 2; attempt++) {
        reused = f->ssh != NULL;
        r = session_ensure(f, j);
        if (r < 0) {
            if (job_detach(f, j))
                r = -ETIME;
            break;
        }
        r = j->kind == JOB_WRITE || j->kind == JOB_WRITE_FD ? do_write(f, j)
            : j->kind == JOB_READ                           ? do_read(f, j)
            : j->kind == JOB_OP                             ? j->op->type->run(f, j->op)
                                                            : j->run(f, j);
        if (r == -EBADMSG && j->kind != JOB_OP)
            r = sshfile_bad_message_errno(j->path, NULL);
        if (job_detach(f, j)) {
            r = -ETIME; /* the socket was shut down under the call */
            break;
        }
        /* A kept session may have died while idle: reconnect once and retry. Reads and
         * replacing writes are idempotent (a fresh temporary + rename); an in-place write
         * or another operation only when it changed nothing yet, a stream only while
         * nothing was taken from its descriptors yet. */
        if (r < 0 && reused && is_transport_error(r) && j->moved == 0 &&
            !(j->kind == JOB_OP && j->op->mutated) &&
            !(j->kind == JOB_WRITE && j->in_place && j->op_mutated)) {
            session_drop(f, true);
            continue;
        }
        break;
    }
    if (r == -ETIME || (r < 0 && is_transport_error(r)))
        session_drop(f, true);
    else if (j->drop_session)
        session_drop(f, false);
    j->error = r;
}

/* ---- loop side ---- */

static const char *const kind_names[] = {
    [JOB_WRITE] = "write",  [JOB_READ] = "read",      [JOB_OP] = "file operation",
    [JOB_CLOSE] = "close",  [JOB_WRITE_FD] = "write", [JOB_READ_FD] = "read",
    [JOB_EXEC_FD] = "exec",
};

static void job_free(struct job *j)
{
    if (!j)
        return;
    if (j->release)
        j->release(j);
    free(j->rres.data);
    free(j->data);
    if (j->op)
        j->op->type->free(j->op);
    free(j->path);
    free(j);
}

static void job_notify(struct job *j, int error)
{
    if (j->kind == JOB_WRITE)
        j->wcb(error, error == 0 ? j->len : 0, j->userdata);
    else if (j->kind == JOB_READ)
        j->rcb(error, error == 0 ? &j->rres : NULL, j->userdata);
    else if (j->kind == JOB_OP)
        j->op->type->notify(error, j->op);
    else if (j->kind == JOB_WRITE_FD || j->kind == JOB_READ_FD)
        j->wcb(error, j->moved, j->userdata);
    else if (j->kind == JOB_EXEC_FD)
        j->xcb(error, error == 0 ? j->exec : NULL, j->userdata);
}

static void job_complete(struct job *j, int error)
{
    job_notify(j, error);
    job_free(j);
}

static void on_deadline(uv_timer_t *t);
static bool job_cancel(struct sshfile *f, struct job *j);

/* Arms the timer for the earliest deadline still to answer: the running job's, else the
 * first queued one's (deadlines grow along the queue). */
static void timer_arm(struct sshfile *f)
{
    uint64_t next = UINT64_MAX, now = uv_now(f->loop);

    if (f->cur && !f->cur->answered)
        next = f->cur->deadline;
    if (f->qfirst)
        next = MIN(next, f->qfirst->deadline);
    if (next == UINT64_MAX)
        (void)uv_timer_stop(&f->timer);
    else
        (void)uv_timer_start(&f->timer, on_deadline, next > now ? next - now : 0, 0);
}

/* The running job's deadline passed: answer now and release the worker. */
static void job_expire(struct sshfile *f, struct job *j, int error)
{
    assert(j == f->cur && !j->answered);
    j->answered = true;
    f->stale = true;
    /* Still waiting for a worker (all busy, or its uid's share taken): it never starts. Else
     * shut its socket down so that the blocking call returns; the worker then drops the
     * session. A worker still connecting finds the flag when it is connected. */
    if (!job_cancel(f, j)) {
        uv_mutex_lock(&f->mu);
        j->expired = true;
        if (f->sock >= 0 && !j->in_fd_wait)
            (void)shutdown(f->sock, SHUT_RDWR);
        uv_mutex_unlock(&f->mu);
    }
    if (error == -ETIME)
        log_info(COMP, "%s: %s %s: no answer within %" PRIu64 " ms, session dropped", f->conf.host,
                 kind_names[j->kind], j->path, f->timeout_ms);
    job_notify(j, error);
}

static void on_deadline(uv_timer_t *t)
{
    struct sshfile *f = container_of(t, struct sshfile, timer);
    uint64_t now = uv_now(f->loop);
    struct job *j = f->cur;

    if (j && !j->answered && j->deadline <= now && sshfile_job_is_stream(j)) {
        /* Streams: the deadline counts from the last byte moved. */
        uint64_t idle_ms = (uv_hrtime() - atomic_load(&j->progress_ns)) / 1000000u;

        if (idle_ms < f->timeout_ms)
            j->deadline = now + (f->timeout_ms - idle_ms);
    }
    if (j && !j->answered && j->deadline <= now)
        job_expire(f, j, -ETIME);
    /* Callbacks may close f: the queue is then empty, and f lives until the running job is
     * over (f->busy). */
    while ((j = f->qfirst) && j->deadline <= now) {
        f->qfirst = j->next;
        if (!f->qfirst)
            f->qlast = NULL;
        f->queued--;
        log_info(COMP, "%s: %s %s: still queued after %" PRIu64 " ms", f->conf.host,
                 kind_names[j->kind], j->path, f->timeout_ms);
        f->stale = true;
        job_complete(j, -ETIME);
    }
    timer_arm(f);
}

static void on_job_done(struct job *j, int status);
static void on_close_done(struct job *j, int status);

static void job_done(struct job *j, int status)
{
    if (j->kind == JOB_CLOSE)
        on_close_done(j, status);
    else
        on_job_done(j, status);
}

static void on_uv_work(uv_work_t *w)
{
    job_work(container_of(w, struct job, work));
}

static void on_uv_done(uv_work_t *w, int status)
{
    job_done(container_of(w, struct job, work), status);
}

static void on_pool_work(struct filepool_req *req)
{
    job_work(container_of(req, struct job, preq));
}

static void on_pool_done(struct filepool_req *req, int status)
{
    job_done(container_of(req, struct job, preq), status);
}

/* Hands j to f's file pool (libuv's without one). */
static int job_queue(struct sshfile *f, struct job *j)
{
    if (f->pool)
        return filepool_submit(f->pool, &j->preq, f->pool_uid, f->pool_group, on_pool_work,
                               on_pool_done);
    return uv_queue_work(f->loop, &j->work, on_uv_work, on_uv_done);
}

/* True when j was still waiting for a worker: it never starts (its done callback runs
 * with -ECANCELED). */
static bool job_cancel(struct sshfile *f, struct job *j)
{
    if (f->pool)
        return filepool_cancel(f->pool, &j->preq) == 0;
    return uv_cancel((uv_req_t *)&j->work) == 0;
}

static void start_job(struct sshfile *f, struct job *j)
{
    int r;

    assert(!f->busy && !f->cur); /* one job at a time on the session */
    f->busy = true;
    f->cur = j;
    j->fresh_session = f->stale;
    f->stale = false;
    r = job_queue(f, j);
    if (r < 0) {
        /* Without memory for the pool's queue: fail in place. */
        j->error = r;
        on_job_done(j, r);
        return;
    }
    timer_arm(f);
}

static void on_timer_closed(uv_handle_t *h)
{
    struct sshfile *f = container_of((uv_timer_t *)h, struct sshfile, timer);
    struct close_notify closed = f->closed;

    free(f);
    close_notify_run(closed);
}

/* The session is gone: free f once its timer is closed. */
static void close_finish(struct sshfile *f)
{
    filepool_unref(TAKE_PTR(f->pool));
    sshfile_leftovers_free(f);
    uv_mutex_destroy(&f->mu);
    sshs_conf_done(&f->conf);
    uv_close((uv_handle_t *)&f->timer, on_timer_closed);
}

static void on_close_done(struct job *j, int status)
{
    struct sshfile *f = j->f;

    job_free(j);
    close_finish(f);
}

static void start_close(struct sshfile *f)
{
    struct job *j = calloc(1, sizeof(*j));
    int r;

    assert(!f->busy && !f->qfirst && f->queued == 0); /* sshfile_close() emptied the queue */
    f->busy = true;
    (void)uv_timer_stop(&f->timer);
    if (j) {
        j->f = f;
        j->kind = JOB_CLOSE;
        j->fresh_session = f->stale;
        r = job_queue(f, j);
        if (r == 0)
            return;
        free(j);
    }
    /* No memory: tear down here (may block briefly on a graceful disconnect). */
    session_drop(f, f->stale);
    close_finish(f);
}

/* ---- loop side: temporary files of failed writes left to remove ---- */

static int leftovers_run(struct sshfile *f, struct job *j)
{
    sshfile_leftovers_remove(f); /* a new session removed them already */
    return 0;
}

static void leftovers_done(int error, uint64_t moved, void *userdata)
{
}

/* Whether j left temporary files to remove (and was not the job that tried to). */
static bool leftovers_due(struct sshfile *f, const struct job *j)
{
    return f->leftover[0] && j->run != leftovers_run;
}

/* Queues a job that removes them on a new session. */
static int leftovers_submit(struct sshfile *f)
{
    struct job *j = sshfile_job_new(JOB_READ_FD, f->leftover[0], NULL);
    int r;

    if (!j)
        return -ENOMEM;
    j->run = leftovers_run;
    j->wcb = leftovers_done;
    r = sshfile_submit(f, j);
    if (r < 0) {
        free(j->path);
        free(j);
    }
    return r;
}

static void on_job_done(struct job *j, int status)
{
    struct sshfile *f = j->f;
    struct job *next;
    bool clean = leftovers_due(f, j);

    f->busy = false;
    f->cur = NULL;
    if (j->answered)
        job_free(j); /* answered at its deadline */
    else
        job_complete(j, status < 0 ? status : j->error);
    /* The callback may have closed f (then a close job is already running). */
    if (f->busy)
        return;
    if (f->closing) {
        start_close(f);
        return;
    }
    if (clean && !f->qfirst && leftovers_submit(f) == 0)
        return;
    next = f->qfirst;
    if (next) {
        f->qfirst = next->next;
        if (!f->qfirst)
            f->qlast = NULL;
        f->queued--;
        next->next = NULL;
        start_job(f, next);
        return;
    }
    timer_arm(f);
}

int sshfile_submit(struct sshfile *f, struct job *j)
{
    if (f->queued >= SSHFILE_QUEUE_MAX)
        return -EBUSY;
    j->f = f;
    j->deadline = uv_now(f->loop) + f->timeout_ms;
    atomic_store(&j->progress_ns, uv_hrtime());
    if (!f->busy) {
        start_job(f, j);
        return 0;
    }
    assert(!f->qlast || f->qlast->deadline <= j->deadline); /* timer_arm() relies on it */
    if (f->qlast)
        f->qlast->next = j;
    else
        f->qfirst = j;
    f->qlast = j;
    f->queued++;
    timer_arm(f);
    return 0;
}

int sshfile_path_validate(const char *path)
{
    size_t n;

    if (!path || path[0] != '/')
        return -EINVAL;
    n = strlen(path);
    if (n > SSHFILE_PATH_MAX)
        return -EFBIG;
    return 0;
}

int sshfile_submit_check(struct sshfile *f, const char *path)
{
    if (f->closing)
        return -ESHUTDOWN;
    return path ? sshfile_path_validate(path) : 0;
}

struct job *sshfile_job_new(enum job_kind kind, const char *path, void *userdata)
{
    struct job *j = calloc(1, sizeof(*j));

    if (!j)
        return NULL;
    j->kind = kind;
    j->fd_in = j->fd_out = j->fd_err = -1;
    j->userdata = userdata;
    j->path = strdup(path ? path : "(exec)");
    if (!j->path) {
        free(j);
        return NULL;
    }
    return j;
}

int sshfile_new(uv_loop_t *loop, const struct sshs_config *cfg, uint64_t timeout_ms,
                struct sshfile **ret)
{
    _cleanup_free_ struct sshfile *f = NULL;
    int r;

    if (!loop || !ret)
        return -EINVAL;
    f = calloc(1, sizeof(*f));
    if (!f)
        return -ENOMEM;
    r = sshs_conf_copy(cfg, &f->conf);
    if (r < 0)
        return r;
    r = uv_mutex_init(&f->mu);
    if (r < 0) {
        sshs_conf_done(&f->conf);
        return r;
    }
    (void)uv_timer_init(loop, &f->timer); /* cannot fail */
    f->loop = loop;
    f->sock = -1;
    f->timeout_ms = timeout_ms ? timeout_ms : SSHFILE_TIMEOUT_MS_DEFAULT;
    *ret = TAKE_PTR(f);
    return 0;
}

void sshfile_set_pool(struct sshfile *f, struct filepool *pool, uid_t uid, const void *group)
{
    assert(!f->busy && !f->pool);
    f->pool = filepool_ref(pool);
    f->pool_uid = uid;
    f->pool_group = group;
}

void sshfile_close(struct sshfile *f, void (*cb)(void *userdata), void *userdata)
{
    struct job *j;

    if (!f || f->closing)
        return;
    f->closing = true;
    f->closed = (struct close_notify){.cb = cb, .userdata = userdata};
    while ((j = f->qfirst)) {
        f->qfirst = j->next;
        f->queued--;
        job_complete(j, -ECANCELED);
    }
    f->qlast = NULL;
    if (!f->busy)
        start_close(f);
}

int sshfile_read(struct sshfile *f, const char *path, uint64_t offset, uint64_t length,
                 sshfile_read_cb cb, void *userdata)
{
    struct job *j;
    int r;

    if (!f || !cb)
        return -EINVAL;
    r = sshfile_submit_check(f, path);
    if (r < 0)
        return r;
    if (length > SSHFILE_READ_MAX)
        return -EFBIG;
    if (offset > (uint64_t)INT64_MAX)
        return -EINVAL;
    j = sshfile_job_new(JOB_READ, path, userdata);
    if (!j)
        return -ENOMEM;
    j->offset = offset;
    j->length = length;
    j->rcb = cb;
    r = sshfile_submit(f, j);
    if (r < 0)
        job_free(j);
    return r;
}

/* ---- for the operations of sshfile-fs.c ---- */

int sshfile_submit_op(struct sshfile *f, const char *path, struct sshfile_op *op)
{
    struct job *j;
    int r;

    if (!f || !op || !op->type)
        return -EINVAL;
    r = sshfile_submit_check(f, path);
    if (r < 0)
        return r;
    j = sshfile_job_new(JOB_OP, path, NULL);
    if (!j)
        return -ENOMEM;
    j->op = op; /* taken on success: freed with the job */
    r = sshfile_submit(f, j);
    if (r < 0) {
        j->op = NULL; /* still the caller's */
        job_free(j);
    }
    return r;
}

sftp_session sshfile_sftp(struct sshfile *f)
{
    return f->sftp;
}

ssh_session sshfile_ssh(struct sshfile *f)
{
    return f->ssh;
}

bool sshfile_job_expired(struct sshfile *f, struct job *j)
{
    bool expired;

    uv_mutex_lock(&f->mu);
    expired = j->expired;
    uv_mutex_unlock(&f->mu);
    return expired;
}

void sshfile_cancel(struct sshfile *f, void *userdata)
{
    struct job *j, **pp;

    if (!f)
        return;
    j = f->cur;
    if (j && !j->answered && j->userdata == userdata) {
        job_expire(f, j, -ECANCELED);
        timer_arm(f);
        return;
    }
    for (pp = &f->qfirst; (j = *pp); pp = &j->next)
        if (j->userdata == userdata) {
            *pp = j->next;
            if (f->qlast == j) {
                f->qlast = NULL;
                for (struct job *q = f->qfirst; q; q = q->next)
                    f->qlast = q;
            }
            f->queued--;
            job_complete(j, -ECANCELED);
            timer_arm(f);
            return;
        }
}
