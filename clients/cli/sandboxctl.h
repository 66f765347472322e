/* What the sandboxctl commands share: the connection to sandboxd (a client of the C client
 * library, clients/c) and the call helpers (sandboxctl-call.c), used by sandboxctl.c and the
 * command files beside it (sandboxctl-transfer.c, sandboxctl-fs.c, sandboxctl-process.c). */
#pragma once

#include <json-c/json.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "json-util.h"
#include "sandboxd-client.h"

#define CTL_WAIT_FDS 2
#define CTL_TICK_MS 200
#define EXIT_RPC 2 /* the daemon answered with an error */
#define EXIT_USAGE 64

struct ctl {
    const char *socket;
    bool json;
    struct sandboxd_client *client; /* the connection (clients/c) */
};

/* While a call waits for its reply: tick() every CTL_TICK_MS (progress), on_fd() when
 * one of fds[0..n_fds) is readable (output relays). */
struct ctl_wait {
    void (*tick)(void *userdata);
    void (*on_fd)(void *userdata, size_t i);
    int fds[CTL_WAIT_FDS];
    size_t n_fds;
    void *userdata;
};

/* Calls method with params (taken over, NULL for none). On success *ret_result holds the
 * result; on an error response prints it and returns -EREMOTE. */
int ctl_call(struct ctl *c, const char *method, json_object *params, json_object **ret_result);
/* The same, passing fds[0..n_fds) (SCM_RIGHTS, with the request line) and waiting with w
 * (may be NULL). */
int ctl_call_fds(struct ctl *c, const char *method, json_object *params, const int *fds,
                 size_t n_fds, const struct ctl_wait *w, json_object **ret_result);
/* Calls method with params (taken over) and prints the result: raw JSON with --json, else
 * through human (pretty JSON when NULL). Returns the exit status. */
int ctl_run(struct ctl *c, const char *method, json_object *params,
            void (*human)(json_object *result));
int exit_for(int r);
void print_json(json_object *o);
int parse_int(const char *s, const char *what, int64_t min, int64_t max, int64_t *ret);
json_object *id_params(const char *id);
/* --env K=V: adds K to the "env" object of params p (*env, made on first use). -EINVAL after
 * saying why when arg has no '='. */
int ctl_env_add(json_object *p, json_object **env, char *arg);

/* sandboxctl-help.c: whether --help comes before any "--" in a command's arguments, and
 * that command's help on stdout (-1 for a command without one). */
bool ctl_help_wanted(int argc, char **argv);
int ctl_help(const char *cmd);

struct option;
/* Options may come before the ID (`exec -t ID -- CMD`): moves the first word that is neither
 * an option nor an option's argument (shorts and longs as for getopt_long) to argv[1], before
 * any "--". */
void ctl_id_first(int argc, char **argv, const char *shorts, const struct option *longs);

/* sandboxctl-transfer.c */
/* Starts `tar ARGS` (argv[0] "tar") with one end of a pipe as its stdin (tar_writes false)
 * or stdout; *ret_fd is the other end (for the daemon). */
int ctl_spawn_tar(char *const argv[], bool tar_writes, pid_t *ret_pid, int *ret_fd);
/* Waits for it: its exit status (128 + signal), -1 when it cannot be waited for. */
int ctl_wait_tar(pid_t pid);
int cmd_put(struct ctl *c, int argc, char **argv);
int cmd_get(struct ctl *c, int argc, char **argv);
int cmd_exec(struct ctl *c, int argc, char **argv);

/* The file system commands ls, stat, rm, mkdir, mv (sandboxctl-fs.c): whether cmd is one. */
int ctl_fs_is_command(const char *cmd);
/* Runs one (argv[0] is the command); returns the exit status. */
int ctl_fs_main(struct ctl *c, int argc, char **argv);
