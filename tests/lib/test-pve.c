/* The Proxmox client (lib/pve) against a fake Proxmox API (fixtures/fake-pve.py --mode pve). */
#include "lib/macro.h"

#include <check.h>
#include <errno.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include "lib/pve.h"
#include "tests/check-util.h"
#include "tests/lib/fixtures/fixture-server.h"

#define TOKEN_ID "root@pam!test"
#define TOKEN_SECRET "11111111-2222-3333-4444-555555555555"

struct pres {
    int calls;
    int error;
    int kind;
    int http_status;
    char *message;
    char *perr_upid;
    char *upid;
    uint32_t vmid;
    bool have_task;
    bool task_success;
    unsigned warnings;
    char *ipv4;
    size_t n_vms;
    size_t n_rules;
    struct json_object *data;
    unsigned attempts;
    uint64_t done_at;
};

static struct fixture fx;
static uv_loop_t loop;
static struct pve_client *client;
static bool closed;

static void pres_clear(struct pres *p)
{
    free(p->message);
    free(p->perr_upid);
    free(p->upid);
    free(p->ipv4);
    if (p->data)
        json_object_put(p->data);
    memset(p, 0, sizeof(*p));
}

static void on_pres(const struct pve_result *res, void *userdata)
{
    struct pres *p = userdata;

    p->calls++;
    p->error = res->error;
    p->done_at = uv_now(&loop);
    p->attempts = res->attempts;
    p->vmid = res->vmid;
    if (res->perr) {
        ck_assert_int_eq(res->error, -EREMOTEIO);
        p->kind = res->perr->kind;
        p->http_status = res->perr->http_status;
        p->message = strdup(res->perr->message);
        if (res->perr->upid)
            p->perr_upid = strdup(res->perr->upid);
    } else {
        ck_assert_int_ne(res->error, -EREMOTEIO);
    }
    if (res->upid)
        p->upid = strdup(res->upid);
    if (res->task) {
        p->have_task = true;
        p->task_success = res->task->success;
        p->warnings = res->task->warnings;
    }
    if (res->ipv4)
        p->ipv4 = strdup(res->ipv4);
    if (res->vms)
        p->n_vms = res->vms->n;
    if (res->rules)
        p->n_rules = res->rules->n;
    if (res->data)
        p->data = json_object_get(res->data);
}

static void on_closed(void *userdata)
{
    *(bool *)userdata = true;
}

static void client_open(const char *secret, uint32_t vmin, uint32_t vmax)
{
    char url[64];
    struct pve_config cfg = {
        .base_url = url,
        .token_id = TOKEN_ID,
        .token_secret = secret,
        .tls = {.fingerprint = fx.fingerprint},
        .timeout_ms = 5000,
        .task_timeout_ms = 20000,
        .vmid_min = vmin,
        .vmid_max = vmax,
    };

    snprintf(url, sizeof(url), "https://127.0.0.1:%d/", fx.port);
    ck_assert_int_eq(uv_loop_init(&loop), 0);
    ck_assert_int_eq(pve_client_new(&loop, &cfg, &client), 0);
    closed = false;
}

static void client_done(void)
{
    pve_client_close(client, on_closed, &closed);
    uv_run(&loop, UV_RUN_DEFAULT);
    ck_assert(closed);
    check_loop_done(&loop);
}

static void run(void)
{
    uv_run(&loop, UV_RUN_DEFAULT);
}

static void start_fixture(void)
{
    static const char *const args[] = {"--mode", "pve", "--task-ms", "50", NULL};
    fixture_start(&fx, args);
}

static void stop_fixture(void)
{
    fixture_stop(&fx);
}

static struct json_object *state_get(struct json_object *st, const char *a, const char *b)
{
    struct json_object *v = NULL, *w = NULL;
    if (!json_object_object_get_ex(st, a, &v))
        return NULL;
    if (!b)
        return v;
    if (!json_object_object_get_ex(v, b, &w))
        return NULL;
    return w;
}

/* The recorded requests matching method and path (suffix match). */
static size_t requests_matching(struct json_object *st, const char *method, const char *path,
                                struct json_object **ret_last)
{
    struct json_object *reqs = state_get(st, "requests", NULL);
    size_t n = 0;

    for (size_t i = 0; i < json_object_array_length(reqs); i++) {
        struct json_object *r = json_object_array_get_idx(reqs, i), *m, *p;
        json_object_object_get_ex(r, "method", &m);
        json_object_object_get_ex(r, "path", &p);
        const char *ps = json_object_get_string(p);
        size_t pl = strlen(ps), l = strlen(path);
        if (strcmp(json_object_get_string(m), method) == 0 && pl >= l &&
            strcmp(ps + pl - l, path) == 0) {
            n++;
            if (ret_last)
                *ret_last = r;
        }
    }
    return n;
}

static const char *req_field(struct json_object *r, const char *k)
{
    struct json_object *v;
    ck_assert(json_object_object_get_ex(r, k, &v));
    return json_object_get_string(v);
}

START_TEST(test_version_and_auth)
{
    struct pres a = {0}, b = {0};
    struct json_object *v;

    client_open(TOKEN_SECRET, 0, 0);
    ck_assert_int_eq(pve_version(client, 0, on_pres, &a, NULL), 0);
    ck_assert_int_eq(pve_nextid(client, 0, on_pres, &b, NULL), 0);
    ck_assert_int_eq(a.calls, 0); /* never from inside the starting call */
    run();
    ck_assert_int_eq(a.error, 0);
    ck_assert(json_object_object_get_ex(a.data, "version", &v));
    ck_assert_str_eq(json_object_get_string(v), "8.2.4");
    ck_assert_int_eq(b.error, 0);
    ck_assert_uint_eq(b.vmid, 100); /* {"data":"100"}: a string */
    pres_clear(&a);
    pres_clear(&b);
    client_done();

    /* a wrong secret: 401 with an empty body, text from the reason phrase, not retried */
    client_open("wrong", 0, 0);
    ck_assert_int_eq(pve_version(client, 0, on_pres, &a, NULL), 0);
    run();
    ck_assert_int_eq(a.error, -EREMOTEIO);
    ck_assert_int_eq(a.kind, PVE_ERR_AUTH);
    ck_assert_int_eq(a.http_status, 401);
    ck_assert_str_eq(a.message, "Authentication failed!");
    ck_assert_uint_eq(a.attempts, 1);
    pres_clear(&a);
    client_done();
}
END_TEST

START_TEST(test_clone_explicit)
{
    struct pres a = {0};
    struct pve_clone_params p = {.node = "pve",
                                 .template_vmid = 9000,
                                 .newid = 101,
                                 .hostname = "sbx-101",
                                 .description = "sandboxd:v1 owner=1000",
                                 .pool = "sandboxes",
                                 .full = -1};
    struct pve_upid u;

    client_open(TOKEN_SECRET, 0, 0);
    ck_assert_int_eq(pve_clone(client, &p, 0, on_pres, &a, NULL), 0);
    run();
    ck_assert_int_eq(a.calls, 1);
    ck_assert_int_eq(a.error, 0);
    ck_assert_uint_eq(a.vmid, 101);
    ck_assert_ptr_nonnull(a.upid);
    ck_assert_int_eq(pve_upid_parse(a.upid, &u), 0);
    ck_assert_str_eq(u.type, "vzclone");
    ck_assert_str_eq(u.id, "9000"); /* the source, not newid */
    ck_assert(a.have_task && a.task_success);

    struct json_object *st = fixture_state(&fx), *last = NULL;
    ck_assert_uint_eq(requests_matching(st, "POST", "/lxc/9000/clone", &last), 1);
    ck_assert_str_eq(req_field(last, "body"), "description=sandboxd%3Av1%20owner%3D1000&hostname="
                                              "sbx-101&newid=101&pool=sandboxes");
    ck_assert_str_eq(req_field(last, "ctype"), "application/x-www-form-urlencoded");
    ck_assert_ptr_nonnull(state_get(state_get(st, "cts", NULL), "101", NULL));
    /* the task was polled until it stopped */
    ck_assert_uint_ge(requests_matching(st, "GET", "/status", NULL), 1);
    json_object_put(st);

    pres_clear(&a);
    client_done();
}
END_TEST

START_TEST(test_task_status_log_wait)
{
    struct pres a = {0}, s = {0}, l = {0}, w = {0};
    struct pve_clone_params p = {.node = "pve", .template_vmid = 9000, .newid = 120, .full = 1};

    client_open(TOKEN_SECRET, 0, 0);
    ck_assert_int_eq(pve_clone(client, &p, 0, on_pres, &a, NULL), 0);
    run();
    ck_assert_int_eq(a.error, 0);
    ck_assert_int_eq(pve_task_status(client, "pve", a.upid, 0, on_pres, &s, NULL), 0);
    ck_assert_int_eq(pve_task_log(client, NULL, a.upid, 0, 0, 0, on_pres, &l, NULL), 0);
    ck_assert_int_eq(pve_wait_task(client, NULL, a.upid, 0, on_pres, &w, NULL), 0);
    ck_assert_int_eq(pve_wait_task(client, NULL, "UPID:bad", 0, on_pres, &w, NULL), -EINVAL);
    run();
    ck_assert_int_eq(s.error, 0);
    ck_assert(s.have_task && s.task_success);
    ck_assert_int_eq(l.error, 0);
    ck_assert(json_object_is_type(l.data, json_type_array));
    ck_assert_int_eq(w.calls, 1);
    ck_assert_int_eq(w.error, 0);
    ck_assert(w.task_success);

    struct json_object *st = fixture_state(&fx), *last = NULL;
    ck_assert_uint_eq(requests_matching(st, "POST", "/lxc/9000/clone", &last), 1);
    ck_assert_ptr_nonnull(strstr(req_field(last, "body"), "full=1"));
    json_object_put(st);
    pres_clear(&a);
    pres_clear(&s);
    pres_clear(&l);
    pres_clear(&w);
    client_done();
}
END_TEST

#define N_PARALLEL 8

START_TEST(test_parallel_clones_one_template)
{
    struct pres r[N_PARALLEL] = {0};
    struct pve_clone_params p = {.node = "pve", .template_vmid = 9000, .full = -1};

    client_open(TOKEN_SECRET, 100000, 100099);
    for (int i = 0; i < N_PARALLEL; i++)
        ck_assert_int_eq(pve_clone(client, &p, 0, on_pres, &r[i], NULL), 0);
    ck_assert_uint_eq(pve_client_in_flight(client), N_PARALLEL);
    run();
    for (int i = 0; i < N_PARALLEL; i++) {
        ck_assert_int_eq(r[i].calls, 1);
        ck_assert_msg(r[i].error == 0, "clone %d: %d %s", i, r[i].error, strna(r[i].message));
        ck_assert_uint_ge(r[i].vmid, 100000);
        ck_assert_uint_le(r[i].vmid, 100099);
        for (int j = 0; j < i; j++)
            ck_assert_uint_ne(r[i].vmid, r[j].vmid);
    }
    /* serialised: the template lock was never hit */
    struct json_object *st = fixture_state(&fx);
    ck_assert_int_eq(json_object_get_int(state_get(st, "counters", "clone_locked")), 0);
    ck_assert_int_eq(json_object_get_int(state_get(st, "counters", "clone_ok")), N_PARALLEL);
    /* connections are kept alive and reused (pinned TLS): at most the per-host cap, plus
     * the one of this state request */
    int conns = json_object_get_int(state_get(st, "conns", NULL));
    size_t nreq = json_object_array_length(state_get(st, "requests", NULL));
    fprintf(stderr, "parallel clones: %zu requests over %d connections\n", nreq, conns);
    ck_assert_int_le(conns, HTTP_MAX_HOST_CONNECTIONS_DEFAULT + 1);
    ck_assert_uint_gt(nreq, 3 * N_PARALLEL);
    json_object_put(st);
    for (int i = 0; i < N_PARALLEL; i++)
        pres_clear(&r[i]);
    client_done();
}
END_TEST

START_TEST(test_clone_retries_template_lock)
{
    struct pres a = {0};
    struct pve_clone_params p = {.node = "pve", .template_vmid = 9000, .newid = 102, .full = -1};

    /* another client holds the template's disk lock for 400 ms */
    fixture_fault(&fx, "{\"vmid\":9000,\"lock_ms\":400,\"lock\":\"disk\"}");
    client_open(TOKEN_SECRET, 0, 0);
    ck_assert_int_eq(pve_clone(client, &p, 0, on_pres, &a, NULL), 0);
    run();
    ck_assert_int_eq(a.error, 0);
    ck_assert_uint_eq(a.vmid, 102);
    struct json_object *st = fixture_state(&fx);
    ck_assert_int_ge(json_object_get_int(state_get(st, "counters", "clone_locked")), 1);
    ck_assert_int_eq(json_object_get_int(state_get(st, "counters", "clone_ok")), 1);
    json_object_put(st);
    pres_clear(&a);
    client_done();
}
END_TEST

static bool taken_cb(uint32_t vmid, void *userdata)
{
    (void)userdata;
    return vmid == 100004; /* e.g. the registry knows it */
}

START_TEST(test_clone_vmid_already_exists)
{
    struct pres a = {0}, b = {0};
    struct pve_clone_params p = {
        .node = "pve", .template_vmid = 9000, .full = -1, .vmid_taken = taken_cb};

    /* ids 100000-100002 are in use but /cluster/resources does not show them yet (lag) */
    for (int i = 0; i < 3; i++) {
        char j[128];
        snprintf(j, sizeof(j), "{\"ct\":{\"vmid\":%d}}", 100000 + i);
        fixture_fault(&fx, j);
    }
    fixture_fault(&fx, "{\"hide_resources\":true}");
    client_open(TOKEN_SECRET, 100000, 100004);
    ck_assert_int_eq(pve_clone(client, &p, 0, on_pres, &a, NULL), 0);
    run();
    ck_assert_msg(a.error == 0, "%d %s", a.error, strna(a.message));
    ck_assert_uint_eq(a.vmid, 100003); /* the only id left */

    /* an explicit newid that exists: the caller's business, not retried, nothing created */
    p.newid = 100001;
    ck_assert_int_eq(pve_clone(client, &p, 0, on_pres, &b, NULL), 0);
    run();
    ck_assert_int_eq(b.error, -EREMOTEIO);
    ck_assert_int_eq(b.kind, PVE_ERR_EXISTS);
    ck_assert_str_eq(b.message, "CT 100001 already exists on node 'pve'");
    ck_assert_uint_eq(b.attempts, 1);
    ck_assert_uint_eq(b.vmid, 0);
    ck_assert_ptr_null(b.upid);
    pres_clear(&a);
    pres_clear(&b);
    client_done();
}
END_TEST

static void check_error_forms(bool new_form)
{
    struct pres a = {0};

    fixture_fault(&fx, "{\"ct\":{\"vmid\":150,\"status\":\"running\"}}");
    client_open(TOKEN_SECRET, 0, 0);
    ck_assert_int_eq(pve_start(client, "pve", 150, 0, on_pres, &a, NULL), 0);
    run();
    ck_assert_int_eq(a.error, -EREMOTEIO);
    ck_assert_int_eq(a.kind, PVE_ERR_RUNNING);
    ck_assert_int_eq(a.http_status, 500);
    ck_assert_str_eq(a.message, "CT 150 already running");
    ck_assert_uint_eq(a.attempts, 1);
    ck_assert_ptr_null(a.upid);
    pres_clear(&a);
    /* missing CT on a synchronous endpoint */
    ck_assert_int_eq(pve_status_current(client, "pve", 999, 0, on_pres, &a, NULL), 0);
    run();
    ck_assert_int_eq(a.kind, PVE_ERR_NOT_FOUND);
    ck_assert_str_eq(a.message, "Configuration file 'nodes/pve/lxc/999.conf' does not exist");
    pres_clear(&a);
    /* parameter errors: booleans must be 0/1 */
    struct json_object *p = json_object_new_object();
    json_object_object_add(p, "onboot", json_object_new_string("true"));
    ck_assert_int_eq(pve_config_put(client, "pve", 150, p, 0, on_pres, &a, NULL), 0);
    json_object_put(p);
    run();
    ck_assert_int_eq(a.kind, PVE_ERR_PARAM);
    ck_assert_int_eq(a.http_status, 400);
    ck_assert_ptr_nonnull(strstr(a.message, "onboot: type check ('boolean') failed - got 'true'"));
    pres_clear(&a);
    (void)new_form;
    client_done();
}

START_TEST(test_error_body_old_form)
{
    check_error_forms(false);
}
END_TEST

START_TEST(test_error_body_new_form)
{
    static const char *const args[] = {"--mode", "pve", "--new-form", "--task-ms", "50", NULL};
    fixture_stop(&fx);
    fixture_start(&fx, args);
    check_error_forms(true);
}
END_TEST

START_TEST(test_tasks_warnings_and_failures)
{
    struct pres a = {0}, b = {0}, c = {0}, d = {0};

    fixture_fault(&fx, "{\"ct\":{\"vmid\":151}}");
    fixture_fault(&fx, "{\"task_exit\":{\"vzstart\":\"WARNINGS: 1\"}}");
    client_open(TOKEN_SECRET, 0, 0);
    ck_assert_int_eq(pve_start(client, "pve", 151, 0, on_pres, &a, NULL), 0);
    run();
    /* WARNINGS: n is success */
    ck_assert_int_eq(a.error, 0);
    ck_assert(a.have_task && a.task_success);
    ck_assert_uint_eq(a.warnings, 1);

    /* a template cannot start: the task fails, the error carries the UPID */
    ck_assert_int_eq(pve_start(client, "pve", 9000, 0, on_pres, &b, NULL), 0);
    /* a missing CT: 200 + UPID, then the task fails */
    ck_assert_int_eq(pve_start(client, "pve", 998, 0, on_pres, &c, NULL), 0);
    run();
    ck_assert_int_eq(b.error, -EREMOTEIO);
    ck_assert_int_eq(b.kind, PVE_ERR_TASK);
    ck_assert_int_eq(b.http_status, 0);
    ck_assert_str_eq(b.message, "you can't start a CT if it's a template");
    ck_assert_ptr_nonnull(b.upid);
    ck_assert_str_eq(b.perr_upid, b.upid);
    ck_assert_int_eq(c.kind, PVE_ERR_NOT_FOUND);

    /* stop, then shutdown on a stopped CT */
    ck_assert_int_eq(pve_stop(client, "pve", 151, 0, on_pres, &d, NULL), 0);
    run();
    ck_assert_int_eq(d.error, 0);
    pres_clear(&d);
    ck_assert_int_eq(pve_shutdown(client, "pve", 151, 10, true, 0, on_pres, &d, NULL), 0);
    run();
    ck_assert_int_eq(d.kind, PVE_ERR_NOT_RUNNING);
    pres_clear(&a);
    pres_clear(&b);
    pres_clear(&c);
    pres_clear(&d);
    client_done();
}
END_TEST

START_TEST(test_retry_policies)
{
    struct pres a = {0}, b = {0}, c = {0};

    fixture_fault(&fx, "{\"ct\":{\"vmid\":152}}");
    /* GET: transient errors retried */
    fixture_fault(&fx, "{\"path\":\"/lxc/152/status/current\",\"count\":2,\"status\":500,"
                       "\"reason\":\"can't lock file '/run/lock/lxc/pve-config-152.lock' - got "
                       "timeout\"}");
    /* task POST: 595 (nothing reached the node) retried, 596 not */
    fixture_fault(&fx, "{\"path\":\"/lxc/152/status/start\",\"count\":1,\"status\":595,"
                       "\"reason\":\"No route to host\"}");
    client_open(TOKEN_SECRET, 0, 0);
    ck_assert_int_eq(pve_status_current(client, "pve", 152, 0, on_pres, &a, NULL), 0);
    ck_assert_int_eq(pve_start(client, "pve", 152, 0, on_pres, &b, NULL), 0);
    run();
    ck_assert_int_eq(a.error, 0);
    ck_assert_uint_eq(a.attempts, 3);
    ck_assert_int_eq(b.error, 0);
    ck_assert_uint_eq(b.attempts <= 2 ? 1 : 0, 1);

    fixture_fault(&fx, "{\"path\":\"/lxc/152/status/stop\",\"count\":1,\"status\":596,"
                       "\"reason\":\"Connection timed out\"}");
    ck_assert_int_eq(pve_stop(client, "pve", 152, 0, on_pres, &c, NULL), 0);
    run();
    ck_assert_int_eq(c.error, -EREMOTEIO);
    ck_assert_int_eq(c.kind, PVE_ERR_CONNECTION);
    ck_assert_uint_eq(c.attempts, 1);
    pres_clear(&a);
    pres_clear(&b);
    pres_clear(&c);
    client_done();
}
END_TEST

START_TEST(test_deadline_while_locked)
{
    struct pres a = {0};
    struct json_object *p = json_object_new_object();

    fixture_fault(&fx, "{\"ct\":{\"vmid\":153,\"lock\":\"backup\"}}");
    client_open(TOKEN_SECRET, 0, 0);
    json_object_object_add(p, "memory", json_object_new_int(256));
    uint64_t t0 = uv_now(&loop);
    ck_assert_int_eq(pve_config_put(client, "pve", 153, p, 1500, on_pres, &a, NULL), 0);
    json_object_put(p);
    run();
    /* retried while the deadline allowed, then the last Proxmox error */
    ck_assert_int_eq(a.error, -EREMOTEIO);
    ck_assert_int_eq(a.kind, PVE_ERR_LOCKED);
    ck_assert_str_eq(a.message, "CT is locked (backup)");
    ck_assert_uint_ge(a.attempts, 3);
    ck_assert_uint_ge(a.done_at - t0, 1400);
    ck_assert_uint_lt(a.done_at - t0, 5000);
    pres_clear(&a);
    client_done();
}
END_TEST

START_TEST(test_config_delete_interfaces)
{
    struct pres a = {0}, b = {0}, c = {0}, d = {0}, e = {0};
    struct json_object *p = json_object_new_object(), *v, *st, *last = NULL;

    fixture_fault(&fx, "{\"ct\":{\"vmid\":160}}");
    client_open(TOKEN_SECRET, 0, 0);
    json_object_object_add(p, "onboot", json_object_new_boolean(1));
    json_object_object_add(p, "description", json_object_new_string("x y"));
    ck_assert_int_eq(pve_config_put(client, "pve", 160, p, 0, on_pres, &a, NULL), 0);
    json_object_put(p);
    ck_assert_int_eq(pve_interfaces(client, "pve", 160, 0, on_pres, &b, NULL), 0);
    run();
    ck_assert_int_eq(a.error, 0);
    ck_assert_ptr_null(a.data);
    ck_assert_int_eq(b.error, 0); /* data null: no IP yet, not an error */
    ck_assert_ptr_null(b.ipv4);
    ck_assert_int_eq(pve_config_get(client, "pve", 160, false, 0, on_pres, &c, NULL), 0);
    run();
    ck_assert(json_object_object_get_ex(c.data, "onboot", &v));
    ck_assert_str_eq(json_object_get_string(v), "1");
    pres_clear(&b);
    ck_assert_int_eq(pve_start(client, "pve", 160, 0, on_pres, &d, NULL), 0);
    run();
    ck_assert_int_eq(d.error, 0);
    ck_assert_int_eq(pve_interfaces(client, "pve", 160, 0, on_pres, &b, NULL), 0);
    ck_assert_int_eq(pve_resize(client, "pve", 160, "rootfs", "8G", 0, on_pres, &e, NULL), 0);
    run();
    ck_assert_str_eq(b.ipv4, "10.0.0.162");
    ck_assert_int_eq(e.error, 0);
    pres_clear(&d);
    /* running without force: refused; with force+purge: params in the query, no body */
    ck_assert_int_eq(pve_delete(client, "pve", 160, 0, 0, on_pres, &d, NULL), 0);
    run();
    ck_assert_int_eq(d.kind, PVE_ERR_RUNNING);
    pres_clear(&d);
    ck_assert_int_eq(
        pve_delete(client, "pve", 160, PVE_DELETE_FORCE | PVE_DELETE_PURGE, 0, on_pres, &d, NULL),
        0);
    run();
    ck_assert_int_eq(d.error, 0);
    st = fixture_state(&fx);
    ck_assert_uint_eq(requests_matching(st, "PUT", "/lxc/160/config", &last), 1);
    ck_assert_str_eq(req_field(last, "body"), "description=x%20y&onboot=1");
    ck_assert_uint_eq(requests_matching(st, "PUT", "/lxc/160/resize", &last), 1);
    ck_assert_str_eq(req_field(last, "body"), "disk=rootfs&size=8G");
    ck_assert_uint_eq(requests_matching(st, "DELETE", "/lxc/160", &last), 2);
    ck_assert_str_eq(req_field(last, "query"), "force=1&purge=1");
    ck_assert_str_eq(req_field(last, "body"), "");
    ck_assert_ptr_null(state_get(state_get(st, "cts", NULL), "160", NULL));
    json_object_put(st);
    pres_clear(&a);
    pres_clear(&b);
    pres_clear(&c);
    pres_clear(&d);
    pres_clear(&e);
    client_done();
}
END_TEST

static struct json_object *rule(const char *type, const char *action)
{
    struct json_object *p = json_object_new_object();
    json_object_object_add(p, "type", json_object_new_string(type));
    json_object_object_add(p, "action", json_object_new_string(action));
    json_object_object_add(p, "enable", json_object_new_int(1));
    return p;
}

START_TEST(test_firewall_group_by_scanning)
{
    struct pres a = {0}, b = {0}, c = {0}, d = {0}, l = {0};
    struct json_object *p;

    fixture_fault(&fx, "{\"ct\":{\"vmid\":170}}");
    client_open(TOKEN_SECRET, 0, 0);
    p = rule("out", "ACCEPT");
    ck_assert_int_eq(pve_fw_rule_add(client, "pve", 170, p, 0, on_pres, &a, NULL), 0);
    json_object_put(p);
    run();
    ck_assert_int_eq(a.error, 0);
    ck_assert_int_eq(
        pve_fw_group_set(client, "pve", 170, "sandbox-internet", true, 0, on_pres, &b, NULL), 0);
    run();
    ck_assert_int_eq(b.error, 0);
    /* a new rule is inserted at position 0: the group rule moves to 1 */
    pres_clear(&a);
    p = rule("in", "DROP");
    ck_assert_int_eq(pve_fw_rule_add(client, "pve", 170, p, 0, on_pres, &a, NULL), 0);
    json_object_put(p);
    run();
    pres_clear(&b);
    ck_assert_int_eq(
        pve_fw_group_set(client, "pve", 170, "sandbox-internet", true, 0, on_pres, &b, NULL),
        0); /* already there: nothing to do */
    run();
    ck_assert_int_eq(b.error, 0);
    /* someone changed the rules between our list and our delete: list again, then delete */
    fixture_fault(&fx, "{\"method\":\"DELETE\",\"path\":\"/lxc/170/firewall/rules/1\","
                       "\"count\":1,\"status\":500,\"reason\":\"detected modified "
                       "configuration - file changed by other user? Try again.\"}");
    ck_assert_int_eq(
        pve_fw_group_set(client, "pve", 170, "sandbox-internet", false, 0, on_pres, &c, NULL), 0);
    run();
    ck_assert_int_eq(c.error, 0);
    ck_assert_int_eq(
        pve_fw_group_set(client, "pve", 170, "sandbox-internet", false, 0, on_pres, &d, NULL), 0);
    ck_assert_int_eq(pve_fw_rules_list(client, "pve", 170, 0, on_pres, &l, NULL), 0);
    run();
    ck_assert_int_eq(d.error, 0);
    ck_assert_int_eq(l.error, 0);
    ck_assert_uint_eq(l.n_rules, 2);

    struct json_object *st = fixture_state(&fx), *last = NULL, *rules;
    /* one POST for the group, one DELETE at the position found by scanning (1, not 0) */
    ck_assert_uint_eq(requests_matching(st, "POST", "/lxc/170/firewall/rules", NULL), 3);
    ck_assert_uint_eq(requests_matching(st, "DELETE", "/lxc/170/firewall/rules/1", &last), 2);
    ck_assert_ptr_nonnull(strstr(req_field(last, "query"), "digest="));
    ck_assert_uint_eq(requests_matching(st, "DELETE", "/lxc/170/firewall/rules/0", NULL), 0);
    rules = state_get(state_get(st, "rules", NULL), "170", NULL);
    ck_assert_uint_eq(json_object_array_length(rules), 2);
    for (size_t i = 0; i < 2; i++) {
        struct json_object *t;
        json_object_object_get_ex(json_object_array_get_idx(rules, i), "type", &t);
        ck_assert_str_ne(json_object_get_string(t), "group");
    }
    json_object_put(st);

    /* firewall options */
    pres_clear(&a);
    p = json_object_new_object();
    json_object_object_add(p, "enable", json_object_new_boolean(1));
    json_object_object_add(p, "policy_in", json_object_new_string("ACCEPT"));
    ck_assert_int_eq(pve_fw_options_put(client, "pve", 170, p, 0, on_pres, &a, NULL), 0);
    json_object_put(p);
    pres_clear(&b);
    ck_assert_int_eq(pve_cluster_fw_options_get(client, 0, on_pres, &b, NULL), 0);
    run();
    ck_assert_int_eq(a.error, 0);
    ck_assert_int_eq(b.error, 0);
    st = fixture_state(&fx);
    ck_assert_uint_eq(requests_matching(st, "PUT", "/lxc/170/firewall/options", &last), 1);
    ck_assert_str_eq(req_field(last, "body"), "enable=1&policy_in=ACCEPT");
    json_object_put(st);
    pres_clear(&a);
    pres_clear(&b);
    pres_clear(&c);
    pres_clear(&d);
    pres_clear(&l);
    client_done();
}
END_TEST

START_TEST(test_listings)
{
    struct pres a = {0}, b = {0}, c = {0}, d = {0};
    struct pve_clone_params p = {
        .node = "pve", .template_vmid = 9000, .newid = 180, .pool = "sbx", .full = -1};

    client_open(TOKEN_SECRET, 0, 0);
    ck_assert_int_eq(pve_clone(client, &p, 0, on_pres, &a, NULL), 0);
    run();
    ck_assert_int_eq(a.error, 0);
    ck_assert_int_eq(pve_cluster_resources(client, 0, on_pres, &b, NULL), 0);
    ck_assert_int_eq(pve_pool_members(client, "sbx", 0, on_pres, &c, NULL), 0);
    ck_assert_int_eq(pve_pool_members(client, "nope", 0, on_pres, &d, NULL), 0);
    run();
    ck_assert_int_eq(b.error, 0);
    ck_assert_uint_eq(b.n_vms, 2); /* template + clone; the storage entry is skipped */
    ck_assert_int_eq(c.error, 0);
    ck_assert_uint_eq(c.n_vms, 1);
    ck_assert_int_eq(d.error, -EREMOTEIO);
    ck_assert_int_eq(d.kind, PVE_ERR_NOT_FOUND);
    pres_clear(&a);
    pres_clear(&b);
    pres_clear(&c);
    pres_clear(&d);
    client_done();
}
END_TEST

static struct pres close_res[4];

START_TEST(test_cancel_and_close)
{
    struct pve_clone_params p = {.node = "pve", .template_vmid = 9000, .newid = 190, .full = -1};
    struct pve_call *second = NULL;

    memset(close_res, 0, sizeof(close_res));
    client_open(TOKEN_SECRET, 0, 0);
    ck_assert_int_eq(pve_clone(client, &p, 0, on_pres, &close_res[0], NULL), 0);
    p.newid = 191;
    ck_assert_int_eq(pve_clone(client, &p, 0, on_pres, &close_res[1], &second), 0);
    p.newid = 192;
    ck_assert_int_eq(pve_clone(client, &p, 0, on_pres, &close_res[2], NULL), 0);
    /* the second is queued behind the first: cancelling it never calls back */
    pve_call_cancel(second);
    ck_assert_uint_eq(pve_client_in_flight(client), 2);
    run();
    ck_assert_int_eq(close_res[0].error, 0);
    ck_assert_int_eq(close_res[1].calls, 0);
    ck_assert_int_eq(close_res[2].error, 0);
    struct json_object *st = fixture_state(&fx);
    ck_assert_ptr_null(state_get(state_get(st, "cts", NULL), "191", NULL));
    json_object_put(st);

    /* closing with calls in flight: each completes once with -ECANCELED */
    ck_assert_int_eq(pve_start(client, "pve", 190, 0, on_pres, &close_res[3], NULL), 0);
    uv_run(&loop, UV_RUN_NOWAIT);
    pve_client_close(client, on_closed, &closed);
    ck_assert_int_eq(close_res[3].calls, 1);
    ck_assert_int_eq(close_res[3].error, -ECANCELED);
    run();
    ck_assert(closed);
    check_loop_done(&loop);
    for (int i = 0; i < 4; i++)
        pres_clear(&close_res[i]);
}
END_TEST

START_TEST(test_argument_errors)
{
    struct pres a = {0};
    struct pve_client *c = NULL;
    struct pve_config bad = {.base_url = "ftp://x", .token_id = "a", .token_secret = "b"};
    struct pve_clone_params p = {.node = "pve", .template_vmid = 9000, .full = -1};

    ck_assert_int_eq(uv_loop_init(&loop), 0);
    ck_assert_int_eq(pve_client_new(&loop, &bad, &c), -EINVAL);
    bad.base_url = "https://127.0.0.1:1";
    bad.token_secret = "x\r\nInjected: 1";
    ck_assert_int_eq(pve_client_new(&loop, &bad, &c), -EINVAL);
    check_loop_done(&loop);

    client_open(TOKEN_SECRET, 0, 0);
    /* newid 0 needs a vmid_range */
    ck_assert_int_eq(pve_clone(client, &p, 0, on_pres, &a, NULL), -EINVAL);
    ck_assert_int_eq(pve_start(client, "pve", 5, 0, on_pres, &a, NULL), -EINVAL);
    ck_assert_int_eq(pve_start(client, NULL, 100, 0, on_pres, &a, NULL), -EINVAL);
    ck_assert_int_eq(pve_request(client, "GET", "no-slash", NULL, 0, on_pres, &a, NULL), -EINVAL);
    ck_assert_int_eq(pve_request(client, "PATCH", "/x", NULL, 0, on_pres, &a, NULL), -EINVAL);
    ck_assert_int_eq(pve_fw_group_set(client, "pve", 100, "", true, 0, on_pres, &a, NULL), -EINVAL);
    ck_assert_uint_eq(pve_client_in_flight(client), 0);
    client_done();
    ck_assert_int_eq(a.calls, 0);
    pve_client_close(NULL, NULL, NULL);
    pve_call_cancel(NULL);
}
END_TEST

/* ---- one smoke test against tests/pve-sim (API only, no containers) ---- */

struct sim {
    pid_t pid;
    char dir[128];
    char url[128];
    char fingerprint[128];
    char secret[128];
};

static bool sim_start(struct sim *sm)
{
    const char *root = getenv("SANDBOXD_SOURCE_ROOT");
    char script[PATH_MAX], line[2048], info[256];
    int out[2];
    size_t len = 0;

    memset(sm, 0, sizeof(*sm));
    snprintf(script, sizeof(script), "%s/tests/pve-sim/pve-sim", root ? root : ".");
    if (access(script, R_OK) != 0)
        return false;
    snprintf(sm->dir, sizeof(sm->dir), "/run/pve-sim-test-libpve-%d", (int)getpid());
    ck_assert_int_eq(mkdir(sm->dir, 0755), 0);
    ck_assert_int_eq(pipe2(out, O_CLOEXEC), 0);
    sm->pid = fork();
    ck_assert_int_ge(sm->pid, 0);
    if (sm->pid == 0) {
        const char *python = access("/usr/bin/python3", X_OK) == 0 ? "/usr/bin/python3" : "python3";
        /* if this test dies on a failed assertion, the simulator stops (and cleans up) */
        (void)prctl(PR_SET_PDEATHSIG, SIGTERM);
        dup2(out[1], 1);
        execlp(python, python, script, "--state-dir", sm->dir, "--no-containers", "--clone-time",
               "0.05", "--dhcp-delay", "0.1", "--auth-failure-delay", "0", (char *)NULL);
        _exit(127);
    }
    close(out[1]);
    while (len < sizeof(line) - 1) {
        ssize_t k = read(out[0], line + len, 1);
        if (k <= 0 || line[len] == '\n')
            break;
        len++;
    }
    line[len] = 0;
    close(out[0]);
    ck_assert_msg(strncmp(line, "pve-sim ready ", 14) == 0, "pve-sim did not start: '%s'", line);
    ck_assert_int_eq(sscanf(strstr(line, "url="), "url=%127s", sm->url), 1);
    ck_assert_int_eq(sscanf(strstr(line, "fingerprint="), "fingerprint=%127s", sm->fingerprint), 1);
    snprintf(info, sizeof(info), "%s/sim-info.json", sm->dir);
    struct json_object *o = json_object_from_file(info), *t, *v;
    ck_assert_ptr_nonnull(o);
    ck_assert(json_object_object_get_ex(o, "tokens", &t));
    ck_assert(json_object_object_get_ex(t, "sandboxd@pve!sandboxd", &v));
    snprintf(sm->secret, sizeof(sm->secret), "%s", json_object_get_string(v));
    json_object_put(o);
    return true;
}

static void sim_stop(struct sim *sm)
{
    char cmd[256];
    int status;

    if (sm->pid > 0) {
        kill(sm->pid, SIGTERM);
        waitpid(sm->pid, &status, 0);
    }
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", sm->dir);
    (void)system(cmd);
}

#define SIM_CLONES 3

START_TEST(test_pve_sim_smoke)
{
    struct sim sm;
    struct pres c[SIM_CLONES] = {0}, a = {0};
    struct pve_clone_params p = {.node = "pve",
                                 .template_vmid = 9000,
                                 .pool = "sandboxd",
                                 .description = "sandboxd:v1 smoke",
                                 .full = -1};

    if (geteuid() != 0) {
        fprintf(stderr, "pve-sim smoke test needs root: not run\n");
        return;
    }
    if (!sim_start(&sm)) {
        fprintf(stderr, "tests/pve-sim not found: smoke test not run\n");
        return;
    }
    struct pve_config cfg = {
        .base_url = sm.url,
        .token_id = "sandboxd@pve!sandboxd",
        .token_secret = sm.secret,
        .tls = {.fingerprint = sm.fingerprint},
        .task_timeout_ms = 30000,
        .vmid_min = 100000,
        .vmid_max = 100999,
    };
    ck_assert_int_eq(uv_loop_init(&loop), 0);
    ck_assert_int_eq(pve_client_new(&loop, &cfg, &client), 0);
    closed = false;

    ck_assert_int_eq(pve_version(client, 0, on_pres, &a, NULL), 0);
    for (int i = 0; i < SIM_CLONES; i++)
        ck_assert_int_eq(pve_clone(client, &p, 0, on_pres, &c[i], NULL), 0);
    run();
    ck_assert_int_eq(a.error, 0);
    for (int i = 0; i < SIM_CLONES; i++)
        ck_assert_msg(c[i].error == 0, "clone %d: %d %s", i, c[i].error, strna(c[i].message));
    pres_clear(&a);

    ck_assert_int_eq(pve_start(client, "pve", c[0].vmid, 0, on_pres, &a, NULL), 0);
    run();
    ck_assert_msg(a.error == 0, "start: %d %s", a.error, strna(a.message));
    /* the IP arrives after the start task: poll */
    char *ip = NULL;
    for (int i = 0; i < 100 && !ip; i++) {
        pres_clear(&a);
        ck_assert_int_eq(pve_interfaces(client, "pve", c[0].vmid, 0, on_pres, &a, NULL), 0);
        run();
        ck_assert_int_eq(a.error, 0);
        if (a.ipv4)
            ip = strdup(a.ipv4);
        else
            usleep(50000);
    }
    ck_assert_ptr_nonnull(ip);
    free(ip);
    pres_clear(&a);
    ck_assert_int_eq(
        pve_fw_group_set(client, "pve", c[0].vmid, "sandbox-internet", true, 0, on_pres, &a, NULL),
        0);
    run();
    ck_assert_msg(a.error == 0, "fw group: %d %s", a.error, strna(a.message));
    pres_clear(&a);
    ck_assert_int_eq(pve_pool_members(client, "sandboxd", 0, on_pres, &a, NULL), 0);
    run();
    ck_assert_int_eq(a.error, 0);
    ck_assert_uint_eq(a.n_vms, SIM_CLONES);
    pres_clear(&a);
    for (int i = 0; i < SIM_CLONES; i++) {
        ck_assert_int_eq(
            pve_delete(client, "pve", c[i].vmid,
                       PVE_DELETE_FORCE | PVE_DELETE_PURGE | PVE_DELETE_DESTROY_UNREFERENCED, 0,
                       on_pres, &a, NULL),
            0);
        run();
        ck_assert_msg(a.error == 0, "delete: %d %s", a.error, strna(a.message));
        pres_clear(&a);
        pres_clear(&c[i]);
    }
    ck_assert_int_eq(pve_pool_members(client, "sandboxd", 0, on_pres, &a, NULL), 0);
    run();
    ck_assert_int_eq(a.error, 0);
    ck_assert_uint_eq(a.n_vms, 0);
    pres_clear(&a);
    client_done();
    sim_stop(&sm);
}
END_TEST

START_TEST(test_connect_refused_retried)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t sl = sizeof(sa);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    char url[64];
    struct pres a = {0}, b = {0};
    struct pve_clone_params p = {.node = "pve", .template_vmid = 9000, .newid = 300, .full = -1};

    /* a bound port nobody listens on: every connect is refused, nothing is ever sent */
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&sa, &sl), 0);
    snprintf(url, sizeof(url), "https://127.0.0.1:%d", ntohs(sa.sin_port));
    struct pve_config cfg = {.base_url = url,
                             .token_id = TOKEN_ID,
                             .token_secret = TOKEN_SECRET,
                             .tls = {.verify = true}};
    ck_assert_int_eq(uv_loop_init(&loop), 0);
    ck_assert_int_eq(pve_client_new(&loop, &cfg, &client), 0);
    uint64_t t0 = uv_now(&loop);
    ck_assert_int_eq(pve_version(client, 500, on_pres, &a, NULL), 0);
    ck_assert_int_eq(pve_clone(client, &p, 500, on_pres, &b, NULL), 0);
    run();
    close(fd);
    ck_assert_int_eq(a.error, -ECONNREFUSED);
    ck_assert_uint_ge(a.attempts, 2);
    ck_assert_int_eq(b.error, -ECONNREFUSED);
    ck_assert_uint_ge(b.attempts, 2); /* safe: the clone request never left */
    ck_assert_uint_eq(b.vmid, 0);
    ck_assert_uint_lt(b.done_at - t0, 4000);
    pres_clear(&a);
    pres_clear(&b);
    client_done();
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("pve");
    TCase *tc = tcase_create("fake-pve");

    tcase_add_unchecked_fixture(tc, fixture_certs_init, fixture_certs_done);
    tcase_add_checked_fixture(tc, start_fixture, stop_fixture);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_version_and_auth);
    tcase_add_test(tc, test_clone_explicit);
    tcase_add_test(tc, test_task_status_log_wait);
    tcase_add_test(tc, test_parallel_clones_one_template);
    tcase_add_test(tc, test_clone_retries_template_lock);
    tcase_add_test(tc, test_clone_vmid_already_exists);
    tcase_add_test(tc, test_error_body_old_form);
    tcase_add_test(tc, test_error_body_new_form);
    tcase_add_test(tc, test_tasks_warnings_and_failures);
    tcase_add_test(tc, test_retry_policies);
    tcase_add_test(tc, test_deadline_while_locked);
    tcase_add_test(tc, test_config_delete_interfaces);
    tcase_add_test(tc, test_firewall_group_by_scanning);
    tcase_add_test(tc, test_listings);
    tcase_add_test(tc, test_cancel_and_close);
    tcase_add_test(tc, test_argument_errors);
    suite_add_tcase(s, tc);

    TCase *tc_sim = tcase_create("pve-sim");
    tcase_set_timeout(tc_sim, 90);
    tcase_add_test(tc_sim, test_pve_sim_smoke);
    tcase_add_test(tc_sim, test_connect_refused_retried);
    suite_add_tcase(s, tc_sim);
    return s;
}

int main(void)
{
    return check_run_suite(suite());
}
