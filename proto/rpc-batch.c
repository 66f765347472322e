/* The replies to one batch. See rpc-batch.h. */
#include "rpc-batch.h"

#include <assert.h>
#include <stdlib.h>

struct rpc_batch {
    json_object *replies; /* array */
    unsigned holds;       /* entries not completed, plus the dispatcher's */
};

struct rpc_batch *rpc_batch_new(void)
{
    struct rpc_batch *b = calloc(1, sizeof *b);

    if (!b)
        return NULL;
    b->replies = json_object_new_array();
    if (!b->replies) {
        free(b);
        return NULL;
    }
    b->holds = 1;
    return b;
}

void rpc_batch_hold(struct rpc_batch *b)
{
    assert(b->holds > 0); /* not released yet */
    b->holds++;
}

void rpc_batch_add(struct rpc_batch *b, json_object *reply)
{
    assert(b->holds > 0);
    if (reply)
        json_object_array_add(b->replies, reply);
}

json_object *rpc_batch_release(struct rpc_batch *b)
{
    json_object *a;

    assert(b->holds > 0);
    if (--b->holds > 0)
        return NULL;
    a = b->replies;
    free(b);
    if (json_object_array_length(a) > 0)
        return a;
    json_object_put(a);
    return NULL;
}
