/* Security-group calls (pve_fw_group_set): make a container's rule list reference a group or
 * not. Rule positions shift whenever anyone adds or deletes a rule, so the group rule is
 * found by scanning a fresh listing, deleted with that listing's digest, and a change that
 * Proxmox refuses because the list changed meanwhile is retried from a new listing. */
#include "macro.h"

#include "pve-internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define PVE_FW_RELIST_MAX 3 /* listings after the first, on changes refused */

static void fw_list(struct pve_call *call)
{
    const struct pve_fw_group_state *s = &call->u.fw;
    const struct pve_req req = {.ep = PVE_EP_FW_RULES, .path = {.node = s->node, .vmid = s->vmid}};

    pve_call_step(call, &req);
}

static void fw_add(struct pve_call *call)
{
    const struct pve_fw_group_state *s = &call->u.fw;
    /* Proxmox inserts a new rule at position 0, disabled unless enable is given. */
    const struct pve_param pv[] = {
        PVE_STR("type", "group"),
        PVE_STR("action", s->group),
        PVE_INT("enable", 1),
    };
    const struct pve_req req = {
        .ep = PVE_EP_FW_RULE_ADD, .path = {.node = s->node, .vmid = s->vmid}, PVE_PARAMS(pv)};

    pve_call_step(call, &req);
}

static void fw_delete(struct pve_call *call, int pos)
{
    const struct pve_fw_group_state *s = &call->u.fw;
    const struct pve_param pv[] = {PVE_STR("digest", call->rules->digest)};
    const struct pve_req req = {.ep = PVE_EP_FW_RULE_DELETE,
                                .path = {.node = s->node, .vmid = s->vmid, .pos = pos},
                                PVE_PARAMS(pv)};

    pve_call_step(call, &req);
}

/* The listing arrived: change it when it is not as wanted; the change's success ends the
 * call. */
static void fw_step_done(struct pve_call *call)
{
    const struct pve_fw_group_state *s = &call->u.fw;
    int pos;

    if (call->ep != &pve_endpoints[PVE_EP_FW_RULES]) {
        pve_call_finish(call, 0);
        return;
    }
    pos = pve_fw_rules_find_group(call->rules, s->group);
    if ((pos >= 0) == s->present)
        pve_call_finish(call, 0);
    else if (s->present)
        fw_add(call);
    else
        fw_delete(call, pos);
}

/* A digest mismatch (500) or a rule no longer at its position ("no rule at position"):
 * look again. */
static bool fw_step_failed(struct pve_call *call, int r)
{
    struct pve_fw_group_state *s = &call->u.fw;

    if (r != -EREMOTEIO || call->ep == &pve_endpoints[PVE_EP_FW_RULES] ||
        s->relists >= PVE_FW_RELIST_MAX ||
        (call->perr->kind != PVE_ERR_SERVER && call->perr->kind != PVE_ERR_NOT_FOUND) ||
        pve_call_remaining_ms(call) == 0)
        return false;
    s->relists++;
    fw_list(call);
    return true;
}

static void fw_free(struct pve_call *call)
{
    free(call->u.fw.node);
    free(call->u.fw.group);
}

static const struct pve_call_ops fw_group_ops = {
    .step_done = fw_step_done,
    .step_failed = fw_step_failed,
    .free = fw_free,
};

int pve_fw_group_set(struct pve_client *c, const char *node, uint32_t vmid, const char *group,
                     bool present, PVE_CALL_ARGS)
{
    struct pve_fw_group_state *s;
    struct pve_call *call;
    struct pve_req req;
    int r;

    if (!node || !*node || !group || !*group || vmid < PVE_VMID_MIN || vmid > PVE_VMID_MAX)
        return -EINVAL;
    r = pve_call_new(c, PVE_CALL_FW_GROUP, &fw_group_ops, false, timeout_ms, cb, userdata, &call);
    if (r < 0)
        return r;
    s = &call->u.fw;
    s->vmid = vmid;
    s->present = present;
    if (!(s->node = strdup(node)) || !(s->group = strdup(group)))
        r = -ENOMEM;
    if (r == 0) {
        req = (struct pve_req){.ep = PVE_EP_FW_RULES, .path = {.node = node, .vmid = vmid}};
        r = pve_call_request(call, &req);
    }
    return pve_call_started(call, r, ret_call);
}
