/* Params of the template methods (template.create, template.delete, template.publish;
 * template.list takes none; docs/protocol.md). Pure, as params.h. */
#pragma once

#include "api-limits.h"
#include "params.h"

/* template.create */
struct params_template_create {
    char id[PARAMS_ID_MAX + 1];
    char name[PARAMS_TEMPLATE_MAX + 1];
    /* {"env": {...}, "cwd": "/abs", "user": "name or uid"}, each present only when given
     * (a new object, never NULL after a successful parse; {} when absent) */
    json_object *defaults;
};

/* template.delete, template.publish */
struct params_template_name {
    char name[PARAMS_TEMPLATE_MAX + 1];
};

extern const struct params_spec params_template_create_spec;
extern const struct params_spec params_template_name_spec;

/* A template's defaults (template.create's "defaults", a template's marker): v an object of
 * at most "env" (as exec's, at most PARAMS_TEMPLATE_ENV_MAX variables), "cwd" (an absolute
 * path) and "user" (as exec's), their bytes summing to at most
 * PARAMS_TEMPLATE_DEFAULTS_BYTES_MAX; NULL for none. *ret a new object of the members given
 * ({} for none). Errors name "defaults" or "defaults.<member>". */
int params_template_defaults(json_object *v, json_object **ret, struct params_error *err);
