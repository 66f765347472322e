/* The method table and the dispatch. See methods.h. */
#include "methods.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "macro.h"
#include "req.h"
#include "rpc.h"

int methods_check(const struct method_def *rows, const char **ret_name)
{
    for (const struct method_def *m = rows; m->name; m++) {
        const struct rpc_method_info *mi = rpc_method_find(m->name);
        bool twice = false;

        for (const struct method_def *o = rows; o != m; o++)
            twice = twice || strcmp(o->name, m->name) == 0;
        if (twice || !m->handler || (mi && mi->params != m->params)) {
            *ret_name = m->name;
            return -EINVAL;
        }
    }
    return 0;
}

const struct method_def *methods_find(const struct method_table *t, const char *name)
{
    for (const struct method_def *m = t->rows; m->name; m++)
        if (strcmp(m->name, name) == 0)
            return (m->flags & METHOD_TEST_HOOK) && !t->test_hooks ? NULL : m;
    return NULL;
}

static void reply_unknown(struct req *r)
{
    json_object *data = json_object_new_object();

    json_object_object_add(data, "reason", json_object_new_string("unknown method"));
    json_object_object_add(data, "method", json_object_new_string(req_method(r)));
    req_error_data(r, RPC_METHOD_NOT_FOUND, NULL, data);
}

/* The operator's caps on sizes the schema bounds more loosely: a value out of range is
 * reported against the effective limit, the configured one. */
struct param_cap {
    const char *param, *cap;
    size_t offset; /* of the unsigned in struct config_sandbox */
};

static const struct param_cap param_caps[] = {
    {"ttl_s", "max_ttl_s", offsetof(struct config_sandbox, max_ttl_s)},
    {"cores", "max_cores", offsetof(struct config_sandbox, max_cores)},
    {"memory_mb", "max_memory_mb", offsetof(struct config_sandbox, max_memory_mb)},
    {"disk_gb", "max_disk_gb", offsetof(struct config_sandbox, max_disk_gb)},
};

void methods_invalid_params(struct req *r, const struct params_error *e)
{
    const struct config *cfg = req_config(r);
    json_object *d;

    for (size_t i = 0; cfg && e->has_range && i < ELEMENTSOF(param_caps); i++) {
        const struct param_cap *c = &param_caps[i];
        unsigned max = *(const unsigned *)((const char *)&cfg->sandbox + c->offset);
        char reason[160];

        if (strcmp(e->param, c->param) != 0 || (int64_t)max >= e->max)
            continue;
        snprintf(reason, sizeof reason, "%s must be %lld..%u (%s)", c->param, (long long)e->min,
                 max, c->cap);
        d = json_object_new_object();
        json_object_object_add(d, "reason", json_object_new_string(reason));
        json_object_object_add(d, "param", json_object_new_string(c->param));
        json_object_object_add(d, "min", json_object_new_int64(e->min));
        json_object_object_add(d, "max", json_object_new_int64(max));
        json_object_object_add(d, "cap", json_object_new_string(c->cap));
        req_error_data(r, RPC_INVALID_PARAMS, NULL, d);
        return;
    }
    d = params_error_data(e);
    if (!d) {
        req_error(r, RPC_INTERNAL_ERROR, "out of memory");
        return;
    }
    req_error_data(r, RPC_INVALID_PARAMS, NULL, d);
}

/* Parses the params of r for row m into a new struct held by r. Returns true
 * when the handler may run; otherwise r is completed. */
static bool parse_params(struct req *r, const struct method_def *m, void **ret)
{
    const struct params_spec *spec = m->params;
    struct params_error e = {};
    void *buf;
    int k;

    if (!spec) {
        *ret = req_params_json(r);
        return true;
    }
    buf = calloc(1, spec->size ? spec->size : 1);
    if (!buf) {
        req_error(r, RPC_INTERNAL_ERROR, "out of memory");
        return false;
    }
    k = spec->parse(req_params_json(r), buf, &e);
    if (k < 0) {
        free(buf);
        if (k == -EINVAL)
            methods_invalid_params(r, &e);
        else
            req_error(r, RPC_INTERNAL_ERROR, strerror(-k));
        return false;
    }
    if (spec->size == 0) {
        free(buf);
        *ret = NULL;
        return true;
    }
    req_set_params(r, spec, buf);
    *ret = buf;
    return true;
}

void methods_dispatch(const struct method_table *t, struct req *r)
{
    const struct method_def *m = methods_find(t, req_method(r));
    void *params;

    if (!m) {
        reply_unknown(r);
        return;
    }
    if ((m->flags & METHOD_ADMIN) && !req_is_admin(r)) {
        req_error(r, RPC_PERMISSION_DENIED, "only admins may call this method");
        return;
    }
    if (!parse_params(r, m, &params))
        return;
    /* The request and its params stay valid for the whole handler, also where an engine
     * callback answers it before the handler returns. */
    req_handler_begin(r);
    m->handler(r, params, m->userdata);
    req_handler_end(r);
}

static void dispatch_call(const struct method_table *t, struct req_port *port,
                          struct rpc_call *call, struct rpc_batch *b, bool stopping)
{
    struct req *r;

    if (call->error) {
        if (b)
            rpc_batch_add(b, json_object_get(call->error));
        else
            (void)port->ops->send(port->conn, json_object_get(call->error));
        return;
    }
    /* A request is only attached to an open connection: a closing one has
     * already detached its requests. */
    if (!port->ops->open(port->conn))
        return;
    if (b && port->inflight_max && port->list.n >= port->inflight_max) {
        /* A batch's entries take places under the in-flight cap like single requests:
         * past it they are refused rather than run (a notification is not run). */
        if (!call->notification)
            rpc_batch_add(b,
                          rpc_error_reason_new(call->id, RPC_BUSY,
                                               "too many requests in flight on this connection"));
        return;
    }
    if (req_new(port, call, b, &r) < 0) {
        if (!call->notification)
            (void)port->ops->send(
                port->conn, rpc_error_reason_new(call->id, RPC_INTERNAL_ERROR, "out of memory"));
        return;
    }
    if (stopping) {
        req_error(r, RPC_SHUTTING_DOWN, "the daemon is shutting down");
        return;
    }
    methods_dispatch(t, r);
}

int methods_dispatch_line(const struct method_table *t, struct req_port *port, json_tokener **tok,
                          const char *line, size_t len, bool stopping)
{
    struct rpc_message m;
    struct rpc_batch *b = NULL;

    if (rpc_parse_with(tok, line, len, &m) < 0) {
        rpc_message_done(&m);
        return -ENOMEM;
    }
    if (m.error) {
        (void)port->ops->send(port->conn, json_object_get(m.error));
        rpc_message_done(&m);
        return 0;
    }
    if (m.batch) {
        b = rpc_batch_new();
        if (!b) {
            rpc_message_done(&m);
            return -ENOMEM;
        }
    }
    for (size_t i = 0; i < m.n_calls; i++)
        dispatch_call(t, port, &m.calls[i], b, stopping);
    rpc_message_done(&m);
    if (b)
        req_batch_release(b, port);
    return 0;
}
