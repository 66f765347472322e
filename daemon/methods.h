/* The method table: one shape of row for every JSON-RPC method the daemon
 * serves, and the one place requests are dispatched. The daemon's table is
 * methods-table.c; a test brings its own.
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

enum {
    METHOD_ADMIN = 1 << 0,     /* -32008 for callers that are not admins */
    METHOD_TEST_HOOK = 1 << 1, /* served only with SANDBOXD_TEST_HOOKS=1 */
};

struct method_def {
    const char *name;
    /* How params are parsed (proto/params.h). NULL: the handler gets the raw
     * JSON and validates it itself (test hooks only). */
    const struct params_spec *params;
    method_handler_t handler;
    unsigned flags; /* METHOD_* */
    void *userdata; /* the handler's third argument */
};

/* A table: rows ending with a row whose name is NULL. */
struct method_table {
    const struct method_def *rows;
    bool test_hooks; /* the rows flagged METHOD_TEST_HOOK are served */
};

/* Checks a table: a name appears once, and a row named by docs/protocol.md uses the
 * params kind proto/params.c gives that name. Returns 0, or -EINVAL naming the first
 * row at fault in *ret_name. */
int methods_check(const struct method_def *rows, const char **ret_name);
/* The row t serves for a name, or NULL. */
const struct method_def *methods_find(const struct method_table *t, const char *name);

/* The one dispatch: see above. Completes r on every path it does not hand to a
 * handler. */
void methods_dispatch(const struct method_table *t, struct req *r);
/* Parses one line (not blank; without its '\n') and dispatches every call in it
 * as requests on port: invalid entries are answered, a batch is answered as one
 * array once every entry completed, and while stopping every call is refused
 * with -32011. tok: the json-c tokener kept between lines (rpc_parse_with()). Returns
 * 0, or -ENOMEM when the line could not be handled (the connection should fail). */
int methods_dispatch_line(const struct method_table *t, struct req_port *port, json_tokener **tok,
                          const char *line, size_t len, bool stopping);
/* Answers r with -32602 for a params error: data as params_error_data() gives it, except
 * that a size out of range (ttl_s, cores, memory_mb, disk_gb) is reported against the
 * operator's cap when that is tighter than the schema's bound: "ttl_s must be 1..86400
 * (max_ttl_s)", data {"param", "min", "max", "cap"}. */
void methods_invalid_params(struct req *r, const struct params_error *e);
