/* Transfers through descriptors passed with the request (SCM_RIGHTS): file.write with
 * content_fd, file.read with to_fd, sandbox.exec with stdin_fd/stdout_fd. The sandbox
 * methods (methods-sandbox.c, methods-exec.c) hand such requests over once the sandbox is found;
 * these functions complete them. Loop thread only. */
#pragma once

#include "sandbox-io.h"
#include "sandbox.h"
#include "params.h"
#include "req.h"

/* Each running transfer holds one worker of the engine's file pool (lib/ssh/filepool.h) for
 * its whole length, so the engine caps their number (past it: -32007; sandbox-io.h); the
 * pool's per-uid share leaves workers for the file operations of every other uid. */
/* TRANSFER_MAX, TRANSFER_MAX_PER_UID: proto/api-limits.h (via params.h) */

/* params: the struct params_file_write of a file.write (write), else the struct
 * params_file_read of a file.read. */
void transfer_file(struct req *r, struct sandbox *sb, bool write, const void *params);
/* sp: the command as sandbox.exec built it. */
void transfer_exec(struct req *r, struct sandbox *sb, const struct sandbox_exec_params *sp,
                   const struct params_sandbox_exec *p);

/* For the other users of passed descriptors (process.start's pumps): descriptor index taken
 * for access (false: r answered -32602 naming param). */
bool transfer_take_fd(struct req *r, const char *param, int64_t index, enum req_fd_access access,
                      int *ret_fd);
