/* Lifecycle events for subscribers. See events.h. */
#include "events.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "lib/log.h"
#include "lib/metrics.h"
#include "lib/util.h"
#include "proto/rpc.h"

#define COMP "events"

struct subscriber {
    struct req *req;
    uid_t uid;
    bool admin;
    json_object *queue[EVENTS_QUEUE_MAX]; /* events waiting for the output to drain */
    size_t head, n;
    bool drain_armed;
    struct subscriber *prev, *next;
};

static struct subscriber *subscribers;
static unsigned n_subscribers;
static uint64_t seq;

unsigned events_subscribers(void)
{
    return n_subscribers;
}

static void sub_unlink(struct subscriber *s)
{
    if (s->prev)
        s->prev->next = s->next;
    else
        subscribers = s->next;
    if (s->next)
        s->next->prev = s->prev;
    n_subscribers--;
    metrics_set(M_SUBSCRIBERS, NULL, NULL, n_subscribers);
}

/* Ends a subscription: unlinks it, drops its queue, completes its call. */
static void sub_end(struct subscriber *s, int code, const char *reason)
{
    struct req *r = s->req;

    sub_unlink(s);
    while (s->n) {
        json_object_put(s->queue[s->head]);
        s->head = (s->head + 1) % EVENTS_QUEUE_MAX;
        s->n--;
    }
    req_on_disconnect(r, NULL, NULL);
    req_on_drain(r, NULL, NULL);
    free(s);
    req_error(r, code, reason);
}

static void on_drain(struct req *r, void *userdata);

/* Sends queued events while the output takes them. */
static void sub_flush(struct subscriber *s)
{
    while (s->n && !req_output_busy(s->req)) {
        json_object *ev = s->queue[s->head];

        s->queue[s->head] = NULL;
        s->head = (s->head + 1) % EVENTS_QUEUE_MAX;
        s->n--;
        if (req_notify(s->req, "sandbox.event", ev) < 0) {
            sub_end(s, RPC_BUSY, "the subscriber's connection cannot take more output");
            return;
        }
    }
    if (s->n && !s->drain_armed) {
        s->drain_armed = true;
        req_on_drain(s->req, on_drain, s);
    }
}

static void on_drain(struct req *r, void *userdata)
{
    struct subscriber *s = userdata;

    (void)r;
    s->drain_armed = false;
    sub_flush(s);
}

static void on_disconnect(struct req *r, void *userdata)
{
    struct subscriber *s = userdata;

    (void)r;
    log_debug(COMP, "subscriber uid=%u gone", (unsigned)s->uid);
    sub_end(s, RPC_SHUTTING_DOWN, "the client went away");
}

/* Queues ev (a reference is taken) for s; ends s when its queue is full. */
static void sub_deliver(struct subscriber *s, json_object *ev)
{
    if (s->n == 0 && !req_output_busy(s->req)) {
        if (req_notify(s->req, "sandbox.event", json_object_get(ev)) < 0)
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

static json_object *event_json(const struct sandbox_event *ev)
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
    json_object_object_add(o, "seq", json_object_new_int64((int64_t)++seq));
    return o;
}

void events_publish(const struct sandbox_event *ev, void *userdata)
{
    struct subscriber *s, *next;
    json_object *o;

    (void)userdata;
    if (!subscribers)
        return;
    o = event_json(ev);
    for (s = subscribers; s; s = next) {
        next = s->next; /* s may end */
        if (s->admin || s->uid == ev->owner_uid)
            sub_deliver(s, o);
    }
    json_object_put(o);
}

void events_publish_test(unsigned count, uid_t owner)
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
        events_publish(&ev, NULL);
    }
}

void events_subscribe(struct req *r)
{
    struct subscriber *s = calloc(1, sizeof *s);
    json_object *p;

    if (!s) {
        req_error(r, RPC_INTERNAL_ERROR, "out of memory");
        return;
    }
    s->req = r;
    s->uid = req_uid(r);
    s->admin = req_is_admin(r);
    s->next = subscribers;
    if (subscribers)
        subscribers->prev = s;
    subscribers = s;
    n_subscribers++;
    metrics_set(M_SUBSCRIBERS, NULL, NULL, n_subscribers);
    req_on_disconnect(r, on_disconnect, s);
    log_debug(COMP, "subscriber uid=%u%s", (unsigned)s->uid, s->admin ? " (admin)" : "");
    p = json_object_new_object();
    json_object_object_add(p, "all", json_object_new_boolean(s->admin));
    json_object_object_add(p, "queue_max", json_object_new_int64(EVENTS_QUEUE_MAX));
    if (req_notify(r, "daemon.subscribed", p) < 0)
        sub_end(s, RPC_BUSY, "the connection cannot take more output");
}

void events_shutdown(void)
{
    while (subscribers)
        sub_end(subscribers, RPC_SHUTTING_DOWN, "the daemon is shutting down");
}
