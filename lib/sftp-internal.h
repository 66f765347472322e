/* Internals shared by sftp.c and sftp-stream.c (the worker side of descriptor streams).
 * Nothing else includes this. */
#pragma once

#include <libssh/libssh.h>
#include <libssh/sftp.h>
#include <stdatomic.h>

#include "sftp.h"
#include "sshs-internal.h"

#define SSHFILE_CHUNK (192u * 1024u)
#define SSHFILE_READ_CHUNK (64u * 1024u)
#define SSHFILE_READ_AHEAD 16u

enum job_kind {
    JOB_WRITE,
    JOB_READ,
    JOB_CLOSE,
    JOB_WRITE_FD, /* from a descriptor, to its end (sftp-stream.c) */
    JOB_READ_FD,  /* into a descriptor */
    JOB_EXEC_FD,  /* a command with descriptors for stdin/stdout */
};

struct sshfile;

struct job {
    uv_work_t work;
    struct sshfile *f;
    enum job_kind kind;
    struct job *next;
    char *path;
    /* write */
    void *data; /* owned */
    size_t len;
    mode_t mode;
    bool make_parents;
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
    sshfile_exec_fd_cb xcb;
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
    uv_timer_t timer; /* the next deadline of the running or first queued request */
    /* Owned by the job on the thread pool while busy; the loop thread never touches them. */
    ssh_session ssh;
    sftp_session sftp;
    /* Shared with the worker: the socket of the session the running job uses (-1: none).
     * The worker clears it under mu before it may close the socket, so the loop thread can
     * shut it down under mu without racing with the close. */
    uv_mutex_t mu;
    int sock;
    struct job *cur; /* the job handed to the thread pool */
    bool busy;
    bool stale; /* a deadline passed: the next job starts on a new session */
    struct job *qfirst, *qlast;
    unsigned queued;
    bool closing;
    void (*close_cb)(void *userdata);
    void *close_ud;
};

static inline bool sshfile_job_is_stream(const struct job *j)
{
    return j->kind == JOB_WRITE_FD || j->kind == JOB_READ_FD || j->kind == JOB_EXEC_FD;
}

/* sftp.c, for the stream workers. */
int sshfile_last_error(struct sshfile *f);
int sshfile_refine_enoent(struct sshfile *f, const char *path);
int sshfile_refine_failure(struct sshfile *f, const char *path, const char *dir);
int sshfile_read_open(struct sshfile *f, const char *path, uint64_t *ret_size, sftp_file *ret);
/* True once the job's deadline passed (the worker gives up). */
bool sshfile_job_expired(struct sshfile *f, struct job *j);

int sshfile_submit(struct sshfile *f, struct job *j);
int sshfile_path_validate(const char *path);

/* sftp-stream.c (worker side). */
/* Fills the open temporary file from j->fd_in to its end. */
int sshfile_stream_to_file(struct sshfile *f, struct job *j, sftp_file file);
int sshfile_do_read_fd(struct sshfile *f, struct job *j);
int sshfile_do_exec_fd(struct sshfile *f, struct job *j);
/* Loop side: frees what a stream job owns. */
void sshfile_stream_job_done(struct job *j);
