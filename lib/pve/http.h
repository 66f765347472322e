/* HTTP(S) client on a libuv loop: curl multi driven by one uv_poll_t per curl socket
 * and one one-shot uv_timer_t. Many requests in flight at once, connections kept alive
 * and reused, a deadline and a connect timeout per request, TLS verified against a CA
 * file (or the system store) or pinned by the SHA-256 fingerprint of the server's
 * certificate.
 *
 * Errors (negative errno), translated once from CURLcode:
 *   -ETIMEDOUT     the request's deadline or the connect timeout passed
 *   -ECONNREFUSED  the TCP connection was refused (nothing was sent)
 *   -EHOSTUNREACH  no route / network unreachable / name not resolvable (nothing was sent)
 *   -EBADE         TLS peer verification failed: certificate not trusted by the CA file,
 *                  host name mismatch, or the SHA-256 pin did not match
 *   -EPROTO        other TLS handshake failure, malformed HTTP response
 *   -EFBIG         the response body exceeded the body cap
 *   -ECONNRESET    the connection broke while sending or receiving
 *   -ECANCELED     the client was closed while the request was in flight
 *   -ENOMEM, -EINVAL, -EIO (anything else)
 * An HTTP error status (4xx/5xx/59x) is NOT an error here: r == 0 and resp->status says it. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#define HTTP_BODY_MAX_DEFAULT (16u * 1024 * 1024) /* response body cap */
#define HTTP_REASON_MAX 1024                      /* longer reason phrases are truncated */
#define HTTP_HEADERS_MAX 32                       /* request headers per request */
#define HTTP_CONNECT_TIMEOUT_MS_DEFAULT 10000
#define HTTP_TIMEOUT_MS_DEFAULT 60000
#define HTTP_MAX_HOST_CONNECTIONS_DEFAULT 8

struct http_client;
struct http_request;

struct http_tls {
    /* Exactly one policy applies, in this order:
     * fingerprint != NULL: the leaf certificate's SHA-256 must equal it ("AB:CD:..." colon
     *   hex as Proxmox shows it, case-insensitive; colons optional). Chain and host name are
     *   not checked (Proxmox certificates are self-signed and name the node).
     * verify == true: chain verified against ca_file (NULL: the system store), host name
     *   checked.
     * verify == false and no fingerprint: NO verification. Only as an explicit
     *   configuration choice; the caller must log it (http logs it at debug only). */
    const char *ca_file;
    const char *fingerprint;
    bool verify;
};

struct http_client_config {
    struct http_tls tls;
    uint64_t connect_timeout_ms;   /* 0: HTTP_CONNECT_TIMEOUT_MS_DEFAULT */
    uint64_t timeout_ms;           /* default whole-request deadline; 0: HTTP_TIMEOUT_MS_DEFAULT */
    size_t body_max;               /* 0: HTTP_BODY_MAX_DEFAULT */
    unsigned max_host_connections; /* 0: HTTP_MAX_HOST_CONNECTIONS_DEFAULT */
};

struct http_response {
    long status;  /* e.g. 200, 500, 595 */
    char *reason; /* reason phrase of the final status line ("" when absent), never NULL */
    char *body;   /* NUL-terminated (the NUL is not counted), never NULL */
    size_t body_len;
    char *content_type; /* NULL when absent */
};

/* Called exactly once per started request (unless cancelled with http_request_cancel()):
 * r == 0 and resp != NULL when a complete HTTP response arrived (whatever its status);
 * r < 0 and resp == NULL otherwise. The callback may take ownership of resp's strings
 * (TAKE_PTR them, i.e. set the field to NULL); whatever is left is freed after it returns.
 * The request handle is invalid once the callback runs. The callback may start new
 * requests, cancel other requests and call http_client_close(). */
typedef void (*http_done_fn)(int r, struct http_response *resp, void *userdata);

struct http_request_opts {
    const char *method;         /* "GET", "POST", "PUT", "DELETE" (NULL: GET) */
    const char *url;            /* absolute http:// or https:// URL, numeric host preferred */
    const char *const *headers; /* NULL-terminated "Name: value" list, copied; may be NULL */
    const void *body;           /* copied; NULL: no body */
    size_t body_len;
    const char *content_type; /* for the body, e.g. "application/x-www-form-urlencoded" */
    uint64_t timeout_ms;      /* deadline of this request; 0: the client's default */
};

/* Creates a client on loop. cfg is copied. Returns 0 or -errno. */
int http_client_new(uv_loop_t *loop, const struct http_client_config *cfg,
                    struct http_client **ret_client);

/* Closes the client: every request still in flight completes (synchronously, from inside
 * this call) with -ECANCELED, curl is cleaned up while the loop still runs, and close_cb
 * (may be NULL) runs from the loop once every uv handle is closed; the client is freed
 * right before close_cb. No new request may be started after this call. Safe to call from
 * a request callback. NULL is accepted (close_cb is then not called). */
void http_client_close(struct http_client *c, void (*close_cb)(void *userdata), void *userdata);

/* Starts a request. On success the callback will run later from the loop (never from
 * inside this call); *ret_req (optional) is a handle valid until the callback runs.
 * On failure returns -errno and the callback is never called. */
int http_request_start(struct http_client *c, const struct http_request_opts *opts, http_done_fn cb,
                       void *userdata, struct http_request **ret_req);

/* Cancels a request in flight: it is removed from curl at once and its callback is NEVER
 * called. req must be a handle whose callback has not run yet. NULL is accepted. */
void http_request_cancel(struct http_request *req);

/* Number of requests in flight. */
size_t http_client_in_flight(const struct http_client *c);

/* Statistics for tests and benchmarks. */
struct http_stats {
    uint64_t requests_started;
    uint64_t requests_done;
    uint64_t connections_opened; /* sockets curl opened */
};
void http_client_get_stats(const struct http_client *c, struct http_stats *ret_stats);

/* Parses "AB:CD:.." (64 hex digits, colons optional, any case) into 32 bytes.
 * Returns 0 or -EINVAL. */
int http_fingerprint_parse(const char *s, uint8_t ret_sha256[32]);

/* Maps a CURLcode (passed as int) to a negative errno as documented above. */
int http_errno_from_curlcode(int code);

/* Percent-encodes s (RFC 3986 unreserved characters kept) into a new string.
 * Returns 0 or -ENOMEM. */
int http_url_escape(const char *s, char **ret_escaped);
