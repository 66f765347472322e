/* The port forward methods of docs/protocol.md (sandbox.forward, sandbox.forwards,
 * sandbox.unforward), over the sandbox methods' engine (lib/engine/sandbox-forward.h).
 * Their rows are in the method table (methods-table.c). Loop thread only. */
#pragma once

#include "methods.h"

void method_sandbox_forward(struct req *r, void *params, void *userdata);
void method_sandbox_forwards(struct req *r, void *params, void *userdata);
void method_sandbox_unforward(struct req *r, void *params, void *userdata);
