/* Lifecycle events for subscribers. See events.h. */
#include "events.h"

#include <assert.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "list.h"
#include "log.h"
#include "metrics.h"
#include "util.h"
#include "rpc.h"

#define COMP "events"

struct subscriber {
    struct events *events;
    struct req *req; /* NULL once ended */
    uid_t uid;
    bool admin;
    bool dead;                            /* ended; freed by the sweep once nothing here runs */
    json_object *queue[EVENTS_QUEUE_MAX]; /* events waiting for the output to drain */
    size_t head, n;
    bool drain_armed;
    struct subscriber *prev, *next;
};

unsigned events_subscribers(const struct events *e)
{
    return e->n_subscribers;
}

static void sweep(struct events *e)
{
    struct subscriber *s, *next;

    if (e->depth > 0)
        return;
    for (s = e->subscribers; s; s = next) {
        next = s->next;
        if (!s->dead)
            continue;
        assert(!s->req && s->n == 0);
        LIST_REMOVE(e->subscribers, s);
        free(s);
    }
}

/* Ends a subscription: drops its queue and completes its call. */
static void sub_end(struct subscriber *s, int code, const char *reason)
{
    struct events *e = s->events;
    struct req *r = s->req;

    if (s->dead)
        return;
    assert(e->n_subscribers > 0);
    s->dead = true;
    s->req = NULL;
    e->n_subscribers--;
    metrics_set(M_SUBSCRIBERS, NULL, NULL, e->n_subscribers);
    while (s->n) {
        json_object_put(s->queue[s->head]);
        s->head = (s->head + 1) % EVENTS_QUEUE_MAX;
        s->n--;
    }
    req_on_disconnect(r, NULL, NULL);
    req_on_drain(r, NULL, NULL);
    e->depth++;
    req_error(r, code, reason);
    e->depth--;
    sweep(e);
}

static void on_drain(struct req *r, void *userdata);

/* Sends queued events while the output takes them (depth held by the caller). */
static void sub_flush(struct subscriber *s)
{
    while (!s->dead && s->n && !req_output_busy(s->req)) {
        json_object *ev = s->queue[s->head];

        s->queue[s->head] = NULL;
        s->head = (s->head + 1) % EVENTS_QUEUE_MAX;
        s->n--;
        if (req_notify(s->req, "sandbox.event", ev) < 0 && !s->dead)
            sub_end(s, RPC_BUSY, "the subscriber's connection cannot take more output");
    }
    if (!s->dead && s->n && !s->drain_armed) {
        s->drain_armed = true;
        req_on_drain(s->req, on_drain, s);
    }
}

static void on_drain(struct req *r, void *userdata)
{
    struct subscriber *s = userdata;
    struct events *e = s->events;

    s->drain_armed = false;
    e->depth++;
    sub_flush(s);
    e->depth--;
    sweep(e);
}

static void on_disconnect(struct req *r, void *userdata)
{
    struct subscriber *s = userdata;

    (void)r;
    log_debug(COMP, "subscriber uid=%u gone", (unsigned)s->uid);
    sub_end(s, RPC_SHUTTING_DOWN, "the client went away");
}

/* Queues ev (a reference is taken) for s; ends s when its queue is full (depth held by
 * the caller). */
static void sub_deliver(struct subscriber *s, json_object *ev)
{
    if (s->n == 0 && !req_output_busy(s->req)) {
        if (req_notify(s->req, "sandbox.event", json_object_get(ev)) < 0 && !s->dead)
            sub_end(s, RPC_BUSY, "the subscriber's connection cannot take more output");
        return;
    }
    if (s->n >= EVENTS_QUEUE_MAX) {
        log_notice(COMP, "subscriber uid=%u does not keep up (%u events queued): ending it",
                   (unsigned)s->uid, EVENTS_QUEUE_MAX);
        metrics_add(M_SUBSCRIBERS_DROPPED, NULL, NULL, 1);
        sub_end(s, RPC_BUSY, "events: the subscriber did not keep up, events were lost");
        return;
    }
    s->queue[(s->head + s->n) % EVENTS_QUEUE_MAX] = json_object_get(ev);
    s->n++;
    sub_flush(s);
}

static json_object *str_or_null(const char *s)
{
    return s ? json_object_new_string(s) : NULL;
}

static json_object *event_json(struct events *e, const struct sandbox_event *ev)
{
    json_object *o = json_object_new_object();
    char at[RFC3339_MAX];

    if (time_format_rfc3339(ev->at, at, sizeof at) < 0)
        at[0] = 0;
    json_object_object_add(o, "id", json_object_new_string(ev->id));
    json_object_object_add(o, "state", json_object_new_string(ev->state));
    json_object_object_add(o, "old_state", str_or_null(ev->old_state));
    json_object_object_add(o, "step", json_object_new_string(ev->step));
    json_object_object_add(o, "old_step", str_or_null(ev->old_step));
    json_object_object_add(o, "reason", str_or_null(ev->reason));
    json_object_object_add(o, "node", str_or_null(ev->node));
    json_object_object_add(o, "vmid", ev->vmid ? json_object_new_int64(ev->vmid) : NULL);
    json_object_object_add(o, "owner_uid", json_object_new_int64(ev->owner_uid));
    json_object_object_add(o, "at", json_object_new_string(at));
    json_object_object_add(o, "seq", json_object_new_int64((int64_t)++e->seq));
    return o;
}

/* An event published while another is being delivered (ending a subscription can make
 * its connection dispatch a request that changes a sandbox at once): delivered after it,
 * so that every subscriber sees the events in seq order. */
struct events_pending {
    json_object *event;
    uid_t owner;
    struct events_pending *next;
};

static void deliver(struct events *e, json_object *o, uid_t owner)
{
    struct subscriber *s;

    e->depth++; /* subscribers end, but stay linked, while the list is walked */
    for (s = e->subscribers; s; s = s->next)
        if (!s->dead && (s->admin || s->uid == owner))
            sub_deliver(s, o);
    e->depth--;
    json_object_put(o);
}

void events_publish(struct events *e, const struct sandbox_event *ev)
{
    struct events_pending *p;

    if (!e->subscribers)
        return;
    if (!e->pending_last)
        e->pending_last = &e->pending_first;
    if (e->delivering) {
        p = calloc(1, sizeof *p);
        if (!p)
            return;
        p->event = event_json(e, ev);
        p->owner = ev->owner_uid;
        *e->pending_last = p;
        e->pending_last = &p->next;
        return;
    }
    assert(!e->pending_first);
    e->delivering = true;
    deliver(e, event_json(e, ev), ev->owner_uid);
    while ((p = e->pending_first)) {
        e->pending_first = p->next;
        if (!e->pending_first)
            e->pending_last = &e->pending_first;
        deliver(e, p->event, p->owner);
        free(p);
    }
    e->delivering = false;
    sweep(e);
}

void events_publish_test(struct events *e, unsigned count, uid_t owner)
{
    for (unsigned i = 0; i < count; i++) {
        struct sandbox_event ev = {.id = "sb-test0000000",
                                   .owner_uid = owner,
                                   .state = "creating",
                                   .old_state = "creating",
                                   .step = "cloning",
                                   .old_step = "pending",
                                   .reason = "test.events",
                                   .node = "test",
                                   .at = now_realtime()};
        events_publish(e, &ev);
    }
}

void events_subscribe(struct events *e, struct req *r)
{
    struct subscriber *s = calloc(1, sizeof *s);
    json_object *p;

    if (!s) {
        req_error(r, RPC_INTERNAL_ERROR, "out of memory");
        return;
    }
    if (req_in_batch(r)) {
        free(s);
        req_error(r, RPC_INVALID_REQUEST, "daemon.subscribe cannot be part of a batch");
        return;
    }
    s->events = e;
    s->req = r;
    s->uid = req_uid(r);
    s->admin = req_is_admin(r);
    LIST_PREPEND(e->subscribers, s);
    e->n_subscribers++;
    metrics_set(M_SUBSCRIBERS, NULL, NULL, e->n_subscribers);
    req_on_disconnect(r, on_disconnect, s);
    log_debug(COMP, "subscriber uid=%u%s", (unsigned)s->uid, s->admin ? " (admin)" : "");
    p = json_object_new_object();
    json_object_object_add(p, "all", json_object_new_boolean(s->admin));
    json_object_object_add(p, "queue_max", json_object_new_int64(EVENTS_QUEUE_MAX));
    e->depth++;
    if (req_notify(r, "daemon.subscribed", p) < 0 && !s->dead)
        sub_end(s, RPC_BUSY, "the connection cannot take more output");
    e->depth--;
    sweep(e);
}

void events_shutdown(struct events *e)
{
    e->depth++;
    for (struct subscriber *s = e->subscribers; s; s = s->next)
        sub_end(s, RPC_SHUTTING_DOWN, "the daemon is shutting down");
    e->depth--;
    sweep(e);
}
