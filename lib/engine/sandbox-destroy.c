/* The destroy pipeline: stop, delete, and after a refused delete a look at the pool; one
 * table of steps under one deadline (ENGINE_CLEANUP_TIMEOUT_MS). See sandbox.h. */
#include "macro.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "pve.h"
#include "registry.h"
#include "sandbox-internal.h"
#include "testhook.h"

#define COMP "sandbox"

struct destroy_step {
    const char *what; /* for the log */
    /* Issues the step's call; it completes through destroy_step_done(). Returns 0 or a
     * negative errno. */
    int (*start)(struct sandbox *sb, uint64_t timeout_ms);
    /* When start fails: NULL to go on with the next step, else the failure's text. */
    const char *fail;
    bool fail_refused;      /* ... or else the Proxmox refusal kept in sb->error */
    const char *crash_sent; /* test crash point once the call is issued */
};

enum destroy_outcome {
    DESTROY_NEXT, /* the next step runs */
    DESTROY_GONE, /* the container is gone */
    DESTROY_FAIL, /* the destroy failed (err) */
};

static int start_stop(struct sandbox *sb, uint64_t timeout_ms);
static int start_delete(struct sandbox *sb, uint64_t timeout_ms);
static int start_check_pool(struct sandbox *sb, uint64_t timeout_ms);

static const struct destroy_step destroy_steps[] = {
    {"stopping", start_stop, NULL, false, "destroy-stop-sent"},
    {"deleting", start_delete, "cannot start the Proxmox delete", false, NULL},
    {"checking the pool after a refused delete", start_check_pool, NULL, true, NULL},
};

/* The destroy finished (err NULL: gone). Serves the waiters and a failed create. */
static void destroy_finish(struct sandbox *sb, const struct engine_error *err)
{
    struct engine *e = sb->engine;
    struct sb_waiter *w = sb->destroy_waiters;

    sb->destroy_waiters = NULL;
    if (!err) {
        sandbox_set_state(sb, SANDBOX_GONE);
        tomb_add(e, sb);
        engine_addr_release(e, sb->vmid);
        if (e->reg && !e->closing)
            (void)registry_remove_async(e->reg, e->loop, sb->id, save_logged, NULL);
        sandbox_unlink(sb);
    } else {
        log_debug(COMP, "%s: destroy failed: %s", sb->id, strna(err->message));
        free(sb->error);
        sb->error = strdup(err->message ? err->message : "destroy failed");
        sandbox_set_state(sb, SANDBOX_FAILED);
    }
    sb->refs++;
    while (w) {
        struct sb_waiter *next = w->next;
        w->cb(err, w->userdata);
        free(w);
        w = next;
    }
    if (sb->create_op)
        sb->create_op->finish(sb);
    sandbox_unref(sb);
}

static uint64_t destroy_left(struct sandbox *sb)
{
    uint64_t now = now_ms(sb->engine);

    return now >= sb->destroy_deadline_ms ? 1 : sb->destroy_deadline_ms - now;
}

/* The error of a delete Proxmox refused (403), its text kept in sb->error. */
static struct engine_error refused_error(const struct sandbox *sb)
{
    return (struct engine_error){
        .kind = ENGINE_E_PROXMOX, .error = -EREMOTEIO, .http_status = 403, .message = sb->error};
}

/* Runs destroy_steps[sb->step] (and the next ones while a step cannot start). */
static void destroy_step_run(struct sandbox *sb)
{
    for (; sb->step < ELEMENTSOF(destroy_steps); sb->step++) {
        const struct destroy_step *s = &destroy_steps[sb->step];
        int r;

        log_debug(COMP, "%s: destroy: %s", sb->id, s->what);
        r = s->start(sb, destroy_left(sb));
        if (r >= 0) {
            if (s->crash_sent)
                test_crash_point(s->crash_sent);
            return;
        }
        if (s->fail || s->fail_refused) {
            struct engine_error err = {.kind = ENGINE_E_INTERNAL, .error = r, .message = s->fail};

            if (s->fail_refused)
                err = refused_error(sb);
            destroy_finish(sb, &err);
            return;
        }
    }
    destroy_finish(sb, NULL);
}

/* The running step's call completed with outcome (err: DESTROY_FAIL's error). */
static void destroy_step_done(struct sandbox *sb, enum destroy_outcome outcome,
                              const struct engine_error *err)
{
    switch (outcome) {
    case DESTROY_NEXT:
        sb->step++;
        destroy_step_run(sb);
        break;
    case DESTROY_GONE:
        destroy_finish(sb, NULL);
        break;
    case DESTROY_FAIL:
        destroy_finish(sb, err);
        break;
    }
}

void destroy_start(struct sandbox *sb)
{
    sandbox_set_state(sb, SANDBOX_DESTROYING);
    sandbox_close_ssh(sb);
    if (sb->vmid == 0) {
        destroy_finish(sb, NULL);
        return;
    }
    sb->destroy_deadline_ms = now_ms(sb->engine) + ENGINE_CLEANUP_TIMEOUT_MS;
    sb->step = 0;
    destroy_step_run(sb);
}

static bool not_found(const struct pve_result *res)
{
    return res->error == -EREMOTEIO && res->perr && res->perr->kind == PVE_ERR_NOT_FOUND;
}

static void on_stopped(const struct pve_result *res, void *userdata)
{
    struct sandbox *sb = userdata;
    struct engine_error err;

    sb->call = NULL;
    if (sb->engine->closing) {
        error_from_pve(res, true, &err);
        destroy_step_done(sb, DESTROY_FAIL, &err);
    } else if (not_found(res))
        destroy_step_done(sb, DESTROY_GONE, NULL);
    else /* Not running, or a stop that failed: the forced delete still stops it. */
        destroy_step_done(sb, DESTROY_NEXT, NULL);
}

static int start_stop(struct sandbox *sb, uint64_t timeout_ms)
{
    return pve_stop(sb->engine->pve, sb->node, sb->vmid, timeout_ms, on_stopped, sb, &sb->call);
}

static void on_deleted(const struct pve_result *res, void *userdata)
{
    struct sandbox *sb = userdata;
    struct engine *e = sb->engine;
    struct engine_error err;

    sb->call = NULL;
    if (res->error == 0 || not_found(res)) {
        test_crash_point("destroy-deleted");
        destroy_step_done(sb, DESTROY_GONE, NULL);
        return;
    }
    if (res->error == -EREMOTEIO && res->perr && res->perr->kind == PVE_ERR_PERMISSION &&
        !e->closing) {
        free(sb->error);
        sb->error = strdup(res->perr->message);
        if (sb->error) {
            destroy_step_done(sb, DESTROY_NEXT, NULL);
            return;
        }
    }
    error_from_pve(res, e->closing, &err);
    destroy_step_done(sb, DESTROY_FAIL, &err);
}

/* Without destroy-unreferenced-disks: it makes the task activate every storage of the node,
 * and one offline storage fails it after the container's volumes are freed and before its
 * config is removed. A repeated delete of such a half-deleted container succeeds. */
static int start_delete(struct sandbox *sb, uint64_t timeout_ms)
{
    return pve_delete(sb->engine->pve, sb->node, sb->vmid, PVE_DELETE_FORCE | PVE_DELETE_PURGE,
                      timeout_ms, on_deleted, sb, &sb->call);
}

/* After a 403 on stop/delete: a vmid that no longer exists is refused by the permission
 * check of a pool-scoped token (Proxmox checks /vms/N). Gone when it is not in our pool. */
static void on_pool_checked(const struct pve_result *res, void *userdata)
{
    struct sandbox *sb = userdata;
    struct engine_error err = refused_error(sb);

    sb->call = NULL;
    if (res->error == 0 && res->vms && !pve_vm_list_find(res->vms, sb->vmid)) {
        destroy_step_done(sb, DESTROY_GONE, NULL);
        return;
    }
    if (res->error < 0 && res->error != -EREMOTEIO)
        error_from_pve(res, sb->engine->closing, &err);
    destroy_step_done(sb, DESTROY_FAIL, &err);
}

static int start_check_pool(struct sandbox *sb, uint64_t timeout_ms)
{
    struct engine *e = sb->engine;

    return pve_pool_members(e->pve, e->cfg->proxmox.pool, timeout_ms, on_pool_checked, sb,
                            &sb->call);
}

int engine_destroy(struct engine *e, struct sandbox *sb, engine_done_cb cb, void *userdata,
                   struct engine_error *ret_err)
{
    struct sb_waiter *w;

    if (e->closing)
        return engine_refuse(ret_err, ENGINE_E_SHUTDOWN, -ESHUTDOWN, "the daemon is shutting down",
                             NULL);
    w = calloc(1, sizeof *w);
    if (!w)
        return engine_refuse_oom(ret_err);
    w->cb = cb;
    w->userdata = userdata;
    w->next = sb->destroy_waiters;
    sb->destroy_waiters = w;
    if (sb->state == SANDBOX_DESTROYING)
        return 0; /* joins the running destroy */
    if (sb->create_op) {
        /* A create is running: it notices when its running step completes, and cleans up. */
        sb->destroy_requested = true;
        if (sb->state == SANDBOX_CONNECTING && sb->pool) {
            sandbox_close_ssh(sb); /* the connect callback sees the request */
            return 0;
        }
        if (!sb->call && uv_is_active((uv_handle_t *)&sb->timer)) {
            uv_timer_stop(&sb->timer); /* waiting between polls or retries: now */
            (void)sb->create_op->check_abort(sb);
        }
        return 0;
    }
    if (sb->resize_op) {
        /* A live change runs: the destroy follows it (lib/engine/sandbox-resize.c). */
        sb->destroy_requested = true;
        return 0;
    }
    if (sb->fw_busy) {
        /* Let the firewall call finish first: it holds a ref; checked in on_fw_set. */
        sb->destroy_requested = true;
        return 0;
    }
    destroy_start(sb);
    return 0;
}
