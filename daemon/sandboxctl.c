/* sandboxctl: the command-line client of sandboxd (sandboxctl(1)). One blocking
 * connection, one request at a time; each command is a thin wrapper over one
 * method of docs/protocol.md. Errors go to stderr with a non-zero exit status.
 * `sandboxctl mcp`, the MCP server, lives in sandboxctl-mcp.c. */
#include "lib/macro.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <json-c/json.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "config-build.h"
#include "daemon/sandboxctl-mcp.h"
#include "daemon/sandboxctl-process.h"
#include "lib/config.h"
#include "lib/util.h"
#include "proto/b64.h"
#include "proto/rpc.h"

#define CTL_RESPONSE_MAX (64u * 1024 * 1024) /* longest response line accepted */
#define CTL_FILE_MAX (16u * 1024 * 1024)     /* largest file `put` sends */
#define CTL_READ_CHUNK (8u * 1024 * 1024)    /* file.read length per call */
#define EXIT_RPC 2                           /* the daemon answered with an error */
#define EXIT_USAGE 64

struct ctl {
    const char *socket;
    bool json;
    int fd;
    int64_t next_id;
    char *buf; /* received bytes not yet returned */
    size_t len, cap;
};

static int ctl_connect(struct ctl *c)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};

    if (strlen(c->socket) >= sizeof sa.sun_path) {
        fprintf(stderr, "sandboxctl: socket path too long: %s\n", c->socket);
        return -ENAMETOOLONG;
    }
    strcpy(sa.sun_path, c->socket);
    c->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (c->fd < 0 || connect(c->fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
        int r = -errno;

        fprintf(stderr, "sandboxctl: cannot connect to %s: %s\n", c->socket, strerror(-r));
        return r;
    }
    return 0;
}

/* Reads one line (without '\n'); the caller frees. */
static int read_line(struct ctl *c, char **ret)
{
    for (;;) {
        char *nl = c->len ? memchr(c->buf, '\n', c->len) : NULL;
        ssize_t k;

        if (nl) {
            size_t n = (size_t)(nl - c->buf);
            char *line = malloc(n + 1);

            if (!line)
                return -ENOMEM;
            memcpy(line, c->buf, n);
            line[n] = '\0';
            memmove(c->buf, nl + 1, c->len - n - 1);
            c->len -= n + 1;
            *ret = line;
            return 0;
        }
        if (c->len >= CTL_RESPONSE_MAX)
            return -EMSGSIZE;
        if (c->cap - c->len < 65536) {
            size_t cap = c->cap ? c->cap * 2 : 131072;
            char *p = realloc(c->buf, cap);

            if (!p)
                return -ENOMEM;
            c->buf = p;
            c->cap = cap;
        }
        k = read(c->fd, c->buf + c->len, c->cap - c->len);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0)
            return -errno;
        if (k == 0)
            return -ECONNRESET;
        c->len += (size_t)k;
    }
}

/* Calls `method` with `params` (taken over, NULL for none). On success *ret_result
 * holds the result; on an error response prints it and returns -EREMOTE. */
static int ctl_call(struct ctl *c, const char *method, json_object *params,
                    json_object **ret_result)
{
    _cleanup_json_ json_object *req = json_object_new_object();
    _cleanup_free_ char *line = NULL;
    int64_t id = ++c->next_id;
    size_t len;
    int r;

    json_object_object_add(req, "jsonrpc", json_object_new_string("2.0"));
    json_object_object_add(req, "id", json_object_new_int64(id));
    json_object_object_add(req, "method", json_object_new_string(method));
    if (params)
        json_object_object_add(req, "params", params);
    line = rpc_to_line(req, &len);
    if (!line)
        return -ENOMEM;
    r = write_all(c->fd, line, len);
    if (r < 0) {
        fprintf(stderr, "sandboxctl: sending %s: %s\n", method, strerror(-r));
        return r;
    }
    for (;;) {
        _cleanup_free_ char *resp = NULL;
        _cleanup_json_ json_object *o = NULL;
        json_object *rid, *err, *res, *m;

        r = read_line(c, &resp);
        if (r < 0) {
            fprintf(stderr, "sandboxctl: reading the reply to %s: %s\n", method,
                    r == -ECONNRESET ? "connection closed by the daemon" : strerror(-r));
            return r;
        }
        o = json_tokener_parse(resp);
        if (!o || !json_object_is_type(o, json_type_object)) {
            fprintf(stderr, "sandboxctl: the daemon sent something that is not JSON-RPC\n");
            return -EBADMSG;
        }
        /* Server notifications (e.g. exec.output) carry a method and no id. */
        if (json_object_object_get_ex(o, "method", &m))
            continue;
        err = NULL;
        if (json_object_object_get_ex(o, "error", &err) && err) {
            json_object *code = NULL, *msg = NULL, *data = NULL, *reason = NULL;

            json_object_object_get_ex(err, "code", &code);
            json_object_object_get_ex(err, "message", &msg);
            json_object_object_get_ex(err, "data", &data);
            if (data)
                json_object_object_get_ex(data, "reason", &reason);
            if (c->json)
                fprintf(stderr, "%s\n",
                        json_object_to_json_string_ext(err, JSON_C_TO_STRING_PLAIN));
            else
                fprintf(stderr, "sandboxctl: %s: %s (%d)%s%s\n", method,
                        msg ? json_object_get_string(msg) : "error",
                        code ? json_object_get_int(code) : 0, reason ? ": " : "",
                        reason ? json_object_get_string(reason) : "");
            return -EREMOTE;
        }
        if (!json_object_object_get_ex(o, "id", &rid) || json_object_get_int64(rid) != id)
            continue;
        json_object_object_get_ex(o, "result", &res);
        *ret_result = json_object_get(res);
        return 0;
    }
}

static int exit_for(int r)
{
    return r == -EREMOTE ? EXIT_RPC : 1;
}

static void print_json(json_object *o)
{
    printf("%s\n", json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN |
                                                         JSON_C_TO_STRING_NOSLASHESCAPE));
}

static void print_pretty(json_object *o)
{
    printf("%s\n",
           json_object_to_json_string_ext(o, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_SPACED |
                                                 JSON_C_TO_STRING_NOSLASHESCAPE));
}

static const char *get_str(json_object *o, const char *key)
{
    json_object *v;

    if (!o || !json_object_object_get_ex(o, key, &v) || !v)
        return "-";
    return json_object_get_string(v);
}

static void print_sandbox(json_object *sb)
{
    static const char *keys[] = {"id",        "state",    "vmid",       "node",      "hostname",
                                 "ip",        "internet", "cores",      "memory_mb", "disk_gb",
                                 "owner_uid", "labels",   "created_at", "expires_at"};

    for (size_t i = 0; i < ELEMENTSOF(keys); i++)
        printf("%-11s %s\n", keys[i], get_str(sb, keys[i]));
}

/* Runs `method` with params and prints the result: raw JSON with --json, else
 * through `human` (pretty JSON when NULL). */
static int run_simple(struct ctl *c, const char *method, json_object *params,
                      void (*human)(json_object *))
{
    _cleanup_json_ json_object *res = NULL;
    int r;

    r = ctl_call(c, method, params, &res);
    if (r < 0)
        return exit_for(r);
    if (c->json)
        print_json(res);
    else if (human)
        human(res);
    else
        print_pretty(res);
    return 0;
}

static void print_status(json_object *o)
{
    json_object *px = NULL, *sb = NULL;

    printf("version      %s\n", get_str(o, "version"));
    printf("uptime       %s s\n", get_str(o, "uptime_s"));
    printf("connections  %s\n", get_str(o, "connections"));
    json_object_object_get_ex(o, "sandboxes", &sb);
    printf("sandboxes   ");
    if (sb && json_object_object_length(sb) > 0) {
        json_object_object_foreach(sb, k, v) printf(" %s=%s", k, json_object_get_string(v));
    } else
        printf(" none");
    printf("\n");
    json_object_object_get_ex(o, "proxmox", &px);
    {
        json_object *reach = NULL;

        if (px)
            json_object_object_get_ex(px, "reachable", &reach);
        printf("proxmox      %s (%s)\n",
               !reach                           ? "reachability unknown"
               : json_object_get_boolean(reach) ? "reachable"
                                                : "unreachable",
               get_str(px, "last_error"));
    }
}

static void print_list(json_object *o)
{
    json_object *l = NULL;

    json_object_object_get_ex(o, "sandboxes", &l);
    printf("%-20s %-10s %-15s %-8s %s\n", "ID", "STATE", "IP", "INTERNET", "EXPIRES");
    for (size_t i = 0; l && i < json_object_array_length(l); i++) {
        json_object *sb = json_object_array_get_idx(l, i);

        printf("%-20s %-10s %-15s %-8s %s\n", get_str(sb, "id"), get_str(sb, "state"),
               get_str(sb, "ip"), get_str(sb, "internet"), get_str(sb, "expires_at"));
    }
}

static void print_destroyed(json_object *o)
{
    printf("%s %s\n", get_str(o, "id"), get_str(o, "state"));
}

static int parse_int(const char *s, const char *what, int64_t min, int64_t max, int64_t *ret)
{
    char *end;
    long long x;

    errno = 0;
    x = strtoll(s, &end, 10);
    if (!s[0] || *end || errno || x < min || x > max) {
        fprintf(stderr, "sandboxctl: %s: '%s' is not a number in %lld..%lld\n", what, s,
                (long long)min, (long long)max);
        return -EINVAL;
    }
    *ret = x;
    return 0;
}

static json_object *id_params(const char *id)
{
    json_object *p = json_object_new_object();

    json_object_object_add(p, "id", json_object_new_string(id));
    return p;
}

static int cmd_create(struct ctl *c, int argc, char **argv)
{
    static const struct option opts[] = {
        {"internet", no_argument, NULL, 'i'},    {"ttl", required_argument, NULL, 't'},
        {"cores", required_argument, NULL, 'c'}, {"memory", required_argument, NULL, 'm'},
        {"disk", required_argument, NULL, 'd'},  {"hostname", required_argument, NULL, 'H'},
        {"label", required_argument, NULL, 'l'}, {},
    };
    _cleanup_json_ json_object *p = json_object_new_object();
    json_object *labels = NULL;
    int64_t x;
    int opt;

    optind = 1;
    while ((opt = getopt_long(argc, argv, "+it:c:m:d:H:l:", opts, NULL)) >= 0) {
        const char *key = NULL;

        switch (opt) {
        case 'i':
            json_object_object_add(p, "internet", json_object_new_boolean(true));
            continue;
        case 't':
            key = "ttl_s";
            break;
        case 'c':
            key = "cores";
            break;
        case 'm':
            key = "memory_mb";
            break;
        case 'd':
            key = "disk_gb";
            break;
        case 'H':
            json_object_object_add(p, "hostname", json_object_new_string(optarg));
            continue;
        case 'l': {
            char *eq = strchr(optarg, '=');

            if (!eq) {
                fprintf(stderr, "sandboxctl: --label wants key=value\n");
                return EXIT_USAGE;
            }
            if (!labels) {
                labels = json_object_new_object();
                json_object_object_add(p, "labels", labels);
            }
            *eq = '\0';
            json_object_object_add(labels, optarg, json_object_new_string(eq + 1));
            continue;
        }
        default:
            return EXIT_USAGE;
        }
        if (parse_int(optarg, key, 1, INT32_MAX, &x) < 0)
            return EXIT_USAGE;
        json_object_object_add(p, key, json_object_new_int64(x));
    }
    if (optind != argc) {
        fprintf(stderr, "sandboxctl: create takes no arguments besides options\n");
        return EXIT_USAGE;
    }
    return run_simple(c, "sandbox.create", TAKE_PTR(p), print_sandbox);
}

/* Writes decoded output data (`name` or `name_b64`) of o to fd. */
static int write_data(json_object *o, const char *name, int fd)
{
    _cleanup_free_ char *b64name = NULL;
    json_object *v;

    if (json_object_object_get_ex(o, name, &v) && v)
        return write_all(fd, json_object_get_string(v), (size_t)json_object_get_string_len(v));
    if (asprintf(&b64name, "%s_b64", name) < 0)
        return -ENOMEM;
    if (json_object_object_get_ex(o, b64name, &v) && v) {
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

static int cmd_exec(struct ctl *c, int argc, char **argv)
{
    static const struct option opts[] = {
        {"timeout", required_argument, NULL, 't'},
        {"env", required_argument, NULL, 'e'},
        {"cwd", required_argument, NULL, 'C'},
        {},
    };
    _cleanup_json_ json_object *p = NULL;
    _cleanup_json_ json_object *res = NULL;
    json_object *env = NULL, *args, *v;
    int64_t x;
    int opt, r;

    if (argc < 2) {
        fprintf(stderr, "sandboxctl: exec ID [--timeout MS] [--env K=V] [--cwd DIR] -- CMD...\n");
        return EXIT_USAGE;
    }
    p = id_params(argv[1]);
    optind = 2;
    while ((opt = getopt_long(argc, argv, "+t:e:C:", opts, NULL)) >= 0) {
        switch (opt) {
        case 't':
            if (parse_int(optarg, "--timeout", 1, INT32_MAX, &x) < 0)
                return EXIT_USAGE;
            json_object_object_add(p, "timeout_ms", json_object_new_int64(x));
            break;
        case 'e': {
            char *eq = strchr(optarg, '=');

            if (!eq) {
                fprintf(stderr, "sandboxctl: --env wants K=V\n");
                return EXIT_USAGE;
            }
            if (!env) {
                env = json_object_new_object();
                json_object_object_add(p, "env", env);
            }
            *eq = '\0';
            json_object_object_add(env, optarg, json_object_new_string(eq + 1));
            break;
        }
        case 'C':
            json_object_object_add(p, "cwd", json_object_new_string(optarg));
            break;
        default:
            return EXIT_USAGE;
        }
    }
    if (optind >= argc) {
        fprintf(stderr, "sandboxctl: exec: no command given\n");
        return EXIT_USAGE;
    }
    args = json_object_new_array();
    for (int i = optind; i < argc; i++)
        json_object_array_add(args, json_object_new_string(argv[i]));
    json_object_object_add(p, "argv", args);
    r = ctl_call(c, "sandbox.exec", TAKE_PTR(p), &res);
    if (r < 0)
        return exit_for(r);
    if (c->json) {
        print_json(res);
    } else {
        fflush(stdout);
        (void)write_data(res, "stdout", STDOUT_FILENO);
        (void)write_data(res, "stderr", STDERR_FILENO);
    }
    if (json_object_object_get_ex(res, "timed_out", &v) && json_object_get_boolean(v)) {
        fprintf(stderr, "sandboxctl: exec: timed out\n");
        return 124;
    }
    if (json_object_object_get_ex(res, "signal", &v) && v) {
        int sig = json_object_is_type(v, json_type_int) ? json_object_get_int(v) : 9;

        return 128 + (sig > 0 && sig < 128 ? sig : 9);
    }
    if (json_object_object_get_ex(res, "exit_code", &v) && v)
        return json_object_get_int(v) & 0xff;
    return 0;
}

static void print_written(json_object *o)
{
    printf("%s bytes written\n", get_str(o, "bytes"));
}

static int cmd_put(struct ctl *c, int argc, char **argv)
{
    _cleanup_close_ int fd = -1;
    _cleanup_free_ char *data = NULL;
    _cleanup_json_ json_object *p = NULL;
    struct stat st;
    size_t n = 0;

    if (argc != 4) {
        fprintf(stderr, "sandboxctl: put ID LOCAL REMOTE\n");
        return EXIT_USAGE;
    }
    fd = open(argv[2], O_RDONLY | O_CLOEXEC);
    if (fd < 0 || fstat(fd, &st) < 0) {
        fprintf(stderr, "sandboxctl: %s: %s\n", argv[2], strerror(errno));
        return 1;
    }
    if (st.st_size > (off_t)CTL_FILE_MAX) {
        fprintf(stderr, "sandboxctl: %s: larger than %u bytes\n", argv[2], CTL_FILE_MAX);
        return 1;
    }
    data = malloc((size_t)st.st_size + 1);
    if (!data)
        return 1;
    while (n < (size_t)st.st_size) {
        ssize_t k = read(fd, data + n, (size_t)st.st_size - n);

        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            break;
        n += (size_t)k;
    }
    p = id_params(argv[1]);
    json_object_object_add(p, "path", json_object_new_string(argv[3]));
    json_object_object_add(p, "mode",
                           json_object_new_string((st.st_mode & 0111) ? "0755" : "0644"));
    if (b64_object_add_data(p, "content", data, n) < 0)
        return 1;
    return run_simple(c, "file.write", TAKE_PTR(p), print_written);
}

static int cmd_get(struct ctl *c, int argc, char **argv)
{
    _cleanup_close_ int fd = -1;
    int64_t offset = 0;

    if (argc != 3 && argc != 4) {
        fprintf(stderr, "sandboxctl: get ID REMOTE [LOCAL]\n");
        return EXIT_USAGE;
    }
    if (argc == 4) {
        fd = open(argv[3], O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fd < 0) {
            fprintf(stderr, "sandboxctl: %s: %s\n", argv[3], strerror(errno));
            return 1;
        }
    }
    for (;;) {
        _cleanup_json_ json_object *res = NULL;
        json_object *p = id_params(argv[1]), *v;
        int r;

        json_object_object_add(p, "path", json_object_new_string(argv[2]));
        json_object_object_add(p, "offset", json_object_new_int64(offset));
        json_object_object_add(p, "length", json_object_new_int64(CTL_READ_CHUNK));
        r = ctl_call(c, "file.read", p, &res);
        if (r < 0)
            return exit_for(r);
        if (json_object_object_get_ex(res, "content", &v) && v)
            offset += json_object_get_string_len(v);
        else if (json_object_object_get_ex(res, "content_b64", &v) && v)
            offset += (int64_t)b64_decoded_size(json_object_get_string(v),
                                                (size_t)json_object_get_string_len(v));
        r = write_data(res, "content", fd >= 0 ? fd : STDOUT_FILENO);
        if (r < 0) {
            fprintf(stderr, "sandboxctl: writing: %s\n", strerror(-r));
            return 1;
        }
        if (!json_object_object_get_ex(res, "eof", &v) || json_object_get_boolean(v))
            return 0;
    }
}

static int cmd_call(struct ctl *c, int argc, char **argv)
{
    _cleanup_json_ json_object *res = NULL;
    json_object *params = NULL;
    int r;

    if (argc != 2 && argc != 3) {
        fprintf(stderr, "sandboxctl: call METHOD [JSON]\n");
        return EXIT_USAGE;
    }
    if (argc == 3) {
        params = json_tokener_parse(argv[2]);
        if (!params) {
            fprintf(stderr, "sandboxctl: call: params are not valid JSON\n");
            return EXIT_USAGE;
        }
    }
    r = ctl_call(c, argv[1], params, &res);
    if (r < 0)
        return exit_for(r);
    print_json(res);
    return 0;
}

static void usage(FILE *f)
{
    fprintf(f,
            "Usage: sandboxctl [--socket PATH] [--json] COMMAND ...\n\n"
            "  status                          daemon version, uptime, counts\n"
            "  create [--internet] [--ttl S] [--cores N] [--memory MB] [--disk GB]\n"
            "         [--hostname H] [--label k=v]...\n"
            "  list [--all]                    your sandboxes (admins: --all)\n"
            "  show ID\n"
            "  exec ID [--timeout MS] [--env K=V] [--cwd DIR] -- CMD...\n"
            "                                  exits with the command's status\n"
            "  put ID LOCAL REMOTE             copy a file into the sandbox\n"
            "  get ID REMOTE [LOCAL]           copy a file out (stdout without LOCAL)\n"
            "  internet ID on|off\n"
            "  renew ID TTL_S\n"
            "  destroy ID\n"
            "  ps ID                           background processes\n"
            "  start ID [--stdin] [--env K=V] [--cwd DIR] -- CMD...\n"
            "                                  start one, print its id\n"
            "  logs [-f] [--stderr] ID PROC    its output (-f: follow until it ends)\n"
            "  kill ID PROC [SIGNAL]           signal it and its tree (default SIGKILL)\n"
            "  call METHOD [JSON]              raw call, prints the raw result\n"
            "  mcp [--sandbox ID] [--default-ttl S] [--destroy-on-exit]\n"
            "                                  serve MCP (Model Context Protocol) on stdio\n\n"
            "The socket is --socket, else $SANDBOXD_SOCKET, else %s.\n",
            CONFIG_DEFAULT_SOCKET);
}

int main(int argc, char **argv)
{
    static const struct option options[] = {
        {"socket", required_argument, NULL, 's'},
        {"json", no_argument, NULL, 'j'},
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'V'},
        {},
    };
    struct ctl c = {.fd = -1};
    const char *cmd;
    int opt, r;
    int64_t x;

    c.socket = getenv("SANDBOXD_SOCKET");
    if (!c.socket || !c.socket[0])
        c.socket = CONFIG_DEFAULT_SOCKET;
    while ((opt = getopt_long(argc, argv, "+s:jhV", options, NULL)) >= 0) {
        switch (opt) {
        case 's':
            c.socket = optarg;
            break;
        case 'j':
            c.json = true;
            break;
        case 'h':
            usage(stdout);
            return 0;
        case 'V':
            printf("sandboxctl %s\n", SANDBOXD_VERSION);
            return 0;
        default:
            usage(stderr);
            return EXIT_USAGE;
        }
    }
    if (optind >= argc) {
        usage(stderr);
        return EXIT_USAGE;
    }
    cmd = argv[optind];
    argc -= optind;
    argv += optind;

    if (strcmp(cmd, "mcp") == 0)
        return mcp_main(c.socket, argc, argv);
    if ((!strstr(" status create list show exec put get internet renew destroy call ", cmd) ||
         strchr(cmd, ' ')) &&
        !ctl_process_is_command(cmd)) {
        fprintf(stderr, "sandboxctl: unknown command '%s'\n", cmd);
        usage(stderr);
        return EXIT_USAGE;
    }
    if (ctl_connect(&c) < 0)
        return 1;

    if (ctl_process_is_command(cmd)) {
        const struct ctl_ops ops = {.call = ctl_call, .json = c.json};

        r = ctl_process_command(&c, &ops, argc, argv);
    } else if (strcmp(cmd, "status") == 0 && argc == 1)
        r = run_simple(&c, "daemon.status", NULL, print_status);
    else if (strcmp(cmd, "call") == 0)
        r = cmd_call(&c, argc, argv);
    else if (strcmp(cmd, "create") == 0)
        r = cmd_create(&c, argc, argv);
    else if (strcmp(cmd, "list") == 0 && (argc == 1 || (argc == 2 && !strcmp(argv[1], "--all")))) {
        json_object *p = NULL;

        if (argc == 2) {
            p = json_object_new_object();
            json_object_object_add(p, "all", json_object_new_boolean(true));
        }
        r = run_simple(&c, "sandbox.list", p, print_list);
    } else if (strcmp(cmd, "show") == 0 && argc == 2)
        r = run_simple(&c, "sandbox.get", id_params(argv[1]), print_sandbox);
    else if (strcmp(cmd, "exec") == 0)
        r = cmd_exec(&c, argc, argv);
    else if (strcmp(cmd, "put") == 0)
        r = cmd_put(&c, argc, argv);
    else if (strcmp(cmd, "get") == 0)
        r = cmd_get(&c, argc, argv);
    else if (strcmp(cmd, "internet") == 0 && argc == 3 &&
             (!strcmp(argv[2], "on") || !strcmp(argv[2], "off"))) {
        json_object *p = id_params(argv[1]);

        json_object_object_add(p, "enabled", json_object_new_boolean(!strcmp(argv[2], "on")));
        r = run_simple(&c, "sandbox.set_internet", p, print_sandbox);
    } else if (strcmp(cmd, "renew") == 0 && argc == 3) {
        json_object *p;

        if (parse_int(argv[2], "TTL", 1, INT32_MAX, &x) < 0)
            r = EXIT_USAGE;
        else {
            p = id_params(argv[1]);
            json_object_object_add(p, "ttl_s", json_object_new_int64(x));
            r = run_simple(&c, "sandbox.renew", p, print_sandbox);
        }
    } else if (strcmp(cmd, "destroy") == 0 && argc == 2)
        r = run_simple(&c, "sandbox.destroy", id_params(argv[1]), print_destroyed);
    else {
        fprintf(stderr, "sandboxctl: wrong arguments for '%s'\n", cmd);
        usage(stderr);
        r = EXIT_USAGE;
    }
    close(c.fd);
    free(c.buf);
    return r;
}
