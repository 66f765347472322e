/* sandboxctl's background process commands (ps, start, logs, kill) over process.* of
 * docs/protocol.md. The connection is sandboxctl.c's, reached through ops. */
#pragma once

#include <json-c/json.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct ctl;

struct ctl_ops {
    /* Calls method with params (taken over); on an error response prints it and returns
     * -EREMOTE. */
    int (*call)(struct ctl *c, const char *method, json_object *params, json_object **ret);
    /* The same, passing fds[0..n_fds) with the request (SCM_RIGHTS). */
    int (*call_fds)(struct ctl *c, const char *method, json_object *params, const int *fds,
                    size_t n_fds, json_object **ret);
    bool json; /* --json: print raw results */
};

/* True for the commands this file runs. */
bool ctl_process_is_command(const char *cmd);
/* Runs one (argv[0] is the command); returns the exit status. */
int ctl_process_command(struct ctl *c, const struct ctl_ops *ops, int argc, char **argv);
/* sandboxctl-tty.c: waits for the process to end; its exit status as ours (128 + N for signal N, 1
 * when it was lost, the exit_for() of a failed call). */
int ctl_process_exit_status(struct ctl *c, const struct ctl_ops *ops, const char *id,
                            const char *process);
/* The status of a process.read/wait result as an exit status; -1 while it runs. */
int ctl_process_status_of(json_object *res);

/* sandboxctl-tty.c: `pty` params of the local window's size (80x24 without a terminal). */
json_object *ctl_pty_params(void);
/* Starts a process with params (taken; "id" and the command set, "pty" and the descriptors
 * added here) on a terminal and attaches the local terminal to it in raw mode until it ends:
 * keys, window size changes and the end of the local side go to it (sandboxctl-tty.c).
 * timeout_ms > 0: ended at that deadline (exit 124). Returns the exit status. */
int ctl_tty_run(struct ctl *c, const struct ctl_ops *ops, const char *id, json_object *params,
                int64_t timeout_ms);
