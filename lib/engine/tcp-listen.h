/* What the engine's TCP listeners (the preview listener, the egress proxy) share: binding
 * and listening with an error that names the setting, and turning a connection away. */
#pragma once

#include <stdint.h>
#include <uv.h>

/* Binds the initialised listener to ip:port (host order) and listens with backlog. On
 * failure a negative errno-style libuv code, and *ret_error (malloc'ed; NULL when out of
 * memory) reads "WHAT ADDR:PORT: reason". addr (INET_ADDRSTRLEN bytes) gets ip as text. */
int tcp_listen_start(uv_tcp_t *listener, uint32_t ip, unsigned port, int backlog,
                     uv_connection_cb cb, const char *what, char *addr, char **ret_error);

/* Accepts the waiting connection and closes it at once (past a listener's limits). */
void tcp_listen_refuse(uv_tcp_t *listener);
