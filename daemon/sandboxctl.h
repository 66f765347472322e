/* Shared by sandboxctl.c and the command files beside it (sandboxctl-fs.c). */
#pragma once

#include <json-c/json.h>

#define CTL_EXIT_RPC 2 /* the daemon answered with an error */
#define CTL_EXIT_USAGE 64

struct ctl;

/* Calls method with params (taken over) and prints the result: raw JSON with --json, else
 * through human (pretty JSON when NULL). Returns the exit status. */
int ctl_run(struct ctl *c, const char *method, json_object *params,
            void (*human)(json_object *result));

/* The file system commands ls, stat, rm, mkdir, mv (sandboxctl-fs.c): whether cmd is one. */
int ctl_fs_is_command(const char *cmd);
/* Runs one (argv[0] is the command); returns the exit status. */
int ctl_fs_main(struct ctl *c, int argc, char **argv);
