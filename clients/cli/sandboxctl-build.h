/* sandboxctl template build (sandboxctl-build.c). */
#pragma once

#include "sandboxctl.h"

/* Runs `template build NAME -f FILE [--context DIR] [--internet]` (argv[0] "build"); returns
 * the exit status: 0 built, 1 refused or a step failed (the sandbox destroyed), 130
 * interrupted, EXIT_USAGE. */
int ctl_template_build(struct ctl *c, int argc, char **argv);
