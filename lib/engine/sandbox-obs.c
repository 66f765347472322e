/* What the engine tells the operator about a sandbox's life: audit records (audit.h),
 * metrics (metrics.h) and lifecycle events for the engine's event hook. Called from the
 * one state setter, from engine_create() and by the sandboxes' SSH pools. */
#include <inttypes.h>

#include "audit.h"
#include "log.h"
#include "metrics.h"
#include "sandbox-internal.h"

static struct audit_record record(const struct sandbox *sb, const char *event, int priority,
                                  const char *reason)
{
    return (struct audit_record){
        .event = event,
        .priority = priority,
        .sandbox = sb->id,
        .vmid = sb->vmid,
        .node = sb->node,
        .caller_uid = sb->end_by_caller ? (int64_t)sb->end_uid : AUDIT_NO_UID,
        .owner_uid = sb->owner_uid,
        .reason = reason,
    };
}

void engine_destroy_reason(struct sandbox *sb, const char *reason, int64_t caller_uid)
{
    if (!sb || sb->end_reason || !reason)
        return;
    sb->end_reason = reason;
    sb->end_by_caller = caller_uid >= 0;
    sb->end_uid = caller_uid >= 0 ? (uid_t)caller_uid : 0;
}

static bool is_create_step(enum sandbox_state s)
{
    return s < SANDBOX_READY;
}

static const char *event_reason(const struct sandbox *sb)
{
    switch (sb->state) {
    case SANDBOX_FAILED:
        return sb->error ? sb->error : "failed";
    case SANDBOX_DESTROYING:
    case SANDBOX_GONE:
        return sb->end_reason;
    default:
        return NULL;
    }
}

static void publish(struct sandbox *sb, const enum sandbox_state *old)
{
    struct engine *e = sb->engine;
    struct sandbox_event ev = {
        .id = sb->id,
        .owner_uid = sb->owner_uid,
        .state = sandbox_state_to_public(sb->state),
        .old_state = old ? sandbox_state_to_public(*old) : NULL,
        .step = sandbox_state_to_string(sb->state),
        .old_step = old ? sandbox_state_to_string(*old) : NULL,
        .reason = event_reason(sb),
        .node = sb->node,
        .vmid = sb->vmid,
        .at = now_realtime(),
    };

    if (e->hooks.event && !e->closing)
        e->hooks.event(&ev, e->hooks.userdata);
}

void sandbox_observe_requested(struct sandbox *sb)
{
    struct audit_record rec = record(sb, "sandbox.create_requested", LOG_INFO, NULL);

    sb->state_since_ms = sb->started_ms;
    rec.caller_uid = sb->owner_uid;
    audit_emit(&rec, "uid %u asked for sandbox %s on node %s", (unsigned)sb->owner_uid, sb->id,
               strna(sb->node));
    publish(sb, NULL);
}

/* The audit record of a transition that matters (others are only events). */
static void audit_transition(struct sandbox *sb, enum sandbox_state old, double secs)
{
    struct audit_record rec;

    switch (sb->state) {
    case SANDBOX_READY:
        if (!is_create_step(old))
            return;
        rec = record(sb, "sandbox.ready", LOG_INFO, NULL);
        rec.caller_uid = sb->owner_uid;
        audit_emit(&rec, "sandbox %s ready for uid %u: container %" PRIu32 " on %s, %s (%.1f s)",
                   sb->id, (unsigned)sb->owner_uid, sb->vmid, strna(sb->node), strna(sb->ip), secs);
        return;
    case SANDBOX_FAILED:
        if (old == SANDBOX_DESTROYING) {
            rec = record(sb, "sandbox.destroy_failed", LOG_ERR, sb->error);
            audit_emit(&rec, "destroying sandbox %s (container %" PRIu32 " on %s) failed: %s",
                       sb->id, sb->vmid, strna(sb->node), strna(sb->error));
            return;
        }
        rec = record(sb, "sandbox.create_failed", LOG_WARNING, sb->error);
        rec.caller_uid = sb->owner_uid;
        audit_emit(&rec, "create of sandbox %s for uid %u failed while %s: %s", sb->id,
                   (unsigned)sb->owner_uid, sandbox_state_to_string(old), strna(sb->error));
        return;
    case SANDBOX_DESTROYING:
        rec = record(sb, "sandbox.destroying", LOG_INFO, sb->end_reason);
        audit_emit(&rec, "destroying sandbox %s (container %" PRIu32 " on %s): %s", sb->id,
                   sb->vmid, strna(sb->node), strna(sb->end_reason));
        return;
    case SANDBOX_GONE:
        rec = record(sb, "sandbox.destroyed", LOG_INFO, sb->end_reason);
        audit_emit(&rec, "sandbox %s destroyed (container %" PRIu32 " on %s): %s", sb->id, sb->vmid,
                   strna(sb->node), strna(sb->end_reason));
        return;
    default:
        return;
    }
}

void sandbox_observe(struct sandbox *sb, enum sandbox_state old)
{
    uint64_t now = now_ms(sb->engine);
    double in_old = (double)(now - sb->state_since_ms) / 1000.0;

    /* A sandbox forgotten without a destroy (allocation failures, the engine closing,
     * even in the middle of a destroy) has no lifecycle to report: the container, if
     * any, is kept. */
    if (sb->state == SANDBOX_GONE && (old != SANDBOX_DESTROYING || sb->engine->closing))
        return;
    if (sb->state == SANDBOX_DESTROYING && !sb->end_reason)
        engine_destroy_reason(sb, sb->create_op ? "rollback" : "other", -1);
    if (is_create_step(old) && sb->state_since_ms)
        metrics_observe(M_CREATE_STEP_SECONDS, sandbox_state_to_string(old), in_old);
    if (is_create_step(old) && sb->state == SANDBOX_READY) {
        metrics_add(M_CREATES, "ready", NULL, 1);
        metrics_observe(M_CREATE_SECONDS, NULL, (double)(now - sb->started_ms) / 1000.0);
    }
    if (sb->state == SANDBOX_FAILED && old != SANDBOX_DESTROYING)
        metrics_add(M_CREATES, "failed", NULL, 1);
    if (sb->state == SANDBOX_GONE)
        metrics_add(M_DESTROYS, sb->end_reason, NULL, 1);
    sb->state_since_ms = now;
    audit_transition(sb, old, (double)(now - sb->started_ms) / 1000.0);
    publish(sb, &old);
}

void sandbox_observe_ssh(int event, unsigned session, void *userdata)
{
    struct sandbox *sb = userdata;
    struct audit_record rec;

    if (sb->engine->closing)
        return;
    if (event == SSHS_EVENT_LOST) {
        metrics_add(M_SSH_SESSIONS_LOST, NULL, NULL, 1);
        rec = record(sb, "ssh.session_lost", LOG_WARNING, "session lost");
        rec.caller_uid = AUDIT_NO_UID;
        audit_emit(&rec, "SSH session #%u to sandbox %s (%s) lost", session, sb->id, strna(sb->ip));
    } else if (event == SSHS_EVENT_RESTORED) {
        metrics_add(M_SSH_RECONNECTS, NULL, NULL, 1);
        rec = record(sb, "ssh.session_restored", LOG_NOTICE, NULL);
        rec.caller_uid = AUDIT_NO_UID;
        audit_emit(&rec, "SSH session #%u to sandbox %s (%s) established again", session, sb->id,
                   strna(sb->ip));
    }
}

void sandbox_observe_reachability(struct sandbox *sb, bool reachable)
{
    struct engine *e = sb->engine;
    struct audit_record rec =
        record(sb, reachable ? "sandbox.reachable" : "sandbox.unreachable",
               reachable ? LOG_NOTICE : LOG_WARNING, reachable ? NULL : "node down");
    struct sandbox_event ev = {
        .id = sb->id,
        .owner_uid = sb->owner_uid,
        .state = reachable ? sandbox_state_to_public(sb->state) : "unreachable",
        .old_state = reachable ? "unreachable" : sandbox_state_to_public(sb->state),
        .step = reachable ? sandbox_state_to_string(sb->state) : "unreachable",
        .old_step = reachable ? "unreachable" : sandbox_state_to_string(sb->state),
        .reason = reachable ? "node back" : "node down",
        .node = sb->node,
        .vmid = sb->vmid,
        .at = now_realtime(),
    };

    audit_emit(&rec, "sandbox %s (container %" PRIu32 " on %s) is %s", sb->id, sb->vmid,
               strna(sb->node), reachable ? "reachable again" : "unreachable: its node is down");
    if (e->hooks.event && !e->closing)
        e->hooks.event(&ev, e->hooks.userdata);
}
