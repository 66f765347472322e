/* The audit trail. See audit.h. */
#include "audit.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/uio.h>
#include <systemd/sd-journal.h>

#include "log.h"
#include "metrics.h"

#define AUDIT_MSG_MAX 1024
#define AUDIT_FIELDS_MAX 11

static int journal_mode = -1; /* -1: not yet detected */

void audit_set_journal(int on)
{
    journal_mode = on;
}

static bool needs_quotes(const char *v)
{
    if (!*v)
        return true;
    for (const char *p = v; *p; p++)
        if (*p == ' ' || *p == '"' || *p == '=' || *p == '\\' || (unsigned char)*p < 0x20)
            return true;
    return false;
}

/* Appends " key=value" (logfmt) to buf. */
static void kv(char *buf, size_t size, const char *key, const char *v)
{
    size_t n = strlen(buf);

    if (!v || n + 1 >= size)
        return;
    n += (size_t)snprintf(buf + n, size - n, " %s=", key);
    if (n >= size)
        return;
    if (!needs_quotes(v)) {
        snprintf(buf + n, size - n, "%s", v);
        return;
    }
    if (n + 1 < size)
        buf[n++] = '"';
    for (const char *p = v; *p && n + 3 < size; p++) {
        unsigned char ch = (unsigned char)*p;
        if (ch == '"' || ch == '\\')
            buf[n++] = '\\';
        buf[n++] = ch < 0x20 ? ' ' : (char)ch;
    }
    buf[n++] = '"';
    buf[n] = 0;
}

static void emit_stream(const struct audit_record *rec, const char *msg, const char *vmid,
                        const char *caller, const char *owner)
{
    char line[AUDIT_MSG_MAX * 2 + 512] = "";

    kv(line, sizeof line, "event", rec->event);
    kv(line, sizeof line, "sandbox", rec->sandbox);
    kv(line, sizeof line, "vmid", vmid);
    kv(line, sizeof line, "node", rec->node);
    kv(line, sizeof line, "caller_uid", caller);
    kv(line, sizeof line, "owner_uid", owner);
    kv(line, sizeof line, "reason", rec->reason);
    kv(line, sizeof line, "message", msg);
    log_emit(rec->priority, "audit", "%s", line + 1);
}

/* Adds "NAME=value" to iov (value NULL: left out); storage is one buffer per field. */
static void field(struct iovec *iov, size_t *n, char (*store)[AUDIT_MSG_MAX + 64], const char *name,
                  const char *v)
{
    int k;

    if (!v)
        return;
    k = snprintf(store[*n], sizeof store[*n], "%s=%s", name, v);
    if (k < 0)
        return;
    iov[*n].iov_base = store[*n];
    iov[*n].iov_len = MIN((size_t)k, sizeof store[*n] - 1);
    (*n)++;
}

static int emit_journal(const struct audit_record *rec, const char *msg, const char *vmid,
                        const char *caller, const char *owner)
{
    static char store[AUDIT_FIELDS_MAX][AUDIT_MSG_MAX + 64];
    struct iovec iov[AUDIT_FIELDS_MAX];
    char prio[4];
    size_t n = 0;

    snprintf(prio, sizeof prio, "%d", rec->priority);
    field(iov, &n, store, "MESSAGE", msg);
    field(iov, &n, store, "PRIORITY", prio);
    field(iov, &n, store, "SYSLOG_IDENTIFIER", "sandboxd");
    field(iov, &n, store, "SANDBOXD_EVENT", rec->event);
    field(iov, &n, store, "SANDBOXD_SANDBOX", rec->sandbox);
    field(iov, &n, store, "SANDBOXD_VMID", vmid);
    field(iov, &n, store, "SANDBOXD_NODE", rec->node);
    field(iov, &n, store, "SANDBOXD_CALLER_UID", caller);
    field(iov, &n, store, "SANDBOXD_OWNER_UID", owner);
    field(iov, &n, store, "SANDBOXD_REASON", rec->reason);
    return sd_journal_sendv(iov, (int)n);
}

void audit_emit(const struct audit_record *rec, const char *fmt, ...)
{
    char msg[AUDIT_MSG_MAX], vmid[16], caller[24], owner[24];
    va_list ap;

    metrics_add(M_AUDIT_EVENTS, rec->event, NULL, 1);
    if (!log_is_enabled(rec->priority))
        return;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    for (char *p = msg; *p; p++)
        if (*p == '\n' || *p == '\r')
            *p = ' ';
    snprintf(vmid, sizeof vmid, "%" PRIu32, rec->vmid);
    snprintf(caller, sizeof caller, "%" PRId64, rec->caller_uid);
    snprintf(owner, sizeof owner, "%" PRId64, rec->owner_uid);
    if (journal_mode < 0)
        journal_mode = log_stderr_is_journal();
    if (journal_mode &&
        emit_journal(rec, msg, rec->vmid ? vmid : NULL, rec->caller_uid >= 0 ? caller : NULL,
                     rec->owner_uid >= 0 ? owner : NULL) >= 0)
        return;
    emit_stream(rec, msg, rec->vmid ? vmid : NULL, rec->caller_uid >= 0 ? caller : NULL,
                rec->owner_uid >= 0 ? owner : NULL);
}

void audit_reconcile(const char *action, const char *kind, const char *sandbox, uint32_t vmid,
                     const char *node, const char *what)
{
    char event[64];
    bool reattach = strcmp(action, "reattach") == 0;
    struct audit_record rec = {.priority = reattach ? LOG_INFO : LOG_NOTICE,
                               .sandbox = sandbox,
                               .vmid = vmid,
                               .node = node,
                               .caller_uid = AUDIT_NO_UID,
                               .owner_uid = AUDIT_NO_UID,
                               .reason = kind};

    snprintf(event, sizeof event, "reconcile.%s", action);
    rec.event = event;
    metrics_add(M_RECONCILE_ACTIONS, action, NULL, 1);
    audit_emit(&rec, "reconcile: %s sandbox %s (container %" PRIu32 "): %s", action,
               sandbox ? sandbox : "-", vmid, what ? what : kind);
}

void audit_limit(const char *limit, int64_t caller_uid, const char *what)
{
    struct audit_record rec = {.event = "limit.hit",
                               .priority = LOG_NOTICE,
                               .caller_uid = caller_uid,
                               .owner_uid = AUDIT_NO_UID,
                               .reason = limit};

    metrics_add(M_LIMITS, limit, NULL, 1);
    if (caller_uid >= 0)
        audit_emit(&rec, "limit %s hit by uid %" PRId64 ": %s", limit, caller_uid,
                   what ? what : "refused");
    else
        audit_emit(&rec, "limit %s hit: %s", limit, what ? what : "refused");
}

void audit_limit_suppressed(const char *limit)
{
    metrics_add(M_LIMITS, limit, NULL, 1);
    metrics_add(M_AUDIT_EVENTS, "limit.hit", NULL, 1);
}
