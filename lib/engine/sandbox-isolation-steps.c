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
 * With internet on, the same probe also connects to probe_address, which must succeed: the
 * container's options and its internet rule are separate writes, and a cycle that fell
 * between them enforces the policy without the rule (the LAN closed, the internet too) until
 * the next cycle. A closed LAN with the internet unreachable is probed again until a whole
 * cycle passed since the start; then the isolation holds and the create goes on (the
 * internet itself may be down).
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
    bool open_check;  /* the command also connects to the internet's probe address */
};

/* The exit statuses of the probe with the internet check (probe_command()). */
enum {
    PROBE_ISOLATED = 0,  /* the LAN closed, the internet reached */
    PROBE_REACHED = 1,   /* the LAN reached */
    PROBE_NO_ACCESS = 2, /* the LAN closed, the internet not reached */
};

/* Once a whole firewall cycle passed since the container started, a closed LAN is trusted
 * even though the internet's probe address does not answer. */
static bool cycle_passed(const struct sandbox *sb)
{
    return now_ms(sb->engine) >= sb->ct_started_ms +
                                     1000u * (uint64_t)sb->engine->cfg->proxmox.firewall_period_s +
                                     ISOLATION_CYCLE_MARGIN_MS;
}

static void on_probed(struct sshexec *x, int error, struct sshexec_result *res, void *userdata)
{
    _cleanup_free_ struct isolation *k = userdata;
    struct sandbox *sb = k->sb;
    char buf[256];
    struct engine_error err = {.kind = ENGINE_E_PROXMOX, .error = -EPERM, .message = buf};
    bool reached = false, closed = false;

    if (error == 0 && !res->timed_out && res->exit_code >= 0) {
        int c = res->exit_code;

        if (k->open_check ? c == PROBE_ISOLATED : c != 0) {
            log_debug(COMP, "%s: isolation verified: %s is not reachable", sb->id, k->address);
            op_step_done(sb, NULL);
            return;
        }
        if (k->open_check && c == PROBE_NO_ACCESS) {
            closed = true;
            if (cycle_passed(sb)) {
                log_info(COMP,
                         "%s: isolation verified: %s is not reachable; the internet's probe "
                         "address is not reachable either, a firewall cycle after the start",
                         sb->id, k->address);
                op_step_done(sb, NULL);
                return;
            }
            log_debug(COMP, "%s: %s is not reachable, the internet not yet", sb->id, k->address);
        } else {
            reached = true;
            log_debug(COMP, "%s: %s is reachable: the firewall is not in force yet", sb->id,
                      k->address);
        }
    } else
        log_debug(COMP, "%s: isolation probe could not run: %s", sb->id,
                  error < 0 ? strerror(-error) : "no exit status");
    if (op_step_left(sb) > ISOLATION_PAUSE_MS + (2 * ISOLATION_PROBE_S + 1) * 1000u) {
        op_step_again(sb, ISOLATION_PAUSE_MS);
        return;
    }
    if (closed) { /* the deadline: the isolation holds, the internet is not proven */
        op_step_done(sb, NULL);
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

/* The probe's command: a connect to ip:port that must fail; with open_check, then a connect
 * to the internet's probe address, exiting PROBE_*. */
static int probe_command(const struct config_network *n, uint32_t ip, unsigned port,
                         bool open_check, char *buf, size_t size)
{
    char lan[320], inet[320];
    int r;

    if (!open_check)
        return isolation_probe_command(ip, port, ISOLATION_PROBE_S, buf, size);
    r = isolation_probe_command(ip, port, ISOLATION_PROBE_S, lan, sizeof lan);
    if (r == 0)
        r = isolation_probe_command(n->probe_ip, n->probe_port, ISOLATION_PROBE_S, inet,
                                    sizeof inet);
    if (r < 0)
        return r;
    r = snprintf(buf, size, "(%s) && exit %d; (%s) && exit %d; exit %d", lan, PROBE_REACHED, inet,
                 PROBE_ISOLATED, PROBE_NO_ACCESS);
    return r < 0 || (size_t)r >= size ? -ENOBUFS : 0;
}

int isolation_probe_start(struct sandbox *sb, uint64_t timeout_ms, const char **ret_fail)
{
    const struct config_network *n = &sb->engine->cfg->network;
    uint32_t ip = sb->internet ? n->lan_probe_ip : n->probe_ip;
    unsigned port = sb->internet ? n->lan_probe_port : n->probe_port;
    bool open_check = sb->internet && n->probe_ip;

    if (sb->internet_allow) { /* an allow-list: a probe address it does not let through */
        open_check = false;
        ip = n->probe_ip;
        port = n->probe_port;
        if (!ip || egress_sandbox_allows(sb, ip, port)) {
            ip = n->lan_probe_ip;
            port = n->lan_probe_port;
        }
        if (ip && egress_sandbox_allows(sb, ip, port))
            ip = 0; /* both are let through: a firewall cycle instead */
    }
    char command[720], a[16];
    struct sshexec_params p = {.command = command, .has_max_output = true};
    struct isolation *k;
    int r;

    if (!ip)
        return wait_cycle(sb);
    r = probe_command(n, ip, port, open_check, command, sizeof command);
    k = r < 0 ? NULL : calloc(1, sizeof *k);
    if (!k) {
        *ret_fail = "out of memory";
        return -ENOMEM;
    }
    *k = (struct isolation){.sb = sb, .open_check = open_check};
    config_network_format(ip, a);
    snprintf(k->address, sizeof k->address, "%s:%u", a, port);
    p.timeout_ms = MIN(timeout_ms, (2 * ISOLATION_PROBE_S + 2) * 1000u);
    r = sshexec_start(sb->pool, &p, on_probed, k, NULL); /* on_probed runs once, frees k */
    if (r < 0) {
        free(k);
        *ret_fail = "cannot start the isolation probe";
    }
    return r;
}
