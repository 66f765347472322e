/* A create whose node goes down before the sandbox is ready is placed again on another node
 * within its deadline: its Proxmox call is cancelled, and it starts over from the choice of
 * a container id on the new node. The half-made container stays on the old node: it carries
 * the sandbox's marker, and reconcile destroys it once that node answers (it is not the
 * sandbox's recorded container, so it is a leftover; the record stays with the live one). */
#include "macro.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>

#include "audit.h"
#include "log.h"
#include "pve.h"
#include "sandbox-internal.h"

#define COMP "sandbox"

#define REPLACE_MAX 3u /* placements again per create */

static bool replaceable(struct sandbox *sb)
{
    struct engine *e = sb->engine;

    return !e->closing && !sb->destroy_requested && sb->create_op && !sb->create_op->failed &&
           sb->state < SANDBOX_READY && !sb->no_replace && sb->replacements < REPLACE_MAX &&
           sb->node && cluster_node_down(e, sb->node) && cluster_alternatives(e) &&
           now_ms(e) < sb->deadline_ms;
}

/* Moves the create to another node now. Returns 0, or -EHOSTDOWN when no node is left. */
static int replace_now(struct sandbox *sb)
{
    struct engine *e = sb->engine;
    struct engine_error perr;
    const char *node;
    char *nn;
    struct audit_record rec = {.event = "sandbox.replaced",
                               .priority = LOG_NOTICE,
                               .sandbox = sb->id,
                               .vmid = sb->clone_issued ? sb->vmid : 0,
                               .node = sb->node,
                               .caller_uid = AUDIT_NO_UID,
                               .owner_uid = sb->owner_uid,
                               .reason = "node down"};

    if (cluster_place(e, sandbox_template(sb), NULL, sb->memory_mb, &node, &perr) < 0)
        return -EHOSTDOWN;
    nn = strdup(node);
    if (!nn)
        return -ENOMEM;
    if (sb->call)
        pve_call_cancel(TAKE_PTR(sb->call));
    uv_timer_stop(&sb->timer);
    sandbox_close_ssh(sb);
    if (sb->clone_issued)
        audit_emit(&rec,
                   "create of sandbox %s moves from node %s to %s: container %" PRIu32
                   " on %s is destroyed once %s answers",
                   sb->id, sb->node, nn, sb->vmid, sb->node, sb->node);
    else
        audit_emit(&rec, "create of sandbox %s moves from node %s to %s", sb->id, sb->node, nn);
    free(sb->node);
    sb->node = nn;
    sb->vmid = 0;
    sb->clone_issued = false;
    sb->resumed = false;
    free(sb->upid);
    sb->upid = NULL;
    if (!engine_static_addresses(e)) {
        free(sb->ip);
        sb->ip = NULL;
    }
    free(sb->net0);
    sb->net0 = NULL;
    sb->rootfs_gb = 0;
    sb->vmid_attempts = 0;
    sb->host_key[0] = '\0';
    sb->replacements++;
    create_restart(sb);
    return 0;
}

static void on_replace_timer(uv_timer_t *t)
{
    struct sandbox *sb = t->data;
    struct engine_error err = {.kind = ENGINE_E_PROXMOX,
                               .error = -EHOSTDOWN,
                               .message = "the sandbox's node went down and no other node could "
                                          "take the create"};

    if (!sb->create_op || sb->state >= SANDBOX_READY)
        return; /* a destroy or the engine's close took over meanwhile */
    sb->refs++;
    if (!replaceable(sb) || replace_now(sb) < 0) {
        sb->no_replace = true;
        create_fail_now(sb, &err);
    }
    sandbox_unref(sb);
}

bool create_replace(struct sandbox *sb)
{
    if (!replaceable(sb))
        return false;
    log_debug(COMP, "%s: node %s is down: placing the create again", sb->id, sb->node);
    uv_timer_start(&sb->timer, on_replace_timer, 0, 0);
    return true;
}

void creates_replace(struct engine *e)
{
    struct sandbox *sb, *next;

    for (sb = e->sandboxes; sb; sb = next) {
        next = sb->next;
        /* only creates waiting on Proxmox (a call, a poll): the others fail on their own and
         * come back through create_replace() */
        if (!replaceable(sb) || !(sb->call || uv_is_active((uv_handle_t *)&sb->timer)))
            continue;
        sb->refs++;
        if (replace_now(sb) < 0)
            sb->no_replace = true;
        next = sb->next;
        sandbox_unref(sb);
    }
}
