/* What made the last call of a client fail (sandboxd_client_error()), and the view of a
 * daemon's error object. See client-internal.h. */
#include "client-internal.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

void client_error_clear(struct sandboxd_client *c)
{
    json_object_put(c->err_obj);
    free(c->err_text);
    c->err_obj = NULL;
    c->err_text = NULL;
    c->err = (struct sandboxd_error){};
    c->failed = false;
}

int client_fail(struct sandboxd_client *c, int r, const char *fmt, ...)
{
    va_list ap;

    client_error_clear(c);
    va_start(ap, fmt);
    if (vasprintf(&c->err_text, fmt, ap) < 0)
        c->err_text = NULL;
    va_end(ap);
    c->err.message = c->err_text ? c->err_text : "out of memory";
    c->failed = true;
    return r;
}

const char *client_obj_str(json_object *o, const char *key)
{
    json_object *v;

    if (!json_object_is_type(o, json_type_object) || !json_object_object_get_ex(o, key, &v) ||
        !json_object_is_type(v, json_type_string))
        return NULL;
    return json_object_get_string(v);
}

void client_error_view(json_object *e, struct sandboxd_error *ret)
{
    json_object *v;

    *ret = (struct sandboxd_error){.object = e};
    if (json_object_object_get_ex(e, "code", &v))
        ret->code = json_object_get_int(v);
    ret->message = client_obj_str(e, "message");
    if (!ret->message)
        ret->message = "error";
    if (json_object_object_get_ex(e, "data", &v) && v) {
        ret->data = v;
        ret->reason = client_obj_str(v, "reason");
    }
}

int client_fail_remote(struct sandboxd_client *c, json_object *e)
{
    client_error_clear(c);
    c->err_obj = e;
    client_error_view(e, &c->err);
    c->failed = true;
    return -EREMOTE;
}

const struct sandboxd_error *sandboxd_client_error(const struct sandboxd_client *c)
{
    return c && c->failed ? &c->err : NULL;
}
