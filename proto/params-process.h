/* Params of the process.* methods of docs/protocol.md (background processes), with the
 * contract of proto/params.h: 0 and *ret filled, -EINVAL with *err filled, -ENOMEM. */
#pragma once

#include "params.h"

/* The sizes and bounds of process.*: proto/api-limits.h (via params.h). */
#define PARAMS_PROCESS_ID_LEN 19 /* "pr-" + 16 lowercase hex */

/* process.start: exactly one of command / argv. */
struct params_process_start {
    char id[PARAMS_ID_MAX + 1];
    char *command;
    char **argv; /* NULL-terminated */
    size_t argc;
    struct params_kv_list env;
    char *cwd;
    char user[EXEC_USER_MAX + 1]; /* "": root; else a name or a decimal uid */
    bool has_stdin;               /* stdin: true gives the process a stdin process.write feeds */
    bool pty; /* pty: {cols, rows} runs it on a terminal (has_stdin then true) */
    unsigned pty_cols, pty_rows;
    /* Indexes of passed descriptors (-1: absent): stdin_fd feeds stdin (implies it),
     * stdout_fd/stderr_fd get the output from offset 0 as it comes. */
    int64_t stdin_fd, stdout_fd, stderr_fd;
};

/* process.read */
struct params_process_read {
    char id[PARAMS_ID_MAX + 1];
    char process[PARAMS_PROCESS_ID_LEN + 1];
    bool stderr_stream; /* stream: "stdout" (default) or "stderr" */
    int64_t offset;     /* >= 0, default 0 */
    int64_t length;     /* 1..PARAMS_PROCESS_READ_MAX, default PARAMS_PROCESS_READ_DEFAULT */
    int64_t wait_ms;    /* 0..PARAMS_PROCESS_WAIT_MS_MAX, default 0 */
};

/* process.write: at most one of data / data_b64. */
struct params_process_write {
    char id[PARAMS_ID_MAX + 1];
    char process[PARAMS_PROCESS_ID_LEN + 1];
    uint8_t *data; /* NULL when none */
    size_t data_len;
    bool close;
};

/* process.wait, process.kill, process.list (process empty for list) */
struct params_process_ref {
    char id[PARAMS_ID_MAX + 1];
    char process[PARAMS_PROCESS_ID_LEN + 1];
    int64_t timeout_ms; /* wait: 0..PARAMS_PROCESS_TIMEOUT_MS_MAX, default 30000 */
    char signal[8];     /* kill: without "SIG": KILL (default), TERM, INT, HUP, QUIT, USR1,
                         * USR2, STOP, CONT */
};

/* process.resize: the new size of a process's terminal, 1..PARAMS_PROCESS_PTY_MAX each. */
struct params_process_resize {
    char id[PARAMS_ID_MAX + 1];
    char process[PARAMS_PROCESS_ID_LEN + 1];
    unsigned cols, rows;
};

void params_process_start_done(struct params_process_start *p);
void params_process_write_done(struct params_process_write *p);

extern const struct params_spec params_process_start_spec;
extern const struct params_spec params_process_read_spec;
extern const struct params_spec params_process_write_spec;
extern const struct params_spec params_process_wait_spec;
extern const struct params_spec params_process_kill_spec;
extern const struct params_spec params_process_list_spec;
extern const struct params_spec params_process_resize_spec;
