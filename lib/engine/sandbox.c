/* The sandbox engine: the engine object and its close, the table of sandboxes, the one
 * state setter, registry records, lookups and the errors every step reports. The create
 * and destroy pipelines, the probe, re-attach, and exec/files/internet are in
 * sandbox-create.c, sandbox-destroy.c, sandbox-probe.c, sandbox-adopt.c and sandbox-io.c.
 * The create, destroy, re-attach and exec/files call this file, never the reverse: it calls only
 * sandbox-base.c, sandbox-obs.c, sandbox-template.c and the probe, and reaches the create and the
 * pool through the hooks they install (struct sb_op, struct engine). See sandbox.h. */
#include "macro.h"

#include "sandbox.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "list.h"
#include "log.h"
#include "filepool.h"
#include "pve.h"
#include "registry.h"
#include "sandbox-internal.h"

#define COMP "sandbox"

/* ---- registry ---- */

static int registry_state_of(enum sandbox_state s)
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
    case SANDBOX_PAUSED:
        return REG_PAUSED;
    default:
        return REG_FAILED;
    }
}

int sandbox_save(struct sandbox *sb, registry_done_fn cb, void *userdata)
{
    struct engine *e = sb->engine;
    char errbuf[REG_ERROR_MAX];
    struct registry_record r = {
        .id = sb->id,
        .instance = (char *)registry_instance_id(e->reg),
        .owner_uid = sb->owner_uid,
        .vmid = (int)sb->vmid,
        .node = sb->node,
        .state = registry_state_of(sb->state),
        .hostname = sb->hostname,
        .ip = sb->ip,
        .cores = sb->cores,
        .memory_mb = sb->memory_mb,
        .disk_gb = sb->disk_gb,
        .net_rate_mbps = sb->net_rate_mbps,
        .internet = sb->internet,
        .internet_allow = sb->internet_allow,
        .internet_pending = sb->fw_busy,
        .labels = sb->labels,
        .created_at = sb->created_at,
        .expires_at = sb->expires_at,
        .idempotency_key = sb->idempotency_key,
        .params_hash = sb->params_hash[0] ? (char *)sb->params_hash : NULL,
        .host_key = sb->host_key[0] ? (char *)sb->host_key : NULL,
        .upid = sb->upid,
        .template = sb->template[0] ? (char *)sb->template : NULL,
        .fork_snapshot = sb->fork_pending[0] ? (char *)sb->fork_pending : NULL,
        .pool = sb->pool_member,
        .env = sb->env,
        .resume_on_use = sb->resume_on_use,
        .auto_pause_s = sb->auto_pause_s,
        .volumes = sb->n_vol_mounts > 0 || sb->had_volumes,
        .detaching = sb->detaching[0] ? (char *)sb->detaching : NULL,
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
    return registry_save_async(e->reg, e->loop, &r, cb, userdata);
}

void save_logged(int r, void *userdata)
{
    if (r < 0)
        log_debug_errno(r, COMP, "registry save failed: %m");
}

void sandbox_set_state(struct sandbox *sb, enum sandbox_state s)
{
    (void)sandbox_set_state_saved(sb, s, save_logged, NULL);
}

int sandbox_set_state_saved(struct sandbox *sb, enum sandbox_state s, void (*cb)(int r, void *ud),
                            void *userdata)
{
    enum sandbox_state old = sb->state;

    if (old == s)
        return -EALREADY;
    log_debug(COMP, "%s: %s -> %s (+%" PRIu64 " ms)", sb->id, sandbox_state_to_string(sb->state),
              sandbox_state_to_string(s), now_ms(sb->engine) - sb->started_ms);
    sb->state = s;
    if (s >= SANDBOX_DESTROYING && sb->engine->pumps_stop)
        sb->engine->pumps_stop(sb->engine, sb); /* the sandbox goes away: its pumps end */
    if (s >= SANDBOX_DESTROYING && sb->engine->relays_stop)
        sb->engine->relays_stop(sb->engine, sb); /* and its forwards and previews */
    if (s >= SANDBOX_DESTROYING && sb->engine->eproxy_stop)
        sb->engine->eproxy_stop(sb->engine, sb); /* and its proxied connections */
    sandbox_observe(sb, old);
    if (s == SANDBOX_GONE || s == SANDBOX_PENDING || sb->engine->closing)
        return -ESHUTDOWN;
    return sandbox_save(sb, cb, userdata);
}

/* ---- table ---- */

static void engine_free_now(struct engine *e)
{
    free(e->tombs);
    free(e->held);
    free(e->repl);
    engine_templates_check_free(e);
    engine_templates_free(e);
    free(e->last_error);
    free(e);
}

/* Drops one of engine_close()'s pending handles; the last one frees the engine. */
static void engine_release(struct engine *e)
{
    if (--e->close_pending == 0) {
        struct close_notify closed = e->closed;

        engine_free_now(e);
        close_notify_run(closed);
    }
}

void engine_handle_closed(struct engine *e)
{
    engine_release(e);
}

static void sandbox_free_cb(uv_handle_t *h)
{
    struct sandbox *sb = h->data;
    struct engine *e = sb->engine;

    FREE_MANY(sb->node, sb->hostname, sb->ip, sb->net0, sb->error, sb->idempotency_key, sb->upid);
    free(sb->vol_mounts);
    if (sb->labels)
        json_object_put(sb->labels);
    json_object_put(sb->env);
    json_object_put(sb->internet_allow);
    egress_run_free(sb->egress_run);
    bool counted = sb->close_counted;
    free(sb);
    if (counted)
        engine_release(e);
}

void sandbox_link(struct sandbox *sb)
{
    struct engine *e = sb->engine;

    LIST_PREPEND(e->sandboxes, sb);
    e->n_sandboxes++;
}

void sandbox_unlink(struct sandbox *sb)
{
    struct engine *e = sb->engine;

    LIST_REMOVE(e->sandboxes, sb);
    e->n_sandboxes--;
}

/* Frees a GONE sandbox once nothing holds it. */
void sandbox_maybe_free(struct sandbox *sb)
{
    if (sb->state != SANDBOX_GONE || sb->refs > 0 || sb->create_op || sb->call)
        return;
    uv_close((uv_handle_t *)&sb->timer, sandbox_free_cb);
}

void sandbox_unref(struct sandbox *sb)
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
        if (strcmp(sb->id, id) == 0) /* pool members are nobody's until taken */
            return !sb->pool_member && (admin || sb->owner_uid == uid) ? sb : NULL;
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

void tomb_add(struct engine *e, const struct sandbox *sb)
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
    t->vmid = sb->vmid;
    t->gone_ms = now_ms(e);
}

bool tomb_vmid_recent(struct engine *e, uint32_t vmid)
{
    uint64_t hold = 2000u * (uint64_t)e->cfg->proxmox.firewall_period_s, now = now_ms(e);

    for (size_t i = 0; i < e->n_tombs; i++)
        if (e->tombs[i].vmid == vmid && now - e->tombs[i].gone_ms < hold)
            return true;
    return false;
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

void op_set_error(struct sb_op *op, const struct engine_error *err)
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
    /* An INVALID failure's param and cap are string literals (a disk below the template's). */
    if (err->kind != ENGINE_E_INVALID)
        op->err.param = op->err.cap = NULL;
}

void op_free(struct sb_op *op)
{
    if (!op)
        return;
    free(op->msg);
    free(op->upid);
    free(op);
}

int env_copy(json_object *in, json_object **ret)
{
    json_object *o = NULL;

    if (!registry_env_ok(in))
        return -EINVAL;
    if (in && json_object_object_length(in) > 0 && json_object_deep_copy(in, &o, NULL) < 0)
        return -ENOMEM;
    *ret = o;
    return 0;
}

int labels_copy(json_object *in, json_object **ret)
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

/* ---- SSH ---- */

void sandbox_ssh_config(const struct sandbox *sb, struct sshs_config *ret)
{
    const struct engine *e = sb->engine;

    *ret = (struct sshs_config){
        .host = sb->ip,
        .port = 22,
        .user = e->cfg->ssh.user,
        .key = e->key,
        .host_key_pins = sb->host_key[0]   ? sb->host_key
                         : sb->fork_pin[0] ? sb->fork_pin
                                           : sandbox_template(sb)->pins,
        .connect_timeout_ms = e->cfg->ssh.connect_timeout_ms,
        .exec_supervisor = e->cfg->ssh.exec_supervisor,
        .observe = sandbox_observe_ssh,
        .observe_data = (void *)sb,
    };
}

void sandbox_close_ssh(struct sandbox *sb)
{
    struct sshpool *pool = TAKE_PTR(sb->pool);
    struct sshfile *file = TAKE_PTR(sb->file);

    if (pool)
        sshpool_close(pool, NULL, NULL);
    if (file)
        sshfile_close(file, NULL, NULL);
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
    e->dc_firewall = -1;
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
            .max_calls_per_node = cfg->proxmox.max_calls_per_node,
        };
        if (!cfg->ssh.key) {
            engine_free_now(e);
            return set_error(ret_error, -EINVAL, "[ssh] key is required with [proxmox]");
        }
        r = engine_templates_init(e, ret_error);
        if (r < 0) {
            engine_free_now(e);
            return r;
        }
        r = sshs_key_load_memory(cfg->ssh.key, strlen(cfg->ssh.key), &e->key);
        if (r < 0) {
            engine_free_now(e);
            return set_error(ret_error, r, "[ssh] the private key cannot be loaded: %s",
                             strerror(-r));
        }
        r = registry_open(cfg->server.state_dir, &e->reg);
        if (r < 0) {
            sshs_key_free(e->key);
            engine_free_now(e);
            return set_error(ret_error, r, "[server] state_dir '%s': %s", cfg->server.state_dir,
                             strerror(-r));
        }
        r = pve_client_new(loop, &pc, &e->pve);
        if (r < 0) {
            registry_free(e->reg);
            sshs_key_free(e->key);
            engine_free_now(e);
            return set_error(ret_error, r, "[proxmox] client: %s", strerror(-r));
        }
        r = cluster_init(e);
        if (r < 0) {
            pve_client_close(e->pve, NULL, NULL);
            registry_free(e->reg);
            sshs_key_free(e->key);
            engine_free_now(e);
            return set_error(ret_error, r, "out of memory");
        }
        e->configured = true;
        if (!cfg->network.static_mode && !cfg->network.first && !cfg->network.gateway)
            engine_noticef(e, LOG_WARNING,
                           "[network] mode = dhcp without addresses or gateway: an address a "
                           "container reports is checked only against the daemon's host and "
                           "the other sandboxes (docs/sandbox-setup.md, \"Addresses\")");
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
    e->closed = (struct close_notify){.cb = cb, .userdata = userdata};
    e->close_pending = 1; /* released at the end of this function */
    if (e->pumps_stop)
        e->pumps_stop(e, NULL);
    if (e->preview_srv_stop)
        e->preview_srv_stop(e);
    if (e->eproxy_stop)
        e->eproxy_stop(e, NULL);
    if (e->relays_stop)
        e->relays_stop(e, NULL); /* forwards and previews */
    if (e->transfers_stop)
        e->transfers_stop(e);
    if (e->volumes_stop)
        e->volumes_stop(e);
    if (e->pool_close)
        e->pool_close(e);
    if (e->replicas_close)
        e->replicas_close(e);
    for (sb = e->sandboxes; sb; sb = sb->next) {
        uv_timer_stop(&sb->timer);
        sandbox_close_ssh(sb); /* fails execs and a running connect */
    }
    /* Its workers end once the last file session using it is closed. */
    filepool_unref(TAKE_PTR(e->filepool));
    /* Completes every call in flight with -ECANCELED (creates and destroys end there). */
    pve_client_close(e->pve, NULL, NULL);
    e->pve = NULL;
    if (e->fw_call || e->probe_call)
        e->fw_call = e->probe_call = NULL;
    e->tmpl_call = NULL;
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
            sb->create_op->finish(sb);
        }
        while (w) {
            struct sb_waiter *wn = w->next;
            w->cb(&err, w->userdata);
            free(w);
            w = wn;
        }
        sb->refs--;
        sb->call = NULL;
        sandbox_set_state(sb, SANDBOX_GONE);
        sandbox_unlink(sb);
        sb->close_counted = true;
        e->close_pending++;
        sandbox_maybe_free(sb);
    }
    registry_free(e->reg);
    e->reg = NULL;
    sshs_key_free(e->key);
    e->key = NULL;
    if (e->probe_open) {
        e->probe_open = false;
        e->close_pending++;
        uv_close((uv_handle_t *)&e->probe, probe_closed);
    }
    cluster_close(e, engine_handle_closed);
    engine_release(e);
}

/* ---- for lib/engine/reconcile.c ---- */

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

bool sandbox_busy(const struct sandbox *sb)
{
    return sb->create_op || sb->call || sb->fw_busy || sb->resize_op || sb->snap_op || sb->forks ||
           sb->tmpl_op || sb->pause_op || sb->attach_op || sb->state == SANDBOX_DESTROYING ||
           sb->destroy_requested;
}

int engine_save(struct sandbox *sb, void (*cb)(int r, void *userdata), void *userdata)
{
    if (sb->engine->closing)
        return -ESHUTDOWN;
    return sandbox_save(sb, cb ? cb : save_logged, userdata);
}
