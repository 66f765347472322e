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
    rpc_add_literal(o, "version", json_object_new_string(SANDBOXD_VERSION));
    rpc_add_literal(o, "uptime_s", json_object_new_int64((int64_t)server_uptime_s(s)));
    rpc_add_literal(o, "connections", json_object_new_int64(server_connections(s)));
    rpc_add_literal(o, "sandboxes", json_object_new_object());
    server_memory(s, &bytes, &peak);
    mem = json_object_new_object();
    rpc_add_literal(mem, "bytes", json_object_new_int64((int64_t)bytes));
    rpc_add_literal(mem, "peak", json_object_new_int64((int64_t)peak));
    rpc_add_literal(mem, "budget", json_object_new_int64((int64_t)cfg->server.memory_budget));
    rpc_add_literal(o, "memory", mem);
    px = json_object_new_object();
    rpc_add_literal(px, "configured", json_object_new_boolean(cfg->proxmox.present));
    rpc_add_literal(px, "reachable", NULL);
    rpc_add_literal(
        px, "last_error",
        json_object_new_string(cfg->proxmox.present ? "not connected yet" : "not configured"));
    rpc_add_literal(o, "proxmox", px);
    caller = json_object_new_object();
    rpc_add_literal(caller, "uid", json_object_new_int64(req_uid(r)));
    rpc_add_literal(caller, "gid", json_object_new_int64(req_gid(r)));
    rpc_add_literal(caller, "pid", json_object_new_int64(req_pid(r)));
    rpc_add_literal(o, "caller", caller);
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
