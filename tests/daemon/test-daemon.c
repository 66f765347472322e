/* struct daemon (daemon/daemon.h): two daemons in one process on one loop, each with its
 * own socket, configuration, connections, test hooks and cached documents, started and
 * stopped independently; and the method table (daemon/methods-table.c) as the dispatch
 * reads it. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "config.h"
#include "daemon.h"
#include "log.h"
#include "methods-table.h"
#include "methods.h"
#include "tests/check-util.h"

static uv_loop_t loop;
static char dir[] = "/tmp/sandboxd-test-daemon-XXXXXX";
static struct daemon daemons[2];
static unsigned n_stopped;

static void on_stopped(struct daemon *d, void *userdata)
{
    (void)userdata;
    ck_assert_uint_eq(d->n_started, 0);
    n_stopped++;
}

static void start(unsigned i, bool test_hooks)
{
    char path[sizeof dir + 16];
    struct config cfg;

    snprintf(path, sizeof path, "%s/%u.sock", dir, i);
    ck_assert_int_eq(config_init(&cfg), 0);
    cfg.server.max_connections = 4 + i; /* each daemon reads its own */
    daemons[i] = (struct daemon){.on_stopped = on_stopped};
    ck_assert_int_eq(
        daemon_start(&daemons[i], &loop, &cfg,
                     &(struct daemon_options){.socket_path = path, .test_hooks = test_hooks}),
        0);
}

static int connect_to(unsigned i)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

    ck_assert_int_ge(fd, 0);
    snprintf(sa.sun_path, sizeof sa.sun_path, "%s/%u.sock", dir, i);
    ck_assert_int_eq(connect(fd, (struct sockaddr *)&sa, sizeof sa), 0);
    return fd;
}

/* Sends one request line on fd and returns the response's "result" or "error" (owned),
 * running the loop meanwhile. */
static json_object *call(int fd, const char *method, const char *member)
{
    char line[256], buf[1 << 20];
    size_t got = 0;
    json_object *o = NULL, *v = NULL;

    snprintf(line, sizeof line, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"%s\"}\n", method);
    ck_assert_int_eq(write(fd, line, strlen(line)), (ssize_t)strlen(line));
    for (int i = 0; i < 100000 && (!got || buf[got - 1] != '\n'); i++) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        ssize_t n;

        uv_run(&loop, UV_RUN_NOWAIT);
        if (poll(&p, 1, 1) <= 0)
            continue;
        n = read(fd, buf + got, sizeof buf - 1 - got);
        ck_assert_int_gt(n, 0);
        got += (size_t)n;
    }
    ck_assert(got > 0 && buf[got - 1] == '\n');
    buf[got] = 0;
    o = json_tokener_parse(buf);
    ck_assert_ptr_nonnull(o);
    if (json_object_object_get_ex(o, member, &v))
        json_object_get(v);
    json_object_put(o);
    return v;
}

static int64_t status_int(int fd, const char *key)
{
    json_object *st = call(fd, "daemon.status", "result"), *v;
    int64_t n;

    ck_assert_ptr_nonnull(st);
    ck_assert(json_object_object_get_ex(st, key, &v));
    n = json_object_get_int64(v);
    json_object_put(st);
    return n;
}

static void setup(void)
{
    log_set_max_level(LOG_WARNING);
    ck_assert_ptr_nonnull(mkdtemp(dir));
    ck_assert_int_eq(uv_loop_init(&loop), 0);
    n_stopped = 0;
}

static void teardown(void)
{
    char path[sizeof dir + 16];

    for (unsigned i = 0; i < 2; i++) {
        snprintf(path, sizeof path, "%s/%u.sock", dir, i);
        (void)unlink(path);
    }
    (void)rmdir(dir);
    memcpy(dir + strlen(dir) - 6, "XXXXXX", 6);
}

START_TEST(test_two_daemons)
{
    int a1, a2, b1;
    json_object *r;

    start(0, false);
    start(1, true);
    a1 = connect_to(0);
    a2 = connect_to(0);
    b1 = connect_to(1);
    /* Each daemon counts its own connections and keeps its own configuration. */
    (void)status_int(a2, "uptime_s");
    ck_assert_int_eq(status_int(a1, "connections"), 2);
    ck_assert_int_eq(status_int(b1, "connections"), 1);
    ck_assert_uint_eq(daemons[0].config.server.max_connections, 4);
    ck_assert_uint_eq(daemons[1].config.server.max_connections, 5);
    /* The test hooks are the second daemon's only. */
    r = call(a1, "test.sleep", "error");
    ck_assert_ptr_nonnull(r);
    json_object_put(r);
    r = call(b1, "test.notify", "error"); /* found: its params are refused */
    ck_assert_ptr_nonnull(r);
    ck_assert_ptr_nonnull(strstr(json_object_to_json_string(r), "-32602"));
    json_object_put(r);
    /* Each parses and keeps its own document; the sandbox methods answer on both. */
    json_object_put(call(a1, "rpc.discover", "result"));
    ck_assert_ptr_nonnull(daemons[0].openrpc);
    ck_assert_ptr_null(daemons[1].openrpc);
    r = call(b1, "sandbox.list", "result");
    ck_assert_str_eq(json_object_to_json_string(r), "{ \"sandboxes\": [ ] }");
    json_object_put(r);
    /* The first stops; the second still serves. */
    daemon_shutdown(&daemons[0]);
    for (int i = 0; i < 1000 && n_stopped < 1; i++)
        uv_run(&loop, UV_RUN_NOWAIT);
    ck_assert_uint_eq(n_stopped, 1);
    ck_assert(daemon_stopping(&daemons[0]) && !daemon_stopping(&daemons[1]));
    ck_assert_int_eq(status_int(b1, "connections"), 1);
    daemon_shutdown(&daemons[1]);
    close(a1);
    close(a2);
    close(b1);
    for (int i = 0; i < 1000 && n_stopped < 2; i++)
        uv_run(&loop, UV_RUN_NOWAIT);
    ck_assert_uint_eq(n_stopped, 2);
    uv_run(&loop, UV_RUN_DEFAULT);
    daemon_done(&daemons[0]);
    daemon_done(&daemons[1]);
    check_loop_done(&loop);
}
END_TEST

START_TEST(test_table)
{
    const struct method_table hooks = {methods_table, true}, plain = {methods_table, false};
    const struct method_def twice[] = {
        {"daemon.status", &params_none_spec, methods_table[0].handler, 0},
        {"daemon.status", &params_none_spec, methods_table[0].handler, 0},
        {},
    };
    const struct method_def wrong[] = {
        {"sandbox.get", &params_none_spec, methods_table[0].handler, 0},
        {},
    };
    const struct rpc_method_info *all;
    const char *bad = NULL;
    size_t n = 0, k;

    ck_assert_int_eq(methods_check(methods_table, &bad), 0);
    for (const struct method_def *m = methods_table; m->name; m++, n++) {
        const struct rpc_method_info *mi = rpc_method_find(m->name);

        ck_assert_ptr_eq(methods_find(&hooks, m->name), m);
        ck_assert(!!methods_find(&plain, m->name) == !(m->flags & METHOD_TEST_HOOK));
        /* Every method of the protocol is served, test hooks are not in it. */
        ck_assert(!mi == !!(m->flags & METHOD_TEST_HOOK));
    }
    all = rpc_methods(&k);
    for (size_t i = 0; i < k; i++)
        ck_assert(all[i].planned || methods_find(&plain, all[i].name));
    ck_assert_uint_gt(n, 20);
    ck_assert_int_eq(methods_check(twice, &bad), -EINVAL);
    ck_assert_str_eq(bad, "daemon.status");
    ck_assert_int_eq(methods_check(wrong, &bad), -EINVAL);
    ck_assert_str_eq(bad, "sandbox.get");
    check_loop_done(&loop);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("daemon");
    TCase *tc = tcase_create("core");

    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_two_daemons);
    tcase_add_test(tc, test_table);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return check_run_suite(suite());
}
