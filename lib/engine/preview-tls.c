/* TLS of the preview listener. See preview-tls.h. */
#include "preview-tls.h"

#include <errno.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct ptls_ctx {
    SSL_CTX *ctx;
};

struct ptls {
    SSL *ssl;
    BIO *in, *out; /* owned by ssl */
};

static int on_alpn(SSL *ssl, const unsigned char **out, unsigned char *outlen,
                   const unsigned char *in, unsigned inlen, void *arg)
{
    static const unsigned char http11[] = "\x08http/1.1";

    if (SSL_select_next_proto((unsigned char **)out, outlen, http11, sizeof http11 - 1, in,
                              inlen) != OPENSSL_NPN_NEGOTIATED)
        return SSL_TLSEXT_ERR_NOACK;
    return SSL_TLSEXT_ERR_OK;
}

int ptls_ctx_new(const char *cert_file, const char *key_file, struct ptls_ctx **ret,
                 char **ret_error)
{
    struct ptls_ctx *c = calloc(1, sizeof *c);
    const char *what = NULL;
    char msg[256];

    if (!c)
        return -ENOMEM;
    c->ctx = SSL_CTX_new(TLS_server_method());
    if (!c->ctx)
        what = "cannot make a TLS context";
    else if (SSL_CTX_set_min_proto_version(c->ctx, TLS1_2_VERSION) != 1)
        what = "cannot require TLS 1.2";
    else if (SSL_CTX_use_certificate_chain_file(c->ctx, cert_file) != 1)
        what = "tls_certificate";
    else if (SSL_CTX_use_PrivateKey_file(c->ctx, key_file, SSL_FILETYPE_PEM) != 1)
        what = "tls_key";
    else if (SSL_CTX_check_private_key(c->ctx) != 1)
        what = "tls_key does not match tls_certificate";
    if (what) {
        ERR_error_string_n(ERR_get_error(), msg, sizeof msg);
        if (asprintf(ret_error, "[preview] %s: %s", what, msg) < 0)
            *ret_error = NULL;
        ERR_clear_error();
        ptls_ctx_free(c);
        return -EINVAL;
    }
    SSL_CTX_set_options(c->ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_COMPRESSION);
    SSL_CTX_set_mode(c->ctx, SSL_MODE_ENABLE_PARTIAL_WRITE);
    SSL_CTX_set_alpn_select_cb(c->ctx, on_alpn, NULL);
    *ret = c;
    return 0;
}

void ptls_ctx_free(struct ptls_ctx *c)
{
    if (!c)
        return;
    SSL_CTX_free(c->ctx);
    free(c);
}

struct ptls *ptls_new(struct ptls_ctx *ctx)
{
    struct ptls *t = calloc(1, sizeof *t);

    if (!t)
        return NULL;
    t->ssl = SSL_new(ctx->ctx);
    t->in = BIO_new(BIO_s_mem());
    t->out = BIO_new(BIO_s_mem());
    if (!t->ssl || !t->in || !t->out) {
        SSL_free(t->ssl);
        BIO_free(t->in);
        BIO_free(t->out);
        free(t);
        return NULL;
    }
    BIO_set_mem_eof_return(t->in, -1); /* "no data yet", not an end */
    SSL_set_bio(t->ssl, t->in, t->out);
    SSL_set_accept_state(t->ssl);
    return t;
}

void ptls_free(struct ptls *t)
{
    if (!t)
        return;
    SSL_free(t->ssl);
    free(t);
}

int ptls_put(struct ptls *t, const void *data, size_t n)
{
    while (n > 0) {
        int w = BIO_write(t->in, data, n > 1u << 30 ? 1 << 30 : (int)n);

        if (w <= 0)
            return -ENOMEM;
        data = (const char *)data + w;
        n -= (size_t)w;
    }
    return 0;
}

int ptls_read(struct ptls *t, void *buf, size_t cap)
{
    int r = SSL_read(t->ssl, buf, cap > 1u << 30 ? 1 << 30 : (int)cap);

    if (r > 0)
        return r;
    switch (SSL_get_error(t->ssl, r)) {
    case SSL_ERROR_WANT_READ:
    case SSL_ERROR_WANT_WRITE:
        return 0;
    case SSL_ERROR_ZERO_RETURN:
        return -EPIPE;
    default:
        ERR_clear_error();
        return -EPROTO;
    }
}

int ptls_write(struct ptls *t, const void *data, size_t n)
{
    while (n > 0) {
        int w = SSL_write(t->ssl, data, n > 1u << 30 ? 1 << 30 : (int)n);

        if (w <= 0) {
            ERR_clear_error();
            return -EPROTO;
        }
        data = (const char *)data + w;
        n -= (size_t)w;
    }
    return 0;
}

void ptls_shutdown(struct ptls *t)
{
    (void)SSL_shutdown(t->ssl);
    ERR_clear_error();
}

int ptls_take(struct ptls *t, char **ret, size_t *ret_len)
{
    size_t n = BIO_ctrl_pending(t->out);
    char *b;

    *ret = NULL;
    *ret_len = 0;
    if (n == 0)
        return 0;
    b = malloc(n);
    if (!b)
        return -ENOMEM;
    if (BIO_read(t->out, b, (int)n) != (int)n) {
        free(b);
        return -ENOMEM;
    }
    *ret = b;
    *ret_len = n;
    return 0;
}
