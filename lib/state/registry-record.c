/* Registry records: state names, the record's lifecycle and limits, its JSON
 * format (version REG_FORMAT_VERSION) and the canonical hash of create params.
 * No file I/O: the state folder is registry.c's. */
#include "macro.h"
#include "egress.h"
#include "registry.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json-util.h"
#include "hostkey.h"
#include "util.h"
#include "buf.h"

#define VMID_MIN 100
#define VMID_MAX 999999999
#define CORES_MAX 8192
#define MEMORY_MB_MAX (UINT64_C(1) << 40)
#define DISK_GB_MAX (UINT64_C(1) << 30)
#define NET_RATE_MAX 1000000 /* Mbit/s */

static const char *const state_names[_REG_STATE_MAX] = {
    [REG_PENDING] = "pending",   [REG_CLONING] = "cloning",       [REG_CONFIGURING] = "configuring",
    [REG_STARTING] = "starting", [REG_WAITING_IP] = "waiting_ip", [REG_CONNECTING] = "connecting",
    [REG_READY] = "ready",       [REG_DESTROYING] = "destroying", [REG_FAILED] = "failed",
    [REG_PAUSED] = "paused",
};

const char *registry_state_to_string(enum registry_state s)
{
    if ((unsigned)s >= _REG_STATE_MAX)
        return NULL;
    return state_names[s];
}

int registry_state_from_string(const char *s)
{
    if (!s)
        return -EINVAL;
    for (int i = 0; i < _REG_STATE_MAX; i++)
        if (strcmp(s, state_names[i]) == 0)
            return i;
    return -EINVAL;
}

struct registry_record *registry_record_new(void)
{
    return calloc(1, sizeof(struct registry_record));
}

struct registry_record *registry_record_free(struct registry_record *r)
{
    if (!r)
        return NULL;
    FREE_MANY(r->id, r->instance, r->idempotency_key, r->params_hash, r->node, r->upid, r->hostname,
              r->ip, r->error, r->host_key, r->template, r->fork_snapshot, r->detaching);
    json_object_put(r->labels);
    json_object_put(r->env);
    json_object_put(r->internet_allow);
    free(r);
    return NULL;
}

struct registry_record *registry_record_dup(const struct registry_record *r)
{
    _cleanup_record_ struct registry_record *c = NULL;

    if (!r)
        return NULL;
    c = registry_record_new();
    if (!c)
        return NULL;
    *c = *r;
    c->id = c->instance = c->idempotency_key = c->params_hash = c->node = c->upid = NULL;
    c->hostname = c->ip = c->error = c->host_key = c->template = c->fork_snapshot = NULL;
    c->detaching = NULL;
    c->labels = c->env = c->internet_allow = NULL;
    if (strdup_replace(&c->id, r->id) < 0 || strdup_replace(&c->instance, r->instance) < 0 ||
        strdup_replace(&c->idempotency_key, r->idempotency_key) < 0 ||
        strdup_replace(&c->params_hash, r->params_hash) < 0 ||
        strdup_replace(&c->node, r->node) < 0 || strdup_replace(&c->upid, r->upid) < 0 ||
        strdup_replace(&c->hostname, r->hostname) < 0 || strdup_replace(&c->ip, r->ip) < 0 ||
        strdup_replace(&c->error, r->error) < 0 || strdup_replace(&c->host_key, r->host_key) < 0 ||
        strdup_replace(&c->template, r->template) < 0 ||
        strdup_replace(&c->fork_snapshot, r->fork_snapshot) < 0 ||
        strdup_replace(&c->detaching, r->detaching) < 0)
        return NULL;
    if (r->labels && json_object_deep_copy(r->labels, &c->labels, NULL) < 0)
        return NULL;
    if (r->env && json_object_deep_copy(r->env, &c->env, NULL) < 0)
        return NULL;
    if (r->internet_allow && json_object_deep_copy(r->internet_allow, &c->internet_allow, NULL) < 0)
        return NULL;
    return TAKE_PTR(c);
}

struct registry_record **registry_records_free(struct registry_record **v, size_t n)
{
    if (!v)
        return NULL;
    for (size_t i = 0; i < n; i++)
        registry_record_free(v[i]);
    free(v);
    return NULL;
}

struct registry_problem *registry_problems_free(struct registry_problem *v, size_t n)
{
    if (!v)
        return NULL;
    for (size_t i = 0; i < n; i++)
        FREE_MANY(v[i].file, v[i].reason, v[i].moved_to);
    free(v);
    return NULL;
}

/* A printable string without control characters, 1..max bytes. */
static bool text_ok(const char *s, size_t max, bool allow_empty)
{
    size_t n;

    if (!s)
        return false;
    n = strlen(s);
    if (n > max || (!allow_empty && n == 0))
        return false;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
            return false;
    return true;
}

/* An allow-list as a record keeps it: absent, or entries egress.h accepts (1 or more). */
static bool allow_ok(json_object *allow)
{
    _cleanup_json_ json_object *norm = NULL;
    struct params_error err = {};

    return !allow || egress_allow_normal(allow, "internet_allow", &norm, &err) == 0;
}

static bool labels_ok(json_object *labels)
{
    size_t count = 0;

    if (!labels)
        return true;
    if (!json_object_is_type(labels, json_type_object))
        return false;
    json_object_object_foreach(labels, k, v)
    {
        if (++count > REG_LABELS_MAX)
            return false;
        if (strlen(k) == 0 || strlen(k) > REG_LABEL_LEN_MAX)
            return false;
        if (!json_object_is_type(v, json_type_string) ||
            json_object_get_string_len(v) > REG_LABEL_LEN_MAX ||
            strlen(json_object_get_string(v)) != (size_t)json_object_get_string_len(v))
            return false;
    }
    return true;
}

static bool env_name_ok(const char *k)
{
    size_t n = strlen(k);

    if (n == 0 || n > REG_ENV_NAME_MAX || (k[0] >= '0' && k[0] <= '9'))
        return false;
    for (size_t i = 0; i < n; i++)
        if (!((k[i] >= 'a' && k[i] <= 'z') || (k[i] >= 'A' && k[i] <= 'Z') ||
              (k[i] >= '0' && k[i] <= '9') || k[i] == '_'))
            return false;
    return true;
}

bool registry_env_ok(json_object *env)
{
    size_t count = 0, bytes = 0;

    if (!env)
        return true;
    if (!json_object_is_type(env, json_type_object))
        return false;
    json_object_object_foreach(env, k, v)
    {
        if (++count > REG_ENV_MAX || !env_name_ok(k) || !json_object_is_type(v, json_type_string))
            return false;
        if (strlen(json_object_get_string(v)) != (size_t)json_object_get_string_len(v))
            return false;
        bytes += strlen(k) + (size_t)json_object_get_string_len(v);
        if (bytes > REG_ENV_BYTES_MAX)
            return false;
    }
    return true;
}

int registry_record_validate(const struct registry_record *r)
{
    if (!r)
        return -EINVAL;
    if (!id_is_valid(r->id) || !id_is_valid(r->instance))
        return -EINVAL;
    if (r->owner_uid == (uid_t)-1)
        return -EINVAL;
    if (r->idempotency_key && !text_ok(r->idempotency_key, REG_KEY_MAX, false))
        return -EINVAL;
    if (r->params_hash && !hex_is_valid(r->params_hash, 64))
        return -EINVAL;
    if (r->vmid != 0 && (r->vmid < VMID_MIN || r->vmid > VMID_MAX))
        return -EINVAL;
    if (r->node && !text_ok(r->node, REG_NODE_MAX, false))
        return -EINVAL;
    if ((unsigned)r->state >= _REG_STATE_MAX)
        return -EINVAL;
    if (r->upid && !text_ok(r->upid, REG_UPID_MAX, false))
        return -EINVAL;
    if (r->hostname && !text_ok(r->hostname, REG_HOST_MAX, false))
        return -EINVAL;
    if (r->template && (strlen(r->template) > REG_TEMPLATE_MAX || !id_is_valid(r->template)))
        return -EINVAL;
    if (r->fork_snapshot && !text_ok(r->fork_snapshot, REG_FORK_SNAPSHOT_MAX, false))
        return -EINVAL;
    if (r->detaching && (strlen(r->detaching) > REG_VOLUME_MAX || !id_is_valid(r->detaching)))
        return -EINVAL;
    if (r->ip && !text_ok(r->ip, REG_IP_MAX, false))
        return -EINVAL;
    if (r->error && !text_ok(r->error, REG_ERROR_MAX, true))
        return -EINVAL;
    if (r->host_key && !hostkey_pin_is_valid(r->host_key))
        return -EINVAL;
    if (r->cores > CORES_MAX || r->memory_mb > MEMORY_MB_MAX || r->disk_gb > DISK_GB_MAX ||
        r->net_rate_mbps > NET_RATE_MAX)
        return -EINVAL;
    if (!labels_ok(r->labels) || !registry_env_ok(r->env) || !allow_ok(r->internet_allow))
        return -EINVAL;
    if (r->created_at < 0 || r->expires_at < 0)
        return -EINVAL;
    {
        char buf[RFC3339_MAX];
        if (time_format_rfc3339(r->created_at, buf, sizeof(buf)) < 0 ||
            time_format_rfc3339(r->expires_at, buf, sizeof(buf)) < 0)
            return -EINVAL;
    }
    return 0;
}

static int add(json_object *o, const char *key, json_object *v)
{
    if (!v)
        return -ENOMEM;
    if (json_object_object_add(o, key, v) < 0) {
        json_object_put(v);
        return -ENOMEM;
    }
    return 0;
}

static int add_str(json_object *o, const char *key, const char *s)
{
    if (!s)
        return 0;
    return add(o, key, json_object_new_string(s));
}

static int add_time(json_object *o, const char *key, time_t t)
{
    char buf[RFC3339_MAX];
    int r = time_format_rfc3339(t, buf, sizeof(buf));
    if (r < 0)
        return r;
    return add_str(o, key, buf);
}

int registry_record_to_json(const struct registry_record *r, char **ret_json)
{
    _cleanup_json_ json_object *o = NULL;
    const char *s;
    char *out;
    int k;

    if (!ret_json)
        return -EINVAL;
    k = registry_record_validate(r);
    if (k < 0)
        return k;
    o = json_object_new_object();
    if (!o)
        return -ENOMEM;
    if ((k = add(o, "version", json_object_new_int(REG_FORMAT_VERSION))) < 0 ||
        (k = add_str(o, "id", r->id)) < 0 || (k = add_str(o, "instance", r->instance)) < 0 ||
        (k = add(o, "owner_uid", json_object_new_int64(r->owner_uid))) < 0 ||
        (k = add_str(o, "idempotency_key", r->idempotency_key)) < 0 ||
        (k = add_str(o, "params_hash", r->params_hash)) < 0 ||
        (k = add(o, "vmid", json_object_new_int(r->vmid))) < 0 ||
        (k = add_str(o, "node", r->node)) < 0 ||
        (k = add_str(o, "state", registry_state_to_string(r->state))) < 0 ||
        (k = add_str(o, "upid", r->upid)) < 0 || (k = add_str(o, "hostname", r->hostname)) < 0 ||
        (k = add_str(o, "ip", r->ip)) < 0 ||
        (k = add(o, "cores", json_object_new_int64(r->cores))) < 0 ||
        (k = add(o, "memory_mb", json_object_new_int64((int64_t)r->memory_mb))) < 0 ||
        (k = add(o, "disk_gb", json_object_new_int64((int64_t)r->disk_gb))) < 0 ||
        (k = add(o, "internet", json_object_new_boolean(r->internet))) < 0 ||
        (k = add_time(o, "created_at", r->created_at)) < 0 ||
        (k = add_time(o, "expires_at", r->expires_at)) < 0 ||
        (k = add_str(o, "error", r->error)) < 0 || (k = add_str(o, "host_key", r->host_key)) < 0)
        return k;
    if (r->net_rate_mbps &&
        (k = add(o, "net_rate_mbps", json_object_new_int64(r->net_rate_mbps))) < 0)
        return k;
    if (r->labels && (k = add(o, "labels", json_object_get(r->labels))) < 0)
        return k;
    if (r->env && (k = add(o, "env", json_object_get(r->env))) < 0)
        return k;
    if (r->internet_allow && (k = add(o, "internet_allow", json_object_get(r->internet_allow))) < 0)
        return k;
    if (r->internet_pending && (k = add(o, "internet_pending", json_object_new_boolean(true))) < 0)
        return k;
    if ((k = add_str(o, "template", r->template)) < 0 ||
        (k = add_str(o, "fork_snapshot", r->fork_snapshot)) < 0 ||
        (k = add_str(o, "detaching", r->detaching)) < 0 ||
        (r->pool && (k = add(o, "pool", json_object_new_boolean(true))) < 0) ||
        (r->resume_on_use && (k = add(o, "resume_on_use", json_object_new_boolean(true))) < 0) ||
        (r->volumes && (k = add(o, "volumes", json_object_new_boolean(true))) < 0) ||
        (r->auto_pause_s &&
         (k = add(o, "auto_pause_s", json_object_new_int64(r->auto_pause_s))) < 0))
        return k;
    s = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_SPACED |
                                              JSON_C_TO_STRING_NOSLASHESCAPE);
    if (!s)
        return -ENOMEM;
    if (asprintf(&out, "%s\n", s) < 0)
        return -ENOMEM;
    *ret_json = out;
    return 0;
}

/* Field getters: -EBADMSG for a wrong type or bad value; a missing optional
 * field leaves the output as it is. */
static int get_str(json_object *o, const char *key, bool required, char **ret)
{
    json_object *v;
    char *c;

    if (!json_object_object_get_ex(o, key, &v) || json_object_is_type(v, json_type_null))
        return required ? -EBADMSG : 0;
    if (!json_object_is_type(v, json_type_string))
        return -EBADMSG;
    if (strlen(json_object_get_string(v)) != (size_t)json_object_get_string_len(v))
        return -EBADMSG; /* embedded NUL */
    c = strdup(json_object_get_string(v));
    if (!c)
        return -ENOMEM;
    free(*ret);
    *ret = c;
    return 0;
}

static int get_int(json_object *o, const char *key, bool required, int64_t min, int64_t max,
                   int64_t *ret)
{
    json_object *v;
    int64_t x;

    if (!json_object_object_get_ex(o, key, &v))
        return required ? -EBADMSG : 0;
    if (!json_object_is_type(v, json_type_int))
        return -EBADMSG;
    errno = 0;
    x = json_object_get_int64(v);
    if (errno != 0 || x < min || x > max)
        return -EBADMSG;
    *ret = x;
    return 0;
}

static int get_time(json_object *o, const char *key, time_t *ret)
{
    _cleanup_free_ char *s = NULL;
    int r;

    r = get_str(o, key, true, &s);
    if (r < 0)
        return r;
    return time_parse_rfc3339(s, ret) < 0 ? -EBADMSG : 0;
}

/* The JSON object of json[0, n) (strict, nothing but whitespace after it): -EBADMSG for
 * anything else. */
static int object_parse(const char *json, size_t n, json_object **ret)
{
    json_tokener *tok;
    json_object *o;

    tok = json_tokener_new_ex(8);
    if (!tok)
        return -ENOMEM;
    json_tokener_set_flags(tok, JSON_TOKENER_STRICT);
    o = json_tokener_parse_ex(tok, json, (int)n);
    if (o && json_tokener_get_error(tok) == json_tokener_success) {
        /* Only whitespace may follow. */
        for (size_t i = json_tokener_get_parse_end(tok); i < n; i++)
            if (!strchr(" \t\r\n", json[i])) {
                json_object_put(o);
                o = NULL;
                break;
            }
    } else {
        json_object_put(o);
        o = NULL;
    }
    json_tokener_free(tok);
    if (!o || !json_object_is_type(o, json_type_object)) {
        json_object_put(o);
        return -EBADMSG;
    }
    *ret = o;
    return 0;
}

/* An optional boolean member into *out (untouched when absent): 0, or -EBADMSG. */
static int get_bool(json_object *o, const char *key, bool *out)
{
    json_object *v;

    if (!json_object_object_get_ex(o, key, &v))
        return 0;
    if (!json_object_is_type(v, json_type_boolean))
        return -EBADMSG;
    *out = json_object_get_boolean(v);
    return 0;
}

int registry_record_from_json(const char *json, size_t n, struct registry_record **ret)
{
    _cleanup_record_ struct registry_record *r = NULL;
    _cleanup_json_ json_object *o = NULL;
    _cleanup_free_ char *state = NULL;
    json_object *v;
    int64_t x;
    int k;

    if (!json || !ret)
        return -EINVAL;
    if (n > REG_RECORD_MAX)
        return -EFBIG;
    k = object_parse(json, n, &o);
    if (k < 0)
        return k;

    if (!json_object_object_get_ex(o, "version", &v) || !json_object_is_type(v, json_type_int))
        return -EBADMSG;
    if (json_object_get_int64(v) != REG_FORMAT_VERSION)
        return -EPROTONOSUPPORT;

    r = registry_record_new();
    if (!r)
        return -ENOMEM;
    if ((k = get_str(o, "id", true, &r->id)) < 0 ||
        (k = get_str(o, "instance", true, &r->instance)) < 0 ||
        (k = get_str(o, "idempotency_key", false, &r->idempotency_key)) < 0 ||
        (k = get_str(o, "params_hash", false, &r->params_hash)) < 0 ||
        (k = get_str(o, "node", false, &r->node)) < 0 ||
        (k = get_str(o, "state", true, &state)) < 0 ||
        (k = get_str(o, "upid", false, &r->upid)) < 0 ||
        (k = get_str(o, "hostname", false, &r->hostname)) < 0 ||
        (k = get_str(o, "ip", false, &r->ip)) < 0 ||
        (k = get_str(o, "error", false, &r->error)) < 0 ||
        (k = get_str(o, "host_key", false, &r->host_key)) < 0 ||
        (k = get_str(o, "template", false, &r->template)) < 0 ||
        (k = get_str(o, "fork_snapshot", false, &r->fork_snapshot)) < 0 ||
        (k = get_str(o, "detaching", false, &r->detaching)) < 0 ||
        (k = get_time(o, "created_at", &r->created_at)) < 0 ||
        (k = get_time(o, "expires_at", &r->expires_at)) < 0)
        return k == -ENOMEM ? k : -EBADMSG;

    x = 0;
    if ((k = get_int(o, "owner_uid", true, 0, (int64_t)UINT32_MAX - 1, &x)) < 0)
        return k;
    r->owner_uid = (uid_t)x;
    x = 0;
    if ((k = get_int(o, "vmid", false, 0, VMID_MAX, &x)) < 0)
        return k;
    r->vmid = (int)x;
    x = 0;
    if ((k = get_int(o, "cores", false, 0, CORES_MAX, &x)) < 0)
        return k;
    r->cores = (unsigned)x;
    x = 0;
    if ((k = get_int(o, "memory_mb", false, 0, (int64_t)MEMORY_MB_MAX, &x)) < 0)
        return k;
    r->memory_mb = (uint64_t)x;
    x = 0;
    if ((k = get_int(o, "disk_gb", false, 0, (int64_t)DISK_GB_MAX, &x)) < 0)
        return k;
    r->disk_gb = (uint64_t)x;
    x = 0;
    if ((k = get_int(o, "net_rate_mbps", false, 0, NET_RATE_MAX, &x)) < 0)
        return k;
    r->net_rate_mbps = (unsigned)x;

    if ((k = get_bool(o, "internet", &r->internet)) < 0 ||
        (k = get_bool(o, "internet_pending", &r->internet_pending)) < 0 ||
        (k = get_bool(o, "pool", &r->pool)) < 0 ||
        (k = get_bool(o, "resume_on_use", &r->resume_on_use)) < 0 ||
        (k = get_bool(o, "volumes", &r->volumes)) < 0)
        return k;
    x = 0;
    if ((k = get_int(o, "auto_pause_s", false, 0, INT32_MAX, &x)) < 0)
        return k;
    r->auto_pause_s = (unsigned)x;
    if (json_object_object_get_ex(o, "labels", &v) && !json_object_is_type(v, json_type_null))
        r->labels = json_object_get(v);
    if (json_object_object_get_ex(o, "env", &v) && !json_object_is_type(v, json_type_null))
        r->env = json_object_get(v);
    if (json_object_object_get_ex(o, "internet_allow", &v) &&
        !json_object_is_type(v, json_type_null))
        r->internet_allow = json_object_get(v);

    k = registry_state_from_string(state);
    if (k < 0)
        return -EBADMSG;
    r->state = (enum registry_state)k;

    if (registry_record_validate(r) < 0)
        return -EBADMSG;
    *ret = TAKE_PTR(r);
    return 0;
}

/* --- params hash --- */

static int sb_str(struct buf *b, const char *s, size_t n)
{
    int r = buf_append(b, "\"", 1);

    for (size_t i = 0; r >= 0 && i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        char esc[8];
        if (ch == '"')
            r = buf_append(b, "\\\"", 2);
        else if (ch == '\\')
            r = buf_append(b, "\\\\", 2);
        else if (ch < 0x20 || ch == 0x7f) {
            snprintf(esc, sizeof(esc), "\\u%04x", ch);
            r = buf_append(b, esc, 6);
        } else
            r = buf_append(b, (const char *)&s[i], 1);
    }
    if (r >= 0)
        r = buf_append(b, "\"", 1);
    return r;
}

static int canon(struct buf *b, json_object *o, int depth)
{
    char num[64];

    if (depth > REG_PARAMS_DEPTH_MAX)
        return -E2BIG;
    switch (json_object_get_type(o)) {
    case json_type_null:
        return buf_append(b, "null", 4);
    case json_type_boolean:
        return json_object_get_boolean(o) ? buf_append(b, "true", 4) : buf_append(b, "false", 5);
    case json_type_int: {
        int64_t v = json_object_get_int64(o);
        if (v == INT64_MAX)
            snprintf(num, sizeof(num), "%" PRIu64, json_object_get_uint64(o));
        else
            snprintf(num, sizeof(num), "%" PRId64, v);
        return buf_append(b, num, strlen(num));
    }
    case json_type_double: {
        double d = json_object_get_double(o);
        if (!isfinite(d))
            return -EINVAL;
        if (d == floor(d) && fabs(d) < 9007199254740992.0)
            snprintf(num, sizeof(num), "%" PRId64, (int64_t)d);
        else
            snprintf(num, sizeof(num), "%.17g", d);
        return buf_append(b, num, strlen(num));
    }
    case json_type_string:
        return sb_str(b, json_object_get_string(o), (size_t)json_object_get_string_len(o));
    case json_type_array: {
        size_t n = json_object_array_length(o);
        int r = buf_append(b, "[", 1);
        for (size_t i = 0; r >= 0 && i < n; i++) {
            if (i > 0)
                r = buf_append(b, ",", 1);
            if (r >= 0)
                r = canon(b, json_object_array_get_idx(o, i), depth + 1);
        }
        return r < 0 ? r : buf_append(b, "]", 1);
    }
    case json_type_object: {
        _cleanup_free_ const char **keys = NULL;
        size_t n = 0, i;
        int r;

        if ((size_t)json_object_object_length(o) > REG_PARAMS_MAX / 4)
            return -E2BIG;
        r = jobj_sorted_keys(o, &keys, &n);
        if (r >= 0)
            r = buf_append(b, "{", 1);
        for (i = 0; r >= 0 && i < n; i++) {
            if (i > 0)
                r = buf_append(b, ",", 1);
            if (r >= 0)
                r = sb_str(b, keys[i], strlen(keys[i]));
            if (r >= 0)
                r = buf_append(b, ":", 1);
            if (r >= 0)
                r = canon(b, json_object_object_get(o, keys[i]), depth + 1);
        }
        return r < 0 ? r : buf_append(b, "}", 1);
    }
    }
    return -EINVAL;
}

int registry_params_hash(json_object *params, char ret[SHA256_HEX_SIZE])
{
    struct buf b = {.max = REG_PARAMS_MAX};
    char hash[SHA256_HEX_SIZE];
    int r;

    if (!ret)
        return -EINVAL;
    r = canon(&b, params, 0);
    if (r >= 0)
        r = sha256_hex(b.data ? b.data : "", b.len, hash);
    buf_clear(&b, true);
    if (r < 0)
        return r;
    memcpy(ret, hash, SHA256_HEX_SIZE);
    return 0;
}
