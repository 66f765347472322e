/* sandboxctl volume create|list|delete (sandboxctl-volume.c). */
#pragma once

#include "sandboxctl.h"

/* Runs `volume SUB ...` (argv[0] "volume"); returns the exit status. */
int ctl_volume_main(struct ctl *c, int argc, char **argv);
/* Runs `attach ID NAME:PATH[:ro]` or `detach ID NAME` (argv[0] the command). */
int ctl_attach_main(struct ctl *c, int argc, char **argv);
/* create --volume NAME:PATH[:ro]: one entry appended to params' "volumes"; 0, or
 * EXIT_USAGE (said on stderr). */
int ctl_volume_mount_arg(json_object *params, const char *arg);
