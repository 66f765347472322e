/* sandboxctl snapshot, snapshots, rollback, snapshot-delete, pause, resume
 * (sandboxctl-snapshot.c). */
#pragma once

#include <stdbool.h>

#include "sandboxctl.h"

bool ctl_snapshot_is_command(const char *cmd);
/* Runs one of them (argv[0]); returns the exit status. */
int ctl_snapshot_main(struct ctl *c, int argc, char **argv);
