/* Params of sandbox.fork. See params-fork.h. */
#include "params-fork.h"

#include <string.h>

#include "params-internal.h"

static int params_sandbox_fork_fill(json_object *params, void *at, struct params_error *err)
{
    static const char *const allowed[] = {"id", "count", "snapshot", "ttl_s", NULL};
    static const struct params_field fields[] = {
        PARAMS_F_ID_OF(struct params_sandbox_fork),
        PARAMS_FIELD(struct params_sandbox_fork, count, PARAMS_F_INT, false, 1,
                     PARAMS_FORK_COUNT_MAX),
        PARAMS_F_INT64_OF(struct params_sandbox_fork, ttl_s, false, 1, PARAMS_TTL_S_MAX),
    };
    struct params_sandbox_fork *p = at;
    json_object *v = NULL;
    const char *s;
    int r;

    *p = (struct params_sandbox_fork){.count = -1, .ttl_s = -1};
    r = params_read(params, allowed, fields, ELEMENTSOF(fields), p, err);
    if (r < 0)
        return r;
    if (p->count < 0)
        p->count = 1;
    if (!json_object_object_get_ex(params, "snapshot", &v))
        return 0;
    if (!json_object_is_type(v, json_type_string))
        return params_fail(err, "snapshot", "must be a string");
    s = json_object_get_string(v);
    if ((size_t)json_object_get_string_len(v) != strlen(s) || !params_snapshot_name_valid(s))
        return params_fail(err, "snapshot",
                           "must be 2..40 characters: a letter, then letters, digits, '_' or "
                           "'-' (not \"current\" or \"vzdump\")");
    memcpy(p->snapshot, s, strlen(s) + 1);
    return 0;
}

PARAMS_SPEC(params_sandbox_fork, struct params_sandbox_fork, NULL);
