/* The Proxmox call engine: the client, one struct pve_call per typed call, its HTTP requests
 * (one endpoint row of pve-endpoint.c each), retries with jitter inside the call's deadline,
 * and waiting for tasks. Kinds of calls with several requests add their steps through
 * struct pve_call_ops (pve-clone.c, pve-fw.c). */
#include "macro.h"

#include "pve-internal.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "list.h"
#include "log.h"
#include "metrics.h"
#include "util.h"

#define COMP "pve"
#define PVE_REQUEST_TIMEOUT_MS_DEFAULT 30000

static const char *const call_state_names[] = {
    [PVE_CALL_QUEUED] = "queued",     [PVE_CALL_REQUEST] = "request",
    [PVE_CALL_SLEEPING] = "sleeping", [PVE_CALL_THROTTLED] = "throttled",
    [PVE_CALL_DONE] = "done",
};

static void call_set_state(struct pve_call *call, enum pve_call_state s)
{
    if (call->state == s)
        return;
    log_debug(COMP, "call %p: %s -> %s", (void *)call, call_state_names[call->state],
              call_state_names[s]);
    call->state = s;
}

uint64_t pve_client_random(struct pve_client *c)
{
    /* xorshift64*: jitter and vmid picking only, not security relevant. */
    c->rng ^= c->rng >> 12;
    c->rng ^= c->rng << 25;
    c->rng ^= c->rng >> 27;
    return c->rng * 2685821657736338717ULL;
}

uint64_t pve_call_remaining_ms(const struct pve_call *call)
{
    uint64_t now = uv_now(call->client->loop);
    return call->deadline > now ? call->deadline - now : 0;
}

/* ---- call lifecycle ---- */

static void client_maybe_free(struct pve_client *c);
static void slot_release(struct pve_call *call);
static void slot_unwait(struct pve_call *call);

static void on_call_closed(uv_handle_t *h)
{
    struct pve_call *call = h->data;
    struct pve_client *c = call->client;

    if (call->ops && call->ops->free)
        call->ops->free(call);
    FREE_MANY(call->path, call->query, call->body, call->upid, call->task_node, call->ipv4);
    if (call->data)
        json_object_put(call->data);
    pve_error_free(call->perr);
    pve_vm_list_free(call->vms);
    pve_fw_rules_free(call->rules);
    free(call);
    c->n_alive--;
    client_maybe_free(c);
}

/* Detaches the call from everything; the struct is freed from the timer's close callback. */
static void call_detach(struct pve_call *call)
{
    struct pve_client *c = call->client;

    call_set_state(call, PVE_CALL_DONE);
    if (call->req) {
        http_request_cancel(call->req);
        call->req = NULL;
    }
    (void)uv_timer_stop(&call->timer);
    slot_unwait(call);
    slot_release(call);
    LIST_REMOVE(c->calls, call);
    c->n_calls--;
    if (call->ops && call->ops->detach)
        call->ops->detach(call);
}

/* A call that failed to start, or a cancelled one: no callback. */
static void call_discard(struct pve_call *call)
{
    call_detach(call);
    uv_close((uv_handle_t *)&call->timer, on_call_closed);
}

void pve_call_finish(struct pve_call *call, int error)
{
    struct pve_result res = {0};

    if (call->state == PVE_CALL_DONE)
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
    res.task = call->have_task ? &call->task : NULL;
    res.ipv4 = error == 0 ? call->ipv4 : NULL;
    res.ct_state = error == 0 ? call->ct_state : PVE_CT_UNKNOWN;
    res.vms = error == 0 ? call->vms : NULL;
    res.rules = error == 0 ? call->rules : NULL;
    res.attempts = call->attempts;
    if (call->ops && call->ops->result)
        call->ops->result(call, &res);
    log_debug(COMP, "call %p: finished error=%d%s%s", (void *)call, error,
              call->perr ? " pve: " : "", call->perr ? call->perr->message : "");
    call->cb(&res, call->userdata);
    uv_close((uv_handle_t *)&call->timer, on_call_closed);
}

int pve_call_new(struct pve_client *c, enum pve_call_kind kind, const struct pve_call_ops *ops,
                 bool task, uint64_t timeout_ms, pve_done_fn cb, void *userdata,
                 struct pve_call **ret_call)
{
    struct pve_call *call;

    if (!c || !cb)
        return -EINVAL;
    if (c->state != PVE_CLIENT_OPEN)
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
    call->ops = ops;
    call->cb = cb;
    call->userdata = userdata;
    call->state = PVE_CALL_REQUEST;
    if (!timeout_ms)
        timeout_ms = task ? c->task_timeout_ms : c->timeout_ms;
    uv_update_time(c->loop); /* the cached time may be old when called outside a callback */
    call->deadline = uv_now(c->loop) + timeout_ms;
    LIST_PREPEND(c->calls, call);
    c->n_calls++;
    c->n_alive++;
    *ret_call = call;
    return 0;
}

int pve_call_started(struct pve_call *call, int r, struct pve_call **ret_call)
{
    if (r < 0) {
        call_discard(call);
        return r;
    }
    if (ret_call)
        *ret_call = call;
    return 0;
}

/* ---- requests ---- */

static void call_send(struct pve_call *call);

static void on_timer(uv_timer_t *t)
{
    struct pve_call *call = t->data;

    if (call->state == PVE_CALL_QUEUED) {
        if (pve_call_remaining_ms(call) == 0) {
            log_debug(COMP, "call %p: deadline passed while queued", (void *)call);
            pve_call_finish(call, -ETIMEDOUT);
            return;
        }
        pve_call_run(call);
        return;
    }
    if (call->state == PVE_CALL_SLEEPING)
        call_send(call);
    else if (call->state == PVE_CALL_THROTTLED) {
        if (call->slot) { /* its turn came */
            call_send(call);
            return;
        }
        log_debug(COMP, "call %p: deadline passed waiting for its node", (void *)call);
        pve_call_finish(call, call->last_error ? call->last_error : -ETIMEDOUT);
    }
}

void pve_call_queue(struct pve_call *call, bool run_now)
{
    call_set_state(call, PVE_CALL_QUEUED);
    /* Either way from the loop, so that the callback never runs from inside the start. */
    (void)uv_timer_start(&call->timer, on_timer, run_now ? 0 : pve_call_remaining_ms(call), 0);
}

void pve_call_run(struct pve_call *call)
{
    (void)uv_timer_stop(&call->timer);
    call->ops->run(call);
}

/* Sleeps delay_ms (with +-25 % jitter when jitter is set), then sends the request again. */
static void call_sleep(struct pve_call *call, uint64_t delay_ms, bool jitter)
{
    uint64_t rem = pve_call_remaining_ms(call);

    if (jitter && delay_ms >= 4) {
        uint64_t span = delay_ms / 2;
        delay_ms = delay_ms - delay_ms / 4 + pve_client_random(call->client) % (span + 1);
    }
    if (rem == 0) {
        pve_call_finish(call, call->last_error ? call->last_error : -ETIMEDOUT);
        return;
    }
    delay_ms = MIN(delay_ms, rem);
    call_set_state(call, PVE_CALL_SLEEPING);
    (void)uv_timer_start(&call->timer, on_timer, delay_ms, 0);
}

/* A fresh count of attempts and backoff for the current request. */
static void request_rearm(struct pve_call *call)
{
    call->attempts = 0;
    call->last_error = 0;
    call->backoff_ms = PVE_RETRY_MIN_MS;
}

static int call_set_request(struct pve_call *call, const struct pve_req *req)
{
    const struct pve_endpoint *ep = &pve_endpoints[req->ep];
    _cleanup_(pve_json_putp) struct json_object *built = NULL;
    _cleanup_free_ char *path = NULL, *enc = NULL;
    struct json_object *params = req->params;
    int r;

    r = pve_endpoint_path(ep, &req->path, &path);
    if (r < 0)
        return r;
    if (req->pv) {
        r = pve_params_new(req->pv, req->n_pv, &built);
        if (r < 0)
            return r;
        params = built;
    }
    r = pve_form_encode(params, &enc);
    if (r < 0)
        return r;
    FREE_MANY(call->path, call->query, call->body);
    call->path = TAKE_PTR(path);
    call->query = call->body = NULL;
    /* Proxmox takes GET and DELETE parameters in the query string only (a DELETE with a
     * body is refused with 501). */
    if (strcmp(ep->method, "GET") == 0 || strcmp(ep->method, "DELETE") == 0) {
        if (*enc)
            call->query = TAKE_PTR(enc);
    } else {
        call->body = TAKE_PTR(enc);
    }
    call->ep = ep;
    request_rearm(call);
    return 0;
}

static void on_http_done(int r, struct http_response *resp, void *userdata);

/* ---- the per-node cap ---- */

/* The node of a path under /nodes/NODE/ into node[size]; false for any other path. */
static bool path_node(const char *path, char *node, size_t size)
{
    const char *p, *end;

    if (!path || strncmp(path, "/nodes/", 7) != 0)
        return false;
    p = path + 7;
    end = strchr(p, '/');
    if (!end || end == p || (size_t)(end - p) >= size)
        return false;
    memcpy(node, p, (size_t)(end - p));
    node[end - p] = '\0';
    return true;
}

static int slots_get(struct pve_client *c, const char *node, struct pve_node_slots **ret)
{
    struct pve_node_slots *s;

    for (s = c->slots; s; s = s->next)
        if (strcmp(s->node, node) == 0) {
            *ret = s;
            return 0;
        }
    s = calloc(1, sizeof(*s));
    if (!s || !(s->node = strdup(node))) {
        free(s);
        return -ENOMEM;
    }
    s->next = c->slots;
    c->slots = s;
    *ret = s;
    return 0;
}

/* Takes a slot of the request's node. Returns 1 when the call may send now, 0 when it waits
 * (state PVE_CALL_THROTTLED until its turn or its deadline), -ENOMEM. */
static int slot_acquire(struct pve_call *call, uint64_t rem)
{
    struct pve_client *c = call->client;
    struct pve_node_slots *s;
    char node[64];
    int r;

    if (call->slot || !path_node(call->path, node, sizeof node))
        return 1;
    r = slots_get(c, node, &s);
    if (r < 0)
        return r;
    if (s->busy < c->max_calls_per_node && !s->wait_head) {
        s->busy++;
        call->slot = s;
        return 1;
    }
    call->waits = s;
    call->wait_next = NULL;
    if (s->wait_tail)
        s->wait_tail->wait_next = call;
    else
        s->wait_head = call;
    s->wait_tail = call;
    call_set_state(call, PVE_CALL_THROTTLED);
    (void)uv_timer_start(&call->timer, on_timer, rem, 0);
    log_debug(COMP, "call %p: %s has %u requests in flight, waiting", (void *)call, node, s->busy);
    return 0;
}

/* Leaves the queue of its node (a call that ends while waiting). */
static void slot_unwait(struct pve_call *call)
{
    struct pve_node_slots *s = call->waits;
    struct pve_call **pp, *prev = NULL;

    if (!s)
        return;
    for (pp = &s->wait_head; *pp; prev = *pp, pp = &(*pp)->wait_next)
        if (*pp == call) {
            *pp = call->wait_next;
            if (s->wait_tail == call)
                s->wait_tail = prev;
            break;
        }
    call->waits = NULL;
    call->wait_next = NULL;
}

/* Gives the call's slot back; the first waiting call of the node gets it and is sent from
 * the loop. */
static void slot_release(struct pve_call *call)
{
    struct pve_node_slots *s = call->slot;
    struct pve_call *next;

    if (!s)
        return;
    call->slot = NULL;
    next = s->wait_head;
    if (!next) {
        s->busy--;
        return;
    }
    slot_unwait(next);
    next->slot = s; /* the slot passes on: busy stays */
    (void)uv_timer_start(&next->timer, on_timer, 0, 0);
}

static int call_send_now(struct pve_call *call)
{
    struct pve_client *c = call->client;
    _cleanup_free_ char *url = NULL;
    const char *headers[] = {c->auth_header, "Accept: application/json", NULL};
    struct http_request_opts o = {0};
    uint64_t rem = pve_call_remaining_ms(call);
    const char *sep = strchr(call->path, '?') ? "&" : "?";

    int r;

    if (rem == 0)
        return -ETIMEDOUT;
    r = slot_acquire(call, rem);
    if (r <= 0)
        return r;
    if (asprintf(&url, "%s/api2/json%s%s%s", c->base_url, call->path, call->query ? sep : "",
                 call->query ? call->query : "") < 0)
        return -ENOMEM;
    o.method = call->ep->method;
    o.url = url;
    o.headers = headers;
    if (call->body) {
        o.body = call->body;
        o.body_len = strlen(call->body);
        o.content_type = "application/x-www-form-urlencoded";
    }
    o.timeout_ms = MIN(c->request_timeout_ms, rem);
    call->attempts++;
    call_set_state(call, PVE_CALL_REQUEST);
    return http_request_start(c->http, &o, on_http_done, call, &call->req);
}

static void call_send(struct pve_call *call)
{
    int r = call_send_now(call);
    /* no time left for another attempt: report how the last one failed */
    if (r == -ETIMEDOUT && call->last_error)
        r = call->last_error;
    if (r < 0)
        pve_call_finish(call, r);
}

int pve_call_request(struct pve_call *call, const struct pve_req *req)
{
    int r = call_set_request(call, req);
    if (r < 0)
        return r;
    return call_send_now(call);
}

void pve_call_step(struct pve_call *call, const struct pve_req *req)
{
    int r = call_set_request(call, req);
    if (r < 0) {
        pve_call_finish(call, r);
        return;
    }
    call_send(call);
}

void pve_call_step_after(struct pve_call *call, const struct pve_req *req, uint64_t delay_ms)
{
    int r = call_set_request(call, req);
    if (r < 0) {
        pve_call_finish(call, r);
        return;
    }
    call_sleep(call, delay_ms, false);
}

/* ---- retries ---- */

static bool retry_allowed(const struct pve_call *call, int r, const struct pve_error *e)
{
    bool connect_failed = r == -ECONNREFUSED || r == -EHOSTUNREACH;

    switch (call->ep->retry) {
    case PVE_RETRY_NONE:
        return false;
    case PVE_RETRY_ALWAYS:
        return e ? pve_error_transient(e) : pve_errno_transient(r);
    case PVE_RETRY_SAFE:
        /* 596..599 may come after the request reached the node */
        if (e)
            return pve_error_transient(e) &&
                   (e->kind != PVE_ERR_CONNECTION || e->http_status == 595);
        return connect_failed;
    case PVE_RETRY_NOTHING_DONE:
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
    if (retry_allowed(call, r, r == -EREMOTEIO ? call->perr : NULL) &&
        pve_call_remaining_ms(call) > 0) {
        uint64_t delay = call->backoff_ms;
        call->backoff_ms = MIN(call->backoff_ms * 2, (uint64_t)PVE_RETRY_MAX_MS);
        log_debug(COMP, "call %p: %s %s failed (%d%s%s), retrying in ~%" PRIu64 " ms", (void *)call,
                  call->ep->method, call->path, r, call->perr ? ": " : "",
                  call->perr ? call->perr->message : "", delay);
        call_sleep(call, delay, true);
        return;
    }
    if (call->ops && call->ops->step_failed && call->ops->step_failed(call, r))
        return;
    pve_call_finish(call, r);
}

/* ---- tasks ---- */

static int task_begin(struct pve_call *call, const char *upid, const char *node)
{
    struct pve_upid u;

    if (pve_upid_parse(upid, &u) < 0)
        return -EBADMSG;
    if (upid != call->upid) {
        free(call->upid);
        call->upid = strdup(upid);
    }
    free(call->task_node);
    call->task_node = strdup(node && *node ? node : u.node);
    if (!call->upid || !call->task_node)
        return -ENOMEM;
    call->poll_ms = PVE_TASK_POLL_MIN_MS;
    call->polling = true;
    if (call->ops && call->ops->task_started)
        call->ops->task_started(call);
    return 0;
}

static struct pve_req task_status_req(const struct pve_call *call)
{
    return (struct pve_req){.ep = PVE_EP_TASK_STATUS,
                            .path = {.node = call->task_node, .upid = call->upid}};
}

static void task_on_status(struct pve_call *call, struct json_object *data)
{
    struct pve_task_status st;

    if (pve_task_status_parse(data, &st) < 0) {
        pve_call_finish(call, -EBADMSG);
        return;
    }
    call->task = st;
    call->have_task = true;
    if (st.running) {
        /* the same request again after poll_ms, counted afresh */
        request_rearm(call);
        call_sleep(call, call->poll_ms, false);
        call->poll_ms = MIN(call->poll_ms * 3 / 2, (uint64_t)PVE_TASK_POLL_MAX_MS);
        return;
    }
    if (st.success) {
        pve_call_finish(call, 0);
        return;
    }
    call->perr = pve_error_free(call->perr);
    if (pve_error_from_task(st.exitstatus, call->upid, &call->perr) < 0) {
        pve_call_finish(call, -ENOMEM);
        return;
    }
    pve_call_finish(call, -EREMOTEIO);
}

int pve_wait_task(struct pve_client *c, const char *node, const char *upid, PVE_CALL_ARGS)
{
    struct pve_upid u;
    struct pve_call *call;
    struct pve_req req;
    int r;

    if (!upid || pve_upid_parse(upid, &u) < 0)
        return -EINVAL;
    r = pve_call_new(c, PVE_CALL_ONE, NULL, true, timeout_ms, cb, userdata, &call);
    if (r < 0)
        return r;
    r = task_begin(call, upid, node);
    if (r == 0) {
        req = task_status_req(call);
        r = pve_call_request(call, &req);
    }
    return pve_call_started(call, r, ret_call);
}

/* ---- responses ---- */

/* Parses data into the result field the endpoint names. */
static int call_store(struct pve_call *call, struct json_object *data)
{
    int r;

    switch (call->ep->into) {
    case PVE_INTO_DATA:
        return 0;
    case PVE_INTO_VMID:
        return pve_nextid_parse(data, &call->vmid);
    case PVE_INTO_IPV4:
        free(call->ipv4);
        call->ipv4 = NULL;
        r = pve_interfaces_pick_ipv4(data, &call->ipv4);
        return MIN(r, 0);
    case PVE_INTO_CT_STATE:
        return pve_ct_status_parse(data, &call->ct_state);
    case PVE_INTO_VMS: /* a new listing replaces the last one */
        call->vms = pve_vm_list_free(call->vms);
        return pve_vm_list_parse(data, &call->vms);
    case PVE_INTO_RULES:
        call->rules = pve_fw_rules_free(call->rules);
        return pve_fw_rules_parse(data, &call->rules);
    case PVE_INTO_TASK_STATUS:
        r = pve_task_status_parse(data, &call->task);
        if (r >= 0)
            call->have_task = true;
        return r;
    case PVE_INTO_TASK:
        if (!data || !json_object_is_type(data, json_type_string))
            return -EBADMSG;
        return task_begin(call, json_object_get_string(data), NULL);
    }
    return -EINVAL;
}

static void call_on_data(struct pve_call *call, struct json_object *data)
{
    struct pve_req req;
    int r;

    if (call->polling) {
        task_on_status(call, data);
        return;
    }
    r = call_store(call, data);
    if (r < 0) {
        pve_call_finish(call, r);
        return;
    }
    if (call->polling) { /* the request started a task: wait for it */
        req = task_status_req(call);
        pve_call_step(call, &req);
        return;
    }
    if (call->ep->into == PVE_INTO_DATA || !call->ops || !call->ops->step_done) {
        if (call->data)
            json_object_put(call->data);
        call->data = data ? json_object_get(data) : NULL;
    }
    if (call->ops && call->ops->step_done) {
        call->ops->step_done(call);
        return;
    }
    pve_call_finish(call, 0);
}

void pve_client_set_node_observer(struct pve_client *c, pve_node_observer_fn fn, void *userdata)
{
    c->node_observer = fn;
    c->node_observer_userdata = userdata;
}

/* Tells the node observer about an attempt on /nodes/NODE/... */
static void observe_node(struct pve_call *call, int r, long status)
{
    struct pve_client *c = call->client;
    char node[64];

    if (!c->node_observer || !path_node(call->path, node, sizeof node))
        return;
    c->node_observer(node, r, status, c->node_observer_userdata);
}

static void on_http_done(int r, struct http_response *resp, void *userdata)
{
    struct pve_call *call = userdata;
    struct json_object *data = NULL;

    call->req = NULL;
    slot_release(call);
    metrics_pve_request(call->ep->name, r, resp ? resp->status : 0);
    observe_node(call, r, resp ? resp->status : 0);
    if (r < 0) {
        /* A timeout while time remains was one attempt's timeout, treat it as transient. */
        call_retry_or_fail(call, r);
        return;
    }
    if (resp->status < 200 || resp->status >= 300) {
        struct pve_error *e = NULL;
        r = pve_error_from_http(resp->status, resp->reason, resp->body, resp->body_len, &e);
        if (r < 0) {
            pve_call_finish(call, r);
            return;
        }
        pve_error_free(call->perr);
        call->perr = e;
        call_retry_or_fail(call, -EREMOTEIO);
        return;
    }
    r = pve_parse_data(resp->body, resp->body_len, &data);
    if (r < 0) {
        pve_call_finish(call, r);
        return;
    }
    call->perr = pve_error_free(call->perr);
    call_on_data(call, data);
    if (data)
        json_object_put(data);
}

int pve_call_start(struct pve_client *c, const struct pve_req *req, PVE_CALL_ARGS)
{
    bool task = pve_endpoints[req->ep].into == PVE_INTO_TASK;
    struct pve_call *call;
    int r;

    r = pve_call_new(c, PVE_CALL_ONE, NULL, task, timeout_ms, cb, userdata, &call);
    if (r < 0)
        return r;
    /* a call about a task reports its UPID (pve_task_status) */
    if (req->path.upid && !(call->upid = strdup(req->path.upid)))
        r = -ENOMEM;
    if (r == 0)
        r = pve_call_request(call, req);
    return pve_call_started(call, r, ret_call);
}

/* ---- the client ---- */

static int client_set_config(struct pve_client *c, const struct pve_config *cfg)
{
    size_t l;

    c->request_timeout_ms =
        cfg->request_timeout_ms ? cfg->request_timeout_ms : PVE_REQUEST_TIMEOUT_MS_DEFAULT;
    c->timeout_ms = cfg->timeout_ms ? cfg->timeout_ms : PVE_TIMEOUT_MS_DEFAULT;
    c->task_timeout_ms = cfg->task_timeout_ms ? cfg->task_timeout_ms : PVE_TASK_TIMEOUT_MS_DEFAULT;
    c->vmid_min = cfg->vmid_min;
    c->vmid_max = cfg->vmid_max;
    c->max_calls_per_node =
        cfg->max_calls_per_node ? cfg->max_calls_per_node : PVE_MAX_CALLS_PER_NODE_DEFAULT;
    if (getrandom(&c->rng, sizeof(c->rng), GRND_NONBLOCK) != sizeof(c->rng) || c->rng == 0)
        c->rng = (uint64_t)(uintptr_t)c ^ uv_hrtime() ^ 0x9E3779B97F4A7C15ULL;
    c->base_url = strdup(cfg->base_url);
    if (!c->base_url || asprintf(&c->auth_header, "Authorization: PVEAPIToken=%s=%s", cfg->token_id,
                                 cfg->token_secret) < 0) {
        c->auth_header = NULL;
        return -ENOMEM;
    }
    l = strlen(c->base_url);
    while (l > 0 && c->base_url[l - 1] == '/')
        c->base_url[--l] = 0;
    return 0;
}

static void client_free(struct pve_client *c)
{
    while (c->slots) {
        struct pve_node_slots *s = c->slots;
        c->slots = s->next;
        free(s->node);
        free(s);
    }
    free(c->base_url);
    if (c->auth_header) {
        explicit_bzero(c->auth_header, strlen(c->auth_header));
        free(c->auth_header);
    }
    free(c);
}

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
    if ((cfg->vmid_min || cfg->vmid_max) &&
        (cfg->vmid_min < PVE_VMID_MIN || cfg->vmid_max > PVE_VMID_MAX ||
         cfg->vmid_min > cfg->vmid_max))
        return -EINVAL;
    c = calloc(1, sizeof(*c));
    if (!c)
        return -ENOMEM;
    c->loop = loop;
    r = client_set_config(c, cfg);
    if (r == 0) {
        hc.tls = cfg->tls;
        hc.connect_timeout_ms = cfg->connect_timeout_ms;
        hc.timeout_ms = c->request_timeout_ms;
        r = http_client_new(loop, &hc, &c->http);
    }
    if (r < 0) {
        client_free(c);
        return r;
    }
    log_debug(COMP, "client %p: %s as %s", (void *)c, c->base_url, cfg->token_id);
    *ret_client = c;
    return 0;
}

static void on_http_closed(void *userdata)
{
    struct pve_client *c = userdata;
    struct close_notify closed = c->closed;

    client_free(c);
    close_notify_run(closed);
}

static void client_maybe_free(struct pve_client *c)
{
    if (c->state != PVE_CLIENT_CLOSING || c->n_alive > 0 || c->http_closing)
        return;
    c->http_closing = true;
    http_client_close(c->http, on_http_closed, c);
}

void pve_client_close(struct pve_client *c, void (*close_cb)(void *userdata), void *userdata)
{
    if (!c || c->state != PVE_CLIENT_OPEN)
        return;
    c->state = PVE_CLIENT_CLOSING;
    c->closed = (struct close_notify){.cb = close_cb, .userdata = userdata};
    log_debug(COMP, "client %p: closing with %zu calls in flight", (void *)c, c->n_calls);
    while (c->calls)
        pve_call_finish(c->calls, -ECANCELED);
    client_maybe_free(c);
}

void pve_call_cancel(struct pve_call *call)
{
    if (!call || call->state == PVE_CALL_DONE)
        return;
    log_debug(COMP, "call %p: cancelled", (void *)call);
    call_discard(call);
}

size_t pve_client_in_flight(const struct pve_client *c)
{
    return c ? c->n_calls : 0;
}
