/* The Proxmox client (lib/pve/) against a fake Proxmox API (fixtures/fake-pve.py --mode pve),
 * and one smoke test against tests/pve-sim. */
#include "macro.h"

#include <check.h>
#include <errno.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>

#include "pve.h"
#include "volume-locate.h"
#include "tests/check-util.h"
#include "tests/lib/fixtures/fixture-server.h"
#include "tests/lib/fixtures/pve-client.h"
#include "tests/lib/fixtures/pve-sim.h"

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

/* Three copies of a template on the node: the clones run on all three at once (none meets
 * the lock), and each copy runs one at a time. */
START_TEST(test_clones_spread_over_copies)
{
    struct pres r[N_PARALLEL] = {0};
    const uint32_t copies[] = {9010, 9020};
    struct pve_clone_params p = {.node = "pve",
                                 .template_vmid = 9000,
                                 .copies = copies,
                                 .n_copies = ELEMENTSOF(copies),
                                 .full = -1};
    struct json_object *st;

    client_open(TOKEN_SECRET, 100000, 100099);
    fixture_fault(&fx, "{\"ct\": {\"vmid\": 9010, \"template\": 1}}");
    fixture_fault(&fx, "{\"ct\": {\"vmid\": 9020, \"template\": 1}}");
    for (int i = 0; i < N_PARALLEL; i++)
        ck_assert_int_eq(pve_clone(client, &p, 0, on_pres, &r[i], NULL), 0);
    run();
    for (int i = 0; i < N_PARALLEL; i++)
        ck_assert_msg(r[i].error == 0, "clone %d: %d %s", i, r[i].error, strna(r[i].message));
    st = fixture_state(&fx);
    ck_assert_int_eq(json_object_get_int(state_get(st, "counters", "clone_locked")), 0);
    ck_assert_int_eq(json_object_get_int(state_get(st, "counters", "clone_ok")), N_PARALLEL);
    ck_assert_int_eq(json_object_get_int(state_get(st, "counters", "clone_overlap_max")), 3);
    json_object_put(st);
    for (int i = 0; i < N_PARALLEL; i++)
        pres_clear(&r[i]);
    client_done();
}
END_TEST

/* A copy added while a clone runs (a replica made): the next clone with the longer list of
 * copies joins the same queue and runs on the new copy at once, never on the busy one. */
START_TEST(test_copy_added_joins_queue)
{
    struct pres r[2] = {0};
    const uint32_t copies[] = {9010};
    struct pve_clone_params p = {.node = "pve", .template_vmid = 9000, .full = -1};
    struct json_object *st;

    client_open(TOKEN_SECRET, 100000, 100099);
    fixture_fault(&fx, "{\"ct\": {\"vmid\": 9010, \"template\": 1}}");
    ck_assert_int_eq(pve_clone(client, &p, 0, on_pres, &r[0], NULL), 0);
    p.copies = copies;
    p.n_copies = ELEMENTSOF(copies);
    ck_assert_int_eq(pve_clone(client, &p, 0, on_pres, &r[1], NULL), 0);
    run();
    for (int i = 0; i < 2; i++)
        ck_assert_msg(r[i].error == 0, "clone %d: %d %s", i, r[i].error, strna(r[i].message));
    st = fixture_state(&fx);
    ck_assert_int_eq(json_object_get_int(state_get(st, "counters", "clone_locked")), 0);
    ck_assert_int_eq(json_object_get_int(state_get(st, "counters", "clone_overlap_max")), 2);
    json_object_put(st);
    for (int i = 0; i < 2; i++)
        pres_clear(&r[i]);
    client_done();
}
END_TEST

/* One copy busy: a waiting urgent clone (a create) goes before an earlier non-urgent one (a
 * pool refill). */
START_TEST(test_urgent_clone_first)
{
    struct pres r[3] = {0};
    struct pve_clone_params p = {.node = "pve", .template_vmid = 9000, .full = -1};
    const uint32_t ids[3] = {121, 122, 123};
    const bool urgent[3] = {false, false, true};
    struct json_object *st, *reqs;
    uint32_t order[3];
    size_t n = 0;

    client_open(TOKEN_SECRET, 0, 0);
    for (int i = 0; i < 3; i++) {
        p.newid = ids[i];
        p.urgent = urgent[i];
        ck_assert_int_eq(pve_clone(client, &p, 0, on_pres, &r[i], NULL), 0);
    }
    run();
    st = fixture_state(&fx);
    reqs = state_get(st, "requests", NULL);
    for (size_t i = 0; i < json_object_array_length(reqs) && n < 3; i++) {
        struct json_object *q = json_object_array_get_idx(reqs, i), *m, *path, *body;

        if (json_object_object_get_ex(q, "method", &m) &&
            strcmp(json_object_get_string(m), "POST") == 0 &&
            json_object_object_get_ex(q, "path", &path) &&
            strstr(json_object_get_string(path), "/lxc/9000/clone") &&
            json_object_object_get_ex(q, "body", &body))
            for (int k = 0; k < 3; k++) {
                char want[32];

                snprintf(want, sizeof want, "newid=%u", ids[k]);
                if (strstr(json_object_get_string(body), want))
                    order[n++] = ids[k];
            }
    }
    ck_assert_uint_eq(n, 3);
    ck_assert_uint_eq(order[0], 121); /* running when the others came */
    ck_assert_uint_eq(order[1], 123); /* urgent: ahead of 122 */
    ck_assert_uint_eq(order[2], 122);
    json_object_put(st);
    for (int i = 0; i < 3; i++) {
        ck_assert_int_eq(r[i].error, 0);
        pres_clear(&r[i]);
    }
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
    /* volume keys: mpN or unusedN, N 0..255 without leading zeros; rootfs never moves */
    static const char *const bad_keys[] = {"rootfs", "mp", "mp256", "mp01", "mp-1", "mp1x",
                                           "unused", "unused300", "", NULL};
    for (size_t i = 0; i < ELEMENTSOF(bad_keys); i++) {
        ck_assert_int_eq(
            pve_move_volume(client, "pve", 100, bad_keys[i], 101, "mp0", 0, on_pres, &a, NULL),
            -EINVAL);
        ck_assert_int_eq(
            pve_move_volume(client, "pve", 100, "mp0", 101, bad_keys[i], 0, on_pres, &a, NULL),
            -EINVAL);
    }
    ck_assert_int_eq(pve_move_volume(client, "pve", 100, "mp0", 99, "mp0", 0, on_pres, &a, NULL),
                     -EINVAL);
    ck_assert_uint_eq(pve_client_in_flight(client), 0);
    client_done();
    ck_assert_int_eq(a.calls, 0);
    pve_client_close(NULL, NULL, NULL);
    pve_call_cancel(NULL);
}
END_TEST

/* ---- a failure at each kind of call and each endpoint ---- */

#define TEST_UPID "UPID:pve:00001234:01016E64:63AD7D74:vzstart:150:root@pam!test:"

/* Every typed call, with the method and path (a regular expression) of its first request. */
static const struct {
    const char *method;
    const char *path;
} typed_calls[] = {
    {"GET", "^/version$"},
    {"GET", "^/cluster/nextid$"},
    {"GET", "^/cluster/resources$"},
    {"GET", "^/pools/sbx$"},
    {"GET", "^/nodes/pve/lxc$"},
    {"POST", "/lxc/9000/clone$"},
    {"GET", "/lxc/150/config$"},
    {"PUT", "/lxc/150/config$"},
    {"PUT", "/lxc/150/resize$"},
    {"POST", "/lxc/150/status/start$"},
    {"POST", "/lxc/150/status/stop$"},
    {"POST", "/lxc/150/status/shutdown$"},
    {"DELETE", "/lxc/150$"},
    {"GET", "/lxc/150/status/current$"},
    {"GET", "/lxc/150/interfaces$"},
    {"GET", "/tasks/.*/status$"},
    {"GET", "/tasks/.*/log$"},
    {"GET", "/tasks/.*/status$"}, /* pve_wait_task */
    {"GET", "^/cluster/firewall/options$"},
    {"PUT", "/lxc/150/firewall/options$"},
    {"POST", "/lxc/150/firewall/ipset$"},
    {"POST", "/lxc/150/firewall/ipset/sbx$"},
    {"GET", "/lxc/150/firewall/rules$"},
    {"POST", "/lxc/150/firewall/rules$"},
    {"DELETE", "/lxc/150/firewall/rules/0$"},
    {"GET", "/lxc/150/firewall/rules$"}, /* pve_fw_group_set */
    {"GET", "^/cluster/nextid$"},        /* pve_request */
    {"DELETE", "/lxc/150/firewall/ipset/sbx$"},
    {"POST", "/lxc/150/firewall/ipset$"}, /* pve_fw_ipset_rename */
};

static int typed_call_start(size_t i, struct pres *p)
{
    struct pve_clone_params cp = {.node = "pve", .template_vmid = 9000, .newid = 151, .full = -1};
    struct json_object *o = json_object_new_object();
    int r = -ENOENT;

    json_object_object_add(o, "memory", json_object_new_int(256));
    switch (i) {
    case 0:
        r = pve_version(client, 0, on_pres, p, NULL);
        break;
    case 1:
        r = pve_nextid(client, 0, on_pres, p, NULL);
        break;
    case 2:
        r = pve_cluster_resources(client, 0, on_pres, p, NULL);
        break;
    case 3:
        r = pve_pool_members(client, "sbx", 0, on_pres, p, NULL);
        break;
    case 4:
        r = pve_lxc_list(client, "pve", 0, on_pres, p, NULL);
        break;
    case 5:
        r = pve_clone(client, &cp, 0, on_pres, p, NULL);
        break;
    case 6:
        r = pve_config_get(client, "pve", 150, true, 0, on_pres, p, NULL);
        break;
    case 7:
        r = pve_config_put(client, "pve", 150, o, 0, on_pres, p, NULL);
        break;
    case 8:
        r = pve_resize(client, "pve", 150, "rootfs", "+1G", 0, on_pres, p, NULL);
        break;
    case 9:
        r = pve_start(client, "pve", 150, 0, on_pres, p, NULL);
        break;
    case 10:
        r = pve_stop(client, "pve", 150, 0, on_pres, p, NULL);
        break;
    case 11:
        r = pve_shutdown(client, "pve", 150, 5, false, 0, on_pres, p, NULL);
        break;
    case 12:
        r = pve_delete(client, "pve", 150, PVE_DELETE_PURGE, 0, on_pres, p, NULL);
        break;
    case 13:
        r = pve_status_current(client, "pve", 150, 0, on_pres, p, NULL);
        break;
    case 14:
        r = pve_interfaces(client, "pve", 150, 0, on_pres, p, NULL);
        break;
    case 15:
        r = pve_task_status(client, NULL, TEST_UPID, 0, on_pres, p, NULL);
        break;
    case 16:
        r = pve_task_log(client, "pve", TEST_UPID, 0, 10, 0, on_pres, p, NULL);
        break;
    case 17:
        r = pve_wait_task(client, NULL, TEST_UPID, 0, on_pres, p, NULL);
        break;
    case 18:
        r = pve_cluster_fw_options_get(client, 0, on_pres, p, NULL);
        break;
    case 19:
        r = pve_fw_options_put(client, "pve", 150, o, 0, on_pres, p, NULL);
        break;
    case 20:
        r = pve_fw_ipset_create(client, "pve", 150, "sbx", 0, on_pres, p, NULL);
        break;
    case 21:
        r = pve_fw_ipset_add(client, "pve", 150, "sbx", "10.0.0.1", 0, on_pres, p, NULL);
        break;
    case 22:
        r = pve_fw_rules_list(client, "pve", 150, 0, on_pres, p, NULL);
        break;
    case 23:
        r = pve_fw_rule_add(client, "pve", 150, o, 0, on_pres, p, NULL);
        break;
    case 24:
        r = pve_fw_rule_delete(client, "pve", 150, 0, "d", 0, on_pres, p, NULL);
        break;
    case 25:
        r = pve_fw_group_set(client, "pve", 150, "g", true, 0, on_pres, p, NULL);
        break;
    case 26:
        r = pve_request(client, "GET", "/cluster/nextid", NULL, 0, on_pres, p, NULL);
        break;
    case 27:
        r = pve_fw_ipset_delete(client, "pve", 150, "sbx", 0, on_pres, p, NULL);
        break;
    case 28:
        r = pve_fw_ipset_rename(client, "pve", 150, "sbx-new", "sbx", 0, on_pres, p, NULL);
        break;
    }
    json_object_put(o);
    return r;
}

START_TEST(test_failure_each_call)
{
    char fault[256];

    client_open(TOKEN_SECRET, 0, 0);
    for (size_t i = 0; i < ELEMENTSOF(typed_calls); i++) {
        struct pres p = {0};
        /* refused for good: never retried, whatever the endpoint's class */
        snprintf(fault, sizeof(fault),
                 "{\"method\":\"%s\",\"path\":\"%s\",\"count\":1,\"status\":403,"
                 "\"reason\":\"Permission check failed (/vms/150, VM.Audit)\"}",
                 typed_calls[i].method, typed_calls[i].path);
        fixture_fault(&fx, fault);
        ck_assert_int_eq(typed_call_start(i, &p), 0);
        run();
        ck_assert_msg(p.calls == 1 && p.error == -EREMOTEIO, "call %zu: %d calls, error %d", i,
                      p.calls, p.error);
        ck_assert_int_eq(p.kind, PVE_ERR_PERMISSION);
        ck_assert_int_eq(p.http_status, 403);
        ck_assert_str_eq(p.message, "Permission check failed (/vms/150, VM.Audit)");
        ck_assert_uint_eq(p.attempts, 1);
        ck_assert_ptr_null(p.data);
        ck_assert_ptr_null(p.ipv4);
        ck_assert_uint_eq(p.n_vms, 0);
        ck_assert_uint_eq(p.n_rules, 0);
        ck_assert_uint_eq(p.vmid, 0); /* a refused clone created nothing */
        pres_clear(&p);
    }
    /* every fault was met exactly once */
    struct json_object *st = fixture_state(&fx), *faults = state_get(st, "faults", NULL);
    ck_assert_uint_eq(json_object_array_length(faults), ELEMENTSOF(typed_calls));
    for (size_t i = 0; i < json_object_array_length(faults); i++)
        ck_assert_int_eq(
            json_object_get_int(state_get(json_object_array_get_idx(faults, i), "hits", NULL)), 1);
    json_object_put(st);
    ck_assert_uint_eq(pve_client_in_flight(client), 0);
    client_done();
}
END_TEST

START_TEST(test_retry_classes)
{
    struct pres a = {0}, b = {0}, c = {0}, d = {0};
    struct json_object *o = json_object_new_object();

    json_object_object_add(o, "type", json_object_new_string("in"));
    json_object_object_add(o, "action", json_object_new_string("ACCEPT"));
    fixture_fault(&fx, "{\"ct\":{\"vmid\":150}}");
    /* creating: a lock is retried, an unknown server error is not */
    fixture_fault(&fx, "{\"method\":\"POST\",\"path\":\"/lxc/150/firewall/rules$\",\"count\":2,"
                       "\"status\":500,\"reason\":\"can't lock file '/run/lock/pve-manager/"
                       "pve-firewall-150.lck' - got timeout\"}");
    client_open(TOKEN_SECRET, 0, 0);
    ck_assert_int_eq(pve_fw_rule_add(client, "pve", 150, o, 0, on_pres, &a, NULL), 0);
    run();
    ck_assert_int_eq(a.error, 0);
    ck_assert_uint_eq(a.attempts, 3);
    fixture_fault(&fx, "{\"method\":\"POST\",\"path\":\"/lxc/150/firewall/ipset$\",\"count\":1,"
                       "\"status\":500,\"reason\":\"something odd\"}");
    ck_assert_int_eq(pve_fw_ipset_create(client, "pve", 150, "sbx", 0, on_pres, &b, NULL), 0);
    run();
    ck_assert_int_eq(b.kind, PVE_ERR_SERVER);
    ck_assert_uint_eq(b.attempts, 1);
    /* a raw POST is never retried; a raw GET is */
    fixture_fault(&fx, "{\"method\":\"POST\",\"path\":\"/lxc/150/status/start$\",\"count\":1,"
                       "\"status\":500,\"reason\":\"CT is locked (backup)\"}");
    ck_assert_int_eq(
        pve_request(client, "POST", "/nodes/pve/lxc/150/status/start", NULL, 0, on_pres, &c, NULL),
        0);
    fixture_fault(&fx, "{\"path\":\"^/version$\",\"count\":1,\"status\":503,"
                       "\"reason\":\"Service Unavailable\"}");
    ck_assert_int_eq(pve_request(client, "GET", "/version", NULL, 0, on_pres, &d, NULL), 0);
    run();
    ck_assert_int_eq(c.kind, PVE_ERR_LOCKED);
    ck_assert_uint_eq(c.attempts, 1);
    ck_assert_int_eq(d.error, 0);
    ck_assert_uint_eq(d.attempts, 2);
    json_object_put(o);
    pres_clear(&a);
    pres_clear(&b);
    pres_clear(&c);
    pres_clear(&d);
    client_done();
}
END_TEST

/* A clone POST answered 596 (pveproxy's proxy timeout: the clone may still run) keeps its id
 * and looks at the id's config: done (ours, unlocked) is success, nothing until the deadline
 * is the 596 with the id kept, another description is someone else's container (id 0). */
START_TEST(test_clone_unknown_outcome)
{
    struct pres a = {0}, b = {0}, c = {0};
    struct pve_clone_params p = {
        .node = "pve", .template_vmid = 9000, .newid = 130, .description = "mine"};
    struct json_object *st;

    client_open(TOKEN_SECRET, 0, 0);
    /* nothing appears */
    fixture_fault(&fx, "{\"path\":\"/lxc/9000/clone$\",\"count\":1,\"status\":596,"
                       "\"reason\":\"Connection timed out\"}");
    ck_assert_int_eq(pve_clone(client, &p, 1500, on_pres, &a, NULL), 0);
    run();
    ck_assert_int_eq(a.error, -EREMOTEIO);
    ck_assert_int_eq(a.http_status, 596);
    ck_assert_uint_eq(a.vmid, 130);
    ck_assert_uint_eq(a.attempts, 1);
    ck_assert_ptr_null(a.upid);
    st = fixture_state(&fx);
    ck_assert_uint_ge(requests_matching(st, "GET", "/lxc/130/config", NULL), 2);
    json_object_put(st);

    /* the clone shows up, locked until it is done */
    fixture_fault(&fx, "{\"ct\":{\"vmid\":131,\"lock\":\"create\","
                       "\"config\":{\"hostname\":\"x\",\"description\":\"mine\\n\"}}}");
    fixture_fault(&fx, "{\"vmid\":131,\"lock_ms\":600,\"lock\":\"create\"}");
    fixture_fault(&fx, "{\"path\":\"/lxc/9000/clone$\",\"count\":1,\"status\":596,"
                       "\"reason\":\"Connection timed out\"}");
    p.newid = 131;
    ck_assert_int_eq(pve_clone(client, &p, 5000, on_pres, &b, NULL), 0);
    run();
    ck_assert_int_eq(b.error, 0);
    ck_assert_uint_eq(b.vmid, 131);

    /* the id holds someone else's container */
    fixture_fault(&fx, "{\"ct\":{\"vmid\":132,\"config\":{\"description\":\"other\"}}}");
    fixture_fault(&fx, "{\"path\":\"/lxc/9000/clone$\",\"count\":1,\"status\":596,"
                       "\"reason\":\"Connection timed out\"}");
    p.newid = 132;
    ck_assert_int_eq(pve_clone(client, &p, 5000, on_pres, &c, NULL), 0);
    run();
    ck_assert_int_eq(c.error, -EREMOTEIO);
    ck_assert_int_eq(c.http_status, 596);
    ck_assert_uint_eq(c.vmid, 0);
    pres_clear(&a);
    pres_clear(&b);
    pres_clear(&c);
    client_done();
}
END_TEST

/* At most PVE_MAX_CALLS_PER_NODE_DEFAULT requests per node in flight; the others wait in
 * order, their deadline counting (one that passes while waiting was never sent). */
START_TEST(test_per_node_cap)
{
    struct pres held[PVE_MAX_CALLS_PER_NODE_DEFAULT] = {0}, late = {0}, next = {0};
    struct json_object *st;

    fixture_fault(&fx, "{\"ct\":{\"vmid\":150,\"status\":\"running\"}}");
    fixture_fault(&fx, "{\"path\":\"/lxc/150/status/current$\",\"count\":4,\"delay_ms\":600}");
    client_open(TOKEN_SECRET, 0, 0);
    for (size_t i = 0; i < ELEMENTSOF(held); i++)
        ck_assert_int_eq(pve_status_current(client, "pve", 150, 0, on_pres, &held[i], NULL), 0);
    ck_assert_int_eq(pve_status_current(client, "pve", 150, 300, on_pres, &late, NULL), 0);
    ck_assert_int_eq(pve_status_current(client, "pve", 150, 0, on_pres, &next, NULL), 0);
    run();
    for (size_t i = 0; i < ELEMENTSOF(held); i++) {
        ck_assert_int_eq(held[i].error, 0);
        ck_assert_uint_lt(late.done_at, held[i].done_at);
        ck_assert_uint_ge(next.done_at, held[i].done_at);
        pres_clear(&held[i]);
    }
    ck_assert_int_eq(late.error, -ETIMEDOUT);
    ck_assert_uint_eq(late.attempts, 0);
    ck_assert_int_eq(next.error, 0);
    st = fixture_state(&fx);
    ck_assert_uint_eq(requests_matching(st, "GET", "/lxc/150/status/current", NULL), 5);
    json_object_put(st);
    pres_clear(&late);
    pres_clear(&next);
    client_done();
}
END_TEST

START_TEST(test_clone_failure_each_step)
{
    struct pres a = {0}, b = {0}, c = {0}, d = {0}, e = {0};
    struct pve_clone_params p = {.node = "pve", .template_vmid = 9000, .full = -1};
    struct json_object *st;

    client_open(TOKEN_SECRET, 100000, 100099);
    /* the listing of ids in use: nothing was cloned */
    fixture_fault(&fx, "{\"path\":\"^/cluster/resources$\",\"count\":1,\"status\":403,"
                       "\"reason\":\"Permission check failed (/, Sys.Audit)\"}");
    ck_assert_int_eq(pve_clone(client, &p, 0, on_pres, &a, NULL), 0);
    run();
    ck_assert_int_eq(a.kind, PVE_ERR_PERMISSION);
    ck_assert_uint_eq(a.vmid, 0);
    ck_assert_ptr_null(a.upid);
    st = fixture_state(&fx);
    ck_assert_uint_eq(requests_matching(st, "POST", "/clone", NULL), 0);
    json_object_put(st);

    /* the clone's task fails: the container may exist, the id is reported */
    fixture_fault(&fx, "{\"task_exit\":{\"vzclone\":\"clone failed: out of space\"}}");
    ck_assert_int_eq(pve_clone(client, &p, 0, on_pres, &b, NULL), 0);
    run();
    ck_assert_int_eq(b.kind, PVE_ERR_TASK);
    ck_assert_str_eq(b.message, "clone failed: out of space");
    ck_assert_uint_ge(b.vmid, 100000);
    ck_assert_ptr_nonnull(b.upid);
    ck_assert_str_eq(b.perr_upid, b.upid);

    /* the task's status cannot be read: the clone started, the id is reported */
    fixture_fault(&fx, "{\"path\":\"/tasks/.*/status$\",\"count\":1,\"status\":403,"
                       "\"reason\":\"Permission check failed (/nodes/pve, Sys.Audit)\"}");
    ck_assert_int_eq(pve_clone(client, &p, 0, on_pres, &c, NULL), 0);
    run();
    ck_assert_int_eq(c.kind, PVE_ERR_PERMISSION);
    ck_assert_uint_ge(c.vmid, 100000);
    ck_assert_uint_ne(c.vmid, b.vmid);
    ck_assert_ptr_nonnull(c.upid);
    /* its task goes on and holds the template until it ends */
    ck_assert_int_eq(pve_wait_task(client, NULL, c.upid, 0, on_pres, &d, NULL), 0);
    run();
    ck_assert_int_eq(d.error, 0);
    pres_clear(&d);

    /* waiting behind another clone of the template until the deadline: nothing was sent */
    fixture_fault(&fx, "{\"vmid\":9000,\"lock_ms\":1000,\"lock\":\"disk\"}");
    p.newid = 100300;
    pres_clear(&a);
    ck_assert_int_eq(pve_clone(client, &p, 0, on_pres, &a, NULL), 0);
    p.newid = 100301;
    ck_assert_int_eq(pve_clone(client, &p, 200, on_pres, &e, NULL), 0);
    run();
    ck_assert_int_eq(a.error, 0);
    ck_assert_int_eq(e.error, -ETIMEDOUT);
    ck_assert_uint_eq(e.vmid, 0);
    ck_assert_uint_eq(e.attempts, 0);
    ck_assert_uint_lt(e.done_at, a.done_at);
    st = fixture_state(&fx);
    ck_assert_ptr_null(state_get(state_get(st, "cts", NULL), "100301", NULL));
    json_object_put(st);

    /* the POST's answer never comes: the outcome is unknown, the id is reported */
    p.newid = 100200;
    fixture_fault(&fx, "{\"path\":\"/lxc/9000/clone$\",\"count\":1,\"delay_ms\":800}");
    ck_assert_int_eq(pve_clone(client, &p, 300, on_pres, &d, NULL), 0);
    run();
    ck_assert_int_eq(d.error, -ETIMEDOUT);
    ck_assert_uint_eq(d.vmid, 100200);
    ck_assert_ptr_null(d.upid);
    ck_assert_uint_eq(d.attempts, 1);

    pres_clear(&a);
    pres_clear(&b);
    pres_clear(&c);
    pres_clear(&d);
    pres_clear(&e);
    client_done();
}
END_TEST

START_TEST(test_fw_group_failure_each_step)
{
    struct pres a = {0}, b = {0}, c = {0};
    struct json_object *st;

    fixture_fault(&fx, "{\"ct\":{\"vmid\":170}}");
    client_open(TOKEN_SECRET, 0, 0);
    /* the listing */
    fixture_fault(&fx, "{\"method\":\"GET\",\"path\":\"/lxc/170/firewall/rules$\",\"count\":1,"
                       "\"status\":403,\"reason\":\"Permission check failed (/vms/170, "
                       "VM.Audit)\"}");
    ck_assert_int_eq(pve_fw_group_set(client, "pve", 170, "g", true, 0, on_pres, &a, NULL), 0);
    run();
    ck_assert_int_eq(a.kind, PVE_ERR_PERMISSION);
    st = fixture_state(&fx);
    ck_assert_uint_eq(requests_matching(st, "POST", "/lxc/170/firewall/rules", NULL), 0);
    json_object_put(st);

    /* the addition */
    fixture_fault(&fx, "{\"method\":\"POST\",\"path\":\"/lxc/170/firewall/rules$\",\"count\":1,"
                       "\"status\":403,\"reason\":\"Permission check failed (/vms/170, "
                       "VM.Config.Network)\"}");
    ck_assert_int_eq(pve_fw_group_set(client, "pve", 170, "g", true, 0, on_pres, &b, NULL), 0);
    run();
    ck_assert_int_eq(b.kind, PVE_ERR_PERMISSION);
    ck_assert_uint_eq(b.attempts, 1);

    /* the deletion, refused again and again: three more listings, then the error */
    pres_clear(&a);
    ck_assert_int_eq(pve_fw_group_set(client, "pve", 170, "g", true, 0, on_pres, &a, NULL), 0);
    run();
    ck_assert_int_eq(a.error, 0);
    fixture_fault(&fx, "{\"method\":\"DELETE\",\"path\":\"/lxc/170/firewall/rules/0$\","
                       "\"count\":10,\"status\":500,\"reason\":\"detected modified "
                       "configuration - file changed by other user? Try again.\"}");
    ck_assert_int_eq(pve_fw_group_set(client, "pve", 170, "g", false, 0, on_pres, &c, NULL), 0);
    run();
    ck_assert_int_eq(c.kind, PVE_ERR_SERVER);
    st = fixture_state(&fx);
    ck_assert_uint_eq(requests_matching(st, "DELETE", "/lxc/170/firewall/rules/0", NULL), 4);
    /* 3 listings before (one per call), 4 for the deletion */
    ck_assert_uint_eq(requests_matching(st, "GET", "/lxc/170/firewall/rules", NULL), 7);
    json_object_put(st);
    pres_clear(&a);
    pres_clear(&b);
    pres_clear(&c);
    client_done();
}
END_TEST

START_TEST(test_task_failures)
{
    static const char *const args[] = {"--mode", "pve", "--task-ms", "3000", NULL};
    struct pres a = {0}, b = {0}, c = {0};

    fixture_stop(&fx);
    fixture_start(&fx, args);
    fixture_fault(&fx, "{\"ct\":{\"vmid\":154}}");
    client_open(TOKEN_SECRET, 0, 0);
    /* the task outlives the deadline: -ETIMEDOUT, with the UPID and the last status */
    ck_assert_int_eq(pve_start(client, "pve", 154, 300, on_pres, &a, NULL), 0);
    run();
    ck_assert_int_eq(a.error, -ETIMEDOUT);
    ck_assert_ptr_nonnull(a.upid);
    ck_assert(a.have_task && !a.task_success);
    /* waiting for it again, with a status poll that fails for good */
    fixture_fault(&fx, "{\"path\":\"/tasks/.*/status$\",\"count\":1,\"status\":400,"
                       "\"reason\":\"Parameter verification failed.\","
                       "\"errors\":{\"upid\":\"no such task\"}}");
    ck_assert_int_eq(pve_wait_task(client, NULL, a.upid, 0, on_pres, &b, NULL), 0);
    run();
    ck_assert_int_eq(b.error, -EREMOTEIO);
    ck_assert_int_eq(b.http_status, 400);
    ck_assert_str_eq(b.upid, a.upid);
    ck_assert_str_eq(b.perr_upid, a.upid);
    /* and until it ends */
    ck_assert_int_eq(pve_wait_task(client, "pve", a.upid, 0, on_pres, &c, NULL), 0);
    run();
    ck_assert_int_eq(c.error, 0);
    ck_assert(c.have_task && c.task_success);
    pres_clear(&a);
    pres_clear(&b);
    pres_clear(&c);
    client_done();
}
END_TEST

/* ---- one smoke test against tests/pve-sim (API only, no containers) ---- */
#define SIM_CLONES 3

/* GET .../config (current) of vmid: a new object. */
static struct json_object *sim_config(uint32_t vmid)
{
    struct pres a = {0};
    struct json_object *conf;

    ck_assert_int_eq(pve_config_get(client, "pve", vmid, true, 0, on_pres, &a, NULL), 0);
    run();
    ck_assert_int_eq(a.error, 0);
    conf = json_object_get(a.data);
    pres_clear(&a);
    return conf;
}

static const char *conf_str(struct json_object *conf, const char *key)
{
    struct json_object *v;

    return json_object_object_get_ex(conf, key, &v) ? json_object_get_string(v) : NULL;
}

/* PUT .../config of vmid: key=value (value NULL: nothing) and description. */
static void sim_put(uint32_t vmid, const char *key, const char *value, const char *description)
{
    struct pres a = {0};
    struct json_object *params = json_object_new_object();

    if (value)
        json_object_object_add(params, key, json_object_new_string(value));
    json_object_object_add(params, "description", json_object_new_string(description));
    ck_assert_int_eq(pve_config_put(client, "pve", vmid, params, 0, on_pres, &a, NULL), 0);
    json_object_put(params);
    run();
    ck_assert_msg(a.error == 0, "PUT config: %d %s", a.error, strna(a.message));
    pres_clear(&a);
}

/* volume_locate() over the real configs and descriptions of `from` and `to`: volume "data"
 * is in want_vmid at mp<want_mp>, the other container's line (if any) stale. */
static void sim_locate(uint32_t from, uint32_t to, uint32_t want_vmid, unsigned want_mp,
                       uint32_t want_stale)
{
    struct json_object *cf = sim_config(from), *ct = sim_config(to);
    const struct volume_ct cts[] = {{from, conf_str(cf, "description"), cf},
                                    {to, conf_str(ct, "description"), ct}};
    _cleanup_free_ struct volume_place *p = NULL;
    size_t n = 0;
    uint32_t bad = 1;

    ck_assert_int_eq(volume_locate(cts, 2, &p, &n, &bad), 0);
    ck_assert_uint_eq(bad, 0);
    ck_assert_uint_eq(n, 1);
    ck_assert_str_eq(p[0].v.name, "data");
    ck_assert_uint_eq(p[0].vmid, want_vmid);
    ck_assert_uint_eq(p[0].v.mp, want_mp);
    ck_assert_uint_eq(p[0].stale_vmid, want_stale);
    ck_assert(!p[0].missing);
    json_object_put(cf);
    json_object_put(ct);
}

/* A mount point allocated on the stopped container `from` together with its volume line (one
 * PUT) moves to the running `to` in three writes (the target's line, the move, the source's
 * line removed); after each, the volume is found where it really is. Moving it back is
 * refused while `to` runs (the task never starts). */
static void sim_move_volume(uint32_t to, uint32_t from)
{
    struct pres a = {0};
    struct marker_volume vol = {.name = "data", .owner_uid = 1000, .size_gb = 1, .mp = 0};
    struct json_object *conf;
    _cleanup_free_ char *fd = NULL, *td = NULL, *fd2 = NULL;
    char want[64], key[16];
    unsigned mp = 99;

    ck_assert_int_eq(marker_volume_set("made by a test\n", &vol, &fd), 0);
    sim_put(from, "mp0", "local-lvm:1,mp=/data", fd);
    sim_locate(from, to, from, 0, 0);
    conf = sim_config(to);
    ck_assert_int_eq(volume_free_mp(conf, conf_str(conf, "description"), &mp), 0);
    ck_assert_int_le(mp, 1);
    vol.mp = mp;
    ck_assert_int_eq(marker_volume_set(conf_str(conf, "description"), &vol, &td), 0);
    json_object_put(conf);
    sim_put(to, "description", NULL, td);
    sim_locate(from, to, from, 0, to);
    snprintf(key, sizeof(key), "mp%u", mp);
    ck_assert_int_eq(pve_move_volume(client, "pve", from, "mp0", to, key, 0, on_pres, &a, NULL),
                     0);
    run();
    ck_assert_msg(a.error == 0, "move: %d %s", a.error, strna(a.message));
    ck_assert(a.have_task && a.task_success);
    pres_clear(&a);
    sim_locate(from, to, to, mp, from);
    conf = sim_config(to);
    snprintf(want, sizeof(want), "local-lvm:vm-%u-disk-1,mp=/data,size=1G", to);
    ck_assert_str_eq(conf_str(conf, key), want);
    json_object_put(conf);
    ck_assert_int_eq(marker_volume_remove(fd, "data", &fd2), 0);
    sim_put(from, "description", NULL, fd2);
    sim_locate(from, to, to, mp, 0);
    ck_assert_int_eq(pve_move_volume(client, "pve", to, key, from, "mp0", 0, on_pres, &a, NULL),
                     0);
    run();
    ck_assert_int_eq(a.error, -EREMOTEIO);
    ck_assert(!a.have_task);
    ck_assert_str_eq(a.message, "Cannot move in-use volume while the source CT is running - "
                                "detach or shutdown first");
    pres_clear(&a);
}

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
    sim_move_volume(c[0].vmid, c[1].vmid);
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
    tcase_add_test(tc, test_clones_spread_over_copies);
    tcase_add_test(tc, test_urgent_clone_first);
    tcase_add_test(tc, test_copy_added_joins_queue);
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
    tcase_add_test(tc, test_failure_each_call);
    tcase_add_test(tc, test_retry_classes);
    tcase_add_test(tc, test_clone_failure_each_step);
    tcase_add_test(tc, test_per_node_cap);
    tcase_add_test(tc, test_clone_unknown_outcome);
    tcase_add_test(tc, test_fw_group_failure_each_step);
    tcase_add_test(tc, test_task_failures);
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
