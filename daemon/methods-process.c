/* The process.* methods: background processes inside a sandbox, each call one short exec the
 * engine runs on the sandbox's pool (sandbox-io.h). The daemon keeps no process state: the
 * container's folder is the record, so a restart or kill -9 of the daemon loses nothing. */
#include "methods-process.h"

#include <assert.h>
#include <errno.h>
#include <stddef.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "macro.h"
#include "sandbox-io.h"
#include "sandbox.h"
#include "util.h"
#include "methods-common.h"
#include "methods-resume.h"
#include "methods-sandbox.h"
#include "methods-transfer.h"
#include "methods.h"
#include "b64.h"
#include "params-process.h"
#include "rpc.h"
#include "req.h"

#define COMP "process"

static_assert(PARAMS_PROCESS_ID_LEN == SANDBOX_PROCESS_ID_LEN, "process ids differ in length");

struct call {
    enum sandbox_process_op op;
    struct req *req;
    struct sandbox_job *job;
    char process[SANDBOX_PROCESS_ID_LEN + 1];
    bool has_stdin, closed;
    unsigned pty_cols, pty_rows; /* start: 0 without a terminal */
    size_t written;
    char signal[8];
};

/* ---- replies ---- */

static void call_free(struct call *c)
{
    free(c);
}

static void reply_error(struct req *r, int code, const char *reason, const char *param,
                        const char *process)
{
    json_object *d;

    if (code == RPC_INVALID_PARAMS) {
        req_invalid_params(r, param, reason);
        return;
    }
    d = json_object_new_object();
    json_object_object_add(d, "reason", json_object_new_string(reason));
    if (process)
        json_object_object_add(d, "process", json_object_new_string(process));
    req_error_data(r, code, NULL, d);
}

static void add_status(json_object *o, const struct sandbox_process_status *st)
{
    json_object_object_add(o, "state", json_object_new_string(st->state));
    json_object_object_add(o, "exit_code",
                           st->exit_code >= 0 ? json_object_new_int(st->exit_code) : NULL);
    if (st->signal > 0 && sigabbrev_np(st->signal)) {
        char name[24];

        snprintf(name, sizeof name, "SIG%s", sigabbrev_np(st->signal));
        json_object_object_add(o, "signal", json_object_new_string(name));
    } else {
        json_object_object_add(o, "signal", NULL);
    }
}

static void add_time(json_object *o, const char *name, time_t t)
{
    char buf[RFC3339_MAX];

    if (time_format_rfc3339(t, buf, sizeof buf) == 0)
        json_object_object_add(o, name, json_object_new_string(buf));
}

static json_object *result_read(const struct sandbox_process_result *res)
{
    json_object *o = json_object_new_object();
    const uint64_t *nums = res->nums;
    uint64_t next = nums[1] + res->len;

    (void)b64_object_add_data(o, "data", res->data, res->len);
    json_object_object_add(o, "process", json_object_new_string(res->process));
    json_object_object_add(o, "offset", json_object_new_int64((int64_t)nums[1]));
    json_object_object_add(o, "next_offset", json_object_new_int64((int64_t)next));
    json_object_object_add(o, "available_from", json_object_new_int64((int64_t)nums[0]));
    json_object_object_add(o, "size", json_object_new_int64((int64_t)nums[2]));
    json_object_object_add(
        o, "eof",
        json_object_new_boolean(strcmp(res->status.state, "running") != 0 && next >= nums[2]));
    add_status(o, &res->status);
    return o;
}

static json_object *result_list(const struct sandbox_process_result *res)
{
    json_object *o = json_object_new_object(), *a = json_object_new_array();

    for (size_t i = 0; i < res->n_rows; i++) {
        const struct sandbox_process_row *row = &res->rows[i];
        json_object *p = json_object_new_object();

        json_object_object_add(p, "process", json_object_new_string(row->process));
        json_object_object_add(p, "command", json_object_new_string(row->command));
        add_time(p, "started_at", row->started_at);
        add_status(p, &row->status);
        json_object_array_add(a, p);
    }
    json_object_object_add(o, "processes", a);
    return o;
}

static json_object *result_of(struct call *c, const struct sandbox_process_result *res)
{
    json_object *o;

    switch (c->op) {
    case SANDBOX_PROCESS_READ:
        return result_read(res);
    case SANDBOX_PROCESS_LIST:
        return result_list(res);
    default:
        break;
    }
    o = json_object_new_object();
    json_object_object_add(o, "process", json_object_new_string(res->process));
    if (c->op == SANDBOX_PROCESS_START) {
        json_object_object_add(o, "state", json_object_new_string("running"));
        json_object_object_add(o, "command", json_object_new_string(res->display));
        add_time(o, "started_at", res->started_at);
        json_object_object_add(o, "stdin", json_object_new_boolean(c->has_stdin));
        if (c->pty_cols) {
            json_object *t = json_object_new_object();

            json_object_object_add(t, "cols", json_object_new_int((int)c->pty_cols));
            json_object_object_add(t, "rows", json_object_new_int((int)c->pty_rows));
            json_object_object_add(o, "pty", t);
        }
        return o;
    }
    if (c->op == SANDBOX_PROCESS_RESIZE) {
        json_object_object_add(o, "cols", json_object_new_int((int)c->pty_cols));
        json_object_object_add(o, "rows", json_object_new_int((int)c->pty_rows));
    }
    if (c->op == SANDBOX_PROCESS_WRITE) {
        json_object_object_add(o, "written", json_object_new_int64((int64_t)c->written));
        json_object_object_add(o, "closed", json_object_new_boolean(c->closed));
        return o;
    }
    if (c->op == SANDBOX_PROCESS_KILL) {
        char name[12];

        snprintf(name, sizeof name, "SIG%s", c->signal);
        /* null: the process had already ended and was left alone */
        json_object_object_add(o, "sent", res->nums[0] ? json_object_new_string(name) : NULL);
    }
    add_status(o, &res->status);
    return o;
}

/* The script reported something other than OK. */
static void reply_report(struct req *r, struct call *c, enum sandbox_process_report rep,
                         const uint64_t nums[3])
{
    const struct config *cfg = req_config(r);
    char reason[160];

    switch (rep) {
    case SANDBOX_PROCESS_R_NO_SUCH:
        reply_error(r, RPC_INVALID_PARAMS, "no such process", "process", NULL);
        return;
    case SANDBOX_PROCESS_R_LIMIT:
        snprintf(reason, sizeof reason,
                 "the sandbox already runs %llu background processes (limit %u)",
                 (unsigned long long)nums[0], cfg->sandbox.max_processes);
        reply_error(r, RPC_QUOTA_EXCEEDED, reason, NULL, NULL);
        return;
    case SANDBOX_PROCESS_R_CWD:
        reply_error(r, RPC_INVALID_PARAMS, "not a directory in the sandbox", "cwd", NULL);
        return;
    case SANDBOX_PROCESS_R_NO_USER:
    case SANDBOX_PROCESS_R_NO_SWITCH:
        reply_error(r, RPC_INVALID_PARAMS,
                    rep == SANDBOX_PROCESS_R_NO_USER ? SANDBOX_USER_UNKNOWN_REASON
                                                     : SANDBOX_USER_NO_SWITCH_REASON,
                    "user", NULL);
        return;
    case SANDBOX_PROCESS_R_NO_PTY:
        reply_error(r, RPC_INVALID_PARAMS,
                    "the sandbox cannot make a terminal (it needs util-linux script and a "
                    "mounted /dev/pts)",
                    "pty", NULL);
        return;
    case SANDBOX_PROCESS_R_RANGE:
        snprintf(reason, sizeof reason, "past the end of the output (%llu bytes so far)",
                 (unsigned long long)nums[2]);
        reply_error(r, RPC_INVALID_PARAMS, reason, "offset", NULL);
        return;
    case SANDBOX_PROCESS_R_EXITED:
        reply_error(r, RPC_BAD_STATE, "the process has ended", NULL, c->process);
        return;
    case SANDBOX_PROCESS_R_NO_STDIN:
        reply_error(r, RPC_BAD_STATE, "the process was started without stdin", NULL, c->process);
        return;
    case SANDBOX_PROCESS_R_CLOSED:
        reply_error(r, RPC_BAD_STATE, "the process's stdin is closed", NULL, c->process);
        return;
    case SANDBOX_PROCESS_R_NO_TTY:
        reply_error(r, RPC_BAD_STATE, "the process was started without a terminal (pty)", NULL,
                    c->process);
        return;
    default:
        reply_error(r, RPC_SSH_ERROR, "unexpected answer from the sandbox", NULL, NULL);
        return;
    }
}

static void on_call_done(int error, const struct sandbox_process_result *res, void *userdata)
{
    struct call *c = userdata;
    struct req *r = TAKE_PTR(c->req);

    c->job = NULL;
    if (!r) {
        call_free(c);
        return;
    }
    req_on_disconnect(r, NULL, NULL);
    if (error < 0) {
        methods_sandbox_reply_io_error(r, error, false);
    } else if (res->timed_out) {
        reply_error(r, RPC_DEADLINE_EXCEEDED,
                    c->op == SANDBOX_PROCESS_WRITE ? "the process does not read its stdin"
                                                   : "the sandbox did not answer in time",
                    NULL, res->process[0] ? res->process : NULL);
    } else if (res->report != SANDBOX_PROCESS_R_OK) {
        if (res->report == SANDBOX_PROCESS_R_MALFORMED)
            log_debug(COMP, "unexpected report (exit %d): %.*s", res->exit_code,
                      (int)MIN(res->raw_len, (size_t)400), res->raw ? res->raw : "");
        snprintf(c->process, sizeof c->process, "%s", res->process);
        reply_report(r, c, res->report, res->nums);
    } else {
        req_reply(r, result_of(c, res));
    }
    call_free(c);
}

static void on_call_disconnect(struct req *r, void *userdata)
{
    struct call *c = userdata;
    bool long_poll = c->op == SANDBOX_PROCESS_READ || c->op == SANDBOX_PROCESS_WAIT;

    /* A long-poll is abandoned; a start, write or kill runs to its end. */
    (void)methods_detach(r, &c->req, long_poll ? c->job : NULL);
}

/* Finds the caller's READY sandbox for id, then runs the call; completes r on failure.
 * Takes c and pc->pump. */
static void call_run(struct req *r, const char *id, struct call *c,
                     const struct sandbox_process_call *pc, const struct params_kv_list *env)
{
    struct sandbox_process_call start;
    const char *dcwd, *duser;
    char **merged = NULL;
    struct engine *e = methods_sandbox(r)->engine;
    struct engine_error err;
    struct sandbox *sb = e ? engine_lookup(e, id, req_uid(r), req_is_admin(r)) : NULL;
    struct sandbox_info v;
    int k;

    if (!sb) {
        methods_sandbox_reply_not_found(r, id);
        goto fail;
    }
    sandbox_view(sb, &v);
    if (v.state != SANDBOX_READY) {
        methods_sandbox_reply_state(r, sb);
        goto fail;
    }
    if (env) { /* a start: the sandbox's env under the call's */
        if (methods_env_merge(r, sb, env, PARAMS_ENV_MAX, PARAMS_PROCESS_ENV_BYTES_MAX, &merged) <
            0)
            goto fail;
        start = *pc;
        start.env = (const char *const *)merged;
        sandbox_defaults(sb, &dcwd, &duser); /* its template's, unless the call gives its own */
        if (!start.cwd)
            start.cwd = dcwd;
        if (!start.user || !start.user[0])
            start.user = duser;
        pc = &start;
    }
    c->req = r;
    k = sandbox_process(sb, pc, on_call_done, c, &c->job, &err);
    sandbox_env_free(merged);
    if (k < 0) {
        c->req = NULL;
        methods_sandbox_reply_error(r, &err);
        call_free(c);
        return;
    }
    req_on_disconnect(r, on_call_disconnect, c);
    return;
fail:
    sandbox_pump_free(pc->pump);
    call_free(c);
}

static struct call *call_new(struct req *r, enum sandbox_process_op op, const char *process)
{
    struct call *c = calloc(1, sizeof *c);

    if (!c) {
        req_error(r, RPC_INTERNAL_ERROR, "out of memory");
        return NULL;
    }
    c->op = op;
    if (process)
        snprintf(c->process, sizeof c->process, "%s", process);
    return c;
}

/* ---- descriptor pumps ---- */

/* A pump ended: what the operator may want to know. */
static void on_pump_end(int error, const struct sandbox_pump_end *end, void *userdata)
{
    if (!end->started)
        log_warning(COMP, "%s %s: cannot start the descriptor pump: %s", end->sandbox, end->process,
                    strerror(-error));
    else if (error < 0 && !end->stopped)
        log_info(COMP, "%s %s: the descriptor pump ended early: %s", end->sandbox, end->process,
                 strerror(-error));
    else
        log_debug(COMP, "%s %s: descriptor pump over (in %s, out %llu, err %llu bytes)",
                  end->sandbox, end->process, end->in ? "yes" : "no",
                  (unsigned long long)end->out_bytes, (unsigned long long)end->err_bytes);
}

/* Before the launch: takes the descriptors (-32602 for a missing index or the wrong
 * direction) and the engine's pump with its transfer slot (-32007). False with r answered
 * when something was refused (what was taken is closed); *ret NULL when p names none. */
static bool pump_prepare(struct req *r, const struct params_process_start *p,
                         struct sandbox_pump **ret)
{
    struct engine *e = methods_sandbox(r)->engine;
    int fds[3] = {-1, -1, -1};
    struct engine_error err;

    *ret = NULL;
    if (p->stdin_fd < 0 && p->stdout_fd < 0 && p->stderr_fd < 0)
        return true;
    if ((p->stdin_fd >= 0 && !transfer_take_fd(r, "stdin_fd", p->stdin_fd, REQ_FD_READ, &fds[0])) ||
        (p->stdout_fd >= 0 &&
         !transfer_take_fd(r, "stdout_fd", p->stdout_fd, REQ_FD_WRITE, &fds[1])) ||
        (p->stderr_fd >= 0 &&
         !transfer_take_fd(r, "stderr_fd", p->stderr_fd, REQ_FD_WRITE, &fds[2])))
        goto fail;
    if (!e) {
        req_error(r, RPC_INTERNAL_ERROR, "the engine is not running");
        goto fail;
    }
    if (sandbox_pump_new(e, req_uid(r), fds, on_pump_end, NULL, ret, &err) < 0) {
        methods_sandbox_reply_error(r, &err);
        goto fail;
    }
    return true;
fail:
    CLOSE_MANY(&fds[0], &fds[1], &fds[2]);
    return false;
}

/* ---- handlers ---- */

void method_process_start(struct req *r, void *params, void *userdata)
{
    struct params_process_start *p = params;
    struct sandbox_process_call pc = {.op = SANDBOX_PROCESS_START};
    struct call *c;

    if (methods_sandbox_park(r, p->id, method_process_start, params, userdata) ||
        methods_resume_first_id(r, methods_sandbox(r)->engine, p->id, method_process_start, params,
                                userdata, methods_sandbox_reply_error))
        return;
    /* Descriptors and a transfer slot first: a refused request launches nothing. */
    if (!pump_prepare(r, p, &pc.pump))
        return;
    c = call_new(r, SANDBOX_PROCESS_START, NULL);
    if (!c) {
        sandbox_pump_free(pc.pump);
        return;
    }
    pc.command = p->command;
    pc.argv = (const char *const *)p->argv;
    pc.cwd = p->cwd;
    pc.user = p->user; /* "": its template's default user (call_run), else root */
    pc.has_stdin = p->has_stdin;
    pc.pty_cols = p->pty ? p->pty_cols : 0;
    pc.pty_rows = p->pty ? p->pty_rows : 0;
    c->has_stdin = p->has_stdin;
    c->pty_cols = pc.pty_cols;
    c->pty_rows = pc.pty_rows;
    call_run(r, p->id, c, &pc, &p->env);
}

/* ---- the methods on a started process, and process.list ---- */

/* How their params begin (checked below): the sandbox and the process ("" for a list). */
struct process_target {
    char id[PARAMS_ID_MAX + 1];
    char process[PARAMS_PROCESS_ID_LEN + 1];
};
#define SAME_TARGET(type)                                                                          \
    static_assert(offsetof(type, id) == offsetof(struct process_target, id) &&                     \
                      offsetof(type, process) == offsetof(struct process_target, process) &&       \
                      sizeof(((type *)0)->process) ==                                              \
                          sizeof(((struct process_target *)0)->process),                           \
                  #type " does not begin like struct process_target")
SAME_TARGET(struct params_process_read);
SAME_TARGET(struct params_process_write);
SAME_TARGET(struct params_process_ref);
SAME_TARGET(struct params_process_resize);

/* One such method: how its params become the call's fields and the engine's call. */
struct process_op {
    enum sandbox_process_op op;
    void (*build)(struct call *c, const void *params, struct sandbox_process_call *pc);
};

static void build_read(struct call *c, const void *params, struct sandbox_process_call *pc)
{
    const struct params_process_read *p = params;

    pc->stderr_stream = p->stderr_stream;
    pc->offset = (uint64_t)p->offset;
    pc->length = (uint64_t)p->length;
    pc->wait_ms = (unsigned)p->wait_ms;
}

static void build_write(struct call *c, const void *params, struct sandbox_process_call *pc)
{
    const struct params_process_write *p = params;

    c->written = p->data_len;
    c->closed = p->close;
    pc->data = p->data;
    pc->len = p->data_len;
    pc->close = p->close;
}

static void build_wait(struct call *c, const void *params, struct sandbox_process_call *pc)
{
    const struct params_process_ref *p = params;

    pc->timeout_ms = (unsigned)p->timeout_ms;
}

static void build_kill(struct call *c, const void *params, struct sandbox_process_call *pc)
{
    const struct params_process_ref *p = params;

    snprintf(c->signal, sizeof c->signal, "%s", p->signal);
    pc->signal = p->signal;
}

static void build_resize(struct call *c, const void *params, struct sandbox_process_call *pc)
{
    const struct params_process_resize *p = params;

    c->pty_cols = pc->cols = p->cols;
    c->pty_rows = pc->rows = p->rows;
}

static const struct process_op op_read = {SANDBOX_PROCESS_READ, build_read};
static const struct process_op op_write = {SANDBOX_PROCESS_WRITE, build_write};
static const struct process_op op_wait = {SANDBOX_PROCESS_WAIT, build_wait};
static const struct process_op op_kill = {SANDBOX_PROCESS_KILL, build_kill};
static const struct process_op op_list = {SANDBOX_PROCESS_LIST, NULL};
static const struct process_op op_resize = {SANDBOX_PROCESS_RESIZE, build_resize};

/* The handler of every such method: userdata is its struct process_op. */
static void method_op(struct req *r, void *params, void *userdata)
{
    const struct process_op *op = userdata;
    const struct process_target *t = params;
    struct sandbox_process_call pc = {.op = op->op};
    struct call *c;

    if (methods_sandbox_park(r, t->id, method_op, params, userdata) ||
        methods_resume_first_id(r, methods_sandbox(r)->engine, t->id, method_op, params, userdata,
                                methods_sandbox_reply_error))
        return;
    c = call_new(r, op->op, t->process);
    if (!c)
        return;
    if (op->op != SANDBOX_PROCESS_LIST)
        pc.process = c->process;
    if (op->build)
        op->build(c, params, &pc);
    call_run(r, t->id, c, &pc, NULL);
}

void method_process_read(struct req *r, void *params, void *userdata)
{
    method_op(r, params, (void *)&op_read);
}

void method_process_write(struct req *r, void *params, void *userdata)
{
    method_op(r, params, (void *)&op_write);
}

void method_process_wait(struct req *r, void *params, void *userdata)
{
    method_op(r, params, (void *)&op_wait);
}

void method_process_kill(struct req *r, void *params, void *userdata)
{
    method_op(r, params, (void *)&op_kill);
}

void method_process_list(struct req *r, void *params, void *userdata)
{
    method_op(r, params, (void *)&op_list);
}

void method_process_resize(struct req *r, void *params, void *userdata)
{
    method_op(r, params, (void *)&op_resize);
}
