/* sandbox.exec: the command over the sandbox's SSH session (sandbox-io.h), its output
 * captured into the result or streamed as exec.output notifications behind the
 * connection's writer; with descriptors it runs through methods-transfer.c. */
#include "methods-exec.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "macro.h"
#include "sandbox-io.h"
#include "sandbox.h"
#include "util.h"
#include "methods-common.h"
#include "methods-resume.h"
#include "methods-transfer.h"
#include "b64.h"
#include "params.h"
#include "rpc.h"
#include "req.h"

#define COMP "sandbox"

struct note {
    json_object *params;
    struct note *next;
};

struct exec_ctx {
    struct req *req;
    struct sandbox_job *job;
    struct params_sandbox_exec p;
    char **env;
    struct note *head, *tail; /* exec.output notifications waiting for the writer */
    json_object *result;      /* the final result, held until the notifications are out */
    bool drain_armed;
};

static void exec_ctx_free(struct exec_ctx *x)
{
    struct note *n = x->head;

    while (n) {
        struct note *next = n->next;
        json_object_put(n->params);
        free(n);
        n = next;
    }
    sandbox_env_free(x->env);
    if (x->result)
        json_object_put(x->result);
    params_sandbox_exec_done(&x->p);
    free(x);
}

static void exec_flush(struct exec_ctx *x);

static void on_exec_drain(struct req *r, void *userdata)
{
    struct exec_ctx *x = userdata;

    x->drain_armed = false;
    exec_flush(x);
}

/* Sends queued notifications while the connection takes them; then the final result. */
static void exec_flush(struct exec_ctx *x)
{
    if (!x->req)
        return;
    while (x->head) {
        struct note *n = x->head;

        if (req_output_busy(x->req)) {
            if (!x->drain_armed) {
                x->drain_armed = true;
                req_on_drain(x->req, on_exec_drain, x);
            }
            return;
        }
        x->head = n->next;
        if (!x->head)
            x->tail = NULL;
        (void)req_notify(x->req, "exec.output", n->params);
        free(n);
    }
    if (x->result && !x->job) {
        struct req *r = x->req;
        x->req = NULL;
        req_reply(r, TAKE_PTR(x->result));
        exec_ctx_free(x);
    }
}

static void on_exec_output(enum sandbox_output stream, const void *data, size_t len, void *userdata)
{
    struct exec_ctx *x = userdata;
    json_object *o;
    struct note *n;

    if (!x->req || len == 0)
        return;
    o = json_object_new_object();
    n = calloc(1, sizeof *n);
    if (!o || !n) {
        json_object_put(o);
        free(n);
        return;
    }
    json_object_object_add(o, "request_id", json_object_get(req_id(x->req)));
    json_object_object_add(o, "stream",
                           json_object_new_string(stream == SANDBOX_STDOUT ? "stdout" : "stderr"));
    (void)b64_object_add_data(o, "data", data, len);
    n->params = o;
    if (x->tail)
        x->tail->next = n;
    else
        x->head = n;
    x->tail = n;
    exec_flush(x);
}

static void on_exec_done(int error, const struct sandbox_exec_result *res, void *userdata)
{
    struct exec_ctx *x = userdata;
    json_object *o;

    x->job = NULL;
    if (!x->req) {
        exec_ctx_free(x);
        return;
    }
    if (error < 0) {
        struct req *r = x->req;
        x->req = NULL;
        methods_sandbox_reply_io_error(r, error, false);
        exec_ctx_free(x);
        return;
    }
    if (res->user_error) {
        struct req *r = x->req;

        x->req = NULL;
        req_invalid_params(r, "user",
                           res->user_error == SANDBOX_USER_UNKNOWN ? SANDBOX_USER_UNKNOWN_REASON
                                                                   : SANDBOX_USER_NO_SWITCH_REASON);
        exec_ctx_free(x);
        return;
    }
    o = json_object_new_object();
    json_object_object_add(o, "exit_code",
                           res->exit_code >= 0 ? json_object_new_int(res->exit_code) : NULL);
    json_object_object_add(o, "signal", res->signal ? json_object_new_string(res->signal) : NULL);
    json_object_object_add(o, "timed_out", json_object_new_boolean(res->timed_out));
    json_object_object_add(o, "started", json_object_new_boolean(res->started));
    if (!x->p.stream) {
        (void)b64_object_add_data(o, "stdout", res->out ? res->out : "", res->out_len);
        (void)b64_object_add_data(o, "stderr", res->err ? res->err : "", res->err_len);
    }
    json_object_object_add(o, "stdout_truncated", json_object_new_boolean(res->out_truncated));
    json_object_object_add(o, "stderr_truncated", json_object_new_boolean(res->err_truncated));
    json_object_object_add(o, "duration_ms", json_object_new_int64((int64_t)res->duration_ms));
    x->result = o;
    exec_flush(x);
}

static void on_exec_disconnect(struct req *r, void *userdata)
{
    struct exec_ctx *x = userdata;

    /* The cancel kills the process tree; done runs later. */
    if (methods_detach(r, &x->req, x->job))
        exec_ctx_free(x); /* waiting for drain only */
}

void method_sandbox_exec(struct req *r, void *params, void *userdata)
{
    struct sandbox_methods *sm = methods_sandbox(r);
    struct params_sandbox_exec *p = params;
    struct sandbox_exec_params sp = {};
    struct exec_ctx *x;
    struct sandbox_info v;
    struct sandbox *sb;
    struct engine_error err;
    int ret;

    if (methods_sandbox_park(r, p->id, method_sandbox_exec, params, userdata) ||
        methods_resume_first_id(r, sm->engine, p->id, method_sandbox_exec, params, userdata,
                                methods_sandbox_reply_error))
        return;
    x = calloc(1, sizeof *x);
    if (!x) {
        req_error(r, RPC_INTERNAL_ERROR, "out of memory");
        return;
    }
    /* The command may outlive the request (cancelled, then reaped): take it. */
    x->p = *p;
    *p = (struct params_sandbox_exec){};
    sb = methods_sandbox_lookup(sm, r, x->p.id);
    if (!sb) {
        exec_ctx_free(x);
        return;
    }
    sandbox_view(sb, &v);
    if (v.state != SANDBOX_READY) {
        exec_ctx_free(x);
        methods_sandbox_reply_state(r, sb);
        return;
    }
    if (methods_env_merge(r, sb, &x->p.env, PARAMS_ENV_MAX, PARAMS_ENV_BYTES_MAX, &x->env) < 0) {
        exec_ctx_free(x);
        return;
    }
    sp.command = x->p.command;
    sp.argv = (const char *const *)x->p.argv;
    sp.env = (const char *const *)x->env;
    sandbox_defaults(sb, &sp.cwd, &sp.user); /* its template's, unless the call gives its own */
    if (x->p.cwd)
        sp.cwd = x->p.cwd;
    if (x->p.user[0])
        sp.user = x->p.user;
    sp.stdin_data = x->p.has_stdin ? x->p.stdin_data : NULL;
    sp.stdin_len = x->p.has_stdin ? x->p.stdin_len : 0;
    sp.timeout_ms = (uint64_t)x->p.timeout_ms;
    sp.has_max_output = true; /* the parser filled in the default; 0 keeps nothing */
    sp.max_output_bytes = (size_t)x->p.max_output_bytes;
    sp.on_output = x->p.stream ? on_exec_output : NULL;
    if (x->p.stdin_fd >= 0 || x->p.stdout_fd >= 0 || x->p.stderr_fd >= 0) {
        transfer_exec(r, sb, &sp, &x->p);
        exec_ctx_free(x);
        return;
    }
    x->req = r;
    ret = sandbox_exec(sb, &sp, on_exec_done, x, &x->job, &err);
    if (ret < 0) {
        x->req = NULL;
        exec_ctx_free(x);
        methods_sandbox_reply_error(r, &err);
        return;
    }
    req_on_disconnect(r, on_exec_disconnect, x);
}
