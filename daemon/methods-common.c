/* The helpers every sandbox-area method shares. See methods-common.h. */
#include "methods-common.h"

#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "macro.h"
#include "reconcile.h"
#include "daemon.h"
#include "methods-resume.h"
#include "methods-pool.h"
#include "params.h"
#include "rpc.h"

struct sandbox_methods *methods_sandbox(const struct req *r)
{
    struct daemon *d = req_daemon(r);

    assert(d);
    return &d->sandbox;
}

/* ---- replies ---- */

/* The code of docs/protocol.md for each kind of engine error; 0: -32603. */
static const int codes[] = {
    [ENGINE_E_NOT_FOUND] = RPC_NO_SUCH_SANDBOX,
    [ENGINE_E_STATE] = RPC_BAD_STATE,
    [ENGINE_E_QUOTA] = RPC_QUOTA_EXCEEDED,
    [ENGINE_E_PROXMOX] = RPC_PROXMOX_ERROR,
    [ENGINE_E_SSH] = RPC_SSH_ERROR,
    [ENGINE_E_DEADLINE] = RPC_DEADLINE_EXCEEDED,
    [ENGINE_E_BUSY] = RPC_BUSY,
    [ENGINE_E_NOT_CONFIGURED] = RPC_BUSY,
    [ENGINE_E_FILE] = RPC_FILE_ERROR,
    [ENGINE_E_INVALID] = RPC_INVALID_PARAMS,
    [ENGINE_E_SHUTDOWN] = RPC_SHUTTING_DOWN,
};

static int code_of(enum engine_err_kind k)
{
    return (size_t)k < ELEMENTSOF(codes) && codes[k] ? codes[k] : RPC_INTERNAL_ERROR;
}

bool methods_detach(struct req *r, struct req **slot, struct sandbox_job *job)
{
    *slot = NULL;
    req_error(r, RPC_SHUTTING_DOWN, "the client went away");
    if (!job)
        return true;
    sandbox_job_cancel(job);
    return false;
}

static void wait_detach(struct req *r, void *userdata)
{
    struct methods_wait *w = userdata;

    (void)methods_detach(r, &w->req, NULL);
}

struct methods_wait *methods_wait_new(struct req *r)
{
    struct methods_wait *w = calloc(1, sizeof *w);

    if (!w) {
        req_error(r, RPC_INTERNAL_ERROR, "out of memory");
        return NULL;
    }
    w->req = r;
    req_on_disconnect(r, wait_detach, w);
    return w;
}

void methods_wait_refused(struct methods_wait *w, const struct engine_error *err)
{
    struct req *r = w->req;

    req_on_disconnect(r, NULL, NULL);
    free(w);
    methods_sandbox_reply_error(r, err);
}

void methods_wait_end(struct methods_wait *w, const struct engine_error *err, json_object *result)
{
    if (w->req) {
        req_on_disconnect(w->req, NULL, NULL);
        if (err)
            methods_sandbox_reply_error(w->req, err);
        else
            req_reply(w->req, result ? json_object_get(result) : json_object_new_object());
    }
    json_object_put(result);
    free(w);
}

void methods_wait_on_json(const struct engine_error *err, json_object *result, void *userdata)
{
    methods_wait_end(userdata, err, json_object_get(result));
}

void methods_sandbox_reply_error(struct req *r, const struct engine_error *err)
{
    json_object *d;

    if (err->kind == ENGINE_E_INVALID && err->error == -EPERM) { /* not the caller's */
        d = json_object_new_object();
        json_object_object_add(d, "reason", json_object_new_string(err->message));
        req_error_data(r, RPC_PERMISSION_DENIED, NULL, d);
        return;
    }
    if (err->kind == ENGINE_E_INVALID) {
        req_error_data(r, RPC_INVALID_PARAMS, NULL,
                       pool_invalid_data(methods_sandbox(r)->engine, err));
        return;
    }
    d = json_object_new_object();
    json_object_object_add(d, "reason", json_object_new_string(err->message ? err->message : ""));
    if (err->kind == ENGINE_E_PROXMOX) {
        json_object_object_add(d, "http_status", json_object_new_int(err->http_status));
        json_object_object_add(d, "message",
                               json_object_new_string(err->message ? err->message : ""));
        if (err->upid)
            json_object_object_add(d, "upid", json_object_new_string(err->upid));
    }
    if (err->state)
        json_object_object_add(d, "state", json_object_new_string(err->state));
    if (err->error < 0 && strerrorname_np(-err->error))
        json_object_object_add(d, "errno", json_object_new_string(strerrorname_np(-err->error)));
    req_error_data(r, code_of(err->kind), NULL, d);
}

void methods_sandbox_reply_not_found(struct req *r, const char *id)
{
    json_object *d = json_object_new_object();

    json_object_object_add(d, "reason", json_object_new_string("no such sandbox"));
    json_object_object_add(d, "id", json_object_new_string(id));
    req_error_data(r, RPC_NO_SUCH_SANDBOX, NULL, d);
}

void methods_sandbox_reply_state(struct req *r, const struct sandbox *sb)
{
    json_object *d = json_object_new_object();
    struct sandbox_info v;

    sandbox_view(sb, &v);
    json_object_object_add(d, "reason",
                           json_object_new_string(v.state == SANDBOX_PAUSED
                                                      ? ENGINE_PAUSED_MESSAGE
                                                      : "the sandbox is not ready"));
    json_object_object_add(d, "state", json_object_new_string(sandbox_state_to_public(v.state)));
    req_error_data(r, RPC_BAD_STATE, NULL, d);
}

/* An error a callback reported as a negative errno, classified by the engine. */
void methods_sandbox_reply_io_error(struct req *r, int error, bool file)
{
    struct engine_error err;

    engine_error_from_io(error, file, &err);
    methods_sandbox_reply_error(r, &err);
}

/* File errors with a reason of their own: the deadline and files that are not regular. */
void methods_sandbox_reply_file_error(struct req *r, int error, bool write)
{
    json_object *d;

    if (error != -ETIME && error != -EINVAL) {
        methods_sandbox_reply_io_error(r, error, true);
        return;
    }
    d = json_object_new_object();
    if (error == -ETIME) {
        unsigned ms = req_config(r)->ssh.file_timeout_ms;
        char reason[128];

        snprintf(reason, sizeof(reason), "the file %s did not finish within %u ms",
                 write ? "write" : "read", ms);
        json_object_object_add(d, "reason", json_object_new_string(reason));
        json_object_object_add(d, "timeout_ms", json_object_new_int64(ms));
        req_error_data(r, RPC_DEADLINE_EXCEEDED, NULL, d);
        return;
    }
    json_object_object_add(
        d, "reason",
        json_object_new_string(write ? "not a regular file (a FIFO, socket or device, or a "
                                       "symbolic link to one or to nothing): not replaced"
                                     : "not a regular file (a FIFO, socket or device): not read"));
    json_object_object_add(d, "errno", json_object_new_string("EINVAL"));
    req_error_data(r, RPC_FILE_ERROR, NULL, d);
}

/* ---- env ---- */

int methods_env_merge(struct req *r, const struct sandbox *sb, const struct params_kv_list *env,
                      size_t max_vars, size_t max_bytes, char ***ret)
{
    char **own = calloc(env->n + 1, sizeof *own);
    char reason[192];
    size_t bytes = 0;
    json_object *d;
    int k = own ? 0 : -ENOMEM;

    for (size_t i = 0; k == 0 && i < env->n; i++)
        if (asprintf(&own[i], "%s=%s", env->items[i].key, env->items[i].value) < 0) {
            own[i] = NULL;
            k = -ENOMEM;
        }
    if (k == 0)
        k = sandbox_env_merge(sb, (const char *const *)own, max_vars, max_bytes, ret, &bytes);
    sandbox_env_free(own);
    if (k == -E2BIG) {
        snprintf(reason, sizeof reason,
                 "env: with the sandbox's own env (sandbox.create) and its template's defaults, "
                 "more than %zu variables or %zu bytes of names and values (%zu bytes)",
                 max_vars, max_bytes, bytes);
        d = json_object_new_object();
        json_object_object_add(d, "reason", json_object_new_string(reason));
        json_object_object_add(d, "param", json_object_new_string("env"));
        json_object_object_add(d, "max", json_object_new_int64((int64_t)max_bytes));
        req_error_data(r, RPC_INVALID_PARAMS, NULL, d);
    } else if (k < 0)
        req_error(r, RPC_INTERNAL_ERROR, "out of memory");
    return k;
}

/* ---- lookup, and parking until the first reconcile ---- */

/* Looks the sandbox up for the caller; replies -32001 and returns NULL when not visible. */
struct sandbox *methods_sandbox_lookup(struct sandbox_methods *sm, struct req *r, const char *id)
{
    struct sandbox *sb = engine_lookup(sm->engine, id, req_uid(r), req_is_admin(r));

    if (!sb)
        methods_sandbox_reply_not_found(r, id);
    return sb;
}

/* Requests held until the first reconcile ended: it rebuilds the table of sandboxes that
 * quotas, idempotency keys and lookups are checked against. Creates and lists always wait;
 * a request naming a sandbox waits only while that sandbox is not (yet) in the table, so a
 * live sandbox is never reported missing just after a restart. */
struct parked {
    struct req *req;
    method_handler_t handler;
    void *params; /* owned by req */
    void *userdata;
    struct sandbox_methods *sm;
    struct parked *next;
};

static void parked_disconnect(struct req *r, void *userdata)
{
    struct parked *x = userdata, **pp;

    for (pp = &x->sm->parked; *pp; pp = &(*pp)->next)
        if (*pp == x) {
            *pp = x->next;
            break;
        }
    free(x);
    req_error(r, RPC_SHUTTING_DOWN, "the client went away");
}

/* Parks r (to run handler again once the first reconcile ended) and returns true while that
 * reconcile runs and id (NULL: any) is not in the table. */
bool methods_sandbox_park(struct req *r, const char *id, method_handler_t handler, void *params,
                          void *userdata)
{
    struct sandbox_methods *sm = methods_sandbox(r);
    struct parked *x;

    if (!sm->reconcile || reconcile_initial_done(sm->reconcile))
        return false;
    if (id && engine_lookup(sm->engine, id, req_uid(r), req_is_admin(r)))
        return false;
    x = calloc(1, sizeof *x);
    if (!x) {
        req_error(r, RPC_INTERNAL_ERROR, "out of memory");
        return true;
    }
    x->req = r;
    x->handler = handler;
    x->params = params;
    x->userdata = userdata;
    x->sm = sm;
    x->next = sm->parked;
    sm->parked = x;
    req_on_disconnect(r, parked_disconnect, x);
    return true;
}

struct sandbox *methods_sandbox_find(struct req *r, const char *id, method_handler_t handler,
                                     void *params, void *userdata)
{
    struct sandbox *sb;

    if (methods_sandbox_park(r, id, handler, params, userdata))
        return NULL;
    sb = methods_sandbox_lookup(methods_sandbox(r), r, id);
    if (sb && methods_resume_first(r, methods_sandbox(r)->engine, sb, handler, params, userdata,
                                   methods_sandbox_reply_error))
        return NULL;
    return sb;
}

void methods_sandbox_unpark(struct sandbox_methods *sm)
{
    struct parked *l = TAKE_PTR(sm->parked), *rev = NULL;

    while (l) { /* in arrival order */
        struct parked *n = l->next;
        l->next = rev;
        rev = l;
        l = n;
    }
    while (rev) {
        struct parked *n = rev->next;
        struct req *r = rev->req;
        method_handler_t handler = rev->handler;
        void *params = rev->params;
        void *userdata = rev->userdata;

        free(rev);
        req_on_disconnect(r, NULL, NULL);
        handler(r, params, userdata);
        rev = n;
    }
}

void methods_sandbox_unpark_refuse(struct sandbox_methods *sm)
{
    struct parked *x = TAKE_PTR(sm->parked);

    while (x) {
        struct parked *n = x->next;
        req_on_disconnect(x->req, NULL, NULL);
        req_error(x->req, RPC_SHUTTING_DOWN, "the daemon is shutting down");
        free(x);
        x = n;
    }
}
