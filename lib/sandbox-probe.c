/* What the engine learns from Proxmox by itself: the periodic /version probe behind
 * daemon.status, the datacenter firewall check, and sandboxes re-attached from the
 * registry (engine_adopt). See sandbox.h. */
#include "macro.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>

#include "hostkey.h"
#include "log.h"
#include "marker.h"
#include "pve.h"
#include "registry.h"
#include "sandbox-internal.h"

#define COMP "sandbox"

static void on_fw_checked(const struct pve_result *res, void *userdata)
{
    struct engine *e = userdata;
    json_object *en = NULL;

    e->fw_call = NULL;
    if (res->error < 0)
        return; /* retried with the next probe */
    e->fw_checked = true;
    if (res->data)
        json_object_object_get_ex(res->data, "enable", &en);
    if (!en || json_object_get_int(en) != 1)
        engine_noticef(e, LOG_WARNING,
                       "the Proxmox datacenter firewall is DISABLED (/cluster/firewall/options "
                       "enable != 1): sandbox isolation and the internet toggle are NOT enforced");
    else
        log_debug(COMP, "datacenter firewall enabled");
}

static void on_probe(const struct pve_result *res, void *userdata)
{
    struct engine *e = userdata;
    int was = e->reachable;

    e->probe_call = NULL;
    if (e->closing)
        return;
    free(e->last_error);
    e->last_error = NULL;
    if (res->error == 0) {
        e->reachable = 1;
        if (was == 0)
            engine_noticef(e, LOG_NOTICE, "Proxmox is reachable again");
        if (!e->fw_checked && !e->fw_call)
            (void)pve_cluster_fw_options_get(e->pve, 0, on_fw_checked, e, &e->fw_call);
    } else {
        struct engine_error err;
        char buf[512];

        error_from_pve(res, false, &err);
        if (err.http_status)
            snprintf(buf, sizeof buf, "HTTP %d: %s", err.http_status, err.message);
        else
            snprintf(buf, sizeof buf, "%s", err.message);
        e->last_error = strdup(buf);
        e->reachable = 0;
        if (was != 0)
            engine_noticef(e, LOG_WARNING, "Proxmox is not reachable: %s", buf);
    }
    probe_schedule(e, e->reachable ? ENGINE_PROBE_INTERVAL_MS : ENGINE_PROBE_RETRY_MS);
}

static void on_probe_timer(uv_timer_t *t)
{
    struct engine *e = t->data;

    if (e->closing || e->probe_call)
        return;
    if (pve_version(e->pve, ENGINE_PROBE_TIMEOUT_MS, on_probe, e, &e->probe_call) < 0)
        probe_schedule(e, ENGINE_PROBE_INTERVAL_MS);
}

void probe_schedule(struct engine *e, uint64_t ms)
{
    if (e->probe_open && !e->closing)
        uv_timer_start(&e->probe, on_probe_timer, ms, 0);
}

/* ---- re-attach ---- */

int sandbox_from_record(struct engine *e, const struct reg_record *r, enum sandbox_state state,
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
    sb->cores = r->cores;
    sb->memory_mb = (unsigned)r->memory_mb;
    sb->disk_gb = (unsigned)r->disk_gb;
    sb->created_at = r->created_at;
    sb->expires_at = r->expires_at;
    sb->state = state;
    sb->started_ms = now_ms(e);
    k = labels_copy(r->labels, &sb->labels);
    if (r->idempotency_key) {
        sb->idempotency_key = strdup(r->idempotency_key);
        if (!sb->idempotency_key ||
            marker_key_hash(r->owner_uid, r->idempotency_key, sb->idem_hash) < 0)
            k = -ENOMEM;
    }
    if (r->params_hash && hex_is_valid(r->params_hash, SHA256_HEX_SIZE - 1))
        memcpy(sb->params_hash, r->params_hash, SHA256_HEX_SIZE);
    uv_timer_init(e->loop, &sb->timer);
    sb->timer.data = sb;
    if (k < 0 || !sb->node || !sb->hostname) {
        sandbox_discard(sb);
        return k < 0 ? k : -ENOMEM;
    }
    *ret = sb;
    return 0;
}

void sandbox_discard(struct sandbox *sb)
{
    sandbox_set_state(sb, SANDBOX_GONE);
    sandbox_maybe_free(sb);
}

int engine_adopt(struct engine *e, const struct reg_record *r, struct sandbox **ret)
{
    struct sandbox *sb;
    int k;

    if (e->closing || !e->configured)
        return -ESHUTDOWN;
    if (!r->id || !id_is_valid(r->id) || r->vmid <= 0 || !r->node || !r->ip)
        return -EINVAL;
    /* born READY: no transition, nothing to save */
    k = sandbox_from_record(e, r, SANDBOX_READY, &sb);
    if (k < 0)
        return k;
    sb->pool_member = r->pool;
    snprintf(sb->template, sizeof sb->template, "%s",
             r->template ? r->template : engine_template_find(e, NULL)->name);
    if (r->host_key && hostkey_pin_is_valid(r->host_key))
        snprintf(sb->host_key, sizeof sb->host_key, "%s", r->host_key);
    sb->ip = strdup(r->ip);
    if (!sb->ip) {
        sandbox_discard(sb);
        return -ENOMEM;
    }
    sandbox_link(sb);
    log_debug(COMP, "%s: re-attached (vmid %u, %s)", sb->id, sb->vmid, sb->ip);
    if (ret)
        *ret = sb;
    return 0;
}
