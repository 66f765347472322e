/* What the sandbox methods say about templates, operator caps and the warm pool
 * (daemon/methods-pool.c). Loop thread only. */
#pragma once

#include <json-c/json.h>

#include "sandbox.h"

/* The data of a -32602 for an ENGINE_E_INVALID error: {reason, param} plus, for a cap,
 * {cap, max}, for a disk below the template's {min}, for an unknown template
 * {templates: [names]}. */
json_object *pool_invalid_data(const struct engine *e, const struct engine_error *err);
/* daemon.status "pool": {NAME: {target, ready, filling, hits, misses}} per template. */
void pool_status_add(const struct engine *e, json_object *status);
