/* Volumes and their holder. See volume.h. */
#include "macro.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "audit.h"
#include "log.h"
#include "marker.h"
#include "metrics.h"
#include "pve-error.h"
#include "pve-parse.h"
#include "pve.h"
#include "registry.h"
#include "sandbox-internal.h"
#include "testhook.h"
#include "volume-locate.h"
#include "volume-internal.h"
#include "volume.h"

#define COMP "volume"
/* Where a volume is mounted in the holder (never started: only a placeholder). */
#define HOLDER_MOUNT_PATH "/mnt/volume"

static void run_next(struct volumes *v);
static void discover(struct volumes *v);

static void volumes_stop(struct engine *e)
{
    struct volumes *v = TAKE_PTR(e->volumes);
    struct engine_error err = {
        .kind = ENGINE_E_SHUTDOWN, .error = -ECANCELED, .message = "the daemon is shutting down"};

    if (!v)
        return;
    pve_call_cancel(TAKE_PTR(v->call));
    if (v->list_free)
        v->list_free(v);
    if (v->running)
        v->running->next = v->head, v->head = TAKE_PTR(v->running);
    while (v->head) {
        struct vol_op *op = v->head;

        v->head = op->next;
        op->cb(&err, NULL, op->userdata);
        free(op);
    }
    free(v);
}

struct volumes *vol_get(struct engine *e)
{
    if (!e->volumes) {
        e->volumes = calloc(1, sizeof *e->volumes);
        if (!e->volumes)
            return NULL;
        e->volumes->e = e;
        e->volumes_stop = volumes_stop;
    }
    return e->volumes;
}

/* The running call ends: its callback, then the next call. */
void vol_finish(struct volumes *v, const struct engine_error *err, json_object *result)
{
    struct vol_op *op = TAKE_PTR(v->running);

    static const char *const ops[] = {[VOL_CREATE] = "create",
                                      [VOL_LIST] = "list",
                                      [VOL_DELETE] = "delete",
                                      [VOL_TAKE_BACK] = "take_back",
                                      [VOL_ATTACH] = "attach"};

    v->queued--;
    metrics_add(M_VOLUME_CALLS, op->detach ? "detach" : ops[op->kind], err ? "failed" : "done", 1);
    if (err)
        log_info(COMP, "volume call of uid %u failed: %s", (unsigned)op->uid, err->message);
    op->cb(err, result, op->userdata);
    free(op);
    run_next(v);
}

void vol_fail(struct volumes *v, enum engine_err_kind kind, int error, const char *msg,
              const char *param)
{
    struct engine_error err = {.kind = kind,
                               .error = error,
                               .message = msg,
                               .param = param,
                               .state = kind == ENGINE_E_STATE ? "attached" : NULL};

    vol_finish(v, &err, NULL);
}

void vol_fail_pve(struct volumes *v, const struct pve_result *res)
{
    struct engine_error err;

    error_from_pve(res, v->e->closing, &err);
    vol_finish(v, &err, NULL);
}

const char *vol_conf_str(json_object *conf, const char *key)
{
    json_object *o;

    return conf && json_object_object_get_ex(conf, key, &o) &&
                   json_object_is_type(o, json_type_string)
               ? json_object_get_string(o)
               : NULL;
}

json_object *vol_json(const struct marker_volume *mv)
{
    json_object *o = json_object_new_object();

    if (!o)
        return NULL;
    json_object_object_add(o, "name", json_object_new_string(mv->name));
    json_object_object_add(o, "size_gb", json_object_new_int64(mv->size_gb));
    json_object_object_add(o, "owner_uid", json_object_new_int64(mv->owner_uid));
    json_object_object_add(o, "attached_to", NULL);
    return o;
}

/* An audit record of a volume's creation or deletion (its owner, by caller uid). */
static void audit_volume(struct volumes *v, const char *event, const struct vol_op *op, uid_t owner,
                         unsigned size_gb)
{
    struct audit_record rec = {.event = event,
                               .priority = LOG_INFO,
                               .vmid = v->holder,
                               .node = v->node,
                               .caller_uid = op->uid,
                               .owner_uid = owner};

    audit_emit(&rec, "%s: volume '%s' (%u GiB, owner uid %u) on the volume holder %u on %s", event,
               op->name, size_gb, (unsigned)owner, v->holder, v->node);
}

/* ---- the holder: found in the pool, or cloned ---- */

static void on_cloned(const struct pve_result *res, void *userdata)
{
    struct volumes *v = userdata;

    v->call = NULL;
    if (res->error < 0) {
        log_warning(COMP, "the volume holder's clone failed");
        vol_fail_pve(v, res);
        return;
    }
    v->holder = res->vmid;
    log_info(COMP, "volume holder: container %u on %s made", v->holder, v->node);
    vol_read_config(v);
}

static void holder_clone(struct volumes *v)
{
    struct engine *e = v->e;
    const struct engine_template *t = &e->templates[0];
    uint32_t src[PVE_CLONE_SOURCES_MAX];
    char line[MARKER_HOLDER_LINE_MAX], desc[MARKER_HOLDER_LINE_MAX + 1];
    size_t n;
    int r;

    snprintf(v->node, sizeof v->node, "%s",
             t->n_copies  ? t->copies[0].node
             : t->home[0] ? t->home
                          : e->cfg->proxmox.nodes[0]);
    n = engine_template_vmids(e, t, v->node, src, ELEMENTSOF(src));
    r = marker_holder_format(registry_instance_id(e->reg), line, sizeof line);
    if (r < 0) {
        vol_fail(v, ENGINE_E_INTERNAL, r, "cannot build the volume holder's line", NULL);
        return;
    }
    snprintf(desc, sizeof desc, "%s\n", line);
    struct pve_clone_params cp = {
        .node = v->node,
        .template_vmid = src[0],
        .copies = src + 1,
        .n_copies = n - 1,
        .hostname = ENGINE_VOLUME_HOLDER_NAME,
        .description = desc,
        .pool = e->cfg->proxmox.pool,
        .full = e->cfg->proxmox.full_clone ? 1 : -1,
        .storage = e->cfg->proxmox.full_clone ? e->cfg->proxmox.storage : NULL,
    };
    r = pve_clone(e->pve, &cp, ENGINE_VOLUME_TIMEOUT_MS, on_cloned, v, &v->call);
    if (r < 0)
        vol_fail(v, ENGINE_E_INTERNAL, r, "cannot start the volume holder's clone", NULL);
    else
        log_info(COMP, "no volume holder yet: cloning one on %s", v->node);
}

static void act(struct volumes *v, json_object *conf);
static void cand_next(struct volumes *v);

static void on_cand_config(const struct pve_result *res, void *userdata)
{
    struct volumes *v = userdata;
    uint32_t vmid = v->cands[v->i_cand++];

    v->call = NULL;
    if (res->error < 0) {
        vol_fail_pve(v, res); /* a holder that cannot be read now: nothing is decided */
        return;
    }
    if (!marker_holder_is(vol_conf_str(res->data, "description"),
                          registry_instance_id(v->e->reg))) {
        cand_next(v);
        return;
    }
    v->holder = vmid;
    log_info(COMP, "volume holder: container %u on %s", vmid, v->node);
    act(v, res->data);
}

static void cand_next(struct volumes *v)
{
    int r;

    if (v->i_cand >= v->n_cands) {
        if (v->running->kind == VOL_CREATE)
            holder_clone(v);
        else
            act(v, NULL); /* no holder: no volume */
        return;
    }
    r = pve_config_get(v->e->pve, v->node, v->cands[v->i_cand], false, ENGINE_VOLUME_TIMEOUT_MS,
                       on_cand_config, v, &v->call);
    if (r < 0)
        vol_fail(v, ENGINE_E_INTERNAL, r, "cannot read the volume holder", NULL);
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

    return x < y ? -1 : x > y;
}

static void on_members(const struct pve_result *res, void *userdata)
{
    struct volumes *v = userdata;
    const char *node = NULL;

    v->call = NULL;
    if (res->error < 0) {
        vol_fail_pve(v, res);
        return;
    }
    v->n_cands = v->i_cand = 0;
    for (size_t i = 0; res->vms && i < res->vms->n; i++) {
        const struct pve_vm *vm = &res->vms->v[i];

        if (vm->template || !vm->name || strcmp(vm->name, ENGINE_VOLUME_HOLDER_NAME) != 0 ||
            (vm->type && strcmp(vm->type, "lxc") != 0) ||
            v->n_cands == VOLUME_HOLDER_CANDIDATES_MAX)
            continue;
        if (node && vm->node && strcmp(node, vm->node) != 0)
            continue; /* the holder is on one node: the first one's */
        node = node ? node : vm->node;
        v->cands[v->n_cands++] = vm->vmid;
    }
    if (v->n_cands > 1)
        log_warning(COMP,
                    "%zu containers named %s in the pool: the lowest id that is marked "
                    "as this daemon's holder is used",
                    v->n_cands, ENGINE_VOLUME_HOLDER_NAME);
    qsort(v->cands, v->n_cands, sizeof v->cands[0], cmp_u32);
    snprintf(v->node, sizeof v->node, "%s", node ? node : v->e->cfg->proxmox.nodes[0]);
    cand_next(v);
}

/* ---- a call's steps ---- */

static void on_config(const struct pve_result *res, void *userdata)
{
    struct volumes *v = userdata;

    v->call = NULL;
    /* a pool-scoped token is refused (403) on a container that no longer exists */
    if (res->error == -EREMOTEIO && res->perr &&
        (res->perr->kind == PVE_ERR_NOT_FOUND || res->perr->kind == PVE_ERR_PERMISSION)) {
        log_warning(COMP, "the volume holder %u cannot be read (%s): looked for in the pool",
                    v->holder, res->perr->message);
        v->holder = 0;
        discover(v);
        return;
    }
    if (res->error < 0)
        vol_fail_pve(v, res);
    else
        act(v, res->data);
}

static void discover(struct volumes *v)
{
    int r = pve_pool_members(v->e->pve, v->e->cfg->proxmox.pool, ENGINE_VOLUME_TIMEOUT_MS,
                             on_members, v, &v->call);

    if (r < 0)
        vol_fail(v, ENGINE_E_INTERNAL, r, "cannot list the pool", NULL);
}

void vol_read_config(struct volumes *v)
{
    int r = pve_config_get(v->e->pve, v->node, v->holder, false, ENGINE_VOLUME_TIMEOUT_MS,
                           on_config, v, &v->call);

    if (r < 0)
        vol_fail(v, ENGINE_E_INTERNAL, r, "cannot read the volume holder", NULL);
}

static void on_put(const struct pve_result *res, void *userdata)
{
    struct volumes *v = userdata;
    struct vol_op *op = v->running;

    v->call = NULL;
    if (res->error < 0) {
        vol_fail_pve(v, res);
        return;
    }
    if (op->cleaning)
        op->cleaning = false;
    else if (op->kind == VOL_TAKE_BACK) {
        op->line_written = true;
        test_crash_point("volume-take-back-line");
    } else if (op->kind == VOL_DELETE && !op->detached) {
        op->detached = true;
        test_crash_point("volume-delete-detached");
        op->cleaned = false; /* its volume is unusedN now: destroyed next */
    } else if (op->kind == VOL_CREATE) {
        struct marker_volume mv = {.owner_uid = op->uid, .size_gb = op->size_gb};
        _cleanup_json_ json_object *o = json_object_new_object();

        snprintf(mv.name, sizeof mv.name, "%s", op->name);
        audit_volume(v, "volume.create", op, op->uid, op->size_gb);
        json_object_object_add(o, "volume", vol_json(&mv));
        vol_finish(v, NULL, o);
        return;
    }
    vol_read_config(v); /* unusedN to destroy, or the delete's end */
}

static int put(struct volumes *v, json_object *p)
{
    int r = pve_config_put(v->e->pve, v->node, v->holder, p, ENGINE_VOLUME_TIMEOUT_MS, on_put, v,
                           &v->call);

    if (r < 0)
        vol_fail(v, ENGINE_E_INTERNAL, r, "cannot write the volume holder's configuration", NULL);
    return r;
}

/* Destroys the holder's unusedN (deletes a crash interrupted): true when a write went out. */
static bool clean_unused(struct volumes *v, json_object *conf)
{
    _cleanup_json_ json_object *p = NULL;
    char list[PVE_VOLUME_KEYS * 11] = "";
    size_t len = 0;

    if (v->running->cleaned || v->running->kind == VOL_LIST)
        return false;
    v->running->cleaned = true;
    json_object_object_foreach(conf, key, val)
    {
        unsigned n;
        char c;

        (void)val;
        if (sscanf(key, "unused%u%c", &n, &c) != 1 || n >= PVE_VOLUME_KEYS)
            continue;
        len += (size_t)snprintf(list + len, sizeof list - len, "%s%s", len ? "," : "", key);
    }
    if (len == 0)
        return false;
    p = json_object_new_object();
    if (!p)
        return false;
    log_info(COMP, "volume holder %u: destroying %s (deleted volumes)", v->holder, list);
    json_object_object_add(p, "delete", json_object_new_string(list));
    v->running->cleaning = true;
    (void)put(v, p);
    return true;
}

static int cmp_name(const void *a, const void *b)
{
    return strcmp(((const struct marker_volume *)a)->name, ((const struct marker_volume *)b)->name);
}

/* The caller's lines (an admin's: all), by name; those whose key is not a mount point of the
 * holder are attached: where, volume-list.c finds out. */
static void do_list(struct volumes *v, struct marker_volume *mv, size_t n, json_object *conf)
{
    size_t k = 0;
    bool attached = false;

    if (n > 1)
        qsort(mv, n, sizeof *mv, cmp_name);
    for (size_t i = 0; i < n; i++) {
        if (!v->running->admin && mv[i].owner_uid != v->running->uid)
            continue;
        attached = attached || !volume_config_has_mp(conf, mv[i].mp);
        mv[k++] = mv[i];
    }
    v->list_act(v, mv, k, attached ? conf : NULL);
}

const struct marker_volume *vol_find(const struct marker_volume *mv, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(mv[i].name, name) == 0)
            return &mv[i];
    return NULL;
}

/* The holder's storage: that of its root disk ("local-lvm:vm-101-disk-0,size=8G"). */
static int holder_storage(json_object *conf, char *buf, size_t n)
{
    const char *rootfs = vol_conf_str(conf, "rootfs");
    const char *colon = rootfs ? strchr(rootfs, ':') : NULL;

    if (!colon || colon == rootfs || (size_t)(colon - rootfs) >= n)
        return -EBADMSG;
    memcpy(buf, rootfs, (size_t)(colon - rootfs));
    buf[colon - rootfs] = '\0';
    return 0;
}

static void do_create(struct volumes *v, const struct marker_volume *mv, size_t n,
                      json_object *conf)
{
    struct vol_op *op = v->running;
    const char *desc = vol_conf_str(conf, "description");
    _cleanup_free_ char *newdesc = NULL, *mpval = NULL;
    _cleanup_json_ json_object *p = NULL;
    struct marker_volume nv = {.owner_uid = op->uid, .size_gb = op->size_gb};
    char storage[128], key[16];
    unsigned owned = 0;
    int r;

    if (vol_find(mv, n, op->name)) {
        vol_fail(v, ENGINE_E_INVALID, -EEXIST, "a volume of that name exists", "name");
        return;
    }
    for (size_t i = 0; i < n; i++)
        owned += mv[i].owner_uid == op->uid;
    if (owned >= v->e->cfg->sandbox.max_volumes_per_uid) {
        vol_fail(v, ENGINE_E_QUOTA, -EDQUOT,
                 "the caller owns [sandbox] max_volumes_per_uid volumes already", NULL);
        return;
    }
    snprintf(nv.name, sizeof nv.name, "%s", op->name);
    r = volume_free_mp(conf, desc, &nv.mp);
    if (r >= 0)
        r = holder_storage(conf, storage, sizeof storage);
    if (r >= 0)
        r = marker_volume_set(desc, &nv, &newdesc);
    if (r >= 0)
        r = pve_mp_format(storage, op->size_gb, HOLDER_MOUNT_PATH, false, &mpval);
    p = r >= 0 ? json_object_new_object() : NULL;
    if (!p) {
        bool full = r == -ENOSPC || r == -E2BIG; /* 256 keys, or 8 KiB of description */

        vol_fail(v, full ? ENGINE_E_QUOTA : ENGINE_E_INTERNAL, r < 0 ? r : -ENOMEM,
                 full ? "the volume holder is full: its description lists no more volumes"
                      : "cannot build the volume holder's configuration",
                 NULL);
        return;
    }
    snprintf(key, sizeof key, "mp%u", nv.mp);
    /* the line and the mount point in one write: never one without the other */
    json_object_object_add(p, "description", json_object_new_string(newdesc));
    json_object_object_add(p, key, json_object_new_string(mpval));
    if (put(v, p) >= 0)
        test_crash_point("volume-create-sent");
}

static void do_delete(struct volumes *v, const struct marker_volume *mv, size_t n,
                      json_object *conf)
{
    struct vol_op *op = v->running;
    const struct marker_volume *x = vol_find(mv, n, op->name);
    _cleanup_free_ char *newdesc = NULL;
    _cleanup_json_ json_object *p = NULL;
    char key[16];
    int r;

    if (op->detached) {
        _cleanup_json_ json_object *o = json_object_new_object();

        audit_volume(v, "volume.delete", op, op->deleted_owner, op->deleted_size);
        json_object_object_add(o, "name", json_object_new_string(op->name));
        json_object_object_add(o, "deleted", json_object_new_boolean(true));
        vol_finish(v, NULL, o);
        return;
    }
    if (!x || (!op->admin && x->owner_uid != op->uid)) {
        vol_fail(v, ENGINE_E_INVALID, -ENOENT, "no such volume", "name");
        return;
    }
    if (!volume_config_has_mp(conf, x->mp)) {
        vol_fail(v, ENGINE_E_STATE, -EBUSY, "the volume is attached to a sandbox: destroy it first",
                 NULL);
        return;
    }
    r = marker_volume_remove(vol_conf_str(conf, "description"), op->name, &newdesc);
    p = r >= 0 ? json_object_new_object() : NULL;
    if (!p) {
        vol_fail(v, ENGINE_E_INTERNAL, r < 0 ? r : -ENOMEM,
                 "cannot build the volume holder's configuration", NULL);
        return;
    }
    op->deleted_owner = x->owner_uid;
    op->deleted_size = x->size_gb;
    snprintf(key, sizeof key, "mp%u", x->mp);
    /* the line and the mount point go in one write; the volume stays as unusedN, destroyed
     * next (by this call, or the next one after a crash) */
    json_object_object_add(p, "description", json_object_new_string(newdesc));
    json_object_object_add(p, "delete", json_object_new_string(key));
    if (put(v, p) >= 0)
        test_crash_point("volume-delete-sent");
}

void vol_on_moved(const struct pve_result *res, void *userdata)
{
    struct volumes *v = userdata;
    struct vol_op *op = v->running;
    bool attach = op->kind == VOL_ATTACH;
    _cleanup_json_ json_object *o = NULL;

    v->call = NULL;
    if (res->error < 0) {
        vol_fail_pve(v, res);
        return;
    }
    test_crash_point(attach ? "volume-attach-moved" : "volume-take-back-moved");
    if (attach)
        log_info(COMP, "volume '%s': attached to container %u (mp%u, %s%s)", op->name, op->src,
                 op->dst_mp, op->mount.path, op->mount.read_only ? ", read-only" : "");
    else
        log_info(COMP, "volume '%s': back on the holder %u from container %u", op->name, v->holder,
                 op->src);
    o = json_object_new_object();
    json_object_object_add(o, "volume", vol_json(&op->from));
    vol_finish(v, NULL, o);
}

/* A volume mounted in container src goes back to the holder: the holder's line first (its
 * key free there), then the move; src's line, stale then, goes with src. After a crash
 * between the two, the volume is still src's (volume_locate()) and the next take back
 * writes the holder's line again. */
static void do_take_back(struct volumes *v, const struct marker_volume *mv, size_t n,
                         json_object *conf)
{
    struct vol_op *op = v->running;
    const struct marker_volume *x = vol_find(mv, n, op->name);
    struct marker_volume line = op->from;
    _cleanup_free_ char *newdesc = NULL;
    _cleanup_json_ json_object *p = NULL;
    char key[16], src_key[16];
    int r;

    if (strcmp(op->src_node, v->node) != 0) {
        vol_fail(v, ENGINE_E_INTERNAL, -EXDEV, "the volume holder is on another node", NULL);
        return;
    }
    if (op->line_written) {
        snprintf(key, sizeof key, "mp%u", x ? x->mp : 0);
        snprintf(src_key, sizeof src_key, "mp%u", op->from.mp);
        r = x ? pve_move_volume(v->e->pve, v->node, op->src, src_key, v->holder, key,
                                ENGINE_VOLUME_TIMEOUT_MS, vol_on_moved, v, &v->call)
              : -ENOENT;
        if (r < 0)
            vol_fail(v, ENGINE_E_INTERNAL, r, "cannot move the volume back to its holder", NULL);
        return;
    }
    if (x && volume_config_has_mp(conf, x->mp)) {
        vol_fail(v, ENGINE_E_INTERNAL, -EEXIST, "the holder has a volume of that name", NULL);
        return;
    }
    r = volume_free_mp(conf, vol_conf_str(conf, "description"), &line.mp);
    if (r == 0)
        r = marker_volume_set(vol_conf_str(conf, "description"), &line, &newdesc);
    p = r >= 0 ? json_object_new_object() : NULL;
    if (!p) {
        vol_fail(v, r == -E2BIG || r == -ENOSPC ? ENGINE_E_QUOTA : ENGINE_E_INTERNAL,
                 r < 0 ? r : -ENOMEM, "cannot write the volume's line on the volume holder", NULL);
        return;
    }
    json_object_object_add(p, "description", json_object_new_string(newdesc));
    (void)put(v, p); /* then the config is read again, the line found */
}

/* The holder's configuration is read (NULL: there is no holder). */
static void act(struct volumes *v, json_object *conf)
{
    _cleanup_free_ struct marker_volume *mv = NULL;
    struct vol_op *op = v->running;
    size_t n = 0;
    int r;

    if (conf && clean_unused(v, conf))
        return;
    if (conf) {
        r = marker_volumes_parse(vol_conf_str(conf, "description"), &mv, &n);
        if (r < 0) {
            log_error(COMP, "volume holder %u: its volume lines do not parse (%s): not changed",
                      v->holder, strerror(-r));
            vol_fail(v, ENGINE_E_INTERNAL, r, "the volume holder's description is damaged", NULL);
            return;
        }
    }
    switch (op->kind) {
    case VOL_LIST:
        if (conf)
            do_list(v, mv, n, conf);
        else
            v->list_act(v, NULL, 0, NULL);
        break;
    case VOL_CREATE:
        do_create(v, mv, n, conf);
        break;
    case VOL_DELETE:
        if (!conf)
            vol_fail(v, ENGINE_E_INVALID, -ENOENT, "no such volume", "name");
        else
            do_delete(v, mv, n, conf);
        break;
    case VOL_TAKE_BACK:
        if (!conf)
            vol_fail(v, ENGINE_E_INTERNAL, -ENOENT, "there is no volume holder", NULL);
        else
            do_take_back(v, mv, n, conf);
        break;
    case VOL_ATTACH:
        if (!conf)
            vol_fail(v, ENGINE_E_INVALID, -ENOENT, "no such volume", op->param);
        else
            v->attach_act(v, mv, n, conf);
        break;
    }
}

static void run_next(struct volumes *v)
{
    struct vol_op *op;

    if (v->running || !v->head)
        return;
    op = v->running = v->head;
    v->head = op->next;
    op->next = NULL;
    if (v->holder)
        vol_read_config(v);
    else
        discover(v);
}

int vol_enqueue(struct engine *e, const struct vol_op *tmpl, struct engine_error *ret_err)
{
    struct volumes *v;
    struct vol_op *op, **pp;
    unsigned mine = 0;
    int r = engine_refuse_unavailable(e, ret_err);

    if (r < 0)
        return r;
    v = vol_get(e);
    if (!v)
        return engine_refuse_oom(ret_err);
    mine = v->running && v->running->uid == tmpl->uid;
    for (op = v->head; op; op = op->next)
        mine += op->uid == tmpl->uid;
    if (mine >= ENGINE_VOLUME_QUEUE_PER_UID || v->queued >= ENGINE_VOLUME_QUEUE_MAX)
        return engine_refuse(ret_err, ENGINE_E_BUSY, -EBUSY,
                             "too many volume calls waiting: try again later", NULL);
    op = malloc(sizeof *op);
    if (!op)
        return engine_refuse_oom(ret_err);
    *op = *tmpl;
    for (pp = &v->head; *pp; pp = &(*pp)->next)
        ;
    *pp = op;
    v->queued++;
    run_next(v);
    return 0;
}

int engine_volume_create(struct engine *e, uid_t uid, const char *name, unsigned size_gb,
                         engine_json_cb cb, void *userdata, struct engine_error *ret_err)
{
    struct vol_op op = {
        .kind = VOL_CREATE, .uid = uid, .size_gb = size_gb, .cb = cb, .userdata = userdata};

    if (!id_is_valid(name) || strlen(name) >= sizeof op.name)
        return engine_refuse(ret_err, ENGINE_E_INVALID, -EINVAL, "invalid volume name", "name");
    if (size_gb < 1 || size_gb > e->cfg->sandbox.max_volume_gb) {
        engine_refuse(ret_err, ENGINE_E_INVALID, -EINVAL,
                      "size_gb is above [sandbox] max_volume_gb", "size_gb");
        ret_err->cap = "max_volume_gb";
        ret_err->limit = e->cfg->sandbox.max_volume_gb;
        return -EINVAL;
    }
    if (e->cfg->sandbox.max_volumes_per_uid == 0)
        return engine_refuse(ret_err, ENGINE_E_QUOTA, -EDQUOT,
                             "volumes are off ([sandbox] max_volumes_per_uid = 0)", NULL);
    snprintf(op.name, sizeof op.name, "%s", name);
    return vol_enqueue(e, &op, ret_err);
}

const struct sandbox *engine_volume_user(struct engine *e, const char *name, uid_t uid)
{
    for (const struct sandbox *sb = e->sandboxes; sb; sb = sb->next) {
        if (sb->state == SANDBOX_GONE)
            continue;
        for (size_t i = 0; i < sb->n_vol_mounts; i++)
            if (strcmp(sb->vol_mounts[i].name, name) == 0 &&
                (i < sb->n_vol_attached || sb->owner_uid == uid))
                return sb;
    }
    return NULL;
}

int engine_volume_delete(struct engine *e, uid_t uid, bool admin, const char *name,
                         engine_json_cb cb, void *userdata, struct engine_error *ret_err)
{
    struct vol_op op = {
        .kind = VOL_DELETE, .uid = uid, .admin = admin, .cb = cb, .userdata = userdata};

    if (!id_is_valid(name) || strlen(name) >= sizeof op.name)
        return engine_refuse(ret_err, ENGINE_E_INVALID, -EINVAL, "invalid volume name", "name");
    if (engine_volume_user(e, name, uid)) {
        engine_refuse(ret_err, ENGINE_E_STATE, -EBUSY,
                      "the volume is attached to a sandbox: destroy it first", NULL);
        ret_err->state = "attached";
        return -EBUSY;
    }
    snprintf(op.name, sizeof op.name, "%s", name);
    return vol_enqueue(e, &op, ret_err);
}

/* A volume's line of container vmid on node moved back to the holder: a detach's (the
 * sandbox goes on) or a destroy's. */
static int take_back(struct engine *e, const char *node, uint32_t vmid,
                     const struct marker_volume *line, bool detach, engine_json_cb cb,
                     void *userdata, struct engine_error *ret_err)
{
    struct vol_op op = {.kind = VOL_TAKE_BACK,
                        .uid = line->owner_uid,
                        .admin = true,
                        .detach = detach,
                        .from = *line,
                        .src = vmid,
                        .cb = cb,
                        .userdata = userdata};

    snprintf(op.name, sizeof op.name, "%s", line->name);
    snprintf(op.src_node, sizeof op.src_node, "%s", node);
    return vol_enqueue(e, &op, ret_err);
}

int engine_volume_detach(struct engine *e, const char *node, uint32_t vmid,
                         const struct marker_volume *line, engine_json_cb cb, void *userdata,
                         struct engine_error *ret_err)
{
    return take_back(e, node, vmid, line, true, cb, userdata, ret_err);
}

int engine_volume_take_back(struct engine *e, const char *node, uint32_t vmid,
                            const struct marker_volume *line, engine_json_cb cb, void *userdata,
                            struct engine_error *ret_err)
{
    return take_back(e, node, vmid, line, false, cb, userdata, ret_err);
}
