/* The text of a message, written straight into one buffer. See rpc.h. */
#include "rpc.h"

#include "b64.h"

#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define RPC_TEXT_FLAGS (JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE)

struct wbuf {
    char *p;
    size_t len, cap;
    bool failed;
};

/* 1: the byte is written escaped (json-c's json_escape_str() without '/' escaping). */
static const unsigned char needs_escape[256] = {
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,         1,
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, ['"'] = 1, ['\\'] = 1,
};

static bool wbuf_reserve(struct wbuf *b, size_t n)
{
    size_t cap;
    char *p;

    if (b->failed)
        return false;
    if (b->cap - b->len >= n)
        return true;
    cap = b->cap ? b->cap : 256;
    while (cap - b->len < n) {
        if (cap > SIZE_MAX / 2) {
            b->failed = true;
            return false;
        }
        cap *= 2;
    }
    p = realloc(b->p, cap);
    if (!p) {
        b->failed = true;
        return false;
    }
    b->p = p;
    b->cap = cap;
    return true;
}

static void wbuf_put(struct wbuf *b, const char *s, size_t n)
{
    if (!wbuf_reserve(b, n))
        return;
    memcpy(b->p + b->len, s, n);
    b->len += n;
}

static void wbuf_putc(struct wbuf *b, char c)
{
    if (!wbuf_reserve(b, 1))
        return;
    b->p[b->len++] = c;
}

#define ONES UINT64_C(0x0101010101010101)
#define HIGHS UINT64_C(0x8080808080808080)

/* True when one of the 8 bytes at p is below 0x20, '"' or '\\' (a byte below 0x80 that
 * becomes 0 or wraps below 0x80 - 0x20 sets its high bit; bytes from 0x80 never match). */
static bool word_needs_escape(const char *p)
{
    uint64_t x, quote, bslash;

    memcpy(&x, p, sizeof x);
    quote = x ^ (ONES * '"');
    bslash = x ^ (ONES * '\\');
    return (((x - ONES * 0x20) | (quote - ONES) | (bslash - ONES)) & ~x & HIGHS) != 0;
}

/* The escape of a byte that needs one, at o (at most 6 bytes): \b \n \r \t \f \" \\ by
 * name, the other control characters as \u00xx (lower-case hex), as json-c writes them.
 * Returns the end. */
static char *put_escape(char *o, unsigned char c)
{
    static const char hex[] = "0123456789abcdef";

    *o++ = '\\';
    switch (c) {
    case '\b':
        *o++ = 'b';
        break;
    case '\n':
        *o++ = 'n';
        break;
    case '\r':
        *o++ = 'r';
        break;
    case '\t':
        *o++ = 't';
        break;
    case '\f':
        *o++ = 'f';
        break;
    case '"':
    case '\\':
        *o++ = (char)c;
        break;
    default:
        memcpy(o, "u00", 3);
        o[3] = hex[c >> 4];
        o[4] = hex[c & 0xf];
        o += 5;
    }
    return o;
}

/* Short strings: byte by byte into room reserved at once (6 bytes a byte at most). */
#define SHORT_STRING 256

/* s[0..n) between quotes, escaped as json-c escapes it (everything but the bytes
 * needs_escape[] lists as it is). */
static void write_string(struct wbuf *b, const char *s, size_t n)
{
    size_t start = 0;
    char *o;

    if (n <= SHORT_STRING) {
        if (!wbuf_reserve(b, 6 * n + 2))
            return;
        o = b->p + b->len;
        *o++ = '"';
        for (size_t i = 0; i < n; i++) {
            unsigned char c = (unsigned char)s[i];

            if (needs_escape[c])
                o = put_escape(o, c);
            else
                *o++ = (char)c;
        }
        *o++ = '"';
        b->len = (size_t)(o - b->p);
        return;
    }
    wbuf_putc(b, '"');
    for (size_t i = 0; i < n; i++) {
        /* Eight bytes at a time while none of them needs an escape. */
        while (n - i >= 8 && !word_needs_escape(s + i))
            i += 8;
        if (i >= n)
            break;
        if (!needs_escape[(unsigned char)s[i]])
            continue;
        wbuf_put(b, s + start, i - start);
        start = i + 1;
        if (!wbuf_reserve(b, 6))
            return;
        b->len = (size_t)(put_escape(b->p + b->len, (unsigned char)s[i]) - b->p);
    }
    wbuf_put(b, s + start, n - start);
    wbuf_putc(b, '"');
}

/* A member name (json-c's keys end at their NUL) and its ':', escaped the same way, read
 * once: a chunk of it at a time into room reserved for the chunk. */
static void write_key(struct wbuf *b, const char *key)
{
    enum { CHUNK = 16 };
    char *o;

    wbuf_putc(b, '"');
    for (;;) {
        unsigned char c = 1;

        if (!wbuf_reserve(b, 6 * CHUNK + 2))
            return;
        o = b->p + b->len;
        for (unsigned k = 0; k < CHUNK && (c = (unsigned char)*key); k++, key++)
            if (needs_escape[c])
                o = put_escape(o, c);
            else
                *o++ = (char)c;
        if (!c) {
            memcpy(o, "\":", 2);
            b->len = (size_t)(o + 2 - b->p);
            return;
        }
        b->len = (size_t)(o - b->p);
    }
}

/* json-c's "%" PRId64 (or PRIu64 above INT64_MAX), without printf. */
static void write_int(struct wbuf *b, json_object *o)
{
    int64_t v = json_object_get_int64(o);
    uint64_t u = v == INT64_MAX ? json_object_get_uint64(o) : v < 0 ? -(uint64_t)v : (uint64_t)v;
    char d[21];
    size_t k = sizeof d;

    do {
        d[--k] = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    if (v < 0)
        d[--k] = '-';
    wbuf_put(b, d + k, sizeof d - k);
}

/* A value json-c writes itself: a double (its own formatting, or the text it was parsed
 * from) or a value with a serialiser of its own (always set with userdata). */
static void write_by_json_c(struct wbuf *b, json_object *o)
{
    size_t n;
    const char *s = json_object_to_json_string_length(o, RPC_TEXT_FLAGS, &n);

    if (!s) {
        b->failed = true;
        return;
    }
    wbuf_put(b, s, n);
}

static void write_value(struct wbuf *b, json_object *o)
{
    if (b->failed)
        return;
    if (!o) {
        wbuf_put(b, "null", 4);
        return;
    }
    if (json_object_get_userdata(o)) {
        if (b64_is_plain(o)) {
            wbuf_putc(b, '"');
            wbuf_put(b, json_object_get_string(o), (size_t)json_object_get_string_len(o));
            wbuf_putc(b, '"');
        } else
            write_by_json_c(b, o);
        return;
    }
    switch (json_object_get_type(o)) {
    case json_type_string:
        write_string(b, json_object_get_string(o), (size_t)json_object_get_string_len(o));
        return;
    case json_type_int:
        write_int(b, o);
        return;
    case json_type_boolean:
        if (json_object_get_boolean(o))
            wbuf_put(b, "true", 4);
        else
            wbuf_put(b, "false", 5);
        return;
    case json_type_array:
        wbuf_putc(b, '[');
        for (size_t i = 0, n = json_object_array_length(o); i < n; i++) {
            if (i > 0)
                wbuf_putc(b, ',');
            write_value(b, json_object_array_get_idx(o, i));
        }
        wbuf_putc(b, ']');
        return;
    case json_type_object: {
        bool first = true;

        wbuf_putc(b, '{');
        json_object_object_foreach(o, key, val)
        {
            if (!first)
                wbuf_putc(b, ',');
            first = false;
            write_key(b, key);
            write_value(b, val);
        }
        wbuf_putc(b, '}');
        return;
    }
    default: /* json_type_double, json_type_null (never an object: NULL is null) */
        write_by_json_c(b, o);
        return;
    }
}

int rpc_text_new(json_object *o, size_t hint, char **ret_text, size_t *ret_len)
{
    struct wbuf b = {};

    /* The hint is a lower bound: more for the numbers, the room a name's chunk asks for
     * and the line's end, so that a small reply is written without growing the buffer. */
    if (hint < SIZE_MAX / 2 && !wbuf_reserve(&b, hint + hint / 4 + 256))
        return -ENOMEM;
    write_value(&b, o);
    wbuf_put(&b, "\n", 2);
    if (b.failed) {
        free(b.p);
        return -ENOMEM;
    }
    *ret_text = b.p;
    *ret_len = b.len - 2;
    return 0;
}
