/* Shared by sftp.c (the session, the queue, deadlines) and sftp-fs.c (the file system
 * operations that run as requests of that queue). Not a public interface. */
#pragma once

#include <libssh/libssh.h>
#include <libssh/sftp.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "sftp.h"

struct sshfile_op;

/* What one kind of operation does. run() runs on a pool thread with the session connected
 * and must not touch the loop; notify() and free() run on the loop thread. */
struct sshfile_op_type {
    int (*run)(struct sshfile *f, struct sshfile_op *op);
    /* Exactly once: with run()'s result, -ETIME at the deadline, -ECANCELED when closed
     * before it started, or an SSH-level error. */
    void (*notify)(int error, struct sshfile_op *op);
    /* After notify(), when the job is over (a worker may still run after a deadline). */
    void (*free)(struct sshfile_op *op);
};

/* The first member of every operation's own struct. */
struct sshfile_op {
    const struct sshfile_op_type *type;
    /* Set by run() before its first call that changes anything: an operation that lost its
     * session after that is not retried on a new one. */
    bool mutated;
};

/* Queues op (taken on success: freed through its type) with f's deadline; path (absolute)
 * names it in logs. Errors as the submit functions of sftp.h; op stays the caller's then. */
int sshfile_submit_op(struct sshfile *f, const char *path, struct sshfile_op *op);

/* For run(): the session and the helpers sftp.c uses itself. */
sftp_session sshfile_sftp(struct sshfile *f);
ssh_session sshfile_ssh(struct sshfile *f);
/* ENOENT or ENOTDIR, found by walking the parents of path. */
int sshfile_refine_enoent(struct sshfile *f, const char *path);
/* A generic failure creating or changing something in dir: EISDIR (path is a folder),
 * EROFS, ENOSPC or EIO. path may be NULL. */
int sshfile_refine_failure(struct sshfile *f, const char *path, const char *dir);
/* mkdir -p dir (missing folders get mode 0755). */
int sshfile_mkdir_parents(struct sshfile *f, const char *dir);
/* rename(2) through `mv -f` on an exec channel: replaces an existing non-folder `to`. */
int sshfile_rename_exec(struct sshfile *f, const char *from, const char *to);
/* `rm -rf -- path` on an exec channel (never follows a link); -EIO when it fails. */
int sshfile_remove_exec(struct sshfile *f, const char *path);
/* What a write would replace: 0 nothing, 1 a regular file (*ret_real: what a link points
 * to), < 0 refused (-EISDIR, -EINVAL) or an error. */
int sshfile_write_target(struct sshfile *f, const char *path, char **ret_real);

/* The in-place write of sftp.h's sshfile_write_params (sftp-fs.c). *mutated is set before
 * the first change. */
int sshfile_write_in_place(struct sshfile *f, const char *path, const void *data, size_t len,
                           mode_t mode, uint64_t offset, bool append, bool *mutated);
