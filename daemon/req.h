/* The request context: one JSON-RPC call in flight, as a method handler sees it,
 * and the small interface through which it reaches the connection it came on.
 *
 * A handler completes its request exactly once, with req_reply(), req_error(),
 * req_error_data() or req_invalid_params(), now or after any number of loop
 * turns; completion frees the context. A notification (no id) is run the same
 * way; its completion sends nothing. If the client goes away (or the shutdown
 * deadline passes) first, the on_disconnect callback runs once and the request
 * must still be completed (its reply is then discarded). The peer credentials,
 * the loop and the config stay readable until completion.
 *
 * Loop thread only. This file knows nothing of conn.c: a connection plugs in
 * through struct req_port. */
#pragma once

#include <json-c/json.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <uv.h>

#include "admin.h"
#include "api-limits.h" /* REQ_FDS_MAX */
#include "params.h"
#include "rpc-batch.h"
#include "rpc.h"

struct req;
struct config;
struct server;
typedef void (*req_event_cb)(struct req *req, void *userdata);

/* --- For handlers: who is asking. --- */
uid_t req_uid(const struct req *r); /* SO_PEERCRED of the connection */
gid_t req_gid(const struct req *r);
pid_t req_pid(const struct req *r);
/* Root, or a member of [server] admin_group as resolved at start or reload. */
bool req_is_admin(const struct req *r);
const char *req_method(const struct req *r);
json_object *req_id(const struct req *r); /* borrowed; NULL for a notification */
/* The params as sent (borrowed; NULL when absent), for handlers that need the
 * raw JSON besides the parsed struct. */
json_object *req_params_json(const struct req *r);
bool req_is_notification(const struct req *r);
uv_loop_t *req_loop(const struct req *r);
const struct config *req_config(const struct req *r); /* the live config */
/* The server the request came through (NULL for a port without one: test drivers); from
 * there, its daemon (daemon.h: req_daemon()). */
struct server *req_server(const struct req *r);
/* False once the client disconnected (replies and notifications are dropped). */
bool req_connected(const struct req *r);

/* Called once if the client goes away (or shutdown's deadline passes) before the
 * request completed. The callback may complete the request. */
void req_on_disconnect(struct req *r, req_event_cb cb, void *userdata);

/* True for an entry of a batch (answered with the batch's array). */
bool req_in_batch(const struct req *r);
/* When the request was created (uv_hrtime() scale, ns). */
uint64_t req_started_ns(const struct req *r);

/* Observes every request of a port (metrics, audit of refusals): started right after a
 * request is created, completed with its response (NULL when none is sent) right before it
 * is freed (struct req_port.observer). */
struct req_observer {
    void (*started)(const struct req *r);
    void (*completed)(const struct req *r, json_object *response);
};

/* --- Descriptors passed with the request (SCM_RIGHTS, see docs/protocol.md). ---
 * A request line may come with up to REQ_FDS_MAX open descriptors; params name them by
 * index in the order passed. Whatever the handler does not take is closed when the
 * request completes, so a failed request never leaks what it was sent. */
/* REQ_FDS_MAX: proto/api-limits.h */
/* What a descriptor must allow. */
enum req_fd_access {
    REQ_FD_READ,  /* the daemon reads from it (content_fd, stdin_fd) */
    REQ_FD_WRITE, /* the daemon writes into it (to_fd, stdout_fd) */
};
/* Number of descriptors that came with the request. */
unsigned req_fds(const struct req *r);
/* Takes descriptor index (the caller closes it from now on) after checking that it was
 * passed, not taken already, and is open for access (its file status flags; a socket or
 * a pipe end opened the other way is refused). Returns 0, or -EINVAL with *ret_reason set
 * (for req_invalid_params()). */
int req_take_fd(struct req *r, int64_t index, enum req_fd_access access, int *ret_fd,
                const char **ret_reason);

/* Around a method's handler (methods_dispatch()): a completion inside it frees r only
 * when the handler has returned, so the handler may read r and its params to its end. */
void req_handler_begin(struct req *r);
void req_handler_end(struct req *r);

/* --- Completion (exactly one per request; frees r, or after req_handler_end()). --- */
/* result is taken over (NULL means JSON null). */
void req_reply(struct req *r, json_object *result);
/* An error with data {"reason": reason} (sandboxd's own codes always carry one). */
void req_error(struct req *r, int code, const char *reason);
/* An error with a custom data object (taken over; must hold "reason"); message NULL
 * means the code's default message. */
void req_error_data(struct req *r, int code, const char *message, json_object *data);
/* -32602 with data {"reason": reason, "param": param}. */
void req_invalid_params(struct req *r, const char *param, const char *reason);
/* The param whose value is the file a -32009 (file error) of r concerns (a static string;
 * default "path"): req_error_data() adds data.path (and data.side when not "path") and
 * begins the reason with them. */
void req_set_subject(struct req *r, const char *param);

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

/* ---- The connection side (conn.c and test drivers) ---------------------- */

/* What a request needs from the connection it came on. */
struct req_port_ops {
    /* Queues one message (taken over); 0 or a negative errno. */
    int (*send)(void *conn, json_object *msg);
    size_t (*output_bytes)(const void *conn);
    bool (*open)(const void *conn);   /* replies are still wanted */
    bool (*active)(const void *conn); /* not closing yet (draining counts) */
    uint64_t (*drain_pass)(const void *conn);
    /* After a request of this connection completed (it may read on). */
    void (*completed)(void *conn);
};

/* Descriptors that came with one request line. */
struct req_fds {
    int fd[REQ_FDS_MAX];
    unsigned n;
};
/* Closes every descriptor still held (the slots taken are -1). */
void req_fds_close(struct req_fds *f);

/* The requests in flight on one connection. */
struct req_list {
    struct req *head;
    unsigned n;
};

/* One connection as its requests see it; owned by the connection. */
struct req_port {
    const struct req_port_ops *ops;
    void *conn;
    struct req_list list;
    uv_loop_t *loop;
    const struct config *config;
    const struct admin_set *admins;      /* NULL: only root is admin */
    const struct req_observer *observer; /* NULL: none */
    struct server *server;               /* NULL: none (req_server()) */
    uid_t uid;
    gid_t gid;
    pid_t pid;
    size_t output_high;    /* req_output_busy() above this many queued bytes */
    size_t output_hard;    /* req_notify() refuses above this */
    unsigned inflight_max; /* batch entries past this many requests in flight: -32007; 0: none */
    /* The descriptors of the line being dispatched: req_new() moves them into the request
     * when the line holds one call (not a batch); the connection closes what is left. */
    struct req_fds fds;
};

/* A batch is answered as one array once every entry has completed (proto/rpc-batch.h):
 * the dispatcher holds it while it dispatches, each request while it runs. */
/* Drops one reference to b: the last one sends the array of replies to port (if there
 * is one and port is not NULL). */
void req_batch_release(struct rpc_batch *b, struct req_port *port);

/* Attaches a new request for call to port (linked into port->list; b may be
 * NULL). The request takes its own references to call's id and request. */
int req_new(struct req_port *port, const struct rpc_call *call, struct rpc_batch *b,
            struct req **ret);
/* The dispatcher's parsed params: stored with the request and released with
 * spec->done() when it completes. */
void req_set_params(struct req *r, const struct params_spec *spec, void *parsed);
/* Runs the on_drain callbacks armed before pass (at most one per request per
 * pass). Stops when the connection starts closing. */
void req_list_fire_drain(struct req_port *port, uint64_t pass);
/* Detaches every request from port and runs their on_disconnect callbacks. */
void req_list_detach_all(struct req_port *port);
