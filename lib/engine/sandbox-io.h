/* Work in a READY sandbox: commands, files, transfers through passed descriptors,
 * background processes and their descriptor pumps. The engine owns the transport (lib/ssh):
 * the caller sees engine types and handles only.
 *
 * Every call that cannot start fills ret_err (its callback never runs): STATE unless READY,
 * INVALID for parameters the transport refuses (param names it), BUSY past a cap, SSH, FILE
 * or INTERNAL for the rest. Errors that callbacks later report as negative errnos are
 * classified the same way by engine_error_from_io().
 *
 * A running command or transfer is a struct sandbox_job: sandbox_job_cancel() stops it (the
 * client went away) and its callback then runs with -ECANCELED; the handle is valid until
 * its callback returns. Loop thread only. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "sandbox.h"

/* Long-polls (process.read with wait_ms, process.wait) running at once per sandbox; each
 * holds an SSH channel. Past it: ENGINE_E_BUSY. */
#define SANDBOX_LONG_POLLS_MAX 16u
/* The length of a background process's id ("pr-" + 16 hex). */
#define SANDBOX_PROCESS_ID_LEN 19

void engine_error_from_io(int error, bool file, struct engine_error *ret);

/* ---- jobs (sandbox-job.c) ---- */
struct sandbox_job;
/* Stops j: a command's process tree is killed, a stream stops as at its deadline. The
 * callback runs with -ECANCELED (a stream's now, a command's from the loop). A job whose
 * callback already ran must not be passed. */
void sandbox_job_cancel(struct sandbox_job *j);

/* ---- commands ---- */
enum sandbox_output { SANDBOX_STDOUT = 1, SANDBOX_STDERR = 2 };
/* A chunk of a streamed command's output (data valid during the call only). */
typedef void (*sandbox_output_cb)(enum sandbox_output stream, const void *data, size_t len,
                                  void *userdata);

struct sandbox_exec_params {
    /* Exactly one of command (run by /bin/sh -c) and argv (NULL-terminated). */
    const char *command;
    const char *const *argv;
    const char *const *env; /* NULL or NULL-terminated "NAME=value" */
    const char *cwd;        /* NULL: the home directory (the user's, with user) */
    const char *user;       /* NULL or "": root; else a name or uid in the container */
    const void *stdin_data; /* copied; NULL/0: empty stdin */
    size_t stdin_len;
    uint64_t timeout_ms;          /* 0: none */
    bool has_max_output;          /* false: the transport's default (1 MiB per stream) */
    size_t max_output_bytes;      /* per stream; 0 keeps nothing */
    sandbox_output_cb on_output;  /* set: streamed, the result carries no output */
    bool container_pid_namespace; /* what the command leaves running outlives it */
};

/* Why a command given a user did not run (exec and process.start alike); the reasons are
 * the documented texts of the -32602 error (param "user"). */
enum sandbox_user_error {
    SANDBOX_USER_OK,
    SANDBOX_USER_UNKNOWN,   /* no such name in the container's /etc/passwd */
    SANDBOX_USER_NO_SWITCH, /* no setpriv (util-linux), su or nsenter in the container */
};
#define SANDBOX_USER_UNKNOWN_REASON "no such user in the sandbox"
#define SANDBOX_USER_NO_SWITCH_REASON "the sandbox has no setpriv, su or nsenter to change user"

struct sandbox_exec_result {
    int exit_code;      /* 0..255, or -1 (signal, timeout, no status) */
    const char *signal; /* "SIGKILL", ... or NULL */
    bool timed_out;
    bool started;    /* the command ran (or may have) */
    int user_error;  /* enum sandbox_user_error: not OK: nothing ran (exec with a user) */
    const char *out; /* captured stdout (NUL-terminated, may hold NULs) */
    size_t out_len;
    bool out_truncated;
    const char *err;
    size_t err_len;
    bool err_truncated;
    uint64_t duration_ms;
    uint64_t out_bytes, err_bytes; /* written into the passed descriptors (sandbox_exec_fds) */
};
/* res is NULL unless error == 0 and valid during the call only. Errors: -ECONNRESET and the
 * other SSH errors, -EPROTO, -ECANCELED, -ETIME (a descriptor stream's inactivity), -EBADFD
 * (a passed descriptor failed). */
typedef void (*sandbox_exec_cb)(int error, const struct sandbox_exec_result *res, void *userdata);

/* ---- the sandbox's own env (sandbox.create's env; sandbox-view.c) ---- */
/* The variables (an object of strings, borrowed), or NULL: none. Their values are secrets:
 * never logged, reported or sent anywhere but into the sandbox's commands. */
json_object *sandbox_env(const struct sandbox *sb);
/* The environment of one exec or process: sb's variables that env (NULL or NULL-terminated
 * "NAME=value") does not set, then its template's default variables that neither sets
 * (template.create's defaults), then env's. *ret is NULL-terminated, or NULL when there is no
 * variable; free it with sandbox_env_free(). *ret_bytes counts names and values. -E2BIG past
 * max_vars variables or max_bytes bytes (*ret_bytes filled), -ENOMEM. */
int sandbox_env_merge(const struct sandbox *sb, const char *const *env, size_t max_vars,
                      size_t max_bytes, char ***ret, size_t *ret_bytes);
/* Wipes and frees a vector of sandbox_env_merge(); NULL accepted. Returns NULL. */
char **sandbox_env_free(char **v);
/* The cwd and user of an exec or process that gives none: its template's defaults
 * (template.create), or NULL (the login directory; root). Borrowed, valid until the next
 * return to the loop. */
void sandbox_defaults(const struct sandbox *sb, const char **ret_cwd, const char **ret_user);

/* Runs a command on the sandbox's SSH pool. *ret (optional) is its job. */
int sandbox_exec(struct sandbox *sb, const struct sandbox_exec_params *p, sandbox_exec_cb cb,
                 void *userdata, struct sandbox_job **ret, struct engine_error *ret_err);

/* ---- transfers through passed descriptors (sandbox-job.c) ----
 * Each holds a pool thread for its whole length, so they are capped: TRANSFER_MAX at once,
 * TRANSFER_MAX_PER_UID per uid, the last SLOTS_RESERVED free ones only for a uid running none
 * (proto/api-limits.h; past it: ENGINE_E_BUSY). They run on the sandbox's file session;
 * [ssh] file_timeout_ms is an inactivity deadline for them. The descriptors are taken on
 * success, left to the caller on failure. engine_close() ends the transfers still running
 * (-ECANCELED). */
typedef void (*sandbox_count_cb)(int error, uint64_t count, void *userdata);

/* A command with descriptors (fds: stdin, stdout, stderr; -1: empty stdin / captured). p's
 * on_output, has_max_output and container_pid_namespace are not used. */
int sandbox_exec_fds(struct sandbox *sb, uid_t uid, const struct sandbox_exec_params *p,
                     const int fds[3], sandbox_exec_cb cb, void *userdata, struct sandbox_job **ret,
                     struct engine_error *ret_err);
/* file.write from fd (an atomic replace): count is the bytes written. */
int sandbox_file_write_fd(struct sandbox *sb, uid_t uid, const char *path, int fd, mode_t mode,
                          bool make_parents, sandbox_count_cb cb, void *userdata,
                          struct sandbox_job **ret, struct engine_error *ret_err);
/* file.read into fd: count is the bytes written into fd. */
int sandbox_file_read_fd(struct sandbox *sb, uid_t uid, const char *path, uint64_t offset,
                         uint64_t length, int fd, sandbox_count_cb cb, void *userdata,
                         struct sandbox_job **ret, struct engine_error *ret_err);

/* ---- files (sandbox-fs.c): SFTP over the sandbox's own session, each request bounded by
 * [ssh] file_timeout_ms (-ETIME past it). Errors are negative errnos: the file's (-ENOENT,
 * -EACCES, -EISDIR, -EINVAL for what is not a regular file, ...), -ENOTEMPTY, -E2BIG (a
 * tree too large to remove), -EPERM (removing "/"), or the SSH ones. ---- */
struct sandbox_write_params {
    const char *path;
    void *data; /* malloc()ed; taken by a successful sandbox_file_write() */
    size_t len;
    mode_t mode;
    bool make_parents;
    bool in_place; /* at offset, or at the end with append (else an atomic replace) */
    bool append;
    uint64_t offset;
};
int sandbox_file_write(struct sandbox *sb, const struct sandbox_write_params *p,
                       sandbox_count_cb cb, void *userdata, struct engine_error *ret_err);

struct sandbox_read_result {
    const char *data;
    size_t len;
    uint64_t size; /* the file's size as far as known */
    bool eof;
};
typedef void (*sandbox_read_cb)(int error, const struct sandbox_read_result *res, void *userdata);
int sandbox_file_read(struct sandbox *sb, const char *path, uint64_t offset, uint64_t length,
                      sandbox_read_cb cb, void *userdata, struct engine_error *ret_err);

struct sandbox_file_entry {
    const char *name;
    const char *type; /* "file", "dir", "symlink", "other" */
    uint64_t size;
    unsigned mode; /* permission bits */
    int64_t mtime;
    const char *target; /* a symbolic link's target (stat without follow), else NULL */
};
struct sandbox_file_list {
    const struct sandbox_file_entry *entries;
    size_t n;
    bool truncated;
};
typedef void (*sandbox_list_cb)(int error, const struct sandbox_file_list *res, void *userdata);
typedef void (*sandbox_stat_cb)(int error, const struct sandbox_file_entry *st, void *userdata);
int sandbox_file_list(struct sandbox *sb, const char *path, size_t limit, sandbox_list_cb cb,
                      void *userdata, struct engine_error *ret_err);
int sandbox_file_stat(struct sandbox *sb, const char *path, bool follow, sandbox_stat_cb cb,
                      void *userdata, struct engine_error *ret_err);
/* count: entries removed. */
int sandbox_file_remove(struct sandbox *sb, const char *path, bool recursive, sandbox_count_cb cb,
                        void *userdata, struct engine_error *ret_err);
/* count: folders made. */
int sandbox_file_mkdir(struct sandbox *sb, const char *path, bool parents, mode_t mode,
                       sandbox_count_cb cb, void *userdata, struct engine_error *ret_err);
/* count: 1; on an error, the side it concerns: 0 `from`, 1 `to`. */
int sandbox_file_rename(struct sandbox *sb, const char *from, const char *to, sandbox_count_cb cb,
                        void *userdata, struct engine_error *ret_err);

/* ---- background processes (sandbox-process.c, sandbox-pump.c) ----
 * The process.* methods: every call is one short command on the sandbox's pool running a
 * script that reports on its stderr. Everything about a process lives in the container, so
 * a restart of the daemon loses nothing and the engine keeps no process state. */

/* A process.start's descriptor pump: once the process runs, it moves the stdin descriptor
 * into the process's stdin (closing it at the end of the input) and the process's output,
 * from offset 0, into the stdout/stderr descriptors until the process has exited and all of
 * it was copied; then the descriptors are closed. It runs on an SSH session of its own, in
 * a pump slot for its whole length (PUMP_MAX, PUMP_MAX_PER_UID: apart from the transfers'); a
 * descriptor that takes no byte for [ssh] file_timeout_ms ends it (the output stays readable by
 * offset). It ends with the process, when its sandbox leaves READY, or when the engine closes. */
struct sandbox_pump;
struct sandbox_pump_end {
    const char *sandbox;
    const char *process;
    bool started; /* false: it could not start (the error says why) */
    bool stopped; /* the sandbox went away or the engine closes */
    bool in;      /* it fed stdin */
    uint64_t out_bytes, err_bytes;
};
typedef void (*sandbox_pump_cb)(int error, const struct sandbox_pump_end *end, void *userdata);
/* Before the launch, so that a refused request launches nothing: a pump slot for uid
 * (ENGINE_E_BUSY past the caps). fds (stdin, stdout, stderr; -1: none) are taken on
 * success. cb (may be NULL) reports the end of a pump that was handed to a start. */
int sandbox_pump_new(struct engine *e, uid_t uid, const int fds[3], sandbox_pump_cb cb,
                     void *userdata, struct sandbox_pump **ret, struct engine_error *ret_err);
/* A pump never handed to a start: closes its descriptors, gives the slot back. NULL is fine. */
void sandbox_pump_free(struct sandbox_pump *p);

enum sandbox_process_op {
    SANDBOX_PROCESS_START,
    SANDBOX_PROCESS_READ,
    SANDBOX_PROCESS_WRITE,
    SANDBOX_PROCESS_WAIT,
    SANDBOX_PROCESS_KILL,
    SANDBOX_PROCESS_LIST,
    SANDBOX_PROCESS_RESIZE,
};

struct sandbox_process_call {
    enum sandbox_process_op op;
    const char *process; /* every op but start and list */
    /* start (command or argv) */
    const char *command;
    const char *const *argv;
    const char *const *env; /* NULL or NULL-terminated "NAME=value" */
    const char *cwd;
    const char *user; /* start: NULL or "": root; else a name or uid in the container */
    bool has_stdin;
    unsigned pty_cols, pty_rows; /* 0: no terminal */
    struct sandbox_pump *pump;   /* NULL, or taken: started once the process runs */
    /* read: a long-poll with wait_ms */
    bool stderr_stream;
    uint64_t offset, length;
    unsigned wait_ms;
    /* write */
    const void *data;
    size_t len;
    bool close;
    /* wait: a long-poll with timeout_ms */
    unsigned timeout_ms;
    /* kill: "KILL", "TERM", ... */
    const char *signal;
    /* resize: the terminal's new size (1..1000 each) */
    unsigned cols, rows;
};

/* What the script reported. */
enum sandbox_process_report {
    SANDBOX_PROCESS_R_OK,
    SANDBOX_PROCESS_R_NO_SUCH,   /* no such process */
    SANDBOX_PROCESS_R_LIMIT,     /* too many running processes (start): nums[0] of them */
    SANDBOX_PROCESS_R_CWD,       /* cwd is not a directory (start) */
    SANDBOX_PROCESS_R_RANGE,     /* offset past the end (read): nums[2] the size */
    SANDBOX_PROCESS_R_EXITED,    /* the process ended (write) */
    SANDBOX_PROCESS_R_NO_STDIN,  /* started without stdin (write) */
    SANDBOX_PROCESS_R_CLOSED,    /* stdin already closed (write) */
    SANDBOX_PROCESS_R_NO_PTY,    /* no terminal can be made in the sandbox (start) */
    SANDBOX_PROCESS_R_NO_TTY,    /* the process has no terminal (resize) */
    SANDBOX_PROCESS_R_NO_USER,   /* no such user in the sandbox (start) */
    SANDBOX_PROCESS_R_NO_SWITCH, /* no tool to change user (start) */
    SANDBOX_PROCESS_R_MALFORMED, /* no report line, or one that does not parse */
};

struct sandbox_process_status {
    const char *state; /* "running", "exited", "lost" (static) */
    int exit_code;     /* -1 unless exited normally */
    int signal;        /* 0 unless ended by a signal */
};

struct sandbox_process_row {
    const char *process;
    time_t started_at;
    struct sandbox_process_status status;
    const char *command;
};

struct sandbox_process_result {
    const char *process; /* the call's process; a start's new id */
    const char *display; /* start: the command as process.list shows it */
    time_t started_at;   /* start */
    bool timed_out;      /* the script did not end in time: nothing below is set */
    enum sandbox_process_report report;
    /* read: first byte still kept, where the data starts, bytes written so far; kill:
     * nums[0] != 0 when the signal was sent */
    uint64_t nums[3];
    struct sandbox_process_status status;
    const char *data; /* read */
    size_t len;
    const struct sandbox_process_row *rows; /* list */
    size_t n_rows;
    /* The script's exit code and stderr (for the log of a MALFORMED report). */
    int exit_code;
    const char *raw;
    size_t raw_len;
};
/* res is NULL unless error == 0 and valid during the call only. */
typedef void (*sandbox_process_cb)(int error, const struct sandbox_process_result *res,
                                   void *userdata);
/* Runs c on sb. A script that cannot be built is ENGINE_E_INVALID ("params") or INTERNAL;
 * the long-polls of a sandbox are capped (SANDBOX_LONG_POLLS_MAX). c->pump is taken even on
 * failure. */
int sandbox_process(struct sandbox *sb, const struct sandbox_process_call *c, sandbox_process_cb cb,
                    void *userdata, struct sandbox_job **ret, struct engine_error *ret_err);
