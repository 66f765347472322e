/* The process.* methods of docs/protocol.md: background processes in a sandbox, over the
 * sandbox methods' engine (methods-sandbox.h). Loop thread only. */
#pragma once

/* Registers the table (after methods_sandbox_start()). 0 or a negative errno. */
int methods_process_start(void);
void methods_process_stop(void);
