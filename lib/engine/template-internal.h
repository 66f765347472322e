/* Shared by template-rt.c, template-create.c and the reconcile. Engine code only. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include <json-c/json.h>

#include "sandbox-internal.h"

struct marker;
struct pve_vm_list;

/* The template object of template.list (NULL: no such name). */
json_object *engine_template_json(struct engine *e, const char *name);
/* The Proxmox description of t: its marker line (tmpl=1). */
int engine_rt_marker(struct engine *e, const struct engine_template *t, char **ret_description);
/* A template of the pool (conf: its Proxmox config) that this daemon marked (tmpl=1): known
 * from now on (the record of the sandbox it was made from, when a restart came between the
 * conversion and its removal, has no container left: the reconcile forgets it). Others are
 * not ours: 0. */
int engine_rt_adopt_config(struct engine *e, uint32_t vmid, const char *node, json_object *conf);
/* Forgets the runtime templates the pool (members: its listing, NULL: nothing done) no longer
 * holds (deleted behind the daemon's back, or by a delete a restart interrupted). */
void engine_rt_prune(struct engine *e, const struct pve_vm_list *members);
/* The status poll of a step waiting for a conversion into a template (template-create.c,
 * replica.c; userdata the step's sandbox): done once Proxmox reports template 1, polled again
 * every 250 ms before. */
void engine_template_on_convert_status(const struct pve_result *res, void *userdata);
/* An audit record (event "template.create" ...) about t, asked for by caller_uid. */
void engine_audit_template(struct engine *e, const char *event, const struct engine_template *t,
                           int64_t caller_uid);

/* ---- a template's defaults (template.create's "defaults") ---- */
/* The default env of sb's template (an object of strings, borrowed), or NULL
 * (sandbox-view.c). */
json_object *sandbox_template_env(const struct sandbox *sb);
/* template-defaults.c: */
/* The description of a template made from a sandbox: m's marker line and, when defaults has
 * members, the defaults as the labels line of sandbox m->sandbox (marker.h), each member a
 * label: "cwd", "user", "env.NAME". */
int engine_rt_description(const struct marker *m, json_object *defaults, char **ret_description);
/* The defaults that description keeps for sandbox (NULL when none; -EBADMSG for a line that
 * does not parse or holds what template.create refuses). */
int engine_rt_defaults_parse(const char *description, const char *sandbox, json_object **ret);
