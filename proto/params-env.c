/* Objects of string pairs (labels, env), the "env" parameter (sandbox.exec, process.start,
 * sandbox.create) and the error data every params kind reports. See params-internal.h. */
#include "params-internal.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int params_fail(struct params_error *err, const char *param, const char *fmt, ...)
{
    va_list ap;

    if (err) {
        snprintf(err->param, sizeof(err->param), "%s", param);
        va_start(ap, fmt);
        vsnprintf(err->reason, sizeof(err->reason), fmt, ap);
        va_end(ap);
    }
    return -EINVAL;
}

int params_user(json_object *params, char ret[static EXEC_USER_MAX + 1], struct params_error *err)
{
    json_object *v = NULL;
    const char *s;
    size_t n;

    if (!json_object_object_get_ex(params, "user", &v))
        return 0;
    if (json_object_is_type(v, json_type_int)) {
        int64_t uid;

        errno = 0;
        uid = json_object_get_int64(v);
        if (errno || uid < 0 || uid > EXEC_UID_MAX)
            return params_fail(err, "user", "a uid must be in 0..%d", EXEC_UID_MAX);
        snprintf(ret, EXEC_USER_MAX + 1, "%" PRId64, uid);
        return 0;
    }
    if (!json_object_is_type(v, json_type_string))
        return params_fail(err, "user", "must be a user name or a uid");
    s = json_object_get_string(v);
    n = (size_t)json_object_get_string_len(v);
    if (n == 0 || n > EXEC_USER_MAX || s[0] == '-' || strlen(s) != n ||
        strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-") != n)
        return params_fail(err, "user",
                           "must be a user name of 1..%d characters A-Z a-z 0-9 . _ - "
                           "(not starting with -) or a uid",
                           EXEC_USER_MAX);
    if (strspn(s, "0123456789") == n && (n > 10 || strtoll(s, NULL, 10) > EXEC_UID_MAX))
        return params_fail(err, "user", "a uid must be in 0..%d", EXEC_UID_MAX);
    memcpy(ret, s, n + 1);
    return 0;
}

/* Adds name: the integer v to d. */
static int add_int(json_object *d, const char *name, int64_t v)
{
    json_object *x = json_object_new_int64(v);

    if (!x || json_object_object_add(d, name, x) < 0) {
        json_object_put(x);
        return -ENOMEM;
    }
    return 0;
}

json_object *params_error_data(const struct params_error *e)
{
    char reason[sizeof(e->param) + sizeof(e->reason) + 32];
    json_object *d = json_object_new_object();
    bool container = strcmp(e->param, "params") == 0 || !e->param[0];
    int r = d ? 0 : -ENOMEM;

    /* The reason names its subject: the parameter leads unless the reason names it. */
    if (strcmp(e->reason, "unknown parameter") == 0)
        snprintf(reason, sizeof reason, "unknown parameter \"%s\"", e->param);
    else if (container || strncmp(e->reason, e->param, strlen(e->param)) == 0)
        snprintf(reason, sizeof reason, "%s", e->reason);
    else
        snprintf(reason, sizeof reason, "%s: %s", e->param, e->reason);
    if (r == 0 && json_object_object_add(d, "reason", json_object_new_string(reason)) < 0)
        r = -ENOMEM;
    if (r == 0 && json_object_object_add(d, "param", json_object_new_string(e->param)) < 0)
        r = -ENOMEM;
    if (r == 0 && e->variable[0] &&
        json_object_object_add(d, "variable", json_object_new_string(e->variable)) < 0)
        r = -ENOMEM;
    if (r == 0 && e->has_range) {
        r = add_int(d, "min", e->min);
        if (r == 0)
            r = add_int(d, "max", e->max);
    }
    if (r < 0) {
        json_object_put(d);
        return NULL;
    }
    return d;
}

void params_kv_list_done(struct params_kv_list *l)
{
    if (!l)
        return;
    for (size_t i = 0; i < l->n; i++) {
        free(l->items[i].key);
        free(l->items[i].value);
    }
    free(l->items);
    *l = (struct params_kv_list){};
}

int params_pairs(json_object *params, const char *name, int max, size_t max_bytes, const char *noun,
                 params_pair_check *check, struct params_kv_list *ret, struct params_error *err)
{
    _cleanup_(params_kv_list_done) struct params_kv_list l = {};
    json_object *v = NULL;
    size_t n, total = 0;
    int r;

    if (!params || !json_object_object_get_ex(params, name, &v))
        return 0;
    if (!json_object_is_type(v, json_type_object))
        return params_fail(err, name, "must be an object of strings");
    n = (size_t)json_object_object_length(v);
    if (n > (size_t)max)
        return params_fail(err, name, "more than %d %s", max, noun);
    if (n == 0)
        return 0;
    l.items = calloc(n, sizeof(*l.items));
    if (!l.items)
        return -ENOMEM;
    json_object_object_foreach(v, key, val)
    {
        r = check(name, key, val, max_bytes, &total, err);
        if (r < 0)
            return r;
        l.items[l.n].key = strdup(key);
        l.items[l.n].value = strdup(json_object_get_string(val));
        l.n++;
        if (!l.items[l.n - 1].key || !l.items[l.n - 1].value)
            return -ENOMEM;
    }
    *ret = l;
    l = (struct params_kv_list){};
    return 0;
}

static bool params_env_name_ok(const char *k, size_t n)
{
    if (n == 0 || n > PARAMS_ENV_NAME_MAX)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = k[i];
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
                  (i > 0 && c >= '0' && c <= '9');

        if (!ok)
            return false;
    }
    return true;
}

/* Names the variable in err->variable (a valid name only: an invalid one may hold anything). */
static int env_fail(struct params_error *err, const char *name, const char *key, const char *reason)
{
    params_fail(err, name, "%s", reason);
    if (err && params_env_name_ok(key, strlen(key)))
        snprintf(err->variable, sizeof err->variable, "%s", key);
    return -EINVAL;
}

static int params_env_check(const char *name, const char *key, json_object *val, size_t max_bytes,
                            size_t *total, struct params_error *err)
{
    size_t kn = strlen(key), vn;
    char why[sizeof(err->reason)];

    if (!params_env_name_ok(key, kn)) {
        snprintf(why, sizeof why,
                 "variable name \"%.64s%s\" must match [A-Za-z_][A-Za-z0-9_]*, at most %d bytes",
                 key, kn > 64 ? "..." : "", PARAMS_ENV_NAME_MAX);
        return env_fail(err, name, key, why);
    }
    if (!json_object_is_type(val, json_type_string)) {
        snprintf(why, sizeof why, "the value of %.64s must be a string", key);
        return env_fail(err, name, key, why);
    }
    vn = (size_t)json_object_get_string_len(val);
    if (memchr(json_object_get_string(val), '\0', vn)) {
        snprintf(why, sizeof why, "the value of %.64s contains NUL", key);
        return env_fail(err, name, key, why);
    }
    *total += kn + vn;
    if (*total > max_bytes) {
        snprintf(why, sizeof why, "names and values exceed %zu bytes in total (at %.64s)",
                 max_bytes, key);
        env_fail(err, name, key, why);
        if (err) {
            err->has_range = true;
            err->min = 0;
            err->max = (int64_t)max_bytes;
        }
        return -EINVAL;
    }
    return 0;
}

int params_env(json_object *params, int max, size_t max_bytes, struct params_kv_list *ret,
               struct params_error *err)
{
    return params_pairs(params, "env", max, max_bytes, "variables", params_env_check, ret, err);
}
