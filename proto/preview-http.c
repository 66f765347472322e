/* The request side of preview URLs. See preview-http.h. */
#include "preview-http.h"

#include <errno.h>
#include <llhttp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FIELD_MAX 32

struct preview_head {
    llhttp_t parser;
    llhttp_settings_t settings;
    enum preview_head_state state;
    size_t fed;
    char field[FIELD_MAX + 1];
    size_t field_len;
    bool field_long;
    size_t value_len;
    unsigned n_host;
    char host[PREVIEW_HOST_MAX + 1];
    char cookie_token[PREVIEW_TOKEN_MAX + 1];
    char query_token[PREVIEW_TOKEN_MAX + 1];
    bool has_cookie_token, has_query_token;
    size_t url_len;
    char url[PREVIEW_HEAD_MAX + 1];
    char target[PREVIEW_HEAD_MAX + 1];
    char value[PREVIEW_HEAD_MAX + 1];
};

static struct preview_head *head_of(llhttp_t *p)
{
    return p->data;
}

static int on_url(llhttp_t *p, const char *at, size_t n)
{
    struct preview_head *h = head_of(p);

    if (n > PREVIEW_HEAD_MAX - h->url_len)
        return HPE_USER;
    memcpy(h->url + h->url_len, at, n);
    h->url_len += n;
    h->url[h->url_len] = '\0';
    return 0;
}

static int on_field(llhttp_t *p, const char *at, size_t n)
{
    struct preview_head *h = head_of(p);

    if (h->field_long || n > FIELD_MAX - h->field_len) {
        h->field_long = true;
        return 0;
    }
    memcpy(h->field + h->field_len, at, n);
    h->field_len += n;
    h->field[h->field_len] = '\0';
    return 0;
}

static int on_value(llhttp_t *p, const char *at, size_t n)
{
    struct preview_head *h = head_of(p);

    if (n > PREVIEW_HEAD_MAX - h->value_len)
        return HPE_USER;
    memcpy(h->value + h->value_len, at, n);
    h->value_len += n;
    h->value[h->value_len] = '\0';
    return 0;
}

/* The value of name=VALUE in a "; "-separated cookie list, the first one. */
static void cookie_token(struct preview_head *h, const char *v)
{
    static const char name[] = PREVIEW_TOKEN_PARAM "=";
    const char *s = v;

    while (*s && !h->has_cookie_token) {
        size_t n;

        s += strspn(s, " \t;");
        n = strcspn(s, ";");
        if (strncmp(s, name, strlen(name)) == 0 && n - strlen(name) <= PREVIEW_TOKEN_MAX) {
            memcpy(h->cookie_token, s + strlen(name), n - strlen(name));
            h->cookie_token[n - strlen(name)] = '\0';
            h->has_cookie_token = true;
        }
        s += n;
    }
}

/* Host: lowercase, without ":port"; "" (no match later) when odd. */
static void set_host(struct preview_head *h, const char *v)
{
    size_t n = strlen(v), i;
    const char *colon = memchr(v, ':', n);

    if (colon)
        n = (size_t)(colon - v);
    if (++h->n_host > 1 || n > PREVIEW_HOST_MAX) {
        h->host[0] = '\0';
        return;
    }
    for (i = 0; i < n; i++) {
        char c = v[i];
        h->host[i] = (c >= 'A' && c <= 'Z') ? (char)(c - 'A' + 'a') : c;
    }
    h->host[n] = '\0';
}

static int on_value_complete(llhttp_t *p)
{
    struct preview_head *h = head_of(p);

    if (!h->field_long && strcasecmp(h->field, "host") == 0)
        set_host(h, h->value);
    else if (!h->field_long && strcasecmp(h->field, "cookie") == 0)
        cookie_token(h, h->value);
    h->field_len = h->value_len = 0;
    h->field[0] = h->value[0] = '\0';
    h->field_long = false;
    return 0;
}

/* target = url without PREVIEW_TOKEN_PARAM parameters (the first one's value kept). */
static void split_target(struct preview_head *h)
{
    static const char name[] = PREVIEW_TOKEN_PARAM "=";
    const char *q = strchr(h->url, '?');
    size_t len = q ? (size_t)(q - h->url) : h->url_len, kept = 0;

    memcpy(h->target, h->url, len);
    h->target[len] = '\0';
    if (!q)
        return;
    for (const char *s = q + 1; *s;) {
        size_t n = strcspn(s, "&");

        if (strncmp(s, name, strlen(name)) == 0 && n - strlen(name) <= PREVIEW_TOKEN_MAX) {
            if (!h->has_query_token) {
                memcpy(h->query_token, s + strlen(name), n - strlen(name));
                h->query_token[n - strlen(name)] = '\0';
                h->has_query_token = true;
            }
        } else if (n > 0) {
            h->target[len++] = kept++ ? '&' : '?';
            memcpy(h->target + len, s, n);
            len += n;
            h->target[len] = '\0';
        }
        s += n;
        if (*s == '&')
            s++;
    }
}

static int on_headers_complete(llhttp_t *p)
{
    split_target(head_of(p));
    return HPE_PAUSED;
}

struct preview_head *preview_head_new(void)
{
    struct preview_head *h = calloc(1, sizeof *h);

    if (!h)
        return NULL;
    llhttp_settings_init(&h->settings);
    h->settings.on_url = on_url;
    h->settings.on_header_field = on_field;
    h->settings.on_header_value = on_value;
    h->settings.on_header_value_complete = on_value_complete;
    h->settings.on_headers_complete = on_headers_complete;
    llhttp_init(&h->parser, HTTP_REQUEST, &h->settings);
    h->parser.data = h;
    return h;
}

void preview_head_free(struct preview_head *h)
{
    free(h);
}

enum preview_head_state preview_head_feed(struct preview_head *h, const char *data, size_t n)
{
    llhttp_errno_t e;

    if (h->state != PREVIEW_HEAD_MORE || n == 0)
        return h->state;
    e = llhttp_execute(&h->parser, data, n);
    if (e == HPE_PAUSED) {
        const char *pos = llhttp_get_error_pos(&h->parser);
        size_t used = pos && pos >= data && pos <= data + n ? (size_t)(pos - data) : n;

        h->state = h->fed + used > PREVIEW_HEAD_MAX ? PREVIEW_HEAD_LARGE : PREVIEW_HEAD_DONE;
        if (h->state == PREVIEW_HEAD_DONE && h->parser.http_major != 1)
            h->state = PREVIEW_HEAD_BAD;
        return h->state;
    }
    if (e == HPE_USER) /* a callback's buffer is full: only past PREVIEW_HEAD_MAX */
        return h->state = PREVIEW_HEAD_LARGE;
    if (e != HPE_OK)
        return h->state = PREVIEW_HEAD_BAD;
    h->fed += n;
    if (h->fed > PREVIEW_HEAD_MAX)
        h->state = PREVIEW_HEAD_LARGE;
    return h->state;
}

const char *preview_head_host(const struct preview_head *h)
{
    return h->host;
}

const char *preview_head_target(const struct preview_head *h)
{
    return h->target;
}

const char *preview_head_query_token(const struct preview_head *h)
{
    return h->has_query_token ? h->query_token : NULL;
}

const char *preview_head_cookie_token(const struct preview_head *h)
{
    return h->has_cookie_token ? h->cookie_token : NULL;
}

/* ---- base_url ---- */

static const char *after_scheme(const char *u)
{
    if (strncmp(u, "http://", 7) == 0)
        return u + 7;
    if (strncmp(u, "https://", 8) == 0)
        return u + 8;
    return NULL;
}

static char lower(char c)
{
    return (c >= 'A' && c <= 'Z') ? (char)(c - 'A' + 'a') : c;
}

static bool is_id_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-';
}

struct match {
    unsigned port;
    char id[PARAMS_ID_MAX + 1];
};

/* p: the pattern's rest (ends at NUL, ':' or '/'), h: the host's rest. */
static bool match_at(const char *p, const char *h, struct match *m)
{
    if (*p == '\0' || *p == ':' || *p == '/')
        return *h == '\0';
    if (strncmp(p, "{port}", 6) == 0) {
        unsigned v = 0;
        for (size_t k = 1; k <= 5 && h[k - 1] >= '0' && h[k - 1] <= '9'; k++) {
            v = v * 10 + (unsigned)(h[k - 1] - '0');
            if (k > 1 && h[0] == '0')
                break;
            if (v >= 1 && v <= 65535 && match_at(p + 6, h + k, m)) {
                m->port = v;
                return true;
            }
        }
        return false;
    }
    if (strncmp(p, "{id}", 4) == 0) {
        for (size_t k = 1; k <= PARAMS_ID_MAX && is_id_char(h[k - 1]); k++)
            if (match_at(p + 4, h + k, m)) {
                memcpy(m->id, h, k);
                m->id[k] = '\0';
                return true;
            }
        return false;
    }
    return *h != '\0' && lower(*p) == *h && match_at(p + 1, h + 1, m);
}

int preview_base_url_check(const char *u)
{
    const char *p = u ? after_scheme(u) : NULL, *s;
    size_t n;

    if (!p || strlen(u) > PREVIEW_BASE_URL_MAX)
        return -EINVAL;
    n = strcspn(p, ":/");
    for (s = p; s < p + n; s++) {
        if (strncmp(s, "{port}", 6) == 0 && s + 6 <= p + n)
            s += 5;
        else if (strncmp(s, "{id}", 4) == 0 && s + 4 <= p + n)
            s += 3;
        else if (!is_id_char(lower(*s)) && *s != '.')
            return -EINVAL;
    }
    s = strstr(p, "{port}");
    if (!s || s >= p + n || strstr(s + 1, "{port}"))
        return -EINVAL;
    s = strstr(p, "{id}");
    if (!s || s >= p + n || strstr(s + 1, "{id}"))
        return -EINVAL;
    s = p + n;
    if (*s == ':') {
        size_t d = strspn(s + 1, "0123456789");
        if (d < 1 || d > 5 || atoi(s + 1) < 1 || atoi(s + 1) > 65535)
            return -EINVAL;
        s += 1 + d;
    }
    return (*s == '\0' || (s[0] == '/' && s[1] == '\0')) ? 0 : -EINVAL;
}

bool preview_host_match(const char *base_url, const char *host, unsigned *ret_port,
                        char ret_id[PARAMS_ID_MAX + 1])
{
    struct match m = {};

    if (preview_base_url_check(base_url) < 0 || !host || strlen(host) > PREVIEW_HOST_MAX ||
        !match_at(after_scheme(base_url), host, &m))
        return false;
    *ret_port = m.port;
    memcpy(ret_id, m.id, sizeof m.id);
    return true;
}

int preview_url(const char *base_url, unsigned port, const char *id, const char *token, char **ret)
{
    const char *p;
    char *out, *o;
    size_t n;

    if (preview_base_url_check(base_url) < 0)
        return -EINVAL;
    n = strlen(base_url) + 8 + strlen(id) + strlen(PREVIEW_TOKEN_PARAM) + 3 + strlen(token) + 1;
    out = malloc(n);
    if (!out)
        return -ENOMEM;
    o = out;
    for (p = base_url; *p;) {
        if (strncmp(p, "{port}", 6) == 0) {
            o += sprintf(o, "%u", port);
            p += 6;
        } else if (strncmp(p, "{id}", 4) == 0) {
            o += sprintf(o, "%s", id);
            p += 4;
        } else {
            *o++ = *p++;
        }
    }
    if (o > out && o[-1] == '/')
        o--;
    sprintf(o, "/?%s=%s", PREVIEW_TOKEN_PARAM, token);
    *ret = out;
    return 0;
}

int preview_token_parse(const char *s, char ret_id[PREVIEW_ID_LEN + 1], uint64_t *ret_expires,
                        char ret_mac[PREVIEW_MAC_HEX + 1])
{
    static const char hex[] = "0123456789abcdef";
    uint64_t v = 0;
    const char *d;
    size_t nd;

    if (!s || strncmp(s, "pv-", 3) != 0 || strspn(s + 3, hex) != PREVIEW_ID_LEN - 3 ||
        s[PREVIEW_ID_LEN] != '.')
        return -EINVAL;
    d = s + PREVIEW_ID_LEN + 1;
    nd = strspn(d, "0123456789");
    if (nd < 1 || nd > 20 || d[nd] != '.' || strspn(d + nd + 1, hex) != PREVIEW_MAC_HEX ||
        d[nd + 1 + PREVIEW_MAC_HEX] != '\0')
        return -EINVAL;
    for (size_t i = 0; i < nd; i++) {
        if (v > (UINT64_MAX - 9) / 10)
            return -EINVAL;
        v = v * 10 + (uint64_t)(d[i] - '0');
    }
    memcpy(ret_id, s, PREVIEW_ID_LEN);
    ret_id[PREVIEW_ID_LEN] = '\0';
    *ret_expires = v;
    memcpy(ret_mac, d + nd + 1, PREVIEW_MAC_HEX + 1);
    return 0;
}
