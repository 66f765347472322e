/* The read-only snapshot of struct sandbox for the daemon. See lib/engine/sandbox.h. */
#include "sandbox-internal.h"

static const char *public_state(const struct sandbox *sb)
{
    if (sb->state == SANDBOX_READY && sb->node && sb->engine->cluster &&
        cluster_node_down(sb->engine, sb->node))
        return "unreachable";
    return sandbox_state_to_public(sb->state);
}

void sandbox_view(const struct sandbox *sb, struct sandbox_info *ret)
{
    *ret = (struct sandbox_info){
        .id = sb->id,
        .state = sb->state,
        .public_state = public_state(sb),
        .owner = sb->owner_uid,
        .vmid = sb->vmid,
        .node = sb->node,
        .hostname = sb->hostname,
        .ip = sb->ip,
        .internet = sb->internet,
        .cores = sb->cores,
        .memory_mb = sb->memory_mb,
        .disk_gb = sb->disk_gb,
        .labels = sb->labels,
        .created_at = sb->created_at,
        .expires_at = sb->expires_at,
        .error = sb->error,
        .idem_hash = sb->idem_hash,
        .params_hash = sb->params_hash,
        .template = sb->template,
        .pool = sb->pool_member,
    };
}
