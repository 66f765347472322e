/* The method table: one shape of row for every JSON-RPC method the daemon
 * serves, and the one place requests are dispatched.
 *
 * Dispatch (methods_dispatch()) looks the method up, refuses admin-only methods
 * to other callers (-32008), parses the params with the row's params kind and
 * answers -32602 itself when they are invalid, then calls
 * handler(req, parsed params, row userdata). The parsed params belong to the
 * request: they stay valid until it completes and are released then; a handler
 * that needs them longer moves the owned fields out (leaving NULL behind).
 * The handler completes the request as req.h describes.
 *
 * Loop thread only. */
#pragma once

#include <json-c/json.h>
#include <stdbool.h>

#include "params.h"
#include "req.h"

/* params: the parsed struct of the row's params kind (NULL for a kind of size
 * 0), or, for a row without a params kind, the raw params (json_object *,
 * borrowed, NULL when absent). */
typedef void (*method_handler_t)(struct req *req, void *params, void *userdata);

struct method_def {
    const char *name;
    /* How params are parsed (proto/params.h). NULL: the handler gets the raw
     * JSON and validates it itself (test hooks only). */
    const struct params_spec *params;
    method_handler_t handler;
    void *userdata;
    bool admin_only; /* -32008 for callers that are not admins */
};

/* Registers a table ending with a row whose name is NULL. The array must stay
 * valid while registered. A row named by docs/protocol.md must use the params kind
 * proto/params.c gives that name. Returns 0, -E2BIG when too many tables are
 * registered, or -EINVAL for a row that contradicts the protocol. */
int methods_register(const struct method_def *table);
/* Removes a table registered before (no-op otherwise). */
void methods_unregister(const struct method_def *table);
/* The row for a name, or NULL. */
const struct method_def *methods_find(const char *name);

/* The one dispatch: see above. Completes r on every path it does not hand to a
 * handler. */
void methods_dispatch(struct req *r);
/* Parses one line (not blank; without its '\n') and dispatches every call in it
 * as requests on port: invalid entries are answered, a batch is answered as one
 * array once every entry completed, and while stopping every call is refused
 * with -32011. Returns 0, or -ENOMEM when the line could not be handled (the
 * connection should fail). */
int methods_dispatch_line(struct req_port *port, const char *line, size_t len, bool stopping);
