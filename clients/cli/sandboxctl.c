/* sandboxctl: the command-line client of sandboxd (sandboxctl(1)). One connection
 * through the C client library (clients/c), one request at a time; each command is a thin
 * wrapper over one method of docs/protocol.md. Errors go to stderr with a non-zero exit status.
 * `sandboxctl mcp`, the MCP server, lives in sandboxctl-mcp.c. */
#include "macro.h"

#include <errno.h>
#include <getopt.h>
#include <json-c/json.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>

#include "config-build.h"
#include "sandboxd-client.h"
#include "sandboxctl-mcp.h"
#include "sandboxctl-obs.h"
#include "sandboxctl.h"
#include "sandboxctl-forward.h"
#include "sandboxctl-snapshot.h"
#include "sandboxctl-template.h"
#include "sandboxctl-volume.h"
#include "sandboxctl-process.h"

static const char *get_str(json_object *o, const char *key)
{
    json_object *v;

    if (!o || !json_object_object_get_ex(o, key, &v) || !v)
        return "-";
    return json_object_get_string(v);
}

static void print_sandbox(json_object *sb)
{
    static const char *keys[] = {
        "id",       "state",      "vmid",       "node",     "hostname",      "ip",
        "internet", "cores",      "memory_mb",  "disk_gb",  "net_rate_mbps", "owner_uid",
        "labels",   "created_at", "expires_at", "template", "env_names",     "internet_allow"};

    for (size_t i = 0; i < ELEMENTSOF(keys); i++)
        if ((strcmp(keys[i], "net_rate_mbps") != 0 && strcmp(keys[i], "internet_allow") != 0) ||
            json_object_object_get_ex(sb, keys[i], NULL))
            printf("%-11s %s\n", keys[i], get_str(sb, keys[i]));
    if (json_object_object_get_ex(sb, "effective_by", NULL)) /* sandbox.set_internet */
        printf("%-11s %s\n", "effective_by", get_str(sb, "effective_by"));
}

/* sandboxctl-call.c runs `method` the same way. */
static int run_simple(struct ctl *c, const char *method, json_object *params,
                      void (*human)(json_object *))
{
    return ctl_run(c, method, params, human);
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
    json_object_object_get_ex(o, "pool", &px);
    if (px) {
        json_object_object_foreach(px, name, t)
        {
            printf("pool         %s: %s ready of %s (filling %s, hits %s, misses %s)\n", name,
                   get_str(t, "ready"), get_str(t, "target"), get_str(t, "filling"),
                   get_str(t, "hits"), get_str(t, "misses"));
        }
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

/* destroy --no-wait ID */
static json_object *no_wait_params(const char *id)
{
    json_object *p = id_params(id);

    json_object_object_add(p, "wait", json_object_new_boolean(false));
    return p;
}

/* --label k=v, --env NAME=VALUE: one pair into the object params[name]. */
static int add_pair(json_object *params, const char *name, const char *option, char *arg)
{
    char *eq = strchr(arg, '=');
    json_object *o;

    if (!eq) {
        fprintf(stderr, "sandboxctl: %s wants key=value\n", option);
        return EXIT_USAGE;
    }
    if (!json_object_object_get_ex(params, name, &o)) {
        o = json_object_new_object();
        json_object_object_add(params, name, o);
    }
    *eq = '\0';
    json_object_object_add(o, arg, json_object_new_string(eq + 1));
    return 0;
}

static int cmd_create(struct ctl *c, int argc, char **argv)
{
    static const struct option opts[] = {
        /* clang-format off */
        {"internet", no_argument, NULL, 'i'},
        {"allow", required_argument, NULL, 'A'},
        {"ttl", required_argument, NULL, 't'},
        {"cores", required_argument, NULL, 'c'},
        {"memory", required_argument, NULL, 'm'},
        {"disk", required_argument, NULL, 'd'},
        {"net-rate", required_argument, NULL, 'R'},
        {"hostname", required_argument, NULL, 'H'},
        {"label", required_argument, NULL, 'l'},
        {"env", required_argument, NULL, 'e'},
        {"template", required_argument, NULL, 'T'},
        {"node", required_argument, NULL, 'N'},
        {"auto-pause", required_argument, NULL, 'P'},
        {"resume-on-use", no_argument, NULL, 'U'},
        {"volume", required_argument, NULL, 'V'},
        {},
        /* clang-format on */
    };
    _cleanup_json_ json_object *p = json_object_new_object();
    _cleanup_json_ json_object *allow = json_object_new_array();
    int64_t x;
    int opt;

    optind = 1;
    while ((opt = getopt_long(argc, argv, "+iA:t:c:m:d:R:H:l:e:T:N:P:UV:", opts, NULL)) >= 0) {
        const char *key = NULL;

        switch (opt) {
        case 'A': /* an allow-list entry: internet {"allow": [...]} */
            json_object_array_add(allow, json_object_new_string(optarg));
            continue;
        case 'i':
        case 'U':
            json_object_object_add(p, opt == 'i' ? "internet" : "resume_on_use",
                                   json_object_new_boolean(true));
            continue;
        case 'P':
            key = "auto_pause_s";
            break;
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
        case 'R': /* 0: no cap */
            if (parse_int(optarg, "net_rate_mbps", 0, INT32_MAX, &x) < 0)
                return EXIT_USAGE;
            json_object_object_add(p, "net_rate_mbps", json_object_new_int64(x));
            continue;
        case 'H':
            json_object_object_add(p, "hostname", json_object_new_string(optarg));
            continue;
        case 'T':
            json_object_object_add(p, "template", json_object_new_string(optarg));
            continue;
        case 'N':
            json_object_object_add(p, "node", json_object_new_string(optarg));
            continue;
        case 'V':
            if (ctl_volume_mount_arg(p, optarg) != 0)
                return EXIT_USAGE;
            continue;
        case 'l':
        case 'e':
            if (add_pair(p, opt == 'l' ? "labels" : "env", opt == 'l' ? "--label" : "--env",
                         optarg) != 0)
                return EXIT_USAGE;
            continue;
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
    if (json_object_array_length(allow) > 0) { /* replaces --internet */
        json_object *inet = json_object_new_object();

        json_object_object_add(inet, "allow", TAKE_PTR(allow));
        json_object_object_add(p, "internet", inet);
    }
    return run_simple(c, "sandbox.create", TAKE_PTR(p), print_sandbox);
}

static int cmd_resize(struct ctl *c, int argc, char **argv)
{
    static const struct option opts[] = {
        {"cores", required_argument, NULL, 'c'},
        {"memory", required_argument, NULL, 'm'},
        {"disk", required_argument, NULL, 'd'},
        {"net-rate", required_argument, NULL, 'R'},
        {},
    };
    _cleanup_json_ json_object *p = NULL;
    int64_t x;
    int opt;

    if (argc < 2 || argv[1][0] == '-') {
        fprintf(stderr, "sandboxctl: resize wants an ID\n");
        return EXIT_USAGE;
    }
    p = id_params(argv[1]);
    argc--;
    argv++;
    optind = 1;
    while ((opt = getopt_long(argc, argv, "+c:m:d:R:", opts, NULL)) >= 0) {
        const char *key = opt == 'c'   ? "cores"
                          : opt == 'm' ? "memory_mb"
                          : opt == 'd' ? "disk_gb"
                                       : "net_rate_mbps";

        if (opt != 'c' && opt != 'm' && opt != 'd' && opt != 'R')
            return EXIT_USAGE;
        if (parse_int(optarg, key, opt == 'R' ? 0 : 1, INT32_MAX, &x) < 0)
            return EXIT_USAGE;
        json_object_object_add(p, key, json_object_new_int64(x));
    }
    if (optind != argc || json_object_object_length(p) < 2) {
        fprintf(stderr,
                "sandboxctl: resize ID [--cores N] [--memory MB] [--disk GB] [--net-rate MBIT] "
                "(at least one)\n");
        return EXIT_USAGE;
    }
    return run_simple(c, "sandbox.resize", TAKE_PTR(p), print_sandbox);
}

/* daemon.metrics in the Prometheus text format (--json: the result as it came). */
static int cmd_metrics(struct ctl *c)
{
    _cleanup_json_ json_object *res = NULL;
    int r;

    r = ctl_call(c, "daemon.metrics", NULL, &res);
    if (r < 0)
        return exit_for(r);
    if (c->json) {
        print_json(res);
        return 0;
    }
    if (ctl_metrics_print(res, stdout) < 0) {
        fprintf(stderr, "sandboxctl: daemon.metrics answered in an unexpected shape\n");
        return 1;
    }
    return 0;
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
            "         [--net-rate MBIT] [--hostname H] [--label k=v]... [--env NAME=VALUE]...\n"
            "         [--volume NAME:PATH[:ro]]...\n"
            "         [--template NAME] [--node NODE] [--auto-pause S] [--resume-on-use]\n"
            "         [--allow CIDR[:PORT]|NAME]...  only these out (instead of --internet)\n"
            "  resize ID [--cores N] [--memory MB] [--disk GB] [--net-rate MBIT]\n"
            "                                  live; disks only grow\n"
            "  list [--all]                    your sandboxes (admins: --all)\n"
            "  show ID\n"
            "  exec ID [-t|--tty] [--timeout MS] [--env K=V] [--cwd DIR] [-u USER]\n"
            "       [--max-output BYTES] -- CMD...\n"
            "                                  stdin forwarded, output streamed; exits with\n"
            "                                  the command's status (-t: on a terminal)\n"
            "  put [-r] [-q] ID LOCAL|- REMOTE copy a file (-r: a folder tree) into the sandbox\n"
            "  get [-r] ID REMOTE [LOCAL|-]    copy a file (-r: a tree) out (stdout: -)\n"
            "  ls ID PATH                      list a folder\n"
            "  stat [-L] ID PATH               describe a path (-L: follow a link)\n"
            "  rm [-r] ID PATH                 remove (-r: a folder and all in it)\n"
            "  mkdir [-p] [-m MODE] ID PATH    make a folder (-p: parents, no error if there)\n"
            "  mv ID FROM TO                   rename or move\n"
            "  internet ID on|off|allow ENTRY... [--wait]\n"
            "  renew ID TTL_S\n"
            "  destroy [--no-wait] ID\n"
            "  snapshot ID NAME                snapshot the sandbox's disk\n"
            "  snapshots ID                    its snapshots, oldest first\n"
            "  rollback ID NAME                back to a snapshot (restarted, ready again)\n"
            "  snapshot-delete ID NAME         delete a snapshot\n"
            "  fork ID [--count N] [--snapshot NAME] [--ttl S]\n"
            "                                  N new sandboxes with ID's disk (1..32)\n"
            "  template list                   the templates you may use\n"
            "  template create ID NAME         the sandbox becomes template NAME (it ends)\n"
            "  template delete NAME            delete a template made from a sandbox\n"
            "  template publish NAME           let every uid use it (admins)\n"
            "  template build NAME -f FILE [--context DIR] [--internet]\n"
            "                                  a template from a Dockerfile subset\n"
            "  volume create NAME SIZE_GB      a volume that outlives sandboxes\n"
            "  volume list                     your volumes\n"
            "  volume delete NAME              delete a volume and its data\n"
            "  attach ID NAME:PATH[:ro]        mount a volume into a running sandbox\n"
            "  detach ID NAME                  take it out (the sandbox restarts)\n"
            "  pause ID                        stop it, its disk kept (processes end)\n"
            "  resume ID                       start a paused one again (ready)\n"
            "  forward ID [LOCAL:]REMOTE       relay port REMOTE of the sandbox to a private\n"
            "                                  Unix socket (LOCAL: to 127.0.0.1:LOCAL, open to\n"
            "                                  every local user) until Ctrl-C\n"
            "  preview ID PORT [--ttl S]       print a signed, expiring URL to port PORT\n"
            "  previews ID                     the sandbox's preview URLs\n"
            "  unpreview ID PREVIEW            revoke one\n"
            "  ps ID                           background processes\n"
            "  start ID [--stdin] [-t|--pty] [-a|--attach] [--env K=V] [--cwd DIR] [-u USER]\n"
            "       -- CMD...\n"
            "                                  start one, print its id (-a: attach stdin/out/err,\n"
            "                                  wait, exit with its status)\n"
            "  logs [-f] [--stderr] ID PROC    its output (-f: follow until it ends, exit with\n"
            "                                  its status)\n"
            "  kill ID PROC [SIGNAL]           signal it and its tree (default SIGKILL)\n"
            "  call METHOD [JSON]              raw call, prints the raw result\n"
            "  metrics                         daemon metrics, Prometheus text format (admins)\n"
            "  events                          print lifecycle events as they happen\n"
            "  mcp [--sandbox ID] [--default-ttl S] [--destroy-on-exit]\n"
            "                                  serve MCP (Model Context Protocol) on stdio\n\n"
            "COMMAND --help prints that command's usage and options.\n"
            "The socket is --socket, else $SANDBOXD_SOCKET, else %s.\n",
            SANDBOXD_SOCKET_DEFAULT);
}

static int ctl_call_fds_plain(struct ctl *c, const char *method, json_object *params,
                              const int *fds, size_t n_fds, json_object **ret)
{
    return ctl_call_fds(c, method, params, fds, n_fds, NULL, ret);
}

/* Runs the command cmd (argv[0]) on the connected c; returns the exit status. */
static int run_command(struct ctl *c, const char *cmd, int argc, char **argv)
{
    int64_t x;
    int r;

    if (ctl_process_is_command(cmd)) {
        const struct ctl_ops ops = {
            .call = ctl_call, .call_fds = ctl_call_fds_plain, .json = c->json};

        r = ctl_process_command(c, &ops, argc, argv);
    } else if (strcmp(cmd, "status") == 0 && argc == 1)
        r = run_simple(c, "daemon.status", NULL, print_status);
    else if (strcmp(cmd, "call") == 0)
        r = cmd_call(c, argc, argv);
    else if (strcmp(cmd, "metrics") == 0 && argc == 1)
        r = cmd_metrics(c);
    else if (strcmp(cmd, "events") == 0 && argc == 1)
        r = ctl_events_run(c->client, c->json);
    else if (strcmp(cmd, "create") == 0)
        r = cmd_create(c, argc, argv);
    else if (strcmp(cmd, "list") == 0 && (argc == 1 || (argc == 2 && !strcmp(argv[1], "--all")))) {
        json_object *p = NULL;

        if (argc == 2) {
            p = json_object_new_object();
            json_object_object_add(p, "all", json_object_new_boolean(true));
        }
        r = run_simple(c, "sandbox.list", p, print_list);
    } else if (strcmp(cmd, "show") == 0 && argc == 2)
        r = run_simple(c, "sandbox.get", id_params(argv[1]), print_sandbox);
    else if (strcmp(cmd, "exec") == 0)
        r = cmd_exec(c, argc, argv);
    else if (strcmp(cmd, "resize") == 0)
        r = cmd_resize(c, argc, argv);
    else if (strcmp(cmd, "put") == 0)
        r = cmd_put(c, argc, argv);
    else if (strcmp(cmd, "get") == 0)
        r = cmd_get(c, argc, argv);
    else if (ctl_fs_is_command(cmd))
        r = ctl_fs_main(c, argc, argv);
    else if (strcmp(cmd, "internet") == 0 && argc >= 3 &&
             (!strcmp(argv[2], "on") || !strcmp(argv[2], "off") || !strcmp(argv[2], "allow"))) {
        bool wait = !strcmp(argv[argc - 1], "--wait");
        int n = argc - 3 - wait; /* allow's entries */
        json_object *p = id_params(argv[1]), *allow = json_object_new_array();

        json_object_object_add(p, "enabled", json_object_new_boolean(strcmp(argv[2], "off") != 0));
        for (int i = 3; i < 3 + n; i++)
            json_object_array_add(allow, json_object_new_string(argv[i]));
        if (wait)
            json_object_object_add(p, "wait", json_object_new_boolean(true));
        if (strcmp(argv[2], "allow") == 0)
            json_object_object_add(p, "allow", allow);
        else
            json_object_put(allow);
        if ((strcmp(argv[2], "allow") == 0) != (n > 0)) {
            json_object_put(p);
            fprintf(stderr, "usage: sandboxctl internet ID on|off|allow ENTRY... [--wait]\n");
            r = EXIT_USAGE;
        } else
            r = run_simple(c, "sandbox.set_internet", p, print_sandbox);
    } else if (strcmp(cmd, "renew") == 0 && argc == 3) {
        json_object *p;

        if (parse_int(argv[2], "TTL", 1, INT32_MAX, &x) < 0)
            r = EXIT_USAGE;
        else {
            p = id_params(argv[1]);
            json_object_object_add(p, "ttl_s", json_object_new_int64(x));
            r = run_simple(c, "sandbox.renew", p, print_sandbox);
        }
    } else if (strcmp(cmd, "forward") == 0)
        r = cmd_forward(c, argc, argv);
    else if (strcmp(cmd, "preview") == 0)
        r = cmd_preview(c, argc, argv);
    else if (strcmp(cmd, "previews") == 0)
        r = cmd_previews(c, argc, argv);
    else if (strcmp(cmd, "unpreview") == 0)
        r = cmd_unpreview(c, argc, argv);
    else if (ctl_snapshot_is_command(cmd))
        r = ctl_snapshot_main(c, argc, argv);
    else if (strcmp(cmd, "template") == 0)
        r = ctl_template_main(c, argc, argv);
    else if (strcmp(cmd, "volume") == 0)
        r = ctl_volume_main(c, argc, argv);
    else if (strcmp(cmd, "attach") == 0 || strcmp(cmd, "detach") == 0)
        r = ctl_attach_main(c, argc, argv);
    else if (strcmp(cmd, "destroy") == 0 && argc == 2)
        r = run_simple(c, "sandbox.destroy", id_params(argv[1]), print_destroyed);
    else if (strcmp(cmd, "destroy") == 0 && argc == 3 && strcmp(argv[1], "--no-wait") == 0)
        r = run_simple(c, "sandbox.destroy", no_wait_params(argv[2]), print_destroyed);
    else {
        fprintf(stderr, "sandboxctl: wrong arguments for '%s'\n", cmd);
        usage(stderr);
        r = EXIT_USAGE;
    }
    return r;
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
    struct ctl c = {};
    const char *cmd;
    int opt, r;

    c.socket = getenv("SANDBOXD_SOCKET");
    if (!c.socket || !c.socket[0])
        c.socket = SANDBOXD_SOCKET_DEFAULT;
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
    /* A reader that goes away is an error to report (EPIPE), never a silent death. */
    signal(SIGPIPE, SIG_IGN);
    cmd = argv[optind];
    argc -= optind;
    argv += optind;

    if (strcmp(cmd, "mcp") == 0)
        return mcp_main(c.socket, argc, argv);
    if ((!strstr(" status create list show exec put get internet renew resize destroy call metrics "
                 "events forward preview previews unpreview template volume attach detach ",
                 cmd) &&
         !ctl_fs_is_command(cmd) && !ctl_process_is_command(cmd) &&
         !ctl_snapshot_is_command(cmd)) ||
        strchr(cmd, ' ')) {
        fprintf(stderr, "sandboxctl: unknown command '%s'\n", cmd);
        usage(stderr);
        return EXIT_USAGE;
    }
    if (ctl_help_wanted(argc, argv) && ctl_help(cmd) == 0)
        return 0;
    if (sandboxd_client_new(c.socket, &c.client) < 0) {
        fprintf(stderr, "sandboxctl: out of memory\n");
        return 1;
    }
    if (sandboxd_client_connect(c.client) < 0) {
        fprintf(stderr, "sandboxctl: %s\n", sandboxd_client_error(c.client)->message);
        sandboxd_client_free(c.client);
        return 1;
    }
    r = run_command(&c, cmd, argc, argv);
    sandboxd_client_free(c.client);
    return r;
}
