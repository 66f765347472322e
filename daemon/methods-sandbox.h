/* The sandbox methods of docs/protocol.md (sandbox.create/get/list/set_internet/renew/resize/
 * destroy, file.write, file.read) over the engine in lib/engine/sandbox.h, and the daemon.status
 * provider. Their rows join sandbox.exec (methods-exec.c) and the file system methods
 * (methods-file.c) in the sandbox methods' table (methods-table.c). Loop thread only. */
#pragma once

#include <uv.h>

#include "config.h"
#include "methods-common.h" /* the shared helpers, for the files that include this one */
#include "methods-daemon.h"
#include "methods.h"

#define METHODS_SANDBOX_ROWS 9
extern const struct method_def methods_sandbox_rows[METHODS_SANDBOX_ROWS];

/* Creates the engine on loop with the live config (into methods_sandbox_state()), starts the
 * reconcile and the daemon.status provider with md. Returns 0 or a negative errno (the error
 * is logged). The table is registered apart (methods-table.h). */
int methods_sandbox_start(uv_loop_t *loop, const struct config *cfg, struct methods_daemon *md);
/* After a reload: the warm pool follows the new [pool] targets. */
void methods_sandbox_reload(void);
/* Closes the engine (sandboxes stay in Proxmox); the loop runs the rest. */
void methods_sandbox_stop(void);
