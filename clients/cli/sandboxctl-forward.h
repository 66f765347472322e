/* sandboxctl forward ID [LOCAL:]REMOTE, and the preview URL commands (sandboxctl-forward.c). */
#pragma once

#include "sandboxctl.h"

/* Opens the forward, prints where it listens, waits for SIGINT or SIGTERM (or the forward's
 * end: the sandbox went away), then closes it. Returns the exit status. */
int cmd_forward(struct ctl *c, int argc, char **argv);
/* preview ID PORT [--ttl SECONDS]: prints the URL; previews ID; unpreview ID PREVIEW. */
int cmd_preview(struct ctl *c, int argc, char **argv);
int cmd_previews(struct ctl *c, int argc, char **argv);
int cmd_unpreview(struct ctl *c, int argc, char **argv);
