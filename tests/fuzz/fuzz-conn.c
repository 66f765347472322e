/* libFuzzer target over the daemon's connection state machine: daemon/conn.c with
 * the real server.c (caps, refusal) and method table (daemon.status,
 * rpc.discover, the test hooks, and two methods of this file that keep requests
 * in flight), on a private loop. The input is decoded into a sequence of client
 * actions on socketpairs whose client ends the fuzzer holds: connect (optionally
 * hanging up before the daemon sees the connection), write requests, garbage or
 * oversized lines, half-close, full close, read or not read (small buffers, so
 * output backs up and writes fail with EAGAIN or EPIPE), run the loop once,
 * advance a fake clock for the sweep, complete held requests, shut the server
 * down. Requests may carry descriptors (SCM_RIGHTS, up to more than a line may
 * hold). After every action the invariants of conn.h must hold; at the end every
 * connection is closed, every request completed, every descriptor the daemon
 * received closed, and the loop closes cleanly. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "conn.h"
#include "methods-daemon.h"
#include "methods-test.h"
#include "methods.h"
#include "macro.h"
#include "server.h"
#include "config.h"
#include "log.h"
#include "rpc.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FUZZ_CLIENTS 6
#define FUZZ_HOLDS 64
#define FUZZ_MAX_OPS 256
#define FUZZ_SOCKBUF 4096
#define FUZZ_STREAM_CHUNK 16384
#define FUZZ_GONE 64

#define CHECK(x)                                                                                   \
    do {                                                                                           \
        if (!(x)) {                                                                                \
            fprintf(stderr, "fuzz-conn: check failed: %s (line %d)\n", #x, __LINE__);              \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

/* ---- methods that keep requests in flight ---------------------------------- */

/* fuzz.hold: completes when the fuzzer releases it. On disconnect it completes
 * at once or stays until released, as the input decides (both are allowed). */
struct hold {
    struct req *req;
    bool disconnected;
};

static struct hold holds[FUZZ_HOLDS];
static bool complete_on_disconnect;

static void hold_disconnected(struct req *r, void *userdata)
{
    struct hold *h = userdata;

    CHECK(h->req == r && !h->disconnected && !req_connected(r));
    h->disconnected = true;
    if (complete_on_disconnect) {
        h->req = NULL;
        req_error(r, RPC_SHUTTING_DOWN, "cancelled");
    }
}

static void method_hold(struct req *r, void *params, void *userdata)
{
    (void)params;
    (void)userdata;
    for (size_t i = 0; i < FUZZ_HOLDS; i++)
        if (!holds[i].req) {
            holds[i] = (struct hold){.req = r};
            req_on_disconnect(r, hold_disconnected, &holds[i]);
            return;
        }
    req_error(r, RPC_BUSY, "no hold slot");
}

static void release_hold(size_t i)
{
    struct req *r = holds[i].req;

    if (!r)
        return;
    holds[i].req = NULL;
    req_reply(r, json_object_new_int64((int64_t)i));
}

/* fuzz.stream {"n": N}: N notifications of FUZZ_STREAM_CHUNK bytes, pausing while
 * the connection's output is over its high-water mark (resumed by on_drain). */
struct stream {
    struct req *req;
    int64_t left;
};

static void stream_step(struct req *r, void *userdata);

static void stream_finish(struct stream *st, bool ok)
{
    struct req *r = st->req;

    free(st);
    if (ok)
        req_reply(r, json_object_new_boolean(true));
    else
        req_error(r, RPC_SHUTTING_DOWN, "cancelled");
}

static void stream_disconnected(struct req *r, void *userdata)
{
    (void)r;
    stream_finish(userdata, false);
}

static void stream_step(struct req *r, void *userdata)
{
    static char chunk[FUZZ_STREAM_CHUNK + 1];
    struct stream *st = userdata;

    if (!chunk[0])
        memset(chunk, 'x', FUZZ_STREAM_CHUNK);
    while (st->left > 0 && !req_output_busy(r)) {
        json_object *p = json_object_new_object();

        json_object_object_add(p, "data", json_object_new_string(chunk));
        if (req_notify(r, "fuzz.data", p) < 0)
            break;
        st->left--;
    }
    if (st->left == 0 || !req_connected(r)) {
        stream_finish(st, st->left == 0);
        return;
    }
    req_on_drain(r, stream_step, st);
}

static void method_stream(struct req *r, void *raw, void *userdata)
{
    json_object *params = raw, *n = NULL;
    struct stream *st;

    (void)userdata;
    if (!params || !json_object_object_get_ex(params, "n", &n) ||
        !json_object_is_type(n, json_type_int)) {
        req_invalid_params(r, "n", "an integer is required");
        return;
    }
    st = calloc(1, sizeof *st);
    CHECK(st);
    st->req = r;
    st->left = MIN(MAX(json_object_get_int64(n), (int64_t)0), (int64_t)256);
    req_on_disconnect(r, stream_disconnected, st);
    stream_step(r, st);
}

/* fuzz.get: params parsed by the dispatch as sandbox.get's; echoes the id. */
static void method_get(struct req *r, void *params, void *userdata)
{
    const struct params_sandbox_id *p = params;

    (void)userdata;
    CHECK(p && p->id[0]);
    req_reply(r, json_object_new_string(p->id));
}

/* fuzz.admin: admin-only; runs only for root (the fuzzer's own uid may be). */
static void method_admin(struct req *r, void *params, void *userdata)
{
    (void)userdata;
    CHECK(!params && req_is_admin(r));
    req_reply(r, json_object_new_boolean(true));
}

/* The daemon's own methods and test hooks that need no daemon behind the server, and this
 * file's. */
static const struct method_def fuzz_methods[] = {
    {"daemon.status", &params_none_spec, method_daemon_status, 0},
    {"rpc.discover", &params_none_spec, method_rpc_discover, 0},
    {"test.sleep", NULL, method_test_sleep, METHOD_TEST_HOOK},
    {"test.notify", NULL, method_test_notify, METHOD_TEST_HOOK},
    {"fuzz.hold", NULL, method_hold, 0},
    {"fuzz.stream", NULL, method_stream, 0},
    {"fuzz.get", &params_sandbox_id_spec, method_get, 0},
    {"fuzz.admin", &params_none_spec, method_admin, METHOD_ADMIN},
    {},
};

/* ---- what clients send ------------------------------------------------------ */

static const char *const requests[] = {
    "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"daemon.status\"}\n",
    "{\"jsonrpc\":\"2.0\",\"id\":\"d\",\"method\":\"rpc.discover\"}\n",
    "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"fuzz.hold\"}\n",
    "{\"jsonrpc\":\"2.0\",\"method\":\"fuzz.hold\"}\n",
    "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"fuzz.stream\",\"params\":{\"n\":3}}\n",
    "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"fuzz.stream\",\"params\":{\"n\":100}}\n",
    "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"test.notify\",\"params\":{\"count\":50}}\n",
    "{\"jsonrpc\":\"2.0\",\"id\":6,\"method\":\"test.sleep\",\"params\":{\"ms\":0}}\n",
    ("[{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"fuzz.hold\"},"
     "{\"jsonrpc\":\"2.0\",\"id\":8,\"method\":\"daemon.status\"},{\"x\":1}]\n"),
    "[{\"jsonrpc\":\"2.0\",\"method\":\"daemon.status\"}]\n",
    "{\"jsonrpc\":\"2.0\",\"id\":123456789012345678901234567890,\"method\":\"daemon.status\"}\n",
    "{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"daemon.status\\u0000junk\"}\n",
    "{\"jsonrpc\":\"2.0\",\"id\":10,\"method\":\"no.such\"}\n",
    "garbage\n",
    "[]\n",
    "\n",
    "{\"jsonrpc\":\"2.0\",\"id\":11,\"meth",
    "{\"jsonrpc\":\"2.0\",\"id\":12,\"method\":\"fuzz.stream\",\"params\":{\"n\":256}}\n",
    "{\"jsonrpc\":\"2.0\",\"id\":13,\"method\":\"fuzz.get\",\"params\":{\"id\":\"sb-1\"}}\n",
    "{\"jsonrpc\":\"2.0\",\"id\":14,\"method\":\"fuzz.get\",\"params\":{\"id\":7}}\n",
    "{\"jsonrpc\":\"2.0\",\"id\":15,\"method\":\"fuzz.admin\"}\n",
};

/* ---- one run ----------------------------------------------------------------- */

struct fuzz {
    uv_loop_t loop;
    struct config cfg;
    struct server srv;
    int fds[FUZZ_CLIENTS];      /* client ends; -1 when closed */
    uint64_t ids[FUZZ_CLIENTS]; /* the connection serving each client */
    uint64_t gone[FUZZ_GONE];   /* connections whose client closed completely */
    size_t n_gone;
    uint64_t clock_ms; /* the fake clock's lead over uv_now() */
    int pipe[2];       /* the descriptors sent with requests */
    const uint8_t *p, *end;
};

/* Descriptors open in this process. */
static unsigned open_fds(void)
{
    unsigned n = 0;

    for (int fd = 0; fd < 4096; fd++)
        n += fcntl(fd, F_GETFD) >= 0;
    return n;
}

static unsigned take(struct fuzz *f)
{
    return f->p < f->end ? *f->p++ : 0;
}

static void check_invariants(struct fuzz *f)
{
    unsigned counted = 0;

    CHECK(conn_state_refusals(&f->srv.host) == 0);
    for (struct conn *c = f->srv.conns; c; c = c->next) {
        CHECK(c->state >= CONN_OPEN && c->state <= CONN_CLOSING);
        if (c->state == CONN_CLOSING)
            CHECK(!c->port.list.head && conn_inflight(c) == 0 && !c->reading && !c->counted &&
                  c->out.len == 0);
        if (c->reading)
            CHECK(c->state == CONN_OPEN && !c->eof);
        counted += c->counted;
    }
    CHECK(counted == f->srv.n_conns);
}

static void op_connect(struct fuzz *f)
{
    unsigned flags = take(f);
    int sv[2], buf = FUZZ_SOCKBUF, slot = -1;

    for (int i = 0; i < FUZZ_CLIENTS; i++)
        if (f->fds[i] < 0) {
            slot = i;
            break;
        }
    if (slot < 0 || server_stopping(&f->srv))
        return;
    CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, sv) == 0);
    if (flags & 1) {
        (void)setsockopt(sv[1], SOL_SOCKET, SO_SNDBUF, &buf, sizeof buf);
        (void)setsockopt(sv[0], SOL_SOCKET, SO_RCVBUF, &buf, sizeof buf);
    }
    if (flags & 2) {
        /* Hung up before the daemon looked at it. */
        close(sv[0]);
        sv[0] = -1;
    }
    CHECK(server_adopt(&f->srv, sv[1]) == 0);
    /* The new connection is first in the list, even if it is already closing. */
    CHECK(f->srv.conns);
    f->ids[slot] = f->srv.conns->id;
    f->fds[slot] = sv[0];
    if (sv[0] < 0 && f->n_gone < FUZZ_GONE)
        f->gone[f->n_gone++] = f->ids[slot];
}

static int pick_client(struct fuzz *f)
{
    int i = (int)(take(f) % FUZZ_CLIENTS);

    return f->fds[i];
}

static void client_write(int fd, const void *p, size_t n)
{
    if (fd >= 0)
        (void)send(fd, p, n, MSG_DONTWAIT | MSG_NOSIGNAL);
}

/* Sends p with n copies of the pipe's ends as SCM_RIGHTS (n may exceed what one line
 * may carry). */
static void client_write_fds(struct fuzz *f, int fd, const char *p, size_t len, unsigned n)
{
    union {
        char buf[CMSG_SPACE(sizeof(int) * 12)];
        struct cmsghdr align;
    } c;
    struct iovec iov = {.iov_base = (void *)p, .iov_len = len};
    struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = c.buf};
    struct cmsghdr *cm;

    if (fd < 0 || len == 0)
        return;
    n = MIN(n, 12u);
    m.msg_controllen = CMSG_SPACE(sizeof(int) * n);
    cm = CMSG_FIRSTHDR(&m);
    cm->cmsg_level = SOL_SOCKET;
    cm->cmsg_type = SCM_RIGHTS;
    cm->cmsg_len = CMSG_LEN(sizeof(int) * n);
    for (unsigned i = 0; i < n; i++)
        memcpy(CMSG_DATA(cm) + i * sizeof(int), &f->pipe[i % 2], sizeof(int));
    (void)sendmsg(fd, &m, MSG_DONTWAIT | MSG_NOSIGNAL);
}

static void op_write_request(struct fuzz *f)
{
    int fd = pick_client(f);
    unsigned which = take(f) % ELEMENTSOF(requests), times = 1 + take(f) % 8;
    unsigned n_fds = times > 4 ? take(f) % 12 : 0;

    for (unsigned i = 0; i < times; i++) {
        if (n_fds && i == 0)
            client_write_fds(f, fd, requests[which], strlen(requests[which]), n_fds);
        else
            client_write(fd, requests[which], strlen(requests[which]));
    }
}

static void op_write_bytes(struct fuzz *f)
{
    int fd = pick_client(f);
    size_t n = take(f) % 64;

    n = MIN(n, (size_t)(f->end - f->p));
    client_write(fd, f->p, n);
    f->p += n;
}

static void op_write_oversized(struct fuzz *f)
{
    static char big[4096];
    int fd = pick_client(f);
    size_t n = f->cfg.server.max_request_bytes + 1 + take(f);

    if (!big[0])
        memset(big, 'a', sizeof big);
    client_write(fd, big, MIN(n, sizeof big));
    if (take(f) & 1)
        client_write(fd, "\n", 1);
}

static void op_close(struct fuzz *f, bool half)
{
    int i = (int)(take(f) % FUZZ_CLIENTS);

    if (f->fds[i] < 0)
        return;
    if (half) {
        (void)shutdown(f->fds[i], SHUT_WR);
        return;
    }
    close(f->fds[i]);
    f->fds[i] = -1;
    if (f->n_gone < FUZZ_GONE)
        f->gone[f->n_gone++] = f->ids[i];
}

static void op_read(struct fuzz *f)
{
    char buf[8192];
    int fd = pick_client(f);
    unsigned rounds = 1 + take(f) % 16;

    for (unsigned i = 0; fd >= 0 && i < rounds; i++)
        if (recv(fd, buf, sizeof buf, MSG_DONTWAIT) <= 0)
            break;
}

static void op_tick(struct fuzz *f)
{
    static const uint64_t steps[] = {10, 500, 1000, 3000, 31000, 301000};
    uint64_t now;
    struct conn *next;

    f->clock_ms += steps[take(f) % ELEMENTSOF(steps)];
    now = uv_now(&f->loop) + f->clock_ms;
    for (struct conn *c = f->srv.conns; c; c = next) {
        next = c->next;
        conn_sweep(c, now);
    }
    /* A client that closed completely is noticed by the sweep even where the
     * daemon stopped reading (no EOF seen): none of them is left open unread. */
    for (struct conn *c = f->srv.conns; c; c = c->next)
        for (size_t i = 0; c->state == CONN_OPEN && !c->reading && i < f->n_gone; i++)
            CHECK(c->id != f->gone[i]);
}

static void op_release(struct fuzz *f)
{
    unsigned which = take(f);

    if (which == 255) {
        for (size_t i = 0; i < FUZZ_HOLDS; i++)
            release_hold(i);
        return;
    }
    release_hold(which % FUZZ_HOLDS);
}

static void op_abort_one(struct fuzz *f)
{
    unsigned k = take(f) % 8;
    struct conn *c = f->srv.conns;

    while (c && k--)
        c = c->next;
    if (c)
        conn_abort(c);
}

static void run_op(struct fuzz *f, unsigned op)
{
    switch (op % 16) {
    case 0:
    case 1:
        op_connect(f);
        break;
    case 2:
    case 3:
        op_write_request(f);
        break;
    case 4:
        op_write_bytes(f);
        break;
    case 5:
        op_write_oversized(f);
        break;
    case 6:
        op_close(f, true);
        break;
    case 7:
        op_close(f, false);
        break;
    case 8:
        op_read(f);
        break;
    case 9:
    case 10:
    case 11:
        uv_run(&f->loop, UV_RUN_NOWAIT);
        break;
    case 12:
        op_tick(f);
        break;
    case 13:
        op_release(f);
        break;
    case 14:
        if (take(f) == 0xa5)
            server_shutdown(&f->srv);
        break;
    case 15:
        op_abort_one(f);
        break;
    }
}

/* Closes everything and checks that nothing is left behind. */
static void finish(struct fuzz *f)
{
    struct conn *next;
    int i;

    for (i = 0; i < FUZZ_CLIENTS; i++)
        if (f->fds[i] >= 0)
            close(f->fds[i]);
    for (i = 0; i < 8; i++)
        uv_run(&f->loop, UV_RUN_NOWAIT);
    for (struct conn *c = f->srv.conns; c; c = next) {
        next = c->next;
        conn_abort(c);
    }
    for (size_t k = 0; k < FUZZ_HOLDS; k++)
        release_hold(k);
    for (i = 0; i < 1000 && uv_loop_alive(&f->loop); i++)
        uv_run(&f->loop, UV_RUN_NOWAIT);
    check_invariants(f);
    CHECK(f->srv.n_handles == 0 && !f->srv.conns && f->srv.n_conns == 0);
    for (size_t k = 0; k < FUZZ_HOLDS; k++)
        CHECK(!holds[k].req);
    server_done(&f->srv);
    config_done(&f->cfg);
    CHECK(uv_loop_close(&f->loop) == 0);
    close(f->pipe[0]);
    close(f->pipe[1]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static bool initialized;
    struct fuzz f = {.p = data, .end = data + size};
    unsigned ops = 0, fds_before;

    if (!initialized) {
        initialized = true;
        signal(SIGPIPE, SIG_IGN);
        log_set_max_level(getenv("FUZZ_CONN_LOG") ? LOG_DEBUG : LOG_CRIT);
        CHECK(methods_check(fuzz_methods, &(const char *){NULL}) == 0);
        /* libuv opens its process-wide descriptors with the first loop. */
        CHECK(uv_loop_init(&f.loop) == 0);
        CHECK(uv_loop_close(&f.loop) == 0);
    }
    if (size < 3)
        return 0;
    memset(holds, 0, sizeof holds);
    fds_before = open_fds();
    CHECK(pipe2(f.pipe, O_CLOEXEC) == 0);
    CHECK(uv_loop_init(&f.loop) == 0);
    CHECK(config_init(&f.cfg) == 0);
    /* Byte 0: caps small enough to be reached; byte 1: the disconnect policy. */
    f.cfg.server.max_connections = 2 + take(&f) % 4;
    f.cfg.server.max_connections_per_uid = 1 + f.cfg.server.max_connections % 3;
    f.cfg.server.max_inflight_per_connection = 1 + take(&f) % 4;
    f.cfg.server.max_request_bytes = 1024;
    complete_on_disconnect = take(&f) & 1;
    CHECK(server_init(&f.srv, &(struct server_params){.loop = &f.loop,
                                                      .config = &f.cfg,
                                                      .methods = {fuzz_methods, true}}) == 0);
    for (int i = 0; i < FUZZ_CLIENTS; i++)
        f.fds[i] = -1;

    while (f.p < f.end && ops++ < FUZZ_MAX_OPS) {
        run_op(&f, take(&f));
        check_invariants(&f);
    }
    finish(&f);
    /* Every descriptor received with a request was closed. */
    CHECK(open_fds() == fds_before);
    return 0;
}
