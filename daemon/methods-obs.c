/* daemon.metrics, daemon.subscribe, the request observer and test.events. See
 * methods-obs.h. */
#include "methods-obs.h"

#include <stdio.h>
#include <string.h>

#include "daemon.h"
#include "events.h"
#include "audit.h"
#include "config.h"
#include "metrics.h"
#include "sandbox.h"
#include "methods.h"
#include "rpc.h"
#include "server.h"

#define TEST_EVENTS_MAX 100000

/* ---- the request observer ---- */

/* A bounded label: protocol and registered names as they are, anything else "other". */
static const char *method_label(const struct req *r)
{
    const struct server *s = req_server(r);
    const char *m = req_method(r);

    return m && (rpc_method_find(m) || (s && methods_find(&s->methods, m))) ? m : "other";
}

static void req_started(const struct req *r)
{
    metrics_add(M_REQUESTS_IN_FLIGHT, method_label(r), NULL, 1);
}

/* The error code of a response, 0 for a result; data.reason into *ret_reason. */
static int response_code(json_object *response, const char **ret_reason)
{
    json_object *err, *code, *data, *reason;

    *ret_reason = NULL;
    if (!json_object_object_get_ex(response, "error", &err))
        return 0;
    if (json_object_object_get_ex(err, "data", &data) &&
        json_object_object_get_ex(data, "reason", &reason))
        *ret_reason = json_object_get_string(reason);
    if (!json_object_object_get_ex(err, "code", &code))
        return RPC_INTERNAL_ERROR;
    return json_object_get_int(code);
}

static void req_completed(const struct req *r, json_object *response)
{
    const char *label = method_label(r), *reason;
    double secs = (double)(uv_hrtime() - req_started_ns(r)) / 1e9;
    char code_s[16];
    int code;

    metrics_add(M_REQUESTS_IN_FLIGHT, label, NULL, -1);
    metrics_observe(M_REQUEST_SECONDS, label, secs);
    if (!response) {
        metrics_add(M_REQUESTS, label, "none", 1);
        return;
    }
    code = response_code(response, &reason);
    snprintf(code_s, sizeof code_s, "%d", code);
    metrics_add(M_REQUESTS, label, code_s, 1);
    if (code == RPC_QUOTA_EXCEEDED)
        audit_limit("quota", req_uid(r), reason);
    else if (code == RPC_BUSY)
        audit_limit("busy", req_uid(r), reason);
}

const struct req_observer methods_obs_observer = {req_started, req_completed};

/* ---- daemon.metrics ---- */

static void sandboxes_gauge(struct engine *engine)
{
    static const char *const states[] = {"creating", "ready", "unreachable", "destroying",
                                         "failed"};
    const struct config *cfg;

    metrics_clear(M_SANDBOXES);
    if (!engine)
        return;
    cfg = engine_config(engine);
    for (size_t n = 0; n < cfg->proxmox.n_nodes; n++)
        for (size_t i = 0; i < sizeof states / sizeof states[0]; i++)
            metrics_set(M_SANDBOXES, states[i], cfg->proxmox.nodes[n], 0);
    for (struct sandbox *sb = engine_first(engine); sb; sb = engine_next(engine, sb)) {
        struct sandbox_info v;

        sandbox_view(sb, &v);
        metrics_add(M_SANDBOXES, v.public_state, v.node ? v.node : "", 1);
    }
}

void method_daemon_metrics(struct req *r, void *params, void *userdata)
{
    struct daemon *d = req_daemon(r);
    struct server *server = &d->server;
    json_object *o;

    (void)params;
    (void)userdata;
    sandboxes_gauge(d->sandbox.engine);
    metrics_set(M_SUBSCRIBERS, NULL, NULL, events_subscribers(&d->events));
    o = metrics_to_json();
    json_object_object_add(o, "uptime_s", json_object_new_int64((int64_t)server_uptime_s(server)));
    json_object_object_add(o, "connections", json_object_new_int64(server_connections(server)));
    req_reply(r, o);
}

/* ---- daemon.subscribe ---- */

void method_daemon_subscribe(struct req *r, void *params, void *userdata)
{
    (void)params;
    (void)userdata;
    if (req_is_notification(r)) {
        req_reply(r, NULL); /* nowhere to deliver events to */
        return;
    }
    events_subscribe(&req_daemon(r)->events, r);
}

/* ---- test.events {"count": N, "uid": U}: synthetic events (SANDBOXD_TEST_HOOKS=1) ---- */

void method_test_events(struct req *r, void *params, void *userdata)
{
    json_object *p = params, *v;
    int64_t count = -1, uid = req_uid(r);

    (void)userdata;
    if (p && json_object_object_get_ex(p, "count", &v) && json_object_is_type(v, json_type_int))
        count = json_object_get_int64(v);
    if (p && json_object_object_get_ex(p, "uid", &v) && json_object_is_type(v, json_type_int))
        uid = json_object_get_int64(v);
    if (count < 0 || count > TEST_EVENTS_MAX || uid < 0 || uid > UINT32_MAX) {
        req_invalid_params(r, "count", "count: 0..100000, uid: a uid");
        return;
    }
    events_publish_test(&req_daemon(r)->events, (unsigned)count, (uid_t)uid);
    req_reply(r, json_object_new_int64(count));
}
