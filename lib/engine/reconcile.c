/* Reconcile of the Proxmox pool with the registry, leases and renewal. See reconcile.h. */
#include "macro.h"

#include "reconcile.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <unistd.h>

#include "hostkey.h"
#include "audit.h"
#include "delete-guard.h"
#include "log.h"
#include "marker.h"
#include "reconcile-internal.h"
#include "template-internal.h"
#include "reconcile-restart.h"
#include "sandbox-pause.h"
#include "registry.h"
#include "sandbox-internal.h"
#include "util.h"

#define COMP "reconcile"

/* Any sandbox of the table with that container, warm pool members included. */
static bool vmid_known(struct reconcile *rc, uint32_t vmid)
{
    for (struct sandbox *sb = engine_first(rc->e); sb; sb = engine_next(rc->e, sb))
        if (sb->vmid == vmid)
            return true;
    return false;
}

static struct registry_record *find_record(struct reconcile *rc, const char *id)
{
    for (size_t i = 0; i < rc->n_recs; i++)
        if (rc->recs[i] && strcmp(rc->recs[i]->id, id) == 0)
            return rc->recs[i];
    return NULL;
}

static bool is_suspect(struct reconcile *rc, const char *id)
{
    for (size_t i = 0; i < rc->n_suspects; i++)
        if (strcmp(rc->suspects[i], id) == 0)
            return true;
    return false;
}

static void record_forget(struct reconcile *rc, const char *id_)
{
    struct registry *reg = engine_registry(rc->e);
    char id[ID_MAX + 1];

    snprintf(id, sizeof id, "%s", id_); /* id_ may belong to a record freed below */

    for (size_t i = 0; i < rc->n_recs; i++)
        if (rc->recs[i] && strcmp(rc->recs[i]->id, id) == 0)
            rc->recs[i] = registry_record_free(rc->recs[i]);
    if (reg && id_is_valid(id))
        (void)registry_remove_async(reg, rc->loop, id, NULL, NULL);
}

/* ---- destroying a container that is not (or no longer) in the table ---- */

struct rdestroy {
    struct reconcile *rc;
    uint32_t vmid;
    char id[ID_MAX + 1];
    uint64_t *counter;
};

static void destroying_drop(struct reconcile *rc, uint32_t vmid)
{
    for (size_t i = 0; i < rc->n_destroying; i++)
        if (rc->destroying[i] == vmid) {
            rc->destroying[i] = rc->destroying[--rc->n_destroying];
            return;
        }
}

static bool destroying_has(struct reconcile *rc, uint32_t vmid)
{
    for (size_t i = 0; i < rc->n_destroying; i++)
        if (rc->destroying[i] == vmid)
            return true;
    return false;
}

static void on_orphan_deleted(const struct pve_result *res, void *userdata)
{
    struct rdestroy *d = userdata;
    struct reconcile *rc = d->rc;

    if (!rc->closed) {
        destroying_drop(rc, d->vmid);
        if (res->error == 0 ||
            (res->error == -EREMOTEIO && res->perr && res->perr->kind == PVE_ERR_NOT_FOUND)) {
            (*d->counter)++;
            if (!engine_id_elsewhere(rc->e, rc->recs, rc->n_recs, d->id, d->vmid))
                record_forget(rc, d->id); /* not a leftover of a create placed again */
            engine_addr_release(rc->e, d->vmid);
            log_debug(COMP, "%s: container %u destroyed", d->id, d->vmid);
        } else
            notice(rc, LOG_WARNING, "cannot destroy container %u (sandbox %s): %s", d->vmid, d->id,
                   res->perr ? res->perr->message : strerror(-res->error));
    }
    free(d);
    reconcile_unref(rc);
}

/* Destroys vmid (marked for sandbox id), counting into *counter when it is gone. */
static void destroy_container(struct reconcile *rc, uint32_t vmid, const char *node, const char *id,
                              uint64_t *counter, const char *why)
{
    const char *kind;
    struct rdestroy *d;
    uint32_t *v;

    if (destroying_has(rc, vmid) || rc->n_destroying >= RECONCILE_DESTROYS_MAX)
        return;
    v = realloc(rc->destroying, (rc->n_destroying + 1) * sizeof *v);
    d = calloc(1, sizeof *d);
    if (!v || !d) {
        free(d);
        if (v)
            rc->destroying = v;
        return;
    }
    rc->destroying = v;
    d->rc = rc;
    d->vmid = vmid;
    d->counter = counter;
    snprintf(d->id, sizeof d->id, "%s", id);
    notice(rc, LOG_NOTICE, "destroying container %u (sandbox %s): %s", vmid, id, why);
    kind = counter == &rc->st.orphans_destroyed ? "orphan"
           : counter == &rc->st.rolled_back     ? "rollback"
                                                : "lease_expired";
    audit_reconcile("destroy", kind, id, vmid, node, why);
    if (engine_delete_guarded(rc->e, node, vmid, PVE_DELETE_FORCE | PVE_DELETE_PURGE,
                              RECONCILE_DESTROY_TIMEOUT_MS, on_orphan_deleted, d) < 0) {
        free(d);
        return;
    }
    rc->destroying[rc->n_destroying++] = vmid;
    reconcile_ref(rc);
}

/* ---- one run ---- */

static void run_start(struct reconcile *rc);
static void scan_next(struct reconcile *rc);
static void decide_next(struct reconcile *rc);

static void on_run_timer(uv_timer_t *t)
{
    run_start(t->data);
}

static void schedule(struct reconcile *rc)
{
    if (!rc->closed)
        uv_timer_start(&rc->timer, on_run_timer,
                       (uint64_t)rc->cfg->sandbox.reconcile_interval_s * 1000, 0);
}

static void run_end(struct reconcile *rc, const char *error)
{
    struct engine_error derr; /* a destroy that cannot start is retried at the next run */
    struct sandbox *sb, *next;

    /* Sandboxes whose destroy failed earlier: tried again once per run. */
    for (sb = engine_first(rc->e); sb && !error; sb = next) {
        next = engine_next(rc->e, sb);
        if (sb->state == SANDBOX_FAILED && !sandbox_busy(sb))
            engine_destroy_reason(sb, "retry", -1);
        if (sb->state == SANDBOX_FAILED && !sandbox_busy(sb) &&
            engine_destroy(rc->e, sb, reconcile_on_expired, reconcile_ref(rc), &derr) < 0)
            rc->refs--;
    }
    rc->running = false;
    rc->st.runs++;
    rc->st.last_run = now_realtime();
    rc->st.last_ok = !error;
    free(rc->last_error);
    rc->last_error = error ? strdup(error) : NULL;
    pve_vm_list_free(TAKE_PTR(rc->members));
    reconcile_cands_clear(rc);
    if (error)
        log_debug(COMP, "run failed: %s", error);
    if (!rc->initial_done) {
        rc->initial_done = true;
        if (rc->on_initial)
            rc->on_initial(rc->userdata);
    }
    schedule(rc);
}

static void stuck_update(struct reconcile *rc)
{
    struct locked *nl = NULL;
    struct reconcile_stuck *ns = NULL;
    size_t n = 0, k = 0;

    for (size_t i = 0; i < rc->n_cands; i++) {
        struct cand *c = &rc->cands[i];
        struct sandbox *sb;
        struct locked *x, *old = NULL;

        if (!c->lock || n >= RECONCILE_STUCK_MAX)
            continue;
        sb = reconcile_find_sandbox(rc, c->m.sandbox);
        if (sb && sandbox_busy(sb))
            continue; /* our own operation holds it */
        x = realloc(nl, (n + 1) * sizeof *nl);
        if (!x)
            break;
        nl = x;
        for (size_t j = 0; j < rc->n_locked; j++)
            if (rc->locked[j].pub.vmid == c->vmid && strcmp(rc->locked[j].pub.lock, c->lock) == 0)
                old = &rc->locked[j];
        if (old) {
            nl[n] = *old;
            if (!old->stuck)
                notice(rc, LOG_WARNING,
                       "container %u (sandbox %s) is stuck with lock '%s'; it is left alone until "
                       "the lock is cleared (pct unlock %u)",
                       c->vmid, c->m.sandbox, c->lock, c->vmid);
            nl[n].stuck = true;
        } else {
            nl[n] = (struct locked){.pub = {.vmid = c->vmid, .since = now_realtime()}};
            snprintf(nl[n].pub.lock, sizeof nl[n].pub.lock, "%s", c->lock);
            snprintf(nl[n].pub.sandbox, sizeof nl[n].pub.sandbox, "%s", c->m.sandbox);
        }
        n++;
    }
    for (size_t i = 0; i < n; i++)
        if (nl[i].stuck) {
            struct reconcile_stuck *x = realloc(ns, (k + 1) * sizeof *ns);
            if (!x)
                break;
            ns = x;
            ns[k++] = nl[i].pub;
        }
    free(rc->locked);
    rc->locked = nl;
    rc->n_locked = n;
    free(rc->stuck);
    rc->stuck = ns;
    rc->n_stuck = k;
}

/* A create the restart interrupted while its clone task ran, and that cannot be resumed (no
 * idempotency key to retry it by): its container may not be listed yet (locked, being
 * created). Rolled back from the recorded task at once: once the task ends, the container
 * is destroyed and the record goes with it; a task that cannot be followed leaves the
 * container to the orphan reaper, as before. */
struct clone_rollback {
    struct reconcile *rc;
    uint32_t vmid;
    char node[CONFIG_NODE_NAME_MAX + 1];
    char id[ID_MAX + 1];
};

static void on_clone_ended(const struct pve_result *res, void *userdata)
{
    _cleanup_free_ struct clone_rollback *x = userdata;
    struct reconcile *rc = x->rc;

    if (!rc->closed) {
        destroying_drop(rc, x->vmid); /* the reservation: the destroy itself takes its place */
        if (res->error < 0 && res->error != -EREMOTEIO) {
            log_debug(COMP, "%s: cannot follow its clone task: %s", x->id, strerror(-res->error));
            record_forget(rc, x->id);
        } else
            destroy_container(rc, x->vmid, x->node, x->id, &rc->st.rolled_back,
                              "its create was interrupted while cloning (the clone task ended)");
    }
    reconcile_unref(rc);
}

static bool clone_rollback(struct reconcile *rc, const struct registry_record *r)
{
    struct clone_rollback *x;
    uint32_t *v;

    if (r->state != REG_CLONING || !r->upid || !r->node || r->vmid <= 0 ||
        strlen(r->node) > CONFIG_NODE_NAME_MAX || destroying_has(rc, (uint32_t)r->vmid))
        return false;
    /* Reserved as a destroy in flight, so that the orphan reaper leaves the container to
     * this rollback while the task runs. */
    v = realloc(rc->destroying, (rc->n_destroying + 1) * sizeof *v);
    if (!v)
        return false;
    rc->destroying = v;
    x = calloc(1, sizeof *x);
    if (!x)
        return false;
    *x = (struct clone_rollback){.rc = rc, .vmid = (uint32_t)r->vmid};
    snprintf(x->node, sizeof x->node, "%s", r->node);
    snprintf(x->id, sizeof x->id, "%s", r->id);
    if (pve_wait_task(engine_pve(rc->e), r->node, r->upid, RECONCILE_DESTROY_TIMEOUT_MS,
                      on_clone_ended, x, NULL) < 0) {
        free(x);
        return false;
    }
    rc->destroying[rc->n_destroying++] = (uint32_t)r->vmid;
    log_debug(COMP, "%s: interrupted while cloning %d: rolled back once task %s ends", r->id,
              r->vmid, r->upid);
    reconcile_ref(rc);
    return true;
}

/* The records no container answered for (first run): gone from Proxmox, or still being
 * cloned. */
static void records_unmatched(struct reconcile *rc)
{
    for (size_t i = 0; i < rc->n_recs; i++) {
        struct registry_record *r = rc->recs[i];
        bool present = false;

        if (!r)
            continue;
        /* A locked or still-cloning container may not be in the listing yet: the periodic
         * run reaps it as an orphan (it carries the marker). */
        for (size_t j = 0; j < rc->n_cands; j++)
            if (strcmp(rc->cands[j].m.sandbox, r->id) == 0)
                present = true;
        if (present || engine_adopt_unreachable(rc->e, r, rc->members) || clone_rollback(rc, r))
            continue;
        if (r->state != REG_READY)
            rc->st.rolled_back++;
        audit_reconcile("forget", "no_container", r->id, r->vmid > 0 ? (uint32_t)r->vmid : 0, NULL,
                        "recorded, but Proxmox has no container for it");
        log_debug(COMP, "%s: record without a container (state %s): removed", r->id,
                  registry_state_to_string(r->state));
        record_forget(rc, r->id);
    }
}

static void stamp_write(struct reconcile *rc)
{
    _cleanup_free_ char *path = NULL;

    if (asprintf(&path, "%s/%s", rc->cfg->server.state_dir, RECONCILE_STAMP_FILE) < 0)
        return;
    (void)atomic_write_file(AT_FDCWD, path, "1\n", 2, 0600);
}

static void decide_done(struct reconcile *rc)
{
    stuck_update(rc);
    engine_rt_prune(rc->e, rc->members);
    engine_replica_prune(rc->e, rc->members);
    if (rc->first) {
        records_unmatched(rc);
        reconcile_records_clear(rc);
        rc->first = false;
        if (rc->rebuild)
            stamp_write(rc);
        rc->rebuild = false;
    }
    run_end(rc, NULL);
}

/* Re-attach from a record (or a record rebuilt from marker + config). */
static void adopt(struct reconcile *rc, struct cand *c, const struct registry_record *r, bool save)
{
    struct sandbox *sb;
    int k;

    k = engine_adopt(rc->e, r, &sb);
    if (k < 0) {
        log_debug(COMP, "%s: cannot re-attach: %s", r->id, strerror(-k));
        return;
    }
    if (!sb->idem_hash[0] && c->m.key[0])
        memcpy(sb->idem_hash, c->m.key, sizeof sb->idem_hash);
    if (!sb->params_hash[0] && c->m.params[0])
        memcpy(sb->params_hash, c->m.params, sizeof sb->params_hash);
    if (c->m.expires > sb->expires_at)
        sb->expires_at = (time_t)c->m.expires;
    if (save)
        (void)engine_save(sb, NULL, NULL);
    rc->st.reattached++;
    audit_reconcile("reattach", "restart", sb->id, sb->vmid, sb->node,
                    "re-attached after a restart");
    notice(rc, LOG_INFO, "re-attached sandbox %s (container %u, %s, lease until %" PRId64 ")",
           sb->id, sb->vmid, sb->state == SANDBOX_PAUSED ? "paused" : strna(sb->ip),
           (int64_t)sb->expires_at);
    /* a pause or resume the restart interrupted: the container stopped, the marker paused */
    if (sb->state == SANDBOX_PAUSED && (c->state != PVE_CT_STOPPED || !c->m.paused))
        engine_pause_finish(sb);
}

struct fromm {
    struct reconcile *rc;
    size_t i;
    char *ip;
};

static void fromm_adopt(struct reconcile *rc, struct cand *c, const char *ip, bool internet,
                        json_object *allow)
{
    const char *rootfs = reconcile_conf_str(c->conf, "rootfs");
    char pin[HOSTKEY_PIN_MAX] = "";
    _cleanup_json_ json_object *labels = NULL;
    /* The marker carries the host key pin and the labels (a broken labels line: none). */
    if (c->m.hostkey[0] && hostkey_hex_to_pin(c->m.hostkey, pin) < 0)
        pin[0] = '\0';
    if (marker_labels_parse(reconcile_conf_str(c->conf, "description"), c->m.sandbox, &labels) < 0)
        labels = NULL;
    struct registry_record r = {
        .id = c->m.sandbox,
        .instance = c->m.instance,
        .owner_uid = c->m.owner_uid,
        .vmid = (int)c->vmid,
        .node = c->node,
        .state = c->m.paused ? REG_PAUSED : REG_READY,
        .hostname = (char *)reconcile_conf_str(c->conf, "hostname"),
        .ip = (char *)ip,
        .cores = reconcile_conf_uint(c->conf, "cores", rc->cfg->sandbox.default_cores),
        .memory_mb = reconcile_conf_uint(c->conf, "memory", rc->cfg->sandbox.default_memory_mb),
        .disk_gb = pve_rootfs_size_gb(rootfs, rc->cfg->sandbox.default_disk_gb),
        .net_rate_mbps = net0_rate_mbps(reconcile_conf_str(c->conf, "net0")),
        .internet = internet || allow,
        .internet_allow = allow,
        .created_at = (time_t)c->m.created,
        .expires_at = (time_t)c->m.expires,
        .host_key = pin[0] ? pin : NULL,
        .labels = labels,
        .template = c->m.template[0] ? c->m.template : NULL,
        .pool = c->m.pool,
        .volumes = reconcile_has_volume_lines(reconcile_conf_str(c->conf, "description")),
    };

    adopt(rc, c, &r, true);
}

/* The allow-list read back from the firewall's sets: the sandbox adopted with it. */
static void on_fromm_egress(int error, json_object *allow, void *userdata)
{
    struct fromm *f = userdata;
    struct reconcile *rc = f->rc;

    if (!rc->closed) {
        fromm_adopt(rc, &rc->cands[f->i], f->ip, false, error == 0 ? allow : NULL);
        rc->i_cand++;
        decide_next(rc);
    }
    free(f->ip);
    free(f);
    reconcile_unref(rc);
}

static void on_fromm_rules(const struct pve_result *res, void *userdata)
{
    struct fromm *f = userdata;
    struct reconcile *rc = f->rc;
    struct cand *c = &rc->cands[f->i];

    if (!rc->closed) {
        bool internet = res->error == 0 && res->rules &&
                        pve_fw_rules_find_group(res->rules, rc->cfg->proxmox.internet_group) >= 0;

        if (!internet && res->error == 0 &&
            egress_fw_read(engine_pve(rc->e), c->node, c->vmid, res->rules,
                           RECONCILE_CALL_TIMEOUT_MS, on_fromm_egress, f) == 0)
            return; /* on_fromm_egress() goes on, with the reference */
        fromm_adopt(rc, c, f->ip, internet, NULL);
        rc->i_cand++;
        decide_next(rc);
    }
    free(f->ip);
    free(f);
    reconcile_unref(rc);
}

static void on_fromm_ip(const struct pve_result *res, void *userdata)
{
    struct fromm *f = userdata;
    struct reconcile *rc = f->rc;
    char why[128], reason[256];
    struct cand *c;
    bool refused;

    if (rc->closed) {
        free(f);
        reconcile_unref(rc);
        return;
    }
    c = &rc->cands[f->i];
    /* the address comes from inside the container: checked before anything trusts it */
    refused = res->error == 0 && res->ipv4 &&
              engine_addr_check(rc->e, NULL, c->vmid, res->ipv4, why, sizeof why) < 0;
    if (!refused && res->error == 0 && res->ipv4 && (f->ip = strdup(res->ipv4)) &&
        pve_fw_rules_list(engine_pve(rc->e), c->node, c->vmid, RECONCILE_CALL_TIMEOUT_MS,
                          on_fromm_rules, f, NULL) == 0)
        return; /* keeps the reference */
    if (refused) {
        engine_addr_refused(c->m.sandbox, c->vmid, c->node, res->ipv4, why);
        snprintf(reason, sizeof reason, "marked, not recorded, and its address %s is refused: %s",
                 res->ipv4, why);
        destroy_container(rc, c->vmid, c->node, c->m.sandbox, &rc->st.rolled_back, reason);
    } else if (res->error == 0 && !res->ipv4)
        destroy_container(rc, c->vmid, c->node, c->m.sandbox, &rc->st.rolled_back,
                          "marked, not recorded, and without an address");
    free(f->ip);
    free(f);
    rc->i_cand++;
    decide_next(rc);
    reconcile_unref(rc);
}

/* A READY record whose container was found stopped: started again, then re-attached
 * (reconcile-restart.h); destroyed when it cannot be started, gets no address or one that
 * is refused. */
struct restarting {
    struct reconcile *rc;
    size_t i;
    struct registry_record *r; /* taken from rc->recs */
};

static void on_restarted(int error, const char *ip, const char *reason, void *userdata)
{
    struct restarting *x = userdata;
    struct reconcile *rc = x->rc;
    struct cand *c;

    if (!rc->closed) {
        c = &rc->cands[x->i];
        if (error == 0 && strdup_replace(&x->r->ip, ip) == 0) {
            notice(rc, LOG_NOTICE, "sandbox %s: container %u was stopped; started it again (%s)",
                   x->r->id, c->vmid, ip);
            adopt(rc, c, x->r, true);
        } else {
            char why[512];

            snprintf(why, sizeof why, "it was stopped and cannot be started again: %s",
                     reason ? reason : strerror(-error));
            destroy_container(rc, c->vmid, c->node, c->m.sandbox, &rc->st.rolled_back, why);
        }
        rc->i_cand++;
        decide_next(rc);
    }
    registry_record_free(x->r);
    free(x);
    reconcile_unref(rc);
}

static bool restart_stopped(struct reconcile *rc, struct cand *c, struct registry_record *r)
{
    struct restarting *x = calloc(1, sizeof *x);

    if (!x)
        return false;
    x->rc = rc;
    x->i = rc->i_cand;
    x->r = r;
    log_debug(COMP, "%s: container %u found stopped: starting it again", r->id, c->vmid);
    if (reconcile_restart(rc->e, c->node, c->vmid, r->ip, on_restarted, x) < 0) {
        free(x);
        return false;
    }
    for (size_t i = 0; i < rc->n_recs; i++)
        if (rc->recs[i] == r)
            rc->recs[i] = NULL; /* owned by x now */
    reconcile_ref(rc);
    return true;
}

/* First run, no record: re-attach from the marker when it looks alive, else destroy. */
static bool rebuild_from_marker(struct reconcile *rc, struct cand *c)
{
    struct fromm *f;

    if (c->m.paused && c->m.expires > (int64_t)now_realtime()) {
        fromm_adopt(rc, c, NULL, false, NULL);
        return false;
    }
    if (c->state == PVE_CT_STOPPED || c->m.expires <= (int64_t)now_realtime()) {
        destroy_container(rc, c->vmid, c->node, c->m.sandbox, &rc->st.orphans_destroyed,
                          c->state != PVE_CT_STOPPED ? "its lease (from the marker) has expired"
                                                     : "not running and not recorded");
        return false;
    }
    f = calloc(1, sizeof *f);
    if (!f)
        return false;
    f->rc = rc;
    f->i = rc->i_cand;
    if (pve_interfaces(engine_pve(rc->e), c->node, c->vmid, RECONCILE_CALL_TIMEOUT_MS, on_fromm_ip,
                       f, NULL) < 0) {
        free(f);
        return false;
    }
    reconcile_ref(rc);
    return true;
}

/* Decides about one marked container; returns true when it went asynchronous. */
static bool decide_one(struct reconcile *rc, struct cand *c)
{
    time_t now = now_realtime();
    struct sandbox *sb = reconcile_find_sandbox(rc, c->m.sandbox);
    struct registry_record *r;

    if (c->m.replica) { /* not a template yet (else adopted): a replica build's clone */
        if (!c->lock && !engine_replica_building(rc->e, c->vmid))
            destroy_container(rc, c->vmid, c->node, c->m.sandbox, &rc->st.orphans_destroyed,
                              "a replica whose build was interrupted");
        return false;
    }
    if ((sb && (sb->vmid == 0 || sb->vmid == c->vmid)) || vmid_known(rc, c->vmid))
        return false; /* live: ours and known */
    if (destroying_has(rc, c->vmid))
        return false;
    /* A lock (a backup, a stale task) does not stop a live leased sandbox from being
     * re-attached; anything else waits for the lock to go (stuck when it stays). */
    if (rc->first && !sb) {
        r = find_record(rc, c->m.sandbox);
        if (r && r->vmid > 0 && (uint32_t)r->vmid != c->vmid) { /* left by a create placed */
            if (!c->lock)                                       /* again on another node */
                destroy_container(rc, c->vmid, c->node, c->m.sandbox, &rc->st.orphans_destroyed,
                                  "left behind by a create placed again on another node");
            return false;
        }
        if (r) {
            time_t exp = MAX(r->expires_at, (time_t)c->m.expires);

            /* running, or not known to be stopped (status/current unreadable): re-attached */
            /* paused: re-attached paused whatever the container's state (never started) */
            if (((r->state == REG_READY && c->state != PVE_CT_STOPPED && r->ip) ||
                 r->state == REG_PAUSED) &&
                exp > now && r->vmid > 0 && (uint32_t)r->vmid == c->vmid) {
                adopt(rc, c, r, false);
                for (size_t i = 0; i < rc->n_recs; i++)
                    if (rc->recs[i] == r)
                        rc->recs[i] = registry_record_free(rc->recs[i]);
                return false;
            }
            if (c->lock) {
                /* A clone the restart interrupted: rolled back once its task ends. Else
                 * reaped as an orphan once unlocked. */
                if (clone_rollback(rc, r))
                    for (size_t i = 0; i < rc->n_recs; i++)
                        if (rc->recs[i] == r)
                            rc->recs[i] = registry_record_free(rc->recs[i]);
                return false;
            }
            if (r->state == REG_READY && exp > now && c->state == PVE_CT_STOPPED && r->ip &&
                r->vmid > 0 && (uint32_t)r->vmid == c->vmid && restart_stopped(rc, c, r))
                return true;
            destroy_container(rc, c->vmid, c->node, c->m.sandbox,
                              r->state == REG_READY || r->state == REG_PAUSED
                                  ? &rc->st.expired_destroyed
                                  : &rc->st.rolled_back,
                              r->state == REG_READY || r->state == REG_PAUSED
                                  ? (exp <= now ? "its lease has expired" : "it is not running")
                                  : "its create or destroy was interrupted");
            /* the record goes once the container is gone */
            for (size_t i = 0; i < rc->n_recs; i++)
                if (rc->recs[i] == r)
                    rc->recs[i] = registry_record_free(rc->recs[i]);
            return false;
        }
        if ((rc->rebuild || is_suspect(rc, c->m.sandbox)) &&
            (!c->lock || c->state != PVE_CT_STOPPED))
            return rebuild_from_marker(rc, c);
        if (c->lock)
            return false;
        destroy_container(rc, c->vmid, c->node, c->m.sandbox, &rc->st.orphans_destroyed,
                          "marked by this daemon but not recorded");
        return false;
    }
    if (!c->lock && now - (time_t)c->m.created >= (time_t)rc->cfg->sandbox.orphan_grace_s)
        destroy_container(rc, c->vmid, c->node, c->m.sandbox, &rc->st.orphans_destroyed,
                          "marked by this daemon but not recorded");
    return false;
}

static void decide_next(struct reconcile *rc)
{
    while (rc->i_cand < rc->n_cands) {
        if (decide_one(rc, &rc->cands[rc->i_cand]))
            return;
        rc->i_cand++;
    }
    decide_done(rc);
}

/* First run: a container's state is read from GET .../status/current, never taken from the
 * listing (pvestatd's cache: seconds stale, or "unknown"). One that cannot be read stays
 * PVE_CT_UNKNOWN: neither started nor destroyed for it. */
static void on_state(const struct pve_result *res, void *userdata)
{
    struct reconcile *rc = userdata;

    if (!rc->closed) {
        struct cand *c = &rc->cands[rc->n_cands - 1];

        c->state = res->error == 0 ? res->ct_state : PVE_CT_UNKNOWN;
        if (res->error < 0)
            log_debug(COMP, "container %u: state not readable (%s): unknown", c->vmid,
                      res->perr ? res->perr->message : strerror(-res->error));
        scan_next(rc);
    }
    reconcile_unref(rc);
}

static void on_config(const struct pve_result *res, void *userdata)
{
    struct reconcile *rc = userdata;
    const struct pve_vm *vm;
    const char *desc;
    struct marker m;
    struct cand *x;
    int k;

    if (rc->closed) {
        reconcile_unref(rc);
        return;
    }
    vm = &rc->members->v[rc->i_member];
    rc->i_member++;
    if (res->error < 0) {
        log_debug(COMP, "container %u: config not readable (%s): skipped", vm->vmid,
                  res->perr ? res->perr->message : strerror(-res->error));
        goto next;
    }
    desc = reconcile_conf_str(res->data, "description");
    k = marker_parse(desc, &m);
    if (k < 0) {
        if (marker_holder_is(desc, registry_instance_id(engine_registry(rc->e))))
            log_debug(COMP, "container %u: the volume holder: kept", vm->vmid);
        else
            log_debug(COMP, "container %u: no marker of ours (%s): never touched", vm->vmid,
                      strerror(-k));
        goto next;
    }
    if (strcmp(m.instance, registry_instance_id(engine_registry(rc->e))) != 0) {
        log_debug(COMP, "container %u: marked by another instance (%s): never touched", vm->vmid,
                  m.instance);
        goto next;
    }
    /* its static address stays taken until it is destroyed, whatever is decided (a live
     * sandbox's is taken by the table) */
    if (!vmid_known(rc, vm->vmid))
        engine_addr_hold(rc->e, vm->vmid, reconcile_conf_str(res->data, "net0"));
    x = realloc(rc->cands, (rc->n_cands + 1) * sizeof *x);
    if (!x)
        goto next;
    rc->cands = x;
    x = &rc->cands[rc->n_cands++];
    *x = (struct cand){.vmid = vm->vmid, .m = m, .conf = json_object_get(res->data)};
    x->node = strdup(vm->node ? vm->node : rc->cfg->proxmox.nodes[0]);
    {
        const char *lock = reconcile_conf_str(res->data, "lock");
        if (!lock)
            lock = vm->lock;
        x->lock = lock ? strdup(lock) : NULL;
    }
    x->state = PVE_CT_UNKNOWN;
    if (!x->node) {
        free(x->lock);
        json_object_put(x->conf);
        rc->n_cands--;
    } else if (rc->first && pve_status_current(engine_pve(rc->e), x->node, x->vmid,
                                               RECONCILE_CALL_TIMEOUT_MS, on_state, rc, NULL) == 0)
        return; /* keeps the reference */
next:
    scan_next(rc);
    reconcile_unref(rc);
}

/* A template of the pool: one made from a sandbox (template-rt.c) is known again. */
static void on_template_config(const struct pve_result *res, void *userdata)
{
    struct reconcile *rc = userdata;

    if (!rc->closed) {
        const struct pve_vm *vm = &rc->members->v[rc->i_member];

        rc->i_member++;
        if (res->error == 0)
            (void)engine_replica_adopt(rc->e, vm->vmid,
                                       vm->node ? vm->node : rc->cfg->proxmox.nodes[0], res->data);
        if (res->error == 0)
            (void)engine_rt_adopt_config(
                rc->e, vm->vmid, vm->node ? vm->node : rc->cfg->proxmox.nodes[0], res->data);
        scan_next(rc);
    }
    reconcile_unref(rc);
}

static void scan_next(struct reconcile *rc)
{
    while (rc->i_member < rc->members->n) {
        const struct pve_vm *vm = &rc->members->v[rc->i_member];
        const char *node = vm->node ? vm->node : rc->cfg->proxmox.nodes[0];

        if (vm->template && vm->type && strcmp(vm->type, "lxc") == 0 &&
            !cluster_vm_unreachable(rc->e, node, vm->status) &&
            pve_config_get(engine_pve(rc->e), node, vm->vmid, false, RECONCILE_CALL_TIMEOUT_MS,
                           on_template_config, rc, NULL) == 0) {
            reconcile_ref(rc);
            return;
        }
        if (vm->template || (vm->type && strcmp(vm->type, "lxc") != 0) ||
            cluster_vm_unreachable(rc->e, node, vm->status)) {
            rc->i_member++;
            continue;
        }
        /* Every member's config is read, known sandboxes' too: a lock is only in the config
         * (pool members carry none), and a lock that stays is reported (stuck_update). */
        if (pve_config_get(engine_pve(rc->e), node, vm->vmid, false, RECONCILE_CALL_TIMEOUT_MS,
                           on_config, rc, NULL) == 0) {
            reconcile_ref(rc);
            return;
        }
        rc->i_member++;
    }
    rc->i_cand = 0;
    decide_next(rc);
}

static void on_members(const struct pve_result *res, void *userdata)
{
    struct reconcile *rc = userdata;
    char buf[512];

    if (rc->closed) {
        reconcile_unref(rc);
        return;
    }
    if (res->error < 0 || !res->vms) {
        snprintf(buf, sizeof buf, "cannot list pool '%s': %s", rc->cfg->proxmox.pool,
                 res->perr ? res->perr->message : strerror(-res->error));
        run_end(rc, buf);
        reconcile_unref(rc);
        return;
    }
    /* Keep our own copy: the result is borrowed. Re-parse is not possible, so copy fields. */
    rc->members = calloc(1, sizeof *rc->members);
    if (rc->members && res->vms->n > 0) {
        rc->members->v = calloc(res->vms->n, sizeof *rc->members->v);
        if (rc->members->v) {
            for (size_t i = 0; i < res->vms->n; i++) {
                const struct pve_vm *s = &res->vms->v[i];
                struct pve_vm *d = &rc->members->v[rc->members->n++];
                d->vmid = s->vmid;
                d->template = s->template;
                d->type = s->type ? strdup(s->type) : NULL;
                d->node = s->node ? strdup(s->node) : NULL;
                d->status = s->status ? strdup(s->status) : NULL;
                d->lock = s->lock ? strdup(s->lock) : NULL;
            }
        }
    }
    if (!rc->members) {
        run_end(rc, "out of memory");
        reconcile_unref(rc);
        return;
    }
    /* a held static address whose container left the pool is free again */
    for (size_t i = 0; i < rc->e->n_held;) {
        bool found = false;

        for (size_t j = 0; j < rc->members->n && !found; j++)
            found = rc->members->v[j].vmid == rc->e->held[i].vmid;
        if (found)
            i++;
        else
            engine_addr_release(rc->e, rc->e->held[i].vmid);
    }
    rc->i_member = 0;
    scan_next(rc);
    reconcile_unref(rc);
}

static void load_records(struct reconcile *rc)
{
    struct registry_problem *probs = NULL;
    size_t n_probs = 0;
    int k;

    k = registry_load(engine_registry(rc->e), &rc->recs, &rc->n_recs, &probs, &n_probs);
    if (k < 0) {
        notice(rc, LOG_ERR, "cannot read the registry: %s", strerror(-k));
        rc->recs = NULL;
        rc->n_recs = 0;
        return;
    }
    rc->suspects = calloc(n_probs + 1, sizeof(char *));
    for (size_t i = 0; i < n_probs; i++) {
        const char *dot;

        notice(rc, LOG_WARNING,
               "registry record %s unusable (%s), moved to %s; resolved from "
               "Proxmox",
               probs[i].file, probs[i].reason ? probs[i].reason : "corrupt",
               probs[i].moved_to ? probs[i].moved_to : "(not moved)");
        dot = strchr(probs[i].file, '.');
        if (rc->suspects && dot)
            rc->suspects[rc->n_suspects++] = strndup(probs[i].file, (size_t)(dot - probs[i].file));
    }
    rc->st.registry_problems += n_probs;
    registry_problems_free(probs, n_probs);
    /* Keyed creates that were cloning run on (sandbox-resume.c); their records leave recs. */
    rc->st.resumed += engine_resume_creates(rc->e, rc->recs, rc->n_recs);
    /* A registry that was never reconciled (new, or its folder was lost): the markers say
     * what is ours. */
    {
        _cleanup_free_ char *path = NULL;
        if (asprintf(&path, "%s/%s", rc->cfg->server.state_dir, RECONCILE_STAMP_FILE) >= 0)
            rc->rebuild = access(path, F_OK) < 0;
    }
    log_debug(COMP, "registry: %zu records, %zu problems%s", rc->n_recs, n_probs,
              rc->rebuild ? ", rebuilding from markers" : "");
}

static void run_start(struct reconcile *rc)
{
    if (rc->closed || rc->running || engine_closing(rc->e))
        return;
    if (rc->first && !rc->recs && !rc->suspects)
        load_records(rc);
    rc->running = true;
    if (pve_pool_members(engine_pve(rc->e), rc->cfg->proxmox.pool, RECONCILE_CALL_TIMEOUT_MS,
                         on_members, rc, NULL) < 0) {
        run_end(rc, "cannot start the pool listing");
        return;
    }
    reconcile_ref(rc);
}

/* ---- object ---- */

int reconcile_new(struct engine *e, void (*on_initial)(void *userdata), void *userdata,
                  struct reconcile **ret)
{
    struct reconcile *rc;

    if (!engine_configured(e) || !engine_registry(e))
        return -EINVAL;
    rc = calloc(1, sizeof *rc);
    if (!rc)
        return -ENOMEM;
    rc->e = e;
    rc->loop = engine_loop(e);
    rc->cfg = engine_config(e);
    rc->refs = 1;
    rc->first = true;
    rc->on_initial = on_initial;
    rc->userdata = userdata;
    uv_timer_init(rc->loop, &rc->timer);
    uv_timer_init(rc->loop, &rc->lease);
    rc->timer.data = rc->lease.data = rc;
    rc->refs += 2; /* the two timers, dropped in their close callbacks */
    uv_timer_start(&rc->timer, on_run_timer, 0, 0);
    uv_timer_start(&rc->lease, reconcile_lease_tick, RECONCILE_LEASE_TICK_MS,
                   RECONCILE_LEASE_TICK_MS);
    *ret = rc;
    return 0;
}

static void timer_closed(uv_handle_t *h)
{
    reconcile_unref(h->data);
}

struct reconcile *reconcile_free(struct reconcile *rc)
{
    if (!rc)
        return NULL;
    rc->closed = true;
    uv_close((uv_handle_t *)&rc->timer, timer_closed);
    uv_close((uv_handle_t *)&rc->lease, timer_closed);
    reconcile_unref(rc);
    return NULL;
}

bool reconcile_initial_done(const struct reconcile *rc)
{
    return !rc || rc->initial_done;
}

void reconcile_get_stats(const struct reconcile *rc, struct reconcile_stats *ret)
{
    *ret = rc->st;
    ret->last_error = rc->last_error;
    ret->n_stuck = rc->n_stuck;
    ret->stuck = rc->stuck;
}
