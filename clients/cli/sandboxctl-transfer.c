/* sandboxctl put, get and exec: every byte moves through descriptors passed to the daemon
 * (docs/protocol.md, "Passing descriptors"), so there is no size limit and nothing is
 * base64-encoded. Folder trees (-r) are tar streams through an exec's stdin_fd/stdout_fd.
 * Progress is drawn on stderr when it is a terminal and the transfer is over
 * CTL_PROGRESS_MIN bytes (for files: the position of the shared file offset, or the size of
 * the file being written; for trees: what the local tar wrote or read). */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <getopt.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "sandboxctl.h"
#include "sandboxctl-process.h"
#include "json-util.h"
#include "macro.h"
#include "util.h"

#define CTL_PROGRESS_MIN (4u * 1024 * 1024)
#define CTL_TREE_TIMEOUT_MS (24 * 3600 * 1000) /* the largest exec timeout */

/* ---- progress ---- */

struct progress {
    const char *what;
    int fd;         /* regular file: its offset (put) or size (get) tells the progress */
    bool by_size;   /* get: the file's size; put: the shared offset */
    pid_t tar;      /* trees: the local tar's I/O counters */
    uint64_t total; /* 0: unknown */
    bool shown;
    uint64_t start_ns;
};

static uint64_t now_ns(void)
{
    struct timespec t;

    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static uint64_t tar_bytes(pid_t pid)
{
    char path[64], line[128];
    uint64_t rchar = 0, wchar = 0, v;
    FILE *f;

    snprintf(path, sizeof path, "/proc/%d/io", (int)pid);
    f = fopen(path, "re");
    if (!f)
        return 0;
    while (fgets(line, sizeof line, f)) {
        if (sscanf(line, "rchar: %" SCNu64, &v) == 1)
            rchar = v;
        else if (sscanf(line, "wchar: %" SCNu64, &v) == 1)
            wchar = v;
    }
    fclose(f);
    return MAX(rchar, wchar);
}

static void progress_tick(void *userdata)
{
    struct progress *p = userdata;
    uint64_t done = 0, el;
    struct stat st;

    if (p->tar > 0)
        done = tar_bytes(p->tar);
    else if (p->by_size && fstat(p->fd, &st) == 0)
        done = (uint64_t)st.st_size;
    else if (!p->by_size) {
        off_t o = lseek(p->fd, 0, SEEK_CUR);
        done = o > 0 ? (uint64_t)o : 0;
    }
    if (!p->shown && done < CTL_PROGRESS_MIN && p->total < CTL_PROGRESS_MIN)
        return;
    el = (now_ns() - p->start_ns) / 1000000u;
    p->shown = true;
    if (p->total)
        fprintf(stderr, "\r%s: %" PRIu64 " / %" PRIu64 " MiB (%u%%), %.1f MB/s   ", p->what,
                done >> 20, p->total >> 20, (unsigned)(done * 100 / MAX(p->total, (uint64_t)1)),
                el ? (double)done / 1000.0 / (double)el : 0.0);
    else
        fprintf(stderr, "\r%s: %" PRIu64 " MiB, %.1f MB/s   ", p->what, done >> 20,
                el ? (double)done / 1000.0 / (double)el : 0.0);
}

static void progress_end(struct progress *p)
{
    if (p->shown)
        fputs("\n", stderr);
}

/* A wait that draws progress when stderr is a terminal, else none. */
static const struct ctl_wait *progress_wait(struct progress *p, struct ctl_wait *w)
{
    p->start_ns = now_ns();
    if (!isatty(STDERR_FILENO))
        return NULL;
    *w = (struct ctl_wait){.tick = progress_tick, .userdata = p};
    return w;
}

/* ---- trees: tar on this side, tar in the sandbox ---- */

int ctl_spawn_tar(char *const argv[], bool tar_writes, pid_t *ret_pid, int *ret_fd)
{
    int p[2];
    pid_t pid;

    if (pipe2(p, O_CLOEXEC) < 0)
        return -errno;
    pid = fork();
    if (pid < 0) {
        int r = -errno;
        close(p[0]);
        close(p[1]);
        return r;
    }
    if (pid == 0) {
        if (dup2(tar_writes ? p[1] : p[0], tar_writes ? STDOUT_FILENO : STDIN_FILENO) < 0)
            _exit(127);
        execvp(argv[0], argv);
        fprintf(stderr, "sandboxctl: cannot run %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    close(tar_writes ? p[1] : p[0]);
    *ret_pid = pid;
    *ret_fd = tar_writes ? p[0] : p[1];
    return 0;
}

int ctl_wait_tar(pid_t pid)
{
    int st;

    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR)
            return -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* Runs the remote half of a tree transfer with fd as its stdin or stdout. */
static int tree_exec(struct ctl *c, const char *id, const char *script, const char *remote, int fd,
                     bool remote_reads, struct progress *pr)
{
    _cleanup_json_ json_object *res = NULL;
    json_object *p = id_params(id), *argv = json_object_new_array(), *v;
    struct ctl_wait w;
    int r;

    json_object_array_add(argv, json_object_new_string("sh"));
    json_object_array_add(argv, json_object_new_string("-c"));
    json_object_array_add(argv, json_object_new_string(script));
    json_object_array_add(argv, json_object_new_string("sh"));
    json_object_array_add(argv, json_object_new_string(remote));
    json_object_object_add(p, "argv", argv);
    json_object_object_add(p, "timeout_ms", json_object_new_int64(CTL_TREE_TIMEOUT_MS));
    json_object_object_add(p, remote_reads ? "stdin_fd" : "stdout_fd", json_object_new_int64(0));
    /* as root, as file writes are, whatever the template's default user */
    json_object_object_add(p, "user", json_object_new_string("0"));
    r = ctl_call_fds(c, "sandbox.exec", p, &fd, 1, progress_wait(pr, &w), &res);
    progress_end(pr);
    if (r < 0)
        return exit_for(r);
    if (json_object_object_get_ex(res, "stderr", &v) && v)
        fputs(json_object_get_string(v), stderr);
    if (!json_object_object_get_ex(res, "exit_code", &v) || !v || json_object_get_int(v) != 0) {
        fprintf(stderr, "sandboxctl: tar in the sandbox failed\n");
        return 1;
    }
    return 0;
}

/* Runs the local tar argv and the remote script on the other end of its pipe (up: the
 * local tar feeds the remote one). Returns the exit status. */
static int tree_move(struct ctl *c, const char *id, char **argv, const char *script,
                     const char *remote, bool up, struct progress *pr)
{
    int fd, r, t;

    r = ctl_spawn_tar(argv, up, &pr->tar, &fd);
    if (r < 0) {
        fprintf(stderr, "sandboxctl: tar: %s\n", strerror(-r));
        return 1;
    }
    r = tree_exec(c, id, script, remote, fd, up, pr);
    close(fd);
    t = ctl_wait_tar(pr->tar);
    if (r == 0 && t != 0) {
        fprintf(stderr, "sandboxctl: local tar failed (%d)\n", t);
        return 1;
    }
    return r;
}

/* What put -r wrote: the tree's files, folders (its top one included), links and the bytes
 * of its files. nftw() gives its callback no userdata. */
static struct tree_count {
    uint64_t files, folders, links, bytes;
} tree_count;

static int count_entry(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
    if (type == FTW_D || type == FTW_DNR)
        tree_count.folders++;
    else if (type == FTW_SL || type == FTW_SLN)
        tree_count.links++;
    else if (type == FTW_F && S_ISREG(st->st_mode)) {
        tree_count.files++;
        tree_count.bytes += (uint64_t)st->st_size;
    }
    return 0;
}

static void put_tree_report(const char *local)
{
    tree_count = (struct tree_count){};
    if (nftw(local, count_entry, 16, FTW_PHYS) < 0)
        return;
    fprintf(stderr, "%" PRIu64 " files, %" PRIu64 " folders, ", tree_count.files,
            tree_count.folders);
    if (tree_count.links)
        fprintf(stderr, "%" PRIu64 " links, ", tree_count.links);
    fprintf(stderr, "%" PRIu64 " bytes written\n", tree_count.bytes);
}

static int put_tree(struct ctl *c, const char *id, const char *local, const char *remote,
                    bool quiet)
{
    char *argv[] = {"tar", "-C", (char *)local, "-cf", "-", ".", NULL};
    struct progress pr = {.what = "put"};
    struct stat st;
    int r;

    if (stat(local, &st) < 0 || !S_ISDIR(st.st_mode)) {
        fprintf(stderr, "sandboxctl: %s: not a folder\n", local);
        return 1;
    }
    r = tree_move(c, id, argv, "mkdir -p \"$1\" && exec tar -C \"$1\" -xpf -", remote, true, &pr);
    if (r == 0 && !quiet && !c->json)
        put_tree_report(local);
    return r;
}

static int get_tree(struct ctl *c, const char *id, const char *remote, const char *local)
{
    char *argv[] = {"tar", "-C", (char *)local, "-xpf", "-", NULL};
    struct progress pr = {.what = "get"};

    if (mkdir(local, 0755) < 0 && errno != EEXIST) {
        fprintf(stderr, "sandboxctl: %s: %s\n", local, strerror(errno));
        return 1;
    }
    return tree_move(c, id, argv, "exec tar -C \"$1\" -cf - .", remote, false, &pr);
}

/* put [-r] [-q] and get [-r]: the flags before the ID, in any order (-q only when quiet is
 * not NULL). */
static bool take_recursive(int *argc, char ***argv, bool *quiet)
{
    bool r = false;

    while (*argc > 1) {
        const char *a = (*argv)[1];

        if (strcmp(a, "-r") == 0)
            r = true;
        else if (quiet && (strcmp(a, "-q") == 0 || strcmp(a, "--quiet") == 0))
            *quiet = true;
        else
            break;
        (*argv)[1] = (*argv)[0];
        (*argv)++;
        (*argc)--;
    }
    return r;
}

/* ---- files ---- */

static void print_bytes(json_object *res, const char *verb)
{
    json_object *v;

    if (json_object_object_get_ex(res, "bytes", &v))
        fprintf(stderr, "%" PRId64 " bytes %s\n", json_object_get_int64(v), verb);
}

int cmd_put(struct ctl *c, int argc, char **argv)
{
    _cleanup_close_ int fd = -1;
    _cleanup_json_ json_object *res = NULL;
    struct progress pr = {.what = "put"};
    struct ctl_wait w;
    json_object *p;
    struct stat st;
    bool quiet = false, tree = take_recursive(&argc, &argv, &quiet);
    int r;

    if (argc != 4) {
        fprintf(stderr, "sandboxctl: put [-r] [-q] ID LOCAL|- REMOTE\n");
        return EXIT_USAGE;
    }
    if (tree)
        return put_tree(c, argv[1], argv[2], argv[3], quiet);
    fd = strcmp(argv[2], "-") == 0 ? fcntl(STDIN_FILENO, F_DUPFD_CLOEXEC, 3)
                                   : open(argv[2], O_RDONLY | O_CLOEXEC);
    if (fd < 0 || fstat(fd, &st) < 0) {
        fprintf(stderr, "sandboxctl: %s: %s\n", argv[2], strerror(errno));
        return 1;
    }
    if (S_ISDIR(st.st_mode)) {
        fprintf(stderr, "sandboxctl: %s: a folder (use put -r)\n", argv[2]);
        return 1;
    }
    p = id_params(argv[1]);
    json_object_object_add(p, "path", json_object_new_string(argv[3]));
    json_object_object_add(
        p, "mode",
        json_object_new_string(S_ISREG(st.st_mode) && (st.st_mode & 0111) ? "0755" : "0644"));
    json_object_object_add(p, "content_fd", json_object_new_int64(0));
    pr.fd = fd;
    pr.total = S_ISREG(st.st_mode) ? (uint64_t)st.st_size : 0;
    r = ctl_call_fds(c, "file.write", p, &fd, 1,
                     S_ISREG(st.st_mode) ? progress_wait(&pr, &w) : NULL, &res);
    progress_end(&pr);
    if (r < 0)
        return exit_for(r);
    if (c->json)
        print_json(res);
    else if (!quiet)
        print_bytes(res, "written");
    return 0;
}

/* The size of a remote file (file.read of length 0), or 0 when unknown. */
static uint64_t remote_size(struct ctl *c, const char *id, const char *path)
{
    _cleanup_json_ json_object *res = NULL;
    json_object *p = id_params(id), *v;

    json_object_object_add(p, "path", json_object_new_string(path));
    json_object_object_add(p, "length", json_object_new_int64(0));
    if (ctl_call(c, "file.read", p, &res) < 0 || !json_object_object_get_ex(res, "size", &v))
        return 0;
    return (uint64_t)json_object_get_int64(v);
}

int cmd_get(struct ctl *c, int argc, char **argv)
{
    _cleanup_close_ int fd = -1;
    _cleanup_json_ json_object *res = NULL;
    struct progress pr = {.what = "get", .by_size = true};
    const char *local;
    struct ctl_wait w;
    json_object *p;
    struct stat st;
    bool tree = take_recursive(&argc, &argv, NULL), created = false;
    int r;

    if (argc != 3 && argc != 4) {
        fprintf(stderr, "sandboxctl: get [-r] ID REMOTE [LOCAL|-]\n");
        return EXIT_USAGE;
    }
    local = argc == 4 ? argv[3] : "-";
    if (tree) {
        if (strcmp(local, "-") == 0) {
            fprintf(stderr, "sandboxctl: get -r needs a LOCAL folder\n");
            return EXIT_USAGE;
        }
        return get_tree(c, argv[1], argv[2], local);
    }
    if (strcmp(local, "-") == 0)
        fd = fcntl(STDOUT_FILENO, F_DUPFD_CLOEXEC, 3);
    else {
        fd = open(local, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        created = fd >= 0;
    }
    if (fd < 0 || fstat(fd, &st) < 0) {
        fprintf(stderr, "sandboxctl: %s: %s\n", local, strerror(errno));
        return 1;
    }
    p = id_params(argv[1]);
    json_object_object_add(p, "path", json_object_new_string(argv[2]));
    json_object_object_add(p, "to_fd", json_object_new_int64(0));
    pr.fd = fd;
    if (S_ISREG(st.st_mode) && isatty(STDERR_FILENO))
        pr.total = remote_size(c, argv[1], argv[2]);
    r = ctl_call_fds(c, "file.read", p, &fd, 1, S_ISREG(st.st_mode) ? progress_wait(&pr, &w) : NULL,
                     &res);
    progress_end(&pr);
    if (r < 0) {
        if (created)
            (void)unlink(local); /* no partial copy left behind */
        return exit_for(r);
    }
    if (c->json)
        print_json(res);
    else if (strcmp(local, "-") != 0)
        print_bytes(res, "read");
    return 0;
}

/* ---- exec ---- */

/* --max-output: the daemon writes into pipes that are relayed here, up to the cap per
 * stream; the rest is read and dropped (the command is not disturbed). */
struct relay {
    int fd[2];     /* read ends: stdout, stderr; -1 once at EOF */
    uint64_t n[2]; /* bytes seen */
    uint64_t cap;
    bool truncated;
    bool out_error; /* our stdout or stderr went away: dropping */
};

static void relay_fd(void *userdata, size_t i)
{
    struct relay *rl = userdata;
    char buf[65536];
    ssize_t k = read(rl->fd[i], buf, sizeof buf);

    if (k < 0 && (errno == EAGAIN || errno == EINTR))
        return;
    if (k <= 0) {
        close(rl->fd[i]);
        rl->fd[i] = -1;
        return;
    }
    if (rl->n[i] < rl->cap && !rl->out_error) {
        size_t take = (size_t)MIN((uint64_t)k, rl->cap - rl->n[i]);

        if (write_all(i == 0 ? STDOUT_FILENO : STDERR_FILENO, buf, take) < 0)
            rl->out_error = true;
    }
    if (rl->n[i] + (uint64_t)k > rl->cap)
        rl->truncated = true;
    rl->n[i] += (uint64_t)k;
}

/* After the reply: the rest of the relayed output, until both pipes end. */
static void relay_drain(struct relay *rl)
{
    for (;;) {
        struct pollfd p[2] = {{.fd = rl->fd[0], .events = POLLIN},
                              {.fd = rl->fd[1], .events = POLLIN}};

        if (rl->fd[0] < 0 && rl->fd[1] < 0)
            return;
        if (poll(p, 2, -1) < 0 && errno != EINTR)
            return;
        for (size_t i = 0; i < 2; i++)
            if (p[i].revents)
                relay_fd(rl, i);
    }
}

/* What exec's options asked for besides its params. */
struct exec_opts {
    int64_t max;     /* --max-output, -1: none */
    int64_t timeout; /* --timeout, 0: none */
    bool tty;        /* -t, --tty */
};

/* -t was --timeout's short form before it became --tty's: `-t 5000 -- CMD` is refused rather
 * than run as the command "5000". */
static bool old_timeout_form(int argc, char **argv, int i)
{
    return i + 1 < argc && argv[i][0] && strspn(argv[i], "0123456789") == strlen(argv[i]) &&
           strcmp(argv[i + 1], "--") == 0;
}

static const struct option exec_opts[] = {
    {"timeout", required_argument, NULL, 'T'},
    {"tty", no_argument, NULL, 't'},
    {"env", required_argument, NULL, 'e'},
    {"cwd", required_argument, NULL, 'C'},
    {"max-output", required_argument, NULL, 'm'},
    {"user", required_argument, NULL, 'u'},
    {},
};
#define EXEC_SHORTS "+te:C:m:u:"

static int exec_options(int argc, char **argv, json_object *p, struct exec_opts *o)
{
    json_object *env = NULL;
    int64_t x;
    int opt;

    optind = 2;
    while ((opt = getopt_long(argc, argv, EXEC_SHORTS, exec_opts, NULL)) >= 0) {
        switch (opt) {
        case 'T':
            if (parse_int(optarg, "--timeout", 1, INT32_MAX, &x) < 0)
                return -EINVAL;
            json_object_object_add(p, "timeout_ms", json_object_new_int64(x));
            o->timeout = x;
            break;
        case 't':
            if (old_timeout_form(argc, argv, optind)) {
                fprintf(stderr, "sandboxctl: exec: -t is --tty; a timeout is --timeout MS\n");
                return -EINVAL;
            }
            o->tty = true;
            break;
        case 'm':
            if (parse_int(optarg, "--max-output", 0, INT64_MAX, &o->max) < 0)
                return -EINVAL;
            break;
        case 'e':
            if (ctl_env_add(p, &env, optarg) < 0)
                return -EINVAL;
            break;
        case 'C':
            json_object_object_add(p, "cwd", json_object_new_string(optarg));
            break;
        case 'u':
            json_object_object_add(p, "user", json_object_new_string(optarg));
            break;
        default:
            return -EINVAL;
        }
    }
    if (optind >= argc) {
        fprintf(stderr, "sandboxctl: exec: no command given\n");
        return -EINVAL;
    }
    if (o->tty && o->max >= 0) {
        fprintf(stderr, "sandboxctl: exec: --max-output does not go with --tty\n");
        return -EINVAL;
    }
    return 0;
}

static int call_fds_plain(struct ctl *c, const char *method, json_object *params, const int *fds,
                          size_t n_fds, json_object **ret)
{
    return ctl_call_fds(c, method, params, fds, n_fds, NULL, ret);
}

/* exec --tty: the command as a process on a terminal, attached to ours. */
static int exec_tty(struct ctl *c, const char *id, json_object *p, int64_t timeout)
{
    const struct ctl_ops ops = {.call = ctl_call, .call_fds = call_fds_plain, .json = c->json};

    json_object_object_del(p, "timeout_ms");
    return ctl_tty_run(c, &ops, id, p, timeout);
}

/* The descriptors of an exec: our stdin, and our stdout/stderr or the relay's pipes. */
static int exec_fds(json_object *p, struct relay *rl, int fds[3], size_t *ret_n)
{
    size_t n = 0;
    int pp[2][2];

    if (fcntl(STDIN_FILENO, F_GETFD) >= 0 &&
        (fcntl(STDIN_FILENO, F_GETFL) & O_ACCMODE) != O_WRONLY) {
        json_object_object_add(p, "stdin_fd", json_object_new_int64((int64_t)n));
        fds[n++] = STDIN_FILENO;
    }
    if (rl->cap == UINT64_MAX) {
        json_object_object_add(p, "stdout_fd", json_object_new_int64((int64_t)n));
        fds[n++] = STDOUT_FILENO;
        json_object_object_add(p, "stderr_fd", json_object_new_int64((int64_t)n));
        fds[n++] = STDERR_FILENO;
        *ret_n = n;
        return 0;
    }
    if (pipe2(pp[0], O_CLOEXEC) < 0)
        return -errno;
    if (pipe2(pp[1], O_CLOEXEC) < 0) {
        int r = -errno;
        close(pp[0][0]);
        close(pp[0][1]);
        return r;
    }
    for (size_t i = 0; i < 2; i++) {
        rl->fd[i] = pp[i][0];
        json_object_object_add(p, i == 0 ? "stdout_fd" : "stderr_fd",
                               json_object_new_int64((int64_t)n));
        fds[n++] = pp[i][1];
    }
    *ret_n = n;
    return 0;
}

int cmd_exec(struct ctl *c, int argc, char **argv)
{
    _cleanup_json_ json_object *p = NULL;
    _cleanup_json_ json_object *res = NULL;
    struct relay rl = {.fd = {-1, -1}, .cap = UINT64_MAX};
    struct ctl_wait w = {.on_fd = relay_fd, .userdata = &rl};
    json_object *args, *v;
    struct exec_opts o = {.max = -1};
    size_t n_fds = 0;
    int fds[3], r;

    if (argc < 2) {
        fprintf(stderr, "sandboxctl: exec ID [--timeout MS] [--env K=V] [--cwd DIR] [-u USER] "
                        "[--max-output BYTES] -- CMD...\n");
        return EXIT_USAGE;
    }
    ctl_id_first(argc, argv, EXEC_SHORTS, exec_opts);
    p = id_params(argv[1]);
    if (exec_options(argc, argv, p, &o) < 0)
        return EXIT_USAGE;
    args = json_object_new_array();
    for (int i = optind; i < argc; i++)
        json_object_array_add(args, json_object_new_string(argv[i]));
    json_object_object_add(p, "argv", args);
    if (o.tty)
        return exec_tty(c, argv[1], TAKE_PTR(p), o.timeout);
    if (o.max >= 0)
        rl.cap = (uint64_t)o.max;
    r = exec_fds(p, &rl, fds, &n_fds);
    if (r < 0) {
        fprintf(stderr, "sandboxctl: pipe: %s\n", strerror(-r));
        return 1;
    }
    w.fds[0] = rl.fd[0];
    w.fds[1] = rl.fd[1];
    w.n_fds = rl.fd[0] >= 0 ? 2 : 0;
    fflush(stdout);
    r = ctl_call_fds(c, "sandbox.exec", TAKE_PTR(p), fds, n_fds, w.n_fds ? &w : NULL, &res);
    if (rl.fd[0] >= 0) {
        /* Our copies of the write ends: the pipes end once the daemon closed its own. */
        close(fds[n_fds - 2]);
        close(fds[n_fds - 1]);
        relay_drain(&rl);
    }
    if (r < 0)
        return exit_for(r);
    if (c->json)
        print_json(res);
    /* A cut is said, and the exit status stays the command's. */
    if (rl.truncated)
        fprintf(stderr,
                "sandboxctl: exec: output truncated at %" PRIu64 " bytes per stream "
                "(--max-output)\n",
                rl.cap);
    if (json_object_object_get_ex(res, "timed_out", &v) && json_object_get_boolean(v)) {
        fprintf(stderr, "sandboxctl: exec: timed out\n");
        return 124;
    }
    if (json_object_object_get_ex(res, "exit_code", &v) && v)
        return json_object_get_int(v) & 0xff;
    return 128 + 9; /* killed by a signal */
}
