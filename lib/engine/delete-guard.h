/* A container deleted only when it holds no volume (volume-locate.h volume_held()): deleting a
 * container destroys its mount points' volumes. For the deletes of code that keeps no
 * sandbox (the reconcile's orphans, rollbacks and expired leases); a sandbox's destroy does
 * the same in a step of its own (sandbox-destroy.c). Loop thread only. */
#pragma once

#include <stdint.h>

#include "pve.h"

struct engine;

/* Reads vmid's configuration (current); each volume it holds goes back to the volume holder
 * (the container stopped first; engine_volume_take_back()), then it is deleted with flags
 * (pve_delete()) once it holds none. cb gets the config read's result when that failed (a
 * container that is gone: Proxmox's not-found), the delete's otherwise; -EBUSY (no perr)
 * when a volume cannot go back or the volume lines do not parse (logged, nothing deleted).
 * Each call has timeout_ms. 0, or a negative errno when nothing was started (cb is not
 * called). */
int engine_delete_guarded(struct engine *e, const char *node, uint32_t vmid, unsigned flags,
                          uint64_t timeout_ms, pve_done_fn cb, void *userdata);
