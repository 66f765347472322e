/* The sandbox methods of docs/protocol.md (sandbox.create/get/list/set_internet/renew/resize/
 * destroy, file.write, file.read) over the engine in sandbox.h, and what they add to
 * daemon.status. Their rows are in the method table (methods-table.c); their state is the
 * daemon's struct sandbox_methods (methods-common.h). Loop thread only. */
#pragma once

#include <json-c/json.h>
#include <uv.h>

#include "config.h"
#include "methods-common.h" /* the shared helpers, for the files that include this one */
#include "methods.h"

struct events;

void method_sandbox_create(struct req *r, void *params, void *userdata);
void method_sandbox_get(struct req *r, void *params, void *userdata);
void method_sandbox_list(struct req *r, void *params, void *userdata);
void method_sandbox_set_internet(struct req *r, void *params, void *userdata);
void method_sandbox_renew(struct req *r, void *params, void *userdata);
void method_sandbox_resize(struct req *r, void *params, void *userdata);
void method_sandbox_destroy(struct req *r, void *params, void *userdata);
void method_file_write(struct req *r, void *params, void *userdata);
void method_file_read(struct req *r, void *params, void *userdata);
/* The sandbox object of docs/protocol.md (as sandbox.get answers). */
json_object *methods_sandbox_json(const struct sandbox *sb);
/* An engine callback answering the sandbox object (userdata: a methods_wait; methods-common.h). */
void methods_wait_on_sandbox(const struct engine_error *err, struct sandbox *sb, void *userdata);

/* Creates the engine on loop with the live config into sm, its events published to events,
 * and starts the reconcile. Returns 0 or a negative errno (the error is logged). */
int methods_sandbox_start(struct sandbox_methods *sm, uv_loop_t *loop, const struct config *cfg,
                          struct events *events);
/* After a reload: templates are checked again and the warm pool follows the new targets. */
void methods_sandbox_reload(struct sandbox_methods *sm);
/* daemon.status: the sandboxes, Proxmox, the checks, the pools and the reconcile. */
void methods_sandbox_status(struct sandbox_methods *sm, json_object *status);
/* Closes the engine (sandboxes stay in Proxmox unless destroy_on_stop); the loop runs the
 * rest. */
void methods_sandbox_stop(struct sandbox_methods *sm);
