/* Params of the snapshot methods. See params-snapshot.h. */
#include "params-snapshot.h"

#include <string.h>

#include "params-internal.h"

#define NAME_MSG                                                                                   \
    "must be 2..40 characters: a letter, then letters, digits, '_' or '-' (not \"current\" or "    \
    "\"vzdump\")"

bool params_snapshot_name_valid(const char *name)
{
    static const char more[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-";
    size_t len = strlen(name);

    if (len < 2 || len > PARAMS_SNAPSHOT_NAME_MAX)
        return false;
    if (!((name[0] >= 'a' && name[0] <= 'z') || (name[0] >= 'A' && name[0] <= 'Z')))
        return false;
    if (strspn(name, more) != len)
        return false;
    return strcmp(name, "current") != 0 && strcmp(name, "vzdump") != 0;
}

static int params_sandbox_snapshot_fill(json_object *params, void *at, struct params_error *err)
{
    static const char *const allowed[] = {"id", "name", NULL};
    static const struct params_field fields[] = {
        PARAMS_F_ID_OF(struct params_sandbox_snapshot),
    };
    struct params_sandbox_snapshot *p = at;
    json_object *v = NULL;
    const char *s;
    int r = params_read(params, allowed, fields, ELEMENTSOF(fields), p, err);

    if (r < 0)
        return r;
    if (!json_object_object_get_ex(params, "name", &v))
        return params_fail(err, "name", "required");
    if (!json_object_is_type(v, json_type_string))
        return params_fail(err, "name", "must be a string");
    s = json_object_get_string(v);
    if ((size_t)json_object_get_string_len(v) != strlen(s) || !params_snapshot_name_valid(s))
        return params_fail(err, "name", NAME_MSG);
    memcpy(p->name, s, strlen(s) + 1);
    return 0;
}

PARAMS_SPEC(params_sandbox_snapshot, struct params_sandbox_snapshot, NULL);
