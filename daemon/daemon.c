/* One daemon: its parts in start order, its stop, its reload. See daemon.h. */
#include "daemon.h"

#include <assert.h>
#include <string.h>

#include "config-build.h"
#include "log.h"
#include "macro.h"
#include "methods-obs.h"
#include "methods-sandbox.h"
#include "methods-table.h"

#define COMP "main"

/* ---- the parts, in start order ---- */

static void on_server_closed(struct server *s, void *userdata);

static int server_part_start(struct daemon *d)
{
    const struct server_params p = {
        .loop = d->loop,
        .config = &d->config,
        .methods = {methods_table, d->options.test_hooks},
        .observer = &methods_obs_observer,
        .daemon = d,
    };
    const char *bad = NULL;
    int r;

    r = methods_check(methods_table, &bad);
    if (r < 0) {
        log_error(COMP, "the method table contradicts the protocol at '%s'", strna(bad));
        return r;
    }
    r = server_init(&d->server, &p);
    if (r < 0) {
        log_error(COMP, "cannot set up the server: %s", strerror(-r));
        return r;
    }
    d->server.on_closed = on_server_closed;
    d->server.userdata = d;
    if (d->options.test_hooks)
        log_warning("method", "test hooks enabled (SANDBOXD_TEST_HOOKS=1): test.sleep and "
                              "test.notify are callable");
    return 0;
}

static int sandbox_part_start(struct daemon *d)
{
    return methods_sandbox_start(&d->sandbox, d->loop, &d->config, &d->events);
}

static void sandbox_part_stop(struct daemon *d)
{
    methods_sandbox_stop(&d->sandbox);
}

static int listen_part_start(struct daemon *d)
{
    return server_listen(&d->server,
                         d->options.socket_path ? d->options.socket_path : d->config.server.socket);
}

static int watchdog_part_start(struct daemon *d)
{
    (void)watchdog_start(&d->watchdog, d->loop);
    return 0;
}

static void watchdog_part_stop(struct daemon *d)
{
    watchdog_stop(&d->watchdog);
}

/* Started top to bottom; stopped bottom to top once the server closed (the server's own
 * stop is the shutdown that closes it, its memory goes in daemon_done()). */
static const struct daemon_part {
    const char *name;
    int (*start)(struct daemon *d);
    void (*stop)(struct daemon *d); /* NULL: nothing to stop */
} parts[] = {
    {"server", server_part_start, NULL},
    {"sandbox methods", sandbox_part_start, sandbox_part_stop},
    {"listener", listen_part_start, NULL},
    {"watchdog", watchdog_part_start, watchdog_part_stop},
};

/* Stops the parts that started, in reverse order, then tells the caller. */
static void stop_parts(struct daemon *d)
{
    assert(d->n_started <= ELEMENTSOF(parts));
    while (d->n_started > 0) {
        const struct daemon_part *p = &parts[--d->n_started];

        log_debug(COMP, "stopping: %s", p->name);
        if (p->stop)
            p->stop(d);
    }
    if (d->on_stopped)
        d->on_stopped(d, d->userdata);
}

static void on_server_closed(struct server *s, void *userdata)
{
    struct daemon *d = userdata;

    assert(s == &d->server);
    stop_parts(d);
}

int daemon_start(struct daemon *d, uv_loop_t *loop, struct config *config,
                 const struct daemon_options *o)
{
    int r = 0;

    d->loop = loop;
    d->config = *config;
    *config = (struct config){};
    d->options = *o;
    d->n_started = 0;
    for (size_t i = 0; i < ELEMENTSOF(parts); i++) {
        log_debug(COMP, "starting: %s", parts[i].name);
        r = parts[i].start(d);
        if (r < 0)
            break;
        d->n_started++;
    }
    if (r < 0) {
        if (d->n_started == 0) /* no server: nothing runs on the loop */
            stop_parts(d);
        else
            daemon_shutdown(d);
        return r;
    }
    log_info(COMP, "sandboxd %s ready (Proxmox %s)", SANDBOXD_VERSION,
             d->config.proxmox.present ? "configured" : "not configured");
    notify_ready();
    notify_status("Serving on %s", d->server.socket_path);
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

/* Logs each setting of n that differs from the running c but needs a restart. */
static void reload_notices(const struct config *c, const struct config *n)
{
    if (!str_eq(n->server.socket, c->server.socket) ||
        n->server.socket_mode != c->server.socket_mode ||
        !str_eq(n->server.socket_group, c->server.socket_group))
        log_notice(COMP, "[server] socket settings changed: a restart applies them");
    if (!str_eq(n->server.state_dir, c->server.state_dir) ||
        !str_eq(n->server.admin_group, c->server.admin_group))
        log_notice(COMP, "[server] state_dir/admin_group changed: a restart applies them");
    if (n->proxmox.present != c->proxmox.present || !str_eq(n->proxmox.url, c->proxmox.url) ||
        !str_eq(n->proxmox.token_id, c->proxmox.token_id) ||
        !str_eq(n->proxmox.token_secret, c->proxmox.token_secret) ||
        !list_eq(n->proxmox.nodes, n->proxmox.n_nodes, c->proxmox.nodes, c->proxmox.n_nodes) ||
        n->proxmox.template_vmid != c->proxmox.template_vmid ||
        !str_eq(n->proxmox.pool, c->proxmox.pool) ||
        !str_eq(n->proxmox.storage, c->proxmox.storage) ||
        n->proxmox.full_clone != c->proxmox.full_clone ||
        n->proxmox.vmid_min != c->proxmox.vmid_min || n->proxmox.vmid_max != c->proxmox.vmid_max ||
        !str_eq(n->proxmox.ca_file, c->proxmox.ca_file) ||
        !str_eq(n->proxmox.fingerprint, c->proxmox.fingerprint) ||
        n->proxmox.tls_verify != c->proxmox.tls_verify ||
        !str_eq(n->proxmox.internet_group, c->proxmox.internet_group))
        log_notice(COMP, "[proxmox] changed: a restart applies it");
    if (!str_eq(n->ssh.user, c->ssh.user) || !str_eq(n->ssh.key, c->ssh.key) ||
        !list_eq(n->ssh.template_host_keys, n->ssh.n_template_host_keys, c->ssh.template_host_keys,
                 c->ssh.n_template_host_keys) ||
        n->ssh.rekey != c->ssh.rekey || n->ssh.connect_timeout_ms != c->ssh.connect_timeout_ms ||
        n->ssh.sessions_per_sandbox != c->ssh.sessions_per_sandbox ||
        n->ssh.file_workers != c->ssh.file_workers)
        log_notice(COMP, "[ssh] changed: a restart applies it");
    if (n->network.static_mode != c->network.static_mode || n->network.first != c->network.first ||
        n->network.last != c->network.last || n->network.prefix != c->network.prefix ||
        n->network.gateway != c->network.gateway || !str_eq(n->network.dns, c->network.dns) ||
        n->network.probe_ip != c->network.probe_ip ||
        n->network.probe_port != c->network.probe_port ||
        n->network.lan_probe_ip != c->network.lan_probe_ip ||
        n->network.lan_probe_port != c->network.lan_probe_port ||
        n->proxmox.firewall_period_s != c->proxmox.firewall_period_s)
        log_notice(COMP, "[network] or firewall_period_s changed: a restart applies it");
    if (!config_templates_equal(n, c))
        log_notice(COMP, "[templates] changed: a restart applies it");
    if (!str_eq(n->forward.socket_dir, c->forward.socket_dir))
        log_notice(COMP, "[forward] socket_dir changed: a restart applies it");
    if (n->preview.listen_ip != c->preview.listen_ip ||
        n->preview.listen_port != c->preview.listen_port ||
        !str_eq(n->preview.base_url, c->preview.base_url) ||
        !str_eq(n->preview.secret_file, c->preview.secret_file) ||
        !str_eq(n->preview.tls_certificate, c->preview.tls_certificate) ||
        !str_eq(n->preview.tls_key, c->preview.tls_key))
        log_notice(COMP, "[preview] listen, base_url, secret_file or TLS changed: a restart "
                         "applies it");
    if (n->egress.listen_ip != c->egress.listen_ip ||
        n->egress.listen_port != c->egress.listen_port)
        log_notice(COMP, "[egress] listen changed: a restart applies it");
}

/* SIGHUP: caps, limits and the log level change live; the socket, the state folder,
 * Proxmox, SSH and the secrets need a restart. */
void daemon_reload(struct daemon *d, struct config *n)
{
    struct config *c = &d->config;

    reload_notices(c, n);
    c->server.max_connections = n->server.max_connections;
    c->server.max_connections_per_uid = n->server.max_connections_per_uid;
    c->server.max_request_bytes = n->server.max_request_bytes; /* for new connections */
    c->server.max_inflight_per_connection = n->server.max_inflight_per_connection;
    c->server.memory_budget = n->server.memory_budget;
    c->server.log_level = n->server.log_level;
    c->sandbox = n->sandbox;
    c->forward.max_per_sandbox = n->forward.max_per_sandbox; /* checked per forward */
    c->forward.max_per_uid = n->forward.max_per_uid;
    c->forward.max_connections = n->forward.max_connections; /* per connection accepted */
    c->forward.buffer_bytes = n->forward.buffer_bytes;
    c->preview.max_per_sandbox = n->preview.max_per_sandbox; /* checked per preview */
    c->preview.max_per_uid = n->preview.max_per_uid;
    c->preview.default_ttl_s = n->preview.default_ttl_s;
    c->preview.max_ttl_s = n->preview.max_ttl_s;
    c->preview.header_timeout_ms = n->preview.header_timeout_ms; /* per connection */
    c->preview.max_pending = n->preview.max_pending;
    c->preview.max_connections = n->preview.max_connections;
    c->egress.max_connections = n->egress.max_connections; /* for new connections */
    c->egress.header_timeout_ms = n->egress.header_timeout_ms;
    c->egress.idle_timeout_s = n->egress.idle_timeout_s;
    c->proxmox.max_per_node = n->proxmox.max_per_node; /* placement reads them per create */
    c->proxmox.node_param = n->proxmox.node_param;
    c->max_templates_per_uid = n->max_templates_per_uid; /* checked per template.create */
    c->max_template_disk_gb_per_uid = n->max_template_disk_gb_per_uid;
    config_pool_move(c, n);
    methods_sandbox_reload(&d->sandbox);
    if (!d->options.log_level_forced)
        log_set_max_level(c->server.log_level);
    server_apply_limits(&d->server);
    log_info(COMP, "configuration reloaded (max_connections=%u per_uid=%u inflight=%u)",
             c->server.max_connections, c->server.max_connections_per_uid,
             c->server.max_inflight_per_connection);
    notify_ready();
    notify_status("Serving on %s", d->server.socket_path);
}

bool daemon_stopping(const struct daemon *d)
{
    return d->n_started == 0 || server_stopping(&d->server);
}

void daemon_shutdown(struct daemon *d)
{
    if (daemon_stopping(d))
        return;
    events_shutdown(&d->events); /* subscriptions end now: they would hold their connections */
    server_shutdown(&d->server);
}

void daemon_done(struct daemon *d)
{
    assert(d->n_started == 0);
    events_shutdown(&d->events);
    server_done(&d->server);
    if (d->openrpc)
        json_object_put(TAKE_PTR(d->openrpc));
    config_done(&d->config);
}
