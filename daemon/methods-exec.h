/* sandbox.exec (docs/protocol.md), a row of the sandbox methods' table whose state
 * (struct sandbox_methods) is its userdata. Loop thread only. */
#pragma once

#include "methods.h"

void methods_sandbox_exec(struct req *r, void *params, void *userdata);
