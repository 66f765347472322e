/* volume.list: the holder's lines, and for an attached volume (its line's key not a mount
 * point of the holder) the sandbox it is in, found with volume_locate() over the configs of
 * the pool's containers on the holder's node. See volume.h. */
#include "macro.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "marker.h"
#include "pve-parse.h"
#include "pve.h"
#include "sandbox-internal.h"
#include "volume-internal.h"
#include "volume-locate.h"
#include "volume.h"

#define COMP "volume"
/* Containers of the pool looked at for attached volumes. */
#define SCAN_MAX 4096u

struct vol_scan {
    struct marker_volume *mv; /* the lines to show */
    bool *here;               /* ... on the holder (else attached) */
    size_t n;
    uint32_t *vmids; /* the pool's containers on the holder's node, but the holder */
    size_t n_vmids, i;
    struct volume_ct *cts; /* those read */
    json_object **confs;
    size_t n_cts;
};

static void scan_free(struct volumes *v)
{
    struct vol_scan *s = TAKE_PTR(v->scan);

    if (!s)
        return;
    for (size_t i = 0; i < s->n_cts; i++)
        json_object_put(s->confs[i]);
    free(s->mv);
    free(s->here);
    free(s->vmids);
    free(s->cts);
    free(s->confs);
    free(s);
}

/* The sandbox id in the description of vmid's container (NULL: none). */
static json_object *attached_to(const struct vol_scan *s, const struct volume_place *pl,
                                size_t n_pl, const char *name)
{
    struct marker m;

    for (size_t i = 0; s && i < n_pl; i++) {
        if (strcmp(pl[i].v.name, name) != 0 || pl[i].missing)
            continue;
        for (size_t k = 0; k < s->n_cts; k++)
            if (s->cts[k].vmid == pl[i].vmid && marker_parse(s->cts[k].description, &m) == 0)
                return json_object_new_string(m.sandbox);
        return json_object_new_string(""); /* in a container without a marker */
    }
    return NULL;
}

/* The reply: every line to show; an attached one with its sandbox (left out when it is in
 * no container that was read: not, or no longer, anywhere). */
static void reply(struct volumes *v)
{
    struct vol_scan *s = v->scan;
    _cleanup_free_ struct volume_place *pl = NULL;
    _cleanup_json_ json_object *o = json_object_new_object();
    json_object *a = json_object_new_array();
    size_t n_pl = 0;
    uint32_t bad = 0;

    json_object_object_add(o, "volumes", a);
    if (s && volume_locate(s->cts, s->n_cts, &pl, &n_pl, &bad) < 0)
        n_pl = 0;
    for (size_t i = 0; s && i < s->n; i++) {
        json_object *vo, *at = NULL;
        if (!s->here[i]) {
            at = attached_to(s, pl, n_pl, s->mv[i].name);
            if (!at)
                continue;
        }
        vo = vol_json(&s->mv[i]);
        json_object_object_add(vo, "attached_to", at);
        json_object_array_add(a, vo);
    }
    scan_free(v);
    vol_finish(v, NULL, o);
}

static void scan_next(struct volumes *v);

static void on_ct_conf(const struct pve_result *res, void *userdata)
{
    struct volumes *v = userdata;
    struct vol_scan *s = v->scan;
    json_object *d;

    v->call = NULL;
    if (res->error == 0 && res->data && json_object_object_get_ex(res->data, "description", &d)) {
        s->confs[s->n_cts] = json_object_get(res->data);
        s->cts[s->n_cts] = (struct volume_ct){
            .vmid = s->vmids[s->i], .description = json_object_get_string(d), .config = res->data};
        s->n_cts++;
    } /* else: gone meanwhile, or not readable: none of its volumes is shown */
    s->i++;
    scan_next(v);
}

static void scan_next(struct volumes *v)
{
    struct vol_scan *s = v->scan;
    int r;

    if (s->i >= s->n_vmids) {
        reply(v);
        return;
    }
    r = pve_config_get(v->e->pve, v->node, s->vmids[s->i], false, ENGINE_VOLUME_TIMEOUT_MS,
                       on_ct_conf, v, &v->call);
    if (r < 0) {
        scan_free(v);
        vol_fail(v, ENGINE_E_INTERNAL, r, "cannot read a container's configuration", NULL);
    }
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

    return x < y ? -1 : x > y;
}

static void on_members(const struct pve_result *res, void *userdata)
{
    struct volumes *v = userdata;
    struct vol_scan *s = v->scan;

    v->call = NULL;
    if (res->error < 0) {
        scan_free(v);
        vol_fail_pve(v, res);
        return;
    }
    s->vmids = calloc(SCAN_MAX, sizeof *s->vmids);
    for (size_t i = 0; s->vmids && res->vms && i < res->vms->n && s->n_vmids < SCAN_MAX; i++) {
        const struct pve_vm *vm = &res->vms->v[i];

        if (vm->template || vm->vmid == v->holder || (vm->type && strcmp(vm->type, "lxc") != 0) ||
            (vm->node && strcmp(vm->node, v->node) != 0))
            continue;
        s->vmids[s->n_vmids++] = vm->vmid;
    }
    s->cts = calloc(s->n_vmids + 1, sizeof *s->cts);
    s->confs = calloc(s->n_vmids + 1, sizeof *s->confs);
    if (!s->vmids || !s->cts || !s->confs) {
        scan_free(v);
        vol_fail(v, ENGINE_E_INTERNAL, -ENOMEM, "out of memory", NULL);
        return;
    }
    qsort(s->vmids, s->n_vmids, sizeof *s->vmids, cmp_u32);
    scan_next(v);
}

/* The holder's lines to show are known (conf: the holder's when some are attached). */
static void list_act(struct volumes *v, const struct marker_volume *mv, size_t n, json_object *conf)
{
    struct vol_scan *s = calloc(1, sizeof *s);
    int r;

    scan_free(v);
    v->scan = s;
    if (s && n > 0) {
        s->mv = calloc(n, sizeof *s->mv);
        s->here = calloc(n, sizeof *s->here);
    }
    if (!s || (n > 0 && (!s->mv || !s->here))) {
        scan_free(v);
        vol_fail(v, ENGINE_E_INTERNAL, -ENOMEM, "out of memory", NULL);
        return;
    }
    s->n = n;
    for (size_t i = 0; i < n; i++) {
        s->mv[i] = mv[i];
        s->here[i] = !conf || volume_config_has_mp(conf, mv[i].mp);
    }
    if (!conf) {
        reply(v);
        return;
    }
    r = pve_pool_members(v->e->pve, v->e->cfg->proxmox.pool, ENGINE_VOLUME_TIMEOUT_MS, on_members,
                         v, &v->call);
    if (r < 0) {
        scan_free(v);
        vol_fail(v, ENGINE_E_INTERNAL, r, "cannot list the pool", NULL);
    }
}

int engine_volume_list(struct engine *e, uid_t uid, bool admin, engine_json_cb cb, void *userdata,
                       struct engine_error *ret_err)
{
    struct vol_op op = {
        .kind = VOL_LIST, .uid = uid, .admin = admin, .cb = cb, .userdata = userdata};
    struct volumes *v = vol_get(e);

    if (!v)
        return engine_refuse_oom(ret_err);
    v->list_act = list_act;
    v->list_free = scan_free;
    return vol_enqueue(e, &op, ret_err);
}
