/* sandboxd configuration: the INI file of sandboxd.conf(5) (docs/sandboxd.conf.5.scd),
 * parsed with libinih.
 *
 * Every section and key is known; an unknown section or key, a duplicate key or a
 * bad value is an error whose text names the file, the line and the key
 * ("/etc/sandboxd/sandboxd.conf:12: [server] max_connections: not a number in 1..65536").
 * Values are typed and range-checked here; config_validate() checks what needs
 * several keys together and the keys [proxmox] requires (only when the section is
 * present: without it the daemon serves with Proxmox "not configured").
 *
 * Secrets (the Proxmox token secret and the SSH private key) are read from the files
 * named by token_secret_file / key_file, or, when those keys are unset, from
 * $CREDENTIALS_DIRECTORY/pve-token and $CREDENTIALS_DIRECTORY/ssh-key. Never from argv
 * or the environment, and never logged. They are wiped from memory by config_done().
 *
 * Pure parsing: no loop, no logging above debug. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "config-network.h"

#define CONFIG_DEFAULT_FILE "/etc/sandboxd/sandboxd.conf"
#define CONFIG_CREDENTIAL_PVE_TOKEN "pve-token"
#define CONFIG_CREDENTIAL_SSH_KEY "ssh-key"

/* Limits on values given in the file. */
#define CONFIG_NODES_MAX 32
#define CONFIG_NODE_NAME_MAX 63 /* a Proxmox node name */
#define CONFIG_HOST_KEYS_MAX 8
#define CONFIG_SECRET_MAX (64 * 1024) /* bytes of a secret file */

/* Defaults, as documented in sandboxd.conf(5) and docs/sandboxd.conf.example. */
#define CONFIG_DEFAULT_SOCKET "/run/sandboxd.sock"
#define CONFIG_DEFAULT_SOCKET_MODE 0660
#define CONFIG_DEFAULT_SOCKET_GROUP "sandboxd"
#define CONFIG_DEFAULT_ADMIN_GROUP "sandboxd-admin"
#define CONFIG_DEFAULT_STATE_DIR "/var/lib/sandboxd"
#define CONFIG_DEFAULT_MAX_CONNECTIONS 256
#define CONFIG_DEFAULT_MAX_CONNECTIONS_PER_UID 64
#define CONFIG_DEFAULT_MAX_REQUEST_BYTES (16u * 1024 * 1024)
#define CONFIG_DEFAULT_MEMORY_BUDGET ((size_t)1024 * 1024 * 1024)
#define CONFIG_DEFAULT_MAX_INFLIGHT 32
#define CONFIG_DEFAULT_LOG_LEVEL 6 /* LOG_INFO */
#define CONFIG_DEFAULT_NODE "pve"
#define CONFIG_DEFAULT_VMID_MIN 100000
#define CONFIG_DEFAULT_MAX_CALLS_PER_NODE 4 /* Proxmox requests in flight per node */
#define CONFIG_DEFAULT_VMID_MAX 199999
#define CONFIG_DEFAULT_INTERNET_GROUP "sandbox-internet"
#define CONFIG_DEFAULT_SSH_USER "root"
#define CONFIG_DEFAULT_SSH_CONNECT_TIMEOUT_MS 10000
#define CONFIG_DEFAULT_SSH_FILE_TIMEOUT_MS 60000
#define CONFIG_DEFAULT_SSH_SESSIONS 2
#define CONFIG_DEFAULT_SSH_FILE_WORKERS 16
#define CONFIG_DEFAULT_TTL_S 3600
#define CONFIG_DEFAULT_MAX_TTL_S 86400
#define CONFIG_DEFAULT_MAX_PER_UID 16
#define CONFIG_DEFAULT_MAX_SNAPSHOTS 8
#define CONFIG_DEFAULT_MAX_PAUSED_TTL_S 604800u /* 7 days */
#define CONFIG_DEFAULT_MAX_PAUSED_PER_UID 8u
#define CONFIG_DEFAULT_MAX_VOLUMES_PER_UID 8u
#define CONFIG_DEFAULT_MAX_VOLUME_GB 64u
#define CONFIG_DEFAULT_MAX_TOTAL 256
#define CONFIG_DEFAULT_CORES 1
#define CONFIG_DEFAULT_MEMORY_MB 512
#define CONFIG_DEFAULT_DISK_GB 8
#define CONFIG_DEFAULT_CREATE_TIMEOUT_S 300
#define CONFIG_DEFAULT_RECONCILE_INTERVAL_S 60
#define CONFIG_DEFAULT_ORPHAN_GRACE_S 60
#define CONFIG_DEFAULT_MAX_CORES 16
#define CONFIG_DEFAULT_MAX_MEMORY_MB 65536
#define CONFIG_DEFAULT_MAX_DISK_GB 256
#define CONFIG_DEFAULT_MAX_TEMPLATES_PER_UID 5
#define CONFIG_DEFAULT_MAX_TEMPLATE_DISK_GB_PER_UID 64
#define CONFIG_TEMPLATES_MAX 32                /* [templates] entries */
#define CONFIG_REPLICAS_MAX 16                 /* [templates] NAME.replicas */
#define CONFIG_TEMPLATE_NAME_MAX 32            /* [a-z0-9-] */
#define CONFIG_DEFAULT_TEMPLATE_NAME "default" /* the name of [proxmox] template */
#define CONFIG_POOL_WARM_MAX 256               /* [pool] warm per template */
#define CONFIG_DEFAULT_POOL_MAX_FILLING 2
#define CONFIG_DEFAULT_MAX_PROCESSES 64
#define CONFIG_DEFAULT_PROCESS_OUTPUT_MAX (8u * 1024u * 1024u)
#define CONFIG_DEFAULT_FORWARD_SOCKET_DIR "/run/sandboxd"
#define CONFIG_DEFAULT_FORWARD_MAX_PER_SANDBOX 16
#define CONFIG_DEFAULT_FORWARD_MAX_PER_UID 64
#define CONFIG_DEFAULT_FORWARD_MAX_CONNECTIONS 64
#define CONFIG_DEFAULT_FORWARD_BUFFER_BYTES (256u * 1024u)
#define CONFIG_DEFAULT_PREVIEW_MAX_PER_SANDBOX 8
#define CONFIG_DEFAULT_PREVIEW_MAX_PER_UID 64
#define CONFIG_DEFAULT_PREVIEW_DEFAULT_TTL_S 3600
#define CONFIG_DEFAULT_PREVIEW_MAX_TTL_S 86400
#define CONFIG_DEFAULT_PREVIEW_HEADER_TIMEOUT_MS 10000
#define CONFIG_DEFAULT_PREVIEW_MAX_PENDING 256
#define CONFIG_DEFAULT_PREVIEW_MAX_CONNECTIONS 64
#define CONFIG_DEFAULT_EGRESS_MAX_CONNECTIONS 64
#define CONFIG_DEFAULT_EGRESS_HEADER_TIMEOUT_MS 10000
#define CONFIG_DEFAULT_EGRESS_IDLE_TIMEOUT_S 300

struct config_server {
    char *socket;       /* path bound when systemd passes none */
    mode_t socket_mode; /* octal in the file, e.g. 0660 */
    char *socket_group; /* NULL: leave the group alone */
    char *admin_group;  /* NULL: only root is admin */
    char *state_dir;
    unsigned max_connections;             /* 1..65536 */
    unsigned max_connections_per_uid;     /* 1..65536 */
    size_t max_request_bytes;             /* 1024..256 MiB: longest request line */
    unsigned max_inflight_per_connection; /* 1..4096 */
    size_t memory_budget;                 /* 16 MiB..64 GiB, connection buffers; 1/4 per uid */
    int log_level;                        /* syslog level; --log-level overrides */
};

/* [proxmox] node_param: who may pass sandbox.create {node}. */
enum config_node_param {
    CONFIG_NODE_PARAM_ADMIN, /* admins only (default) */
    CONFIG_NODE_PARAM_ANY,
    CONFIG_NODE_PARAM_OFF,
};

/* One copy of a template on one node ([templates] NAME = VMID@node,VMID@node). */
struct config_template_copy {
    uint32_t vmid;
    char *node;
};

struct config_proxmox {
    bool present;            /* the file has a [proxmox] section (with at least one key) */
    char *url;               /* required: https://host:port */
    char *token_id;          /* required: user@realm!tokenname */
    char *token_secret_file; /* NULL: $CREDENTIALS_DIRECTORY/pve-token */
    char *token_secret;      /* loaded by config_load_secrets(); never logged */
    char **nodes;            /* n_nodes >= 1 names */
    size_t n_nodes;
    uint32_t template_vmid;                       /* required (with copies: the first copy's) */
    struct config_template_copy *template_copies; /* VMID@node,...; moved to templates[0] */
    size_t n_template_copies;
    unsigned max_per_node;       /* 0..65536: live sandboxes per node, 0 = no cap */
    unsigned max_calls_per_node; /* 1..64: Proxmox requests in flight per node */
    enum config_node_param node_param;
    char *pool;    /* required */
    char *storage; /* NULL: same storage as the template */
    bool full_clone;
    uint32_t vmid_min; /* vmid_range = min-max, inclusive */
    uint32_t vmid_max;
    char *ca_file;     /* NULL: system CA store */
    char *fingerprint; /* NULL or SHA-256 pin "AA:BB:..." of the API certificate */
    bool tls_verify;
    char *internet_group;
    unsigned firewall_period_s; /* 1..3600: Proxmox's firewall cycle (sandbox.set_internet) */
};

struct config_ssh {
    char *user;
    char *key_file;            /* NULL: $CREDENTIALS_DIRECTORY/ssh-key */
    char *key;                 /* private key text, loaded by config_load_secrets(); never logged */
    char **template_host_keys; /* pinned fingerprints ("SHA256:..."), comma/space separated */
    size_t n_template_host_keys;
    bool rekey;
    bool exec_supervisor; /* sandbox.exec through the container's supervisor (sshexec.c) */
    unsigned connect_timeout_ms;   /* 100..600000 */
    unsigned file_timeout_ms;      /* 1000..3600000: deadline of one file.read/file.write */
    unsigned sessions_per_sandbox; /* 1..16 */
    unsigned file_workers;         /* 2..256: threads of the file pool (lib/ssh/filepool.h) */
};

struct config_sandbox {
    unsigned default_ttl_s;        /* 60..max_ttl_s */
    unsigned max_ttl_s;            /* 60..31536000 */
    unsigned max_per_uid;          /* 0..65536 */
    unsigned max_snapshots;        /* 0..64 snapshots per sandbox (0: none allowed) */
    unsigned max_paused_ttl_s;     /* 60..31536000: a paused sandbox's lease (sandbox.pause) */
    unsigned max_paused_per_uid;   /* 0..65536 paused sandboxes per uid (0: no pause) */
    unsigned max_volumes_per_uid;  /* 0..4096 volumes per uid (0: no volume.create) */
    unsigned max_volume_gb;        /* 1..1024: a volume's size_gb at most */
    unsigned max_total;            /* 0..65536 */
    unsigned default_cores;        /* 1..512 */
    unsigned default_memory_mb;    /* 16..1048576 */
    unsigned default_disk_gb;      /* 1..65536 */
    unsigned create_timeout_s;     /* 10..3600 */
    bool destroy_on_stop;          /* a clean stop destroys every sandbox (default: kept) */
    unsigned reconcile_interval_s; /* 1..86400: Proxmox pool compared with the registry */
    unsigned orphan_grace_s;       /* 0..86400: age before an unrecorded container is reaped */

    /* Background processes (process.*): running at once per sandbox (1..1024), and output
     * kept per process and stream (64 KiB..1 GiB). */
    unsigned max_processes;
    unsigned process_output_max_bytes;
    unsigned max_cores;     /* 1..512: largest cores a create or resize may ask for */
    unsigned max_memory_mb; /* 16..1048576 */
    unsigned max_disk_gb;   /* 1..65536 */
    /* Bandwidth caps in Mbit/s (net0 rate=), 0..CONFIG_NET_RATE_MBPS_MAX: the default of a
     * create that names none (0: the maximum, or none without one) and the largest a request
     * may ask for (0: no maximum, uncapped allowed). */
    unsigned default_net_rate_mbps;
    unsigned max_net_rate_mbps;
};

#define CONFIG_NET_RATE_MBPS_MAX 100000u

/* [forward]: port forwards (sandbox.forward). */
struct config_forward {
    char *socket_dir;         /* where the forwards' Unix sockets are made */
    unsigned max_per_sandbox; /* 0..1024 forwards open at once per sandbox */
    unsigned max_per_uid;     /* 0..65536 forwards open at once per caller uid */
    unsigned max_connections; /* 1..1024 relayed connections at once per forward */
    unsigned buffer_bytes;    /* 4 KiB..64 MiB buffered per connection and direction */
};

/* [preview]: preview URLs (sandbox.preview), off while listen is unset (port 0). */
struct config_preview {
    uint32_t listen_ip;    /* IPv4 of the HTTP listener (host order) */
    unsigned listen_port;  /* 0: off */
    char *base_url;        /* "http[s]://...{port}...{id}...[:PORT]" (proto/preview-http.h) */
    char *secret_file;     /* the signing key; NULL: <state_dir>/preview.key, made if missing */
    char *tls_certificate; /* PEM chain; with tls_key: the listener speaks HTTPS */
    char *tls_key;
    unsigned max_per_sandbox;   /* 0..1024 previews at once per sandbox */
    unsigned max_per_uid;       /* 0..65536 previews at once per caller uid */
    unsigned default_ttl_s;     /* 1..max_ttl_s when ttl_s is not given */
    unsigned max_ttl_s;         /* 1..31536000 */
    unsigned header_timeout_ms; /* 100..600000 to read a connection's first request head */
    unsigned max_pending;       /* 1..65536 connections whose request head is being read */
    unsigned max_connections;   /* 1..1024 relayed connections at once per preview */
};

/* [egress]: the egress proxy of allow-lists' domain names (lib/engine/egress-proxy.c), off
 * while listen is unset (port 0). */
struct config_egress {
    uint32_t listen_ip;         /* IPv4 the sandboxes' bridge reaches (host order) */
    unsigned listen_port;       /* 0: off */
    unsigned max_connections;   /* 1..1024 connections at once per sandbox */
    unsigned header_timeout_ms; /* 100..600000 for a request head and a ClientHello */
    unsigned idle_timeout_s;    /* 1..86400 without a byte either way, then closed */
};

/* A template a sandbox is cloned from: [templates] NAME = VMID, NAME.host_key = pins
 * ([proxmox] template is the one named CONFIG_DEFAULT_TEMPLATE_NAME). */
struct config_template {
    char *name;    /* [a-z0-9-], <= CONFIG_TEMPLATE_NAME_MAX */
    uint32_t vmid; /* with copies: the first copy's */
    /* VMID@node,...: a copy per node (a node without one is not eligible); NULL: one vmid,
     * on the node Proxmox lists it on (or on shared storage) */
    struct config_template_copy *copies;
    size_t n_copies;
    char **host_keys; /* NULL: [ssh] template_host_key */
    size_t n_host_keys;
    /* NAME.replicas: copies the daemon makes of it and keeps on each node holding it
     * (0..CONFIG_REPLICAS_MAX; lib/engine/replica.c) */
    unsigned replicas;
    bool replicas_set;
};

/* [pool]: containers kept ready per template (reloadable). */
struct config_pool_warm {
    char *template; /* a template's name; NULL: the default template */
    unsigned n;
};
struct config_pool {
    struct config_pool_warm *warm; /* warm = N (template NULL), warm.NAME = N */
    size_t n_warm;
    unsigned max_filling; /* 1..64: pool members created at once */
};

struct config {
    char *file; /* the file read, NULL for built-in defaults */
    struct config_server server;
    struct config_proxmox proxmox;
    struct config_ssh ssh;
    struct config_sandbox sandbox;
    struct config_network network;
    struct config_forward forward;
    struct config_preview preview;
    struct config_egress egress;
    struct config_template *templates; /* [proxmox] template first, then [templates] in order */
    size_t n_templates;
    char *default_template; /* [templates] default; NULL: "default" or the first */
    /* [templates] max_templates_per_uid: templates made from sandboxes per uid (0..1000) */
    unsigned max_templates_per_uid;
    /* [templates] max_template_disk_gb_per_uid: their disks together per uid (0..1048576) */
    unsigned max_template_disk_gb_per_uid;
    struct config_pool pool;
};

/* Fills *c with the defaults (allocates the default strings). Returns 0 or -ENOMEM. */
int config_init(struct config *c);
/* Frees what *c holds (secrets are zeroed first) and zeroes it. NULL is fine. */
void config_done(struct config *c);

/* Parses `path` over the defaults. On success fills *ret (the caller calls
 * config_done()). On failure returns a negative errno and, when ret_error is not
 * NULL, a malloc'ed message naming file, line and key (-EINVAL for bad content,
 * -ENOENT etc. when the file cannot be read). */
int config_load(const char *path, struct config *ret, char **ret_error);

/* Cross-key checks and required keys ([proxmox] url, token_id, template, pool when
 * the section is present; default_ttl_s <= max_ttl_s; vmid range; ...). Returns 0 or
 * -EINVAL with a message naming file and key. */
int config_validate(const struct config *c, char **ret_error);

/* Reads the token secret and the SSH key (only when [proxmox] is present). A
 * missing secret is -ENOENT with a message naming the file or credential looked at
 * (never the secret). Trailing whitespace of the token secret is stripped. */
int config_load_secrets(struct config *c, char **ret_error);
/* The same; with allow_no_credentials a secret that would come from an unset
 * $CREDENTIALS_DIRECTORY is left NULL instead of failing (--check-config outside
 * the service, where systemd passes the credentials only at run time). */
int config_load_secrets_full(struct config *c, bool allow_no_credentials, char **ret_error);

/* Reads a whole regular file of at most max bytes that holds a secret (a token, a
 * key), following symlinks; the result is NUL-terminated (ret_n excludes the NUL,
 * may be NULL). On failure nothing read stays in memory. -EINVAL when not a
 * regular file, -EFBIG when larger than max. */
int config_read_secret_file(const char *path, size_t max, char **ret_data, size_t *ret_n);
/* The template named name (NULL: the default one), or NULL when there is none. */
const struct config_template *config_template_find(const struct config *c, const char *name);
/* The pool target of the template named name ([pool] warm / warm.NAME), 0 when none. */
unsigned config_pool_target(const struct config *c, const char *name);
/* True when a and b list the same templates (names, vmids, host keys, the default). */
bool config_templates_equal(const struct config *a, const struct config *b);
/* Moves [pool] from src to dst (SIGHUP), freeing what dst held. */
void config_pool_move(struct config *dst, struct config *src);

/* Every "section.key" the parser knows, NULL-terminated (docs tests compare them). */
const char *const *config_known_keys(void);
