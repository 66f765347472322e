/* The egress proxy of allow-lists' domain names ([egress] listen; docs/protocol.md, "Egress
 * allow-lists"). A connection belongs to the sandbox whose address is its source address
 * (a sandbox's firewall lets it send from its own address only); from any other address,
 * or from a sandbox whose list holds no name, it is closed at once. Then, within
 * [egress] header_timeout_ms:
 *   - the request head is read (proto/egress-http.h, at most EGRESS_HEAD_MAX bytes: 431
 *     past it, 400 when malformed) and checked against the sandbox's list (403);
 *   - the host is resolved off the loop (uv_getaddrinfo) and its first IPv4 address is
 *     used when it is public (egress_entry_public()): a name that resolves only to private
 *     addresses, or not at all, is 502;
 *   - CONNECT: once connected, "200" and the tunnel's first TLS record is read
 *     (proto/egress-sni.h): its ClientHello must name the CONNECT's host, else the
 *     connection is closed before a byte reaches the server;
 *   - plain HTTP: the head is sent in origin form, without hop-by-hop headers and with
 *     "Connection: close", so that a later request of the connection cannot name another
 *     host on the same upstream connection.
 * Then bytes are relayed both ways, each direction held back while the other side's write
 * queue is past EPROXY_QUEUE_MAX, until both ends closed or [egress] idle_timeout_s passed
 * without a byte. A sandbox has at most [egress] max_connections at once (more are closed
 * at accept); its connections end when it goes away. Loop thread only. */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

#include "egress-http.h"
#include "egress-proxy.h"
#include "egress-sni.h"
#include "egress.h"
#include "log.h"
#include "macro.h"
#include "sandbox-internal.h"
#include "tcp-listen.h"

#define COMP "egress"
#define EPROXY_BACKLOG 511
#define EPROXY_READ 65536
#define EPROXY_QUEUE_MAX (256u * 1024u)
#define EPROXY_BUF EGRESS_HELLO_MAX /* the larger of a head and a first TLS record */

enum eproxy_phase {
    EP_HEAD,    /* reading the request head */
    EP_RESOLVE, /* uv_getaddrinfo() runs */
    EP_CONNECT, /* uv_tcp_connect() runs */
    EP_HELLO,   /* CONNECT answered: reading the ClientHello */
    EP_RELAY,   /* bytes both ways */
    EP_REPLY,   /* an error reply being written: closed once written */
    EP_CLOSING, /* answered or failed: handles closing */
};

struct econn {
    struct econn *next, *prev;
    struct eproxy_srv *srv;
    char sb_id[PARAMS_ID_MAX + 1];
    struct egress_allow *allow;
    enum eproxy_phase phase;
    uv_tcp_t down, up;
    uv_timer_t timer;
    uv_getaddrinfo_t gai;
    uv_connect_t conn;
    unsigned closing; /* handles still closing */
    bool up_open;     /* up initialised */
    bool gai_pending; /* the resolve's callback not run yet */
    bool down_eof, up_eof, down_paused, up_paused;
    struct egress_request req;
    size_t len;
    char buf[EPROXY_BUF];
};

struct eproxy_srv {
    struct tcp_srv tcp;
    struct engine *e;
    struct econn *conns;
};

/* One write of data the write owns. */
struct ewrite {
    uv_write_t w;
    struct econn *c;
    char *data;
    bool last; /* the connection is closed once it is written */
};

static const char reply_400[] = "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n"
                                "Connection: close\r\n\r\n";
static const char reply_403[] = "HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n"
                                "Connection: close\r\n\r\n";
static const char reply_431[] = "HTTP/1.1 431 Request Header Fields Too Large\r\n"
                                "Content-Length: 0\r\nConnection: close\r\n\r\n";
static const char reply_502[] = "HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n"
                                "Connection: close\r\n\r\n";
static const char reply_200[] = "HTTP/1.1 200 Connection established\r\n\r\n";

static void on_srv_freed(struct tcp_srv *t)
{
    struct eproxy_srv *srv = container_of(t, struct eproxy_srv, tcp);
    struct engine *e = srv->e;

    e->eproxy = NULL;
    free(srv);
    engine_handle_closed(e);
}

static void conn_maybe_free(struct econn *c)
{
    struct eproxy_srv *srv = c->srv;

    if (c->closing > 0 || c->gai_pending)
        return;
    if (c->prev)
        c->prev->next = c->next;
    else
        srv->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    free(c->allow);
    free(c);
    tcp_srv_conn_gone(&srv->tcp);
}

static void on_handle_closed(uv_handle_t *h)
{
    struct econn *c = h->data;

    c->closing--;
    conn_maybe_free(c);
}

static void conn_close(struct econn *c)
{
    if (c->phase == EP_CLOSING)
        return;
    c->phase = EP_CLOSING;
    if (c->gai_pending)
        (void)uv_cancel((uv_req_t *)&c->gai);
    c->closing = c->up_open ? 3 : 2;
    uv_close((uv_handle_t *)&c->timer, on_handle_closed);
    uv_close((uv_handle_t *)&c->down, on_handle_closed);
    if (c->up_open)
        uv_close((uv_handle_t *)&c->up, on_handle_closed);
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf);
static void on_timeout(uv_timer_t *t);
static void on_down_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf);
static void on_up_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf);

static void on_linger_shutdown(uv_shutdown_t *req, int status)
{
    (void)status;
    free(req);
}

/* An error reply written: the client's end awaited (what it still sends read and dropped,
 * within header_timeout_ms), so that closing does not reset the connection before the
 * client read the reply. */
static void reply_linger(struct econn *c)
{
    uv_shutdown_t *sr = malloc(sizeof *sr);

    if (!sr || uv_shutdown(sr, (uv_stream_t *)&c->down, on_linger_shutdown) < 0) {
        free(sr);
        conn_close(c);
        return;
    }
    if (uv_read_start((uv_stream_t *)&c->down, on_alloc, on_down_read) < 0)
        conn_close(c); /* the shutdown's callback, cancelled, frees sr */
}

static void on_written(uv_write_t *w, int status)
{
    struct ewrite *ew = w->data;
    struct econn *c = ew->c;
    uv_stream_t *h = w->handle;
    bool last = ew->last;

    free(ew->data);
    free(ew);
    if (c->phase == EP_CLOSING)
        return;
    if (status == 0 && last && c->phase == EP_REPLY) {
        reply_linger(c);
        return;
    }
    if (status < 0 || last) {
        conn_close(c);
        return;
    }
    /* a queue drained: read its source again */
    if (h == (uv_stream_t *)&c->up && c->down_paused &&
        uv_stream_get_write_queue_size(h) < EPROXY_QUEUE_MAX / 2) {
        c->down_paused = false;
        if (uv_read_start((uv_stream_t *)&c->down, on_alloc, on_down_read) < 0)
            conn_close(c);
    } else if (h == (uv_stream_t *)&c->down && c->up_paused &&
               uv_stream_get_write_queue_size(h) < EPROXY_QUEUE_MAX / 2) {
        c->up_paused = false;
        if (uv_read_start((uv_stream_t *)&c->up, on_alloc, on_up_read) < 0)
            conn_close(c);
    }
}

/* Writes data (n bytes, taken: freed once written) to s; on failure c is closed. */
static void write_owned(struct econn *c, uv_stream_t *s, char *data, size_t n, bool last)
{
    struct ewrite *ew = malloc(sizeof *ew);
    uv_buf_t ub = uv_buf_init(data, (unsigned)n);

    if (!ew) {
        free(data);
        conn_close(c);
        return;
    }
    *ew = (struct ewrite){.c = c, .data = data, .last = last};
    ew->w.data = ew;
    if (uv_write(&ew->w, s, &ub, 1, on_written) < 0) {
        free(data);
        free(ew);
        conn_close(c);
    }
}

static void write_copy(struct econn *c, uv_stream_t *s, const char *data, size_t n, bool last)
{
    char *d = malloc(n ? n : 1);

    if (!d) {
        conn_close(c);
        return;
    }
    memcpy(d, data, n);
    write_owned(c, s, d, n, last);
}

/* Answers the client with a fixed reply and closes the connection once it is written. */
static void reply(struct econn *c, const char *text, const char *why)
{
    log_debug(COMP, "%s: %.3s: %s", c->sb_id, text + 9, why);
    uv_read_stop((uv_stream_t *)&c->down);
    if (c->up_open)
        uv_read_stop((uv_stream_t *)&c->up);
    c->phase = EP_REPLY;
    write_copy(c, (uv_stream_t *)&c->down, text, strlen(text), true);
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    struct econn *c = h->data;

    (void)suggested;
    if (h == (uv_handle_t *)&c->down && (c->phase == EP_HEAD || c->phase == EP_HELLO)) {
        /* the head or the hello: into buf, which a full buf refuses (ENOBUFS) */
        *buf = uv_buf_init(c->buf + c->len, (unsigned)(sizeof c->buf - c->len));
        return;
    }
    buf->base = malloc(EPROXY_READ);
    buf->len = buf->base ? EPROXY_READ : 0;
}

/* One side's end passed on to the other once its queued writes went out: the connection
 * ends when both sides ended. */
static void on_shutdown(uv_shutdown_t *req, int status)
{
    struct econn *c = req->data;

    free(req);
    if (c->phase == EP_CLOSING)
        return;
    if (status < 0 || (c->down_eof && c->up_eof))
        conn_close(c);
}

static void idle_restart(struct econn *c)
{
    (void)uv_timer_again(&c->timer);
}

/* Relays one read of from to to (data owned); EOF shuts to's writing down. */
static void relay(struct econn *c, uv_stream_t *from, uv_stream_t *to, ssize_t nread,
                  const uv_buf_t *buf, bool *from_eof, bool *from_paused)
{
    if (nread == 0) {
        free(buf->base);
        return;
    }
    if (nread < 0) {
        free(buf->base);
        if (nread != UV_EOF) {
            conn_close(c);
            return;
        }
        *from_eof = true;
        uv_read_stop(from);
        uv_shutdown_t *sr = malloc(sizeof *sr);

        if (sr)
            sr->data = c;
        if (!sr || uv_shutdown(sr, to, on_shutdown) < 0) {
            free(sr);
            conn_close(c);
        }
        return;
    }
    idle_restart(c);
    write_owned(c, to, buf->base, (size_t)nread, false);
    if (c->phase != EP_CLOSING && uv_stream_get_write_queue_size(to) > EPROXY_QUEUE_MAX) {
        uv_read_stop(from);
        *from_paused = true;
    }
}

static void on_up_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
    struct econn *c = s->data;

    if (c->phase != EP_RELAY) {
        free(buf->base);
        return;
    }
    relay(c, s, (uv_stream_t *)&c->down, nread, buf, &c->up_eof, &c->up_paused);
}

/* The relay's start: what was read past the head (or the hello) goes up first. */
static void relay_start(struct econn *c, const char *first, size_t n)
{
    uint64_t idle_ms = 1000u * (uint64_t)c->srv->e->cfg->egress.idle_timeout_s;

    c->phase = EP_RELAY;
    (void)uv_timer_start(&c->timer, on_timeout, idle_ms, idle_ms);
    if (n > 0)
        write_copy(c, (uv_stream_t *)&c->up, first, n, false);
    if (c->phase == EP_CLOSING)
        return;
    if (uv_read_start((uv_stream_t *)&c->up, on_alloc, on_up_read) < 0 ||
        uv_read_start((uv_stream_t *)&c->down, on_alloc, on_down_read) < 0) {
        conn_close(c);
    }
}

/* A header line that must not be passed on to the server (RFC 9110 7.6.1). */
static bool hop_by_hop(const char *line, size_t n)
{
    static const char *const names[] = {
        "connection:", "proxy-connection:", "keep-alive:", "proxy-authorization:",
        "te:",         "upgrade:"};

    for (size_t i = 0; i < ELEMENTSOF(names); i++) {
        size_t k = strlen(names[i]);

        if (n >= k && strncasecmp(line, names[i], k) == 0)
            return true;
    }
    return false;
}

/* Plain HTTP: the head in origin form, without hop-by-hop headers, with a Host (the
 * target's when the client sent none) and "Connection: close". */
static void http_forward(struct econn *c)
{
    const struct egress_request *r = &c->req;
    const char *line = memchr(c->buf, '\n', r->head_len);
    size_t cap = r->head_len + 64 + sizeof r->host + 8, k = 0;
    char *out = malloc(cap);
    bool host = false;

    if (!out || !line) {
        free(out);
        conn_close(c);
        return;
    }
    k += (size_t)snprintf(out, cap, "%s ", r->method);
    if (r->target_len > 0) {
        memcpy(out + k, c->buf + r->target_off, r->target_len);
        k += r->target_len;
    } else
        out[k++] = '/';
    k += (size_t)snprintf(out + k, cap - k, " HTTP/1.%c\r\n", r->http10 ? '0' : '1');
    for (const char *p = line + 1; p < c->buf + r->head_len - 2;) {
        const char *end = memchr(p, '\n', (size_t)(c->buf + r->head_len - p));
        size_t n = (size_t)(end - p) + 1;

        if (!hop_by_hop(p, n)) {
            memcpy(out + k, p, n);
            k += n;
        }
        host = host || (n >= 5 && strncasecmp(p, "host:", 5) == 0);
        p += n;
    }
    if (!host && r->port == 80) /* HTTP/1.0 without one: the target's */
        k += (size_t)snprintf(out + k, cap - k, "Host: %s\r\n", r->host);
    else if (!host)
        k += (size_t)snprintf(out + k, cap - k, "Host: %s:%u\r\n", r->host, r->port);
    k += (size_t)snprintf(out + k, cap - k, "Connection: close\r\n\r\n");
    write_owned(c, (uv_stream_t *)&c->up, out, k, false);
    if (c->phase != EP_CLOSING)
        relay_start(c, c->buf + r->head_len, c->len - r->head_len);
}

/* The tunnel's first bytes: relayed when they are a ClientHello naming the CONNECT's host. */
static void hello_input(struct econn *c)
{
    const char *why = NULL;
    char sni[EGRESS_NAME_MAX + 2];
    size_t off = c->req.head_len;
    int n = egress_sni_parse((const uint8_t *)c->buf + off, c->len - off, sni, sizeof sni);

    if (n == -EAGAIN && c->len < sizeof c->buf)
        return;
    if (egress_tunnel_allowed(c->allow, &c->req, sni, n, &why) < 0) {
        log_debug(COMP, "%s: tunnel to %s:%u closed: %s", c->sb_id, c->req.host, c->req.port, why);
        conn_close(c);
        return;
    }
    uv_read_stop((uv_stream_t *)&c->down);
    relay_start(c, c->buf + off, c->len - off);
}

static void on_connected(uv_connect_t *req, int status)
{
    struct econn *c = req->data;

    if (c->phase != EP_CONNECT)
        return;
    if (status < 0) {
        char why[96];

        snprintf(why, sizeof why, "connect to %s:%u: %s", c->req.host, c->req.port,
                 uv_strerror(status));
        reply(c, reply_502, why);
        return;
    }
    if (!c->req.connect) {
        http_forward(c);
        return;
    }
    c->phase = EP_HELLO;
    write_copy(c, (uv_stream_t *)&c->down, reply_200, strlen(reply_200), false);
    if (c->phase == EP_CLOSING)
        return;
    if (c->len > c->req.head_len) {
        hello_input(c);
        if (c->phase != EP_HELLO)
            return;
    }
    if (uv_read_start((uv_stream_t *)&c->down, on_alloc, on_down_read) < 0)
        conn_close(c);
}

/* The first public IPv4 address of res, host order; 0 when none. */
static uint32_t public_addr(const struct addrinfo *res)
{
    for (const struct addrinfo *ai = res; ai; ai = ai->ai_next) {
        struct egress_entry en = {.kind = EGRESS_CIDR, .prefix = 32};

        if (ai->ai_family != AF_INET)
            continue;
        en.addr = ntohl(((const struct sockaddr_in *)ai->ai_addr)->sin_addr.s_addr);
        if (egress_entry_public(&en))
            return en.addr;
    }
    return 0;
}

static void on_resolved(uv_getaddrinfo_t *req, int status, struct addrinfo *res)
{
    struct econn *c = req->data;
    struct sockaddr_in sin = {.sin_family = AF_INET};
    uint32_t ip;
    int r;

    c->gai_pending = false;
    ip = status == 0 ? public_addr(res) : 0;
    uv_freeaddrinfo(res);
    if (c->phase != EP_RESOLVE) {
        conn_maybe_free(c);
        return;
    }
    if (ip == 0) {
        reply(c, reply_502, status < 0 ? uv_strerror(status) : "no public address");
        return;
    }
    sin.sin_addr.s_addr = htonl(ip);
    sin.sin_port = htons(c->req.port);
    r = uv_tcp_init(c->srv->e->loop, &c->up);
    if (r < 0) {
        conn_close(c);
        return;
    }
    c->up_open = true;
    c->up.data = c;
    c->conn.data = c;
    c->phase = EP_CONNECT;
    r = uv_tcp_connect(&c->conn, &c->up, (const struct sockaddr *)&sin, on_connected);
    if (r < 0)
        reply(c, reply_502, uv_strerror(r));
}

/* A whole head: checked, then resolved. */
static void head_done(struct econn *c)
{
    const char *why = NULL;
    struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM};
    int r;

    if (egress_request_allowed(c->allow, &c->req, &why) < 0) {
        reply(c, reply_403, why);
        return;
    }
    uv_read_stop((uv_stream_t *)&c->down);
    c->phase = EP_RESOLVE;
    c->gai.data = c;
    r = uv_getaddrinfo(c->srv->e->loop, &c->gai, on_resolved, c->req.host, NULL, &hints);
    if (r < 0) {
        reply(c, reply_502, uv_strerror(r));
        return;
    }
    c->gai_pending = true;
}

static void on_down_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
    struct econn *c = s->data;
    int r;

    if (c->phase == EP_RELAY) {
        relay(c, s, (uv_stream_t *)&c->up, nread, buf, &c->down_eof, &c->down_paused);
        return;
    }
    if (c->phase != EP_HEAD && c->phase != EP_HELLO) {
        free(buf->base); /* on_alloc()'s for a phase that reads nothing more */
        if (c->phase == EP_REPLY && nread < 0)
            conn_close(c); /* the client's end after an error reply */
        return;
    }
    if (nread == UV_ENOBUFS && c->phase == EP_HEAD) {
        reply(c, reply_431, "head too large");
        return;
    }
    if (nread < 0) {
        conn_close(c);
        return;
    }
    c->len += (size_t)nread;
    if (c->phase == EP_HELLO) {
        hello_input(c);
        return;
    }
    r = egress_http_parse(c->buf, c->len, &c->req);
    if (r == -EAGAIN)
        return;
    if (r == -E2BIG)
        reply(c, reply_431, "head too large");
    else if (r < 0)
        reply(c, reply_400, "malformed head");
    else
        head_done(c);
}

static void on_timeout(uv_timer_t *t)
{
    struct econn *c = t->data;

    log_debug(COMP, "%s: connection %s: closed", c->sb_id,
              c->phase == EP_RELAY ? "idle" : "not set up in time");
    conn_close(c);
}

/* The sandbox whose address is ip (host order), while it is not going away, with its
 * list parsed into *ret_allow (malloc'ed) when the list holds a name; else NULL. */
static struct sandbox *owner_of(struct engine *e, uint32_t ip, struct egress_allow **ret_allow)
{
    for (struct sandbox *sb = e->sandboxes; sb; sb = sb->next) {
        struct in_addr a;
        struct params_error err = {};
        struct egress_allow *allow;

        if (!sb->ip || inet_pton(AF_INET, sb->ip, &a) != 1 || ntohl(a.s_addr) != ip)
            continue;
        if (sb->state != SANDBOX_READY || !sb->internet || !sb->internet_allow)
            return NULL;
        allow = malloc(sizeof *allow);
        if (!allow || egress_allow_parse(sb->internet_allow, "internet.allow", allow, &err) < 0 ||
            !egress_has_names(allow)) {
            free(allow);
            return NULL;
        }
        *ret_allow = allow;
        return sb;
    }
    return NULL;
}

static unsigned conns_of(const struct eproxy_srv *srv, const char *sb_id)
{
    unsigned n = 0;

    for (const struct econn *c = srv->conns; c; c = c->next)
        n += c->phase != EP_CLOSING && strcmp(c->sb_id, sb_id) == 0;
    return n;
}

static void conn_start(struct eproxy_srv *srv, struct econn *c)
{
    c->srv = srv;
    c->phase = EP_HEAD;
    (void)uv_timer_init(srv->e->loop, &c->timer);
    c->down.data = c->timer.data = c;
    c->next = srv->conns;
    if (srv->conns)
        srv->conns->prev = c;
    srv->conns = c;
    tcp_srv_conn_added(&srv->tcp);
}

static void on_connection(uv_stream_t *server, int status)
{
    struct eproxy_srv *srv = container_of(server->data, struct eproxy_srv, tcp);
    struct engine *e = srv->e;
    struct sockaddr_in peer;
    int plen = sizeof peer;
    struct econn *c;
    struct sandbox *sb;

    if (status < 0 || srv->tcp.closing)
        return;
    c = calloc(1, sizeof *c);
    if (!c || uv_tcp_init(e->loop, &c->down) < 0) {
        free(c);
        tcp_srv_refuse(&srv->tcp);
        return;
    }
    conn_start(srv, c);
    if (uv_accept(server, (uv_stream_t *)&c->down) < 0 ||
        uv_tcp_getpeername(&c->down, (struct sockaddr *)&peer, &plen) < 0 ||
        peer.sin_family != AF_INET || !(sb = owner_of(e, ntohl(peer.sin_addr.s_addr), &c->allow))) {
        conn_close(c);
        return;
    }
    snprintf(c->sb_id, sizeof c->sb_id, "%s", sb->id);
    if (conns_of(srv, c->sb_id) > e->cfg->egress.max_connections) {
        log_debug(COMP, "%s: past [egress] max_connections: connection closed", c->sb_id);
        conn_close(c);
        return;
    }
    if (uv_read_start((uv_stream_t *)&c->down, on_alloc, on_down_read) < 0) {
        conn_close(c);
        return;
    }
    (void)uv_timer_start(&c->timer, on_timeout, e->cfg->egress.header_timeout_ms, 0);
}

/* sandbox.c's hook: sb's connections, or with NULL every connection and the listener. */
static void eproxy_stop(struct engine *e, const struct sandbox *sb)
{
    struct eproxy_srv *srv = e->eproxy;

    if (!srv || srv->tcp.closing || (!sb && !tcp_srv_close(&srv->tcp)))
        return;
    if (!sb)
        e->close_pending++;
    for (struct econn *c = srv->conns; c; c = c->next)
        if (!sb || strcmp(c->sb_id, sb->id) == 0)
            conn_close(c);
}

int engine_eproxy_start(struct engine *e, char **ret_error)
{
    const struct config_egress *ce = &e->cfg->egress;
    struct eproxy_srv *srv;
    char addr[INET_ADDRSTRLEN] = "?";
    int r;

    *ret_error = NULL;
    if (ce->listen_port == 0)
        return 0;
    srv = calloc(1, sizeof *srv);
    if (!srv)
        return -ENOMEM;
    srv->e = e;
    r = tcp_srv_init(&srv->tcp, e->loop, on_srv_freed);
    if (r < 0) {
        free(srv);
        return r;
    }
    e->eproxy = srv;
    e->eproxy_stop = eproxy_stop;
    r = tcp_srv_listen(&srv->tcp, ce->listen_ip, ce->listen_port, EPROXY_BACKLOG, on_connection,
                       "[egress] listen", addr, ret_error);
    if (r < 0)
        return r; /* the listener is closed with the engine */
    log_info(COMP, "egress proxy on %s:%u", addr, ce->listen_port);
    return 0;
}
