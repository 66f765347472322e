/* sandbox.fork (lib/engine/sandbox-fork.c): count new sandboxes with a READY sandbox's disk
 * as of one of its snapshots, or of a snapshot taken for the fork and deleted once the
 * children are cloned. The parent keeps running. Each child is a create of the parent's
 * owner (sandbox-create.c, its written-ahead steps and rollback), cloned in full from the
 * parent's snapshot instead of the template, then given its own host key, address, firewall,
 * lease and quota slot, the parent's labels, sizes, template and env copied. Proxmox locks
 * the parent for each clone, so the clones run one after another (the client's clone queue);
 * the rest of each child's create runs beside the others. Loop thread only.
 *
 * Crash points (testhook.h) besides the children's create ones: fork-snapshot-recorded (the
 * name of the snapshot to take is in the parent's record), fork-snapshot-taken (before any
 * child). */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "sandbox.h"

#define ENGINE_FORK_COUNT_MAX 32u
#define ENGINE_FORK_SNAP_PREFIX "sandboxd-fork-" /* a snapshot taken for a fork */

struct engine_fork_opts {
    unsigned count;       /* 1..ENGINE_FORK_COUNT_MAX */
    const char *snapshot; /* NULL or "": a snapshot taken for the fork */
    int64_t ttl_s;        /* -1: the parent's lease length (expires_at - created_at) */
};

/* The fork's outcome: children[0..n) READY (valid during the call), failed of them failed
 * (each rolled back), err the first failure (NULL when none failed). */
typedef void (*engine_fork_cb)(const struct engine_error *err, unsigned failed,
                               struct sandbox *const *children, size_t n, void *userdata);

/* Forks parent (READY). Refused synchronously (negative errno, ret_err filled; nothing made)
 * for a count out of range (ENGINE_E_INVALID "count"), a ttl_s past max_ttl_s
 * (ENGINE_E_INVALID "ttl_s"), count sandboxes more than the owner's max_per_uid or
 * max_total allow (ENGINE_E_QUOTA), a parent not READY (ENGINE_E_STATE). Later, before
 * anything is made: an unknown snapshot (ENGINE_E_INVALID "snapshot"), the refusals of
 * engine_snapshot() for the snapshot taken for the fork. */
int engine_fork(struct engine *e, struct sandbox *parent, const struct engine_fork_opts *o,
                engine_fork_cb cb, void *userdata, struct engine_error *ret_err);
