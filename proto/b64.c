/* Base64 via libcrypto's block functions, with the strictness they lack. */
#include "b64.h"

#include <errno.h>
#include <json-c/printbuf.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int b64_encode(const void *p, size_t n, char **ret, size_t *ret_len)
{
    size_t out_len;
    char *out;
    int k;

    if (n > B64_MAX_DECODED)
        return -E2BIG;
    out_len = (n + 2) / 3 * 4;
    out = malloc(out_len + 1);
    if (!out)
        return -ENOMEM;
    k = n ? EVP_EncodeBlock((unsigned char *)out, p, (int)n) : 0;
    out[k] = '\0';
    *ret = out;
    if (ret_len)
        *ret_len = (size_t)k;
    return 0;
}

static int b64_value(unsigned char c)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    if (c == '+')
        return 62;
    if (c == '/')
        return 63;
    return -1;
}

static size_t b64_padding(const char *s, size_t n)
{
    if (n >= 2 && s[n - 1] == '=' && s[n - 2] == '=')
        return 2;
    if (n >= 1 && s[n - 1] == '=')
        return 1;
    return 0;
}

size_t b64_decoded_size(const char *s, size_t n)
{
    if (n % 4)
        return 0;
    return n / 4 * 3 - b64_padding(s, n);
}

int b64_decode(const char *s, size_t n, uint8_t **ret, size_t *ret_len)
{
    size_t pad, i, dec;
    uint8_t *out;
    int k;

    if (n % 4 != 0 || n / 4 * 3 > B64_MAX_DECODED)
        return -EINVAL;
    pad = b64_padding(s, n);
    for (i = 0; i < n - pad; i++)
        if (b64_value((unsigned char)s[i]) < 0)
            return -EINVAL;
    /* Canonical form: the bits the padding leaves unused must be zero. */
    if (pad == 2 && (b64_value((unsigned char)s[n - 3]) & 0x0f))
        return -EINVAL;
    if (pad == 1 && (b64_value((unsigned char)s[n - 2]) & 0x03))
        return -EINVAL;

    dec = n / 4 * 3;
    out = malloc(dec + 1);
    if (!out)
        return -ENOMEM;
    k = n ? EVP_DecodeBlock(out, (const unsigned char *)s, (int)n) : 0;
    /* EVP_DecodeBlock counts the padding as zero bytes. */
    if (k < 0 || (size_t)k != dec) {
        free(out);
        return -EINVAL;
    }
    dec -= pad;
    out[dec] = '\0';
    *ret = out;
    *ret_len = dec;
    return 0;
}

bool utf8_valid(const void *p, size_t n)
{
    const unsigned char *s = p;
    size_t i = 0;

    while (i < n) {
        unsigned char c = s[i];
        size_t k;
        unsigned cp;

        if (c < 0x80) {
            i++;
            continue;
        }
        if (c >= 0xc2 && c <= 0xdf) {
            k = 1;
            cp = c & 0x1f;
        } else if (c >= 0xe0 && c <= 0xef) {
            k = 2;
            cp = c & 0x0f;
        } else if (c >= 0xf0 && c <= 0xf4) {
            k = 3;
            cp = c & 0x07;
        } else {
            return false;
        }
        if (n - i <= k)
            return false;
        for (size_t j = 1; j <= k; j++) {
            if ((s[i + j] & 0xc0) != 0x80)
                return false;
            cp = (cp << 6) | (s[i + j] & 0x3f);
        }
        if ((k == 2 && cp < 0x800) || (k == 3 && (cp < 0x10000 || cp > 0x10ffff)) ||
            (cp >= 0xd800 && cp <= 0xdfff))
            return false;
        i += k + 1;
    }
    return true;
}

/* Strings this long or longer that need no escape (base64 always, most text) are
 * serialised by b64_plain_to_json(): copied as they are instead of going through json-c's
 * escaping loop byte by byte. */
#define B64_PLAIN_MIN 256

/* The userdata of such a string: what tells it from others (b64_is_plain()). */
static const char b64_plain_mark;

bool b64_is_plain(json_object *o)
{
    return o && json_object_get_userdata(o) == (void *)&b64_plain_mark;
}

static int b64_plain_to_json(json_object *o, struct printbuf *pb, int level, int flags)
{
    (void)level;
    (void)flags;
    if (printbuf_strappend(pb, "\"") < 0 ||
        printbuf_memappend(pb, json_object_get_string(o), json_object_get_string_len(o)) < 0 ||
        printbuf_strappend(pb, "\"") < 0)
        return -1;
    return 0;
}

/* True when json-c writes s as it is: no control character, quote or backslash ('/' is
 * escaped only without JSON_C_TO_STRING_NOSLASHESCAPE, and is valid JSON either way). */
static bool b64_plain(const char *s, size_t n)
{
    unsigned bad = 0;

    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];

        bad |= (c < 0x20) | (c == '"') | (c == '\\');
    }
    return bad == 0;
}

/* A new string of s[0..n); plain: known to need no escape (otherwise checked here when
 * long). The serialiser is set before the string is shared with anyone. */
static json_object *b64_string_new(const char *s, size_t n, bool plain)
{
    json_object *v = json_object_new_string_len(s, (int)n);

    if (v && n >= B64_PLAIN_MIN && (plain || b64_plain(s, n)))
        json_object_set_serializer(v, b64_plain_to_json, (void *)&b64_plain_mark, NULL);
    return v;
}

int b64_object_add_data(json_object *o, const char *name, const void *p, size_t n)
{
    json_object *v;
    char key[128];

    if (n > B64_MAX_DECODED)
        return -E2BIG;
    if (n == 0 || utf8_valid(p, n)) {
        v = b64_string_new(n ? p : "", n, false);
        if (!v || json_object_object_add(o, name, v) < 0) {
            json_object_put(v);
            return -ENOMEM;
        }
        return 0;
    } else {
        char *enc = NULL;
        size_t len;
        int r;

        if ((size_t)snprintf(key, sizeof(key), "%s_b64", name) >= sizeof(key))
            return -EINVAL;
        r = b64_encode(p, n, &enc, &len);
        if (r < 0)
            return r;
        v = b64_string_new(enc, len, true);
        free(enc);
        if (!v || json_object_object_add(o, key, v) < 0) {
            json_object_put(v);
            return -ENOMEM;
        }
        return 0;
    }
}
