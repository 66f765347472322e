/* sandbox.fork. See methods-fork.h. */
#include "methods-fork.h"

#include <stdlib.h>

#include "methods-common.h"
#include "methods-sandbox.h"
#include "params-fork.h"
#include "req.h"
#include "sandbox-fork.h"

/* A request waiting for the fork; req is NULL once its client left. */
struct fork_wait {
    struct req *req;
};

static void fork_detach(struct req *r, void *userdata)
{
    struct fork_wait *w = userdata;

    (void)methods_detach(r, &w->req, NULL);
}

/* {"sandboxes": [...]} with, when some children failed, "failed" (how many) and "reason";
 * when none was made, the first failure as the error (its message says how many failed). */
static void on_forked(const struct engine_error *err, unsigned failed,
                      struct sandbox *const *children, size_t n, void *userdata)
{
    struct fork_wait *w = userdata;
    json_object *o, *list;

    if (w->req && err && n == 0)
        methods_sandbox_reply_error(w->req, err);
    else if (w->req) {
        o = json_object_new_object();
        list = json_object_new_array();
        for (size_t i = 0; i < n; i++)
            json_object_array_add(list, methods_sandbox_json(children[i]));
        json_object_object_add(o, "sandboxes", list);
        if (failed) {
            json_object_object_add(o, "failed", json_object_new_int((int)failed));
            json_object_object_add(o, "reason", json_object_new_string(err->message));
        }
        req_reply(w->req, o);
    }
    free(w);
}

void method_sandbox_fork(struct req *r, void *params, void *userdata)
{
    const struct params_sandbox_fork *p = params;
    struct engine *e = methods_sandbox(r)->engine;
    struct engine_error err = {};
    struct engine_fork_opts o = {
        .count = (unsigned)p->count, .snapshot = p->snapshot, .ttl_s = p->ttl_s};
    struct fork_wait *w;
    struct sandbox *sb;

    sb = methods_sandbox_find(r, p->id, method_sandbox_fork, params, NULL);
    if (!sb)
        return;
    w = calloc(1, sizeof *w);
    if (!w) {
        req_error(r, RPC_INTERNAL_ERROR, "out of memory");
        return;
    }
    w->req = r;
    req_on_disconnect(r, fork_detach, w);
    if (engine_fork(e, sb, &o, on_forked, w, &err) < 0) {
        free(w);
        methods_sandbox_reply_error(r, &err);
    }
}
