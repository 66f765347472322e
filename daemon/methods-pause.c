/* The pause methods. See methods-pause.h. */
#include "methods-pause.h"

#include <stdlib.h>

#include "methods-common.h"
#include "methods-sandbox.h"
#include "params.h"
#include "req.h"
#include "sandbox-pause.h"

static void pause_method(struct req *r, void *params, bool resume, method_handler_t self)
{
    const struct params_sandbox_id *p = params;
    struct engine *e = methods_sandbox(r)->engine;
    struct engine_error err = {};
    struct methods_wait *w;
    struct sandbox *sb;
    int k;

    sb = methods_sandbox_find(r, p->id, self, params, NULL);
    if (!sb)
        return;
    w = methods_wait_new(r);
    if (!w)
        return;
    k = resume ? engine_resume(e, sb, methods_wait_on_sandbox, w, &err) : engine_pause(e, sb, methods_wait_on_sandbox, w, &err);
    if (k < 0)
        methods_wait_refused(w, &err);
}

void method_sandbox_pause(struct req *r, void *params, void *userdata)
{
    pause_method(r, params, false, method_sandbox_pause);
}

void method_sandbox_resume(struct req *r, void *params, void *userdata)
{
    pause_method(r, params, true, method_sandbox_resume);
}
