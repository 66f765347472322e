/* The SNI of a ClientHello: real ClientHellos from OpenSSL (TLS 1.2 and 1.3, with and
 * without a name), every prefix of one (more bytes needed, never a wrong answer), every
 * single-byte corruption (never a read past the record: ASan), and hand-made ones that
 * must be refused (duplicate extension, two host names, lengths that do not add up, a
 * ClientHello spread over two records). */
#include <check.h>
#include <errno.h>
#include <openssl/bio.h>
#include <openssl/ssl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "egress-sni.h"

/* The first flight OpenSSL sends for name (NULL: none), at most max_version. */
static size_t hello(const char *name, int max_version, uint8_t *out, size_t size)
{
    SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
    SSL *ssl;
    BIO *rb = BIO_new(BIO_s_mem()), *wb = BIO_new(BIO_s_mem());
    int n;

    ck_assert_ptr_nonnull(ctx);
    ck_assert(SSL_CTX_set_max_proto_version(ctx, max_version) == 1);
    ssl = SSL_new(ctx);
    SSL_set_bio(ssl, rb, wb);
    if (name)
        ck_assert(SSL_set_tlsext_host_name(ssl, name) == 1);
    ck_assert_int_le(SSL_connect(ssl), 0); /* waits for the server */
    n = BIO_read(wb, out, (int)size);
    ck_assert_int_gt(n, 0);
    SSL_free(ssl);
    SSL_CTX_free(ctx);
    return (size_t)n;
}

START_TEST(test_openssl)
{
    static const int versions[] = {TLS1_2_VERSION, TLS1_3_VERSION};
    static uint8_t buf[EGRESS_HELLO_MAX];
    char name[256];
    size_t n;

    for (size_t v = 0; v < sizeof(versions) / sizeof(versions[0]); v++) {
        n = hello("allowed.test", versions[v], buf, sizeof(buf));
        memset(name, 'x', sizeof(name));
        ck_assert_int_eq(egress_sni_parse(buf, n, name, sizeof(name)), 12);
        ck_assert_str_eq(name, "allowed.test");
        ck_assert_int_eq(egress_sni_parse(buf, n, name, 12), -ENOBUFS);
        ck_assert_int_eq(egress_sni_parse(buf, n, name, 13), 12);
        /* every prefix: more is needed, never an answer from part of it */
        for (size_t k = 0; k < n; k++)
            ck_assert_int_eq(egress_sni_parse(buf, k, name, sizeof(name)), -EAGAIN);
        /* bytes after the record (the next one) change nothing */
        buf[n] = 0x17;
        ck_assert_int_eq(egress_sni_parse(buf, n + 1, name, sizeof(name)), 12);
        n = hello(NULL, versions[v], buf, sizeof(buf));
        ck_assert_int_eq(egress_sni_parse(buf, n, name, sizeof(name)), -ENOENT);
    }
}
END_TEST

START_TEST(test_corruption)
{
    static uint8_t buf[EGRESS_HELLO_MAX], bad[EGRESS_HELLO_MAX];
    char name[256];
    size_t n = hello("a.example.org", TLS1_3_VERSION, buf, sizeof(buf));

    /* each byte flipped in turn: any answer but a read outside the record (ASan) or a name
     * that is not in the record */
    for (size_t i = 0; i < n; i++) {
        for (int x = 1; x < 256; x <<= 1) {
            int r;

            memcpy(bad, buf, n);
            bad[i] ^= (uint8_t)x;
            r = egress_sni_parse(bad, n, name, sizeof(name));
            ck_assert(r == -EINVAL || r == -ENOENT || r == -EAGAIN || r > 0);
            if (r > 0)
                ck_assert_ptr_nonnull(memmem(bad, n, name, (size_t)r));
        }
    }
}
END_TEST

/* A ClientHello record around extensions ext (elen bytes). */
static size_t make(const uint8_t *ext, size_t elen, uint8_t *out)
{
    size_t body = 2 + 32 + 1 + 2 + 2 + 1 + 1 + 2 + elen, k = 0;

    out[k++] = 22, out[k++] = 3, out[k++] = 1;
    out[k++] = (uint8_t)((body + 4) >> 8), out[k++] = (uint8_t)(body + 4);
    out[k++] = 1, out[k++] = 0, out[k++] = (uint8_t)(body >> 8), out[k++] = (uint8_t)body;
    out[k++] = 3, out[k++] = 3;
    memset(out + k, 7, 32), k += 32;
    out[k++] = 0;                                              /* session id */
    out[k++] = 0, out[k++] = 2, out[k++] = 0x13, out[k++] = 1; /* one suite */
    out[k++] = 1, out[k++] = 0;                                /* null compression */
    out[k++] = (uint8_t)(elen >> 8), out[k++] = (uint8_t)elen;
    memcpy(out + k, ext, elen);
    return k + elen;
}

#define SNI(n0, n1) 0, 0, 0, (uint8_t)(n0 + 5), 0, (uint8_t)(n0 + 3), 0, 0, (uint8_t)n0

START_TEST(test_handmade)
{
    static uint8_t buf[1024];
    char name[256];
    const uint8_t one[] = {SNI(5, 0), 'a', '.', 'b', 'c', 'd'};
    const uint8_t dup[] = {SNI(3, 0), 'a', '.', 'b', SNI(3, 0), 'c', '.', 'd'};
    const uint8_t two[] = {0, 0, 0, 14, 0, 12, 0, 0, 3, 'a', '.', 'b', 0, 0, 3, 'c', '.', 'd'};
    const uint8_t other_type[] = {0, 0, 0, 8, 0, 6, 1, 0, 3, 'a', '.', 'b'};
    const uint8_t nul[] = {SNI(3, 0), 'a', 0, 'b'};
    const uint8_t empty[] = {SNI(0, 0)};
    const uint8_t short_ext[] = {0, 0, 0, 9, 0, 5, 0, 0, 3, 'a', '.', 'b'};
    const uint8_t grease_then_sni[] = {0x0a, 0x0a, 0, 0, SNI(3, 0), 'x', '.', 'y'};
    size_t n;

    n = make(one, sizeof(one), buf);
    ck_assert_int_eq(egress_sni_parse(buf, n, name, sizeof(name)), 5);
    ck_assert_str_eq(name, "a.bcd");
    n = make(grease_then_sni, sizeof(grease_then_sni), buf);
    ck_assert_int_eq(egress_sni_parse(buf, n, name, sizeof(name)), 3);
    ck_assert_str_eq(name, "x.y");
    strcpy(name, "untouched");
    n = make(dup, sizeof(dup), buf);
    ck_assert_int_eq(egress_sni_parse(buf, n, name, sizeof(name)), -EINVAL);
    n = make(two, sizeof(two), buf);
    ck_assert_int_eq(egress_sni_parse(buf, n, name, sizeof(name)), -EINVAL);
    n = make(other_type, sizeof(other_type), buf);
    ck_assert_int_eq(egress_sni_parse(buf, n, name, sizeof(name)), -ENOENT);
    n = make(nul, sizeof(nul), buf);
    ck_assert_int_eq(egress_sni_parse(buf, n, name, sizeof(name)), -EINVAL);
    n = make(empty, sizeof(empty), buf);
    ck_assert_int_eq(egress_sni_parse(buf, n, name, sizeof(name)), -EINVAL);
    n = make(short_ext, sizeof(short_ext), buf);
    ck_assert_int_eq(egress_sni_parse(buf, n, name, sizeof(name)), -EINVAL);
    ck_assert_str_eq(name, "untouched");
    /* the ClientHello spread over two records: the first one's length cut */
    n = make(one, sizeof(one), buf);
    buf[4] = (uint8_t)(buf[4] - 3);
    ck_assert_int_eq(egress_sni_parse(buf, n, name, sizeof(name)), -EINVAL);
    /* garbage refused from its first bytes, without waiting for more */
    ck_assert_int_eq(egress_sni_parse((const uint8_t *)"GET / HTTP/1.1\r\n", 16, name, 256),
                     -EINVAL);
    ck_assert_int_eq(egress_sni_parse((const uint8_t *)"\x16\x02", 2, name, 256), -EINVAL);
    ck_assert_int_eq(egress_sni_parse((const uint8_t *)"\x16\x03", 2, name, 256), -EAGAIN);
    ck_assert_int_eq(egress_sni_parse((const uint8_t *)"\x16\x03\x01\x40\x01", 5, name, 256),
                     -EINVAL);
    ck_assert_int_eq(egress_sni_parse((const uint8_t *)"\x16\x03\x01\x40\x00", 5, name, 256),
                     -EAGAIN);
    ck_assert_int_eq(egress_sni_parse((const uint8_t *)"", 0, name, 256), -EAGAIN);
}
END_TEST

START_TEST(test_longest_name)
{
    static uint8_t buf[1024], ext[600];
    char name[256], want[260];
    size_t n;

    for (size_t len = 253; len <= 254; len++) {
        memset(want, 'a', len);
        want[len] = '\0';
        ext[0] = 0, ext[1] = 0, ext[2] = (uint8_t)((len + 5) >> 8), ext[3] = (uint8_t)(len + 5);
        ext[4] = (uint8_t)((len + 3) >> 8), ext[5] = (uint8_t)(len + 3);
        ext[6] = 0, ext[7] = (uint8_t)(len >> 8), ext[8] = (uint8_t)len;
        memcpy(ext + 9, want, len);
        n = make(ext, 9 + len, buf);
        if (len == 253) {
            ck_assert_int_eq(egress_sni_parse(buf, n, name, sizeof(name)), 253);
            ck_assert_str_eq(name, want);
        } else {
            ck_assert_int_eq(egress_sni_parse(buf, n, name, sizeof(name)), -EINVAL);
        }
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("egress-sni");
    TCase *tc = tcase_create("egress-sni");
    SRunner *sr;
    int failed;

    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_openssl);
    tcase_add_test(tc, test_corruption);
    tcase_add_test(tc, test_handmade);
    tcase_add_test(tc, test_longest_name);
    suite_add_tcase(s, tc);
    sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
