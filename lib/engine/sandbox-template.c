/* Templates sandboxes are cloned from ([templates], [proxmox] template) and the operator's
 * caps on a sandbox's size. See sandbox.h. */
#include "macro.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "marker.h"
#include "registry.h"
#include "sandbox-internal.h"
#include "sshs.h"

static char *join_pins(char **keys, size_t n)
{
    size_t len = 1;
    char *s;

    for (size_t i = 0; i < n; i++)
        len += strlen(keys[i]) + 1;
    s = calloc(1, len);
    if (!s)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        if (i)
            strcat(s, ",");
        strcat(s, keys[i]);
    }
    return s;
}

static int add_template(struct engine *e, const char *name, uint32_t vmid,
                        const struct config_template *ct, char **keys, size_t n, char **ret_error)
{
    struct engine_template *t = &e->templates[e->n_templates];
    int r;

    *t = (struct engine_template){.vmid = vmid, .check_state = -1};
    snprintf(t->name, sizeof t->name, "%s", name);
    t->replicas = ct ? ct->replicas : 0;
    if (ct && ct->n_copies > 0) {
        t->copies = calloc(ct->n_copies, sizeof *t->copies);
        if (!t->copies)
            return -ENOMEM;
        for (size_t i = 0; i < ct->n_copies; i++) {
            t->copies[i].vmid = ct->copies[i].vmid;
            snprintf(t->copies[i].node, sizeof t->copies[i].node, "%s", ct->copies[i].node);
        }
        t->n_copies = ct->n_copies;
    } else if (e->cfg->proxmox.n_nodes == 1)
        snprintf(t->home, sizeof t->home, "%s", e->cfg->proxmox.nodes[0]);
    if (!keys || n == 0) {
        keys = e->cfg->ssh.template_host_keys;
        n = e->cfg->ssh.n_template_host_keys;
    }
    if (n == 0) {
        free(t->copies);
        if (ret_error && asprintf(ret_error,
                                  "template '%s': no pinned host key ([templates] %s.host_key or "
                                  "[ssh] template_host_key)",
                                  name, name) < 0)
            *ret_error = NULL;
        return -EINVAL;
    }
    t->pins = join_pins(keys, n);
    if (!t->pins) {
        free(t->copies);
        return -ENOMEM;
    }
    e->n_templates++;
    r = sshs_pins_validate(t->pins);
    if (r < 0 && ret_error &&
        asprintf(ret_error, "template '%s': host keys are not SHA256 fingerprints", name) < 0)
        *ret_error = NULL;
    return r;
}

int engine_templates_init(struct engine *e, char **ret_error)
{
    const struct config *c = e->cfg;
    const struct config_template *def = config_template_find(c, NULL);
    int r;

    e->templates = calloc(MAX(c->n_templates, (size_t)1), sizeof *e->templates);
    if (!e->templates)
        return -ENOMEM;
    if (c->n_templates == 0) /* a configuration built by hand: [proxmox] template only */
        return add_template(e, CONFIG_DEFAULT_TEMPLATE_NAME, c->proxmox.template_vmid, NULL, NULL,
                            0, ret_error);
    r = add_template(e, def->name, def->vmid, def, def->host_keys, def->n_host_keys, ret_error);
    for (size_t i = 0; r >= 0 && i < c->n_templates; i++)
        if (&c->templates[i] != def)
            r = add_template(e, c->templates[i].name, c->templates[i].vmid, &c->templates[i],
                             c->templates[i].host_keys, c->templates[i].n_host_keys, ret_error);
    return r;
}

void engine_templates_free(struct engine *e)
{
    for (size_t i = 0; i < e->n_templates; i++) {
        free(e->templates[i].pins);
        free(e->templates[i].copies);
    }
    free(e->templates);
    e->templates = NULL;
    e->n_templates = 0;
    engine_rt_free(e);
}

struct engine_template *engine_template_find(struct engine *e, const char *name)
{
    if (e->n_templates == 0)
        return NULL;
    if (!name)
        return &e->templates[0];
    for (size_t i = 0; i < e->n_templates; i++)
        if (strcmp(e->templates[i].name, name) == 0)
            return &e->templates[i];
    return engine_rt_find(e, name);
}

struct engine_template *engine_template_for(struct engine *e, const char *name, uid_t uid,
                                            bool pool)
{
    struct engine_template *t = engine_template_find(e, name);

    if (t && ((!pool && !engine_template_visible(t, uid, false)) || t->deleting))
        return NULL; /* another uid's unpublished template, or one being deleted */
    return t;
}

struct engine_template *sandbox_template(const struct sandbox *sb)
{
    struct engine_template *t = engine_template_find(sb->engine, sb->template);

    return t ? t : engine_template_find(sb->engine, NULL);
}

const char *engine_template_name(const struct engine *e, size_t i)
{
    return i < e->n_templates ? e->templates[i].name : NULL;
}

static int cap_refuse(struct engine_error *ret_err, const char *param, const char *cap,
                      uint64_t limit, const char *msg)
{
    *ret_err = (struct engine_error){.kind = ENGINE_E_INVALID,
                                     .error = -EINVAL,
                                     .message = msg,
                                     .param = param,
                                     .cap = cap,
                                     .limit = limit};
    return -EINVAL;
}

unsigned engine_net_rate(const struct engine *e, int net_rate_mbps)
{
    const struct config_sandbox *cs = &e->cfg->sandbox;

    if (net_rate_mbps >= 0)
        return (unsigned)net_rate_mbps;
    return cs->default_net_rate_mbps ? cs->default_net_rate_mbps : cs->max_net_rate_mbps;
}

int engine_check_net_rate(const struct engine *e, int net_rate_mbps, struct engine_error *ret_err)
{
    unsigned max = e->cfg->sandbox.max_net_rate_mbps;

    if (net_rate_mbps < 0 || max == 0)
        return 0;
    if (net_rate_mbps == 0)
        return cap_refuse(ret_err, "net_rate_mbps", "max_net_rate_mbps", max,
                          "net_rate_mbps 0 (no cap) exceeds the operator's cap max_net_rate_mbps");
    if ((unsigned)net_rate_mbps > max)
        return cap_refuse(ret_err, "net_rate_mbps", "max_net_rate_mbps", max,
                          "net_rate_mbps exceeds the operator's cap max_net_rate_mbps");
    return 0;
}

int engine_check_caps(struct engine *e, const struct engine_template *t, int cores, int memory_mb,
                      int disk_gb, struct engine_error *ret_err)
{
    const struct config_sandbox *cs = &e->cfg->sandbox;

    if (cores > 0 && (unsigned)cores > cs->max_cores)
        return cap_refuse(ret_err, "cores", "max_cores", cs->max_cores,
                          "cores exceeds the operator's cap max_cores");
    if (memory_mb > 0 && (unsigned)memory_mb > cs->max_memory_mb)
        return cap_refuse(ret_err, "memory_mb", "max_memory_mb", cs->max_memory_mb,
                          "memory_mb exceeds the operator's cap max_memory_mb");
    if (disk_gb > 0 && (unsigned)disk_gb > cs->max_disk_gb)
        return cap_refuse(ret_err, "disk_gb", "max_disk_gb", cs->max_disk_gb,
                          "disk_gb exceeds the operator's cap max_disk_gb");
    if (disk_gb > 0 && t && t->disk_gb > (uint64_t)disk_gb)
        return cap_refuse(ret_err, "disk_gb", NULL, t->disk_gb,
                          "disk_gb is smaller than the template's disk (disks only grow)");
    return 0;
}
