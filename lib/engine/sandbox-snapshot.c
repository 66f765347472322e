/* Snapshots of a sandbox's disk: sandbox.snapshot, sandbox.rollback and
 * sandbox.snapshot_delete are operations on the one driver (op-step.h), each beginning with a
 * read of Proxmox's list (the name in use or known, the per-sandbox limit) so that a refusal
 * changes nothing; sandbox.snapshots is that read alone. A rollback stops the container
 * (Proxmox does), restores the disk, writes the sandbox's marker, sizes and hostname back
 * (the snapshot's config comes back with its disk), starts the container, awaits its
 * address (reconcile-restart.h: a new one replaces the old in the ipfilter set) and makes
 * the SSH sessions anew. The host key is the container's own file, restored unchanged. See
 * sandbox-snapshot.h. */
#include "macro.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "audit.h"
#include "log.h"
#include "op-step.h"
#include "params-snapshot.h"
#include "pve.h"
#include "reconcile-restart.h"
#include "sandbox-internal.h"
#include "sandbox-snapshot.h"
#include "testhook.h"

#define COMP "sandbox"

enum snap_kind { SNAP_TAKE, SNAP_ROLLBACK, SNAP_DELETE };

struct snap_op {
    enum snap_kind kind;
    char name[PARAMS_SNAPSHOT_NAME_MAX + 1];
    engine_json_cb json_cb;  /* SNAP_TAKE, SNAP_DELETE */
    engine_sandbox_cb sb_cb; /* SNAP_ROLLBACK */
    void *userdata;
    int64_t created_at;
};

/* ---- Proxmox's list ---- */

static int by_created(const void *a, const void *b)
{
    json_object *x = *(json_object *const *)a, *y = *(json_object *const *)b, *vx, *vy;
    int64_t tx = json_object_object_get_ex(x, "created_at", &vx) ? json_object_get_int64(vx) : 0;
    int64_t ty = json_object_object_get_ex(y, "created_at", &vy) ? json_object_get_int64(vy) : 0;

    return tx < ty ? -1 : tx > ty;
}

/* The snapshots of Proxmox's list (its "current" entry left out), oldest first, as the
 * protocol shows them: {name, created_at, description?}. */
static json_object *snapshots_from_pve(json_object *data)
{
    json_object *out = json_object_new_array();
    size_t n = json_object_is_type(data, json_type_array) ? json_object_array_length(data) : 0;

    if (!out)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        json_object *e = json_object_array_get_idx(data, i), *v, *o;
        const char *name;

        if (!json_object_object_get_ex(e, "name", &v) || !json_object_is_type(v, json_type_string))
            continue;
        name = json_object_get_string(v);
        if (strcmp(name, "current") == 0)
            continue;
        o = json_object_new_object();
        json_object_object_add(o, "name", json_object_new_string(name));
        json_object_object_add(o, "created_at",
                               json_object_new_int64(json_object_object_get_ex(e, "snaptime", &v)
                                                         ? json_object_get_int64(v)
                                                         : 0));
        if (json_object_object_get_ex(e, "description", &v) && json_object_get_string_len(v) > 0)
            json_object_object_add(o, "description", json_object_get(v));
        json_object_array_add(out, o);
    }
    json_object_array_sort(out, by_created);
    return out;
}

static bool snapshot_listed(json_object *list, const char *name)
{
    for (size_t i = 0; i < json_object_array_length(list); i++) {
        json_object *v;

        if (json_object_object_get_ex(json_object_array_get_idx(list, i), "name", &v) &&
            strcmp(json_object_get_string(v), name) == 0)
            return true;
    }
    return false;
}

/* ---- steps ---- */

/* The read that decides: the name in use (a snapshot) or known (a rollback, a delete), and
 * the limit. A refusal here has changed nothing. */
static void on_checked(const struct pve_result *res, void *userdata)
{
    struct sandbox *sb = userdata;
    struct snap_op *op = sb->snap_op;
    unsigned max = sb->engine->cfg->sandbox.max_snapshots;
    _cleanup_json_ json_object *list = NULL;
    char buf[160];
    struct engine_error err = {.kind = ENGINE_E_INVALID, .error = -EINVAL, .param = "name"};
    bool known;

    sb->call = NULL;
    if (res->error < 0) {
        op_step_pve_done(sb, res);
        return;
    }
    list = snapshots_from_pve(res->data);
    if (!list) {
        err = (struct engine_error){
            .kind = ENGINE_E_INTERNAL, .error = -ENOMEM, .message = "out of memory"};
        op_step_done(sb, &err);
        return;
    }
    known = snapshot_listed(list, op->name);
    if (op->kind == SNAP_TAKE && known) {
        err.message = "the sandbox has a snapshot of that name";
        op_step_done(sb, &err);
    } else if (op->kind == SNAP_TAKE && json_object_array_length(list) >= max) {
        snprintf(buf, sizeof buf,
                 "the sandbox holds %zu snapshots, the most allowed (max_snapshots %u)",
                 json_object_array_length(list), max);
        err = (struct engine_error){
            .kind = ENGINE_E_QUOTA, .error = -EDQUOT, .message = buf, .limit = max};
        op_step_done(sb, &err);
    } else if (op->kind != SNAP_TAKE && !known) {
        err.message = "the sandbox has no snapshot of that name";
        op_step_done(sb, &err);
    } else
        op_step_done(sb, NULL);
}

static int start_check(struct sandbox *sb, uint64_t timeout_ms, const char **ret_fail)
{
    return pve_snapshot_list(sb->engine->pve, sb->node, sb->vmid, timeout_ms, on_checked, sb,
                             &sb->call);
}

/* Proxmox's task text for storage that cannot snapshot, said plainly. */
static void on_taken(const struct pve_result *res, void *userdata)
{
    struct sandbox *sb = userdata;
    struct engine_error err;

    sb->call = NULL;
    if (res->error == -EREMOTEIO && res->perr && res->perr->message &&
        strstr(res->perr->message, "snapshot feature is not available")) {
        error_from_pve(res, sb->engine->closing, &err);
        err.message = "the sandbox's storage cannot take snapshots (Proxmox: snapshot feature is "
                      "not available; snapshots need ZFS, LVM-thin, Ceph RBD or BTRFS storage)";
        op_step_done(sb, &err);
        return;
    }
    if (res->error >= 0)
        sb->snap_op->created_at = (int64_t)time(NULL);
    op_step_pve_done(sb, res);
}

static int start_take(struct sandbox *sb, uint64_t timeout_ms, const char **ret_fail)
{
    return pve_snapshot(sb->engine->pve, sb->node, sb->vmid, sb->snap_op->name, timeout_ms,
                        on_taken, sb, &sb->call);
}

static int start_delete(struct sandbox *sb, uint64_t timeout_ms, const char **ret_fail)
{
    return pve_snapshot_delete(sb->engine->pve, sb->node, sb->vmid, sb->snap_op->name, timeout_ms,
                               op_step_pve, sb, &sb->call);
}

/* The sessions go first: the container stops under them. */
static int start_rollback(struct sandbox *sb, uint64_t timeout_ms, const char **ret_fail)
{
    sb->rolling_back = true;
    sandbox_close_ssh(sb);
    return pve_snapshot_rollback(sb->engine->pve, sb->node, sb->vmid, sb->snap_op->name, timeout_ms,
                                 op_step_pve, sb, &sb->call);
}

/* The snapshot's config came back with its disk: the marker (lease, labels, host key pin),
 * sizes and hostname are the sandbox's of now again. */
static int start_reconfig(struct sandbox *sb, uint64_t timeout_ms, const char **ret_fail)
{
    _cleanup_json_ json_object *p = json_object_new_object();
    _cleanup_free_ char *desc = NULL;
    int r;

    if (!p)
        return -ENOMEM;
    r = sandbox_description(sb, &desc);
    if (r < 0) {
        *ret_fail = "cannot build the ownership marker";
        return r;
    }
    json_object_object_add(p, "description", json_object_new_string(desc));
    json_object_object_add(p, "cores", json_object_new_int((int)sb->cores));
    json_object_object_add(p, "memory", json_object_new_int((int)sb->memory_mb));
    if (sb->hostname)
        json_object_object_add(p, "hostname", json_object_new_string(sb->hostname));
    return pve_config_put(sb->engine->pve, sb->node, sb->vmid, p, timeout_ms, op_step_pve, sb,
                          &sb->call);
}

#define SNAP_STEP(what_, start_, cap_, ...)                                                        \
    {                                                                                              \
        .what = what_, .start = start_, .cap_ms = cap_, .fail = "cannot issue the call",           \
        .fail_kind = ENGINE_E_INTERNAL, __VA_ARGS__                                                \
    }

static const struct op_step take_steps[] = {
    SNAP_STEP("reading the snapshots", start_check, ENGINE_STEP_CONFIG_MS),
    SNAP_STEP("taking the snapshot", start_take, OP_STEP_OP_DEADLINE,
              .crash_sent = "snapshot-sent"),
};

static const struct op_step delete_steps[] = {
    SNAP_STEP("reading the snapshots", start_check, ENGINE_STEP_CONFIG_MS),
    SNAP_STEP("deleting the snapshot", start_delete, OP_STEP_OP_DEADLINE),
};

static const struct op_step rollback_steps[] = {
    SNAP_STEP("reading the snapshots", start_check, ENGINE_STEP_CONFIG_MS),
    SNAP_STEP("rolling back", start_rollback, OP_STEP_OP_DEADLINE, .crash_sent = "rollback-sent",
              .crash_done = "rollback-done"),
    SNAP_STEP("restoring the marker and sizes", start_reconfig, ENGINE_STEP_CONFIG_MS),
    SNAP_STEP("starting the container", restart_step_start, OP_STEP_UNBOUNDED,
              .crash_done = "rollback-started"),
    SNAP_STEP("connecting", reconnect_step_start, OP_STEP_OP_DEADLINE),
    SNAP_STEP("recording the address", save_step_start, OP_STEP_UNBOUNDED),
};

/* The audit record of an operation's outcome (err NULL: it succeeded). */
static void snap_audit(const struct sandbox *sb, const struct snap_op *op,
                       const struct engine_error *err)
{
    static const char *const done[] = {[SNAP_TAKE] = "sandbox.snapshot_taken",
                                       [SNAP_ROLLBACK] = "sandbox.rolled_back",
                                       [SNAP_DELETE] = "sandbox.snapshot_deleted"};
    struct audit_record rec = {
        .event = err ? "sandbox.snapshot_failed" : done[op->kind],
        .priority = err ? LOG_WARNING : LOG_INFO,
        .sandbox = sb->id,
        .vmid = sb->vmid,
        .node = sb->node,
        .caller_uid = AUDIT_NO_UID,
        .owner_uid = sb->owner_uid,
        .reason = op->name,
    };

    audit_emit(&rec, "%s of sandbox %s, snapshot %s%s%s",
               op->kind == SNAP_TAKE       ? "snapshot"
               : op->kind == SNAP_ROLLBACK ? "rollback"
                                           : "snapshot delete",
               sb->id, op->name, err ? " failed: " : "", err ? strna(err->message) : "");
}

/* The caller hears of the outcome; a destroy asked for meanwhile runs now. */
static void snap_finish(struct sandbox *sb, const struct engine_error *err, json_object *result)
{
    struct snap_op *op = TAKE_PTR(sb->snap_op);
    struct engine *e = sb->engine;

    sb->rolling_back = false;
    snap_audit(sb, op, err);
    if (err && op->kind == SNAP_ROLLBACK) {
        free(sb->error);
        sb->error = strdup(err->message);
    }
    if (op->kind == SNAP_ROLLBACK)
        op->sb_cb(err, sb, op->userdata);
    else
        op->json_cb(err, err ? NULL : result, op->userdata);
    free(op);
    if (!e->closing && sb->state != SANDBOX_DESTROYING && !sb->fw_busy && sb->destroy_requested) {
        sb->destroy_requested = false;
        destroy_start(sb);
    }
    sandbox_unref(sb);
}

static void snap_failed(struct sandbox *sb, const struct engine_error *err)
{
    log_info(COMP, "%s: snapshot operation on '%s' failed: %s", sb->id, sb->snap_op->name,
             strna(err->message));
    snap_finish(sb, err, NULL);
}

static void snap_done(struct sandbox *sb)
{
    struct snap_op *op = sb->snap_op;
    _cleanup_json_ json_object *o = json_object_new_object();
    json_object *s;

    if (op->kind == SNAP_TAKE) {
        s = json_object_new_object();
        json_object_object_add(s, "name", json_object_new_string(op->name));
        json_object_object_add(s, "created_at", json_object_new_int64(op->created_at));
        json_object_object_add(o, "snapshot", s);
    } else if (op->kind == SNAP_DELETE) {
        json_object_object_add(o, "name", json_object_new_string(op->name));
        json_object_object_add(o, "deleted", json_object_new_boolean(true));
    } else
        free(TAKE_PTR(sb->error)); /* READY again: an earlier failed rollback is over */
    log_info(COMP, "%s: snapshot operation on '%s' done", sb->id, op->name);
    snap_finish(sb, NULL, o);
}

static const struct op_kind take_kind = {
    .name = "snapshot",
    .steps = take_steps,
    .n_steps = ELEMENTSOF(take_steps),
    .fail = snap_failed,
    .done = snap_done,
};

static const struct op_kind delete_kind = {
    .name = "snapshot delete",
    .steps = delete_steps,
    .n_steps = ELEMENTSOF(delete_steps),
    .fail = snap_failed,
    .done = snap_done,
};

static const struct op_kind rollback_kind = {
    .name = "rollback",
    .steps = rollback_steps,
    .n_steps = ELEMENTSOF(rollback_steps),
    .fail = snap_failed,
    .done = snap_done,
};

/* ---- entry points ---- */

/* The refusals every snapshot call shares: changes nothing when it returns < 0. */
static int snap_refused(struct engine *e, struct sandbox *sb, struct engine_error *ret_err)
{
    if (engine_refuse_unavailable(e, ret_err) < 0)
        return ret_err->error;
    if (sb->state != SANDBOX_READY || sb->destroy_requested)
        return engine_refuse_not_ready(ret_err, sb->state);
    return 0;
}

static int snap_start(struct engine *e, struct sandbox *sb, enum snap_kind kind, const char *name,
                      struct snap_op *init, struct engine_error *ret_err)
{
    static const struct op_kind *const kinds[] = {
        [SNAP_TAKE] = &take_kind, [SNAP_ROLLBACK] = &rollback_kind, [SNAP_DELETE] = &delete_kind};
    struct snap_op *op;
    int r;

    r = snap_refused(e, sb, ret_err);
    if (r < 0)
        return r;
    if (!name || !params_snapshot_name_valid(name))
        return engine_refuse(ret_err, ENGINE_E_INVALID, -EINVAL,
                             "must be 2..40 characters: a letter, then letters, digits, '_' or '-' "
                             "(not \"current\" or \"vzdump\")",
                             "name");
    if (kind != SNAP_DELETE && sandbox_has_volumes(sb))
        return engine_refuse(ret_err, ENGINE_E_INVALID, -EINVAL, SANDBOX_VOLUMES_REFUSED, "id");
    if (kind == SNAP_TAKE && e->cfg->sandbox.max_snapshots == 0)
        return engine_refuse(ret_err, ENGINE_E_QUOTA, -EDQUOT,
                             "snapshots are turned off ([sandbox] max_snapshots = 0)", NULL);
    if (sb->create_op || sb->resize_op || sb->snap_op || sb->tmpl_op || sb->fw_busy || sb->call ||
        sb->attach_op)
        return engine_refuse(ret_err, ENGINE_E_BUSY, -EBUSY,
                             "another operation on this sandbox is running", NULL);
    op = malloc(sizeof *op);
    if (!op)
        return engine_refuse_oom(ret_err);
    *op = *init;
    op->kind = kind;
    snprintf(op->name, sizeof op->name, "%s", name);
    sb->snap_op = op;
    sb->refs++;
    log_debug(COMP, "%s: %s '%s'", sb->id, kinds[kind]->name, name);
    op_step_run(sb, kinds[kind], ENGINE_SNAPSHOT_TIMEOUT_MS);
    return 0;
}

int engine_snapshot(struct engine *e, struct sandbox *sb, const char *name, engine_json_cb cb,
                    void *userdata, struct engine_error *ret_err)
{
    return snap_start(e, sb, SNAP_TAKE, name,
                      &(struct snap_op){.json_cb = cb, .userdata = userdata}, ret_err);
}

int engine_rollback(struct engine *e, struct sandbox *sb, const char *name, engine_sandbox_cb cb,
                    void *userdata, struct engine_error *ret_err)
{
    return snap_start(e, sb, SNAP_ROLLBACK, name,
                      &(struct snap_op){.sb_cb = cb, .userdata = userdata}, ret_err);
}

int engine_snapshot_delete(struct engine *e, struct sandbox *sb, const char *name,
                           engine_json_cb cb, void *userdata, struct engine_error *ret_err)
{
    return snap_start(e, sb, SNAP_DELETE, name,
                      &(struct snap_op){.json_cb = cb, .userdata = userdata}, ret_err);
}

/* ---- sandbox.snapshots: the read alone, beside whatever else runs ---- */

struct list_call {
    struct sandbox *sb;
    engine_json_cb cb;
    void *userdata;
};

static void on_listed(const struct pve_result *res, void *userdata)
{
    struct list_call *x = userdata;
    struct sandbox *sb = x->sb;
    _cleanup_json_ json_object *o = NULL;
    struct engine_error err;

    if (res->error < 0) {
        error_from_pve(res, sb->engine->closing, &err);
        x->cb(&err, NULL, x->userdata);
    } else {
        o = json_object_new_object();
        json_object_object_add(o, "snapshots", snapshots_from_pve(res->data));
        x->cb(NULL, o, x->userdata);
    }
    free(x);
    sandbox_unref(sb);
}

int engine_snapshots(struct engine *e, struct sandbox *sb, engine_json_cb cb, void *userdata,
                     struct engine_error *ret_err)
{
    struct list_call *x;
    int r;

    r = snap_refused(e, sb, ret_err);
    if (r < 0)
        return r;
    x = malloc(sizeof *x);
    if (!x)
        return engine_refuse_oom(ret_err);
    *x = (struct list_call){.sb = sb, .cb = cb, .userdata = userdata};
    r = pve_snapshot_list(e->pve, sb->node, sb->vmid, ENGINE_STEP_CONFIG_MS, on_listed, x, NULL);
    if (r < 0) {
        free(x);
        return engine_refuse(ret_err, ENGINE_E_INTERNAL, r, "cannot issue the call", NULL);
    }
    sb->refs++;
    return 0;
}
