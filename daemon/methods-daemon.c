/* daemon.status and rpc.discover. See methods-daemon.h. */
#include "methods-daemon.h"

#include "config-build.h"
#include "config.h"
#include "openrpc.h"
#include "rpc.h"
#include "daemon.h"
#include "methods-sandbox.h"
#include "server.h"

void method_daemon_status(struct req *r, void *params, void *userdata)
{
    const struct server *s = req_server(r);
    struct daemon *d = s->daemon;
    const struct config *cfg = req_config(r);
    json_object *o, *px, *caller, *mem;
    size_t bytes, peak;

    (void)params;
    o = json_object_new_object();
    json_object_object_add(o, "version", json_object_new_string(SANDBOXD_VERSION));
    json_object_object_add(o, "uptime_s", json_object_new_int64((int64_t)server_uptime_s(s)));
    json_object_object_add(o, "connections", json_object_new_int64(server_connections(s)));
    json_object_object_add(o, "sandboxes", json_object_new_object());
    server_memory(s, &bytes, &peak);
    mem = json_object_new_object();
    json_object_object_add(mem, "bytes", json_object_new_int64((int64_t)bytes));
    json_object_object_add(mem, "peak", json_object_new_int64((int64_t)peak));
    json_object_object_add(mem, "budget",
                           json_object_new_int64((int64_t)cfg->server.memory_budget));
    json_object_object_add(o, "memory", mem);
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
    if (d && d->sandbox.engine)
        methods_sandbox_status(&d->sandbox, o);
    req_reply(r, o);
}

void method_rpc_discover(struct req *r, void *params, void *userdata)
{
    struct daemon *d = req_server(r)->daemon;
    json_object *doc = d ? d->openrpc : NULL;

    (void)params;
    if (!doc) {
        doc = json_tokener_parse(openrpc_document());
        if (!doc) {
            req_error(r, RPC_INTERNAL_ERROR, "the API document is not valid JSON");
            return;
        }
        if (d)
            d->openrpc = json_object_get(doc);
    } else
        json_object_get(doc);
    req_reply(r, doc);
}
