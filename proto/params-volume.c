/* Params of the volume methods. See params-volume.h. */
#include "params-volume.h"

#include <string.h>

#include "params-internal.h"

#define NAME_RULE "must be 1..32 characters of a-z, 0-9 and '-'"

static int read_name(json_object *params, char ret[PARAMS_VOLUME_NAME_MAX + 1],
                     struct params_error *err)
{
    return params_volume_str(params, "name", "name", PARAMS_VOLUME_NAME_MAX, ret,
                             params_volume_name_valid, NAME_RULE, err);
}

static int params_volume_create_fill(json_object *params, void *at, struct params_error *err)
{
    static const char *const allowed[] = {"name", "size_gb", NULL};
    static const struct params_field fields[] = {
        PARAMS_F_INT64_OF(struct params_volume_create, size_gb, true, 1, PARAMS_VOLUME_SIZE_GB_MAX),
    };
    struct params_volume_create *p = at;
    int r = params_read(params, allowed, fields, ELEMENTSOF(fields), p, err);

    return r < 0 ? r : read_name(params, p->name, err);
}

PARAMS_SPEC(params_volume_create, struct params_volume_create, NULL);

static int params_volume_name_fill(json_object *params, void *at, struct params_error *err)
{
    static const char *const allowed[] = {"name", NULL};
    struct params_volume_name *p = at;
    int r = params_read(params, allowed, NULL, 0, p, err);

    return r < 0 ? r : read_name(params, p->name, err);
}

PARAMS_SPEC(params_volume_name, struct params_volume_name, NULL);

#define PATH_RULE                                                                                  \
    "must be an absolute path of at most 255 bytes, components of A-Z, a-z, 0-9, '.', '_' and "    \
    "'-' (not '.' or '..'), without a trailing '/'"

static int params_sandbox_attach_fill(json_object *params, void *at, struct params_error *err)
{
    static const char *const allowed[] = {"id", "volume", "path", "read_only", NULL};
    static const struct params_field fields[] = {
        PARAMS_F_ID_OF(struct params_sandbox_attach),
        PARAMS_F_BOOL_OF(struct params_sandbox_attach, read_only, false),
    };
    struct params_sandbox_attach *p = at;
    int r = params_read(params, allowed, fields, ELEMENTSOF(fields), p, err);

    if (r >= 0)
        r = params_volume_str(params, "volume", "volume", PARAMS_VOLUME_NAME_MAX, p->volume,
                              params_volume_name_valid, NAME_RULE, err);
    if (r >= 0)
        r = params_volume_str(params, "path", "path", PARAMS_VOLUME_PATH_MAX, p->path,
                              params_volume_path_valid, PATH_RULE, err);
    return r;
}

PARAMS_SPEC(params_sandbox_attach, struct params_sandbox_attach, NULL);

static int params_sandbox_detach_fill(json_object *params, void *at, struct params_error *err)
{
    static const char *const allowed[] = {"id", "volume", NULL};
    static const struct params_field fields[] = {
        PARAMS_F_ID_OF(struct params_sandbox_attach),
    };
    struct params_sandbox_attach *p = at;
    int r = params_read(params, allowed, fields, ELEMENTSOF(fields), p, err);

    return r < 0 ? r
                 : params_volume_str(params, "volume", "volume", PARAMS_VOLUME_NAME_MAX, p->volume,
                                     params_volume_name_valid, NAME_RULE, err);
}

PARAMS_SPEC(params_sandbox_detach, struct params_sandbox_attach, NULL);
