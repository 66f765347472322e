/* sandbox.fork. See methods-fork.h. */
#include "methods-fork.h"

#include <stdlib.h>

#include "methods-common.h"
#include "methods-sandbox.h"
#include "params-fork.h"
#include "req.h"
#include "sandbox-fork.h"

/* {"sandboxes": [...]} with, when some children failed, "failed" (how many) and "reason";
 * when none was made, the first failure as the error (its message says how many failed). */
static void on_forked(const struct engine_error *err, unsigned failed,
                      struct sandbox *const *children, size_t n, void *userdata)
{
    json_object *o = NULL, *list;

    if (n > 0 || !err) {
        o = json_object_new_object();
        list = json_object_new_array();
        for (size_t i = 0; i < n; i++)
            json_object_array_add(list, methods_sandbox_json(children[i]));
        json_object_object_add(o, "sandboxes", list);
        if (failed) {
            json_object_object_add(o, "failed", json_object_new_int((int)failed));
            json_object_object_add(o, "reason", json_object_new_string(err->message));
        }
    }
    methods_wait_end(userdata, o ? NULL : err, o);
}

void method_sandbox_fork(struct req *r, void *params, void *userdata)
{
    const struct params_sandbox_fork *p = params;
    struct engine *e = methods_sandbox(r)->engine;
    struct engine_error err = {};
    struct engine_fork_opts o = {
        .count = (unsigned)p->count, .snapshot = p->snapshot, .ttl_s = p->ttl_s};
    struct methods_wait *w;
    struct sandbox *sb;

    sb = methods_sandbox_find(r, p->id, method_sandbox_fork, params, NULL);
    if (!sb)
        return;
    w = methods_wait_new(r);
    if (w && engine_fork(e, sb, &o, on_forked, w, &err) < 0)
        methods_wait_refused(w, &err);
}
