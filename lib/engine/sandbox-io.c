/* A READY sandbox's internet switch (one firewall change at a time, in order), and the SSH
 * sessions its commands and files run on (sandbox-job.c, sandbox-fs.c). See sandbox.h. */
#include "macro.h"

#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "filepool.h"
#include "pve.h"
#include "sandbox-internal.h"
#include "sandbox-io.h"
#include "testhook.h"

/* ---- internet ---- */

/* Internet changes of one sandbox run one at a time, in the order they were asked for:
 * a change asked for while another runs waits in sb->fw_waiting (at most
 * ENGINE_FW_QUEUE_MAX) and starts when the one before it completes, so pipelined calls
 * all succeed and the last one asked for is the state left in place. */

static int fw_start(struct sandbox *sb, struct fw_op *op);

static void fw_op_free(struct fw_op *op)
{
    json_object_put(op->allow);
    free(op);
}

/* Completes every queued change with err (the sandbox is going away or the daemon stops). */
static void fw_fail_waiting(struct sandbox *sb, const struct engine_error *err)
{
    struct fw_op *op;

    while ((op = sb->fw_waiting)) {
        sb->fw_waiting = op->next;
        sb->n_fw_waiting--;
        op->cb(err, sb, op->userdata);
        fw_op_free(op);
    }
}

/* Starts the oldest queued change, if any; one that cannot start completes with its error. */
static void fw_start_next(struct sandbox *sb)
{
    struct fw_op *op;

    while (!sb->fw_busy && (op = sb->fw_waiting)) {
        int r;

        sb->fw_waiting = op->next;
        sb->n_fw_waiting--;
        op->next = NULL;
        r = fw_start(sb, op);
        if (r < 0) {
            struct engine_error err = {.kind = ENGINE_E_INTERNAL,
                                       .error = r,
                                       .message = "cannot change the firewall rule"};

            op->cb(&err, sb, op->userdata);
            fw_op_free(op);
        }
    }
}

static void on_fw_set(const struct pve_result *res, void *userdata)
{
    struct fw_op *op = userdata;
    struct sandbox *sb = op->sb;
    struct engine *e = sb->engine;
    struct engine_error err;

    sb->call = NULL;
    sb->fw_busy = false;
    if (res->error == 0) {
        sb->internet = op->enabled;
        json_object_put(sb->internet_allow);
        sb->internet_allow = TAKE_PTR(op->allow);
        if (!e->closing)
            (void)sandbox_save(sb, save_logged, NULL);
        op->cb(NULL, sb, op->userdata);
    } else {
        error_from_pve(res, e->closing, &err);
        op->cb(&err, sb, op->userdata);
    }
    fw_op_free(op);
    if (e->closing) {
        err = (struct engine_error){.kind = ENGINE_E_SHUTDOWN,
                                    .error = -ESHUTDOWN,
                                    .message = "the daemon is shutting down"};
        fw_fail_waiting(sb, &err);
    } else if (sb->destroy_requested && sb->state == SANDBOX_READY) {
        err = (struct engine_error){.kind = ENGINE_E_STATE,
                                    .error = -EAGAIN,
                                    .message = "the sandbox is being destroyed",
                                    .state = sandbox_state_to_public(SANDBOX_DESTROYING)};
        fw_fail_waiting(sb, &err);
        if (!sb->resize_op) { /* else the resize starts it when it ends (sandbox-resize.c) */
            sb->destroy_requested = false;
            destroy_start(sb);
        }
    } else {
        fw_start_next(sb);
    }
    sandbox_unref(sb);
}

/* The record says a change is starting (internet_pending, sandbox_save()): a restart that
 * finds it puts the recorded state back in place (engine_adopt()), whatever part of the
 * change reached the firewall. Then the change runs. */
static void on_fw_pending_saved(int r, void *userdata)
{
    struct fw_op *op = userdata;
    struct sandbox *sb = op->sb;
    struct pve_result res = {.error = r};

    test_crash_point("internet-pending-durable");
    if (r == 0 && (sb->engine->closing || sb->state != SANDBOX_READY))
        res.error = -ESHUTDOWN;
    if (res.error == 0)
        res.error =
            egress_fw_apply(sb, op->enabled, op->allow, ENGINE_STEP_CONFIG_MS * 4, on_fw_set, op);
    if (res.error < 0)
        on_fw_set(&res, op);
}

static int fw_start(struct sandbox *sb, struct fw_op *op)
{
    int r;

    assert(!sb->fw_busy); /* one internet change at a time, the others queued */
    sb->fw_busy = true;
    r = sandbox_save(sb, on_fw_pending_saved, op);
    if (r < 0) {
        sb->fw_busy = false;
        return r;
    }
    sb->refs++;
    return 0;
}

int engine_set_internet(struct engine *e, struct sandbox *sb, bool enabled, json_object *allow,
                        engine_sandbox_cb cb, void *userdata, struct engine_error *ret_err)
{
    struct fw_op *op;
    int r;

    if (sb->state != SANDBOX_READY || sb->destroy_requested)
        return engine_refuse_not_ready(ret_err,
                                       sb->destroy_requested ? SANDBOX_DESTROYING : sb->state);
    if (sb->n_fw_waiting >= ENGINE_FW_QUEUE_MAX)
        return engine_refuse(ret_err, ENGINE_E_BUSY, -EBUSY,
                             "too many internet changes are waiting", NULL);
    op = calloc(1, sizeof *op);
    if (!op)
        return engine_refuse_oom(ret_err);
    op->sb = sb;
    op->enabled = enabled;
    op->allow = enabled && allow ? json_object_get(allow) : NULL;
    op->cb = cb;
    op->userdata = userdata;
    /* Behind the running change and behind every waiting one: a change asked for from a
     * completion callback (its reply let the client's next request in) runs while the
     * finished change's successors still wait, and must not overtake them. */
    if (sb->fw_busy || sb->fw_waiting) {
        struct fw_op **tail = &sb->fw_waiting;

        while (*tail)
            tail = &(*tail)->next;
        *tail = op;
        sb->n_fw_waiting++;
        return 0;
    }
    r = fw_start(sb, op);
    if (r < 0) {
        fw_op_free(op);
        return engine_refuse(ret_err, ENGINE_E_INTERNAL, r, "cannot change the firewall rule",
                             NULL);
    }
    return 0;
}

/* ---- the sessions of exec and files (sandbox-job.c, sandbox-fs.c, sandbox-pump.c) ---- */

int sandbox_pool_lazy(struct sandbox *sb)
{
    struct engine *e = sb->engine;
    struct sshs_config sc;

    if (!sb->ip)
        return -EHOSTUNREACH;
    sandbox_ssh_config(sb, &sc);
    return sshpool_new(e->loop, &sc, e->cfg->ssh.sessions_per_sandbox, &sb->pool);
}

void engine_error_from_io(int error, bool file, struct engine_error *ret)
{
    *ret = (struct engine_error){.error = error, .message = strerror(-error)};
    if (sshs_error_is_ssh(error)) {
        ret->kind = ENGINE_E_SSH;
        if (error == -EBADE)
            ret->message = "SSH host key mismatch";
    } else if (error == -ECANCELED) {
        ret->kind = ENGINE_E_STATE;
        ret->message = "cancelled: the sandbox is going away";
    } else if (error == -EBUSY) {
        ret->kind = ENGINE_E_BUSY;
        ret->message = "too many requests queued";
    } else {
        ret->kind = file ? ENGINE_E_FILE : ENGINE_E_INTERNAL;
    }
}

/* A file session of sb on the engine's file pool, its share counted for sb's owner. */
static int file_new(struct sandbox *sb, struct sshfile **ret)
{
    struct engine *e = sb->engine;
    struct sshs_config sc;
    struct sshfile *f;
    int r;

    if (!e->filepool) {
        r = filepool_new(e->loop, e->cfg->ssh.file_workers, &e->filepool);
        if (r < 0)
            return r;
    }
    sandbox_ssh_config(sb, &sc);
    r = sshfile_new(e->loop, &sc, e->cfg->ssh.file_timeout_ms, &f);
    if (r < 0)
        return r;
    sshfile_set_pool(f, e->filepool, sb->owner_uid, sb);
    *ret = f;
    return 0;
}

int sandbox_file_session(struct sandbox *sb, struct sshfile **ret, struct engine_error *ret_err)
{
    struct engine *e = sb->engine;
    int r;

    if (sb->state != SANDBOX_READY || e->closing)
        return engine_refuse_not_ready(ret_err, sb->state);
    r = engine_refuse_rolling_back(sb, ret_err);
    if (r < 0)
        return r;
    if (!sb->file) {
        r = file_new(sb, &sb->file);
        if (r < 0)
            return r;
    }
    *ret = sb->file;
    return 0;
}

int sandbox_file_refused(int r, bool write, struct engine_error *ret_err)
{
    if (r == -EAGAIN)
        return r;
    if (r == -EINVAL)
        return engine_refuse(ret_err, ENGINE_E_INVALID, r,
                             "not an absolute path, or a bad offset/mode", "path");
    if (r == -EFBIG)
        return engine_refuse(ret_err, ENGINE_E_INVALID, r, "too large",
                             write ? "content" : "length");
    engine_error_from_io(r, true, ret_err);
    return r;
}

int sandbox_sshfile_own(struct sandbox *sb, struct sshfile **ret, struct engine_error *ret_err)
{
    struct sshfile *f;
    int r;

    if (sb->state != SANDBOX_READY || sb->engine->closing)
        return engine_refuse_not_ready(ret_err, sb->state);
    r = file_new(sb, &f);
    if (r < 0) {
        engine_error_from_io(r, false, ret_err);
        return r;
    }
    *ret = f;
    return 0;
}
