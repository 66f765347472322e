/* Background processes of a READY sandbox: each process.* call is one short command on the
 * sandbox's pool running a script of process.h, whose report the engine parses. A start with
 * descriptors hands its pump to sandbox-pump.c once the process runs. See sandbox-io.h. */
#include "macro.h"

#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "process.h"
#include "sandbox-internal.h"
#include "sandbox-io.h"

static_assert(SANDBOX_PROCESS_ID_LEN == PROCESS_ID_LEN, "process ids differ in length");

/* Beyond the time a script may wait by request, how long its exec may take. */
#define PROCESS_EXEC_MARGIN_MS 30000u
#define PROCESS_OUTPUT_MAX 4096u
#define PROCESS_LIST_OUTPUT_MAX (1024u * 1024u)

/* One call on its way. */
struct proc_call {
    enum sandbox_process_op op;
    struct sandbox *sb; /* held by the job until the callback returns */
    char process[PROCESS_ID_LEN + 1];
    char *display;
    time_t started_at;
    struct sandbox_pump *pump;
    sandbox_process_cb cb;
    void *userdata;
};

/* The script, its exec's deadline and output cap, and whether it is a long-poll. */
struct run {
    char *script;
    uint64_t timeout_ms;
    size_t max_output;
    bool long_poll;
};

static void proc_call_free(struct proc_call *pc)
{
    sandbox_pump_free(pc->pump);
    free(pc->display);
    free(pc);
}

static int start_script(struct proc_call *pc, const struct sandbox_process_call *c,
                        const struct config *cfg, struct run *run)
{
    struct process_start_spec s = {
        .command = c->command,
        .argv = c->argv,
        .env = c->env,
        .cwd = c->cwd,
        .user = c->user,
        .has_stdin = c->has_stdin,
        .pty_cols = c->pty_cols,
        .pty_rows = c->pty_rows,
        .max_processes = cfg->sandbox.max_processes,
        .output_max = cfg->sandbox.process_output_max_bytes,
    };
    int r;

    pc->started_at = s.started_at = now_realtime();
    r = process_id_new(s.started_at, pc->process);
    if (r < 0)
        return r;
    s.id = pc->process;
    sandbox_pump_pins(c->pump, &s.pin_out, &s.pin_err);
    pc->display = process_display(c->command, c->argv);
    if (!pc->display)
        return -ENOMEM;
    return process_script_start(&s, &run->script);
}

/* Builds the script of c into run. */
static int build(struct proc_call *pc, const struct sandbox_process_call *c,
                 const struct config *cfg, struct run *run)
{
    uint64_t out_max = cfg->sandbox.process_output_max_bytes;

    switch (c->op) {
    case SANDBOX_PROCESS_START:
        return start_script(pc, c, cfg, run);
    case SANDBOX_PROCESS_READ:
        run->timeout_ms += c->wait_ms;
        /* The cap is per stream: stderr carries the report line. */
        run->max_output = MAX((size_t)c->length, (size_t)PROCESS_OUTPUT_MAX);
        run->long_poll = c->wait_ms > 0;
        return process_script_read(c->process, c->stderr_stream ? PROCESS_STDERR : PROCESS_STDOUT,
                                   c->offset, c->length, c->wait_ms, out_max, &run->script);
    case SANDBOX_PROCESS_WRITE:
        return process_script_write(c->process, c->close, &run->script);
    case SANDBOX_PROCESS_WAIT:
        run->timeout_ms += c->timeout_ms;
        run->long_poll = c->timeout_ms > 0;
        return process_script_wait(c->process, c->timeout_ms, &run->script);
    case SANDBOX_PROCESS_KILL:
        return process_script_kill(c->process, c->signal, &run->script);
    case SANDBOX_PROCESS_LIST:
        run->max_output = PROCESS_LIST_OUTPUT_MAX;
        return process_script_list(&run->script);
    case SANDBOX_PROCESS_RESIZE:
        return process_script_resize(c->process, c->cols, c->rows, &run->script);
    }
    return -EINVAL;
}

static const enum sandbox_process_report reports[] = {
    [PROCESS_R_OK] = SANDBOX_PROCESS_R_OK,
    [PROCESS_R_NO_SUCH] = SANDBOX_PROCESS_R_NO_SUCH,
    [PROCESS_R_LIMIT] = SANDBOX_PROCESS_R_LIMIT,
    [PROCESS_R_CWD] = SANDBOX_PROCESS_R_CWD,
    [PROCESS_R_RANGE] = SANDBOX_PROCESS_R_RANGE,
    [PROCESS_R_EXITED] = SANDBOX_PROCESS_R_EXITED,
    [PROCESS_R_NO_STDIN] = SANDBOX_PROCESS_R_NO_STDIN,
    [PROCESS_R_CLOSED] = SANDBOX_PROCESS_R_CLOSED,
    [PROCESS_R_NO_PTY] = SANDBOX_PROCESS_R_NO_PTY,
    [PROCESS_R_NO_TTY] = SANDBOX_PROCESS_R_NO_TTY,
    [PROCESS_R_NO_USER] = SANDBOX_PROCESS_R_NO_USER,
    [PROCESS_R_NO_SWITCH] = SANDBOX_PROCESS_R_NO_SWITCH,
    [PROCESS_R_MALFORMED] = SANDBOX_PROCESS_R_MALFORMED,
};

static void status_to(const struct process_status *st, struct sandbox_process_status *ret)
{
    *ret = (struct sandbox_process_status){st->state, st->exit_code, st->signal};
}

/* A list's rows (pointing into rows); NULL when there are none or no memory. */
static struct sandbox_process_row *rows_to(const struct process_row *rows, size_t n)
{
    struct sandbox_process_row *v = n ? calloc(n, sizeof *v) : NULL;

    for (size_t i = 0; v && i < n; i++) {
        v[i] = (struct sandbox_process_row){
            .process = rows[i].id,
            .started_at = rows[i].started_at,
            .command = rows[i].command,
        };
        status_to(&rows[i].status, &v[i].status);
    }
    return v;
}

/* Fills ret from the script's result and calls back. */
static void report(struct proc_call *pc, struct sshexec_result *res,
                   struct sandbox_process_result *ret)
{
    struct process_status st = {.state = "running", .exit_code = -1};
    _cleanup_free_ struct process_row *rows = NULL;
    _cleanup_free_ struct sandbox_process_row *v = NULL;
    enum process_report rep;
    size_t n = 0;

    rep = process_parse_report(res->err, res->err_len, ret->nums, &st);
    ret->report = (size_t)rep < ELEMENTSOF(reports) ? reports[rep] : SANDBOX_PROCESS_R_MALFORMED;
    status_to(&st, &ret->status);
    ret->exit_code = res->exit_code;
    ret->raw = res->err;
    ret->raw_len = res->err_len;
    if (pc->op == SANDBOX_PROCESS_READ) {
        ret->data = res->out ? res->out : "";
        ret->len = res->out_len;
    } else if (pc->op == SANDBOX_PROCESS_LIST && rep == PROCESS_R_OK) {
        if (process_parse_list(res->out, res->out_len, &rows, &n) < 0)
            n = 0;
        v = rows_to(rows, n);
        ret->rows = v;
        ret->n_rows = v ? n : 0;
    }
    pc->cb(0, ret, pc->userdata);
}

static void on_done(int error, struct sshexec_result *res, void *userdata)
{
    struct proc_call *pc = userdata;
    struct sandbox_process_result r = {
        .process = pc->process,
        .display = pc->display,
        .started_at = pc->started_at,
    };

    if (pc->pump && error == 0 && !res->timed_out &&
        process_parse_report(res->err, res->err_len, NULL, NULL) == PROCESS_R_OK)
        pump_start(pc->sb, TAKE_PTR(pc->pump), pc->process);
    if (error < 0) {
        pc->cb(error, NULL, pc->userdata);
    } else if (res->timed_out) {
        r.timed_out = true;
        pc->cb(0, &r, pc->userdata);
    } else {
        report(pc, res, &r);
    }
    proc_call_free(pc);
}

int sandbox_process(struct sandbox *sb, const struct sandbox_process_call *c, sandbox_process_cb cb,
                    void *userdata, struct sandbox_job **ret, struct engine_error *ret_err)
{
    struct run run = {.timeout_ms = PROCESS_EXEC_MARGIN_MS, .max_output = PROCESS_OUTPUT_MAX};
    struct sshexec_params sp = {.container_pid_namespace = true, .has_max_output = true};
    struct proc_call *pc = calloc(1, sizeof *pc);
    int r;

    if (!pc) {
        sandbox_pump_free(c->pump);
        return engine_refuse_oom(ret_err);
    }
    pc->op = c->op;
    pc->sb = sb;
    pc->pump = c->pump;
    pc->cb = cb;
    pc->userdata = userdata;
    if (c->process)
        snprintf(pc->process, sizeof pc->process, "%s", c->process);
    r = build(pc, c, sb->engine->cfg, &run);
    if (r < 0) {
        proc_call_free(pc);
        if (r == -E2BIG)
            return engine_refuse(ret_err, ENGINE_E_INVALID, r,
                                 "the command, env and cwd do not fit one exec line", "params");
        /* No errno: the reply carries the reason only. */
        *ret_err = (struct engine_error){.kind = ENGINE_E_INTERNAL, .message = strerror(-r)};
        return r;
    }
    sp.command = run.script;
    sp.stdin_data = c->op == SANDBOX_PROCESS_WRITE ? c->data : NULL;
    sp.stdin_len = c->op == SANDBOX_PROCESS_WRITE ? c->len : 0;
    sp.timeout_ms = run.timeout_ms;
    sp.max_output_bytes = run.max_output;
    r = sandbox_job_exec_raw(sb, &sp, run.long_poll, on_done, pc, ret, ret_err);
    free(run.script);
    if (r < 0)
        proc_call_free(pc);
    return r;
}
