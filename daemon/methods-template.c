/* The template methods. See methods-template.h. */
#include "methods-template.h"

#include <stdlib.h>

#include "methods-common.h"
#include "methods-sandbox.h"
#include "params-template.h"
#include "req.h"
#include "template-api.h"

void method_template_list(struct req *r, void *params, void *userdata)
{
    struct engine *e = methods_sandbox(r)->engine;

    if (methods_sandbox_park(r, NULL, method_template_list, params, userdata))
        return;
    req_reply(r, engine_templates_json(e, req_uid(r), req_is_admin(r)));
}

void method_template_create(struct req *r, void *params, void *userdata)
{
    const struct params_template_create *p = params;
    struct engine *e = methods_sandbox(r)->engine;
    struct engine_error err = {};
    struct methods_wait *w;
    struct sandbox *sb;

    sb = methods_sandbox_find(r, p->id, method_template_create, params, userdata);
    if (!sb)
        return;
    w = methods_wait_new(r);
    if (!w)
        return;
    if (engine_template_create(e, sb, p->name, p->defaults, methods_wait_on_json, w, &err) < 0)
        methods_wait_refused(w, &err);
}

static void name_method(struct req *r, void *params, void *userdata, bool publish)
{
    const struct params_template_name *p = params;
    struct engine *e = methods_sandbox(r)->engine;
    struct engine_error err = {};
    struct methods_wait *w;
    int k;

    if (methods_sandbox_park(r, NULL, publish ? method_template_publish : method_template_delete,
                             params, userdata))
        return;
    w = methods_wait_new(r);
    if (!w)
        return;
    if (publish)
        k = engine_template_publish(e, p->name, methods_wait_on_json, w, &err);
    else
        k = engine_template_delete(e, p->name, req_uid(r), req_is_admin(r), methods_wait_on_json, w,
                                   &err);
    if (k < 0)
        methods_wait_refused(w, &err);
}

void method_template_delete(struct req *r, void *params, void *userdata)
{
    name_method(r, params, userdata, false);
}

void method_template_publish(struct req *r, void *params, void *userdata)
{
    name_method(r, params, userdata, true);
}
