/* Params of the port forward methods. See params-forward.h. */
#include "params-forward.h"

#include <string.h>

#include "params-internal.h"

/* An optional string of 1..max bytes into buf (left "" when absent). */
static int get_string(json_object *params, const char *name, size_t max, char *buf,
                      struct params_error *err)
{
    json_object *v = NULL;
    const char *s;
    size_t len;

    if (!params || !json_object_object_get_ex(params, name, &v))
        return 0;
    if (!json_object_is_type(v, json_type_string))
        return params_fail(err, name, "must be a string");
    s = json_object_get_string(v);
    len = (size_t)json_object_get_string_len(v);
    if (len == 0 || len > max || strlen(s) != len)
        return params_fail(err, name, "must be 1..%zu bytes without NUL", max);
    memcpy(buf, s, len + 1);
    return 0;
}

static int params_sandbox_forward_fill(json_object *params, void *at, struct params_error *err)
{
    static const char *const allowed[] = {"id", "port", "listen", NULL};
    static const struct params_field fields[] = {
        PARAMS_F_ID_OF(struct params_sandbox_forward),
        PARAMS_F_INT64_OF(struct params_sandbox_forward, port, true, 1, 65535),
    };
    struct params_sandbox_forward *p = at;
    int r = params_read(params, allowed, fields, ELEMENTSOF(fields), p, err);

    return r < 0 ? r : get_string(params, "listen", PARAMS_FORWARD_LISTEN_MAX, p->listen, err);
}

PARAMS_SPEC(params_sandbox_forward, struct params_sandbox_forward, NULL);

static int params_sandbox_unforward_fill(json_object *params, void *at, struct params_error *err)
{
    static const char *const allowed[] = {"id", "forward", NULL};
    static const struct params_field fields[] = {
        PARAMS_F_ID_OF(struct params_sandbox_unforward),
    };
    struct params_sandbox_unforward *p = at;
    int r = params_read(params, allowed, fields, ELEMENTSOF(fields), p, err);

    if (r < 0)
        return r;
    if (!params || !json_object_object_get_ex(params, "forward", NULL))
        return params_fail(err, "forward", "required");
    r = get_string(params, "forward", PARAMS_FORWARD_ID_LEN, p->forward, err);
    if (r < 0)
        return r;
    if (strlen(p->forward) != PARAMS_FORWARD_ID_LEN || strncmp(p->forward, "fw-", 3) != 0 ||
        strspn(p->forward + 3, "0123456789abcdef") != PARAMS_FORWARD_ID_LEN - 3)
        return params_fail(err, "forward", "must be a forward id (\"fw-\" and 16 hex digits)");
    return 0;
}

PARAMS_SPEC(params_sandbox_unforward, struct params_sandbox_unforward, NULL);

static int params_sandbox_preview_fill(json_object *params, void *at, struct params_error *err)
{
    static const char *const allowed[] = {"id", "port", "ttl_s", NULL};
    static const struct params_field fields[] = {
        PARAMS_F_ID_OF(struct params_sandbox_preview),
        PARAMS_F_INT64_OF(struct params_sandbox_preview, port, true, 1, 65535),
        PARAMS_F_INT64_OF(struct params_sandbox_preview, ttl_s, false, 1, PARAMS_PREVIEW_TTL_MAX),
    };

    return params_read(params, allowed, fields, ELEMENTSOF(fields), at, err);
}

PARAMS_SPEC(params_sandbox_preview, struct params_sandbox_preview, NULL);

static int params_sandbox_unpreview_fill(json_object *params, void *at, struct params_error *err)
{
    static const char *const allowed[] = {"id", "preview", NULL};
    static const struct params_field fields[] = {
        PARAMS_F_ID_OF(struct params_sandbox_unpreview),
    };
    struct params_sandbox_unpreview *p = at;
    int r = params_read(params, allowed, fields, ELEMENTSOF(fields), p, err);

    if (r < 0)
        return r;
    if (!params || !json_object_object_get_ex(params, "preview", NULL))
        return params_fail(err, "preview", "required");
    r = get_string(params, "preview", PARAMS_PREVIEW_ID_LEN, p->preview, err);
    if (r < 0)
        return r;
    if (strlen(p->preview) != PARAMS_PREVIEW_ID_LEN || strncmp(p->preview, "pv-", 3) != 0 ||
        strspn(p->preview + 3, "0123456789abcdef") != PARAMS_PREVIEW_ID_LEN - 3)
        return params_fail(err, "preview", "must be a preview id (\"pv-\" and 16 hex digits)");
    return 0;
}

PARAMS_SPEC(params_sandbox_unpreview, struct params_sandbox_unpreview, NULL);
