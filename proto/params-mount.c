/* Volume names, mount paths and sandbox.create's "volumes" (params-volume.h): read without
 * params.c, which calls them. */
#include "params-volume.h"

#include <string.h>

#include "params-internal.h"

bool params_volume_name_valid(const char *name)
{
    size_t n = name ? strlen(name) : 0;

    if (n == 0 || n > PARAMS_VOLUME_NAME_MAX)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!((name[i] >= 'a' && name[i] <= 'z') || (name[i] >= '0' && name[i] <= '9') ||
              name[i] == '-'))
            return false;
    return true;
}

static bool path_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
           c == '_' || c == '-';
}

bool params_volume_path_valid(const char *path)
{
    size_t n = path ? strlen(path) : 0;

    if (n < 2 || n > PARAMS_VOLUME_PATH_MAX || path[0] != '/' || path[n - 1] == '/')
        return false;
    for (const char *p = path; *p;) {
        const char *c = p + 1, *e = c;

        while (*e && *e != '/')
            e++;
        if (e == c || (e - c == 1 && c[0] == '.') || (e - c == 2 && c[0] == '.' && c[1] == '.'))
            return false;
        for (const char *q = c; q < e; q++)
            if (!path_char(*q))
                return false;
        p = e;
    }
    return true;
}

int params_volume_str(json_object *obj, const char *name, const char *where, size_t max, char *ret,
                      bool (*ok)(const char *), const char *rule, struct params_error *err)
{
    json_object *v = NULL;

    if (!json_object_object_get_ex(obj, name, &v))
        return params_fail(err, where, "missing");
    if (!json_object_is_type(v, json_type_string))
        return params_fail(err, where, "must be a string");
    if ((size_t)json_object_get_string_len(v) > max || !ok(json_object_get_string(v)))
        return params_fail(err, where, "%s", rule);
    strcpy(ret, json_object_get_string(v));
    return 0;
}

#define NAME_RULE "must be 1..32 characters of a-z, 0-9 and '-'"
#define PATH_RULE                                                                                  \
    "must be an absolute path of at most 255 bytes, components of A-Z, a-z, 0-9, '.', '_' and "    \
    "'-' (not '.' or '..'), without a trailing '/'"

/* One entry i of "volumes". */
static int read_mount(json_object *o, size_t i, struct params_volume_mount *ret,
                      struct params_error *err)
{
    static const char *const allowed[] = {"name", "path", "read_only", NULL};
    char where[48];
    json_object *v = NULL;
    int r;

    snprintf(where, sizeof(where), "volumes[%zu]", i);
    if (!json_object_is_type(o, json_type_object))
        return params_fail(err, where, "must be an object");
    json_object_object_foreach(o, key, val)
    {
        bool known = false;

        (void)val;
        for (size_t k = 0; allowed[k]; k++)
            known = known || strcmp(key, allowed[k]) == 0;
        if (!known) {
            snprintf(where, sizeof(where), "volumes[%zu].%.16s", i, key);
            return params_fail(err, where, "unknown parameter");
        }
    }
    snprintf(where, sizeof(where), "volumes[%zu].name", i);
    r = params_volume_str(o, "name", where, PARAMS_VOLUME_NAME_MAX, ret->name,
                          params_volume_name_valid, NAME_RULE, err);
    if (r < 0)
        return r;
    snprintf(where, sizeof(where), "volumes[%zu].path", i);
    r = params_volume_str(o, "path", where, PARAMS_VOLUME_PATH_MAX, ret->path,
                          params_volume_path_valid, PATH_RULE, err);
    if (r < 0)
        return r;
    snprintf(where, sizeof(where), "volumes[%zu].read_only", i);
    if (json_object_object_get_ex(o, "read_only", &v)) {
        if (!json_object_is_type(v, json_type_boolean))
            return params_fail(err, where, "must be a boolean");
        ret->read_only = json_object_get_boolean(v);
    }
    return 0;
}

int params_volume_mounts(json_object *params, struct params_volume_mount ret[PARAMS_VOLUMES_MAX],
                         size_t *ret_n, struct params_error *err)
{
    struct params_volume_mount m[PARAMS_VOLUMES_MAX] = {0};
    json_object *a = NULL;
    size_t n;
    int r;

    if (!json_object_object_get_ex(params, "volumes", &a)) {
        *ret_n = 0;
        return 0;
    }
    if (!json_object_is_type(a, json_type_array))
        return params_fail(err, "volumes", "must be an array");
    n = json_object_array_length(a);
    if (n > PARAMS_VOLUMES_MAX)
        return params_fail(err, "volumes", "more than %d volumes", PARAMS_VOLUMES_MAX);
    for (size_t i = 0; i < n; i++) {
        r = read_mount(json_object_array_get_idx(a, i), i, &m[i], err);
        if (r < 0)
            return r;
        for (size_t j = 0; j < i; j++) {
            if (strcmp(m[j].name, m[i].name) == 0)
                return params_fail(err, "volumes", "volume \"%s\" given twice", m[i].name);
            if (strcmp(m[j].path, m[i].path) == 0)
                return params_fail(err, "volumes", "path \"%s\" given twice", m[i].path);
        }
    }
    memcpy(ret, m, n * sizeof(*m));
    *ret_n = n;
    return 0;
}
