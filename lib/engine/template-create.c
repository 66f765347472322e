/* template.create: a READY sandbox's container becomes a template. One table of steps on the
 * operation driver (op-step.h): stop, write the template's marker, convert (POST .../template),
 * wait until Proxmox says template: 1; then the sandbox ends without a destroy (its container
 * is the template now). See template-api.h. */
#include "macro.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hostkey.h"
#include "log.h"
#include "op-step.h"
#include "pve.h"
#include "registry.h"
#include "sandbox-internal.h"
#include "template-api.h"
#include "template-internal.h"
#include "testhook.h"

#define COMP "template"
#define CONVERT_POLL_MS 250u

struct tmpl_op {
    struct engine_template t; /* what it becomes (name, owner, origin, node, vmid, key) */
    engine_json_cb cb;
    void *userdata;
};

static void on_stopped(const struct pve_result *res, void *userdata)
{
    struct sandbox *sb = userdata;

    sb->call = NULL;
    if (res->error == -ECANCELED || sb->engine->closing)
        op_step_pve_done(sb, res);
    else /* not running, or a stop that failed: the conversion refuses a running one */
        op_step_done(sb, NULL);
}

static int start_stop(struct sandbox *sb, uint64_t timeout_ms, const char **ret_fail)
{
    sandbox_close_ssh(sb);
    /* a hard stop loses nothing written: the container's file system is the host's */
    return pve_stop(sb->engine->pve, sb->node, sb->vmid, timeout_ms, on_stopped, sb, &sb->call);
}

static int start_mark(struct sandbox *sb, uint64_t timeout_ms, const char **ret_fail)
{
    _cleanup_json_ json_object *p = NULL;
    _cleanup_free_ char *desc = NULL;
    int r = engine_rt_marker(sb->engine, &sb->tmpl_op->t, &desc);

    if (r < 0)
        return r;
    p = json_object_new_object();
    json_object_object_add(p, "description", json_object_new_string(desc));
    return pve_config_put(sb->engine->pve, sb->node, sb->vmid, p, timeout_ms, op_step_pve, sb,
                          &sb->call);
}

static int start_convert(struct sandbox *sb, uint64_t timeout_ms, const char **ret_fail)
{
    return pve_template(sb->engine->pve, sb->node, sb->vmid, timeout_ms, op_step_pve, sb,
                        &sb->call);
}

void engine_template_on_convert_status(const struct pve_result *res, void *userdata)
{
    struct sandbox *sb = userdata;
    json_object *v;

    sb->call = NULL;
    if (res->error < 0) {
        op_step_pve_done(sb, res);
        return;
    }
    if (res->data && json_object_object_get_ex(res->data, "template", &v) &&
        json_object_get_int(v) == 1) {
        op_step_done(sb, NULL);
        return;
    }
    op_step_again(sb, CONVERT_POLL_MS);
}

static int start_wait(struct sandbox *sb, uint64_t timeout_ms, const char **ret_fail)
{
    return pve_status_current(sb->engine->pve, sb->node, sb->vmid, timeout_ms,
                              engine_template_on_convert_status, sb, &sb->call);
}

static const struct op_step tmpl_steps[] = {
    {.what = "stopping the sandbox",
     .start = start_stop,
     .cap_ms = OP_STEP_OP_DEADLINE,
     .fail = "cannot stop the sandbox",
     .crash_sent = "template-stop-sent"},
    {.what = "writing the template's marker",
     .start = start_mark,
     .cap_ms = OP_STEP_OP_DEADLINE,
     .fail = "cannot write the template's marker",
     .crash_done = "template-marked"},
    {.what = "converting the container",
     .start = start_convert,
     .cap_ms = OP_STEP_OP_DEADLINE,
     .fail = "cannot start the Proxmox conversion",
     .crash_sent = "template-convert-sent"},
    {.what = "waiting for the conversion",
     .start = start_wait,
     .cap_ms = OP_STEP_OP_DEADLINE,
     .fail = "cannot read the container's status",
     .crash_done = "template-converted"},
};

static void tmpl_finish(struct sandbox *sb, const struct engine_error *err, json_object *result)
{
    struct tmpl_op *op = TAKE_PTR(sb->tmpl_op);
    struct engine *e = sb->engine;

    op->cb(err, err ? NULL : result, op->userdata);
    json_object_put(op->t.defaults);
    free(op);
    if (!err) {
        sandbox_unlink(sb);
    } else if (!e->closing && sb->state != SANDBOX_DESTROYING && sb->destroy_requested) {
        sb->destroy_requested = false;
        destroy_start(sb);
    }
    sandbox_unref(sb);
}

static void tmpl_failed(struct sandbox *sb, const struct engine_error *err)
{
    struct engine *e = sb->engine;

    log_info(COMP, "%s: template.create '%s' failed: %s", sb->id, sb->tmpl_op->t.name,
             strna(err->message));
    if (!e->closing) {
        free(sb->error);
        sb->error = strdup(err->message ? err->message : "template.create failed");
        sandbox_set_state(sb, SANDBOX_FAILED);
    }
    tmpl_finish(sb, err, NULL);
}

static void tmpl_done(struct sandbox *sb)
{
    struct engine *e = sb->engine;
    struct tmpl_op *op = sb->tmpl_op;
    _cleanup_json_ json_object *o = json_object_new_object();
    struct engine_error err;
    int r = engine_rt_add(e, &op->t);

    if (r < 0 && r != -EEXIST) {
        engine_refuse(&err, ENGINE_E_INTERNAL, r, "out of memory", NULL);
        tmpl_finish(sb, &err, NULL);
        return;
    }
    engine_audit_template(e, "template.create", &op->t, sb->owner_uid);
    log_info(COMP, "%s: became template '%s' (container %u on %s)", sb->id, op->t.name, sb->vmid,
             sb->node);
    /* the sandbox ends: its record goes, its container stays (the template) */
    engine_destroy_reason(sb, "became a template", (int64_t)sb->owner_uid);
    sandbox_set_state(sb, SANDBOX_GONE);
    tomb_add(e, sb);
    if (e->reg)
        (void)registry_remove_async(e->reg, e->loop, sb->id, save_logged, NULL);
    json_object_object_add(o, "template", engine_template_json(e, op->t.name));
    tmpl_finish(sb, NULL, o);
}

static const struct op_kind tmpl_kind = {
    .name = "template.create",
    .steps = tmpl_steps,
    .n_steps = ELEMENTSOF(tmpl_steps),
    .destroyed = "the sandbox was destroyed while it became a template",
    .fail = tmpl_failed,
    .done = tmpl_done,
};

/* How many templates uid made from its sandboxes, and their disks together (GB). */
static unsigned templates_of(const struct engine *e, uid_t uid, uint64_t *ret_disk_gb)
{
    unsigned n = 0;

    *ret_disk_gb = 0;
    for (size_t i = 0; i < e->n_rt; i++)
        if (e->rt[i]->owner_uid == uid) {
            n++;
            *ret_disk_gb += e->rt[i]->disk_gb;
        }
    return n;
}

/* The refusals of template.create: changes nothing when it returns < 0. */
static int create_refused(struct engine *e, struct sandbox *sb, const char *name,
                          struct engine_error *ret_err)
{
    unsigned max = e->cfg->max_templates_per_uid;
    uint64_t disk_gb;

    if (engine_refuse_unavailable(e, ret_err) < 0)
        return ret_err->error;
    if (!name || !id_is_valid(name) || strlen(name) > PARAMS_TEMPLATE_MAX)
        return engine_refuse(ret_err, ENGINE_E_INVALID, -EINVAL,
                             "may only contain a-z, 0-9 and '-'", "name");
    if (engine_template_find(e, name) || config_template_find(e->cfg, name))
        return engine_refuse(ret_err, ENGINE_E_INVALID, -EEXIST, "a template of that name exists",
                             "name");
    if (templates_of(e, sb->owner_uid, &disk_gb) >= max)
        return engine_refuse(ret_err, ENGINE_E_QUOTA, -EDQUOT,
                             "too many templates for this uid ([templates] max_templates_per_uid)",
                             NULL);
    if (disk_gb + sb->disk_gb > e->cfg->max_template_disk_gb_per_uid)
        return engine_refuse(ret_err, ENGINE_E_QUOTA, -EDQUOT,
                             "the disks of this uid's templates would exceed [templates] "
                             "max_template_disk_gb_per_uid",
                             NULL);
    if (sb->state != SANDBOX_READY || sb->destroy_requested)
        return engine_refuse_not_ready(ret_err, sb->state);
    if (sb->pool_member || !sb->vmid || !sb->node)
        return engine_refuse(ret_err, ENGINE_E_STATE, -EINVAL, "not a sandbox of a caller", NULL);
    if (sandbox_has_volumes(sb))
        return engine_refuse(ret_err, ENGINE_E_INVALID, -EINVAL, SANDBOX_VOLUMES_REFUSED, "id");
    if (sb->create_op || sb->resize_op || sb->snap_op || sb->tmpl_op || sb->fw_busy || sb->call ||
        sb->rolling_back)
        return engine_refuse(ret_err, ENGINE_E_BUSY, -EBUSY,
                             "another operation on this sandbox is running", NULL);
    return 0;
}

int engine_template_create(struct engine *e, struct sandbox *sb, const char *name,
                           json_object *defaults, engine_json_cb cb, void *userdata,
                           struct engine_error *ret_err)
{
    struct tmpl_op *op;
    int r = create_refused(e, sb, name, ret_err);

    if (r < 0)
        return r;
    op = calloc(1, sizeof *op);
    if (!op)
        return engine_refuse_oom(ret_err);
    *op = (struct tmpl_op){.cb = cb, .userdata = userdata};
    op->t = (struct engine_template){.vmid = sb->vmid,
                                     .runtime = true,
                                     .owner_uid = sb->owner_uid,
                                     .created_at = (int64_t)time(NULL),
                                     .disk_gb = sb->disk_gb};
    if (defaults && json_object_object_length(defaults) > 0)
        op->t.defaults = json_object_get(defaults);
    snprintf(op->t.name, sizeof op->t.name, "%s", name);
    snprintf(op->t.origin, sizeof op->t.origin, "%s", sb->id);
    snprintf(op->t.home, sizeof op->t.home, "%s", sb->node);
    if (sb->host_key[0] && hostkey_pin_to_hex(sb->host_key, op->t.hostkey_hex) < 0)
        op->t.hostkey_hex[0] = '\0';
    op->t.pins = sandbox_template(sb)->pins; /* borrowed: without a key of its own ([ssh] rekey
                                              * off), its clones start with its template's */
    sb->tmpl_op = op;
    sb->refs++;
    log_info(COMP, "%s: becoming template '%s'", sb->id, name);
    op_step_run(sb, &tmpl_kind, ENGINE_TEMPLATE_TIMEOUT_MS);
    return 0;
}
