/* The read-only snapshot of struct sandbox for the daemon. See lib/engine/sandbox.h. */
#include "sandbox-internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "macro.h"
#include "sandbox-io.h"
#include "template-internal.h"

static const char *public_state(const struct sandbox *sb)
{
    if (sb->state == SANDBOX_READY && sb->node && sb->engine->cluster &&
        cluster_node_down(sb->engine, sb->node))
        return "unreachable";
    return sandbox_state_to_public(sb->state);
}

void sandbox_view(const struct sandbox *sb, struct sandbox_info *ret)
{
    *ret = (struct sandbox_info){
        .id = sb->id,
        .state = sb->state,
        .public_state = public_state(sb),
        .owner = sb->owner_uid,
        .vmid = sb->vmid,
        .node = sb->node,
        .hostname = sb->hostname,
        .ip = sb->ip,
        .internet = sb->internet,
        .internet_allow = sb->internet_allow,
        .cores = sb->cores,
        .memory_mb = sb->memory_mb,
        .disk_gb = sb->disk_gb,
        .net_rate_mbps = sb->net_rate_mbps,
        .labels = sb->labels,
        .created_at = sb->created_at,
        .expires_at = sb->expires_at,
        .error = sb->error,
        .idem_hash = sb->idem_hash,
        .params_hash = sb->params_hash,
        .template = sb->template,
        .pool = sb->pool_member,
    };
}

/* ---- its template's defaults (template.create's "defaults") ---- */

static json_object *defaults_of(const struct sandbox *sb)
{
    struct engine_template *t = sandbox_template(sb);

    return t ? t->defaults : NULL;
}

json_object *sandbox_template_env(const struct sandbox *sb)
{
    json_object *d = defaults_of(sb), *v;

    return d && json_object_object_get_ex(d, "env", &v) ? v : NULL;
}

void sandbox_defaults(const struct sandbox *sb, const char **ret_cwd, const char **ret_user)
{
    json_object *d = defaults_of(sb), *v;

    *ret_cwd = d && json_object_object_get_ex(d, "cwd", &v) ? json_object_get_string(v) : NULL;
    *ret_user = d && json_object_object_get_ex(d, "user", &v) ? json_object_get_string(v) : NULL;
}

json_object *sandbox_env(const struct sandbox *sb)
{
    return sb->env;
}

/* Whether env (NULL-terminated "NAME=value") sets name. */
static bool env_sets(const char *const *env, const char *name)
{
    size_t n = strlen(name);

    for (size_t i = 0; env && env[i]; i++)
        if (strncmp(env[i], name, n) == 0 && env[i][n] == '=')
            return true;
    return false;
}

/* Whether the variable name is set by env or by a layer before layers[upto]. */
static bool env_taken(const char *const *env, json_object *const *layers, size_t upto,
                      const char *name)
{
    if (env_sets(env, name))
        return true;
    for (size_t i = 0; i < upto; i++)
        if (layers[i] && json_object_object_get_ex(layers[i], name, NULL))
            return true;
    return false;
}

/* Appends "name=value" of every variable of the layers no one before sets to v (from *k). */
static int env_add_layers(const char *const *env, json_object *const *layers, size_t n_layers,
                          char **v, size_t *k)
{
    for (size_t l = 0; l < n_layers; l++) {
        if (!layers[l])
            continue;
        json_object_object_foreach(layers[l], name, val)
        {
            if (env_taken(env, layers, l, name))
                continue;
            if (asprintf(&v[*k], "%s=%s", name, json_object_get_string(val)) < 0) {
                v[*k] = NULL;
                return -ENOMEM;
            }
            (*k)++;
        }
    }
    return 0;
}

int sandbox_env_merge(const struct sandbox *sb, const char *const *env, size_t max_vars,
                      size_t max_bytes, char ***ret, size_t *ret_bytes)
{
    json_object *const layers[] = {sb->env, sandbox_template_env(sb)};
    size_t n = 0, bytes = 0, k = 0;
    char **v;

    for (size_t i = 0; env && env[i]; i++, n++)
        bytes += strlen(env[i]) - 1; /* without the '=' */
    for (size_t l = 0; l < ELEMENTSOF(layers); l++) {
        if (!layers[l])
            continue;
        json_object_object_foreach(layers[l], name, val)
        {
            if (env_taken(env, layers, l, name))
                continue;
            n++;
            bytes += strlen(name) + (size_t)json_object_get_string_len(val);
        }
    }
    *ret_bytes = bytes;
    if (n > max_vars || bytes > max_bytes)
        return -E2BIG;
    if (n == 0) {
        *ret = NULL;
        return 0;
    }
    v = calloc(n + 1, sizeof *v);
    if (!v)
        return -ENOMEM;
    if (env_add_layers(env, layers, ELEMENTSOF(layers), v, &k) < 0) {
        sandbox_env_free(v);
        return -ENOMEM;
    }
    for (size_t i = 0; env && env[i]; i++)
        if (!(v[k++] = strdup(env[i]))) {
            sandbox_env_free(v);
            return -ENOMEM;
        }
    *ret = v;
    return 0;
}

char **sandbox_env_free(char **v)
{
    for (size_t i = 0; v && v[i]; i++) {
        explicit_bzero(v[i], strlen(v[i]));
        free(v[i]);
    }
    free(v);
    return NULL;
}
