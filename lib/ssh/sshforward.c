/* Relayed connections of port forwards. See sshforward.h.
 *
 * Every libssh call runs from the session's service (the chan's process()), never from the
 * client's callbacks: those record what happened and wake the session
 * (sshpool_chan_wake()), so packets read while serving this channel are always followed by
 * a service of every channel of the session. */
#include "sshforward.h"

#include <assert.h>
#include <libssh/callbacks.h>
#include <libssh/libssh.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "macro.h"
#include "sshs-internal.h"

#define COMP "forward"
#define SSHFWD_WRITE_CHUNK (32u * 1024u)

enum fwd_state {
    FWD_QUEUED,  /* waiting for a session */
    FWD_OPENING, /* ssh_channel_open_forward() resumed */
    FWD_OPEN,
    FWD_ABORTING, /* the client went while the open was in flight: closed once it completes
                   * (freeing a channel sshd has not confirmed would leave its TCP connection
                   * to the service open in the sandbox) */
    FWD_DONE,     /* the channel is gone; freed once the client's stream is closed too */
    _FWD_STATE_MAX,
};

struct sshfwd {
    struct sshpool_chan chan;
    enum fwd_state state;
    union {
        uv_stream_t stream;
        uv_pipe_t pipe;
        uv_tcp_t tcp;
    } client;
    ssh_channel ch;
    struct ssh_channel_callbacks_struct cbs;
    uint16_t port;
    size_t cap;
    char *up; /* from the client, for the channel */
    size_t up_len;
    char *down; /* from the channel, for the client: [0, inflight) is being written */
    size_t down_len, inflight;
    uv_write_t wreq;
    uv_shutdown_t sreq;
    bool reading, writing;
    bool client_eof, eof_sent;
    bool shut_sent, shut_done;
    bool finishing;     /* the client's stream is closing (or closed) */
    bool client_closed; /* ... and its close callback ran (the done callback with it) */
    int error;
    uint64_t up_total, down_total;
    sshfwd_done_cb cb;
    void *userdata;
};

static const char *fwd_state_to_string(enum fwd_state s)
{
    static const char *const names[_FWD_STATE_MAX] = {
        [FWD_QUEUED] = "queued",     [FWD_OPENING] = "opening", [FWD_OPEN] = "open",
        [FWD_ABORTING] = "aborting", [FWD_DONE] = "done",
    };
    return (unsigned)s < _FWD_STATE_MAX ? names[s] : "invalid";
}

static void fwd_set_state(struct sshfwd *f, enum fwd_state state)
{
    if (f->state == state)
        return;
    log_debug(COMP, "port %u: %s -> %s", f->port, fwd_state_to_string(f->state),
              fwd_state_to_string(state));
    f->state = state;
}

static void fwd_maybe_free(struct sshfwd *f)
{
    if (!f->client_closed || f->state != FWD_DONE)
        return;
    free(f->up);
    free(f->down);
    free(f);
}

static void on_client_closed(uv_handle_t *h)
{
    struct sshfwd *f = h->data;

    /* The callback may close the pool, which ends the channel: f stays until after it. */
    f->cb(f, f->error, f->userdata);
    f->client_closed = true;
    fwd_maybe_free(f);
}

static void on_accept_failed_closed(uv_handle_t *h)
{
    struct sshfwd *f = h->data;

    free(f->up);
    free(f->down);
    free(f);
}

static void drop_channel(struct sshfwd *f, bool send)
{
    ssh_session ssh = sshpool_chan_ssh(&f->chan);

    if (!f->ch)
        return;
    ssh_remove_channel_callbacks(f->ch, &f->cbs);
    if (send && ssh && ssh_is_connected(ssh) && ssh_channel_is_open(f->ch))
        (void)ssh_channel_close(f->ch);
    ssh_channel_free(f->ch);
    f->ch = NULL;
    if (send)
        sshpool_chan_flush(&f->chan);
}

/* The channel's end: closed (send) and its slot given back. */
static void chan_done(struct sshfwd *f, bool send)
{
    drop_channel(f, send);
    if (send)
        sshpool_chan_wake(&f->chan); /* closing may have read other channels' packets */
    sshpool_release(&f->chan);
    fwd_set_state(f, FWD_DONE);
}

/* Ends the connection: the client's stream closes (then the callback), and the channel goes
 * now, or once sshd answered an open in flight. */
static void fwd_finish(struct sshfwd *f, int error)
{
    if (f->finishing)
        return;
    f->finishing = true;
    f->error = error;
    if (f->state == FWD_OPENING)
        fwd_set_state(f, FWD_ABORTING);
    else if (f->state != FWD_ABORTING && f->state != FWD_DONE)
        chan_done(f, true);
    uv_close((uv_handle_t *)&f->client.stream, on_client_closed);
}

static void fwd_wake(struct sshfwd *f)
{
    if (f->state == FWD_OPEN)
        sshpool_chan_wake(&f->chan);
}

/* ---- the client's side (callbacks record and wake) ---- */

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    struct sshfwd *f = h->data;

    *buf = uv_buf_init(f->up + f->up_len, (unsigned)(f->cap - f->up_len));
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
    struct sshfwd *f = s->data;

    if (f->finishing)
        return;
    if (nread > 0) {
        f->up_len += (size_t)nread;
        if (f->up_len >= f->cap) {
            uv_read_stop(s);
            f->reading = false;
        }
    } else if (nread == UV_EOF) {
        f->client_eof = true;
        uv_read_stop(s);
        f->reading = false;
    } else if (nread == UV_ENOBUFS) {
        uv_read_stop(s);
        f->reading = false;
    } else if (nread < 0) {
        fwd_finish(f, -ECONNRESET);
        return;
    }
    fwd_wake(f);
}

static void on_written(uv_write_t *w, int status)
{
    struct sshfwd *f = w->data;

    f->writing = false;
    if (f->finishing)
        return;
    if (status < 0) {
        fwd_finish(f, -ECONNRESET);
        return;
    }
    memmove(f->down, f->down + f->inflight, f->down_len - f->inflight);
    f->down_len -= f->inflight;
    f->down_total += f->inflight;
    f->inflight = 0;
    fwd_wake(f);
}

static void on_shutdown(uv_shutdown_t *r, int status)
{
    struct sshfwd *f = r->data;

    if (f->finishing)
        return;
    f->shut_done = true;
    fwd_wake(f);
}

/* ---- the channel's side ---- */

/* Packets for this channel may be read while another one is served: ask for another round.
 * The data stays in libssh's buffer until process() reads it (back-pressure). */
static int on_channel_data(ssh_session session, ssh_channel channel, void *data, uint32_t len,
                           int is_stderr, void *userdata)
{
    struct sshfwd *f = userdata;

    sshpool_chan_mark_dirty(&f->chan);
    return 0;
}

static void on_channel_event(ssh_session session, ssh_channel channel, void *userdata)
{
    struct sshfwd *f = userdata;

    sshpool_chan_mark_dirty(&f->chan);
}

/* Client -> channel, within the channel's window. */
static int pump_up(struct sshfwd *f)
{
    while (f->up_len > 0) {
        uint32_t w = ssh_channel_window_size(f->ch);
        size_t n = MIN(MIN(f->up_len, (size_t)w), (size_t)SSHFWD_WRITE_CHUNK);
        int rc;

        if (n == 0)
            break;
        rc = ssh_channel_write(f->ch, f->up, (uint32_t)n);
        if (rc == SSH_ERROR)
            return -ECONNRESET;
        if (rc <= 0)
            break;
        memmove(f->up, f->up + rc, f->up_len - (size_t)rc);
        f->up_len -= (size_t)rc;
        f->up_total += (uint64_t)rc;
    }
    if (f->client_eof && f->up_len == 0 && !f->eof_sent) {
        if (ssh_channel_send_eof(f->ch) == SSH_ERROR)
            return -ECONNRESET;
        f->eof_sent = true;
    }
    if (!f->reading && !f->client_eof && f->up_len < f->cap) {
        if (uv_read_start(&f->client.stream, on_alloc, on_read) < 0)
            return -ECONNRESET;
        f->reading = true;
    }
    return 0;
}

/* Channel -> client: read what fits, write it when no write is in flight. */
static int pump_down(struct sshfwd *f)
{
    while (f->down_len < f->cap) {
        int rc = ssh_channel_read_nonblocking(f->ch, f->down + f->down_len,
                                              (uint32_t)(f->cap - f->down_len), 0);
        if (rc == SSH_ERROR)
            return -ECONNRESET;
        if (rc <= 0) /* 0: nothing buffered; SSH_EOF */
            break;
        f->down_len += (size_t)rc;
    }
    if (!f->writing && f->down_len > 0) {
        uv_buf_t b = uv_buf_init(f->down, (unsigned)f->down_len);

        f->inflight = f->down_len;
        f->wreq.data = f;
        if (uv_write(&f->wreq, &f->client.stream, &b, 1, on_written) < 0)
            return -ECONNRESET;
        f->writing = true;
    }
    if (!f->writing && f->down_len == 0 && ssh_channel_is_eof(f->ch) && !f->shut_sent) {
        f->sreq.data = f;
        if (uv_shutdown(&f->sreq, &f->client.stream, on_shutdown) < 0)
            f->shut_done = true; /* the client is gone already */
        f->shut_sent = true;
    }
    return 0;
}

static int fwd_open_channel(struct sshfwd *f, ssh_session ssh)
{
    f->ch = ssh_channel_new(ssh);
    if (!f->ch)
        return -ENOMEM;
    ssh_callbacks_init(&f->cbs);
    f->cbs.userdata = f;
    f->cbs.channel_data_function = on_channel_data;
    f->cbs.channel_eof_function = on_channel_event;
    f->cbs.channel_close_function = on_channel_event;
    if (ssh_set_channel_callbacks(f->ch, &f->cbs) != SSH_OK)
        return -ENOMEM;
    fwd_set_state(f, FWD_OPENING);
    return 0;
}

static void fwd_process(struct sshpool_chan *c)
{
    struct sshfwd *f = container_of(c, struct sshfwd, chan);
    ssh_session ssh = sshpool_chan_ssh(c);
    int r;

    if (f->state == FWD_QUEUED) {
        r = fwd_open_channel(f, ssh);
        if (r < 0) {
            fwd_finish(f, r);
            return;
        }
    }
    if (f->state == FWD_OPENING || f->state == FWD_ABORTING) {
        r = ssh_channel_open_forward(f->ch, "127.0.0.1", f->port, "127.0.0.1", 0);
        if (r == SSH_AGAIN)
            goto out;
        if (f->state == FWD_ABORTING) {
            chan_done(f, true);
            fwd_maybe_free(f);
            return;
        }
        if (r != SSH_OK) {
            log_debug(COMP, "port %u: channel refused: %s", f->port, ssh_get_error(ssh));
            chan_done(f, false);
            fwd_finish(f, -ECONNREFUSED);
            return;
        }
        fwd_set_state(f, FWD_OPEN);
    }
    if (f->state == FWD_OPEN) {
        r = pump_up(f);
        if (r >= 0)
            r = pump_down(f);
        if (r < 0) {
            fwd_finish(f, r);
            return;
        }
        /* Both ways ended, or the sandbox's side closed and everything was passed on. */
        if ((f->eof_sent && f->shut_done) ||
            (ssh_channel_is_closed(f->ch) && f->down_len == 0 && !f->writing)) {
            fwd_finish(f, 0);
            return;
        }
    }
out:
    sshpool_chan_flush(c);
}

static void fwd_fail(struct sshpool_chan *c, int error)
{
    struct sshfwd *f = container_of(c, struct sshfwd, chan);

    /* detached: the session is going away, the channel is dropped without a word */
    drop_channel(f, false);
    fwd_set_state(f, FWD_DONE);
    fwd_finish(f, error);
    fwd_maybe_free(f);
}

static const struct sshpool_chan_ops fwd_ops = {
    .process = fwd_process,
    .fail = fwd_fail,
};

static int fwd_new(struct sshpool *pool, bool tcp, uint16_t port, size_t buffer_bytes,
                   sshfwd_done_cb cb, void *userdata, struct sshfwd **ret)
{
    uv_loop_t *loop = sshpool_get_loop(pool);
    struct sshfwd *f;
    int r;

    if (!cb || port == 0 || buffer_bytes < SSHFWD_BUFFER_MIN || buffer_bytes > SSHFWD_BUFFER_MAX)
        return -EINVAL;
    f = calloc(1, sizeof *f);
    if (!f)
        return -ENOMEM;
    f->cap = buffer_bytes;
    f->up = malloc(f->cap);
    f->down = malloc(f->cap);
    r = tcp ? uv_tcp_init(loop, &f->client.tcp) : uv_pipe_init(loop, &f->client.pipe, 0);
    if (r < 0 || !f->up || !f->down) {
        free(f->up);
        free(f->down);
        free(f);
        return r < 0 ? r : -ENOMEM;
    }
    f->client.stream.data = f;
    f->port = port;
    f->cb = cb;
    f->userdata = userdata;
    f->chan.ops = &fwd_ops;
    /* f->state is FWD_QUEUED (0) from calloc */
    *ret = f;
    return 0;
}

/* Reads the client (unless its buffer is full already) and queues the channel's open. */
static int fwd_start(struct sshpool *pool, struct sshfwd *f, bool tcp)
{
    int r = 0;

    if (f->up_len < f->cap)
        r = uv_read_start(&f->client.stream, on_alloc, on_read);
    if (r < 0) {
        /* closed without the callback: the caller learns the error from the return */
        uv_close((uv_handle_t *)&f->client.stream, on_accept_failed_closed);
        return r;
    }
    if (tcp)
        (void)uv_tcp_nodelay(&f->client.tcp, 1);
    f->reading = f->up_len < f->cap;
    sshpool_submit(pool, &f->chan);
    return 0;
}

int sshfwd_accept(struct sshpool *pool, uv_stream_t *server, bool tcp, uint16_t port,
                  size_t buffer_bytes, sshfwd_done_cb cb, void *userdata, struct sshfwd **ret)
{
    struct sshfwd *f;
    int r;

    r = fwd_new(pool, tcp, port, buffer_bytes, cb, userdata, &f);
    if (r < 0)
        return r;
    r = uv_accept(server, &f->client.stream);
    if (r < 0) {
        uv_close((uv_handle_t *)&f->client.stream, on_accept_failed_closed);
        return r;
    }
    r = fwd_start(pool, f, tcp);
    if (r < 0)
        return r;
    if (ret)
        *ret = f;
    return 0;
}

int sshfwd_open_fd(struct sshpool *pool, int fd, bool tcp, uint16_t port, size_t buffer_bytes,
                   const void *head, size_t head_len, sshfwd_done_cb cb, void *userdata,
                   struct sshfwd **ret)
{
    struct sshfwd *f;
    int r;

    if (head_len > buffer_bytes) {
        close(fd);
        return -EINVAL;
    }
    r = fwd_new(pool, tcp, port, buffer_bytes, cb, userdata, &f);
    if (r < 0) {
        close(fd);
        return r;
    }
    r = tcp ? uv_tcp_open(&f->client.tcp, fd) : uv_pipe_open(&f->client.pipe, fd);
    if (r < 0) {
        close(fd);
        uv_close((uv_handle_t *)&f->client.stream, on_accept_failed_closed);
        return r;
    }
    if (head_len > 0)
        memcpy(f->up, head, head_len);
    f->up_len = head_len;
    r = fwd_start(pool, f, tcp);
    if (r < 0)
        return r;
    if (ret)
        *ret = f;
    return 0;
}

uv_stream_t *sshfwd_client(struct sshfwd *f)
{
    return &f->client.stream;
}

void sshfwd_close(struct sshfwd *f)
{
    if (f)
        fwd_finish(f, -ECANCELED);
}

void sshfwd_counts(const struct sshfwd *f, uint64_t *ret_up, uint64_t *ret_down)
{
    *ret_up = f->up_total;
    *ret_down = f->down_total;
}
