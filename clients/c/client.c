/* The C client library of sandboxd: the connection, its framing (proto's frame_buf), the
 * calls in flight and their completion. See sandboxd-client.h; the synchronous calls on top
 * of this are in client-call.c, the record of the last failure in client-error.c.
 *
 * The socket is non-blocking. Request lines wait in an output queue until the socket takes
 * them; each call in flight remembers where its line ends in the bytes queued on this
 * connection, so that when the connection closes it is known whether the daemon got the
 * whole line (it may have run it) or not (it cannot have: the daemon never runs a partial
 * line). Replies are matched by id, in any order. */
#include "client-internal.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "api-limits.h"
#include "macro.h"
#include "rpc.h"

#define CLIENT_READ_CHUNK (256u * 1024) /* bytes per recv(2) */

_Static_assert(SANDBOXD_FDS_MAX == REQ_FDS_MAX, "the public cap is the daemon's");

struct call {
    struct call *next;
    int64_t id;
    uint64_t end; /* offset just past its line in the bytes queued on this connection */
    sandboxd_done_fn done;
    void *userdata;
};

/* ---- the client ---------------------------------------------------------------------- */

int sandboxd_client_new(const char *socket_path, struct sandboxd_client **ret)
{
    struct sandboxd_client *c;
    const char *path = socket_path;

    if (!ret)
        return -EINVAL;
    if (!path || !path[0])
        path = getenv("SANDBOXD_SOCKET");
    if (!path || !path[0])
        path = SANDBOXD_SOCKET_DEFAULT;
    c = calloc(1, sizeof *c);
    if (!c)
        return -ENOMEM;
    c->fd = -1;
    c->socket = strdup(path);
    c->chunk = malloc(CLIENT_READ_CHUNK);
    if (!c->socket || !c->chunk) {
        free(c->socket);
        free(c->chunk);
        free(c);
        return -ENOMEM;
    }
    frame_buf_init(&c->in, SANDBOXD_REPLY_MAX);
    *ret = c;
    return 0;
}

struct sandboxd_client *sandboxd_client_free(struct sandboxd_client *c)
{
    if (!c)
        return NULL;
    sandboxd_client_disconnect(c);
    client_error_clear(c);
    frame_buf_done(&c->in);
    buf_clear(&c->out, true);
    free(c->chunk);
    free(c->socket);
    free(c);
    return NULL;
}

const char *sandboxd_client_socket(const struct sandboxd_client *c)
{
    return c->socket;
}

int64_t sandboxd_client_last_id(const struct sandboxd_client *c)
{
    return c->next_id;
}

void sandboxd_client_set_notify(struct sandboxd_client *c, sandboxd_notify_fn fn, void *userdata)
{
    c->notify = fn;
    c->notify_userdata = userdata;
}

int sandboxd_client_fd(const struct sandboxd_client *c)
{
    return c->fd;
}

short sandboxd_client_events(const struct sandboxd_client *c)
{
    if (c->fd < 0)
        return 0;
    return POLLIN | (c->out.len > c->out_off ? POLLOUT : 0);
}

/* ---- closing ----------------------------------------------------------------------------- */

/* Completes call p, which failed because the connection closed for `why` after `sent` bytes
 * of it had gone out. */
static void call_lost(struct call *p, uint64_t sent, const char *why, json_object *e)
{
    struct sandboxd_error err = {.message = why, .object = e};
    json_object *v;

    if (e) {
        if (json_object_object_get_ex(e, "code", &v))
            err.code = json_object_get_int(v);
        if (json_object_object_get_ex(e, "data", &v) && v) {
            err.data = v;
            err.reason = client_obj_str(v, "reason");
        }
    }
    p->done(sent >= p->end ? -ECONNRESET : -ENOTCONN, NULL, &err, p->userdata);
}

/* Closes the connection and fails every call in flight, saying `why` (printf-like). The
 * error the daemon sent with id null before it closed, if any, goes with it. */
_printf_(2, 3) void client_close(struct sandboxd_client *c, const char *fmt, ...)
{
    _cleanup_json_ json_object *e = TAKE_PTR(c->close_error);
    _cleanup_free_ char *why = NULL, *refused = NULL;
    struct call *list = c->calls;
    uint64_t sent = c->sent;
    va_list ap;

    if (c->fd < 0)
        return;
    close(c->fd);
    c->fd = -1;
    c->calls = c->calls_tail = NULL;
    buf_clear(&c->out, false);
    c->out_off = 0;
    /* A new connection starts with fresh framing (and an overlong line forgotten). */
    frame_buf_done(&c->in);
    frame_buf_init(&c->in, SANDBOXD_REPLY_MAX);
    va_start(ap, fmt);
    if (vasprintf(&why, fmt, ap) < 0)
        why = NULL;
    va_end(ap);
    if (e) {
        json_object *data = NULL;
        const char *reason = NULL;

        if (json_object_object_get_ex(e, "data", &data))
            reason = client_obj_str(data, "reason");
        if (asprintf(&refused, "sandboxd refused the connection's input: %s",
                     reason ? reason : json_object_to_json_string(e)) < 0)
            refused = NULL;
    }
    while (list) {
        struct call *p = list;

        list = p->next;
        /* (a completion may open a new connection: c->sent is then that one's) */
        call_lost(p, sent, refused ? refused : why ? why : "the connection closed", e);
        free(p);
    }
}

void sandboxd_client_disconnect(struct sandboxd_client *c)
{
    client_close(c, "the client closed the connection");
}

/* ---- connecting -------------------------------------------------------------------------- */

int sandboxd_client_connect(struct sandboxd_client *c)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    int fd, r;

    if (c->fd >= 0)
        return 0;
    if (strlen(c->socket) >= sizeof sa.sun_path)
        return client_fail(c, -ENAMETOOLONG, "socket path too long: %s", c->socket);
    strcpy(sa.sun_path, c->socket);
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0 ||
        fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) < 0) {
        r = -errno;
        if (fd >= 0)
            close(fd);
        return client_fail(c, r, "cannot connect to %s: %s", c->socket, strerror(-r));
    }
    c->fd = fd;
    c->queued = c->sent = 0;
    return 0;
}

/* ---- reading ----------------------------------------------------------------------------- */

static struct call *call_take(struct sandboxd_client *c, int64_t id)
{
    struct call *prev = NULL;

    for (struct call *p = c->calls; p; prev = p, p = p->next)
        if (p->id == id) {
            if (prev)
                prev->next = p->next;
            else
                c->calls = p->next;
            if (c->calls_tail == p)
                c->calls_tail = prev;
            return p;
        }
    return NULL;
}

/* Handles one line from the daemon. Returns 0, or -EBADMSG when it is not JSON-RPC. */
static int client_line(struct sandboxd_client *c, const char *line)
{
    _cleanup_json_ json_object *o = json_tokener_parse(line);
    json_object *m, *id = NULL, *e = NULL, *res = NULL;
    struct call *p;

    if (!json_object_is_type(o, json_type_object))
        return -EBADMSG;
    if (json_object_object_get_ex(o, "method", &m)) {
        json_object *params = NULL;

        json_object_object_get_ex(o, "params", &params);
        if (c->notify && json_object_is_type(m, json_type_string))
            c->notify(json_object_get_string(m), params, c->notify_userdata);
        return 0;
    }
    json_object_object_get_ex(o, "id", &id);
    json_object_object_get_ex(o, "error", &e);
    if (!id && e) {
        /* Not tied to a request (a line over the daemon's limit, a connection over a
         * cap): the daemon closes the connection next, and the calls in flight get it. */
        json_object_put(c->close_error);
        c->close_error = json_object_get(e);
        return 0;
    }
    if (!json_object_is_type(id, json_type_int) || !(p = call_take(c, json_object_get_int64(id))))
        return 0; /* a reply to nothing in flight */
    if (e) {
        struct sandboxd_error err = {};

        client_error_view(e, &err);
        p->done(-EREMOTE, NULL, &err, p->userdata);
    } else {
        json_object_object_get_ex(o, "result", &res);
        p->done(0, res, NULL, p->userdata);
    }
    free(p);
    return 0;
}

/* Takes every complete line held. Returns 0, or -EBADMSG / -EMSGSIZE (the connection is
 * then closed). */
static int client_lines(struct sandboxd_client *c)
{
    for (;;) {
        char *line;
        size_t n;
        int r = frame_buf_next(&c->in, &line, &n);

        if (r == -EMSGSIZE) {
            client_close(c, "a line from sandboxd is longer than %u bytes", SANDBOXD_REPLY_MAX);
            return r;
        }
        if (r <= 0)
            return r;
        r = client_line(c, line);
        if (r < 0) {
            client_close(c, "sandboxd sent something that is not JSON-RPC");
            return r;
        }
        if (c->fd < 0)
            return -ENOTCONN; /* a callback closed it */
    }
}

/* Reads what the socket holds and handles its lines; closes the connection at its end. */
static void client_read(struct sandboxd_client *c)
{
    while (c->fd >= 0) {
        ssize_t k;
        int r;

        do
            k = recv(c->fd, c->chunk, CLIENT_READ_CHUNK, MSG_DONTWAIT);
        while (k < 0 && errno == EINTR);
        if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return;
        if (k < 0) {
            r = errno;
            if (client_lines(c) == 0)
                client_close(c, "reading from sandboxd: %s", strerror(r));
            return;
        }
        r = frame_buf_append(&c->in, c->chunk, (size_t)k);
        if (r < 0 && r != -EMSGSIZE) {
            client_close(c, "reading from sandboxd: %s", strerror(-r));
            return;
        }
        if (client_lines(c) < 0)
            return;
        if (k == 0) {
            client_close(c, "sandboxd closed the connection");
            return;
        }
    }
}

/* Before a request on an idle connection: takes in what arrived since the last reply and
 * closes a connection the daemon closed meanwhile (its idle close), so that the request goes
 * out on a new one. */
static void client_check(struct sandboxd_client *c)
{
    if (c->fd >= 0 && !c->calls)
        client_read(c);
}

/* ---- writing ----------------------------------------------------------------------------- */

/* Sends what the queue holds, as far as the socket takes it. */
static void client_flush(struct sandboxd_client *c)
{
    while (c->fd >= 0 && c->out_off < c->out.len) {
        ssize_t k = send(c->fd, c->out.data + c->out_off, c->out.len - c->out_off, MSG_NOSIGNAL);

        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return;
        if (k < 0) {
            int r = errno;

            /* The daemon may have said why it stopped reading (a line over its limit):
             * that is in the socket already. */
            client_read(c);
            client_close(c, "sending to sandboxd: %s", strerror(r));
            return;
        }
        c->out_off += (size_t)k;
        c->sent += (uint64_t)k;
    }
    if (c->out_off == c->out.len) {
        c->out_off = 0;
        buf_clear(&c->out, false);
    }
}

/* Waits until the socket takes more bytes. */
static int client_wait_writable(struct sandboxd_client *c)
{
    struct pollfd p = {.fd = c->fd, .events = POLLOUT};

    while (poll(&p, 1, -1) < 0)
        if (errno != EINTR)
            return -errno;
    return 0;
}

/* Sends the start of line with fds[0..n_fds) in one sendmsg(): the daemon ties descriptors to
 * the line they arrive with (docs/protocol.md, "Passing descriptors"). The queue is empty, so
 * that these bytes are the line's first. Returns the bytes sent or -errno. */
static ssize_t client_send_fds(struct sandboxd_client *c, const char *line, size_t len,
                               const int *fds, size_t n_fds)
{
    union {
        char buf[CMSG_SPACE(sizeof(int) * SANDBOXD_FDS_MAX)];
        struct cmsghdr align;
    } cb = {};
    struct iovec iov = {.iov_base = (void *)line, .iov_len = len};
    struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};
    struct cmsghdr *cm;

    m.msg_control = cb.buf;
    m.msg_controllen = CMSG_SPACE(sizeof(int) * n_fds);
    cm = CMSG_FIRSTHDR(&m);
    cm->cmsg_level = SOL_SOCKET;
    cm->cmsg_type = SCM_RIGHTS;
    cm->cmsg_len = CMSG_LEN(sizeof(int) * n_fds);
    memcpy(CMSG_DATA(cm), fds, sizeof(int) * n_fds);
    for (;;) {
        ssize_t k = sendmsg(c->fd, &m, MSG_NOSIGNAL);
        int r;

        if (k >= 0)
            return k;
        if (errno == EINTR)
            continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK)
            return -errno;
        r = client_wait_writable(c);
        if (r < 0)
            return r;
    }
}

/* Queues line (and sends its start with the descriptors). Returns 0, or -errno with the
 * connection closed (the calls in flight failed). */
static int client_queue(struct sandboxd_client *c, const char *line, size_t len, const int *fds,
                        size_t n_fds)
{
    ssize_t k = 0;
    int r;

    if (n_fds > 0) {
        /* Everything queued before goes first: these descriptors belong to this line. */
        while (c->fd >= 0 && c->out_off < c->out.len) {
            r = client_wait_writable(c);
            if (r < 0)
                return r;
            client_flush(c);
        }
        if (c->fd < 0)
            return -ENOTCONN;
        k = client_send_fds(c, line, len, fds, n_fds);
        if (k < 0) {
            client_read(c); /* the daemon's reason, if it gave one */
            client_close(c, "sending to sandboxd: %s", strerror((int)-k));
            return (int)k;
        }
        c->sent += (uint64_t)k;
    }
    r = buf_append(&c->out, line + k, len - (size_t)k);
    if (r < 0)
        return r;
    c->queued += len;
    return 0;
}

/* ---- calls ------------------------------------------------------------------------------- */

int sandboxd_call_start(struct sandboxd_client *c, const char *method, json_object *params,
                        const int *fds, size_t n_fds, sandboxd_done_fn done, void *userdata)
{
    _cleanup_json_ json_object *p = params;
    _cleanup_free_ char *line = NULL;
    _cleanup_free_ struct call *call = NULL;
    size_t len;
    int r;

    if (!c)
        return -EINVAL;
    client_error_clear(c);
    if (!method || !done || (n_fds > 0 && !fds))
        return client_fail(c, -EINVAL, "invalid arguments");
    if (n_fds > SANDBOXD_FDS_MAX)
        return client_fail(c, -E2BIG, "%zu descriptors with one request (at most %d)", n_fds,
                           SANDBOXD_FDS_MAX);
    call = calloc(1, sizeof *call);
    if (!call)
        return client_fail(c, -ENOMEM, "out of memory");
    *call = (struct call){.id = ++c->next_id, .done = done, .userdata = userdata};
    line = rpc_request_line(call->id, method, TAKE_PTR(p), &len);
    if (!line)
        return client_fail(c, -ENOMEM, "out of memory");
    client_check(c);
    r = sandboxd_client_connect(c);
    if (r < 0)
        return r;
    r = client_queue(c, line, len, fds, n_fds);
    if (r < 0)
        return client_fail(c, r, "sending %s: %s", method, strerror(-r));
    call->end = c->queued;
    if (c->calls_tail)
        c->calls_tail->next = call;
    else
        c->calls = call;
    c->calls_tail = TAKE_PTR(call);
    client_flush(c); /* may close the connection: the call then completes at once */
    return 0;
}

void sandboxd_client_process(struct sandboxd_client *c, short revents)
{
    if (c->fd >= 0 && (revents & POLLOUT))
        client_flush(c);
    if (c->fd >= 0 && (revents & (POLLIN | POLLHUP | POLLERR)))
        client_read(c);
}
