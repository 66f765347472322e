/* The Proxmox endpoints the client calls: one row each (method, path template, what the
 * response is parsed into, retry class), the filling of path templates and the building of
 * request parameters. No loop, no I/O. */
#include "macro.h"

#include "pve-internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CT "/nodes/{node}/lxc/{vmid}"
#define TASK "/nodes/{node}/tasks/{upid}"

/* Retry classes follow what a failed attempt can have done (see pve.h "Retries"): GETs and
 * setters are idempotent; a task-starting request that Proxmox refused synchronously started
 * no task; a clone or a rule/IP set creation is repeated only when Proxmox refused it before
 * touching anything (locks, quorum, 595) or the connection never opened. */
const struct pve_endpoint pve_endpoints[_PVE_EP_MAX] = {
    /* pve_request(): the caller's path */
    [PVE_EP_RAW_GET] = {"raw GET", "GET", "{path}", PVE_INTO_DATA, PVE_RETRY_ALWAYS},
    [PVE_EP_RAW_PUT] = {"raw PUT", "PUT", "{path}", PVE_INTO_DATA, PVE_RETRY_ALWAYS},
    [PVE_EP_RAW_POST] = {"raw POST", "POST", "{path}", PVE_INTO_DATA, PVE_RETRY_NONE},
    [PVE_EP_RAW_DELETE] = {"raw DELETE", "DELETE", "{path}", PVE_INTO_DATA, PVE_RETRY_NONE},

    [PVE_EP_VERSION] = {"version", "GET", "/version", PVE_INTO_DATA, PVE_RETRY_ALWAYS},
    [PVE_EP_NODE_VERSION] = {"node version", "GET", "/nodes/{node}/version", PVE_INTO_DATA,
                             PVE_RETRY_ALWAYS},
    [PVE_EP_NEXTID] = {"nextid", "GET", "/cluster/nextid", PVE_INTO_VMID, PVE_RETRY_ALWAYS},
    [PVE_EP_CLUSTER_RESOURCES] = {"cluster resources", "GET", "/cluster/resources?type=vm",
                                  PVE_INTO_VMS, PVE_RETRY_ALWAYS},
    [PVE_EP_CLUSTER_NODES] = {"cluster nodes", "GET", "/cluster/resources?type=node", PVE_INTO_DATA,
                              PVE_RETRY_ALWAYS},
    [PVE_EP_POOL] = {"pool", "GET", "/pools/{name}", PVE_INTO_VMS, PVE_RETRY_ALWAYS},
    [PVE_EP_LXC_LIST] = {"lxc list", "GET", "/nodes/{node}/lxc", PVE_INTO_VMS, PVE_RETRY_ALWAYS},

    [PVE_EP_CLONE] = {"clone", "POST", CT "/clone", PVE_INTO_TASK, PVE_RETRY_NOTHING_DONE},
    [PVE_EP_CONFIG_GET] = {"config get", "GET", CT "/config", PVE_INTO_DATA, PVE_RETRY_ALWAYS},
    [PVE_EP_CONFIG_PUT] = {"config put", "PUT", CT "/config", PVE_INTO_DATA, PVE_RETRY_ALWAYS},
    [PVE_EP_RESIZE] = {"resize", "PUT", CT "/resize", PVE_INTO_TASK, PVE_RETRY_SAFE},
    [PVE_EP_START] = {"start", "POST", CT "/status/start", PVE_INTO_TASK, PVE_RETRY_SAFE},
    [PVE_EP_STOP] = {"stop", "POST", CT "/status/stop", PVE_INTO_TASK, PVE_RETRY_SAFE},
    [PVE_EP_SHUTDOWN] = {"shutdown", "POST", CT "/status/shutdown", PVE_INTO_TASK, PVE_RETRY_SAFE},
    [PVE_EP_DELETE] = {"delete", "DELETE", CT, PVE_INTO_TASK, PVE_RETRY_SAFE},
    [PVE_EP_STATUS_CURRENT] = {"status", "GET", CT "/status/current", PVE_INTO_CT_STATE,
                               PVE_RETRY_ALWAYS},
    [PVE_EP_INTERFACES] = {"interfaces", "GET", CT "/interfaces", PVE_INTO_IPV4, PVE_RETRY_ALWAYS},

    [PVE_EP_TASK_STATUS] = {"task status", "GET", TASK "/status", PVE_INTO_TASK_STATUS,
                            PVE_RETRY_ALWAYS},
    [PVE_EP_TASK_LOG] = {"task log", "GET", TASK "/log", PVE_INTO_DATA, PVE_RETRY_ALWAYS},

    [PVE_EP_CLUSTER_FW_OPTIONS] = {"cluster firewall options", "GET", "/cluster/firewall/options",
                                   PVE_INTO_DATA, PVE_RETRY_ALWAYS},
    [PVE_EP_FW_OPTIONS_PUT] = {"firewall options", "PUT", CT "/firewall/options", PVE_INTO_DATA,
                               PVE_RETRY_ALWAYS},
    [PVE_EP_FW_IPSET_CREATE] = {"ipset create", "POST", CT "/firewall/ipset", PVE_INTO_DATA,
                                PVE_RETRY_NOTHING_DONE},
    [PVE_EP_FW_IPSET_ADD] = {"ipset add", "POST", CT "/firewall/ipset/{name}", PVE_INTO_DATA,
                             PVE_RETRY_NOTHING_DONE},
    [PVE_EP_FW_IPSET_DELETE] = {"ipset delete", "DELETE", CT "/firewall/ipset/{name}",
                                PVE_INTO_DATA, PVE_RETRY_ALWAYS},
    [PVE_EP_FW_IPSET_LIST] = {"ipset list", "GET", CT "/firewall/ipset", PVE_INTO_DATA,
                              PVE_RETRY_ALWAYS},
    [PVE_EP_FW_IPSET_GET] = {"ipset entries", "GET", CT "/firewall/ipset/{name}", PVE_INTO_DATA,
                             PVE_RETRY_ALWAYS},
    [PVE_EP_FW_RULES] = {"firewall rules", "GET", CT "/firewall/rules", PVE_INTO_RULES,
                         PVE_RETRY_ALWAYS},
    [PVE_EP_FW_RULE_ADD] = {"firewall rule add", "POST", CT "/firewall/rules", PVE_INTO_DATA,
                            PVE_RETRY_NOTHING_DONE},
    [PVE_EP_FW_RULE_DELETE] = {"firewall rule delete", "DELETE", CT "/firewall/rules/{pos}",
                               PVE_INTO_DATA, PVE_RETRY_NOTHING_DONE},
    [PVE_EP_SNAPSHOT_LIST] = {"snapshot list", "GET", CT "/snapshot", PVE_INTO_DATA,
                              PVE_RETRY_ALWAYS},
    [PVE_EP_SNAPSHOT] = {"snapshot", "POST", CT "/snapshot", PVE_INTO_TASK, PVE_RETRY_NOTHING_DONE},
    [PVE_EP_SNAPSHOT_ROLLBACK] = {"snapshot rollback", "POST", CT "/snapshot/{name}/rollback",
                                  PVE_INTO_TASK, PVE_RETRY_SAFE},
    [PVE_EP_SNAPSHOT_DELETE] = {"snapshot delete", "DELETE", CT "/snapshot/{name}", PVE_INTO_TASK,
                                PVE_RETRY_SAFE},
    /* data null: the conversion runs in a vztemplate task whose UPID is not returned */
    [PVE_EP_TEMPLATE] = {"template", "POST", CT "/template", PVE_INTO_DATA, PVE_RETRY_NOTHING_DONE},
    /* refused before its task while a config is locked: resent then like start or stop */
    [PVE_EP_MOVE_VOLUME] = {"move volume", "POST", CT "/move_volume", PVE_INTO_TASK,
                            PVE_RETRY_SAFE},
};

static int put_escaped(FILE *f, const char *s)
{
    _cleanup_free_ char *e = NULL;

    if (!s || !*s)
        return -EINVAL;
    if (http_url_escape(s, &e) < 0)
        return -ENOMEM;
    fputs(e, f);
    return 0;
}

static int put_node(FILE *f, const struct pve_path *a)
{
    struct pve_upid u;

    if (a->node && *a->node)
        return put_escaped(f, a->node);
    if (!a->upid || pve_upid_parse(a->upid, &u) < 0)
        return -EINVAL;
    return put_escaped(f, u.node);
}

static int put_placeholder(FILE *f, const char *name, size_t len, const struct pve_path *a)
{
    struct pve_upid u;

#define IS(s) (len == strlen(s) && memcmp(name, s, len) == 0)
    if (IS("node"))
        return put_node(f, a);
    if (IS("vmid")) {
        if (a->vmid < PVE_VMID_MIN || a->vmid > PVE_VMID_MAX)
            return -EINVAL;
        fprintf(f, "%u", a->vmid);
        return 0;
    }
    if (IS("upid")) {
        if (!a->upid || pve_upid_parse(a->upid, &u) < 0)
            return -EINVAL;
        fputs(a->upid, f);
        return 0;
    }
    if (IS("name"))
        return put_escaped(f, a->name);
    if (IS("pos")) {
        if (a->pos < 0)
            return -EINVAL;
        fprintf(f, "%d", a->pos);
        return 0;
    }
    if (IS("path")) {
        if (!a->path || a->path[0] != '/')
            return -EINVAL;
        fputs(a->path, f);
        return 0;
    }
#undef IS
    return -EINVAL;
}

int pve_endpoint_path(const struct pve_endpoint *ep, const struct pve_path *args, char **ret_path)
{
    _cleanup_free_ char *s = NULL;
    size_t size = 0;
    FILE *f;
    int r = 0;

    if (!ep || !args)
        return -EINVAL;
    f = open_memstream(&s, &size);
    if (!f)
        return -ENOMEM;
    for (const char *p = ep->path; *p && r == 0; p++) {
        const char *end;
        if (*p != '{') {
            fputc(*p, f);
            continue;
        }
        end = strchr(p, '}');
        if (!end) {
            r = -EINVAL;
            break;
        }
        r = put_placeholder(f, p + 1, (size_t)(end - p - 1), args);
        p = end;
    }
    if (fclose(f) != 0 && r == 0)
        r = -ENOMEM;
    if (r < 0)
        return r;
    *ret_path = TAKE_PTR(s);
    return 0;
}

int pve_params_new(const struct pve_param *v, size_t n, struct json_object **ret_params)
{
    _cleanup_(pve_json_putp) struct json_object *o = json_object_new_object();

    if (!o)
        return -ENOMEM;
    for (size_t i = 0; i < n; i++) {
        struct json_object *val = NULL;
        switch (v[i].type) {
        case PVE_PARAM_SKIP:
            continue;
        case PVE_PARAM_STRING:
            if (!v[i].s)
                continue;
            val = json_object_new_string(v[i].s);
            break;
        case PVE_PARAM_INT:
            val = json_object_new_int64(v[i].i);
            break;
        case PVE_PARAM_BOOL:
            val = json_object_new_boolean(v[i].i != 0);
            break;
        }
        if (!val)
            return -ENOMEM;
        if (json_object_object_add(o, v[i].key, val) < 0) {
            json_object_put(val);
            return -ENOMEM;
        }
    }
    *ret_params = TAKE_PTR(o);
    return 0;
}
