/* The cleanup helper for json-c objects, defined once for every layer. Header
 * only; depends on json-c alone. */
#pragma once

#include <json-c/json.h>

/* Drops the reference held by *o, if any (for _cleanup_json_). */
static inline void jobj_unrefp(json_object **o)
{
    if (*o)
        json_object_put(*o);
}
#define _cleanup_json_ __attribute__((cleanup(jobj_unrefp)))
