/* The pause methods. See methods-pause.h. */
#include "methods-pause.h"

#include <stdlib.h>

#include "methods-common.h"
#include "methods-sandbox.h"
#include "params.h"
#include "req.h"
#include "sandbox-pause.h"

/* A request waiting for its operation; req is NULL once its client left. */
struct pause_wait {
    struct req *req;
};

static void pause_detach(struct req *r, void *userdata)
{
    struct pause_wait *w = userdata;

    (void)methods_detach(r, &w->req, NULL);
}

static void on_done(const struct engine_error *err, struct sandbox *sb, void *userdata)
{
    struct pause_wait *w = userdata;

    if (w->req) {
        req_on_disconnect(w->req, NULL, NULL);
        if (err)
            methods_sandbox_reply_error(w->req, err);
        else
            req_reply(w->req, methods_sandbox_json(sb));
    }
    free(w);
}

static void pause_method(struct req *r, void *params, bool resume, method_handler_t self)
{
    const struct params_sandbox_id *p = params;
    struct engine *e = methods_sandbox(r)->engine;
    struct engine_error err = {};
    struct pause_wait *w;
    struct sandbox *sb;
    int k;

    sb = methods_sandbox_find(r, p->id, self, params, NULL);
    if (!sb)
        return;
    w = calloc(1, sizeof *w);
    if (!w) {
        req_error(r, RPC_INTERNAL_ERROR, "out of memory");
        return;
    }
    w->req = r;
    req_on_disconnect(r, pause_detach, w);
    k = resume ? engine_resume(e, sb, on_done, w, &err) : engine_pause(e, sb, on_done, w, &err);
    if (k < 0) {
        req_on_disconnect(r, NULL, NULL);
        free(w);
        methods_sandbox_reply_error(r, &err);
    }
}

void method_sandbox_pause(struct req *r, void *params, void *userdata)
{
    pause_method(r, params, false, method_sandbox_pause);
}

void method_sandbox_resume(struct req *r, void *params, void *userdata)
{
    pause_method(r, params, true, method_sandbox_resume);
}
