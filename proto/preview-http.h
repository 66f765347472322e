/* The request side of preview URLs (sandbox.preview, docs/protocol.md "Preview URLs"): the
 * head of the first HTTP/1.1 request on a connection of the preview listener, read with
 * llhttp up to the end of its headers; the Host names matched against [preview] base_url's
 * pattern; and the token's text form. Pure: no loop, no sockets, no keys (the listener,
 * lib/engine/preview-listen.c, computes and checks the MAC).
 *
 * A token is "<preview id>.<expires_at>.<64 hex digits of HMAC-SHA256>"; it comes in the
 * query parameter PREVIEW_TOKEN_PARAM of the URL sandbox.preview returns, and after the
 * first request in the cookie of the same name (the listener answers a token in the query
 * with a redirect that sets the cookie and drops the parameter). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "api-limits.h"

/* PREVIEW_HEAD_MAX (api-limits.h): bytes of a request head the listener reads before it
 * relays or refuses. */
/* Bytes of a Host header. */
#define PREVIEW_HOST_MAX 255u
/* Bytes of a base_url ([preview] base_url). */
#define PREVIEW_BASE_URL_MAX 255u
#define PREVIEW_ID_LEN 19 /* "pv-" + 16 lowercase hex */
#define PREVIEW_MAC_HEX 64
/* "pv-<16 hex>.<up to 20 digits>.<64 hex>" */
#define PREVIEW_TOKEN_MAX (PREVIEW_ID_LEN + 1 + 20 + 1 + PREVIEW_MAC_HEX)
#define PREVIEW_TOKEN_PARAM "sandboxd_preview"

enum preview_head_state {
    PREVIEW_HEAD_MORE,  /* feed more bytes */
    PREVIEW_HEAD_DONE,  /* the headers ended: the fields below are set */
    PREVIEW_HEAD_BAD,   /* not an HTTP/1.x request head, or past a limit */
    PREVIEW_HEAD_LARGE, /* the head is longer than PREVIEW_HEAD_MAX */
};

struct preview_head;

/* The parser of one connection's first request head. NULL on allocation failure. */
struct preview_head *preview_head_new(void);
void preview_head_free(struct preview_head *h);
/* Feeds the next n bytes of the connection (n may be 0). Once DONE or BAD, feeding more
 * changes nothing and returns the same. */
enum preview_head_state preview_head_feed(struct preview_head *h, const char *data, size_t n);
/* After DONE: the Host header's host (lowercase, without its port; "" when absent or
 * repeated), the request target without the token parameter, the token from the query
 * (or NULL) and from the Cookie header (or NULL). Valid until preview_head_free(). */
const char *preview_head_host(const struct preview_head *h);
const char *preview_head_target(const struct preview_head *h);
const char *preview_head_query_token(const struct preview_head *h);
const char *preview_head_cookie_token(const struct preview_head *h);

/* base_url: "http://" or "https://", then a host pattern holding "{port}" and "{id}" once
 * each (with letters, digits, '-' and '.' around them), then an optional ":PORT" and
 * nothing else. Returns 0 or -EINVAL. */
int preview_base_url_check(const char *base_url);
/* Whether host (as preview_head_host() gives it) matches base_url's pattern; if so, the
 * port (1..65535) and the sandbox id ([a-z0-9-]{1,PARAMS_ID_MAX}) it names. */
bool preview_host_match(const char *base_url, const char *host, unsigned *ret_port,
                        char ret_id[PARAMS_ID_MAX + 1]);
/* The URL of a preview: base_url with port and id put in, "/?" PREVIEW_TOKEN_PARAM "=" and
 * the token. -EINVAL when base_url is not valid, -ENOMEM. */
int preview_url(const char *base_url, unsigned port, const char *id, const char *token, char **ret);

/* The three parts of a token; -EINVAL when s is not one. */
int preview_token_parse(const char *s, char ret_id[PREVIEW_ID_LEN + 1], uint64_t *ret_expires,
                        char ret_mac[PREVIEW_MAC_HEX + 1]);
