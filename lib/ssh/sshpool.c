/* SSH sessions on the loop and the per-sandbox session pool. See sshs.h; keys, pins
 * and session setup are sshs.c's. */
#include <assert.h>
#include <libssh/libssh.h>
#include <malloc.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <string.h>
#include <sys/socket.h>

#include "log.h"
#include "macro.h"
#include "sshs-internal.h"
#include "sshs.h"

#define COMP "ssh"
/* Delay between connect attempts while sshpool_connect() waits for sshd to come up: it
 * doubles after each failure up to SSHPOOL_RETRY_MAX_MS. One attempt (TCP, handshake, auth) is
 * given SSHPOOL_ATTEMPT_MIN_MS at first, doubling up to the configured connect timeout, so that
 * a SYN dropped while a firewall catches up is retried soon rather than after the whole
 * connect timeout. */
#define SSHPOOL_RETRY_MS 200u
#define SSHPOOL_RETRY_MAX_MS 2000u
#define SSHPOOL_ATTEMPT_MIN_MS 2000u
#define SSHPOOL_BACKOFF_MAX 8u /* doublings */
/* Kill channels may use this many slots beyond channels_per_session. */
#define SSHPOOL_URGENT_SPARE 2u
/* Rounds of channel servicing per event before waiting on the socket again. */
#define SSHPOOL_SERVICE_ROUNDS 16

struct sshpool_conn {
    uv_poll_t poll;
    ssh_session ssh;
    ssh_event event;
    struct sshpool_session *session; /* NULL once detached (closing) */
    struct sshpool *pool;
    bool graceful; /* send SSH_MSG_DISCONNECT when freeing */
    bool trim;     /* give the freed heap pages back to the system (an idle close) */
};

struct sshpool_session {
    struct sshpool *pool;
    unsigned index;
    enum sshpool_state state;
    struct sshpool_conn *conn;
    uv_timer_t timer; /* connect deadline, keepalive, or retry delay, by state */
    int events;       /* uv poll events armed */
    struct sshpool_chan *first, *last;
    unsigned nchan;
    bool retry_pending; /* DISCONNECTED, waiting before connecting again */
    unsigned failures;  /* connect attempts failed in a row (backoff), 0 once READY */
    bool was_lost;      /* lost since it was last ready (the observer's SSHS_EVENT_RESTORED) */
    bool dirty;
    bool wake; /* a chan asked for a service from outside the session's events */
    uint64_t last_rx_ms;
    uint64_t last_used_ms; /* a channel last attached or released */
};

struct sshpool {
    uv_loop_t *loop;
    struct sshs_conf conf;
    unsigned n;
    struct sshpool_session *sessions;
    struct sshpool_chan *qfirst, *qlast;
    unsigned queued;
    uv_timer_t kick;
    uv_timer_t connect_timer;
    sshpool_connect_cb connect_cb;
    void *connect_ud;
    int connect_last_error;
    bool closing;
    unsigned refs;
    sshpool_close_cb close_cb;
    void *close_ud;
    uint64_t connects, lost;
    char last_error[256];
    int nsexec; /* the exec helper's state in the container (sshexec.c) */
    int super;  /* the exec supervisor's flags (sshexec.c) */
    uint16_t super_port;
    char super_token[33];
};

static void on_session_timer(uv_timer_t *t);
static void on_kick(uv_timer_t *t);
static void on_ssh_poll(uv_poll_t *h, int status, int events);
static void session_connect(struct sshpool_session *s);
static void session_service(struct sshpool_session *s);
static void pool_kick(struct sshpool *p);

/* ---- the pool ---- */

const char *sshpool_state_to_string(enum sshpool_state s)
{
    static const char *const names[_SSHPOOL_STATE_MAX] = {
        [SSHPOOL_STATE_DISCONNECTED] = "disconnected",
        [SSHPOOL_STATE_CONNECTING] = "connecting",
        [SSHPOOL_STATE_AUTHENTICATING] = "authenticating",
        [SSHPOOL_STATE_READY] = "ready",
        [SSHPOOL_STATE_CLOSING] = "closing",
    };
    return (unsigned)s < _SSHPOOL_STATE_MAX ? names[s] : "invalid";
}

/* Whether a session may go from state a to b: disconnected -> connecting -> authenticating
 * -> ready, back to disconnected from any of them, and to closing (for good) from any. */
_unused_ static bool session_transition_ok(enum sshpool_state a, enum sshpool_state b)
{
    switch (b) {
    case SSHPOOL_STATE_CONNECTING:
        return a == SSHPOOL_STATE_DISCONNECTED;
    case SSHPOOL_STATE_AUTHENTICATING:
        return a == SSHPOOL_STATE_CONNECTING;
    case SSHPOOL_STATE_READY:
        return a == SSHPOOL_STATE_CONNECTING || a == SSHPOOL_STATE_AUTHENTICATING;
    case SSHPOOL_STATE_DISCONNECTED:
        return a != SSHPOOL_STATE_CLOSING;
    case SSHPOOL_STATE_CLOSING:
        return true;
    default:
        return false;
    }
}

static void session_set_state(struct sshpool_session *s, enum sshpool_state state)
{
    if (s->state == state)
        return;
    assert(session_transition_ok(s->state, state));
    log_debug(COMP, "%s:%u #%u: %s -> %s", s->pool->conf.host, s->pool->conf.port, s->index,
              sshpool_state_to_string(s->state), sshpool_state_to_string(state));
    s->state = state;
    if (state == SSHPOOL_STATE_READY)
        s->failures = 0;
}

static uint64_t backoff_ms(unsigned base_ms, unsigned failures, uint64_t max_ms)
{
    return MIN((uint64_t)base_ms << MIN(failures, SSHPOOL_BACKOFF_MAX), max_ms);
}

static void pool_ref(struct sshpool *p)
{
    p->refs++;
}

static void pool_unref(struct sshpool *p)
{
    sshpool_close_cb cb;
    void *ud;

    assert(p->refs > 0);
    if (--p->refs > 0)
        return;
    cb = p->close_cb;
    ud = p->close_ud;
    sshs_conf_done(&p->conf);
    free(p->sessions);
    free(p);
    if (cb)
        cb(ud);
}

static void on_handle_closed_unref(uv_handle_t *h)
{
    pool_unref(h->data);
}

uv_loop_t *sshpool_get_loop(const struct sshpool *pool)
{
    return pool->loop;
}

int sshpool_get_nsexec(const struct sshpool *pool)
{
    return pool->nsexec;
}

void sshpool_set_nsexec(struct sshpool *pool, int state)
{
    pool->nsexec = state;
}

int sshpool_get_super(const struct sshpool *pool)
{
    return pool->super;
}

void sshpool_set_super(struct sshpool *pool, int flags)
{
    pool->super = flags;
}

bool sshpool_exec_supervisor(const struct sshpool *pool)
{
    return pool->conf.exec_supervisor;
}

void sshpool_set_super_addr(struct sshpool *pool, uint16_t port, const char *token)
{
    pool->super_port = port;
    snprintf(pool->super_token, sizeof(pool->super_token), "%s", token);
}

uint16_t sshpool_get_super_port(const struct sshpool *pool)
{
    return pool->super_port;
}

const char *sshpool_get_super_token(const struct sshpool *pool)
{
    return pool->super_token;
}

int sshpool_new(uv_loop_t *loop, const struct sshs_config *cfg, unsigned n_sessions,
                struct sshpool **ret)
{
    _cleanup_free_ struct sshpool *p = NULL;
    _cleanup_free_ struct sshpool_session *sessions = NULL;
    int r;

    if (!loop || !ret || n_sessions < 1 || n_sessions > SSHS_SESSIONS_MAX)
        return -EINVAL;
    p = calloc(1, sizeof(*p));
    sessions = calloc(n_sessions, sizeof(*sessions));
    if (!p || !sessions)
        return -ENOMEM;
    r = sshs_conf_copy(cfg, &p->conf);
    if (r < 0)
        return r;
    p->sessions = TAKE_PTR(sessions);
    p->loop = loop;
    p->n = n_sessions;
    p->refs = 1;
    uv_timer_init(loop, &p->kick);
    p->kick.data = p;
    uv_timer_init(loop, &p->connect_timer);
    p->connect_timer.data = p;
    for (unsigned i = 0; i < n_sessions; i++) {
        struct sshpool_session *s = &p->sessions[i];
        s->pool = p;
        s->index = i;
        s->state = SSHPOOL_STATE_DISCONNECTED;
        uv_timer_init(loop, &s->timer);
        s->timer.data = s;
    }
    *ret = TAKE_PTR(p);
    return 0;
}

static void set_last_error(struct sshpool *p, const char *what, const char *msg)
{
    snprintf(p->last_error, sizeof(p->last_error), "%s%s%s", what, msg && *msg ? ": " : "",
             msg ? msg : "");
}

const char *sshpool_last_error(const struct sshpool *pool)
{
    return pool->last_error;
}

void sshpool_get_stats(const struct sshpool *pool, struct sshpool_stats *ret)
{
    struct sshpool_stats st = {.sessions = pool->n,
                               .queued = pool->queued,
                               .connects = pool->connects,
                               .sessions_lost = pool->lost};

    for (unsigned i = 0; i < pool->n; i++) {
        if (pool->sessions[i].state == SSHPOOL_STATE_READY)
            st.sessions_ready++;
        st.channels += pool->sessions[i].nchan;
    }
    *ret = st;
}

/* -- channel lists -- */

static void list_append(struct sshpool_chan **first, struct sshpool_chan **last,
                        struct sshpool_chan *c)
{
    c->prev = *last;
    c->next = NULL;
    if (*last)
        (*last)->next = c;
    else
        *first = c;
    *last = c;
}

static void list_remove(struct sshpool_chan **first, struct sshpool_chan **last,
                        struct sshpool_chan *c)
{
    if (c->prev)
        c->prev->next = c->next;
    else
        *first = c->next;
    if (c->next)
        c->next->prev = c->prev;
    else
        *last = c->prev;
    c->prev = c->next = NULL;
}

void sshpool_submit(struct sshpool *pool, struct sshpool_chan *c)
{
    assert(!c->queued && !c->attached);
    c->pool = pool;
    c->session = NULL;
    list_append(&pool->qfirst, &pool->qlast, c);
    c->queued = true;
    pool->queued++;
    pool_kick(pool);
}

void sshpool_release(struct sshpool_chan *c)
{
    struct sshpool *p = c->pool;

    if (c->queued) {
        list_remove(&p->qfirst, &p->qlast, c);
        c->queued = false;
        p->queued--;
    } else if (c->attached) {
        struct sshpool_session *s = c->session;
        list_remove(&s->first, &s->last, c);
        c->attached = false;
        s->nchan--;
        s->last_used_ms = uv_now(p->loop);
        c->session = NULL;
        if (p->qfirst)
            pool_kick(p);
    }
}

ssh_session sshpool_chan_ssh(const struct sshpool_chan *c)
{
    return c->session && c->session->conn ? c->session->conn->ssh : NULL;
}

void sshpool_chan_mark_dirty(struct sshpool_chan *c)
{
    if (c->session)
        c->session->dirty = true;
}

void sshpool_chan_wake(struct sshpool_chan *c)
{
    if (!c->session)
        return;
    c->session->wake = true;
    pool_kick(c->pool);
}

static void session_update_poll(struct sshpool_session *s)
{
    struct sshpool_conn *conn = s->conn;
    int events, flags;

    if (!conn || !conn->poll.data || s->state == SSHPOOL_STATE_CLOSING ||
        s->state == SSHPOOL_STATE_DISCONNECTED)
        return;
    flags = ssh_get_poll_flags(conn->ssh);
    events = UV_READABLE | ((flags & SSH_WRITE_PENDING) ? UV_WRITABLE : 0);
    if (events != s->events) {
        if (uv_poll_start(&conn->poll, events, on_ssh_poll) < 0)
            return;
        s->events = events;
    }
}

void sshpool_chan_flush(struct sshpool_chan *c)
{
    if (c->session)
        session_update_poll(c->session);
}

/* -- connection teardown -- */

static void on_conn_closed(uv_handle_t *h)
{
    struct sshpool_conn *conn = container_of(h, struct sshpool_conn, poll);
    struct sshpool *p = conn->pool;

    if (conn->event) {
        ssh_event_remove_session(conn->event, conn->ssh);
        ssh_event_free(conn->event);
    }
    if (conn->graceful && ssh_is_connected(conn->ssh))
        ssh_disconnect(conn->ssh);
    ssh_free(conn->ssh);
    /* The session's blocks lie among those of sessions that stay: without a trim the pages
     * they free stay in the daemon's RSS. */
    if (conn->trim)
        malloc_trim(0);
    free(conn);
    pool_unref(p);
}

/* Detaches and closes the connection. The libssh session is freed in the close callback;
 * the poll handle stops watching the fd now, before libssh closes it. */
static void session_drop_conn(struct sshpool_session *s, bool graceful)
{
    struct sshpool_conn *conn = s->conn;

    if (!conn)
        return;
    s->conn = NULL;
    s->events = 0;
    conn->session = NULL;
    conn->graceful = graceful;
    if (conn->poll.data) {
        /* The poll handle was initialised: free in its close callback. */
        uv_close((uv_handle_t *)&conn->poll, on_conn_closed);
    } else {
        ssh_free(conn->ssh);
        free(conn);
        pool_unref(s->pool);
    }
}

static void fail_chans(struct sshpool_session *s, int error)
{
    struct sshpool_chan *c;

    while ((c = s->first)) {
        list_remove(&s->first, &s->last, c);
        c->attached = false;
        c->session = NULL;
        s->nchan--;
        c->ops->fail(c, error);
    }
}

static void fail_queue(struct sshpool *p, int error)
{
    struct sshpool_chan *c;

    while ((c = p->qfirst)) {
        list_remove(&p->qfirst, &p->qlast, c);
        c->queued = false;
        p->queued--;
        c->ops->fail(c, error);
    }
}

static bool pool_any_ready_or_connecting(const struct sshpool *p)
{
    for (unsigned i = 0; i < p->n; i++) {
        enum sshpool_state st = p->sessions[i].state;
        if (st == SSHPOOL_STATE_READY || st == SSHPOOL_STATE_CONNECTING ||
            st == SSHPOOL_STATE_AUTHENTICATING)
            return true;
    }
    return false;
}

static void connect_op_finish(struct sshpool *p, int error)
{
    sshpool_connect_cb cb = p->connect_cb;
    void *ud = p->connect_ud;

    if (!cb)
        return;
    p->connect_cb = NULL;
    p->connect_ud = NULL;
    uv_timer_stop(&p->connect_timer);
    cb(p, error, ud);
}

static bool is_retryable(int error)
{
    return error == -ECONNREFUSED || error == -ETIMEDOUT || error == -EHOSTUNREACH ||
           error == -ENETUNREACH || error == -ECONNRESET || error == -EPROTO;
}

/* A connect attempt failed (before READY). */
static void session_connect_failed(struct sshpool_session *s, int error)
{
    struct sshpool *p = s->pool;

    log_debug(COMP, "%s:%u #%u: connect failed: %s", p->conf.host, p->conf.port, s->index,
              strerror(-error));
    if (s->conn)
        set_last_error(p, "connect", ssh_get_error(s->conn->ssh));
    uv_timer_stop(&s->timer);
    session_drop_conn(s, false);
    session_set_state(s, SSHPOOL_STATE_DISCONNECTED);
    p->connect_last_error = error;

    if (p->connect_cb) {
        if (!is_retryable(error)) {
            connect_op_finish(p, error);
        } else {
            s->retry_pending = true;
            uv_timer_start(&s->timer, on_session_timer,
                           backoff_ms(SSHPOOL_RETRY_MS, s->failures++, SSHPOOL_RETRY_MAX_MS), 0);
            return;
        }
    }
    if (p->closing)
        return;
    /* Queued execs wait for a session: with none ready or on its way, they fail now. */
    if (p->qfirst && !pool_any_ready_or_connecting(p)) {
        bool retrying = false;
        for (unsigned i = 0; i < p->n; i++)
            retrying |= p->sessions[i].retry_pending;
        if (!retrying)
            fail_queue(p, error);
    }
}

/* A READY session was lost: fail what runs on it, forget the connection. */
static void session_lost(struct sshpool_session *s, int error)
{
    struct sshpool *p = s->pool;

    if (s->conn)
        set_last_error(p, "session lost", ssh_get_error(s->conn->ssh));
    log_debug(COMP, "%s:%u #%u: session lost", p->conf.host, p->conf.port, s->index);
    p->lost++;
    s->was_lost = true;
    if (p->conf.observe && !p->closing)
        p->conf.observe(SSHS_EVENT_LOST, s->index, p->conf.observe_data);
    uv_timer_stop(&s->timer);
    /* Stop polling first: libssh may already have closed the fd. */
    if (s->conn)
        uv_poll_stop(&s->conn->poll);
    fail_chans(s, -ECONNRESET);
    session_drop_conn(s, false);
    session_set_state(s, SSHPOOL_STATE_DISCONNECTED);
    if (p->qfirst)
        pool_kick(p);
}

static void session_ready(struct sshpool_session *s)
{
    struct sshpool *p = s->pool;
    struct sshpool_conn *conn = s->conn;
    uint64_t period;

    conn->event = ssh_event_new();
    if (!conn->event || ssh_event_add_session(conn->event, conn->ssh) != SSH_OK) {
        session_connect_failed(s, -ENOMEM);
        return;
    }
    session_set_state(s, SSHPOOL_STATE_READY);
    p->connects++;
    if (s->was_lost && p->conf.observe && !p->closing)
        p->conf.observe(SSHS_EVENT_RESTORED, s->index, p->conf.observe_data);
    s->was_lost = false;
    s->last_rx_ms = uv_now(p->loop);
    s->last_used_ms = s->last_rx_ms;
    period = MIN(p->conf.keepalive_ms, p->conf.idle_close_ms);
    uv_timer_start(&s->timer, on_session_timer, period, period);
    session_update_poll(s);
    if (p->qfirst)
        pool_kick(p);
    connect_op_finish(p, 0);
}

static void session_step(struct sshpool_session *s)
{
    struct sshpool_conn *conn = s->conn;
    int rc, r;

    if (s->state == SSHPOOL_STATE_CONNECTING) {
        rc = ssh_connect(conn->ssh);
        if (rc == SSH_AGAIN) {
            if (ssh_get_fd(conn->ssh) >= 0 && !conn->poll.data) {
                if (uv_poll_init_socket(s->pool->loop, &conn->poll, ssh_get_fd(conn->ssh)) < 0) {
                    session_connect_failed(s, -EIO);
                    return;
                }
                conn->poll.data = conn;
            }
            session_update_poll(s);
            return;
        }
        if (rc != SSH_OK) {
            session_connect_failed(s, sshs_connect_error(conn->ssh));
            return;
        }
        r = sshs_check_host_key(conn->ssh, s->pool->conf.pins);
        if (r < 0) {
            set_last_error(s->pool, "host key", "does not match the pinned fingerprint");
            session_connect_failed(s, r);
            return;
        }
        sshs_tune_socket(ssh_get_fd(conn->ssh), s->pool->conf.keepalive_ms);
        session_set_state(s, SSHPOOL_STATE_AUTHENTICATING);
    }
    if (s->state == SSHPOOL_STATE_AUTHENTICATING) {
        rc = ssh_userauth_publickey(conn->ssh, NULL, s->pool->conf.key->key);
        if (rc == SSH_AUTH_AGAIN) {
            session_update_poll(s);
            return;
        }
        if (rc == SSH_AUTH_SUCCESS) {
            session_ready(s);
            return;
        }
        if (rc == SSH_AUTH_ERROR) {
            session_connect_failed(s, sshs_connect_error(conn->ssh));
            return;
        }
        set_last_error(s->pool, "authentication", "public key refused");
        session_connect_failed(s, -EKEYREJECTED);
    }
}

static void quickack(int fd)
{
    int on = 1;

    /* sshd leaves Nagle on for non-TTY sessions; without immediate ACKs its small replies
     * wait for our delayed ACK (~40 ms). Linux clears QUICKACK again, so set it each time. */
    (void)setsockopt(fd, IPPROTO_TCP, TCP_QUICKACK, &on, sizeof(on));
}

static bool conn_is_dead(ssh_session ssh)
{
    return !ssh_is_connected(ssh) || (ssh_get_status(ssh) & (SSH_CLOSED | SSH_CLOSED_ERROR));
}

static void on_ssh_poll(uv_poll_t *h, int status, int events)
{
    struct sshpool_conn *conn = h->data;
    struct sshpool_session *s = conn->session;
    struct sshpool *p = conn->pool;

    if (!s)
        return;
    pool_ref(p);
    if (s->state == SSHPOOL_STATE_CONNECTING || s->state == SSHPOOL_STATE_AUTHENTICATING) {
        session_step(s);
    } else if (s->state == SSHPOOL_STATE_READY) {
        int rc;

        if (status >= 0 && (events & UV_READABLE))
            quickack(ssh_get_fd(conn->ssh));
        rc = ssh_event_dopoll(conn->event, 0);
        s->last_rx_ms = uv_now(p->loop);
        /* Channels first: a command that finished just before the connection dropped still
         * reports its result. */
        session_service(s);
        if (!p->closing && s->conn == conn && s->state == SSHPOOL_STATE_READY &&
            (status < 0 || rc == SSH_ERROR || conn_is_dead(conn->ssh)))
            session_lost(s, -ECONNRESET);
    }
    pool_unref(p);
}

/* Runs every channel's step function until no callback asks for another round. */
static void session_service(struct sshpool_session *s)
{
    struct sshpool *p = s->pool;
    struct sshpool_conn *conn = s->conn;

    for (int round = 0; round < SSHPOOL_SERVICE_ROUNDS; round++) {
        struct sshpool_chan *c, *next;

        s->dirty = false;
        for (c = s->first; c; c = next) {
            next = c->next;
            c->ops->process(c);
            /* process() finishes at most c itself; a user callback may close the pool, which
             * fails every chan: stop walking then. */
            if (p->closing || s->conn != conn)
                return;
        }
        if (!s->dirty)
            break;
    }
    session_update_poll(s);
}

/* A ready session without channels for idle_close_ms while another session is ready. */
static bool session_idle_surplus(const struct sshpool_session *s)
{
    const struct sshpool *p = s->pool;

    if (s->nchan > 0 || p->qfirst || p->connect_cb ||
        uv_now(p->loop) - s->last_used_ms < p->conf.idle_close_ms)
        return false;
    for (unsigned i = 0; i < p->n; i++)
        if (i != s->index && p->sessions[i].state == SSHPOOL_STATE_READY)
            return true;
    return false;
}

static void on_session_timer(uv_timer_t *t)
{
    struct sshpool_session *s = t->data;
    struct sshpool *p = s->pool;

    pool_ref(p);
    switch (s->state) {
    case SSHPOOL_STATE_CONNECTING:
    case SSHPOOL_STATE_AUTHENTICATING:
        set_last_error(p, "connect", "timed out");
        session_connect_failed(s, -ETIMEDOUT);
        break;
    case SSHPOOL_STATE_READY:
        if (session_idle_surplus(s)) {
            log_debug(COMP, "%s:%u #%u: idle, closed", p->conf.host, p->conf.port, s->index);
            uv_timer_stop(&s->timer);
            s->conn->trim = true;
            session_drop_conn(s, true);
            session_set_state(s, SSHPOOL_STATE_DISCONNECTED);
            break;
        }
        if (uv_now(p->loop) - s->last_rx_ms >= p->conf.keepalive_ms) {
            if (ssh_send_ignore(s->conn->ssh, "sandboxd") != SSH_OK || conn_is_dead(s->conn->ssh)) {
                session_lost(s, -ECONNRESET);
                break;
            }
            session_update_poll(s);
        }
        break;
    case SSHPOOL_STATE_DISCONNECTED:
        if (s->retry_pending) {
            s->retry_pending = false;
            if (p->connect_cb || p->qfirst)
                session_connect(s);
        }
        break;
    default:
        break;
    }
    pool_unref(p);
}

static void session_connect(struct sshpool_session *s)
{
    struct sshpool *p = s->pool;
    struct sshpool_conn *conn;
    if (s->state != SSHPOOL_STATE_DISCONNECTED || p->closing)
        return;
    s->retry_pending = false;
    conn = calloc(1, sizeof(*conn));
    if (!conn) {
        session_connect_failed(s, -ENOMEM);
        return;
    }
    conn->ssh = sshs_new_session(&p->conf);
    if (!conn->ssh) {
        free(conn);
        session_connect_failed(s, -ENOMEM);
        return;
    }
    ssh_set_blocking(conn->ssh, 0);
    conn->session = s;
    conn->pool = p;
    s->conn = conn;
    s->events = 0;
    pool_ref(p); /* the conn's own reference, dropped when it is freed */
    session_set_state(s, SSHPOOL_STATE_CONNECTING);
    uv_timer_start(&s->timer, on_session_timer,
                   backoff_ms(SSHPOOL_ATTEMPT_MIN_MS, s->failures, p->conf.connect_timeout_ms), 0);
    session_step(s);
}

/* -- dispatch -- */

static void pool_kick(struct sshpool *p)
{
    if (!p->closing && !uv_is_active((uv_handle_t *)&p->kick))
        uv_timer_start(&p->kick, on_kick, 0, 0);
}

static struct sshpool_session *pick_session(struct sshpool *p, bool urgent)
{
    struct sshpool_session *best = NULL;
    unsigned cap = p->conf.channels_per_session + (urgent ? SSHPOOL_URGENT_SPARE : 0);

    for (unsigned i = 0; i < p->n; i++) {
        struct sshpool_session *s = &p->sessions[i];
        if (s->state != SSHPOOL_STATE_READY || s->nchan >= cap)
            continue;
        if (!best || s->nchan < best->nchan)
            best = s;
    }
    return best;
}

static void on_kick(uv_timer_t *t)
{
    struct sshpool *p = t->data;
    struct sshpool_chan *c, *next;
    unsigned ready = 0, waiting = 0, touched = 0;
    struct sshpool_session *touched_s[SSHS_SESSIONS_MAX];

    pool_ref(p);
    for (c = p->qfirst; c && !p->closing; c = next) {
        struct sshpool_session *s;
        bool seen = false;

        next = c->next;
        s = pick_session(p, c->urgent);
        if (!s) {
            waiting++;
            continue;
        }
        list_remove(&p->qfirst, &p->qlast, c);
        c->queued = false;
        p->queued--;
        list_append(&s->first, &s->last, c);
        c->attached = true;
        c->session = s;
        s->nchan++;
        s->last_used_ms = uv_now(p->loop);
        for (unsigned i = 0; i < touched; i++)
            seen |= touched_s[i] == s;
        if (!seen)
            touched_s[touched++] = s;
    }
    /* Start the newly attached channels (their first step sends CHANNEL_OPEN). */
    for (unsigned i = 0; i < touched && !p->closing; i++)
        if (touched_s[i]->state == SSHPOOL_STATE_READY)
            session_service(touched_s[i]);
    /* Sessions a chan woke (sshpool_chan_wake()). */
    for (unsigned i = 0; i < p->n && !p->closing; i++) {
        struct sshpool_session *s = &p->sessions[i];

        if (s->wake && s->state == SSHPOOL_STATE_READY) {
            s->wake = false;
            session_service(s);
        }
    }

    if (!p->closing && waiting > 0) {
        /* Grow: connect idle slots when nothing is ready, or when every ready session is
         * full. */
        for (unsigned i = 0; i < p->n; i++)
            ready += p->sessions[i].state == SSHPOOL_STATE_READY;
        for (unsigned i = 0; i < p->n; i++) {
            struct sshpool_session *s = &p->sessions[i];
            if (s->state == SSHPOOL_STATE_DISCONNECTED && !s->retry_pending) {
                session_connect(s);
                if (ready > 0)
                    break; /* one more at a time when some are up */
            }
            if (p->closing)
                break;
        }
    }
    pool_unref(p);
}

static void on_connect_deadline(uv_timer_t *t)
{
    struct sshpool *p = t->data;
    int error = p->connect_last_error ? p->connect_last_error : -ETIMEDOUT;

    pool_ref(p);
    for (unsigned i = 0; i < p->n; i++)
        if (p->sessions[i].state == SSHPOOL_STATE_READY)
            error = 0;
    /* Stop retrying slots that only retried because of this connect. */
    for (unsigned i = 0; i < p->n; i++) {
        struct sshpool_session *s = &p->sessions[i];
        if (s->retry_pending && !p->qfirst) {
            s->retry_pending = false;
            uv_timer_stop(&s->timer);
        }
    }
    connect_op_finish(p, error);
    pool_unref(p);
}

int sshpool_connect(struct sshpool *pool, uint64_t deadline_ms, sshpool_connect_cb cb,
                    void *userdata)
{
    if (!pool || !cb || pool->closing)
        return -EINVAL;
    if (pool->connect_cb)
        return -EBUSY;
    pool->connect_cb = cb;
    pool->connect_ud = userdata;
    pool->connect_last_error = 0;
    uv_update_time(pool->loop); /* the deadline counts from now, not from the last tick */
    uv_timer_start(&pool->connect_timer, on_connect_deadline, deadline_ms, 0);
    for (unsigned i = 0; i < pool->n; i++)
        if (pool->sessions[i].state == SSHPOOL_STATE_READY) {
            /* Already up: report from the loop, not from here. */
            uv_timer_start(&pool->connect_timer, on_connect_deadline, 0, 0);
            pool->connect_last_error = 0;
            return 0;
        }
    /* Connecting may fail synchronously (no memory); report from the loop then. */
    for (unsigned i = 0; i < pool->n; i++) {
        struct sshpool_session *s = &pool->sessions[i];
        if (s->state == SSHPOOL_STATE_DISCONNECTED) {
            s->retry_pending = true;
            uv_timer_start(&s->timer, on_session_timer, 0, 0);
        }
    }
    return 0;
}

void sshpool_close(struct sshpool *pool, sshpool_close_cb cb, void *userdata)
{
    if (!pool || pool->closing)
        return;
    pool_ref(pool);
    pool->closing = true;
    pool->close_cb = cb;
    pool->close_ud = userdata;
    uv_timer_stop(&pool->kick);
    if (pool->connect_cb) {
        sshpool_connect_cb ccb = pool->connect_cb;
        void *ud = pool->connect_ud;
        pool->connect_cb = NULL;
        uv_timer_stop(&pool->connect_timer);
        ccb(pool, -ECANCELED, ud);
    }
    fail_queue(pool, -ECANCELED);
    for (unsigned i = 0; i < pool->n; i++) {
        struct sshpool_session *s = &pool->sessions[i];
        bool ready = s->state == SSHPOOL_STATE_READY;

        uv_timer_stop(&s->timer);
        fail_chans(s, -ECANCELED);
        session_drop_conn(s, ready);
        session_set_state(s, SSHPOOL_STATE_CLOSING);
        s->timer.data = pool;
        pool_ref(pool);
        uv_close((uv_handle_t *)&s->timer, on_handle_closed_unref);
    }
    pool_ref(pool);
    uv_close((uv_handle_t *)&pool->kick, on_handle_closed_unref);
    pool_ref(pool);
    uv_close((uv_handle_t *)&pool->connect_timer, on_handle_closed_unref);
    pool_unref(pool); /* the temporary reference */
    pool_unref(pool); /* the owner's reference */
}
