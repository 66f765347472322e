/* The method table: every JSON-RPC method the daemon serves, one row each, top to bottom.
 * The handlers live in the methods-*.c file of their area. */
#pragma once

#include "methods.h"

/* Ends with a row whose name is NULL; methods_check() accepts it (a unit test checks). */
extern const struct method_def methods_table[];
