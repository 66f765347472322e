/* The port forward methods. See methods-forward.h. */
#include "methods-forward.h"

#include <errno.h>
#include <json-c/json.h>

#include "methods-common.h"
#include "params-forward.h"
#include "req.h"
#include "sandbox-forward.h"

static json_object *forward_json(const struct sandbox_forward_info *info, bool full)
{
    json_object *o = json_object_new_object();

    json_object_object_add(o, "forward", json_object_new_string(info->id));
    json_object_object_add(o, "port", json_object_new_int(info->port));
    if (info->socket)
        json_object_object_add(o, "socket", json_object_new_string(info->socket));
    if (info->address)
        json_object_object_add(o, "address", json_object_new_string(info->address));
    if (full) {
        json_object_object_add(o, "uid", json_object_new_int64(info->uid));
        json_object_object_add(o, "connections", json_object_new_int64(info->connections));
        json_object_object_add(o, "accepted", json_object_new_int64((int64_t)info->accepted));
        json_object_object_add(o, "bytes_in", json_object_new_int64((int64_t)info->bytes_in));
        json_object_object_add(o, "bytes_out", json_object_new_int64((int64_t)info->bytes_out));
    }
    return o;
}

void method_sandbox_forward(struct req *r, void *params, void *userdata)
{
    const struct params_sandbox_forward *p = params;
    struct sandbox_forward_info info;
    struct engine_error err;
    struct sandbox *sb;

    sb = methods_sandbox_find(r, p->id, method_sandbox_forward, params, userdata);
    if (!sb)
        return;
    if (sandbox_forward_open(sb, req_uid(r), req_gid(r), (unsigned)p->port,
                             p->listen[0] ? p->listen : NULL, &info, &err) < 0) {
        methods_sandbox_reply_error(r, &err);
        return;
    }
    req_reply(r, forward_json(&info, false));
}

struct list_ctx {
    json_object *a;
    uid_t uid;
};

/* Another uid's socket path is left out: its random folder name is part of its protection
 * when the daemon could not give it to that uid (sandbox-forward.h). */
static void add_forward(const struct sandbox_forward_info *info, void *userdata)
{
    struct list_ctx *x = userdata;
    struct sandbox_forward_info shown = *info;

    if (x->uid != 0 && x->uid != info->uid)
        shown.socket = NULL;
    json_object_array_add(x->a, forward_json(&shown, true));
}

void method_sandbox_forwards(struct req *r, void *params, void *userdata)
{
    const struct params_sandbox_id *p = params;
    struct sandbox *sb;
    json_object *o, *a;

    sb = methods_sandbox_find(r, p->id, method_sandbox_forwards, params, userdata);
    if (!sb)
        return;
    a = json_object_new_array();
    sandbox_forward_list(sb, add_forward, &(struct list_ctx){.a = a, .uid = req_uid(r)});
    o = json_object_new_object();
    json_object_object_add(o, "forwards", a);
    req_reply(r, o);
}

void method_sandbox_unforward(struct req *r, void *params, void *userdata)
{
    const struct params_sandbox_unforward *p = params;
    struct sandbox *sb;
    json_object *o;

    sb = methods_sandbox_find(r, p->id, method_sandbox_unforward, params, userdata);
    if (!sb)
        return;
    if (sandbox_forward_close(sb, p->forward) == -ENOENT) {
        req_invalid_params(r, "forward", "no such forward on this sandbox");
        return;
    }
    o = json_object_new_object();
    json_object_object_add(o, "forward", json_object_new_string(p->forward));
    json_object_object_add(o, "closed", json_object_new_boolean(true));
    req_reply(r, o);
}
