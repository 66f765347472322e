/* Params of the template methods. See params-template.h. */
#include "params-template.h"

#include <string.h>

#include "params-internal.h"

/* "name": a template name, [a-z0-9-], 1..PARAMS_TEMPLATE_MAX bytes, required. */
static int read_name(json_object *params, char ret[PARAMS_TEMPLATE_MAX + 1],
                     struct params_error *err)
{
    json_object *v = NULL;
    const char *s;
    size_t n;

    if (!json_object_object_get_ex(params, "name", &v))
        return params_fail(err, "name", "missing");
    if (!json_object_is_type(v, json_type_string))
        return params_fail(err, "name", "must be a string");
    s = json_object_get_string(v);
    n = (size_t)json_object_get_string_len(v);
    if (n == 0 || n > PARAMS_TEMPLATE_MAX)
        return params_fail(err, "name", "must be 1..32 characters");
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '-'))
            return params_fail(err, "name", "may only contain a-z, 0-9 and '-'");
    memcpy(ret, s, n);
    ret[n] = '\0';
    return 0;
}

static int params_template_create_fill(json_object *params, void *at, struct params_error *err)
{
    static const char *const allowed[] = {"id", "name", NULL};
    static const struct params_field fields[] = {
        PARAMS_F_ID_OF(struct params_template_create),
    };
    struct params_template_create *p = at;
    int r = params_read(params, allowed, fields, ELEMENTSOF(fields), p, err);

    return r < 0 ? r : read_name(params, p->name, err);
}

PARAMS_SPEC(params_template_create, struct params_template_create, NULL);

static int params_template_name_fill(json_object *params, void *at, struct params_error *err)
{
    static const char *const allowed[] = {"name", NULL};
    struct params_template_name *p = at;
    int r = params_read(params, allowed, NULL, 0, p, err);

    return r < 0 ? r : read_name(params, p->name, err);
}

PARAMS_SPEC(params_template_name, struct params_template_name, NULL);
