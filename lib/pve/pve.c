/* The typed Proxmox calls of pve.h that need one endpoint each: each fills the placeholders
 * and parameters of its row of the endpoint table (pve-endpoint.c) and starts the call
 * (pve-call.c). Clone calls are in pve-clone.c, security-group calls in pve-fw.c.
 * A new Proxmox call is a row in pve_endpoints[] plus a wrapper here. */
#include "macro.h"

#include "pve-internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* Calls of an endpoint without placeholders or parameters. */
#define DEFINE_PLAIN_CALL(fn, endpoint)                                                            \
    int fn(struct pve_client *c, PVE_CALL_ARGS)                                                    \
    {                                                                                              \
        return pve_call_start(c, &(struct pve_req){.ep = endpoint}, PVE_CALL_PASS);                \
    }

/* Calls of a container endpoint without parameters. */
#define DEFINE_CT_CALL(fn, endpoint)                                                               \
    int fn(struct pve_client *c, const char *node, uint32_t vmid, PVE_CALL_ARGS)                   \
    {                                                                                              \
        const struct pve_req req = {.ep = endpoint, .path = {.node = node, .vmid = vmid}};         \
        return pve_call_start(c, &req, PVE_CALL_PASS);                                             \
    }

/* Calls of a container endpoint with the caller's parameters. */
#define DEFINE_CT_PARAMS_CALL(fn, endpoint)                                                        \
    int fn(struct pve_client *c, const char *node, uint32_t vmid, struct json_object *params,      \
           PVE_CALL_ARGS)                                                                          \
    {                                                                                              \
        const struct pve_req req = {                                                               \
            .ep = endpoint, .path = {.node = node, .vmid = vmid}, .params = params};               \
        return pve_call_start(c, &req, PVE_CALL_PASS);                                             \
    }

DEFINE_PLAIN_CALL(pve_version, PVE_EP_VERSION)
DEFINE_PLAIN_CALL(pve_nextid, PVE_EP_NEXTID)
DEFINE_PLAIN_CALL(pve_cluster_resources, PVE_EP_CLUSTER_RESOURCES)
DEFINE_PLAIN_CALL(pve_cluster_nodes, PVE_EP_CLUSTER_NODES)
DEFINE_PLAIN_CALL(pve_cluster_fw_options_get, PVE_EP_CLUSTER_FW_OPTIONS)

DEFINE_CT_CALL(pve_start, PVE_EP_START)
DEFINE_CT_CALL(pve_stop, PVE_EP_STOP)
DEFINE_CT_CALL(pve_snapshot_list, PVE_EP_SNAPSHOT_LIST)
DEFINE_CT_CALL(pve_status_current, PVE_EP_STATUS_CURRENT)
DEFINE_CT_CALL(pve_interfaces, PVE_EP_INTERFACES)
DEFINE_CT_CALL(pve_fw_rules_list, PVE_EP_FW_RULES)

DEFINE_CT_PARAMS_CALL(pve_config_put, PVE_EP_CONFIG_PUT)
DEFINE_CT_PARAMS_CALL(pve_fw_options_put, PVE_EP_FW_OPTIONS_PUT)
DEFINE_CT_PARAMS_CALL(pve_fw_rule_add, PVE_EP_FW_RULE_ADD)

int pve_request(struct pve_client *c, const char *method, const char *path,
                struct json_object *params, PVE_CALL_ARGS)
{
    static const enum pve_ep raw[] = {PVE_EP_RAW_GET, PVE_EP_RAW_PUT, PVE_EP_RAW_POST,
                                      PVE_EP_RAW_DELETE};

    for (size_t i = 0; method && i < ELEMENTSOF(raw); i++)
        if (strcmp(method, pve_endpoints[raw[i]].method) == 0) {
            const struct pve_req req = {.ep = raw[i], .path = {.path = path}, .params = params};
            return pve_call_start(c, &req, PVE_CALL_PASS);
        }
    return -EINVAL;
}

int pve_pool_members(struct pve_client *c, const char *poolid, PVE_CALL_ARGS)
{
    const struct pve_req req = {.ep = PVE_EP_POOL, .path = {.name = poolid}};

    return pve_call_start(c, &req, PVE_CALL_PASS);
}

int pve_node_version(struct pve_client *c, const char *node, PVE_CALL_ARGS)
{
    const struct pve_req req = {.ep = PVE_EP_NODE_VERSION, .path = {.node = node}};

    return pve_call_start(c, &req, PVE_CALL_PASS);
}

int pve_lxc_list(struct pve_client *c, const char *node, PVE_CALL_ARGS)
{
    const struct pve_req req = {.ep = PVE_EP_LXC_LIST, .path = {.node = node}};

    return pve_call_start(c, &req, PVE_CALL_PASS);
}

int pve_config_get(struct pve_client *c, const char *node, uint32_t vmid, bool current,
                   PVE_CALL_ARGS)
{
    const struct pve_param pv[] = {PVE_FLAG("current", current)};
    const struct pve_req req = {
        .ep = PVE_EP_CONFIG_GET, .path = {.node = node, .vmid = vmid}, PVE_PARAMS(pv)};

    return pve_call_start(c, &req, PVE_CALL_PASS);
}

int pve_resize(struct pve_client *c, const char *node, uint32_t vmid, const char *disk,
               const char *size, PVE_CALL_ARGS)
{
    const struct pve_param pv[] = {PVE_STR("disk", disk), PVE_STR("size", size)};
    const struct pve_req req = {
        .ep = PVE_EP_RESIZE, .path = {.node = node, .vmid = vmid}, PVE_PARAMS(pv)};

    if (!disk || !size)
        return -EINVAL;
    return pve_call_start(c, &req, PVE_CALL_PASS);
}

/* "mpN" or "unusedN", N 0..255 (pve-container's valid_volume_keys_with_unused()). */
static bool volume_key_valid(const char *key)
{
    const char *d;
    char *end;

    if (!key)
        return false;
    if (strncmp(key, "mp", 2) == 0)
        d = key + 2;
    else if (strncmp(key, "unused", 6) == 0)
        d = key + 6;
    else
        return false;
    if (*d < '0' || *d > '9' || (d[0] == '0' && d[1]))
        return false;
    errno = 0;
    unsigned long n = strtoul(d, &end, 10);
    return errno == 0 && !*end && n < PVE_VOLUME_KEYS;
}

int pve_move_volume(struct pve_client *c, const char *node, uint32_t vmid, const char *key,
                    uint32_t target, const char *target_key, PVE_CALL_ARGS)
{
    const struct pve_param pv[] = {PVE_STR("volume", key), PVE_INT("target-vmid", target),
                                   PVE_STR("target-volume", target_key)};
    const struct pve_req req = {
        .ep = PVE_EP_MOVE_VOLUME, .path = {.node = node, .vmid = vmid}, PVE_PARAMS(pv)};

    if (!volume_key_valid(key) || !volume_key_valid(target_key) || target < PVE_VMID_MIN ||
        target > PVE_VMID_MAX)
        return -EINVAL;
    return pve_call_start(c, &req, PVE_CALL_PASS);
}

int pve_shutdown(struct pve_client *c, const char *node, uint32_t vmid, unsigned shutdown_timeout_s,
                 bool force_stop, PVE_CALL_ARGS)
{
    const struct pve_param pv[] = {PVE_INT("timeout", shutdown_timeout_s),
                                   PVE_BOOL("forceStop", force_stop)};
    const struct pve_req req = {
        .ep = PVE_EP_SHUTDOWN, .path = {.node = node, .vmid = vmid}, PVE_PARAMS(pv)};

    return pve_call_start(c, &req, PVE_CALL_PASS);
}

int pve_delete(struct pve_client *c, const char *node, uint32_t vmid, unsigned flags, PVE_CALL_ARGS)
{
    const struct pve_param pv[] = {
        PVE_FLAG("force", flags & PVE_DELETE_FORCE),
        PVE_FLAG("purge", flags & PVE_DELETE_PURGE),
        PVE_FLAG("destroy-unreferenced-disks", flags & PVE_DELETE_DESTROY_UNREFERENCED),
    };
    const struct pve_req req = {
        .ep = PVE_EP_DELETE, .path = {.node = node, .vmid = vmid}, PVE_PARAMS(pv)};

    return pve_call_start(c, &req, PVE_CALL_PASS);
}

int pve_task_status(struct pve_client *c, const char *node, const char *upid, PVE_CALL_ARGS)
{
    const struct pve_req req = {.ep = PVE_EP_TASK_STATUS, .path = {.node = node, .upid = upid}};

    return pve_call_start(c, &req, PVE_CALL_PASS);
}

int pve_task_log(struct pve_client *c, const char *node, const char *upid, unsigned start,
                 unsigned limit, PVE_CALL_ARGS)
{
    const struct pve_param pv[] = {PVE_INT("start", start), PVE_INT("limit", limit)};
    const struct pve_req req = {
        .ep = PVE_EP_TASK_LOG, .path = {.node = node, .upid = upid}, PVE_PARAMS(pv)};

    return pve_call_start(c, &req, PVE_CALL_PASS);
}

int pve_fw_ipset_create(struct pve_client *c, const char *node, uint32_t vmid, const char *name,
                        PVE_CALL_ARGS)
{
    const struct pve_param pv[] = {PVE_STR("name", name)};
    const struct pve_req req = {
        .ep = PVE_EP_FW_IPSET_CREATE, .path = {.node = node, .vmid = vmid}, PVE_PARAMS(pv)};

    if (!name || !*name)
        return -EINVAL;
    return pve_call_start(c, &req, PVE_CALL_PASS);
}

int pve_fw_ipset_rename(struct pve_client *c, const char *node, uint32_t vmid, const char *from,
                        const char *to, PVE_CALL_ARGS)
{
    const struct pve_param pv[] = {PVE_STR("name", to), PVE_STR("rename", from)};
    const struct pve_req req = {
        .ep = PVE_EP_FW_IPSET_CREATE, .path = {.node = node, .vmid = vmid}, PVE_PARAMS(pv)};

    if (!from || !*from || !to || !*to)
        return -EINVAL;
    return pve_call_start(c, &req, PVE_CALL_PASS);
}

int pve_fw_ipset_delete(struct pve_client *c, const char *node, uint32_t vmid, const char *name,
                        PVE_CALL_ARGS)
{
    const struct pve_param pv[] = {PVE_FLAG("force", true)};
    const struct pve_req req = {.ep = PVE_EP_FW_IPSET_DELETE,
                                .path = {.node = node, .vmid = vmid, .name = name},
                                PVE_PARAMS(pv)};

    if (!name || !*name)
        return -EINVAL;
    return pve_call_start(c, &req, PVE_CALL_PASS);
}

DEFINE_CT_CALL(pve_fw_ipset_list, PVE_EP_FW_IPSET_LIST)

int pve_fw_ipset_get(struct pve_client *c, const char *node, uint32_t vmid, const char *name,
                     PVE_CALL_ARGS)
{
    const struct pve_req req = {.ep = PVE_EP_FW_IPSET_GET,
                                .path = {.node = node, .vmid = vmid, .name = name}};

    if (!name || !*name)
        return -EINVAL;
    return pve_call_start(c, &req, PVE_CALL_PASS);
}

int pve_fw_ipset_add(struct pve_client *c, const char *node, uint32_t vmid, const char *name,
                     const char *cidr, PVE_CALL_ARGS)
{
    const struct pve_param pv[] = {PVE_STR("cidr", cidr)};
    const struct pve_req req = {.ep = PVE_EP_FW_IPSET_ADD,
                                .path = {.node = node, .vmid = vmid, .name = name},
                                PVE_PARAMS(pv)};

    if (!cidr || !*cidr)
        return -EINVAL;
    return pve_call_start(c, &req, PVE_CALL_PASS);
}

int pve_fw_rule_delete(struct pve_client *c, const char *node, uint32_t vmid, int pos,
                       const char *digest, PVE_CALL_ARGS)
{
    const struct pve_param pv[] = {PVE_STR("digest", digest)};
    const struct pve_req req = {.ep = PVE_EP_FW_RULE_DELETE,
                                .path = {.node = node, .vmid = vmid, .pos = pos},
                                PVE_PARAMS(pv)};

    return pve_call_start(c, &req, PVE_CALL_PASS);
}

bool pve_error_no_such(const struct pve_result *res)
{
    return res && res->error == -EREMOTEIO && res->perr && res->perr->message &&
           strstr(res->perr->message, "no such ");
}

bool pve_error_exists(const struct pve_result *res)
{
    if (!res || res->error != -EREMOTEIO || !res->perr)
        return false;
    if (res->perr->message && strstr(res->perr->message, "already exists"))
        return true;
    if (!res->perr->errors)
        return false;
    json_object_object_foreach(res->perr->errors, k, v)
    {
        (void)k;
        if (json_object_is_type(v, json_type_string) &&
            strstr(json_object_get_string(v), "already exists"))
            return true;
    }
    return false;
}

int pve_snapshot(struct pve_client *c, const char *node, uint32_t vmid, const char *name,
                 PVE_CALL_ARGS)
{
    const struct pve_param pv[] = {PVE_STR("snapname", name)};
    const struct pve_req req = {
        .ep = PVE_EP_SNAPSHOT, .path = {.node = node, .vmid = vmid}, PVE_PARAMS(pv)};

    if (!name || !*name)
        return -EINVAL;
    return pve_call_start(c, &req, PVE_CALL_PASS);
}

int pve_template(struct pve_client *c, const char *node, uint32_t vmid, PVE_CALL_ARGS)
{
    const struct pve_req req = {.ep = PVE_EP_TEMPLATE, .path = {.node = node, .vmid = vmid}};

    return pve_call_start(c, &req, PVE_CALL_PASS);
}

/* The snapshot's name is a path placeholder of both calls. */
static int snapshot_named_call(struct pve_client *c, enum pve_ep ep, const char *node,
                               uint32_t vmid, const char *name, PVE_CALL_ARGS)
{
    const struct pve_req req = {.ep = ep, .path = {.node = node, .vmid = vmid, .name = name}};

    if (!name || !*name)
        return -EINVAL;
    return pve_call_start(c, &req, PVE_CALL_PASS);
}

int pve_snapshot_rollback(struct pve_client *c, const char *node, uint32_t vmid, const char *name,
                          PVE_CALL_ARGS)
{
    return snapshot_named_call(c, PVE_EP_SNAPSHOT_ROLLBACK, node, vmid, name, PVE_CALL_PASS);
}

int pve_snapshot_delete(struct pve_client *c, const char *node, uint32_t vmid, const char *name,
                        PVE_CALL_ARGS)
{
    return snapshot_named_call(c, PVE_EP_SNAPSHOT_DELETE, node, vmid, name, PVE_CALL_PASS);
}
