/* The volume methods. See methods-volume.h. */
#include "methods-volume.h"

#include "methods-common.h"
#include "methods-sandbox.h"
#include "params-volume.h"
#include "req.h"
#include "sandbox-attach.h"
#include "volume.h"

enum vol_method { M_CREATE, M_LIST, M_DELETE };

static void vol_method(struct req *r, void *params, void *userdata, enum vol_method m,
                       method_handler_t self)
{
    struct engine *e = methods_sandbox(r)->engine;
    struct engine_error err = {};
    struct methods_wait *w;
    int k;

    if (methods_sandbox_park(r, NULL, self, params, userdata))
        return;
    w = methods_wait_new(r);
    if (!w)
        return;
    switch (m) {
    case M_CREATE: {
        const struct params_volume_create *p = params;

        k = engine_volume_create(e, req_uid(r), p->name, (unsigned)p->size_gb, methods_wait_on_json,
                                 w, &err);
        break;
    }
    case M_LIST:
        k = engine_volume_list(e, req_uid(r), req_is_admin(r), methods_wait_on_json, w, &err);
        break;
    default: {
        const struct params_volume_name *p = params;

        k = engine_volume_delete(e, req_uid(r), req_is_admin(r), p->name, methods_wait_on_json, w,
                                 &err);
        break;
    }
    }
    if (k < 0)
        methods_wait_refused(w, &err);
}

void method_volume_create(struct req *r, void *params, void *userdata)
{
    vol_method(r, params, userdata, M_CREATE, method_volume_create);
}

void method_volume_list(struct req *r, void *params, void *userdata)
{
    vol_method(r, params, userdata, M_LIST, method_volume_list);
}

void method_volume_delete(struct req *r, void *params, void *userdata)
{
    vol_method(r, params, userdata, M_DELETE, method_volume_delete);
}

static void attach_method(struct req *r, void *params, bool detach, method_handler_t self)
{
    const struct params_sandbox_attach *p = params;
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
    k = detach ? engine_detach(e, sb, p->volume, methods_wait_on_sandbox, w, &err)
               : engine_attach(e, sb, p->volume, p->path, p->read_only, methods_wait_on_sandbox, w, &err);
    if (k < 0)
        methods_wait_refused(w, &err);
}

void method_sandbox_attach(struct req *r, void *params, void *userdata)
{
    attach_method(r, params, false, method_sandbox_attach);
}

void method_sandbox_detach(struct req *r, void *params, void *userdata)
{
    attach_method(r, params, true, method_sandbox_detach);
}
