/* The template methods of docs/protocol.md (template.list, template.create, template.delete,
 * template.publish) over lib/engine/template-api.h. Loop thread only. */
#pragma once

struct req;

void method_template_list(struct req *r, void *params, void *userdata);
void method_template_create(struct req *r, void *params, void *userdata);
void method_template_delete(struct req *r, void *params, void *userdata);
void method_template_publish(struct req *r, void *params, void *userdata);
