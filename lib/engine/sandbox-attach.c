/* sandbox.attach and sandbox.detach on the one driver (op-step.h); see sandbox-attach.h. The
 * attach is the create's step "attaching volumes" (volume-attach.c); the detach's stop is the
 * pause's, its start and reconnect the rollback's. */
#include "macro.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "audit.h"
#include "log.h"
#include "marker.h"
#include "op-step.h"
#include "pve.h"
#include "reconcile-restart.h"
#include "sandbox-attach.h"
#include "sandbox-internal.h"
#include "sandbox-pause.h"
#include "volume-locate.h"
#include "volume.h"

#define COMP "sandbox"

struct attach_op {
    bool detach;
    engine_sandbox_cb cb;
    void *userdata;
    char name[ID_MAX + 1];
    struct marker_volume line; /* detach: the volume's line in the container */
    bool stopped;              /* the container was (maybe) stopped */
    bool checked;              /* attach: its mount point was looked for once */
    bool restart;              /* attach: not hot-plugged, the container restarts */
};

/* ---- steps ---- */

/* The line of volume name in the description of a configuration (data): the first whose key
 * is a mount point there (*ret_live), else the first. -ENOENT: none; another negative errno:
 * the lines do not parse. */
static int config_line(json_object *data, const char *name, struct marker_volume *ret,
                       bool *ret_live)
{
    _cleanup_free_ struct marker_volume *mv = NULL;
    json_object *d = NULL;
    size_t n = 0, found = SIZE_MAX;
    int r;

    json_object_object_get_ex(data, "description", &d);
    r = marker_volumes_parse(d ? json_object_get_string(d) : NULL, &mv, &n);
    if (r < 0)
        return r;
    for (size_t i = 0; i < n; i++) {
        if (strcmp(mv[i].name, name) != 0)
            continue;
        if (volume_config_has_mp(data, mv[i].mp)) {
            found = i;
            break;
        }
        if (found == SIZE_MAX)
            found = i;
    }
    if (found == SIZE_MAX)
        return -ENOENT;
    *ret = mv[found];
    *ret_live = volume_config_has_mp(data, mv[found].mp);
    return 0;
}

/* The detach's read of the container's configuration: the volume must be mounted there (its
 * line's key a mount point); nothing is changed before. */
static void line_read(struct sandbox *sb, int r, const struct marker_volume *line, bool live)
{
    struct attach_op *op = sb->attach_op;

    if (r == 0 && live) {
        op->line = *line;
        op_step_done(sb, NULL);
        return;
    }
    op_step_done(sb,
                 &(struct engine_error){.kind = ENGINE_E_INVALID,
                                        .error = r < 0 ? r : -ENOENT,
                                        .message = r < 0 && r != -ENOENT
                                                       ? "the sandbox's volume lines do not parse"
                                                       : "the volume is not attached to this "
                                                         "sandbox",
                                        .param = "volume"});
}

/* The attach's check: its mount point is live when the container's running configuration (GET
 * .../config with current=1) has the key of the volume's line. A hot-plug Proxmox could not
 * make is only a warning of the move's task: the key stays a pending change, applied at the
 * next start (pve-container src/PVE/LXC/Config.pm:1630-1633 and 1740-1745, API2/LXC.pm:2845-
 * 2848, LXC.pm:3131). Found pending the first time, the container restarts; the second time
 * (after the start) it is a failure. */
static void line_checked(struct sandbox *sb, int r, const struct marker_volume *line, bool live)
{
    struct attach_op *op = sb->attach_op;

    if (r == 0 && (live || !op->checked)) {
        op->restart = !live;
        op->checked = true;
        if (op->restart)
            log_warning(COMP,
                        "%s: volume '%s' was not hot-plugged (mp%u is pending): "
                        "restarting the container",
                        sb->id, op->name, line->mp);
        op_step_done(sb, NULL);
        return;
    }
    op_step_done(sb, &(struct engine_error){.kind = ENGINE_E_INTERNAL,
                                            .error = r < 0 && r != -ENOENT ? r : -EIO,
                                            .message = op->checked
                                                           ? "the volume's mount point is not live "
                                                             "after the container's start"
                                                           : "the volume's line is not in the "
                                                             "sandbox's configuration"});
}

/* The configuration read by start_read() (a detach) or start_check() (an attach). */
static void on_config(const struct pve_result *res, void *userdata)
{
    struct sandbox *sb = userdata;
    struct attach_op *op = sb->attach_op;
    struct marker_volume line = {0};
    bool live = false;
    int r;

    sb->call = NULL;
    if (res->error < 0) {
        op_step_pve_done(sb, res);
        return;
    }
    r = config_line(res->data, op->name, &line, &live);
    (op->detach ? line_read : line_checked)(sb, r, &line, live);
}

static int start_read(struct sandbox *sb, uint64_t timeout_ms, const char **ret_fail)
{
    return pve_config_get(sb->engine->pve, sb->node, sb->vmid, false, timeout_ms, on_config, sb,
                          &sb->call);
}

static int start_check(struct sandbox *sb, uint64_t timeout_ms, const char **ret_fail)
{
    return pve_config_get(sb->engine->pve, sb->node, sb->vmid, true, timeout_ms, on_config, sb,
                          &sb->call);
}

static bool no_restart(const struct sandbox *sb)
{
    return !sb->attach_op->restart;
}

/* The detach's intent, written ahead of the stop: a re-attach finishes it. */
static int start_record(struct sandbox *sb, uint64_t timeout_ms, const char **ret_fail)
{
    snprintf(sb->detaching, sizeof sb->detaching, "%s", sb->attach_op->name);
    return save_step_start(sb, timeout_ms, ret_fail);
}

/* No command and no new session while the container is stopped. */
static int start_stop(struct sandbox *sb, uint64_t timeout_ms, const char **ret_fail)
{
    sb->attach_op->stopped = true;
    sb->rolling_back = true;
    return pause_stop_step_start(sb, timeout_ms, ret_fail);
}

/* The volume leaves the in-memory mounts (they reserve volumes while the sandbox lives). */
static void mounts_drop(struct sandbox *sb, const char *name)
{
    size_t k = 0;

    for (size_t i = 0; i < sb->n_vol_mounts; i++)
        if (strcmp(sb->vol_mounts[i].name, name) != 0)
            sb->vol_mounts[k++] = sb->vol_mounts[i];
    sb->n_vol_attached -= sb->n_vol_mounts - k;
    sb->n_vol_mounts = k;
}

static void on_back(const struct engine_error *err, json_object *result, void *userdata)
{
    struct sandbox *sb = userdata;

    (void)result;
    if (!err) { /* the last save of the detach writes the record without it */
        mounts_drop(sb, sb->attach_op->name);
        sb->detaching[0] = '\0';
    }
    op_step_done(sb, err);
}

static int start_back(struct sandbox *sb, uint64_t timeout_ms, const char **ret_fail)
{
    struct engine_error err = {};
    int r = engine_volume_detach(sb->engine, sb->node, sb->vmid, &sb->attach_op->line, on_back, sb,
                                 &err);

    if (r < 0)
        *ret_fail = err.message;
    return r;
}

/* The line left in the container's description, stale now (volume-locate.h), goes: a failure
 * here is only logged (a stale line is harmless). */
static void on_unlined(const struct pve_result *res, void *userdata)
{
    struct sandbox *sb = userdata;

    sb->call = NULL;
    if (res->error < 0)
        log_warning(COMP, "%s: the stale line of volume '%s' stays in its description", sb->id,
                    sb->attach_op->name);
    op_step_done(sb, NULL);
}

static void on_config_again(const struct pve_result *res, void *userdata)
{
    struct sandbox *sb = userdata;
    _cleanup_free_ char *desc = NULL;
    _cleanup_json_ json_object *p = NULL;
    json_object *d = NULL;
    int r = res->error;

    sb->call = NULL;
    if (r >= 0 && json_object_object_get_ex(res->data, "description", &d))
        r = marker_volume_remove(json_object_get_string(d), sb->attach_op->name, &desc);
    p = r >= 0 && desc ? json_object_new_object() : NULL;
    if (p) {
        json_object_object_add(p, "description", json_object_new_string(desc));
        r = pve_config_put(sb->engine->pve, sb->node, sb->vmid, p, op_step_left(sb), on_unlined, sb,
                           &sb->call);
        if (r >= 0)
            return;
    }
    on_unlined(&(struct pve_result){.error = -EIO}, sb);
}

static int start_unline(struct sandbox *sb, uint64_t timeout_ms, const char **ret_fail)
{
    return pve_config_get(sb->engine->pve, sb->node, sb->vmid, false, timeout_ms, on_config_again,
                          sb, &sb->call);
}

#define ATTACH_STEP(what_, start_, cap_, ...)                                                      \
    {                                                                                              \
        .state = SANDBOX_READY, .what = what_, .start = start_, .cap_ms = cap_,                    \
        .fail = "cannot issue the call", .fail_kind = ENGINE_E_INTERNAL, __VA_ARGS__               \
    }

static const struct op_step attach_steps[] = {
    ATTACH_STEP("recording the attach", save_step_start, OP_STEP_UNBOUNDED,
                .crash_done = "attach-recorded"),
    ATTACH_STEP("attaching volumes", volumes_attach_start, OP_STEP_OP_DEADLINE,
                .skip = volumes_attach_skip),
    ATTACH_STEP("checking the mount point", start_check, ENGINE_STEP_CONFIG_MS),
    ATTACH_STEP("stopping the container", start_stop, OP_STEP_OP_DEADLINE, .skip = no_restart,
                .crash_done = "attach-stopped"),
    ATTACH_STEP("starting the container", restart_step_start, OP_STEP_UNBOUNDED, .skip = no_restart,
                .crash_done = "attach-started"),
    ATTACH_STEP("connecting", reconnect_step_start, OP_STEP_OP_DEADLINE, .skip = no_restart),
    ATTACH_STEP("recording the address", save_step_start, OP_STEP_UNBOUNDED, .skip = no_restart),
    ATTACH_STEP("checking the mount point again", start_check, ENGINE_STEP_CONFIG_MS,
                .skip = no_restart),
};

static const struct op_step recover_steps[] = {
    ATTACH_STEP("stopping the container", start_stop, OP_STEP_OP_DEADLINE),
    ATTACH_STEP("starting the container", restart_step_start, OP_STEP_UNBOUNDED),
    ATTACH_STEP("connecting", reconnect_step_start, OP_STEP_OP_DEADLINE),
    ATTACH_STEP("recording the address", save_step_start, OP_STEP_UNBOUNDED),
};

static const struct op_step detach_steps[] = {
    ATTACH_STEP("reading the configuration", start_read, ENGINE_STEP_CONFIG_MS),
    ATTACH_STEP("recording the detach", start_record, OP_STEP_UNBOUNDED,
                .crash_done = "detach-recorded"),
    ATTACH_STEP("stopping the container", start_stop, OP_STEP_OP_DEADLINE,
                .crash_done = "detach-stopped"),
    ATTACH_STEP("detaching the volume", start_back, OP_STEP_OP_DEADLINE),
    ATTACH_STEP("removing the volume's line", start_unline, ENGINE_STEP_CONFIG_MS),
    ATTACH_STEP("starting the container", restart_step_start, OP_STEP_UNBOUNDED,
                .crash_done = "detach-started"),
    ATTACH_STEP("connecting", reconnect_step_start, OP_STEP_OP_DEADLINE),
    ATTACH_STEP("recording the address", save_step_start, OP_STEP_UNBOUNDED),
};

/* ---- outcome ---- */

static void attach_audit(const struct sandbox *sb, const struct attach_op *op,
                         const struct engine_error *err)
{
    struct audit_record rec = {
        .event = op->detach ? (err ? "sandbox.detach_failed" : "sandbox.detached")
                            : (err ? "sandbox.attach_failed" : "sandbox.attached"),
        .priority = err ? LOG_WARNING : LOG_INFO,
        .sandbox = sb->id,
        .vmid = sb->vmid,
        .node = sb->node,
        .caller_uid = AUDIT_NO_UID,
        .owner_uid = sb->owner_uid,
        .reason = err ? err->message : NULL,
    };

    audit_emit(&rec, "%s of volume '%s' %s sandbox %s (container %u on %s)%s%s",
               op->detach ? "detach" : "attach", op->name, op->detach ? "from" : "to", sb->id,
               sb->vmid, strna(sb->node), err ? " failed: " : "", err ? strna(err->message) : "");
}

/* The caller hears of the outcome; a destroy asked for meanwhile runs now. */
static void attach_finish(struct sandbox *sb, const struct engine_error *err)
{
    struct attach_op *op = TAKE_PTR(sb->attach_op);
    struct engine *e = sb->engine;

    sb->rolling_back = false;
    if (op->name[0])
        attach_audit(sb, op, err);
    if (op->detach && sb->detaching[0]) { /* a failure: the record forgets the intent */
        sb->detaching[0] = '\0';
        if (!op->stopped && !e->closing)
            (void)engine_save(sb, NULL, NULL);
    }
    if (err && !op->detach && op->cb) {
        /* a failure other than a refusal (those come before any write) may follow a move
         * that happened all the same (a lost answer): the sandbox keeps counting as one with
         * volumes (no snapshot) */
        sb->had_volumes = sb->had_volumes || err->kind != ENGINE_E_INVALID;
        sb->n_vol_mounts = sb->n_vol_attached;
    }
    if (err && op->stopped && !e->closing) {
        free(sb->error);
        sb->error = strdup(err->message ? err->message : "sandbox.detach failed");
        sandbox_set_state(sb, SANDBOX_FAILED);
    }
    if (op->cb)
        op->cb(err, sb, op->userdata);
    free(op);
    if (!e->closing && sb->state != SANDBOX_DESTROYING && sb->destroy_requested) {
        sb->destroy_requested = false;
        destroy_start(sb);
    }
    sandbox_unref(sb);
}

static void attach_failed(struct sandbox *sb, const struct engine_error *err)
{
    log_info(COMP, "%s: %s of volume '%s' failed: %s", sb->id,
             sb->attach_op->detach ? "detach" : "attach", sb->attach_op->name, strna(err->message));
    attach_finish(sb, err);
}

static void attach_done(struct sandbox *sb)
{
    log_info(COMP, "%s: volume '%s' %s", sb->id, sb->attach_op->name,
             sb->attach_op->detach ? "detached" : "attached");
    attach_finish(sb, NULL);
}

static const struct op_kind attach_kind = {
    .name = "attach",
    .steps = attach_steps,
    .n_steps = ELEMENTSOF(attach_steps),
    .fail = attach_failed,
    .done = attach_done,
};

static void recover_failed(struct sandbox *sb, const struct engine_error *err)
{
    log_warning(COMP, "%s: cannot apply a pending mount point: %s", sb->id, strna(err->message));
    attach_finish(sb, err);
}

static void recover_done(struct sandbox *sb)
{
    log_info(COMP, "%s: restarted; its pending mount point applied", sb->id);
    attach_finish(sb, NULL);
}

static const struct op_kind recover_kind = {
    .name = "attach",
    .steps = recover_steps,
    .n_steps = ELEMENTSOF(recover_steps),
    .fail = recover_failed,
    .done = recover_done,
};

static const struct op_kind detach_kind = {
    .name = "detach",
    .steps = detach_steps,
    .n_steps = ELEMENTSOF(detach_steps),
    .fail = attach_failed,
    .done = attach_done,
};

/* ---- entry points ---- */

static int attach_refused(struct engine *e, struct sandbox *sb, const char *name,
                          struct engine_error *ret_err)
{
    const struct sandbox *user;

    if (engine_refuse_unavailable(e, ret_err) < 0)
        return ret_err->error;
    if (sb->state != SANDBOX_READY || sb->destroy_requested || sb->pool_member)
        return engine_refuse_not_ready(ret_err, sb->state);
    if (sb->create_op || sb->resize_op || sb->snap_op || sb->tmpl_op || sb->fw_busy || sb->call ||
        sb->pause_op || sb->attach_op || sb->forks)
        return engine_refuse(ret_err, ENGINE_E_BUSY, -EBUSY,
                             "another operation on this sandbox is running", NULL);
    user = engine_volume_user(e, name, sb->owner_uid);
    if (user && user != sb)
        return engine_refuse(ret_err, ENGINE_E_INVALID, -EBUSY,
                             "the volume is attached to another sandbox", "volume");
    return 0;
}

static int op_begin(struct sandbox *sb, const struct attach_op *init, const struct op_kind *kind)
{
    struct attach_op *op = malloc(sizeof *op);

    if (!op)
        return -ENOMEM;
    *op = *init;
    sb->attach_op = op;
    sb->refs++;
    log_debug(COMP, "%s: %s of volume '%s'", sb->id, kind->name, op->name);
    op_step_run(sb, kind, ENGINE_ATTACH_TIMEOUT_MS);
    return 0;
}

/* ---- recovery: a mount point left pending ---- */

/* The check is two reads outside the driver (the sandbox takes other calls meanwhile);
 * only a pending mount point starts an operation. */
struct recover {
    struct sandbox *sb;
    unsigned n_held; /* the volume lines whose key is in the configuration */
    unsigned held[ENGINE_VOLUMES_MAX];
};

static void recover_end(struct recover *rc)
{
    sandbox_unref(rc->sb);
    free(rc);
}

/* Which of them are pending: not in the running configuration (current=1). */
static void on_current_config(const struct pve_result *res, void *userdata)
{
    struct recover *rc = userdata;
    struct sandbox *sb = rc->sb;
    struct engine_error err = {};
    unsigned i = 0;

    while (res->error >= 0 && i < rc->n_held && volume_config_has_mp(res->data, rc->held[i]))
        i++;
    if (res->error >= 0 && i < rc->n_held) {
        log_warning(COMP,
                    "%s: mount point mp%u of a volume is pending (a hot-plug that failed): "
                    "restarting the container",
                    sb->id, rc->held[i]);
        if (attach_refused(sb->engine, sb, "", &err) < 0 ||
            op_begin(sb, &(struct attach_op){.restart = true}, &recover_kind) < 0)
            log_warning(COMP, "%s: cannot restart it: %s", sb->id, strna(err.message));
    }
    recover_end(rc);
}

/* The volume lines of the container whose key is in its configuration, pending changes
 * merged in (GET .../config). */
static void on_merged_config(const struct pve_result *res, void *userdata)
{
    struct recover *rc = userdata;
    struct sandbox *sb = rc->sb;
    _cleanup_free_ struct marker_volume *mv = NULL;
    json_object *d = NULL;
    size_t n = 0;

    if (res->error >= 0 && json_object_object_get_ex(res->data, "description", &d) &&
        marker_volumes_parse(json_object_get_string(d), &mv, &n) >= 0)
        for (size_t i = 0; i < n && rc->n_held < ENGINE_VOLUMES_MAX; i++)
            if (volume_config_has_mp(res->data, mv[i].mp))
                rc->held[rc->n_held++] = mv[i].mp;
    if (rc->n_held > 0 && !sb->engine->closing && sb->state == SANDBOX_READY &&
        pve_config_get(sb->engine->pve, sb->node, sb->vmid, true, ENGINE_STEP_CONFIG_MS,
                       on_current_config, rc, NULL) >= 0)
        return;
    recover_end(rc);
}

void engine_detach_recover(struct sandbox *sb, const char *name)
{
    struct engine_error err = {};

    log_notice(COMP, "%s: finishing the detach of volume '%s' a restart interrupted", sb->id, name);
    if (engine_detach(sb->engine, sb, name, NULL, NULL, &err) < 0)
        log_warning(COMP, "%s: cannot finish the detach of volume '%s': %s", sb->id, name,
                    strna(err.message));
}

void engine_attach_recover(struct sandbox *sb)
{
    struct recover *rc = calloc(1, sizeof *rc);

    if (!rc)
        return;
    rc->sb = sb;
    sb->refs++;
    if (pve_config_get(sb->engine->pve, sb->node, sb->vmid, false, ENGINE_STEP_CONFIG_MS,
                       on_merged_config, rc, NULL) < 0)
        recover_end(rc);
}

int engine_attach(struct engine *e, struct sandbox *sb, const char *name, const char *path,
                  bool read_only, engine_sandbox_cb cb, void *userdata,
                  struct engine_error *ret_err)
{
    struct attach_op init = {.cb = cb, .userdata = userdata};
    struct engine_volume_mount *m;
    int r = attach_refused(e, sb, name, ret_err);

    if (r < 0)
        return r;
    for (size_t i = 0; i < sb->n_vol_mounts; i++)
        if (strcmp(sb->vol_mounts[i].name, name) == 0)
            return engine_refuse(ret_err, ENGINE_E_INVALID, -EBUSY,
                                 "the volume is attached to this sandbox already", "volume");
    if (sb->n_vol_mounts >= ENGINE_VOLUMES_MAX)
        return engine_refuse(ret_err, ENGINE_E_INVALID, -E2BIG,
                             "the sandbox has 8 volumes attached already", "volume");
    if (strlen(name) >= sizeof init.name || strlen(path) > ENGINE_VOLUME_PATH_MAX)
        return engine_refuse(ret_err, ENGINE_E_INVALID, -EINVAL, "invalid volume name or path",
                             "volume");
    m = realloc(sb->vol_mounts, (sb->n_vol_mounts + 1) * sizeof *m);
    if (!m)
        return engine_refuse_oom(ret_err);
    sb->vol_mounts = m;
    m = &sb->vol_mounts[sb->n_vol_mounts];
    *m = (struct engine_volume_mount){.read_only = read_only};
    snprintf(m->name, sizeof m->name, "%s", name);
    snprintf(m->path, sizeof m->path, "%s", path);
    snprintf(init.name, sizeof init.name, "%s", name);
    sb->n_vol_mounts++;
    if (op_begin(sb, &init, &attach_kind) < 0) {
        sb->n_vol_mounts--;
        return engine_refuse_oom(ret_err);
    }
    return 0;
}

int engine_detach(struct engine *e, struct sandbox *sb, const char *name, engine_sandbox_cb cb,
                  void *userdata, struct engine_error *ret_err)
{
    struct attach_op init = {.detach = true, .cb = cb, .userdata = userdata};
    int r = attach_refused(e, sb, name, ret_err);

    if (r < 0)
        return r;
    if (strlen(name) >= sizeof init.name)
        return engine_refuse(ret_err, ENGINE_E_INVALID, -EINVAL, "invalid volume name", "volume");
    snprintf(init.name, sizeof init.name, "%s", name);
    return op_begin(sb, &init, &detach_kind) < 0 ? engine_refuse_oom(ret_err) : 0;
}
