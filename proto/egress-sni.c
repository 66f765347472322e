/* The SNI of a TLS ClientHello (RFC 8446 section 4.1.2, RFC 6066 section 3). See
 * egress-sni.h. */
#include "egress-sni.h"

#include <errno.h>
#include <stdbool.h>
#include <string.h>

#define TLS_HANDSHAKE 22
#define TLS_CLIENT_HELLO 1
#define EXT_SERVER_NAME 0
#define SNI_HOST_NAME 0
#define SNI_NAME_MAX 253
#define EXTS_MAX 128 /* distinct extension types remembered for the duplicate check */

/* A bounded reader: every take fails once the slice is exhausted. */
struct rd {
    const uint8_t *p;
    size_t n;
};

static bool take(struct rd *r, size_t k, struct rd *ret)
{
    if (r->n < k)
        return false;
    if (ret)
        *ret = (struct rd){r->p, k};
    r->p += k;
    r->n -= k;
    return true;
}

static bool u8(struct rd *r, size_t *v)
{
    if (r->n < 1)
        return false;
    *v = r->p[0];
    return take(r, 1, NULL);
}

static bool u16(struct rd *r, size_t *v)
{
    if (r->n < 2)
        return false;
    *v = (size_t)r->p[0] << 8 | r->p[1];
    return take(r, 2, NULL);
}

static bool u24(struct rd *r, size_t *v)
{
    if (r->n < 3)
        return false;
    *v = (size_t)r->p[0] << 16 | (size_t)r->p[1] << 8 | r->p[2];
    return take(r, 3, NULL);
}

/* A vector with a length prefix of w bytes (1 or 2) into *ret. */
static bool vec(struct rd *r, int w, struct rd *ret)
{
    size_t n;

    return (w == 1 ? u8(r, &n) : u16(r, &n)) && take(r, n, ret);
}

/* The server_name extension's body: the first host_name entry (the list must parse). */
static int server_name(struct rd ext, struct rd *ret_name)
{
    struct rd list, name;
    size_t type;
    bool found = false;

    if (!vec(&ext, 2, &list) || ext.n != 0 || list.n == 0)
        return -EINVAL;
    while (list.n > 0) {
        if (!u8(&list, &type) || !vec(&list, 2, &name))
            return -EINVAL;
        if (type == SNI_HOST_NAME) {
            if (found)
                return -EINVAL; /* RFC 6066: one name of a type */
            *ret_name = name;
            found = true;
        }
    }
    return found ? 0 : -ENOENT;
}

/* The extensions block: the server name, if any; duplicates refused. */
static int extensions(struct rd exts, struct rd *ret_name)
{
    uint16_t seen[EXTS_MAX];
    size_t nseen = 0, type;
    struct rd body;
    int r = -ENOENT;

    while (exts.n > 0) {
        if (!u16(&exts, &type) || !vec(&exts, 2, &body))
            return -EINVAL;
        for (size_t i = 0; i < nseen; i++)
            if (seen[i] == type)
                return -EINVAL;
        if (nseen == EXTS_MAX)
            return -EINVAL;
        seen[nseen++] = (uint16_t)type;
        if (type == EXT_SERVER_NAME && (r = server_name(body, ret_name)) == -EINVAL)
            return r;
    }
    return r;
}

/* The ClientHello's body up to and including its extensions. */
static int client_hello(struct rd h, struct rd *ret_name)
{
    struct rd sid, suites, comp, exts;

    if (!take(&h, 2 + 32, NULL) || !vec(&h, 1, &sid) || sid.n > 32 || !vec(&h, 2, &suites) ||
        suites.n < 2 || suites.n % 2 != 0 || !vec(&h, 1, &comp) || comp.n < 1)
        return -EINVAL;
    if (h.n == 0)
        return -ENOENT; /* no extensions at all */
    if (!vec(&h, 2, &exts) || h.n != 0)
        return -EINVAL;
    return extensions(exts, ret_name);
}

int egress_sni_parse(const uint8_t *buf, size_t len, char *ret_name, size_t size)
{
    struct rd rec = {buf, len}, body, hs;
    struct rd name = {0};
    size_t type, major, minor, rlen, hlen;
    int r;

    /* the header, checked as soon as its bytes are there: garbage is refused at once */
    if (len >= 1 && buf[0] != TLS_HANDSHAKE)
        return -EINVAL;
    if (len >= 2 && buf[1] != 3)
        return -EINVAL;
    if (len < 5)
        return -EAGAIN;
    u8(&rec, &type);
    u8(&rec, &major);
    u8(&rec, &minor);
    u16(&rec, &rlen);
    if (minor > 4 || rlen == 0 || rlen > 16384)
        return -EINVAL;
    if (rec.n < rlen)
        return -EAGAIN;
    take(&rec, rlen, &body);
    if (!u8(&body, &type) || type != TLS_CLIENT_HELLO || !u24(&body, &hlen))
        return -EINVAL;
    if (hlen != body.n)
        return -EINVAL; /* spread over records, or followed by another message */
    take(&body, hlen, &hs);
    r = client_hello(hs, &name);
    if (r < 0)
        return r;
    if (name.n == 0 || name.n > SNI_NAME_MAX || memchr(name.p, '\0', name.n))
        return -EINVAL;
    if (size <= name.n)
        return -ENOBUFS;
    memcpy(ret_name, name.p, name.n);
    ret_name[name.n] = '\0';
    return (int)name.n;
}
