/* Live changes of a running sandbox: sandbox.resize (cores and memory applied to the running
 * container, the disk grown) and the hand-over of a warm pool member to its new owner (the
 * marker, hostname, size and internet group). One step table, run in order; each row is
 * skipped when it has nothing to do. hostname is a fastplug option: Proxmox writes it to the
 * config only and a running container keeps its name until its next start, so a changed
 * hostname is also set inside over SSH (hostname and /etc/hostname). See sandbox.h. */
#include "macro.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "pve.h"
#include "registry.h"
#include "sandbox-internal.h"
#include "sandbox-resize.h"
#include "sshexec.h"
#include "testhook.h"

#define COMP "sandbox"

struct resize_step {
    const char *what;
    bool (*skip)(const struct resize_op *op);
    int (*start)(struct sandbox *sb, struct resize_op *op);
};

static bool skip_config(const struct resize_op *op)
{
    return op->cores <= 0 && op->memory_mb <= 0 && !op->hostname && !op->description;
}

static bool skip_disk(const struct resize_op *op)
{
    return op->disk_gb <= 0;
}

static bool skip_fw(const struct resize_op *op)
{
    return !op->internet;
}

static bool skip_hostname(const struct resize_op *op)
{
    return !op->hostname_inside;
}

static void on_pve(const struct pve_result *res, void *userdata);
static void step_done(struct sandbox *sb);
static void op_end(struct sandbox *sb, const struct engine_error *err);

static int start_config(struct sandbox *sb, struct resize_op *op)
{
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
    return pve_config_put(sb->engine->pve, sb->node, sb->vmid, p, ENGINE_STEP_CONFIG_MS, on_pve, sb,
                          &op->call);
}

static int start_disk(struct sandbox *sb, struct resize_op *op)
{
    char size[32];

    snprintf(size, sizeof size, "%dG", op->disk_gb);
    return pve_resize(sb->engine->pve, sb->node, sb->vmid, "rootfs", size, ENGINE_STEP_CONFIG_MS,
                      on_pve, sb, &op->call);
}

static int start_fw(struct sandbox *sb, struct resize_op *op)
{
    struct engine *e = sb->engine;

    return pve_fw_group_set(e->pve, sb->node, sb->vmid, e->cfg->proxmox.internet_group, true,
                            ENGINE_STEP_CONFIG_MS, on_pve, sb, &op->call);
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
        step_done(sb);
        return;
    }
    if (error < 0)
        snprintf(buf, sizeof buf, "setting the hostname inside failed: %s", strerror(-error));
    else {
        snprintf(buf, sizeof buf, "setting the hostname inside failed (exit %d): %.150s",
                 res->exit_code, res->err ? res->err : "");
        err.error = -EPROTO;
    }
    op_end(sb, &err);
}

static int start_hostname(struct sandbox *sb, struct resize_op *op)
{
    const char *argv[] = {"sh", "-c", HOSTNAME_SCRIPT, "sh", sb->hostname, NULL};
    const struct sshexec_params p = {
        .argv = argv,
        .timeout_ms = ENGINE_STEP_CONFIG_MS,
        .container_pid_namespace = true,
    };

    return sshexec_start(sb->pool, &p, on_hostname_set, sb, NULL);
}

static const struct resize_step resize_steps[] = {
    {"changing the configuration", skip_config, start_config},
    {"growing the disk", skip_disk, start_disk},
    {"adding the internet rule", skip_fw, start_fw},
    {"setting the hostname inside", skip_hostname, start_hostname},
};

static void op_finish(struct sandbox *sb, const struct engine_error *err);

static void on_take_saved(int r, void *userdata)
{
    struct sandbox *sb = userdata;
    struct engine_error err = {
        .kind = ENGINE_E_INTERNAL, .error = r, .message = "cannot write the registry record"};

    sb->refs--;
    op_finish(sb, r < 0 && !sb->engine->closing ? &err : NULL);
}

/* The op is over: what succeeded is in sb and saved. A hand-over replies once its READY
 * record is durable (a restart then re-attaches it for its new owner). */
static void op_end(struct sandbox *sb, const struct engine_error *err)
{
    struct resize_op *op = sb->resize_op;
    struct engine *e = sb->engine;

    if (!err && !e->closing && op->take) {
        sb->refs++;
        if (sandbox_set_state_saved(sb, SANDBOX_READY, on_take_saved, sb) == 0)
            return;
        sb->refs--;
    } else if (!err && !e->closing)
        (void)sandbox_save(sb, save_logged, NULL);
    op_finish(sb, err);
}

/* The caller hears of the outcome; a destroy asked for meanwhile runs now. */
static void op_finish(struct sandbox *sb, const struct engine_error *err)
{
    struct resize_op *op = TAKE_PTR(sb->resize_op);
    struct engine *e = sb->engine;

    bool take = op->take;

    op->cb(err, sb, op->userdata);
    free(op->hostname);
    free(op->description);
    free(op);
    /* A hand-over that failed is destroyed: nobody heard of the sandbox. */
    if (!e->closing && sb->state != SANDBOX_DESTROYING &&
        (sb->destroy_requested || (err && take))) {
        sb->destroy_requested = false;
        destroy_start(sb);
    }
    sandbox_unref(sb);
}

static void step_run(struct sandbox *sb)
{
    struct resize_op *op = sb->resize_op;

    for (; op->step < ELEMENTSOF(resize_steps); op->step++) {
        const struct resize_step *s = &resize_steps[op->step];
        int r;

        if (s->skip(op))
            continue;
        r = s->start(sb, op);
        if (r < 0) {
            struct engine_error err = {
                .kind = ENGINE_E_INTERNAL, .error = r, .message = "cannot issue the change"};
            op_end(sb, &err);
        }
        return;
    }
    op_end(sb, NULL);
}

static void on_pve(const struct pve_result *res, void *userdata)
{
    struct sandbox *sb = userdata;
    struct resize_op *op = sb->resize_op;
    struct engine_error err;

    op->call = NULL;
    if (res->error < 0) {
        error_from_pve(res, sb->engine->closing, &err);
        op_end(sb, &err);
        return;
    }
    /* What Proxmox applied is what the sandbox has now. */
    if (op->step == 0) {
        if (op->cores > 0)
            sb->cores = (unsigned)op->cores;
        if (op->memory_mb > 0)
            sb->memory_mb = (unsigned)op->memory_mb;
        if (op->hostname) {
            free(sb->hostname);
            sb->hostname = TAKE_PTR(op->hostname);
            op->hostname_inside = true;
        }
        if (op->take)
            test_crash_point("pool-take-configured");
    } else if (op->step == 1)
        sb->disk_gb = (unsigned)op->disk_gb;
    else if (op->step == 2)
        sb->internet = true;
    step_done(sb);
}

/* A step succeeded: the next one. */
static void step_done(struct sandbox *sb)
{
    if (sb->engine->closing) {
        struct engine_error e2 = {.kind = ENGINE_E_SHUTDOWN,
                                  .error = -ESHUTDOWN,
                                  .message = "the daemon is shutting down"};
        op_end(sb, &e2);
        return;
    }
    sb->resize_op->step++;
    step_run(sb);
}

int resize_op_start(struct sandbox *sb, struct resize_op *op)
{
    sb->resize_op = op;
    sb->refs++;
    step_run(sb);
    return 0;
}

static void on_take_recorded(int r, void *userdata)
{
    struct sandbox *sb = userdata;
    struct engine_error err = {
        .kind = ENGINE_E_INTERNAL, .error = r, .message = "cannot write the registry record"};

    if (r < 0 || sb->engine->closing) {
        if (sb->engine->closing)
            err = (struct engine_error){.kind = ENGINE_E_SHUTDOWN,
                                        .error = -ESHUTDOWN,
                                        .message = "the daemon is shutting down"};
        op_end(sb, &err);
        return;
    }
    step_run(sb);
}

int resize_op_take(struct sandbox *sb, struct resize_op *op)
{
    int r;

    sb->resize_op = op;
    sb->refs++;
    /* Write-ahead: the new owner is durable (state CONFIGURING) before Proxmox hears of it,
     * so a crash in between leaves a record that reconcile rolls back. */
    r = sandbox_set_state_saved(sb, SANDBOX_CONFIGURING, on_take_recorded, sb);
    if (r < 0) {
        struct engine_error err = {
            .kind = ENGINE_E_INTERNAL, .error = r, .message = "cannot write the registry record"};

        op_end(sb, &err);
    }
    return 0;
}

int engine_resize(struct engine *e, struct sandbox *sb, int cores, int memory_mb, int disk_gb,
                  engine_sandbox_cb cb, void *userdata, struct engine_error *ret_err)
{
    struct resize_op *op;
    int r;

    if (e->closing)
        return engine_refuse(ret_err, ENGINE_E_SHUTDOWN, -ESHUTDOWN, "the daemon is shutting down",
                             NULL);
    if (sb->state != SANDBOX_READY || sb->destroy_requested)
        return engine_refuse_not_ready(ret_err, sb->state);
    if (sb->resize_op)
        return engine_refuse(ret_err, ENGINE_E_BUSY, -EBUSY, "a resize of this sandbox is running",
                             NULL);
    r = engine_check_caps(e, NULL, cores, memory_mb, disk_gb, ret_err);
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
    op->cb = cb;
    op->userdata = userdata;
    log_debug(COMP, "%s: resize cores=%d memory_mb=%d disk_gb=%d", sb->id, op->cores, op->memory_mb,
              op->disk_gb);
    return resize_op_start(sb, op);
}
