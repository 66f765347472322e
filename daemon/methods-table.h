/* The sandbox methods' table: the rows of methods-sandbox.c, methods-exec.c and
 * methods-file.c in one table, each row's userdata the shared state of methods-common.h
 * unless the row brings its own.
 * Loop thread only. */
#pragma once

/* Registers the table (after methods_sandbox_start()). 0 or a negative errno
 * (methods_register()). */
int methods_table_register(void);
/* Unregisters it (no-op when not registered). */
void methods_table_unregister(void);
