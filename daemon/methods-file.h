/* The file system methods of docs/protocol.md (file.list, file.stat, file.remove, file.mkdir,
 * file.rename) over lib/sftp-fs.h. Their rows join the sandbox methods' table
 * (methods-sandbox.c), whose state is their userdata. Loop thread only. */
#pragma once

#include <stdbool.h>

#include "lib/sandbox.h"
#include "methods.h"

#define METHODS_FILE_ROWS 5
extern const struct method_def methods_file_rows[METHODS_FILE_ROWS];

/* From methods-sandbox.c, for these methods. */
struct sandbox_methods;
/* The caller's sandbox, or NULL after replying -32001. */
struct sandbox *methods_sandbox_lookup(struct sandbox_methods *sm, struct req *r, const char *id);
/* -32002 with the sandbox's state. */
void methods_sandbox_reply_state(struct req *r, const struct sandbox *sb);
/* An errno a callback reported, classified by the engine (file: a file operation's). */
void methods_sandbox_reply_io_error(struct req *r, int error, bool file);
