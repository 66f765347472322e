/* Proxmox VE responses: data, ids, versions, tasks, container properties, listings and form
 * encoding, no I/O. The errors are pve-error.c's. */
#include "macro.h"

#include "pve-parse.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

/* ---- data, vmids ---- */

int pve_parse_data(const char *body, size_t body_len, struct json_object **ret_data)
{
    struct json_tokener *tok;
    struct json_object *root, *d = NULL;

    if (!body || body_len == 0 || body_len > INT32_MAX)
        return -EBADMSG;
    tok = json_tokener_new();
    if (!tok)
        return -ENOMEM;
    root = json_tokener_parse_ex(tok, body, (int)body_len);
    json_tokener_free(tok);
    if (!root)
        return -EBADMSG;
    if (!json_object_is_type(root, json_type_object) ||
        !json_object_object_get_ex(root, "data", &d)) {
        json_object_put(root);
        return -EBADMSG;
    }
    d = json_object_get(d);
    json_object_put(root);
    *ret_data = d;
    return 0;
}

int pve_parse_vmid_string(const char *s, uint32_t *ret_vmid)
{
    uint64_t v = 0;

    if (!s || !*s || strlen(s) > 10)
        return -EINVAL;
    for (const char *p = s; *p; p++) {
        if (!isdigit((unsigned char)*p))
            return -EINVAL;
        v = v * 10 + (uint64_t)(*p - '0');
    }
    if (v < PVE_VMID_MIN || v > PVE_VMID_MAX)
        return -EINVAL;
    *ret_vmid = (uint32_t)v;
    return 0;
}

int pve_parse_vmid(struct json_object *v, uint32_t *ret_vmid)
{
    if (!v)
        return -EINVAL;
    switch (json_object_get_type(v)) {
    case json_type_int: {
        int64_t i = json_object_get_int64(v);
        if (i < PVE_VMID_MIN || i > PVE_VMID_MAX)
            return -EINVAL;
        *ret_vmid = (uint32_t)i;
        return 0;
    }
    case json_type_double: {
        double d = json_object_get_double(v);
        if (d != (double)(int64_t)d || d < PVE_VMID_MIN || d > PVE_VMID_MAX)
            return -EINVAL;
        *ret_vmid = (uint32_t)d;
        return 0;
    }
    case json_type_string:
        return pve_parse_vmid_string(json_object_get_string(v), ret_vmid);
    default:
        return -EINVAL;
    }
}

int pve_nextid_parse(struct json_object *data, uint32_t *ret_vmid)
{
    return pve_parse_vmid(data, ret_vmid) < 0 ? -EBADMSG : 0;
}

/* ---- versions ---- */

static const char *parse_version_number(const char *p, unsigned *ret)
{
    unsigned v = 0;

    if (*p < '0' || *p > '9')
        return NULL;
    for (; *p >= '0' && *p <= '9'; p++) {
        if (v > 99999)
            return NULL;
        v = v * 10 + (unsigned)(*p - '0');
    }
    *ret = v;
    return p;
}

int pve_version_parse(const char *s, struct pve_version *ret_version)
{
    struct pve_version v = {0};
    const char *p = s;

    if (!p || !(p = parse_version_number(p, &v.major)) || *p++ != '.' ||
        !(p = parse_version_number(p, &v.minor)))
        return -EINVAL;
    if (*p == '.' && !parse_version_number(p + 1, &v.patch))
        return -EINVAL;
    *ret_version = v;
    return 0;
}

bool pve_version_at_least(const struct pve_version *v, unsigned major, unsigned minor,
                          unsigned patch)
{
    if (v->major != major)
        return v->major > major;
    if (v->minor != minor)
        return v->minor > minor;
    return v->patch >= patch;
}

/* ---- UPID ---- */

static bool is_hex_n(const char *s, size_t len, size_t min, size_t max, uint64_t *ret)
{
    uint64_t v = 0;

    if (len < min || len > max)
        return false;
    for (size_t i = 0; i < len; i++) {
        if (!isxdigit((unsigned char)s[i]))
            return false;
        v = v * 16 + (uint64_t)(isdigit((unsigned char)s[i])
                                    ? s[i] - '0'
                                    : tolower((unsigned char)s[i]) - 'a' + 10);
    }
    *ret = v;
    return true;
}

/* [^:\s/] */
static bool field_ok(const char *s, size_t len, bool may_be_empty)
{
    if (len == 0)
        return may_be_empty;
    for (size_t i = 0; i < len; i++)
        if (s[i] == ':' || s[i] == '/' || isspace((unsigned char)s[i]))
            return false;
    return true;
}

static bool node_ok(const char *s, size_t len)
{
    if (len == 0 || !isalnum((unsigned char)s[0]) || !isalnum((unsigned char)s[len - 1]))
        return false;
    for (size_t i = 0; i < len; i++)
        if (!isalnum((unsigned char)s[i]) && s[i] != '-')
            return false;
    return true;
}

int pve_upid_parse(const char *s, struct pve_upid *ret)
{
    const char *f[9];
    size_t len[9], n = 0;
    const char *p;
    uint64_t pid, pstart, starttime;
    struct pve_upid u = {0};

    if (!s || strncmp(s, "UPID:", 5) != 0)
        return -EINVAL;
    p = s + 5;
    /* node pid pstart starttime type id user, each followed by ':', then end. */
    while (n < 7) {
        const char *c = strchr(p, ':');
        if (!c)
            return -EINVAL;
        f[n] = p;
        len[n] = (size_t)(c - p);
        n++;
        p = c + 1;
    }
    if (*p != 0)
        return -EINVAL;
    if (!node_ok(f[0], len[0]) || !is_hex_n(f[1], len[1], 8, 8, &pid) ||
        !is_hex_n(f[2], len[2], 8, 9, &pstart) || !is_hex_n(f[3], len[3], 8, 8, &starttime) ||
        !field_ok(f[4], len[4], false) || !field_ok(f[5], len[5], true) ||
        !field_ok(f[6], len[6], false))
        return -EINVAL;
    if (len[0] >= sizeof(u.node) || len[4] >= sizeof(u.type) || len[5] >= sizeof(u.id) ||
        len[6] >= sizeof(u.user))
        return -EINVAL;
    memcpy(u.node, f[0], len[0]);
    memcpy(u.type, f[4], len[4]);
    memcpy(u.id, f[5], len[5]);
    memcpy(u.user, f[6], len[6]);
    u.pid = (uint32_t)pid;
    u.pstart = pstart;
    u.starttime = (uint32_t)starttime;
    *ret = u;
    return 0;
}

/* ---- tasks ---- */

int pve_task_exitstatus_ok(const char *s, unsigned *ret_warnings)
{
    unsigned long n = 0;

    if (ret_warnings)
        *ret_warnings = 0;
    if (!s)
        return 0;
    if (strcmp(s, "OK") == 0)
        return 1;
    if (strncmp(s, "WARNINGS: ", 10) == 0 && s[10]) {
        for (const char *p = s + 10; *p; p++) {
            if (!isdigit((unsigned char)*p))
                return 0;
            if (n < 1000000000UL)
                n = n * 10 + (unsigned long)(*p - '0');
        }
        if (ret_warnings)
            *ret_warnings = (unsigned)n;
        return 1;
    }
    return 0;
}

int pve_task_status_parse(struct json_object *data, struct pve_task_status *ret)
{
    struct json_object *v;
    const char *status;

    if (!data || !json_object_is_type(data, json_type_object) ||
        !json_object_object_get_ex(data, "status", &v) || !json_object_is_type(v, json_type_string))
        return -EBADMSG;
    status = json_object_get_string(v);
    memset(ret, 0, sizeof(*ret));
    if (strcmp(status, "running") == 0) {
        ret->running = true;
        return 0;
    }
    if (strcmp(status, "stopped") != 0)
        return -EBADMSG;
    if (json_object_object_get_ex(data, "exitstatus", &v) &&
        json_object_is_type(v, json_type_string))
        snprintf(ret->exitstatus, sizeof(ret->exitstatus), "%s", json_object_get_string(v));
    else
        snprintf(ret->exitstatus, sizeof(ret->exitstatus), "unexpected status");
    ret->success = pve_task_exitstatus_ok(ret->exitstatus, &ret->warnings) == 1;
    return 0;
}

/* ---- container status ---- */

enum pve_ct_state pve_ct_state_from(const char *status)
{
    if (status && strcmp(status, "running") == 0)
        return PVE_CT_RUNNING;
    if (status && strcmp(status, "stopped") == 0)
        return PVE_CT_STOPPED;
    return PVE_CT_UNKNOWN;
}

int pve_ct_status_parse(struct json_object *data, enum pve_ct_state *ret_state)
{
    struct json_object *v;
    enum pve_ct_state st;

    if (!data || !json_object_is_type(data, json_type_object) ||
        !json_object_object_get_ex(data, "status", &v) || !json_object_is_type(v, json_type_string))
        return -EBADMSG;
    st = pve_ct_state_from(json_object_get_string(v));
    if (st == PVE_CT_UNKNOWN)
        return -EBADMSG;
    *ret_state = st;
    return 0;
}

/* ---- interfaces ---- */

static bool ipv4_global_unicast(const char *s, char out[INET_ADDRSTRLEN])
{
    struct in_addr a;
    uint32_t h;

    if (inet_pton(AF_INET, s, &a) != 1)
        return false;
    h = ntohl(a.s_addr);
    if ((h >> 24) == 0 || (h >> 24) == 127 || (h >> 16) == 0xA9FE || (h >> 28) >= 0xE)
        return false;
    return inet_ntop(AF_INET, &a, out, INET_ADDRSTRLEN) != NULL;
}

int pve_interfaces_pick_ipv4(struct json_object *data, char **ret_ip)
{
    char buf[INET_ADDRSTRLEN];

    if (!data)
        return 0;
    if (!json_object_is_type(data, json_type_array))
        return -EBADMSG;
    for (size_t i = 0; i < json_object_array_length(data); i++) {
        struct json_object *it = json_object_array_get_idx(data, i), *v, *list;
        if (!json_object_is_type(it, json_type_object))
            continue;
        if (json_object_object_get_ex(it, "name", &v) &&
            strcmp(json_object_get_string(v), "lo") == 0)
            continue;
        if (json_object_object_get_ex(it, "ip-addresses", &list) &&
            json_object_is_type(list, json_type_array)) {
            for (size_t j = 0; j < json_object_array_length(list); j++) {
                struct json_object *a = json_object_array_get_idx(list, j), *t, *ip;
                if (!json_object_is_type(a, json_type_object) ||
                    !json_object_object_get_ex(a, "ip-address-type", &t) ||
                    strcmp(json_object_get_string(t), "inet") != 0 ||
                    !json_object_object_get_ex(a, "ip-address", &ip))
                    continue;
                if (ipv4_global_unicast(json_object_get_string(ip), buf))
                    goto found;
            }
        }
        if (json_object_object_get_ex(it, "inet", &v) && json_object_is_type(v, json_type_string)) {
            char tmp[64];
            snprintf(tmp, sizeof(tmp), "%s", json_object_get_string(v));
            char *slash = strchr(tmp, '/');
            if (slash)
                *slash = 0;
            if (ipv4_global_unicast(tmp, buf))
                goto found;
        }
    }
    return 0;
found:
    *ret_ip = strdup(buf);
    return *ret_ip ? 1 : -ENOMEM;
}

/* ---- netN property strings ---- */

struct pve_net *pve_net_free(struct pve_net *net)
{
    if (!net)
        return NULL;
    for (size_t i = 0; i < net->n; i++) {
        free(net->key[i]);
        free(net->value[i]);
    }
    free(net);
    return NULL;
}

int pve_net_parse(const char *s, struct pve_net **ret_net)
{
    struct pve_net *net;
    const char *p = s;

    if (!s || !*s)
        return -EINVAL;
    net = calloc(1, sizeof(*net));
    if (!net)
        return -ENOMEM;
    while (*p) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        const char *eq = memchr(p, '=', len);
        if (len == 0) {
            pve_net_free(net);
            return -EINVAL;
        }
        if (net->n >= PVE_NET_KEYS_MAX) {
            pve_net_free(net);
            return -E2BIG;
        }
        if (eq) {
            net->key[net->n] = strndup(p, (size_t)(eq - p));
            net->value[net->n] = strndup(eq + 1, len - (size_t)(eq - p) - 1);
            if (!net->key[net->n] || !net->value[net->n]) {
                net->n++;
                pve_net_free(net);
                return -ENOMEM;
            }
        } else {
            net->key[net->n] = strndup(p, len);
            if (!net->key[net->n]) {
                pve_net_free(net);
                return -ENOMEM;
            }
        }
        net->n++;
        if (!end)
            break;
        p = end + 1;
        if (!*p) {
            pve_net_free(net);
            return -EINVAL;
        }
    }
    *ret_net = net;
    return 0;
}

const char *pve_net_get(const struct pve_net *net, const char *key)
{
    for (size_t i = 0; net && i < net->n; i++)
        if (net->value[i] && strcmp(net->key[i], key) == 0)
            return net->value[i];
    return NULL;
}

int pve_net_set(struct pve_net *net, const char *key, const char *value)
{
    char *v;

    if (!net || !key || !*key || !value || strpbrk(key, ",=") || strchr(value, ','))
        return -EINVAL;
    v = strdup(value);
    if (!v)
        return -ENOMEM;
    for (size_t i = 0; i < net->n; i++)
        if (net->value[i] && strcmp(net->key[i], key) == 0) {
            free(net->value[i]);
            net->value[i] = v;
            return 0;
        }
    if (net->n >= PVE_NET_KEYS_MAX) {
        free(v);
        return -E2BIG;
    }
    net->key[net->n] = strdup(key);
    if (!net->key[net->n]) {
        free(v);
        return -ENOMEM;
    }
    net->value[net->n++] = v;
    return 0;
}

int pve_net_print(const struct pve_net *net, char **ret_s)
{
    char *s = NULL;
    size_t size = 0;
    FILE *f;

    if (!net)
        return -EINVAL;
    f = open_memstream(&s, &size);
    if (!f)
        return -ENOMEM;
    for (size_t i = 0; i < net->n; i++) {
        if (i > 0)
            fputc(',', f);
        if (net->value[i])
            fprintf(f, "%s=%s", net->key[i], net->value[i]);
        else
            fputs(net->key[i], f);
    }
    if (fclose(f) != 0) {
        free(s);
        return -ENOMEM;
    }
    *ret_s = s;
    return 0;
}

int pve_description_normalize(const char *s, char **ret_s)
{
    size_t l;
    char *r;

    if (!s)
        s = "";
    l = strlen(s);
    if (l > 0 && s[l - 1] == '\n')
        l--;
    r = strndup(s, l);
    if (!r)
        return -ENOMEM;
    *ret_s = r;
    return 0;
}

/* ---- disk sizes ---- */

#define SIZE_FRACTION_DIGITS 6 /* 10^6 * 2^40 (T) still fits 64 bits */

static int parse_size_value(const char *p, uint64_t *ret_bytes)
{
    static const char units[] = "KMGT";
    uint64_t whole = 0, frac = 0, den = 1, unit = 1, bytes;
    const char *unit_at;
    unsigned digits = 0;

    if (*p < '0' || *p > '9')
        return -EINVAL;
    for (; *p >= '0' && *p <= '9'; p++) {
        if (whole > (UINT64_MAX - 9) / 10)
            return -ERANGE;
        whole = whole * 10 + (uint64_t)(*p - '0');
    }
    if (*p == '.') {
        if (p[1] < '0' || p[1] > '9')
            return -EINVAL;
        for (p++; *p >= '0' && *p <= '9'; p++)
            if (digits++ < SIZE_FRACTION_DIGITS) {
                frac = frac * 10 + (uint64_t)(*p - '0');
                den *= 10;
            }
    }
    unit_at = *p ? strchr(units, *p) : NULL;
    if (unit_at) {
        unit = UINT64_C(1) << (10 * (unit_at - units + 1));
        p++;
        if (p[0] == 'i' && p[1] == 'B') /* "GiB": the same unit */
            p += 2;
    }
    if (*p && *p != ',')
        return -EINVAL;
    if (whole > UINT64_MAX / unit)
        return -ERANGE;
    bytes = whole * unit;
    if (bytes > UINT64_MAX - frac * unit / den)
        return -ERANGE;
    *ret_bytes = bytes + frac * unit / den;
    return 0;
}

int pve_parse_rootfs_size(const char *s, uint64_t *ret_bytes)
{
    if (!s)
        return -EINVAL;
    /* items separated by ',': the volume first (no key), then key=value */
    for (const char *item = s; item; item = strchr(item, ',')) {
        if (*item == ',')
            item++;
        if (strncmp(item, "size=", 5) == 0)
            return parse_size_value(item + 5, ret_bytes);
    }
    return -ENOENT;
}

uint64_t pve_rootfs_size_gb(const char *s, uint64_t fallback)
{
    const uint64_t gib = UINT64_C(1) << 30;
    uint64_t bytes;

    if (pve_parse_rootfs_size(s, &bytes) < 0)
        return fallback;
    return bytes / gib + (bytes % gib != 0);
}

/* ---- firewall rules ---- */

static char *get_str_dup(struct json_object *o, const char *key, bool *oom)
{
    struct json_object *v;
    char *r;

    if (!json_object_object_get_ex(o, key, &v) || json_object_is_type(v, json_type_null))
        return NULL;
    r = strdup(json_object_get_string(v));
    if (!r)
        *oom = true;
    return r;
}

static bool get_bool(struct json_object *o, const char *key)
{
    struct json_object *v;

    if (!json_object_object_get_ex(o, key, &v))
        return false;
    switch (json_object_get_type(v)) {
    case json_type_boolean:
        return json_object_get_boolean(v);
    case json_type_int:
        return json_object_get_int64(v) != 0;
    case json_type_string: {
        const char *s = json_object_get_string(v);
        return strcmp(s, "1") == 0 || strcasecmp(s, "true") == 0 || strcasecmp(s, "yes") == 0 ||
               strcasecmp(s, "on") == 0;
    }
    default:
        return false;
    }
}

struct pve_fw_rules *pve_fw_rules_free(struct pve_fw_rules *rules)
{
    if (!rules)
        return NULL;
    for (size_t i = 0; i < rules->n; i++)
        FREE_MANY(rules->v[i].type, rules->v[i].action, rules->v[i].comment, rules->v[i].dest);
    FREE_MANY(rules->v, rules->digest);
    free(rules);
    return NULL;
}

int pve_fw_rules_parse(struct json_object *data, struct pve_fw_rules **ret_rules)
{
    struct pve_fw_rules *rules;
    size_t n;
    bool oom = false;

    if (!data || !json_object_is_type(data, json_type_array))
        return -EBADMSG;
    n = json_object_array_length(data);
    if (n > PVE_LIST_MAX)
        return -E2BIG;
    rules = calloc(1, sizeof(*rules));
    if (!rules || (n > 0 && !(rules->v = calloc(n, sizeof(*rules->v))))) {
        free(rules);
        return -ENOMEM;
    }
    for (size_t i = 0; i < n; i++) {
        struct json_object *it = json_object_array_get_idx(data, i), *v;
        struct pve_fw_rule *rule = &rules->v[rules->n];
        if (!json_object_is_type(it, json_type_object))
            continue;
        if (!json_object_object_get_ex(it, "pos", &v) || !json_object_is_type(v, json_type_int))
            continue;
        rule->pos = (int)json_object_get_int64(v);
        rule->type = get_str_dup(it, "type", &oom);
        rule->action = get_str_dup(it, "action", &oom);
        rule->comment = get_str_dup(it, "comment", &oom);
        rule->dest = get_str_dup(it, "dest", &oom);
        rule->enable = get_bool(it, "enable");
        rules->n++;
        if (!rules->digest)
            rules->digest = get_str_dup(it, "digest", &oom);
    }
    if (oom) {
        pve_fw_rules_free(rules);
        return -ENOMEM;
    }
    *ret_rules = rules;
    return 0;
}

int pve_fw_rules_find_group(const struct pve_fw_rules *rules, const char *group)
{
    for (size_t i = 0; rules && group && i < rules->n; i++)
        if (rules->v[i].type && rules->v[i].action && strcmp(rules->v[i].type, "group") == 0 &&
            strcmp(rules->v[i].action, group) == 0)
            return rules->v[i].pos;
    return -ENOENT;
}

/* ---- VM listings ---- */

struct pve_vm_list *pve_vm_list_free(struct pve_vm_list *list)
{
    if (!list)
        return NULL;
    for (size_t i = 0; i < list->n; i++) {
        struct pve_vm *vm = &list->v[i];

        FREE_MANY(vm->type, vm->node, vm->status, vm->name, vm->lock, vm->pool, vm->tags);
    }
    free(list->v);
    free(list);
    return NULL;
}

static int vm_list_add(struct pve_vm_list *list, size_t *alloc, struct json_object *it,
                       const char *poolid)
{
    struct json_object *v;
    struct pve_vm vm = {0};
    bool oom = false;

    if (!json_object_is_type(it, json_type_object) || !json_object_object_get_ex(it, "vmid", &v) ||
        pve_parse_vmid(v, &vm.vmid) < 0)
        return 0; /* storage entries and garbage are skipped */
    if (list->n >= PVE_LIST_MAX)
        return -E2BIG;
    if (list->n == *alloc) {
        size_t na = *alloc ? *alloc * 2 : 16;
        struct pve_vm *nv = realloc(list->v, na * sizeof(*nv));
        if (!nv)
            return -ENOMEM;
        list->v = nv;
        *alloc = na;
    }
    vm.type = get_str_dup(it, "type", &oom);
    vm.node = get_str_dup(it, "node", &oom);
    vm.status = get_str_dup(it, "status", &oom);
    vm.name = get_str_dup(it, "name", &oom);
    vm.lock = get_str_dup(it, "lock", &oom);
    vm.pool = get_str_dup(it, "pool", &oom);
    vm.tags = get_str_dup(it, "tags", &oom);
    vm.template = get_bool(it, "template");
    if (!vm.pool && poolid && !(vm.pool = strdup(poolid)))
        oom = true;
    list->v[list->n++] = vm; /* freed with the list even on oom */
    return oom ? -ENOMEM : 0;
}

static int vm_list_add_pool(struct pve_vm_list *list, size_t *alloc, struct json_object *pool)
{
    struct json_object *members, *v;
    const char *poolid = NULL;
    int r;

    if (!json_object_object_get_ex(pool, "members", &members) ||
        !json_object_is_type(members, json_type_array))
        return -EBADMSG;
    if (json_object_object_get_ex(pool, "poolid", &v) && json_object_is_type(v, json_type_string))
        poolid = json_object_get_string(v);
    for (size_t i = 0; i < json_object_array_length(members); i++) {
        r = vm_list_add(list, alloc, json_object_array_get_idx(members, i), poolid);
        if (r < 0)
            return r;
    }
    return 0;
}

int pve_vm_list_parse(struct json_object *data, struct pve_vm_list **ret_list)
{
    struct pve_vm_list *list;
    size_t alloc = 0;
    int r = 0;

    if (!data)
        return -EBADMSG;
    list = calloc(1, sizeof(*list));
    if (!list)
        return -ENOMEM;
    if (json_object_is_type(data, json_type_object)) {
        r = vm_list_add_pool(list, &alloc, data);
    } else if (json_object_is_type(data, json_type_array)) {
        for (size_t i = 0; r >= 0 && i < json_object_array_length(data); i++) {
            struct json_object *it = json_object_array_get_idx(data, i), *m;
            if (json_object_is_type(it, json_type_object) &&
                json_object_object_get_ex(it, "members", &m))
                r = vm_list_add_pool(list, &alloc, it);
            else
                r = vm_list_add(list, &alloc, it, NULL);
        }
    } else {
        r = -EBADMSG;
    }
    if (r < 0) {
        pve_vm_list_free(list);
        return r;
    }
    *ret_list = list;
    return 0;
}

const struct pve_vm *pve_vm_list_find(const struct pve_vm_list *list, uint32_t vmid)
{
    for (size_t i = 0; list && i < list->n; i++)
        if (list->v[i].vmid == vmid)
            return &list->v[i];
    return NULL;
}

/* ---- form encoding ---- */

static void put_escaped(FILE *f, const char *s)
{
    static const char hex[] = "0123456789ABCDEF";

    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (isalnum(ch) || ch == '-' || ch == '.' || ch == '_' || ch == '~')
            fputc(ch, f);
        else {
            fputc('%', f);
            fputc(hex[ch >> 4], f);
            fputc(hex[ch & 15], f);
        }
    }
}

int pve_form_encode(struct json_object *params, char **ret_s)
{
    _cleanup_free_ const char **keys = NULL;
    size_t n = 0, i;
    char *s = NULL;
    size_t size = 0;
    FILE *f;
    bool first = true;
    int r;

    if (params && (r = jobj_sorted_keys(params, &keys, &n)) < 0)
        return r;
    f = open_memstream(&s, &size);
    if (!f)
        return -ENOMEM;
    for (i = 0; i < n; i++) {
        struct json_object *v = json_object_object_get(params, keys[i]);
        char num[64];
        const char *str;
        switch (json_object_get_type(v)) {
        case json_type_null:
            continue;
        case json_type_boolean:
            str = json_object_get_boolean(v) ? "1" : "0";
            break;
        case json_type_int:
            snprintf(num, sizeof(num), "%" PRId64, json_object_get_int64(v));
            str = num;
            break;
        case json_type_double:
            snprintf(num, sizeof(num), "%.17g", json_object_get_double(v));
            str = num;
            break;
        case json_type_string:
            str = json_object_get_string(v);
            break;
        default:
            fclose(f);
            free(s);
            return -EINVAL;
        }
        if (!first)
            fputc('&', f);
        first = false;
        put_escaped(f, keys[i]);
        fputc('=', f);
        put_escaped(f, str);
    }
    if (fclose(f) != 0) {
        free(s);
        return -ENOMEM;
    }
    *ret_s = s;
    return 0;
}
