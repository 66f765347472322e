/* The file system methods of docs/protocol.md (file.list, file.stat, file.remove, file.mkdir,
 * file.rename) over the engine's (sandbox-io.h). Their rows join the sandbox methods' table
 * (methods-table.c), whose state (methods-common.h) is their userdata. Loop thread only. */
#pragma once

#include <stdbool.h>

#include "sandbox.h"
#include "methods.h"

#define METHODS_FILE_ROWS 5
extern const struct method_def methods_file_rows[METHODS_FILE_ROWS];
