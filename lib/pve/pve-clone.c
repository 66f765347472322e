/* Clone calls (pve_clone). Proxmox locks the source for the whole clone task, so a second
 * clone of it fails with "CT is locked (disk)": the copies of a template on a node share one
 * queue per client, each copy runs one clone at a time, and a waiting call starts on the first
 * copy its predecessor frees (urgent calls wait ahead of the others). With newid 0 the vmid is
 * picked here: a random free id of the client's vmid range, another one on "already exists". */
#include "macro.h"

#include "pve-internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"

#define COMP "pve"

struct pve_clone_queue {
    uint32_t vmids[PVE_CLONE_SOURCES_MAX]; /* the copies, in the caller's order */
    struct pve_call *running[PVE_CLONE_SOURCES_MAX];
    unsigned n;
    struct pve_call *head, *tail; /* waiting, linked by u.clone.qnext, the urgent first */
    size_t n_waiting;
    struct pve_clone_queue *next;
};

/* ---- the queue of a template's copies ---- */

static bool queue_idle(const struct pve_clone_queue *q)
{
    for (unsigned i = 0; i < q->n; i++)
        if (q->running[i])
            return false;
    return !q->head;
}

static struct pve_clone_queue *queue_get(struct pve_client *c, const struct pve_clone_state *s)
{
    struct pve_clone_queue *q;

    for (q = c->queues; q; q = q->next) {
        if (q->n == s->n_sources && memcmp(q->vmids, s->sources, q->n * sizeof *q->vmids) == 0)
            return q;
        /* the same copies and more (a copy added since): one queue, grown, so that a copy
         * running a clone is never handed a second one */
        if (q->n < s->n_sources && memcmp(q->vmids, s->sources, q->n * sizeof *q->vmids) == 0) {
            memcpy(q->vmids, s->sources, s->n_sources * sizeof *q->vmids);
            q->n = s->n_sources;
            return q;
        }
    }
    q = calloc(1, sizeof(*q));
    if (!q)
        return NULL;
    q->n = s->n_sources;
    memcpy(q->vmids, s->sources, q->n * sizeof *q->vmids);
    q->next = c->queues;
    c->queues = q;
    return q;
}

static void queue_drop(struct pve_client *c, struct pve_clone_queue *q)
{
    for (struct pve_clone_queue **pp = &c->queues; *pp; pp = &(*pp)->next)
        if (*pp == q) {
            *pp = q->next;
            free(q);
            return;
        }
}

static void queue_unlink(struct pve_clone_queue *q, struct pve_call *call)
{
    struct pve_call *prev = NULL;

    for (struct pve_call *it = q->head; it; prev = it, it = it->u.clone.qnext) {
        if (it != call)
            continue;
        if (prev)
            prev->u.clone.qnext = it->u.clone.qnext;
        else
            q->head = it->u.clone.qnext;
        if (q->tail == it)
            q->tail = prev;
        q->n_waiting--;
        break;
    }
    call->u.clone.qnext = NULL;
}

/* Appends call to the waiting list; an urgent call goes after the last urgent one. */
static void queue_wait(struct pve_clone_queue *q, struct pve_call *call)
{
    struct pve_call *prev = NULL;

    if (call->u.clone.urgent)
        for (struct pve_call *it = q->head; it && it->u.clone.urgent; it = it->u.clone.qnext)
            prev = it;
    else
        prev = q->tail;
    call->u.clone.qnext = prev ? prev->u.clone.qnext : q->head;
    if (prev)
        prev->u.clone.qnext = call;
    else
        q->head = call;
    if (q->tail == prev)
        q->tail = call;
    q->n_waiting++;
}

/* call runs on copy i. */
static void queue_assign(struct pve_clone_queue *q, unsigned i, struct pve_call *call)
{
    q->running[i] = call;
    call->u.clone.template_vmid = q->vmids[i];
}

static int queue_enter(struct pve_call *call)
{
    struct pve_clone_state *s = &call->u.clone;
    struct pve_clone_queue *q = queue_get(call->client, s);

    if (!q)
        return -ENOMEM;
    s->queue = q;
    for (unsigned i = 0; i < q->n; i++)
        if (!q->running[i]) {
            queue_assign(q, i, call);
            pve_call_queue(call, true);
            return 0;
        }
    if (q->n_waiting >= PVE_CLONE_QUEUE_MAX) {
        s->queue = NULL;
        return -EBUSY;
    }
    queue_wait(q, call);
    pve_call_queue(call, false);
    log_debug(COMP, "call %p: clone of %u queued (%zu waiting for %u copies)", (void *)call,
              q->vmids[0], q->n_waiting, q->n);
    return 0;
}

/* The call ends: leave the queue; the next waiting clone starts on the copy it freed. */
static void clone_detach(struct pve_call *call)
{
    struct pve_clone_queue *q = call->u.clone.queue;
    struct pve_client *c = call->client;
    struct pve_call *next;
    unsigned i;

    if (!q)
        return;
    call->u.clone.queue = NULL;
    for (i = 0; i < q->n && q->running[i] != call; i++)
        ;
    if (i == q->n) {
        queue_unlink(q, call);
    } else {
        q->running[i] = NULL;
        if (q->head && c->state == PVE_CLIENT_OPEN) {
            next = q->head;
            queue_unlink(q, next);
            queue_assign(q, i, next);
            log_debug(COMP, "template %u: next clone %p starts", q->vmids[i], (void *)next);
            pve_call_run(next);
            return;
        }
    }
    if (queue_idle(q))
        queue_drop(c, q);
}

/* ---- vmid allocation ---- */

static bool vmid_busy(const struct pve_call *call, uint32_t id)
{
    const struct pve_clone_state *s = &call->u.clone;

    if (s->in_use && pve_vm_list_find(s->in_use, id))
        return true;
    for (unsigned i = 0; i < s->n_tried; i++)
        if (s->tried[i] == id)
            return true;
    for (const struct pve_call *o = call->client->calls; o; o = o->next)
        if (o != call && o->kind == PVE_CALL_CLONE && o->vmid == id)
            return true;
    return s->taken && s->taken(id, s->taken_userdata);
}

static int vmid_pick(struct pve_call *call)
{
    struct pve_client *c = call->client;
    uint64_t span = (uint64_t)c->vmid_max - c->vmid_min + 1;
    uint64_t start = pve_client_random(c) % span;

    /* Random start, then linear scan: parallel daemons rarely collide, and a collision is
     * handled by "already exists". */
    for (uint64_t i = 0; i < span; i++) {
        uint32_t id = (uint32_t)(c->vmid_min + (start + i) % span);
        if (!vmid_busy(call, id)) {
            call->vmid = id;
            return 0;
        }
    }
    return -ENOSPC;
}

/* ---- steps ---- */

static void clone_post(struct pve_call *call)
{
    const struct pve_clone_state *s = &call->u.clone;
    const struct pve_param pv[] = {
        PVE_INT("newid", call->vmid),           PVE_STR("hostname", s->hostname),
        PVE_STR("description", s->description), PVE_STR("pool", s->pool),
        PVE_OPT_BOOL("full", s->full),          PVE_STR("storage", s->storage),
        PVE_STR("target", s->target),           PVE_STR("snapname", s->snapname),
    };
    const struct pve_req req = {
        .ep = PVE_EP_CLONE, .path = {.node = s->node, .vmid = s->template_vmid}, PVE_PARAMS(pv)};

    log_debug(COMP, "call %p: cloning %u -> %u", (void *)call, s->template_vmid, call->vmid);
    pve_call_step(call, &req);
}

/* First step, once the template is free: list the ids in use (newid 0), or clone. */
static void clone_run(struct pve_call *call)
{
    const struct pve_req req = {.ep = PVE_EP_CLUSTER_RESOURCES};

    if (call->u.clone.auto_id)
        pve_call_step(call, &req);
    else
        clone_post(call);
}

/* ---- an unknown outcome ----
 * pveproxy answers 596 when its 30 s proxy timeout passes while pvedaemon may still run the
 * clone (or has not started it yet: its three workers are busy); a timeout or a broken
 * connection leaves the same doubt. The new id's config tells: it appears (with lock
 * "create") when pvedaemon takes the request, and loses the lock when the clone is done. */

#define RESOLVE_MIN_MS 250
#define RESOLVE_MAX_MS 2000

static bool outcome_unknown(const struct pve_call *call, int r)
{
    if (call->ep != &pve_endpoints[PVE_EP_CLONE] || call->upid || call->attempts == 0)
        return false;
    if (r == -EREMOTEIO)
        return call->perr && call->perr->kind == PVE_ERR_CONNECTION &&
               call->perr->http_status != 595;
    return r == -ETIMEDOUT || r == -ECONNRESET;
}

static void resolve_look(struct pve_call *call)
{
    struct pve_clone_state *s = &call->u.clone;
    const struct pve_req req = {
        .ep = PVE_EP_CONFIG_GET,
        .path = {.node = s->target ? s->target : s->node, .vmid = call->vmid}};
    uint64_t delay = s->resolve_ms;

    s->resolve_ms = MIN(s->resolve_ms * 2, (uint64_t)RESOLVE_MAX_MS);
    pve_call_step_after(call, &req, delay);
}

static void resolve_begin(struct pve_call *call, int r)
{
    struct pve_clone_state *s = &call->u.clone;

    s->resolving = true;
    s->unknown_error = r;
    s->unknown_attempts = call->attempts;
    s->unknown_perr = TAKE_PTR(call->perr);
    s->resolve_ms = RESOLVE_MIN_MS;
    log_debug(COMP, "call %p: clone to %u: outcome unknown (%d), looking", (void *)call, call->vmid,
              r);
    resolve_look(call);
}

/* True when the description Proxmox stored is the one sent (it may add a newline). */
static bool description_matches(const char *sent, const char *got)
{
    size_t n, m;

    if (!sent)
        return true;
    if (!got)
        return false;
    n = strlen(sent);
    m = strlen(got);
    while (n > 0 && (sent[n - 1] == '\n' || sent[n - 1] == ' '))
        n--;
    while (m > 0 && (got[m - 1] == '\n' || got[m - 1] == ' '))
        m--;
    return n == m && memcmp(sent, got, n) == 0;
}

/* The new id's config arrived: still locked (cloning), ours and done, or someone else's. */
static void resolve_config(struct pve_call *call)
{
    struct pve_clone_state *s = &call->u.clone;
    struct json_object *lock = NULL, *desc = NULL;

    if (call->data && json_object_object_get_ex(call->data, "lock", &lock) && lock) {
        resolve_look(call);
        return;
    }
    if (call->data)
        (void)json_object_object_get_ex(call->data, "description", &desc);
    if (!description_matches(s->description, desc ? json_object_get_string(desc) : NULL)) {
        log_debug(COMP, "call %p: %u holds another container", (void *)call, call->vmid);
        s->not_ours = true;
        pve_call_finish(call, s->unknown_error);
        return;
    }
    log_debug(COMP, "call %p: clone to %u found done", (void *)call, call->vmid);
    pve_call_finish(call, 0);
}

/* The listing of /cluster/resources arrived (the clone POST starts a task, whose end
 * finishes the call), or the new id's config while resolving. */
static void clone_step_done(struct pve_call *call)
{
    struct pve_clone_state *s = &call->u.clone;
    int r;

    if (s->resolving) {
        resolve_config(call);
        return;
    }
    pve_vm_list_free(s->in_use);
    s->in_use = TAKE_PTR(call->vms);
    r = vmid_pick(call);
    if (r < 0) {
        pve_call_finish(call, r);
        return;
    }
    clone_post(call);
}

/* "already exists" with newid 0: try another id, up to PVE_VMID_ALLOC_ATTEMPTS. */
static bool clone_step_failed(struct pve_call *call, int r)
{
    struct pve_clone_state *s = &call->u.clone;

    /* No config yet (pvedaemon has not taken the request yet): "does not exist", or 403 for
     * a token whose rights come from the pool (Proxmox checks /vms/ID first). */
    if (s->resolving) {
        if (r != -EREMOTEIO ||
            (call->perr->kind != PVE_ERR_NOT_FOUND && call->perr->kind != PVE_ERR_PERMISSION) ||
            pve_call_remaining_ms(call) == 0)
            return false;
        resolve_look(call);
        return true;
    }
    if (outcome_unknown(call, r)) {
        resolve_begin(call, r);
        return true;
    }
    if (r != -EREMOTEIO || call->ep != &pve_endpoints[PVE_EP_CLONE] || !s->auto_id ||
        call->perr->kind != PVE_ERR_EXISTS)
        return false;
    if (s->n_tried < PVE_VMID_ALLOC_ATTEMPTS)
        s->tried[s->n_tried++] = call->vmid;
    if (s->n_tried >= PVE_VMID_ALLOC_ATTEMPTS || pve_call_remaining_ms(call) == 0)
        return false;
    if (vmid_pick(call) < 0)
        return false;
    log_debug(COMP, "call %p: vmid taken, trying %u", (void *)call, call->vmid);
    clone_post(call);
    return true;
}

static void clone_result(const struct pve_call *call, struct pve_result *res)
{
    const struct pve_clone_state *s = &call->u.clone;
    bool posted = call->ep == &pve_endpoints[PVE_EP_CLONE] && call->attempts > 0;

    /* No task and the POST of this id never left, or Proxmox refused it, or the connection
     * never opened: this call created nothing. */
    if (s->resolving) {
        /* The POST's outcome stayed unknown (the id is kept: the caller cleans it up), or
         * the clone was found done, or the id holds someone else's container. */
        if (res->error != 0) {
            res->error = s->unknown_error;
            res->perr = s->unknown_perr;
            res->data = NULL;
            res->attempts = s->unknown_attempts;
        }
        if (s->not_ours)
            res->vmid = 0;
        return;
    }
    if (!call->upid && (!posted || res->error == -EREMOTEIO || res->error == -ECONNREFUSED ||
                        res->error == -EHOSTUNREACH))
        res->vmid = 0;
}

/* The strings a clone call copies from struct pve_clone_params, in the same order. */
#define CLONE_STRINGS(s)                                                                           \
    {                                                                                              \
        &(s)->node, &(s)->hostname, &(s)->description, &(s)->pool, &(s)->storage, &(s)->target,    \
            &(s)->snapname                                                                         \
    }
#define CLONE_PARAM_STRINGS(p)                                                                     \
    {                                                                                              \
        (p)->node, (p)->hostname, (p)->description, (p)->pool, (p)->storage, (p)->target,          \
            (p)->snapname                                                                          \
    }

static void clone_free(struct pve_call *call)
{
    char **own[] = CLONE_STRINGS(&call->u.clone);

    for (size_t i = 0; i < ELEMENTSOF(own); i++)
        free(*own[i]);
    pve_vm_list_free(call->u.clone.in_use);
    pve_error_free(call->u.clone.unknown_perr);
}

static void clone_task_started(struct pve_call *call)
{
    const struct pve_clone_state *s = &call->u.clone;

    if (s->on_task)
        s->on_task(call->upid, s->on_task_userdata);
}

static const struct pve_call_ops clone_ops = {
    .run = clone_run,
    .step_done = clone_step_done,
    .step_failed = clone_step_failed,
    .result = clone_result,
    .detach = clone_detach,
    .free = clone_free,
    .task_started = clone_task_started,
};

static int clone_init(struct pve_call *call, const struct pve_clone_params *p)
{
    struct pve_clone_state *s = &call->u.clone;
    const char *src[] = CLONE_PARAM_STRINGS(p);
    char **dst[] = CLONE_STRINGS(s);

    s->sources[0] = p->template_vmid;
    for (size_t i = 0; i < p->n_copies; i++)
        s->sources[1 + i] = p->copies[i];
    s->n_sources = 1 + (unsigned)p->n_copies;
    s->urgent = p->urgent;
    s->full = p->full;
    s->auto_id = p->newid == 0;
    s->taken = p->vmid_taken;
    s->taken_userdata = p->vmid_taken_userdata;
    s->on_task = p->on_task;
    s->on_task_userdata = p->on_task_userdata;
    call->vmid = p->newid;
    for (size_t i = 0; i < ELEMENTSOF(src); i++)
        if (src[i] && !(*dst[i] = strdup(src[i])))
            return -ENOMEM;
    return 0;
}

int pve_clone(struct pve_client *c, const struct pve_clone_params *p, PVE_CALL_ARGS)
{
    struct pve_call *call;
    int r;

    if (!c || !p || !p->node || !*p->node || p->template_vmid < PVE_VMID_MIN ||
        p->template_vmid > PVE_VMID_MAX || p->full < -1 || p->full > 1 ||
        p->n_copies >= PVE_CLONE_SOURCES_MAX || (p->n_copies && !p->copies))
        return -EINVAL;
    for (size_t i = 0; i < p->n_copies; i++)
        if (p->copies[i] < PVE_VMID_MIN || p->copies[i] > PVE_VMID_MAX)
            return -EINVAL;
    if (p->newid == 0 && (!c->vmid_min || !c->vmid_max))
        return -EINVAL;
    if (p->newid != 0 && (p->newid < PVE_VMID_MIN || p->newid > PVE_VMID_MAX))
        return -EINVAL;
    r = pve_call_new(c, PVE_CALL_CLONE, &clone_ops, true, timeout_ms, cb, userdata, &call);
    if (r < 0)
        return r;
    r = clone_init(call, p);
    if (r == 0)
        r = queue_enter(call);
    return pve_call_started(call, r, ret_call);
}

/* ---- pve_vmid_pick: the listing and the choice of a clone with newid 0, alone ---- */

static void pick_run(struct pve_call *call)
{
    const struct pve_req req = {.ep = PVE_EP_CLUSTER_RESOURCES};

    pve_call_step(call, &req);
}

static void pick_step_done(struct pve_call *call)
{
    struct pve_clone_state *s = &call->u.clone;

    pve_vm_list_free(s->in_use);
    s->in_use = TAKE_PTR(call->vms);
    pve_call_finish(call, vmid_pick(call));
}

static void pick_free(struct pve_call *call)
{
    pve_vm_list_free(call->u.clone.in_use);
}

static const struct pve_call_ops pick_ops = {
    .run = pick_run,
    .step_done = pick_step_done,
    .free = pick_free,
};

int pve_vmid_pick(struct pve_client *c, bool (*vmid_taken)(uint32_t vmid, void *userdata),
                  void *vmid_taken_userdata, PVE_CALL_ARGS)
{
    struct pve_call *call;
    int r;

    if (!c || !c->vmid_min || !c->vmid_max)
        return -EINVAL;
    r = pve_call_new(c, PVE_CALL_CLONE, &pick_ops, false, timeout_ms, cb, userdata, &call);
    if (r < 0)
        return r;
    call->u.clone.auto_id = true;
    call->u.clone.taken = vmid_taken;
    call->u.clone.taken_userdata = vmid_taken_userdata;
    pve_call_queue(call, true);
    return pve_call_started(call, 0, ret_call);
}
