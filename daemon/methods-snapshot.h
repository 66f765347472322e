/* The snapshot methods of docs/protocol.md (sandbox.snapshot, sandbox.snapshots,
 * sandbox.rollback, sandbox.snapshot_delete) over lib/engine/sandbox-snapshot.h. The owner of
 * the sandbox or an admin only, as every sandbox method (methods_sandbox_find()). Loop
 * thread only. */
#pragma once

#include "methods.h"

void method_sandbox_snapshot(struct req *r, void *params, void *userdata);
void method_sandbox_snapshots(struct req *r, void *params, void *userdata);
void method_sandbox_rollback(struct req *r, void *params, void *userdata);
void method_sandbox_snapshot_delete(struct req *r, void *params, void *userdata);
