/* The destroy: stop, a look for volumes, delete, and after a refused delete a look at the pool; one
 * table of steps run by the operation driver (op-step.h) under one deadline
 * (ENGINE_CLEANUP_TIMEOUT_MS). See sandbox.h. */
#include "macro.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "op-step.h"
#include "pve.h"
#include "registry.h"
#include "sandbox-internal.h"
#include "testhook.h"
#include "volume-locate.h"
#include "volume.h"

#define COMP "sandbox"

static void destroy_finish(struct sandbox *sb, const struct engine_error *err);

static bool not_found(const struct pve_result *res)
{
    return res->error == -EREMOTEIO && res->perr && res->perr->kind == PVE_ERR_NOT_FOUND;
}

/* The error of a delete Proxmox refused (403), its text kept in sb->error. */
static struct engine_error refused_error(const struct sandbox *sb)
{
    return (struct engine_error){
        .kind = ENGINE_E_PROXMOX, .error = -EREMOTEIO, .http_status = 403, .message = sb->error};
}

static void on_stopped(const struct pve_result *res, void *userdata)
{
    struct sandbox *sb = userdata;

    sb->call = NULL;
    if (not_found(res))
        op_step_finish(sb); /* gone already */
    else /* Not running, or a stop that failed: the forced delete still stops it. */
        op_step_done(sb, NULL);
}

static int start_stop(struct sandbox *sb, uint64_t timeout_ms, const char **ret_fail)
{
    return pve_stop(sb->engine->pve, sb->node, sb->vmid, timeout_ms, on_stopped, sb, &sb->call);
}

static void on_deleted(const struct pve_result *res, void *userdata)
{
    struct sandbox *sb = userdata;

    sb->call = NULL;
    if (res->error == 0 || not_found(res)) {
        test_crash_point("destroy-deleted");
        op_step_finish(sb);
        return;
    }
    if (res->error == -EREMOTEIO && res->perr && res->perr->kind == PVE_ERR_PERMISSION &&
        !sb->engine->closing) {
        free(sb->error);
        sb->error = strdup(res->perr->message);
        if (sb->error) {
            op_step_done(sb, NULL); /* the pool tells whether it is gone */
            return;
        }
    }
    op_step_pve_done(sb, res);
}

/* Without destroy-unreferenced-disks: it makes the task activate every storage of the node,
 * and one offline storage fails it after the container's volumes are freed and before its
 * config is removed. A repeated delete of such a half-deleted container succeeds. */
static int start_delete(struct sandbox *sb, uint64_t timeout_ms, const char **ret_fail)
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
        op_step_finish(sb);
        return;
    }
    if (res->error < 0 && res->error != -EREMOTEIO) {
        op_step_pve_done(sb, res);
        return;
    }
    op_step_done(sb, &err);
}

static int start_check_pool(struct sandbox *sb, uint64_t timeout_ms, const char **ret_fail)
{
    struct engine *e = sb->engine;
    int r;

    assert(sb->error); /* the refusal of the delete before */
    r = pve_pool_members(e->pve, e->cfg->proxmox.pool, timeout_ms, on_pool_checked, sb, &sb->call);
    if (r < 0) { /* the destroy fails with the refusal, as it would without this step */
        struct engine_error err = refused_error(sb);

        op_step_done(sb, &err);
    }
    return 0;
}

/* A volume went back to the holder (or could not): the container is looked at again. */
static void on_volume_back(const struct engine_error *err, json_object *result, void *userdata)
{
    struct sandbox *sb = userdata;
    char buf[320];

    sb->refs--;
    if (sb->state == SANDBOX_GONE) {
        sandbox_maybe_free(sb);
        return;
    }
    if (op_step_check_abort(sb))
        return;
    if (!err) {
        test_crash_point("destroy-volume-back");
        op_step_again(sb, 0);
        return;
    }
    snprintf(buf, sizeof buf,
             "container %u holds a volume that cannot go back to the volume holder (%s): not "
             "deleted, so that the volume is not destroyed with it",
             sb->vmid, strna(err->message));
    log_error(COMP, "%s: %s", sb->id, buf);
    op_step_done(sb,
                 &(struct engine_error){.kind = ENGINE_E_STATE, .error = -EBUSY, .message = buf});
}

/* Deleting a container destroys its mount points' volumes: each volume the container holds
 * (volume_held()) goes back to the holder first, one at a time; when one cannot, the
 * container is kept, and the destroy fails saying so (the sandbox FAILED; the reconcile tries
 * again at each run). */
static void on_volumes_checked(const struct pve_result *res, void *userdata)
{
    struct sandbox *sb = userdata;
    struct marker_volume v;
    char buf[256];
    int r;

    sb->call = NULL;
    if (not_found(res)) {
        op_step_finish(sb); /* gone already */
        return;
    }
    if (res->error == -EREMOTEIO && res->perr && res->perr->kind == PVE_ERR_PERMISSION &&
        !sb->engine->closing) {
        /* as a refused delete: gone when no longer in the pool, else the destroy fails */
        free(sb->error);
        sb->error = strdup(res->perr->message);
        if (sb->error) {
            (void)start_check_pool(sb, op_step_left(sb), NULL);
            return;
        }
    }
    if (res->error < 0) {
        op_step_pve_done(sb, res);
        return;
    }
    r = volume_held(res->data, &v);
    if (r == 0) {
        op_step_done(sb, NULL);
        return;
    }
    if (r > 0) {
        struct engine_error qerr = {};

        log_info(COMP, "%s: volume '%s' (mp%u) goes back to the volume holder", sb->id, v.name,
                 v.mp);
        sb->refs++;
        if (engine_volume_take_back(sb->engine, sb->node, sb->vmid, &v, on_volume_back, sb,
                                    &qerr) == 0)
            return;
        sb->refs--;
        log_warning(COMP, "%s: volume '%s': %s", sb->id, v.name, strna(qerr.message));
    }
    if (r > 0)
        snprintf(buf, sizeof buf,
                 "container %" PRIu32 " holds volume '%s' (mp%u): not deleted, so that the "
                 "volume is not destroyed with it",
                 sb->vmid, v.name, v.mp);
    else
        snprintf(buf, sizeof buf,
                 "container %" PRIu32 ": its description's volume lines do not parse: not "
                 "deleted, so that no volume is destroyed with it",
                 sb->vmid);
    log_error(COMP, "%s: %s", sb->id, buf);
    op_step_done(sb,
                 &(struct engine_error){.kind = ENGINE_E_STATE, .error = -EBUSY, .message = buf});
}

static int start_volume_check(struct sandbox *sb, uint64_t timeout_ms, const char **ret_fail)
{
    /* current: a mount point removed from a running container stays until its next start */
    return pve_config_get(sb->engine->pve, sb->node, sb->vmid, true, timeout_ms, on_volumes_checked,
                          sb, &sb->call);
}

/* Stop, a look for volumes (none may be deleted with the container), delete, and after a refused
 * delete a look at the pool; a step that finds the container gone ends the destroy
 * (op_step_finish()). */
static const struct op_step destroy_steps[] = {
    /* optional: a stop that cannot start leaves it to the forced delete */
    {.what = "stopping",
     .start = start_stop,
     .cap_ms = OP_STEP_OP_DEADLINE,
     .crash_sent = "destroy-stop-sent"},
    {.what = "looking for volumes",
     .start = start_volume_check,
     .cap_ms = OP_STEP_OP_DEADLINE,
     .fail = "cannot read the container's configuration"},
    {.what = "deleting",
     .start = start_delete,
     .cap_ms = OP_STEP_OP_DEADLINE,
     .fail = "cannot start the Proxmox delete"},
    /* only after a refused delete (the deleted one finished the destroy) */
    {.what = "checking the pool after a refused delete",
     .start = start_check_pool,
     .cap_ms = OP_STEP_OP_DEADLINE},
};

static void destroy_fail(struct sandbox *sb, const struct engine_error *err)
{
    destroy_finish(sb, err);
}

static void destroy_done(struct sandbox *sb)
{
    destroy_finish(sb, NULL);
}

static const struct op_kind destroy_kind = {
    .name = "destroy",
    .steps = destroy_steps,
    .n_steps = ELEMENTSOF(destroy_steps),
    .fail = destroy_fail,
    .done = destroy_done,
};

/* The destroy finished (err NULL: gone). Serves the waiters and a failed create. */
static void destroy_finish(struct sandbox *sb, const struct engine_error *err)
{
    struct engine *e = sb->engine;
    struct sb_waiter *w = sb->destroy_waiters;

    assert(sb->state == SANDBOX_DESTROYING);
    sb->destroy_waiters = NULL;
    if (!err) {
        sandbox_set_state(sb, SANDBOX_GONE);
        tomb_add(e, sb);
        engine_addr_release(e, sb->vmid);
        if (e->reg && !e->closing)
            (void)registry_remove_async(e->reg, e->loop, sb->id, save_logged, NULL);
        sandbox_unlink(sb);
    } else {
        /* err->message may be sb->error itself (a refused delete) */
        char *error = strdup(err->message ? err->message : "destroy failed");

        log_debug(COMP, "%s: destroy failed: %s", sb->id, strna(err->message));
        free(sb->error);
        sb->error = error;
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

/* ---- a node that goes down ---- */

/* A destroy on a node that is down (a cluster's node, offline or failing its calls) does not
 * wait its deadline out in retries: it fails at once with this error, the sandbox is FAILED,
 * and reconcile tries it again at each run, which reaches Proxmox once the node answers. */
static struct engine_error node_down_error(const struct sandbox *sb, char *buf, size_t size)
{
    snprintf(buf, size,
             "the sandbox's node %s is down: its destroy is tried again once the "
             "node answers",
             sb->node);
    return (struct engine_error){.kind = ENGINE_E_PROXMOX, .error = -EHOSTDOWN, .message = buf};
}

static bool on_down_node(struct sandbox *sb)
{
    return sb->node && cluster_node_down(sb->engine, sb->node);
}

/* The node went down (cluster.c, from its timer): the destroys waiting on a call to it end. */
static void destroys_yield(struct engine *e)
{
    struct sandbox *sb, *next;
    char buf[160];

    for (sb = e->sandboxes; sb; sb = next) {
        struct engine_error err;

        next = sb->next;
        if (sb->state != SANDBOX_DESTROYING || !sb->run.running || sb->run.kind != &destroy_kind ||
            !on_down_node(sb) || !(sb->call || uv_is_active((uv_handle_t *)&sb->timer)))
            continue;
        log_debug(COMP, "%s: node %s is down: the destroy yields", sb->id, sb->node);
        if (sb->call)
            pve_call_cancel(TAKE_PTR(sb->call));
        uv_timer_stop(&sb->timer);
        err = node_down_error(sb, buf, sizeof buf);
        sb->refs++;
        op_step_done(sb, &err);
        next = sb->next;
        sandbox_unref(sb);
    }
}

void destroy_start(struct sandbox *sb)
{
    char buf[160];

    sb->engine->destroys_yield = destroys_yield;
    sandbox_set_state(sb, SANDBOX_DESTROYING);
    sandbox_close_ssh(sb);
    if (sb->vmid == 0) {
        destroy_finish(sb, NULL);
        return;
    }
    if (on_down_node(sb)) {
        struct engine_error err = node_down_error(sb, buf, sizeof buf);

        destroy_finish(sb, &err);
        return;
    }
    op_step_run(sb, &destroy_kind, ENGINE_CLEANUP_TIMEOUT_MS);
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
            (void)op_step_check_abort(sb);
        }
        return 0;
    }
    if (sb->resize_op || sb->snap_op || sb->tmpl_op || sb->pause_op || sb->attach_op) {
        /* A live change, a snapshot operation, a template.create, a pause or a resume runs:
         * the destroy follows it (lib/engine/sandbox-resize.c, sandbox-snapshot.c,
         * template-create.c, sandbox-pause.c). */
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
