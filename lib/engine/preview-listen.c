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
 * Bodies say nothing more than the status. With [preview] tls_certificate the connection
 * is TLS (preview-tls.h): the head is read from the decrypted stream and, once relayed,
 * plaintext passes through a socket pair whose other end the relay has, each direction
 * held back while the other's write queue is past PREVIEW_TLS_QUEUE_MAX. Loop thread
 * only. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "log.h"
#include "macro.h"
#include "preview-internal.h"
#include "preview-tls.h"
#include "sandbox-preview.h"
#include "tcp-listen.h"

#define COMP "preview"
#define PREVIEW_BACKLOG 511

/* Bytes queued for writing on one side of a relayed TLS connection before the other side
 * is no longer read. */
#define PREVIEW_TLS_QUEUE_MAX (256u * 1024u)
#define PREVIEW_TLS_READ 16384

struct pconn {
    struct pconn *next, *prev;
    struct preview_srv *srv;
    uv_tcp_t tcp;
    uv_timer_t timer;
    uv_write_t wreq;
    struct preview_head *head;
    char *reply;      /* a 302's text (freed once written), or NULL */
    unsigned closing; /* handles still closing */
    bool done;        /* answered, relayed or dropped: no more reading */
    /* TLS ([preview] tls_certificate): the session, and once relayed the daemon's end of the
     * socket pair whose other end the relay (sshforward.h) reads and writes */
    struct ptls *tls;
    uv_pipe_t pipe;
    bool relaying, pipe_open, tcp_paused, pipe_paused;
    char *rbuf; /* TLS: ciphertext read */
    size_t len;
    char buf[PREVIEW_HEAD_MAX];
};

struct preview_srv {
    struct tcp_srv tcp;
    struct engine *e;
    struct ptls_ctx *tls_ctx;
    struct pconn *conns;
    unsigned n_pending; /* connections whose head is being read */
};

/* One write of a copy of data (TLS records, plaintext for the relay). */
struct wbuf {
    uv_write_t w;
    struct pconn *c;
    bool last; /* the connection is closed once it is written */
    char data[];
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

static void on_srv_freed(struct tcp_srv *t)
{
    struct preview_srv *srv = container_of(t, struct preview_srv, tcp);
    struct engine *e = srv->e;

    e->preview_srv = NULL;
    ptls_ctx_free(srv->tls_ctx);
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
    if (!c->relaying)
        srv->n_pending--;
    preview_head_free(c->head);
    ptls_free(c->tls);
    free(c->rbuf);
    free(c->reply);
    free(c);
    tcp_srv_conn_gone(&srv->tcp);
}

/* Closes c's handles (a socket handed to a relay lives on as its duplicate there). */
static void pconn_close(struct pconn *c)
{
    if (c->closing > 0)
        return;
    c->done = true;
    c->closing = c->pipe_open ? 3 : 2;
    uv_close((uv_handle_t *)&c->timer, on_pconn_closed);
    uv_close((uv_handle_t *)&c->tcp, on_pconn_closed);
    if (c->pipe_open)
        uv_close((uv_handle_t *)&c->pipe, on_pconn_closed);
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf);
static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf);
static void on_pipe_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf);
static void on_pipe_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf);

/* Reading side s again once the other side's queue drained. */
static void on_wbuf_written(uv_write_t *w, int status)
{
    struct wbuf *b = w->data;
    struct pconn *c = b->c;
    uv_stream_t *h = w->handle;

    free(b);
    if (c->closing > 0)
        return;
    if (status < 0) {
        pconn_close(c);
        return;
    }
    if (h == (uv_stream_t *)&c->pipe && c->tcp_paused &&
        uv_stream_get_write_queue_size((uv_stream_t *)&c->pipe) < PREVIEW_TLS_QUEUE_MAX / 2) {
        c->tcp_paused = false;
        if (uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read) < 0)
            pconn_close(c);
    } else if (h == (uv_stream_t *)&c->tcp && c->pipe_paused &&
               uv_stream_get_write_queue_size((uv_stream_t *)&c->tcp) < PREVIEW_TLS_QUEUE_MAX / 2) {
        c->pipe_paused = false;
        if (uv_read_start((uv_stream_t *)&c->pipe, on_pipe_alloc, on_pipe_read) < 0)
            pconn_close(c);
    }
}

static void on_last_written(uv_write_t *w, int status)
{
    struct wbuf *b = w->data;
    struct pconn *c = b->c;

    free(b);
    if (c->closing == 0)
        pconn_close(c);
}

/* Writes a copy of data[0, n) to s; on failure the connection is closed. */
static void write_copy(struct pconn *c, uv_stream_t *s, const char *data, size_t n, bool last)
{
    struct wbuf *b = malloc(sizeof *b + n);
    uv_buf_t ub;

    if (!b) {
        pconn_close(c);
        return;
    }
    b->c = c;
    b->last = last;
    b->w.data = b;
    memcpy(b->data, data, n);
    ub = uv_buf_init(b->data, (unsigned)n);
    if (uv_write(&b->w, s, &ub, 1, last ? on_last_written : on_wbuf_written) < 0) {
        free(b);
        pconn_close(c);
    }
}

/* Sends what TLS has to send (handshake, records, alerts). */
static void tls_flush(struct pconn *c, bool last)
{
    char *out;
    size_t n;

    if (ptls_take(c->tls, &out, &n) < 0) {
        pconn_close(c);
        return;
    }
    if (out)
        write_copy(c, (uv_stream_t *)&c->tcp, out, n, last);
    else if (last)
        pconn_close(c);
    free(out);
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
    if (c->tls) {
        if (ptls_write(c->tls, text, len) < 0) {
            pconn_close(c);
            return;
        }
        ptls_shutdown(c->tls);
        tls_flush(c, true);
        return;
    }
    c->wreq.data = c;
    if (uv_write(&c->wreq, (uv_stream_t *)&c->tcp, &b, 1, on_replied) < 0)
        pconn_close(c);
}

#define REPLY(c, text) pconn_reply((c), (text), sizeof(text) - 1)

/* The redirect's Location: the request's path on the same host, never another host's
 * ("//host", "/\\host", an absolute URL): "/" then. */
static const char *local_target(const char *target)
{
    if (target[0] != '/' || target[1] == '/' || target[1] == '\\')
        return "/";
    return target;
}

static void reply_redirect(struct pconn *c, struct sandbox_preview *p, const char *token)
{
    const char *target = preview_head_target(c->head);
    bool https = strncmp(c->srv->e->cfg->preview.base_url, "https:", 6) == 0;
    int n;

    n = asprintf(&c->reply,
                 "HTTP/1.1 302 Found\r\nLocation: %s\r\nSet-Cookie: %s=%s; Path=/; Max-Age=%llu; "
                 "HttpOnly; SameSite=Lax%s\r\nCache-Control: no-store\r\nContent-Length: 0\r\n"
                 "Connection: close\r\n\r\n",
                 local_target(target), PREVIEW_TOKEN_PARAM, token,
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
    r = preview_relay(p, dupfd, true, c->buf, c->len);
    if (r < 0) {
        log_debug(COMP, "relay refused: %s", strerror(-r));
        REPLY(c, reply_503);
        return;
    }
    pconn_close(c);
}

static void on_pipe_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    struct pconn *c = h->data;

    *buf = uv_buf_init(c->buf, sizeof c->buf);
}

/* From the relay (the sandbox's side): encrypted to the client. */
static void on_pipe_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
    struct pconn *c = s->data;

    if (c->closing > 0 || nread == 0)
        return;
    if (nread < 0) { /* the relay ended: the sandbox's side closed, or the preview did */
        uv_read_stop(s);
        ptls_shutdown(c->tls);
        tls_flush(c, true);
        return;
    }
    if (ptls_write(c->tls, buf->base, (size_t)nread) < 0) {
        pconn_close(c);
        return;
    }
    tls_flush(c, false);
    if (c->closing == 0 &&
        uv_stream_get_write_queue_size((uv_stream_t *)&c->tcp) > PREVIEW_TLS_QUEUE_MAX) {
        uv_read_stop(s);
        c->pipe_paused = true;
    }
}

/* TLS: the relay gets one end of a socket pair, the connection keeps the other and passes
 * plaintext both ways. */
static void relay_tls(struct pconn *c, struct sandbox_preview *p)
{
    int sp[2], r;

    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) < 0) {
        REPLY(c, reply_503);
        return;
    }
    if (uv_pipe_init(c->srv->e->loop, &c->pipe, 0) < 0) {
        close(sp[0]);
        close(sp[1]);
        REPLY(c, reply_503);
        return;
    }
    c->pipe.data = c;
    c->pipe_open = true;
    if (uv_pipe_open(&c->pipe, sp[1]) < 0) {
        close(sp[0]);
        close(sp[1]);
        REPLY(c, reply_503);
        return;
    }
    r = preview_relay(p, sp[0], false, c->buf, c->len);
    if (r < 0) {
        log_debug(COMP, "relay refused: %s", strerror(-r));
        REPLY(c, reply_503);
        return;
    }
    c->relaying = true;
    c->srv->n_pending--;
    uv_timer_stop(&c->timer);
    if (uv_read_start((uv_stream_t *)&c->pipe, on_pipe_alloc, on_pipe_read) < 0)
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
    if (c->tls)
        relay_tls(c, p);
    else
        relay(c, p);
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    struct pconn *c = h->data;

    if (c->tls)
        *buf = uv_buf_init(c->rbuf, PREVIEW_TLS_READ);
    else
        *buf = uv_buf_init(c->buf + c->len, (unsigned)(sizeof c->buf - c->len));
}

/* n more bytes of the head at c->buf + c->len. */
static void head_input(struct pconn *c, size_t n)
{
    switch (preview_head_feed(c->head, c->buf + c->len, n)) {
    case PREVIEW_HEAD_MORE:
        c->len += n;
        if (c->len >= sizeof c->buf)
            REPLY(c, reply_431);
        return;
    case PREVIEW_HEAD_DONE:
        c->len += n;
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

/* TLS records in: the handshake, then the head, then (relaying) plaintext for the relay. */
static void tls_input(struct pconn *c, const char *data, size_t n)
{
    int r = ptls_put(c->tls, data, n);

    while (r >= 0 && c->closing == 0 && (!c->done || c->relaying)) {
        if (c->relaying) {
            r = ptls_read(c->tls, c->buf, sizeof c->buf);
            if (r > 0)
                write_copy(c, (uv_stream_t *)&c->pipe, c->buf, (size_t)r, false);
        } else if (c->len >= sizeof c->buf) {
            REPLY(c, reply_431);
            return;
        } else {
            r = ptls_read(c->tls, c->buf + c->len, sizeof c->buf - c->len);
            if (r > 0)
                head_input(c, (size_t)r);
        }
        if (r == 0)
            break;
    }
    if (r < 0) {
        pconn_close(c);
        return;
    }
    if (c->closing == 0 && (!c->done || c->relaying))
        tls_flush(c, false);
    if (c->relaying && c->closing == 0 &&
        uv_stream_get_write_queue_size((uv_stream_t *)&c->pipe) > PREVIEW_TLS_QUEUE_MAX) {
        uv_read_stop((uv_stream_t *)&c->tcp);
        c->tcp_paused = true;
    }
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
    struct pconn *c = s->data;

    if (c->closing > 0 || (c->done && !c->relaying))
        return;
    if (nread == UV_ENOBUFS && !c->tls) {
        REPLY(c, reply_431);
        return;
    }
    if (nread < 0) {
        pconn_close(c);
        return;
    }
    if (c->tls)
        tls_input(c, buf->base, (size_t)nread);
    else
        head_input(c, (size_t)nread);
}

static void on_header_timeout(uv_timer_t *t)
{
    struct pconn *c = t->data;

    log_debug(COMP, "request head not read in time: connection closed");
    pconn_close(c);
}

static void on_connection(uv_stream_t *server, int status)
{
    struct preview_srv *srv = container_of(server->data, struct preview_srv, tcp);
    const struct config_preview *cp = &srv->e->cfg->preview;
    struct pconn *c;

    if (status < 0 || srv->tcp.closing)
        return;
    if (srv->n_pending >= cp->max_pending || !(c = calloc(1, sizeof *c))) {
        tcp_srv_refuse(&srv->tcp);
        return;
    }
    c->srv = srv;
    c->head = preview_head_new();
    if (srv->tls_ctx) {
        c->tls = ptls_new(srv->tls_ctx);
        c->rbuf = malloc(PREVIEW_TLS_READ);
    }
    if (!c->head || (srv->tls_ctx && (!c->tls || !c->rbuf)) ||
        uv_tcp_init(srv->e->loop, &c->tcp) < 0) {
        preview_head_free(c->head);
        ptls_free(c->tls);
        free(c->rbuf);
        free(c);
        tcp_srv_refuse(&srv->tcp);
        return;
    }
    (void)uv_timer_init(srv->e->loop, &c->timer);
    c->tcp.data = c->timer.data = c;
    c->next = srv->conns;
    if (srv->conns)
        srv->conns->prev = c;
    srv->conns = c;
    tcp_srv_conn_added(&srv->tcp);
    srv->n_pending++;
    if (uv_accept(server, (uv_stream_t *)&c->tcp) < 0 ||
        uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read) < 0) {
        pconn_close(c);
        return;
    }
    (void)uv_timer_start(&c->timer, on_header_timeout, cp->header_timeout_ms, 0);
}

/* sandbox.c's hook at engine_close(). */
static void preview_srv_stop(struct engine *e)
{
    struct preview_srv *srv = e->preview_srv;

    if (!srv || !tcp_srv_close(&srv->tcp))
        return;
    e->close_pending++;
    for (struct pconn *c = srv->conns; c; c = c->next)
        pconn_close(c);
}

int engine_preview_start(struct engine *e, char **ret_error)
{
    const struct config_preview *cp = &e->cfg->preview;
    struct preview_srv *srv;
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
    if (cp->tls_certificate) {
        r = ptls_ctx_new(cp->tls_certificate, cp->tls_key, &srv->tls_ctx, ret_error);
        if (r < 0) {
            free(srv);
            return r;
        }
    }
    r = tcp_srv_init(&srv->tcp, e->loop, on_srv_freed);
    if (r < 0) {
        ptls_ctx_free(srv->tls_ctx);
        free(srv);
        return r;
    }
    e->preview_srv = srv;
    e->preview_srv_stop = preview_srv_stop;
    r = tcp_srv_listen(&srv->tcp, cp->listen_ip, cp->listen_port, PREVIEW_BACKLOG, on_connection,
                       "[preview] listen", addr, ret_error);
    if (r < 0)
        return r; /* the listener is closed with the engine */
    log_info(COMP, "preview URLs on %s://%s:%u for %s", srv->tls_ctx ? "https" : "http", addr,
             cp->listen_port, cp->base_url);
    return 0;
}
