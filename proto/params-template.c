/* Params of the template methods. See params-template.h. */
#include "params-template.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json-util.h"
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

/* err's param as "defaults.<param>" (the reason keeps naming the member). */
static int defaults_fail(struct params_error *err, int r)
{
    char param[sizeof err->param];

    if (err && r == -EINVAL && strncmp(err->param, "defaults", 8) != 0) {
        snprintf(param, sizeof param, "defaults.%s", err->param);
        memcpy(err->param, param, sizeof param);
    }
    return r;
}

/* The checked defaults into o (env, cwd, user as given); *ret_bytes their size. */
static int defaults_read(json_object *v, json_object *o, size_t *ret_bytes,
                         struct params_error *err)
{
    static const char *const allowed[] = {"env", "cwd", "user", NULL};
    _cleanup_(params_kv_list_done) struct params_kv_list env = {};
    _cleanup_free_ char *cwd = NULL;
    char user[EXEC_USER_MAX + 1] = "";
    size_t bytes = 0;
    int r;

    r = params_check_object(v, allowed, err);
    if (r >= 0)
        r = params_env(v, PARAMS_TEMPLATE_ENV_MAX, PARAMS_TEMPLATE_DEFAULTS_BYTES_MAX, &env, err);
    if (r >= 0)
        r = params_path(v, "cwd", false, &cwd, err);
    if (r >= 0)
        r = params_user(v, user, err);
    if (r < 0)
        return defaults_fail(err, r);
    if (env.n > 0) {
        json_object *e = json_object_new_object();

        json_object_object_add(o, "env", e);
        for (size_t i = 0; i < env.n; i++) {
            json_object_object_add(e, env.items[i].key, json_object_new_string(env.items[i].value));
            bytes += strlen(env.items[i].key) + strlen(env.items[i].value);
        }
    }
    if (cwd) {
        json_object_object_add(o, "cwd", json_object_new_string(cwd));
        bytes += strlen(cwd);
    }
    if (user[0]) {
        json_object_object_add(o, "user", json_object_new_string(user));
        bytes += strlen(user);
    }
    *ret_bytes = bytes;
    return 0;
}

int params_template_defaults(json_object *v, json_object **ret, struct params_error *err)
{
    _cleanup_json_ json_object *o = json_object_new_object();
    size_t bytes = 0;
    int r;

    if (!o)
        return -ENOMEM;
    if (v && !json_object_is_type(v, json_type_object))
        return params_fail(err, "defaults", "must be an object of env, cwd and user");
    if (v) {
        r = defaults_read(v, o, &bytes, err);
        if (r < 0)
            return r;
    }
    if (bytes > PARAMS_TEMPLATE_DEFAULTS_BYTES_MAX) {
        params_fail(err, "defaults", "env names and values, cwd and user exceed %d bytes in total",
                    PARAMS_TEMPLATE_DEFAULTS_BYTES_MAX);
        if (err) {
            err->has_range = true;
            err->min = 0;
            err->max = PARAMS_TEMPLATE_DEFAULTS_BYTES_MAX;
        }
        return -EINVAL;
    }
    *ret = TAKE_PTR(o);
    return 0;
}

static int params_template_create_fill(json_object *params, void *at, struct params_error *err)
{
    static const char *const allowed[] = {"id", "name", "defaults", NULL};
    static const struct params_field fields[] = {
        PARAMS_F_ID_OF(struct params_template_create),
    };
    struct params_template_create *p = at;
    json_object *v = NULL;
    int r = params_read(params, allowed, fields, ELEMENTSOF(fields), p, err);

    if (r >= 0)
        r = read_name(params, p->name, err);
    if (r < 0)
        return r;
    (void)json_object_object_get_ex(params, "defaults", &v);
    return params_template_defaults(v, &p->defaults, err);
}

static void params_template_create_done(struct params_template_create *p)
{
    json_object_put(p->defaults);
    p->defaults = NULL;
}

PARAMS_SPEC_DONE(params_template_create, struct params_template_create);

static int params_template_name_fill(json_object *params, void *at, struct params_error *err)
{
    static const char *const allowed[] = {"name", NULL};
    struct params_template_name *p = at;
    int r = params_read(params, allowed, NULL, 0, p, err);

    return r < 0 ? r : read_name(params, p->name, err);
}

PARAMS_SPEC(params_template_name, struct params_template_name, NULL);
