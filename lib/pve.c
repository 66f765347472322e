/* Asynchronous Proxmox VE client: typed calls over lib/http, retries with jitter inside a
 * deadline, task waiting with backoff, per-template clone serialisation, vmid allocation. */
#include "macro.h"

#include "pve.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "log.h"

#define COMP "pve"
#define PVE_REQUEST_TIMEOUT_MS_DEFAULT 30000
#define PVE_FW_RELIST_MAX 3

enum retry_policy {
    RETRY_NONE,         /* never */
    RETRY_ALWAYS,       /* idempotent: any transient failure */
    RETRY_SAFE,         /* task-starting POST, DELETE: only when nothing can have happened */
    RETRY_NOTHING_DONE, /* clone, rule add/delete: lock/quorum/595 errors and connect failures */
};

enum call_kind {
    CALL_RAW,
    CALL_TASK, /* request returns a UPID, then wait */
    CALL_WAIT, /* wait for a given UPID */
    CALL_TASK_STATUS,
    CALL_NEXTID,
    CALL_CLONE,
    CALL_INTERFACES,
    CALL_VMS,
    CALL_FW_RULES,
    CALL_FW_GROUP,
};

enum call_step {
    STEP_MAIN,
    STEP_TASK_STATUS,
    STEP_CLONE_RESOURCES,
    STEP_CLONE_POST,
    STEP_FW_LIST,
    STEP_FW_CHANGE,
};

enum call_state {
    CALL_QUEUED,   /* clone waiting for its template */
    CALL_REQUEST,  /* HTTP request in flight */
    CALL_SLEEPING, /* backoff before a retry, or between task polls */
    CALL_DONE,     /* callback ran or cancelled; waiting for the timer to close */
};

static const char *const call_state_names[] = {
    [CALL_QUEUED] = "queued",
    [CALL_REQUEST] = "request",
    [CALL_SLEEPING] = "sleeping",
    [CALL_DONE] = "done",
};

struct clone_queue;

struct pve_call {
    struct pve_client *client;
    enum call_kind kind;
    enum call_step step;
    enum call_state state;
    pve_done_fn cb;
    void *userdata;
    uint64_t deadline; /* uv_now() ms */
    uv_timer_t timer;
    struct http_request *req;
    struct pve_call *prev, *next; /* client's list of live calls */

    /* current request */
    char *method, *path, *query, *body;
    enum retry_policy policy;
    unsigned attempts;
    uint64_t backoff_ms;
    uint64_t poll_ms;
    int last_error; /* of the last attempt of the current request, 0 if none failed */

    /* results */
    struct json_object *data;
    struct pve_error *perr;
    char *upid;
    char *task_node;
    uint32_t vmid;
    struct pve_task_status task;
    bool have_task;
    char *ipv4;
    struct pve_vm_list *vms;
    struct pve_fw_rules *rules;

    /* clone */
    struct clone_queue *queue;
    struct pve_call *qnext;
    char *c_node, *c_hostname, *c_description, *c_pool, *c_storage, *c_target;
    uint32_t c_template;
    int c_full;
    bool c_auto;
    bool c_started; /* clone_run() was called */
    bool c_posted;  /* a clone POST was sent */
    bool (*c_taken)(uint32_t, void *);
    void *c_taken_ud;
    uint32_t tried[PVE_VMID_ALLOC_ATTEMPTS];
    unsigned n_tried;
    struct pve_vm_list *in_use;

    /* firewall group */
    char *g_node, *g_group;
    uint32_t g_vmid;
    bool g_present;
    unsigned g_relists;
};

struct clone_queue {
    uint32_t template_vmid;
    struct pve_call *running;
    struct pve_call *head, *tail;
    size_t n_waiting;
    struct clone_queue *next;
};

enum client_state {
    CLIENT_OPEN,
    CLIENT_CLOSING,
};

struct pve_client {
    uv_loop_t *loop;
    struct http_client *http;
    enum client_state state;
    char *base_url;
    char *auth_header;
    uint64_t request_timeout_ms, timeout_ms, task_timeout_ms;
    uint32_t vmid_min, vmid_max;
    uint64_t rng;
    struct pve_call *calls;
    size_t n_calls; /* calls not yet finished */
    size_t n_alive; /* call structs not yet freed (timer close pending) */
    struct clone_queue *queues;
    void (*close_cb)(void *);
    void *close_userdata;
    bool http_closing;
};

static inline void put_jsonp(struct json_object **p)
{
    if (*p)
        json_object_put(*p);
}

static bool clone_try_other_id(struct pve_call *call);
static void fw_list(struct pve_call *call);

static void call_set_state(struct pve_call *call, enum call_state s)
{
    if (call->state == s)
        return;
    log_debug(COMP, "call %p: %s -> %s", (void *)call, call_state_names[call->state],
              call_state_names[s]);
    call->state = s;
}

static uint64_t rng_next(struct pve_client *c)
{
    /* xorshift64*: jitter and vmid picking only, not security relevant. */
    c->rng ^= c->rng >> 12;
    c->rng ^= c->rng << 25;
    c->rng ^= c->rng >> 27;
    return c->rng * 2685821657736338717ULL;
}

/* ---- call lifecycle ---- */

static void client_maybe_free(struct pve_client *c);

static void on_call_closed(uv_handle_t *h)
{
    struct pve_call *call = h->data;
    struct pve_client *c = call->client;

    free(call->method);
    free(call->path);
    free(call->query);
    free(call->body);
    if (call->data)
        json_object_put(call->data);
    pve_error_free(call->perr);
    free(call->upid);
    free(call->task_node);
    free(call->ipv4);
    pve_vm_list_free(call->vms);
    pve_fw_rules_free(call->rules);
    pve_vm_list_free(call->in_use);
    free(call->c_node);
    free(call->c_hostname);
    free(call->c_description);
    free(call->c_pool);
    free(call->c_storage);
    free(call->c_target);
    free(call->g_node);
    free(call->g_group);
    free(call);
    c->n_alive--;
    client_maybe_free(c);
}

static void clone_queue_release(struct pve_call *call);

/* Detaches the call from everything; the struct is freed from the timer's close callback. */
static void call_detach(struct pve_call *call)
{
    struct pve_client *c = call->client;

    call_set_state(call, CALL_DONE);
    if (call->req) {
        http_request_cancel(call->req);
        call->req = NULL;
    }
    (void)uv_timer_stop(&call->timer);
    if (call->prev)
        call->prev->next = call->next;
    else if (c->calls == call)
        c->calls = call->next;
    if (call->next)
        call->next->prev = call->prev;
    call->prev = call->next = NULL;
    c->n_calls--;
    clone_queue_release(call);
}

static void call_free_later(struct pve_call *call)
{
    uv_close((uv_handle_t *)&call->timer, on_call_closed);
}

static void call_finish(struct pve_call *call, int error)
{
    struct pve_result res = {0};

    if (call->state == CALL_DONE)
        return;
    call_detach(call);
    if (error == -EREMOTEIO && !call->perr)
        error = -EIO;
    if (call->perr && call->upid && !call->perr->upid)
        call->perr->upid = strdup(call->upid);
    res.error = error;
    res.perr = error == -EREMOTEIO ? call->perr : NULL;
    res.data = error == 0 ? call->data : NULL;
    res.upid = call->upid;
    res.vmid = call->vmid;
    if (call->kind == CALL_CLONE && !call->upid &&
        (!call->c_posted || error == -EREMOTEIO || error == -ECONNREFUSED ||
         error == -EHOSTUNREACH))
        res.vmid = 0; /* proven: this call created nothing */
    res.task = call->have_task ? &call->task : NULL;
    res.ipv4 = error == 0 ? call->ipv4 : NULL;
    res.vms = error == 0 ? call->vms : NULL;
    res.rules = error == 0 ? call->rules : NULL;
    res.attempts = call->attempts;
    log_debug(COMP, "call %p: finished error=%d%s%s", (void *)call, error,
              call->perr ? " pve: " : "", call->perr ? call->perr->message : "");
    call->cb(&res, call->userdata);
    call_free_later(call);
}

static int call_new(struct pve_client *c, enum call_kind kind, uint64_t timeout_ms, bool task_call,
                    pve_done_fn cb, void *userdata, struct pve_call **ret)
{
    struct pve_call *call;

    if (!c || !cb)
        return -EINVAL;
    if (c->state != CLIENT_OPEN)
        return -ESHUTDOWN;
    call = calloc(1, sizeof(*call));
    if (!call)
        return -ENOMEM;
    if (uv_timer_init(c->loop, &call->timer) < 0) {
        free(call);
        return -ENOMEM;
    }
    call->timer.data = call;
    call->client = c;
    call->kind = kind;
    call->cb = cb;
    call->userdata = userdata;
    call->state = CALL_REQUEST;
    if (!timeout_ms)
        timeout_ms = task_call ? c->task_timeout_ms : c->timeout_ms;
    uv_update_time(c->loop); /* the cached time may be old when called outside a callback */
    call->deadline = uv_now(c->loop) + timeout_ms;
    call->next = c->calls;
    if (c->calls)
        c->calls->prev = call;
    c->calls = call;
    c->n_calls++;
    c->n_alive++;
    *ret = call;
    return 0;
}

/* A call that failed to start: no callback. */
static void call_discard(struct pve_call *call)
{
    call_detach(call);
    call_free_later(call);
}

/* ---- requests ---- */

static void call_send(struct pve_call *call);
static void clone_run(struct pve_call *call);

static void on_timer(uv_timer_t *t)
{
    struct pve_call *call = t->data;

    if (call->state == CALL_QUEUED) {
        log_debug(COMP, "call %p: deadline passed while queued", (void *)call);
        call_finish(call, -ETIMEDOUT);
        return;
    }
    if (call->state != CALL_SLEEPING)
        return;
    if (call->kind == CALL_CLONE && !call->c_started) {
        call->c_started = true;
        clone_run(call);
        return;
    }
    call_send(call);
}

static uint64_t remaining_ms(struct pve_call *call)
{
    uint64_t now = uv_now(call->client->loop);
    return call->deadline > now ? call->deadline - now : 0;
}

/* Sleeps delay_ms (with +-25 % jitter when jitter is set), then resends. */
static void call_sleep(struct pve_call *call, uint64_t delay_ms, bool jitter)
{
    uint64_t rem = remaining_ms(call);

    if (jitter && delay_ms >= 4) {
        uint64_t span = delay_ms / 2;
        delay_ms = delay_ms - delay_ms / 4 + rng_next(call->client) % (span + 1);
    }
    if (rem == 0) {
        call_finish(call, call->last_error ? call->last_error : -ETIMEDOUT);
        return;
    }
    delay_ms = MIN(delay_ms, rem);
    call_set_state(call, CALL_SLEEPING);
    (void)uv_timer_start(&call->timer, on_timer, delay_ms, 0);
}

static int call_set_request(struct pve_call *call, const char *method, const char *path,
                            struct json_object *params, enum retry_policy policy,
                            enum call_step step)
{
    _cleanup_free_ char *enc = NULL;
    int r;

    r = pve_form_encode(params, &enc);
    if (r < 0)
        return r;
    free(call->method);
    free(call->path);
    free(call->query);
    free(call->body);
    call->query = call->body = NULL;
    call->method = strdup(method);
    call->path = strdup(path);
    if (!call->method || !call->path)
        return -ENOMEM;
    if (strcmp(method, "GET") == 0 || strcmp(method, "DELETE") == 0) {
        if (*enc)
            call->query = TAKE_PTR(enc);
    } else {
        call->body = TAKE_PTR(enc);
    }
    call->policy = policy;
    call->step = step;
    call->attempts = 0;
    call->last_error = 0;
    call->backoff_ms = PVE_RETRY_MIN_MS;
    return 0;
}

static void on_http_done(int r, struct http_response *resp, void *userdata);

static int call_send_now(struct pve_call *call)
{
    struct pve_client *c = call->client;
    _cleanup_free_ char *url = NULL;
    const char *headers[] = {c->auth_header, "Accept: application/json", NULL};
    struct http_request_opts o = {0};
    uint64_t rem = remaining_ms(call);

    if (rem == 0)
        return -ETIMEDOUT;
    if (asprintf(&url, "%s/api2/json%s%s%s", c->base_url, call->path, call->query ? "?" : "",
                 call->query ? call->query : "") < 0)
        return -ENOMEM;
    o.method = call->method;
    o.url = url;
    o.headers = headers;
    if (call->body) {
        o.body = call->body;
        o.body_len = strlen(call->body);
        o.content_type = "application/x-www-form-urlencoded";
    }
    o.timeout_ms = MIN(c->request_timeout_ms, rem);
    call->attempts++;
    if (call->step == STEP_CLONE_POST)
        call->c_posted = true;
    call_set_state(call, CALL_REQUEST);
    return http_request_start(c->http, &o, on_http_done, call, &call->req);
}

static void call_send(struct pve_call *call)
{
    int r = call_send_now(call);
    /* no time left for another attempt: report how the last one failed */
    if (r == -ETIMEDOUT && call->last_error)
        r = call->last_error;
    if (r < 0)
        call_finish(call, r);
}

static bool retry_allowed(struct pve_call *call, int r, const struct pve_error *e)
{
    bool connect_failed = r == -ECONNREFUSED || r == -EHOSTUNREACH;

    switch (call->policy) {
    case RETRY_NONE:
        return false;
    case RETRY_ALWAYS:
        return e ? pve_error_transient(e) : pve_errno_transient(r);
    case RETRY_SAFE:
        if (e)
            return pve_error_transient(e) &&
                   (e->kind != PVE_ERR_CONNECTION || e->http_status == 595);
        return connect_failed;
    case RETRY_NOTHING_DONE:
        if (e)
            return e->kind == PVE_ERR_LOCKED || e->kind == PVE_ERR_LOCK_TIMEOUT ||
                   e->kind == PVE_ERR_NO_QUORUM ||
                   (e->kind == PVE_ERR_CONNECTION && e->http_status == 595);
        return connect_failed;
    }
    return false;
}

static void call_retry_or_fail(struct pve_call *call, int r)
{
    call->last_error = r;
    if (retry_allowed(call, r, r == -EREMOTEIO ? call->perr : NULL) && remaining_ms(call) > 0) {
        uint64_t delay = call->backoff_ms;
        call->backoff_ms = MIN(call->backoff_ms * 2, (uint64_t)PVE_RETRY_MAX_MS);
        log_debug(COMP, "call %p: %s %s failed (%d%s%s), retrying in ~%" PRIu64 " ms", (void *)call,
                  call->method, call->path, r, call->perr ? ": " : "",
                  call->perr ? call->perr->message : "", delay);
        call_sleep(call, delay, true);
        return;
    }
    if (r == -EREMOTEIO && call->step == STEP_CLONE_POST && clone_try_other_id(call))
        return;
    if (r == -EREMOTEIO && call->step == STEP_FW_CHANGE && call->g_relists < PVE_FW_RELIST_MAX &&
        (call->perr->kind == PVE_ERR_SERVER || call->perr->kind == PVE_ERR_NOT_FOUND) &&
        remaining_ms(call) > 0) {
        /* digest mismatch or a moved rule: look again */
        call->g_relists++;
        fw_list(call);
        return;
    }
    call_finish(call, r);
}

static void on_response(struct pve_call *call, struct json_object *data);

static void on_http_done(int r, struct http_response *resp, void *userdata)
{
    struct pve_call *call = userdata;
    struct json_object *data = NULL;

    call->req = NULL;
    if (r < 0) {
        /* A timeout while time remains was one attempt's timeout, treat it as transient. */
        call_retry_or_fail(call, r);
        return;
    }
    if (resp->status < 200 || resp->status >= 300) {
        struct pve_error *e = NULL;
        r = pve_error_from_http(resp->status, resp->reason, resp->body, resp->body_len, &e);
        if (r < 0) {
            call_finish(call, r);
            return;
        }
        pve_error_free(call->perr);
        call->perr = e;
        call_retry_or_fail(call, -EREMOTEIO);
        return;
    }
    r = pve_parse_data(resp->body, resp->body_len, &data);
    if (r < 0) {
        call_finish(call, r);
        return;
    }
    call->perr = pve_error_free(call->perr);
    on_response(call, data);
    if (data)
        json_object_put(data);
}

/* ---- tasks ---- */

static void task_poll(struct pve_call *call)
{
    _cleanup_free_ char *path = NULL, *node = NULL;
    int r;

    r = http_url_escape(call->task_node, &node);
    if (r < 0 || asprintf(&path, "/nodes/%s/tasks/%s/status", node, call->upid) < 0) {
        call_finish(call, -ENOMEM);
        return;
    }
    r = call_set_request(call, "GET", path, NULL, RETRY_ALWAYS, STEP_TASK_STATUS);
    if (r < 0) {
        call_finish(call, r);
        return;
    }
    call_send(call);
}

static void on_poll_timer(uv_timer_t *t)
{
    task_poll(t->data);
}

static int task_begin(struct pve_call *call, const char *upid)
{
    struct pve_upid u;

    if (pve_upid_parse(upid, &u) < 0)
        return -EBADMSG;
    if (upid != call->upid) {
        free(call->upid);
        call->upid = strdup(upid);
    }
    free(call->task_node);
    call->task_node = strdup(u.node);
    if (!call->upid || !call->task_node)
        return -ENOMEM;
    call->poll_ms = PVE_TASK_POLL_MIN_MS;
    return 0;
}

static void on_task_status(struct pve_call *call, struct json_object *data)
{
    struct pve_task_status st;

    if (pve_task_status_parse(data, &st) < 0) {
        call_finish(call, -EBADMSG);
        return;
    }
    call->task = st;
    call->have_task = true;
    if (st.running) {
        uint64_t rem = remaining_ms(call);
        if (rem == 0) {
            call_finish(call, -ETIMEDOUT);
            return;
        }
        call_set_state(call, CALL_SLEEPING);
        (void)uv_timer_start(&call->timer, on_poll_timer, MIN(call->poll_ms, rem), 0);
        call->poll_ms = MIN(call->poll_ms * 2, (uint64_t)PVE_TASK_POLL_MAX_MS);
        return;
    }
    if (st.success) {
        call_finish(call, 0);
        return;
    }
    pve_error_free(call->perr);
    call->perr = NULL;
    if (pve_error_from_task(st.exitstatus, call->upid, &call->perr) < 0) {
        call_finish(call, -ENOMEM);
        return;
    }
    call_finish(call, -EREMOTEIO);
}

/* ---- clone ---- */

static struct clone_queue *clone_queue_get(struct pve_client *c, uint32_t tmpl, bool create)
{
    struct clone_queue *q;

    for (q = c->queues; q; q = q->next)
        if (q->template_vmid == tmpl)
            return q;
    if (!create)
        return NULL;
    q = calloc(1, sizeof(*q));
    if (!q)
        return NULL;
    q->template_vmid = tmpl;
    q->next = c->queues;
    c->queues = q;
    return q;
}

static void clone_queue_drop(struct pve_client *c, struct clone_queue *q)
{
    for (struct clone_queue **pp = &c->queues; *pp; pp = &(*pp)->next)
        if (*pp == q) {
            *pp = q->next;
            free(q);
            return;
        }
}

static void clone_run(struct pve_call *call);

static void clone_queue_release(struct pve_call *call)
{
    struct clone_queue *q = call->queue;
    struct pve_client *c = call->client;

    if (!q)
        return;
    call->queue = NULL;
    if (q->running == call) {
        q->running = NULL;
    } else {
        /* still waiting: unlink from the FIFO */
        struct pve_call *prev = NULL;
        for (struct pve_call *it = q->head; it; prev = it, it = it->qnext)
            if (it == call) {
                if (prev)
                    prev->qnext = it->qnext;
                else
                    q->head = it->qnext;
                if (q->tail == it)
                    q->tail = prev;
                q->n_waiting--;
                break;
            }
        call->qnext = NULL;
        if (!q->running && !q->head)
            clone_queue_drop(c, q);
        return;
    }
    if (q->head && c->state == CLIENT_OPEN) {
        struct pve_call *next = q->head;
        q->head = next->qnext;
        if (!q->head)
            q->tail = NULL;
        q->n_waiting--;
        next->qnext = NULL;
        next->queue = q;
        q->running = next;
        next->c_started = true;
        (void)uv_timer_stop(&next->timer);
        log_debug(COMP, "template %u: next clone %p starts", q->template_vmid, (void *)next);
        clone_run(next);
        return;
    }
    if (!q->head)
        clone_queue_drop(c, q);
}

static bool vmid_busy(struct pve_call *call, uint32_t id)
{
    struct pve_client *c = call->client;

    if (call->in_use && pve_vm_list_find(call->in_use, id))
        return true;
    for (unsigned i = 0; i < call->n_tried; i++)
        if (call->tried[i] == id)
            return true;
    for (struct pve_call *o = c->calls; o; o = o->next)
        if (o != call && o->kind == CALL_CLONE && o->vmid == id)
            return true;
    if (call->c_taken && call->c_taken(id, call->c_taken_ud))
        return true;
    return false;
}

static int clone_pick_vmid(struct pve_call *call)
{
    struct pve_client *c = call->client;
    uint64_t span = (uint64_t)c->vmid_max - c->vmid_min + 1;
    uint64_t start = rng_next(c) % span;

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

static void clone_post(struct pve_call *call)
{
    _cleanup_(put_jsonp) struct json_object *p = json_object_new_object();
    _cleanup_free_ char *path = NULL, *node = NULL;
    int r;

    if (!p)
        goto oom;
    if (json_object_object_add(p, "newid", json_object_new_int64(call->vmid)) < 0)
        goto oom;
    if (call->c_hostname &&
        json_object_object_add(p, "hostname", json_object_new_string(call->c_hostname)) < 0)
        goto oom;
    if (call->c_description &&
        json_object_object_add(p, "description", json_object_new_string(call->c_description)) < 0)
        goto oom;
    if (call->c_pool && json_object_object_add(p, "pool", json_object_new_string(call->c_pool)) < 0)
        goto oom;
    if (call->c_full >= 0 &&
        json_object_object_add(p, "full", json_object_new_boolean(call->c_full > 0)) < 0)
        goto oom;
    if (call->c_storage &&
        json_object_object_add(p, "storage", json_object_new_string(call->c_storage)) < 0)
        goto oom;
    if (call->c_target &&
        json_object_object_add(p, "target", json_object_new_string(call->c_target)) < 0)
        goto oom;
    if (http_url_escape(call->c_node, &node) < 0 ||
        asprintf(&path, "/nodes/%s/lxc/%u/clone", node, call->c_template) < 0)
        goto oom;
    r = call_set_request(call, "POST", path, p, RETRY_NOTHING_DONE, STEP_CLONE_POST);
    if (r < 0) {
        call_finish(call, r);
        return;
    }
    log_debug(COMP, "call %p: cloning %u -> %u", (void *)call, call->c_template, call->vmid);
    call_send(call);
    return;
oom:
    call_finish(call, -ENOMEM);
}

static void clone_run(struct pve_call *call)
{
    int r;

    if (!call->c_auto) {
        clone_post(call);
        return;
    }
    r = call_set_request(call, "GET", "/cluster/resources", NULL, RETRY_ALWAYS,
                         STEP_CLONE_RESOURCES);
    if (r == 0) {
        /* the query string is the only parameter */
        call->query = strdup("type=vm");
        if (!call->query)
            r = -ENOMEM;
    }
    if (r < 0) {
        call_finish(call, r);
        return;
    }
    call_send(call);
}

/* "already exists": pick another id (auto mode) and post again. */
static bool clone_try_other_id(struct pve_call *call)
{
    if (!call->c_auto || !call->perr || call->perr->kind != PVE_ERR_EXISTS)
        return false;
    if (call->n_tried < PVE_VMID_ALLOC_ATTEMPTS)
        call->tried[call->n_tried++] = call->vmid;
    if (call->n_tried >= PVE_VMID_ALLOC_ATTEMPTS || remaining_ms(call) == 0)
        return false;
    if (clone_pick_vmid(call) < 0)
        return false;
    log_debug(COMP, "call %p: vmid taken, trying %u", (void *)call, call->vmid);
    clone_post(call);
    return true;
}

/* ---- firewall group ---- */

static void fw_list(struct pve_call *call)
{
    _cleanup_free_ char *path = NULL, *node = NULL;
    int r;

    if (http_url_escape(call->g_node, &node) < 0 ||
        asprintf(&path, "/nodes/%s/lxc/%u/firewall/rules", node, call->g_vmid) < 0) {
        call_finish(call, -ENOMEM);
        return;
    }
    r = call_set_request(call, "GET", path, NULL, RETRY_ALWAYS, STEP_FW_LIST);
    if (r < 0) {
        call_finish(call, r);
        return;
    }
    call_send(call);
}

static void fw_change(struct pve_call *call, struct pve_fw_rules *rules)
{
    _cleanup_free_ char *path = NULL, *node = NULL;
    _cleanup_(put_jsonp) struct json_object *p = json_object_new_object();
    int pos = pve_fw_rules_find_group(rules, call->g_group);
    int r;

    if (!p || http_url_escape(call->g_node, &node) < 0)
        goto oom;
    if ((pos >= 0) == call->g_present) {
        call_finish(call, 0);
        return;
    }
    if (call->g_present) {
        if (asprintf(&path, "/nodes/%s/lxc/%u/firewall/rules", node, call->g_vmid) < 0)
            goto oom;
        if (json_object_object_add(p, "type", json_object_new_string("group")) < 0 ||
            json_object_object_add(p, "action", json_object_new_string(call->g_group)) < 0 ||
            json_object_object_add(p, "enable", json_object_new_int(1)) < 0)
            goto oom;
        r = call_set_request(call, "POST", path, p, RETRY_NOTHING_DONE, STEP_FW_CHANGE);
    } else {
        if (asprintf(&path, "/nodes/%s/lxc/%u/firewall/rules/%d", node, call->g_vmid, pos) < 0)
            goto oom;
        if (rules->digest &&
            json_object_object_add(p, "digest", json_object_new_string(rules->digest)) < 0)
            goto oom;
        r = call_set_request(call, "DELETE", path, p, RETRY_NOTHING_DONE, STEP_FW_CHANGE);
    }
    if (r < 0) {
        call_finish(call, r);
        return;
    }
    call_send(call);
    return;
oom:
    call_finish(call, -ENOMEM);
}

/* ---- responses ---- */

static void on_response(struct pve_call *call, struct json_object *data)
{
    int r;

    switch (call->step) {
    case STEP_TASK_STATUS:
        on_task_status(call, data);
        return;
    case STEP_CLONE_RESOURCES: {
        struct pve_vm_list *l = NULL;
        r = pve_vm_list_parse(data, &l);
        if (r < 0) {
            call_finish(call, r);
            return;
        }
        pve_vm_list_free(call->in_use);
        call->in_use = l;
        r = clone_pick_vmid(call);
        if (r < 0) {
            call_finish(call, r);
            return;
        }
        clone_post(call);
        return;
    }
    case STEP_CLONE_POST:
    case STEP_MAIN:
        break;
    case STEP_FW_LIST: {
        struct pve_fw_rules *rules = NULL;
        r = pve_fw_rules_parse(data, &rules);
        if (r < 0) {
            call_finish(call, r);
            return;
        }
        pve_fw_rules_free(call->rules);
        call->rules = rules;
        fw_change(call, rules);
        return;
    }
    case STEP_FW_CHANGE:
        call_finish(call, 0);
        return;
    }

    switch (call->kind) {
    case CALL_TASK:
    case CALL_CLONE:
        if (!data || !json_object_is_type(data, json_type_string)) {
            call_finish(call, -EBADMSG);
            return;
        }
        r = task_begin(call, json_object_get_string(data));
        if (r < 0) {
            call_finish(call, r);
            return;
        }
        task_poll(call);
        return;
    case CALL_NEXTID:
        r = pve_nextid_parse(data, &call->vmid);
        if (r < 0) {
            call_finish(call, r);
            return;
        }
        break;
    case CALL_INTERFACES:
        r = pve_interfaces_pick_ipv4(data, &call->ipv4);
        if (r < 0) {
            call_finish(call, r);
            return;
        }
        break;
    case CALL_VMS:
        r = pve_vm_list_parse(data, &call->vms);
        if (r < 0) {
            call_finish(call, r);
            return;
        }
        break;
    case CALL_FW_RULES:
        r = pve_fw_rules_parse(data, &call->rules);
        if (r < 0) {
            call_finish(call, r);
            return;
        }
        break;
    case CALL_TASK_STATUS:
        r = pve_task_status_parse(data, &call->task);
        if (r < 0) {
            call_finish(call, r);
            return;
        }
        call->have_task = true;
        break;
    case CALL_WAIT:
    case CALL_RAW:
    case CALL_FW_GROUP:
        break;
    }
    if (call->data)
        json_object_put(call->data);
    call->data = data ? json_object_get(data) : NULL;
    call_finish(call, 0);
}

/* ---- public: client ---- */

int pve_client_new(uv_loop_t *loop, const struct pve_config *cfg, struct pve_client **ret_client)
{
    struct http_client_config hc = {0};
    struct pve_client *c;
    int r;

    if (!loop || !cfg || !ret_client || !cfg->base_url || !cfg->token_id || !cfg->token_secret)
        return -EINVAL;
    if (strncmp(cfg->base_url, "https://", 8) != 0 && strncmp(cfg->base_url, "http://", 7) != 0)
        return -EINVAL;
    if (strpbrk(cfg->token_id, "\r\n") || strpbrk(cfg->token_secret, "\r\n"))
        return -EINVAL;
    if (cfg->vmid_min || cfg->vmid_max) {
        if (cfg->vmid_min < PVE_VMID_MIN || cfg->vmid_max > PVE_VMID_MAX ||
            cfg->vmid_min > cfg->vmid_max)
            return -EINVAL;
    }
    c = calloc(1, sizeof(*c));
    if (!c)
        return -ENOMEM;
    c->loop = loop;
    c->request_timeout_ms =
        cfg->request_timeout_ms ? cfg->request_timeout_ms : PVE_REQUEST_TIMEOUT_MS_DEFAULT;
    c->timeout_ms = cfg->timeout_ms ? cfg->timeout_ms : PVE_TIMEOUT_MS_DEFAULT;
    c->task_timeout_ms = cfg->task_timeout_ms ? cfg->task_timeout_ms : PVE_TASK_TIMEOUT_MS_DEFAULT;
    c->vmid_min = cfg->vmid_min;
    c->vmid_max = cfg->vmid_max;
    if (getrandom(&c->rng, sizeof(c->rng), GRND_NONBLOCK) != sizeof(c->rng) || c->rng == 0)
        c->rng = (uint64_t)(uintptr_t)c ^ uv_hrtime() ^ 0x9E3779B97F4A7C15ULL;
    c->base_url = strdup(cfg->base_url);
    if (!c->base_url || asprintf(&c->auth_header, "Authorization: PVEAPIToken=%s=%s", cfg->token_id,
                                 cfg->token_secret) < 0) {
        c->auth_header = NULL;
        r = -ENOMEM;
        goto fail;
    }
    {
        size_t l = strlen(c->base_url);
        while (l > 0 && c->base_url[l - 1] == '/')
            c->base_url[--l] = 0;
    }
    hc.tls = cfg->tls;
    hc.connect_timeout_ms = cfg->connect_timeout_ms;
    hc.timeout_ms = c->request_timeout_ms;
    r = http_client_new(loop, &hc, &c->http);
    if (r < 0)
        goto fail;
    log_debug(COMP, "client %p: %s as %s", (void *)c, c->base_url, cfg->token_id);
    *ret_client = c;
    return 0;
fail:
    free(c->base_url);
    free(c->auth_header);
    free(c);
    return r;
}

static void on_http_closed(void *userdata)
{
    struct pve_client *c = userdata;
    void (*cb)(void *) = c->close_cb;
    void *ud = c->close_userdata;

    while (c->queues)
        clone_queue_drop(c, c->queues);
    free(c->base_url);
    if (c->auth_header) {
        explicit_bzero(c->auth_header, strlen(c->auth_header));
        free(c->auth_header);
    }
    free(c);
    if (cb)
        cb(ud);
}

static void client_maybe_free(struct pve_client *c)
{
    if (c->state != CLIENT_CLOSING || c->n_alive > 0 || c->http_closing)
        return;
    c->http_closing = true;
    http_client_close(c->http, on_http_closed, c);
}

void pve_client_close(struct pve_client *c, void (*close_cb)(void *userdata), void *userdata)
{
    if (!c || c->state != CLIENT_OPEN)
        return;
    c->state = CLIENT_CLOSING;
    c->close_cb = close_cb;
    c->close_userdata = userdata;
    log_debug(COMP, "client %p: closing with %zu calls in flight", (void *)c, c->n_calls);
    while (c->calls)
        call_finish(c->calls, -ECANCELED);
    client_maybe_free(c);
}

void pve_call_cancel(struct pve_call *call)
{
    if (!call || call->state == CALL_DONE)
        return;
    log_debug(COMP, "call %p: cancelled", (void *)call);
    call_discard(call);
}

size_t pve_client_in_flight(const struct pve_client *c)
{
    return c ? c->n_calls : 0;
}

/* ---- public: calls ---- */

static int start_simple(struct pve_client *c, enum call_kind kind, bool task_call,
                        const char *method, const char *path, struct json_object *params,
                        enum retry_policy policy, uint64_t timeout_ms, pve_done_fn cb,
                        void *userdata, struct pve_call **ret_call)
{
    struct pve_call *call;
    int r;

    if (!path || path[0] != '/')
        return -EINVAL;
    r = call_new(c, kind, timeout_ms, task_call, cb, userdata, &call);
    if (r < 0)
        return r;
    r = call_set_request(call, method, path, params, policy, STEP_MAIN);
    if (r == 0)
        r = call_send_now(call);
    if (r < 0) {
        call_discard(call);
        return r;
    }
    if (ret_call)
        *ret_call = call;
    return 0;
}

static int ct_path(char **ret, const char *node, uint32_t vmid, const char *suffix)
{
    _cleanup_free_ char *n = NULL;

    if (!node || !*node || vmid < PVE_VMID_MIN || vmid > PVE_VMID_MAX)
        return -EINVAL;
    if (http_url_escape(node, &n) < 0)
        return -ENOMEM;
    if (asprintf(ret, "/nodes/%s/lxc/%u%s", n, vmid, suffix) < 0)
        return -ENOMEM;
    return 0;
}

int pve_request(struct pve_client *c, const char *method, const char *path,
                struct json_object *params, PVE_CALL_ARGS)
{
    enum retry_policy p;

    if (!method)
        return -EINVAL;
    if (strcmp(method, "GET") == 0 || strcmp(method, "PUT") == 0)
        p = RETRY_ALWAYS;
    else if (strcmp(method, "POST") == 0 || strcmp(method, "DELETE") == 0)
        p = RETRY_NONE;
    else
        return -EINVAL;
    return start_simple(c, CALL_RAW, false, method, path, params, p, timeout_ms, cb, userdata,
                        ret_call);
}

int pve_version(struct pve_client *c, PVE_CALL_ARGS)
{
    return start_simple(c, CALL_RAW, false, "GET", "/version", NULL, RETRY_ALWAYS, timeout_ms, cb,
                        userdata, ret_call);
}

int pve_nextid(struct pve_client *c, PVE_CALL_ARGS)
{
    return start_simple(c, CALL_NEXTID, false, "GET", "/cluster/nextid", NULL, RETRY_ALWAYS,
                        timeout_ms, cb, userdata, ret_call);
}

static int dup_opt(char **dst, const char *src)
{
    if (!src)
        return 0;
    *dst = strdup(src);
    return *dst ? 0 : -ENOMEM;
}

int pve_clone(struct pve_client *c, const struct pve_clone_params *p, PVE_CALL_ARGS)
{
    struct pve_call *call;
    struct clone_queue *q;
    int r;

    if (!c || !p || !p->node || !*p->node || p->template_vmid < PVE_VMID_MIN ||
        p->template_vmid > PVE_VMID_MAX || p->full < -1 || p->full > 1)
        return -EINVAL;
    if (p->newid == 0 && (!c->vmid_min || !c->vmid_max))
        return -EINVAL;
    if (p->newid != 0 && (p->newid < PVE_VMID_MIN || p->newid > PVE_VMID_MAX))
        return -EINVAL;
    r = call_new(c, CALL_CLONE, timeout_ms, true, cb, userdata, &call);
    if (r < 0)
        return r;
    call->c_template = p->template_vmid;
    call->c_full = p->full;
    call->c_auto = p->newid == 0;
    call->vmid = p->newid;
    call->c_taken = p->vmid_taken;
    call->c_taken_ud = p->vmid_taken_userdata;
    if ((r = dup_opt(&call->c_node, p->node)) < 0 ||
        (r = dup_opt(&call->c_hostname, p->hostname)) < 0 ||
        (r = dup_opt(&call->c_description, p->description)) < 0 ||
        (r = dup_opt(&call->c_pool, p->pool)) < 0 ||
        (r = dup_opt(&call->c_storage, p->storage)) < 0 ||
        (r = dup_opt(&call->c_target, p->target)) < 0)
        goto fail;
    q = clone_queue_get(c, p->template_vmid, true);
    if (!q) {
        r = -ENOMEM;
        goto fail;
    }
    if (q->running && q->n_waiting >= PVE_CLONE_QUEUE_MAX) {
        r = -EBUSY;
        goto fail;
    }
    call->queue = q;
    if (q->running) {
        if (q->tail)
            q->tail->qnext = call;
        else
            q->head = call;
        q->tail = call;
        q->n_waiting++;
        call_set_state(call, CALL_QUEUED);
        (void)uv_timer_start(&call->timer, on_timer, remaining_ms(call), 0);
        log_debug(COMP, "call %p: clone of %u queued behind %p (%zu waiting)", (void *)call,
                  p->template_vmid, (void *)q->running, q->n_waiting);
    } else {
        /* Start from the loop, so that the callback never runs from inside this call. */
        q->running = call;
        call_set_state(call, CALL_SLEEPING);
        (void)uv_timer_start(&call->timer, on_timer, 0, 0);
    }
    if (ret_call)
        *ret_call = call;
    return 0;
fail:
    call_discard(call);
    return r;
}

int pve_config_get(struct pve_client *c, const char *node, uint32_t vmid, bool current,
                   PVE_CALL_ARGS)
{
    _cleanup_free_ char *path = NULL;
    _cleanup_(put_jsonp) struct json_object *p = NULL;
    int r = ct_path(&path, node, vmid, "/config");

    if (r < 0)
        return r;
    if (current) {
        p = json_object_new_object();
        if (!p || json_object_object_add(p, "current", json_object_new_boolean(1)) < 0)
            return -ENOMEM;
    }
    return start_simple(c, CALL_RAW, false, "GET", path, p, RETRY_ALWAYS, timeout_ms, cb, userdata,
                        ret_call);
}

int pve_config_put(struct pve_client *c, const char *node, uint32_t vmid,
                   struct json_object *params, PVE_CALL_ARGS)
{
    _cleanup_free_ char *path = NULL;
    int r = ct_path(&path, node, vmid, "/config");

    if (r < 0)
        return r;
    return start_simple(c, CALL_RAW, false, "PUT", path, params, RETRY_ALWAYS, timeout_ms, cb,
                        userdata, ret_call);
}

static int start_task(struct pve_client *c, const char *method, const char *node, uint32_t vmid,
                      const char *suffix, struct json_object *params, PVE_CALL_ARGS)
{
    _cleanup_free_ char *path = NULL;
    int r = ct_path(&path, node, vmid, suffix);

    if (r < 0)
        return r;
    return start_simple(c, CALL_TASK, true, method, path, params, RETRY_SAFE, timeout_ms, cb,
                        userdata, ret_call);
}

int pve_resize(struct pve_client *c, const char *node, uint32_t vmid, const char *disk,
               const char *size, PVE_CALL_ARGS)
{
    _cleanup_(put_jsonp) struct json_object *p = json_object_new_object();

    if (!disk || !size)
        return -EINVAL;
    if (!p || json_object_object_add(p, "disk", json_object_new_string(disk)) < 0 ||
        json_object_object_add(p, "size", json_object_new_string(size)) < 0)
        return -ENOMEM;
    return start_task(c, "PUT", node, vmid, "/resize", p, timeout_ms, cb, userdata, ret_call);
}

int pve_start(struct pve_client *c, const char *node, uint32_t vmid, PVE_CALL_ARGS)
{
    return start_task(c, "POST", node, vmid, "/status/start", NULL, timeout_ms, cb, userdata,
                      ret_call);
}

int pve_stop(struct pve_client *c, const char *node, uint32_t vmid, PVE_CALL_ARGS)
{
    return start_task(c, "POST", node, vmid, "/status/stop", NULL, timeout_ms, cb, userdata,
                      ret_call);
}

int pve_shutdown(struct pve_client *c, const char *node, uint32_t vmid, unsigned shutdown_timeout_s,
                 bool force_stop, PVE_CALL_ARGS)
{
    _cleanup_(put_jsonp) struct json_object *p = json_object_new_object();

    if (!p || json_object_object_add(p, "timeout", json_object_new_int64(shutdown_timeout_s)) < 0 ||
        json_object_object_add(p, "forceStop", json_object_new_boolean(force_stop)) < 0)
        return -ENOMEM;
    return start_task(c, "POST", node, vmid, "/status/shutdown", p, timeout_ms, cb, userdata,
                      ret_call);
}

int pve_delete(struct pve_client *c, const char *node, uint32_t vmid, unsigned flags, PVE_CALL_ARGS)
{
    _cleanup_(put_jsonp) struct json_object *p = json_object_new_object();

    if (!p)
        return -ENOMEM;
    if ((flags & PVE_DELETE_FORCE) &&
        json_object_object_add(p, "force", json_object_new_boolean(1)) < 0)
        return -ENOMEM;
    if ((flags & PVE_DELETE_PURGE) &&
        json_object_object_add(p, "purge", json_object_new_boolean(1)) < 0)
        return -ENOMEM;
    if ((flags & PVE_DELETE_DESTROY_UNREFERENCED) &&
        json_object_object_add(p, "destroy-unreferenced-disks", json_object_new_boolean(1)) < 0)
        return -ENOMEM;
    return start_task(c, "DELETE", node, vmid, "", p, timeout_ms, cb, userdata, ret_call);
}

int pve_status_current(struct pve_client *c, const char *node, uint32_t vmid, PVE_CALL_ARGS)
{
    _cleanup_free_ char *path = NULL;
    int r = ct_path(&path, node, vmid, "/status/current");

    if (r < 0)
        return r;
    return start_simple(c, CALL_RAW, false, "GET", path, NULL, RETRY_ALWAYS, timeout_ms, cb,
                        userdata, ret_call);
}

int pve_interfaces(struct pve_client *c, const char *node, uint32_t vmid, PVE_CALL_ARGS)
{
    _cleanup_free_ char *path = NULL;
    int r = ct_path(&path, node, vmid, "/interfaces");

    if (r < 0)
        return r;
    return start_simple(c, CALL_INTERFACES, false, "GET", path, NULL, RETRY_ALWAYS, timeout_ms, cb,
                        userdata, ret_call);
}

static int task_path(char **ret, const char *node, const char *upid, const char *suffix)
{
    _cleanup_free_ char *n = NULL;
    struct pve_upid u;

    if (!upid || pve_upid_parse(upid, &u) < 0)
        return -EINVAL;
    if (!node || !*node)
        node = u.node;
    if (http_url_escape(node, &n) < 0 || asprintf(ret, "/nodes/%s/tasks/%s%s", n, upid, suffix) < 0)
        return -ENOMEM;
    return 0;
}

int pve_task_status(struct pve_client *c, const char *node, const char *upid, PVE_CALL_ARGS)
{
    _cleanup_free_ char *path = NULL;
    struct pve_call *call;
    int r = task_path(&path, node, upid, "/status");

    if (r < 0)
        return r;
    r = call_new(c, CALL_TASK_STATUS, timeout_ms, false, cb, userdata, &call);
    if (r < 0)
        return r;
    r = call_set_request(call, "GET", path, NULL, RETRY_ALWAYS, STEP_MAIN);
    if (r == 0 && !(call->upid = strdup(upid)))
        r = -ENOMEM;
    if (r == 0)
        r = call_send_now(call);
    if (r < 0) {
        call_discard(call);
        return r;
    }
    if (ret_call)
        *ret_call = call;
    return 0;
}

int pve_task_log(struct pve_client *c, const char *node, const char *upid, unsigned start,
                 unsigned limit, PVE_CALL_ARGS)
{
    _cleanup_free_ char *path = NULL;
    _cleanup_(put_jsonp) struct json_object *p = json_object_new_object();
    int r = task_path(&path, node, upid, "/log");

    if (r < 0)
        return r;
    if (!p || json_object_object_add(p, "start", json_object_new_int64(start)) < 0 ||
        json_object_object_add(p, "limit", json_object_new_int64(limit)) < 0)
        return -ENOMEM;
    return start_simple(c, CALL_RAW, false, "GET", path, p, RETRY_ALWAYS, timeout_ms, cb, userdata,
                        ret_call);
}

int pve_wait_task(struct pve_client *c, const char *node, const char *upid, PVE_CALL_ARGS)
{
    _cleanup_free_ char *path = NULL;
    struct pve_call *call;
    int r = task_path(&path, node, upid, "/status");

    if (r < 0)
        return r;
    r = call_new(c, CALL_WAIT, timeout_ms, true, cb, userdata, &call);
    if (r < 0)
        return r;
    r = task_begin(call, upid);
    if (r == 0 && node && *node) {
        free(call->task_node);
        if (!(call->task_node = strdup(node)))
            r = -ENOMEM;
    }
    if (r == 0)
        r = call_set_request(call, "GET", path, NULL, RETRY_ALWAYS, STEP_TASK_STATUS);
    if (r == 0)
        r = call_send_now(call);
    if (r < 0) {
        call_discard(call);
        return r;
    }
    if (ret_call)
        *ret_call = call;
    return 0;
}

int pve_pool_members(struct pve_client *c, const char *poolid, PVE_CALL_ARGS)
{
    _cleanup_free_ char *path = NULL, *esc = NULL;

    if (!poolid || !*poolid)
        return -EINVAL;
    if (http_url_escape(poolid, &esc) < 0 || asprintf(&path, "/pools/%s", esc) < 0)
        return -ENOMEM;
    return start_simple(c, CALL_VMS, false, "GET", path, NULL, RETRY_ALWAYS, timeout_ms, cb,
                        userdata, ret_call);
}

int pve_cluster_resources(struct pve_client *c, PVE_CALL_ARGS)
{
    _cleanup_(put_jsonp) struct json_object *p = json_object_new_object();

    if (!p || json_object_object_add(p, "type", json_object_new_string("vm")) < 0)
        return -ENOMEM;
    return start_simple(c, CALL_VMS, false, "GET", "/cluster/resources", p, RETRY_ALWAYS,
                        timeout_ms, cb, userdata, ret_call);
}

int pve_lxc_list(struct pve_client *c, const char *node, PVE_CALL_ARGS)
{
    _cleanup_free_ char *path = NULL, *n = NULL;

    if (!node || !*node)
        return -EINVAL;
    if (http_url_escape(node, &n) < 0 || asprintf(&path, "/nodes/%s/lxc", n) < 0)
        return -ENOMEM;
    return start_simple(c, CALL_VMS, false, "GET", path, NULL, RETRY_ALWAYS, timeout_ms, cb,
                        userdata, ret_call);
}

int pve_cluster_fw_options_get(struct pve_client *c, PVE_CALL_ARGS)
{
    return start_simple(c, CALL_RAW, false, "GET", "/cluster/firewall/options", NULL, RETRY_ALWAYS,
                        timeout_ms, cb, userdata, ret_call);
}

int pve_fw_options_put(struct pve_client *c, const char *node, uint32_t vmid,
                       struct json_object *params, PVE_CALL_ARGS)
{
    _cleanup_free_ char *path = NULL;
    int r = ct_path(&path, node, vmid, "/firewall/options");

    if (r < 0)
        return r;
    return start_simple(c, CALL_RAW, false, "PUT", path, params, RETRY_ALWAYS, timeout_ms, cb,
                        userdata, ret_call);
}

int pve_fw_ipset_create(struct pve_client *c, const char *node, uint32_t vmid, const char *name,
                        PVE_CALL_ARGS)
{
    _cleanup_free_ char *path = NULL;
    _cleanup_(put_jsonp) struct json_object *p = NULL;
    int r;

    if (!name || !*name)
        return -EINVAL;
    r = ct_path(&path, node, vmid, "/firewall/ipset");
    if (r < 0)
        return r;
    p = json_object_new_object();
    if (!p || json_object_object_add(p, "name", json_object_new_string(name)) < 0)
        return -ENOMEM;
    return start_simple(c, CALL_RAW, false, "POST", path, p, RETRY_NOTHING_DONE, timeout_ms, cb,
                        userdata, ret_call);
}

int pve_fw_ipset_add(struct pve_client *c, const char *node, uint32_t vmid, const char *name,
                     const char *cidr, PVE_CALL_ARGS)
{
    _cleanup_free_ char *path = NULL, *n = NULL, *suffix = NULL;
    _cleanup_(put_jsonp) struct json_object *p = NULL;
    int r;

    if (!name || !*name || !cidr || !*cidr)
        return -EINVAL;
    if (http_url_escape(name, &n) < 0 || asprintf(&suffix, "/firewall/ipset/%s", n) < 0)
        return -ENOMEM;
    r = ct_path(&path, node, vmid, suffix);
    if (r < 0)
        return r;
    p = json_object_new_object();
    if (!p || json_object_object_add(p, "cidr", json_object_new_string(cidr)) < 0)
        return -ENOMEM;
    return start_simple(c, CALL_RAW, false, "POST", path, p, RETRY_NOTHING_DONE, timeout_ms, cb,
                        userdata, ret_call);
}

bool pve_error_exists(const struct pve_result *res)
{
    if (!res || res->error != -EREMOTEIO || !res->perr)
        return false;
    if (res->perr->message && strstr(res->perr->message, "already exists"))
        return true;
    if (!res->perr->errors)
        return false;
    json_object_object_foreach(res->perr->errors, k, v)
    {
        (void)k;
        if (json_object_is_type(v, json_type_string) &&
            strstr(json_object_get_string(v), "already exists"))
            return true;
    }
    return false;
}

int pve_fw_rules_list(struct pve_client *c, const char *node, uint32_t vmid, PVE_CALL_ARGS)
{
    _cleanup_free_ char *path = NULL;
    int r = ct_path(&path, node, vmid, "/firewall/rules");

    if (r < 0)
        return r;
    return start_simple(c, CALL_FW_RULES, false, "GET", path, NULL, RETRY_ALWAYS, timeout_ms, cb,
                        userdata, ret_call);
}

int pve_fw_rule_add(struct pve_client *c, const char *node, uint32_t vmid,
                    struct json_object *params, PVE_CALL_ARGS)
{
    _cleanup_free_ char *path = NULL;
    int r = ct_path(&path, node, vmid, "/firewall/rules");

    if (r < 0)
        return r;
    return start_simple(c, CALL_RAW, false, "POST", path, params, RETRY_NOTHING_DONE, timeout_ms,
                        cb, userdata, ret_call);
}

int pve_fw_rule_delete(struct pve_client *c, const char *node, uint32_t vmid, int pos,
                       const char *digest, PVE_CALL_ARGS)
{
    _cleanup_free_ char *path = NULL, *suffix = NULL;
    _cleanup_(put_jsonp) struct json_object *p = json_object_new_object();
    int r;

    if (pos < 0)
        return -EINVAL;
    if (!p || asprintf(&suffix, "/firewall/rules/%d", pos) < 0)
        return -ENOMEM;
    r = ct_path(&path, node, vmid, suffix);
    if (r < 0)
        return r;
    if (digest && json_object_object_add(p, "digest", json_object_new_string(digest)) < 0)
        return -ENOMEM;
    return start_simple(c, CALL_RAW, false, "DELETE", path, p, RETRY_NOTHING_DONE, timeout_ms, cb,
                        userdata, ret_call);
}

int pve_fw_group_set(struct pve_client *c, const char *node, uint32_t vmid, const char *group,
                     bool present, PVE_CALL_ARGS)
{
    _cleanup_free_ char *path = NULL;
    struct pve_call *call;
    int r;

    if (!group || !*group)
        return -EINVAL;
    r = ct_path(&path, node, vmid, "/firewall/rules");
    if (r < 0)
        return r;
    r = call_new(c, CALL_FW_GROUP, timeout_ms, false, cb, userdata, &call);
    if (r < 0)
        return r;
    call->g_vmid = vmid;
    call->g_present = present;
    if (!(call->g_node = strdup(node)) || !(call->g_group = strdup(group)))
        r = -ENOMEM;
    if (r == 0)
        r = call_set_request(call, "GET", path, NULL, RETRY_ALWAYS, STEP_FW_LIST);
    if (r == 0)
        r = call_send_now(call);
    if (r < 0) {
        call_discard(call);
        return r;
    }
    if (ret_call)
        *ret_call = call;
    return 0;
}
