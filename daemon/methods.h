/* The method table: JSON-RPC method names mapped onto handlers, and the request
 * context a handler completes, synchronously or later (after any number of loop
 * turns).
 *
 * Contract for a handler:
 *   - it is called on the loop thread with a request context and the request's
 *     params (borrowed; NULL when absent; valid until the request completes);
 *   - it completes the request exactly once, with req_reply(), req_error(),
 *     req_error_data() or req_invalid_params(), now or later; completion frees the
 *     context, so it must not be touched afterwards;
 *   - a notification (no id) is run the same way; its completion sends nothing;
 *   - if the client disconnects (or the daemon's shutdown deadline passes) before
 *     completion, the on_disconnect callback (req_on_disconnect()) is called once;
 *     the request must still be completed (its reply is then discarded), either
 *     from that callback or later. The peer credentials, the server and the config
 *     stay readable until completion.
 *
 * Everything here runs on the loop thread only. */
#pragma once

/* Before <uv.h>: it pulls in <sys/param.h>, whose MIN/MAX would clash. */
#include "lib/macro.h"

#include <json-c/json.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>
#include <uv.h>

struct req;
struct server;
struct config;

typedef void (*method_handler_t)(struct req *req, json_object *params);
typedef void (*req_event_cb)(struct req *req, void *userdata);

struct method_def {
    const char *name;
    method_handler_t handler;
};

/* Looks a method up (the built-in table plus test hooks when enabled). NULL: unknown. */
method_handler_t methods_find(const char *name);
/* Frees cached data (the parsed API document). */
void methods_done(void);
/* Registers the test-only methods (test.sleep); called when SANDBOXD_TEST_HOOKS=1. */
void methods_enable_test_hooks(void);
/* Registers an additional table (e.g. the sandbox lifecycle methods). The array
 * must stay valid for the process's lifetime; it ends with a {NULL, NULL} entry.
 * Returns 0 or -E2BIG when too many tables are registered. */
int methods_register(const struct method_def *table);

/* --- Request context: who is asking, on which server. --- */
uid_t req_uid(const struct req *r); /* SO_PEERCRED of the connection */
gid_t req_gid(const struct req *r);
pid_t req_pid(const struct req *r);
const char *req_method(const struct req *r);
json_object *req_id(const struct req *r); /* borrowed; NULL for a notification */
bool req_is_notification(const struct req *r);
struct server *req_server(const struct req *r);
uv_loop_t *req_loop(const struct req *r);
const struct config *req_config(const struct req *r); /* the live config */
/* False once the client disconnected (replies and notifications are dropped). */
bool req_connected(const struct req *r);

/* Called once if the client goes away (or shutdown's deadline passes) before the
 * request completed. The callback may complete the request. */
void req_on_disconnect(struct req *r, req_event_cb cb, void *userdata);

/* --- Completion (exactly one per request; frees r). --- */
/* result is taken over (NULL means JSON null). */
void req_reply(struct req *r, json_object *result);
/* An error with data {"reason": reason} (sandboxd's own codes always carry one). */
void req_error(struct req *r, int code, const char *reason);
/* An error with a custom data object (taken over; must hold "reason"); message NULL
 * means the code's default message. */
void req_error_data(struct req *r, int code, const char *message, json_object *data);
/* -32602 with data {"reason": reason, "param": param}. */
void req_invalid_params(struct req *r, const char *param, const char *reason);

/* --- Server-to-client notifications on the request's connection (exec.output). ---
 * params is taken over. Returns 0 when queued, -ENOTCONN when the client is gone,
 * -ENOBUFS when the connection's output queue is over its hard cap (dropped: the
 * producer should have paused, see req_output_busy()). */
int req_notify(struct req *r, const char *method, json_object *params);
/* True while the connection's queued output is above its high-water mark: a
 * streaming producer should pause and resume from the on_drain callback. */
bool req_output_busy(const struct req *r);
/* One-shot: called when the queued output drops below the low-water mark. Not
 * called once the client is gone (on_disconnect is). */
void req_on_drain(struct req *r, req_event_cb cb, void *userdata);

/* daemon.status: the engine fills in "sandboxes" (count per state) and "proxmox"
 * ({"reachable", "last_error"}) by replacing those members of `status`. Without a
 * provider they read {} and {"configured": false/true, "reachable": null,
 * "last_error": "not configured"/"not connected yet"}. */
typedef void (*status_provider_t)(json_object *status, void *userdata);
void methods_set_status_provider(status_provider_t fn, void *userdata);
