/* sandbox.create {node}: who may choose the node ([proxmox] node_param). */
#pragma once

#include <stdbool.h>

#include "config.h"
#include "req.h"

/* True when r's caller may pass node; otherwise replies -32008 and returns false. */
bool node_param_allowed(struct req *r, const struct config *cfg);
