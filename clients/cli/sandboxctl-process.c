/* sandboxctl ps / start / logs / kill. See sandboxctl-process.h. */
#include "sandboxctl-process.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "sandboxctl.h"
#include "json-util.h"
#include "macro.h"
#include "util.h"
#include "b64.h"

#define LOGS_FOLLOW_WAIT_MS 30000
#define ATTACH_BLOCK 65536

static const char *str_of(json_object *o, const char *key)
{
    json_object *v;

    if (!o || !json_object_object_get_ex(o, key, &v) || !v)
        return "-";
    return json_object_get_string(v);
}

static json_object *ref_params(const char *id, const char *process)
{
    json_object *p = json_object_new_object();

    json_object_object_add(p, "id", json_object_new_string(id));
    if (process)
        json_object_object_add(p, "process", json_object_new_string(process));
    return p;
}

static void print_raw(json_object *o)
{
    printf("%s\n", json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN |
                                                         JSON_C_TO_STRING_NOSLASHESCAPE));
}

/* "exited 0", "exited SIGTERM", "running", "lost" */
static void print_state(FILE *f, json_object *o)
{
    json_object *v;

    fprintf(f, "%s", str_of(o, "state"));
    if (json_object_object_get_ex(o, "signal", &v) && v)
        fprintf(f, " %s", json_object_get_string(v));
    else if (json_object_object_get_ex(o, "exit_code", &v) && v)
        fprintf(f, " %d", json_object_get_int(v));
}

static int cmd_ps(struct ctl *c, const struct ctl_ops *ops, int argc, char **argv)
{
    _cleanup_json_ json_object *res = NULL;
    json_object *l = NULL;
    int r;

    if (argc != 2) {
        fprintf(stderr, "sandboxctl: ps ID\n");
        return EXIT_USAGE;
    }
    r = ops->call(c, "process.list", ref_params(argv[1], NULL), &res);
    if (r < 0)
        return exit_for(r);
    if (ops->json) {
        print_raw(res);
        return 0;
    }
    json_object_object_get_ex(res, "processes", &l);
    printf("%-20s %-16s %-20s %s\n", "PROCESS", "STATE", "STARTED", "COMMAND");
    for (size_t i = 0; l && i < json_object_array_length(l); i++) {
        json_object *p = json_object_array_get_idx(l, i);
        char st[64];
        FILE *f = fmemopen(st, sizeof st, "w");

        if (!f)
            return 1;
        print_state(f, p);
        fclose(f);
        printf("%-20s %-16s %-20s %s\n", str_of(p, "process"), st, str_of(p, "started_at"),
               str_of(p, "command"));
    }
    return 0;
}

/* --attach: copies the two pipes the daemon writes the process's output into onto our stdout
 * and stderr until both ended (the daemon closes them once the process exited and all of its
 * output was copied). A stream we can no longer write is dropped (its pipe closed). */
static void attach_relay(int out_fd, int err_fd)
{
    int from[2] = {out_fd, err_fd};
    _cleanup_free_ char *buf = malloc(ATTACH_BLOCK);

    while (buf && (from[0] >= 0 || from[1] >= 0)) {
        struct pollfd p[2] = {{.fd = from[0], .events = POLLIN}, {.fd = from[1], .events = POLLIN}};

        if (poll(p, 2, -1) < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        for (int i = 0; i < 2; i++) {
            ssize_t n;

            if (from[i] < 0 || !p[i].revents)
                continue;
            n = read(from[i], buf, ATTACH_BLOCK);
            if (n < 0 && (errno == EINTR || errno == EAGAIN))
                continue;
            if (n <= 0 || write_all(i == 0 ? STDOUT_FILENO : STDERR_FILENO, buf, (size_t)n) < 0) {
                close(from[i]);
                from[i] = -1;
            }
        }
    }
    for (int i = 0; i < 2; i++)
        if (from[i] >= 0)
            close(from[i]);
}

static int cmd_start(struct ctl *c, const struct ctl_ops *ops, int argc, char **argv)
{
    static const struct option opts[] = {
        {"stdin", no_argument, NULL, 'i'},
        {"pty", no_argument, NULL, 't'},
        {"env", required_argument, NULL, 'e'},
        {"cwd", required_argument, NULL, 'C'},
        {"attach", no_argument, NULL, 'a'},
        {"user", required_argument, NULL, 'u'},
        {},
    };
    int out[2] = {-1, -1}, err[2] = {-1, -1}, fds[3];
    bool attach = false, pty = false;
    _cleanup_json_ json_object *p = NULL, *res = NULL;
    json_object *env = NULL, *args;
    int opt, r;

    if (argc < 2) {
        fprintf(
            stderr,
            "sandboxctl: start ID [--stdin] [--pty] [--attach] [--env K=V] [--cwd DIR] [-u USER] "
            "-- CMD...\n");
        return EXIT_USAGE;
    }
    ctl_id_first(argc, argv, "+ite:C:au:", opts);
    p = ref_params(argv[1], NULL);
    optind = 2;
    while ((opt = getopt_long(argc, argv, "+ite:C:au:", opts, NULL)) >= 0) {
        switch (opt) {
        case 'i':
            json_object_object_add(p, "stdin", json_object_new_boolean(true));
            break;
        case 't':
            json_object_object_add(p, "pty", ctl_pty_params());
            pty = true;
            break;
        case 'e':
            if (ctl_env_add(p, &env, optarg) < 0)
                return EXIT_USAGE;
            break;
        case 'C':
            json_object_object_add(p, "cwd", json_object_new_string(optarg));
            break;
        case 'a':
            attach = true;
            break;
        case 'u':
            json_object_object_add(p, "user", json_object_new_string(optarg));
            break;
        default:
            return EXIT_USAGE;
        }
    }
    if (optind >= argc) {
        fprintf(stderr, "sandboxctl: start: no command given\n");
        return EXIT_USAGE;
    }
    args = json_object_new_array();
    for (int i = optind; i < argc; i++)
        json_object_array_add(args, json_object_new_string(argv[i]));
    json_object_object_add(p, "argv", args);
    if (attach && pty)
        return ctl_tty_run(c, ops, argv[1], TAKE_PTR(p), 0);
    if (!attach) {
        r = ops->call(c, "process.start", TAKE_PTR(p), &res);
        if (r < 0)
            return exit_for(r);
        if (ops->json)
            print_raw(res);
        else
            printf("%s\n", str_of(res, "process"));
        return 0;
    }
    /* Our stdin as the process's; its output through pipes we relay (so that we end only
     * once all of it was written), then its exit status as ours. */
    if (pipe2(out, O_CLOEXEC) < 0 || pipe2(err, O_CLOEXEC) < 0) {
        fprintf(stderr, "sandboxctl: pipe: %s\n", strerror(errno));
        return 1;
    }
    fds[0] = STDIN_FILENO;
    fds[1] = out[1];
    fds[2] = err[1];
    json_object_object_add(p, "stdin_fd", json_object_new_int(0));
    json_object_object_add(p, "stdout_fd", json_object_new_int(1));
    json_object_object_add(p, "stderr_fd", json_object_new_int(2));
    r = ops->call_fds(c, "process.start", TAKE_PTR(p), fds, 3, &res);
    close(out[1]);
    close(err[1]);
    if (r < 0) {
        close(out[0]);
        close(err[0]);
        return exit_for(r);
    }
    fflush(stdout);
    attach_relay(out[0], err[0]);
    return ctl_process_exit_status(c, ops, argv[1], str_of(res, "process"));
}

/* Writes the data of a process.read result to fd. */
static int write_data(json_object *o, int fd)
{
    json_object *v;

    if (json_object_object_get_ex(o, "data", &v) && v)
        return write_all(fd, json_object_get_string(v), (size_t)json_object_get_string_len(v));
    if (json_object_object_get_ex(o, "data_b64", &v) && v) {
        _cleanup_free_ uint8_t *d = NULL;
        size_t n;
        int r =
            b64_decode(json_object_get_string(v), (size_t)json_object_get_string_len(v), &d, &n);

        if (r < 0)
            return r;
        return write_all(fd, (const char *)d, n);
    }
    return 0;
}

/* Reads the stream from offset 0 to its end (with follow: until the process ended and
 * everything was read). A dropped start is reported on stderr. */
static int cmd_logs(struct ctl *c, const struct ctl_ops *ops, int argc, char **argv)
{
    static const struct option opts[] = {
        {"follow", no_argument, NULL, 'f'},
        {"stderr", no_argument, NULL, 'E'},
        {},
    };
    bool follow = false, err_stream = false;
    int64_t offset = 0;
    int opt;

    optind = 1;
    while ((opt = getopt_long(argc, argv, "fE", opts, NULL)) >= 0) {
        if (opt == 'f')
            follow = true;
        else if (opt == 'E')
            err_stream = true;
        else
            return EXIT_USAGE;
    }
    if (argc - optind != 2) {
        fprintf(stderr, "sandboxctl: logs [-f] [--stderr] ID PROC\n");
        return EXIT_USAGE;
    }
    for (;;) {
        _cleanup_json_ json_object *res = NULL;
        json_object *p = ref_params(argv[optind], argv[optind + 1]), *v;
        int64_t start, next;
        bool eof, empty;
        int r;

        json_object_object_add(p, "stream",
                               json_object_new_string(err_stream ? "stderr" : "stdout"));
        json_object_object_add(p, "offset", json_object_new_int64(offset));
        json_object_object_add(p, "length", json_object_new_int64(1024 * 1024));
        if (follow)
            json_object_object_add(p, "wait_ms", json_object_new_int64(LOGS_FOLLOW_WAIT_MS));
        r = ops->call(c, "process.read", p, &res);
        if (r < 0)
            return exit_for(r);
        start = json_object_object_get_ex(res, "offset", &v) ? json_object_get_int64(v) : offset;
        next = json_object_object_get_ex(res, "next_offset", &v) ? json_object_get_int64(v) : start;
        eof = json_object_object_get_ex(res, "eof", &v) && json_object_get_boolean(v);
        if (start > offset)
            fprintf(stderr, "sandboxctl: logs: bytes %lld..%lld were dropped (retention)\n",
                    (long long)offset, (long long)start - 1);
        if (ops->json)
            print_raw(res);
        else if (write_data(res, STDOUT_FILENO) < 0)
            return 1;
        empty = next == start;
        offset = next;
        if (eof && follow)
            return MAX(ctl_process_status_of(res), 0);
        if (eof || (!follow && empty))
            return 0;
    }
}

static int cmd_kill(struct ctl *c, const struct ctl_ops *ops, int argc, char **argv)
{
    _cleanup_json_ json_object *res = NULL;
    json_object *p;
    int r;

    if (argc != 3 && argc != 4) {
        fprintf(stderr, "sandboxctl: kill ID PROC [SIGNAL]\n");
        return EXIT_USAGE;
    }
    p = ref_params(argv[1], argv[2]);
    if (argc == 4)
        json_object_object_add(p, "signal", json_object_new_string(argv[3]));
    r = ops->call(c, "process.kill", p, &res);
    if (r < 0)
        return exit_for(r);
    if (ops->json) {
        print_raw(res);
        return 0;
    }
    printf("%s ", str_of(res, "process"));
    print_state(stdout, res);
    printf("\n");
    return 0;
}

bool ctl_process_is_command(const char *cmd)
{
    return cmd && (!strcmp(cmd, "ps") || !strcmp(cmd, "start") || !strcmp(cmd, "logs") ||
                   !strcmp(cmd, "kill"));
}

int ctl_process_command(struct ctl *c, const struct ctl_ops *ops, int argc, char **argv)
{
    /* A closed pipe (logs | head) must not kill sandboxctl: writes then fail with EPIPE. */
    signal(SIGPIPE, SIG_IGN);
    if (!strcmp(argv[0], "ps"))
        return cmd_ps(c, ops, argc, argv);
    if (!strcmp(argv[0], "start"))
        return cmd_start(c, ops, argc, argv);
    if (!strcmp(argv[0], "logs"))
        return cmd_logs(c, ops, argc, argv);
    return cmd_kill(c, ops, argc, argv);
}
