/* The sandbox methods: JSON-RPC params (proto/params.h) mapped onto the engine
 * (lib/engine/sandbox.h), ownership by peer uid, results and errors of docs/protocol.md. */
#include "methods-sandbox.h"

#include <assert.h>
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>

#include "events.h"
#include "log.h"
#include "marker.h"
#include "reconcile.h"
#include "testhook.h"
#include "registry.h"
#include "sandbox.h"
#include "util.h"
#include "methods-internet.h"
#include "methods-common.h"
#include "sandbox-forward.h"
#include "egress-proxy.h"
#include "sandbox-preview.h"
#include "methods-pool.h"
#include "methods-transfer.h"
#include "methods.h"
#include "req.h"
#include "b64.h"
#include "methods-cluster.h"
#include "params.h"
#include "params-volume.h"
#include "rpc.h"

#define COMP "sandbox"

/* ---- results and errors ---- */

/* The names of the sandbox's env (sandbox.create), never the values: they may be secrets. */
static json_object *env_names(const struct sandbox *sb)
{
    json_object *a = json_object_new_array(), *env = sandbox_env(sb);

    if (a && env) {
        json_object_object_foreach(env, name, val)
        {
            (void)val;
            json_object_array_add(a, json_object_new_string(name));
        }
    }
    return a;
}

/* Adds a member whose name is a literal, once: json-c neither copies nor looks up the name. */
static void add(json_object *o, const char *literal, json_object *v)
{
    if (json_object_object_add_ex(o, literal, v,
                                  JSON_C_OBJECT_ADD_KEY_IS_NEW | JSON_C_OBJECT_KEY_IS_CONSTANT) < 0)
        json_object_put(v);
}

static json_object *sandbox_json(const struct sandbox *sb)
{
    json_object *o = json_object_new_object();
    struct sandbox_info v;
    char t[RFC3339_MAX];

    sandbox_view(sb, &v);
    add(o, "id", json_object_new_string(v.id));
    add(o, "vmid", v.vmid ? json_object_new_int64(v.vmid) : NULL);
    add(o, "node", v.node ? json_object_new_string(v.node) : NULL);
    add(o, "hostname", v.hostname ? json_object_new_string(v.hostname) : NULL);
    add(o, "ip", v.ip ? json_object_new_string(v.ip) : NULL);
    add(o, "state", json_object_new_string(v.public_state));
    add(o, "internet", json_object_new_boolean(v.internet));
    add(o, "internet_allow", v.internet_allow ? json_object_get(v.internet_allow) : NULL);
    add(o, "cores", json_object_new_int64(v.cores));
    add(o, "memory_mb", json_object_new_int64(v.memory_mb));
    add(o, "disk_gb", json_object_new_int64(v.disk_gb));
    add(o, "net_rate_mbps", json_object_new_int64(v.net_rate_mbps));
    add(o, "owner_uid", json_object_new_int64(v.owner));
    add(o, "labels", json_object_get(v.labels));
    add(o, "env_names", env_names(sb));
    add(o, "template", json_object_new_string(v.template));
    if (time_format_rfc3339(v.created_at, t, sizeof t) == 0)
        add(o, "created_at", json_object_new_string(t));
    if (time_format_rfc3339(v.expires_at, t, sizeof t) == 0)
        add(o, "expires_at", json_object_new_string(t));
    if (v.error && v.state == SANDBOX_FAILED)
        add(o, "error", json_object_new_string(v.error));
    return o;
}

/* Short names for the shared helpers (methods-common.h). */

static void reply_engine_error(struct req *r, const struct engine_error *err)
{
    methods_sandbox_reply_error(r, err);
}

static void reply_not_found(struct req *r, const char *id)
{
    methods_sandbox_reply_not_found(r, id);
}

static void reply_state(struct req *r, const struct sandbox *sb)
{
    methods_sandbox_reply_state(r, sb);
}

static void reply_file_error(struct req *r, int error, bool write)
{
    methods_sandbox_reply_file_error(r, error, write);
}

/* ---- a request waiting for the engine, detachable when the client leaves ---- */

struct pending {
    struct req *req;
    struct sandbox_methods *sm;
};

static void pending_detach(struct req *r, void *userdata)
{
    struct pending *p = userdata;

    (void)methods_detach(r, &p->req, NULL);
}

static struct pending *pending_new(struct sandbox_methods *sm, struct req *r)
{
    struct pending *p = calloc(1, sizeof *p);

    if (!p) {
        req_error(r, RPC_INTERNAL_ERROR, "out of memory");
        return NULL;
    }
    p->req = r;
    p->sm = sm;
    req_on_disconnect(r, pending_detach, p);
    return p;
}

/* ---- sandbox.create ---- */

/* Creates with an idempotency key whose first create is still running: they share its
 * outcome (lib/engine/reconcile.h; registry issue). */
struct idem_wait {
    struct pending p;
    char id[ID_MAX + 1];
    struct idem_wait *next;
};

static void idem_serve(struct sandbox_methods *sm, struct sandbox *sb,
                       const struct engine_error *err)
{
    struct idem_wait **pp = &sm->idem_waits;
    struct sandbox_info v;

    sandbox_view(sb, &v);
    while (*pp) {
        struct idem_wait *w = *pp;

        if (strcmp(w->id, v.id) != 0) {
            pp = &w->next;
            continue;
        }
        *pp = w->next;
        if (w->p.req) {
            if (err)
                reply_engine_error(w->p.req, err);
            else
                req_reply(w->p.req, sandbox_json(sb));
        }
        free(w);
    }
}

/* A call on one sandbox that answers with the sandbox (sandbox.renew, sandbox.resize). */
static void on_sandbox_done(const struct engine_error *err, struct sandbox *sb, void *userdata)
{
    struct pending *p = userdata;

    if (p->req && err)
        reply_engine_error(p->req, err);
    else if (p->req)
        req_reply(p->req, sandbox_json(sb));
    free(p);
}

static void on_created(const struct engine_error *err, struct sandbox *sb, void *userdata)
{
    struct pending *p = userdata;
    struct sandbox_methods *sm = p->sm;

    if (p->req) {
        if (err)
            reply_engine_error(p->req, err);
        else {
            req_reply(p->req, sandbox_json(sb));
            test_crash_point("create-replied");
        }
    }
    free(p);
    if (sb)
        idem_serve(sm, sb, err);
}

static void on_reconciled(void *userdata)
{
    struct sandbox_methods *sm = userdata;

    engine_pool_apply(sm->engine); /* pool members of a previous run are known now */
    methods_sandbox_unpark(sm);
}

/* Whether the sandbox's env is the one asked for (the same pairs, in any order). */
static bool env_same(const struct sandbox *sb, const struct params_kv_list *want)
{
    json_object *env = sandbox_env(sb), *v;

    if ((env ? (size_t)json_object_object_length(env) : 0) != want->n)
        return false;
    for (size_t i = 0; i < want->n; i++)
        if (!json_object_object_get_ex(env, want->items[i].key, &v) ||
            strcmp(json_object_get_string(v), want->items[i].value) != 0)
            return false;
    return true;
}

/* The params as the hash sees them: without the key, and env by its names only (the hash
 * goes into the marker in Proxmox; the values are compared in memory, env_same()). */
static json_object *params_for_hash(json_object *params)
{
    json_object *copy = json_object_new_object();

    json_object_object_foreach(params, pk, pv)
    {
        if (strcmp(pk, "idempotency_key") == 0)
            continue;
        if (strcmp(pk, "env") == 0 && json_object_is_type(pv, json_type_object)) {
            json_object *names = json_object_new_object();

            json_object_object_foreach(pv, name, val)
            {
                (void)val;
                json_object_object_add(names, name, json_object_new_string(""));
            }
            json_object_object_add(copy, pk, names);
            continue;
        }
        json_object_object_add(copy, pk, json_object_get(pv));
    }
    return copy;
}

/* Handles an idempotency key: true when the request was answered (or joined a create in
 * flight); false when a new create must run. ret_hash gets the params hash. */
static bool idem_lookup(struct sandbox_methods *sm, struct req *r,
                        const struct params_sandbox_create *c, char ret_hash[SHA256_HEX_SIZE])
{
    const char *key = c->idempotency_key;
    char khash[SHA256_HEX_SIZE];
    json_object *copy = params_for_hash(req_params_json(r));
    struct idem_wait *w;
    int k;

    k = registry_params_hash(copy, ret_hash);
    json_object_put(copy);
    if (k >= 0)
        k = marker_key_hash(req_uid(r), key, khash);
    if (k < 0) {
        req_invalid_params(r, "params", "the parameters cannot be hashed");
        return true;
    }
    for (struct sandbox *sb = engine_first(sm->engine); sb; sb = engine_next(sm->engine, sb)) {
        struct sandbox_info v;

        sandbox_view(sb, &v);
        if (v.owner != req_uid(r) || strcmp(v.idem_hash, khash) != 0)
            continue;
        if ((v.params_hash[0] && strcmp(v.params_hash, ret_hash) != 0) || !env_same(sb, &c->env)) {
            json_object *d = json_object_new_object();
            json_object_object_add(
                d, "reason",
                json_object_new_string("idempotency_key reused with different parameters"));
            json_object_object_add(d, "id", json_object_new_string(v.id));
            req_error_data(r, RPC_IDEMPOTENCY_MISMATCH, NULL, d);
            return true;
        }
        if (v.state == SANDBOX_READY || v.state == SANDBOX_PAUSED) {
            req_reply(r, sandbox_json(sb));
            return true;
        }
        if (v.state >= SANDBOX_DESTROYING) {
            reply_state(r, sb);
            return true;
        }
        w = calloc(1, sizeof *w); /* a create in flight: share its outcome */
        if (!w) {
            req_error(r, RPC_INTERNAL_ERROR, "out of memory");
            return true;
        }
        snprintf(w->id, sizeof w->id, "%s", v.id);
        w->p.req = r;
        req_on_disconnect(r, pending_detach, &w->p);
        w->next = sm->idem_waits;
        sm->idem_waits = w;
        return true;
    }
    return false;
}

void method_sandbox_create(struct req *r, void *params, void *userdata)
{
    const struct params_sandbox_create *c = params;
    struct sandbox_methods *sm = methods_sandbox(r);
    struct engine_error err = {};
    struct sandbox_create_opts o;
    json_object *labels, *env = NULL;
    struct pending *p;
    struct engine_volume_mount mounts[ENGINE_VOLUMES_MAX] = {};
    int ret;

    char phash[SHA256_HEX_SIZE] = "";

    if (methods_sandbox_park(r, NULL, method_sandbox_create, params, userdata))
        return;
    if (c->idempotency_key && idem_lookup(sm, r, c, phash))
        return;
    if (c->node && !node_param_allowed(r, engine_config(sm->engine)))
        return;
    if (!internet_allow_usable(r, engine_config(sm->engine), c->internet_allow,
                               "internet.allow"))
        return;
    labels = json_object_new_object();
    for (size_t i = 0; i < c->labels.n; i++)
        json_object_object_add(labels, c->labels.items[i].key,
                               json_object_new_string(c->labels.items[i].value));
    if (c->env.n > 0) {
        env = json_object_new_object();
        for (size_t i = 0; i < c->env.n; i++)
            json_object_object_add(env, c->env.items[i].key,
                                   json_object_new_string(c->env.items[i].value));
    }
    o = (struct sandbox_create_opts){
        .owner_uid = req_uid(r),
        .hostname = c->hostname,
        .cores = c->cores,
        .memory_mb = c->memory_mb,
        .disk_gb = c->disk_gb,
        .net_rate_mbps = c->net_rate_mbps,
        .internet = c->internet,
        .internet_allow = c->internet_allow,
        .ttl_s = c->ttl_s,
        .labels = labels,
        .idempotency_key = c->idempotency_key,
        .params_hash = phash[0] ? phash : NULL,
        .template = c->template,
        .node = c->node,
        .env = env,
        .resume_on_use = c->resume_on_use,
        .auto_pause_s = c->auto_pause_s,
        .volumes = mounts,
        .n_volumes = MIN(c->n_volumes, ELEMENTSOF(mounts)),
    };
    for (size_t i = 0; i < o.n_volumes; i++) {
        snprintf(mounts[i].name, sizeof mounts[i].name, "%s", c->volumes[i].name);
        snprintf(mounts[i].path, sizeof mounts[i].path, "%s", c->volumes[i].path);
        mounts[i].read_only = c->volumes[i].read_only;
    }
    p = pending_new(sm, r);
    if (!p) {
        json_object_put(labels);
        json_object_put(env);
        return;
    }
    ret = engine_create(sm->engine, &o, on_created, p, &err);
    json_object_put(labels);
    json_object_put(env);
    if (ret < 0) {
        free(p);
        reply_engine_error(r, &err);
    }
}

/* ---- sandbox.get / list ---- */

void method_sandbox_get(struct req *r, void *params, void *userdata)
{
    const struct params_sandbox_id *p = params;
    struct sandbox *sb;

    sb = methods_sandbox_find(r, p->id, method_sandbox_get, params, userdata);
    if (sb)
        req_reply(r, sandbox_json(sb));
}

static bool labels_match(json_object *labels, const struct params_kv_list *l)
{
    for (size_t i = 0; i < l->n; i++) {
        json_object *v;

        if (!json_object_object_get_ex(labels, l->items[i].key, &v) ||
            strcmp(json_object_get_string(v), l->items[i].value) != 0)
            return false;
    }
    return true;
}

void method_sandbox_list(struct req *r, void *params, void *userdata)
{
    struct sandbox_methods *sm = methods_sandbox(r);
    const struct params_sandbox_list *p = params;
    json_object *o, *a;

    if (methods_sandbox_park(r, NULL, method_sandbox_list, params, userdata))
        return;
    if (p->all && !req_is_admin(r)) {
        req_error(r, RPC_PERMISSION_DENIED, "all: only admins may list every owner's sandboxes");
        return;
    }
    a = json_object_new_array();
    for (struct sandbox *sb = engine_first(sm->engine); sb; sb = engine_next(sm->engine, sb)) {
        struct sandbox_info v;

        sandbox_view(sb, &v);
        if ((!p->all && v.owner != req_uid(r)) || v.pool)
            continue;
        if (!labels_match(v.labels, &p->labels))
            continue;
        json_object_array_add(a, sandbox_json(sb));
    }
    o = json_object_new_object();
    json_object_object_add(o, "sandboxes", a);
    req_reply(r, o);
}

/* ---- sandbox.set_internet ---- */

struct pending_internet {
    struct pending p; /* first: pending_detach() gets it */
    bool wait;
    uint64_t wait_ms;
};
static_assert(offsetof(struct pending_internet, p) == 0, "struct pending comes first");

static void on_internet(const struct engine_error *err, struct sandbox *sb, void *userdata)
{
    struct pending_internet *pi = userdata;
    struct sandbox_methods *sm = pi->p.sm;
    const struct config *cfg = engine_config(sm->engine);
    struct sandbox_info v;
    json_object *o;

    if (pi->p.req && err)
        reply_engine_error(pi->p.req, err);
    else if (pi->p.req) {
        o = sandbox_json(sb);
        internet_add_effective_by(o, cfg);
        sandbox_view(sb, &v);
        if (pi->wait)
            internet_wait_start(sm->engine, pi->p.req, sb,
                                internet_probe_expected(cfg, v.internet, v.internet_allow),
                                cfg->network.probe_ip, cfg->network.probe_port, pi->wait_ms, o);
        else
            req_reply(pi->p.req, o);
    }
    free(pi);
}

void method_sandbox_set_internet(struct req *r, void *params, void *userdata)
{
    struct sandbox_methods *sm = methods_sandbox(r);
    const struct params_sandbox_set_internet *p = params;
    const struct config *cfg = engine_config(sm->engine);
    struct engine_error err = {};
    struct pending_internet *pi;
    struct sandbox_info v;
    struct sandbox *sb;

    sb = methods_sandbox_find(r, p->id, method_sandbox_set_internet, params, userdata);
    if (!sb)
        return;
    if (!internet_allow_usable(r, cfg, p->allow, "allow"))
        return;
    if (p->wait && !cfg->network.probe_ip) {
        req_invalid_params(r, "wait",
                           "needs [network] probe_address in the daemon's configuration");
        return;
    }
    sandbox_view(sb, &v);
    if (v.state != SANDBOX_READY) {
        reply_state(r, sb);
        return;
    }
    pi = calloc(1, sizeof *pi);
    if (!pi) {
        req_error(r, RPC_INTERNAL_ERROR, "out of memory");
        return;
    }
    pi->p.req = r;
    pi->p.sm = sm;
    pi->wait = p->wait;
    pi->wait_ms = internet_wait_ms(cfg, p->wait_timeout_s);
    req_on_disconnect(r, pending_detach, &pi->p);
    if (engine_set_internet(sm->engine, sb, p->enabled, p->allow, on_internet, pi, &err) < 0) {
        req_on_disconnect(r, NULL, NULL);
        free(pi);
        reply_engine_error(r, &err);
    }
}

/* ---- sandbox.resize, sandbox.renew ---- */

/* How their params begin: the sandbox (checked below). */
static_assert(offsetof(struct params_sandbox_resize, id) == 0 &&
                  offsetof(struct params_sandbox_renew, id) == 0,
              "the params of a call on one sandbox begin with its id");

/* A call on one sandbox answered with the sandbox (on_sandbox_done() gets pd). */
struct sandbox_call {
    bool needs_reconcile; /* refused without [proxmox] */
    int (*start)(struct sandbox_methods *sm, struct sandbox *sb, const void *params,
                 struct pending *pd, struct engine_error *err);
};

static int start_resize(struct sandbox_methods *sm, struct sandbox *sb, const void *params,
                        struct pending *pd, struct engine_error *err)
{
    const struct params_sandbox_resize *p = params;
    const struct engine_resize_sizes sz = {
        .cores = p->cores,
        .memory_mb = p->memory_mb,
        .disk_gb = p->disk_gb,
        .net_rate_mbps = p->net_rate_mbps,
    };

    return engine_resize(sm->engine, sb, &sz, on_sandbox_done, pd, err);
}

static int start_renew(struct sandbox_methods *sm, struct sandbox *sb, const void *params,
                       struct pending *pd, struct engine_error *err)
{
    const struct params_sandbox_renew *p = params;

    return reconcile_renew(sm->reconcile, sb, p->ttl_s, on_sandbox_done, pd, err);
}

static const struct sandbox_call call_resize = {false, start_resize};
static const struct sandbox_call call_renew = {true, start_renew};

/* The handler of both: userdata is its struct sandbox_call. */
static void method_call(struct req *r, void *params, void *userdata)
{
    const struct sandbox_call *call = userdata;
    const struct params_sandbox_id *p = params;
    struct sandbox_methods *sm = methods_sandbox(r);
    struct engine_error err = {};
    struct sandbox *sb;
    struct pending *pd;

    sb = methods_sandbox_find(r, p->id, method_call, params, userdata);
    if (!sb)
        return;
    if (call->needs_reconcile && !sm->reconcile) {
        err = (struct engine_error){.kind = ENGINE_E_NOT_CONFIGURED,
                                    .error = -ENXIO,
                                    .message = "Proxmox is not configured ([proxmox] section)"};
        reply_engine_error(r, &err);
        return;
    }
    pd = pending_new(sm, r);
    if (!pd)
        return;
    if (call->start(sm, sb, params, pd, &err) < 0) {
        free(pd);
        reply_engine_error(r, &err);
    }
}

void method_sandbox_renew(struct req *r, void *params, void *userdata)
{
    method_call(r, params, (void *)&call_renew);
}

void method_sandbox_resize(struct req *r, void *params, void *userdata)
{
    method_call(r, params, (void *)&call_resize);
}

/* ---- sandbox.destroy ---- */

struct destroy_ctx {
    struct pending p;
    char id[ID_MAX + 1];
};

static json_object *destroy_json(const char *id, const char *state)
{
    json_object *o = json_object_new_object();

    json_object_object_add(o, "id", json_object_new_string(id));
    json_object_object_add(o, "state", json_object_new_string(state));
    return o;
}

static void on_destroyed(const struct engine_error *err, void *userdata)
{
    struct destroy_ctx *d = userdata;

    if (d->p.req) {
        if (err)
            reply_engine_error(d->p.req, err);
        else
            req_reply(d->p.req, destroy_json(d->id, "destroyed"));
    }
    free(d);
}

/* With wait false the reply comes once the destroy has begun ("destroying"); the destroy goes
 * on without the request; its end is an event of state destroyed, a failure one of state
 * failed (the daemon tries again, as after any failed destroy). */
void method_sandbox_destroy(struct req *r, void *params, void *userdata)
{
    struct sandbox_methods *sm = methods_sandbox(r);
    const struct params_sandbox_destroy *p = params;
    struct engine_error err;
    struct destroy_ctx *d;
    struct sandbox *sb;
    bool admin = req_is_admin(r);
    int ret;

    if (methods_sandbox_park(r, p->id, method_sandbox_destroy, params, userdata))
        return;
    sb = engine_lookup(sm->engine, p->id, req_uid(r), admin);
    if (!sb) {
        if (engine_was_destroyed(sm->engine, p->id, req_uid(r), admin))
            req_reply(r, destroy_json(p->id, "destroyed"));
        else
            reply_not_found(r, p->id);
        return;
    }
    d = calloc(1, sizeof *d);
    if (!d) {
        req_error(r, RPC_INTERNAL_ERROR, "out of memory");
        return;
    }
    snprintf(d->id, sizeof d->id, "%s", p->id);
    if (p->wait) {
        d->p.req = r;
        req_on_disconnect(r, pending_detach, &d->p);
    }
    engine_destroy_reason(sb, "caller", req_uid(r));
    ret = engine_destroy(sm->engine, sb, on_destroyed, d, &err);
    if (ret < 0) {
        free(d);
        reply_engine_error(r, &err);
    } else if (!p->wait) {
        /* not replied yet: the callback of a destroy that ended at once had no request (params
         * live until the handler returns, a reply or not: req_handler_end()) */
        req_reply(r, destroy_json(p->id, "destroying"));
    }
}

/* ---- file.write / file.read ---- */

struct file_ctx {
    struct pending p;
    struct params_file_write w;
    struct params_file_read rd;
    bool is_write;
};

static void file_ctx_free(struct file_ctx *f)
{
    if (f->is_write)
        params_file_write_done(&f->w);
    else
        params_file_read_done(&f->rd);
    free(f);
}

/* Answers a file.write or file.read with its error, or with result (taken over; the
 * callback builds it only on success), and frees f. */
static void file_done(struct file_ctx *f, int error, json_object *result)
{
    if (f->p.req && error < 0)
        reply_file_error(f->p.req, error, f->is_write);
    else if (f->p.req)
        req_reply(f->p.req, TAKE_PTR(result));
    json_object_put(result);
    file_ctx_free(f);
}

static void on_written(int error, uint64_t bytes, void *userdata)
{
    json_object *o = NULL;

    if (error >= 0) {
        o = json_object_new_object();
        json_object_object_add(o, "bytes", json_object_new_int64((int64_t)bytes));
    }
    file_done(userdata, error, o);
}

static void on_read(int error, const struct sandbox_read_result *res, void *userdata)
{
    json_object *o = NULL;

    if (error >= 0) {
        o = json_object_new_object();
        (void)b64_object_add_data(o, "content", res->data ? res->data : "", res->len);
        json_object_object_add(o, "size", json_object_new_int64((int64_t)res->size));
        json_object_object_add(o, "eof", json_object_new_boolean(res->eof));
    }
    file_done(userdata, error, o);
}

static void method_file(struct req *r, struct sandbox *sb, void *params, bool write)
{
    struct file_ctx *f;
    struct engine_error err;
    int ret;

    f = calloc(1, sizeof *f);
    if (!f) {
        req_error(r, RPC_INTERNAL_ERROR, "out of memory");
        return;
    }
    /* The transfer may outlive the request: take the params. */
    if (write) {
        struct params_file_write *w = params;

        f->w = *w;
        *w = (struct params_file_write){};
    } else {
        struct params_file_read *rd = params;

        f->rd = *rd;
        *rd = (struct params_file_read){};
    }
    f->is_write = write;
    if (write) {
        struct sandbox_write_params wp = {
            .path = f->w.path,
            .data = f->w.content,
            .len = f->w.content_len,
            .mode = f->w.mode,
            .make_parents = f->w.make_parents,
            .in_place = f->w.offset >= 0 || f->w.append,
            .append = f->w.append,
            .offset = f->w.offset >= 0 ? (uint64_t)f->w.offset : 0,
        };
        ret = sandbox_file_write(sb, &wp, on_written, f, &err);
        if (ret >= 0)
            f->w.content = NULL; /* taken by the write */
    } else
        ret = sandbox_file_read(sb, f->rd.path, (uint64_t)f->rd.offset, (uint64_t)f->rd.length,
                                on_read, f, &err);
    if (ret < 0) {
        file_ctx_free(f);
        reply_engine_error(r, &err);
        return;
    }
    f->p.req = r;
    req_on_disconnect(r, pending_detach, &f->p);
}

/* The handler of file.write and file.read: userdata points to true for a write. Inline
 * content is moved here; a passed descriptor hands the request to methods-transfer.c. */
static void method_file_rw(struct req *r, void *params, void *userdata)
{
    bool write = *(const bool *)userdata;
    const struct params_file_write *w = params;
    const struct params_file_read *rd = params;
    const char *id = write ? w->id : rd->id;
    struct sandbox *sb;

    sb = methods_sandbox_find(r, id, method_file_rw, params, userdata);
    if (!sb)
        return;
    if ((write ? w->content_fd : rd->to_fd) < 0)
        method_file(r, sb, params, write);
    else
        transfer_file(r, sb, write, params);
}

static const bool file_write = true, file_read = false;

void method_file_write(struct req *r, void *params, void *userdata)
{
    method_file_rw(r, params, (void *)&file_write);
}

void method_file_read(struct req *r, void *params, void *userdata)
{
    method_file_rw(r, params, (void *)&file_read);
}

/* ---- daemon.status ---- */

void methods_sandbox_status(struct sandbox_methods *sm, json_object *status)
{
    unsigned counts[_SANDBOX_STATE_MAX];
    json_object *s = json_object_new_object(), *px = json_object_new_object();
    const char *last_error;
    unsigned total = 0;
    int reachable;

    engine_count_states(sm->engine, counts);
    for (int i = 0; i < _SANDBOX_STATE_MAX; i++) {
        if (i == SANDBOX_GONE)
            continue;
        rpc_add_literal(s, sandbox_state_to_string(i), json_object_new_int64(counts[i]));
        total += counts[i];
    }
    rpc_add_literal(s, "total", json_object_new_int64(total));
    rpc_add_literal(status, "sandboxes", s);

    engine_proxmox_status(sm->engine, &reachable, &last_error);
    rpc_add_literal(px, "configured", json_object_new_boolean(engine_configured(sm->engine)));
    rpc_add_literal(px, "reachable", reachable < 0 ? NULL : json_object_new_boolean(reachable));
    rpc_add_literal(px, "last_error",
                    !engine_configured(sm->engine) ? json_object_new_string("not configured")
                    : last_error                   ? json_object_new_string(last_error)
                    : reachable < 0                ? json_object_new_string("not connected yet")
                                                   : NULL);
    rpc_add_literal(status, "proxmox", px);
    engine_checks_status_add(sm->engine, status);
    pool_status_add(sm->engine, status);

    if (sm->reconcile) {
        struct reconcile_stats st;
        json_object *rc = json_object_new_object(), *stuck = json_object_new_array();
        char t[RFC3339_MAX];

        reconcile_get_stats(sm->reconcile, &st);
        rpc_add_literal(rc, "last_run",
                        st.last_run && time_format_rfc3339(st.last_run, t, sizeof t) == 0
                            ? json_object_new_string(t)
                            : NULL);
        rpc_add_literal(rc, "ok", json_object_new_boolean(st.last_ok));
        rpc_add_literal(rc, "last_error",
                        st.last_error ? json_object_new_string(st.last_error) : NULL);
        rpc_add_literal(rc, "runs", json_object_new_int64((int64_t)st.runs));
        rpc_add_literal(rc, "reattached", json_object_new_int64((int64_t)st.reattached));
        rpc_add_literal(rc, "rolled_back", json_object_new_int64((int64_t)st.rolled_back));
        rpc_add_literal(rc, "resumed", json_object_new_int64((int64_t)st.resumed));
        rpc_add_literal(rc, "orphans_destroyed",
                        json_object_new_int64((int64_t)st.orphans_destroyed));
        rpc_add_literal(rc, "expired_destroyed",
                        json_object_new_int64((int64_t)st.expired_destroyed));
        rpc_add_literal(rc, "registry_problems",
                        json_object_new_int64((int64_t)st.registry_problems));
        for (size_t i = 0; i < st.n_stuck; i++) {
            json_object *o = json_object_new_object();

            rpc_add_literal(o, "vmid", json_object_new_int64(st.stuck[i].vmid));
            rpc_add_literal(o, "lock", json_object_new_string(st.stuck[i].lock));
            rpc_add_literal(o, "sandbox", json_object_new_string(st.stuck[i].sandbox));
            if (time_format_rfc3339(st.stuck[i].since, t, sizeof t) == 0)
                rpc_add_literal(o, "since", json_object_new_string(t));
            json_object_array_add(stuck, o);
        }
        rpc_add_literal(rc, "stuck", stuck);
        rpc_add_literal(status, "reconcile", rc);
    }
}

/* ---- start, reload, stop ---- */

void methods_sandbox_reload(struct sandbox_methods *sm)
{
    if (sm->engine)
        engine_recheck(sm->engine); /* templates and the datacenter firewall, read again */
    if (sm->engine && sm->reconcile)
        engine_pool_apply(sm->engine);
}

static void engine_notice(int level, const char *msg, void *userdata)
{
    log_emit(level, "engine", "%s", msg);
}

/* A create resumed after a restart ended: the retries of its key that joined it get its
 * outcome. */
static void engine_resumed(const struct engine_error *err, struct sandbox *sb, void *userdata)
{
    struct sandbox_methods *sm = userdata;

    if (sb)
        idem_serve(sm, sb, err);
}

static void engine_event(const struct sandbox_event *ev, void *userdata)
{
    struct sandbox_methods *sm = userdata;

    events_publish(sm->events, ev);
}

int methods_sandbox_start(struct sandbox_methods *sm, uv_loop_t *loop, const struct config *cfg,
                          struct events *events)
{
    const struct engine_hooks hooks = {
        .notice = engine_notice, .resumed = engine_resumed, .event = engine_event, .userdata = sm};
    _cleanup_free_ char *err = NULL;
    int r;

    assert(!sm->engine && !sm->reconcile && !sm->parked && !sm->idem_waits);
    sm->events = events;
    r = engine_new(loop, cfg, &hooks, &sm->engine, &err);
    if (r < 0) {
        log_error(COMP, "cannot start the sandbox engine: %s", err ? err : strerror(-r));
        return r;
    }
    (void)engine_forward_cleanup(sm->engine); /* socket folders a crash left */
    r = engine_preview_start(sm->engine, &err);
    if (r < 0) {
        log_error(COMP, "cannot start the preview listener: %s", err ? err : strerror(-r));
        return r;
    }
    r = engine_eproxy_start(sm->engine, &err);
    if (r < 0) {
        log_error(COMP, "cannot start the egress proxy: %s", err ? err : strerror(-r));
        return r;
    }
    if (engine_configured(sm->engine)) {
        r = reconcile_new(sm->engine, on_reconciled, sm, &sm->reconcile);
        if (r < 0) {
            log_error(COMP, "cannot start the reconcile: %s", strerror(-r));
            return r;
        }
    }
    return 0;
}

static void stop_now(void *userdata)
{
    struct sandbox_methods *sm = userdata;

    methods_sandbox_unpark_refuse(sm);
    sm->reconcile = reconcile_free(sm->reconcile);
    engine_close(TAKE_PTR(sm->engine), NULL, NULL);
}

void methods_sandbox_stop(struct sandbox_methods *sm)
{
    const struct config *cfg = sm->engine ? engine_config(sm->engine) : NULL;

    engine_pool_pause(sm->engine); /* no refill while stopping */
    /* Sandboxes outlive the daemon unless [sandbox] destroy_on_stop says otherwise. */
    if (sm->reconcile && cfg && cfg->sandbox.destroy_on_stop) {
        log_info(COMP, "destroy_on_stop: destroying every sandbox before stopping");
        if (reconcile_destroy_all(sm->reconcile, stop_now, sm) == 0)
            return;
    }
    stop_now(sm);
}

json_object *methods_sandbox_json(const struct sandbox *sb)
{
    return sandbox_json(sb);
}

void methods_wait_on_sandbox(const struct engine_error *err, struct sandbox *sb, void *userdata)
{
    methods_wait_end(userdata, err, err ? NULL : methods_sandbox_json(sb));
}
