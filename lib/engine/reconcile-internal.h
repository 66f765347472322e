/* What the reconcile's files share: its state, its reference count and a few lookups.
 * reconcile.c runs the reconcile; reconcile-lease.c holds the lease tick, renew and the
 * destroy of everything at stop; reconcile-base.c the shared helpers below. Loop thread
 * only. */
#pragma once

#include <json-c/json.h>
#include <stdbool.h>
#include <stdint.h>
#include <syslog.h>
#include <uv.h>

#include "marker.h"
#include "pve.h"
#include "reconcile.h"
#include "sandbox-internal.h"

struct cand {
    uint32_t vmid;
    char *node;
    char *lock;
    enum pve_ct_state state; /* first run: from GET .../status/current, else unknown */
    struct marker m;
    json_object *conf; /* the container's config (owned reference) */
};

struct locked {
    struct reconcile_stuck pub;
    bool stuck;
};

struct reconcile {
    struct engine *e;
    uv_loop_t *loop;
    const struct config *cfg;
    unsigned refs;
    bool closed;
    uv_timer_t timer, lease;
    int64_t wall_minus_boot; /* at the last lease tick; 0: no tick yet */
    void (*on_initial)(void *userdata);
    void *userdata;
    bool initial_done;
    bool first; /* the registry's records are still to be matched */
    bool running;
    bool rebuild; /* a new registry: markers alone say what is ours */

    struct registry_record **recs;
    size_t n_recs;
    char **suspects; /* ids of records moved aside as corrupt */
    size_t n_suspects;

    struct pve_vm_list *members;
    size_t i_member;
    struct cand *cands;
    size_t n_cands, i_cand;

    struct locked *locked;
    size_t n_locked;
    struct reconcile_stuck *stuck;
    size_t n_stuck;

    uint32_t *destroying; /* vmids with an orphan destroy in flight */
    size_t n_destroying;

    char *last_error;
    struct reconcile_stats st;
};

struct reconcile *reconcile_ref(struct reconcile *rc);
/* Frees rc with its last reference. */
void reconcile_unref(struct reconcile *rc);
void reconcile_cands_clear(struct reconcile *rc);
void reconcile_records_clear(struct reconcile *rc);
/* The sandbox of the engine's table with that id, whoever owns it. */
struct sandbox *reconcile_find_sandbox(struct reconcile *rc, const char *id);
/* An engine_destroy() callback of a lease expiry (or a retried destroy): counted, and
 * rc's reference released. */
void reconcile_on_expired(const struct engine_error *err, void *userdata);
/* A string member of a container's config, or NULL. */
const char *reconcile_conf_str(json_object *conf, const char *key);
/* description has a volume line (or volume lines that do not parse). */
bool reconcile_has_volume_lines(const char *description);
/* A positive integer of a container's config, else def. */
unsigned reconcile_conf_uint(json_object *conf, const char *key, unsigned def);

/* A notice to the engine's user (logged, and sent to the notice hook). */
#define notice(rc, level, ...) engine_noticef((rc)->e, level, __VA_ARGS__)

/* reconcile-lease.c: the lease timer's tick (every RECONCILE_LEASE_TICK_MS). */
void reconcile_lease_tick(uv_timer_t *t);
