/* Exec channels on pooled sessions. See sshexec.h. */
#include <assert.h>
#include <libssh/callbacks.h>
#include <libssh/libssh.h>
#include <string.h>
#include <sys/random.h>

#include "log.h"
#include "macro.h"
#include "nsexec-blob.h"
#include "sshexec-internal.h"
#include "serve-proto.h"
#include "sshexec-super.h"
#include "sshexec.h"
#include "sshs-internal.h"
#include "sshuser.h"
#include "util.h"

#include "buf.h"

#define COMP "exec"
/* How long one kill round may take before the exec is finished without it. */
#define SSHEXEC_KILL_MAX_MS 10000u
#define SSHEXEC_KILL_ROUNDS 3
#define SSHEXEC_KILL_OUTPUT_MAX 4096u
#define SSHEXEC_WRITE_CHUNK (64u * 1024u)
/* Channel opens refused by the server (slots still busy) are retried this often. */
#define SSHEXEC_OPEN_RETRIES 50u

/* Kills everything an exec started, given its marker as $1: stops the processes whose
 * environment holds the marker; for each such holder that made a PID namespace (its
 * pid_for_children differs from its own namespace: the exec's wrapper), SIGKILLs every process
 * of that namespace, its init among them, which makes the kernel kill the rest and every
 * namespace nested in it; then kills the holders' process groups and the holders; until no
 * holder is left. Never a namespace the script itself is in. Last, removes the exec's FIFO,
 * in case the wrapper died before its init could. POSIX sh and busybox ash (test
 * -ef compares the namespaces' inodes); busybox grep has -z. */
static const char kill_script[] =
    "m=\"" MARKER_VAR "=$1\"\n"
    "fifo=\"/tmp/.sandboxd-exec-$1\"\n"
    "s=$(cat /proc/$$/stat)\n"
    "set -- ${s##*') '}\n"
    "me=$3\n"
    "i=0\n"
    "while [ $i -lt 20 ]; do\n"
    "  pids=\n"
    "  for f in $(grep -l -s -z -x -F \"$m\" /proc/[0-9]*/environ); do\n"
    "    p=${f#/proc/}\n"
    "    pids=\"$pids ${p%/environ}\"\n"
    "  done\n"
    "  [ -z \"$pids\" ] && { rm -f \"$fifo\"; exit 0; }\n"
    "  kill -STOP $pids 2>/dev/null\n"
    "  for p in $pids; do\n"
    "    n=/proc/$p/ns/pid_for_children\n"
    "    if [ -e $n ] && ! [ $n -ef /proc/$p/ns/pid ] && ! [ $n -ef /proc/self/ns/pid ]; then\n"
    "      for q in /proc/[0-9]*; do\n"
    "        [ $q/ns/pid -ef $n ] && kill -KILL ${q#/proc/} 2>/dev/null\n"
    "      done\n"
    "    fi\n"
    "    s=$(cat /proc/$p/stat 2>/dev/null) || continue\n"
    "    set -- ${s##*') '}\n"
    "    [ \"${3:-0}\" -gt 1 ] && [ \"$3\" != \"$me\" ] && kill -KILL -$3 2>/dev/null\n"
    "  done\n"
    "  kill -KILL $pids 2>/dev/null\n"
    "  i=$((i+1))\n"
    "done\n"
    "exit 1\n";

enum exec_state {
    EXEC_QUEUED,
    EXEC_OPENING,  /* ssh_channel_open_session() resumed */
    EXEC_STARTING, /* ssh_channel_request_exec() resumed */
    EXEC_RUNNING,
    EXEC_KILLING, /* timed out or cancelled: the kill channel runs */
    EXEC_DONE,
    _EXEC_STATE_MAX,
};

struct chunk {
    struct chunk *next;
    enum sshexec_stream stream;
    size_t len;
    char data[];
};

struct outbuf {
    struct buf b; /* what was kept, up to the exec's cap */
    uint64_t seen;
    bool truncated;
};

struct sshexec {
    struct sshpool_chan chan;
    enum exec_state state;
    struct sshpool *pool;
    ssh_channel ch;
    struct ssh_channel_callbacks_struct cbs;
    char *cmd;
    char *stdin_buf;
    size_t stdin_len, stdin_off;
    bool eof_sent;
    size_t cap;
    struct outbuf out, err;
    sshexec_output_cb on_output;
    struct chunk *chunks_first, *chunks_last;
    sshexec_done_cb cb;
    void *userdata;
    uv_timer_t timer;
    uint64_t timeout_ms;
    uint64_t start_ns;
    char marker[33];
    int exit_code;
    char signal[40];
    bool got_status, got_signal, remote_closed;
    bool timed_out, cancelled, abort_open;
    bool started;    /* the exec request was sent */
    bool user_check; /* run as a user: the first stderr bytes may be sshuser's sentinel */
    enum sshuser_error user_error;
    unsigned kill_rounds;
    unsigned open_retries;
    struct sshexec *killer;     /* the kill channel running for this exec */
    struct sshexec *kill_owner; /* for a kill channel: the exec it kills, or NULL */
    bool is_killer;
    /* Through the supervisor (sshexec-super.h): the stream to send instead of stdin_buf
     * (kept for the fallback to the exec channel), its parser, the kill frame sent. */
    bool super, super_kill_sent;
    char *req;
    size_t req_len;
    struct super_parser sp;
};

static void exec_finish(struct sshexec *e, int error);
static const char *exec_ns_helper(struct sshpool *pool);
static bool super_usable(struct sshpool *pool, const struct sshexec_params *params);
static void super_opened(struct sshpool *pool, bool ok);
static const char *super_dir(void);
static void on_exec_timer(uv_timer_t *t);
static const struct sshpool_chan_ops exec_ops;

static const char *exec_state_to_string(enum exec_state s)
{
    static const char *const names[_EXEC_STATE_MAX] = {
        [EXEC_QUEUED] = "queued",   [EXEC_OPENING] = "opening", [EXEC_STARTING] = "starting",
        [EXEC_RUNNING] = "running", [EXEC_KILLING] = "killing", [EXEC_DONE] = "done",
    };
    return (unsigned)s < _EXEC_STATE_MAX ? names[s] : "invalid";
}

static void exec_set_state(struct sshexec *e, enum exec_state state)
{
    if (e->state == state)
        return;
    log_debug(COMP, "%s%s: %s -> %s", e->is_killer ? "kill " : "", e->marker,
              exec_state_to_string(e->state), exec_state_to_string(state));
    e->state = state;
}

/* ---- channel callbacks (inside libssh packet handling: record, never free) ---- */

static void take_output(struct sshexec *e, bool is_stderr, const void *data, size_t len)
{
    struct outbuf *o = is_stderr ? &e->err : &e->out;
    size_t room = o->seen < e->cap ? e->cap - (size_t)o->seen : 0;
    size_t take = MIN(len, room);

    if (take > 0) {
        if (e->on_output) {
            struct chunk *c = malloc(sizeof(*c) + take);
            if (c) {
                c->next = NULL;
                c->stream = is_stderr ? SSHEXEC_STDERR : SSHEXEC_STDOUT;
                c->len = take;
                memcpy(c->data, data, take);
                if (e->chunks_last)
                    e->chunks_last->next = c;
                else
                    e->chunks_first = c;
                e->chunks_last = c;
                sshpool_chan_mark_dirty(&e->chan);
            } else {
                o->truncated = true;
            }
        } else if (buf_append(&o->b, data, take) < 0) {
            o->truncated = true;
        }
    }
    if (len > take)
        o->truncated = true;
    o->seen += len;
}

static void on_super_output(void *ud, bool is_stderr, const void *data, size_t len)
{
    take_output(ud, is_stderr, data, len);
}

static void on_super_exited(void *ud, int code)
{
    struct sshexec *e = ud;

    e->exit_code = code;
    e->got_status = true;
    sshpool_chan_mark_dirty(&e->chan);
}

static void on_super_signalled(void *ud, int signo)
{
    struct sshexec *e = ud;
    const char *name = signo > 0 && signo < 65 ? sigabbrev_np(signo) : NULL;

    snprintf(e->signal, sizeof(e->signal), "SIG%s", name ? name : "UNKNOWN");
    e->got_signal = true;
    sshpool_chan_mark_dirty(&e->chan);
}

static const struct super_events super_events = {
    .output = on_super_output,
    .exited = on_super_exited,
    .signalled = on_super_signalled,
};

static int on_channel_data(ssh_session session, ssh_channel channel, void *data, uint32_t len,
                           int is_stderr, void *userdata)
{
    struct sshexec *e = userdata;

    if (e->super) {
        super_feed(&e->sp, data, len, &super_events, e);
        if (e->sp.error)
            sshpool_chan_mark_dirty(&e->chan);
        return (int)len;
    }
    if (e->user_check && is_stderr && (is_stderr ? e->err.seen : e->out.seen) == 0 &&
        (e->user_error = sshuser_error(data, len, e->marker)) != SSHUSER_OK)
        return (int)len; /* nothing ran: the sentinel is no output */
    take_output(e, is_stderr, data, len);
    /* Everything is consumed, even past the cap, so the window keeps opening. */
    return (int)len;
}

static void on_channel_exit_status(ssh_session session, ssh_channel channel, int exit_status,
                                   void *userdata)
{
    struct sshexec *e = userdata;

    e->exit_code = exit_status;
    e->got_status = true;
}

static void on_channel_exit_signal(ssh_session session, ssh_channel channel, const char *signal,
                                   int core, const char *errmsg, const char *lang, void *userdata)
{
    struct sshexec *e = userdata;

    snprintf(e->signal, sizeof(e->signal), "SIG%s", signal ? signal : "UNKNOWN");
    e->got_signal = true;
}

static void on_channel_close(ssh_session session, ssh_channel channel, void *userdata)
{
    struct sshexec *e = userdata;

    e->remote_closed = true;
    sshpool_chan_mark_dirty(&e->chan);
}

static void on_channel_eof(ssh_session session, ssh_channel channel, void *userdata)
{
    struct sshexec *e = userdata;

    sshpool_chan_mark_dirty(&e->chan);
}

/* ---- the exec state machine ---- */

static void flush_chunks(struct sshexec *e, bool deliver)
{
    struct chunk *c;

    while ((c = e->chunks_first)) {
        e->chunks_first = c->next;
        if (!e->chunks_first)
            e->chunks_last = NULL;
        if (deliver && e->on_output)
            e->on_output(e, c->stream, c->data, c->len, e->userdata);
        free(c);
    }
}

static void drop_channel(struct sshexec *e)
{
    ssh_session ssh = sshpool_chan_ssh(&e->chan);

    if (!e->ch)
        return;
    ssh_remove_channel_callbacks(e->ch, &e->cbs);
    /* Answer the server's close (or close first) so sshd frees its session slot. */
    if (ssh && ssh_is_connected(ssh) && ssh_channel_is_open(e->ch))
        (void)ssh_channel_close(e->ch);
    ssh_channel_free(e->ch);
    e->ch = NULL;
    sshpool_chan_flush(&e->chan);
}

static void on_exec_timer_closed(uv_handle_t *h)
{
    struct sshexec *e = h->data;

    free(e);
}

static void on_kill_done(struct sshexec *k, int error, struct sshexec_result *res, void *ud);

int sshexec_kill_command(const char *marker, char **ret)
{
    struct sbuf b = SBUF_INIT;

    sb_puts(&b, "exec /bin/sh -c ");
    sb_quote(&b, kill_script);
    sb_puts(&b, " sandboxd-kill ");
    sb_puts(&b, marker);
    return sb_finish(&b, ret);
}

static int start_kill(struct sshexec *e)
{
    struct sshexec *k;
    struct sbuf b = SBUF_INIT;
    char *cmd;
    int r;

    sb_puts(&b, "exec /bin/sh -c ");
    sb_quote(&b, kill_script);
    sb_puts(&b, " sandboxd-kill ");
    sb_puts(&b, e->marker);
    r = sb_finish(&b, &cmd);
    if (r < 0)
        return r;
    k = calloc(1, sizeof(*k));
    if (!k) {
        free(cmd);
        return -ENOMEM;
    }
    k->cmd = cmd;
    k->pool = e->pool;
    k->cap = SSHEXEC_KILL_OUTPUT_MAX;
    k->cb = on_kill_done;
    k->is_killer = true;
    k->kill_owner = e;
    k->exit_code = -1;
    k->start_ns = uv_hrtime();
    memcpy(k->marker, e->marker, sizeof(k->marker));
    k->chan.ops = &exec_ops;
    k->chan.urgent = true;
    r = uv_timer_init(sshpool_get_loop(e->pool), &k->timer);
    if (r < 0) {
        free(k->cmd);
        free(k);
        return r;
    }
    k->timer.data = k;
    uv_timer_start(&k->timer, on_exec_timer, SSHEXEC_KILL_MAX_MS, 0);
    e->killer = k;
    e->kill_rounds++;
    sshpool_submit(e->pool, &k->chan);
    return 0;
}

static void enter_killing(struct sshexec *e)
{
    exec_set_state(e, EXEC_KILLING);
    if (start_kill(e) < 0) {
        /* Retried (then given up) from the timer, never finished from here. */
        e->kill_rounds++;
        uv_timer_start(&e->timer, on_exec_timer, 0, 0);
        return;
    }
    uv_timer_start(&e->timer, on_exec_timer, SSHEXEC_KILL_MAX_MS, 0);
}

static void on_kill_done(struct sshexec *k, int error, struct sshexec_result *res, void *ud)
{
    struct sshexec *e = k->kill_owner;

    if (!e)
        return;
    log_debug(COMP, "kill %s: %s, exit %d", k->marker, error < 0 ? strerror(-error) : "ran",
              res ? res->exit_code : -1);
    e->killer = NULL;
    k->kill_owner = NULL;
    /* Give the command's channel a moment to report the kill and close. */
    if (e->state == EXEC_KILLING)
        uv_timer_start(&e->timer, on_exec_timer, SSHEXEC_KILL_GRACE_MS, 0);
}

/* Writes what is due (stdin, or the supervisor's stream and its kill frame), delivers
 * output; true when the exec finished. */
static bool exec_io(struct sshexec *e)
{
    const char *wbuf = e->super ? e->req : e->stdin_buf;
    size_t wlen = e->super ? e->req_len : e->stdin_len;
    int rc;

    while (e->stdin_off < wlen && !e->remote_closed) {
        size_t n = MIN(wlen - e->stdin_off, (size_t)SSHEXEC_WRITE_CHUNK);
        rc = ssh_channel_write(e->ch, wbuf + e->stdin_off, (uint32_t)n);
        if (rc == SSH_ERROR) {
            /* The command may have exited without reading its input: not fatal. */
            e->stdin_off = wlen;
            break;
        }
        if (rc <= 0)
            break;
        e->stdin_off += (size_t)rc;
    }
    /* The supervisor takes the stream's end for the daemon's going away: never sent. */
    if (e->stdin_off >= wlen && !e->eof_sent && !e->remote_closed && !e->super) {
        rc = ssh_channel_send_eof(e->ch);
        if (rc != SSH_AGAIN)
            e->eof_sent = true;
    }
    if (e->super && e->state == EXEC_KILLING && e->stdin_off >= wlen && !e->super_kill_sent &&
        !e->remote_closed &&
        ssh_channel_write(e->ch, SUPER_KILL_FRAME, SUPER_KILL_FRAME_LEN) == SUPER_KILL_FRAME_LEN)
        e->super_kill_sent = true;
    flush_chunks(e, true);
    if (e->state == EXEC_DONE)
        return true;
    if (e->remote_closed || (e->super && (e->sp.ended || e->sp.error))) {
        exec_finish(e, e->cancelled ? -ECANCELED : 0);
        return true;
    }
    return false;
}

/* The supervisor's channel was refused: the exec goes over an exec channel, queued again. */
static void super_fall_back(struct sshexec *e)
{
    e->super = false;
    free(e->req);
    e->req = NULL;
    ssh_remove_channel_callbacks(e->ch, &e->cbs);
    ssh_channel_free(e->ch);
    e->ch = NULL;
    sshpool_release(&e->chan);
    exec_set_state(e, EXEC_QUEUED);
    sshpool_submit(e->pool, &e->chan);
}

static void exec_process(struct sshpool_chan *c)
{
    struct sshexec *e = container_of(c, struct sshexec, chan);
    ssh_session ssh = sshpool_chan_ssh(c);
    int rc;

    if (e->state == EXEC_QUEUED) {
        e->ch = ssh_channel_new(ssh);
        if (!e->ch) {
            exec_finish(e, -ENOMEM);
            return;
        }
        ssh_callbacks_init(&e->cbs);
        e->cbs.userdata = e;
        e->cbs.channel_data_function = on_channel_data;
        e->cbs.channel_eof_function = on_channel_eof;
        e->cbs.channel_close_function = on_channel_close;
        e->cbs.channel_exit_status_function = on_channel_exit_status;
        e->cbs.channel_exit_signal_function = on_channel_exit_signal;
        if (ssh_set_channel_callbacks(e->ch, &e->cbs) != SSH_OK) {
            exec_finish(e, -ENOMEM);
            return;
        }
        exec_set_state(e, EXEC_OPENING);
    }
    if (e->state == EXEC_OPENING) {
        rc = e->super ? ssh_channel_open_forward(e->ch, "127.0.0.1",
                                                 sshpool_get_super_port(e->pool), "127.0.0.1", 0)
                      : ssh_channel_open_session(e->ch);
        if (rc == SSH_AGAIN)
            goto out;
        if (e->super && !e->abort_open)
            super_opened(e->pool, rc == SSH_OK);
        if (rc != SSH_OK && e->super && !e->abort_open && ssh_is_connected(ssh)) {
            /* Refused (forwarding off, the supervisor gone): the exec channel, now. */
            log_debug(COMP, "%s: supervisor channel refused: %s", e->marker, ssh_get_error(ssh));
            super_fall_back(e);
            return;
        }
        if (rc != SSH_OK) {
            log_debug(COMP, "%s: channel open failed: %s", e->marker, ssh_get_error(ssh));
            /* sshd frees a closed session's slot (MaxSessions) only after the packet batch
             * that closed it, so an open right behind a close can be refused. Nothing ran:
             * queue again. */
            if (!e->abort_open && e->open_retries < SSHEXEC_OPEN_RETRIES && ssh_is_connected(ssh)) {
                e->open_retries++;
                ssh_remove_channel_callbacks(e->ch, &e->cbs);
                ssh_channel_free(e->ch);
                e->ch = NULL;
                sshpool_release(&e->chan);
                exec_set_state(e, EXEC_QUEUED);
                sshpool_submit(e->pool, &e->chan);
                return;
            }
            exec_finish(e, e->abort_open ? (e->cancelled ? -ECANCELED : 0) : -EPROTO);
            return;
        }
        if (e->abort_open) {
            /* Timed out or cancelled before anything ran. */
            exec_finish(e, e->cancelled ? -ECANCELED : 0);
            return;
        }
        /* Through the supervisor the open is the start: the request is the first bytes. */
        if (e->super)
            e->started = true;
        exec_set_state(e, e->super ? EXEC_RUNNING : EXEC_STARTING);
    }
    if (e->state == EXEC_STARTING) {
        e->started = true;
        rc = ssh_channel_request_exec(e->ch, e->cmd);
        if (rc == SSH_AGAIN)
            goto out;
        if (rc != SSH_OK) {
            log_debug(COMP, "%s: exec request failed: %s", e->marker, ssh_get_error(ssh));
            exec_finish(e, -EPROTO);
            return;
        }
        exec_set_state(e, EXEC_RUNNING);
    }
    if ((e->state == EXEC_RUNNING || e->state == EXEC_KILLING) && exec_io(e))
        return;
out:
    sshpool_chan_flush(c);
}

static void exec_fail(struct sshpool_chan *c, int error)
{
    struct sshexec *e = container_of(c, struct sshexec, chan);

    /* Detached already: the session is going away, drop the channel without sending. */
    if (e->ch) {
        ssh_remove_channel_callbacks(e->ch, &e->cbs);
        ssh_channel_free(e->ch);
        e->ch = NULL;
    }
    if (e->cancelled && error != -ECANCELED && e->state == EXEC_KILLING)
        error = -ECANCELED;
    exec_finish(e, error);
}

static const struct sshpool_chan_ops exec_ops = {
    .process = exec_process,
    .fail = exec_fail,
};

static void exec_finish(struct sshexec *e, int error)
{
    struct sshexec_result res = {};
    struct chunk *c;

    if (e->state == EXEC_DONE)
        return;
    exec_set_state(e, EXEC_DONE);
    uv_timer_stop(&e->timer);
    drop_channel(e);
    sshpool_release(&e->chan);
    if (e->killer) {
        e->killer->kill_owner = NULL;
        e->killer = NULL;
    }

    if (error == 0) {
        flush_chunks(e, true);
        /* A timed-out exec has one shape whatever the race with the kill: no exit code, no
         * signal (the command was killed, or had ended but not completed in time). */
        res.exit_code = e->timed_out || e->got_signal ? -1 : e->got_status ? e->exit_code : -1;
        res.signal = !e->timed_out && e->got_signal ? e->signal : NULL;
        res.timed_out = e->timed_out;
        res.started = e->started;
        res.user_error = e->user_error;
        if (!e->on_output) {
            res.out_len = e->out.b.len;
            res.out = e->out.b.data ? buf_steal(&e->out.b) : strdup("");
            res.err_len = e->err.b.len;
            res.err = e->err.b.data ? buf_steal(&e->err.b) : strdup("");
        }
        res.out_truncated = e->out.truncated;
        res.err_truncated = e->err.truncated;
        res.duration_ms = (uv_hrtime() - e->start_ns) / 1000000u;
    }
    while ((c = e->chunks_first)) {
        e->chunks_first = c->next;
        free(c);
    }
    e->chunks_last = NULL;
    if (e->cb)
        e->cb(e, error, error == 0 ? &res : NULL, e->userdata);
    FREE_MANY(res.out, res.err, e->cmd, e->stdin_buf, e->req);
    e->cmd = e->stdin_buf = e->req = NULL;
    buf_clear(&e->out.b, true);
    buf_clear(&e->err.b, true);
    uv_close((uv_handle_t *)&e->timer, on_exec_timer_closed);
}

static void on_exec_timer(uv_timer_t *t)
{
    struct sshexec *e = t->data;
    int fin = e->cancelled ? -ECANCELED : 0;

    switch (e->state) {
    case EXEC_QUEUED:
        e->timed_out = !e->cancelled;
        exec_finish(e, fin);
        break;
    case EXEC_OPENING:
        if (e->abort_open || e->is_killer) {
            exec_finish(e, e->is_killer ? -ETIMEDOUT : fin);
            break;
        }
        e->timed_out = !e->cancelled;
        e->abort_open = true;
        uv_timer_start(&e->timer, on_exec_timer, SSHEXEC_KILL_MAX_MS, 0);
        break;
    case EXEC_STARTING:
    case EXEC_RUNNING:
        if (e->is_killer) {
            exec_finish(e, -ETIMEDOUT);
            break;
        }
        e->timed_out = !e->cancelled;
        enter_killing(e);
        break;
    case EXEC_KILLING:
        if (!e->killer && e->kill_rounds < SSHEXEC_KILL_ROUNDS && !e->remote_closed) {
            /* The channel is still open after a kill: something raced it; kill again. */
            if (start_kill(e) == 0) {
                uv_timer_start(&e->timer, on_exec_timer, SSHEXEC_KILL_MAX_MS, 0);
                break;
            }
        }
        exec_finish(e, fin);
        break;
    default:
        break;
    }
}

/* What the channel's stdin carries: a long command (sshexec_command_stdin()), then the
 * request's stdin. */
static int exec_stdin_new(struct sshexec *e, const struct sshexec_params *params)
{
    char *pre;
    size_t pre_len;
    int r = sshexec_command_stdin(params, e->marker, &pre, &pre_len);

    if (r < 0)
        return r;
    if (pre_len + params->stdin_len == 0)
        return 0;
    e->stdin_buf = realloc(pre, pre_len + params->stdin_len);
    if (!e->stdin_buf) {
        free(pre);
        return -ENOMEM;
    }
    if (params->stdin_len > 0)
        memcpy(e->stdin_buf + pre_len, params->stdin_data, params->stdin_len);
    e->stdin_len = pre_len + params->stdin_len;
    return 0;
}

int sshexec_start(struct sshpool *pool, const struct sshexec_params *params, sshexec_done_cb cb,
                  void *userdata, struct sshexec **ret)
{
    struct sshexec *e;
    uint8_t rnd[16];
    int r;

    if (!pool || !cb)
        return -EINVAL;
    r = sshexec_params_validate(params);
    if (r < 0)
        return r;
    if (getrandom(rnd, sizeof(rnd), 0) != sizeof(rnd))
        return -errno ? -errno : -EIO;
    e = calloc(1, sizeof(*e));
    if (!e)
        return -ENOMEM;
    for (size_t i = 0; i < sizeof(rnd); i++)
        snprintf(e->marker + 2 * i, 3, "%02x", rnd[i]);
    r = sshexec_build_command_with(
        params, e->marker, params->container_pid_namespace ? NULL : exec_ns_helper(pool), &e->cmd);
    if (r < 0)
        goto fail;
    r = exec_stdin_new(e, params);
    if (r < 0)
        goto fail;
    if (super_usable(pool, params)) {
        r = super_request(params, e->marker, sshpool_get_super_token(pool), &e->req, &e->req_len);
        if (r < 0)
            goto fail;
        e->super = true;
    }
    r = uv_timer_init(sshpool_get_loop(pool), &e->timer);
    if (r < 0)
        goto fail;
    e->timer.data = e;
    e->chan.ops = &exec_ops;
    e->pool = pool;
    e->cap = params->has_max_output ? params->max_output_bytes : SSHEXEC_OUTPUT_MAX_DEFAULT;
    e->on_output = params->on_output;
    e->user_check = params->user && *params->user;
    e->cb = cb;
    e->userdata = userdata;
    e->exit_code = -1;
    e->timeout_ms = params->timeout_ms;
    e->start_ns = uv_hrtime();
    /* The timeout counts from now, not from the loop's last tick. */
    uv_update_time(sshpool_get_loop(pool));
    if (e->timeout_ms > 0)
        uv_timer_start(&e->timer, on_exec_timer, e->timeout_ms, 0);
    /* Not the line itself: its env may hold secrets (sandbox.create's env). */
    log_debug(COMP, "%s: queued: a command line of %zu bytes%s", e->marker, strlen(e->cmd),
              params->env && params->env[0] ? " with env" : "");
    sshpool_submit(pool, &e->chan);
    if (ret)
        *ret = e;
    return 0;

fail:
    FREE_MANY(e->req, e->stdin_buf, e->cmd, e);
    return r;
}

int sshexec_cancel(struct sshexec *e)
{
    if (!e || e->is_killer)
        return -EINVAL;
    if (e->state == EXEC_DONE || e->cancelled)
        return -EALREADY;
    e->cancelled = true;
    e->timed_out = false;
    switch (e->state) {
    case EXEC_QUEUED:
        /* Nothing ran: finish from the loop. */
        sshpool_release(&e->chan);
        uv_timer_start(&e->timer, on_exec_timer, 0, 0);
        break;
    case EXEC_OPENING:
        e->abort_open = true;
        uv_timer_start(&e->timer, on_exec_timer, SSHEXEC_KILL_MAX_MS, 0);
        break;
    case EXEC_STARTING:
    case EXEC_RUNNING:
        enter_killing(e);
        break;
    default:
        break;
    }
    return 0;
}

/* ---- the exec helper (nsexec/sandboxd-nsexec.c) in a pool's container ----
 *
 * The first exec on a pool starts putting the helper in place, in the background: a check
 * exec looks for /root/.sandboxd-nsexec-<first 16 hex digits of its SHA-256> with the
 * expected SHA-256 (sha256sum, coreutils or busybox) and runs it with --check; when that
 * does not print the helper's line, a second exec writes the binary there (from its stdin,
 * to a temporary name renamed into place) and runs the check again. Execs go on with the
 * shell wrapper meanwhile. Then:
 *   the check printed the line   every later exec on the pool runs through the helper;
 *   it did not (no sha256sum is fine, but a /root that is read-only, noexec or not
 *   writable by the login user, another architecture, no room)
 *                                the pool keeps the shell wrapper for good;
 *   the session failed           the next exec starts again.
 * A binary of another build has another name: both can live side by side. The line of each
 * exec execs the helper only while the file is there ([ -x ]), else the shell wrapper runs.
 * In root's home, not in /tmp: another user of the container can neither place a file there
 * first (which root would then run) nor swap the binary for one of its own.
 *
 * With the supervisor on (sshs_config.exec_supervisor), the check (and the push) run the
 * helper as `--serve /root/.sandboxd-serve-<hash>` instead of `--check`: it also makes sure
 * the exec supervisor (nsexec/serve.c) runs and prints its port and token (state serving). On
 * a serving pool each exec without a user and without the container's PID namespace opens a
 * direct-tcpip channel to the supervisor's port on 127.0.0.1 instead of an exec channel.
 * When sshd refuses that channel the exec goes on over an exec channel at once, and the
 * pool checks again (which starts a supervisor that died, e.g. with a container restart);
 * after a second refusal with no channel opened between (forwarding off in sshd), the pool
 * stops using it. */
#define NS_DIR "/root/.sandboxd-nsexec-"
#define NS_HASH_CHARS 16
#define NS_CHECK_LINE "sandboxd-nsexec ok\n"
#define NS_TIMEOUT_MS 30000u
/* The exec supervisor's flags in the pool (sshpool_get_super()). */
#define SUPER_USED 1    /* a channel to it opened since the last check */
#define SUPER_OFF 2     /* refused twice without having served: not on this pool */
#define SUPER_REFUSED 4 /* refused once without having served since */

enum ns_state {
    NS_UNKNOWN = 0,
    NS_CHECKING,
    NS_PUSHING,
    NS_READY,
    NS_SERVING, /* ready, and the supervisor listens */
    NS_UNAVAILABLE,
    _NS_STATE_MAX,
};

static const char *ns_state_to_string(enum ns_state s)
{
    static const char *const names[_NS_STATE_MAX] = {
        [NS_UNKNOWN] = "unknown", [NS_CHECKING] = "checking", [NS_PUSHING] = "pushing",
        [NS_READY] = "ready",     [NS_SERVING] = "serving",   [NS_UNAVAILABLE] = "unavailable",
    };
    return (unsigned)s < _NS_STATE_MAX ? names[s] : "invalid";
}

/* unknown -> checking -> ready or serving, or -> pushing -> ready, serving or unavailable;
 * back to unknown from checking and pushing (the session failed, or an exec could not start)
 * and from serving (the supervisor's channel was refused after it had served). */
_unused_ static bool ns_transition_ok(enum ns_state a, enum ns_state b)
{
    switch (b) {
    case NS_CHECKING:
        return a == NS_UNKNOWN;
    case NS_PUSHING:
        return a == NS_CHECKING;
    case NS_READY:
    case NS_SERVING:
        return a == NS_CHECKING || a == NS_PUSHING;
    case NS_UNKNOWN:
        return a == NS_CHECKING || a == NS_PUSHING || a == NS_SERVING;
    case NS_UNAVAILABLE:
        return a == NS_PUSHING;
    default:
        return false;
    }
}

static void ns_set_state(struct sshpool *pool, enum ns_state state)
{
    enum ns_state old = (enum ns_state)sshpool_get_nsexec(pool);

    if (old == state)
        return;
    assert(ns_transition_ok(old, state));
    log_debug(COMP, "exec helper: %s -> %s", ns_state_to_string(old), ns_state_to_string(state));
    sshpool_set_nsexec(pool, (int)state);
}

static const char *ns_path(void)
{
    static char path[sizeof(NS_DIR) + NS_HASH_CHARS];

    if (!path[0])
        snprintf(path, sizeof(path), NS_DIR "%.*s", NS_HASH_CHARS, nsexec_blob_sha256);
    return path;
}

static int ns_start(struct sshpool *pool, bool push);

static void on_ns_done(struct sshexec *e, int error, struct sshexec_result *res, void *userdata)
{
    struct sshpool *pool = userdata;
    bool pushing = sshpool_get_nsexec(pool) == NS_PUSHING;
    bool ok = error == 0 && res->exit_code == 0 && res->out &&
              !strncmp(res->out, NS_CHECK_LINE, strlen(NS_CHECK_LINE));

    if (ok) {
        uint16_t port;
        char token[SERVE_TOKEN_LEN + 1];
        bool serving = super_parse_line(res->out + strlen(NS_CHECK_LINE), &port, token) == 0;

        sshpool_set_super(pool, sshpool_get_super(pool) & SUPER_REFUSED);
        if (serving)
            sshpool_set_super_addr(pool, port, token);
        ns_set_state(pool, serving ? NS_SERVING : NS_READY);
        return;
    }
    if (error < 0) {
        /* Lost or closing: the next exec tries again. */
        log_debug(COMP, "exec helper: %s", strerror(-error));
        ns_set_state(pool, NS_UNKNOWN);
        return;
    }
    if (!pushing) {
        (void)ns_start(pool, true); /* or back to unknown when it cannot start */
        return;
    }
    log_debug(COMP, "exec helper cannot run in this container (exit %d): the shell wrapper",
              res->exit_code);
    ns_set_state(pool, NS_UNAVAILABLE);
}

/* The check (push false) or the copy and check (push true). */
static int ns_start(struct sshpool *pool, bool push)
{
    struct sshexec_params p = {
        .timeout_ms = NS_TIMEOUT_MS,
        .has_max_output = true,
        .max_output_bytes = 256,
        .container_pid_namespace = true,
    };
    char cmd[640], check[128];
    int r;

    if (sshpool_exec_supervisor(pool))
        snprintf(check, sizeof(check), "--serve %s", super_dir());
    else
        snprintf(check, sizeof(check), "--check");
    if (push) {
        snprintf(cmd, sizeof(cmd),
                 "P=%s; t=$P.$$; umask 022; cat >$t && chmod 755 $t && mv -f $t $P && exec $P "
                 "%s; rm -f $t; exit 1",
                 ns_path(), check);
        p.stdin_data = nsexec_blob;
        p.stdin_len = nsexec_blob_len;
    } else {
        snprintf(cmd, sizeof(cmd),
                 "P=%s; h=$(sha256sum $P 2>/dev/null) && [ \"${h%%%% *}\" = %s ] && exec $P "
                 "%s; exit 1",
                 ns_path(), nsexec_blob_sha256, check);
    }
    p.command = cmd;
    ns_set_state(pool, push ? NS_PUSHING : NS_CHECKING);
    r = sshexec_start(pool, &p, on_ns_done, pool, NULL);
    if (r < 0)
        ns_set_state(pool, NS_UNKNOWN);
    return r;
}

static const char *exec_ns_helper(struct sshpool *pool)
{
    switch ((enum ns_state)sshpool_get_nsexec(pool)) {
    case NS_READY:
    case NS_SERVING:
        return ns_path();
    case NS_UNKNOWN:
        (void)ns_start(pool, false);
        return NULL;
    default:
        return NULL;
    }
}

/* ---- the exec supervisor (nsexec/serve.c) ---- */

static const char *super_dir(void)
{
    static char path[sizeof(SUPER_DIR) + NS_HASH_CHARS];

    if (!path[0])
        snprintf(path, sizeof(path), SUPER_DIR "%.*s", NS_HASH_CHARS, nsexec_blob_sha256);
    return path;
}

static bool super_usable(struct sshpool *pool, const struct sshexec_params *params)
{
    return sshpool_exec_supervisor(pool) && sshpool_get_nsexec(pool) == NS_SERVING &&
           !(sshpool_get_super(pool) & SUPER_OFF) && !params->container_pid_namespace &&
           !(params->user && *params->user) && super_fits(params);
}

static void super_opened(struct sshpool *pool, bool ok)
{
    int flags = sshpool_get_super(pool);

    if (ok) {
        sshpool_set_super(pool, (flags | SUPER_USED) & ~SUPER_REFUSED);
        return;
    }
    if ((flags & (SUPER_USED | SUPER_REFUSED)) != SUPER_REFUSED) {
        /* It served, then went away (or the container restarted): check again, which starts
         * it again. */
        log_debug(COMP, "exec supervisor gone: checking again");
        sshpool_set_super(pool, (flags & ~SUPER_USED) | (flags & SUPER_USED ? 0 : SUPER_REFUSED));
        if (sshpool_get_nsexec(pool) == NS_SERVING)
            ns_set_state(pool, NS_UNKNOWN);
        return;
    }
    log_info(COMP, "exec supervisor unreachable (sshd refuses the forward to it?): "
                   "exec channels for this sandbox");
    sshpool_set_super(pool, flags | SUPER_OFF);
}
