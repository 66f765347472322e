/* Templates as objects of the API (template.list, template.create, template.delete,
 * template.publish; docs/protocol.md "Templates"). A template made from a sandbox is that
 * sandbox's container converted in Proxmox (POST .../template): the sandbox ends, its
 * container becomes the template, on the node it ran on. Its marker (marker.h, tmpl=1) in
 * the container's Proxmox description is its record: a restart, or a lost state folder, finds
 * it again when the reconcile reads the pool (lib/engine/template-rt.c). Loop thread only. */
#pragma once

#include <stdbool.h>
#include <sys/types.h>

#include <json-c/json.h>

#include "sandbox-snapshot.h" /* engine_json_cb */
#include "sandbox.h"

/* The deadline of template.create (stop, mark, convert, wait) and of template.delete. */
#define ENGINE_TEMPLATE_TIMEOUT_MS 300000u

/* {"templates": [...]}: the templates uid may use (admin: all), configured ones first. */
json_object *engine_templates_json(struct engine *e, uid_t uid, bool admin);

/* sb (READY, the caller's) becomes template `name` with defaults (checked by
 * params_template_defaults(), referenced; NULL or {}: none): result {"template": {...}} once
 * it is usable. Refused synchronously (negative errno, ret_err filled): a name in use
 * (ENGINE_E_INVALID "name"), past [templates] max_templates_per_uid (ENGINE_E_QUOTA), a
 * sandbox not READY, busy or a pool member (ENGINE_E_STATE, ENGINE_E_BUSY). A failure later
 * leaves the sandbox FAILED (its container stopped) with the error. */
int engine_template_create(struct engine *e, struct sandbox *sb, const char *name,
                           json_object *defaults, engine_json_cb cb, void *userdata,
                           struct engine_error *ret_err);

/* Deletes runtime template `name` (uid its owner, or admin): result {"name", "deleted": true}.
 * Refused: unknown or not visible (ENGINE_E_INVALID "name"), a configured one
 * (ENGINE_E_INVALID), not the caller's (ENGINE_E_PERMISSION), used by sandboxes or pool
 * members (ENGINE_E_STATE, message naming the counts). */
int engine_template_delete(struct engine *e, const char *name, uid_t uid, bool admin,
                           engine_json_cb cb, void *userdata, struct engine_error *ret_err);

/* Publishes runtime template `name` to every uid (the caller checked admin): result
 * {"template": {...}}. */
int engine_template_publish(struct engine *e, const char *name, engine_json_cb cb, void *userdata,
                            struct engine_error *ret_err);

/* Whether uid may clone from template `name` (unknown names: true, the create refuses them). */
bool engine_template_usable(struct engine *e, const char *name, uid_t uid, bool admin);
