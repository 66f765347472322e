/* A template's defaults (the env, cwd and user that every exec and process of the sandboxes
 * made from it gets unless the call gives its own; sandbox-view.c applies them): how they are
 * kept in the template's Proxmox description, beside its marker, so that a restart or a lost
 * state folder finds them again with the template. See template-internal.h. */
#include "macro.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "marker.h"
#include "params-template.h"
#include "sandbox-internal.h"
#include "template-internal.h"

#define ENV_PREFIX "env."

/* defaults as labels: {"cwd", "user", "env.NAME"...}, all strings. */
static json_object *flatten(json_object *defaults)
{
    json_object *o = json_object_new_object(), *v;
    char key[sizeof ENV_PREFIX + PARAMS_ENV_NAME_MAX];

    if (!o || !defaults)
        return o;
    if (json_object_object_get_ex(defaults, "cwd", &v))
        json_object_object_add(o, "cwd", json_object_get(v));
    if (json_object_object_get_ex(defaults, "user", &v))
        json_object_object_add(o, "user", json_object_get(v));
    if (json_object_object_get_ex(defaults, "env", &v)) {
        json_object_object_foreach(v, name, val)
        {
            snprintf(key, sizeof key, ENV_PREFIX "%s", name);
            json_object_object_add(o, key, json_object_get(val));
        }
    }
    return o;
}

int engine_rt_description(const struct marker *m, json_object *defaults, char **ret_description)
{
    _cleanup_json_ json_object *flat = flatten(defaults);

    if (!flat)
        return -ENOMEM;
    return marker_description(m, flat, ret_description);
}

int engine_rt_defaults_parse(const char *description, const char *sandbox, json_object **ret)
{
    _cleanup_json_ json_object *flat = NULL, *d = json_object_new_object(), *env = NULL;
    json_object *out = NULL;
    int r = marker_labels_parse(description, sandbox, &flat);

    if (r < 0)
        return r;
    if (!d)
        return -ENOMEM;
    if (json_object_object_length(flat) == 0) {
        *ret = NULL;
        return 0;
    }
    json_object_object_foreach(flat, key, val)
    {
        if (strncmp(key, ENV_PREFIX, strlen(ENV_PREFIX)) == 0) {
            if (!env && !(env = json_object_new_object()))
                return -ENOMEM;
            json_object_object_add(env, key + strlen(ENV_PREFIX), json_object_get(val));
        } else
            json_object_object_add(d, key, json_object_get(val));
    }
    if (env)
        json_object_object_add(d, "env", TAKE_PTR(env));
    if (params_template_defaults(d, &out, NULL) < 0)
        return -EBADMSG;
    *ret = out;
    return 0;
}
