/* The isolation steps of the create (docs/sandbox-setup.md, "Isolation checks"): no sandbox
 * is READY before its isolation is in force.
 *
 * Proxmox compiles a new container's firewall rules on its own cycle (pve-firewall every
 * 10 s, proxmox-firewall every 5 s); until then the container's traffic is not filtered.
 * So before READY the create checks that the datacenter firewall is on, then proves the
 * isolation from inside the container: a TCP connect to [network] probe_address (internet
 * off) or lan_probe_address (internet on) must fail, probed again until it does or the
 * create deadline passes. With no probe address for the sandbox's case it waits instead
 * until a whole firewall cycle (firewall_period_s) passed since the container started.
 *
 * Both steps are rows of the create's step table and complete through the driver
 * (op-step.h), so nothing here calls into sandbox-create.c; the prerequisites they rely on
 * are in sandbox-isolation.c. */
#include "macro.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config-network.h"
#include "log.h"
#include "op-step.h"
#include "pve.h"
#include "sandbox-internal.h"
#include "sshexec.h"

#define COMP "sandbox"

#define ISOLATION_PROBE_S 2u           /* one probe's connect bound (`timeout`) */
#define ISOLATION_PAUSE_MS 500u        /* between probes that reached the address */
#define ISOLATION_CYCLE_MARGIN_MS 1000 /* past the firewall cycle, without a probe address */

/* ---- the datacenter firewall ---- */

static void on_dc_firewall(const struct pve_result *res, void *userdata)
{
    struct sandbox *sb = userdata;
    struct engine_error err;
    json_object *en = NULL;

    sb->call = NULL;
    if (res->error < 0) {
        op_step_pve_done(sb, res);
        return;
    }
    if (res->data)
        json_object_object_get_ex(res->data, "enable", &en);
    engine_set_dc_firewall(sb->engine, en && json_object_get_int(en) == 1);
    if (sb->engine->dc_firewall != 1) {
        err = (struct engine_error){.kind = ENGINE_E_NOT_CONFIGURED,
                                    .error = -ENOPROTOOPT,
                                    .message = ENGINE_DC_FIREWALL_OFF};
        op_step_done(sb, &err);
        return;
    }
    op_step_done(sb, NULL);
}

int isolation_dc_start(struct sandbox *sb, uint64_t timeout_ms, const char **ret_fail)
{
    return pve_cluster_fw_options_get(sb->engine->pve, timeout_ms, on_dc_firewall, sb, &sb->call);
}

/* ---- the probe from inside ---- */

/* A running probe from inside. */
struct isolation {
    struct sandbox *sb;
    char address[24]; /* the probed IP:PORT */
};

static void on_probed(struct sshexec *x, int error, struct sshexec_result *res, void *userdata)
{
    _cleanup_free_ struct isolation *k = userdata;
    struct sandbox *sb = k->sb;
    char buf[256];
    struct engine_error err = {.kind = ENGINE_E_PROXMOX, .error = -EPERM, .message = buf};
    bool reached = false;

    if (error == 0 && !res->timed_out && res->exit_code >= 0) {
        if (res->exit_code != 0) {
            log_debug(COMP, "%s: isolation verified: %s is not reachable", sb->id, k->address);
            op_step_done(sb, NULL);
            return;
        }
        reached = true;
        log_debug(COMP, "%s: %s is reachable: the firewall is not in force yet", sb->id,
                  k->address);
    } else
        log_debug(COMP, "%s: isolation probe could not run: %s", sb->id,
                  error < 0 ? strerror(-error) : "no exit status");
    if (op_step_left(sb) > ISOLATION_PAUSE_MS + (ISOLATION_PROBE_S + 1) * 1000u) {
        op_step_again(sb, ISOLATION_PAUSE_MS);
        return;
    }
    if (reached)
        snprintf(buf, sizeof buf, "the sandbox's firewall is not in force: %s is reachable",
                 k->address);
    else {
        snprintf(buf, sizeof buf,
                 "cannot verify the sandbox's isolation: the probe of %s "
                 "could not run",
                 k->address);
        err.kind = ENGINE_E_SSH;
        err.error = error < 0 ? error : -EPROTO;
    }
    op_step_done(sb, &err);
}

/* No probe address: one whole firewall cycle since the container started. */
static int wait_cycle(struct sandbox *sb)
{
    uint64_t due = sb->ct_started_ms +
                   1000u * (uint64_t)sb->engine->cfg->proxmox.firewall_period_s +
                   ISOLATION_CYCLE_MARGIN_MS;
    uint64_t now = now_ms(sb->engine);

    if (now < due) {
        op_step_again(sb, due - now);
        return 0;
    }
    log_debug(COMP, "%s: a firewall cycle passed since the start (no probe address)", sb->id);
    op_step_done(sb, NULL);
    return 0;
}

int isolation_probe_start(struct sandbox *sb, uint64_t timeout_ms, const char **ret_fail)
{
    const struct config_network *n = &sb->engine->cfg->network;
    uint32_t ip = sb->internet ? n->lan_probe_ip : n->probe_ip;
    unsigned port = sb->internet ? n->lan_probe_port : n->probe_port;
    char command[320], a[16];
    struct sshexec_params p = {.command = command, .has_max_output = true};
    struct isolation *k;
    int r;

    if (!ip)
        return wait_cycle(sb);
    r = isolation_probe_command(ip, port, ISOLATION_PROBE_S, command, sizeof command);
    k = r < 0 ? NULL : calloc(1, sizeof *k);
    if (!k) {
        *ret_fail = "out of memory";
        return -ENOMEM;
    }
    *k = (struct isolation){.sb = sb};
    config_network_format(ip, a);
    snprintf(k->address, sizeof k->address, "%s:%u", a, port);
    p.timeout_ms = MIN(timeout_ms, (ISOLATION_PROBE_S + 2) * 1000u);
    r = sshexec_start(sb->pool, &p, on_probed, k, NULL); /* on_probed runs once, frees k */
    if (r < 0) {
        free(k);
        *ret_fail = "cannot start the isolation probe";
    }
    return r;
}
