/* What the engine's TCP listeners share (tcp-listen.h). */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>

#include "tcp-listen.h"

int tcp_listen_start(uv_tcp_t *listener, uint32_t ip, unsigned port, int backlog,
                     uv_connection_cb cb, const char *what, char *addr, char **ret_error)
{
    struct sockaddr_in sin = {.sin_family = AF_INET};
    int r;

    sin.sin_port = htons((uint16_t)port);
    sin.sin_addr.s_addr = htonl(ip);
    if (!inet_ntop(AF_INET, &sin.sin_addr, addr, INET_ADDRSTRLEN))
        snprintf(addr, INET_ADDRSTRLEN, "?");
    r = uv_tcp_bind(listener, (const struct sockaddr *)&sin, 0);
    if (r >= 0)
        r = uv_listen((uv_stream_t *)listener, backlog, cb);
    if (r < 0 && asprintf(ret_error, "%s %s:%u: %s", what, addr, port, uv_strerror(r)) < 0)
        *ret_error = NULL;
    return r < 0 ? r : 0;
}

static void on_refused_closed(uv_handle_t *h)
{
    free(h);
}

void tcp_listen_refuse(uv_tcp_t *listener)
{
    uv_tcp_t *s = malloc(sizeof *s);

    if (!s)
        return;
    if (uv_tcp_init(listener->loop, s) < 0) {
        free(s);
        return;
    }
    (void)uv_accept((uv_stream_t *)listener, (uv_stream_t *)s);
    uv_close((uv_handle_t *)s, on_refused_closed);
}
