/* libsandboxd-client: the C client library of sandboxd (docs/clients-c.md).
 *
 * A client holds one connection to the daemon's Unix socket, opened at the first call and
 * again when the daemon closed it (its idle close, a restart). Calls are synchronous: the
 * request line goes out, then lines are read until its reply; notifications that arrive
 * meanwhile (exec.output, sandbox.event, ...) go to the client's notification callback.
 * Descriptors travel with the request line as SCM_RIGHTS ancillary data
 * (docs/protocol.md, "Passing descriptors").
 *
 * Errors: every function that can fail returns 0 on success and a negative errno on
 * failure. -EREMOTE means the daemon answered with a JSON-RPC error; sandboxd_client_error()
 * then tells its code, message and data. After any other failure it holds a text that says
 * what went wrong (code 0).
 *
 * Threads: a client is not thread-safe; use one per thread. The library never raises
 * SIGPIPE and writes nothing to stdout or stderr. A program with its own poll loop can keep
 * several calls in flight on one connection (sandboxd_call_start(), below).
 *
 * Link with `pkg-config --cflags --libs sandboxd-client` (json-c comes with it). */
#pragma once

#include <json-c/json.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The socket used when none is given and $SANDBOXD_SOCKET is unset or empty. */
#define SANDBOXD_SOCKET_DEFAULT "/run/sandboxd.sock"
/* The most descriptors one request may carry (the daemon's cap). */
#define SANDBOXD_FDS_MAX 8
/* The longest line accepted from the daemon; a longer one fails the call (-EMSGSIZE). */
#define SANDBOXD_REPLY_MAX (64u * 1024 * 1024)

struct sandboxd_client;

/* What made the last call fail. */
struct sandboxd_error {
    int code;            /* the JSON-RPC error code (-32001, ...); 0: a local failure */
    const char *message; /* the error's message, or what failed locally */
    const char *reason;  /* data.reason when the daemon gave one, else NULL */
    json_object *data;   /* the error's data (borrowed), or NULL */
    json_object *object; /* the whole error object (borrowed); NULL for a local failure */
};

/* A notification from the daemon: its method and params (NULL when absent), both borrowed
 * for the duration of the callback. */
typedef void (*sandboxd_notify_fn)(const char *method, json_object *params, void *userdata);

/* What to do while a call waits for its reply: tick() every tick_ms (0: never), and
 * on_fd(i) when fds[i] is readable. Lets a single-threaded caller relay pipes or draw
 * progress during a long call. */
struct sandboxd_wait {
    unsigned tick_ms;
    void (*tick)(void *userdata);
    const int *fds;
    size_t n_fds;
    void (*on_fd)(void *userdata, size_t i);
    void *userdata;
};

/* Makes a client for socket_path (NULL or "": $SANDBOXD_SOCKET, else
 * SANDBOXD_SOCKET_DEFAULT). Nothing is connected yet. Returns 0 or -ENOMEM. */
int sandboxd_client_new(const char *socket_path, struct sandboxd_client **ret);
/* Closes the connection and frees the client; NULL-safe. Returns NULL. */
struct sandboxd_client *sandboxd_client_free(struct sandboxd_client *c);
/* The socket path the client connects to. */
const char *sandboxd_client_socket(const struct sandboxd_client *c);
/* Sets the callback for notifications (NULL: they are dropped). */
void sandboxd_client_set_notify(struct sandboxd_client *c, sandboxd_notify_fn fn, void *userdata);

/* Connects now, if not connected. Calls connect by themselves; this only tells early
 * whether the daemon is reachable (-ENOENT, -ECONNREFUSED, -EACCES, ...). */
int sandboxd_client_connect(struct sandboxd_client *c);
/* Closes the connection (the daemon cancels what still runs on it; the calls in flight
 * complete with -ECONNRESET or -ENOTCONN); the next call opens a new one. */
void sandboxd_client_disconnect(struct sandboxd_client *c);
/* The connection's descriptor, or -1 when not connected. */
int sandboxd_client_fd(const struct sandboxd_client *c);

/* Calls method with params (taken over; NULL for none) and waits for the reply. On success
 * *ret_result holds a reference to the result (the caller puts it). Returns 0, -EREMOTE when
 * the daemon answered with an error (also one it closed the connection with), -ECONNRESET
 * when the connection closed while the call ran (it may or may not have taken effect),
 * -ENOTCONN when it closed twice before the request went out whole (it did not run), or
 * another negative errno (-ENOENT, -ECONNREFUSED, -EACCES: the socket cannot be reached).
 *
 * A connection the daemon closed before the request was sent (the idle close) is opened
 * again and the request sent on the new one; nothing is ever sent twice once it reached
 * the daemon. */
int sandboxd_call(struct sandboxd_client *c, const char *method, json_object *params,
                  json_object **ret_result);
/* The same, passing fds[0..n_fds) with the request (at most SANDBOXD_FDS_MAX); params name
 * them by index (content_fd, to_fd, stdin_fd, stdout_fd, stderr_fd). The daemon closes its
 * copies; the caller keeps and closes its own. */
int sandboxd_call_fds(struct sandboxd_client *c, const char *method, json_object *params,
                      const int *fds, size_t n_fds, json_object **ret_result);
/* The same, with w (NULL: none) run while waiting. */
int sandboxd_call_wait(struct sandboxd_client *c, const char *method, json_object *params,
                       const int *fds, size_t n_fds, const struct sandboxd_wait *w,
                       json_object **ret_result);

/* Why the last call failed, valid until the next call; NULL when it succeeded. */
const struct sandboxd_error *sandboxd_client_error(const struct sandboxd_client *c);

/* ---- several calls in flight, on the caller's own poll loop ------------------------------ */

/* The completion of a call started with sandboxd_call_start(), run exactly once:
 *   r == 0            result (borrowed; NULL for a JSON null result), error NULL;
 *   r == -EREMOTE     the daemon answered with error;
 *   r == -ECONNRESET  the connection closed after the whole request was sent: it may or may
 *                     not have taken effect;
 *   r == -ENOTCONN    the connection closed before the whole request was sent: it did not
 *                     run (the daemon never runs a partial line).
 * For the last two error->message says why the connection closed, and error->object (code,
 * reason, data) is the error the daemon sent just before it closed, if it sent one (a line
 * over its limit, a connection over a cap), else NULL. error is valid during the call only. */
typedef void (*sandboxd_done_fn)(int r, json_object *result, const struct sandboxd_error *error,
                                 void *userdata);

/* Queues a request (params taken over; fds passed with it as sandboxd_call_fds() does) and
 * returns without waiting for the reply, connecting first when needed. Returns 0 when done
 * will run (possibly before this returns, when the connection fails at once), or a negative
 * errno (sandboxd_client_error() says why) and done never runs. Replies come in through
 * sandboxd_client_process(); the synchronous calls process them too. */
int sandboxd_call_start(struct sandboxd_client *c, const char *method, json_object *params,
                        const int *fds, size_t n_fds, sandboxd_done_fn done, void *userdata);
/* The id of the request sandboxd_call_start() queued last (exec.output names it). */
int64_t sandboxd_client_last_id(const struct sandboxd_client *c);
/* What to poll sandboxd_client_fd() for: POLLIN, plus POLLOUT while requests wait to be sent;
 * 0 when not connected. */
short sandboxd_client_events(const struct sandboxd_client *c);
/* After poll() reported revents on sandboxd_client_fd(): sends what waits, reads what came,
 * runs the completions and the notification callback. Closes the connection when the daemon
 * did (the calls in flight then complete with -ECONNRESET or -ENOTCONN); the next call opens
 * a new one. */
void sandboxd_client_process(struct sandboxd_client *c, short revents);

#ifdef __cplusplus
}
#endif
