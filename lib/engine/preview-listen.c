/* The HTTP listener of preview URLs ([preview] listen; sandbox-preview.h): reads the head of
 * each connection's first request (llhttp, proto/preview-http.h) within PREVIEW_HEAD_MAX
 * bytes and [preview] header_timeout_ms, with at most [preview] max_pending such
 * connections at once (one more is accepted and closed), then answers:
 *   - a Host that base_url's pattern does not match: 404;
 *   - no token, one that does not verify, expired or revoked: 403;
 *   - a valid token in the query: 302 to the same target without it, setting the cookie
 *     PREVIEW_TOKEN_PARAM (HttpOnly, SameSite=Lax, Secure for https base_urls, until the
 *     preview expires), the connection closed;
 *   - a valid token in the cookie: the connection, its head included, is relayed to the
 *     preview's port (later requests of the connection, WebSocket frames after an upgrade,
 *     pass through unread).
 * Bodies say nothing more than the status. Loop thread only. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "preview-internal.h"
#include "sandbox-preview.h"

#define COMP "preview"
#define PREVIEW_BACKLOG 511

struct pconn {
    struct pconn *next, *prev;
    struct preview_srv *srv;
    uv_tcp_t tcp;
    uv_timer_t timer;
    uv_write_t wreq;
    struct preview_head *head;
    char *reply; /* a 302's text (freed once written), or NULL */
    unsigned closing; /* handles still closing */
    bool done;        /* answered, relayed or dropped: no more reading */
    size_t len;
    char buf[PREVIEW_HEAD_MAX];
};

struct preview_srv {
    struct engine *e;
    uv_tcp_t listener;
    struct pconn *conns;
    unsigned n_conns;
    bool closing;
    unsigned pending; /* the listener's close */
};

static const char reply_400[] = "HTTP/1.1 400 Bad Request\r\nContent-Length: 12\r\n"
                                "Connection: close\r\n\r\nBad Request\n";
static const char reply_403[] = "HTTP/1.1 403 Forbidden\r\nContent-Length: 10\r\n"
                                "Connection: close\r\n\r\nForbidden\n";
static const char reply_404[] = "HTTP/1.1 404 Not Found\r\nContent-Length: 10\r\n"
                                "Connection: close\r\n\r\nNot Found\n";
static const char reply_431[] = "HTTP/1.1 431 Request Header Fields Too Large\r\n"
                                "Content-Length: 0\r\nConnection: close\r\n\r\n";
static const char reply_503[] = "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n"
                                "Connection: close\r\n\r\n";

static void srv_maybe_free(struct preview_srv *srv)
{
    struct engine *e = srv->e;

    if (!srv->closing || srv->pending > 0 || srv->n_conns > 0)
        return;
    e->preview_srv = NULL;
    free(srv);
    engine_handle_closed(e);
}

static void on_pconn_closed(uv_handle_t *h)
{
    struct pconn *c = h->data;
    struct preview_srv *srv = c->srv;

    if (--c->closing > 0)
        return;
    if (c->prev)
        c->prev->next = c->next;
    else
        srv->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    srv->n_conns--;
    preview_head_free(c->head);
    free(c->reply);
    free(c);
    srv_maybe_free(srv);
}

/* Closes c's handles (the socket's unless handed on: tcp_closed). */
static void pconn_close(struct pconn *c)
{
    if (c->closing > 0)
        return;
    c->done = true;
    c->closing = 2;
    uv_close((uv_handle_t *)&c->timer, on_pconn_closed);
    uv_close((uv_handle_t *)&c->tcp, on_pconn_closed);
}

static void on_replied(uv_write_t *w, int status)
{
    pconn_close(w->data);
}

static void pconn_reply(struct pconn *c, const char *text, size_t len)
{
    uv_buf_t b = uv_buf_init((char *)text, (unsigned)len);

    c->done = true;
    uv_read_stop((uv_stream_t *)&c->tcp);
    uv_timer_stop(&c->timer);
    c->wreq.data = c;
    if (uv_write(&c->wreq, (uv_stream_t *)&c->tcp, &b, 1, on_replied) < 0)
        pconn_close(c);
}

#define REPLY(c, text) pconn_reply((c), (text), sizeof(text) - 1)

static void reply_redirect(struct pconn *c, struct sandbox_preview *p, const char *token)
{
    const char *target = preview_head_target(c->head);
    bool https = strncmp(c->srv->e->cfg->preview.base_url, "https:", 6) == 0;
    int n;

    n = asprintf(&c->reply,
                 "HTTP/1.1 302 Found\r\nLocation: %s\r\nSet-Cookie: %s=%s; Path=/; Max-Age=%llu; "
                 "HttpOnly; SameSite=Lax%s\r\nCache-Control: no-store\r\nContent-Length: 0\r\n"
                 "Connection: close\r\n\r\n",
                 target[0] ? target : "/", PREVIEW_TOKEN_PARAM, token,
                 (unsigned long long)preview_remaining_s(p), https ? "; Secure" : "");
    if (n < 0) {
        c->reply = NULL;
        pconn_close(c);
        return;
    }
    pconn_reply(c, c->reply, (size_t)n);
}

/* Hands the socket to the preview's relay: a duplicate of its descriptor goes on, c's
 * handle is closed. */
static void relay(struct pconn *c, struct sandbox_preview *p)
{
    uv_os_fd_t fd;
    int dupfd, r;

    c->done = true;
    uv_read_stop((uv_stream_t *)&c->tcp);
    if (uv_fileno((uv_handle_t *)&c->tcp, &fd) < 0 || (dupfd = fcntl(fd, F_DUPFD_CLOEXEC, 3)) < 0) {
        REPLY(c, reply_503);
        return;
    }
    r = preview_relay(p, dupfd, c->buf, c->len);
    if (r < 0) {
        log_debug(COMP, "relay refused: %s", strerror(-r));
        REPLY(c, reply_503);
        return;
    }
    pconn_close(c);
}

static void decide(struct pconn *c)
{
    struct engine *e = c->srv->e;
    const char *qtok = preview_head_query_token(c->head);
    const char *ctok = preview_head_cookie_token(c->head);
    char id[PARAMS_ID_MAX + 1];
    struct sandbox_preview *p;
    unsigned port;

    if (!preview_host_match(e->cfg->preview.base_url, preview_head_host(c->head), &port, id)) {
        REPLY(c, reply_404);
        return;
    }
    if (qtok) {
        p = preview_find(e, id, port, qtok);
        if (p)
            reply_redirect(c, p, qtok);
        else
            REPLY(c, reply_403);
        return;
    }
    p = preview_find(e, id, port, ctok);
    if (!p) {
        REPLY(c, reply_403);
        return;
    }
    relay(c, p);
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    struct pconn *c = h->data;

    *buf = uv_buf_init(c->buf + c->len, (unsigned)(sizeof c->buf - c->len));
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
    struct pconn *c = s->data;

    if (c->done)
        return;
    if (nread == UV_ENOBUFS) {
        REPLY(c, reply_431);
        return;
    }
    if (nread < 0) {
        pconn_close(c);
        return;
    }
    switch (preview_head_feed(c->head, c->buf + c->len, (size_t)nread)) {
    case PREVIEW_HEAD_MORE:
        c->len += (size_t)nread;
        if (c->len >= sizeof c->buf)
            REPLY(c, reply_431);
        return;
    case PREVIEW_HEAD_DONE:
        c->len += (size_t)nread;
        decide(c);
        return;
    case PREVIEW_HEAD_LARGE:
        REPLY(c, reply_431);
        return;
    case PREVIEW_HEAD_BAD:
    default:
        REPLY(c, reply_400);
        return;
    }
}

static void on_header_timeout(uv_timer_t *t)
{
    struct pconn *c = t->data;

    log_debug(COMP, "request head not read in time: connection closed");
    pconn_close(c);
}

static void refuse(struct preview_srv *srv)
{
    uv_tcp_t *s = malloc(sizeof *s);

    if (!s)
        return;
    if (uv_tcp_init(srv->e->loop, s) < 0) {
        free(s);
        return;
    }
    (void)uv_accept((uv_stream_t *)&srv->listener, (uv_stream_t *)s);
    uv_close((uv_handle_t *)s, (uv_close_cb)free);
}

static void on_connection(uv_stream_t *server, int status)
{
    struct preview_srv *srv = server->data;
    const struct config_preview *cp = &srv->e->cfg->preview;
    struct pconn *c;

    if (status < 0 || srv->closing)
        return;
    if (srv->n_conns >= cp->max_pending || !(c = calloc(1, sizeof *c))) {
        refuse(srv);
        return;
    }
    c->srv = srv;
    c->head = preview_head_new();
    if (!c->head || uv_tcp_init(srv->e->loop, &c->tcp) < 0) {
        preview_head_free(c->head);
        free(c);
        refuse(srv);
        return;
    }
    (void)uv_timer_init(srv->e->loop, &c->timer);
    c->tcp.data = c->timer.data = c;
    c->next = srv->conns;
    if (srv->conns)
        srv->conns->prev = c;
    srv->conns = c;
    srv->n_conns++;
    if (uv_accept(server, (uv_stream_t *)&c->tcp) < 0 ||
        uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read) < 0) {
        pconn_close(c);
        return;
    }
    (void)uv_timer_start(&c->timer, on_header_timeout, cp->header_timeout_ms, 0);
}

static void on_listener_closed(uv_handle_t *h)
{
    struct preview_srv *srv = h->data;

    srv->pending--;
    srv_maybe_free(srv);
}

/* sandbox.c's hook at engine_close(). */
static void preview_srv_stop(struct engine *e)
{
    struct preview_srv *srv = e->preview_srv;

    if (!srv || srv->closing)
        return;
    srv->closing = true;
    e->close_pending++;
    srv->pending++;
    uv_close((uv_handle_t *)&srv->listener, on_listener_closed);
    for (struct pconn *c = srv->conns; c; c = c->next)
        pconn_close(c);
    srv_maybe_free(srv);
}

int engine_preview_start(struct engine *e, char **ret_error)
{
    const struct config_preview *cp = &e->cfg->preview;
    struct preview_srv *srv;
    struct sockaddr_in sin = {.sin_family = AF_INET};
    char addr[INET_ADDRSTRLEN] = "?";
    int r;

    *ret_error = NULL;
    if (cp->listen_port == 0)
        return 0;
    r = preview_key_load(e, ret_error);
    if (r < 0)
        return r;
    srv = calloc(1, sizeof *srv);
    if (!srv)
        return -ENOMEM;
    srv->e = e;
    sin.sin_port = htons((uint16_t)cp->listen_port);
    sin.sin_addr.s_addr = htonl(cp->listen_ip);
    inet_ntop(AF_INET, &sin.sin_addr, addr, sizeof addr);
    r = uv_tcp_init(e->loop, &srv->listener);
    if (r < 0) {
        free(srv);
        return r;
    }
    srv->listener.data = srv;
    e->preview_srv = srv;
    e->preview_srv_stop = preview_srv_stop;
    r = uv_tcp_bind(&srv->listener, (const struct sockaddr *)&sin, 0);
    if (r >= 0)
        r = uv_listen((uv_stream_t *)&srv->listener, PREVIEW_BACKLOG, on_connection);
    if (r < 0) {
        if (asprintf(ret_error, "[preview] listen %s:%u: %s", addr, cp->listen_port,
                     uv_strerror(r)) < 0)
            *ret_error = NULL;
        return r; /* the listener is closed with the engine */
    }
    log_info(COMP, "preview URLs on http://%s:%u for %s", addr, cp->listen_port, cp->base_url);
    return 0;
}
