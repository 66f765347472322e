/* The daemon's own methods: daemon.status and rpc.discover. Their rows are in the method
 * table (methods-table.c). Without a daemon behind the server (tests of the connection
 * layer) daemon.status reports only the server and rpc.discover parses the document per
 * call. Loop thread only. */
#pragma once

#include "methods.h"

/* daemon.status: version, uptime, connections, caller; "sandboxes" and "proxmox" read {}
 * and {"configured", "reachable": null, "last_error": "not configured"/"not connected
 * yet"} until the sandbox methods started, which then fill them in with the rest
 * (methods_sandbox_status()). */
void method_daemon_status(struct req *r, void *params, void *userdata);
/* rpc.discover: the OpenRPC document, parsed once per daemon. */
void method_rpc_discover(struct req *r, void *params, void *userdata);
