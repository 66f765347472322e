/* A container deleted only when it holds no volume (volume-locate.h volume_held()): deleting a
 * container destroys its mount points' volumes. For the deletes of code that keeps no
 * sandbox (the reconcile's orphans, rollbacks and expired leases); a sandbox's destroy has
 * the same look as a step of its own (sandbox-destroy.c). Loop thread only. */
#pragma once

#include <stdint.h>

#include "pve.h"

/* Reads vmid's configuration (current), then deletes it with flags (pve_delete()) when it
 * holds no volume. cb gets the config read's result when that failed (a container that is
 * gone: Proxmox's not-found), the delete's otherwise; -EBUSY (no perr) when the container
 * holds a volume or its volume lines do not parse (logged, nothing deleted). Each call has
 * timeout_ms. 0, or a negative errno when nothing was started (cb is not called). */
int engine_delete_guarded(struct pve_client *pve, const char *node, uint32_t vmid, unsigned flags,
                          uint64_t timeout_ms, pve_done_fn cb, void *userdata);
