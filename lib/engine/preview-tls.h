/* TLS of the preview listener ([preview] tls_certificate, tls_key): OpenSSL over memory BIOs,
 * so the listener (preview-listen.c) keeps its own non-blocking sockets: ciphertext read from
 * the socket goes in with ptls_put(), plaintext comes out of ptls_read(); plaintext goes in
 * with ptls_write(), ciphertext to send comes out of ptls_take(). No I/O, no loop. */
#pragma once

#include <stddef.h>

struct ptls_ctx;
struct ptls;

/* The server context of a PEM certificate (chain) and key; TLS 1.2 or newer, HTTP/1.1 by
 * ALPN. A negative errno and *ret_error (free()) on failure. */
int ptls_ctx_new(const char *cert_file, const char *key_file, struct ptls_ctx **ret,
                 char **ret_error);
void ptls_ctx_free(struct ptls_ctx *ctx);

/* One connection's TLS state; NULL on allocation failure. */
struct ptls *ptls_new(struct ptls_ctx *ctx);
void ptls_free(struct ptls *t);
/* Ciphertext received: 0, or -ENOMEM. */
int ptls_put(struct ptls *t, const void *data, size_t n);
/* Plaintext available: > 0 bytes into buf, 0 when more ciphertext is needed (the handshake
 * may have produced output for ptls_take()), -EPIPE once the peer closed, -EPROTO on a TLS
 * error. */
int ptls_read(struct ptls *t, void *buf, size_t cap);
/* Plaintext to send, all of it (the handshake is done when there is plaintext to answer):
 * 0 or -EPROTO. */
int ptls_write(struct ptls *t, const void *data, size_t n);
/* The close_notify alert, queued for ptls_take(). */
void ptls_shutdown(struct ptls *t);
/* Ciphertext to send (malloc'ed, *ret_len > 0) or *ret NULL when there is none; -ENOMEM. */
int ptls_take(struct ptls *t, char **ret, size_t *ret_len);
