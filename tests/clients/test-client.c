/* clients/c: libsandboxd-client against a scripted stand-in for the daemon on a Unix socket
 * (no simulator): framing of replies split anyhow, notifications while a call waits, errors,
 * the reconnect after the daemon's idle close, a connection lost mid-call, an error with id
 * null, descriptors, the wait hooks, several calls in flight on the caller's poll loop, and
 * the socket path's defaults. */
#include "sandboxd-client.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <json-c/json.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "config.h"

/* ---- the stand-in daemon ------------------------------------------------------------ */

struct server {
    char dir[64];
    char path[108];
    int lfd;
    pthread_t thread;
    void (*script)(struct server *s);
    int connections;
    int fds_received;
};

static int srv_accept(struct server *s)
{
    int fd = accept4(s->lfd, NULL, NULL, SOCK_CLOEXEC);

    ck_assert_int_ge(fd, 0);
    s->connections++;
    return fd;
}

/* Reads one request line (into line, NUL-terminated) with the descriptors that came with
 * it (into fds, up to 8); returns the request's id. */
static long srv_read(struct server *s, int fd, char *line, size_t size, int *fds, size_t *n_fds)
{
    size_t n = 0;

    if (n_fds)
        *n_fds = 0;
    while (n + 1 < size) {
        union {
            char buf[CMSG_SPACE(sizeof(int) * 8)];
            struct cmsghdr align;
        } cb;
        struct iovec iov = {.iov_base = line + n, .iov_len = 1};
        struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};
        ssize_t k;

        m.msg_control = cb.buf;
        m.msg_controllen = sizeof cb.buf;
        k = recvmsg(fd, &m, MSG_CMSG_CLOEXEC);
        if (k <= 0)
            return -1;
        for (struct cmsghdr *c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c))
            if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS && fds) {
                size_t got = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);

                memcpy(fds + *n_fds, CMSG_DATA(c), got * sizeof(int));
                *n_fds += got;
                s->fds_received += (int)got;
            }
        if (line[n++] == '\n')
            break;
    }
    line[n] = '\0';
    {
        json_object *o = json_tokener_parse(line), *id;
        long r = -1;

        if (o && json_object_object_get_ex(o, "id", &id))
            r = (long)json_object_get_int64(id);
        json_object_put(o);
        return r;
    }
}

static void srv_write(int fd, const char *text)
{
    size_t n = strlen(text);

    ck_assert_int_eq(send(fd, text, n, MSG_NOSIGNAL), (ssize_t)n);
}

static void srv_reply(int fd, long id, const char *result)
{
    char line[512];

    snprintf(line, sizeof line, "{\"jsonrpc\":\"2.0\",\"id\":%ld,\"result\":%s}\n", id, result);
    srv_write(fd, line);
}

static void sleep_ms(long ms)
{
    struct timespec t = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000};

    nanosleep(&t, NULL);
}

static void *srv_main(void *userdata)
{
    struct server *s = userdata;

    s->script(s);
    return NULL;
}

static void srv_start(struct server *s, void (*script)(struct server *s))
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};

    *s = (struct server){.script = script};
    strcpy(s->dir, "/tmp/test-client-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(s->dir));
    snprintf(s->path, sizeof s->path, "%s/sock", s->dir);
    strcpy(sa.sun_path, s->path);
    s->lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ck_assert_int_ge(s->lfd, 0);
    ck_assert_int_eq(bind(s->lfd, (struct sockaddr *)&sa, sizeof sa), 0);
    ck_assert_int_eq(listen(s->lfd, 8), 0);
    ck_assert_int_eq(pthread_create(&s->thread, NULL, srv_main, s), 0);
}

static void srv_stop(struct server *s)
{
    pthread_join(s->thread, NULL);
    close(s->lfd);
    unlink(s->path);
    rmdir(s->dir);
}

static struct sandboxd_client *client_for(struct server *s)
{
    struct sandboxd_client *c = NULL;

    ck_assert_int_eq(sandboxd_client_new(s->path, &c), 0);
    return c;
}

/* ---- calls, notifications, errors ------------------------------------------------------ */

static void script_calls(struct server *s)
{
    char line[4096];
    int fd = srv_accept(s);
    long id = srv_read(s, fd, line, sizeof line, NULL, NULL);

    ck_assert_ptr_nonnull(strstr(line, "\"method\":\"sandbox.exec\""));
    ck_assert_ptr_nonnull(strstr(line, "\"params\":{\"id\":\"sb-1\"}"));
    /* a notification, a reply to another id, then the reply in three pieces */
    srv_write(fd, "{\"jsonrpc\":\"2.0\",\"method\":\"exec.output\",\"params\":{\"data\":\"hi\"}}\n"
                  "{\"jsonrpc\":\"2.0\",\"id\":999,\"result\":{}}\n{\"jsonrpc\":");
    sleep_ms(50);
    srv_write(fd, "\"2.0\",\"id\":");
    snprintf(line, sizeof line, "%ld,\"result\":{\"exit_code\":0}}\n", id);
    sleep_ms(50);
    srv_write(fd, line);
    id = srv_read(s, fd, line, sizeof line, NULL, NULL);
    snprintf(line, sizeof line,
             "{\"jsonrpc\":\"2.0\",\"id\":%ld,\"error\":{\"code\":-32001,\"message\":\"No such "
             "sandbox\",\"data\":{\"reason\":\"sb-2 does not exist\"}}}\n",
             id);
    srv_write(fd, line);
    id = srv_read(s, fd, line, sizeof line, NULL, NULL);
    ck_assert_ptr_null(strstr(line, "params")); /* no params: none sent */
    srv_reply(fd, id, "null");
    close(fd);
}

struct notes {
    int n;
    char method[64];
    char data[64];
};

static void on_note(const char *method, json_object *params, void *userdata)
{
    struct notes *n = userdata;
    json_object *d;

    n->n++;
    snprintf(n->method, sizeof n->method, "%s", method);
    if (params && json_object_object_get_ex(params, "data", &d))
        snprintf(n->data, sizeof n->data, "%s", json_object_get_string(d));
}

START_TEST(test_calls)
{
    struct server s;
    struct sandboxd_client *c;
    struct notes notes = {};
    json_object *p = json_object_new_object(), *res = NULL, *v;
    const struct sandboxd_error *e;

    srv_start(&s, script_calls);
    c = client_for(&s);
    ck_assert_str_eq(sandboxd_client_socket(c), s.path);
    ck_assert_int_eq(sandboxd_client_fd(c), -1);
    sandboxd_client_set_notify(c, on_note, &notes);
    json_object_object_add(p, "id", json_object_new_string("sb-1"));
    ck_assert_int_eq(sandboxd_call(c, "sandbox.exec", p, &res), 0);
    ck_assert_ptr_null(sandboxd_client_error(c));
    ck_assert(json_object_object_get_ex(res, "exit_code", &v));
    ck_assert_int_eq(json_object_get_int(v), 0);
    json_object_put(res);
    ck_assert_int_eq(notes.n, 1);
    ck_assert_str_eq(notes.method, "exec.output");
    ck_assert_str_eq(notes.data, "hi");

    p = json_object_new_object();
    json_object_object_add(p, "id", json_object_new_string("sb-2"));
    res = NULL;
    ck_assert_int_eq(sandboxd_call(c, "sandbox.get", p, &res), -EREMOTE);
    ck_assert_ptr_null(res);
    e = sandboxd_client_error(c);
    ck_assert_ptr_nonnull(e);
    ck_assert_int_eq(e->code, -32001);
    ck_assert_str_eq(e->message, "No such sandbox");
    ck_assert_str_eq(e->reason, "sb-2 does not exist");
    ck_assert_ptr_nonnull(e->data);
    ck_assert_ptr_nonnull(e->object);

    /* a null result is a success with NULL */
    v = res = json_object_new_object();
    ck_assert_int_eq(sandboxd_call(c, "daemon.status", NULL, &res), 0);
    ck_assert_ptr_null(res);
    json_object_put(v);
    ck_assert_ptr_null(sandboxd_client_error(c));
    ck_assert_int_eq(s.connections, 1);
    sandboxd_client_free(c);
    srv_stop(&s);
}
END_TEST

/* ---- reconnects ------------------------------------------------------------------------ */

static void script_idle_close(struct server *s)
{
    char line[4096];
    int fd = srv_accept(s);
    long id = srv_read(s, fd, line, sizeof line, NULL, NULL);

    srv_reply(fd, id, "{\"n\":1}");
    /* the idle close: the connection goes away between two calls */
    close(fd);
    fd = srv_accept(s);
    id = srv_read(s, fd, line, sizeof line, NULL, NULL);
    ck_assert_ptr_nonnull(strstr(line, "\"method\":\"second\""));
    srv_reply(fd, id, "{\"n\":2}");
    close(fd);
}

START_TEST(test_idle_close)
{
    struct server s;
    struct sandboxd_client *c;
    json_object *res = NULL;

    srv_start(&s, script_idle_close);
    c = client_for(&s);
    ck_assert_int_eq(sandboxd_client_connect(c), 0);
    ck_assert_int_ge(sandboxd_client_fd(c), 0);
    ck_assert_int_eq(sandboxd_call(c, "first", NULL, &res), 0);
    json_object_put(res);
    sleep_ms(200); /* the stand-in closed the connection meanwhile */
    ck_assert_int_eq(sandboxd_call(c, "second", NULL, &res), 0);
    ck_assert_int_eq(json_object_get_int(json_object_object_get(res, "n")), 2);
    json_object_put(res);
    sandboxd_client_free(c);
    srv_stop(&s);
    ck_assert_int_eq(s.connections, 2);
}
END_TEST

static void script_lost(struct server *s)
{
    char line[4096];
    int fd = srv_accept(s);

    srv_read(s, fd, line, sizeof line, NULL, NULL);
    close(fd); /* no reply: the daemon stopped while the call ran */
    fd = srv_accept(s);
    srv_reply(fd, srv_read(s, fd, line, sizeof line, NULL, NULL), "true");
    close(fd);
}

START_TEST(test_lost_mid_call)
{
    struct server s;
    struct sandboxd_client *c;
    json_object *res = NULL;
    const struct sandboxd_error *e;

    srv_start(&s, script_lost);
    c = client_for(&s);
    ck_assert_int_eq(sandboxd_call(c, "sandbox.create", NULL, &res), -ECONNRESET);
    e = sandboxd_client_error(c);
    ck_assert_int_eq(e->code, 0);
    ck_assert_ptr_nonnull(strstr(e->message, "may or may not have taken effect"));
    ck_assert_ptr_null(e->object);
    ck_assert_int_eq(sandboxd_client_fd(c), -1);
    /* the next call opens a new connection */
    ck_assert_int_eq(sandboxd_call(c, "daemon.status", NULL, &res), 0);
    ck_assert(json_object_get_boolean(res));
    json_object_put(res);
    sandboxd_client_free(c);
    srv_stop(&s);
}
END_TEST

static void script_id_null(struct server *s)
{
    char line[4096];
    int fd = srv_accept(s);

    srv_read(s, fd, line, sizeof line, NULL, NULL);
    srv_write(fd, "{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{\"code\":-32600,\"message\":"
                  "\"Invalid Request\",\"data\":{\"reason\":\"request line too long\"}}}\n");
    close(fd);
}

/* A line the daemon refuses while it arrives (longer than its cap): it says why with id null
 * and closes; the send fails, and the call reports the daemon's reason. */
static void script_refused_send(struct server *s)
{
    char buf[65536];
    int fd = srv_accept(s);

    ck_assert_int_gt(recv(fd, buf, sizeof buf, 0), 0);
    srv_write(fd, "{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{\"code\":-32600,\"message\":"
                  "\"Invalid Request\",\"data\":{\"reason\":\"request line too long\"}}}\n");
    close(fd);
}

START_TEST(test_id_null_error)
{
    void (*scripts[])(struct server *) = {script_id_null, script_refused_send};

    for (size_t i = 0; i < 2; i++) {
        struct server s;
        struct sandboxd_client *c;
        json_object *res = NULL, *p = json_object_new_object();
        const struct sandboxd_error *e;
        char *big = malloc(16u << 20);

        memset(big, 'x', (16u << 20) - 1);
        big[(16u << 20) - 1] = '\0';
        json_object_object_add(p, "content", json_object_new_string(i ? big : "small"));
        free(big);
        srv_start(&s, scripts[i]);
        c = client_for(&s);
        ck_assert_int_eq(sandboxd_call(c, "file.write", p, &res), -EREMOTE);
        e = sandboxd_client_error(c);
        ck_assert_int_eq(e->code, -32600);
        ck_assert_str_eq(e->reason, "request line too long");
        ck_assert_int_eq(sandboxd_client_fd(c), -1);
        sandboxd_client_free(c);
        srv_stop(&s);
        ck_assert_int_eq(s.connections, 1); /* nothing was sent again */
    }
}
END_TEST

static void script_garbage(struct server *s)
{
    char line[4096];
    int fd = srv_accept(s);

    srv_read(s, fd, line, sizeof line, NULL, NULL);
    srv_write(fd, "this is not JSON\n");
    srv_read(s, fd, line, sizeof line, NULL, NULL); /* the client closes */
    close(fd);
    fd = srv_accept(s);
    srv_reply(fd, srv_read(s, fd, line, sizeof line, NULL, NULL), "1");
    close(fd);
}

START_TEST(test_not_jsonrpc)
{
    struct server s;
    struct sandboxd_client *c;
    json_object *res = NULL;

    srv_start(&s, script_garbage);
    c = client_for(&s);
    /* the stream cannot be trusted any more: the connection is closed, the call lost */
    ck_assert_int_eq(sandboxd_call(c, "daemon.status", NULL, &res), -ECONNRESET);
    ck_assert_ptr_nonnull(strstr(sandboxd_client_error(c)->message, "not JSON-RPC"));
    ck_assert_int_eq(sandboxd_call(c, "daemon.status", NULL, &res), 0);
    ck_assert_int_eq(json_object_get_int(res), 1);
    json_object_put(res);
    sandboxd_client_free(c);
    srv_stop(&s);
}
END_TEST

/* ---- descriptors and wait hooks ---------------------------------------------------------- */

static void script_fds(struct server *s)
{
    char line[4096];
    int fds[8];
    size_t n;
    int fd = srv_accept(s);
    long id = srv_read(s, fd, line, sizeof line, fds, &n);

    ck_assert_uint_eq(n, 2);
    ck_assert_int_eq(write(fds[1], "through a descriptor", 20), 20);
    for (size_t i = 0; i < n; i++)
        close(fds[i]);
    sleep_ms(300); /* the client ticks meanwhile */
    srv_reply(fd, id, "{\"bytes\":20}");
    close(fd);
}

struct hooks {
    int ticks;
    int readable;
    int fd;
};

static void on_tick(void *userdata)
{
    ((struct hooks *)userdata)->ticks++;
}

static void on_fd(void *userdata, size_t i)
{
    struct hooks *h = userdata;
    char buf[64];

    ck_assert_uint_eq(i, 0);
    h->readable += (int)read(h->fd, buf, sizeof buf);
}

START_TEST(test_fds_and_wait)
{
    struct server s;
    struct sandboxd_client *c;
    json_object *res = NULL;
    int out[2], other[2], fds[2];
    struct hooks h = {};
    const struct sandboxd_wait w = {
        .tick_ms = 50, .tick = on_tick, .fds = &h.fd, .n_fds = 1, .on_fd = on_fd, .userdata = &h};
    char buf[64] = "";

    ck_assert_int_eq(pipe2(out, O_CLOEXEC), 0);
    ck_assert_int_eq(pipe2(other, O_CLOEXEC), 0);
    h.fd = out[0];
    srv_start(&s, script_fds);
    c = client_for(&s);
    fds[0] = other[0];
    fds[1] = out[1];
    ck_assert_int_eq(sandboxd_call_wait(c, "file.read", NULL, fds, 2, &w, &res), 0);
    ck_assert_int_eq(json_object_get_int(json_object_object_get(res, "bytes")), 20);
    json_object_put(res);
    ck_assert_int_eq(s.fds_received, 2);
    ck_assert_int_ge(h.ticks, 3);
    ck_assert_int_eq(h.readable, 20); /* relayed by on_fd while the call waited */
    close(out[1]);
    ck_assert_int_eq(read(out[0], buf, sizeof buf), 0);
    /* too many descriptors: refused before anything is sent */
    {
        int many[9] = {0, 0, 0, 0, 0, 0, 0, 0, 0};

        ck_assert_int_eq(sandboxd_call_fds(c, "x", NULL, many, 9, &res), -E2BIG);
    }
    sandboxd_client_free(c);
    srv_stop(&s);
    close(out[0]);
    close(other[0]);
    close(other[1]);
}
END_TEST

/* ---- several calls in flight ---------------------------------------------------------------- */

static void script_async(struct server *s)
{
    char line[4096];
    long ids[3];
    int fd = srv_accept(s);

    for (int i = 0; i < 3; i++)
        ids[i] = srv_read(s, fd, line, sizeof line, NULL, NULL);
    /* out of order, a notification between, then the connection lost with one in flight */
    srv_reply(fd, ids[2], "\"third\"");
    srv_write(fd, "{\"jsonrpc\":\"2.0\",\"method\":\"sandbox.event\",\"params\":{}}\n");
    srv_reply(fd, ids[0], "\"first\"");
    close(fd);
    fd = srv_accept(s);
    srv_reply(fd, srv_read(s, fd, line, sizeof line, NULL, NULL), "\"again\"");
    close(fd);
}

struct done_log {
    int n;
    int r[4];
    char what[4][64];
};

static void on_done(int r, json_object *result, const struct sandboxd_error *e, void *userdata)
{
    struct done_log *d = userdata;

    ck_assert_int_lt(d->n, 4);
    d->r[d->n] = r;
    snprintf(d->what[d->n], sizeof d->what[0], "%s",
             r == 0 ? json_object_get_string(result) : e->message);
    d->n++;
}

static void run_until(struct sandboxd_client *c, struct done_log *d, int n)
{
    while (d->n < n && sandboxd_client_events(c)) {
        struct pollfd p = {.fd = sandboxd_client_fd(c), .events = sandboxd_client_events(c)};

        ck_assert_int_eq(poll(&p, 1, 5000), 1);
        sandboxd_client_process(c, p.revents);
    }
}

START_TEST(test_in_flight)
{
    struct server s;
    struct sandboxd_client *c;
    struct done_log d = {};
    struct notes notes = {};

    srv_start(&s, script_async);
    c = client_for(&s);
    sandboxd_client_set_notify(c, on_note, &notes);
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(sandboxd_call_start(c, "daemon.status", NULL, NULL, 0, on_done, &d), 0);
    ck_assert_int_eq(d.n, 0);
    ck_assert_int_ne(sandboxd_client_events(c) & POLLIN, 0);
    run_until(c, &d, 3);
    ck_assert_int_eq(d.n, 3);
    ck_assert_int_eq(d.r[0], 0);
    ck_assert_str_eq(d.what[0], "third");
    ck_assert_int_eq(d.r[1], 0);
    ck_assert_str_eq(d.what[1], "first");
    ck_assert_int_eq(d.r[2], -ECONNRESET); /* sent whole: it may have run */
    ck_assert_str_eq(d.what[2], "sandboxd closed the connection");
    ck_assert_int_eq(notes.n, 1);
    ck_assert_str_eq(notes.method, "sandbox.event");
    ck_assert_int_eq(sandboxd_client_events(c), 0);
    /* the next call opens a new connection */
    ck_assert_int_eq(sandboxd_call_start(c, "daemon.status", NULL, NULL, 0, on_done, &d), 0);
    run_until(c, &d, 4);
    ck_assert_int_eq(d.r[3], 0);
    ck_assert_str_eq(d.what[3], "again");
    /* a call that cannot start never completes */
    ck_assert_int_eq(sandboxd_call_start(c, NULL, NULL, NULL, 0, on_done, &d), -EINVAL);
    ck_assert_int_eq(d.n, 4);
    sandboxd_client_free(c);
    srv_stop(&s);
}
END_TEST

static void script_hold(struct server *s)
{
    char line[4096];
    int fd = srv_accept(s);

    srv_read(s, fd, line, sizeof line, NULL, NULL);
    srv_read(s, fd, line, sizeof line, NULL, NULL); /* until the client closes */
    close(fd);
}

START_TEST(test_disconnect_in_flight)
{
    struct server s;
    struct sandboxd_client *c;
    struct done_log d = {};

    srv_start(&s, script_hold);
    c = client_for(&s);
    ck_assert_int_eq(sandboxd_call_start(c, "sandbox.exec", NULL, NULL, 0, on_done, &d), 0);
    sleep_ms(100);
    sandboxd_client_disconnect(c);
    ck_assert_int_eq(d.n, 1);
    ck_assert_int_eq(d.r[0], -ECONNRESET);
    ck_assert_str_eq(d.what[0], "the client closed the connection");
    sandboxd_client_free(c);
    srv_stop(&s);
}
END_TEST

/* ---- the socket path ---------------------------------------------------------------------- */

START_TEST(test_socket_path)
{
    struct sandboxd_client *c = NULL;
    json_object *res = NULL;
    const struct sandboxd_error *e;

    /* The client's default is the daemon's. */
    ck_assert_str_eq(SANDBOXD_SOCKET_DEFAULT, CONFIG_DEFAULT_SOCKET);
    unsetenv("SANDBOXD_SOCKET");
    ck_assert_int_eq(sandboxd_client_new(NULL, &c), 0);
    ck_assert_str_eq(sandboxd_client_socket(c), SANDBOXD_SOCKET_DEFAULT);
    sandboxd_client_free(c);
    setenv("SANDBOXD_SOCKET", "/nonexistent/sandboxd.sock", 1);
    ck_assert_int_eq(sandboxd_client_new("", &c), 0);
    ck_assert_str_eq(sandboxd_client_socket(c), "/nonexistent/sandboxd.sock");
    ck_assert_int_eq(sandboxd_call(c, "daemon.status", NULL, &res), -ENOENT);
    e = sandboxd_client_error(c);
    ck_assert_ptr_nonnull(strstr(e->message, "cannot connect to /nonexistent/sandboxd.sock"));
    sandboxd_client_free(c);
    ck_assert_int_eq(sandboxd_client_new("/x", &c), 0);
    ck_assert_str_eq(sandboxd_client_socket(c), "/x");
    ck_assert_ptr_null(sandboxd_client_free(c));
    ck_assert_ptr_null(sandboxd_client_free(NULL));
}
END_TEST

static Suite *client_suite(void)
{
    Suite *s = suite_create("client");
    TCase *tc = tcase_create("client");

    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_calls);
    tcase_add_test(tc, test_idle_close);
    tcase_add_test(tc, test_lost_mid_call);
    tcase_add_test(tc, test_id_null_error);
    tcase_add_test(tc, test_not_jsonrpc);
    tcase_add_test(tc, test_fds_and_wait);
    tcase_add_test(tc, test_in_flight);
    tcase_add_test(tc, test_disconnect_in_flight);
    tcase_add_test(tc, test_socket_path);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(client_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
