/* Replicas of configured templates ([templates] NAME.replicas = N): Proxmox locks a template
 * for the whole clone task, so the daemon keeps N copies of the template on each node holding
 * it, and a clone takes whichever copy is free (engine_template_vmids()).
 *
 * A replica is built in the background, one at a time, on the operation driver (op-step.h),
 * only while no create a caller waits for clones from the template (its clone also waits
 * behind every create in the template's clone queue): a full clone of the template carrying
 * a replica marker (tmpl=1 repl=1, marker.h), converted into a template, polled until
 * Proxmox says template: 1. Recovery needs no record: the reconcile adopts every converted
 * replica from its marker (engine_replica_adopt()), and destroys a marked clone that is not a
 * template yet and is no build of this process (an interrupted build), so a restart after
 * kill -9, with or without the state folder, neither loses nor duplicates one.
 *
 * Replicas past N (a lower N, or a template no longer configured, after a restart) take no
 * new clone and are deleted once no sandbox of that template is left (their linked clones
 * depend on them). */
#include "macro.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "log.h"
#include "marker.h"
#include "op-step.h"
#include "pve-parse.h"
#include "pve.h"
#include "registry.h"
#include "sandbox-internal.h"
#include "template-api.h"
#include "template-internal.h"

#define COMP "replica"
#define REPLICA_CHECK_MS 10000u          /* the periodic look at what is missing or extra */
#define REPLICA_RETRY_MS 30000u          /* after a failed build */
#define REPLICA_BUILD_MS (3600u * 1000u) /* a build's deadline (a full clone copies a disk) */
#define REPLICA_WAIT_MS 1000u /* a build waiting for the creates cloning from its template */
#define REPLICA_SANDBOX_ID "replica"
/* The marker's sandbox= of a replica: the configured vmid it copies (its origin), so that a
 * template given another vmid at a restart does not keep the old one's replicas. */
#define REPLICA_MARKER_FMT "replica-of-%" PRIu32
#define REPLICA_MARKER_SCAN "replica-of-%" SCNu32
/* A replica younger than this is never forgotten for missing from a pool listing (the
 * listing may predate it). */
#define REPLICA_PRUNE_AFTER_S 300

struct replicas {
    struct engine *e;
    uv_timer_t timer;
    struct repl_build *build; /* the one build running, or NULL */
    uint64_t retry_at_ms;
    bool deleting; /* one delete of an extra replica in flight */
};

/* A build: the operation driver's subject is a sandbox of its own, never in the engine's
 * table (the driver uses its engine, id, timer, call and operation only). */
struct repl_build {
    struct sandbox sb;
    char name[ID_MAX + 1];
    char node[CONFIG_NODE_NAME_MAX + 1];
    uint32_t vmid;   /* the clone's, once known */
    uint32_t origin; /* the configured vmid it copies */
    bool counted;    /* one of engine_close()'s pending handles */
};

static void on_timer(uv_timer_t *timer);

static struct repl_build *build_of(struct sandbox *sb)
{
    return container_of(sb, struct repl_build, sb);
}

/* ---- the table (in struct engine, read by engine_template_vmids()) ---- */

static int table_add(struct engine *e, const char *name, const char *node, uint32_t vmid,
                     uint32_t origin)
{
    struct engine_replica *v;

    for (size_t i = 0; i < e->n_repl; i++)
        if (e->repl[i].vmid == vmid)
            return 0;
    v = realloc(e->repl, (e->n_repl + 1) * sizeof *v);
    if (!v)
        return -ENOMEM;
    e->repl = v;
    v[e->n_repl] =
        (struct engine_replica){.vmid = vmid, .origin = origin, .known_since = time(NULL)};
    snprintf(v[e->n_repl].name, sizeof v->name, "%s", name);
    snprintf(v[e->n_repl].node, sizeof v->node, "%s", node);
    e->n_repl++;
    return 0;
}

static void table_remove(struct engine *e, uint32_t vmid)
{
    for (size_t i = 0; i < e->n_repl; i++)
        if (e->repl[i].vmid == vmid) {
            memmove(&e->repl[i], &e->repl[i + 1], (e->n_repl - i - 1) * sizeof *e->repl);
            e->n_repl--;
            return;
        }
}

static const struct engine_template *configured(struct engine *e, const char *name)
{
    for (size_t i = 0; i < e->n_templates; i++)
        if (strcmp(e->templates[i].name, name) == 0)
            return &e->templates[i];
    return NULL;
}

/* The template's configured vmid on node (the first of its copies there): what its replicas
 * there copy. */
static uint32_t origin_of(struct engine *e, const struct engine_template *t, const char *node)
{
    uint32_t src[PVE_CLONE_SOURCES_MAX];

    return engine_template_vmids(e, t, node, src, ELEMENTSOF(src)) > 0 ? src[0] : 0;
}

/* Marks the replicas past each template's N on each node (and those of a template no longer
 * configured, or of another vmid than the template's now) as retiring: they take no new
 * clone. */
static void table_retire(struct engine *e)
{
    for (size_t i = 0; i < e->n_repl; i++) {
        struct engine_replica *r = &e->repl[i];
        const struct engine_template *t = configured(e, r->name);
        unsigned before = 0;

        for (size_t j = 0; j < i; j++)
            before += strcmp(e->repl[j].name, r->name) == 0 &&
                      strcmp(e->repl[j].node, r->node) == 0 && !e->repl[j].retiring;
        if (r->retiring)
            continue;
        if (!t || before >= t->replicas || r->origin != origin_of(e, t, r->node)) {
            r->retiring = true;
            log_info(COMP, "replica %u of template '%s' on %s is past %s: retiring", r->vmid,
                     r->name, r->node,
                     !t                      ? "the configuration"
                     : before >= t->replicas ? "its replicas"
                                             : "its template's vmid");
        }
    }
}

static unsigned count_live(struct engine *e, const char *name, const char *node)
{
    unsigned n = 0;

    for (size_t i = 0; i < e->n_repl; i++)
        n += strcmp(e->repl[i].name, name) == 0 && strcmp(e->repl[i].node, node) == 0 &&
             !e->repl[i].retiring;
    return n;
}

/* ---- the build's steps ---- */

static void on_cloned(const struct pve_result *res, void *userdata)
{
    struct sandbox *sb = userdata;
    struct repl_build *b = build_of(sb);

    if (res->vmid) /* a failed clone may have made its container: deleted by the fail hook */
        b->vmid = res->vmid;
    op_step_pve(res, userdata);
}

static int start_clone(struct sandbox *sb, uint64_t timeout_ms, const char **ret_fail)
{
    struct repl_build *b = build_of(sb);
    struct engine *e = sb->engine;
    const struct engine_template *t = configured(e, b->name);
    uint32_t src[PVE_CLONE_SOURCES_MAX];
    char line[MARKER_LINE_MAX];
    struct marker m = {.created = time(NULL), .is_template = true, .replica = true};
    size_t n;

    if (!t)
        return -ENOENT;
    n = engine_template_vmids(e, t, b->node, src, ELEMENTSOF(src));
    snprintf(m.instance, sizeof m.instance, "%s", registry_instance_id(e->reg));
    b->origin = src[0];
    snprintf(m.sandbox, sizeof m.sandbox, REPLICA_MARKER_FMT, b->origin);
    snprintf(m.template, sizeof m.template, "%s", b->name);
    if (marker_format(&m, line, sizeof line) < 0) {
        *ret_fail = "cannot build the replica's marker";
        return -EINVAL;
    }
    struct pve_clone_params cp = {
        .node = b->node,
        .template_vmid = src[0],
        .copies = src + 1,
        .n_copies = n - 1,
        .urgent = false, /* every create waiting for a copy goes first */
        .description = line,
        .pool = e->cfg->proxmox.pool,
        .full = 1, /* its own disk: independent of the template it copies */
        .storage = e->cfg->proxmox.storage,
    };
    return pve_clone(e->pve, &cp, timeout_ms, on_cloned, sb, &sb->call);
}

static int start_convert(struct sandbox *sb, uint64_t timeout_ms, const char **ret_fail)
{
    struct repl_build *b = build_of(sb);

    return pve_template(sb->engine->pve, b->node, b->vmid, timeout_ms, op_step_pve, sb, &sb->call);
}

static int start_wait(struct sandbox *sb, uint64_t timeout_ms, const char **ret_fail)
{
    struct repl_build *b = build_of(sb);

    return pve_status_current(sb->engine->pve, b->node, b->vmid, timeout_ms,
                              engine_template_on_convert_status, sb, &sb->call);
}

static const struct op_step build_steps[] = {
    {.what = "cloning the template",
     .start = start_clone,
     .cap_ms = OP_STEP_OP_DEADLINE,
     .fail = "cannot start the clone",
     .crash_done = "replica-cloned"},
    {.what = "converting the clone",
     .start = start_convert,
     .cap_ms = OP_STEP_OP_DEADLINE,
     .fail = "cannot start the Proxmox conversion",
     .crash_sent = "replica-convert-sent"},
    {.what = "waiting for the conversion",
     .start = start_wait,
     .cap_ms = OP_STEP_OP_DEADLINE,
     .fail = "cannot read the clone's status",
     .crash_done = "replica-converted"},
};

static void build_closed(uv_handle_t *h)
{
    struct repl_build *b = build_of(h->data);
    struct engine *e = b->sb.engine;
    bool counted = b->counted;

    free(b);
    if (counted)
        engine_handle_closed(e);
}

static void build_end(struct repl_build *b)
{
    struct engine *e = b->sb.engine;

    if (e->replicas && e->replicas->build == b)
        e->replicas->build = NULL;
    if (e->closing) { /* the engine is freed once the handle is closed */
        b->counted = true;
        e->close_pending++;
    }
    uv_close((uv_handle_t *)&b->sb.timer, build_closed);
    if (e->replicas && !e->closing)
        uv_timer_start(&e->replicas->timer, on_timer, 0, 0);
}

static void on_orphan_deleted(const struct pve_result *res, void *userdata)
{
    (void)userdata;
    if (res->error < 0)
        log_warning(COMP,
                    "a failed replica build's container: not deleted (%s); the reconcile "
                    "reaps it",
                    res->perr ? res->perr->message : strerror(-res->error));
}

static void build_failed(struct sandbox *sb, const struct engine_error *err)
{
    struct repl_build *b = build_of(sb);
    struct engine *e = sb->engine;

    if (!e->closing) {
        engine_noticef(e, LOG_WARNING, "replica of template '%s' on %s: %s", b->name, b->node,
                       strna(err->message));
        if (b->vmid && pve_delete(e->pve, b->node, b->vmid, PVE_DELETE_PURGE,
                                  ENGINE_TEMPLATE_TIMEOUT_MS, on_orphan_deleted, NULL, NULL) < 0)
            log_warning(COMP, "container %u: cannot start its delete", b->vmid);
        if (e->replicas)
            e->replicas->retry_at_ms = uv_now(e->loop) + REPLICA_RETRY_MS;
    }
    build_end(b);
}

static void build_done(struct sandbox *sb)
{
    struct repl_build *b = build_of(sb);
    struct engine *e = sb->engine;

    if (table_add(e, b->name, b->node, b->vmid, b->origin) >= 0)
        log_info(COMP, "template '%s': replica %u on %s made", b->name, b->vmid, b->node);
    build_end(b);
}

static const struct op_kind build_kind = {
    .name = "replica",
    .steps = build_steps,
    .n_steps = ELEMENTSOF(build_steps),
    .fail = build_failed,
    .done = build_done,
};

static int build_start(struct replicas *rs, const struct engine_template *t, const char *node)
{
    struct engine *e = rs->e;
    struct repl_build *b = calloc(1, sizeof *b);

    if (!b)
        return -ENOMEM;
    b->sb.engine = e;
    snprintf(b->sb.id, sizeof b->sb.id, "%s-%s", REPLICA_SANDBOX_ID, t->name);
    snprintf(b->name, sizeof b->name, "%s", t->name);
    snprintf(b->node, sizeof b->node, "%s", node);
    uv_timer_init(e->loop, &b->sb.timer);
    b->sb.timer.data = &b->sb;
    rs->build = b;
    log_info(COMP, "template '%s': making a replica on %s", t->name, node);
    op_step_run(&b->sb, &build_kind, REPLICA_BUILD_MS);
    return 0;
}

/* ---- extras: deleted once nothing depends on them ---- */

/* True while a sandbox (a warm pool member too) of the template named name lives: it may be
 * a linked clone of the replica. */
static bool in_use(struct engine *e, const char *name)
{
    const char *def = e->n_templates ? e->templates[0].name : "";

    for (struct sandbox *sb = e->sandboxes; sb; sb = sb->next)
        if (sb->state != SANDBOX_GONE && strcmp(sb->template[0] ? sb->template : def, name) == 0)
            return true;
    return false;
}

static void on_extra_deleted(const struct pve_result *res, void *userdata)
{
    struct engine *e = userdata;
    uint32_t vmid = res->vmid;

    if (!e->replicas)
        return;
    e->replicas->deleting = false;
    for (size_t i = 0; i < e->n_repl; i++)
        if (e->repl[i].deleting) {
            vmid = e->repl[i].vmid;
            if (res->error < 0 && res->error != -ENOENT) {
                e->repl[i].deleting = false;
                log_warning(COMP, "replica %u: not deleted (%s)", vmid,
                            res->perr ? res->perr->message : strerror(-res->error));
                e->replicas->retry_at_ms = uv_now(e->loop) + REPLICA_RETRY_MS;
            } else {
                log_info(COMP, "replica %u of template '%s' deleted", vmid, e->repl[i].name);
                table_remove(e, vmid);
            }
            break;
        }
    uv_timer_start(&e->replicas->timer, on_timer, 0, 0);
}

/* Deletes one retiring replica nothing depends on; true when a delete started. */
static bool delete_extra(struct replicas *rs)
{
    struct engine *e = rs->e;

    for (size_t i = 0; i < e->n_repl; i++) {
        struct engine_replica *r = &e->repl[i];

        if (!r->retiring || in_use(e, r->name))
            continue;
        if (pve_delete(e->pve, r->node, r->vmid, PVE_DELETE_PURGE, ENGINE_TEMPLATE_TIMEOUT_MS,
                       on_extra_deleted, e, NULL) < 0)
            return false;
        r->deleting = true;
        rs->deleting = true;
        log_info(COMP, "replica %u of template '%s' on %s: deleting", r->vmid, r->name, r->node);
        return true;
    }
    return false;
}

/* ---- the periodic look ---- */

/* True while a create a caller waits for clones (or is about to clone) from t: a build would
 * hold one of t's copies for a whole clone, so it waits until none does. */
static bool creates_cloning(struct engine *e, const struct engine_template *t)
{
    const char *def = e->n_templates ? e->templates[0].name : "";

    for (struct sandbox *sb = e->sandboxes; sb; sb = sb->next)
        if (!sb->pool_member && (sb->state == SANDBOX_PENDING || sb->state == SANDBOX_CLONING) &&
            strcmp(sb->template[0] ? sb->template : def, t->name) == 0)
            return true;
    return false;
}

static void on_timer(uv_timer_t *timer)
{
    struct replicas *rs = timer->data;
    struct engine *e = rs->e;

    uv_timer_start(&rs->timer, on_timer, REPLICA_CHECK_MS, 0);
    if (e->closing || rs->build || rs->deleting)
        return;
    table_retire(e);
    if (delete_extra(rs) || uv_now(e->loop) < rs->retry_at_ms)
        return;
    for (size_t i = 0; i < e->n_templates; i++) {
        const struct engine_template *t = &e->templates[i];
        const char *nodes[CONFIG_NODES_MAX];
        size_t n;

        if (t->replicas == 0 || t->check_state == 0)
            continue;
        n = cluster_nodes_of(e, t, nodes, ELEMENTSOF(nodes));
        for (size_t j = 0; j < n; j++)
            if (count_live(e, t->name, nodes[j]) < t->replicas) {
                if (creates_cloning(e, t)) { /* look again soon */
                    uv_timer_start(&rs->timer, on_timer, REPLICA_WAIT_MS, 0);
                    return;
                }
                if (build_start(rs, t, nodes[j]) < 0)
                    rs->retry_at_ms = uv_now(e->loop) + REPLICA_RETRY_MS;
                return;
            }
    }
}

static void replicas_closed(uv_handle_t *h)
{
    struct replicas *rs = h->data;
    struct engine *e = rs->e;

    free(rs);
    engine_handle_closed(e);
}

static void replicas_close(struct engine *e)
{
    struct replicas *rs = TAKE_PTR(e->replicas);

    if (!rs)
        return;
    /* A build waiting on its timer ends now; one in a Proxmox call ends when the client's
     * close cancels it. */
    if (rs->build && !rs->build->sb.call) {
        uv_timer_stop(&rs->build->sb.timer);
        (void)op_step_check_abort(&rs->build->sb);
    }
    e->close_pending++;
    uv_close((uv_handle_t *)&rs->timer, replicas_closed);
}

void engine_replicas_apply(struct engine *e)
{
    struct replicas *rs;

    if (!e || !e->configured || e->closing)
        return;
    if (!e->replicas) {
        rs = calloc(1, sizeof *rs);
        if (!rs)
            return;
        rs->e = e;
        uv_timer_init(e->loop, &rs->timer);
        rs->timer.data = rs;
        e->replicas = rs;
        e->replicas_close = replicas_close;
    }
    uv_timer_start(&e->replicas->timer, on_timer, 0, 0);
}

/* ---- for the reconcile ---- */

int engine_replica_adopt(struct engine *e, uint32_t vmid, const char *node, json_object *conf)
{
    const char *name;
    uint32_t origin;
    bool known = false;
    struct marker m;
    json_object *v;
    int r;

    if (!conf || !json_object_object_get_ex(conf, "description", &v) ||
        !json_object_is_type(v, json_type_string) ||
        marker_parse(json_object_get_string(v), &m) < 0 || !m.replica ||
        strcmp(m.instance, registry_instance_id(e->reg)) != 0 ||
        !json_object_object_get_ex(conf, "template", &v) || json_object_get_int(v) != 1)
        return 0; /* no replica of this instance's */
    name = m.template;
    if (sscanf(m.sandbox, REPLICA_MARKER_SCAN, &origin) != 1)
        origin = 0; /* retired */

    for (size_t i = 0; i < e->n_repl; i++)
        known = known || e->repl[i].vmid == vmid;
    if (known)
        return 0;
    r = table_add(e, name, node, vmid, origin);
    if (r >= 0)
        log_info(COMP, "replica %u of template '%s' on %s found in Proxmox", vmid, name, node);
    table_retire(e);
    return r;
}

void engine_replica_prune(struct engine *e, const struct pve_vm_list *members)
{
    for (size_t i = 0; members && i < e->n_repl;) {
        struct engine_replica *r = &e->repl[i];

        if (r->deleting || pve_vm_list_find(members, r->vmid) ||
            (int64_t)time(NULL) - r->known_since < REPLICA_PRUNE_AFTER_S) {
            i++;
            continue;
        }
        log_info(COMP, "replica %u of template '%s' is no longer in the pool: forgotten", r->vmid,
                 r->name);
        table_remove(e, r->vmid); /* a missing one is made again */
    }
}

bool engine_replica_building(struct engine *e, uint32_t vmid)
{
    return e->replicas && e->replicas->build &&
           (e->replicas->build->vmid == vmid || e->replicas->build->vmid == 0);
}
