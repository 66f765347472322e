/* The isolation prerequisites (docs/sandbox-setup.md, "Isolation checks"): the datacenter
 * firewall's last known state, each template's configuration (unprivileged, firewall=1 on
 * net0) read at start and at reload, and the probe command the create's isolation step
 * (sandbox-isolation-steps.c) and set_internet's wait run inside a sandbox. */
#include "macro.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>

#include "config-network.h"
#include "log.h"
#include "pve-parse.h"
#include "pve.h"
#include "sandbox-internal.h"
#include "sshexec.h"

#define COMP "sandbox"

int isolation_probe_command(uint32_t ip, unsigned port, unsigned timeout_s, char *buf, size_t size)
{
    char a[16];
    unsigned w = timeout_s > 1 ? timeout_s - 1 : 1;
    int n;

    config_network_format(ip, a);
    n = snprintf(buf, size,
                 "if command -v nc >/dev/null 2>&1; then echo | timeout %u nc -w %u %s %u "
                 ">/dev/null 2>&1; else timeout %u bash -c 'exec 3<>/dev/tcp/%s/%u' 2>/dev/null; "
                 "fi",
                 timeout_s, w, a, port, timeout_s, a, port);
    return n < 0 || (size_t)n >= size ? -ENOBUFS : 0;
}

/* ---- the datacenter firewall ---- */

void engine_set_dc_firewall(struct engine *e, bool enabled)
{
    int was = e->dc_firewall;

    e->dc_firewall = enabled;
    if (!enabled && was != 0)
        engine_noticef(e, LOG_WARNING,
                       "the Proxmox datacenter firewall is DISABLED (/cluster/firewall/options "
                       "enable != 1): sandbox isolation and the internet toggle are NOT "
                       "enforced; creates fail until it is enabled");
    else if (enabled && was != 1)
        log_debug(COMP, "datacenter firewall enabled");
}

/* ---- the prerequisites in the configuration ---- */

const char *isolation_config_problem(json_object *conf)
{
    struct pve_net *net = NULL;
    json_object *v = NULL;
    const char *fw;
    bool on;

    if (!json_object_object_get_ex(conf, "unprivileged", &v) || json_object_get_int(v) != 1)
        return "unprivileged: it is a privileged container (unprivileged: 1 is required)";
    if (!json_object_object_get_ex(conf, "net0", &v) ||
        pve_net_parse(json_object_get_string(v), &net) < 0)
        return "net0: missing or unreadable";
    fw = pve_net_get(net, "firewall");
    on = fw && strcmp(fw, "1") == 0;
    pve_net_free(net);
    return on ? NULL : "net0: no firewall=1 (Proxmox does not filter the NIC's traffic)";
}

/* The template and copy the run reads now: false past the last one. */
static bool tmpl_target(struct engine *e, const char **ret_node, uint32_t *ret_vmid)
{
    const struct engine_template *t;

    for (; e->tmpl_i < e->n_templates; e->tmpl_i++, e->tmpl_j = 0) {
        t = &e->templates[e->tmpl_i];
        if (t->n_copies > 0 && e->tmpl_j < t->n_copies) {
            *ret_node = t->copies[e->tmpl_j].node;
            *ret_vmid = t->copies[e->tmpl_j].vmid;
            return true;
        }
        if (t->n_copies == 0 && e->tmpl_j == 0) {
            *ret_node = t->home[0] ? t->home : e->cfg->proxmox.nodes[0];
            *ret_vmid = t->vmid;
            return true;
        }
    }
    return false;
}

/* The template tmpl_i was read whole: its outcome. */
static void tmpl_conclude(struct engine *e)
{
    struct engine_template *t = &e->templates[e->tmpl_i];
    char *problem = TAKE_PTR(e->tmpl_problem);

    if (problem && (!t->check_error || strcmp(problem, t->check_error) != 0))
        engine_noticef(e, LOG_ERR, "%s: creates from it are refused", problem);
    else if (!problem && t->check_state == 0)
        engine_noticef(e, LOG_NOTICE, "template '%s' passes its isolation checks now", t->name);
    free(t->check_error);
    t->check_error = problem;
    t->check_state = problem ? 0 : 1;
    e->tmpl_i++;
    e->tmpl_j = 0;
}

static void tmpl_read_next(struct engine *e);

static void on_tmpl_config(const struct pve_result *res, void *userdata)
{
    struct engine *e = userdata;
    const struct engine_template *t = &e->templates[e->tmpl_i];
    const char *node = NULL, *problem = NULL;
    uint32_t vmid = 0;

    e->tmpl_call = NULL;
    if (e->closing)
        return;
    if (res->error < 0 && res->error != -EREMOTEIO) {
        free(TAKE_PTR(e->tmpl_problem)); /* Proxmox unreachable: again after the next probe */
        return;
    }
    (void)tmpl_target(e, &node, &vmid);
    if (res->error < 0)
        problem = "cannot read its configuration";
    else if (res->data)
        problem = isolation_config_problem(res->data);
    if (problem && !e->tmpl_problem &&
        asprintf(&e->tmpl_problem, "template '%s' (container %" PRIu32 " on %s): %s", t->name, vmid,
                 node, problem) < 0)
        e->tmpl_problem = NULL;
    e->tmpl_j++;
    if (t->n_copies == 0 || e->tmpl_j >= t->n_copies)
        tmpl_conclude(e);
    tmpl_read_next(e);
}

static void tmpl_read_next(struct engine *e)
{
    const char *node;
    uint32_t vmid;

    if (e->tmpl_again) {
        e->tmpl_again = false;
        e->tmpl_i = e->tmpl_j = 0;
        free(TAKE_PTR(e->tmpl_problem));
    }
    if (!tmpl_target(e, &node, &vmid)) {
        e->tmpl_done = true;
        return;
    }
    if (pve_config_get(e->pve, node, vmid, false, 0, on_tmpl_config, e, &e->tmpl_call) < 0)
        e->tmpl_call = NULL; /* again after the next probe */
}

void engine_templates_check(struct engine *e)
{
    if (!e->configured || e->closing)
        return;
    if (e->tmpl_call) {
        e->tmpl_again = true;
        return;
    }
    e->tmpl_again = true;
    tmpl_read_next(e);
}

void engine_templates_check_free(struct engine *e)
{
    free(TAKE_PTR(e->tmpl_problem));
    for (size_t i = 0; i < e->n_templates; i++)
        free(TAKE_PTR(e->templates[i].check_error));
}

void engine_checks_status_add(struct engine *e, json_object *status)
{
    json_object *c = json_object_new_object(), *ts = json_object_new_object();

    json_object_object_add(c, "datacenter_firewall",
                           e->dc_firewall < 0 ? NULL : json_object_new_boolean(e->dc_firewall));
    for (size_t i = 0; i < e->n_templates; i++) {
        const struct engine_template *t = &e->templates[i];
        json_object *o = json_object_new_object();

        json_object_object_add(o, "ok",
                               t->check_state < 0 ? NULL : json_object_new_boolean(t->check_state));
        json_object_object_add(o, "error",
                               t->check_error ? json_object_new_string(t->check_error) : NULL);
        json_object_object_add(ts, t->name, o);
    }
    json_object_object_add(c, "templates", ts);
    json_object_object_add(status, "checks", c);
}
