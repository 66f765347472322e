/* Recovery and leases over the engine (lib/engine/sandbox.h): the reconcile of the Proxmox pool
 * with the registry, at start and periodically; the lease timer that destroys expired
 * sandboxes; lease renewal (registry record and Proxmox marker).
 *
 * Ownership rules:
 *   - a container is ours only when its description carries a valid marker (marker.h)
 *     whose instance id is this daemon's (registry_instance_id()). A container without a marker,
 *     with a broken one, or with ANOTHER instance's marker is never touched, even inside
 *     the pool (another daemon, or a human, owns it);
 *   - at start, records of the registry are matched with the containers by sandbox id:
 *     a READY record with a live container and an unexpired lease is re-attached (the SSH
 *     pool connects on first use); one whose container is stopped is started again first
 *     (reconcile-restart.h), and destroyed when that fails; a keyed create interrupted while
 *     cloning (vmid and clone UPID recorded) is resumed (engine_resume_creates()): finished
 *     when its clone task succeeded, rolled back otherwise; any other record (a create that
 *     was interrupted, a destroy that was interrupted, a failed create) is rolled back: its
 *     container is destroyed and the record removed. A create is READY in the registry before its
 * reply is sent, so a create that returned to its caller is always re-attached;
 *   - a marked container with no record is an orphan and destroyed, except when the
 *     registry is new (the state folder was lost, or corrupt records moved aside): then a
 *     running container with an address and an unexpired lease in its marker is re-attached
 *     from the marker and Proxmox's config (the labels and the host key pin
 *     come from the marker too); periodic runs only destroy orphans older than orphan_grace_s;
 *   - a marked container that stays locked (a `lock` in its config across two runs) is
 *     reported as stuck (daemon.status) and left alone until the lock goes.
 *
 * Loop thread only; logs at debug level; what the operator must see goes through the
 * engine's notice hook. */
#pragma once

#include "macro.h"

#include <stdbool.h>
#include <stdint.h>
#include <time.h>
#include <uv.h>

#include "sandbox.h"
#include "testhook.h" /* test_crash_point() */

#define RECONCILE_LEASE_TICK_MS 1000u
/* The wall clock moved this much more (or less) than CLOCK_BOOTTIME between two lease ticks:
 * a step (NTP, an admin), not a slew. */
#define RECONCILE_CLOCK_STEP_S 5
#define RECONCILE_EXPIRE_PER_TICK 16u /* lease-expiry destroys started per tick */
#define RECONCILE_CALL_TIMEOUT_MS 30000u
#define RECONCILE_DESTROY_TIMEOUT_MS 120000u
#define RECONCILE_DESTROYS_MAX 16u /* orphan destroys in flight at once */
#define RECONCILE_STUCK_MAX 64u    /* stuck containers listed */
#define RECONCILE_STAMP_FILE "reconciled"

struct reconcile;

struct reconcile_stuck {
    uint32_t vmid;
    char lock[32];
    char sandbox[ID_MAX + 1];
    time_t since;
};

struct reconcile_stats {
    time_t last_run;        /* end of the last completed run, 0 = none yet */
    bool last_ok;           /* the last run listed the pool */
    const char *last_error; /* NULL when fine */
    uint64_t runs;
    uint64_t reattached;        /* sandboxes re-attached at start */
    uint64_t rolled_back;       /* interrupted creates/destroys finished by a destroy */
    uint64_t resumed;           /* interrupted keyed creates finished after a restart */
    uint64_t orphans_destroyed; /* marked containers without a live record destroyed */
    uint64_t expired_destroyed; /* leases that ran out */
    uint64_t registry_problems; /* corrupt records moved aside at start */
    size_t n_stuck;
    const struct reconcile_stuck *stuck;
};

/* Starts the reconcile (a first run at once, then every reconcile_interval_s) and the lease
 * timer on the engine's loop. on_initial (may be NULL) runs once, after the first run ended
 * (successful or not). The engine must be configured and outlive the reconcile. */
int reconcile_new(struct engine *e, void (*on_initial)(void *userdata), void *userdata,
                  struct reconcile **ret);
/* Stops timers and forgets calls in flight (their callbacks become no-ops). NULL accepted.
 * Call before engine_close(). */
struct reconcile *reconcile_free(struct reconcile *rc);
bool reconcile_initial_done(const struct reconcile *rc);
void reconcile_get_stats(const struct reconcile *rc, struct reconcile_stats *ret);

/* sandbox.renew: the lease becomes now + ttl_s (1..max_ttl_s, else ENGINE_E_INVALID);
 * the registry record and the container's marker are updated, then cb runs once with the
 * sandbox (or an error). A synchronous failure fills *ret_err and returns < 0; cb never
 * runs then. */
int reconcile_renew(struct reconcile *rc, struct sandbox *sb, int64_t ttl_s, engine_sandbox_cb cb,
                    void *userdata, struct engine_error *ret_err);

/* Destroys every sandbox (destroy_on_stop); cb runs once all destroys ended. */
int reconcile_destroy_all(struct reconcile *rc, void (*cb)(void *userdata), void *userdata);
