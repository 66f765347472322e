/* sandbox.exec (docs/protocol.md); its row is in the method table (methods-table.c). Loop
 * thread only. */
#pragma once

#include "methods.h"

void method_sandbox_exec(struct req *r, void *params, void *userdata);
