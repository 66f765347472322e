/* The labels line of a container's description, and whole descriptions. See marker.h. */
#include "macro.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "marker.h"
#include "b64.h"

#define LABELS_VERSION "v1"
#define CHECK_LEN 8
#define LABELS_RAW_MAX 8192 /* decoded data accepted */

static int line_check(const char *body, char ret[CHECK_LEN + 1])
{
    char hex[SHA256_HEX_SIZE];
    int r = sha256_hex(body, strlen(body), hex);

    if (r < 0)
        return r;
    memcpy(ret, hex, CHECK_LEN);
    ret[CHECK_LEN] = '\0';
    return 0;
}

/* base64url without padding, in place over a standard base64 string. */
static void to_url(char *s)
{
    size_t n = strlen(s);

    while (n > 0 && s[n - 1] == '=')
        s[--n] = '\0';
    for (char *p = s; *p; p++)
        *p = *p == '+' ? '-' : *p == '/' ? '_' : *p;
}

int marker_labels_format(const char *sandbox, json_object *labels, char **ret_line)
{
    _cleanup_free_ const char **keys = NULL;
    _cleanup_free_ char *raw = NULL, *b = NULL, *body = NULL;
    char check[CHECK_LEN + 1];
    size_t n_keys = 0, len = 0;
    int r;

    if (!id_is_valid(sandbox) || !ret_line)
        return -EINVAL;
    if (!labels || json_object_object_length(labels) == 0) {
        *ret_line = NULL;
        return 0;
    }
    r = jobj_sorted_keys(labels, &keys, &n_keys);
    if (r < 0)
        return r;
    raw = malloc(LABELS_RAW_MAX);
    if (!raw)
        return -ENOMEM;
    for (size_t i = 0; i < n_keys; i++) {
        json_object *v = json_object_object_get(labels, keys[i]);
        const char *val;
        size_t kl = strlen(keys[i]), vl;

        if (!json_object_is_type(v, json_type_string))
            return -EINVAL;
        val = json_object_get_string(v);
        vl = strlen(val);
        if (kl == 0 || len + kl + vl + 2 > LABELS_RAW_MAX)
            return -E2BIG;
        memcpy(raw + len, keys[i], kl + 1);
        len += kl + 1;
        memcpy(raw + len, val, vl + 1);
        len += vl + 1;
    }
    r = b64_encode(raw, len, &b, NULL);
    if (r < 0)
        return r;
    to_url(b);
    if (asprintf(&body, MARKER_LABELS_PREFIX LABELS_VERSION " sandbox=%s data=%s", sandbox, b) < 0)
        return -ENOMEM;
    r = line_check(body, check);
    if (r < 0)
        return r;
    if (strlen(body) + strlen(" check=") + CHECK_LEN > MARKER_LABELS_LINE_MAX)
        return -E2BIG;
    if (asprintf(ret_line, "%s check=%s", body, check) < 0)
        return -ENOMEM;
    return 0;
}

/* Decodes base64url data into a labels object. */
static int labels_decode(const char *d, size_t n, json_object **ret)
{
    _cleanup_free_ char *s = NULL;
    _cleanup_free_ uint8_t *raw = NULL;
    size_t rl = 0, pad = (4 - n % 4) % 4;
    json_object *o;

    if (n % 4 == 1 || n > LABELS_RAW_MAX * 2)
        return -EBADMSG;
    s = malloc(n + pad + 1);
    if (!s)
        return -ENOMEM;
    for (size_t i = 0; i < n; i++)
        s[i] = d[i] == '-' ? '+' : d[i] == '_' ? '/' : d[i];
    memset(s + n, '=', pad);
    s[n + pad] = '\0';
    if (b64_decode(s, n + pad, &raw, &rl) < 0)
        return -EBADMSG;
    o = json_object_new_object();
    if (!o)
        return -ENOMEM;
    for (size_t i = 0; i < rl;) {
        const char *k = (const char *)raw + i, *v;
        size_t kl = strnlen(k, rl - i), vl;

        if (kl == 0 || i + kl + 1 >= rl)
            goto bad;
        v = k + kl + 1;
        vl = strnlen(v, rl - i - kl - 1);
        if (i + kl + 1 + vl >= rl)
            goto bad;
        json_object_object_add(o, k, json_object_new_string(v));
        i += kl + vl + 2;
    }
    *ret = o;
    return 0;
bad:
    json_object_put(o);
    return -EBADMSG;
}

/* The line (trimmed, one leading '#' allowed) for sandbox in description, or NULL. */
static const char *find_line(const char *desc, const char *sandbox, size_t *ret_n)
{
    char want[ID_MAX + 64];

    snprintf(want, sizeof want, MARKER_LABELS_PREFIX LABELS_VERSION " sandbox=%s ", sandbox);
    for (const char *p = desc; p && *p;) {
        const char *nl = strchr(p, '\n');
        size_t n;
        const char *q = marker_line_trim(p, nl ? (size_t)(nl - p) : strlen(p), &n);

        if (n > strlen(want) && memcmp(q, want, strlen(want)) == 0) {
            *ret_n = n;
            return q;
        }
        p = nl ? nl + 1 : NULL;
    }
    return NULL;
}

int marker_labels_parse(const char *description, const char *sandbox, json_object **ret)
{
    _cleanup_free_ char *line = NULL;
    const char *p, *data, *chk;
    char want[CHECK_LEN + 1];
    size_t n = 0;
    int r;

    if (!id_is_valid(sandbox) || !ret)
        return -EINVAL;
    p = description && strnlen(description, MARKER_INPUT_MAX + 1) <= MARKER_INPUT_MAX
            ? find_line(description, sandbox, &n)
            : NULL;
    if (!p) {
        *ret = json_object_new_object();
        return *ret ? 0 : -ENOMEM;
    }
    if (n > MARKER_LABELS_LINE_MAX)
        return -EBADMSG;
    line = strndup(p, n);
    if (!line)
        return -ENOMEM;
    chk = strstr(line, " check=");
    data = strstr(line, " data=");
    if (!chk || !data || data > chk || strlen(chk + 7) != CHECK_LEN)
        return -EBADMSG;
    line[chk - line] = '\0';
    r = line_check(line, want);
    if (r < 0)
        return r;
    if (memcmp(want, chk + 7, CHECK_LEN) != 0)
        return -EBADMSG;
    data += strlen(" data=");
    return labels_decode(data, strlen(data), ret);
}

int marker_description(const struct marker *m, json_object *labels, char **ret_description)
{
    _cleanup_free_ char *desc = NULL, *line = NULL, *out = NULL;
    int r;

    r = marker_set(NULL, m, &desc);
    if (r >= 0)
        r = marker_labels_format(m->sandbox, labels, &line);
    if (r < 0)
        return r;
    if (!line) {
        *ret_description = TAKE_PTR(desc);
        return 0;
    }
    if (asprintf(&out, "%s%s\n", desc, line) < 0)
        return -ENOMEM;
    if (strlen(out) > MARKER_DESCRIPTION_MAX)
        return -E2BIG;
    *ret_description = TAKE_PTR(out);
    return 0;
}
