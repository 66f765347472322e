/* Sandboxes re-attached from the registry (engine_adopt, and the resumed creates of
 * sandbox-resume.c): a sandbox built from a registry record. See sandbox.h. */
#include "macro.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "audit.h"
#include "hostkey.h"
#include "log.h"
#include "marker.h"
#include "pve-parse.h"
#include "registry.h"
#include "sandbox-attach.h"
#include "sandbox-internal.h"
#include "util.h"

#define COMP "sandbox"

int sandbox_from_record(struct engine *e, const struct registry_record *r, enum sandbox_state state,
                        struct sandbox **ret)
{
    struct sandbox *sb;
    int k;

    for (sb = e->sandboxes; sb; sb = sb->next)
        if (strcmp(sb->id, r->id) == 0)
            return -EEXIST;
    sb = calloc(1, sizeof *sb);
    if (!sb)
        return -ENOMEM;
    snprintf(sb->id, sizeof sb->id, "%s", r->id);
    sb->engine = e;
    sb->owner_uid = r->owner_uid;
    sb->vmid = (uint32_t)r->vmid;
    sb->node = strdup(r->node);
    sb->hostname = strdup(r->hostname ? r->hostname : r->id);
    sb->internet = r->internet;
    sb->internet_allow = r->internet ? json_object_get(r->internet_allow) : NULL;
    sb->resume_on_use = r->resume_on_use;
    sb->auto_pause_s = r->auto_pause_s;
    sb->had_volumes = r->volumes;
    sb->cores = r->cores;
    sb->memory_mb = (unsigned)r->memory_mb;
    sb->disk_gb = (unsigned)r->disk_gb;
    sb->net_rate_mbps = r->net_rate_mbps;
    sb->created_at = r->created_at;
    sb->expires_at = r->expires_at;
    sb->state = state;
    sb->started_ms = now_ms(e);
    k = labels_copy(r->labels, &sb->labels);
    if (k >= 0)
        k = env_copy(r->env, &sb->env);
    if (k >= 0)
        k = sandbox_set_idempotency(sb, r->owner_uid, r->idempotency_key, r->params_hash);
    uv_timer_init(e->loop, &sb->timer);
    sb->timer.data = sb;
    if (k < 0 || !sb->node || !sb->hostname) {
        sandbox_discard(sb);
        return k < 0 ? k : -ENOMEM;
    }
    *ret = sb;
    return 0;
}

int sandbox_set_idempotency(struct sandbox *sb, uid_t owner, const char *key,
                            const char *params_hash)
{
    if (params_hash && hex_is_valid(params_hash, SHA256_HEX_SIZE - 1))
        memcpy(sb->params_hash, params_hash, SHA256_HEX_SIZE);
    if (!key)
        return 0;
    sb->idempotency_key = strdup(key);
    if (!sb->idempotency_key || marker_key_hash(owner, key, sb->idem_hash) < 0)
        return -ENOMEM;
    return 0;
}

static void on_reapplied(const struct engine_error *err, struct sandbox *sb, void *userdata)
{
    if (err)
        log_warning(COMP, "%s: cannot put its recorded internet state back in place: %s", sb->id,
                    strna(err->message));
    else
        log_info(COMP,
                 "%s: its recorded internet state is back in place after an interrupted "
                 "change",
                 sb->id);
}

void sandbox_discard(struct sandbox *sb)
{
    sandbox_set_state(sb, SANDBOX_GONE);
    sandbox_maybe_free(sb);
}

int engine_adopt(struct engine *e, const struct registry_record *r, struct sandbox **ret)
{
    struct sandbox *sb;
    int k;

    if (e->closing || !e->configured)
        return -ESHUTDOWN;
    bool paused = r->state == REG_PAUSED; /* its address is learnt again at the resume */

    if (!r->id || !id_is_valid(r->id) || r->vmid <= 0 || !r->node || (!r->ip && !paused))
        return -EINVAL;
    /* born READY (or PAUSED): no transition, nothing to save */
    k = sandbox_from_record(e, r, paused ? SANDBOX_PAUSED : SANDBOX_READY, &sb);
    if (k < 0)
        return k;
    sb->marker_paused = paused;
    sb->pool_member = r->pool;
    snprintf(sb->template, sizeof sb->template, "%s",
             r->template ? r->template : engine_template_find(e, NULL)->name);
    if (r->fork_snapshot)
        snprintf(sb->fork_pending, sizeof sb->fork_pending, "%s", r->fork_snapshot);
    if (r->host_key && hostkey_pin_is_valid(r->host_key))
        snprintf(sb->host_key, sizeof sb->host_key, "%s", r->host_key);
    sb->ip = r->ip ? strdup(r->ip) : NULL;
    if (r->ip && !sb->ip) {
        sandbox_discard(sb);
        return -ENOMEM;
    }
    sandbox_link(sb);
    log_debug(COMP, "%s: re-attached (vmid %u, %s%s)", sb->id, sb->vmid, strna(sb->ip),
              paused ? ", paused" : "");
    if (r->internet_pending && !paused) /* a change the restart cut short: the recorded state */
        (void)engine_set_internet(e, sb, sb->internet, sb->internet_allow, on_reapplied, NULL,
                                  &(struct engine_error){});
    else if (r->detaching && !paused) /* a detach cut short: finished */
        engine_detach_recover(sb, r->detaching);
    else if (r->volumes && !paused) /* an attach cut short: a mount point left pending */
        engine_attach_recover(sb);
    if (ret)
        *ret = sb;
    return 0;
}

/* ---- for reconcile ---- */

bool engine_id_elsewhere(struct engine *e, struct registry_record *const *recs, size_t n_recs,
                         const char *id, uint32_t vmid)
{
    for (struct sandbox *sb = e->sandboxes; sb; sb = sb->next)
        if (strcmp(sb->id, id) == 0)
            return sb->vmid != vmid;
    for (size_t i = 0; i < n_recs; i++)
        if (recs[i] && strcmp(recs[i]->id, id) == 0)
            return recs[i]->vmid > 0 && (uint32_t)recs[i]->vmid != vmid;
    return false;
}

bool engine_adopt_unreachable(struct engine *e, const struct registry_record *r,
                              const struct pve_vm_list *members)
{
    const struct pve_vm *vm =
        members && r->vmid > 0 ? pve_vm_list_find(members, (uint32_t)r->vmid) : NULL;
    struct sandbox *sb;

    if (!vm || !cluster_vm_unreachable(e, vm->node ? vm->node : r->node, vm->status))
        return false;
    if (r->state != REG_READY || r->expires_at <= now_realtime() || !r->ip ||
        engine_adopt(e, r, &sb) < 0)
        return true; /* resolved once its node answers */
    audit_reconcile("reattach", "restart", sb->id, sb->vmid, sb->node,
                    "re-attached after a restart; its node does not answer");
    return true;
}
