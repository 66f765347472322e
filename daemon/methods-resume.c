/* resume_on_use. See methods-resume.h. */
#include "methods-resume.h"

#include <stdlib.h>
#include <string.h>

#include "req.h"
#include "rpc.h"
#include "sandbox-pause.h"

/* The methods that need the sandbox's container running. */
static bool needs_container(const char *method)
{
    static const char *const exact[] = {
        "sandbox.exec",     "sandbox.forward", "sandbox.snapshot",        "sandbox.snapshots",
        "sandbox.rollback", "sandbox.resize",  "sandbox.snapshot_delete", "sandbox.set_internet"};

    if (!method)
        return false;
    if (strncmp(method, "file.", 5) == 0 || strncmp(method, "process.", 8) == 0)
        return true;
    for (size_t i = 0; i < sizeof exact / sizeof exact[0]; i++)
        if (strcmp(method, exact[i]) == 0)
            return true;
    return false;
}

/* A request waiting for the resume before it runs again. */
struct resume_first {
    struct req *req; /* NULL once its client left */
    method_handler_t handler;
    void *params; /* owned by req */
    void *userdata;
    methods_error_fn reply_error;
};

static void resume_first_detach(struct req *r, void *userdata)
{
    struct resume_first *x = userdata;

    x->req = NULL; /* the resume goes on; its outcome reaches nobody */
    req_error(r, RPC_SHUTTING_DOWN, "the client went away");
}

static void on_resumed_first(const struct engine_error *err, struct sandbox *sb, void *userdata)
{
    struct resume_first *x = userdata;
    struct req *r = x->req;

    if (r) {
        req_on_disconnect(r, NULL, NULL);
        if (err)
            x->reply_error(r, err);
        else
            x->handler(r, x->params, x->userdata);
    }
    free(x);
}

bool methods_resume_first(struct req *r, struct engine *e, struct sandbox *sb,
                          method_handler_t handler, void *params, void *userdata,
                          methods_error_fn reply_error)
{
    struct engine_error err = {};
    struct resume_first *x;

    if (!needs_container(req_method(r)))
        return false; /* sandbox.get and its kin are no use of the sandbox (auto_pause_s) */
    engine_touch(sb);
    if (!engine_resume_on_use(sb))
        return false;
    x = calloc(1, sizeof *x);
    if (!x) {
        req_error(r, RPC_INTERNAL_ERROR, "out of memory");
        return true;
    }
    *x = (struct resume_first){.req = r,
                               .handler = handler,
                               .params = params,
                               .userdata = userdata,
                               .reply_error = reply_error};
    req_on_disconnect(r, resume_first_detach, x);
    if (engine_resume(e, sb, on_resumed_first, x, &err) < 0) {
        req_on_disconnect(r, NULL, NULL);
        free(x);
        reply_error(r, &err);
    }
    return true;
}

bool methods_resume_first_id(struct req *r, struct engine *e, const char *id,
                             method_handler_t handler, void *params, void *userdata,
                             methods_error_fn reply_error)
{
    struct sandbox *sb = e && id ? engine_lookup(e, id, req_uid(r), req_is_admin(r)) : NULL;

    return sb && methods_resume_first(r, e, sb, handler, params, userdata, reply_error);
}
