/* daemon.status and rpc.discover. See methods-daemon.h. */
#include "methods-daemon.h"

#include "config-build.h"
#include "config.h"
#include "openrpc.h"
#include "rpc.h"
#include "server.h"

static void method_daemon_status(struct req *r, void *params, void *userdata)
{
    struct methods_daemon *md = userdata;
    const struct config *cfg = req_config(r);
    json_object *o, *px, *caller;

    (void)params;
    o = json_object_new_object();
    json_object_object_add(o, "version", json_object_new_string(SANDBOXD_VERSION));
    json_object_object_add(o, "uptime_s",
                           json_object_new_int64((int64_t)server_uptime_s(md->server)));
    json_object_object_add(o, "connections", json_object_new_int64(server_connections(md->server)));
    json_object_object_add(o, "sandboxes", json_object_new_object());
    px = json_object_new_object();
    json_object_object_add(px, "configured", json_object_new_boolean(cfg->proxmox.present));
    json_object_object_add(px, "reachable", NULL);
    json_object_object_add(
        px, "last_error",
        json_object_new_string(cfg->proxmox.present ? "not connected yet" : "not configured"));
    json_object_object_add(o, "proxmox", px);
    caller = json_object_new_object();
    json_object_object_add(caller, "uid", json_object_new_int64(req_uid(r)));
    json_object_object_add(caller, "gid", json_object_new_int64(req_gid(r)));
    json_object_object_add(caller, "pid", json_object_new_int64(req_pid(r)));
    json_object_object_add(o, "caller", caller);
    if (md->provider)
        md->provider(o, md->provider_data);
    req_reply(r, o);
}

static void method_rpc_discover(struct req *r, void *params, void *userdata)
{
    struct methods_daemon *md = userdata;

    (void)params;
    if (!md->openrpc) {
        md->openrpc = json_tokener_parse(openrpc_document());
        if (!md->openrpc) {
            req_error(r, RPC_INTERNAL_ERROR, "the API document is not valid JSON");
            return;
        }
    }
    req_reply(r, json_object_get(md->openrpc));
}

int methods_daemon_register(struct methods_daemon *md, struct server *s)
{
    md->server = s;
    md->rows[0] =
        (struct method_def){"daemon.status", &params_none_spec, method_daemon_status, md, false};
    md->rows[1] =
        (struct method_def){"rpc.discover", &params_none_spec, method_rpc_discover, md, false};
    md->rows[2] = (struct method_def){};
    return methods_register(md->rows);
}

void methods_daemon_set_status_provider(struct methods_daemon *md, status_provider_t fn,
                                        void *userdata)
{
    md->provider = fn;
    md->provider_data = userdata;
}

void methods_daemon_done(struct methods_daemon *md)
{
    methods_unregister(md->rows);
    if (md->openrpc)
        json_object_put(md->openrpc);
    md->openrpc = NULL;
}
