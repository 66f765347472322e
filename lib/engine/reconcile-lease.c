/* The reconcile's leases: the tick that destroys expired sandboxes (a step of the wall
 * clock moves every lease end with it), sandbox.renew, and the destroy of everything at a
 * stop with destroy_on_stop. See reconcile.h. */
#include "macro.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "marker.h"
#include "reconcile-internal.h"
#include "registry.h"
#include "sandbox-pause.h"
#include "util.h"

#define COMP "reconcile"

/* ---- leases ---- */

/* A step of the wall clock since the last tick (seconds, signed), 0 when there was none.
 * Leases are durations: a step moves every lease's end in memory by as much, so that no
 * lease ends sooner or later in real time; the wall times persisted stay as written. */
static int64_t clock_step(struct reconcile *rc, time_t now)
{
    int64_t offset = (int64_t)now - (int64_t)now_boottime_s(), step;
    struct sandbox *sb;

    step = rc->wall_minus_boot ? offset - rc->wall_minus_boot : 0;
    rc->wall_minus_boot = offset;
    if (step > -RECONCILE_CLOCK_STEP_S && step < RECONCILE_CLOCK_STEP_S)
        return 0;
    for (sb = engine_first(rc->e); sb; sb = engine_next(rc->e, sb))
        sb->expires_at += (time_t)step;
    notice(rc, LOG_WARNING,
           "the wall clock stepped by %+" PRId64 " s: every lease end moves with it, and "
           "expiry waits one tick",
           step);
    return step;
}

void reconcile_lease_tick(uv_timer_t *t)
{
    struct reconcile *rc = t->data;
    time_t now = now_realtime();
    struct engine_error derr; /* a destroy that cannot start is retried at the next tick */
    struct sandbox *sb, *next;
    unsigned started = 0;

    if (rc->closed || engine_closing(rc->e))
        return;
    if (clock_step(rc, now) != 0)
        return;
    fork_cleanup_tick(rc->e);
    for (sb = engine_first(rc->e); sb && started < RECONCILE_EXPIRE_PER_TICK; sb = next) {
        next = engine_next(rc->e, sb);
        engine_auto_pause_check(sb);
        /* a paused sandbox's lease is its paused one (max_paused_ttl_s) */
        if ((sb->state != SANDBOX_READY && sb->state != SANDBOX_PAUSED) || sandbox_busy(sb) ||
            sb->expires_at > now ||
            cluster_node_down(rc->e, sb->node)) /* destroyed once its node answers */
            continue;
        started++;
        log_debug(COMP, "%s: lease expired", sb->id);
        engine_destroy_reason(sb, "lease_expired", -1);
        if (engine_destroy(rc->e, sb, reconcile_on_expired, reconcile_ref(rc), &derr) < 0)
            rc->refs--;
    }
}

/* ---- renew ---- */

struct renew {
    struct reconcile *rc;
    char id[ID_MAX + 1];
    time_t expires;
    engine_sandbox_cb cb;
    void *userdata;
};

static void renew_finish(struct renew *rn, const struct engine_error *err)
{
    struct reconcile *rc = rn->rc;
    struct sandbox *sb = rc->closed ? NULL : reconcile_find_sandbox(rc, rn->id);
    struct engine_error e2;

    if (!err && !sb) {
        e2 = (struct engine_error){.kind = rc->closed ? ENGINE_E_SHUTDOWN : ENGINE_E_NOT_FOUND,
                                   .error = -ENOENT,
                                   .message = rc->closed ? "the daemon is shutting down"
                                                         : "the sandbox went away"};
        err = &e2;
    }
    rn->cb(err, sb, rn->userdata);
    free(rn);
    reconcile_unref(rc);
}

static void renew_fail_pve(struct renew *rn, const struct pve_result *res, const char *what)
{
    struct engine_error err = {
        .kind = ENGINE_E_PROXMOX,
        .error = res->error,
        .http_status = res->perr ? res->perr->http_status : 0,
        .message = res->perr ? res->perr->message : what,
    };

    if (rn->rc->closed || res->error == -ECANCELED)
        err = (struct engine_error){.kind = ENGINE_E_SHUTDOWN,
                                    .error = -ECANCELED,
                                    .message = "the daemon is shutting down"};
    renew_finish(rn, &err);
}

static void on_renew_put(const struct pve_result *res, void *userdata)
{
    struct renew *rn = userdata;

    if (res->error < 0) {
        renew_fail_pve(rn, res, "cannot update the marker");
        return;
    }
    renew_finish(rn, NULL);
}

static void on_renew_conf(const struct pve_result *res, void *userdata)
{
    struct renew *rn = userdata;
    struct reconcile *rc = rn->rc;
    _cleanup_free_ char *desc = NULL;
    json_object *p;
    struct sandbox *sb;
    int k;

    if (res->error < 0 || rc->closed) {
        renew_fail_pve(rn, res, "cannot read the marker");
        return;
    }
    sb = reconcile_find_sandbox(rc, rn->id);
    if (!sb) {
        renew_finish(rn, NULL);
        return;
    }
    k = marker_update_expiry(reconcile_conf_str(res->data, "description"), (int64_t)rn->expires,
                             &desc);
    if (k < 0) {
        struct engine_error err = {.kind = ENGINE_E_INTERNAL,
                                   .error = k,
                                   .message = "the container's marker cannot be updated"};
        renew_finish(rn, &err);
        return;
    }
    p = json_object_new_object();
    json_object_object_add(p, "description", json_object_new_string(desc));
    k = pve_config_put(engine_pve(rc->e), sb->node, sb->vmid, p, RECONCILE_CALL_TIMEOUT_MS,
                       on_renew_put, rn, NULL);
    json_object_put(p);
    if (k < 0) {
        struct engine_error err = {
            .kind = ENGINE_E_INTERNAL, .error = k, .message = "cannot update the marker"};
        renew_finish(rn, &err);
    }
}

static void on_renew_saved(int r, void *userdata)
{
    struct renew *rn = userdata;
    struct reconcile *rc = rn->rc;
    struct sandbox *sb;
    int k;

    if (rc->closed) {
        renew_finish(rn, NULL);
        return;
    }
    if (r < 0) {
        struct engine_error err = {
            .kind = ENGINE_E_INTERNAL, .error = r, .message = "cannot write the registry record"};
        renew_finish(rn, &err);
        return;
    }
    sb = reconcile_find_sandbox(rc, rn->id);
    if (!sb || engine_closing(rc->e)) {
        renew_finish(rn, NULL);
        return;
    }
    k = pve_config_get(engine_pve(rc->e), sb->node, sb->vmid, false, RECONCILE_CALL_TIMEOUT_MS,
                       on_renew_conf, rn, NULL);
    if (k < 0) {
        struct engine_error err = {
            .kind = ENGINE_E_INTERNAL, .error = k, .message = "cannot read the marker"};
        renew_finish(rn, &err);
    }
}

int reconcile_renew(struct reconcile *rc, struct sandbox *sb, int64_t ttl_s, engine_sandbox_cb cb,
                    void *userdata, struct engine_error *ret_err)
{
    struct renew *rn;
    int k;

    bool paused = sb->state == SANDBOX_PAUSED && !sb->pause_op;
    unsigned max = paused ? rc->cfg->sandbox.max_paused_ttl_s : rc->cfg->sandbox.max_ttl_s;

    if (engine_refuse_ttl(ret_err, ttl_s, max,
                          paused ? "ttl_s must be 1..max_paused_ttl_s for a paused sandbox"
                                 : "ttl_s must be 1..max_ttl_s",
                          paused ? "max_paused_ttl_s" : "max_ttl_s"))
        return -EINVAL;
    if ((sb->state != SANDBOX_READY && !paused) || sb->create_op || sb->destroy_requested)
        return engine_refuse_not_ready(ret_err, sb->state);
    rn = calloc(1, sizeof *rn);
    if (!rn)
        return engine_refuse_oom(ret_err);
    rn->rc = rc;
    snprintf(rn->id, sizeof rn->id, "%s", sb->id);
    rn->expires = now_realtime() + (time_t)ttl_s;
    rn->cb = cb;
    rn->userdata = userdata;
    sb->expires_at = rn->expires;
    k = engine_save(sb, on_renew_saved, rn);
    if (k < 0) {
        free(rn);
        return engine_refuse(ret_err, ENGINE_E_INTERNAL, k, "cannot write the registry record",
                             NULL);
    }
    reconcile_ref(rc);
    return 0;
}

/* ---- destroy everything (destroy_on_stop) ---- */

struct dall {
    struct reconcile *rc;
    unsigned pending;
    void (*cb)(void *userdata);
    void *userdata;
};

static void on_dall_one(const struct engine_error *err, void *userdata)
{
    struct dall *d = userdata;

    if (--d->pending == 0) {
        d->cb(d->userdata);
        reconcile_unref(d->rc);
        free(d);
    }
}

int reconcile_destroy_all(struct reconcile *rc, void (*cb)(void *userdata), void *userdata)
{
    struct dall *d = calloc(1, sizeof *d);
    struct engine_error derr; /* a destroy that cannot start is not waited for */
    struct sandbox *sb, *next;

    if (!d)
        return -ENOMEM;
    d->rc = reconcile_ref(rc);
    d->cb = cb;
    d->userdata = userdata;
    d->pending = 1;
    for (sb = engine_first(rc->e); sb; sb = next) {
        next = engine_next(rc->e, sb);
        d->pending++;
        engine_destroy_reason(sb, "shutdown", -1);
        if (engine_destroy(rc->e, sb, on_dall_one, d, &derr) < 0)
            d->pending--;
    }
    on_dall_one(NULL, d);
    return 0;
}
