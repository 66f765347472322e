/* The warm pool: per template, [pool] warm containers kept fully created (cloned, started,
 * addressed, SSH-connected) as ordinary registry entries owned by the pool (record and
 * marker say pool). A create that fits takes one: the member leaves the pool at once (two
 * creates never get the same one), then a live hand-over (lib/engine/sandbox-resize.c) writes the
 * new owner's marker, hostname, size and internet group, and its READY record. The pool
 * refills in the background, at most [pool] max_filling creates at a time, and destroys
 * what exceeds its target after a reload. Pool members count towards max_total only.
 *
 * The pool has no list of its own: its members are the engine's sandboxes marked
 * pool_member, so a restart that re-attaches them (reconcile) refills nothing twice. */
#include "macro.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>

#include "log.h"
#include "marker.h"
#include "metrics.h"
#include "sandbox-internal.h"
#include "sandbox-pause.h"
#include "sandbox-resize.h"

#define COMP "pool"
#define POOL_CHECK_MS 1000u     /* members lost to a reconcile or a lease are noticed */
#define POOL_RETRY_MIN_MS 1000u /* after a failed fill, doubling */
#define POOL_RETRY_MAX_MS 30000u

struct pool {
    uv_timer_t timer;
    struct engine *e;  /* NULL once closed */
    bool active;       /* the first reconcile ran: members of a previous run are known */
    unsigned failures; /* fills failed in a row (backoff) */
    uint64_t retry_at_ms;
};

/* Installed as the engine's hooks (struct engine: pool_take, pool_close). */
static int pool_take(struct engine *e, const struct sandbox_create_opts *opts, int64_t ttl,
                     engine_sandbox_cb cb, void *userdata, struct engine_error *ret_err);
static void pool_close(struct engine *e);

static bool is_ready_member(const struct sandbox *sb, const struct engine_template *t)
{
    return sb->pool_member && sb->state == SANDBOX_READY && !sb->resize_op &&
           !sb->destroy_requested && !sandbox_busy(sb) && sandbox_template(sb) == t &&
           !cluster_node_down(sb->engine, sb->node);
}

/* Ready (or, with !ready, still being created) members of t on node. */
static unsigned count_on(struct engine *e, const struct engine_template *t, const char *node,
                         bool ready)
{
    unsigned n = 0;

    for (struct sandbox *sb = e->sandboxes; sb; sb = sb->next)
        if (sb->node && strcmp(sb->node, node) == 0 &&
            (ready ? is_ready_member(sb, t)
                   : sb->pool_member && sb->state < SANDBOX_READY && sandbox_template(sb) == t))
            n++;
    return n;
}

static unsigned count_ready(struct engine *e, const struct engine_template *t)
{
    unsigned n = 0;

    for (struct sandbox *sb = e->sandboxes; sb; sb = sb->next)
        if (is_ready_member(sb, t))
            n++;
    return n;
}

static unsigned filling_total(const struct engine *e)
{
    unsigned n = 0;

    for (size_t i = 0; i < e->n_templates; i++)
        n += e->templates[i].filling;
    for (size_t i = 0; i < e->n_rt; i++)
        n += e->rt[i]->filling;
    return n;
}

static void on_filled(const struct engine_error *err, struct sandbox *sb, void *userdata)
{
    struct engine *e = userdata;
    struct engine_template *t = engine_template_find(e, sb->template);
    struct pool *p = e->pool;

    if (t && t->filling > 0)
        t->filling--;
    if (!p || e->closing)
        return;
    if (err) {
        uint64_t d = POOL_RETRY_MIN_MS << MIN(p->failures, 5u);

        p->failures++;
        p->retry_at_ms = now_ms(e) + MIN(d, (uint64_t)POOL_RETRY_MAX_MS);
        engine_noticef(e, LOG_WARNING, "warm pool of template '%s': a fill failed: %s",
                       sb->template, strna(err->message));
    } else {
        p->failures = 0;
        p->retry_at_ms = 0;
    }
    pool_kick(e);
}

static int fill_one(struct engine *e, struct engine_template *t, const char *node)
{
    struct sandbox_create_opts o = {
        .owner_uid = 0, /* a placeholder: pool members are nobody's */
        .cores = -1,
        .memory_mb = -1,
        .disk_gb = -1,
        .net_rate_mbps = -1,
        .ttl_s = e->cfg->sandbox.max_ttl_s,
        .template = t->name,
        .node = node,
        .pool = true,
    };
    struct engine_error err;
    int r;

    t->filling++;
    r = engine_create(e, &o, on_filled, e, &err);
    if (r < 0) {
        t->filling--;
        log_debug(COMP, "template %s: cannot start a fill: %s", t->name, strna(err.message));
    }
    return r;
}

static void destroyed_logged(const struct engine_error *err, void *userdata)
{
    if (err)
        log_debug(COMP, "surplus member not destroyed: %s", strna(err->message));
}

/* One template on one node: fill up to its target, destroy what exceeds it. */
static void run_node(struct pool *p, struct engine_template *t, const char *node)
{
    struct engine *e = p->e;
    unsigned target = config_pool_target(e->cfg, t->name);
    unsigned ready = count_on(e, t, node, true), filling = count_on(e, t, node, false);

    while (ready + filling < target && filling_total(e) < e->cfg->pool.max_filling &&
           e->n_sandboxes < e->cfg->sandbox.max_total && now_ms(e) >= p->retry_at_ms) {
        if (fill_one(e, t, node) < 0)
            break;
        filling++;
    }
    for (struct sandbox *sb = e->sandboxes, *next; sb && ready > target; sb = next) {
        struct engine_error err;

        next = sb->next;
        if (!is_ready_member(sb, t) || strcmp(sb->node, node) != 0)
            continue;
        log_debug(COMP, "template %s: destroying surplus member %s", t->name, sb->id);
        if (engine_destroy(e, sb, destroyed_logged, NULL, &err) == 0)
            ready--;
    }
}

static void on_timer(uv_timer_t *h)
{
    struct pool *p = h->data;

    if (!p->e || p->e->closing || !p->active)
        return;
    for (size_t i = 0; i < p->e->n_templates; i++) {
        /* the target holds per node that has the template and is up */
        const char *nodes[CONFIG_NODES_MAX];
        size_t n = cluster_nodes_of(p->e, &p->e->templates[i], nodes, ELEMENTSOF(nodes));

        for (size_t j = 0; j < n && p->e; j++)
            run_node(p, &p->e->templates[i], nodes[j]);
    }
    /* templates made from sandboxes ([pool] warm.NAME once one of that name exists) */
    for (size_t i = 0; p->e && i < p->e->n_rt; i++) {
        const char *nodes[CONFIG_NODES_MAX];
        size_t n = cluster_nodes_of(p->e, p->e->rt[i], nodes, ELEMENTSOF(nodes));

        for (size_t j = 0; j < n && p->e && i < p->e->n_rt; j++)
            run_node(p, p->e->rt[i], nodes[j]);
    }
    uv_timer_start(&p->timer, on_timer, POOL_CHECK_MS, 0);
}

void pool_kick(struct engine *e)
{
    struct pool *p = e->pool;

    if (!p || !p->active || e->closing)
        return;
    uv_timer_start(&p->timer, on_timer, 0, 0);
}

void engine_pool_apply(struct engine *e)
{
    if (!e || !e->configured || e->closing)
        return;
    if (!e->pool) {
        struct pool *p = calloc(1, sizeof *p);

        if (!p)
            return;
        p->e = e;
        uv_timer_init(e->loop, &p->timer);
        p->timer.data = p;
        e->pool = p;
        e->pool_take = pool_take;
        e->pool_close = pool_close;
    }
    e->pool->active = true;
    e->pool->retry_at_ms = 0;
    pool_kick(e);
    engine_replicas_apply(e);
}

void engine_pool_pause(struct engine *e)
{
    if (e && e->pool) {
        e->pool->active = false;
        uv_timer_stop(&e->pool->timer);
    }
}

static void pool_closed(uv_handle_t *h)
{
    free(h->data);
}

static void pool_close(struct engine *e)
{
    struct pool *p = TAKE_PTR(e->pool);

    if (!p)
        return;
    p->e = NULL;
    uv_close((uv_handle_t *)&p->timer, pool_closed);
}

bool engine_pool_stats(const struct engine *e, size_t i, struct engine_pool_stats *ret)
{
    struct engine_template *t = NULL;

    if (!e)
        return false;
    if (i < e->n_templates)
        t = &e->templates[i];
    else /* then the templates made from sandboxes that [pool] warm.NAME names */
        for (size_t j = 0, k = e->n_templates; !t && j < e->n_rt; j++)
            if (config_pool_target(e->cfg, e->rt[j]->name) > 0 && k++ == i)
                t = e->rt[j];
    if (!t)
        return false;
    *ret = (struct engine_pool_stats){
        .template = t->name,
        .target = config_pool_target(e->cfg, t->name),
        .ready = count_ready((struct engine *)e, t),
        .filling = t->filling,
        .hits = t->hits,
        .misses = t->misses,
    };
    return true;
}

/* ---- taking a member ---- */

static struct sandbox *find_member(struct engine *e, const struct engine_template *t,
                                   const struct sandbox_create_opts *opts)
{
    const char *best = opts->node ? NULL : cluster_best_node(e, t, opts->memory_mb);

    /* first on the node placement would choose, then anywhere */
    for (struct sandbox *sb = e->sandboxes; best && sb; sb = sb->next)
        if (is_ready_member(sb, t) && strcmp(sb->node, best) == 0 &&
            (opts->disk_gb <= 0 || (unsigned)opts->disk_gb >= sb->disk_gb))
            return sb;
    for (struct sandbox *sb = e->sandboxes; sb; sb = sb->next)
        if (is_ready_member(sb, t) &&
            (opts->disk_gb <= 0 || (unsigned)opts->disk_gb >= sb->disk_gb) &&
            (!opts->node || strcmp(sb->node, opts->node) == 0) && !cluster_node_down(e, sb->node))
            return sb;
    return NULL;
}

/* The new owner's fields, in memory (saved by the state change that follows). */
static int hand_over(struct sandbox *sb, const struct sandbox_create_opts *opts, int64_t ttl)
{
    _cleanup_json_ json_object *labels = NULL, *env = NULL;
    char idem[SHA256_HEX_SIZE] = "";
    _cleanup_free_ char *key = NULL;
    int r;

    r = labels_copy(opts->labels, &labels);
    if (r >= 0)
        r = env_copy(opts->env, &env);
    if (r < 0)
        return r;
    if (opts->idempotency_key) {
        key = strdup(opts->idempotency_key);
        if (!key || marker_key_hash(opts->owner_uid, opts->idempotency_key, idem) < 0)
            return -ENOMEM;
    }
    sb->pool_member = false;
    sb->owner_uid = opts->owner_uid;
    sandbox_pause_opts_set(sb, opts);
    json_object_put(sb->labels);
    sb->labels = TAKE_PTR(labels);
    json_object_put(sb->env);
    sb->env = TAKE_PTR(env);
    free(sb->idempotency_key);
    sb->idempotency_key = TAKE_PTR(key);
    memcpy(sb->idem_hash, idem, sizeof idem);
    sb->params_hash[0] = '\0';
    if (opts->params_hash && hex_is_valid(opts->params_hash, SHA256_HEX_SIZE - 1))
        memcpy(sb->params_hash, opts->params_hash, SHA256_HEX_SIZE);
    sb->created_at = now_realtime();
    sb->expires_at = sb->created_at + ttl;
    sb->started_ms = now_ms(sb->engine);
    return 0;
}

static int pool_take(struct engine *e, const struct sandbox_create_opts *opts, int64_t ttl,
                     engine_sandbox_cb cb, void *userdata, struct engine_error *ret_err)
{
    struct engine_template *t = engine_template_find(e, opts->template);
    const struct config_sandbox *cs = &e->cfg->sandbox;
    struct resize_op *op;
    struct sandbox *sb;
    unsigned cores, memory;
    int r;

    if (!e->pool || !e->pool->active || !t || config_pool_target(e->cfg, t->name) == 0)
        return 0;
    sb = find_member(e, t, opts);
    if (!sb) {
        t->misses++;
        metrics_pool_miss(t->name);
        pool_kick(e);
        return 0;
    }
    op = calloc(1, sizeof *op);
    if (!op)
        goto oom;
    cores = opts->cores > 0 ? (unsigned)opts->cores : cs->default_cores;
    memory = opts->memory_mb > 0 ? (unsigned)opts->memory_mb : cs->default_memory_mb;
    op->cores = cores != sb->cores ? (int)cores : -1;
    op->memory_mb = memory != sb->memory_mb ? (int)memory : -1;
    op->disk_gb = opts->disk_gb > 0 && (unsigned)opts->disk_gb > sb->disk_gb ? opts->disk_gb : -1;
    op->net_rate_mbps = engine_net_rate(e, opts->net_rate_mbps) != sb->net_rate_mbps
                            ? (int)engine_net_rate(e, opts->net_rate_mbps)
                            : -1;
    op->internet = opts->internet && !sb->internet;
    op->take = true;
    op->cb = cb;
    op->userdata = userdata;
    if (opts->hostname && strcmp(opts->hostname, sb->hostname) != 0 &&
        !(op->hostname = strdup(opts->hostname)))
        goto oom;
    r = hand_over(sb, opts, ttl);
    if (r < 0)
        goto oom;
    r = sandbox_description(sb, &op->description);
    if (r < 0) {
        /* Cannot happen for valid fields; the member is nobody's now: let it go. */
        free(op->hostname);
        free(op);
        (void)engine_destroy(e, sb, destroyed_logged, NULL, ret_err);
        goto oom;
    }
    t->hits++;
    metrics_pool_hit(t->name);
    log_debug(COMP, "%s: taken from the pool of template %s for uid %u", sb->id, t->name,
              (unsigned)sb->owner_uid);
    resize_op_take(sb, op);
    pool_kick(e);
    return 1;

oom:
    if (op) {
        free(op->hostname);
        free(op);
    }
    return engine_refuse_oom(ret_err);
}
