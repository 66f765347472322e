/* Templates made from sandboxes: the table, what template.list shows, who may use one,
 * template.delete and template.publish, and their recovery from their Proxmox markers. See
 * template-api.h. */
#include "macro.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hostkey.h"
#include "log.h"
#include "marker.h"
#include "pve.h"
#include "registry.h"
#include "sandbox-internal.h"
#include "audit.h"
#include "template-api.h"
#include "template-internal.h"
#include "testhook.h"

#define COMP "template"
/* A runtime template younger than this is never forgotten for missing from a pool listing. */
#define RT_PRUNE_AFTER_S 300

struct engine_template *engine_rt_find(struct engine *e, const char *name)
{
    for (size_t i = 0; name && i < e->n_rt; i++)
        if (strcmp(e->rt[i]->name, name) == 0)
            return e->rt[i];
    return NULL;
}

/* Any template named name, configured or not (engine_template_find() without the default). */
static struct engine_template *find_any(struct engine *e, const char *name)
{
    for (size_t i = 0; name && i < e->n_templates; i++)
        if (strcmp(e->templates[i].name, name) == 0)
            return &e->templates[i];
    return engine_rt_find(e, name);
}

static void rt_free_one(struct engine_template *t)
{
    if (t) {
        free(t->pins);
        free(t->copies);
        free(t->check_error);
        json_object_put(t->defaults);
        free(t);
    }
}

void engine_rt_free(struct engine *e)
{
    for (size_t i = 0; i < e->n_rt; i++)
        rt_free_one(e->rt[i]);
    free(e->rt);
    e->rt = NULL;
    e->n_rt = 0;
}

static void rt_remove(struct engine *e, struct engine_template *t)
{
    for (size_t i = 0; i < e->n_rt; i++)
        if (e->rt[i] == t) {
            memmove(&e->rt[i], &e->rt[i + 1], (e->n_rt - i - 1) * sizeof *e->rt);
            e->n_rt--;
            rt_free_one(t);
            return;
        }
}

int engine_rt_add(struct engine *e, const struct engine_template *t)
{
    _cleanup_free_ struct engine_template *n = NULL;
    struct engine_template **v;
    char pin[HOSTKEY_PIN_MAX];

    if (find_any(e, t->name))
        return -EEXIST;
    n = malloc(sizeof *n);
    if (!n)
        return -ENOMEM;
    *n = *t;
    n->runtime = true;
    n->copies = NULL;
    n->n_copies = 0;
    n->check_state = 1; /* a sandbox of this daemon's: its checks were passed */
    n->check_error = NULL;
    n->deleting = false;
    n->filling = 0;
    n->hits = n->misses = 0;
    n->defaults = NULL;
    if (n->hostkey_hex[0] && hostkey_hex_to_pin(n->hostkey_hex, pin) >= 0)
        n->pins = strdup(pin);
    else if (t->pins) /* made without a key of its own: its own template's pins */
        n->pins = strdup(t->pins);
    else /* ... found again after a restart: the default template's */
        n->pins = strdup(e->n_templates ? e->templates[0].pins : "");
    if (!n->pins)
        return -ENOMEM;
    v = realloc(e->rt, (e->n_rt + 1) * sizeof *v);
    if (!v) {
        free(n->pins);
        return -ENOMEM;
    }
    e->rt = v;
    n->defaults = json_object_get(t->defaults);
    e->rt[e->n_rt++] = TAKE_PTR(n);
    return 0;
}

bool engine_template_visible(const struct engine_template *t, uid_t uid, bool admin)
{
    return !t->runtime || t->published || admin || t->owner_uid == uid;
}

bool engine_template_usable(struct engine *e, const char *name, uid_t uid, bool admin)
{
    struct engine_template *t = find_any(e, name);

    return !t || engine_template_visible(t, uid, admin);
}

/* Sandboxes (counted apart: pool members, and those of them READY) made from t. */
static void used_by(struct engine *e, const struct engine_template *t, unsigned *ret_sandboxes,
                    unsigned *ret_pool, unsigned *ret_pool_ready)
{
    const char *def = e->n_templates ? e->templates[0].name : "";
    unsigned ready = 0;

    *ret_sandboxes = *ret_pool = 0;
    for (struct sandbox *sb = e->sandboxes; sb; sb = sb->next) {
        const char *n = sb->template[0] ? sb->template : def;

        if (sb->state == SANDBOX_GONE || strcmp(n, t->name) != 0)
            continue;
        if (sb->pool_member) {
            (*ret_pool)++;
            ready += sb->state == SANDBOX_READY;
        } else
            (*ret_sandboxes)++;
    }
    if (ret_pool_ready)
        *ret_pool_ready = ready;
}

static json_object *template_json(struct engine *e, const struct engine_template *t)
{
    json_object *o = json_object_new_object(), *origin, *u, *nodes;
    unsigned ns, np, nr;
    const char *node = t->home[0] ? t->home : NULL;

    if (!node && t->n_copies > 0)
        node = t->copies[0].node;
    json_object_object_add(o, "name", json_object_new_string(t->name));
    json_object_object_add(o, "node", node ? json_object_new_string(node) : NULL);
    json_object_object_add(o, "vmid", json_object_new_int64(t->vmid));
    json_object_object_add(o, "disk_gb",
                           t->disk_gb ? json_object_new_int64((int64_t)t->disk_gb) : NULL);
    if (t->n_copies > 0) {
        nodes = json_object_new_array();
        for (size_t i = 0; i < t->n_copies; i++) {
            json_object *c = json_object_new_object();

            json_object_object_add(c, "node", json_object_new_string(t->copies[i].node));
            json_object_object_add(c, "vmid", json_object_new_int64(t->copies[i].vmid));
            json_object_array_add(nodes, c);
        }
        json_object_object_add(o, "copies", nodes);
    }
    if (!t->runtime && t->replicas > 0) {
        nodes = json_object_new_array();
        for (size_t i = 0; i < e->n_repl; i++) {
            json_object *c;

            if (strcmp(e->repl[i].name, t->name) != 0 || e->repl[i].retiring)
                continue;
            c = json_object_new_object();
            json_object_object_add(c, "node", json_object_new_string(e->repl[i].node));
            json_object_object_add(c, "vmid", json_object_new_int64(e->repl[i].vmid));
            json_object_array_add(nodes, c);
        }
        json_object_object_add(o, "replicas", nodes);
    }
    if (t->runtime) {
        origin = json_object_new_object();
        json_object_object_add(origin, "sandbox", json_object_new_string(t->origin));
        json_object_object_add(origin, "uid", json_object_new_int64(t->owner_uid));
        json_object_object_add(origin, "created_at", json_object_new_int64(t->created_at));
        json_object_object_add(o, "origin", origin);
        json_object_object_add(o, "owner_uid", json_object_new_int64(t->owner_uid));
        json_object_object_add(o, "published", json_object_new_boolean(t->published));
    } else {
        json_object_object_add(o, "origin", json_object_new_string("config"));
        json_object_object_add(o, "owner_uid", NULL);
        json_object_object_add(o, "published", json_object_new_boolean(true));
    }
    json_object_object_add(o, "defaults",
                           t->defaults ? json_object_get(t->defaults) : json_object_new_object());
    used_by(e, t, &ns, &np, &nr);
    u = json_object_new_object();
    json_object_object_add(u, "sandboxes", json_object_new_int64(ns));
    json_object_object_add(u, "pool", json_object_new_int64(np));
    json_object_object_add(u, "pool_ready", json_object_new_int64(nr));
    json_object_object_add(o, "used_by", u);
    return o;
}

json_object *engine_templates_json(struct engine *e, uid_t uid, bool admin)
{
    json_object *o = json_object_new_object(), *a = json_object_new_array();

    for (size_t i = 0; e && i < e->n_templates; i++)
        json_object_array_add(a, template_json(e, &e->templates[i]));
    for (size_t i = 0; e && i < e->n_rt; i++)
        if (engine_template_visible(e->rt[i], uid, admin))
            json_object_array_add(a, template_json(e, e->rt[i]));
    json_object_object_add(o, "templates", a);
    return o;
}

json_object *engine_template_json(struct engine *e, const char *name)
{
    struct engine_template *t = find_any(e, name);

    return t ? template_json(e, t) : NULL;
}

void engine_audit_template(struct engine *e, const char *event, const struct engine_template *t,
                           int64_t caller_uid)
{
    struct audit_record rec = {.event = event,
                               .priority = LOG_INFO,
                               .sandbox = t->origin,
                               .vmid = t->vmid,
                               .node = t->home,
                               .caller_uid = caller_uid,
                               .owner_uid = t->owner_uid};

    (void)e;
    audit_emit(&rec, "%s: template '%s' (container %u on %s, owner uid %u)", event, t->name,
               t->vmid, t->home, (unsigned)t->owner_uid);
}

/* ---- the marker of a template made from a sandbox ---- */

int engine_rt_marker(struct engine *e, const struct engine_template *t, char **ret_description)
{
    struct marker m = {
        .owner_uid = t->owner_uid,
        .created = t->created_at,
        .is_template = true,
        .published = t->published,
    };

    snprintf(m.instance, sizeof m.instance, "%s", registry_instance_id(e->reg));
    snprintf(m.sandbox, sizeof m.sandbox, "%s", t->origin);
    snprintf(m.template, sizeof m.template, "%s", t->name);
    memcpy(m.hostkey, t->hostkey_hex, sizeof m.hostkey);
    return engine_rt_description(&m, t->defaults, ret_description);
}

/* ---- recovery: a marked template the reconcile found in the pool ---- */

static int rt_adopt(struct engine *e, const struct marker *m, uint32_t vmid, const char *node,
                    const char *description, unsigned disk_gb)
{
    _cleanup_json_ json_object *defaults = NULL;
    struct engine_template t = {.vmid = vmid,
                                .owner_uid = m->owner_uid,
                                .created_at = m->created,
                                .published = m->published,
                                .disk_gb = disk_gb};
    int r;

    if (find_any(e, m->template))
        return 0; /* known (or a configured name took it since: never cloned from here) */
    snprintf(t.name, sizeof t.name, "%s", m->template);
    snprintf(t.origin, sizeof t.origin, "%s", m->sandbox);
    snprintf(t.home, sizeof t.home, "%s", node);
    memcpy(t.hostkey_hex, m->hostkey, sizeof t.hostkey_hex);
    r = engine_rt_defaults_parse(description, m->sandbox, &defaults);
    if (r < 0) /* the template stays usable; what its sandboxes run is given in full */
        log_warning(COMP, "template '%s' (container %u): its defaults do not parse: ignored",
                    t.name, vmid);
    t.defaults = defaults;
    r = engine_rt_add(e, &t);
    if (r >= 0)
        log_info(COMP, "template '%s' (container %u on %s) found in Proxmox", t.name, vmid, node);
    return r;
}

int engine_rt_adopt_config(struct engine *e, uint32_t vmid, const char *node, json_object *conf)
{
    const char *desc;
    json_object *v;
    struct marker m;
    int r;

    if (!conf || !json_object_object_get_ex(conf, "description", &v) ||
        !json_object_is_type(v, json_type_string))
        return 0;
    desc = json_object_get_string(v);
    r = marker_parse(desc, &m);
    if (r < 0 || !m.is_template || strcmp(m.instance, registry_instance_id(e->reg)) != 0)
        return 0; /* an operator's template, or another daemon's: not ours */
    if (!json_object_object_get_ex(conf, "template", &v) || json_object_get_int(v) != 1)
        return 0;
    if (m.replica) /* a configured template's replica: replica.c's */
        return 0;
    if (!json_object_object_get_ex(conf, "rootfs", &v) || !json_object_is_type(v, json_type_string))
        v = NULL;
    return rt_adopt(
        e, &m, vmid, node, desc,
        pve_rootfs_size_gb(v ? json_object_get_string(v) : NULL, e->cfg->sandbox.default_disk_gb));
}

void engine_rt_prune(struct engine *e, const struct pve_vm_list *members)
{
    for (size_t i = 0; members && i < e->n_rt;) {
        struct engine_template *t = e->rt[i];

        /* one made after the listing was read is not in it yet */
        if (t->deleting || pve_vm_list_find(members, t->vmid) ||
            (int64_t)time(NULL) - t->created_at < RT_PRUNE_AFTER_S) {
            i++;
            continue;
        }
        log_info(COMP, "template '%s' (container %u) is no longer in the pool: forgotten", t->name,
                 t->vmid);
        rt_remove(e, t);
    }
}

/* ---- template.delete and template.publish ---- */

struct rt_call {
    struct engine *e;
    char name[ID_MAX + 1];
    engine_json_cb cb;
    void *userdata;
};

static struct rt_call *rt_call_new(struct engine *e, const char *name, engine_json_cb cb,
                                   void *userdata)
{
    struct rt_call *c = calloc(1, sizeof *c);

    if (c) {
        *c = (struct rt_call){.e = e, .cb = cb, .userdata = userdata};
        snprintf(c->name, sizeof c->name, "%s", name);
    }
    return c;
}

/* The runtime template name that uid may act on: 0, or the refusal. */
static int rt_lookup(struct engine *e, const char *name, uid_t uid, bool admin,
                     struct engine_template **ret, struct engine_error *ret_err)
{
    struct engine_template *t = find_any(e, name);

    if (engine_refuse_unavailable(e, ret_err) < 0)
        return ret_err->error;
    if (!t || !engine_template_visible(t, uid, admin))
        return engine_refuse(ret_err, ENGINE_E_INVALID, -ENOENT, "no such template", "name");
    if (!t->runtime)
        return engine_refuse(ret_err, ENGINE_E_INVALID, -EINVAL,
                             "a configured template ([templates]) is not deleted through the API",
                             "name");
    if (!admin && t->owner_uid != uid)
        return engine_refuse(ret_err, ENGINE_E_INVALID, -EPERM,
                             "only the template's owner or an admin may do this", "name");
    if (t->deleting)
        return engine_refuse(ret_err, ENGINE_E_BUSY, -EBUSY, "the template is being deleted", NULL);
    *ret = t;
    return 0;
}

static void on_deleted(const struct pve_result *res, void *userdata)
{
    struct rt_call *c = userdata;
    struct engine *e = c->e;
    struct engine_template *t = engine_rt_find(e, c->name);
    struct engine_error err;

    if (res->error < 0 &&
        !(res->error == -EREMOTEIO && res->perr && res->perr->kind == PVE_ERR_NOT_FOUND)) {
        error_from_pve(res, e->closing, &err);
        if (t)
            t->deleting = false;
        log_info(COMP, "template '%s': delete failed: %s", c->name, strna(err.message));
        c->cb(&err, NULL, c->userdata);
    } else {
        _cleanup_json_ json_object *o = json_object_new_object();

        test_crash_point("template-delete-deleted");
        if (t) {
            engine_audit_template(e, "template.delete", t, t->owner_uid);
            rt_remove(e, t);
        }
        log_info(COMP, "template '%s' deleted", c->name);
        json_object_object_add(o, "name", json_object_new_string(c->name));
        json_object_object_add(o, "deleted", json_object_new_boolean(true));
        c->cb(NULL, o, c->userdata);
    }
    free(c);
}

int engine_template_delete(struct engine *e, const char *name, uid_t uid, bool admin,
                           engine_json_cb cb, void *userdata, struct engine_error *ret_err)
{
    struct engine_template *t;
    struct rt_call *c;
    unsigned ns, np;
    int r = rt_lookup(e, name, uid, admin, &t, ret_err);

    if (r < 0)
        return r;
    used_by(e, t, &ns, &np, NULL);
    if (ns + np > 0) /* template.list's used_by counts them */
        return engine_refuse(ret_err, ENGINE_E_STATE, -EBUSY,
                             "the template is in use by sandboxes or warm pool members made from "
                             "it: destroy them (and set [pool] warm.NAME = 0) first",
                             NULL);
    c = rt_call_new(e, name, cb, userdata);
    if (!c)
        return engine_refuse_oom(ret_err);
    r = pve_delete(e->pve, t->home, t->vmid, PVE_DELETE_PURGE, ENGINE_TEMPLATE_TIMEOUT_MS,
                   on_deleted, c, NULL);
    if (r < 0) {
        free(c);
        return engine_refuse(ret_err, ENGINE_E_INTERNAL, r, "cannot start the Proxmox delete",
                             NULL);
    }
    test_crash_point("template-delete-sent");
    t->deleting = true;
    log_info(COMP, "template '%s': deleting container %u on %s", name, t->vmid, t->home);
    return 0;
}

static void on_published(const struct pve_result *res, void *userdata)
{
    struct rt_call *c = userdata;
    struct engine *e = c->e;
    struct engine_template *t = engine_rt_find(e, c->name);
    struct engine_error err;

    if (res->error < 0 || !t) {
        error_from_pve(res, e->closing, &err);
        if (!t)
            err = (struct engine_error){.kind = ENGINE_E_INVALID,
                                        .error = -ENOENT,
                                        .message = "no such template",
                                        .param = "name"};
        c->cb(&err, NULL, c->userdata);
    } else {
        _cleanup_json_ json_object *o = json_object_new_object();

        t->published = true;
        engine_audit_template(e, "template.publish", t, t->owner_uid);
        json_object_object_add(o, "template", template_json(e, t));
        c->cb(NULL, o, c->userdata);
    }
    free(c);
}

int engine_template_publish(struct engine *e, const char *name, engine_json_cb cb, void *userdata,
                            struct engine_error *ret_err)
{
    _cleanup_json_ json_object *p = NULL;
    _cleanup_free_ char *desc = NULL;
    struct engine_template *t, copy;
    struct rt_call *c;
    int r = rt_lookup(e, name, 0, true, &t, ret_err);

    if (r < 0)
        return r;
    copy = *t;
    copy.published = true;
    r = engine_rt_marker(e, &copy, &desc);
    if (r < 0)
        return engine_refuse(ret_err, ENGINE_E_INTERNAL, r, "cannot write the marker", NULL);
    p = json_object_new_object();
    json_object_object_add(p, "description", json_object_new_string(desc));
    c = rt_call_new(e, name, cb, userdata);
    if (!c)
        return engine_refuse_oom(ret_err);
    r = pve_config_put(e->pve, t->home, t->vmid, p, ENGINE_TEMPLATE_TIMEOUT_MS, on_published, c,
                       NULL);
    if (r < 0) {
        free(c);
        return engine_refuse(ret_err, ENGINE_E_INTERNAL, r, "cannot start the Proxmox call", NULL);
    }
    return 0;
}
