/* The replies to one JSON-RPC 2.0 batch, collected while its entries complete (in any
 * order, now or later) and sent together as one array once the last is in. The one batch
 * aggregator: the daemon's dispatch and the MCP server use it. Pure: no I/O. */
#pragma once

#include <json-c/json.h>

struct rpc_batch;

/* A batch holding one reference for its dispatcher (released once every entry was
 * dispatched); NULL on -ENOMEM. */
struct rpc_batch *rpc_batch_new(void);
/* One more entry whose reply is awaited (released with rpc_batch_release()). */
void rpc_batch_hold(struct rpc_batch *b);
/* Adds a reply (taken over; NULL: none, for a notification). */
void rpc_batch_add(struct rpc_batch *b, json_object *reply);
/* Drops one reference. The last one frees b and returns the array of replies to send
 * (owned by the caller), or NULL when there is nothing to send (every entry was a
 * notification: JSON-RPC 2.0 then sends no array); before that it returns NULL. */
json_object *rpc_batch_release(struct rpc_batch *b);
