/* lib/ssh/sshs: keys, pins, and the session pool's connect/auth against a throwaway sshd. */
#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <uv.h>

#include "log.h"
#include "sshs.h"
#include "ssh-fixture/fixture.h"
#include "tests/check-util.h"

static uv_loop_t loop;
static struct sshd_fixture fx;

static void setup_loop(void)
{
    ck_assert_int_eq(uv_loop_init(&loop), 0);
}

static void setup_sshd(void)
{
    setup_loop();
    fixture_start(&fx);
}

static void teardown_loop(void)
{
    check_loop_done(&loop);
}

static void teardown_sshd(void)
{
    teardown_loop();
    fixture_stop(&fx);
}

struct connect_wait {
    bool done;
    int error;
    bool closed;
};

static void on_connect(struct sshpool *pool, int error, void *userdata)
{
    struct connect_wait *w = userdata;

    ck_assert(!w->done);
    w->done = true;
    w->error = error;
}

static void on_closed(void *userdata)
{
    struct connect_wait *w = userdata;

    w->closed = true;
}

static int connect_pool(const struct sshs_config *cfg, unsigned n, uint64_t deadline_ms,
                        struct sshpool_stats *ret_stats)
{
    struct sshpool *pool = NULL;
    struct connect_wait w = {};

    ck_assert_int_eq(sshpool_new(&loop, cfg, n, &pool), 0);
    ck_assert_int_eq(sshpool_connect(pool, deadline_ms, on_connect, &w), 0);
    /* Never called synchronously. */
    ck_assert(!w.done);
    fixture_run_until(&loop, &w.done, deadline_ms + 5000);
    if (ret_stats)
        sshpool_get_stats(pool, ret_stats);
    sshpool_close(pool, on_closed, &w);
    fixture_run_until(&loop, &w.closed, 5000);
    return w.error;
}

START_TEST(test_pins_validate)
{
    const char *good = "SHA256:uNiVztksCsDhcc0u9e8BujQXVUpKZIDTMczCvj3tD2s";

    ck_assert_int_eq(sshs_pins_validate(good), 1);
    ck_assert_int_eq(sshs_pins_validate("SHA256:uNiVztksCsDhcc0u9e8BujQXVUpKZIDTMczCvj3tD2s, "
                                        "SHA256:AAAAztksCsDhcc0u9e8BujQXVUpKZIDTMczCvj3tD2s"),
                     2);
    ck_assert_int_eq(sshs_pins_validate(""), -EINVAL);
    ck_assert_int_eq(sshs_pins_validate(NULL), -EINVAL);
    ck_assert_int_eq(sshs_pins_validate("MD5:aa:bb"), -EINVAL);
    ck_assert_int_eq(sshs_pins_validate("SHA256:short"), -EINVAL);
    /* Padding is not part of OpenSSH's form. */
    ck_assert_int_eq(sshs_pins_validate("SHA256:uNiVztksCsDhcc0u9e8BujQXVUpKZIDTMczCvj3tD2="),
                     -EINVAL);
    ck_assert_int_eq(sshs_pins_validate("SHA256:uNiVztksCsDhcc0u9e8BujQXVUpKZIDTMczCvj3tD2s x"),
                     -EINVAL);
}
END_TEST

START_TEST(test_key_load_errors)
{
    struct sshs_key *k = NULL;

    ck_assert_int_eq(sshs_key_load_file("/nonexistent/key", &k), -ENOENT);
    ck_assert_int_eq(sshs_key_load_memory("not a key", 9, &k), -EINVAL);
    ck_assert_ptr_null(k);
    ck_assert_ptr_null(sshs_key_free(NULL));
}
END_TEST

START_TEST(test_pool_new_rejects_bad_config)
{
    struct sshpool *pool = NULL;
    struct sshs_config cfg = {.host = "localhost", .user = "root", .host_key_pins = NULL};

    /* Names are refused: no blocking DNS on the loop. */
    ck_assert_int_eq(sshpool_new(&loop, &cfg, 1, &pool), -EINVAL);
    ck_assert_ptr_null(pool);
}
END_TEST

START_TEST(test_fingerprint_matches_ssh_keygen)
{
    char cmd[600], line[256] = "";
    FILE *p;

    snprintf(cmd, sizeof(cmd), "ssh-keygen -l -E sha256 -f '%s/host_ed25519.pub'", fx.dir);
    p = popen(cmd, "r");
    ck_assert_ptr_nonnull(p);
    ck_assert_ptr_nonnull(fgets(line, sizeof(line), p));
    pclose(p);
    /* "256 SHA256:xxxx comment (ED25519)" */
    ck_assert_ptr_nonnull(strstr(line, fx.pin));
    ck_assert_int_eq(sshs_pins_validate(fx.pin), 1);
}
END_TEST

START_TEST(test_connect_auth)
{
    struct sshs_config cfg = fixture_config(&fx);
    struct sshpool_stats st;

    ck_assert_int_eq(connect_pool(&cfg, 2, 10000, &st), 0);
    ck_assert_uint_ge(st.sessions_ready, 1);
    ck_assert_uint_ge(st.connects, 1);
    ck_assert_uint_eq(st.sessions, 2);
}
END_TEST

/* Pools keep their own reference on the key: the loader may drop its own at once. */
START_TEST(test_key_released_early)
{
    struct sshs_config cfg = fixture_config(&fx);
    struct sshs_key *key = NULL;
    struct sshpool *pool = NULL;
    struct connect_wait w = {};
    char path[512];

    snprintf(path, sizeof(path), "%s/client_ed25519", fx.dir);
    ck_assert_int_eq(sshs_key_load_file(path, &key), 0);
    cfg.key = key;
    ck_assert_int_eq(sshpool_new(&loop, &cfg, 1, &pool), 0);
    ck_assert_ptr_null(sshs_key_free(key));
    ck_assert_int_eq(sshpool_connect(pool, 10000, on_connect, &w), 0);
    fixture_run_until(&loop, &w.done, 15000);
    ck_assert_int_eq(w.error, 0);
    sshpool_close(pool, on_closed, &w);
    fixture_run_until(&loop, &w.closed, 5000);
}
END_TEST

START_TEST(test_connect_second_pin_matches)
{
    struct sshs_config cfg = fixture_config(&fx);
    char pins[256];

    snprintf(pins, sizeof(pins), "SHA256:AAAAztksCsDhcc0u9e8BujQXVUpKZIDTMczCvj3tD2s,%s", fx.pin);
    cfg.host_key_pins = pins;
    ck_assert_int_eq(connect_pool(&cfg, 1, 10000, NULL), 0);
}
END_TEST

START_TEST(test_wrong_host_key_refused)
{
    struct sshs_config cfg = fixture_config(&fx);
    uint64_t t0 = uv_hrtime();

    cfg.host_key_pins = "SHA256:uNiVztksCsDhcc0u9e8BujQXVUpKZIDTMczCvj3tD2s";
    ck_assert_int_eq(connect_pool(&cfg, 1, 10000, NULL), -EBADE);
    /* Final at once, not retried until the deadline. */
    ck_assert_uint_lt((uv_hrtime() - t0) / 1000000u, 5000);
}
END_TEST

START_TEST(test_wrong_client_key_refused)
{
    struct sshs_config cfg = fixture_config(&fx);
    struct sshs_key *other = NULL;
    char path[512];

    /* The host key is a valid private key that is not authorized. */
    snprintf(path, sizeof(path), "%s/host_ed25519", fx.dir);
    ck_assert_int_eq(sshs_key_load_file(path, &other), 0);
    cfg.key = other;
    ck_assert_int_eq(connect_pool(&cfg, 1, 10000, NULL), -EKEYREJECTED);
    sshs_key_free(other);
}
END_TEST

START_TEST(test_connect_refused_until_deadline)
{
    struct sshs_config cfg = fixture_config(&fx);
    uint64_t t0 = uv_hrtime(), ms;

    cfg.port = fixture_free_port();
    ck_assert_int_eq(connect_pool(&cfg, 2, 700, NULL), -ECONNREFUSED);
    ms = (uv_hrtime() - t0) / 1000000u;
    /* Retried until the deadline, then the last cause is reported. */
    ck_assert_uint_ge(ms, 650);
    ck_assert_uint_lt(ms, 5000);
}
END_TEST

START_TEST(test_silent_server_retried)
{
    struct sshs_config cfg = fixture_config(&fx);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0), c, n = 0;

    /* A server that takes the TCP connection and never says a word (as when a firewall
     * drops what the container sends): an attempt is given 2 s at first, not the whole
     * 10 s connect timeout, and is made again within the deadline. */
    ck_assert_int_ge(s, 0);
    ck_assert_int_eq(bind(s, (struct sockaddr *)&a, sizeof a), 0);
    ck_assert_int_eq(listen(s, 16), 0);
    ck_assert_int_eq(getsockname(s, (struct sockaddr *)&a, &len), 0);
    cfg.host = "127.0.0.1";
    cfg.port = ntohs(a.sin_port);
    cfg.connect_timeout_ms = 10000;
    ck_assert_int_eq(connect_pool(&cfg, 1, 4500, NULL), -ETIMEDOUT);
    while ((c = accept4(s, NULL, NULL, SOCK_CLOEXEC)) >= 0) {
        n++;
        close(c);
    }
    ck_assert_int_ge(n, 2);
    close(s);
}
END_TEST

static void on_connect_then_close(struct sshpool *pool, int error, void *userdata)
{
    struct connect_wait *w = userdata;

    w->done = true;
    w->error = error;
}

START_TEST(test_close_cancels_connect)
{
    struct sshs_config cfg = fixture_config(&fx);
    struct sshpool *pool = NULL;
    struct connect_wait w = {};

    ck_assert_int_eq(sshpool_new(&loop, &cfg, 2, &pool), 0);
    ck_assert_int_eq(sshpool_connect(pool, 10000, on_connect_then_close, &w), 0);
    uv_run(&loop, UV_RUN_NOWAIT); /* connects start */
    sshpool_close(pool, on_closed, &w);
    /* A pending connect is cancelled synchronously by close. */
    ck_assert(w.done);
    ck_assert_int_eq(w.error, -ECANCELED);
    fixture_run_until(&loop, &w.closed, 5000);
}
END_TEST

START_TEST(test_sshd_starts_late)
{
    struct sshs_config cfg = fixture_config(&fx);
    struct sshpool *pool = NULL;
    struct connect_wait w = {};
    uint64_t until;

    /* sshd is not up yet when the connect starts (as right after a container boots). */
    fixture_sshd_run(&fx, "stop");
    ck_assert_int_eq(sshpool_new(&loop, &cfg, 1, &pool), 0);
    ck_assert_int_eq(sshpool_connect(pool, 15000, on_connect, &w), 0);
    until = uv_hrtime() + 600 * 1000000ull;
    while (uv_hrtime() < until && !w.done)
        uv_run(&loop, UV_RUN_ONCE);
    ck_assert(!w.done);
    ck_assert_int_eq(fixture_sshd_run(&fx, "start"), 0);
    fixture_run_until(&loop, &w.done, 15000);
    ck_assert_int_eq(w.error, 0);
    sshpool_close(pool, on_closed, &w);
    fixture_run_until(&loop, &w.closed, 5000);
}
END_TEST

static Suite *sshs_suite(void)
{
    Suite *s = suite_create("sshs");
    TCase *tc;

    tc = tcase_create("unit");
    tcase_add_checked_fixture(tc, setup_loop, teardown_loop);
    tcase_add_test(tc, test_pins_validate);
    tcase_add_test(tc, test_key_load_errors);
    tcase_add_test(tc, test_pool_new_rejects_bad_config);
    suite_add_tcase(s, tc);

    tc = tcase_create("sshd");
    tcase_add_checked_fixture(tc, setup_sshd, teardown_sshd);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_fingerprint_matches_ssh_keygen);
    tcase_add_test(tc, test_connect_auth);
    tcase_add_test(tc, test_key_released_early);
    tcase_add_test(tc, test_connect_second_pin_matches);
    tcase_add_test(tc, test_wrong_host_key_refused);
    tcase_add_test(tc, test_wrong_client_key_refused);
    tcase_add_test(tc, test_connect_refused_until_deadline);
    tcase_add_test(tc, test_silent_server_retried);
    tcase_add_test(tc, test_close_cancels_connect);
    tcase_add_test(tc, test_sshd_starts_late);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    if (getenv("SANDBOXD_TEST_DEBUG"))
        log_set_max_level(LOG_DEBUG);
    return check_run_suite(sshs_suite());
}
