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

/* The engine's event hook (struct engine_hooks.event); userdata unused. */
void events_publish(const struct sandbox_event *ev, void *userdata);
/* Makes r a subscription (daemon.subscribe's handler); r completes when it ends. */
void events_subscribe(struct req *r);
/* Ends every subscription with -32011 (shutdown). */
void events_shutdown(void);
unsigned events_subscribers(void);
/* test.events: count synthetic events of a fake sandbox owned by owner, published like
 * real ones (the slow-subscriber tests). */
void events_publish_test(unsigned count, uid_t owner);
