#include "marker.h"

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "macro.h"

#define COMPONENT "marker"
#define CHECK_LEN 8

static bool is_blank(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f';
}

static bool is_sep(char c)
{
    return c == ' ' || c == '\t' || c == '+';
}

/* The canonical line without " check=...". */
static int format_body(const struct marker *m, char *buf, size_t n)
{
    int k;

    if (!id_is_valid(m->instance) || !id_is_valid(m->sandbox))
        return -EINVAL;
    if (m->owner_uid == (uid_t)-1 || m->created < 0 || m->expires < 0)
        return -EINVAL;
    if (m->key[0] && !hex_is_valid(m->key, 64))
        return -EINVAL;
    if (m->params[0] && !hex_is_valid(m->params, 64))
        return -EINVAL;
    if (m->hostkey[0] && !hex_is_valid(m->hostkey, 64))
        return -EINVAL;
    if (m->template[0] && !id_is_valid(m->template))
        return -EINVAL;
    if ((m->is_template || m->published) && (!m->template[0] || m->pool))
        return -EINVAL;
    if ((m->published || m->replica) && !m->is_template)
        return -EINVAL;
    if (m->published && m->replica)
        return -EINVAL;
    k = snprintf(buf, n,
                 MARKER_PREFIX "v%d instance=%s sandbox=%s owner=%" PRIu32 " created=%" PRId64
                               " expires=%" PRId64 "%s%s%s%s%s%s%s%s%s%s%s%s%s",
                 MARKER_VERSION, m->instance, m->sandbox, (uint32_t)m->owner_uid, m->created,
                 m->expires, m->key[0] ? " key=" : "", m->key, m->params[0] ? " params=" : "",
                 m->params, m->hostkey[0] ? " hostkey=" : "", m->hostkey,
                 m->template[0] ? " template=" : "", m->template, m->pool ? " pool=1" : "",
                 m->is_template ? " tmpl=1" : "", m->published ? " pub=1" : "",
                 m->replica ? " repl=1" : "", m->paused ? " paused=1" : "");
    if (k < 0)
        return -EINVAL;
    if ((size_t)k >= n)
        return -ENOBUFS;
    return k;
}

static int compute_check(const char *body, char ret[CHECK_LEN + 1])
{
    char hex[SHA256_HEX_SIZE];
    int r;

    _Static_assert(CHECK_LEN < SHA256_HEX_SIZE, "the check is a prefix of the digest");
    r = sha256_hex(body, strlen(body), hex);
    if (r < 0)
        return r;
    memcpy(ret, hex, CHECK_LEN);
    ret[CHECK_LEN] = '\0';
    return 0;
}

int marker_format(const struct marker *m, char *buf, size_t n)
{
    char body[MARKER_LINE_MAX];
    char check[CHECK_LEN + 1];
    int k, r;

    if (!m || !buf)
        return -EINVAL;
    k = format_body(m, body, sizeof(body));
    if (k < 0)
        return k;
    r = compute_check(body, check);
    if (r < 0)
        return r;
    if ((size_t)k + strlen(" check=") + CHECK_LEN + 1 > MARKER_LINE_MAX)
        return -EINVAL;
    if ((size_t)snprintf(buf, n, "%s check=%s", body, check) >= n)
        return -ENOBUFS;
    return 0;
}

const char *marker_line_trim(const char *p, size_t n, size_t *ret_n)
{
    while (n > 0 && is_blank(p[n - 1]))
        n--;
    while (n > 0 && is_blank(*p))
        p++, n--;
    if (n > 0 && *p == '#') {
        p++, n--;
        while (n > 0 && is_blank(*p))
            p++, n--;
    }
    *ret_n = n;
    return p;
}

/* A line, trimmed of blanks and one leading '#'. */
struct span {
    const char *p;
    size_t n;
};

static struct span trim_line(const char *p, size_t n)
{
    struct span s;

    s.p = marker_line_trim(p, n, &s.n);
    return s;
}

static bool is_candidate(struct span s)
{
    size_t plen = strlen(MARKER_PREFIX);
    return s.n >= plen && memcmp(s.p, MARKER_PREFIX, plen) == 0;
}

static int parse_u64(const char *v, size_t n, uint64_t max, uint64_t *ret)
{
    uint64_t x = 0;

    if (n == 0 || n > 20 || (n > 1 && v[0] == '0'))
        return -EBADMSG;
    for (size_t i = 0; i < n; i++) {
        if (v[i] < '0' || v[i] > '9')
            return -EBADMSG;
        if (x > (max - (uint64_t)(v[i] - '0')) / 10)
            return -EBADMSG;
        x = x * 10 + (uint64_t)(v[i] - '0');
    }
    *ret = x;
    return 0;
}

static int copy_id(char *dst, const char *v, size_t n)
{
    if (n == 0 || n > ID_MAX)
        return -EBADMSG;
    memcpy(dst, v, n);
    dst[n] = '\0';
    return id_is_valid(dst) ? 0 : -EBADMSG;
}

static int copy_hex(char *dst, const char *v, size_t n, size_t want)
{
    if (n != want)
        return -EBADMSG;
    memcpy(dst, v, n);
    dst[n] = '\0';
    return hex_is_valid(dst, want) ? 0 : -EBADMSG;
}

enum {
    F_INSTANCE = 1 << 0,
    F_SANDBOX = 1 << 1,
    F_OWNER = 1 << 2,
    F_CREATED = 1 << 3,
    F_EXPIRES = 1 << 4,
    F_KEY = 1 << 5,
    F_PARAMS = 1 << 6,
    F_CHECK = 1 << 7,
    F_HOSTKEY = 1 << 8,
    F_TEMPLATE = 1 << 9,
    F_POOL = 1 << 10,
    F_TMPL = 1 << 11,
    F_PUB = 1 << 12,
    F_PAUSED = 1 << 13,
    F_REPL = 1 << 14,
    F_REQUIRED = F_INSTANCE | F_SANDBOX | F_OWNER | F_CREATED | F_EXPIRES | F_CHECK,
};

/* One key=value field of a marker line into m (the check into check): *ret_bit is the
 * field's F_* bit; -EBADMSG for an unknown key or a bad value. */
static int parse_field(struct marker *m, char check[CHECK_LEN + 1], const char *tok, size_t klen,
                       const char *val, size_t vlen, unsigned *ret_bit)
{
    uint64_t v = 0;
    unsigned bit;
    int r;

#define KEY_IS(name) (klen == strlen(name) && memcmp(tok, name, klen) == 0)
    if (KEY_IS("instance")) {
        bit = F_INSTANCE;
        r = copy_id(m->instance, val, vlen);
    } else if (KEY_IS("sandbox")) {
        bit = F_SANDBOX;
        r = copy_id(m->sandbox, val, vlen);
    } else if (KEY_IS("owner")) {
        bit = F_OWNER;
        r = parse_u64(val, vlen, UINT32_MAX - 1, &v);
        m->owner_uid = (uid_t)v;
    } else if (KEY_IS("created")) {
        bit = F_CREATED;
        r = parse_u64(val, vlen, INT64_MAX, &v);
        m->created = (int64_t)v;
    } else if (KEY_IS("expires")) {
        bit = F_EXPIRES;
        r = parse_u64(val, vlen, INT64_MAX, &v);
        m->expires = (int64_t)v;
    } else if (KEY_IS("key")) {
        bit = F_KEY;
        r = copy_hex(m->key, val, vlen, 64);
    } else if (KEY_IS("params")) {
        bit = F_PARAMS;
        r = copy_hex(m->params, val, vlen, 64);
    } else if (KEY_IS("hostkey")) {
        bit = F_HOSTKEY;
        r = copy_hex(m->hostkey, val, vlen, 64);
    } else if (KEY_IS("template")) {
        bit = F_TEMPLATE;
        r = copy_id(m->template, val, vlen);
    } else if (KEY_IS("pool")) {
        bit = F_POOL;
        r = vlen == 1 && val[0] == '1' ? 0 : -EBADMSG;
        m->pool = true;
    } else if (KEY_IS("tmpl")) {
        bit = F_TMPL;
        r = vlen == 1 && val[0] == '1' ? 0 : -EBADMSG;
        m->is_template = true;
    } else if (KEY_IS("pub")) {
        bit = F_PUB;
        r = vlen == 1 && val[0] == '1' ? 0 : -EBADMSG;
        m->published = true;
    } else if (KEY_IS("repl")) {
        bit = F_REPL;
        r = vlen == 1 && val[0] == '1' ? 0 : -EBADMSG;
        m->replica = true;
    } else if (KEY_IS("paused")) {
        bit = F_PAUSED;
        r = vlen == 1 && val[0] == '1' ? 0 : -EBADMSG;
        m->paused = true;
    } else if (KEY_IS("check")) {
        bit = F_CHECK;
        r = copy_hex(check, val, vlen, CHECK_LEN);
    } else {
        return -EBADMSG;
    }
#undef KEY_IS
    if (r < 0)
        return r;
    *ret_bit = bit;
    return 0;
}

static int parse_line(struct span s, struct marker *ret)
{
    struct marker m = {0};
    char check[CHECK_LEN + 1] = "", want[CHECK_LEN + 1];
    char body[MARKER_LINE_MAX];
    const char *p, *end = s.p + s.n;
    unsigned seen = 0;
    uint64_t v;
    int r;

    if (s.n > MARKER_LINE_MAX)
        return -EBADMSG;
    p = s.p + strlen(MARKER_PREFIX);
    if (p >= end || *p != 'v')
        return -EBADMSG;
    p++;
    {
        const char *q = p;
        while (q < end && !is_sep(*q))
            q++;
        if (parse_u64(p, (size_t)(q - p), 1000000, &v) < 0)
            return -EBADMSG;
        if (v != MARKER_VERSION)
            return -EPROTONOSUPPORT;
        p = q;
    }

    for (;;) {
        const char *tok, *eq, *val;
        size_t klen, vlen;
        unsigned bit = 0;

        if (p < end && !is_sep(*p))
            return -EBADMSG;
        while (p < end && is_sep(*p))
            p++;
        if (p >= end)
            break;
        tok = p;
        while (p < end && !is_sep(*p))
            p++;
        eq = memchr(tok, '=', (size_t)(p - tok));
        if (!eq)
            return -EBADMSG;
        klen = (size_t)(eq - tok);
        val = eq + 1;
        vlen = (size_t)(p - val);

        r = parse_field(&m, check, tok, klen, val, vlen, &bit);
        if (r < 0 || (seen & bit))
            return -EBADMSG;
        seen |= bit;
    }
    if ((seen & F_REQUIRED) != F_REQUIRED)
        return -EBADMSG;

    /* The check covers the canonical form, so separators do not matter but
     * every value does. */
    r = format_body(&m, body, sizeof(body));
    if (r < 0)
        return -EBADMSG;
    r = compute_check(body, want);
    if (r < 0)
        return r;
    if (strcmp(want, check) != 0)
        return -EBADMSG;
    *ret = m;
    return 0;
}

/* Calls fn for each line (without '\n'); stops on a non-zero return. */
typedef int (*line_fn)(const char *p, size_t n, void *userdata);

static int for_each_line(const char *s, line_fn fn, void *userdata)
{
    const char *p = s;

    while (*p) {
        const char *nl = strchr(p, '\n');
        size_t n = nl ? (size_t)(nl - p) : strlen(p);
        int r = fn(p, n, userdata);
        if (r != 0)
            return r;
        if (!nl)
            break;
        p = nl + 1;
    }
    return 0;
}

struct find_ctx {
    unsigned candidates;
    struct span first;
};

static int find_cb(const char *p, size_t n, void *userdata)
{
    struct find_ctx *c = userdata;
    struct span s = trim_line(p, n);

    if (is_candidate(s)) {
        if (c->candidates++ == 0)
            c->first = s;
    }
    return 0;
}

int marker_parse(const char *description, struct marker *ret)
{
    struct find_ctx c = {0};
    struct marker m;
    int r;

    if (!ret)
        return -EINVAL;
    if (!description)
        return -ENOENT;
    if (strnlen(description, MARKER_INPUT_MAX + 1) > MARKER_INPUT_MAX)
        return -EMSGSIZE;
    (void)for_each_line(description, find_cb, &c);
    if (c.candidates == 0)
        return -ENOENT;
    if (c.candidates > 1) {
        log_debug(COMPONENT, "%u marker lines in one description: not trusted", c.candidates);
        return -EBADMSG;
    }
    r = parse_line(c.first, &m);
    if (r < 0) {
        log_debug_errno(r, COMPONENT, "marker line does not parse: %m");
        return r;
    }
    *ret = m;
    return 0;
}

struct set_ctx {
    char *buf;
    size_t len;
    size_t cap;
    size_t len_nonblank; /* length up to the end of the last non-empty line */
    const char *line;
    bool placed;
    bool overflow;
};

static void append(struct set_ctx *c, const char *p, size_t n)
{
    if (c->overflow)
        return;
    if (c->len + n > c->cap) {
        c->overflow = true;
        return;
    }
    memcpy(c->buf + c->len, p, n);
    c->len += n;
}

static int set_cb(const char *p, size_t n, void *userdata)
{
    struct set_ctx *c = userdata;
    struct span s = trim_line(p, n);

    if (is_candidate(s)) {
        if (c->placed)
            return 0;
        c->placed = true;
        append(c, c->line, strlen(c->line));
    } else {
        append(c, p, n);
    }
    append(c, "\n", 1);
    /* Proxmox keeps no trailing empty lines: drop them too. */
    if (n > 0 || is_candidate(s))
        c->len_nonblank = c->len;
    return c->overflow ? -E2BIG : 0;
}

int marker_set(const char *description, const struct marker *m, char **ret_description)
{
    char line[MARKER_LINE_MAX];
    _cleanup_free_ char *buf = NULL;
    struct set_ctx c = {0};
    int r;

    if (!m || !ret_description)
        return -EINVAL;
    r = marker_format(m, line, sizeof(line));
    if (r < 0)
        return r;
    if (!description)
        description = "";
    if (strnlen(description, MARKER_INPUT_MAX + 1) > MARKER_INPUT_MAX)
        return -E2BIG;
    buf = malloc(MARKER_DESCRIPTION_MAX + 1);
    if (!buf)
        return -ENOMEM;
    c.buf = buf;
    c.cap = MARKER_DESCRIPTION_MAX;
    c.line = line;
    r = for_each_line(description, set_cb, &c);
    if (r < 0)
        return r;
    c.len = c.len_nonblank;
    if (!c.placed) {
        append(&c, line, strlen(line));
        append(&c, "\n", 1);
        if (c.overflow)
            return -E2BIG;
    }
    buf[c.len] = '\0';
    *ret_description = TAKE_PTR(buf);
    return 0;
}

int marker_update_expiry(const char *description, int64_t expires, char **ret_description)
{
    struct marker m;
    int r;

    if (!ret_description || expires < 0)
        return -EINVAL;
    r = marker_parse(description, &m);
    if (r < 0)
        return r;
    m.expires = expires;
    return marker_set(description, &m, ret_description);
}

int marker_key_hash(uid_t uid, const char *key, char ret[SHA256_HEX_SIZE])
{
    _cleanup_free_ char *s = NULL;
    int n;

    if (!key || !*key || !ret)
        return -EINVAL;
    n = asprintf(&s, "%" PRIu32 "\n%s", (uint32_t)uid, key);
    if (n < 0)
        return -ENOMEM;
    return sha256_hex(s, (size_t)n, ret);
}
