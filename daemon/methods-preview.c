/* The preview URL methods. See methods-preview.h. */
#include "methods-preview.h"

#include <errno.h>
#include <json-c/json.h>

#include "methods-common.h"
#include "params-forward.h"
#include "req.h"
#include "sandbox-preview.h"

/* The URL (with its token) only to the uid that asked for it, or root. */
static json_object *preview_json(const struct sandbox_preview_info *info, bool full, bool url)
{
    json_object *o = json_object_new_object();

    json_object_object_add(o, "preview", json_object_new_string(info->id));
    json_object_object_add(o, "port", json_object_new_int(info->port));
    if (url)
        json_object_object_add(o, "url", json_object_new_string(info->url));
    json_object_object_add(o, "expires_at", json_object_new_int64((int64_t)info->expires_at));
    if (full) {
        json_object_object_add(o, "uid", json_object_new_int64(info->uid));
        json_object_object_add(o, "connections", json_object_new_int64(info->connections));
        json_object_object_add(o, "accepted", json_object_new_int64((int64_t)info->accepted));
    }
    return o;
}

void method_sandbox_preview(struct req *r, void *params, void *userdata)
{
    const struct params_sandbox_preview *p = params;
    struct sandbox_preview_info info;
    struct engine_error err;
    struct sandbox *sb;

    sb = methods_sandbox_find(r, p->id, method_sandbox_preview, params, userdata);
    if (!sb)
        return;
    if (sandbox_preview_open(sb, req_uid(r), (unsigned)p->port, p->ttl_s, &info, &err) < 0) {
        methods_sandbox_reply_error(r, &err);
        return;
    }
    req_reply(r, preview_json(&info, false, true));
}

struct list_ctx {
    json_object *a;
    uid_t uid;
};

static void add_preview(const struct sandbox_preview_info *info, void *userdata)
{
    struct list_ctx *x = userdata;

    json_object_array_add(x->a, preview_json(info, true, x->uid == 0 || x->uid == info->uid));
}

void method_sandbox_previews(struct req *r, void *params, void *userdata)
{
    const struct params_sandbox_id *p = params;
    struct sandbox *sb;
    json_object *o, *a;

    sb = methods_sandbox_find(r, p->id, method_sandbox_previews, params, userdata);
    if (!sb)
        return;
    a = json_object_new_array();
    sandbox_preview_list(sb, add_preview, &(struct list_ctx){.a = a, .uid = req_uid(r)});
    o = json_object_new_object();
    json_object_object_add(o, "previews", a);
    req_reply(r, o);
}

void method_sandbox_unpreview(struct req *r, void *params, void *userdata)
{
    const struct params_sandbox_unpreview *p = params;
    struct sandbox *sb;
    json_object *o;

    sb = methods_sandbox_find(r, p->id, method_sandbox_unpreview, params, userdata);
    if (!sb)
        return;
    if (sandbox_preview_close(sb, p->preview) == -ENOENT) {
        req_invalid_params(r, "preview", "no such preview on this sandbox");
        return;
    }
    o = json_object_new_object();
    json_object_object_add(o, "preview", json_object_new_string(p->preview));
    json_object_object_add(o, "closed", json_object_new_boolean(true));
    req_reply(r, o);
}
