/* The sandbox engine without a Proxmox behind it: configuration errors, synchronous refusals
 * (not configured, quota, ttl), a create against an unreachable API failing within its
 * deadline and leaving nothing in the table or the state folder, the reachability probe,
 * and a clean close. (The lifecycle against pve-sim is tests/e2e.) */
#include "lib/macro.h" /* before <uv.h> */

#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <uv.h>

#include "lib/config.h"
#include "lib/sandbox.h"
#include "tests/check-util.h"

struct fixture {
    char dir[64];
    struct config cfg;
};

static void run_cmd(const char *cmd)
{
    ck_assert_int_eq(system(cmd), 0);
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "r");
    char *buf;
    long n;

    ck_assert_ptr_nonnull(f);
    fseek(f, 0, SEEK_END);
    n = ftell(f);
    fseek(f, 0, SEEK_SET);
    buf = calloc(1, (size_t)n + 1);
    ck_assert_int_eq(fread(buf, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    return buf;
}

/* A config with [proxmox] at a loopback port where nothing listens. */
static void fixture_init(struct fixture *fx, bool proxmox)
{
    char cmd[256], path[128];

    snprintf(fx->dir, sizeof fx->dir, "/tmp/test-sandbox-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(fx->dir));
    ck_assert_int_eq(config_init(&fx->cfg), 0);
    free(fx->cfg.server.state_dir);
    snprintf(path, sizeof path, "%s/state", fx->dir);
    fx->cfg.server.state_dir = strdup(path);
    if (!proxmox)
        return;
    snprintf(cmd, sizeof cmd, "ssh-keygen -q -t ed25519 -N '' -f %s/key", fx->dir);
    run_cmd(cmd);
    snprintf(path, sizeof path, "%s/key", fx->dir);
    fx->cfg.ssh.key = slurp(path);
    fx->cfg.ssh.template_host_keys = calloc(2, sizeof(char *));
    fx->cfg.ssh.template_host_keys[0] = strdup("SHA256:"
                                               "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA");
    fx->cfg.ssh.n_template_host_keys = 1;
    fx->cfg.proxmox.present = true;
    fx->cfg.proxmox.url = strdup("https://127.0.0.1:1");
    fx->cfg.proxmox.token_id = strdup("sandboxd@pve!sandboxd");
    fx->cfg.proxmox.token_secret = strdup("00000000-0000-0000-0000-000000000000");
    fx->cfg.proxmox.fingerprint =
        strdup("00:00:00:00:00:00:00:00:00:00:00:00:00:00:00:00:00:00:00:00:00:00:00:00:00:00:00:"
               "00:00:00:00:00");
    fx->cfg.proxmox.template_vmid = 9000;
    free(fx->cfg.proxmox.pool);
    fx->cfg.proxmox.pool = strdup("sandboxd");
    fx->cfg.sandbox.create_timeout_s = 1; /* below the file's minimum: tests only */
}

static void fixture_done(struct fixture *fx)
{
    char cmd[128];

    config_done(&fx->cfg);
    snprintf(cmd, sizeof cmd, "rm -rf %s", fx->dir);
    run_cmd(cmd);
}

static unsigned records(const struct fixture *fx)
{
    char path[128];
    struct dirent *de;
    unsigned n = 0;
    DIR *d;

    snprintf(path, sizeof path, "%s/state/sandboxes", fx->dir);
    d = opendir(path);
    if (!d)
        return 0;
    while ((de = readdir(d)))
        if (de->d_name[0] != '.')
            n++;
    closedir(d);
    return n;
}

static bool closed;
static void on_closed(void *userdata)
{
    closed = true;
}

START_TEST(test_not_configured)
{
    struct fixture fx;
    struct engine *e = NULL;
    struct engine_error err = {};
    struct sandbox_create_opts o = {
        .owner_uid = 1000, .cores = -1, .memory_mb = -1, .disk_gb = -1, .ttl_s = -1};
    unsigned counts[_SANDBOX_STATE_MAX];
    uv_loop_t loop;

    fixture_init(&fx, false);
    ck_assert_int_eq(uv_loop_init(&loop), 0);
    ck_assert_int_eq(engine_new(&loop, &fx.cfg, NULL, &e, NULL), 0);
    ck_assert(!engine_configured(e));
    ck_assert_int_lt(engine_create(e, &o, NULL, NULL, &err), 0);
    ck_assert_int_eq(err.kind, ENGINE_E_NOT_CONFIGURED);
    ck_assert_ptr_null(engine_lookup(e, "sb-x", 1000, true));
    ck_assert_ptr_null(engine_first(e));
    engine_count_states(e, counts);
    for (int i = 0; i < _SANDBOX_STATE_MAX; i++)
        ck_assert_uint_eq(counts[i], 0);
    closed = false;
    engine_close(e, on_closed, NULL);
    uv_run(&loop, UV_RUN_DEFAULT);
    ck_assert(closed);
    check_loop_done(&loop);
    fixture_done(&fx);
}
END_TEST

START_TEST(test_bad_key)
{
    struct fixture fx;
    struct engine *e = NULL;
    char *msg = NULL;
    uv_loop_t loop;

    fixture_init(&fx, true);
    free(fx.cfg.ssh.key);
    fx.cfg.ssh.key = strdup("not a key");
    ck_assert_int_eq(uv_loop_init(&loop), 0);
    ck_assert_int_lt(engine_new(&loop, &fx.cfg, NULL, &e, &msg), 0);
    ck_assert_ptr_nonnull(msg);
    ck_assert_ptr_nonnull(strstr(msg, "[ssh]"));
    free(msg);
    check_loop_done(&loop);
    fixture_done(&fx);
}
END_TEST

struct outcome {
    bool done;
    struct engine_error err;
    char msg[256];
};

static void on_create(const struct engine_error *err, struct sandbox *sb, void *userdata)
{
    struct outcome *o = userdata;

    o->done = true;
    ck_assert_ptr_nonnull(err);
    o->err = *err;
    snprintf(o->msg, sizeof o->msg, "%s", err->message);
    o->err.message = o->msg;
    o->err.upid = o->err.state = o->err.param = NULL;
}

static int notices;
static void on_notice(int level, const char *msg, void *userdata)
{
    notices++;
}

START_TEST(test_unreachable)
{
    struct fixture fx;
    struct engine *e = NULL;
    struct engine_error err = {};
    struct sandbox_create_opts o = {
        .owner_uid = 1000, .cores = -1, .memory_mb = -1, .disk_gb = -1, .ttl_s = -1};
    struct engine_hooks hooks = {.notice = on_notice};
    struct outcome out = {};
    const char *last_error;
    int reachable;
    uint64_t t0;
    uv_loop_t loop;

    fixture_init(&fx, true);
    ck_assert_int_eq(uv_loop_init(&loop), 0);
    ck_assert_int_eq(engine_new(&loop, &fx.cfg, &hooks, &e, NULL), 0);
    ck_assert(engine_configured(e));

    /* Synchronous refusals change nothing. */
    o.ttl_s = (int64_t)fx.cfg.sandbox.max_ttl_s + 1;
    ck_assert_int_lt(engine_create(e, &o, on_create, &out, &err), 0);
    ck_assert_int_eq(err.kind, ENGINE_E_INVALID);
    ck_assert_str_eq(err.param, "ttl_s");
    o.ttl_s = -1;
    fx.cfg.sandbox.max_per_uid = 0;
    ck_assert_int_lt(engine_create(e, &o, on_create, &out, &err), 0);
    ck_assert_int_eq(err.kind, ENGINE_E_QUOTA);
    fx.cfg.sandbox.max_per_uid = 16;
    ck_assert_ptr_null(engine_first(e));

    /* A create against nothing fails within its deadline and leaves nothing behind. */
    t0 = uv_now(&loop);
    ck_assert_int_eq(engine_create(e, &o, on_create, &out, &err), 0);
    ck_assert_ptr_nonnull(engine_first(e));
    ck_assert_str_eq(sandbox_state_to_public(engine_first(e)->state), "creating");
    while (!out.done)
        uv_run(&loop, UV_RUN_ONCE);
    ck_assert_msg(out.err.kind == ENGINE_E_DEADLINE || out.err.kind == ENGINE_E_PROXMOX,
                  "kind %d: %s", out.err.kind, out.msg);
    uv_update_time(&loop);
    ck_assert_uint_lt(uv_now(&loop) - t0, 5000);
    ck_assert_ptr_null(engine_first(e));
    /* The probe has found out by now (or does shortly). */
    for (int i = 0; i < 100; i++) {
        engine_proxmox_status(e, &reachable, &last_error);
        if (reachable == 0)
            break;
        uv_run(&loop, UV_RUN_ONCE);
    }
    ck_assert_int_eq(reachable, 0);
    ck_assert_ptr_nonnull(last_error);
    ck_assert_int_ge(notices, 1);
    /* The record is removed a moment after the reply. */
    for (int i = 0; i < 200 && records(&fx) > 0; i++) {
        uv_run(&loop, UV_RUN_NOWAIT);
        usleep(5000);
    }
    ck_assert_uint_eq(records(&fx), 0);

    closed = false;
    engine_close(e, on_closed, NULL);
    uv_run(&loop, UV_RUN_DEFAULT);
    ck_assert(closed);
    check_loop_done(&loop);
    fixture_done(&fx);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("sandbox");
    TCase *tc = tcase_create("engine");

    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_not_configured);
    tcase_add_test(tc, test_bad_key);
    tcase_add_test(tc, test_unreachable);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return check_run_suite(suite());
}
