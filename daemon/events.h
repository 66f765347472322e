/* Lifecycle events for daemon.subscribe: the engine's event hook publishes every
 * sandbox transition here; each subscriber (one daemon.subscribe call, kept in flight
 * for the life of the subscription) receives the ones it may see (its own sandboxes;
 * admins: all) as "sandbox.event" notifications, in order.
 *
 * Slow subscribers: while the connection's queued output is above its high-water mark
 * (req_output_busy()), events wait in the subscriber's own queue, at most
 * EVENTS_QUEUE_MAX; they are flushed when the output drains. An event that finds the
 * queue full ends the subscription: the queued events are dropped and the call completes
 * with -32007 (the client re-subscribes and re-reads sandbox.list). Memory per subscriber
 * is therefore bounded, and one stuck subscriber never delays the others (nothing waits
 * for it). Loop thread only. */
#pragma once

#include "sandbox.h"
#include "req.h"

/* EVENTS_QUEUE_MAX: proto/api-limits.h */

struct subscriber;
struct events_pending;

/* The subscriptions of one daemon (zero-initialised is empty). */
struct events {
    struct subscriber *subscribers;
    unsigned n_subscribers; /* alive ones */
    uint64_t seq;           /* of the last event sent */
    /* > 0 while this file runs code that can re-enter it: sending on a connection may
     * close it (its subscriptions end from on_disconnect), completing a request may make
     * the connection dispatch the lines it holds (test.events publishes, daemon.subscribe
     * subscribes). Ended subscribers are only freed at depth 0. */
    unsigned depth;
    /* Events published while another is delivered, delivered after it in order. */
    struct events_pending *pending_first, **pending_last;
    bool delivering;
};

/* Publishes one sandbox transition (the engine's event hook calls it). */
void events_publish(struct events *e, const struct sandbox_event *ev);
/* Makes r a subscription (daemon.subscribe's handler); r completes when it ends. */
void events_subscribe(struct events *e, struct req *r);
/* Ends every subscription with -32011 (shutdown). */
void events_shutdown(struct events *e);
unsigned events_subscribers(const struct events *e);
/* test.events: count synthetic events of a fake sandbox owned by owner, published like
 * real ones (the slow-subscriber tests). */
void events_publish_test(struct events *e, unsigned count, uid_t owner);
