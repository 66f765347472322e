/* The sandbox engine: lifecycle state machine over the Proxmox client, SSH pools and the
 * registry. See sandbox.h. */
#include "macro.h" /* before <uv.h> */

#include "sandbox.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>

#include "log.h"
#include "macro.h"
#include "marker.h"
#include "pve.h"
#include "reconcile.h"
#include "registry.h"

#define COMP "sandbox"

static inline void json_putp(json_object **o)
{
    if (*o)
        json_object_put(*o);
}
#define _cleanup_json_ _cleanup_(json_putp)

struct sb_op {
    engine_sandbox_cb cb;
    void *userdata;
    bool failed;
    struct engine_error err; /* first failure; strings below */
    char *msg;
    char *upid;
};

struct sb_waiter {
    engine_done_cb cb;
    void *userdata;
    struct sb_waiter *next;
};

struct tomb {
    char id[ID_MAX + 1];
    uid_t uid;
};

struct fw_op {
    struct sandbox *sb;
    bool enabled;
    engine_sandbox_cb cb;
    void *userdata;
    struct fw_op *next; /* in sb->fw_waiting */
};

struct engine {
    uv_loop_t *loop;
    const struct config *cfg;
    struct engine_hooks hooks;
    struct pve_client *pve;
    struct registry *reg;
    struct sshs_key *key;
    char *pins;
    bool configured;

    struct sandbox *sandboxes;
    unsigned n_sandboxes;

    uv_timer_t probe;
    bool probe_open;
    struct pve_call *probe_call;
    struct pve_call *fw_call;
    bool fw_checked;
    int reachable; /* -1 unknown, 0, 1 */
    char *last_error;

    struct tomb *tombs;
    size_t n_tombs, tomb_next;

    bool closing;
    unsigned close_pending;
    void (*close_cb)(void *userdata);
    void *close_userdata;
};

static const char *const state_names[_SANDBOX_STATE_MAX] = {
    [SANDBOX_PENDING] = "pending",
    [SANDBOX_CLONING] = "cloning",
    [SANDBOX_CONFIGURING] = "configuring",
    [SANDBOX_STARTING] = "starting",
    [SANDBOX_WAITING_IP] = "waiting_ip",
    [SANDBOX_CONNECTING] = "connecting",
    [SANDBOX_READY] = "ready",
    [SANDBOX_DESTROYING] = "destroying",
    [SANDBOX_GONE] = "gone",
    [SANDBOX_FAILED] = "failed",
};

const char *sandbox_state_to_string(enum sandbox_state s)
{
    return (unsigned)s < _SANDBOX_STATE_MAX ? state_names[s] : NULL;
}

const char *sandbox_state_to_public(enum sandbox_state s)
{
    switch (s) {
    case SANDBOX_READY:
        return "ready";
    case SANDBOX_DESTROYING:
        return "destroying";
    case SANDBOX_GONE:
        return "destroyed";
    case SANDBOX_FAILED:
        return "failed";
    default:
        return "creating";
    }
}

static void notice(struct engine *e, int level, const char *fmt, ...) _printf_(3, 4);
static void notice(struct engine *e, int level, const char *fmt, ...)
{
    char buf[1024];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    log_debug(COMP, "%s", buf);
    if (e->hooks.notice)
        e->hooks.notice(level, buf, e->hooks.userdata);
}

/* ---- registry ---- */

static int reg_state_of(enum sandbox_state s)
{
    switch (s) {
    case SANDBOX_PENDING:
        return REG_PENDING;
    case SANDBOX_CLONING:
        return REG_CLONING;
    case SANDBOX_CONFIGURING:
        return REG_CONFIGURING;
    case SANDBOX_STARTING:
        return REG_STARTING;
    case SANDBOX_WAITING_IP:
        return REG_WAITING_IP;
    case SANDBOX_CONNECTING:
        return REG_CONNECTING;
    case SANDBOX_READY:
        return REG_READY;
    case SANDBOX_DESTROYING:
        return REG_DESTROYING;
    default:
        return REG_FAILED;
    }
}

static int sandbox_save(struct sandbox *sb, reg_done_fn cb, void *userdata)
{
    struct engine *e = sb->engine;
    char errbuf[REG_ERROR_MAX];
    struct reg_record r = {
        .id = sb->id,
        .instance = (char *)reg_instance_id(e->reg),
        .owner_uid = sb->owner_uid,
        .vmid = (int)sb->vmid,
        .node = sb->node,
        .state = reg_state_of(sb->state),
        .hostname = sb->hostname,
        .ip = sb->ip,
        .cores = sb->cores,
        .memory_mb = sb->memory_mb,
        .disk_gb = sb->disk_gb,
        .internet = sb->internet,
        .labels = sb->labels,
        .created_at = sb->created_at,
        .expires_at = sb->expires_at,
        .idempotency_key = sb->idempotency_key,
        .params_hash = sb->params_hash[0] ? (char *)sb->params_hash : NULL,
    };

    if (sb->error) {
        size_t i, j = 0;
        /* Printable text only, bounded. */
        for (i = 0; sb->error[i] && j + 1 < sizeof errbuf; i++)
            errbuf[j++] = (sb->error[i] >= 0x20 && sb->error[i] < 0x7f) ? sb->error[i] : ' ';
        errbuf[j] = 0;
        r.error = errbuf;
    }
    if (!e->reg)
        return -ESHUTDOWN;
    return reg_save_async(e->reg, e->loop, &r, cb, userdata);
}

static void save_logged(int r, void *userdata)
{
    if (r < 0)
        log_debug_errno(r, COMP, "registry save failed: %m");
}

static uint64_t now_ms(struct engine *e);

static void sandbox_set_state(struct sandbox *sb, enum sandbox_state s)
{
    if (sb->state == s)
        return;
    log_debug(COMP, "%s: %s -> %s (+%" PRIu64 " ms)", sb->id, sandbox_state_to_string(sb->state),
              sandbox_state_to_string(s), now_ms(sb->engine) - sb->started_ms);
    sb->state = s;
    if (s != SANDBOX_GONE && s != SANDBOX_PENDING && !sb->engine->closing)
        (void)sandbox_save(sb, save_logged, NULL);
}

/* ---- table ---- */

static void engine_free_now(struct engine *e)
{
    free(e->tombs);
    free(e->pins);
    free(e->last_error);
    free(e);
}

/* Drops one of engine_close()'s pending handles; the last one frees the engine. */
static void engine_release(struct engine *e)
{
    if (--e->close_pending == 0) {
        void (*cb)(void *) = e->close_cb;
        void *ud = e->close_userdata;

        engine_free_now(e);
        if (cb)
            cb(ud);
    }
}

static void sandbox_free_cb(uv_handle_t *h)
{
    struct sandbox *sb = h->data;
    struct engine *e = sb->engine;

    free(sb->node);
    free(sb->hostname);
    free(sb->ip);
    free(sb->error);
    free(sb->idempotency_key);
    if (sb->labels)
        json_object_put(sb->labels);
    bool counted = sb->close_counted;
    free(sb);
    if (counted)
        engine_release(e);
}

static void sandbox_unlink(struct sandbox *sb)
{
    struct engine *e = sb->engine;

    if (sb->prev)
        sb->prev->next = sb->next;
    else if (e->sandboxes == sb)
        e->sandboxes = sb->next;
    if (sb->next)
        sb->next->prev = sb->prev;
    sb->next = sb->prev = NULL;
    e->n_sandboxes--;
}

/* Frees a GONE sandbox once nothing holds it. */
static void sandbox_maybe_free(struct sandbox *sb)
{
    if (sb->state != SANDBOX_GONE || sb->refs > 0 || sb->create_op || sb->call)
        return;
    uv_close((uv_handle_t *)&sb->timer, sandbox_free_cb);
}

static void sandbox_unref(struct sandbox *sb)
{
    if (sb->refs > 0)
        sb->refs--;
    sandbox_maybe_free(sb);
}

struct sandbox *engine_first(struct engine *e)
{
    return e ? e->sandboxes : NULL;
}

struct sandbox *engine_next(struct engine *e, struct sandbox *sb)
{
    return sb ? sb->next : NULL;
}

struct sandbox *engine_lookup(struct engine *e, const char *id, uid_t uid, bool admin)
{
    if (!e || !id)
        return NULL;
    for (struct sandbox *sb = e->sandboxes; sb; sb = sb->next)
        if (strcmp(sb->id, id) == 0)
            return (admin || sb->owner_uid == uid) ? sb : NULL;
    return NULL;
}

bool engine_was_destroyed(const struct engine *e, const char *id, uid_t uid, bool admin)
{
    if (!e || !id)
        return false;
    for (size_t i = 0; i < e->n_tombs; i++)
        if (strcmp(e->tombs[i].id, id) == 0)
            return admin || e->tombs[i].uid == uid;
    return false;
}

static void tomb_add(struct engine *e, const struct sandbox *sb)
{
    struct tomb *t;

    if (!e->tombs) {
        e->tombs = calloc(ENGINE_TOMBSTONES_MAX, sizeof *e->tombs);
        if (!e->tombs)
            return;
    }
    t = &e->tombs[e->tomb_next];
    e->tomb_next = (e->tomb_next + 1) % ENGINE_TOMBSTONES_MAX;
    if (e->n_tombs < ENGINE_TOMBSTONES_MAX)
        e->n_tombs++;
    snprintf(t->id, sizeof t->id, "%s", sb->id);
    t->uid = sb->owner_uid;
}

void engine_count_states(const struct engine *e, unsigned counts[_SANDBOX_STATE_MAX])
{
    memset(counts, 0, sizeof(unsigned) * _SANDBOX_STATE_MAX);
    if (!e)
        return;
    for (struct sandbox *sb = e->sandboxes; sb; sb = sb->next)
        counts[sb->state]++;
}

void engine_proxmox_status(const struct engine *e, int *ret_reachable, const char **ret_last_error)
{
    *ret_reachable = e ? e->reachable : -1;
    *ret_last_error = e ? e->last_error : NULL;
}

bool engine_configured(const struct engine *e)
{
    return e && e->configured;
}

const struct config *engine_config(const struct engine *e)
{
    return e->cfg;
}

/* ---- errors ---- */

static void op_set_error(struct sb_op *op, const struct engine_error *err)
{
    if (op->failed)
        return;
    op->failed = true;
    op->err = *err;
    op->msg = strdup(err->message ? err->message : "");
    op->upid = err->upid ? strdup(err->upid) : NULL;
    op->err.message = op->msg ? op->msg : "out of memory";
    op->err.upid = op->upid;
    op->err.state = NULL;
    op->err.param = NULL;
}

static void op_free(struct sb_op *op)
{
    if (!op)
        return;
    free(op->msg);
    free(op->upid);
    free(op);
}

/* Builds an engine_error from a Proxmox result (strings borrowed from res). */
static void error_from_pve(const struct pve_result *res, bool closing, struct engine_error *ret)
{
    *ret = (struct engine_error){.error = res->error};
    if (res->error == -EREMOTEIO && res->perr) {
        ret->kind = ENGINE_E_PROXMOX;
        ret->http_status = res->perr->http_status;
        ret->message = res->perr->message;
        ret->upid = res->perr->upid ? res->perr->upid : res->upid;
    } else if (res->error == -ECANCELED || closing) {
        ret->kind = ENGINE_E_SHUTDOWN;
        ret->message = "the daemon is shutting down";
    } else if (res->error == -ETIMEDOUT) {
        ret->kind = ENGINE_E_DEADLINE;
        ret->message = "Proxmox did not answer within the deadline";
        ret->upid = res->upid;
    } else {
        ret->kind = ENGINE_E_PROXMOX;
        ret->message = strerror(-res->error);
        ret->upid = res->upid;
    }
}

/* ---- deadlines ---- */

static uint64_t now_ms(struct engine *e)
{
    uv_update_time(e->loop);
    return uv_now(e->loop);
}

/* Time left for a create step capped at cap_ms; 0 when the create deadline passed. */
static uint64_t step_timeout(struct sandbox *sb, uint64_t cap_ms)
{
    uint64_t now = now_ms(sb->engine);

    if (now >= sb->deadline_ms)
        return 0;
    return MIN(cap_ms, sb->deadline_ms - now);
}

static uint64_t destroy_timeout(struct sandbox *sb)
{
    uint64_t now = now_ms(sb->engine);

    return now >= sb->destroy_deadline_ms ? 1 : sb->destroy_deadline_ms - now;
}

/* ---- destroy ---- */

static void destroy_step_stop(struct sandbox *sb);
static void create_finish(struct sandbox *sb);

static void sandbox_close_ssh(struct sandbox *sb)
{
    struct sshpool *pool = TAKE_PTR(sb->pool);
    struct sshfile *file = TAKE_PTR(sb->file);

    if (pool)
        sshpool_close(pool, NULL, NULL);
    if (file)
        sshfile_close(file, NULL, NULL);
}

/* The destroy finished (err NULL: gone). Serves the waiters and a failed create. */
static void destroy_finish(struct sandbox *sb, const struct engine_error *err)
{
    struct engine *e = sb->engine;
    struct sb_waiter *w = sb->destroy_waiters;

    sb->destroy_waiters = NULL;
    if (!err) {
        sandbox_set_state(sb, SANDBOX_GONE);
        tomb_add(e, sb);
        if (e->reg && !e->closing)
            (void)reg_remove_async(e->reg, e->loop, sb->id, save_logged, NULL);
        sandbox_unlink(sb);
    } else {
        log_debug(COMP, "%s: destroy failed: %s", sb->id, strna(err->message));
        free(sb->error);
        sb->error = strdup(err->message ? err->message : "destroy failed");
        sandbox_set_state(sb, SANDBOX_FAILED);
    }
    sb->refs++;
    while (w) {
        struct sb_waiter *next = w->next;
        w->cb(err, w->userdata);
        free(w);
        w = next;
    }
    if (sb->create_op)
        create_finish(sb);
    sandbox_unref(sb);
}

/* After a 403 on stop/delete: a vmid that no longer exists is refused by the permission
 * check of a pool-scoped token (Proxmox checks /vms/N). Gone when it is not in our pool. */
static void on_pool_checked(const struct pve_result *res, void *userdata)
{
    struct sandbox *sb = userdata;
    struct engine_error err = {
        .kind = ENGINE_E_PROXMOX, .error = -EREMOTEIO, .http_status = 403, .message = sb->error};

    sb->call = NULL;
    if (res->error == 0 && res->vms && !pve_vm_list_find(res->vms, sb->vmid)) {
        destroy_finish(sb, NULL);
        return;
    }
    if (res->error < 0 && res->error != -EREMOTEIO)
        error_from_pve(res, sb->engine->closing, &err);
    destroy_finish(sb, &err);
}

static void on_deleted(const struct pve_result *res, void *userdata)
{
    struct sandbox *sb = userdata;
    struct engine *e = sb->engine;
    struct engine_error err;

    sb->call = NULL;
    if (res->error == 0 ||
        (res->error == -EREMOTEIO && res->perr && res->perr->kind == PVE_ERR_NOT_FOUND)) {
        test_crash_point("destroy-deleted");
        destroy_finish(sb, NULL);
        return;
    }
    if (res->error == -EREMOTEIO && res->perr && res->perr->kind == PVE_ERR_PERMISSION &&
        !e->closing) {
        free(sb->error);
        sb->error = strdup(res->perr->message);
        if (sb->error && pve_pool_members(e->pve, e->cfg->proxmox.pool, destroy_timeout(sb),
                                          on_pool_checked, sb, &sb->call) == 0)
            return;
    }
    error_from_pve(res, e->closing, &err);
    destroy_finish(sb, &err);
}

static void destroy_step_delete(struct sandbox *sb)
{
    struct engine *e = sb->engine;
    int r;

    r = pve_delete(e->pve, sb->node, sb->vmid,
                   PVE_DELETE_FORCE | PVE_DELETE_PURGE | PVE_DELETE_DESTROY_UNREFERENCED,
                   destroy_timeout(sb), on_deleted, sb, &sb->call);
    if (r < 0) {
        struct engine_error err = {
            .kind = ENGINE_E_INTERNAL, .error = r, .message = "cannot start the Proxmox delete"};
        destroy_finish(sb, &err);
    }
}

static void on_stopped(const struct pve_result *res, void *userdata)
{
    struct sandbox *sb = userdata;
    struct engine_error err;

    sb->call = NULL;
    if (sb->engine->closing) {
        error_from_pve(res, true, &err);
        destroy_finish(sb, &err);
        return;
    }
    if (res->error == -EREMOTEIO && res->perr && res->perr->kind == PVE_ERR_NOT_FOUND) {
        destroy_finish(sb, NULL);
        return;
    }
    /* Not running, or a stop that failed: the forced delete still stops it. */
    destroy_step_delete(sb);
}

static void destroy_step_stop(struct sandbox *sb)
{
    struct engine *e = sb->engine;
    int r;

    sandbox_set_state(sb, SANDBOX_DESTROYING);
    sandbox_close_ssh(sb);
    if (sb->vmid == 0) {
        destroy_finish(sb, NULL);
        return;
    }
    sb->destroy_deadline_ms = now_ms(e) + ENGINE_CLEANUP_TIMEOUT_MS;
    r = pve_stop(e->pve, sb->node, sb->vmid, destroy_timeout(sb), on_stopped, sb, &sb->call);
    if (r < 0)
        destroy_step_delete(sb);
    else
        test_crash_point("destroy-stop-sent");
}

/* ---- create ---- */

static void create_finish(struct sandbox *sb)
{
    struct sb_op *op = TAKE_PTR(sb->create_op);

    sb->refs++;
    if (op->failed) {
        struct engine_error err = op->err;
        err.state = sandbox_state_to_public(sb->state);
        op->cb(&err, sb, op->userdata);
    } else
        op->cb(NULL, sb, op->userdata);
    op_free(op);
    sandbox_unref(sb);
}

/* A create step failed: remember the error, then destroy what was made. */
static void create_fail(struct sandbox *sb, const struct engine_error *err)
{
    struct engine *e = sb->engine;

    log_debug(COMP, "%s: create failed in %s: %s", sb->id, sandbox_state_to_string(sb->state),
              strna(err->message));
    op_set_error(sb->create_op, err);
    free(sb->error);
    sb->error = strdup(err->message ? err->message : "create failed");
    if (e->closing) {
        /* Kept as it is: the registry resolves it at the next start. */
        create_finish(sb);
        return;
    }
    sandbox_set_state(sb, SANDBOX_FAILED);
    destroy_step_stop(sb);
}

static bool create_check_abort(struct sandbox *sb)
{
    if (sb->engine->closing) {
        struct engine_error err = {.kind = ENGINE_E_SHUTDOWN,
                                   .error = -ECANCELED,
                                   .message = "the daemon is shutting down"};
        create_fail(sb, &err);
        return true;
    }
    if (sb->destroy_requested) {
        struct engine_error err = {.kind = ENGINE_E_STATE,
                                   .error = -ECANCELED,
                                   .message = "the sandbox was destroyed while being created"};
        create_fail(sb, &err);
        return true;
    }
    return false;
}

static void probe_schedule(struct engine *e, uint64_t ms);

static void create_fail_pve(struct sandbox *sb, const struct pve_result *res)
{
    struct engine *e = sb->engine;
    struct engine_error err;

    /* A transport failure: let daemon.status find out now, not at the next probe. */
    if (res->error < 0 && res->error != -EREMOTEIO && res->error != -ECANCELED && !e->closing)
        probe_schedule(e, 0);
    error_from_pve(res, e->closing, &err);
    create_fail(sb, &err);
}

static void create_fail_errno(struct sandbox *sb, enum engine_err_kind kind, int r, const char *msg)
{
    struct engine_error err = {.kind = kind, .error = r, .message = msg};

    create_fail(sb, &err);
}

static void create_deadline(struct sandbox *sb, const char *what)
{
    char buf[256];

    snprintf(buf, sizeof buf, "create deadline (%us) passed while %s",
             sb->engine->cfg->sandbox.create_timeout_s, what);
    create_fail_errno(sb, ENGINE_E_DEADLINE, -ETIMEDOUT, buf);
}

static void on_ready_saved(int r, void *userdata)
{
    struct sandbox *sb = userdata;

    sb->refs--;
    if (sb->state == SANDBOX_GONE || !sb->create_op) { /* dropped by engine_close() */
        sandbox_maybe_free(sb);
        return;
    }
    if (create_check_abort(sb))
        return;
    if (r < 0) {
        create_fail_errno(sb, ENGINE_E_INTERNAL, r, "cannot write the registry record");
        return;
    }
    test_crash_point("create-ready-durable");
    create_finish(sb);
}

static void create_step_connect(struct sandbox *sb);

static void on_connect_retry(uv_timer_t *t)
{
    struct sandbox *sb = t->data;

    if (create_check_abort(sb))
        return;
    create_step_connect(sb);
}

static void on_connected(struct sshpool *pool, int error, void *userdata)
{
    struct sandbox *sb = userdata;

    if (create_check_abort(sb))
        return;
    if (error < 0) {
        char buf[512];
        const char *detail = sshpool_last_error(pool);

        if (error == -ETIMEDOUT && step_timeout(sb, UINT64_MAX) == 0) {
            create_deadline(sb, "connecting over SSH");
            return;
        }
        /* A fresh container's sshd may drop the first connections while it starts: retry
         * those (never a host key or auth refusal) while the create deadline allows. */
        if ((error == -EPROTO || error == -ECONNRESET) &&
            sb->connect_attempts < ENGINE_CONNECT_ATTEMPTS &&
            step_timeout(sb, UINT64_MAX) > ENGINE_CONNECT_RETRY_MS) {
            struct sshpool *p = TAKE_PTR(sb->pool);

            sb->connect_attempts++;
            sshpool_close(p, NULL, NULL);
            uv_timer_start(&sb->timer, on_connect_retry, ENGINE_CONNECT_RETRY_MS, 0);
            return;
        }
        snprintf(buf, sizeof buf, "SSH connect to %s failed: %s%s%s", sb->ip,
                 error == -EBADE ? "host key mismatch" : strerror(-error),
                 detail && *detail ? ": " : "", detail ? detail : "");
        create_fail_errno(sb, ENGINE_E_SSH, error, buf);
        return;
    }
    test_crash_point("create-before-ready");
    sandbox_set_state(sb, SANDBOX_READY);
    /* READY is durable before the caller hears of it: a restart re-attaches the sandbox. */
    sb->refs++;
    if (sandbox_save(sb, on_ready_saved, sb) < 0) {
        sb->refs--;
        create_finish(sb);
    }
}

static void create_step_connect(struct sandbox *sb)
{
    struct engine *e = sb->engine;
    struct sshs_config sc = {
        .host = sb->ip,
        .port = 22,
        .user = e->cfg->ssh.user,
        .key = e->key,
        .host_key_pins = e->pins,
        .connect_timeout_ms = e->cfg->ssh.connect_timeout_ms,
    };
    uint64_t t;
    int r;

    sandbox_set_state(sb, SANDBOX_CONNECTING);
    r = sshpool_new(e->loop, &sc, e->cfg->ssh.sessions_per_sandbox, &sb->pool);
    if (r < 0) {
        create_fail_errno(sb, ENGINE_E_SSH, r, "cannot set up the SSH pool");
        return;
    }
    t = step_timeout(sb, UINT64_MAX);
    if (t == 0) {
        create_deadline(sb, "connecting over SSH");
        return;
    }
    r = sshpool_connect(sb->pool, t, on_connected, sb);
    if (r < 0)
        create_fail_errno(sb, ENGINE_E_SSH, r, "cannot start the SSH connect");
    else
        test_crash_point("create-connecting");
}

/* With ipfilter=1 Proxmox passes only source addresses in the container's ipfilter-net0 set,
 * and a DHCP lease is in no set by itself: without this step the sandbox sends no IPv4 at
 * all (SSH replies included). The set may exist already (copied from the template's
 * firewall file), and a retried add may find the entry: both are fine. */
#define IPFILTER_SET "ipfilter-net0"

static void on_ipset_added(const struct pve_result *res, void *userdata)
{
    struct sandbox *sb = userdata;

    sb->call = NULL;
    if (create_check_abort(sb))
        return;
    if (res->error < 0 && !pve_error_exists(res)) {
        create_fail_pve(sb, res);
        return;
    }
    create_step_connect(sb);
}

static void on_ipset_created(const struct pve_result *res, void *userdata)
{
    struct sandbox *sb = userdata;
    uint64_t t;
    int r;

    sb->call = NULL;
    if (create_check_abort(sb))
        return;
    if (res->error < 0 && !pve_error_exists(res)) {
        create_fail_pve(sb, res);
        return;
    }
    t = step_timeout(sb, ENGINE_STEP_CONFIG_MS);
    if (t == 0) {
        create_deadline(sb, "adding the address to the firewall's ipfilter set");
        return;
    }
    r = pve_fw_ipset_add(sb->engine->pve, sb->node, sb->vmid, IPFILTER_SET, sb->ip, t,
                         on_ipset_added, sb, &sb->call);
    if (r < 0)
        create_fail_errno(sb, ENGINE_E_INTERNAL, r, "cannot add the address to the ipfilter set");
}

static void create_step_ipfilter(struct sandbox *sb)
{
    uint64_t t = step_timeout(sb, ENGINE_STEP_CONFIG_MS);
    int r;

    if (t == 0) {
        create_deadline(sb, "creating the firewall's ipfilter set");
        return;
    }
    r = pve_fw_ipset_create(sb->engine->pve, sb->node, sb->vmid, IPFILTER_SET, t, on_ipset_created,
                            sb, &sb->call);
    if (r < 0)
        create_fail_errno(sb, ENGINE_E_INTERNAL, r, "cannot create the ipfilter set");
}

static void ip_poll(struct sandbox *sb);

static void on_ip_timer(uv_timer_t *t)
{
    struct sandbox *sb = t->data;

    if (create_check_abort(sb))
        return;
    ip_poll(sb);
}

static void on_interfaces(const struct pve_result *res, void *userdata)
{
    struct sandbox *sb = userdata;
    uint64_t left;

    sb->call = NULL;
    if (create_check_abort(sb))
        return;
    if (res->error < 0 && res->error != -ETIMEDOUT) {
        create_fail_pve(sb, res);
        return;
    }
    if (res->error == 0 && res->ipv4) {
        sb->ip = strdup(res->ipv4);
        if (!sb->ip) {
            create_fail_errno(sb, ENGINE_E_INTERNAL, -ENOMEM, "out of memory");
            return;
        }
        create_step_ipfilter(sb);
        return;
    }
    left = step_timeout(sb, UINT64_MAX);
    if (left == 0 || now_ms(sb->engine) >= sb->destroy_deadline_ms) {
        create_deadline(sb, "waiting for the container's IPv4 address");
        return;
    }
    uv_timer_start(&sb->timer, on_ip_timer, MIN((uint64_t)sb->ip_poll_ms, left), 0);
    sb->ip_poll_ms = MIN(sb->ip_poll_ms * 2, ENGINE_IP_POLL_MAX_MS);
}

static void ip_poll(struct sandbox *sb)
{
    uint64_t t = step_timeout(sb, 10000);
    int r;

    if (t == 0) {
        create_deadline(sb, "waiting for the container's IPv4 address");
        return;
    }
    r = pve_interfaces(sb->engine->pve, sb->node, sb->vmid, t, on_interfaces, sb, &sb->call);
    if (r < 0)
        create_fail_errno(sb, ENGINE_E_INTERNAL, r, "cannot query the interfaces");
}

static void on_started(const struct pve_result *res, void *userdata)
{
    struct sandbox *sb = userdata;

    sb->call = NULL;
    if (create_check_abort(sb))
        return;
    if (res->error < 0) {
        create_fail_pve(sb, res);
        return;
    }
    sandbox_set_state(sb, SANDBOX_WAITING_IP);
    sb->ip_poll_ms = ENGINE_IP_POLL_MIN_MS;
    /* The IP step's own cap (destroy_deadline_ms is unused until a destroy). */
    sb->destroy_deadline_ms = now_ms(sb->engine) + ENGINE_STEP_IP_MS;
    ip_poll(sb);
}

static void create_step_start(struct sandbox *sb)
{
    uint64_t t = step_timeout(sb, ENGINE_STEP_START_MS);
    int r;

    sandbox_set_state(sb, SANDBOX_STARTING);
    if (t == 0) {
        create_deadline(sb, "starting");
        return;
    }
    r = pve_start(sb->engine->pve, sb->node, sb->vmid, t, on_started, sb, &sb->call);
    if (r < 0)
        create_fail_errno(sb, ENGINE_E_INTERNAL, r, "cannot start the container");
    else
        test_crash_point("create-starting");
}

static void on_fw_group(const struct pve_result *res, void *userdata)
{
    struct sandbox *sb = userdata;

    sb->call = NULL;
    if (create_check_abort(sb))
        return;
    if (res->error < 0) {
        create_fail_pve(sb, res);
        return;
    }
    create_step_start(sb);
}

static void on_fw_options(const struct pve_result *res, void *userdata)
{
    struct sandbox *sb = userdata;
    struct engine *e = sb->engine;
    uint64_t t;
    int r;

    sb->call = NULL;
    if (create_check_abort(sb))
        return;
    if (res->error < 0) {
        create_fail_pve(sb, res);
        return;
    }
    if (!sb->internet) {
        create_step_start(sb);
        return;
    }
    t = step_timeout(sb, ENGINE_STEP_CONFIG_MS);
    if (t == 0) {
        create_deadline(sb, "configuring the firewall");
        return;
    }
    r = pve_fw_group_set(e->pve, sb->node, sb->vmid, e->cfg->proxmox.internet_group, true, t,
                         on_fw_group, sb, &sb->call);
    if (r < 0)
        create_fail_errno(sb, ENGINE_E_INTERNAL, r, "cannot set the internet rule");
}

static void create_step_firewall(struct sandbox *sb)
{
    uint64_t t = step_timeout(sb, ENGINE_STEP_CONFIG_MS);
    _cleanup_json_ json_object *p = json_object_new_object();
    int r;

    if (t == 0) {
        create_deadline(sb, "configuring the firewall");
        return;
    }
    if (!p) {
        create_fail_errno(sb, ENGINE_E_INTERNAL, -ENOMEM, "out of memory");
        return;
    }
    json_object_object_add(p, "enable", json_object_new_int(1));
    json_object_object_add(p, "policy_in", json_object_new_string("DROP"));
    json_object_object_add(p, "policy_out", json_object_new_string("DROP"));
    json_object_object_add(p, "ipfilter", json_object_new_int(1));
    json_object_object_add(p, "macfilter", json_object_new_int(1));
    r = pve_fw_options_put(sb->engine->pve, sb->node, sb->vmid, p, t, on_fw_options, sb, &sb->call);
    if (r < 0)
        create_fail_errno(sb, ENGINE_E_INTERNAL, r, "cannot set the firewall options");
}

static void on_resized(const struct pve_result *res, void *userdata)
{
    struct sandbox *sb = userdata;

    sb->call = NULL;
    if (create_check_abort(sb))
        return;
    if (res->error < 0) {
        create_fail_pve(sb, res);
        return;
    }
    create_step_firewall(sb);
}

static void on_config_got(const struct pve_result *res, void *userdata)
{
    struct sandbox *sb = userdata;
    json_object *rootfs = NULL;
    uint64_t have, t;
    char size[32];
    int r;

    sb->call = NULL;
    if (create_check_abort(sb))
        return;
    if (res->error < 0) {
        create_fail_pve(sb, res);
        return;
    }
    if (res->data)
        json_object_object_get_ex(res->data, "rootfs", &rootfs);
    have = pve_rootfs_size_gb(rootfs ? json_object_get_string(rootfs) : NULL, 0);
    if (have == 0 || sb->disk_gb <= have) {
        if (have > sb->disk_gb)
            sb->disk_gb = (unsigned)have; /* cannot shrink: report what it has */
        create_step_firewall(sb);
        return;
    }
    t = step_timeout(sb, ENGINE_STEP_CONFIG_MS);
    if (t == 0) {
        create_deadline(sb, "resizing the disk");
        return;
    }
    snprintf(size, sizeof size, "%uG", sb->disk_gb);
    r = pve_resize(sb->engine->pve, sb->node, sb->vmid, "rootfs", size, t, on_resized, sb,
                   &sb->call);
    if (r < 0)
        create_fail_errno(sb, ENGINE_E_INTERNAL, r, "cannot resize the disk");
}

static void on_config_put(const struct pve_result *res, void *userdata)
{
    struct sandbox *sb = userdata;
    uint64_t t;
    int r;

    sb->call = NULL;
    if (create_check_abort(sb))
        return;
    if (res->error < 0) {
        create_fail_pve(sb, res);
        return;
    }
    t = step_timeout(sb, ENGINE_STEP_CONFIG_MS);
    if (t == 0) {
        create_deadline(sb, "configuring");
        return;
    }
    r = pve_config_get(sb->engine->pve, sb->node, sb->vmid, false, t, on_config_got, sb, &sb->call);
    if (r < 0)
        create_fail_errno(sb, ENGINE_E_INTERNAL, r, "cannot read the configuration");
}

static void on_cloned(const struct pve_result *res, void *userdata)
{
    struct sandbox *sb = userdata;
    _cleanup_json_ json_object *p = NULL;
    uint64_t t;
    int r;

    sb->call = NULL;
    if (res->vmid)
        sb->vmid = res->vmid;
    test_crash_point("create-cloned");
    if (create_check_abort(sb))
        return;
    if (res->error < 0) {
        create_fail_pve(sb, res);
        return;
    }
    sandbox_set_state(sb, SANDBOX_CONFIGURING);
    t = step_timeout(sb, ENGINE_STEP_CONFIG_MS);
    if (t == 0) {
        create_deadline(sb, "configuring");
        return;
    }
    p = json_object_new_object();
    if (!p) {
        create_fail_errno(sb, ENGINE_E_INTERNAL, -ENOMEM, "out of memory");
        return;
    }
    json_object_object_add(p, "cores", json_object_new_int((int)sb->cores));
    json_object_object_add(p, "memory", json_object_new_int((int)sb->memory_mb));
    r = pve_config_put(sb->engine->pve, sb->node, sb->vmid, p, t, on_config_put, sb, &sb->call);
    if (r < 0)
        create_fail_errno(sb, ENGINE_E_INTERNAL, r, "cannot configure the container");
}

static bool vmid_taken(uint32_t vmid, void *userdata)
{
    struct engine *e = userdata;

    for (struct sandbox *sb = e->sandboxes; sb; sb = sb->next)
        if (sb->vmid == vmid)
            return true;
    return false;
}

static void on_intent_saved(int r, void *userdata)
{
    struct sandbox *sb = userdata;
    struct engine *e = sb->engine;
    char line[MARKER_LINE_MAX];
    _cleanup_free_ char *desc = NULL;
    struct marker m = {
        .owner_uid = sb->owner_uid,
        .created = sb->created_at,
        .expires = sb->expires_at,
    };
    struct pve_clone_params cp;
    uint64_t t;

    sb->refs--;
    if (sb->state == SANDBOX_GONE) { /* dropped by engine_close() */
        sandbox_maybe_free(sb);
        return;
    }
    if (create_check_abort(sb))
        return;
    if (r < 0) {
        create_fail_errno(sb, ENGINE_E_INTERNAL, r, "cannot write the registry record");
        return;
    }
    test_crash_point("create-intent-durable");
    memcpy(m.key, sb->idem_hash, sizeof m.key);
    memcpy(m.params, sb->params_hash, sizeof m.params);
    snprintf(m.instance, sizeof m.instance, "%s", reg_instance_id(e->reg));
    snprintf(m.sandbox, sizeof m.sandbox, "%s", sb->id);
    r = marker_format(&m, line, sizeof line);
    if (r >= 0)
        r = marker_set(NULL, &m, &desc);
    if (r < 0) {
        create_fail_errno(sb, ENGINE_E_INTERNAL, r, "cannot build the ownership marker");
        return;
    }
    sandbox_set_state(sb, SANDBOX_CLONING);
    t = step_timeout(sb, ENGINE_STEP_CLONE_MS);
    if (t == 0) {
        create_deadline(sb, "cloning");
        return;
    }
    cp = (struct pve_clone_params){
        .node = sb->node,
        .template_vmid = e->cfg->proxmox.template_vmid,
        .hostname = sb->hostname,
        .description = desc,
        .pool = e->cfg->proxmox.pool,
        .full = e->cfg->proxmox.full_clone ? 1 : -1,
        .storage = e->cfg->proxmox.full_clone ? e->cfg->proxmox.storage : NULL,
        .vmid_taken = vmid_taken,
        .vmid_taken_userdata = e,
    };
    r = pve_clone(e->pve, &cp, t, on_cloned, sb, &sb->call);
    if (r < 0)
        create_fail_errno(sb, ENGINE_E_INTERNAL, r, "cannot start the clone");
    else
        test_crash_point("create-clone-sent");
}

static int labels_copy(json_object *in, json_object **ret)
{
    json_object *o = json_object_new_object();

    if (!o)
        return -ENOMEM;
    if (in) {
        if (!json_object_is_type(in, json_type_object) ||
            json_object_object_length(in) > (int)ENGINE_LABELS_MAX) {
            json_object_put(o);
            return -EINVAL;
        }
        json_object_object_foreach(in, k, v)
        {
            if (!json_object_is_type(v, json_type_string)) {
                json_object_put(o);
                return -EINVAL;
            }
            json_object_object_add(o, k, json_object_new_string(json_object_get_string(v)));
        }
    }
    *ret = o;
    return 0;
}

int engine_create(struct engine *e, const struct sandbox_create_opts *opts, engine_sandbox_cb cb,
                  void *userdata, struct engine_error *ret_err)
{
    const struct config_sandbox *cs = &e->cfg->sandbox;
    unsigned n_uid = 0, n_all = 0;
    struct sandbox *sb;
    struct sb_op *op;
    int64_t ttl;
    int r;

#define FAIL(k, r_, msg_, param_)                                                                  \
    do {                                                                                           \
        *ret_err = (struct engine_error){                                                          \
            .kind = (k), .error = (r_), .message = (msg_), .param = (param_)};                     \
        return (r_);                                                                               \
    } while (0)

    if (e->closing)
        FAIL(ENGINE_E_SHUTDOWN, -ESHUTDOWN, "the daemon is shutting down", NULL);
    if (!e->configured)
        FAIL(ENGINE_E_NOT_CONFIGURED, -ENXIO, "Proxmox is not configured ([proxmox] section)",
             NULL);
    ttl = opts->ttl_s < 0 ? (int64_t)cs->default_ttl_s : opts->ttl_s;
    if (ttl < 1 || ttl > (int64_t)cs->max_ttl_s)
        FAIL(ENGINE_E_INVALID, -EINVAL, "ttl_s exceeds the configured max_ttl_s", "ttl_s");
    for (sb = e->sandboxes; sb; sb = sb->next) {
        n_all++;
        if (sb->owner_uid == opts->owner_uid)
            n_uid++;
    }
    if (n_uid >= cs->max_per_uid)
        FAIL(ENGINE_E_QUOTA, -EDQUOT, "too many sandboxes for this uid (max_per_uid)", NULL);
    if (n_all >= cs->max_total)
        FAIL(ENGINE_E_QUOTA, -EDQUOT, "too many sandboxes (max_total)", NULL);

    sb = calloc(1, sizeof *sb);
    op = calloc(1, sizeof *op);
    if (!sb || !op) {
        free(sb);
        free(op);
        FAIL(ENGINE_E_INTERNAL, -ENOMEM, "out of memory", NULL);
    }
    r = id_random(sb->id, sizeof sb->id, "sb-");
    if (r >= 0)
        r = labels_copy(opts->labels, &sb->labels);
    if (r < 0) {
        free(sb);
        free(op);
        FAIL(r == -EINVAL ? ENGINE_E_INVALID : ENGINE_E_INTERNAL, r, "bad labels", "labels");
    }
    sb->engine = e;
    sb->owner_uid = opts->owner_uid;
    sb->node = strdup(e->cfg->proxmox.nodes[0]);
    sb->hostname = strdup(opts->hostname ? opts->hostname : sb->id);
    sb->cores = opts->cores > 0 ? (unsigned)opts->cores : cs->default_cores;
    sb->memory_mb = opts->memory_mb > 0 ? (unsigned)opts->memory_mb : cs->default_memory_mb;
    sb->disk_gb = opts->disk_gb > 0 ? (unsigned)opts->disk_gb : cs->default_disk_gb;
    sb->internet = opts->internet;
    if (opts->idempotency_key) {
        sb->idempotency_key = strdup(opts->idempotency_key);
        if (!sb->idempotency_key ||
            marker_key_hash(opts->owner_uid, opts->idempotency_key, sb->idem_hash) < 0) {
            free(sb->node); /* reported as out of memory below */
            sb->node = NULL;
        }
    }
    if (opts->params_hash && hex_is_valid(opts->params_hash, SHA256_HEX_SIZE - 1))
        memcpy(sb->params_hash, opts->params_hash, SHA256_HEX_SIZE);
    sb->created_at = now_realtime();
    sb->expires_at = sb->created_at + ttl;
    sb->started_ms = now_ms(e);
    sb->deadline_ms = sb->started_ms + (uint64_t)cs->create_timeout_s * 1000;
    sb->state = SANDBOX_PENDING;
    op->cb = cb;
    op->userdata = userdata;
    uv_timer_init(e->loop, &sb->timer);
    sb->timer.data = sb;
    if (!sb->node || !sb->hostname) {
        sb->state = SANDBOX_GONE;
        free(op);
        sandbox_maybe_free(sb);
        FAIL(ENGINE_E_INTERNAL, -ENOMEM, "out of memory", NULL);
    }
    /* The intent is durable before anything exists in Proxmox. */
    test_crash_point("create-before-intent");
    r = sandbox_save(sb, on_intent_saved, sb);
    if (r < 0) {
        sb->state = SANDBOX_GONE;
        free(op);
        sandbox_maybe_free(sb);
        FAIL(ENGINE_E_INTERNAL, r, "cannot write the registry record", NULL);
    }
    sb->refs++; /* until on_intent_saved */
    sb->create_op = op;
    sb->next = e->sandboxes;
    if (e->sandboxes)
        e->sandboxes->prev = sb;
    e->sandboxes = sb;
    e->n_sandboxes++;
    log_debug(COMP, "%s: create for uid %u", sb->id, (unsigned)sb->owner_uid);
    return 0;
#undef FAIL
}

/* ---- destroy (public) ---- */

int engine_destroy(struct engine *e, struct sandbox *sb, engine_done_cb cb, void *userdata)
{
    struct sb_waiter *w;

    if (e->closing)
        return -ESHUTDOWN;
    w = calloc(1, sizeof *w);
    if (!w)
        return -ENOMEM;
    w->cb = cb;
    w->userdata = userdata;
    w->next = sb->destroy_waiters;
    sb->destroy_waiters = w;
    if (sb->state == SANDBOX_DESTROYING)
        return 0; /* joins the running destroy */
    if (sb->create_op) {
        /* A create is running: it notices at its next step and cleans up. */
        sb->destroy_requested = true;
        if (sb->state == SANDBOX_CONNECTING && sb->pool) {
            sandbox_close_ssh(sb); /* the connect callback sees the request */
            return 0;
        }
        if ((sb->state == SANDBOX_WAITING_IP || sb->state == SANDBOX_CONNECTING) && !sb->call &&
            uv_is_active((uv_handle_t *)&sb->timer)) {
            uv_timer_stop(&sb->timer);
            (void)create_check_abort(sb);
        }
        return 0;
    }
    if (sb->fw_busy) {
        /* Let the firewall call finish first: it holds a ref; checked in on_fw_set. */
        sb->destroy_requested = true;
        return 0;
    }
    destroy_step_stop(sb);
    return 0;
}

/* ---- internet ---- */

/* Internet changes of one sandbox run one at a time, in the order they were asked for:
 * a change asked for while another runs waits in sb->fw_waiting (at most
 * ENGINE_FW_QUEUE_MAX) and starts when the one before it completes, so pipelined calls
 * all succeed and the last one asked for is the state left in place. */

static int fw_start(struct sandbox *sb, struct fw_op *op);

/* Completes every queued change with err (the sandbox is going away or the daemon stops). */
static void fw_fail_waiting(struct sandbox *sb, const struct engine_error *err)
{
    struct fw_op *op;

    while ((op = sb->fw_waiting)) {
        sb->fw_waiting = op->next;
        sb->n_fw_waiting--;
        op->cb(err, sb, op->userdata);
        free(op);
    }
}

/* Starts the oldest queued change, if any; one that cannot start completes with its error. */
static void fw_start_next(struct sandbox *sb)
{
    struct fw_op *op;

    while (!sb->fw_busy && (op = sb->fw_waiting)) {
        int r;

        sb->fw_waiting = op->next;
        sb->n_fw_waiting--;
        op->next = NULL;
        r = fw_start(sb, op);
        if (r < 0) {
            struct engine_error err = {
                .kind = ENGINE_E_INTERNAL, .error = r, .message = "cannot change the firewall rule"};

            op->cb(&err, sb, op->userdata);
            free(op);
        }
    }
}

static void on_fw_set(const struct pve_result *res, void *userdata)
{
    struct fw_op *op = userdata;
    struct sandbox *sb = op->sb;
    struct engine *e = sb->engine;
    struct engine_error err;

    sb->call = NULL;
    sb->fw_busy = false;
    if (res->error == 0) {
        sb->internet = op->enabled;
        if (!e->closing)
            (void)sandbox_save(sb, save_logged, NULL);
        op->cb(NULL, sb, op->userdata);
    } else {
        error_from_pve(res, e->closing, &err);
        op->cb(&err, sb, op->userdata);
    }
    free(op);
    if (e->closing) {
        err = (struct engine_error){.kind = ENGINE_E_SHUTDOWN,
                                    .error = -ESHUTDOWN,
                                    .message = "the daemon is shutting down"};
        fw_fail_waiting(sb, &err);
    } else if (sb->destroy_requested && sb->state == SANDBOX_READY) {
        err = (struct engine_error){.kind = ENGINE_E_STATE,
                                    .error = -EAGAIN,
                                    .message = "the sandbox is being destroyed",
                                    .state = sandbox_state_to_public(SANDBOX_DESTROYING)};
        fw_fail_waiting(sb, &err);
        sb->destroy_requested = false;
        destroy_step_stop(sb);
    } else {
        fw_start_next(sb);
    }
    sandbox_unref(sb);
}

static int fw_start(struct sandbox *sb, struct fw_op *op)
{
    struct engine *e = sb->engine;
    int r;

    r = pve_fw_group_set(e->pve, sb->node, sb->vmid, e->cfg->proxmox.internet_group, op->enabled,
                         ENGINE_STEP_CONFIG_MS, on_fw_set, op, &sb->call);
    if (r < 0)
        return r;
    sb->fw_busy = true;
    sb->refs++;
    return 0;
}

int engine_set_internet(struct engine *e, struct sandbox *sb, bool enabled, engine_sandbox_cb cb,
                        void *userdata, struct engine_error *ret_err)
{
    struct fw_op *op;
    int r;

    if (sb->state != SANDBOX_READY || sb->destroy_requested) {
        *ret_err = (struct engine_error){.kind = ENGINE_E_STATE,
                                         .error = -EAGAIN,
                                         .message = "the sandbox is not ready",
                                         .state = sandbox_state_to_public(
                                             sb->destroy_requested ? SANDBOX_DESTROYING : sb->state)};
        return -EAGAIN;
    }
    if (sb->fw_busy && sb->n_fw_waiting >= ENGINE_FW_QUEUE_MAX) {
        *ret_err = (struct engine_error){.kind = ENGINE_E_BUSY,
                                         .error = -EBUSY,
                                         .message = "too many internet changes are waiting"};
        return -EBUSY;
    }
    op = calloc(1, sizeof *op);
    if (!op) {
        *ret_err = (struct engine_error){
            .kind = ENGINE_E_INTERNAL, .error = -ENOMEM, .message = "out of memory"};
        return -ENOMEM;
    }
    op->sb = sb;
    op->enabled = enabled;
    op->cb = cb;
    op->userdata = userdata;
    if (sb->fw_busy) {
        struct fw_op **tail = &sb->fw_waiting;

        while (*tail)
            tail = &(*tail)->next;
        *tail = op;
        sb->n_fw_waiting++;
        return 0;
    }
    r = fw_start(sb, op);
    if (r < 0) {
        free(op);
        *ret_err = (struct engine_error){
            .kind = ENGINE_E_INTERNAL, .error = r, .message = "cannot change the firewall rule"};
        return r;
    }
    return 0;
}

/* ---- exec and files ---- */

static int sandbox_pool_lazy(struct sandbox *sb);

int sandbox_exec_start(struct sandbox *sb, const struct sshexec_params *params, sshexec_done_cb cb,
                       void *userdata, struct sshexec **ret)
{
    if (sb->state == SANDBOX_READY && !sb->pool && !sb->create_op && !sb->engine->closing &&
        sandbox_pool_lazy(sb) < 0)
        return -EAGAIN;
    if (sb->state != SANDBOX_READY || !sb->pool || sb->engine->closing)
        return -EAGAIN;
    return sshexec_start(sb->pool, params, cb, userdata, ret);
}

static int sandbox_sshfile(struct sandbox *sb, struct sshfile **ret)
{
    struct engine *e = sb->engine;
    int r;

    if (!sb->file) {
        struct sshs_config sc = {
            .host = sb->ip,
            .port = 22,
            .user = e->cfg->ssh.user,
            .key = e->key,
            .host_key_pins = e->pins,
            .connect_timeout_ms = e->cfg->ssh.connect_timeout_ms,
        };
        r = sshfile_new(e->loop, &sc, e->cfg->ssh.file_timeout_ms, &sb->file);
        if (r < 0)
            return r;
    }
    *ret = sb->file;
    return 0;
}

int sandbox_file_write(struct sandbox *sb, const struct sshfile_write_params *p,
                       sshfile_write_cb cb, void *userdata)
{
    struct sshfile *f;
    int r;

    if (sb->state != SANDBOX_READY || sb->engine->closing)
        return -EAGAIN;
    r = sandbox_sshfile(sb, &f);
    if (r < 0)
        return r;
    return sshfile_write(f, p, cb, userdata);
}

int sandbox_file_read(struct sandbox *sb, const char *path, uint64_t offset, uint64_t length,
                      sshfile_read_cb cb, void *userdata)
{
    struct sshfile *f;
    int r;

    if (sb->state != SANDBOX_READY || sb->engine->closing)
        return -EAGAIN;
    r = sandbox_sshfile(sb, &f);
    if (r < 0)
        return r;
    return sshfile_read(f, path, offset, length, cb, userdata);
}

/* ---- probe and firewall check ---- */

static void probe_schedule(struct engine *e, uint64_t ms);

static void on_fw_checked(const struct pve_result *res, void *userdata)
{
    struct engine *e = userdata;
    json_object *en = NULL;

    e->fw_call = NULL;
    if (res->error < 0)
        return; /* retried with the next probe */
    e->fw_checked = true;
    if (res->data)
        json_object_object_get_ex(res->data, "enable", &en);
    if (!en || json_object_get_int(en) != 1)
        notice(e, LOG_WARNING,
               "the Proxmox datacenter firewall is DISABLED (/cluster/firewall/options "
               "enable != 1): sandbox isolation and the internet toggle are NOT enforced");
    else
        log_debug(COMP, "datacenter firewall enabled");
}

static void on_probe(const struct pve_result *res, void *userdata)
{
    struct engine *e = userdata;
    int was = e->reachable;

    e->probe_call = NULL;
    if (e->closing)
        return;
    free(e->last_error);
    e->last_error = NULL;
    if (res->error == 0) {
        e->reachable = 1;
        if (was == 0)
            notice(e, LOG_NOTICE, "Proxmox is reachable again");
        if (!e->fw_checked && !e->fw_call)
            (void)pve_cluster_fw_options_get(e->pve, 0, on_fw_checked, e, &e->fw_call);
    } else {
        struct engine_error err;
        char buf[512];

        error_from_pve(res, false, &err);
        if (err.http_status)
            snprintf(buf, sizeof buf, "HTTP %d: %s", err.http_status, err.message);
        else
            snprintf(buf, sizeof buf, "%s", err.message);
        e->last_error = strdup(buf);
        e->reachable = 0;
        if (was != 0)
            notice(e, LOG_WARNING, "Proxmox is not reachable: %s", buf);
    }
    probe_schedule(e, e->reachable ? ENGINE_PROBE_INTERVAL_MS : ENGINE_PROBE_RETRY_MS);
}

static void on_probe_timer(uv_timer_t *t)
{
    struct engine *e = t->data;

    if (e->closing || e->probe_call)
        return;
    if (pve_version(e->pve, ENGINE_PROBE_TIMEOUT_MS, on_probe, e, &e->probe_call) < 0)
        probe_schedule(e, ENGINE_PROBE_INTERVAL_MS);
}

static void probe_schedule(struct engine *e, uint64_t ms)
{
    if (e->probe_open && !e->closing)
        uv_timer_start(&e->probe, on_probe_timer, ms, 0);
}

/* ---- engine ---- */

static int set_error(char **ret_error, int r, const char *fmt, ...) _printf_(3, 4);
static int set_error(char **ret_error, int r, const char *fmt, ...)
{
    va_list ap;

    if (ret_error) {
        va_start(ap, fmt);
        if (vasprintf(ret_error, fmt, ap) < 0)
            *ret_error = NULL;
        va_end(ap);
    }
    return r;
}

int engine_new(uv_loop_t *loop, const struct config *cfg, const struct engine_hooks *hooks,
               struct engine **ret, char **ret_error)
{
    struct engine *e;
    int r;

    e = calloc(1, sizeof *e);
    if (!e)
        return -ENOMEM;
    e->loop = loop;
    e->cfg = cfg;
    e->reachable = -1;
    if (hooks)
        e->hooks = *hooks;

    if (cfg->proxmox.present) {
        struct pve_config pc = {
            .base_url = cfg->proxmox.url,
            .token_id = cfg->proxmox.token_id,
            .token_secret = cfg->proxmox.token_secret,
            .tls = {.ca_file = cfg->proxmox.ca_file,
                    .fingerprint = cfg->proxmox.fingerprint,
                    .verify = cfg->proxmox.tls_verify},
            .vmid_min = cfg->proxmox.vmid_min,
            .vmid_max = cfg->proxmox.vmid_max,
        };
        size_t len = 1;

        if (!cfg->ssh.key || cfg->ssh.n_template_host_keys == 0) {
            engine_free_now(e);
            return set_error(ret_error, -EINVAL,
                             "[ssh] key and template_host_key are required with [proxmox]");
        }
        r = sshs_key_load_memory(cfg->ssh.key, strlen(cfg->ssh.key), &e->key);
        if (r < 0) {
            engine_free_now(e);
            return set_error(ret_error, r, "[ssh] the private key cannot be loaded: %s",
                             strerror(-r));
        }
        for (size_t i = 0; i < cfg->ssh.n_template_host_keys; i++)
            len += strlen(cfg->ssh.template_host_keys[i]) + 1;
        e->pins = calloc(1, len);
        if (!e->pins) {
            sshs_key_free(e->key);
            engine_free_now(e);
            return -ENOMEM;
        }
        for (size_t i = 0; i < cfg->ssh.n_template_host_keys; i++) {
            if (i)
                strcat(e->pins, ",");
            strcat(e->pins, cfg->ssh.template_host_keys[i]);
        }
        r = sshs_pins_validate(e->pins);
        if (r < 0) {
            sshs_key_free(e->key);
            engine_free_now(e);
            return set_error(ret_error, r, "[ssh] template_host_key: not SHA256 fingerprints");
        }
        r = reg_open(cfg->server.state_dir, &e->reg);
        if (r < 0) {
            sshs_key_free(e->key);
            engine_free_now(e);
            return set_error(ret_error, r, "[server] state_dir '%s': %s", cfg->server.state_dir,
                             strerror(-r));
        }
        r = pve_client_new(loop, &pc, &e->pve);
        if (r < 0) {
            reg_free(e->reg);
            sshs_key_free(e->key);
            engine_free_now(e);
            return set_error(ret_error, r, "[proxmox] client: %s", strerror(-r));
        }
        e->configured = true;
        uv_timer_init(loop, &e->probe);
        e->probe.data = e;
        e->probe_open = true;
        probe_schedule(e, 0);
    }
    *ret = e;
    return 0;
}

static void probe_closed(uv_handle_t *h)
{
    engine_release(h->data);
}

void engine_close(struct engine *e, void (*cb)(void *userdata), void *userdata)
{
    struct sandbox *sb, *next;

    if (!e)
        return;
    e->closing = true;
    e->close_cb = cb;
    e->close_userdata = userdata;
    e->close_pending = 1; /* released at the end of this function */
    for (sb = e->sandboxes; sb; sb = sb->next) {
        uv_timer_stop(&sb->timer);
        sandbox_close_ssh(sb); /* fails execs and a running connect */
    }
    /* Completes every call in flight with -ECANCELED (creates and destroys end there). */
    pve_client_close(e->pve, NULL, NULL);
    e->pve = NULL;
    if (e->fw_call || e->probe_call)
        e->fw_call = e->probe_call = NULL;
    /* Whatever is left in the table is dropped from memory (it stays in Proxmox and in the
     * registry). */
    for (sb = e->sandboxes; sb; sb = next) {
        struct sb_waiter *w = TAKE_PTR(sb->destroy_waiters);
        struct engine_error err = {.kind = ENGINE_E_SHUTDOWN,
                                   .error = -ECANCELED,
                                   .message = "the daemon is shutting down"};

        next = sb->next;
        sb->refs++;
        if (sb->create_op) {
            op_set_error(sb->create_op, &err);
            create_finish(sb);
        }
        while (w) {
            struct sb_waiter *wn = w->next;
            w->cb(&err, w->userdata);
            free(w);
            w = wn;
        }
        sb->refs--;
        sb->call = NULL;
        sb->state = SANDBOX_GONE;
        sandbox_unlink(sb);
        sb->close_counted = true;
        e->close_pending++;
        sandbox_maybe_free(sb);
    }
    reg_free(e->reg);
    e->reg = NULL;
    sshs_key_free(e->key);
    e->key = NULL;
    if (e->probe_open) {
        e->probe_open = false;
        e->close_pending++;
        uv_close((uv_handle_t *)&e->probe, probe_closed);
    }
    engine_release(e);
}

/* ---- for lib/reconcile.c ---- */

uv_loop_t *engine_loop(const struct engine *e)
{
    return e->loop;
}

struct pve_client *engine_pve(const struct engine *e)
{
    return e->pve;
}

struct registry *engine_registry(const struct engine *e)
{
    return e->reg;
}

bool engine_closing(const struct engine *e)
{
    return e->closing;
}

void engine_emit_notice(struct engine *e, int level, const char *msg)
{
    notice(e, level, "%s", msg);
}

bool sandbox_busy(const struct sandbox *sb)
{
    return sb->create_op || sb->call || sb->fw_busy || sb->state == SANDBOX_DESTROYING ||
           sb->destroy_requested;
}

int engine_save(struct sandbox *sb, void (*cb)(int r, void *userdata), void *userdata)
{
    if (sb->engine->closing)
        return -ESHUTDOWN;
    return sandbox_save(sb, cb ? cb : save_logged, userdata);
}

/* A re-attached sandbox's SSH pool, created on first use (it connects lazily). */
static int sandbox_pool_lazy(struct sandbox *sb)
{
    struct engine *e = sb->engine;
    struct sshs_config sc = {
        .host = sb->ip,
        .port = 22,
        .user = e->cfg->ssh.user,
        .key = e->key,
        .host_key_pins = e->pins,
        .connect_timeout_ms = e->cfg->ssh.connect_timeout_ms,
    };

    if (!sb->ip)
        return -EHOSTUNREACH;
    return sshpool_new(e->loop, &sc, e->cfg->ssh.sessions_per_sandbox, &sb->pool);
}

int engine_adopt(struct engine *e, const struct reg_record *r, struct sandbox **ret)
{
    struct sandbox *sb;
    int k;

    if (e->closing || !e->configured)
        return -ESHUTDOWN;
    if (!r->id || !id_is_valid(r->id) || r->vmid <= 0 || !r->node || !r->ip)
        return -EINVAL;
    for (sb = e->sandboxes; sb; sb = sb->next)
        if (strcmp(sb->id, r->id) == 0)
            return -EEXIST;
    sb = calloc(1, sizeof *sb);
    if (!sb)
        return -ENOMEM;
    snprintf(sb->id, sizeof sb->id, "%s", r->id);
    sb->engine = e;
    sb->owner_uid = r->owner_uid;
    sb->vmid = (uint32_t)r->vmid;
    sb->node = strdup(r->node);
    sb->hostname = strdup(r->hostname ? r->hostname : r->id);
    sb->ip = strdup(r->ip);
    sb->internet = r->internet;
    sb->cores = r->cores;
    sb->memory_mb = (unsigned)r->memory_mb;
    sb->disk_gb = (unsigned)r->disk_gb;
    sb->created_at = r->created_at;
    sb->expires_at = r->expires_at;
    sb->state = SANDBOX_READY;
    sb->started_ms = now_ms(e);
    k = labels_copy(r->labels, &sb->labels);
    if (r->idempotency_key) {
        sb->idempotency_key = strdup(r->idempotency_key);
        if (!sb->idempotency_key ||
            marker_key_hash(r->owner_uid, r->idempotency_key, sb->idem_hash) < 0)
            k = -ENOMEM;
    }
    if (r->params_hash && hex_is_valid(r->params_hash, SHA256_HEX_SIZE - 1))
        memcpy(sb->params_hash, r->params_hash, SHA256_HEX_SIZE);
    uv_timer_init(e->loop, &sb->timer);
    sb->timer.data = sb;
    if (k < 0 || !sb->node || !sb->hostname || !sb->ip) {
        sb->state = SANDBOX_GONE;
        sandbox_maybe_free(sb);
        return k < 0 ? k : -ENOMEM;
    }
    sb->next = e->sandboxes;
    if (e->sandboxes)
        e->sandboxes->prev = sb;
    e->sandboxes = sb;
    e->n_sandboxes++;
    log_debug(COMP, "%s: re-attached (vmid %u, %s)", sb->id, sb->vmid, sb->ip);
    if (ret)
        *ret = sb;
    return 0;
}
