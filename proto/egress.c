/* Egress allow-lists: parsing, normal form and matching. See egress.h. */
#include "egress.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "macro.h"
#include "params-internal.h"

static bool is_digit(char c)
{
    return c >= '0' && c <= '9';
}

static char lower(char c)
{
    return c >= 'A' && c <= 'Z' ? (char)(c - 'A' + 'a') : c;
}

/* A decimal number of 1 to 5 digits, no leading zero, at most max, from s[*i]. */
static int parse_dec(const char *s, size_t len, size_t *i, unsigned max, unsigned *ret)
{
    unsigned v = 0;
    size_t start = *i;

    while (*i < len && is_digit(s[*i]) && *i - start < 5) {
        v = v * 10 + (unsigned)(s[*i] - '0');
        (*i)++;
    }
    if (*i == start || (*i < len && is_digit(s[*i])) || (s[start] == '0' && *i - start > 1) ||
        v > max)
        return -EINVAL;
    *ret = v;
    return 0;
}

static int parse_cidr(const char *s, size_t len, struct egress_entry *e, const char **ret_reason)
{
    size_t i = 0;
    unsigned v, prefix = 32, port = 0;
    uint32_t addr = 0;

    for (int k = 0; k < 4; k++) {
        if ((k > 0 && (i >= len || s[i++] != '.')) || parse_dec(s, len, &i, 255, &v) < 0) {
            *ret_reason = "not an IPv4 address (four decimal numbers 0-255, dotted)";
            return -EINVAL;
        }
        addr = addr << 8 | v;
    }
    if (i < len && s[i] == '/') {
        i++;
        if (parse_dec(s, len, &i, 32, &prefix) < 0) {
            *ret_reason = "the prefix length is not a number from 1 to 32";
            return -EINVAL;
        }
        if (prefix == 0) {
            *ret_reason = "a /0 prefix is not an allow-list entry (internet: true is)";
            return -EINVAL;
        }
    }
    if (i < len && s[i] == ':') {
        i++;
        if (parse_dec(s, len, &i, 65535, &port) < 0 || port == 0) {
            *ret_reason = "the port is not a number from 1 to 65535";
            return -EINVAL;
        }
    }
    if (i != len) {
        *ret_reason = "unexpected characters after the address (want ADDR[/PREFIX][:PORT])";
        return -EINVAL;
    }
    e->kind = EGRESS_CIDR;
    e->prefix = (uint8_t)prefix;
    e->addr = prefix == 32 ? addr : addr & ~(UINT32_MAX >> prefix);
    e->port = (uint16_t)port;
    return 0;
}

/* A host name: labels of 1-63 letters, digits and inner hyphens, at least two, the last
 * not all digits, 253 bytes at most; one final dot ignored. Lower-cased into out. */
static int parse_name(const char *s, size_t len, char *out, const char **ret_reason)
{
    size_t label = 0, labels = 0;
    bool digits_only = true;

    if (len > 0 && s[len - 1] == '.')
        len--;
    if (len == 0 || len > EGRESS_NAME_MAX) {
        *ret_reason = "a name has 1 to 253 characters";
        return -EINVAL;
    }
    for (size_t i = 0; i <= len; i++) {
        char c = i < len ? s[i] : '.';

        if (c == '.') {
            if (label == 0 || label > 63 || s[i - 1] == '-') {
                *ret_reason = "a name's labels have 1 to 63 characters and do not end with '-'";
                return -EINVAL;
            }
            labels++;
            label = 0;
        } else if (c == ':') {
            *ret_reason = "a name takes no port (the egress proxy serves HTTP and HTTPS)";
            return -EINVAL;
        } else if (is_digit(c) || (lower(c) >= 'a' && lower(c) <= 'z') || (c == '-' && label > 0)) {
            label++;
        } else {
            *ret_reason = "a name has letters, digits, inner '-' and dots only ('*.' only first)";
            return -EINVAL;
        }
        if (i < len)
            out[i] = lower(c);
    }
    out[len] = '\0';
    for (size_t i = len; i > 0 && out[i - 1] != '.'; i--)
        digits_only = digits_only && is_digit(out[i - 1]);
    if (labels < 2 || digits_only) {
        *ret_reason = "a name has at least two labels and a last label that is not a number";
        return -EINVAL;
    }
    return 0;
}

int egress_entry_parse(const char *s, size_t len, struct egress_entry *ret, const char **ret_reason)
{
    struct egress_entry e = {0};
    bool numeric = len > 0;
    int r;

    if (len == 0 || len > EGRESS_ENTRY_MAX) {
        *ret_reason = "an entry has 1 to 260 characters";
        return -EINVAL;
    }
    for (size_t i = 0; i < len; i++)
        numeric = numeric && (is_digit(s[i]) || s[i] == '.' || s[i] == '/' || s[i] == ':');
    if (numeric) {
        r = parse_cidr(s, len, &e, ret_reason);
    } else {
        e.kind = EGRESS_NAME;
        e.wildcard = len > 2 && s[0] == '*' && s[1] == '.';
        r = e.wildcard ? parse_name(s + 2, len - 2, e.name, ret_reason)
                       : parse_name(s, len, e.name, ret_reason);
    }
    if (r < 0)
        return r;
    *ret = e;
    return 0;
}

int egress_entry_format(const struct egress_entry *e, char *buf, size_t size)
{
    uint32_t a = e->addr;
    int n;

    if (e->kind == EGRESS_NAME)
        n = snprintf(buf, size, "%s%s", e->wildcard ? "*." : "", e->name);
    else if (e->prefix == 32 && e->port == 0)
        n = snprintf(buf, size, "%u.%u.%u.%u", a >> 24, a >> 16 & 255, a >> 8 & 255, a & 255);
    else if (e->prefix == 32)
        n = snprintf(buf, size, "%u.%u.%u.%u:%u", a >> 24, a >> 16 & 255, a >> 8 & 255, a & 255,
                     e->port);
    else if (e->port == 0)
        n = snprintf(buf, size, "%u.%u.%u.%u/%u", a >> 24, a >> 16 & 255, a >> 8 & 255, a & 255,
                     e->prefix);
    else
        n = snprintf(buf, size, "%u.%u.%u.%u/%u:%u", a >> 24, a >> 16 & 255, a >> 8 & 255, a & 255,
                     e->prefix, e->port);
    if (n < 0 || (size_t)n >= size)
        return -ENOBUFS;
    return n;
}

static bool entry_eq(const struct egress_entry *a, const struct egress_entry *b)
{
    if (a->kind != b->kind)
        return false;
    if (a->kind == EGRESS_CIDR)
        return a->addr == b->addr && a->prefix == b->prefix && a->port == b->port;
    return a->wildcard == b->wildcard && strcmp(a->name, b->name) == 0;
}

int egress_allow_parse(json_object *arr, const char *param, struct egress_allow *ret,
                       struct params_error *err)
{
    size_t n;
    const char *reason = NULL;

    if (!json_object_is_type(arr, json_type_array))
        return params_fail(err, param, "must be an array of strings");
    n = json_object_array_length(arr);
    if (n > EGRESS_ALLOW_MAX)
        return params_fail(err, param, "has more than %d entries", EGRESS_ALLOW_MAX);
    ret->n = 0;
    for (size_t i = 0; i < n; i++) {
        json_object *v = json_object_array_get_idx(arr, i);
        struct egress_entry *e = &ret->e[ret->n];

        if (!json_object_is_type(v, json_type_string))
            return params_fail(err, param, "entry %zu is not a string", i);
        if (egress_entry_parse(json_object_get_string(v), (size_t)json_object_get_string_len(v), e,
                               &reason) < 0)
            return params_fail(err, param, "entry %zu: %s", i, reason);
        for (size_t k = 0; k < ret->n; k++)
            if (entry_eq(&ret->e[k], e))
                return params_fail(err, param, "entry %zu repeats entry %zu", i, k);
        ret->n++;
    }
    return 0;
}

bool egress_allows_addr(const struct egress_allow *a, uint32_t addr, uint16_t port)
{
    for (size_t i = 0; i < a->n; i++) {
        const struct egress_entry *e = &a->e[i];
        uint32_t mask = e->prefix == 32 ? UINT32_MAX : ~(UINT32_MAX >> e->prefix);

        if (e->kind == EGRESS_CIDR && (addr & mask) == e->addr && (e->port == 0 || e->port == port))
            return true;
    }
    return false;
}

bool egress_allows_name(const struct egress_allow *a, const char *host, size_t len)
{
    char name[EGRESS_NAME_MAX + 1];
    struct egress_entry probe;
    const char *reason;

    /* the same checks as an entry's name: no address, no port, no odd characters */
    if (len > 0 && host[0] == '*')
        return false;
    if (egress_entry_parse(host, len, &probe, &reason) < 0 || probe.kind != EGRESS_NAME)
        return false;
    memcpy(name, probe.name, sizeof(name));
    len = strlen(name);
    for (size_t i = 0; i < a->n; i++) {
        const struct egress_entry *e = &a->e[i];
        size_t el;

        if (e->kind != EGRESS_NAME)
            continue;
        el = strlen(e->name);
        if (!e->wildcard && strcmp(name, e->name) == 0)
            return true;
        if (e->wildcard && len > el + 1 && name[len - el - 1] == '.' &&
            strcmp(name + len - el, e->name) == 0)
            return true;
    }
    return false;
}

bool egress_has_names(const struct egress_allow *a)
{
    for (size_t i = 0; i < a->n; i++)
        if (a->e[i].kind == EGRESS_NAME)
            return true;
    return false;
}

int egress_allow_normal(json_object *arr, const char *param, json_object **ret,
                        struct params_error *err)
{
    _cleanup_free_ struct egress_allow *a = malloc(sizeof *a);
    json_object *out;
    char buf[EGRESS_ENTRY_MAX + 1];
    int r;

    if (!a)
        return -ENOMEM;
    r = egress_allow_parse(arr, param, a, err);
    if (r < 0)
        return r;
    if (a->n == 0)
        return params_fail(err, param, "must hold at least one entry (internet: false is none)");
    out = json_object_new_array_ext((int)a->n);
    if (!out)
        return -ENOMEM;
    for (size_t i = 0; i < a->n; i++) {
        json_object *s;

        if (egress_entry_format(&a->e[i], buf, sizeof buf) < 0 ||
            !(s = json_object_new_string(buf)) || json_object_array_add(out, s) < 0) {
            json_object_put(out);
            return -ENOMEM;
        }
    }
    *ret = out;
    return 0;
}

int egress_internet_param(json_object *params, bool *ret_on, json_object **ret_allow,
                          struct params_error *err)
{
    json_object *v = NULL, *arr = NULL;

    if (!json_object_object_get_ex(params, "internet", &v) ||
        json_object_is_type(v, json_type_null))
        return 0;
    if (json_object_is_type(v, json_type_boolean)) {
        *ret_on = json_object_get_boolean(v);
        return 0;
    }
    if (!json_object_is_type(v, json_type_object) || json_object_object_length(v) != 1 ||
        !json_object_object_get_ex(v, "allow", &arr))
        return params_fail(err, "internet", "must be a boolean or {\"allow\": [...]}");
    *ret_on = true;
    return egress_allow_normal(arr, "internet.allow", ret_allow, err);
}

/* The address ranges that are not the public internet (docs/sandbox-setup.md, the nomatch
 * entries of sandbox-public): "this" network, private, shared, loopback, link-local, IETF
 * protocol assignments, benchmarking, multicast and reserved. */
static const struct {
    uint32_t addr;
    uint8_t prefix;
} non_public[] = {
    {0x00000000u, 8},  {0x0a000000u, 8},  {0x64400000u, 10}, {0x7f000000u, 8},
    {0xa9fe0000u, 16}, {0xac100000u, 12}, {0xc0000000u, 24}, {0xc0a80000u, 16},
    {0xc6120000u, 15}, {0xe0000000u, 4},  {0xf0000000u, 4},
};

static uint32_t prefix_mask(unsigned prefix)
{
    return prefix == 0 ? 0 : ~(UINT32_MAX >> prefix) & UINT32_MAX;
}

bool egress_entry_public(const struct egress_entry *e)
{
    if (e->kind != EGRESS_CIDR)
        return true;
    for (size_t i = 0; i < sizeof(non_public) / sizeof(non_public[0]); i++) {
        uint8_t p = non_public[i].prefix;

        if ((e->addr & prefix_mask(p)) == non_public[i].addr || /* inside the range */
            (e->prefix <= p && (non_public[i].addr & prefix_mask(e->prefix)) == e->addr))
            return false; /* or holding it */
    }
    return true;
}
