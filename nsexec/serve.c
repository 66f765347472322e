/* The exec supervisor: `sandboxd-nsexec --serve DIR` makes sure one supervisor runs for DIR
 * (a folder of its own, mode 0700: DIR/lock held by the supervisor for its life, DIR/addr
 * its port on 127.0.0.1 and its token, mode 0600), starting it when none runs, and prints
 * the check line and `sandboxd-nsexec serving PORT TOKEN`. A connection whose request does
 * not carry the token runs nothing (any uid of the container can connect). The
 * supervisor forks a process per connection; that process reads one request (serve-proto.h),
 * makes a PID namespace, forks its init and the command into it (the command a session of
 * its own, the namespace's /proc where a mount namespace can be made) and relays stdin,
 * stdout, stderr and the end:
 *
 *   supervisor (detached, holds SOCKET's lock for its life)
 *     └─ connection          relays the stream; kills the namespace on 'K' or a lost stream
 *          ├─ init (pid 1)   as the exec helper's: lives until the connection ends
 *          └─ COMMAND        pid 2, stdin/stdout/stderr pipes to the connection
 *
 * When the command ends the connection kills init (the kernel then kills what is left in the
 * namespace), drains the pipes, sends the end and exits. A connection killed by a signal is
 * reported by the supervisor with that signal. One program start per exec: the command's. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/mount.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "serve-proto.h"
#include "nsexec.h"

#define MARKER_ENV "SANDBOXD_EXEC_ID="

/* The supervisor's token (hex), known to its forks. */
static char token[SERVE_TOKEN_LEN + 1];

struct request {
    char *buf;
    const char *marker, *cwd;
    char **argv, **envp;
};

struct conn {
    pid_t pid;
    int fd;
};

static int write_all(int fd, const void *p, size_t n)
{
    const char *c = p;

    while (n > 0) {
        ssize_t w = send(fd, c, n, MSG_NOSIGNAL);

        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        c += w;
        n -= (size_t)w;
    }
    return 0;
}

static int read_all(int fd, void *p, size_t n)
{
    char *c = p;

    while (n > 0) {
        ssize_t r = read(fd, c, n);

        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return -1;
        c += r;
        n -= (size_t)r;
    }
    return 0;
}

static int send_frame(int fd, char type, const void *p, uint32_t n, int flags)
{
    unsigned char h[SERVE_HEADER_LEN] = {(unsigned char)type, n >> 24, n >> 16, n >> 8, n};

    if (flags)
        return send(fd, h, sizeof(h), MSG_NOSIGNAL | flags) == sizeof(h) &&
                       (n == 0 || send(fd, p, n, MSG_NOSIGNAL | flags) == (ssize_t)n)
                   ? 0
                   : -1;
    if (write_all(fd, h, sizeof(h)) < 0)
        return -1;
    return n ? write_all(fd, p, n) : 0;
}

static int send_u32(int fd, char type, uint32_t v, int flags)
{
    unsigned char b[4] = {v >> 24, v >> 16, v >> 8, v};

    return send_frame(fd, type, b, 4, flags);
}

static uint32_t get_u32(const unsigned char *b)
{
    return (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3];
}

static int env_overridden(const char *kv, char **req_env, size_t n)
{
    size_t len = strcspn(kv, "=");

    for (size_t i = 0; i < n; i++)
        if (!strncmp(req_env[i], kv, len) && req_env[i][len] == '=')
            return 1;
    return 0;
}

/* The environment: the supervisor's own (sshd's for the login user) without another exec's
 * marker, this exec's marker, then the request's entries, which override. */
static int build_env(struct request *r, char **req_env, size_t n_env)
{
    size_t n = 0, k = 0;
    char *m;

    while (environ[n])
        n++;
    r->envp = calloc(n + n_env + 2, sizeof(char *));
    m = malloc(sizeof(MARKER_ENV) + strlen(r->marker));
    if (!r->envp || !m)
        return -1;
    strcpy(m, MARKER_ENV);
    strcat(m, r->marker);
    for (size_t i = 0; i < n; i++)
        if (strncmp(environ[i], MARKER_ENV, sizeof(MARKER_ENV) - 1) &&
            !env_overridden(environ[i], req_env, n_env))
            r->envp[k++] = environ[i];
    if (!env_overridden(m, req_env, n_env))
        r->envp[k++] = m;
    for (size_t i = 0; i < n_env; i++)
        r->envp[k++] = req_env[i];
    return 0;
}

static int token_ok(const char *t)
{
    unsigned char d = strlen(t) != SERVE_TOKEN_LEN;

    for (size_t i = 0; i < SERVE_TOKEN_LEN && t[i]; i++)
        d |= (unsigned char)(t[i] ^ token[i]);
    return d == 0;
}

static int read_request(int s, struct request *r)
{
    int authed = 0;

    unsigned char h[SERVE_HEADER_LEN];
    uint32_t len;
    size_t n_argv = 0, n_env = 0, ia = 0, ie = 0;
    char **req_env;

    if (read_all(s, h, sizeof(h)) < 0 || h[0] != 'Q')
        return -1;
    len = get_u32(h + 1);
    if (len == 0 || len > SERVE_REQUEST_MAX || !(r->buf = malloc(len)))
        return -1;
    if (read_all(s, r->buf, len) < 0 || r->buf[len - 1] != '\0')
        return -1;
    for (char *p = r->buf; p < r->buf + len; p += strlen(p) + 1) {
        n_argv += *p == 'a';
        n_env += *p == 'e';
    }
    r->argv = calloc(n_argv + 1, sizeof(char *));
    req_env = calloc(n_env + 1, sizeof(char *));
    if (!r->argv || !req_env)
        return -1;
    for (char *p = r->buf; p < r->buf + len; p += strlen(p) + 1) {
        if (*p == 'a')
            r->argv[ia++] = p + 1;
        else if (*p == 'e' && strchr(p + 1, '='))
            req_env[ie++] = p + 1;
        else if (*p == 'm')
            r->marker = p + 1;
        else if (*p == 'c')
            r->cwd = p + 1;
        else if (*p == 't')
            authed = token_ok(p + 1);
        else
            return -1;
    }
    if (!authed || ia == 0 || !r->marker)
        return -1;
    return build_env(r, req_env, ie);
}

static _Noreturn void run_command(const struct request *r, int fds[3], int own_proc)
{
    sigset_t all;

    for (int i = 0; i < 3; i++)
        if (dup2(fds[i], i) < 0)
            _exit(126);
    sigemptyset(&all);
    sigprocmask(SIG_SETMASK, &all, NULL);
    signal(SIGPIPE, SIG_DFL);
    signal(SIGCHLD, SIG_DFL);
    (void)setsid(); /* as sshd's session: a kill of its group never reaches the supervisor */
    if (own_proc && mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
        nsexec_say("sandboxd-nsexec: cannot mount /proc\n");
    if (r->cwd && chdir(r->cwd) < 0) {
        nsexec_say("sandboxd-nsexec: cd: ");
        nsexec_say(r->cwd);
        nsexec_say(": ");
        nsexec_say(strerror(errno));
        nsexec_say("\n");
        _exit(1);
    }
    environ = r->envp;
    execvp(r->argv[0], r->argv);
    nsexec_say("sandboxd-nsexec: cannot run the command: ");
    nsexec_say(strerror(errno));
    nsexec_say("\n");
    _exit(errno == ENOENT ? 127 : 126);
}

/* The connection's relay state. */
struct relay {
    int s, in, out, err, sfd;
    pid_t init, cmd;
    int status;
    int cmd_done, init_done, sock_open, sock_dead, in_eof;
    unsigned char hdr[SERVE_HEADER_LEN];
    size_t hlen;
    uint32_t left; /* payload bytes of the current frame still to come */
    char *ib;
    size_t ilen, ioff, itotal;
};

static void kill_all(struct relay *x)
{
    if (x->init > 0 && !x->init_done)
        kill(x->init, SIGKILL);
    if (!x->cmd_done) {
        kill(-x->cmd, SIGKILL);
        kill(x->cmd, SIGKILL);
    }
}

static void close_fd(int *fd)
{
    if (*fd >= 0)
        close(*fd);
    *fd = -1;
}

/* Bytes from the daemon: stdin frames, its end, a kill. -1: a protocol error. */
static int feed(struct relay *x, const unsigned char *p, size_t n)
{
    while (n > 0) {
        if (x->hlen < SERVE_HEADER_LEN) {
            x->hdr[x->hlen++] = *p++;
            n--;
            if (x->hlen < SERVE_HEADER_LEN)
                continue;
            x->left = get_u32(x->hdr + 1);
            if (x->hdr[0] == 'K')
                kill_all(x);
            else if (x->hdr[0] == 'E')
                x->in_eof = 1;
            else if (x->hdr[0] != 'I' || x->left > SERVE_CHUNK_MAX ||
                     x->itotal + x->left > SERVE_STDIN_MAX)
                return -1;
            if (x->hdr[0] != 'I' && x->left)
                return -1;
            x->itotal += x->left;
            if (x->left && !(x->ib = realloc(x->ib, x->ilen + x->left)))
                return -1;
        } else {
            size_t take = n < x->left ? n : x->left;

            memcpy(x->ib + x->ilen, p, take);
            x->ilen += take;
            x->left -= (uint32_t)take;
            p += take;
            n -= take;
        }
        if (x->left == 0)
            x->hlen = 0;
    }
    return 0;
}

static void on_socket(struct relay *x)
{
    unsigned char b[SERVE_CHUNK_MAX];
    ssize_t n = recv(x->s, b, sizeof(b), MSG_DONTWAIT);

    if (n < 0 && (errno == EINTR || errno == EAGAIN))
        return;
    if (n <= 0 || feed(x, b, (size_t)n) < 0) {
        /* The daemon went away (or spoke nonsense): end the exec. */
        x->sock_open = 0;
        x->in_eof = 1;
        kill_all(x);
    }
}

static void on_stdin(struct relay *x)
{
    while (x->ioff < x->ilen) {
        ssize_t w = write(x->in, x->ib + x->ioff, x->ilen - x->ioff);

        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0 && errno == EAGAIN)
            return;
        if (w < 0) { /* the command does not read it: drop the rest */
            x->ioff = x->ilen;
            break;
        }
        x->ioff += (size_t)w;
    }
    x->ilen = x->ioff = 0;
    if (x->in_eof)
        close_fd(&x->in);
}

static void on_output(struct relay *x, int *fd, char type)
{
    char b[SERVE_CHUNK_MAX];
    ssize_t n = read(*fd, b, sizeof(b));

    if (n < 0 && (errno == EINTR || errno == EAGAIN))
        return;
    if (n <= 0) {
        close_fd(fd);
        return;
    }
    if (!x->sock_dead && send_frame(x->s, type, b, (uint32_t)n, 0) < 0) {
        x->sock_dead = 1;
        kill_all(x);
    }
}

static void on_child(struct relay *x)
{
    struct signalfd_siginfo si;
    int status;
    pid_t p;

    while (read(x->sfd, &si, sizeof(si)) == sizeof(si))
        ;
    while ((p = waitpid(-1, &status, WNOHANG)) > 0) {
        if (p == x->cmd) {
            x->cmd_done = 1;
            x->status = status;
            /* The command ended: so does its namespace, with what it left running. */
            if (x->init > 0 && !x->init_done)
                kill(x->init, SIGKILL);
        } else if (p == x->init) {
            x->init_done = 1;
        }
    }
}

static void relay_loop(struct relay *x)
{
    while (!x->cmd_done || x->out >= 0 || x->err >= 0) {
        struct pollfd f[5] = {
            {x->sock_open ? x->s : -1, POLLIN, 0},
            {x->out, POLLIN, 0},
            {x->err, POLLIN, 0},
            {x->ilen > x->ioff || x->in_eof ? x->in : -1, POLLOUT, 0},
            {x->sfd, POLLIN, 0},
        };

        if (poll(f, 5, -1) < 0) {
            if (errno == EINTR)
                continue;
            kill_all(x);
            _exit(1);
        }
        if (f[0].revents)
            on_socket(x);
        if (f[1].revents)
            on_output(x, &x->out, 'O');
        if (f[2].revents)
            on_output(x, &x->err, 'R');
        if (f[3].revents)
            on_stdin(x);
        if (f[4].revents)
            on_child(x);
    }
}

/* One connection: runs in a process of its own, forked by the supervisor. */
static _Noreturn void serve_conn(int s)
{
    struct request r = {0};
    struct relay x = {.s = s, .in = -1, .out = -1, .err = -1, .init = -1, .sock_open = 1};
    int in[2], out[2], err[2], life[2], own_proc = 0;
    sigset_t chld;

    signal(SIGCHLD, SIG_DFL);
    alarm(SERVE_REQUEST_TIMEOUT_S);
    if (read_request(s, &r) < 0)
        _exit(1);
    alarm(0);
    if (unshare(CLONE_NEWPID) == 0) {
        if (pipe2(life, O_CLOEXEC) < 0 || (x.init = fork()) < 0)
            _exit(1);
        if (x.init == 0) {
            close(s);
            close(life[1]);
            nsexec_run_init(life[0]);
        }
        close(life[0]);
        /* life[1] stays open here: init lives as long as this process. */
    }
    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    sigprocmask(SIG_BLOCK, &chld, NULL);
    x.sfd = signalfd(-1, &chld, SFD_CLOEXEC | SFD_NONBLOCK);
    if (x.sfd < 0 || pipe2(in, O_CLOEXEC) < 0 || pipe2(out, O_CLOEXEC) < 0 ||
        pipe2(err, O_CLOEXEC) < 0)
        _exit(1);
    if (x.init > 0 && unshare(CLONE_NEWNS) == 0)
        own_proc = mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) == 0;
    x.cmd = fork();
    if (x.cmd < 0)
        _exit(1);
    if (x.cmd == 0)
        run_command(&r, (int[3]){in[0], out[1], err[1]}, own_proc);
    close(in[0]);
    close(out[1]);
    close(err[1]);
    x.in = in[1];
    x.out = out[0];
    x.err = err[0];
    fcntl(x.in, F_SETFL, O_NONBLOCK);
    fcntl(x.out, F_SETFL, O_NONBLOCK);
    fcntl(x.err, F_SETFL, O_NONBLOCK);
    signal(SIGPIPE, SIG_IGN);
    relay_loop(&x);
    close_fd(&x.in);
    if (!x.sock_dead) {
        if (WIFSIGNALED(x.status))
            send_u32(s, 'S', (uint32_t)WTERMSIG(x.status), 0);
        else
            send_u32(s, 'X', (uint32_t)WEXITSTATUS(x.status), 0);
    }
    _exit(0);
}

static void supervise_reap(int sfd, struct conn *conns, size_t *n)
{
    struct signalfd_siginfo si;
    int status;
    pid_t p;

    while (read(sfd, &si, sizeof(si)) == sizeof(si))
        ;
    while ((p = waitpid(-1, &status, WNOHANG)) > 0)
        for (size_t i = 0; i < *n; i++) {
            if (conns[i].pid != p)
                continue;
            /* A connection killed before it could report: report its signal. */
            if (WIFSIGNALED(status))
                (void)send_u32(conns[i].fd, 'S', (uint32_t)WTERMSIG(status), MSG_DONTWAIT);
            close(conns[i].fd);
            conns[i] = conns[--*n];
            break;
        }
}

static _Noreturn void supervise(int lfd, int lk)
{
    static struct conn conns[SERVE_CONN_MAX];
    size_t n = 0;
    sigset_t chld;
    int sfd;

    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    sigprocmask(SIG_BLOCK, &chld, NULL);
    signal(SIGPIPE, SIG_IGN);
    sfd = signalfd(-1, &chld, SFD_CLOEXEC | SFD_NONBLOCK);
    if (sfd < 0)
        _exit(1);
    for (;;) {
        struct pollfd f[2] = {{n < SERVE_CONN_MAX ? lfd : -1, POLLIN, 0}, {sfd, POLLIN, 0}};
        int c;
        pid_t p;

        if (poll(f, 2, -1) < 0)
            continue;
        if (f[1].revents)
            supervise_reap(sfd, conns, &n);
        if (!f[0].revents || (c = accept4(lfd, NULL, NULL, SOCK_CLOEXEC)) < 0)
            continue;
        p = fork();
        if (p == 0) {
            close(lfd);
            close(sfd);
            close(lk);
            for (size_t i = 0; i < n; i++)
                close(conns[i].fd);
            serve_conn(c);
        }
        if (p < 0) {
            close(c);
            continue;
        }
        conns[n++] = (struct conn){p, c};
    }
}

/* The first port a user other than root may bind (1024 unless lowered). */
static unsigned unprivileged_port_start(void)
{
    char b[16] = "";
    int fd = open("/proc/sys/net/ipv4/ip_unprivileged_port_start", O_RDONLY | O_CLOEXEC);

    if (fd < 0)
        return 1024;
    (void)!read(fd, b, sizeof(b) - 1);
    close(fd);
    return b[0] >= '0' && b[0] <= '9' ? (unsigned)strtoul(b, NULL, 10) : 1024;
}

/* Listens on 127.0.0.1, on a free port of SERVE_PORT_MIN..SERVE_PORT_MAX (from a random
 * one on): ports only root binds, so that no other user of the container can take the
 * supervisor's port after it died and receive the daemon's requests. None where they are
 * not privileged. */
static int listen_on(unsigned *ret_port)
{
    unsigned n = SERVE_PORT_MAX - SERVE_PORT_MIN + 1, r = 0;
    int fd;

    if (unprivileged_port_start() <= SERVE_PORT_MAX)
        return -1;
    (void)!getrandom(&r, sizeof(r), 0);
    for (unsigned i = 0; i < n; i++) {
        unsigned port = SERVE_PORT_MIN + (r + i) % n;
        struct sockaddr_in a = {.sin_family = AF_INET,
                                .sin_port = htons((uint16_t)port),
                                .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};

        fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
            return -1;
        if (bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0 && listen(fd, 128) == 0) {
            *ret_port = port;
            return fd;
        }
        close(fd);
    }
    return -1;
}

/* DIR/addr: "PORT TOKEN\n", mode 0600, written whole (a new name renamed into place). */
static int write_addr(const char *dir, unsigned port)
{
    char path[300], tmp[310], line[64];
    int fd, n = snprintf(line, sizeof(line), "%u %s\n", port, token), ok;

    snprintf(path, sizeof(path), "%s/addr", dir);
    snprintf(tmp, sizeof(tmp), "%s/addr.%d", dir, (int)getpid());
    fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0)
        return -1;
    ok = write(fd, line, (size_t)n) == n;
    close(fd);
    if (!ok || rename(tmp, path) < 0) {
        unlink(tmp);
        return -1;
    }
    return 0;
}

/* Prints the serving line from DIR/addr. */
static void print_addr(const char *dir)
{
    char path[300], line[64];
    unsigned port;
    int fd, n;

    snprintf(path, sizeof(path), "%s/addr", dir);
    fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return;
    n = (int)read(fd, line, sizeof(line) - 1);
    close(fd);
    if (n <= 0)
        return;
    line[n] = '\0';
    if (sscanf(line, "%u %32[0-9a-f]", &port, token) != 2 || strlen(token) != SERVE_TOKEN_LEN)
        return;
    nsexec_out(SERVE_LINE);
    nsexec_out(line);
}

/* DIR: made 0700, must be a directory of this user's. */
static int own_dir(const char *dir)
{
    struct stat st;

    if (dir[0] != '/' || strlen(dir) > 200)
        return -1;
    if (mkdir(dir, 0700) < 0 && errno != EEXIST)
        return -1;
    if (lstat(dir, &st) < 0 || !S_ISDIR(st.st_mode) || st.st_uid != geteuid() ||
        chmod(dir, 0700) < 0)
        return -1;
    return 0;
}

/* The new supervisor (the grandchild, in a session of its own): listens, publishes DIR/addr,
 * tells the caller through ready, serves. */
static _Noreturn void start_supervisor(const char *dir, int lk, int ready)
{
    unsigned char rnd[SERVE_TOKEN_LEN / 2];
    unsigned port = 0;
    int lfd, nul;

    if (getrandom(rnd, sizeof(rnd), 0) != sizeof(rnd))
        _exit(1);
    for (size_t i = 0; i < sizeof(rnd); i++)
        snprintf(token + 2 * i, 3, "%02x", rnd[i]);
    lfd = listen_on(&port);
    nul = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (lfd < 0 || nul < 0 || write_addr(dir, port) < 0 || dup2(nul, 0) < 0 || dup2(nul, 1) < 0 ||
        dup2(nul, 2) < 0)
        _exit(1);
    close(nul);
    (void)!write(ready, "y", 1);
    close(ready);
    supervise(lfd, lk);
}

/* Exit code 0 whenever the check line is printed: the helper can run here, with or without
 * the supervisor (the second line says it runs). */
int nsexec_serve(const char *dir)
{
    char lock[256];
    int lk, ready[2];
    char c;
    pid_t p;

    nsexec_out(NSEXEC_CHECK_LINE);
    if (own_dir(dir) < 0)
        return 0; /* the helper runs: only the supervisor does not */
    snprintf(lock, sizeof(lock), "%s/lock", dir);
    lk = open(lock, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (lk < 0)
        return 0;
    if (flock(lk, LOCK_EX | LOCK_NB) < 0) {
        if (errno == EWOULDBLOCK)
            print_addr(dir); /* one runs */
        return 0;
    }
    if (pipe2(ready, O_CLOEXEC) < 0 || (p = fork()) < 0)
        return 0;
    if (p == 0) {
        close(ready[0]);
        if (setsid() < 0 || (p = fork()) < 0)
            _exit(1);
        if (p > 0)
            _exit(0);
        start_supervisor(dir, lk, ready[1]);
    }
    close(ready[1]);
    close(lk);
    while (waitpid(p, NULL, 0) < 0 && errno == EINTR)
        ;
    if (read(ready[0], &c, 1) == 1)
        print_addr(dir);
    return 0;
}
