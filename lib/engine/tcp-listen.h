/* What the engine's TCP servers (the preview listener, the egress proxy) share: their
 * listener, binding and listening with an error that names the setting, turning a
 * connection away, and their end once the listener and every connection are closed. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

/* Embedded in a server. listener.data is the tcp_srv; the server's connections are counted
 * with tcp_srv_conn_added()/tcp_srv_conn_gone(). */
struct tcp_srv {
    uv_tcp_t listener;
    unsigned n_conns;
    bool closing;
    bool listener_closing; /* the listener's close not called back yet */
    /* Called once: the server is closing, its listener closed and its last connection gone.
     * The owner frees the server in it. */
    void (*on_freed)(struct tcp_srv *srv);
};

/* Initialises srv's listener on loop: 0 or a negative errno-style libuv code. */
int tcp_srv_init(struct tcp_srv *srv, uv_loop_t *loop, void (*on_freed)(struct tcp_srv *srv));

/* Binds srv's listener to ip:port (host order) and listens with backlog. On failure a
 * negative errno-style libuv code, and *ret_error (malloc'ed; NULL when out of memory) reads
 * "WHAT ADDR:PORT: reason"; the server stays to be closed with tcp_srv_close(). addr
 * (INET_ADDRSTRLEN bytes) gets ip as text. */
int tcp_srv_listen(struct tcp_srv *srv, uint32_t ip, unsigned port, int backlog,
                   uv_connection_cb cb, const char *what, char *addr, char **ret_error);

/* Accepts the waiting connection and closes it at once (past the server's limits). */
void tcp_srv_refuse(struct tcp_srv *srv);

void tcp_srv_conn_added(struct tcp_srv *srv);
/* One connection fewer; on_freed when it was the last of a closing server. */
void tcp_srv_conn_gone(struct tcp_srv *srv);

/* Starts closing srv: no connection is accepted any more and its listener closes; the caller
 * then closes its connections. false when it was closing already. */
bool tcp_srv_close(struct tcp_srv *srv);
