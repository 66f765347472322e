/* The template methods. See methods-template.h. */
#include "methods-template.h"

#include <errno.h>
#include <stdlib.h>

#include "methods-common.h"
#include "methods-sandbox.h"
#include "params-template.h"
#include "req.h"
#include "template-api.h"

/* A request waiting for its operation; req is NULL once its client left. */
struct tmpl_wait {
    struct req *req;
};

static void tmpl_detach(struct req *r, void *userdata)
{
    struct tmpl_wait *w = userdata;

    (void)methods_detach(r, &w->req, NULL);
}

static struct tmpl_wait *tmpl_wait_new(struct req *r)
{
    struct tmpl_wait *w = calloc(1, sizeof *w);

    if (!w) {
        req_error(r, RPC_INTERNAL_ERROR, "out of memory");
        return NULL;
    }
    w->req = r;
    req_on_disconnect(r, tmpl_detach, w);
    return w;
}

/* The engine's refusal; "not yours" (-EPERM) is -32008. */
static void reply_error(struct req *r, const struct engine_error *err)
{
    if (err->error == -EPERM && err->kind == ENGINE_E_INVALID) {
        json_object *d = json_object_new_object();

        json_object_object_add(d, "reason", json_object_new_string(err->message));
        req_error_data(r, RPC_PERMISSION_DENIED, NULL, d);
        return;
    }
    methods_sandbox_reply_error(r, err);
}

static void on_json(const struct engine_error *err, json_object *result, void *userdata)
{
    struct tmpl_wait *w = userdata;

    if (w->req && err)
        reply_error(w->req, err);
    else if (w->req)
        req_reply(w->req, json_object_get(result));
    free(w);
}

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
    struct tmpl_wait *w;
    struct sandbox *sb;

    sb = methods_sandbox_find(r, p->id, method_template_create, params, userdata);
    if (!sb)
        return;
    w = tmpl_wait_new(r);
    if (!w)
        return;
    if (engine_template_create(e, sb, p->name, p->defaults, on_json, w, &err) < 0) {
        free(w);
        reply_error(r, &err);
    }
}

static void name_method(struct req *r, void *params, void *userdata, bool publish)
{
    const struct params_template_name *p = params;
    struct engine *e = methods_sandbox(r)->engine;
    struct engine_error err = {};
    struct tmpl_wait *w;
    int k;

    if (methods_sandbox_park(r, NULL, publish ? method_template_publish : method_template_delete,
                             params, userdata))
        return;
    w = tmpl_wait_new(r);
    if (!w)
        return;
    if (publish)
        k = engine_template_publish(e, p->name, on_json, w, &err);
    else
        k = engine_template_delete(e, p->name, req_uid(r), req_is_admin(r), on_json, w, &err);
    if (k < 0) {
        free(w);
        reply_error(r, &err);
    }
}

void method_template_delete(struct req *r, void *params, void *userdata)
{
    name_method(r, params, userdata, false);
}

void method_template_publish(struct req *r, void *params, void *userdata)
{
    name_method(r, params, userdata, true);
}
