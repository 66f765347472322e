/* What the engine's TCP servers share (tcp-listen.h). */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>

#include "tcp-listen.h"

int tcp_srv_init(struct tcp_srv *srv, uv_loop_t *loop, void (*on_freed)(struct tcp_srv *srv))
{
    int r;

    *srv = (struct tcp_srv){.on_freed = on_freed};
    r = uv_tcp_init(loop, &srv->listener);
    if (r < 0)
        return r;
    srv->listener.data = srv;
    return 0;
}

int tcp_srv_listen(struct tcp_srv *srv, uint32_t ip, unsigned port, int backlog,
                   uv_connection_cb cb, const char *what, char *addr, char **ret_error)
{
    struct sockaddr_in sin = {.sin_family = AF_INET};
    int r;

    sin.sin_port = htons((uint16_t)port);
    sin.sin_addr.s_addr = htonl(ip);
    if (!inet_ntop(AF_INET, &sin.sin_addr, addr, INET_ADDRSTRLEN))
        snprintf(addr, INET_ADDRSTRLEN, "?");
    r = uv_tcp_bind(&srv->listener, (const struct sockaddr *)&sin, 0);
    if (r >= 0)
        r = uv_listen((uv_stream_t *)&srv->listener, backlog, cb);
    if (r < 0 && asprintf(ret_error, "%s %s:%u: %s", what, addr, port, uv_strerror(r)) < 0)
        *ret_error = NULL;
    return r < 0 ? r : 0;
}

static void on_refused_closed(uv_handle_t *h)
{
    free(h);
}

void tcp_srv_refuse(struct tcp_srv *srv)
{
    uv_tcp_t *s = malloc(sizeof *s);

    if (!s)
        return;
    if (uv_tcp_init(srv->listener.loop, s) < 0) {
        free(s);
        return;
    }
    (void)uv_accept((uv_stream_t *)&srv->listener, (uv_stream_t *)s);
    uv_close((uv_handle_t *)s, on_refused_closed);
}

static void maybe_freed(struct tcp_srv *srv)
{
    if (srv->closing && !srv->listener_closing && srv->n_conns == 0)
        srv->on_freed(srv);
}

void tcp_srv_conn_added(struct tcp_srv *srv)
{
    srv->n_conns++;
}

void tcp_srv_conn_gone(struct tcp_srv *srv)
{
    srv->n_conns--;
    maybe_freed(srv);
}

static void on_listener_closed(uv_handle_t *h)
{
    struct tcp_srv *srv = h->data;

    srv->listener_closing = false;
    maybe_freed(srv);
}

bool tcp_srv_close(struct tcp_srv *srv)
{
    if (srv->closing)
        return false;
    srv->closing = true;
    srv->listener_closing = true;
    uv_close((uv_handle_t *)&srv->listener, on_listener_closed);
    return true;
}
