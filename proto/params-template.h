/* Params of the template methods (template.create, template.delete, template.publish;
 * template.list takes none; docs/protocol.md). Pure, as params.h. */
#pragma once

#include "api-limits.h"
#include "params.h"

/* template.create */
struct params_template_create {
    char id[PARAMS_ID_MAX + 1];
    char name[PARAMS_TEMPLATE_MAX + 1];
};

/* template.delete, template.publish */
struct params_template_name {
    char name[PARAMS_TEMPLATE_MAX + 1];
};

extern const struct params_spec params_template_create_spec;
extern const struct params_spec params_template_name_spec;
