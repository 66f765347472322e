/* The audit trail: one structured record per state change an operator must be able to
 * trace (docs/sandboxd.8.scd lists the events and fields).
 *
 * Under journald (stderr is the journal stream, $JOURNAL_STREAM) a record is one journal
 * entry sent with sd_journal_sendv(): MESSAGE (readable), PRIORITY, SYSLOG_IDENTIFIER and
 * the fields SANDBOXD_EVENT, SANDBOXD_SANDBOX, SANDBOXD_VMID, SANDBOXD_NODE,
 * SANDBOXD_CALLER_UID, SANDBOXD_OWNER_UID, SANDBOXD_REASON (absent when unknown).
 * Otherwise (foreground, tests) it is one line on the log stream, component "audit",
 * in logfmt:
 *   notice: [audit ] event=sandbox.destroyed sandbox=sb-... vmid=1001 node=pve
 *   caller_uid=1000 owner_uid=1000 reason=caller message="..."
 * (one line; values with spaces, quotes, '=' or backslashes are double-quoted with \" and
 * \\ escapes; absent fields are left out). Records obey the log level like any line.
 *
 * Every record is also counted in sandboxd_audit_events_total{event}. Loop thread only. */
#pragma once

#include <stdint.h>

#include "macro.h"

/* Negative uid: none (the daemon acted on its own). */
#define AUDIT_NO_UID ((int64_t)-1)

struct audit_record {
    const char *event; /* "sandbox.create_requested", ... */
    int priority;      /* syslog's LOG_* */
    const char *sandbox;
    uint32_t vmid; /* 0: none */
    const char *node;
    int64_t caller_uid; /* AUDIT_NO_UID: none */
    int64_t owner_uid;
    const char *reason;
};

void audit_emit(const struct audit_record *rec, const char *fmt, ...) _printf_(2, 3);
/* Forces the journal on or off (default: detected once, like log.c's prefixes). */
void audit_set_journal(int on);

/* A reconcile action ("reattach", "destroy", "forget"): audit event "reconcile.<action>"
 * at notice level (info for reattach), counted in sandboxd_reconcile_actions_total. kind:
 * the reason class ("orphan", "rollback", "lease_expired", ...); what: readable detail. */
void audit_reconcile(const char *action, const char *kind, const char *sandbox, uint32_t vmid,
                     const char *node, const char *what);
/* A request refused by a limit: event "limit.hit" (notice), sandboxd_limits_hit_total{limit}. */
void audit_limit(const char *limit, int64_t caller_uid, const char *what);
/* A limit hit whose record a rate limit suppresses: counted in the metrics as
 * audit_limit() counts it, not written. */
void audit_limit_suppressed(const char *limit);
