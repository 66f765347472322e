/* The C client library of sandboxd: the connection, its framing (proto's frame_buf) and
 * synchronous calls. See sandboxd-client.h.
 *
 * The socket stays blocking: a call sends its line, then reads until its reply, polling
 * only when the caller gave wait hooks. Before each request whatever arrived since the last
 * reply is taken in, so that a connection the daemon closed meanwhile (idle close, restart)
 * is noticed and replaced before the request goes out, not after. */
#include "sandboxd-client.h"

#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "api-limits.h"
#include "frame.h"
#include "json-util.h"
#include "macro.h"
#include "rpc.h"

#define CLIENT_READ_CHUNK (256u * 1024) /* bytes per recv(2) */
#define CLIENT_CLOSE_WAIT_MS 2000       /* after a failed send: for the daemon's reason */

_Static_assert(SANDBOXD_FDS_MAX == REQ_FDS_MAX, "the public cap is the daemon's");

struct sandboxd_client {
    char *socket;
    int fd; /* -1: not connected */
    int64_t next_id;
    struct frame_buf in;
    char *chunk; /* CLIENT_READ_CHUNK bytes for recv(2) */
    sandboxd_notify_fn notify;
    void *notify_userdata;
    /* An error the daemon sent with id null (a line over its limit, a connection over a
     * cap): it closes the connection next, and the call in flight fails with it. */
    json_object *close_error;
    bool failed;          /* the last call failed: err is valid */
    json_object *err_obj; /* the daemon's error object behind err */
    char *err_text;       /* the text behind err.message for a local failure */
    struct sandboxd_error err;
};

/* ---- failures ---------------------------------------------------------------------- */

static void client_error_clear(struct sandboxd_client *c)
{
    json_object_put(c->err_obj);
    free(c->err_text);
    c->err_obj = NULL;
    c->err_text = NULL;
    c->err = (struct sandboxd_error){};
    c->failed = false;
}

/* Records a local failure described by fmt; returns r. */
_printf_(3, 4) static int client_fail(struct sandboxd_client *c, int r, const char *fmt, ...)
{
    va_list ap;

    client_error_clear(c);
    va_start(ap, fmt);
    if (vasprintf(&c->err_text, fmt, ap) < 0)
        c->err_text = NULL;
    va_end(ap);
    c->err.message = c->err_text ? c->err_text : "out of memory";
    c->failed = true;
    return r;
}

static const char *obj_str(json_object *o, const char *key)
{
    json_object *v;

    if (!json_object_is_type(o, json_type_object) || !json_object_object_get_ex(o, key, &v) ||
        !json_object_is_type(v, json_type_string))
        return NULL;
    return json_object_get_string(v);
}

/* Records the daemon's error object e (a reference is taken); returns -EREMOTE. */
static int client_fail_remote(struct sandboxd_client *c, json_object *e)
{
    json_object *v;

    client_error_clear(c);
    c->err_obj = json_object_get(e);
    c->err.object = e;
    if (json_object_object_get_ex(e, "code", &v))
        c->err.code = json_object_get_int(v);
    c->err.message = obj_str(e, "message");
    if (!c->err.message)
        c->err.message = "error";
    if (json_object_object_get_ex(e, "data", &v) && v) {
        c->err.data = v;
        c->err.reason = obj_str(v, "reason");
    }
    c->failed = true;
    return -EREMOTE;
}

const struct sandboxd_error *sandboxd_client_error(const struct sandboxd_client *c)
{
    return c && c->failed ? &c->err : NULL;
}

/* ---- the client and its connection -------------------------------------------------- */

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
        sandboxd_client_free(c);
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
    free(c->chunk);
    free(c->socket);
    free(c);
    return NULL;
}

const char *sandboxd_client_socket(const struct sandboxd_client *c)
{
    return c->socket;
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

void sandboxd_client_disconnect(struct sandboxd_client *c)
{
    if (c->fd >= 0)
        close(c->fd);
    c->fd = -1;
    /* A new connection starts with fresh framing (and an overlong line forgotten). */
    frame_buf_done(&c->in);
    frame_buf_init(&c->in, SANDBOXD_REPLY_MAX);
    json_object_put(c->close_error);
    c->close_error = NULL;
}

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
    if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
        r = -errno;
        if (fd >= 0)
            close(fd);
        return client_fail(c, r, "cannot connect to %s: %s", c->socket, strerror(-r));
    }
    sandboxd_client_disconnect(c);
    c->fd = fd;
    return 0;
}

/* ---- reading ------------------------------------------------------------------------ */

/* One recv(2) into the framing. Returns the bytes read, 0 at the end, or -errno
 * (-EAGAIN with MSG_DONTWAIT when nothing is there). */
static ssize_t client_fill(struct sandboxd_client *c, int flags)
{
    ssize_t k;
    int r;

    do
        k = recv(c->fd, c->chunk, CLIENT_READ_CHUNK, flags);
    while (k < 0 && errno == EINTR);
    if (k < 0)
        return errno == EWOULDBLOCK ? -EAGAIN : -errno;
    r = frame_buf_append(&c->in, c->chunk, (size_t)k);
    return r < 0 ? r : k;
}

/* Handles one line from the daemon. Returns 1 with *ret_result set when it is the result
 * of request id, -EREMOTE when it is its error, 0 for anything else (a notification, a
 * reply to an abandoned request), -EBADMSG when it is not JSON-RPC. */
static int client_line(struct sandboxd_client *c, const char *line, int64_t id,
                       json_object **ret_result)
{
    _cleanup_json_ json_object *o = json_tokener_parse(line);
    json_object *m, *rid = NULL, *e = NULL, *res = NULL;

    if (!json_object_is_type(o, json_type_object))
        return -EBADMSG;
    if (json_object_object_get_ex(o, "method", &m)) {
        json_object *params = NULL;

        json_object_object_get_ex(o, "params", &params);
        if (c->notify && json_object_is_type(m, json_type_string))
            c->notify(json_object_get_string(m), params, c->notify_userdata);
        return 0;
    }
    json_object_object_get_ex(o, "id", &rid);
    json_object_object_get_ex(o, "error", &e);
    if (!rid && e) {
        json_object_put(c->close_error);
        c->close_error = json_object_get(e);
        return 0;
    }
    if (!json_object_is_type(rid, json_type_int) || json_object_get_int64(rid) != id)
        return 0;
    if (e)
        return client_fail_remote(c, e);
    json_object_object_get_ex(o, "result", &res);
    *ret_result = json_object_get(res);
    return 1;
}

/* Takes every complete line held: like client_line(), for request id (0: none). */
static int client_lines(struct sandboxd_client *c, int64_t id, json_object **ret_result)
{
    for (;;) {
        char *line;
        size_t n;
        int r = frame_buf_next(&c->in, &line, &n);

        if (r == -EMSGSIZE)
            return client_fail(c, r, "a line from sandboxd is longer than %u bytes",
                               SANDBOXD_REPLY_MAX);
        if (r <= 0)
            return r;
        r = client_line(c, line, id, ret_result);
        if (r == -EBADMSG)
            return client_fail(c, r, "sandboxd sent something that is not JSON-RPC");
        if (r != 0)
            return r;
    }
}

/* Before a request: takes in what arrived since the last reply and closes a connection
 * the daemon closed meanwhile (the next request then opens a new one). */
static void client_check(struct sandboxd_client *c)
{
    while (c->fd >= 0) {
        ssize_t k = client_fill(c, MSG_DONTWAIT);

        if (k == -EAGAIN)
            return;
        if (k <= 0 || client_lines(c, 0, NULL) < 0)
            sandboxd_client_disconnect(c);
    }
}

/* Waits until the connection is readable, running w meanwhile. */
static int client_poll(struct sandboxd_client *c, const struct sandboxd_wait *w)
{
    for (;;) {
        struct pollfd p[1 + SANDBOXD_FDS_MAX] = {{.fd = c->fd, .events = POLLIN}};
        size_t n = MIN(w->n_fds, (size_t)SANDBOXD_FDS_MAX);
        int k;

        for (size_t i = 0; i < n; i++)
            p[1 + i] = (struct pollfd){.fd = w->fds[i], .events = POLLIN};
        k = poll(p, 1 + n, w->tick && w->tick_ms ? (int)w->tick_ms : -1);
        if (k < 0 && errno != EINTR)
            return -errno;
        for (size_t i = 0; k > 0 && i < n; i++)
            if (p[1 + i].revents && w->on_fd)
                w->on_fd(w->userdata, i);
        if (w->tick && w->tick_ms)
            w->tick(w->userdata);
        if (k > 0 && p[0].revents)
            return 0;
    }
}

/* Reads until the reply to request id. */
static int client_wait(struct sandboxd_client *c, const char *method, int64_t id,
                       const struct sandboxd_wait *w, json_object **ret_result)
{
    for (;;) {
        ssize_t k;
        int r = client_lines(c, id, ret_result);

        if (r > 0)
            return 0;
        if (r < 0) {
            if (r != -EREMOTE)
                sandboxd_client_disconnect(c); /* the stream cannot be trusted any more */
            return r;
        }
        if (w) {
            r = client_poll(c, w);
            if (r < 0)
                return client_fail(c, r, "waiting for the reply to %s: %s", method, strerror(-r));
        }
        k = client_fill(c, 0);
        if (k > 0 || k == -EAGAIN)
            continue;
        if (c->close_error) {
            _cleanup_json_ json_object *e = TAKE_PTR(c->close_error);

            sandboxd_client_disconnect(c);
            return client_fail_remote(c, e);
        }
        sandboxd_client_disconnect(c);
        if (k == 0 || k == -ECONNRESET)
            return client_fail(c, -ECONNRESET,
                               "sandboxd closed the connection while %s ran (it stopped, "
                               "restarted or closed the connection): it may or may not have "
                               "taken effect",
                               method);
        return client_fail(c, (int)k, "reading the reply to %s: %s", method, strerror((int)-k));
    }
}

/* ---- sending ------------------------------------------------------------------------ */

static int send_all(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t k = send(fd, p, n, MSG_NOSIGNAL);

        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0)
            return -errno;
        p += k;
        n -= (size_t)k;
    }
    return 0;
}

/* Sends the line with fds[0..n_fds) in one sendmsg(): the daemon ties descriptors to the
 * line they arrive with (docs/protocol.md, "Passing descriptors"). */
static int client_send(struct sandboxd_client *c, const char *line, size_t len, const int *fds,
                       size_t n_fds)
{
    union {
        char buf[CMSG_SPACE(sizeof(int) * SANDBOXD_FDS_MAX)];
        struct cmsghdr align;
    } cb = {};
    struct iovec iov = {.iov_base = (void *)line, .iov_len = len};
    struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};
    struct cmsghdr *cm;
    ssize_t k;

    if (n_fds == 0)
        return send_all(c->fd, line, len);
    m.msg_control = cb.buf;
    m.msg_controllen = CMSG_SPACE(sizeof(int) * n_fds);
    cm = CMSG_FIRSTHDR(&m);
    cm->cmsg_level = SOL_SOCKET;
    cm->cmsg_type = SCM_RIGHTS;
    cm->cmsg_len = CMSG_LEN(sizeof(int) * n_fds);
    memcpy(CMSG_DATA(cm), fds, sizeof(int) * n_fds);
    do
        k = sendmsg(c->fd, &m, MSG_NOSIGNAL);
    while (k < 0 && errno == EINTR);
    if (k < 0)
        return -errno;
    /* The rest of a long line (no descriptors with it). */
    return (size_t)k < len ? send_all(c->fd, line + k, len - (size_t)k) : 0;
}

/* After a failed send: what the daemon still says before its close (an error with id null
 * that tells why it stopped reading), for at most CLIENT_CLOSE_WAIT_MS. */
static void client_drain(struct sandboxd_client *c)
{
    struct pollfd p = {.fd = c->fd, .events = POLLIN};

    while (!c->close_error && poll(&p, 1, CLIENT_CLOSE_WAIT_MS) > 0) {
        ssize_t k = client_fill(c, MSG_DONTWAIT);

        if (k == -EAGAIN)
            continue;
        if (k <= 0 || client_lines(c, 0, NULL) < 0)
            break;
    }
}

/* Sends the request line, on a new connection when the daemon closed the old one before
 * any of it was taken. */
static int client_request(struct sandboxd_client *c, const char *method, const char *line,
                          size_t len, const int *fds, size_t n_fds)
{
    for (unsigned attempt = 0;; attempt++) {
        int r;

        client_check(c);
        r = sandboxd_client_connect(c);
        if (r < 0)
            return r;
        r = client_send(c, line, len, fds, n_fds);
        if (r >= 0)
            return 0;
        /* The daemon never runs a partial line: nothing of this request ran. */
        client_drain(c);
        if (c->close_error) {
            _cleanup_json_ json_object *e = TAKE_PTR(c->close_error);

            sandboxd_client_disconnect(c);
            return client_fail_remote(c, e);
        }
        sandboxd_client_disconnect(c);
        if (attempt > 0 || (r != -EPIPE && r != -ECONNRESET))
            return client_fail(c, r, "sending %s: %s", method, strerror(-r));
    }
}

int sandboxd_call_wait(struct sandboxd_client *c, const char *method, json_object *params,
                       const int *fds, size_t n_fds, const struct sandboxd_wait *w,
                       json_object **ret_result)
{
    _cleanup_json_ json_object *p = params;
    _cleanup_free_ char *line = NULL;
    json_object *result = NULL;
    int64_t id;
    size_t len;
    int r;

    if (!c)
        return -EINVAL;
    client_error_clear(c);
    if (!method || !ret_result || (n_fds > 0 && !fds))
        return client_fail(c, -EINVAL, "invalid arguments");
    if (n_fds > SANDBOXD_FDS_MAX)
        return client_fail(c, -E2BIG, "%zu descriptors with one request (at most %d)", n_fds,
                           SANDBOXD_FDS_MAX);
    id = ++c->next_id;
    line = rpc_request_line(id, method, TAKE_PTR(p), &len);
    if (!line)
        return client_fail(c, -ENOMEM, "out of memory");
    r = client_request(c, method, line, len, fds, n_fds);
    if (r < 0)
        return r;
    r = client_wait(c, method, id, w, &result);
    if (r < 0)
        return r;
    *ret_result = result;
    return 0;
}

int sandboxd_call_fds(struct sandboxd_client *c, const char *method, json_object *params,
                      const int *fds, size_t n_fds, json_object **ret_result)
{
    return sandboxd_call_wait(c, method, params, fds, n_fds, NULL, ret_result);
}

int sandboxd_call(struct sandboxd_client *c, const char *method, json_object *params,
                  json_object **ret_result)
{
    return sandboxd_call_wait(c, method, params, NULL, 0, NULL, ret_result);
}
