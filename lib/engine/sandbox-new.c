/* A new sandbox filled from its create's options, what a create refuses up front, and a fork
 * child's part of its create (its source: the parent's snapshot). Used by sandbox-create.c. */
#include "macro.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pve.h"
#include "sandbox-internal.h"
#include "sandbox-pause.h"
#include "volume.h"

/* Fills a new sandbox from opts; the caller checked quota and ttl. */
int create_sandbox_new(struct engine *e, const struct sandbox_create_opts *opts, int64_t ttl,
                       const char *node, struct sandbox **ret)
{
    const struct config_sandbox *cs = &e->cfg->sandbox;
    struct sandbox *sb;
    int r;

    sb = calloc(1, sizeof *sb);
    if (!sb)
        return -ENOMEM;
    r = id_random(sb->id, sizeof sb->id, "sb-");
    if (r >= 0)
        r = labels_copy(opts->labels, &sb->labels);
    if (r >= 0)
        r = env_copy(opts->env, &sb->env);
    if (r >= 0 && opts->n_volumes > 0) {
        sb->vol_mounts = calloc(opts->n_volumes, sizeof *sb->vol_mounts);
        if (sb->vol_mounts) {
            memcpy(sb->vol_mounts, opts->volumes, opts->n_volumes * sizeof *sb->vol_mounts);
            sb->n_vol_mounts = opts->n_volumes;
        } else
            r = -ENOMEM;
    }
    if (r < 0) {
        free(sb->vol_mounts);
        json_object_put(sb->labels);
        free(sb);
        return r == -EINVAL ? -EINVAL : -ENOMEM;
    }
    sb->engine = e;
    sb->owner_uid = opts->owner_uid;
    sb->node = strdup(node);
    sb->hostname = strdup(opts->hostname ? opts->hostname : sb->id);
    sb->cores = opts->cores > 0 ? (unsigned)opts->cores : cs->default_cores;
    sb->memory_mb = opts->memory_mb > 0 ? (unsigned)opts->memory_mb : cs->default_memory_mb;
    sb->disk_gb = opts->disk_gb > 0 ? (unsigned)opts->disk_gb : cs->default_disk_gb;
    sb->disk_explicit = opts->disk_gb > 0;
    sb->net_rate_mbps = engine_net_rate(e, opts->net_rate_mbps);
    sb->pool_member = opts->pool;
    snprintf(sb->template, sizeof sb->template, "%s",
             engine_template_find(e, opts->template)->name);
    sb->internet = opts->internet;
    sb->internet_allow =
        opts->internet && opts->internet_allow ? json_object_get(opts->internet_allow) : NULL;
    sandbox_pause_opts_set(sb, opts);
    fork_child_init(sb, opts);
    sb->no_replace = sb->no_replace || opts->n_volumes > 0; /* the volumes are on its node */
    r = sandbox_set_idempotency(sb, opts->owner_uid, opts->idempotency_key, opts->params_hash);
    sb->created_at = now_realtime();
    sb->expires_at = sb->created_at + ttl;
    sb->started_ms = now_ms(e);
    /* state PENDING from calloc(); the create begins at the intent save (engine_create) */
    uv_timer_init(e->loop, &sb->timer);
    sb->timer.data = sb;
    if (r < 0 || !sb->node || !sb->hostname) {
        sandbox_set_state(sb, SANDBOX_GONE);
        sandbox_maybe_free(sb);
        return -ENOMEM;
    }
    *ret = sb;
    return 0;
}

/* What engine_create() refuses before it looks at the pool: 0 when the create may go on. */
int create_check(struct engine *e, const struct sandbox_create_opts *opts, int64_t ttl,
                 struct engine_error *ret_err)
{
    const struct config_sandbox *cs = &e->cfg->sandbox;
    struct engine_template *t = engine_template_for(e, opts->template, opts->owner_uid, opts->pool);
    unsigned n_uid = 0;
    int r;

    if (engine_refuse_ttl(ret_err, ttl, cs->max_ttl_s, "ttl_s must be 1..max_ttl_s", "max_ttl_s"))
        return -EINVAL;
    r = engine_check_caps(e, t, opts->cores, opts->memory_mb, opts->disk_gb, ret_err);
    if (r >= 0)
        r = engine_check_net_rate(e, opts->net_rate_mbps, ret_err);
    if (r >= 0)
        r = engine_pause_opts_check(e, opts, ret_err);
    if (r >= 0)
        r = engine_volume_mounts_check(e, opts, ret_err);
    if (r < 0)
        return r;
    if (!t) {
        *ret_err = (struct engine_error){.kind = ENGINE_E_INVALID,
                                         .error = -EINVAL,
                                         .message = "no such template",
                                         .param = "template",
                                         .templates = true};
        return -EINVAL;
    }
    if (t->check_error) /* sandbox-isolation.c */
        return engine_refuse(ret_err, ENGINE_E_NOT_CONFIGURED, -EPERM, t->check_error, NULL);
    n_uid = engine_running(e, &opts->owner_uid); /* pool members, paused ones: not counted */
    if (!opts->pool && n_uid >= cs->max_per_uid)
        return engine_refuse(ret_err, ENGINE_E_QUOTA, -EDQUOT,
                             "too many sandboxes for this uid (max_per_uid)", NULL);
    return 0;
}

/* ---- the children's side, called from the create (sandbox-create.c) ---- */

void fork_child_init(struct sandbox *sb, const struct sandbox_create_opts *opts)
{
    if (!opts->fork_vmid)
        return;
    sb->fork_vmid = opts->fork_vmid;
    sb->fork_slot = opts->fork_slot;
    sb->no_replace = true; /* its source is on this node */
    snprintf(sb->fork_snap, sizeof sb->fork_snap, "%s", opts->fork_snap ? opts->fork_snap : "");
    snprintf(sb->fork_pin, sizeof sb->fork_pin, "%s", opts->fork_pin ? opts->fork_pin : "");
}

uint64_t fork_clone_params(struct sandbox *sb, struct pve_clone_params *cp)
{
    cp->template_vmid = sb->fork_vmid;
    cp->copies = NULL;
    cp->n_copies = 0;
    cp->snapname = sb->fork_snap;
    cp->full = 1; /* Proxmox clones a container that is not a template in full only */
    op_step_extend(sb, (uint64_t)sb->fork_slot * ENGINE_STEP_CLONE_MS);
    return op_step_left(sb);
}
