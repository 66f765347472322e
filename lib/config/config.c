#include "config-internal.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <ini.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "log.h"
#include "macro.h"
#include "preview-http.h"
#include "util.h"

enum key_type {
    KEY_STRING,   /* "" means unset (NULL) */
    KEY_PATH,     /* absolute path; "" means unset */
    KEY_UINT,     /* decimal, range min..max */
    KEY_SIZE,     /* decimal bytes, range min..max */
    KEY_MODE,     /* octal, 0..07777 */
    KEY_BOOL,     /* true/false/yes/no/1/0/on/off */
    KEY_VMID,     /* 100..999999999 */
    KEY_RANGE,    /* "A-B" vmids */
    KEY_LIST,     /* comma (or space) separated words */
    KEY_LOGLEVEL, /* debug|info|notice|warning|err */
    KEY_NETMODE,  /* static|dhcp */
    KEY_IPV4,     /* a.b.c.d (uint32_t, host order) */
    KEY_IPRANGE,  /* a.b.c.d-e.f.g.h (two uint32_t) */
    KEY_HOSTPORT, /* a.b.c.d:port (uint32_t, unsigned) */
    KEY_DNS,      /* nameserver list, normalised (char *) */
    KEY_TEMPLATE, /* VMID or VMID@node,... ([proxmox] template) */
    KEY_NODEMODE, /* admin|any|off */
};

struct key_def {
    const char *section;
    const char *name;
    enum key_type type;
    size_t offset;  /* into struct config */
    size_t offset2; /* second field: count for lists, max for ranges */
    unsigned long long min, max;
};

#define F(field) offsetof(struct config, field)
#define UINT_KEY(sec, name, field, lo, hi)                                                         \
    {                                                                                              \
        sec, name, KEY_UINT, F(field), 0, lo, hi                                                   \
    }

static const struct key_def keys[] = {
    {"server", "socket", KEY_PATH, F(server.socket), 0, 0, 0},
    {"server", "socket_mode", KEY_MODE, F(server.socket_mode), 0, 0, 07777},
    {"server", "socket_group", KEY_STRING, F(server.socket_group), 0, 0, 0},
    {"server", "admin_group", KEY_STRING, F(server.admin_group), 0, 0, 0},
    {"server", "state_dir", KEY_PATH, F(server.state_dir), 0, 0, 0},
    UINT_KEY("server", "max_connections", server.max_connections, 1, 65536),
    UINT_KEY("server", "max_connections_per_uid", server.max_connections_per_uid, 1, 65536),
    {"server", "max_request_bytes", KEY_SIZE, F(server.max_request_bytes), 0, 1024,
     256ull * 1024 * 1024},
    UINT_KEY("server", "max_inflight_per_connection", server.max_inflight_per_connection, 1, 4096),
    {"server", "memory_budget", KEY_SIZE, F(server.memory_budget), 0, 16ull * 1024 * 1024,
     64ull * 1024 * 1024 * 1024},
    {"server", "log_level", KEY_LOGLEVEL, F(server.log_level), 0, 0, 0},

    {"proxmox", "url", KEY_STRING, F(proxmox.url), 0, 0, 0},
    {"proxmox", "token_id", KEY_STRING, F(proxmox.token_id), 0, 0, 0},
    {"proxmox", "token_secret_file", KEY_PATH, F(proxmox.token_secret_file), 0, 0, 0},
    {"proxmox", "nodes", KEY_LIST, F(proxmox.nodes), F(proxmox.n_nodes), 1, CONFIG_NODES_MAX},
    {"proxmox", "template", KEY_TEMPLATE, F(proxmox.template_vmid), 0, 100, 999999999},
    {"proxmox", "pool", KEY_STRING, F(proxmox.pool), 0, 0, 0},
    {"proxmox", "storage", KEY_STRING, F(proxmox.storage), 0, 0, 0},
    {"proxmox", "full_clone", KEY_BOOL, F(proxmox.full_clone), 0, 0, 0},
    {"proxmox", "vmid_range", KEY_RANGE, F(proxmox.vmid_min), F(proxmox.vmid_max), 100, 999999999},
    {"proxmox", "ca_file", KEY_PATH, F(proxmox.ca_file), 0, 0, 0},
    {"proxmox", "fingerprint", KEY_STRING, F(proxmox.fingerprint), 0, 0, 0},
    {"proxmox", "tls_verify", KEY_BOOL, F(proxmox.tls_verify), 0, 0, 0},
    {"proxmox", "internet_group", KEY_STRING, F(proxmox.internet_group), 0, 0, 0},

    {"ssh", "user", KEY_STRING, F(ssh.user), 0, 0, 0},
    {"ssh", "key_file", KEY_PATH, F(ssh.key_file), 0, 0, 0},
    {"ssh", "template_host_key", KEY_LIST, F(ssh.template_host_keys), F(ssh.n_template_host_keys),
     0, CONFIG_HOST_KEYS_MAX},
    {"ssh", "rekey", KEY_BOOL, F(ssh.rekey), 0, 0, 0},
    {"ssh", "exec_supervisor", KEY_BOOL, F(ssh.exec_supervisor), 0, 0, 0},
    UINT_KEY("ssh", "connect_timeout_ms", ssh.connect_timeout_ms, 100, 600000),
    UINT_KEY("ssh", "file_timeout_ms", ssh.file_timeout_ms, 1000, 3600000),
    UINT_KEY("ssh", "sessions_per_sandbox", ssh.sessions_per_sandbox, 1, 16),
    UINT_KEY("ssh", "file_workers", ssh.file_workers, 2, 256),

    UINT_KEY("sandbox", "default_ttl_s", sandbox.default_ttl_s, 60, 31536000),
    UINT_KEY("sandbox", "max_ttl_s", sandbox.max_ttl_s, 60, 31536000),
    UINT_KEY("sandbox", "max_per_uid", sandbox.max_per_uid, 0, 65536),
    UINT_KEY("sandbox", "max_snapshots", sandbox.max_snapshots, 0, 64),
    UINT_KEY("sandbox", "max_paused_ttl_s", sandbox.max_paused_ttl_s, 60, 31536000),
    UINT_KEY("sandbox", "max_paused_per_uid", sandbox.max_paused_per_uid, 0, 65536),
    UINT_KEY("sandbox", "max_volumes_per_uid", sandbox.max_volumes_per_uid, 0, 4096),
    UINT_KEY("sandbox", "max_volume_gb", sandbox.max_volume_gb, 1, 1024),
    UINT_KEY("sandbox", "max_total", sandbox.max_total, 0, 65536),
    UINT_KEY("sandbox", "default_cores", sandbox.default_cores, 1, 512),
    UINT_KEY("sandbox", "default_memory_mb", sandbox.default_memory_mb, 16, 1048576),
    UINT_KEY("sandbox", "default_disk_gb", sandbox.default_disk_gb, 1, 65536),
    UINT_KEY("sandbox", "create_timeout_s", sandbox.create_timeout_s, 10, 3600),
    {"sandbox", "destroy_on_stop", KEY_BOOL, F(sandbox.destroy_on_stop), 0, 0, 0},
    UINT_KEY("sandbox", "reconcile_interval_s", sandbox.reconcile_interval_s, 1, 86400),
    UINT_KEY("sandbox", "orphan_grace_s", sandbox.orphan_grace_s, 0, 86400),
    UINT_KEY("sandbox", "max_cores", sandbox.max_cores, 1, 512),
    UINT_KEY("sandbox", "max_memory_mb", sandbox.max_memory_mb, 16, 1048576),
    UINT_KEY("sandbox", "max_disk_gb", sandbox.max_disk_gb, 1, 65536),
    UINT_KEY("sandbox", "default_net_rate_mbps", sandbox.default_net_rate_mbps, 0,
             CONFIG_NET_RATE_MBPS_MAX),
    UINT_KEY("sandbox", "max_net_rate_mbps", sandbox.max_net_rate_mbps, 0,
             CONFIG_NET_RATE_MBPS_MAX),

    UINT_KEY("proxmox", "firewall_period_s", proxmox.firewall_period_s, 1, 3600),
    UINT_KEY("proxmox", "max_per_node", proxmox.max_per_node, 0, 65536),
    UINT_KEY("proxmox", "max_calls_per_node", proxmox.max_calls_per_node, 1, 64),
    {"proxmox", "node_param", KEY_NODEMODE, F(proxmox.node_param), 0, 0, 0},
    {"network", "mode", KEY_NETMODE, F(network.static_mode), 0, 0, 0},
    {"network", "addresses", KEY_IPRANGE, F(network.first), F(network.last), 0, 0},
    UINT_KEY("network", "prefix", network.prefix, 1, 32),
    {"network", "gateway", KEY_IPV4, F(network.gateway), 0, 0, 0},
    {"network", "dns", KEY_DNS, F(network.dns), 0, 0, 0},
    {"network", "probe_address", KEY_HOSTPORT, F(network.probe_ip), F(network.probe_port), 0, 0},
    {"network", "lan_probe_address", KEY_HOSTPORT, F(network.lan_probe_ip),
     F(network.lan_probe_port), 0, 0},
    UINT_KEY("sandbox", "max_processes", sandbox.max_processes, 1, 1024),
    UINT_KEY("sandbox", "process_output_max_bytes", sandbox.process_output_max_bytes, 65536,
             1073741824),
    {"forward", "socket_dir", KEY_PATH, F(forward.socket_dir), 0, 0, 0},
    UINT_KEY("forward", "max_per_sandbox", forward.max_per_sandbox, 0, 1024),
    UINT_KEY("forward", "max_per_uid", forward.max_per_uid, 0, 65536),
    UINT_KEY("forward", "max_connections", forward.max_connections, 1, 1024),
    UINT_KEY("forward", "buffer_bytes", forward.buffer_bytes, 4096, 67108864),
    {"preview", "listen", KEY_HOSTPORT, F(preview.listen_ip), F(preview.listen_port), 0, 0},
    {"preview", "base_url", KEY_STRING, F(preview.base_url), 0, 0, 0},
    {"preview", "secret_file", KEY_PATH, F(preview.secret_file), 0, 0, 0},
    {"preview", "tls_certificate", KEY_PATH, F(preview.tls_certificate), 0, 0, 0},
    {"preview", "tls_key", KEY_PATH, F(preview.tls_key), 0, 0, 0},
    UINT_KEY("preview", "max_per_sandbox", preview.max_per_sandbox, 0, 1024),
    UINT_KEY("preview", "max_per_uid", preview.max_per_uid, 0, 65536),
    UINT_KEY("preview", "default_ttl_s", preview.default_ttl_s, 1, 31536000),
    UINT_KEY("preview", "max_ttl_s", preview.max_ttl_s, 1, 31536000),
    UINT_KEY("preview", "header_timeout_ms", preview.header_timeout_ms, 100, 600000),
    UINT_KEY("preview", "max_pending", preview.max_pending, 1, 65536),
    UINT_KEY("preview", "max_connections", preview.max_connections, 1, 1024),
    {"egress", "listen", KEY_HOSTPORT, F(egress.listen_ip), F(egress.listen_port), 0, 0},
    UINT_KEY("egress", "max_connections", egress.max_connections, 1, 1024),
    UINT_KEY("egress", "header_timeout_ms", egress.header_timeout_ms, 100, 600000),
    UINT_KEY("egress", "idle_timeout_s", egress.idle_timeout_s, 1, 86400),
};

#define N_KEYS ELEMENTSOF(keys)

static const char *known_sections[] = {"server", "proxmox", "ssh",     "sandbox", "templates",
                                       "pool",   "network", "forward", "preview", "egress"};
/* Keys of [templates] and [pool] other than the operator's template names. */
static const char *const dynamic_keys[] = {"templates.default", "templates.max_templates_per_uid",
                                           "templates.max_template_disk_gb_per_uid", "pool.warm",
                                           "pool.max_filling"};

struct parse_state {
    struct config *config;
    char *error; /* first error (without file:line, added by config_load) */
    bool seen[N_KEYS];
};

static void set_error(char **err, const char *fmt, ...) _printf_(2, 3);
static void set_error(char **err, const char *fmt, ...)
{
    va_list ap;

    if (*err)
        return; /* keep the first */
    va_start(ap, fmt);
    if (vasprintf(err, fmt, ap) < 0)
        *err = NULL;
    va_end(ap);
}

static int parse_bool(const char *v)
{
    static const char *yes[] = {"true", "yes", "on", "1"};
    static const char *no[] = {"false", "no", "off", "0"};

    for (size_t i = 0; i < ELEMENTSOF(yes); i++) {
        if (strcasecmp(v, yes[i]) == 0)
            return 1;
        if (strcasecmp(v, no[i]) == 0)
            return 0;
    }
    return -EINVAL;
}

static bool printable(const char *v)
{
    for (const unsigned char *p = (const unsigned char *)v; *p; p++)
        if (*p < 0x20 || *p == 0x7f)
            return false;
    return true;
}

static int set_string_key(struct parse_state *st, const struct key_def *k, const char *v,
                          char **field)
{
    char *s = NULL;

    if (!printable(v)) {
        set_error(&st->error, "control characters in value");
        return -EINVAL;
    }
    if (k->type == KEY_PATH && v[0] && v[0] != '/') {
        set_error(&st->error, "not an absolute path: '%s'", v);
        return -EINVAL;
    }
    if (k->type == KEY_PATH && strlen(v) >= PATH_MAX) {
        set_error(&st->error, "path too long");
        return -EINVAL;
    }
    if (v[0]) {
        s = strdup(v);
        if (!s)
            return -ENOMEM;
    }
    free(*field);
    *field = s;
    return 0;
}

static int set_range_key(struct parse_state *st, const struct key_def *k, const char *v,
                         uint32_t *ret_a, uint32_t *ret_b)
{
    unsigned long long a, b;
    _cleanup_free_ char *copy = strdup(v);
    char *dash;

    if (!copy)
        return -ENOMEM;
    dash = strchr(copy, '-');
    if (dash)
        *dash = '\0';
    if (!dash || config_parse_uint(copy, &a) < 0 || config_parse_uint(dash + 1, &b) < 0 || a > b ||
        a < k->min || b > k->max) {
        set_error(&st->error, "'%s' is not a range A-B with %llu <= A <= B <= %llu", v, k->min,
                  k->max);
        return -EINVAL;
    }
    *ret_a = (uint32_t)a;
    *ret_b = (uint32_t)b;
    return 0;
}

static int set_list_key(struct parse_state *st, const struct key_def *k, const char *v,
                        char ***field, size_t *count)
{
    char **l = NULL;
    size_t n = 0;
    int r;

    if (!printable(v)) {
        set_error(&st->error, "control characters in value");
        return -EINVAL;
    }
    r = config_split_list(v, k->max, &l, &n);
    if (r == -ENOMEM)
        return r;
    if (r < 0 || n < k->min) {
        set_error(&st->error, "expected %llu to %llu comma-separated entries", k->min, k->max);
        return -EINVAL;
    }
    config_free_list(*field, *count);
    *field = l;
    *count = n;
    return 0;
}

static int set_cluster_key(struct parse_state *st, const struct key_def *k, const char *v,
                           char *base);

static int set_network_key(struct parse_state *st, const struct key_def *k, const char *v,
                           char *base)
{
    char *dns = NULL;
    int r;

    switch (k->type) {
    case KEY_NETMODE:
        r = config_network_mode(v, (bool *)(base + k->offset));
        if (r < 0)
            set_error(&st->error, "'%s' is not static or dhcp", v);
        return r;
    case KEY_IPV4:
        r = config_network_ipv4(v, (uint32_t *)(base + k->offset));
        if (r < 0)
            set_error(&st->error, "'%s' is not an IPv4 address", v);
        return r;
    case KEY_IPRANGE:
        r = config_network_range(v, (uint32_t *)(base + k->offset),
                                 (uint32_t *)(base + k->offset2));
        if (r == -EINVAL)
            set_error(&st->error, "'%s' is not a range FIRST-LAST of at most %u IPv4 addresses", v,
                      CONFIG_NETWORK_RANGE_MAX);
        return r;
    case KEY_HOSTPORT:
        r = config_network_hostport(v, (uint32_t *)(base + k->offset),
                                    (unsigned *)(base + k->offset2));
        if (r == -EINVAL)
            set_error(&st->error, "'%s' is not IPv4:PORT", v);
        return r;
    default:
        r = config_network_dns(v, &dns);
        if (r == -EINVAL)
            set_error(&st->error, "'%s' is not 1 to %d IPv4 addresses", v, CONFIG_NETWORK_DNS_MAX);
        if (r < 0)
            return r;
        free(*(char **)(base + k->offset));
        *(char **)(base + k->offset) = dns;
        return 0;
    }
}

static int set_key(struct parse_state *st, const struct key_def *k, const char *v)
{
    char *base = (char *)st->config;
    const char *bad = NULL;
    unsigned long long x;
    unsigned long m;
    char *end;
    int r;

    switch (k->type) {
    case KEY_STRING:
    case KEY_PATH:
        return set_string_key(st, k, v, (char **)(base + k->offset));
    case KEY_UINT:
    case KEY_SIZE:
    case KEY_VMID:
        r = config_parse_uint(v, &x);
        if (r < 0 || x < k->min || x > k->max) {
            set_error(&st->error, "'%s' is not a number in %llu..%llu", v, k->min, k->max);
            return -EINVAL;
        }
        if (k->type == KEY_SIZE)
            *(size_t *)(base + k->offset) = (size_t)x;
        else if (k->type == KEY_VMID)
            *(uint32_t *)(base + k->offset) = (uint32_t)x;
        else
            *(unsigned *)(base + k->offset) = (unsigned)x;
        return 0;
    case KEY_MODE:
        errno = 0;
        m = strtoul(v, &end, 8);
        if (!v[0] || !isdigit((unsigned char)v[0]) || *end || errno || m > k->max)
            bad = "an octal file mode (e.g. 0660)";
        else
            *(mode_t *)(base + k->offset) = (mode_t)m;
        break;
    case KEY_LOGLEVEL:
        r = log_level_from_string(v);
        if (r < 0)
            bad = "a log level (debug|info|notice|warning|err)";
        else
            *(int *)(base + k->offset) = r;
        break;
    case KEY_BOOL:
        r = parse_bool(v);
        if (r < 0)
            bad = "a boolean (true/false)";
        else
            *(bool *)(base + k->offset) = r;
        break;
    case KEY_RANGE:
        return set_range_key(st, k, v, (uint32_t *)(base + k->offset),
                             (uint32_t *)(base + k->offset2));
    case KEY_LIST:
        return set_list_key(st, k, v, (char ***)(base + k->offset), (size_t *)(base + k->offset2));
    case KEY_NETMODE:
    case KEY_IPV4:
    case KEY_IPRANGE:
    case KEY_HOSTPORT:
    case KEY_DNS:
        return set_network_key(st, k, v, base);
    case KEY_TEMPLATE:
    case KEY_NODEMODE:
        return set_cluster_key(st, k, v, base);
    default:
        return -EINVAL;
    }
    if (bad) {
        set_error(&st->error, "'%s' is not %s", v, bad);
        return -EINVAL;
    }
    return 0;
}

/* [proxmox] template and node_param. */
static int set_cluster_key(struct parse_state *st, const struct key_def *k, const char *v,
                           char *base)
{
    struct config_proxmox *px = &st->config->proxmox;
    static const char *const modes[] = {[CONFIG_NODE_PARAM_ADMIN] = "admin",
                                        [CONFIG_NODE_PARAM_ANY] = "any",
                                        [CONFIG_NODE_PARAM_OFF] = "off"};
    struct config_template_copy *copies = NULL;
    char *msg = NULL;
    size_t n = 0;
    uint32_t vmid;
    int r;

    if (k->type == KEY_NODEMODE) {
        for (size_t i = 0; i < ELEMENTSOF(modes); i++)
            if (strcmp(v, modes[i]) == 0) {
                *(enum config_node_param *)(base + k->offset) = (enum config_node_param)i;
                return 0;
            }
        set_error(&st->error, "'%s' is not admin, any or off", v);
        return -EINVAL;
    }
    r = config_template_spec_parse(v, &vmid, &copies, &n, &msg);
    if (r < 0) {
        if (r == -EINVAL)
            set_error(&st->error, "%s", msg ? msg : "bad template");
        free(msg);
        return r;
    }
    config_template_copies_free(px->template_copies, px->n_template_copies);
    px->template_vmid = vmid;
    px->template_copies = copies;
    px->n_template_copies = n;
    return 0;
}

/* libinih handler: returns nonzero on success. Only the first error is kept;
 * ini_parse*() reports the line of the first failing call. */
static int handler(void *user, const char *section, const char *name, const char *value)
{
    struct parse_state *st = user;
    bool section_known = false;
    int r;

    if (st->error)
        return 0;
    for (size_t i = 0; i < ELEMENTSOF(known_sections); i++)
        if (strcmp(section, known_sections[i]) == 0)
            section_known = true;
    if (!section_known) {
        if (section[0])
            set_error(&st->error, "[%s] %s: unknown section '%s'", section, name, section);
        else
            set_error(&st->error, "%s: key outside of any section", name);
        return 0;
    }
    if (strcmp(section, "proxmox") == 0)
        st->config->proxmox.present = true;
    r = config_dynamic_key(st->config, section, name, value, &st->error);
    if (r <= 0) {
        if (r < 0 && st->error) {
            char *m = NULL;

            if (asprintf(&m, "[%s] %s: %s", section, name, st->error) >= 0) {
                free(st->error);
                st->error = m;
            }
        } else if (r < 0)
            set_error(&st->error, "[%s] %s: %s", section, name, strerror(-r));
        return r == 0;
    }
    for (size_t i = 0; i < N_KEYS; i++) {
        if (strcmp(keys[i].section, section) != 0 || strcmp(keys[i].name, name) != 0)
            continue;
        if (st->seen[i]) {
            set_error(&st->error, "[%s] %s: key given twice", section, name);
            return 0;
        }
        st->seen[i] = true;
        r = set_key(st, &keys[i], value);
        if (r < 0) {
            if (st->error) {
                /* Prefix the message with the key. */
                char *m = NULL;

                if (asprintf(&m, "[%s] %s: %s", section, name, st->error) >= 0) {
                    free(st->error);
                    st->error = m;
                }
            } else
                set_error(&st->error, "[%s] %s: %s", section, name, strerror(-r));
            return 0;
        }
        return 1;
    }
    set_error(&st->error, "[%s] %s: unknown key '%s'", section, name, name);
    return 0;
}

int config_init(struct config *c)
{
    *c = (struct config){
        .max_templates_per_uid = CONFIG_DEFAULT_MAX_TEMPLATES_PER_UID,
        .max_template_disk_gb_per_uid = CONFIG_DEFAULT_MAX_TEMPLATE_DISK_GB_PER_UID,
        .server =
            {
                .socket = strdup(CONFIG_DEFAULT_SOCKET),
                .socket_mode = CONFIG_DEFAULT_SOCKET_MODE,
                .socket_group = strdup(CONFIG_DEFAULT_SOCKET_GROUP),
                .admin_group = strdup(CONFIG_DEFAULT_ADMIN_GROUP),
                .state_dir = strdup(CONFIG_DEFAULT_STATE_DIR),
                .max_connections = CONFIG_DEFAULT_MAX_CONNECTIONS,
                .max_connections_per_uid = CONFIG_DEFAULT_MAX_CONNECTIONS_PER_UID,
                .max_request_bytes = CONFIG_DEFAULT_MAX_REQUEST_BYTES,
                .memory_budget = CONFIG_DEFAULT_MEMORY_BUDGET,
                .max_inflight_per_connection = CONFIG_DEFAULT_MAX_INFLIGHT,
                .log_level = CONFIG_DEFAULT_LOG_LEVEL,
            },
        .proxmox =
            {
                .vmid_min = CONFIG_DEFAULT_VMID_MIN,
                .vmid_max = CONFIG_DEFAULT_VMID_MAX,
                .tls_verify = true,
                .internet_group = strdup(CONFIG_DEFAULT_INTERNET_GROUP),
                .firewall_period_s = CONFIG_DEFAULT_FIREWALL_PERIOD_S,
                .max_calls_per_node = CONFIG_DEFAULT_MAX_CALLS_PER_NODE,
            },
        .ssh =
            {
                .user = strdup(CONFIG_DEFAULT_SSH_USER),
                .connect_timeout_ms = CONFIG_DEFAULT_SSH_CONNECT_TIMEOUT_MS,
                .file_timeout_ms = CONFIG_DEFAULT_SSH_FILE_TIMEOUT_MS,
                .sessions_per_sandbox = CONFIG_DEFAULT_SSH_SESSIONS,
                .file_workers = CONFIG_DEFAULT_SSH_FILE_WORKERS,
                .rekey = true,
                .exec_supervisor = true,
            },
        .sandbox =
            {
                .default_ttl_s = CONFIG_DEFAULT_TTL_S,
                .max_ttl_s = CONFIG_DEFAULT_MAX_TTL_S,
                .max_per_uid = CONFIG_DEFAULT_MAX_PER_UID,
                .max_snapshots = CONFIG_DEFAULT_MAX_SNAPSHOTS,
                .max_paused_ttl_s = CONFIG_DEFAULT_MAX_PAUSED_TTL_S,
                .max_paused_per_uid = CONFIG_DEFAULT_MAX_PAUSED_PER_UID,
                .max_volumes_per_uid = CONFIG_DEFAULT_MAX_VOLUMES_PER_UID,
                .max_volume_gb = CONFIG_DEFAULT_MAX_VOLUME_GB,
                .max_total = CONFIG_DEFAULT_MAX_TOTAL,
                .default_cores = CONFIG_DEFAULT_CORES,
                .default_memory_mb = CONFIG_DEFAULT_MEMORY_MB,
                .default_disk_gb = CONFIG_DEFAULT_DISK_GB,
                .create_timeout_s = CONFIG_DEFAULT_CREATE_TIMEOUT_S,
                .reconcile_interval_s = CONFIG_DEFAULT_RECONCILE_INTERVAL_S,
                .orphan_grace_s = CONFIG_DEFAULT_ORPHAN_GRACE_S,
                .max_cores = CONFIG_DEFAULT_MAX_CORES,
                .max_memory_mb = CONFIG_DEFAULT_MAX_MEMORY_MB,
                .max_disk_gb = CONFIG_DEFAULT_MAX_DISK_GB,
                .max_processes = CONFIG_DEFAULT_MAX_PROCESSES,
                .process_output_max_bytes = CONFIG_DEFAULT_PROCESS_OUTPUT_MAX,
            },
        .pool = {.max_filling = CONFIG_DEFAULT_POOL_MAX_FILLING},
        .forward =
            {
                .socket_dir = strdup(CONFIG_DEFAULT_FORWARD_SOCKET_DIR),
                .max_per_sandbox = CONFIG_DEFAULT_FORWARD_MAX_PER_SANDBOX,
                .max_per_uid = CONFIG_DEFAULT_FORWARD_MAX_PER_UID,
                .max_connections = CONFIG_DEFAULT_FORWARD_MAX_CONNECTIONS,
                .buffer_bytes = CONFIG_DEFAULT_FORWARD_BUFFER_BYTES,
            },
        .preview =
            {
                .max_per_sandbox = CONFIG_DEFAULT_PREVIEW_MAX_PER_SANDBOX,
                .max_per_uid = CONFIG_DEFAULT_PREVIEW_MAX_PER_UID,
                .default_ttl_s = CONFIG_DEFAULT_PREVIEW_DEFAULT_TTL_S,
                .max_ttl_s = CONFIG_DEFAULT_PREVIEW_MAX_TTL_S,
                .header_timeout_ms = CONFIG_DEFAULT_PREVIEW_HEADER_TIMEOUT_MS,
                .max_pending = CONFIG_DEFAULT_PREVIEW_MAX_PENDING,
                .max_connections = CONFIG_DEFAULT_PREVIEW_MAX_CONNECTIONS,
            },
        .egress =
            {
                .max_connections = CONFIG_DEFAULT_EGRESS_MAX_CONNECTIONS,
                .header_timeout_ms = CONFIG_DEFAULT_EGRESS_HEADER_TIMEOUT_MS,
                .idle_timeout_s = CONFIG_DEFAULT_EGRESS_IDLE_TIMEOUT_S,
            },
    };
    c->proxmox.nodes = calloc(1, sizeof(char *));
    if (c->proxmox.nodes) {
        c->proxmox.nodes[0] = strdup(CONFIG_DEFAULT_NODE);
        c->proxmox.n_nodes = 1;
    }
    if (!c->server.socket || !c->server.socket_group || !c->server.admin_group ||
        !c->server.state_dir || !c->forward.socket_dir || !c->proxmox.internet_group ||
        !c->ssh.user || !c->proxmox.nodes || !c->proxmox.nodes[0]) {
        config_done(c);
        return -ENOMEM;
    }
    return 0;
}

static void free_secret(char **s)
{
    if (*s) {
        explicit_bzero(*s, strlen(*s));
        free(*s);
        *s = NULL;
    }
}

void config_done(struct config *c)
{
    if (!c)
        return;
    FREE_MANY(c->file, c->server.socket, c->server.socket_group, c->server.admin_group,
              c->server.state_dir, c->proxmox.url, c->proxmox.token_id,
              c->proxmox.token_secret_file, c->proxmox.pool, c->proxmox.storage, c->proxmox.ca_file,
              c->proxmox.fingerprint, c->proxmox.internet_group, c->network.dns, c->ssh.user,
              c->ssh.key_file, c->forward.socket_dir, c->preview.base_url, c->preview.secret_file,
              c->preview.tls_certificate, c->preview.tls_key);
    free_secret(&c->proxmox.token_secret);
    free_secret(&c->ssh.key);
    config_free_list(c->proxmox.nodes, c->proxmox.n_nodes);
    config_template_copies_free(c->proxmox.template_copies, c->proxmox.n_template_copies);
    config_free_list(c->ssh.template_host_keys, c->ssh.n_template_host_keys);
    config_templates_done(c);
    *c = (struct config){};
}

int config_load(const char *path, struct config *ret, char **ret_error)
{
    struct config c;
    struct parse_state st = {.config = &c};
    _cleanup_fclose_ FILE *f = NULL;
    int line, r;

    f = fopen(path, "re");
    if (!f) {
        r = -errno;
        if (ret_error && asprintf(ret_error, "%s: cannot read: %s", path, strerror(-r)) < 0)
            *ret_error = NULL;
        return r;
    }
    r = config_init(&c);
    if (r < 0)
        return r;
    line = ini_parse_file(f, handler, &st);
    if (line != 0 || st.error) {
        if (ret_error) {
            if (line < 0)
                r = asprintf(ret_error, "%s: cannot parse", path);
            else if (st.error)
                r = asprintf(ret_error, "%s:%d: %s", path, line, st.error);
            else
                r = asprintf(ret_error, "%s:%d: syntax error (expected [section] or key = value)",
                             path, line);
            if (r < 0)
                *ret_error = NULL;
        }
        free(st.error);
        config_done(&c);
        return -EINVAL;
    }
    c.file = strdup(path);
    if (c.file && c.proxmox.template_vmid) {
        /* [proxmox] template is the template named "default", listed first. */
        _cleanup_free_ char *e = NULL;

        r = config_template_add(&c, CONFIG_DEFAULT_TEMPLATE_NAME, c.proxmox.template_vmid,
                                c.proxmox.template_copies, c.proxmox.n_template_copies, &e);
        if (r >= 0) { /* moved into the template */
            c.proxmox.template_copies = NULL;
            c.proxmox.n_template_copies = 0;
        }
        if (r < 0) {
            if (ret_error &&
                asprintf(ret_error, "%s: [proxmox] template: %s", path, e ? e : strerror(-r)) < 0)
                *ret_error = NULL;
            config_done(&c);
            return r;
        }
        struct config_template d = c.templates[c.n_templates - 1];
        memmove(c.templates + 1, c.templates, (c.n_templates - 1) * sizeof d);
        c.templates[0] = d;
    }
    if (!c.file) {
        config_done(&c);
        return -ENOMEM;
    }
    *ret = c;
    return 0;
}

/* pve-firewall's security group names: [A-Za-z][A-Za-z0-9_-]+, at most 18 characters. */
static bool security_group_name_ok(const char *s)
{
    size_t n = s ? strlen(s) : 0;

    if (n < 2 || n > 18 || !((*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z')))
        return false;
    for (size_t i = 1; i < n; i++)
        if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_", s[i]))
            return false;
    return true;
}

int config_validate(const struct config *c, char **ret_error)
{
    const char *file = c->file ? c->file : "(defaults)";
    const char *missing = NULL;
    char *err = NULL;

    if (c->sandbox.default_ttl_s > c->sandbox.max_ttl_s)
        set_error(&err, "%s: [sandbox] default_ttl_s (%u) is larger than max_ttl_s (%u)", file,
                  c->sandbox.default_ttl_s, c->sandbox.max_ttl_s);
    if (c->server.max_connections_per_uid > c->server.max_connections)
        set_error(&err,
                  "%s: [server] max_connections_per_uid (%u) is larger than max_connections (%u)",
                  file, c->server.max_connections_per_uid, c->server.max_connections);
    if (c->sandbox.max_per_uid > c->sandbox.max_total)
        set_error(&err, "%s: [sandbox] max_per_uid (%u) is larger than max_total (%u)", file,
                  c->sandbox.max_per_uid, c->sandbox.max_total);
    {
        char *nerr = config_network_check(&c->network);

        if (nerr)
            set_error(&err, "%s: %s", file, nerr);
        free(nerr);
    }
    if (c->proxmox.present) {
        if (!c->proxmox.url)
            missing = "url";
        else if (!c->proxmox.token_id)
            missing = "token_id";
        else if (c->n_templates == 0)
            missing = "template";
        else if (!c->proxmox.pool)
            missing = "pool";
        if (missing)
            set_error(&err, "%s: [proxmox] %s: required key missing", file, missing);
        if (c->proxmox.url && strncmp(c->proxmox.url, "https://", 8) != 0 &&
            strncmp(c->proxmox.url, "http://", 7) != 0)
            set_error(&err, "%s: [proxmox] url: '%s' is not an http(s):// URL", file,
                      c->proxmox.url);
        if (c->proxmox.token_id && !strchr(c->proxmox.token_id, '!'))
            set_error(&err, "%s: [proxmox] token_id: '%s' is not of the form user@realm!name", file,
                      c->proxmox.token_id);
        if (c->proxmox.n_nodes == 0)
            set_error(&err, "%s: [proxmox] nodes: at least one node is required", file);
        if (!security_group_name_ok(c->proxmox.internet_group))
            set_error(&err,
                      "%s: [proxmox] internet_group: '%s' is not a Proxmox security group name "
                      "(2 to 18 characters: a letter, then letters, digits, '-' or '_')",
                      file, c->proxmox.internet_group);
        if (c->proxmox.template_vmid >= c->proxmox.vmid_min &&
            c->proxmox.template_vmid <= c->proxmox.vmid_max)
            set_error(&err, "%s: [proxmox] template: vmid %u lies inside vmid_range", file,
                      c->proxmox.template_vmid);
    }
    if (c->sandbox.default_cores > c->sandbox.max_cores)
        set_error(&err, "%s: [sandbox] default_cores (%u) is larger than max_cores (%u)", file,
                  c->sandbox.default_cores, c->sandbox.max_cores);
    if (c->sandbox.default_memory_mb > c->sandbox.max_memory_mb)
        set_error(&err, "%s: [sandbox] default_memory_mb (%u) is larger than max_memory_mb (%u)",
                  file, c->sandbox.default_memory_mb, c->sandbox.max_memory_mb);
    if (c->sandbox.max_net_rate_mbps &&
        c->sandbox.default_net_rate_mbps > c->sandbox.max_net_rate_mbps)
        set_error(&err,
                  "%s: [sandbox] default_net_rate_mbps (%u) is larger than max_net_rate_mbps (%u)",
                  file, c->sandbox.default_net_rate_mbps, c->sandbox.max_net_rate_mbps);
    if (c->sandbox.default_disk_gb > c->sandbox.max_disk_gb)
        set_error(&err, "%s: [sandbox] default_disk_gb (%u) is larger than max_disk_gb (%u)", file,
                  c->sandbox.default_disk_gb, c->sandbox.max_disk_gb);
    if (c->preview.default_ttl_s > c->preview.max_ttl_s)
        set_error(&err, "%s: [preview] default_ttl_s (%u) is larger than max_ttl_s (%u)", file,
                  c->preview.default_ttl_s, c->preview.max_ttl_s);
    if (c->preview.listen_port && preview_base_url_check(c->preview.base_url) < 0)
        set_error(&err,
                  "%s: [preview] base_url: required with listen, as http[s]://HOST[:PORT] where "
                  "HOST holds {port} and {id} once each",
                  file);
    if (!c->preview.tls_certificate != !c->preview.tls_key)
        set_error(&err, "%s: [preview] tls_certificate and tls_key go together", file);
    if (c->egress.listen_port && c->egress.listen_ip == 0)
        set_error(&err, "%s: [egress] listen: an address the sandboxes reach, not 0.0.0.0", file);
    if (!err)
        (void)config_templates_validate(c, &err);
    if (err) {
        if (ret_error)
            *ret_error = err;
        else
            free(err);
        return -EINVAL;
    }
    return 0;
}

int config_read_secret_file(const char *path, size_t max, char **ret_data, size_t *ret_n)
{
    return read_file_flags(AT_FDCWD, path, max, READ_FILE_SECRET, ret_data, ret_n);
}

static int read_secret(const char *path, bool strip, char **ret)
{
    char *buf;
    size_t len;
    int r;

    r = config_read_secret_file(path, CONFIG_SECRET_MAX, &buf, &len);
    if (r < 0)
        return r;
    if (strlen(buf) != len) {
        explicit_bzero(buf, len);
        free(buf);
        return -EINVAL;
    }
    if (strip)
        while (len > 0 && isspace((unsigned char)buf[len - 1]))
            buf[--len] = '\0';
    if (len == 0) {
        free(buf);
        return -ENODATA;
    }
    *ret = buf;
    return 0;
}

static int load_one(const char *file, const char *key, const char *credential, bool strip,
                    bool allow_no_credentials, char **field, char **ret_error)
{
    _cleanup_free_ char *cred_path = NULL;
    const char *path = NULL;
    const char *dir;
    char *s = NULL;
    int r;

    if (*field)
        return 0;
    if (key) {
        path = key;
    } else {
        dir = getenv("CREDENTIALS_DIRECTORY");
        if ((!dir || !dir[0]) && allow_no_credentials)
            return 0;
        if (!dir || !dir[0]) {
            if (ret_error && asprintf(ret_error,
                                      "%s: no secret file configured and no credential '%s' "
                                      "($CREDENTIALS_DIRECTORY is unset)",
                                      file, credential) < 0)
                *ret_error = NULL;
            return -ENOENT;
        }
        if (asprintf(&cred_path, "%s/%s", dir, credential) < 0)
            return -ENOMEM;
        path = cred_path;
    }
    r = read_secret(path, strip, &s);
    if (r < 0) {
        if (ret_error && asprintf(ret_error, "%s: cannot read secret '%s': %s", file, path,
                                  r == -ENODATA  ? "file is empty"
                                  : r == -EINVAL ? "not a regular text file"
                                                 : strerror(-r)) < 0)
            *ret_error = NULL;
        return r;
    }
    *field = s;
    return 0;
}

int config_load_secrets(struct config *c, char **ret_error)
{
    return config_load_secrets_full(c, false, ret_error);
}

int config_load_secrets_full(struct config *c, bool allow_no_credentials, char **ret_error)
{
    const char *file = c->file ? c->file : "(defaults)";
    int r;

    if (!c->proxmox.present)
        return 0;
    r = load_one(file, c->proxmox.token_secret_file, CONFIG_CREDENTIAL_PVE_TOKEN, true,
                 allow_no_credentials, &c->proxmox.token_secret, ret_error);
    if (r < 0)
        return r;
    r = load_one(file, c->ssh.key_file, CONFIG_CREDENTIAL_SSH_KEY, false, allow_no_credentials,
                 &c->ssh.key, ret_error);
    if (r < 0) {
        free_secret(&c->proxmox.token_secret);
        return r;
    }
    return 0;
}

const char *const *config_known_keys(void)
{
    static const char *names[N_KEYS + ELEMENTSOF(dynamic_keys) + 1];
    static char buf[N_KEYS][64];

    if (!names[0]) {
        for (size_t i = 0; i < N_KEYS; i++) {
            snprintf(buf[i], sizeof buf[i], "%s.%s", keys[i].section, keys[i].name);
            names[i] = buf[i];
        }
        for (size_t i = 0; i < ELEMENTSOF(dynamic_keys); i++)
            names[N_KEYS + i] = dynamic_keys[i];
    }
    return names;
}
