/* The listening side of sandboxd: the Unix socket (from systemd or bound here),
 * accept with SO_PEERCRED, global and per-uid connection caps, the idle and
 * stalled-writer sweep, and graceful shutdown. Loop thread only. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <uv.h>

#include "admin.h"
#include "ratelimit.h"
#include "conn.h"
#include "config.h"
#include "methods.h"

struct daemon;

/* Tunables that are not in the config file (named constants; tests may lower them
 * through SANDBOXD_TEST_HOOKS=1 and the SANDBOXD_TEST_* variables). */
#define SERVER_IDLE_TIMEOUT_MS (300 * 1000)     /* idle connection, nothing in flight */
#define SERVER_WRITE_STALL_MS (30 * 1000)       /* output over high water, no progress */
#define SERVER_SHUTDOWN_DEADLINE_MS (10 * 1000) /* in-flight requests at shutdown */
#define SERVER_SWEEP_MS 1000

enum server_state {
    SERVER_INIT,
    SERVER_LISTENING,
    SERVER_STOPPING, /* no accept; in-flight requests finish; new ones get -32011 */
    SERVER_CLOSING,  /* closing every handle */
    SERVER_CLOSED,
};

struct server_limits {
    struct conn_limits conn; /* idle and write-stall deadlines */
    uint64_t shutdown_deadline_ms;
    uint64_t sweep_ms;
};

struct uid_count {
    uid_t uid;
    unsigned n;
    size_t bytes; /* held by its connections (the memory budget) */
};

/* What a server serves, and for whom. */
struct server_params {
    uv_loop_t *loop;
    struct config *config;               /* live config (owned by the caller) */
    struct method_table methods;         /* the rows stay valid while the server lives */
    const struct req_observer *observer; /* of every request; NULL: none */
    struct daemon *daemon;               /* the handlers' context (req_daemon()); may be NULL */
};

struct server {
    uv_loop_t *loop;
    struct config *config; /* live config (owned by the caller) */
    struct method_table methods;
    struct daemon *daemon; /* NULL for a server without one (tests of the connection layer) */
    struct server_limits limits;
    struct admin_set admins; /* [server] admin_group, resolved at init and reload */
    bool admins_resolving;   /* a reload's lookup runs on a worker thread */
    bool admins_again;       /* another reload came meanwhile: look up once more */
    struct conn_host host;   /* what every connection reports to */
    struct ratelimit log_rl; /* repeated log and audit lines per uid and cause */
    enum server_state state;

    uv_pipe_t listener;
    bool listener_open;
    bool bound_path; /* we created the socket file: unlink it at exit */
    char *socket_path;

    uv_timer_t sweep;
    uv_timer_t deadline;
    bool timers_open;

    struct conn *conns; /* every connection, including closing ones */
    unsigned n_conns;   /* counted connections (caps) */
    unsigned n_handles; /* connections whose handle is not closed yet */
    struct uid_count *uids;
    size_t n_uids;
    size_t mem_bytes; /* held by every connection: partial lines, queued replies */
    size_t mem_peak;
    uint64_t n_accepted;
    uint64_t n_rejected;
    unsigned status_conns; /* connection count last sent as STATUS= */

    uint64_t started_ms;                                 /* uv_now at start */
    uint64_t started_wall;                               /* time(NULL) at start */
    void (*on_closed)(struct server *s, void *userdata); /* after every handle closed */
    void *userdata;
};

int server_init(struct server *s, const struct server_params *p);
/* Listens on the fd systemd passed (exactly one stream Unix socket) or binds
 * `path`. Error text goes to the log. */
int server_listen(struct server *s, const char *path);
/* Serves an already connected stream Unix socket (taken over, closed on failure)
 * as if it had been accepted: the caps apply. Returns 0 or a negative errno. */
int server_adopt(struct server *s, int fd);
/* Starts shutdown: stop accepting, let in-flight requests finish within the
 * deadline, then close every connection and handle; on_closed runs at the end. */
void server_shutdown(struct server *s);
/* Applies a freshly loaded config: the caps apply to new input, and the admin
 * group is resolved again (NSS, on the loop thread, only here and at init). */
void server_apply_limits(struct server *s);
void server_done(struct server *s);

unsigned server_connections(const struct server *s);
/* Bytes the connections hold now, and the most they held at once ([server] memory_budget). */
void server_memory(const struct server *s, size_t *ret_bytes, size_t *ret_peak);
uint64_t server_uptime_s(const struct server *s);
bool server_stopping(const struct server *s);
