/* libFuzzer target over the egress proxy's parsers: the first byte picks one, the rest is
 * its input, as a client in a sandbox could send it.
 *   0: egress_sni_parse()  - a name comes only from the input, at most 253 bytes, no NUL;
 *   1: egress_http_parse() - an accepted head lies inside the input and the limit, names a
 *      host of the allowed characters and a port; every prefix of it waits for more; the
 *      proxy's verdicts on it are an answer or a refusal with a reason;
 *   2: egress_entry_parse() - an accepted entry's normal form parses back to itself, and a
 *      name entry allows the names it should (itself, or one label under a wildcard).
 * Invariants that must hold for any input abort the run. */
#include "egress-http.h"
#include "egress-sni.h"
#include "egress.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(x)                                                                                   \
    do {                                                                                           \
        if (!(x))                                                                                  \
            abort();                                                                               \
    } while (0)

static void sni(const uint8_t *p, size_t n)
{
    char name[256];
    int r = egress_sni_parse(p, n, name, sizeof(name));

    CHECK(r > 0 || r == -EAGAIN || r == -ENOENT || r == -EINVAL);
    if (r > 0) {
        CHECK(r <= 253 && strlen(name) == (size_t)r);
        CHECK(memmem(p, n, name, (size_t)r) != NULL);
    }
    if (r == -EAGAIN)
        CHECK(n < EGRESS_HELLO_MAX);
}

static void http(const uint8_t *p, size_t n)
{
    struct egress_request q;
    int r = egress_http_parse((const char *)p, n, &q);

    CHECK(r == 0 || r == -EAGAIN || r == -EINVAL || r == -E2BIG);
    if (r == -EAGAIN)
        CHECK(n < EGRESS_HEAD_MAX);
    if (r != 0)
        return;
    CHECK(q.head_len >= 4 && q.head_len <= n && q.head_len <= EGRESS_HEAD_MAX);
    CHECK(memcmp(p + q.head_len - 4, "\r\n\r\n", 4) == 0);
    CHECK(q.host[0] != '\0' && strlen(q.host) <= 253 && q.port > 0);
    CHECK(strspn(q.host, "abcdefghijklmnopqrstuvwxyz0123456789.-") == strlen(q.host));
    CHECK(!(q.chunked && q.content_length >= 0));
    if (!q.connect)
        CHECK(q.target_off + q.target_len <= q.head_len);
    /* the verdicts: allowed or refused with a reason, whatever the head */
    {
        static struct egress_allow a;
        const char *reason = NULL;
        int v;

        if (a.n == 0) {
            CHECK(egress_entry_parse("allowed.test", 12, &a.e[0], &reason) == 0);
            CHECK(egress_entry_parse("*.allowed.test", 14, &a.e[1], &reason) == 0);
            CHECK(egress_entry_parse("10.0.0.0/8:443", 14, &a.e[2], &reason) == 0);
            a.n = 3;
        }
        v = egress_request_allowed(&a, &q, &reason);
        CHECK(v == 0 || (v == -EACCES && reason));
        v = egress_tunnel_allowed(&a, &q, q.host, (int)strlen(q.host), &reason);
        CHECK(v == 0 || (v == -EACCES && reason));
    }
    /* a prefix never answers differently from the whole but by waiting */
    for (size_t k = 0; k < q.head_len; k += 1 + k / 8) {
        struct egress_request part;

        CHECK(egress_http_parse((const char *)p, k, &part) == -EAGAIN);
    }
}

static void entry(const uint8_t *p, size_t n)
{
    struct egress_entry e, back;
    static struct egress_allow a;
    char buf[EGRESS_ENTRY_MAX + 1], sub[EGRESS_NAME_MAX + 3];
    const char *reason = NULL;
    int len;

    if (egress_entry_parse((const char *)p, n, &e, &reason) < 0) {
        CHECK(reason != NULL);
        return;
    }
    len = egress_entry_format(&e, buf, sizeof(buf));
    CHECK(len > 0 && (size_t)len <= EGRESS_ENTRY_MAX);
    CHECK(egress_entry_parse(buf, (size_t)len, &back, &reason) == 0);
    CHECK(egress_entry_format(&back, sub, sizeof(sub)) == len && strcmp(sub, buf) == 0);
    a.n = 1;
    a.e[0] = e;
    if (e.kind == EGRESS_CIDR) {
        CHECK(egress_allows_addr(&a, e.addr, e.port ? e.port : 1));
        CHECK(!egress_has_names(&a));
        return;
    }
    CHECK(egress_has_names(&a));
    CHECK(egress_allows_name(&a, e.name, strlen(e.name)) == !e.wildcard);
    if (e.wildcard && strlen(e.name) + 2 <= EGRESS_NAME_MAX) {
        sub[0] = 'x', sub[1] = '.';
        strcpy(sub + 2, e.name);
        CHECK(egress_allows_name(&a, sub, strlen(sub)));
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t *copy;

    if (size < 1 || size > 2 * EGRESS_HELLO_MAX)
        return 0;
    /* an exact-length heap copy: ASan sees any read past the input */
    copy = malloc(size - 1 ? size - 1 : 1);
    CHECK(copy != NULL);
    memcpy(copy, data + 1, size - 1);
    switch (data[0] % 3) {
    case 0:
        sni(copy, size - 1);
        break;
    case 1:
        http(copy, size - 1);
        break;
    default:
        entry(copy, size - 1);
        break;
    }
    free(copy);
    return 0;
}
