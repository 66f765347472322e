/* sandbox.pause and sandbox.resume on the one driver (op-step.h); see sandbox-pause.h. The
 * resume's start, address check and reconnect are the rollback's (reconcile_restart(),
 * connect_start()). */
#include "macro.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "audit.h"
#include "log.h"
#include "metrics.h"
#include "op-step.h"
#include "pve.h"
#include "reconcile-restart.h"
#include "sandbox-forward.h"
#include "sandbox-internal.h"
#include "sandbox-io.h"
#include "sandbox-pause.h"

#define COMP "sandbox"

/* A further caller of a resume that runs (resume_on_use: calls that arrive meanwhile). */
struct pause_waiter {
    engine_sandbox_cb cb;
    void *userdata;
    struct pause_waiter *next;
};

struct pause_op {
    bool resume;
    engine_sandbox_cb cb; /* NULL: nobody waits (engine_pause_finish()) */
    void *userdata;
    time_t old_expires; /* the lease before the operation, restored when it fails early */
    struct pause_waiter *waiters;
    unsigned n_waiters;
};

unsigned engine_running(const struct engine *e, const uid_t *uid)
{
    unsigned n = 0;

    for (const struct sandbox *sb = e->sandboxes; sb; sb = sb->next) {
        if (uid && (sb->owner_uid != *uid || sb->pool_member))
            continue;
        if (sb->state != SANDBOX_PAUSED || (sb->pause_op && sb->pause_op->resume))
            n++;
    }
    return n;
}

int engine_pause_opts_check(struct engine *e, const struct sandbox_create_opts *opts,
                            struct engine_error *ret_err)
{
    unsigned max = e->cfg->sandbox.max_paused_ttl_s;

    if (opts->auto_pause_s <= (int64_t)max)
        return 0;
    engine_refuse(ret_err, ENGINE_E_INVALID, -EINVAL,
                  "auto_pause_s exceeds the configured max_paused_ttl_s", "auto_pause_s");
    ret_err->cap = "max_paused_ttl_s";
    ret_err->limit = max;
    return -EINVAL;
}

void sandbox_pause_opts_set(struct sandbox *sb, const struct sandbox_create_opts *opts)
{
    sb->resume_on_use = opts->resume_on_use;
    sb->auto_pause_s = opts->auto_pause_s > 0 ? (unsigned)opts->auto_pause_s : 0;
}

static unsigned paused_of(const struct engine *e, uid_t uid)
{
    unsigned n = 0;

    for (const struct sandbox *sb = e->sandboxes; sb; sb = sb->next)
        if (sb->owner_uid == uid && !sb->pool_member && sb->state == SANDBOX_PAUSED)
            n++;
    return n;
}

/* ---- steps ---- */

/* Saves the record in state s (the same state: saved all the same). */
static int save_state(struct sandbox *sb, enum sandbox_state s)
{
    int r;

    sb->refs++;
    r = sandbox_set_state_saved(sb, s, save_step_saved, sb);
    if (r == -EALREADY)
        r = sandbox_save(sb, save_step_saved, sb);
    if (r < 0)
        sb->refs--;
    return r;
}

/* Written ahead: the registry says paused, with the paused lease, before anything stops. */
static int start_record(struct sandbox *sb, uint64_t timeout_ms, const char **ret_fail)
{
    sb->expires_at = now_realtime() + (time_t)sb->engine->cfg->sandbox.max_paused_ttl_s;
    sb->marker_paused = true;
    return save_state(sb, SANDBOX_PAUSED);
}

/* A container found stopped already (a pause finished after a restart) is what we want. */
static void on_stopped(const struct pve_result *res, void *userdata)
{
    struct sandbox *sb = userdata;

    sb->call = NULL;
    if (res->error == -EREMOTEIO && res->perr && res->perr->message &&
        strstr(res->perr->message, "not running")) {
        op_step_done(sb, NULL);
        return;
    }
    op_step_pve_done(sb, res);
}

int pause_stop_step_start(struct sandbox *sb, uint64_t timeout_ms, const char **ret_fail)
{
    sandbox_close_ssh(sb);
    return pve_shutdown(sb->engine->pve, sb->node, sb->vmid, ENGINE_PAUSE_SHUTDOWN_S, true,
                        timeout_ms, on_stopped, sb, &sb->call);
}

/* Running again: a running lease of default_ttl_s from now. */
static int start_unmark(struct sandbox *sb, uint64_t timeout_ms, const char **ret_fail)
{
    sb->marker_paused = false;
    sb->expires_at = now_realtime() + (time_t)sb->engine->cfg->sandbox.default_ttl_s;
    return marker_write_start(sb, timeout_ms, ret_fail);
}

static int start_ready(struct sandbox *sb, uint64_t timeout_ms, const char **ret_fail)
{
    return save_state(sb, SANDBOX_READY);
}

#define PAUSE_STEP(what_, start_, cap_, ...)                                                       \
    {                                                                                              \
        .state = SANDBOX_PAUSED, .what = what_, .start = start_, .cap_ms = cap_,                   \
        .fail = "cannot issue the call", .fail_kind = ENGINE_E_INTERNAL, __VA_ARGS__               \
    }

static const struct op_step pause_steps[] = {
    PAUSE_STEP("recording the pause", start_record, OP_STEP_UNBOUNDED,
               .crash_done = "pause-recorded"),
    PAUSE_STEP("writing the marker", marker_write_start, ENGINE_STEP_CONFIG_MS,
               .crash_done = "pause-marked"),
    PAUSE_STEP("stopping the container", pause_stop_step_start, OP_STEP_OP_DEADLINE,
               .crash_sent = "pause-sent", .crash_done = "pause-stopped"),
};

static const struct op_step resume_steps[] = {
    PAUSE_STEP("starting the container", restart_step_start, OP_STEP_UNBOUNDED,
               .crash_done = "resume-started"),
    PAUSE_STEP("connecting", reconnect_step_start, OP_STEP_OP_DEADLINE),
    PAUSE_STEP("writing the marker", start_unmark, ENGINE_STEP_CONFIG_MS,
               .crash_done = "resume-marked"),
    PAUSE_STEP("recording the resume", start_ready, OP_STEP_UNBOUNDED),
};

/* ---- outcome ---- */

static void pause_audit(const struct sandbox *sb, bool resume, const struct engine_error *err)
{
    struct audit_record rec = {
        .event = resume ? (err ? "sandbox.resume_failed" : "sandbox.resumed")
                        : (err ? "sandbox.pause_failed" : "sandbox.paused"),
        .priority = err ? LOG_WARNING : LOG_INFO,
        .sandbox = sb->id,
        .vmid = sb->vmid,
        .node = sb->node,
        .caller_uid = AUDIT_NO_UID,
        .owner_uid = sb->owner_uid,
        .reason = err ? err->message : NULL,
    };

    audit_emit(&rec, "%s of sandbox %s (container %u on %s)%s%s", resume ? "resume" : "pause",
               sb->id, sb->vmid, strna(sb->node), err ? " failed: " : "",
               err ? strna(err->message) : "");
    metrics_add(M_PAUSES, resume ? "resume" : "pause", err ? "failed" : "done", 1);
}

static void pause_start_op(struct sandbox *sb, struct pause_op *op, op_step_start_fn from);

/* The caller hears of the outcome; a destroy asked for meanwhile runs now. */
static void pause_finish(struct sandbox *sb, const struct engine_error *err)
{
    struct pause_op *op = TAKE_PTR(sb->pause_op);
    struct engine *e = sb->engine;
    bool live = !e->closing && !sb->destroy_requested;
    /* a failed resume goes back to paused: the marker, and the container stopped again */
    bool again = err && op->resume && live;

    pause_audit(sb, op->resume, err);
    free(sb->error);
    sb->error = err ? strdup(err->message) : NULL;
    if (err && !op->resume && op->cb && live && sb->state == SANDBOX_PAUSED && sb->run.step < 2) {
        /* a caller's pause that did not touch the container: running as before */
        sb->marker_paused = false;
        sb->expires_at = op->old_expires;
        sandbox_set_state(sb, SANDBOX_READY);
    } else if (again)
        sb->expires_at = op->old_expires; /* the paused lease */
    if (op->cb)
        op->cb(err, sb, op->userdata);
    while (op->waiters) {
        struct pause_waiter *w = op->waiters;

        op->waiters = w->next;
        w->cb(err, sb, w->userdata);
        free(w);
    }
    if (again) {
        *op = (struct pause_op){.old_expires = sb->expires_at};
        sb->marker_paused = true;
        pause_start_op(sb, op, marker_write_start);
    } else {
        free(op);
        if (!e->closing && sb->state != SANDBOX_DESTROYING && sb->destroy_requested) {
            sb->destroy_requested = false;
            destroy_start(sb);
        }
    }
    sandbox_unref(sb);
}

static void pause_failed(struct sandbox *sb, const struct engine_error *err)
{
    log_info(COMP, "%s: %s failed: %s", sb->id, sb->pause_op->resume ? "resume" : "pause",
             strna(err->message));
    pause_finish(sb, err);
}

static void pause_done(struct sandbox *sb)
{
    log_info(COMP, "%s: %s", sb->id, sb->pause_op->resume ? "resumed" : "paused");
    pause_finish(sb, NULL);
}

static const struct op_kind pause_kind = {
    .name = "pause",
    .steps = pause_steps,
    .n_steps = ELEMENTSOF(pause_steps),
    .fail = pause_failed,
    .done = pause_done,
};

static const struct op_kind resume_kind = {
    .name = "resume",
    .steps = resume_steps,
    .n_steps = ELEMENTSOF(resume_steps),
    .fail = pause_failed,
    .done = pause_done,
};

static void pause_start_op(struct sandbox *sb, struct pause_op *op, op_step_start_fn from)
{
    const struct op_kind *kind = op->resume ? &resume_kind : &pause_kind;
    uint64_t now = now_ms(sb->engine);

    sb->pause_op = op;
    sb->refs++;
    op_step_enter(sb, kind, now + ENGINE_PAUSE_TIMEOUT_MS, ENGINE_PAUSE_TIMEOUT_MS, from);
}

/* ---- entry points ---- */

static int pause_refused(struct engine *e, struct sandbox *sb, struct engine_error *ret_err)
{
    if (engine_refuse_unavailable(e, ret_err) < 0)
        return ret_err->error;
    if (sb->create_op || sb->resize_op || sb->snap_op || sb->fw_busy || sb->call || sb->pause_op ||
        sb->attach_op)
        return engine_refuse(ret_err, ENGINE_E_BUSY, -EBUSY,
                             "another operation on this sandbox is running", NULL);
    if ((sb->state != SANDBOX_READY && sb->state != SANDBOX_PAUSED) || sb->destroy_requested ||
        sb->pool_member) {
        engine_refuse(ret_err, ENGINE_E_STATE, -EAGAIN, "the sandbox is not ready", NULL);
        ret_err->state = sandbox_state_to_public(sb->state);
        return -EAGAIN;
    }
    return 0;
}

static int pause_begin(struct sandbox *sb, bool resume, engine_sandbox_cb cb, void *userdata,
                       struct engine_error *ret_err)
{
    struct pause_op *op = malloc(sizeof *op);

    if (!op)
        return engine_refuse_oom(ret_err);
    *op = (struct pause_op){
        .resume = resume, .cb = cb, .userdata = userdata, .old_expires = sb->expires_at};
    log_debug(COMP, "%s: %s", sb->id, resume ? "resume" : "pause");
    pause_start_op(sb, op, resume ? restart_step_start : start_record);
    return 0;
}

int engine_pause(struct engine *e, struct sandbox *sb, engine_sandbox_cb cb, void *userdata,
                 struct engine_error *ret_err)
{
    const struct config_sandbox *cs = &e->cfg->sandbox;
    int r;

    r = pause_refused(e, sb, ret_err);
    if (r < 0)
        return r;
    if (sb->state == SANDBOX_PAUSED) {
        cb(NULL, sb, userdata);
        return 0;
    }
    if (paused_of(e, sb->owner_uid) >= cs->max_paused_per_uid) {
        engine_refuse(ret_err, ENGINE_E_QUOTA, -EDQUOT,
                      "too many paused sandboxes for this uid (max_paused_per_uid)", NULL);
        ret_err->limit = cs->max_paused_per_uid;
        return -EDQUOT;
    }
    return pause_begin(sb, false, cb, userdata, ret_err);
}

/* Joins the resume that runs: cb gets its outcome. */
static int resume_join(struct sandbox *sb, engine_sandbox_cb cb, void *userdata,
                       struct engine_error *ret_err)
{
    struct pause_waiter *w;

    if (sb->pause_op->n_waiters >= ENGINE_RESUME_WAITERS_MAX)
        return engine_refuse(ret_err, ENGINE_E_BUSY, -EBUSY,
                             "too many calls wait for this sandbox's resume", NULL);
    w = malloc(sizeof *w);
    if (!w)
        return engine_refuse_oom(ret_err);
    *w = (struct pause_waiter){.cb = cb, .userdata = userdata, .next = sb->pause_op->waiters};
    sb->pause_op->waiters = w;
    sb->pause_op->n_waiters++;
    return 0;
}

int engine_resume(struct engine *e, struct sandbox *sb, engine_sandbox_cb cb, void *userdata,
                  struct engine_error *ret_err)
{
    const struct config_sandbox *cs = &e->cfg->sandbox;
    int r;

    if (sb->pause_op && sb->pause_op->resume && !e->closing)
        return resume_join(sb, cb, userdata, ret_err);
    r = pause_refused(e, sb, ret_err);
    if (r < 0)
        return r;
    if (sb->state == SANDBOX_READY) {
        cb(NULL, sb, userdata);
        return 0;
    }
    if (engine_running(e, &sb->owner_uid) >= cs->max_per_uid)
        return engine_refuse(ret_err, ENGINE_E_QUOTA, -EDQUOT,
                             "too many sandboxes for this uid (max_per_uid)", NULL);
    if (engine_running(e, NULL) >= cs->max_total)
        return engine_refuse(ret_err, ENGINE_E_QUOTA, -EDQUOT, "too many sandboxes (max_total)",
                             NULL);
    return pause_begin(sb, true, cb, userdata, ret_err);
}

void engine_pause_finish(struct sandbox *sb)
{
    struct pause_op *op;

    if (sb->pause_op || sb->engine->closing || sb->state != SANDBOX_PAUSED)
        return;
    op = malloc(sizeof *op);
    if (!op)
        return; /* the next restart finishes it */
    *op = (struct pause_op){.old_expires = sb->expires_at};
    sb->marker_paused = true;
    log_info(COMP, "%s: finishing its pause", sb->id);
    pause_start_op(sb, op, marker_write_start);
}

bool engine_resume_on_use(const struct sandbox *sb)
{
    return sb->resume_on_use && sb->state == SANDBOX_PAUSED && !sb->destroy_requested;
}

void engine_touch(struct sandbox *sb)
{
    sb->last_use_ms = now_ms(sb->engine);
}

/* ---- auto_pause_s ---- */

static void on_auto_paused(const struct engine_error *err, struct sandbox *sb, void *userdata)
{
    if (err)
        log_debug(COMP, "%s: auto pause failed: %s", sb->id, strna(err->message));
}

static void count_forward(const struct sandbox_forward_info *info, void *userdata)
{
    (*(unsigned *)userdata)++;
}

/* Idle for auto_pause_s: no request began since, nothing of the engine runs on it, no port
 * forward is open (its connections are use the daemon does not see as requests). */
static bool auto_pause_due(struct sandbox *sb, uint64_t now)
{
    uint64_t since = MAX(sb->last_use_ms, sb->state_since_ms);
    unsigned forwards = 0;

    if (!sb->auto_pause_s || sb->state != SANDBOX_READY || sb->pool_member || sandbox_busy(sb) ||
        sb->auto_pause_probe || sb->refs > 0 || now < sb->auto_pause_next_ms ||
        now - since < (uint64_t)sb->auto_pause_s * 1000)
        return false;
    sandbox_forward_list(sb, count_forward, &forwards);
    return forwards == 0;
}

/* The background processes' list: when none runs, the next tick pauses the sandbox if it is
 * still idle. */
static void on_auto_listed(int error, const struct sandbox_process_result *res, void *userdata)
{
    struct sandbox *sb = userdata;
    bool running = error < 0 || !res;

    sb->auto_pause_probe = false;
    for (size_t i = 0; !running && i < res->n_rows; i++)
        running = strcmp(res->rows[i].status.state, "running") == 0;
    sb->auto_pause_quiet = !running;
    /* looked again later: a process runs, or the list could not be read */
    if (running)
        sb->auto_pause_next_ms = now_ms(sb->engine) + MIN((uint64_t)sb->auto_pause_s, 10) * 1000;
    sandbox_unref(sb);
}

void engine_auto_pause_check(struct sandbox *sb)
{
    const struct sandbox_process_call c = {.op = SANDBOX_PROCESS_LIST};
    struct engine *e = sb->engine;
    struct engine_error err;

    if (e->closing || !auto_pause_due(sb, now_ms(e))) {
        sb->auto_pause_quiet = false;
        return;
    }
    if (sb->auto_pause_quiet) { /* no process ran at the last look, still idle */
        sb->auto_pause_quiet = false;
        log_info(COMP, "%s: idle for %u s: pausing it (auto_pause_s)", sb->id, sb->auto_pause_s);
        if (engine_pause(e, sb, on_auto_paused, NULL, &err) < 0) {
            log_debug(COMP, "%s: auto pause refused: %s", sb->id, strna(err.message));
            sb->auto_pause_next_ms = now_ms(e) + 10000;
        }
        return;
    }
    sb->auto_pause_probe = true;
    sb->refs++;
    if (sandbox_process(sb, &c, on_auto_listed, sb, NULL, &err) < 0) {
        sb->auto_pause_probe = false;
        sb->auto_pause_next_ms = now_ms(e) + 10000;
        sb->refs--;
    }
}
