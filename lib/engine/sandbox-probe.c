/* What the engine learns from Proxmox by itself: the periodic /version probe behind
 * daemon.status and the datacenter firewall check. Below sandbox.c (engine_new() starts
 * the probe): it calls nothing of the engine but sandbox-base.c. See sandbox.h. */
#include "macro.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>

#include "log.h"
#include "pve.h"
#include "sandbox-internal.h"

#define COMP "sandbox"

/* Read with every probe, for daemon.status and the warning (each create reads it itself
 * before the container starts, sandbox-isolation-steps.c, and fails while it is off). */
static void on_fw_checked(const struct pve_result *res, void *userdata)
{
    struct engine *e = userdata;
    json_object *en = NULL;

    e->fw_call = NULL;
    if (res->error < 0)
        return; /* retried with the next probe */
    if (res->data)
        json_object_object_get_ex(res->data, "enable", &en);
    engine_set_dc_firewall(e, en && json_object_get_int(en) == 1);
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
        if (!e->fw_call)
            (void)pve_cluster_fw_options_get(e->pve, 0, on_fw_checked, e, &e->fw_call);
        if (!e->tmpl_done && !e->tmpl_call)
            engine_templates_check(e); /* at start, and after a read Proxmox did not answer */
    } else {
        struct engine_error err;
        char buf[512];

        error_from_pve(res, false, &err);
        if (err.http_status == 401)
            snprintf(buf, sizeof buf,
                     "HTTP 401: %s: authentication failed: check [proxmox] token_id and the "
                     "token secret",
                     err.message);
        else if (err.http_status)
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

void engine_recheck(struct engine *e)
{
    engine_templates_check(e);
    probe_schedule(e, 0); /* reads the datacenter firewall again */
}
