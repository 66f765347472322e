/* The nodes of the cluster as the engine sees them: the periodic read of
 * /cluster/resources?type=node (and, while a one-vmid template's node is unknown, of
 * /cluster/resources?type=vm), the choice of a node for each create (lib/engine/placement.c
 * scores), and node health: a node whose calls fail to connect (595, refused, no route, TLS), or
 * that the report shows offline, is out of placement until a probe (GET /nodes/NAME/lxc) answers,
 * with a backoff between probes. See sandbox-internal.h. */
#include "macro.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>

#include "audit.h"
#include "log.h"
#include "metrics.h"
#include "placement.h"
#include "pve.h"
#include "registry.h"
#include "sandbox-internal.h"

#define COMP "cluster"

#define CLUSTER_REFRESH_MS 5000u      /* /cluster/resources read this often */
#define CLUSTER_TICK_MS 1000u         /* probes of failed nodes are due at most this late */
#define CLUSTER_CALL_TIMEOUT_MS 4000u /* one read or probe, retries included */
#define CLUSTER_BACKOFF_MIN_MS 1000u  /* first probe of a failed node */
#define CLUSTER_BACKOFF_MAX_MS 30000u
#define CLUSTER_VERSION_RETRY_MS 10000u /* a version read that failed is tried again */
#define REFUSAL_MAX 400

struct cluster;

struct cluster_node {
    struct cluster *c;
    char name[CONFIG_NODE_NAME_MAX + 1];
    struct placement_state state; /* online: true until a report says otherwise */
    uint64_t own_running;         /* own running memory when the running read was sent */
    bool warned_unsized;          /* "reports no load" logged (once until it reports some) */
    /* health (besides state.failed) */
    unsigned backoff_ms;
    uint64_t probe_at_ms;
    struct pve_call *probe;
    /* its pve-manager version (GET /nodes/NAME/version, read once) */
    struct pve_call *ver_call;
    bool ver_read;
    uint64_t ver_at_ms;
    char refusal[REFUSAL_MAX]; /* why DHCP addressing cannot work there, or "" */
};

struct cluster {
    struct engine *e;
    struct cluster_node *nodes;
    size_t n;
    uv_timer_t timer;
    bool timer_open;
    struct pve_call *read;
    struct pve_call *vm_read;
    uint64_t read_at_ms;              /* when the last node read was sent */
    bool replace_pending;             /* a node went down: move the creates, end the destroys */
    void (*closed)(struct engine *e); /* cluster_close's: once the timer is closed */
    bool read_once;
    /* the version of the node whose API the daemon talks to (GET /version, read once) */
    struct pve_call *api_ver_call;
    bool api_ver_read;
    uint64_t api_ver_at_ms;
    char api_refusal[REFUSAL_MAX]; /* why DHCP addressing cannot work in the cluster, or "" */
};

static struct cluster_node *node_find(struct cluster *c, const char *name)
{
    for (size_t i = 0; c && name && i < c->n; i++)
        if (strcmp(c->nodes[i].name, name) == 0)
            return &c->nodes[i];
    return NULL;
}

/* Offline in the last report, or in backoff after failed calls. */
static bool node_down(const struct cluster_node *nd)
{
    return nd->state.failed || !nd->state.online;
}

static bool live(const struct sandbox *sb)
{
    return sb->state != SANDBOX_GONE && sb->state != SANDBOX_FAILED;
}

static bool running(const struct sandbox *sb)
{
    return sb->state == SANDBOX_STARTING || sb->state == SANDBOX_WAITING_IP ||
           sb->state == SANDBOX_CONNECTING || sb->state == SANDBOX_READY;
}

static void own_usage(struct engine *e, const char *node, bool only_running, unsigned *ret_n,
                      uint64_t *ret_mem)
{
    unsigned n = 0;
    uint64_t mem = 0;

    for (struct sandbox *sb = e->sandboxes; sb; sb = sb->next)
        if (sb->node && strcmp(sb->node, node) == 0 && live(sb) && (!only_running || running(sb))) {
            n++;
            mem += (uint64_t)sb->memory_mb << 20;
        }
    *ret_n = n;
    *ret_mem = mem;
}

/* ---- node health ---- */

/* A node went down: the timer moves the creates on it (from the loop, outside any call). */
static void on_timer(uv_timer_t *t);
static void cluster_kick(struct cluster *c)
{
    c->replace_pending = true;
    if (c->timer_open && !c->e->closing)
        uv_timer_start(&c->timer, on_timer, 0, 0);
}

bool cluster_node_down(struct engine *e, const char *node)
{
    struct cluster_node *nd = node_find(e->cluster, node);

    return nd && node_down(nd);
}

/* The node went out of placement or came back: its ready sandboxes are reported
 * unreachable, or ready again (their SSH sessions are re-established on their next use). */
static void cluster_reachability_changed(struct cluster *c, struct cluster_node *nd)
{
    bool down = node_down(nd);

    for (struct sandbox *sb = c->e->sandboxes; sb; sb = sb->next)
        if (sb->node && strcmp(sb->node, nd->name) == 0 && sb->state == SANDBOX_READY)
            sandbox_observe_reachability(sb, !down);
}

/* node.down / node.up in the audit trail and sandboxd_node_up. */
static void audit_node(struct cluster_node *nd, bool down, const char *why)
{
    struct audit_record rec = {.event = down ? "node.down" : "node.up",
                               .priority = down ? LOG_WARNING : LOG_NOTICE,
                               .node = nd->name,
                               .caller_uid = AUDIT_NO_UID,
                               .owner_uid = AUDIT_NO_UID,
                               .reason = why};

    if (down)
        audit_emit(&rec, "node %s is taken out of placement: %s", nd->name, why);
    else
        audit_emit(&rec, "node %s answers again: back in placement", nd->name);
    metrics_set(M_NODE_UP, nd->name, NULL, down ? 0 : 1);
}

static void node_set_failed(struct cluster *c, struct cluster_node *nd, bool failed,
                            const char *why)
{
    bool was_down = node_down(nd);

    if (nd->state.failed == failed)
        return;
    nd->state.failed = failed;
    if (failed) {
        nd->backoff_ms = CLUSTER_BACKOFF_MIN_MS;
        nd->probe_at_ms = now_ms(c->e) + nd->backoff_ms;
    }
    if (was_down != node_down(nd)) {
        audit_node(nd, !was_down, why);
        cluster_reachability_changed(c, nd);
        if (!was_down)
            cluster_kick(c);
    }
}

bool cluster_alternatives(struct engine *e)
{
    return e->cluster && e->cluster->n > 1;
}

/* Every HTTP attempt under /nodes/NODE/ (pve_client_set_node_observer()): a connection
 * failure takes the node out: pveproxy's 595 (it could not connect to the node), or the
 * daemon's own connect refused, no route or TLS failure. A slow answer does not: a timeout,
 * or pveproxy's 596 after its 30 s proxy timeout (the call may still run on a busy node).
 * Any other answer while it is out brings it back. Runs inside a call's processing, so what
 * cancels calls waits for the timer. */
static void on_node_attempt(const char *node, int error, long status, void *userdata)
{
    struct cluster *c = userdata;
    struct cluster_node *nd = node_find(c, node);
    char why[64];

    if (!nd || c->n < 2 || c->e->closing)
        return;
    if ((error == 0 && status == 595) || error == -ECONNREFUSED || error == -EHOSTUNREACH ||
        error == -EPROTO) {
        if (error)
            snprintf(why, sizeof why, "connection failed: %s", strerror(-error));
        else
            snprintf(why, sizeof why, "HTTP %ld", status);
        node_set_failed(c, nd, true, why);
    } else if (error == 0 && status > 0 && status < 596 && nd->state.failed)
        node_set_failed(c, nd, false, NULL);
}

static void on_probe(const struct pve_result *res, void *userdata)
{
    struct cluster_node *nd = userdata;
    struct cluster *c;

    nd->probe = NULL;
    if (res->error == -ECANCELED)
        return;
    c = nd->c;
    if (res->error == 0) {
        node_set_failed(c, nd, false, NULL);
        return;
    }
    nd->backoff_ms = MIN(nd->backoff_ms * 2, CLUSTER_BACKOFF_MAX_MS);
    nd->probe_at_ms = now_ms(c->e) + nd->backoff_ms;
}

static void probe_node(struct cluster *c, struct cluster_node *nd)
{
    if (nd->probe || c->e->closing)
        return;
    if (pve_lxc_list(c->e->pve, nd->name, CLUSTER_CALL_TIMEOUT_MS, on_probe, nd, &nd->probe) < 0) {
        nd->backoff_ms = MIN(nd->backoff_ms * 2, CLUSTER_BACKOFF_MAX_MS);
        nd->probe_at_ms = now_ms(c->e) + nd->backoff_ms;
    }
}

/* ---- the report ---- */

static void apply_report(struct cluster *c, const struct placement_report *rep, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        struct cluster_node *nd = node_find(c, rep[i].name);
        bool was_down;

        if (!nd)
            continue; /* a node of the cluster the daemon does not use */
        was_down = node_down(nd);
        if (rep[i].online && !nd->state.online && nd->state.failed)
            nd->probe_at_ms = now_ms(c->e); /* back online in the report: probe it now */
        nd->state.online = rep[i].online;
        if (rep[i].online && !rep[i].sized && !nd->warned_unsized) {
            /* Proxmox leaves mem/maxmem/cpu out without Sys.Audit on /nodes/NAME: an ACL on
             * "/" with propagate 0 does not reach it. */
            log_warning(COMP,
                        "node %s: /cluster/resources shows no memory or CPU figures (the token "
                        "lacks Sys.Audit on /nodes/%s); placement uses only the daemon's own "
                        "counts for it",
                        nd->name, nd->name);
            nd->warned_unsized = true;
        }
        if (rep[i].online && rep[i].sized) {
            nd->warned_unsized = false;
            nd->state.known = true;
            nd->state.maxmem = rep[i].maxmem;
            nd->state.cpu = rep[i].cpu;
            nd->state.mem_other = rep[i].mem > nd->own_running ? rep[i].mem - nd->own_running : 0;
        }
        if (was_down != node_down(nd)) {
            audit_node(nd, !was_down, was_down ? NULL : "offline in /cluster/resources");
            cluster_reachability_changed(c, nd);
            if (!was_down)
                cluster_kick(c);
        }
    }
}

static void on_read(const struct pve_result *res, void *userdata)
{
    struct cluster *c = userdata;
    struct placement_report rep[CONFIG_NODES_MAX * 2];
    int n;

    c->read = NULL;
    if (res->error < 0)
        return; /* Proxmox unreachable: the /version probe reports it; the table stays */
    n = placement_report_parse(res->data, rep, ELEMENTSOF(rep));
    if (n < 0) {
        log_debug(COMP, "/cluster/resources?type=node: unexpected answer");
        return;
    }
    apply_report(c, rep, (size_t)n);
}

static void on_vm_read(const struct pve_result *res, void *userdata)
{
    struct cluster *c = userdata;
    struct engine *e = c->e;

    c->vm_read = NULL;
    if (res->error < 0 || !res->vms)
        return;
    for (size_t i = 0; i < e->n_templates; i++) {
        struct engine_template *t = &e->templates[i];
        const struct pve_vm *vm = t->n_copies ? NULL : pve_vm_list_find(res->vms, t->vmid);

        if (vm && vm->node && strlen(vm->node) < sizeof t->home && strcmp(t->home, vm->node) != 0) {
            snprintf(t->home, sizeof t->home, "%s", vm->node);
            log_debug(COMP, "template %s (%u) is on node %s", t->name, t->vmid, t->home);
        }
    }
}

/* ---- versions ----
 * DHCP addressing learns a sandbox's address from GET .../lxc/{vmid}/interfaces: added in
 * pve-container 5.0.6 (Proxmox VE 8.1), and forwarded to the container's node only from
 * 5.2.0 ("fix #5674", Proxmox VE 8.3): before, the node answering the API looks for the
 * container among its own and returns null for another node's. The daemon reads the
 * pve-manager versions (pve-container's is not in the API a pool token can read) and keeps
 * DHCP creates off what cannot work. */

static bool version_of(const struct pve_result *res, struct pve_version *ret_v, const char **ret_s)
{
    struct json_object *ver = NULL;

    if (res->error < 0 || !res->data || !json_object_object_get_ex(res->data, "version", &ver))
        return false;
    *ret_s = json_object_get_string(ver);
    return pve_version_parse(*ret_s, ret_v) == 0;
}

static void on_node_version(const struct pve_result *res, void *userdata)
{
    struct cluster_node *nd = userdata;
    struct engine *e;
    struct pve_version v;
    const char *s;

    nd->ver_call = NULL;
    if (res->error == -ECANCELED || res->error < 0)
        return; /* tried again later */
    e = nd->c->e;
    nd->ver_read = true;
    if (!version_of(res, &v, &s)) {
        log_warning(COMP, "node %s: unreadable version", nd->name);
        return;
    }
    log_info(COMP, "node %s runs Proxmox VE %s", nd->name, s);
    if (e->cfg->network.static_mode || pve_version_at_least(&v, 8, 1, 0))
        return;
    snprintf(nd->refusal, sizeof nd->refusal,
             "node %s runs Proxmox VE %s, which has no GET /nodes/{node}/lxc/{vmid}/interfaces "
             "(Proxmox VE 8.1, pve-container 5.0.6): [network] mode = dhcp cannot learn a "
             "sandbox's address there; upgrade the node or use mode = static",
             nd->name, s);
    engine_noticef(e, LOG_ERR, "%s", nd->refusal);
}

static void on_api_version(const struct pve_result *res, void *userdata)
{
    struct cluster *c = userdata;
    struct pve_version v;
    const char *s;

    c->api_ver_call = NULL;
    if (res->error == -ECANCELED || res->error < 0)
        return;
    c->api_ver_read = true;
    if (!version_of(res, &v, &s))
        return;
    log_info(COMP, "the Proxmox API answers with Proxmox VE %s", s);
    if (c->n < 2 || c->e->cfg->network.static_mode || pve_version_at_least(&v, 8, 3, 0))
        return;
    snprintf(c->api_refusal, sizeof c->api_refusal,
             "the Proxmox API node runs Proxmox VE %s, which does not forward GET "
             "/nodes/{node}/lxc/{vmid}/interfaces to the container's node (pve-container 5.2.0, "
             "Proxmox VE 8.3): in a cluster [network] mode = dhcp cannot learn the address of a "
             "sandbox on another node; upgrade the nodes or use mode = static",
             s);
    engine_noticef(c->e, LOG_ERR, "%s", c->api_refusal);
}

static void versions_read(struct cluster *c, uint64_t now)
{
    struct engine *e = c->e;

    if (!c->api_ver_read && !c->api_ver_call && now >= c->api_ver_at_ms) {
        c->api_ver_at_ms = now + CLUSTER_VERSION_RETRY_MS;
        (void)pve_version(e->pve, CLUSTER_CALL_TIMEOUT_MS, on_api_version, c, &c->api_ver_call);
    }
    for (size_t i = 0; i < c->n; i++) {
        struct cluster_node *nd = &c->nodes[i];

        if (nd->ver_read || nd->ver_call || now < nd->ver_at_ms)
            continue;
        nd->ver_at_ms = now + CLUSTER_VERSION_RETRY_MS;
        (void)pve_node_version(e->pve, nd->name, CLUSTER_CALL_TIMEOUT_MS, on_node_version, nd,
                               &nd->ver_call);
    }
}

/* Why a DHCP create cannot work on nd (NULL: it can, as far as the versions tell). */
static const char *version_refusal(const struct cluster *c, const struct cluster_node *nd)
{
    if (c->api_refusal[0])
        return c->api_refusal;
    return nd && nd->refusal[0] ? nd->refusal : NULL;
}

static bool homes_unknown(struct engine *e)
{
    for (size_t i = 0; i < e->n_templates; i++)
        if (e->templates[i].n_copies == 0 && !e->templates[i].home[0])
            return true;
    return false;
}

static void on_timer(uv_timer_t *t)
{
    struct cluster *c = t->data;
    struct engine *e = c->e;
    uint64_t now = now_ms(e);
    unsigned cnt;

    if (e->closing)
        return;
    if (c->replace_pending) {
        c->replace_pending = false;
        if (e->creates_replace)
            e->creates_replace(e);
        if (e->destroys_yield)
            e->destroys_yield(e);
    }
    /* one node: nothing to choose between, so no reads (its failures still count) */
    if (c->n > 1 && !c->read && (!c->read_once || now - c->read_at_ms >= CLUSTER_REFRESH_MS)) {
        c->read_once = true;
        c->read_at_ms = now;
        for (size_t i = 0; i < c->n; i++)
            own_usage(e, c->nodes[i].name, true, &cnt, &c->nodes[i].own_running);
        (void)pve_cluster_nodes(e->pve, CLUSTER_CALL_TIMEOUT_MS, on_read, c, &c->read);
    }
    if (c->n > 1 && !c->vm_read && homes_unknown(e))
        (void)pve_cluster_resources(e->pve, CLUSTER_CALL_TIMEOUT_MS, on_vm_read, c, &c->vm_read);
    for (size_t i = 0; i < c->n; i++)
        if (c->nodes[i].state.failed && now >= c->nodes[i].probe_at_ms)
            probe_node(c, &c->nodes[i]);
    versions_read(c, now);
    uv_timer_start(&c->timer, on_timer, CLUSTER_TICK_MS, 0);
}

/* ---- placement ---- */

size_t engine_template_vmids(struct engine *e, const struct engine_template *t, const char *node,
                             uint32_t *out, size_t max)
{
    size_t n = 0;

    for (size_t i = 0; node && i < t->n_copies; i++)
        if (strcmp(t->copies[i].node, node) == 0 && n < max)
            out[n++] = t->copies[i].vmid;
    if (n == 0 && max > 0)
        out[n++] = t->vmid;
    for (size_t i = 0; node && !t->runtime && i < e->n_repl && n < max; i++)
        if (!e->repl[i].retiring && strcmp(e->repl[i].name, t->name) == 0 &&
            strcmp(e->repl[i].node, node) == 0)
            out[n++] = e->repl[i].vmid;
    return n;
}

/* The node a one-vmid template's sandboxes go to: where Proxmox lists it, else the first. */
static const char *template_home(struct engine *e, const struct engine_template *t)
{
    return t->home[0] ? t->home : e->cfg->proxmox.nodes[0];
}

static bool holds(struct engine *e, const struct engine_template *t, const char *node)
{
    if (t->n_copies == 0)
        return strcmp(template_home(e, t), node) == 0;
    for (size_t i = 0; i < t->n_copies; i++)
        if (strcmp(t->copies[i].node, node) == 0)
            return true;
    return false;
}

size_t cluster_nodes_of(struct engine *e, const struct engine_template *t, const char **ret,
                        size_t max)
{
    struct cluster *c = e->cluster;
    size_t n = 0;

    for (size_t i = 0; c && t && i < c->n && n < max; i++)
        if (holds(e, t, c->nodes[i].name) && !node_down(&c->nodes[i]))
            ret[n++] = c->nodes[i].name;
    return n;
}

static int place(struct engine *e, const struct engine_template *t, unsigned memory_mb,
                 const char **ret_node, struct engine_error *ret_err);

const char *cluster_best_node(struct engine *e, const struct engine_template *t, int memory_mb)
{
    struct engine_error err;
    const char *node;

    if (!e->cluster || !t ||
        place(e, t, memory_mb > 0 ? (unsigned)memory_mb : e->cfg->sandbox.default_memory_mb, &node,
              &err) < 0)
        return NULL;
    return node;
}

int cluster_place(struct engine *e, const struct engine_template *t, const char *want,
                  unsigned memory_mb, const char **ret_node, struct engine_error *ret_err)
{
    struct cluster *c = e->cluster;
    int r;

    if (want) {
        struct cluster_node *nd = node_find(c, want);

        if (!nd)
            return engine_refuse(ret_err, ENGINE_E_INVALID, -EINVAL,
                                 "no such node in [proxmox] nodes", "node");
        if (!holds(e, t, want))
            return engine_refuse(ret_err, ENGINE_E_INVALID, -EINVAL,
                                 "the template has no copy on this node", "node");
        if (node_down(nd))
            return engine_refuse(ret_err, ENGINE_E_BUSY, -EHOSTDOWN,
                                 "the node is offline or not answering", NULL);
        if (version_refusal(c, nd))
            return engine_refuse(ret_err, ENGINE_E_NOT_CONFIGURED, -EPROTONOSUPPORT,
                                 version_refusal(c, nd), NULL);
        *ret_node = nd->name;
        metrics_add(M_PLACEMENTS, nd->name, NULL, 1);
        return 0;
    }
    r = place(e, t, memory_mb, ret_node, ret_err);
    if (r >= 0)
        metrics_add(M_PLACEMENTS, *ret_node, NULL, 1);
    return r;
}

static int place(struct engine *e, const struct engine_template *t, unsigned memory_mb,
                 const char **ret_node, struct engine_error *ret_err)
{
    struct cluster *c = e->cluster;
    struct placement_node pn[CONFIG_NODES_MAX];
    enum placement_refusal why;
    size_t n = MIN(c->n, ELEMENTSOF(pn)), idx;
    const char *refused = NULL;
    int r;

    if (c->api_refusal[0])
        return engine_refuse(ret_err, ENGINE_E_NOT_CONFIGURED, -EPROTONOSUPPORT, c->api_refusal,
                             NULL);
    for (size_t i = 0; i < n; i++) {
        struct cluster_node *nd = &c->nodes[i];

        pn[i] = (struct placement_node){
            .name = nd->name,
            .has_template = holds(e, t, nd->name) && !nd->refusal[0],
            .state = nd->state,
        };
        if (holds(e, t, nd->name) && nd->refusal[0])
            refused = nd->refusal;
        own_usage(e, nd->name, false, &pn[i].live, &pn[i].own_mem);
    }
    r = placement_pick(pn, n, e->cfg->proxmox.max_per_node, (uint64_t)memory_mb << 20, &idx, &why);
    if (r < 0 && why == PLACEMENT_NO_TEMPLATE && refused)
        return engine_refuse(ret_err, ENGINE_E_NOT_CONFIGURED, -EPROTONOSUPPORT, refused, NULL);
    if (r < 0) {
        if (why == PLACEMENT_ALL_FULL)
            return engine_refuse(ret_err, ENGINE_E_QUOTA, -EDQUOT,
                                 "every node holding the template is at max_per_node", NULL);
        if (why == PLACEMENT_ALL_DOWN)
            return engine_refuse(ret_err, ENGINE_E_BUSY, -EHOSTDOWN,
                                 "every node holding the template is offline or not answering",
                                 NULL);
        return engine_refuse(ret_err, ENGINE_E_INVALID, -EINVAL,
                             "no node in [proxmox] nodes holds the template", "template");
    }
    *ret_node = c->nodes[idx].name;
    return 0;
}

/* ---- lifetime ---- */

int cluster_init(struct engine *e)
{
    const struct config_proxmox *px = &e->cfg->proxmox;
    struct cluster *c = calloc(1, sizeof *c);

    if (!c)
        return -ENOMEM;
    c->nodes = calloc(MAX(px->n_nodes, (size_t)1), sizeof *c->nodes);
    if (!c->nodes) {
        free(c);
        return -ENOMEM;
    }
    c->e = e;
    c->n = px->n_nodes;
    for (size_t i = 0; i < c->n; i++) {
        c->nodes[i].c = c;
        c->nodes[i].state.online = true;
        snprintf(c->nodes[i].name, sizeof c->nodes[i].name, "%s", px->nodes[i]);
        metrics_set(M_NODE_UP, c->nodes[i].name, NULL, 1);
    }
    uv_timer_init(e->loop, &c->timer);
    c->timer.data = c;
    c->timer_open = true;
    uv_timer_start(&c->timer, on_timer, 0, 0);
    pve_client_set_node_observer(e->pve, on_node_attempt, c);
    e->cluster = c;
    return 0;
}

static void timer_closed(uv_handle_t *h)
{
    struct cluster *c = h->data;
    struct engine *e = c->e;

    void (*closed)(struct engine * e) = c->closed;

    free(c->nodes);
    free(c);
    if (closed)
        closed(e);
}

void cluster_close(struct engine *e, void (*closed)(struct engine *e))
{
    struct cluster *c = e->cluster;

    if (!c || !c->timer_open)
        return;
    /* the calls ended with the client (pve_client_close) */
    if (e->pve)
        pve_client_set_node_observer(e->pve, NULL, NULL);
    c->read = c->vm_read = NULL;
    c->api_ver_call = NULL;
    for (size_t i = 0; i < c->n; i++)
        c->nodes[i].probe = c->nodes[i].ver_call = NULL;
    c->timer_open = false;
    c->closed = closed;
    e->close_pending++;
    uv_close((uv_handle_t *)&c->timer, timer_closed);
}

/* ---- for reconcile ---- */

bool cluster_vm_unreachable(struct engine *e, const char *node, const char *status)
{
    return (status && strcmp(status, "unknown") == 0 && cluster_alternatives(e)) ||
           cluster_node_down(e, node);
}
