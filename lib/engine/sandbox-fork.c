/* sandbox.fork. See sandbox-fork.h.
 *
 * The fork's own steps are the parent's: a snapshot list (a named snapshot must exist) or a
 * snapshot taken for the fork (engine_snapshot(), on the step driver), and at the end that
 * snapshot's delete (engine_snapshot_delete()). Each child is a create (create_launch()) on
 * the step driver with its intent written ahead, so a restart rolls back a child that was not
 * READY exactly as an interrupted create; a fork's snapshot left behind (a restart, a busy
 * parent) is deleted by fork_cleanup_tick(), from reconcile's lease tick. */
#include "macro.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>

#include "audit.h"
#include "log.h"
#include "metrics.h"
#include "pve.h"
#include "sandbox-fork.h"
#include "sandbox-internal.h"
#include "sandbox-snapshot.h"
#include "testhook.h"

#define COMP "sandbox"

struct fork_op {
    struct engine *e;
    struct sandbox *parent; /* a reference held until the end */
    unsigned count, pending, failed;
    char snap[41];
    bool temp;  /* snap was taken for the fork: deleted at the end */
    bool early; /* failed before any child was launched: its error as it is */
    int64_t ttl;
    uint64_t started_ms;                             /* the request (uv_now scale) */
    struct sandbox *children[ENGINE_FORK_COUNT_MAX]; /* READY, a reference each */
    size_t n;
    struct engine_error err; /* the first failure; message in msg */
    char *msg;
    engine_fork_cb cb;
    void *userdata;
};

/* ---- the fork ---- */

static void fork_audit(const struct fork_op *f, const char *event, int prio, const char *what)
{
    struct audit_record rec = {.event = event,
                               .priority = prio,
                               .sandbox = f->parent->id,
                               .vmid = f->parent->vmid,
                               .node = f->parent->node,
                               .caller_uid = AUDIT_NO_UID,
                               .owner_uid = f->parent->owner_uid,
                               .reason = f->snap};

    audit_emit(&rec, "fork of sandbox %s from snapshot %s: %s", f->parent->id, f->snap, what);
}

static void fork_note_error(struct fork_op *f, const struct engine_error *err)
{
    if (f->msg || !err)
        return;
    f->err = *err;
    f->msg = strdup(err->message ? err->message : "failed");
    f->err.message = f->msg;
    f->err.upid = NULL; /* param and cap: string literals (engine_error) */
    f->err.state = NULL;
}

/* The caller hears of the outcome; the references go. */
static void fork_end(struct fork_op *f)
{
    char buf[512];
    struct engine_error err = f->err;

    if ((f->failed || !f->n) && !f->early) {
        snprintf(buf, sizeof buf, "%u of %u children failed: %s", f->failed, f->count,
                 strna(f->msg));
        err.message = buf;
    }
    fork_audit(f, f->failed ? "sandbox.fork_failed" : "sandbox.forked",
               f->failed ? LOG_WARNING : LOG_INFO, f->failed ? err.message : "done");
    log_info(COMP, "%s: fork done: %zu children made, %u failed", f->parent->id, f->n, f->failed);
    f->cb(f->failed || !f->n ? &err : NULL, f->failed, f->children, f->n, f->userdata);
    for (size_t i = 0; i < f->n; i++)
        sandbox_unref(f->children[i]);
    sandbox_unref(f->parent);
    free(f->msg);
    free(f);
}

/* ---- the snapshot taken for a fork: recorded in the parent's registry record before it
 * is taken (fork_pending), deleted once the children are cloned, the record cleared then. A
 * delete that could not run (the parent busy, Proxmox refusing, a restart) is retried by the
 * lease tick; a snapshot that is not there (never taken) counts as deleted. ---- */

#define FORK_CLEANUP_RETRY_MS 30000u

static void on_pending_deleted(const struct engine_error *err, json_object *result, void *userdata)
{
    struct sandbox *sb = userdata;

    if (!err || (err->kind == ENGINE_E_INVALID && err->param && !strcmp(err->param, "name"))) {
        log_info(COMP, "%s: the fork's snapshot %s is deleted", sb->id, sb->fork_pending);
        sb->fork_pending[0] = '\0';
        if (sb->state != SANDBOX_GONE)
            (void)engine_save(sb, NULL, NULL);
    } else
        log_warning(COMP, "%s: cannot delete the fork's snapshot %s (retried): %s", sb->id,
                    sb->fork_pending, strna(err->message));
    sandbox_unref(sb);
}

/* Starts the delete of sb's fork snapshot when it can run now; false otherwise. */
static bool pending_delete(struct sandbox *sb)
{
    struct engine_error err;

    if (!sb->fork_pending[0] || sb->state != SANDBOX_READY || sandbox_busy(sb))
        return false;
    sb->fork_retry_ms = now_ms(sb->engine) + FORK_CLEANUP_RETRY_MS;
    sb->refs++;
    if (engine_snapshot_delete(sb->engine, sb, sb->fork_pending, on_pending_deleted, sb, &err) <
        0) {
        sb->refs--;
        return false;
    }
    return true;
}

void fork_cleanup_tick(struct engine *e)
{
    uint64_t now = now_ms(e);

    for (struct sandbox *sb = e->sandboxes; sb; sb = sb->next)
        if (sb->fork_pending[0] && now >= sb->fork_retry_ms)
            (void)pending_delete(sb);
}

/* Every child is READY or rolled back: the snapshot taken for the fork goes. */
static void fork_children_done(struct fork_op *f)
{
    f->parent->forks--;
    if (f->temp) {
        if (!pending_delete(f->parent))
            log_warning(COMP, "%s: the fork's snapshot %s stays for now (deleted later)",
                        f->parent->id, f->snap);
    }
    fork_end(f);
}

static void on_child(const struct engine_error *err, struct sandbox *sb, void *userdata)
{
    struct fork_op *f = userdata;

    metrics_add(M_FORK_CHILDREN, err ? "failed" : "ready", NULL, 1);
    if (err) {
        f->failed++;
        fork_note_error(f, err);
    } else {
        metrics_observe(M_FORK_CHILD_SECONDS, NULL,
                        (double)(now_ms(f->e) - f->started_ms) / 1000.0);
        sb->refs++;
        f->children[f->n++] = sb;
    }
    if (--f->pending == 0)
        fork_children_done(f);
}

static void fork_fail_early(struct fork_op *f, const struct engine_error *err);

/* count more sandboxes of the parent's owner fit max_per_uid and max_total: 0, or the
 * refusal (checked when the fork is asked for, and again when its children begin). */
static int fork_quota(struct engine *e, const struct sandbox *p, unsigned count,
                      struct engine_error *ret_err)
{
    const struct config_sandbox *cs = &e->cfg->sandbox;
    unsigned n_uid = 0;

    for (const struct sandbox *sb = e->sandboxes; sb; sb = sb->next)
        if (sb->owner_uid == p->owner_uid && !sb->pool_member)
            n_uid++;
    if (n_uid + count > cs->max_per_uid) {
        engine_refuse(ret_err, ENGINE_E_QUOTA, -EDQUOT,
                      "too many sandboxes for this uid (max_per_uid)", NULL);
        ret_err->limit = cs->max_per_uid;
        return -EDQUOT;
    }
    if (e->n_sandboxes + count > cs->max_total)
        return engine_refuse(ret_err, ENGINE_E_QUOTA, -EDQUOT, "too many sandboxes (max_total)",
                             NULL);
    return 0;
}

/* The children's creates begin: one create each, cloned from the parent's snapshot. */
static void fork_launch(struct fork_op *f)
{
    struct sandbox *p = f->parent;
    unsigned count = f->count; /* f is freed once the last child reports, maybe in the loop */
    struct engine_error err;

    if (fork_quota(f->e, p, count, &err) < 0) { /* others were made meanwhile */
        fork_fail_early(f, &err);
        return;
    }

    f->pending = count;
    for (unsigned i = 0; i < count; i++) {
        struct sandbox_create_opts o = {
            .owner_uid = p->owner_uid,
            .cores = (int)p->cores,
            .memory_mb = (int)p->memory_mb,
            .disk_gb = (int)p->disk_gb,
            .net_rate_mbps = (int)p->net_rate_mbps,
            .internet = p->internet,
            .internet_allow = p->internet_allow, /* never more than the parent */
            .labels = p->labels,
            .env = p->env,
            .template = p->template,
            .node = p->node,
            .no_pool = true,
            .fork_vmid = p->vmid,
            .fork_snap = f->snap,
            .fork_pin = p->host_key,
            .fork_slot = i,
        };
        struct sb_op *op = create_op_new();

        if (!op) {
            engine_refuse_oom(&err);
            on_child(&err, NULL, f);
            continue;
        }
        op->cb = on_child;
        op->userdata = f;
        if (create_launch(f->e, &o, f->ttl, p->node, op, &err) < 0) {
            free(op);
            on_child(&err, NULL, f);
        }
    }
}

static void fork_fail_early(struct fork_op *f, const struct engine_error *err)
{
    f->failed = f->count;
    f->early = true;
    fork_note_error(f, err);
    f->parent->forks--;
    if (f->temp) /* the snapshot, if it was made */
        (void)pending_delete(f->parent);
    fork_end(f);
}

static void on_temp_taken(const struct engine_error *err, json_object *result, void *userdata)
{
    struct fork_op *f = userdata;

    if (err) {
        fork_fail_early(f, err);
        return;
    }
    test_crash_point("fork-snapshot-taken");
    fork_launch(f);
}

/* The snapshot's name is durable in the parent's record: it is taken now. */
static void on_pending_saved(int r, void *userdata)
{
    struct fork_op *f = userdata;
    struct engine_error err = {
        .kind = ENGINE_E_INTERNAL, .error = r, .message = "cannot write the registry record"};

    if (r >= 0)
        test_crash_point("fork-snapshot-recorded");
    if (r >= 0 && !f->e->closing &&
        engine_snapshot(f->e, f->parent, f->snap, on_temp_taken, f, &err) >= 0)
        return;
    if (r >= 0 && f->e->closing)
        err = (struct engine_error){.kind = ENGINE_E_SHUTDOWN,
                                    .error = -ESHUTDOWN,
                                    .message = "the daemon is shutting down"};
    fork_fail_early(f, &err);
}

static void on_listed(const struct engine_error *err, json_object *result, void *userdata)
{
    struct fork_op *f = userdata;
    json_object *list = NULL, *v;

    if (err) {
        fork_fail_early(f, err);
        return;
    }
    json_object_object_get_ex(result, "snapshots", &list);
    for (size_t i = 0; list && i < json_object_array_length(list); i++)
        if (json_object_object_get_ex(json_object_array_get_idx(list, i), "name", &v) &&
            strcmp(json_object_get_string(v), f->snap) == 0) {
            fork_launch(f);
            return;
        }
    fork_fail_early(f, &(struct engine_error){.kind = ENGINE_E_INVALID,
                                              .error = -ENOENT,
                                              .message = "the sandbox has no snapshot of that name",
                                              .param = "snapshot"});
}

/* The refusals before anything is asked of Proxmox. */
static int fork_check(struct engine *e, const struct sandbox *p, const struct engine_fork_opts *o,
                      int64_t ttl, struct engine_error *ret_err)
{
    const struct config_sandbox *cs = &e->cfg->sandbox;

    if (engine_refuse_unavailable(e, ret_err) < 0)
        return ret_err->error;
    if (o->count < 1 || o->count > ENGINE_FORK_COUNT_MAX)
        return engine_refuse(ret_err, ENGINE_E_INVALID, -EINVAL, "must be 1..32", "count");
    if (engine_refuse_ttl(ret_err, ttl, cs->max_ttl_s, "ttl_s must be 1..max_ttl_s", "max_ttl_s"))
        return -EINVAL;
    if (p->state != SANDBOX_READY || p->destroy_requested || !p->vmid)
        return engine_refuse_not_ready(ret_err, p->state);
    if (sandbox_has_volumes(p))
        return engine_refuse(ret_err, ENGINE_E_INVALID, -EINVAL, SANDBOX_VOLUMES_REFUSED, "id");
    if ((!o->snapshot || !*o->snapshot) && (p->fork_pending[0] || sandbox_busy(p)))
        return engine_refuse(ret_err, ENGINE_E_BUSY, -EBUSY,
                             "another operation on this sandbox is running", NULL);
    return fork_quota(e, p, o->count, ret_err);
}

int engine_fork(struct engine *e, struct sandbox *parent, const struct engine_fork_opts *o,
                engine_fork_cb cb, void *userdata, struct engine_error *ret_err)
{
    int64_t ttl = o->ttl_s > 0 ? o->ttl_s : (int64_t)(parent->expires_at - parent->created_at);
    char rnd[ID_MAX + 1];
    struct fork_op *f;
    int r;

    if (o->ttl_s <= 0 && ttl > (int64_t)e->cfg->sandbox.max_ttl_s)
        ttl = (int64_t)e->cfg->sandbox.max_ttl_s;
    r = fork_check(e, parent, o, ttl, ret_err);
    if (r < 0)
        return r;
    f = calloc(1, sizeof *f);
    if (!f)
        return engine_refuse_oom(ret_err);
    *f = (struct fork_op){
        .e = e, .parent = parent, .count = o->count, .ttl = ttl, .cb = cb, .userdata = userdata};
    f->started_ms = now_ms(e);
    f->temp = !o->snapshot || !*o->snapshot;
    if (f->temp) {
        r = id_random(rnd, sizeof rnd, "");
        snprintf(f->snap, sizeof f->snap, "%s%.8s", ENGINE_FORK_SNAP_PREFIX, r < 0 ? "x" : rnd);
        memcpy(parent->fork_pending, f->snap, sizeof f->snap);
        r = sandbox_save(parent, on_pending_saved, f);
        if (r < 0) {
            parent->fork_pending[0] = '\0';
            engine_refuse(ret_err, ENGINE_E_INTERNAL, r, "cannot write the registry record", NULL);
        }
    } else {
        snprintf(f->snap, sizeof f->snap, "%s", o->snapshot);
        r = engine_snapshots(e, parent, on_listed, f, ret_err);
    }
    if (r < 0) {
        free(f);
        return r;
    }
    parent->refs++;
    parent->forks++;
    log_info(COMP, "%s: fork of %u from snapshot %s%s", parent->id, o->count, f->snap,
             f->temp ? " (taken for the fork)" : "");
    fork_audit(f, "sandbox.fork_requested", LOG_INFO, "requested");
    return 0;
}
