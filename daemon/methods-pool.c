/* Templates, operator caps and the warm pool as the protocol shows them. See methods-pool.h. */
#include "methods-pool.h"

#include <stdio.h>
#include <string.h>

json_object *pool_invalid_data(const struct engine *e, const struct engine_error *err)
{
    json_object *d = json_object_new_object();
    const char *param = err->param ? err->param : "params";
    char reason[256];

    /* The reason quotes the effective limit: the operator's cap, or the template's disk. */
    if (err->cap)
        snprintf(reason, sizeof reason, "%s must be 1..%llu (%s)", param,
                 (unsigned long long)err->limit, err->cap);
    else if (err->limit)
        snprintf(reason, sizeof reason, "%s (at least %llu)", err->message ? err->message : "",
                 (unsigned long long)err->limit);
    else if (strcmp(param, "params") != 0 && err->message &&
             strncmp(err->message, param, strlen(param)) != 0)
        snprintf(reason, sizeof reason, "%s: %s", param, err->message); /* names its subject */
    else
        snprintf(reason, sizeof reason, "%s", err->message ? err->message : "");
    json_object_object_add(d, "reason", json_object_new_string(reason));
    json_object_object_add(d, "param", json_object_new_string(param));
    if (err->cap) {
        json_object_object_add(d, "cap", json_object_new_string(err->cap));
        json_object_object_add(d, "min", json_object_new_int64(1));
        json_object_object_add(d, "max", json_object_new_int64((int64_t)err->limit));
    } else if (err->limit)
        json_object_object_add(d, "min", json_object_new_int64((int64_t)err->limit));
    if (err->templates) {
        json_object *a = json_object_new_array();
        const char *n;

        for (size_t i = 0; (n = engine_template_name(e, i)); i++)
            json_object_array_add(a, json_object_new_string(n));
        json_object_object_add(d, "templates", a);
    }
    return d;
}

void pool_status_add(const struct engine *e, json_object *status)
{
    json_object *pool = json_object_new_object();
    struct engine_pool_stats st;

    for (size_t i = 0; engine_pool_stats(e, i, &st); i++) {
        json_object *o = json_object_new_object();

        json_object_object_add(o, "target", json_object_new_int64(st.target));
        json_object_object_add(o, "ready", json_object_new_int64(st.ready));
        json_object_object_add(o, "filling", json_object_new_int64(st.filling));
        json_object_object_add(o, "hits", json_object_new_int64((int64_t)st.hits));
        json_object_object_add(o, "misses", json_object_new_int64((int64_t)st.misses));
        json_object_object_add(pool, st.template, o);
    }
    json_object_object_add(status, "pool", pool);
}
