#include "conn.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "lib/log.h"
#include "lib/macro.h"
#include "methods.h"
#include "proto/rpc.h"
#include "server.h"

#define COMP "conn"

/* A batch is answered as one array once every entry has completed. */
struct batch {
    json_object *replies; /* array */
    unsigned pending;
};

struct req {
    struct conn *conn; /* NULL once the client is gone */
    struct server *server;
    struct batch *batch;
    json_object *id;      /* owned; NULL for a notification or id null */
    json_object *request; /* owned: keeps method and params alive */
    json_object *params;  /* borrowed from request */
    const char *method;   /* points into request */
    bool notification;
    uid_t uid;
    gid_t gid;
    pid_t pid;
    req_event_cb on_disconnect;
    void *disconnect_data;
    req_event_cb on_drain;
    void *drain_data;
    uint64_t drain_pass; /* the connection's drain pass when on_drain was armed */
    struct req *prev, *next;
};

struct wreq {
    uv_write_t w;
    struct conn *conn;
    size_t len;
    char data[];
};

static const char *const conn_state_names[] = {
    [CONN_OPEN] = "open",
    [CONN_DRAINING] = "draining",
    [CONN_CLOSING] = "closing",
    [CONN_CLOSED] = "closed",
};

/* One read buffer for every connection: libuv calls alloc and read back to back
 * on the loop thread, and the bytes are copied into the frame buffer at once. */
static char read_buffer[CONN_READ_CHUNK];

static void conn_process(struct conn *c);
static void conn_update(struct conn *c);
static void conn_flush(struct conn *c);

/* Transitions the setter refused since the process started (tests and the fuzz
 * target check that it stays 0). */
static unsigned conn_refused;

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
        conn_refused++;
        log_error(COMP, "#%" PRIu64 " uid=%u: refusing state change %s -> %s", c->id,
                  (unsigned)c->uid, conn_state_name(c->state), conn_state_name(state));
        return -EINVAL;
    }
    log_debug(COMP, "#%" PRIu64 " uid=%u: %s -> %s", c->id, (unsigned)c->uid,
              conn_state_name(c->state), conn_state_name(state));
    c->state = state;
    return 0;
}

unsigned conn_state_refusals(void)
{
    return conn_refused;
}

size_t conn_output_bytes(const struct conn *c)
{
    return c->wlen + c->out_queued;
}

static unsigned max_inflight(const struct conn *c)
{
    return c->server->config->server.max_inflight_per_connection;
}

static void conn_read_stop(struct conn *c)
{
    if (!c->reading)
        return;
    (void)uv_read_stop((uv_stream_t *)&c->pipe);
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
    if (c->inflight > 0)
        log_info(COMP, "#%" PRIu64 " uid=%u: client gone with %u request(s) in flight, cancelling",
                 c->id, (unsigned)c->uid, c->inflight);
    c->wlen = 0;
    conn_close(c);
    return true;
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    *buf = uv_buf_init(read_buffer, sizeof read_buffer);
}

static void on_read(uv_stream_t *stream, ssize_t nread, const uv_buf_t *buf)
{
    struct conn *c = stream->data;
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
    c->last_activity = uv_now(c->server->loop);
    r = frame_buf_append(&c->in, buf->base, (size_t)nread);
    if (r == -EMSGSIZE) {
        log_debug(COMP, "#%" PRIu64 ": request line over %zu bytes", c->id, c->in.max_line);
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

static void on_write(uv_write_t *w, int status)
{
    struct wreq *wr = container_of(w, struct wreq, w);
    struct conn *c = wr->conn;

    c->out_queued -= wr->len;
    c->n_writes--;
    free(wr);
    if (status < 0) {
        if (c->state < CONN_CLOSING)
            log_debug(COMP, "#%" PRIu64 ": write: %s", c->id, uv_strerror(status));
        conn_close(c);
        return;
    }
    /* Progress: the stalled-writer deadline counts from the last completed write. */
    c->write_since = c->n_writes ? uv_now(c->server->loop) : 0;
    conn_flush(c);
    conn_update(c);
    if (c->state == CONN_OPEN && !c->in_process)
        conn_process(c);
}

/* Hands buffered output to the socket: directly when nothing is queued, else as
 * one uv_write. */
static void conn_flush(struct conn *c)
{
    size_t off = 0;

    if (c->wlen == 0 || c->state >= CONN_CLOSING)
        return;
    if (c->n_writes == 0) {
        uv_buf_t b = uv_buf_init(c->wbuf, (unsigned)c->wlen);
        int n = uv_try_write((uv_stream_t *)&c->pipe, &b, 1);

        if (n > 0)
            off = (size_t)n;
        else if (n < 0 && n != UV_EAGAIN) {
            log_debug(COMP, "#%" PRIu64 ": write: %s", c->id, uv_strerror(n));
            c->wlen = 0;
            conn_close(c);
            return;
        }
    }
    if (off < c->wlen) {
        size_t rest = c->wlen - off;
        struct wreq *wr = malloc(sizeof *wr + rest);
        uv_buf_t b;
        int r;

        if (!wr) {
            c->wlen = 0;
            conn_close(c);
            return;
        }
        wr->conn = c;
        wr->len = rest;
        memcpy(wr->data, c->wbuf + off, rest);
        b = uv_buf_init(wr->data, (unsigned)rest);
        r = uv_write(&wr->w, (uv_stream_t *)&c->pipe, &b, 1, on_write);
        if (r < 0) {
            free(wr);
            c->wlen = 0;
            conn_close(c);
            return;
        }
        c->out_queued += rest;
        if (c->n_writes++ == 0)
            c->write_since = uv_now(c->server->loop);
    }
    c->wlen = 0;
    if (c->wcap > CONN_OUTPUT_LOW) {
        free(c->wbuf);
        c->wbuf = NULL;
        c->wcap = 0;
    }
}

static int conn_queue(struct conn *c, const char *data, size_t len)
{
    if (c->wlen + len > c->wcap) {
        size_t cap = MAX(c->wcap * 2, MAX(c->wlen + len, (size_t)4096));
        char *p = realloc(c->wbuf, cap);

        if (!p)
            return -ENOMEM;
        c->wbuf = p;
        c->wcap = cap;
    }
    memcpy(c->wbuf + c->wlen, data, len);
    c->wlen += len;
    return 0;
}

/* Serialises and queues one message (taken over). */
static int conn_send(struct conn *c, json_object *o)
{
    _cleanup_json_ json_object *msg = o;
    _cleanup_free_ char *line = NULL;
    size_t len;
    int r;

    if (!msg)
        return -ENOMEM;
    if (c->state >= CONN_CLOSING)
        return -ENOTCONN;
    line = rpc_to_line(msg, &len);
    if (!line)
        return -ENOMEM;
    r = conn_queue(c, line, len);
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
    uint64_t pass = c->drain_pass++;
    bool again = true;

    /* A callback may complete its request and so change the list: rescan. */
    while (again && c->state < CONN_CLOSING) {
        again = false;
        for (struct req *r = c->reqs; r; r = r->next) {
            if (r->on_drain && r->drain_pass <= pass) {
                req_event_cb cb = r->on_drain;

                r->on_drain = NULL;
                cb(r, r->drain_data);
                again = true;
                break;
            }
        }
    }
}

/* Computes read interest and closing from the state. */
static void conn_update(struct conn *c)
{
    size_t out = conn_output_bytes(c);
    bool want;

    if (c->state == CONN_DRAINING) {
        if (out == 0)
            conn_close(c);
        return;
    }
    if (c->state != CONN_OPEN)
        return;
    if ((c->eof || server_stopping(c->server)) && c->inflight == 0 && out == 0 && !c->in_process) {
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
    want = !c->eof && c->inflight < max_inflight(c) && !c->out_paused;
    if (want && !c->reading) {
        if (uv_read_start((uv_stream_t *)&c->pipe, on_alloc, on_read) == 0)
            c->reading = true;
    } else if (!want && c->reading) {
        conn_read_stop(c);
    }
}

static void req_free(struct req *r)
{
    json_object_put(r->id);
    json_object_put(r->request);
    free(r);
}

static void req_unlink(struct req *r)
{
    struct conn *c = r->conn;

    if (!c)
        return;
    if (r->prev)
        r->prev->next = r->next;
    else
        c->reqs = r->next;
    if (r->next)
        r->next->prev = r->prev;
    r->prev = r->next = NULL;
    c->inflight--;
    r->conn = NULL;
}

/* Completes a request with a response (taken over; NULL for none). */
static void req_complete(struct req *r, json_object *response)
{
    struct conn *c = r->conn;
    struct batch *b = r->batch;
    struct server *s = r->server;

    req_unlink(r);
    if (r->notification) {
        json_object_put(response);
        response = NULL;
    }
    if (b) {
        if (response)
            json_object_array_add(b->replies, response);
        if (--b->pending == 0) {
            if (c && json_object_array_length(b->replies) > 0)
                (void)conn_send(c, json_object_get(b->replies));
            json_object_put(b->replies);
            free(b);
        }
    } else if (response) {
        if (c)
            (void)conn_send(c, response);
        else
            json_object_put(response);
    }
    req_free(r);
    if (c && c->state < CONN_CLOSING) {
        c->last_activity = uv_now(s->loop);
        if (!c->in_process)
            conn_process(c);
    }
    if (server_stopping(s))
        server_maybe_finish(s);
}

static void dispatch_call(struct conn *c, struct rpc_call *call, struct batch *b)
{
    struct req *r;
    method_handler_t h;

    if (call->error) {
        if (b)
            json_object_array_add(b->replies, json_object_get(call->error));
        else
            (void)conn_send(c, json_object_get(call->error));
        return;
    }
    /* A request is only attached to an open connection: a closing one has
     * already detached its requests and is freed once its handle is closed. */
    if (c->state != CONN_OPEN)
        return;
    r = calloc(1, sizeof *r);
    if (!r) {
        if (!call->notification)
            (void)conn_send(c, rpc_error_reason_new(call->id, RPC_INTERNAL_ERROR, "out of memory"));
        return;
    }
    r->conn = c;
    r->server = c->server;
    r->batch = b;
    r->id = call->id ? json_object_get(call->id) : NULL;
    r->request = json_object_get(call->request);
    r->params = call->params;
    r->method = call->method;
    r->notification = call->notification;
    r->uid = c->uid;
    r->gid = c->gid;
    r->pid = c->pid;
    r->next = c->reqs;
    if (c->reqs)
        c->reqs->prev = r;
    c->reqs = r;
    c->inflight++;
    if (b)
        b->pending++;

    if (server_stopping(c->server)) {
        req_error(r, RPC_SHUTTING_DOWN, "the daemon is shutting down");
        return;
    }
    h = methods_find(r->method);
    if (!h) {
        json_object *data = json_object_new_object();

        json_object_object_add(data, "reason", json_object_new_string("unknown method"));
        json_object_object_add(data, "method", json_object_new_string(r->method));
        req_error_data(r, RPC_METHOD_NOT_FOUND, NULL, data);
        return;
    }
    h(r, r->params);
}

static void dispatch_line(struct conn *c, const char *line, size_t len)
{
    struct rpc_message m;
    struct batch *b = NULL;
    int r;

    /* Blank lines (keep-alives, a trailing "\r\n") are ignored. */
    if (len == 0 || (len == 1 && line[0] == '\r'))
        return;
    r = rpc_parse(line, len, &m);
    if (r < 0) {
        rpc_message_done(&m);
        conn_fail(c, RPC_INTERNAL_ERROR, "out of memory");
        return;
    }
    if (m.error) {
        (void)conn_send(c, json_object_get(m.error));
        rpc_message_done(&m);
        return;
    }
    if (m.batch) {
        b = calloc(1, sizeof *b);
        if (b)
            b->replies = json_object_new_array();
        if (!b || !b->replies) {
            free(b);
            rpc_message_done(&m);
            conn_fail(c, RPC_INTERNAL_ERROR, "out of memory");
            return;
        }
        b->pending = 1; /* held until every entry is dispatched */
    }
    for (size_t i = 0; i < m.n_calls; i++)
        dispatch_call(c, &m.calls[i], b);
    rpc_message_done(&m);
    if (b && --b->pending == 0) {
        if (json_object_array_length(b->replies) > 0)
            (void)conn_send(c, json_object_get(b->replies));
        json_object_put(b->replies);
        free(b);
    }
}

/* Takes complete lines while the caps allow, then flushes and recomputes interest. */
static void conn_process(struct conn *c)
{
    if (c->in_process)
        return;
    c->in_process = true;
    while (c->state == CONN_OPEN && c->inflight < max_inflight(c) &&
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
        dispatch_line(c, line, len);
    }
    c->in_process = false;
    conn_flush(c);
    conn_update(c);
}

static void on_close(uv_handle_t *h)
{
    struct conn *c = h->data;

    conn_set_state(c, CONN_CLOSED);
    frame_buf_done(&c->in);
    free(c->wbuf);
    server_conn_closed(c->server, c);
    free(c);
}

static void conn_detach_requests(struct conn *c)
{
    struct req *r;

    while ((r = c->reqs)) {
        req_event_cb cb = r->on_disconnect;

        req_unlink(r);
        r->on_drain = NULL;
        r->on_disconnect = NULL;
        if (cb)
            cb(r, r->disconnect_data);
    }
}

void conn_close(struct conn *c)
{
    if (c->state >= CONN_CLOSING)
        return;
    conn_read_stop(c);
    /* CLOSING is entered once, so uv_close() is called once. */
    if (conn_set_state(c, CONN_CLOSING) < 0)
        return;
    c->wlen = 0;
    server_conn_uncount(c->server, c);
    uv_close((uv_handle_t *)&c->pipe, on_close);
    /* The callbacks may complete their requests, which are detached first: none
     * of them reaches this connection again. */
    conn_detach_requests(c);
}

void conn_sweep(struct conn *c, uint64_t now)
{
    const struct server_limits *l = &c->server->limits;

    if (c->state >= CONN_CLOSING)
        return;
    if (c->n_writes > 0 && now - c->write_since >= l->write_stall_ms) {
        log_info(COMP, "#%" PRIu64 " uid=%u: client does not read its replies, closing", c->id,
                 (unsigned)c->uid);
        conn_close(c);
        return;
    }
    /* While reading is stopped (EOF seen, in-flight cap reached, output paused,
     * draining) a hang-up would go unnoticed: poll for it. */
    if (!c->reading && conn_check_hangup(c))
        return;
    if (c->state == CONN_OPEN && c->inflight == 0 && conn_output_bytes(c) == 0 &&
        now - c->last_activity >= l->idle_timeout_ms) {
        log_debug(COMP, "#%" PRIu64 ": idle, closing", c->id);
        conn_close(c);
    }
}

void conn_shutdown(struct conn *c)
{
    conn_update(c);
}

void conn_abort(struct conn *c)
{
    conn_close(c);
}

static void on_close_unaccepted(uv_handle_t *h)
{
    free(h->data);
}

static int conn_new(struct server *s, struct conn **ret)
{
    static uint64_t next_id = 1;
    struct conn *c;
    int r;

    c = calloc(1, sizeof *c);
    if (!c)
        return -ENOMEM;
    c->server = s;
    c->id = next_id++;
    r = uv_pipe_init(s->loop, &c->pipe, 0);
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
    struct server *s = c->server;
    struct ucred cred;
    socklen_t len = sizeof cred;
    uv_os_fd_t fd;
    int r;

    r = uv_fileno((uv_handle_t *)&c->pipe, &fd);
    if (r == 0 && getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0)
        r = -errno;
    if (r < 0) {
        uv_close((uv_handle_t *)&c->pipe, on_close_unaccepted);
        return r;
    }
    c->uid = cred.uid;
    c->gid = cred.gid;
    c->pid = cred.pid;
    frame_buf_init(&c->in, s->config->server.max_request_bytes);
    c->last_activity = uv_now(s->loop);
    c->state = CONN_OPEN; /* the initial state, not a transition */
    *ret = c;
    return 0;
}

int conn_accept(struct server *s, uv_stream_t *listener, struct conn **ret)
{
    struct conn *c;
    int r;

    r = conn_new(s, &c);
    if (r < 0)
        return r;
    r = uv_accept(listener, (uv_stream_t *)&c->pipe);
    if (r < 0) {
        uv_close((uv_handle_t *)&c->pipe, on_close_unaccepted);
        return r;
    }
    return conn_setup(c, ret);
}

int conn_adopt(struct server *s, int fd, struct conn **ret)
{
    struct conn *c;
    int r;

    r = conn_new(s, &c);
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
    log_debug(COMP, "#%" PRIu64 ": accepted uid=%u gid=%u pid=%d", c->id, (unsigned)c->uid,
              (unsigned)c->gid, (int)c->pid);
    conn_update(c);
}

/* --- methods.h: the request context --- */

uid_t req_uid(const struct req *r)
{
    return r->uid;
}

gid_t req_gid(const struct req *r)
{
    return r->gid;
}

pid_t req_pid(const struct req *r)
{
    return r->pid;
}

const char *req_method(const struct req *r)
{
    return r->method;
}

json_object *req_id(const struct req *r)
{
    return r->id;
}

bool req_is_notification(const struct req *r)
{
    return r->notification;
}

struct server *req_server(const struct req *r)
{
    return r->server;
}

uv_loop_t *req_loop(const struct req *r)
{
    return r->server->loop;
}

const struct config *req_config(const struct req *r)
{
    return r->server->config;
}

bool req_connected(const struct req *r)
{
    return r->conn && r->conn->state == CONN_OPEN;
}

void req_on_disconnect(struct req *r, req_event_cb cb, void *userdata)
{
    r->on_disconnect = cb;
    r->disconnect_data = userdata;
}

void req_on_drain(struct req *r, req_event_cb cb, void *userdata)
{
    r->on_drain = cb;
    r->drain_data = userdata;
    r->drain_pass = r->conn ? r->conn->drain_pass : 0;
}

bool req_output_busy(const struct req *r)
{
    return r->conn && conn_output_bytes(r->conn) > CONN_OUTPUT_HIGH;
}

void req_reply(struct req *r, json_object *result)
{
    req_complete(r, r->notification || !r->conn ? (json_object_put(result), NULL)
                                                : rpc_result_new(r->id, result));
}

void req_error_data(struct req *r, int code, const char *message, json_object *data)
{
    if (r->notification || !r->conn) {
        json_object_put(data);
        req_complete(r, NULL);
        return;
    }
    req_complete(r, rpc_error_new(r->id, code, message ? message : rpc_code_message(code), data));
}

void req_error(struct req *r, int code, const char *reason)
{
    if (r->notification || !r->conn) {
        req_complete(r, NULL);
        return;
    }
    req_complete(r, rpc_error_reason_new(r->id, code, reason));
}

void req_invalid_params(struct req *r, const char *param, const char *reason)
{
    if (r->notification || !r->conn) {
        req_complete(r, NULL);
        return;
    }
    req_complete(r, rpc_invalid_params_new(r->id, param, reason));
}

int req_notify(struct req *r, const char *method, json_object *params)
{
    if (!r->conn || r->conn->state != CONN_OPEN) {
        json_object_put(params);
        return -ENOTCONN;
    }
    if (conn_output_bytes(r->conn) > CONN_OUTPUT_HARD) {
        json_object_put(params);
        return -ENOBUFS;
    }
    return conn_send(r->conn, rpc_notification_new(method, params));
}
