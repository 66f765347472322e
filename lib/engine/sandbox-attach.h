/* sandbox.attach and sandbox.detach: a volume into a sandbox that exists, or out of it back to
 * the volume holder (lib/engine/sandbox-attach.c), on the one driver (op-step.h).
 *
 * What Proxmox allows (pve-container src/PVE/API2/LXC.pm, move_volume with target-vmid): the
 * source container must not run unless the key is unusedN ("Cannot move in-use volume while
 * the source CT is running - detach or shutdown first", LXC.pm:2780-2782); the target may run:
 * the new mpN goes through update_pct_config() with the target's running flag (LXC.pm:2843-
 * 2846), whose vmconfig_hotplug_pending() hot-plugs a mount point that is new to the
 * container (src/PVE/LXC/Config.pm:1721-1727, apply_pending_mountpoint() calling
 * PVE::LXC::mountpoint_hotplug()). A mount point removed from a running container is not
 * unplugged: its delete stays pending until the next start (Config.pm:1691, "skip\n"
 * for mpN). Hence:
 *
 *   attach: the registry record written first (it says the sandbox has volumes: no snapshot,
 *           rollback, fork or template of it, even after a crash; crash point
 *           attach-recorded), then the create's step "attaching volumes" (volume-attach.c:
 *           crash points volume-attach-line, -path, -moved) into the running container,
 *           hot-plugged. The sandbox stays READY; its processes keep running. Then the
 *           running configuration (GET .../config, current=1) is read: a hot-plug that
 *           Proxmox could not make is only a warning of the move's task, its mpN left a
 *           pending change applied at the next start (src/PVE/LXC/Config.pm:1630-1633,
 *           1740-1745; API2/LXC.pm:2845-2848; LXC.pm:3131 vm_start). The container is then
 *           stopped (crash point attach-stopped), started (attach-started), connected, the
 *           record saved, the mount point checked again: READY, its processes ended, the
 *           path mounted. The configuration rather than a look inside the container over
 *           SSH: it is Proxmox's own record of the hot-plug's outcome, needs no tool in the
 *           container, and names the key that the start applies.
 *   detach: the container's configuration read (the volume must be mounted there), the
 *           record saved naming the volume (registry.h detaching; crash point
 *           detach-recorded), the container stopped (the pause's step; detach-stopped),
 *           the volume moved back to the holder (engine_volume_detach():
 *           volume-take-back-line, -moved; the name leaves the record), its stale line
 *           removed from the container's description, the container started
 *           (detach-started), connected, the record saved: READY, its processes ended.
 *
 * A daemon killed at any point finds the volume in exactly one container (volume-locate.h):
 * the sandbox's or the holder; the sandbox's record says READY, and a READY sandbox whose
 * container is found stopped is started again (reconcile-restart.h). A detach killed once
 * its intent is recorded is run again at the re-attach (engine_detach_recover()) and ends
 * detached; an attach killed after its move ends attached, its mount point applied by the
 * next start (the reconcile's, its own, or engine_attach_recover()'s). An attach or a detach that
 * fails once the container was stopped leaves the sandbox FAILED (the reconcile destroys it, which
 * takes its volumes back). Loop thread only. */
#pragma once

#include <stdbool.h>

#include "sandbox.h"

#define ENGINE_ATTACH_TIMEOUT_MS 300000u /* an attach or a detach, all steps */

/* Attaches volume `name` (the sandbox owner's) to READY sandbox sb at path (read-only with
 * read_only); cb gets sb READY. Refused synchronously (ret_err, nothing changed): not READY
 * or paused (ENGINE_E_STATE), another operation running (ENGINE_E_BUSY), the volume reserved
 * by a sandbox of the daemon's table (ENGINE_E_INVALID "volume"), ENGINE_VOLUMES_MAX asked
 * for already ("volume"). Refused later, before anything is written: an unknown or another
 * uid's volume, one attached anywhere ("volume"), a path that is a mount point of the
 * container, or a container that holds ENGINE_VOLUMES_MAX volumes ("path"). */
int engine_attach(struct engine *e, struct sandbox *sb, const char *name, const char *path,
                  bool read_only, engine_sandbox_cb cb, void *userdata,
                  struct engine_error *ret_err);
/* Detaches volume `name` from READY sandbox sb back to the volume holder; cb gets sb READY
 * (cb NULL: nobody waits).
 * Refused as engine_attach(); a volume not mounted in sb's container is ENGINE_E_INVALID
 * "volume", before the container is stopped. */
int engine_detach(struct engine *e, struct sandbox *sb, const char *name, engine_sandbox_cb cb,
                  void *userdata, struct engine_error *ret_err);
/* At a re-attach (engine_adopt()): a READY sandbox whose record says it has volumes. Its
 * configuration is read twice, outside the driver (the sandbox takes calls meanwhile): a
 * volume line's mount point in the configuration with its pending changes but not in the
 * running one (an attach killed between a move whose hot-plug failed and its restart) is
 * applied by the attach's restart, nobody waiting (skipped, logged, when another operation
 * runs by then); a failure once the container was stopped leaves it FAILED. */
void engine_attach_recover(struct sandbox *sb);
/* At a re-attach (engine_adopt()): a READY sandbox whose record names a volume a detach was
 * taking back (written before its stop; gone once the volume moved): the detach runs again
 * from its first step, nobody waiting (a volume no longer mounted there ends it). */
void engine_detach_recover(struct sandbox *sb, const char *name);
