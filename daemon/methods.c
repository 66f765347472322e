#include "methods.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "config-build.h"
#include "lib/config.h"
#include "lib/log.h"
#include "lib/macro.h"
#include "proto/openrpc.h"
#include "proto/params.h"
#include "proto/rpc.h"
#include "server.h"

#define COMP "method"
#define METHOD_TABLES_MAX 8
#define TEST_SLEEP_MAX_MS 60000

static status_provider_t status_provider;
static void *status_userdata;

void methods_set_status_provider(status_provider_t fn, void *userdata)
{
    status_provider = fn;
    status_userdata = userdata;
}

static bool params_ok(struct req *r, json_object *params)
{
    struct params_error e = {};

    if (params_none_parse(params, &e) < 0) {
        req_invalid_params(r, e.param, e.reason);
        return false;
    }
    return true;
}

static void method_daemon_status(struct req *r, json_object *params)
{
    const struct config *cfg = req_config(r);
    struct server *s = req_server(r);
    json_object *o, *px, *caller;

    if (!params_ok(r, params))
        return;
    o = json_object_new_object();
    json_object_object_add(o, "version", json_object_new_string(SANDBOXD_VERSION));
    json_object_object_add(o, "uptime_s", json_object_new_int64((int64_t)server_uptime_s(s)));
    json_object_object_add(o, "connections", json_object_new_int64(server_connections(s)));
    json_object_object_add(o, "sandboxes", json_object_new_object());
    px = json_object_new_object();
    json_object_object_add(px, "configured", json_object_new_boolean(cfg->proxmox.present));
    json_object_object_add(px, "reachable", NULL);
    json_object_object_add(
        px, "last_error",
        json_object_new_string(cfg->proxmox.present ? "not connected yet" : "not configured"));
    json_object_object_add(o, "proxmox", px);
    caller = json_object_new_object();
    json_object_object_add(caller, "uid", json_object_new_int64(req_uid(r)));
    json_object_object_add(caller, "gid", json_object_new_int64(req_gid(r)));
    json_object_object_add(caller, "pid", json_object_new_int64(req_pid(r)));
    json_object_object_add(o, "caller", caller);
    if (status_provider)
        status_provider(o, status_userdata);
    req_reply(r, o);
}

static json_object *openrpc_cached;

static void method_rpc_discover(struct req *r, json_object *params)
{
    if (!params_ok(r, params))
        return;
    if (!openrpc_cached) {
        openrpc_cached = json_tokener_parse(openrpc_document());
        if (!openrpc_cached) {
            req_error(r, RPC_INTERNAL_ERROR, "the API document is not valid JSON");
            return;
        }
    }
    req_reply(r, json_object_get(openrpc_cached));
}

/* test.sleep {"ms": N}: replies {"slept_ms": N} after N ms. Only registered when
 * SANDBOXD_TEST_HOOKS=1: the tests use it to hold requests in flight. */
struct sleeper {
    uv_timer_t timer;
    struct req *req;
    int64_t ms;
};

static void sleeper_closed(uv_handle_t *h)
{
    free(h->data);
}

static void sleeper_finish(struct sleeper *sl, bool cancelled)
{
    struct req *r = sl->req;
    json_object *o;

    sl->req = NULL;
    uv_close((uv_handle_t *)&sl->timer, sleeper_closed);
    if (cancelled) {
        req_error(r, RPC_SHUTTING_DOWN, "cancelled");
        return;
    }
    o = json_object_new_object();
    json_object_object_add(o, "slept_ms", json_object_new_int64(sl->ms));
    req_reply(r, o);
}

static void sleeper_fired(uv_timer_t *t)
{
    sleeper_finish(t->data, false);
}

static void sleeper_disconnected(struct req *r, void *userdata)
{
    struct sleeper *sl = userdata;

    if (sl->req)
        sleeper_finish(sl, true);
}

static void method_test_sleep(struct req *r, json_object *params)
{
    json_object *ms = NULL;
    struct sleeper *sl;

    if (!params || !json_object_is_type(params, json_type_object) ||
        !json_object_object_get_ex(params, "ms", &ms) || !json_object_is_type(ms, json_type_int) ||
        json_object_get_int64(ms) < 0 || json_object_get_int64(ms) > TEST_SLEEP_MAX_MS) {
        req_invalid_params(r, "ms", "an integer 0..60000 is required");
        return;
    }
    sl = calloc(1, sizeof *sl);
    if (!sl) {
        req_error(r, RPC_INTERNAL_ERROR, "out of memory");
        return;
    }
    sl->req = r;
    sl->ms = json_object_get_int64(ms);
    uv_timer_init(req_loop(r), &sl->timer);
    sl->timer.data = sl;
    req_on_disconnect(r, sleeper_disconnected, sl);
    uv_timer_start(&sl->timer, sleeper_fired, (uint64_t)sl->ms, 0);
}

/* test.notify {"count": N}: sends N server notifications "test.event" with params
 * {"request_id": <id>, "seq": i} on the caller's connection, then replies
 * {"sent": N}. Test hook, like test.sleep. */
static void method_test_notify(struct req *r, json_object *params)
{
    json_object *count = NULL, *o;
    int64_t n, sent = 0;

    if (!params || !json_object_is_type(params, json_type_object) ||
        !json_object_object_get_ex(params, "count", &count) ||
        !json_object_is_type(count, json_type_int) || json_object_get_int64(count) < 0 ||
        json_object_get_int64(count) > 10000) {
        req_invalid_params(r, "count", "an integer 0..10000 is required");
        return;
    }
    n = json_object_get_int64(count);
    for (int64_t i = 0; i < n; i++) {
        json_object *p = json_object_new_object();

        json_object_object_add(p, "request_id", json_object_get(req_id(r)));
        json_object_object_add(p, "seq", json_object_new_int64(i));
        if (req_notify(r, "test.event", p) == 0)
            sent++;
    }
    o = json_object_new_object();
    json_object_object_add(o, "sent", json_object_new_int64(sent));
    req_reply(r, o);
}

static const struct method_def builtin_methods[] = {
    {"daemon.status", method_daemon_status},
    {"rpc.discover", method_rpc_discover},
    {NULL, NULL},
};

static const struct method_def test_methods[] = {
    {"test.sleep", method_test_sleep},
    {"test.notify", method_test_notify},
    {NULL, NULL},
};

static const struct method_def *tables[METHOD_TABLES_MAX] = {builtin_methods};
static size_t n_tables = 1;

int methods_register(const struct method_def *table)
{
    if (n_tables >= METHOD_TABLES_MAX)
        return -E2BIG;
    tables[n_tables++] = table;
    return 0;
}

void methods_enable_test_hooks(void)
{
    for (size_t i = 0; i < n_tables; i++)
        if (tables[i] == test_methods)
            return;
    (void)methods_register(test_methods);
    log_warning(
        COMP,
        "test hooks enabled (SANDBOXD_TEST_HOOKS=1): test.sleep and test.notify are callable");
}

method_handler_t methods_find(const char *name)
{
    for (size_t i = 0; i < n_tables; i++)
        for (const struct method_def *m = tables[i]; m->name; m++)
            if (strcmp(m->name, name) == 0)
                return m->handler;
    return NULL;
}

void methods_done(void)
{
    if (openrpc_cached)
        json_object_put(openrpc_cached);
    openrpc_cached = NULL;
}
