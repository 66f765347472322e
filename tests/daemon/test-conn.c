/* daemon/conn.c with the real server.c and method table on a private loop, over
 * socketpairs: the forward-only state setter, and the close paths where a client
 * that hangs up at the wrong moment used to get its handle closed twice or go
 * unnoticed. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "admin.h"
#include "conn.h"
#include "methods-daemon.h"
#include "methods.h"
#include "server.h"
#include "config.h"
#include "log.h"
#include "rpc.h"
#include "tests/check-util.h"

#define MAX_HOLDS 16

static uv_loop_t loop;
static struct config cfg;
static struct server srv;

/* test.hold: stays in flight until released or until the client is gone. */
static struct req *holds[MAX_HOLDS];
static unsigned n_holds, n_cancelled;

static void hold_disconnected(struct req *r, void *userdata)
{
    size_t i = (size_t)(uintptr_t)userdata;

    ck_assert_ptr_eq(holds[i], r);
    ck_assert(!req_connected(r));
    holds[i] = NULL;
    n_cancelled++;
    req_error(r, RPC_SHUTTING_DOWN, "cancelled");
}

static void method_hold(struct req *r, void *params, void *userdata)
{
    (void)params;
    (void)userdata;
    ck_assert_uint_lt(n_holds, MAX_HOLDS);
    holds[n_holds] = r;
    req_on_disconnect(r, hold_disconnected, (void *)(uintptr_t)n_holds);
    n_holds++;
}

static void release_holds(void)
{
    for (size_t i = 0; i < n_holds; i++) {
        struct req *r = holds[i];

        if (r) {
            holds[i] = NULL;
            req_reply(r, json_object_new_int64((int64_t)i));
        }
    }
}

/* test.stream {"n": N}: N notifications of 1 KiB, sent while the output is not
 * busy and resumed from on_drain, re-arming it whenever the output is busy again
 * (what a streaming exec does). */
struct stream {
    struct req *req;
    int64_t left;
};

static unsigned n_drains;

static void stream_step(struct req *r, void *userdata)
{
    static char chunk[1025];
    struct stream *st = userdata;

    n_drains++;
    ck_assert_uint_lt(n_drains, 100000);
    if (!chunk[0])
        memset(chunk, 'x', sizeof chunk - 1);
    while (st->left > 0 && !req_output_busy(r)) {
        json_object *p = json_object_new_object();

        json_object_object_add(p, "data", json_object_new_string(chunk));
        ck_assert_int_eq(req_notify(r, "test.data", p), 0);
        st->left--;
    }
    if (st->left > 0) {
        req_on_drain(r, stream_step, st);
        return;
    }
    free(st);
    req_reply(r, json_object_new_boolean(true));
}

static void method_stream(struct req *r, void *raw, void *userdata)
{
    json_object *params = raw;
    struct stream *st = calloc(1, sizeof *st);
    json_object *n;

    (void)userdata;
    ck_assert_ptr_nonnull(st);
    ck_assert(json_object_object_get_ex(params, "n", &n));
    st->req = r;
    st->left = json_object_get_int64(n);
    stream_step(r, st);
}

/* test.get: params parsed by the dispatch as sandbox.get's; replies the id. */
static void method_get(struct req *r, void *params, void *userdata)
{
    const struct params_sandbox_id *p = params;

    (void)userdata;
    req_reply(r, json_object_new_string(p->id));
}

/* test.admin: admin-only. */
static void method_admin(struct req *r, void *params, void *userdata)
{
    (void)params;
    (void)userdata;
    ck_assert(req_is_admin(r));
    req_reply(r, json_object_new_boolean(true));
}

/* test.fd {"index": N, "write": bool}: takes descriptor N for reading or writing, writes
 * "x" into it (or reads one byte), closes it, replies the number passed. */
static void method_fd(struct req *r, void *params, void *userdata)
{
    json_object *p = params, *idx = NULL, *wr = NULL;
    const char *reason;
    bool write_it;
    int fd;
    char b = 'x';

    (void)userdata;
    (void)json_object_object_get_ex(p, "index", &idx);
    (void)json_object_object_get_ex(p, "write", &wr);
    write_it = json_object_get_boolean(wr);
    if (req_take_fd(r, json_object_get_int64(idx), write_it ? REQ_FD_WRITE : REQ_FD_READ, &fd,
                    &reason) < 0) {
        req_invalid_params(r, "index", reason);
        return;
    }
    ck_assert_int_eq(write_it ? write(fd, &b, 1) : read(fd, &b, 1), 1);
    close(fd);
    req_reply(r, json_object_new_int64(req_fds(r)));
}

static const struct method_def hold_methods[] = {
    {"daemon.status", &params_none_spec, method_daemon_status, 0},
    {"rpc.discover", &params_none_spec, method_rpc_discover, 0},
    {"test.fd", NULL, method_fd, 0},
    {"test.hold", NULL, method_hold, 0},
    {"test.stream", NULL, method_stream, 0},
    {"test.get", &params_sandbox_id_spec, method_get, 0},
    {"test.admin", &params_none_spec, method_admin, METHOD_ADMIN},
    {},
};

static void spin(void)
{
    for (int i = 0; i < 32; i++)
        uv_run(&loop, UV_RUN_NOWAIT);
}

static void setup(void)
{
    const char *bad = NULL;

    signal(SIGPIPE, SIG_IGN);
    log_set_max_level(LOG_WARNING);
    ck_assert_int_eq(uv_loop_init(&loop), 0);
    ck_assert_int_eq(config_init(&cfg), 0);
    cfg.server.max_connections = 8;
    cfg.server.max_connections_per_uid = 2;
    cfg.server.max_request_bytes = 1024;
    cfg.server.max_inflight_per_connection = 2;
    ck_assert_int_eq(methods_check(hold_methods, &bad), 0);
    ck_assert_int_eq(server_init(&srv, &(struct server_params){.loop = &loop,
                                                               .config = &cfg,
                                                               .methods = {hold_methods}}),
                     0);
    n_holds = n_cancelled = 0;
}

static void teardown(void)
{
    struct conn *next;

    release_holds();
    for (struct conn *c = srv.conns; c; c = next) {
        next = c->next;
        conn_abort(c);
    }
    for (int i = 0; i < 100 && srv.n_handles > 0; i++)
        uv_run(&loop, UV_RUN_NOWAIT);
    ck_assert_uint_eq(srv.n_handles, 0);
    server_done(&srv);
    config_done(&cfg);
    check_loop_done(&loop);
}

/* A connected client: returns its end; the other end is served. */
static int client(void)
{
    int sv[2];

    ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    ck_assert_int_eq(server_adopt(&srv, sv[1]), 0);
    return sv[0];
}

static void send_str(int fd, const char *s)
{
    ck_assert_int_eq(write(fd, s, strlen(s)), (ssize_t)strlen(s));
}

/* Reads until EOF (bounded); returns how many lines arrived. */
static unsigned read_to_eof(int fd)
{
    char buf[4096];
    unsigned lines = 0;

    for (int i = 0; i < 200; i++) {
        ssize_t n = recv(fd, buf, sizeof buf, MSG_DONTWAIT);

        if (n == 0)
            return lines;
        if (n < 0) {
            ck_assert_int_eq(errno, EAGAIN);
            spin();
            continue;
        }
        for (ssize_t k = 0; k < n; k++)
            lines += buf[k] == '\n';
    }
    ck_abort_msg("no EOF from the daemon");
    return lines;
}

/* Reads until n lines arrived (bounded) into buf. */
static void read_lines(int fd, unsigned n, char *buf, size_t size)
{
    size_t len = 0;
    unsigned lines = 0;

    for (int i = 0; i < 200 && lines < n; i++) {
        ssize_t k = recv(fd, buf + len, size - 1 - len, MSG_DONTWAIT);

        if (k <= 0) {
            ck_assert(k < 0 && errno == EAGAIN);
            spin();
            continue;
        }
        for (ssize_t j = 0; j < k; j++)
            lines += buf[len + (size_t)j] == '\n';
        len += (size_t)k;
    }
    buf[len] = '\0';
    ck_assert_uint_eq(lines, n);
}

/* The dispatch parses params with the row's kind and answers -32602 itself;
 * admin-only rows are refused to other callers. */
START_TEST(test_dispatch_params_and_admin)
{
    char buf[4096];
    int fd = client();

    send_str(fd, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"test.get\",\"params\":{\"id\":7}}\n");
    read_lines(fd, 1, buf, sizeof buf);
    ck_assert_ptr_nonnull(strstr(buf, "-32602"));
    ck_assert_ptr_nonnull(strstr(buf, "\"param\":\"id\""));
    send_str(
        fd,
        "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"test.get\",\"params\":{\"id\":\"sb-1\"}}\n");
    read_lines(fd, 1, buf, sizeof buf);
    ck_assert_ptr_nonnull(strstr(buf, "\"result\":\"sb-1\""));
    send_str(fd, "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"test.admin\"}\n");
    read_lines(fd, 1, buf, sizeof buf);
    ck_assert_ptr_nonnull(strstr(buf, getuid() == 0 ? "\"result\":true" : "-32008"));
    close(fd);
    spin();
}
END_TEST

START_TEST(test_admin_set)
{
    uid_t members[] = {1001};
    struct admin_set a = {.has_gid = true, .gid = 50, .uids = members, .n_uids = 1};
    struct admin_set none = {};

    ck_assert(admin_set_has(NULL, 0, 0));
    ck_assert(!admin_set_has(NULL, 1000, 1000));
    ck_assert(!admin_set_has(&none, 1000, 50));
    ck_assert(admin_set_has(&a, 1000, 50));
    ck_assert(admin_set_has(&a, 1001, 1001));
    ck_assert(!admin_set_has(&a, 1000, 1000));
    ck_assert_int_eq(admin_set_load(&none, NULL), 0);
    ck_assert(!none.has_gid && none.n_uids == 0);
}
END_TEST

START_TEST(test_setter_forward_only)
{
    struct conn c = {.host = &srv.host, .id = 1, .state = CONN_OPEN},
                d = {.host = &srv.host, .id = 2, .state = CONN_OPEN};
    unsigned before = conn_state_refusals(&srv.host);

    log_set_max_level(LOG_EMERG); /* the refusals below are logged at error level */
    ck_assert_int_eq(conn_set_state(&c, CONN_OPEN), -EINVAL);
    ck_assert_int_eq(conn_set_state(&c, CONN_DRAINING), 0);
    ck_assert_int_eq(conn_set_state(&c, CONN_OPEN), -EINVAL);
    ck_assert_int_eq(c.state, CONN_DRAINING);
    ck_assert_int_eq(conn_set_state(&c, CONN_DRAINING), -EINVAL);
    ck_assert_int_eq(conn_set_state(&c, CONN_CLOSING), 0);
    /* The transition behind the double uv_close(): closing back to draining. */
    ck_assert_int_eq(conn_set_state(&c, CONN_DRAINING), -EINVAL);
    ck_assert_int_eq(c.state, CONN_CLOSING);
    ck_assert_int_eq(conn_set_state(&c, (enum conn_state)42), -EINVAL);
    ck_assert_int_eq(conn_set_state(&c, CONN_CLOSED), 0);
    ck_assert_int_eq(conn_set_state(&c, CONN_CLOSING), -EINVAL);
    ck_assert_int_eq(c.state, CONN_CLOSED);
    /* DRAINING may be skipped. */
    ck_assert_int_eq(conn_set_state(&d, CONN_CLOSING), 0);
    ck_assert_uint_eq(conn_state_refusals(&srv.host), before + 6);
}
END_TEST

/* Over the per-uid cap, from a client that already hung up: the refusal finds
 * the peer gone (EPIPE) and closes, once. */
START_TEST(test_refusal_after_hangup)
{
    int a = client(), b = client(), sv[2];
    unsigned before = conn_state_refusals(&srv.host);

    spin();
    ck_assert_uint_eq(server_connections(&srv), 2);
    for (int i = 0; i < 20; i++) {
        ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
        close(sv[0]);
        ck_assert_int_eq(server_adopt(&srv, sv[1]), 0);
        spin();
    }
    ck_assert_uint_eq(srv.n_handles, 2);
    /* A refused client that is still there gets one -32007 line, then EOF. */
    ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    ck_assert_int_eq(server_adopt(&srv, sv[1]), 0);
    ck_assert_uint_eq(read_to_eof(sv[0]), 1);
    close(sv[0]);
    ck_assert_uint_eq(conn_state_refusals(&srv.host), before);
    close(a);
    close(b);
    spin();
    ck_assert_uint_eq(srv.n_handles, 0);
}
END_TEST

/* A line over max_request_bytes, then the client closes before the loop runs:
 * the -32600 reply meets EPIPE. */
START_TEST(test_oversize_then_hangup)
{
    char big[1500];
    unsigned before = conn_state_refusals(&srv.host);

    memset(big, 'a', sizeof big);
    for (int i = 0; i < 10; i++) {
        int fd = client();

        send_str(fd, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"daemon.status\"}\n");
        ck_assert_int_eq(write(fd, big, sizeof big), (ssize_t)sizeof big);
        close(fd);
        spin();
        ck_assert_uint_eq(srv.n_handles, 0);
    }
    ck_assert_uint_eq(conn_state_refusals(&srv.host), before);
}
END_TEST

/* Closing twice, failing or sweeping a closing connection: no-ops. */
START_TEST(test_close_is_final)
{
    int fd = client();
    struct conn *c = srv.conns;
    unsigned before = conn_state_refusals(&srv.host);

    ck_assert_ptr_nonnull(c);
    conn_close(c);
    ck_assert_int_eq(c->state, CONN_CLOSING);
    conn_close(c);
    conn_fail(c, RPC_BUSY, "late");
    conn_sweep(c, uv_now(&loop) + 3600 * 1000);
    conn_abort(c);
    ck_assert_int_eq(c->state, CONN_CLOSING);
    ck_assert_uint_eq(conn_state_refusals(&srv.host), before);
    spin();
    ck_assert_uint_eq(srv.n_handles, 0);
    close(fd);
}
END_TEST

/* The client sends exactly max_inflight_per_connection requests and closes:
 * reading stopped at the cap, so only the sweep's poll sees the hang-up. */
START_TEST(test_hangup_at_inflight_cap)
{
    int fd = client();
    struct conn *c = srv.conns;

    send_str(fd, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"test.hold\"}\n"
                 "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"test.hold\"}\n");
    spin();
    ck_assert_uint_eq(n_holds, 2);
    ck_assert(!c->reading);
    close(fd);
    spin();
    ck_assert_int_eq(c->state, CONN_OPEN); /* the EOF is unread */
    conn_sweep(c, uv_now(&loop));
    ck_assert_uint_eq(n_cancelled, 2);
    spin();
    ck_assert_uint_eq(srv.n_handles, 0);
}
END_TEST

/* The same with a half-close: not a hang-up, the replies arrive, then EOF. */
START_TEST(test_half_close_at_inflight_cap)
{
    int fd = client();
    struct conn *c = srv.conns;

    send_str(fd, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"test.hold\"}\n"
                 "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"test.hold\"}\n");
    spin();
    ck_assert_int_eq(shutdown(fd, SHUT_WR), 0);
    spin();
    conn_sweep(c, uv_now(&loop));
    ck_assert_int_eq(c->state, CONN_OPEN);
    ck_assert_uint_eq(n_cancelled, 0);
    release_holds();
    ck_assert_uint_eq(read_to_eof(fd), 2);
    ck_assert_uint_eq(srv.n_handles, 0);
    close(fd);
}
END_TEST

/* A drain callback that fills the output past high water again and re-arms is
 * called again on the next drain, not in a loop within this one. */
START_TEST(test_drain_rearm)
{
    int fd = client();
    char buf[65536];
    size_t got = 0;
    unsigned lines = 0;

    send_str(fd, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"test.stream\","
                 "\"params\":{\"n\":4096}}\n");
    for (int i = 0; i < 100000 && lines < 4097; i++) {
        ssize_t n = recv(fd, buf, sizeof buf, MSG_DONTWAIT);

        if (n <= 0) {
            ck_assert(n < 0 && errno == EAGAIN);
            uv_run(&loop, UV_RUN_NOWAIT);
            continue;
        }
        got += (size_t)n;
        for (ssize_t k = 0; k < n; k++)
            lines += buf[k] == '\n';
    }
    ck_assert_uint_eq(lines, 4097);
    ck_assert_uint_gt(got, 4096 * 1024);
    ck_assert_uint_gt(n_drains, 2);
    close(fd);
}
END_TEST

/* Descriptors open in this process (the server runs in it). */
static unsigned open_fds(void)
{
    unsigned n = 0;

    for (int fd = 0; fd < 1024; fd++)
        n += fcntl(fd, F_GETFD) >= 0;
    return n;
}

/* Sends s with the descriptors fds[0..n) in one sendmsg(). */
static void send_fds(int sock, const char *s, const int *fds, unsigned n)
{
    union {
        char buf[CMSG_SPACE(sizeof(int) * 16)];
        struct cmsghdr align;
    } c;
    struct iovec iov = {.iov_base = (void *)s, .iov_len = strlen(s)};
    struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};
    struct cmsghdr *cm;

    ck_assert_uint_le(n, 16);
    if (n > 0) {
        m.msg_control = c.buf;
        m.msg_controllen = CMSG_SPACE(sizeof(int) * n);
        cm = CMSG_FIRSTHDR(&m);
        cm->cmsg_level = SOL_SOCKET;
        cm->cmsg_type = SCM_RIGHTS;
        cm->cmsg_len = CMSG_LEN(sizeof(int) * n);
        memcpy(CMSG_DATA(cm), fds, sizeof(int) * n);
    }
    ck_assert_int_eq(sendmsg(sock, &m, 0), (ssize_t)strlen(s));
}

/* True once the pipe's write ends are all closed (read end at EOF, bounded). */
static bool pipe_eof(int rfd)
{
    char b;

    for (int i = 0; i < 200; i++) {
        ssize_t n = read(rfd, &b, 1);

        if (n == 0)
            return true;
        if (n < 0 && errno != EAGAIN)
            return false;
        spin();
    }
    return false;
}

/* Descriptors arrive with their line and are used by index; those no param took are
 * closed when the request completes; a wrong direction or a missing index is -32602. */
START_TEST(test_fds_with_line)
{
    char buf[4096], b;
    int fd = client(), p1[2], p2[2], fds[2];
    unsigned before;

    ck_assert_int_eq(pipe2(p1, O_CLOEXEC | O_NONBLOCK), 0);
    ck_assert_int_eq(pipe2(p2, O_CLOEXEC | O_NONBLOCK), 0);
    spin();
    before = open_fds();
    fds[0] = p1[1];
    fds[1] = p2[1];
    /* Lines before (blank ones too), without descriptors: counted, given none. */
    send_str(fd,
             "{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"test.get\",\"params\":{\"id\":\"a\"}}\n"
             "\n\r\n");
    send_fds(fd,
             "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"test.fd\","
             "\"params\":{\"index\":1,\"write\":true}}\n",
             fds, 2);
    close(p1[1]);
    close(p2[1]);
    read_lines(fd, 2, buf, sizeof buf);
    ck_assert_msg(strstr(buf, "\"result\":2"), "%s", buf);
    ck_assert_int_eq(read(p2[0], &b, 1), 1);
    ck_assert_int_eq(b, 'x');
    /* Index 0 was not taken: closed with the request. */
    ck_assert(pipe_eof(p1[0]));
    ck_assert(pipe_eof(p2[0]));

    /* A read end passed where the daemon writes, and a missing index. */
    close(p1[0]);
    ck_assert_int_eq(pipe2(p1, O_CLOEXEC | O_NONBLOCK), 0);
    send_fds(fd,
             "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"test.fd\","
             "\"params\":{\"index\":0,\"write\":true}}\n",
             &p1[0], 1);
    read_lines(fd, 1, buf, sizeof buf);
    ck_assert_ptr_nonnull(strstr(buf, "-32602"));
    ck_assert_ptr_nonnull(strstr(buf, "not open for writing"));
    send_fds(fd,
             "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"test.fd\","
             "\"params\":{\"index\":1,\"write\":true}}\n",
             &p1[1], 1);
    close(p1[1]);
    read_lines(fd, 1, buf, sizeof buf);
    ck_assert_ptr_nonnull(strstr(buf, "-32602"));
    ck_assert(pipe_eof(p1[0]));
    close(p1[0]);

    /* Lines that are no request: a parse error, a blank line, a batch. */
    ck_assert_int_eq(pipe2(p1, O_CLOEXEC | O_NONBLOCK), 0);
    send_fds(fd, "{not json\n", &p1[1], 1);
    send_fds(fd, "\n", &p1[1], 1);
    send_fds(fd,
             "[{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"test.fd\",\"params\":{\"index\":0}}]\n",
             &p1[1], 1);
    close(p1[1]);
    read_lines(fd, 2, buf, sizeof buf);
    ck_assert_ptr_nonnull(strstr(buf, "-32700"));
    ck_assert_ptr_nonnull(strstr(buf, "-32602"));
    ck_assert(pipe_eof(p1[0]));
    close(p1[0]);
    spin();
    ck_assert_uint_eq(open_fds(), before - 3);
    close(p2[0]);
    close(fd);
}
END_TEST

/* More descriptors than one line may carry: the kernel truncates the control data
 * (MSG_CTRUNC); the connection answers one error and closes, and nothing leaks. */
START_TEST(test_fds_too_many)
{
    char buf[4096];
    int fd = client(), p[2], fds[9];
    unsigned before;

    ck_assert_int_eq(pipe2(p, O_CLOEXEC | O_NONBLOCK), 0);
    spin();
    before = open_fds();
    for (int i = 0; i < 9; i++)
        fds[i] = p[1];
    send_fds(fd, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"test.fd\",\"params\":{\"index\":0}}\n",
             fds, 9);
    close(p[1]);
    read_lines(fd, 1, buf, sizeof buf);
    ck_assert_ptr_nonnull(strstr(buf, "-32600"));
    ck_assert_ptr_nonnull(strstr(buf, "descriptors"));
    (void)read_to_eof(fd);
    ck_assert(pipe_eof(p[0]));
    spin();
    /* p[1], and the connection's socket and its duplicate. */
    ck_assert_uint_eq(open_fds(), before - 3);
    close(p[0]);
    close(fd);
}
END_TEST

static Suite *conn_suite(void)
{
    Suite *s = suite_create("conn");
    TCase *tc = tcase_create("conn");

    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_setter_forward_only);
    tcase_add_test(tc, test_refusal_after_hangup);
    tcase_add_test(tc, test_oversize_then_hangup);
    tcase_add_test(tc, test_close_is_final);
    tcase_add_test(tc, test_hangup_at_inflight_cap);
    tcase_add_test(tc, test_half_close_at_inflight_cap);
    tcase_add_test(tc, test_drain_rearm);
    tcase_add_test(tc, test_dispatch_params_and_admin);
    tcase_add_test(tc, test_admin_set);
    tcase_add_test(tc, test_fds_with_line);
    tcase_add_test(tc, test_fds_too_many);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return check_run_suite(conn_suite());
}
