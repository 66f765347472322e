/* Snapshots of a sandbox's disk (lib/engine/sandbox-snapshot.c): Proxmox container snapshots,
 * disk only (a container snapshot holds no memory state). The list lives in Proxmox, with
 * the container: nothing of it is kept by the daemon, so a restart has nothing to recover,
 * and a destroy removes the snapshots with the container. Loop thread only. */
#pragma once

#include <json-c/json.h>

#include "sandbox.h"

/* The deadline of a snapshot, a rollback or a delete (a large disk takes its time). */
#define ENGINE_SNAPSHOT_TIMEOUT_MS 600000u

/* A snapshot call's outcome: result (borrowed for the call) when err is NULL. */
typedef void (*engine_json_cb)(const struct engine_error *err, json_object *result, void *userdata);

/* Takes snapshot `name` of a READY sandbox: result {"snapshot": {"name", "created_at"}}.
 * Refused synchronously (returns a negative errno, ret_err filled) for a bad name
 * (ENGINE_E_INVALID "name"), a sandbox that is not READY or busy with another operation
 * (ENGINE_E_STATE, ENGINE_E_BUSY); later: a name in use (ENGINE_E_INVALID), past
 * [sandbox] max_snapshots (ENGINE_E_QUOTA), storage without snapshots (ENGINE_E_PROXMOX
 * "the sandbox's storage cannot take snapshots ..."). */
int engine_snapshot(struct engine *e, struct sandbox *sb, const char *name, engine_json_cb cb,
                    void *userdata, struct engine_error *ret_err);
/* Lists the sandbox's snapshots: result {"snapshots": [{"name", "created_at",
 * "description"?}]}, oldest first. */
int engine_snapshots(struct engine *e, struct sandbox *sb, engine_json_cb cb, void *userdata,
                     struct engine_error *ret_err);
/* Rolls the sandbox's disk back to snapshot `name`: the container is stopped, restored,
 * given the sandbox's marker and sizes again, started, its address awaited and the SSH
 * sessions made anew; cb gets the sandbox, READY. Its sessions, commands and background
 * processes of before end. An unknown name is ENGINE_E_INVALID "name". */
int engine_rollback(struct engine *e, struct sandbox *sb, const char *name, engine_sandbox_cb cb,
                    void *userdata, struct engine_error *ret_err);
/* Deletes snapshot `name`: result {"name", "deleted": true}. */
int engine_snapshot_delete(struct engine *e, struct sandbox *sb, const char *name,
                           engine_json_cb cb, void *userdata, struct engine_error *ret_err);
