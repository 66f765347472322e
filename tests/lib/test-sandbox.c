/* The sandbox engine. Without a Proxmox behind it: configuration errors, synchronous
 * refusals (not configured, quota, ttl), a create against an unreachable API failing within
 * its deadline and leaving nothing in the table or the state folder, the reachability
 * probe, and a clean close. Against the fake Proxmox API (fixtures/fake-pve.py --mode pve):
 * a failure at each create step the fake serves (vmid listing, clone, configuration, disk,
 * firewall, start, address, ipfilter set), each ending with the container destroyed and
 * nothing left, a destroy while the create runs, the vmid durable in the intent before the
 * clone, and another id chosen when the first is taken at clone time. (The lifecycle against
 * pve-sim is tests/e2e.) */
#include "macro.h"

#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <uv.h>

#include "config.h"
#include "sandbox-internal.h"
#include "tests/check-util.h"
#include "tests/lib/fixtures/fixture-server.h"

struct sbfix {
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
static void fixture_init(struct sbfix *fx, bool proxmox)
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

static void fixture_done(struct sbfix *fx)
{
    char cmd[128];

    config_done(&fx->cfg);
    snprintf(cmd, sizeof cmd, "rm -rf %s", fx->dir);
    run_cmd(cmd);
}

static unsigned records(const struct sbfix *fx)
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
    struct sbfix fx;
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
    struct sbfix fx;
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
    struct sbfix fx;
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

/* ---- against the fake Proxmox API ---- */

struct pvefix {
    struct sbfix fx;
    struct fixture srv;
    uv_loop_t loop;
    struct engine *e;
};

static void pvefix_start(struct pvefix *p)
{
    static const char *const args[] = {"--mode", "pve", "--new-form", "--task-ms", "20", NULL};
    char url[64];

    fixture_start(&p->srv, args);
    fixture_init(&p->fx, true);
    snprintf(url, sizeof url, "https://127.0.0.1:%d", p->srv.port);
    free(p->fx.cfg.proxmox.url);
    p->fx.cfg.proxmox.url = strdup(url);
    free(p->fx.cfg.proxmox.fingerprint);
    p->fx.cfg.proxmox.fingerprint = strdup(p->srv.fingerprint);
    free(p->fx.cfg.proxmox.token_id);
    p->fx.cfg.proxmox.token_id = strdup("root@pam!test");
    free(p->fx.cfg.proxmox.token_secret);
    p->fx.cfg.proxmox.token_secret = strdup("11111111-2222-3333-4444-555555555555");
    free(p->fx.cfg.proxmox.nodes[0]);
    p->fx.cfg.proxmox.nodes[0] = strdup("pve");
    p->fx.cfg.sandbox.create_timeout_s = 30;
    ck_assert_int_eq(uv_loop_init(&p->loop), 0);
    ck_assert_int_eq(engine_new(&p->loop, &p->fx.cfg, NULL, &p->e, NULL), 0);
}

static void pvefix_stop(struct pvefix *p)
{
    closed = false;
    engine_close(p->e, on_closed, NULL);
    uv_run(&p->loop, UV_RUN_DEFAULT);
    ck_assert(closed);
    check_loop_done(&p->loop);
    fixture_done(&p->fx);
    fixture_stop(&p->srv);
}

/* The containers the fake has, the template excepted. */
static unsigned fake_containers(struct pvefix *p)
{
    json_object *st = fixture_state(&p->srv), *cts;
    unsigned n = 0;

    ck_assert(json_object_object_get_ex(st, "cts", &cts));
    json_object_object_foreach(cts, k, v)
    {
        (void)v;
        if (strcmp(k, "9000") != 0)
            n++;
    }
    json_object_put(st);
    return n;
}

/* True when the fake served method on a path containing path. */
static bool fake_served(struct pvefix *p, const char *method, const char *path)
{
    json_object *st = fixture_state(&p->srv), *reqs;
    bool found = false;

    ck_assert(json_object_object_get_ex(st, "requests", &reqs));
    for (size_t i = 0; i < json_object_array_length(reqs) && !found; i++) {
        json_object *r = json_object_array_get_idx(reqs, i), *m, *pa;

        ck_assert(json_object_object_get_ex(r, "method", &m));
        ck_assert(json_object_object_get_ex(r, "path", &pa));
        found = strcmp(json_object_get_string(m), method) == 0 &&
                strstr(json_object_get_string(pa), path) != NULL;
    }
    json_object_put(st);
    return found;
}

/* After a failed create: nothing in the table, in the fake or in the state folder. */
static void assert_nothing_left(struct pvefix *p)
{
    ck_assert_ptr_null(engine_first(p->e));
    ck_assert_uint_eq(fake_containers(p), 0);
    for (int i = 0; i < 200 && records(&p->fx) > 0; i++) {
        uv_run(&p->loop, UV_RUN_NOWAIT);
        usleep(5000);
    }
    ck_assert_uint_eq(records(&p->fx), 0);
}

struct step_fault {
    const char *fault; /* fake-pve.py /_fault body, NULL: none */
    enum engine_err_kind kind;
    const char *message;     /* in the create's error */
    const char *next_method; /* the next step's request, never sent */
    const char *next_path;
};

/* One per create step the fake serves; the fake has no ipfilter sets, so the ipset step
 * fails by itself ("not implemented"). */
static const struct step_fault step_faults[] = {
    {"{\"method\":\"GET\",\"path\":\"/cluster/resources$\",\"status\":400,"
     "\"reason\":\"listing refused\",\"count\":50}",
     ENGINE_E_PROXMOX, "listing refused", "POST", "/clone"},
    {"{\"method\":\"POST\",\"path\":\"/clone$\",\"status\":400,\"reason\":\"clone refused\","
     "\"count\":50}",
     ENGINE_E_PROXMOX, "clone refused", "PUT", "/config"},
    {"{\"method\":\"PUT\",\"path\":\"/config$\",\"status\":400,\"reason\":\"config refused\","
     "\"count\":50}",
     ENGINE_E_PROXMOX, "config refused", "PUT", "/firewall/options"},
    {"{\"method\":\"GET\",\"path\":\"/lxc/[0-9]+/config$\",\"status\":400,"
     "\"reason\":\"config unreadable\",\"count\":50}",
     ENGINE_E_PROXMOX, "config unreadable", "PUT", "/firewall/options"},
    {"{\"method\":\"PUT\",\"path\":\"/resize$\",\"status\":400,\"reason\":\"resize refused\","
     "\"count\":50}",
     ENGINE_E_PROXMOX, "resize refused", "PUT", "/firewall/options"},
    {"{\"method\":\"PUT\",\"path\":\"/firewall/options$\",\"status\":400,"
     "\"reason\":\"firewall refused\",\"count\":50}",
     ENGINE_E_PROXMOX, "firewall refused", "POST", "/status/start"},
    {"{\"task_exit\":{\"vzstart\":\"start task failed\"}}", ENGINE_E_PROXMOX, "start task failed",
     "GET", "/interfaces"},
    {"{\"method\":\"GET\",\"path\":\"/interfaces$\",\"status\":400,"
     "\"reason\":\"interfaces refused\",\"count\":50}",
     ENGINE_E_PROXMOX, "interfaces refused", "POST", "/firewall/ipset"},
    {NULL, ENGINE_E_PROXMOX, "not implemented", "GET", "/nonexistent"},
};

static void destroy_kept(struct pvefix *p);

START_TEST(test_create_step_fails)
{
    const struct step_fault *f = &step_faults[_i];
    struct pvefix p;
    struct engine_error err = {};
    struct sandbox_create_opts o = {
        .owner_uid = 1000, .cores = 2, .memory_mb = 256, .disk_gb = -1, .ttl_s = -1};
    struct outcome out = {};

    pvefix_start(&p);
    if (strstr(f->message, "resize")) {
        /* The template's disk is smaller than asked for: the resize step runs. */
        fixture_fault(&p.srv, "{\"ct\":{\"vmid\":9000,\"template\":1,\"config\":{\"hostname\":"
                              "\"tmpl\",\"unprivileged\":1,\"net0\":\"name=eth0,firewall=1\","
                              "\"rootfs\":\"local:vm-9000-disk-0,size=1G\"}}}");
        o.disk_gb = 4;
    }
    if (f->fault)
        fixture_fault(&p.srv, f->fault);
    ck_assert_int_eq(engine_create(p.e, &o, on_create, &out, &err), 0);
    while (!out.done)
        uv_run(&p.loop, UV_RUN_ONCE);
    ck_assert_msg(out.err.kind == f->kind, "kind %d: %s", out.err.kind, out.msg);
    ck_assert_msg(strstr(out.msg, f->message), "'%s' not in '%s'", f->message, out.msg);
    ck_assert(!fake_served(&p, f->next_method, f->next_path));
    if (strstr(f->message, "config unreadable")) {
        /* The rollback's destroy reads the config again to take volumes back before its
         * delete: it keeps a container whose config it cannot read (FAILED, tried again by
         * reconcile) rather than delete what it cannot see. Readable again, it goes. */
        ck_assert_ptr_nonnull(engine_first(p.e));
        ck_assert_uint_eq(fake_containers(&p), 1);
        fixture_fault(&p.srv, "{\"clear_faults\":1}");
        destroy_kept(&p);
    }
    assert_nothing_left(&p);
    pvefix_stop(&p);
}
END_TEST

/* How many times the fake served method on a path containing path. */
static unsigned fake_count(struct pvefix *p, const char *method, const char *path)
{
    json_object *st = fixture_state(&p->srv), *reqs;
    unsigned n = 0;

    ck_assert(json_object_object_get_ex(st, "requests", &reqs));
    for (size_t i = 0; i < json_object_array_length(reqs); i++) {
        json_object *r = json_object_array_get_idx(reqs, i), *m, *pa;

        ck_assert(json_object_object_get_ex(r, "method", &m));
        ck_assert(json_object_object_get_ex(r, "path", &pa));
        n += strcmp(json_object_get_string(m), method) == 0 &&
             strstr(json_object_get_string(pa), path) != NULL;
    }
    json_object_put(st);
    return n;
}

/* The container id is chosen and durable in the intent before the clone POST: while the
 * clone is held back, the record already names the vmid the clone then uses. */
START_TEST(test_vmid_recorded_before_clone)
{
    struct pvefix p;
    struct engine_error err = {};
    struct sandbox_create_opts o = {
        .owner_uid = 1000, .cores = -1, .memory_mb = -1, .disk_gb = -1, .ttl_s = -1};
    struct outcome out = {};
    struct sandbox *sb;
    char path[256];
    _cleanup_free_ char *rec = NULL;

    pvefix_start(&p);
    fixture_fault(&p.srv, "{\"method\":\"POST\",\"path\":\"/clone$\",\"delay_ms\":400}");
    ck_assert_int_eq(engine_create(p.e, &o, on_create, &out, &err), 0);
    sb = engine_first(p.e);
    while (sb->state != SANDBOX_CLONING && !out.done)
        uv_run(&p.loop, UV_RUN_ONCE);
    ck_assert(!out.done);
    ck_assert_uint_ne(sb->vmid, 0);
    ck_assert(!fake_served(&p, "POST", "/clone"));
    for (int i = 0; i < 200 && !rec; i++) {
        uv_run(&p.loop, UV_RUN_NOWAIT);
        snprintf(path, sizeof path, "%s/state/sandboxes/%s.json", p.fx.dir, sb->id);
        if (access(path, F_OK) == 0) {
            _cleanup_free_ char *txt = slurp(path);
            char want[64];

            snprintf(want, sizeof want, "\"vmid\": %u", sb->vmid);
            if (strstr(txt, want))
                rec = TAKE_PTR(txt);
        }
        if (!rec)
            usleep(5000);
    }
    ck_assert_msg(rec != NULL, "the intent does not name vmid %u", sb->vmid);
    while (!out.done)
        uv_run(&p.loop, UV_RUN_ONCE);
    snprintf(path, sizeof path, "/lxc/9000/clone");
    ck_assert_uint_eq(fake_count(&p, "POST", path), 1);
    assert_nothing_left(&p); /* the fake has no ipfilter sets: the create fails there */
    pvefix_stop(&p);
}
END_TEST

/* The chosen id is taken by someone else before the clone ("already exists"): nothing of
 * ours exists under it, so it is not cleaned up; another id is chosen and cloned. */
START_TEST(test_vmid_taken_meanwhile)
{
    struct pvefix p;
    struct engine_error err = {};
    struct sandbox_create_opts o = {
        .owner_uid = 1000, .cores = -1, .memory_mb = -1, .disk_gb = -1, .ttl_s = -1};
    struct outcome out = {};

    pvefix_start(&p);
    fixture_fault(&p.srv, "{\"method\":\"POST\",\"path\":\"/clone$\",\"status\":500,"
                          "\"reason\":\"CT 1234 already exists on node 'pve'\",\"count\":1}");
    ck_assert_int_eq(engine_create(p.e, &o, on_create, &out, &err), 0);
    while (!out.done)
        uv_run(&p.loop, UV_RUN_ONCE);
    ck_assert_msg(strstr(out.msg, "not implemented"), "%s", out.msg); /* got past the clone */
    ck_assert_uint_eq(fake_count(&p, "GET", "/cluster/resources"), 2);
    ck_assert_uint_eq(fake_count(&p, "POST", "/clone"), 2);
    /* only the clone that exists (its ipfilter set apart) */
    ck_assert_uint_eq(fake_count(&p, "DELETE", "/lxc/") - fake_count(&p, "DELETE", "/firewall/"),
                      1);
    assert_nothing_left(&p);
    pvefix_stop(&p);
}
END_TEST

struct destroyed {
    bool done;
    bool ok;
};

static void on_destroyed(const struct engine_error *err, void *userdata)
{
    struct destroyed *d = userdata;

    d->done = true;
    d->ok = err == NULL;
}

static void destroy_kept(struct pvefix *p)
{
    struct destroyed d = {};
    struct engine_error derr = {};

    ck_assert_int_eq(engine_destroy(p->e, engine_first(p->e), on_destroyed, &d, &derr), 0);
    while (!d.done)
        uv_run(&p->loop, UV_RUN_ONCE);
    ck_assert(d.ok);
}

/* A destroy while the create runs (in each of its first states): the create fails with a
 * state error, the destroy succeeds, nothing is left. */
START_TEST(test_destroy_during_create)
{
    static const enum sandbox_state at[] = {SANDBOX_PENDING, SANDBOX_CLONING, SANDBOX_CONFIGURING,
                                            SANDBOX_STARTING, SANDBOX_WAITING_IP};
    struct pvefix p;
    struct engine_error err = {};
    struct sandbox_create_opts o = {
        .owner_uid = 1000, .cores = -1, .memory_mb = -1, .disk_gb = -1, .ttl_s = -1};
    struct outcome out = {};
    struct destroyed d = {};
    struct engine_error derr;
    struct sandbox *sb;
    char id[ID_MAX + 1];

    pvefix_start(&p);
    ck_assert_int_eq(engine_create(p.e, &o, on_create, &out, &err), 0);
    sb = engine_first(p.e);
    ck_assert_ptr_nonnull(sb);
    while (sb->state != at[_i] && !out.done)
        uv_run(&p.loop, UV_RUN_ONCE);
    ck_assert_msg(!out.done, "create ended before %s: %s", sandbox_state_to_string(at[_i]),
                  out.msg);
    snprintf(id, sizeof id, "%s", sb->id);
    ck_assert_int_eq(engine_destroy(p.e, sb, on_destroyed, &d, &derr), 0);
    while (!out.done || !d.done)
        uv_run(&p.loop, UV_RUN_ONCE);
    ck_assert_msg(out.err.kind == ENGINE_E_STATE, "kind %d: %s", out.err.kind, out.msg);
    ck_assert_str_eq(out.msg, "the sandbox was destroyed while being created");
    ck_assert(d.ok);
    ck_assert(engine_was_destroyed(p.e, id, 1000, false));
    assert_nothing_left(&p);
    pvefix_stop(&p);
}
END_TEST

START_TEST(test_refuse)
{
    struct engine_error err = {.upid = "stale", .http_status = 500};

    ck_assert_int_eq(engine_refuse(&err, ENGINE_E_INVALID, -EINVAL, "bad ttl", "ttl_s"), -EINVAL);
    ck_assert_int_eq(err.kind, ENGINE_E_INVALID);
    ck_assert_int_eq(err.error, -EINVAL);
    ck_assert_str_eq(err.message, "bad ttl");
    ck_assert_str_eq(err.param, "ttl_s");
    ck_assert_ptr_null(err.upid);
    ck_assert_int_eq(err.http_status, 0);

    ck_assert_int_eq(engine_refuse_oom(&err), -ENOMEM);
    ck_assert_int_eq(err.kind, ENGINE_E_INTERNAL);
    ck_assert_int_eq(err.error, -ENOMEM);
    ck_assert_str_eq(err.message, "out of memory");
    ck_assert_ptr_null(err.param);

    ck_assert_int_eq(engine_refuse_not_ready(&err, SANDBOX_CONFIGURING), -EAGAIN);
    ck_assert_int_eq(err.kind, ENGINE_E_STATE);
    ck_assert_int_eq(err.error, -EAGAIN);
    ck_assert_str_eq(err.message, "the sandbox is not ready");
    ck_assert_str_eq(err.state, "creating");
    ck_assert_int_eq(engine_refuse_not_ready(&err, SANDBOX_DESTROYING), -EAGAIN);
    ck_assert_str_eq(err.state, "destroying");
}
END_TEST

/* The isolation prerequisites of a configuration, and the probe command. */
START_TEST(test_isolation_config)
{
    static const struct {
        const char *conf;
        const char *problem; /* a part of it; NULL: fine */
    } cases[] = {
        {"{\"unprivileged\":1,\"net0\":\"name=eth0,bridge=vmbr1,firewall=1,ip=dhcp\"}", NULL},
        {"{\"unprivileged\":\"1\",\"net0\":\"name=eth0,firewall=1\"}", NULL},
        {"{\"net0\":\"name=eth0,firewall=1\"}", "unprivileged"},
        {"{\"unprivileged\":0,\"net0\":\"name=eth0,firewall=1\"}", "unprivileged"},
        {"{\"unprivileged\":1,\"net0\":\"name=eth0,bridge=vmbr1,ip=dhcp\"}", "firewall=1"},
        {"{\"unprivileged\":1,\"net0\":\"name=eth0,firewall=0\"}", "firewall=1"},
        {"{\"unprivileged\":1}", "net0"},
    };
    char cmd[320];

    for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
        _cleanup_json_ json_object *o = json_tokener_parse(cases[i].conf);
        const char *p = isolation_config_problem(o);

        ck_assert_ptr_nonnull(o);
        if (!cases[i].problem)
            ck_assert_msg(!p, "%s: %s", cases[i].conf, p);
        else
            ck_assert_msg(p && strstr(p, cases[i].problem), "%s: %s", cases[i].conf, strna(p));
    }
    ck_assert_int_eq(isolation_probe_command(0xc6336402u, 80, 2, cmd, sizeof cmd), 0);
    ck_assert_ptr_nonnull(strstr(cmd, "timeout 2 nc -w 1 198.51.100.2 80"));
    ck_assert_ptr_nonnull(strstr(cmd, "/dev/tcp/198.51.100.2/80"));
    ck_assert_int_eq(isolation_probe_command(0xc6336402u, 80, 2, cmd, 20), -ENOBUFS);
}
END_TEST

/* The bandwidth cap: Mbit/s into net0's rate= (MiB/s), and the operator's default and cap. */
START_TEST(test_net_rate)
{
    static const struct {
        const char *net0;
        unsigned mbps;
        const char *want;
    } cases[] = {
        {"name=eth0,bridge=vmbr1,firewall=1,ip=dhcp", 64,
         "name=eth0,bridge=vmbr1,firewall=1,ip=dhcp,rate=7.629"},
        {"name=eth0,rate=12.5,firewall=1", 100, "name=eth0,firewall=1,rate=11.921"},
        {"name=eth0,rate=12.5,firewall=1", 0, "name=eth0,firewall=1"},
        {"name=eth0,firewall=1,rate=1", 0, "name=eth0,firewall=1"},
        {"name=eth0", 1, "name=eth0,rate=0.119"},
        {"name=eth0", 100000, "name=eth0,rate=11920.929"},
    };
    struct config cfg = {0};
    struct engine e = {.cfg = &cfg};
    struct engine_error err;

    for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
        _cleanup_free_ char *out = NULL;

        ck_assert_int_eq(net0_with_rate(cases[i].net0, cases[i].mbps, &out), 0);
        ck_assert_str_eq(out, cases[i].want);
        ck_assert_uint_eq(net0_rate_mbps(out), cases[i].mbps); /* and back */
    }
    ck_assert_uint_eq(net0_rate_mbps(NULL), 0);
    ck_assert_uint_eq(net0_rate_mbps("name=eth0,rate=12.5"), 105);
    ck_assert_uint_eq(net0_rate_mbps("name=eth0,rate=x"), 0);
    ck_assert_uint_eq(engine_net_rate(&e, -1), 0);
    ck_assert_uint_eq(engine_net_rate(&e, 20), 20);
    ck_assert_int_eq(engine_check_net_rate(&e, 0, &err), 0);
    ck_assert_int_eq(engine_check_net_rate(&e, 100000, &err), 0);
    cfg.sandbox.max_net_rate_mbps = 500;
    ck_assert_uint_eq(engine_net_rate(&e, -1), 500); /* no default: the maximum */
    cfg.sandbox.default_net_rate_mbps = 50;
    ck_assert_uint_eq(engine_net_rate(&e, -1), 50);
    ck_assert_int_eq(engine_check_net_rate(&e, -1, &err), 0);
    ck_assert_int_eq(engine_check_net_rate(&e, 500, &err), 0);
    ck_assert_int_eq(engine_check_net_rate(&e, 501, &err), -EINVAL);
    ck_assert_str_eq(err.param, "net_rate_mbps");
    ck_assert_str_eq(err.cap, "max_net_rate_mbps");
    ck_assert_uint_eq(err.limit, 500);
    ck_assert_int_eq(engine_check_net_rate(&e, 0, &err), -EINVAL); /* no cap is above any */
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("sandbox");
    TCase *tc = tcase_create("engine");

    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_refuse);
    tcase_add_test(tc, test_not_configured);
    tcase_add_test(tc, test_bad_key);
    tcase_add_test(tc, test_unreachable);
    tcase_add_test(tc, test_isolation_config);
    tcase_add_test(tc, test_net_rate);
    suite_add_tcase(s, tc);
    tc = tcase_create("fake-pve");
    tcase_set_timeout(tc, 60);
    tcase_add_unchecked_fixture(tc, fixture_certs_init, fixture_certs_done);
    tcase_add_loop_test(tc, test_create_step_fails, 0, (int)ELEMENTSOF(step_faults));
    tcase_add_loop_test(tc, test_destroy_during_create, 0, 5);
    tcase_add_test(tc, test_vmid_recorded_before_clone);
    tcase_add_test(tc, test_vmid_taken_meanwhile);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return check_run_suite(suite());
}
