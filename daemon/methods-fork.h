/* sandbox.fork of docs/protocol.md over lib/engine/sandbox-fork.h. The owner of the sandbox or
 * an admin only (methods_sandbox_find()); the children belong to the parent's owner. Loop
 * thread only. */
#pragma once

#include "methods.h"

void method_sandbox_fork(struct req *r, void *params, void *userdata);
