/* sandboxctl template list|create|delete|publish (sandboxctl-template.c). */
#pragma once

#include "sandboxctl.h"

/* Runs `template SUB ...` (argv[0] "template"); returns the exit status. */
int ctl_template_main(struct ctl *c, int argc, char **argv);
