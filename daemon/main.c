/* sandboxd: serves JSON-RPC 2.0 on a Unix socket (see sandboxd(8) and docs/protocol.md). */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "config-build.h"
#include "config.h"
#include "log.h"
#include "macro.h"
#include "events.h"
#include "methods-daemon.h"
#include "methods-obs.h"
#include "methods-process.h"
#include "methods-sandbox.h"
#include "methods-table.h"
#include "methods-transfer.h"
#include "methods-test.h"
#include "notify.h"
#include "server.h"

#define COMP "main"

struct daemon {
    uv_loop_t loop;
    struct config config;
    struct server server;
    struct methods_daemon methods;
    struct watchdog watchdog;
    uv_signal_t sig_term, sig_int, sig_hup;
    bool signals_open;
    const char *config_path; /* NULL: the default file, optional */
    bool log_level_forced;
    bool socket_forced;
};

static void usage(FILE *f)
{
    fprintf(f,
            "Usage: sandboxd [OPTIONS]\n"
            "Serves ephemeral Proxmox LXC sandboxes over JSON-RPC 2.0 on a Unix socket.\n\n"
            "  -c, --config FILE      configuration file (default %s)\n"
            "  -s, --socket PATH      socket to bind (ignored under socket activation)\n"
            "  -l, --log-level LEVEL  debug|info|notice|warning|err\n"
            "      --check-config     parse and validate the configuration, then exit\n"
            "  -V, --version          print the version and exit\n"
            "  -h, --help             this help\n",
            CONFIG_DEFAULT_FILE);
}

/* Loads, validates and reads the secrets. Errors are printed, not logged as
 * events: they name the file, line and key. */
static int load_config(const char *path, bool optional, bool check_only, struct config *ret)
{
    _cleanup_free_ char *err = NULL;
    struct config c;
    int r;

    if (optional && access(path, F_OK) < 0 && errno == ENOENT) {
        r = config_init(&c);
        if (r < 0)
            return r;
        log_notice(COMP, "no configuration file '%s', using defaults (Proxmox not configured)",
                   path);
    } else {
        r = config_load(path, &c, &err);
        if (r < 0) {
            log_error(COMP, "%s", err ? err : strerror(-r));
            return r;
        }
    }
    r = config_validate(&c, &err);
    if (r == 0)
        r = config_load_secrets_full(&c, check_only, &err);
    if (r == 0 && check_only && c.proxmox.present && (!c.proxmox.token_secret || !c.ssh.key))
        fprintf(stderr,
                "note: $CREDENTIALS_DIRECTORY is unset: the secrets systemd passes as "
                "credentials ('%s', '%s') are not checked\n",
                CONFIG_CREDENTIAL_PVE_TOKEN, CONFIG_CREDENTIAL_SSH_KEY);
    if (r < 0) {
        log_error(COMP, "%s", err ? err : strerror(-r));
        config_done(&c);
        return r;
    }
    *ret = c;
    return 0;
}

static bool str_eq(const char *a, const char *b)
{
    return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

static bool list_eq(char **a, size_t na, char **b, size_t nb)
{
    if (na != nb)
        return false;
    for (size_t i = 0; i < na; i++)
        if (!str_eq(a[i], b[i]))
            return false;
    return true;
}

/* SIGHUP: caps, limits and the log level change live; the socket, the state folder,
 * Proxmox, SSH and the secrets need a restart. */
static void reload(struct daemon *d)
{
    struct config n;
    struct config *c = &d->config;
    const char *path = d->config_path ? d->config_path : CONFIG_DEFAULT_FILE;

    notify_reloading();
    log_info(COMP, "reloading '%s'", path);
    if (load_config(path, !d->config_path, false, &n) < 0) {
        log_error(COMP, "reload failed, keeping the running configuration");
        notify_ready();
        return;
    }
    if (!str_eq(n.server.socket, c->server.socket) ||
        n.server.socket_mode != c->server.socket_mode ||
        !str_eq(n.server.socket_group, c->server.socket_group))
        log_notice(COMP, "[server] socket settings changed: a restart applies them");
    if (!str_eq(n.server.state_dir, c->server.state_dir) ||
        !str_eq(n.server.admin_group, c->server.admin_group))
        log_notice(COMP, "[server] state_dir/admin_group changed: a restart applies them");
    if (n.proxmox.present != c->proxmox.present || !str_eq(n.proxmox.url, c->proxmox.url) ||
        !str_eq(n.proxmox.token_id, c->proxmox.token_id) ||
        !str_eq(n.proxmox.token_secret, c->proxmox.token_secret) ||
        !list_eq(n.proxmox.nodes, n.proxmox.n_nodes, c->proxmox.nodes, c->proxmox.n_nodes) ||
        n.proxmox.template_vmid != c->proxmox.template_vmid ||
        !str_eq(n.proxmox.pool, c->proxmox.pool) ||
        !str_eq(n.proxmox.storage, c->proxmox.storage) ||
        n.proxmox.full_clone != c->proxmox.full_clone ||
        n.proxmox.vmid_min != c->proxmox.vmid_min || n.proxmox.vmid_max != c->proxmox.vmid_max ||
        !str_eq(n.proxmox.ca_file, c->proxmox.ca_file) ||
        !str_eq(n.proxmox.fingerprint, c->proxmox.fingerprint) ||
        n.proxmox.tls_verify != c->proxmox.tls_verify ||
        !str_eq(n.proxmox.internet_group, c->proxmox.internet_group))
        log_notice(COMP, "[proxmox] changed: a restart applies it");
    if (!str_eq(n.ssh.user, c->ssh.user) || !str_eq(n.ssh.key, c->ssh.key) ||
        !list_eq(n.ssh.template_host_keys, n.ssh.n_template_host_keys, c->ssh.template_host_keys,
                 c->ssh.n_template_host_keys) ||
        n.ssh.rekey != c->ssh.rekey || n.ssh.connect_timeout_ms != c->ssh.connect_timeout_ms ||
        n.ssh.sessions_per_sandbox != c->ssh.sessions_per_sandbox)
        log_notice(COMP, "[ssh] changed: a restart applies it");
    if (n.network.static_mode != c->network.static_mode || n.network.first != c->network.first ||
        n.network.last != c->network.last || n.network.prefix != c->network.prefix ||
        n.network.gateway != c->network.gateway || !str_eq(n.network.dns, c->network.dns) ||
        n.network.probe_ip != c->network.probe_ip ||
        n.network.probe_port != c->network.probe_port ||
        n.network.lan_probe_ip != c->network.lan_probe_ip ||
        n.network.lan_probe_port != c->network.lan_probe_port ||
        n.proxmox.firewall_period_s != c->proxmox.firewall_period_s)
        log_notice(COMP, "[network] or firewall_period_s changed: a restart applies it");
    if (!config_templates_equal(&n, c))
        log_notice(COMP, "[templates] changed: a restart applies it");

    c->server.max_connections = n.server.max_connections;
    c->server.max_connections_per_uid = n.server.max_connections_per_uid;
    c->server.max_request_bytes = n.server.max_request_bytes; /* for new connections */
    c->server.max_inflight_per_connection = n.server.max_inflight_per_connection;
    c->server.log_level = n.server.log_level;
    c->sandbox = n.sandbox;
    c->proxmox.max_per_node = n.proxmox.max_per_node; /* placement reads them per create */
    c->proxmox.node_param = n.proxmox.node_param;
    config_pool_move(c, &n);
    methods_sandbox_reload();
    if (!d->log_level_forced)
        log_set_max_level(c->server.log_level);
    server_apply_limits(&d->server);
    config_done(&n);
    log_info(COMP, "configuration reloaded (max_connections=%u per_uid=%u inflight=%u)",
             c->server.max_connections, c->server.max_connections_per_uid,
             c->server.max_inflight_per_connection);
    notify_ready();
    notify_status("Serving on %s", d->server.socket_path);
}

static void on_signal(uv_signal_t *h, int signum)
{
    struct daemon *d = h->data;

    if (signum == SIGHUP) {
        reload(d);
        return;
    }
    if (server_stopping(&d->server))
        return;
    log_info(COMP, "%s: shutting down", strsignal(signum));
    notify_stopping();
    notify_status("Shutting down");
    events_shutdown(); /* subscriptions end now: they would hold their connections open */
    server_shutdown(&d->server);
}

static void close_signals(struct daemon *d)
{
    if (!d->signals_open)
        return;
    d->signals_open = false;
    uv_close((uv_handle_t *)&d->sig_term, NULL);
    uv_close((uv_handle_t *)&d->sig_int, NULL);
    uv_close((uv_handle_t *)&d->sig_hup, NULL);
    /* Closing the handles restored the default actions: a second SIGTERM during the
     * last loop turns must not kill the process with a signal status. */
    signal(SIGTERM, SIG_IGN);
    signal(SIGINT, SIG_IGN);
    signal(SIGHUP, SIG_IGN);
}

static void on_server_closed(struct server *s, void *userdata)
{
    struct daemon *d = userdata;

    watchdog_stop(&d->watchdog);
    close_signals(d);
    methods_process_stop();
    methods_table_unregister();
    methods_sandbox_stop();
}

static void log_leak(uv_handle_t *h, void *arg)
{
    log_error(COMP, "handle still open at exit: %s", uv_handle_type_name(uv_handle_get_type(h)));
}

/* Serves until the server closed, then releases everything. The exit status. */
static int run_until_stopped(struct daemon *d)
{
    int r;

    uv_run(&d->loop, UV_RUN_DEFAULT);

    server_done(&d->server);
    methods_test_unregister();
    methods_obs_unregister();
    methods_daemon_done(&d->methods);
    r = uv_loop_close(&d->loop);
    if (r < 0) {
        uv_walk(&d->loop, log_leak, NULL);
        log_error(COMP, "uv_loop_close: %s", uv_strerror(r));
    }
    config_done(&d->config);
    log_info(COMP, "stopped");
    return r < 0 ? 1 : 0;
}

/* Sets up the server and the daemon's own methods on d->loop. On failure only the
 * loop and the config are left to undo. */
static int setup_server(struct daemon *d)
{
    const char *hooks = getenv("SANDBOXD_TEST_HOOKS");
    int r;

    r = server_init(&d->server, &d->loop, &d->config);
    if (r < 0) {
        log_error(COMP, "cannot set up the server: %s", strerror(-r));
        return r;
    }
    d->server.on_closed = on_server_closed;
    d->server.userdata = d;
    r = methods_daemon_register(&d->methods, &d->server);
    if (r >= 0)
        r = methods_obs_register(&d->server, hooks && strcmp(hooks, "1") == 0);
    if (r >= 0 && hooks && strcmp(hooks, "1") == 0)
        r = methods_test_register();
    if (r < 0) {
        log_error(COMP, "cannot register the methods: %s", strerror(-r));
        methods_obs_unregister();
        methods_daemon_done(&d->methods);
        server_done(&d->server);
    }
    return r;
}

int main(int argc, char **argv)
{
    enum { OPT_CHECK_CONFIG = 0x100 };
    static const struct option options[] = {
        {"config", required_argument, NULL, 'c'},
        {"socket", required_argument, NULL, 's'},
        {"log-level", required_argument, NULL, 'l'},
        {"check-config", no_argument, NULL, OPT_CHECK_CONFIG},
        {"version", no_argument, NULL, 'V'},
        {"help", no_argument, NULL, 'h'},
        {},
    };
    struct daemon d = {};
    const char *socket_path = NULL;
    bool check_only = false;
    int opt, r, level;

    while ((opt = getopt_long(argc, argv, "c:s:l:Vh", options, NULL)) >= 0) {
        switch (opt) {
        case 'c':
            d.config_path = optarg;
            break;
        case 's':
            socket_path = optarg;
            break;
        case 'l':
            level = log_level_from_string(optarg);
            if (level < 0) {
                fprintf(stderr, "sandboxd: unknown log level '%s'\n", optarg);
                return 1;
            }
            log_set_max_level(level);
            d.log_level_forced = true;
            break;
        case OPT_CHECK_CONFIG:
            check_only = true;
            break;
        case 'V':
            printf("sandboxd %s\n", SANDBOXD_VERSION);
            return 0;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 1;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "sandboxd: unexpected argument '%s'\n", argv[optind]);
        return 1;
    }

    r = load_config(d.config_path ? d.config_path : CONFIG_DEFAULT_FILE, !d.config_path, check_only,
                    &d.config);
    if (r < 0)
        return 1;
    if (check_only) {
        config_done(&d.config);
        printf("OK\n");
        return 0;
    }
    if (!d.log_level_forced)
        log_set_max_level(d.config.server.log_level);
    if (!socket_path)
        socket_path = d.config.server.socket;

    /* Writes to a client that went away must fail with EPIPE, not kill us. */
    signal(SIGPIPE, SIG_IGN);
    /* Before the pool's first use: transfers through descriptors hold threads. */
    (void)setenv("UV_THREADPOOL_SIZE", TRANSFER_THREADPOOL_SIZE, 0);
    r = uv_loop_init(&d.loop);
    if (r < 0) {
        log_error(COMP, "uv_loop_init: %s", uv_strerror(r));
        config_done(&d.config);
        return 1;
    }
    r = setup_server(&d);
    if (r < 0) {
        (void)uv_loop_close(&d.loop);
        config_done(&d.config);
        return 1;
    }

    uv_signal_init(&d.loop, &d.sig_term);
    uv_signal_init(&d.loop, &d.sig_int);
    uv_signal_init(&d.loop, &d.sig_hup);
    d.sig_term.data = d.sig_int.data = d.sig_hup.data = &d;
    d.signals_open = true;
    uv_signal_start(&d.sig_term, on_signal, SIGTERM);
    uv_signal_start(&d.sig_int, on_signal, SIGINT);
    uv_signal_start(&d.sig_hup, on_signal, SIGHUP);

    r = methods_sandbox_start(&d.loop, &d.config, &d.methods);
    if (r >= 0)
        r = methods_table_register();
    if (r >= 0)
        r = methods_process_start();
    if (r >= 0)
        r = server_listen(&d.server, socket_path);
    if (r < 0) {
        server_shutdown(&d.server);
        close_signals(&d);
        server_done(&d.server); /* closes a half-set-up listener */
        uv_run(&d.loop, UV_RUN_DEFAULT);
        methods_obs_unregister();
        methods_daemon_done(&d.methods);
        (void)uv_loop_close(&d.loop);
        config_done(&d.config);
        return 1;
    }
    (void)watchdog_start(&d.watchdog, &d.loop);
    log_info(COMP, "sandboxd %s ready (Proxmox %s)", SANDBOXD_VERSION,
             d.config.proxmox.present ? "configured" : "not configured");
    notify_ready();
    notify_status("Serving on %s", d.server.socket_path);

    return run_until_stopped(&d);
}
