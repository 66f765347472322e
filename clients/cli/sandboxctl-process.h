/* sandboxctl's background process commands (ps, start, logs, kill) over process.* of
 * docs/protocol.md. The connection is sandboxctl.c's, reached through ops. */
#pragma once

#include <json-c/json.h>
#include <stdbool.h>
#include <stddef.h>

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
