/* Volumes attached at sandbox.create: the create's step and the attach call. See volume.h. */
#include "macro.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "marker.h"
#include "op-step.h"
#include "pve-parse.h"
#include "pve.h"
#include "sandbox-internal.h"
#include "testhook.h"
#include "volume-internal.h"
#include "volume-locate.h"
#include "volume.h"

#define COMP "volume"

int engine_volume_mounts_check(struct engine *e, const struct sandbox_create_opts *opts,
                               struct engine_error *ret_err)
{
    if (opts->n_volumes == 0)
        return 0;
    if (opts->n_volumes > ENGINE_VOLUMES_MAX || opts->pool || opts->fork_vmid)
        return engine_refuse(ret_err, ENGINE_E_INVALID, -EINVAL,
                             "at most 8 volumes, and none for a warm pool member or a fork",
                             "volumes");
    for (size_t i = 0; i < opts->n_volumes; i++)
        if (engine_volume_user(e, opts->volumes[i].name, opts->owner_uid))
            return engine_refuse(ret_err, ENGINE_E_INVALID, -EBUSY,
                                 "a volume asked for is attached to another sandbox", "volumes");
    return 0;
}

/* ---- the attach call, on the volume calls' queue ---- */

static void on_holder_path(const struct pve_result *res, void *userdata)
{
    struct volumes *v = userdata;
    struct vol_op *op = v->running;
    char key[16], dst_key[16];
    int r;

    v->call = NULL;
    if (res->error < 0) {
        vol_fail_pve(v, res);
        return;
    }
    test_crash_point("volume-attach-path");
    snprintf(key, sizeof key, "mp%u", op->hold_mp);
    snprintf(dst_key, sizeof dst_key, "mp%u", op->dst_mp);
    r = pve_move_volume(v->e->pve, v->node, v->holder, key, op->src, dst_key,
                        ENGINE_VOLUME_TIMEOUT_MS, vol_on_moved, v, &v->call);
    if (r < 0)
        vol_fail(v, ENGINE_E_INTERNAL, r, "cannot move the volume to the sandbox", NULL);
}

/* The container's line is written: the holder's mount point takes the sandbox's path (a move
 * keeps the source's mp= and ro=). */
static void on_target_line(const struct pve_result *res, void *userdata)
{
    struct volumes *v = userdata;
    struct vol_op *op = v->running;
    _cleanup_json_ json_object *p = NULL;
    char key[16];
    int r;

    v->call = NULL;
    if (res->error < 0) {
        vol_fail_pve(v, res);
        return;
    }
    test_crash_point("volume-attach-line");
    p = json_object_new_object();
    if (!p) {
        vol_fail(v, ENGINE_E_INTERNAL, -ENOMEM, "out of memory", NULL);
        return;
    }
    snprintf(key, sizeof key, "mp%u", op->hold_mp);
    json_object_object_add(p, key, json_object_new_string(op->hold_val));
    r = pve_config_put(v->e->pve, v->node, v->holder, p, ENGINE_VOLUME_TIMEOUT_MS, on_holder_path,
                       v, &v->call);
    if (r < 0)
        vol_fail(v, ENGINE_E_INTERNAL, r, "cannot write the volume holder's configuration", NULL);
}

/* Whether the container of conf can take one more volume at path: -EBADMSG when its volume
 * lines do not parse, -E2BIG when it holds ENGINE_VOLUMES_MAX (volume lines whose key is a
 * mount point), -EEXIST when a mount point of it is at path; else 0. */
static int target_check(json_object *conf, const char *desc, const char *path)
{
    _cleanup_free_ struct marker_volume *mv = NULL;
    size_t n = 0, held = 0;
    bool taken = false;

    if (marker_volumes_parse(desc, &mv, &n) < 0)
        return -EBADMSG;
    for (size_t i = 0; i < n; i++)
        held += volume_config_has_mp(conf, mv[i].mp);
    if (held >= ENGINE_VOLUMES_MAX)
        return -E2BIG;
    json_object_object_foreach(conf, key, val)
    {
        struct pve_mp mp = {};
        unsigned k;
        char c;

        if (taken || sscanf(key, "mp%u%c", &k, &c) != 1 ||
            !json_object_is_type(val, json_type_string) ||
            pve_mp_parse(json_object_get_string(val), &mp) < 0)
            continue;
        taken = mp.path && strcmp(mp.path, path) == 0;
        pve_mp_done(&mp);
    }
    return taken ? -EEXIST : 0;
}

/* The container's configuration is read: the volume's line goes in, at a free key. */
static void on_target_conf(const struct pve_result *res, void *userdata)
{
    struct volumes *v = userdata;
    struct vol_op *op = v->running;
    const char *desc = vol_conf_str(res->data, "description");
    _cleanup_free_ char *newdesc = NULL;
    _cleanup_json_ json_object *p = NULL;
    struct marker_volume line = op->from;
    int r;

    v->call = NULL;
    if (res->error < 0) {
        vol_fail_pve(v, res);
        return;
    }
    r = target_check(res->data, desc, op->mount.path);
    if (r == -EBADMSG) {
        vol_fail(v, ENGINE_E_INTERNAL, r, "the sandbox's volume lines do not parse", NULL);
        return;
    }
    if (r < 0) {
        vol_fail(v, ENGINE_E_INVALID, r,
                 r == -E2BIG ? "the sandbox has 8 volumes attached already"
                             : "the path is a mount point of the sandbox already",
                 r == -EEXIST && strcmp(op->param, "volume") == 0 ? "path" : op->param);
        return;
    }
    r = volume_free_mp(res->data, desc, &line.mp);
    if (r >= 0)
        r = marker_volume_set(desc, &line, &newdesc);
    p = r >= 0 ? json_object_new_object() : NULL;
    if (!p) {
        vol_fail(v, ENGINE_E_INTERNAL, r < 0 ? r : -ENOMEM,
                 "cannot write the volume's line on the sandbox's container", NULL);
        return;
    }
    op->dst_mp = line.mp;
    json_object_object_add(p, "description", json_object_new_string(newdesc));
    r = pve_config_put(v->e->pve, v->node, op->src, p, ENGINE_VOLUME_TIMEOUT_MS, on_target_line, v,
                       &v->call);
    if (r < 0)
        vol_fail(v, ENGINE_E_INTERNAL, r, "cannot write the sandbox's configuration", NULL);
}

/* The holder's mount point value with the sandbox's path and read-only flag. */
static int holder_value(const char *cur, const struct engine_volume_mount *m, char *buf, size_t n)
{
    struct pve_mp mp = {};
    int r = cur ? pve_mp_parse(cur, &mp) : -EBADMSG;
    int k;

    if (r < 0)
        return r;
    k = mp.size_gb
            ? snprintf(buf, n, "%s,mp=%s%s,size=%" PRIu64 "G", mp.volume, m->path,
                       m->read_only ? ",ro=1" : "", mp.size_gb)
            : snprintf(buf, n, "%s,mp=%s%s", mp.volume, m->path, m->read_only ? ",ro=1" : "");
    pve_mp_done(&mp);
    return k < 0 || (size_t)k >= n ? -ENOBUFS : 0;
}

static void attach_act(struct volumes *v, const struct marker_volume *mv, size_t n,
                       json_object *conf)
{
    struct vol_op *op = v->running;
    const struct marker_volume *x = vol_find(mv, n, op->name);
    char key[16];
    int r;

    if (!x || (!op->admin && x->owner_uid != op->uid)) {
        vol_fail(v, ENGINE_E_INVALID, -ENOENT, "no such volume", op->param);
        return;
    }
    if (!volume_config_has_mp(conf, x->mp)) {
        vol_fail(v, ENGINE_E_INVALID, -EBUSY,
                 strcmp(op->param, "volume") == 0
                     ? "the volume is attached to a sandbox"
                     : "a volume asked for is attached to another sandbox",
                 op->param);
        return;
    }
    if (strcmp(op->src_node, v->node) != 0) {
        vol_fail(v, ENGINE_E_INVALID, -EXDEV, "the volume is on another node", op->param);
        return;
    }
    op->from = *x;
    op->hold_mp = x->mp;
    snprintf(key, sizeof key, "mp%u", x->mp);
    r = holder_value(vol_conf_str(conf, key), &op->mount, op->hold_val, sizeof op->hold_val);
    if (r >= 0)
        r = pve_config_get(v->e->pve, v->node, op->src, false, ENGINE_VOLUME_TIMEOUT_MS,
                           on_target_conf, v, &v->call);
    if (r < 0)
        vol_fail(v, ENGINE_E_INTERNAL, r, "cannot read the sandbox's configuration", NULL);
}

static int attach_one(struct sandbox *sb, engine_json_cb cb, struct engine_error *ret_err)
{
    const struct engine_volume_mount *m = &sb->vol_mounts[sb->n_vol_attached];
    struct volumes *v = vol_get(sb->engine);
    struct vol_op op = {.kind = VOL_ATTACH,
                        .uid = sb->owner_uid,
                        .mount = *m,
                        .src = sb->vmid,
                        .param = sb->attach_op ? "volume" : "volumes",
                        .cb = cb,
                        .userdata = sb};

    if (!v)
        return engine_refuse_oom(ret_err);
    v->attach_act = attach_act;
    snprintf(op.name, sizeof op.name, "%s", m->name);
    snprintf(op.src_node, sizeof op.src_node, "%s", sb->node);
    return vol_enqueue(sb->engine, &op, ret_err);
}

/* ---- the create's step ---- */

static void on_attached(const struct engine_error *err, json_object *result, void *userdata)
{
    struct sandbox *sb = userdata;
    struct engine_error qerr = {};

    (void)result;
    if (err) {
        op_step_done(sb, err);
        return;
    }
    sb->n_vol_attached++;
    if (sb->n_vol_attached == sb->n_vol_mounts) {
        op_step_done(sb, NULL);
        return;
    }
    if (attach_one(sb, on_attached, &qerr) < 0)
        op_step_done(sb, &qerr);
}

bool volumes_attach_skip(const struct sandbox *sb)
{
    return sb->n_vol_attached >= sb->n_vol_mounts;
}

int volumes_attach_start(struct sandbox *sb, uint64_t timeout_ms, const char **ret_fail)
{
    struct engine_error err = {};
    int r;

    (void)timeout_ms; /* each volume call has its own (ENGINE_VOLUME_TIMEOUT_MS) */
    r = attach_one(sb, on_attached, &err);
    if (r < 0)
        *ret_fail = err.message;
    return r;
}
