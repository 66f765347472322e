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
#include "metrics.h"
#include "daemon.h"
#include "notify.h"

#define COMP "main"

/* The process: its loop, its one daemon and the signals that drive it. */
struct program {
    uv_loop_t loop;
    struct daemon daemon;
    uv_signal_t sig_term, sig_int, sig_hup;
    bool signals_open;
    const char *config_path; /* NULL: the default file, optional */
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

/* SIGHUP: the file is read again; what may change live is applied. */
static void reload(struct program *p)
{
    const char *path = p->config_path ? p->config_path : CONFIG_DEFAULT_FILE;
    struct config n;

    notify_reloading();
    log_info(COMP, "reloading '%s'", path);
    if (load_config(path, !p->config_path, false, &n) < 0) {
        log_error(COMP, "reload failed, keeping the running configuration");
        notify_ready();
        return;
    }
    daemon_reload(&p->daemon, &n);
    config_done(&n);
}

static void on_signal(uv_signal_t *h, int signum)
{
    struct program *p = h->data;

    if (signum == SIGHUP) {
        reload(p);
        return;
    }
    if (daemon_stopping(&p->daemon))
        return;
    log_info(COMP, "%s: shutting down", strsignal(signum));
    notify_stopping();
    notify_status("Shutting down");
    daemon_shutdown(&p->daemon);
}

static void open_signals(struct program *p)
{
    uv_signal_init(&p->loop, &p->sig_term);
    uv_signal_init(&p->loop, &p->sig_int);
    uv_signal_init(&p->loop, &p->sig_hup);
    p->sig_term.data = p->sig_int.data = p->sig_hup.data = p;
    p->signals_open = true;
    uv_signal_start(&p->sig_term, on_signal, SIGTERM);
    uv_signal_start(&p->sig_int, on_signal, SIGINT);
    uv_signal_start(&p->sig_hup, on_signal, SIGHUP);
}

static void close_signals(struct program *p)
{
    if (!p->signals_open)
        return;
    p->signals_open = false;
    uv_close((uv_handle_t *)&p->sig_term, NULL);
    uv_close((uv_handle_t *)&p->sig_int, NULL);
    uv_close((uv_handle_t *)&p->sig_hup, NULL);
    /* Closing the handles restored the default actions: a second SIGTERM during the
     * last loop turns must not kill the process with a signal status. */
    signal(SIGTERM, SIG_IGN);
    signal(SIGINT, SIG_IGN);
    signal(SIGHUP, SIG_IGN);
}

static void on_daemon_stopped(struct daemon *d, void *userdata)
{
    close_signals(userdata);
}

static void log_leak(uv_handle_t *h, void *arg)
{
    log_error(COMP, "handle still open at exit: %s", uv_handle_type_name(uv_handle_get_type(h)));
}

/* Serves until the daemon stopped, then releases everything. The exit status. */
static int run_until_stopped(struct program *p, int status)
{
    int r;

    uv_run(&p->loop, UV_RUN_DEFAULT);
    daemon_done(&p->daemon);
    uv_run(&p->loop, UV_RUN_DEFAULT); /* the handles daemon_done() closed */
    metrics_free();
    r = uv_loop_close(&p->loop);
    if (r < 0) {
        uv_walk(&p->loop, log_leak, NULL);
        log_error(COMP, "uv_loop_close: %s", uv_strerror(r));
    }
    if (status == 0)
        log_info(COMP, "stopped");
    return r < 0 ? 1 : status;
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
    const char *hooks = getenv("SANDBOXD_TEST_HOOKS");
    struct program p = {.daemon = {.on_stopped = on_daemon_stopped, .userdata = &p}};
    struct daemon_options o = {.test_hooks = hooks && strcmp(hooks, "1") == 0};
    struct config cfg;
    bool check_only = false;
    int opt, r, level;

    while ((opt = getopt_long(argc, argv, "c:s:l:Vh", options, NULL)) >= 0) {
        switch (opt) {
        case 'c':
            p.config_path = optarg;
            break;
        case 's':
            o.socket_path = optarg;
            break;
        case 'l':
            level = log_level_from_string(optarg);
            if (level < 0) {
                fprintf(stderr, "sandboxd: unknown log level '%s'\n", optarg);
                return 1;
            }
            log_set_max_level(level);
            o.log_level_forced = true;
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

    r = load_config(p.config_path ? p.config_path : CONFIG_DEFAULT_FILE, !p.config_path, check_only,
                    &cfg);
    if (r < 0)
        return 1;
    if (check_only) {
        config_done(&cfg);
        printf("OK\n");
        return 0;
    }
    if (!o.log_level_forced)
        log_set_max_level(cfg.server.log_level);

    /* Writes to a client that went away must fail with EPIPE, not kill us. */
    signal(SIGPIPE, SIG_IGN);
    /* libuv's thread pool keeps its own size: file calls and transfers run on the engine's
     * file pool (lib/ssh/filepool.h). */
    r = uv_loop_init(&p.loop);
    if (r < 0) {
        log_error(COMP, "uv_loop_init: %s", uv_strerror(r));
        config_done(&cfg);
        return 1;
    }
    open_signals(&p);
    r = daemon_start(&p.daemon, &p.loop, &cfg, &o);
    return run_until_stopped(&p, r < 0 ? 1 : 0);
}
