/* resume_on_use (docs/protocol.md "Pause and resume"): a request that needs a sandbox's
 * container, on a paused sandbox created with resume_on_use, resumes it first
 * (lib/engine/sandbox-pause.h) and runs its handler again once the sandbox is ready. Below
 * methods-common.c, which calls it from methods_sandbox_find(): it replies errors through the
 * function it is given. Loop thread only. */
#pragma once

#include <stdbool.h>

#include "methods.h"
#include "sandbox.h"

typedef void (*methods_error_fn)(struct req *r, const struct engine_error *err);

/* A request on sb began. When its method needs the container (sandbox.exec, file.*,
 * process.*, sandbox.forward, the snapshot methods, sandbox.resize, sandbox.set_internet),
 * sb's idle time (auto_pause_s) restarts; when sb is moreover paused with resume_on_use, sb
 * is resumed and handler(r, params, userdata) runs again once it is ready (or r gets the
 * resume's error through reply_error): returns true, the caller stops. Else false. */
bool methods_resume_first(struct req *r, struct engine *e, struct sandbox *sb,
                          method_handler_t handler, void *params, void *userdata,
                          methods_error_fn reply_error);
/* The same for a handler that looks its sandbox up itself: the caller's sandbox id, when it
 * exists (else false: the handler answers -32001). */
bool methods_resume_first_id(struct req *r, struct engine *e, const char *id,
                             method_handler_t handler, void *params, void *userdata,
                             methods_error_fn reply_error);
