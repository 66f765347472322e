/* daemon/conn-out.c, the queue of lines a connection has not written yet, alone (offsets
 * of partly written lines, what it holds, moving lines to a write), then daemon/conn.c's
 * write path over socketpairs with a small send buffer: replies and notifications come
 * whole and in order through partial writes and EAGAIN, a large reply serialised off the
 * loop keeps its place, and a client that does not read holds no more than the output
 * bound until it is dropped. */
#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "conn-out.h"
#include "conn.h"
#include "methods-daemon.h"
#include "methods.h"
#include "server.h"
#include "config.h"
#include "log.h"
#include "macro.h"
#include "rpc.h"
#include "tests/check-util.h"

/* ---- the queue alone ---- */

static json_object *obj_of(const char *s)
{
    json_object *o = json_tokener_parse(s);

    ck_assert_ptr_nonnull(o);
    return o;
}

/* The bytes the iovecs hold, concatenated. */
static size_t iov_bytes(const struct out_queue *q, unsigned max, char *out, unsigned *ret_k)
{
    uv_buf_t iov[16];
    size_t bytes, n = 0;
    unsigned k = out_queue_iov(q, iov, max, &bytes);

    for (unsigned i = 0; i < k; i++) {
        memcpy(out + n, iov[i].base, iov[i].len);
        n += iov[i].len;
    }
    ck_assert_uint_eq(n, bytes);
    out[n] = '\0';
    *ret_k = k;
    return n;
}

START_TEST(test_queue_offsets)
{
    struct out_queue q = {};
    char got[256];
    unsigned k;

    ck_assert_int_eq(out_queue_push(&q, obj_of("{\"a\":1}"), 10), 0);
    ck_assert_int_eq(out_queue_push(&q, obj_of("\"xy\""), 0), 0);
    ck_assert_int_eq(out_queue_push(&q, obj_of("[1,2]"), 5), 0);
    ck_assert_uint_eq(q.n, 3);
    ck_assert_uint_eq(q.len, 8 + 5 + 6);
    ck_assert_uint_eq(q.held, 8 + 10 + 5 + 6 + 5);
    ck_assert_uint_eq(iov_bytes(&q, 16, got, &k), 19);
    ck_assert_str_eq(got, "{\"a\":1}\n\"xy\"\n[1,2]\n");
    ck_assert_uint_eq(k, 6);
    /* at most max entries, whole lines only */
    ck_assert_uint_eq(iov_bytes(&q, 5, got, &k), 13);
    ck_assert_uint_eq(k, 4);

    /* a partial write: the rest is an offset */
    out_queue_advance(&q, 3);
    ck_assert_uint_eq(q.n, 3);
    ck_assert_uint_eq(q.len, 16);
    ck_assert_uint_eq(iov_bytes(&q, 16, got, &k), 16);
    ck_assert_str_eq(got, "\":1}\n\"xy\"\n[1,2]\n");
    /* the text written, its '\n' not */
    out_queue_advance(&q, 4);
    iov_bytes(&q, 16, got, &k);
    ck_assert_str_eq(got, "\n\"xy\"\n[1,2]\n");
    ck_assert_uint_eq(k, 5);
    /* the first line done and part of the second */
    out_queue_advance(&q, 3);
    ck_assert_uint_eq(q.n, 2);
    iov_bytes(&q, 16, got, &k);
    ck_assert_str_eq(got, "y\"\n[1,2]\n");
    /* the second done exactly */
    out_queue_advance(&q, 3);
    ck_assert_uint_eq(q.n, 1);
    ck_assert_uint_eq(q.len, 6);
    ck_assert_uint_eq(q.held, 6 + 5);
    out_queue_advance(&q, 6);
    ck_assert_uint_eq(q.n, 0);
    ck_assert_uint_eq(q.len, 0);
    ck_assert_uint_eq(q.held, 0);
    ck_assert_ptr_null(q.head);
    ck_assert_ptr_null(q.tail);
    ck_assert_int_eq(out_queue_push(&q, obj_of("1"), 0), 0); /* reusable */
    ck_assert_uint_eq(q.len, 2);
    out_queue_clear(&q);
}
END_TEST

START_TEST(test_queue_move_and_clear)
{
    struct out_queue q = {}, w = {};
    char got[256];
    unsigned k;

    for (int i = 0; i < 3; i++) {
        char s[8];

        snprintf(s, sizeof s, "%d", 10 + i);
        ck_assert_int_eq(out_queue_push(&q, obj_of(s), 1), 0);
    }
    out_queue_advance(&q, 1);
    out_queue_move(&w, &q, 2);
    ck_assert_uint_eq(w.n, 2);
    ck_assert_uint_eq(w.len, 5);
    ck_assert_uint_eq(w.held, 5 + 2);
    ck_assert_uint_eq(q.n, 1);
    ck_assert_uint_eq(q.len, 3);
    ck_assert_uint_eq(q.held, 4);
    iov_bytes(&w, 16, got, &k);
    ck_assert_str_eq(got, "0\n11\n");
    iov_bytes(&q, 16, got, &k);
    ck_assert_str_eq(got, "12\n");
    out_queue_move(&w, &q, 5);
    ck_assert_uint_eq(w.n, 3);
    ck_assert_ptr_null(q.head);
    out_queue_advance(&w, 2);
    out_queue_clear(&w); /* a line partly written is freed too (ASan: no leak) */
    ck_assert_uint_eq(w.len, 0);
    ck_assert_uint_eq(w.held, 0);
    ck_assert_ptr_null(w.head);
}
END_TEST

/* A text serialised elsewhere (off the loop) is queued where it is, not copied. */
START_TEST(test_queue_push_text)
{
    struct out_queue q = {};
    json_object *o = obj_of("{\"k\":\"v\"}");
    size_t len;
    const char *text = rpc_serialise(o, &len);
    uv_buf_t iov[4];
    size_t bytes;

    ck_assert_int_eq(out_queue_push_text(&q, o, text, len, 0), 0);
    ck_assert_uint_eq(out_queue_iov(&q, iov, 4, &bytes), 2);
    ck_assert_ptr_eq(iov[0].base, text);
    ck_assert_uint_eq(bytes, len + 1);
    out_queue_clear(&q);
}
END_TEST

/* ---- the connection's write path ---- */

static uv_loop_t loop;
static struct config cfg;
static struct server srv;

/* test.stream {"n": N}: N notifications of 1 KiB while the output is not busy, resumed
 * from on_drain (what a streaming exec does), then the reply true. */
struct stream {
    int64_t left;
};

static void stream_step(struct req *r, void *userdata)
{
    static char chunk[1025];
    struct stream *st = userdata;

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

/* The client is gone mid-stream (the stall deadline dropped it). */
static void stream_gone(struct req *r, void *userdata)
{
    free(userdata);
    req_error(r, RPC_SHUTTING_DOWN, "cancelled");
}

static void method_stream(struct req *r, void *raw, void *userdata)
{
    struct stream *st = calloc(1, sizeof *st);
    json_object *n;

    (void)userdata;
    ck_assert_ptr_nonnull(st);
    ck_assert(json_object_object_get_ex(raw, "n", &n));
    st->left = json_object_get_int64(n);
    req_on_disconnect(r, stream_gone, st);
    stream_step(r, st);
}

/* test.big {"n": N}: replies a string of N 'y' (over CONN_OFFLOOP_BYTES: serialised on a
 * worker thread). */
static void method_big(struct req *r, void *raw, void *userdata)
{
    json_object *n;
    char *s;

    (void)userdata;
    ck_assert(json_object_object_get_ex(raw, "n", &n));
    s = malloc((size_t)json_object_get_int64(n) + 1);
    ck_assert_ptr_nonnull(s);
    memset(s, 'y', (size_t)json_object_get_int64(n));
    s[json_object_get_int64(n)] = '\0';
    req_reply(r, json_object_new_string(s));
    free(s);
}

static const struct method_def out_methods[] = {
    {"daemon.status", &params_none_spec, method_daemon_status, 0},
    {"test.stream", NULL, method_stream, 0},
    {"test.big", NULL, method_big, 0},
    {},
};

static void spin(void)
{
    for (int i = 0; i < 8; i++)
        uv_run(&loop, UV_RUN_NOWAIT);
}

static void setup(void)
{
    const char *bad = NULL;

    signal(SIGPIPE, SIG_IGN);
    log_set_max_level(LOG_WARNING);
    ck_assert_int_eq(uv_loop_init(&loop), 0);
    ck_assert_int_eq(config_init(&cfg), 0);
    cfg.server.max_inflight_per_connection = 4;
    ck_assert_int_eq(methods_check(out_methods, &bad), 0);
    ck_assert_int_eq(
        server_init(
            &srv, &(struct server_params){.loop = &loop, .config = &cfg, .methods = {out_methods}}),
        0);
}

static void teardown(void)
{
    struct conn *next;

    for (struct conn *c = srv.conns; c; c = next) {
        next = c->next;
        conn_abort(c);
    }
    for (int i = 0; i < 1000 && srv.n_handles > 0; i++)
        uv_run(&loop, UV_RUN_NOWAIT);
    ck_assert_uint_eq(srv.n_handles, 0);
    server_done(&srv);
    config_done(&cfg);
    check_loop_done(&loop);
}

/* A connected client whose daemon side has a small send buffer (partial writes, EAGAIN). */
static int client(struct conn **ret)
{
    int sv[2], small = 4096;

    ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    ck_assert_int_eq(setsockopt(sv[1], SOL_SOCKET, SO_SNDBUF, &small, sizeof small), 0);
    ck_assert_int_eq(server_adopt(&srv, sv[1]), 0);
    *ret = srv.conns;
    ck_assert_ptr_nonnull(*ret);
    return sv[0];
}

static void send_str(int fd, const char *s)
{
    ck_assert_int_eq(write(fd, s, strlen(s)), (ssize_t)strlen(s));
}

/* What a client read: whole lines, each checked to be one JSON value. */
struct reader {
    char *buf;
    size_t len, cap;
    unsigned data, lines; /* test.data notifications (each 1024 'x'), lines */
    int64_t ids[8];       /* ids of the replies, in arrival order */
    unsigned n_ids;
    size_t big_len; /* length of the test.big reply's string */
};

static void reader_line(struct reader *rd, const char *line, size_t len)
{
    json_object *o = json_tokener_parse(line), *v;

    ck_assert_msg(o, "not one JSON value: %.*s", (int)MIN(len, (size_t)200), line);
    rd->lines++;
    if (json_object_object_get_ex(o, "method", &v)) {
        ck_assert_str_eq(json_object_get_string(v), "test.data");
        ck_assert(json_object_object_get_ex(o, "params", &v));
        ck_assert(json_object_object_get_ex(v, "data", &v));
        ck_assert_int_eq(json_object_get_string_len(v), 1024);
        rd->data++;
    } else {
        ck_assert(json_object_object_get_ex(o, "id", &v));
        ck_assert_uint_lt(rd->n_ids, 8);
        rd->ids[rd->n_ids++] = json_object_get_int64(v);
        ck_assert(json_object_object_get_ex(o, "result", &v));
        if (json_object_is_type(v, json_type_string))
            rd->big_len = (size_t)json_object_get_string_len(v);
    }
    json_object_put(o);
}

/* Reads at most max bytes (0: nothing to read yet). */
static ssize_t reader_read(struct reader *rd, int fd, size_t max)
{
    ssize_t n;
    char *nl;

    if (rd->cap - rd->len < max + 1) {
        rd->cap = rd->len + max + 1 + 2 * 1024 * 1024;
        rd->buf = realloc(rd->buf, rd->cap);
        ck_assert_ptr_nonnull(rd->buf);
    }
    n = recv(fd, rd->buf + rd->len, max, MSG_DONTWAIT);
    if (n < 0) {
        ck_assert_int_eq(errno, EAGAIN);
        return 0;
    }
    rd->len += (size_t)n;
    rd->buf[rd->len] = '\0';
    while ((nl = memchr(rd->buf, '\n', rd->len))) {
        size_t k = (size_t)(nl - rd->buf);

        *nl = '\0';
        reader_line(rd, rd->buf, k);
        memmove(rd->buf, nl + 1, rd->len - k - 1);
        rd->len -= k + 1;
    }
    return n;
}

/* Through a 4 KiB send buffer and a client reading 3000 bytes at a time: 600 KiB of
 * notifications, a reply serialised off the loop, and small replies sent behind it all
 * arrive whole, the replies in the order sent. */
START_TEST(test_partial_writes_in_order)
{
    struct reader rd = {};
    struct conn *c;
    int fd = client(&c);

    send_str(fd,
             "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"test.big\",\"params\":{\"n\":400000}}\n"
             "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"daemon.status\"}\n"
             "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"test.stream\",\"params\":{\"n\":600}}\n"
             "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"daemon.status\"}\n");
    for (int i = 0; i < 200000 && rd.n_ids < 4; i++) {
        spin();
        ck_assert_uint_le(conn_output_bytes(c), CONN_OUTPUT_HIGH + 400000 + 2048);
        (void)reader_read(&rd, fd, 3000);
    }
    ck_assert_uint_eq(rd.n_ids, 4);
    ck_assert_int_eq(rd.ids[0], 1);
    ck_assert_int_eq(rd.ids[1], 2);
    ck_assert_uint_eq(rd.big_len, 400000);
    /* the stream's reply comes after its notifications; id 4 was answered behind the big
     * reply, so after id 2 */
    ck_assert_uint_eq(rd.data, 600);
    ck_assert_uint_eq(rd.len, 0);
    ck_assert_uint_eq(conn_output_bytes(c), 0);
    ck_assert_uint_eq(c->out.held + c->out_held, 0);
    free(rd.buf);
    close(fd);
}
END_TEST

/* A client that does not read: the output stops at the bound (the stream pauses), and
 * the stall deadline drops the connection with everything it held freed (ASan: no
 * leak). */
START_TEST(test_unread_output_bounded)
{
    struct reader rd = {};
    struct conn *c;
    int fd = client(&c);
    const struct conn_limits *l = c->host->limits;

    send_str(fd,
             "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"test.stream\",\"params\":{\"n\":5000}}\n");
    for (int i = 0; i < 50; i++)
        spin();
    /* the stream paused at the bound, less what the socket took */
    ck_assert_uint_ge(conn_output_bytes(c), CONN_OUTPUT_HIGH - 64 * 1024);
    ck_assert_uint_le(conn_output_bytes(c), CONN_OUTPUT_HIGH + 2048);
    ck_assert_uint_eq(c->n_writes, 1); /* one write in flight, the rest queued */
    ck_assert_uint_gt(c->out.n, 0);
    /* reading a little makes progress, and the output stays bounded */
    for (int i = 0; i < 20; i++) {
        (void)reader_read(&rd, fd, 1000);
        spin();
        ck_assert_uint_le(conn_output_bytes(c), CONN_OUTPUT_HIGH + 2048);
    }
    ck_assert_uint_gt(rd.data, 0);
    ck_assert_int_eq(c->state, CONN_OPEN);
    conn_sweep(c, uv_now(&loop) + l->write_stall_ms + 1);
    ck_assert_int_eq(c->state, CONN_CLOSING);
    ck_assert_uint_eq(c->out.len, 0);
    for (int i = 0; i < 20; i++)
        spin();
    ck_assert_uint_eq(srv.n_handles, 0);
    free(rd.buf);
    close(fd);
}
END_TEST

static Suite *conn_out_suite(void)
{
    Suite *s = suite_create("conn-out");
    TCase *q = tcase_create("queue"), *w = tcase_create("write");

    tcase_add_test(q, test_queue_offsets);
    tcase_add_test(q, test_queue_move_and_clear);
    tcase_add_test(q, test_queue_push_text);
    suite_add_tcase(s, q);
    tcase_add_checked_fixture(w, setup, teardown);
    tcase_add_test(w, test_partial_writes_in_order);
    tcase_add_test(w, test_unread_output_bounded);
    tcase_set_timeout(w, 30);
    suite_add_tcase(s, w);
    return s;
}

int main(void)
{
    return check_run_suite(conn_out_suite());
}
