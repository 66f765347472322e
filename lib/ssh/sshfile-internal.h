/* Internals shared by sshfile.c (the session, the queue, deadlines), sshfile-path.c (the
 * worker side's path helpers), sshfile-fs.c (the file system operations that run as
 * requests of that queue), sshfile-stream.c (the worker side of descriptor streams) and
 * sshfile-temp.c (temporary files of failed writes). Not a public interface: nothing else includes
 * this. */
#pragma once

#include <libssh/libssh.h>
#include <libssh/sftp.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "filepool.h"
#include "sshfile.h"
#include "sshs-internal.h"
#include "util.h"

#define SSHFILE_CHUNK (192u * 1024u)
#define SSHFILE_READ_CHUNK (64u * 1024u)
#define SSHFILE_READ_AHEAD 16u
#define SSHFILE_LEFTOVERS 8u /* temporary files a failed write could not remove yet */

enum job_kind {
    JOB_WRITE,
    JOB_READ,
    JOB_OP, /* an operation of sshfile-fs.c */
    JOB_CLOSE,
    JOB_WRITE_FD, /* from a descriptor, to its end (sshfile-stream.c) */
    JOB_READ_FD,  /* into a descriptor */
    JOB_EXEC_FD,  /* a command with descriptors for stdin/stdout */
};

struct sshfile;

struct job {
    uv_work_t work;           /* on libuv's pool, when f has no file pool */
    struct filepool_req preq; /* on f's file pool */
    struct sshfile *f;
    enum job_kind kind;
    struct job *next;
    char *path;
    /* write */
    void *data; /* owned */
    size_t len;
    mode_t mode;
    bool make_parents;
    bool in_place; /* offset/append: written in place, not replaced */
    bool append;
    bool op_mutated; /* an in-place write sent its first change */
    uint64_t woffset;
    sshfile_write_cb wcb;
    /* read */
    uint64_t offset, length;
    sshfile_read_cb rcb;
    struct sshfile_read_result rres;
    /* streams (JOB_*_FD): the descriptors are owned and closed with the job */
    int fd_in, fd_out, fd_err;    /* -1 when unused */
    uint64_t moved;               /* bytes taken from fd_in / put into fd_out */
    _Atomic uint64_t progress_ns; /* uv_hrtime() of the last byte moved: the deadline is
                                   * counted from it (inactivity) */
    bool in_fd_wait; /* under f->mu: the worker waits for a passed descriptor, not for the
                      * session: at the deadline it is told, not cut off (it then removes
                      * its temporary file over the intact session) */
    struct sshfile_exec_fd *exec; /* JOB_EXEC_FD: what to run, and its result */
    size_t prelude_off;           /* JOB_EXEC_FD: bytes of exec->prelude sent */
    sshfile_exec_fd_cb xcb;
    /* op */
    struct sshfile_op *op;
    /* Set by the file that makes the job, so that sshfile.c runs it without naming a
     * function of sshfile-fs.c or sshfile-stream.c: */
    int (*write_in_place)(struct sshfile *f, struct job *j);       /* JOB_WRITE, in_place */
    int (*fill)(struct sshfile *f, struct job *j, sftp_file file); /* JOB_WRITE_FD: the data */
    int (*run)(struct sshfile *f, struct job *j);                  /* JOB_READ_FD, JOB_EXEC_FD */
    void (*release)(struct job *j); /* loop side, when the job is freed: what it owns */
    void *userdata;
    uint64_t deadline; /* uv_now() milliseconds */
    int error;
    bool drop_session;
    bool fresh_session; /* a deadline passed since the session was last used: reconnect */
    bool answered;      /* the callback ran already, at the deadline (loop thread only) */
    bool expired;       /* under f->mu: the deadline passed, the worker gives up */
};

struct sshfile {
    uv_loop_t *loop;
    struct sshs_conf conf;
    uint64_t timeout_ms;
    struct filepool *pool; /* a reference; NULL: libuv's pool */
    uid_t pool_uid;
    const void *pool_group;
    uv_timer_t timer; /* the next deadline of the running or first queued request */
    /* Owned by the job on a worker while busy; the loop thread never touches them. */
    ssh_session ssh;
    sftp_session sftp;
    /* Temporary files of failed writes whose session was cut before they could be removed:
     * removed first thing on the next session. */
    char *leftover[SSHFILE_LEFTOVERS];
    /* Shared with the worker: the socket of the session the running job uses (-1: none).
     * The worker clears it under mu before it may close the socket, so the loop thread can
     * shut it down under mu without racing with the close. */
    uv_mutex_t mu;
    int sock;
    struct job *cur; /* the job handed to a worker */
    bool busy;
    bool stale; /* a deadline passed: the next job starts on a new session */
    struct job *qfirst, *qlast;
    unsigned queued;
    bool closing;
    struct close_notify closed; /* sshfile_close()'s callback, run once f is freed */
};

static inline bool sshfile_job_is_stream(const struct job *j)
{
    return j->kind == JOB_WRITE_FD || j->kind == JOB_READ_FD || j->kind == JOB_EXEC_FD;
}

/* ---- sshfile-path.c: on a pool thread, with the job's session ---- */

/* The errno for the last failed SFTP call; a dead session is an SSH-level error. */
int sshfile_last_error(struct sshfile *f);
/* stat (following links): 0 missing, SSH_FILEXFER_TYPE_* when present (its size in
 * *ret_size, which may be NULL), < 0 other errors. */
int sshfile_path_type(struct sshfile *f, const char *path, uint64_t *ret_size);
/* ENOENT or ENOTDIR, found by walking the parents of path. */
int sshfile_refine_enoent(struct sshfile *f, const char *path);
/* The errno behind OpenSSH's SSH_FX_BAD_MESSAGE (-EBADMSG here), which stands for both
 * ENAMETOOLONG and EINVAL: -ENAMETOOLONG when path a or b (either may be NULL) is longer than
 * PATH_MAX or has a component longer than NAME_MAX, else -EINVAL. */
int sshfile_bad_message_errno(const char *a, const char *b);
/* A generic failure creating or changing something in dir: EISDIR (path is a folder),
 * EROFS, ENOSPC or EIO. path may be NULL. */
int sshfile_refine_failure(struct sshfile *f, const char *path, const char *dir);
/* Opens a regular file for reading; *ret_size is the size stat reports. */
int sshfile_read_open(struct sshfile *f, const char *path, uint64_t *ret_size, sftp_file *ret);
/* mkdir -p dir (missing folders get mode 0755). */
int sshfile_mkdir_parents(struct sshfile *f, const char *dir);
/* rename(2) through `mv -f` on an exec channel: replaces an existing non-folder `to`. */
int sshfile_rename_exec(struct sshfile *f, const char *from, const char *to);
/* `rm -rf -- path` on an exec channel (never follows a link); -EIO when it fails. */
int sshfile_remove_exec(struct sshfile *f, const char *path);
/* What a write would replace: 0 nothing, 1 a regular file (*ret_real: what a link points
 * to), < 0 refused (-EISDIR, -EINVAL) or an error. */
int sshfile_write_target(struct sshfile *f, const char *path, char **ret_real);

/* ---- sshfile-temp.c: on a pool thread ---- */

/* Removes the temporary file tmp of a failed write, or, when the session cannot, keeps it
 * for sshfile_leftovers_remove(). */
void sshfile_temp_discard(struct sshfile *f, const char *tmp);
/* Removes the kept temporary files over a new session. */
void sshfile_leftovers_remove(struct sshfile *f);
/* Frees the list (when f is freed). */
void sshfile_leftovers_free(struct sshfile *f);

/* ---- sshfile.c ---- */

/* The checks every submission makes: -ESHUTDOWN while closing, then path (NULL: none) as
 * sshfile_path_validate() wants it. */
int sshfile_submit_check(struct sshfile *f, const char *path);
/* A new job of kind for path ("(exec)" when NULL; copied), without descriptors (-1); NULL
 * without memory. */
struct job *sshfile_job_new(enum job_kind kind, const char *path, void *userdata);
/* Where sshfile_read_ahead() puts each reply: buf() gives the buffer the next reply (at most
 * SSHFILE_READ_CHUNK bytes) is read into, took() is told the bytes of each reply before the
 * first short one (a negative errno from it ends the read). */
struct sshfile_read_sink {
    char *(*buf)(void *userdata);
    int (*took)(void *userdata, size_t n);
    void *userdata;
};
/* Reads [offset, offset + win) of file with up to SSHFILE_READ_AHEAD requests in flight (one
 * round trip each otherwise). Returns 1 when a reply came back short (end of file, a file
 * that shrank, a server that sends less): the replies still outstanding are read and
 * dropped, and the caller goes on one request at a time from there; 0 when the window was
 * read, or a negative errno. After an error replies may stay queued in the session: the
 * caller drops it. */
int sshfile_read_ahead(struct sshfile *f, sftp_file file, uint64_t offset, uint64_t win,
                       const struct sshfile_read_sink *sink);
/* True once the job's deadline passed (the worker gives up). */
bool sshfile_job_expired(struct sshfile *f, struct job *j);

int sshfile_submit(struct sshfile *f, struct job *j);
int sshfile_path_validate(const char *path);

/* ---- sshfile-fs.c ---- */

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
 * names it in logs. Errors as the submit functions of sshfile.h; op stays the caller's then. */
int sshfile_submit_op(struct sshfile *f, const char *path, struct sshfile_op *op);

/* For run(): the session; the helpers are those of sshfile-path.c above. */
sftp_session sshfile_sftp(struct sshfile *f);
ssh_session sshfile_ssh(struct sshfile *f);

/* The in-place write of sshfile.h's sshfile_write_params (sshfile-fs.c). *mutated is set before
 * the first change. */
int sshfile_write_in_place(struct sshfile *f, const char *path, const void *data, size_t len,
                           mode_t mode, uint64_t offset, bool append, bool *mutated);
