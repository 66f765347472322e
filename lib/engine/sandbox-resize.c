/* Live changes of a running sandbox: sandbox.resize (cores and memory applied to the running
 * container, the disk grown) and the hand-over of a warm pool member to its new owner (the
 * marker, hostname, size and internet group, between two registry saves). Two step tables run
 * by the operation driver (op-step.h); each row is skipped when it has nothing to do.
 * hostname is a fastplug option: Proxmox writes it to the config only and a running container
 * keeps its name until its next start, so a changed hostname is also set inside over SSH
 * (hostname and /etc/hostname). A bandwidth cap is rate= in net0, which Proxmox applies to a
 * running container at once: net0 is read, then written with the new rate= in the same
 * configuration change. See sandbox.h. */
#include "macro.h"

#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "op-step.h"
#include "pve.h"
#include "registry.h"
#include "sandbox-internal.h"
#include "sandbox-resize.h"
#include "sshexec.h"
#include "testhook.h"

#define COMP "sandbox"

static bool skip_config(const struct sandbox *sb)
{
    const struct resize_op *op = sb->resize_op;

    return op->cores <= 0 && op->memory_mb <= 0 && !op->hostname && !op->description && !op->net0;
}

static bool skip_net_get(const struct sandbox *sb)
{
    return sb->resize_op->net_rate_mbps < 0;
}

static void on_net_got(const struct pve_result *res, void *userdata)
{
    struct sandbox *sb = userdata;
    struct resize_op *op = sb->resize_op;
    json_object *net0 = NULL;
    struct engine_error err = {
        .kind = ENGINE_E_PROXMOX, .error = -ENOENT, .message = "the container has no net0"};

    op->call = NULL;
    if (res->error >= 0) {
        if (!res->data || !json_object_object_get_ex(res->data, "net0", &net0)) {
            op_step_done(sb, &err);
            return;
        }
        if (net0_with_rate(json_object_get_string(net0), (unsigned)op->net_rate_mbps, &op->net0) <
            0) {
            err = (struct engine_error){
                .kind = ENGINE_E_INTERNAL, .error = -ENOMEM, .message = "out of memory"};
            op_step_done(sb, &err);
            return;
        }
    }
    op_step_pve_done(sb, res);
}

static int start_net_get(struct sandbox *sb, uint64_t timeout_ms, const char **ret_fail)
{
    return pve_config_get(sb->engine->pve, sb->node, sb->vmid, false, timeout_ms, on_net_got, sb,
                          &sb->resize_op->call);
}

static bool skip_disk(const struct sandbox *sb)
{
    return sb->resize_op->disk_gb <= 0;
}

static bool skip_fw(const struct sandbox *sb)
{
    return !sb->resize_op->internet;
}

static bool skip_hostname(const struct sandbox *sb)
{
    return !sb->resize_op->hostname_inside;
}

/* What Proxmox applied is what the sandbox has now. */
static void on_config_changed(const struct pve_result *res, void *userdata)
{
    struct sandbox *sb = userdata;
    struct resize_op *op = sb->resize_op;

    op->call = NULL;
    if (res->error >= 0) {
        if (op->cores > 0)
            sb->cores = (unsigned)op->cores;
        if (op->memory_mb > 0)
            sb->memory_mb = (unsigned)op->memory_mb;
        if (op->net0)
            sb->net_rate_mbps = (unsigned)op->net_rate_mbps;
        if (op->hostname) {
            free(sb->hostname);
            sb->hostname = TAKE_PTR(op->hostname);
            op->hostname_inside = true;
        }
    }
    op_step_pve_done(sb, res);
}

static int start_config(struct sandbox *sb, uint64_t timeout_ms, const char **ret_fail)
{
    struct resize_op *op = sb->resize_op;
    _cleanup_json_ json_object *p = json_object_new_object();

    if (!p)
        return -ENOMEM;
    if (op->cores > 0)
        json_object_object_add(p, "cores", json_object_new_int(op->cores));
    if (op->memory_mb > 0)
        json_object_object_add(p, "memory", json_object_new_int(op->memory_mb));
    if (op->hostname)
        json_object_object_add(p, "hostname", json_object_new_string(op->hostname));
    if (op->description)
        json_object_object_add(p, "description", json_object_new_string(op->description));
    if (op->net0)
        json_object_object_add(p, "net0", json_object_new_string(op->net0));
    return pve_config_put(sb->engine->pve, sb->node, sb->vmid, p, timeout_ms, on_config_changed, sb,
                          &op->call);
}

static void on_disk_grown(const struct pve_result *res, void *userdata)
{
    struct sandbox *sb = userdata;
    struct resize_op *op = sb->resize_op;

    op->call = NULL;
    if (res->error >= 0)
        sb->disk_gb = (unsigned)op->disk_gb;
    op_step_pve_done(sb, res);
}

static int start_disk(struct sandbox *sb, uint64_t timeout_ms, const char **ret_fail)
{
    struct resize_op *op = sb->resize_op;
    char size[32];

    snprintf(size, sizeof size, "%dG", op->disk_gb);
    return pve_resize(sb->engine->pve, sb->node, sb->vmid, "rootfs", size, timeout_ms,
                      on_disk_grown, sb, &op->call);
}

static void on_fw_added(const struct pve_result *res, void *userdata)
{
    struct sandbox *sb = userdata;

    sb->resize_op->call = NULL;
    if (res->error >= 0)
        sb->internet = true;
    op_step_pve_done(sb, res);
}

static int start_fw(struct sandbox *sb, uint64_t timeout_ms, const char **ret_fail)
{
    struct engine *e = sb->engine;

    return pve_fw_group_set(e->pve, sb->node, sb->vmid, e->cfg->proxmox.internet_group, true,
                            timeout_ms, on_fw_added, sb, &sb->resize_op->call);
}

/* The name in /etc/hostname and the kernel's, as pve-container's setup writes them at start
 * ($1: the hostname, a validated DNS name). */
#define HOSTNAME_SCRIPT "printf '%s\\n' \"$1\" > /etc/hostname && hostname \"${1%%.*}\""

static void on_hostname_set(struct sshexec *x, int error, struct sshexec_result *res,
                            void *userdata)
{
    struct sandbox *sb = userdata;
    char buf[256];
    struct engine_error err = {.kind = ENGINE_E_SSH, .error = error, .message = buf};

    if (error == 0 && !res->timed_out && res->exit_code == 0) {
        op_step_done(sb, NULL);
        return;
    }
    if (error < 0)
        snprintf(buf, sizeof buf, "setting the hostname inside failed: %s", strerror(-error));
    else {
        snprintf(buf, sizeof buf, "setting the hostname inside failed (exit %d): %.150s",
                 res->exit_code, res->err ? res->err : "");
        err.error = -EPROTO;
    }
    op_step_done(sb, &err);
}

static int start_hostname(struct sandbox *sb, uint64_t timeout_ms, const char **ret_fail)
{
    const char *argv[] = {"sh", "-c", HOSTNAME_SCRIPT, "sh", sb->hostname, NULL};
    const struct sshexec_params p = {
        .argv = argv,
        .timeout_ms = timeout_ms,
        .container_pid_namespace = true,
    };

    return sshexec_start(sb->pool, &p, on_hostname_set, sb, NULL);
}

/* A registry save of a hand-over completed (its new owner, then READY). */
static void on_take_saved(int r, void *userdata)
{
    struct sandbox *sb = userdata;
    struct engine_error err = {
        .kind = ENGINE_E_INTERNAL, .error = r, .message = "cannot write the registry record"};

    sb->refs--;
    op_step_done(sb, r < 0 ? &err : NULL);
}

/* Write-ahead: the new owner is durable (state CONFIGURING) before Proxmox hears of it, so a
 * crash in between leaves a record that reconcile rolls back. */
static int start_take_record(struct sandbox *sb, uint64_t timeout_ms, const char **ret_fail)
{
    int r;

    sb->refs++;
    r = sandbox_set_state_saved(sb, SANDBOX_CONFIGURING, on_take_saved, sb);
    if (r < 0)
        sb->refs--;
    return r;
}

/* A hand-over replies once its READY record is durable (a restart then re-attaches it for its
 * new owner). */
static int start_take_ready(struct sandbox *sb, uint64_t timeout_ms, const char **ret_fail)
{
    int r;

    sb->refs++;
    r = sandbox_set_state_saved(sb, SANDBOX_READY, on_take_saved, sb);
    if (r < 0)
        sb->refs--;
    return r;
}

/* A live change's row: each is skipped when it has nothing to do. */
#define CHANGE_STEP(what_, start_, skip_, ...)                                                     \
    {                                                                                              \
        .what = what_, .start = start_, .cap_ms = ENGINE_STEP_CONFIG_MS,                           \
        .fail = "cannot issue the change", .skip = skip_, __VA_ARGS__                              \
    }

static const struct op_step resize_steps[] = {
    CHANGE_STEP("reading the network device", start_net_get, skip_net_get),
    CHANGE_STEP("changing the configuration", start_config, skip_config),
    CHANGE_STEP("growing the disk", start_disk, skip_disk),
    CHANGE_STEP("adding the internet rule", start_fw, skip_fw),
    CHANGE_STEP("setting the hostname inside", start_hostname, skip_hostname),
};

static const struct op_step take_steps[] = {
    {.what = "recording the new owner",
     .start = start_take_record,
     .cap_ms = OP_STEP_UNBOUNDED,
     .fail = "cannot write the registry record"},
    CHANGE_STEP("reading the network device", start_net_get, skip_net_get),
    CHANGE_STEP("changing the configuration", start_config, skip_config,
                .crash_done = "pool-take-configured"),
    CHANGE_STEP("growing the disk", start_disk, skip_disk),
    CHANGE_STEP("adding the internet rule", start_fw, skip_fw),
    CHANGE_STEP("setting the hostname inside", start_hostname, skip_hostname),
    {.what = "recording the sandbox as ready",
     .start = start_take_ready,
     .cap_ms = OP_STEP_UNBOUNDED,
     .fail = "cannot write the registry record"},
};

/* The caller hears of the outcome; a destroy asked for meanwhile runs now (once an internet
 * change still running ended: lib/engine/sandbox-io.c starts it then). */
static void op_finish(struct sandbox *sb, const struct engine_error *err)
{
    struct resize_op *op = TAKE_PTR(sb->resize_op);
    struct engine *e = sb->engine;
    bool take = op->take;

    op->cb(err, sb, op->userdata);
    free(op->hostname);
    free(op->description);
    free(op->net0);
    free(op);
    /* A hand-over that failed is destroyed: nobody heard of the sandbox. */
    if (!e->closing && sb->state != SANDBOX_DESTROYING && !sb->fw_busy &&
        (sb->destroy_requested || (err && take))) {
        sb->destroy_requested = false;
        destroy_start(sb);
    }
    sandbox_unref(sb);
}

/* What succeeded is in sb; a resize saves it (a hand-over saved it with READY). */
static void resize_done(struct sandbox *sb)
{
    if (!sb->resize_op->take)
        (void)sandbox_save(sb, save_logged, NULL);
    op_finish(sb, NULL);
}

static const struct op_kind resize_kind = {
    .name = "resize",
    .steps = resize_steps,
    .n_steps = ELEMENTSOF(resize_steps),
    .fail = op_finish,
    .done = resize_done,
};

static const struct op_kind take_kind = {
    .name = "pool hand-over",
    .steps = take_steps,
    .n_steps = ELEMENTSOF(take_steps),
    .fail = op_finish,
    .done = resize_done,
};

int resize_op_start(struct sandbox *sb, struct resize_op *op)
{
    assert(!sb->resize_op && !op->take);
    sb->resize_op = op;
    sb->refs++;
    op_step_run(sb, &resize_kind, OP_NO_DEADLINE);
    return 0;
}

int resize_op_take(struct sandbox *sb, struct resize_op *op)
{
    assert(!sb->resize_op && op->take);
    sb->resize_op = op;
    sb->refs++;
    op_step_run(sb, &take_kind, OP_NO_DEADLINE);
    return 0;
}

int engine_resize(struct engine *e, struct sandbox *sb, const struct engine_resize_sizes *sz,
                  engine_sandbox_cb cb, void *userdata, struct engine_error *ret_err)
{
    int cores = sz->cores, memory_mb = sz->memory_mb, disk_gb = sz->disk_gb;
    struct resize_op *op;
    int r;

    if (e->closing)
        return engine_refuse(ret_err, ENGINE_E_SHUTDOWN, -ESHUTDOWN, "the daemon is shutting down",
                             NULL);
    if (sb->state != SANDBOX_READY || sb->destroy_requested)
        return engine_refuse_not_ready(ret_err, sb->state);
    if (sb->create_op) /* READY, its record being saved: its create's steps still run */
        return engine_refuse(ret_err, ENGINE_E_BUSY, -EBUSY, "the sandbox's create is finishing",
                             NULL);
    if (sb->resize_op)
        return engine_refuse(ret_err, ENGINE_E_BUSY, -EBUSY, "a resize of this sandbox is running",
                             NULL);
    if (sb->snap_op)
        return engine_refuse(ret_err, ENGINE_E_BUSY, -EBUSY,
                             "a snapshot operation on this sandbox is running", NULL);
    if (sb->tmpl_op)
        return engine_refuse(ret_err, ENGINE_E_BUSY, -EBUSY, "the sandbox is becoming a template",
                             NULL);
    if (sb->attach_op)
        return engine_refuse(ret_err, ENGINE_E_BUSY, -EBUSY,
                             "a volume attach or detach on this sandbox is running", NULL);
    r = engine_check_caps(e, NULL, cores, memory_mb, disk_gb, ret_err);
    if (r >= 0)
        r = engine_check_net_rate(e, sz->net_rate_mbps, ret_err);
    if (r < 0)
        return r;
    if (disk_gb > 0 && (unsigned)disk_gb < sb->disk_gb) {
        *ret_err = (struct engine_error){.kind = ENGINE_E_INVALID,
                                         .error = -EINVAL,
                                         .message = "disk_gb is smaller than the sandbox's disk "
                                                    "(disks only grow)",
                                         .param = "disk_gb",
                                         .limit = sb->disk_gb};
        return -EINVAL;
    }
    op = calloc(1, sizeof *op);
    if (!op)
        return engine_refuse_oom(ret_err);
    op->cores = cores > 0 && (unsigned)cores != sb->cores ? cores : -1;
    op->memory_mb = memory_mb > 0 && (unsigned)memory_mb != sb->memory_mb ? memory_mb : -1;
    op->disk_gb = disk_gb > 0 && (unsigned)disk_gb > sb->disk_gb ? disk_gb : -1;
    op->net_rate_mbps = sz->net_rate_mbps >= 0 && (unsigned)sz->net_rate_mbps != sb->net_rate_mbps
                            ? sz->net_rate_mbps
                            : -1;
    op->cb = cb;
    op->userdata = userdata;
    log_debug(COMP, "%s: resize cores=%d memory_mb=%d disk_gb=%d net_rate_mbps=%d", sb->id,
              op->cores, op->memory_mb, op->disk_gb, op->net_rate_mbps);
    return resize_op_start(sb, op);
}
