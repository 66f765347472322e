/* Read-only accessors of struct sandbox for the daemon. See lib/sandbox.h. */
#include "sandbox-internal.h"

const char *sandbox_view_id(const struct sandbox *sb)
{
    return sb->id;
}

enum sandbox_state sandbox_view_state(const struct sandbox *sb)
{
    return sb->state;
}

uid_t sandbox_view_owner(const struct sandbox *sb)
{
    return sb->owner_uid;
}

uint32_t sandbox_view_vmid(const struct sandbox *sb)
{
    return sb->vmid;
}

const char *sandbox_view_public_state(const struct sandbox *sb)
{
    if (sb->state == SANDBOX_READY && sb->node && sb->engine->cluster &&
        cluster_node_down(sb->engine, sb->node))
        return "unreachable";
    return sandbox_state_to_public(sb->state);
}

const char *sandbox_view_node(const struct sandbox *sb)
{
    return sb->node;
}

const char *sandbox_view_hostname(const struct sandbox *sb)
{
    return sb->hostname;
}

const char *sandbox_view_ip(const struct sandbox *sb)
{
    return sb->ip;
}

bool sandbox_view_internet(const struct sandbox *sb)
{
    return sb->internet;
}

unsigned sandbox_view_cores(const struct sandbox *sb)
{
    return sb->cores;
}

unsigned sandbox_view_memory_mb(const struct sandbox *sb)
{
    return sb->memory_mb;
}

unsigned sandbox_view_disk_gb(const struct sandbox *sb)
{
    return sb->disk_gb;
}

json_object *sandbox_view_labels(const struct sandbox *sb)
{
    return sb->labels;
}

time_t sandbox_view_created_at(const struct sandbox *sb)
{
    return sb->created_at;
}

time_t sandbox_view_expires_at(const struct sandbox *sb)
{
    return sb->expires_at;
}

const char *sandbox_view_error(const struct sandbox *sb)
{
    return sb->error;
}

const char *sandbox_view_idem_hash(const struct sandbox *sb)
{
    return sb->idem_hash;
}

const char *sandbox_view_params_hash(const struct sandbox *sb)
{
    return sb->params_hash;
}

const char *sandbox_view_template(const struct sandbox *sb)
{
    return sb->template;
}

bool sandbox_view_pool(const struct sandbox *sb)
{
    return sb->pool_member;
}
