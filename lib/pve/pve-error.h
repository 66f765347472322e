/* Proxmox VE errors: what kind a failed request or task is (by HTTP status and message text),
 * and the error object the client passes on. Pure (no loop, no I/O); pve-error.c. */
#pragma once

#include <json-c/json.h>
#include <stdbool.h>
#include <stddef.h>

#define PVE_MESSAGE_MAX 4096 /* error messages are truncated to this */

enum pve_err_kind {
    PVE_ERR_OTHER = 0,    /* anything not below (4xx other than listed, unknown text) */
    PVE_ERR_LOCKED,       /* "CT is locked (disk)"; pve_error.lock = "disk" */
    PVE_ERR_LOCK_TIMEOUT, /* "can't lock file '...' - got timeout", "got lock request timeout" */
    PVE_ERR_EXISTS,      /* "CT 101 already exists on node 'pve'", nextid "VM 101 already exists" */
    PVE_ERR_NOT_FOUND,   /* "Configuration file '...' does not exist", "pool 'x' does not exist",
                            "no such task", "no such IPSet" */
    PVE_ERR_RUNNING,     /* "CT 100 already running", "... container is running" */
    PVE_ERR_NOT_RUNNING, /* "CT 100 not running" */
    PVE_ERR_NO_QUORUM,   /* "cluster not ready - no quorum?" */
    PVE_ERR_PERMISSION,  /* 403 */
    PVE_ERR_AUTH,        /* 401 (empty body, text in the reason phrase) */
    PVE_ERR_PARAM,       /* 400 (parameter verification; errors map set) */
    PVE_ERR_NOT_IMPLEMENTED, /* 501 */
    PVE_ERR_CONNECTION,      /* 595..599: proxying to the node failed */
    PVE_ERR_SERVER,          /* other 5xx not matched above (e.g. digest mismatch, 502/503) */
    PVE_ERR_TASK,            /* a task ended with an error not matched above */
    _PVE_ERR_KIND_MAX,
};

struct pve_error {
    int http_status; /* the HTTP status; 0 when the error is a task's exitstatus */
    enum pve_err_kind kind;
    char *message;              /* full text without trailing newline: body "message" when present,
                                   else the reason phrase (or the task exitstatus); never NULL */
    struct json_object *errors; /* the "errors" object (param -> message) or NULL; owned */
    char *lock; /* for PVE_ERR_LOCKED: the lock name ("disk", "backup", ...), else NULL */
    char *upid; /* the task's UPID when the error is a task's, else NULL (set by pve.c) */
};

const char *pve_err_kind_to_string(enum pve_err_kind k); /* "locked", "lock_timeout", ... */

/* Classifies by HTTP status and message text (either may be 0/NULL). */
enum pve_err_kind pve_classify(int http_status, const char *message);

/* Builds an error from an HTTP response with status >= 300 (both body forms; an empty or
 * non-JSON body is fine). When "errors" is present and the message is only the generic
 * "Parameter verification failed.", message gets the first "param: msg" appended.
 * Returns 0 or -ENOMEM/-EINVAL. */
int pve_error_from_http(long status, const char *reason, const char *body, size_t body_len,
                        struct pve_error **ret_error);
/* Builds an error from a stopped task's exitstatus (not "OK"/"WARNINGS: n"). */
int pve_error_from_task(const char *exitstatus, const char *upid, struct pve_error **ret_error);
struct pve_error *pve_error_free(struct pve_error *e);
struct pve_error *pve_error_dup(const struct pve_error *e);

/* Worth retrying later (the same request may succeed): locked, lock timeout, no quorum,
 * 595..599, other 5xx (except permanent texts: exists, not found, running/not running). */
bool pve_error_transient(const struct pve_error *e);
/* Transport errors worth retrying: -ETIMEDOUT, -ECONNREFUSED, -EHOSTUNREACH, -ECONNRESET,
 * -EPROTO (garbled response). */
bool pve_errno_transient(int r);
