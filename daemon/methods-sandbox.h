/* The sandbox methods of docs/protocol.md (sandbox.create/get/list/set_internet/destroy,
 * sandbox.exec, file.write, file.read; the file system methods of methods-file.c join the
 * same table) over the engine in lib/sandbox.h, and the daemon.status provider. Loop thread
 * only. */
#pragma once

#include <uv.h>

#include "lib/config.h"
#include "methods-daemon.h"
#include "methods.h"

struct engine;
struct engine_error;

/* Creates the engine on loop with the live config, registers the method table and the
 * daemon.status provider with md. Returns 0 or a negative errno (the error is logged). */
int methods_sandbox_start(uv_loop_t *loop, const struct config *cfg, struct methods_daemon *md);
/* After a reload: the warm pool follows the new [pool] targets. */
void methods_sandbox_reload(void);
/* Closes the engine (sandboxes stay in Proxmox); the loop runs the rest. */
void methods_sandbox_stop(void);

/* For the other tables that work on sandboxes (methods-process.c). The engine, NULL when not
 * started. */
struct engine *methods_sandbox_engine(void);
/* Parks r to run handler(r, params, <this table's state>) again once the first reconcile
 * after a start ended; true when parked (as the sandbox methods do for an id not yet
 * re-attached). */
bool methods_sandbox_park(struct req *r, const char *id, method_handler_t handler, void *params);
/* Completes r with the error of docs/protocol.md for err. */
void methods_sandbox_reply_error(struct req *r, const struct engine_error *err);
