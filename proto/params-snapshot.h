/* Params of the snapshot methods (sandbox.snapshot, sandbox.snapshots, sandbox.rollback,
 * sandbox.snapshot_delete; docs/protocol.md). Pure, as params.h. */
#pragma once

#include <stdbool.h>

#include "params.h"

/* Proxmox's snapshot names (pve-configid, maxLength 40): a letter, then letters, digits, '_'
 * or '-', 2..40 bytes; "current" and "vzdump" are reserved. */
#define PARAMS_SNAPSHOT_NAME_MAX 40

/* sandbox.snapshot, sandbox.rollback, sandbox.snapshot_delete */
struct params_sandbox_snapshot {
    char id[PARAMS_ID_MAX + 1];
    char name[PARAMS_SNAPSHOT_NAME_MAX + 1];
};

/* Whether name is a snapshot name Proxmox accepts (and not a reserved one). */
bool params_snapshot_name_valid(const char *name);

extern const struct params_spec params_sandbox_snapshot_spec;
/* sandbox.snapshots takes params_sandbox_id_spec. */
