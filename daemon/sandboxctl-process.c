/* sandboxctl ps / start / logs / kill. See sandboxctl-process.h. */
#include "sandboxctl-process.h"

#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "daemon/sandboxctl.h"
#include "lib/json-util.h"
#include "lib/macro.h"
#include "lib/util.h"
#include "proto/b64.h"

#define LOGS_FOLLOW_WAIT_MS 30000

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

/* --pty: the size of sandboxctl's own terminal (the first of stdin, stdout, stderr that is
 * one), else 80x24; at most the protocol's 1000. */
static json_object *pty_params(void)
{
    struct winsize w = {.ws_col = 80, .ws_row = 24};
    json_object *o = json_object_new_object();

    for (int fd = 0; fd < 3; fd++) {
        struct winsize t = {};

        if (ioctl(fd, TIOCGWINSZ, &t) == 0 && t.ws_col > 0 && t.ws_row > 0) {
            w = t;
            break;
        }
    }
    json_object_object_add(o, "cols", json_object_new_int(MIN((int)w.ws_col, 1000)));
    json_object_object_add(o, "rows", json_object_new_int(MIN((int)w.ws_row, 1000)));
    return o;
}

static int cmd_start(struct ctl *c, const struct ctl_ops *ops, int argc, char **argv)
{
    static const struct option opts[] = {
        {"stdin", no_argument, NULL, 'i'},
        {"pty", no_argument, NULL, 't'},
        {"env", required_argument, NULL, 'e'},
        {"cwd", required_argument, NULL, 'C'},
        {},
    };
    _cleanup_json_ json_object *p = NULL, *res = NULL;
    json_object *env = NULL, *args;
    int opt, r;

    if (argc < 2) {
        fprintf(stderr,
                "sandboxctl: start ID [--stdin] [--pty] [--env K=V] [--cwd DIR] -- CMD...\n");
        return EXIT_USAGE;
    }
    p = ref_params(argv[1], NULL);
    optind = 2;
    while ((opt = getopt_long(argc, argv, "+ite:C:", opts, NULL)) >= 0) {
        switch (opt) {
        case 'i':
            json_object_object_add(p, "stdin", json_object_new_boolean(true));
            break;
        case 't':
            json_object_object_add(p, "pty", pty_params());
            break;
        case 'e':
            if (ctl_env_add(p, &env, optarg) < 0)
                return EXIT_USAGE;
            break;
        case 'C':
            json_object_object_add(p, "cwd", json_object_new_string(optarg));
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
    r = ops->call(c, "process.start", TAKE_PTR(p), &res);
    if (r < 0)
        return exit_for(r);
    if (ops->json)
        print_raw(res);
    else
        printf("%s\n", str_of(res, "process"));
    return 0;
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
