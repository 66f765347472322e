/* Volumes (lib/engine/volume.c; docs/protocol.md "Volumes"): Proxmox volumes of the uid that
 * made them, kept as mount points (mpN) of the volume holder while no sandbox has them. The
 * holder is a stopped container the daemon clones once from the default template (hostname
 * ENGINE_VOLUME_HOLDER_NAME, in the pool, never started), marked by the holder line in its
 * description (marker.h) so that the reconcile never takes it for a sandbox or an orphan.
 * Each volume is a volume line of the holder's description next to its mount point: both
 * written in one configuration write, so Proxmox alone says which volumes exist, after a
 * crash or a lost state folder alike. A volume removed from a stopped container stays as
 * unusedN until deleted: the holder's unusedN are deletes interrupted by a crash, destroyed
 * by the next volume call. One volume call runs at a time (a FIFO, bounded per uid). Loop
 * thread only. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "sandbox-snapshot.h" /* engine_json_cb */
#include "sandbox.h"

#define ENGINE_VOLUME_HOLDER_NAME "sandboxd-volumes"
/* The deadline of one volume call (a clone of the holder, a config write, a delete). */
#define ENGINE_VOLUME_TIMEOUT_MS 300000u
/* Volume calls waiting or running: per uid, and in all (past them: ENGINE_E_BUSY). */
#define ENGINE_VOLUME_QUEUE_PER_UID 8u
#define ENGINE_VOLUME_QUEUE_MAX 256u

/* Makes volume `name` (params_volume_name_valid()) of size_gb GiB for uid: result
 * {"volume": {"name", "size_gb", "owner_uid", "attached_to": null}}. Refused synchronously:
 * size_gb past [sandbox] max_volume_gb (ENGINE_E_INVALID "size_gb"), max_volumes_per_uid 0
 * (ENGINE_E_QUOTA); later: a name in use (ENGINE_E_INVALID "name"), uid's volumes at
 * max_volumes_per_uid (ENGINE_E_QUOTA). */
int engine_volume_create(struct engine *e, uid_t uid, const char *name, unsigned size_gb,
                         engine_json_cb cb, void *userdata, struct engine_error *ret_err);
/* {"volumes": [...]}: uid's volumes (admin: every uid's), by name; an attached one's
 * attached_to from the marker of the container that holds it (volume-list.c: the pool's
 * configurations read, volume_locate()). */
int engine_volume_list(struct engine *e, uid_t uid, bool admin, engine_json_cb cb, void *userdata,
                       struct engine_error *ret_err);
/* Deletes volume `name` of uid (admin: of any uid) with its data: result {"name", "deleted":
 * true}. Unknown or another uid's: ENGINE_E_INVALID "name"; attached to a sandbox:
 * ENGINE_E_STATE. */
int engine_volume_delete(struct engine *e, uid_t uid, bool admin, const char *name,
                         engine_json_cb cb, void *userdata, struct engine_error *ret_err);
struct marker_volume;
/* Moves the volume of line, mounted in container vmid (stopped) on node, back to the holder:
 * the holder's line written first, then the move (docs/protocol.md sandbox.destroy). Result
 * {"volume": {...}}; fails (ENGINE_E_INTERNAL, or Proxmox's error) when there is no holder,
 * it is on another node, or a call fails: the volume then stays in vmid. Counts in the line
 * owner's queue share. */
/* The sandbox of the table (not gone) that has volume `name` attached, or whose create by uid
 * names it (another uid's create fails at its attach: it cannot hold a volume back): the
 * volume is reserved for it (volume.delete and another create refused). NULL: none. */
const struct sandbox *engine_volume_user(struct engine *e, const char *name, uid_t uid);
/* sandbox.create's volumes, checked before anything is made: at most ENGINE_VOLUMES_MAX, not
 * for a warm pool member, none reserved by another sandbox (ENGINE_E_INVALID "volumes"). */
int engine_volume_mounts_check(struct engine *e, const struct sandbox_create_opts *opts,
                               struct engine_error *ret_err);
/* The create's step (op-step.h) that attaches sb's volumes (sb->vol_mounts) to its stopped
 * new container (sandbox.attach's too: the last one, into its running container, which
 * Proxmox hot-plugs; sandbox-attach.h), one at a time, each on the volume calls' queue: the volume
 * checked on the holder (the caller's, not attached), its line written in the container's
 * description (a free mpN key), the holder's mount point given the sandbox's path (and ro=1), then
 * the move. The holder's line stays, stale (volume-locate.h): the name stays taken. A failure fails
 * the create, whose rollback takes attached volumes back. */
int volumes_attach_start(struct sandbox *sb, uint64_t timeout_ms, const char **ret_fail);
bool volumes_attach_skip(const struct sandbox *sb);

int engine_volume_take_back(struct engine *e, const char *node, uint32_t vmid,
                            const struct marker_volume *line, engine_json_cb cb, void *userdata,
                            struct engine_error *ret_err);
/* engine_volume_take_back() for sandbox.detach (counted as operation "detach"). */
int engine_volume_detach(struct engine *e, const char *node, uint32_t vmid,
                         const struct marker_volume *line, engine_json_cb cb, void *userdata,
                         struct engine_error *ret_err);
