/* sandboxctl volume create|list|delete (sandboxctl-volume.c). */
#pragma once

#include "sandboxctl.h"

/* Runs `volume SUB ...` (argv[0] "volume"); returns the exit status. */
int ctl_volume_main(struct ctl *c, int argc, char **argv);
