/* The HTTP bridge (lib/pve/http) against a loopback HTTPS server (fixtures/fake-pve.py). */
#include "macro.h"

#include <check.h>
#include <errno.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>

#include "http.h"
#include "tests/check-util.h"
#include "tests/lib/fixtures/fixture-server.h"

struct result {
    int calls;
    int r;
    long status;
    char *reason;
    char *body;
    size_t body_len;
    char *content_type;
    uint64_t done_at;
    uv_loop_t *loop;
};

static void result_clear(struct result *res)
{
    free(res->reason);
    free(res->body);
    free(res->content_type);
    memset(res, 0, sizeof(*res));
}

static void on_done(int r, struct http_response *resp, void *userdata)
{
    struct result *res = userdata;

    res->calls++;
    res->r = r;
    if (res->loop)
        res->done_at = uv_now(res->loop);
    if (r == 0) {
        ck_assert_ptr_nonnull(resp);
        res->status = resp->status;
        res->reason = TAKE_PTR(resp->reason);
        res->body = TAKE_PTR(resp->body);
        res->body_len = resp->body_len;
        res->content_type = TAKE_PTR(resp->content_type);
    } else {
        ck_assert_ptr_null(resp);
    }
}

static struct fixture fx;
static uv_loop_t loop;
static struct http_client *client;
static bool closed;

static void on_closed(void *userdata)
{
    *(bool *)userdata = true;
}

static void setup_client(const struct http_client_config *cfg)
{
    ck_assert_int_eq(uv_loop_init(&loop), 0);
    ck_assert_int_eq(http_client_new(&loop, cfg, &client), 0);
    closed = false;
}

static void teardown_client(void)
{
    http_client_close(client, on_closed, &closed);
    uv_run(&loop, UV_RUN_DEFAULT);
    ck_assert(closed);
    check_loop_done(&loop);
}

static void url(char *buf, size_t size, const char *path)
{
    snprintf(buf, size, "https://127.0.0.1:%d%s", fx.port, path);
}

static void get(const char *path, struct result *res, uint64_t timeout_ms)
{
    char u[512];
    struct http_request_opts o = {.url = u, .timeout_ms = timeout_ms};

    url(u, sizeof(u), path);
    res->loop = &loop;
    ck_assert_int_eq(http_request_start(client, &o, on_done, res, NULL), 0);
}

static void run(void)
{
    uv_run(&loop, UV_RUN_DEFAULT);
}

static struct http_client_config ca_cfg(void)
{
    struct http_client_config c = {.tls = {.ca_file = fx.cert, .verify = true}};
    return c;
}

static void start_fixture(void)
{
    fixture_start(&fx, NULL);
}

static void stop_fixture(void)
{
    fixture_stop(&fx);
}

START_TEST(test_ca_file_and_reason)
{
    struct http_client_config cfg = ca_cfg();
    struct result a = {0}, b = {0};

    setup_client(&cfg);
    get("/hello", &a, 0);
    get("/status?code=500&reason=CT%20is%20locked%20(disk)", &b, 0);
    run();
    ck_assert_int_eq(a.calls, 1);
    ck_assert_int_eq(a.r, 0);
    ck_assert_int_eq(a.status, 200);
    ck_assert_str_eq(a.reason, "OK");
    ck_assert_str_eq(a.body, "hello");
    ck_assert_str_eq(a.content_type, "text/plain");
    /* an HTTP error is not a transport error; the reason phrase carries Proxmox's text */
    ck_assert_int_eq(b.calls, 1);
    ck_assert_int_eq(b.r, 0);
    ck_assert_int_eq(b.status, 500);
    ck_assert_str_eq(b.reason, "CT is locked (disk)");
    ck_assert_str_eq(b.body, "{\"data\":null}");
    ck_assert_uint_eq(b.body_len, 13);
    result_clear(&a);
    result_clear(&b);
    teardown_client();
}
END_TEST

START_TEST(test_ca_file_mismatch)
{
    struct http_client_config cfg = {.tls = {.ca_file = fx.other_cert, .verify = true}};
    struct result a = {0};

    setup_client(&cfg);
    get("/hello", &a, 0);
    run();
    ck_assert_int_eq(a.calls, 1);
    ck_assert_int_eq(a.r, -EBADE);
    teardown_client();
    char *n = fixture_call(&fx, "GET", "/requests", NULL);
    ck_assert_str_eq(n, "0");
    free(n);
}
END_TEST

START_TEST(test_pin_match)
{
    struct http_client_config cfg = {.tls = {.fingerprint = fx.fingerprint}};
    struct result a = {0};

    setup_client(&cfg);
    get("/hello", &a, 0);
    run();
    ck_assert_int_eq(a.r, 0);
    ck_assert_int_eq(a.status, 200);
    result_clear(&a);
    teardown_client();
}
END_TEST

START_TEST(test_pin_mismatch)
{
    char fp[128];
    struct result a = {0};

    /* the same fingerprint with one hex digit changed */
    snprintf(fp, sizeof(fp), "%s", fx.fingerprint);
    fp[0] = fp[0] == '0' ? '1' : '0';
    struct http_client_config cfg = {.tls = {.fingerprint = fp, .verify = true}};
    setup_client(&cfg);
    get("/hello", &a, 0);
    run();
    ck_assert_int_eq(a.calls, 1);
    ck_assert_int_eq(a.r, -EBADE);
    teardown_client();
    /* the handshake failed: the request (and its Authorization header) was never sent */
    char *n = fixture_call(&fx, "GET", "/requests", NULL);
    ck_assert_str_eq(n, "0");
    free(n);
}
END_TEST

START_TEST(test_no_verification_is_explicit)
{
    struct http_client_config strict = {.tls = {.verify = true}};
    struct http_client_config off = {.tls = {.verify = false}};
    struct result a = {0};

    /* system store: the self-signed certificate is refused */
    setup_client(&strict);
    get("/hello", &a, 0);
    run();
    ck_assert_int_eq(a.r, -EBADE);
    teardown_client();
    /* verification off only when asked for */
    setup_client(&off);
    get("/hello", &a, 0);
    run();
    ck_assert_int_eq(a.r, 0);
    ck_assert_int_eq(a.status, 200);
    result_clear(&a);
    teardown_client();
}
END_TEST

#define N_CONCURRENT 200

START_TEST(test_many_concurrent_keepalive)
{
    struct http_client_config cfg = ca_cfg();
    static struct result res[N_CONCURRENT];
    struct result conns = {0};
    struct http_stats st;

    cfg.max_host_connections = 4;
    setup_client(&cfg);
    for (int i = 0; i < N_CONCURRENT; i++)
        get(i % 2 ? "/hello" : "/delay?ms=5", &res[i], 0);
    ck_assert_uint_eq(http_client_in_flight(client), N_CONCURRENT);
    run();
    for (int i = 0; i < N_CONCURRENT; i++) {
        ck_assert_int_eq(res[i].calls, 1);
        ck_assert_int_eq(res[i].r, 0);
        ck_assert_int_eq(res[i].status, 200);
        ck_assert_str_eq(res[i].body, i % 2 ? "hello" : "late");
        result_clear(&res[i]);
    }
    /* sequential requests reuse the kept-alive connections */
    for (int i = 0; i < 20; i++) {
        get("/hello", &res[0], 0);
        run();
        ck_assert_int_eq(res[0].r, 0);
        result_clear(&res[0]);
    }
    get("/conns", &conns, 0);
    run();
    ck_assert_int_eq(conns.r, 0);
    int n = atoi(conns.body);
    ck_assert_msg(n >= 1 && n <= 4, "server accepted %d TCP connections for 221 requests", n);
    http_client_get_stats(client, &st);
    ck_assert_uint_eq(st.requests_started, N_CONCURRENT + 21);
    ck_assert_uint_eq(st.requests_done, N_CONCURRENT + 21);
    ck_assert_uint_le(st.connections_opened, 4);
    result_clear(&conns);
    teardown_client();
}
END_TEST

START_TEST(test_deadline)
{
    struct http_client_config cfg = ca_cfg();
    struct result a = {0}, b = {0};

    setup_client(&cfg);
    uint64_t t0 = uv_now(&loop);
    get("/delay?ms=5000", &a, 200);
    get("/hello", &b, 0); /* the slow request does not hold others up */
    run();
    ck_assert_int_eq(a.calls, 1);
    ck_assert_int_eq(a.r, -ETIMEDOUT);
    ck_assert_uint_lt(a.done_at - t0, 3000);
    ck_assert_int_eq(b.r, 0);
    ck_assert_uint_lt(b.done_at - t0, 3000);
    result_clear(&b);
    teardown_client();
}
END_TEST

START_TEST(test_body_cap)
{
    struct http_client_config cfg = ca_cfg();
    struct result a = {0}, b = {0};

    cfg.body_max = 1000;
    setup_client(&cfg);
    get("/big?n=1000", &a, 0);
    get("/big?n=100000", &b, 0);
    run();
    ck_assert_int_eq(a.r, 0);
    ck_assert_uint_eq(a.body_len, 1000);
    ck_assert_int_eq(b.calls, 1);
    ck_assert_int_eq(b.r, -EFBIG);
    result_clear(&a);
    teardown_client();
}
END_TEST

START_TEST(test_connection_refused)
{
    struct http_client_config cfg = {.tls = {.verify = true}};
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t sl = sizeof(sa);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    char u[128];
    struct result a = {0};

    /* a port that was just free: bound, never listened on */
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&sa, &sl), 0);
    snprintf(u, sizeof(u), "https://127.0.0.1:%d/hello", ntohs(sa.sin_port));
    setup_client(&cfg);
    struct http_request_opts o = {.url = u};
    ck_assert_int_eq(http_request_start(client, &o, on_done, &a, NULL), 0);
    run();
    close(fd);
    ck_assert_int_eq(a.calls, 1);
    ck_assert_int_eq(a.r, -ECONNREFUSED);
    teardown_client();
}
END_TEST

START_TEST(test_cancel)
{
    struct http_client_config cfg = ca_cfg();
    struct result a = {0}, b = {0};
    struct http_request *req = NULL;
    char u[256];

    setup_client(&cfg);
    url(u, sizeof(u), "/delay?ms=5000");
    struct http_request_opts o = {.url = u};
    ck_assert_int_eq(http_request_start(client, &o, on_done, &a, &req), 0);
    get("/hello", &b, 0);
    uv_run(&loop, UV_RUN_NOWAIT);
    http_request_cancel(req);
    ck_assert_uint_eq(http_client_in_flight(client), 1);
    uint64_t t0 = uv_now(&loop);
    run();
    /* the cancelled request's callback never runs; the loop is not held by it */
    ck_assert_int_eq(a.calls, 0);
    ck_assert_int_eq(b.calls, 1);
    ck_assert_int_eq(b.r, 0);
    ck_assert_uint_lt(uv_now(&loop) - t0, 4000);
    result_clear(&b);
    teardown_client();
}
END_TEST

static struct result close_res[3];

static void on_done_close_client(int r, struct http_response *resp, void *userdata)
{
    on_done(r, resp, userdata);
    /* closing from inside a callback is allowed */
    http_client_close(client, on_closed, &closed);
}

START_TEST(test_close_in_flight)
{
    struct http_client_config cfg = ca_cfg();
    char u[256];

    setup_client(&cfg);
    memset(close_res, 0, sizeof(close_res));
    get("/delay?ms=3000", &close_res[0], 0);
    get("/delay?ms=3000", &close_res[1], 0);
    url(u, sizeof(u), "/hello");
    struct http_request_opts o = {.url = u};
    ck_assert_int_eq(http_request_start(client, &o, on_done_close_client, &close_res[2], NULL), 0);
    run();
    ck_assert(closed);
    ck_assert_int_eq(close_res[2].calls, 1);
    ck_assert_int_eq(close_res[2].r, 0);
    for (int i = 0; i < 2; i++) {
        ck_assert_int_eq(close_res[i].calls, 1);
        ck_assert_int_eq(close_res[i].r, -ECANCELED);
    }
    result_clear(&close_res[2]);
    check_loop_done(&loop);
}
END_TEST

START_TEST(test_methods_and_bodies)
{
    struct http_client_config cfg = ca_cfg();
    struct result a = {0}, b = {0}, c = {0}, d = {0};
    char u[256];
    const char *hdrs[] = {"Authorization: PVEAPIToken=u@pve!t=s", NULL};

    setup_client(&cfg);
    url(u, sizeof(u), "/echo?x=1");
    struct http_request_opts post = {.method = "POST",
                                     .url = u,
                                     .headers = hdrs,
                                     .body = "a=1&b=%20",
                                     .body_len = 9,
                                     .content_type = "application/x-www-form-urlencoded"};
    struct http_request_opts put = {.method = "PUT",
                                    .url = u,
                                    .body = "{\"k\":true}",
                                    .body_len = 10,
                                    .content_type = "application/json"};
    struct http_request_opts del = {.method = "DELETE", .url = u};
    struct http_request_opts del_body = {.method = "DELETE", .url = u, .body = "x", .body_len = 1};
    struct http_request_opts bad = {.method = "PATCH", .url = u};
    struct http_request_opts post_empty = {.method = "POST", .url = u};
    ck_assert_int_eq(http_request_start(client, &post, on_done, &a, NULL), 0);
    ck_assert_int_eq(http_request_start(client, &put, on_done, &b, NULL), 0);
    ck_assert_int_eq(http_request_start(client, &del, on_done, &c, NULL), 0);
    ck_assert_int_eq(http_request_start(client, &post_empty, on_done, &d, NULL), 0);
    /* errors are returned, the callback is not called */
    ck_assert_int_eq(http_request_start(client, &del_body, on_done, &a, NULL), -EINVAL);
    ck_assert_int_eq(http_request_start(client, &bad, on_done, &a, NULL), -EINVAL);
    struct http_request_opts noscheme = {.url = "ftp://127.0.0.1/"};
    ck_assert_int_eq(http_request_start(client, &noscheme, on_done, &a, NULL), -EINVAL);
    run();

    struct json_object *o = json_tokener_parse(a.body), *v;
    ck_assert(json_object_object_get_ex(o, "method", &v));
    ck_assert_str_eq(json_object_get_string(v), "POST");
    ck_assert(json_object_object_get_ex(o, "body", &v));
    ck_assert_str_eq(json_object_get_string(v), "a=1&b=%20");
    ck_assert(json_object_object_get_ex(o, "content_type", &v));
    ck_assert_str_eq(json_object_get_string(v), "application/x-www-form-urlencoded");
    ck_assert(json_object_object_get_ex(o, "auth", &v));
    ck_assert_str_eq(json_object_get_string(v), "PVEAPIToken=u@pve!t=s");
    ck_assert(json_object_object_get_ex(o, "query", &v));
    ck_assert_str_eq(json_object_get_string(v), "x=1");
    json_object_put(o);
    o = json_tokener_parse(b.body);
    ck_assert(json_object_object_get_ex(o, "method", &v));
    ck_assert_str_eq(json_object_get_string(v), "PUT");
    ck_assert(json_object_object_get_ex(o, "body", &v));
    ck_assert_str_eq(json_object_get_string(v), "{\"k\":true}");
    json_object_put(o);
    o = json_tokener_parse(c.body);
    ck_assert(json_object_object_get_ex(o, "method", &v));
    ck_assert_str_eq(json_object_get_string(v), "DELETE");
    ck_assert(json_object_object_get_ex(o, "body", &v));
    ck_assert_str_eq(json_object_get_string(v), "");
    json_object_put(o);
    o = json_tokener_parse(d.body);
    ck_assert(json_object_object_get_ex(o, "method", &v));
    ck_assert_str_eq(json_object_get_string(v), "POST");
    json_object_put(o);
    result_clear(&a);
    result_clear(&b);
    result_clear(&c);
    result_clear(&d);
    teardown_client();
}
END_TEST

START_TEST(test_helpers)
{
    uint8_t fp[32];
    char *s = NULL;

    ck_assert_int_eq(http_fingerprint_parse("A6:F7:EA:53:08:D3:1F:0D:DC:91:D1:C1:2D:08:CE:CC:D7:"
                                            "84:A2:3C:D4:AD:40:97:4E:D8:EE:D2:52:2C:1C:96",
                                            fp),
                     0);
    ck_assert_uint_eq(fp[0], 0xA6);
    ck_assert_uint_eq(fp[31], 0x96);
    ck_assert_int_eq(http_fingerprint_parse("a6f7ea5308d31f0ddc91d1c12d08ceccd784a23cd4ad40974ed8ee"
                                            "d2522c1c96",
                                            fp),
                     0);
    ck_assert_uint_eq(fp[1], 0xF7);
    ck_assert_int_eq(http_fingerprint_parse("A6:F7", fp), -EINVAL);
    ck_assert_int_eq(http_fingerprint_parse("zz", fp), -EINVAL);
    ck_assert_int_eq(http_fingerprint_parse(NULL, fp), -EINVAL);
    ck_assert_int_eq(http_fingerprint_parse("A:6F7EA5308d31f0ddc91d1c12d08ceccd784a23cd4ad40974ed8"
                                            "eed2522c1c96",
                                            fp),
                     -EINVAL);

    ck_assert_int_eq(http_errno_from_curlcode(CURLE_OK), 0);
    ck_assert_int_eq(http_errno_from_curlcode(CURLE_OPERATION_TIMEDOUT), -ETIMEDOUT);
    ck_assert_int_eq(http_errno_from_curlcode(CURLE_COULDNT_CONNECT), -ECONNREFUSED);
    ck_assert_int_eq(http_errno_from_curlcode(CURLE_COULDNT_RESOLVE_HOST), -EHOSTUNREACH);
    ck_assert_int_eq(http_errno_from_curlcode(CURLE_PEER_FAILED_VERIFICATION), -EBADE);
    ck_assert_int_eq(http_errno_from_curlcode(CURLE_SSL_CONNECT_ERROR), -EPROTO);
    ck_assert_int_eq(http_errno_from_curlcode(CURLE_RECV_ERROR), -ECONNRESET);
    ck_assert_int_eq(http_errno_from_curlcode(CURLE_GOT_NOTHING), -ECONNRESET);

    ck_assert_int_eq(http_url_escape("pve node/1@x!", &s), 0);
    ck_assert_str_eq(s, "pve%20node%2F1%40x%21");
    free(s);

    /* the client refuses a malformed pin */
    uv_loop_t l;
    struct http_client *c = NULL;
    struct http_client_config cfg = {.tls = {.fingerprint = "nope"}};
    ck_assert_int_eq(uv_loop_init(&l), 0);
    ck_assert_int_eq(http_client_new(&l, &cfg, &c), -EINVAL);
    ck_assert_ptr_null(c);
    http_client_close(NULL, NULL, NULL);
    http_request_cancel(NULL);
    check_loop_done(&l);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("http");
    TCase *tc = tcase_create("loopback");

    tcase_add_unchecked_fixture(tc, fixture_certs_init, fixture_certs_done);
    tcase_add_checked_fixture(tc, start_fixture, stop_fixture);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_ca_file_and_reason);
    tcase_add_test(tc, test_ca_file_mismatch);
    tcase_add_test(tc, test_pin_match);
    tcase_add_test(tc, test_pin_mismatch);
    tcase_add_test(tc, test_no_verification_is_explicit);
    tcase_add_test(tc, test_many_concurrent_keepalive);
    tcase_add_test(tc, test_deadline);
    tcase_add_test(tc, test_body_cap);
    tcase_add_test(tc, test_connection_refused);
    tcase_add_test(tc, test_cancel);
    tcase_add_test(tc, test_close_in_flight);
    tcase_add_test(tc, test_methods_and_bodies);
    suite_add_tcase(s, tc);

    TCase *tc2 = tcase_create("helpers");
    tcase_add_test(tc2, test_helpers);
    suite_add_tcase(s, tc2);
    return s;
}

int main(void)
{
    return check_run_suite(suite());
}
