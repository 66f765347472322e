/* Relayed connections of port forwards: one accepted client stream (Unix or TCP) joined to
 * a `direct-tcpip` channel (RFC 4254 §7.2) to 127.0.0.1:PORT on a pooled SSH session
 * (sshs.h), as `ssh -L` does.
 *
 * Owns: the client stream from the accept on, the channel, and the two buffers between
 * them. Back-pressure: each direction holds at most buffer_bytes; while the client's
 * buffer is full the client is not read, and while the channel's is full the channel is
 * not read, so its SSH window closes and sshd stops reading the sandbox's socket (libssh
 * keeps at most about one window, 1.25 MiB, of received data per channel besides). Half
 * closes pass through: the client's end of input becomes the channel's EOF and the
 * channel's EOF a shutdown of the client's writing side.
 * Never: logs above debug, blocks.
 * Threading: loop thread only.
 *
 * Errors passed to sshfwd_done_cb:
 *   0             both sides ended (or one closed after everything was passed on)
 *   -ECONNREFUSED sshd could not open the channel (nothing listens on the port, or
 *                 forwarding is not allowed)
 *   -ECONNRESET   the SSH session was lost, or the client's stream failed
 *   -ECANCELED    sshfwd_close() or sshpool_close()
 *   other sshs.h errors when the pool could not connect */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "sshs.h"

#define SSHFWD_BUFFER_MIN (4u * 1024u)
#define SSHFWD_BUFFER_MAX (64u * 1024u * 1024u)

struct sshfwd;

/* Called exactly once per successful sshfwd_accept(), from the loop, once the client's
 * stream is closed; f is not to be used after it returns (a channel whose open was still in
 * flight is closed once sshd answered, or with the pool). */
typedef void (*sshfwd_done_cb)(struct sshfwd *f, int error, void *userdata);

/* Accepts the pending connection of server (a listening uv_pipe_t when tcp is false, else a
 * uv_tcp_t) and relays it to 127.0.0.1:port through a channel of pool. buffer_bytes in
 * SSHFWD_BUFFER_MIN..SSHFWD_BUFFER_MAX (-EINVAL). The errors of uv_accept() otherwise;
 * the callback never runs then. */
int sshfwd_accept(struct sshpool *pool, uv_stream_t *server, bool tcp, uint16_t port,
                  size_t buffer_bytes, sshfwd_done_cb cb, void *userdata, struct sshfwd **ret);

/* The same for a connected socket fd (TCP when tcp, else a Unix stream socket) the caller
 * read head_len bytes of already (an HTTP request head; at most buffer_bytes): they are
 * sent first, then the rest. fd is the relay's from the call on, closed on every error
 * too. */
int sshfwd_open_fd(struct sshpool *pool, int fd, bool tcp, uint16_t port, size_t buffer_bytes,
                   const void *head, size_t head_len, sshfwd_done_cb cb, void *userdata,
                   struct sshfwd **ret);

/* The accepted stream, e.g. for its peer credentials (valid until the done callback). */
uv_stream_t *sshfwd_client(struct sshfwd *f);

/* Ends the connection now (the client's stream and the channel are closed); the callback
 * runs with -ECANCELED from a later loop iteration. Safe after the end began (no-op). */
void sshfwd_close(struct sshfwd *f);

/* Bytes passed so far from the client to the sandbox and back. */
void sshfwd_counts(const struct sshfwd *f, uint64_t *ret_up, uint64_t *ret_down);
