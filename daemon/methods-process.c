/* The process.* methods: background processes inside a sandbox (lib/ssh/process.h), each call
 * one short exec on the sandbox's pool. The daemon keeps no process state: the container's
 * folder is the record, so a restart or kill -9 of the daemon loses nothing. */
#include "methods-process.h"

#include <assert.h>
#include <errno.h>
#include <stddef.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "macro.h"
#include "process.h"
#include "sandbox.h"
#include "util.h"
#include "methods-process-fd.h"
#include "methods-sandbox.h"
#include "methods.h"
#include "b64.h"
#include "params-process.h"
#include "rpc.h"
#include "req.h"

#define COMP "process"
/* Beyond the time a script may wait by request, how long its exec may take. */
#define PROCESS_EXEC_MARGIN_MS 30000u
/* Long-polls (process.read with wait_ms, process.wait) at once per sandbox; each holds an
 * SSH channel. */
#define PROCESS_WAITERS_MAX 16u
#define PROCESS_LIST_OUTPUT_MAX (1024u * 1024u)

enum call_kind { CALL_START, CALL_READ, CALL_WRITE, CALL_WAIT, CALL_KILL, CALL_LIST };

struct waiters {
    char id[ID_MAX + 1];
    unsigned n;
    struct waiters **list; /* struct sandbox_methods.process_waiters */
    struct waiters *next;
};

struct call {
    enum call_kind kind;
    struct req *req;
    struct sshexec *exec;
    struct waiters *slot; /* a long-poll's place in the per-sandbox count */
    char process[PROCESS_ID_LEN + 1];
    char *display;
    time_t started_at;
    bool has_stdin, closed;
    unsigned pty_cols, pty_rows; /* start: 0 without a terminal */
    uint64_t offset;
    size_t written;
    struct process_pump *pump; /* start with descriptors: started once the process runs */
    uint64_t output_max;
    char signal[8];
};

/* ---- long-polls per sandbox ---- */

static struct waiters *waiter_take(struct waiters **list, const char *id)
{
    struct waiters *w;

    for (w = *list; w; w = w->next)
        if (strcmp(w->id, id) == 0)
            break;
    if (!w) {
        w = calloc(1, sizeof *w);
        if (!w)
            return NULL;
        snprintf(w->id, sizeof w->id, "%s", id);
        w->list = list;
        w->next = *list;
        *list = w;
    }
    if (w->n >= PROCESS_WAITERS_MAX)
        return NULL;
    w->n++;
    return w;
}

static void waiter_put(struct waiters *w)
{
    struct waiters **pp;

    if (!w)
        return;
    assert(w->n > 0);
    if (--w->n > 0)
        return;
    for (pp = w->list; *pp; pp = &(*pp)->next)
        if (*pp == w) {
            *pp = w->next;
            free(w);
            return;
        }
}

/* ---- replies ---- */

static void call_free(struct call *c)
{
    waiter_put(c->slot);
    process_pump_abort(c->pump);
    free(c->display);
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

static void add_status(json_object *o, const struct process_status *st)
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

static json_object *result_read(struct call *c, const struct sshexec_result *res,
                                const uint64_t nums[3], const struct process_status *st)
{
    json_object *o = json_object_new_object();
    uint64_t next = nums[1] + res->out_len;

    (void)b64_object_add_data(o, "data", res->out ? res->out : "", res->out_len);
    json_object_object_add(o, "process", json_object_new_string(c->process));
    json_object_object_add(o, "offset", json_object_new_int64((int64_t)nums[1]));
    json_object_object_add(o, "next_offset", json_object_new_int64((int64_t)next));
    json_object_object_add(o, "available_from", json_object_new_int64((int64_t)nums[0]));
    json_object_object_add(o, "size", json_object_new_int64((int64_t)nums[2]));
    json_object_object_add(
        o, "eof", json_object_new_boolean(strcmp(st->state, "running") != 0 && next >= nums[2]));
    add_status(o, st);
    return o;
}

static json_object *result_list(const struct sshexec_result *res)
{
    json_object *o = json_object_new_object(), *a = json_object_new_array();
    struct process_row *rows = NULL;
    size_t n = 0;

    if (process_parse_list(res->out, res->out_len, &rows, &n) < 0)
        n = 0;
    for (size_t i = 0; i < n; i++) {
        json_object *p = json_object_new_object();

        json_object_object_add(p, "process", json_object_new_string(rows[i].id));
        json_object_object_add(p, "command", json_object_new_string(rows[i].command));
        add_time(p, "started_at", rows[i].started_at);
        add_status(p, &rows[i].status);
        json_object_array_add(a, p);
    }
    free(rows);
    json_object_object_add(o, "processes", a);
    return o;
}

static json_object *result_of(struct call *c, const struct sshexec_result *res,
                              const uint64_t nums[3], const struct process_status *st)
{
    json_object *o;

    switch (c->kind) {
    case CALL_READ:
        return result_read(c, res, nums, st);
    case CALL_LIST:
        return result_list(res);
    default:
        break;
    }
    o = json_object_new_object();
    json_object_object_add(o, "process", json_object_new_string(c->process));
    if (c->kind == CALL_START) {
        json_object_object_add(o, "state", json_object_new_string("running"));
        json_object_object_add(o, "command", json_object_new_string(c->display));
        add_time(o, "started_at", c->started_at);
        json_object_object_add(o, "stdin", json_object_new_boolean(c->has_stdin));
        if (c->pty_cols) {
            json_object *t = json_object_new_object();

            json_object_object_add(t, "cols", json_object_new_int((int)c->pty_cols));
            json_object_object_add(t, "rows", json_object_new_int((int)c->pty_rows));
            json_object_object_add(o, "pty", t);
        }
        return o;
    }
    if (c->kind == CALL_WRITE) {
        json_object_object_add(o, "written", json_object_new_int64((int64_t)c->written));
        json_object_object_add(o, "closed", json_object_new_boolean(c->closed));
        return o;
    }
    if (c->kind == CALL_KILL) {
        char name[12];

        snprintf(name, sizeof name, "SIG%s", c->signal);
        /* null: the process had already ended and was left alone */
        json_object_object_add(o, "sent", nums[0] ? json_object_new_string(name) : NULL);
    }
    add_status(o, st);
    return o;
}

/* The script reported something other than OK. */
static void reply_report(struct req *r, struct call *c, enum process_report rep,
                         const uint64_t nums[3])
{
    const struct config *cfg = req_config(r);
    char reason[160];

    switch (rep) {
    case PROCESS_R_NO_SUCH:
        reply_error(r, RPC_INVALID_PARAMS, "no such process", "process", NULL);
        return;
    case PROCESS_R_LIMIT:
        snprintf(reason, sizeof reason,
                 "the sandbox already runs %llu background processes (limit %u)",
                 (unsigned long long)nums[0], cfg->sandbox.max_processes);
        reply_error(r, RPC_QUOTA_EXCEEDED, reason, NULL, NULL);
        return;
    case PROCESS_R_CWD:
        reply_error(r, RPC_INVALID_PARAMS, "not a directory in the sandbox", "cwd", NULL);
        return;
    case PROCESS_R_NO_PTY:
        reply_error(r, RPC_INVALID_PARAMS,
                    "the sandbox cannot make a terminal (it needs util-linux script and a "
                    "mounted /dev/pts)",
                    "pty", NULL);
        return;
    case PROCESS_R_RANGE:
        snprintf(reason, sizeof reason, "past the end of the output (%llu bytes so far)",
                 (unsigned long long)nums[2]);
        reply_error(r, RPC_INVALID_PARAMS, reason, "offset", NULL);
        return;
    case PROCESS_R_EXITED:
        reply_error(r, RPC_BAD_STATE, "the process has ended", NULL, c->process);
        return;
    case PROCESS_R_NO_STDIN:
        reply_error(r, RPC_BAD_STATE, "the process was started without stdin", NULL, c->process);
        return;
    case PROCESS_R_CLOSED:
        reply_error(r, RPC_BAD_STATE, "the process's stdin is closed", NULL, c->process);
        return;
    default:
        reply_error(r, RPC_SSH_ERROR, "unexpected answer from the sandbox", NULL, NULL);
        return;
    }
}

static void on_call_done(struct sshexec *e, int error, struct sshexec_result *res, void *userdata)
{
    struct call *c = userdata;
    struct req *r = TAKE_PTR(c->req);
    struct process_status st = {.state = "running", .exit_code = -1};
    uint64_t nums[3] = {};
    enum process_report rep;

    c->exec = NULL;
    if (c->pump && error == 0 && !res->timed_out &&
        process_parse_report(res->err, res->err_len, NULL, NULL) == PROCESS_R_OK)
        process_pump_start(TAKE_PTR(c->pump), c->process, c->output_max);
    if (!r) {
        call_free(c);
        return;
    }
    req_on_disconnect(r, NULL, NULL);
    if (error < 0) {
        struct engine_error err;

        engine_error_from_io(error, false, &err);
        methods_sandbox_reply_error(r, &err);
    } else if (res->timed_out) {
        reply_error(r, RPC_DEADLINE_EXCEEDED,
                    c->kind == CALL_WRITE ? "the process does not read its stdin"
                                          : "the sandbox did not answer in time",
                    NULL, c->process[0] ? c->process : NULL);
    } else if ((rep = process_parse_report(res->err, res->err_len, nums, &st)) != PROCESS_R_OK) {
        if (rep == PROCESS_R_MALFORMED)
            log_debug(COMP, "unexpected report (exit %d): %.*s", res->exit_code,
                      (int)MIN(res->err_len, (size_t)400), res->err ? res->err : "");
        reply_report(r, c, rep, nums);
    } else {
        req_reply(r, result_of(c, res, nums, &st));
    }
    call_free(c);
}

static void on_call_disconnect(struct req *r, void *userdata)
{
    struct call *c = userdata;
    bool long_poll = c->kind == CALL_READ || c->kind == CALL_WAIT;

    /* A long-poll is abandoned; a start, write or kill runs to its end. */
    (void)methods_detach(r, &c->req, long_poll ? c->exec : NULL);
}

/* ---- running a script ---- */

struct run {
    char *script;
    const void *stdin_data;
    size_t stdin_len;
    uint64_t timeout_ms;
    size_t max_output;
    bool long_poll;
};

/* Finds the caller's READY sandbox for id, then runs the script; completes r on failure.
 * Takes c and run->script. */
static void call_run(struct req *r, const char *id, struct call *c, struct run *run)
{
    struct sandbox_methods *sm = methods_sandbox(r);
    struct engine *e = sm->engine;
    struct sshexec_params sp = {};
    struct engine_error err;
    struct sandbox *sb = e ? engine_lookup(e, id, req_uid(r), req_is_admin(r)) : NULL;
    struct sandbox_info v;

    if (!sb) {
        methods_sandbox_reply_not_found(r, id);
        goto fail;
    }
    sandbox_view(sb, &v);
    if (v.state != SANDBOX_READY) {
        methods_sandbox_reply_state(r, sb);
        goto fail;
    }
    if (run->long_poll && !(c->slot = waiter_take(&sm->process_waiters, id))) {
        reply_error(r, RPC_BUSY, "too many long-polls on this sandbox at once (limit 16)", NULL,
                    NULL);
        goto fail;
    }
    sp.command = run->script;
    sp.container_pid_namespace = true;
    sp.stdin_data = run->stdin_data;
    sp.stdin_len = run->stdin_len;
    sp.timeout_ms = run->timeout_ms;
    sp.has_max_output = true;
    sp.max_output_bytes = run->max_output;
    c->req = r;
    if (sandbox_exec_start(sb, &sp, on_call_done, c, &c->exec, &err) < 0) {
        c->req = NULL;
        methods_sandbox_reply_error(r, &err);
        goto fail;
    }
    free(run->script);
    req_on_disconnect(r, on_call_disconnect, c);
    return;
fail:
    free(run->script);
    call_free(c);
}

static struct call *call_new(struct req *r, enum call_kind kind, const char *process)
{
    struct call *c = calloc(1, sizeof *c);

    if (!c) {
        req_error(r, RPC_INTERNAL_ERROR, "out of memory");
        return NULL;
    }
    c->kind = kind;
    if (process)
        snprintf(c->process, sizeof c->process, "%s", process);
    return c;
}

static bool script_failed(struct req *r, struct call *c, int k)
{
    if (k >= 0)
        return false;
    if (k == -E2BIG)
        req_invalid_params(r, "params", "the command, env and cwd do not fit one exec line");
    else
        req_error(r, RPC_INTERNAL_ERROR, strerror(-k));
    call_free(c);
    return true;
}

/* ---- handlers ---- */

static void env_free(char **v)
{
    for (size_t i = 0; v && v[i]; i++)
        free(v[i]);
    free(v);
}

static char **env_strings(const struct params_kv_list *l)
{
    char **v = calloc(l->n + 1, sizeof *v);

    for (size_t i = 0; v && i < l->n; i++)
        if (asprintf(&v[i], "%s=%s", l->items[i].key, l->items[i].value) < 0) {
            v[i] = NULL;
            env_free(v);
            return NULL;
        }
    return v;
}

void method_process_start(struct req *r, void *params, void *userdata)
{
    struct params_process_start *p = params;
    const struct config *cfg = req_config(r);
    struct process_start_spec s = {};
    struct run run = {.timeout_ms = PROCESS_EXEC_MARGIN_MS, .max_output = 4096};
    char id[PROCESS_ID_LEN + 1];
    char **env = NULL;
    struct process_pump *pump;
    bool wants_pump;
    struct call *c;
    int k;

    if (methods_sandbox_park(r, p->id, method_process_start, params, userdata))
        return;
    /* Descriptors and a transfer slot first: a refused request launches nothing. */
    wants_pump = p->stdin_fd >= 0 || p->stdout_fd >= 0 || p->stderr_fd >= 0;
    pump = process_pump_prepare(r, p); /* on a refusal r is answered and p freed */
    if (!pump && wants_pump)
        return;
    s.started_at = now_realtime();
    k = process_id_new(s.started_at, id);
    c = call_new(r, CALL_START, id);
    if (!c) {
        process_pump_abort(pump);
        return;
    }
    c->pump = pump;
    c->output_max = cfg->sandbox.process_output_max_bytes;
    if (k < 0 || (p->env.n > 0 && !(env = env_strings(&p->env)))) {
        call_free(c);
        req_error(r, RPC_INTERNAL_ERROR, "out of memory");
        return;
    }
    s.id = id;
    s.command = p->command;
    s.argv = (const char *const *)p->argv;
    s.env = (const char *const *)env;
    s.cwd = p->cwd;
    s.has_stdin = p->has_stdin;
    s.pty_cols = p->pty ? p->pty_cols : 0;
    s.pty_rows = p->pty ? p->pty_rows : 0;
    s.max_processes = cfg->sandbox.max_processes;
    s.output_max = cfg->sandbox.process_output_max_bytes;
    s.pin_out = p->stdout_fd >= 0;
    s.pin_err = p->stderr_fd >= 0;
    c->display = process_display(p->command, (const char *const *)p->argv);
    c->started_at = s.started_at;
    c->has_stdin = p->has_stdin;
    c->pty_cols = s.pty_cols;
    c->pty_rows = s.pty_rows;
    k = c->display ? process_script_start(&s, &run.script) : -ENOMEM;
    env_free(env);
    if (script_failed(r, c, k))
        return;
    call_run(r, p->id, c, &run);
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

/* One such method: the call it makes, and how its params become the call's fields and the
 * run (which comes with the exec margin as its deadline and a 4 KiB output cap). */
struct process_op {
    enum call_kind kind;
    int (*build)(struct call *c, const void *params, const struct config *cfg, struct run *run);
};

static int build_read(struct call *c, const void *params, const struct config *cfg, struct run *run)
{
    const struct params_process_read *p = params;

    c->offset = (uint64_t)p->offset;
    run->timeout_ms = (uint64_t)p->wait_ms + PROCESS_EXEC_MARGIN_MS;
    /* The cap is per stream: stderr carries the report line. */
    run->max_output = MAX((size_t)p->length, (size_t)4096);
    run->long_poll = p->wait_ms > 0;
    return process_script_read(p->process, p->stderr_stream ? PROCESS_STDERR : PROCESS_STDOUT,
                               (uint64_t)p->offset, (uint64_t)p->length, (unsigned)p->wait_ms,
                               cfg->sandbox.process_output_max_bytes, &run->script);
}

static int build_write(struct call *c, const void *params, const struct config *cfg,
                       struct run *run)
{
    const struct params_process_write *p = params;

    c->written = p->data_len;
    c->closed = p->close;
    run->stdin_data = p->data;
    run->stdin_len = p->data_len;
    return process_script_write(p->process, p->close, &run->script);
}

static int build_wait(struct call *c, const void *params, const struct config *cfg, struct run *run)
{
    const struct params_process_ref *p = params;

    run->timeout_ms = (uint64_t)p->timeout_ms + PROCESS_EXEC_MARGIN_MS;
    run->long_poll = p->timeout_ms > 0;
    return process_script_wait(p->process, (unsigned)p->timeout_ms, &run->script);
}

static int build_kill(struct call *c, const void *params, const struct config *cfg, struct run *run)
{
    const struct params_process_ref *p = params;

    snprintf(c->signal, sizeof c->signal, "%s", p->signal);
    return process_script_kill(p->process, p->signal, &run->script);
}

static int build_list(struct call *c, const void *params, const struct config *cfg, struct run *run)
{
    run->max_output = PROCESS_LIST_OUTPUT_MAX;
    return process_script_list(&run->script);
}

static const struct process_op op_read = {CALL_READ, build_read};
static const struct process_op op_write = {CALL_WRITE, build_write};
static const struct process_op op_wait = {CALL_WAIT, build_wait};
static const struct process_op op_kill = {CALL_KILL, build_kill};
static const struct process_op op_list = {CALL_LIST, build_list};

/* The handler of every such method: userdata is its struct process_op. */
static void method_op(struct req *r, void *params, void *userdata)
{
    const struct process_op *op = userdata;
    const struct process_target *t = params;
    struct run run = {.timeout_ms = PROCESS_EXEC_MARGIN_MS, .max_output = 4096};
    struct call *c;

    if (methods_sandbox_park(r, t->id, method_op, params, userdata))
        return;
    c = call_new(r, op->kind, t->process);
    if (!c)
        return;
    if (!script_failed(r, c, op->build(c, params, req_config(r), &run)))
        call_run(r, t->id, c, &run);
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
