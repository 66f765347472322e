#include "server.h"

#include <assert.h>
#include <errno.h>
#include <grp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <systemd/sd-daemon.h>
#include <time.h>
#include <unistd.h>

#include "audit.h"
#include "list.h"
#include "log.h"
#include "macro.h"
#include "notify.h"
#include "rpc.h"

#define COMP "server"
/* Repeated messages about one uid's connections (refused at a cap, hung up with requests
 * running, not reading): the first SERVER_LOG_BURST per interval are written. */
#define SERVER_LOG_INTERVAL_MS 10000u
#define SERVER_LOG_BURST 5u

static const char *const server_state_names[] = {
    [SERVER_INIT] = "init",       [SERVER_LISTENING] = "listening", [SERVER_STOPPING] = "stopping",
    [SERVER_CLOSING] = "closing", [SERVER_CLOSED] = "closed",
};

static void server_set_state(struct server *s, enum server_state state)
{
    if (s->state == state)
        return;
    log_debug(COMP, "%s -> %s", server_state_names[s->state], server_state_names[state]);
    s->state = state;
}

static uint64_t env_ms(const char *name, uint64_t def)
{
    const char *v = getenv(name);
    char *end;
    unsigned long long x;

    if (!v || !v[0])
        return def;
    errno = 0;
    x = strtoull(v, &end, 10);
    if (errno || *end || x == 0)
        return def;
    return x;
}

static void server_conn_uncount(void *owner, struct conn *c);
static void server_conn_closed(void *owner, struct conn *c);
static void server_maybe_finish(struct server *s);

static bool server_stopping_cb(void *owner)
{
    return server_stopping(owner);
}

static void server_request_done(void *owner)
{
    struct server *s = owner;

    if (server_stopping(s))
        server_maybe_finish(s);
}

static struct uid_count *uid_slot(struct server *s, uid_t uid, bool create);

static void server_account(void *owner, struct conn *c, size_t old, size_t now)
{
    struct server *s = owner;
    struct uid_count *u = c->counted ? uid_slot(s, c->port.uid, false) : NULL;

    s->mem_bytes = s->mem_bytes - MIN(old, s->mem_bytes) + now;
    s->mem_peak = MAX(s->mem_peak, s->mem_bytes);
    if (u)
        u->bytes = u->bytes - MIN(old, u->bytes) + now;
}

/* A uid's share is a quarter of the budget, and less while the budget is exceeded: then
 * every uid holding memory gets an equal part. */
static bool server_over_share(void *owner, uid_t uid)
{
    struct server *s = owner;
    size_t budget = s->config->server.memory_budget, holders = 0;
    struct uid_count *u = uid_slot(s, uid, false);

    if (!u || budget == 0)
        return false;
    if (u->bytes > budget / 4)
        return true;
    if (s->mem_bytes <= budget)
        return false;
    for (size_t i = 0; i < s->n_uids; i++)
        holders += s->uids[i].bytes > 0;
    return holders > 0 && u->bytes > budget / holders;
}

void server_memory(const struct server *s, size_t *ret_bytes, size_t *ret_peak)
{
    *ret_bytes = s->mem_bytes;
    *ret_peak = s->mem_peak;
}

static const struct conn_host_ops server_conn_ops = {
    .stopping = server_stopping_cb,
    .uncount = server_conn_uncount,
    .closed = server_conn_closed,
    .request_done = server_request_done,
    .account = server_account,
    .over_share = server_over_share,
};

int server_init(struct server *s, const struct server_params *p)
{
    const char *hooks = getenv("SANDBOXD_TEST_HOOKS");
    uv_loop_t *loop = p->loop;
    int r;

    assert(p->loop && p->config && p->methods.rows);
    *s = (struct server){
        .loop = loop,
        .config = p->config,
        .methods = p->methods,
        .daemon = p->daemon,
        .limits =
            {
                .conn =
                    {
                        .idle_timeout_ms = SERVER_IDLE_TIMEOUT_MS,
                        .write_stall_ms = SERVER_WRITE_STALL_MS,
                    },
                .shutdown_deadline_ms = SERVER_SHUTDOWN_DEADLINE_MS,
                .sweep_ms = SERVER_SWEEP_MS,
            },
    };
    if (hooks && strcmp(hooks, "1") == 0) {
        struct server_limits *l = &s->limits;

        l->conn.idle_timeout_ms = env_ms("SANDBOXD_TEST_IDLE_MS", l->conn.idle_timeout_ms);
        l->conn.write_stall_ms = env_ms("SANDBOXD_TEST_STALL_MS", l->conn.write_stall_ms);
        l->shutdown_deadline_ms = env_ms("SANDBOXD_TEST_SHUTDOWN_MS", l->shutdown_deadline_ms);
        l->sweep_ms = MIN(l->sweep_ms, MAX(l->conn.idle_timeout_ms / 4, (uint64_t)10));
        l->sweep_ms = MIN(l->sweep_ms, MAX(l->conn.write_stall_ms / 4, (uint64_t)10));
    }
    s->host = (struct conn_host){
        .ops = &server_conn_ops,
        .owner = s,
        .loop = loop,
        .config = p->config,
        .limits = &s->limits.conn,
        .admins = &s->admins,
        .log_rl = &s->log_rl,
        .methods = &s->methods,
        .observer = p->observer,
        .server = s,
    };
    ratelimit_init(&s->log_rl,
                   hooks && strcmp(hooks, "1") == 0
                       ? env_ms("SANDBOXD_TEST_LOG_INTERVAL_MS", SERVER_LOG_INTERVAL_MS)
                       : SERVER_LOG_INTERVAL_MS,
                   SERVER_LOG_BURST);
    r = admin_set_load(&s->admins, p->config->server.admin_group);
    if (r < 0)
        return r;
    s->started_ms = uv_now(loop);
    s->started_wall = (uint64_t)time(NULL);
    return 0;
}

unsigned server_connections(const struct server *s)
{
    return s->n_conns;
}

uint64_t server_uptime_s(const struct server *s)
{
    return (uv_now(s->loop) - s->started_ms) / 1000;
}

bool server_stopping(const struct server *s)
{
    return s->state >= SERVER_STOPPING;
}

static struct uid_count *uid_slot(struct server *s, uid_t uid, bool create)
{
    struct uid_count *n;

    for (size_t i = 0; i < s->n_uids; i++)
        if (s->uids[i].uid == uid)
            return &s->uids[i];
    if (!create)
        return NULL;
    n = realloc(s->uids, (s->n_uids + 1) * sizeof *n);
    if (!n)
        return NULL;
    s->uids = n;
    s->uids[s->n_uids] = (struct uid_count){.uid = uid};
    return &s->uids[s->n_uids++];
}

static void server_conn_uncount(void *owner, struct conn *c)
{
    struct server *s = owner;
    struct uid_count *u;

    if (!c->counted)
        return;
    c->counted = false;
    assert(s->n_conns > 0);
    s->n_conns--;
    u = uid_slot(s, c->port.uid, false);
    if (u && --u->n == 0) {
        *u = s->uids[--s->n_uids];
    }
}

static void server_conn_closed(void *owner, struct conn *c)
{
    struct server *s = owner;

    assert(s->n_handles > 0);
    LIST_REMOVE(s->conns, c);
    s->n_handles--;
    server_maybe_finish(s);
}

/* Takes a new connection in: counts it against the caps and starts it, or
 * refuses it with one error line. Either may close it at once (a client that
 * already hung up): c is not touched afterwards. */
static void server_admit(struct server *s, struct conn *c)
{
    const struct config_server *cfg = &s->config->server;
    struct uid_count *u;

    LIST_PREPEND(s->conns, c);
    s->n_handles++;
    s->n_accepted++;

    u = uid_slot(s, c->port.uid, true);
    if (s->n_conns >= cfg->max_connections || !u || u->n >= cfg->max_connections_per_uid) {
        bool global = s->n_conns >= cfg->max_connections;

        char note[RATELIMIT_NOTE_MAX];
        unsigned n;

        s->n_rejected++;
        if (ratelimit_pass(&s->log_rl, c->port.uid, global ? "cap" : "cap_uid", uv_now(s->loop),
                           &n)) {
            audit_limit(global ? "connections" : "connections_per_uid", c->port.uid,
                        global ? "max_connections reached" : "max_connections_per_uid reached");
            log_notice(COMP, "uid %u: %s connection cap reached, refusing%s", (unsigned)c->port.uid,
                       global ? "global" : "per-uid", ratelimit_note(n, note));
        } else
            audit_limit_suppressed(global ? "connections" : "connections_per_uid");
        if (u && u->n == 0)
            *u = s->uids[--s->n_uids];
        conn_fail(c, RPC_BUSY,
                  global ? "too many connections" : "too many connections for this uid");
        return;
    }
    u->n++;
    s->n_conns++;
    c->counted = true;
    conn_start(c);
}

static void on_connection(uv_stream_t *listener, int status)
{
    struct server *s = listener->data;
    struct conn *c;
    int r;

    if (status < 0) {
        log_warning(COMP, "accept: %s, continuing", uv_strerror(status));
        return;
    }
    r = conn_accept(&s->host, listener, &c);
    if (r < 0) {
        log_warning(COMP, "accept: %s, continuing", uv_strerror(r));
        return;
    }
    server_admit(s, c);
}

int server_adopt(struct server *s, int fd)
{
    struct conn *c;
    int r;

    if (server_stopping(s)) {
        close(fd);
        return -ESHUTDOWN;
    }
    r = conn_adopt(&s->host, fd, &c);
    if (r < 0)
        return r;
    server_admit(s, c);
    return 0;
}

static void on_sweep(uv_timer_t *t)
{
    struct server *s = t->data;
    uint64_t now = uv_now(s->loop);
    struct conn *next;

    for (struct conn *c = s->conns; c; c = next) {
        next = c->next;
        conn_sweep(c, now);
    }
    if (s->state == SERVER_LISTENING && s->n_conns != s->status_conns) {
        s->status_conns = s->n_conns;
        notify_status("Serving on %s: %u connection(s)", s->socket_path, s->n_conns);
    }
}

/* A stale socket file (nothing accepts on it) may be replaced; a live one may not. */
static int prepare_path(const char *path)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    _cleanup_close_ int fd = -1;
    struct stat st;

    if (lstat(path, &st) < 0)
        return errno == ENOENT ? 0 : -errno;
    if (!S_ISSOCK(st.st_mode)) {
        log_error(COMP, "'%s' exists and is not a socket", path);
        return -EEXIST;
    }
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    strncpy(sa.sun_path, path, sizeof sa.sun_path - 1);
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0) {
        log_error(COMP, "'%s' is in use by a running server", path);
        return -EADDRINUSE;
    }
    if (errno != ECONNREFUSED) {
        int r = -errno;

        return log_error_errno(r, COMP, "'%s' exists and cannot be probed: %m", path);
    }
    log_info(COMP, "replacing stale socket '%s'", path);
    if (unlink(path) < 0 && errno != ENOENT)
        return log_error_errno(-errno, COMP, "cannot remove stale socket '%s': %m", path);
    return 0;
}

static int bind_path(struct server *s, const char *path, int *ret_fd)
{
    const struct config_server *cfg = &s->config->server;
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    _cleanup_close_ int fd = -1;
    mode_t old;
    int r;

    if (strlen(path) >= sizeof sa.sun_path) {
        log_error(COMP, "socket path '%s' is too long", path);
        return -ENAMETOOLONG;
    }
    r = prepare_path(path);
    if (r < 0)
        return r;
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return log_error_errno(-errno, COMP, "socket: %m");
    memcpy(sa.sun_path, path, strlen(path) + 1);
    /* No window in which the socket is reachable with a wider mode. */
    old = umask(0777);
    r = RET_NERRNO(bind(fd, (struct sockaddr *)&sa, sizeof sa));
    umask(old);
    if (r < 0)
        return log_error_errno(r, COMP, "bind '%s': %m", path);
    s->bound_path = true;
    if (cfg->socket_group) {
        struct group *g = getgrnam(cfg->socket_group);

        if (!g)
            log_warning(COMP, "socket group '%s' does not exist, leaving the group as is",
                        cfg->socket_group);
        else if (chown(path, (uid_t)-1, g->gr_gid) < 0)
            log_warning_errno(-errno, COMP, "chown '%s' to group '%s': %m, continuing", path,
                              cfg->socket_group);
    }
    if (chmod(path, cfg->socket_mode) < 0)
        return log_error_errno(-errno, COMP, "chmod '%s': %m", path);
    if (listen(fd, SOMAXCONN) < 0)
        return log_error_errno(-errno, COMP, "listen '%s': %m", path);
    *ret_fd = TAKE_FD(fd);
    return 0;
}

int server_listen(struct server *s, const char *path)
{
    int fd = -1, n, r;

    n = sd_listen_fds(1);
    if (n < 0)
        return log_error_errno(n, COMP, "sd_listen_fds: %m");
    if (n > 1) {
        log_error(COMP, "systemd passed %d sockets, expected exactly one stream Unix socket", n);
        return -EINVAL;
    }
    if (n == 1) {
        fd = SD_LISTEN_FDS_START;
        r = sd_is_socket_unix(fd, SOCK_STREAM, 1, NULL, 0);
        if (r < 0)
            return log_error_errno(r, COMP, "checking the socket systemd passed: %m");
        if (r == 0) {
            log_error(COMP, "the socket systemd passed is not a listening stream Unix socket");
            return -EINVAL;
        }
        s->socket_path = strdup("(systemd)");
        log_info(COMP, "listening on the socket passed by systemd");
    } else {
        r = bind_path(s, path, &fd);
        if (r < 0) {
            if (s->bound_path)
                (void)unlink(path);
            s->bound_path = false;
            return r;
        }
        s->socket_path = strdup(path);
        log_info(COMP, "listening on '%s'", path);
    }
    if (!s->socket_path) {
        close(fd);
        return -ENOMEM;
    }
    r = uv_pipe_init(s->loop, &s->listener, 0);
    if (r < 0) {
        close(fd);
        return r;
    }
    s->listener.data = s;
    s->listener_open = true;
    r = uv_pipe_open(&s->listener, fd);
    if (r < 0) {
        close(fd);
        return log_error_errno(r, COMP, "adopting the listening socket: %s", uv_strerror(r));
    }
    r = uv_listen((uv_stream_t *)&s->listener, SOMAXCONN, on_connection);
    if (r < 0)
        return log_error_errno(r, COMP, "listen: %s", uv_strerror(r));

    uv_timer_init(s->loop, &s->sweep);
    uv_timer_init(s->loop, &s->deadline);
    s->sweep.data = s->deadline.data = s;
    s->timers_open = true;
    uv_timer_start(&s->sweep, on_sweep, s->limits.sweep_ms, s->limits.sweep_ms);
    server_set_state(s, SERVER_LISTENING);
    return 0;
}

static void on_handle_closed(uv_handle_t *h)
{
    struct server *s = h->data;

    server_maybe_finish(s);
}

static void close_listener(struct server *s)
{
    if (!s->listener_open)
        return;
    s->listener_open = false;
    uv_close((uv_handle_t *)&s->listener, NULL);
    if (s->bound_path && s->socket_path)
        (void)unlink(s->socket_path);
    s->bound_path = false;
}

static void server_maybe_finish(struct server *s)
{
    bool busy = false;

    if (s->state == SERVER_STOPPING) {
        for (struct conn *c = s->conns; c; c = c->next)
            if (c->state < CONN_CLOSING) {
                busy = true;
                break;
            }
        if (busy)
            return;
        server_set_state(s, SERVER_CLOSING);
        if (s->timers_open) {
            s->timers_open = false;
            uv_close((uv_handle_t *)&s->sweep, NULL);
            uv_close((uv_handle_t *)&s->deadline, on_handle_closed);
            return;
        }
    }
    if (s->state == SERVER_CLOSING && s->n_handles == 0 && !s->timers_open) {
        server_set_state(s, SERVER_CLOSED);
        if (s->on_closed)
            s->on_closed(s, s->userdata);
    }
}

static void on_deadline(uv_timer_t *t)
{
    struct server *s = t->data;
    struct conn *next;
    unsigned n = 0;

    for (struct conn *c = s->conns; c; c = next) {
        next = c->next;
        if (c->state < CONN_CLOSING) {
            n++;
            conn_abort(c);
        }
    }
    if (n)
        log_warning(COMP, "shutdown deadline passed, closed %u busy connection(s)", n);
    server_maybe_finish(s);
}

void server_shutdown(struct server *s)
{
    struct conn *next;

    if (s->state >= SERVER_STOPPING)
        return;
    if (s->state == SERVER_INIT && !s->conns) {
        server_set_state(s, SERVER_CLOSED);
        if (s->on_closed)
            s->on_closed(s, s->userdata);
        return;
    }
    server_set_state(s, SERVER_STOPPING);
    close_listener(s);
    if (s->timers_open)
        uv_timer_start(&s->deadline, on_deadline, s->limits.shutdown_deadline_ms, 0);
    for (struct conn *c = s->conns; c; c = next) {
        next = c->next;
        conn_shutdown(c);
    }
    server_maybe_finish(s);
}

static void admins_resolve(struct server *s);

static void on_admins_resolved(int error, struct admin_set *set, void *userdata)
{
    struct server *s = userdata;

    s->admins_resolving = false;
    if (s->admins_again) {
        /* The configuration changed again meanwhile: this answer may be stale. */
        s->admins_again = false;
        admins_resolve(s);
        return;
    }
    if (error < 0) {
        log_warning(COMP, "cannot resolve admin_group '%s': %s, keeping the previous members",
                    strna(s->config->server.admin_group), strerror(-error));
        return;
    }
    admin_set_swap(&s->admins, set);
}

static void admins_resolve(struct server *s)
{
    int r;

    if (s->admins_resolving) {
        s->admins_again = true;
        return;
    }
    r = admin_set_resolve_async(s->loop, s->config->server.admin_group, on_admins_resolved, s);
    if (r < 0) {
        log_warning(COMP, "cannot resolve admin_group: %s, keeping the previous members",
                    strerror(-r));
        return;
    }
    s->admins_resolving = true;
}

void server_apply_limits(struct server *s)
{
    /* Caps are read live from s->config at accept and per request; the admin group is
     * resolved off the loop (NSS may block), and requests keep the previous members
     * until the answer is in. */
    admins_resolve(s);
}

void server_done(struct server *s)
{
    if (!s)
        return;
    close_listener(s);
    free(s->socket_path);
    free(s->uids);
    admin_set_done(&s->admins);
    conn_host_done(&s->host);
    s->socket_path = NULL;
    s->uids = NULL;
}
