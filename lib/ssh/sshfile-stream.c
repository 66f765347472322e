/* Descriptor streams on the sshfile's worker thread: a file written from a descriptor, a
 * file read into one, and a command whose stdin/stdout are descriptors. See sshfile.h.
 *
 * The worker never blocks on the descriptor for long: it polls it in STREAM_POLL_MS slices
 * and gives up (-ETIME) once the loop thread marked the job expired (no byte moved within
 * the sshfile's timeout), which also shuts the session's socket down under any blocking
 * libssh call. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "log.h"
#include "macro.h"
#include "sshfile-internal.h"
#include "sshexec.h"
#include "util.h"

#define COMP "sftp"
#define STREAM_POLL_MS 250
#define EXEC_BLOCK (64u * 1024u)
#define EXEC_IDLE_POLL_MS 100
#define EXEC_KILL_TIMEOUT_MS 10000

static void progress(struct job *j, size_t n)
{
    j->moved += n;
    atomic_store(&j->progress_ns, uv_hrtime());
}

/* Waits until fd is ready for events: 0, -ETIME (the deadline passed), -EBADFD. While it
 * waits, the deadline does not cut the session off (in_fd_wait, set for the whole wait, its
 * poll slices and the checks between them): the caller gets -ETIME with the session intact
 * and cleans up. */
static int fd_wait(struct sshfile *f, struct job *j, int fd, short events)
{
    bool expired;
    int r;

    uv_mutex_lock(&f->mu);
    expired = j->expired;
    j->in_fd_wait = !expired;
    uv_mutex_unlock(&f->mu);
    if (expired)
        return -ETIME;
    for (;;) {
        struct pollfd p = {.fd = fd, .events = events};
        int k = poll(&p, 1, STREAM_POLL_MS), e = errno;

        uv_mutex_lock(&f->mu);
        expired = j->expired;
        uv_mutex_unlock(&f->mu);
        if (expired) {
            r = -ETIME;
            break;
        }
        if (k > 0) {
            r = 0;
            break;
        }
        if (k < 0 && e != EINTR) {
            r = -EBADFD;
            break;
        }
    }
    uv_mutex_lock(&f->mu);
    j->in_fd_wait = false;
    uv_mutex_unlock(&f->mu);
    return r;
}

/* Fills buf from fd until it is full or fd ends: the byte count (0 at the end), or < 0. */
static ssize_t fd_fill(struct sshfile *f, struct job *j, int fd, char *buf, size_t n)
{
    size_t got = 0;

    while (got < n) {
        ssize_t k;
        int r = fd_wait(f, j, fd, POLLIN);

        if (r < 0)
            return r;
        k = read(fd, buf + got, n - got);
        if (k == 0)
            break;
        if (k < 0) {
            if (errno == EAGAIN || errno == EINTR)
                continue;
            log_debug(COMP, "reading the passed descriptor: %m");
            return -EBADFD;
        }
        got += (size_t)k;
        atomic_store(&j->progress_ns, uv_hrtime());
    }
    return (ssize_t)got;
}

/* How fd_write_all() writes into a descriptor without blocking in write(2) where neither
 * the deadline nor a cancel reaches the worker (the daemon could not stop). The descriptor is
 * the client's: setting O_NONBLOCK on it would change its file for the client too. */
enum fd_out_kind {
    OUT_REGULAR,       /* a regular file: whole writes */
    OUT_REOPENED,      /* a pipe or FIFO opened again through /proc with O_NONBLOCK: a file
                         description of the worker's own on the same pipe, whole writes */
    OUT_STREAM_SOCKET, /* send(MSG_DONTWAIT): whole sends that take what fits */
    OUT_SMALL,         /* anything else: at most PIPE_BUF bytes a write after POLLOUT, which
                         a pipe or a terminal with room takes without blocking */
};

/* The kind of fd, and for OUT_REOPENED the descriptor to write to (*ret_nb). */
static enum fd_out_kind fd_out_kind(int fd, int *ret_nb)
{
    struct stat st;
    char path[64];
    int type = 0, nb;
    socklen_t len = sizeof type;

    /* A descriptor not open for writing fails its writes as it is (no reopening for it). */
    if (fstat(fd, &st) < 0 || (fcntl(fd, F_GETFL) & O_ACCMODE) == O_RDONLY)
        return OUT_SMALL;
    if (S_ISREG(st.st_mode))
        return OUT_REGULAR;
    if (S_ISSOCK(st.st_mode))
        return getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) == 0 && type == SOCK_STREAM
                   ? OUT_STREAM_SOCKET
                   : OUT_SMALL;
    if (!S_ISFIFO(st.st_mode))
        return OUT_SMALL;
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    /* ENXIO: no reader left (the writes below fail as they would on fd). */
    nb = open(path, O_WRONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    if (nb < 0)
        return OUT_SMALL;
    *ret_nb = nb;
    return OUT_REOPENED;
}

/* Writes buf into fd, each write after POLLOUT and none that can block (fd_out_kind()). */
static int fd_write_all(struct sshfile *f, struct job *j, int fd, const char *buf, size_t n)
{
    _cleanup_close_ int nb = -1;
    enum fd_out_kind kind = fd_out_kind(fd, &nb);

    while (n > 0) {
        ssize_t k;
        int r = fd_wait(f, j, fd, POLLOUT);

        if (r < 0)
            return r;
        switch (kind) {
        case OUT_REGULAR:
            k = write(fd, buf, n);
            break;
        case OUT_REOPENED:
            k = write(nb, buf, n);
            break;
        case OUT_STREAM_SOCKET:
            k = send(fd, buf, n, MSG_DONTWAIT | MSG_NOSIGNAL);
            break;
        default:
            k = write(fd, buf, MIN(n, (size_t)PIPE_BUF));
        }
        if (k < 0) {
            if (errno == EAGAIN || errno == EINTR)
                continue;
            log_debug(COMP, "writing the passed descriptor: %m");
            return -EBADFD;
        }
        buf += k;
        n -= (size_t)k;
        progress(j, (size_t)k);
    }
    return 0;
}

static int stream_to_file(struct sshfile *f, struct job *j, sftp_file file)
{
    _cleanup_free_ char *buf = malloc(SSHFILE_CHUNK);

    if (!buf)
        return -ENOMEM;
    for (;;) {
        ssize_t n = fd_fill(f, j, j->fd_in, buf, SSHFILE_CHUNK);

        if (n <= 0)
            return (int)n;
        for (size_t off = 0; off < (size_t)n;) {
            ssize_t w = sftp_write(file, buf + off, (size_t)n - off);

            if (w <= 0)
                return sshfile_last_error(f);
            off += (size_t)w;
        }
        progress(j, (size_t)n);
    }
}

/* The read-ahead into the descriptor: every reply lands in one buffer and is written into
 * fd_out in order. */
struct fd_sink {
    struct sshfile *f;
    struct job *j;
    char *buf;
};

static char *fd_sink_buf(void *userdata)
{
    struct fd_sink *s = userdata;

    return s->buf;
}

static int fd_sink_took(void *userdata, size_t n)
{
    struct fd_sink *s = userdata;

    return fd_write_all(s->f, s->j, s->j->fd_out, s->buf, n);
}

static int read_fd_pipelined(struct sshfile *f, struct job *j, sftp_file file, char *buf)
{
    struct fd_sink s = {f, j, buf};
    const struct sshfile_read_sink sink = {fd_sink_buf, fd_sink_took, &s};

    return sshfile_read_ahead(f, file, j->offset, j->length, &sink);
}

static int do_read_fd(struct sshfile *f, struct job *j)
{
    _cleanup_free_ char *buf = malloc(SSHFILE_READ_CHUNK);
    uint64_t size;
    sftp_file file;
    int r;

    if (!buf)
        return -ENOMEM;
    r = sshfile_read_open(f, j->path, &size, &file);
    if (r < 0)
        return r;
    r = read_fd_pipelined(f, j, file, buf);
    /* After a short reply (or none pipelined): one read at a time to the end. */
    while (r == 1 && j->moved < j->length) {
        ssize_t k;

        (void)sftp_seek64(file, j->offset + j->moved);
        k = sftp_read(file, buf, (size_t)MIN(j->length - j->moved, (uint64_t)SSHFILE_READ_CHUNK));
        if (k < 0) {
            r = sshfile_last_error(f);
            if (r == -EBADMSG)
                r = 0; /* EINVAL from the seek: past the largest offset the file system has */
        } else if (k == 0)
            r = 0;
        else if ((r = fd_write_all(f, j, j->fd_out, buf, (size_t)k)) == 0)
            r = 1;
    }
    if (r == 1)
        r = 0;
    sftp_close(file);
    if (r < 0)
        j->drop_session = true; /* replies may be left queued in it */
    return r;
}

/* ---- a command with descriptors ---- */

/* Appends n bytes to a captured stream, up to cap (the rest counts as truncated). */
static int capture(char **p, size_t *len, bool *truncated, size_t cap, const char *d, size_t n)
{
    size_t take = *len < cap ? MIN(n, cap - *len) : 0;
    char *q;

    if (take < n)
        *truncated = true;
    if (take == 0)
        return 0;
    q = realloc(*p, *len + take + 1);
    if (!q)
        return -ENOMEM;
    memcpy(q + *len, d, take);
    *len += take;
    q[*len] = 0;
    *p = q;
    return 0;
}

/* Runs the exec kill script for the marker on a channel of its own (bounded). */
static void exec_kill(struct sshfile *f, const char *marker)
{
    _cleanup_free_ char *cmd = NULL;
    ssh_channel ch;
    char buf[256];

    if (sshexec_kill_command(marker, &cmd) < 0 || !ssh_is_connected(f->ssh))
        return;
    ch = ssh_channel_new(f->ssh);
    if (!ch)
        return;
    if (ssh_channel_open_session(ch) == SSH_OK && ssh_channel_request_exec(ch, cmd) == SSH_OK)
        while (ssh_channel_read_timeout(ch, buf, sizeof buf, 0, EXEC_KILL_TIMEOUT_MS) > 0)
            ;
    ssh_channel_close(ch);
    ssh_channel_free(ch);
}

/* Moves what is ready on the channel's stdout and stderr. Returns 1 when something moved. */
static int exec_pump_out(struct sshfile *f, struct job *j, ssh_channel ch, char *buf)
{
    struct sshfile_exec_fd *x = j->exec;
    int moved = 0;

    for (int is_err = 0; is_err < 2; is_err++) {
        int n = ssh_channel_read_nonblocking(ch, buf, EXEC_BLOCK, is_err);
        int r;

        if (n == SSH_EOF) /* nothing left on this stream */
            continue;
        if (n < 0)
            return ssh_is_connected(f->ssh) ? -EPROTO : -ECONNRESET;
        if (n == 0)
            continue;
        moved = 1;
        if ((is_err ? x->fd_err : x->fd_out) >= 0) {
            r = fd_write_all(f, j, is_err ? x->fd_err : x->fd_out, buf, (size_t)n);
            if (r < 0)
                return r;
            *(is_err ? &x->err_bytes : &x->out_bytes) += (uint64_t)n;
            continue;
        }
        progress(j, 0);
        r = is_err
                ? capture(&x->err, &x->err_len, &x->err_truncated, x->max_output, buf, (size_t)n)
                : capture(&x->out, &x->out_len, &x->out_truncated, x->max_output, buf, (size_t)n);
        if (r < 0)
            return r;
    }
    return moved;
}

/* Sends what is left of the prelude (a long command) as far as the channel's window allows,
 * then the end of the input when there is no fd_in. Returns 1 when something moved. */
static int exec_pump_prelude(struct sshfile *f, struct job *j, ssh_channel ch, size_t *off)
{
    struct sshfile_exec_fd *x = j->exec;
    uint32_t win = ssh_channel_window_size(ch);
    size_t n = MIN(x->prelude_len - *off, MIN((size_t)win, (size_t)EXEC_BLOCK));
    int k;

    if (n == 0)
        return 0;
    k = ssh_channel_write(ch, x->prelude + *off, (uint32_t)n);
    if (k < 0)
        return ssh_is_connected(f->ssh) ? -EPROTO : -ECONNRESET;
    *off += (size_t)k;
    if (*off == x->prelude_len && x->fd_in < 0)
        (void)ssh_channel_send_eof(ch);
    return k > 0;
}

/* Feeds the channel from fd_in as far as its window allows (once the prelude is sent).
 * Returns 1 when something moved. */
static int exec_pump_in(struct sshfile *f, struct job *j, ssh_channel ch, char *buf, bool *in_open)
{
    struct sshfile_exec_fd *x = j->exec;
    uint32_t win = ssh_channel_window_size(ch);
    struct pollfd p = {.fd = x->fd_in, .events = POLLIN};
    ssize_t k;

    if (j->prelude_off < x->prelude_len)
        return exec_pump_prelude(f, j, ch, &j->prelude_off);
    if (!*in_open || win == 0 || poll(&p, 1, 0) <= 0)
        return 0;
    k = read(x->fd_in, buf, MIN((size_t)win, (size_t)EXEC_BLOCK));
    if (k < 0 && (errno == EAGAIN || errno == EINTR))
        return 0;
    if (k <= 0) {
        /* The end of the input (an unreadable descriptor ends it too). */
        *in_open = false;
        (void)ssh_channel_send_eof(ch);
        return 1;
    }
    if (ssh_channel_write(ch, buf, (uint32_t)k) != k)
        return ssh_is_connected(f->ssh) ? -EPROTO : -ECONNRESET;
    progress(j, (size_t)k);
    return 1;
}

static int exec_loop(struct sshfile *f, struct job *j, ssh_channel ch)
{
    struct sshfile_exec_fd *x = j->exec;
    _cleanup_free_ char *buf = malloc(EXEC_BLOCK);
    uint64_t start = uv_hrtime();
    bool in_open = x->fd_in >= 0;
    int r;

    if (!buf)
        return -ENOMEM;
    if (!in_open && x->prelude_len == 0)
        (void)ssh_channel_send_eof(ch);
    for (;;) {
        struct pollfd p[2] = {{.fd = ssh_get_fd(f->ssh), .events = POLLIN}, {.fd = -1}};
        int moved;

        /* A quiet command is no stall: its own timeout bounds it. Only a descriptor that
         * blocks the pump (fd_write_all) lets the inactivity deadline run. */
        atomic_store(&j->progress_ns, uv_hrtime());
        r = exec_pump_out(f, j, ch, buf);
        if (r < 0)
            return r;
        moved = r;
        r = exec_pump_in(f, j, ch, buf, &in_open);
        if (r < 0)
            return r;
        moved |= r;
        if (!moved && (ssh_channel_is_eof(ch) || ssh_channel_is_closed(ch)))
            return 0;
        if (x->timeout_ms && (uv_hrtime() - start) / 1000000u >= x->timeout_ms) {
            x->timed_out = true;
            return 0;
        }
        if (sshfile_job_expired(f, j))
            return -ETIME;
        if (moved)
            continue;
        if (in_open && j->prelude_off == x->prelude_len && ssh_channel_window_size(ch) > 0)
            p[1] = (struct pollfd){.fd = x->fd_in, .events = POLLIN};
        /* Not inside libssh: a deadline or a cancel need not cut the session off. */
        uv_mutex_lock(&f->mu);
        j->in_fd_wait = !j->expired;
        uv_mutex_unlock(&f->mu);
        (void)poll(p, 2, EXEC_IDLE_POLL_MS);
        uv_mutex_lock(&f->mu);
        j->in_fd_wait = false;
        uv_mutex_unlock(&f->mu);
    }
}

static int do_exec_fd(struct sshfile *f, struct job *j)
{
    struct sshfile_exec_fd *x = j->exec;
    ssh_channel ch = ssh_channel_new(f->ssh);
    int r;

    if (!ch)
        return -ENOMEM;
    if (ssh_channel_open_session(ch) != SSH_OK ||
        ssh_channel_request_exec(ch, x->command) != SSH_OK) {
        ssh_channel_free(ch);
        return ssh_is_connected(f->ssh) ? -EPROTO : -ECONNRESET;
    }
    /* From here the command may run: any byte counts as moved (no retry). */
    j->moved = 1;
    r = exec_loop(f, j, ch);
    if (r == 0 && !x->timed_out)
        x->exit_code = ssh_channel_get_exit_status(ch); /* -1: killed by a signal */
    ssh_channel_close(ch);
    ssh_channel_free(ch);
    if (r < 0 || x->timed_out) {
        x->exit_code = -1;
        if (r != -ECONNRESET && ssh_is_connected(f->ssh))
            exec_kill(f, x->marker); /* fails fast on a session cut at the deadline */
    }
    if (r < 0)
        j->drop_session = true;
    return r;
}

/* ---- loop side ---- */

static void stream_job_done(struct job *j)
{
    if (!sshfile_job_is_stream(j))
        return;
    CLOSE_MANY(&j->fd_in, &j->fd_out, &j->fd_err);
    sshfile_exec_fd_free(j->exec);
    j->exec = NULL;
}

void sshfile_exec_fd_free(struct sshfile_exec_fd *x)
{
    if (!x)
        return;
    FREE_MANY(x->command, x->prelude, x->out, x->err);
    free(x);
}

/* Gives j what sshfile.c runs it with, and submits it; on failure gives the descriptors back
 * (the caller keeps them) and frees j. */
static int stream_submit(struct sshfile *f, struct job *j)
{
    int r;

    j->fill = j->kind == JOB_WRITE_FD ? stream_to_file : NULL;
    j->run = j->kind == JOB_READ_FD ? do_read_fd : j->kind == JOB_EXEC_FD ? do_exec_fd : NULL;
    j->release = stream_job_done;
    r = sshfile_submit(f, j);

    if (r < 0) {
        j->fd_in = j->fd_out = j->fd_err = -1;
        j->exec = NULL;
        free(j->path);
        free(j);
    }
    return r;
}

int sshfile_write_fd(struct sshfile *f, const struct sshfile_write_fd_params *params,
                     sshfile_stream_cb cb, void *userdata)
{
    struct job *j;
    int r;

    if (!f || !params || !cb || params->fd < 0)
        return -EINVAL;
    r = sshfile_submit_check(f, params->path);
    if (r < 0)
        return r;
    if (params->path[strlen(params->path) - 1] == '/' || (params->mode & ~(mode_t)07777))
        return -EINVAL;
    j = sshfile_job_new(JOB_WRITE_FD, params->path, userdata);
    if (!j)
        return -ENOMEM;
    j->fd_in = params->fd;
    j->mode = params->mode;
    j->make_parents = params->make_parents;
    j->wcb = cb;
    return stream_submit(f, j);
}

int sshfile_read_fd(struct sshfile *f, const char *path, uint64_t offset, uint64_t length, int fd,
                    sshfile_stream_cb cb, void *userdata)
{
    struct job *j;
    int r;

    if (!f || !cb || fd < 0)
        return -EINVAL;
    r = sshfile_submit_check(f, path);
    if (r < 0)
        return r;
    if (offset > (uint64_t)INT64_MAX)
        return -EINVAL;
    j = sshfile_job_new(JOB_READ_FD, path, userdata);
    if (!j)
        return -ENOMEM;
    j->fd_out = fd;
    j->offset = offset;
    j->length = length;
    j->wcb = cb;
    return stream_submit(f, j);
}

int sshfile_exec_fd(struct sshfile *f, struct sshfile_exec_fd *x, sshfile_exec_fd_cb cb,
                    void *userdata)
{
    struct job *j;

    if (!f || !x || !cb || !x->command)
        return -EINVAL;
    if (sshfile_submit_check(f, NULL) < 0)
        return -ESHUTDOWN;
    j = sshfile_job_new(JOB_EXEC_FD, NULL, userdata);
    if (!j)
        return -ENOMEM;
    x->exit_code = -1;
    j->exec = x;
    j->fd_in = x->fd_in;
    j->fd_out = x->fd_out;
    j->fd_err = x->fd_err;
    j->xcb = cb;
    return stream_submit(f, j);
}
