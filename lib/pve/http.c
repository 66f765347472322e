/* curl multi driven by libuv: one uv_poll_t per curl socket, one one-shot uv_timer_t,
 * completion through curl_multi_info_read(). */
/* macro.h before uv.h: sys/param.h (pulled in by uv.h) defines MIN/MAX too. */
#include "macro.h"

#include "http.h"

#include <ctype.h>
#include <curl/curl.h>
#include <errno.h>
#include <limits.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <string.h>
#include <sys/socket.h>

#include "list.h"
#include "log.h"
#include "macro.h"
#include "util.h"
#include "buf.h"

#define COMP "http"

enum http_client_state {
    HTTP_CLIENT_OPEN,
    HTTP_CLIENT_CLOSING, /* close requested, waiting for dispatch to unwind */
    HTTP_CLIENT_CLOSED,  /* curl cleaned up, waiting for uv close callbacks */
};

static const char *const client_state_names[] = {
    [HTTP_CLIENT_OPEN] = "open",
    [HTTP_CLIENT_CLOSING] = "closing",
    [HTTP_CLIENT_CLOSED] = "closed",
};

struct sock_ctx {
    uv_poll_t poll;
    curl_socket_t fd;
    struct http_client *client;
    bool closing;
    struct sock_ctx *next;
};

struct http_request {
    struct http_client *client;
    CURL *easy;
    struct curl_slist *headers;
    char *req_body;
    http_done_fn cb;
    void *userdata;
    struct http_request *prev, *next;

    long status;
    char *reason;
    char *content_type;
    struct buf body; /* the response body, at most the client's body_max bytes */
    bool too_big;
    bool pin_failed;
    char errbuf[CURL_ERROR_SIZE];
};

struct http_client {
    uv_loop_t *loop;
    CURLM *multi;
    uv_timer_t timer;
    enum http_client_state state;

    char *ca_file;
    bool verify;
    bool have_pin;
    uint8_t pin[32];
    uint64_t connect_timeout_ms, timeout_ms;
    size_t body_max;

    struct http_request *requests; /* in flight */
    size_t n_requests;
    struct sock_ctx *socks;
    unsigned open_handles; /* uv handles not yet closed (timer + polls) */
    unsigned dispatch_depth;

    struct close_notify closed; /* http_client_close()'s callback */
    struct http_stats stats;
};

static void client_set_state(struct http_client *c, enum http_client_state s)
{
    if (c->state == s)
        return;
    log_debug(COMP, "client %p: %s -> %s", (void *)c, client_state_names[c->state],
              client_state_names[s]);
    c->state = s;
}

/* ---- errno mapping ---- */

int http_errno_from_curlcode(int code)
{
    switch ((CURLcode)code) {
    case CURLE_OK:
        return 0;
    case CURLE_OPERATION_TIMEDOUT:
        return -ETIMEDOUT;
    case CURLE_COULDNT_CONNECT:
        return -ECONNREFUSED;
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_RESOLVE_PROXY:
        return -EHOSTUNREACH;
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CACERT_BADFILE:
    case CURLE_SSL_PINNEDPUBKEYNOTMATCH:
    case CURLE_SSL_ISSUER_ERROR:
    case CURLE_SSL_CRL_BADFILE:
    case CURLE_SSL_INVALIDCERTSTATUS:
        return -EBADE;
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_SSL_CERTPROBLEM:
    case CURLE_SSL_CIPHER:
    case CURLE_SSL_ENGINE_NOTFOUND:
    case CURLE_SSL_ENGINE_SETFAILED:
    case CURLE_SSL_ENGINE_INITFAILED:
    case CURLE_USE_SSL_FAILED:
    case CURLE_SSL_SHUTDOWN_FAILED:
    case CURLE_WEIRD_SERVER_REPLY:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
    case CURLE_HTTP3:
    case CURLE_BAD_CONTENT_ENCODING:
    case CURLE_UNSUPPORTED_PROTOCOL:
        return -EPROTO;
    case CURLE_FILESIZE_EXCEEDED:
        return -EFBIG;
    case CURLE_SEND_ERROR:
    case CURLE_RECV_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_PARTIAL_FILE:
        return -ECONNRESET;
    case CURLE_URL_MALFORMAT:
    case CURLE_BAD_FUNCTION_ARGUMENT:
        return -EINVAL;
    case CURLE_OUT_OF_MEMORY:
        return -ENOMEM;
    case CURLE_ABORTED_BY_CALLBACK:
        return -ECANCELED;
    default:
        return -EIO;
    }
}

static int request_errno(struct http_request *req, CURLcode rc)
{
    if (req->pin_failed)
        return -EBADE;
    if (rc == CURLE_WRITE_ERROR)
        return req->too_big ? -EFBIG : -EIO;
    if (rc == CURLE_COULDNT_CONNECT) {
        long os = 0;
        (void)curl_easy_getinfo(req->easy, CURLINFO_OS_ERRNO, &os);
        if (os == EHOSTUNREACH || os == ENETUNREACH)
            return -EHOSTUNREACH;
        if (os == ETIMEDOUT)
            return -ETIMEDOUT;
        return -ECONNREFUSED;
    }
    return http_errno_from_curlcode(rc);
}

/* ---- helpers ---- */

int http_fingerprint_parse(const char *s, uint8_t ret_sha256[32])
{
    uint8_t out[32];
    size_t n = 0;
    int hi = -1;

    if (!s)
        return -EINVAL;
    for (; *s; s++) {
        int v;
        if (*s == ':' && hi < 0)
            continue;
        if (!isxdigit((unsigned char)*s))
            return -EINVAL;
        v = isdigit((unsigned char)*s) ? *s - '0' : (tolower((unsigned char)*s) - 'a' + 10);
        if (hi < 0) {
            hi = v;
        } else {
            if (n >= sizeof(out))
                return -EINVAL;
            out[n++] = (uint8_t)(hi << 4 | v);
            hi = -1;
        }
    }
    if (hi >= 0 || n != sizeof(out))
        return -EINVAL;
    memcpy(ret_sha256, out, sizeof(out));
    return 0;
}

int http_url_escape(const char *s, char **ret_escaped)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t len = strlen(s);
    char *out = malloc(len * 3 + 1), *p = out;

    if (!out)
        return -ENOMEM;
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (isalnum(ch) || ch == '-' || ch == '.' || ch == '_' || ch == '~') {
            *p++ = (char)ch;
        } else {
            *p++ = '%';
            *p++ = hex[ch >> 4];
            *p++ = hex[ch & 15];
        }
    }
    *p = 0;
    *ret_escaped = out;
    return 0;
}

/* ---- sockets and timer ---- */

static void check_done(struct http_client *c);
static void client_finish_close(struct http_client *c);

static void handle_closed(struct http_client *c)
{
    if (--c->open_handles > 0)
        return;
    struct close_notify closed = c->closed;
    log_debug(COMP, "client %p: freed", (void *)c);
    free(c->ca_file);
    free(c);
    close_notify_run(closed);
}

static void on_sock_closed(uv_handle_t *h)
{
    struct sock_ctx *ctx = h->data;
    struct http_client *c = ctx->client;
    struct sock_ctx **pp;

    for (pp = &c->socks; *pp; pp = &(*pp)->next)
        if (*pp == ctx) {
            *pp = ctx->next;
            break;
        }
    free(ctx);
    handle_closed(c);
}

static void sock_close(struct sock_ctx *ctx)
{
    if (ctx->closing)
        return;
    ctx->closing = true;
    (void)uv_poll_stop(&ctx->poll);
    uv_close((uv_handle_t *)&ctx->poll, on_sock_closed);
}

static struct sock_ctx *sock_find(struct http_client *c, curl_socket_t fd)
{
    for (struct sock_ctx *ctx = c->socks; ctx; ctx = ctx->next)
        if (ctx->fd == fd && !ctx->closing)
            return ctx;
    return NULL;
}

static void on_sock_event(uv_poll_t *h, int status, int events)
{
    struct sock_ctx *ctx = h->data;
    struct http_client *c = ctx->client;
    int flags = 0, running = 0;

    if (status < 0)
        flags = CURL_CSELECT_ERR;
    else {
        if (events & UV_READABLE)
            flags |= CURL_CSELECT_IN;
        if (events & UV_WRITABLE)
            flags |= CURL_CSELECT_OUT;
    }
    if (c->state != HTTP_CLIENT_OPEN)
        return;
    (void)curl_multi_socket_action(c->multi, ctx->fd, flags, &running);
    check_done(c);
}

static int on_curl_socket(CURL *easy, curl_socket_t s, int action, void *userp, void *socketp)
{
    struct http_client *c = userp;
    struct sock_ctx *ctx = sock_find(c, s);
    int events = 0;

    (void)easy;
    (void)socketp;
    if (action == CURL_POLL_REMOVE) {
        if (ctx)
            sock_close(ctx);
        return 0;
    }
    if (c->state == HTTP_CLIENT_CLOSED)
        return 0;
    if (!ctx) {
        ctx = calloc(1, sizeof(*ctx));
        if (!ctx)
            return -1;
        ctx->fd = s;
        ctx->client = c;
        if (uv_poll_init_socket(c->loop, &ctx->poll, s) < 0) {
            free(ctx);
            return -1;
        }
        ctx->poll.data = ctx;
        ctx->next = c->socks;
        c->socks = ctx;
        c->open_handles++;
    }
    if (action == CURL_POLL_IN || action == CURL_POLL_INOUT)
        events |= UV_READABLE;
    if (action == CURL_POLL_OUT || action == CURL_POLL_INOUT)
        events |= UV_WRITABLE;
    if (uv_poll_start(&ctx->poll, events, on_sock_event) < 0)
        return -1;
    return 0;
}

static void on_timer(uv_timer_t *t)
{
    struct http_client *c = t->data;
    int running = 0;

    if (c->state != HTTP_CLIENT_OPEN)
        return;
    (void)curl_multi_socket_action(c->multi, CURL_SOCKET_TIMEOUT, 0, &running);
    check_done(c);
}

static int on_curl_timer(CURLM *multi, long timeout_ms, void *userp)
{
    struct http_client *c = userp;

    (void)multi;
    if (timeout_ms < 0 || c->state == HTTP_CLIENT_CLOSED) {
        (void)uv_timer_stop(&c->timer);
        return 0;
    }
    /* 0 means "as soon as possible, but not from inside this callback"; libuv before 1.48
     * can spin on zero timers started from a timer callback, so use 1 ms. */
    (void)uv_timer_start(&c->timer, on_timer, timeout_ms == 0 ? 1 : (uint64_t)timeout_ms, 0);
    return 0;
}

static curl_socket_t on_open_socket(void *clientp, curlsocktype purpose, struct curl_sockaddr *addr)
{
    struct http_client *c = clientp;
    int fd;

    (void)purpose;
    fd = socket(addr->family, addr->socktype | SOCK_CLOEXEC, addr->protocol);
    if (fd < 0)
        return CURL_SOCKET_BAD;
    c->stats.connections_opened++;
    return fd;
}

static int on_close_socket(void *clientp, curl_socket_t fd)
{
    struct http_client *c = clientp;
    struct sock_ctx *ctx = sock_find(c, fd);

    /* Normally curl announced CURL_POLL_REMOVE already; never leave a poll on a closed fd. */
    if (ctx)
        sock_close(ctx);
    return close(fd);
}

/* ---- TLS pinning ---- */

static int pin_verify(X509_STORE_CTX *x, void *arg)
{
    struct http_request *req = arg;
    X509 *cert = X509_STORE_CTX_get0_cert(x);
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int md_len = 0;

    if (!cert || X509_digest(cert, EVP_sha256(), md, &md_len) != 1 || md_len != 32 ||
        memcmp(md, req->client->pin, 32) != 0) {
        req->pin_failed = true;
        X509_STORE_CTX_set_error(x, X509_V_ERR_CERT_REJECTED);
        log_debug(COMP, "request %p: server certificate does not match the pinned SHA-256",
                  (void *)req);
        return 0;
    }
    X509_STORE_CTX_set_error(x, X509_V_OK);
    return 1;
}

static CURLcode on_ssl_ctx(CURL *easy, void *sslctx, void *parm)
{
    (void)easy;
    SSL_CTX_set_verify((SSL_CTX *)sslctx, SSL_VERIFY_PEER, NULL);
    SSL_CTX_set_cert_verify_callback((SSL_CTX *)sslctx, pin_verify, parm);
    return CURLE_OK;
}

/* ---- requests ---- */

static size_t on_header(char *buf, size_t size, size_t n, void *userdata)
{
    struct http_request *req = userdata;
    size_t len = size * n, l = len;

    while (l > 0 && (buf[l - 1] == '\n' || buf[l - 1] == '\r'))
        l--;
    if (l >= 5 && strncmp(buf, "HTTP/", 5) == 0) {
        /* "HTTP/1.1 500 CT is locked (disk)": a new status line starts a new response. */
        const char *p = memchr(buf, ' ', l), *end = buf + l;
        free(req->reason);
        req->reason = NULL;
        free(req->content_type);
        req->content_type = NULL;
        req->status = 0;
        if (p) {
            p++;
            long code = 0;
            while (p < end && isdigit((unsigned char)*p))
                code = code * 10 + (*p++ - '0');
            req->status = code;
            if (p < end && *p == ' ')
                p++;
            size_t rl = MIN((size_t)(end - p), (size_t)HTTP_REASON_MAX);
            req->reason = strndup(p, rl);
            if (!req->reason)
                return 0;
        }
    } else if (l > 13 && strncasecmp(buf, "content-type:", 13) == 0) {
        const char *p = buf + 13, *end = buf + l;
        while (p < end && (*p == ' ' || *p == '\t'))
            p++;
        free(req->content_type);
        req->content_type = strndup(p, (size_t)(end - p));
        if (!req->content_type)
            return 0;
    }
    return len;
}

static size_t on_write(char *buf, size_t size, size_t n, void *userdata)
{
    struct http_request *req = userdata;
    size_t len = size * n;

    int r;

    r = buf_append(&req->body, buf, len);
    if (r == -E2BIG)
        req->too_big = true;
    return r < 0 ? 0 : len;
}

static void request_unlink(struct http_request *req)
{
    struct http_client *c = req->client;

    LIST_REMOVE(c->requests, req);
    c->n_requests--;
}

static void request_free(struct http_request *req)
{
    if (req->easy) {
        (void)curl_multi_remove_handle(req->client->multi, req->easy);
        curl_easy_cleanup(req->easy);
    }
    curl_slist_free_all(req->headers);
    FREE_MANY(req->req_body, req->reason, req->content_type);
    buf_clear(&req->body, true);
    free(req);
}

static void request_complete(struct http_request *req, int r)
{
    struct http_client *c = req->client;
    struct http_response resp = {0};
    http_done_fn cb = req->cb;
    void *ud = req->userdata;

    (void)curl_multi_remove_handle(c->multi, req->easy);
    request_unlink(req);
    c->stats.requests_done++;

    if (r == 0) {
        resp.status = req->status;
        resp.reason = TAKE_PTR(req->reason);
        resp.body_len = req->body.len;
        resp.body = buf_steal(&req->body);
        resp.content_type = TAKE_PTR(req->content_type);
        if (!resp.reason)
            resp.reason = strdup("");
        if (!resp.body)
            resp.body = strdup("");
        if (!resp.reason || !resp.body)
            r = -ENOMEM;
    }
    log_debug(COMP, "request %p: done r=%d status=%ld", (void *)req, r, r == 0 ? resp.status : 0);
    request_free(req);
    if (r == 0)
        cb(0, &resp, ud);
    else
        cb(r, NULL, ud);
    FREE_MANY(resp.reason, resp.body, resp.content_type);
}

static void check_done(struct http_client *c)
{
    CURLMsg *msg;
    int left;

    c->dispatch_depth++;
    while (c->state == HTTP_CLIENT_OPEN && (msg = curl_multi_info_read(c->multi, &left))) {
        if (msg->msg != CURLMSG_DONE)
            continue;
        CURL *easy = msg->easy_handle;
        CURLcode rc = msg->data.result;
        struct http_request *req = NULL;
        (void)curl_easy_getinfo(easy, CURLINFO_PRIVATE, (char **)&req);
        if (!req)
            continue;
        int r = request_errno(req, rc);
        if (r < 0)
            log_debug(COMP, "request %p: curl error %d (%s): %s", (void *)req, (int)rc,
                      curl_easy_strerror(rc), req->errbuf);
        request_complete(req, r);
    }
    c->dispatch_depth--;
    if (c->dispatch_depth == 0 && c->state == HTTP_CLIENT_CLOSING)
        client_finish_close(c);
}

static int request_add_header(struct http_request *req, const char *h)
{
    struct curl_slist *l = curl_slist_append(req->headers, h);

    if (!l)
        return -ENOMEM;
    req->headers = l;
    return 0;
}

/* The caller's headers, Content-Type for a body, and an empty Expect: (no
 * "100-continue" round trip before a body). */
static int request_set_headers(struct http_request *req, const struct http_request_opts *o,
                               size_t nh)
{
    int r;

    for (size_t i = 0; i < nh; i++)
        if ((r = request_add_header(req, o->headers[i])) < 0)
            return r;
    if (o->body && o->content_type) {
        _cleanup_free_ char *h = NULL;
        if (asprintf(&h, "Content-Type: %s", o->content_type) < 0)
            return -ENOMEM;
        if ((r = request_add_header(req, h)) < 0)
            return r;
    }
    return request_add_header(req, "Expect:");
}

/* A pinned fingerprint replaces chain and name checks (on_ssl_ctx compares the pin);
 * otherwise the CA file or the system store, unless verification is off. */
static void request_set_tls(struct http_client *c, struct http_request *req)
{
    CURL *e = req->easy;

    if (c->have_pin) {
        curl_easy_setopt(e, CURLOPT_SSL_VERIFYPEER, 0L);
        curl_easy_setopt(e, CURLOPT_SSL_VERIFYHOST, 0L);
        curl_easy_setopt(e, CURLOPT_SSL_SESSIONID_CACHE, 0L);
        curl_easy_setopt(e, CURLOPT_SSL_CTX_FUNCTION, on_ssl_ctx);
        curl_easy_setopt(e, CURLOPT_SSL_CTX_DATA, req);
    } else if (c->verify) {
        curl_easy_setopt(e, CURLOPT_SSL_VERIFYPEER, 1L);
        curl_easy_setopt(e, CURLOPT_SSL_VERIFYHOST, 2L);
        if (c->ca_file)
            curl_easy_setopt(e, CURLOPT_CAINFO, c->ca_file);
    } else {
        curl_easy_setopt(e, CURLOPT_SSL_VERIFYPEER, 0L);
        curl_easy_setopt(e, CURLOPT_SSL_VERIFYHOST, 0L);
    }
}

/* The method and the body (copied: the caller's buffer may go away). GET, POST and
 * PUT, DELETE and HEAD (without a body); -EINVAL for anything else. */
static int request_set_method(struct http_request *req, const struct http_request_opts *o,
                              const char *method)
{
    CURL *e = req->easy;

    if (o->body) {
        req->req_body = malloc(o->body_len + 1);
        if (!req->req_body)
            return -ENOMEM;
        memcpy(req->req_body, o->body, o->body_len);
        req->req_body[o->body_len] = 0;
    }
    if (strcmp(method, "GET") == 0) {
        curl_easy_setopt(e, CURLOPT_HTTPGET, 1L);
    } else if (strcmp(method, "POST") == 0 || strcmp(method, "PUT") == 0) {
        curl_easy_setopt(e, CURLOPT_POST, 1L);
        curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)(o->body ? o->body_len : 0));
        curl_easy_setopt(e, CURLOPT_POSTFIELDS, req->req_body ? req->req_body : "");
        if (strcmp(method, "PUT") == 0)
            curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, "PUT");
    } else if (strcmp(method, "DELETE") == 0 || strcmp(method, "HEAD") == 0) {
        if (o->body)
            return -EINVAL;
        if (strcmp(method, "HEAD") == 0)
            curl_easy_setopt(e, CURLOPT_NOBODY, 1L);
        else
            curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, "DELETE");
    } else
        return -EINVAL;
    return 0;
}

int http_request_start(struct http_client *c, const struct http_request_opts *o, http_done_fn cb,
                       void *userdata, struct http_request **ret_req)
{
    struct http_request *req;
    const char *method = o && o->method ? o->method : "GET";
    size_t nh = 0;
    uint64_t timeout;
    int r = -ENOMEM;

    if (!c || !o || !o->url || !cb)
        return -EINVAL;
    if (c->state != HTTP_CLIENT_OPEN)
        return -ESHUTDOWN;
    if (strncmp(o->url, "https://", 8) != 0 && strncmp(o->url, "http://", 7) != 0)
        return -EINVAL;
    if (o->headers)
        for (; o->headers[nh]; nh++)
            if (nh >= HTTP_HEADERS_MAX)
                return -E2BIG;

    req = calloc(1, sizeof(*req));
    if (!req)
        return -ENOMEM;
    req->client = c;
    req->body.max = c->body_max;
    req->cb = cb;
    req->userdata = userdata;
    req->easy = curl_easy_init();
    if (!req->easy)
        goto fail;

    if ((r = request_set_headers(req, o, nh)) < 0)
        goto fail;

    timeout = o->timeout_ms ? o->timeout_ms : c->timeout_ms;
    CURL *e = req->easy;
    curl_easy_setopt(e, CURLOPT_PRIVATE, (char *)req);
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, req->errbuf);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
    curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, (long)MIN(timeout, (uint64_t)LONG_MAX));
    curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS,
                     (long)MIN(MIN(c->connect_timeout_ms, timeout), (uint64_t)LONG_MAX));
    curl_easy_setopt(e, CURLOPT_TCP_NODELAY, 1L);
    curl_easy_setopt(e, CURLOPT_TCP_KEEPALIVE, 1L);
    curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(e, CURLOPT_HEADERDATA, req);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_write);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, req);
    curl_easy_setopt(e, CURLOPT_OPENSOCKETFUNCTION, on_open_socket);
    curl_easy_setopt(e, CURLOPT_OPENSOCKETDATA, c);
    curl_easy_setopt(e, CURLOPT_CLOSESOCKETFUNCTION, on_close_socket);
    curl_easy_setopt(e, CURLOPT_CLOSESOCKETDATA, c);
    if (curl_easy_setopt(e, CURLOPT_URL, o->url) != CURLE_OK) {
        r = -EINVAL;
        goto fail;
    }
    if (req->headers)
        curl_easy_setopt(e, CURLOPT_HTTPHEADER, req->headers);

    request_set_tls(c, req);
    if ((r = request_set_method(req, o, method)) < 0)
        goto fail;

    /* Link before adding: curl_multi_add_handle() may call the timer callback. */
    LIST_PREPEND(c->requests, req);
    c->n_requests++;
    if (curl_multi_add_handle(c->multi, e) != CURLM_OK) {
        request_unlink(req);
        curl_easy_cleanup(req->easy);
        req->easy = NULL;
        r = -ENOMEM;
        goto fail;
    }
    c->stats.requests_started++;
    log_debug(COMP, "request %p: %s %s", (void *)req, method, o->url);
    if (ret_req)
        *ret_req = req;
    return 0;

fail:
    if (req->easy) {
        curl_easy_cleanup(req->easy);
        req->easy = NULL;
    }
    request_free(req);
    return r;
}

void http_request_cancel(struct http_request *req)
{
    if (!req)
        return;
    log_debug(COMP, "request %p: cancelled", (void *)req);
    request_unlink(req);
    request_free(req);
}

/* ---- client ---- */

int http_client_new(uv_loop_t *loop, const struct http_client_config *cfg,
                    struct http_client **ret_client)
{
    static bool global_done;
    struct http_client *c;
    int r;

    if (!loop || !cfg || !ret_client)
        return -EINVAL;
    if (!global_done) {
        if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
            return -EIO;
        global_done = true;
    }
    c = calloc(1, sizeof(*c));
    if (!c)
        return -ENOMEM;
    c->loop = loop;
    c->verify = cfg->tls.verify;
    c->connect_timeout_ms =
        cfg->connect_timeout_ms ? cfg->connect_timeout_ms : HTTP_CONNECT_TIMEOUT_MS_DEFAULT;
    c->timeout_ms = cfg->timeout_ms ? cfg->timeout_ms : HTTP_TIMEOUT_MS_DEFAULT;
    c->body_max = cfg->body_max ? cfg->body_max : HTTP_BODY_MAX_DEFAULT;
    if (cfg->tls.fingerprint) {
        r = http_fingerprint_parse(cfg->tls.fingerprint, c->pin);
        if (r < 0)
            goto fail;
        c->have_pin = true;
    }
    if (cfg->tls.ca_file) {
        c->ca_file = strdup(cfg->tls.ca_file);
        if (!c->ca_file) {
            r = -ENOMEM;
            goto fail;
        }
    }
    c->multi = curl_multi_init();
    if (!c->multi) {
        r = -ENOMEM;
        goto fail;
    }
    curl_multi_setopt(c->multi, CURLMOPT_SOCKETFUNCTION, on_curl_socket);
    curl_multi_setopt(c->multi, CURLMOPT_SOCKETDATA, c);
    curl_multi_setopt(c->multi, CURLMOPT_TIMERFUNCTION, on_curl_timer);
    curl_multi_setopt(c->multi, CURLMOPT_TIMERDATA, c);
    unsigned mh =
        cfg->max_host_connections ? cfg->max_host_connections : HTTP_MAX_HOST_CONNECTIONS_DEFAULT;
    curl_multi_setopt(c->multi, CURLMOPT_MAX_HOST_CONNECTIONS, (long)mh);
    curl_multi_setopt(c->multi, CURLMOPT_MAXCONNECTS, (long)mh * 2);

    r = uv_timer_init(loop, &c->timer);
    if (r < 0)
        goto fail;
    c->timer.data = c;
    c->open_handles = 1;
    log_debug(COMP, "client %p: created (tls %s)", (void *)c,
              c->have_pin ? "pinned"
              : c->verify ? "verified"
                          : "NOT verified");
    *ret_client = c;
    return 0;

fail:
    if (c->multi)
        curl_multi_cleanup(c->multi);
    free(c->ca_file);
    free(c);
    return r;
}

static void on_timer_closed(uv_handle_t *h)
{
    handle_closed(h->data);
}

static void client_finish_close(struct http_client *c)
{
    client_set_state(c, HTTP_CLIENT_CLOSED);
    /* Socket callbacks may run from inside curl_multi_cleanup(); the handles they close
     * are freed from the loop afterwards. */
    curl_multi_cleanup(c->multi);
    c->multi = NULL;
    for (struct sock_ctx *ctx = c->socks; ctx; ctx = ctx->next)
        sock_close(ctx);
    (void)uv_timer_stop(&c->timer);
    uv_close((uv_handle_t *)&c->timer, on_timer_closed);
}

void http_client_close(struct http_client *c, void (*close_cb)(void *userdata), void *userdata)
{
    if (!c || c->state != HTTP_CLIENT_OPEN)
        return;
    c->closed = (struct close_notify){.cb = close_cb, .userdata = userdata};
    client_set_state(c, HTTP_CLIENT_CLOSING);
    while (c->requests) {
        struct http_request *req = c->requests;
        http_done_fn cb = req->cb;
        void *ud = req->userdata;
        request_unlink(req);
        request_free(req);
        cb(-ECANCELED, NULL, ud);
    }
    if (c->dispatch_depth == 0)
        client_finish_close(c);
}

size_t http_client_in_flight(const struct http_client *c)
{
    return c ? c->n_requests : 0;
}

void http_client_get_stats(const struct http_client *c, struct http_stats *ret_stats)
{
    *ret_stats = c->stats;
}
