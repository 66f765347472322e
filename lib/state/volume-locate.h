/* Where each volume is, from Proxmox alone: the volume lines of the containers'
 * descriptions (marker.h) against the mount points of their configs. Pure code: no loop,
 * no I/O.
 *
 * A volume moves between containers (the volume holder and the sandbox it is attached to)
 * in three writes: the target's line first (its mpN key chosen free there), the move, the
 * source's line removed. After a crash between any two of them a volume has a line in one
 * or two containers and is a mount point in exactly one: the line whose container has a
 * mount point at its key wins, the other line is stale (to be removed). */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include <json-c/json.h>

#include "marker.h"

struct volume_ct {
    uint32_t vmid;
    const char *description;
    struct json_object *config; /* GET .../config: mpN keys; NULL when unknown */
};

struct volume_place {
    struct marker_volume v; /* the winning line (its mp: the key in vmid) */
    uint32_t vmid;          /* the container holding the volume */
    uint32_t stale_vmid;    /* 0, or a container whose line of this volume is stale */
    bool missing;           /* no container has a mount point at a line's key: vmid is the
                             * line's container, nothing may be moved or deleted */
};

/* The volumes of cts[0..n): a new array (NULL when none), sorted by name. A container whose
 * description's volume lines do not parse is left out and named in *ret_bad_vmid (the first
 * one; 0 when none): its volumes are unknown, nothing of it may be changed. Lines of one
 * name in more than two containers, or in two containers both with a mount point at the
 * line's key, keep the first container's (missing stays false; stale_vmid names the other). */
int volume_locate(const struct volume_ct *cts, size_t n, struct volume_place **ret, size_t *ret_n,
                  uint32_t *ret_bad_vmid);

/* True when config (GET .../config) has a mount point mp<N>. */
bool volume_config_has_mp(struct json_object *config, unsigned mp);

/* The lowest N such that neither mp<N> nor unused<N> is in config and no volume line of
 * description has key mp<N>: the key for a volume coming in. -ENOSPC when all are taken,
 * errors of marker_volumes_parse(). */
int volume_free_mp(struct json_object *config, const char *description, unsigned *ret_mp);

/* Whether the container of config (GET .../config, its description within) holds a volume: a
 * volume line of its description whose key is a mount point of config. 1 with the first such
 * line in *ret, 0 when none, -EBADMSG when its volume lines do not parse (nothing known: to be
 * treated as holding one). Deleting a container destroys its mount points' volumes: no
 * container that holds one may be deleted. */
int volume_held(struct json_object *config, struct marker_volume *ret);
