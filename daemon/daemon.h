/* One daemon: its configuration, server, sandbox methods (the engine and the reconcile),
 * event subscriptions and watchdog, in one struct that every request reaches
 * (req_daemon(): request -> connection -> server -> daemon). Nothing of it is kept in
 * file-scope variables, so two daemons can run in one process (on one loop or two); what
 * is still process-wide is lib/'s (the log, the metrics registry, the audit journal) and
 * the descriptor transfers of methods-transfer.c and methods-process-fd.c.
 *
 * Its parts start in the order of one table in daemon.c and stop in the reverse order
 * once the server has closed. Loop thread only. */
#pragma once

#include <json-c/json.h>
#include <stdbool.h>
#include <uv.h>

#include "config.h"
#include "events.h"
#include "methods-common.h"
#include "notify.h"
#include "req.h"
#include "server.h"

struct daemon_options {
    const char *socket_path; /* NULL: [server] socket (ignored under socket activation) */
    bool test_hooks;         /* serve the test hooks (SANDBOXD_TEST_HOOKS=1) */
    bool log_level_forced;   /* a reload leaves the log level alone */
};

struct daemon {
    uv_loop_t *loop;
    struct config config; /* the live configuration (owned) */
    struct daemon_options options;
    struct server server;
    struct events events;
    struct sandbox_methods sandbox;
    json_object *openrpc; /* rpc.discover's document, parsed on first use */
    struct watchdog watchdog;
    unsigned n_started; /* parts started, in the order of daemon.c's table */
    /* Called once every part has stopped: the loop then ends when the caller's own
     * handles are closed. */
    void (*on_stopped)(struct daemon *d, void *userdata);
    void *userdata;
};

/* The daemon a request came to (NULL for a server without one: tests). */
static inline struct daemon *req_daemon(const struct req *r)
{
    struct server *s = req_server(r);

    return s ? s->daemon : NULL;
}

/* Starts d on loop with config (taken over, also on failure) and serves. d is
 * zero-initialised but for on_stopped and userdata, which the caller sets. On failure (logged) the
 * parts that started are being stopped: the caller runs the loop until on_stopped, then calls
 * daemon_done(), as after a shutdown. Returns 0 or a negative errno. */
int daemon_start(struct daemon *d, uv_loop_t *loop, struct config *config,
                 const struct daemon_options *o);
/* Starts stopping: subscriptions end, the server stops accepting and lets the requests in
 * flight finish (within its deadline), then the parts stop in reverse order and
 * on_stopped runs. Idempotent. */
void daemon_shutdown(struct daemon *d);
bool daemon_stopping(const struct daemon *d);
/* SIGHUP: applies what may change live from n (caps, limits, the log level, the pools;
 * the rest is logged as needing a restart). n stays the caller's (its pools are moved
 * out). */
void daemon_reload(struct daemon *d, struct config *n);
/* After on_stopped and the loop's end: frees what is left (the configuration too). */
void daemon_done(struct daemon *d);
