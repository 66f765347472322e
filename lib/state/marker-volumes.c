/* Volume lines of a container's description. See marker.h. */
#include "macro.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "marker.h"

#define VOLUME_VERSION "v1"
#define CHECK_LEN 8
#define VOLUMES_MAX (MARKER_VOLUME_MP_MAX + 1)

static bool is_sep(char c)
{
    return c == ' ' || c == '\t' || c == '+';
}

static bool volume_valid(const struct marker_volume *v)
{
    return v && id_is_valid(v->name) && v->owner_uid != (uid_t)-1 && v->size_gb >= 1 &&
           v->size_gb <= MARKER_VOLUME_SIZE_MAX && v->mp <= MARKER_VOLUME_MP_MAX;
}

static int format_body(const struct marker_volume *v, char *buf, size_t n)
{
    int k =
        snprintf(buf, n, MARKER_VOLUME_PREFIX VOLUME_VERSION " name=%s owner=%u size=%u key=mp%u",
                 v->name, (unsigned)v->owner_uid, (unsigned)v->size_gb, v->mp);

    return k < 0 ? -EINVAL : (size_t)k >= n ? -ENOBUFS : k;
}

static int body_check(const char *body, char ret[CHECK_LEN + 1])
{
    char hex[SHA256_HEX_SIZE];
    int r = sha256_hex(body, strlen(body), hex);

    if (r < 0)
        return r;
    memcpy(ret, hex, CHECK_LEN);
    ret[CHECK_LEN] = '\0';
    return 0;
}

int marker_volume_format(const struct marker_volume *v, char *buf, size_t n)
{
    char body[MARKER_VOLUME_LINE_MAX], check[CHECK_LEN + 1];
    int r;

    if (!volume_valid(v) || !buf)
        return -EINVAL;
    r = format_body(v, body, sizeof body);
    if (r < 0)
        return r;
    r = body_check(body, check);
    if (r < 0)
        return r;
    r = snprintf(buf, n, "%s check=%s", body, check);
    return r < 0 ? -EINVAL : (size_t)r >= n ? -ENOBUFS : 0;
}

static bool is_candidate(const char *p, size_t n)
{
    size_t l = strlen(MARKER_VOLUME_PREFIX);

    return n >= l && memcmp(p, MARKER_VOLUME_PREFIX, l) == 0;
}

/* A plain decimal (no sign, no leading zero) of at most max. */
static int parse_num(const char *v, size_t n, uint64_t max, uint64_t *ret)
{
    uint64_t x = 0;

    if (n == 0 || n > 20 || (n > 1 && v[0] == '0'))
        return -EBADMSG;
    for (size_t i = 0; i < n; i++) {
        if (v[i] < '0' || v[i] > '9')
            return -EBADMSG;
        x = x * 10 + (uint64_t)(v[i] - '0');
        if (x > max)
            return -EBADMSG;
    }
    *ret = x;
    return 0;
}

/* The next token of [*p, e) as its start and length; false at the end. */
static bool next_token(const char **p, const char *e, const char **ret, size_t *ret_n)
{
    const char *s = *p, *t;

    while (s < e && is_sep(*s))
        s++;
    if (s == e)
        return false;
    t = s;
    while (t < e && !is_sep(*t))
        t++;
    *ret = s;
    *ret_n = (size_t)(t - s);
    *p = t;
    return true;
}

/* The value of token tok (length n) when it is key=value. */
static const char *value_of(const char *tok, size_t n, const char *key, size_t *ret_n)
{
    size_t k = strlen(key);

    if (n <= k + 1 || memcmp(tok, key, k) != 0 || tok[k] != '=')
        return NULL;
    *ret_n = n - k - 1;
    return tok + k + 1;
}

static const char *const FIELDS[] = {"name", "owner", "size", "key", "check"};

static int parse_fields(const char *p, const char *e, struct marker_volume *v,
                        char check[CHECK_LEN + 1])
{
    for (size_t i = 0; i < ELEMENTSOF(FIELDS); i++) {
        const char *tok, *val;
        size_t tn, vn = 0;
        uint64_t x;

        if (!next_token(&p, e, &tok, &tn) || !(val = value_of(tok, tn, FIELDS[i], &vn)))
            return -EBADMSG;
        if (i == 0) {
            if (vn > ID_MAX)
                return -EBADMSG;
            memcpy(v->name, val, vn);
            v->name[vn] = '\0';
        } else if (i == 1) {
            if (parse_num(val, vn, (uid_t)-2, &x) < 0)
                return -EBADMSG;
            v->owner_uid = (uid_t)x;
        } else if (i == 2) {
            if (parse_num(val, vn, MARKER_VOLUME_SIZE_MAX, &x) < 0)
                return -EBADMSG;
            v->size_gb = (uint32_t)x;
        } else if (i == 3) {
            if (vn < 3 || memcmp(val, "mp", 2) != 0 ||
                parse_num(val + 2, vn - 2, MARKER_VOLUME_MP_MAX, &x) < 0)
                return -EBADMSG;
            v->mp = (unsigned)x;
        } else {
            if (vn != CHECK_LEN)
                return -EBADMSG;
            memcpy(check, val, CHECK_LEN);
            check[CHECK_LEN] = '\0';
        }
    }
    {
        const char *tok;
        size_t tn;

        if (next_token(&p, e, &tok, &tn))
            return -EBADMSG;
    }
    return 0;
}

/* A trimmed candidate line into *ret. */
static int parse_line(const char *p, size_t n, struct marker_volume *ret)
{
    char body[MARKER_VOLUME_LINE_MAX], got[CHECK_LEN + 1], want[CHECK_LEN + 1];
    const char *e = p + n, *tok;
    struct marker_volume v = {};
    size_t tn;
    int r;

    if (n > MARKER_VOLUME_LINE_MAX * 2)
        return -EBADMSG;
    p += strlen(MARKER_VOLUME_PREFIX);
    if (!next_token(&p, e, &tok, &tn) || tn < 2 || tok[0] != 'v')
        return -EBADMSG;
    if (tn != strlen(VOLUME_VERSION) || memcmp(tok, VOLUME_VERSION, tn) != 0)
        return -EPROTONOSUPPORT;
    r = parse_fields(p, e, &v, got);
    if (r < 0)
        return r;
    if (!volume_valid(&v))
        return -EBADMSG;
    r = format_body(&v, body, sizeof body);
    if (r < 0)
        return -EBADMSG;
    r = body_check(body, want);
    if (r < 0)
        return r;
    if (memcmp(got, want, CHECK_LEN) != 0)
        return -EBADMSG;
    *ret = v;
    return 0;
}

typedef int (*line_fn)(const char *p, size_t n, void *userdata);

static int for_each_line(const char *s, line_fn fn, void *userdata)
{
    for (const char *p = s; p && *p;) {
        const char *nl = strchr(p, '\n');
        size_t n = nl ? (size_t)(nl - p) : strlen(p);
        int r = fn(p, n, userdata);

        if (r < 0)
            return r;
        p = nl ? nl + 1 : NULL;
    }
    return 0;
}

struct parse_ctx {
    struct marker_volume *v;
    size_t n;
};

static int parse_cb(const char *p, size_t n, void *userdata)
{
    struct parse_ctx *c = userdata;
    struct marker_volume v;
    size_t tn;
    const char *t = marker_line_trim(p, n, &tn);
    int r;

    if (!is_candidate(t, tn))
        return 0;
    r = parse_line(t, tn, &v);
    if (r < 0)
        return r;
    if (c->n >= VOLUMES_MAX)
        return -EBADMSG;
    for (size_t i = 0; i < c->n; i++)
        if (strcmp(c->v[i].name, v.name) == 0 || c->v[i].mp == v.mp)
            return -EBADMSG;
    if (!c->v) {
        c->v = calloc(VOLUMES_MAX, sizeof *c->v);
        if (!c->v)
            return -ENOMEM;
    }
    c->v[c->n++] = v;
    return 0;
}

int marker_volumes_parse(const char *description, struct marker_volume **ret, size_t *ret_n)
{
    struct parse_ctx c = {};
    int r;

    if (!ret || !ret_n)
        return -EINVAL;
    if (description && strnlen(description, MARKER_INPUT_MAX + 1) > MARKER_INPUT_MAX)
        return -EMSGSIZE;
    r = for_each_line(description, parse_cb, &c);
    if (r < 0) {
        free(c.v);
        return r;
    }
    *ret = c.v;
    *ret_n = c.n;
    return 0;
}

struct rewrite_ctx {
    const char *drop; /* the name whose line goes */
    char *out;
    size_t len, blank; /* blank: empty lines held back (dropped when trailing) */
    int error;
};

static int append(struct rewrite_ctx *c, const char *p, size_t n)
{
    size_t need = c->len + c->blank + n + 2;

    if (need > MARKER_DESCRIPTION_MAX + 1)
        return -E2BIG;
    for (; c->blank > 0; c->blank--)
        c->out[c->len++] = '\n';
    memcpy(c->out + c->len, p, n);
    c->len += n;
    c->out[c->len++] = '\n';
    c->out[c->len] = '\0';
    return 0;
}

static int rewrite_cb(const char *p, size_t n, void *userdata)
{
    struct rewrite_ctx *c = userdata;
    struct marker_volume v;
    size_t tn;
    const char *t = marker_line_trim(p, n, &tn);

    if (n > 0 && p[n - 1] == '\r')
        n--;
    if (tn == 0 && n == 0) {
        c->blank++;
        return 0;
    }
    if (is_candidate(t, tn) && parse_line(t, tn, &v) >= 0 && strcmp(v.name, c->drop) == 0)
        return 0;
    return append(c, p, n);
}

/* description without the line of name, then line (when not NULL): the line of a volume
 * on key mp (-EEXIST when another volume's line has that key). */
static int rewrite(const char *description, const char *name, const char *line, unsigned mp,
                   char **ret)
{
    _cleanup_free_ struct marker_volume *all = NULL;
    struct rewrite_ctx c = {.drop = name};
    size_t n = 0;
    int r;

    r = marker_volumes_parse(description, &all, &n);
    if (r < 0)
        return r;
    for (size_t i = 0; line && i < n; i++)
        if (all[i].mp == mp && strcmp(all[i].name, name) != 0)
            return -EEXIST;
    c.out = malloc(MARKER_DESCRIPTION_MAX + 2);
    if (!c.out)
        return -ENOMEM;
    c.out[0] = '\0';
    r = for_each_line(description, rewrite_cb, &c);
    if (r >= 0 && line) {
        c.blank = 0;
        r = append(&c, line, strlen(line));
    }
    if (r >= 0 && c.len > MARKER_DESCRIPTION_MAX)
        r = -E2BIG;
    if (r < 0) {
        free(c.out);
        return r;
    }
    *ret = c.out;
    return 0;
}

int marker_volume_set(const char *description, const struct marker_volume *v,
                      char **ret_description)
{
    char line[MARKER_VOLUME_LINE_MAX];
    int r;

    if (!ret_description)
        return -EINVAL;
    r = marker_volume_format(v, line, sizeof line);
    if (r < 0)
        return r;
    return rewrite(description, v->name, line, v->mp, ret_description);
}

int marker_volume_remove(const char *description, const char *name, char **ret_description)
{
    if (!id_is_valid(name) || !ret_description)
        return -EINVAL;
    return rewrite(description, name, NULL, 0, ret_description);
}
