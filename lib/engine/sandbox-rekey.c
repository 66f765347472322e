/* The per-sandbox host key steps of the create (see hostkey.h for why), rows of its step
 * table (op-step.h): regenerate the container's host key over the session authenticated with
 * the template's key, record the new key's pin in the container's marker, then connect again
 * with only that key accepted. The registry gets it with the READY record. Each step
 * completes through the driver (op-step.h), so nothing here calls into sandbox-create.c. */
#include "macro.h"

#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hostkey.h"
#include "log.h"
#include "marker.h"
#include "op-step.h"
#include "pve.h"
#include "registry.h"
#include "sandbox-internal.h"
#include "sshexec.h"
#include "sshs.h"

#define COMP "sandbox"

int sandbox_description(const struct sandbox *sb, char **ret)
{
    struct marker m = {
        .owner_uid = sb->owner_uid,
        .created = sb->created_at,
        .expires = sb->expires_at,
        .pool = sb->pool_member,
        .paused = sb->marker_paused,
    };
    int r;

    assert(sb->labels); /* an object of strings, never NULL */
    memcpy(m.key, sb->idem_hash, sizeof m.key);
    memcpy(m.params, sb->params_hash, sizeof m.params);
    snprintf(m.instance, sizeof m.instance, "%s", registry_instance_id(sb->engine->reg));
    snprintf(m.sandbox, sizeof m.sandbox, "%s", sb->id);
    snprintf(m.template, sizeof m.template, "%s", sb->template);
    if (sb->host_key[0]) {
        r = hostkey_pin_to_hex(sb->host_key, m.hostkey);
        if (r < 0)
            return r;
    }
    return marker_description(&m, sb->labels, ret);
}

bool rekey_skip(const struct sandbox *sb)
{
    return !sb->engine->cfg->ssh.rekey;
}

static void on_rekeyed(struct sshexec *x, int error, struct sshexec_result *res, void *userdata)
{
    struct sandbox *sb = userdata;
    char buf[512], pin[HOSTKEY_PIN_MAX];
    struct engine_error err = {.kind = ENGINE_E_SSH, .error = error, .message = buf};
    int r;

    if (error < 0) {
        snprintf(buf, sizeof buf, "regenerating the host key failed: %s", strerror(-error));
        op_step_done(sb, &err);
        return;
    }
    if (res->timed_out || res->exit_code != 0) {
        snprintf(buf, sizeof buf, "regenerating the host key failed (exit %d): %.300s",
                 res->exit_code, res->err ? res->err : "");
        err.error = -EPROTO;
        op_step_done(sb, &err);
        return;
    }
    r = hostkey_pin_from_output(res->out, res->out_len, pin);
    if (r < 0) {
        snprintf(buf, sizeof buf, "the container printed no new ed25519 host key");
        err.error = -EPROTO;
        op_step_done(sb, &err);
        return;
    }
    snprintf(sb->host_key, sizeof sb->host_key, "%s", pin);
    log_debug(COMP, "%s: new host key %s (%" PRIu64 " ms)", sb->id, pin, res->duration_ms);
    op_step_done(sb, NULL);
}

int rekey_start(struct sandbox *sb, uint64_t timeout_ms, const char **ret_fail)
{
    const struct sshexec_params p = {
        .command = HOSTKEY_REKEY_SCRIPT,
        .timeout_ms = MIN(timeout_ms, (uint64_t)SSHEXEC_TIMEOUT_MAX_MS),
        .has_max_output = true,
        .max_output_bytes = HOSTKEY_OUTPUT_MAX,
        .container_pid_namespace = true,
    };

    assert(sb->pool); /* the connect step before it made the session */
    return sshexec_start(sb->pool, &p, on_rekeyed, sb, NULL); /* on_rekeyed runs once */
}

/* The marker written, with the volume lines of cur (the description read: NULL when the
 * sandbox has no volumes) kept. */
static int marker_put(struct sandbox *sb, const char *cur, uint64_t timeout_ms,
                      const char **ret_fail)
{
    _cleanup_json_ json_object *p = json_object_new_object();
    _cleanup_free_ char *desc = NULL;
    _cleanup_free_ struct marker_volume *mv = NULL;
    size_t n = 0;
    int r;

    r = sandbox_description(sb, &desc);
    if (r >= 0 && cur)
        r = marker_volumes_parse(cur, &mv, &n);
    for (size_t i = 0; r >= 0 && i < n; i++) {
        _cleanup_free_ char *d = NULL;

        r = marker_volume_set(desc, &mv[i], &d);
        if (r >= 0)
            free(desc), desc = TAKE_PTR(d);
    }
    if (r < 0) {
        *ret_fail = "cannot build the ownership marker";
        return r;
    }
    if (!p) {
        *ret_fail = "out of memory";
        return -ENOMEM;
    }
    json_object_object_add(p, "description", json_object_new_string(desc));
    return pve_config_put(sb->engine->pve, sb->node, sb->vmid, p, timeout_ms, op_step_pve, sb,
                          &sb->call);
}

static void on_marker_conf(const struct pve_result *res, void *userdata)
{
    struct sandbox *sb = userdata;
    json_object *d = NULL;
    const char *fail = "cannot write the ownership marker";
    struct engine_error err = {.kind = ENGINE_E_INTERNAL, .message = fail};

    sb->call = NULL;
    if (res->error < 0) {
        op_step_pve_done(sb, res);
        return;
    }
    if (res->data)
        json_object_object_get_ex(res->data, "description", &d);
    err.error = marker_put(sb, d ? json_object_get_string(d) : "", op_step_left(sb), &fail);
    err.message = fail;
    if (err.error < 0)
        op_step_done(sb, &err);
}

/* The description is read first and its volume lines kept (volume.h): a volume attached at
 * create, or by hand, or to a sandbox rebuilt from its marker alike. */
int marker_write_start(struct sandbox *sb, uint64_t timeout_ms, const char **ret_fail)
{
    return pve_config_get(sb->engine->pve, sb->node, sb->vmid, false, timeout_ms, on_marker_conf,
                          sb, &sb->call);
}

/* The same connect again, with the sandbox's own host key pinned (sandbox_ssh_config()). The
 * session pinned to the template's key is dropped; sshd may refuse connects while it
 * reloads, which the pool retries. */
int rekey_reconnect_start(struct sandbox *sb, uint64_t timeout_ms, const char **ret_fail)
{
    assert(sb->host_key[0]); /* pinned by the regeneration */
    sshpool_close(TAKE_PTR(sb->pool), NULL, NULL);
    return connect_start(sb, timeout_ms, ret_fail);
}
