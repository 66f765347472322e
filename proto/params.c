/* Params of every method of docs/protocol.md: types, limits, defaults. See params.h. */
#include "params.h"
#include "params-process.h"
#include "params-forward.h"
#include "params-snapshot.h"
#include "params-fork.h"
#include "params-template.h"
#include "params-volume.h"

#include "b64.h"
#include "params-file.h"
#include "macro.h"
#include "egress.h"
#include "params-internal.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Checks that params is an object (or absent) holding only allowed names. */
int params_check_object(json_object *params, const char *const *allowed, struct params_error *err)
{
    if (!params)
        return 0;
    if (!json_object_is_type(params, json_type_object))
        return params_fail(err, "params", "must be an object of named parameters");
    json_object_object_foreach(params, key, val)
    {
        bool known = false;

        (void)val;
        for (const char *const *a = allowed; *a; a++)
            if (strcmp(*a, key) == 0) {
                known = true;
                break;
            }
        if (!known)
            return params_fail(err, key, "unknown parameter");
    }
    return 0;
}

static json_object *params_get(json_object *params, const char *name, bool *present)
{
    json_object *v = NULL;

    *present = params && json_object_object_get_ex(params, name, &v);
    return v;
}

/* A string without NUL bytes of 1..max bytes (min_len 0 allows empty). */
static int params_string(json_object *params, const char *name, bool required, size_t min_len,
                         size_t max_len, const char **ret, size_t *ret_len,
                         struct params_error *err)
{
    bool present;
    json_object *v = params_get(params, name, &present);
    const char *s;
    size_t n;

    if (!present) {
        if (required)
            return params_fail(err, name, "missing");
        *ret = NULL;
        if (ret_len)
            *ret_len = 0;
        return 0;
    }
    if (!json_object_is_type(v, json_type_string))
        return params_fail(err, name, "must be a string");
    s = json_object_get_string(v);
    n = (size_t)json_object_get_string_len(v);
    if (memchr(s, '\0', n))
        return params_fail(err, name, "must not contain NUL");
    if (n < min_len)
        return params_fail(err, name, "must not be empty");
    if (n > max_len)
        return params_fail(err, name, "longer than %zu bytes", max_len);
    *ret = s;
    if (ret_len)
        *ret_len = n;
    return 0;
}

/* An integer in [min, max]; *ret untouched when absent and optional. */
int params_int(json_object *params, const char *name, bool required, int64_t min, int64_t max,
               int64_t *ret, struct params_error *err)
{
    bool present;
    json_object *v = params_get(params, name, &present);
    int64_t x;

    if (!present)
        return required ? params_fail(err, name, "missing") : 0;
    if (!json_object_is_type(v, json_type_int))
        return params_fail(err, name, "must be an integer");
    x = json_object_get_int64(v);
    /* json-c keeps integers above INT64_MAX as uint64: out of range too. */
    if (x == INT64_MAX && json_object_get_uint64(v) != (uint64_t)INT64_MAX)
        goto range;
    if (x < min || x > max)
        goto range;
    *ret = x;
    return 0;
range:
    params_fail(err, name, "must be between %lld and %lld", (long long)min, (long long)max);
    if (err) {
        err->has_range = true;
        err->min = min;
        err->max = max;
    }
    return -EINVAL;
}

int params_bool(json_object *params, const char *name, bool required, bool *ret,
                struct params_error *err)
{
    bool present;
    json_object *v = params_get(params, name, &present);

    if (!present)
        return required ? params_fail(err, name, "missing") : 0;
    if (!json_object_is_type(v, json_type_boolean))
        return params_fail(err, name, "must be a boolean");
    *ret = json_object_get_boolean(v);
    return 0;
}

int params_id(json_object *params, char ret[PARAMS_ID_MAX + 1], struct params_error *err)
{
    const char *s;
    size_t n;
    int r;

    r = params_string(params, "id", true, 1, PARAMS_ID_MAX, &s, &n, err);
    if (r < 0)
        return r;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '-'))
            return params_fail(err, "id", "may only contain a-z, 0-9 and '-'");
    memcpy(ret, s, n + 1);
    return 0;
}

int params_path(json_object *params, const char *name, bool required, char **ret,
                struct params_error *err)
{
    const char *s;
    int r;

    r = params_string(params, name, required, 1, PARAMS_PATH_MAX, &s, NULL, err);
    if (r < 0)
        return r;
    if (!s) {
        *ret = NULL;
        return 0;
    }
    if (s[0] != '/')
        return params_fail(err, name, "must be an absolute path");
    *ret = strdup(s);
    return *ret ? 0 : -ENOMEM;
}

/* Exactly one (or, when optional, at most one) of name / name_b64. */
/* An optional descriptor index: *ret stays -1 when absent. */
static int params_fd(json_object *params, const char *name, int64_t *ret, struct params_error *err)
{
    *ret = -1;
    return params_int(params, name, false, 0, PARAMS_FD_INDEX_MAX, ret, err);
}

int params_read(json_object *params, const char *const *allowed, const struct params_field *fields,
                size_t n, void *p, struct params_error *err)
{
    int r = allowed ? params_check_object(params, allowed, err) : 0;

    for (size_t i = 0; r >= 0 && i < n; i++) {
        const struct params_field *f = &fields[i];
        void *at = (char *)p + f->offset;
        int64_t x = -1;

        switch (f->kind) {
        case PARAMS_F_ID:
            r = params_id(params, at, err);
            break;
        case PARAMS_F_BOOL:
            r = params_bool(params, f->name, f->required, at, err);
            break;
        case PARAMS_F_INT64:
            r = params_int(params, f->name, f->required, f->min, f->max, at, err);
            break;
        case PARAMS_F_INT:
            r = params_int(params, f->name, f->required, f->min, f->max, &x, err);
            if (r >= 0)
                *(int *)at = (int)x;
            break;
        case PARAMS_F_FD:
            r = params_fd(params, f->name, at, err);
            break;
        case PARAMS_F_PATH:
            r = params_path(params, f->name, f->required, at, err);
            break;
        case PARAMS_F_MODE:
            r = params_mode(params, at, err);
            break;
        }
    }
    return r < 0 ? r : 0;
}

int params_read_fields(json_object *params, const struct params_field *fields, size_t n, void *p,
                       struct params_error *err)
{
    const char *allowed[PARAMS_TABLE_FIELDS_MAX + 1] = {};

    if (n > PARAMS_TABLE_FIELDS_MAX)
        return -E2BIG;
    for (size_t i = 0; i < n; i++)
        allowed[i] = fields[i].name;
    return params_read(params, allowed, fields, n, p, err);
}

static int params_data(json_object *params, const char *name, bool required, uint8_t **ret,
                       size_t *ret_len, bool *ret_has, struct params_error *err)
{
    char b64name[64];
    bool has_text, has_b64;
    json_object *text, *b64;
    uint8_t *out;
    size_t n;
    int r;

    snprintf(b64name, sizeof(b64name), "%s_b64", name);
    text = params_get(params, name, &has_text);
    b64 = params_get(params, b64name, &has_b64);
    if (has_text && has_b64)
        return params_fail(err, name, "give only one of %s and %s", name, b64name);
    if (!has_text && !has_b64) {
        if (required)
            return params_fail(err, name, "missing (give %s or %s)", name, b64name);
        *ret = NULL;
        *ret_len = 0;
        *ret_has = false;
        return 0;
    }
    if (has_text) {
        if (!json_object_is_type(text, json_type_string))
            return params_fail(err, name, "must be a string");
        n = (size_t)json_object_get_string_len(text);
        if (n > PARAMS_DATA_MAX)
            return params_fail(err, name, "longer than %d bytes", PARAMS_DATA_MAX);
        out = malloc(n + 1);
        if (!out)
            return -ENOMEM;
        memcpy(out, json_object_get_string(text), n);
        out[n] = '\0';
    } else {
        const char *s;

        if (!json_object_is_type(b64, json_type_string))
            return params_fail(err, b64name, "must be a string");
        s = json_object_get_string(b64);
        n = (size_t)json_object_get_string_len(b64);
        if (b64_decoded_size(s, n) > PARAMS_DATA_MAX)
            return params_fail(err, b64name, "decodes to more than %d bytes", PARAMS_DATA_MAX);
        r = b64_decode(s, n, &out, &n);
        if (r == -ENOMEM)
            return r;
        if (r < 0)
            return params_fail(err, b64name, "invalid base64 (RFC 4648, padded)");
    }
    *ret = out;
    *ret_len = n;
    *ret_has = true;
    return 0;
}

static int params_kv_cmp(const void *a, const void *b)
{
    return strcmp(((const struct params_kv *)a)->key, ((const struct params_kv *)b)->key);
}

static bool params_label_key_ok(const char *k, size_t n)
{
    if (n == 0 || n > PARAMS_LABEL_KEY_MAX)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = k[i];
        bool alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');

        if (!alnum && (i == 0 || (c != '.' && c != '_' && c != '-')))
            return false;
    }
    return true;
}

static int params_label_check(const char *name, const char *key, json_object *val, size_t max_bytes,
                              size_t *total, struct params_error *err)
{
    const char *s;
    size_t vn;

    (void)max_bytes;
    (void)total;
    if (!params_label_key_ok(key, strlen(key)))
        return params_fail(err, name,
                           "label key '%.64s' must be 1-%d of A-Z a-z 0-9 . _ - starting "
                           "alphanumeric",
                           key, PARAMS_LABEL_KEY_MAX);
    if (!json_object_is_type(val, json_type_string))
        return params_fail(err, name, "label '%s' must be a string", key);
    s = json_object_get_string(val);
    vn = (size_t)json_object_get_string_len(val);
    if (vn > PARAMS_LABEL_VALUE_MAX)
        return params_fail(err, name, "label '%s' longer than %d bytes", key,
                           PARAMS_LABEL_VALUE_MAX);
    for (size_t i = 0; i < vn; i++)
        if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
            return params_fail(err, name, "label '%s' contains a control character", key);
    return 0;
}

/* labels: an object of at most PARAMS_LABELS_MAX string pairs, sorted by key. */
static int params_labels(json_object *params, const char *name, struct params_kv_list *ret,
                         struct params_error *err)
{
    int r =
        params_pairs(params, name, PARAMS_LABELS_MAX, 0, "labels", params_label_check, ret, err);

    if (r == 0 && ret->items)
        qsort(ret->items, ret->n, sizeof(*ret->items), params_kv_cmp);
    return r;
}

static bool params_hostname_ok(const char *s, size_t n)
{
    if (n == 0 || n > PARAMS_HOSTNAME_MAX || s[0] == '-' || s[n - 1] == '-')
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];

        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '-'))
            return false;
    }
    return true;
}

/* ---- sandbox.create --------------------------------------------------------- */

/* "node": a Proxmox node name ([A-Za-z0-9._-], not starting with '-' or '.'). */
static int params_node(json_object *params, const char **ret, struct params_error *err)
{
    size_t n;
    int r;

    r = params_string(params, "node", false, 1, PARAMS_NODE_MAX, ret, &n, err);
    if (r < 0)
        return r;
    for (size_t i = 0; *ret && i < n; i++) {
        char c = (*ret)[i];

        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '-' || c == '.' || c == '_') ||
            (i == 0 && (c == '-' || c == '.')))
            return params_fail(err, "node", "must be a node name: [A-Za-z0-9._-], 1-%d",
                               PARAMS_NODE_MAX);
    }
    return 0;
}

/* The strings a sandbox.create request owns, in the order its reader takes them. */
#define CREATE_STRINGS(p)                                                                          \
    {                                                                                              \
        &(p)->hostname, &(p)->template, &(p)->node, &(p)->idempotency_key                          \
    }

static int params_sandbox_create_fill(json_object *params, void *at, struct params_error *err)
{
    static const char *const allowed[] = {"hostname",        "cores",        "memory_mb", "disk_gb",
                                          "net_rate_mbps",   "internet",     "ttl_s",     "labels",
                                          "idempotency_key", "template",     "node",      "env",
                                          "resume_on_use",   "auto_pause_s", "volumes",   NULL};
    static const struct params_field create_fields[] = {
        PARAMS_F_INT_OF(struct params_sandbox_create, cores, PARAMS_CORES_MAX),
        PARAMS_F_INT_OF(struct params_sandbox_create, memory_mb, PARAMS_MEMORY_MB_MAX),
        PARAMS_F_INT_OF(struct params_sandbox_create, disk_gb, PARAMS_DISK_GB_MAX),
        PARAMS_FIELD(struct params_sandbox_create, net_rate_mbps, PARAMS_F_INT, false, 0,
                     PARAMS_NET_RATE_MBPS_MAX),
        PARAMS_F_INT64_OF(struct params_sandbox_create, ttl_s, false, 1, PARAMS_TTL_S_MAX),
        PARAMS_F_BOOL_OF(struct params_sandbox_create, resume_on_use, false),
        PARAMS_F_INT64_OF(struct params_sandbox_create, auto_pause_s, false, 1, PARAMS_TTL_S_MAX),
    };
    struct params_sandbox_create *p = at;
    struct params_volume_mount mounts[PARAMS_VOLUMES_MAX];
    size_t n_mounts = 0;
    const char *s;
    size_t n;
    int r;

    *p = (struct params_sandbox_create){.cores = -1,
                                        .memory_mb = -1,
                                        .disk_gb = -1,
                                        .net_rate_mbps = -1,
                                        .ttl_s = -1,
                                        .auto_pause_s = -1};
    r = params_check_object(params, allowed, err);
    if (r < 0)
        return r;

    r = params_string(params, "hostname", false, 1, PARAMS_HOSTNAME_MAX, &s, &n, err);
    if (r < 0)
        return r;
    if (s && !params_hostname_ok(s, n))
        return params_fail(err, "hostname",
                           "must be a DNS label: 1-%d of A-Z a-z 0-9 '-', not starting or "
                           "ending with '-'",
                           PARAMS_HOSTNAME_MAX);

    r = params_read(params, NULL, create_fields, ELEMENTSOF(create_fields), p, err);
    if (r == 0)
        r = egress_internet_param(params, &p->internet, &p->internet_allow, err);
    if (r < 0)
        return r;

    const char *key;
    size_t kn;
    r = params_string(params, "idempotency_key", false, 1, PARAMS_IDEMPOTENCY_KEY_MAX, &key, &kn,
                      err);
    if (r < 0)
        return r;
    for (size_t i = 0; key && i < kn; i++)
        if (key[i] < 0x21 || key[i] > 0x7e)
            return params_fail(err, "idempotency_key", "must be printable ASCII without spaces");

    const char *tmpl;
    size_t tn;
    r = params_string(params, "template", false, 1, PARAMS_TEMPLATE_MAX, &tmpl, &tn, err);
    if (r < 0)
        return r;
    for (size_t i = 0; tmpl && i < tn; i++)
        if (!((tmpl[i] >= 'a' && tmpl[i] <= 'z') || (tmpl[i] >= '0' && tmpl[i] <= '9') ||
              tmpl[i] == '-'))
            return params_fail(err, "template", "may only contain a-z, 0-9 and '-'");

    const char *node;
    r = params_node(params, &node, err);
    if (r < 0)
        return r;

    r = params_labels(params, "labels", &p->labels, err);
    if (r == 0)
        r = params_env(params, PARAMS_CREATE_ENV_MAX, PARAMS_CREATE_ENV_BYTES_MAX, &p->env, err);
    if (r == 0)
        r = params_volume_mounts(params, mounts, &n_mounts, err);
    if (r < 0)
        return r;
    if (n_mounts > 0) {
        p->volumes = calloc(n_mounts, sizeof(*p->volumes));
        if (!p->volumes)
            return -ENOMEM;
        memcpy(p->volumes, mounts, n_mounts * sizeof(*mounts));
        p->n_volumes = n_mounts;
    }

    /* The strings, kept once all is valid. */
    const char *const src[] = {s, tmpl, node, key};
    char **const dst[] = CREATE_STRINGS(p);
    for (size_t i = 0; i < ELEMENTSOF(src); i++)
        if (src[i] && !(*dst[i] = strdup(src[i])))
            return -ENOMEM;
    return 0;
}

void params_sandbox_create_done(struct params_sandbox_create *p)
{
    if (!p)
        return;
    char **const strings[] = CREATE_STRINGS(p);
    for (size_t i = 0; i < ELEMENTSOF(strings); i++)
        free(TAKE_PTR(*strings[i]));
    params_kv_list_done(&p->labels);
    params_kv_list_done(&p->env);
    json_object_put(TAKE_PTR(p->internet_allow));
    free(TAKE_PTR(p->volumes));
    p->n_volumes = 0;
}

PARAMS_SPEC_DONE(params_sandbox_create, struct params_sandbox_create);

/* The same pairs, in any order (keys are unique). */
static bool params_kv_list_same(const struct params_kv_list *a, const struct params_kv_list *b)
{
    if (a->n != b->n)
        return false;
    for (size_t i = 0; i < a->n; i++) {
        size_t j = 0;

        while (j < b->n && strcmp(a->items[i].key, b->items[j].key) != 0)
            j++;
        if (j == b->n || strcmp(a->items[i].value, b->items[j].value) != 0)
            return false;
    }
    return true;
}

static bool params_streq(const char *a, const char *b)
{
    return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

bool params_sandbox_create_equal(const struct params_sandbox_create *a,
                                 const struct params_sandbox_create *b)
{
    if (!params_streq(a->hostname, b->hostname) || a->cores != b->cores ||
        a->memory_mb != b->memory_mb || a->disk_gb != b->disk_gb ||
        a->net_rate_mbps != b->net_rate_mbps || a->internet != b->internet ||
        a->ttl_s != b->ttl_s || a->labels.n != b->labels.n ||
        !params_streq(a->template, b->template) || !params_streq(a->node, b->node) ||
        !json_object_equal(a->internet_allow, b->internet_allow) || a->n_volumes != b->n_volumes)
        return false;
    for (size_t i = 0; i < a->n_volumes; i++)
        if (strcmp(a->volumes[i].name, b->volumes[i].name) != 0 ||
            strcmp(a->volumes[i].path, b->volumes[i].path) != 0 ||
            a->volumes[i].read_only != b->volumes[i].read_only)
            return false;
    for (size_t i = 0; i < a->labels.n; i++)
        if (strcmp(a->labels.items[i].key, b->labels.items[i].key) != 0 ||
            strcmp(a->labels.items[i].value, b->labels.items[i].value) != 0)
            return false;
    return params_kv_list_same(&a->env, &b->env);
}

/* ---- sandbox.get / destroy / list / renew / set_internet --------------------- */

static const struct params_field params_sandbox_id_fields[] = {
    PARAMS_F_ID_OF(struct params_sandbox_id)};
PARAMS_TABLE_SPEC(params_sandbox_id, struct params_sandbox_id, NULL);

static const struct params_field params_sandbox_destroy_fields[] = {
    PARAMS_F_ID_OF(struct params_sandbox_destroy),
    PARAMS_F_BOOL_OF(struct params_sandbox_destroy, wait, false),
};
PARAMS_TABLE_SPEC(params_sandbox_destroy, struct params_sandbox_destroy, NULL, .wait = true);

static int params_sandbox_list_fill(json_object *params, void *at, struct params_error *err)
{
    static const char *const allowed[] = {"all", "labels", NULL};
    static const struct params_field fields[] = {
        PARAMS_F_BOOL_OF(struct params_sandbox_list, all, false)};
    struct params_sandbox_list *p = at;
    int r = params_read(params, allowed, fields, ELEMENTSOF(fields), p, err);

    return r < 0 ? r : params_labels(params, "labels", &p->labels, err);
}

void params_sandbox_list_done(struct params_sandbox_list *p)
{
    if (p)
        params_kv_list_done(&p->labels);
}

PARAMS_SPEC_DONE(params_sandbox_list, struct params_sandbox_list);

static const struct params_field params_sandbox_renew_fields[] = {
    PARAMS_F_ID_OF(struct params_sandbox_renew),
    PARAMS_F_INT64_OF(struct params_sandbox_renew, ttl_s, true, 1, PARAMS_TTL_S_MAX),
};
PARAMS_TABLE_SPEC(params_sandbox_renew, struct params_sandbox_renew, NULL);

static int params_sandbox_resize_fill(json_object *params, void *at, struct params_error *err)
{
    static const struct params_field fields[] = {
        PARAMS_F_ID_OF(struct params_sandbox_resize),
        PARAMS_F_INT_OF(struct params_sandbox_resize, cores, PARAMS_CORES_MAX),
        PARAMS_F_INT_OF(struct params_sandbox_resize, memory_mb, PARAMS_MEMORY_MB_MAX),
        PARAMS_F_INT_OF(struct params_sandbox_resize, disk_gb, PARAMS_DISK_GB_MAX),
        PARAMS_FIELD(struct params_sandbox_resize, net_rate_mbps, PARAMS_F_INT, false, 0,
                     PARAMS_NET_RATE_MBPS_MAX),
    };
    struct params_sandbox_resize *p = at;
    int r;

    p->cores = p->memory_mb = p->disk_gb = p->net_rate_mbps = -1;
    r = params_read_fields(params, fields, ELEMENTSOF(fields), p, err);
    if (r == 0 && p->cores < 0 && p->memory_mb < 0 && p->disk_gb < 0 && p->net_rate_mbps < 0)
        r = params_fail(err, "params",
                        "give at least one of cores, memory_mb, disk_gb, net_rate_mbps");
    return r;
}

PARAMS_SPEC(params_sandbox_resize, struct params_sandbox_resize, NULL);

static const struct params_field params_sandbox_set_internet_fields[] = {
    PARAMS_F_ID_OF(struct params_sandbox_set_internet),
    PARAMS_F_BOOL_OF(struct params_sandbox_set_internet, enabled, true),
    PARAMS_F_BOOL_OF(struct params_sandbox_set_internet, wait, false),
    PARAMS_F_INT64_OF(struct params_sandbox_set_internet, wait_timeout_s, false, 1,
                      PARAMS_INTERNET_WAIT_S_MAX),
};

static int params_sandbox_set_internet_fill(json_object *params, void *at, struct params_error *err)
{
    static const char *const allowed[] = {"id", "enabled", "wait", "wait_timeout_s", "allow", NULL};
    struct params_sandbox_set_internet *p = at;
    json_object *v;
    int r;

    *p = (struct params_sandbox_set_internet){};
    r = params_read(params, allowed, params_sandbox_set_internet_fields,
                    ELEMENTSOF(params_sandbox_set_internet_fields), p, err);
    if (r < 0 || !json_object_object_get_ex(params, "allow", &v) ||
        json_object_is_type(v, json_type_null))
        return r;
    if (!p->enabled)
        return params_fail(err, "allow", "needs enabled: true");
    return egress_allow_normal(v, "allow", &p->allow, err);
}

void params_sandbox_set_internet_done(struct params_sandbox_set_internet *p)
{
    if (p)
        json_object_put(TAKE_PTR(p->allow));
}

PARAMS_SPEC_DONE(params_sandbox_set_internet, struct params_sandbox_set_internet);

/* ---- sandbox.exec -------------------------------------------------------------- */

static int params_argv(json_object *params, struct params_sandbox_exec *p, struct params_error *err)
{
    bool present;
    json_object *v = params_get(params, "argv", &present);
    size_t n, total = 0;

    if (!present)
        return 0;
    if (!json_object_is_type(v, json_type_array))
        return params_fail(err, "argv", "must be an array of strings");
    n = json_object_array_length(v);
    if (n == 0)
        return params_fail(err, "argv", "must not be empty");
    if (n > PARAMS_ARGV_MAX)
        return params_fail(err, "argv", "more than %d entries", PARAMS_ARGV_MAX);
    p->argv = calloc(n + 1, sizeof(char *));
    if (!p->argv)
        return -ENOMEM;
    for (size_t i = 0; i < n; i++) {
        json_object *a = json_object_array_get_idx(v, i);
        const char *s;
        size_t len;

        if (!json_object_is_type(a, json_type_string))
            return params_fail(err, "argv", "argv[%zu] must be a string", i);
        s = json_object_get_string(a);
        len = (size_t)json_object_get_string_len(a);
        if (memchr(s, '\0', len))
            return params_fail(err, "argv", "argv[%zu] contains NUL", i);
        if (i == 0 && len == 0)
            return params_fail(err, "argv", "argv[0] must not be empty");
        total += len + 1;
        if (total > PARAMS_ARGV_BYTES_MAX)
            return params_fail(err, "argv", "entries exceed %d bytes in total",
                               PARAMS_ARGV_BYTES_MAX);
        p->argv[i] = strdup(s);
        p->argc = i + 1;
        if (!p->argv[i])
            return -ENOMEM;
    }
    return 0;
}

static int params_sandbox_exec_fill(json_object *params, void *at, struct params_error *err)
{
    static const char *const allowed[] = {"id",        "command",    "argv",
                                          "env",       "cwd",        "stdin",
                                          "stdin_b64", "timeout_ms", "max_output_bytes",
                                          "stream",    "stdin_fd",   "stdout_fd",
                                          "stderr_fd", "user",       NULL};
    static const struct params_field head[] = {PARAMS_F_ID_OF(struct params_sandbox_exec)};
    static const struct params_field tail[] = {
        PARAMS_F_PATH_OF(struct params_sandbox_exec, cwd, false),
        PARAMS_F_INT64_OF(struct params_sandbox_exec, timeout_ms, false, 1, PARAMS_TIMEOUT_MS_MAX),
        PARAMS_F_INT64_OF(struct params_sandbox_exec, max_output_bytes, false, 0,
                          PARAMS_MAX_OUTPUT_MAX),
        PARAMS_F_BOOL_OF(struct params_sandbox_exec, stream, false),
        PARAMS_F_FD_OF(struct params_sandbox_exec, stdin_fd),
        PARAMS_F_FD_OF(struct params_sandbox_exec, stdout_fd),
        PARAMS_F_FD_OF(struct params_sandbox_exec, stderr_fd),
    };
    struct params_sandbox_exec *p = at;
    bool has_command, has_argv;
    const char *cmd;
    int r;

    p->timeout_ms = PARAMS_TIMEOUT_MS_DEFAULT;
    p->max_output_bytes = PARAMS_MAX_OUTPUT_DEFAULT;
    r = params_read(params, allowed, head, ELEMENTSOF(head), p, err);
    if (r < 0)
        return r;

    (void)params_get(params, "command", &has_command);
    (void)params_get(params, "argv", &has_argv);
    if (has_command && has_argv)
        return params_fail(err, "command", "give either command or argv, not both");
    if (!has_command && !has_argv)
        return params_fail(err, "command", "missing (give command or argv)");

    r = params_string(params, "command", false, 1, PARAMS_COMMAND_MAX, &cmd, NULL, err);
    if (r < 0)
        return r;
    if (cmd && !(p->command = strdup(cmd)))
        return -ENOMEM;
    r = params_argv(params, p, err);
    if (r == 0)
        r = params_env(params, PARAMS_ENV_MAX, PARAMS_ENV_BYTES_MAX, &p->env, err);
    if (r == 0)
        r = params_user(params, p->user, err);
    if (r == 0)
        r = params_read(params, NULL, tail, ELEMENTSOF(tail), p, err);
    if (r < 0)
        return r;
    if ((p->stdin_fd >= 0 || p->stdout_fd >= 0 || p->stderr_fd >= 0) && p->stream)
        return params_fail(err, "stream", "descriptors and stream exclude each other");
    if ((p->stdin_fd >= 0 && (p->stdin_fd == p->stdout_fd || p->stdin_fd == p->stderr_fd)) ||
        (p->stdout_fd >= 0 && p->stdout_fd == p->stderr_fd))
        return params_fail(err, "stdout_fd", "each descriptor may be named once");
    /* Last: it copies the (possibly large) input. */
    r = params_data(params, "stdin", false, &p->stdin_data, &p->stdin_len, &p->has_stdin, err);
    if (r == 0 && p->has_stdin && p->stdin_fd >= 0)
        r = params_fail(err, "stdin_fd", "give either stdin/stdin_b64 or stdin_fd, not both");
    return r;
}

void params_sandbox_exec_done(struct params_sandbox_exec *p)
{
    if (!p)
        return;
    free(p->command);
    if (p->argv)
        for (size_t i = 0; i < p->argc; i++)
            free(p->argv[i]);
    free(p->argv);
    params_kv_list_done(&p->env);
    free(p->cwd);
    free(p->stdin_data);
    p->command = p->cwd = NULL;
    p->argv = NULL;
    p->stdin_data = NULL;
    p->argc = p->stdin_len = 0;
    p->has_stdin = false;
}

PARAMS_SPEC_DONE(params_sandbox_exec, struct params_sandbox_exec);

/* ---- file.write / file.read -------------------------------------------------- */

int params_mode(json_object *params, unsigned *ret, struct params_error *err)
{
    const char *s;
    size_t n;
    unsigned m = 0;
    int r;

    r = params_string(params, "mode", false, 1, 5, &s, &n, err);
    if (r < 0)
        return params_fail(err, "mode", "must be an octal string such as \"0644\"");
    if (!s)
        return 0;
    if (n < 3)
        return params_fail(err, "mode", "must be an octal string such as \"0644\"");
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '7')
            return params_fail(err, "mode", "must be an octal string such as \"0644\"");
        m = m * 8 + (unsigned)(s[i] - '0');
    }
    if (m > 07777)
        return params_fail(err, "mode", "must be at most 07777");
    *ret = m;
    return 0;
}

/* file.write's "offset" (0..PARAMS_WRITE_END_MAX; *ret_offset untouched when absent) and
 * "append" (not both). */
static int params_file_write_place(json_object *params, int64_t *ret_offset, bool *ret_append,
                                   struct params_error *err)
{
    int64_t offset = -1;
    bool append = false;
    int r;

    r = params_int(params, "offset", false, 0, PARAMS_WRITE_END_MAX, &offset, err);
    if (r < 0)
        return r;
    r = params_bool(params, "append", false, &append, err);
    if (r < 0)
        return r;
    if (offset >= 0 && append)
        return params_fail(err, "append", "not with offset");
    *ret_offset = offset;
    *ret_append = append;
    return 0;
}

static int params_file_write_fill(json_object *params, void *at, struct params_error *err)
{
    static const char *const allowed[] = {"id",         "path", "content",      "content_b64",
                                          "content_fd", "mode", "make_parents", "offset",
                                          "append",     NULL};
    static const struct params_field fields[] = {
        PARAMS_F_ID_OF(struct params_file_write),
        PARAMS_FIELD(struct params_file_write, mode, PARAMS_F_MODE, false, 0, 0),
        PARAMS_F_BOOL_OF(struct params_file_write, make_parents, false),
    };
    struct params_file_write *p = at;
    bool has;
    int r;

    *p =
        (struct params_file_write){.mode = PARAMS_MODE_DEFAULT, .make_parents = true, .offset = -1};
    r = params_read(params, allowed, fields, ELEMENTSOF(fields), p, err);
    if (r == 0)
        r = params_file_write_place(params, &p->offset, &p->append, err);
    if (r == 0)
        r = params_fd(params, "content_fd", &p->content_fd, err);
    if (r == 0 && p->content_fd >= 0 && (p->offset >= 0 || p->append))
        r = params_fail(err, "content_fd",
                        "content_fd replaces the whole file: not with offset or append");
    if (r == 0)
        r = params_path(params, "path", true, &p->path, err);
    if (r < 0)
        return r;
    r = params_data(params, "content", p->content_fd < 0, &p->content, &p->content_len, &has, err);
    if (r == 0 && has && p->content_fd >= 0)
        r = params_fail(err, "content_fd", "give either content/content_b64 or content_fd");
    if (r == 0 && p->offset > PARAMS_WRITE_END_MAX - (int64_t)p->content_len)
        r = params_fail(err, "offset", "offset plus the content must be at most %lld bytes",
                        (long long)PARAMS_WRITE_END_MAX);
    return r;
}

void params_file_write_done(struct params_file_write *p)
{
    if (!p)
        return;
    free(p->path);
    free(p->content);
    p->path = NULL;
    p->content = NULL;
    p->content_len = 0;
}

PARAMS_SPEC_DONE(params_file_write, struct params_file_write);

static int params_file_read_fill(json_object *params, void *at, struct params_error *err)
{
    static const char *const allowed[] = {"id", "path", "offset", "length", "to_fd", NULL};
    static const struct params_field fields[] = {
        PARAMS_F_ID_OF(struct params_file_read),
        PARAMS_F_INT64_OF(struct params_file_read, offset, false, 0, INT64_MAX),
        PARAMS_F_FD_OF(struct params_file_read, to_fd),
    };
    struct params_file_read *p = at;
    int r;

    p->length = PARAMS_READ_LENGTH_MAX;
    r = params_read(params, allowed, fields, ELEMENTSOF(fields), p, err);
    if (r < 0)
        return r;
    if (p->to_fd >= 0)
        p->length = INT64_MAX; /* streamed: no cap but the file's end */
    r = params_int(params, "length", false, 0, p->to_fd >= 0 ? INT64_MAX : PARAMS_READ_LENGTH_MAX,
                   &p->length, err);
    if (r == 0)
        r = params_path(params, "path", true, &p->path, err);
    return r;
}

void params_file_read_done(struct params_file_read *p)
{
    if (!p)
        return;
    free(p->path);
    p->path = NULL;
}

PARAMS_SPEC_DONE(params_file_read, struct params_file_read);

/* ---- no params ----------------------------------------------------------------- */

static int params_none_parse(json_object *params, void *ret, struct params_error *err)
{
    static const char *const allowed[] = {NULL};

    (void)ret;
    if (json_object_is_type(params, json_type_array)) {
        if (json_object_array_length(params) != 0)
            return params_fail(err, "params", "this method takes no parameters");
        return 0;
    }
    return params_check_object(params, allowed, err);
}

/* ---- params kinds and the protocol's method names ------------------------------- */

int params_spec_parse(const struct params_spec *spec, params_fill_fn *fill, json_object *params,
                      void *ret, struct params_error *err)
{
    int r;

    memset(ret, 0, spec->size);
    r = fill(params, ret, err);
    if (r >= 0)
        return 0;
    if (spec->done)
        spec->done(ret);
    memset(ret, 0, spec->size);
    return r;
}

const struct params_spec params_none_spec = {0, params_none_parse, NULL};

static const struct rpc_method_info rpc_method_table[] = {
    {"sandbox.create", false, &params_sandbox_create_spec},
    {"sandbox.get", false, &params_sandbox_id_spec},
    {"sandbox.list", false, &params_sandbox_list_spec},
    {"sandbox.renew", false, &params_sandbox_renew_spec},
    {"sandbox.set_internet", false, &params_sandbox_set_internet_spec},
    {"sandbox.resize", false, &params_sandbox_resize_spec},
    {"sandbox.destroy", false, &params_sandbox_destroy_spec},
    {"sandbox.exec", false, &params_sandbox_exec_spec},
    {"file.write", false, &params_file_write_spec},
    {"file.read", false, &params_file_read_spec},
    {"daemon.status", false, &params_none_spec},
    {"daemon.metrics", false, &params_none_spec},
    {"daemon.subscribe", false, &params_none_spec},
    {"rpc.discover", false, &params_none_spec},
    {"file.list", false, &params_file_list_spec},
    {"file.stat", false, &params_file_stat_spec},
    {"file.remove", false, &params_file_remove_spec},
    {"file.mkdir", false, &params_file_mkdir_spec},
    {"file.rename", false, &params_file_rename_spec},
    {"process.start", false, &params_process_start_spec},
    {"process.read", false, &params_process_read_spec},
    {"process.write", false, &params_process_write_spec},
    {"process.wait", false, &params_process_wait_spec},
    {"process.kill", false, &params_process_kill_spec},
    {"process.list", false, &params_process_list_spec},
    {"process.resize", false, &params_process_resize_spec},
    {"sandbox.forward", false, &params_sandbox_forward_spec},
    {"sandbox.forwards", false, &params_sandbox_id_spec},
    {"sandbox.unforward", false, &params_sandbox_unforward_spec},
    {"sandbox.preview", false, &params_sandbox_preview_spec},
    {"sandbox.previews", false, &params_sandbox_id_spec},
    {"sandbox.unpreview", false, &params_sandbox_unpreview_spec},
    {"sandbox.snapshot", false, &params_sandbox_snapshot_spec},
    {"sandbox.snapshots", false, &params_sandbox_id_spec},
    {"sandbox.rollback", false, &params_sandbox_snapshot_spec},
    {"sandbox.snapshot_delete", false, &params_sandbox_snapshot_spec},
    {"sandbox.fork", false, &params_sandbox_fork_spec},
    {"template.create", false, &params_template_create_spec},
    {"template.list", false, &params_none_spec},
    {"template.delete", false, &params_template_name_spec},
    {"template.publish", false, &params_template_name_spec},
    {"sandbox.pause", false, &params_sandbox_id_spec},
    {"sandbox.resume", false, &params_sandbox_id_spec},
    {"volume.create", false, &params_volume_create_spec},
    {"volume.list", false, &params_none_spec},
    {"volume.delete", false, &params_volume_name_spec},
    {"sandbox.attach", false, &params_sandbox_attach_spec},
    {"sandbox.detach", false, &params_sandbox_detach_spec},
};

const struct rpc_method_info *rpc_method_find(const char *name)
{
    if (!name)
        return NULL;
    for (size_t i = 0; i < sizeof(rpc_method_table) / sizeof(rpc_method_table[0]); i++)
        if (strcmp(rpc_method_table[i].name, name) == 0)
            return &rpc_method_table[i];
    return NULL;
}

const struct rpc_method_info *rpc_methods(size_t *ret_n)
{
    *ret_n = sizeof(rpc_method_table) / sizeof(rpc_method_table[0]);
    return rpc_method_table;
}
