#include "conn.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "config.h"
#include "audit.h"
#include "log.h"
#include "macro.h"
#include "ratelimit.h"
#include "methods.h"
#include "rpc.h"
#include "conn-out.h"

#define COMP "conn"
/* iovecs of one write: two per line (its text, its '\n') */
#define CONN_WRITE_IOV 128

/* Lines handed to libuv in one uv_write (at most one in flight per connection): they stay
 * alive, where they were serialised, until it completes. */
struct wreq {
    uv_write_t w;
    struct conn *conn;
    struct out_queue lines;
};

/* A message on the send queue: written on a worker thread when large (text set once
 * done), on the loop when it is small but was sent behind a large one. */
struct conn_msg {
    uv_work_t work;
    struct conn *conn;
    json_object *msg;
    size_t hint;
    char *text; /* rpc_text_new()'s */
    size_t len;
    struct conn_msg *next;
};

static const char *const conn_state_names[] = {
    [CONN_OPEN] = "open",
    [CONN_DRAINING] = "draining",
    [CONN_CLOSING] = "closing",
    [CONN_CLOSED] = "closed",
};

static void conn_process(struct conn *c);
static void conn_update(struct conn *c);
static void conn_flush(struct conn *c);

static const char *conn_state_name(enum conn_state state)
{
    if ((unsigned)state >= ELEMENTSOF(conn_state_names) || !conn_state_names[state])
        return "invalid";
    return conn_state_names[state];
}

/* The only place the state changes. States only move forward, OPEN -> DRAINING
 * -> CLOSING -> CLOSED (DRAINING may be skipped): a connection that started
 * closing can never be closed again. */
int conn_set_state(struct conn *c, enum conn_state state)
{
    if ((unsigned)state >= ELEMENTSOF(conn_state_names) || state <= c->state) {
        c->host->state_refusals++;
        log_error(COMP, "#%" PRIu64 " uid=%u: refusing state change %s -> %s", c->id,
                  (unsigned)c->port.uid, conn_state_name(c->state), conn_state_name(state));
        return -EINVAL;
    }
    log_debug(COMP, "#%" PRIu64 " uid=%u: %s -> %s", c->id, (unsigned)c->port.uid,
              conn_state_name(c->state), conn_state_name(state));
    c->state = state;
    return 0;
}

/* Tests and the fuzz target check that it stays 0. */
unsigned conn_state_refusals(const struct conn_host *h)
{
    return h->state_refusals;
}

size_t conn_output_bytes(const struct conn *c)
{
    return c->out.len + c->out_queued + c->sendq_bytes;
}

size_t conn_held_bytes(const struct conn *c)
{
    return c->in.cap + c->out.held + c->out_held + c->sendq_bytes;
}

/* Reports what the connection holds now to the owner's memory budget (nothing once it
 * is closing: its buffers are being released). */
static void conn_account(struct conn *c)
{
    size_t now = c->state >= CONN_CLOSING ? 0 : conn_held_bytes(c);

    if (now == c->held)
        return;
    c->host->ops->account(c->host->owner, c, c->held, now);
    c->held = now;
}

static unsigned max_inflight(const struct conn *c)
{
    return c->host->config->server.max_inflight_per_connection;
}

static void conn_read_stop(struct conn *c)
{
    if (!c->reading)
        return;
    (void)uv_poll_stop(&c->rpoll);
    c->reading = false;
}

/* True when the client closed its socket completely rather than only its
 * sending side. On a stream Unix socket a full close by the peer shuts down both
 * directions, so poll() reports POLLHUP; after shutdown(SHUT_WR) it reports only
 * POLLRDHUP, which is not a hang-up: the client still reads its replies. This
 * does not depend on reading, so it also works while reading is stopped (in-flight
 * cap reached, output paused) and the EOF is still unread in the socket. */
static bool conn_peer_gone(struct conn *c)
{
    uv_os_fd_t fd;
    struct pollfd p = {.events = POLLIN | POLLOUT};

    if (uv_fileno((uv_handle_t *)&c->pipe, &fd) < 0)
        return false;
    p.fd = fd;
    if (poll(&p, 1, 0) <= 0)
        return false;
    return (p.revents & (POLLHUP | POLLERR)) != 0;
}

/* The client hung up, perhaps with requests still running: cancel them and
 * close. Returns true when the connection was closed. */
static bool conn_check_hangup(struct conn *c)
{
    if (c->state >= CONN_CLOSING || !conn_peer_gone(c))
        return false;
    if (c->port.list.n > 0) {
        char note[RATELIMIT_NOTE_MAX];
        unsigned n;

        if (ratelimit_pass(c->host->log_rl, c->port.uid, "hangup", uv_now(c->host->loop), &n))
            log_info(COMP,
                     "#%" PRIu64 " uid=%u: client gone with %u request(s) in flight, cancelling%s",
                     c->id, (unsigned)c->port.uid, c->port.list.n, ratelimit_note(n, note));
    }
    conn_close(c);
    return true;
}

/* The descriptors that came with a chunk belong to the line holding its last byte: the
 * kernel hands them over with the first byte of the sendmsg() that carried them and stops
 * the read right after that message's data, so the chunk ends inside it, and a client
 * sends one request line per such sendmsg() (docs/protocol.md). Returns false when the
 * connection was failed (the descriptors are closed then). */
static bool conn_queue_fds(struct conn *c, const char *data, size_t n, struct req_fds *got)
{
    uint64_t k = 0, line;
    struct conn_fds *q;

    for (const char *p = data, *end = data + n; (p = memchr(p, '\n', (size_t)(end - p))); p++)
        k++;
    line = data[n - 1] == '\n' ? c->lines_in + k - 1 : c->lines_in + k;
    c->lines_in += k;
    if (got->n == 0)
        return true;
    if (c->fdq_fds + got->n > CONN_FDS_WAITING_MAX) {
        req_fds_close(got);
        conn_fail(c, RPC_INVALID_REQUEST, "too many descriptors waiting for their request");
        return false;
    }
    if (c->n_fdq > 0 && c->fdq[c->n_fdq - 1].line == line) {
        /* A second message for the same line (a client that split it): its descriptors
         * could not be told apart from the first ones. */
        req_fds_close(got);
        conn_fail(c, RPC_INVALID_REQUEST, "descriptors sent twice for one request line");
        return false;
    }
    q = realloc(c->fdq, (c->n_fdq + 1) * sizeof *q);
    if (!q) {
        req_fds_close(got);
        conn_fail(c, RPC_INTERNAL_ERROR, "out of memory");
        return false;
    }
    c->fdq = q;
    c->fdq[c->n_fdq++] = (struct conn_fds){.line = line, .fds = *got};
    c->fdq_fds += got->n;
    got->n = 0;
    return true;
}

/* Moves the descriptors of the line numbered line (if any) to the request port. */
static void conn_take_line_fds(struct conn *c, uint64_t line)
{
    req_fds_close(&c->port.fds);
    while (c->n_fdq > 0 && c->fdq[0].line <= line) {
        struct conn_fds e = c->fdq[0];

        memmove(&c->fdq[0], &c->fdq[1], (c->n_fdq - 1) * sizeof c->fdq[0]);
        c->n_fdq--;
        c->fdq_fds -= e.fds.n;
        if (e.line == line)
            c->port.fds = e.fds;
        else
            req_fds_close(&e.fds); /* not expected: lines are taken in order */
    }
}

static void conn_drop_fds(struct conn *c)
{
    for (unsigned i = 0; i < c->n_fdq; i++)
        req_fds_close(&c->fdq[i].fds);
    free(c->fdq);
    c->fdq = NULL;
    c->n_fdq = c->fdq_fds = 0;
    req_fds_close(&c->port.fds);
}

static void on_data(struct conn *c, ssize_t nread, const char *base)
{
    int r;

    if (nread == 0 || c->state != CONN_OPEN)
        return;
    if (nread == UV_EOF) {
        /* The client finished sending. After a half-close it still waits for
         * the replies: answer what it sent, then close. After a full close
         * nobody reads them: cancel the requests instead. The sweep repeats
         * this check while reading is stopped, to notice a later close. */
        c->eof = true;
        conn_read_stop(c);
        if (conn_check_hangup(c))
            return;
        conn_process(c);
        return;
    }
    if (nread < 0) {
        log_debug(COMP, "#%" PRIu64 ": read: %s", c->id, uv_strerror((int)nread));
        conn_close(c);
        return;
    }
    c->last_activity = uv_now(c->host->loop);
    r = frame_buf_append(&c->in, base, (size_t)nread);
    if (r == -EMSGSIZE) {
        log_debug(COMP, "#%" PRIu64 ": request line over %zu bytes", c->id, c->in.max_line);
        audit_limit("request_bytes", c->port.uid, "a request line over max_request_bytes");
        /* Complete lines before the oversized one are still answered. */
        conn_process(c);
        if (c->state == CONN_OPEN)
            conn_fail(c, RPC_INVALID_REQUEST, "request exceeds the size limit");
        return;
    }
    if (r < 0) {
        conn_fail(c, RPC_INTERNAL_ERROR, "out of memory");
        return;
    }
    conn_process(c);
}

/* Collects the SCM_RIGHTS descriptors of a received message into got. */
static void collect_fds(struct msghdr *m, struct req_fds *got)
{
    for (struct cmsghdr *cm = CMSG_FIRSTHDR(m); cm; cm = CMSG_NXTHDR(m, cm)) {
        size_t n;

        if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
            continue;
        n = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < n; i++) {
            int fd;

            memcpy(&fd, CMSG_DATA(cm) + i * sizeof(int), sizeof fd);
            if (got->n < REQ_FDS_MAX)
                got->fd[got->n++] = fd;
            else
                close(fd);
        }
    }
}

/* One recvmsg() per readable event, like libuv's own reads: descriptors sent with
 * SCM_RIGHTS arrive with the bytes. */
static void on_readable(uv_poll_t *h, int status, int events)
{
    struct conn *c = h->data;
    union {
        char buf[CMSG_SPACE(sizeof(int) * REQ_FDS_MAX)];
        struct cmsghdr align;
    } cbuf;
    char *read_buffer = c->host->read_buffer;
    struct iovec iov = {.iov_base = read_buffer, .iov_len = CONN_READ_CHUNK};
    struct msghdr m = {
        .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf.buf, .msg_controllen = sizeof cbuf};
    struct req_fds got = {};
    ssize_t n;

    if (c->state != CONN_OPEN || !c->reading)
        return;
    if (status < 0) {
        /* libuv reports POLLERR as UV_EBADF: the socket failed (the client reset it). */
        log_debug(COMP, "#%" PRIu64 ": socket error (reset by the client?)", c->id);
        conn_close(c);
        return;
    }
    n = recvmsg(c->rfd, &m, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
    if (n < 0) {
        if (errno == EAGAIN || errno == EINTR)
            return;
        on_data(c, uv_translate_sys_error(errno), NULL);
        return;
    }
    collect_fds(&m, &got);
    if (m.msg_flags & MSG_CTRUNC) {
        /* Descriptors past the buffer were closed by the kernel: the request cannot be
         * served as sent. */
        req_fds_close(&got);
        log_debug(COMP, "#%" PRIu64 ": more than %d descriptors in one message", c->id,
                  REQ_FDS_MAX);
        conn_fail(c, RPC_INVALID_REQUEST, "more than 8 descriptors with one request line");
        return;
    }
    if (n == 0) {
        req_fds_close(&got);
        on_data(c, UV_EOF, NULL);
        return;
    }
    if (!conn_queue_fds(c, read_buffer, (size_t)n, &got))
        return;
    on_data(c, n, read_buffer);
}

static void on_write(uv_write_t *w, int status)
{
    struct wreq *wr = container_of(w, struct wreq, w);
    struct conn *c = wr->conn;

    c->out_queued -= wr->lines.len;
    c->out_held -= wr->lines.held;
    c->n_writes--;
    out_queue_clear(&wr->lines);
    free(wr);
    if (status < 0) {
        if (c->state < CONN_CLOSING)
            log_debug(COMP, "#%" PRIu64 ": write: %s", c->id, uv_strerror(status));
        conn_close(c);
        return;
    }
    /* Progress: the stalled-writer deadline counts from the last completed write. */
    c->write_since = c->n_writes ? uv_now(c->host->loop) : 0;
    conn_flush(c);
    conn_update(c);
    if (c->state == CONN_OPEN && !c->in_process)
        conn_process(c);
}

/* Writes as much of the queued lines as the socket takes now. Returns false when the
 * connection was closed (the socket failed). */
static bool conn_try_write(struct conn *c)
{
    while (c->out.len > 0) {
        uv_buf_t iov[CONN_WRITE_IOV];
        size_t bytes;
        unsigned k = out_queue_iov(&c->out, iov, CONN_WRITE_IOV, &bytes);
        int n = uv_try_write((uv_stream_t *)&c->pipe, iov, k);

        if (n == UV_EAGAIN)
            return true;
        if (n < 0) {
            log_debug(COMP, "#%" PRIu64 ": write: %s", c->id, uv_strerror(n));
            conn_close(c);
            return false;
        }
        out_queue_advance(&c->out, (size_t)n);
        if ((size_t)n < bytes)
            return true;
    }
    return true;
}

/* Hands the queued lines to the socket where they are: directly while it takes them,
 * the rest (from the offset reached) as one uv_write that owns its lines until it
 * completes. One uv_write at a time: the lines queued meanwhile wait for its callback. */
static void conn_flush(struct conn *c)
{
    uv_buf_t iov[CONN_WRITE_IOV];
    struct wreq *wr;
    size_t bytes;
    unsigned k;
    int r;

    if (c->out.len == 0 || c->state >= CONN_CLOSING || c->n_writes > 0)
        return;
    if (!conn_try_write(c) || c->out.len == 0)
        return;
    wr = calloc(1, sizeof *wr);
    if (!wr) {
        conn_close(c);
        return;
    }
    wr->conn = c;
    out_queue_move(&wr->lines, &c->out, CONN_WRITE_IOV / 2);
    k = out_queue_iov(&wr->lines, iov, CONN_WRITE_IOV, &bytes);
    /* libuv keeps its own copy of the iovecs, not of the bytes */
    r = uv_write(&wr->w, (uv_stream_t *)&c->pipe, iov, k, on_write);
    if (r < 0) {
        out_queue_clear(&wr->lines);
        free(wr);
        conn_close(c);
        return;
    }
    c->out_queued += wr->lines.len;
    c->out_held += wr->lines.held;
    c->n_writes++;
    c->write_since = uv_now(c->host->loop);
}

static void conn_msg_free(struct conn_msg *m)
{
    json_object_put(m->msg);
    free(m->text);
    free(m);
}

/* Drops the queued messages, except the one a worker thread still holds. */
static void conn_drop_sendq(struct conn *c)
{
    struct conn_msg **p = c->sendq_busy ? &c->sendq->next : &c->sendq;

    while (*p) {
        struct conn_msg *m = *p;

        *p = m->next;
        c->sendq_bytes -= m->hint;
        conn_msg_free(m);
    }
    c->sendq_tail = c->sendq;
}

/* Worker thread: the message is this thread's alone until sendq_done() (a reply built
 * for one request; its id is shared, but only read: the message is freed on the loop). */
static void sendq_work(uv_work_t *w)
{
    struct conn_msg *m = container_of(w, struct conn_msg, work);

    if (rpc_text_new(m->msg, m->hint, &m->text, &m->len) < 0)
        m->text = NULL;
}

static void sendq_done(uv_work_t *w, int status);

/* Moves the queued messages to the output in order, serialising the small ones here, up
 * to the next large one to serialise, which goes to a worker thread. */
static void sendq_run(struct conn *c)
{
    while (c->sendq && c->state < CONN_CLOSING && !c->sendq_busy) {
        struct conn_msg *m = c->sendq;
        int r;

        if (!m->text && m->hint > CONN_OFFLOOP_BYTES) {
            if (uv_queue_work(c->host->loop, &m->work, sendq_work, sendq_done) < 0) {
                conn_close(c);
                return;
            }
            c->sendq_busy = true;
            c->handles++;
            return;
        }
        c->sendq = m->next;
        if (!c->sendq)
            c->sendq_tail = NULL;
        c->sendq_bytes -= m->hint;
        if (m->text) {
            json_object_put(TAKE_PTR(m->msg));
            r = out_queue_push_buf(&c->out, TAKE_PTR(m->text), m->len, m->hint);
        } else
            r = out_queue_push(&c->out, TAKE_PTR(m->msg), m->hint);
        free(m);
        if (r < 0) {
            conn_close(c); /* out of memory: a reply would be missing */
            return;
        }
        conn_flush(c);
    }
}

static void conn_release(struct conn *c);

static void sendq_done(uv_work_t *w, int status)
{
    struct conn_msg *m = container_of(w, struct conn_msg, work);
    struct conn *c = m->conn;

    c->sendq_busy = false;
    c->handles--;
    if (c->state >= CONN_CLOSING || status < 0 || !m->text) {
        c->sendq = m->next;
        if (!c->sendq)
            c->sendq_tail = NULL;
        c->sendq_bytes -= m->hint;
        conn_msg_free(m);
        if (c->state < CONN_CLOSING)
            conn_close(c); /* out of memory: a reply would be missing */
        conn_drop_sendq(c);
        if (c->handles == 0)
            conn_release(c);
        return;
    }
    sendq_run(c);
    conn_update(c);
    if (c->state == CONN_OPEN && !c->in_process)
        conn_process(c);
}

/* Queues a message (taken over) behind the send queue. */
static int conn_queue_msg(struct conn *c, json_object *msg, size_t hint)
{
    struct conn_msg *m = calloc(1, sizeof *m);

    if (!m) {
        json_object_put(msg);
        return -ENOMEM;
    }
    m->conn = c;
    m->msg = msg;
    m->hint = MAX(hint, (size_t)1);
    if (c->sendq_tail)
        c->sendq_tail->next = m;
    else
        c->sendq = m;
    c->sendq_tail = m;
    c->sendq_bytes += m->hint;
    sendq_run(c);
    return 0;
}

/* Queues one message (taken over): serialised now into json-c's buffer, which is written
 * from there; a large one, and whatever is sent after it until it is written, goes through
 * the send queue. */
static int conn_send(struct conn *c, json_object *o)
{
    size_t hint;
    int r;

    if (!o)
        return -ENOMEM;
    if (c->state >= CONN_CLOSING) {
        json_object_put(o);
        return -ENOTCONN;
    }
    hint = rpc_size_hint(o);
    if (c->sendq || hint > CONN_OFFLOOP_BYTES)
        return conn_queue_msg(c, o, hint);
    r = out_queue_push(&c->out, o, hint);
    if (r < 0)
        return r;
    if (!c->in_process)
        conn_flush(c);
    return 0;
}

void conn_fail(struct conn *c, int code, const char *reason)
{
    if (c->state != CONN_OPEN)
        return;
    conn_read_stop(c);
    if (conn_set_state(c, CONN_DRAINING) < 0)
        return;
    /* Sending may find the client gone and close the connection: conn_flush()
     * and conn_update() do nothing once it is closing. */
    (void)conn_send(c, rpc_error_reason_new(NULL, code, reason));
    conn_flush(c);
    conn_update(c);
}

/* Calls the on_drain callbacks armed before this pass. A callback may send past
 * high water again and re-arm: it then waits for the next drain instead of being
 * called again in this one (which would never end). */
static void fire_drain(struct conn *c)
{
    req_list_fire_drain(&c->port, c->drain_pass++);
}

/* Computes read interest and closing from the state. */
static void conn_update(struct conn *c)
{
    size_t out = conn_output_bytes(c);
    bool want;

    conn_account(c);
    if (c->state == CONN_DRAINING) {
        if (out == 0)
            conn_close(c);
        return;
    }
    if (c->state != CONN_OPEN)
        return;
    if ((c->eof || c->host->ops->stopping(c->host->owner)) && c->port.list.n == 0 && out == 0 &&
        !c->in_process) {
        conn_close(c);
        return;
    }
    if (out > CONN_OUTPUT_HIGH) {
        c->out_paused = true;
    } else if (out <= CONN_OUTPUT_LOW) {
        c->out_paused = false;
        fire_drain(c);
        if (c->state != CONN_OPEN)
            return;
    }
    /* Over its share of the memory budget, the uid's connections are not read from until
     * it drops below (the sweep looks again): other uids' connections are not affected. */
    want = !c->eof && c->port.list.n < max_inflight(c) && !c->out_paused &&
           !c->host->ops->over_share(c->host->owner, c->port.uid);
    if (want && !c->reading) {
        if (uv_poll_start(&c->rpoll, UV_READABLE, on_readable) == 0)
            c->reading = true;
    } else if (!want && c->reading) {
        conn_read_stop(c);
    }
}

static void dispatch_line(struct conn *c, const char *line, size_t len)
{
    /* Blank lines (keep-alives, a trailing "\r\n") are ignored. */
    if (len == 0 || (len == 1 && line[0] == '\r'))
        return;
    c->port.inflight_max = max_inflight(c); /* live config: reloads apply */
    if (methods_dispatch_line(c->host->methods, &c->port, &c->host->tokener, line, len,
                              c->host->ops->stopping(c->host->owner)) < 0)
        conn_fail(c, RPC_INTERNAL_ERROR, "out of memory");
}

/* Takes complete lines while the caps allow, then flushes and recomputes interest. */
static void conn_process(struct conn *c)
{
    if (c->in_process)
        return;
    c->in_process = true;
    while (c->state == CONN_OPEN && c->port.list.n < max_inflight(c) &&
           conn_output_bytes(c) <= CONN_OUTPUT_HIGH) {
        char *line;
        size_t len;
        int r = frame_buf_next(&c->in, &line, &len);

        if (r == 0)
            break;
        if (r < 0) {
            c->in_process = false;
            conn_fail(c, RPC_INVALID_REQUEST, "request exceeds the size limit");
            return;
        }
        /* Descriptors no request took (a blank line, a parse error, a batch, a
         * connection that closed meanwhile) are closed right after. */
        conn_take_line_fds(c, c->lines_out++);
        dispatch_line(c, line, len);
        req_fds_close(&c->port.fds);
    }
    /* The buffer of a large line is given back once the line is taken: a connection
     * that waits holds no more than a read's worth, and its uid's share is not spent. */
    if (frame_buf_pending(&c->in) == 0 && c->in.cap > 2 * CONN_READ_CHUNK)
        frame_buf_done(&c->in);
    c->in_process = false;
    conn_flush(c);
    conn_update(c);
}

static void on_close(uv_handle_t *h)
{
    struct conn *c = h->data;

    if (h == (uv_handle_t *)&c->rpoll) {
        close(c->rfd);
        c->rfd = -1;
    }
    if (--c->handles > 0)
        return;
    conn_release(c);
}

/* The last handle closed and no serialisation runs: frees c. */
static void conn_release(struct conn *c)
{
    conn_set_state(c, CONN_CLOSED);
    conn_drop_fds(c);
    frame_buf_done(&c->in);
    out_queue_clear(&c->out);
    c->host->ops->closed(c->host->owner, c);
    free(c);
}

void conn_close(struct conn *c)
{
    if (c->state >= CONN_CLOSING)
        return;
    conn_read_stop(c);
    /* CLOSING is entered once, so uv_close() is called once. */
    if (conn_set_state(c, CONN_CLOSING) < 0)
        return;
    out_queue_clear(&c->out);
    conn_drop_sendq(c);
    conn_account(c);
    c->host->ops->uncount(c->host->owner, c);
    conn_drop_fds(c);
    uv_close((uv_handle_t *)&c->rpoll, on_close);
    uv_close((uv_handle_t *)&c->pipe, on_close);
    /* The callbacks may complete their requests, which are detached first: none
     * of them reaches this connection again. */
    req_list_detach_all(&c->port);
}

void conn_sweep(struct conn *c, uint64_t now)
{
    const struct conn_limits *l = c->host->limits;

    if (c->state >= CONN_CLOSING)
        return;
    if (c->n_writes > 0 && now - c->write_since >= l->write_stall_ms) {
        char note[RATELIMIT_NOTE_MAX];
        unsigned n;

        if (ratelimit_pass(c->host->log_rl, c->port.uid, "write_stall", now, &n)) {
            log_info(COMP, "#%" PRIu64 " uid=%u: client does not read its replies, closing%s",
                     c->id, (unsigned)c->port.uid, ratelimit_note(n, note));
            audit_limit("write_stall", c->port.uid, "the client did not read its replies: closed");
        } else
            audit_limit_suppressed("write_stall");
        conn_close(c);
        return;
    }
    /* While reading is stopped (EOF seen, in-flight cap reached, output paused,
     * draining) a hang-up would go unnoticed: poll for it. */
    if (!c->reading && conn_check_hangup(c))
        return;
    if (c->state == CONN_OPEN && c->port.list.n == 0 && conn_output_bytes(c) == 0 &&
        now - c->last_activity >= l->idle_timeout_ms) {
        log_debug(COMP, "#%" PRIu64 ": idle, closing", c->id);
        conn_close(c);
        return;
    }
    /* Reading may have stopped for the uid's memory share: resume once it is back under. */
    if (c->state == CONN_OPEN && !c->reading)
        conn_update(c);
}

void conn_host_done(struct conn_host *h)
{
    if (h->tokener) /* json-c's free does not take NULL */
        json_tokener_free(h->tokener);
    h->tokener = NULL;
}

void conn_shutdown(struct conn *c)
{
    conn_update(c);
}

void conn_abort(struct conn *c)
{
    conn_close(c);
}

/* ---- the request port: how requests reach this connection ---- */

static int port_send(void *conn, json_object *msg)
{
    return conn_send(conn, msg);
}

static size_t port_output_bytes(const void *conn)
{
    return conn_output_bytes(conn);
}

static bool port_open(const void *conn)
{
    return ((const struct conn *)conn)->state == CONN_OPEN;
}

static bool port_active(const void *conn)
{
    return ((const struct conn *)conn)->state < CONN_CLOSING;
}

static uint64_t port_drain_pass(const void *conn)
{
    return ((const struct conn *)conn)->drain_pass;
}

static void port_completed(void *conn)
{
    struct conn *c = conn;
    const struct conn_host *h = c->host;

    if (c->state < CONN_CLOSING) {
        c->last_activity = uv_now(h->loop);
        if (!c->in_process)
            conn_process(c);
    }
    h->ops->request_done(h->owner);
}

static const struct req_port_ops conn_port_ops = {
    .send = port_send,
    .output_bytes = port_output_bytes,
    .open = port_open,
    .active = port_active,
    .drain_pass = port_drain_pass,
    .completed = port_completed,
};

static void on_close_unaccepted(uv_handle_t *h)
{
    free(h->data);
}

static int conn_new(struct conn_host *h, struct conn **ret)
{
    struct conn *c;
    int r;

    c = calloc(1, sizeof *c);
    if (!c)
        return -ENOMEM;
    c->host = h;
    c->id = ++h->next_id;
    c->rfd = -1;
    r = uv_pipe_init(h->loop, &c->pipe, 0);
    if (r < 0) {
        free(c);
        return r;
    }
    c->pipe.data = c;
    *ret = c;
    return 0;
}

/* Reads the peer's credentials and makes the connection ready to start. On
 * failure the handle is closed (which frees c). */
static int conn_setup(struct conn *c, struct conn **ret)
{
    struct conn_host *h = c->host;
    struct ucred cred;
    socklen_t len = sizeof cred;
    uv_os_fd_t fd;
    int r;

    r = uv_fileno((uv_handle_t *)&c->pipe, &fd);
    if (r == 0 && getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0)
        r = -errno;
    /* Reads need recvmsg() for the descriptors: poll a duplicate of the socket (libuv
     * keeps one watcher per descriptor number, and the pipe handle owns the original). */
    if (r == 0 && (c->rfd = fcntl(fd, F_DUPFD_CLOEXEC, 3)) < 0)
        r = -errno;
    if (r == 0)
        r = uv_poll_init(h->loop, &c->rpoll, c->rfd);
    if (r < 0) {
        if (c->rfd >= 0)
            close(c->rfd);
        uv_close((uv_handle_t *)&c->pipe, on_close_unaccepted);
        return r;
    }
    c->rpoll.data = c;
    c->handles = 2;
    c->port = (struct req_port){
        .ops = &conn_port_ops,
        .conn = c,
        .loop = h->loop,
        .config = h->config,
        .admins = h->admins,
        .observer = h->observer,
        .server = h->server,
        .uid = cred.uid,
        .gid = cred.gid,
        .pid = cred.pid,
        .output_high = CONN_OUTPUT_HIGH,
        .output_hard = CONN_OUTPUT_HARD,
    };
    frame_buf_init(&c->in, h->config->server.max_request_bytes);
    c->last_activity = uv_now(h->loop);
    c->state = CONN_OPEN; /* the initial state, not a transition */
    *ret = c;
    return 0;
}

int conn_accept(struct conn_host *h, uv_stream_t *listener, struct conn **ret)
{
    struct conn *c;
    int r;

    r = conn_new(h, &c);
    if (r < 0)
        return r;
    r = uv_accept(listener, (uv_stream_t *)&c->pipe);
    if (r < 0) {
        uv_close((uv_handle_t *)&c->pipe, on_close_unaccepted);
        return r;
    }
    return conn_setup(c, ret);
}

int conn_adopt(struct conn_host *h, int fd, struct conn **ret)
{
    struct conn *c;
    int r;

    r = conn_new(h, &c);
    if (r < 0) {
        close(fd);
        return r;
    }
    r = uv_pipe_open(&c->pipe, fd);
    if (r < 0) {
        close(fd);
        uv_close((uv_handle_t *)&c->pipe, on_close_unaccepted);
        return r;
    }
    return conn_setup(c, ret);
}

void conn_start(struct conn *c)
{
    log_debug(COMP, "#%" PRIu64 ": accepted uid=%u gid=%u pid=%d", c->id, (unsigned)c->port.uid,
              (unsigned)c->port.gid, (int)c->port.pid);
    conn_update(c);
}

unsigned conn_inflight(const struct conn *c)
{
    return c->port.list.n;
}
