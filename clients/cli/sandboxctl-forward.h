/* sandboxctl forward ID [LOCAL:]REMOTE (sandboxctl-forward.c). */
#pragma once

#include "sandboxctl.h"

/* Opens the forward, prints where it listens, waits for SIGINT or SIGTERM (or the forward's
 * end: the sandbox went away), then closes it. Returns the exit status. */
int cmd_forward(struct ctl *c, int argc, char **argv);
