/* The daemon's own methods: daemon.status and rpc.discover. Loop thread only. */
#pragma once

#include <json-c/json.h>
#include <stdbool.h>

#include "methods.h"

struct server;

/* daemon.status: a provider (the engine) fills in "sandboxes" (count per state)
 * and "proxmox" ({"reachable", "last_error"}) by replacing those members of
 * `status`. Without one they read {} and {"configured": false/true, "reachable":
 * null, "last_error": "not configured"/"not connected yet"}. */
typedef void (*status_provider_t)(json_object *status, void *userdata);

struct methods_daemon {
    struct server *server;
    status_provider_t provider;
    void *provider_data;
    json_object *openrpc; /* the parsed API document, cached */
    struct method_def rows[3];
};

/* Registers daemon.status and rpc.discover for server s. 0 or a negative errno. */
int methods_daemon_register(struct methods_daemon *md, struct server *s);
void methods_daemon_set_status_provider(struct methods_daemon *md, status_provider_t fn,
                                        void *userdata);
/* Unregisters the table and frees the cached document. */
void methods_daemon_done(struct methods_daemon *md);
