/* sandbox.pause and sandbox.resume of docs/protocol.md over lib/engine/sandbox-pause.h. The
 * owner of the sandbox or an admin only, as every sandbox method (methods_sandbox_find()).
 * Loop thread only. */
#pragma once

#include "methods.h"

void method_sandbox_pause(struct req *r, void *params, void *userdata);
void method_sandbox_resume(struct req *r, void *params, void *userdata);
