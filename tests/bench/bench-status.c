/* bench-status: daemon.status round trips per second and latency percentiles at
 * several connection counts. Each connection keeps `depth` requests outstanding
 * (closed loop: a new request goes out when a reply comes back).
 *
 *   bench-status --daemon build/daemon/sandboxd        (starts its own daemon)
 *   bench-status --socket /run/sandboxd.sock           (an already running one)
 * Options: --seconds S (per row, default 3), --conns 1,16,256, --depth D (default 1).
 *
 * A measuring tool, not a test: it prints a table and asserts nothing. */
#include "macro.h"

#include <errno.h>
#include <inttypes.h>
#include <fcntl.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define BENCH_MAX_CONNS 4096
#define BENCH_MAX_DEPTH 64
#define BENCH_MAX_SAMPLES (20u * 1000 * 1000)
#define BENCH_WARMUP_NS 300000000ull

static const char request[] = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"daemon.status\"}\n";

struct bconn {
    int fd;
    uint64_t sent[BENCH_MAX_DEPTH]; /* ring of send times, replies come in order */
    unsigned head, n;
    char buf[16384];
};

static uint64_t now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int connect_to(const char *path)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

    if (fd < 0)
        return -errno;
    strncpy(sa.sun_path, path, sizeof sa.sun_path - 1);
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
        int r = -errno;

        close(fd);
        return r;
    }
    return fd;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

    return x < y ? -1 : x > y;
}

static int send_requests(struct bconn *c, unsigned k, uint64_t t)
{
    char out[sizeof request * BENCH_MAX_DEPTH];
    size_t len = 0, off = 0;

    for (unsigned i = 0; i < k; i++) {
        memcpy(out + len, request, sizeof request - 1);
        len += sizeof request - 1;
        c->sent[(c->head + c->n) % BENCH_MAX_DEPTH] = t;
        c->n++;
    }
    while (off < len) {
        ssize_t w = write(c->fd, out + off, len - off);

        if (w < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN) {
                struct pollfd p = {.fd = c->fd, .events = POLLOUT};

                (void)poll(&p, 1, 1000);
                continue;
            }
            return -errno;
        }
        off += (size_t)w;
    }
    return 0;
}

/* One row of the table. Returns 0 or a negative errno. */
static int run(const char *path, unsigned nconns, unsigned depth, double seconds)
{
    _cleanup_free_ struct bconn *conns = calloc(nconns, sizeof *conns);
    _cleanup_free_ uint64_t *samples = malloc(BENCH_MAX_SAMPLES * sizeof(uint64_t));
    size_t nsamples = 0;
    uint64_t start, measure_from, end, count = 0, errors = 0;
    int ep, r = 0;

    if (!conns || !samples)
        return -ENOMEM;
    ep = epoll_create1(EPOLL_CLOEXEC);
    if (ep < 0)
        return -errno;
    for (unsigned i = 0; i < nconns; i++) {
        struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &conns[i]};

        conns[i].fd = connect_to(path);
        if (conns[i].fd < 0) {
            fprintf(stderr, "bench: connect %s: %s\n", path, strerror(-conns[i].fd));
            r = conns[i].fd;
            nconns = i;
            goto out;
        }
        epoll_ctl(ep, EPOLL_CTL_ADD, conns[i].fd, &ev);
    }
    start = now_ns();
    measure_from = start + BENCH_WARMUP_NS;
    end = measure_from + (uint64_t)(seconds * 1e9);
    for (unsigned i = 0; i < nconns; i++)
        if (send_requests(&conns[i], depth, start) < 0) {
            r = -EIO;
            goto out;
        }
    for (;;) {
        struct epoll_event evs[256];
        uint64_t t;
        int n = epoll_wait(ep, evs, 256, 1000);

        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            r = -errno;
            break;
        }
        t = now_ns();
        if (t >= end)
            break;
        for (int i = 0; i < n; i++) {
            struct bconn *c = evs[i].data.ptr;
            ssize_t k = read(c->fd, c->buf, sizeof c->buf);
            unsigned replies = 0;

            if (k <= 0) {
                fprintf(stderr, "bench: connection closed by the daemon (connection cap?)\n");
                r = -ECONNRESET;
                goto out;
            }
            for (ssize_t j = 0; j < k; j++) {
                if (c->buf[j] == '\n') {
                    uint64_t sent = c->sent[c->head];

                    c->head = (c->head + 1) % BENCH_MAX_DEPTH;
                    c->n--;
                    replies++;
                    if (sent >= measure_from) {
                        count++;
                        if (nsamples < BENCH_MAX_SAMPLES)
                            samples[nsamples++] = t - sent;
                    }
                } else if (c->buf[j] == '"' && j + 8 <= k &&
                           memcmp(c->buf + j, "\"error\":", 8) == 0)
                    errors++;
            }
            if (replies && send_requests(c, replies, t) < 0) {
                r = -EIO;
                goto out;
            }
        }
    }
    qsort(samples, nsamples, sizeof *samples, cmp_u64);
    if (nsamples > 0)
        printf("%6u %6u %10" PRIu64 " %12.0f %9.1f %9.1f %9.1f %7" PRIu64 "\n", nconns, depth,
               count, (double)count / seconds, samples[nsamples / 2] / 1e3,
               samples[(size_t)(nsamples * 0.99)] / 1e3, samples[nsamples - 1] / 1e3, errors);
    else
        printf("%6u %6u          0 (no replies)\n", nconns, depth);
    fflush(stdout);
out:
    for (unsigned i = 0; i < nconns; i++)
        close(conns[i].fd);
    close(ep);
    return r;
}

static pid_t spawn_daemon(const char *exe, char *dir, char **ret_socket)
{
    char conf[512], *sock;
    FILE *f;
    pid_t pid;

    if (!mkdtemp(dir))
        return -errno;
    if (asprintf(&sock, "%s/sandboxd.sock", dir) < 0)
        return -ENOMEM;
    snprintf(conf, sizeof conf, "%s/sandboxd.conf", dir);
    f = fopen(conf, "w");
    if (!f)
        return -errno;
    fprintf(f,
            "[server]\nsocket = %s\nsocket_group =\nmax_connections = 4096\n"
            "max_connections_per_uid = 4096\nlog_level = warning\n",
            sock);
    fclose(f);
    pid = fork();
    if (pid == 0) {
        execl(exe, exe, "--config", conf, (char *)NULL);
        _exit(127);
    }
    for (int i = 0; i < 500; i++) {
        int fd = connect_to(sock);

        if (fd >= 0) {
            close(fd);
            *ret_socket = sock;
            usleep(100000);
            return pid;
        }
        usleep(10000);
    }
    kill(pid, SIGTERM);
    free(sock);
    return -ETIMEDOUT;
}

int main(int argc, char **argv)
{
    static const struct option options[] = {
        {"socket", required_argument, NULL, 's'},  {"daemon", required_argument, NULL, 'd'},
        {"seconds", required_argument, NULL, 't'}, {"conns", required_argument, NULL, 'c'},
        {"depth", required_argument, NULL, 'D'},   {},
    };
    char dir[] = "/tmp/sandboxd-bench-XXXXXX";
    const char *daemon = NULL, *conns = "1,16,256";
    char *sock = NULL, *list, *save = NULL;
    double seconds = 3;
    unsigned depth = 1;
    pid_t pid = 0;
    struct rlimit rl;
    int opt, rc = 0;

    while ((opt = getopt_long(argc, argv, "s:d:t:c:D:", options, NULL)) >= 0) {
        switch (opt) {
        case 's':
            sock = strdup(optarg);
            break;
        case 'd':
            daemon = optarg;
            break;
        case 't':
            seconds = atof(optarg);
            break;
        case 'c':
            conns = optarg;
            break;
        case 'D':
            depth = (unsigned)atoi(optarg);
            break;
        default:
            fprintf(stderr, "usage: bench-status (--daemon SANDBOXD | --socket PATH) "
                            "[--seconds S] [--conns 1,16,256] [--depth D]\n");
            return 2;
        }
    }
    if ((!sock == !daemon) || seconds <= 0 || depth < 1 || depth > BENCH_MAX_DEPTH) {
        fprintf(stderr, "bench: give exactly one of --daemon or --socket\n");
        return 2;
    }
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        (void)setrlimit(RLIMIT_NOFILE, &rl);
    }
    signal(SIGPIPE, SIG_IGN);
    if (daemon) {
        pid = spawn_daemon(daemon, dir, &sock);
        if (pid < 0) {
            fprintf(stderr, "bench: could not start %s: %s\n", daemon, strerror((int)-pid));
            return 1;
        }
    }
    printf("daemon.status round trips, %.1f s per row (after %.1f s warm-up)\n", seconds,
           BENCH_WARMUP_NS / 1e9);
    printf("%6s %6s %10s %12s %9s %9s %9s %7s\n", "conns", "depth", "requests", "req/s", "p50_us",
           "p99_us", "max_us", "errors");
    list = strdup(conns);
    for (char *w = strtok_r(list, ",", &save); w; w = strtok_r(NULL, ",", &save)) {
        int n = atoi(w);

        if (n < 1 || n > BENCH_MAX_CONNS) {
            fprintf(stderr, "bench: bad connection count '%s'\n", w);
            rc = 2;
            break;
        }
        if (run(sock, (unsigned)n, depth, seconds) < 0)
            rc = 1;
    }
    free(list);
    if (pid > 0) {
        int status = 0;

        kill(pid, SIGTERM);
        waitpid(pid, &status, 0);
        unlink(sock);
        {
            char conf[512];

            snprintf(conf, sizeof conf, "%s/sandboxd.conf", dir);
            unlink(conf);
        }
        rmdir(dir);
    }
    free(sock);
    return rc;
}
