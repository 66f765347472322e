/* sandbox.exec (docs/protocol.md), a row of the sandbox methods' table (methods-table.c)
 * whose state (struct sandbox_methods, methods-common.h) is its userdata. Loop thread only. */
#pragma once

#include "methods.h"

#define METHODS_EXEC_ROWS 1
extern const struct method_def methods_exec_rows[METHODS_EXEC_ROWS];

void methods_sandbox_exec(struct req *r, void *params, void *userdata);
