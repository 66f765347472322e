/* File transfer into and out of a sandbox over SFTP, on a file pool (filepool.h: worker
 * threads with a fair share per uid and per sandbox; libuv's thread pool without one).
 *
 * libssh 0.10's SFTP API is blocking, so each sshfile object owns one dedicated SSH session
 * (separate from the sshpool's exec sessions), connected in blocking mode inside a worker with
 * timeouts and the same host key pinning (sshs.h). Exactly one work item owns that session at
 * a time: further requests for the same sshfile wait in a FIFO queue on the loop thread.
 * The session is kept between requests and reconnected (once per request) when it was lost.
 *
 * Deadlines: every request must be over within the sshfile's timeout, counted from its
 * submission (time spent queued included). When it expires the callback runs at once with
 * -ETIME; a request still waiting is dropped; a request that a worker is running is released:
 * the loop thread shuts the session's socket down (shutdown(2)), so the blocking libssh call
 * returns, the worker drops that session and the next request connects afresh. A write whose
 * deadline expired may or may not have replaced the file.
 *
 * Only regular files are read or replaced: the type is checked (stat) before the file is
 * opened, and FIFOs, sockets and devices are refused with -EINVAL (a swap after the check is
 * covered by the deadline). A symbolic link is followed: reading reads the file it points to,
 * writing replaces that file (the link is kept); a link to anything but a regular file, or to
 * nothing, is refused like its target (-EINVAL, -EISDIR).
 *
 * Writes are atomic replaces (unless asked to write in place, at an offset or appending): the data
 * goes to a temporary file in the target's directory
 * (".<name>.sandboxd-<random>"), is fsync'ed when the server offers fsync@openssh.com,
 * chmod'ed, then renamed over the target. OpenSSH's v3 rename refuses an existing target
 * (it links, then unlinks), so when the target exists the rename is done with `mv -f` on an
 * exec channel of the same session, which is rename(2): readers see the old or the new file,
 * never a partial one. On any failure the temporary file is removed (unless the deadline cut
 * the session first).
 *
 * Listing, stat, removal, folders and renames are in sshfile-fs.h; they run as requests of the
 * same queue, with the same deadline.
 *
 * Reads do not trust the size from stat (0 for /proc files): they read until end of file or
 * the requested length, whichever comes first.
 *
 * Errors passed to the callbacks (negative errno):
 *   file errors (the daemon's -32009, name via strerrorname_np()): -ENOENT, -EACCES, -EISDIR,
 *     -ENOTDIR, -EEXIST, -ENOSPC, -EROFS, -EFBIG, -EOPNOTSUPP, -ENAMETOOLONG,
 *     -EINVAL (not a regular file), -EIO (generic SFTP failure)
 *   -ETIME: the deadline expired (the daemon's -32006)
 *   SSH-level errors (sshs_error_is_ssh(), the daemon's -32005): -EBADE, -EKEYREJECTED,
 *     -ECONNREFUSED, -ETIMEDOUT, -ECONNRESET, -EPROTO ...
 *   -ECANCELED: sshfile_close() ran before the request started.
 * The submit functions return -EINVAL (bad path/mode/offset), -EFBIG (over a cap), -ENOMEM,
 * -EBUSY (queue full), -ESHUTDOWN (closing) and never call the callback then.
 * Threading: the API is loop-thread only; callbacks run on the loop thread. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <uv.h>

#include "api-limits.h" /* SSHFILE_WRITE_MAX, SSHFILE_READ_MAX, SSHFILE_PATH_MAX, ... */
#include "sshs.h"

#define SSHFILE_QUEUE_MAX 64u             /* requests waiting per sshfile; past it: -EBUSY */
#define SSHFILE_IO_TIMEOUT_S 30u          /* per blocking SFTP call (libssh SSH_OPTIONS_TIMEOUT) */
#define SSHFILE_TIMEOUT_MS_DEFAULT 60000u /* per request, queueing included */

struct sshfile;
struct filepool;

/* Copies cfg like sshpool_new() (takes a reference on the key). Does not connect yet.
 * timeout_ms: each request's deadline (0: SSHFILE_TIMEOUT_MS_DEFAULT). */
int sshfile_new(uv_loop_t *loop, const struct sshs_config *cfg, uint64_t timeout_ms,
                struct sshfile **ret);

/* Runs f's requests on pool (a reference is taken until f is freed), counted for uid and
 * group (a pointer naming the sandbox) in its shares. Before f's first request. */
void sshfile_set_pool(struct sshfile *f, struct filepool *pool, uid_t uid, const void *group);

/* Cancels queued requests (their callbacks run with -ECANCELED before this returns), lets a
 * running one finish (its callback still runs, with -ETIME at its deadline), disconnects the
 * session on a worker, frees the object and then calls cb (may be NULL) from the loop. */
void sshfile_close(struct sshfile *f, void (*cb)(void *userdata), void *userdata);

struct sshfile_write_params {
    const char *path;  /* absolute, ≤ SSHFILE_PATH_MAX, no NUL; not ending in '/' */
    void *data;        /* malloc()ed; taken by a successful sshfile_write() (freed when the
                        * write is over, which may be after its callback ran at the
                        * deadline); left to the caller when the call fails */
    size_t len;        /* ≤ SSHFILE_WRITE_MAX; 0 writes an empty file */
    mode_t mode;       /* permission bits, ≤ 07777, applied exactly (umask does not apply) */
    bool make_parents; /* mkdir -p the parent directories (mode 0755) */
    /* In place (not atomic): the bytes go into the file itself, at offset or, with append,
     * at its end (where it ends when the write starts); the file is created with mode when missing
     * and otherwise keeps its mode; bytes past the end extend it (a gap reads as zeros). Only
     * regular files (a link to one is followed). offset + len ≤ SSHFILE_OFFSET_MAX. */
    bool in_place;
    bool append;
    uint64_t offset;
};

/* error == 0: bytes == len was written and renamed into place. */
typedef void (*sshfile_write_cb)(int error, uint64_t bytes, void *userdata);
int sshfile_write(struct sshfile *f, const struct sshfile_write_params *params, sshfile_write_cb cb,
                  void *userdata);

struct sshfile_read_result {
    char *data; /* the bytes read (NUL-terminated for convenience; may hold NULs); the
                 * callback may take it (set to NULL, free() later) */
    size_t len;
    /* The file's size as far as known: where the read met the end of the file; otherwise
     * the size from stat, or offset + len when more was read (files such as /proc report
     * 0). With length 0 (nothing read) it is the size from stat. */
    uint64_t size;
    /* The read met the end of the file, or offset + len reached a non-zero size from stat;
     * with length 0: offset >= the size from stat. */
    bool eof;
};

/* Reads up to length bytes from offset, until the end of the file: length 0 reads nothing
 * (the result then carries only size and eof); length > SSHFILE_READ_MAX is -EFBIG. Reading
 * a directory is -EISDIR, a FIFO, socket or device -EINVAL. result is NULL unless
 * error == 0 and is freed when the callback returns. */
typedef void (*sshfile_read_cb)(int error, struct sshfile_read_result *result, void *userdata);
int sshfile_read(struct sshfile *f, const char *path, uint64_t offset, uint64_t length,
                 sshfile_read_cb cb, void *userdata);

/* ---- Descriptor streams ----
 *
 * The same requests with a local descriptor (a client's, passed over the daemon's socket)
 * as the source or the sink: no size cap, nothing held in memory past a few blocks. The
 * descriptor is taken by a successful submit (closed when the job is over) and left to the
 * caller when the submit fails. The worker waits for the descriptor with poll(2) in short
 * slices, so a pipe that nobody feeds or drains never pins a pool thread past the deadline.
 *
 * Deadline: for streams the sshfile's timeout is an inactivity deadline, counted from the
 * submission and then from the last byte moved; a transfer that keeps moving has no time
 * limit. A stream occupies the sshfile's session (and one pool thread) until it is over:
 * further requests on the same sandbox wait behind it (their own deadline counting).
 *
 * Errors besides those above: -EBADFD, reading or writing the passed descriptor failed (for
 * example EPIPE: the reader went away; EIO). */
typedef void (*sshfile_stream_cb)(int error, uint64_t bytes, void *userdata);

struct sshfile_write_fd_params {
    const char *path; /* as sshfile_write_params */
    int fd;           /* read to its end; taken on success */
    mode_t mode;
    bool make_parents;
};
/* Atomic replace as sshfile_write(), from fd: bytes is what was written. */
int sshfile_write_fd(struct sshfile *f, const struct sshfile_write_fd_params *params,
                     sshfile_stream_cb cb, void *userdata);
/* Copies [offset, offset + length) of path (up to its end) into fd: bytes is what was
 * written into fd. A directory is -EISDIR, a FIFO, socket or device -EINVAL. */
int sshfile_read_fd(struct sshfile *f, const char *path, uint64_t offset, uint64_t length, int fd,
                    sshfile_stream_cb cb, void *userdata);

/* A command with descriptors for its stdin and/or stdout, run on the sshfile's session. */
struct sshfile_exec_fd {
    char *command; /* the remote command line (sshexec_build_command()); owned */
    char *prelude; /* sent on stdin before fd_in's data (sshexec_command_stdin()),
                    * prelude_len bytes; owned, may be NULL */
    size_t prelude_len;
    char marker[33];           /* its SANDBOXD_EXEC_ID, for the kill on timeout or failure */
    int fd_in, fd_out, fd_err; /* taken on success; -1: empty stdin / output captured */
    uint64_t timeout_ms;       /* 0: none; on expiry the channel is closed (see sshfile-stream.c) */
    size_t max_output;         /* cap of each captured stream */
    /* result */
    int exit_code; /* -1 when killed by a signal, timed out, or no status */
    bool timed_out;
    char *out, *err; /* captured (out only without fd_out); NUL-terminated */
    size_t out_len, err_len;
    bool out_truncated, err_truncated;
    uint64_t out_bytes, err_bytes; /* bytes written into fd_out, fd_err */
};
typedef void (*sshfile_exec_fd_cb)(int error, struct sshfile_exec_fd *x, void *userdata);
/* x is taken on success (freed after the callback) and left to the caller on failure. */
int sshfile_exec_fd(struct sshfile *f, struct sshfile_exec_fd *x, sshfile_exec_fd_cb cb,
                    void *userdata);
void sshfile_exec_fd_free(struct sshfile_exec_fd *x);
/* Ends the request submitted with userdata (a stream whose client went away): queued, it is
 * dropped; running, it stops as at its deadline (an exec's command is killed, a write's
 * temporary file removed). Its callback runs now with -ECANCELED. */
void sshfile_cancel(struct sshfile *f, void *userdata);

/* Maps an SFTP status code (SSH_FX_*) to a negative errno (exposed for tests). */
int sshfile_status_to_errno(int status);
