/* sandboxctl exec --tty and start --pty --attach: a process on a terminal in the sandbox,
 * driven from the local terminal. See sandboxctl-process.h.
 *
 * The process is started with `pty` (the local window's size) and three pipes passed as its
 * stdin_fd/stdout_fd/stderr_fd; this side copies its stdin into the first and the other two
 * onto its stdout and stderr. While that runs the local terminal is in raw mode: every key
 * (Ctrl-C, Ctrl-Z, ESC, ...) goes to the remote terminal as a byte, whose line discipline
 * echoes it and turns it into a signal, so nothing is echoed or interpreted twice. Signals
 * arrive through a self-pipe: SIGWINCH becomes process.resize, SIGINT and SIGQUIT (sent by
 * kill(1): the terminal sends none in raw mode) are passed on with process.kill, and SIGTERM,
 * SIGHUP or a hang-up of the local terminal end the remote process (SIGHUP, then SIGKILL).
 * The end of a stdin that is not a terminal is passed on as the end of the terminal's input.
 * Every way out restores the local terminal's mode. */
#include "sandboxctl-process.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "sandboxctl.h"
#include "macro.h"
#include "util.h"

#define TTY_BLOCK 65536
#define TTY_SIZE_MAX 1000
#define TTY_WAIT_MS 600000

/* The self-pipe the signal handlers write to (a handler reaches nothing else). */
static int signal_pipe[2] = {-1, -1};

/* The local terminal's mode before raw mode, restored by tty_restore() (and at exit). */
static struct termios saved_mode;
static int saved_fd = -1;

static void tty_restore(void)
{
    if (saved_fd >= 0) {
        (void)tcsetattr(saved_fd, TCSADRAIN, &saved_mode);
        saved_fd = -1;
    }
}

/* Raw mode on fd (a terminal): no echo, no line editing, no signals from keys, no output
 * processing. */
static int tty_raw(int fd)
{
    struct termios t;

    if (tcgetattr(fd, &saved_mode) < 0)
        return -errno;
    t = saved_mode;
    cfmakeraw(&t);
    saved_fd = fd;
    if (tcsetattr(fd, TCSADRAIN, &t) < 0) {
        saved_fd = -1;
        return -errno;
    }
    return 0;
}

static void on_signal(int sig)
{
    int e = errno;
    unsigned char b = (unsigned char)sig;

    (void)!write(signal_pipe[1], &b, 1);
    errno = e;
}

static const int tty_signals[] = {SIGWINCH, SIGINT, SIGQUIT, SIGTERM, SIGHUP};

static int signals_catch(void)
{
    struct sigaction sa = {.sa_handler = on_signal};

    if (pipe2(signal_pipe, O_CLOEXEC | O_NONBLOCK) < 0)
        return -errno;
    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < ELEMENTSOF(tty_signals); i++)
        if (sigaction(tty_signals[i], &sa, NULL) < 0)
            return -errno;
    return 0;
}

static void signals_release(void)
{
    for (size_t i = 0; i < ELEMENTSOF(tty_signals); i++)
        signal(tty_signals[i], SIG_DFL);
    CLOSE_MANY(&signal_pipe[0], &signal_pipe[1]);
}

/* The local window's size: the first of stdin, stdout, stderr that is a terminal, else
 * 80x24; each at most TTY_SIZE_MAX. */
static void window_size(unsigned *ret_cols, unsigned *ret_rows)
{
    struct winsize w = {.ws_col = 80, .ws_row = 24};

    for (int fd = 0; fd < 3; fd++) {
        struct winsize t = {};

        if (ioctl(fd, TIOCGWINSZ, &t) == 0 && t.ws_col > 0 && t.ws_row > 0) {
            w = t;
            break;
        }
    }
    *ret_cols = MIN((unsigned)w.ws_col, TTY_SIZE_MAX);
    *ret_rows = MIN((unsigned)w.ws_row, TTY_SIZE_MAX);
}

json_object *ctl_pty_params(void)
{
    json_object *o = json_object_new_object();
    unsigned cols, rows;

    window_size(&cols, &rows);
    json_object_object_add(o, "cols", json_object_new_int((int)cols));
    json_object_object_add(o, "rows", json_object_new_int((int)rows));
    return o;
}

int ctl_process_status_of(json_object *res)
{
    json_object *v;
    const char *st =
        json_object_object_get_ex(res, "state", &v) && v ? json_object_get_string(v) : "-";

    if (!strcmp(st, "running"))
        return -1;
    if (!strcmp(st, "lost"))
        return 1;
    if (json_object_object_get_ex(res, "exit_code", &v) && v)
        return json_object_get_int(v);
    if (json_object_object_get_ex(res, "signal", &v) && v) {
        const char *name = json_object_get_string(v);

        for (int sig = 1; sig < 65; sig++)
            if (sigabbrev_np(sig) && strlen(name) > 3 && !strcmp(name + 3, sigabbrev_np(sig)))
                return 128 + sig;
    }
    return 1;
}

int ctl_process_exit_status(struct ctl *c, const struct ctl_ops *ops, const char *id,
                            const char *process)
{
    for (;;) {
        _cleanup_json_ json_object *res = NULL;
        json_object *p = id_params(id);
        int r;

        json_object_object_add(p, "process", json_object_new_string(process));

        json_object_object_add(p, "timeout_ms", json_object_new_int(TTY_WAIT_MS));
        r = ops->call(c, "process.wait", p, &res);
        if (r < 0)
            return exit_for(r);
        r = ctl_process_status_of(res);
        if (r >= 0)
            return r;
    }
}

/* One attached session. */
struct tty {
    struct ctl *c;
    const struct ctl_ops *ops;
    const char *id;
    char process[32];
    int in, out, err; /* our ends of the pipes; -1 once closed */
    bool stdin_open;
    bool stdin_tty;
    unsigned cols, rows;
    bool ending;     /* the remote process is being ended */
    bool timed_out;  /* ended at the deadline */
    uint64_t end_ns; /* 0: no deadline */
};

static uint64_t mono_ns(void)
{
    struct timespec t;

    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static json_object *proc_params(struct tty *t)
{
    json_object *p = id_params(t->id);

    json_object_object_add(p, "process", json_object_new_string(t->process));
    return p;
}

/* process.kill with sig; true when the process still runs afterwards. Errors (the process
 * already ended, the daemon went away) count as not running. */
static bool remote_signal(struct tty *t, const char *sig)
{
    _cleanup_json_ json_object *res = NULL;
    json_object *p = proc_params(t), *v;

    json_object_object_add(p, "signal", json_object_new_string(sig));
    if (t->ops->call(t->c, "process.kill", p, &res) < 0)
        return false;
    return json_object_object_get_ex(res, "state", &v) &&
           strcmp(json_object_get_string(v), "running") == 0;
}

/* Ends the remote process as a hang-up would: SIGHUP to its group, SIGKILL to its whole
 * tree when it is still there. Its output goes on being copied until it ends. */
static void remote_end(struct tty *t)
{
    if (t->ending)
        return;
    t->ending = true;
    if (remote_signal(t, "SIGHUP"))
        (void)remote_signal(t, "SIGKILL");
}

static void remote_resize(struct tty *t)
{
    _cleanup_json_ json_object *res = NULL;
    json_object *p;
    unsigned cols, rows;

    window_size(&cols, &rows);
    if (cols == t->cols && rows == t->rows)
        return;
    t->cols = cols;
    t->rows = rows;
    p = proc_params(t);
    json_object_object_add(p, "cols", json_object_new_int((int)cols));
    json_object_object_add(p, "rows", json_object_new_int((int)rows));
    /* A process that just ended cannot be resized: that is no error here. */
    (void)t->ops->call(t->c, "process.resize", p, &res);
}

static void stdin_close(struct tty *t)
{
    t->stdin_open = false;
    if (t->in >= 0) {
        close(t->in);
        t->in = -1;
    }
}

/* Local input: into the process's terminal. The end of a terminal is a hang-up (in raw mode
 * a read returns 0 only then): the remote process is ended. The end of other input is the
 * end of the terminal's input there. */
static void on_stdin(struct tty *t)
{
    char buf[TTY_BLOCK];
    ssize_t n = read(STDIN_FILENO, buf, sizeof buf);

    if (n < 0 && (errno == EINTR || errno == EAGAIN))
        return;
    if (n > 0 && t->in >= 0 && write_all(t->in, buf, (size_t)n) == 0)
        return;
    if (n > 0) { /* the daemon closed the input: the process ended */
        stdin_close(t);
        return;
    }
    stdin_close(t);
    if (t->stdin_tty)
        remote_end(t);
}

/* Output of the process onto ours; a local side that cannot take it any more (a hung-up
 * terminal) ends the remote process. */
static void on_output(struct tty *t, int *fd, int to)
{
    char buf[TTY_BLOCK];
    ssize_t n = read(*fd, buf, sizeof buf);

    if (n < 0 && (errno == EINTR || errno == EAGAIN))
        return;
    if (n > 0 && write_all(to, buf, (size_t)n) == 0)
        return;
    if (n > 0)
        remote_end(t);
    close(*fd);
    *fd = -1;
}

static void on_signals(struct tty *t)
{
    unsigned char sigs[16];
    ssize_t n = read(signal_pipe[0], sigs, sizeof sigs);

    for (ssize_t i = 0; i < n; i++) {
        if (sigs[i] == SIGWINCH)
            remote_resize(t);
        else if (sigs[i] == SIGINT)
            (void)remote_signal(t, "SIGINT");
        else if (sigs[i] == SIGQUIT)
            (void)remote_signal(t, "SIGQUIT");
        else
            remote_end(t);
    }
}

/* Until the daemon closed both output pipes (the process ended and all of its output was
 * copied). */
static void relay(struct tty *t)
{
    while (t->out >= 0 || t->err >= 0) {
        struct pollfd p[4] = {
            {.fd = t->stdin_open ? STDIN_FILENO : -1, .events = POLLIN},
            {.fd = t->out, .events = POLLIN},
            {.fd = t->err, .events = POLLIN},
            {.fd = signal_pipe[0], .events = POLLIN},
        };
        int timeout = -1;

        if (t->end_ns && !t->ending) {
            uint64_t now = mono_ns();

            if (now >= t->end_ns) {
                t->timed_out = true;
                remote_end(t);
                continue;
            }
            timeout = (int)MIN((t->end_ns - now) / 1000000u + 1, (uint64_t)INT32_MAX);
        }
        if (poll(p, ELEMENTSOF(p), timeout) < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        if (p[3].revents)
            on_signals(t);
        if (p[0].revents && t->stdin_open)
            on_stdin(t);
        if (p[1].revents && t->out >= 0)
            on_output(t, &t->out, STDOUT_FILENO);
        if (p[2].revents && t->err >= 0)
            on_output(t, &t->err, STDERR_FILENO);
    }
}

/* Starts the process (params p, taken) with our three pipes; fills t. */
static int tty_start(struct tty *t, json_object *p)
{
    _cleanup_json_ json_object *res = NULL;
    int in[2] = {-1, -1}, out[2] = {-1, -1}, err[2] = {-1, -1}, fds[3], r;
    json_object *v;

    if (pipe2(in, O_CLOEXEC) < 0 || pipe2(out, O_CLOEXEC) < 0 || pipe2(err, O_CLOEXEC) < 0) {
        r = -errno;
        fprintf(stderr, "sandboxctl: pipe: %s\n", strerror(-r));
        CLOSE_MANY(&in[0], &in[1], &out[0], &out[1], &err[0], &err[1]);
        json_object_put(p);
        return r;
    }
    window_size(&t->cols, &t->rows);
    json_object_object_del(p, "stdin");
    json_object_object_add(p, "pty", ctl_pty_params());
    json_object_object_add(p, "stdin_fd", json_object_new_int(0));
    json_object_object_add(p, "stdout_fd", json_object_new_int(1));
    json_object_object_add(p, "stderr_fd", json_object_new_int(2));
    fds[0] = in[0];
    fds[1] = out[1];
    fds[2] = err[1];
    r = t->ops->call_fds(t->c, "process.start", p, fds, 3, &res);
    CLOSE_MANY(&in[0], &out[1], &err[1]);
    if (r < 0 || !json_object_object_get_ex(res, "process", &v) || !v) {
        CLOSE_MANY(&in[1], &out[0], &err[0]);
        return r < 0 ? r : -EPROTO;
    }
    snprintf(t->process, sizeof t->process, "%s", json_object_get_string(v));
    t->in = in[1];
    t->out = out[0];
    t->err = err[0];
    return 0;
}

int ctl_tty_run(struct ctl *c, const struct ctl_ops *ops, const char *id, json_object *params,
                int64_t timeout_ms)
{
    struct tty t = {.c = c, .ops = ops, .id = id, .in = -1, .out = -1, .err = -1};
    int r;

    r = tty_start(&t, params);
    if (r < 0)
        return r == -EREMOTE ? exit_for(r) : 1;
    /* Writing into a pipe the daemon closed is an error to see, not a death. */
    signal(SIGPIPE, SIG_IGN);
    if (signals_catch() < 0)
        fprintf(stderr, "sandboxctl: cannot catch signals: %s\n", strerror(errno));
    t.stdin_open = fcntl(STDIN_FILENO, F_GETFD) >= 0;
    t.stdin_tty = t.stdin_open && isatty(STDIN_FILENO);
    if (t.stdin_tty && tty_raw(STDIN_FILENO) < 0)
        fprintf(stderr, "sandboxctl: cannot put the terminal in raw mode: %s\n", strerror(errno));
    atexit(tty_restore);
    if (timeout_ms > 0)
        t.end_ns = mono_ns() + (uint64_t)timeout_ms * 1000000u;
    /* A change of size between our look and the handler's setup. */
    remote_resize(&t);
    relay(&t);
    tty_restore();
    stdin_close(&t);
    CLOSE_MANY(&t.out, &t.err);
    signals_release();
    r = ctl_process_exit_status(c, ops, id, t.process);
    if (t.timed_out) {
        fprintf(stderr, "sandboxctl: exec: timed out\n");
        return 124;
    }
    return r;
}
