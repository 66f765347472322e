/* What every sandbox-area method shares (methods-sandbox.c, methods-exec.c, methods-file.c,
 * methods-transfer.c, methods-process.c, methods-internet.c): the one state of the sandbox
 * methods, the lookup of the caller's sandbox, parking a request until the first reconcile
 * after a start, letting go of a request whose client left, and the replies of
 * docs/protocol.md for engine errors. Calls nothing in those files. Loop thread only. */
#pragma once

#include <stdbool.h>

#include "sandbox-io.h"
#include "sandbox.h"
#include "methods.h"

struct events;
struct idem_wait;
struct parked;
struct reconcile;
struct waiters;

/* The state of the sandbox methods, a part of the daemon (daemon.h). */
struct sandbox_methods {
    struct engine *engine;       /* NULL when not started */
    struct reconcile *reconcile; /* NULL without [proxmox] */
    struct events *events;       /* where the engine's events go */
    struct idem_wait *idem_waits;
    struct parked *parked;
};

/* The sandbox methods of the daemon r came to. */
struct sandbox_methods *methods_sandbox(const struct req *r);

/* The caller's sandbox, or NULL after replying -32001. */
struct sandbox *methods_sandbox_lookup(struct sandbox_methods *sm, struct req *r, const char *id);
/* Parks r to run handler(r, params, userdata) again once the first reconcile after a start
 * ended; true when parked (or answered for lack of memory). A request naming a sandbox (id)
 * waits only while that sandbox is not in the table yet; id NULL (creates, lists) always
 * waits while that reconcile runs. */
bool methods_sandbox_park(struct req *r, const char *id, method_handler_t handler, void *params,
                          void *userdata);
/* Parks r as methods_sandbox_park() does, else looks the caller's sandbox id up; NULL when r
 * was parked or answered (-32001). */
struct sandbox *methods_sandbox_find(struct req *r, const char *id, method_handler_t handler,
                                     void *params, void *userdata);
/* The first reconcile ended: runs the parked requests in arrival order. */
void methods_sandbox_unpark(struct sandbox_methods *sm);
/* Stopping: answers the parked requests -32011. */
void methods_sandbox_unpark_refuse(struct sandbox_methods *sm);

/* For an on_disconnect callback of work that outlives its request: clears *slot (where the
 * work keeps r), answers -32011 "the client went away" and cancels job unless NULL (its
 * callback then ends the work). True when job was NULL: the caller ends the work itself
 * if nothing else will. */
bool methods_detach(struct req *r, struct req **slot, struct sandbox_job *job);

/* A request waiting for an engine operation that answers later (snapshots, fork, pause,
 * templates); req is NULL once its client left (it was then answered -32011). */
struct methods_wait {
    struct req *req;
};
/* A wait for r, let go of when r's client leaves; NULL after answering r -32603 when out of
 * memory. */
struct methods_wait *methods_wait_new(struct req *r);
/* The operation was refused before it started: frees w and answers r with err. */
void methods_wait_refused(struct methods_wait *w, const struct engine_error *err);
/* The operation ended: answers w's request, if its client is still there, with err or else
 * result (taken: NULL is an empty object), and frees w. */
void methods_wait_end(struct methods_wait *w, const struct engine_error *err, json_object *result);
/* An engine callback answering a json result (userdata: a methods_wait). */
void methods_wait_on_json(const struct engine_error *err, json_object *result, void *userdata);

/* The environment of an exec or process on sb: sb's env (sandbox.create) under the call's
 * own (env: the call's "env" param), into *ret (NULL-terminated; NULL: no variable; free it
 * with sandbox_env_free()). Together they must stay within max_vars variables and max_bytes
 * bytes of names and values: else replies -32602 naming "env" with "max" and returns -E2BIG
 * (also -ENOMEM, replied). */
int methods_env_merge(struct req *r, const struct sandbox *sb, const struct params_kv_list *env,
                      size_t max_vars, size_t max_bytes, char ***ret);

/* Completes r with the error of docs/protocol.md for err. */
void methods_sandbox_reply_error(struct req *r, const struct engine_error *err);
/* -32001 for id. */
void methods_sandbox_reply_not_found(struct req *r, const char *id);
/* -32002 with the sandbox's state. */
void methods_sandbox_reply_state(struct req *r, const struct sandbox *sb);
/* An errno a callback reported, classified by the engine (file: a file operation's). */
void methods_sandbox_reply_io_error(struct req *r, int error, bool file);
/* A file.write/file.read error, with reasons of its own for the deadline and for files that
 * are not regular. */
void methods_sandbox_reply_file_error(struct req *r, int error, bool write);
