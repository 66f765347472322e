/* See methods-cluster.h. */
#include "methods-cluster.h"

#include "rpc.h"

bool node_param_allowed(struct req *r, const struct config *cfg)
{
    switch (cfg->proxmox.node_param) {
    case CONFIG_NODE_PARAM_ANY:
        return true;
    case CONFIG_NODE_PARAM_ADMIN:
        if (req_is_admin(r))
            return true;
        req_error(r, RPC_PERMISSION_DENIED,
                  "node: only admins may choose the node ([proxmox] node_param = admin)");
        return false;
    default:
        req_error(r, RPC_PERMISSION_DENIED,
                  "node: choosing the node is turned off ([proxmox] node_param = off)");
        return false;
    }
}
